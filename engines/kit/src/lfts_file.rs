//! LFT files: reading `opensm-lfts.dump` and `ibroute` output, writing
//! `opensm-lfts.dump`.
//!
//! This is the input of the `file` routing engine (OpenSM's `-U`,
//! `lfts_file`) and what the core and the workspace tests read dumps back
//! with, so it lives in the kit: engines cannot depend on the core.
//!
//! Both formats open each switch with a `Unicast lids [...] of switch ...
//! guid 0x... (...):` header followed by one `0x<lid> <port> ...` line per
//! LFT entry; they differ in the rest of the line:
//!
//! ```text
//! Unicast lids [0-6] of switch Lid 2 guid 0x0002c90000000100 ('sw1'):          OpenSM dump
//! 0x0001 001 # Channel Adapter portguid 0x0002c90000001001: 'h1'
//! 6 lids dumped
//!
//! Unicast lids [0x0-0x6] of switch Lid 2 guid 0x0002c90000000100 (sw1):        ibroute
//!   Lid  Out   Destination
//!        Port     Info
//! 0x0001 001 : (Channel Adapter portguid 0x0002c90000001001: 'h1')
//! 0x0003 001 : (path #2 out of 2: portguid 0x0002c90000001001)                 LMC > 0
//! 0x0000 255 : (path #0 - illegal port)                                        ibroute -a
//! 0x0006 002                                                                   ibroute -n
//! 6 valid lids dumped
//! ```
//!
//! `ibroute` may also name the switch by directed route (`of switch DR path
//! slid 65535; dlid 65535; 0,1 guid ...`), and captured output often carries
//! its `ibwarn:` lines; several switches' printouts may be concatenated (as
//! `dump_lfts.sh` does). Entries that mean "no route" (port 255, or
//! `illegal port` from `ibroute -a`) are dropped. `ibroute -n` lines carry no
//! destination GUID; every other entry line does, which is what lets the
//! `file` engine follow a port whose LID changed since the dump.
//!
//! Multicast tables (`ibroute -M`'s `Multicast mlids ...`, OpenSM's
//! `opensm.mcfdbs`) are refused with an error saying so. Anything else that
//! is not one of these lines is an error naming file and line, so that a
//! wrong file (say `opensm.fdbs`) is refused instead of read as an empty
//! routing.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sm_abi::{FabricSnapshot, Lft, NodeKind, MAX_UNICAST_LID, NO_ROUTE};

/// One LFT entry as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LftEntry {
    /// Destination LID.
    pub lid: u16,
    /// Output port (0 = the switch itself).
    pub port: u8,
    /// Port GUID of the destination when the line names it; lets the `file`
    /// engine follow a port whose LID changed, as OpenSM's does.
    pub port_guid: Option<u64>,
}

/// One switch's LFT as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchLft {
    /// Node GUID of the switch.
    pub guid: u64,
    /// The switch's LID when the header gives it (not for DR-path headers).
    pub lid: Option<u16>,
    /// Node description from the header, without OpenSM's quotes.
    pub description: String,
    /// Line of the header, for messages about this switch.
    pub line: usize,
    /// Entries in file order.
    pub entries: Vec<LftEntry>,
    /// Line of each entry (same order as `entries`).
    pub entry_lines: Vec<usize>,
}

impl SwitchLft {
    /// `(lid, port)` pairs in file order.
    pub fn pairs(&self) -> Vec<(u16, u8)> {
        self.entries.iter().map(|e| (e.lid, e.port)).collect()
    }
}

/// `(switch GUID, [(lid, port)])` per switch, in file order.
pub type LftPairs = Vec<(u64, Vec<(u16, u8)>)>;

/// Why an LFT file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LftParseError {
    /// The file could not be read.
    #[error("{}: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A line is not part of either format, or is malformed.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// File name as given by the caller.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Parse `text` (an `opensm-lfts.dump` or `ibroute` output); `file` names it
