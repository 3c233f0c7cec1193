//! One process per injected fault. The parent lists the scenarios for the backend a driver
//! double stands in for (`GPUPORT_CONFORMANCE_BACKENDS`, set with the double's library by
//! `cargo xtask test --backend cuda|rocm --double`) and runs each in a child process of
//! this binary with `GPUPORT_DOUBLE_FAULTS` set; the child runs the scenario and exits 0
//! when every expectation held. The parent fails a scenario whose child failed, panicked,
//! aborted or died on a signal: a fault must end in a typed error and a clean exit.

use std::process::Command;

use gpuport::{AnyDevice, Buffer, Error, KernelArg, LaunchConfig, Runtime, StreamFlags};
use libtest_mimic::{Arguments, Failed, Trial};

const CHILD: &str = "--fault-scenario";

/// A fault and what must follow it.
struct Scenario {
    name: &'static str,
    /// The fault for the CUDA driver double and for the HIP runtime double.
    cuda: &'static str,
    hip: &'static str,
    run: fn(&str) -> Result<(), String>,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "out_of_memory_on_one_allocation",
        cuda: "cuMemAlloc_v2:2=OUT_OF_MEMORY",
        hip: "hipMalloc:2=OutOfMemory",
        run: out_of_memory,
    },
    Scenario {
        name: "sticky_kernel_fault",
        cuda: "cuLaunchKernel:1=ILLEGAL_ADDRESS",
        hip: "hipModuleLaunchKernel:1=IllegalAddress",
        run: sticky_kernel_fault,
    },
    Scenario {
        name: "launch_failure_in_a_copy_pipeline",
        cuda: "cuMemcpyAsync:4=LAUNCH_FAILED",
        hip: "hipMemcpyAsync:4=LaunchFailure",
        run: failure_in_pipeline,
    },
    Scenario {
        name: "device_lost_in_a_pipeline",
        cuda: "cuMemsetD8Async:3=LOST",
        hip: "hipMemsetAsync:3=LOST",
        run: device_lost,
    },
    Scenario {
        // No fault: the ordering itself, beside the failure below.
        name: "cross_backend_wait_orders",
        cuda: "",
        hip: "",
        run: cross_backend_wait_orders,
    },
    Scenario {
        // The other vendor's event wait fails (each double takes only its own names).
        name: "cross_backend_wait_fails",
        cuda: "hipEventSynchronize:1=Unknown",
        hip: "cuEventSynchronize:1=UNKNOWN",
        run: cross_backend_wait_fails,
    },
    Scenario {
        name: "no_device_after_init",
        cuda: "cuDeviceGetCount:1=NO_DEVICE",
        hip: "hipGetDeviceCount:1=NoDevice",
        run: no_device_after_init,
    },
];

fn check(cond: bool, what: impl Into<String>) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what.into())
    }
}

