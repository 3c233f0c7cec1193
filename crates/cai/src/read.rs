//! Reading an interface dict out of a foreign structure (a Python `dict`, a fuzzer's tree)
//! into the neutral [`Value`] form, bounded in every direction a producer controls:
//!
//! - only the keys the protocols define are read ([`READ_KEYS`]): an entry under any other
//!   key is never looked at, however large or deep;
//! - no value is followed more than [`MAX_DEPTH`] levels down: a list nested ten thousand
//!   deep would otherwise overflow the reader's stack;
//! - no more than [`MAX_ITEMS`] values are read from the whole dict: a list holding the
//!   same list twice, thirty times over, is a billion paths for a reader that follows
//!   each (its size in memory is sixty references), and a flat list of millions of items
//!   is work proportional to the producer's whim;
//! - no string longer than [`MAX_TEXT`] bytes is copied.
//!
//! A value past a bound becomes [`Value::Other`] naming the bound, which the rules refuse
//! by name. The [`Value`] made is small and shallow enough for its recursive `Display`,
//! `Clone` and drop.

use crate::entries::Key;
use crate::value::Value;

/// How many levels below a key a value is followed (`shape`'s tuple is one; a `descr`
/// field list two or three). Values nested deeper are refused.
pub const MAX_DEPTH: usize = 32;

/// How many values are read from one dict, nested ones included (a 64-dimensional
/// interface has 129 in its shape and strides).
pub const MAX_ITEMS: usize = 4096;

/// The longest string read (a typestr is a few bytes).
pub const MAX_TEXT: usize = 256;

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
    /// A string of at most [`MAX_TEXT`] bytes.
    Str(String),
    /// A tuple: its first items (at most the number asked for) and its length.
    Tuple(Vec<S>, usize),
    /// A list: its first items (at most the number asked for) and its length.
    List(Vec<S>, usize),
    /// Anything else, by its type name (a nested dict included: no rule reads one; a
    /// string longer than [`MAX_TEXT`] bytes, described).
    Other(String),
}

/// A foreign structure an interface dict can be read from.
pub trait Source: Sized {
    /// What reading can fail with (a Python exception).
    type Error;
    /// What this value is, one level deep: of a tuple or list at most `max_items` items
    /// (with its whole length), and a string only up to [`MAX_TEXT`] bytes (a longer one
    /// as [`Node::Other`]).
    fn node(&self, max_items: usize) -> Result<Node<Self>, Self::Error>;
    /// The entry `key` of this value, when it is a dict that has one.
    fn entry(&self, key: &str) -> Result<Option<Self>, Self::Error>;
}

impl Value {
    /// The entries of the dict `source` under [`READ_KEYS`], read within the bounds of the
    /// module's documentation: the form [`Interface::from_value`](crate::Interface::from_value)
    /// reads. Entries under other keys are not read at all.
    pub fn read<S: Source>(source: &S) -> Result<Value, S::Error> {
        let mut entries = Vec::new();
        let mut budget = MAX_ITEMS;
        for key in READ_KEYS {
            if let Some(v) = source.entry(key)? {
                entries.push((key.to_owned(), read_value(&v, 1, &mut budget)?));
            }
        }
        Ok(Value::Dict(entries))
    }
}

/// `v`, `depth` levels below the dict, taking one value of `budget` for itself and one for
/// each value read below it.
fn read_value<S: Source>(v: &S, depth: usize, budget: &mut usize) -> Result<Value, S::Error> {
    let Some(left) = budget.checked_sub(1) else { return Ok(past_budget()) };
    *budget = left;
    if depth > MAX_DEPTH {
        return Ok(Value::Other(format!("a value nested more than {MAX_DEPTH} levels deep")));
    }
    Ok(match v.node(left)? {
        Node::None => Value::None,
        Node::Bool(b) => Value::Bool(b),
        Node::Int(Some(i)) => Value::Int(i),
        Node::Int(None) => Value::Other("int (out of range)".into()),
        Node::Str(s) if s.len() <= MAX_TEXT => Value::Str(s),
        Node::Str(s) => Value::Other(format!("str of {} bytes", s.len())),
        Node::Tuple(t, len) => read_items(t, len, depth, budget)?.map_or_else(|other| other, Value::Tuple),
        Node::List(l, len) => read_items(l, len, depth, budget)?.map_or_else(|other| other, Value::List),
        Node::Other(name) => Value::Other(name),
    })
}

