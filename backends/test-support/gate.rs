//! A gate for the vendor backends' device tests (`backends/*/tests/gpu.rs` include this
//! file): a host callback that holds a stream until the test opens it.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use gpuport_core::Stream;

/// Opens its gate when told, or when dropped: a failing test never leaves the stream (and
/// the driver's callback thread, which later tests share) blocked.
pub struct Opener(Arc<(Mutex<bool>, Condvar)>);

impl Opener {
    pub fn open(&self) {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.0 .1.notify_all();
    }
}

impl Drop for Opener {
    fn drop(&mut self) {
        self.open();
    }
}

/// Blocks `s` until the returned opener opens it (or 30 s pass, so a broken backend fails
/// instead of hanging).
pub fn gate(s: &impl Stream) -> Opener {
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let p = pair.clone();
    s.host_callback(Box::new(move || {
        let (m, cv) = &*p;
        let g = m.lock().unwrap_or_else(|p| p.into_inner());
        let _ = cv.wait_timeout_while(g, Duration::from_secs(30), |open| !*open);
    }))
    .unwrap();
    Opener(pair)
}
