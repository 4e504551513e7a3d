//! The in-memory topology: nodes, links, link rates and structural checks.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use sm_abi::NodeKind;

use crate::error::TopologyError;

/// SDR lane speed, in the 2.5 Gb/s unit of [`sm_abi::Port::speed`].
pub const SPEED_SDR: u8 = 1;
/// DDR lane speed.
pub const SPEED_DDR: u8 = 2;
/// QDR lane speed (also what FDR10 is recorded as: 10.3 Gb/s is nearest to 4 units).
pub const SPEED_QDR: u8 = 4;
/// FDR lane speed: 14 Gb/s rounds to 6 units.
pub const SPEED_FDR: u8 = 6;
/// EDR lane speed: 25 Gb/s.
pub const SPEED_EDR: u8 = 10;
/// HDR lane speed: 50 Gb/s.
pub const SPEED_HDR: u8 = 20;
/// NDR lane speed: 100 Gb/s.
pub const SPEED_NDR: u8 = 40;
/// XDR lane speed: 200 Gb/s.
pub const SPEED_XDR: u8 = 80;

/// Width of a link whose file says nothing about it.
pub const DEFAULT_WIDTH: u8 = 4;
/// Speed of a link whose file says nothing about it. ibsim itself would
/// bring such a link up at SDR; QDR is what a fabric built today runs at as
/// a minimum, and [`crate::emit`] always writes the rate so ibsim agrees.
pub const DEFAULT_SPEED: u8 = SPEED_QDR;

const SPEED_NAMES: [(&str, u8); 9] = [
    ("SDR", SPEED_SDR),
    ("DDR", SPEED_DDR),
    ("QDR", SPEED_QDR),
    ("FDR10", SPEED_QDR),
    ("FDR", SPEED_FDR),
    ("EDR", SPEED_EDR),
    ("HDR", SPEED_HDR),
    ("NDR", SPEED_NDR),
    ("XDR", SPEED_XDR),
];

/// Speed code for an ibnetdiscover speed name (`"QDR"`, `"FDR"`, ...).
pub fn speed_from_name(name: &str) -> Option<u8> {
    SPEED_NAMES.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// The ibnetdiscover name of a speed code, if it is one of the standard ones.
pub fn speed_name(speed: u8) -> Option<&'static str> {
    // FDR10 shares QDR's code; the first entry wins so 4 reads back as QDR.
    SPEED_NAMES.iter().find(|&&(_, s)| s == speed).map(|&(n, _)| n)
}

/// Link widths InfiniBand defines, as lane counts.
pub fn is_valid_width(width: u8) -> bool {
    matches!(width, 1 | 2 | 4 | 8 | 12)
}

/// `4xQDR` style rendering; unknown speeds render as `4x?6`.
pub fn rate_string(width: u8, speed: u8) -> String {
    match speed_name(speed) {
        Some(n) => format!("{width}x{n}"),
        None => format!("{width}x?{speed}"),
    }
}

/// Human name of a node kind, as used in messages.
pub fn kind_name(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::Switch => "switch",
        NodeKind::Ca => "CA",
        NodeKind::Router => "router",
        _ => "node of unknown kind",
    }
}

/// One switch, channel adapter or router.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopoNode {
    /// Node type.
    pub kind: NodeKind,
    /// The quoted id of the node in the file, e.g. `S-0008f10400411a08` or `sw1`.
    pub name: String,
    /// NodeDescription.
    pub desc: String,
    /// Number of external ports (1..=255).
    pub num_ports: u8,
    /// NodeGUID.
    pub node_guid: u64,
    /// SystemImageGUID (equal to the node GUID when the file gives none,
    /// which is what ibsim reports too).
    pub sys_guid: u64,
    /// Port GUIDs indexed by port number, `num_ports + 1` entries. For a
    /// switch every entry is the switch's (port 0) port GUID; for a CA or
    /// router entry 0 is 0 because such nodes have no port 0.
    pub port_guids: Vec<u64>,
}

impl TopoNode {
    /// True for switches.
    pub fn is_switch(&self) -> bool {
        self.kind == NodeKind::Switch
    }

    /// GUID of port `port`, 0 when out of range.
    pub fn port_guid(&self, port: u8) -> u64 {
        self.port_guids.get(port as usize).copied().unwrap_or(0)
    }

    /// Port GUIDs as ibsim and real hardware lay them out: a switch's ports
    /// all share one GUID, a CA's port `p` is `node_guid + p`.
    pub fn default_port_guids(kind: NodeKind, node_guid: u64, num_ports: u8) -> Vec<u64> {
        (0..=num_ports as u64)
            .map(|p| match kind {
                NodeKind::Switch => node_guid,
                _ if p == 0 => 0,
                _ => node_guid.wrapping_add(p),
            })
            .collect()
    }
}

