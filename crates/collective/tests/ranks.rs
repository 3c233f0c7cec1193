//! The collectives with several ranks: run by `cargo xtask test` under `mpiexec -n 2` and
//! `-n 4` (the PyPI `mpich` wheel's), one test at a time so every rank calls the same
//! collectives in the same order. Ignored by default: without a launcher there is no world
//! to test (`mpi::tests` checks what a process without one is told).
//!
//! Every input is a function of the rank and the element's index, so each rank computes
//! the expected result of every collective from the ranks' inputs on its own.

use gpuport_collective::{Communicator, ReduceOp};
use gpuport_runtime::{AnyDevice, Array, Backend, DType, DefaultStream, Error, Runtime};

fn world() -> Communicator {
    Communicator::world().expect("run under mpiexec (cargo xtask test does)")
}

/// The devices whose arrays the collectives take here: the host, the ext device, and the
/// first device of CUDA and of ROCm where there is one (a GPU, or a driver double:
/// `cargo xtask test` runs these tests again on each double) — staged through pinned
/// memory.
fn devices() -> Vec<AnyDevice> {
    static EXT: std::sync::Once = std::sync::Once::new();
    EXT.call_once(|| {
        let ext = gpuport_ext::ExtBackend::load(&Default::default()).expect("the ext device loads");
        Runtime::register_plugin(ext).expect("the ext device registers");
    });
    let rt = Runtime::discover();
    let mut found = vec![rt.device("host").unwrap(), rt.device("ext:0").unwrap()];
    found.extend(["cuda:0", "rocm:0"].into_iter().filter_map(|name| rt.device(name).ok()));
    found
}

/// Sizes: empty, one element, odd, and past 4 MiB of `f64` (past any internal chunk).
const SIZES: [usize; 4] = [0, 1, 1001, (4 << 20) / 8 + 3];

/// Rank `r`'s input at index `i` (small integers: every dtype holds sums and products
/// exactly).
fn input(r: usize, i: usize) -> f64 {
    ((r * 3 + i * 7) % 5) as f64 + 1.0
}

/// The dtypes checked, with how a value is written and read.
const DTYPES: [DType; 6] = [DType::I8, DType::U16, DType::I32, DType::U64, DType::F32, DType::F64];

fn array(dev: &AnyDevice, dtype: DType, values: &[f64]) -> Array {
    let bytes: Vec<u8> = values.iter().flat_map(|&v| encode(dtype, v)).collect();
    let a = Array::empty(dev, &[values.len()], dtype).unwrap();
    a.copy_from_bytes(&bytes).unwrap();
    a
}

fn encode(dtype: DType, v: f64) -> Vec<u8> {
    match dtype {
        DType::I8 => (v as i8).to_le_bytes().to_vec(),
        DType::U16 => (v as u16).to_le_bytes().to_vec(),
        DType::I32 => (v as i32).to_le_bytes().to_vec(),
        DType::U64 => (v as u64).to_le_bytes().to_vec(),
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        _ => v.to_le_bytes().to_vec(),
    }
}

fn values(a: &Array) -> Vec<f64> {
    let bytes = a.to_bytes().unwrap();
    let size = a.dtype().itemsize().unwrap();
    bytes
        .chunks(size)
        .map(|c| match a.dtype() {
            DType::I8 => f64::from(c[0] as i8),
            DType::U8 => f64::from(c[0]),
            DType::U16 => f64::from(u16::from_le_bytes([c[0], c[1]])),
            DType::I32 => f64::from(i32::from_le_bytes(c.try_into().unwrap())),
            DType::U64 => u64::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::F32 => f64::from(f32::from_le_bytes(c.try_into().unwrap())),
            _ => f64::from_le_bytes(c.try_into().unwrap()),
        })
        .collect()
}

fn reduced(op: ReduceOp, size: usize, i: usize) -> f64 {
    let all = (0..size).map(|r| input(r, i));
    match op {
        ReduceOp::Sum => all.sum(),
        ReduceOp::Prod => all.product(),
        ReduceOp::Min => all.fold(f64::INFINITY, f64::min),
        _ => all.fold(f64::NEG_INFINITY, f64::max),
    }
}

