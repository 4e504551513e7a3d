//! # The cabling check: the fabric found against the fabric intended
//!
//! `smcore check --expect TOPOLOGY`, the daemon's `expect_topology` and
//! `smcore shadow` compare two [`Cabling`]s: the one a topology file
//! describes ([`load_expected`]) and the one discovery read
//! ([`Cabling::from_fabric`]). [`check`] is a pure function of the two; its
//! [`CablingReport`] names, by node GUID, port number and node description:
//!
//! * nodes missing from the fabric, and nodes the file does not know;
//! * links missing (neither end cabled to anything), extra links (neither
//!   end expected to be cabled) and miswired links (a cable found whose
//!   ends were expected elsewhere: one entry per cable found, with where
//!   each of its ends was expected to go);
//! * links running below their rate: below the width or lane speed the
//!   file states for the link (an ibnetdiscover `lid N 4xQDR` comment,
//!   ibsim's port options), or, when the file states none, below the best
//!   width and speed both ports support and have enabled (PortInfo
//!   LinkWidthSupported/Enabled and LinkSpeed(Ext)Supported/Enabled
//!   against the Active fields).
//!
//! The links of a node missing altogether are not listed one by one: the
//! node's entry says it. Reading the fabric for a check writes nothing:
//! [`observe`] sends through [`sm_transport::ReadOnly`], which refuses
//! anything but a SubnGet before it reaches the fabric.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use sm_abi::NodeKind;
use sm_mad::port_info::link_width;
use sm_mad::speed::{self, LaneSpeed, SpeedCaps};
use sm_mad::PortInfoRepr;
use sm_model::Fabric;
use sm_topology::model::{kind_name, rate_string};
use sm_topology::{StatedRates, Topology};
use sm_transport::{ReadOnly, ReadOnlyStats, SmpPort};
use thiserror::Error;

use crate::sweep::{DiscoveryReport, SweepError, SweepLimits, SweepOptions};

/// A port: node GUID and port number.
pub type End = (u64, u8);

/// What stops a cabling check.
#[derive(Debug, Error)]
pub enum CablingError {
    /// The expected topology file is unreadable or malformed.
    #[error(transparent)]
    Topology(#[from] sm_topology::TopologyError),
    /// The fabric could not be read.
    #[error("reading the fabric: {0}")]
    Read(#[from] SweepError),
}

/// A link rate: lanes and lane speed (2.5 Gb/s units, the
/// `sm_topology::model::SPEED_*` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Lanes (1, 2, 4, 8, 12).
    pub width: u8,
    /// Lane speed in 2.5 Gb/s units.
    pub speed: u8,
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&rate_string(self.width, self.speed))
    }
}

/// One node of a [`Cabling`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CablingNode {
    /// Node GUID.
    pub guid: u64,
    /// Switch, CA or router.
    pub kind: NodeKind,
    /// NodeDescription.
    pub description: String,
    /// Number of ports.
    pub num_ports: u8,
}

/// One cable of a [`Cabling`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cable {
    /// One end.
    pub a: End,
    /// The other end.
    pub b: End,
    /// Expected: the rate the file states (`None`: it states none).
    /// Found: the rate the link runs at (`None`: no PortInfo was read).
    pub rate: Option<Rate>,
    /// Found only: the best rate both ports support and have enabled.
    pub supported: Option<Rate>,
}

/// Nodes and cables, expected or found, by GUID and port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cabling {
    nodes: BTreeMap<u64, CablingNode>,
    cables: Vec<Cable>,
    /// Cable index by each of its ends.
    by_end: HashMap<End, usize>,
}

impl Cabling {
    /// An empty cabling.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a node.
    pub fn add_node(&mut self, guid: u64, kind: NodeKind, description: &str, num_ports: u8) {
        self.nodes.insert(guid, CablingNode { guid, kind, description: description.to_string(), num_ports });
    }

    /// Adds a cable; a cable already on either end is replaced.
    pub fn add_cable(&mut self, cable: Cable) {
        for end in [cable.a, cable.b] {
            if let Some(old) = self.by_end.get(&end).copied() {
                self.remove_cable(old);
            }
        }
        self.by_end.insert(cable.a, self.cables.len());
        self.by_end.insert(cable.b, self.cables.len());
        self.cables.push(cable);
    }