/// A cable between two ports. Ends are `(node index, port number)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopoLink {
    /// One end.
    pub a: (usize, u8),
    /// The other end.
    pub b: (usize, u8),
    /// Active width in lanes (1, 2, 4, 8, 12).
    pub width: u8,
    /// Active lane speed in 2.5 Gb/s units (see the `SPEED_*` constants).
    pub speed: u8,
}

impl TopoLink {
    /// A link at the default rate (4x QDR).
    pub fn new(a: (usize, u8), b: (usize, u8)) -> Self {
        TopoLink { a, b, width: DEFAULT_WIDTH, speed: DEFAULT_SPEED }
    }

    /// The end opposite `end`, if `end` is one of this link's ends.
    pub fn other_end(&self, end: (usize, u8)) -> Option<(usize, u8)> {
        if self.a == end {
            Some(self.b)
        } else if self.b == end {
            Some(self.a)
        } else {
            None
        }
    }

    /// True when one end of the link is on `node`.
    pub fn touches(&self, node: usize) -> bool {
        self.a.0 == node || self.b.0 == node
    }
}

/// A whole fabric.
///
/// Node order is meaningful: it is the order of records in a file, the
/// order [`crate::lids::snapshot`] hands out LIDs in, and node indices in
/// links and snapshots. Links are kept in canonical order (see
/// [`Topology::canonicalize`]) by the parser and the generators, so two
/// descriptions of the same fabric compare equal with `==`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// All nodes.
    pub nodes: Vec<TopoNode>,
    /// All links.
    pub links: Vec<TopoLink>,
}

impl Topology {
    /// An empty topology.
    pub fn new() -> Self {
        Topology::default()
    }

