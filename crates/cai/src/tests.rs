//! The model's rules, pure Rust (run under Miri by `.ci/run`).

use gpuport_runtime::DType;

use crate::model::{CaiStream, Interface};
use crate::value::Value;

fn s(v: &str) -> Value {
    Value::Str(v.into())
}
fn i(v: i128) -> Value {
    Value::Int(v)
}
fn t(items: Vec<Value>) -> Value {
    Value::Tuple(items)
}

/// A valid dict, with `edit` applied: `Some(v)` sets the key, `None` removes it.
fn dict(edit: &[(&str, Option<Value>)]) -> Value {
    let mut entries = vec![
        ("shape".to_string(), t(vec![i(2), i(3)])),
        ("typestr".to_string(), s("<f4")),
        ("data".to_string(), t(vec![i(0x7000_0000), Value::Bool(false)])),
        ("version".to_string(), i(3)),
    ];
    for (key, value) in edit {
        entries.retain(|(k, _)| k != key);
        if let Some(v) = value {
            entries.push((key.to_string(), v.clone()));
        }
    }
    Value::Dict(entries)
}

#[test]
fn a_valid_interface_reads_and_writes_back() {
    let parsed = Interface::from_value(&dict(&[])).unwrap();
    assert_eq!(parsed.shape, vec![2, 3]);
    assert_eq!(parsed.dtype, DType::F32);
    assert_eq!((parsed.data, parsed.read_only, parsed.version), (0x7000_0000, false, 3));
    assert_eq!((parsed.strides.clone(), parsed.stream), (None, CaiStream::None));
    assert_eq!(Interface::from_value(&parsed.to_value().unwrap()).unwrap(), parsed);
    let strided = Interface::from_value(&dict(&[
        ("strides", Some(t(vec![i(4), i(8)]))),
        ("stream", Some(i(0x5555))),
        ("descr", Some(Value::List(vec![t(vec![s(""), s("<f4")])]))),
        ("mask", Some(Value::None)),
    ]))
    .unwrap();
    assert_eq!(strided.strides, Some(vec![4, 8]));
    assert_eq!(strided.stream, CaiStream::Handle(0x5555));
    assert_eq!(Interface::from_value(&strided.to_value().unwrap()).unwrap(), strided);
    for (v, stream) in [(1, CaiStream::Legacy), (2, CaiStream::PerThread)] {
        let got = Interface::from_value(&dict(&[("stream", Some(i(v)))])).unwrap();
        assert_eq!(got.stream, stream);
        assert_eq!(got.stream.to_value(), i(v));
    }
    // Versions 0 to 3 are read; zero-size arrays have pointer 0.
    for version in 0..=3 {
        assert!(Interface::from_value(&dict(&[("version", Some(i(version)))])).is_ok());
    }
    let empty = dict(&[("shape", Some(t(vec![i(0), i(4)]))), ("data", Some(t(vec![i(0), Value::Bool(true)])))]);
    assert!(Interface::from_value(&empty).unwrap().read_only);
    assert_eq!(Interface::from_value(&dict(&[("typestr", Some(s("|V8")))])).unwrap().dtype.itemsize().unwrap(), 8);
    assert_eq!(Interface::from_value(&dict(&[("typestr", Some(s("|b1")))])).unwrap().dtype, DType::BOOL);
}

