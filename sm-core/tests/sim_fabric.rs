//! The embedded simulated fabric, driven the way an SM drives a real one:
//! SMPs built with sm-mad, sent from the SM's port, answers parsed back.

use std::collections::{BTreeMap, HashMap, VecDeque};

use proptest::prelude::*;
use sm_core::sim::{DropReason, SimFabric, SimOptions, TrapDelivery};
use sm_mad::forwarding::{LFT_BLOCK_LEN, NO_ROUTE};
use sm_mad::mad::{attr, method, status};
use sm_mad::notice::trap;
use sm_mad::smp::{self, Direction, DATA_LEN, PERMISSIVE_LID};
use sm_mad::{
    Mad, NodeInfoPacket, NoticePacket, NoticeRepr, PhysState, PortInfoPacket, PortInfoRepr,
    PortState, SwitchInfoPacket, SwitchInfoRepr,
};
use sm_topology::{gen, Topology};

// ---------------------------------------------------------------- helpers

/// An answer, parsed.
struct Reply {
    repr: smp::Repr,
    bytes: Vec<u8>,
}

impl Reply {
    fn status(&self) -> u16 {
        self.repr.status
    }
    fn node_info(&self) -> NodeInfoPacket<&[u8]> {
        NodeInfoPacket::new_checked(&self.repr.data[..]).unwrap()
    }
    fn port_info(&self) -> PortInfoRepr {
        PortInfoRepr::parse(&PortInfoPacket::new_checked(&self.repr.data[..]).unwrap()).unwrap()
    }
    fn switch_info(&self) -> SwitchInfoRepr {
        SwitchInfoRepr::parse(&SwitchInfoPacket::new_checked(&self.repr.data[..]).unwrap()).unwrap()
    }
}

fn emit(repr: &smp::Repr) -> Mad {
    let mut mad = Mad::zeroed();
    repr.emit(&mut mad.smp_mut());
    mad
}

fn send(fabric: &mut SimFabric, dlid: u16, request: &smp::Repr) -> Option<Reply> {
    let mad = emit(request);
    let response = fabric.handle_to(dlid, &mad.0)?;
    let packet = smp::Packet::new_checked(&response.mad[..]).unwrap();
    let repr = smp::Repr::parse(&packet).unwrap();
    assert_eq!(repr.method, method::GET_RESP);
    assert_eq!(repr.transaction_id, request.transaction_id);
    assert_eq!(repr.attribute_id, request.attribute_id);
    if let Some(dr) = repr.directed() {
        assert_eq!(
            dr.direction,
            Direction::Inbound,
            "responses carry the D bit"
        );
        assert_eq!(
            dr.hop_pointer, 0,
            "a response back at the SM has hop pointer 0"
        );
    }
    Some(Reply {
        repr,
        bytes: response.mad,
    })
}

fn dr_get(fabric: &mut SimFabric, attribute: u16, modifier: u32, path: &[u8]) -> Option<Reply> {
    let request = smp::Repr::directed_get(7, attribute, modifier, 0, path).unwrap();
    send(fabric, PERMISSIVE_LID, &request)
}

fn dr_set(
    fabric: &mut SimFabric,
    attribute: u16,
    modifier: u32,
    path: &[u8],
    data: [u8; DATA_LEN],
) -> Option<Reply> {
    let request = smp::Repr::directed_set(8, attribute, modifier, 0, path, data).unwrap();
    send(fabric, PERMISSIVE_LID, &request)
}

/// Writes one LFT block over a directed route; the set must be answered.
fn set_lft_block(fabric: &mut SimFabric, block: u16, path: &[u8], lft: [u8; DATA_LEN]) {
    dr_set(fabric, attr::LINEAR_FORWARDING_TABLE, u32::from(block), path, lft).expect("LFT block set answered");
}

fn lid_get(fabric: &mut SimFabric, dlid: u16, attribute: u16, modifier: u32) -> Option<Reply> {
    send(fabric, dlid, &smp::Repr::lid_get(9, attribute, modifier, 0))
}

fn port_info_data(repr: &PortInfoRepr) -> [u8; DATA_LEN] {
    let mut data = [0; DATA_LEN];
    repr.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
    data
}

/// A PortInfo Set that changes only the port state.
fn state_only(state: PortState) -> [u8; DATA_LEN] {
    port_info_data(&PortInfoRepr {
        port_state: state,
        ..PortInfoRepr::default()
    })
}

/// Read-modify-write of a port's state, as an SM does it: a PortInfo Set
/// writes every field, LID included.
fn set_port_state(
    fabric: &mut SimFabric,
    path: &[u8],
    port: u8,
    state: PortState,
) -> Option<Reply> {
    let mut info = dr_get(fabric, attr::PORT_INFO, u32::from(port), path)?.port_info();
    info.port_state = state;
    info.port_physical_state = PhysState::NoChange;
    dr_set(
        fabric,
        attr::PORT_INFO,
        u32::from(port),
        path,
        port_info_data(&info),
    )
}

/// The first host of a generated fabric, where the SM runs.
fn fabric(topo: &Topology) -> SimFabric {
    SimFabric::from_topology(topo, 0, 1).unwrap()
}

// ----------------------------------------------------- a miniature SM

/// One node found by directed-route discovery.
#[derive(Debug)]
struct Found {
    guid: u64,
    is_switch: bool,
    num_ports: u8,
    path: Vec<u8>,
    /// port → (index of the node behind it, its port).
    peers: BTreeMap<u8, (usize, u8)>,
}

/// Breadth-first discovery by DR NodeInfo and PortInfo, as an SM does it.
fn discover(fabric: &mut SimFabric) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    let mut by_guid: HashMap<u64, usize> = HashMap::new();
    // (path, the node and port it leaves from)
    type Pending = (Vec<u8>, Option<(usize, u8)>);
    let mut queue: VecDeque<Pending> = VecDeque::from([(vec![], None)]);
    while let Some((path, from)) = queue.pop_front() {
        let reply = dr_get(fabric, attr::NODE_INFO, 0, &path).expect("NodeInfo answered");
        assert_eq!(reply.status(), 0);
        let dr = reply.repr.directed().unwrap();
        assert_eq!(usize::from(dr.hop_count), path.len());
        let info = reply.node_info();
        let (guid, local) = (info.node_guid(), info.local_port_num());
        let is_switch = info.node_type() == 2;
        let num_ports = info.num_ports();
        let index = match by_guid.get(&guid) {
            Some(&index) => index,
            None => {
                found.push(Found {
                    guid,
                    is_switch,
                    num_ports,
                    path: path.clone(),
                    peers: BTreeMap::new(),
                });
                by_guid.insert(guid, found.len() - 1);
                let index = found.len() - 1;
                let ports: Vec<u8> = if is_switch {
                    (1..=num_ports).collect()
                } else if path.is_empty() {
                    vec![local]
                } else {
                    vec![]
                };
                for port in ports {
                    let pi = dr_get(fabric, attr::PORT_INFO, u32::from(port), &path).unwrap();
                    assert_eq!(pi.status(), 0);
                    let pi = pi.port_info();
                    assert_eq!(pi.local_port_num, local);
                    let far_side = from.is_some() && port == local;
                    if pi.port_physical_state == PhysState::LinkUp && !far_side {
                        let mut next = path.clone();
                        next.push(port);
                        queue.push_back((next, Some((index, port))));
                    }
                }
                index
            }
        };
        if let Some((from_index, from_port)) = from {
            found[from_index].peers.insert(from_port, (index, local));
            found[index].peers.insert(local, (from_index, from_port));
        }
    }
    found
}

