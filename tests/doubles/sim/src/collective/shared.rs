//! Ranks in separate processes. Each process's double simulates a machine of its own, so
//! ranks that are not devices of one process cannot meet in memory: they meet through
//! files in a folder named by the communicator's unique id, in shared memory
//! (`/dev/shm`; `GPUPORT_DOUBLE_SHARED_DIR` names another place).
//!
//! - A rank joining writes `join-<rank>`; the communicator is made once every rank's file is
//!   there.
//! - The n-th collective: each rank writes `c<n>-r<rank>` — its statement of the collective
//!   and the bytes it sends — waits until every rank's is there, checks that they agree
//!   (as the in-process meeting does: otherwise reported, and failed on every rank with
//!   nothing moved), and computes its own result from them. A rank removes its file of
//!   collective n − 2 when it writes that of n: every rank has read it by then (to reach
//!   n − 1 each rank read all of n − 2).
//! - A message is `m<from>-<to>-<n>`, which the receiver reads and removes (and answers
//!   with `x<from>-<to>-<n>`, the reason, when the two sides disagree); the sender waits
//!   until it is gone.
//! - A split: each rank writes its color and key as `s<n>-r<rank>`; once all have, each
//!   forms the same communicators from them, each meeting in a folder of its own beside
//!   this one.
//! - A rank leaving writes `left-<rank>`; the last to leave removes the folder.
//!
//! Files are written under a temporary name and renamed into place, so a reader never sees
//! half of one. A rank that does not come within the limit is reported, as in one process.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{run, Outcome, Part, Side};

/// Where the folders are made.
pub const DIR_ENV: &str = "GPUPORT_DOUBLE_SHARED_DIR";

/// The folder of one communicator's ranks.
#[derive(Debug, Clone)]
pub struct Folder {
    path: PathBuf,
}

/// FNV-1a: a folder name from an id's bytes.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

impl Folder {
    /// The folder of the `generation`-th communicator made with unique id `id` (an id from
    /// `NCCL_COMM_ID` names every communicator made with it: they come one after another).
    pub fn of(id: &[u8], generation: u64) -> Folder {
        let root = std::env::var_os(DIR_ENV).map(PathBuf::from).unwrap_or_else(|| {
            let shm = Path::new("/dev/shm");
            if shm.is_dir() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            }
        });
        Folder { path: root.join("gpuport-double-nccl").join(format!("{:016x}-{generation}", fnv(id))) }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The folder of a communicator split from this one's ranks: beside it (it may outlive
    /// its parent), named by the split's number and color.
    pub fn split(&self, n: u64, color: i32) -> Folder {
        let name = self.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        Folder { path: self.path.with_file_name(format!("{name}-s{n}-c{color}")) }
    }

    /// Rank `rank` has joined, on this process's device `device`.
    pub fn join(&self, rank: usize, device: usize) -> std::io::Result<()> {
        write(&self.file(&format!("join-{rank}")), &format!("{} {device}", std::process::id()), &[])
    }

    /// Whether rank `rank` has joined (from any process).
    pub fn has_joined(&self, rank: usize) -> bool {
        self.file(&format!("join-{rank}")).exists()
    }

    /// Removes the folder (every rank is gone, or every rank was of this process).
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }

    /// Rank `rank` takes its joining back (it gave the initialisation up).
    pub fn unjoin(&self, rank: usize) {
        let _ = std::fs::remove_file(self.file(&format!("join-{rank}")));
    }

    /// Removes the folder if no file is left in it (no rank of any process joined).
    pub fn remove_if_empty(&self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Writes `header`, a newline and `bytes` as `path`, all at once for a reader.
fn write(path: &Path, header: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}", std::process::id()));
    let mut text = Vec::with_capacity(header.len() + 1 + bytes.len());
    text.extend_from_slice(header.replace('\n', " ").as_bytes());
    text.push(b'\n');
    text.extend_from_slice(bytes);
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}

/// A file [`write`] wrote: its header and bytes; `None` while it is not there.
fn read(path: &Path) -> Option<(String, Vec<u8>)> {
    let text = std::fs::read(path).ok()?;
    let end = text.iter().position(|&b| b == b'\n')?;
    Some((String::from_utf8_lossy(&text[..end]).into_owned(), text[end + 1..].to_vec()))
}

/// Why a wait ended without what it waited for.
enum Waited {
    Aborted,
    TimedOut,
}

