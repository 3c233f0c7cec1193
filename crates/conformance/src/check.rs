//! Failures and the `ensure!` macro used by the cases.

use std::fmt;

/// Why a case failed.
#[derive(Debug)]
pub struct Failure(String);

impl Failure {
    /// A failure with a message.
    pub fn new(msg: impl Into<String>) -> Self {
        Failure(msg.into())
    }
    /// Prefixes context.
    pub fn context(self, ctx: impl fmt::Display) -> Self {
        Failure(format!("{ctx}: {}", self.0))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<gpuport_runtime::Error> for Failure {
    fn from(e: gpuport_runtime::Error) -> Self {
        Failure(format!("unexpected error: {e}"))
    }
}

/// A case's result. A case that cannot apply to a target is never run: its [`crate::Need`]s
/// say so up front, and it is reported as skipped with the reason.
pub type Outcome = Result<(), Failure>;

/// Fails the case with a formatted message unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            return Err($crate::Failure::new(format!("{} (at {}:{})", format!($($msg)+), file!(), line!())));
        }
    };
}

/// Fails unless the result is an error matching the pattern.
#[macro_export]
macro_rules! ensure_err {
    ($result:expr, $pat:pat, $what:expr) => {
        match $result {
            Err($pat) => {}
            Err(other) => {
                return Err($crate::Failure::new(format!(
                    "{}: expected {} but got the error: {other}",
                    $what,
                    stringify!($pat)
                )))
            }
            Ok(_) => {
                return Err($crate::Failure::new(format!("{}: expected {} but it succeeded", $what, stringify!($pat))))
            }
        }
    };
}
