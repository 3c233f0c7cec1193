//! A port that makes its queue streams itself tracks each one with `QueueDevice::queues`,
//! and the device-wide synchronize then waits for that stream's work and reports its
//! error — the kit's own ports go through `create_stream`, which tracks for them.

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
