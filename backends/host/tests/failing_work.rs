//! Failing queued work, in a process of its own: the failure is sticky on its stream until
//! that stream reports it, so it must not meet other tests' device-wide synchronizes.

use gpuport_core::{Backend, Device, Error, LoadOptions, Stream, StreamFlags};
use gpuport_host::HostBackend;

#[test]
fn failing_work_is_reported_once_and_the_stream_goes_on() {
    let dev = HostBackend::load(&LoadOptions::default()).unwrap().open(0).unwrap();
    let s = dev.create_stream(StreamFlags::empty(), 0).unwrap();
    s.host_callback(Box::new(|| panic!("callback exploded"))).unwrap();
    // The device-wide synchronize reports it without clearing it …
    assert!(matches!(dev.synchronize(), Err(Error::StreamWork { .. })));
    // … so the stream reports it, once.
    let err = s.synchronize().unwrap_err();
    assert!(matches!(&err, Error::StreamWork { message, .. } if message.contains("callback exploded")), "{err}");
    s.synchronize().unwrap();
    dev.synchronize().unwrap();
    let b = dev.alloc(4).unwrap();
    s.write(&[1, 2, 3, 4], &b, 0).unwrap();
    let mut out = [0u8; 4];
    s.read(&b, 0, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4]);
}