    fn remove_cable(&mut self, i: usize) {
        let gone = self.cables.remove(i);
        self.by_end.remove(&gone.a);
        self.by_end.remove(&gone.b);
        for v in self.by_end.values_mut() {
            if *v > i {
                *v -= 1;
            }
        }
    }

    /// The nodes, by GUID.
    pub fn nodes(&self) -> &BTreeMap<u64, CablingNode> {
        &self.nodes
    }

    /// The cables.
    pub fn cables(&self) -> &[Cable] {
        &self.cables
    }

    /// The cable on `end`, if any.
    pub fn cable_at(&self, end: End) -> Option<&Cable> {
        self.by_end.get(&end).map(|&i| &self.cables[i])
    }

    /// The port at the other end of `end`'s cable.
    pub fn peer(&self, end: End) -> Option<End> {
        self.cable_at(end).map(|c| if c.a == end { c.b } else { c.a })
    }

    /// The cabling a topology file describes; `stated` are the links whose
    /// rate the file states ([`sm_topology::parse_file_stated`]).
    pub fn from_topology(topo: &Topology, stated: &StatedRates) -> Self {
        let mut c = Cabling::new();
        for n in &topo.nodes {
            c.add_node(n.node_guid, n.kind, &n.desc, n.num_ports);
        }
        for l in &topo.links {
            let (Some(na), Some(nb)) = (topo.nodes.get(l.a.0), topo.nodes.get(l.b.0)) else { continue };
            let key = if l.b < l.a { (l.b, l.a) } else { (l.a, l.b) };
            let rate = stated.contains(&key).then_some(Rate { width: l.width, speed: l.speed });
            c.add_cable(Cable { a: (na.node_guid, l.a.1), b: (nb.node_guid, l.b.1), rate, supported: None });
        }
        c
    }

    /// The cabling discovery found: every node, every link up, with the
    /// rate it runs at and the rate its two ports could run at.
    pub fn from_fabric(fabric: &Fabric) -> Self {
        let mut c = Cabling::new();
        for n in &fabric.nodes {
            c.add_node(n.guid, n.kind, &n.description, n.num_ports);
        }
        for ((i, p), (j, q)) in fabric.links() {
            let (na, nb) = (&fabric.nodes[i], &fabric.nodes[j]);
            // A switch says which speed groups it supports on port 0.
            let info = |n: &sm_model::FabricNode, port: u8| -> Option<(PortInfoRepr, SpeedCaps)> {
                Some((n.ports.get(usize::from(port))?.info?, n.speed_caps(port)))
            };
            let (ia, ib) = (info(na, p), info(nb, q));
            let rate = match (ia.map(|x| active(&x.0, x.1)), ib.map(|x| active(&x.0, x.1))) {
                (Some(x), Some(y)) => Some(Rate { width: x.width.min(y.width), speed: x.speed.min(y.speed) }),
                (x, y) => x.or(y),
            };
            let supported = match (ia, ib) {
                (Some(x), Some(y)) => Some(best_common(&x.0, x.1, &y.0, y.1)),
                _ => None,
            };
            c.add_cable(Cable { a: (na.guid, p), b: (nb.guid, q), rate, supported });
        }
        c
    }
}

/// The rate a port's PortInfo says its link runs at.
fn active(info: &PortInfoRepr, caps: SpeedCaps) -> Rate {
    Rate {
        width: link_width::lanes(info.link_width_active),
        speed: speed::active(info, caps).map_or(0, LaneSpeed::units),
    }
}

/// A port's usable mask: supported and enabled (enabled 0, as a port that
/// never had it set may say: supported).
fn usable(supported: u8, enabled: u8) -> u8 {
    if supported & enabled == 0 {
        supported
    } else {
        supported & enabled
    }
}

