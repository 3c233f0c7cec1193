//! gpuport's communicators on NCCL or RCCL with one rank on device 0: what a machine with
//! one GPU can check of the real engine — every collective (a single rank's result is its
//! input, reduced by the engine), a message to itself, the ordering behind work held on the
//! rank's stream, arrays dropped while their collective waits, and the refusals — and a
//! one-rank communicator made by `init_rank` (non-blocking) on a thread of its own. The GPU
//! bundle runs it on `cuda:0` with the machine's NCCL; `cargo xtask test --backend
//! cuda|rocm --double` runs it on the collectives double. Ignored by default.

use std::sync::mpsc;
use std::time::Duration;

use gpuport_collective::{group, Communicator, ReduceOp};
use gpuport_core::DefaultStream;
use gpuport_runtime::Array;

mod on_devices;

#[test]
#[ignore = "needs NCCL or RCCL and a device: the GPU bundle, or cargo xtask test --backend cuda|rocm --double"]
fn one_rank_runs_every_collective_in_stream_order() {
    let _turn = on_devices::turn();
    let device = on_devices::devices().remove(0);
    let comm = Communicator::init_all(std::slice::from_ref(&device)).unwrap().remove(0);
    assert_eq!((comm.rank(), comm.size()), (0, 1));
    let values: Vec<f32> = (0..4099).map(|i| i as f32 * 0.5 - 7.0).collect();
    let n = values.len();
    let x = Array::from_slice(&device, &values, &[n]).unwrap();
    let out = Array::zeros(&device, &[n], x.dtype()).unwrap();

    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg] {
        comm.all_reduce(&x, op, Some(&out), None).unwrap().wait().unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), values, "{op:?}");
    }
    comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
    comm.broadcast(&x, 0, None).unwrap().wait().unwrap();
    comm.reduce(&x, ReduceOp::Max, 0, Some(&out), None).unwrap().wait().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), values);
    for what in ["all_gather", "reduce_scatter", "all_to_all"] {
        let fresh = Array::zeros(&device, &[n], x.dtype()).unwrap();
        let work = match what {
            "all_gather" => comm.all_gather(&x, &fresh, None),
            "reduce_scatter" => comm.reduce_scatter(&x, ReduceOp::Sum, &fresh, None),
            _ => comm.all_to_all(&x, &fresh, None),
        };
        work.unwrap().wait().unwrap();
        assert_eq!(fresh.to_vec::<f32>().unwrap(), values, "{what}");
    }
    let got = Array::zeros(&device, &[n], x.dtype()).unwrap();
    let works = group(|| Ok(vec![comm.send(&x, 0, 0, None)?, comm.recv(&got, 0, 0, None)?])).unwrap();
    for w in works {
        w.wait().unwrap();
    }
    assert_eq!(got.to_vec::<f32>().unwrap(), values, "a message to itself");

    // Behind a gate on the rank's stream, with the arrays dropped meanwhile: not done
    // while held, done once released, nothing freed under it.
    let stream = device.default_stream(DefaultStream::Legacy).unwrap();
    let (open, gate) = mpsc::channel::<()>();
    let ints = Array::from_slice(&device, &[3i64; 1000], &[1000]).unwrap();
    let summed = Array::zeros(&device, &[1000], ints.dtype()).unwrap();
    stream
        .host_callback(Box::new(move || {
            let _ = gate.recv_timeout(Duration::from_secs(120));
        }))
        .unwrap();
    let work = comm.all_reduce(&ints, ReduceOp::Sum, Some(&summed), Some(&stream)).unwrap();
    drop(ints);
    for _ in 0..20 {
        assert!(!work.is_done().unwrap(), "done while its stream is held");
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(open);
    work.wait().unwrap();
    assert_eq!(summed.to_vec::<i64>().unwrap(), vec![3; 1000]);

    // Host memory is refused before anything is queued; the communicator goes on.
    let rt = gpuport_runtime::Runtime::discover();
    let host = Array::from_slice(&rt.device("host").unwrap(), &[1.0f32; 4], &[4]).unwrap();
    let refused = comm.all_reduce(&host, ReduceOp::Sum, None, None).map(|_| ()).unwrap_err();
    assert_eq!(on_devices::kind_of(&refused), "BackendMismatch", "{refused}");
    comm.all_reduce(&x, ReduceOp::Sum, None, None).unwrap().wait().unwrap();
}

#[test]
#[ignore = "needs NCCL or RCCL and a device: the GPU bundle, or cargo xtask test --backend cuda|rocm --double"]
fn one_rank_made_by_init_rank_on_a_thread_of_its_own() {
    let _turn = on_devices::turn();
    let device = on_devices::devices().remove(0);
    let id = gpuport_collective::UniqueId::new(&device).unwrap();
    // A fresh thread: the device is made current for the engine, which takes it from there.
    let comm = std::thread::scope(|s| s.spawn(|| Communicator::init_rank(&device, &id, 1, 0)).join().unwrap())
        .expect("a one-rank communicator from init_rank");
    assert_eq!((comm.rank(), comm.size()), (0, 1));
    let values: Vec<i32> = (0..1025).map(|i| i * 3 - 500).collect();
    let x = Array::from_slice(&device, &values, &[values.len()]).unwrap();
    let stream = device.create_stream(gpuport_core::StreamFlags::NON_BLOCKING, 0).unwrap();
    // Back to back, nothing waited for between: the first launch of a non-blocking
    // communicator may answer ncclInProgress, and the next call must come after it is done.
    let works = [ReduceOp::Sum, ReduceOp::Max].map(|op| comm.all_reduce(&x, op, None, Some(&stream)).unwrap());
    for w in works {
        w.wait().unwrap();
    }
    comm.broadcast(&x, 0, None).unwrap().wait().unwrap();
    assert_eq!(x.to_vec::<i32>().unwrap(), values);
    // Dropped: finalised, then destroyed, with nothing in flight.
    drop(comm);
}
