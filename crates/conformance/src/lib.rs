//! # gpuport-conformance
//!
//! One behavioural suite, written once against the dynamic tier and run against any
//! backend — built-in, plugin, or a port in a crate of its own outside this workspace. It
//! is the contract every backend must pass.
//!
//! A port runs the whole suite against itself with one call from its own test file:
//!
//! ```no_run
//! # fn register() -> gpuport_runtime::Result<()> { Ok(()) }
//! let report = gpuport_conformance::run_port(&gpuport_conformance::Port {
//!     name: "mydev",                 // the backend name, as in device strings
//!     register: Some(register),      // registers the backend with the runtime
//!     kernel: None,                  // or a `fill_u32` test kernel in the port's format
//! });
//! report.assert_passed();            // prints the summary line; on failure, panics
//!                                    // with every case and each reason
//! ```
//!
//! A case a port cannot run (no test kernel, one device, no stream-ordered allocation) is
//! reported as skipped with the reason and counted — never passed. Inside this workspace
//! `cargo xtask test --backend host|cuda|rocm|ext|all` runs the built-in ports ([`builtin_ports`]) with one
//! test per case (`host::ordering::cross_stream_event`), so a failure names the backend.

use std::fmt;
use std::sync::Arc;

use gpuport_runtime::{AnyDevice, Error, ModuleImage, Runtime, StreamFlags};

mod cases;
mod check;
mod deliberate;

pub use cases::{Gate, OpenOnDrop, CASES};
pub use check::{Failure, Outcome};
pub use deliberate::{deliberate_panic, DELIBERATE};

/// A test kernel in a backend's own code format:
/// `fill_u32(ptr: *mut u32, n: u32, value: u32)` sets `ptr[0..n]` to `value`.
#[derive(Clone, Copy)]
pub struct TestKernel {
    /// The module image holding the kernel.
    pub image: ModuleImage<'static>,
    /// The kernel's name in the module.
    pub name: &'static str,
}

/// What a case needs beyond the basics; a target without it skips the case, with why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A test kernel ([`Port::kernel`]).
    Kernel,
    /// At least two devices.
    TwoDevices,
    /// Stream-ordered allocation (`alloc_async` not `Unsupported`).
    StreamOrderedAlloc,
    /// Raw handles the backend checks (`wrap_event` refuses an unknown handle), so a
    /// stale handle can be used safely to see that it is refused. Vendor runtimes whose
    /// handles are pointers cannot check them.
    CheckedHandles,
    /// Another device or backend that loads `gpuport-queue`'s registered modules (the
    /// host, ext), to make a module and kernel the target must refuse.
    ForeignModules,
}

/// What the suite runs against: the devices of one backend.
#[derive(Clone)]
pub struct Target {
    /// The backend's name.
    pub backend: String,
    /// Its devices (at least one; peer tests use the first two).
    pub devices: Vec<AnyDevice>,
    /// The backend's version text (`Backend::version`), as discovery reported it.
    pub version: String,
    /// The backend's DLPack device types (`Backend::dlpack_devices`), as discovery
    /// reported them.
    pub dlpack: Option<gpuport_runtime::DlpackDevices>,
    /// The facts of each device as the backend listed them at discovery
    /// (`Backend::devices`), in ordinal order.
    pub listed: Vec<gpuport_runtime::DeviceInfo>,
    /// What opening the ordinal after the last device gave: the error, or `None` when a
    /// device opened.
    pub past_last_device: Option<Error>,
    /// The fill kernel in this backend's format, if it has one.
    pub kernel: Option<TestKernel>,
    /// Devices of *other* backends, for mismatch tests.
    pub foreign: Vec<AnyDevice>,
    /// Whether the first device has stream-ordered allocation.
    pub alloc_async: bool,
    /// Whether the first device refuses raw handles it does not know ([`Need::CheckedHandles`]).
    pub checked_handles: bool,
    /// Whether another device can load a registered module ([`Need::ForeignModules`]).
    pub foreign_modules: bool,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target").field("backend", &self.backend).field("devices", &self.devices.len()).finish()
    }
}

impl Target {
    /// The first device.
    pub fn device(&self) -> &AnyDevice {
        &self.devices[0]
    }

    /// The test kernel (cases that call this declare [`Need::Kernel`]).
    pub fn kernel(&self) -> Result<TestKernel, Failure> {
        self.kernel.ok_or_else(|| Failure::new("the case needs a test kernel but the target has none"))
    }

