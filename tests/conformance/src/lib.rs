//! # gpuport-conformance
//!
//! One behavioural suite, written once against the dynamic tier and run against any
//! backend: `cargo xtask test --backend host|cuda|rocm|ext|all`. It is the contract every
//! backend — built-in, plugin or out-of-tree port — must pass.
//!
//! A backend is described by a [`Target`] (its devices and, optionally, a test kernel in
//! its own code format). Adding a backend means adding one entry to [`TARGETS`].
//! Test names carry the backend (`host::ordering::cross_stream_event`), so a failure
//! names it.

use std::fmt;
use std::sync::Arc;

use gpuport::{AnyDevice, Error, ModuleImage, Runtime};

mod cases;
mod check;

pub use cases::CASES;
pub use check::{Failure, Outcome};

/// A test kernel in a backend's own code format:
/// `fill_u32(ptr: *mut u32, n: u32, value: u32)` sets `ptr[0..n]` to `value`.
#[derive(Clone, Copy)]
pub struct TestKernel {
    /// The module image holding the kernel.
    pub image: ModuleImage<'static>,
    /// The kernel's name in the module.
    pub name: &'static str,
}

/// What the suite runs against: the devices of one backend.
#[derive(Clone)]
pub struct Target {
    /// The backend's name.
    pub backend: String,
    /// Its devices (at least one; peer tests use the first two).
    pub devices: Vec<AnyDevice>,
    /// The fill kernel in this backend's format, if it has one.
    pub kernel: Option<TestKernel>,
    /// Devices of *other* backends, for mismatch tests.
    pub foreign: Vec<AnyDevice>,
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
}

/// How to prepare one backend for the suite: its name, how a plugin registers itself,
/// and its test kernel.
pub struct TargetDef {
    /// Backend name, as in device strings.
    pub name: &'static str,
    /// For plugins: registers the backend with the runtime (built-ins need nothing).
    pub register: Option<fn() -> gpuport::Result<()>>,
    /// Registers or builds the backend's fill kernel.
    pub kernel: fn() -> Option<TestKernel>,
}

/// Every backend the suite knows how to run. One line per backend.
pub const TARGETS: &[TargetDef] = &[
    TargetDef { name: "host", register: None, kernel: host_kernel },
    TargetDef { name: "ext", register: Some(register_ext), kernel: host_kernel },
    TargetDef { name: "cuda", register: None, kernel: cuda_kernel },
    TargetDef { name: "rocm", register: None, kernel: rocm_kernel },
];

/// `fill_u32` as AMD code objects (built from `backends/rocm/kernels/fill_u32.cl` by its
/// `build.sh`), in one offload bundle the runtime picks the device's architecture from.
fn rocm_kernel() -> Option<TestKernel> {
    macro_rules! code_objects {
        ($($arch:literal),*) => {
            [$(($arch, include_bytes!(concat!("../../../backends/rocm/kernels/fill_u32-", $arch, ".co")).as_slice())),*]
        };
    }
    static BUNDLE: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    let bundle = BUNDLE.get_or_init(|| {
        gpuport::rocm::offload_bundle(&code_objects!("gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030")).ok()
    });
    bundle.as_deref().map(|b| TestKernel { image: ModuleImage::HipCodeObject(b), name: "fill_u32" })
}

/// `fill_u32` in PTX (ISA 7.0, sm_52: JIT-compiled by any driver ≥ 11.0 for newer GPUs).
const FILL_U32_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry fill_u32(
    .param .u64 fill_u32_param_0,
    .param .u32 fill_u32_param_1,
    .param .u32 fill_u32_param_2
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<7>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [fill_u32_param_0];
    ld.param.u32 %r1, [fill_u32_param_1];
    ld.param.u32 %r2, [fill_u32_param_2];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
DONE:
    ret;
}
"#;

fn cuda_kernel() -> Option<TestKernel> {
    Some(TestKernel { image: ModuleImage::Ptx(FILL_U32_PTX), name: "fill_u32" })
}

fn register_ext() -> gpuport::Result<()> {
    Runtime::register_plugin(<gpuport_ext::ExtBackend as gpuport::Backend>::load(&Default::default())?)
}

/// Registers every plugin backend of [`TARGETS`] (once per process). Returns the
/// failures, named.
pub fn register_plugins() -> Vec<String> {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let mut failures = Vec::new();
    ONCE.call_once(|| {
        for t in TARGETS {
            if let Some(register) = t.register {
                if let Err(e) = register() {
                    failures.push(format!("registering {}: {e}", t.name));
                }
            }
        }
    });
    failures
}

fn host_kernel() -> Option<TestKernel> {
    gpuport::host::register_kernel("gpuport-conformance", "fill_u32", host_fill_u32);
    Some(TestKernel { image: ModuleImage::Registered("gpuport-conformance"), name: "fill_u32" })
}

fn host_fill_u32(_cfg: &gpuport::LaunchConfig, args: &gpuport::host::HostKernelArgs) -> gpuport::Result<()> {
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
pub fn open_target(rt: &Runtime, backend: &str) -> Result<Target, String> {
    let report = rt.report_for(backend).ok_or_else(|| {
        format!("backend `{backend}` is not known to this runtime (known: {})", Runtime::known_names().join(", "))
    })?;
    let count = match &report.status {
        gpuport::BackendStatus::Available { devices, .. } => devices.len(),
        gpuport::BackendStatus::Unavailable(err) => return Err(format!("{backend} is unavailable: {err}")),
    };
    let devices = (0..count)
        .map(|i| rt.device(&format!("{backend}:{i}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("opening {backend}: {e}"))?;
    let kernel = TARGETS.iter().find(|t| t.name == backend).and_then(|t| (t.kernel)());
    let foreign = rt
        .reports()
        .iter()
        .filter(|r| r.name != backend && r.is_available())
        .filter_map(|r| rt.device(&format!("{}:0", r.name)).ok())
        .collect();
    Ok(Target { backend: backend.to_owned(), devices, kernel, foreign })
}

/// A case of the suite.
pub struct Case {
    /// `group::name`.
    pub name: &'static str,
    /// The test body.
    pub run: fn(&Target) -> Outcome,
}

/// Runs one case, turning a panic into a failure that names the backend.
pub fn run_case(case: &Case, target: &Arc<Target>) -> Outcome {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (case.run)(target))) {
        Ok(outcome) => outcome.map_err(|f| f.context(format!("[{}] {}", target.backend, case.name))),
        Err(_) => Err(Failure::new(format!("[{}] {} panicked", target.backend, case.name))),
    }
}
