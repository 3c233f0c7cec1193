//! # gpuport-plugin-abi
//!
//! The C ABI of a gpuport device plugin: the Rust declarations of
//! `include/gpuport_plugin.h`, which is the source of truth. A plugin is a shared library
//! exporting [`ENTRY_SYMBOL`], a function returning a [`PluginApi`]: the calls a device
//! runtime answers, shaped like a GPU vendor's driver API, which gpuport drives with the
//! same vendor kit as its CUDA and ROCm backends.
//!
//! This crate holds declarations only (the `sys` layer: function *types*, no function is
//! defined here, so a plugin's own functions are where a panic must be caught — with
//! `catch_unwind`, as `gpuport-plugin-export` does): the loader that validates and
//! calls a plugin's table lives in `gpuport`, and the tests check every struct's size and
//! every field's offset here against the header, compiled by the system C compiler.
//!
//! The evolution rules, errors as objects and the threads each call may run on are the
//! header's; see its opening comment and `docs/plugins.md`.

#![no_std]

use core::ffi::{c_char, c_void};

/// The ABI's major version: a plugin with another one is refused at load.
pub const ABI_MAJOR: u32 = 1;
/// The ABI's minor version: fields appended since the major version began.
pub const ABI_MINOR: u32 = 2;
/// The one symbol a plugin exports, NUL-terminated for the loader.
pub const ENTRY_SYMBOL: &[u8] = b"gpuport_plugin_entry\0";

/// A plugin's error object (`gpuport_error`): opaque, read through the table and
/// destroyed once by the caller.
#[repr(C)]
pub struct Error {
    _opaque: [u8; 0],
}

/// An opened device of the plugin (`gpuport_device`): opaque.
#[repr(C)]
pub struct Device {
    _opaque: [u8; 0],
}

/// A stream handle (`gpuport_stream`); never 0 for a live stream.
pub type Stream = usize;
/// An event handle (`gpuport_event`); never 0 for a live event.
pub type Event = usize;
/// A module handle (`gpuport_module`).
pub type Module = usize;
/// A kernel function handle (`gpuport_function`).
pub type Function = usize;

/// `gpuport_error_kind`: the kinds of gpuport's errors a plugin may report.
pub mod error_kind {
    /// A bad argument; the message says which.
    pub const INVALID_ARGUMENT: i32 = 1;
    /// An allocation that cannot be satisfied.
    pub const OUT_OF_MEMORY: i32 = 2;
    /// A feature the device does not have.
    pub const UNSUPPORTED: i32 = 3;
    /// The work asked about has not completed.
    pub const NOT_READY: i32 = 4;
    /// A handle of nothing live.
    pub const INVALID_HANDLE: i32 = 5;
    /// The runtime has no usable device.
    pub const NO_DEVICE: i32 = 6;
    /// An ordinal past the last device.
    pub const DEVICE_NOT_FOUND: i32 = 7;
    /// A blocking call that would wait for itself.
    pub const WOULD_DEADLOCK: i32 = 8;
    /// Anything else: the runtime's own failure.
    pub const FAILED: i32 = 9;
}

/// Stream creation flags.
pub mod stream_flags {
    /// No implicit synchronization with the legacy default stream.
    pub const NON_BLOCKING: u32 = 0x1;
}

/// Event creation flags.
pub mod event_flags {
    /// Waiting for the event blocks the thread rather than spinning.
    pub const BLOCKING_SYNC: u32 = 0x1;
    /// The event records no time.
    pub const DISABLE_TIMING: u32 = 0x2;
}

/// Pinned host allocation flags.
pub mod host_alloc_flags {
    /// Pinned for every device of the plugin.
    pub const PORTABLE: u32 = 0x1;
    /// Mapped into the device's address space.
    pub const DEVICE_MAP: u32 = 0x2;
    /// Write-combined.
    pub const WRITE_COMBINED: u32 = 0x4;
}

/// `gpuport_memory_kind`: what kind of memory an address is.
pub mod memory_kind {
    /// Not the plugin's.
    pub const UNREGISTERED: i32 = 0;
    /// Device memory.
    pub const DEVICE: i32 = 1;
    /// Pinned host memory.
    pub const PINNED_HOST: i32 = 2;
    /// Managed memory.
    pub const MANAGED: i32 = 3;
    /// Pageable host memory.
    pub const HOST: i32 = 4;
}

/// `gpuport_kernel_arg_kind`.
pub mod kernel_arg_kind {
    /// A device address (a buffer's base plus an offset).
    pub const ADDRESS: i32 = 1;
    /// A scalar's little-endian bytes, in the low bytes of the value.
    pub const SCALAR: i32 = 2;
}

/// `gpuport_device_info`: facts of one device, filled by `device_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DeviceInfo {
    /// Set by the caller: its size of this struct.
    pub struct_size: usize,
    /// NUL-terminated, not empty.
    pub name: [c_char; 256],
    /// Bytes.
    pub total_memory: u64,
    /// Compute units; 0 for unknown.
    pub multiprocessors: u32,
    /// -1 for none.
    pub compute_major: i32,
    /// -1 for none.
    pub compute_minor: i32,
    /// NUL-terminated; empty for unknown.
    pub arch: [c_char; 64],
}

