//! NCCL's C API — which RCCL exports too — over the simulated machine, for ranks that are
//! devices of this process, and ranks in other processes (their doubles meet through
//! shared memory: [`crate::collective::shared`]). Each driver double exports these functions beside the driver's
//! (`nccl_exports!`), and the build gives the same file a second name (`libnccl.so.2` beside
//! the CUDA double, `librccl.so.1` beside the HIP one): the dynamic loader opens a file it
//! already holds once, so the engine and the driver share one machine, as NCCL shares the
//! process's CUDA driver.
//!
//! What NCCL does, the double does — communicators from a unique id (`ncclCommInitRank`,
//! each rank from its own thread or all from one inside a group) or for several devices at
//! once (`ncclCommInitAll`), collectives queued on the caller's stream as work of the
//! communicator's device ([`crate::collective`]), abort and asynchronous errors — and it
//! is stricter where NCCL would hang or corrupt memory: ranks that disagree on a
//! collective, a rank that never arrives, one thread driving several ranks of a
//! communicator outside a group (a deadlock in NCCL), buffers on another device, and
//! communicators alive at exit are reported.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::collective::elements::{DType, RedOp};
use crate::collective::shared::Folder;
use crate::collective::{Clique, Comm, Kind, Spec};
use crate::config::FAULTS_ENV;
use crate::faults::{Fault, Faults, StatusTable};
use crate::report::{violation, violation_outside_call};
use crate::{current_context, set_current_context, Call, Machine, StreamRef};

/// `NCCL_VERSION(2, 32, 3)`: the version the double reports.
pub const VERSION_CODE: c_int = 23203;

/// `ncclResult_t`.
pub mod status {
    use std::ffi::c_int;
    /// `ncclSuccess`.
    pub const SUCCESS: c_int = 0;
    /// `ncclUnhandledCudaError`: the driver failed the call.
    pub const UNHANDLED_CUDA_ERROR: c_int = 1;
    /// `ncclSystemError`.
    pub const SYSTEM_ERROR: c_int = 2;
    /// `ncclInternalError`: a bug in the double.
    pub const INTERNAL_ERROR: c_int = 3;
    /// `ncclInvalidArgument`.
    pub const INVALID_ARGUMENT: c_int = 4;
    /// `ncclInvalidUsage`.
    pub const INVALID_USAGE: c_int = 5;
    /// `ncclRemoteError`: another rank failed.
    pub const REMOTE_ERROR: c_int = 6;
    /// `ncclInProgress`: a non-blocking communicator's operation is still under way.
    pub const IN_PROGRESS: c_int = 7;
}

/// `NCCL_UNIQUE_ID_BYTES`.
pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    /// The id's bytes.
    pub internal: [c_char; UNIQUE_ID_BYTES],
}

/// A communicator handle's top bits: a made-up or foreign handle is told apart.
const COMM_TAG: u64 = 0x4e43 << 48;

/// How long a collective's part waits for the other ranks before it fails (the double's
/// watchdog: NCCL itself waits forever).
pub const LIMIT_ENV: &str = "GPUPORT_DOUBLE_COLLECTIVE_LIMIT_S";

fn limit() -> Duration {
    let seconds = std::env::var(LIMIT_ENV).ok().and_then(|v| v.trim().parse::<f64>().ok());
    Duration::from_secs_f64(seconds.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(120.0))
}

struct Entry {
    comm: Arc<Comm>,
    /// The call that made it, for the leak report.
    origin: String,
    /// A non-blocking communicator's initialisation while other ranks have not joined yet:
    /// the communicator cannot be used until it completes.
    joining: Option<Joining>,
    /// Splits of it so far (the n-th split of each rank meets the n-th of the others).
    splits: u64,
    /// Made non-blocking: its first launch answers `ncclInProgress`, as NCCL's does while
    /// it connects to the peers.
    non_blocking: bool,
    /// Whether its first launch has happened.
    connected: bool,
    /// A launch answered `ncclInProgress` that `ncclCommGetAsyncError` has not yet seen
    /// finish: the communicator may not be used meanwhile.
    launching: bool,
}

/// A rank of a communicator a split formed: its clique and rank.
type Member = (Arc<Clique>, usize);

/// A split under way: each parent rank's color, key and device as it arrives, and the new
/// communicators (clique and rank; none for `NCCL_SPLIT_NOCOLOR`) once all have.
struct Split {
    wanted: Vec<Option<(c_int, c_int, usize)>>,
    made: Option<Vec<Option<Member>>>,
    taken: usize,
}

/// An initialisation under way: the devices of this process's ranks as they arrive, and
/// the folder where every process's ranks say they have joined.
struct Init {
    devices: Vec<Option<usize>>,
    clique: Arc<Clique>,
    generation: u64,
    folder: Folder,
}

/// One initialisation: its unique id, and which of the communicators made with that id it
/// is (an id from `NCCL_COMM_ID` makes one after another).
type Joining = (Vec<u8>, u64);

#[derive(Default)]
struct Registry {
    comms: BTreeMap<u64, Entry>,
    next_comm: u64,
    next_id: u64,
    inits: BTreeMap<Vec<u8>, Init>,
    /// Initialisations completed, by unique id.
    generations: BTreeMap<Vec<u8>, u64>,
    /// Splits under way, by the parent's clique and the split's number.
    splits: BTreeMap<(u64, u64), Split>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    comms: BTreeMap::new(),
    next_comm: 0,
    next_id: 0,
    inits: BTreeMap::new(),
    generations: BTreeMap::new(),
    splits: BTreeMap::new(),
});
/// Signalled when an initialisation gains a rank.
static JOINED: Condvar = Condvar::new();

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// What waits for the other ranks — at its call, or at the end of the group it was made in:
/// a rank's initialisation or split, joined when it was called.
enum Pending {
    Init {
        out: *mut u64,
        joining: Joining,
        clique: Arc<Clique>,
        rank: usize,
        device: usize,
        origin: String,
    },
    Split {
        out: *mut u64,
        key: (u64, u64),
        parent: Arc<Clique>,
        rank: usize,
        device: usize,
        origin: String,
        non_blocking: bool,
    },
}

