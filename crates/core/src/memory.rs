//! Memory handles shared by every backend: [`Buffer`], [`MemoryKind`] and
//! [`PointerAttributes`].
//!
//! A buffer is type-erased on purpose: buffers cross backends (the copy engine stages a
//! CUDA buffer through another backend's pinned memory; DLPack and CUDA Array Interface
//! imports wrap foreign pointers), so one handle type serves them all. The cost is one
//! `Arc` per allocation, never per operation. Queued work clones the `Arc`, which is how
//! a stream keeps the buffers it touches alive.

use std::any::Any;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::flags::Ownership;
use crate::id::DeviceId;

/// What kind of memory an address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Ordinary (pageable) host memory; for the host backend, its device memory.
    Host,
    /// Device memory of a GPU or other accelerator.
    Device,
    /// Page-locked host memory registered with a device runtime.
    PinnedHost,
    /// Managed (unified) memory, migrated on demand between host and device.
    Managed,
    /// An address no backend knows about.
    Unregistered,
}

/// What a backend knows about an address (`cuPointerGetAttributes`,
/// `hipPointerGetAttributes`, the host backend's allocation registry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerAttributes {
    /// The device that owns the memory, when there is one.
    pub device: Option<DeviceId>,
    /// The kind of memory.
    pub memory: MemoryKind,
    /// The host may dereference the address.
    pub host_accessible: bool,
    /// The device may dereference the address.
    pub device_accessible: bool,
    /// Managed (unified) memory.
    pub managed: bool,
    /// Start and length of the allocation holding the address, when known.
    pub allocation: Option<(u64, usize)>,
}

impl PointerAttributes {
    /// The answer for an address nobody registered.
    pub fn unregistered() -> Self {
        PointerAttributes {
            device: None,
            memory: MemoryKind::Unregistered,
            host_accessible: false,
            device_accessible: false,
            managed: false,
            allocation: None,
        }
    }
}

/// Releases an owned allocation. Implemented by each backend; called exactly once, when
/// the last clone of the [`Buffer`] is dropped or by [`Buffer::free`].
pub trait Release: Send + Sync + 'static {
    /// Frees `len` bytes at `addr`. Errors are returned to [`Buffer::free`] and logged
    /// when the buffer is simply dropped.
    fn release(&mut self, addr: u64, len: usize) -> Result<()>;
}

/// Describes a buffer to construct: where it lives and what it is.
#[derive(Debug, Clone, Copy)]
pub struct BufferDesc {
    /// Base address (device address or host pointer). May be 0 only when `len` is 0.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
    /// Owning device.
    pub device: DeviceId,
    /// Kind of memory.
    pub memory: MemoryKind,
    /// The host may read and write the bytes through `addr`.
    pub host_accessible: bool,
}

/// What keeps borrowed memory alive, held inline at the end of the buffer's own
/// allocation (an import allocates the buffer, not the buffer and a box for its owner).
trait KeepAlive: Send + Sync {
    /// True while the owner is held.
    fn is_held(&self) -> bool;
    /// Drops the owner now.
    fn drop_now(&mut self);
    /// Moves the owner into a box, to be dropped on another thread.
    fn take_boxed(&mut self) -> Option<Box<dyn Any + Send>>;
}

impl<T: Send + Sync + 'static> KeepAlive for Option<T> {
    fn is_held(&self) -> bool {
        self.is_some()
    }
    fn drop_now(&mut self) {
        drop(self.take());
    }
    fn take_boxed(&mut self) -> Option<Box<dyn Any + Send>> {
        self.take().map(|owner| Box::new(owner) as Box<dyn Any + Send>)
    }
}

/// A pointer to a host buffer's first byte that carries the provenance of the allocation
/// it came from, so that every host pointer into the buffer is derived from it rather than
/// made from an integer (which tools that track provenance, Miri among them, cannot
/// follow). Null when gpuport knows the memory only by its address.
#[derive(Clone, Copy)]
struct HostBase(*mut u8);

// SAFETY: the pointer is only kept to derive others from; accesses through them are
// ordered by the buffer's users, exactly as for accesses through its address.
unsafe impl Send for HostBase {}
// SAFETY: as above.
unsafe impl Sync for HostBase {}

