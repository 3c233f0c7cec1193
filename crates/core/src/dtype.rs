//! Element types: every DLPack type code with bits and lanes, and the conversion to and
//! from NumPy typestrs (`<f4`, `|b1`, `<c8`, …). This is the one place that maps the two.

use std::fmt;

use crate::error::{Error, Result};

/// DLPack's `DLDataTypeCode`, every value of `dlpack.h` 1.x.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(non_camel_case_types)]
pub enum DTypeCode {
    /// Signed integer (`kDLInt`).
    Int = 0,
    /// Unsigned integer (`kDLUInt`).
    UInt = 1,
    /// IEEE floating point (`kDLFloat`).
    Float = 2,
    /// Opaque handle (`kDLOpaqueHandle`).
    OpaqueHandle = 3,
    /// bfloat (`kDLBfloat`).
    Bfloat = 4,
    /// Complex, real and imaginary halves each of `bits / 2` (`kDLComplex`).
    Complex = 5,
    /// Boolean, 8 bits (`kDLBool`).
    Bool = 6,
    /// `kDLFloat8_e3m4`.
    Float8_e3m4 = 7,
    /// `kDLFloat8_e4m3`.
    Float8_e4m3 = 8,
    /// `kDLFloat8_e4m3b11fnuz`.
    Float8_e4m3b11fnuz = 9,
    /// `kDLFloat8_e4m3fn`.
    Float8_e4m3fn = 10,
    /// `kDLFloat8_e4m3fnuz`.
    Float8_e4m3fnuz = 11,
    /// `kDLFloat8_e5m2`.
    Float8_e5m2 = 12,
    /// `kDLFloat8_e5m2fnuz`.
    Float8_e5m2fnuz = 13,
    /// `kDLFloat8_e8m0fnu`.
    Float8_e8m0fnu = 14,
    /// `kDLFloat6_e2m3fn`.
    Float6_e2m3fn = 15,
    /// `kDLFloat6_e3m2fn`.
    Float6_e3m2fn = 16,
    /// `kDLFloat4_e2m1fn`.
    Float4_e2m1fn = 17,
}

impl DTypeCode {
    /// Every code, in numeric order.
    pub const ALL: [DTypeCode; 18] = [
        DTypeCode::Int,
        DTypeCode::UInt,
        DTypeCode::Float,
        DTypeCode::OpaqueHandle,
        DTypeCode::Bfloat,
        DTypeCode::Complex,
        DTypeCode::Bool,
        DTypeCode::Float8_e3m4,
        DTypeCode::Float8_e4m3,
        DTypeCode::Float8_e4m3b11fnuz,
        DTypeCode::Float8_e4m3fn,
        DTypeCode::Float8_e4m3fnuz,
        DTypeCode::Float8_e5m2,
        DTypeCode::Float8_e5m2fnuz,
        DTypeCode::Float8_e8m0fnu,
        DTypeCode::Float6_e2m3fn,
        DTypeCode::Float6_e3m2fn,
        DTypeCode::Float4_e2m1fn,
    ];

    /// The code with this DLPack value.
    pub fn from_u8(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }

    /// The fixed width in bits of the narrow float formats, if this is one.
    fn fixed_bits(self) -> Option<u8> {
        use DTypeCode::*;
        match self {
            Bool => Some(8),
            Float8_e3m4 | Float8_e4m3 | Float8_e4m3b11fnuz | Float8_e4m3fn | Float8_e4m3fnuz | Float8_e5m2
            | Float8_e5m2fnuz | Float8_e8m0fnu => Some(8),
            Float6_e2m3fn | Float6_e3m2fn => Some(6),
            Float4_e2m1fn => Some(4),
            _ => None,
        }
    }

