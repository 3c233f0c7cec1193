//! Reading an interface dict out of a foreign structure (a Python `dict`, a fuzzer's tree)
//! into the neutral [`Value`] form, bounded: only the keys the protocols define are read
//! (an entry under any other key is never looked at, however large or deep), and no value
//! is followed more than [`MAX_DEPTH`] levels down. A deeper value becomes
//! [`Value::Other`], which the rules refuse by name. So a producer's dict cannot make the
//! reader recurse without end (a list nested ten thousand deep would otherwise overflow
//! the stack), and the [`Value`] it makes is shallow enough for its recursive `Display`,
//! `Clone` and drop.

use crate::entries::Key;
use crate::value::Value;

/// How many levels below a key a value is followed (`shape`'s tuple is one; a `descr`
/// field list two or three). Values nested deeper are refused.
pub const MAX_DEPTH: usize = 32;

/// The keys read from an interface dict: those version 3 writes, and `mask`, which is read
/// to be refused.
pub const READ_KEYS: [&str; Key::ALL.len() + 1] = {
    let mut names = ["mask"; Key::ALL.len() + 1];
    let mut i = 0;
    while i < Key::ALL.len() {
        names[i] = Key::ALL[i].name();
        i += 1;
    }
    names
};

/// One level of a foreign value, as [`Source::node`] reports it.
#[derive(Debug)]
pub enum Node<S> {
    /// `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An integer; `None` when it does not fit an `i128`.
    Int(Option<i128>),
    /// A string.
    Str(String),
    /// A tuple's items.
    Tuple(Vec<S>),
    /// A list's items.
    List(Vec<S>),
    /// Anything else, by its type name (a nested dict included: no rule reads one).
    Other(String),
}

/// A foreign structure an interface dict can be read from.
pub trait Source: Sized {
    /// What reading can fail with (a Python exception).
    type Error;
    /// What this value is, one level deep.
    fn node(&self) -> Result<Node<Self>, Self::Error>;
    /// The entry `key` of this value, when it is a dict that has one.
    fn entry(&self, key: &str) -> Result<Option<Self>, Self::Error>;
}

impl Value {
    /// The entries of the dict `source` under [`READ_KEYS`], each followed at most
    /// [`MAX_DEPTH`] levels down: the form [`Interface::from_value`](crate::Interface::from_value)
    /// reads. Entries under other keys are not read at all.
    pub fn read<S: Source>(source: &S) -> Result<Value, S::Error> {
        let mut entries = Vec::new();
        for key in READ_KEYS {
            if let Some(v) = source.entry(key)? {
                entries.push((key.to_owned(), read_value(&v, 1)?));
            }
        }
        Ok(Value::Dict(entries))
    }
}

/// `v`, `depth` levels below the dict, with its items at most [`MAX_DEPTH`] levels down.
fn read_value<S: Source>(v: &S, depth: usize) -> Result<Value, S::Error> {
    if depth > MAX_DEPTH {
        return Ok(Value::Other(format!("a value nested more than {MAX_DEPTH} levels deep")));
    }
    let items = |items: Vec<S>| items.iter().map(|i| read_value(i, depth + 1)).collect::<Result<Vec<_>, _>>();
    Ok(match v.node()? {
        Node::None => Value::None,
        Node::Bool(b) => Value::Bool(b),
        Node::Int(Some(i)) => Value::Int(i),
        Node::Int(None) => Value::Other("int (out of range)".into()),
        Node::Str(s) => Value::Str(s),
        Node::Tuple(t) => Value::Tuple(items(t)?),
        Node::List(l) => Value::List(items(l)?),
        Node::Other(name) => Value::Other(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Interface;

    /// A value `levels` deep, made as it is read (no deep structure exists to drop).
    #[derive(Clone)]
    enum Fake {
        Dict(Vec<(&'static str, Fake)>),
        Deep(usize),
        Int(i128),
        Str(&'static str),
        Tuple(Vec<Fake>),
        Bool(bool),
        Pair(u64, bool),
    }

    impl Source for Fake {
        type Error = std::convert::Infallible;
        fn node(&self) -> Result<Node<Fake>, Self::Error> {
            Ok(match self {
                Fake::Dict(_) => Node::Other("dict".into()),
                Fake::Deep(0) => Node::Int(Some(1)),
                Fake::Deep(n) => Node::List(vec![Fake::Deep(n - 1)]),
                Fake::Int(i) => Node::Int(Some(*i)),
                Fake::Str(s) => Node::Str((*s).into()),
                Fake::Tuple(items) => Node::Tuple(items.clone()),
                Fake::Bool(b) => Node::Bool(*b),
                Fake::Pair(p, ro) => Node::Tuple(vec![Fake::Int(i128::from(*p)), Fake::Bool(*ro)]),
            })
        }
        fn entry(&self, key: &str) -> Result<Option<Fake>, Self::Error> {
            Ok(match self {
                Fake::Dict(entries) => entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()),
                _ => None,
            })
        }
    }

    fn interface(extra: Vec<(&'static str, Fake)>) -> Fake {
        let mut entries = vec![
            ("shape", Fake::Tuple(vec![Fake::Int(4)])),
            ("typestr", Fake::Str("|u1")),
            ("data", Fake::Pair(0x1000, false)),
            ("version", Fake::Int(3)),
        ];
        entries.extend(extra);
        Fake::Dict(entries)
    }

    #[test]
    fn only_the_protocol_keys_are_read() {
        let read = Value::read(&interface(vec![("unknown", Fake::Deep(1_000_000))])).unwrap();
        assert_eq!(read.get("unknown"), None, "an unknown key was read");
        assert!(read.get("shape").is_some());
    }

    #[test]
    fn deep_values_are_cut_and_refused() {
        // Ten thousand levels: the reader stops at MAX_DEPTH (no stack overflow), and the
        // rules refuse what it cut.
        let read = Value::read(&interface(vec![("descr", Fake::Deep(10_000))])).unwrap();
        let err = Interface::from_value(&read).unwrap_err().to_string();
        assert!(err.contains(&format!("nested more than {MAX_DEPTH} levels")), "{err}");
        // Exactly at the bound is read whole.
        let mut v = read_value(&Fake::Deep(MAX_DEPTH - 1), 1).unwrap();
        let mut levels = 0;
        while let Value::List(items) = v {
            v = items.into_iter().next().unwrap();
            levels += 1;
        }
        assert_eq!((levels, v), (MAX_DEPTH - 1, Value::Int(1)));
        let cut = read_value(&Fake::Deep(MAX_DEPTH), 1).unwrap();
        assert!(format!("{cut:?}").contains("nested more than"), "{cut:?}");
    }

    #[test]
    fn a_nested_dict_is_refused_by_name() {
        let read = Value::read(&interface(vec![("strides", Fake::Dict(vec![]))])).unwrap();
        let err = Interface::from_value(&read).unwrap_err().to_string();
        assert!(err.contains("<dict>"), "{err}");
    }
}
