//! # gpuport-mutants
//!
//! The conformance suite's mutation check. Each mutant is a port built like
//! `examples/port-template` (a correct software device over `gpuport-queue`) that breaks
//! exactly one rule of the contract; [`MUTANTS`] lists them with the case that must catch
//! each. `tests/mutation_check.rs` runs every mutant through the suite's public entry
//! point (`gpuport_conformance::run_port`), each in a process of its own, and fails if a
//! mutant passes, or fails anywhere but in its named case, or if the unbroken control
//! fails. A suite that a broken port passes proves nothing to a vendor.
//!
//! The generic parameter `F` of every type is the mutant's index in [`MUTANTS`]; `0` is the
//! control, which breaks nothing.
//!
//! The same flaws, where they can live below a vendor port, are also run through the CUDA
//! and ROCm backends: [`DRIVER_MUTANTS`] names, for each flaw the driver doubles can be
//! given (`GPUPORT_DOUBLE_MUTANT`), the case that must catch it. Those trials need a double
//! and run in `cargo xtask test --backend cuda|rocm --double`.

mod device;
mod stream;

use gpuport_core::{Backend, BackendKind, DeviceInfo, DlDeviceType, DlpackDevices, Error, LoadOptions, Result};

pub use device::MutantDevice;
pub use stream::{MutantEvent, MutantStream};

/// One broken port.
#[derive(Debug, Clone, Copy)]
pub struct Mutant {
    /// Its backend name (device strings `name:0`).
    pub name: &'static str,
    /// The rule it breaks, in words.
    pub breaks: &'static str,
    /// The conformance case that must fail for it (`group::name`); empty for the control.
    pub caught_by: &'static str,
}