/// The items of a sequence of `len` at `depth`, or what refuses it: one the source could
/// not give whole within the budget.
fn read_items<S: Source>(
    items: Vec<S>,
    len: usize,
    depth: usize,
    budget: &mut usize,
) -> Result<Result<Vec<Value>, Value>, S::Error> {
    if items.len() < len {
        return Ok(Err(Value::Other(format!(
            "a sequence of {len} items, more than the {MAX_ITEMS} values an interface is read to"
        ))));
    }
    let mut read = Vec::with_capacity(items.len());
    for item in &items {
        // Once the budget is spent the whole sequence is refused, not each item left: one
        // value stands for it.
        if *budget == 0 {
            return Ok(Err(past_budget()));
        }
        read.push(read_value(item, depth + 1, budget)?);
    }
    Ok(Ok(read))
}

fn past_budget() -> Value {
    Value::Other(format!("a value past the first {MAX_ITEMS} an interface is read to"))
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
        Shared(usize, usize),
        Flat(usize),
        Bool(bool),
        Pair(u64, bool),
    }

    impl Source for Fake {
        type Error = std::convert::Infallible;
        fn node(&self, max_items: usize) -> Result<Node<Fake>, Self::Error> {
            Ok(match self {
                Fake::Dict(_) => Node::Other("dict".into()),
                Fake::Deep(0) => Node::Int(Some(1)),
                Fake::Deep(n) => Node::List(vec![Fake::Deep(n - 1)].into_iter().take(max_items).collect(), 1),
                // The same list `width` times, at every level: a DAG of `width^levels` paths.
                Fake::Shared(0, _) => Node::Int(Some(1)),
                Fake::Shared(levels, width) => {
                    let child = Fake::Shared(levels - 1, *width);
                    Node::List(std::iter::repeat_n(child, *width).take(max_items).collect(), *width)
                }
                Fake::Flat(n) => Node::List((0..*n).take(max_items).map(|i| Fake::Int(i as i128)).collect(), *n),
                Fake::Int(i) => Node::Int(Some(*i)),
                Fake::Str(s) => Node::Str((*s).into()),
                Fake::Tuple(items) => Node::Tuple(items.iter().take(max_items).cloned().collect(), items.len()),
                Fake::Bool(b) => Node::Bool(*b),
                Fake::Pair(p, ro) => Node::Tuple(vec![Fake::Int(i128::from(*p)), Fake::Bool(*ro)], 2),
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
        let mut v = read_value(&Fake::Deep(MAX_DEPTH - 1), 1, &mut MAX_ITEMS.clone()).unwrap();
        let mut levels = 0;
        while let Value::List(items) = v {
            v = items.into_iter().next().unwrap();
            levels += 1;
        }
        assert_eq!((levels, v), (MAX_DEPTH - 1, Value::Int(1)));
        let cut = read_value(&Fake::Deep(MAX_DEPTH), 1, &mut MAX_ITEMS.clone()).unwrap();
        assert!(format!("{cut:?}").contains("nested more than"), "{cut:?}");
    }

    #[test]
    fn a_nested_dict_is_refused_by_name() {
        let read = Value::read(&interface(vec![("strides", Fake::Dict(vec![]))])).unwrap();
        let err = Interface::from_value(&read).unwrap_err().to_string();
        assert!(err.contains("<dict>"), "{err}");
    }

    #[test]
    fn shared_and_long_sequences_are_read_to_a_bounded_number_of_values() {
        // Thirty levels of a list holding the same list twice: 2^30 paths, 31 objects.
        let read = Value::read(&interface(vec![("descr", Fake::Shared(30, 2))])).unwrap();
        let err = Interface::from_value(&read).unwrap_err().to_string();
        assert!(err.contains(&format!("past the first {MAX_ITEMS}")), "{err}");
        // A flat list of ten million: only what the budget allows is asked for.
        let read = Value::read(&interface(vec![("strides", Fake::Flat(10_000_000))])).unwrap();
        let err = Interface::from_value(&read).unwrap_err().to_string();
        assert!(err.contains("a sequence of 10000000 items"), "{err}");
    }
}
