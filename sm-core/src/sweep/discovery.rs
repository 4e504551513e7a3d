//! Discovery by directed-route SMPs from the SM port (IBA 14.2.2).
//!
//! Breadth first from the SM's own node: NodeInfo tells what answers at the
//! end of a path, so every node is reached first by a shortest path and
//! every directed route stays as short as the fabric allows. Switches are
//! expanded port by port; CAs and routers are leaves, because only switches
//! forward directed routes.
//!
//! Per new node the sweep sends NodeInfo, NodeDescription, and PortInfo of
//! each port it manages (all ports and port 0 of a switch, the port it was
//! reached by on a CA or router), plus SwitchInfo on switches. A link is
//! probed (NodeInfo through it) only from the end that sees it first: when
//! the far end is expanded later, the port is already known to lead back,
//! and no SMP is spent learning it again.
//!
//! A node that answers garbage, a truncated MAD or nothing is logged and
//! left out (or, for one port, that port); the sweep goes on with the rest.

use std::collections::{HashMap, VecDeque};

use sm_abi::abi_stable::std_types::{RString, RVec};
use sm_abi::{FabricSnapshot, NodeKind, Port, PortState as AbiPortState, NONE};
use sm_mad::mad::attr;
use sm_mad::port_info::link_width;
use sm_mad::smp::{DATA_LEN, MAX_HOPS};
use sm_mad::{
    NodeDescriptionPacket, NodeDescriptionRepr, NodeInfoPacket, NodeInfoRepr, NodeType, PhysState,
    PortInfoPacket, PortInfoRepr, PortState, SwitchInfoPacket, SwitchInfoRepr,
};
use sm_topology::{TopoLink, TopoNode, Topology};
use tracing::{debug, warn};

use super::transport::{SmpClient, SmpError, SmpOp};

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
    pub path: Option<Vec<u8>>,
}

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
    /// NodeDescription (empty if it did not answer).
    pub description: String,
    /// The shortest directed route found to the node.
    pub path: Vec<u8>,
    /// Ports `0..=num_ports`, by port number.
    pub ports: Vec<FabricPort>,
    /// SwitchInfo of a switch.
    pub switch_info: Option<SwitchInfoRepr>,
}

impl FabricNode {
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
}

/// The core model of the fabric, as discovery found it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fabric {
    /// Nodes in discovery order; the SM's node is node 0.
    pub nodes: Vec<FabricNode>,
    /// The SM's port on node 0 (0 when the SM runs on a switch).
    pub sm_port: u8,
}

impl Fabric {
    /// Index of the node with `guid`.
    pub fn find(&self, guid: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.guid == guid)
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
                        Some(i) if !placeholder => vl_count(i.operational_vls),
                        _ => 0,
                    },
                    width: match info {
                        Some(i) if linked => lanes(i.link_width_active),
                        _ => 0,
                    },
                    speed: match info {
                        Some(i) if linked => {
                            speed_units(i.link_speed_active, i.link_speed_ext_active)
                        }
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
                link.width = lanes(info.link_width_active);
                link.speed = speed_units(info.link_speed_active, info.link_speed_ext_active);
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

/// PortInfo.OperationalVLs (an encoding) as a count of data VLs.
fn vl_count(code: u8) -> u8 {
    match code {
        1 => 1,
        2 => 2,
        3 => 4,
        4 => 8,
        5 => 15,
        _ => 0,
    }
}

/// LinkWidthActive (one bit) as a lane count.
fn lanes(bit: u8) -> u8 {
    match bit {
        link_width::W1X => 1,
        link_width::W2X => 2,
        link_width::W4X => 4,
        link_width::W8X => 8,
        link_width::W12X => 12,
        _ => 0,
    }
}

/// LinkSpeedActive/LinkSpeedExtActive as the snapshot's 2.5 Gb/s units;
/// an extended speed, when there is one, overrides the base field.
fn speed_units(active: u8, ext_active: u8) -> u8 {
    use sm_topology::model::{
        SPEED_DDR, SPEED_EDR, SPEED_FDR, SPEED_HDR, SPEED_NDR, SPEED_QDR, SPEED_SDR,
    };
    match (ext_active, active) {
        (1, _) => SPEED_FDR,
        (2, _) => SPEED_EDR,
        (4, _) => SPEED_HDR,
        (8, _) => SPEED_NDR,
        (_, 1) => SPEED_SDR,
        (_, 2) => SPEED_DDR,
        (_, 4) => SPEED_QDR,
        _ => 0,
    }
}

/// What discovery saw go wrong, beyond the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoveryReport {
    /// Probes that gave no usable NodeInfo (the port's far end is left out).
    pub lost_probes: usize,
    /// Other requests that failed (descriptions, port or switch infos).
    pub failed_requests: usize,
}