/// Checks discovery against the topology: every node, every link, with
/// the right ports on both ends.
fn assert_matches_topology(found: &[Found], topo: &Topology) {
    assert_eq!(found.len(), topo.nodes.len());
    let index: HashMap<u64, usize> = topo
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.node_guid, i))
        .collect();
    let mut links = 0;
    for f in found {
        let t = index[&f.guid];
        assert_eq!(f.num_ports, topo.nodes[t].num_ports);
        assert_eq!(f.is_switch, topo.nodes[t].is_switch());
        for (&port, &(peer, peer_port)) in &f.peers {
            let expected = topo.peer(t, port).expect("discovered link exists");
            assert_eq!(expected, (index[&found[peer].guid], peer_port));
            links += 1;
        }
    }
    assert_eq!(links, 2 * topo.links.len());
}

/// What the miniature SM programmed.
struct Programmed {
    found: Vec<Found>,
    /// LID per discovered node (one port per CA in generated fabrics).
    lids: Vec<u16>,
}

/// Discovery, LIDs (node index + 1), SM LID, min-hop LFTs, Armed, Active:
/// the whole bring-up, by directed route only.
fn bring_up(fabric: &mut SimFabric) -> Programmed {
    let found = discover(fabric);
    let lids: Vec<u16> = (1..=found.len() as u16).collect();
    let sm_lid = lids[0];
    for (i, f) in found.iter().enumerate() {
        let repr = PortInfoRepr {
            lid: lids[i],
            master_sm_lid: sm_lid,
            ..PortInfoRepr::default()
        };
        let reply = dr_set(fabric, attr::PORT_INFO, 0, &f.path, port_info_data(&repr)).unwrap();
        assert_eq!(reply.status(), 0);
        assert_eq!(reply.port_info().lid, lids[i]);
    }
    let top = *lids.last().unwrap();
    for (s, f) in found.iter().enumerate().filter(|(_, f)| f.is_switch) {
        let mut lft = vec![NO_ROUTE; usize::from(top) + 1];
        for (d, _) in found.iter().enumerate() {
            lft[usize::from(lids[d])] = next_hop(&found, s, d);
        }
        let mut info = dr_get(fabric, attr::SWITCH_INFO, 0, &f.path)
            .unwrap()
            .switch_info();
        info.linear_fdb_top = top;
        let mut data = [0; DATA_LEN];
        info.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
        assert_eq!(
            dr_set(fabric, attr::SWITCH_INFO, 0, &f.path, data)
                .unwrap()
                .status(),
            0
        );
        for (block, chunk) in lft.chunks(LFT_BLOCK_LEN).enumerate() {
            let mut data = [NO_ROUTE; DATA_LEN];
            data[..chunk.len()].copy_from_slice(chunk);
            let reply = dr_set(
                fabric,
                attr::LINEAR_FORWARDING_TABLE,
                block as u32,
                &f.path,
                data,
            )
            .unwrap();
            assert_eq!(reply.status(), 0);
            assert_eq!(&reply.repr.data[..chunk.len()], chunk);
        }
    }
    for state in [PortState::Armed, PortState::Active] {
        for f in &found {
            for &port in f.peers.keys() {
                let modifier = if f.is_switch { port } else { 0 };
                let reply = set_port_state(fabric, &f.path, modifier, state).unwrap();
                assert_eq!(
                    reply.status(),
                    0,
                    "{state:?} on port {port} of {:#x}",
                    f.guid
                );
                assert_eq!(reply.port_info().port_state, state);
            }
        }
    }
    Programmed { found, lids }
}

/// The port of switch `s` on a shortest path to node `d` (0 for itself).
fn next_hop(found: &[Found], s: usize, d: usize) -> u8 {
    if s == d {
        return 0;
    }
    let mut dist = vec![usize::MAX; found.len()];
    dist[d] = 0;
    let mut queue = VecDeque::from([d]);
    while let Some(v) = queue.pop_front() {
        // Only switches forward: paths run through switches to end nodes.
        if v != d && !found[v].is_switch {
            continue;
        }
        for &(w, _) in found[v].peers.values() {
            if dist[w] == usize::MAX {
                dist[w] = dist[v] + 1;
                queue.push_back(w);
            }
        }
    }
    found[s]
        .peers
        .iter()
        .filter(|(_, &(w, _))| dist[w] != usize::MAX && dist[w] + 1 == dist[s])
        .map(|(&port, _)| port)
        .next()
        .unwrap_or(NO_ROUTE)
}

// ------------------------------------------------------------------ tests

#[test]
fn directed_routes_discover_a_fat_tree() {
    let topo = gen::kary_ntree(2, 3, 2).unwrap();
    let mut f = fabric(&topo);
    let found = discover(&mut f);
    assert_matches_topology(&found, &topo);
    // Every SMP the discovery sent was answered.
    let c = f.counters();
    assert_eq!(c.sent, c.answered);
    assert_eq!(c.dropped, 0);
    assert!(c.by_attribute[&attr::NODE_INFO].get > 0);
    assert!(c.by_attribute[&attr::PORT_INFO].get > 0);
}

#[test]
fn directed_routes_discover_tori_and_random_fabrics() {
    let (torus, _) = gen::torus(&[3, 3], 1, false).unwrap();
    let random = gen::random_irregular(6, 8, 2, 4, 7).unwrap();
    for topo in [torus, random] {
        let mut f = fabric(&topo);
        assert_matches_topology(&discover(&mut f), &topo);
    }
}

#[test]
fn multi_port_cas_routers_and_link_rates() {
    use sm_topology::model::SPEED_FDR;
    let mut b = sm_topology::TopologyBuilder::new();
    let sm_host = b.add_ca("sm-host", 1).unwrap();
    let dual = b.add_ca("dual", 2).unwrap();
    let router = b.add_router("router", 1).unwrap();
    let sw0 = b.add_switch("sw0", 8).unwrap();
    let sw1 = b.add_switch("sw1", 8).unwrap();
    b.link((sm_host, 1), (sw0, 1)).unwrap();
    b.link((dual, 1), (sw0, 2)).unwrap();
    b.link((dual, 2), (sw1, 2)).unwrap();
    b.link((router, 1), (sw1, 3)).unwrap();
    b.set_rate(1, SPEED_FDR);
    b.link((sw0, 8), (sw1, 8)).unwrap();
    let topo = b.finish().unwrap();
    let mut f = fabric(&topo);
    let found = discover(&mut f);
    assert_matches_topology(&found, &topo);
    // The dual-port CA answers through either port, with that port's GUID.
    let via0 = dr_get(&mut f, attr::NODE_INFO, 0, &[1, 2]).unwrap();
    let via1 = dr_get(&mut f, attr::NODE_INFO, 0, &[1, 8, 2]).unwrap();
    assert_eq!(via0.node_info().node_guid(), via1.node_info().node_guid());
    assert_eq!(via0.node_info().local_port_num(), 1);
    assert_eq!(via1.node_info().local_port_num(), 2);
    assert_eq!(via0.node_info().port_guid(), topo.nodes[dual].port_guid(1));
    assert_eq!(via1.node_info().port_guid(), topo.nodes[dual].port_guid(2));
    // PortInfo modifier 0 on a CA is the port asked through; the other
    // port can be read, not set.
    assert_eq!(
        dr_get(&mut f, attr::PORT_INFO, 0, &[1, 8, 2])
            .unwrap()
            .port_info()
            .local_port_num,
        2
    );
    let router_info = dr_get(&mut f, attr::NODE_INFO, 0, &[1, 8, 3]).unwrap();
    assert_eq!(router_info.node_info().node_type(), 3);
    // The inter-switch link runs 1x FDR: QDR in LinkSpeedActive, FDR in
    // the extended field.
    let pi = dr_get(&mut f, attr::PORT_INFO, 8, &[1])
        .unwrap()
        .port_info();
    assert_eq!(pi.link_width_active, sm_mad::port_info::link_width::W1X);
    assert_eq!((pi.link_speed_active, pi.link_speed_ext_active), (4, 1));
    let host = dr_get(&mut f, attr::PORT_INFO, 0, &[]).unwrap().port_info();
    assert_eq!((host.link_speed_active, host.link_speed_ext_active), (4, 0));
}

