//! The runtime compilers' shared C API. NVRTC and hiprtc declare the same functions under
//! their own prefix (`nvrtcCreateProgram`, `hiprtcCreateProgram`, …) with the same
//! signatures and status numbering (0 success, 6 a compilation error); only the image
//! getters differ (PTX or cubin; a code object). [`Rtc`] loads one by prefix and drives a
//! compilation: program, headers, name expressions, log, image, lowered names — every
//! program destroyed on every path.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::Mutex;

use libloading::Library;

use gpuport_core::{BackendKind, Error, KernelSource, Result};

use super::{Compiled, Failure, ImageKind};

type Program = *mut c_void;
type Status = c_int;

/// `…_SUCCESS`.
const SUCCESS: Status = 0;
/// `…_ERROR_INVALID_OPTION`: an argument the compiler does not take.
const ERROR_INVALID_OPTION: Status = 5;
/// `…_ERROR_COMPILATION`: the source did not compile; the log says why.
const ERROR_COMPILATION: Status = 6;

type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status;
type ErrorStringFn = unsafe extern "C" fn(Status) -> *const c_char;
type CreateFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> Status;
type DestroyFn = unsafe extern "C" fn(*mut Program) -> Status;
type CompileFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> Status;
type GetFn = unsafe extern "C" fn(Program, *mut c_char) -> Status;
type AddNameFn = unsafe extern "C" fn(Program, *const c_char) -> Status;
type LoweredFn = unsafe extern "C" fn(Program, *const c_char, *mut *const c_char) -> Status;

/// The image getters of one kind: `(size, get)`.
#[derive(Clone, Copy)]
struct Getter(SizeFn, GetFn);

/// A loaded runtime compiler.
pub struct Rtc {
    prefix: &'static str,
    backend: BackendKind,
    /// The file it was found in.
    pub library: String,
    /// `…Version`: (major, minor).
    pub version: (i32, i32),
    error_string: ErrorStringFn,
    create: CreateFn,
    destroy: DestroyFn,
    compile: CompileFn,
    log_size: SizeFn,
    log: GetFn,
    add_name: AddNameFn,
    lowered: LoweredFn,
    ptx: Option<Getter>,
    cubin: Option<Getter>,
    code: Option<Getter>,
    /// Held around each compilation where the compiler cannot run two at once.
    one_at_a_time: Option<Mutex<()>>,
    _lib: Library,
}

/// Whether a compiler may compile several programs at once, from several threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// NVRTC: thread-safe per program.
    Concurrent,
    /// One compilation at a time: hiprtc in ROCm 5.2 crashes (a segmentation fault in
    /// the code-object manager) when two threads compile at once.
    OneAtATime,
}

// SAFETY: both compilers' entry points may be called from any thread for distinct programs
// (NVRTC and hiprtc document thread safety per program); the struct is immutable.
unsafe impl Send for Rtc {}
// SAFETY: as above.
unsafe impl Sync for Rtc {}

/// Resolves `{prefix}{name}` as a `T`.
///
/// # Safety
/// `T` is the function's C signature.
unsafe fn symbol<T: Copy>(lib: &Library, prefix: &str, name: &str) -> Option<T> {
    let full = CString::new(format!("{prefix}{name}")).ok()?;
    // SAFETY: the caller's signature; looked up by name.
    unsafe { lib.get::<T>(full.as_bytes_with_nul()) }.ok().map(|s| *s)
}

