//! Python scalars and nested sequences as element bytes of a dtype, and back (for
//! `full`, `asarray` of Python data and `Array.tolist`). Half and bfloat16 are converted
//! here with round-to-nearest-even, as NumPy and ml_dtypes do.

use gpuport::{DType, DTypeCode, MAX_NDIM};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyList, PySequence, PyTuple};

/// The bits of the IEEE half nearest to `x` (ties to even).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let rounded = m + (1 << (shift - 1)) - 1 + ((m >> shift) & 1);
        return sign | (rounded >> shift) as u16;
    }
    let rounded = man + 0xfff + ((man >> 13) & 1);
    let value = ((e as u32) << 10) + (rounded >> 13);
    if value >= 0x7c00 {
        return sign | 0x7c00;
    }
    sign | value as u16
}

/// The value of IEEE half bits.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        0 => sign * man as f32 * f32::powi(2.0, -24),
        31 => f32::from_bits(((u32::from(h) & 0x8000) << 16) | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(((u32::from(h) & 0x8000) << 16) | ((exp + 112) << 23) | (man << 13)),
    }
}

/// The bits of the bfloat16 nearest to `x` (ties to even).
pub fn f32_to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7fc0;
    }
    let b = x.to_bits();
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// A Python scalar, as NumPy reads one.
#[derive(Debug, Clone, Copy)]
pub enum Scalar {
    Bool(bool),
    Int(i128),
    Float(f64),
    Complex(f64, f64),
}

impl std::fmt::Display for Scalar {
    /// As Python writes the value: `True`, `3`, `1.5`, `(1+2j)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Scalar::Bool(b) => f.write_str(if b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => f.write_str(&crate::text::float(x)),
            Scalar::Complex(re, im) => {
                let sign = if im.is_sign_negative() { '-' } else { '+' };
                write!(f, "({}{sign}{}j)", crate::text::float(re), crate::text::float(im.abs()))
            }
        }
    }
}

impl Scalar {
    /// Reads a Python `bool`, `int`, `float` or `complex` (or anything with `__index__`,
    /// `__float__` or `__complex__`, such as NumPy scalars).
    pub fn extract(v: &Bound<'_, PyAny>) -> PyResult<Scalar> {
        if v.is_instance_of::<PyBool>() {
            return Ok(Scalar::Bool(v.extract()?));
        }
        if let Ok(i) = v.extract::<i128>() {
            if !v.is_instance_of::<PyFloat>() {
                return Ok(Scalar::Int(i));
            }
        }
        if v.is_instance_of::<PyComplex>() {
            let c = v.cast::<PyComplex>()?;
            return Ok(Scalar::Complex(c.real(), c.imag()));
        }
        if let Ok(f) = v.extract::<f64>() {
            return Ok(Scalar::Float(f));
        }
        Err(PyTypeError::new_err(format!("expected a number, not {}", v.get_type().name()?)))
    }

    /// The dtype NumPy gives a sequence of such scalars (bool < int64 < float64 < complex128).
    fn rank(self) -> u8 {
        match self {
            Scalar::Bool(_) => 0,
            Scalar::Int(_) => 1,
            Scalar::Float(_) => 2,
            Scalar::Complex(..) => 3,
        }
    }

    /// Appends the element bytes of this value as `dtype`. Integers out of range are
    /// OverflowError; a non-integral float for an integer dtype, complex for a real one,
    /// and dtypes without a Python scalar are ValueError/TypeError.
    pub fn write(self, dtype: DType, out: &mut Vec<u8>) -> PyResult<()> {
        use DTypeCode::*;
        let real = || -> PyResult<f64> {
            match self {
                Scalar::Bool(b) => Ok(f64::from(u8::from(b))),
                Scalar::Int(i) => Ok(i as f64),
                Scalar::Float(f) => Ok(f),
                Scalar::Complex(..) => Err(PyTypeError::new_err(format!("a complex value for dtype {dtype}"))),
            }
        };
        let integer = || -> PyResult<i128> {
            match self {
                Scalar::Bool(b) => Ok(i128::from(b)),
                Scalar::Int(i) => Ok(i),
                Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 1e38 => Ok(f as i128),
                _ => Err(PyValueError::new_err(format!("{self} is not an integer (dtype {dtype})"))),
            }
        };
        if dtype.lanes() != 1 {
            return Err(PyValueError::new_err(format!("no Python scalar for the vector dtype {dtype}")));
        }
        match (dtype.code(), dtype.bits()) {
            (Bool, 8) => out.push(u8::from(real()? != 0.0)),
            (Int, bits @ (8 | 16 | 32 | 64)) | (UInt, bits @ (8 | 16 | 32 | 64)) => {
                let i = integer()?;
                let signed = dtype.code() == Int;
                let (lo, hi) =
                    if signed { (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1) } else { (0, (1i128 << bits) - 1) };
                if i < lo || i > hi {
                    return Err(PyOverflowError::new_err(format!("{i} is out of range for {dtype}")));
                }
                out.extend_from_slice(&i.to_le_bytes()[..usize::from(bits / 8)]);
            }
            (Float, 16) => out.extend_from_slice(&f32_to_f16(real()? as f32).to_ne_bytes()),
            (Float, 32) => out.extend_from_slice(&(real()? as f32).to_ne_bytes()),
            (Float, 64) => out.extend_from_slice(&real()?.to_ne_bytes()),
            (Bfloat, 16) => out.extend_from_slice(&f32_to_bf16(real()? as f32).to_ne_bytes()),
            (Complex, 64 | 128) => {
                let (re, im) = match self {
                    Scalar::Complex(re, im) => (re, im),
                    _ => (real()?, 0.0),
                };
                if dtype.bits() == 64 {
                    out.extend_from_slice(&(re as f32).to_ne_bytes());
                    out.extend_from_slice(&(im as f32).to_ne_bytes());
                } else {
                    out.extend_from_slice(&re.to_ne_bytes());
                    out.extend_from_slice(&im.to_ne_bytes());
                }
            }
            _ => return Err(PyValueError::new_err(format!("no Python scalar converts to dtype {dtype}"))),
        }
        Ok(())
    }
}

