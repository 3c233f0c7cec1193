//! The simulated machine: devices, contexts, memory, streams, events and modules, with
//! the validation layer's checks made where each call is served.
//!
//! One lock (`State`) orders every call; stream threads take it only to finish an
//! operation, never while holding their queue's lock, and calls that wait for work release
//! it first.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::clock::VClock;
use crate::config::Config;
use crate::faults::{Fault, Faults, StatusTable};
use crate::kernels::{FillLaunch, Kernel, StridedCopyLaunch};
use crate::memory::{DeviceSpace, HostBlock};
use crate::mutation::Mutation;
use crate::report::{violation, violation_outside_call};
pub use crate::stream::{in_host_function, HostFn as HostCallback, StreamKind};
use crate::stream::{spawn_worker, Completion, CtxShared, Op, RecordSlot, StreamCore, Work};
use crate::{Call, Error, Result};

/// The largest pitch a 2D copy accepts: 2³¹ − 1 bytes, what CUDA and HIP devices report
/// (`CU_DEVICE_ATTRIBUTE_MAX_PITCH`, `hipDeviceAttributeMaxPitch`).
pub const MAX_PITCH: usize = i32::MAX as usize;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a vendor tells the machine about itself.
pub struct Vendor {
    /// Its name in reports (`cuda`, `hip`).
    pub name: &'static str,
    /// The top bits of its handles, so that a handle of the other double (or a made-up
    /// one) is told apart from a destroyed one.
    pub tag: u16,
    /// What its function names start with (`cu`, `hip`): faults for other names are the
    /// other double's.
    pub prefix: &'static str,
    /// The status of every call on a lost device.
    pub lost_status: u32,
    /// Facts about device `i`.
    pub facts: fn(usize, usize) -> DeviceFacts,
}

/// Facts a device reports.
#[derive(Debug, Clone)]
pub struct DeviceFacts {
    /// Its name.
    pub name: String,
    /// Compute capability (CUDA) or the HIP equivalent.
    pub major: i32,
    /// Minor part.
    pub minor: i32,
    /// Multiprocessors / compute units.
    pub multiprocessors: i32,
    /// Architecture name (`gfx90a:sramecc+:xnack-`), for HIP.
    pub arch: String,
    /// PCI bus id (`0000:41:00.0`).
    pub pci_bus_id: String,
    /// UUID bytes.
    pub uuid: [u8; 16],
}

/// Kinds of handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandleKind {
    Context = 1,
    Stream = 2,
    Event = 3,
    Module = 4,
    Function = 5,
}

impl HandleKind {
    fn noun(self) -> &'static str {
        match self {
            HandleKind::Context => "context",
            HandleKind::Stream => "stream",
            HandleKind::Event => "event",
            HandleKind::Module => "module",
            HandleKind::Function => "function",
        }
    }
}

/// A stream named by a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRef {
    /// The current context's legacy default stream (CUDA's null and `CU_STREAM_LEGACY`
    /// handles, HIP's null stream).
    Legacy,
    /// The calling thread's per-thread default stream of the current context.
    PerThread,
    /// A created stream's handle.
    Handle(u64),
}

/// How a copy names its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemcpyCheck {
    /// Unified addressing: any memory the double knows, or host memory it does not.
    Unified,
    /// A peer copy: `dst` must be memory of device `dst_device`, `src` of `src_device`.
    Peer {
        /// The destination's device.
        dst_device: usize,
        /// The source's device.
        src_device: usize,
    },
}

/// What pointer attributes report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attributes {
    /// Device memory.
    Device,
    /// Pinned host memory.
    Pinned,
    /// Managed memory.
    Managed,
}

/// The answer about an address the double allocated.
#[derive(Debug, Clone, Copy)]
pub struct PointerInfo {
    /// What it is.
    pub kind: Attributes,
    /// The device it belongs to.
    pub device: usize,
    /// The context handle it was allocated in.
    pub context: u64,
    /// Start of its allocation.
    pub start: u64,
    /// Size of its allocation.
    pub size: u64,
}

/// Whether an event records timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventTiming {
    /// Timing on.
    On,
    /// `DISABLE_TIMING`.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AllocKind {
    Device,
    StreamOrdered,
    Pinned,
    Managed,
    /// Host memory someone else allocated, page-locked by `cuMemHostRegister` /
    /// `hipHostRegister`: pinned for copies, released by unregistering, never freed.
    Registered,
}

impl AllocKind {
    /// Page-locked host memory: the host's own addresses, reachable by every device.
    fn is_pinned_host(self) -> bool {
        matches!(self, AllocKind::Pinned | AllocKind::Registered)
    }
}

struct Alloc {
    id: u64,
    start: usize,
    size: usize,
    kind: AllocKind,
    device: usize,
    ctx: u64,
    origin: String,
    /// The stream-ordered free has been queued: work queued after it is a violation.
    freeing: bool,
    /// Queued operations still touching it.
    pending: u64,
    /// Freed while work was pending: its memory goes back when that work completes.
    zombie: bool,
    host: Option<HostBlock>,
    accesses: Vec<Access>,
}

#[derive(Clone)]
struct Access {
    stream: u64,
    tick: u64,
    lo: usize,
    hi: usize,
    write: bool,
    call: &'static str,
}

struct Ctx {
    device: usize,
    shared: Arc<CtxShared>,
    legacy: Option<Arc<StreamCore>>,
    per_thread: HashMap<ThreadId, Arc<StreamCore>>,
    peers: Vec<usize>,
    /// Primary context retains (CUDA); HIP's implicit contexts are never released.
    retains: u32,
}

struct StreamEntry {
    core: Arc<StreamCore>,
    origin: String,
}

struct EventEntry {
    ctx: u64,
    timing: EventTiming,
    last: Option<Arc<RecordSlot>>,
    origin: String,
}

struct ModuleEntry {
    ctx: u64,
    entries: Vec<String>,
    origin: String,
}

struct FunctionEntry {
    ctx: u64,
    module: u64,
    name: String,
}

#[derive(Default)]
struct State {
    next_id: u64,
    contexts: HashMap<u64, Ctx>,
    /// Per device: its primary (or implicit) context, when one exists.
    primary: Vec<Option<u64>>,
    streams: HashMap<u64, StreamEntry>,
    /// Clocks of every stream with queued work (default streams included).
    clocks: HashMap<u64, VClock>,
    host_clock: VClock,
    events: HashMap<u64, EventEntry>,
    modules: HashMap<u64, ModuleEntry>,
    functions: HashMap<u64, FunctionEntry>,
    /// Live allocations by start address.
    allocs: BTreeMap<usize, Alloc>,
    /// Freed allocations still used by queued work, by id.
    zombies: HashMap<u64, Alloc>,
    /// Handles ever given out and destroyed since, by kind (for "destroyed" vs "unknown").
    destroyed: HashMap<u64, HandleKind>,
    /// Destroyed streams whose queued work has not all completed: a context's
    /// synchronisation still waits for it.
    draining: Vec<Arc<StreamCore>>,
    /// Destroyed streams still in the clocks, each with its last tick: forgotten once the
    /// host clock covers that tick (see [`State::forget_retired`]).
    retiring: Vec<(u64, u64)>,
    /// Destroyed streams forgotten by the clocks: every access they made is ordered before
    /// every operation queued since (the host saw all of their work complete).
    retired: HashSet<u64>,
}

impl State {
    /// Joins what the host has seen complete into the host clock.
    fn learn(&mut self, clock: &VClock) {
        self.host_clock.join(clock);
        self.forget_retired();
    }

    /// Marks destroyed `stream` for forgetting, and forgets what can be.
    fn retire(&mut self, stream: u64) {
        let last = self.clocks.get(&stream).map_or(0, |c| c.get(stream));
        self.retiring.push((stream, last));
        self.forget_retired();
    }

    /// Drops from every clock the destroyed streams whose last tick the host clock covers.
    /// Without this each clock would hold a component for every stream the process ever
    /// made, and every operation (which copies and joins clocks) would cost more the
    /// longer the process ran. Their accesses still recorded on allocations count as
    /// ordered (`retired`): the host saw all of that work complete, and everything queued
    /// since starts from the host clock. Called after every join into the host clock.
    fn forget_retired(&mut self) {
        if self.retiring.is_empty() {
            return;
        }
        let host = &self.host_clock;
        let (done, waiting): (Vec<_>, Vec<_>) = self.retiring.iter().partition(|&&(s, last)| host.covers(s, last));
        self.retiring = waiting;
        for (stream, _) in done {
            self.clocks.remove(&stream);
            for clock in self.clocks.values_mut() {
                clock.forget(stream);
            }
            self.host_clock.forget(stream);
            self.retired.insert(stream);
        }
    }

    /// Whether an access `stream` made at `tick` is ordered before an operation with
    /// `clock`.
    fn ordered(&self, clock: &VClock, stream: u64, tick: u64) -> bool {
        clock.covers(stream, tick) || self.retired.contains(&stream)
    }
}