#[test]
fn return_path_records_entry_ports() {
    let topo = gen::kary_ntree(2, 2, 2).unwrap();
    let mut f = fabric(&topo);
    // host-0 → leaf-0 (enters by 1), up port 3 → spine (enters by its down
    // port), down port 2 → leaf-1 (enters by an up port).
    let reply = dr_get(&mut f, attr::NODE_INFO, 0, &[1, 3, 2]).unwrap();
    let dr = *reply.repr.directed().unwrap();
    let leaf0 = topo.find_node_by_desc("leaf-0").unwrap();
    let (spine, spine_port) = topo.peer(leaf0, 3).unwrap();
    let (leaf1, leaf1_port) = topo.peer(spine, 2).unwrap();
    assert_eq!(dr.return_ports(), &[1, spine_port, leaf1_port]);
    assert_eq!(dr.initial_ports(), &[1, 3, 2]);
    assert_eq!(reply.node_info().node_guid(), topo.nodes[leaf1].node_guid);
    assert_eq!(reply.node_info().local_port_num(), leaf1_port);
    // The SM's own node, zero hops: LocalPortNum is the SM's port.
    let local = dr_get(&mut f, attr::NODE_INFO, 0, &[]).unwrap();
    assert_eq!(local.node_info().node_guid(), topo.nodes[0].node_guid);
    assert_eq!(local.node_info().local_port_num(), 1);
    assert_eq!(local.node_info().port_guid(), topo.nodes[0].port_guid(1));
}

#[test]
fn torus_loops_reach_one_guid_by_two_paths() {
    let (topo, layout) = gen::torus(&[3, 3], 1, false).unwrap();
    let mut f = fabric(&topo);
    let host_port = layout.first_host_port;
    let guid_at = |f: &mut SimFabric, path: &[u8]| {
        let mut full = vec![1];
        full.extend_from_slice(path);
        dr_get(f, attr::NODE_INFO, 0, &full)
            .unwrap()
            .node_info()
            .node_guid()
    };
    let (xp, xm, yp) = (1, 2, 3);
    // +x then +y and +y then +x meet at (1, 1).
    let a = guid_at(&mut f, &[xp, yp]);
    let b = guid_at(&mut f, &[yp, xp]);
    assert_eq!(a, b);
    assert_eq!(a, layout.at([1, 1, 0]).unwrap().guid);
    // Three +x hops go round the ring back to the start; so does +x, -x.
    let start = layout.at([0, 0, 0]).unwrap().guid;
    assert_eq!(guid_at(&mut f, &[xp, xp, xp]), start);
    assert_eq!(guid_at(&mut f, &[xp, xm]), start);
    // ... and the same host is reached through either way round.
    let h1 = guid_at(&mut f, &[xp, xp, xp, host_port]);
    assert_eq!(h1, topo.nodes[0].node_guid);
}

#[test]
fn parallel_links_are_told_apart_by_port() {
    // Two uplinks from each leaf to the only spine.
    let topo = gen::fat_tree_2level(2, 1, 2, 2).unwrap();
    let mut f = fabric(&topo);
    let via3 = dr_get(&mut f, attr::NODE_INFO, 0, &[1, 3]).unwrap();
    let via4 = dr_get(&mut f, attr::NODE_INFO, 0, &[1, 4]).unwrap();
    assert_eq!(via3.node_info().node_guid(), via4.node_info().node_guid());
    assert_ne!(
        via3.node_info().local_port_num(),
        via4.node_info().local_port_num()
    );
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    assert_eq!(
        topo.peer(leaf, 3).unwrap().1,
        via3.node_info().local_port_num()
    );
    assert_eq!(
        topo.peer(leaf, 4).unwrap().1,
        via4.node_info().local_port_num()
    );
}

#[test]
fn port_info_reports_link_and_capabilities() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let host = dr_get(&mut f, attr::PORT_INFO, 0, &[]).unwrap().port_info();
    assert_eq!(host.local_port_num, 1);
    assert_eq!(host.port_state, PortState::Init);
    assert_eq!(host.port_physical_state, PhysState::LinkUp);
    assert_eq!(host.link_width_active, sm_mad::port_info::link_width::W4X);
    assert_eq!(host.link_speed_active, sm_mad::port_info::link_speed::QDR);
    assert_eq!(host.m_key, 0);
    assert_ne!(
        host.capability_mask & sm_mad::port_info::capability::IS_SM,
        0
    );
    // IBA reset values until an SM programs the link: VL0 only, 256 bytes.
    assert_eq!(host.operational_vls, 1);
    assert_eq!(host.neighbor_mtu, sm_mad::port_info::mtu::MTU_256);
    assert_eq!(host.mtu_cap, sm_mad::port_info::mtu::MTU_4096);
    // Leaf port 2 has no host (one host per leaf): Down, Polling.
    let free = dr_get(&mut f, attr::PORT_INFO, 2, &[1])
        .unwrap()
        .port_info();
    assert_eq!(
        (free.port_state, free.port_physical_state),
        (PortState::Down, PhysState::Polling)
    );
    // Switch port 0 is Active from power-up; the switch has no LID yet.
    let p0 = dr_get(&mut f, attr::PORT_INFO, 0, &[1])
        .unwrap()
        .port_info();
    assert_eq!(p0.port_state, PortState::Active);
    assert_eq!(p0.lid, 0);
    // Beyond the switch's ports.
    let bad = dr_get(&mut f, attr::PORT_INFO, 5, &[1]).unwrap();
    assert_eq!(bad.status(), status::INVALID_ATTR_VALUE);
}

