//! # sm-model — the fabric as the SM knows it
//!
//! [`Fabric`]: the nodes and ports discovery found, their PortInfo and
//! SwitchInfo as last read or written, the cables between them and the
//! directed route to each. No I/O: discovery (sm-core) fills it, LID
//! assignment, programming, the SA, partitions, multicast, dumps and the
//! performance manager read it, and [`Fabric::snapshot`] turns it into
//! the flat [`FabricSnapshot`] the routing engines are given.

pub mod text;

pub use text::{escaped, Escaped};

use std::collections::HashMap;
use std::sync::Arc;

use sm_abi::abi_stable::std_types::{RString, RVec};
use sm_abi::{FabricSnapshot, NodeKind, Port, PortState as AbiPortState, NONE};
use sm_mad::port_info::link_width;
use sm_mad::speed::{LaneSpeed, SpeedCaps};
use sm_mad::{NodeInfoRepr, NodeType, PortInfoRepr, PortState, SwitchInfoRepr};
use sm_topology::{TopoLink, TopoNode, Topology};

/// One port as discovered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FabricPort {
    /// Port GUID (a switch's ports all carry port 0's).
    pub guid: u64,
    /// PortInfo as last read or set; `None` when the port was never reached
    /// (a CA port without a cable) or did not answer.
    pub info: Option<PortInfoRepr>,
    /// Node index and port number at the other end of the cable.
    pub peer: Option<(usize, u8)>,
    /// The directed route on which this port's PortInfo is read and set:
    /// the node's path for a switch, for a CA port the path that enters
    /// the CA by this port (a CA manages each port through itself).
    pub path: Option<DrPath>,
}

/// `path`, then out by `port`.
pub fn extended(path: &[u8], port: u8) -> DrPath {
    let mut longer = Vec::with_capacity(path.len() + 1);
    longer.extend_from_slice(path);
    longer.push(port);
    longer.into()
}

/// A directed route (the ports taken from the SM's node). Shared, not
/// copied: a switch's ports all take its own route, and a fabric is kept
/// and copied whole at every sweep.
pub type DrPath = Arc<[u8]>;

/// One node as discovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricNode {
    /// NodeInfo.NodeGUID: the identity by which a node reached twice is
    /// recognised.
    pub guid: u64,
    /// NodeInfo.SystemImageGUID.
    pub system_guid: u64,
    /// Switch, CA or router.
    pub kind: NodeKind,
    /// NodeInfo.NumPorts.
    pub num_ports: u8,
    /// NodeInfo.PartitionCap: P_Key table entries of each end port.
    pub partition_cap: u16,
    /// NodeDescription (empty if it did not answer).
    pub description: String,
    /// The shortest directed route found to the node.
    pub path: DrPath,
    /// Ports `0..=num_ports`, by port number.
    pub ports: Vec<FabricPort>,
    /// SwitchInfo of a switch.
    pub switch_info: Option<SwitchInfoRepr>,
}

impl FabricNode {
    /// A node as its NodeInfo says, reached along `path`, with `ports`;
    /// its description and SwitchInfo not read yet.
    pub fn from_node_info(info: &NodeInfoRepr, path: DrPath, ports: Vec<FabricPort>) -> Self {
        FabricNode {
            guid: info.node_guid,
            system_guid: info.system_image_guid,
            kind: node_kind(info.node_type),
            num_ports: info.num_ports,
            partition_cap: info.partition_cap,
            description: String::new(),
            path,
            ports,
            switch_info: None,
        }
    }

    /// Whether the node is a switch.
    pub fn is_switch(&self) -> bool {
        self.kind == NodeKind::Switch
    }

    /// The port that holds the node's LIDs: port 0 of a switch, `port`
    /// itself on a CA or router.
    pub fn address_port(&self, port: u8) -> u8 {
        if self.is_switch() {
            0
        } else {
            port
        }
    }

