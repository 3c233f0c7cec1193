//! Values in error messages and reprs written as Python writes them (`(2, 3)`, `'abc'`,
//! `1.5`, `True`), never as Rust's `Debug` would (`[2, 3]`, `"abc"`, `Float(1.5)`).

/// A shape as a Python tuple: `()`, `(3,)`, `(2, 3)`.
pub fn tuple(items: &[usize]) -> String {
    match items {
        [one] => format!("({one},)"),
        _ => format!("({})", items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// A string as Python's `repr` writes it: single quotes, with backslashes, quotes and
/// control characters escaped.
pub fn str_repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A float as Python's `repr` writes it: `1.5`, `1.0`, `inf`, `nan`, `1e+300`.
pub fn float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    // Rust's `Debug` for floats is the shortest round-trip form with a `.0` on integral
    // values and an exponent for very large or small ones, as Python's; Python writes the
    // exponent's sign.
    let text = format!("{f:?}");
    match text.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_python_writes_them() {
        assert_eq!(tuple(&[]), "()");
        assert_eq!(tuple(&[3]), "(3,)");
        assert_eq!(tuple(&[2, 3]), "(2, 3)");
        assert_eq!(str_repr("it's\n"), "'it\\'s\\n'");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(1.0), "1.0");
        assert_eq!(float(f64::INFINITY), "inf");
        assert_eq!(float(f64::NAN), "nan");
        assert_eq!(float(1e300), "1e+300");
        assert_eq!(float(1e-300), "1e-300");
    }
}
