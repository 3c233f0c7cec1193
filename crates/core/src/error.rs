//! The one error type of gpuport. Every variant says what happened and, where there is
//! one, what to do next.

use std::fmt;

use crate::id::{BackendKind, DeviceId};

/// `Result` with gpuport's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One attempt to open a vendor library: the name or path tried and why it failed
/// (the loader's `dlerror` text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    /// The file name or path handed to the dynamic loader.
    pub name: String,
    /// The loader's own message for the failure.
    pub error: String,
}

impl fmt::Display for LoadAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // dlerror usually starts with the file name already: say it once.
        let error =
            self.error.strip_prefix(self.name.as_str()).and_then(|e| e.strip_prefix(": ")).unwrap_or(&self.error);
        write!(f, "{}: {error}", self.name)
    }
}

fn join_attempts(tried: &[LoadAttempt]) -> String {
    if tried.is_empty() {
        return "nothing".to_owned();
    }
    tried.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Everything that can go wrong in gpuport.
///
/// The enum is `#[non_exhaustive]`: match the variants you act on and keep a fallback arm.
///
/// `Debug` shows the message, as `io::Error` and `anyhow` do, so `fn main() ->
/// gpuport::Result<()>` and `unwrap()` print `ext:7: no such device (ext has 2
/// device(s))`; `{:#?}` adds the variant's name. The fields are there to match on.
#[derive(Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The vendor runtime library could not be opened under any of the names tried.
    #[error(
        "{backend}: runtime library not found (tried {}); install the vendor driver or set {env_var} to the library's path",
        join_attempts(tried)
    )]
    LibraryNotFound {
        /// The backend (`cuda`, `rocm`).
        backend: BackendKind,
        /// Every name tried, in order, with the loader's message.
        tried: Vec<LoadAttempt>,
        /// The variable that names an exact library file.
        env_var: &'static str,
    },

    /// The library opened but a required entry point is missing: it is not the vendor
    /// runtime, or it is too old.
    #[error(
        "{backend}: required symbol `{symbol}` missing from {library}{}; the file is not the vendor runtime or it is too old",
        driver_version.as_deref().map(|v| format!(" (driver version {v})")).unwrap_or_default()
    )]
    MissingSymbol {
        /// The backend.
        backend: BackendKind,
        /// The symbol that could not be resolved.
        symbol: String,
        /// The library that was opened.
        library: String,
        /// The driver/runtime version, when it could be read.
        driver_version: Option<String>,
    },

    /// The driver is older than the oldest one gpuport supports.
    #[error("{backend}: driver version {found} is older than the required {required}; update the driver")]
    DriverTooOld {
        /// The backend.
        backend: BackendKind,
        /// Version reported by the driver.
        found: String,
        /// Oldest supported version.
        required: String,
    },

    /// The runtime loaded but reports no usable device.
    #[error("{backend}: no device ({detail})")]
    NoDevice {
        /// The backend.
        backend: BackendKind,
        /// The vendor's own words for it (status name and message).
        detail: String,
    },

    /// A device ordinal past the number of devices.
    #[error("{device}: no such device ({} has {count} device(s))", device.kind)]
    DeviceNotFound {
        /// The device that was asked for (its `kind` is the backend).
        device: DeviceId,
        /// How many devices that backend has.
        count: u32,
    },

    /// A backend was asked for by name but is not known or not enabled.
    #[error("backend `{name}` is not available: {reason}")]
    BackendUnavailable {
        /// The name asked for.
        name: String,
        /// Why it is unavailable (the discovery reason).
        reason: String,
    },

    /// The device (or the host) could not provide the memory asked for.
    #[error("{device}: out of memory allocating {bytes} bytes; free memory or ask for less")]
    OutOfMemory {
        /// Where the allocation was attempted.
        device: DeviceId,
        /// The requested size.
        bytes: usize,
    },

    /// An argument was rejected; `what` names it and says why.
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// Which argument, and what is wrong with it.
        what: String,
    },

    /// A device selection string that does not parse.
    #[error("invalid device string {input:?}: {reason} (expected `host`, `cuda:1`, `rocm:0`, `ext:0`, …)")]
    InvalidDeviceString {
        /// The string given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A layout (shape and strides) that is inconsistent, overflows, or does not fit
    /// its buffer.
    #[error("invalid layout: {reason}")]
    InvalidLayout {
        /// What is wrong.
        reason: String,
    },

    /// A handle whose resource is gone (a destroyed stream, an unknown raw handle).
    #[error("invalid handle: {what}")]
    InvalidHandle {
        /// Which handle, and why it is invalid.
        what: String,
    },

    /// Two handles of different backends were mixed in one operation.
    #[error("backend mismatch in {operation}: it runs on {expected}, but was given a handle from {found}")]
    BackendMismatch {
        /// The operation attempted.
        operation: &'static str,
        /// What the operation takes: its backend, or a description (`host-accessible
        /// memory`, `cuda or host-accessible memory`).
        expected: String,
        /// Where the offending handle came from (a device, a backend, a kind of memory).
        found: String,
    },

    /// The backend or device does not have this feature.
    #[error("{backend}: {what} is not supported")]
    Unsupported {
        /// The backend.
        backend: BackendKind,
        /// The feature.
        what: String,
    },

    /// The work an event or stream tracks has not completed yet (e.g. elapsed time
    /// between events that have not both completed).
    #[error("not ready: {what}")]
    NotReady {
        /// What is not ready.
        what: String,
    },

    /// A vendor API call failed.
    #[error("{backend}: {call} failed with {name} ({code}): {message}")]
    Vendor {
        /// The backend.
        backend: BackendKind,
        /// The API function that failed.
        call: &'static str,
        /// Numeric status code.
        code: i64,
        /// The vendor's status name (e.g. `CUDA_ERROR_INVALID_VALUE`).
        name: String,
        /// The vendor's status description.
        message: String,
    },

    /// Work queued on a stream failed (a host callback or a host kernel panicked or
    /// returned an error); reported by the stream's next `synchronize`.
    #[error("work on stream {stream} failed: {message}")]
    StreamWork {
        /// The stream's display name.
        stream: String,
        /// What failed.
        message: String,
    },

    /// A blocking call made from inside work of the stream it would wait for (a host
    /// callback synchronizing its own stream, event or device): it could never return.
    #[error("would deadlock: {what} from inside work it would have to wait for; queue the follow-up work instead")]
    WouldDeadlock {
        /// The blocking call.
        what: String,
    },

    /// Array interchange (DLPack, CUDA Array Interface) rejected its input.
    #[error("interchange: {what}")]
    Interchange {
        /// What was wrong.
        what: String,
    },

    /// A kernel did not compile: the compiler's whole log (file, line, message).
    #[error("{backend}: {compiler} could not compile {source_name}:\n{log}")]
    Compile {
        /// The backend whose compiler ran.
        backend: BackendKind,
        /// The compiler and its version (`NVRTC 12.9`).
        compiler: String,
        /// The source's name in the log.
        source_name: String,
        /// The compiler's log.
        log: String,
    },

    /// A backend's implementation broke a rule of its contract with gpuport — a loaded
    /// plugin handing out one live address twice, running a host function twice, counting
    /// its progress backwards. gpuport refused what it could check; the backend is at
    /// fault, not the caller.
    #[error("{backend} broke its contract with gpuport: {what}")]
    BrokenContract {
        /// The backend (a plugin's name).
        backend: BackendKind,
        /// Which rule, and what it did.
        what: String,
    },

    /// A collectives engine (MPI, NCCL, RCCL) cannot be used here: its library is missing
    /// or is not the one expected, or the process was not started the way it needs.
    #[error("collectives engine {engine} is unavailable: {reason}")]
    EngineUnavailable {
        /// The engine (`MPI`).
        engine: &'static str,
        /// Why, naming what was tried.
        reason: String,
    },

    /// A collectives engine cannot do what was asked (a dtype or operation it lacks).
    #[error("{engine} does not support {what}")]
    EngineUnsupported {
        /// The engine (`MPI`).
        engine: &'static str,
        /// What it cannot do.
        what: String,
    },

    /// A collectives engine's call failed.
    #[error("{engine}: {call} failed ({code}): {message}")]
    Collective {
        /// The engine (`MPI`).
        engine: &'static str,
        /// The engine's function that failed.
        call: &'static str,
        /// Its error code.
        code: i64,
        /// The engine's own words for it.
        message: String,
    },
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{}: ", self.variant_name())?;
        }
        fmt::Display::fmt(self, f)
    }
}