    /// Why the target cannot run a case with these needs, if it cannot.
    pub fn missing(&self, needs: &[Need]) -> Option<String> {
        needs.iter().find_map(|need| match need {
            Need::Kernel if self.kernel.is_none() => Some(format!("{} gives no test kernel", self.backend)),
            Need::TwoDevices if self.devices.len() < 2 => Some(format!("{} has one device", self.backend)),
            Need::StreamOrderedAlloc if !self.alloc_async => {
                Some(format!("{} has no stream-ordered allocation (alloc_async is Unsupported)", self.backend))
            }
            Need::CheckedHandles if !self.checked_handles => {
                Some(format!("{} cannot check raw handles (wrap_event accepts an unknown one)", self.backend))
            }
            Need::ForeignModules if !self.foreign_modules => {
                Some("no other device here loads registered modules".to_owned())
            }
            _ => None,
        })
    }
}

/// A backend to run the suite against: its name, how it registers itself with the runtime
/// (plugins; built-ins need nothing) and its test kernel.
#[derive(Clone, Copy)]
pub struct Port {
    /// Backend name, as in device strings.
    pub name: &'static str,
    /// For plugins: registers the backend with the runtime. Called once per process; a
    /// name that is already registered is not an error.
    pub register: Option<fn() -> gpuport_runtime::Result<()>>,
    /// The backend's `fill_u32` kernel, if it has one.
    pub kernel: Option<TestKernel>,
}

/// The backends of this workspace. One line per backend.
pub fn builtin_ports() -> Vec<Port> {
    vec![
        Port { name: "host", register: None, kernel: host_kernel() },
        Port { name: "ext", register: Some(register_ext), kernel: host_kernel() },
        Port { name: "cuda", register: None, kernel: Some(cuda_kernel()) },
        Port { name: "rocm", register: None, kernel: rocm_kernel() },
    ]
}

/// `fill_u32` as AMD code objects (built from `backends/rocm/kernels/fill_u32.cl` by its
/// `build.sh`: GCN 5, CDNA 1–3 including MI300's gfx942, RDNA 2–4), in one offload bundle
/// the runtime picks the device's architecture from. Launch it with at most 256
/// work-items per block (its `max_flat_workgroup_size`).
fn rocm_kernel() -> Option<TestKernel> {
    macro_rules! code_objects {
        ($($arch:literal),*) => {
            [$(($arch, include_bytes!(concat!("../../../backends/rocm/kernels/fill_u32-", $arch, ".co")).as_slice())),*]
        };
    }
    static BUNDLE: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    let bundle = BUNDLE.get_or_init(|| {
        gpuport_runtime::rocm::offload_bundle(&code_objects!(
            "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx940", "gfx941", "gfx942", "gfx1100", "gfx1101",
            "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1200", "gfx1201"
        ))
        .ok()
    });
    bundle.as_deref().map(|b| TestKernel { image: ModuleImage::HipCodeObject(b), name: "fill_u32" })
}

fn cuda_kernel() -> TestKernel {
    TestKernel { image: ModuleImage::Ptx(gpuport_runtime::cuda::FILL_U32_PTX), name: "fill_u32" }
}

fn register_ext() -> gpuport_runtime::Result<()> {
    Runtime::register_plugin(<gpuport_ext::ExtBackend as gpuport_runtime::Backend>::load(&Default::default())?)
}

/// A runtime with every built-in port registered (the ext device's plugin included): what
/// tests of the layers above the HAL discover devices with.
pub fn discover_with_builtin_ports() -> Runtime {
    for port in builtin_ports() {
        if let Err(why) = register(&port) {
            eprintln!("{why}");
        }
    }
    Runtime::discover_with(&Default::default())
}

/// For tests that need a vendor device (CUDA or ROCm): a runtime with the built-in ports,
/// and the backend named by `GPUPORT_CONFORMANCE_BACKENDS` (`cargo xtask test --backend
/// cuda|rocm [--double]` sets it). Panics — failing the test, never passing it — when the
/// variable names no vendor backend or the backend is unavailable, with the reason.
pub fn vendor_backend_under_test() -> (Runtime, String) {
    let backend = std::env::var("GPUPORT_CONFORMANCE_BACKENDS").unwrap_or_default();
    assert!(backend == "cuda" || backend == "rocm", "GPUPORT_CONFORMANCE_BACKENDS must name cuda or rocm");
    let rt = discover_with_builtin_ports();
    match rt.report_for(&backend).map(|r| &r.status) {
        Some(gpuport_runtime::BackendStatus::Available { .. }) => {}
        Some(gpuport_runtime::BackendStatus::Unavailable(why)) => panic!("{backend} is not available: {why}"),
        None => panic!("{backend} is not known to this runtime"),
    }
    (rt, backend)
}