/// in errors.
pub fn parse_lfts(text: &str, file: &str) -> Result<LftPairs, LftParseError> {
    Ok(parse_lfts_detailed(text, file)?
        .into_iter()
        .map(|s| (s.guid, s.pairs()))
        .collect())
}

/// Read and parse an LFT file, see [`parse_lfts`].
pub fn parse_lfts_file(path: &Path) -> Result<LftPairs, LftParseError> {
    Ok(parse_lfts_file_detailed(path)?
        .into_iter()
        .map(|s| (s.guid, s.pairs()))
        .collect())
}

/// Read and parse an LFT file keeping headers and port GUIDs.
pub fn parse_lfts_file_detailed(path: &Path) -> Result<Vec<SwitchLft>, LftParseError> {
    let bytes = fs::read(path).map_err(|source| LftParseError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    // Node descriptions are bytes, not necessarily UTF-8; they are only
    // carried along, so a lossy conversion loses nothing we use.
    parse_lfts_detailed(
        &String::from_utf8_lossy(&bytes),
        &path.display().to_string(),
    )
}

const MULTICAST: &str = "this is a multicast table dump; expected unicast LFTs";

/// Parse keeping headers and port GUIDs, see [`parse_lfts`].
pub fn parse_lfts_detailed(text: &str, file: &str) -> Result<Vec<SwitchLft>, LftParseError> {
    let mut switches: Vec<SwitchLft> = Vec::new();
    let mut seen_switch: HashMap<u64, usize> = HashMap::new();
    // LID -> line of its entry, for the switch being read.
    let mut seen_lid: HashMap<u16, usize> = HashMap::new();

    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let err = |message: String| LftParseError::Syntax {
            file: file.to_string(),
            line: lineno,
            message,
        };
        let line = raw.trim();

        if line.starts_with("0x") {
            let Some(sw) = switches.last_mut() else {
                return Err(err(
                    "LFT entry before any \"Unicast lids ... of switch\" header".into(),
                ));
            };
            let Some(entry) = parse_entry(line).map_err(err)? else {
                continue;
            };
            if let Some(first) = seen_lid.insert(entry.lid, lineno) {
                return Err(err(format!(
                    "LID 0x{:04x} of switch 0x{:016x} already has an entry at line {first}",
                    entry.lid, sw.guid
                )));
            }
            sw.entries.push(entry);
            sw.entry_lines.push(lineno);
            continue;
        }
        // Blank lines, comments, ibroute's diagnostics, column headers and
        // trailers carry nothing.
        if line.is_empty()
            || line.starts_with('#')
            || line.starts_with("ibwarn:")
            || line.ends_with("lids dumped")
            || is_ibroute_column_header(line)
        {
            continue;
        }
        // `ibroute -M` headers, and `opensm.mcfdbs`'s per-switch column
        // header.
        if line.starts_with("Multicast mlids") || line.starts_with("LID    : Out Port(s)") {
            return Err(err(MULTICAST.into()));
        }
        if line.starts_with("Unicast lids") {
            let sw = parse_header(line, lineno).map_err(err)?;
            if let Some(first) = seen_switch.insert(sw.guid, lineno) {
                return Err(err(format!(
                    "switch 0x{:016x} was already listed at line {first}",
                    sw.guid
                )));
            }
            seen_lid.clear();
            switches.push(sw);
            continue;
        }
        let hint = if line.starts_with("dump_ucast_routes:") || line.starts_with("LID    :") {
            " (this looks like opensm.fdbs; expected opensm-lfts.dump or ibroute output)"
        } else if line.starts_with("Switch 0x") {
            " (this looks like opensm.mcfdbs, a multicast table dump; expected unicast LFTs)"
        } else {
            ""
        };
        return Err(err(format!("unrecognised line{hint}: {}", shorten(line))));
    }
    Ok(switches)
}