/// The best rate two linked ports both support and have enabled; an
/// extended speed group counts only when both ends support it.
fn best_common(a: &PortInfoRepr, a_caps: SpeedCaps, b: &PortInfoRepr, b_caps: SpeedCaps) -> Rate {
    let widths = usable(a.link_width_supported, a.link_width_enabled) & usable(b.link_width_supported, b.link_width_enabled);
    let width = [link_width::W1X, link_width::W2X, link_width::W4X, link_width::W8X, link_width::W12X]
        .into_iter()
        .filter(|&bit| widths & bit != 0)
        .map(link_width::lanes)
        .max()
        .unwrap_or(0);
    let speeds = speed::usable(a, a_caps).common(speed::usable(b, b_caps));
    Rate { width, speed: speeds.fastest().map_or(0, LaneSpeed::units) }
}

/// The cabling a topology file describes.
pub fn load_expected(path: &Path) -> Result<Cabling, CablingError> {
    let (topo, stated) = sm_topology::parse_file_stated(path)?;
    Ok(Cabling::from_topology(&topo, &stated))
}

/// What [`observe`] read.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The fabric; `incomplete` when SMPs were lost.
    pub fabric: Fabric,
    /// What discovery saw go wrong.
    pub discovery: DiscoveryReport,
    /// What the read-only port passed and refused.
    pub port: ReadOnlyStats,
}

/// Reads the fabric behind `port` by directed-route SubnGets only,
/// through a [`ReadOnly`] port: nothing can be written.
pub fn observe(port: &mut dyn SmpPort, options: &SweepOptions) -> Result<Observed, CablingError> {
    let mut ro = ReadOnly::new(port);
    let read = crate::sweep::stages::read_fabric(&mut ro, options, &SweepLimits::default())?;
    let mut fabric = read.fabric().clone();
    fabric.incomplete = read.report().incomplete();
    Ok(Observed { fabric, discovery: read.report().clone(), port: ro.stats() })
}

fn hex<S: Serializer>(guid: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{guid:#018x}"))
}

/// A port named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortRef {
    /// Node GUID.
    #[serde(serialize_with = "hex")]
    pub guid: u64,
    /// Port number.
    pub port: u8,
    /// The node's description (the file's, else the fabric's).
    pub description: String,
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#018x} {:?} port {}", self.guid, self.description, self.port)
    }
}

/// A node named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRef {
    /// Node GUID.
    #[serde(serialize_with = "hex")]
    pub guid: u64,
    /// `switch`, `CA` or `router`.
    pub kind: &'static str,
    /// Its description.
    pub description: String,
    /// Cables the node has on the side that has the node.
    pub links: usize,
}

/// A link named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkRef {
    /// One end.
    pub a: PortRef,
    /// The other end.
    pub b: PortRef,
}

/// A cable found whose ends were expected elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Miswired {
    /// One end of the cable found.
    pub a: PortRef,
    /// Its other end.
    pub b: PortRef,
    /// Where `a` was expected to go (`None`: nowhere).
    pub a_expected: Option<PortRef>,
    /// Where `b` was expected to go.
    pub b_expected: Option<PortRef>,
}

/// A link running below its rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Degraded {
    /// One end.
    pub a: PortRef,
    /// The other end.
    pub b: PortRef,
    /// Lanes active.
    pub width: u8,
    /// Lanes expected.
    pub expected_width: u8,
    /// Lane speed active (2.5 Gb/s units).
    pub speed: u8,
    /// Lane speed expected.
    pub expected_speed: u8,
    /// `4xQDR` style: what runs.
    pub rate: String,
    /// What was expected.
    pub expected_rate: String,
    /// Where the expected rate comes from: `file` (the topology file
    /// states it) or `ports` (what both ports support and have enabled).
    pub expected_from: &'static str,
}

/// The kinds of difference, as the report's fields, the text's headings
/// and the metric's `kind` label name them.
pub const KINDS: [&str; 6] =
    ["missing_node", "unexpected_node", "missing_link", "extra_link", "miswired_link", "degraded_link"];

