//! The function table of an exported backend: one `extern "C"` function per call of
//! `gpuport_plugin.h`, each forwarding to the backend's `Device`, `Stream` and `Event`,
//! inside [`guard`] (an error becomes the plugin's error object; a panic never unwinds).

use std::ffi::{c_char, c_void, CStr};

use gpuport_core::{
    Backend, Copy2d, DType, DefaultStream, Device, DeviceId, Error, Event, EventFlags, HostAllocFlags, Kernel,
    KernelArg, LaunchConfig, MemoryKind, Module, ModuleImage, Result, Scalar, Stream, StreamFlags,
};
use gpuport_plugin_abi as abi;

use crate::error::{error_destroy, error_kind, error_message, guard, put};
use crate::state::{drop_handle, existing, handle_of, handle_of_box, object, Exported};

/// A loaded module: what `gpuport_module` boxes. Its kernels' handles point into it and
/// go with it.
struct ModuleState {
    module: Module,
    kernels: std::sync::Mutex<Vec<std::sync::Arc<Kernel>>>,
}

/// One opened device: what `gpuport_device*` points at.
struct DeviceState<B: Backend> {
    exported: &'static Exported<B>,
    device: B::Device,
    /// The legacy default stream's handle, dropped with the device.
    legacy: usize,
}

/// # Safety
/// `dev` is null or a device this plugin opened and has not closed.
unsafe fn dev<'a, B: Backend>(dev: *mut abi::Device) -> Result<&'a DeviceState<B>> {
    // SAFETY: per the contract.
    unsafe { dev.cast::<DeviceState<B>>().as_ref() }.ok_or_else(|| Error::invalid_handle("a null device"))
}

type StreamOf<B> = <B as Backend>::Stream;
type EventOf<B> = <B as Backend>::Event;

/// What a stream handle boxes: the backend's stream and, where the stream keeps its
/// counters in memory, the progress struct `stream_progress` hands out (pointing at
/// them). Boxed before the struct is filled in, so the counters — inside the stream or
/// behind it — no longer move.
struct StreamState<B: Backend> {
    stream: StreamOf<B>,
    progress: Option<abi::StreamProgress>,
}

/// A new stream handle for `stream`.
fn stream_handle<B: Backend>(stream: StreamOf<B>) -> usize {
    let mut state = Box::new(StreamState::<B> { stream, progress: None });
    state.progress = state.stream.progress().map(|p| abi::StreamProgress {
        struct_size: std::mem::size_of::<abi::StreamProgress>(),
        submitted: p.submitted.as_ptr().cast_const(),
        completed: p.completed.as_ptr().cast_const(),
        publishing: p.publishing.as_ptr().cast_const(),
    });
    handle_of_box(state)
}

fn ordinal_of(id: DeviceId, kind: gpuport_core::BackendKind) -> i32 {
    if id.kind == kind {
        id.ordinal as i32
    } else {
        -1
    }
}

/// Copies `text` into a C array, NUL-terminated, cut to fit.
fn fill(array: &mut [c_char], text: &str) {
    let n = text.len().min(array.len() - 1);
    for (dst, src) in array.iter_mut().zip(&text.as_bytes()[..n]) {
        *dst = *src as c_char;
    }
    array[n] = 0;
}

unsafe extern "C" fn initialize<B: Backend>() -> abi::Status {
    guard(|| existing::<B>()?.backend().map(|_| ()))
}

unsafe extern "C" fn device_count<B: Backend>(count: *mut u32) -> abi::Status {
    guard(|| {
        let n = existing::<B>()?.backend()?.devices()?.len() as u32;
        // SAFETY: the caller's out-pointer.
        unsafe { put(count, n) }
    })
}

unsafe extern "C" fn device_open<B: Backend>(ordinal: u32, out: *mut *mut abi::Device) -> abi::Status {
    guard(|| {
        let exported = existing::<B>()?;
        let device = exported.backend()?.open(ordinal)?;
        let legacy = stream_handle::<B>(device.default_stream(DefaultStream::Legacy)?);
        let state = Box::new(DeviceState::<B> { exported, device, legacy });
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, Box::into_raw(state).cast()) }
    })
}

