//! Helpers for the doubles' exported C functions: serving a call without ever unwinding
//! into C, and writing through the out-pointers a caller passes.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::{Call, Error, Result};

/// Serves one call: runs `body`, maps its error to the vendor's status with `code`, and
/// turns a panic (a bug in the double) into a report and `unknown`, never an unwind
/// across the C boundary.
pub fn serve(cx: &Call<'_>, code: fn(Error) -> u32, unknown: u32, body: impl FnOnce() -> Result<()>) -> u32 {
    let status = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => code(e),
        Err(_) => {
            crate::report::violation("internal", cx, "the double panicked serving this call (a bug in the double)");
            unknown
        }
    };
    LAST.with(|last| {
        let (_, failure) = last.get();
        last.set((status, if status == 0 { failure } else { status }));
    });
    status
}

thread_local! {
    /// This thread's last served status, and its last failed one (0 when none since the
    /// last read): what a runtime's "last error" query answers.
    static LAST: std::cell::Cell<(u32, u32)> = const { std::cell::Cell::new((0, 0)) };
}

/// The "last error" of this thread, reset to success: with `failures_only` the last
/// failed status since the previous read (CUDA's `cudaGetLastError`, HIP 7's
/// `hipGetLastError`), else the status of the last call served (HIP before 7).
pub fn take_last_status(failures_only: bool) -> u32 {
    let status = peek_last_status(failures_only);
    LAST.with(|last| last.set((0, 0)));
    status
}

/// What [`take_last_status`] would answer, without the reset.
pub fn peek_last_status(failures_only: bool) -> u32 {
    LAST.with(|last| {
        let (status, failure) = last.get();
        if failures_only {
            failure
        } else {
            status
        }
    })
}

/// Writes `value` through an out-pointer; a null one is `InvalidValue`.
///
/// # Safety
/// `p` is null or valid for a write of `T` (the caller's contract with the driver).
pub unsafe fn put<T>(p: *mut T, value: T) -> Result<()> {
    if p.is_null() {
        return Err(Error::InvalidValue);
    }
    // SAFETY: non-null, and valid for a write per the contract; unaligned is tolerated.
    unsafe { p.write_unaligned(value) };
    Ok(())
}

/// Copies `text` into a caller's buffer of `len` bytes, truncated and NUL-terminated.
///
/// # Safety
/// `buf` is null or valid for `len` bytes.
pub unsafe fn put_text(buf: *mut c_char, len: i32, text: &str) -> Result<()> {
    if buf.is_null() || len <= 0 {
        return Err(Error::InvalidValue);
    }
    let n = text.len().min(len as usize - 1);
    // SAFETY: `n + 1 <= len` bytes of the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
    Ok(())
}

/// The length of an image the caller passed without one: a NUL-terminated text, an ELF
/// file (up to the end of its last section or header table), a fatbin (its header's
/// size) or a clang offload bundle (its last entry's end).
///
/// # Safety
/// `image` points at a well-formed image of one of these kinds (the driver's contract:
/// the driver reads as far as the image's own headers say).
pub unsafe fn image_bytes<'a>(image: *const u8) -> Result<&'a [u8]> {
    if image.is_null() {
        return Err(Error::InvalidValue);
    }
    // Whether the image starts with `magic`, read one byte at a time and no further than
    // the first byte that differs: a text image (shorter than any magic, perhaps) differs
    // at its terminating NUL at the latest, as no magic holds a NUL.
    let starts_with = |magic: &[u8]| {
        // SAFETY: each byte read is at or before the first one that differs from `magic`,
        // so within the image whatever its kind (see above).
        magic.iter().enumerate().all(|(i, m)| unsafe { *image.add(i) } == *m)
    };
    // SAFETY: used only once `starts_with` has recognised a binary image, whose headers
    // are at least this long.
    let head = |at: usize, n: usize| unsafe { std::slice::from_raw_parts(image.add(at), n) };
    let u16_at = |at: usize| u16::from_le_bytes([head(at, 2)[0], head(at, 2)[1]]) as usize;
    let u64_at = |at: usize| {
        let b = head(at, 8);
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as usize
    };
    let len = if starts_with(b"\x7fELF") {
        let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
        let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3A), u16_at(0x3C));
        let mut end = (phoff + phentsize * phnum).max(shoff + shentsize * shnum).max(64);
        for i in 0..shnum {
            let at = shoff + i * shentsize;
            let (kind, off, size) = (u16_at(at + 4), u64_at(at + 0x18), u64_at(at + 0x20));
            if kind != 8 {
                end = end.max(off.saturating_add(size)); // SHT_NOBITS occupies nothing
            }
        }
        end
    } else if starts_with(&crate::image::FATBIN_MAGIC.to_le_bytes()) {
        u16_at(6) + u64_at(8)
    } else if starts_with(crate::image::BUNDLE_MAGIC) {
        let count = u64_at(24);
        let (mut at, mut end) = (32, 32);
        for _ in 0..count.min(4096) {
            let (offset, size, tlen) = (u64_at(at), u64_at(at + 8), u64_at(at + 16));
            at += 24 + tlen;
            end = end.max(at).max(offset + size);
        }
        end
    } else {
        // SAFETY: a text image is NUL-terminated (the contract).
        unsafe { std::ffi::CStr::from_ptr(image.cast()) }.to_bytes().len()
    };
    // SAFETY: the image holds `len` bytes per its own headers (the contract).
    Ok(unsafe { std::slice::from_raw_parts(image, len) })
}

