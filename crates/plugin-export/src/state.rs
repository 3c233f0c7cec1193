//! What an exported backend keeps: the backend, its table, and the allocations made
//! through it (the C side names memory by address; the Rust side works on `Buffer`s), and
//! how handles cross as integers.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::{Mutex, RwLock};

use gpuport_core::{Backend, Buffer, BufferDesc, DeviceId, Error, MemoryKind, Result};
use gpuport_plugin_abi as abi;

/// One exported backend, made once per backend type and kept for the life of the process.
pub(crate) struct Exported<B: Backend> {
    /// The backend, or why it did not load (reported by `initialize`).
    pub(crate) backend: Result<B>,
    /// The name the plugin's table gives (the backend's own, or the one asked for).
    pub(crate) name: CString,
    pub(crate) version: CString,
    /// Every allocation made through the table, by base address: the C side names memory
    /// by address, the backend's streams take buffers.
    pub(crate) memory: RwLock<BTreeMap<u64, Buffer>>,
    /// The table, filled once.
    pub(crate) table: std::sync::OnceLock<abi::PluginApi>,
}

/// The exported backends of this process, by type (a test may export several).
static EXPORTED: Mutex<Vec<(TypeId, &'static (dyn Any + Send + Sync))>> = Mutex::new(Vec::new());

/// The exported backend of type `B`, made by `make` the first time.
pub(crate) fn exported<B: Backend>(make: impl FnOnce() -> Exported<B>) -> &'static Exported<B> {
    let mut all = EXPORTED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(found) = all.iter().find(|(t, _)| *t == TypeId::of::<B>()).and_then(|(_, e)| e.downcast_ref()) {
        return found;
    }
    let made: &'static Exported<B> = Box::leak(Box::new(make()));
    all.push((TypeId::of::<B>(), made));
    made
}

/// The exported backend of type `B`, once made (every call but the entry comes after).
pub(crate) fn existing<B: Backend>() -> Result<&'static Exported<B>> {
    let all = EXPORTED.lock().unwrap_or_else(|p| p.into_inner());
    all.iter()
        .find(|(t, _)| *t == TypeId::of::<B>())
        .and_then(|(_, e)| e.downcast_ref())
        .ok_or_else(|| Error::invalid_argument("the plugin's entry point was not called first"))
}

impl<B: Backend> Exported<B> {
    /// The loaded backend.
    pub(crate) fn backend(&self) -> Result<&B> {
        self.backend.as_ref().map_err(Clone::clone)
    }

    /// Keeps an allocation, known by its address from now on.
    pub(crate) fn keep(&self, buffer: Buffer) -> u64 {
        let addr = buffer.addr();
        self.memory.write().unwrap_or_else(|p| p.into_inner()).insert(addr, buffer);
        addr
    }

    /// Takes back the allocation at `addr` (its base), to free it.
    pub(crate) fn take(&self, addr: u64) -> Result<Buffer> {
        self.memory
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&addr)
            .ok_or_else(|| Error::invalid_argument(format!("{addr:#x} is not an allocation of this plugin")))
    }

    /// The buffer and offset holding `len` bytes at `addr`: an allocation made through the
    /// table, else the caller's host memory (pageable memory, as the header allows for
    /// copies), which the caller keeps valid until the work has run.
    pub(crate) fn resolve(&self, addr: u64, len: usize) -> Result<(Buffer, usize)> {
        let memory = self.memory.read().unwrap_or_else(|p| p.into_inner());
        locate(&memory, addr, len).map(|found| {
            let (buffer, offset) = found.parts();
            (buffer.clone(), offset)
        })
    }

    /// Runs `f` with the buffers and offsets of two ranges ([`Exported::resolve`]'s rules),
    /// borrowed under one read of the allocation map: a copy takes both without cloning
    /// either (the stream keeps what it queues).
    pub(crate) fn with_pair<R>(
        &self,
        (a, a_len): (u64, usize),
        (b, b_len): (u64, usize),
        f: impl FnOnce((&Buffer, usize), (&Buffer, usize)) -> Result<R>,
    ) -> Result<R> {
        let memory = self.memory.read().unwrap_or_else(|p| p.into_inner());
        let (a, b) = (locate(&memory, a, a_len)?, locate(&memory, b, b_len)?);
        f(a.parts(), b.parts())
    }
}

