use gpuport::{BackendKind, Buffer, BufferDesc, DeviceId, DynDevice, DynStream, Error, EventFlags, MemoryKind};

use super::stream;
use crate::{ensure_err, Outcome, Target};

/// Memory of a backend the target cannot reach.
fn foreign_buffer() -> Buffer {
    let desc = BufferDesc {
        addr: 0x7000_0000_0000,
        len: 4096,
        device: DeviceId::new(BackendKind::Plugin("conformance-foreign"), 0),
        memory: MemoryKind::Device,
        host_accessible: false,
    };
    // SAFETY: the buffer claims memory no backend can reach; every use must be refused
    // before anything dereferences it.
    unsafe { Buffer::from_borrowed(desc, None) }.expect("a valid description")
}

pub fn backend_mismatch(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let mine = dev.alloc(4096)?;
    let other = foreign_buffer();
    ensure_err!(s.copy(&other, 0, &mine, 0, 16), Error::BackendMismatch { .. }, "copy from another backend's memory");
    ensure_err!(s.copy(&mine, 0, &other, 0, 16), Error::BackendMismatch { .. }, "copy to another backend's memory");
    ensure_err!(s.memset(&other, 0, 16, 0), Error::BackendMismatch { .. }, "memset of another backend's memory");
    let mut out = [0u8; 4];
    ensure_err!(s.read(&other, 0, &mut out), Error::BackendMismatch { .. }, "read of another backend's memory");
    for f in &t.foreign {
        let fev = f.create_event(EventFlags::empty())?;
        ensure_err!(s.record(&fev), Error::BackendMismatch { .. }, format!("recording a {} event", f.id()));
        ensure_err!(s.wait(&fev), Error::BackendMismatch { .. }, format!("waiting on a {} event", f.id()));
        let fs = f.create_stream(Default::default(), 0)?;
        ensure_err!(
            dev.alloc_async(16, &fs),
            Error::BackendMismatch { .. },
            format!("alloc_async on a {} stream", f.id())
        );
        let ev = dev.create_event(EventFlags::empty())?;
        ensure_err!(fs.wait(&ev), Error::BackendMismatch { .. }, format!("a {} stream waiting on our event", f.id()));
    }
    s.synchronize()?;
    Ok(())
}

pub fn bad_arguments(t: &Target) -> Outcome {
    let dev = t.device();
    let module = dev.load_module(gpuport::ModuleImage::Registered("no-such-module-anywhere"));
    if let Ok(m) = module {
        ensure_err!(dev.kernel(&m, "no_such_kernel"), Error::InvalidArgument { .. }, "a missing kernel");
    }
    ensure_err!(
        dev.load_module(gpuport::ModuleImage::Ptx("not ptx at all"))
            .and(dev.load_module(gpuport::ModuleImage::Registered("no-such-module-anywhere"))),
        Error::InvalidArgument { .. } | Error::Unsupported { .. } | Error::Vendor { .. },
        "loading garbage modules"
    );
    Ok(())
}
