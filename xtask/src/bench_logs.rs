//! What the tables made from benchmark logs share: the logs read, sizes and times written
//! as a person reads them.

/// Every log's text, one after another; an error naming a log that cannot be read.
pub(crate) fn read(logs: &[&str]) -> Result<String, String> {
    let mut text = String::new();
    for log in logs {
        text += &std::fs::read_to_string(log).map_err(|e| format!("{log}: {e}"))?;
        text.push('\n');
    }
    Ok(text)
}

/// `bytes` in the largest binary unit that keeps it whole or above one (`64 KiB`).
pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// `ns` nanoseconds in ns, µs or ms.
pub(crate) fn time(ns: f64) -> String {
    match ns {
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.2} µs", n / 1e3),
        n => format!("{n:.0} ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_read_as_people_write_them() {
        assert_eq!([size(8), size(64 << 10), size(16 << 20), size(1 << 30)], ["8 B", "64 KiB", "16 MiB", "1 GiB"]);
        assert_eq!([time(850.0), time(21_400.0), time(2_010_000.0)], ["850 ns", "21.40 µs", "2.01 ms"]);
        assert!(read(&["/no/such/log"]).unwrap_err().contains("/no/such/log"));
    }
}
