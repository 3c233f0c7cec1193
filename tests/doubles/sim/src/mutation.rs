//! Driver mutants: one deliberate flaw in the simulated driver, chosen with
//! `GPUPORT_DOUBLE_MUTANT=NAME`. gpuport's mutation check runs the conformance suite on the
//! CUDA and ROCm backends over a mutated double and expects the suite to fail, in the case
//! that checks the broken rule: a device that loses a wait, answers "done" too early or
//! measures nothing must be told apart from a working one whichever backend drives it.
//!
//! Each flaw mirrors one of the mutation check's broken software ports, moved to the level
//! a vendor port delegates to: what the suite sees through a correct port over a broken
//! driver is what it would see through a broken port over a correct one. The port flaws
//! that live in gpuport's own code (a swallowed callback panic, a foreign module accepted,
//! a borrowed stream destroyed) have no driver counterpart.

/// One flaw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// `cuCtxSynchronize` / `hipDeviceSynchronize` return at once, without waiting for the
    /// context's streams.
    SyncAtOnce,
    /// `cuStreamWaitEvent` / `hipStreamWaitEvent` queue nothing: the stream does not wait.
    NoopWait,
    /// `cuStreamQuery` / `cuEventQuery` (and HIP's) always answer "complete".
    QueryAlwaysDone,
    /// Copies read from the start of the source's allocation, whatever offset into it the
    /// source address has.
    CopyIgnoresOffset,
    /// A stream runs its queued work newest first, so out of order.
    OutOfOrder,
    /// `cuEventElapsedTime` / `hipEventElapsedTime` answer 1 ms without measuring.
    FakeElapsed,
    /// Pointer attributes know no address (every pointer is unregistered host memory).
    UnknownPointers,
    /// The legacy default stream and blocking streams do not wait for each other's work.
    NoImplicitSync,
    /// Stream creation ignores the non-blocking flag: every created stream is blocking.
    AllStreamsBlocking,
}

/// Every flaw with its name (as `GPUPORT_DOUBLE_MUTANT` takes it) and what it breaks.
pub const MUTATIONS: &[(Mutation, &str, &str)] = &[
    (Mutation::SyncAtOnce, "sync-at-once", "the context synchronize returns at once without waiting"),
    (Mutation::NoopWait, "noop-wait", "a stream's wait for an event does nothing"),
    (Mutation::QueryAlwaysDone, "query-always-done", "stream and event queries always say complete"),
    (Mutation::CopyIgnoresOffset, "copy-ignores-offset", "copies read from the start of the source allocation"),
    (Mutation::OutOfOrder, "out-of-order", "a stream runs its queued work newest first"),
    (Mutation::FakeElapsed, "fake-elapsed", "elapsed time between events is 1 ms, unmeasured"),
    (Mutation::UnknownPointers, "unknown-pointers", "pointer attributes know no address"),
    (Mutation::NoImplicitSync, "no-implicit-sync", "the legacy stream and blocking streams do not wait for each other"),
    (
        Mutation::AllStreamsBlocking,
        "all-streams-blocking",
        "the non-blocking flag is ignored: every stream is blocking",
    ),
];

impl Mutation {
    /// The flaw named `name`.
    pub fn parse(name: &str) -> Option<Mutation> {
        MUTATIONS.iter().find(|(_, n, _)| *n == name.trim()).map(|(m, _, _)| *m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_to_its_flaw() {
        for (m, name, _) in MUTATIONS {
            assert_eq!(Mutation::parse(name), Some(*m));
        }
        assert_eq!(Mutation::parse("no-such-flaw"), None);
    }
}
