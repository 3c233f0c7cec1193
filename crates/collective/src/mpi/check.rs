//! The consistency check users turn on with `GPUPORT_COLLECTIVE_CHECK=1` (as
//! `TORCH_DISTRIBUTED_DEBUG=DETAIL` does for PyTorch): before each collective, the ranks
//! gather what each is about to do — which collective, its reduction, dtype, element count,
//! root, and its number in the communicator's sequence — and, where they differ, every rank
//! fails it with the same error naming the difference and the ranks on each side, instead
//! of hanging or reducing mismatched buffers. The gathering uses a communicator of its own
//! (a `dup`), so it never mixes with the collectives' traffic. Off, nothing extra is sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use gpuport_core::{DType, DTypeCode, Error, Result};

use super::{abi, Mpi, ENGINE};
use crate::op::ReduceOp;

/// The variable that turns the check on (`1`).
pub const CHECK_ENV: &str = "GPUPORT_COLLECTIVE_CHECK";

/// Whether the check is on in this process (read once).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(CHECK_ENV).as_deref() == Ok("1"))
}

/// A communicator's check: its own duplicate and its sequence.
pub(crate) struct Check {
    /// The duplicate's handle.
    pub(crate) comm: usize,
    next: AtomicU64,
}

impl Check {
    /// Duplicates `comm` for the check's traffic (collective: every rank does it).
    pub(crate) fn new(mpi: &Mpi, comm: usize) -> Result<Check> {
        let mut out: abi::Comm = std::ptr::null_mut();
        // SAFETY: a live communicator and a valid out-pointer.
        mpi.call("MPI_Comm_dup", |api| unsafe { (api.comm_dup)(comm as abi::Comm, &mut out) })?;
        Ok(Check { comm: out as usize, next: AtomicU64::new(0) })
    }

    /// The next collective's number.
    pub(crate) fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// What one rank is about to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signature {
    pub(crate) seq: u64,
    pub(crate) what: &'static str,
    pub(crate) op: Option<ReduceOp>,
    pub(crate) dtype: Option<DType>,
    pub(crate) count: usize,
    pub(crate) root: Option<usize>,
}

/// The collectives the check knows, by their number in a signature's words.
const WHATS: [&str; 6] = ["all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all"];
const OPS: [ReduceOp; 5] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg];
const WORDS: usize = 6;

impl Signature {
    /// As the words the ranks exchange (`-1`: none).
    fn words(&self) -> [i64; WORDS] {
        let index = |found: Option<usize>| found.map_or(-1, |i| i as i64);
        let dtype = self
            .dtype
            .map_or(-1, |d| (i64::from(d.code() as u8) << 24) | (i64::from(d.bits()) << 16) | i64::from(d.lanes()));
        [
            self.seq as i64,
            index(WHATS.iter().position(|w| *w == self.what)),
            index(self.op.and_then(|op| OPS.iter().position(|o| *o == op))),
            dtype,
            self.count as i64,
            index(self.root),
        ]
    }

    /// A signature's words in words.
    fn describe(words: &[i64]) -> String {
        let what = usize::try_from(words[1]).ok().and_then(|i| WHATS.get(i)).copied().unwrap_or("?");
        let op = usize::try_from(words[2]).ok().and_then(|i| OPS.get(i)).map(|o| format!(" {o:?}")).unwrap_or_default();
        let dtype = (words[3] >= 0)
            .then(|| {
                let (code, bits, lanes) = ((words[3] >> 24) as u8, (words[3] >> 16) as u8, words[3] as u16);
                let code = DTypeCode::from_u8(code)?;
                DType::new(code, bits, lanes).ok()
            })
            .flatten()
            .map_or_else(|| "?".to_owned(), |d| d.to_string());
        let root = if words[5] >= 0 { format!(" to/from root {}", words[5]) } else { String::new() };
        format!("collective #{} {what}{op} of {} {dtype} elements{root}", words[0], words[4])
    }
}

/// Gathers every rank's signature over the check's communicator (every rank must be at
/// this point, as for any collective); an error naming each distinct signature and its
/// ranks when they differ — the same error on every rank.
pub(crate) fn agree(mpi: &Mpi, check_comm: usize, size: usize, mine: &Signature) -> Result<()> {
    let words = mine.words();
    let mut all = vec![0i64; WORDS * size];
    let int64 = abi::predefined(abi::datatype(DType::I64).unwrap_or(0x258));
    let what = || format!("the consistency check of collective #{}", mine.seq);
    // SAFETY: `words` holds `WORDS` 64-bit integers and `all` room for `size` times that.
    mpi.call_waiting("MPI_Iallgather_c", what, |api, req| unsafe {
        (api.allgather)(
            words.as_ptr().cast(),
            WORDS as abi::Count,
            int64,
            all.as_mut_ptr().cast(),
            WORDS as abi::Count,
            int64,
            check_comm as abi::Comm,
            req,
        )
    })?;
    let signatures: Vec<&[i64]> = all.chunks(WORDS).collect();
    if signatures.iter().all(|s| *s == signatures[0]) {
        return Ok(());
    }
    // Each distinct signature with the ranks that passed it, in rank order.
    let mut groups: Vec<(&[i64], Vec<usize>)> = Vec::new();
    for (rank, s) in signatures.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| g == s) {
            Some((_, ranks)) => ranks.push(rank),
            None => groups.push((s, vec![rank])),
        }
    }
    let sides: Vec<String> =
        groups.iter().map(|(s, ranks)| format!("ranks {ranks:?}: {}", Signature::describe(s))).collect();
    Err(Error::Collective {
        engine: ENGINE,
        call: "the consistency check",
        code: 0,
        message: format!("the ranks disagree on the next collective — {}", sides.join("; ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_reads_back_as_what_it_says() {
        let s = Signature {
            seq: 3,
            what: "reduce",
            op: Some(ReduceOp::Max),
            dtype: Some(DType::F32),
            count: 1001,
            root: Some(2),
        };
        assert_eq!(Signature::describe(&s.words()), "collective #3 reduce Max of 1001 float32 elements to/from root 2");
    }
}
