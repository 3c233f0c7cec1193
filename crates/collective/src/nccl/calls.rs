//! One checked function per NCCL call gpuport makes, as NCCL's C API declares it (RCCL's
//! is the same): each takes the loaded engine, resolves its call (once, then kept) and
//! turns a failure into [`Error::Collective`] with NCCL's own words — `ncclGetErrorString`
//! and, where the version has it, `ncclGetLastError`. A call the loaded version lacks is
//! `EngineUnsupported` naming it.
//!
//! Handles cross as plain numbers (`ncclComm_t` and `cudaStream_t`/`hipStream_t` are
//! pointers): the communicator's types stay `Send` without claims about NCCL's.

use std::ffi::{c_char, c_int, c_void, CStr};

use gpuport_core::{Error, Result};

use super::entries::index;
use super::Loaded;

type Comm = *mut c_void;
type Stream = *mut c_void;

/// `ncclSuccess`.
const SUCCESS: c_int = 0;
/// `ncclInProgress`: a non-blocking communicator's operation is still under way.
const IN_PROGRESS: c_int = 7;

/// The address of call `I` of the entry table as a function of type `F`.
///
/// # Safety
/// `F` is the C signature of the call at `I`.
unsafe fn resolve<F: Copy>(loaded: &Loaded, i: usize) -> Result<F> {
    const { assert!(std::mem::size_of::<*mut c_void>() == std::mem::size_of::<usize>()) };
    let address = loaded.address(i)?.as_ptr();
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the caller's promise: `F` is a function pointer of the call's signature.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&address) })
}

/// `code` as a result: the engine's message for a failure, with `comm`'s last error
/// where the version can say it.
fn check(loaded: &Loaded, code: c_int, call: &'static str, comm: Option<usize>) -> Result<()> {
    if code == SUCCESS {
        return Ok(());
    }
    let mut message = error_string(loaded, code);
    if let Some(last) = last_error(loaded, comm.unwrap_or(0)).filter(|l| !l.is_empty()) {
        message = format!("{message}: {last}");
    }
    Err(Error::Collective { engine: loaded.flavour.name(), call, code: i64::from(code), message })
}

/// `ncclGetErrorString`.
fn error_string(loaded: &Loaded, code: c_int) -> String {
    type F = unsafe extern "C" fn(c_int) -> *const c_char;
    // SAFETY: the call's signature.
    let Ok(f) = (unsafe { resolve::<F>(loaded, index("ncclGetErrorString")) }) else {
        return format!("status {code}");
    };
    // SAFETY: callable with any status; it returns a static string or null.
    let text = unsafe { f(code) };
    if text.is_null() {
        return format!("status {code}");
    }
    // SAFETY: a NUL-terminated static string.
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}

/// `ncclGetLastError` (from 2.13): what the last failed call on `comm` (0: any) said.
fn last_error(loaded: &Loaded, comm: usize) -> Option<String> {
    type F = unsafe extern "C" fn(Comm) -> *const c_char;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclGetLastError")) }.ok()?;
    // SAFETY: a live communicator or null; it returns a string NCCL keeps, or null.
    let text = unsafe { f(comm as Comm) };
    // SAFETY: NUL-terminated when not null.
    (!text.is_null()).then(|| unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
}

/// `code` as a result where a non-blocking communicator may answer `ncclInProgress` (its
/// operation continues in the background: [`comm_state`] says when it is done).
fn check_started(loaded: &Loaded, code: c_int, call: &'static str, comm: Option<usize>) -> Result<()> {
    started(loaded, code, call, comm).map(drop)
}

/// [`check_started`], saying whether the operation is still under way.
fn started(loaded: &Loaded, code: c_int, call: &'static str, comm: Option<usize>) -> Result<Started> {
    if code == IN_PROGRESS {
        return Ok(Started::InProgress);
    }
    check(loaded, code, call, comm).map(|()| Started::Done)
}

/// How a call on a non-blocking communicator left its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Started {
    Done,
    /// Still under way (`ncclInProgress`): [`comm_state`] says when it is done.
    InProgress,
}

/// `NCCL_UNIQUE_ID_BYTES`.
pub(crate) const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: a struct of 128 chars, passed by value to `ncclCommInitRank*`.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawId {
    internal: [u8; UNIQUE_ID_BYTES],
}

