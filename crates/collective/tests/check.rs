//! The consistency check (`GPUPORT_COLLECTIVE_CHECK=1`): `cargo xtask test` runs these
//! under `mpiexec -n 2` and `-n 4` with the check on. Ranks that agree pass as without it;
//! ranks that disagree all get the same error naming both sides, and the next collective
//! they agree on works.

use gpuport_collective::{Communicator, ReduceOp, CHECK_ENV};
use gpuport_runtime::{Array, DType, Error, Runtime};

fn world() -> Communicator {
    assert_eq!(std::env::var(CHECK_ENV).as_deref(), Ok("1"), "run with the check on (cargo xtask test does)");
    Communicator::world().expect("run under mpiexec (cargo xtask test does)")
}

fn host() -> gpuport_runtime::AnyDevice {
    Runtime::discover().device("host").unwrap()
}

fn sum_of_ones(comm: &Communicator) {
    let one = Array::from_slice(&host(), &[1i32], &[1]).unwrap();
    comm.all_reduce(&one, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    assert_eq!(one.to_vec::<i32>().unwrap(), vec![comm.size() as i32]);
}

#[test]
#[ignore = "needs an MPI launcher and the check on: cargo xtask test runs it"]
fn ranks_that_disagree_all_fail_with_both_sides_named() {
    let comm = world();
    sum_of_ones(&comm);
    // Rank 0 reduces 8 elements, the others 9.
    let n = if comm.rank() == 0 { 8 } else { 9 };
    let x = Array::zeros(&host(), &[n], DType::F32).unwrap();
    let err = comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap_err();
    let Error::Collective { call, message, .. } = &err else { panic!("{err:#?}") };
    assert_eq!(*call, "the consistency check");
    assert!(message.contains("ranks [0]: collective #1 all_reduce Sum of 8 float32 elements"), "{message}");
    assert!(message.contains("all_reduce Sum of 9 float32 elements"), "{message}");
    // A broadcast against a reduction, same size.
    let x = Array::zeros(&host(), &[4], DType::I32).unwrap();
    let work = if comm.rank() == 0 {
        comm.broadcast(&x, 0, None).unwrap()
    } else {
        comm.all_reduce(&x, ReduceOp::Max, None, None).unwrap()
    };
    let err = work.wait().unwrap_err();
    assert!(err.to_string().contains("broadcast") && err.to_string().contains("all_reduce Max"), "{err}");
    // Nothing of either was sent: the ranks go on together.
    sum_of_ones(&comm);
}