fn is_ibroute_column_header(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words == ["Lid", "Out", "Destination"] || words == ["Port", "Info"]
}

fn parse_header(line: &str, lineno: usize) -> Result<SwitchLft, String> {
    let Some(at) = line.find(" guid 0x") else {
        return Err(format!(
            "switch header without \" guid 0x\": {}",
            shorten(line)
        ));
    };
    let rest = &line[at + " guid 0x".len()..];
    let hex_len = rest
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(rest.len());
    let after = &rest[hex_len..];
    if hex_len == 0 || !(after.is_empty() || after.starts_with(char::is_whitespace)) {
        return Err(format!(
            "cannot parse the switch GUID in: {}",
            shorten(line)
        ));
    }
    let guid = u64::from_str_radix(&rest[..hex_len], 16).map_err(|e| {
        format!(
            "switch GUID 0x{} is not a 64-bit number: {e}",
            &rest[..hex_len]
        )
    })?;

    let lid = line[..at]
        .split_once(" of switch Lid ")
        .and_then(|(_, l)| l.trim().parse::<u16>().ok());

    // "('sw1'):" from OpenSM, "(sw1):" from ibroute; the description itself
    // may contain parentheses, so strip only the outer ones.
    let mut desc = after.trim();
    desc = desc.strip_suffix(':').unwrap_or(desc);
    if let Some(inner) = desc.strip_prefix('(').and_then(|d| d.strip_suffix(')')) {
        desc = inner;
    }
    if let Some(inner) = desc.strip_prefix('\'').and_then(|d| d.strip_suffix('\'')) {
        desc = inner;
    }
    Ok(SwitchLft {
        guid,
        lid,
        description: desc.to_string(),
        line: lineno,
        entries: Vec::new(),
        entry_lines: Vec::new(),
    })
}

/// `None` for entries that mean "no route".
fn parse_entry(line: &str) -> Result<Option<LftEntry>, String> {
    let body = &line[2..];
    let lid_len = body
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(body.len());
    let after_lid = &body[lid_len..];
    if lid_len == 0 || !after_lid.starts_with(char::is_whitespace) {
        return Err(format!(
            "cannot parse the LID of LFT entry: {}",
            shorten(line)
        ));
    }
    let lid = u32::from_str_radix(&body[..lid_len], 16)
        .map_err(|_| format!("LID 0x{} is too large", &body[..lid_len]))?;
    if lid > 0xffff {
        return Err(format!("LID 0x{lid:x} is beyond 16 bits"));
    }
    if lid > MAX_UNICAST_LID as u32 {
        return Err(format!(
            "LID 0x{lid:04x} is not a unicast LID ({MULTICAST})"
        ));
    }

    let rest = after_lid.trim_start();
    let port_len = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let after_port = &rest[port_len..];
    if port_len == 0 || !(after_port.is_empty() || after_port.starts_with(char::is_whitespace)) {
        return Err(format!(
            "cannot parse the output port of LFT entry: {}",
            shorten(line)
        ));
    }
    let port: u32 = rest[..port_len]
        .parse()
        .map_err(|_| format!("port {} is too large", &rest[..port_len]))?;
    if port > 255 {
        return Err(format!("port {port} is beyond 255"));
    }
    if port == NO_ROUTE as u32 || after_port.contains("illegal port") {
        return Ok(None);
    }

    let port_guid = after_port.find(" portguid 0x").and_then(|at| {
        let hex = &after_port[at + " portguid 0x".len()..];
        let len = hex
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(hex.len());
        u64::from_str_radix(&hex[..len], 16).ok()
    });
    Ok(Some(LftEntry {
        lid: lid as u16,
        port: port as u8,
        port_guid,
    }))
}

fn shorten(line: &str) -> String {
    const MAX: usize = 80;
    if line.chars().count() <= MAX {
        line.to_string()
    } else {
        let mut s: String = line.chars().take(MAX).collect();
        s.push('…');
        s
    }
}

