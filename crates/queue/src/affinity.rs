//! Thread placement: `GPUPORT_WORKER_CPUS=1,3-4` pins the queues' pool threads (and the
//! helper threads of large copies, which they start) to those CPUs. On a small machine
//! where the scheduler would otherwise move threads around — or put a worker on the core
//! of the thread that waits for it — this makes timings repeatable (`cargo xtask bench`
//! sets it); by default nothing is pinned.

use std::cell::Cell;
use std::sync::OnceLock;

/// The environment variable naming the pool threads' CPUs.
pub const WORKER_CPUS_ENV: &str = "GPUPORT_WORKER_CPUS";

/// Parses a CPU list (`"0"`, `"1,3"`, `"2-5,7"`); `None` for anything malformed or empty.
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b >= 1024 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok().filter(|&c: &usize| c < 1024)?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// Pins the calling thread to `cpus`; false when the system refuses (CPUs not available
/// to this process) or is not Linux.
pub fn pin_current_thread(cpus: &[usize]) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            // SAFETY: `cpu` is below CPU_SETSIZE, within the set.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: pid 0 is the calling thread; `set` is a valid set of its size.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpus;
        false
    }
}

/// How many CPUs the calling thread may run on (its affinity mask); `None` where unknown.
fn thread_cpu_count() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for the calling thread.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is the calling thread; `set` is a valid set of its size.
        let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 };
        // SAFETY: `set` was filled by the call above.
        ok.then(|| unsafe { libc::CPU_COUNT(&set) } as usize)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// True when the calling thread can usefully spin while it waits for another thread:
/// it may run on more than one CPU (else the awaited thread would need this CPU). Read
/// once per thread — after a thread pins itself, as the pool's do first thing.
pub(crate) fn thread_may_spin() -> bool {
    thread_local! {
        static MAY_SPIN: Cell<Option<bool>> = const { Cell::new(None) };
    }
    MAY_SPIN.with(|m| match m.get() {
        Some(may) => may,
        None => {
            let may = thread_cpu_count().unwrap_or(1) >= 2;
            m.set(Some(may));
            may
        }
    })
}

/// The pool threads' CPUs from the environment, read once.
pub(crate) fn worker_cpus() -> Option<&'static [usize]> {
    static CPUS: OnceLock<Option<Vec<usize>>> = OnceLock::new();
    CPUS.get_or_init(|| std::env::var(WORKER_CPUS_ENV).ok().and_then(|v| parse_cpu_list(&v))).as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("1,3-5, 7"), Some(vec![1, 3, 4, 5, 7]));
        for bad in ["", "a", "3-1", "1,,x", "2048"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
    }
}
