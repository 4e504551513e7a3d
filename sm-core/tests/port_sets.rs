//! One PortInfo Set per port before activation (issue 14, "fewer SMPs
//! where IBA allows"): on the embedded fabric, with switches that enforce
//! partitions, a first sweep from IBA reset state writes each port's LID
//! fields, link parameters, arming and partition enforcement in one Set,
//! and the ports end holding what the SM wants; a port already Active
//! whose LID must change gets one Set, PortState NoChange, and stays
//! Active; a LID that does not take still fails the sweep's LIDs and
//! marks it incomplete.

mod common;

use std::collections::{BTreeMap, HashMap};

use common::{bin_dir, sm_location, workspace, Spy};
use sm_abi::NodeKind;
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::partition::{resolve, EndPortKind};
use sm_core::sim::{SimFabric, SimOptions, SimPort};
use sm_core::sweep::{self, Guid2Lid, HeldTables, SmpClient, SmpOp, SweepOptions, DEFAULT_SUBNET_PREFIX};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::{attr, method};
use sm_mad::smp::{self, Routing, DATA_LEN};
use sm_mad::{PortInfoPacket, PortInfoRepr, PortState};
use sm_topology::Topology;

/// Entries of each switch external port's P_Key table.
const ENFORCEMENT_CAP: u16 = 32;

/// A PortInfo Set of `mad`: (directed route, port the modifier names,
/// the attribute sent).
fn port_info_set(mad: &[u8]) -> Option<(Vec<u8>, u8, PortInfoRepr)> {
    let r = smp::Packet::new_checked(mad).and_then(|p| smp::Repr::parse(&p)).ok()?;
    if r.method != method::SET || r.attribute_id != attr::PORT_INFO {
        return None;
    }
    let Routing::Directed(dr) = r.routing else { return None };
    let info = PortInfoPacket::new_checked(&r.data[..])
        .and_then(|p| PortInfoRepr::parse(&p))
        .expect("the SM sends well-formed PortInfo");
    Some((dr.initial_ports().to_vec(), r.attribute_modifier as u8, info))
}

struct Bed {
    topo: Topology,
    sim: SimFabric,
    registry: Registry,
    options: OnceOptions<'static>,
    config: Config,
    g2l: Guid2Lid,
    held: HeldTables,
    _dir: tempfile::TempDir,
}