/// OpenSM's name of a node type in dumps.
pub fn node_type_name(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::Ca => "Channel Adapter",
        NodeKind::Switch => "Switch",
        NodeKind::Router => "Router",
        _ => "Unknown",
    }
}

/// Write `lfts` in the `opensm-lfts.dump` format, switches in the order
/// given, each destination named by its port GUID and node description.
///
/// The core's dump writer additionally lists switches in OpenSM's GUID map
/// order and escapes descriptions as OpenSM does; this one is for engines
/// and tests that need a dump the parser above (and OpenSM's `-U`) reads.
pub fn write_lfts(fabric: &FabricSnapshot, lfts: &[Lft]) -> String {
    // LID -> owning port, for the destination comments.
    let mut owner: Vec<Option<u32>> = vec![None; fabric.max_lid as usize + 1];
    for (i, p) in fabric.ports.iter().enumerate() {
        let is_switch = fabric.nodes[p.node as usize].kind == NodeKind::Switch;
        if p.lid == 0 || (is_switch && p.num != 0) {
            continue;
        }
        for lid in p.lid as u32..p.lid as u32 + p.lid_count() {
            if let Some(slot) = owner.get_mut(lid as usize) {
                *slot = Some(i as u32);
            }
        }
    }
    let mut out = String::new();
    for lft in lfts {
        let node = &fabric.nodes[lft.node as usize];
        let own_lid = fabric.ports[node.first_port as usize].lid;
        let _ = writeln!(
            out,
            "Unicast lids [0-{}] of switch Lid {own_lid} guid 0x{:016x} ('{}'):",
            fabric.max_lid, node.guid, node.description
        );
        for (lid, &port) in lft
            .ports
            .iter()
            .enumerate()
            .take(fabric.max_lid as usize + 1)
        {
            if port > node.num_ports {
                continue;
            }
            let _ = write!(out, "0x{lid:04x} {port:03} # ");
            match owner.get(lid).copied().flatten() {
                Some(pi) => {
                    let p = &fabric.ports[pi as usize];
                    let n = &fabric.nodes[p.node as usize];
                    let _ = writeln!(
                        out,
                        "{} portguid 0x{:016x}: '{}'",
                        node_type_name(n.kind),
                        p.guid,
                        n.description
                    );
                }
                None => out.push_str("unknown node and type\n"),
            }
        }
        let _ = writeln!(out, "{} lids dumped", fabric.max_lid);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_variants() {
        let sw = parse_header(
            "Unicast lids [0-6] of switch Lid 2 guid 0x0002c90000000100 ('sw (1)'):",
            3,
        )
        .unwrap();
        assert_eq!(
            (sw.guid, sw.lid, sw.description.as_str()),
            (0x0002c90000000100, Some(2), "sw (1)")
        );
        let sw = parse_header(
            "Unicast lids [0x0-0x6] of switch DR path slid 65535; dlid 65535; 0,1 guid 0x0002c90000000100 (sw1):",
            1,
        )
        .unwrap();
        assert_eq!((sw.lid, sw.description.as_str()), (None, "sw1"));
        assert!(parse_header("Unicast lids [0-6] of switch Lid 2 guid 0xZZ", 1).is_err());
    }

    #[test]
    fn entry_variants() {
        let e = parse_entry("0x0001 001 # Channel Adapter portguid 0x0002c90000001001: 'h1'")
            .unwrap()
            .unwrap();
        assert_eq!(
            (e.lid, e.port, e.port_guid),
            (1, 1, Some(0x0002c90000001001))
        );
        let e = parse_entry("0x0003 001 : (path #2 out of 2: portguid 0x0002c90000001001)")
            .unwrap()
            .unwrap();
        assert_eq!(e.port_guid, Some(0x0002c90000001001));
        let e = parse_entry("0x0006 002").unwrap().unwrap();
        assert_eq!((e.lid, e.port, e.port_guid), (6, 2, None));
        assert_eq!(
            parse_entry("0x0000 255 : (path #0 - illegal port)").unwrap(),
            None
        );
        assert_eq!(parse_entry("0x0009 017 : (illegal port)").unwrap(), None);
        assert!(parse_entry("0x0001 : 001  : 01   : yes").is_err());
        assert!(parse_entry("0xC000 001").unwrap_err().contains("multicast"));
        assert!(parse_entry("0x0001 256").is_err());
        assert!(parse_entry("0x10000 001").is_err());
    }

    fn syntax(text: &str) -> (usize, String) {
        match parse_lfts_detailed(text, "f") {
            Err(LftParseError::Syntax { line, message, .. }) => (line, message),
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn multicast_dumps_are_refused() {
        let (line, m) =
            syntax("ibwarn: x\nMulticast mlids [0xc000-0xc3ff] of switch Lid 2 guid 0x2 (s):\n");
        assert_eq!(line, 2);
        assert!(m.contains("multicast"), "{m}");
        let (line, m) =
            syntax("\nSwitch 0x0002c90000000100\nLID    : Out Port(s)\n0xC000 : 0x001 0x002\n");
        assert_eq!(line, 2);
        assert!(m.contains("multicast"), "{m}");
        let (line, m) = syntax("Unicast lids [0-2] of switch Lid 2 guid 0x2 ('s'):\n0xc001 001\n");
        assert_eq!(line, 2);
        assert!(m.contains("multicast"), "{m}");
    }

    #[test]
    fn entry_lines_are_kept() {
        let s = parse_lfts_detailed(
            "Unicast lids [0-2] of switch Lid 2 guid 0x2 ('s'):\n\n0x0001 001\n0x0002 000\n",
            "f",
        )
        .unwrap();
        assert_eq!(s[0].entry_lines, vec![3, 4]);
        assert_eq!(s[0].line, 1);
    }

    #[test]
    fn written_dumps_read_back() {
        let text = "Switch 4 \"a\"\n[1] \"b\"[1]\n[2] \"b\"[2]\n[3] \"h0\"[1]\n\nSwitch 4 \"b\"\n[3] \"h1\"[1]\n\nHca 1 \"h0\"\n\nHca 1 \"h1\"\n";
        let topo = sm_topology::parse_str(text, "pair").unwrap();
        let f = sm_topology::lids::snapshot(&topo, 1).unwrap();
        let lfts: Vec<Lft> = f
            .switches()
            .map(|n| Lft {
                node: n,
                ports: (0..=f.max_lid)
                    .map(|l| if l % 3 == 0 { NO_ROUTE } else { (l % 4) as u8 })
                    .collect::<Vec<_>>()
                    .into(),
            })
            .collect();
        let dump = write_lfts(&f, &lfts);
        let back = parse_lfts_detailed(&dump, "w").unwrap();
        assert_eq!(back.len(), lfts.len());
        for (sw, lft) in back.iter().zip(&lfts) {
            assert_eq!(sw.guid, f.nodes[lft.node as usize].guid);
            let want: Vec<(u16, u8)> = lft
                .ports
                .iter()
                .enumerate()
                .filter(|(_, &p)| p != NO_ROUTE)
                .map(|(l, &p)| (l as u16, p))
                .collect();
            assert_eq!(sw.pairs(), want);
            // Every LID in use is named by its port GUID.
            for e in &sw.entries {
                let owner = f.ports.iter().find(|p| {
                    p.lid != 0
                        && (p.lid..p.lid + (1 << p.lmc)).contains(&e.lid)
                        && (p.num == 0 || f.nodes[p.node as usize].kind != NodeKind::Switch)
                });
                assert_eq!(e.port_guid, owner.map(|p| p.guid), "LID {}", e.lid);
            }
        }
    }
}