unsafe extern "C" fn device_close<B: Backend>(device: *mut abi::Device) -> abi::Status {
    guard(|| {
        if device.is_null() {
            return Err(Error::invalid_handle("a null device"));
        }
        // SAFETY: opened by `device_open`, closed once (the contract).
        let state = unsafe { Box::from_raw(device.cast::<DeviceState<B>>()) };
        // SAFETY: the legacy stream's handle, made at open, dropped once here.
        unsafe { drop_handle::<StreamState<B>>(state.legacy, "stream") }
    })
}

unsafe extern "C" fn device_info<B: Backend>(device: *mut abi::Device, out: *mut abi::DeviceInfo) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let info = d.device.info()?;
        // SAFETY: the caller's struct; its size is read first, and nothing is written past it.
        let size =
            unsafe { out.as_ref() }.map(|o| o.struct_size).ok_or_else(|| Error::invalid_argument("null info"))?;
        // SAFETY: an all-zero DeviceInfo is valid (integers and byte arrays).
        let mut ours: abi::DeviceInfo = unsafe { std::mem::zeroed() };
        ours.struct_size = size;
        fill(&mut ours.name, &info.name);
        ours.total_memory = info.total_memory;
        ours.multiprocessors = info.multiprocessors.unwrap_or(0);
        (ours.compute_major, ours.compute_minor) =
            info.compute_capability.map_or((-1, -1), |(a, b)| (a as i32, b as i32));
        fill(&mut ours.arch, info.arch.as_deref().unwrap_or(""));
        let n = size.min(std::mem::size_of::<abi::DeviceInfo>());
        // SAFETY: `n` bytes fit both the caller's struct (its size) and ours.
        unsafe { std::ptr::copy_nonoverlapping((&raw const ours).cast::<u8>(), out.cast::<u8>(), n) };
        Ok(())
    })
}

unsafe extern "C" fn can_access_peer<B: Backend>(
    device: *mut abi::Device,
    peer: *mut abi::Device,
    can: *mut bool,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract, for both devices.
        let (d, p) = unsafe { (dev::<B>(device)?, dev::<B>(peer)?) };
        let answer = d.device.can_access_peer(&p.device)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(can, answer) }
    })
}

unsafe extern "C" fn enable_peer_access<B: Backend>(device: *mut abi::Device, peer: *mut abi::Device) -> abi::Status {
    // SAFETY: the contract, for both devices.
    guard(|| unsafe { dev::<B>(device)?.device.enable_peer_access(&dev::<B>(peer)?.device) })
}

unsafe extern "C" fn pointer_attributes<B: Backend>(
    device: *mut abi::Device,
    address: u64,
    out: *mut abi::PointerAttributes,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let a = d.device.pointer_attributes(address)?;
        // SAFETY: the caller's struct; its size is read first.
        let size = unsafe { out.as_ref() }.map(|o| o.struct_size).ok_or_else(|| Error::invalid_argument("null out"))?;
        let ours = abi::PointerAttributes {
            struct_size: size,
            memory: match a.memory {
                MemoryKind::Unregistered => abi::memory_kind::UNREGISTERED,
                MemoryKind::Device => abi::memory_kind::DEVICE,
                MemoryKind::PinnedHost => abi::memory_kind::PINNED_HOST,
                MemoryKind::Managed => abi::memory_kind::MANAGED,
                MemoryKind::Host => abi::memory_kind::HOST,
            },
            device_ordinal: a.device.map_or(-1, |id| ordinal_of(id, B::KIND)),
            host_accessible: a.host_accessible.into(),
            device_accessible: a.device_accessible.into(),
            managed: a.managed.into(),
            reserved: 0,
            allocation_base: a.allocation.map_or(0, |(base, _)| base),
            allocation_len: a.allocation.map_or(0, |(_, len)| len as u64),
        };
        let n = size.min(std::mem::size_of::<abi::PointerAttributes>());
        // SAFETY: `n` bytes fit both the caller's struct (its size) and ours.
        unsafe { std::ptr::copy_nonoverlapping((&raw const ours).cast::<u8>(), out.cast::<u8>(), n) };
        Ok(())
    })
}