#[test]
fn port_info_set_lids_and_walk_the_state_machine() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let repr = PortInfoRepr {
        lid: 0x10,
        master_sm_lid: 0x10,
        master_sm_sl: 3,
        ..Default::default()
    };
    let reply = dr_set(&mut f, attr::PORT_INFO, 0, &[], port_info_data(&repr)).unwrap();
    assert_eq!(reply.status(), 0);
    let pi = reply.port_info();
    assert_eq!((pi.lid, pi.master_sm_lid, pi.master_sm_sl), (0x10, 0x10, 3));
    assert_eq!(f.port_lid(0, 1), Some(0x10));
    // A switch's LID lives on port 0 and shows on every port.
    let sw = PortInfoRepr {
        lid: 0x20,
        master_sm_lid: 0x10,
        ..Default::default()
    };
    assert_eq!(
        dr_set(&mut f, attr::PORT_INFO, 0, &[1], port_info_data(&sw))
            .unwrap()
            .status(),
        0
    );
    assert_eq!(
        dr_get(&mut f, attr::PORT_INFO, 3, &[1])
            .unwrap()
            .port_info()
            .lid,
        0x20
    );

    // Init → Active skips Armed: refused, nothing changes.
    let r = set_port_state(&mut f, &[1], 1, PortState::Active).unwrap();
    assert_eq!(r.status(), status::INVALID_ATTR_VALUE);
    assert_eq!(r.port_info().port_state, PortState::Init);
    // Init cannot be set; the link does that.
    assert_eq!(
        set_port_state(&mut f, &[1], 1, PortState::Init)
            .unwrap()
            .status(),
        0x1C
    );
    // Init → Armed → Active.
    assert_eq!(
        set_port_state(&mut f, &[1], 1, PortState::Armed)
            .unwrap()
            .status(),
        0
    );
    assert_eq!(
        set_port_state(&mut f, &[1], 1, PortState::Armed)
            .unwrap()
            .status(),
        0
    );
    let r = set_port_state(&mut f, &[1], 1, PortState::Active).unwrap();
    assert_eq!(
        (r.status(), r.port_info().port_state),
        (0, PortState::Active)
    );
    // Active → Armed is not a transition.
    assert_eq!(
        set_port_state(&mut f, &[1], 1, PortState::Armed)
            .unwrap()
            .status(),
        0x1C
    );
    // A Down port (no cable) goes nowhere but Down.
    let r = set_port_state(&mut f, &[1], 2, PortState::Active).unwrap();
    assert_eq!(
        (r.status(), r.port_info().port_state),
        (0x1C, PortState::Down)
    );
    assert_eq!(
        set_port_state(&mut f, &[1], 2, PortState::Armed)
            .unwrap()
            .status(),
        0x1C
    );
    // Reserved states are refused.
    let mut data = state_only(PortState::NoChange);
    data[32] = (data[32] & 0xF0) | 7;
    assert_eq!(
        dr_set(&mut f, attr::PORT_INFO, 1, &[1], data)
            .unwrap()
            .status(),
        0x1C
    );
    // Setting Down bounces the link: both ends come back in Init, and the
    // far end (not the port the SM set) reports the change.
    assert!(!f
        .port_state_change(topo.find_node_by_desc("spine-0").unwrap())
        .unwrap());
    assert_eq!(
        set_port_state(&mut f, &[1], 3, PortState::Down)
            .unwrap()
            .status(),
        0
    );
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    let (spine, spine_port) = topo.peer(leaf, 3).unwrap();
    assert_eq!(f.port_state(leaf, 3), Some(PortState::Init));
    assert_eq!(f.port_state(spine, spine_port), Some(PortState::Init));
    assert_eq!(f.port_state_change(spine), Some(true));
    assert_eq!(f.port_state_change(leaf), Some(false));
    // A CA port is set through itself only.
    let other = port_info_data(&PortInfoRepr {
        lid: 5,
        ..Default::default()
    });
    assert_eq!(
        dr_set(&mut f, attr::PORT_INFO, 2, &[], other)
            .unwrap()
            .status(),
        0x1C
    );
}

#[test]
fn disabled_port_takes_the_link_down_until_polling() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    let disable = port_info_data(&PortInfoRepr {
        port_physical_state: PhysState::Disabled,
        ..Default::default()
    });
    assert_eq!(
        dr_set(&mut f, attr::PORT_INFO, 3, &[1], disable)
            .unwrap()
            .status(),
        0
    );
    let pi = dr_get(&mut f, attr::PORT_INFO, 3, &[1])
        .unwrap()
        .port_info();
    assert_eq!(
        (pi.port_state, pi.port_physical_state),
        (PortState::Down, PhysState::Disabled)
    );
    assert!(dr_get(&mut f, attr::NODE_INFO, 0, &[1, 3]).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::NoLink));
    let poll = port_info_data(&PortInfoRepr {
        port_physical_state: PhysState::Polling,
        ..Default::default()
    });
    assert_eq!(
        dr_set(&mut f, attr::PORT_INFO, 3, &[1], poll)
            .unwrap()
            .status(),
        0
    );
    assert_eq!(f.port_state(leaf, 3), Some(PortState::Init));
    assert!(dr_get(&mut f, attr::NODE_INFO, 0, &[1, 3]).is_some());
    // LinkUp is what a port reports, not what an SM may set.
    let up = port_info_data(&PortInfoRepr {
        port_physical_state: PhysState::LinkUp,
        ..Default::default()
    });
    assert_eq!(
        dr_set(&mut f, attr::PORT_INFO, 3, &[1], up)
            .unwrap()
            .status(),
        0x1C
    );
}

#[test]
fn lid_routing_follows_the_programmed_lfts() {
    let topo = gen::fat_tree_2level(3, 2, 2, 2).unwrap();
    let mut f = fabric(&topo);
    // Before LIDs and LFTs, LID routing goes nowhere.
    assert!(lid_get(&mut f, 2, attr::NODE_INFO, 0).is_none());
    let p = bring_up(&mut f);
    for (i, node) in p.found.iter().enumerate() {
        let reply = lid_get(&mut f, p.lids[i], attr::NODE_INFO, 0)
            .unwrap_or_else(|| panic!("LID {} lost: {:?}", p.lids[i], f.last_drop()));
        assert_eq!(reply.node_info().node_guid(), node.guid);
        assert!(reply.repr.directed().is_none());
    }
    // Every port Active, LIDs as assigned.
    for (i, node) in p.found.iter().enumerate() {
        let t = topo.find_node_by_guid(node.guid).unwrap();
        for &port in node.peers.keys() {
            assert_eq!(f.port_state(t, port), Some(PortState::Active));
        }
        assert_eq!(
            f.port_lid(t, if node.is_switch { 0 } else { 1 }),
            Some(p.lids[i])
        );
    }
    let c = f.counters().clone();
    assert_eq!(
        c.dropped, 1,
        "only the request sent before bring-up was lost"
    );
    assert_eq!(c.drops_for(DropReason::PortNotActive), 1);

    // Break the SM's leaf: the entry for a host on another leaf points at
    // a host port, where the packet dies.
    let sm_leaf = p.found.iter().position(|n| n.path == [1]).unwrap();
    let far = p
        .found
        .iter()
        .position(|n| !n.is_switch && n.path.len() > 3)
        .unwrap();
    let far_lid = p.lids[far];
    let leaf_path = p.found[sm_leaf].path.clone();
    let (block, index) = (far_lid / 64, usize::from(far_lid % 64));
    let mut lft = dr_get(
        &mut f,
        attr::LINEAR_FORWARDING_TABLE,
        u32::from(block),
        &leaf_path,
    )
    .unwrap()
    .repr
    .data;
    let good = lft[index];
    let host_port = 2;
    lft[index] = host_port;
    set_lft_block(&mut f, block, &leaf_path, lft);
    assert!(lid_get(&mut f, far_lid, attr::NODE_INFO, 0).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::LidNotHere));
    // No entry at all.
    lft[index] = NO_ROUTE;
    set_lft_block(&mut f, block, &leaf_path, lft);
    assert!(lid_get(&mut f, far_lid, attr::NODE_INFO, 0).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::NoRoute));
    // Restored, it works again.
    lft[index] = good;
    set_lft_block(&mut f, block, &leaf_path, lft);
    assert!(lid_get(&mut f, far_lid, attr::NODE_INFO, 0).is_some());
    // LinearFDBTop below the LID drops it too.
    let mut info = dr_get(&mut f, attr::SWITCH_INFO, 0, &leaf_path)
        .unwrap()
        .switch_info();
    info.linear_fdb_top = far_lid - 1;
    let mut data = [0; DATA_LEN];
    info.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
    dr_set(&mut f, attr::SWITCH_INFO, 0, &leaf_path, data).unwrap();
    assert!(lid_get(&mut f, far_lid, attr::NODE_INFO, 0).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::NoRoute));
}

