//! Panics the suite causes on purpose (a host callback that panics, to see the port
//! report it) are expected output, not news: they are raised through [`deliberate_panic`],
//! whose message carries a marker, and a panic hook installed the first time one is raised
//! leaves those out of the output. Every other panic reaches the hook that was there
//! before, message and backtrace included.

use std::sync::Once;

/// What every deliberate panic's message starts with.
pub const DELIBERATE: &str = "deliberate panic (expected): ";

/// Panics with `what` (prefixed with [`DELIBERATE`]) without printing the panic message or
/// a backtrace. The payload is a `String`, as `panic!` with a message makes, so a port
/// reports it as it would any panic.
pub fn deliberate_panic(what: &str) -> ! {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message =
                payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
            if !message.is_some_and(|m| m.starts_with(DELIBERATE)) {
                previous(info);
            }
        }));
    });
    panic!("{DELIBERATE}{what}")
}