/// `ncclGetUniqueId`: the id rank 0 makes and every rank of a new communicator is given.
pub(crate) fn get_unique_id(loaded: &Loaded) -> Result<[u8; UNIQUE_ID_BYTES]> {
    type F = unsafe extern "C" fn(*mut RawId) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclGetUniqueId")) }?;
    let mut id = RawId { internal: [0; UNIQUE_ID_BYTES] };
    // SAFETY: a writable id.
    check(loaded, unsafe { f(&mut id) }, "ncclGetUniqueId", None)?;
    Ok(id.internal)
}

/// `ncclConfig_t` as NCCL 2.14 declared it (size, magic, version, blocking), padded with
/// the first field 2.17 added. NCCL copies `size` bytes of it over its defaults and, seeing
/// version 2.14, keeps its defaults for every later field — so one layout serves every
/// version from 2.14 on, NCCL's and RCCL's.
#[repr(C)]
struct Config {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
    cga_cluster_size: c_int,
}

/// `NCCL_API_MAGIC`.
const API_MAGIC: u32 = 0xcafe_beef;
/// `NCCL_CONFIG_UNDEF_INT`: "the library's default".
const UNDEF_INT: c_int = c_int::MIN;

impl Config {
    /// `NCCL_CONFIG_INITIALIZER` of NCCL 2.14, with `blocking`.
    fn v2_14(blocking: bool) -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: API_MAGIC,
            version: 21400,
            blocking: c_int::from(blocking),
            cga_cluster_size: UNDEF_INT,
        }
    }
}

/// `ncclCommInitRankConfig` on the calling thread's current device, non-blocking: the
/// communicator's handle at once, its initialisation going on until [`comm_state`] says
/// it is done (the other ranks have joined) or failed.
pub(crate) fn comm_init_rank(loaded: &Loaded, id: &[u8; UNIQUE_ID_BYTES], ranks: c_int, rank: c_int) -> Result<usize> {
    type F = unsafe extern "C" fn(*mut Comm, c_int, RawId, c_int, *const Config) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclCommInitRankConfig")) }?;
    let config = Config::v2_14(false);
    let mut comm: Comm = std::ptr::null_mut();
    // SAFETY: a writable handle, an id by value and a config NCCL reads `size` bytes of.
    let code = unsafe { f(&mut comm, ranks, RawId { internal: *id }, rank, &config) };
    if let Err(e) = check_started(loaded, code, "ncclCommInitRankConfig", None) {
        // A communicator that exists despite the error is ended, not leaked.
        if !comm.is_null() {
            // SAFETY: a handle NCCL gave back, not used again.
            let _ = unsafe { comm_abort(loaded, comm as usize) };
        }
        return Err(e);
    }
    if comm.is_null() {
        return Err(Error::Collective {
            engine: loaded.flavour.name(),
            call: "ncclCommInitRankConfig",
            code: 0,
            message: "no communicator came back".into(),
        });
    }
    Ok(comm as usize)
}

/// `ncclCommSplit` with a non-blocking configuration: `comm`'s ranks passing one `color`
/// form a new communicator, ranked by `key` (`-1`, `NCCL_SPLIT_NOCOLOR`: none, a null
/// handle); written to `out` at once, or at the end of the group the call is in, its
/// initialisation going on until [`comm_state`] says it is done.
///
/// # Safety
/// `comm` is live; `out` stays writable until the group the call is in has ended.
pub(crate) unsafe fn comm_split(loaded: &Loaded, comm: usize, color: c_int, key: c_int, out: *mut usize) -> Result<()> {
    type F = unsafe extern "C" fn(Comm, c_int, c_int, *mut Comm, *const Config) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclCommSplit")) }?;
    let config = Config::v2_14(false);
    // SAFETY: the caller's promise; a handle is pointer-sized (asserted in `resolve`).
    let code = unsafe { f(comm as Comm, color, key, out.cast(), &config) };
    check_started(loaded, code, "ncclCommSplit", Some(comm))
}