/// Every mutant, by index (the types' parameter `F`). Index 0 is the control.
pub const MUTANTS: &[Mutant] = &[
    Mutant { name: "mut-control", breaks: "nothing (the control: must pass every case)", caught_by: "" },
    Mutant {
        name: "mut-sync-at-once",
        breaks: "Device::synchronize returns at once without waiting",
        caught_by: "device::synchronize_waits_for_every_stream",
    },
    Mutant {
        name: "mut-foreign-kernels",
        breaks: "accepts another backend's module when looking up a kernel",
        caught_by: "kernels::foreign_modules_and_kernels_refused",
    },
    Mutant {
        name: "mut-lost-panics",
        breaks: "a panicking host callback is swallowed, not reported",
        caught_by: "errors::host_callback_panic_is_reported",
    },
    Mutant {
        name: "mut-lost-dropped-errors",
        breaks: "Device::synchronize looks only at live streams: a dropped stream's error is lost",
        caught_by: "errors::dropped_stream_error_is_reported",
    },
    Mutant { name: "mut-noop-wait", breaks: "Stream::wait does nothing", caught_by: "ordering::cross_stream_event" },
    Mutant {
        name: "mut-query-always-done",
        breaks: "Stream::query and Event::query always say done",
        caught_by: "ordering::stream_query",
    },
    Mutant {
        name: "mut-copy-ignores-offset",
        breaks: "Stream::copy ignores the source offset",
        caught_by: "copies::every_copy_kind",
    },
    Mutant {
        name: "mut-out-of-order",
        breaks: "a stream's work runs on two queues in turn, so out of order",
        caught_by: "ordering::one_stream_in_order",
    },
    Mutant {
        name: "mut-wrapped-stream-destroyed",
        breaks: "dropping a wrapped (borrowed) stream destroys the stream",
        caught_by: "handles::foreign_stream_not_destroyed",
    },
    Mutant {
        name: "mut-fake-elapsed",
        breaks: "Event::elapsed_ms answers 1 ms without measuring",
        caught_by: "events::elapsed_time",
    },
    Mutant {
        name: "mut-wrong-attributes",
        breaks: "pointer_attributes knows no address",
        caught_by: "memory::pointer_attributes",
    },
    Mutant {
        name: "mut-owned-wrapped-event",
        breaks: "a wrapped event claims to own its event",
        caught_by: "handles::foreign_event_not_destroyed",
    },
    Mutant {
        name: "mut-no-implicit-sync",
        breaks: "streams created without NON_BLOCKING do not synchronize with the legacy default stream",
        caught_by: "implicit::blocking_stream_waits_for_legacy",
    },
    Mutant {
        name: "mut-all-streams-blocking",
        breaks: "NON_BLOCKING is ignored: every created stream synchronizes with the legacy default stream",
        caught_by: "implicit::non_blocking_and_blocking_streams_are_independent",
    },
    Mutant {
        name: "mut-sync-every-device",
        breaks: "Device::synchronize waits for every device's streams, not only its own",
        caught_by: "devices::synchronize_is_per_device",
    },
    Mutant {
        name: "mut-facts-of-first-device",
        breaks: "every device answers DeviceInfo with the first device's facts",
        caught_by: "devices::facts_of_every_device",
    },
    Mutant {
        name: "mut-no-wait-across-devices",
        breaks: "Stream::wait ignores an event recorded on another device",
        caught_by: "devices::wait_across_devices",
    },
    Mutant {
        name: "mut-copy-drops-buffers",
        breaks: "a queued copy does not keep its buffers: memory its caller drops is freed while it waits",
        caught_by: "lifetimes::queued_work_keeps_its_buffers",
    },
    Mutant {
        name: "mut-fill-overruns",
        breaks: "Stream::memset of an odd length sets one byte past the range",
        caught_by: "ranges::every_path_at_every_size",
    },
    Mutant {
        name: "mut-large-write-at-zero",
        breaks: "Stream::write of more than 64 KiB ignores the destination offset",
        caught_by: "ranges::every_path_at_every_size",
    },    Mutant {
        name: "mut-open-wraps-around",
        breaks: "Backend::open of an ordinal past the last device opens ordinal modulo the count",
        caught_by: "devices::facts_of_every_device",
    },
    Mutant {
        name: "mut-devices-reversed",
        breaks: "Backend::devices lists the devices last first",
        caught_by: "devices::facts_of_every_device",
    },
    Mutant {
        name: "mut-oversize-invalid-argument",
        breaks: "Device::alloc of more than the device holds is InvalidArgument, not OutOfMemory",
        caught_by: "memory::absurd_sizes_are_out_of_memory",
    },
    Mutant {
        name: "mut-pinned-as-device-memory",
        breaks: "Device::alloc_pinned hands out memory described as device memory",
        caught_by: "memory::pinned_and_managed",
    },
    Mutant {
        name: "mut-device-memset-unordered",
        breaks: "Device::memset runs at once on a stream of its own, not after the legacy default stream's work",
        caught_by: "device::memset_ordered_after_legacy_stream",
    },
    Mutant {
        name: "mut-stream-flags-lost",
        breaks: "Stream::flags reports no flags, whatever the stream was created with",
        caught_by: "devices::stream_and_event_facts",
    },
    Mutant {
        name: "mut-unrecorded-event-pending",
        breaks: "Event::query of a never-recorded event says its work is still pending",
        caught_by: "events::query_before_and_after",
    },
    Mutant {
        name: "mut-elapsed-zero-before-done",
        breaks: "Event::elapsed_ms before the events complete answers 0 ms instead of NotReady",
        caught_by: "events::elapsed_time",
    },
    Mutant {
        name: "mut-untimed-events-time",
        breaks: "an event created with DISABLE_TIMING still measures time",
        caught_by: "events::timing_disabled",
    },
    Mutant {
        name: "mut-wait-for-latest-record",
        breaks: "Stream::wait waits, when it runs, for the event's latest record, not the one current when it was queued",
        caught_by: "events::rerecord_waits_for_earlier_record",
    },
    Mutant {
        name: "mut-stream-error-kept",
        breaks: "Stream::synchronize reports its stream's error but never clears it",
        caught_by: "errors::host_callback_panic_is_reported",
    },
    Mutant {
        name: "mut-attributes-own-device-only",
        breaks: "Device::pointer_attributes knows only its own device's memory",
        caught_by: "devices::facts_of_every_device",
    },
    Mutant {
        name: "mut-peer-copy-on-legacy-stream",
        breaks: "a copy between devices runs on the destination device's legacy default stream, not on the stream it was queued on",
        caught_by: "copies::peer_copy",
    },
    Mutant {
        name: "mut-read-past-end-clamped",
        breaks: "Stream::read past the buffer's end reads the bytes there are instead of failing",
        caught_by: "copies::bad_ranges_are_errors",
    },
    Mutant {
        name: "mut-zero-grid-noop",
        breaks: "Stream::launch of an empty grid is accepted as nothing to do instead of refused",
        caught_by: "kernels::bad_launches",
    },
    Mutant {
        name: "mut-event-told-late",
        breaks: "an event is completed by a notifier thread a moment after its stream passes the record: the stream can be done while the event is not",
        caught_by: "events::stream_and_event_agree",
    },
    Mutant {
        name: "mut-device-dlpack-differs",
        breaks: "Device::dlpack_devices declares another DLPack device type than its backend",
        caught_by: "devices::facts_of_every_device",
    },
    Mutant {
        name: "mut-elapsed-in-microseconds",
        breaks: "Event::elapsed_ms answers in microseconds",
        caught_by: "events::elapsed_time",
    },
    Mutant {
        name: "mut-sync-at-once-past-first-device",
        breaks: "Device::synchronize returns at once on every device but the first",
        caught_by: "device::synchronize_waits_for_every_stream",
    },
    Mutant {
        name: "mut-memset-unordered-past-first-device",
        breaks: "Device::memset is not ordered after the legacy stream on every device but the first",
        caught_by: "device::memset_ordered_after_legacy_stream",
    },
    Mutant {
        name: "mut-large-copy-ahead",
        breaks: "Stream::copy of 16 MiB or more runs at once, ahead of the stream's earlier work",
        caught_by: "ordering::one_stream_in_order",
    },
    Mutant {
        name: "mut-total-memory-in-kib",
        breaks: "DeviceInfo::total_memory is given in KiB, not bytes",
        caught_by: "devices::facts_of_every_device",
    },
    Mutant {
        name: "mut-legacy-stream-of-first-device",
        breaks: "Device::default_stream(Legacy) hands out the first device's legacy stream on every device",
        caught_by: "ordering::default_streams",
    },
    Mutant {
        name: "mut-large-2d-packed",
        breaks: "Stream::copy_2d of 16 MiB or more moves the rows as one block, ignoring the pitches",
        caught_by: "copies::copy_2d",
    },
    Mutant {
        name: "mut-slab-wraps",
        breaks: "allocations of 4 KiB or less come from 256 slots that wrap: past 256 live ones, a new one shares a live one's bytes",
        caught_by: "memory::many_live_allocations",
    },
    Mutant {
        name: "mut-run-if-idle-while-busy",
        breaks: "Stream::run_if_idle runs its closure at once even while the stream has work pending",
        caught_by: "ordering::run_if_idle",
    },
    Mutant {
        name: "mut-memset-even-length",
        breaks: "Stream::memset sets an even number of bytes (16-bit stores): an odd length loses its last byte",
        caught_by: "copies::memset_odd_ranges",
    },
    Mutant {
        name: "mut-large-copy-truncated",
        breaks: "Stream::copy moves at most 32 MiB: a longer copy stops after its first chunk",
        caught_by: "copies::large_copy",
    },
    Mutant {
        name: "mut-host-functions-at-synchronize",
        breaks: "Stream::host_function (the C form) runs its function when the stream is next synchronized, after everything queued, not in stream order",
        caught_by: "ordering::host_callbacks_in_order",
    },
    Mutant {
        name: "mut-alloc-zero-refused",
        breaks: "Device::alloc(0) is refused as an invalid argument instead of giving an empty buffer",
        caught_by: "memory::alloc_sizes",
    },
    Mutant {
        name: "mut-alloc-async-rounded",
        breaks: "Device::alloc_async gives a buffer rounded up to 256 bytes instead of the size asked for",
        caught_by: "memory::alloc_async",
    },
    Mutant {
        name: "mut-launch-args-reused",
        breaks: "Stream::launch reuses the argument block of the stream's first launch for every later one",
        caught_by: "kernels::launch_fill",
    },
    Mutant {
        name: "mut-own-callback-sync-passes",
        breaks: "Stream::synchronize from the stream's own host callback returns at once, as if done, instead of WouldDeadlock",
        caught_by: "device::synchronize_from_own_callback_is_refused",
    },
    Mutant {
        name: "mut-stale-event-answers",
        breaks: "Event::query of an event wrapped from a handle whose owner destroyed it answers done instead of InvalidHandle",
        caught_by: "errors::destroyed_event_is_refused",
    },
    Mutant {
        name: "mut-wrapped-stream-fresh",
        breaks: "Device::wrap_stream checks the handle, then gives a new stream of its own instead of the one the handle names",
        caught_by: "handles::ordering_through_wrapped_handles",
    },
    Mutant {
        name: "mut-pinned-copy-at-synchronize",
        breaks: "a copy into pinned host memory lands at the stream's next synchronize, not before the work queued after it",
        caught_by: "handles::pinned_visible_after_event",
    },
    Mutant {
        name: "mut-foreign-memset-ignored",
        breaks: "Stream::memset of another backend's memory does nothing instead of failing with BackendMismatch",
        caught_by: "errors::backend_mismatch",
    },
    Mutant {
        name: "mut-blocking-read-at-once",
        breaks: "a blocking stream's host read runs at once when the stream itself is idle, without waiting for the legacy default stream",
        caught_by: "implicit::blocking_host_reads_and_writes_wait_for_legacy",
    },
    Mutant {
        name: "mut-legacy-outside-implicit-sync",
        breaks: "the legacy default stream takes no part in implicit synchronisation: it waits for no blocking stream",
        caught_by: "implicit::legacy_waits_for_blocking_streams",
    },
    Mutant {
        name: "mut-untimed-wait-ignored",
        breaks: "Stream::wait ignores an event created without timing (DISABLE_TIMING), the kind pending-work tracking records",
        caught_by: "arrays::pending_work_orders_streams",
    },
    Mutant {
        name: "mut-peer-copy-truncated",
        breaks: "a copy between the port's two devices moves at most 4 KiB",
        caught_by: "arrays::copy_engine_across_devices",
    },
    Mutant {
        name: "mut-any-module-loads",
        breaks: "Device::load_module of an image it cannot read gives an empty module instead of an error",
        caught_by: "errors::bad_arguments",
    },
    Mutant {
        name: "mut-attributes-outlive-free",
        breaks: "Device::pointer_attributes answers from a table of allocations that freeing never updates",
        caught_by: "memory::explicit_free",
    },
    Mutant {
        name: "mut-peer-2d-packed",
        breaks: "Stream::copy_2d between the devices moves the rows as one block, ignoring the pitches",
        caught_by: "copies::copy_2d",
    },
    Mutant {
        name: "mut-streams-share-a-queue",
        breaks: "every stream a device creates runs on one queue: streams without a wait between them never overlap",
        caught_by: "ordering::without_wait_streams_overlap",
    },
    Mutant {
        name: "mut-read-offset-ignored",
        breaks: "Stream::read reads from the buffer's start, whatever the offset",
        caught_by: "arrays::round_trip_and_views",
    },
    Mutant {
        name: "mut-unrecorded-wait-blocks",
        breaks: "Stream::wait on an event never recorded holds the stream until the event is first recorded and complete",
        caught_by: "events::wait_follows_the_latest_record",
    },
    Mutant {
        name: "mut-register-copies",
        breaks: "Device::register_host hands back a pinned copy of the host's bytes, not the bytes themselves",
        caught_by: "memory::registered_host_memory",
    },
    Mutant {
        name: "mut-stream-table-of-16",
        breaks: "a device holds at most 16 created streams live at once: the next is refused",
        caught_by: "concurrency::many_threads",
    },
    Mutant {
        name: "mut-elapsed-from-earlier-record",
        breaks: "Event::elapsed_ms to an event re-recorded behind pending work answers with its earlier record's figure",
        caught_by: "events::elapsed_time",
    },
    Mutant {
        name: "mut-elapsed-never-negative",
        breaks: "Event::elapsed_ms answers the interval's length: an end that completed before the start gives a positive time",
        caught_by: "events::elapsed_time",
    },
    Mutant {
        name: "mut-make-current-fails",
        breaks: "Device::make_current fails with an error of its own instead of Unsupported",
        caught_by: "device::make_current_answers_and_disturbs_nothing",
    },
];