unsafe extern "C" fn device_synchronize<B: Backend>(device: *mut abi::Device) -> abi::Status {
    // SAFETY: the contract.
    guard(|| unsafe { dev::<B>(device) }?.device.synchronize())
}

unsafe extern "C" fn stream_priority_range<B: Backend>(
    device: *mut abi::Device,
    least: *mut i32,
    greatest: *mut i32,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let (l, g) = unsafe { dev::<B>(device) }?.device.stream_priority_range()?;
        // SAFETY: the caller's out-pointers.
        unsafe { put(least, l).and_then(|()| put(greatest, g)) }
    })
}

unsafe extern "C" fn stream_create<B: Backend>(
    device: *mut abi::Device,
    flags: u32,
    priority: i32,
    out: *mut abi::Stream,
) -> abi::Status {
    guard(|| {
        let flags =
            if flags & abi::stream_flags::NON_BLOCKING != 0 { StreamFlags::NON_BLOCKING } else { StreamFlags::empty() };
        // SAFETY: the contract.
        let s = unsafe { dev::<B>(device) }?.device.create_stream(flags, priority)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, stream_handle::<B>(s)) }
    })
}

unsafe extern "C" fn legacy_stream<B: Backend>(device: *mut abi::Device, out: *mut abi::Stream) -> abi::Status {
    // SAFETY: the contract; the caller's out-pointer.
    guard(|| unsafe { put(out, dev::<B>(device)?.legacy) })
}

unsafe extern "C" fn stream_destroy<B: Backend>(_device: *mut abi::Device, stream: abi::Stream) -> abi::Status {
    // SAFETY: a stream this plugin created, destroyed once (the contract).
    guard(|| unsafe { drop_handle::<StreamState<B>>(stream, "stream") })
}

/// # Safety
/// `stream` is a live stream handle of this plugin.
#[inline]
unsafe fn stream<'a, B: Backend>(stream: abi::Stream) -> Result<&'a StreamOf<B>> {
    // SAFETY: forwarded.
    unsafe { object::<StreamState<B>>(stream, "stream") }.map(|state| &state.stream)
}

unsafe extern "C" fn stream_progress<B: Backend>(
    _d: *mut abi::Device,
    s: abi::Stream,
    out: *mut *const abi::StreamProgress,
) -> abi::Status {
    guard(|| {
        // SAFETY: a live stream; its progress struct lives in its box, as long as it.
        let state = unsafe { object::<StreamState<B>>(s, "stream") }?;
        let progress = state
            .progress
            .as_ref()
            .ok_or_else(|| Error::unsupported(B::KIND, "this stream keeps no progress counters"))?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, progress as *const abi::StreamProgress) }
    })
}

/// # Safety
/// `event` is a live event handle of this plugin.
unsafe fn event<'a, B: Backend>(event: abi::Event) -> Result<&'a EventOf<B>> {
    // SAFETY: forwarded.
    unsafe { object::<EventOf<B>>(event, "event") }
}

unsafe extern "C" fn stream_query<B: Backend>(_d: *mut abi::Device, s: abi::Stream, done: *mut bool) -> abi::Status {
    // SAFETY: a live stream; the caller's out-pointer.
    guard(|| unsafe { put(done, stream::<B>(s)?.query()?) })
}

unsafe extern "C" fn stream_synchronize<B: Backend>(_d: *mut abi::Device, s: abi::Stream) -> abi::Status {
    // SAFETY: a live stream.
    guard(|| unsafe { stream::<B>(s) }?.synchronize())
}

