use gpuport_runtime::{AnyDevice, Buffer, Copy2d, DefaultStream, Error, HostAllocFlags};

use super::{pattern, read_all, stream, Gate, OpenOnDrop};
use crate::{ensure, ensure_err, Failure, Outcome, Target};

pub fn memset_odd_ranges(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let n = 1003;
    let b = dev.alloc(n)?;
    let mut model = pattern(n, 7);
    s.write(&model, &b, 0)?;
    for (i, &(off, len)) in [(0, 1), (1, 2), (3, 5), (13, 255), (511, 492), (1002, 1), (7, 0)].iter().enumerate() {
        let v = 0xA0 + i as u8;
        if i % 2 == 0 {
            s.memset(&b, off, len, v)?;
        } else {
            s.synchronize()?;
            dev.memset(&b, off, len, v)?;
        }
        model[off..off + len].fill(v);
    }
    ensure!(read_all(&s, &b)? == model, "memset results differ from the model");
    Ok(())
}

/// The kinds of buffer a copy can involve on one device.
fn buffers(dev: &AnyDevice, n: usize) -> Result<Vec<(&'static str, Buffer)>, Failure> {
    Ok(vec![
        ("device", dev.alloc(n)?),
        ("device2", dev.alloc(n)?),
        ("pinned", dev.alloc_pinned(n, HostAllocFlags::empty())?),
    ])
}

pub fn every_copy_kind(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let n = 4099;
    let bufs = buffers(dev, n)?;
    let host_buf =
        t.foreign.iter().find(|f| f.id().kind == gpuport_runtime::BackendKind::Host).map(|h| h.alloc(n)).transpose()?;
    for (si, (sname, src)) in bufs.iter().enumerate() {
        for (di, (dname, dst)) in bufs.iter().enumerate() {
            if si == di {
                continue;
            }
            let src_data = pattern(n, (si * 3 + di) as u8);
            let mut model = pattern(n, 0xEE);
            s.write(&src_data, src, 0)?;
            s.write(&model, dst, 0)?;
            for &(so, d_o, len) in &[(0usize, 0usize, n), (1, 3, 1000), (7, 2, 1), (4000, 17, 99), (5, 5, 0)] {
                s.copy(src, so, dst, d_o, len)?;
                model[d_o..d_o + len].copy_from_slice(&src_data[so..so + len]);
            }
            ensure!(read_all(&s, dst)? == model, "copy {sname} -> {dname} differs from the model");
        }
    }
    // Pageable host memory of the host backend, where the target can reach it.
    if let Some(h) = host_buf {
        if h.is_host_accessible() {
            let data = pattern(n, 77);
            let host_stream = stream(t.foreign.iter().find(|f| f.id() == h.device()).unwrap_or(dev))?;
            host_stream.write(&data, &h, 0)?;
            s.copy(&h, 0, &bufs[0].1, 0, n)?;
            ensure!(read_all(&s, &bufs[0].1)? == data, "copy from pageable host memory differs");
            // And back, into another part of it (the copy engine's direct route).
            s.copy(&bufs[0].1, 1, &h, 0, n - 1)?;
            s.synchronize()?;
            ensure!(host_stream.read_vec::<u8>(&h, 0, n - 1)? == data[1..], "copy to pageable host memory differs");
        }
    }
    Ok(())
}

/// The 2D copies `copy_2d` checks, each inside a 4099-byte buffer: uneven pitches, rows
/// packed on both sides, one row (its pitches unused), one-byte rows, none.
const SHAPES_2D: [Copy2d; 5] = [
    Copy2d { src_offset: 3, src_pitch: 64, dst_offset: 5, dst_pitch: 40, width: 33, height: 50 },
    Copy2d { src_offset: 0, src_pitch: 17, dst_offset: 1, dst_pitch: 17, width: 17, height: 200 },
    Copy2d { src_offset: 4000, src_pitch: 0, dst_offset: 9, dst_pitch: 3, width: 99, height: 1 },
    Copy2d { src_offset: 11, src_pitch: 1, dst_offset: 2, dst_pitch: 100, width: 1, height: 40 },
    Copy2d { src_offset: 0, src_pitch: 0, dst_offset: 0, dst_pitch: 0, width: 0, height: 1000 },
];

