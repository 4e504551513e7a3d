//! Link parameters on the embedded fabric, whose ports power up at IBA
//! reset values (one data VL, 256-byte NeighborMTU, HOQ discard off): a
//! full sweep writes OperationalVLs, NeighborMTU, HOQLife, VLStallCount
//! and SubnetTimeOut as OpenSM's link manager does, once; the layered
//! engines' lanes are then operational on every link a packet crosses;
//! a node with a smaller VLCap or MTUCap bounds its links; and a port
//! past Init keeps its OperationalVLs and NeighborMTU whatever is Set.

mod common;

use common::{bin_dir, sm_location, workspace};
use sm_abi::NodeKind;
use sm_core::config::Config;
use sm_core::engines::chain::{judge, GateOptions};
use sm_core::engines::Registry;
use sm_core::sim::{PortCaps, SimFabric, SimOptions, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::attr;
use sm_mad::smp::{self, DATA_LEN, PERMISSIVE_LID};
use sm_mad::{Mad, PhysState, PortInfoPacket, PortInfoRepr, PortState};
use sm_topology::Topology;

fn run_once(sim: &mut SimFabric, engines: &str, config: &Config, g2l: &mut Guid2Lid, held: &mut HeldTables) -> OnceOutcome {
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines, dump_dir: None };
    sm_core::pipeline::once(&mut SimPort::new(sim), &options, &registry, config, g2l, held).expect("sweep")
}

/// Every linked port of the fabric, with its peer.
fn links(topo: &Topology) -> Vec<((usize, u8), (usize, u8))> {
    topo.links.iter().flat_map(|l| [(l.a, l.b), (l.b, l.a)]).collect()
}


/// Runs `engines` on `topo` and checks what OpenSM's link manager would
/// have written, that the routing's VLs are all operational, and that a
/// second sweep writes no link parameter.
fn check_engine(topo: &Topology, engines: &str, config: &Config) -> OnceOutcome {
    let (sm_node, sm_port) = sm_location(topo);
    let mut sim = SimFabric::from_topology(topo, sm_node, sm_port).expect("sim");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = run_once(&mut sim, engines, config, &mut g2l, &mut held);
    let routed = out.accepted.as_ref().unwrap_or_else(|| panic!("{engines} routes: {:?}", out.describe()));
    assert_eq!(out.program.link.failed, 0, "{:?}", out.program.link);
    let caps = SimOptions::default();
    for ((n, p), (peer, _)) in links(topo) {
        let info = sim.held_port_info(n, p).expect("port");
        assert_eq!(sim.port_state(n, p), Some(PortState::Active), "node {n} port {p}");
        // Both ends report the same caps here: the lower of the two is the cap.
        assert_eq!(info.operational_vls, caps.vl_cap.min(5), "node {n} port {p}");
        assert_eq!(info.neighbor_mtu, caps.mtu_cap, "node {n} port {p}");
        let (switch, peer_switch) = (topo.nodes[n].kind == NodeKind::Switch, topo.nodes[peer].kind == NodeKind::Switch);
        match (switch, peer_switch) {
            (true, true) => assert_eq!((info.hoq_life, info.vl_stall_count), (0x12, 7), "node {n} port {p}"),
            (true, false) => assert_eq!((info.hoq_life, info.vl_stall_count), (0x10, 7), "node {n} port {p}"),
            _ => assert_eq!(info.subnet_timeout, 18, "CA node {n} port {p}"),
        }
        // OpenSM's default thresholds (OSM_DEFAULT_ERROR_THRESHOLD).
        assert_eq!((info.local_phy_errors, info.overrun_errors), (8, 8), "node {n} port {p}");
    }
    assert!(sm_mad::port_info::vls::count(caps.vl_cap) >= routed.routing.vls_used, "{engines} uses {} VLs", routed.routing.vls_used);
    let faults = sim.vl_faults(&|s, d| routed.routing.path_sl.path_sl(s, d));
    assert!(faults.is_empty(), "{engines}: {} packets dropped, e.g. {}", faults.len(), faults[0]);
    // The fabric holds it all now: nothing is written again.
    let again = run_once(&mut sim, engines, config, &mut g2l, &mut held);
    assert_eq!((again.program.link.set, again.program.link.failed), (0, 0), "{:?}", again.program.link);
    assert!(again.program.link.unchanged > 0);
    out
}

