//! gpuport's NCCL and RCCL communicators made one rank at a time (`Communicator::init_rank`,
//! each rank on its own thread with the same `UniqueId`, as ranks in separate processes
//! make theirs) on the collectives double — one rank per device it presents (two; four in
//! the run with `GPUPORT_DOUBLE_DEVICES=4`): every rank joins, each thread drives its own
//! rank's collectives, and what cannot be a rank is refused with a typed
//! error. A thread that never used its device gets it made current for the engine (NCCL
//! takes the rank's device from the calling thread). Ignored by default: `cargo xtask test
//! --backend cuda|rocm --double` runs it.

use gpuport_collective::{group, Communicator, ReduceOp, UniqueId};
use gpuport_core::{BackendKind, DefaultStream, StreamFlags};
use gpuport_runtime::{AnyDevice, Array, Runtime};

mod on_devices;
use on_devices::{devices, kind_of, turn};

/// Rank `r` of `size`'s share of the collectives below, run on its own thread: what it
/// ends up with.
fn rank_body(device: &AnyDevice, id: &UniqueId, size: usize, r: usize) -> gpuport_core::Result<Vec<Vec<f32>>> {
    let comm = Communicator::init_rank(device, id, size, r)?;
    let expected = if device.id().kind == BackendKind::Cuda { "NCCL" } else { "RCCL" };
    assert_eq!((comm.rank(), comm.size(), comm.engine()), (r, size, expected));
    assert_eq!(comm.device().map(|d| d.id()), Some(device.id()));
    let mine = input(r);
    let x = Array::from_slice(device, &mine, &[N])?;
    comm.all_reduce(&x, ReduceOp::Sum, None, None)?.wait()?;
    let b = Array::from_slice(device, &[r as f32 + 10.0; 3], &[3])?;
    comm.broadcast(&b, 1, None)?.wait()?;
    let gathered = Array::zeros(device, &[size * N], gpuport_core::DType::F32)?;
    let part = Array::from_slice(device, &mine, &[N])?;
    comm.all_gather(&part, &gathered, None)?.wait()?;
    // Around a ring, each thread issuing its own rank's two sides in one group.
    let out = Array::from_slice(device, &[r as f32 + 0.5; 4], &[4])?;
    let inbox = Array::zeros(device, &[4], gpuport_core::DType::F32)?;
    let (next, before) = ((r + 1) % size, (r + size - 1) % size);
    let works = group(|| Ok([comm.send(&out, next, 0, None)?, comm.recv(&inbox, before, 0, None)?]))?;
    for w in works {
        w.wait()?;
    }
    // A duplicate of the communicator, made by each thread for its own rank.
    let twin = comm.dup()?;
    assert_eq!((twin.rank(), twin.size()), (r, size));
    let t = Array::from_slice(device, &[r as f32 + 1.0], &[1])?;
    twin.all_reduce(&t, ReduceOp::Max, None, None)?.wait()?;
    assert_eq!(t.to_vec::<f32>()?, vec![size as f32]);
    Ok(vec![x.to_vec()?, b.to_vec()?, gathered.to_vec()?, inbox.to_vec()?])
}

/// Elements per rank: not a multiple of any vector width.
const N: usize = 257;

/// Rank `r`'s input.
fn input(r: usize) -> Vec<f32> {
    (0..N).map(|i| (r + 1) as f32 * i as f32).collect()
}

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn ranks_made_on_their_own_threads_run_every_kind_of_collective() {
    // One rank per device the double presents: two, or four with GPUPORT_DOUBLE_DEVICES=4.
    let _turn = turn();
    let devices = devices();
    let size = devices.len();
    assert!(size >= 2, "two devices needed, {size} found: the doubles have two");
    // The id travels as bytes, as it would between processes.
    let made = UniqueId::new(&devices[0]).expect("a unique id");
    let id = UniqueId::from_bytes(made.as_bytes()).unwrap();
    assert_eq!(id, made);
    let results = std::thread::scope(|s| {
        let ranks: Vec<_> =
            devices.iter().enumerate().map(|(r, d)| s.spawn(move || rank_body(d, &id, size, r))).collect();
        ranks.into_iter().map(|h| h.join().expect("a rank's thread")).collect::<Vec<_>>()
    });
    let sum: Vec<f32> = (0..N).map(|i| (0..size).map(|r| input(r)[i]).sum()).collect();
    let gathered: Vec<f32> = (0..size).flat_map(input).collect();
    for (r, result) in results.into_iter().enumerate() {
        let got = result.unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert_eq!(got[0], sum, "all_reduce on rank {r}");
        assert_eq!(got[1], vec![11.0; 3], "broadcast from rank 1, seen on rank {r}");
        assert_eq!(got[2], gathered, "all_gather on rank {r}");
        let before = (r + size - 1) % size;
        assert_eq!(got[3], vec![before as f32 + 0.5; 4], "the message from rank {before}, on rank {r}");
    }
}

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn what_cannot_be_a_rank_is_refused() {
    let _turn = turn();
    let devices = devices();
    let id = UniqueId::new(&devices[0]).unwrap();
    let e = Communicator::init_rank(&devices[0], &id, 2, 2).unwrap_err();
    assert_eq!(kind_of(&e), "InvalidArgument", "{e}");
    assert!(e.to_string().contains("rank 2 of 2"), "{e}");
    let e = Communicator::init_rank(&devices[0], &id, 0, 0).unwrap_err();
    assert_eq!(kind_of(&e), "InvalidArgument", "{e}");
    // The host has no collectives engine: neither an id nor a rank on it.
    let host = Runtime::discover().device("host:0").unwrap();
    let e = UniqueId::new(&host).unwrap_err();
    assert_eq!(kind_of(&e), "BackendMismatch", "{e}");
    assert!(e.to_string().contains("UniqueId::new"), "{e}");
    let e = Communicator::init_rank(&host, &id, 1, 0).unwrap_err();
    assert_eq!(kind_of(&e), "BackendMismatch", "{e}");
    // A one-rank communicator needs nobody else: made at once, and it works.
    let one = Communicator::init_rank(&devices[0], &UniqueId::new(&devices[0]).unwrap(), 1, 0).unwrap();
    let x = Array::from_slice(&devices[0], &[2.0f64, 3.0], &[2]).unwrap();
    one.all_reduce(&x, ReduceOp::Prod, None, None).unwrap().wait().unwrap();
    assert_eq!(x.to_vec::<f64>().unwrap(), vec![2.0, 3.0]);
    // It is non-blocking: the per-thread default stream (where the backend has one) would
    // be another thread's when NCCL launches from its own, so it is refused; a created
    // stream is taken.
    if let Ok(per_thread) = devices[0].default_stream(DefaultStream::PerThread) {
        let e = one.all_reduce(&x, ReduceOp::Sum, None, Some(&per_thread)).map(|_| ()).unwrap_err();
        assert_eq!(kind_of(&e), "InvalidArgument", "{e}");
        assert!(e.to_string().contains("per-thread default stream"), "{e}");
    }
    let created = devices[0].create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    one.all_reduce(&x, ReduceOp::Sum, None, Some(&created)).unwrap().wait().unwrap();
    assert_eq!(x.to_vec::<f64>().unwrap(), vec![2.0, 3.0]);
}
