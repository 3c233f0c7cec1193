use std::time::{Duration, Instant};

use gpuport_runtime::{Error, EventFlags};

use super::{finishes_within, pattern, read_all, stream, Gate, OpenOnDrop, FINISHES_WITHIN, HELD_FOR};
use crate::{ensure, ensure_err, Outcome, Target};

pub fn query_before_and_after(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let ev = dev.create_event(EventFlags::empty())?;
    ensure!(ev.query()?, "a never-recorded event counts as complete");
    ev.synchronize()?; // returns at once
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s)?;
    s.record(&ev)?;
    ensure!(!ev.query()?, "an event recorded behind blocked work reports complete");
    gate.open();
    ev.synchronize()?;
    ensure!(ev.query()?, "a synchronized event reports incomplete");
    Ok(())
}

pub fn elapsed_time(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let evs = (0..3).map(|_| dev.create_event(EventFlags::empty())).collect::<Result<Vec<_>, _>>()?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s)?;
    s.record(&evs[0])?;
    s.host_callback(Box::new(|| std::thread::sleep(Duration::from_millis(5))))?;
    s.record(&evs[1])?;
    let b = dev.alloc(1 << 20)?;
    s.memset(&b, 0, 1 << 20, 3)?;
    s.record(&evs[2])?;
    ensure_err!(evs[0].elapsed_ms(&evs[2]), Error::NotReady { .. }, "elapsed time before completion");
    // Everything between the events runs after the gate opens and before the synchronize
    // returns: the host's window holds their interval, however loaded the machine.
    let opened = std::time::Instant::now();
    gate.open();
    s.synchronize()?;
    let window_ms = opened.elapsed().as_secs_f64() * 1e3;
    let t01 = evs[0].elapsed_ms(&evs[1])?;
    let t02 = evs[0].elapsed_ms(&evs[2])?;
    let t12 = evs[1].elapsed_ms(&evs[2])?;
    ensure!(t01 >= 0.0 && t12 >= 0.0, "elapsed times must not be negative: {t01}, {t12}");
    ensure!(t02 >= t01, "elapsed times must be monotone: 0→2 {t02} < 0→1 {t01}");
    // The 5 ms the callback slept lie between events 0 and 1 (a timer's granularity
    // below), and the interval lies within the host's window (a clock's tick above): a
    // figure in microseconds or seconds falls outside one or the other.
    let most = window_ms * 1.05 + 1.0;
    ensure!(
        (4.0..=most).contains(&f64::from(t01)) && f64::from(t02) <= most,
        "{t01} ms between two events around a 5 ms sleep, {t02} ms in all, within a host window of {window_ms:.3} ms"
    );
    ensure!(evs[0].elapsed_ms(&evs[0])? == 0.0, "an event is 0 ms from itself");
    // The other way round — an end that completed first — the same interval, negated.
    let back = evs[1].elapsed_ms(&evs[0])?;
    ensure!(
        (back + t01).abs() <= 1e-3 + 1e-3 * t01.abs(),
        "from event 1 back to event 0 is {back} ms, where event 0 to 1 is {t01} ms"
    );
    // A re-recorded event answers for its latest record: while that is held back, the time
    // to it is not ready — not the figure of the record before it.
    let again = Gate::default();
    let _open_again = OpenOnDrop(again.clone());
    again.block(&s)?;
    s.record(&evs[2])?;
    ensure_err!(
        evs[0].elapsed_ms(&evs[2]),
        Error::NotReady { .. },
        "elapsed time to an event re-recorded behind held work (its earlier record is complete)"
    );
    again.open();
    s.synchronize()?;
    let later = evs[0].elapsed_ms(&evs[2])?;
    ensure!(later >= t02, "the re-recorded event is {later} ms after the start, less than its first record's {t02} ms");
    Ok(())
}

pub fn timing_disabled(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let a = dev.create_event(EventFlags::DISABLE_TIMING)?;
    let b = dev.create_event(EventFlags::DISABLE_TIMING | EventFlags::BLOCKING_SYNC)?;
    ensure!(a.flags().contains(EventFlags::DISABLE_TIMING), "flags are not kept");
    s.record(&a)?;
    s.record(&b)?;
    b.synchronize()?;
    ensure!(a.elapsed_ms(&b).is_err(), "elapsed time between untimed events must be an error");
    Ok(())
}