/// Discovers the fabric behind `client`'s port. The SM's port number is
/// learnt from its own node's NodeInfo (LocalPortNum), as a CA's first hop
/// must leave by it.
///
/// Fails only when the SM's own node does not answer: without it there is
/// no fabric to speak of.
pub fn discover(client: &mut SmpClient<'_>) -> Result<(Fabric, DiscoveryReport), SmpError> {
    let mut report = DiscoveryReport::default();
    let root = node_info(client, &[])?;
    let mut fabric = Fabric {
        nodes: Vec::new(),
        sm_port: if root.node_type == NodeType::Switch {
            0
        } else {
            root.local_port_num
        },
    };
    let mut by_guid: HashMap<u64, usize> = HashMap::new();
    let mut queue = VecDeque::new();
    add_node(
        client,
        &mut fabric,
        &mut by_guid,
        &mut report,
        &root,
        Vec::new(),
    );
    let Some(first) = fabric.nodes.first() else {
        return Err(SmpError::Malformed("the SM's own node is unusable".into()));
    };
    if first.is_switch() {
        queue.push_back(0);
    } else {
        // From a CA the only way out is the SM port.
        let sm_port = fabric.sm_port;
        probe_ports(client, &mut fabric, &mut by_guid, &mut report, &mut queue, 0, &[sm_port]);
    }
    while let Some(node) = queue.pop_front() {
        let ports: Vec<u8> = (1..=fabric.nodes[node].num_ports)
            .filter(|&port| {
                let p = &fabric.nodes[node].ports[usize::from(port)];
                p.peer.is_none()
                    && p.info.as_ref().is_some_and(|i| {
                        i.port_physical_state == PhysState::LinkUp && i.port_state != PortState::Down
                    })
            })
            .collect();
        probe_ports(client, &mut fabric, &mut by_guid, &mut report, &mut queue, node, &ports);
    }
    debug!(
        nodes = fabric.nodes.len(),
        links = fabric.links().len(),
        smps = client.stats().sent,
        "discovery done"
    );
    Ok((fabric, report))
}

/// NodeInfo through each of `ports` of `node`, all in flight together,
/// then each answer taken in port order as if probed one by one.
fn probe_ports(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    by_guid: &mut HashMap<u64, usize>,
    report: &mut DiscoveryReport,
    queue: &mut VecDeque<usize>,
    node: usize,
    ports: &[u8],
) {
    let mut probes = Vec::new();
    for &port in ports {
        let mut path = fabric.nodes[node].path.clone();
        if path.len() >= usize::from(MAX_HOPS) {
            warn!(
                node = format_args!("{:#018x}", fabric.nodes[node].guid),
                port, "beyond the 63 hops a directed route can take; not probed"
            );
            report.lost_probes += 1;
            continue;
        }
        path.push(port);
        probes.push((port, path));
    }
    let ops: Vec<SmpOp> = probes.iter().map(|(_, path)| SmpOp::get(attr::NODE_INFO, 0, path)).collect();
    let answers = client.run_many(&ops);
    for ((port, path), answer) in probes.into_iter().zip(answers) {
        // An earlier answer of this batch may have linked this port
        // already (a cable between two ports of the same switch).
        if fabric.nodes[node].ports[usize::from(port)].peer.is_some() {
            continue;
        }
        let info = answer.and_then(|d| parse_node_info(&d));
        probe(client, fabric, by_guid, report, queue, node, port, path, info);
    }
}

