//! The CUDA Array Interface on CUDA and ROCm arrays: the producer join over vendor
//! streams, the consumer policies with a slow producer, and device pointers resolved to
//! their device by pointer attributes. Ignored by default: `cargo xtask test --backend
//! cuda|rocm --double` (or `--backend cuda` on a GPU) runs them for the backend named in
//! `GPUPORT_CONFORMANCE_BACKENDS`, which must then be available.

use std::time::Duration;

use gpuport_cai::{export, import, CaiStream, Interface, Sync};
use gpuport_conformance::{device_alone, Gate};
use gpuport_runtime::{Access, AnyDevice, Array, CopyEngine, DType, EventFlags, StreamFlags};

/// An array on `dev` with a write held by a gate on a stream of its own.
fn slow_write(dev: &AnyDevice, value: u32, n: usize) -> (Array, Gate) {
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let a = Array::zeros(dev, &[n], DType::U32).unwrap();
    let src = Array::from_slice(dev, &vec![value; n], &[n]).unwrap();
    let gate = Gate::default();
    gate.block(&s).unwrap();
    CopyEngine::default().copy_on(&src, &a, &s).unwrap();
    (a, gate)
}

#[test]
#[ignore = "needs a CUDA or ROCm device: cargo xtask test --backend cuda|rocm --double"]
fn the_producer_joins_vendor_streams_into_the_named_one() {
    let _alone = device_alone(); // it holds streams shut
    let (rt, backend) = gpuport_conformance::vendor_backend_under_test();
    let last = gpuport_conformance::first_two_devices(&rt, &backend).pop().unwrap_or(0);
    let dev = rt.device(&format!("{backend}:{last}")).unwrap();
    let n = 3 * 1024;
    let a = Array::zeros(&dev, &[n], DType::U32).unwrap();
    // Everything allocated, and earlier tests' deferred frees done, before the first gate:
    // a real driver's allocation or free may wait for all of the device's work, the held
    // writes' too, which would finish them before the checks.
    let writers: Vec<_> = (0..3)
        .map(|k| {
            let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
            let src = Array::from_slice(&dev, &vec![k as u32 + 1; 1024], &[1024]).unwrap();
            (s, src)
        })
        .collect();
    let consumer = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    let out = dev.alloc(4 * n).unwrap();
    gpuport_runtime::release::flush();
    let mut gates = Vec::new();
    for (k, (s, src)) in writers.iter().enumerate() {
        let part = a.slice(0, k * 1024, Some((k + 1) * 1024), 1).unwrap();
        let gate = Gate::default();
        gate.block(s).unwrap();
        CopyEngine::default().copy_on(src, &part, s).unwrap();
        gates.push(gate);
    }
    let exported = export(&a).unwrap(); // at once
    assert_ne!(exported.interface.stream, CaiStream::None, "pending work names a stream");
    let named = exported.stream.clone().expect("the named stream is kept");
    named.record(&ev).unwrap();
    consumer.wait(&ev).unwrap();
    consumer.copy(a.buffer(), 0, &out, 0, 4 * n).unwrap();
    for gate in &gates {
        std::thread::sleep(Duration::from_millis(10));
        assert!(!consumer.query().unwrap(), "the consumer ran before every writer finished");
        gate.open();
    }
    consumer.synchronize().unwrap();
    let seen: Vec<u32> = consumer.read_vec(&out, 0, n).unwrap();
    assert!(seen.chunks(1024).enumerate().all(|(k, c)| c.iter().all(|&v| v == k as u32 + 1)));
}

#[test]
#[ignore = "needs a CUDA or ROCm device: cargo xtask test --backend cuda|rocm --double"]
fn imports_find_their_device_and_order_after_the_producer() {
    let _alone = device_alone(); // it holds streams shut
    let (rt, backend) = gpuport_conformance::vendor_backend_under_test();
    for ordinal in gpuport_conformance::first_two_devices(&rt, &backend) {
        let dev = rt.device(&format!("{backend}:{ordinal}")).unwrap();
        // Enqueue: later work on the import waits on the device, not the host. The
        // consumer's stream and memory come first: an allocation while a write is held
        // may wait for it on a real driver.
        let consumer = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
        let out = dev.alloc(1024).unwrap();
        gpuport_runtime::release::flush();
        let (producer, gate) = slow_write(&dev, 9, 256);
        let interface = export(&producer).unwrap().interface;
        let round = Interface::from_value(&interface.to_value().unwrap()).unwrap();
        // SAFETY: `producer` owns the memory; the named stream is live.
        let imported = unsafe { import(&rt, &round, Box::new(producer.clone()), None, Sync::Enqueue) }.unwrap();
        assert_eq!(imported.device_id(), dev.id(), "pointer attributes name the owning device");
        imported.wait_pending(&consumer, Access::Read).unwrap();
        consumer.copy(imported.buffer(), 0, &out, 0, 1024).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!consumer.query().unwrap(), "work on the import ran before the producer's write");
        gate.open();
        consumer.synchronize().unwrap();
        assert_eq!(consumer.read_vec::<u32>(&out, 0, 256).unwrap(), vec![9; 256]);
        // Host: the import returns once the write has run.
        let (producer, gate) = slow_write(&dev, 4, 64);
        let interface = export(&producer).unwrap().interface;
        let opener = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            gate.open();
        });
        // SAFETY: as above.
        let imported = unsafe { import(&rt, &interface, Box::new(producer), None, Sync::Host) }.unwrap();
        assert_eq!(imported.to_vec::<u32>().unwrap(), vec![4; 64]);
        opener.join().unwrap();
    }
}
