//! A stream created on first use and kept for the device's life: the legacy default
//! stream of a software device (host, ext, a port).

use std::sync::OnceLock;

use gpuport_core::Result;

/// Holds one stream, created by the first [`LazyStream::get_or_create`].
pub struct LazyStream<S>(OnceLock<S>);

impl<S> LazyStream<S> {
    /// Empty until first use.
    pub const fn new() -> Self {
        LazyStream(OnceLock::new())
    }
}

impl<S> Default for LazyStream<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Clone> LazyStream<S> {
    /// The stream, created by `create` on first use. Two threads racing here may both
    /// create one; the loser's is dropped unused and both get the same stream.
    pub fn get_or_create(&self, create: impl FnOnce() -> Result<S>) -> Result<S> {
        if let Some(stream) = self.0.get() {
            return Ok(stream.clone());
        }
        let created = create()?;
        Ok(self.0.get_or_init(|| created).clone())
    }
}