fn text<T>(r: gpuport::Result<T>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

fn device(rt: &Runtime, backend: &str, i: u32) -> Result<AnyDevice, String> {
    text(rt.device(&format!("{backend}:{i}")))
}

/// A buffer on `dev` holding `bytes`, written and synchronised.
fn filled(dev: &AnyDevice, bytes: &[u8]) -> Result<Buffer, String> {
    let b = text(dev.alloc(bytes.len()))?;
    let s = text(dev.create_stream(StreamFlags::NON_BLOCKING, 0))?;
    text(s.write(bytes, &b, 0))?;
    Ok(b)
}

fn read(dev: &AnyDevice, b: &Buffer) -> Result<Vec<u8>, String> {
    let s = text(dev.create_stream(StreamFlags::NON_BLOCKING, 0))?;
    let mut out = vec![0u8; b.len()];
    text(s.read(b, 0, &mut out))?;
    Ok(out)
}

/// The vendor's status is named in the error (`ILLEGAL_ADDRESS`, `IllegalAddress`).
fn names(err: &Error, cuda: &str, hip: &str) -> bool {
    let t = err.to_string();
    t.contains(cuda) || t.contains(hip)
}

fn out_of_memory(backend: &str) -> Result<(), String> {
    let rt = Runtime::discover();
    let dev = device(&rt, backend, 0)?;
    let kept = filled(&dev, &[7u8; 4096])?;
    match dev.alloc(4096) {
        Err(Error::OutOfMemory { bytes: 4096, .. }) => {}
        other => return Err(format!("the failed allocation gave {other:?}, not OutOfMemory")),
    }
    let after = text(dev.alloc(4096))?;
    drop(after);
    check(read(&dev, &kept)? == vec![7u8; 4096], "an earlier allocation's data changed")
}

fn sticky_kernel_fault(backend: &str) -> Result<(), String> {
    let rt = Runtime::discover();
    let (dev, other) = (device(&rt, backend, 0)?, device(&rt, backend, 1)?);
    let elsewhere = filled(&other, &[3u8; 1024])?;
    let port = gpuport_conformance::builtin_ports().into_iter().find(|p| p.name == backend).ok_or("no port")?;
    let k = port.kernel.ok_or("no test kernel")?;
    let module = text(dev.load_module(k.image))?;
    let fill = text(dev.kernel(&module, k.name))?;
    let s = text(dev.create_stream(StreamFlags::NON_BLOCKING, 0))?;
    let b = text(dev.alloc(4096))?;
    let args = [KernelArg::buffer(&b), KernelArg::scalar(1024u32), KernelArg::scalar(1u32)];
    // A kernel fault is reported where the work is waited for, not by the launch.
    text(s.launch(&fill, &text(LaunchConfig::for_items(1024, 128))?, &args))?;
    let err = s.synchronize().err().ok_or("the stream's synchronize succeeded after a kernel fault")?;
    check(names(&err, "ILLEGAL_ADDRESS", "IllegalAddress"), format!("the fault is not named: {err}"))?;
    // From then on the device refuses work, naming the cause.
    for (what, r) in [
        ("synchronize", dev.synchronize().map(|_| ())),
        ("alloc", dev.alloc(64).map(|_| ())),
        ("create_stream", dev.create_stream(StreamFlags::empty(), 0).map(|_| ())),
    ] {
        let e = r.err().ok_or(format!("{what} succeeded on a failed device"))?;
        check(names(&e, "ILLEGAL_ADDRESS", "IllegalAddress"), format!("{what} does not name the cause: {e}"))?;
    }
    // The other device and its data are untouched, and discovery still lists both.
    check(read(&other, &elsewhere)? == vec![3u8; 1024], "the other device's data changed")?;
    let again = Runtime::discover();
    let listed = again.device_ids().into_iter().filter(|d| d.kind.name() == backend).count();
    check(listed == 2, format!("discovery lists {listed} {backend} devices after the fault"))
}

fn failure_in_pipeline(backend: &str) -> Result<(), String> {
    let rt = Runtime::discover();
    let (dev, other) = (device(&rt, backend, 0)?, device(&rt, backend, 1)?);
    let elsewhere = filled(&other, &[9u8; 512])?;
    let s = text(dev.create_stream(StreamFlags::NON_BLOCKING, 0))?;
    let bufs: Vec<Buffer> = (0..4).map(|_| text(dev.alloc(1 << 16))).collect::<Result<_, _>>()?;
    let mut failed = None;
    for pair in bufs.windows(2) {
        // The fourth copy of the process fails when it runs.
        if let Err(e) = s.copy(&pair[0], 0, &pair[1], 0, 1 << 16) {
            failed = Some(e);
            break;
        }
    }
    let err = match failed {
        Some(e) => e,
        None => s.synchronize().err().ok_or("the pipeline completed despite the fault")?,
    };
    check(names(&err, "LAUNCH_FAILED", "LaunchFailure"), format!("the fault is not named: {err}"))?;
    check(read(&other, &elsewhere)? == vec![9u8; 512], "the other device's data changed")
}

fn device_lost(backend: &str) -> Result<(), String> {
    let rt = Runtime::discover();
    let (dev, other) = (device(&rt, backend, 0)?, device(&rt, backend, 1)?);
    let elsewhere = filled(&other, &[5u8; 256])?;
    let s = text(dev.create_stream(StreamFlags::NON_BLOCKING, 0))?;
    let b = text(dev.alloc(1 << 16))?;
    let mut lost = None;
    for i in 0..4u8 {
        if let Err(e) = s.memset(&b, 0, 1 << 16, i) {
            lost = Some(e);
            break;
        }
    }
    let err = lost.ok_or("every memset succeeded on a lost device")?;
    check(matches!(err, Error::Vendor { .. }), format!("not a vendor error: {err:?}"))?;
    check(s.synchronize().is_err(), "the lost device's stream synchronized")?;
    // Discovery still reports the backend, the lost device with its reason and the other
    // one usable.
    let again = Runtime::discover();
    let Some(gpuport::BackendStatus::Available { devices, .. }) = again.report_for(backend).map(|r| &r.status) else {
        return Err(format!("{backend} is unavailable after losing one device"));
    };
    check(devices.len() == 2, format!("{} devices listed", devices.len()))?;
    check(devices[0].name.starts_with("unavailable: "), format!("the lost device is listed as {:?}", devices[0].name))?;
    check(read(&device(&again, backend, 1)?, &elsewhere)? == vec![5u8; 256], "the other device's data changed")
}

fn no_device_after_init(backend: &str) -> Result<(), String> {
    let rt = Runtime::discover();
    let report = rt.report_for(backend).ok_or("the backend is not in the report")?;
    match &report.status {
        gpuport::BackendStatus::Unavailable(e) => {
            check(names(e, "NO_DEVICE", "NoDevice"), format!("the reason does not say why: {e}"))?
        }
        gpuport::BackendStatus::Available { .. } => return Err("available although the driver has no device".into()),
    }
    check(rt.device("host").is_ok(), "the host is not usable")
}

/// The other vendor backend (both doubles are loaded in these runs).
fn other_vendor(backend: &str) -> &'static str {
    if backend == "cuda" {
        "rocm"
    } else {
        "cuda"
    }
}

