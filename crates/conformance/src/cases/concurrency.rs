use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gpuport_runtime::EventFlags;

use super::{pattern, read_all, stream};
use crate::{ensure, Failure, Outcome, Target};

/// Many threads create streams and events at once and chain work across them.
pub fn many_threads(t: &Target) -> Outcome {
    let dev = t.device().clone();
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|ti| {
            let dev = dev.clone();
            let done = done.clone();
            std::thread::spawn(move || -> Result<(), Failure> {
                for round in 0..10 {
                    let streams = (0..4).map(|_| stream(&dev)).collect::<Result<Vec<_>, _>>()?;
                    let n = 1000 + ti * 10 + round;
                    let bufs = (0..5).map(|_| dev.alloc(n)).collect::<Result<Vec<_>, _>>()?;
                    let data = pattern(n, (ti * 16 + round) as u8);
                    streams[0].write(&data, &bufs[0], 0)?;
                    // Pass the data along the streams, joined by events.
                    for i in 0..4 {
                        let s = &streams[i];
                        s.copy(&bufs[i], 0, &bufs[i + 1], 0, n)?;
                        let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
                        s.record(&ev)?;
                        let counter = done.clone();
                        s.host_callback(Box::new(move || {
                            counter.fetch_add(1, Ordering::Relaxed);
                        }))?;
                        if i + 1 < 4 {
                            streams[i + 1].wait(&ev)?;
                        }
                    }
                    let got = read_all(&streams[3], &bufs[4])?;
                    if got != data {
                        return Err(Failure::new(format!("thread {ti} round {round}: data lost across streams")));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for th in threads {
        th.join().map_err(|_| Failure::new("a worker thread panicked"))??;
    }
    dev.synchronize()?;
    ensure!(done.load(Ordering::Relaxed) == 8 * 10 * 4, "callbacks were lost: {}", done.load(Ordering::Relaxed));
    Ok(())
}