thread_local! {
    /// `ncclGroupStart` depth, and what waits for the outermost end.
    static GROUP: RefCell<(u32, Vec<Pending>)> = const { RefCell::new((0, Vec::new())) };
    /// Point-to-point messages issued in the current group, by communicator and stream:
    /// queued together at the group's end, as NCCL fuses them.
    static MESSAGES: RefCell<Vec<(u64, StreamRef, Vec<Message>)>> = const { RefCell::new(Vec::new()) };
    /// The rank (clique, rank) this thread last drove outside a group.
    static UNGROUPED: Cell<Option<(u64, usize)>> = const { Cell::new(None) };
    /// `ncclGetLastError`'s text.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A point-to-point message as the machine takes it: whether it is a send, the peer, the
/// element type and count, and the buffer's device address.
type Message = (bool, usize, DType, usize, usize);

/// A failed call: its status and why.
pub struct Failure {
    status: c_int,
    why: String,
}

type Outcome = Result<(), Failure>;

fn fail(status: c_int, why: impl Into<String>) -> Failure {
    Failure { status, why: why.into() }
}

/// A misuse, reported and failed with `ncclInvalidUsage` or `ncclInvalidArgument`.
fn misuse(cx: &Call<'_>, kind: &str, status: c_int, why: String) -> Failure {
    violation(kind, cx, &why);
    fail(status, why)
}

/// Serves one call: runs `body`, turning a failure into its status (and `ncclGetLastError`'s
/// text) and a panic into a report and `ncclInternalError`, never an unwind into the caller.
pub fn serve(cx: &Call<'_>, body: impl FnOnce() -> Outcome) -> c_int {
    serve_status(cx, || body().map(|()| status::SUCCESS))
}

/// [`serve`] for a call whose success has more than one status (`ncclInProgress`).
pub fn serve_status(cx: &Call<'_>, body: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|_| {
        violation("internal", cx, "the double panicked serving this call (a bug in the double)");
        Err(fail(status::INTERNAL_ERROR, "the double panicked"))
    });
    match outcome {
        Ok(code) => code,
        Err(f) => {
            let text = CString::new(format!("{}: {}", cx.name, f.why)).unwrap_or_default();
            LAST_ERROR.with(|l| *l.borrow_mut() = text);
            f.status
        }
    }
}

fn machine() -> Result<&'static Machine, Failure> {
    Machine::get().ok_or_else(|| fail(status::UNHANDLED_CUDA_ERROR, "the GPU driver is not initialised"))
}

/// `ncclGetVersion`.
///
/// # Safety
/// `version` is null or writable.
pub unsafe fn get_version(cx: &Call<'_>, version: *mut c_int) -> Outcome {
    if version.is_null() {
        return Err(misuse(cx, "null-pointer", status::INVALID_ARGUMENT, "a null version pointer".into()));
    }
    // SAFETY: checked non-null; the caller's promise that it is writable.
    unsafe { version.write(VERSION_CODE) };
    Ok(())
}

/// `ncclGetUniqueId`: an id no other call of this process gives — or, with `NCCL_COMM_ID`
/// set (NCCL's own bootstrap: the address rank 0 listens at), the one id that address
/// names, the same on every rank that has it.
///
/// # Safety
/// `id` is null or a writable `ncclUniqueId`.
pub unsafe fn get_unique_id(cx: &Call<'_>, id: *mut UniqueId) -> Outcome {
    if id.is_null() {
        return Err(misuse(cx, "null-pointer", status::INVALID_ARGUMENT, "a null id pointer".into()));
    }
    let text = match std::env::var("NCCL_COMM_ID") {
        Ok(address) => format!("gpuport-double nccl id at {address}"),
        Err(_) => {
            let n = {
                let mut r = registry();
                r.next_id += 1;
                r.next_id
            };
            format!("gpuport-double nccl id {} {n}", std::process::id())
        }
    };
    let mut bytes = [0 as c_char; UNIQUE_ID_BYTES];
    for (b, t) in bytes.iter_mut().zip(text.bytes()) {
        *b = t as c_char;
    }
    // SAFETY: checked non-null; the caller's promise that it is writable.
    unsafe { id.write(UniqueId { internal: bytes }) };
    Ok(())
}

fn id_bytes(id: &UniqueId) -> Vec<u8> {
    id.internal.iter().map(|&b| b as u8).collect()
}

/// The device current on this thread (NCCL's rank takes the calling thread's device).
fn current_device(cx: &Call<'_>) -> Result<usize, Failure> {
    machine()?.current_device(cx).map_err(|e| fail(status::UNHANDLED_CUDA_ERROR, format!("no current device ({e:?})")))
}

fn register(comm: Comm, origin: String, joining: Option<Joining>, non_blocking: bool) -> u64 {
    let mut r = registry();
    r.next_comm += 1;
    let handle = COMM_TAG | r.next_comm;
    let entry =
        Entry { comm: Arc::new(comm), origin, joining, splits: 0, non_blocking, connected: false, launching: false };
    r.comms.insert(handle, entry);
    handle
}

/// Whether initialisation `joining` is complete — every rank has joined, in this process
/// or another — completing it when first seen so: the clique learns whether its ranks span
/// processes (then they meet through the folder; else the folder goes).
fn complete(r: &mut Registry, joining: &Joining) -> bool {
    let (id, generation) = joining;
    // Gone, or a later communicator of the same id under way: this one completed.
    let Some(init) = r.inits.get(id).filter(|i| i.generation == *generation) else { return true };
    let here = init.devices.iter().all(Option::is_some);
    if !here && !(0..init.devices.len()).all(|k| init.devices[k].is_some() || init.folder.has_joined(k)) {
        return false;
    }
    let Some(init) = r.inits.remove(id) else { return true };
    *r.generations.entry(id.clone()).or_default() += 1;
    if here {
        init.folder.remove();
    } else {
        init.clique.share(init.folder);
    }
    JOINED.notify_all();
    true
}

/// The ranks of initialisation `joining` not joined yet (in any process).
fn not_joined(r: &Registry, joining: &Joining) -> Vec<usize> {
    let Some(init) = r.inits.get(&joining.0) else { return Vec::new() };
    (0..init.devices.len()).filter(|&k| init.devices[k].is_none() && !init.folder.has_joined(k)).collect()
}

/// Adds rank `rank` (on `device`) to the initialisation of `id` — in this process's
/// registry and in the folder every process's ranks meet in; the clique and which
/// initialisation it is.
fn join(
    cx: &Call<'_>,
    id: Vec<u8>,
    ranks: usize,
    rank: usize,
    device: usize,
) -> Result<(Arc<Clique>, Joining), Failure> {
    let mut r = registry();
    let generation = r.generations.get(&id).copied().unwrap_or(0);
    let init = r.inits.entry(id.clone()).or_insert_with(|| Init {
        devices: vec![None; ranks],
        clique: Clique::new(ranks, limit()),
        generation,
        folder: Folder::of(&id, generation),
    });
    if init.devices.len() != ranks {
        let why = format!("{ranks} ranks for a unique id another rank initialised with {}", init.devices.len());
        return Err(misuse(cx, "collective-mismatch", status::INVALID_USAGE, why));
    }
    if init.devices[rank].is_some() {
        return Err(misuse(cx, "collective-mismatch", status::INVALID_USAGE, format!("rank {rank} joined twice")));
    }
    if let Some(other) = init.devices.iter().flatten().find(|&&d| d == device) {
        let why = format!("rank {rank} on device {other}, which another rank of the communicator uses");
        return Err(misuse(cx, "collective-mismatch", status::INVALID_USAGE, why));
    }
    init.devices[rank] = Some(device);
    let (clique, generation) = (init.clique.clone(), init.generation);
    if let Err(e) = init.folder.join(rank, device) {
        return Err(fail(status::SYSTEM_ERROR, format!("telling the other processes' ranks: {e}")));
    }
    JOINED.notify_all();
    Ok((clique, (id, generation)))
}