/// An array on the other vendor's device with a write still pending on its stream (held
/// back by `gate` when one is given), and a stream of `backend` told to wait for it
/// through the array's pending work — across backends, a host callback on that stream.
fn waiting_across_backends(
    backend: &str,
    gate: Option<&gpuport_conformance::Gate>,
) -> Result<(AnyDevice, gpuport::AnyStream, gpuport::Array), String> {
    let rt = gpuport_conformance::discover_with_builtin_ports();
    let (dev, other) = (device(&rt, backend, 0)?, device(&rt, other_vendor(backend), 0)?);
    let src = text(gpuport::Array::from_slice(&other, &[7u8; 4096], &[4096]))?;
    let a = text(gpuport::Array::zeros(&other, &[4096], gpuport::DType::U8))?;
    let writer = text(other.create_stream(StreamFlags::NON_BLOCKING, 0))?;
    if let Some(gate) = gate {
        gate.block(&writer).map_err(|f| f.to_string())?;
    }
    text(gpuport::CopyEngine::default().copy_on(&src, &a, &writer))?;
    let waiter = text(dev.create_stream(StreamFlags::NON_BLOCKING, 0))?;
    text(a.wait_pending(&waiter, gpuport::Access::Read))?;
    Ok((dev, waiter, a))
}

/// Work on one vendor's stream ordered after another vendor's: the waiting stream's later
/// work does not run until the other stream's write is done (a callback of one backend
/// may wait on the other backend's event; only its own driver is off limits there).
fn cross_backend_wait_orders(backend: &str) -> Result<(), String> {
    let gate = gpuport_conformance::Gate::default();
    let _open = gpuport_conformance::OpenOnDrop(gate.clone());
    let (dev, waiter, a) = waiting_across_backends(backend, Some(&gate))?;
    let after = text(dev.create_event(gpuport::EventFlags::DISABLE_TIMING))?;
    text(waiter.record(&after))?;
    std::thread::sleep(std::time::Duration::from_millis(50));
    check(!text(after.query())?, "the waiting stream ran ahead of the other backend's write")?;
    gate.open();
    text(waiter.synchronize())?;
    check(text(after.query())?, "the waiting stream's work did not complete")?;
    check(text(a.to_vec::<u8>())? == vec![7u8; 4096], "the other backend's write is lost")
}

/// The other vendor's wait fails: the waiting stream keeps the error, its next
/// synchronize reports it once (naming the failed call), and nothing is lost in a log.
fn cross_backend_wait_fails(backend: &str) -> Result<(), String> {
    let (_dev, waiter, _a) = waiting_across_backends(backend, None)?;
    let err = waiter.synchronize().err().ok_or("the failed wait across backends was not reported")?;
    check(matches!(err, Error::StreamWork { .. }), format!("not the stream's kept error: {err:?}"))?;
    check(names(&err, "cuEventSynchronize", "hipEventSynchronize"), format!("the failed call is not named: {err}"))?;
    text(waiter.synchronize()).map_err(|e| format!("the error was reported twice: {e}"))
}

/// The child: runs one scenario and exits with its verdict.
fn child(name: &str) -> ! {
    let backend = std::env::var("GPUPORT_CONFORMANCE_BACKENDS").unwrap_or_default();
    let scenario = SCENARIOS.iter().find(|s| s.name == name);
    let verdict = match scenario {
        Some(s) => (s.run)(&backend),
        None => Err(format!("no scenario {name}")),
    };
    gpuport::release::flush();
    match verdict {
        Ok(()) => std::process::exit(0),
        Err(why) => {
            eprintln!("fault scenario {name} on {backend}: {why}");
            std::process::exit(1)
        }
    }
}

fn parent(name: &'static str, fault: &'static str) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| Failed::from(e.to_string()))?;
    let out = Command::new(exe)
        .args([CHILD, name])
        .env("GPUPORT_DOUBLE_FAULTS", fault)
        .output()
        .map_err(|e| Failed::from(format!("cannot start the child: {e}")))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(Failed::from(format!("{fault}: the child ended with {}:\n{stderr}", out.status)));
    }
    if stderr.contains("panicked") {
        return Err(Failed::from(format!("{fault}: the child panicked:\n{stderr}")));
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CHILD) {
        child(args.get(2).map(String::as_str).unwrap_or(""));
    }
    let backend = std::env::var("GPUPORT_CONFORMANCE_BACKENDS").unwrap_or_default();
    let library = match backend.as_str() {
        "cuda" => std::env::var_os("GPUPORT_CUDA_LIBRARY"),
        "rocm" => std::env::var_os("GPUPORT_HIP_LIBRARY"),
        _ => None,
    };
    let on_double = library.is_some_and(|l| l.to_string_lossy().contains("/doubles/"));
    let trials = SCENARIOS
        .iter()
        .map(|s| {
            let fault = if backend == "cuda" { s.cuda } else { s.hip };
            let trial = Trial::test(format!("{backend}::{}", s.name), move || parent(s.name, fault));
            if on_double {
                trial
            } else {
                trial
                    .with_ignored_flag(true)
                    .with_kind("needs a driver double: cargo xtask test --backend cuda|rocm --double")
            }
        })
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}