/// Turns on the device for the tests of one process (see [`device_alone`]).
static DEVICE_TURNS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Tests holding a turn now.
static TURNS_HELD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A test's turn on the device ([`device_alone`], [`device_shared`]). When the last turn
/// held ends, what the copy engine keeps for reuse — staging buffers, compiled copy
/// kernels — is released (`release_copy_resources`), so nothing a test made is alive at
/// the driver doubles' check at exit, whichever test of the process ends last.
pub struct DeviceTurn<G> {
    _guard: G,
}

impl<G> DeviceTurn<G> {
    fn new(guard: G) -> Self {
        TURNS_HELD.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        DeviceTurn { _guard: guard }
    }
}

impl<G> Drop for DeviceTurn<G> {
    fn drop(&mut self) {
        if TURNS_HELD.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            gpuport_runtime::release_copy_resources();
        }
    }
}

/// The device to this test alone, until the guard drops: for a test that holds a stream
/// shut (a [`Gate`]) while the test harness runs the others of its process on parallel
/// threads, which take [`device_shared`]. A real driver's synchronous allocations and
/// frees (`cuMemFree`, `cuMemFreeHost`, `hipFree`, …) wait for all of the device's queued
/// work, and other threads' driver calls — queuing a copy on an unrelated stream included
/// — wait behind them: another test's free inside the window stalls the test until its
/// gate gives up (on an H100 with CUDA 13, a 30 s stall in the queuing of a copy, every
/// time two such tests overlapped). A test that failed holding it does not keep the
/// others out.
pub fn device_alone() -> DeviceTurn<std::sync::RwLockWriteGuard<'static, ()>> {
    DeviceTurn::new(DEVICE_TURNS.write().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// The device shared with the other tests that share it, until the guard drops: kept out
/// of the window of a test that has it alone ([`device_alone`]).
pub fn device_shared() -> DeviceTurn<std::sync::RwLockReadGuard<'static, ()>> {
    DeviceTurn::new(DEVICE_TURNS.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// The ordinals of `backend`'s first two devices (one on a single-GPU machine).
pub fn first_two_devices(rt: &Runtime, backend: &str) -> Vec<u32> {
    rt.device_ids().into_iter().filter(|d| d.kind.name() == backend).map(|d| d.ordinal).take(2).collect()
}

/// Registers a port's backend (once per process; an already registered name is fine).
pub fn register(port: &Port) -> Result<(), String> {
    let Some(register) = port.register else { return Ok(()) };
    match register() {
        Ok(()) => Ok(()),
        Err(_) if Runtime::known_names().iter().any(|n| n == port.name) => Ok(()),
        Err(e) => Err(format!("registering {}: {e}", port.name)),
    }
}

fn host_kernel() -> Option<TestKernel> {
    Some(registered_fill_kernel())
}

/// `fill_u32` as a registered Rust kernel, for software devices built on `gpuport-queue`
/// (the host, ext, the port template): registers it and returns it.
pub fn registered_fill_kernel() -> TestKernel {
    gpuport_runtime::host::register_kernel("gpuport-conformance", "fill_u32", host_fill_u32);
    TestKernel { image: ModuleImage::Registered("gpuport-conformance"), name: "fill_u32" }
}

fn host_fill_u32(
    _cfg: &gpuport_runtime::LaunchConfig,
    args: &gpuport_runtime::host::HostKernelArgs,
) -> gpuport_runtime::Result<()> {
    let n = args.scalar::<u32>(1)? as usize;
    let value = args.scalar::<u32>(2)?;
    // SAFETY: argument 0 is the only pointer argument, so nothing aliases it.
    let out = unsafe { args.slice_mut::<u32>(0)? };
    let available = out.len();
    let out = out.get_mut(..n).ok_or_else(|| {
        Error::invalid_argument(format!("fill_u32: n = {n} exceeds the buffer ({available} elements)"))
    })?;
    out.fill(value);
    Ok(())
}

/// Opens `backend` for the suite, or says why it cannot be run.
pub fn open_target(rt: &Runtime, backend: &str, kernel: Option<TestKernel>) -> Result<Target, String> {
    let report = rt.report_for(backend).ok_or_else(|| {
        format!("backend `{backend}` is not known to this runtime (known: {})", Runtime::known_names().join(", "))
    })?;
    let (version, listed) = match &report.status {
        gpuport_runtime::BackendStatus::Available { version, devices } => (version.clone(), devices.clone()),
        gpuport_runtime::BackendStatus::Unavailable(err) => return Err(format!("{backend} is unavailable: {err}")),
    };
    let dlpack = report.dlpack_devices();
    let count = listed.len();
    let past_last_device = rt.device(&format!("{backend}:{count}")).err();
    let devices = (0..count)
        .map(|i| rt.device(&format!("{backend}:{i}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("opening {backend}: {e}"))?;
    let alloc_async = probe_alloc_async(&devices[0]).map_err(|e| format!("probing {backend}: {e}"))?;
    let foreign: Vec<AnyDevice> = rt
        .reports()
        .iter()
        .filter(|r| r.name != backend && r.is_available())
        .filter_map(|r| rt.device(&format!("{}:0", r.name)).ok())
        .collect();
    // SAFETY: a handle no backend hands out; a backend that accepts it without checking
    // only stores it in a borrowed wrapper, which is dropped unused.
    let checked_handles = matches!(unsafe { devices[0].wrap_event(UNKNOWN_HANDLE) }, Err(Error::InvalidHandle { .. }));
    let image = registered_fill_kernel().image;
    let foreign_modules = foreign.iter().chain(devices.iter().skip(1)).any(|d| d.load_module(image).is_ok());
    Ok(Target {
        backend: backend.to_owned(),
        devices,
        version,
        dlpack,
        listed,
        past_last_device,
        kernel,
        foreign,
        alloc_async,
        checked_handles,
        foreign_modules,
    })
}

/// A raw handle value no backend gives out (high, odd, never a valid pointer to an
/// aligned object), to probe whether a backend checks handles.
const UNKNOWN_HANDLE: usize = usize::MAX - 0xF0F0;

fn probe_alloc_async(dev: &AnyDevice) -> gpuport_runtime::Result<bool> {
    let stream = dev.create_stream(StreamFlags::NON_BLOCKING, 0)?;
    match dev.alloc_async(1, &stream) {
        Ok(_) => Ok(true),
        Err(Error::Unsupported { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A case of the suite.
pub struct Case {
    /// `group::name`.
    pub name: &'static str,
    /// The test body.
    pub run: fn(&Target) -> Outcome,
    /// What it needs beyond the basics.
    pub needs: &'static [Need],
}

/// Runs one case, turning a panic into a failure that names the backend — and a panic on
/// one of the port's own threads meanwhile.
///
/// Drops that earlier cases deferred to the release thread run first: a vendor driver's
/// free (`cuMemFree`, `hipFree`) may wait for all of the device's work and make later work
/// wait for it too, so a free landing inside a case's window — while a gate holds a
/// stream — would serialise streams the case checks for overlap, or stall it until the
/// gate gives up. (On an H200 with CUDA 13 a full run lost 30 s to one such stall, and
/// failed a different ordering case each time; every case passed alone.)
pub fn run_case(case: &Case, target: &Arc<Target>) -> Outcome {
    deliberate::install();
    gpuport_runtime::release::flush();
    let given_up = cases::gates_given_up();
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (case.run)(target))) {
        Ok(outcome) => outcome.map_err(|f| f.context(format!("[{}] {}", target.backend, case.name))),
        Err(_) => Err(Failure::new(format!("[{}] {} panicked", target.backend, case.name))),
    };
    // The port's own threads (finishing this case's work, or an earlier one's) must not
    // have panicked meanwhile.
    let on_threads = deliberate::thread_panics();
    let outcome = match outcome {
        Ok(()) if !on_threads.is_empty() => Err(Failure::new(format!(
            "[{}] {}: a thread of the port panicked while it ran: {}",
            target.backend,
            case.name,
            on_threads.join("; ")
        ))),
        other => other,
    };
    outcome.map_err(|f| {
        if cases::gates_given_up() == given_up {
            return f;
        }
        Failure::new(format!(
            "{f} (a gate gave up after 30 s while the case ran: a call of the case waited for the stream \
             it held, which the port must queue instead — or, on a real driver, an implicit synchronisation \
             such as a device allocation or free from another thread)"
        ))
    })
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseResult {
    /// It ran and passed.
    Passed,
    /// It ran and failed, with why.
    Failed(String),
    /// It could not apply to the target, with why; not run, not passed.
    Skipped(String),
}

/// The suite's results for one backend.
#[derive(Debug, Clone)]
pub struct Report {
    /// The backend.
    pub backend: String,
    /// Every case, in suite order, or one failure when the backend could not be opened.
    pub cases: Vec<(String, CaseResult)>,
}

impl Report {
    fn count(&self, f: impl Fn(&CaseResult) -> bool) -> usize {
        self.cases.iter().filter(|(_, r)| f(r)).count()
    }
    /// Cases that passed.
    pub fn passed(&self) -> usize {
        self.count(|r| *r == CaseResult::Passed)
    }
    /// Cases that failed.
    pub fn failed(&self) -> usize {
        self.count(|r| matches!(r, CaseResult::Failed(_)))
    }
    /// Cases skipped (with their reasons in [`Report::cases`]).
    pub fn skipped(&self) -> usize {
        self.count(|r| matches!(r, CaseResult::Skipped(_)))
    }
    /// True when nothing failed and at least one case passed.
    pub fn is_success(&self) -> bool {
        self.failed() == 0 && self.passed() > 0
    }
    /// The one-line summary: `conformance of mydev: 39 passed, 0 failed, 1 skipped`.
    pub fn summary(&self) -> String {
        format!(
            "conformance of {}: {} passed, {} failed, {} skipped",
            self.backend,
            self.passed(),
            self.failed(),
            self.skipped()
        )
    }
    /// For a port's own test: prints the summary line where `cargo test` shows it without
    /// `--nocapture` (straight to the process's stderr), and when the suite did not pass,
    /// panics with the whole report — every case, each failure's reason, each skip's — so
    /// a failure shows the report once.
    pub fn assert_passed(&self) {
        use std::io::Write;
        // Written to the stream itself, not through `eprintln!`, which the test harness
        // captures.
        let _ = writeln!(std::io::stderr(), "{}", self.summary());
        if !self.is_success() {
            panic!("the conformance suite did not pass:\n{self}");
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, result) in &self.cases {
            match result {
                CaseResult::Passed => writeln!(f, "{}::{name} ... ok", self.backend)?,
                CaseResult::Failed(why) => writeln!(f, "{}::{name} ... FAILED: {why}", self.backend)?,
                CaseResult::Skipped(why) => writeln!(f, "{}::{name} ... skipped: {why}", self.backend)?,
            }
        }
        writeln!(f, "{}", self.summary())
    }
}

/// Runs the whole suite against `port`: registers it, discovers it, runs every case (those
/// it cannot run are skipped with the reason) and returns the report. The entry point for
/// a port's own test file.
pub fn run_port(port: &Port) -> Report {
    run_port_cases(port, |_| true)
}

/// Runs the cases whose `group::name` `selected` accepts, as [`run_port`] runs the whole
/// suite (the same discovery and probes, the same order, the same release of the port's
/// memory at the end); the report lists only those cases. For rerunning the case a port
/// failed while fixing it, and for the mutation check, which asks of each broken port
/// only that the case named for its flaw fails.
pub fn run_port_cases(port: &Port, selected: impl Fn(&str) -> bool) -> Report {
    let backend = port.name.to_owned();
    let opened = register(port).and_then(|()| open_target(&Runtime::discover(), port.name, port.kernel));
    let target = match opened {
        Ok(t) => Arc::new(t),
        Err(why) => return Report { backend, cases: vec![("available".into(), CaseResult::Failed(why))] },
    };
    let cases = CASES
        .iter()
        .filter(|case| selected(case.name))
        .map(|case| {
            let result = match target.missing(case.needs) {
                Some(why) => CaseResult::Skipped(why),
                None => match run_case(case, &target) {
                    Ok(()) => CaseResult::Passed,
                    Err(f) => CaseResult::Failed(f.to_string()),
                },
            };
            (case.name.to_owned(), result)
        })
        .collect();
    drop(target);
    // The staging buffers the copy cases made are the port's memory: give them back.
    gpuport_runtime::release_copy_resources();
    gpuport_runtime::release::flush();
    Report { backend, cases }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_gpu_port_has_its_test_kernel() {
        // A bundle that failed to build would silently skip ROCm's kernel cases.
        assert!(super::rocm_kernel().is_some(), "the fill_u32 code objects do not bundle");
        assert!(matches!(super::cuda_kernel().image, gpuport_runtime::ModuleImage::Ptx(_)));
    }
}