#[test]
fn lid_routing_needs_active_ports_unless_told_otherwise() {
    let topo = gen::fat_tree_2level(2, 1, 1, 1).unwrap();
    let mut f = fabric(&topo);
    let p = bring_up(&mut f);
    let far = p
        .found
        .iter()
        .position(|n| !n.is_switch && n.path.len() == 4)
        .unwrap();
    // Bounce a link on the way: it trains back to Init, not Active.
    let spine = p
        .found
        .iter()
        .position(|n| n.is_switch && n.path.len() == 2)
        .unwrap();
    let spine_path = p.found[spine].path.clone();
    let down_port = *p.found[spine].peers.keys().last().unwrap();
    assert_eq!(
        set_port_state(&mut f, &spine_path, down_port, PortState::Down)
            .unwrap()
            .status(),
        0
    );
    assert!(lid_get(&mut f, p.lids[far], attr::NODE_INFO, 0).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::PortNotActive));

    let options = SimOptions {
        lid_routing_needs_active: false,
        ..SimOptions::default()
    };
    let mut lax = SimFabric::with_options(&topo, 0, 1, options).unwrap();
    let p = bring_up(&mut lax);
    assert_eq!(
        set_port_state(&mut lax, &spine_path, down_port, PortState::Down)
            .unwrap()
            .status(),
        0
    );
    assert!(lid_get(&mut lax, p.lids[far], attr::NODE_INFO, 0).is_some());
}

#[test]
fn link_down_sets_port_state_change_and_traps_the_sm() {
    let topo = gen::fat_tree_2level(2, 2, 2, 2).unwrap();
    let mut f = fabric(&topo);
    let p = bring_up(&mut f);
    assert!(f.take_traps().is_empty());
    let spine = p
        .found
        .iter()
        .position(|n| n.is_switch && n.path.len() == 2)
        .unwrap();
    let spine_node = topo.find_node_by_guid(p.found[spine].guid).unwrap();
    let spine_path = p.found[spine].path.clone();
    // Pull a cable between the spine and the leaf the SM is not on.
    let (&port, &(peer, _)) = p.found[spine]
        .peers
        .iter()
        .find(|(_, &(peer, _))| p.found[peer].path.len() == 3)
        .unwrap();
    f.link_down(spine_node, port).unwrap();
    let info = dr_get(&mut f, attr::SWITCH_INFO, 0, &spine_path)
        .unwrap()
        .switch_info();
    assert!(info.port_state_change);
    let pi = dr_get(&mut f, attr::PORT_INFO, u32::from(port), &spine_path)
        .unwrap()
        .port_info();
    assert_eq!(
        (pi.port_state, pi.port_physical_state),
        (PortState::Down, PhysState::Polling)
    );

    // Both switches on the link trap; each trap names its issuer.
    let traps = f.take_traps();
    let issuers: Vec<u16> = traps
        .iter()
        .map(|t| {
            let packet = smp::Packet::new_checked(&t.mad[..]).unwrap();
            assert_eq!(packet.method(), method::TRAP);
            assert_eq!(packet.attribute_id(), attr::NOTICE);
            let notice =
                NoticeRepr::parse(&NoticePacket::new_checked(packet.data()).unwrap()).unwrap();
            assert_eq!(notice.trap_number(), Some(trap::LINK_STATE_CHANGE));
            assert_eq!(t.slid, notice.issuer_lid);
            notice.issuer_lid
        })
        .collect();
    let mut expected = vec![p.lids[spine], p.lids[peer]];
    expected.sort_unstable();
    let mut issuers_sorted = issuers.clone();
    issuers_sorted.sort_unstable();
    assert_eq!(issuers_sorted, expected);
    assert!(f.take_traps().is_empty(), "taking empties the queue");
    assert_eq!(f.counters().traps_delivered, 2);

    // Writing the bit clears it; writing 0 leaves it.
    let mut data = [0; DATA_LEN];
    let mut keep = info;
    keep.port_state_change = false;
    keep.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
    let r = dr_set(&mut f, attr::SWITCH_INFO, 0, &spine_path, data).unwrap();
    assert!(r.switch_info().port_state_change);
    info.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
    let r = dr_set(&mut f, attr::SWITCH_INFO, 0, &spine_path, data).unwrap();
    assert!(!r.switch_info().port_state_change);

    // The cable back: Init on both ends, another pair of traps.
    f.link_up(spine_node, port).unwrap();
    assert_eq!(f.port_state(spine_node, port), Some(PortState::Init));
    assert_eq!(f.port_state_change(spine_node), Some(true));
    assert_eq!(f.take_traps().len(), 2);
    assert!(f.link_down(spine_node, 0).is_err());
    assert!(f.link_up(999, 1).is_err());
}

#[test]
fn traps_need_lids_unless_delivered_always() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    let mut f = fabric(&topo);
    f.link_down(leaf, 3).unwrap();
    assert!(f.take_traps().is_empty());
    assert_eq!(f.counters().traps_lost, 2);
    assert_eq!(f.port_state_change(leaf), Some(true));

    let options = SimOptions {
        trap_delivery: TrapDelivery::Always,
        ..SimOptions::default()
    };
    let mut f = SimFabric::with_options(&topo, 0, 1, options).unwrap();
    f.link_down(leaf, 3).unwrap();
    let traps = f.take_traps();
    assert_eq!(traps.len(), 2);
    assert!(traps.iter().all(|t| t.slid == 0));
    assert!(traps.iter().any(|t| t.node == leaf));
}

#[test]
fn removed_switches_fall_silent_and_come_back_reset() {
    let topo = gen::fat_tree_2level(2, 2, 1, 2).unwrap();
    let mut f = fabric(&topo);
    let p = bring_up(&mut f);
    let spine = p
        .found
        .iter()
        .position(|n| n.is_switch && n.path.len() == 2)
        .unwrap();
    let spine_node = topo.find_node_by_guid(p.found[spine].guid).unwrap();
    let path = p.found[spine].path.clone();
    f.remove_node(spine_node).unwrap();
    assert!(!f.is_present(spine_node));
    assert!(dr_get(&mut f, attr::NODE_INFO, 0, &path).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::NoLink));
    // Its neighbours lost a link each, and said so.
    assert_eq!(f.take_traps().len(), 2);
    f.restore_node(spine_node).unwrap();
    let reply = dr_get(&mut f, attr::PORT_INFO, 0, &path).unwrap();
    assert_eq!(
        reply.port_info().lid,
        0,
        "a power-cycled switch forgets its LID"
    );
    assert_eq!(f.lft(spine_node).map(<[u8]>::len), Some(0));
    assert!(f.remove_node(1000).is_err());
}

