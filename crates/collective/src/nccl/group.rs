//! [`group`]: collectives issued together, as NCCL's `ncclGroupStart`/`ncclGroupEnd` group
//! them — required when one thread drives several ranks of a communicator (one per
//! device): NCCL waits in each rank's call for the others, which that thread has not
//! issued yet.
//!
//! The group is the calling thread's. Each engine's `ncclGroupStart` is called when the
//! group's first collective on that engine is queued; the group's end calls each
//! `ncclGroupEnd`, which launches everything the group queued, and only then records each
//! collective's end on its stream — an event recorded inside the group would be recorded
//! before the collective it is meant to follow.

use std::cell::RefCell;
use std::marker::PhantomData;

use gpuport_core::Result;

use super::Loaded;

/// What runs at the group's end, once the engines have launched the group's work (given
/// how that went).
pub(crate) type AtEnd = Box<dyn FnOnce(&Result<()>)>;

#[derive(Default)]
struct Open {
    /// Nested calls of [`group`] inside the outermost.
    depth: usize,
    /// The engines whose `ncclGroupStart` was called.
    engines: Vec<&'static Loaded>,
    at_end: Vec<AtEnd>,
}

thread_local! {
    static GROUP: RefCell<Option<Open>> = const { RefCell::new(None) };
}

/// Runs `f`, queuing the collectives it issues on this thread together: they start when
/// `f` returns (NCCL's `ncclGroupStart`/`ncclGroupEnd`; MPI's collectives, already
/// nonblocking, start as they are issued). One thread driving several ranks of a
/// communicator — one per device — must issue their collectives in a group: NCCL waits in
/// each rank's call for the others.
///
/// A collective's [`Work`](crate::Work) issued inside the group cannot be waited for
/// before the group has ended. Groups nest: the outermost one's end starts the work. `f`'s
/// error is returned after the group has ended (the collectives it did issue run); an
/// engine's failure to launch the group fails each of its collectives' work and is
/// returned.
///
/// ```no_run
/// # fn main() -> gpuport_core::Result<()> {
/// use gpuport_collective::{group, Communicator, ReduceOp};
/// let rt = gpuport_runtime::Runtime::discover();
/// let devices = vec![rt.device("cuda:0")?, rt.device("cuda:1")?];
/// let comms = Communicator::init_all(&devices)?;
/// let xs = devices
///     .iter()
///     .map(|d| gpuport_runtime::Array::from_slice(d, &[1.0f32; 1024], &[1024]))
///     .collect::<gpuport_core::Result<Vec<_>>>()?;
/// let works = group(|| {
///     let each = comms.iter().zip(&xs).map(|(c, x)| c.all_reduce(x, ReduceOp::Sum, None, None));
///     each.collect::<gpuport_core::Result<Vec<_>>>()
/// })?;
/// for w in works {
///     w.wait()?;
/// }
/// # Ok(()) }
/// ```
pub fn group<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    // Ended however `f` leaves (a panic included): NCCL needs every start ended.
    let open = Group::start();
    let result = f();
    let ended = open.end();
    let value = result?;
    ended.map(|()| value)
}

/// A [`group`] opened on this thread and ended by [`Group::end`] — or, with its error only
/// logged, when dropped — for callers that cannot wrap the group's calls in a closure (a
/// Python `with` block). It stays on the thread that started it.
#[must_use = "the group's collectives start when it ends"]
pub struct Group {
    _on_this_thread: PhantomData<*const ()>,
}

impl Group {
    /// Opens a group on this thread (inside an open one: a nested level).
    pub fn start() -> Group {
        GROUP.with(|g| {
            let mut g = g.borrow_mut();
            match &mut *g {
                Some(open) => open.depth += 1,
                None => *g = Some(Open::default()),
            }
        });
        Group { _on_this_thread: PhantomData }
    }

    /// Ends this level; the outermost launches the group's collectives. The engine's error
    /// if it could not (each collective's work fails with it too).
    pub fn end(self) -> Result<()> {
        std::mem::forget(self);
        end()
    }

    /// Whether a group is open on this thread: a collective issued now starts when it ends.
    pub fn is_open() -> bool {
        GROUP.with(|g| g.borrow().is_some())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Err(e) = end() {
            log::warn!("ending a collectives group that was dropped: {e}");
        }
    }
}

/// Ends one level of the group; the outermost ends the engines' groups and runs what waits
/// for them.
fn end() -> Result<()> {
    let open = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        match &mut *g {
            Some(open) if open.depth > 0 => {
                open.depth -= 1;
                None
            }
            _ => g.take(),
        }
    });
    let Some(open) = open else { return Ok(()) };
    let mut ended = Ok(());
    for engine in open.engines {
        let result = super::calls::group_end(engine);
        if ended.is_ok() {
            ended = result;
        }
    }
    for at_end in open.at_end {
        at_end(&ended);
    }
    ended
}

/// Whether a group is open on this thread; if so, `engine`'s `ncclGroupStart` has been
/// called for it.
pub(crate) fn join(engine: &'static Loaded) -> Result<bool> {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        let Some(open) = &mut *g else { return Ok(false) };
        if !open.engines.iter().any(|e| std::ptr::eq(*e, engine)) {
            super::calls::group_start(engine)?;
            open.engines.push(engine);
        }
        Ok(true)
    })
}

/// Runs `f` when the open group ends ([`join`] said there is one); at once when none is.
pub(crate) fn at_end(f: AtEnd) {
    let unplaced = GROUP.with(|g| match &mut *g.borrow_mut() {
        Some(open) => {
            open.at_end.push(f);
            None
        }
        None => Some(f),
    });
    if let Some(f) = unplaced {
        f(&Ok(()));
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    #[test]
    fn what_waits_for_a_group_runs_once_when_the_outermost_ends() {
        let ran = Rc::new(Cell::new(0));
        let counted = |ran: &Rc<Cell<i32>>| {
            let ran = ran.clone();
            Box::new(move |ended: &Result<()>| {
                assert!(ended.is_ok());
                ran.set(ran.get() + 1);
            })
        };
        assert!(!Group::is_open());
        let outer = Group::start();
        at_end(counted(&ran));
        let inner = Group::start();
        at_end(counted(&ran));
        inner.end().unwrap();
        assert_eq!(ran.get(), 0, "a nested group's end launches nothing");
        assert!(Group::is_open());
        outer.end().unwrap();
        assert_eq!(ran.get(), 2);
        assert!(!Group::is_open());
        // Outside a group it runs at once; a group's closure error comes back after its end.
        at_end(counted(&ran));
        assert_eq!(ran.get(), 3);
        let failed = group(|| -> Result<()> {
            at_end(counted(&ran));
            Err(gpuport_core::Error::invalid_argument("the closure's own"))
        });
        assert!(failed.is_err() && ran.get() == 4 && !Group::is_open());
    }

    #[test]
    fn a_group_dropped_without_end_is_ended() {
        let ran = Rc::new(Cell::new(false));
        {
            let _open = Group::start();
            let ran = ran.clone();
            at_end(Box::new(move |_| ran.set(true)));
        }
        assert!(ran.get() && !Group::is_open());
    }
}