/// One element's bytes as a Python value (`tolist`).
pub fn read<'py>(py: Python<'py>, dtype: DType, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    use DTypeCode::*;
    let arr = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    Ok(match (dtype.code(), dtype.bits()) {
        (Bool, 8) => PyBool::new(py, b[0] != 0).to_owned().into_any(),
        (Int, 8) => (b[0] as i8).into_pyobject(py)?.into_any(),
        (Int, 16) => i16::from_ne_bytes([b[0], b[1]]).into_pyobject(py)?.into_any(),
        (Int, 32) => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]).into_pyobject(py)?.into_any(),
        (Int, 64) => i64::from_ne_bytes(arr(8)).into_pyobject(py)?.into_any(),
        (UInt, 8) => b[0].into_pyobject(py)?.into_any(),
        (UInt, 16) => u16::from_ne_bytes([b[0], b[1]]).into_pyobject(py)?.into_any(),
        (UInt, 32) => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]).into_pyobject(py)?.into_any(),
        (UInt, 64) => u64::from_ne_bytes(arr(8)).into_pyobject(py)?.into_any(),
        (Float, 16) => f64::from(f16_to_f32(u16::from_ne_bytes([b[0], b[1]]))).into_pyobject(py)?.into_any(),
        (Bfloat, 16) => {
            f64::from(f32::from_bits(u32::from(u16::from_ne_bytes([b[0], b[1]])) << 16)).into_pyobject(py)?.into_any()
        }
        (Float, 32) => f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).into_pyobject(py)?.into_any(),
        (Float, 64) => f64::from_ne_bytes(arr(8)).into_pyobject(py)?.into_any(),
        (Complex, 64) => PyComplex::from_doubles(
            py,
            f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            f64::from(f32::from_ne_bytes([b[4], b[5], b[6], b[7]])),
        )
        .into_any(),
        (Complex, 128) => {
            let mut im = [0u8; 8];
            im.copy_from_slice(&b[8..16]);
            PyComplex::from_doubles(py, f64::from_ne_bytes(arr(8)), f64::from_ne_bytes(im)).into_any()
        }
        _ => return Err(PyValueError::new_err(format!("no Python scalar for dtype {dtype}"))),
    })
}

/// Python data (a scalar or nested lists/tuples) as a shape, the dtype NumPy would infer
/// and the scalars in row-major order. Ragged nesting is ValueError; an element that is
/// not a number (a string, `None`, an object) is TypeError naming its type; nesting deeper
/// than an array's dimensions can be is ValueError (so the reading stays bounded).
pub fn flatten(obj: &Bound<'_, PyAny>) -> PyResult<(Vec<usize>, DType, Vec<Scalar>)> {
    let mut shape = Vec::new();
    let mut probe = obj.clone();
    while probe.is_instance_of::<PyList>() || probe.is_instance_of::<PyTuple>() {
        if shape.len() == MAX_NDIM {
            return Err(PyValueError::new_err(format!(
                "the nested sequences go deeper than the {MAX_NDIM} dimensions an array can have"
            )));
        }
        let seq = probe.cast::<PySequence>()?.clone();
        let n = seq.len()?;
        shape.push(n);
        if n == 0 {
            break;
        }
        probe = seq.get_item(0)?;
    }
    let mut values = Vec::new();
    collect(obj, &shape, &mut values)?;
    let dtype = match values.iter().map(|s| s.rank()).max().unwrap_or(2) {
        0 => DType::BOOL,
        1 => DType::I64,
        2 => DType::F64,
        _ => DType::C128,
    };
    Ok((shape, dtype, values))
}

fn collect(obj: &Bound<'_, PyAny>, shape: &[usize], out: &mut Vec<Scalar>) -> PyResult<()> {
    let Some((&n, rest)) = shape.split_first() else {
        if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
            return Err(PyValueError::new_err("the nested sequences are ragged (not one rectangular shape)"));
        }
        out.push(Scalar::extract(obj).map_err(|_| not_a_number(obj))?);
        return Ok(());
    };
    if !(obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()) {
        if Scalar::extract(obj).is_err() {
            return Err(not_a_number(obj));
        }
        return Err(PyValueError::new_err("the nested sequences are ragged (not one rectangular shape)"));
    }
    let seq = obj.cast::<PySequence>()?;
    if seq.len()? != n {
        return Err(PyValueError::new_err("the nested sequences are ragged (not one rectangular shape)"));
    }
    for item in seq.try_iter()? {
        collect(&item?, rest, out)?;
    }
    Ok(())
}

/// The error for an element that is not a number: TypeError naming its type.
fn not_a_number(obj: &Bound<'_, PyAny>) -> PyErr {
    let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!(
        "an element of type {ty} ({}): gpuport arrays hold numbers (bool, int, float, complex)",
        obj.repr().map(|r| r.to_string()).unwrap_or_default().chars().take(40).collect::<String>()
    ))
}
