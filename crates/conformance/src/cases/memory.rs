use gpuport_runtime::host::HostBackend;
use gpuport_runtime::{Backend, DefaultStream, Device, Error, HostAllocFlags, LoadOptions, MemoryKind, Stream};

use super::{pattern, read_all, stream};
use crate::{ensure, ensure_err, Outcome, Target};

const SIZES: &[usize] = &[0, 1, 3, 255, 256, 257, 4095, 4096, 65_537, 1 << 20, 64 << 20];

pub fn alloc_sizes(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    for &n in SIZES {
        let b = dev.alloc(n)?;
        ensure!(b.len() == n, "alloc({n}) gave {} bytes", b.len());
        ensure!(b.device() == dev.id(), "alloc on {} is owned by {}", dev.id(), b.device());
        if n == 0 {
            continue;
        }
        ensure!(b.addr() % 256 == 0, "alloc({n}) at {:#x} is not 256-byte aligned", b.addr());
        let edge = n.min(17);
        let head = pattern(edge, n as u8);
        s.write(&head, &b, 0)?;
        s.write(&head, &b, n - edge)?;
        let mut back = vec![0u8; edge];
        s.read(&b, n - edge, &mut back)?;
        ensure!(back == head, "alloc({n}): tail bytes did not round-trip");
        s.read(&b, 0, &mut back)?;
        ensure!(back == head || n < 2 * edge, "alloc({n}): head bytes did not round-trip");
    }
    Ok(())
}

pub fn alloc_async(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    for &n in &SIZES[..8] {
        let b = dev.alloc_async(n, &s)?;
        ensure!(b.len() == n, "alloc_async({n}) gave {} bytes", b.len());
        let p = pattern(n, 3);
        s.write(&p, &b, 0)?;
        ensure!(read_all(&s, &b)? == p, "alloc_async({n}) did not round-trip");
        drop(b); // freed in stream order
    }
    s.synchronize()?;
    Ok(())
}

pub fn pinned_and_managed(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    for flags in [HostAllocFlags::empty(), HostAllocFlags::PORTABLE, HostAllocFlags::DEVICE_MAP] {
        let b = dev.alloc_pinned(4099, flags)?;
        ensure!(b.is_host_accessible(), "pinned memory must be host-accessible");
        ensure!(b.memory() == MemoryKind::PinnedHost, "pinned allocation reports {:?}", b.memory());
        let p = pattern(4099, 9);
        s.write(&p, &b, 0)?;
        ensure!(read_all(&s, &b)? == p, "pinned buffer did not round-trip");
    }
    match dev.alloc_managed(1000) {
        Err(Error::Unsupported { .. }) => {}
        Err(e) => return Err(e.into()),
        Ok(b) => {
            ensure!(b.memory() == MemoryKind::Managed, "managed allocation reports {:?}", b.memory());
            let p = pattern(1000, 1);
            s.write(&p, &b, 0)?;
            ensure!(read_all(&s, &b)? == p, "managed buffer did not round-trip");
        }
    }
    Ok(())
}

/// `Device::register_host`: host memory the device did not allocate, page-locked for its
/// copies as a buffer over the same bytes, released when that buffer drops.
pub fn registered_host_memory(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let host_device = HostBackend::load(&LoadOptions::default())?.open(0)?;
    let host_stream = host_device.default_stream(DefaultStream::Legacy)?;
    let n = 65_537;
    let plain = Device::alloc(&host_device, n)?;
    let registered = match dev.register_host(&plain) {
        Err(Error::Unsupported { .. }) => return Ok(()),
        other => other?,
    };
    ensure!(
        registered.addr() == plain.addr() && registered.len() == n,
        "registering {n} bytes at {:#x} gave {} bytes at {:#x}",
        plain.addr(),
        registered.len(),
        registered.addr()
    );
    ensure!(
        registered.is_host_accessible() && registered.memory() == MemoryKind::PinnedHost,
        "registered memory must be host-accessible PinnedHost, not {:?}",
        registered.memory()
    );
    // The device's copies reach the very bytes the host allocated.
    let d = dev.alloc(n)?;
    let p = pattern(n, 21);
    s.write(&p, &d, 0)?;
    s.copy(&d, 0, &registered, 0, n)?;
    s.synchronize()?;
    let mut seen = vec![0u8; n];
    host_stream.read(&plain, 0, &mut seen)?;
    ensure!(seen == p, "a copy into registered memory did not land in the host's bytes");
    let q = pattern(n, 22);
    host_stream.write(&q, &plain, 0)?;
    s.copy(&registered, 0, &d, 0, n)?;
    ensure!(read_all(&s, &d)? == q, "a copy out of registered memory did not read the host's bytes");
    // Unregistering (the buffer's drop) leaves the memory allocated and its bytes as they were.
    drop(registered);
    host_stream.read(&plain, 0, &mut seen)?;
    ensure!(seen == q, "unregistering changed or freed the host's bytes");
    // The device's own pinned memory is already page-locked for it; device memory is not
    // host memory.
    let pinned = dev.alloc_pinned(64, HostAllocFlags::empty())?;
    let again = dev.register_host(&pinned)?;
    ensure!(again.same_allocation(&pinned), "registering the device's own pinned memory must return it as it is");
    ensure_err!(dev.register_host(&d), Error::InvalidArgument { .. }, "registering device memory");
    Ok(())
}

/// Live allocations at once in [`many_live_allocations`]: past the 256 a port's table or
/// slab of fixed size would hold.
const MANY_LIVE: usize = 320;