/// `ncclCommInitAll`: one communicator per device ordinal of `devices`, ranks in that order.
pub(crate) fn comm_init_all(loaded: &Loaded, devices: &[c_int]) -> Result<Vec<usize>> {
    type F = unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclCommInitAll")) }?;
    let n = c_int::try_from(devices.len()).map_err(|_| Error::invalid_argument("too many devices"))?;
    let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); devices.len()];
    // SAFETY: `comms` has room for `n` handles and `devices` holds `n` ordinals.
    let code = unsafe { f(comms.as_mut_ptr(), n, devices.as_ptr()) };
    check(loaded, code, "ncclCommInitAll", None)?;
    Ok(comms.into_iter().map(|c| c as usize).collect())
}

/// `ncclCommCount` and `ncclCommUserRank`: `(rank, size)`.
pub(crate) fn comm_rank_size(loaded: &Loaded, comm: usize) -> Result<(usize, usize)> {
    type F = unsafe extern "C" fn(Comm, *mut c_int) -> c_int;
    // SAFETY: both calls' signature.
    let count = unsafe { resolve::<F>(loaded, index("ncclCommCount")) }?;
    // SAFETY: as above.
    let user_rank = unsafe { resolve::<F>(loaded, index("ncclCommUserRank")) }?;
    let (mut size, mut rank): (c_int, c_int) = (0, 0);
    // SAFETY: a live communicator and a writable int.
    check(loaded, unsafe { count(comm as Comm, &mut size) }, "ncclCommCount", Some(comm))?;
    // SAFETY: as above.
    check(loaded, unsafe { user_rank(comm as Comm, &mut rank) }, "ncclCommUserRank", Some(comm))?;
    let bad = || Error::Collective {
        engine: loaded.flavour.name(),
        call: "ncclCommUserRank",
        code: 0,
        message: format!("rank {rank} of {size}"),
    };
    let (rank, size) = (usize::try_from(rank).map_err(|_| bad())?, usize::try_from(size).map_err(|_| bad())?);
    if rank >= size {
        return Err(bad());
    }
    Ok((rank, size))
}

/// `ncclCommDestroy`: frees a communicator with no work in flight.
///
/// # Safety
/// `comm` is live and not used again.
pub(crate) unsafe fn comm_destroy(loaded: &Loaded, comm: usize) -> Result<()> {
    type F = unsafe extern "C" fn(Comm) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclCommDestroy")) }?;
    // SAFETY: the caller's promise.
    check(loaded, unsafe { f(comm as Comm) }, "ncclCommDestroy", None)
}

/// `ncclCommAbort`: ends a communicator's work in flight and frees it.
///
/// # Safety
/// `comm` is live and not used again.
pub(crate) unsafe fn comm_abort(loaded: &Loaded, comm: usize) -> Result<()> {
    type F = unsafe extern "C" fn(Comm) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclCommAbort")) }?;
    // SAFETY: the caller's promise.
    check(loaded, unsafe { f(comm as Comm) }, "ncclCommAbort", None)
}

/// Where a communicator stands (`ncclCommGetAsyncError`).
#[derive(Debug)]
pub(crate) enum State {
    Ready,
    /// A non-blocking communicator's operation (its initialisation, a launch, its
    /// finalisation) is still under way.
    InProgress,
    Failed(Error),
}

/// `ncclCommGetAsyncError`.
pub(crate) fn comm_state(loaded: &Loaded, comm: usize) -> Result<State> {
    type F = unsafe extern "C" fn(Comm, *mut c_int) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclCommGetAsyncError")) }?;
    let mut state: c_int = SUCCESS;
    // SAFETY: a live communicator and a writable status.
    check(loaded, unsafe { f(comm as Comm, &mut state) }, "ncclCommGetAsyncError", Some(comm))?;
    Ok(match state {
        SUCCESS => State::Ready,
        IN_PROGRESS => State::InProgress,
        failed => State::Failed(check(loaded, failed, "ncclCommGetAsyncError", Some(comm)).unwrap_err()),
    })
}

/// `ncclCommGetAsyncError`: `None` while the communicator is well (or an operation of it is
/// still under way), else the error it has met.
pub(crate) fn comm_async_error(loaded: &Loaded, comm: usize) -> Result<Option<Error>> {
    Ok(match comm_state(loaded, comm)? {
        State::Ready | State::InProgress => None,
        State::Failed(e) => Some(e),
    })
}

