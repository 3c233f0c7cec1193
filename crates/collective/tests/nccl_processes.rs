//! NCCL and RCCL communicators whose ranks are separate processes: run under `mpiexec -n
//! 2` and `-n 4` with a driver double loaded in every process (each its own simulated
//! machine; the collectives double's ranks meet through shared memory), or by the GPU
//! bundle with one process per GPU. MPI's world becomes the engine's communicator (`for_device`:
//! rank 0's unique id broadcast over MPI), then every collective runs across the processes,
//! checked on each rank against what it computes from every rank's inputs, with messages
//! around a ring, a second communicator of the same ranks beside the first, and splits
//! and a dup of the first. Ignored by
//! default: `cargo xtask test --backend cuda|rocm --double` launches it.

use gpuport_collective::{group, Communicator, ReduceOp};
use gpuport_core::DType;
use gpuport_runtime::Array;

mod on_devices;
use on_devices::devices;

/// Rank `r`'s `n` inputs: exact in f32 whatever the sum's order.
fn input(r: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| (r * 1000 + i) as f32 * 0.25).collect()
}

#[test]
#[ignore = "needs mpiexec and a driver double's NCCL or RCCL in every rank (cargo xtask test --backend cuda|rocm --double)"]
fn the_world_on_its_devices_runs_every_collective() {
    let world = Communicator::world().expect("MPI's world: run under mpiexec");
    let (rank, size) = (world.rank(), world.size());
    let devices = devices();
    let device = &devices[rank % devices.len()];
    let comm = world.for_device(device).expect("the world on its devices");
    assert_eq!((comm.rank(), comm.size()), (rank, size));
    assert!(["NCCL", "RCCL"].contains(&comm.engine()), "{}", comm.engine());
    let n = 1001;
    let on = |values: &[f32]| Array::from_slice(device, values, &[values.len()]).unwrap();

    // all_reduce in place: the sum of every rank's inputs.
    let x = on(&input(rank, n));
    comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    let sum: Vec<f32> = (0..n).map(|i| (0..size).map(|r| input(r, n)[i]).sum()).collect();
    assert_eq!(x.to_vec::<f32>().unwrap(), sum, "all_reduce on rank {rank}");

    // Max on integers, out of place.
    let ints = Array::from_slice(device, &[rank as i64 * 3 - 4, -(rank as i64)], &[2]).unwrap();
    let out = Array::zeros(device, &[2], DType::I64).unwrap();
    comm.all_reduce(&ints, ReduceOp::Max, Some(&out), None).unwrap().wait().unwrap();
    assert_eq!(out.to_vec::<i64>().unwrap(), vec![(size as i64 - 1) * 3 - 4, 0]);

    // broadcast from the last rank; reduce onto rank 1 (rank 0 on a machine with one GPU).
    let b = on(&input(rank, 7));
    comm.broadcast(&b, size - 1, None).unwrap().wait().unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), input(size - 1, 7));
    let partial = on(&input(rank, 5));
    let reduced = Array::zeros(device, &[5], DType::F32).unwrap();
    let root = 1 % size;
    comm.reduce(&partial, ReduceOp::Sum, root, Some(&reduced), None).unwrap().wait().unwrap();
    if rank == root {
        let want: Vec<f32> = (0..5).map(|i| (0..size).map(|r| input(r, 5)[i]).sum()).collect();
        assert_eq!(reduced.to_vec::<f32>().unwrap(), want);
    }

    // all_gather, reduce_scatter and all_to_all of blocks of 3.
    let m = 3;
    let gathered = Array::zeros(device, &[size * m], DType::F32).unwrap();
    comm.all_gather(&on(&input(rank, m)), &gathered, None).unwrap().wait().unwrap();
    let want: Vec<f32> = (0..size).flat_map(|r| input(r, m)).collect();
    assert_eq!(gathered.to_vec::<f32>().unwrap(), want);
    let scattered = Array::zeros(device, &[m], DType::F32).unwrap();
    comm.reduce_scatter(&on(&input(rank, size * m)), ReduceOp::Sum, &scattered, None).unwrap().wait().unwrap();
    let want: Vec<f32> = (0..m).map(|i| (0..size).map(|r| input(r, size * m)[rank * m + i]).sum()).collect();
    assert_eq!(scattered.to_vec::<f32>().unwrap(), want);
    let exchanged = Array::zeros(device, &[size * m], DType::F32).unwrap();
    comm.all_to_all(&on(&input(rank, size * m)), &exchanged, None).unwrap().wait().unwrap();
    let want: Vec<f32> = (0..size).flat_map(|r| input(r, size * m)[rank * m..(rank + 1) * m].to_vec()).collect();
    assert_eq!(exchanged.to_vec::<f32>().unwrap(), want);

    // Around a ring: each rank sends to the next and receives from the one before, in one
    // group (NCCL fuses them; issued one by one, every rank would wait in its send).
    let next = (rank + 1) % size;
    let before = (rank + size - 1) % size;
    let sent = on(&input(rank, 11));
    let received = Array::zeros(device, &[11], DType::F32).unwrap();
    let works = group(|| Ok([comm.send(&sent, next, 0, None)?, comm.recv(&received, before, 0, None)?])).unwrap();
    for w in works {
        w.wait().unwrap();
    }
    assert_eq!(received.to_vec::<f32>().unwrap(), input(before, 11));

    // A second communicator of the same ranks: its traffic is its own.
    let again = world.for_device(device).unwrap();
    let y = Array::from_slice(device, &[1u32; 4], &[4]).unwrap();
    again.all_reduce(&y, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    assert_eq!(y.to_vec::<u32>().unwrap(), vec![size as u32; 4]);

    // Split by parity, ranked backwards: the even ranks and the odd ones each reduce among
    // themselves, and an all-gather shows the new order.
    let half = comm.split(Some((rank % 2) as u32), -(rank as i32)).unwrap().expect("every rank has a color");
    let members: Vec<usize> = (0..size).filter(|r| r % 2 == rank % 2).rev().collect();
    assert_eq!((half.rank(), half.size()), (members.iter().position(|&r| r == rank).unwrap(), members.len()));
    let mine = Array::from_slice(device, &[rank as f32], &[1]).unwrap();
    let order = Array::zeros(device, &[members.len()], DType::F32).unwrap();
    half.all_gather(&mine, &order, None).unwrap().wait().unwrap();
    assert_eq!(order.to_vec::<f32>().unwrap(), members.iter().map(|&r| r as f32).collect::<Vec<_>>());
    // A rank with no color gets none; dup keeps the ranks.
    let none = comm.split((rank != 0).then_some(0), 0).unwrap();
    assert_eq!(none.is_none(), rank == 0);
    let twin = comm.dup().unwrap();
    assert_eq!((twin.rank(), twin.size()), (rank, size));
    let z = Array::from_slice(device, &[rank as i32], &[1]).unwrap();
    twin.all_reduce(&z, ReduceOp::Max, None, None).unwrap().wait().unwrap();
    assert_eq!(z.to_vec::<i32>().unwrap(), vec![size as i32 - 1]);
    drop((comm, again, half, none, twin));
    world.barrier().unwrap();
}
