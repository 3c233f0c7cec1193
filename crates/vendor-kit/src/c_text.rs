//! Text the vendor writes into fixed `char` buffers (device names, PCI bus ids).

use std::ffi::c_char;

/// The bytes of `buf` up to its first NUL (all of it without one), as UTF-8 with
/// replacement characters for anything else.
pub fn c_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_the_first_nul_and_keeps_unterminated_text() {
        let named: Vec<c_char> = b"NVIDIA H100\0junk".iter().map(|&b| b as c_char).collect();
        assert_eq!(c_text(&named), "NVIDIA H100");
        let full: Vec<c_char> = b"0000:01:00.0".iter().map(|&b| b as c_char).collect();
        assert_eq!(c_text(&full), "0000:01:00.0");
        assert_eq!(c_text(&[0xFFu8 as c_char, 0]), "\u{FFFD}");
    }
}