impl HostBase {
    /// `base`, once it is checked to be where `desc` says the memory starts and `desc`
    /// says the host may reach it.
    fn checked(base: NonNull<u8>, desc: &BufferDesc) -> Result<HostBase> {
        if base.as_ptr().addr() as u64 != desc.addr || !desc.host_accessible {
            return Err(Error::invalid_argument(format!(
                "a host buffer at {:p} described as {:#x} ({})",
                base,
                desc.addr,
                if desc.host_accessible { "host-accessible" } else { "not host-accessible" }
            )));
        }
        Ok(HostBase(base.as_ptr()))
    }
}

/// One allocation: its description, how it is freed, and (last, of any size) what keeps
/// borrowed memory alive.
struct Inner<K: ?Sized + KeepAlive = dyn KeepAlive> {
    desc: BufferDesc,
    ownership: Ownership,
    release: Option<Box<dyn Release>>,
    host_base: HostBase,
    keep_alive: K,
}

fn release_now(release: Option<Box<dyn Release>>, desc: BufferDesc) {
    if let Some(mut release) = release {
        if let Err(err) = release.release(desc.addr, desc.len) {
            log::warn!("freeing {} bytes at {:#x} on {}: {err}", desc.len, desc.addr, desc.device);
        }
    }
}

impl<K: ?Sized + KeepAlive> Drop for Inner<K> {
    /// Frees the memory (or drops the foreign owner) — on the release thread when the last
    /// clone is dropped on a stream worker or driver callback thread ([`crate::release`]).
    fn drop(&mut self) {
        let release = self.release.take();
        if release.is_none() && !self.keep_alive.is_held() {
            return;
        }
        let desc = self.desc;
        if crate::release::on_restricted_thread() {
            // The owner leaves the buffer's allocation (which is freed on return) in a box
            // of its own: only on this rare path.
            let keep_alive = self.keep_alive.take_boxed();
            crate::release::defer(Box::new(move || {
                release_now(release, desc);
                drop(keep_alive);
            }));
        } else {
            release_now(release, desc);
            self.keep_alive.drop_now();
        }
    }
}

/// A range of memory on one device: an owned allocation or a borrowed foreign one.
/// Cloning shares it; an owned buffer is released when the last clone drops.
#[derive(Clone)]
pub struct Buffer {
    inner: Arc<Inner>,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.inner.desc;
        f.debug_struct("Buffer")
            .field("addr", &format_args!("{:#x}", d.addr))
            .field("len", &d.len)
            .field("device", &d.device)
            .field("memory", &d.memory)
            .field("ownership", &self.inner.ownership)
            .finish()
    }
}

impl Buffer {
    fn check_desc(desc: &BufferDesc) -> Result<()> {
        if desc.addr == 0 && desc.len != 0 {
            return Err(Error::invalid_argument("a buffer of non-zero length at address 0"));
        }
        if desc.addr.checked_add(desc.len as u64).is_none() {
            return Err(Error::invalid_argument("buffer range wraps around the address space"));
        }
        Ok(())
    }

    /// An owned buffer that `release` frees.
    ///
    /// # Safety
    /// `desc` must describe memory that stays valid until `release` runs, and
    /// `host_accessible` may be true only if `len` bytes at `addr` are readable and
    /// writable by the host for that long.
    pub unsafe fn from_owned(desc: BufferDesc, release: Box<dyn Release>) -> Result<Self> {
        Self::owned(desc, release, HostBase(std::ptr::null_mut()))
    }

    /// [`Buffer::from_owned`] for host-accessible memory reached through `base`, a pointer
    /// to its first byte carrying the allocation's provenance: [`Buffer::host_ptr`] derives
    /// every pointer from it. `desc.addr` must be `base`'s address and `desc` must say the
    /// memory is host-accessible.
    ///
    /// # Safety
    /// As for [`Buffer::from_owned`]; `base` is valid for `desc.len` bytes of reads and
    /// writes until `release` runs.
    pub unsafe fn from_owned_host(base: NonNull<u8>, desc: BufferDesc, release: Box<dyn Release>) -> Result<Self> {
        Self::owned(desc, release, HostBase::checked(base, &desc)?)
    }