/// `ncclCommFinalize`: flushes a communicator's work before [`comm_destroy`] (a non-blocking
/// one finishes in the background: [`comm_state`] says when).
///
/// # Safety
/// `comm` is live and gets no more work.
pub(crate) unsafe fn comm_finalize(loaded: &Loaded, comm: usize) -> Result<()> {
    type F = unsafe extern "C" fn(Comm) -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclCommFinalize")) }?;
    // SAFETY: the caller's promise.
    check_started(loaded, unsafe { f(comm as Comm) }, "ncclCommFinalize", Some(comm))
}

/// `ncclGroupStart`.
pub(crate) fn group_start(loaded: &Loaded) -> Result<()> {
    type F = unsafe extern "C" fn() -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclGroupStart")) }?;
    // SAFETY: no arguments; the group is this thread's.
    check(loaded, unsafe { f() }, "ncclGroupStart", None)
}

/// `ncclGroupEnd`: launches what the thread queued since its `ncclGroupStart`.
pub(crate) fn group_end(loaded: &Loaded) -> Result<()> {
    type F = unsafe extern "C" fn() -> c_int;
    // SAFETY: the call's signature.
    let f = unsafe { resolve::<F>(loaded, index("ncclGroupEnd")) }?;
    // A group with non-blocking communicators launches in the background: each collective's
    // communicator is waited for before its end is recorded.
    // SAFETY: as above.
    check_started(loaded, unsafe { f() }, "ncclGroupEnd", None)
}

/// One collective as the engine takes it: its call, the device addresses, the element count
/// the call takes (per rank or per block, as its C API says), the engine's dtype and
/// reduction, and a root or peer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Launch {
    pub(crate) call: Call,
    pub(crate) send: u64,
    pub(crate) recv: u64,
    pub(crate) count: usize,
    pub(crate) dtype: c_int,
    pub(crate) op: c_int,
    /// The root (broadcast, reduce) or the peer (send, recv).
    pub(crate) rank: c_int,
}

/// The engine's collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    AllReduce,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Send,
    Recv,
}

impl Call {
    /// NCCL's name of the call.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Call::AllReduce => "ncclAllReduce",
            Call::Broadcast => "ncclBroadcast",
            Call::Reduce => "ncclReduce",
            Call::AllGather => "ncclAllGather",
            Call::ReduceScatter => "ncclReduceScatter",
            Call::AllToAll => "ncclAlltoAll",
            Call::Send => "ncclSend",
            Call::Recv => "ncclRecv",
        }
    }
}

/// Queues `launch` on `stream` for communicator `comm` (inside a group: at the group's end).
///
/// # Safety
/// `comm` and `stream` are live, on one device; `launch`'s addresses are device memory of
/// that device holding what its call reads and has room for what it writes, and stay so
/// until the work is done.
pub(crate) unsafe fn enqueue(loaded: &Loaded, comm: usize, stream: usize, l: &Launch) -> Result<Started> {
    // The last `c_int` is the reduction (all-reduce, reduce-scatter) or the root (broadcast).
    type Reduce = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> c_int;
    type RootedReduce =
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, c_int, Comm, Stream) -> c_int;
    type Moves = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> c_int;
    type Message = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, Stream) -> c_int;
    let i = index(l.call.name());
    let (send, recv) = (l.send as *const c_void, l.recv as *mut c_void);
    let (c, s) = (comm as Comm, stream as Stream);
    // SAFETY: each arm resolves its call as its C signature; the caller's promise for the
    // arguments.
    let code = unsafe {
        match l.call {
            Call::AllReduce | Call::ReduceScatter => {
                resolve::<Reduce>(loaded, i)?(send, recv, l.count, l.dtype, l.op, c, s)
            }
            Call::Broadcast => resolve::<Reduce>(loaded, i)?(send, recv, l.count, l.dtype, l.rank, c, s),
            Call::Reduce => resolve::<RootedReduce>(loaded, i)?(send, recv, l.count, l.dtype, l.op, l.rank, c, s),
            Call::AllGather | Call::AllToAll => resolve::<Moves>(loaded, i)?(send, recv, l.count, l.dtype, c, s),
            Call::Send => resolve::<Message>(loaded, i)?(send.cast_mut(), l.count, l.dtype, l.rank, c, s),
            Call::Recv => resolve::<Message>(loaded, i)?(recv, l.count, l.dtype, l.rank, c, s),
        }
    };
    // A non-blocking communicator may still be launching it: waited for before its end is
    // recorded.
    started(loaded, code, l.call.name(), Some(comm))
}