unsafe extern "C" fn stream_wait_event<B: Backend>(_d: *mut abi::Device, s: abi::Stream, e: abi::Event) -> abi::Status {
    // SAFETY: live handles.
    guard(|| unsafe { stream::<B>(s)?.wait(event::<B>(e)?) })
}

unsafe extern "C" fn stream_launch_host_func<B: Backend>(
    _d: *mut abi::Device,
    s: abi::Stream,
    func: abi::HostFunc,
    user: *mut c_void,
) -> abi::Status {
    // SAFETY: a live stream; the header's host function may run once on any thread and
    // does not unwind (a C function), which is `host_function`'s contract.
    guard(|| unsafe { stream::<B>(s)?.host_function(func, user) })
}

unsafe extern "C" fn event_create<B: Backend>(
    device: *mut abi::Device,
    flags: u32,
    out: *mut abi::Event,
) -> abi::Status {
    guard(|| {
        let mut f = EventFlags::empty();
        if flags & abi::event_flags::BLOCKING_SYNC != 0 {
            f |= EventFlags::BLOCKING_SYNC;
        }
        if flags & abi::event_flags::DISABLE_TIMING != 0 {
            f |= EventFlags::DISABLE_TIMING;
        }
        // SAFETY: the contract.
        let e = unsafe { dev::<B>(device) }?.device.create_event(f)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, handle_of(e)) }
    })
}

unsafe extern "C" fn event_destroy<B: Backend>(_d: *mut abi::Device, e: abi::Event) -> abi::Status {
    // SAFETY: an event this plugin created, destroyed once.
    guard(|| unsafe { drop_handle::<EventOf<B>>(e, "event") })
}

unsafe extern "C" fn event_record<B: Backend>(_d: *mut abi::Device, e: abi::Event, s: abi::Stream) -> abi::Status {
    // SAFETY: live handles.
    guard(|| unsafe { stream::<B>(s)?.record(event::<B>(e)?) })
}

unsafe extern "C" fn event_query<B: Backend>(_d: *mut abi::Device, e: abi::Event, done: *mut bool) -> abi::Status {
    // SAFETY: a live event; the caller's out-pointer.
    guard(|| unsafe { put(done, event::<B>(e)?.query()?) })
}

unsafe extern "C" fn event_synchronize<B: Backend>(_d: *mut abi::Device, e: abi::Event) -> abi::Status {
    // SAFETY: a live event.
    guard(|| unsafe { event::<B>(e) }?.synchronize())
}

unsafe extern "C" fn event_elapsed_ms<B: Backend>(
    _d: *mut abi::Device,
    start: abi::Event,
    end: abi::Event,
    ms: *mut f32,
) -> abi::Status {
    // SAFETY: live events; the caller's out-pointer.
    guard(|| unsafe { put(ms, event::<B>(start)?.elapsed_ms(event::<B>(end)?)?) })
}

fn bytes_of(bytes: u64) -> Result<usize> {
    usize::try_from(bytes).map_err(|_| Error::invalid_argument(format!("{bytes} bytes do not fit this machine")))
}

unsafe extern "C" fn mem_alloc<B: Backend>(device: *mut abi::Device, bytes: u64, out: *mut u64) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let addr = d.exported.keep(d.device.alloc(bytes_of(bytes)?)?);
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, addr) }
    })
}

unsafe extern "C" fn mem_alloc_managed<B: Backend>(device: *mut abi::Device, bytes: u64, out: *mut u64) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let addr = d.exported.keep(d.device.alloc_managed(bytes_of(bytes)?)?);
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, addr) }
    })
}