/// What a wait on the registry found: done, or the ranks still missing.
enum Found<T> {
    Done(T),
    Missing(Vec<usize>),
}

/// Waits, at most the limit, until `look` finds what it waits for; after it, a failure
/// naming the ranks still missing and what they never did.
fn wait_for_ranks<T>(
    cx: &Call<'_>,
    what: &str,
    mut look: impl FnMut(&mut Registry) -> Result<Found<T>, Failure>,
) -> Result<T, Failure> {
    let deadline = std::time::Instant::now() + limit();
    let mut r = registry();
    loop {
        let missing = match look(&mut r)? {
            Found::Done(t) => return Ok(t),
            Found::Missing(missing) => missing,
        };
        let now = std::time::Instant::now();
        if now >= deadline {
            drop(r);
            let why = format!("rank(s) {missing:?} never {what} within {:?}", limit());
            return Err(misuse(cx, "rank-never-arrived", status::REMOTE_ERROR, why));
        }
        // Ranks of other processes join through files: look again every few milliseconds.
        let pause = (deadline - now).min(Duration::from_millis(2));
        r = JOINED.wait_timeout(r, pause).unwrap_or_else(|p| p.into_inner()).0;
    }
}

/// The ranks of `wanted` that have not come.
fn missing<T>(wanted: &[Option<T>]) -> Vec<usize> {
    (0..wanted.len()).filter(|&i| wanted[i].is_none()).collect()
}

/// Waits until every rank of initialisation `joining` has joined (at most the limit).
fn wait_joined(cx: &Call<'_>, joining: &Joining) -> Outcome {
    wait_for_ranks(cx, "joined the communicator", |r| {
        if complete(r, joining) {
            return Ok(Found::Done(()));
        }
        Ok(Found::Missing(not_joined(r, joining)))
    })
}

/// The head of `ncclConfig_t` (every version since 2.14 starts so), as the double reads it.
#[repr(C)]
pub struct ConfigHead {
    /// `sizeof(ncclConfig_t)` of the caller's headers.
    pub size: usize,
    /// `NCCL_API_MAGIC`.
    pub magic: u32,
    /// The caller's `NCCL_VERSION_CODE`.
    pub version: u32,
    /// 0: a non-blocking communicator; 1 or `NCCL_CONFIG_UNDEF_INT`: blocking.
    pub blocking: c_int,
}

/// `NCCL_API_MAGIC`.
const API_MAGIC: u32 = 0xcafe_beef;

/// Whether `config` (null: the defaults) asks for a non-blocking communicator; a config not
/// filled from `NCCL_CONFIG_INITIALIZER` is refused, as NCCL refuses it.
///
/// # Safety
/// `config` is null or points to at least a [`ConfigHead`].
unsafe fn non_blocking(cx: &Call<'_>, config: *const ConfigHead) -> Result<bool, Failure> {
    if config.is_null() {
        return Ok(false);
    }
    // SAFETY: the caller's promise.
    let head = unsafe { &*config };
    if head.magic != API_MAGIC || head.version < 21400 || head.size < std::mem::size_of::<ConfigHead>() {
        let why = format!(
            "a config not made by NCCL_CONFIG_INITIALIZER (size {}, magic {:#x}, version {})",
            head.size, head.magic, head.version
        );
        return Err(misuse(cx, "bad-config", status::INVALID_ARGUMENT, why));
    }
    Ok(head.blocking == 0)
}

/// `ncclCommInitRank` (and `ncclCommInitRankConfig`, with `config`): rank `rank` of
/// `ranks`, on the calling thread's current device. A blocking one returns once every rank
/// has joined — or, inside a group, the group's end does; a non-blocking one returns at
/// once (`ncclInProgress` while ranks are missing; `ncclCommGetAsyncError` says when it is
/// ready).
///
/// # Safety
/// `out` is null or writable; `id` is null or a readable `ncclUniqueId`; `config` is null
/// or a readable `ncclConfig_t`.
pub unsafe fn comm_init_rank(
    cx: &Call<'_>,
    out: *mut u64,
    ranks: c_int,
    id: *const UniqueId,
    rank: c_int,
    config: *const ConfigHead,
) -> Result<c_int, Failure> {
    if out.is_null() || id.is_null() {
        return Err(misuse(cx, "null-pointer", status::INVALID_ARGUMENT, "a null communicator or id pointer".into()));
    }
    let (Ok(ranks), Ok(rank)) = (usize::try_from(ranks), usize::try_from(rank)) else {
        return Err(misuse(cx, "bad-argument", status::INVALID_ARGUMENT, format!("rank {rank} of {ranks}")));
    };
    if ranks == 0 || rank >= ranks {
        return Err(misuse(cx, "bad-argument", status::INVALID_ARGUMENT, format!("rank {rank} of {ranks}")));
    }
    // SAFETY: forwarded.
    let non_blocking = unsafe { non_blocking(cx, config) }?;
    let device = current_device(cx)?;
    // SAFETY: checked non-null; the caller's promise that it is readable.
    let id = id_bytes(unsafe { &*id });
    let (clique, joining) = join(cx, id, ranks, rank, device)?;
    if non_blocking {
        let ready = complete(&mut registry(), &joining);
        let handle = register(Comm::new(clique, rank, device), cx.describe(), (!ready).then_some(joining), true);
        // SAFETY: checked non-null; the caller's promise that it is writable.
        unsafe { out.write(handle) };
        return Ok(if ready { status::SUCCESS } else { status::IN_PROGRESS });
    }
    // SAFETY: forwarded.
    unsafe { wait_or_defer(cx, Pending::Init { out, joining, clique, rank, device, origin: cx.describe() }) }?;
    Ok(status::SUCCESS)
}

/// Finishes `pending` now, or at the end of the group the thread is in.
///
/// # Safety
/// Its `out` is writable.
unsafe fn wait_or_defer(cx: &Call<'_>, pending: Pending) -> Outcome {
    if GROUP.with(|g| g.borrow().0) > 0 {
        GROUP.with(|g| g.borrow_mut().1.push(pending));
        return Ok(());
    }
    // SAFETY: forwarded.
    unsafe { finish(cx, pending) }
}

/// Waits for the other ranks of `pending` and writes the new communicator's handle.
///
/// # Safety
/// Its `out` is writable.
unsafe fn finish(cx: &Call<'_>, pending: Pending) -> Outcome {
    let (out, handle) = match pending {
        Pending::Init { out, joining, clique, rank, device, origin } => {
            if let Err(e) = wait_joined(cx, &joining) {
                abandon(&mut registry(), &joining, rank);
                return Err(e);
            }
            (out, register(Comm::new(clique, rank, device), origin, None, false))
        }
        Pending::Split { out, key, parent, rank, device, origin, non_blocking } => {
            match wait_split(cx, key, &parent, rank)? {
                Some((clique, new_rank)) => {
                    (out, register(Comm::new(clique, new_rank, device), origin, None, non_blocking))
                }
                None => (out, 0),
            }
        }
    };
    // SAFETY: the caller's promise.
    unsafe { out.write(handle) };
    Ok(())
}

