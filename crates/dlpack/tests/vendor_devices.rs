//! DLPack on CUDA and ROCm arrays: every memory kind's device type (kDLCUDA, kDLCUDAHost,
//! kDLCUDAManaged, kDLROCM, kDLROCMHost), the stream handshake with a slow producer on a
//! vendor stream, CPU requests, CUDA ↔ ROCm copies through the copy engine with
//! IS_COPIED, and the host copies of strided views (`to_bytes`, `copy_from_bytes`: the
//! elements packed by 2D copies in a stream-ordered scratch buffer of the device, moved to
//! or from the host in one piece). Ignored by default: `cargo xtask test --backend cuda|rocm --double` (or
//! `--backend cuda` on a GPU) runs them for the backend it names in
//! `GPUPORT_CONFORMANCE_BACKENDS`, which must then be available.

use std::time::{Duration, Instant};

use gpuport_conformance::{device_alone, device_shared, Gate};
use gpuport_dlpack::{
    dl_device_of, from_dlpack, to_dlpack, to_dlpack_on_stream, DLDevice, DLPackVersion, DlpackFlags, ExportRequest,
    ImportRequest,
};
use gpuport_runtime::{AnyDevice, Array, CopyEngine, DType, Error, Layout, Runtime, StreamFlags};

const V1: Option<DLPackVersion> = Some(DLPackVersion { major: 1, minor: 0 });
const CPU: DLDevice = DLDevice { device_type: 1, device_id: 0 };

fn device_type(backend: &str, memory: &str) -> Option<i32> {
    match (backend, memory) {
        ("cuda", "device") => Some(2),
        ("cuda", "pinned") => Some(3),
        ("cuda", "managed") => Some(13),
        ("rocm", "device") => Some(10),
        ("rocm", "pinned") => Some(11),
        _ => None,
    }
}

fn array_over(dev: &AnyDevice, memory: &str, data: &[f32]) -> Array {
    let bytes = 4 * data.len();
    let buffer = match memory {
        "device" => dev.alloc(bytes),
        "pinned" => dev.alloc_pinned(bytes, Default::default()),
        _ => dev.alloc_managed(bytes),
    }
    .unwrap();
    let a = Array::from_buffer(dev, buffer, 0, DType::F32, Layout::contiguous(&[data.len()]).unwrap()).unwrap();
    a.copy_from_slice(data).unwrap();
    a
}

fn export(rt: &Runtime, a: &Array, request: ExportRequest) -> gpuport_runtime::Result<gpuport_dlpack::ManagedTensor> {
    to_dlpack(rt, a, &request)
}