/// A range found by [`locate`].
pub(crate) enum Located<'m> {
    /// Inside an allocation made through the table, at this offset.
    Ours(&'m Buffer, usize),
    /// The caller's host memory, borrowed.
    Host(Buffer),
}

impl Located<'_> {
    pub(crate) fn parts(&self) -> (&Buffer, usize) {
        match self {
            Located::Ours(buffer, offset) => (buffer, *offset),
            Located::Host(buffer) => (buffer, 0),
        }
    }
}

/// Where `len` bytes at `addr` are: in one of `memory`'s allocations (a range running past
/// its end is an error), else the caller's host memory.
fn locate(memory: &BTreeMap<u64, Buffer>, addr: u64, len: usize) -> Result<Located<'_>> {
    if let Some((base, buffer)) = memory.range(..=addr).next_back() {
        let offset = (addr - base) as usize;
        if offset.checked_add(len).is_some_and(|end| end <= buffer.len()) {
            return Ok(Located::Ours(buffer, offset));
        }
        if offset < buffer.len() {
            return Err(Error::invalid_argument(format!(
                "{len} bytes at {addr:#x} run past the end of their {}-byte allocation",
                buffer.len()
            )));
        }
    }
    if addr == 0 {
        return Err(Error::invalid_argument("the null address"));
    }
    let desc = BufferDesc { addr, len, device: DeviceId::HOST, memory: MemoryKind::Host, host_accessible: true };
    // SAFETY: the header's contract: an address that is none of this plugin's allocations
    // is the caller's host memory, valid for `len` bytes until the work using it has run.
    Ok(Located::Host(unsafe { Buffer::from_borrowed(desc, None) }?))
}

/// A handle's integer as the object it boxes: `Box<T>` leaked by [`handle_of`].
///
/// # Safety
/// `handle` is 0 or came from [`handle_of`] for a `T` not yet dropped by [`drop_handle`].
#[inline]
pub(crate) unsafe fn object<'a, T>(handle: usize, what: &'static str) -> Result<&'a T> {
    let ptr = std::ptr::with_exposed_provenance::<T>(handle);
    // SAFETY: per the contract, a live leaked box, or null.
    match unsafe { ptr.as_ref() } {
        Some(object) => Ok(object),
        None => Err(null_handle(what)),
    }
}

/// The error for a null handle, kept out of line: every call of the table checks one.
#[cold]
#[inline(never)]
pub(crate) fn null_handle(what: &str) -> Error {
    Error::invalid_handle(format!("a null {what} handle"))
}

/// A new handle for `value`: its box, leaked, as an integer.
pub(crate) fn handle_of<T>(value: T) -> usize {
    handle_of_box(Box::new(value))
}

/// A new handle for an object already boxed (one that points into itself stays put).
pub(crate) fn handle_of_box<T>(boxed: Box<T>) -> usize {
    Box::into_raw(boxed).expose_provenance()
}

/// Drops the object behind a handle.
///
/// # Safety
/// As for [`object`], and the handle is not used afterwards.
pub(crate) unsafe fn drop_handle<T>(handle: usize, what: &str) -> Result<()> {
    if handle == 0 {
        return Err(Error::invalid_handle(format!("a null {what} handle")));
    }
    // SAFETY: per the contract, a live box leaked by `handle_of`, dropped once.
    drop(unsafe { Box::from_raw(std::ptr::with_exposed_provenance_mut::<T>(handle)) });
    Ok(())
}
