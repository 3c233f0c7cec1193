//! dtype arguments (`"float32"`, `"<f4"`, a NumPy dtype, a NumPy scalar type such as
//! `np.float32`, `float`, `int`, `bool`, `complex`)
//! and the buffer protocol's struct format codes, both ways.

use std::ffi::CStr;

use gpuport::{DType, DTypeCode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyInt, PyString, PyType};

/// A dtype argument; `None` is `default`.
pub fn parse(arg: Option<&Bound<'_, PyAny>>, default: DType) -> PyResult<DType> {
    let Some(arg) = arg.filter(|a| !a.is_none()) else { return Ok(default) };
    if let Ok(s) = arg.cast::<PyString>() {
        return by_name(s.to_str()?);
    }
    if let Ok(t) = arg.cast::<PyType>() {
        // Python's own scalar types, as NumPy reads them.
        if t.is(arg.py().get_type::<PyBool>()) {
            return Ok(DType::BOOL);
        }
        if t.is(arg.py().get_type::<PyInt>()) {
            return Ok(DType::I64);
        }
        if t.is(arg.py().get_type::<PyFloat>()) {
            return Ok(DType::F64);
        }
        if t.is(arg.py().get_type::<PyComplex>()) {
            return Ok(DType::C128);
        }
        // A NumPy scalar type (`np.float32`, `np.bool_`, `np.intc`; ml_dtypes' too): its
        // `dtype` is a descriptor on the class, so ask a value of it, as NumPy does.
        if let Ok(dt) = t.call1((0,)).and_then(|zero| zero.getattr("dtype")) {
            return parse(Some(&dt), default).map_err(|_| unknown(arg));
        }
    }
    // A NumPy dtype (or scalar type such as np.float32): its name, else its typestr.
    for attr in ["name", "str"] {
        if let Ok(v) = arg.getattr(attr).and_then(|v| v.extract::<String>()) {
            if let Ok(d) = DType::from_name(&v) {
                return Ok(d);
            }
        }
    }
    if let Ok(dt) = arg.getattr("dtype") {
        if !dt.is(arg) {
            return parse(Some(&dt), default);
        }
    }
    Err(unknown(arg))
}

/// The error for a dtype argument nothing reads.
fn unknown(arg: &Bound<'_, PyAny>) -> PyErr {
    let shown = arg.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!(
        "dtype must be a name such as 'float32', a typestr such as '<f4', a NumPy dtype or scalar type such as \
         np.float32, or bool, int, float or complex, not {shown}"
    ))
}

/// A dtype name or typestr; unknown ones are ValueError.
pub fn by_name(name: &str) -> PyResult<DType> {
    DType::from_name(name).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The struct module's format code for `dtype` (native order), where it has one.
pub fn struct_format(dtype: DType) -> Option<&'static CStr> {
    use DTypeCode::*;
    if dtype.lanes() != 1 {
        return None;
    }
    Some(match (dtype.code(), dtype.bits()) {
        (Bool, 8) => c"?",
        (Int, 8) => c"b",
        (UInt, 8) => c"B",
        (Int, 16) => c"h",
        (UInt, 16) => c"H",
        (Int, 32) => c"i",
        (UInt, 32) => c"I",
        (Int, 64) => c"q",
        (UInt, 64) => c"Q",
        (Float, 16) => c"e",
        (Float, 32) => c"f",
        (Float, 64) => c"d",
        (Complex, 64) => c"Zf",
        (Complex, 128) => c"Zd",
        _ => return None,
    })
}

/// The dtype of a buffer's struct format and itemsize (`"<f"`, `"@q"`, `"Zd"`, `"?"`).
/// A byte order other than native, and formats with no dtype, are BufferError-worthy:
/// returned as a message.
pub fn from_struct_format(format: &str, itemsize: usize) -> Result<DType, String> {
    let native = if cfg!(target_endian = "little") { '<' } else { '>' };
    let mut body = format;
    if let Some(first) = format.chars().next() {
        if "@=<>!".contains(first) {
            if (first == '<' || first == '>' || first == '!')
                && (if first == '!' { '>' } else { first }) != native
                && itemsize > 1
            {
                return Err(format!("buffer format {} is not in native byte order", crate::text::str_repr(format)));
            }
            body = &format[1..];
        }
    }
    let bits = u8::try_from(itemsize * 8).map_err(|_| format!("buffer itemsize {itemsize} is too large"))?;
    let code = match body {
        "?" => DTypeCode::Bool,
        "b" | "h" | "i" | "l" | "q" | "n" => DTypeCode::Int,
        "B" | "H" | "I" | "L" | "Q" | "N" | "c" => DTypeCode::UInt,
        "e" | "f" | "d" => DTypeCode::Float,
        "Zf" | "Zd" => DTypeCode::Complex,
        _ => return Err(format!("buffer format {} has no gpuport dtype", crate::text::str_repr(format))),
    };
    DType::new(code, bits, 1)
        .map_err(|e| format!("buffer format {} with itemsize {itemsize}: {e}", crate::text::str_repr(format)))
}
