//! The copy engine between host, ext:0 and ext:1: chunk boundaries, odd offsets,
//! strided layouts, routes, ordering with pending work, errors, and a property test of
//! random copy sequences against a plain `Vec` model.

mod common;

use std::time::Duration;

use common::{bytes, devices};
use gpuport_runtime::{copy, Access, Array, CopyEngine, CopyRoute, DType, DefaultStream, Error, Layout, StreamFlags};
use proptest::prelude::*;

const CHUNK: usize = 1000;

fn u8_array(dev: &gpuport_runtime::AnyDevice, data: &[u8]) -> Array {
    Array::from_slice(dev, data, &[data.len()]).unwrap()
}

/// An array of `n` bytes at an odd byte offset inside a larger buffer.
fn at_odd_offset(dev: &gpuport_runtime::AnyDevice, n: usize) -> Array {
    let buf = dev.alloc(n + 8).unwrap();
    Array::from_buffer(dev, buf, 3, DType::U8, Layout::contiguous(&[n]).unwrap()).unwrap()
}

#[test]
fn round_trips_around_chunk_boundaries() {
    let (host, e0, e1) = devices();
    let engine = CopyEngine::with_chunk_bytes(CHUNK).unwrap();
    for n in [1, 2, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 1, 3 * CHUNK + 7, 10 * CHUNK - 1] {
        let data = bytes(n, n as u8);
        let src = u8_array(&host, &data);
        let a = at_odd_offset(&e0, n);
        let b = at_odd_offset(&e1, n);
        let back = at_odd_offset(&host, n);
        let chunks = n.div_ceil(CHUNK);
        assert_eq!(engine.copy(&src, &a).unwrap(), CopyRoute::Direct, "host→ext, n={n}");
        assert_eq!(engine.copy(&a, &b).unwrap(), CopyRoute::Staged { chunks }, "ext:0→ext:1, n={n}");
        assert_eq!(engine.copy(&b, &back).unwrap(), CopyRoute::Direct, "ext→host, n={n}");
        let got = back.to_vec::<u8>().unwrap();
        for (i, (g, w)) in got.iter().zip(&data).enumerate() {
            assert_eq!(g, w, "n={n}: byte {i} differs");
        }
        assert_eq!(b.to_vec::<u8>().unwrap(), data, "ext:1 holds the data, n={n}");
    }
}

#[test]
fn same_device_copies_are_device_copies() {
    let (_, e0, _) = devices();
    let data = bytes(5000, 1);
    let src = u8_array(&e0, &data);
    let dst = Array::zeros(&e0, &[5000], DType::U8).unwrap();
    assert_eq!(copy(&src, &dst).unwrap(), CopyRoute::SameDevice);
    assert_eq!(dst.to_vec::<u8>().unwrap(), data);
}

#[test]
fn strided_sources_and_destinations() {
    let (host, e0, e1) = devices();
    let engine = CopyEngine::with_chunk_bytes(64).unwrap();
    let vals: Vec<i32> = (0..7 * 9).collect();
    let src = Array::from_slice(&host, &vals, &[7, 9]).unwrap();
    // Transposed and reversed-stride sources.
    let t = src.permute(&[1, 0]).unwrap();
    let rev = src.slice(1, 8, None, -2).unwrap();
    for view in [&t, &rev] {
        let want = view.to_vec::<i32>().unwrap();
        for dev in [&e0, &e1, &host] {
            let dst = Array::zeros(dev, view.shape(), DType::I32).unwrap();
            engine.copy(view, &dst).unwrap();
            assert_eq!(dst.to_vec::<i32>().unwrap(), want, "{:?} → {}", view.shape(), dev.id());
        }
    }
    // A strided destination on ext:1, filled from ext:0; the gaps must be untouched.
    let big = Array::from_slice(&e1, &vec![-1i32; 7 * 18], &[7, 18]).unwrap();
    let every_other = big.slice(1, 0, None, 2).unwrap();
    let src0 = Array::from_slice(&e0, &vals, &[7, 9]).unwrap();
    engine.copy(&src0, &every_other).unwrap();
    assert_eq!(every_other.to_vec::<i32>().unwrap(), vals);
    let all = big.to_vec::<i32>().unwrap();
    assert!(all.iter().skip(1).step_by(2).all(|&v| v == -1), "gaps were overwritten");
    // A transposed matrix on one device: one 2D copy per source column (100 rows of one
    // byte each), not 10,000 one-byte copies.
    let sq: Vec<u8> = bytes(100 * 100, 9);
    let m = Array::from_slice(&e0, &sq, &[100, 100]).unwrap();
    let mt = m.permute(&[1, 0]).unwrap();
    let out = Array::zeros(&e0, &[100, 100], DType::U8).unwrap();
    assert_eq!(engine.copy(&mt, &out).unwrap(), CopyRoute::SameDevice);
    assert_eq!(out.to_vec::<u8>().unwrap(), mt.to_vec::<u8>().unwrap());
}