/// What [`check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CablingReport {
    /// No difference.
    pub clean: bool,
    /// Nodes in the expected cabling.
    pub expected_nodes: usize,
    /// Links in it.
    pub expected_links: usize,
    /// Nodes found.
    pub found_nodes: usize,
    /// Links found.
    pub found_links: usize,
    /// The fabric was read with SMPs lost: what is missing may be there.
    pub incomplete: bool,
    /// Expected nodes not found.
    pub missing_nodes: Vec<NodeRef>,
    /// Nodes found that the expected cabling does not have.
    pub unexpected_nodes: Vec<NodeRef>,
    /// Expected links of which neither end is cabled to anything.
    pub missing_links: Vec<LinkRef>,
    /// Links found of which neither end was expected to be cabled.
    pub extra_links: Vec<LinkRef>,
    /// Links found whose ends were expected elsewhere.
    pub miswired_links: Vec<Miswired>,
    /// Links found as expected, running below their rate.
    pub degraded_links: Vec<Degraded>,
}

impl CablingReport {
    /// No difference (whatever `incomplete` says).
    pub fn is_clean(&self) -> bool {
        self.differences() == 0
    }

    /// Number of differences.
    pub fn differences(&self) -> usize {
        self.counts().values().sum()
    }

    /// Differences by kind ([`KINDS`], every kind present).
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let n = [
            self.missing_nodes.len(),
            self.unexpected_nodes.len(),
            self.missing_links.len(),
            self.extra_links.len(),
            self.miswired_links.len(),
            self.degraded_links.len(),
        ];
        KINDS.into_iter().zip(n).collect()
    }

    /// One line per difference with its kind, in the order [`KINDS`]
    /// lists them.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let node = |n: &NodeRef| {
            let links = match n.links {
                1 => " (1 link)".to_string(),
                l => format!(" ({l} links)"),
            };
            format!("{} {:#018x} {:?}{links}", n.kind, n.guid, n.description)
        };
        for n in &self.missing_nodes {
            out.push(("missing_node", node(n)));
        }
        for n in &self.unexpected_nodes {
            out.push(("unexpected_node", node(n)));
        }
        for l in &self.missing_links {
            out.push(("missing_link", format!("{} -- {}", l.a, l.b)));
        }
        for l in &self.extra_links {
            out.push(("extra_link", format!("{} -- {}", l.a, l.b)));
        }
        // "leaf-0" port 2 -- 0x... "host-1" port 1: where an end was expected to go.
        let expected = |end: &PortRef, e: &Option<PortRef>| {
            format!("{:?} port {} -- {}", end.description, end.port, e.as_ref().map_or("nothing".to_string(), ToString::to_string))
        };
        for m in &self.miswired_links {
            out.push((
                "miswired_link",
                format!("{} -- {} (expected {}; {})", m.a, m.b, expected(&m.a, &m.a_expected), expected(&m.b, &m.b_expected)),
            ));
        }
        for d in &self.degraded_links {
            let source = if d.expected_from == "file" { "expected" } else { "both ports support" };
            out.push(("degraded_link", format!("{} -- {}: {}, {source} {}", d.a, d.b, d.rate, d.expected_rate)));
        }
        out
    }

    /// The report as text: a summary line, then one line per difference
    /// under a heading per kind.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let n = self.differences();
        let _ = writeln!(
            out,
            "{}: {} nodes, {} links expected; {} nodes, {} links found",
            match n {
                0 => "cabling as expected".to_string(),
                1 => "1 difference".to_string(),
                n => format!("{n} differences"),
            },
            self.expected_nodes,
            self.expected_links,
            self.found_nodes,
            self.found_links
        );
        if self.incomplete {
            let _ = writeln!(out, "warning: SMPs were lost reading the fabric; what is missing may be there");
        }
        let mut heading = "";
        for (kind, line) in self.lines() {
            if kind != heading {
                heading = kind;
                let _ = writeln!(out, "{}:", kind.replace('_', " ") + "s");
            }
            let _ = writeln!(out, "  {line}");
        }
        out
    }
}