/// A flaw of the driver doubles (`GPUPORT_DOUBLE_MUTANT=name`) and the conformance case
/// that must fail for it when the CUDA or ROCm backend runs on the mutated double. The
/// flaws are the port mutants' where a vendor port delegates the rule to its driver: a
/// wait, a query, a synchronize, a copy's source, a stream's order, the legacy stream's
/// implicit synchronisation, a timing, pointer facts. The rest (callback panics, foreign modules, borrowed handles, dropped streams'
/// errors) are gpuport's own code and have no driver counterpart.
#[derive(Debug, Clone, Copy)]
pub struct DriverMutant {
    /// The flaw's name, as the doubles take it.
    pub flaw: &'static str,
    /// The conformance case that must fail (`group::name`).
    pub caught_by: &'static str,
}

/// Every driver flaw the doubles know, with the case that must catch it.
pub const DRIVER_MUTANTS: &[DriverMutant] = &[
    DriverMutant { flaw: "sync-at-once", caught_by: "device::synchronize_waits_for_every_stream" },
    DriverMutant { flaw: "noop-wait", caught_by: "ordering::cross_stream_event" },
    DriverMutant { flaw: "query-always-done", caught_by: "ordering::stream_query" },
    DriverMutant { flaw: "copy-ignores-offset", caught_by: "copies::every_copy_kind" },
    DriverMutant { flaw: "out-of-order", caught_by: "ordering::one_stream_in_order" },
    DriverMutant { flaw: "fake-elapsed", caught_by: "events::elapsed_time" },
    DriverMutant { flaw: "unknown-pointers", caught_by: "memory::pointer_attributes" },
    DriverMutant { flaw: "no-implicit-sync", caught_by: "implicit::blocking_stream_waits_for_legacy" },
    DriverMutant {
        flaw: "all-streams-blocking",
        caught_by: "implicit::non_blocking_and_blocking_streams_are_independent",
    },
];