    /// Index of the node whose file id is `name`.
    pub fn find_node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Index of the node with this node GUID.
    pub fn find_node_by_guid(&self, guid: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.node_guid == guid)
    }

    /// Index of the first node with this description.
    pub fn find_node_by_desc(&self, desc: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.desc == desc)
    }

    /// The links that have an end on `node`.
    pub fn links_of(&self, node: usize) -> impl Iterator<Item = &TopoLink> + '_ {
        self.links.iter().filter(move |l| l.touches(node))
    }

    /// The port at the other end of `(node, port)`'s cable.
    pub fn peer(&self, node: usize, port: u8) -> Option<(usize, u8)> {
        self.links.iter().find_map(|l| l.other_end((node, port)))
    }

    /// For every node, for every port number, the index of the link on it.
    /// Out-of-range ends are skipped (see [`Topology::validate`]).
    pub fn port_links(&self) -> Vec<Vec<Option<usize>>> {
        let mut table: Vec<Vec<Option<usize>>> =
            self.nodes.iter().map(|n| vec![None; n.num_ports as usize + 1]).collect();
        for (i, l) in self.links.iter().enumerate() {
            for (node, port) in [l.a, l.b] {
                if let Some(slot) = table.get_mut(node).and_then(|t| t.get_mut(port as usize)) {
                    *slot = Some(i);
                }
            }
        }
        table
    }

    /// Every CA with a cable, on its first cabled port, in file order:
    /// where an SM (the first) or a host of the fabric sits.
    pub fn cabled_cas(&self) -> Vec<(usize, u8)> {
        let links = self.port_links();
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Ca)
            .filter_map(|(i, n)| {
                (1..=n.num_ports).find(|&p| links[i].get(usize::from(p)).is_some_and(Option::is_some)).map(|p| (i, p))
            })
            .collect()
    }

    /// Indices of all switches.
    pub fn switches(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.iter().enumerate().filter(|(_, n)| n.is_switch()).map(|(i, _)| i)
    }

    /// Indices of all CAs and routers.
    pub fn end_nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.iter().enumerate().filter(|(_, n)| !n.is_switch()).map(|(i, _)| i)
    }

    /// Number of switches.
    pub fn num_switches(&self) -> usize {
        self.switches().count()
    }

    /// Put every link's lower end (by node index, then port) in `a` and sort
    /// the links by `a`. Writing and re-reading a file yields this order,
    /// which is why the generators and the parser both produce it.
    pub fn canonicalize(&mut self) {
        for l in &mut self.links {
            if l.b < l.a {
                std::mem::swap(&mut l.a, &mut l.b);
            }
        }
        self.links.sort_by_key(|l| (l.a, l.b));
    }

    /// Nodes grouped by connectivity over links, each group sorted, groups
    /// ordered by their lowest node index. Isolated nodes form groups of one.
    pub fn connected_components(&self) -> Vec<Vec<usize>> {
        let n = self.nodes.len();
        let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
        for l in &self.links {
            if l.a.0 < n && l.b.0 < n {
                adj[l.a.0].push(l.b.0);
                adj[l.b.0].push(l.a.0);
            }
        }
        let mut seen = vec![false; n];
        let mut out = Vec::new();
        for start in 0..n {
            if seen[start] {
                continue;
            }
            seen[start] = true;
            let mut comp = vec![start];
            let mut stack = vec![start];
            while let Some(v) = stack.pop() {
                for &w in &adj[v] {
                    if !seen[w] {
                        seen[w] = true;
                        comp.push(w);
                        stack.push(w);
                    }
                }
            }
            comp.sort_unstable();
            out.push(comp);
        }
        out
    }

    /// True when every node can reach every other (an empty topology is
    /// connected).
    pub fn is_connected(&self) -> bool {
        self.connected_components().len() <= 1
    }

    /// Check the structural rules every consumer of a topology relies on:
    ///
    /// * every node has 1..=255 ports and `num_ports + 1` port GUIDs, a
    ///   switch's port GUIDs are all equal;
    /// * names are unique and non-empty; names and descriptions are
    ///   non-empty and contain neither `"` nor control characters other
    ///   than tab (the file format cannot carry them, and ibsim replaces an
    ///   empty description by the node id);
    /// * node GUIDs are non-zero and unique; port GUIDs are unique;
    /// * link ends name existing nodes and ports within `1..=num_ports`, no
    ///   port carries more than one link, no port is linked to itself;
    /// * link widths are 1, 2, 4, 8 or 12 lanes and speeds are one of the
    ///   `SPEED_*` codes.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let bad = |m: String| Err(TopologyError::Invalid(m));
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut node_guids: HashMap<u64, usize> = HashMap::new();
        let mut port_guids: HashMap<u64, (usize, u8)> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let what = format!("{} \"{}\"", kind_name(n.kind), n.name);
            if n.name.is_empty() {
                return bad(format!("node {i} has an empty name"));
            }
            if let Some(c) = n.name.chars().find(|&c| unwritable(c)) {
                return bad(format!("{what}: name contains the character {c:?}"));
            }
            if n.desc.is_empty() {
                return bad(format!("{what} has an empty description"));
            }
            if let Some(c) = n.desc.chars().find(|&c| unwritable(c)) {
                return bad(format!("{what}: description contains the character {c:?}"));
            }
            if let Some(prev) = names.insert(&n.name, i) {
                return bad(format!("nodes {prev} and {i} are both named \"{}\"", n.name));
            }
            if n.num_ports == 0 {
                return bad(format!("{what} has no ports"));
            }
            if n.node_guid == 0 {
                return bad(format!("{what} has node GUID 0"));
            }
            if let Some(prev) = node_guids.insert(n.node_guid, i) {
                return bad(format!(
                    "{what} has node GUID {:#018x}, already used by \"{}\"",
                    n.node_guid, self.nodes[prev].name
                ));
            }
            if n.port_guids.len() != n.num_ports as usize + 1 {
                return bad(format!(
                    "{what} has {} port GUIDs for {} ports (expected one per port plus port 0)",
                    n.port_guids.len(),
                    n.num_ports
                ));
            }
            let own: Vec<(u8, u64)> = if n.is_switch() {
                if n.port_guids.iter().any(|&g| g != n.port_guids[0]) {
                    return bad(format!("{what}: all ports of a switch must share one port GUID"));
                }
                vec![(0, n.port_guids[0])]
            } else {
                (1..=n.num_ports).map(|p| (p, n.port_guids[p as usize])).collect()
            };
            for (p, g) in own {
                if g == 0 {
                    return bad(format!("{what}: port {p} has GUID 0"));
                }
                if let Some((pn, pp)) = port_guids.insert(g, (i, p)) {
                    return bad(format!(
                        "{what}: port {p} GUID {g:#018x} is also the GUID of port {pp} of \"{}\"",
                        self.nodes[pn].name
                    ));
                }
            }
        }
        let mut used: HashMap<(usize, u8), usize> = HashMap::new();
        for (li, l) in self.links.iter().enumerate() {
            for (node, port) in [l.a, l.b] {
                let Some(n) = self.nodes.get(node) else {
                    return bad(format!("link {li} refers to node {node}, which does not exist"));
                };
                if port == 0 || port > n.num_ports {
                    return bad(format!(
                        "link {li}: port {port} out of range for {} \"{}\" ({} ports)",
                        kind_name(n.kind),
                        n.name,
                        n.num_ports
                    ));
                }
                if let Some(prev) = used.insert((node, port), li) {
                    return bad(format!(
                        "port {port} of \"{}\" is used by links {prev} and {li}",
                        n.name
                    ));
                }
            }
            if l.a == l.b {
                return bad(format!(
                    "link {li}: port {} of \"{}\" is linked to itself",
                    l.a.1, self.nodes[l.a.0].name
                ));
            }
            if !is_valid_width(l.width) {
                return bad(format!("link {li} has width {} (expected 1, 2, 4, 8 or 12)", l.width));
            }
            if speed_name(l.speed).is_none() {
                return bad(format!("link {li} has unknown speed code {}", l.speed));
            }
        }
        Ok(())
    }

    /// Differences between two descriptions of the same fabric, matching
    /// nodes by node GUID (the only identity ibnetdiscover and a file share;
    /// node order and ids may differ). Compares kind, port count,
    /// description, system and port GUIDs, and the links with their rates.
    /// Empty when they describe the same fabric.
    pub fn differences_by_guid(&self, other: &Topology) -> Vec<String> {
        let mut out = Vec::new();
        let mine: BTreeMap<u64, &TopoNode> = self.nodes.iter().map(|n| (n.node_guid, n)).collect();
        let theirs: BTreeMap<u64, &TopoNode> =
            other.nodes.iter().map(|n| (n.node_guid, n)).collect();
        for (g, n) in &mine {
            let Some(o) = theirs.get(g) else {
                out.push(format!("node {g:#018x} (\"{}\") is missing from the other side", n.desc));
                continue;
            };
            if n.kind != o.kind {
                out.push(format!("node {g:#018x}: kind {:?} vs {:?}", n.kind, o.kind));
            }
            if n.num_ports != o.num_ports {
                out.push(format!("node {g:#018x}: {} ports vs {}", n.num_ports, o.num_ports));
            }
            if n.desc != o.desc {
                out.push(format!("node {g:#018x}: description {:?} vs {:?}", n.desc, o.desc));
            }
            if n.sys_guid != o.sys_guid {
                out.push(format!(
                    "node {g:#018x}: system GUID {:#x} vs {:#x}",
                    n.sys_guid, o.sys_guid
                ));
            }
            if n.port_guids != o.port_guids {
                out.push(format!("node {g:#018x}: port GUIDs differ"));
            }
        }
        for (g, o) in &theirs {
            if !mine.contains_key(g) {
                out.push(format!("node {g:#018x} (\"{}\") is only on the other side", o.desc));
            }
        }
        // ((guid, port), (guid, port), width, speed), lower end first.
        type LinkKey = ((u64, u8), (u64, u8), u8, u8);
        let keyed = |t: &Topology| -> BTreeSet<LinkKey> {
            t.links
                .iter()
                .filter_map(|l| {
                    let a = (t.nodes.get(l.a.0)?.node_guid, l.a.1);
                    let b = (t.nodes.get(l.b.0)?.node_guid, l.b.1);
                    Some((a.min(b), a.max(b), l.width, l.speed))
                })
                .collect()
        };
        let (la, lb) = (keyed(self), keyed(other));
        for l in la.difference(&lb) {
            out.push(format!(
                "link {:#x}[{}] -- {:#x}[{}] {} is missing from the other side",
                l.0 .0,
                l.0 .1,
                l.1 .0,
                l.1 .1,
                rate_string(l.2, l.3)
            ));
        }
        for l in lb.difference(&la) {
            out.push(format!(
                "link {:#x}[{}] -- {:#x}[{}] {} is only on the other side",
                l.0 .0,
                l.0 .1,
                l.1 .0,
                l.1 .1,
                rate_string(l.2, l.3)
            ));
        }
        out
    }

    /// Nodes whose links reach other nodes, as a set of node indices
    /// adjacent to `node` (parallel links collapse).
    pub fn neighbors(&self, node: usize) -> Vec<usize> {
        let set: HashSet<usize> =
            self.links_of(node).filter_map(|l| l.other_end_node(node)).collect();
        let mut v: Vec<usize> = set.into_iter().collect();
        v.sort_unstable();
        v
    }
}

impl TopoLink {
    /// The node at the other end from `node` (for a link between two ports
    /// of the same node, that node).
    pub fn other_end_node(&self, node: usize) -> Option<usize> {
        if self.a.0 == node {
            Some(self.b.0)
        } else if self.b.0 == node {
            Some(self.a.0)
        } else {
            None
        }
    }
}

/// True for characters a topology file cannot carry inside a quoted id or
/// description: the quote itself and line-breaking control characters.
/// Tabs pass; ibsim and ibnetdiscover keep them.
pub fn unwritable(c: char) -> bool {
    c == '"' || (c.is_control() && c != '\t')
}

/// Free-function form of [`Topology::connected_components`].
pub fn connected_components(topo: &Topology) -> Vec<Vec<usize>> {
    topo.connected_components()
}
