//! gpuport's communicators on NCCL over the CUDA double and on RCCL over the HIP double
//! (the collectives double: NCCL's C API over the simulated devices): one rank per device
//! of this process, every collective on device arrays — each dtype family and reduction the
//! engines take, in place and out of place — ordered after work held on its stream and on
//! another stream, buffers kept alive while the collective waits, and every refusal typed.
//! The double validates what real NCCL would hang or corrupt memory on (ranks disagreeing,
//! one thread driving two ranks outside a group, freed memory used): the run fails on any
//! report. Ignored by default: `cargo xtask test --backend cuda|rocm --double` runs it.

use std::sync::mpsc;
use std::time::Duration;

use gpuport_collective::{group, Communicator, ReduceOp, Work};
use gpuport_core::{BackendKind, DType, DefaultStream, Error, Layout, StreamFlags};
use gpuport_runtime::{AnyDevice, AnyStream, Array, Runtime};

mod on_devices;
use on_devices::{kind_of, setup};

/// `a`'s bytes seen as `n` elements of `dtype` (a view of its own: no pending work of `a`'s).
fn retyped(a: &Array, dtype: DType, n: usize) -> Array {
    let layout = Layout::contiguous(&[n]).unwrap();
    Array::from_buffer(a.device(), a.buffer().clone(), a.byte_offset(), dtype, layout).unwrap()
}