#[test]
#[ignore = "needs an MPI launcher: cargo xtask test runs it under mpiexec -n 2 and -n 4"]
fn all_reduce_every_op_dtype_and_size_in_place_and_out() {
    let comm = world();
    let (rank, size) = (comm.rank(), comm.size());
    for dev in devices() {
        for dtype in DTYPES {
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
                // Products of 4 ranks' values up to 5 overflow i8: smaller sizes for them.
                let sizes: &[usize] = if op == ReduceOp::Prod { &SIZES[..3] } else { &SIZES };
                for &n in sizes {
                    let mine: Vec<f64> = (0..n).map(|i| input(rank, i)).collect();
                    let want: Vec<f64> = (0..n).map(|i| reduced(op, size, i)).collect();
                    let fits = |v: &f64| dtype != DType::I8 || *v <= 127.0;
                    if !want.iter().all(fits) {
                        continue;
                    }
                    let x = array(&dev, dtype, &mine);
                    comm.all_reduce(&x, op, None, None).unwrap().wait().unwrap();
                    assert_eq!(values(&x), want, "in place: {op:?} {dtype} n={n} on {}", dev.id());
                    let x = array(&dev, dtype, &mine);
                    let out = Array::zeros(&dev, &[n], dtype).unwrap();
                    comm.all_reduce(&x, op, Some(&out), None).unwrap().wait().unwrap();
                    assert_eq!(values(&out), want, "out of place: {op:?} {dtype} n={n} on {}", dev.id());
                    assert_eq!(values(&x), mine, "the input is unchanged");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an MPI launcher: cargo xtask test runs it under mpiexec -n 2 and -n 4"]
fn broadcast_reduce_gather_scatter_and_all_to_all() {
    let comm = world();
    let (rank, size) = (comm.rank(), comm.size());
    for dev in devices() {
        for &n in &SIZES[..3] {
            let mine: Vec<f64> = (0..n).map(|i| input(rank, i)).collect();
            for root in 0..size {
                let x = array(&dev, DType::F64, &mine);
                comm.broadcast(&x, root, None).unwrap().wait().unwrap();
                let want: Vec<f64> = (0..n).map(|i| input(root, i)).collect();
                assert_eq!(values(&x), want, "broadcast from {root}, n={n}");
                let x = array(&dev, DType::I32, &mine);
                comm.reduce(&x, ReduceOp::Sum, root, None, None).unwrap().wait().unwrap();
                if rank == root {
                    let want: Vec<f64> = (0..n).map(|i| reduced(ReduceOp::Sum, size, i)).collect();
                    assert_eq!(values(&x), want, "reduce to {root}, n={n}");
                }
            }
            let x = array(&dev, DType::F32, &mine);
            let gathered = Array::zeros(&dev, &[n * size], DType::F32).unwrap();
            comm.all_gather(&x, &gathered, None).unwrap().wait().unwrap();
            let want: Vec<f64> = (0..size).flat_map(|r| (0..n).map(move |i| input(r, i))).collect();
            assert_eq!(values(&gathered), want, "all_gather, n={n}");
            // Each rank's x: `size` blocks of n; block b of the sum to rank b.
            let long: Vec<f64> = (0..n * size).map(|i| input(rank, i)).collect();
            let x = array(&dev, DType::U64, &long);
            let out = Array::zeros(&dev, &[n], DType::U64).unwrap();
            comm.reduce_scatter(&x, ReduceOp::Sum, &out, None).unwrap().wait().unwrap();
            let want: Vec<f64> = (0..n).map(|i| reduced(ReduceOp::Sum, size, rank * n + i)).collect();
            assert_eq!(values(&out), want, "reduce_scatter, n={n}");
            let out = Array::zeros(&dev, &[n * size], DType::U64).unwrap();
            comm.all_to_all(&x, &out, None).unwrap().wait().unwrap();
            let want: Vec<f64> = (0..size).flat_map(|r| (0..n).map(move |i| input(r, rank * n + i))).collect();
            assert_eq!(values(&out), want, "all_to_all, n={n}");
        }
    }
}

#[test]
#[ignore = "needs an MPI launcher: cargo xtask test runs it under mpiexec -n 2 and -n 4"]
fn send_and_recv_around_a_ring_and_split_and_dup() {
    let comm = world();
    let (rank, size) = (comm.rank(), comm.size());
    let dev = &devices()[0];
    let mine: Vec<f64> = (0..1001).map(|i| input(rank, i)).collect();
    let x = array(dev, DType::F64, &mine);
    let got = Array::zeros(dev, &[1001], DType::F64).unwrap();
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    // Even ranks send first, odd ones receive first: no two ranks wait on each other.
    if rank % 2 == 0 {
        comm.send(&x, next, 7, None).unwrap().wait().unwrap();
        comm.recv(&got, prev, 7, None).unwrap().wait().unwrap();
    } else {
        comm.recv(&got, prev, 7, None).unwrap().wait().unwrap();
        comm.send(&x, next, 7, None).unwrap().wait().unwrap();
    }
    assert_eq!(values(&got), (0..1001).map(|i| input(prev, i)).collect::<Vec<_>>());

    let halves = comm.split(Some((rank % 2) as u32), rank as i32).unwrap().expect("every rank has a color");
    assert_eq!(halves.size(), size / 2 + usize::from(size % 2 == 1 && rank % 2 == 0));
    assert_eq!(halves.rank(), rank / 2);
    let one = array(dev, DType::I32, &[1.0]);
    halves.all_reduce(&one, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    assert_eq!(values(&one), vec![halves.size() as f64]);
    let none = comm.split(if rank == 0 { Some(0) } else { None }, 0).unwrap();
    assert_eq!(none.map(|c| c.size()), (rank == 0).then_some(1));
    let copy = comm.dup().unwrap();
    assert_eq!((copy.rank(), copy.size()), (rank, size));
    copy.barrier().unwrap();
    assert!(!copy.engine_version().is_empty() && copy.engine() == "MPI");
}

#[test]
#[ignore = "needs an MPI launcher: cargo xtask test runs it under mpiexec -n 2 and -n 4"]
fn a_collective_runs_after_the_work_before_it_and_before_the_work_after() {
    let comm = world();
    let size = comm.size();
    let dev = &devices()[0];
    let x = Array::zeros(dev, &[4096], DType::U8).unwrap();
    let y = Array::zeros(dev, &[4096], DType::U8).unwrap();
    let stream = dev.create_stream(Default::default(), 0).unwrap();
    // The stream is held; behind the gate, x is set to 1s, then reduced, then copied to y.
    let (open, gate) = std::sync::mpsc::channel::<()>();
    stream
        .host_callback(Box::new(move || {
            let _ = gate.recv();
        }))
        .unwrap();
    stream.memset(x.buffer(), x.byte_offset(), 4096, 1).unwrap();
    let work = comm.all_reduce(&x, ReduceOp::Sum, None, Some(&stream)).unwrap();
    stream.copy(x.buffer(), x.byte_offset(), y.buffer(), y.byte_offset(), 4096).unwrap();
    assert!(!work.is_done().unwrap(), "the collective waits behind the held stream");
    open.send(()).unwrap();
    work.wait().unwrap();
    stream.synchronize().unwrap();
    assert_eq!(values(&x), vec![size as f64; 4096], "the reduction saw the 1s written before it");
    assert_eq!(values(&y), vec![size as f64; 4096], "the copy after it saw its result");
    // An array's pending work orders another stream after the collective.
    let z = Array::zeros(dev, &[4096], DType::U8).unwrap();
    let held = dev.create_stream(Default::default(), 0).unwrap();
    let (open, gate) = std::sync::mpsc::channel::<()>();
    held.host_callback(Box::new(move || {
        let _ = gate.recv();
    }))
    .unwrap();
    held.memset(z.buffer(), z.byte_offset(), 4096, 2).unwrap();
    z.record_access(&held, gpuport_runtime::Access::Write).unwrap();
    let work = comm.all_reduce(&z, ReduceOp::Max, None, None).unwrap();
    assert!(!work.is_done().unwrap(), "the collective waits for the array's pending write on another stream");
    open.send(()).unwrap();
    work.wait().unwrap();
    assert_eq!(values(&z), vec![2.0; 4096]);
    dev.default_stream(DefaultStream::Legacy).unwrap().synchronize().unwrap();
    // A wait from the stream's own earlier work would never end: refused, not a hang.
    let (hand, handed) = std::sync::mpsc::channel::<gpuport_collective::Work>();
    let (tell, told) = std::sync::mpsc::channel();
    stream
        .host_callback(Box::new(move || {
            if let Ok(work) = handed.recv() {
                let _ = tell.send(work.wait());
            }
        }))
        .unwrap();
    hand.send(comm.all_reduce(&x, ReduceOp::Sum, None, Some(&stream)).unwrap()).unwrap();
    let answer = told.recv_timeout(std::time::Duration::from_secs(60)).expect("the wait returned");
    assert!(matches!(answer, Err(Error::WouldDeadlock { .. })), "{answer:?}");
    stream.synchronize().unwrap();
    assert_eq!(values(&x), vec![(size * size) as f64; 4096], "the collective ran once the callback returned");
}

#[test]
#[ignore = "needs an MPI launcher: cargo xtask test runs it under mpiexec -n 2 and -n 4"]
fn collectives_queued_without_waiting_keep_their_order() {
    let comm = world();
    let (rank, size) = (comm.rank(), comm.size());
    let dev = &devices()[0];
    // A chain on one array, none waited for until the last: whichever of them start at once
    // (the stream idle) and whichever queue behind the one before, each sums the last one's
    // result.
    let x = Array::from_slice(dev, &[1.0f64; 4], &[4]).unwrap();
    let works: Vec<_> = (0..12).map(|_| comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap()).collect();
    works.last().unwrap().wait().unwrap();
    assert_eq!(values(&x), vec![(size as f64).powi(12); 4], "twelve sums in a row");
    assert!(works.iter().all(|w| w.is_done().unwrap()));
    // Every rank sends a message large enough to need its receiver (past MPICH's eager limit)
    // before it receives, each on a stream of its own: a send started at once must not hold
    // the caller until its receiver is there.
    let n = (4 << 20) / 8;
    let mine: Vec<f64> = (0..n).map(|i| input(rank, i)).collect();
    let big = array(dev, DType::F64, &mine);
    let got = Array::zeros(dev, &[n], DType::F64).unwrap();
    let (sending, receiving) =
        (dev.create_stream(Default::default(), 0).unwrap(), dev.create_stream(Default::default(), 0).unwrap());
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let sent = comm.send(&big, next, 9, Some(&sending)).unwrap();
    let received = comm.recv(&got, prev, 9, Some(&receiving)).unwrap();
    received.wait().unwrap();
    sent.wait().unwrap();
    assert_eq!(values(&got), (0..n).map(|i| input(prev, i)).collect::<Vec<_>>(), "the ring's message");
}

#[test]
#[ignore = "needs an MPI launcher: cargo xtask test runs it under mpiexec -n 2 and -n 4"]
fn bad_input_is_refused_on_the_calling_rank_before_any_traffic() {
    let comm = world();
    let size = comm.size();
    let dev = &devices()[0];
    let x = Array::zeros(dev, &[8], DType::F32).unwrap();
    let small = Array::zeros(dev, &[8 * size - 1], DType::F32).unwrap();
    let is_invalid = |r: Result<gpuport_collective::Work, Error>| matches!(r, Err(Error::InvalidArgument { .. }));
    assert!(is_invalid(comm.broadcast(&x, size, None)), "a root past the last rank");
    assert!(is_invalid(comm.send(&x, size, 0, None)), "a send to a rank outside");
    assert!(is_invalid(comm.all_gather(&x, &small, None)), "all_gather into too small a buffer");
    let strided = Array::zeros(dev, &[8, 2], DType::F32).unwrap().slice(1, 0, Some(1), 1).unwrap();
    assert!(is_invalid(comm.all_reduce(&strided, ReduceOp::Sum, None, None)), "a strided array");
    assert!(is_invalid(comm.all_reduce(&x.to_read_only(), ReduceOp::Sum, None, None)), "a read-only result");
    let half = Array::zeros(dev, &[8], DType::F16).unwrap();
    let err = comm.all_reduce(&half, ReduceOp::Sum, None, None).unwrap_err();
    assert!(matches!(&err, Error::EngineUnsupported { engine: "MPI", what } if what.contains("float16")), "{err}");
    let err = comm.all_reduce(&x, ReduceOp::Avg, None, None).unwrap_err();
    assert!(matches!(err, Error::EngineUnsupported { .. }), "{err}");
    // Nothing was sent: the ranks still agree on the next collective.
    let one = array(dev, DType::I32, &[1.0]);
    comm.all_reduce(&one, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    assert_eq!(values(&one), vec![size as f64]);
}