#[test]
fn unsupported_requests_get_error_statuses() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let leaf = [1];
    let cases: Vec<(smp::Repr, u16)> = vec![
        // NodeInfo and NodeDescription are read-only.
        (
            smp::Repr::directed_set(1, attr::NODE_INFO, 0, 0, &leaf, [0; 64]).unwrap(),
            0x0C,
        ),
        (
            smp::Repr::directed_set(1, attr::NODE_DESCRIPTION, 0, 0, &leaf, [0; 64]).unwrap(),
            0x0C,
        ),
        // An attribute the SMA does not have (GUIDInfo it has: alias GUIDs).
        (
            smp::Repr::directed_get(1, 0x7777, 0, 0, &leaf).unwrap(),
            0x0C,
        ),
        // Switch attributes on a CA.
        (
            smp::Repr::directed_get(1, attr::LINEAR_FORWARDING_TABLE, 0, 0, &[]).unwrap(),
            0x0C,
        ),
        (
            smp::Repr::directed_get(1, attr::SWITCH_INFO, 0, 0, &[]).unwrap(),
            0x0C,
        ),
        // No SM behind a switch.
        (
            smp::Repr::directed_get(1, attr::SM_INFO, 0, 0, &leaf).unwrap(),
            0x0C,
        ),
        // LFT block 768 is past LinearFDBCap (49152 LIDs).
        (
            smp::Repr::directed_get(1, attr::LINEAR_FORWARDING_TABLE, 768, 0, &leaf).unwrap(),
            0x1C,
        ),
        (
            smp::Repr::directed_get(1, attr::LINEAR_FORWARDING_TABLE, 1 << 20, 0, &leaf).unwrap(),
            0x1C,
        ),
        // MFT block 32 is past MulticastFDBCap (1024); position 1 past 4 ports.
        (
            smp::Repr::directed_get(1, attr::MULTICAST_FORWARDING_TABLE, 32, 0, &leaf).unwrap(),
            0x1C,
        ),
        (
            smp::Repr::directed_get(1, attr::MULTICAST_FORWARDING_TABLE, 1 << 28, 0, &leaf)
                .unwrap(),
            0x1C,
        ),
        // NodeInfo takes no modifier.
        (
            smp::Repr::directed_get(1, attr::NODE_INFO, 1, 0, &leaf).unwrap(),
            0x1C,
        ),
        // SL2VL of a port the switch lacks; VLArb block 0 does not exist.
        (
            smp::Repr::directed_get(1, attr::SL_TO_VL_MAPPING_TABLE, 0x0109, 0, &leaf).unwrap(),
            0x1C,
        ),
        (
            smp::Repr::directed_get(1, attr::VL_ARBITRATION_TABLE, 1, 0, &leaf).unwrap(),
            0x1C,
        ),
        // VLArb entries 32-63 beyond a cap of 8.
        (
            smp::Repr::directed_get(1, attr::VL_ARBITRATION_TABLE, 0x0002_0001, 0, &leaf).unwrap(),
            0x1C,
        ),
    ];
    for (request, expected) in cases {
        let reply = send(&mut f, PERMISSIVE_LID, &request)
            .unwrap_or_else(|| panic!("no answer to {request:?}"));
        assert_eq!(
            reply.status(),
            expected,
            "{:#x} {:#x}",
            request.attribute_id,
            request.attribute_modifier
        );
    }
    // A method the SMA does not know.
    let mut send_method = smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &leaf).unwrap();
    send_method.method = method::SEND;
    assert_eq!(
        send(&mut f, PERMISSIVE_LID, &send_method).unwrap().status(),
        status::UNSUPPORTED_METHOD
    );
    // LinearFDBTop at LinearFDBCap is out of range.
    let mut info = dr_get(&mut f, attr::SWITCH_INFO, 0, &leaf)
        .unwrap()
        .switch_info();
    assert_eq!(info.linear_fdb_cap, 49152);
    info.linear_fdb_top = 49152;
    let mut data = [0; DATA_LEN];
    info.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
    let r = dr_set(&mut f, attr::SWITCH_INFO, 0, &leaf, data).unwrap();
    assert_eq!(r.status(), 0x1C);
    assert_eq!(
        r.switch_info().linear_fdb_top,
        0,
        "a refused Set changes nothing"
    );
    assert!(f.counters().error_status >= 16);
    assert!(f.counters().by_attribute[&attr::SWITCH_INFO].errors >= 2);
}

#[test]
fn tables_round_trip_through_get_and_set() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let leaf = [1];
    // MFT block 1, position 0.
    let mut masks = [0u8; DATA_LEN];
    masks[0..2].copy_from_slice(&0x000Au16.to_be_bytes());
    dr_set(&mut f, attr::MULTICAST_FORWARDING_TABLE, 1, &leaf, masks).unwrap();
    assert_eq!(
        dr_get(&mut f, attr::MULTICAST_FORWARDING_TABLE, 1, &leaf)
            .unwrap()
            .repr
            .data,
        masks
    );
    assert_eq!(
        dr_get(&mut f, attr::MULTICAST_FORWARDING_TABLE, 0, &leaf)
            .unwrap()
            .repr
            .data,
        [0; 64]
    );
    // SL2VL for in 1 → out 3; then all pairs at once.
    let mut table = [0u8; DATA_LEN];
    table[..8].copy_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x67]);
    assert_eq!(
        dr_set(&mut f, attr::SL_TO_VL_MAPPING_TABLE, 0x0103, &leaf, table)
            .unwrap()
            .status(),
        0
    );
    assert_eq!(
        dr_get(&mut f, attr::SL_TO_VL_MAPPING_TABLE, 0x0103, &leaf)
            .unwrap()
            .repr
            .data,
        table
    );
    assert_eq!(
        dr_get(&mut f, attr::SL_TO_VL_MAPPING_TABLE, 0x0301, &leaf)
            .unwrap()
            .repr
            .data,
        [0; 64]
    );
    let all = dr_set(&mut f, attr::SL_TO_VL_MAPPING_TABLE, 0x30000, &leaf, table).unwrap();
    assert_eq!((all.status(), all.repr.data), (0, table));
    assert_eq!(
        dr_get(&mut f, attr::SL_TO_VL_MAPPING_TABLE, 0x0402, &leaf)
            .unwrap()
            .repr
            .data,
        table
    );
    // A CA has one table per port.
    dr_set(&mut f, attr::SL_TO_VL_MAPPING_TABLE, 0, &[], table).unwrap();
    assert_eq!(
        dr_get(&mut f, attr::SL_TO_VL_MAPPING_TABLE, 0, &[])
            .unwrap()
            .repr
            .data,
        table
    );
    // VLArb low table of switch port 2, and of the CA.
    let mut arb = [0u8; DATA_LEN];
    arb[..4].copy_from_slice(&[0, 4, 1, 8]);
    dr_set(&mut f, attr::VL_ARBITRATION_TABLE, 0x0001_0002, &leaf, arb).unwrap();
    assert_eq!(
        dr_get(&mut f, attr::VL_ARBITRATION_TABLE, 0x0001_0002, &leaf)
            .unwrap()
            .repr
            .data,
        arb
    );
    assert_eq!(
        dr_get(&mut f, attr::VL_ARBITRATION_TABLE, 0x0003_0002, &leaf)
            .unwrap()
            .repr
            .data,
        [0; 64]
    );
    dr_set(&mut f, attr::VL_ARBITRATION_TABLE, 0x0003_0000, &[], arb).unwrap();
    assert_eq!(
        dr_get(&mut f, attr::VL_ARBITRATION_TABLE, 0x0003_0000, &[])
            .unwrap()
            .repr
            .data,
        arb
    );
    // P_Key tables: the default partition in entry 0; 128 entries on a
    // CA, 8 on a switch's port 0, none on its external ports.
    let pkeys = dr_get(&mut f, attr::P_KEY_TABLE, 0, &[]).unwrap();
    assert_eq!(&pkeys.repr.data[..4], &[0xFF, 0xFF, 0, 0]);
    let mut block = [0u8; DATA_LEN];
    block[62..].copy_from_slice(&0x8001u16.to_be_bytes());
    assert_eq!(
        dr_set(&mut f, attr::P_KEY_TABLE, 3, &[], block)
            .unwrap()
            .repr
            .data,
        block
    );
    assert_eq!(
        dr_get(&mut f, attr::P_KEY_TABLE, 4, &[]).unwrap().status(),
        0x1C
    );
    let sw = dr_get(&mut f, attr::P_KEY_TABLE, 0, &leaf).unwrap();
    assert_eq!((sw.status(), &sw.repr.data[..2]), (0, &[0xFF, 0xFF][..]));
    assert_eq!(
        dr_get(&mut f, attr::P_KEY_TABLE, 1 << 16, &leaf)
            .unwrap()
            .status(),
        0x1C
    );
    // NodeDescription is the topology's.
    let desc = dr_get(&mut f, attr::NODE_DESCRIPTION, 0, &leaf).unwrap();
    assert_eq!(&desc.repr.data[..7], b"leaf-0\0");
}

