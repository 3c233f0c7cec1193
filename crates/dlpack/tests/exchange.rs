//! Export and import through the host and the ext device (a software device with its own
//! memory space): round trips for dtypes and layouts, the cross-device matrix of
//! `dl_device` × `copy` × struct kind, read-only rules, and the stream handshake.

use std::time::Duration;

use gpuport_conformance::Gate;
use gpuport_dlpack::{
    dl_device_of, from_dlpack, to_dlpack, to_dlpack_on_stream, DLDevice, DLPackVersion, DlpackFlags, ExportRequest,
    ImportRequest, ManagedTensor,
};
use gpuport_runtime::{AnyDevice, AnyStream, Array, CopyEngine, DType, Error, Runtime, StreamFlags};

fn runtime() -> Runtime {
    gpuport_conformance::discover_with_builtin_ports()
}

const CPU: DLDevice = DLDevice { device_type: 1, device_id: 0 };
const EXT0: DLDevice = DLDevice { device_type: 12, device_id: 0 };
const V1: Option<DLPackVersion> = Some(DLPackVersion { major: 1, minor: 0 });

fn export(rt: &Runtime, a: &Array, request: ExportRequest) -> gpuport_runtime::Result<ManagedTensor> {
    to_dlpack(rt, a, &request)
}

fn round_trip(rt: &Runtime, a: &Array, request: ExportRequest) -> (Array, DlpackFlags) {
    let tensor = export(rt, a, request).expect("export");
    let flags = tensor.flags();
    (from_dlpack(rt, tensor, &ImportRequest::default()).expect("import"), flags)
}

/// Views of `base` (shape [4, 6]) covering every layout rule.
fn views(base: &Array) -> Vec<(&'static str, Array)> {
    vec![
        ("contiguous", base.clone()),
        ("transposed", base.permute(&[1, 0]).unwrap()),
        ("sliced with an offset", base.slice(0, 1, Some(3), 1).unwrap().slice(1, 2, None, 2).unwrap()),
        ("negative strides", base.slice(0, 3, None, -1).unwrap().slice(1, 5, None, -2).unwrap()),
        ("size-1 dimension", base.slice(0, 2, Some(3), 1).unwrap()),
        ("zero-size", base.slice(1, 3, Some(3), 1).unwrap()),
        ("0-d", base.slice(0, 1, Some(2), 1).unwrap().slice(1, 4, Some(5), 1).unwrap().reshape(&[]).unwrap()),
    ]
}

macro_rules! for_dtypes {
    ($f:ident) => {
        $f::<i8>(|i| i as i8);
        $f::<u16>(|i| i as u16 * 7);
        $f::<i32>(|i| -(i as i32));
        $f::<u64>(|i| i as u64 * 1_000_003);
        $f::<f32>(|i| i as f32 * 0.5);
        $f::<f64>(|i| i as f64 * -0.25);
    };
}

#[test]
fn zero_copy_round_trips_on_the_host_for_every_dtype_and_layout() {
    fn check<T: gpuport_runtime::Element + PartialEq + std::fmt::Debug>(make: fn(usize) -> T) {
        let rt = runtime();
        let host = rt.device("host").unwrap();
        let data: Vec<T> = (0..24).map(make).collect();
        let base = Array::from_slice(&host, &data, &[4, 6]).unwrap();
        for (what, view) in views(&base) {
            for max_version in [None, V1] {
                let (back, flags) = round_trip(&rt, &view, ExportRequest { max_version, ..Default::default() });
                assert!(!flags.contains(DlpackFlags::IS_COPIED), "{what}: a same-device export copied");
                assert_eq!(back.shape(), view.shape(), "{what}");
                assert_eq!(back.to_vec::<T>().unwrap(), view.to_vec::<T>().unwrap(), "{what}");
                if view.numel() > 0 {
                    assert_eq!(back.data_addr(), view.data_addr(), "{what}: not zero-copy");
                    assert_eq!(back.strides(), view.strides(), "{what}: strides rewritten");
                }
            }
        }
    }
    for_dtypes!(check);
}