/// The simulated machine (one per double, per process).
pub struct Machine {
    vendor: Vendor,
    config: Config,
    faults: Faults,
    /// The deliberate flaw it runs with, if any (the mutation check's driver mutants).
    mutation: Option<Mutation>,
    spaces: Vec<Mutex<DeviceSpace>>,
    facts: Vec<DeviceFacts>,
    lost: Vec<AtomicBool>,
    state: Mutex<State>,
    /// When the last call arrived (for settling before the exit check).
    last_call: AtomicU64,
    epoch: Instant,
}

static MACHINE: OnceLock<Machine> = OnceLock::new();

thread_local! {
    /// The calling thread's current context handle (0: none).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// A sticky or lost fault planned for the call being served.
    static PENDING: Cell<Option<Fault>> = const { Cell::new(None) };
}

/// The calling thread's current context handle (0: none).
pub fn current_context() -> u64 {
    CURRENT.with(Cell::get)
}

/// Makes `handle` current on the calling thread (0: none). Checked by
/// [`Machine::check_context`] first.
pub fn set_current_context(handle: u64) {
    CURRENT.with(|c| c.set(handle));
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(m) = MACHINE.get() {
            m.exit_check();
            if m.config.leak_check {
                crate::nccl::exit_check();
            }
            if let Some(status) = m.config.fail_exit.filter(|_| crate::report::count() > 0) {
                // SAFETY: ends the process at once, as asked, with the status that says
                // reports were made; nothing after this handler needs to run.
                unsafe { libc::_exit(status) };
            }
        }
    });
}

impl Completion for Machine {
    fn done(&self, op: &Op) {
        if op.touches.is_empty() && !matches!(op.work, Work::Free(_)) {
            return;
        }
        let mut st = lock(&self.state);
        for id in &op.touches {
            st.unpend(*id, &self.spaces);
        }
        if let Work::Free(id) = op.work {
            if let Some(start) = st.allocs.iter().find(|(_, a)| a.id == id).map(|(&s, _)| s) {
                if let Some(mut alloc) = st.allocs.remove(&start) {
                    alloc.zombie = true;
                    if alloc.pending == 0 {
                        release(alloc, &self.spaces);
                    } else {
                        st.zombies.insert(id, alloc);
                    }
                }
            }
        }
    }
    fn delay(&self) -> Duration {
        self.config.delay
    }
    fn newest_first(&self) -> bool {
        self.mutated(Mutation::OutOfOrder)
    }
}

/// Gives an allocation's memory back.
fn release(alloc: Alloc, spaces: &[Mutex<DeviceSpace>]) {
    if alloc.host.is_none() && alloc.kind != AllocKind::Registered {
        lock(&spaces[alloc.device]).release(alloc.start, alloc.size);
    }
    // A host block unmaps on drop.
}

impl State {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn unpend(&mut self, id: u64, spaces: &[Mutex<DeviceSpace>]) {
        if let Some(a) = self.allocs.values_mut().find(|a| a.id == id) {
            a.pending = a.pending.saturating_sub(1);
            return;
        }
        if let Some(z) = self.zombies.get_mut(&id) {
            z.pending = z.pending.saturating_sub(1);
            if z.pending == 0 {
                if let Some(z) = self.zombies.remove(&id) {
                    release(z, spaces);
                }
            }
        }
    }

    /// The live allocation holding `addr`, if any.
    fn alloc_at(&self, addr: usize) -> Option<&Alloc> {
        let (_, a) = self.allocs.range(..=addr).next_back()?;
        (addr < a.start + a.size.max(1)).then_some(a)
    }
}

fn origin(cx: &Call<'_>) -> String {
    format!("{} on thread {:?}", cx.name, std::thread::current().name().unwrap_or("unnamed"))
}

