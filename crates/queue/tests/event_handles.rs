//! The kit's event handles: a raw handle names a live event of one device — refused on
//! another device and once its owner destroyed it, even while a borrowed handle keeps the
//! state alive — and the state keeps the flags it was made with.

use gpuport_core::{BackendKind, DeviceId, Error, EventFlags};
use gpuport_queue::{EventState, QueueEvent};

fn device(ordinal: u32) -> DeviceId {
    DeviceId::new(BackendKind::Host, ordinal)
}

#[test]
fn a_raw_handle_is_refused_on_another_device_and_once_destroyed() {
    let owner = QueueEvent::create(device(0), EventFlags::empty());
    let raw = owner.raw_handle();
    let borrowed = QueueEvent::from_raw(device(0), raw).expect("a live event of its own device");
    assert_eq!(borrowed.raw_handle(), raw);
    assert!(
        matches!(QueueEvent::from_raw(device(1), raw), Err(Error::InvalidHandle { .. })),
        "a live event wrapped on another device"
    );
    drop(owner);
    // The borrowed handle still holds the state; the handle is stale all the same.
    assert!(
        matches!(QueueEvent::from_raw(device(0), raw), Err(Error::InvalidHandle { .. })),
        "an event wrapped after its owner destroyed it"
    );
    assert!(matches!(borrowed.query(), Err(Error::InvalidHandle { .. })), "a query through a stale borrowed handle");
}

#[test]
fn an_event_state_keeps_its_flags() {
    for flags in
        [EventFlags::empty(), EventFlags::DISABLE_TIMING, EventFlags::DISABLE_TIMING | EventFlags::BLOCKING_SYNC]
    {
        assert_eq!(EventState::new(device(0), flags).flags(), flags);
        assert_eq!(QueueEvent::create(device(0), flags).flags(), flags);
    }
}
