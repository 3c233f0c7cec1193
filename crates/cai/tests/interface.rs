//! The interface on devices with real asynchronous streams (the host and the ext device):
//! export rules, the producer join (the specification's streams 7, 9, 15 → 3), the three
//! consumer policies with a slow producer op, lifetimes, and CAI ↔ DLPack.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gpuport_cai::{export, import, CaiStream, Interface, Sync, Value};
use gpuport_conformance::Gate;
use gpuport_runtime::{Access, Array, CopyEngine, DType, EventFlags, Runtime, StreamFlags};

fn runtime() -> Runtime {
    gpuport_conformance::discover_with_builtin_ports()
}

#[test]
fn export_rules() {
    let rt = runtime();
    let host = rt.device("host").unwrap();
    let a = Array::from_slice(&host, &(0..12u32).collect::<Vec<_>>(), &[3, 4]).unwrap();
    a.synchronize().unwrap();
    let e = export(&a).unwrap().interface;
    assert_eq!((e.version, e.strides.clone(), e.stream, e.read_only), (3, None, CaiStream::None, false));
    assert_eq!(e.data, a.data_addr());
    let t = export(&a.permute(&[1, 0]).unwrap()).unwrap().interface;
    assert_eq!(t.strides, Some(vec![4, 16]), "byte strides");
    let empty = export(&a.slice(0, 1, Some(1), 1).unwrap()).unwrap().interface;
    assert_eq!(empty.data, 0, "a zero-size array exports pointer 0");
    let ro = export(&a.to_read_only()).unwrap().interface.to_value().unwrap();
    assert_eq!(ro.get("data").and_then(Value::items).map(|d| d[1].clone()), Some(Value::Bool(true)));
    let bf16 = Array::zeros(&host, &[2], DType::BF16).unwrap();
    assert!(export(&bf16).is_err(), "bfloat16 has no typestr: exporting it would reinterpret it");
}

/// Work on three streams (the specification's 7, 9, 15), each held by a slow op: the
/// export joins them into one named stream (its 3); a consumer that orders only after
/// the named stream sees all three writes.
#[test]
fn the_producer_joins_pending_work_on_several_streams_into_one() {
    let rt = runtime();
    for dev in [rt.device("host").unwrap(), rt.device("ext:0").unwrap()] {
        let n = 3 * 1024;
        let a = Array::zeros(&dev, &[n], DType::U32).unwrap();
        let gates: Vec<Gate> = (0..3).map(|_| Gate::default()).collect();
        let mut writers = Vec::new();
        for (k, gate) in gates.iter().enumerate() {
            let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
            let part = a.slice(0, k * 1024, Some((k + 1) * 1024), 1).unwrap();
            let src = Array::from_slice(&dev, &vec![k as u32 + 1; 1024], &[1024]).unwrap();
            gate.block(&s).unwrap();
            CopyEngine::default().copy_on(&src, &part, &s).unwrap();
            writers.push(s);
        }
        let exported = export(&a).unwrap(); // returns at once
        let named = exported.stream.clone().expect("pending work names a stream");
        assert!(matches!(exported.interface.stream, CaiStream::Handle(_) | CaiStream::Legacy));
        // The consumer orders only after the named stream.
        let consumer = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
        let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
        named.record(&ev).unwrap();
        consumer.wait(&ev).unwrap();
        let out = dev.alloc(4 * n).unwrap();
        consumer.copy(a.buffer(), 0, &out, 0, 4 * n).unwrap();
        for gate in &gates {
            std::thread::sleep(Duration::from_millis(10));
            assert!(!consumer.query().unwrap(), "{}: the consumer ran before every writer finished", dev.id());
            gate.open();
        }
        consumer.synchronize().unwrap();
        let seen: Vec<u32> = consumer.read_vec(&out, 0, n).unwrap();
        assert!(seen.chunks(1024).enumerate().all(|(k, c)| c.iter().all(|&v| v == k as u32 + 1)), "{}", dev.id());
    }
}

/// A producer array with a slow write pending on its own stream, exported; returns the
/// interface, the gate that holds the write, and the producer array.
fn slow_producer(rt: &Runtime) -> (Interface, Gate, Array) {
    let ext = rt.device("ext:0").unwrap();
    let s = ext.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let a = Array::zeros(&ext, &[256], DType::U32).unwrap();
    let src = Array::from_slice(&ext, &[9u32; 256], &[256]).unwrap();
    let gate = Gate::default();
    gate.block(&s).unwrap();
    CopyEngine::default().copy_on(&src, &a, &s).unwrap();
    let exported = export(&a).unwrap();
    (exported.interface, gate, a)
}

