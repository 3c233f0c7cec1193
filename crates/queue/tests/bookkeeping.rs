//! The kit's bookkeeping, as a port reads it: a handle forgotten is no longer resolved even
//! while its object lives on; the pointer registry counts the allocations alive; a host
//! block knows its length and is never empty; a kernel's arguments are counted; a queue
//! answers to its name, and its failed work names it.

use std::sync::Arc;

use gpuport_core::{DeviceId, MemoryKind};
use gpuport_queue::handles::HandleRegistry;
use gpuport_queue::kernels::HostArg;
use gpuport_queue::memory::{host_buffer, HostAllocation, PointerRegistry};
use gpuport_queue::HostKernelArgs;

#[test]
fn a_removed_handle_is_not_resolved_while_its_object_lives() {
    static REGISTRY: HandleRegistry<u32> = HandleRegistry::new();
    let object = Arc::new(7u32);
    let raw = REGISTRY.insert(&object);
    assert_eq!(REGISTRY.get(raw).as_deref(), Some(&7));
    REGISTRY.remove(raw);
    assert!(REGISTRY.get(raw).is_none(), "a forgotten handle resolved to its live object");
    assert_eq!(Arc::strong_count(&object), 1, "the registry held no strong reference");
}

#[test]
fn the_pointer_registry_counts_the_allocations_alive() {
    static REGISTRY: PointerRegistry = PointerRegistry::new();
    assert_eq!(REGISTRY.live_count(), 0);
    let a = host_buffer(&REGISTRY, DeviceId::HOST, 64, MemoryKind::Host, 1 << 20).unwrap();
    let b = host_buffer(&REGISTRY, DeviceId::HOST, 4096, MemoryKind::Host, 1 << 20).unwrap();
    assert_eq!(REGISTRY.live_count(), 2);
    drop(a);
    assert_eq!(REGISTRY.live_count(), 1);
    drop(b);
    assert_eq!(REGISTRY.live_count(), 0);
}

#[test]
fn a_host_block_knows_its_length_and_is_never_empty() {
    for bytes in [1, 100, 1 << 16] {
        let block = HostAllocation::new(DeviceId::HOST, bytes, 1 << 20).unwrap();
        assert_eq!(block.len(), bytes);
        assert!(!block.is_empty());
    }
}

#[test]
fn kernel_arguments_are_counted() {
    let mut byte = 0u8;
    let p: *mut u8 = &mut byte;
    let two = HostKernelArgs::new(vec![HostArg::Ptr(p, 1), HostArg::Ptr(p, 1)]);
    assert_eq!((two.len(), two.is_empty()), (2, false));
    let none = HostKernelArgs::new(Vec::new());
    assert_eq!((none.len(), none.is_empty()), (0, true));
}

#[test]
fn a_queue_answers_to_its_name_and_its_failed_work_names_it() {
    let queue = gpuport_queue::WorkQueue::new("stream 7 of cuda:1".into()).unwrap();
    assert_eq!(queue.name(), "stream 7 of cuda:1");
    queue.run(Box::new(|| Err(gpuport_core::Error::invalid_argument("the work's own failure")))).unwrap();
    match queue.synchronize() {
        Err(gpuport_core::Error::StreamWork { stream, message }) => {
            assert_eq!(stream, "stream 7 of cuda:1");
            assert!(message.contains("the work's own failure"), "{message}");
        }
        other => panic!("the failed work came back as {other:?}"),
    }
}
