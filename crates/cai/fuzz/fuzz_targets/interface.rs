//! Arbitrary bytes decoded into a key/value tree shaped like an interface dict (the keys
//! the interface knows, values of every kind, nested), fed to the validation. It must
//! never panic, and whatever it accepts must write back and read again unchanged.

#![no_main]

use gpuport_cai::{Interface, Value};
use libfuzzer_sys::fuzz_target;

const KEYS: [&str; 9] = ["shape", "typestr", "data", "version", "strides", "descr", "mask", "stream", "other"];
const STRS: [&str; 8] = ["<f4", "|u1", ">i8", "<c16", "|V3", "<x2", "", "|b1"];

struct Bytes<'a>(&'a [u8]);
impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn int(&mut self) -> i128 {
        let mut v = [0u8; 16];
        for b in v.iter_mut().take(1 + usize::from(self.byte() % 9)) {
            *b = self.byte();
        }
        i128::from_le_bytes(v) >> (self.byte() % 100)
    }
    fn value(&mut self, depth: u32) -> Value {
        match self.byte() % if depth > 3 { 5 } else { 8 } {
            0 => Value::None,
            1 => Value::Bool(self.byte() & 1 == 1),
            2 | 3 => Value::Int(self.int()),
            4 => Value::Str(STRS[usize::from(self.byte()) % STRS.len()].into()),
            5 => Value::Tuple((0..self.byte() % 5).map(|_| self.value(depth + 1)).collect()),
            6 => Value::List((0..self.byte() % 4).map(|_| self.value(depth + 1)).collect()),
            _ => self.dict(depth + 1),
        }
    }
    fn dict(&mut self, depth: u32) -> Value {
        Value::Dict(
            (0..self.byte() % 9)
                .map(|_| (KEYS[usize::from(self.byte()) % KEYS.len()].to_string(), self.value(depth)))
                .collect(),
        )
    }
}

fuzz_target!(|data: &[u8]| {
    let value = Bytes(data).dict(0);
    if let Ok(interface) = Interface::from_value(&value) {
        let written = interface.to_value();
        if let Ok(written) = written {
            assert_eq!(Interface::from_value(&written).ok().as_ref(), Some(&interface));
        }
    }
});
