//! The legacy default stream's implicit synchronisation (`StreamFlags`): a stream created
//! without `NON_BLOCKING` and the legacy default stream wait for each other's earlier work;
//! a `NON_BLOCKING` stream waits for neither, and blocking streams do not wait for each
//! other.
//!
//! "Waits" is checked deterministically: the earlier work is held by a gate, and the later
//! work must still be pending after a window in which a port that does not wait would
//! have finished it (a small copy), and must see the earlier work's bytes once the gate
//! opens. "Does not wait" is checked by finishing the later work while the gate is still
//! closed: a port that waits cannot.

use std::time::Duration;

use gpuport_runtime::{AnyDevice, AnyStream, Buffer, DefaultStream, Error, StreamFlags};

use super::{finishes_within, held, read_all, stream, Gate, OpenOnDrop, FINISHES_WITHIN, HELD_FOR};
use crate::{ensure, Failure, Outcome, Target};

const N: usize = 4096;

/// A stream created without `NON_BLOCKING`.
fn blocking(dev: &AnyDevice) -> Result<AnyStream, Failure> {
    Ok(dev.create_stream(StreamFlags::empty(), 0)?)
}

/// Two buffers of `N` bytes, `earlier` holding 0x11 and `later` 0x00, written and
/// finished before the case queues anything.
fn buffers(dev: &AnyDevice) -> Result<(Buffer, Buffer), Failure> {
    let (earlier, later) = (dev.alloc(N)?, dev.alloc(N)?);
    let s = stream(dev)?;
    s.memset(&earlier, 0, N, 0x11)?;
    s.memset(&later, 0, N, 0x00)?;
    s.synchronize()?;
    Ok((earlier, later))
}

/// `first` is held by a gate and then sets `earlier` to 0xAB; `second` copies `earlier`
/// into `later`. `second` must wait for `first`'s earlier work, and see its bytes.
fn check_waits(first: &AnyStream, second: &AnyStream, dev: &AnyDevice, rule: &str) -> Outcome {
    let (earlier, later) = buffers(dev)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(first)?;
    first.memset(&earlier, 0, N, 0xAB)?;
    second.copy(&earlier, 0, &later, 0, N)?;
    ensure!(!finishes_within(second, HELD_FOR)?, "{rule}: the later work finished while the earlier work was held");
    gate.open();
    second.synchronize()?;
    ensure!(read_all(second, &later)? == vec![0xAB; N], "{rule}: the later work did not see the earlier work's bytes");
    Ok(())
}

/// `first` is held by a gate; `second`'s work, on memory of its own, must finish while
/// the gate is still closed.
fn check_does_not_wait(first: &AnyStream, second: &AnyStream, dev: &AnyDevice, rule: &str) -> Outcome {
    let (earlier, later) = buffers(dev)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(first)?;
    first.memset(&earlier, 0, N, 0xAB)?;
    second.memset(&later, 0, N, 0xCD)?;
    ensure!(finishes_within(second, FINISHES_WITHIN)?, "{rule}: its work waited for the held stream");
    second.synchronize()?;
    ensure!(!first.query()?, "{rule}: the held stream finished while its gate was closed");
    gate.open();
    first.synchronize()?;
    ensure!(read_all(second, &later)? == vec![0xCD; N], "{rule}: the other stream's memset is missing");
    Ok(())
}

/// Work on a stream created without `NON_BLOCKING`, and on the per-thread default stream
/// where the device has one, waits for the legacy default stream's earlier work, on every
/// device.
pub fn blocking_stream_waits_for_legacy(t: &Target) -> Outcome {
    for dev in &t.devices {
        let legacy = dev.default_stream(DefaultStream::Legacy)?;
        check_waits(&legacy, &blocking(dev)?, dev, "a blocking stream after the legacy default stream")?;
        match dev.default_stream(DefaultStream::PerThread) {
            Ok(per_thread) => {
                check_waits(&legacy, &per_thread, dev, "the per-thread default stream after the legacy default stream")?
            }
            Err(Error::Unsupported { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Work on the legacy default stream waits for every blocking stream's earlier work (the
/// second of two blocking streams holds it here).
pub fn legacy_waits_for_blocking_streams(t: &Target) -> Outcome {
    let dev = t.device();
    let (_idle, held) = (blocking(dev)?, blocking(dev)?);
    let legacy = dev.default_stream(DefaultStream::Legacy)?;
    check_waits(&held, &legacy, dev, "the legacy default stream after a blocking stream")
}

/// A `NON_BLOCKING` stream waits for neither the legacy default stream nor blocking
/// streams, the legacy stream does not wait for it, and two blocking streams do not wait
/// for each other.
pub fn non_blocking_and_blocking_streams_are_independent(t: &Target) -> Outcome {
    let dev = t.device();
    let legacy = dev.default_stream(DefaultStream::Legacy)?;
    let (nb, b1, b2) = (stream(dev)?, blocking(dev)?, blocking(dev)?);
    check_does_not_wait(&legacy, &nb, dev, "a NON_BLOCKING stream behind the legacy default stream")?;
    check_does_not_wait(&nb, &legacy, dev, "the legacy default stream behind a NON_BLOCKING stream")?;
    check_does_not_wait(&b1, &nb, dev, "a NON_BLOCKING stream behind a blocking stream")?;
    check_does_not_wait(&b1, &b2, dev, "a blocking stream behind another blocking stream")
}

/// A blocking stream's host read and host write (which a port may run at once on the
/// calling thread when the stream is idle) wait for the legacy default stream's earlier
/// work too: the read sees its bytes, and the write lands after it.
pub fn blocking_host_reads_and_writes_wait_for_legacy(t: &Target) -> Outcome {
    let dev = t.device();
    let legacy = dev.default_stream(DefaultStream::Legacy)?;
    let (earlier, later) = buffers(dev)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&legacy)?;
    legacy.memset(&earlier, 0, N, 0xAB)?;
    legacy.memset(&later, 0, N, 0xAB)?;
    let (reader, writer) = (blocking(dev)?, blocking(dev)?);
    let read = {
        let (s, b) = (reader.clone(), earlier.clone());
        held(move || {
            let mut out = vec![0u8; N];
            s.read(&b, 0, &mut out).map(|()| out)
        })
    };
    let Ok(read) = read else {
        return Err(Failure::new(
            "a blocking stream's host read returned while the legacy stream's earlier work was held",
        ));
    };
    let written = {
        let (s, b) = (writer.clone(), later.clone());
        held(move || s.write(&[0x5C; N], &b, 0))
    };
    let Ok(written) = written else {
        return Err(Failure::new(
            "a blocking stream's host write returned while the legacy stream's earlier work was held",
        ));
    };
    gate.open();
    let wait = Duration::from_secs(30);
    let out = read.recv_timeout(wait).map_err(|_| Failure::new("the held host read never returned"))??;
    ensure!(out == vec![0xAB; N], "a blocking stream's host read did not see the legacy stream's earlier memset");
    written.recv_timeout(wait).map_err(|_| Failure::new("the held host write never returned"))??;
    ensure!(
        read_all(&writer, &later)? == vec![0x5C; N],
        "a blocking stream's host write landed before the legacy stream's earlier memset"
    );
    Ok(())
}
