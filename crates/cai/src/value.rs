//! The neutral key/value form of an interface dict: what the Python module converts a
//! `dict` to and from, knowing nothing of the rules (which live in [`crate::Interface`]).

use std::fmt;

/// A Python value, as far as the interface uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `None`.
    None,
    /// `bool` (kept apart from integers: Python's `True` is an `int`, the interface's
    /// read-only flag must be a `bool`).
    Bool(bool),
    /// `int`, wide enough for any pointer and for negative values to be refused by name.
    Int(i128),
    /// `str`.
    Str(String),
    /// `tuple`.
    Tuple(Vec<Value>),
    /// `list`.
    List(Vec<Value>),
    /// `dict`, in insertion order.
    Dict(Vec<(String, Value)>),
    /// Anything else, by its Python type name (refused wherever it appears).
    Other(String),
}

impl Value {
    /// The entry `key` of a dict.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The items of a tuple or list.
    pub fn items(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(items) | Value::List(items) => Some(items),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    /// Python's `repr` of the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = |f: &mut fmt::Formatter<'_>, items: &[Value], open: &str, close: &str| {
            f.write_str(open)?;
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{v}")?;
            }
            if open == "(" && items.len() == 1 {
                f.write_str(",")?;
            }
            f.write_str(close)
        };
        match self {
            Value::None => f.write_str("None"),
            Value::Bool(true) => f.write_str("True"),
            Value::Bool(false) => f.write_str("False"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Tuple(items) => seq(f, items, "(", ")"),
            Value::List(items) => seq(f, items, "[", "]"),
            Value::Dict(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                f.write_str("}")
            }
            Value::Other(type_name) => write!(f, "<{type_name}>"),
        }
    }
}