/// `ncclCommSplit`: every rank of `parent` calls it; those with one color form a
/// communicator, ranked by key and then by their rank in the parent; `NCCL_SPLIT_NOCOLOR`
/// (-1) gives none (a null handle). Blocking like an initialisation (a non-blocking
/// config's split completes before it returns, which NCCL allows).
///
/// # Safety
/// `out` is null or writable; `config` is null or a readable `ncclConfig_t`.
pub unsafe fn comm_split(
    cx: &Call<'_>,
    parent: u64,
    color: c_int,
    key: c_int,
    out: *mut u64,
    config: *const ConfigHead,
) -> Outcome {
    if out.is_null() {
        return Err(misuse(cx, "null-pointer", status::INVALID_ARGUMENT, "a null communicator pointer".into()));
    }
    if color < -1 {
        return Err(misuse(cx, "bad-argument", status::INVALID_ARGUMENT, format!("color {color}")));
    }
    // SAFETY: forwarded.
    let non_blocking = unsafe { non_blocking(cx, config) }?;
    let (comm, n) = {
        let mut r = registry();
        let Some(entry) = r.comms.get_mut(&parent) else {
            drop(r);
            return Err(misuse(
                cx,
                "bad-handle",
                status::INVALID_ARGUMENT,
                format!("{parent:#x} is not a live communicator"),
            ));
        };
        entry.splits += 1;
        (entry.comm.clone(), entry.splits)
    };
    let key_of_split = (comm.clique.id(), n);
    {
        let mut r = registry();
        let ranks = comm.clique.ranks();
        let split =
            r.splits.entry(key_of_split).or_insert_with(|| Split { wanted: vec![None; ranks], made: None, taken: 0 });
        split.wanted[comm.rank] = Some((color, key, comm.device));
        match comm.clique.shared() {
            // Ranks in other processes say theirs through the folder.
            Some(shared) => shared
                .split_arrive(n, comm.rank, color, key)
                .map_err(|e| fail(status::SYSTEM_ERROR, format!("telling the other processes' ranks: {e}")))?,
            None if split.wanted.iter().all(Option::is_some) => split.made = Some(form(&split.wanted)),
            None => {}
        }
        JOINED.notify_all();
    }
    let pending = Pending::Split {
        out,
        key: key_of_split,
        parent: comm.clique.clone(),
        rank: comm.rank,
        device: comm.device,
        origin: cx.describe(),
        non_blocking,
    };
    // SAFETY: forwarded: `out` checked non-null, promised writable.
    unsafe { wait_or_defer(cx, pending) }
}

/// The communicators a split forms from every parent rank's color, key and device: for
/// each parent rank, its clique and new rank (none for no color).
fn form(wanted: &[Option<(c_int, c_int, usize)>]) -> Vec<Option<Member>> {
    let mut out = vec![None; wanted.len()];
    let mut colors: Vec<c_int> = wanted.iter().flatten().map(|w| w.0).filter(|&c| c >= 0).collect();
    colors.sort_unstable();
    colors.dedup();
    for color in colors {
        let mut members: Vec<(c_int, usize)> =
            wanted.iter().enumerate().filter_map(|(r, w)| w.filter(|w| w.0 == color).map(|w| (w.1, r))).collect();
        members.sort_unstable();
        let clique = Clique::new(members.len(), limit());
        for (new_rank, (_, parent_rank)) in members.into_iter().enumerate() {
            out[parent_rank] = Some((clique.clone(), new_rank));
        }
    }
    out
}

/// Waits until every parent rank has called split `key`; `rank`'s new communicator.
fn wait_split(cx: &Call<'_>, key: (u64, u64), parent: &Clique, rank: usize) -> Result<Option<Member>, Failure> {
    wait_for_ranks(cx, "called the split", |r| {
        let Some(split) = r.splits.get_mut(&key) else {
            return Err(fail(status::INTERNAL_ERROR, "a split vanished"));
        };
        if let (None, Some(shared)) = (&split.made, parent.shared()) {
            // Every process forms the same communicators from the ranks' files; this
            // process's ranks share its cliques, each meeting in a folder of its own.
            let all = match shared.split_found(key.1) {
                Ok(all) => all,
                Err(missing) => return Ok(Found::Missing(missing)),
            };
            let wanted: Vec<Option<(c_int, c_int, usize)>> = all.iter().map(|&(c, k)| Some((c, k, 0))).collect();
            let made = form(&wanted);
            for ((clique, _), &(color, _)) in made.iter().zip(&all).filter_map(|(m, a)| Some((m.as_ref()?, a))) {
                clique.share(shared.split_folder(key.1, color));
            }
            split.made = Some(made);
        }
        let Some(made) = &split.made else { return Ok(Found::Missing(missing(&split.wanted))) };
        let mine = made[rank].clone();
        split.taken += 1;
        if split.taken == split.wanted.len() {
            r.splits.remove(&key);
        }
        Ok(Found::Done(mine))
    })
}

/// `ncclCommInitAll`: one communicator of `count` ranks, rank `i` on device `devices[i]`
/// (`0..count` when null).
///
/// # Safety
/// `out` is null or holds `count` writable handles; `devices` is null or holds `count` ints.
pub unsafe fn comm_init_all(cx: &Call<'_>, out: *mut u64, count: c_int, devices: *const c_int) -> Outcome {
    let m = machine()?;
    let Some(count) = usize::try_from(count).ok().filter(|&n| n > 0) else {
        return Err(misuse(cx, "bad-argument", status::INVALID_ARGUMENT, format!("{count} devices")));
    };
    if out.is_null() {
        return Err(misuse(cx, "null-pointer", status::INVALID_ARGUMENT, "a null communicator array".into()));
    }
    let mut chosen = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: the caller's promise: `count` ints when non-null.
        let d = if devices.is_null() { i as i64 } else { i64::from(unsafe { *devices.add(i) }) };
        let device = m
            .check_device(d)
            .map_err(|_| misuse(cx, "bad-argument", status::INVALID_ARGUMENT, format!("device {d}")))?;
        if chosen.contains(&device) {
            return Err(misuse(cx, "bad-argument", status::INVALID_USAGE, format!("device {device} twice")));
        }
        chosen.push(device);
    }
    let clique = Clique::new(count, limit());
    for (rank, device) in chosen.into_iter().enumerate() {
        let handle = register(Comm::new(clique.clone(), rank, device), cx.describe(), None, false);
        // SAFETY: the caller's promise: `count` writable handles.
        unsafe { out.add(rank).write(handle) };
    }
    Ok(())
}

