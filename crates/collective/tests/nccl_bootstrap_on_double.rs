//! How ranks that share no process find each other, on the collectives double: an MPI
//! communicator's ranks made into an NCCL (CUDA) or RCCL (ROCm) communicator with
//! `Communicator::for_device` — rank 0 makes the unique id and broadcasts it over MPI — and
//! NCCL's own bootstrap, where every rank makes the same id from `NCCL_COMM_ID`. The
//! double's ranks are devices of one process, so MPI's world here is this process alone
//! (started without a launcher: `GPUPORT_MPI_SINGLETON=1`), and the bootstrap's ranks are
//! two of its threads; what travels is the same for any number. One test: the variable is
//! the process's. Ignored by default: `cargo xtask test --backend cuda|rocm --double` runs
//! it with the `mpich` wheel's library.

use gpuport_collective::{Communicator, ReduceOp, UniqueId};
use gpuport_runtime::{Array, Runtime};

mod on_devices;
use on_devices::{devices, kind_of};

#[test]
#[ignore = "needs a driver double's NCCL or RCCL and MPI (cargo xtask test --backend cuda|rocm --double)"]
fn an_mpi_communicator_on_the_rank_device_and_ranks_met_through_nccl_comm_id() {
    let world = Communicator::world().expect("MPI's world (GPUPORT_MPI_LIBRARY and GPUPORT_MPI_SINGLETON=1)");
    let device = devices().remove(0);
    let comm = world.for_device(&device).expect("the world on the device");
    assert_eq!((comm.rank(), comm.size()), (world.rank(), world.size()));
    assert!(["NCCL", "RCCL"].contains(&comm.engine()), "{}", comm.engine());
    assert_eq!(comm.device().map(|d| d.id()), Some(device.id()));
    let x = Array::from_slice(&device, &[1.5f32, -2.0, 4.0], &[3]).unwrap();
    comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 4.0]);

    // Only an MPI communicator carries the id.
    let e = comm.for_device(&device).unwrap_err();
    assert_eq!(kind_of(&e), "EngineUnsupported", "{e}");
    // A rank 0 that cannot make the id tells every rank why.
    let host = Runtime::discover().device("host:0").unwrap();
    let e = world.for_device(&host).unwrap_err().to_string();
    assert!(e.contains("rank 0 could not make the unique id") && e.contains("UniqueId::new"), "{e}");
    // The world still works after both.
    world.barrier().unwrap();

    // NCCL's own bootstrap: every rank makes its id from the address, and the ids agree.
    std::env::set_var("NCCL_COMM_ID", "127.0.0.1:29517");
    let mut devices = devices();
    devices.truncate(2);
    assert_eq!(devices.len(), 2, "two devices needed: the doubles have two");
    let sums = std::thread::scope(|s| {
        let ranks: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(r, d)| {
                s.spawn(move || -> gpuport_core::Result<Vec<i64>> {
                    let id = UniqueId::new(d)?;
                    let comm = Communicator::init_rank(d, &id, 2, r)?;
                    let x = Array::from_slice(d, &[r as i64 + 1, 10], &[2])?;
                    comm.all_reduce(&x, ReduceOp::Sum, None, None)?.wait()?;
                    x.to_vec()
                })
            })
            .collect();
        ranks.into_iter().map(|h| h.join().expect("a rank's thread")).collect::<Vec<_>>()
    });
    for (r, sum) in sums.into_iter().enumerate() {
        assert_eq!(sum.unwrap_or_else(|e| panic!("rank {r}: {e}")), vec![3, 20], "rank {r}");
    }
}
