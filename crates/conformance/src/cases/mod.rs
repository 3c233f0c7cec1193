//! The cases, by group. Every case is written once against `AnyDevice`/`AnyStream`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use gpuport_runtime::{AnyDevice, AnyStream, Buffer, StreamFlags};

use crate::{Case, Failure, Need};

mod arrays;
mod concurrency;
mod copies;
mod device;
mod devices;
mod errors;
mod events;
mod handles;
mod implicit;
mod kernels;
mod lifetimes;
mod memory;
mod ordering;
mod ranges;

/// Every case of the suite.
pub const CASES: &[Case] = &[
    Case { name: "memory::alloc_sizes", run: memory::alloc_sizes, needs: &[] },
    Case { name: "memory::alloc_async", run: memory::alloc_async, needs: &[Need::StreamOrderedAlloc] },
    Case { name: "memory::pinned_and_managed", run: memory::pinned_and_managed, needs: &[] },
    Case { name: "memory::registered_host_memory", run: memory::registered_host_memory, needs: &[] },
    Case { name: "memory::many_live_allocations", run: memory::many_live_allocations, needs: &[] },
    Case { name: "memory::absurd_sizes_are_out_of_memory", run: memory::absurd_sizes, needs: &[] },
    Case { name: "memory::explicit_free", run: memory::explicit_free, needs: &[] },
    Case { name: "memory::pointer_attributes", run: memory::pointer_attributes, needs: &[] },
    Case { name: "copies::memset_odd_ranges", run: copies::memset_odd_ranges, needs: &[] },
    Case { name: "copies::every_copy_kind", run: copies::every_copy_kind, needs: &[] },
    Case { name: "copies::copy_2d", run: copies::copy_2d, needs: &[] },
    Case { name: "copies::large_copy", run: copies::large_copy, needs: &[] },
    Case { name: "copies::peer_copy", run: copies::peer_copy, needs: &[Need::TwoDevices] },
    Case { name: "devices::facts_of_every_device", run: devices::facts_of_every_device, needs: &[] },
    Case { name: "devices::stream_and_event_facts", run: devices::stream_and_event_facts, needs: &[] },
    Case { name: "devices::wait_across_devices", run: devices::wait_across_devices, needs: &[Need::TwoDevices] },
    Case {
        name: "devices::synchronize_is_per_device",
        run: devices::synchronize_is_per_device,
        needs: &[Need::TwoDevices],
    },
    Case { name: "copies::bad_ranges_are_errors", run: copies::bad_ranges, needs: &[] },
    Case { name: "ranges::every_path_at_every_size", run: ranges::every_path_at_every_size, needs: &[] },
    Case {
        name: "lifetimes::queued_work_keeps_its_buffers",
        run: lifetimes::queued_work_keeps_its_buffers,
        needs: &[],
    },
    Case { name: "ordering::one_stream_in_order", run: ordering::one_stream_in_order, needs: &[] },
    Case { name: "ordering::cross_stream_event", run: ordering::cross_stream_event, needs: &[] },
    Case { name: "ordering::without_wait_streams_overlap", run: ordering::without_wait_streams_overlap, needs: &[] },
    Case { name: "ordering::host_callbacks_in_order", run: ordering::host_callbacks_in_order, needs: &[] },
    Case { name: "ordering::stream_query", run: ordering::stream_query, needs: &[] },
    Case { name: "ordering::run_if_idle", run: ordering::run_if_idle, needs: &[] },
    Case { name: "ordering::default_streams", run: ordering::default_streams, needs: &[] },
    Case {
        name: "implicit::blocking_stream_waits_for_legacy",
        run: implicit::blocking_stream_waits_for_legacy,
        needs: &[],
    },
    Case {
        name: "implicit::legacy_waits_for_blocking_streams",
        run: implicit::legacy_waits_for_blocking_streams,
        needs: &[],
    },
    Case {
        name: "implicit::blocking_host_reads_and_writes_wait_for_legacy",
        run: implicit::blocking_host_reads_and_writes_wait_for_legacy,
        needs: &[],
    },
    Case {
        name: "implicit::non_blocking_and_blocking_streams_are_independent",
        run: implicit::non_blocking_and_blocking_streams_are_independent,
        needs: &[],
    },
    Case { name: "events::query_before_and_after", run: events::query_before_and_after, needs: &[] },
    Case { name: "events::elapsed_time", run: events::elapsed_time, needs: &[] },
    Case { name: "events::timing_disabled", run: events::timing_disabled, needs: &[] },
    Case { name: "events::rerecord_waits_for_earlier_record", run: events::rerecord, needs: &[] },
    Case { name: "events::wait_follows_the_latest_record", run: events::wait_follows_the_latest_record, needs: &[] },
    Case { name: "events::stream_and_event_agree", run: events::stream_and_event_agree, needs: &[] },
    Case { name: "concurrency::many_threads", run: concurrency::many_threads, needs: &[] },
    Case { name: "handles::foreign_stream_not_destroyed", run: handles::foreign_stream, needs: &[] },
    Case { name: "handles::foreign_event_not_destroyed", run: handles::foreign_event, needs: &[] },
    Case {
        name: "device::synchronize_waits_for_every_stream",
        run: device::synchronize_waits_for_every_stream,
        needs: &[],
    },
    Case {
        name: "device::memset_ordered_after_legacy_stream",
        run: device::memset_ordered_after_legacy_stream,
        needs: &[],
    },
    Case {
        name: "device::synchronize_from_own_callback_is_refused",
        run: device::synchronize_from_own_callback_is_refused,
        needs: &[],
    },
    Case {
        name: "device::make_current_answers_and_disturbs_nothing",
        run: device::make_current_answers_and_disturbs_nothing,
        needs: &[],
    },
    Case {
        name: "handles::ordering_through_wrapped_handles",
        run: handles::ordering_through_wrapped_handles,
        needs: &[],
    },
    Case { name: "handles::pinned_visible_after_event", run: handles::pinned_visible_after_event, needs: &[] },
    Case { name: "errors::host_callback_panic_is_reported", run: errors::host_callback_panic_is_reported, needs: &[] },
    Case {
        name: "errors::dropped_stream_error_is_reported",
        run: errors::dropped_stream_error_is_reported,
        needs: &[],
    },
    Case {
        name: "errors::destroyed_event_is_refused",
        run: errors::destroyed_event_is_refused,
        needs: &[Need::CheckedHandles],
    },
    Case { name: "errors::backend_mismatch", run: errors::backend_mismatch, needs: &[] },
    Case { name: "errors::bad_arguments", run: errors::bad_arguments, needs: &[] },
    Case { name: "kernels::launch_fill", run: kernels::launch_fill, needs: &[Need::Kernel] },
    Case { name: "kernels::bad_launches", run: kernels::bad_launches, needs: &[Need::Kernel] },
    Case {
        name: "kernels::foreign_modules_and_kernels_refused",
        run: kernels::foreign_modules_and_kernels_refused,
        needs: &[Need::ForeignModules],
    },
    Case { name: "arrays::round_trip_and_views", run: arrays::round_trip_and_views, needs: &[] },
    Case { name: "arrays::copy_engine_across_devices", run: arrays::copy_engine_across_devices, needs: &[] },
    Case { name: "arrays::pending_work_orders_streams", run: arrays::pending_work_orders_streams, needs: &[] },
];