fn comm_of(cx: &Call<'_>, handle: u64) -> Result<Arc<Comm>, Failure> {
    let mut r = registry();
    let joining = r.comms.get(&handle).map(|e| e.joining.clone());
    let ready = joining.map(|j| j.is_none_or(|j| complete(&mut r, &j)));
    match (ready, r.comms.get_mut(&handle)) {
        (Some(true), Some(entry)) if entry.launching => {
            drop(r);
            let why = format!(
                "{handle:#x} was used while its last launch is still under way (it answered ncclInProgress; \
                 ncclCommGetAsyncError must say ncclSuccess first)"
            );
            Err(misuse(cx, "comm-in-progress", status::INVALID_USAGE, why))
        }
        (Some(true), Some(entry)) => {
            entry.joining = None;
            Ok(entry.comm.clone())
        }
        (Some(false), _) => {
            drop(r);
            let why = format!("{handle:#x} is still being initialised (ncclCommGetAsyncError says ncclInProgress)");
            Err(misuse(cx, "comm-in-progress", status::INVALID_USAGE, why))
        }
        _ => {
            drop(r);
            Err(misuse(cx, "bad-handle", status::INVALID_ARGUMENT, format!("{handle:#x} is not a live communicator")))
        }
    }
}

/// Whether communicator `handle` is still joining (non-blocking, ranks missing); `None`
/// for a handle that is not live.
fn joining(handle: u64) -> Option<bool> {
    let mut r = registry();
    let joining = r.comms.get(&handle).map(|e| e.joining.clone())?;
    Some(joining.is_some_and(|j| !complete(&mut r, &j)))
}

/// `ncclCommDestroy` (`abort`: `ncclCommAbort`, which also releases the communicator's
/// waiting collectives with an error, on every rank).
pub fn comm_destroy(cx: &Call<'_>, handle: u64, abort: bool) -> Outcome {
    let Some(entry) = registry().comms.remove(&handle) else {
        return Err(misuse(
            cx,
            "bad-handle",
            status::INVALID_ARGUMENT,
            format!("{handle:#x} is not a live communicator"),
        ));
    };
    if abort {
        entry.comm.clique.abort();
    }
    match &entry.joining {
        Some(joining) => abandon(&mut registry(), joining, entry.comm.rank),
        None => entry.comm.clique.leave(entry.comm.rank),
    }
    Ok(())
}

/// Rank `rank` gives up initialisation `joining` before it completed (destroyed or
/// aborted while others were missing, or its wait ran out): its joining is taken back, and
/// the folder goes once no rank of any process is in it.
fn abandon(r: &mut Registry, joining: &Joining, rank: usize) {
    let (id, generation) = joining;
    let Some(init) = r.inits.get_mut(id).filter(|i| i.generation == *generation) else {
        return; // it completed meanwhile: the rank left through its clique
    };
    init.devices[rank] = None;
    init.folder.unjoin(rank);
    if init.devices.iter().all(Option::is_none) {
        if let Some(init) = r.inits.remove(id) {
            init.folder.remove_if_empty();
        }
    }
}

/// `ncclCommFinalize`: the double's collectives need no flush; a live handle is all.
pub fn comm_finalize(cx: &Call<'_>, handle: u64) -> Outcome {
    comm_of(cx, handle).map(drop)
}

/// `ncclCommGetAsyncError`: `ncclInProgress` while a non-blocking communicator waits for
/// ranks to join; `ncclRemoteError` (with the reason as the last error) once a collective
/// of the communicator failed.
///
/// # Safety
/// `out` is null or writable.
pub unsafe fn comm_async_error(cx: &Call<'_>, handle: u64, out: *mut c_int) -> Outcome {
    if out.is_null() {
        return Err(misuse(cx, "null-pointer", status::INVALID_ARGUMENT, "a null result pointer".into()));
    }
    let launching = registry().comms.get_mut(&handle).is_some_and(|e| std::mem::take(&mut e.launching));
    if launching || joining(handle) == Some(true) {
        // SAFETY: checked non-null; the caller's promise that it is writable.
        unsafe { out.write(status::IN_PROGRESS) };
        return Ok(());
    }
    let comm = comm_of(cx, handle)?;
    let found = comm.async_error();
    // SAFETY: checked non-null; the caller's promise that it is writable.
    unsafe { out.write(if found.is_some() { status::REMOTE_ERROR } else { status::SUCCESS }) };
    if let Some(why) = found {
        LAST_ERROR.with(|l| *l.borrow_mut() = CString::new(why).unwrap_or_default());
    }
    Ok(())
}

/// `ncclCommCount`, `ncclCommCuDevice`, `ncclCommUserRank`: the communicator's rank count,
/// device or rank, by `which`.
///
/// # Safety
/// `out` is null or writable.
pub unsafe fn comm_fact(cx: &Call<'_>, handle: u64, out: *mut c_int, which: Fact) -> Outcome {
    let comm = comm_of(cx, handle)?;
    if out.is_null() {
        return Err(misuse(cx, "null-pointer", status::INVALID_ARGUMENT, "a null result pointer".into()));
    }
    let value = match which {
        Fact::Count => comm.clique.ranks(),
        Fact::Device => comm.device,
        Fact::Rank => comm.rank,
    };
    // SAFETY: checked non-null; the caller's promise that it is writable.
    unsafe { out.write(value as c_int) };
    Ok(())
}

/// Which fact [`comm_fact`] reads.
#[derive(Clone, Copy)]
pub enum Fact {
    /// The number of ranks.
    Count,
    /// The device.
    Device,
    /// The rank.
    Rank,
}

/// `ncclGroupStart`.
pub fn group_start() -> Outcome {
    GROUP.with(|g| g.borrow_mut().0 += 1);
    Ok(())
}

/// `ncclGroupEnd`: at the outermost end, the deferred initialisations complete.
pub fn group_end(cx: &Call<'_>) -> Outcome {
    let deferred = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        match g.0 {
            0 => None,
            1 => {
                g.0 = 0;
                Some(std::mem::take(&mut g.1))
            }
            _ => {
                g.0 -= 1;
                Some(Vec::new())
            }
        }
    });
    let Some(deferred) = deferred else {
        return Err(misuse(cx, "bad-group", status::INVALID_USAGE, "ncclGroupEnd without ncclGroupStart".into()));
    };
    UNGROUPED.with(|u| u.set(None));
    if GROUP.with(|g| g.borrow().0) == 0 {
        for (handle, stream, messages) in MESSAGES.with(|m| std::mem::take(&mut *m.borrow_mut())) {
            let comm = comm_of(cx, handle)?;
            queue_exchange(cx, &comm, stream, &messages)?;
        }
    }
    for pending in deferred {
        // SAFETY: each deferred `out` was checked non-null, and promised writable, by its call.
        unsafe { finish(cx, pending) }?;
    }
    Ok(())
}

/// A collective's arguments as the C call gives them.
pub struct Args {
    /// The send buffer's device address.
    pub send: usize,
    /// The receive buffer's device address.
    pub recv: usize,
    /// Elements (see [`Kind`] for what is counted).
    pub count: usize,
    /// `ncclDataType_t`.
    pub dtype: c_int,
    /// The collective; its operation's raw value where it reduces.
    pub kind: RawKind,
    /// The communicator handle.
    pub comm: u64,
    /// The stream, as the vendor double reads it.
    pub stream: StreamRef,
}

