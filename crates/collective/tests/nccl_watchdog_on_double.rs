//! The watchdog of gpuport's NCCL and RCCL communicators on the collectives double: an
//! asynchronous error of the communicator (injected: a remote error carried by a
//! collective) and a rank that never calls (one rank's all-reduce alone, past
//! `GPUPORT_COLLECTIVE_TIMEOUT`) each abort the communicator and fail the waiting work with
//! a `Collective` error naming the collective, the rank and the cause — never a hang — and
//! the aborted communicator's later use says why it was aborted; a rank that never joins a
//! communicator made rank by rank ends the others' `init_rank` the same way. One test: the timeout and
//! the double's faults are read once per process. Ignored by default: `cargo xtask test
//! --backend cuda|rocm --double` runs it.

use std::time::{Duration, Instant};

use gpuport_collective::{group, Communicator, ReduceOp, UniqueId, TIMEOUT_ENV};
use gpuport_runtime::Array;

mod on_devices;
use on_devices::{kind_of, setup};

#[test]
#[ignore = "needs a driver double's NCCL or RCCL (cargo xtask test --backend cuda|rocm --double)"]
fn errors_and_missing_ranks_abort_the_communicator_and_fail_the_work() {
    // Before anything reads them: a one-second watchdog, the second all-reduce call (rank
    // 1's, in the first group) carrying a remote error, and the first broadcast's rank
    // lost (its part never comes).
    std::env::set_var(TIMEOUT_ENV, "1");
    std::env::set_var("GPUPORT_DOUBLE_FAULTS", "ncclAllReduce:2=REMOTE_ERROR,ncclBroadcast:1=LOST");
    let (_turn, devices, comms) = setup();
    let xs: Vec<Array> = devices.iter().map(|d| Array::from_slice(d, &[1.0f32; 16], &[16]).unwrap()).collect();

    // An asynchronous error: both ranks' work fails, naming the collective and the rank,
    // and the communicators are aborted.
    let works = group(|| {
        let each = comms.iter().enumerate().map(|(r, c)| c.all_reduce(&xs[r], ReduceOp::Sum, None, None));
        each.collect::<gpuport_core::Result<Vec<_>>>()
    })
    .unwrap();
    for (r, w) in works.iter().enumerate() {
        let e = w.wait().unwrap_err();
        let text = e.to_string();
        assert_eq!(kind_of(&e), "Collective", "{text}");
        assert!(text.contains(&format!("all_reduce on rank {r} of 2")), "{text}");
        assert!(text.contains("remote process exited or there was a network error"), "{text}");
        assert!(w.is_done().unwrap());
    }
    let again = comms[0].all_reduce(&xs[0], ReduceOp::Sum, None, None).map(|_| ()).unwrap_err().to_string();
    assert!(again.contains("the communicator was aborted") && again.contains("all_reduce on rank 0 of 2"), "{again}");
    drop(comms);

    // A rank that never calls: rank 0's all-reduce alone fails once the watchdog's second
    // has passed, and not before.
    let comms = Communicator::init_all(&devices).unwrap();
    let started = Instant::now();
    let work = comms[0].all_reduce(&xs[0], ReduceOp::Max, None, None).unwrap();
    let e = work.wait().unwrap_err();
    let waited = started.elapsed();
    let text = e.to_string();
    assert_eq!(kind_of(&e), "Collective", "{text}");
    assert!(waited >= Duration::from_secs(1), "failed after {waited:?}, before the timeout: {text}");
    for part in ["all_reduce on rank 0 of 2", "did not complete within 1 s", TIMEOUT_ENV, "aborted"] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    let again = comms[0].all_reduce(&xs[0], ReduceOp::Max, None, None).map(|_| ()).unwrap_err().to_string();
    assert!(again.contains("did not complete within 1 s"), "{again}");
    // Rank 1 never issued anything: it is freed as usual.
    assert_eq!((comms[1].rank(), comms[1].size()), (1, 2));
    drop(comms);
    assert_eq!(xs[0].to_vec::<f32>().unwrap(), vec![1.0; 16], "an aborted collective moved nothing");

    // A rank lost in the middle of a broadcast: the rank waiting for it fails at the
    // timeout, and waiting for the lost rank's own work ends too (never a hang).
    let comms = Communicator::init_all(&devices).unwrap();
    let works = group(|| {
        let each = comms.iter().enumerate().map(|(r, c)| c.broadcast(&xs[r], 0, None));
        each.collect::<gpuport_core::Result<Vec<_>>>()
    })
    .unwrap();
    let e = works[1].wait().unwrap_err().to_string();
    assert!(e.contains("broadcast on rank 1 of 2") && e.contains("did not complete within 1 s"), "{e}");
    let _ = works[0].wait();
    assert!(works.iter().all(|w| w.is_done().unwrap()));
    drop(comms);

    // A rank that never joins: the other's `init_rank` ends with an error once the second
    // has passed, and not before — never a hang.
    let id = UniqueId::new(&devices[0]).unwrap();
    let started = Instant::now();
    let e = Communicator::init_rank(&devices[0], &id, 2, 0).unwrap_err();
    let waited = started.elapsed();
    let text = e.to_string();
    assert_eq!(kind_of(&e), "Collective", "{text}");
    assert!(waited >= Duration::from_secs(1), "failed after {waited:?}, before the timeout: {text}");
    for part in ["rank 0 of 2", "initialising the communicator", "did not finish within 1 s", TIMEOUT_ENV] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
}