/// `gpuport_pointer_attributes`: what the plugin knows of an address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PointerAttributes {
    /// Set by the caller: its size of this struct.
    pub struct_size: usize,
    /// A [`memory_kind`].
    pub memory: i32,
    /// The owning device's ordinal; -1 for none.
    pub device_ordinal: i32,
    /// Non-zero when the host may dereference the address.
    pub host_accessible: u8,
    /// Non-zero when the device may dereference the address.
    pub device_accessible: u8,
    /// Non-zero for managed memory.
    pub managed: u8,
    /// Zero.
    pub reserved: u8,
    /// The allocation's first address; with `allocation_len` 0, unknown.
    pub allocation_base: u64,
    /// The allocation's length.
    pub allocation_len: u64,
}

/// `gpuport_kernel_arg`: one argument of a launch.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelArg {
    /// A [`kernel_arg_kind`].
    pub kind: i32,
    /// Bytes of the scalar (1 to 8); 8 for an address.
    pub size: u32,
    /// The address, or the scalar in the low bytes.
    pub value: u64,
    /// The scalar's `DLDataTypeCode` (0 int, 1 uint, 2 float, …); 1 for an address.
    pub dtype_code: u8,
    /// Its bits per lane.
    pub dtype_bits: u8,
    /// Its lanes (1 for a plain scalar).
    pub dtype_lanes: u16,
    /// Zero.
    pub reserved: u32,
}

/// `gpuport_launch_config`: a launch's geometry.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid.
    pub grid: [u32; 3],
    /// Threads per block.
    pub block: [u32; 3],
    /// Dynamic shared memory per block.
    pub shared_mem_bytes: u32,
}

/// `gpuport_stream_progress`: where a stream's progress can be read without a call.
/// The plugin keeps the struct and the words it points at valid, in place, until the
/// stream is destroyed, and changes the words only with sequentially consistent atomic
/// operations; gpuport reads them with atomic loads. See the header for the protocol.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StreamProgress {
    /// `sizeof(gpuport_stream_progress)` as the plugin was built.
    pub struct_size: usize,
    /// Operations queued on the stream so far (8-byte aligned; only grows).
    pub submitted: *const u64,
    /// Operations of the stream completed so far (8-byte aligned; only grows, never past
    /// `submitted`).
    pub completed: *const u64,
    /// Nonzero while an operation counted in `completed` is still publishing its effects
    /// (4-byte aligned; null where the plugin never needs it).
    pub publishing: *const u32,
}

/// `gpuport_host_func`: called once, with its user pointer, when the stream reaches it.
pub type HostFunc = unsafe extern "C" fn(user: *mut c_void);

/// What every fallible call returns: null on success, else the plugin's error object.
pub type Status = *mut Error;

/// `gpuport_plugin_api`: the function table. Read only as far as `struct_size` says; a
/// function pointer past it, or null, is an unsupported call.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(missing_docs)] // each field is documented in the header, beside its C declaration
pub struct PluginApi {
    pub struct_size: usize,
    pub abi_major: u32,
    pub abi_minor: u32,

    pub name: *const c_char,
    pub version: *const c_char,
    pub dlpack_device: i32,
    pub dlpack_pinned_host: i32,
    pub dlpack_managed: i32,
    pub reserved: u32,

    pub error_kind: Option<unsafe extern "C" fn(error: *const Error) -> i32>,
    pub error_message: Option<unsafe extern "C" fn(error: *const Error) -> *const c_char>,
    pub error_destroy: Option<unsafe extern "C" fn(error: *mut Error)>,

    pub initialize: Option<unsafe extern "C" fn() -> Status>,
    pub device_count: Option<unsafe extern "C" fn(count: *mut u32) -> Status>,
    pub device_open: Option<unsafe extern "C" fn(ordinal: u32, device: *mut *mut Device) -> Status>,
    pub device_close: Option<unsafe extern "C" fn(device: *mut Device) -> Status>,

    pub device_info: Option<unsafe extern "C" fn(device: *mut Device, info: *mut DeviceInfo) -> Status>,
    pub can_access_peer: Option<unsafe extern "C" fn(device: *mut Device, peer: *mut Device, can: *mut bool) -> Status>,
    pub enable_peer_access: Option<unsafe extern "C" fn(device: *mut Device, peer: *mut Device) -> Status>,
    pub pointer_attributes:
        Option<unsafe extern "C" fn(device: *mut Device, address: u64, attributes: *mut PointerAttributes) -> Status>,
    pub device_synchronize: Option<unsafe extern "C" fn(device: *mut Device) -> Status>,

