//! What the kit's integration tests share.

use std::time::{Duration, Instant};

/// Waits (up to ten seconds) for `done`: a drainer may keep its queue a moment after its
/// work is done, or after the queue's last handle is gone.
pub fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}
