//! A kit stream's handles: the owner's drop destroys the stream for every handle (a
//! borrowed one's later work is refused as `InvalidHandle`, and its raw handle no longer
//! resolves), and a raw handle resolves only on the stream's own device.

use gpuport_core::{BackendKind, DeviceId, Error, StreamFlags};
use gpuport_queue::{ImplicitRole, QueueStream};

fn stream(device: DeviceId) -> QueueStream {
    QueueStream::create(device, StreamFlags::NON_BLOCKING, ImplicitRole::Independent).unwrap()
}

#[test]
fn a_destroyed_stream_refuses_work_through_every_handle() {
    let owner = stream(DeviceId::HOST);
    let raw = owner.raw_handle();
    let borrowed = owner.to_borrowed();
    borrowed.host_callback(Box::new(|| {})).expect("a live stream takes work through a borrowed handle");
    drop(owner);
    let refused = borrowed.host_callback(Box::new(|| {}));
    assert!(matches!(refused, Err(Error::InvalidHandle { .. })), "{refused:?}");
    let mut ran = false;
    assert!(!borrowed.run_if_idle(&mut || ran = true) && !ran, "ran inline on a destroyed stream");
    assert!(QueueStream::from_raw(DeviceId::HOST, raw).is_err(), "a destroyed stream's raw handle resolved");
}

#[test]
fn a_raw_handle_resolves_on_its_own_device_only() {
    let other = DeviceId { kind: BackendKind::Plugin("other"), ordinal: 0 };
    let owner = stream(DeviceId::HOST);
    let raw = owner.raw_handle();
    let wrapped = QueueStream::from_raw(DeviceId::HOST, raw).expect("a live stream's raw handle");
    assert_eq!((wrapped.raw_handle(), wrapped.device_id()), (raw, DeviceId::HOST));
    assert!(QueueStream::from_raw(other, raw).is_err(), "a raw handle resolved on another device");
}
