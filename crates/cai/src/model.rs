//! The typed interface ([`Interface`]), read from and written to its key/value form with
//! every rule of version 3 checked on the way in. Each rejection names the key and the
//! value.

use gpuport_runtime::{DType, DTypeCode, Error, Layout, Result};

use crate::entries::{Entry, Key};
use crate::value::Value;

/// The `stream` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaiStream {
    /// `None` or absent: no synchronization needed.
    None,
    /// `1`: the legacy default stream.
    Legacy,
    /// `2`: the per-thread default stream.
    PerThread,
    /// Any other integer: a `cudaStream_t` (or a `hipStream_t` for ROCm arrays).
    Handle(usize),
}

impl CaiStream {
    /// The entry's value: `None`, `1`, `2` or the handle (never `0`).
    pub fn to_value(self) -> Value {
        self.entry().to_value()
    }

    /// The entry, borrowed form.
    pub fn entry(self) -> Entry<'static> {
        match self {
            CaiStream::None => Entry::None,
            CaiStream::Legacy => Entry::Int(1),
            CaiStream::PerThread => Entry::Int(2),
            CaiStream::Handle(h) => Entry::Int(h as u64),
        }
    }

    /// The stream a raw gpuport handle names: the null stream (a HIP raw handle of 0) as
    /// `1`, since `0` is disallowed.
    pub fn from_raw(raw: usize) -> CaiStream {
        match raw {
            0 | 1 => CaiStream::Legacy,
            2 => CaiStream::PerThread,
            h => CaiStream::Handle(h),
        }
    }
}

/// A CUDA Array Interface, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Extents.
    pub shape: Vec<usize>,
    /// Element type (from `typestr`, checked against `descr` when given).
    pub dtype: DType,
    /// Address of element 0 (0 for a zero-size array).
    pub data: u64,
    /// The read-only flag of `data`.
    pub read_only: bool,
    /// The version given (0 to 3; export writes 3).
    pub version: u32,
    /// Strides in bytes; `None` = C-contiguous.
    pub strides: Option<Vec<isize>>,
    /// The stream to synchronize on.
    pub stream: CaiStream,
}

/// The version gpuport exports.
pub const VERSION: u32 = 3;

fn bad(key: &str, value: &Value, why: &str) -> Error {
    Error::Interchange { what: format!("__cuda_array_interface__[{key:?}] = {value}: {why}") }
}

fn missing(key: &str) -> Error {
    Error::Interchange { what: format!("__cuda_array_interface__ has no {key:?} entry (it is required)") }
}

fn int(key: &str, v: &Value) -> Result<i128> {
    match v {
        Value::Int(i) => Ok(*i),
        _ => Err(bad(key, v, "an integer is required")),
    }
}

fn int_tuple(key: &str, v: &Value) -> Result<Vec<i128>> {
    let items = match v {
        Value::Tuple(items) => items,
        _ => return Err(bad(key, v, "a tuple of integers is required")),
    };
    items.iter().map(|i| int(key, i).map_err(|_| bad(key, v, "every entry must be an integer"))).collect()
}

/// `|V<n>`: `n` raw bytes, gpuport's `u8 × n` lanes. Other typestrs as NumPy's.
fn parse_typestr(v: &Value) -> Result<DType> {
    let Value::Str(s) = v else { return Err(bad("typestr", v, "a string is required")) };
    if let Some(n) = s.strip_prefix("|V") {
        let lanes: u16 = n.parse().ok().filter(|&n| n > 0).ok_or_else(|| bad("typestr", v, "a void size in bytes"))?;
        return DType::new(DTypeCode::UInt, 8, lanes).map_err(|e| bad("typestr", v, &e.to_string()));
    }
    DType::from_typestr(s).map_err(|e| bad("typestr", v, &e.to_string()))
}

/// `descr` must describe the same type as `typestr`: `[("", typestr)]`, or the list NumPy
/// writes for it; structured (multi-field) types are not supported.
fn check_descr(v: &Value, dtype: DType) -> Result<()> {
    let fields = v
        .items()
        .filter(|_| matches!(v, Value::List(_)))
        .ok_or_else(|| bad("descr", v, "a list of (name, typestr) tuples is required"))?;
    let [field] = fields else { return Err(bad("descr", v, "structured (multi-field) types are not supported")) };
    match field.items() {
        Some([Value::Str(_), typestr]) if parse_typestr(typestr).ok() == Some(dtype) => Ok(()),
        Some([Value::Str(_), _]) => Err(bad("descr", v, "it does not describe the same type as typestr")),
        _ => Err(bad("descr", v, "each field must be a (name, typestr) tuple")),
    }
}