/// Compares the cabling found with the cabling expected (see the module
/// documentation).
pub fn check(expected: &Cabling, found: &Cabling) -> CablingReport {
    let describe = |guid: u64| -> String {
        expected
            .nodes
            .get(&guid)
            .or_else(|| found.nodes.get(&guid))
            .map_or_else(String::new, |n| n.description.clone())
    };
    let port = |(guid, port): End| PortRef { guid, port, description: describe(guid) };
    let node_ref = |n: &CablingNode, side: &Cabling| NodeRef {
        guid: n.guid,
        kind: kind_name(n.kind),
        description: n.description.clone(),
        links: side.cables.iter().filter(|c| c.a.0 == n.guid || c.b.0 == n.guid).count(),
    };
    let mut report = CablingReport {
        expected_nodes: expected.nodes.len(),
        expected_links: expected.cables.len(),
        found_nodes: found.nodes.len(),
        found_links: found.cables.len(),
        incomplete: false,
        ..Default::default()
    };
    report.missing_nodes =
        expected.nodes.values().filter(|n| !found.nodes.contains_key(&n.guid)).map(|n| node_ref(n, expected)).collect();
    report.unexpected_nodes =
        found.nodes.values().filter(|n| !expected.nodes.contains_key(&n.guid)).map(|n| node_ref(n, found)).collect();
    let gone: BTreeSet<u64> = report.missing_nodes.iter().map(|n| n.guid).collect();
    let new: BTreeSet<u64> = report.unexpected_nodes.iter().map(|n| n.guid).collect();
    let ordered = |c: &Cable| if c.b < c.a { (c.b, c.a) } else { (c.a, c.b) };

    let mut expected_cables: Vec<&Cable> = expected.cables.iter().collect();
    expected_cables.sort_by_key(|c| ordered(c));
    for e in expected_cables {
        let (a, b) = ordered(e);
        if gone.contains(&a.0) || gone.contains(&b.0) {
            continue;
        }
        if found.peer(a) == Some(b) {
            let Some(f) = found.cable_at(a) else { continue };
            let (want, from) = match (e.rate, f.supported) {
                (Some(r), _) => (r, "file"),
                (None, Some(s)) => (s, "ports"),
                (None, None) => continue,
            };
            if let Some(r) = f.rate {
                if r.width < want.width || r.speed < want.speed {
                    report.degraded_links.push(Degraded {
                        a: port(a),
                        b: port(b),
                        width: r.width,
                        expected_width: want.width,
                        speed: r.speed,
                        expected_speed: want.speed,
                        rate: r.to_string(),
                        expected_rate: want.to_string(),
                        expected_from: from,
                    });
                }
            }
        } else if found.peer(a).is_none() && found.peer(b).is_none() {
            report.missing_links.push(LinkRef { a: port(a), b: port(b) });
        }
        // Otherwise an end is cabled elsewhere: that cable is listed as
        // miswired below.
    }
    let mut found_cables: Vec<&Cable> = found.cables.iter().collect();
    found_cables.sort_by_key(|c| ordered(c));
    for f in found_cables {
        let (a, b) = ordered(f);
        if expected.peer(a) == Some(b) {
            continue;
        }
        let (ea, eb) = (expected.peer(a), expected.peer(b));
        if ea.is_none() && eb.is_none() {
            if new.contains(&a.0) || new.contains(&b.0) {
                // Listed with the node.
                continue;
            }
            report.extra_links.push(LinkRef { a: port(a), b: port(b) });
        } else {
            report.miswired_links.push(Miswired { a: port(a), b: port(b), a_expected: ea.map(port), b_expected: eb.map(port) });
        }
    }
    report.clean = report.is_clean();
    report
}

/// [`check`] against a fabric as discovery read it; `incomplete` is the
/// fabric's.
pub fn check_fabric(expected: &Cabling, found: &Fabric) -> CablingReport {
    let mut report = check(expected, &Cabling::from_fabric(found));
    report.incomplete = found.incomplete;
    report
}