/// The flaws, as the indices the types are instantiated with.
pub(crate) mod flaw {
    pub const SYNC_AT_ONCE: u8 = 1;
    pub const FOREIGN_KERNELS: u8 = 2;
    pub const LOST_PANICS: u8 = 3;
    pub const LOST_DROPPED_ERRORS: u8 = 4;
    pub const NOOP_WAIT: u8 = 5;
    pub const QUERY_ALWAYS_DONE: u8 = 6;
    pub const COPY_IGNORES_OFFSET: u8 = 7;
    pub const OUT_OF_ORDER: u8 = 8;
    pub const WRAPPED_STREAM_DESTROYED: u8 = 9;
    pub const FAKE_ELAPSED: u8 = 10;
    pub const WRONG_ATTRIBUTES: u8 = 11;
    pub const OWNED_WRAPPED_EVENT: u8 = 12;
    pub const NO_IMPLICIT_SYNC: u8 = 13;
    pub const ALL_STREAMS_BLOCKING: u8 = 14;
    pub const SYNC_EVERY_DEVICE: u8 = 15;
    pub const FACTS_OF_FIRST_DEVICE: u8 = 16;
    pub const NO_WAIT_ACROSS_DEVICES: u8 = 17;
    pub const COPY_DROPS_BUFFERS: u8 = 18;
    pub const FILL_OVERRUNS: u8 = 19;
    pub const LARGE_WRITE_AT_ZERO: u8 = 20;
    pub const OPEN_WRAPS_AROUND: u8 = 21;
    pub const DEVICES_REVERSED: u8 = 22;
    pub const OVERSIZE_INVALID_ARGUMENT: u8 = 23;
    pub const PINNED_AS_DEVICE_MEMORY: u8 = 24;
    pub const DEVICE_MEMSET_UNORDERED: u8 = 25;
    pub const STREAM_FLAGS_LOST: u8 = 26;
    pub const UNRECORDED_EVENT_PENDING: u8 = 27;
    pub const ELAPSED_ZERO_BEFORE_DONE: u8 = 28;
    pub const UNTIMED_EVENTS_TIME: u8 = 29;
    pub const WAIT_FOR_LATEST_RECORD: u8 = 30;
    pub const STREAM_ERROR_KEPT: u8 = 31;
    pub const ATTRIBUTES_OWN_DEVICE_ONLY: u8 = 32;
    pub const PEER_COPY_ON_LEGACY_STREAM: u8 = 33;
    pub const READ_PAST_END_CLAMPED: u8 = 34;
    pub const ZERO_GRID_NOOP: u8 = 35;
    pub const EVENT_TOLD_LATE: u8 = 36;
    pub const DEVICE_DLPACK_DIFFERS: u8 = 37;
    pub const ELAPSED_IN_MICROSECONDS: u8 = 38;
    pub const SYNC_AT_ONCE_PAST_FIRST_DEVICE: u8 = 39;
    pub const MEMSET_UNORDERED_PAST_FIRST_DEVICE: u8 = 40;
    pub const LARGE_COPY_AHEAD: u8 = 41;
    pub const TOTAL_MEMORY_IN_KIB: u8 = 42;
    pub const LEGACY_STREAM_OF_FIRST_DEVICE: u8 = 43;
    pub const LARGE_2D_PACKED: u8 = 44;
    pub const SLAB_WRAPS: u8 = 45;
    pub const RUN_IF_IDLE_WHILE_BUSY: u8 = 46;
    pub const MEMSET_EVEN_LENGTH: u8 = 47;
    pub const LARGE_COPY_TRUNCATED: u8 = 48;
    pub const HOST_FUNCTIONS_AT_SYNCHRONIZE: u8 = 49;
    pub const ALLOC_ZERO_REFUSED: u8 = 50;
    pub const ALLOC_ASYNC_ROUNDED: u8 = 51;
    pub const LAUNCH_ARGS_REUSED: u8 = 52;
    pub const OWN_CALLBACK_SYNC_PASSES: u8 = 53;
    pub const STALE_EVENT_ANSWERS: u8 = 54;
    pub const WRAPPED_STREAM_FRESH: u8 = 55;
    pub const PINNED_COPY_AT_SYNCHRONIZE: u8 = 56;
    pub const FOREIGN_MEMSET_IGNORED: u8 = 57;
    pub const BLOCKING_READ_AT_ONCE: u8 = 58;
    pub const LEGACY_OUTSIDE_IMPLICIT_SYNC: u8 = 59;
    pub const UNTIMED_WAIT_IGNORED: u8 = 60;
    pub const PEER_COPY_TRUNCATED: u8 = 61;
    pub const ANY_MODULE_LOADS: u8 = 62;
    pub const ATTRIBUTES_OUTLIVE_FREE: u8 = 63;
    pub const PEER_2D_PACKED: u8 = 64;
    pub const STREAMS_SHARE_A_QUEUE: u8 = 65;
    pub const READ_OFFSET_IGNORED: u8 = 66;
    pub const UNRECORDED_WAIT_BLOCKS: u8 = 67;
    pub const REGISTER_COPIES: u8 = 68;
    pub const STREAM_TABLE_OF_16: u8 = 69;
    pub const ELAPSED_FROM_EARLIER_RECORD: u8 = 70;
    pub const ELAPSED_NEVER_NEGATIVE: u8 = 71;
    pub const MAKE_CURRENT_FAILS: u8 = 72;
}