impl Interface {
    /// Reads and validates the key/value form (what `__cuda_array_interface__` returned).
    pub fn from_value(dict: &Value) -> Result<Interface> {
        if !matches!(dict, Value::Dict(_)) {
            return Err(Error::Interchange { what: format!("__cuda_array_interface__ must be a dict, not {dict}") });
        }
        let get = |key: &str| dict.get(key).ok_or_else(|| missing(key));
        let version_v = get("version")?;
        let version = int("version", version_v)?;
        if !(0..=3).contains(&version) {
            return Err(bad("version", version_v, "versions 0 to 3 are supported"));
        }
        let shape_v = get("shape")?;
        let shape = int_tuple("shape", shape_v)?
            .into_iter()
            .map(|e| usize::try_from(e).map_err(|_| bad("shape", shape_v, "extents must be >= 0")))
            .collect::<Result<Vec<_>>>()?;
        let dtype = parse_typestr(get("typestr")?)?;
        let data_v = get("data")?;
        let (data, read_only) = match data_v.items() {
            Some([ptr, Value::Bool(ro)]) if matches!(data_v, Value::Tuple(_)) => {
                let p =
                    u64::try_from(int("data", ptr)?).map_err(|_| bad("data", data_v, "the pointer must be >= 0"))?;
                (p, *ro)
            }
            _ => return Err(bad("data", data_v, "a (pointer, read_only) tuple of an integer and a bool is required")),
        };
        let strides = match dict.get("strides") {
            None | Some(Value::None) => None,
            Some(v) => Some(
                int_tuple("strides", v)?
                    .into_iter()
                    .map(|s| isize::try_from(s).map_err(|_| bad("strides", v, "a stride overflows")))
                    .collect::<Result<Vec<_>>>()?,
            ),
        };
        if let Some(v) = dict.get("mask").filter(|v| **v != Value::None) {
            return Err(bad("mask", v, "masked arrays are not supported"));
        }
        if let Some(v) = dict.get("descr") {
            check_descr(v, dtype)?;
        }
        let stream = match dict.get("stream") {
            None | Some(Value::None) => CaiStream::None,
            Some(v @ Value::Int(0)) => {
                return Err(bad("stream", v, "0 is disallowed (ambiguous): use None, 1 (legacy) or 2 (per-thread)"))
            }
            Some(v @ Value::Int(i)) => {
                CaiStream::from_raw(usize::try_from(*i).map_err(|_| bad("stream", v, "a stream handle must be > 0"))?)
            }
            Some(v) => return Err(bad("stream", v, "None or an integer is required")),
        };
        let interface = Interface { shape, dtype, data, read_only, version: version as u32, strides, stream };
        if let Err(e) = interface.layout() {
            let (key, v) = match dict.get("strides") {
                Some(v) if *v != Value::None => ("strides", v),
                _ => ("shape", shape_v),
            };
            return Err(bad(key, v, &e.to_string()));
        }
        if interface.numel() > 0 && data == 0 {
            return Err(bad("data", data_v, "a NULL pointer for a non-empty array"));
        }
        Ok(interface)
    }

    /// The element layout (strides in elements), checked: byte strides must be multiples
    /// of the item size, and the extent must not overflow.
    pub fn layout(&self) -> Result<Layout> {
        let item = self.dtype.itemsize()?;
        let layout = match &self.strides {
            None => Layout::contiguous(&self.shape)?,
            Some(s) => {
                if s.len() != self.shape.len() {
                    return Err(Error::Interchange {
                        what: format!("strides {s:?} do not match shape {:?} (one per dimension)", self.shape),
                    });
                }
                Layout::from_byte_strides(&self.shape, s, item)?
            }
        };
        layout.span(item)?;
        Ok(layout)
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The key/value form, as version 3 writes it.
    pub fn to_value(&self) -> Result<Value> {
        let typestr = self.typestr()?;
        let entries = self.entries(&typestr).map(|(key, entry)| (key.name().to_owned(), entry.to_value()));
        Ok(Value::Dict(entries.into()))
    }

    /// The `typestr` entry (an error for a dtype NumPy has no typestr for).
    pub fn typestr(&self) -> Result<String> {
        self.dtype.to_typestr()
    }

    /// Each entry version 3 writes, in [`Key::ALL`]'s order, borrowed from the interface
    /// and from its [`typestr`](Interface::typestr): what [`Interface::to_value`]
    /// collects, and what a binding turns into its own dict without an intermediate form.
    pub fn entries<'a>(&'a self, typestr: &'a str) -> [(Key, Entry<'a>); Key::ALL.len()] {
        [
            (Key::Shape, Entry::Extents(&self.shape)),
            (Key::Typestr, Entry::Str(typestr)),
            (Key::Data, Entry::Data { pointer: self.data, read_only: self.read_only }),
            (Key::Version, Entry::Int(u64::from(self.version))),
            (Key::Strides, self.strides.as_deref().map_or(Entry::None, Entry::ByteStrides)),
            (Key::Descr, Entry::Descr(typestr)),
            (Key::Stream, self.stream.entry()),
        ]
    }
}