#[test]
#[ignore = "needs a CUDA or ROCm device: cargo xtask test --backend cuda|rocm --double"]
fn every_memory_kind_exports_as_its_device_type_and_round_trips() {
    let _shared = device_shared();
    let (rt, backend) = gpuport_conformance::vendor_backend_under_test();
    let data: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
    for ordinal in gpuport_conformance::first_two_devices(&rt, &backend) {
        let dev = rt.device(&format!("{backend}:{ordinal}")).unwrap();
        for memory in ["device", "pinned", "managed"] {
            let a = array_over(&dev, memory, &data);
            let cell = format!("{memory} memory of {backend}:{ordinal}");
            let Some(ty) = device_type(&backend, memory) else {
                // ROCm managed memory: DLPack has no type for it, so it is not exported as
                // another kind.
                let err = export(&rt, &a, ExportRequest::default()).unwrap_err();
                assert!(matches!(err, Error::Interchange { .. }), "{cell}: {err}");
                continue;
            };
            let id = if memory == "device" { ordinal as i32 } else { 0 };
            assert_eq!(dl_device_of(&a).unwrap(), DLDevice { device_type: ty, device_id: id }, "{cell}");
            for max_version in [None, V1] {
                let tensor = export(&rt, &a, ExportRequest { max_version, ..Default::default() }).unwrap();
                assert!(!tensor.flags().contains(DlpackFlags::IS_COPIED), "{cell}: a same-device export copied");
                let back = from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap();
                assert_eq!(back.data_addr(), a.data_addr(), "{cell}: not zero-copy");
                // Host-accessible memory is device 0's in DLPack's terms (kDLCUDAHost and
                // kDLCUDAManaged carry device_id 0), whichever device pinned it.
                let owner =
                    if memory == "device" { a.device_id() } else { rt.device(&format!("{backend}:0")).unwrap().id() };
                assert_eq!(back.device_id(), owner, "{cell}");
                assert_eq!(back.to_vec::<f32>().unwrap(), data, "{cell}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA or ROCm device: cargo xtask test --backend cuda|rocm --double"]
fn the_consumers_vendor_stream_waits_for_a_slow_producer() {
    let _alone = device_alone();
    let (rt, backend) = gpuport_conformance::vendor_backend_under_test();
    let dev = rt.device(&format!("{backend}:0")).unwrap();
    let data: Vec<u32> = (0..4096).collect();
    let writer = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let src = Array::from_slice(&dev, &data, &[data.len()]).unwrap();
    let a = Array::zeros(&dev, &[data.len()], DType::U32).unwrap();
    // Everything allocated, and earlier tests' deferred frees done, before the gate: a
    // real driver's allocation or free may wait for all of the device's work, the held
    // write's too, which would finish it before the check.
    let consumer = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let out = dev.alloc(4 * data.len()).unwrap();
    gpuport_runtime::release::flush();
    // And the device synchronised, so that the work earlier tests left queued (and the
    // buffers it keeps until it has run) is done before the window too.
    dev.synchronize().unwrap();
    let gate = Gate::default();
    gate.block(&writer).unwrap();
    // Each call in the window is timed: none may wait for the held write, and when the
    // check below fails the times say whether one did (an implicit synchronisation of the
    // driver) or the consumer really ran early (an ordering bug).
    let mut waited = Vec::new();
    let mut timed = |what: &'static str, start: Instant| waited.push((what, start.elapsed()));
    let t = Instant::now();
    CopyEngine::default().copy_on(&src, &a, &writer).unwrap(); // held by the gate
    timed("the copy on the producer", t);
    let request = ExportRequest { stream: Some(consumer.raw_handle() as i64), ..Default::default() };
    let t = Instant::now();
    // SAFETY: `consumer` is a live stream of the array's device.
    let tensor = unsafe { to_dlpack_on_stream(&rt, &a, &request) }.unwrap(); // returns at once
    timed("the export", t);
    let t = Instant::now();
    consumer.copy(a.buffer(), 0, &out, 0, 4 * data.len()).unwrap();
    timed("the consumer's copy", t);
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    let done = consumer.query().unwrap();
    timed("the query", t);
    assert!(!done, "the consumer's stream did not wait for the pending write; time each call took: {waited:?}");
    gate.open();
    consumer.synchronize().unwrap();
    assert_eq!(consumer.read_vec::<u32>(&out, 0, data.len()).unwrap(), data);
    drop(tensor);
}

#[test]
#[ignore = "needs a CUDA or ROCm device: cargo xtask test --backend cuda|rocm --double"]
fn cpu_requests_copy_and_are_ready_on_return() {
    let _shared = device_shared();
    let (rt, backend) = gpuport_conformance::vendor_backend_under_test();
    let last = gpuport_conformance::first_two_devices(&rt, &backend).pop().unwrap_or(0);
    let dev = rt.device(&format!("{backend}:{last}")).unwrap();
    let data: Vec<f32> = (0..300).map(|i| i as f32).collect();
    let a = Array::from_slice(&dev, &data, &[300]).unwrap();
    let tensor =
        export(&rt, &a, ExportRequest { max_version: V1, dl_device: Some(CPU), ..Default::default() }).unwrap();
    assert!(tensor.flags().contains(DlpackFlags::IS_COPIED));
    assert_eq!(tensor.dl_tensor().device, CPU);
    // SAFETY: a CPU export's data is host memory, complete on return, alive with `tensor`.
    let seen = unsafe { std::slice::from_raw_parts(tensor.dl_tensor().data as *const f32, 300) };
    assert_eq!(seen, &data[..]);
    let err = export(&rt, &a, ExportRequest { max_version: V1, dl_device: Some(CPU), copy: Some(false), stream: None })
        .unwrap_err();
    assert!(matches!(err, Error::Interchange { .. }), "{err}");
}

#[test]
#[ignore = "needs a CUDA or ROCm device: cargo xtask test --backend cuda|rocm --double"]
fn strided_views_read_and_write_their_elements_alone() {
    let _shared = device_shared();
    let (rt, backend) = gpuport_conformance::vendor_backend_under_test();
    let dev = rt.device(&format!("{backend}:0")).unwrap();
    let (rows, cols) = (300usize, 1000usize);
    let data: Vec<i32> = (0..(rows * cols) as i32).map(|i| i * 5 + 1).collect();
    let a = Array::from_slice(&dev, &data, &[rows, cols]).unwrap();
    // A column (its span 1.2 MB, its elements 1.2 KB: read as one 2D copy of its
    // elements), then two columns backwards; the column written the same way.
    let column = a.index_axis(1, 7).unwrap();
    let want: Vec<i32> = (0..rows).map(|r| data[r * cols + 7]).collect();
    assert_eq!(column.to_vec::<i32>().unwrap(), want);
    let pair = a.slice(1, 3, Some(5), 1).unwrap().slice(0, rows - 1, None, -1).unwrap();
    let want: Vec<i32> = (0..rows).rev().flat_map(|r| [data[r * cols + 3], data[r * cols + 4]]).collect();
    assert_eq!(pair.to_vec::<i32>().unwrap(), want);
    let new: Vec<i32> = (0..rows as i32).map(|i| -i).collect();
    column.copy_from_slice(&new).unwrap();
    let mut model = data.clone();
    for (r, v) in new.iter().enumerate() {
        model[r * cols + 7] = *v;
    }
    assert_eq!(a.to_vec::<i32>().unwrap(), model, "the column written, nothing else");
    // The matrix transposed (every byte of its span an element): written as one write of
    // the span, read as one read of it.
    let transposed = a.permute(&[1, 0]).unwrap();
    let values: Vec<i32> = (0..(rows * cols) as i32).map(|i| 7 - i).collect();
    transposed.copy_from_slice(&values).unwrap();
    assert_eq!(transposed.to_vec::<i32>().unwrap(), values);
    let want: Vec<i32> = (0..rows * cols).map(|i| values[(i % cols) * rows + i / cols]).collect();
    assert_eq!(a.to_vec::<i32>().unwrap(), want, "the transpose of what was written");
}

#[test]
#[ignore = "needs a CUDA or ROCm device: cargo xtask test --backend cuda|rocm --double"]
fn cuda_and_rocm_exchange_through_the_copy_engine() {
    let _shared = device_shared();
    let (rt, _) = gpuport_conformance::vendor_backend_under_test();
    let rocm_last = gpuport_conformance::first_two_devices(&rt, "rocm").pop().unwrap_or(0);
    let (Ok(cuda), Ok(rocm)) = (rt.device("cuda:0"), rt.device(&format!("rocm:{rocm_last}"))) else {
        panic!("both CUDA and ROCm must be available (the double runs load both doubles; skip this test elsewhere)");
    };
    let data: Vec<i32> = (0..100_000).map(|i| i * 7 - 3).collect();
    for (from, to, ty) in [(&cuda, &rocm, 10), (&rocm, &cuda, 2)] {
        let a = Array::from_slice(from, &data, &[100, 1000]).unwrap();
        let want = DLDevice { device_type: ty, device_id: to.id().ordinal as i32 };
        let request = ExportRequest { max_version: V1, dl_device: Some(want), ..Default::default() };
        let tensor = export(&rt, &a, request).unwrap();
        assert!(tensor.flags().contains(DlpackFlags::IS_COPIED), "{} → {}", from.id(), to.id());
        assert_eq!(tensor.dl_tensor().device, want);
        let back = from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap();
        assert_eq!(back.device_id(), to.id());
        assert_eq!(back.to_vec::<i32>().unwrap(), data, "{} → {}", from.id(), to.id());
        // A strided view across vendors too.
        let view = a.slice(1, 3, None, 7).unwrap();
        let moved = view.to_device(to).unwrap();
        assert_eq!(moved.to_vec::<i32>().unwrap(), view.to_vec::<i32>().unwrap());
    }
    drop((cuda, rocm));
}