/// The backend of mutant `F`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MutantBackend<const F: u8>;

impl<const F: u8> Backend for MutantBackend<F> {
    const KIND: BackendKind = BackendKind::Plugin(MUTANTS[F as usize].name);
    const DLPACK: DlpackDevices =
        DlpackDevices { device: DlDeviceType::CPU, pinned_host: Some(DlDeviceType::CPU), managed: None };
    type Device = MutantDevice<F>;
    type Stream = MutantStream<F>;
    type Event = MutantEvent<F>;

    fn load(_opts: &LoadOptions) -> Result<Self> {
        Ok(MutantBackend)
    }
    fn version(&self) -> String {
        format!("gpuport-mutants {} ({})", env!("CARGO_PKG_VERSION"), MUTANTS[F as usize].breaks)
    }
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let info = |ordinal| gpuport_core::Device::info(&self.open(ordinal)?);
        if F == flaw::DEVICES_REVERSED {
            return (0..device::DEVICE_COUNT).rev().map(info).collect();
        }
        (0..device::DEVICE_COUNT).map(info).collect()
    }
    fn open(&self, ordinal: u32) -> Result<MutantDevice<F>> {
        // The flawed port opens a device for any ordinal, wrapping around.
        let ordinal = if F == flaw::OPEN_WRAPS_AROUND { ordinal % device::DEVICE_COUNT } else { ordinal };
        MutantDevice::shared(ordinal)
            .ok_or(Error::DeviceNotFound { device: device::id::<F>(ordinal), count: device::DEVICE_COUNT })
    }
}

