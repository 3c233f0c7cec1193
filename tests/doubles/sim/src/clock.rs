//! Vector clocks, for deciding whether two accesses of one memory range from different
//! streams are ordered.
//!
//! Each stream ticks its own component once per operation it is given. An event record
//! captures the stream's clock; a wait on the event joins it into the waiting stream's
//! clock; the legacy default stream and the blocking streams join each other's clocks as
//! the implicit synchronisation orders them; and whatever the host has seen complete (a
//! synchronize, a successful query) joins a host clock that every later operation starts
//! from. An access made by stream `S` at tick `t` happened before an operation with clock
//! `C` exactly when `C[S] >= t`.
//!
//! A destroyed stream leaves every clock once the host clock covers its last tick (the
//! machine's `forget_retired`); its accesses still recorded count as ordered from then on.
//! Without that, every clock would carry a component for every stream the process ever
//! made, and each operation would cost more the longer a test ran.

use std::collections::BTreeMap;

/// A vector clock: stream id → ticks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VClock(BTreeMap<u64, u64>);

impl VClock {
    /// The component of `stream`.
    pub fn get(&self, stream: u64) -> u64 {
        self.0.get(&stream).copied().unwrap_or(0)
    }

    /// Advances `stream`'s own component; returns the new tick.
    pub fn tick(&mut self, stream: u64) -> u64 {
        let t = self.0.entry(stream).or_insert(0);
        *t += 1;
        *t
    }

    /// Takes the component-wise maximum with `other`.
    pub fn join(&mut self, other: &VClock) {
        for (&s, &t) in &other.0 {
            let mine = self.0.entry(s).or_insert(0);
            *mine = (*mine).max(t);
        }
    }

    /// Whether the access `(stream, tick)` happened before this clock.
    pub fn covers(&self, stream: u64, tick: u64) -> bool {
        self.get(stream) >= tick
    }

    /// Drops the component of a stream that no longer exists and that nothing refers to.
    pub fn forget(&mut self, stream: u64) {
        self.0.remove(&stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_ticks_order_accesses() {
        let (mut a, mut b) = (VClock::default(), VClock::default());
        let write = a.tick(1);
        b.tick(2);
        assert!(!b.covers(1, write), "no ordering yet");
        let recorded = a.clone();
        b.join(&recorded);
        assert!(b.covers(1, write), "a wait on an event recorded after the write orders it");
        let later = a.tick(1);
        assert!(!b.covers(1, later), "work after the record is not ordered");
    }
}
