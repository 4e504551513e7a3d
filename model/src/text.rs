//! Text the fabric supplies (a NodeDescription, above all: any host sets
//! its own) on its way to a log line or a report.
//!
//! [`Escaped`] is the one way such text is shown: control characters
//! (a newline would forge a log line of the SM's own, an escape sequence
//! would rewrite a terminal), the backslash and the double quote come out
//! as escapes, so the text can neither end its line nor its quotes.

use std::fmt::{self, Write};

/// Fabric-supplied text, shown escaped: `\n`, `\r`, `\t`, `\\`, `\"`, and
/// `\u{XX}` for every other control character (C0, DEL, C1) and for the
/// Unicode line and paragraph separators. Everything else as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\\' => f.write_str("\\\\")?,
                '"' => f.write_str("\\\"")?,
                c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                    write!(f, "\\u{{{:x}}}", u32::from(c))?
                }
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// [`Escaped`] as a `String`.
pub fn escaped(text: &str) -> String {
    Escaped(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_fabric_supplied_can_end_a_line_or_a_quote() {
        let forged = "h1\n2026-01-01T00:00:00Z  WARN smcore: port isolated\r\t\"x\\\u{1b}[2J\u{7f}\u{85}\u{2028}é";
        let shown = escaped(forged);
        assert_eq!(
            shown,
            "h1\\n2026-01-01T00:00:00Z  WARN smcore: port isolated\\r\\t\\\"x\\\\\\u{1b}[2J\\u{7f}\\u{85}\\u{2028}é"
        );
        assert!(!shown.chars().any(|c| c.is_control()));
        assert_eq!(escaped("ib-node-7 HCA-1"), "ib-node-7 HCA-1");
    }
}
