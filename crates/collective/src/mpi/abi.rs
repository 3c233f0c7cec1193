//! The MPI standard ABI (MPI 5.0, `mpi_abi.h`): handle types and the predefined handles'
//! values, fixed by the standard, so one gpuport binary works with any implementation that
//! ships `libmpi_abi.so` — no `mpi.h` at build time.

use std::ffi::{c_char, c_int, c_void};

use gpuport_core::{DType, DTypeCode};

/// A communicator (`MPI_Comm`: a pointer-sized handle).
pub type Comm = *mut c_void;
/// A datatype (`MPI_Datatype`).
pub type Datatype = *mut c_void;
/// A reduction operation (`MPI_Op`).
pub type Op = *mut c_void;
/// A request of a nonblocking call (`MPI_Request`).
pub type Request = *mut c_void;
/// An error handler (`MPI_Errhandler`).
pub type Errhandler = *mut c_void;
/// `MPI_Count`: 64-bit on every platform the ABI names.
pub type Count = i64;

/// `MPI_Status` (the ABI fixes its layout: three public fields and five reserved).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct Status {
    /// `MPI_SOURCE`.
    pub source: c_int,
    /// `MPI_TAG`.
    pub tag: c_int,
    /// `MPI_ERROR`.
    pub error: c_int,
    internal: [c_int; 5],
}

/// A predefined handle: the ABI gives each a small integer value.
const fn handle(value: usize) -> *mut c_void {
    value as *mut c_void
}

/// `MPI_COMM_NULL`.
pub const COMM_NULL: usize = 0x100;
/// `MPI_COMM_WORLD`.
pub const COMM_WORLD: usize = 0x101;
/// `MPI_REQUEST_NULL`.
pub const REQUEST_NULL: usize = 0x180;
/// `MPI_ERRORS_RETURN`.
pub const ERRORS_RETURN: usize = 0x143;

/// `MPI_SUM`.
pub const SUM: usize = 0x21;
/// `MPI_MIN`.
pub const MIN: usize = 0x22;
/// `MPI_MAX`.
pub const MAX: usize = 0x23;
/// `MPI_PROD`.
pub const PROD: usize = 0x24;
/// `MPI_LAND`.
pub const LAND: usize = 0x30;
/// `MPI_LOR`.
pub const LOR: usize = 0x31;

/// `MPI_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// `MPI_UNDEFINED` (a `split` color for "not in any new communicator").
pub const UNDEFINED: c_int = -32766;
/// `MPI_THREAD_SERIALIZED`.
pub const THREAD_SERIALIZED: c_int = 2048;
/// `MPI_THREAD_MULTIPLE`.
pub const THREAD_MULTIPLE: c_int = 4096;
/// `MPI_MAX_LIBRARY_VERSION_STRING`, at its largest (MPICH's 8192; Open MPI's is 256).
pub const MAX_LIBRARY_VERSION_STRING: usize = 8192;
/// `MPI_MAX_ERROR_STRING`, at its largest (MPICH's 512).
pub const MAX_ERROR_STRING: usize = 512;

/// The handle for a predefined value.
pub fn predefined(value: usize) -> *mut c_void {
    handle(value)
}

/// The MPI datatype of gpuport's `dtype`, if the standard ABI has one: fixed-width
/// integers, `float`, `double`, their complex pairs and `bool`. Half, bfloat and the 8-bit
/// floats have no standard MPI type.
pub fn datatype(dtype: DType) -> Option<usize> {
    if dtype.lanes() != 1 {
        return None;
    }
    Some(match (dtype.code(), dtype.bits()) {
        (DTypeCode::Int, 8) => 0x240,
        (DTypeCode::UInt, 8) => 0x241,
        (DTypeCode::Int, 16) => 0x248,
        (DTypeCode::UInt, 16) => 0x249,
        (DTypeCode::Int, 32) => 0x250,
        (DTypeCode::UInt, 32) => 0x251,
        (DTypeCode::Int, 64) => 0x258,
        (DTypeCode::UInt, 64) => 0x259,
        (DTypeCode::Float, 32) => 0x210,
        (DTypeCode::Float, 64) => 0x214,
        (DTypeCode::Complex, 64) => 0x212,
        (DTypeCode::Complex, 128) => 0x216,
        (DTypeCode::Bool, 8) => 0x238,
        _ => return None,
    })
}

/// Signatures of the entry points gpuport calls (the standard's C bindings). The data
/// moves through the nonblocking forms, whose requests gpuport tests until done or until
/// its watchdog's time is up; the `_c` forms take `MPI_Count` element counts, so arrays
/// past 2³¹ elements need no splitting.
pub mod sig {
    use super::*;

    pub type Initialized = unsafe extern "C" fn(*mut c_int) -> c_int;
    pub type Finalized = unsafe extern "C" fn(*mut c_int) -> c_int;
    pub type InitThread = unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char, c_int, *mut c_int) -> c_int;
    pub type QueryThread = unsafe extern "C" fn(*mut c_int) -> c_int;
    pub type Finalize = unsafe extern "C" fn() -> c_int;
    pub type GetLibraryVersion = unsafe extern "C" fn(*mut c_char, *mut c_int) -> c_int;
    pub type ErrorString = unsafe extern "C" fn(c_int, *mut c_char, *mut c_int) -> c_int;
    pub type CommSetErrhandler = unsafe extern "C" fn(Comm, Errhandler) -> c_int;
    pub type CommRank = unsafe extern "C" fn(Comm, *mut c_int) -> c_int;
    pub type CommDup = unsafe extern "C" fn(Comm, *mut Comm) -> c_int;
    pub type CommSplit = unsafe extern "C" fn(Comm, c_int, c_int, *mut Comm) -> c_int;
    pub type CommFree = unsafe extern "C" fn(*mut Comm) -> c_int;
    pub type Abort = unsafe extern "C" fn(Comm, c_int) -> c_int;
    pub type Test = unsafe extern "C" fn(*mut Request, *mut c_int, *mut Status) -> c_int;
    pub type Ibarrier = unsafe extern "C" fn(Comm, *mut Request) -> c_int;
    pub type Iallreduce =
        unsafe extern "C" fn(*const c_void, *mut c_void, Count, Datatype, Op, Comm, *mut Request) -> c_int;
    pub type Ibcast = unsafe extern "C" fn(*mut c_void, Count, Datatype, c_int, Comm, *mut Request) -> c_int;
    pub type Ireduce =
        unsafe extern "C" fn(*const c_void, *mut c_void, Count, Datatype, Op, c_int, Comm, *mut Request) -> c_int;
    pub type Iallgather =
        unsafe extern "C" fn(*const c_void, Count, Datatype, *mut c_void, Count, Datatype, Comm, *mut Request) -> c_int;
    pub type IreduceScatterBlock =
        unsafe extern "C" fn(*const c_void, *mut c_void, Count, Datatype, Op, Comm, *mut Request) -> c_int;
    pub type Isend = unsafe extern "C" fn(*const c_void, Count, Datatype, c_int, c_int, Comm, *mut Request) -> c_int;
    pub type Irecv = unsafe extern "C" fn(*mut c_void, Count, Datatype, c_int, c_int, Comm, *mut Request) -> c_int;
}

/// `MPI_IN_PLACE`.
pub const IN_PLACE: usize = 1;