#[test]
fn strided_blocks_in_one_buffer_and_many_short_runs() {
    let (host, e0, _) = devices();
    // A matrix's even columns onto its odd columns: the two spans interleave in one
    // buffer, so no single 2D copy may do it; the result is still every row's.
    let vals: Vec<i32> = (0..8 * 6).collect();
    let m = Array::from_slice(&e0, &vals, &[8, 6]).unwrap();
    let (even, odd) = (m.slice(1, 0, None, 2).unwrap(), m.slice(1, 1, None, 2).unwrap());
    copy(&even, &odd).unwrap();
    let want: Vec<i32> = (0..8 * 6).map(|i| if i % 2 == 1 { i - 1 } else { i }).collect();
    assert_eq!(m.to_vec::<i32>().unwrap(), want);
    // Every other byte of a 20,000-byte row, to another device and back: 10,000 short
    // runs one step apart on both sides, one 2D block.
    let data = bytes(20_000, 3);
    let src = u8_array(&host, &data).slice(0, 0, None, 2).unwrap();
    let wide = Array::zeros(&e0, &[20_000], DType::U8).unwrap();
    let dst = wide.slice(0, 1, None, 2).unwrap();
    assert_eq!(copy(&src, &dst).unwrap(), CopyRoute::Direct);
    let got = wide.to_vec::<u8>().unwrap();
    assert!(got.iter().step_by(2).all(|&b| b == 0), "the gaps were written");
    assert_eq!(got.iter().skip(1).step_by(2).copied().collect::<Vec<u8>>(), src.to_vec::<u8>().unwrap());
    // And a reversed view: the block runs backwards on both sides and is turned around.
    let back = Array::zeros(&host, &[10_000], DType::U8).unwrap();
    copy(&dst.slice(0, 9_999, None, -1).unwrap(), &back.slice(0, 9_999, None, -1).unwrap()).unwrap();
    assert_eq!(back.to_vec::<u8>().unwrap(), src.to_vec::<u8>().unwrap());
}

#[test]
fn copies_wait_for_pending_work() {
    let (host, e0, _) = devices();
    let n = 4096;
    let src = Array::zeros(&host, &[n], DType::U8).unwrap();
    let slow = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let fresh = host.alloc_pinned(n, Default::default()).unwrap();
    slow.write(&[7u8; 4096], &fresh, 0).unwrap();
    slow.host_callback(Box::new(|| std::thread::sleep(Duration::from_millis(50)))).unwrap();
    slow.copy(&fresh, 0, src.buffer(), 0, n).unwrap();
    src.record_access(&slow, Access::Write).unwrap(); // the new data is pending on `slow`
    let dst = Array::zeros(&e0, &[n], DType::U8).unwrap();
    copy(&src, &dst).unwrap();
    assert!(dst.to_vec::<u8>().unwrap().iter().all(|&b| b == 7), "the copy ran before the pending write");
}

