use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use gpuport_runtime::{AnyDevice, AnyStream, EventFlags};

use super::{pattern, read_all, stream};
use crate::{ensure, Failure, Outcome, Target};

/// Threads in [`many_threads`], each with [`STREAMS_PER_THREAD`] streams live at once.
const THREADS: usize = 8;
const STREAMS_PER_THREAD: usize = 4;
const ROUNDS: usize = 10;

/// Many threads create streams and events at once and chain work across them. In every
/// round all threads' streams are live together (a barrier holds each thread until every
/// other has made its streams): 32 at once, past the 16 a port's fixed table might hold.
pub fn many_threads(t: &Target) -> Outcome {
    let dev = t.device().clone();
    let done = Arc::new(AtomicUsize::new(0));
    let together = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|ti| {
            let dev = dev.clone();
            let done = done.clone();
            let together = together.clone();
            std::thread::spawn(move || -> Result<(), Failure> {
                // Every thread reaches the barrier in every round, whatever failed, so that
                // no thread waits there for one that has given up.
                // A panic in the port counts as a failure for the same reason.
                let mut first_failure = None;
                for round in 0..ROUNDS {
                    let streams = unwinding_fails(|| {
                        (0..STREAMS_PER_THREAD).map(|_| stream(&dev)).collect::<Result<Vec<_>, _>>()
                    });
                    together.wait();
                    if first_failure.is_some() {
                        continue;
                    }
                    let chained =
                        streams.and_then(|streams| unwinding_fails(|| chain(&dev, &streams, &done, ti, round)));
                    if let Err(e) = chained {
                        first_failure = Some(e);
                    }
                }
                first_failure.map_or(Ok(()), Err)
            })
        })
        .collect();
    for th in threads {
        th.join().map_err(|_| Failure::new("a worker thread panicked"))??;
    }
    dev.synchronize()?;
    let expected = THREADS * ROUNDS * STREAMS_PER_THREAD;
    ensure!(
        done.load(Ordering::Relaxed) == expected,
        "callbacks were lost: {} of {expected}",
        done.load(Ordering::Relaxed)
    );
    Ok(())
}

/// `f`'s result, or a failure if it panicked.
fn unwinding_fails<T>(f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(Failure::new("the port panicked")))
}

/// One thread's round: data written on the first stream is passed along `streams`, each
/// copy joined to the next by an event, with a host callback after each; the last stream
/// reads it back.
fn chain(
    dev: &AnyDevice,
    streams: &[AnyStream],
    done: &Arc<AtomicUsize>,
    ti: usize,
    round: usize,
) -> Result<(), Failure> {
    let n = 1000 + ti * 10 + round;
    let bufs = (0..=streams.len()).map(|_| dev.alloc(n)).collect::<Result<Vec<_>, _>>()?;
    let data = pattern(n, (ti * 16 + round) as u8);
    streams[0].write(&data, &bufs[0], 0)?;
    for (i, s) in streams.iter().enumerate() {
        s.copy(&bufs[i], 0, &bufs[i + 1], 0, n)?;
        let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
        s.record(&ev)?;
        let counter = done.clone();
        s.host_callback(Box::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        }))?;
        if let Some(next) = streams.get(i + 1) {
            next.wait(&ev)?;
        }
    }
    let got = read_all(&streams[streams.len() - 1], &bufs[streams.len()])?;
    ensure!(got == data, "thread {ti} round {round}: data lost across streams");
    Ok(())
}
