//! Raw handles for host streams and events: process-wide numbers that map back to live
//! objects, so a foreign handle can be wrapped and a stale one is refused instead of
//! trusted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// First raw handle value. CUDA and HIP give 0, 1 and 2 special meanings in the
/// interchange protocols; host handles stay clear of small numbers.
const FIRST_HANDLE: usize = 0x1000;

/// Maps raw handle numbers to live objects.
pub struct HandleRegistry<T> {
    next: AtomicUsize,
    live: Mutex<Option<HashMap<usize, Weak<T>>>>,
}

impl<T> HandleRegistry<T> {
    /// An empty registry.
    pub const fn new() -> Self {
        HandleRegistry { next: AtomicUsize::new(FIRST_HANDLE), live: Mutex::new(None) }
    }

    /// Takes a fresh raw handle number, to name an object before it is registered.
    pub fn reserve(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers `obj` under a reserved number.
    pub fn register(&self, raw: usize, obj: &Arc<T>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.get_or_insert_with(HashMap::new).insert(raw, Arc::downgrade(obj));
    }

    /// Registers `obj` and returns its raw handle.
    pub fn insert(&self, obj: &Arc<T>) -> usize {
        let raw = self.reserve();
        self.register(raw, obj);
        raw
    }

    /// The live object behind `raw`.
    pub fn get(&self, raw: usize) -> Option<Arc<T>> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.as_ref()?.get(&raw)?.upgrade()
    }

    /// Forgets `raw`.
    pub fn remove(&self, raw: usize) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(map) = live.as_mut() {
            map.remove(&raw);
        }
    }
}

impl<T> Default for HandleRegistry<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Held by every owned clone of a handle; when the last one drops the object is destroyed
/// (marked, and its raw handle forgotten). Borrowed clones keep the memory alive but not
/// the object's validity.
pub struct OwnerGuard<T: 'static> {
    registry: &'static HandleRegistry<T>,
    raw: usize,
    obj: Arc<T>,
    destroy: fn(&T),
}

impl<T> OwnerGuard<T> {
    /// A guard that calls `destroy` and unregisters `raw` on drop.
    pub fn new(registry: &'static HandleRegistry<T>, raw: usize, obj: Arc<T>, destroy: fn(&T)) -> Self {
        OwnerGuard { registry, raw, obj, destroy }
    }
}

impl<T> Drop for OwnerGuard<T> {
    fn drop(&mut self) {
        self.registry.remove(self.raw);
        (self.destroy)(&self.obj);
    }
}