/// A collective with its raw operation and root.
#[derive(Clone, Copy)]
pub enum RawKind {
    /// `ncclAllReduce`.
    AllReduce(c_int),
    /// `ncclBroadcast`.
    Broadcast(c_int),
    /// `ncclReduce`.
    Reduce(c_int, c_int),
    /// `ncclAllGather`.
    AllGather,
    /// `ncclReduceScatter`.
    ReduceScatter(c_int),
    /// `ncclAlltoAll` (RCCL: `ncclAllToAll`).
    AllToAll,
}

/// Queues a collective on its stream, as its communicator's device's work; the launch's
/// status (`launched`).
pub fn collective(cx: &Call<'_>, a: Args) -> Result<c_int, Failure> {
    let m = machine()?;
    let comm = comm_of(cx, a.comm)?;
    let ranks = comm.clique.ranks();
    let bad = |what: String| misuse(cx, "bad-argument", status::INVALID_ARGUMENT, what);
    let dtype = DType::from_raw(a.dtype).ok_or_else(|| bad(format!("data type {}", a.dtype)))?;
    let op = |raw: c_int| RedOp::from_raw(raw).ok_or_else(|| bad(format!("reduction {raw}")));
    let root = |raw: c_int| {
        usize::try_from(raw).ok().filter(|&r| r < ranks).ok_or_else(|| bad(format!("root {raw} of {ranks} ranks")))
    };
    let kind = match a.kind {
        RawKind::AllReduce(o) => Kind::AllReduce(op(o)?),
        RawKind::Broadcast(r) => Kind::Broadcast { root: root(r)? },
        RawKind::Reduce(o, r) => Kind::Reduce { op: op(o)?, root: root(r)? },
        RawKind::AllGather => Kind::AllGather,
        RawKind::ReduceScatter(o) => Kind::ReduceScatter(op(o)?),
        RawKind::AllToAll => Kind::AllToAll,
    };
    check_grouping(cx, &comm);
    let spec = Spec { kind, dtype, count: a.count };
    let injected = match faults().on_call(cx.name) {
        Some(Fault::Fail(code)) => return Err(fail(code as c_int, "an injected fault")),
        Some(Fault::Sticky(code)) => {
            Some(format!("an injected fault ({}) on rank {}", error_name(code as c_int), comm.rank))
        }
        Some(Fault::Lost) => {
            // The rank is gone: its part never comes, and the others wait for it.
            comm.take_seq();
            return Ok(status::SUCCESS);
        }
        None => None,
    };
    let queued = on_device(m, comm.device, || m.collective(cx, a.stream, &comm, spec, a.send, a.recv, injected));
    queued.map_err(|e| fail(status::UNHANDLED_CUDA_ERROR, format!("the driver refused the collective ({e:?})")))?;
    Ok(launched(a.comm))
}

/// What a launch outside a group answers: `ncclInProgress` for a non-blocking
/// communicator's first (it connects to its peers meanwhile, as NCCL's does), until
/// `ncclCommGetAsyncError` has said so once; `ncclSuccess` otherwise.
fn launched(handle: u64) -> c_int {
    if GROUP.with(|g| g.borrow().0) > 0 {
        return status::SUCCESS;
    }
    let mut r = registry();
    match r.comms.get_mut(&handle) {
        Some(e) if e.non_blocking && !e.connected => {
            e.connected = true;
            e.launching = true;
            status::IN_PROGRESS
        }
        _ => status::SUCCESS,
    }
}

/// Reports one thread driving two ranks of one communicator outside a group (a deadlock
/// in NCCL, whose calls for one rank may wait for the others).
fn check_grouping(cx: &Call<'_>, comm: &Comm) {
    if GROUP.with(|g| g.borrow().0) == 0 {
        let me = (comm.clique.id(), comm.rank);
        let before = UNGROUPED.with(|u| u.replace(Some(me)));
        if let Some((clique, rank)) = before.filter(|&(c, r)| c == me.0 && r != me.1) {
            let why = format!(
                "this thread drove rank {rank} and now rank {} of one communicator (clique {clique}) outside \
                 ncclGroupStart/End: NCCL deadlocks when one thread drives several ranks without a group",
                me.1
            );
            violation("ungrouped-ranks", cx, &why);
        }
    }
}

/// `ncclSend` (`send`) and `ncclRecv`: one message to or from `peer`, queued on its own
/// outside a group (the launch's status: `launched`), or with the group's other messages
/// of the communicator at its end.
#[allow(clippy::too_many_arguments)] // the C call's own shape
pub fn message(
    cx: &Call<'_>,
    send: bool,
    buf: usize,
    count: usize,
    dtype: c_int,
    peer: c_int,
    handle: u64,
    stream: StreamRef,
) -> Result<c_int, Failure> {
    let comm = comm_of(cx, handle)?;
    let ranks = comm.clique.ranks();
    let bad = |what: String| misuse(cx, "bad-argument", status::INVALID_ARGUMENT, what);
    let dtype = DType::from_raw(dtype).ok_or_else(|| bad(format!("data type {dtype}")))?;
    let peer = usize::try_from(peer)
        .ok()
        .filter(|&p| p < ranks)
        .ok_or_else(|| bad(format!("peer {peer} of {ranks} ranks")))?;
    let message = (send, peer, dtype, count, buf);
    if GROUP.with(|g| g.borrow().0) > 0 {
        MESSAGES.with(|m| {
            let mut m = m.borrow_mut();
            match m.iter_mut().find(|(h, s, _)| *h == handle && *s == stream) {
                Some((_, _, list)) => list.push(message),
                None => m.push((handle, stream, vec![message])),
            }
        });
        return Ok(status::SUCCESS);
    }
    check_grouping(cx, &comm);
    queue_exchange(cx, &comm, stream, &[message])?;
    Ok(launched(handle))
}

/// `f` run with `device`'s primary context current, as NCCL runs a call on its
/// communicator's device whatever is current; the thread's context comes back afterwards.
fn on_device<T>(m: &Machine, device: usize, f: impl FnOnce() -> T) -> T {
    let previous = current_context();
    set_current_context(m.implicit_context(device));
    let result = f();
    set_current_context(previous);
    result
}

/// Queues `messages` of `comm` on `stream`, on the communicator's device.
fn queue_exchange(cx: &Call<'_>, comm: &Comm, stream: StreamRef, messages: &[Message]) -> Outcome {
    let m = machine()?;
    let queued = on_device(m, comm.device, || m.exchange(cx, stream, comm, messages));
    queued.map_err(|e| fail(status::UNHANDLED_CUDA_ERROR, format!("the driver refused the messages ({e:?})")))
}

/// `ncclResult_t` names, for the faults `GPUPORT_DOUBLE_FAULTS` injects into the engine's
/// calls (`ncclAllReduce:2=REMOTE_ERROR`): a system or remote error arrives asynchronously
/// (the collective fails on every rank when it runs, as a network error does), any other
/// status is the call's; `LOST` loses the rank (its part never comes; the other ranks wait
/// for it until an abort or the limit).
struct Statuses;

