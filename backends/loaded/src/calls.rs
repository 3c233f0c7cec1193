//! A loaded plugin's device context: the vendor kit's call table ([`VendorCalls`]) over
//! the plugin's C table, one checked call (`result`) per method. The kit builds the whole
//! Device/Stream/Event contract on it, as for CUDA and ROCm.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use gpuport_core::{
    BackendKind, DeviceId, DeviceInfo, DlpackDevices, Error, EventFlags, HostAllocFlags, LaunchConfig, MemoryKind,
    ModuleImage, PointerAttributes, ProgressReading, Result, StreamFlags,
};
use gpuport_plugin_abi as abi;
use gpuport_vendor_kit::kernel_args::ArgSlot;
use gpuport_vendor_kit::release::Deferred;
use gpuport_vendor_kit::{memcpy_rows, OpenDevices, VendorCalls, VendorDevice};

use super::faults::Faults;
use super::stream_handle::StreamHandle;
use super::table::{array_text, Table};

/// What every device of one loaded plugin shares: its table, its open devices and the
/// checks of its contract.
pub(crate) struct Shared {
    pub(crate) table: Table,
    pub(crate) open: OpenDevices<PluginCalls>,
    pub(crate) count: u32,
    pub(crate) faults: Faults,
}

/// Closes the plugin's device when the last handle of it is gone, on the release thread.
struct Opened {
    shared: Arc<Shared>,
    raw: *mut abi::Device,
    id: DeviceId,
}

// SAFETY: the header allows every call from any thread; the pointer is the plugin's
// opaque device, never dereferenced here.
unsafe impl Send for Opened {}

impl Drop for Opened {
    fn drop(&mut self) {
        // SAFETY: opened once in `PluginCalls::open`, closed once here, after the last
        // handle of the device (the kit holds the context in every handle).
        if let Err(e) = unsafe { self.shared.table.device_close(self.raw) } {
            log::warn!("closing {}: {e}", self.id);
        }
    }
}

/// One opened device of a loaded plugin.
pub(crate) struct PluginCalls {
    /// The plugin's table, copied into each device: every call reads its function one
    /// load away from the device instead of through the shared state.
    table: Table,
    shared: Arc<Shared>,
    raw: *mut abi::Device,
    id: DeviceId,
    legacy: StreamHandle,
    total_memory: usize,
    _opened: Deferred<Opened>,
}

// SAFETY: the header allows every call from any thread, concurrently; the struct is
// immutable after construction.
unsafe impl Send for PluginCalls {}
// SAFETY: as above.
unsafe impl Sync for PluginCalls {}

impl PluginCalls {
    /// Opens (or shares the already-open) device `ordinal`.
    pub(crate) fn open(shared: &Arc<Shared>, ordinal: u32) -> Result<Arc<VendorDevice<PluginCalls>>> {
        shared.open.open(ordinal, shared.count, || {
            let t = &shared.table;
            let raw = t.device_open(ordinal)?;
            let id = DeviceId::new(t.kind, ordinal);
            let opened = Deferred::new(Opened { shared: shared.clone(), raw, id });
            // SAFETY: `raw` was just opened.
            let legacy = unsafe { t.legacy_stream(raw) }?;
            // SAFETY: as above; the legacy stream lives as long as the device.
            let legacy = StreamHandle::new(legacy, unsafe { t.stream_progress(raw, legacy, "legacy_stream") }?);
            // SAFETY: as above.
            let total_memory = unsafe { t.device_info(raw) }?.total_memory;
            let total_memory = usize::try_from(total_memory).unwrap_or(usize::MAX);
            Ok(PluginCalls { table: t.clone(), shared: shared.clone(), raw, id, legacy, total_memory, _opened: opened })
        })
    }

    #[inline]
    fn t(&self) -> &Table {
        &self.table
    }

    /// The plugin's own stream query, out of line: a query its counters answer makes no
    /// call, and inlines into its caller without this call's frame.
    #[inline(never)]
    fn stream_query(&self, stream: abi::Stream) -> Result<bool> {
        // SAFETY: the kit passes only live streams of this device.
        unsafe { self.t().stream_query(self.raw, stream) }
    }

    /// `addr`, just allocated by `call` for `bytes`, once the plugin's contract admits it
    /// (aligned, and no live allocation's); a misaligned one is given back with `free`.
    fn admitted(&self, call: &str, addr: u64, bytes: usize, free: impl FnOnce(u64) -> Result<()>) -> Result<u64> {
        match self.shared.faults.admit(call, addr, bytes) {
            Ok(()) => Ok(addr),
            Err((e, give_back)) => {
                if give_back {
                    if let Err(free_failed) = free(addr) {
                        log::warn!("{}: giving back {addr:#x}: {free_failed}", self.id);
                    }
                }
                Err(e)
            }
        }
    }

