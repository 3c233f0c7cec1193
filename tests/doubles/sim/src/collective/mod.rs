//! Collectives over the simulated devices, run as NCCL (and RCCL, NCCL's API for AMD) runs
//! them: every rank of a communicator queues its part on its own stream; when a stream
//! reaches its part it waits there until every rank's stream has reached the same
//! collective (the n-th collective of each rank meets the n-th of the others), and the last
//! to arrive does the whole collective over every rank's buffers before all go on.
//!
//! Stricter than NCCL, which hangs or corrupts memory on these: ranks that disagree on the
//! operation, the data type, the count or the root are reported and the collective fails
//! on every rank with no data moved; a rank that does not arrive within the limit is
//! reported and the collective fails on the ranks that came; an aborted communicator
//! releases its waiting parts with an error.

pub mod elements;
pub mod shared;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use elements::{reduce, DType, RedOp};
use shared::{Folder, Shared};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which collective, with what its kind needs every rank to agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Every rank gets the reduction of every rank's `count` elements.
    AllReduce(RedOp),
    /// Every rank gets the root's `count` elements.
    Broadcast {
        /// The rank whose elements are sent.
        root: usize,
    },
    /// The root gets the reduction of every rank's `count` elements.
    Reduce {
        /// The reduction.
        op: RedOp,
        /// The rank that receives it.
        root: usize,
    },
    /// Each rank's `count` elements, gathered in rank order on every rank.
    AllGather,
    /// `count` is what each rank receives: its block of the reduction of every rank's
    /// `ranks * count` elements.
    ReduceScatter(RedOp),
    /// `count` elements to each rank: block `j` of rank `i`'s send buffer lands in block
    /// `i` of rank `j`'s receive buffer.
    AllToAll,
}

/// A collective as one rank states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The collective.
    pub kind: Kind,
    /// The elements' type.
    pub dtype: DType,
    /// Elements, as the NCCL call counts them (see [`Kind`]).
    pub count: usize,
}

impl Spec {
    /// Bytes of the send and the receive buffer on `rank` of `ranks` (the receive buffer of
    /// a reduction's non-root ranks is not used: 0).
    pub fn bytes(&self, rank: usize, ranks: usize) -> (usize, usize) {
        let one = self.count * self.dtype.size();
        match self.kind {
            Kind::AllReduce(_) => (one, one),
            Kind::Broadcast { root } => (if rank == root { one } else { 0 }, one),
            Kind::Reduce { root, .. } => (one, if rank == root { one } else { 0 }),
            Kind::AllGather => (one, one * ranks),
            Kind::ReduceScatter(_) => (one * ranks, one),
            Kind::AllToAll => (one * ranks, one * ranks),
        }
    }
}

/// One rank's part: its statement and its buffers (the double's own view of them).
#[derive(Debug, Clone, Copy)]
pub struct Part {
    /// The collective as this rank states it.
    pub spec: Spec,
    /// Its send buffer.
    pub send: *const u8,
    /// Its receive buffer.
    pub recv: *mut u8,
}

// SAFETY: the pointers are the double's views of memory the machine keeps alive until the
// operation holding the part has completed.
unsafe impl Send for Part {}

/// How a part ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done: every rank's data moved.
    Done,
    /// The collective failed on this rank: why (already reported).
    Failed(String),
}

#[derive(Default)]
struct Meeting {
    parts: Vec<Option<Part>>,
    outcome: Option<Outcome>,
    /// A fault injected into one rank's part: the collective fails on every rank.
    spoiled: Option<String>,
}

#[derive(Default)]
struct State {
    /// Collectives under way, by sequence number.
    meetings: BTreeMap<u64, Meeting>,
    /// Point-to-point messages under way, by (sender, receiver, the sender's n-th message
    /// to that receiver, the receiver's n-th from that sender).
    messages: BTreeMap<(usize, usize, u64), Message>,
    aborted: bool,
}

/// One side of a point-to-point message: its element type and count, and its buffer.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    /// The other rank.
    pub peer: usize,
    /// Which message between the two ranks this is (counted on each side, from 0).
    pub n: u64,
    /// The elements' type.
    pub dtype: DType,
    /// Elements.
    pub count: usize,
    /// The buffer (read by a send, written by a receive).
    pub buf: *mut u8,
}