    fn owned(desc: BufferDesc, release: Box<dyn Release>, host_base: HostBase) -> Result<Self> {
        Self::check_desc(&desc)?;
        let inner: Arc<Inner> = Arc::new(Inner {
            desc,
            ownership: Ownership::Owned,
            release: Some(release),
            host_base,
            keep_alive: None::<()>,
        });
        Ok(Buffer { inner })
    }

    /// A borrowed buffer over memory someone else owns. `keep_alive` (for example a
    /// DLPack managed tensor whose deleter runs on drop) is dropped with the last clone —
    /// never on a stream worker or driver callback thread (see [`crate::release`]).
    ///
    /// # Safety
    /// `desc` must describe memory that stays valid while the buffer (or `keep_alive`)
    /// lives, with the same rule for `host_accessible` as [`Buffer::from_owned`].
    pub unsafe fn from_borrowed(desc: BufferDesc, keep_alive: Option<Box<dyn Any + Send + Sync>>) -> Result<Self> {
        // SAFETY: forwarded from the caller.
        unsafe { Self::from_borrowed_owned_by(desc, keep_alive) }
    }

    /// [`Buffer::from_borrowed`] with the owner held in the buffer's own allocation (no box
    /// of its own): what an interchange import uses, one allocation per imported buffer.
    ///
    /// # Safety
    /// As for [`Buffer::from_borrowed`], with `owner` keeping the memory alive.
    pub unsafe fn from_borrowed_owned_by<K: Send + Sync + 'static>(desc: BufferDesc, owner: K) -> Result<Self> {
        Self::borrowed(desc, owner, HostBase(std::ptr::null_mut()))
    }

    /// [`Buffer::from_borrowed_owned_by`] for host-accessible memory the producer handed
    /// over as a pointer (DLPack's `data`, a buffer-protocol view's `buf`) rather than as an
    /// address: [`Buffer::host_ptr`] derives every pointer from `base`, keeping the
    /// provenance it came with. `desc.addr` must be `base`'s address and `desc` must say
    /// the memory is host-accessible.
    ///
    /// # Safety
    /// As for [`Buffer::from_borrowed`]; `base` is valid for `desc.len` bytes while
    /// `owner` lives.
    pub unsafe fn from_borrowed_host_owned_by<K: Send + Sync + 'static>(
        base: NonNull<u8>,
        desc: BufferDesc,
        owner: K,
    ) -> Result<Self> {
        let host_base = HostBase::checked(base, &desc)?;
        Self::borrowed(desc, owner, host_base)
    }

    fn borrowed<K: Send + Sync + 'static>(desc: BufferDesc, owner: K, host_base: HostBase) -> Result<Self> {
        Self::check_desc(&desc)?;
        let inner: Arc<Inner> =
            Arc::new(Inner { desc, ownership: Ownership::Borrowed, release: None, host_base, keep_alive: Some(owner) });
        Ok(Buffer { inner })
    }

    /// Base address.
    #[inline]
    pub fn addr(&self) -> u64 {
        self.inner.desc.addr
    }
    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.desc.len
    }
    /// True for a zero-length buffer.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.inner.desc.len == 0
    }
    /// Owning device.
    #[inline]
    pub fn device(&self) -> DeviceId {
        self.inner.desc.device
    }
    /// Kind of memory.
    #[inline]
    pub fn memory(&self) -> MemoryKind {
        self.inner.desc.memory
    }
    /// Whether this handle frees the memory.
    #[inline]
    pub fn ownership(&self) -> Ownership {
        self.inner.ownership
    }
    /// The full description.
    #[inline]
    pub fn desc(&self) -> BufferDesc {
        self.inner.desc
    }
    /// Whether the host may read and write these bytes directly.
    #[inline]
    pub fn is_host_accessible(&self) -> bool {
        self.inner.desc.host_accessible
    }
    /// True when both handles are the same allocation.
    #[inline]
    pub fn same_allocation(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
    /// Number of live handles to this allocation (clones held by views and queued work
    /// included).
    pub fn handle_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The address of `offset..offset + len` within the buffer, or an error when the range
    /// does not fit.
    pub fn range_addr(&self, offset: usize, len: usize) -> Result<u64> {
        let end = offset.checked_add(len).ok_or_else(|| Error::invalid_argument("offset + length overflows"))?;
        if end > self.len() {
            return Err(Error::invalid_argument(format!(
                "range {offset}..{end} is outside a {}-byte buffer",
                self.len()
            )));
        }
        Ok(self.addr() + offset as u64)
    }

    /// The host pointer for `offset..offset+len`, when the memory is host-accessible and
    /// the range fits. Dereferencing it still needs the caller to order host access after
    /// any queued work that uses the buffer.
    ///
    /// Memory gpuport allocated on the host ([`Buffer::from_owned_host`]) gives pointers
    /// derived from the allocation's own, with its provenance. Memory known only by its
    /// address — a foreign producer's (DLPack, the CUDA Array Interface), a vendor
    /// runtime's pinned or managed memory — gives a pointer with the provenance that
    /// address was exposed with: it came from outside Rust's view, so tools that track
    /// provenance cannot check accesses through it.
    pub fn host_ptr(&self, offset: usize, len: usize) -> Result<*mut u8> {
        if !self.is_host_accessible() {
            return Err(Error::invalid_argument(format!(
                "{:?} memory on {} is not host-accessible",
                self.memory(),
                self.device()
            )));
        }
        let addr = self.range_addr(offset, len)?;
        let base = self.inner.host_base.0;
        Ok(if base.is_null() {
            std::ptr::with_exposed_provenance_mut(addr as usize)
        } else {
            // In bounds: `range_addr` checked `offset + len` against the length.
            base.wrapping_add(offset)
        })
    }

    /// Frees the allocation now and returns the backend's error, if any. Fails without
    /// freeing when other handles (views, queued work) still share the buffer; those
    /// handles keep it alive and the last one frees it.
    pub fn free(mut self) -> Result<()> {
        let desc = self.inner.desc;
        match Arc::get_mut(&mut self.inner) {
            // The last handle: free here, then drop the rest (an owner) as a drop would.
            Some(inner) => match inner.release.take() {
                Some(mut release) => release.release(desc.addr, desc.len),
                None => Ok(()),
            },
            None => Err(Error::invalid_argument(format!(
                "buffer at {:#x} is still referenced by {} other handle(s) (views or queued work)",
                desc.addr,
                Arc::strong_count(&self.inner) - 1
            ))),
        }
    }
}

