//! Offline LID assignment and the flat [`FabricSnapshot`] engines route.

use sm_abi::abi_stable::std_types::{RString, RVec};
use sm_abi::{FabricSnapshot, Node, NodeKind, Port, PortState, MAX_UNICAST_LID, NONE};

use crate::error::TopologyError;
use crate::model::Topology;

/// Operational VLs given to every port that exists. Eight data VLs is what
/// current switches and HCAs run and what the VL-hungry engines
/// (torus-2QoS, LASH, DFSSSP, Nue) need to be tested meaningfully; it is
/// the same for switch-to-switch links and end ports so that VL limits
/// never come from the snapshot by accident. CA and router port-0
/// placeholders, which are not ports, get 0.
pub const SNAPSHOT_OP_VLS: u8 = 8;

/// Highest LMC InfiniBand allows.
pub const MAX_LMC: u8 = 7;

/// Build the snapshot of `topo` with LIDs assigned.
///
/// * Node `i` of the snapshot is node `i` of the topology; every node has a
///   port-0 slot at `first_port`, followed by its ports `1..=num_ports`.
/// * Linked ports are Active with `peer` set both ways and the link's
///   width and speed; unlinked ports are Down with width and speed 0.
///   A switch's port 0 is Active (the management port always is).
/// * LIDs are handed out in node order starting at 1: a switch gets one
///   LID on port 0 (LMC 0), each linked CA or router port gets a block of
///   `2^lmc` LIDs aligned to `2^lmc`. Unlinked end ports get no LID.
/// * `max_lid` is the highest LID handed out; `sm_node` is the first CA
///   with a linked port (the node an SM would run on), or `NONE`.
///
/// Errors: an invalid topology, `lmc` above 7, or more LIDs than 0xBFFF.
pub fn snapshot(topo: &Topology, lmc: u8) -> Result<FabricSnapshot, TopologyError> {
    topo.validate()?;
    if lmc > MAX_LMC {
        return Err(TopologyError::Invalid(format!("LMC {lmc} is above the maximum of {MAX_LMC}")));
    }
    let total_ports: usize = topo.nodes.iter().map(|n| n.num_ports as usize + 1).sum();
    if total_ports > NONE as usize {
        return Err(TopologyError::Invalid("too many ports for a snapshot".into()));
    }
    let mut nodes = RVec::with_capacity(topo.nodes.len());
    let mut ports: Vec<Port> = Vec::with_capacity(total_ports);
    for (i, n) in topo.nodes.iter().enumerate() {
        let first = ports.len() as u32;
        nodes.push(Node {
            guid: n.node_guid,
            system_guid: n.sys_guid,
            kind: n.kind,
            num_ports: n.num_ports,
            first_port: first,
            description: RString::from(n.desc.as_str()),
        });
        for p in 0..=n.num_ports {
            let switch_port0 = p == 0 && n.is_switch();
            let placeholder = p == 0 && !n.is_switch();
            ports.push(Port {
                node: i as u32,
                num: p,
                guid: n.port_guid(p),
                lid: 0,
                lmc: 0,
                peer: NONE,
                state: if switch_port0 { PortState::Active } else { PortState::Down },
                op_vls: if placeholder { 0 } else { SNAPSHOT_OP_VLS },
                width: 0,
                speed: 0,
            });
        }
    }
    for l in &topo.links {
        let ia = (nodes[l.a.0].first_port + l.a.1 as u32) as usize;
        let ib = (nodes[l.b.0].first_port + l.b.1 as u32) as usize;
        for (me, other) in [(ia, ib), (ib, ia)] {
            let port = &mut ports[me];
            port.peer = other as u32;
            port.state = PortState::Active;
            port.width = l.width;
            port.speed = l.speed;
        }
    }

    let block = 1u32 << lmc;
    let mut next: u32 = 1;
    let mut max_lid: u32 = 0;
    for (i, n) in topo.nodes.iter().enumerate() {
        let first = nodes[i].first_port as usize;
        let wanted: Vec<(usize, u32, u8)> = if n.kind == NodeKind::Switch {
            vec![(first, 1, 0)]
        } else {
            (1..=n.num_ports as usize)
                .filter(|p| ports[first + p].peer != NONE)
                .map(|p| (first + p, block, lmc))
                .collect()
        };
        for (idx, count, port_lmc) in wanted {
            let lid = next.div_ceil(count) * count;
            let last = lid + count - 1;
            if last > MAX_UNICAST_LID as u32 {
                return Err(TopologyError::LidSpace { node: n.name.clone(), needed: last });
            }
            ports[idx].lid = lid as u16;
            ports[idx].lmc = port_lmc;
            next = last + 1;
            max_lid = max_lid.max(last);
        }
    }
    let sm_node = nodes
        .iter()
        .position(|n| {
            let first = n.first_port as usize;
            n.kind == NodeKind::Ca
                && (1..=n.num_ports as usize).any(|p| ports[first + p].peer != NONE)
        })
        .map(|i| i as u32)
        .unwrap_or(NONE);
    Ok(FabricSnapshot { nodes, ports: ports.into(), lmc, max_lid: max_lid as u16, sm_node })
}