/// Evaluates `$body` with `$b` bound to mutant `$index`'s backend (each index is its own
/// type): `Some(value)`, or `None` for an index past [`MUTANTS`].
#[macro_export]
macro_rules! with_mutant {
    ($index:expr, |$b:ident| $body:expr) => {
        $crate::with_mutant!(@each $index, $b, $body;
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72)
    };
    (@each $index:expr, $b:ident, $body:expr; $($n:literal)*) => {
        match $index {
            $($n => {
                let $b = $crate::MutantBackend::<$n>;
                Some($body)
            })*
            _ => None,
        }
    };
}

#[cfg(test)]
mod tests {
    use super::MUTANTS;

    #[test]
    fn every_mutant_has_a_backend_type_and_no_other_index_does() {
        for (index, mutant) in MUTANTS.iter().enumerate() {
            let version = with_mutant!(index, |b| gpuport_core::Backend::version(&b));
            assert!(version.is_some_and(|v| v.contains(mutant.breaks)), "mutant {index}");
        }
        assert!(
            with_mutant!(MUTANTS.len(), |b| gpuport_core::Backend::version(&b)).is_none(),
            "an index past the list"
        );
    }

    #[test]
    fn names_and_cases_are_distinct_and_well_formed() {
        let mut names: Vec<&str> = MUTANTS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MUTANTS.len(), "two mutants share a name");
        for m in &MUTANTS[1..] {
            assert!(m.name.starts_with("mut-") && m.caught_by.contains("::"), "{m:?}");
        }
    }
}