    /// Which speed groups of `port`'s PortInfo are valid: its capability
    /// masks, or on a switch those of port 0 (IBA: a switch says them
    /// there for all its ports). Every group when they were not read.
    pub fn speed_caps(&self, port: u8) -> SpeedCaps {
        let holder = if self.is_switch() { 0 } else { usize::from(port) };
        self.ports.get(holder).and_then(|p| p.info.as_ref()).map_or(SpeedCaps::ALL, SpeedCaps::of)
    }

    /// The active lane speed of `port`, from whichever speed group says it.
    pub fn active_speed(&self, port: u8) -> Option<LaneSpeed> {
        let info = self.ports.get(usize::from(port))?.info.as_ref()?;
        sm_mad::speed::active(info, self.speed_caps(port))
    }

    /// `port`'s active link as infiniband-diags name it and its rate:
    /// `4X NDR (400 Gb/s)`; `None` when its PortInfo was not read.
    pub fn link_description(&self, port: u8) -> Option<String> {
        let info = self.ports.get(usize::from(port))?.info.as_ref()?;
        Some(sm_mad::speed::describe_active(info, self.speed_caps(port)))
    }
}

/// The core model of the fabric, as discovery found it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fabric {
    /// Nodes in discovery order; the SM's node is node 0. Shared, copied
    /// on write ([`Fabric::node_mut`]): a sweep keeps several versions of
    /// the fabric (the last one, memory, the model an incremental sweep
    /// reads into) that differ in a few nodes, and a deep copy of them
    /// all was most of a host reboot's cost.
    pub nodes: Vec<Arc<FabricNode>>,
    /// The SM's port on node 0 (0 when the SM runs on a switch).
    pub sm_port: u8,
    /// Whether the sweep that found this fabric missed something (SMPs
    /// lost, nodes or links kept from memory, programming that failed):
    /// the light sweep then asks for another heavy sweep.
    pub incomplete: bool,
}

impl Fabric {
    /// Node `i` to change: copied first if another fabric shares it.
    pub fn node_mut(&mut self, i: usize) -> &mut FabricNode {
        Arc::make_mut(&mut self.nodes[i])
    }

