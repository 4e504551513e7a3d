//! The `file` engine: linear forwarding tables loaded from a file, as
//! OpenSM's `-R file` with `-U`/`lfts_file` does.
//!
//! The file is an `opensm-lfts.dump` (what smcore and OpenSM write) or the
//! output of `ibroute` for one or more switches; both are read by the kit's
//! [`lfts_file`](smcore_kit::lfts_file) parser. A malformed line is an error
//! naming file and line, and a multicast table dump is refused.
//!
//! How the tables are applied:
//!
//! * Each switch section is matched to a fabric switch by node GUID. A
//!   section for a switch the fabric does not have is skipped with a
//!   warning; a fabric switch the file does not mention gets no table (and
//!   a warning), so the core's verifier sees exactly what the file says.
//! * LIDs may have changed since the dump was written. Every entry that
//!   names its destination's port GUID (each line of an OpenSM dump and of
//!   plain `ibroute` output does; `ibroute -n` lines do not) is moved to the
//!   LID that port has now: kept if the old LID is still inside the port's
//!   LID range, else the same offset in its new range (LMC). Entries without
//!   a GUID, or whose port is gone, stay at their LID. When two entries land
//!   on one LID, an entry placed by GUID wins over one that is not; between
//!   equals the later line wins, as in OpenSM.
//! * Entries naming a port the switch does not have, or a LID above the
//!   fabric's highest, are dropped with a warning (they could not be
//!   programmed).
//! * Topology changes are otherwise ignored: routes through links that are
//!   down are loaded as written. The engine does not judge the result; the
//!   core's verifier gate does.
//!
//! The engine promises nothing about credit loops (`deadlock_free: false`):
//! the tables may come from anywhere.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sm_abi::{EngineError, FabricSnapshot, Level, Lft, NodeKind, Routing, RoutingEngine, NO_ROUTE};
use smcore_kit::config;
use smcore_kit::lfts_file::{parse_lfts_file_detailed, SwitchLft};

/// Options, named as OpenSM's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FileConfig {
    /// The LFT file to load (OpenSM `lfts_file`, `-U`; smcore `--lfts-file`).
    pub lfts_file: Option<PathBuf>,
    /// Hop counts to route with instead of the fabric's, an
    /// `opensm-lid-matrix.dump` (OpenSM `lid_matrix_dump_file`, `-M`):
    /// without `lfts_file` the tables are min hop over these counts, as
    /// OpenSM's file engine falls back to its min-hop builder on the
    /// loaded matrix. With `lfts_file` the LFTs are that file's.
    pub lid_matrix_dump_file: Option<PathBuf>,
}

/// The engine.
#[derive(Debug, Clone, Default)]
pub struct FileEngine {
    cfg: FileConfig,
}

/// At most this many individual warnings of one kind; the rest are counted.
const MAX_LISTED: usize = 10;

/// What happened to the entries of the file, for the diagnostics.
#[derive(Debug, Default)]
struct Tally {
    entries: usize,
    /// Entries moved to their port's new LID.
    remapped: usize,
    /// Entries that name no destination GUID.
    without_guid: usize,
    /// Entries naming a port GUID the fabric does not have.
    unknown_guid: usize,
    /// Entries overwritten by another entry for the same (new) LID.
    collisions: usize,
    /// Entries dropped: port beyond the switch's ports.
    bad_port: Vec<String>,
    bad_port_count: usize,
    /// Entries dropped: LID above the fabric's highest.
    beyond_max_lid: usize,
}

impl FileEngine {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<FileEngine, EngineError> {
        Ok(FileEngine {
            cfg: config::parse("file", text)?,
        })
    }

    /// An engine loading `path`.
    pub fn with_file(path: impl Into<PathBuf>) -> FileEngine {
        FileEngine {
            cfg: FileConfig {
                lfts_file: Some(path.into()),
                lid_matrix_dump_file: None,
            },
        }
    }

    fn path(&self) -> Result<&Path, EngineError> {
        self.cfg.lfts_file.as_deref().ok_or_else(|| {
            EngineError::new("file: no LFT file given (set `lfts_file` in the configuration or pass --lfts-file)")
        })
    }
}

impl RoutingEngine for FileEngine {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        if let (None, Some(matrix)) = (&self.cfg.lfts_file, &self.cfg.lid_matrix_dump_file) {
            return route_by_lid_matrix(fabric, matrix);
        }
        let path = self.path()?;
        let sections =
            parse_lfts_file_detailed(path).map_err(|e| EngineError::new(format!("file: {e}")))?;
        if sections.is_empty() {
            return Err(EngineError::new(format!(
                "file: {} holds no unicast LFT",
                path.display()
            )));
        }
        load(fabric, &sections, &path.display().to_string())
    }
}

