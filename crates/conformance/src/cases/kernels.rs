use gpuport_runtime::{Error, KernelArg, LaunchConfig};

use super::stream;
use crate::{ensure, ensure_err, Outcome, Target};

pub fn launch_fill(t: &Target) -> Outcome {
    let k = t.kernel()?;
    let dev = t.device();
    let module = dev.load_module(k.image)?;
    let fill = dev.kernel(&module, k.name)?;
    let s = stream(dev)?;
    let n = 1000u32;
    let b = dev.alloc(4 * n as usize)?;
    s.write_slice(&vec![0u32; n as usize], &b, 0)?;
    let cfg = LaunchConfig::for_items(n, 128)?;
    s.launch(&fill, &cfg, &[KernelArg::buffer(&b), KernelArg::scalar(n), KernelArg::scalar(0xDEAD_BEEFu32)])?;
    // Ordered after the launch on the same stream.
    s.launch(&fill, &cfg, &[KernelArg::buffer(&b), KernelArg::scalar(10u32), KernelArg::scalar(7u32)])?;
    let words = s.read_vec::<u32>(&b, 0, n as usize)?;
    ensure!(words[..10].iter().all(|&w| w == 7), "the second launch did not run after the first");
    ensure!(words[10..].iter().all(|&w| w == 0xDEAD_BEEF), "the first launch did not fill the buffer");
    Ok(())
}

pub fn bad_launches(t: &Target) -> Outcome {
    let k = t.kernel()?;
    let dev = t.device();
    let module = dev.load_module(k.image)?;
    let fill = dev.kernel(&module, k.name)?;
    ensure_err!(
        dev.kernel(&module, "no_such_kernel"),
        Error::InvalidArgument { .. } | Error::Vendor { .. },
        "missing kernel"
    );
    let s = stream(dev)?;
    let b = dev.alloc(64)?;
    let zero = LaunchConfig { grid: [0, 1, 1], block: [1, 1, 1], shared_mem_bytes: 0 };
    ensure_err!(
        s.launch(&fill, &zero, &[KernelArg::buffer(&b), KernelArg::scalar(1u32), KernelArg::scalar(1u32)]),
        Error::InvalidArgument { .. },
        "zero-sized grid"
    );
    ensure_err!(
        s.launch(&fill, &LaunchConfig::for_items(1, 1)?, &[KernelArg::Buffer { buffer: b.clone(), offset: 65 }]),
        Error::InvalidArgument { .. },
        "argument offset past the buffer"
    );
    s.synchronize()?;
    Ok(())
}

/// A module or kernel made by another backend (or device) is refused by lookup and launch,
/// even when that backend uses the same kind of handle.
pub fn foreign_modules_and_kernels_refused(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let b = dev.alloc(64)?;
    let foreign = crate::registered_fill_kernel();
    let mut others: Vec<&gpuport_runtime::AnyDevice> = t.foreign.iter().collect();
    others.extend(t.devices.iter().skip(1));
    let mut tried = 0;
    for other in others {
        let Ok(module) = other.load_module(foreign.image) else { continue };
        tried += 1;
        ensure_err!(
            dev.kernel(&module, foreign.name),
            Error::BackendMismatch { .. },
            format!("a kernel lookup in a module of {}", other.id())
        );
        let kernel = other.kernel(&module, foreign.name)?;
        ensure_err!(
            s.launch(
                &kernel,
                &LaunchConfig::for_items(1, 1)?,
                &[KernelArg::buffer(&b), KernelArg::scalar(1u32), KernelArg::scalar(1u32)]
            ),
            Error::BackendMismatch { .. },
            format!("launching a kernel of {}", other.id())
        );
    }
    ensure!(tried > 0, "no other device could load a module to test with");
    s.synchronize()?;
    Ok(())
}