    fn short_name(self) -> &'static str {
        use DTypeCode::*;
        match self {
            Int => "int",
            UInt => "uint",
            Float => "float",
            OpaqueHandle => "handle",
            Bfloat => "bfloat",
            Complex => "complex",
            Bool => "bool",
            Float8_e3m4 => "float8_e3m4",
            Float8_e4m3 => "float8_e4m3",
            Float8_e4m3b11fnuz => "float8_e4m3b11fnuz",
            Float8_e4m3fn => "float8_e4m3fn",
            Float8_e4m3fnuz => "float8_e4m3fnuz",
            Float8_e5m2 => "float8_e5m2",
            Float8_e5m2fnuz => "float8_e5m2fnuz",
            Float8_e8m0fnu => "float8_e8m0fnu",
            Float6_e2m3fn => "float6_e2m3fn",
            Float6_e3m2fn => "float6_e3m2fn",
            Float4_e2m1fn => "float4_e2m1fn",
        }
    }
}

/// An element type: DLPack's `DLDataType` (code, bits, lanes), validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DType {
    code: DTypeCode,
    bits: u8,
    lanes: u16,
}

macro_rules! scalar_consts {
    ($($name:ident = $code:ident, $bits:expr;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`.")]
            pub const $name: DType = DType { code: DTypeCode::$code, bits: $bits, lanes: 1 };
        )*
    };
}

impl DType {
    scalar_consts! {
        BOOL = Bool, 8;
        I8 = Int, 8; I16 = Int, 16; I32 = Int, 32; I64 = Int, 64;
        U8 = UInt, 8; U16 = UInt, 16; U32 = UInt, 32; U64 = UInt, 64;
        F16 = Float, 16; F32 = Float, 32; F64 = Float, 64;
        BF16 = Bfloat, 16;
        C64 = Complex, 64; C128 = Complex, 128;
        F8_E4M3FN = Float8_e4m3fn, 8; F8_E5M2 = Float8_e5m2, 8;
    }

    /// A validated dtype: the bit width must be one the code allows, lanes ≥ 1.
    pub fn new(code: DTypeCode, bits: u8, lanes: u16) -> Result<Self> {
        let bad = |why: &str| {
            Error::invalid_argument(format!(
                "dtype (code {} = {}, bits {bits}, lanes {lanes}): {why}",
                code as u8,
                code.short_name()
            ))
        };
        if lanes == 0 {
            return Err(bad("lanes must be at least 1"));
        }
        let bits_ok = match code {
            DTypeCode::Int | DTypeCode::UInt => matches!(bits, 1..=8 | 16 | 32 | 64),
            DTypeCode::Float => matches!(bits, 16 | 32 | 64),
            DTypeCode::Bfloat => bits == 16,
            DTypeCode::Complex => matches!(bits, 32 | 64 | 128),
            DTypeCode::OpaqueHandle => bits > 0,
            fixed => fixed.fixed_bits() == Some(bits),
        };
        if !bits_ok {
            return Err(bad("this bit width is not defined for the type code"));
        }
        Ok(DType { code, bits, lanes })
    }

    /// Validates a raw DLPack `DLDataType` triple.
    pub fn from_dlpack(code: u8, bits: u8, lanes: u16) -> Result<Self> {
        let code = DTypeCode::from_u8(code)
            .ok_or_else(|| Error::invalid_argument(format!("unknown DLPack dtype code {code}")))?;
        Self::new(code, bits, lanes)
    }

    /// The type code.
    #[inline]
    pub fn code(self) -> DTypeCode {
        self.code
    }
    /// Bits of one lane.
    #[inline]
    pub fn bits(self) -> u8 {
        self.bits
    }
    /// Number of lanes (vector width); 1 for scalars.
    #[inline]
    pub fn lanes(self) -> u16 {
        self.lanes
    }

    /// Total bits of one element (bits × lanes).
    #[inline]
    pub fn total_bits(self) -> u32 {
        u32::from(self.bits) * u32::from(self.lanes)
    }

    /// True when one element is narrower than a byte (int4, fp4, fp6): such arrays are
    /// packed, and byte-level layout arithmetic does not apply element by element.
    #[inline]
    pub fn is_subbyte(self) -> bool {
        self.total_bits() < 8
    }

    /// Bytes per element, or an error for sub-byte types and widths that are not whole
    /// bytes (layout arithmetic is in whole elements).
    #[inline]
    pub fn itemsize(self) -> Result<usize> {
        let bits = self.total_bits();
        if !bits.is_multiple_of(8) {
            return Err(Error::invalid_argument(format!(
                "{self} is {bits} bits per element, not a whole number of bytes"
            )));
        }
        Ok((bits / 8) as usize)
    }

    /// The NumPy typestr for this dtype in native byte order (`<f4`, `|b1`, `<c8`).
    /// Types NumPy has no typestr for (bfloat16, the fp8/fp6/fp4 formats, vectors,
    /// handles) are an error, never a silent reinterpretation.
    pub fn to_typestr(self) -> Result<String> {
        let kind = match self.code {
            DTypeCode::Int => 'i',
            DTypeCode::UInt => 'u',
            DTypeCode::Float => 'f',
            DTypeCode::Complex => 'c',
            DTypeCode::Bool => 'b',
            _ => return Err(Error::Interchange { what: format!("{self} has no NumPy typestr") }),
        };
        // NumPy has no half-precision complex (`c4`).
        if self.lanes != 1 || !self.bits.is_multiple_of(8) || (kind == 'c' && self.bits < 64) {
            return Err(Error::Interchange { what: format!("{self} has no NumPy typestr") });
        }
        let bytes = self.bits / 8;
        let order = if bytes == 1 { '|' } else { NATIVE_ORDER };
        // Written by hand, not with `format!`: an interface dict is built per exchange.
        let mut typestr = String::with_capacity(5);
        typestr.push(order);
        typestr.push(kind);
        // `bits` is a `u8`: at most two digits.
        if bytes >= 10 {
            typestr.push(char::from(b'0' + bytes / 10));
        }
        typestr.push(char::from(b'0' + bytes % 10));
        Ok(typestr)
    }

    /// Parses a dtype name as [`fmt::Display`] writes it — NumPy's names (`"float32"`,
    /// `"int8"`, `"bool"`, `"complex64"`), ml_dtypes' (`"bfloat16"`, `"float8_e4m3fn"`), a
    /// lane count as `"float32x4"` — or a NumPy typestr (`"<f4"`). Anything else is an
    /// error that names the input.
    pub fn from_name(name: &str) -> Result<Self> {
        if name.starts_with(['<', '>', '=', '|']) {
            return Self::from_typestr(name);
        }
        let bad = || {
            Error::invalid_argument(format!("unknown dtype {name:?} (expected a name such as \"float32\", \"int64\", \"bool\", \"bfloat16\" or a typestr such as \"<f4\")"))
        };
        let fixed_name = |s: &str| DTypeCode::ALL.iter().any(|c| c.fixed_bits().is_some() && c.short_name() == s);
        // A lane count follows a width ("float32x4") or a fixed-width name ("boolx4");
        // the "x" of "complex64" is not one.
        let (scalar, lanes) = match name.rsplit_once('x') {
            Some((s, l))
                if !l.is_empty()
                    && l.bytes().all(|b| b.is_ascii_digit())
                    && (s.ends_with(|c: char| c.is_ascii_digit()) || fixed_name(s)) =>
            {
                (s, l.parse::<u16>().map_err(|_| bad())?)
            }
            _ => (name, 1),
        };
        // Fixed-width codes are named without a width ("bool", "float8_e4m3fn").
        if let Some(code) =
            DTypeCode::ALL.iter().copied().find(|c| c.fixed_bits().is_some() && c.short_name() == scalar)
        {
            return Self::new(code, code.fixed_bits().unwrap_or(8), lanes).map_err(|_| bad());
        }
        let digits = scalar.trim_start_matches(|c: char| !c.is_ascii_digit());
        let prefix = &scalar[..scalar.len() - digits.len()];
        let code = DTypeCode::ALL
            .iter()
            .copied()
            .find(|c| c.fixed_bits().is_none() && c.short_name() == prefix)
            .ok_or_else(bad)?;
        let bits: u8 = digits.parse().map_err(|_| bad())?;
        Self::new(code, bits, lanes).map_err(|_| bad())
    }

    /// Parses a NumPy typestr. `<`, `>`, `=` and `|` are accepted; a byte order other
    /// than the native one is an error (gpuport does not byte-swap).
    pub fn from_typestr(typestr: &str) -> Result<Self> {
        let bad = |why: &str| Error::Interchange { what: format!("typestr {typestr:?}: {why}") };
        let mut chars = typestr.chars();
        let order = chars.next().ok_or_else(|| bad("empty"))?;
        let kind = chars.next().ok_or_else(|| bad("missing type character"))?;
        let size: &str = chars.as_str();
        if size.is_empty() || !size.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the size must be a decimal number of bytes"));
        }
        let bytes: u16 = size.parse().map_err(|_| bad("size too large"))?;
        match order {
            '<' | '>' | '=' | '|' => {}
            _ => return Err(bad("the first character must be one of < > = |")),
        }
        let foreign = (order == '<' || order == '>') && order != NATIVE_ORDER;
        if foreign && bytes > 1 {
            return Err(bad("byte order is not native; byte-swapped data is not supported"));
        }
        let code = match kind {
            'i' => DTypeCode::Int,
            'u' => DTypeCode::UInt,
            'f' => DTypeCode::Float,
            'c' => DTypeCode::Complex,
            'b' => DTypeCode::Bool,
            _ => return Err(bad("unsupported type character (expected i, u, f, c or b)")),
        };
        let bits = bytes.checked_mul(8).and_then(|b| u8::try_from(b).ok()).ok_or_else(|| bad("size too large"))?;
        let dtype = DType::new(code, bits, 1).map_err(|_| bad("no such type of this size"))?;
        dtype.to_typestr().map_err(|_| bad("NumPy has no type of this size"))?;
        Ok(dtype)
    }
}

const NATIVE_ORDER: char = if cfg!(target_endian = "little") { '<' } else { '>' };

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code.fixed_bits() {
            Some(_) => f.write_str(self.code.short_name())?,
            None => write!(f, "{}{}", self.code.short_name(), self.bits)?,
        }
        if self.lanes != 1 {
            write!(f, "x{}", self.lanes)?;
        }
        Ok(())
    }
}

/// Rust element types with a fixed [`DType`]; used for typed host round trips.
///
/// # Safety
/// The type must be plain old data: every bit pattern of `size_of::<Self>()` bytes is a
/// valid value, it has no padding, and `DTYPE.itemsize() == size_of::<Self>()`.
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The dtype of this Rust type.
    const DTYPE: DType;
}

/// The bytes of a slice of plain-old-data elements.
pub fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Element` is plain old data without padding; the byte slice covers exactly
    // the same memory and lifetime.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The bytes of a mutable slice of plain-old-data elements (any bytes written are valid
/// elements).
pub fn as_bytes_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; every bit pattern is a valid `T`, so writes through the
    // bytes cannot make an invalid value.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// `n` zero elements (all-zero bytes are a valid value of every [`Element`]).
pub fn zeroed_vec<T: Element>(n: usize) -> Vec<T> {
    // SAFETY: `T: Element` is plain old data: the all-zero bit pattern is a valid value.
    let zero: T = unsafe { std::mem::zeroed() };
    vec![zero; n]
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {
        // SAFETY: primitive integers and floats are plain old data of the matching width.
        $(unsafe impl Element for $t { const DTYPE: DType = DType::$d; })*
    };
}
element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
         u64 => U64, f32 => F32, f64 => F64);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip() {
        for code in DTypeCode::ALL {
            for bits in [1u8, 4, 6, 8, 16, 32, 64, 128] {
                for lanes in [1u16, 4] {
                    if let Ok(d) = DType::new(code, bits, lanes) {
                        assert_eq!(DType::from_name(&d.to_string()).unwrap(), d, "{d}");
                    }
                }
            }
        }
        assert_eq!(DType::from_name("<f4").unwrap(), DType::F32);
        for bad in ["", "float", "float33", "floaty32", "x4", "int8x", "int8x0", "bool16", "complex"] {
            let err = DType::from_name(bad).unwrap_err().to_string();
            assert!(err.contains("unknown dtype") || err.contains("typestr"), "{bad}: {err}");
        }
    }

    #[test]
    fn typestr_round_trips() {
        for (d, s) in [
            (DType::F32, "<f4"),
            (DType::F64, "<f8"),
            (DType::F16, "<f2"),
            (DType::I8, "|i1"),
            (DType::U8, "|u1"),
            (DType::BOOL, "|b1"),
            (DType::C64, "<c8"),
            (DType::C128, "<c16"),
            (DType::I64, "<i8"),
            (DType::U16, "<u2"),
        ] {
            assert_eq!(d.to_typestr().unwrap(), s);
            assert_eq!(DType::from_typestr(s).unwrap(), d);
        }
        assert_eq!(DType::from_typestr("=f4").unwrap(), DType::F32);
        assert_eq!(DType::from_typestr("<i1").unwrap(), DType::I8);
    }

    #[test]
    fn types_without_typestr_are_errors() {
        for d in [
            DType::BF16,
            DType::F8_E4M3FN,
            DType::F8_E5M2,
            DType::new(DTypeCode::Float, 32, 4).unwrap(),
            DType::new(DTypeCode::Float4_e2m1fn, 4, 1).unwrap(),
        ] {
            assert!(matches!(d.to_typestr(), Err(Error::Interchange { .. })), "{d}");
        }
    }

    #[test]
    fn bad_typestrs_are_errors() {
        for s in ["", "<", "<f", "<f3", ">f4", "<x4", "f4", "<f4x", "<f99999", "<b2", "<c4"] {
            assert!(DType::from_typestr(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn dlpack_codes_are_checked() {
        assert!(DType::from_dlpack(18, 8, 1).is_err());
        assert!(DType::from_dlpack(2, 8, 1).is_err());
        assert!(DType::from_dlpack(2, 32, 0).is_err());
        assert!(DType::from_dlpack(6, 1, 1).is_err(), "bool is 8 bits");
        assert_eq!(DType::from_dlpack(4, 16, 1).unwrap(), DType::BF16);
        for code in DTypeCode::ALL {
            assert_eq!(DTypeCode::from_u8(code as u8), Some(code));
        }
        let fp4 = DType::from_dlpack(17, 4, 1).unwrap();
        assert!(fp4.is_subbyte());
        assert!(fp4.itemsize().is_err());
        assert_eq!(fp4.to_string(), "float4_e2m1fn");
        assert_eq!(DType::new(DTypeCode::Float, 32, 4).unwrap().itemsize().unwrap(), 16);
    }

    proptest! {
        #[test]
        fn from_dlpack_never_panics(code in any::<u8>(), bits in any::<u8>(), lanes in any::<u16>()) {
            if let Ok(d) = DType::from_dlpack(code, bits, lanes) {
                prop_assert_eq!(d.code() as u8, code);
                if let Ok(s) = d.to_typestr() {
                    prop_assert_eq!(DType::from_typestr(&s).unwrap(), d);
                }
            }
        }

        #[test]
        fn from_typestr_never_panics(s in ".{0,6}") {
            let _ = DType::from_typestr(&s);
        }
    }
}