/// fat-tree-64 with switches that enforce partitions, two partitions (one
/// of them limited for the CAs) and LMC 1.
fn bed() -> Bed {
    let topo = sm_topology::parse_file(workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    let options = SimOptions { partition_enforcement_cap: ENFORCEMENT_CAP, ..SimOptions::default() };
    let sim = SimFabric::with_options(&topo, node, port, options).expect("sim");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("partitions.conf");
    std::fs::write(&file, "Default=0x7fff, ipoib : ALL=full ;\nstorage=0x0010 : ALL_CAS=limited, ALL_SWITCHES=full ;\n")
        .expect("partitions.conf");
    let config = Config { partition_config_file: Some(file), ..Config::default() };
    let sweep = SweepOptions { lmc: 1, ..SweepOptions::default() };
    Bed {
        topo,
        sim,
        registry: Registry::scan(&[bin_dir()]),
        options: OnceOptions { sweep, engines: "minhop", dump_dir: None },
        config,
        g2l: Guid2Lid::default(),
        held: HeldTables::default(),
        _dir: dir,
    }
}

impl Bed {
    /// One heavy sweep; every PortInfo Set it sent.
    fn sweep(&mut self) -> (OnceOutcome, Vec<(Vec<u8>, u8, PortInfoRepr)>) {
        let mut sets = Vec::new();
        let note = |mad: &[u8]| sets.extend(port_info_set(mad));
        let mut spy = Spy { inner: SimPort::new(&mut self.sim), note };
        let out = sm_core::pipeline::once(&mut spy, &self.options, &self.registry, &self.config, &mut self.g2l, &mut self.held)
            .expect("sweep");
        assert!(out.accepted.is_some(), "{:?}", out.describe());
        (out, sets)
    }

    /// Writes `info` into `port` of the node at the end of `path`, as
    /// someone other than this SM would (no state change).
    fn set_behind_the_sms_back(&mut self, path: &[u8], port: usize, mut info: PortInfoRepr) {
        info.port_state = PortState::NoChange;
        info.port_physical_state = sm_mad::PhysState::NoChange;
        let mut data = [0u8; DATA_LEN];
        info.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
        let mut sim_port = SimPort::new(&mut self.sim);
        let mut client = SmpClient::new(&mut sim_port, 1);
        client.run_many(&[SmpOp::set(attr::PORT_INFO, port as u32, path, data)]).remove(0).expect("PortInfo Set");
    }

    /// The simulator's (node, port) each Set of `sets` went to, in order,
    /// through the routes the sweep's fabric holds.
    fn targets(&self, out: &OnceOutcome, sets: &[(Vec<u8>, u8, PortInfoRepr)]) -> Vec<((usize, u8), PortInfoRepr)> {
        let sim_index: HashMap<u64, usize> = self.topo.nodes.iter().enumerate().map(|(i, n)| (n.node_guid, i)).collect();
        let mut by_route: HashMap<(Vec<u8>, u8), (usize, u8)> = HashMap::new();
        for n in &out.sweep.fabric.nodes {
            let i = sim_index[&n.guid];
            for (p, slot) in n.ports.iter().enumerate() {
                let path = if n.is_switch() { Some(&n.path) } else { slot.path.as_ref() };
                if let Some(path) = path {
                    by_route.insert((path.to_vec(), p as u8), (i, p as u8));
                }
            }
        }
        sets.iter()
            .map(|(path, port, info)| {
                let at = *by_route.get(&(path.clone(), *port)).unwrap_or_else(|| panic!("a Set to {path:?} port {port}"));
                (at, *info)
            })
            .collect()
    }
}

/// The fabric's addressed ports and linked ports, by the simulator's
/// indices: (node, port) → peer (none for switch port 0).
fn ports(topo: &Topology) -> BTreeMap<(usize, u8), Option<(usize, u8)>> {
    let mut out = BTreeMap::new();
    for l in &topo.links {
        out.insert(l.a, Some(l.b));
        out.insert(l.b, Some(l.a));
    }
    for (i, _) in topo.nodes.iter().enumerate().filter(|(_, n)| n.is_switch()) {
        out.insert((i, 0), None);
    }
    out
}

#[test]
fn a_first_sweep_sets_each_port_once_before_activation_and_the_ports_hold_what_the_sm_wants() {
    let mut bed = bed();
    let all = ports(&bed.topo);
    // IBA reset state: no LIDs, linked ports Init at one VL.
    for (&(n, p), peer) in &all {
        let info = bed.sim.held_port_info(n, p).expect("port");
        assert_eq!((info.lid, info.master_sm_lid), (0, 0), "port {n}/{p}");
        if peer.is_some() {
            assert_eq!((bed.sim.port_state(n, p), info.operational_vls), (Some(PortState::Init), 1), "port {n}/{p}");
        }
    }
    let switches = bed.topo.nodes.iter().filter(|n| n.is_switch()).count();
    let (out, sets) = bed.sweep();
    let sets = bed.targets(&out, &sets);

    // Per port: the PortInfo Sets before the one that makes it Active
    // (switch port 0, Active from power-up, has none such: all its Sets).
    let mut before_active: BTreeMap<(usize, u8), usize> = BTreeMap::new();
    let mut activated: BTreeMap<(usize, u8), bool> = BTreeMap::new();
    for (at, info) in &sets {
        let done = activated.entry(*at).or_default();
        if info.port_state == PortState::Active {
            *done = true;
        } else if !*done {
            *before_active.entry(*at).or_default() += 1;
        }
    }
    for (at, n) in &before_active {
        assert!(*n <= 1, "port {at:?} got {n} PortInfo Sets before its activation");
    }
    for (&(n, p), peer) in &all {
        assert!(peer.is_none() || activated.get(&(n, p)) == Some(&true), "port {n}/{p} activated by a Set");
        assert_eq!(bed.sim.port_state(n, p), Some(PortState::Active), "port {n}/{p}");
    }

    // What the SM wants, computed here from the configuration and the
    // topology, not read from the sweep.
    let link = bed.config.link_config();
    let caps = SimOptions::default();
    let sm = out.sweep.fabric.nodes[0].ports[usize::from(out.sweep.fabric.sm_port)].info.expect("SM port").lid;
    let lmc = bed.options.sweep.lmc;
    let settings = bed.config.partition_settings();
    let partitions = std::sync::Arc::new(settings.load().expect("partitions.conf"));
    let end_ports: Vec<EndPortKind> = bed
        .topo
        .nodes
        .iter()
        .flat_map(|n| {
            let first = if n.is_switch() { 0 } else { 1 };
            let last = if n.is_switch() { 0 } else { n.num_ports };
            (first..=last).map(move |p| EndPortKind { guid: n.port_guid(p), kind: n.kind })
        })
        .collect();
    let sm_guid = out.sweep.fabric.nodes[0].ports[usize::from(out.sweep.fabric.sm_port)].guid;
    let tables = resolve(partitions, &end_ports, sm_guid, settings.allow_both).tables;
    let mut lids: BTreeMap<u16, (usize, u8)> = BTreeMap::new();
    let (mut lid_ports, mut link_ports, mut enforced) = (0usize, 0usize, 0usize);
    for (&(n, p), &peer) in &all {
        let node = &bed.topo.nodes[n];
        let info = bed.sim.held_port_info(n, p).expect("port");
        let at = format!("{} port {p}", node.name);
        let addressed = !node.is_switch() || p == 0;
        if addressed {
            lid_ports += 1;
            let block = if node.is_switch() { 0 } else { lmc };
            assert_eq!(info.lmc, block, "{at}: LMC");
            assert!(info.lid != 0 && info.lid.is_multiple_of(1 << block), "{at}: LID {:#x}", info.lid);
            assert_eq!(bed.g2l.entries.get(&node.port_guid(p)).map(|e| e.0), Some(info.lid), "{at}: the LID assigned");
            assert_eq!(lids.insert(info.lid, (n, p)), None, "{at}: LID {:#x} twice", info.lid);
            assert_eq!((info.master_sm_lid, info.master_sm_sl), (sm, bed.options.sweep.sm_sl), "{at}: master SM");
            assert_eq!(info.gid_prefix, DEFAULT_SUBNET_PREFIX, "{at}: GID prefix");
            assert_eq!(info.subnet_timeout, link.subnet_timeout, "{at}: SubnetTimeOut");
        }
        let Some((peer, _)) = peer else { continue };
        link_ports += 1;
        assert_eq!(info.operational_vls, caps.vl_cap.min(link.max_op_vls), "{at}: OperationalVLs");
        assert_eq!(info.neighbor_mtu, caps.mtu_cap, "{at}: NeighborMTU");
        let peer_switch = bed.topo.nodes[peer].is_switch();
        if node.is_switch() {
            let (hoq, stall) =
                if peer_switch { (link.hoq_life, link.vl_stall_count) } else { (link.leaf_hoq_life, link.leaf_vl_stall_count) };
            assert_eq!((info.hoq_life, info.vl_stall_count), (hoq, stall), "{at}: HOQLife, VLStallCount");
            let bits = (info.partition_enforcement_inbound, info.partition_enforcement_outbound);
            if peer_switch {
                assert_eq!(bits, (false, false), "{at}: switch-to-switch ports are never enforced");
            } else {
                enforced += 1;
                assert_eq!(bits, settings.enforce.bits(), "{at}: enforcement");
                // The table the enforcement checks against is the peer's.
                let peer_port = bed.topo.links.iter().find_map(|l| {
                    (l.a == (n, p)).then_some(l.b).or_else(|| (l.b == (n, p)).then_some(l.a))
                });
                let (pn, pp) = peer_port.expect("peer");
                let mut want = tables[&bed.topo.nodes[pn].port_guid(pp)].clone();
                want.resize(usize::from(ENFORCEMENT_CAP), 0);
                assert_eq!(pkey_block(&mut bed.sim, &out, node.node_guid, p), want, "{at}: P_Key table");
            }
        } else {
            assert_eq!(node.kind, NodeKind::Ca);
        }
    }
    assert!(enforced > 0 && lid_ports > 0 && link_ports > 0);
    assert_eq!(out.sweep.program.set, lid_ports, "every LID written: {:?}", out.sweep.program);
    // Every linked port's link parameters, and SubnetTimeOut on switch
    // port 0.
    assert_eq!(out.program.link.set, link_ports + switches, "{:?}", out.program.link);
    assert_eq!(out.program.arm.set, link_ports, "every linked port armed");
    assert_eq!(out.program.pkey.failed, 0, "{:?}", out.program.pkey);

    // The three passes apart would have sent, per port, a Set for each of
    // its LID fields, its link parameters and arming, and its enforcement
    // bits; together they sent one per port.
    let separately = lid_ports + (link_ports + switches) + enforced;
    let together: usize = before_active.values().sum();
    assert_eq!(together, before_active.len(), "one Set per port");
    assert_eq!(together, link_ports + switches);
    assert!(together < separately, "{together} Sets, {separately} apart");
    // The link phase sent these Sets and nothing else; apart, the sweep
    // would have sent `separately` Sets instead.
    assert_eq!(out.program.link.smps.sent, together as u64);
    let total = out.sweep.total_smps() + out.program.total_smps();
    let apart = total - together as u64 + separately as u64;
    assert!(total < apart, "{total} SMPs, {apart} with the passes apart");
    assert_eq!(out.sweep.program_smps.sent, 0, "the LIDs went with the link parameters");
    assert_eq!(out.program.pkey.smps.sets(attr::PORT_INFO), 0, "the enforcement went with the link parameters");

    // A second sweep finds everything in place: no PortInfo Set at all.
    let (again, sets) = bed.sweep();
    assert!(sets.is_empty(), "{} PortInfo Sets", sets.len());
    assert_eq!((again.sweep.program.set, again.sweep.program.unchanged), (0, lid_ports));
    assert_eq!((again.program.pkey.set, again.program.pkey.failed), (0, 0));
}

/// The first P_Key block of `port` of the switch of NodeGUID `guid`, read
/// by SMP.
fn pkey_block(sim: &mut SimFabric, out: &OnceOutcome, guid: u64, port: u8) -> Vec<u16> {
    let n = out.sweep.fabric.nodes.iter().find(|n| n.guid == guid).expect("switch");
    let mut sim_port = SimPort::new(sim);
    let mut client = SmpClient::new(&mut sim_port, 1);
    let modifier = sm_mad::pkey_table::modifier(port, 0);
    let answer = client.run_many(&[SmpOp::get(attr::P_KEY_TABLE, modifier, &n.path)]).remove(0).expect("P_KeyTable Get");
    let packet = sm_mad::pkey_table::Packet::new_checked(&answer[..sm_mad::pkey_table::LEN]).expect("block");
    sm_mad::pkey_table::Repr::parse(&packet).expect("block").pkeys.to_vec()
}

#[test]
fn an_active_port_whose_lid_must_change_gets_one_set_with_no_state_change_and_stays_active() {
    let mut bed = bed();
    let (first, _) = bed.sweep();
    // Two hosts other than the SM's: the second takes the first's LID
    // behind the SM's back (a LID conflict); the next sweep keeps the
    // first's and gives the second its own back.
    let f = &first.sweep.fabric;
    let hosts: Vec<usize> = (1..f.nodes.len()).filter(|&i| !f.nodes[i].is_switch()).take(2).collect();
    let [a, b] = hosts[..] else { panic!("two hosts") };
    let port_of = |i: usize| (1..f.nodes[i].ports.len()).find(|&p| f.nodes[i].ports[p].info.is_some()).expect("a port");
    let (pa, pb) = (port_of(a), port_of(b));
    let lid_a = f.nodes[a].ports[pa].info.expect("info").lid;
    let mut taken = f.nodes[b].ports[pb].info.expect("info");
    let lid_b = taken.lid;
    let path_b = f.nodes[b].ports[pb].path.clone().expect("path");
    let sim_b = bed.topo.nodes.iter().position(|n| n.node_guid == f.nodes[b].guid).expect("b in the topology");
    taken.lid = lid_a;
    bed.set_behind_the_sms_back(&path_b, pb, taken);
    assert_eq!(bed.sim.held_port_info(sim_b, pb as u8).map(|i| i.lid), Some(lid_a));
    assert_eq!(bed.sim.port_state(sim_b, pb as u8), Some(PortState::Active));

    let (again, sets) = bed.sweep();
    let sets = bed.targets(&again, &sets);
    assert_eq!(sets.len(), 1, "one PortInfo Set in the sweep: {sets:?}");
    let ((node, port), set) = sets[0];
    assert_eq!((node, port), (sim_b, pb as u8), "to the port that lost its LID");
    assert_eq!(set.port_state, PortState::NoChange);
    assert_eq!(set.lid, lid_b, "its own LID back");
    assert_eq!(bed.sim.port_state(sim_b, pb as u8), Some(PortState::Active), "it stays Active");
    assert_eq!(bed.sim.held_port_info(sim_b, pb as u8).map(|i| i.lid), Some(lid_b));
    assert_eq!((again.sweep.program.set, again.sweep.program.failed), (1, 0), "{:?}", again.sweep.program);
    assert_eq!(again.sweep.lids.from_file, 1, "{:?}", again.sweep.lids);
    assert_eq!(again.program.link.smps.sets(attr::PORT_INFO), 1, "counted where it went");
    assert_eq!((again.program.link.set, again.program.arm.set, again.program.activate.set), (0, 0, 0));
}

#[test]
fn a_lid_that_does_not_take_is_a_failure_and_marks_the_sweep_incomplete() {
    let mut bed = bed();
    // A host keyed by someone else (M_Key protection level 1, a key this
    // SM does not know): it answers Gets and drops every Set.
    let (fabric, _) = {
        let mut port = SimPort::new(&mut bed.sim);
        let mut client = SmpClient::new(&mut port, 1);
        sweep::discover_within(&mut client, &bed.options.sweep.limits()).expect("discovery")
    };
    let host = (1..fabric.nodes.len()).find(|&i| !fabric.nodes[i].is_switch()).expect("a host");
    let port = (1..fabric.nodes[host].ports.len()).find(|&p| fabric.nodes[host].ports[p].info.is_some()).expect("a port");
    let slot = &fabric.nodes[host].ports[port];
    let mut keyed = slot.info.expect("info");
    keyed.m_key = 0x7777;
    keyed.m_key_protect_bits = 1;
    let path = slot.path.clone().expect("path");
    bed.set_behind_the_sms_back(&path, port, keyed);
    let sim_host = bed.topo.nodes.iter().position(|n| n.node_guid == fabric.nodes[host].guid).expect("in the topology");

    let (out, _) = bed.sweep();
    assert_eq!(out.sweep.program.failed, 1, "the keyed host's LID: {:?}", out.sweep.program);
    assert!(out.sweep.fabric.incomplete, "a LID not written is tried again at the next sweep");
    assert_eq!(out.program.link.failed, 1, "the same Set carried its link parameters: {:?}", out.program.link);
    assert_eq!(bed.sim.held_port_info(sim_host, port as u8).map(|i| i.lid), Some(0), "the host took nothing");
    let others = bed.topo.nodes.len() - bed.topo.nodes.iter().filter(|n| n.is_switch()).count() - 1
        + bed.topo.nodes.iter().filter(|n| n.is_switch()).count();
    assert_eq!(out.sweep.program.set, others, "every other LID written");
}