/// What `copy` does to `model` (the destination's bytes), from the source's bytes.
fn apply_2d(model: &mut [u8], src: &[u8], copy: &Copy2d) {
    for row in 0..if copy.width == 0 { 0 } else { copy.height } {
        let (s, d) = copy.row_offsets(row);
        model[d..d + copy.width].copy_from_slice(&src[s..s + copy.width]);
    }
}

pub fn copy_2d(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let n = 4099;
    let bufs = buffers(dev, n)?;
    for (si, (sname, src)) in bufs.iter().enumerate() {
        for (di, (dname, dst)) in bufs.iter().enumerate() {
            if si == di {
                continue;
            }
            let src_data = pattern(n, (si * 5 + di) as u8);
            let mut model = pattern(n, 0xC3);
            s.write(&src_data, src, 0)?;
            s.write(&model, dst, 0)?;
            for copy in &SHAPES_2D {
                s.copy_2d(src, dst, copy)?;
                apply_2d(&mut model, &src_data, copy);
            }
            ensure!(read_all(&s, dst)? == model, "2D copies {sname} -> {dname} differ from the model");
        }
    }
    // Within one buffer, spans apart: rows 0..8 of pitch 16 to the buffer's second half.
    let (a, b) = (&bufs[0].1, &bufs[1].1);
    let original = read_all(&s, a)?;
    let mut model = original.clone();
    let within = Copy2d { src_offset: 0, src_pitch: 16, dst_offset: 2048, dst_pitch: 24, width: 8, height: 60 };
    s.copy_2d(a, a, &within)?;
    apply_2d(&mut model, &original, &within);
    ensure!(read_all(&s, a)? == model, "a 2D copy within one buffer differs from the model");

    // Past the large-copy threshold (16 MiB in all; 64 KiB under Miri): rows of 1 MiB + 3
    // at uneven pitches, the bytes between them untouched.
    let width = if cfg!(miri) { (4 << 10) + 3 } else { (1 << 20) + 3 };
    let large = Copy2d { src_offset: 7, src_pitch: width + 5, dst_offset: 2, dst_pitch: width + 11, width, height: 17 };
    let span = |offset: usize, pitch: usize| offset + 16 * pitch + width + 9;
    let (src_len, dst_len) = (span(large.src_offset, large.src_pitch), span(large.dst_offset, large.dst_pitch));
    let (big_src, big_dst) = (dev.alloc(src_len)?, dev.alloc(dst_len)?);
    let src_data = pattern(src_len, 61);
    let mut model = pattern(dst_len, 62);
    s.write(&src_data, &big_src, 0)?;
    s.write(&model, &big_dst, 0)?;
    s.copy_2d(&big_src, &big_dst, &large)?;
    apply_2d(&mut model, &src_data, &large);
    ensure!(read_all(&s, &big_dst)? == model, "a 2D copy of 17 rows of {width} bytes differs from the model");

    // Between the port's devices, both ways: a path of its own where a vendor copies row
    // by row between devices.
    if let Some(other) = t.devices.get(1) {
        let (there, s1) = (other.alloc(n)?, stream(other)?);
        // Each buffer written and read through its own device's stream; the copies queued
        // on the source's.
        let sides = [(a, &s, &there, &s1, "device 0 -> device 1"), (&there, &s1, a, &s, "device 1 -> device 0")];
        for (from, from_stream, to, to_stream, what) in sides {
            let src_data = pattern(n, 71);
            let mut model = pattern(n, 72);
            from_stream.write(&src_data, from, 0)?;
            to_stream.write(&model, to, 0)?;
            to_stream.synchronize()?;
            for copy in &SHAPES_2D {
                from_stream.copy_2d(from, to, copy)?;
                apply_2d(&mut model, &src_data, copy);
            }
            from_stream.synchronize()?;
            ensure!(read_all(to_stream, to)? == model, "2D copies {what} differ from the model");
        }
    }

    // Refused before anything is queued: the destination keeps its bytes.
    let before = read_all(&s, b)?;
    let rows = |width, height, pitch| Copy2d { src_pitch: pitch, dst_pitch: pitch, width, height, ..Copy2d::default() };
    ensure_err!(s.copy_2d(a, b, &rows(16, 2, 8)), Error::InvalidArgument { .. }, "2D copy with pitch below width");
    ensure_err!(s.copy_2d(a, b, &rows(100, 41, 100)), Error::InvalidArgument { .. }, "2D copy past the end");
    let last_row_past = Copy2d { dst_offset: 3000, ..rows(100, 12, 100) };
    ensure_err!(
        s.copy_2d(a, b, &last_row_past),
        Error::InvalidArgument { .. },
        "2D copy whose last row is past the end"
    );
    ensure_err!(
        s.copy_2d(a, b, &rows(8, usize::MAX, 8)),
        Error::InvalidArgument { .. },
        "2D copy with an overflowing span"
    );
    let overlap = Copy2d { dst_offset: 8, ..rows(8, 10, 16) };
    ensure_err!(
        s.copy_2d(a, a, &overlap),
        Error::InvalidArgument { .. },
        "2D copy with overlapping spans in one buffer"
    );
    ensure!(read_all(&s, b)? == before, "a refused 2D copy changed its destination");
    Ok(())
}