/// One switch's rows of an `opensm-lid-matrix.dump`: (LID, port GUID or
/// 0, hops per port from port 0).
type MatrixRows = Vec<(u16, u64, Vec<u8>)>;

/// Parse `opensm-lid-matrix.dump` text as OpenSM's `-M` does: `Switch ...
/// guid 0x<GUID>` starts a switch, `0x<LID>: <hh> <hh> ... # portguid
/// 0x<GUID>` gives its hop counts to that LID by port; `#` lines are
/// comments. A line that cannot be read is an error naming file and line.
pub fn parse_lid_matrix(text: &str, origin: &str) -> Result<HashMap<u64, MatrixRows>, EngineError> {
    let mut out: HashMap<u64, MatrixRows> = HashMap::new();
    let mut current: Option<u64> = None;
    for (i, raw) in text.lines().enumerate() {
        let fail = |m: String| EngineError::new(format!("file: {origin}:{}: {m}", i + 1));
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("Switch") {
            let at = line.find(" guid 0x").ok_or_else(|| fail("cannot parse switch definition".into()))?;
            let word = line[at + 8..].split_whitespace().next().unwrap_or("");
            let guid = u64::from_str_radix(word, 16).map_err(|_| fail(format!("cannot parse switch guid `{word}`")))?;
            out.entry(guid).or_default();
            current = Some(guid);
        } else if let (Some(sw), Some(rest)) = (current, line.strip_prefix("0x")) {
            let (row, comment) = rest.split_once('#').unwrap_or((rest, ""));
            let (lid, hops) = row.split_once(':').unwrap_or((row, ""));
            let lid = u16::from_str_radix(lid.trim(), 16).map_err(|_| fail(format!("cannot parse lid `{}`", lid.trim())))?;
            let hops = hops
                .split_whitespace()
                .map(|h| u8::from_str_radix(h, 16).map_err(|_| fail(format!("cannot parse hops number `{h}`"))))
                .collect::<Result<Vec<u8>, _>>()?;
            let guid = comment
                .split_once("portguid 0x")
                .and_then(|(_, g)| u64::from_str_radix(g.split_whitespace().next().unwrap_or(""), 16).ok())
                .unwrap_or(0);
            out.entry(sw).or_default().push((lid, guid, hops));
        }
    }
    Ok(out)
}

/// Hop counts from a lid matrix, as a hop table over the fabric's
/// switches: `rows[s * n + t]` is switch `s`'s row for switch `t`'s LID.
struct MatrixHops {
    n: usize,
    rows: Vec<Option<Vec<u8>>>,
}

impl smcore_kit::balance::HopTable for MatrixHops {
    fn least(&self, s: u32, t: u32) -> u8 {
        if s == t {
            return 0;
        }
        self.rows[s as usize * self.n + t as usize]
            .as_ref()
            .and_then(|r| r.iter().skip(1).copied().min())
            .unwrap_or(u8::MAX)
    }

    fn via(&self, s: u32, link: &smcore_kit::graph::SwPort, t: u32) -> u8 {
        self.rows[s as usize * self.n + t as usize]
            .as_ref()
            .and_then(|r| r.get(link.port as usize).copied())
            .unwrap_or(u8::MAX)
    }
}

/// Min-hop tables over the hop counts of `path` (OpenSM's file engine
/// with `-M` and no `-U`). A row is matched to its destination switch by
/// the port GUID it names, else by LID; switches the file does not list
/// reach nothing, which the core's verifier reports.
fn route_by_lid_matrix(fabric: &FabricSnapshot, path: &Path) -> Result<Routing, EngineError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EngineError::new(format!("file: cannot read {}: {e}", path.display())))?;
    let matrix = parse_lid_matrix(&text, &path.display().to_string())?;
    let graph = smcore_kit::Graph::new(fabric);
    let n = graph.switch_count();
    let lid_port = |node: u32| &fabric.ports[fabric.nodes[node as usize].first_port as usize];
    let by_guid: HashMap<u64, usize> =
        (0..n).map(|t| (lid_port(graph.switch_nodes[t]).guid, t)).collect();
    let by_lid: HashMap<u16, usize> =
        (0..n).map(|t| (lid_port(graph.switch_nodes[t]).lid, t)).filter(|(l, _)| *l != 0).collect();
    let mut rows = vec![None; n * n];
    let mut listed = 0;
    for s in 0..n {
        let Some(lines) = matrix.get(&fabric.nodes[graph.switch_nodes[s] as usize].guid) else { continue };
        listed += 1;
        for (lid, guid, hops) in lines {
            let t = by_guid.get(guid).or_else(|| by_lid.get(lid));
            if let Some(&t) = t {
                rows[s * n + t] = Some(hops.clone());
            }
        }
    }
    if listed == 0 {
        return Err(EngineError::new(format!("file: {} lists none of the fabric's switches", path.display())));
    }
    let hops = MatrixHops { n, rows };
    let order = smcore_kit::balance::routing_order(fabric, &graph, &[]);
    let lfts = smcore_kit::balance::assign_lfts(fabric, &graph, &hops, &order, &Default::default());
    let mut routing = Routing::single_vl(lfts);
    if listed < n {
        routing.diag(Level::Warn, format!("file: {} lists {listed} of the fabric's {n} switches", path.display()));
    }
    Ok(routing)
}

