//! What the loader checks of a plugin beyond each call's own answer: the host functions it
//! runs, the addresses it hands out. A plugin is foreign code; these are the breaches of
//! its contract that gpuport can see and survive, each reported as
//! [`Error::BrokenContract`] naming the plugin.
//!
//! **Host functions.** A plugin runs a host function that gpuport queued by calling the
//! function pointer gpuport gave with the `user` pointer gpuport gave, once. A run with a
//! NULL `user`, and a second run of one callback (or a run after the stream was done with
//! it), run nothing (the vendor kit's slots see to that) and are counted here; the
//! plugin's next stream or device synchronize reports them. The trampoline gpuport hands a
//! plugin is one of [`TRAMPOLINES`], one per loaded plugin, so that a run with a NULL
//! `user` — which says nothing of whose it is — is still counted against the right
//! plugin; plugins loaded beyond that many share the last.
//!
//! **Addresses.** Every address a plugin allocates must be aligned to [`ALIGNMENT`] bytes
//! (what DLPack asks of exported data, and what CUDA and HIP give) and must not lie in an
//! allocation still live: two arrays over one address would silently alias. A breach is
//! refused before any array is made over it.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use gpuport_core::{BackendKind, Error, Result};
use gpuport_plugin_abi as abi;
use gpuport_vendor_kit::{host_callback_run, SlotRun};

/// The alignment of every address a plugin allocates.
pub(crate) const ALIGNMENT: u64 = 256;

/// How many plugins get a host-function trampoline of their own.
pub(crate) const TRAMPOLINES: usize = 16;

/// Runs of one trampoline that found nothing to run.
struct StrayRuns {
    null_user: AtomicU64,
    ran_before: AtomicU64,
}

static STRAY: [StrayRuns; TRAMPOLINES] =
    [const { StrayRuns { null_user: AtomicU64::new(0), ran_before: AtomicU64::new(0) } }; TRAMPOLINES];

/// The trampoline plugin `P` calls for a host function: the kit's, which never unwinds
/// (it runs the callback inside `catch_unwind` and keeps a panic as the stream's error),
/// and counts a run that found nothing against plugin `P`.
unsafe extern "C" fn host_func<const P: usize>(user: *mut c_void) {
    // SAFETY: `user` is NULL or what `launch_host_callback` handed the plugin (a slot,
    // which is never freed). The kit's run catches the callback's panic, and counting a
    // stray run cannot panic: nothing unwinds into the plugin.
    match unsafe { host_callback_run(user) } {
        SlotRun::Ran => {}
        stray => count_stray(P, stray),
    }
}

#[cold]
#[inline(never)]
fn count_stray(plugin: usize, run: SlotRun) {
    let counts = &STRAY[plugin];
    match run {
        SlotRun::NullUser => counts.null_user.fetch_add(1, Ordering::Relaxed),
        _ => counts.ran_before.fetch_add(1, Ordering::Relaxed),
    };
}

const HOST_FUNCS: [abi::HostFunc; TRAMPOLINES] = [
    host_func::<0>,
    host_func::<1>,
    host_func::<2>,
    host_func::<3>,
    host_func::<4>,
    host_func::<5>,
    host_func::<6>,
    host_func::<7>,
    host_func::<8>,
    host_func::<9>,
    host_func::<10>,
    host_func::<11>,
    host_func::<12>,
    host_func::<13>,
    host_func::<14>,
    host_func::<15>,
];

/// Trampolines handed out so far.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// One loaded plugin's checks.
pub(crate) struct Faults {
    kind: BackendKind,
    /// Its trampoline's index.
    trampoline: usize,
    /// The stray runs already reported.
    reported_null_user: AtomicU64,
    reported_ran_before: AtomicU64,
    /// Live allocations: base → length.
    live: Mutex<BTreeMap<u64, u64>>,
}

impl Faults {
    /// The checks of a newly loaded plugin, with a trampoline of its own while there are
    /// any left.
    pub(crate) fn new(kind: BackendKind) -> Self {
        let trampoline = NEXT.fetch_add(1, Ordering::Relaxed).min(TRAMPOLINES - 1);
        let counts = &STRAY[trampoline];
        Faults {
            kind,
            trampoline,
            // A shared trampoline's earlier runs are not this plugin's.
            reported_null_user: AtomicU64::new(counts.null_user.load(Ordering::Relaxed)),
            reported_ran_before: AtomicU64::new(counts.ran_before.load(Ordering::Relaxed)),
            live: Mutex::default(),
        }
    }

    /// The host function this plugin is handed.
    #[inline]
    pub(crate) fn host_func(&self) -> abi::HostFunc {
        HOST_FUNCS[self.trampoline]
    }

    /// The stray host-function runs not yet reported, as an error (reported once).
    #[inline]
    pub(crate) fn check_host_funcs(&self) -> Result<()> {
        let counts = &STRAY[self.trampoline];
        let (null_user, ran_before) =
            (counts.null_user.load(Ordering::Relaxed), counts.ran_before.load(Ordering::Relaxed));
        if null_user == self.reported_null_user.load(Ordering::Relaxed)
            && ran_before == self.reported_ran_before.load(Ordering::Relaxed)
        {
            return Ok(());
        }
        self.stray_runs(null_user, ran_before)
    }

    #[cold]
    #[inline(never)]
    fn stray_runs(&self, null_user: u64, ran_before: u64) -> Result<()> {
        let new_null = null_user.saturating_sub(self.reported_null_user.swap(null_user, Ordering::Relaxed));
        let new_twice = ran_before.saturating_sub(self.reported_ran_before.swap(ran_before, Ordering::Relaxed));
        let mut what = Vec::new();
        if new_null > 0 {
            what.push(format!(
                "it called gpuport's host function with a NULL user pointer ({new_null} time(s)): the host \
                 functions queued with it never ran"
            ));
        }
        if new_twice > 0 {
            what.push(format!(
                "it ran a host function a second time, or after it was done with it ({new_twice} time(s)): \
                 those runs did nothing"
            ));
        }
        match what.is_empty() {
            true => Ok(()),
            false => Err(Error::broken_contract(self.kind, what.join("; "))),
        }
    }

    /// Admits `len` bytes at `addr`, just allocated by `call`: refused when misaligned or
    /// overlapping a live allocation. A refusal says whether the address is the plugin's
    /// to take back (misaligned, but its own) or not (another array's memory).
    pub(crate) fn admit(&self, call: &str, addr: u64, len: usize) -> std::result::Result<(), (Error, bool)> {
        if len == 0 && addr == 0 {
            return Ok(());
        }
        let breach = |what: String| Error::broken_contract(self.kind, what);
        if !addr.is_multiple_of(ALIGNMENT) {
            return Err((breach(format!("{call} gave {addr:#x}, which is not {ALIGNMENT}-byte aligned")), true));
        }
        let len = (len as u64).max(1);
        let end = addr
            .checked_add(len)
            .ok_or_else(|| (breach(format!("{call} gave {addr:#x}, where {len} bytes overflow")), false))?;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((&base, &n)) = live.range(..end).next_back().filter(|&(&b, &n)| b + n > addr) {
            return Err((
                breach(format!(
                    "{call} gave {addr:#x}..{end:#x}, which overlaps its live allocation {base:#x}..{:#x}: two \
                     arrays would share memory",
                    base + n
                )),
                false,
            ));
        }
        live.insert(addr, len);
        Ok(())
    }

    /// Forgets the allocation at `addr` (its memory freed, or about to be).
    pub(crate) fn forget(&self, addr: u64) {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).remove(&addr);
    }
}
