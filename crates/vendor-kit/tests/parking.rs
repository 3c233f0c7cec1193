//! Parked handles through the kit's public interface: a sealed batch is released only
//! after its event, emptiness is both the open batch and the sealed ones, and taking
//! everything hands back every handle of both, each sealed batch's event destroyed once.

use std::cell::{Cell, RefCell};

use gpuport_core::{Buffer, BufferDesc, DeviceId, MemoryKind, Result};
use gpuport_vendor_kit::parking::{Fence, Keep, Parked, BATCH};

/// Events numbered from 1, complete below `completed_below` (none, unless a test says).
#[derive(Default)]
struct Events {
    made: Cell<u32>,
    completed_below: Cell<u32>,
    destroyed: RefCell<Vec<u32>>,
}

impl Fence for Events {
    type Handle = u32;
    fn seal(&self) -> Result<u32> {
        self.made.set(self.made.get() + 1);
        Ok(self.made.get())
    }
    fn done(&self, handle: u32) -> Result<bool> {
        Ok(handle < self.completed_below.get())
    }
    fn destroy(&self, handle: u32) {
        self.destroyed.borrow_mut().push(handle);
    }
}

fn buffer() -> Buffer {
    let desc =
        BufferDesc { addr: 0x1000, len: 8, device: DeviceId::HOST, memory: MemoryKind::Device, host_accessible: false };
    // SAFETY: a descriptor only; nothing dereferences it.
    unsafe { Buffer::from_borrowed(desc, None) }.unwrap()
}

#[test]
fn batches_are_released_only_after_their_event() {
    let fence = Events::default();
    let b = buffer();
    let mut parked = Parked::default();
    for _ in 0..BATCH {
        parked.park([Keep::Buffer(b.clone())], &fence).unwrap();
    }
    assert_eq!(b.handle_count(), BATCH + 1, "sealed batch 1 still holds its handles");
    fence.completed_below.set(2); // event 1 done
    for _ in 0..BATCH {
        parked.park([Keep::Buffer(b.clone())], &fence).unwrap();
    }
    assert_eq!(*fence.destroyed.borrow(), vec![1]);
    assert_eq!(b.handle_count(), BATCH + 1, "batch 1 released, batch 2 sealed and pending");
    parked.release_all(&fence);
    assert!(parked.is_empty());
    assert_eq!(b.handle_count(), 1);
    assert_eq!(*fence.destroyed.borrow(), vec![1, 2]);
}

#[test]
fn emptiness_counts_the_open_batch_and_the_sealed_ones() {
    let fence = Events::default();
    let b = buffer();
    let mut parked = Parked::default();
    assert!(parked.is_empty());
    parked.park([Keep::Buffer(b.clone())], &fence).unwrap();
    assert!(!parked.is_empty(), "one handle in the open batch");
    for _ in 1..BATCH {
        parked.park([Keep::Buffer(b.clone())], &fence).unwrap();
    }
    assert_eq!(fence.made.get(), 1, "the batch was sealed");
    assert!(!parked.is_empty(), "the open batch is empty, the sealed one is not");
    parked.release_all(&fence);
    assert!(parked.is_empty());
    assert_eq!(b.handle_count(), 1);
}

#[test]
fn taking_everything_hands_back_every_handle_and_destroys_each_event_once() {
    let fence = Events::default();
    let b = buffer();
    let mut parked = Parked::default();
    let parked_count = 2 * BATCH + 3;
    for _ in 0..parked_count {
        parked.park([Keep::Buffer(b.clone())], &fence).unwrap();
    }
    assert_eq!(fence.made.get(), 2);
    let taken = parked.take_all(&fence);
    assert_eq!(taken.len(), parked_count);
    assert!(taken.iter().all(|k| matches!(k, Keep::Buffer(t) if t.addr() == b.addr())));
    assert!(parked.is_empty());
    assert_eq!(*fence.destroyed.borrow(), vec![1, 2]);
    assert_eq!(b.handle_count(), parked_count + 1, "the handles are the taker's to keep");
    drop(taken);
    assert_eq!(b.handle_count(), 1);
}