fn torus66() -> Topology {
    // 6-rings: the layered engines need more than one VL.
    sm_topology::gen::torus(&[6, 6], 1, false).expect("torus").0
}

#[test]
fn a_new_fabric_is_at_reset_values_until_swept() {
    let topo = torus66();
    let (sm_node, sm_port) = sm_location(&topo);
    let sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    for ((n, p), _) in links(&topo) {
        let info = sim.held_port_info(n, p).expect("port");
        assert_eq!((info.operational_vls, info.neighbor_mtu), (1, 1), "node {n} port {p}");
        assert!(info.hoq_life > 19, "HOQ discard off at reset: {}", info.hoq_life);
        assert_eq!(info.vl_cap, SimOptions::default().vl_cap);
    }
}

#[test]
fn lash_lanes_are_operational() {
    let out = check_engine(&torus66(), "lash,no_fallback", &Config::default());
    assert!(out.accepted.expect("routed").routing.vls_used > 1);
}

#[test]
fn dfsssp_lanes_are_operational() {
    check_engine(&torus66(), "dfsssp,no_fallback", &Config::default());
}

#[test]
fn nue_lanes_are_operational() {
    check_engine(&torus66(), "nue,no_fallback", &Config::default());
}

#[test]
fn torus_2qos_lanes_are_operational() {
    let topo = sm_topology::parse_file(workspace().join("config/topologies/torus-4x4x4.net")).expect("topology");
    let mut config = Config::default();
    config.set_option("torus_config", workspace().join("config/torus-2QoS.conf").display().to_string());
    let out = check_engine(&topo, "torus-2QoS,no_fallback", &config);
    assert!(out.accepted.expect("routed").routing.vls_used > 1);
}

#[test]
fn config_keys_reach_the_ports() {
    let topo = torus66();
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let config = Config::parse(
        "max_op_vls = 2\nhead_of_queue_lifetime = 0x11\nleaf_head_of_queue_lifetime = 0x0f\n\
         vl_stall_count = 5\nleaf_vl_stall_count = 3\nsubnet_timeout = 15\n\
         force_link_speed = 1\nforce_link_width = 1\nforce_link_speed_ext = 30\n\
         local_phy_errors_threshold = 0x3\noverrun_errors_threshold = 0xc\n",
        std::path::Path::new("x.toml"),
    )
    .expect("config");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = run_once(&mut sim, "minhop", &config, &mut g2l, &mut held);
    assert!(out.accepted.is_some());
    assert_eq!(out.program.link.failed, 0, "{:?}", out.program.link);
    // Held now: a second sweep writes nothing.
    let again = run_once(&mut sim, "minhop", &config, &mut g2l, &mut held);
    assert_eq!(again.program.link.set, 0, "{:?}", again.program.link);
    for ((n, p), (peer, _)) in links(&topo) {
        let info = sim.held_port_info(n, p).expect("port");
        assert_eq!(info.operational_vls, 2, "max_op_vls caps node {n} port {p}");
        assert_eq!(
            (info.link_speed_enabled, info.link_width_enabled, info.link_speed_ext_enabled),
            (1, 1, 0),
            "forced speed, width, extended speeds off: node {n} port {p}"
        );
        assert_eq!((info.local_phy_errors, info.overrun_errors), (0x3, 0xc), "error thresholds: node {n} port {p}");
        match (topo.nodes[n].kind == NodeKind::Switch, topo.nodes[peer].kind == NodeKind::Switch) {
            (true, true) => assert_eq!((info.hoq_life, info.vl_stall_count), (0x11, 5)),
            (true, false) => assert_eq!((info.hoq_life, info.vl_stall_count), (0x0f, 3)),
            _ => assert_eq!(info.subnet_timeout, 15),
        }
    }
    // Switch port 0 takes SubnetTimeOut too.
    let sw = topo.nodes.iter().position(|n| n.kind == NodeKind::Switch).expect("a switch");
    assert_eq!(sim.held_port_info(sw, 0).expect("port 0").subnet_timeout, 15);
    let port0 = sim.held_port_info(sw, 0).expect("port 0");
    assert_eq!((port0.local_phy_errors, port0.overrun_errors), (0x3, 0xc), "thresholds on switch port 0 too");
}