/// Apply parsed LFT sections to `fabric`; `origin` names the file in messages.
pub fn load(
    fabric: &FabricSnapshot,
    sections: &[SwitchLft],
    origin: &str,
) -> Result<Routing, EngineError> {
    let switch_by_guid: HashMap<u64, u32> = fabric
        .switches()
        .map(|n| (fabric.nodes[n as usize].guid, n))
        .collect();
    // Ports that answer to LIDs, by port GUID (a switch's external ports
    // share its port-0 GUID and have no LID of their own).
    let port_by_guid: HashMap<u64, u32> = fabric
        .ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.lid != 0)
        .map(|(i, p)| (p.guid, i as u32))
        .collect();

    let mut notes: Vec<(Level, String)> = Vec::new();
    let mut tally = Tally::default();
    let mut lfts = Vec::new();
    let mut loaded = vec![false; fabric.nodes.len()];
    let mut skipped = Vec::new();
    let mut switch_lid_changed = 0usize;
    for sec in sections {
        let Some(&node) = switch_by_guid.get(&sec.guid) else {
            skipped.push(format!(
                "{origin}:{}: switch 0x{:016x} ('{}') is not in the fabric; its LFT is skipped",
                sec.line, sec.guid, sec.description
            ));
            continue;
        };
        loaded[node as usize] = true;
        let n = &fabric.nodes[node as usize];
        if sec
            .lid
            .is_some_and(|l| l != fabric.ports[n.first_port as usize].lid)
        {
            switch_lid_changed += 1;
        }
        lfts.push(Lft {
            node,
            ports: apply(fabric, n.num_ports, sec, &port_by_guid, origin, &mut tally).into(),
        });
    }
    if lfts.is_empty() {
        return Err(EngineError::new(format!(
            "file: none of the {} switches in {origin} is in the fabric (first: {})",
            sections.len(),
            skipped.first().map(String::as_str).unwrap_or("-")
        )));
    }

    for s in skipped.iter().take(MAX_LISTED) {
        notes.push((Level::Warn, s.clone()));
    }
    if skipped.len() > MAX_LISTED {
        notes.push((
            Level::Warn,
            format!(
                "{origin}: {} more switches not in the fabric skipped",
                skipped.len() - MAX_LISTED
            ),
        ));
    }
    let missing: Vec<String> = fabric
        .switches()
        .filter(|&n| !loaded[n as usize])
        .map(|n| {
            let node = &fabric.nodes[n as usize];
            format!("0x{:016x} ('{}')", node.guid, node.description)
        })
        .collect();
    if !missing.is_empty() {
        let listed: Vec<&str> = missing
            .iter()
            .take(MAX_LISTED)
            .map(String::as_str)
            .collect();
        let more = if missing.len() > MAX_LISTED {
            format!(" and {} more", missing.len() - MAX_LISTED)
        } else {
            String::new()
        };
        notes.push((
            Level::Warn,
            format!(
                "{origin}: no LFT for {} fabric switch(es), left without routes: {}{more}",
                missing.len(),
                listed.join(", ")
            ),
        ));
    }
    for s in &tally.bad_port {
        notes.push((Level::Warn, s.clone()));
    }
    if tally.bad_port_count > tally.bad_port.len() {
        notes.push((
            Level::Warn,
            format!(
                "{origin}: {} more entries name ports their switch does not have; dropped",
                tally.bad_port_count - tally.bad_port.len()
            ),
        ));
    }
    if tally.beyond_max_lid > 0 {
        notes.push((
            Level::Warn,
            format!(
                "{origin}: {} entries for LIDs above the fabric's highest LID {} dropped",
                tally.beyond_max_lid, fabric.max_lid
            ),
        ));
    }
    if tally.without_guid > 0 && (tally.remapped > 0 || switch_lid_changed > 0) {
        // The format gives no way to follow these ports to their new LIDs.
        notes.push((
            Level::Warn,
            format!(
                "{origin}: LIDs changed since the dump, but {} entries name no destination GUID (`ibroute -n` output or \"unknown node\" lines); they stay at their old LIDs",
                tally.without_guid
            ),
        ));
    }
    if tally.unknown_guid > 0 {
        notes.push((
            Level::Warn,
            format!(
                "{origin}: {} entries name port GUIDs the fabric does not have; kept at their LIDs",
                tally.unknown_guid
            ),
        ));
    }
    if tally.collisions > 0 {
        notes.push((
            Level::Warn,
            format!(
                "{origin}: {} entries overwritten by another entry for the same LID",
                tally.collisions
            ),
        ));
    }
    notes.push((
        Level::Info,
        format!(
            "loaded {} switch LFT(s), {} entries from {origin}; {} entries moved to their port's new LID",
            lfts.len(),
            tally.entries,
            tally.remapped
        ),
    ));

    let mut routing = Routing::single_vl(lfts);
    for (level, m) in notes {
        routing.diag(level, m);
    }
    Ok(routing)
}