unsafe extern "C" fn mem_alloc_host<B: Backend>(
    device: *mut abi::Device,
    bytes: u64,
    flags: u32,
    out: *mut u64,
) -> abi::Status {
    guard(|| {
        let mut f = HostAllocFlags::empty();
        for (bit, flag) in [
            (abi::host_alloc_flags::PORTABLE, HostAllocFlags::PORTABLE),
            (abi::host_alloc_flags::DEVICE_MAP, HostAllocFlags::DEVICE_MAP),
            (abi::host_alloc_flags::WRITE_COMBINED, HostAllocFlags::WRITE_COMBINED),
        ] {
            if flags & bit != 0 {
                f |= flag;
            }
        }
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let addr = d.exported.keep(d.device.alloc_pinned(bytes_of(bytes)?, f)?);
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, addr) }
    })
}

unsafe extern "C" fn mem_alloc_async<B: Backend>(
    device: *mut abi::Device,
    bytes: u64,
    s: abi::Stream,
    out: *mut u64,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract: a live device and stream.
        let (d, s) = unsafe { (dev::<B>(device)?, stream::<B>(s)?) };
        let addr = d.exported.keep(d.device.alloc_async(bytes_of(bytes)?, s)?);
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, addr) }
    })
}

unsafe extern "C" fn mem_free_async<B: Backend>(device: *mut abi::Device, address: u64, s: abi::Stream) -> abi::Status {
    guard(|| {
        // SAFETY: the contract: a live device and stream.
        let (d, s) = unsafe { (dev::<B>(device)?, stream::<B>(s)?) };
        let buffer = d.exported.take(address)?;
        // Freed in the stream's order: after the work queued before, by the release
        // thread (never on the stream's worker).
        s.host_callback(Box::new(move || gpuport_core::release::drop_or_defer(buffer)))
    })
}

unsafe extern "C" fn mem_free<B: Backend>(device: *mut abi::Device, address: u64) -> abi::Status {
    // SAFETY: the contract. The buffer goes back to the backend now (no work uses it).
    guard(|| unsafe { dev::<B>(device) }?.exported.take(address)?.free())
}

unsafe extern "C" fn memcpy_async<B: Backend>(
    device: *mut abi::Device,
    dst: u64,
    src: u64,
    bytes: u64,
    s: abi::Stream,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let len = bytes_of(bytes)?;
        // SAFETY: a live stream.
        let s = unsafe { stream::<B>(s) }?;
        d.exported.with_pair((src, len), (dst, len), |(sb, so), (db, doff)| s.copy(sb, so, db, doff, len))
    })
}

unsafe extern "C" fn memcpy_2d_async<B: Backend>(
    device: *mut abi::Device,
    dst: u64,
    dst_pitch: u64,
    src: u64,
    src_pitch: u64,
    width: u64,
    height: u64,
    s: abi::Stream,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let (dst_pitch, src_pitch) = (bytes_of(dst_pitch)?, bytes_of(src_pitch)?);
        let (width, height) = (bytes_of(width)?, bytes_of(height)?);
        let span = |pitch: usize| Copy2d { src_pitch: pitch, width, height, ..Copy2d::default() }.src_span();
        let (src_span, dst_span) = (span(src_pitch)?, span(dst_pitch)?);
        // SAFETY: a live stream.
        let s = unsafe { stream::<B>(s) }?;
        d.exported.with_pair((src, src_span), (dst, dst_span), |(sb, so), (db, doff)| {
            let copy = Copy2d { src_offset: so, src_pitch, dst_offset: doff, dst_pitch, width, height };
            s.copy_2d(sb, db, &copy)
        })
    })
}

unsafe extern "C" fn memcpy_peer_async<B: Backend>(
    device: *mut abi::Device,
    dst: u64,
    _dst_device: *mut abi::Device,
    src: u64,
    _src_device: *mut abi::Device,
    bytes: u64,
    s: abi::Stream,
) -> abi::Status {
    // One address space: the allocations say which device each side is.
    // SAFETY: forwarded.
    unsafe { memcpy_async::<B>(device, dst, src, bytes, s) }
}