#[test]
fn enqueue_orders_later_work_without_blocking_the_host() {
    let rt = runtime();
    let (interface, gate, producer) = slow_producer(&rt);
    // SAFETY: `producer` keeps the memory alive (it is the owner); the stream is live.
    let imported = unsafe { import(&rt, &interface, Box::new(producer.clone()), None, Sync::Enqueue) }.unwrap();
    // Returned at once although the producer's write is still held: no host block.
    assert!(imported.has_pending_work().unwrap());
    let consumer = imported.device().create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    imported.wait_pending(&consumer, Access::Read).unwrap();
    let out = imported.device().alloc(1024).unwrap();
    consumer.copy(imported.buffer(), 0, &out, 0, 1024).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!consumer.query().unwrap(), "work on the import ran before the producer's write");
    gate.open();
    consumer.synchronize().unwrap();
    assert_eq!(consumer.read_vec::<u32>(&out, 0, 256).unwrap(), vec![9; 256]);
}

#[test]
fn host_synchronizes_before_returning_and_ignore_does_not() {
    let rt = runtime();
    // Host: the import returns only once the producer's write has run.
    let (interface, gate, producer) = slow_producer(&rt);
    let opened = Arc::new(AtomicBool::new(false));
    let (o, g) = (opened.clone(), gate.clone());
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        o.store(true, Ordering::SeqCst);
        g.open();
    });
    // SAFETY: as above.
    let imported = unsafe { import(&rt, &interface, Box::new(producer), None, Sync::Host) }.unwrap();
    assert!(opened.load(Ordering::SeqCst), "Sync::Host returned before the producer's stream finished");
    assert_eq!(imported.to_vec::<u32>().unwrap(), vec![9; 256]);
    opener.join().unwrap();
    // Ignore: no ordering at all — the user's business.
    let (interface, gate, producer) = slow_producer(&rt);
    // SAFETY: as above.
    let imported = unsafe { import(&rt, &interface, Box::new(producer), None, Sync::Ignore) }.unwrap();
    assert!(!imported.has_pending_work().unwrap(), "Sync::Ignore recorded the producer's stream");
    gate.open();
}

#[test]
fn imports_hold_their_owner_and_exported_streams_outlive_the_array() {
    let rt = runtime();
    let host = rt.device("host").unwrap();
    let a = Array::from_slice(&host, &[1.5f64, 2.5], &[2]).unwrap();
    let before = a.buffer().handle_count();
    let interface = export(&a).unwrap().interface;
    // SAFETY: the owner is the producer's allocation.
    let imported = unsafe { import(&rt, &interface, Box::new(a.buffer().clone()), None, Sync::Enqueue) }.unwrap();
    assert_eq!(a.buffer().handle_count(), before + 1, "the import holds its owner");
    assert_eq!(imported.to_vec::<f64>().unwrap(), vec![1.5, 2.5]);
    drop(imported);
    gpuport_core::release::flush();
    assert_eq!(a.buffer().handle_count(), before, "the owner was not released with the import");
    // The named stream outlives the exporting array.
    let s = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let b = Array::zeros(&host, &[4], DType::U8).unwrap();
    let src = Array::zeros(&host, &[4], DType::U8).unwrap();
    CopyEngine::default().copy_on(&src, &b, &s).unwrap();
    let named = export(&b).unwrap().stream;
    drop((b, s));
    if let Some(named) = named {
        named.synchronize().unwrap(); // still a live stream
    }
}

#[test]
fn cai_and_dlpack_carry_each_other() {
    let rt = runtime();
    let host = rt.device("host").unwrap();
    let a = Array::from_slice(&host, &[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap().to_read_only();
    let view = a.permute(&[1, 0]).unwrap();
    // CAI → DLPack.
    let interface = export(&view).unwrap().interface;
    // SAFETY: the owner is the producer array.
    let via_cai = unsafe { import(&rt, &interface, Box::new(view.clone()), None, Sync::Enqueue) }.unwrap();
    // SAFETY: no stream handle is passed.
    let tensor = gpuport_dlpack::to_dlpack(&rt, &via_cai, &Default::default()).unwrap();
    assert!(tensor.flags().contains(gpuport_dlpack::DlpackFlags::READ_ONLY), "read-only lost on the way");
    assert_eq!(tensor.dl_tensor().device.device_type, 1);
    let back = gpuport_dlpack::from_dlpack(&rt, tensor, &Default::default()).unwrap();
    assert_eq!(back.to_vec::<i32>().unwrap(), vec![1, 4, 2, 5, 3, 6]);
    // DLPack → CAI.
    let again = export(&back).unwrap().interface;
    assert!(again.read_only);
    assert_eq!((again.shape.clone(), again.strides.clone()), (vec![3, 2], Some(vec![4, 12])));
    assert_eq!(Interface::from_value(&again.to_value().unwrap()).unwrap(), again);
}