    /// The error for progress counters that broke the protocol.
    #[cold]
    #[inline(never)]
    fn counters_backwards(&self, stream: StreamHandle, completed: u64, submitted: u64) -> Error {
        Error::broken_contract(
            self.id.kind,
            format!(
                "stream {:#x} of {} counted {completed} operations completed, then {submitted} submitted: a \
                 progress counter went backwards, or `completed` ran past `submitted`",
                stream.raw(),
                self.id
            ),
        )
    }

    /// The open device of this plugin with id `id` (a peer of a copy).
    fn peer_raw(&self, id: DeviceId) -> Result<*mut abi::Device> {
        if id.kind != self.id.kind {
            return Err(Error::mismatch("copy between devices", self.id.kind, id));
        }
        self.shared
            .open
            .live(id.ordinal)
            .map(|d| d.raw)
            .ok_or_else(|| Error::invalid_handle(format!("{id} is not open")))
    }
}

fn stream_flags(flags: StreamFlags) -> u32 {
    if flags.contains(StreamFlags::NON_BLOCKING) {
        abi::stream_flags::NON_BLOCKING
    } else {
        0
    }
}

fn event_flags(flags: EventFlags) -> u32 {
    let mut bits = 0;
    if flags.contains(EventFlags::BLOCKING_SYNC) {
        bits |= abi::event_flags::BLOCKING_SYNC;
    }
    if flags.contains(EventFlags::DISABLE_TIMING) {
        bits |= abi::event_flags::DISABLE_TIMING;
    }
    bits
}

fn host_alloc_flags(flags: HostAllocFlags) -> u32 {
    let mut bits = 0;
    for (flag, bit) in [
        (HostAllocFlags::PORTABLE, abi::host_alloc_flags::PORTABLE),
        (HostAllocFlags::DEVICE_MAP, abi::host_alloc_flags::DEVICE_MAP),
        (HostAllocFlags::WRITE_COMBINED, abi::host_alloc_flags::WRITE_COMBINED),
    ] {
        if flags.contains(flag) {
            bits |= bit;
        }
    }
    bits
}

/// The format tag and bytes a plugin is given for an image.
fn image_parts<'a>(image: &ModuleImage<'a>) -> (&'a str, &'a [u8]) {
    match *image {
        ModuleImage::Ptx(text) => ("ptx", text.as_bytes()),
        ModuleImage::Cubin(bytes) => ("cubin", bytes),
        ModuleImage::HipCodeObject(bytes) => ("hsaco", bytes),
        ModuleImage::Registered(name) => ("registered", name.as_bytes()),
        ModuleImage::Custom { format, bytes } => (format, bytes),
        _ => ("unknown", &[]),
    }
}

impl VendorCalls for PluginCalls {
    type Stream = StreamHandle;
    type Event = abi::Event;
    type Module = abi::Module;
    type Function = abi::Function;