unsafe extern "C" fn memset_async<B: Backend>(
    device: *mut abi::Device,
    dst: u64,
    value: u8,
    bytes: u64,
    s: abi::Stream,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract.
        let d = unsafe { dev::<B>(device) }?;
        let len = bytes_of(bytes)?;
        let (buffer, offset) = d.exported.resolve(dst, len)?;
        // SAFETY: a live stream.
        unsafe { stream::<B>(s) }?.memset(&buffer, offset, len, value)
    })
}

unsafe extern "C" fn module_load<B: Backend>(
    device: *mut abi::Device,
    format: *const c_char,
    image: *const u8,
    image_len: usize,
    out: *mut abi::Module,
) -> abi::Status {
    guard(|| {
        if format.is_null() || (image.is_null() && image_len > 0) {
            return Err(Error::invalid_argument("a null image format or image"));
        }
        // SAFETY: a NUL-terminated tag and `image_len` readable bytes (the contract).
        let (format, bytes) =
            unsafe { (CStr::from_ptr(format).to_str().unwrap_or(""), std::slice::from_raw_parts(image, image_len)) };
        let text =
            |what| std::str::from_utf8(bytes).map_err(|_| Error::invalid_argument(format!("{what} is not UTF-8")));
        let image = match format {
            "registered" => ModuleImage::Registered(text("a registered module's name")?),
            "ptx" => ModuleImage::Ptx(text("PTX")?),
            "cubin" => ModuleImage::Cubin(bytes),
            "hsaco" => ModuleImage::HipCodeObject(bytes),
            other => ModuleImage::Custom { format: other, bytes },
        };
        // SAFETY: the contract.
        let module = unsafe { dev::<B>(device) }?.device.load_module(image)?;
        let state = ModuleState { module, kernels: std::sync::Mutex::new(Vec::new()) };
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, handle_of(state)) }
    })
}

unsafe extern "C" fn module_unload(_d: *mut abi::Device, module: abi::Module) -> abi::Status {
    // SAFETY: a module this plugin loaded, unloaded once, with no later launch of its
    // kernels (launches queued before keep what they use).
    guard(|| unsafe { drop_handle::<ModuleState>(module, "module") })
}

unsafe extern "C" fn module_function<B: Backend>(
    device: *mut abi::Device,
    module: abi::Module,
    name: *const c_char,
    out: *mut abi::Function,
) -> abi::Status {
    guard(|| {
        if name.is_null() {
            return Err(Error::invalid_argument("a null kernel name"));
        }
        // SAFETY: a NUL-terminated name (the contract).
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| Error::invalid_argument("a kernel name"))?;
        // SAFETY: the contract: a live device and module.
        let (d, state) = unsafe { (dev::<B>(device)?, object::<ModuleState>(module, "module")?) };
        // Kept in the module (an `Arc`: its address stays put as the list grows), so the
        // handle lives exactly as long as the module.
        let kernel = std::sync::Arc::new(d.device.kernel(&state.module, name)?);
        let handle = std::sync::Arc::as_ptr(&kernel).expose_provenance();
        state.kernels.lock().unwrap_or_else(|p| p.into_inner()).push(kernel);
        // SAFETY: the caller's out-pointer.
        unsafe { put(out, handle) }
    })
}

unsafe extern "C" fn launch_kernel<B: Backend>(
    device: *mut abi::Device,
    function: abi::Function,
    config: *const abi::LaunchConfig,
    s: abi::Stream,
    args: *const abi::KernelArg,
    arg_count: usize,
) -> abi::Status {
    guard(|| {
        // SAFETY: the contract: a live device, a readable config and `arg_count` arguments.
        let (d, config, args) = unsafe {
            let config = config.as_ref().ok_or_else(|| Error::invalid_argument("a null launch configuration"))?;
            let args = if arg_count == 0 { &[][..] } else { std::slice::from_raw_parts(args, arg_count) };
            (dev::<B>(device)?, config, args)
        };
        let args = args
            .iter()
            .map(|a| match a.kind {
                abi::kernel_arg_kind::ADDRESS => {
                    let (buffer, offset) = d.exported.resolve(a.value, 0)?;
                    Ok(KernelArg::Buffer { buffer, offset })
                }
                abi::kernel_arg_kind::SCALAR => {
                    let dtype = DType::from_dlpack(a.dtype_code, a.dtype_bits, a.dtype_lanes)?;
                    let size = (a.size as usize).min(8);
                    Ok(KernelArg::Scalar(Scalar::from_raw(dtype, &a.value.to_ne_bytes()[..size])?))
                }
                other => Err(Error::invalid_argument(format!("kernel argument kind {other}"))),
            })
            .collect::<Result<Vec<_>>>()?;
        let config = LaunchConfig { grid: config.grid, block: config.block, shared_mem_bytes: config.shared_mem_bytes };
        // SAFETY: live handles of this plugin.
        let (kernel, s) = unsafe { (object::<Kernel>(function, "kernel")?, stream::<B>(s)?) };
        s.launch(kernel, &config, &args)
    })
}