impl Error {
    /// The variant's name (`DeviceNotFound`), for `{:#?}`.
    fn variant_name(&self) -> &'static str {
        match self {
            Error::LibraryNotFound { .. } => "LibraryNotFound",
            Error::MissingSymbol { .. } => "MissingSymbol",
            Error::DriverTooOld { .. } => "DriverTooOld",
            Error::NoDevice { .. } => "NoDevice",
            Error::DeviceNotFound { .. } => "DeviceNotFound",
            Error::BackendUnavailable { .. } => "BackendUnavailable",
            Error::OutOfMemory { .. } => "OutOfMemory",
            Error::InvalidArgument { .. } => "InvalidArgument",
            Error::InvalidDeviceString { .. } => "InvalidDeviceString",
            Error::InvalidLayout { .. } => "InvalidLayout",
            Error::InvalidHandle { .. } => "InvalidHandle",
            Error::BackendMismatch { .. } => "BackendMismatch",
            Error::Unsupported { .. } => "Unsupported",
            Error::NotReady { .. } => "NotReady",
            Error::Vendor { .. } => "Vendor",
            Error::StreamWork { .. } => "StreamWork",
            Error::WouldDeadlock { .. } => "WouldDeadlock",
            Error::Interchange { .. } => "Interchange",
            Error::Compile { .. } => "Compile",
            Error::BrokenContract { .. } => "BrokenContract",
            Error::EngineUnavailable { .. } => "EngineUnavailable",
            Error::EngineUnsupported { .. } => "EngineUnsupported",
            Error::Collective { .. } => "Collective",
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid_argument(what: impl Into<String>) -> Self {
        Error::InvalidArgument { what: what.into() }
    }

    /// Shorthand for [`Error::InvalidLayout`].
    pub fn invalid_layout(reason: impl Into<String>) -> Self {
        Error::InvalidLayout { reason: reason.into() }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(backend: BackendKind, what: impl Into<String>) -> Self {
        Error::Unsupported { backend, what: what.into() }
    }

    /// Shorthand for [`Error::WouldDeadlock`].
    pub fn would_deadlock(what: impl Into<String>) -> Self {
        Error::WouldDeadlock { what: what.into() }
    }

    /// Shorthand for [`Error::BrokenContract`].
    pub fn broken_contract(backend: BackendKind, what: impl Into<String>) -> Self {
        Error::BrokenContract { backend, what: what.into() }
    }

    /// Shorthand for [`Error::InvalidHandle`].
    pub fn invalid_handle(what: impl Into<String>) -> Self {
        Error::InvalidHandle { what: what.into() }
    }

    /// A [`Error::BackendMismatch`] for a handle of backend `found` used where `expected`
    /// was needed.
    pub fn mismatch(operation: &'static str, expected: BackendKind, found: impl fmt::Display) -> Self {
        Error::BackendMismatch { operation, expected: expected.to_string(), found: found.to_string() }
    }

    /// True when the error says a backend cannot be used at all on this machine (library,
    /// symbol, driver or device missing), as opposed to a failed operation.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::LibraryNotFound { .. }
                | Error::MissingSymbol { .. }
                | Error::DriverTooOld { .. }
                | Error::NoDevice { .. }
                | Error::BackendUnavailable { .. }
                | Error::EngineUnavailable { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_message_as_main_would_print_it() {
        let err = Error::DeviceNotFound { device: DeviceId::new(BackendKind::Plugin("ext"), 7), count: 2 };
        // `fn main() -> Result<(), Error>` prints `Error: {err:?}`.
        assert_eq!(format!("Error: {err:?}"), "Error: ext:7: no such device (ext has 2 device(s))");
        assert_eq!(format!("{err:#?}"), "DeviceNotFound: ext:7: no such device (ext has 2 device(s))");
        let mismatch = Error::mismatch("Stream::copy", BackendKind::Plugin("ext"), "host");
        assert_eq!(
            mismatch.to_string(),
            "backend mismatch in Stream::copy: it runs on ext, but was given a handle from host"
        );
        let wrapped: Result<()> = Err(Error::invalid_argument("n = 0"));
        assert_eq!(format!("{wrapped:?}"), "Err(invalid argument: n = 0)");
    }
}