    fn device_id(&self) -> DeviceId {
        self.id
    }
    fn kind(&self) -> BackendKind {
        self.id.kind
    }
    fn dlpack_devices(&self) -> Option<DlpackDevices> {
        Some(self.table.dlpack)
    }
    fn bind(&self) -> Result<()> {
        // Plugins have no current device: every call names its device.
        Ok(())
    }
    fn make_current(&self) -> Result<()> {
        Err(Error::unsupported(self.id.kind, "a current device (a plugin's calls each name their device)"))
    }
    fn info(&self) -> Result<DeviceInfo> {
        // SAFETY: this device is open.
        let info = unsafe { self.t().device_info(self.raw) }?;
        let name = array_text(&info.name)
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| Error::invalid_argument(format!("{}: device_info gave no name", self.id)))?;
        let arch = array_text(&info.arch)
            .ok_or_else(|| Error::invalid_argument(format!("{}: device_info's arch has no NUL", self.id)))?;
        let compute = (info.compute_major >= 0 && info.compute_minor >= 0)
            .then_some((info.compute_major as u32, info.compute_minor as u32));
        Ok(DeviceInfo {
            id: self.id,
            name,
            total_memory: info.total_memory,
            compute_capability: compute,
            arch: (!arch.is_empty()).then_some(arch),
            multiprocessors: (info.multiprocessors > 0).then_some(info.multiprocessors),
            pci_bus_id: None,
            uuid: None,
        })
    }
    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        // SAFETY: both devices are open (each handle holds its context).
        unsafe { self.t().can_access_peer(self.raw, peer.raw) }
    }
    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        // SAFETY: as above.
        unsafe { self.t().enable_peer_access(self.raw, peer.raw) }
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        // SAFETY: this device is open.
        let a = unsafe { self.t().pointer_attributes(self.raw, addr) }?;
        let memory = match a.memory {
            abi::memory_kind::UNREGISTERED => return Ok(PointerAttributes::unregistered()),
            abi::memory_kind::DEVICE => MemoryKind::Device,
            abi::memory_kind::PINNED_HOST => MemoryKind::PinnedHost,
            abi::memory_kind::MANAGED => MemoryKind::Managed,
            abi::memory_kind::HOST => MemoryKind::Host,
            other => {
                return Err(Error::invalid_argument(format!(
                    "{}: pointer_attributes gave memory kind {other}, which the ABI does not have",
                    self.id
                )))
            }
        };
        let device = match u32::try_from(a.device_ordinal) {
            Ok(ordinal) if ordinal < self.shared.count => Some(DeviceId::new(self.id.kind, ordinal)),
            Ok(ordinal) => {
                return Err(Error::invalid_argument(format!(
                    "{}: pointer_attributes named device {ordinal} of {}",
                    self.id, self.shared.count
                )))
            }
            Err(_) => None,
        };
        Ok(PointerAttributes {
            device,
            memory,
            host_accessible: a.host_accessible != 0,
            device_accessible: a.device_accessible != 0,
            managed: a.managed != 0,
            allocation: (a.allocation_len > 0)
                .then(|| usize::try_from(a.allocation_len).ok().map(|len| (a.allocation_base, len)))
                .flatten(),
        })
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        // SAFETY: this device is open.
        unsafe { self.t().stream_priority_range(self.raw) }
    }
    fn stream_create(&self, flags: StreamFlags, priority: i32) -> Result<StreamHandle> {
        // SAFETY: as above.
        let raw = unsafe { self.t().stream_create(self.raw, stream_flags(flags), priority) }?;
        // SAFETY: a stream just created; destroyed again when its progress is refused.
        match unsafe { self.t().stream_progress(self.raw, raw, "stream_create") } {
            Ok(progress) => Ok(StreamHandle::new(raw, progress)),
            Err(e) => {
                // SAFETY: created above, destroyed once, nothing queued on it.
                if let Err(destroy) = unsafe { self.t().stream_destroy(self.raw, raw) } {
                    log::warn!("destroying a stream of {} after its progress was refused: {destroy}", self.id);
                }
                Err(e)
            }
        }
    }
    fn per_thread_stream_handle(&self) -> Result<StreamHandle> {
        // SAFETY: as above.
        let raw = unsafe { self.t().per_thread_stream(self.raw) }?;
        // SAFETY: the calling thread's live stream.
        let progress = unsafe { self.t().stream_progress(self.raw, raw, "per_thread_stream") }?;
        Ok(StreamHandle::new(raw, progress))
    }
    unsafe fn wrap_stream_handle(&self, raw: usize) -> Result<StreamHandle> {
        if raw == 0 {
            return Err(Error::invalid_handle(format!("a null stream handle of {}", self.id.kind)));
        }
        // SAFETY: the caller's promise: a live stream of this device.
        let progress = unsafe { self.t().stream_progress(self.raw, raw, "a wrapped stream") }?;
        Ok(StreamHandle::new(raw, progress))
    }
    fn event_create(&self, flags: EventFlags) -> Result<abi::Event> {
        // SAFETY: as above.
        unsafe { self.t().event_create(self.raw, event_flags(flags)) }
    }
    fn event_synchronize(&self, event: abi::Event) -> Result<()> {
        // SAFETY: the kit passes only live events of this device.
        unsafe { self.t().event_synchronize(self.raw, event) }
    }
    fn event_elapsed_ms(&self, start: abi::Event, end: abi::Event) -> Result<f32> {
        // SAFETY: as above.
        unsafe { self.t().event_elapsed_ms(self.raw, start, end) }
    }
    #[inline]
    fn event_record(&self, event: abi::Event, stream: StreamHandle) -> Result<()> {
        // SAFETY: as above, and a live stream.
        unsafe { self.t().event_record(self.raw, event, stream.raw()) }
    }
    #[inline]
    fn event_done(&self, event: abi::Event) -> Result<bool> {
        // SAFETY: as above.
        unsafe { self.t().event_query(self.raw, event) }
    }
    fn event_destroy(&self, event: abi::Event) -> Result<()> {
        // SAFETY: the kit destroys each event it created once.
        unsafe { self.t().event_destroy(self.raw, event) }
    }
    #[inline]
    fn stream_done(&self, stream: StreamHandle) -> Result<bool> {
        match stream.read_progress() {
            Ok(ProgressReading::Done) => Ok(true),
            Ok(ProgressReading::Pending) => Ok(false),
            // Publishing, or no counters: the plugin's own query (which waits for the
            // publication).
            Ok(ProgressReading::Publishing) => self.stream_query(stream.raw()),
            Err((completed, submitted)) => Err(self.counters_backwards(stream, completed, submitted)),
        }
    }
    #[inline]
    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: as above.
        unsafe { self.t().stream_synchronize(self.raw, stream.raw()) }?;
        // The host functions it ran wrongly are reported once all before have run.
        self.shared.faults.check_host_funcs()
    }
    fn device_synchronize(&self) -> Result<()> {
        // SAFETY: this device is open.
        unsafe { self.t().device_synchronize(self.raw) }?;
        self.shared.faults.check_host_funcs()
    }
    fn stream_destroy(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: the kit destroys each stream it created once.
        unsafe { self.t().stream_destroy(self.raw, stream.raw()) }
    }
    #[inline]
    fn launch_host_callback(&self, stream: StreamHandle, user: *mut c_void) -> Result<()> {
        // SAFETY: a live stream; the plugin's trampoline runs the kit's callback once (a
        // second run does nothing).
        unsafe { self.t().stream_launch_host_func(self.raw, stream.raw(), self.shared.faults.host_func(), user) }
    }
    #[inline]
    fn stream_wait_event(&self, stream: StreamHandle, event: abi::Event) -> Result<()> {
        // SAFETY: live handles of this device.
        unsafe { self.t().stream_wait_event(self.raw, stream.raw(), event) }
    }
    #[inline]
    unsafe fn memcpy_async(&self, dst: u64, src: u64, len: usize, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded: both ranges stay valid until the copy has run.
        unsafe { self.t().memcpy_async(self.raw, dst, src, len, stream.raw()) }
    }
    unsafe fn memcpy_2d_async(
        &self,
        dst: u64,
        dst_pitch: usize,
        src: u64,
        src_pitch: usize,
        width: usize,
        height: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        if self.t().api.memcpy_2d_async.is_none() {
            // An optional call (ABI minor 1): without it, a copy per row.
            // SAFETY: forwarded.
            return unsafe { memcpy_rows(self, dst, dst_pitch, src, src_pitch, width, height, stream) };
        }
        // SAFETY: forwarded: every row stays valid until the copy has run.
        unsafe { self.t().memcpy_2d_async(self.raw, dst, dst_pitch, src, src_pitch, width, height, stream.raw()) }
    }
    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        dst_device: DeviceId,
        src: u64,
        src_device: DeviceId,
        len: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        let (dst_raw, src_raw) = (self.peer_raw(dst_device)?, self.peer_raw(src_device)?);
        // SAFETY: forwarded; both devices are open (their buffers hold them).
        unsafe { self.t().memcpy_peer_async(self.raw, dst, dst_raw, src, src_raw, len, stream.raw()) }
    }
    #[inline]
    unsafe fn memset_async(&self, dst: u64, value: u8, len: usize, stream: StreamHandle) -> Result<()> {
        // SAFETY: forwarded: the range stays valid until the memset has run.
        unsafe { self.t().memset_async(self.raw, dst, value, len, stream.raw()) }
    }
    unsafe fn memset(&self, dst: u64, value: u8, len: usize) -> Result<()> {
        // The synchronous memset is one on the legacy default stream; the kit then waits
        // for that stream.
        // SAFETY: forwarded: a valid range of this device's memory.
        unsafe { self.t().memset_async(self.raw, dst, value, len, self.legacy.raw()) }
    }
    unsafe fn launch_kernel(
        &self,
        function: abi::Function,
        config: &LaunchConfig,
        stream: StreamHandle,
        args: &mut [ArgSlot],
    ) -> Result<()> {
        let args: Vec<abi::KernelArg> = args
            .iter()
            .map(|a| abi::KernelArg {
                kind: if a.is_address { abi::kernel_arg_kind::ADDRESS } else { abi::kernel_arg_kind::SCALAR },
                size: a.size,
                value: a.value[0],
                dtype_code: a.dtype.code() as u8,
                dtype_bits: a.dtype.bits(),
                dtype_lanes: a.dtype.lanes(),
                reserved: 0,
            })
            .collect();
        if let Some(big) = args.iter().find(|a| a.size > 8) {
            return Err(Error::invalid_argument(format!(
                "a {}-byte kernel argument: a plugin's launch takes scalars of up to 8 bytes",
                big.size
            )));
        }
        let config =
            abi::LaunchConfig { grid: config.grid, block: config.block, shared_mem_bytes: config.shared_mem_bytes };
        // SAFETY: forwarded: a kernel of a loaded module, a live stream, addresses valid
        // until the launch has run.
        unsafe { self.t().launch_kernel(self.raw, function, &config, stream.raw(), &args) }
    }
    fn legacy_stream_handle(&self) -> StreamHandle {
        self.legacy
    }
    fn total_memory(&self) -> usize {
        self.total_memory
    }
    fn mem_alloc(&self, bytes: usize) -> Result<u64> {
        // SAFETY: this device is open.
        let addr = unsafe { self.t().mem_alloc(self.raw, self.id, bytes) }?;
        // SAFETY: the plugin's own fresh allocation, unused, given back once.
        self.admitted("mem_alloc", addr, bytes, |a| unsafe { self.t().mem_free(self.raw, a) })
    }
    fn mem_alloc_managed(&self, bytes: usize) -> Result<u64> {
        // SAFETY: as above.
        let addr = unsafe { self.t().mem_alloc_managed(self.raw, self.id, bytes) }?;
        // SAFETY: as above.
        self.admitted("mem_alloc_managed", addr, bytes, |a| unsafe { self.t().mem_free(self.raw, a) })
    }
    fn mem_alloc_host(&self, bytes: usize, flags: HostAllocFlags) -> Result<u64> {
        // SAFETY: as above.
        let addr = unsafe { self.t().mem_alloc_host(self.raw, self.id, bytes, host_alloc_flags(flags)) }?;
        // SAFETY: as above.
        self.admitted("mem_alloc_host", addr, bytes, |a| unsafe { self.t().mem_free_host(self.raw, a) })
    }
    fn stream_ordered_supported(&self) -> Result<()> {
        match self.t().api.mem_alloc_async {
            Some(_) => Ok(()),
            None => Err(Error::unsupported(self.id.kind, "stream-ordered allocation (the plugin has none)")),
        }
    }
    unsafe fn mem_alloc_async(&self, bytes: usize, stream: StreamHandle) -> Result<u64> {
        // SAFETY: forwarded: a live stream of this device.
        let addr = unsafe { self.t().mem_alloc_async(self.raw, self.id, bytes, stream.raw()) }?;
        // SAFETY: the plugin's own fresh allocation, unused, given back once in stream
        // order.
        self.admitted("mem_alloc_async", addr, bytes, |a| unsafe { self.t().mem_free_async(self.raw, a, stream.raw()) })
    }
    // Each free forgets the address first: the plugin may hand it out again as soon as its
    // free returns.
    unsafe fn mem_free(&self, addr: u64) -> Result<()> {
        self.shared.faults.forget(addr);
        // SAFETY: forwarded: allocated here, freed once, unused.
        unsafe { self.t().mem_free(self.raw, addr) }
    }
    unsafe fn mem_free_host(&self, addr: u64) -> Result<()> {
        self.shared.faults.forget(addr);
        // SAFETY: as above.
        unsafe { self.t().mem_free_host(self.raw, addr) }
    }
    unsafe fn mem_free_async(&self, addr: u64, stream: StreamHandle) -> Result<()> {
        self.shared.faults.forget(addr);
        // SAFETY: forwarded: allocated in stream order, freed once; a live stream.
        unsafe { self.t().mem_free_async(self.raw, addr, stream.raw()) }
    }
    fn module_load(&self, image: ModuleImage<'_>) -> Result<abi::Module> {
        let (format, bytes) = image_parts(&image);
        // SAFETY: this device is open.
        unsafe { self.t().module_load(self.raw, format, bytes) }
    }
    unsafe fn module_unload(&self, module: abi::Module) -> Result<()> {
        // SAFETY: forwarded: loaded here, unloaded once, no later launch.
        unsafe { self.t().module_unload(self.raw, module) }
    }
    unsafe fn module_function(&self, module: abi::Module, name: &CStr) -> Result<abi::Function> {
        // SAFETY: forwarded: a loaded module of this device.
        unsafe { self.t().module_function(self.raw, module, name.as_ptr()) }
    }
}
