//! Fault injection: `GPUPORT_DOUBLE_FAULTS="cuMemAlloc_v2:3=OUT_OF_MEMORY,cuLaunchKernel:1=LAUNCH_FAILED"`
//! fails the 3rd call of `cuMemAlloc_v2` and the 1st of `cuLaunchKernel`.
//!
//! - A function is named as exported, with or without its version suffix (`cuMemAlloc`
//!   and `cuMemAlloc_v2` are one function; so are `hipGetDeviceProperties` and its
//!   `R0600` twin).
//! - A status is the vendor's name, with or without its prefix (`OUT_OF_MEMORY`,
//!   `CUDA_ERROR_OUT_OF_MEMORY`, `hipErrorOutOfMemory`, `OutOfMemory`), or a number.
//! - A *sticky* status (an illegal address, a launch failure: the vendor says which)
//!   poisons the context: a call that queues work succeeds and the fault happens when the
//!   work runs; from then on every call on that context returns the status, as a real
//!   driver does after a kernel fault.
//! - `LOST` loses the device of the call: its pending work is dropped and every later call
//!   that touches it — its contexts, streams, events and device queries — returns the
//!   vendor's status for an unavailable device. Other devices go on.

use std::collections::HashMap;
use std::sync::Mutex;

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call returns this status; nothing else happens.
    Fail(u32),
    /// The context is poisoned with this status (when the queued work runs, for calls that
    /// queue work; at once otherwise).
    Sticky(u32),
    /// The device is lost.
    Lost,
}

/// A vendor's status names, for parsing.
pub trait StatusTable {
    /// The code for a status name given without prefix, in the vendor's spelling or in
    /// upper snake case (`OUT_OF_MEMORY`).
    fn code(&self, name: &str) -> Option<u32>;
    /// Whether the status poisons the context.
    fn sticky(&self, code: u32) -> bool;
}

/// The parsed faults and the call counters.
#[derive(Debug, Default)]
pub struct Faults {
    /// Normalised function name → (call number, fault).
    planned: HashMap<String, Vec<(u64, Fault)>>,
    counts: Mutex<HashMap<String, u64>>,
}

/// `cuMemAlloc_v2` → `cuMemAlloc`; `hipGetDevicePropertiesR0600` → `hipGetDeviceProperties`.
pub fn normalise(name: &str) -> &str {
    if let Some(i) = name.rfind("_v") {
        if name[i + 2..].chars().all(|c| c.is_ascii_digit()) && i + 2 < name.len() {
            return &name[..i];
        }
    }
    name.strip_suffix("R0600").unwrap_or(name)
}

/// `OutOfMemory` / `outOfMemory` → `OUT_OF_MEMORY`; upper snake case stays.
pub fn upper_snake(name: &str) -> String {
    if name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
        return name.to_owned();
    }
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

impl Faults {
    /// Parses a specification; the error names the entry that does not parse. Entries
    /// for functions that do not start with `own` (`cu`, `hip`) belong to the other
    /// vendor's double, which may be loaded in the same process: they are skipped.
    pub fn parse(spec: &str, own: &str, table: &dyn StatusTable, prefixes: &[&str]) -> Result<Faults, String> {
        let mut planned: HashMap<String, Vec<(u64, Fault)>> = HashMap::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = || format!("cannot parse fault {entry:?}: expected NAME:N=STATUS");
            let (call, status) = entry.split_once('=').ok_or_else(bad)?;
            let (name, n) = call.split_once(':').ok_or_else(bad)?;
            if !name.trim().starts_with(own) {
                continue;
            }
            let n: u64 = n.trim().parse().map_err(|_| bad())?;
            if n == 0 {
                return Err(format!("{entry:?}: calls are counted from 1"));
            }
            let status = status.trim();
            let fault = if status.eq_ignore_ascii_case("LOST") {
                Fault::Lost
            } else {
                let code = match status.parse::<u32>() {
                    Ok(code) => code,
                    Err(_) => {
                        let bare = prefixes.iter().find_map(|p| status.strip_prefix(p)).unwrap_or(status);
                        table.code(&upper_snake(bare)).ok_or_else(|| format!("{entry:?}: unknown status {status:?}"))?
                    }
                };
                if table.sticky(code) {
                    Fault::Sticky(code)
                } else {
                    Fault::Fail(code)
                }
            };
            planned.entry(normalise(name.trim()).to_owned()).or_default().push((n, fault));
        }
        Ok(Faults { planned, counts: Mutex::default() })
    }

    /// Counts a call of `name` and returns the fault planned for it, if any.
    pub fn on_call(&self, name: &str) -> Option<Fault> {
        let key = normalise(name);
        let plans = self.planned.get(key)?;
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(key.to_owned()).or_insert(0);
        *n += 1;
        plans.iter().find(|(at, _)| *at == *n).map(|&(_, f)| f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Table;
    impl StatusTable for Table {
        fn code(&self, name: &str) -> Option<u32> {
            match name {
                "OUT_OF_MEMORY" => Some(2),
                "LAUNCH_FAILED" => Some(719),
                _ => None,
            }
        }
        fn sticky(&self, code: u32) -> bool {
            code == 719
        }
    }

    #[test]
    fn specs_parse_and_count_calls() {
        let f = Faults::parse(
            "cuMemAlloc_v2:2=OUT_OF_MEMORY, cuLaunchKernel:1=CUDA_ERROR_LAUNCH_FAILED,cuStreamQuery:1=LOST,hipMalloc:1=Nope",
            "cu",
            &Table,
            &["CUDA_ERROR_"],
        )
        .unwrap();
        assert_eq!(f.on_call("cuMemAlloc_v2"), None);
        assert_eq!(f.on_call("cuMemAlloc"), Some(Fault::Fail(2)), "the base name counts the same function");
        assert_eq!(f.on_call("cuMemAlloc_v2"), None);
        assert_eq!(f.on_call("cuLaunchKernel"), Some(Fault::Sticky(719)));
        assert_eq!(f.on_call("cuStreamQuery"), Some(Fault::Lost));
        assert!(Faults::parse("cuInit:0=1", "cu", &Table, &[]).is_err());
        assert!(Faults::parse("cuInit=1", "cu", &Table, &[]).is_err());
        assert!(Faults::parse("cuInit:1=NOPE", "cu", &Table, &[]).is_err());
        assert_eq!(normalise("hipGetDevicePropertiesR0600"), "hipGetDeviceProperties");
        assert_eq!(upper_snake("OutOfMemory"), "OUT_OF_MEMORY");
    }
}