/// A wait captures the record current when it is queued: re-recording the event later
/// does not change what the earlier wait waits for.
pub fn rerecord(t: &Target) -> Outcome {
    let dev = t.device();
    let (a, b) = (stream(dev)?, stream(dev)?);
    let n = 4096;
    let src = dev.alloc(n)?;
    let dst = dev.alloc(n)?;
    let data = pattern(n, 21);
    a.write(&data, &src, 0)?;
    let ev = dev.create_event(EventFlags::empty())?;
    a.record(&ev)?; // completes at once (nothing blocks A yet)
                    // B's wait is held behind a gate of its own, so it runs only after the re-record
                    // below: a port that looks at the event when the wait runs, not when it is queued,
                    // then waits for the later record.
    let b_gate = Gate::default();
    let _open_b = OpenOnDrop(b_gate.clone());
    b_gate.block(&b)?;
    b.wait(&ev)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&a)?;
    a.record(&ev)?; // re-recorded behind the gate
    b.copy(&src, 0, &dst, 0, n)?;
    b_gate.open();
    ensure!(
        finishes_within(&b, FINISHES_WITHIN)?,
        "a wait queued before the event was recorded again waited for the later record"
    );
    ensure!(read_all(&b, &dst)? == data, "copy after the wait is wrong");
    ensure!(!ev.query()?, "the re-recorded event completed early");
    gate.open();
    ev.synchronize()?;
    Ok(())
}

/// A wait queued after an event was recorded again waits for that latest record, not an
/// earlier one that has completed; a wait on an event never recorded waits for nothing.
pub fn wait_follows_the_latest_record(t: &Target) -> Outcome {
    let dev = t.device();
    let (a, b, c) = (stream(dev)?, stream(dev)?, stream(dev)?);
    // One buffer per stream: B and C are not ordered with each other.
    let (for_b, for_c) = (dev.alloc(16)?, dev.alloc(16)?);
    let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
    a.record(&ev)?;
    ev.synchronize()?; // the first record has completed
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&a)?;
    a.record(&ev)?; // the second, held
    b.wait(&ev)?;
    b.memset(&for_b, 0, 16, 1)?;
    ensure!(
        !finishes_within(&b, HELD_FOR)?,
        "a wait queued after the event was recorded again ran ahead of that record (it waited for an earlier one)"
    );
    let never = dev.create_event(EventFlags::DISABLE_TIMING)?;
    c.wait(&never)?;
    c.memset(&for_c, 0, 16, 2)?;
    ensure!(finishes_within(&c, FINISHES_WITHIN)?, "a wait on an event never recorded held its stream");
    gate.open();
    b.synchronize()?;
    ensure!(ev.query()?, "the event is not complete after the stream that waited on it finished");
    Ok(())
}

/// A stream and the events recorded on it agree about what has run. After
/// `Stream::synchronize` returns, or once `Stream::query` says done, every event recorded
/// on the stream is complete; once an event is complete, the stream's query says done when
/// nothing was queued after the record. A port that tells its events from a thread of its
/// own (an interrupt or completion-queue thread, say) breaks the first rule in the moment
/// the stream has run and the event is not yet told, so the rounds below wait each way
/// many times.
pub fn stream_and_event_agree(t: &Target) -> Outcome {
    // Under Miri (thousands of times slower) a few: it explores interleavings itself.
    const ROUNDS: usize = if cfg!(miri) { 12 } else { 300 };
    let dev = t.device();
    let s = stream(dev)?;
    let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
    for round in 0..ROUNDS {
        s.host_callback(Box::new(|| {}))?;
        s.record(&ev)?;
        match round % 3 {
            0 => {
                s.synchronize()?;
                ensure!(
                    ev.query()?,
                    "round {round}: Stream::synchronize returned, an event recorded on it is incomplete"
                );
            }
            1 => {
                let start = Instant::now();
                while !s.query()? {
                    ensure!(
                        start.elapsed() < FINISHES_WITHIN,
                        "round {round}: a stream with one host callback never finished"
                    );
                    std::thread::yield_now();
                }
                ensure!(ev.query()?, "round {round}: Stream::query says done, an event recorded on it is incomplete");
            }
            _ => {
                ev.synchronize()?;
                ensure!(
                    s.query()?,
                    "round {round}: the last event recorded on a stream is complete, the stream's query says pending"
                );
            }
        }
    }
    Ok(())
}
