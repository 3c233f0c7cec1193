//! Every device's facts, its streams' and events' facts, waits across devices, and what is
//! per device (a device-wide synchronize).

use std::sync::mpsc;
use std::time::Duration;

use gpuport_runtime::{DefaultStream, Error, EventFlags, StreamFlags};

use super::{finishes_within, held, pattern, read_all, stream, Gate, OpenOnDrop, FINISHES_WITHIN, HELD_FOR};
use crate::{ensure, Failure, Outcome, Target};

/// Every device, not only the first, gives its own facts: its id and ordinal, the facts
/// the backend listed for it at discovery, and the owner of its memory; the ordinal after
/// the last device is `DeviceNotFound`; the backend gives a version.
pub fn facts_of_every_device(t: &Target) -> Outcome {
    ensure!(!t.version.trim().is_empty(), "{} gives no version text", t.backend);
    ensure!(
        matches!(t.past_last_device, Some(Error::DeviceNotFound { .. })),
        "opening {}:{} (past the last device) gave {:?}, not DeviceNotFound",
        t.backend,
        t.devices.len(),
        t.past_last_device
    );
    ensure!(
        t.listed.len() == t.devices.len(),
        "the backend listed {} devices and {} opened",
        t.listed.len(),
        t.devices.len()
    );
    for (ordinal, (dev, listed)) in t.devices.iter().zip(&t.listed).enumerate() {
        let id = dev.id();
        ensure!(id.ordinal as usize == ordinal, "device {ordinal} says it is {id}");
        ensure!(id.kind.name() == t.backend, "a device of backend {} says it is {id}", t.backend);
        ensure!(
            Some(dev.dlpack_devices()) == t.dlpack,
            "{id} declares DLPack types {:?}, its backend {:?}",
            dev.dlpack_devices(),
            t.dlpack
        );
        let info = dev.info()?;
        ensure!(info.id == id, "{id}'s facts name {}", info.id);
        ensure!(!info.name.trim().is_empty(), "{id} gives no name");
        ensure!(info.multiprocessors != Some(0), "{id} says it has no compute units");
        ensure!(
            info == *listed,
            "{id}'s facts differ from those listed at discovery:\n  now:    {info:?}\n  listed: {listed:?}"
        );
        let b = dev.alloc(4096)?;
        ensure!(b.device() == id, "a buffer allocated on {id} says it is {}'s", b.device());
        // The total memory is in bytes: at least an allocation the device just granted
        // (a figure in KiB or MiB falls below it). 0 says the backend cannot tell.
        if info.total_memory != 0 {
            let granted = if cfg!(miri) { 1 << 20 } else { 64 << 20 };
            let big = dev.alloc(granted)?;
            ensure!(
                info.total_memory >= big.len() as u64,
                "{id} says it has {} bytes of memory, and granted an allocation of {granted}",
                info.total_memory
            );
        }
        // Every device of the backend answers for the memory of each (one address space,
        // as CUDA's unified addressing has).
        for asker in &t.devices {
            let a = asker.pointer_attributes(b.addr() + 100)?;
            ensure!(a.device == Some(id), "{} says {id}'s memory is {:?}'s", asker.id(), a.device);
        }
    }
    Ok(())
}

/// A stream of one device waits for an event recorded on another device's stream: its
/// later work is held while the event's work is, and sees that work's bytes.
pub fn wait_across_devices(t: &Target) -> Outcome {
    let (d0, d1) = (&t.devices[0], &t.devices[1]);
    let (s0, s1) = (stream(d0)?, stream(d1)?);
    if d1.can_access_peer(d0)? {
        d1.enable_peer_access(d0)?;
    }
    let n = 1 << 16;
    let (src, mid, dst) = (d0.alloc(n)?, d0.alloc(n)?, d1.alloc(n)?);
    let data = pattern(n, 23);
    s0.write(&data, &src, 0)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    let ev = d0.create_event(EventFlags::DISABLE_TIMING)?;
    gate.block(&s0)?;
    s0.copy(&src, 0, &mid, 0, n)?;
    s0.record(&ev)?;
    s1.wait(&ev)?;
    s1.copy(&mid, 0, &dst, 0, n)?;
    ensure!(
        !finishes_within(&s1, HELD_FOR)?,
        "{}'s stream finished while the {} event it waits on could not have completed",
        d1.id(),
        d0.id()
    );
    gate.open();
    s1.synchronize()?;
    ensure!(read_all(&s1, &dst)? == data, "{}'s stream did not see {}'s work it waited for", d1.id(), d0.id());
    Ok(())
}

/// `Device::synchronize` waits for its own device's work only: it returns while another
/// device's stream is held, and the held device's own synchronize does not.
pub fn synchronize_is_per_device(t: &Target) -> Outcome {
    let (d0, d1) = (&t.devices[0], &t.devices[1]);
    let s0 = stream(d0)?;
    let b = d0.alloc(4096)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s0)?;
    s0.memset(&b, 0, 4096, 0x3C)?;
    let (tx, rx) = mpsc::channel();
    let other = d1.clone();
    std::thread::spawn(move || {
        let _ = tx.send(other.synchronize());
    });
    match rx.recv_timeout(FINISHES_WITHIN) {
        Ok(result) => result?,
        Err(_) => {
            return Err(Failure::new(format!("{}'s Device::synchronize waited for {}'s held stream", d1.id(), d0.id())))
        }
    }
    let own = d0.clone();
    let Ok(rx) = held(move || own.synchronize()) else {
        return Err(Failure::new(format!("{}'s Device::synchronize returned while its stream was held", d0.id())));
    };
    gate.open();
    rx.recv_timeout(Duration::from_secs(30))
        .map_err(|_| Failure::new(format!("{}'s Device::synchronize never returned", d0.id())))??;
    ensure!(read_all(&stream(d0)?, &b)? == vec![0x3C; 4096], "the held memset is missing after the synchronize");
    Ok(())
}

/// On every device, every stream and event reports its device and the flags it was
/// created with, and a stream's priority is clamped into the device's range (one inside
/// it is kept as given).
pub fn stream_and_event_facts(t: &Target) -> Outcome {
    for dev in &t.devices {
        let id = dev.id();
        let (least, greatest) = dev.stream_priority_range()?;
        let (lo, hi) = (least.min(greatest), least.max(greatest));
        for flags in [StreamFlags::empty(), StreamFlags::NON_BLOCKING] {
            for asked in [least, greatest, lo.saturating_sub(100), hi.saturating_add(100)] {
                let s = dev.create_stream(flags, asked)?;
                ensure!(s.device_id() == id, "a stream created on {id} says it is {}'s", s.device_id());
                ensure!(s.flags() == flags, "a stream created on {id} with {flags:?} reports {:?}", s.flags());
                let expect = asked.clamp(lo, hi);
                ensure!(
                    s.priority() == expect,
                    "priority {asked} on {id} (range {least}..{greatest}) became {}, not {expect}",
                    s.priority()
                );
            }
        }
        let legacy = dev.default_stream(DefaultStream::Legacy)?;
        ensure!(legacy.device_id() == id, "{id}'s legacy default stream says it is {}'s", legacy.device_id());
        for flags in [EventFlags::empty(), EventFlags::DISABLE_TIMING, EventFlags::BLOCKING_SYNC] {
            let e = dev.create_event(flags)?;
            ensure!(e.device_id() == id, "an event created on {id} says it is {}'s", e.device_id());
            ensure!(e.flags() == flags, "an event created on {id} with {flags:?} reports {:?}", e.flags());
        }
    }
    Ok(())
}
