//! Engine configuration: the TOML text the core passes to an engine's
//! constructor, and OpenSM's GUID list files.
//!
//! The core merges the global options (`lmc`, `guid_routing_order_file`, …)
//! and the engine's own `[engines.<name>]` section of `smcore.toml` into one
//! flat TOML table whose keys are OpenSM's option names in snake case.

use std::path::Path;

use serde::de::DeserializeOwned;
use sm_abi::EngineError;

/// Parse the engine's configuration text into `T` (a serde struct, usually
/// with `#[serde(default)]`). Unknown keys are allowed: the table also
/// carries options meant for other layers.
pub fn parse<T: DeserializeOwned>(engine: &str, text: &str) -> Result<T, EngineError> {
    toml::from_str(text).map_err(|e| EngineError::bad_config(format!("{engine}: bad configuration: {}", e.message())))
}

/// A GUID list read from one of OpenSM's node-map style files: one GUID
/// per line (hex with `0x`, or decimal), optionally followed by more fields;
/// `#` starts a comment.
#[derive(Debug, Clone, Default)]
pub struct GuidList {
    /// GUIDs in file order, with whatever followed them on the line.
    pub entries: Vec<(u64, String)>,
    /// The line (from 1) each entry of `entries` is on, for messages about
    /// the fields after the GUID.
    pub lines: Vec<usize>,
    /// One message per line that was skipped, naming file and line.
    pub warnings: Vec<String>,
}

impl GuidList {
    /// The GUIDs alone.
    pub fn guids(&self) -> Vec<u64> {
        self.entries.iter().map(|(g, _)| *g).collect()
    }
}

/// Parse a GUID value as OpenSM does (`strtoull(.., 0)`): `0x` hex, leading
/// `0` octal, else decimal.
pub fn parse_guid(word: &str) -> Option<u64> {
    if let Some(h) = word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if word.len() > 1 && word.starts_with('0') {
        u64::from_str_radix(&word[1..], 8).ok()
    } else {
        word.parse().ok()
    }
}

/// Read a GUID list file. Invalid lines are skipped with a warning; an
/// unreadable file is an error naming it.
pub fn read_guid_list(path: &Path) -> Result<GuidList, EngineError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EngineError::new(format!("cannot read {}: {e}", path.display())))?;
    Ok(parse_guid_list(&text, &path.display().to_string()))
}

/// [`read_guid_list`] on text already in memory.
pub fn parse_guid_list(text: &str, origin: &str) -> GuidList {
    let mut list = GuidList::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.splitn(2, char::is_whitespace);
        let first = words.next().unwrap_or("");
        match parse_guid(first) {
            Some(g) if g != 0 => {
                list.entries.push((g, words.next().unwrap_or("").trim().to_string()));
                list.lines.push(i + 1);
            }
            _ => list.warnings.push(format!("{origin}:{}: `{first}` is not a GUID, line ignored", i + 1)),
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_list_skips_bad_lines_with_line_numbers() {
        let l = parse_guid_list("0x10 a\n# c\n\nzz\n17\n0\n", "f");
        assert_eq!(l.guids(), vec![0x10, 17]);
        assert_eq!(l.entries[0].1, "a");
        assert_eq!(l.lines, vec![1, 5]);
        assert_eq!(l.warnings.len(), 2);
        assert!(l.warnings[0].starts_with("f:4:"), "{:?}", l.warnings);
        assert!(l.warnings[1].starts_with("f:6:"), "{:?}", l.warnings);
    }

    #[test]
    fn parse_reports_engine_and_reason() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct C {
            lmc: u8,
        }
        let e = parse::<C>("minhop", "lmc = \"x\"").unwrap_err();
        assert!(e.reason.starts_with("minhop: bad configuration"), "{e}");
    }
}
