//! The gpuport demo: register the ext device (a plugin, as any port is), discover
//! backends, print what each has (or why it is unavailable), then run a small pipeline on
//! the default device (`GPUPORT_DEVICE`, else the host): allocate, copy in, work on two
//! streams joined by an event, copy out, verify, and print event-timed figures.
//!
//! `cargo run --example demo`; `GPUPORT_DEVICE=ext:0` runs it on the ext device,
//! `GPUPORT_DEVICE=cuda:0` on a GPU.

use std::process::ExitCode;

use gpuport::{AnyDevice, Array, Backend, DType, EventFlags, Runtime, StreamFlags};

fn pipeline(dev: &AnyDevice) -> gpuport::Result<()> {
    const N: usize = 16 << 20; // 16 Mi f32 = 64 MiB
    let bytes = N * 4;
    let input: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5).collect();

    let upload = dev.create_stream(StreamFlags::NON_BLOCKING, 0)?;
    let work = dev.create_stream(StreamFlags::NON_BLOCKING, 0)?;
    let t0 = dev.create_event(EventFlags::empty())?;
    let uploaded = dev.create_event(EventFlags::empty())?;
    let copied = dev.create_event(EventFlags::empty())?;
    let cleared = dev.create_event(EventFlags::empty())?;

    let staging = dev.alloc_pinned(bytes, Default::default())?;
    let a = dev.alloc(bytes)?;
    let b = dev.alloc(bytes)?;

    // Stage the input in pinned memory, then upload and copy on two streams.
    upload.write(gpuport::as_bytes(&input), &staging, 0)?;
    upload.record(&t0)?;
    upload.copy(&staging, 0, &a, 0, bytes)?; // host → device
    upload.record(&uploaded)?;
    work.wait(&uploaded)?; // the second stream starts only when the upload is done
    work.copy(&a, 0, &b, 0, bytes)?; // device → device
    work.record(&copied)?;
    work.memset(&a, 0, bytes, 0)?; // a is free to reuse once copied
    work.record(&cleared)?;
    work.synchronize()?;

    let out = Array::from_buffer(dev, b.clone(), 0, DType::F32, gpuport::Layout::contiguous(&[N])?)?;
    let result = out.to_vec::<f32>()?; // device → host
    if result != input {
        return Err(gpuport::Error::invalid_argument("pipeline result differs from the input"));
    }
    // Each figure is one operation's bytes over that operation's time, between the events
    // recorded just before and just after it on its stream.
    let upload_ms = t0.elapsed_ms(&uploaded)?;
    let copy_ms = uploaded.elapsed_ms(&copied)?;
    let clear_ms = copied.elapsed_ms(&cleared)?;
    let gbps = |ms: f32| if ms > 0.0 { bytes as f64 / (f64::from(ms) / 1e3) / 1e9 } else { f64::INFINITY };
    println!("pipeline on {}: {} MiB verified", dev.id(), bytes >> 20);
    println!("  upload  (pinned → device, stream 1):            {upload_ms:8.3} ms  {:7.1} GB/s", gbps(upload_ms));
    println!("  copy    (device → device, stream 2 after event): {copy_ms:8.3} ms  {:7.1} GB/s", gbps(copy_ms));
    println!("  memset  (device, stream 2):                     {clear_ms:8.3} ms  {:7.1} GB/s", gbps(clear_ms));
    Ok(())
}

const USAGE: &str = "\
usage: cargo run --example demo [-- --help]

Registers the ext device, discovers every backend and prints each with its devices (or
why it is unavailable), then runs a two-stream pipeline on the default device and prints
event-timed figures.

  GPUPORT_DEVICE=ext:0     run the pipeline on another device (default: host)
  GPUPORT_BACKENDS=host    limit discovery to these backends
";

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        None => {}
        Some("-h" | "--help") => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => {
            eprint!("unknown argument {other:?}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    // The ext device is a plugin: a library user registers it (or any port) before
    // discovery, and then `ext:0` is a device string like any other.
    let ext = gpuport_ext::ExtBackend::load(&Default::default()).and_then(Runtime::register_plugin);
    if let Err(e) = ext {
        eprintln!("the ext device is not registered: {e}");
    }
    let rt = Runtime::discover();
    println!("gpuport backends:");
    print!("{rt}");
    println!("collectives engines:");
    for engine in gpuport::collective::engines() {
        match engine.status {
            Ok(version) => println!("{:<6} {version}", engine.name),
            Err(reason) => println!("{:<6} unavailable — {reason}", engine.name),
        }
    }
    let dev = match rt.default_device() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no default device: {e}");
            return ExitCode::FAILURE;
        }
    };
    match pipeline(&dev) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pipeline failed: {e}");
            ExitCode::FAILURE
        }
    }
}