/// The table of backend `B`, exported under `name`.
pub(crate) fn table<B: Backend>(exported: &Exported<B>) -> abi::PluginApi {
    abi::PluginApi {
        struct_size: std::mem::size_of::<abi::PluginApi>(),
        abi_major: abi::ABI_MAJOR,
        abi_minor: abi::ABI_MINOR,
        name: exported.name.as_ptr(),
        version: exported.version.as_ptr(),
        dlpack_device: B::DLPACK.device.0,
        dlpack_pinned_host: B::DLPACK.pinned_host.map_or(-1, |t| t.0),
        dlpack_managed: B::DLPACK.managed.map_or(-1, |t| t.0),
        reserved: 0,
        error_kind: Some(error_kind),
        error_message: Some(error_message),
        error_destroy: Some(error_destroy),
        initialize: Some(initialize::<B>),
        device_count: Some(device_count::<B>),
        device_open: Some(device_open::<B>),
        device_close: Some(device_close::<B>),
        device_info: Some(device_info::<B>),
        can_access_peer: Some(can_access_peer::<B>),
        enable_peer_access: Some(enable_peer_access::<B>),
        pointer_attributes: Some(pointer_attributes::<B>),
        device_synchronize: Some(device_synchronize::<B>),
        stream_priority_range: Some(stream_priority_range::<B>),
        stream_create: Some(stream_create::<B>),
        legacy_stream: Some(legacy_stream::<B>),
        // A Rust backend's per-thread default stream is its own thread's: not exported.
        per_thread_stream: None,
        stream_destroy: Some(stream_destroy::<B>),
        stream_query: Some(stream_query::<B>),
        stream_synchronize: Some(stream_synchronize::<B>),
        stream_wait_event: Some(stream_wait_event::<B>),
        stream_launch_host_func: Some(stream_launch_host_func::<B>),
        event_create: Some(event_create::<B>),
        event_destroy: Some(event_destroy::<B>),
        event_record: Some(event_record::<B>),
        event_query: Some(event_query::<B>),
        event_synchronize: Some(event_synchronize::<B>),
        event_elapsed_ms: Some(event_elapsed_ms::<B>),
        mem_alloc: Some(mem_alloc::<B>),
        mem_alloc_managed: Some(mem_alloc_managed::<B>),
        mem_alloc_host: Some(mem_alloc_host::<B>),
        mem_alloc_async: Some(mem_alloc_async::<B>),
        mem_free_async: Some(mem_free_async::<B>),
        mem_free: Some(mem_free::<B>),
        mem_free_host: Some(mem_free::<B>),
        memcpy_async: Some(memcpy_async::<B>),
        memcpy_peer_async: Some(memcpy_peer_async::<B>),
        memset_async: Some(memset_async::<B>),
        module_load: Some(module_load::<B>),
        module_unload: Some(module_unload),
        module_function: Some(module_function::<B>),
        launch_kernel: Some(launch_kernel::<B>),
        memcpy_2d_async: Some(memcpy_2d_async::<B>),
        stream_progress: Some(stream_progress::<B>),
    }
}
