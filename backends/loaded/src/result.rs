//! One checked function per call of a plugin's table: the function looked up (a call the
//! table lacks is `Unsupported`, never a null call), made with out-values in locals, and
//! its status turned into gpuport's `Error`. Nothing else in the loader calls the table.
//!
//! Every function here is `unsafe` for one reason: the handles passed must be live
//! handles of this plugin (a device it opened and has not closed, its streams, events,
//! modules and functions), and addresses ranges the plugin may use — what the header
//! documents for each call. The vendor kit's callers uphold that.

use std::ffi::{c_char, c_void, CString};

use gpuport_core::{DeviceId, Error, Result};
use gpuport_plugin_abi as abi;

use super::stream_handle::{checked_progress, ProgressWords};
use super::table::Table;

type Dev = *mut abi::Device;

/// Looks up `$f` in the table (`Unsupported` when absent) and calls it with `$args`.
macro_rules! call {
    ($t:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let Some(f) = $t.api.$f else {
            return Err($t.lacks(concat!("`", stringify!($f), "` (the plugin's table lacks it)")));
        };
        // SAFETY: the function came from the plugin's validated table; the arguments are
        // what the header documents for it (the enclosing function's contract) and
        // pointers to this function's locals.
        let status = unsafe { f($($arg),*) };
        status
    }};
}

impl Table {
    pub(crate) fn initialize(&self) -> Result<()> {
        let status = call!(self, initialize());
        self.check("initialize", status)
    }

    pub(crate) fn device_count(&self) -> Result<u32> {
        let mut count = 0;
        let status = call!(self, device_count(&mut count));
        self.check("device_count", status).map(|()| count)
    }

    pub(crate) fn device_open(&self, ordinal: u32) -> Result<Dev> {
        let mut dev = std::ptr::null_mut();
        let status = call!(self, device_open(ordinal, &mut dev));
        self.check("device_open", status)?;
        if dev.is_null() {
            return Err(Error::invalid_argument(format!("{}: device_open({ordinal}) gave no device", self.kind)));
        }
        Ok(dev)
    }

