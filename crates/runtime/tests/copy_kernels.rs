//! Strided views of CUDA and ROCm memory copied by the copy kernels: read to the host,
//! written from it, and copied to and from contiguous arrays of the device, for every
//! element size the kernels have, one to eight axes, negative strides and offsets — and
//! the views the kernels leave to 2D copies (nine axes, long runs) beside them, checked
//! against a host model. Needs a device (ignored by default); `cargo xtask test` runs it
//! on every driver double, which runs the kernels by name on the CPU.

use gpuport_runtime::{
    copy, release_copy_resources, strided_copy_kernels, AnyDevice, Array, DType, DefaultStream, Layout, Runtime,
};

/// The first device of CUDA and of ROCm, those there are; with none, each backend's reason
/// (the GPU bundle's summary tells an unavailable backend by it).
fn vendor_devices() -> Result<Vec<AnyDevice>, String> {
    let rt = Runtime::discover();
    let (found, why): (Vec<_>, Vec<_>) =
        ["cuda", "rocm"].iter().map(|b| rt.device(&format!("{b}:0"))).partition(|d| d.is_ok());
    let found: Vec<AnyDevice> = found.into_iter().filter_map(Result::ok).collect();
    if found.is_empty() {
        let why: Vec<String> = why.into_iter().filter_map(Result::err).map(|e| e.to_string()).collect();
        return Err(why.join("; "));
    }
    Ok(found)
}

/// Whether the kernels must compile on `dev`: where its vendor's compiler is named, as
/// `cargo xtask test` names the ones it finds.
fn kernels_required(dev: &AnyDevice) -> bool {
    let var = if dev.id().kind.name() == "cuda" { "GPUPORT_NVRTC_LIBRARY" } else { "GPUPORT_HIPRTC_LIBRARY" };
    std::env::var_os(var).is_some()
}

/// A view: shape, strides (elements) and the element offset of element 0 in its buffer.
struct Case {
    what: &'static str,
    shape: Vec<usize>,
    strides: Vec<isize>,
    zero: usize,
}

fn cases() -> Vec<Case> {
    // Eight axes that do not merge: each stride twice the extent of the one inside it.
    let eight: Vec<isize> = (0..8).map(|i| 2isize << (2 * (7 - i))).collect();
    let nine: Vec<isize> = (0..9).map(|i| 2isize << (2 * (8 - i))).collect();
    vec![
        Case { what: "every 8th element", shape: vec![4099], strides: vec![8], zero: 3 },
        Case { what: "a transposed matrix", shape: vec![37, 53], strides: vec![1, 37], zero: 0 },
        Case { what: "reversed rows, every other column", shape: vec![5, 33], strides: vec![-66, 2], zero: 4 * 66 + 1 },
        Case { what: "a 3-D slice", shape: vec![3, 4, 5], strides: vec![400, 20, 2], zero: 7 },
        Case { what: "eight axes", shape: vec![2; 8], strides: eight, zero: 0 },
        Case { what: "nine axes (2D copies)", shape: vec![2; 9], strides: nine, zero: 0 },
        Case { what: "rows of 2 KiB and more (2D copies)", shape: vec![6, 2048], strides: vec![2100, 1], zero: 5 },
        Case { what: "one element", shape: vec![1, 1], strides: vec![9, 4], zero: 2 },
    ]
}

/// The element offsets (in elements, from the buffer's start) of a case, in C order.
fn offsets(case: &Case) -> Vec<usize> {
    let mut out = Vec::new();
    Layout::new(&case.shape, &case.strides).unwrap().for_each_offset(|o| out.push((case.zero as isize + o) as usize));
    out
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed).collect()
}

/// Runs every check of `case` with elements of `dtype` on `dev`.
fn check(dev: &AnyDevice, case: &Case, dtype: DType) {
    let item = dtype.itemsize().unwrap();
    let at = offsets(case);
    let elements = *at.iter().max().unwrap() + 1;
    let raw = pattern(elements * item, item as u8);
    let buf = dev.alloc(raw.len()).unwrap();
    let stream = dev.default_stream(DefaultStream::Legacy).unwrap();
    stream.write(&raw, &buf, 0).unwrap();
    let layout = Layout::new(&case.shape, &case.strides).unwrap();
    let view = Array::from_buffer(dev, buf.clone(), case.zero * item, dtype, layout).unwrap();
    let label = format!("{} on {}, {item}-byte elements", case.what, dev.id());
    let model: Vec<u8> = at.iter().flat_map(|&e| raw[e * item..(e + 1) * item].to_vec()).collect();

    // Read to the host.
    assert_eq!(view.to_bytes().unwrap(), model, "{label}: read");
    // Copied into a contiguous array of the device, and back out to the host.
    let packed = Array::empty(dev, &case.shape, dtype).unwrap();
    copy(&view, &packed).unwrap();
    assert_eq!(packed.to_bytes().unwrap(), model, "{label}: copied into a contiguous array");

    // Written from the host: the elements change, the bytes between them do not.
    let new = pattern(model.len(), 0x5a);
    view.copy_from_bytes(&new).unwrap();
    let mut expected = raw.clone();
    for (k, &e) in at.iter().enumerate() {
        expected[e * item..(e + 1) * item].copy_from_slice(&new[k * item..(k + 1) * item]);
    }
    let mut back = vec![0u8; raw.len()];
    stream.read(&buf, 0, &mut back).unwrap();
    assert!(back == expected, "{label}: written from the host");

    // Copied from a contiguous array of the device.
    copy(&packed, &view).unwrap();
    for (k, &e) in at.iter().enumerate() {
        expected[e * item..(e + 1) * item].copy_from_slice(&model[k * item..(k + 1) * item]);
    }
    stream.read(&buf, 0, &mut back).unwrap();
    assert!(back == expected, "{label}: copied from a contiguous array");
}

#[test]
#[ignore = "needs a CUDA or ROCm device (a driver double runs the copy kernels)"]
fn strided_views_of_gpu_memory_copy_with_kernels_or_2d_copies() {
    let devices = vendor_devices()
        .unwrap_or_else(|why| panic!("no CUDA or ROCm device: this test runs on a GPU or a driver double ({why})"));
    for dev in &devices {
        match strided_copy_kernels(dev) {
            Ok(()) => println!("{}: copy kernels compiled", dev.id()),
            Err(e) if !kernels_required(dev) => println!("{}: no copy kernels ({e}); 2D copies checked", dev.id()),
            Err(e) => panic!("{}: the copy kernels did not compile with the compiler named: {e}", dev.id()),
        }
        for case in cases() {
            for dtype in [DType::U8, DType::U16, DType::F32, DType::F64, DType::C128] {
                check(dev, &case, dtype);
            }
        }
    }
    release_copy_resources();
}
