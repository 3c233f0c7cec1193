//! MPI, loaded at run time through its standard ABI (`libmpi_abi.so.1`, MPI 5.0): the
//! library found, its entry points resolved by name, the process's MPI initialised once —
//! or joined when something else in the process initialised it — and finalised at exit only
//! when gpuport initialised it.
//!
//! Every call goes through [`Mpi::call`], which turns a failed one into
//! [`Error::Collective`] with MPI's own words: the world communicator (and every
//! communicator made from it) returns errors (`MPI_ERRORS_RETURN`) instead of aborting the
//! job. Calls from several threads are serialised by gpuport unless MPI granted
//! `MPI_THREAD_MULTIPLE`.

pub(crate) mod abi;
pub(crate) mod call;
pub(crate) mod check;
pub(crate) mod communicator;

use std::ffi::{c_char, c_int, CStr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use gpuport_core::{Error, Result};
use libloading::Library;

use abi::sig;

/// The engine's name in reports and errors.
pub const ENGINE: &str = "MPI";

/// The variable naming the MPI standard-ABI library to load.
pub const LIBRARY_ENV: &str = "GPUPORT_MPI_LIBRARY";
/// Set to `1` to run as a world of one rank in a process no launcher started.
pub const SINGLETON_ENV: &str = "GPUPORT_MPI_SINGLETON";

/// What launchers set in each rank's environment: MPICH's Hydra and Slurm (PMI), PMIx
/// launchers (Open MPI 5, Slurm with `--mpi=pmix`), Open MPI's own.
const LAUNCHER_VARS: [&str; 3] = ["PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"];

/// The standard ABI's library name.
const SONAME: &str = "libmpi_abi.so.1";

/// The entry points gpuport calls, resolved once by name.
pub(crate) struct Api {
    initialized: sig::Initialized,
    finalized: sig::Finalized,
    init_thread: sig::InitThread,
    query_thread: sig::QueryThread,
    finalize: sig::Finalize,
    get_library_version: sig::GetLibraryVersion,
    error_string: sig::ErrorString,
    pub(crate) comm_set_errhandler: sig::CommSetErrhandler,
    pub(crate) comm_rank: sig::CommRank,
    pub(crate) comm_size: sig::CommRank,
    pub(crate) comm_dup: sig::CommDup,
    pub(crate) comm_split: sig::CommSplit,
    pub(crate) comm_free: sig::CommFree,
    abort: sig::Abort,
    test: sig::Test,
    pub(crate) barrier: sig::Ibarrier,
    pub(crate) allreduce: sig::Iallreduce,
    pub(crate) bcast: sig::Ibcast,
    pub(crate) reduce: sig::Ireduce,
    pub(crate) allgather: sig::Iallgather,
    pub(crate) reduce_scatter_block: sig::IreduceScatterBlock,
    pub(crate) alltoall: sig::Iallgather,
    pub(crate) send: sig::Isend,
    pub(crate) recv: sig::Irecv,
}

/// `name` from `lib`, as a function of type `T`.
///
/// # Safety
/// `T` must be the function pointer type of `name`'s C signature.
unsafe fn symbol<T: Copy>(lib: &Library, name: &str, path: &str) -> Result<T> {
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    // SAFETY: the caller's promise that `T` is `name`'s type.
    match unsafe { lib.get::<T>(cname.as_slice()) } {
        Ok(f) => Ok(*f),
        Err(_) => Err(Error::EngineUnavailable {
            engine: ENGINE,
            reason: format!(
                "{path} has no `{name}`: it is not an MPI standard-ABI library (MPI 5.0's libmpi_abi.so, as MPICH 5 ships it)"
            ),
        }),
    }
}

impl Api {
    fn resolve(lib: &Library, path: &str) -> Result<Api> {
        // SAFETY: each name is resolved as the type of its standard C binding (`abi::sig`).
        unsafe {
            Ok(Api {
                initialized: symbol(lib, "MPI_Initialized", path)?,
                finalized: symbol(lib, "MPI_Finalized", path)?,
                init_thread: symbol(lib, "MPI_Init_thread", path)?,
                query_thread: symbol(lib, "MPI_Query_thread", path)?,
                finalize: symbol(lib, "MPI_Finalize", path)?,
                get_library_version: symbol(lib, "MPI_Get_library_version", path)?,
                error_string: symbol(lib, "MPI_Error_string", path)?,
                comm_set_errhandler: symbol(lib, "MPI_Comm_set_errhandler", path)?,
                comm_rank: symbol(lib, "MPI_Comm_rank", path)?,
                comm_size: symbol(lib, "MPI_Comm_size", path)?,
                comm_dup: symbol(lib, "MPI_Comm_dup", path)?,
                comm_split: symbol(lib, "MPI_Comm_split", path)?,
                comm_free: symbol(lib, "MPI_Comm_free", path)?,
                abort: symbol(lib, "MPI_Abort", path)?,
                test: symbol(lib, "MPI_Test", path)?,
                barrier: symbol(lib, "MPI_Ibarrier", path)?,
                allreduce: symbol(lib, "MPI_Iallreduce_c", path)?,
                bcast: symbol(lib, "MPI_Ibcast_c", path)?,
                reduce: symbol(lib, "MPI_Ireduce_c", path)?,
                allgather: symbol(lib, "MPI_Iallgather_c", path)?,
                reduce_scatter_block: symbol(lib, "MPI_Ireduce_scatter_block_c", path)?,
                alltoall: symbol(lib, "MPI_Ialltoall_c", path)?,
                send: symbol(lib, "MPI_Isend_c", path)?,
                recv: symbol(lib, "MPI_Irecv_c", path)?,
            })
        }
    }
}

/// A loaded MPI library: its table and version, before the process's MPI is initialised.
pub(crate) struct Loaded {
    api: Api,
    /// Where it was found.
    pub(crate) library: String,
    /// `MPI_Get_library_version`'s first line.
    pub(crate) version: String,
    /// Kept open for the process.
    _lib: Library,
}

/// The names tried, in order: `GPUPORT_MPI_LIBRARY` alone when set, else the soname, the
/// `lib/` of the active Python environment (where the `mpich` wheel puts it), and the
/// folders [`add_search_dir`](crate::add_search_dir) named.
pub(crate) fn candidates() -> Vec<String> {
    if let Some(path) = std::env::var_os(LIBRARY_ENV) {
        return vec![path.to_string_lossy().into_owned()];
    }
    let venv = std::env::var_os("VIRTUAL_ENV").map(|v| PathBuf::from(v).join("lib"));
    let mut out = vec![SONAME.to_owned()];
    // The active environment's place is tried (and named in the reason) whether or not it
    // holds the library; the named folders — many, from a Python module's `sys.path` — only
    // where it is there.
    let venv = venv.map(|dir| dir.join(SONAME));
    let added = crate::search::dirs().into_iter().map(|dir| dir.join(SONAME)).filter(|path| path.is_file());
    for path in venv.into_iter().chain(added) {
        let path = path.to_string_lossy().into_owned();
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// Opens the first of `candidates` that loads and has the standard ABI's entry points; the
/// reason names every attempt when none does.
pub(crate) fn load(candidates: &[String]) -> Result<Loaded> {
    // SAFETY: loading an MPI library runs its initialisers, which MPI implementations keep
    // free of side effects before MPI_Init.
    let opened = unsafe {
        crate::library::open_first(candidates, |lib, name| Api::resolve(lib, name).map_err(|e| e.to_string()))
    };
    match opened {
        Ok(found) => {
            let version = library_version(&found.accepted);
            Ok(Loaded { api: found.accepted, library: found.name, version, _lib: found.lib })
        }
        Err(tried) => Err(Error::EngineUnavailable {
            engine: ENGINE,
            reason: format!(
                "no MPI standard-ABI library loaded (tried {}); install one (the `mpich` wheel from PyPI, MPICH 5) or set {LIBRARY_ENV}",
                tried.join("; ")
            ),
        }),
    }
}

/// `MPI_Get_library_version`'s first line (callable before `MPI_Init`).
fn library_version(api: &Api) -> String {
    let mut buf = vec![0 as c_char; abi::MAX_LIBRARY_VERSION_STRING];
    let mut len: c_int = 0;
    // SAFETY: a buffer of the largest size the ABI allows, and an out-length.
    let code = unsafe { (api.get_library_version)(buf.as_mut_ptr(), &mut len) };
    if code != abi::SUCCESS {
        return "unknown".into();
    }
    buf[abi::MAX_LIBRARY_VERSION_STRING - 1] = 0;
    // SAFETY: NUL-terminated within the buffer (its last byte is 0).
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
    text.lines().next().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why this process cannot be an MPI rank, if it cannot: no launcher started it (and a
/// one-rank world was not asked for).
pub(crate) fn launch_problem(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    if var(SINGLETON_ENV).as_deref() == Some("1") || LAUNCHER_VARS.iter().any(|v| var(v).is_some()) {
        return None;
    }
    Some(format!(
        "this process was not started by an MPI launcher (none of {} is set): run it under mpiexec or srun, \
         or set {SINGLETON_ENV}=1 for a world of one rank",
        LAUNCHER_VARS.join(", ")
    ))
}

/// How long a collective started on the calling thread is tested there before it is
/// handed to its stream: about what a few-MiB collective takes between processes of one
/// machine, so those complete without a hand-off, while a caller that queued a longer one
/// to overlap it with other work is held at most this long.
pub(crate) const AT_ONCE_LIMIT: Duration = Duration::from_millis(1);

/// The pause between two tests of a call in flight: none for the first 50 µs (a small
/// collective between processes of one machine completes within a few microseconds, sooner
/// than a trip through the scheduler; MPI's own waits test back to back), then a yield of
/// the CPU to any other thread that can use it.
///
/// Without the spin where this machine runs more ranks than it has CPUs: a spinning rank
/// would then hold a CPU the rank it waits for needs.
pub(crate) struct Pace {
    since: Instant,
    /// Still in the spin: the clock is read every [`Pace::EVERY`] pauses, not every one.
    spinning: bool,
    pauses: u32,
}

impl Pace {
    const SPIN: Duration = Duration::from_micros(50);
    const EVERY: u32 = 32;

    pub(crate) fn new(mpi: &Mpi) -> Pace {
        Pace { since: Instant::now(), spinning: mpi.spin, pauses: 0 }
    }

    pub(crate) fn pause(&mut self) {
        if self.spinning {
            self.pauses += 1;
            if self.pauses.is_multiple_of(Self::EVERY) && self.since.elapsed() >= Self::SPIN {
                self.spinning = false;
            }
        } else {
            std::thread::yield_now();
        }
    }

    /// Time since the first pause was set out (read now).
    pub(crate) fn elapsed(&self) -> Duration {
        self.since.elapsed()
    }
}

/// A nonblocking call in flight: its request, when it started, and its MPI name.
pub(crate) struct InFlight {
    /// The `MPI_Request` handle, as an address (requests cross to stream workers).
    request: usize,
    started: Instant,
    call: &'static str,
    /// Tests so far (the watchdog reads the clock every so many).
    tests: u32,
}

/// The process's MPI, initialised (or joined).
pub struct Mpi {
    loaded: Arc<Loaded>,
    /// The thread level MPI granted.
    granted: c_int,
    /// Held around every call unless MPI granted `MPI_THREAD_MULTIPLE`.
    serial: Mutex<()>,
    /// gpuport called `MPI_Init_thread`, so it finalises at exit.
    owns_init: bool,
    /// This machine has a CPU for each of its ranks: waiters may spin ([`Pace`]).
    spin: bool,
}

/// The launchers' variables for the number of ranks on this machine: MPICH's Hydra, Open
/// MPI, PMIx launchers.
const LOCAL_SIZE_VARS: [&str; 3] = ["MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE"];

/// The ranks on this machine, as the launcher says — or `world` (all of them, the
/// cautious guess) when it does not.
fn local_ranks(world: usize, var: impl Fn(&str) -> Option<String>) -> usize {
    LOCAL_SIZE_VARS.iter().find_map(|v| var(v)?.trim().parse().ok()).unwrap_or(world)
}

static LOADED: OnceLock<Result<Arc<Loaded>>> = OnceLock::new();
static MPI: OnceLock<Result<Arc<Mpi>>> = OnceLock::new();

/// The loaded library, or why there is none (loaded once per process).
pub(crate) fn loaded() -> Result<Arc<Loaded>> {
    LOADED.get_or_init(|| load(&candidates()).map(Arc::new)).clone()
}

impl Mpi {
    /// The process's MPI: loaded and initialised on first use.
    pub fn get() -> Result<Arc<Mpi>> {
        MPI.get_or_init(Mpi::start).clone()
    }

    fn start() -> Result<Arc<Mpi>> {
        if let Some(reason) = launch_problem(|v| std::env::var(v).ok()) {
            return Err(Error::EngineUnavailable { engine: ENGINE, reason });
        }
        let loaded = loaded()?;
        let api = &loaded.api;
        let mut already: c_int = 0;
        // SAFETY: a valid out-pointer; callable at any time.
        check(api, unsafe { (api.initialized)(&mut already) }, "MPI_Initialized")?;
        let mut granted: c_int = 0;
        let owns_init = already == 0;
        if owns_init {
            // SAFETY: no arguments (the standard allows NULL argc/argv); a valid out-pointer.
            let code = unsafe {
                (api.init_thread)(std::ptr::null_mut(), std::ptr::null_mut(), abi::THREAD_MULTIPLE, &mut granted)
            };
            check(api, code, "MPI_Init_thread")?;
            // SAFETY: registering a function with no preconditions; it never unwinds.
            unsafe { libc::atexit(finalize_at_exit) };
        } else {
            // SAFETY: a valid out-pointer; MPI is initialised.
            check(api, unsafe { (api.query_thread)(&mut granted) }, "MPI_Query_thread")?;
        }
        // SAFETY: the world communicator and a predefined handler.
        let code =
            unsafe { (api.comm_set_errhandler)(abi::predefined(abi::COMM_WORLD), abi::predefined(abi::ERRORS_RETURN)) };
        check(api, code, "MPI_Comm_set_errhandler")?;
        if granted < abi::THREAD_SERIALIZED {
            return Err(Error::EngineUnavailable {
                engine: ENGINE,
                reason: format!(
                    "MPI granted thread level {granted} (below MPI_THREAD_SERIALIZED): gpuport calls MPI from stream \
                     workers, one call at a time"
                ),
            });
        }
        let mut world: c_int = 1;
        // SAFETY: the world communicator and a valid out-pointer.
        check(api, unsafe { (api.comm_size)(abi::predefined(abi::COMM_WORLD), &mut world) }, "MPI_Comm_size")?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spin = local_ranks(world.max(1) as usize, |v| std::env::var(v).ok()) <= cpus;
        Ok(Arc::new(Mpi { loaded, granted, serial: Mutex::new(()), owns_init, spin }))
    }

    /// The library's version line.
    pub fn version(&self) -> &str {
        &self.loaded.version
    }

    /// Where the library was found.
    pub fn library(&self) -> &str {
        &self.loaded.library
    }

    /// Runs `f` with the table — serialised unless MPI granted `MPI_THREAD_MULTIPLE` — and
    /// turns a failure into [`Error::Collective`] naming `call`.
    pub(crate) fn call(&self, call: &'static str, f: impl FnOnce(&Api) -> c_int) -> Result<()> {
        let _one_at_a_time: Option<MutexGuard<'_, ()>> =
            (self.granted < abi::THREAD_MULTIPLE).then(|| self.serial.lock().unwrap_or_else(|p| p.into_inner()));
        check(&self.loaded.api, f(&self.loaded.api), call)
    }

    /// Starts a nonblocking call with `start` (given the request to fill) and waits for it
    /// ([`Mpi::finish`]).
    pub(crate) fn call_waiting(
        &self,
        call: &'static str,
        what: impl Fn() -> String,
        start: impl FnOnce(&Api, *mut abi::Request) -> c_int,
    ) -> Result<()> {
        let flight = self.begin(call, start)?;
        self.finish(flight, what)
    }

    /// Starts a nonblocking call with `start`, given the request to fill.
    pub(crate) fn begin(
        &self,
        call: &'static str,
        start: impl FnOnce(&Api, *mut abi::Request) -> c_int,
    ) -> Result<InFlight> {
        let mut request: abi::Request = abi::predefined(abi::REQUEST_NULL);
        self.call(call, |api| start(api, &mut request))?;
        Ok(InFlight { request: request as usize, started: Instant::now(), call, tests: 0 })
    }

    /// Tests `flight` once (`MPI_Test`): whether it is complete.
    pub(crate) fn test(&self, flight: &mut InFlight) -> Result<bool> {
        let mut request = flight.request as abi::Request;
        let mut done: c_int = 0;
        // SAFETY: a live request (MPI sets it to MPI_REQUEST_NULL once complete, and a
        // complete flight is never tested again), a valid flag, and MPI_STATUS_IGNORE.
        self.call("MPI_Test", |api| unsafe { (api.test)(&mut request, &mut done, std::ptr::null_mut()) })?;
        flight.request = request as usize;
        Ok(done != 0)
    }

    /// Tests `flight` until it completes ([`Mpi::poll`]), back to back: MPI progresses a
    /// nonblocking call only while it is tested (MPICH's own `MPI_Wait` polls too), so a
    /// sleep between tests would stall a large collective's pipeline; the CPU is yielded
    /// between tests to any other thread that can use it.
    pub(crate) fn finish(&self, mut flight: InFlight, what: impl Fn() -> String) -> Result<()> {
        let mut pace = Pace::new(self);
        while !self.poll(&mut flight, &what)? {
            pace.pause();
        }
        Ok(())
    }

    /// Tests `flight` once: whether it is complete — or, once `GPUPORT_COLLECTIVE_TIMEOUT`
    /// seconds have passed since it started, an error: a rank has not arrived (it exited,
    /// or its program issued another collective), and the job is aborted (`MPI_Abort`,
    /// which the launcher reports) rather than left waiting for ever.
    pub(crate) fn poll(&self, flight: &mut InFlight, what: impl FnOnce() -> String) -> Result<bool> {
        if self.test(flight)? {
            return Ok(true);
        }
        // The clock is read every 64 tests: a test of a small call costs less than a read.
        flight.tests = flight.tests.wrapping_add(1);
        let limit = crate::timeout::limit();
        if !flight.tests.is_multiple_of(64) || flight.started.elapsed() <= limit {
            return Ok(false);
        }
        let message = format!(
            "gpuport: {} did not complete within {} s ({}): a rank did not arrive — it exited, or \
             issued another collective; aborting the job",
            what(),
            limit.as_secs(),
            crate::timeout::TIMEOUT_ENV
        );
        log::error!("{message}");
        // Straight to the process's stderr (a test harness captures `eprintln!`): the
        // launcher's log is where a user looks.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{message}\n").as_bytes());
        // SAFETY: the world communicator; the launcher ends every rank.
        let _ = unsafe { (self.loaded.api.abort)(abi::predefined(abi::COMM_WORLD), 1) };
        Err(Error::Collective { engine: ENGINE, call: flight.call, code: 1, message })
    }

    /// Whether MPI is finalised (communicators are then gone with it).
    pub(crate) fn finalized(&self) -> bool {
        let mut done: c_int = 0;
        // SAFETY: a valid out-pointer; callable at any time.
        let code = unsafe { (self.loaded.api.finalized)(&mut done) };
        code != abi::SUCCESS || done != 0
    }
}

/// `code` as a result: MPI's own message for a failure.
fn check(api: &Api, code: c_int, call: &'static str) -> Result<()> {
    if code == abi::SUCCESS {
        return Ok(());
    }
    let mut buf = vec![0 as c_char; abi::MAX_ERROR_STRING];
    let mut len: c_int = 0;
    // SAFETY: a buffer of the largest size the ABI allows, and an out-length.
    let message = if unsafe { (api.error_string)(code, buf.as_mut_ptr(), &mut len) } == abi::SUCCESS {
        buf[abi::MAX_ERROR_STRING - 1] = 0;
        // SAFETY: NUL-terminated within the buffer.
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
    } else {
        "no message".into()
    };
    Err(Error::Collective { engine: ENGINE, call, code: i64::from(code), message })
}

/// At process exit: `MPI_Finalize`, when gpuport initialised MPI and it is not finalised
/// yet. Never unwinds into the C runtime.
extern "C" fn finalize_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(Ok(mpi)) = MPI.get() {
            if mpi.owns_init && !mpi.finalized() {
                // SAFETY: MPI is initialised by gpuport and not finalised; exit runs this once.
                let _ = unsafe { (mpi.loaded.api.finalize)() };
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_names_what_was_tried() {
        let err = load(&["/nonexistent/libmpi_abi.so.1".into()]).err().expect("nothing loads");
        let text = err.to_string();
        assert!(matches!(err, Error::EngineUnavailable { engine: "MPI", .. }), "{err:?}");
        assert!(text.contains("/nonexistent/libmpi_abi.so.1") && text.contains(LIBRARY_ENV), "{text}");
    }

    #[test]
    fn a_library_without_the_standard_abi_is_refused_by_name() {
        let err = load(&["libm.so.6".into()]).err().expect("libm is not MPI");
        let text = err.to_string();
        assert!(text.contains("libm.so.6 has no `MPI_Initialized`"), "{text}");
    }

    #[test]
    fn the_ranks_on_this_machine_come_from_the_launcher_or_are_all_of_them() {
        let hydra = |v: &str| (v == "MPI_LOCALNRANKS").then(|| "2".to_owned());
        assert_eq!(local_ranks(64, hydra), 2);
        let open_mpi = |v: &str| (v == "OMPI_COMM_WORLD_LOCAL_SIZE").then(|| "8".to_owned());
        assert_eq!(local_ranks(64, open_mpi), 8);
        assert_eq!(local_ranks(64, |_: &str| None), 64);
        assert_eq!(local_ranks(4, |_: &str| Some("many".to_owned())), 4);
    }

    #[test]
    fn a_process_no_launcher_started_is_told_how_to_start_it() {
        let none = |_: &str| None;
        let reason = launch_problem(none).expect("no launcher");
        assert!(reason.contains("mpiexec") && reason.contains(SINGLETON_ENV), "{reason}");
        assert_eq!(launch_problem(|v: &str| (v == "PMI_RANK").then(|| "0".to_owned())), None);
        assert_eq!(launch_problem(|v: &str| (v == SINGLETON_ENV).then(|| "1".to_owned())), None);
    }
}