#[test]
fn copy_on_a_stream_is_asynchronous_and_recorded_as_pending() {
    let (host, e0, _) = devices();
    let data = bytes(10_000, 3);
    let src = u8_array(&host, &data);
    let dst = Array::zeros(&e0, &[10_000], DType::U8).unwrap();
    let stream = e0.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    // Hold `stream` so the copy (direct: host memory is reachable from ext's streams)
    // cannot have run when `copy_on` returns.
    let (open, gate) = std::sync::mpsc::channel::<()>();
    stream
        .host_callback(Box::new(move || {
            let _ = gate.recv_timeout(Duration::from_secs(30));
        }))
        .unwrap();
    CopyEngine::default().copy_on(&src, &dst, &stream).unwrap();
    assert!(dst.has_pending_work().unwrap(), "the copy is pending on `stream`");
    let view = dst.slice(0, 5000, None, 1).unwrap();
    open.send(()).unwrap();
    assert_eq!(view.to_vec::<u8>().unwrap(), data[5000..], "a view's reader waits for the copy");
    assert!(!dst.has_pending_work().unwrap());
}

#[test]
fn bad_copies_are_errors() {
    let (host, e0, _) = devices();
    let a = Array::zeros(&host, &[4], DType::F32).unwrap();
    let wrong_shape = Array::zeros(&e0, &[5], DType::F32).unwrap();
    let wrong_dtype = Array::zeros(&e0, &[4], DType::I32).unwrap();
    let read_only = Array::zeros(&e0, &[4], DType::F32).unwrap().to_read_only();
    assert!(matches!(copy(&a, &wrong_shape), Err(Error::InvalidArgument { .. })));
    assert!(matches!(copy(&a, &wrong_dtype), Err(Error::InvalidArgument { .. })));
    assert!(matches!(copy(&a, &read_only), Err(Error::InvalidArgument { .. })));
    let dst = Array::zeros(&e0, &[4], DType::F32).unwrap();
    let host_stream = host.default_stream(DefaultStream::Legacy).unwrap();
    let wrong_stream = CopyEngine::default().copy_on(&a, &dst, &host_stream);
    assert!(matches!(wrong_stream, Err(Error::InvalidArgument { .. })));
    let empty = Array::zeros(&e0, &[0], DType::F32).unwrap();
    assert_eq!(copy(&Array::zeros(&host, &[0], DType::F32).unwrap(), &empty).unwrap(), CopyRoute::Empty);
}

/// One step of a random copy sequence: from array `src` to array `dst`, a window of
/// `len` elements at the given starts, reversed or strided.
#[derive(Debug, Clone)]
struct Step {
    src: usize,
    dst: usize,
    src_start: usize,
    dst_start: usize,
    len: usize,
    reverse: bool,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (0usize..3, 0usize..3, 0usize..64, 0usize..64, 0usize..64, any::<bool>()).prop_map(
            |(src, dst, src_start, dst_start, len, reverse)| Step { src, dst, src_start, dst_start, len, reverse },
        ),
        1..12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_copy_sequences_match_a_vec_model(plan in steps(), chunk in 1usize..300) {
        const N: usize = 128;
        let (host, e0, e1) = devices();
        let engine = CopyEngine::with_chunk_bytes(chunk).unwrap();
        let mut model: Vec<Vec<u16>> = (0..3).map(|k| (0..N as u16).map(|i| i + 1000 * k as u16).collect()).collect();
        let arrays: Vec<Array> = [&host, &e0, &e1]
            .iter()
            .zip(&model)
            .map(|(dev, m)| Array::from_slice(dev, m, &[N]).unwrap())
            .collect();
        for step in &plan {
            let len = step.len.min(N - step.src_start).min(N - step.dst_start);
            if step.src == step.dst || len == 0 {
                continue;
            }
            let src_view = if step.reverse {
                arrays[step.src].slice(0, step.src_start + len - 1, if step.src_start == 0 { None } else { Some(step.src_start - 1) }, -1).unwrap()
            } else {
                arrays[step.src].slice(0, step.src_start, Some(step.src_start + len), 1).unwrap()
            };
            let dst_view = arrays[step.dst].slice(0, step.dst_start, Some(step.dst_start + len), 1).unwrap();
            engine.copy(&src_view, &dst_view).unwrap();
            let mut window: Vec<u16> = model[step.src][step.src_start..step.src_start + len].to_vec();
            if step.reverse {
                window.reverse();
            }
            model[step.dst][step.dst_start..step.dst_start + len].copy_from_slice(&window);
        }
        for (k, a) in arrays.iter().enumerate() {
            prop_assert_eq!(a.to_vec::<u16>().unwrap(), model[k].clone(), "array {} ({})", k, a.device_id());
        }
    }
}