pub fn large_copy(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    // Past the software devices' parallel-copy threshold (16 MiB; 64 KiB under Miri,
    // where this case shrinks with it), and not a multiple of any chunk.
    let n = if cfg!(miri) { (256 << 10) + 13 } else { (48 << 20) + 13 };
    let a = dev.alloc(n)?;
    let b = dev.alloc(n)?;
    let data = pattern(n, 42);
    s.write(&data, &a, 0)?;
    s.copy(&a, 0, &b, 0, n)?;
    ensure!(read_all(&s, &b)? == data, "a {n}-byte copy differs");
    Ok(())
}

pub fn peer_copy(t: &Target) -> Outcome {
    let (d0, d1) = (&t.devices[0], &t.devices[1]);
    let n = 1 << 20;
    let a = d0.alloc(n)?;
    let b = d1.alloc(n)?;
    let s0 = stream(d0)?;
    let s1 = stream(d1)?;
    let data = pattern(n, 5);
    s0.write(&data, &a, 0)?;
    if d0.can_access_peer(d1)? {
        d0.enable_peer_access(d1)?;
        d0.enable_peer_access(d1)?; // idempotent
    }
    // The copy is work of the stream it was queued on: with both devices' legacy default
    // streams held behind a gate, it has run once its own stream has finished — wherever
    // else a port might misplace it, it would still be held.
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    let legacy = [d0.default_stream(DefaultStream::Legacy)?, d1.default_stream(DefaultStream::Legacy)?];
    legacy.iter().try_for_each(|l| gate.block(l))?;
    s0.copy(&a, 0, &b, 0, n)?;
    s0.synchronize()?;
    ensure!(read_all(&s1, &b)? == data, "peer copy {} -> {} differs", d0.id(), d1.id());
    gate.open();
    legacy.iter().try_for_each(|l| l.synchronize())?;
    s1.copy(&b, 1, &a, 0, n - 1)?;
    s1.synchronize()?;
    ensure!(read_all(&s0, &a)?[..n - 1] == data[1..], "peer copy {} -> {} differs", d1.id(), d0.id());
    Ok(())
}

pub fn bad_ranges(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let a = dev.alloc(100)?;
    let b = dev.alloc(100)?;
    ensure_err!(s.copy(&a, 0, &b, 0, 101), Error::InvalidArgument { .. }, "copy past the end");
    ensure_err!(s.copy(&a, 99, &b, 0, 2), Error::InvalidArgument { .. }, "copy from past the end");
    ensure_err!(s.copy(&a, usize::MAX, &b, 0, 2), Error::InvalidArgument { .. }, "copy with overflowing offset");
    ensure_err!(s.copy(&a, 0, &a, 10, 20), Error::InvalidArgument { .. }, "overlapping copy");
    ensure_err!(s.memset(&a, 50, 51, 0), Error::InvalidArgument { .. }, "memset past the end");
    ensure_err!(dev.memset(&a, 101, 0, 0), Error::InvalidArgument { .. }, "device memset past the end");
    ensure_err!(s.write(&[0u8; 10], &a, 95), Error::InvalidArgument { .. }, "write past the end");
    let mut out = [0u8; 10];
    ensure_err!(s.read(&a, 91, &mut out), Error::InvalidArgument { .. }, "read past the end");
    s.synchronize()?;
    Ok(())
}
