//! Strided views of the C plugin's arrays: its memory is its own and it has no
//! stream-ordered allocation, so `Array::to_bytes` and `Array::copy_from_bytes` cannot pack
//! a view's elements in a scratch buffer of the device and go through host memory
//! instead — with the same results.

use gpuport::{Array, Error, Runtime, StreamFlags};
use gpuport_c_plugin_test::{library, NAME};

#[test]
fn strided_views_without_stream_ordered_memory_go_through_the_host() {
    Runtime::load_plugin(library(None)).expect("the C plugin loads");
    let rt = gpuport_conformance::discover_with_builtin_ports();
    let dev = rt.device(&format!("{NAME}:0")).unwrap();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    assert!(matches!(dev.alloc_async(64, &s), Err(Error::Unsupported { .. })), "the case this test is for");
    assert!(!dev.alloc(64).unwrap().is_host_accessible());
    let (rows, cols) = (256usize, 512usize);
    let data: Vec<u32> = (0..(rows * cols) as u32).map(|i| i * 3 + 1).collect();
    let a = Array::from_slice(&dev, &data, &[rows, cols]).unwrap();
    let column = a.index_axis(1, 9).unwrap();
    let want: Vec<u32> = (0..rows).map(|r| data[r * cols + 9]).collect();
    assert_eq!(column.to_vec::<u32>().unwrap(), want);
    let new: Vec<u32> = (0..rows as u32).map(|i| u32::MAX - i).collect();
    column.copy_from_slice(&new).unwrap();
    let mut model = data;
    for (r, v) in new.iter().enumerate() {
        model[r * cols + 9] = *v;
    }
    assert_eq!(a.to_vec::<u32>().unwrap(), model, "the column written, nothing else");
}