#[test]
fn sm_info_answers_where_an_sm_runs() {
    let topo = gen::kary_ntree(2, 2, 2).unwrap();
    let mut f = fabric(&topo);
    let own = dr_get(&mut f, attr::SM_INFO, 0, &[]).unwrap();
    assert_eq!(own.status(), 0);
    let other = sm_mad::SmInfoRepr {
        guid: topo.nodes[1].port_guid(1),
        priority: 5,
        state: sm_mad::SmState::Standby,
        ..Default::default()
    };
    // host-1 sits on leaf-0 port 2.
    assert_eq!(
        dr_get(&mut f, attr::SM_INFO, 0, &[1, 2]).unwrap().status(),
        0x0C
    );
    f.set_sm_info(1, 1, Some(other)).unwrap();
    let reply = dr_get(&mut f, attr::SM_INFO, 0, &[1, 2]).unwrap();
    assert_eq!(reply.status(), 0);
    let info = sm_mad::SmInfoRepr::parse(
        &sm_mad::SmInfoPacket::new_checked(&reply.repr.data[..]).unwrap(),
    )
    .unwrap();
    assert_eq!(info, other);
    let caps = dr_get(&mut f, attr::PORT_INFO, 0, &[1, 2])
        .unwrap()
        .port_info()
        .capability_mask;
    assert_ne!(caps & sm_mad::port_info::capability::IS_SM, 0);
    // DISABLE control packet.
    let reply = dr_set(&mut f, attr::SM_INFO, 3, &[1, 2], [0; 64]).unwrap();
    assert_eq!(reply.status(), 0);
    assert_eq!(reply.repr.data[20] & 0x0F, sm_mad::SmState::NotActive as u8);
    assert_eq!(
        dr_set(&mut f, attr::SM_INFO, 9, &[1, 2], [0; 64])
            .unwrap()
            .status(),
        0x1C
    );
}

#[test]
fn m_key_protects_a_port() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let leaf = [1];
    let keyed = PortInfoRepr {
        m_key: 0xBEEF,
        m_key_protect_bits: 1,
        ..Default::default()
    };
    assert_eq!(
        dr_set(&mut f, attr::PORT_INFO, 0, &leaf, port_info_data(&keyed))
            .unwrap()
            .status(),
        0
    );
    // Protect bits 1: a Get without the key passes with the key hidden.
    let pi = dr_get(&mut f, attr::PORT_INFO, 0, &leaf)
        .unwrap()
        .port_info();
    assert_eq!((pi.m_key, pi.m_key_protect_bits), (0, 1));
    // A Set without the key is dropped.
    assert!(set_port_state(&mut f, &leaf, 3, PortState::Armed).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::MKey));
    // With it, it passes.
    let with_key = smp::Repr::directed_set(
        1,
        attr::PORT_INFO,
        3,
        0xBEEF,
        &leaf,
        state_only(PortState::Armed),
    )
    .unwrap();
    assert_eq!(send(&mut f, PERMISSIVE_LID, &with_key).unwrap().status(), 0);
    let get_with_key = smp::Repr::directed_get(1, attr::PORT_INFO, 0, 0xBEEF, &leaf).unwrap();
    let pi = send(&mut f, PERMISSIVE_LID, &get_with_key)
        .unwrap()
        .port_info();
    assert_eq!((pi.m_key, pi.m_key_violations), (0xBEEF, 1));
}

#[test]
fn directed_routes_with_lid_routed_ends() {
    let topo = gen::fat_tree_2level(2, 1, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let p = bring_up(&mut f);
    let sm_lid = p.lids[0];
    let spine = p
        .found
        .iter()
        .position(|n| n.is_switch && n.path.len() == 2)
        .unwrap();
    let far_host = p
        .found
        .iter()
        .position(|n| !n.is_switch && n.path.len() == 4)
        .unwrap();
    let far_leaf = p
        .found
        .iter()
        .position(|n| n.is_switch && n.path.len() == 3)
        .unwrap();
    let host_port = p.found[far_host].path[3];

    // LID-routed to the far leaf, then one directed hop to a host on it;
    // the response comes back LID-routed from the leaf to the SM.
    let mut request = smp::Repr::directed_get(3, attr::NODE_INFO, 0, 0, &[host_port]).unwrap();
    if let smp::Routing::Directed(dr) = &mut request.routing {
        dr.dr_slid = sm_lid;
    }
    let reply = f.handle_to(p.lids[far_leaf], &emit(&request).0);
    let reply = reply.unwrap_or_else(|| panic!("lost: {:?}", f.last_drop()));
    assert_eq!(reply.slid, p.lids[far_leaf]);
    let packet = smp::Packet::new_checked(&reply.mad[..]).unwrap();
    let info = NodeInfoPacket::new_checked(packet.data()).unwrap();
    assert_eq!(info.node_guid(), p.found[far_host].guid);
    assert_eq!(packet.hop_pointer(), 0);
    assert_eq!(packet.return_path()[1], info.local_port_num());

    // Directed to the spine, then LID-routed to the far host.
    let spine_path = p.found[spine].path.clone();
    let mut request = smp::Repr::directed_get(4, attr::NODE_INFO, 0, 0, &spine_path).unwrap();
    if let smp::Routing::Directed(dr) = &mut request.routing {
        dr.dr_dlid = p.lids[far_host];
    }
    let reply = send(&mut f, PERMISSIVE_LID, &request);
    let reply = reply.unwrap_or_else(|| panic!("lost: {:?}", f.last_drop()));
    assert_eq!(reply.node_info().node_guid(), p.found[far_host].guid);
    // A CA cannot end a directed part that goes on by LID.
    let mut request = smp::Repr::directed_get(5, attr::NODE_INFO, 0, 0, &[]).unwrap();
    if let smp::Routing::Directed(dr) = &mut request.routing {
        dr.dr_dlid = p.lids[far_host];
    }
    assert!(send(&mut f, PERMISSIVE_LID, &request).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::NotASwitch));
}

#[test]
fn paths_that_lead_nowhere_are_dropped() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        // Leaf port 2 has no cable.
        (vec![1, 2], DropReason::NoLink),
        // The SM's CA has only port 1.
        (vec![2], DropReason::BadPort),
        // Leaf has 4 ports; port 0 is no exit.
        (vec![1, 9], DropReason::BadPort),
        (vec![1, 0], DropReason::BadPort),
        // Through a CA: host → leaf → back to the host → onwards.
        (vec![1, 1, 1], DropReason::NotASwitch),
    ];
    for (path, reason) in cases {
        assert!(
            dr_get(&mut f, attr::NODE_INFO, 0, &path).is_none(),
            "{path:?}"
        );
        assert_eq!(f.last_drop(), Some(reason), "{path:?}");
    }
    assert_eq!(f.counters().dropped, 5);
    assert_eq!(f.counters().handled, 0);
}

