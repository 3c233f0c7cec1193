//! The entries version 3 writes, borrowed from the interface, so that a dict can be built
//! straight from an [`Interface`](crate::Interface) — by the Python module, with no
//! intermediate form — and the neutral [`Value`] is built from the same list.

use crate::value::Value;

/// A key version 3 writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// `shape`: a tuple of extents.
    Shape,
    /// `typestr`: NumPy's type string.
    Typestr,
    /// `data`: `(pointer, read_only)`.
    Data,
    /// `version`: 3.
    Version,
    /// `strides`: `None` (C-contiguous) or byte strides.
    Strides,
    /// `descr`: `[("", typestr)]`.
    Descr,
    /// `stream`: `None` or the stream to synchronize on.
    Stream,
}

impl Key {
    /// Every key, in the order version 3 writes them (`Key::ALL[k as usize] == k`).
    pub const ALL: [Key; 7] =
        [Key::Shape, Key::Typestr, Key::Data, Key::Version, Key::Strides, Key::Descr, Key::Stream];

    /// The key's name in the dict.
    pub const fn name(self) -> &'static str {
        match self {
            Key::Shape => "shape",
            Key::Typestr => "typestr",
            Key::Data => "data",
            Key::Version => "version",
            Key::Strides => "strides",
            Key::Descr => "descr",
            Key::Stream => "stream",
        }
    }
}

/// One entry's value, borrowed from the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    /// `None`.
    None,
    /// A non-negative integer (the version, a stream).
    Int(u64),
    /// A string (the typestr).
    Str(&'a str),
    /// A tuple of extents.
    Extents(&'a [usize]),
    /// A tuple of byte strides.
    ByteStrides(&'a [isize]),
    /// `(pointer, read_only)`.
    Data {
        /// Address of element 0.
        pointer: u64,
        /// The read-only flag.
        read_only: bool,
    },
    /// `[("", typestr)]`: the one-field description of a plain type.
    Descr(&'a str),
}

impl Entry<'_> {
    /// The entry in the neutral form.
    pub fn to_value(self) -> Value {
        let ints = |v: &mut dyn Iterator<Item = i128>| Value::Tuple(v.map(Value::Int).collect());
        match self {
            Entry::None => Value::None,
            Entry::Int(i) => Value::Int(i128::from(i)),
            Entry::Str(s) => Value::Str(s.to_owned()),
            Entry::Extents(e) => ints(&mut e.iter().map(|&e| e as i128)),
            Entry::ByteStrides(s) => ints(&mut s.iter().map(|&s| s as i128)),
            Entry::Data { pointer, read_only } => {
                Value::Tuple(vec![Value::Int(i128::from(pointer)), Value::Bool(read_only)])
            }
            Entry::Descr(typestr) => {
                Value::List(vec![Value::Tuple(vec![Value::Str(String::new()), Value::Str(typestr.to_owned())])])
            }
        }
    }
}
