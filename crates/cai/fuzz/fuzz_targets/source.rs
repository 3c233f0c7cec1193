//! Arbitrary bytes read as a foreign structure (`gpuport_cai::Source`, what the Python
//! module implements over a `dict`): keys the protocol defines and others, values of every
//! kind, and chains nested far deeper than the reader follows (described by a count, not
//! built, so only the reader could recurse on them). Reading must never panic or overflow
//! the stack, must stay within the depth bound, and whatever the rules accept must write
//! back and read again unchanged. The tree is a graph (a node's children are found by
//! offsets into the bytes, so many paths lead to one node), so the reader's bound on the
//! number of values it reads is exercised too.

#![no_main]

use gpuport_cai::{Interface, Node, Source, Value, MAX_DEPTH, MAX_ITEMS};
use libfuzzer_sys::fuzz_target;

const KEYS: [&str; 10] = ["shape", "typestr", "data", "version", "strides", "descr", "mask", "stream", "other", "__x"];
const STRS: [&str; 6] = ["<f4", "|u1", ">i8", "<c16", "|V3", ""];

/// A value decoded from the bytes at `at`, one level at a time.
#[derive(Clone)]
struct Tree<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Tree<'_> {
    fn byte(&self, k: usize) -> u8 {
        self.bytes.get(self.at + k).copied().unwrap_or(0)
    }
    fn child(&self, k: usize) -> Self {
        Tree { bytes: self.bytes, at: self.at + 1 + k * 3 + usize::from(self.byte(1)) }
    }
}

impl Source for Tree<'_> {
    type Error = ();
    fn node(&self, max_items: usize) -> Result<Node<Self>, ()> {
        let n = usize::from(self.byte(2) % 5);
        let children = || (0..n.min(max_items)).map(|k| self.child(k)).collect();
        Ok(match self.byte(0) % 10 {
            0 => Node::None,
            1 => Node::Bool(self.byte(1) & 1 == 1),
            2 | 3 => Node::Int(Some(i128::from(self.byte(1)) - 64)),
            4 => Node::Int(None),
            5 => Node::Str(STRS[usize::from(self.byte(1)) % STRS.len()].into()),
            6 => Node::Tuple(children(), n),
            7 => Node::List(children(), n),
            // A chain: the same node again, one level down, as deep as the reader goes.
            8 => Node::List(std::iter::once(self.clone()).take(max_items).collect(), 1),
            _ => Node::Other("dict".into()),
        })
    }
    fn entry(&self, key: &str) -> Result<Option<Self>, ()> {
        let k = KEYS.iter().position(|&k| k == key).unwrap_or(KEYS.len());
        Ok((self.byte(k) & 1 == 1).then(|| self.child(k)))
    }
}

/// How deep `v` goes, and how many values it holds.
fn measure(v: &Value) -> (usize, usize) {
    let inner = |items: &mut dyn Iterator<Item = &Value>| {
        items.map(measure).fold((0, 0), |(d, n), (d2, n2)| (d.max(d2), n + n2))
    };
    match v {
        Value::Tuple(items) | Value::List(items) => {
            let (d, n) = inner(&mut items.iter());
            (d + 1, n + 1)
        }
        Value::Dict(entries) => {
            let (d, n) = inner(&mut entries.iter().map(|(_, v)| v));
            (d + 1, n)
        }
        _ => (0, 1),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = Value::read(&Tree { bytes: data, at: 0 }) else { return };
    let (depth, values) = measure(&value);
    assert!(depth <= MAX_DEPTH + 1, "the reader went {depth} deep, past its bound");
    // Past the budget one value stands for each sequence cut short: at most one per level
    // and per key.
    assert!(values <= MAX_ITEMS + MAX_DEPTH + 16, "the reader read {values} values, past its bound");
    if let Ok(interface) = Interface::from_value(&value) {
        if let Ok(written) = interface.to_value() {
            assert_eq!(Interface::from_value(&written).ok().as_ref(), Some(&interface));
        }
    }
});