/// The daemon's `expect_topology`: the file, compared after every heavy
/// sweep, each difference logged once (a warning when it appears, a note
/// when it is gone).
#[derive(Debug, Default)]
pub struct CablingWatch {
    /// The file loaded, with its modification time, and what it says.
    loaded: Option<(PathBuf, Option<std::time::SystemTime>, Cabling)>,
    /// The differences logged and still there.
    logged: BTreeSet<(&'static str, String)>,
    /// The last load error logged, not to log it every sweep.
    failed: Option<String>,
}

impl CablingWatch {
    /// Compares `fabric` with `file` (loaded again when it changed);
    /// `None` when there is no file, it does not load, or the fabric was
    /// read incompletely (a lost SMP is no missing cable).
    pub fn after_sweep(&mut self, file: Option<&Path>, fabric: &Fabric) -> Option<CablingReport> {
        let Some(file) = file else {
            self.loaded = None;
            self.logged.clear();
            return None;
        };
        let mtime = std::fs::metadata(file).and_then(|m| m.modified()).ok();
        let fresh = matches!(&self.loaded, Some((p, t, _)) if p == file && *t == mtime);
        if !fresh {
            match load_expected(file) {
                Ok(c) => {
                    tracing::info!(file = %file.display(), nodes = c.nodes().len(), links = c.cables().len(), "expected cabling loaded");
                    self.loaded = Some((file.to_path_buf(), mtime, c));
                    self.failed = None;
                }
                Err(e) => {
                    let why = e.to_string();
                    if self.failed.as_deref() != Some(why.as_str()) {
                        tracing::warn!("expect_topology not checked: {why}");
                        self.failed = Some(why);
                    }
                    self.loaded = None;
                    return None;
                }
            }
        }
        let (_, _, expected) = self.loaded.as_ref()?;
        if fabric.incomplete {
            tracing::debug!("cabling not compared: the sweep lost SMPs");
            return None;
        }
        let report = check_fabric(expected, fabric);
        let now: BTreeSet<(&'static str, String)> = report.lines().into_iter().collect();
        for (kind, line) in now.difference(&self.logged) {
            tracing::warn!(kind, "cabling: {} {line}", kind.replace('_', " "));
        }
        for (kind, line) in self.logged.difference(&now) {
            tracing::info!(kind, "cabling as expected again: {} {line} is gone", kind.replace('_', " "));
        }
        self.logged = now;
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_mad::port_info::link_speed;
    use sm_topology::model::{SPEED_DDR, SPEED_EDR, SPEED_FDR, SPEED_QDR, SPEED_SDR, SPEED_XDR};

    const QDR4: Rate = Rate { width: 4, speed: SPEED_QDR };

    /// Two switches (0x10, 0x20) joined on ports 1 and 2; hosts 0x1, 0x2
    /// on 0x10's port 3 and 0x20's port 3.
    fn expected(rate: Option<Rate>) -> Cabling {
        let mut c = Cabling::new();
        c.add_node(0x10, NodeKind::Switch, "leaf-a", 8);
        c.add_node(0x20, NodeKind::Switch, "leaf-b", 8);
        c.add_node(0x1, NodeKind::Ca, "host-1", 1);
        c.add_node(0x2, NodeKind::Ca, "host-2", 1);
        for (a, b) in [((0x10, 1), (0x20, 1)), ((0x10, 2), (0x20, 2)), ((0x10, 3), (0x1, 1)), ((0x20, 3), (0x2, 1))] {
            c.add_cable(Cable { a, b, rate, supported: None });
        }
        c
    }

    /// `expected` as found: every link at `QDR4`, supporting `QDR4`.
    fn found() -> Cabling {
        let mut c = expected(None);
        let cables: Vec<Cable> = c.cables().to_vec();
        for mut cable in cables {
            cable.rate = Some(QDR4);
            cable.supported = Some(QDR4);
            c.add_cable(cable);
        }
        c
    }

    fn remove(c: &mut Cabling, end: End) {
        let i = c.by_end[&end];
        c.remove_cable(i);
    }

    #[test]
    fn a_pristine_fabric_matches() {
        for rate in [None, Some(QDR4)] {
            let r = check(&expected(rate), &found());
            assert!(r.is_clean() && r.clean, "{}", r.render());
            assert_eq!(r.differences(), 0);
            assert_eq!((r.expected_nodes, r.expected_links, r.found_nodes, r.found_links), (4, 4, 4, 4));
            assert!(r.render().starts_with("cabling as expected"));
        }
    }

    #[test]
    fn a_link_removed_is_missing_with_both_ends_named() {
        let mut f = found();
        remove(&mut f, (0x10, 2));
        let r = check(&expected(None), &f);
        assert!(!r.is_clean());
        assert_eq!(r.counts()["missing_link"], 1);
        assert_eq!(r.differences(), 1, "{}", r.render());
        let l = &r.missing_links[0];
        assert_eq!((l.a.guid, l.a.port, l.a.description.as_str()), (0x10, 2, "leaf-a"));
        assert_eq!((l.b.guid, l.b.port, l.b.description.as_str()), (0x20, 2, "leaf-b"));
        let text = r.render();
        assert!(text.contains("missing links:\n  0x0000000000000010 \"leaf-a\" port 2 -- 0x0000000000000020 \"leaf-b\" port 2"), "{text}");
    }

    #[test]
    fn a_link_moved_to_another_port_is_miswired_once() {
        let mut f = found();
        remove(&mut f, (0x10, 2));
        f.add_cable(Cable { a: (0x10, 2), b: (0x20, 5), rate: Some(QDR4), supported: Some(QDR4) });
        let r = check(&expected(None), &f);
        assert_eq!(r.differences(), 1, "{}", r.render());
        let m = &r.miswired_links[0];
        assert_eq!(((m.a.guid, m.a.port), (m.b.guid, m.b.port)), ((0x10, 2), (0x20, 5)));
        assert_eq!(m.a_expected.as_ref().map(|p| (p.guid, p.port)), Some((0x20, 2)));
        assert_eq!(m.b_expected, None);
        assert!(
            r.render().contains(
                "(expected \"leaf-a\" port 2 -- 0x0000000000000020 \"leaf-b\" port 2; \"leaf-b\" port 5 -- nothing)"
            ),
            "{}",
            r.render()
        );
        // Two cables swapped: two miswired cables, nothing missing.
        let mut f = found();
        remove(&mut f, (0x10, 1));
        remove(&mut f, (0x10, 2));
        f.add_cable(Cable { a: (0x10, 1), b: (0x20, 2), rate: Some(QDR4), supported: Some(QDR4) });
        f.add_cable(Cable { a: (0x10, 2), b: (0x20, 1), rate: Some(QDR4), supported: Some(QDR4) });
        let r = check(&expected(None), &f);
        assert_eq!((r.miswired_links.len(), r.differences()), (2, 2), "{}", r.render());
    }

    #[test]
    fn a_node_missing_is_named_once_not_with_each_link() {
        let mut f = found();
        remove(&mut f, (0x2, 1));
        f.nodes.remove(&0x2);
        let r = check(&expected(None), &f);
        assert_eq!(r.differences(), 1, "{}", r.render());
        let n = &r.missing_nodes[0];
        assert_eq!((n.guid, n.kind, n.description.as_str(), n.links), (0x2, "CA", "host-2", 1));
        assert!(r.render().contains("missing nodes:\n  CA 0x0000000000000002 \"host-2\" (1 link)"), "{}", r.render());
    }

    #[test]
    fn an_extra_node_and_an_extra_link_are_named() {
        let mut f = found();
        f.add_node(0x3, NodeKind::Ca, "host-3", 1);
        f.add_cable(Cable { a: (0x20, 4), b: (0x3, 1), rate: Some(QDR4), supported: Some(QDR4) });
        let r = check(&expected(None), &f);
        assert_eq!(r.differences(), 1, "{}", r.render());
        assert_eq!((r.unexpected_nodes[0].guid, r.unexpected_nodes[0].description.as_str()), (0x3, "host-3"));
        // A cable between two expected switches on unused ports.
        let mut f = found();
        f.add_cable(Cable { a: (0x10, 7), b: (0x20, 7), rate: Some(QDR4), supported: Some(QDR4) });
        let r = check(&expected(None), &f);
        assert_eq!((r.extra_links.len(), r.differences()), (1, 1), "{}", r.render());
        assert_eq!((r.extra_links[0].a.port, r.extra_links[0].b.description.as_str()), (7, "leaf-b"));
    }

    #[test]
    fn a_link_at_1x_where_4x_is_expected_is_degraded() {
        let slow = Rate { width: 1, speed: SPEED_QDR };
        let mut f = found();
        f.add_cable(Cable { a: (0x10, 1), b: (0x20, 1), rate: Some(slow), supported: Some(QDR4) });
        // Against the file's rate, and without one against the ports'.
        for (rate, from) in [(Some(QDR4), "file"), (None, "ports")] {
            let r = check(&expected(rate), &f);
            assert_eq!(r.differences(), 1, "{}", r.render());
            let d = &r.degraded_links[0];
            assert_eq!((d.width, d.expected_width, d.expected_from), (1, 4, from));
            assert_eq!((d.rate.as_str(), d.expected_rate.as_str()), ("1xQDR", "4xQDR"));
            assert!(r.render().contains("degraded links:\n  0x0000000000000010 \"leaf-a\" port 1 -- 0x0000000000000020 \"leaf-b\" port 1: 1xQDR"));
        }
        // Slower lanes too; a faster link than the file says is no fault.
        let mut f = found();
        f.add_cable(Cable { a: (0x10, 1), b: (0x20, 1), rate: Some(Rate { width: 4, speed: SPEED_DDR }), supported: None });
        assert_eq!(check(&expected(Some(QDR4)), &f).degraded_links.len(), 1);
        assert!(check(&expected(Some(Rate { width: 1, speed: SPEED_SDR })), &found()).is_clean());
    }

    #[test]
    fn supported_rates_come_from_both_ports() {
        let mut a = PortInfoRepr {
            link_width_supported: link_width::W1X | link_width::W4X,
            link_width_enabled: link_width::W1X | link_width::W4X,
            link_speed_supported: link_speed::SDR | link_speed::QDR,
            link_speed_enabled: link_speed::SDR | link_speed::QDR,
            link_speed_ext_supported: 0b11,
            link_speed_ext_enabled: 0b11,
            ..PortInfoRepr::default()
        };
        let mut b = a;
        let ext = SpeedCaps { ext: true, ext2: false };
        let all = SpeedCaps::ALL;
        assert_eq!(best_common(&a, ext, &b, ext), Rate { width: 4, speed: SPEED_EDR });
        assert_eq!(best_common(&a, ext, &b, SpeedCaps::default()), QDR4, "extended speeds need both ends");
        // XDR counts where both ends support it and have the group.
        a.link_speed_ext2_supported = 1;
        b.link_speed_ext2_supported = 1;
        assert_eq!(best_common(&a, all, &b, all), Rate { width: 4, speed: SPEED_XDR });
        assert_eq!(best_common(&a, all, &b, ext), Rate { width: 4, speed: SPEED_EDR });
        b.link_speed_ext2_supported = 0;
        assert_eq!(best_common(&a, all, &b, all), Rate { width: 4, speed: SPEED_EDR });
        b.link_width_enabled = link_width::W1X;
        b.link_speed_ext_enabled = 0b01;
        assert_eq!(best_common(&a, ext, &b, ext), Rate { width: 1, speed: SPEED_FDR });
        a.link_width_active = link_width::W4X;
        a.link_speed_active = link_speed::QDR;
        a.link_speed_ext_active = 2;
        assert_eq!(active(&a, ext), Rate { width: 4, speed: SPEED_EDR });
        a.link_speed_ext2_active = 1;
        assert_eq!(active(&a, all), Rate { width: 4, speed: SPEED_XDR });
    }

    #[test]
    fn the_report_serializes_with_hex_guids() {
        let mut f = found();
        remove(&mut f, (0x10, 2));
        let v = serde_json::to_value(check(&expected(None), &f)).expect("json");
        assert_eq!(v["clean"], false);
        assert_eq!(v["missing_links"][0]["a"]["guid"], "0x0000000000000010");
        assert_eq!(v["missing_links"][0]["b"]["description"], "leaf-b");
    }
}