/// Records what NodeInfo `info`, read through `port` of `node` along
/// `path`, says: the link and, if the far end is new, the node behind it.
#[allow(clippy::too_many_arguments)]
fn probe(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    by_guid: &mut HashMap<u64, usize>,
    report: &mut DiscoveryReport,
    queue: &mut VecDeque<usize>,
    node: usize,
    port: u8,
    path: Vec<u8>,
    info: Result<NodeInfoRepr, SmpError>,
) {
    let info = match info {
        Ok(info) => info,
        Err(e) => {
            warn!(path = ?path, error = %e, "no usable NodeInfo; the node behind is left out");
            report.lost_probes += 1;
            return;
        }
    };
    let far = match by_guid.get(&info.node_guid) {
        Some(&known) => {
            let n = &fabric.nodes[known];
            if n.kind != node_kind(info.node_type) || n.num_ports != info.num_ports {
                warn!(guid = format_args!("{:#018x}", info.node_guid), path = ?path,
                    "NodeInfo contradicts what this GUID said before; link ignored");
                report.lost_probes += 1;
                return;
            }
            known
        }
        None => {
            let before = fabric.nodes.len();
            add_node(client, fabric, by_guid, report, &info, path.clone());
            if fabric.nodes.len() == before {
                report.lost_probes += 1;
                return;
            }
            if fabric.nodes[before].is_switch() {
                queue.push_back(before);
            }
            before
        }
    };
    let far_port = info.local_port_num;
    let far_slot = &fabric.nodes[far].ports[usize::from(far_port)];
    if let Some(other) = far_slot.peer {
        // Two cables cannot end in one port: one of the answers lied.
        warn!(
            guid = format_args!("{:#018x}", info.node_guid),
            port = far_port,
            ?other,
            "port already linked elsewhere; link ignored"
        );
        report.lost_probes += 1;
        return;
    }
    if !fabric.nodes[far].is_switch() && far_slot.path.is_none() {
        // Another port of a CA known already (multi-port CA, or the SM's
        // own CA seen from the fabric).
        let guid = info.port_guid;
        let pinfo = read_port(client, report, &path, far_port, info.node_guid);
        let slot = &mut fabric.nodes[far].ports[usize::from(far_port)];
        slot.guid = guid;
        slot.info = pinfo;
        slot.path = Some(path);
    }
    fabric.nodes[node].ports[usize::from(port)].peer = Some((far, far_port));
    fabric.nodes[far].ports[usize::from(far_port)].peer = Some((node, port));
}

fn node_kind(t: NodeType) -> NodeKind {
    match t {
        NodeType::Switch => NodeKind::Switch,
        NodeType::Ca => NodeKind::Ca,
        NodeType::Router => NodeKind::Router,
    }
}