impl Rtc {
    /// Opens the first of `candidates` that loads and exports `{prefix}CreateProgram`, and
    /// resolves the compiler's functions. Missing: `LibraryNotFound` with every attempt, or
    /// `MissingSymbol` naming the function.
    ///
    /// # Safety
    /// The candidates are the vendor's compiler libraries (or its runtime, where the
    /// compiler lives inside it).
    pub unsafe fn open(
        candidates: &[String],
        backend: BackendKind,
        env_var: &'static str,
        prefix: &'static str,
        concurrency: Concurrency,
    ) -> Result<Rtc> {
        let create_name = format!("{prefix}CreateProgram");
        let accept = |lib: &Library| {
            // SAFETY: only looked up.
            match unsafe { symbol::<CreateFn>(lib, prefix, "CreateProgram") } {
                Some(_) => Ok(()),
                None => Err(format!("no {create_name} in it")),
            }
        };
        // SAFETY: forwarded: the caller vouches for the candidates.
        let (lib, library) = unsafe { crate::loading::open_accepted_library(candidates, backend, env_var, accept) }?;
        let missing = |name: &str| Error::MissingSymbol {
            backend,
            symbol: format!("{prefix}{name}"),
            library: library.clone(),
            driver_version: None,
        };
        macro_rules! need {
            ($ty:ty, $name:literal) => {
                // SAFETY: the declared type is the function's C signature.
                unsafe { symbol::<$ty>(&lib, prefix, $name) }.ok_or_else(|| missing($name))?
            };
        }
        let getter = |size: &str, get: &str| {
            // SAFETY: as above.
            let size = unsafe { symbol::<SizeFn>(&lib, prefix, size) }?;
            // SAFETY: as above.
            let get = unsafe { symbol::<GetFn>(&lib, prefix, get) }?;
            Some(Getter(size, get))
        };
        let version_fn = need!(VersionFn, "Version");
        let (mut major, mut minor) = (0, 0);
        // SAFETY: valid out-pointers.
        unsafe { version_fn(&mut major, &mut minor) };
        Ok(Rtc {
            prefix,
            backend,
            version: (major, minor),
            error_string: need!(ErrorStringFn, "GetErrorString"),
            create: need!(CreateFn, "CreateProgram"),
            destroy: need!(DestroyFn, "DestroyProgram"),
            compile: need!(CompileFn, "CompileProgram"),
            log_size: need!(SizeFn, "GetProgramLogSize"),
            log: need!(GetFn, "GetProgramLog"),
            add_name: need!(AddNameFn, "AddNameExpression"),
            lowered: need!(LoweredFn, "GetLoweredName"),
            ptx: getter("GetPTXSize", "GetPTX"),
            cubin: getter("GetCUBINSize", "GetCUBIN"),
            code: getter("GetCodeSize", "GetCode"),
            one_at_a_time: (concurrency == Concurrency::OneAtATime).then(|| Mutex::new(())),
            library,
            _lib: lib,
        })
    }

    /// The status's words, for errors.
    fn status_text(&self, status: Status) -> String {
        // SAFETY: the compiler returns a static string (or null) for any status.
        let text = unsafe { (self.error_string)(status) };
        if text.is_null() {
            format!("status {status}")
        } else {
            // SAFETY: non-null, NUL-terminated, static.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        }
    }

    fn fail(&self, call: &str, status: Status) -> Failure {
        Failure::Other(Error::unsupported(
            self.backend,
            format!("{}{call} failed: {}", self.prefix, self.status_text(status)),
        ))
    }

    /// Compiles `source` with `headers`, `arguments` and `name_expressions` into an image
    /// of `kind`.
    pub fn compile(
        &self,
        source: &KernelSource,
        headers: &[(&str, &str)],
        arguments: &[String],
        name_expressions: &[String],
        kind: ImageKind,
    ) -> std::result::Result<Compiled, Failure> {
        let c =
            |s: &str| CString::new(s).map_err(|_| Failure::Other(Error::invalid_argument("a NUL byte in the input")));
        let code = c(&source.code)?;
        let name = c(&source.name)?;
        let header_texts = headers.iter().map(|(_, t)| c(t)).collect::<std::result::Result<Vec<_>, _>>()?;
        let header_names = headers.iter().map(|(n, _)| c(n)).collect::<std::result::Result<Vec<_>, _>>()?;
        let text_ptrs: Vec<*const c_char> = header_texts.iter().map(|s| s.as_ptr()).collect();
        let name_ptrs: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();
        // The lock (where the compiler needs it) covers the program's whole life.
        let _one = self.one_at_a_time.as_ref().map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        let mut program: Program = ptr::null_mut();
        // SAFETY: every pointer is a live NUL-terminated string (or array of them, with the
        // count given) for the call.
        let status = unsafe {
            (self.create)(
                &mut program,
                code.as_ptr(),
                name.as_ptr(),
                headers.len() as c_int,
                text_ptrs.as_ptr(),
                name_ptrs.as_ptr(),
            )
        };
        if status != SUCCESS {
            return Err(self.fail("CreateProgram", status));
        }
        let program = Owned { rtc: self, program };
        program.run(arguments, name_expressions, kind)
    }
}

/// A created program, destroyed on drop.
struct Owned<'a> {
    rtc: &'a Rtc,
    program: Program,
}

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        // SAFETY: created by CreateProgram, destroyed once.
        unsafe { (self.rtc.destroy)(&mut self.program) };
    }
}

