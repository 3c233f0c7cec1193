//! A plugin's function table, validated before any use: the ABI version, the name, the
//! version text, the DLPack device types and every function gpuport calls. The table is
//! copied only as far as the plugin declared it (`struct_size`); what lies past that is
//! absent. Errors crossing back are turned into gpuport's `Error` here, once.

use std::ffi::{c_char, CStr};

use gpuport_core::{BackendKind, DlDeviceType, DlpackDevices, Error, Result};
use gpuport_plugin_abi as abi;

/// A validated table, with what it says about its backend.
#[derive(Clone)]
pub(crate) struct Table {
    /// The plugin's table, copied as far as it declared it; fields past that are null.
    pub(crate) api: abi::PluginApi,
    /// `BackendKind::Plugin(name)`; the name is kept for the life of the process.
    pub(crate) kind: BackendKind,
    /// The plugin's version text.
    pub(crate) version: String,
    /// The DLPack device types it declared.
    pub(crate) dlpack: DlpackDevices,
}

/// The longest text read from a plugin (a name, a version, an error message): a plugin
/// that forgets a NUL costs a truncated message, not a read through its memory.
const MAX_TEXT: usize = 4096;

/// Reads a NUL-terminated string the plugin handed over, stopping at `MAX_TEXT` bytes.
///
/// # Safety
/// `ptr` is null or points at readable bytes up to a NUL or `MAX_TEXT` bytes.
unsafe fn text(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    let mut len = 0;
    // SAFETY: the caller vouches for the bytes up to a NUL or MAX_TEXT.
    while len < MAX_TEXT && unsafe { *ptr.add(len) } != 0 {
        len += 1;
    }
    // SAFETY: the `len` bytes were just read.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// A NUL-terminated string inside a fixed array the plugin filled (`None` without a NUL).
pub(crate) fn array_text(array: &[c_char]) -> Option<String> {
    // SAFETY: `c_char` and `u8` have one size and alignment; the slice is the array's.
    let bytes = unsafe { std::slice::from_raw_parts(array.as_ptr().cast::<u8>(), array.len()) };
    CStr::from_bytes_until_nul(bytes).ok().map(|s| s.to_string_lossy().into_owned())
}

/// A backend name a device string can carry: lower-case letters, digits, `-` and `_`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn dlpack_type(what: &str, value: i32, optional: bool) -> Result<Option<DlDeviceType>> {
    if optional && value == -1 {
        return Ok(None);
    }
    let ty = DlDeviceType(value);
    ty.name().map(|_| Some(ty)).ok_or_else(|| {
        Error::invalid_argument(format!("its {what} DLPack device type {value} is not one DLPack knows"))
    })
}