#[test]
fn smaller_caps_bound_their_links_and_the_gate_names_the_port() {
    let topo = torus66();
    let (sm_node, sm_port) = sm_location(&topo);
    let small = topo.nodes.iter().position(|n| n.kind == NodeKind::Switch).expect("a switch");
    let mut options = SimOptions::default();
    options.node_caps.insert(topo.nodes[small].node_guid, PortCaps { vl_cap: 1, mtu_cap: 2, speed: None, width: None });
    let mut sim = SimFabric::with_options(&topo, sm_node, sm_port, options).expect("sim");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = run_once(&mut sim, "minhop", &Config::default(), &mut g2l, &mut held);
    assert!(out.accepted.is_some());
    for ((n, p), (peer, q)) in links(&topo) {
        let info = sim.held_port_info(n, p).expect("port");
        if n == small || peer == small {
            assert_eq!((info.operational_vls, info.neighbor_mtu), (1, 2), "node {n} port {p} (peer {peer}/{q})");
        } else {
            assert_eq!((info.operational_vls, info.neighbor_mtu), (4, 5), "node {n} port {p}");
        }
    }
    // The snapshot shows the engines what the ports operate: lash itself
    // declines a torus whose switch runs one VL.
    let capped = SimOptions {
        node_caps: [(topo.nodes[small].node_guid, PortCaps { vl_cap: 1, mtu_cap: 5, speed: None, width: None })].into(),
        ..SimOptions::default()
    };
    let mut sim = SimFabric::with_options(&topo, sm_node, sm_port, capped).expect("sim");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let declined = run_once(&mut sim, "lash,no_fallback", &Config::default(), &mut g2l, &mut held);
    let guid = topo.nodes[small].node_guid;
    let snap = &declined.snapshot();
    let small_ports = |p: &&sm_abi::Port| snap.nodes[p.node as usize].guid == guid && p.num != 0 && p.peer != sm_abi::NONE;
    let ops: Vec<u8> = snap.ports.iter().filter(small_ports).map(|p| p.op_vls).collect();
    assert!(!ops.is_empty() && ops.iter().all(|&v| v == 1), "{ops:?}");
    assert!(declined.accepted.is_none(), "{:?}", declined.describe());

    // And the gate refuses a layered routing made for more VLs than such a
    // port has, naming the port: lash's routing of the full fabric judged
    // on the same fabric with that switch's ports at one VL.
    let full = check_engine(&topo, "lash,no_fallback", &Config::default());
    let routing = &full.accepted.as_ref().expect("lash routes").routing;
    let mut narrow = full.snapshot().into_owned();
    let nodes = narrow.nodes.clone();
    for p in narrow.ports.iter_mut() {
        if nodes[p.node as usize].guid == guid && p.num != 0 {
            p.op_vls = 1;
        }
    }
    let graph = smcore_kit::Graph::new(&narrow);
    let why = judge(&narrow, &graph, routing, true, &GateOptions::default(), "lash").expect_err("refused");
    assert!(why.contains("port") && why.contains("operates 1 VLs"), "{why}");
    let name = &nodes.iter().find(|n| n.guid == guid).expect("node").description;
    assert!(why.contains(name.as_str()), "names the switch {name}: {why}");
}