const STATUS_NAMES: [(&str, c_int); 7] = [
    ("UNHANDLED_CUDA_ERROR", status::UNHANDLED_CUDA_ERROR),
    ("SYSTEM_ERROR", status::SYSTEM_ERROR),
    ("INTERNAL_ERROR", status::INTERNAL_ERROR),
    ("INVALID_ARGUMENT", status::INVALID_ARGUMENT),
    ("INVALID_USAGE", status::INVALID_USAGE),
    ("REMOTE_ERROR", status::REMOTE_ERROR),
    ("IN_PROGRESS", status::IN_PROGRESS),
];

impl StatusTable for Statuses {
    fn code(&self, name: &str) -> Option<u32> {
        STATUS_NAMES.iter().find(|(n, _)| *n == name).map(|&(_, c)| c as u32)
    }
    fn sticky(&self, code: u32) -> bool {
        [status::SYSTEM_ERROR, status::REMOTE_ERROR].contains(&(code as c_int))
    }
}

fn error_name(code: c_int) -> &'static str {
    STATUS_NAMES.iter().find(|&&(_, c)| c == code).map_or("?", |(n, _)| n)
}

/// The faults planned for the engine's calls, read at its first call; a specification
/// that does not parse is reported, and none is injected.
fn faults() -> &'static Faults {
    static FAULTS: OnceLock<Faults> = OnceLock::new();
    FAULTS.get_or_init(|| {
        let spec = std::env::var(FAULTS_ENV).unwrap_or_default();
        Faults::parse(&spec, "nccl", &Statuses, &["nccl"]).unwrap_or_else(|why| {
            violation_outside_call("bad-setting", format!("{FAULTS_ENV}: {why}"));
            Faults::default()
        })
    })
}

/// `ncclGetErrorString` (a plain match: it cannot panic, and is called across the C
/// boundary without `serve`).
pub fn error_string(code: c_int) -> &'static CStr {
    match code {
        status::SUCCESS => c"no error",
        status::UNHANDLED_CUDA_ERROR => c"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        status::SYSTEM_ERROR => c"unhandled system error (run with NCCL_DEBUG=INFO for details)",
        status::INTERNAL_ERROR => c"internal error - please report this issue to the NCCL developers",
        status::INVALID_ARGUMENT => c"invalid argument (run with NCCL_DEBUG=WARN for details)",
        status::INVALID_USAGE => c"invalid usage (run with NCCL_DEBUG=WARN for details)",
        status::REMOTE_ERROR => c"remote process exited or there was a network error",
        status::IN_PROGRESS => c"NCCL operation in progress",
        _ => c"unknown result code",
    }
}

/// `ncclGetLastError`: the text of this thread's last failure (empty while the thread is
/// ending). Cannot panic: it is called across the C boundary without `serve`.
pub fn last_error() -> *const c_char {
    LAST_ERROR.try_with(|l| l.try_borrow().map(|t| t.as_ptr()).ok()).ok().flatten().unwrap_or(c"".as_ptr())
}

/// Communicators still alive, for the report at exit.
pub fn leaks() -> Option<String> {
    let r = registry();
    (!r.comms.is_empty()).then(|| {
        let shown: Vec<&str> = r.comms.values().take(3).map(|e| e.origin.as_str()).collect();
        format!("{} NCCL communicator(s) (made by {})", r.comms.len(), shown.join(", "))
    })
}

/// Reports live communicators at exit (beside the driver's own leak report).
pub fn exit_check() {
    if let Some(leaked) = leaks() {
        violation_outside_call("leak", format!("alive at process exit: {leaked}"));
    }
}