impl Owned<'_> {
    fn run(
        &self,
        arguments: &[String],
        name_expressions: &[String],
        kind: ImageKind,
    ) -> std::result::Result<Compiled, Failure> {
        let rtc = self.rtc;
        let c =
            |s: &str| CString::new(s).map_err(|_| Failure::Other(Error::invalid_argument("a NUL byte in the input")));
        let exprs = name_expressions.iter().map(|e| c(e)).collect::<std::result::Result<Vec<_>, _>>()?;
        for expr in &exprs {
            // SAFETY: a live program and a NUL-terminated name.
            let status = unsafe { (rtc.add_name)(self.program, expr.as_ptr()) };
            if status != SUCCESS {
                return Err(rtc.fail("AddNameExpression", status));
            }
        }
        let args = arguments.iter().map(|a| c(a)).collect::<std::result::Result<Vec<_>, _>>()?;
        let arg_ptrs: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: a live program; `arg_ptrs.len()` NUL-terminated options.
        let status = unsafe { (rtc.compile)(self.program, arg_ptrs.len() as c_int, arg_ptrs.as_ptr()) };
        let log = self.read(rtc.log_size, rtc.log, "GetProgramLog")?;
        let log = String::from_utf8_lossy(log.strip_suffix(&[0]).unwrap_or(&log)).trim_end().to_owned();
        match status {
            SUCCESS => {}
            ERROR_COMPILATION => return Err(Failure::Log(log)),
            ERROR_INVALID_OPTION => {
                return Err(Failure::Other(Error::invalid_argument(format!(
                    "{} refused the options {arguments:?}: {log}",
                    rtc.prefix
                ))))
            }
            other => {
                let mut text = rtc.status_text(other);
                if !log.is_empty() {
                    text = format!("{text}:\n{log}");
                }
                return Err(Failure::Other(Error::unsupported(
                    rtc.backend,
                    format!("{}CompileProgram: {text}", rtc.prefix),
                )));
            }
        }
        let getter = match kind {
            ImageKind::Ptx => rtc.ptx,
            ImageKind::Cubin => rtc.cubin,
            ImageKind::HipCodeObject => rtc.code,
        }
        .ok_or_else(|| {
            Failure::Other(Error::unsupported(rtc.backend, format!("{:?} images from {}", kind, rtc.library)))
        })?;
        let mut image = self.read(getter.0, getter.1, "GetCode")?;
        if kind == ImageKind::Ptx {
            // PTX is text: its terminating NUL is not part of it.
            while image.last() == Some(&0) {
                image.pop();
            }
        }
        let mut lowered = Vec::with_capacity(exprs.len());
        for (expr, cexpr) in name_expressions.iter().zip(&exprs) {
            let mut out: *const c_char = ptr::null();
            // SAFETY: a compiled program; the expression was added before compiling.
            let status = unsafe { (rtc.lowered)(self.program, cexpr.as_ptr(), &mut out) };
            if status != SUCCESS || out.is_null() {
                return Err(rtc.fail("GetLoweredName", status));
            }
            // SAFETY: non-null, NUL-terminated, owned by the program (copied before it goes).
            lowered.push((expr.clone(), unsafe { CStr::from_ptr(out) }.to_string_lossy().into_owned()));
        }
        Ok(Compiled { image, kind, lowered })
    }

    /// A size-then-contents getter's bytes.
    fn read(&self, size: SizeFn, get: GetFn, call: &str) -> std::result::Result<Vec<u8>, Failure> {
        let mut n = 0usize;
        // SAFETY: a live program; valid out-pointer.
        let status = unsafe { size(self.program, &mut n) };
        if status != SUCCESS {
            return Err(self.rtc.fail(call, status));
        }
        let mut buf = vec![0u8; n];
        if n > 0 {
            // SAFETY: a buffer of the size the compiler gave.
            let status = unsafe { get(self.program, buf.as_mut_ptr().cast()) };
            if status != SUCCESS {
                return Err(self.rtc.fail(call, status));
            }
        }
        Ok(buf)
    }
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// A failing status is told in the compiler's own words (its `GetErrorString`), with
    /// the call that failed: checked with each compiler the environment names
    /// (`cargo xtask test` names NVRTC and hiprtc; nothing to check where neither is).
    #[test]
    fn a_status_is_told_in_the_compilers_words() {
        for (var, prefix, backend) in [
            ("GPUPORT_NVRTC_LIBRARY", "nvrtc", BackendKind::Cuda),
            ("GPUPORT_HIPRTC_LIBRARY", "hiprtc", BackendKind::Rocm),
        ] {
            let Some(path) = std::env::var_os(var) else { continue };
            let candidates = [path.to_string_lossy().into_owned()];
            // SAFETY: the file the environment names as that compiler.
            let rtc = unsafe { Rtc::open(&candidates, backend, var, prefix, Concurrency::OneAtATime) }.unwrap();
            let success = rtc.status_text(SUCCESS);
            assert!(success.ends_with("SUCCESS"), "{prefix}: {success}");
            let words = rtc.status_text(ERROR_COMPILATION);
            assert!(words.ends_with("ERROR_COMPILATION"), "{prefix}: {words}");
            match rtc.fail("AddNameExpression", ERROR_COMPILATION) {
                Failure::Other(e) => {
                    let text = e.to_string();
                    assert!(text.contains(&format!("{prefix}AddNameExpression failed: {words}")), "{text}");
                }
                Failure::Log(log) => panic!("a failed call is not a compile log: {log}"),
            }
        }
    }
}