/// Declares a vendor's status codes (`NAME = code, "description";` each) as constants of
/// type `$ty`, and `name(code)`: the status's name and description as static C strings,
/// for the vendor's error-name functions.
#[macro_export]
macro_rules! statuses {
    ($ty:ty; $($name:ident = $code:literal, $text:literal;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: ", $text, ".")]
            #[allow(non_upper_case_globals)]
            pub const $name: $ty = $code;
        )*

        /// The name and description of a status, if the driver knows it.
        pub fn name(code: $ty) -> Option<(&'static ::std::ffi::CStr, &'static ::std::ffi::CStr)> {
            match code {
                $($code => Some((
                    // SAFETY: a literal with one NUL, at its end.
                    unsafe { ::std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
                    // SAFETY: as above.
                    unsafe { ::std::ffi::CStr::from_bytes_with_nul_unchecked(concat!($text, "\0").as_bytes()) },
                )),)*
                _ => None,
            }
        }
    };
}

/// Defines a double's exported C functions: each body runs as a closure returning
/// `Result<()>` through [`serve`] (inside `catch_unwind`, its error mapped by `$code`,
/// a panic answered with `$unknown`), with `$cx` the call (name and rendered arguments)
/// for reports. Attributes (`#[no_mangle]`, docs) are given per function.
#[macro_export]
macro_rules! export_c {
    (
        returns $ret:ty, codes $code:path, unknown $unknown:expr;
        $( $(#[$meta:meta])* fn $name:ident[$cx:ident]($($arg:ident: $ty:ty),* $(,)?) $body:block )*
    ) => {
        $(
            $(#[$meta])*
            ///
            /// # Safety
            /// The arguments follow the C API's contract: pointers are null or valid for what
            /// the call reads or writes through them. The call runs inside `catch_unwind`
            /// (`serve`): nothing unwinds into the caller.
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                let args = || {
                    let parts: Vec<String> = vec![$(format!("{}={:?}", stringify!($arg), $arg)),*];
                    parts.join(", ")
                };
                let $cx = $crate::Call { name: stringify!($name), args: &args };
                $crate::ffi::serve(&$cx, $code, $unknown, || $body)
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    use super::image_bytes;

    /// A text image shorter than every binary magic is read to its NUL and no further:
    /// each image lives in an allocation of exactly its size, so a read past it is one
    /// Miri (and, when the bytes after it are freed, ThreadSanitizer) reports.
    #[test]
    fn short_text_images_are_read_no_further_than_their_end() {
        for text in [&b"\0"[..], b"a\0", b"\x7fEL\0", b"__CLANG_OFFLOAD\0", b"not ptx at all\0"] {
            let image: Box<[u8]> = text.into();
            // SAFETY: a NUL-terminated text, alive for the call.
            let bytes = unsafe { image_bytes(image.as_ptr()) }.unwrap();
            assert_eq!(bytes, &text[..text.len() - 1]);
        }
    }
}