impl Machine {
    /// The machine, made on first use (the vendor's init call), with its settings read
    /// from the environment. A fault specification that does not parse is reported and
    /// ignored.
    pub fn init(vendor: Vendor, table: &dyn StatusTable, prefixes: &[&str]) -> &'static Machine {
        MACHINE.get_or_init(|| {
            crate::report::set_vendor(vendor.name);
            let config = Config::from_env();
            let faults = Faults::parse(&config.faults, vendor.prefix, table, prefixes).unwrap_or_else(|e| {
                violation_outside_call("bad-fault-spec", format!("{}: {e}", crate::config::FAULTS_ENV));
                Faults::default()
            });
            let mutation = match config.mutant.trim() {
                "" => None,
                name => Mutation::parse(name).or_else(|| {
                    violation_outside_call(
                        "bad-mutant",
                        format!("{}: no flaw named {name:?}", crate::config::MUTANT_ENV),
                    );
                    None
                }),
            };
            let spaces: Vec<Mutex<DeviceSpace>> =
                (0..config.devices).filter_map(|_| DeviceSpace::new(config.memory)).map(Mutex::new).collect();
            let facts = (0..spaces.len()).map(|i| (vendor.facts)(i, config.memory)).collect();
            let lost = (0..spaces.len()).map(|_| AtomicBool::new(false)).collect();
            let state = State { primary: vec![None; spaces.len()], ..State::default() };
            // SAFETY: registering a plain function to run at exit; the double is linked
            // with `-z nodelete`, so its code outlives every handler.
            unsafe { libc::atexit(at_exit) };
            Machine {
                vendor,
                config,
                faults,
                mutation,
                spaces,
                facts,
                lost,
                state: Mutex::new(state),
                last_call: AtomicU64::new(0),
                epoch: Instant::now(),
            }
        })
    }

    /// Whether the machine runs with flaw `m`.
    fn mutated(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }

    /// The machine, once initialised.
    pub fn get() -> Option<&'static Machine> {
        MACHINE.get()
    }

    /// For a runtime without contexts (HIP's model): the machine, once initialised, with
    /// the call entered and the calling thread's device made current — device 0 until the
    /// thread picks another.
    pub fn with_current_device(cx: &Call<'_>) -> Result<&'static Machine> {
        let m = Machine::get().ok_or(Error::NotInitialized)?;
        m.enter(cx)?;
        if current_context() == 0 && m.device_count() > 0 {
            set_current_context(m.implicit_context(0));
        }
        Ok(m)
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Number of devices.
    pub fn device_count(&self) -> usize {
        self.spaces.len()
    }

    /// Starts serving a call: refuses driver calls from inside a host function (reported),
    /// counts the call for fault injection and applies a planned plain failure. A planned
    /// sticky or lost fault is applied by the first context or device the call touches.
    pub fn enter(&self, cx: &Call<'_>) -> Result<()> {
        self.last_call.store(self.epoch.elapsed().as_millis() as u64, Ordering::SeqCst);
        PENDING.with(|p| p.set(None));
        if in_host_function() {
            violation(
                "call-in-host-function",
                cx,
                "a driver call from inside a host function (CUDA forbids it; HIP may deadlock)",
            );
            return Err(Error::NotPermitted);
        }
        match self.faults.on_call(cx.name) {
            Some(Fault::Fail(code)) => Err(Error::Raw(code)),
            other => {
                PENDING.with(|p| p.set(other));
                Ok(())
            }
        }
    }

    fn take_pending() -> Option<Fault> {
        PENDING.with(|p| p.take())
    }

    fn encode(&self, kind: HandleKind, id: u64) -> u64 {
        (u64::from(self.vendor.tag | kind as u16) << 48) | id
    }

    /// Decodes a handle of `kind`, reporting an unknown, destroyed or mistyped one.
    fn decode(&self, cx: &Call<'_>, st: &State, kind: HandleKind, handle: u64) -> Result<u64> {
        let tag = (handle >> 48) as u16;
        let id = handle & ((1 << 48) - 1);
        let what = if tag & 0xFF00 != self.vendor.tag {
            format!("{handle:#x} is not a {} handle this driver gave out", kind.noun())
        } else if tag & 0xFF != kind as u16 {
            let given =
                [HandleKind::Context, HandleKind::Stream, HandleKind::Event, HandleKind::Module, HandleKind::Function]
                    .into_iter()
                    .find(|k| *k as u16 == tag & 0xFF)
                    .map_or("unknown", HandleKind::noun);
            format!("a {given} handle {handle:#x} passed as a {}", kind.noun())
        } else if st.destroyed.contains_key(&id) {
            format!("the {} {handle:#x} was destroyed", kind.noun())
        } else {
            return Ok(id);
        };
        violation("bad-handle", cx, what);
        Err(Error::InvalidHandle)
    }

    fn check_lost(&self, device: usize) -> Result<()> {
        if self.lost[device].load(Ordering::SeqCst) {
            return Err(Error::Raw(self.vendor.lost_status));
        }
        Ok(())
    }

    /// Applies a planned fault to a call about `device` (lost) or its context `shared`
    /// (sticky, at once).
    fn fault_now(&self, st: &mut State, device: usize, shared: Option<&Arc<CtxShared>>) -> Result<()> {
        match Self::take_pending() {
            Some(Fault::Lost) => {
                self.lose(st, device);
                Err(Error::Raw(self.vendor.lost_status))
            }
            Some(Fault::Sticky(code)) => {
                if let Some(s) = shared {
                    s.poison(code);
                }
                Err(Error::Raw(code))
            }
            _ => Ok(()),
        }
    }

    fn lose(&self, st: &mut State, device: usize) {
        self.lost[device].store(true, Ordering::SeqCst);
        for ctx in st.contexts.values().filter(|c| c.device == device) {
            ctx.shared.poison(self.vendor.lost_status);
        }
    }

    /// Checks that device ordinal `ordinal` exists and is not lost (device queries).
    pub fn check_device(&self, ordinal: i64) -> Result<usize> {
        let device = usize::try_from(ordinal).ok().filter(|&d| d < self.device_count()).ok_or(Error::InvalidDevice)?;
        if matches!(PENDING.with(|p| p.get()), Some(Fault::Lost)) {
            let mut st = lock(&self.state);
            self.fault_now(&mut st, device, None)?;
        }
        self.check_lost(device)?;
        Ok(device)
    }

    /// The facts of a checked device.
    pub fn facts(&self, device: usize) -> &DeviceFacts {
        &self.facts[device]
    }

    /// Bytes of memory per device.
    pub fn memory_per_device(&self) -> usize {
        self.config.memory
    }

    // --- contexts ---------------------------------------------------------------------

    fn new_context(&self, st: &mut State, device: usize) -> u64 {
        let id = st.id();
        let ctx = Ctx {
            device,
            shared: Arc::default(),
            legacy: None,
            per_thread: HashMap::new(),
            peers: Vec::new(),
            retains: 0,
        };
        st.contexts.insert(id, ctx);
        st.primary[device] = Some(id);
        id
    }

    /// `cuDevicePrimaryCtxRetain`: the device's primary context, made when none is live.
    pub fn primary_retain(&self, cx: &Call<'_>, device: usize) -> Result<u64> {
        let mut st = lock(&self.state);
        self.fault_now(&mut st, device, None)?;
        let id = match st.primary[device] {
            Some(id) => id,
            None => self.new_context(&mut st, device),
        };
        let _ = cx;
        if let Some(c) = st.contexts.get_mut(&id) {
            c.retains += 1;
        }
        Ok(self.encode(HandleKind::Context, id))
    }

    /// `cuDevicePrimaryCtxRelease`: at the last release the context is destroyed with
    /// everything in it; what is still alive then was leaked (reported, unless the context
    /// had failed and could not be cleaned up any more).
    pub fn primary_release(&self, cx: &Call<'_>, device: usize) -> Result<()> {
        let mut st = lock(&self.state);
        let Some(id) = st.primary[device] else {
            violation("bad-release", cx, format!("the primary context of device {device} is not retained"));
            return Err(Error::InvalidContext);
        };
        let Some(ctx) = st.contexts.get_mut(&id) else { return Err(Error::InvalidContext) };
        ctx.retains -= 1;
        if ctx.retains > 0 {
            return Ok(());
        }
        let failed = ctx.shared.poisoned().is_some();
        let leaks = self.objects_of(&st, Some(id));
        if !failed && !leaks.is_empty() {
            violation(
                "leak",
                cx,
                format!("the last release of the primary context of device {device} leaves {}", leaks.join("; ")),
            );
        }
        self.destroy_context(&mut st, id);
        Ok(())
    }

    /// The implicit context of a device (HIP): made once, never released.
    pub fn implicit_context(&self, device: usize) -> u64 {
        let mut st = lock(&self.state);
        let id = match st.primary[device] {
            Some(id) => id,
            None => {
                let id = self.new_context(&mut st, device);
                if let Some(c) = st.contexts.get_mut(&id) {
                    c.retains = 1;
                }
                id
            }
        };
        self.encode(HandleKind::Context, id)
    }

    fn destroy_context(&self, st: &mut State, id: u64) {
        let Some(ctx) = st.contexts.remove(&id) else { return };
        if st.primary[ctx.device] == Some(id) {
            st.primary[ctx.device] = None;
        }
        st.destroyed.insert(id, HandleKind::Context);
        for s in ctx.legacy.iter().chain(ctx.per_thread.values()) {
            s.close();
            st.retire(s.id);
        }
        let streams: Vec<u64> = st.streams.iter().filter(|(_, s)| s.core.ctx == id).map(|(&k, _)| k).collect();
        for s in streams {
            if let Some(e) = st.streams.remove(&s) {
                e.core.close();
            }
            st.retire(s);
            st.destroyed.insert(s, HandleKind::Stream);
        }
        st.events.retain(|_, e| e.ctx != id);
        st.modules.retain(|_, m| m.ctx != id);
        st.functions.retain(|_, f| f.ctx != id);
        let starts: Vec<usize> = st.allocs.iter().filter(|(_, a)| a.ctx == id).map(|(&s, _)| s).collect();
        for s in starts {
            if let Some(mut a) = st.allocs.remove(&s) {
                a.zombie = true;
                if a.pending == 0 {
                    release(a, &self.spaces);
                } else {
                    st.zombies.insert(a.id, a);
                }
            }
        }
    }

    /// Checks a context handle a call names (`cuCtxSetCurrent`); 0 is allowed (none).
    pub fn check_context(&self, cx: &Call<'_>, handle: u64) -> Result<()> {
        if handle == 0 {
            return Ok(());
        }
        let st = lock(&self.state);
        let id = self.decode(cx, &st, HandleKind::Context, handle)?;
        if !st.contexts.contains_key(&id) {
            violation("bad-handle", cx, format!("{handle:#x} is not a live context"));
            return Err(Error::InvalidContext);
        }
        Ok(())
    }

    /// The current context's id, checked: reports a call that needs one without one (or
    /// with a destroyed one), returns the context's sticky error once it failed.
    fn current(&self, cx: &Call<'_>, st: &mut State) -> Result<u64> {
        let handle = current_context();
        if handle == 0 {
            violation("no-context", cx, "the call needs a current context and the thread has none");
            return Err(Error::InvalidContext);
        }
        let id = handle & ((1 << 48) - 1);
        let Some(ctx) = st.contexts.get(&id) else {
            violation("no-context", cx, format!("the current context {handle:#x} was destroyed"));
            return Err(Error::InvalidContext);
        };
        let (device, shared) = (ctx.device, ctx.shared.clone());
        self.check_lost(device)?;
        if let Some(code) = shared.poisoned() {
            return Err(Error::Raw(code));
        }
        Ok(id)
    }

    /// The current context (checked as [`Machine::current`] does), its device and shared
    /// state, after applying a fault planned for this call to them.
    fn current_with_fault(&self, cx: &Call<'_>, st: &mut State) -> Result<(u64, usize, Arc<CtxShared>)> {
        let ctx = self.current(cx, st)?;
        let (device, shared) = (st.contexts[&ctx].device, st.contexts[&ctx].shared.clone());
        self.fault_now(st, device, Some(&shared))?;
        Ok((ctx, device, shared))
    }

    /// The current context's device (for calls that allocate or load on it).
    pub fn current_device(&self, cx: &Call<'_>) -> Result<usize> {
        let mut st = lock(&self.state);
        let id = self.current(cx, &mut st)?;
        Ok(st.contexts[&id].device)
    }

    /// The device of context `handle`, if it is live.
    pub fn context_device(&self, handle: u64) -> Option<usize> {
        lock(&self.state).contexts.get(&(handle & ((1 << 48) - 1))).map(|c| c.device)
    }

    // --- streams ----------------------------------------------------------------------

    fn default_stream(&self, st: &mut State, ctx_id: u64, kind: StreamKind) -> Arc<StreamCore> {
        let thread = std::thread::current().id();
        let existing = {
            let ctx = &st.contexts[&ctx_id];
            match kind {
                StreamKind::Legacy => ctx.legacy.clone(),
                _ => ctx.per_thread.get(&thread).cloned(),
            }
        };
        if let Some(s) = existing {
            return s;
        }
        let id = st.id();
        let ctx = st.contexts.get_mut(&ctx_id).expect("a live context");
        let core = StreamCore::new(id, ctx_id, ctx.device, kind, ctx.shared.clone());
        match kind {
            StreamKind::Legacy => ctx.legacy = Some(core.clone()),
            _ => {
                ctx.per_thread.insert(thread, core.clone());
            }
        }
        spawn_worker(core.clone(), self.machine_ref());
        core
    }

    fn machine_ref(&self) -> &'static Machine {
        MACHINE.get().expect("streams exist only once the machine does")
    }

    /// Resolves a stream a call names; special handles mean the current context's.
    fn stream(&self, cx: &Call<'_>, st: &mut State, s: StreamRef) -> Result<Arc<StreamCore>> {
        let core = match s {
            StreamRef::Legacy | StreamRef::PerThread => {
                let ctx = self.current(cx, st)?;
                let kind = if s == StreamRef::Legacy { StreamKind::Legacy } else { StreamKind::PerThread };
                self.default_stream(st, ctx, kind)
            }
            StreamRef::Handle(h) => {
                let id = self.decode(cx, st, HandleKind::Stream, h)?;
                let Some(e) = st.streams.get(&id) else {
                    violation("bad-handle", cx, format!("{h:#x} is not a live stream"));
                    return Err(Error::InvalidHandle);
                };
                if current_context() == 0 {
                    violation("no-context", cx, "the call needs a current context and the thread has none");
                    return Err(Error::InvalidContext);
                }
                e.core.clone()
            }
        };
        self.check_lost(core.device)?;
        if let Some(code) = core.shared.poisoned() {
            return Err(Error::Raw(code));
        }
        Ok(core)
    }

    /// `cuStreamCreateWithPriority` in the current context.
    pub fn stream_create(&self, cx: &Call<'_>, blocking: bool) -> Result<u64> {
        let mut st = lock(&self.state);
        let (ctx, device, shared) = self.current_with_fault(cx, &mut st)?;
        let id = st.id();
        let blocking = blocking || self.mutated(Mutation::AllStreamsBlocking);
        let core = StreamCore::new(id, ctx, device, StreamKind::Created { blocking }, shared);
        spawn_worker(core.clone(), self.machine_ref());
        st.streams.insert(id, StreamEntry { core, origin: origin(cx) });
        Ok(self.encode(HandleKind::Stream, id))
    }

    /// `cuStreamDestroy`: queued work still completes; the handle is dead at once.
    pub fn stream_destroy(&self, cx: &Call<'_>, handle: u64) -> Result<()> {
        let mut st = lock(&self.state);
        let id = self.decode(cx, &st, HandleKind::Stream, handle)?;
        let Some(entry) = st.streams.remove(&id) else {
            violation("bad-handle", cx, format!("{handle:#x} is not a live stream"));
            return Err(Error::InvalidHandle);
        };
        st.destroyed.insert(id, HandleKind::Stream);
        entry.core.close();
        st.draining.retain(|s| s.completed() < s.enqueued());
        st.draining.push(entry.core.clone());
        st.retire(id);
        if let Some(code) = entry.core.shared.poisoned() {
            return Err(Error::Raw(code));
        }
        Ok(())
    }

    /// The operations a new operation on `core` must wait for, with the clock joins the
    /// legacy stream's implicit synchronisation makes.
    fn implicit_waits(&self, st: &mut State, core: &Arc<StreamCore>) -> Vec<(Arc<StreamCore>, u64)> {
        if self.mutated(Mutation::NoImplicitSync) {
            return Vec::new();
        }
        let ctx = &st.contexts[&core.ctx];
        let others: Vec<Arc<StreamCore>> = match core.kind {
            StreamKind::Legacy => st
                .streams
                .values()
                .map(|e| &e.core)
                .chain(ctx.per_thread.values())
                .filter(|s| s.ctx == core.ctx && s.kind.is_blocking())
                .cloned()
                .collect(),
            k if k.is_blocking() => ctx.legacy.iter().cloned().collect(),
            _ => Vec::new(),
        };
        let mut waits = Vec::new();
        for other in others {
            let tail = other.enqueued();
            if tail > other.completed() {
                waits.push((other.clone(), tail));
            }
            if let Some(c) = st.clocks.get(&other.id).cloned() {
                st.clocks.entry(core.id).or_default().join(&c);
            }
        }
        waits
    }

    /// Queues the work `make` builds (given its sequence number and the stream's clock
    /// after this operation) on a stream, with the checks and bookkeeping every queued
    /// operation gets: a planned fault, the legacy stream's waits, the clock tick, the
    /// hazard check of each memory access, the pending-work counts.
    fn enqueue(
        &self,
        cx: &Call<'_>,
        st: &mut State,
        core: &Arc<StreamCore>,
        make: impl FnOnce(u64, &VClock) -> Work,
        accesses: &[(usize, usize, bool)],
        mut waits: Vec<(Arc<StreamCore>, u64)>,
    ) -> Result<u64> {
        let fault = Self::take_pending();
        if fault == Some(Fault::Lost) {
            self.lose(st, core.device);
            return Err(Error::Raw(self.vendor.lost_status));
        }
        waits.extend(self.implicit_waits(st, core));
        let clock = {
            let c = st.clocks.entry(core.id).or_default();
            c.join(&st.host_clock);
            c.tick(core.id);
            c.clone()
        };
        let tick = clock.get(core.id);
        let mut touches = Vec::new();
        for &(addr, len, write) in accesses {
            if let Some(id) = self.track_access(cx, st, core, &clock, tick, addr, len, write) {
                touches.push(id);
            }
        }
        let seq = core.enqueued() + 1;
        let work = match fault {
            // The work fails when it runs: nothing of it happens, the context is poisoned.
            Some(Fault::Sticky(code)) => Work::Poison(code),
            _ => make(seq, &clock),
        };
        Ok(core.push(Op { waits, work, touches }))
    }

    /// Checks one access against the unordered accesses of other streams, records it, and
    /// counts the pending work. Returns the allocation's id when the double tracks it.
    #[allow(clippy::too_many_arguments)]
    fn track_access(
        &self,
        cx: &Call<'_>,
        st: &mut State,
        core: &StreamCore,
        clock: &VClock,
        tick: u64,
        addr: usize,
        len: usize,
        write: bool,
    ) -> Option<u64> {
        let start = st.alloc_at(addr)?.start;
        let (lo, hi) = (addr, addr + len);
        let racing = st.allocs.get(&start)?.accesses.iter().find(|prior| {
            let overlaps = prior.lo < hi && lo < prior.hi;
            overlaps
                && prior.stream != core.id
                && (prior.write || write)
                && !st.ordered(clock, prior.stream, prior.tick)
        });
        if let Some(prior) = racing {
            violation(
                "hazard",
                cx,
                format!(
                    "{} [{lo:#x}, {hi:#x}) on stream {} while stream {} {} [{:#x}, {:#x}) ({}) with nothing ordering the two \
                     (no event wait, synchronize or legacy-stream ordering between them)",
                    if write { "writes" } else { "reads" },
                    core.id,
                    prior.stream,
                    if prior.write { "writes" } else { "reads" },
                    prior.lo,
                    prior.hi,
                    prior.call,
                ),
            );
        }
        // Forget what every later operation is ordered after anyway, and what this access
        // supersedes on its own stream.
        let (host, retired) = (&st.host_clock, &st.retired);
        let alloc = st.allocs.get_mut(&start)?;
        alloc.accesses.retain(|a| {
            !host.covers(a.stream, a.tick)
                && !retired.contains(&a.stream)
                && !(a.stream == core.id && lo <= a.lo && a.hi <= hi && (write || !a.write))
        });
        if alloc.accesses.len() >= 256 {
            alloc.accesses.remove(0);
        }
        alloc.accesses.push(Access { stream: core.id, tick, lo, hi, write, call: cx.name });
        alloc.pending += 1;
        Some(alloc.id)
    }

    /// Resolves `[addr, addr + len)` to the double's view of it: the shadow for device
    /// memory, the address itself for host memory. A range that runs past its allocation,
    /// or device addresses no live allocation holds, are reported. `device` limits which
    /// device's memory is allowed (peer copies name it).
    fn resolve(&self, cx: &Call<'_>, st: &State, addr: usize, len: usize, device: Option<usize>) -> Result<*mut u8> {
        if let Some(a) = st.alloc_at(addr) {
            let end = addr.checked_add(len).ok_or(Error::InvalidValue)?;
            if end > a.start + a.size {
                violation(
                    "out-of-bounds",
                    cx,
                    format!(
                        "[{addr:#x}, {end:#x}) runs past its allocation [{:#x}, {:#x}) ({})",
                        a.start,
                        a.start + a.size,
                        a.origin
                    ),
                );
                return Err(Error::InvalidValue);
            }
            if a.freeing {
                violation(
                    "use-after-free",
                    cx,
                    format!("[{addr:#x}, {end:#x}) is queued after its stream-ordered free"),
                );
                return Err(Error::InvalidValue);
            }
            if let Some(d) = device {
                if a.device != d || a.kind.is_pinned_host() {
                    violation("wrong-device", cx, format!("{addr:#x} is not device memory of device {d}"));
                    return Err(Error::InvalidValue);
                }
            }
            return Ok(match a.host.is_some() || a.kind == AllocKind::Registered {
                true => addr as *mut u8,
                false => lock(&self.spaces[a.device]).shadow_of(addr),
            });
        }
        if let Some(d) = self.spaces.iter().position(|s| lock(s).contains(addr)) {
            violation(
                "unknown-address",
                cx,
                format!("{addr:#x} is device memory of device {d} that no live allocation holds (freed, or never allocated)"),
            );
            return Err(Error::InvalidValue);
        }
        if device.is_some() {
            violation("wrong-device", cx, format!("{addr:#x} is not device memory"));
            return Err(Error::InvalidValue);
        }
        if addr == 0 {
            violation("null-pointer", cx, "a null address");
            return Err(Error::InvalidValue);
        }
        // Host memory the double did not allocate (pageable): used as is.
        Ok(addr as *mut u8)
    }

    /// `cuMemcpyAsync` / `hipMemcpyAsync` / the peer copies.
    pub fn memcpy(
        &self,
        cx: &Call<'_>,
        dst: usize,
        src: usize,
        len: usize,
        s: StreamRef,
        check: MemcpyCheck,
    ) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        if len == 0 {
            return Ok(());
        }
        let (dd, sd) = match check {
            MemcpyCheck::Unified => (None, None),
            MemcpyCheck::Peer { dst_device, src_device } => (Some(dst_device), Some(src_device)),
        };
        let src = match self.mutated(Mutation::CopyIgnoresOffset) {
            true => st.alloc_at(src).map_or(src, |a| a.start),
            false => src,
        };
        let d = self.resolve(cx, &st, dst, len, dd)?;
        let sp = self.resolve(cx, &st, src, len, sd)?;
        let work = Work::Copy { dst: d, src: sp, len };
        let seq = self.enqueue(cx, &mut st, &core, |_, _| work, &[(src, len, false), (dst, len, true)], Vec::new())?;
        self.finish_if_pageable(st, &core, seq, dst)
    }

    /// A copy into pageable host memory (an address no allocation or registration holds)
    /// returns only once it has completed, as both vendors' asynchronous copies do: the
    /// caller waits for the stream to reach it and learns what it wrote.
    fn finish_if_pageable(
        &self,
        st: MutexGuard<'_, State>,
        core: &Arc<StreamCore>,
        seq: u64,
        dst: usize,
    ) -> Result<()> {
        if st.alloc_at(dst).is_some() {
            return Ok(());
        }
        let targets = vec![(core.clone(), seq)];
        let clocks = Self::clocks_of(&st, &targets);
        drop(st);
        self.wait_and_learn(targets, clocks);
        self.check_lost(core.device)
    }

    /// `cuMemcpy2DAsync` / `hipMemcpy2DAsync` between unified addresses: `height` rows of
    /// `width` bytes, each side's rows its pitch apart. Each pitch must be at least the
    /// width and at most [`MAX_PITCH`] (the drivers refuse others); each side's span —
    /// first row's start to last row's end — must lie in one allocation or in host memory
    /// the double does not know. The whole span counts as accessed: stricter than the
    /// driver for another stream's use of the bytes between the rows.
    #[allow(clippy::too_many_arguments)] // the driver call's own shape
    pub fn memcpy_2d(
        &self,
        cx: &Call<'_>,
        dst: usize,
        dst_pitch: usize,
        src: usize,
        src_pitch: usize,
        width: usize,
        height: usize,
        s: StreamRef,
    ) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        if width == 0 || height == 0 {
            return Ok(());
        }
        for (side, pitch) in [("destination", dst_pitch), ("source", src_pitch)] {
            if pitch < width || pitch > MAX_PITCH {
                violation(
                    "bad-pitch",
                    cx,
                    format!(
                        "the {side} pitch {pitch} is outside [{width}, {MAX_PITCH}] (the row width, the largest pitch)"
                    ),
                );
                return Err(Error::InvalidValue);
            }
        }
        let span = |pitch: usize| (height - 1).checked_mul(pitch).and_then(|r| r.checked_add(width));
        let (Some(dst_span), Some(src_span)) = (span(dst_pitch), span(src_pitch)) else {
            return Err(Error::InvalidValue);
        };
        let d = self.resolve(cx, &st, dst, dst_span, None)?;
        let sp = self.resolve(cx, &st, src, src_span, None)?;
        let work = Work::Copy2d { dst: d, src: sp, width, height, dst_pitch, src_pitch };
        let accesses = [(src, src_span, false), (dst, dst_span, true)];
        let seq = self.enqueue(cx, &mut st, &core, |_, _| work, &accesses, Vec::new())?;
        self.finish_if_pageable(st, &core, seq, dst)
    }

    /// Stream `s` for work of communicator rank `comm`: a stream of the rank's device.
    fn rank_stream(
        &self,
        cx: &Call<'_>,
        st: &mut State,
        s: StreamRef,
        comm: &crate::collective::Comm,
    ) -> Result<Arc<StreamCore>> {
        let core = self.stream(cx, st, s)?;
        if core.device != comm.device {
            violation(
                "wrong-device",
                cx,
                format!("a stream of device {} for rank {} on device {}", core.device, comm.rank, comm.device),
            );
            return Err(Error::InvalidValue);
        }
        Ok(core)
    }

    /// A collective of communicator rank `comm` on stream `s` (`ncclAllReduce` and the
    /// others; RCCL's the same): the buffers, sized by what `spec` and the rank need, must be
    /// device memory of the communicator's device, and the stream that device's. The part
    /// is queued like any work (ordered on its stream, its buffers' accesses checked against
    /// other streams'); when the stream reaches it, it waits for the other ranks' parts.
    /// With `injected` (a fault), the collective fails on every rank when it meets.
    #[allow(clippy::too_many_arguments)] // the collective call's own shape
    pub fn collective(
        &self,
        cx: &Call<'_>,
        s: StreamRef,
        comm: &crate::collective::Comm,
        spec: crate::collective::Spec,
        send: usize,
        recv: usize,
        injected: Option<String>,
    ) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.rank_stream(cx, &mut st, s, comm)?;
        let (send_len, recv_len) = spec.bytes(comm.rank, comm.clique.ranks());
        let mut accesses = Vec::new();
        let send_view = if send_len > 0 {
            accesses.push((send, send_len, false));
            self.resolve(cx, &st, send, send_len, Some(comm.device))?.cast_const()
        } else {
            std::ptr::null()
        };
        let recv_view = if recv_len > 0 {
            accesses.push((recv, recv_len, true));
            self.resolve(cx, &st, recv, recv_len, Some(comm.device))?
        } else {
            std::ptr::null_mut()
        };
        let part = crate::collective::Part { spec, send: send_view, recv: recv_view };
        let work = |_: u64, _: &VClock| Work::Collective {
            clique: comm.clique.clone(),
            seq: comm.take_seq(),
            rank: comm.rank,
            part,
            error: comm.error.clone(),
            injected,
        };
        self.enqueue(cx, &mut st, &core, work, &accesses, Vec::new())?;
        Ok(())
    }

    /// Point-to-point messages of communicator rank `comm` on stream `s` (`ncclSend`,
    /// `ncclRecv`; those of one group together): each `(send, peer, dtype, count, address)`
    /// with its buffer device memory of the communicator's device. Queued as one operation;
    /// when the stream reaches it, it waits until every message has met its other side.
    pub fn exchange(
        &self,
        cx: &Call<'_>,
        s: StreamRef,
        comm: &crate::collective::Comm,
        messages: &[(bool, usize, crate::collective::elements::DType, usize, usize)],
    ) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.rank_stream(cx, &mut st, s, comm)?;
        let (mut sends, mut recvs, mut accesses) = (Vec::new(), Vec::new(), Vec::new());
        for &(send, peer, dtype, count, addr) in messages {
            let len = count * dtype.size();
            let buf = if len > 0 {
                accesses.push((addr, len, !send));
                self.resolve(cx, &st, addr, len, Some(comm.device))?
            } else {
                std::ptr::null_mut()
            };
            let side = crate::collective::Side { peer, n: 0, dtype, count, buf };
            if send {
                sends.push(side)
            } else {
                recvs.push(side)
            }
        }
        let work = |_: u64, _: &VClock| {
            // Numbered when queued, so that each side's n-th message meets the other's.
            for side in &mut sends {
                side.n = comm.take_message(side.peer, true);
            }
            for side in &mut recvs {
                side.n = comm.take_message(side.peer, false);
            }
            Work::Exchange { clique: comm.clique.clone(), rank: comm.rank, sends, recvs, error: comm.error.clone() }
        };
        self.enqueue(cx, &mut st, &core, work, &accesses, Vec::new())?;
        Ok(())
    }

    /// `cuMemsetD8Async` / `hipMemsetAsync` (and the synchronous forms, queued on the
    /// legacy stream).
    pub fn memset(&self, cx: &Call<'_>, dst: usize, value: u8, len: usize, s: StreamRef) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        if len == 0 {
            return Ok(());
        }
        if st.alloc_at(dst).is_none() {
            violation("unknown-address", cx, format!("{dst:#x} is not memory this driver allocated"));
            return Err(Error::InvalidValue);
        }
        let d = self.resolve(cx, &st, dst, len, None)?;
        self.enqueue(cx, &mut st, &core, |_, _| Work::Fill { dst: d, value, len }, &[(dst, len, true)], Vec::new())?;
        Ok(())
    }

    /// A host function on a stream.
    pub fn host_function(&self, cx: &Call<'_>, s: StreamRef, f: HostCallback, user: *mut c_void) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        self.enqueue(cx, &mut st, &core, |_, _| Work::Host { f, user }, &[], Vec::new())?;
        Ok(())
    }

    /// `cuStreamWaitEvent`: later work on the stream waits for the event's latest record
    /// (none: nothing to wait for).
    pub fn stream_wait_event(&self, cx: &Call<'_>, s: StreamRef, event: u64) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        let id = self.event_id(cx, &st, event)?;
        if self.mutated(Mutation::NoopWait) {
            return Ok(());
        }
        let Some(slot) = st.events[&id].last.clone() else { return Ok(()) };
        st.clocks.entry(core.id).or_default().join(&slot.clock);
        self.enqueue(cx, &mut st, &core, |_, _| Work::Nothing, &[], vec![(slot.stream.clone(), slot.seq)])?;
        Ok(())
    }

    /// The streams a synchronisation of `core` must see complete: itself, and for the
    /// legacy stream the blocking streams it synchronises with.
    fn sync_targets(&self, st: &mut State, core: &Arc<StreamCore>) -> Vec<(Arc<StreamCore>, u64)> {
        let mut targets = self.implicit_waits_snapshot(st, core);
        targets.push((core.clone(), core.enqueued()));
        targets
    }

    fn implicit_waits_snapshot(&self, st: &State, core: &Arc<StreamCore>) -> Vec<(Arc<StreamCore>, u64)> {
        if core.kind != StreamKind::Legacy {
            return Vec::new();
        }
        let ctx = &st.contexts[&core.ctx];
        st.streams
            .values()
            .map(|e| &e.core)
            .chain(ctx.per_thread.values())
            .filter(|s| s.ctx == core.ctx && s.kind.is_blocking())
            .map(|s| (s.clone(), s.enqueued()))
            .collect()
    }

    /// Waits (without the lock) for `targets`, then joins their clocks into the host's.
    fn wait_and_learn(&self, targets: Vec<(Arc<StreamCore>, u64)>, clocks: Vec<VClock>) {
        for (s, seq) in &targets {
            s.wait_for(*seq);
        }
        let mut st = lock(&self.state);
        for c in clocks {
            st.learn(&c);
        }
    }

    fn clocks_of(st: &State, targets: &[(Arc<StreamCore>, u64)]) -> Vec<VClock> {
        targets.iter().filter_map(|(s, _)| st.clocks.get(&s.id).cloned()).collect()
    }

    /// `cuStreamSynchronize`.
    pub fn stream_synchronize(&self, cx: &Call<'_>, s: StreamRef) -> Result<()> {
        let (targets, clocks, core) = {
            let mut st = lock(&self.state);
            let core = self.stream(cx, &mut st, s)?;
            self.fault_now(&mut st, core.device, Some(&core.shared))?;
            let targets = self.sync_targets(&mut st, &core);
            let clocks = Self::clocks_of(&st, &targets);
            (targets, clocks, core)
        };
        self.wait_and_learn(targets, clocks);
        self.check_lost(core.device)?;
        core.shared.poisoned().map_or(Ok(()), |c| Err(Error::Raw(c)))
    }

    /// `cuStreamQuery`: whether everything queued (for the legacy stream: and on the
    /// blocking streams) has completed.
    pub fn stream_query(&self, cx: &Call<'_>, s: StreamRef) -> Result<bool> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        self.fault_now(&mut st, core.device, Some(&core.shared))?;
        if self.mutated(Mutation::QueryAlwaysDone) {
            return Ok(true);
        }
        let targets = self.sync_targets(&mut st, &core);
        let done = targets.iter().all(|(s, seq)| s.completed() >= *seq);
        if done {
            let clocks = Self::clocks_of(&st, &targets);
            for c in clocks {
                st.learn(&c);
            }
        }
        Ok(done)
    }

    /// `cuCtxSynchronize` / `hipDeviceSynchronize` on the current context.
    pub fn context_synchronize(&self, cx: &Call<'_>) -> Result<()> {
        let (targets, clocks, shared, device) = {
            let mut st = lock(&self.state);
            let (ctx, device, shared) = self.current_with_fault(cx, &mut st)?;
            let c = &st.contexts[&ctx];
            let targets: Vec<(Arc<StreamCore>, u64)> = st
                .streams
                .values()
                .map(|e| &e.core)
                .chain(c.legacy.iter())
                .chain(c.per_thread.values())
                .chain(st.draining.iter())
                .filter(|s| s.ctx == ctx)
                .map(|s| (s.clone(), s.enqueued()))
                .collect();
            let clocks = Self::clocks_of(&st, &targets);
            (targets, clocks, shared, device)
        };
        if !self.mutated(Mutation::SyncAtOnce) {
            self.wait_and_learn(targets, clocks);
        }
        self.check_lost(device)?;
        shared.poisoned().map_or(Ok(()), |c| Err(Error::Raw(c)))
    }

    // --- events -----------------------------------------------------------------------

    fn event_id(&self, cx: &Call<'_>, st: &State, handle: u64) -> Result<u64> {
        let id = self.decode(cx, st, HandleKind::Event, handle)?;
        if !st.events.contains_key(&id) {
            violation("bad-handle", cx, format!("{handle:#x} is not a live event"));
            return Err(Error::InvalidHandle);
        }
        Ok(id)
    }

    /// `cuEventCreate` in the current context.
    pub fn event_create(&self, cx: &Call<'_>, timing: EventTiming) -> Result<u64> {
        let mut st = lock(&self.state);
        let (ctx, _, _) = self.current_with_fault(cx, &mut st)?;
        let id = st.id();
        st.events.insert(id, EventEntry { ctx, timing, last: None, origin: origin(cx) });
        Ok(self.encode(HandleKind::Event, id))
    }

    /// `cuEventDestroy`: a pending record still completes.
    pub fn event_destroy(&self, cx: &Call<'_>, handle: u64) -> Result<()> {
        let mut st = lock(&self.state);
        let id = self.event_id(cx, &st, handle)?;
        st.events.remove(&id);
        st.destroyed.insert(id, HandleKind::Event);
        Ok(())
    }

    /// `cuEventRecord` on a stream.
    pub fn event_record(&self, cx: &Call<'_>, handle: u64, s: StreamRef) -> Result<()> {
        let mut st = lock(&self.state);
        let id = self.event_id(cx, &st, handle)?;
        let core = self.stream(cx, &mut st, s)?;
        let ev_ctx = st.events[&id].ctx;
        if ev_ctx != core.ctx {
            violation("wrong-context", cx, "the event and the stream belong to different contexts");
            return Err(Error::InvalidHandle);
        }
        let mut made = None;
        let make = |seq, clock: &VClock| {
            let slot =
                Arc::new(RecordSlot { stream: core.clone(), seq, clock: clock.clone(), done_at: Mutex::new(None) });
            made = Some(slot.clone());
            Work::Record(slot)
        };
        self.enqueue(cx, &mut st, &core, make, &[], Vec::new())?;
        if let (Some(e), Some(slot)) = (st.events.get_mut(&id), made) {
            e.last = Some(slot);
        }
        Ok(())
    }

    /// `cuEventQuery`: whether the latest record has completed (never recorded: yes).
    pub fn event_query(&self, cx: &Call<'_>, handle: u64) -> Result<bool> {
        let mut st = lock(&self.state);
        let id = self.event_id(cx, &st, handle)?;
        let ctx = st.events[&id].ctx;
        if let Some(code) = st.contexts.get(&ctx).and_then(|c| c.shared.poisoned()) {
            return Err(Error::Raw(code));
        }
        let Some(slot) = st.events[&id].last.clone() else { return Ok(true) };
        if self.mutated(Mutation::QueryAlwaysDone) {
            return Ok(true);
        }
        let done = slot.is_done();
        if done {
            st.learn(&slot.clock);
        }
        Ok(done)
    }

    /// `cuEventSynchronize`.
    pub fn event_synchronize(&self, cx: &Call<'_>, handle: u64) -> Result<()> {
        let (slot, shared) = {
            let st = lock(&self.state);
            let id = self.event_id(cx, &st, handle)?;
            let ctx = st.events[&id].ctx;
            (st.events[&id].last.clone(), st.contexts.get(&ctx).map(|c| c.shared.clone()))
        };
        if let Some(slot) = slot {
            slot.stream.wait_for(slot.seq);
            lock(&self.state).learn(&slot.clock);
        }
        shared.and_then(|s| s.poisoned()).map_or(Ok(()), |c| Err(Error::Raw(c)))
    }

    /// `cuEventElapsedTime` in milliseconds.
    pub fn event_elapsed(&self, cx: &Call<'_>, start: u64, end: u64) -> Result<f32> {
        let st = lock(&self.state);
        let a = self.event_id(cx, &st, start)?;
        let b = self.event_id(cx, &st, end)?;
        let (ea, eb) = (&st.events[&a], &st.events[&b]);
        if ea.timing == EventTiming::Off || eb.timing == EventTiming::Off {
            return Err(Error::InvalidHandle);
        }
        let (Some(sa), Some(sb)) = (ea.last.clone(), eb.last.clone()) else { return Err(Error::InvalidHandle) };
        if self.mutated(Mutation::FakeElapsed) {
            return Ok(1.0);
        }
        let ta = *lock(&sa.done_at);
        let tb = *lock(&sb.done_at);
        match (ta, tb) {
            (Some(ta), Some(tb)) => {
                let ms = if tb >= ta {
                    tb.duration_since(ta).as_secs_f64() * 1e3
                } else {
                    -(ta.duration_since(tb).as_secs_f64() * 1e3)
                };
                Ok(ms as f32)
            }
            _ => Err(Error::NotReady),
        }
    }

    // --- memory -----------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn new_alloc(
        cx: &Call<'_>,
        start: usize,
        size: usize,
        kind: AllocKind,
        device: usize,
        ctx: u64,
        host: Option<HostBlock>,
    ) -> Alloc {
        Alloc {
            id: 0,
            start,
            size,
            kind,
            device,
            ctx,
            origin: origin(cx),
            freeing: false,
            pending: 0,
            zombie: false,
            host,
            accesses: Vec::new(),
        }
    }

    fn insert_alloc(st: &mut State, mut a: Alloc) -> usize {
        a.id = st.id();
        let start = a.start;
        st.allocs.insert(start, a);
        start
    }

    /// `cuMemAlloc` in the current context.
    pub fn alloc_device(&self, cx: &Call<'_>, bytes: usize) -> Result<usize> {
        let mut st = lock(&self.state);
        let (ctx, device, _) = self.current_with_fault(cx, &mut st)?;
        if bytes == 0 {
            return Err(Error::InvalidValue);
        }
        let start = lock(&self.spaces[device]).alloc(bytes).ok_or(Error::OutOfMemory)?;
        let a = Self::new_alloc(cx, start, bytes, AllocKind::Device, device, ctx, None);
        Ok(Self::insert_alloc(&mut st, a))
    }

    /// `cuMemHostAlloc` (pinned) or `cuMemAllocManaged` (managed) in the current context.
    pub fn alloc_host(&self, cx: &Call<'_>, bytes: usize, managed: bool) -> Result<usize> {
        let mut st = lock(&self.state);
        let (ctx, device, _) = self.current_with_fault(cx, &mut st)?;
        if bytes == 0 {
            return Err(Error::InvalidValue);
        }
        if managed && bytes > self.config.memory {
            return Err(Error::OutOfMemory);
        }
        let block = HostBlock::new(bytes).ok_or(Error::OutOfMemory)?;
        let kind = if managed { AllocKind::Managed } else { AllocKind::Pinned };
        let a = Self::new_alloc(cx, block.addr, bytes, kind, device, ctx, Some(block));
        Ok(Self::insert_alloc(&mut st, a))
    }

    /// `cuMemFree` / `cuMemFreeHost`: `host` says which kind the call frees. A free while
    /// queued work still uses the memory is reported; the memory goes back once that work
    /// completes.
    pub fn free(&self, cx: &Call<'_>, addr: usize, host: bool) -> Result<()> {
        let mut st = lock(&self.state);
        let Some(a) = st.allocs.get(&addr) else {
            let inside = st.alloc_at(addr).map(|a| format!(" (inside the allocation at {:#x})", a.start));
            violation(
                "bad-free",
                cx,
                format!("{addr:#x} is not the start of a live allocation{}", inside.unwrap_or_default()),
            );
            return Err(Error::InvalidValue);
        };
        if a.kind == AllocKind::Registered {
            violation("bad-free", cx, format!("{addr:#x} is registered host memory: unregister it, never free it"));
            return Err(Error::InvalidValue);
        }
        let is_host = a.kind == AllocKind::Pinned;
        if is_host != host {
            violation("bad-free", cx, format!("{addr:#x} is {:?} memory, freed with the wrong call", a.kind));
            return Err(Error::InvalidValue);
        }
        if let Some(code) = st.contexts.get(&a.ctx).and_then(|c| c.shared.poisoned()) {
            return Err(Error::Raw(code));
        }
        if a.freeing {
            violation("bad-free", cx, format!("{addr:#x} already has a stream-ordered free queued"));
            return Err(Error::InvalidValue);
        }
        let Some(a) = st.allocs.remove(&addr) else { return Err(Error::InvalidValue) };
        self.retire(cx, &mut st, a, "freed");
        Ok(())
    }

    /// Takes a removed allocation out of use (`how`: "freed", "unregistered"): while
    /// queued work still uses it, that is reported and it lives on until the work
    /// completes; else its memory goes back at once.
    fn retire(&self, cx: &Call<'_>, st: &mut State, mut a: Alloc, how: &str) {
        if a.pending > 0 {
            violation(
                "free-while-in-use",
                cx,
                format!("{:#x} is {how} while {} queued operation(s) still use it", a.start, a.pending),
            );
            a.zombie = true;
            st.zombies.insert(a.id, a);
        } else {
            release(a, &self.spaces);
        }
    }

    /// `cuMemHostRegister` / `hipHostRegister`: page-locks `bytes` bytes of host memory at
    /// `addr` that the double did not allocate. Copies to and from it are then
    /// asynchronous, as for pinned memory; memory already page-locked (registered, or the
    /// double's own pinned or managed memory) is `HostMemoryAlreadyRegistered`, device
    /// addresses are refused. `flags` are both vendors' (portable 1, mapped 2, I/O memory
    /// 4, read-only 8); others are `InvalidValue`.
    pub fn register_host(&self, cx: &Call<'_>, addr: usize, bytes: usize, flags: u32) -> Result<()> {
        if flags & !0xF != 0 {
            return Err(Error::InvalidValue);
        }
        let mut st = lock(&self.state);
        let (ctx, device, _) = self.current_with_fault(cx, &mut st)?;
        let end = addr.checked_add(bytes).ok_or(Error::InvalidValue)?;
        if addr == 0 || bytes == 0 {
            return Err(Error::InvalidValue);
        }
        if self.spaces.iter().any(|s| {
            let s = lock(s);
            s.contains(addr) || s.contains(end - 1)
        }) {
            violation("wrong-device", cx, format!("[{addr:#x}, {end:#x}) is device memory, not host memory"));
            return Err(Error::InvalidValue);
        }
        if st.allocs.range(..end).next_back().is_some_and(|(_, a)| a.start + a.size > addr) {
            return Err(Error::HostMemoryAlreadyRegistered);
        }
        let a = Self::new_alloc(cx, addr, bytes, AllocKind::Registered, device, ctx, None);
        Self::insert_alloc(&mut st, a);
        Ok(())
    }

    /// `cuMemHostUnregister` / `hipHostUnregister`: `addr` must be where a registration
    /// starts. Unregistering while queued work still uses the range is reported.
    pub fn unregister_host(&self, cx: &Call<'_>, addr: usize) -> Result<()> {
        let mut st = lock(&self.state);
        match st.allocs.get(&addr) {
            Some(a) if a.kind == AllocKind::Registered => {}
            _ => return Err(Error::HostMemoryNotRegistered),
        }
        let Some(a) = st.allocs.remove(&addr) else { return Err(Error::HostMemoryNotRegistered) };
        self.retire(cx, &mut st, a, "unregistered");
        Ok(())
    }

    /// `cuMemAllocAsync`: the address is given at once; the memory is usable in the
    /// stream's order (other streams must be ordered after this point).
    pub fn alloc_async(&self, cx: &Call<'_>, bytes: usize, s: StreamRef) -> Result<usize> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        if bytes == 0 {
            return Err(Error::InvalidValue);
        }
        let start = lock(&self.spaces[core.device]).alloc(bytes).ok_or(Error::OutOfMemory)?;
        let a = Self::new_alloc(cx, start, bytes, AllocKind::StreamOrdered, core.device, core.ctx, None);
        Self::insert_alloc(&mut st, a);
        if let Err(e) = self.enqueue(cx, &mut st, &core, |_, _| Work::Nothing, &[(start, bytes, true)], Vec::new()) {
            if let Some(a) = st.allocs.remove(&start) {
                release(a, &self.spaces);
            }
            return Err(e);
        }
        Ok(start)
    }

    /// `cuMemFreeAsync`: the memory goes back when the stream reaches the free; work
    /// queued after this on it is a violation.
    pub fn free_async(&self, cx: &Call<'_>, addr: usize, s: StreamRef) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        let valid = st.allocs.get(&addr).map(|a| (a.kind, a.freeing, a.id, a.size));
        let Some((kind, freeing, id, size)) = valid else {
            violation("bad-free", cx, format!("{addr:#x} is not the start of a live allocation"));
            return Err(Error::InvalidValue);
        };
        if !matches!(kind, AllocKind::StreamOrdered | AllocKind::Device) || freeing {
            violation(
                "bad-free",
                cx,
                format!("{addr:#x} cannot be freed stream-ordered ({kind:?}, free queued: {freeing})"),
            );
            return Err(Error::InvalidValue);
        }
        self.enqueue(cx, &mut st, &core, |_, _| Work::Free(id), &[(addr, size, true)], Vec::new())?;
        if let Some(a) = st.allocs.get_mut(&addr) {
            a.freeing = true;
        }
        Ok(())
    }

    /// What the double knows of `addr`.
    pub fn pointer_info(&self, addr: usize) -> Option<PointerInfo> {
        if self.mutated(Mutation::UnknownPointers) {
            return None;
        }
        let st = lock(&self.state);
        let a = st.alloc_at(addr)?;
        let kind = match a.kind {
            AllocKind::Device | AllocKind::StreamOrdered => Attributes::Device,
            AllocKind::Pinned | AllocKind::Registered => Attributes::Pinned,
            AllocKind::Managed => Attributes::Managed,
        };
        Some(PointerInfo {
            kind,
            device: a.device,
            context: self.encode(HandleKind::Context, a.ctx),
            start: a.start as u64,
            size: a.size as u64,
        })
    }

    // --- peers ------------------------------------------------------------------------

    /// Enables access from the current context's device to `peer`'s memory.
    pub fn enable_peer(&self, cx: &Call<'_>, peer: usize) -> Result<()> {
        let mut st = lock(&self.state);
        let ctx = self.current(cx, &mut st)?;
        self.check_lost(peer)?;
        let c = st.contexts.get_mut(&ctx).ok_or(Error::InvalidContext)?;
        if c.device == peer {
            return Err(Error::InvalidDevice);
        }
        if c.peers.contains(&peer) {
            return Err(Error::PeerAccessAlreadyEnabled);
        }
        c.peers.push(peer);
        Ok(())
    }

    // --- modules and kernels ------------------------------------------------------------

    /// Loads a module with these entry points into the current context.
    pub fn module_load(&self, cx: &Call<'_>, entries: Vec<String>) -> Result<u64> {
        let mut st = lock(&self.state);
        let ctx = self.current(cx, &mut st)?;
        let id = st.id();
        st.modules.insert(id, ModuleEntry { ctx, entries, origin: origin(cx) });
        Ok(self.encode(HandleKind::Module, id))
    }

    /// Unloads a module (its functions die with it).
    pub fn module_unload(&self, cx: &Call<'_>, handle: u64) -> Result<()> {
        let mut st = lock(&self.state);
        let id = self.decode(cx, &st, HandleKind::Module, handle)?;
        if st.modules.remove(&id).is_none() {
            violation("bad-handle", cx, format!("{handle:#x} is not a loaded module"));
            return Err(Error::InvalidHandle);
        }
        st.destroyed.insert(id, HandleKind::Module);
        let dead: Vec<u64> = st.functions.iter().filter(|(_, f)| f.module == id).map(|(&k, _)| k).collect();
        for f in dead {
            st.functions.remove(&f);
            st.destroyed.insert(f, HandleKind::Function);
        }
        Ok(())
    }

    /// A kernel of a module by name: `NotFound` unless the module has the entry and the
    /// double can run it.
    pub fn module_function(&self, cx: &Call<'_>, module: u64, name: &str) -> Result<u64> {
        let mut st = lock(&self.state);
        let id = self.decode(cx, &st, HandleKind::Module, module)?;
        let Some(m) = st.modules.get(&id) else {
            violation("bad-handle", cx, format!("{module:#x} is not a loaded module"));
            return Err(Error::InvalidHandle);
        };
        if !m.entries.iter().any(|e| e == name) || crate::kernels::by_name(name).is_none() {
            return Err(Error::NotFound);
        }
        let ctx = m.ctx;
        let f = st.id();
        st.functions.insert(f, FunctionEntry { ctx, module: id, name: name.to_owned() });
        Ok(self.encode(HandleKind::Function, f))
    }

    /// Launches a kernel: checks the function, the stream's context, the arguments, and
    /// that every byte the kernel reads or writes is memory its device may touch.
    ///
    /// # Safety
    /// `params` points at one pointer per parameter of the function's kernel, each to a
    /// readable value of the parameter's type (the launch contract).
    pub unsafe fn launch_kernel(
        &self,
        cx: &Call<'_>,
        function: u64,
        params: *const *const c_void,
        grid_x: u32,
        block_x: u32,
        s: StreamRef,
    ) -> Result<()> {
        let mut st = lock(&self.state);
        let core = self.stream(cx, &mut st, s)?;
        let f = self.decode(cx, &st, HandleKind::Function, function)?;
        let Some(entry) = st.functions.get(&f) else {
            violation("bad-handle", cx, format!("{function:#x} is not a live function (its module was unloaded?)"));
            return Err(Error::InvalidHandle);
        };
        if entry.ctx != core.ctx {
            violation("wrong-context", cx, "the function and the stream belong to different contexts");
            return Err(Error::InvalidHandle);
        }
        // Only kernels the double runs are handed out (`module_function`).
        let kernel = crate::kernels::by_name(&entry.name).ok_or(Error::InvalidHandle)?;
        match kernel {
            Kernel::FillU32 => {
                // SAFETY: the caller's contract, for fill_u32's three parameters.
                let launch = unsafe { FillLaunch::read(params, grid_x, block_x) };
                let bytes = (launch.count as usize).checked_mul(4).ok_or(Error::InvalidValue)?;
                if bytes == 0 {
                    return self.enqueue(cx, &mut st, &core, |_, _| Work::Nothing, &[], Vec::new()).map(|_| ());
                }
                let addr = launch.ptr as usize;
                let dst = self.kernel_memory(cx, &st, &core, addr, bytes, "writes")?;
                let work = Work::FillU32 { dst: dst.cast(), count: launch.count as usize, value: launch.value };
                self.enqueue(cx, &mut st, &core, |_, _| work, &[(addr, bytes, true)], Vec::new())?;
            }
            Kernel::StridedCopy { item } => {
                // SAFETY: the caller's contract, for the copy kernels' 28 parameters.
                let launch = match unsafe { StridedCopyLaunch::read(params, item) } {
                    Ok(launch) => launch,
                    Err(what) => {
                        violation("kernel-arguments", cx, format!("{}: {what}", entry.name));
                        return Err(Error::InvalidValue);
                    }
                };
                let side = |zero: u64, strides: &[i64]| -> Result<(usize, usize, isize)> {
                    let (lo, hi) = launch.reach(strides).ok_or(Error::InvalidValue)?;
                    let start = (zero as i64).checked_add(lo).ok_or(Error::InvalidValue)?;
                    Ok((start as usize, (hi - lo) as usize, -lo as isize))
                };
                let (src_at, src_len, src_zero) = side(launch.src, &launch.src_strides)?;
                let (dst_at, dst_len, dst_zero) = side(launch.dst, &launch.dst_strides)?;
                let src = self.kernel_memory(cx, &st, &core, src_at, src_len, "reads")?;
                let dst = self.kernel_memory(cx, &st, &core, dst_at, dst_len, "writes")?;
                // SAFETY: each side's element 0 lies inside the range just resolved, `zero`
                // bytes from its start.
                let (src, dst) = unsafe { (src.offset(src_zero).cast_const(), dst.offset(dst_zero)) };
                let work = Work::StridedCopy { src, dst, launch };
                let accesses = [(src_at, src_len, false), (dst_at, dst_len, true)];
                self.enqueue(cx, &mut st, &core, |_, _| work, &accesses, Vec::new())?;
            }
        }
        Ok(())
    }

    /// The host address of `[addr, addr + len)`, which a kernel on `core`'s stream
    /// `reads` or `writes`: memory its device may touch (its own, a peer's with access
    /// enabled, pinned or managed memory), inside one live allocation.
    fn kernel_memory(
        &self,
        cx: &Call<'_>,
        st: &State,
        core: &Arc<StreamCore>,
        addr: usize,
        len: usize,
        access: &str,
    ) -> Result<*mut u8> {
        let reachable = st.alloc_at(addr).map(|a| {
            a.kind.is_pinned_host()
                || a.kind == AllocKind::Managed
                || a.device == core.device
                || st.contexts[&core.ctx].peers.contains(&a.device)
        });
        match reachable {
            Some(true) => {}
            Some(false) => {
                violation(
                    "peer-access",
                    cx,
                    format!("the kernel {access} {addr:#x}, memory of another device, without peer access"),
                );
                return Err(Error::InvalidValue);
            }
            None => {
                violation(
                    "unknown-address",
                    cx,
                    format!("the kernel {access} {addr:#x}, which no live allocation holds"),
                );
                return Err(Error::InvalidValue);
            }
        }
        self.resolve(cx, st, addr, len, None)
    }

    // --- leaks ------------------------------------------------------------------------

    /// Descriptions of the live objects of context `ctx` (all contexts: `None`), skipping
    /// contexts that failed (their objects can no longer be destroyed).
    fn objects_of(&self, st: &State, ctx: Option<u64>) -> Vec<String> {
        let wanted =
            |c: u64| ctx.is_none_or(|x| x == c) && st.contexts.get(&c).is_some_and(|c| c.shared.poisoned().is_none());
        let mut out = Vec::new();
        let mut add = |what: &str, items: Vec<&String>| {
            if !items.is_empty() {
                let shown: Vec<&str> = items.iter().take(3).map(|s| s.as_str()).collect();
                out.push(format!("{} {what} (made by {})", items.len(), shown.join(", ")));
            }
        };
        add("stream(s)", st.streams.values().filter(|s| wanted(s.core.ctx)).map(|s| &s.origin).collect());
        add("event(s)", st.events.values().filter(|e| wanted(e.ctx)).map(|e| &e.origin).collect());
        add("module(s)", st.modules.values().filter(|m| wanted(m.ctx)).map(|m| &m.origin).collect());
        add("allocation(s)", st.allocs.values().filter(|a| wanted(a.ctx)).map(|a| &a.origin).collect());
        out
    }

    /// At process exit: waits until calls have stopped for a moment (a release thread may
    /// still be finishing drops), then reports every stream, event, module and allocation
    /// still alive.
    fn exit_check(&self) {
        if !self.config.leak_check {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let since = self.epoch.elapsed().as_millis() as u64 - self.last_call.load(Ordering::SeqCst);
            if since >= 200 || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let Ok(st) = self.state.try_lock() else { return };
        let leaks = self.objects_of(&st, None);
        if !leaks.is_empty() {
            violation_outside_call("leak", format!("alive at process exit: {}", leaks.join("; ")));
        }
    }

    /// Operations queued on every stream (default streams included) and not yet
    /// completed: what tests read through `gpuport_double_queued_ops` to see how much work
    /// a caller managed to queue while a stream is held.
    pub fn queued_ops(&self) -> u64 {
        let st = lock(&self.state);
        let defaults = st.contexts.values().flat_map(|c| c.legacy.iter().chain(c.per_thread.values()));
        let created = st.streams.values().map(|s| &s.core);
        let draining = st.draining.iter();
        defaults.chain(created).chain(draining).map(|s| s.enqueued() - s.completed()).sum()
    }

    /// Stream priorities: (least, greatest).
    pub fn priority_range(&self) -> (i32, i32) {
        (0, -5)
    }
}