    /// Index of the node with `guid`. A scan: for more than a few
    /// lookups, take [`Self::index_by_guid`] once.
    pub fn find(&self, guid: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.guid == guid)
    }

    /// Node GUID → index, for every node (the first, should a GUID be
    /// read twice, as [`Self::find`] answers).
    pub fn index_by_guid(&self) -> HashMap<u64, usize> {
        let mut index = HashMap::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.iter().enumerate() {
            index.entry(n.guid).or_insert(i);
        }
        index
    }

    /// Links, each once, lower (node, port) end first.
    pub fn links(&self) -> Vec<((usize, u8), (usize, u8))> {
        let mut out = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for (p, port) in n.ports.iter().enumerate() {
                if let Some(peer) = port.peer {
                    let me = (i, p as u8);
                    if me < peer {
                        out.push((me, peer));
                    }
                }
            }
        }
        out
    }

    /// The flat snapshot engines route, with the LIDs the ports hold now.
    /// Layout as the offline path builds it: node `i` is node `i` here,
    /// every node has a port-0 slot, unlinked ports are Down with width
    /// and speed 0. `lmc` is the subnet's.
    pub fn snapshot(&self, lmc: u8) -> FabricSnapshot {
        let mut nodes = RVec::with_capacity(self.nodes.len());
        let mut ports: Vec<Port> = Vec::new();
        let mut first_port = Vec::with_capacity(self.nodes.len());
        let mut next = 0u32;
        for n in &self.nodes {
            first_port.push(next);
            nodes.push(sm_abi::Node {
                guid: n.guid,
                system_guid: n.system_guid,
                kind: n.kind,
                num_ports: n.num_ports,
                first_port: next,
                description: RString::from(n.description.as_str()),
            });
            next += u32::from(n.num_ports) + 1;
        }
        let mut max_lid = 0u32;
        for (i, n) in self.nodes.iter().enumerate() {
            for (p, port) in n.ports.iter().enumerate() {
                let switch_port0 = p == 0 && n.is_switch();
                let placeholder = p == 0 && !n.is_switch();
                let peer = port
                    .peer
                    .map_or(NONE, |(node, q)| first_port[node] + u32::from(q));
                let addr = &n.ports[usize::from(n.address_port(p as u8))];
                let (lid, lmc) =
                    match (&addr.info, switch_port0 || (!n.is_switch() && !placeholder)) {
                        (Some(info), true) => (info.lid, if n.is_switch() { 0 } else { info.lmc }),
                        _ => (0, 0),
                    };
                if lid != 0 {
                    max_lid = max_lid.max(u32::from(lid) + (1u32 << lmc) - 1);
                }
                let info = port.info.as_ref();
                let linked = peer != NONE;
                let state = if switch_port0 {
                    AbiPortState::Active
                } else if linked {
                    info.map_or(AbiPortState::Down, |i| abi_state(i.port_state))
                } else {
                    AbiPortState::Down
                };
                ports.push(Port {
                    node: i as u32,
                    num: p as u8,
                    guid: port.guid,
                    lid,
                    lmc,
                    peer,
                    state,
                    op_vls: match info {
                        Some(i) if !placeholder => sm_mad::port_info::vls::count(i.operational_vls),
                        _ => 0,
                    },
                    width: match info {
                        Some(i) if linked => link_width::lanes(i.link_width_active),
                        _ => 0,
                    },
                    speed: match info {
                        Some(_) if linked => n.active_speed(p as u8).map_or(0, LaneSpeed::units),
                        _ => 0,
                    },
                });
            }
        }
        FabricSnapshot {
            nodes,
            ports: ports.into(),
            lmc,
            max_lid: max_lid.min(u32::from(sm_abi::MAX_UNICAST_LID)) as u16,
            sm_node: if self.nodes.is_empty() { NONE } else { 0 },
        }
    }

    /// The fabric as a [`Topology`] (what ibnetdiscover would print), to
    /// compare with a topology file by GUID. Node ids are ibnetdiscover's.
    pub fn to_topology(&self) -> Topology {
        let mut topo = Topology::new();
        for n in &self.nodes {
            let prefix = match n.kind {
                NodeKind::Switch => "S",
                NodeKind::Ca => "H",
                NodeKind::Router => "R",
                _ => "X",
            };
            topo.nodes.push(TopoNode {
                kind: n.kind,
                name: format!("{prefix}-{:016x}", n.guid),
                desc: n.description.clone(),
                num_ports: n.num_ports,
                node_guid: n.guid,
                sys_guid: n.system_guid,
                port_guids: n.ports.iter().map(|p| p.guid).collect(),
            });
        }
        for (a, b) in self.links() {
            let mut link = TopoLink::new(a, b);
            if let Some(info) = &self.nodes[a.0].ports[usize::from(a.1)].info {
                link.width = link_width::lanes(info.link_width_active);
                link.speed = self.nodes[a.0].active_speed(a.1).map_or(0, LaneSpeed::units);
            }
            topo.links.push(link);
        }
        topo
    }
}

fn abi_state(state: PortState) -> AbiPortState {
    match state {
        PortState::Init => AbiPortState::Init,
        PortState::Armed => AbiPortState::Armed,
        PortState::Active | PortState::ActiveDefer => AbiPortState::Active,
        PortState::Down | PortState::NoChange => AbiPortState::Down,
    }
}



pub fn node_kind(t: NodeType) -> NodeKind {
    match t {
        NodeType::Switch => NodeKind::Switch,
        NodeType::Ca => NodeKind::Ca,
        NodeType::Router => NodeKind::Router,
    }
}