#[test]
fn staging_sets_are_reused_only_once_drained() {
    // A staged copy held behind a gate keeps its staging set busy; a second copy between
    // the same devices must neither wait for it nor share its buffers.
    let (_, e0, e1) = devices();
    let engine = CopyEngine::with_chunk_bytes(CHUNK).unwrap();
    let held = e0.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let (open, gate) = std::sync::mpsc::channel::<()>();
    held.host_callback(Box::new(move || {
        let _ = gate.recv_timeout(Duration::from_secs(30));
    }))
    .unwrap();
    // One chunk, so nothing on ext:1's stream waits for `held` (see the staged pipeline).
    let first = bytes(CHUNK, 1);
    let first_dst = Array::zeros(&e0, &[first.len()], DType::U8).unwrap();
    let route = engine.copy_on(&u8_array(&e1, &first), &first_dst, &held).unwrap();
    assert_eq!(route, CopyRoute::Staged { chunks: 1 });
    for round in 0..3u8 {
        let data = bytes(5 * CHUNK, 50 + round);
        let dst = Array::zeros(&e0, &[data.len()], DType::U8).unwrap();
        engine.copy(&u8_array(&e1, &data), &dst).unwrap(); // returns while `held` is closed
        assert_eq!(dst.to_vec::<u8>().unwrap(), data, "round {round}");
    }
    open.send(()).unwrap();
    assert_eq!(first_dst.to_vec::<u8>().unwrap(), first);
}

#[test]
fn a_copy_run_on_the_source_stream_orders_the_given_stream_after_it() {
    // ext → host runs on ext:0's default stream (host streams cannot reach ext memory);
    // work queued on the host stream given to `copy_on` must still run after it.
    let (host, e0, _) = devices();
    let data = bytes(10_000, 9);
    let src = u8_array(&e0, &data);
    let dst = Array::zeros(&host, &[data.len()], DType::U8).unwrap();
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let ext_default = e0.default_stream(DefaultStream::Legacy).unwrap();
    ext_default
        .host_callback(Box::new(move || {
            let _ = gate.recv_timeout(Duration::from_secs(30));
        }))
        .unwrap();
    let stream = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    assert_eq!(CopyEngine::default().copy_on(&src, &dst, &stream).unwrap(), CopyRoute::Direct);
    // Raw work on `stream`, outside the arrays' pending work: it sees the copy only if
    // `stream` was made to wait for it.
    let seen = host.alloc(data.len()).unwrap();
    stream.copy(dst.buffer(), 0, &seen, 0, data.len()).unwrap();
    // Give an unordered `stream` the time to run its copy too early (it cannot finish
    // while the gate is closed if it is ordered), then open the gate.
    let until = std::time::Instant::now() + Duration::from_millis(200);
    while !stream.query().unwrap() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    open.send(()).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(stream.read_vec::<u8>(&seen, 0, data.len()).unwrap(), data);
    assert_eq!(dst.to_vec::<u8>().unwrap(), data);
}