/// The functions every plugin must have, by name, with whether the table has them. The
/// others are optional: `mem_alloc_managed` (no managed memory), `per_thread_stream` (no
/// per-thread default stream), the stream-ordered pair and the module group (no kernels),
/// each pair or group all present or all absent.
fn required(api: &abi::PluginApi) -> [(&'static str, bool); 33] {
    [
        ("error_kind", api.error_kind.is_some()),
        ("error_message", api.error_message.is_some()),
        ("error_destroy", api.error_destroy.is_some()),
        ("initialize", api.initialize.is_some()),
        ("device_count", api.device_count.is_some()),
        ("device_open", api.device_open.is_some()),
        ("device_close", api.device_close.is_some()),
        ("device_info", api.device_info.is_some()),
        ("can_access_peer", api.can_access_peer.is_some()),
        ("enable_peer_access", api.enable_peer_access.is_some()),
        ("pointer_attributes", api.pointer_attributes.is_some()),
        ("device_synchronize", api.device_synchronize.is_some()),
        ("stream_priority_range", api.stream_priority_range.is_some()),
        ("stream_create", api.stream_create.is_some()),
        ("legacy_stream", api.legacy_stream.is_some()),
        ("stream_destroy", api.stream_destroy.is_some()),
        ("stream_query", api.stream_query.is_some()),
        ("stream_synchronize", api.stream_synchronize.is_some()),
        ("stream_wait_event", api.stream_wait_event.is_some()),
        ("stream_launch_host_func", api.stream_launch_host_func.is_some()),
        ("event_create", api.event_create.is_some()),
        ("event_destroy", api.event_destroy.is_some()),
        ("event_record", api.event_record.is_some()),
        ("event_query", api.event_query.is_some()),
        ("event_synchronize", api.event_synchronize.is_some()),
        ("event_elapsed_ms", api.event_elapsed_ms.is_some()),
        ("mem_alloc", api.mem_alloc.is_some()),
        ("mem_alloc_host", api.mem_alloc_host.is_some()),
        ("mem_free", api.mem_free.is_some()),
        ("mem_free_host", api.mem_free_host.is_some()),
        ("memcpy_async", api.memcpy_async.is_some()),
        ("memcpy_peer_async", api.memcpy_peer_async.is_some()),
        ("memset_async", api.memset_async.is_some()),
    ]
}

impl Table {
    /// Validates the table an entry point returned. `names_taken` says whether a backend
    /// of that name exists already.
    ///
    /// # Safety
    /// `api` is null or points at the plugin's table, readable for the `struct_size` it
    /// declares, whose strings are NUL-terminated; it stays valid for the life of the
    /// process (the plugin is never unloaded).
    pub(crate) unsafe fn validate(api: *const abi::PluginApi, name_taken: impl Fn(&str) -> bool) -> Result<Table> {
        if api.is_null() {
            return Err(Error::invalid_argument("its entry point returned no table (NULL)"));
        }
        // SAFETY: the caller vouches for a readable table; `struct_size` is its first field.
        let declared = unsafe { std::ptr::addr_of!((*api).struct_size).read_unaligned() };
        let header = std::mem::offset_of!(abi::PluginApi, error_kind);
        if declared < header {
            return Err(Error::invalid_argument(format!(
                "its table declares {declared} bytes, fewer than the {header} every version has"
            )));
        }
        // Copy no further than the plugin declared; what lies past that stays null/zero.
        let mut copy = std::mem::MaybeUninit::<abi::PluginApi>::zeroed();
        let n = declared.min(std::mem::size_of::<abi::PluginApi>());
        // SAFETY: `n` bytes are readable at `api` (the caller) and fit in `copy`.
        unsafe { std::ptr::copy_nonoverlapping(api.cast::<u8>(), copy.as_mut_ptr().cast::<u8>(), n) };
        // SAFETY: every field of the table is an integer, a raw pointer or an optional
        // function pointer, for which all zeroes is a valid value (0, null, None).
        let api = unsafe { copy.assume_init() };
        if api.abi_major != abi::ABI_MAJOR {
            return Err(Error::invalid_argument(format!(
                "it was built for plugin ABI {}.{}; this gpuport speaks {}.{} (a major version must match)",
                api.abi_major,
                api.abi_minor,
                abi::ABI_MAJOR,
                abi::ABI_MINOR
            )));
        }
        // SAFETY: the caller vouches for NUL-terminated strings (read at most MAX_TEXT).
        let name = unsafe { text(api.name) }.ok_or_else(|| Error::invalid_argument("its table names no backend"))?;
        if !valid_name(&name) {
            return Err(Error::invalid_argument(format!(
                "its backend name {name:?} is not 1 to 32 lower-case letters, digits, '-' or '_'"
            )));
        }
        if BackendKind::builtin_from_name(&name).is_some() || name_taken(&name) {
            return Err(Error::invalid_argument(format!("a backend named `{name}` exists already")));
        }
        // SAFETY: as above.
        let version =
            unsafe { text(api.version) }.ok_or_else(|| Error::invalid_argument("its table has no version"))?;
        let dlpack = DlpackDevices {
            // Not optional: `dlpack_type` answers a type or an error for it.
            device: dlpack_type("device", api.dlpack_device, false)?.unwrap_or(DlDeviceType::EXT_DEV),
            pinned_host: dlpack_type("pinned host", api.dlpack_pinned_host, true)?,
            managed: dlpack_type("managed", api.dlpack_managed, true)?,
        };
        if matches!(dlpack.device, DlDeviceType::CPU | DlDeviceType::CUDA_HOST | DlDeviceType::ROCM_HOST) {
            return Err(Error::invalid_argument(format!(
                "it declares its device memory as {}, a type whose memory consumers read from the host; device \
                 memory needs a device type (kDLExtDev for a device of its own)",
                dlpack.device
            )));
        }
        let missing: Vec<&str> = required(&api).iter().filter(|(_, has)| !has).map(|(n, _)| *n).collect();
        if !missing.is_empty() {
            return Err(Error::invalid_argument(format!("its table lacks {}", missing.join(", "))));
        }
        let modules = [api.module_load.is_some(), api.module_unload.is_some(), api.module_function.is_some()];
        if modules.contains(&true) && (modules.contains(&false) || api.launch_kernel.is_none()) {
            return Err(Error::invalid_argument(
                "its table has some of module_load, module_unload, module_function and launch_kernel: all or none",
            ));
        }
        if api.mem_alloc_async.is_some() != api.mem_free_async.is_some() {
            return Err(Error::invalid_argument(
                "its table has one of mem_alloc_async and mem_free_async: both or none",
            ));
        }
        let kind = BackendKind::Plugin(Box::leak(name.into_boxed_str()));
        Ok(Table { api, kind, version, dlpack })
    }

    /// `Ok` for a null status; otherwise the plugin's error as gpuport's, the error object
    /// destroyed. `call` names the table function. Inlined into every call: the success
    /// path is one comparison.
    #[inline]
    pub(crate) fn check(&self, call: &'static str, status: abi::Status) -> Result<()> {
        if status.is_null() {
            return Ok(());
        }
        self.failed(call, status)
    }

    /// The error for a call the table lacks, kept out of line (every call checks).
    #[cold]
    #[inline(never)]
    pub(crate) fn lacks(&self, what: &'static str) -> Error {
        Error::unsupported(self.kind, what)
    }

    /// [`Table::check`]'s error path, kept out of line.
    #[cold]
    #[inline(never)]
    fn failed(&self, call: &'static str, status: abi::Status) -> Result<()> {
        let (kind, message) = self.take_error(status);
        let message = format!("{call}: {message}");
        Err(match kind {
            abi::error_kind::INVALID_ARGUMENT => Error::invalid_argument(format!("{}: {message}", self.kind)),
            abi::error_kind::UNSUPPORTED => Error::unsupported(self.kind, message),
            abi::error_kind::NOT_READY => Error::NotReady { what: message },
            abi::error_kind::INVALID_HANDLE => Error::invalid_handle(message),
            abi::error_kind::NO_DEVICE => Error::NoDevice { backend: self.kind, detail: message },
            abi::error_kind::WOULD_DEADLOCK => Error::would_deadlock(message),
            other => Error::Vendor {
                backend: self.kind,
                call,
                code: other.into(),
                name: error_kind_name(other).into(),
                message,
            },
        })
    }

    /// As [`Table::check`], with an allocation's out-of-memory error naming its device and size.
    pub(crate) fn check_alloc(
        &self,
        call: &'static str,
        status: abi::Status,
        device: gpuport_core::DeviceId,
        bytes: usize,
    ) -> Result<()> {
        if status.is_null() {
            return Ok(());
        }
        // SAFETY: a non-null status is the plugin's live error object, destroyed once in
        // `take_error` (here, or in `check`).
        let kind = self.api.error_kind.map_or(abi::error_kind::FAILED, |f| unsafe { f(status) });
        if kind == abi::error_kind::OUT_OF_MEMORY {
            let _ = self.take_error(status);
            return Err(Error::OutOfMemory { device, bytes });
        }
        self.check(call, status)
    }

    /// Reads and destroys a live error object.
    fn take_error(&self, status: abi::Status) -> (i32, String) {
        // SAFETY: `status` is the plugin's live error object; its functions were validated
        // present; the message is read before the object is destroyed, once.
        unsafe {
            let kind = self.api.error_kind.map_or(abi::error_kind::FAILED, |f| f(status));
            let message = self.api.error_message.and_then(|f| text(f(status))).unwrap_or_else(|| "(no message)".into());
            if let Some(destroy) = self.api.error_destroy {
                destroy(status);
            }
            (kind, message)
        }
    }
}

fn error_kind_name(kind: i32) -> &'static str {
    match kind {
        abi::error_kind::OUT_OF_MEMORY => "GPUPORT_ERROR_OUT_OF_MEMORY",
        abi::error_kind::DEVICE_NOT_FOUND => "GPUPORT_ERROR_DEVICE_NOT_FOUND",
        abi::error_kind::FAILED => "GPUPORT_ERROR_FAILED",
        _ => "an error kind this gpuport does not know",
    }
}