/// `Device::alloc` with many allocations live at once, then half of them freed and the
/// space reused: no two live allocations share a byte, each holds what was written to it,
/// and the ones that stay are untouched by the new ones.
pub fn many_live_allocations(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    // Small sizes (where ports pool or slab) and a few beyond a page.
    const SIZES: [usize; 7] = [1, 17, 255, 256, 4095, 4096, 65_537];
    let seed = |i: usize| (i * 7 + 3) as u8;
    let mut live: Vec<(usize, gpuport_runtime::Buffer)> = Vec::with_capacity(MANY_LIVE);
    for i in 0..MANY_LIVE {
        let b = dev.alloc(SIZES[i % SIZES.len()])?;
        s.write(&pattern(b.len(), seed(i)), &b, 0)?;
        live.push((i, b));
    }
    check_live(&s, &live, seed, "all live")?;
    // Every other one freed; as many made again, in the space just given back.
    let kept: Vec<(usize, gpuport_runtime::Buffer)> = live.into_iter().filter(|(i, _)| i % 2 == 0).collect();
    live = kept;
    for i in MANY_LIVE..MANY_LIVE + MANY_LIVE / 2 {
        let b = dev.alloc(SIZES[i % SIZES.len()])?;
        s.write(&pattern(b.len(), seed(i)), &b, 0)?;
        live.push((i, b));
    }
    check_live(&s, &live, seed, "after half were freed and allocated again")
}

/// No two of `live` overlap, and each holds its pattern.
fn check_live(
    s: &gpuport_runtime::AnyStream,
    live: &[(usize, gpuport_runtime::Buffer)],
    seed: impl Fn(usize) -> u8,
    when: &str,
) -> Outcome {
    let mut spans: Vec<(u64, u64, usize)> =
        live.iter().map(|(i, b)| (b.addr(), b.addr() + b.len() as u64, *i)).collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
        ensure!(
            end <= start,
            "{} live allocations ({when}): allocation {a} ends at {end:#x}, past the start of allocation {b} at {start:#x}",
            live.len()
        );
    }
    for (i, b) in live {
        ensure!(
            read_all(s, b)? == pattern(b.len(), seed(*i)),
            "{} live allocations ({when}): allocation {i} ({} bytes at {:#x}) does not hold what was written to it",
            live.len(),
            b.len(),
            b.addr()
        );
    }
    Ok(())
}

pub fn absurd_sizes(t: &Target) -> Outcome {
    let dev = t.device();
    for n in [1usize << 50, usize::MAX / 2, usize::MAX] {
        ensure_err!(dev.alloc(n), Error::OutOfMemory { .. }, format!("alloc({n})"));
        ensure_err!(
            dev.alloc_pinned(n, HostAllocFlags::empty()),
            Error::OutOfMemory { .. },
            format!("alloc_pinned({n})")
        );
    }
    // The device still works afterwards.
    let b = dev.alloc(64)?;
    ensure!(b.len() == 64, "allocation after OOM failed");
    Ok(())
}

pub fn explicit_free(t: &Target) -> Outcome {
    let dev = t.device();
    let b = dev.alloc(4096)?;
    let view = b.clone();
    ensure!(b.handle_count() == 2, "clone must share the allocation");
    ensure_err!(b.free(), Error::InvalidArgument { .. }, "freeing a buffer that a view still holds");
    let addr = view.addr();
    view.free()?;
    // Vendors may refuse to describe a freed address; if they answer, it must not be
    // the freed allocation.
    if let Ok(a) = dev.pointer_attributes(addr) {
        ensure!(
            a.memory == MemoryKind::Unregistered || a.allocation.is_none_or(|(base, _)| base != addr),
            "a freed address still reports its allocation: {a:?}"
        );
    }
    Ok(())
}

/// What the device says about every address of each kind of memory it allocates: its
/// owner, kind, host-accessibility, whether it is managed, and the allocation holding it
/// where the backend knows it (ROCm's runtime does not say).
fn check_attributes(dev: &gpuport_runtime::AnyDevice, b: &gpuport_runtime::Buffer) -> Outcome {
    let last = b.len() as u64 - 1;
    for off in [0u64, 1, 4095.min(last), last] {
        let a = dev.pointer_attributes(b.addr() + off)?;
        let what = format!("{:?} memory at offset {off}", b.memory());
        ensure!(a.device == Some(dev.id()), "{what}: owner {:?}, expected {}", a.device, dev.id());
        ensure!(a.memory == b.memory(), "{what}: kind {:?}", a.memory);
        ensure!(a.host_accessible == b.is_host_accessible(), "{what}: host-accessibility disagrees: {a:?}");
        ensure!(a.managed == (b.memory() == MemoryKind::Managed), "{what}: managed is {}", a.managed);
        if let Some((base, len)) = a.allocation {
            ensure!(base == b.addr() && len >= b.len(), "{what}: allocation range {base:#x}+{len} is wrong");
        }
    }
    Ok(())
}

pub fn pointer_attributes(t: &Target) -> Outcome {
    let dev = t.device();
    check_attributes(dev, &dev.alloc(1 << 16)?)?;
    let pinned = dev.alloc_pinned(100, HostAllocFlags::empty())?;
    check_attributes(dev, &pinned)?;
    match dev.alloc_managed(5000) {
        Err(Error::Unsupported { .. }) => {}
        Err(e) => return Err(e.into()),
        Ok(managed) => check_attributes(dev, &managed)?,
    }
    let a = dev.pointer_attributes(pinned.addr())?;
    ensure!(a.host_accessible, "pinned memory must be host-accessible: {a:?}");
    let local = 0u64;
    let a = dev.pointer_attributes(&local as *const u64 as u64)?;
    ensure!(a.memory == MemoryKind::Unregistered, "a stack address reports {a:?}");
    Ok(())
}