// SAFETY: as for `Part`: the buffer is kept alive until the operation has completed.
unsafe impl Send for Side {}

#[derive(Default)]
struct Message {
    send: Option<Side>,
    recv: Option<Side>,
    outcome: Option<Outcome>,
}

/// The ranks of one communicator (one clique per unique id).
pub struct Clique {
    /// Unique in the process (an address may be reused once a clique is gone).
    id: u64,
    ranks: usize,
    /// How long a part waits for the other ranks before the collective fails.
    limit: Duration,
    state: Mutex<State>,
    cv: Condvar,
    /// Set once its ranks are known to span processes: they meet through files instead.
    shared: OnceLock<Shared>,
}

impl Clique {
    /// `ranks` ranks, whose parts wait at most `limit` for each other.
    pub fn new(ranks: usize, limit: Duration) -> Arc<Clique> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        Arc::new(Clique { id, ranks, limit, state: Mutex::default(), cv: Condvar::new(), shared: OnceLock::new() })
    }

    /// Its ranks span processes: from now on they meet through files in `folder`.
    pub fn share(&self, folder: Folder) {
        let _ = self.shared.set(Shared::new(folder, self.ranks, self.limit));
    }

    /// Where its ranks meet when they span processes.
    pub fn shared(&self) -> Option<&Shared> {
        self.shared.get()
    }

    /// Rank `rank` of this process is gone (its communicator destroyed).
    pub fn leave(&self, rank: usize) {
        if let Some(shared) = self.shared.get() {
            shared.leave(rank);
        }
    }

    fn aborted(&self) -> bool {
        lock(&self.state).aborted
    }

    /// Its number, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How many ranks it has.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Makes collective `seq` fail on every rank when it meets (a fault injected into one
    /// rank's part: what a network error does to NCCL).
    pub fn spoil(&self, seq: u64, why: String) {
        let ranks = self.ranks;
        let mut st = lock(&self.state);
        let meeting =
            st.meetings.entry(seq).or_insert_with(|| Meeting { parts: vec![None; ranks], ..Meeting::default() });
        meeting.spoiled.get_or_insert(why);
    }

    /// Releases every waiting part with an error, and fails every later one at once.
    pub fn abort(&self) {
        lock(&self.state).aborted = true;
        self.cv.notify_all();
    }

    /// Rank `rank`'s part of collective `seq`, on its stream's thread: returns when the
    /// collective is done (or has failed). `report` reports a misuse (a kind and what
    /// happened).
    pub fn arrive(&self, seq: u64, rank: usize, part: Part, report: &dyn Fn(&str, String)) -> Outcome {
        if let Some(shared) = self.shared.get() {
            let spoiled = lock(&self.state).meetings.remove(&seq).and_then(|m| m.spoiled);
            return shared.arrive(seq, rank, part, spoiled, &|| self.aborted(), report);
        }
        let mut st = lock(&self.state);
        if st.aborted {
            return Outcome::Failed("the communicator was aborted".into());
        }
        let ranks = self.ranks;
        let meeting =
            st.meetings.entry(seq).or_insert_with(|| Meeting { parts: vec![None; ranks], ..Meeting::default() });
        meeting.parts[rank] = Some(part);
        if meeting.parts.iter().all(Option::is_some) {
            let parts: Vec<Part> = meeting.parts.iter().flatten().copied().collect();
            let outcome = match disagreement(&parts) {
                _ if meeting.spoiled.is_some() => Outcome::Failed(meeting.spoiled.clone().unwrap_or_default()),
                Some(why) => {
                    report("collective-mismatch", format!("collective #{seq}: {why}"));
                    Outcome::Failed(why)
                }
                None => {
                    // SAFETY: every part's buffers were checked against live allocations
                    // for its spec's sizes when queued, and stay alive while the parts wait.
                    unsafe { run(&parts) };
                    Outcome::Done
                }
            };
            meeting.outcome = Some(outcome);
            self.cv.notify_all();
        }
        let deadline = Instant::now() + self.limit;
        loop {
            let aborted = st.aborted;
            let meeting = st.meetings.get_mut(&seq).expect("a meeting stays until its last part leaves");
            if let Some(outcome) = meeting.outcome.clone() {
                meeting.parts[rank] = None;
                if meeting.parts.iter().all(Option::is_none) {
                    st.meetings.remove(&seq);
                }
                return outcome;
            }
            if aborted {
                meeting.parts[rank] = None;
                return Outcome::Failed("the communicator was aborted while the collective waited".into());
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<usize> = (0..ranks).filter(|&r| meeting.parts[r].is_none()).collect();
                let why = format!("rank(s) {missing:?} never reached collective #{seq} within {:?}", self.limit);
                report("rank-never-arrived", why.clone());
                meeting.outcome = Some(Outcome::Failed(why.clone()));
                meeting.parts[rank] = None;
                self.cv.notify_all();
                return Outcome::Failed(why);
            }
            st = self.cv.wait_timeout(st, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Rank `rank`'s point-to-point messages (`ncclSend`s and `ncclRecv`s issued together),
    /// on its stream's thread: each message moves when both of its sides have arrived;
    /// returns when all of `rank`'s have (or failed: sides that disagree on type or count,
    /// a peer that does not come within the limit, an abort).
    pub fn exchange(&self, rank: usize, sends: &[Side], recvs: &[Side], report: &dyn Fn(&str, String)) -> Outcome {
        if let Some(shared) = self.shared.get() {
            return shared.exchange(rank, sends, recvs, &|| self.aborted(), report);
        }
        let keys: Vec<(usize, usize, u64)> =
            sends.iter().map(|s| (rank, s.peer, s.n)).chain(recvs.iter().map(|r| (r.peer, rank, r.n))).collect();
        let mut st = lock(&self.state);
        if st.aborted {
            return Outcome::Failed("the communicator was aborted".into());
        }
        let sides = sends.iter().map(|s| (true, s)).chain(recvs.iter().map(|r| (false, r)));
        for (key, (is_send, side)) in keys.iter().zip(sides) {
            let message = st.messages.entry(*key).or_default();
            *(if is_send { &mut message.send } else { &mut message.recv }) = Some(*side);
            if let (Some(send), Some(recv)) = (message.send, message.recv) {
                message.outcome = Some(if (send.dtype, send.count) != (recv.dtype, recv.count) {
                    let why = format!(
                        "message {} from rank {} to rank {}: {} {:?} sent, {} {:?} received",
                        key.2, key.0, key.1, send.count, send.dtype, recv.count, recv.dtype
                    );
                    report("p2p-mismatch", why.clone());
                    Outcome::Failed(why)
                } else {
                    // SAFETY: both buffers were checked against live allocations for
                    // `count` elements when queued and stay alive while their operations
                    // wait; distinct ranks' buffers, or one rank's to itself, copied as
                    // possibly overlapping.
                    unsafe { std::ptr::copy(send.buf.cast_const(), recv.buf, send.count * send.dtype.size()) };
                    Outcome::Done
                });
                self.cv.notify_all();
            }
        }
        let deadline = Instant::now() + self.limit;
        loop {
            let pending: Vec<&(usize, usize, u64)> =
                keys.iter().filter(|k| st.messages.get(k).is_some_and(|m| m.outcome.is_none())).collect();
            if pending.is_empty() || st.aborted {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                let why = format!(
                    "rank {rank}'s message(s) {pending:?} (sender, receiver, n) found no peer within {:?}",
                    self.limit
                );
                report("rank-never-arrived", why.clone());
                for key in &keys {
                    if let Some(m) = st.messages.get_mut(key) {
                        m.outcome.get_or_insert(Outcome::Failed(why.clone()));
                    }
                }
                break;
            }
            st = self.cv.wait_timeout(st, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
        let aborted = st.aborted;
        let mut outcome = Outcome::Done;
        for (i, key) in keys.iter().enumerate() {
            // The second side to leave removes the message.
            let Some(m) = st.messages.get_mut(key) else { continue };
            match m.outcome.clone() {
                Some(Outcome::Failed(why)) => outcome = Outcome::Failed(why),
                None if aborted => {
                    outcome = Outcome::Failed("the communicator was aborted while a message waited".into())
                }
                _ => {}
            }
            if i < sends.len() {
                m.send = None;
            } else {
                m.recv = None;
            }
            if m.outcome.is_some() && m.send.is_none() && m.recv.is_none() {
                st.messages.remove(key);
            }
        }
        outcome
    }
}

/// One rank of a communicator: its clique, rank and device, the sequence number of its
/// next collective, and its asynchronous error (`ncclCommGetAsyncError`).
pub struct Comm {
    /// The ranks it belongs with.
    pub clique: Arc<Clique>,
    /// Its rank.
    pub rank: usize,
    /// Its device.
    pub device: usize,
    next: AtomicU64,
    /// Messages sent to and received from each rank so far.
    sent: Mutex<Vec<u64>>,
    received: Mutex<Vec<u64>>,
    /// Why a collective of it failed, once one has.
    pub error: Arc<Mutex<Option<String>>>,
}

impl Comm {
    /// Rank `rank` of `clique`, on `device`.
    pub fn new(clique: Arc<Clique>, rank: usize, device: usize) -> Comm {
        let ranks = clique.ranks();
        Comm {
            clique,
            rank,
            device,
            next: AtomicU64::new(0),
            sent: Mutex::new(vec![0; ranks]),
            received: Mutex::new(vec![0; ranks]),
            error: Arc::default(),
        }
    }

    /// The number of its next message to (`send`) or from `peer`, taken.
    pub fn take_message(&self, peer: usize, send: bool) -> u64 {
        let mut counts = lock(if send { &self.sent } else { &self.received });
        let n = counts[peer];
        counts[peer] += 1;
        n
    }

    /// The sequence number of its next collective (each call takes one).
    pub fn take_seq(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Its asynchronous error, if a collective of it failed.
    pub fn async_error(&self) -> Option<String> {
        lock(&self.error).clone()
    }
}

/// Why the ranks' statements of one collective disagree, if they do.
fn disagreement(parts: &[Part]) -> Option<String> {
    let first = parts[0].spec;
    let differ = parts.iter().any(|p| p.spec != first);
    differ.then(|| {
        let each: Vec<String> = parts.iter().enumerate().map(|(r, p)| format!("rank {r}: {:?}", p.spec)).collect();
        format!("the ranks disagree on the collective ({})", each.join("; "))
    })
}

/// Does the collective every part agreed on.
///
/// # Safety
/// Each part's buffers hold at least [`Spec::bytes`] for its rank.
unsafe fn run(parts: &[Part]) {
    let ranks = parts.len();
    let spec = parts[0].spec;
    let one = spec.count * spec.dtype.size();
    if one == 0 {
        return;
    }
    // SAFETY: the caller's promise; the inputs are copied out before any output is written,
    // so in-place collectives (a send buffer that is also a receive buffer) read what the
    // ranks sent.
    let send = |r: usize, len: usize| unsafe { std::slice::from_raw_parts(parts[r].send, len) }.to_vec();
    // SAFETY: as above; each receive buffer is written once, after every input was read.
    let write = |r: usize, at: usize, bytes: &[u8]| unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), parts[r].recv.add(at), bytes.len())
    };
    match spec.kind {
        Kind::AllReduce(op) | Kind::Reduce { op, .. } => {
            let inputs: Vec<Vec<u8>> = (0..ranks).map(|r| send(r, one)).collect();
            let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
            let mut out = vec![0u8; one];
            reduce(spec.dtype, op, &refs, &mut out);
            match spec.kind {
                Kind::Reduce { root, .. } => write(root, 0, &out),
                _ => (0..ranks).for_each(|r| write(r, 0, &out)),
            }
        }
        Kind::Broadcast { root } => {
            let data = send(root, one);
            (0..ranks).for_each(|r| write(r, 0, &data));
        }
        Kind::AllGather => {
            let inputs: Vec<Vec<u8>> = (0..ranks).map(|r| send(r, one)).collect();
            for r in 0..ranks {
                for (i, input) in inputs.iter().enumerate() {
                    write(r, i * one, input);
                }
            }
        }
        Kind::ReduceScatter(op) => {
            let inputs: Vec<Vec<u8>> = (0..ranks).map(|r| send(r, one * ranks)).collect();
            let mut out = vec![0u8; one];
            for r in 0..ranks {
                let blocks: Vec<&[u8]> = inputs.iter().map(|i| &i[r * one..(r + 1) * one]).collect();
                reduce(spec.dtype, op, &blocks, &mut out);
                write(r, 0, &out);
            }
        }
        Kind::AllToAll => {
            let inputs: Vec<Vec<u8>> = (0..ranks).map(|r| send(r, one * ranks)).collect();
            for (i, input) in inputs.iter().enumerate() {
                for j in 0..ranks {
                    write(j, i * one, &input[j * one..(j + 1) * one]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
