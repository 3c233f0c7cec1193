//! RCCL's API over the HIP double: NCCL's, with the all-to-all under RCCL's own name
//! (`ncclAllToAll`), on the null stream of each communicator's device. One test: the
//! double is one machine per process.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use gpuport_double_sim::nccl::status as nccl;
use gpuport_double_sim::report;
use gpuport_hip_double::status::*;
use gpuport_hip_double::*;

fn ok(status: HipError) {
    assert_eq!(status, hipSuccess);
}

#[test]
fn all_to_all_runs_under_rccls_name() {
    let before = report::count();
    // SAFETY: every pointer is a local or memory the double gave out, used within its size.
    unsafe {
        ok(hipInit(0));
        let mut comms = [0u64; 2];
        assert_eq!(ncclCommInitAll(comms.as_mut_ptr(), 2, std::ptr::null()), nccl::SUCCESS);
        let mut bufs = [[null_mut::<c_void>(); 2]; 2];
        for (d, pair) in bufs.iter_mut().enumerate() {
            ok(hipSetDevice(d as c_int));
            for b in pair.iter_mut() {
                ok(hipMalloc(b, 16));
            }
            let values = [d as f32 * 10.0, d as f32 * 10.0 + 1.0, d as f32 * 10.0 + 2.0, d as f32 * 10.0 + 3.0];
            ok(hipMemcpyAsync(pair[0], values.as_ptr().cast(), 16, 1, null_mut()));
            ok(hipDeviceSynchronize());
        }
        assert_eq!(ncclGroupStart(), nccl::SUCCESS);
        for (d, pair) in bufs.iter().enumerate() {
            let (send, recv) = (pair[0] as u64, pair[1] as u64);
            assert_eq!(ncclAllToAll(send, recv, 2, 7, comms[d], null_mut()), nccl::SUCCESS);
        }
        assert_eq!(ncclGroupEnd(), nccl::SUCCESS);
        for (d, pair) in bufs.iter().enumerate() {
            ok(hipSetDevice(d as c_int));
            ok(hipDeviceSynchronize());
            let mut got = [0f32; 4];
            ok(hipMemcpyAsync(got.as_mut_ptr().cast(), pair[1], 16, 2, null_mut()));
            ok(hipDeviceSynchronize());
            let want = if d == 0 { [0.0, 1.0, 10.0, 11.0] } else { [2.0, 3.0, 12.0, 13.0] };
            assert_eq!(got, want, "rank {d}");
            for &b in pair {
                ok(hipFree(b));
            }
        }
        for c in comms {
            assert_eq!(ncclCommDestroy(c), nccl::SUCCESS);
        }
    }
    assert_eq!(report::count(), before, "correct use was reported");
}
