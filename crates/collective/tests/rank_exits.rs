//! A rank that exits in the middle of the job ends it: `cargo xtask test` runs this under
//! `mpiexec -n 2` and requires the launcher to end the job, with its message, within the
//! time limit — never a hang. Rank 1 exits before the collective rank 0 waits in.

use gpuport_collective::{Communicator, ReduceOp};
use gpuport_runtime::{Array, Runtime};

#[test]
#[ignore = "ends its MPI job on purpose: cargo xtask test runs it and expects the launcher to stop it"]
fn a_rank_that_exits_ends_the_job() {
    let comm = Communicator::world().expect("run under mpiexec (cargo xtask test does)");
    let x = Array::from_slice(&Runtime::discover().device("host").unwrap(), &[1f64; 1024], &[1024]).unwrap();
    comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    if comm.rank() == 1 {
        std::process::exit(3);
    }
    comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    unreachable!("rank 0's collective cannot complete without rank 1");
}