    pub stream_priority_range:
        Option<unsafe extern "C" fn(device: *mut Device, least: *mut i32, greatest: *mut i32) -> Status>,
    pub stream_create:
        Option<unsafe extern "C" fn(device: *mut Device, flags: u32, priority: i32, stream: *mut Stream) -> Status>,
    pub legacy_stream: Option<unsafe extern "C" fn(device: *mut Device, stream: *mut Stream) -> Status>,
    pub per_thread_stream: Option<unsafe extern "C" fn(device: *mut Device, stream: *mut Stream) -> Status>,
    pub stream_destroy: Option<unsafe extern "C" fn(device: *mut Device, stream: Stream) -> Status>,
    pub stream_query: Option<unsafe extern "C" fn(device: *mut Device, stream: Stream, done: *mut bool) -> Status>,
    pub stream_synchronize: Option<unsafe extern "C" fn(device: *mut Device, stream: Stream) -> Status>,
    pub stream_wait_event: Option<unsafe extern "C" fn(device: *mut Device, stream: Stream, event: Event) -> Status>,
    pub stream_launch_host_func:
        Option<unsafe extern "C" fn(device: *mut Device, stream: Stream, func: HostFunc, user: *mut c_void) -> Status>,

    pub event_create: Option<unsafe extern "C" fn(device: *mut Device, flags: u32, event: *mut Event) -> Status>,
    pub event_destroy: Option<unsafe extern "C" fn(device: *mut Device, event: Event) -> Status>,
    pub event_record: Option<unsafe extern "C" fn(device: *mut Device, event: Event, stream: Stream) -> Status>,
    pub event_query: Option<unsafe extern "C" fn(device: *mut Device, event: Event, done: *mut bool) -> Status>,
    pub event_synchronize: Option<unsafe extern "C" fn(device: *mut Device, event: Event) -> Status>,
    pub event_elapsed_ms:
        Option<unsafe extern "C" fn(device: *mut Device, start: Event, end: Event, ms: *mut f32) -> Status>,

    pub mem_alloc: Option<unsafe extern "C" fn(device: *mut Device, bytes: u64, address: *mut u64) -> Status>,
    pub mem_alloc_managed: Option<unsafe extern "C" fn(device: *mut Device, bytes: u64, address: *mut u64) -> Status>,
    pub mem_alloc_host:
        Option<unsafe extern "C" fn(device: *mut Device, bytes: u64, flags: u32, address: *mut u64) -> Status>,
    pub mem_alloc_async:
        Option<unsafe extern "C" fn(device: *mut Device, bytes: u64, stream: Stream, address: *mut u64) -> Status>,
    pub mem_free_async: Option<unsafe extern "C" fn(device: *mut Device, address: u64, stream: Stream) -> Status>,
    pub mem_free: Option<unsafe extern "C" fn(device: *mut Device, address: u64) -> Status>,
    pub mem_free_host: Option<unsafe extern "C" fn(device: *mut Device, address: u64) -> Status>,

    pub memcpy_async:
        Option<unsafe extern "C" fn(device: *mut Device, dst: u64, src: u64, bytes: u64, stream: Stream) -> Status>,
    pub memcpy_peer_async: Option<
        unsafe extern "C" fn(
            device: *mut Device,
            dst: u64,
            dst_device: *mut Device,
            src: u64,
            src_device: *mut Device,
            bytes: u64,
            stream: Stream,
        ) -> Status,
    >,
    pub memset_async:
        Option<unsafe extern "C" fn(device: *mut Device, dst: u64, value: u8, bytes: u64, stream: Stream) -> Status>,

    pub module_load: Option<
        unsafe extern "C" fn(
            device: *mut Device,
            format: *const c_char,
            image: *const u8,
            image_len: usize,
            module: *mut Module,
        ) -> Status,
    >,
    pub module_unload: Option<unsafe extern "C" fn(device: *mut Device, module: Module) -> Status>,
    pub module_function: Option<
        unsafe extern "C" fn(
            device: *mut Device,
            module: Module,
            name: *const c_char,
            function: *mut Function,
        ) -> Status,
    >,
    pub launch_kernel: Option<
        unsafe extern "C" fn(
            device: *mut Device,
            function: Function,
            config: *const LaunchConfig,
            stream: Stream,
            args: *const KernelArg,
            arg_count: usize,
        ) -> Status,
    >,

    // Minor version 1.
    pub memcpy_2d_async: Option<
        unsafe extern "C" fn(
            device: *mut Device,
            dst: u64,
            dst_pitch: u64,
            src: u64,
            src_pitch: u64,
            width: u64,
            height: u64,
            stream: Stream,
        ) -> Status,
    >,

    // Minor version 2.
    pub stream_progress: Option<
        unsafe extern "C" fn(device: *mut Device, stream: Stream, progress: *mut *const StreamProgress) -> Status,
    >,
}

// SAFETY: the table is a plugin's static data: pointers to its own constant strings and
// functions, valid for the life of the process and never written after the entry
// returns it.
unsafe impl Send for PluginApi {}
// SAFETY: as above; reading it from several threads at once is what it is for.
unsafe impl Sync for PluginApi {}

/// `gpuport_plugin_entry_fn`: the entry point's type.
pub type EntryFn = unsafe extern "C" fn() -> *const PluginApi;

/// The header, as C plugins build against it.
pub const HEADER: &str = include_str!("../include/gpuport_plugin.h");