/// Where an entry's value came from, to settle two entries for one LID.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Placed {
    Empty,
    /// At the LID the file gives, the port unknown or not named.
    AsWritten,
    /// At the LID its destination port GUID has now.
    ByGuid,
}

fn apply(
    fabric: &FabricSnapshot,
    num_ports: u8,
    sec: &SwitchLft,
    port_by_guid: &HashMap<u64, u32>,
    origin: &str,
    tally: &mut Tally,
) -> Vec<u8> {
    let len = fabric.max_lid as usize + 1;
    let mut lft = vec![NO_ROUTE; len];
    let mut placed = vec![Placed::Empty; len];
    for (i, e) in sec.entries.iter().enumerate() {
        tally.entries += 1;
        if e.port > num_ports {
            tally.bad_port_count += 1;
            if tally.bad_port.len() < MAX_LISTED {
                let line = sec.entry_lines.get(i).copied().unwrap_or(sec.line);
                tally.bad_port.push(format!(
                    "{origin}:{line}: switch 0x{:016x} has no port {} (it has {num_ports}); entry for LID 0x{:04x} dropped",
                    sec.guid, e.port, e.lid
                ));
            }
            continue;
        }
        let (lid, how) = match e.port_guid {
            None => {
                tally.without_guid += 1;
                (e.lid, Placed::AsWritten)
            }
            Some(g) => match port_by_guid.get(&g) {
                None => {
                    tally.unknown_guid += 1;
                    (e.lid, Placed::AsWritten)
                }
                Some(&pi) => {
                    let p = &fabric.ports[pi as usize];
                    let lmc = if fabric.nodes[p.node as usize].kind == NodeKind::Switch {
                        0
                    } else {
                        p.lmc
                    };
                    let count = 1u32 << lmc;
                    let (base, lid) = (p.lid as u32, e.lid as u32);
                    let new = if (base..base + count).contains(&lid) {
                        lid
                    } else {
                        base + (lid & (count - 1))
                    };
                    if new != lid {
                        tally.remapped += 1;
                    }
                    (new as u16, Placed::ByGuid)
                }
            },
        };
        let l = lid as usize;
        if l >= len {
            tally.beyond_max_lid += 1;
            continue;
        }
        if how < placed[l] {
            tally.collisions += 1;
            continue;
        }
        if placed[l] != Placed::Empty {
            tally.collisions += 1;
        }
        lft[l] = e.port;
        placed[l] = how;
    }
    lft
}

sm_abi::export_engines! {
    "file" => {
        summary: "OpenSM file: LFTs loaded from an opensm-lfts.dump or ibroute output (lfts_file), remapped by port GUID",
        deadlock_free: false,
        create: FileEngine::from_config,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_reads_lfts_file_and_ignores_other_keys() {
        let e = FileEngine::from_config(
            "lmc = 0\nlfts_file = \"/x/opensm-lfts.dump\"\nroot_guid_file = \"/r\"\n",
        )
        .unwrap();
        assert_eq!(
            e.cfg.lfts_file.as_deref(),
            Some(Path::new("/x/opensm-lfts.dump"))
        );
        assert!(FileEngine::from_config("lfts_file = 3\n")
            .unwrap_err()
            .reason
            .starts_with("file: bad configuration"));
    }
}