/// Reads a new node's description, port and switch infos and adds it, or
/// logs why it cannot.
fn add_node(
    client: &mut SmpClient<'_>,
    fabric: &mut Fabric,
    by_guid: &mut HashMap<u64, usize>,
    report: &mut DiscoveryReport,
    info: &NodeInfoRepr,
    path: Vec<u8>,
) {
    let kind = node_kind(info.node_type);
    let guid = info.node_guid;
    let sane = info.num_ports > 0
        && guid != 0
        && if kind == NodeKind::Switch {
            info.local_port_num <= info.num_ports
        } else {
            (1..=info.num_ports).contains(&info.local_port_num)
        };
    if !sane {
        warn!(guid = format_args!("{guid:#018x}"), path = ?path, ?info,
            "NodeInfo makes no sense; node left out");
        return;
    }
    // Description, SwitchInfo and every PortInfo in flight together.
    let mut ops = vec![SmpOp::get(attr::NODE_DESCRIPTION, 0, &path)];
    let port_nums: Vec<u8> =
        if kind == NodeKind::Switch { (0..=info.num_ports).collect() } else { vec![info.local_port_num] };
    if kind == NodeKind::Switch {
        ops.push(SmpOp::get(attr::SWITCH_INFO, 0, &path));
    }
    ops.extend(port_nums.iter().map(|&num| SmpOp::get(attr::PORT_INFO, u32::from(num), &path)));
    let mut answers = client.run_many(&ops).into_iter();
    let description = match answers.next() {
        Some(Ok(data)) => NodeDescriptionPacket::new_checked(&data[..])
            .and_then(|p| NodeDescriptionRepr::parse(&p))
            .map(|d| d.text())
            .unwrap_or_default(),
        Some(Err(e)) => {
            warn!(guid = format_args!("{guid:#018x}"), error = %e, "no NodeDescription");
            report.failed_requests += 1;
            String::new()
        }
        None => String::new(),
    };
    let mut ports = vec![FabricPort::default(); usize::from(info.num_ports) + 1];
    let mut switch_info = None;
    if kind == NodeKind::Switch {
        match answers.next() {
            Some(Ok(data)) => {
                switch_info = SwitchInfoPacket::new_checked(&data[..])
                    .and_then(|p| SwitchInfoRepr::parse(&p))
                    .ok();
            }
            Some(Err(e)) => {
                warn!(guid = format_args!("{guid:#018x}"), error = %e, "no SwitchInfo");
                report.failed_requests += 1;
            }
            None => {}
        }
    }
    for (&num, answer) in port_nums.iter().zip(answers) {
        let slot = &mut ports[usize::from(num)];
        slot.guid = info.port_guid;
        slot.path = Some(path.clone());
        slot.info = port_info_or_log(answer, report, num, guid);
    }
    by_guid.insert(guid, fabric.nodes.len());
    fabric.nodes.push(FabricNode {
        guid,
        system_guid: info.system_image_guid,
        kind,
        num_ports: info.num_ports,
        description,
        path,
        ports,
        switch_info,
    });
}

fn node_info(client: &mut SmpClient<'_>, path: &[u8]) -> Result<NodeInfoRepr, SmpError> {
    parse_node_info(&client.get(attr::NODE_INFO, 0, path)?)
}

fn parse_node_info(data: &[u8]) -> Result<NodeInfoRepr, SmpError> {
    NodeInfoPacket::new_checked(data)
        .and_then(|p| NodeInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("NodeInfo: {e}")))
}

/// PortInfo of `port`, read along `path`; `None` (logged) on failure.
pub(super) fn read_port(
    client: &mut SmpClient<'_>,
    report: &mut DiscoveryReport,
    path: &[u8],
    port: u8,
    guid: u64,
) -> Option<PortInfoRepr> {
    port_info_or_log(client.get(attr::PORT_INFO, u32::from(port), path), report, port, guid)
}

/// A PortInfo answer parsed, or `None` with the failure logged and counted.
fn port_info_or_log(
    answer: Result<[u8; DATA_LEN], SmpError>,
    report: &mut DiscoveryReport,
    port: u8,
    guid: u64,
) -> Option<PortInfoRepr> {
    match answer.and_then(|data| parse_port_info(&data)) {
        Ok(info) => Some(info),
        Err(e) => {
            warn!(guid = format_args!("{guid:#018x}"), port, error = %e, "no usable PortInfo");
            report.failed_requests += 1;
            None
        }
    }
}

pub(super) fn parse_port_info(data: &[u8]) -> Result<PortInfoRepr, SmpError> {
    PortInfoPacket::new_checked(data)
        .and_then(|p| PortInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("PortInfo: {e}")))
}