/// Issues `f(rank)` for every rank inside one group, then waits for every work.
fn on_every_rank(comms: &[Communicator], f: impl Fn(usize, &Communicator) -> gpuport_core::Result<Work>) {
    let works = group(|| comms.iter().enumerate().map(|(r, c)| f(r, c)).collect::<gpuport_core::Result<Vec<_>>>())
        .expect("queued");
    for w in works {
        w.wait().expect("the collective ends well");
    }
}

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn every_collective_on_every_rank() {
    let (_turn, devices, comms) = setup();
    let expected = if devices[0].id().kind == BackendKind::Cuda { "NCCL" } else { "RCCL" };
    for (r, c) in comms.iter().enumerate() {
        assert_eq!((c.rank(), c.size(), c.engine()), (r, 2, expected));
        assert!(c.engine_version().starts_with(expected), "{}", c.engine_version());
        assert_eq!(c.device().map(|d| d.id()), Some(devices[r].id()));
    }
    let n = 1000usize; // not a multiple of any vector width: no block hides a tail

    // all_reduce in place, every reduction on f32; rank r holds r + 1 + i.
    let sum: fn(f32) -> f32 = |i| (1.0 + i) + (2.0 + i);
    let prod: fn(f32) -> f32 = |i| (1.0 + i) * (2.0 + i);
    let max: fn(f32) -> f32 = |i| 2.0 + i;
    let min: fn(f32) -> f32 = |i| 1.0 + i;
    let avg: fn(f32) -> f32 = |i| 1.5 + i;
    for (op, want) in
        [(ReduceOp::Sum, sum), (ReduceOp::Prod, prod), (ReduceOp::Max, max), (ReduceOp::Min, min), (ReduceOp::Avg, avg)]
    {
        let xs: Vec<Array> = devices
            .iter()
            .enumerate()
            .map(|(r, d)| Array::from_slice(d, &(0..n).map(|i| (r + 1 + i) as f32).collect::<Vec<_>>(), &[n]).unwrap())
            .collect();
        on_every_rank(&comms, |r, c| c.all_reduce(&xs[r], op, None, None));
        for x in &xs {
            let got = x.to_vec::<f32>().unwrap();
            for (i, v) in got.iter().enumerate() {
                assert_eq!(*v, want(i as f32), "{op:?} at {i}");
            }
        }
    }

    // Sizes: none, one, and past 4 MiB (each collective of every size the ranks agree on).
    for count in [0usize, 1, (4 << 20) / 4 + 3] {
        let xs: Vec<Array> = devices
            .iter()
            .enumerate()
            .map(|(r, d)| Array::from_slice(d, &vec![r as f32 + 0.5; count], &[count]).unwrap())
            .collect();
        let gathered: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[2 * count], DType::F32).unwrap()).collect();
        on_every_rank(&comms, |r, c| c.all_reduce(&xs[r], ReduceOp::Sum, None, None));
        on_every_rank(&comms, |r, c| c.all_gather(&xs[r], &gathered[r], None));
        for r in 0..2 {
            assert_eq!(xs[r].to_vec::<f32>().unwrap(), vec![2.0; count], "all_reduce of {count} on rank {r}");
            let want: Vec<f32> = [vec![2.0; count], vec![2.0; count]].concat();
            assert_eq!(gathered[r].to_vec::<f32>().unwrap(), want, "all_gather of {count} on rank {r}");
        }
    }

    // Out of place, other dtype families: i64 sum, bool or/and, complex64 sum.
    let ints: Vec<Array> =
        devices.iter().enumerate().map(|(r, d)| Array::from_slice(d, &[r as i64 * 10 - 7; 5], &[5]).unwrap()).collect();
    let sums: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[5], ints[0].dtype()).unwrap()).collect();
    on_every_rank(&comms, |r, c| c.all_reduce(&ints[r], ReduceOp::Sum, Some(&sums[r]), None));
    for s in &sums {
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![-4; 5]);
    }
    let flags: Vec<Array> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| {
            retyped(&Array::from_slice(d, &[(r == 0) as u8, (r == 1) as u8, 0], &[3]).unwrap(), DType::BOOL, 3)
        })
        .collect();
    let or: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[3], DType::BOOL).unwrap()).collect();
    on_every_rank(&comms, |r, c| c.all_reduce(&flags[r], ReduceOp::Max, Some(&or[r]), None));
    on_every_rank(&comms, |r, c| c.all_reduce(&flags[r], ReduceOp::Min, None, None));
    for r in 0..2 {
        assert_eq!(retyped(&or[r], DType::U8, 3).to_vec::<u8>().unwrap(), vec![1, 1, 0]);
        assert_eq!(retyped(&flags[r], DType::U8, 3).to_vec::<u8>().unwrap(), vec![0, 0, 0]);
    }
    // complex64: (re, im) pairs summed and averaged as pairs; rank r holds (r, 1), (-1, r).
    let z: Vec<Array> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| retyped(&Array::from_slice(d, &[r as f32, 1.0, -1.0, r as f32], &[4]).unwrap(), DType::C64, 2))
        .collect();
    on_every_rank(&comms, |r, c| c.all_reduce(&z[r], ReduceOp::Sum, None, None));
    for x in &z {
        assert_eq!(retyped(x, DType::F32, 4).to_vec::<f32>().unwrap(), vec![1.0, 2.0, -2.0, 1.0]);
    }
    on_every_rank(&comms, |r, c| c.all_reduce(&z[r], ReduceOp::Avg, None, None));
    for x in &z {
        assert_eq!(retyped(x, DType::F32, 4).to_vec::<f32>().unwrap(), vec![1.0, 2.0, -2.0, 1.0]);
    }

    // broadcast from rank 1; reduce into rank 0's out; all_gather; reduce_scatter; all_to_all.
    let b: Vec<Array> =
        devices.iter().enumerate().map(|(r, d)| Array::from_slice(d, &[r as u8 + 40; 7], &[7]).unwrap()).collect();
    on_every_rank(&comms, |r, c| c.broadcast(&b[r], 1, None));
    for x in &b {
        assert_eq!(x.to_vec::<u8>().unwrap(), vec![41; 7]);
    }
    let x: Vec<Array> =
        devices.iter().enumerate().map(|(r, d)| Array::from_slice(d, &[r as f64 + 0.5, 2.0], &[2]).unwrap()).collect();
    let out = Array::zeros(&devices[0], &[2], x[0].dtype()).unwrap();
    on_every_rank(&comms, |r, c| c.reduce(&x[r], ReduceOp::Sum, 0, (r == 0).then_some(&out), None));
    assert_eq!(out.to_vec::<f64>().unwrap(), vec![2.0, 4.0]);
    let gathered: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[4], x[0].dtype()).unwrap()).collect();
    on_every_rank(&comms, |r, c| c.all_gather(&x[r], &gathered[r], None));
    for g in &gathered {
        assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.5, 2.0, 1.5, 2.0]);
    }
    let whole: Vec<Array> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| Array::from_slice(d, &[1i32 + r as i32, 2, 3, 4 * (r as i32 + 1)], &[4]).unwrap())
        .collect();
    let part: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[2], whole[0].dtype()).unwrap()).collect();
    on_every_rank(&comms, |r, c| c.reduce_scatter(&whole[r], ReduceOp::Sum, &part[r], None));
    assert_eq!(part[0].to_vec::<i32>().unwrap(), vec![3, 4]);
    assert_eq!(part[1].to_vec::<i32>().unwrap(), vec![6, 12]);
    let blocks: Vec<Array> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| {
            Array::from_slice(d, &[r as u16 * 10, r as u16 * 10 + 1, r as u16 * 10 + 2, r as u16 * 10 + 3], &[4])
                .unwrap()
        })
        .collect();
    let swapped: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[4], blocks[0].dtype()).unwrap()).collect();
    on_every_rank(&comms, |r, c| c.all_to_all(&blocks[r], &swapped[r], None));
    assert_eq!(swapped[0].to_vec::<u16>().unwrap(), vec![0, 1, 10, 11]);
    assert_eq!(swapped[1].to_vec::<u16>().unwrap(), vec![2, 3, 12, 13]);

    // send and recv both ways, in one group.
    let mine: Vec<Array> =
        devices.iter().enumerate().map(|(r, d)| Array::from_slice(d, &[r as u32 + 100; 3], &[3]).unwrap()).collect();
    let theirs: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[3], mine[0].dtype()).unwrap()).collect();
    let works = group(|| {
        let mut w = Vec::new();
        for (r, c) in comms.iter().enumerate() {
            w.push(c.send(&mine[r], 1 - r, 0, None)?);
            w.push(c.recv(&theirs[r], 1 - r, 0, None)?);
        }
        Ok(w)
    })
    .unwrap();
    for w in works {
        w.wait().unwrap();
    }
    assert_eq!(theirs[0].to_vec::<u32>().unwrap(), vec![101; 3]);
    assert_eq!(theirs[1].to_vec::<u32>().unwrap(), vec![100; 3]);
}

