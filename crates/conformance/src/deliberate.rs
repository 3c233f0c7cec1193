//! Panics during the suite. Those the suite causes on purpose (a host callback that
//! panics, to see the port report it) are expected output, not news: they are raised
//! through [`deliberate_panic`], whose message carries a marker, and the suite's panic hook
//! leaves them out of the output. A panic on one of the port's own threads — gpuport's
//! stream workers and release thread, named `gpuport …` — is a failure of the case that
//! was running ([`thread_panics`]): a port never panics where nobody can catch it. Every
//! other panic reaches the hook that was there before, message and backtrace included.

use std::sync::{Mutex, Once};

/// What every deliberate panic's message starts with.
pub const DELIBERATE: &str = "deliberate panic (expected): ";

/// Panics on the port's threads since [`thread_panics`] last took them: the thread's name
/// and the message.
static ON_PORT_THREADS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Installs the suite's panic hook (once).
pub(crate) fn install() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message =
                payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
            if message.is_some_and(|m| m.starts_with(DELIBERATE)) {
                return;
            }
            let thread = std::thread::current();
            if let Some(name) = thread.name().filter(|n| n.starts_with("gpuport ")) {
                let at = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
                let said = message.unwrap_or("(not a message)");
                ON_PORT_THREADS.lock().unwrap_or_else(|p| p.into_inner()).push(format!("{name:?}{at}: {said}"));
            }
            previous(info);
        }));
    });
}

/// The panics on the port's threads since the last call, taken.
pub(crate) fn thread_panics() -> Vec<String> {
    std::mem::take(&mut *ON_PORT_THREADS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Panics with `what` (prefixed with [`DELIBERATE`]) without printing the panic message or
/// a backtrace. The payload is a `String`, as `panic!` with a message makes, so a port
/// reports it as it would any panic.
pub fn deliberate_panic(what: &str) -> ! {
    install();
    panic!("{DELIBERATE}{what}")
}