#[test]
fn the_cross_device_matrix() {
    let rt = runtime();
    let (host, ext) = (rt.device("host").unwrap(), rt.device("ext:0").unwrap());
    let data: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let mut pairs = vec![(host.clone(), CPU, EXT0), (ext.clone(), EXT0, CPU)];
    // A GPU where one is present (the GPU bundle runs this test too): device ↔ CPU.
    for (name, device_type) in [("cuda", 2), ("rocm", 10)] {
        if rt.report_for(name).is_some_and(|r| r.is_available()) {
            let gpu = rt.device(&format!("{name}:0")).unwrap();
            pairs.push((gpu, DLDevice { device_type, device_id: 0 }, CPU));
        }
    }
    for (src_dev, here, there) in &pairs {
        let (src_dev, here, there) = (src_dev, *here, *there);
        let a = Array::from_slice(src_dev, &data, &[3, 4]).unwrap();
        assert_eq!(dl_device_of(&a).unwrap(), here);
        for max_version in [None, V1] {
            for copy in [None, Some(true), Some(false)] {
                for target in [here, there] {
                    let request = ExportRequest { max_version, dl_device: Some(target), copy, stream: None };
                    let cell = format!("{here:?} → {target:?}, copy {copy:?}, version {max_version:?}");
                    let must_copy = target != here || copy == Some(true);
                    match export(&rt, &a, request) {
                        Err(e) => {
                            assert!(must_copy && copy == Some(false), "{cell}: unexpected error {e}");
                            assert!(matches!(e, Error::Interchange { .. }), "{cell}: {e}");
                        }
                        Ok(tensor) => {
                            assert!(!(must_copy && copy == Some(false)), "{cell}: copy=False copied");
                            let copied = tensor.flags().contains(DlpackFlags::IS_COPIED);
                            // The legacy struct has no flags; a versioned one says whether it copied.
                            assert_eq!(copied, must_copy && max_version.is_some(), "{cell}: IS_COPIED");
                            assert_eq!(tensor.dl_tensor().device, target, "{cell}: device");
                            let back = from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap();
                            assert_eq!(dl_device_of(&back).unwrap(), target, "{cell}");
                            assert_eq!(back.to_vec::<f32>().unwrap(), data, "{cell}: data");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn import_requests_copy_through_the_copy_engine() {
    let rt = runtime();
    let (host, ext) = (rt.device("host").unwrap(), rt.device("ext:0").unwrap());
    let a = Array::from_slice(&ext, &[1u32, 2, 3], &[3]).unwrap();
    let tensor = export(&rt, &a, ExportRequest::default()).unwrap();
    let on_host = from_dlpack(&rt, tensor, &ImportRequest { device: Some(host.clone()), copy: None }).unwrap();
    assert_eq!((on_host.device_id(), on_host.to_vec::<u32>().unwrap()), (host.id(), vec![1, 2, 3]));
    let tensor = export(&rt, &a, ExportRequest::default()).unwrap();
    let err = from_dlpack(&rt, tensor, &ImportRequest { device: Some(host), copy: Some(false) }).unwrap_err();
    assert!(matches!(err, Error::Interchange { .. }), "{err}");
}

#[test]
fn read_only_arrays() {
    let rt = runtime();
    let host = rt.device("host").unwrap();
    let a = Array::from_slice(&host, &[1i16, 2], &[2]).unwrap().to_read_only();
    let err = export(&rt, &a, ExportRequest { max_version: None, ..Default::default() }).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    let tensor = export(&rt, &a, ExportRequest::default()).unwrap();
    assert!(tensor.flags().contains(DlpackFlags::READ_ONLY));
    let back = from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap();
    assert!(back.is_read_only());
    assert!(back.copy_from_slice(&[3i16, 4]).is_err(), "a read-only import was written");
}

#[test]
fn the_imported_array_releases_the_producer_once_its_last_view_is_gone() {
    let rt = runtime();
    let host = rt.device("host").unwrap();
    let a = Array::from_slice(&host, &[5u8; 64], &[8, 8]).unwrap();
    let before = a.buffer().handle_count();
    let tensor = export(&rt, &a, ExportRequest::default()).unwrap();
    assert_eq!(a.buffer().handle_count(), before + 1, "the export holds the allocation");
    let back = from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap();
    let view = back.slice(0, 2, None, 3).unwrap();
    drop(back);
    assert_eq!(a.buffer().handle_count(), before + 1, "a view still holds the import");
    drop(view);
    gpuport_core::release::flush();
    assert_eq!(a.buffer().handle_count(), before, "the export was not released once");
}

fn pending_write(dev: &AnyDevice, data: &[u32]) -> (Array, Gate, AnyStream) {
    let writer = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let src = Array::from_slice(dev, data, &[data.len()]).unwrap();
    let dst = Array::zeros(dev, &[data.len()], DType::U32).unwrap();
    let gate = Gate::default();
    gate.block(&writer).unwrap();
    CopyEngine::default().copy_on(&src, &dst, &writer).unwrap(); // pending until the gate opens
    (dst, gate, writer)
}

#[test]
fn the_consumers_stream_waits_for_pending_work_without_blocking_the_host() {
    let rt = runtime();
    let ext = rt.device("ext:0").unwrap();
    let data: Vec<u32> = (0..1024).collect();
    let (a, gate, _writer) = pending_write(&ext, &data);
    let consumer = ext.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let request = ExportRequest { stream: Some(consumer.raw_handle() as i64), ..Default::default() };
    // SAFETY: `consumer` is a live stream of the array's device.
    let tensor = unsafe { to_dlpack_on_stream(&rt, &a, &request) }.unwrap(); // returns at once
    let out = ext.alloc(4 * 1024).unwrap();
    consumer.copy(a.buffer(), 0, &out, 0, 4 * 1024).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!consumer.query().unwrap(), "the consumer's stream did not wait for the pending write");
    gate.open();
    consumer.synchronize().unwrap();
    assert_eq!(consumer.read_vec::<u32>(&out, 0, 1024).unwrap(), data);
    drop(tensor);
}

#[test]
fn a_cpu_export_is_ready_on_return() {
    let rt = runtime();
    let host = rt.device("host").unwrap();
    let data: Vec<u32> = (0..256).map(|i| i * 3).collect();
    let (a, gate, _writer) = pending_write(&host, &data);
    let (tx, rx) = std::sync::mpsc::channel();
    let (rt2, a2) = (runtime(), a.clone());
    std::thread::spawn(move || {
        let _ = tx.send(export(&rt2, &a2, ExportRequest::default()));
    });
    assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "a CPU export returned before its data was written");
    gate.open();
    let tensor = rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    // SAFETY: the export holds the host array's memory, and said its data is ready.
    let seen = unsafe { std::slice::from_raw_parts(tensor.dl_tensor().data as *const u32, 256) };
    assert_eq!(seen, &data[..]);
    drop((tensor, a));
}

#[test]
fn bad_streams_are_refused() {
    let rt = runtime();
    let host = rt.device("host").unwrap();
    let a = Array::from_slice(&host, &[1u8], &[1]).unwrap();
    for stream in [0, 1, 2, -1, -7] {
        let err = export(&rt, &a, ExportRequest { stream: Some(stream), ..Default::default() }).unwrap_err();
        assert!(err.to_string().contains("stream="), "stream {stream}: {err}");
    }
}

#[test]
fn every_dtype_code_round_trips_between_host_and_ext_or_is_refused() {
    use gpuport_runtime::DTypeCode;
    let rt = runtime();
    let (host, ext) = (rt.device("host").unwrap(), rt.device("ext:0").unwrap());
    for code in DTypeCode::ALL {
        let bits = match code {
            DTypeCode::Int | DTypeCode::UInt | DTypeCode::Float | DTypeCode::OpaqueHandle => 64,
            DTypeCode::Bfloat => 16,
            DTypeCode::Complex => 128,
            DTypeCode::Bool => 8,
            DTypeCode::Float6_e2m3fn | DTypeCode::Float6_e3m2fn => 6,
            DTypeCode::Float4_e2m1fn => 4,
            _ => 8, // the float8 variants
        };
        let refused = matches!(bits, 4 | 6);
        let Ok(dtype) = DType::new(code, bits, 1) else { panic!("{code:?} with {bits} bits is a valid dtype") };
        if refused {
            // Sub-byte types have no byte-addressed layout: no array of them exists to export.
            assert!(dtype.itemsize().is_err(), "{dtype}");
            continue;
        }
        let item = dtype.itemsize().unwrap();
        let a = Array::empty(&host, &[3, 5], dtype).unwrap();
        let bytes: Vec<u8> = (0..15 * item).map(|i| (i * 37 % 251) as u8).collect();
        a.copy_from_bytes(&bytes).unwrap();
        let view = a.slice(1, 4, None, -2).unwrap(); // strided, negative
        let request = ExportRequest { dl_device: Some(EXT0), ..Default::default() };
        let on_ext = from_dlpack(&rt, export(&rt, &view, request).unwrap(), &ImportRequest::default()).unwrap();
        assert_eq!(on_ext.device_id(), ext.id(), "{dtype}");
        assert_eq!(on_ext.dtype(), dtype, "{dtype}: the dtype changed");
        let request = ExportRequest { dl_device: Some(CPU), ..Default::default() };
        let back = from_dlpack(&rt, export(&rt, &on_ext, request).unwrap(), &ImportRequest::default()).unwrap();
        assert_eq!(back.to_bytes().unwrap(), view.to_bytes().unwrap(), "{dtype}: data changed on the way");
    }
}

#[test]
fn memory_kind_picks_the_device_type_and_unknown_types_are_named() {
    let rt = runtime();
    let ext = rt.device("ext:0").unwrap();
    // ext's pinned memory is plain CPU memory: it exports as kDLCPU (as ext declares),
    // not as kDLExtDev.
    let pinned = ext.alloc_pinned(64, Default::default()).unwrap();
    let layout = gpuport_runtime::Layout::contiguous(&[16]).unwrap();
    let a = Array::from_buffer(&ext, pinned, 0, DType::U32, layout).unwrap();
    assert_eq!(dl_device_of(&a).unwrap(), CPU);
    // No backend here declares Vulkan: an import is refused, naming the type, and the
    // producer's tensor is still released (the export's keep-alive goes away).
    let host = rt.device("host").unwrap();
    let b = Array::from_slice(&host, &[1u8, 2, 3], &[3]).unwrap();
    let before = b.buffer().handle_count();
    let tensor = export(&rt, &b, ExportRequest::default()).unwrap();
    let raw = tensor.into_raw();
    if let gpuport_dlpack::RawManaged::Versioned(mut p) = raw {
        // SAFETY: the export is ours and unshared; only its device is changed.
        unsafe { p.as_mut().dl_tensor.device = DLDevice { device_type: 7, device_id: 0 } };
    }
    // SAFETY: the pointer is the export given up above.
    let tensor = unsafe { ManagedTensor::from_raw(raw) };
    let err = from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap_err().to_string();
    assert!(err.contains("kDLVulkan"), "{err}");
    assert_eq!(b.buffer().handle_count(), before, "the refused tensor was not released");
}

#[test]
fn the_safe_export_refuses_raw_stream_handles_and_takes_the_named_ones() {
    let rt = runtime();
    let ext = rt.device("ext:0").unwrap();
    let a = Array::from_slice(&ext, &[1u32, 2, 3], &[3]).unwrap();
    let consumer = ext.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let raw = ExportRequest { stream: Some(consumer.raw_handle() as i64), ..Default::default() };
    let err = to_dlpack(&rt, &a, &raw).unwrap_err();
    assert!(matches!(err, gpuport_runtime::Error::InvalidArgument { .. }), "{err:#?}");
    assert!(err.to_string().contains("to_dlpack_on_stream"), "{err}");
    for stream in [None, Some(-1)] {
        let tensor = to_dlpack(&rt, &a, &ExportRequest { stream, ..Default::default() }).expect("no raw handle");
        assert_eq!(tensor.dl_tensor().device, DLDevice::new(gpuport_runtime::DlDeviceType::EXT_DEV, 0));
    }
    // A copy to the CPU uses no stream of the consumer's: the safe entry point makes it.
    let copy = ExportRequest { dl_device: Some(DLDevice::cpu()), ..Default::default() };
    let tensor = to_dlpack(&rt, &a, &copy).expect("a copy to the CPU");
    assert!(tensor.flags().contains(DlpackFlags::IS_COPIED));
}