/// Exports NCCL's C API from a driver double. `$stream` reads the vendor's stream handle
/// (a `*mut c_void`) as a [`StreamRef`]; `$all_to_all` is the all-to-all's name (NCCL's
/// `ncclAlltoAll`, RCCL's `ncclAllToAll`).
#[macro_export]
macro_rules! nccl_exports {
    ($stream:path, $all_to_all:ident) => {
        /// NCCL's `ncclGetVersion`.
        #[no_mangle]
        pub unsafe extern "C" fn ncclGetVersion(version: *mut ::std::ffi::c_int) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclGetVersion", args: &|| format!("version={version:p}") };
            // SAFETY: forwarded: the caller's pointer.
            $crate::nccl::serve(&cx, || unsafe { $crate::nccl::get_version(&cx, version) })
        }

        /// NCCL's `ncclGetUniqueId`.
        #[no_mangle]
        pub unsafe extern "C" fn ncclGetUniqueId(id: *mut $crate::nccl::UniqueId) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclGetUniqueId", args: &|| format!("uniqueId={id:p}") };
            // SAFETY: forwarded: the caller's pointer.
            $crate::nccl::serve(&cx, || unsafe { $crate::nccl::get_unique_id(&cx, id) })
        }

        /// NCCL's `ncclCommInitRank`.
        #[no_mangle]
        pub unsafe extern "C" fn ncclCommInitRank(
            comm: *mut u64,
            nranks: ::std::ffi::c_int,
            id: $crate::nccl::UniqueId,
            rank: ::std::ffi::c_int,
        ) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclCommInitRank", args: &|| format!("comm={comm:p}, nranks={nranks}, rank={rank}") };
            // SAFETY: forwarded: the caller's pointer; the id is a local copy.
            $crate::nccl::serve_status(&cx, || unsafe {
                $crate::nccl::comm_init_rank(&cx, comm, nranks, &id, rank, ::std::ptr::null())
            })
        }

        /// NCCL's `ncclCommInitRankConfig`.
        #[no_mangle]
        pub unsafe extern "C" fn ncclCommInitRankConfig(
            comm: *mut u64,
            nranks: ::std::ffi::c_int,
            id: $crate::nccl::UniqueId,
            rank: ::std::ffi::c_int,
            config: *const $crate::nccl::ConfigHead,
        ) -> ::std::ffi::c_int {
            let cx = $crate::Call {
                name: "ncclCommInitRankConfig",
                args: &|| format!("comm={comm:p}, nranks={nranks}, rank={rank}, config={config:p}"),
            };
            // SAFETY: forwarded: the caller's pointers; the id is a local copy.
            $crate::nccl::serve_status(&cx, || unsafe { $crate::nccl::comm_init_rank(&cx, comm, nranks, &id, rank, config) })
        }

        /// NCCL's `ncclCommSplit`.
        #[no_mangle]
        pub unsafe extern "C" fn ncclCommSplit(
            comm: u64,
            color: ::std::ffi::c_int,
            key: ::std::ffi::c_int,
            newcomm: *mut u64,
            config: *const $crate::nccl::ConfigHead,
        ) -> ::std::ffi::c_int {
            let cx = $crate::Call {
                name: "ncclCommSplit",
                args: &|| format!("comm={comm:#x}, color={color}, key={key}, newcomm={newcomm:p}, config={config:p}"),
            };
            // SAFETY: forwarded: the caller's pointers.
            $crate::nccl::serve(&cx, || unsafe { $crate::nccl::comm_split(&cx, comm, color, key, newcomm, config) })
        }

        /// NCCL's `ncclCommInitAll`.
        #[no_mangle]
        pub unsafe extern "C" fn ncclCommInitAll(
            comms: *mut u64,
            ndev: ::std::ffi::c_int,
            devlist: *const ::std::ffi::c_int,
        ) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclCommInitAll", args: &|| format!("comms={comms:p}, ndev={ndev}, devlist={devlist:p}") };
            // SAFETY: forwarded: the caller's arrays.
            $crate::nccl::serve(&cx, || unsafe { $crate::nccl::comm_init_all(&cx, comms, ndev, devlist) })
        }

        /// NCCL's `ncclCommDestroy`.
        #[no_mangle]
        pub extern "C" fn ncclCommDestroy(comm: u64) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclCommDestroy", args: &|| format!("comm={comm:#x}") };
            $crate::nccl::serve(&cx, || $crate::nccl::comm_destroy(&cx, comm, false))
        }

        /// NCCL's `ncclCommAbort`.
        #[no_mangle]
        pub extern "C" fn ncclCommAbort(comm: u64) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclCommAbort", args: &|| format!("comm={comm:#x}") };
            $crate::nccl::serve(&cx, || $crate::nccl::comm_destroy(&cx, comm, true))
        }

        /// NCCL's `ncclCommFinalize`.
        #[no_mangle]
        pub extern "C" fn ncclCommFinalize(comm: u64) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclCommFinalize", args: &|| format!("comm={comm:#x}") };
            $crate::nccl::serve(&cx, || $crate::nccl::comm_finalize(&cx, comm))
        }

        /// NCCL's `ncclCommGetAsyncError`.
        #[no_mangle]
        pub unsafe extern "C" fn ncclCommGetAsyncError(comm: u64, result: *mut ::std::ffi::c_int) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclCommGetAsyncError", args: &|| format!("comm={comm:#x}") };
            // SAFETY: forwarded: the caller's pointer.
            $crate::nccl::serve(&cx, || unsafe { $crate::nccl::comm_async_error(&cx, comm, result) })
        }

        $crate::nccl_exports!(@fact ncclCommCount, Count);
        $crate::nccl_exports!(@fact ncclCommCuDevice, Device);
        $crate::nccl_exports!(@fact ncclCommUserRank, Rank);

        /// NCCL's `ncclGroupStart`.
        #[no_mangle]
        pub extern "C" fn ncclGroupStart() -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclGroupStart", args: &String::new };
            $crate::nccl::serve(&cx, $crate::nccl::group_start)
        }

        /// NCCL's `ncclGroupEnd`.
        #[no_mangle]
        pub extern "C" fn ncclGroupEnd() -> ::std::ffi::c_int {
            let cx = $crate::Call { name: "ncclGroupEnd", args: &String::new };
            $crate::nccl::serve(&cx, || $crate::nccl::group_end(&cx))
        }

        /// NCCL's `ncclGetErrorString`.
        #[no_mangle]
        pub extern "C" fn ncclGetErrorString(result: ::std::ffi::c_int) -> *const ::std::ffi::c_char {
            $crate::nccl::error_string(result).as_ptr()
        }

        /// NCCL's `ncclGetLastError` (the communicator is not needed: the text is the
        /// calling thread's).
        #[no_mangle]
        pub extern "C" fn ncclGetLastError(_comm: u64) -> *const ::std::ffi::c_char {
            $crate::nccl::last_error()
        }

        $crate::nccl_exports!(@message $stream, ncclSend, true);
        $crate::nccl_exports!(@message $stream, ncclRecv, false);
        $crate::nccl_exports!(@collective $stream, ncclAllReduce(op: ::std::ffi::c_int) => AllReduce(op));
        $crate::nccl_exports!(@collective $stream, ncclReduceScatter(op: ::std::ffi::c_int) => ReduceScatter(op));
        $crate::nccl_exports!(@collective $stream, ncclBroadcast(root: ::std::ffi::c_int) => Broadcast(root));
        $crate::nccl_exports!(@collective $stream, ncclReduce(op: ::std::ffi::c_int, root: ::std::ffi::c_int) => Reduce(op, root));
        $crate::nccl_exports!(@collective $stream, ncclAllGather() => AllGather);
        $crate::nccl_exports!(@collective $stream, $all_to_all() => AllToAll);
    };
    (@fact $name:ident, $which:ident) => {
        /// NCCL's function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(comm: u64, out: *mut ::std::ffi::c_int) -> ::std::ffi::c_int {
            let cx = $crate::Call { name: stringify!($name), args: &|| format!("comm={comm:#x}, out={out:p}") };
            // SAFETY: forwarded: the caller's pointer.
            $crate::nccl::serve(&cx, || unsafe { $crate::nccl::comm_fact(&cx, comm, out, $crate::nccl::Fact::$which) })
        }
    };
    (@message $stream:path, $name:ident, $send:expr) => {
        /// NCCL's point-to-point call of this name.
        #[no_mangle]
        pub extern "C" fn $name(
            buff: u64,
            count: usize,
            datatype: ::std::ffi::c_int,
            peer: ::std::ffi::c_int,
            comm: u64,
            stream: *mut ::std::ffi::c_void,
        ) -> ::std::ffi::c_int {
            let cx = $crate::Call {
                name: stringify!($name),
                args: &|| format!("buff={buff:#x}, count={count}, datatype={datatype}, peer={peer}, comm={comm:#x}, stream={stream:p}"),
            };
            $crate::nccl::serve_status(&cx, || {
                $crate::nccl::message(&cx, $send, buff as usize, count, datatype, peer, comm, $stream(stream))
            })
        }
    };
    (@collective $stream:path, $name:ident($($arg:ident: $ty:ty),*) => $kind:ident$(($($k:ident),*))?) => {
        /// NCCL's collective of this name.
        #[no_mangle]
        pub extern "C" fn $name(
            sendbuff: u64,
            recvbuff: u64,
            count: usize,
            datatype: ::std::ffi::c_int,
            $($arg: $ty,)*
            comm: u64,
            stream: *mut ::std::ffi::c_void,
        ) -> ::std::ffi::c_int {
            let cx = $crate::Call {
                name: stringify!($name),
                args: &|| {
                    format!("sendbuff={sendbuff:#x}, recvbuff={recvbuff:#x}, count={count}, datatype={datatype}, comm={comm:#x}, stream={stream:p}")
                },
            };
            let args = $crate::nccl::Args {
                send: sendbuff as usize,
                recv: recvbuff as usize,
                count,
                dtype: datatype,
                kind: $crate::nccl::RawKind::$kind$(($($k),*))?,
                comm,
                stream: $stream(stream),
            };
            $crate::nccl::serve_status(&cx, || $crate::nccl::collective(&cx, args))
        }
    };
}