/// A PortInfo Set of (`path`, port 0 modifier) with OperationalVLs and
/// NeighborMTU changed, state left.
fn set_vls_mtu(sim: &mut SimFabric, info: &PortInfoRepr, op_vls: u8, mtu: u8) -> PortInfoRepr {
    let mut want = *info;
    want.operational_vls = op_vls;
    want.neighbor_mtu = mtu;
    want.port_state = PortState::NoChange;
    want.port_physical_state = PhysState::NoChange;
    let mut data = [0u8; DATA_LEN];
    want.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
    let request = smp::Repr::directed_set(9, attr::PORT_INFO, 0, 0, &[], data).expect("smp");
    let mut mad = Mad::zeroed();
    request.emit(&mut mad.smp_mut());
    let reply = sim.handle_to(PERMISSIVE_LID, &mad.0).expect("answered");
    let reply = smp::Packet::new_checked(&reply.mad[..]).expect("smp");
    assert_eq!(reply.smp_status(), 0);
    PortInfoRepr::parse(&PortInfoPacket::new_checked(reply.data()).expect("port info")).expect("port info")
}

#[test]
fn operational_vls_and_mtu_are_taken_only_in_init() {
    let topo = torus66();
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let info = sim.held_port_info(sm_node, sm_port).expect("SM port");
    assert_eq!(sim.port_state(sm_node, sm_port), Some(PortState::Init));
    let now = set_vls_mtu(&mut sim, &info, 2, 3);
    assert_eq!((now.operational_vls, now.neighbor_mtu), (2, 3), "Init takes them");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    run_once(&mut sim, "minhop", &Config::default(), &mut g2l, &mut held);
    assert_eq!(sim.port_state(sm_node, sm_port), Some(PortState::Active));
    let info = sim.held_port_info(sm_node, sm_port).expect("SM port");
    assert_eq!((info.operational_vls, info.neighbor_mtu), (4, 5));
    let now = set_vls_mtu(&mut sim, &info, 1, 1);
    assert_eq!((now.operational_vls, now.neighbor_mtu), (4, 5), "an Active port ignores them");
}

/// A directed-route Get answered by the simulator: its data.
fn dr_get(sim: &mut SimFabric, attribute: u16, modifier: u32, path: &[u8]) -> [u8; DATA_LEN] {
    let request = smp::Repr::directed_get(7, attribute, modifier, 0, path).expect("request");
    let mut mad = Mad::zeroed();
    request.emit(&mut mad.smp_mut());
    let answer = sim.handle_to(PERMISSIVE_LID, &mad.0).expect("an answer");
    let repr = smp::Repr::parse(&smp::Packet::new_checked(&answer.mad[..]).expect("smp")).expect("parse");
    assert_eq!(repr.status, 0, "Get {attribute:#x} {modifier:#x} on {path:?}");
    repr.data
}

/// The 4x4x4 torus on the embedded fabric with torus-2QoS and its
/// configuration, to sweep once with `sweep`.
fn torus_2qos(sweep: SweepOptions) -> (Config, SimFabric, Registry, OnceOptions<'static>) {
    let topo = sm_topology::parse_file(workspace().join("config/topologies/torus-4x4x4.net")).expect("topology");
    let mut config = Config::default();
    config.set_option("torus_config", workspace().join("config/torus-2QoS.conf").display().to_string());
    let (sm_node, sm_port) = sm_location(&topo);
    let sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let registry = Registry::scan(&[bin_dir()]);
    (config, sim, registry, OnceOptions { sweep, engines: "torus-2QoS,no_fallback", dump_dir: None })
}

