//! Unit tests of the ownership and validation logic, written to run under Miri
//! (`cargo +nightly miri test -p gpuport-dlpack --lib`): no threads, no backend.

use std::ffi::c_void;
use std::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gpuport_runtime::{DType, Error};

use crate::abi::*;
use crate::managed::{ManagedTensor, RawManaged};
use crate::package::{package, Kind, TensorParts};
use crate::{negotiate, validate};

/// A producer's tensor living on the test's stack; its deleter counts calls (an atomic
/// add, which cannot panic: no catch_unwind is needed at the `extern "C"` boundary).
struct Fake {
    /// A separate allocation, so the deleter's pointer to it survives moves of the Fake.
    calls: Arc<AtomicUsize>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    tensor: DLManagedTensorVersioned,
}

unsafe extern "C" fn count_versioned(t: *mut DLManagedTensorVersioned) {
    // SAFETY: `manager_ctx` points at the `calls` of the live `Fake` that owns `t`.
    unsafe { &*((*t).manager_ctx as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn count_legacy(t: *mut DLManagedTensor) {
    // SAFETY: as above.
    unsafe { &*((*t).manager_ctx as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
}

impl Fake {
    fn new(data: *mut c_void, shape: &[i64], strides: Option<&[i64]>, dtype: DLDataType) -> Box<Fake> {
        let mut fake = Box::new(Fake {
            calls: Arc::new(AtomicUsize::new(0)),
            shape: shape.to_vec(),
            strides: strides.map(<[i64]>::to_vec),
            tensor: DLManagedTensorVersioned {
                version: DLPACK_VERSION,
                manager_ctx: null_mut(),
                deleter: Some(count_versioned),
                flags: 0,
                dl_tensor: DLTensor {
                    data,
                    device: DLDevice { device_type: 1, device_id: 0 },
                    ndim: shape.len() as i32,
                    dtype,
                    shape: null_mut(),
                    strides: null_mut(),
                    byte_offset: 0,
                },
            },
        });
        fake.tensor.manager_ctx = Arc::as_ptr(&fake.calls).cast_mut().cast();
        fake.tensor.dl_tensor.shape = fake.shape.as_mut_ptr();
        fake.tensor.dl_tensor.strides = fake.strides.as_mut().map_or(null_mut(), |s| s.as_mut_ptr());
        fake
    }

    /// An owned handle to the tensor (the Fake must outlive it).
    fn take(&mut self) -> ManagedTensor {
        // SAFETY: the tensor is live and handed to exactly one owner per call in the tests.
        unsafe { ManagedTensor::from_versioned(&mut self.tensor) }.unwrap()
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

const F32: DLDataType = DLDataType { code: 2, bits: 32, lanes: 1 };

#[test]
fn the_deleter_runs_exactly_once_and_a_null_one_never() {
    let mut data = [0f32; 6];
    let mut fake = Fake::new(data.as_mut_ptr().cast(), &[2, 3], None, F32);
    drop(fake.take());
    assert_eq!(fake.calls(), 1);
    let raw = fake.take().into_raw();
    assert_eq!(fake.calls(), 1, "into_raw hands the tensor on without deleting it");
    // SAFETY: `raw` is the tensor given up above.
    drop(unsafe { ManagedTensor::from_raw(raw) });
    assert_eq!(fake.calls(), 2);
    fake.tensor.deleter = None;
    drop(fake.take()); // a NULL deleter is allowed, and not called
    assert_eq!(fake.calls(), 2);
    // SAFETY: null is refused before anything is read.
    assert!(unsafe { ManagedTensor::from_legacy(null_mut()) }.is_err());
}

#[test]
fn valid_tensors_are_described_exactly() {
    let mut data = [0f32; 12];
    let base = data.as_mut_ptr() as u64;
    // C-contiguous through NULL strides.
    let mut fake = Fake::new(data.as_mut_ptr().cast(), &[3, 4], None, F32);
    let v = validate(&fake.take()).unwrap();
    assert_eq!((v.start, v.len, v.element0), (base, 48, 0));
    assert_eq!(v.layout.strides(), &[4, 1]);
    assert_eq!(v.dtype, DType::F32);
    // Negative strides with byte_offset: element 0 is the last of the buffer.
    let mut fake = Fake::new(data.as_mut_ptr().cast(), &[3, 4], Some(&[-4, -1]), F32);
    fake.tensor.dl_tensor.byte_offset = 44;
    let v = validate(&fake.take()).unwrap();
    assert_eq!((v.start, v.len, v.element0), (base, 48, 44));
    // Zero-size with NULL data, and 0-d.
    let mut empty = Fake::new(null_mut(), &[0, 5], None, F32);
    assert_eq!(validate(&empty.take()).unwrap().len, 0);
    let mut scalar = Fake::new(data.as_mut_ptr().cast(), &[], None, F32);
    assert_eq!(validate(&scalar.take()).unwrap().len, 4);
    assert_eq!(fake.calls() + empty.calls() + scalar.calls(), 3, "every handle deleted once");
}

#[test]
fn malformed_tensors_are_refused_and_still_deleted_once() {
    let mut data = [0f32; 4];
    let ptr: *mut c_void = data.as_mut_ptr().cast();
    type Break = fn(&mut Fake);
    let cases: [(&str, Break); 8] = [
        ("major version 2", |f| f.tensor.version = DLPackVersion { major: 2, minor: 0 }),
        ("ndim -1", |f| f.tensor.dl_tensor.ndim = -1),
        ("ndim 65", |f| f.tensor.dl_tensor.ndim = 65),
        ("NULL shape", |f| f.tensor.dl_tensor.shape = null_mut()),
        ("negative extent", |f| f.shape[0] = -1),
        ("unknown dtype code", |f| f.tensor.dl_tensor.dtype.code = 99),
        ("NULL data", |f| f.tensor.dl_tensor.data = null_mut()),
        ("address overflow", |f| f.tensor.dl_tensor.byte_offset = u64::MAX - 2),
    ];
    for (what, break_it) in cases {
        let mut fake = Fake::new(ptr, &[4], None, F32);
        break_it(&mut fake);
        let tensor = fake.take();
        let err = validate(&tensor).expect_err(what);
        assert!(matches!(err, Error::Interchange { .. } | Error::InvalidLayout { .. }), "{what}: {err}");
        drop(tensor);
        assert_eq!(fake.calls(), 1, "{what}: the deleter must run exactly once");
    }
}

#[test]
fn a_newer_minor_version_is_accepted() {
    let mut data = [0f32; 4];
    let mut fake = Fake::new(data.as_mut_ptr().cast(), &[4], None, F32);
    fake.tensor.version = DLPackVersion { major: 1, minor: 9 };
    assert!(validate(&fake.take()).is_ok());
}

#[test]
fn versions_are_negotiated() {
    assert_eq!(negotiate(None), None);
    assert_eq!(negotiate(Some(DLPackVersion { major: 0, minor: 8 })), None);
    assert_eq!(negotiate(Some(DLPackVersion { major: 1, minor: 1 })), Some(DLPackVersion { major: 1, minor: 1 }));
    assert_eq!(negotiate(Some(DLPackVersion { major: 2, minor: 0 })), Some(DLPACK_VERSION));
}

/// Counts drops of an export's keep-alive.
struct Keep(Arc<AtomicUsize>);
impl Drop for Keep {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn an_export_holds_its_keep_alive_until_the_deleter_and_describes_the_array() {
    for kind in [Kind::Legacy, Kind::Versioned(DLPACK_VERSION, DlpackFlags::READ_ONLY)] {
        let dropped = Arc::new(AtomicUsize::new(0));
        let parts = TensorParts {
            data: std::ptr::without_provenance_mut(0x1000),
            device: DLDevice { device_type: 2, device_id: 1 },
            dtype: F32,
            shape: &[2, 3],
            strides: &[1, -2],
        };
        let tensor = package(&parts, Keep(dropped.clone()), kind).unwrap();
        let t = tensor.dl_tensor();
        // SAFETY: the export's shape and strides hold ndim entries while it lives.
        let (shape, strides) =
            unsafe { (std::slice::from_raw_parts(t.shape, 2), std::slice::from_raw_parts(t.strides, 2)) };
        assert_eq!((shape, strides), (&[2i64, 3][..], &[1i64, -2][..]), "strides are never rewritten");
        assert_eq!((t.data as u64, t.byte_offset, t.ndim), (0x1000, 0, 2));
        match (kind, tensor.version()) {
            (Kind::Legacy, None) => {}
            (Kind::Versioned(v, f), Some(got)) => {
                assert_eq!(got, v);
                assert_eq!(tensor.flags(), f);
            }
            other => panic!("wrong kind of export: {other:?}"),
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        let raw = tensor.into_raw(); // handed to a consumer …
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        // … which calls the deleter once.
        match raw {
            RawManaged::Legacy(p) => {
                // SAFETY: the export's own deleter, called once by its consumer.
                unsafe { (p.as_ref().deleter.unwrap())(p.as_ptr()) }
            }
            RawManaged::Versioned(p) => {
                // SAFETY: as above.
                unsafe { (p.as_ref().deleter.unwrap())(p.as_ptr()) }
            }
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "the keep-alive is released by the deleter, once");
    }
}

#[test]
fn a_legacy_producer_is_read_like_a_versioned_one() {
    let mut data = [0f32; 6];
    let calls = AtomicUsize::new(0);
    let mut shape = [6i64];
    let mut legacy = DLManagedTensor {
        dl_tensor: DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice { device_type: 1, device_id: 0 },
            ndim: 1,
            dtype: F32,
            shape: shape.as_mut_ptr(),
            strides: null_mut(),
            byte_offset: 8,
        },
        manager_ctx: (&calls as *const AtomicUsize).cast_mut().cast(),
        deleter: Some(count_legacy),
    };
    // SAFETY: the tensor lives on this frame past the handle.
    let tensor = unsafe { ManagedTensor::from_raw(RawManaged::Legacy(NonNull::from(&mut legacy))) };
    assert_eq!(tensor.version(), None);
    let v = validate(&tensor).unwrap();
    assert_eq!((v.start, v.len), (data.as_ptr() as u64 + 8, 24));
    drop(tensor);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