    /// # Safety
    /// `dev` is open, closed once, with nothing of it left.
    pub(crate) unsafe fn device_close(&self, dev: Dev) -> Result<()> {
        let status = call!(self, device_close(dev));
        self.check("device_close", status)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn device_info(&self, dev: Dev) -> Result<abi::DeviceInfo> {
        // SAFETY: an all-zero DeviceInfo is valid (integers and byte arrays).
        let mut info: abi::DeviceInfo = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<abi::DeviceInfo>();
        let status = call!(self, device_info(dev, &mut info));
        self.check("device_info", status).map(|()| info)
    }

    /// # Safety
    /// Both devices are open.
    pub(crate) unsafe fn can_access_peer(&self, dev: Dev, peer: Dev) -> Result<bool> {
        let mut can = false;
        let status = call!(self, can_access_peer(dev, peer, &mut can));
        self.check("can_access_peer", status).map(|()| can)
    }

    /// # Safety
    /// Both devices are open.
    pub(crate) unsafe fn enable_peer_access(&self, dev: Dev, peer: Dev) -> Result<()> {
        let status = call!(self, enable_peer_access(dev, peer));
        self.check("enable_peer_access", status)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn pointer_attributes(&self, dev: Dev, addr: u64) -> Result<abi::PointerAttributes> {
        let mut attributes = abi::PointerAttributes {
            struct_size: std::mem::size_of::<abi::PointerAttributes>(),
            device_ordinal: -1,
            ..Default::default()
        };
        let status = call!(self, pointer_attributes(dev, addr, &mut attributes));
        self.check("pointer_attributes", status).map(|()| attributes)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn device_synchronize(&self, dev: Dev) -> Result<()> {
        let status = call!(self, device_synchronize(dev));
        self.check("device_synchronize", status)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn stream_priority_range(&self, dev: Dev) -> Result<(i32, i32)> {
        let (mut least, mut greatest) = (0, 0);
        let status = call!(self, stream_priority_range(dev, &mut least, &mut greatest));
        self.check("stream_priority_range", status).map(|()| (least, greatest))
    }

    /// A stream handle the plugin gave, refused when it is 0 (no live stream is).
    fn live_handle(&self, call: &str, handle: usize) -> Result<usize> {
        match handle {
            0 => Err(Error::invalid_argument(format!("{}: {call} gave the null handle", self.kind))),
            h => Ok(h),
        }
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn stream_create(&self, dev: Dev, flags: u32, priority: i32) -> Result<abi::Stream> {
        let mut stream = 0;
        let status = call!(self, stream_create(dev, flags, priority, &mut stream));
        self.check("stream_create", status)?;
        self.live_handle("stream_create", stream)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn legacy_stream(&self, dev: Dev) -> Result<abi::Stream> {
        let mut stream = 0;
        let status = call!(self, legacy_stream(dev, &mut stream));
        self.check("legacy_stream", status)?;
        self.live_handle("legacy_stream", stream)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn per_thread_stream(&self, dev: Dev) -> Result<abi::Stream> {
        let mut stream = 0;
        let status = call!(self, per_thread_stream(dev, &mut stream));
        self.check("per_thread_stream", status)?;
        self.live_handle("per_thread_stream", stream)
    }

    /// The progress words of `stream` (ABI minor 2), checked; `None` where the table lacks
    /// the call or the plugin answers `UNSUPPORTED` for this stream. `call` names the call
    /// that gave the stream (for the error).
    ///
    /// # Safety
    /// `stream` is a live stream of `dev`.
    pub(crate) unsafe fn stream_progress(
        &self,
        dev: Dev,
        stream: abi::Stream,
        call: &str,
    ) -> Result<Option<ProgressWords>> {
        let Some(f) = self.api.stream_progress else {
            return Ok(None);
        };
        let mut progress = std::ptr::null();
        // SAFETY: the function came from the plugin's validated table; a live stream (the
        // caller) and a pointer to a local.
        let status = unsafe { f(dev, stream, &mut progress) };
        match self.check("stream_progress", status) {
            // SAFETY: the plugin's struct, readable for its declared size (its promise).
            Ok(()) => unsafe { checked_progress(progress, self.kind, call) }.map(Some),
            Err(Error::Unsupported { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// # Safety
    /// `stream` is a live stream of `dev` it created, destroyed once.
    pub(crate) unsafe fn stream_destroy(&self, dev: Dev, stream: abi::Stream) -> Result<()> {
        let status = call!(self, stream_destroy(dev, stream));
        self.check("stream_destroy", status)
    }

    /// # Safety
    /// `stream` is a live stream of `dev`.
    #[inline]
    pub(crate) unsafe fn stream_query(&self, dev: Dev, stream: abi::Stream) -> Result<bool> {
        let mut done = false;
        let status = call!(self, stream_query(dev, stream, &mut done));
        self.check("stream_query", status).map(|()| done)
    }

    /// # Safety
    /// `stream` is a live stream of `dev`.
    #[inline]
    pub(crate) unsafe fn stream_synchronize(&self, dev: Dev, stream: abi::Stream) -> Result<()> {
        let status = call!(self, stream_synchronize(dev, stream));
        self.check("stream_synchronize", status)
    }

    /// # Safety
    /// `stream` and `event` are live handles of the plugin.
    #[inline]
    pub(crate) unsafe fn stream_wait_event(&self, dev: Dev, stream: abi::Stream, event: abi::Event) -> Result<()> {
        let status = call!(self, stream_wait_event(dev, stream, event));
        self.check("stream_wait_event", status)
    }

    /// # Safety
    /// `stream` is live; `func(user)` may be called once, on a thread of the plugin's.
    #[inline]
    pub(crate) unsafe fn stream_launch_host_func(
        &self,
        dev: Dev,
        stream: abi::Stream,
        func: abi::HostFunc,
        user: *mut c_void,
    ) -> Result<()> {
        let status = call!(self, stream_launch_host_func(dev, stream, func, user));
        self.check("stream_launch_host_func", status)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn event_create(&self, dev: Dev, flags: u32) -> Result<abi::Event> {
        let mut event = 0;
        let status = call!(self, event_create(dev, flags, &mut event));
        self.check("event_create", status)?;
        self.live_handle("event_create", event)
    }

    /// # Safety
    /// `event` is a live event of `dev` it created, destroyed once.
    pub(crate) unsafe fn event_destroy(&self, dev: Dev, event: abi::Event) -> Result<()> {
        let status = call!(self, event_destroy(dev, event));
        self.check("event_destroy", status)
    }

    /// # Safety
    /// `event` and `stream` are live handles of the plugin.
    #[inline]
    pub(crate) unsafe fn event_record(&self, dev: Dev, event: abi::Event, stream: abi::Stream) -> Result<()> {
        let status = call!(self, event_record(dev, event, stream));
        self.check("event_record", status)
    }

    /// # Safety
    /// `event` is live.
    #[inline]
    pub(crate) unsafe fn event_query(&self, dev: Dev, event: abi::Event) -> Result<bool> {
        let mut done = false;
        let status = call!(self, event_query(dev, event, &mut done));
        self.check("event_query", status).map(|()| done)
    }

    /// # Safety
    /// `event` is live.
    pub(crate) unsafe fn event_synchronize(&self, dev: Dev, event: abi::Event) -> Result<()> {
        let status = call!(self, event_synchronize(dev, event));
        self.check("event_synchronize", status)
    }

    /// # Safety
    /// Both events are live.
    pub(crate) unsafe fn event_elapsed_ms(&self, dev: Dev, start: abi::Event, end: abi::Event) -> Result<f32> {
        let mut ms = 0.0;
        let status = call!(self, event_elapsed_ms(dev, start, end, &mut ms));
        self.check("event_elapsed_ms", status)?;
        if !ms.is_finite() {
            return Err(Error::invalid_argument(format!("{}: event_elapsed_ms gave {ms}", self.kind)));
        }
        Ok(ms)
    }

    /// An address the plugin allocated, refused when it is 0 for a non-empty allocation.
    fn allocated(&self, call: &str, address: u64, bytes: usize) -> Result<u64> {
        match (address, bytes) {
            (0, 1..) => Err(Error::invalid_argument(format!("{}: {call} of {bytes} bytes gave address 0", self.kind))),
            (a, _) => Ok(a),
        }
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn mem_alloc(&self, dev: Dev, id: DeviceId, bytes: usize) -> Result<u64> {
        let mut address = 0;
        let status = call!(self, mem_alloc(dev, bytes as u64, &mut address));
        self.check_alloc("mem_alloc", status, id, bytes)?;
        self.allocated("mem_alloc", address, bytes)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn mem_alloc_managed(&self, dev: Dev, id: DeviceId, bytes: usize) -> Result<u64> {
        let mut address = 0;
        let status = call!(self, mem_alloc_managed(dev, bytes as u64, &mut address));
        self.check_alloc("mem_alloc_managed", status, id, bytes)?;
        self.allocated("mem_alloc_managed", address, bytes)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn mem_alloc_host(&self, dev: Dev, id: DeviceId, bytes: usize, flags: u32) -> Result<u64> {
        let mut address = 0;
        let status = call!(self, mem_alloc_host(dev, bytes as u64, flags, &mut address));
        self.check_alloc("mem_alloc_host", status, id, bytes)?;
        self.allocated("mem_alloc_host", address, bytes)
    }

    /// # Safety
    /// `stream` is a live stream of `dev`.
    pub(crate) unsafe fn mem_alloc_async(
        &self,
        dev: Dev,
        id: DeviceId,
        bytes: usize,
        stream: abi::Stream,
    ) -> Result<u64> {
        let mut address = 0;
        let status = call!(self, mem_alloc_async(dev, bytes as u64, stream, &mut address));
        self.check_alloc("mem_alloc_async", status, id, bytes)?;
        self.allocated("mem_alloc_async", address, bytes)
    }

    /// # Safety
    /// `address` came from `mem_alloc_async` of `dev`, freed once; `stream` is live.
    pub(crate) unsafe fn mem_free_async(&self, dev: Dev, address: u64, stream: abi::Stream) -> Result<()> {
        let status = call!(self, mem_free_async(dev, address, stream));
        self.check("mem_free_async", status)
    }

    /// # Safety
    /// `address` came from `mem_alloc` or `mem_alloc_managed` of `dev`, freed once, unused.
    pub(crate) unsafe fn mem_free(&self, dev: Dev, address: u64) -> Result<()> {
        let status = call!(self, mem_free(dev, address));
        self.check("mem_free", status)
    }

    /// # Safety
    /// `address` came from `mem_alloc_host` of `dev`, freed once, unused.
    pub(crate) unsafe fn mem_free_host(&self, dev: Dev, address: u64) -> Result<()> {
        let status = call!(self, mem_free_host(dev, address));
        self.check("mem_free_host", status)
    }

    /// # Safety
    /// Both ranges stay valid until the copy has run; `stream` is live.
    #[inline]
    pub(crate) unsafe fn memcpy_async(
        &self,
        dev: Dev,
        dst: u64,
        src: u64,
        len: usize,
        stream: abi::Stream,
    ) -> Result<()> {
        let status = call!(self, memcpy_async(dev, dst, src, len as u64, stream));
        self.check("memcpy_async", status)
    }

    /// # Safety
    /// As for `memcpy_async`, for every row; the kit's limits on the shape hold.
    #[allow(clippy::too_many_arguments)] // the call's own parameters, one for one
    pub(crate) unsafe fn memcpy_2d_async(
        &self,
        dev: Dev,
        dst: u64,
        dst_pitch: usize,
        src: u64,
        src_pitch: usize,
        width: usize,
        height: usize,
        stream: abi::Stream,
    ) -> Result<()> {
        let (dp, sp, w, h) = (dst_pitch as u64, src_pitch as u64, width as u64, height as u64);
        let status = call!(self, memcpy_2d_async(dev, dst, dp, src, sp, w, h, stream));
        self.check("memcpy_2d_async", status)
    }

    /// # Safety
    /// As for `memcpy_async`; both devices are open.
    #[allow(clippy::too_many_arguments)] // the call's own parameters, one for one
    pub(crate) unsafe fn memcpy_peer_async(
        &self,
        dev: Dev,
        dst: u64,
        dst_dev: Dev,
        src: u64,
        src_dev: Dev,
        len: usize,
        stream: abi::Stream,
    ) -> Result<()> {
        let status = call!(self, memcpy_peer_async(dev, dst, dst_dev, src, src_dev, len as u64, stream));
        self.check("memcpy_peer_async", status)
    }

    /// # Safety
    /// The range stays valid until the memset has run; `stream` is live.
    #[inline]
    pub(crate) unsafe fn memset_async(
        &self,
        dev: Dev,
        dst: u64,
        value: u8,
        len: usize,
        stream: abi::Stream,
    ) -> Result<()> {
        let status = call!(self, memset_async(dev, dst, value, len as u64, stream));
        self.check("memset_async", status)
    }

    /// # Safety
    /// `dev` is open.
    pub(crate) unsafe fn module_load(&self, dev: Dev, format: &str, image: &[u8]) -> Result<abi::Module> {
        let format = CString::new(format)
            .map_err(|_| Error::invalid_argument(format!("an image format tag with a NUL: {format:?}")))?;
        let mut module = 0;
        let status = call!(self, module_load(dev, format.as_ptr(), image.as_ptr(), image.len(), &mut module));
        self.check("module_load", status)?;
        self.live_handle("module_load", module)
    }

    /// # Safety
    /// `module` is a live module of `dev`, unloaded once, with no later launch of it.
    pub(crate) unsafe fn module_unload(&self, dev: Dev, module: abi::Module) -> Result<()> {
        let status = call!(self, module_unload(dev, module));
        self.check("module_unload", status)
    }

    /// # Safety
    /// `module` is a live module of `dev`.
    pub(crate) unsafe fn module_function(
        &self,
        dev: Dev,
        module: abi::Module,
        name: *const c_char,
    ) -> Result<abi::Function> {
        let mut function = 0;
        let status = call!(self, module_function(dev, module, name, &mut function));
        self.check("module_function", status)?;
        self.live_handle("module_function", function)
    }

    /// # Safety
    /// `function` is a kernel of a loaded module of `dev`, `stream` is live, and the
    /// addresses among `args` stay valid until the launch has run.
    pub(crate) unsafe fn launch_kernel(
        &self,
        dev: Dev,
        function: abi::Function,
        config: &abi::LaunchConfig,
        stream: abi::Stream,
        args: &[abi::KernelArg],
    ) -> Result<()> {
        let status = call!(self, launch_kernel(dev, function, config, stream, args.as_ptr(), args.len()));
        self.check("launch_kernel", status)
    }
}