/// A recognisable byte pattern of `n` bytes.
pub(crate) fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(31).wrapping_add(u32::from(seed)) as u8 ^ 0x5a).collect()
}

/// A non-blocking stream.
pub(crate) fn stream(dev: &AnyDevice) -> Result<AnyStream, Failure> {
    Ok(dev.create_stream(StreamFlags::NON_BLOCKING, 0)?)
}

/// Reads the whole buffer back.
pub(crate) fn read_all(s: &AnyStream, buf: &Buffer) -> Result<Vec<u8>, Failure> {
    let mut out = vec![0u8; buf.len()];
    s.read(buf, 0, &mut out)?;
    Ok(out)
}

/// A gate a host callback blocks a stream on until the test opens it — a backend-neutral
/// "slow operation" whose length the test controls, so ordering is tested without timing.
/// Public for other crates' tests (the interchange crates use it too).
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    /// Queues a callback on `s` that blocks the stream until [`Gate::open`].
    /// Gives up after 30 s so a broken backend fails instead of hanging.
    pub fn block(&self, s: &AnyStream) -> Result<(), Failure> {
        let gate = self.clone();
        s.host_callback(Box::new(move || {
            let (lock, cv) = &*gate.0;
            let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
            let (guard, waited) =
                cv.wait_timeout_while(guard, Duration::from_secs(30), |open| !*open).unwrap_or_else(|p| p.into_inner());
            drop(guard);
            if waited.timed_out() {
                GATES_GIVEN_UP.fetch_add(1, Ordering::Relaxed);
            }
        }))?;
        Ok(())
    }

    /// Lets every blocked stream go on.
    pub fn open(&self) {
        let (lock, cv) = &*self.0;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }
}

/// How many gates have given up (30 s with the gate still closed) in this process.
static GATES_GIVEN_UP: AtomicUsize = AtomicUsize::new(0);

/// How many gates have given up so far: a case that fails after one did most likely had a
/// call of its own wait for the held stream (the case opens its gate only after those
/// calls) — a port that blocks where it should queue, or a driver's implicit
/// synchronisation — and its own message ("finished while held", "waited") is then a
/// consequence, not the cause. [`run_case`](crate::run_case) says so.
pub(crate) fn gates_given_up() -> usize {
    GATES_GIVEN_UP.load(Ordering::Relaxed)
}

/// Opens the gate when dropped, so a failing case never leaves a stream blocked.
pub struct OpenOnDrop(pub Gate);
impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Runs `f` on a thread of its own and fails the case if it has not returned within 30 s:
/// a call that must not hang is checked without hanging the suite.
pub(crate) fn within<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> gpuport_runtime::Result<T> + Send + 'static,
) -> Result<T, Failure> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(result) => Ok(result?),
        Err(_) => Err(Failure::new(format!("{what} did not return within 30 s"))),
    }
}

/// How long work that must be held must stay pending: a port that does not hold it
/// finishes a small copy or memset far sooner, so it fails every time.
pub(crate) const HELD_FOR: Duration = Duration::from_millis(100);

/// How long work that must not wait may take while the gate is closed: generous for a
/// 4 KiB memset on a loaded machine, and short enough that a port that waits fails soon.
pub(crate) const FINISHES_WITHIN: Duration = Duration::from_secs(5);

/// Whether `s` finishes its work within `limit`, polling (it returns as soon as it has).
pub(crate) fn finishes_within(s: &AnyStream, limit: Duration) -> Result<bool, Failure> {
    let start = Instant::now();
    loop {
        if s.query()? {
            return Ok(true);
        }
        if start.elapsed() >= limit {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `f` run on a thread of its own: `Err` if it returns within [`HELD_FOR`] (it should be
/// held); else the receiver its result arrives on once it returns.
pub(crate) fn held<T: Send + 'static>(
    f: impl FnOnce() -> gpuport_runtime::Result<T> + Send + 'static,
) -> Result<std::sync::mpsc::Receiver<gpuport_runtime::Result<T>>, ()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HELD_FOR) {
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Ok(rx),
        _ => Err(()),
    }
}