/// The first torus-2QoS sweep of a 4x4x4 torus with `use_optimized_slvl`
/// as given: the SL2VL SMPs it sent, and every switch SL2VL table the
/// routing asked for as the switches hold it afterwards.
fn torus_sl2vl(optimized: bool) -> (u64, Vec<((u64, u8, u8), [u8; 16])>) {
    let (config, mut sim, registry, options) = torus_2qos(SweepOptions { optimized_sl2vl: optimized, ..SweepOptions::default() });
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = sm_core::pipeline::once(&mut SimPort::new(&mut sim), &options, &registry, &config, &mut g2l, &mut held)
        .expect("sweep");
    let routing = &out.accepted.as_ref().expect("routed").routing;
    assert_eq!(out.program.sl2vl.failed, 0, "{:?}", out.program.sl2vl);
    let fabric = &out.sweep.fabric;
    let mut tables = Vec::new();
    for entry in routing.sl2vl.iter() {
        let node = &fabric.nodes[entry.node as usize];
        if !node.is_switch() || entry.out_port == 0 {
            continue;
        }
        let modifier = u32::from(entry.in_port) << 8 | u32::from(entry.out_port);
        let data = dr_get(&mut sim, attr::SL_TO_VL_MAPPING_TABLE, modifier, &node.path);
        let held: [u8; 16] = std::array::from_fn(|sl| (data[sl / 2] >> if sl % 2 == 0 { 4 } else { 0 }) & 0xF);
        assert_eq!(held, entry.vl, "switch {:#x} in {} out {}", node.guid, entry.in_port, entry.out_port);
        tables.push(((node.guid, entry.in_port, entry.out_port), held));
    }
    (out.program.sl2vl.smps.sent, tables)
}

#[test]
fn optimized_sl2vl_sends_far_fewer_smps_for_the_same_tables() {
    let (plain_smps, plain) = torus_sl2vl(false);
    let (optimized_smps, optimized) = torus_sl2vl(true);
    assert!(!plain.is_empty());
    assert_eq!(plain, optimized, "every switch port ends with the same SL2VL tables");
    eprintln!("torus-2QoS 4x4x4, first sweep: {plain_smps} SL2VL SMPs, {optimized_smps} with use_optimized_slvl");
    assert!(optimized_smps * 2 < plain_smps, "{optimized_smps} SMPs with use_optimized_slvl, {plain_smps} without");
}

/// The embedded fabric behind a port whose switches refuse every SL2VL Set
/// (status 0x1C: attribute value not supported).
struct RefusesSl2Vl<'a>(SimPort<'a>);

impl sm_core::sweep::SmpPort for RefusesSl2Vl<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, sm_core::sweep::TransportError> {
        let answer = self.0.send(mad)?;
        let sl2vl_set = mad[3] == sm_mad::mad::method::SET && u16::from_be_bytes([mad[16], mad[17]]) == attr::SL_TO_VL_MAPPING_TABLE;
        Ok(answer.map(|mut a| {
            if sl2vl_set {
                // A directed-route SMP's status shares its 16 bits with
                // the D bit (the top one), which stays.
                a[4] &= 0x80;
                a[5] = 0x1C;
            }
            a
        }))
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, sm_core::sweep::TransportError> {
        self.0.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: std::time::Duration) -> Result<Option<sm_core::sweep::TrapMad>, sm_core::sweep::TransportError> {
        self.0.wait_trap(timeout)
    }
}

/// The log (warnings and up) of a torus-2QoS sweep whose SL2VL Sets are
/// refused, with `suppress_sl2vl_mad_status_errors` as given.
fn refused_sl2vl_log(suppress: bool) -> (String, usize) {
    use std::io::Write;
    #[derive(Clone, Default)]
    struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let (config, mut sim, registry, options) =
        torus_2qos(SweepOptions { suppress_sl2vl_status_errors: suppress, ..SweepOptions::default() });
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).with_max_level(tracing::Level::WARN).finish();
    let failed = tracing::subscriber::with_default(subscriber, || {
        let out = sm_core::pipeline::once(&mut RefusesSl2Vl(SimPort::new(&mut sim)), &options, &registry, &config, &mut g2l, &mut held)
            .expect("sweep");
        out.program.sl2vl.failed
    });
    let log = String::from_utf8(buf.0.lock().expect("buffer").clone()).expect("utf-8");
    (log, failed)
}

#[test]
fn suppress_sl2vl_mad_status_errors_keeps_refused_sets_out_of_the_warnings() {
    let (log, failed) = refused_sl2vl_log(false);
    assert!(failed > 0);
    assert!(log.contains("SL2VL Set failed"), "refusals are warnings by default:\n{log}");
    let (log, failed_quiet) = refused_sl2vl_log(true);
    assert_eq!(failed_quiet, failed, "counted as failed all the same");
    assert!(!log.contains("SL2VL Set failed"), "suppressed:\n{log}");
}