/// Checks a copy of `len` bytes from `src[src_offset..]` to `dst[dst_offset..]`: both
/// ranges inside their buffers, and not overlapping (vendor copy engines do not promise
/// memmove semantics). Returns the source and destination addresses.
pub fn check_copy(src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<(u64, u64)> {
    let s = src.range_addr(src_offset, len)?;
    let d = dst.range_addr(dst_offset, len)?;
    let len64 = len as u64;
    if len > 0 && src.same_allocation(dst) && s < d + len64 && d < s + len64 {
        return Err(Error::invalid_argument(format!(
            "copy source {src_offset}..{} and destination {dst_offset}..{} overlap in one buffer",
            src_offset + len,
            dst_offset + len
        )));
    }
    Ok((s, d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(Arc<AtomicUsize>);
    impl Release for Counting {
        fn release(&mut self, _addr: u64, _len: usize) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn desc(addr: u64, len: usize) -> BufferDesc {
        BufferDesc { addr, len, device: DeviceId::HOST, memory: MemoryKind::Device, host_accessible: false }
    }

    #[test]
    fn released_once_by_last_clone() {
        let n = Arc::new(AtomicUsize::new(0));
        // SAFETY: the memory is never dereferenced; not host-accessible.
        let b = unsafe { Buffer::from_owned(desc(0x1000, 64), Box::new(Counting(n.clone()))) }.unwrap();
        let c = b.clone();
        assert!(c.clone().free().is_err(), "shared buffers cannot be freed explicitly");
        drop(b);
        assert_eq!(n.load(Ordering::SeqCst), 0);
        c.free().unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn last_drop_on_a_restricted_thread_is_deferred() {
        struct Owner(Arc<AtomicUsize>, std::sync::mpsc::Sender<std::thread::ThreadId>);
        impl Drop for Owner {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
                let _ = self.1.send(std::thread::current().id());
            }
        }
        let n = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        // SAFETY: never dereferenced.
        let b = unsafe { Buffer::from_borrowed(desc(0x1000, 8), Some(Box::new(Owner(n.clone(), tx)))) }.unwrap();
        let worker = std::thread::spawn(move || crate::release::restricted(|| drop(b)));
        let worker_id = worker.thread().id();
        worker.join().unwrap();
        crate::release::flush();
        assert_eq!(n.load(Ordering::SeqCst), 1, "the owner was released once");
        assert_ne!(rx.recv().unwrap(), worker_id, "not on the restricted thread");
    }

    #[test]
    fn overlapping_copies_are_refused() {
        // SAFETY: never dereferenced.
        let b = unsafe { Buffer::from_borrowed(desc(0x1000, 64), None) }.unwrap();
        // SAFETY: as above.
        let c = unsafe { Buffer::from_borrowed(desc(0x1000, 64), None) }.unwrap();
        assert!(check_copy(&b, 0, &b, 8, 16).is_err());
        assert!(check_copy(&b, 0, &b, 16, 16).is_ok());
        assert!(check_copy(&b, 0, &c, 0, 16).is_ok(), "distinct handles are distinct allocations");
        assert!(check_copy(&b, 60, &c, 0, 8).is_err());
        assert!(check_copy(&b, 0, &b, 0, 0).is_ok());
    }

    #[test]
    fn host_buffers_hand_out_pointers_derived_from_their_own() {
        const LAYOUT: std::alloc::Layout = match std::alloc::Layout::from_size_align(64, 8) {
            Ok(l) => l,
            Err(_) => panic!("a valid layout"),
        };
        /// Frees the block when released, as a host allocator's release does.
        struct Owns(NonNull<u8>);
        // SAFETY: the block is plain memory owned by this value.
        unsafe impl Send for Owns {}
        // SAFETY: as above; `&Owns` gives no access to it.
        unsafe impl Sync for Owns {}
        impl Release for Owns {
            fn release(&mut self, _addr: u64, _len: usize) -> Result<()> {
                // SAFETY: allocated below with LAYOUT, released once.
                unsafe { std::alloc::dealloc(self.0.as_ptr(), LAYOUT) };
                Ok(())
            }
        }
        // SAFETY: LAYOUT has a non-zero size.
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(LAYOUT) }).expect("64 bytes");
        let host = |addr: u64| BufferDesc { host_accessible: true, ..desc(addr, 64) };
        // The address must be the pointer's, and the memory host-accessible.
        let wrong = base.as_ptr().addr() as u64 + 1;
        // SAFETY: refused before use.
        assert!(unsafe { Buffer::from_owned_host(base, host(wrong), Box::new(Counting(Default::default()))) }.is_err());
        // SAFETY: as above.
        assert!(unsafe {
            Buffer::from_owned_host(base, desc(base.as_ptr().addr() as u64, 64), Box::new(Counting(Default::default())))
        }
        .is_err());
        let addr = base.as_ptr().addr() as u64;
        // SAFETY: 64 readable and writable bytes at `base`, freed by the release.
        let b = unsafe { Buffer::from_owned_host(base, host(addr), Box::new(Owns(base))) }.unwrap();
        let p = b.host_ptr(8, 8).unwrap();
        assert_eq!(p.addr() as u64, addr + 8);
        // SAFETY: in bounds of the live block; derived from its pointer (which Miri checks
        // with -Zmiri-strict-provenance).
        unsafe { p.write(9) };
        // SAFETY: as above.
        assert_eq!(unsafe { b.host_ptr(0, 64).unwrap().add(8).read() }, 9);
    }

    #[test]
    fn ranges_are_checked() {
        // SAFETY: never dereferenced.
        let b = unsafe { Buffer::from_borrowed(desc(0x1000, 64), None) }.unwrap();
        assert_eq!(b.range_addr(8, 56).unwrap(), 0x1008);
        assert!(b.range_addr(8, 57).is_err());
        assert!(b.range_addr(usize::MAX, 2).is_err());
        assert!(b.host_ptr(0, 1).is_err(), "not host-accessible");
        // SAFETY: invalid descriptions are rejected before use.
        assert!(unsafe { Buffer::from_borrowed(desc(0, 8), None) }.is_err());
        // SAFETY: as above.
        assert!(unsafe { Buffer::from_borrowed(desc(u64::MAX, 8), None) }.is_err());
    }
}