#[test]
fn hop_counts_up_to_63_work_and_64_is_refused() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    // Bounce between leaf-0 and the spine behind its port 3: out by 3,
    // back by the port the SMP came in by.
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    let (spine, spine_port) = topo.peer(leaf, 3).unwrap();
    let mut path = vec![1];
    while path.len() < 63 {
        path.push(if path.len() % 2 == 1 { 3 } else { spine_port });
    }
    // Even hops end at the spine, odd ones back at the leaf.
    let reply = dr_get(&mut f, attr::NODE_INFO, 0, &path[..62]).expect("62 hops");
    assert_eq!(reply.node_info().node_guid(), topo.nodes[spine].node_guid);
    let reply = dr_get(&mut f, attr::NODE_INFO, 0, &path).expect("63 hops");
    assert_eq!(reply.node_info().node_guid(), topo.nodes[leaf].node_guid);
    assert_eq!(reply.node_info().local_port_num(), 3);
    assert_eq!(reply.repr.directed().unwrap().hop_count, 63);

    let mut bytes = emit(&smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &path).unwrap());
    bytes.0[7] = 64;
    assert!(f.handle(&bytes.0).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::Malformed));
    assert!(smp::DirectedRoute::new(&[1; 64]).is_err());
}

#[test]
fn malformed_mads_get_no_answer() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let good = emit(&smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &[1]).unwrap());
    assert!(f.handle(&good.0).is_some());
    let mut cases: Vec<Vec<u8>> =
        vec![vec![], good.0[..255].to_vec(), [&good.0[..], &[0]].concat()];
    for (offset, value) in [
        (0, 2),    // BaseVersion
        (1, 0x03), // SA class on QP0
        (2, 2),    // ClassVersion
        (3, 0x81), // a response
        (6, 3),    // hop pointer past hop count + 1
        (7, 200),  // hop count
    ] {
        let mut bad = good.0.to_vec();
        bad[offset] = value;
        cases.push(bad);
    }
    // The D bit on a request.
    let mut inbound = good.0.to_vec();
    inbound[4] |= 0x80;
    cases.push(inbound);
    let n = cases.len() as u64;
    for case in cases {
        assert!(f.handle(&case).is_none());
    }
    let c = f.counters();
    assert_eq!(c.dropped, n);
    assert_eq!(c.drops_for(DropReason::Malformed), n - 2);
    assert_eq!(c.drops_for(DropReason::NotARequest), 2);
    // TrapRepress is taken without an answer and without counting a loss.
    let mut repress = smp::Repr::lid_get(1, attr::NOTICE, 0, 0);
    repress.method = method::TRAP_REPRESS;
    assert!(f.handle(&emit(&repress).0).is_none());
    assert_eq!(f.counters().trap_represses, 1);
    assert_eq!(f.counters().dropped, n);
}

#[test]
fn injected_loss_drops_answers_but_keeps_sets() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    let mut f = fabric(&topo);
    f.set_answer_loss(leaf, 2).unwrap();
    assert!(dr_get(&mut f, attr::NODE_INFO, 0, &[1]).is_some());
    let lid = port_info_data(&PortInfoRepr {
        lid: 9,
        ..Default::default()
    });
    assert!(dr_set(&mut f, attr::PORT_INFO, 0, &[1], lid).is_none());
    assert_eq!(f.last_drop(), Some(DropReason::Injected));
    assert_eq!(f.port_lid(leaf, 0), Some(9));
    assert!(dr_get(&mut f, attr::NODE_INFO, 0, &[1]).is_some());
    f.set_answer_loss(leaf, 0).unwrap();
    assert!((0..4).all(|_| dr_get(&mut f, attr::NODE_INFO, 0, &[1]).is_some()));
    assert!(f.set_answer_loss(99, 1).is_err());
}

#[test]
fn bad_construction_is_refused() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    assert!(SimFabric::from_topology(&topo, 99, 1).is_err());
    assert!(SimFabric::from_topology(&topo, 0, 0).is_err());
    assert!(SimFabric::from_topology(&topo, 0, 2).is_err());
    assert!(SimFabric::from_topology(&topo, leaf, 1).is_err());
    assert!(SimFabric::from_topology(&topo, leaf, 0).is_ok());
    let bad = SimOptions {
        vl_cap: 9,
        ..SimOptions::default()
    };
    assert!(SimFabric::with_options(&topo, 0, 1, bad).is_err());
    let mut broken = topo.clone();
    broken.links[0].a.1 = 77;
    assert!(SimFabric::from_topology(&broken, 0, 1).is_err());
}

#[test]
fn an_sm_on_a_switch_sends_from_port_0() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let leaf = topo.find_node_by_desc("leaf-0").unwrap();
    let mut f = SimFabric::from_topology(&topo, leaf, 0).unwrap();
    let local = dr_get(&mut f, attr::NODE_INFO, 0, &[]).unwrap();
    assert_eq!(local.node_info().local_port_num(), 0);
    let host = dr_get(&mut f, attr::NODE_INFO, 0, &[1]).unwrap();
    assert_eq!(host.node_info().node_guid(), topo.nodes[0].node_guid);
    let found = discover(&mut f);
    assert_matches_topology(&found, &topo);
}

#[test]
fn responses_keep_the_request_bytes_they_do_not_own() {
    let topo = gen::kary_ntree(2, 2, 1).unwrap();
    let mut f = fabric(&topo);
    let request =
        smp::Repr::directed_get(0xDEAD_BEEF_0000_0001, attr::NODE_INFO, 0, 0x55, &[1, 3]).unwrap();
    let reply = send(&mut f, PERMISSIVE_LID, &request).unwrap();
    assert_eq!(reply.repr.transaction_id, 0xDEAD_BEEF_0000_0001);
    assert_eq!(reply.repr.m_key, 0x55);
    assert_eq!(reply.bytes.len(), 256);
    assert_eq!(&reply.bytes[128..131], &[0, 1, 3]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let mut f = fabric(&topo);
        let _ = f.handle(&bytes);
        let _ = f.handle_to(3, &bytes);
    }

    #[test]
    fn mutated_smps_never_panic(
        class in prop_oneof![Just(0x01u8), Just(0x81u8)],
        method in prop_oneof![Just(1u8), Just(2u8), any::<u8>()],
        attribute in prop_oneof![Just(0x11u16), Just(0x15), Just(0x12), Just(0x19), Just(0x1B),
                                 Just(0x17), Just(0x18), Just(0x20), Just(0x10), any::<u16>()],
        modifier in prop_oneof![0u32..8, any::<u32>()],
        hops in 0u8..=63,
        pointer in 0u8..=64,
        path in proptest::collection::vec(0u8..=6, 64),
        data in proptest::collection::vec(any::<u8>(), 64),
        dlid in any::<u16>(),
        dr_lids in (any::<bool>(), any::<u16>(), any::<bool>(), any::<u16>()),
    ) {
        let topo = gen::fat_tree_2level(2, 1, 2, 1).unwrap();
        let mut f = fabric(&topo);
        let mut mad = Mad::zeroed();
        let mut p = mad.smp_mut();
        p.set_base_version(1);
        p.set_mgmt_class(class);
        p.set_class_version(1);
        p.set_method(method);
        p.set_attribute_id(attribute);
        p.set_attribute_modifier(modifier);
        p.set_hop_count(hops);
        p.set_hop_pointer(pointer);
        p.set_dr_slid(if dr_lids.0 { dr_lids.1 } else { PERMISSIVE_LID });
        p.set_dr_dlid(if dr_lids.2 { dr_lids.3 } else { PERMISSIVE_LID });
        p.initial_path_mut().copy_from_slice(&path);
        p.data_mut().copy_from_slice(&data);
        if let Some(reply) = f.handle_to(dlid, &mad.0) {
            prop_assert_eq!(reply.mad.len(), 256);
            prop_assert_eq!(reply.mad[3], method::GET_RESP);
        }
        let c = f.counters();
        prop_assert_eq!(c.sent, c.answered + c.dropped + c.trap_represses);
    }
}
