//! The macro that gives plugin wrappers and `Any*` enums the methods of a twin trait.

/// For one twin trait: forwards it from the plugin wrapper to its trait object, and gives
/// the `Any*` enum the same methods as inherent ones, so callers need no trait import
/// (and `use gpuport::*` brings no second trait whose methods collide with the core
/// traits' on typed handles).
macro_rules! forward_to_plugin_and_any {
    ($tr:ident for $wrapper:ident, $any:ident { $( $(#[$unsafe:ident])? fn $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty; )* }) => {
        impl $tr for $wrapper {
            $(
                forward_to_plugin_and_any!(@forward $($unsafe)? $m(&self $(, $a: $t)*) -> $r);
            )*
            fn as_any(&self) -> &dyn Any {
                self.0.as_any()
            }
        }
        impl $any {
            $(
                forward_to_plugin_and_any!(@inherent $tr $($unsafe)? $m(&self $(, $a: $t)*) -> $r);
            )*
        }
    };
    (@forward unsafe $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        unsafe fn $m(&self $(, $a: $t)*) -> $r {
            // SAFETY: the caller upholds the trait method's contract, which is forwarded.
            unsafe { self.0.$m($($a),*) }
        }
    };
    (@forward $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
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

pub(crate) use forward_to_plugin_and_any;