#[test]
fn every_bad_entry_is_refused_naming_key_and_value() {
    let cases: Vec<(&str, Value, &str)> = vec![
        ("missing shape", dict(&[("shape", None)]), "\"shape\""),
        ("missing typestr", dict(&[("typestr", None)]), "\"typestr\""),
        ("missing data", dict(&[("data", None)]), "\"data\""),
        ("missing version", dict(&[("version", None)]), "\"version\""),
        ("version 4", dict(&[("version", Some(i(4)))]), "= 4"),
        ("version -1", dict(&[("version", Some(i(-1)))]), "= -1"),
        ("version as str", dict(&[("version", Some(s("3")))]), "\"3\""),
        ("negative extent", dict(&[("shape", Some(t(vec![i(2), i(-3)])))]), "(2, -3)"),
        ("shape as a list", dict(&[("shape", Some(Value::List(vec![i(2)])))]), "[2]"),
        ("byte-swapped typestr", dict(&[("typestr", Some(s(">f4")))]), "\">f4\""),
        ("unknown kind", dict(&[("typestr", Some(s("<x4")))]), "\"<x4\""),
        ("no byte order", dict(&[("typestr", Some(s("f4")))]), "\"f4\""),
        ("typestr as int", dict(&[("typestr", Some(i(4)))]), "= 4"),
        ("read-only as int", dict(&[("data", Some(t(vec![i(0x1000), i(1)])))]), "(4096, 1)"),
        ("data as a list", dict(&[("data", Some(Value::List(vec![i(0x1000), Value::Bool(false)])))]), "[4096, False]"),
        ("negative pointer", dict(&[("data", Some(t(vec![i(-8), Value::Bool(false)])))]), "(-8, False)"),
        ("NULL pointer, elements", dict(&[("data", Some(t(vec![i(0), Value::Bool(false)])))]), "(0, False)"),
        ("stride not a multiple", dict(&[("strides", Some(t(vec![i(12), i(3)])))]), "multiple"),
        ("strides of wrong length", dict(&[("strides", Some(t(vec![i(4)])))]), "(4,)"),
        ("overflowing strides", dict(&[("strides", Some(t(vec![i(1 << 62), i(1 << 62)])))]), "overflow"),
        ("masked", dict(&[("mask", Some(dict(&[])))]), "masked arrays are not supported"),
        ("stream 0", dict(&[("stream", Some(i(0)))]), "= 0"),
        ("negative stream", dict(&[("stream", Some(i(-5)))]), "= -5"),
        ("stream as str", dict(&[("stream", Some(s("1")))]), "\"1\""),
        ("descr of another type", dict(&[("descr", Some(Value::List(vec![t(vec![s(""), s("<i4")])])))]), "same type"),
        (
            "structured descr",
            dict(&[("descr", Some(Value::List(vec![t(vec![s("a"), s("<f4")]), t(vec![s("b"), s("<f4")])])))]),
            "structured",
        ),
        ("not a dict", Value::List(vec![]), "dict"),
        ("foreign value", dict(&[("shape", Some(Value::Other("numpy.ndarray".into())))]), "<numpy.ndarray>"),
    ];
    for (what, value, must_say) in cases {
        let err = Interface::from_value(&value).expect_err(what).to_string();
        assert!(err.contains(must_say), "{what}: {err:?} does not say {must_say:?}");
    }
}

#[test]
fn values_print_as_python_does() {
    assert_eq!(t(vec![i(1)]).to_string(), "(1,)");
    assert_eq!(t(vec![i(1), Value::Bool(true), Value::None]).to_string(), "(1, True, None)");
    assert_eq!(dict(&[]).get("typestr"), Some(&s("<f4")));
}

#[test]
fn entries_come_in_key_order_and_index_their_keys() {
    for (at, key) in crate::Key::ALL.iter().enumerate() {
        assert_eq!(*key as usize, at, "{key:?} must index Key::ALL");
    }
    let strided = Interface::from_value(&dict(&[("strides", Some(t(vec![i(4), i(8)])))])).unwrap();
    let typestr = strided.typestr().unwrap();
    let entries = strided.entries(&typestr);
    assert_eq!(entries.map(|(key, _)| key), crate::Key::ALL);
    assert_eq!(entries[crate::Key::Strides as usize].1, crate::Entry::ByteStrides(&[4, 8]));
    assert_eq!(entries[crate::Key::Descr as usize].1, crate::Entry::Descr("<f4"));
    // A dtype without a typestr has no entries to write.
    assert!(Interface { dtype: DType::BF16, ..strided }.typestr().is_err());
}
