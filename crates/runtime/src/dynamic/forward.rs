//! The macro that declares a twin trait and gives the plugin wrapper and the `Any*` enum
//! its methods, from one list.

/// Declares a twin trait (dispatched over its `Any*` enum by `enum_dispatch`, with an
/// `as_any` for downcasting), forwards it from the plugin wrapper to the handle it holds, and
/// gives the `Any*` enum the same methods as inherent ones, so callers need no trait
/// import (and `use gpuport::*` brings no second trait whose methods collide with the
/// core traits' on typed handles). An `unsafe` method is marked `@unsafe fn`.
macro_rules! twin_trait {
    (
        $(#[$tmeta:meta])*
        pub trait $tr:ident, forwarded by $wrapper:ident, inherent on $any:ident {
            $( $(#[$mmeta:meta])* $(@$unsafe:ident)? fn $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty; )*
        }
    ) => {
        $(#[$tmeta])*
        #[::enum_dispatch::enum_dispatch]
        pub trait $tr: Send + Sync + 'static {
            $( $(#[$mmeta])* $($unsafe)? fn $m(&self $(, $a: $t)*) -> $r; )*
            /// The typed handle, for downcasting.
            fn as_any(&self) -> &dyn Any;
        }
        impl $tr for $wrapper {
            $(
                twin_trait!(@forward $($unsafe)? $m(&self $(, $a: $t)*) -> $r);
            )*
            fn as_any(&self) -> &dyn Any {
                self.0.as_any()
            }
        }
        impl $any {
            $(
                twin_trait!(@inherent $tr $($unsafe)? $m(&self $(, $a: $t)*) -> $r);
            )*
        }
    };
    (@forward unsafe $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        #[inline]
        unsafe fn $m(&self $(, $a: $t)*) -> $r {
            // SAFETY: the caller upholds the trait method's contract, which is forwarded.
            unsafe { self.0.$m($($a),*) }
        }
    };
    (@forward $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        #[inline]
        fn $m(&self $(, $a: $t)*) -> $r {
            self.0.$m($($a),*)
        }
    };
    (@inherent $tr:ident unsafe $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        #[doc = concat!("See [`", stringify!($tr), "::", stringify!($m), "`].\n\n# Safety\nAs for that method.")]
        pub unsafe fn $m(&self $(, $a: $t)*) -> $r {
            // SAFETY: the caller upholds the trait method's contract, which is forwarded.
            unsafe { <Self as $tr>::$m(self $(, $a)*) }
        }
    };
    (@inherent $tr:ident $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        #[doc = concat!("See [`", stringify!($tr), "::", stringify!($m), "`].")]
        #[inline]
        pub fn $m(&self $(, $a: $t)*) -> $r {
            <Self as $tr>::$m(self $(, $a)*)
        }
    };
}

pub(crate) use twin_trait;
