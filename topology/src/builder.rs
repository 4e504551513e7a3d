//! Incremental construction of topologies with deterministic GUIDs, used by
//! the generators and by tests that need a hand-made fabric.

use sm_abi::NodeKind;

use crate::error::TopologyError;
use crate::model::{kind_name, TopoLink, TopoNode, Topology, DEFAULT_SPEED, DEFAULT_WIDTH};

/// Node GUID of the first built switch; switch `i` gets `SWITCH_GUID_BASE + i`.
pub const SWITCH_GUID_BASE: u64 = 0x0002_c900_0000_0000;
/// Node GUID of the first built CA; CA `j` gets `CA_GUID_BASE + (j << 8)`,
/// leaving room for its port GUIDs `node GUID + port` (as real HCAs and
/// ibsim number them).
pub const CA_GUID_BASE: u64 = 0x0002_c901_0000_0000;
/// Node GUID of the first built router, numbered like CAs.
pub const ROUTER_GUID_BASE: u64 = 0x0002_c902_0000_0000;

/// Node GUID the builder gives its `i`-th switch.
pub fn switch_guid(i: usize) -> u64 {
    SWITCH_GUID_BASE + i as u64
}

/// Node GUID the builder gives its `j`-th CA.
pub fn ca_guid(j: usize) -> u64 {
    CA_GUID_BASE + ((j as u64) << 8)
}

/// Node GUID the builder gives its `j`-th router.
pub fn router_guid(j: usize) -> u64 {
    ROUTER_GUID_BASE + ((j as u64) << 8)
}

/// The ibnetdiscover id for a node: `S-`, `H-` or `R-` and the GUID in 16
/// hex digits. Using it as the id makes ibnetdiscover's output of a
/// generated fabric name nodes exactly as the generator did.
pub fn ibnetdiscover_id(kind: NodeKind, guid: u64) -> String {
    let letter = match kind {
        NodeKind::Switch => 'S',
        NodeKind::Ca => 'H',
        NodeKind::Router => 'R',
        _ => '?',
    };
    format!("{letter}-{guid:016x}")
}

/// Builds a [`Topology`] node by node and link by link.
///
/// Nodes get ibnetdiscover-style ids and GUIDs from per-kind counters (see
/// [`switch_guid`], [`ca_guid`]); system image GUIDs equal node GUIDs.
#[derive(Debug, Clone)]
pub struct TopologyBuilder {
    topo: Topology,
    used: Vec<Vec<bool>>,
    counts: [usize; 3],
    width: u8,
    speed: u8,
}

impl Default for TopologyBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl TopologyBuilder {
    /// An empty builder whose links run at 4x QDR.
    pub fn new() -> Self {
        TopologyBuilder {
            topo: Topology::new(),
            used: Vec::new(),
            counts: [0; 3],
            width: DEFAULT_WIDTH,
            speed: DEFAULT_SPEED,
        }
    }

    /// Set the rate of links added from now on.
    pub fn set_rate(&mut self, width: u8, speed: u8) -> &mut Self {
        self.width = width;
        self.speed = speed;
        self
    }

    /// Add a switch; returns its node index.
    pub fn add_switch(
        &mut self,
        desc: impl Into<String>,
        num_ports: usize,
    ) -> Result<usize, TopologyError> {
        self.add(NodeKind::Switch, desc.into(), num_ports)
    }

    /// Add a channel adapter; returns its node index.
    pub fn add_ca(
        &mut self,
        desc: impl Into<String>,
        num_ports: usize,
    ) -> Result<usize, TopologyError> {
        self.add(NodeKind::Ca, desc.into(), num_ports)
    }

    /// Add a router; returns its node index.
    pub fn add_router(
        &mut self,
        desc: impl Into<String>,
        num_ports: usize,
    ) -> Result<usize, TopologyError> {
        self.add(NodeKind::Router, desc.into(), num_ports)
    }

    fn add(
        &mut self,
        kind: NodeKind,
        desc: String,
        num_ports: usize,
    ) -> Result<usize, TopologyError> {
        if num_ports == 0 || num_ports > 255 {
            return Err(TopologyError::Generator(format!(
                "{} \"{desc}\" would have {num_ports} ports (1-255 possible)",
                kind_name(kind)
            )));
        }
        let slot = match kind {
            NodeKind::Switch => 0,
            NodeKind::Ca => 1,
            // The builder only makes the three kinds it has counters for.
            _ => 2,
        };
        let j = self.counts[slot];
        self.counts[slot] += 1;
        let guid = match kind {
            NodeKind::Switch => switch_guid(j),
            NodeKind::Ca => ca_guid(j),
            _ => router_guid(j),
        };
        let num_ports = num_ports as u8;
        self.topo.nodes.push(TopoNode {
            kind,
            name: ibnetdiscover_id(kind, guid),
            desc,
            num_ports,
            node_guid: guid,
            sys_guid: guid,
            port_guids: TopoNode::default_port_guids(kind, guid, num_ports),
        });
        self.used.push(vec![false; num_ports as usize + 1]);
        Ok(self.topo.nodes.len() - 1)
    }

    /// Number of nodes so far.
    pub fn len(&self) -> usize {
        self.topo.nodes.len()
    }

    /// True when no node was added yet.
    pub fn is_empty(&self) -> bool {
        self.topo.nodes.is_empty()
    }

    /// The nodes added so far.
    pub fn nodes(&self) -> &[TopoNode] {
        &self.topo.nodes
    }

    /// True when `port` of `node` exists and carries no link yet.
    pub fn is_free(&self, node: usize, port: u8) -> bool {
        port != 0 && self.used.get(node).and_then(|u| u.get(port as usize)).is_some_and(|u| !u)
    }

    /// Lowest free port of `node` in `range` (inclusive).
    pub fn free_port_in(&self, node: usize, range: std::ops::RangeInclusive<u8>) -> Option<u8> {
        range.into_iter().find(|&p| self.is_free(node, p))
    }

    /// Connect two ports at the builder's current rate.
    pub fn link(&mut self, a: (usize, u8), b: (usize, u8)) -> Result<(), TopologyError> {
        for (node, port) in [a, b] {
            let Some(n) = self.topo.nodes.get(node) else {
                return Err(TopologyError::Generator(format!("no node {node}")));
            };
            if port == 0 || port > n.num_ports {
                return Err(TopologyError::Generator(format!(
                    "port {port} out of range for {} \"{}\" ({} ports)",
                    kind_name(n.kind),
                    n.desc,
                    n.num_ports
                )));
            }
            if !self.is_free(node, port) {
                return Err(TopologyError::Generator(format!(
                    "port {port} of \"{}\" is already linked",
                    n.desc
                )));
            }
        }
        if a == b {
            return Err(TopologyError::Generator("a port cannot be linked to itself".into()));
        }
        self.used[a.0][a.1 as usize] = true;
        self.used[b.0][b.1 as usize] = true;
        self.topo.links.push(TopoLink { a, b, width: self.width, speed: self.speed });
        Ok(())
    }

    /// The topology, links in canonical order, validated.
    pub fn finish(mut self) -> Result<Topology, TopologyError> {
        self.topo.canonicalize();
        self.topo.validate()?;
        Ok(self.topo)
    }
}