/// Holds `stream` until the returned sender is dropped or sent to.
fn hold(stream: &AnyStream) -> mpsc::Sender<()> {
    let (open, gate) = mpsc::channel::<()>();
    stream
        .host_callback(Box::new(move || {
            let _ = gate.recv_timeout(Duration::from_secs(120));
        }))
        .expect("a gate on the stream");
    open
}

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn ordered_after_work_held_on_its_stream_and_on_the_arrays_writers() {
    let (_turn, devices, comms) = setup();
    let streams: Vec<AnyStream> =
        devices.iter().map(|d| d.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap()).collect();
    let xs: Vec<Array> = devices.iter().map(|d| Array::from_slice(d, &[1.0f32; 64], &[64]).unwrap()).collect();
    for d in &devices {
        d.synchronize().unwrap();
    }
    // Sums `xs` over both ranks on their streams while `gate` holds something rank
    // `watched`'s collective must follow: its work is not done until the gate opens.
    let sum_behind = |gate: mpsc::Sender<()>, watched: usize, why: &str, want: f32| {
        let works = group(|| {
            let each =
                comms.iter().enumerate().map(|(r, c)| c.all_reduce(&xs[r], ReduceOp::Sum, None, Some(&streams[r])));
            each.collect::<gpuport_core::Result<Vec<_>>>()
        })
        .unwrap();
        for _ in 0..20 {
            assert!(!works[watched].is_done().unwrap(), "{why}");
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(gate);
        for w in &works {
            w.wait().unwrap();
        }
        for x in &xs {
            assert_eq!(x.to_vec::<f32>().unwrap(), vec![want; 64]);
        }
    };
    // Rank 0's own stream held: neither rank's collective can end (rank 1 waits for rank 0).
    sum_behind(hold(&streams[0]), 0, "done while its stream is held", 2.0);

    // Rank 1's input written on another stream, held: the collective on rank 1's stream
    // waits for that write (the array's pending work), and sees the value written.
    let writer = devices[1].create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let fives = Array::from_slice(&devices[1], &[5.0f32; 64], &[64]).unwrap();
    devices[1].synchronize().unwrap();
    let gate = hold(&writer);
    writer.copy(fives.buffer(), 0, xs[1].buffer(), xs[1].byte_offset(), xs[1].nbytes()).unwrap();
    xs[1].record_access(&writer, gpuport_runtime::Access::Write).unwrap();
    sum_behind(gate, 1, "done before the write it must follow", 7.0);
}

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn buffers_and_communicators_live_until_the_collective_ends() {
    let (_turn, devices, comms) = setup();
    let stream = devices[0].default_stream(DefaultStream::Legacy).unwrap();
    let xs: Vec<Array> = devices.iter().map(|d| Array::from_slice(d, &[3i32; 256], &[256]).unwrap()).collect();
    let gate = hold(&stream);
    let works = group(|| {
        comms
            .iter()
            .enumerate()
            .map(|(r, c)| c.all_reduce(&xs[r], ReduceOp::Max, None, None))
            .collect::<gpuport_core::Result<Vec<_>>>()
    })
    .unwrap();
    drop(xs);
    // The arrays and the communicators are gone; the collectives have not run. The double
    // reports memory freed under queued work, and communicators destroyed with work queued.
    drop(comms);
    assert!(!works[0].is_done().unwrap());
    drop(gate);
    for w in works {
        w.wait().unwrap();
    }
}

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn what_the_engines_cannot_take_is_refused_with_its_type() {
    let (_turn, devices, comms) = setup();
    let rt = Runtime::discover();
    let host = rt.device("host").unwrap();
    let on0 = Array::from_slice(&devices[0], &[1.0f32; 4], &[4]).unwrap();
    let on1 = Array::from_slice(&devices[1], &[1.0f32; 4], &[4]).unwrap();
    let on_host = Array::from_slice(&host, &[1.0f32; 4], &[4]).unwrap();
    let kind = |r: gpuport_core::Result<Work>| kind_of(&r.map(|_| ()).unwrap_err());

    assert_eq!(kind(comms[0].all_reduce(&on_host, ReduceOp::Sum, None, None)), "BackendMismatch");
    assert_eq!(kind(comms[0].all_reduce(&on1, ReduceOp::Sum, None, None)), "BackendMismatch");
    let other_stream = devices[1].default_stream(DefaultStream::Legacy).unwrap();
    assert_eq!(kind(comms[0].all_reduce(&on0, ReduceOp::Sum, None, Some(&other_stream))), "BackendMismatch");
    let pinned_host = Array::from_buffer(
        &devices[0],
        devices[0].alloc_pinned(16, Default::default()).unwrap(),
        0,
        DType::F32,
        Layout::contiguous(&[4]).unwrap(),
    )
    .unwrap();
    assert_eq!(kind(comms[0].all_reduce(&pinned_host, ReduceOp::Sum, None, None)), "InvalidArgument");
    assert_eq!(kind(comms[0].send(&on0, 1, 3, None)), "EngineUnsupported");
    let shorts = Array::zeros(&devices[0], &[4], DType::I16).unwrap();
    assert_eq!(kind(comms[0].all_reduce(&shorts, ReduceOp::Sum, None, None)), "EngineUnsupported");
    assert_eq!(
        kind(comms[0].all_reduce(&retyped(&on0, DType::C64, 2), ReduceOp::Max, None, None)),
        "EngineUnsupported"
    );
    assert_eq!(kind_of(&comms[0].barrier().unwrap_err()), "EngineUnsupported");
    // Splitting inside a group, or with colors for the wrong number of ranks.
    let in_group = group(|| comms[0].split(Some(0), 0)).map(|_| ()).unwrap_err();
    assert_eq!(kind_of(&in_group), "InvalidArgument", "{in_group}");
    let short = Communicator::split_all(&comms, &[(Some(0), 0)]).map(|_| ()).unwrap_err();
    assert_eq!(kind_of(&short), "InvalidArgument", "{short}");

    let refused = |devices: &[AnyDevice]| kind_of(&Communicator::init_all(devices).map(|_| ()).unwrap_err());
    assert_eq!(refused(std::slice::from_ref(&host)), "BackendMismatch");
    assert_eq!(refused(&[devices[0].clone(), host]), "BackendMismatch");
    assert_eq!(refused(&[devices[0].clone(), devices[0].clone()]), "InvalidArgument");
    assert_eq!(refused(&[]), "InvalidArgument");

    // A collective issued inside a group has not started before the group ends.
    let xs = [on0, on1];
    let inside = group(|| {
        let works = comms
            .iter()
            .enumerate()
            .map(|(r, c)| c.all_reduce(&xs[r], ReduceOp::Sum, None, None))
            .collect::<gpuport_core::Result<Vec<_>>>()?;
        let early = works[0].wait().unwrap_err();
        Ok((works, early))
    })
    .unwrap();
    assert_eq!(kind_of(&inside.1), "InvalidArgument", "{}", inside.1);
    for w in inside.0 {
        w.wait().unwrap();
    }
    assert!(matches!(inside.1, Error::InvalidArgument { .. }));
}

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn ranks_one_thread_drives_split_together_into_new_communicators() {
    let (_turn, devices, comms) = setup();
    // Reversed by key: the parent's rank 0 is rank 1 of the new communicator.
    let reversed = Communicator::split_all(&comms, &[(Some(7), 1), (Some(7), 0)]).unwrap();
    let reversed: Vec<Communicator> = reversed.into_iter().map(|c| c.expect("a color: a communicator")).collect();
    let ranks: Vec<(usize, usize)> = reversed.iter().map(|c| (c.rank(), c.size())).collect();
    assert_eq!(ranks, [(1, 2), (0, 2)]);
    assert_eq!(reversed[0].device().map(|d| d.id()), Some(devices[0].id()));
    // all_gather orders the blocks by the new ranks: device 1's first.
    let parts: Vec<Array> =
        devices.iter().map(|d| Array::from_slice(d, &[d.id().ordinal as f32; 2], &[2]).unwrap()).collect();
    let outs: Vec<Array> = devices.iter().map(|d| Array::zeros(d, &[4], DType::F32).unwrap()).collect();
    on_every_rank(&reversed, |r, c| c.all_gather(&parts[r], &outs[r], None));
    for out in &outs {
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![1.0, 1.0, 0.0, 0.0]);
    }
    // A rank with no color gets none; the other is a communicator of its own.
    let alone = Communicator::split_all(&comms, &[(Some(0), 0), (None, 0)]).unwrap();
    assert!(alone[1].is_none());
    let solo = alone[0].as_ref().expect("rank 0 has a color");
    assert_eq!((solo.rank(), solo.size()), (0, 1));
    let x = Array::from_slice(&devices[0], &[4.0f32, 5.0], &[2]).unwrap();
    solo.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![4.0, 5.0]);
    // The parents still work beside their splits.
    let ys: Vec<Array> = devices.iter().map(|d| Array::from_slice(d, &[1i32, 2], &[2]).unwrap()).collect();
    on_every_rank(&comms, |r, c| c.all_reduce(&ys[r], ReduceOp::Sum, None, None));
    assert_eq!(ys[1].to_vec::<i32>().unwrap(), vec![2, 4]);
}