/// Polls `look` until it finds something, the communicator is aborted, or `limit` passes.
fn poll<T>(limit: Duration, aborted: &dyn Fn() -> bool, mut look: impl FnMut() -> Option<T>) -> Result<T, Waited> {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_micros(50);
    loop {
        if let Some(found) = look() {
            return Ok(found);
        }
        if aborted() {
            return Err(Waited::Aborted);
        }
        if Instant::now() >= deadline {
            return Err(Waited::TimedOut);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

/// The meeting of a communicator whose ranks span processes.
pub struct Shared {
    folder: Folder,
    ranks: usize,
    limit: Duration,
}

impl Shared {
    /// The `ranks` ranks that joined in `folder`, whose parts wait at most `limit`.
    pub fn new(folder: Folder, ranks: usize, limit: Duration) -> Shared {
        Shared { folder, ranks, limit }
    }

    /// Rank `rank`'s part of collective `seq` (see the module's description); `spoiled`:
    /// a fault injected into this rank's part, which fails the collective on every rank.
    pub fn arrive(
        &self,
        seq: u64,
        rank: usize,
        part: Part,
        spoiled: Option<String>,
        aborted: &dyn Fn() -> bool,
        report: &dyn Fn(&str, String),
    ) -> Outcome {
        let name = |seq: u64, r: usize| self.folder.file(&format!("c{seq}-r{r}"));
        let (send_len, _) = part.spec.bytes(rank, self.ranks);
        let sent = if send_len > 0 {
            // SAFETY: the part's send buffer holds its spec's bytes, alive while it waits.
            unsafe { std::slice::from_raw_parts(part.send, send_len) }.to_vec()
        } else {
            Vec::new()
        };
        let header = format!("{:?}\t{}", part.spec, spoiled.unwrap_or_default());
        if let Err(e) = write(&name(seq, rank), &header, &sent) {
            return Outcome::Failed(format!("collective #{seq}: writing this rank's part: {e}"));
        }
        if seq >= 2 {
            let _ = std::fs::remove_file(name(seq - 2, rank));
        }
        let found =
            poll(self.limit, aborted, || (0..self.ranks).map(|r| read(&name(seq, r))).collect::<Option<Vec<_>>>());
        let files = match found {
            Ok(files) => files,
            Err(Waited::Aborted) => {
                return Outcome::Failed("the communicator was aborted while the collective waited".into())
            }
            Err(Waited::TimedOut) => {
                let missing: Vec<usize> = (0..self.ranks).filter(|&r| !name(seq, r).exists()).collect();
                let why = format!("rank(s) {missing:?} never reached collective #{seq} within {:?}", self.limit);
                report("rank-never-arrived", why.clone());
                return Outcome::Failed(why);
            }
        };
        let statements: Vec<(&str, &str)> =
            files.iter().map(|(h, _)| h.split_once('\t').unwrap_or((h.as_str(), ""))).collect();
        if let Some((_, why)) = statements.iter().find(|(_, spoiled)| !spoiled.is_empty()) {
            return Outcome::Failed((*why).to_owned());
        }
        if statements.iter().any(|(spec, _)| *spec != statements[0].0) {
            let each: Vec<String> = statements.iter().enumerate().map(|(r, (s, _))| format!("rank {r}: {s}")).collect();
            let why = format!("the ranks disagree on the collective ({})", each.join("; "));
            report("collective-mismatch", format!("collective #{seq}: {why}"));
            return Outcome::Failed(why);
        }
        // Every rank's result computed here from what each sent; only this rank's is kept.
        let mut scratch: Vec<Vec<u8>> = (0..self.ranks).map(|r| vec![0; part.spec.bytes(r, self.ranks).1]).collect();
        let parts: Vec<Part> = (0..self.ranks)
            .map(|r| Part {
                spec: part.spec,
                send: files[r].1.as_ptr(),
                recv: if r == rank { part.recv } else { scratch[r].as_mut_ptr() },
            })
            .collect();
        // SAFETY: the ranks agree on the spec, so each file holds that rank's send bytes;
        // this rank's receive buffer is alive while its part waits, the others' are scratch
        // of their size.
        unsafe { run(&parts) };
        Outcome::Done
    }

    /// Rank `rank`'s messages (see the module's description).
    pub fn exchange(
        &self,
        rank: usize,
        sends: &[Side],
        recvs: &[Side],
        aborted: &dyn Fn() -> bool,
        report: &dyn Fn(&str, String),
    ) -> Outcome {
        let message = |from: usize, to: usize, n: u64| self.folder.file(&format!("m{from}-{to}-{n}"));
        let refusal = |from: usize, to: usize, n: u64| self.folder.file(&format!("x{from}-{to}-{n}"));
        let statement = |s: &Side| format!("{:?} {}", s.dtype, s.count);
        for s in sends {
            let len = s.count * s.dtype.size();
            let bytes = if len > 0 {
                // SAFETY: the send buffer holds `count` elements, alive while it waits.
                unsafe { std::slice::from_raw_parts(s.buf.cast_const(), len) }.to_vec()
            } else {
                Vec::new()
            };
            if let Err(e) = write(&message(rank, s.peer, s.n), &statement(s), &bytes) {
                return Outcome::Failed(format!("writing a message to rank {}: {e}", s.peer));
            }
        }
        let never = |what: String| {
            let why = format!("rank {rank}'s {what} found no peer within {:?}", self.limit);
            report("rank-never-arrived", why.clone());
            Outcome::Failed(why)
        };
        let mut outcome = Outcome::Done;
        for r in recvs {
            let path = message(r.peer, rank, r.n);
            let (header, bytes) = match poll(self.limit, aborted, || read(&path)) {
                Ok(found) => found,
                Err(Waited::Aborted) => return aborted_outcome(),
                Err(Waited::TimedOut) => return never(format!("message {} from rank {}", r.n, r.peer)),
            };
            if header != statement(r) || bytes.len() != r.count * r.dtype.size() {
                let why = format!(
                    "message {} from rank {} to rank {rank}: {header} sent, {} received",
                    r.n,
                    r.peer,
                    statement(r)
                );
                report("p2p-mismatch", why.clone());
                let _ = write(&refusal(r.peer, rank, r.n), &why, &[]);
                outcome = Outcome::Failed(why);
            } else if !bytes.is_empty() {
                // SAFETY: the receive buffer holds `count` elements, alive while it waits.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), r.buf, bytes.len()) };
            }
            let _ = std::fs::remove_file(&path);
        }
        for s in sends {
            let path = message(rank, s.peer, s.n);
            match poll(self.limit, aborted, || (!path.exists()).then_some(())) {
                Ok(()) => {}
                Err(Waited::Aborted) => return aborted_outcome(),
                Err(Waited::TimedOut) => return never(format!("message {} to rank {}", s.n, s.peer)),
            }
            let refused = refusal(rank, s.peer, s.n);
            if let Some((why, _)) = read(&refused) {
                let _ = std::fs::remove_file(&refused);
                outcome = Outcome::Failed(why);
            }
        }
        outcome
    }

    /// Rank `rank`'s color and key for the communicator's `n`-th split.
    pub fn split_arrive(&self, n: u64, rank: usize, color: i32, key: i32) -> std::io::Result<()> {
        write(&self.folder.file(&format!("s{n}-r{rank}")), &format!("{color} {key}"), &[])
    }

    /// Every rank's color and key for the `n`-th split, once all have come; else the ranks
    /// still missing.
    pub fn split_found(&self, n: u64) -> Result<Vec<(i32, i32)>, Vec<usize>> {
        let read_one = |r: usize| {
            let (text, _) = read(&self.folder.file(&format!("s{n}-r{r}")))?;
            let (color, key) = text.split_once(' ')?;
            Some((color.parse().ok()?, key.parse().ok()?))
        };
        let found: Vec<Option<(i32, i32)>> = (0..self.ranks).map(read_one).collect();
        if found.iter().all(Option::is_some) {
            Ok(found.into_iter().flatten().collect())
        } else {
            Err((0..self.ranks).filter(|&r| found[r].is_none()).collect())
        }
    }

    /// The folder the communicator's `n`-th split of color `color` meets in.
    pub fn split_folder(&self, n: u64, color: i32) -> Folder {
        self.folder.split(n, color)
    }

    /// Rank `rank` has left; the last to leave removes the folder.
    pub fn leave(&self, rank: usize) {
        let _ = write(&self.folder.file(&format!("left-{rank}")), "", &[]);
        if (0..self.ranks).all(|r| self.folder.file(&format!("left-{r}")).exists()) {
            self.folder.remove();
        }
    }
}

fn aborted_outcome() -> Outcome {
    Outcome::Failed("the communicator was aborted while a message waited".into())
}
