//! What `QueueDevice` promises a port beyond the suite's cases: a port that makes its queue
//! streams itself tracks each one with `QueueDevice::queues`, and the device-wide
//! synchronize then waits for that stream's work and reports its error (the kit's own ports
//! go through `create_stream`, which tracks for them); and `check_stream` refuses another
//! device's stream.

use gpuport_core::{DeviceId, Error, StreamFlags};
use gpuport_queue::{QueueDevice, QueueStream};

#[test]
fn a_stream_tracked_through_queues_is_waited_for_by_the_device() {
    let device: QueueDevice<QueueStream> = QueueDevice::new(DeviceId::HOST);
    let flags = StreamFlags::NON_BLOCKING;
    let stream = QueueStream::create(device.id(), flags, device.stream_role(flags)).unwrap();
    device.queues().track(&stream);
    stream.queue().run(Box::new(|| Err(Error::invalid_argument("the tracked stream's work failed")))).unwrap();
    let err = device.synchronize().expect_err("the device's synchronize missed the tracked stream");
    assert!(err.to_string().contains("the tracked stream's work failed"), "{err}");
}

/// A stream handed to a device's stream-ordered call (`alloc_async` and the like) must be
/// the device's own: another device's is `InvalidArgument`, before anything is done.
#[test]
fn a_stream_of_another_device_is_refused_by_check_stream() {
    let device: QueueDevice<QueueStream> = QueueDevice::new(DeviceId::HOST);
    device.check_stream(DeviceId::HOST).expect("the device's own stream");
    let other = DeviceId { kind: gpuport_core::BackendKind::Plugin("other"), ordinal: 0 };
    let refused = device.check_stream(other);
    assert!(matches!(refused, Err(Error::InvalidArgument { .. })), "{refused:?}");
}
