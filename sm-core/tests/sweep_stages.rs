//! The heavy sweep's stages (`sweep::stages`): a sweep that starts from a
//! fabric already discovered through the SM's port (what the standby
//! arbitration hands over) sends no discovery SMP, and ends with the LIDs
//! and the routing a full sweep gives the same fabric.

mod common;

use std::collections::BTreeMap;

use common::{bin_dir, sm_location, workspace};
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::sim::SimFabric;
use sm_core::pipeline::SweepState;
use sm_core::sweep::stages::Discovered;
use sm_core::sweep::{self, Guid2Lid, HeldTables, SmpClient, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_core::sim::SimPort;
use sm_mad::mad::attr;

/// What a discovery reads, by SubnGet.
const DISCOVERY_READS: [u16; 4] = [attr::NODE_INFO, attr::NODE_DESCRIPTION, attr::PORT_INFO, attr::SWITCH_INFO];

fn gets(sim: &SimFabric, attribute: u16) -> u64 {
    sim.counters().by_attribute.get(&attribute).map_or(0, |c| c.get)
}

/// Port GUID → LID, and switch node GUID → LFT, of an outcome.
fn lids_and_lfts(out: &OnceOutcome) -> (BTreeMap<u64, u16>, BTreeMap<u64, Vec<u8>>) {
    let accepted = out.accepted.as_ref().expect("routed");
    let s = &accepted.snapshot;
    let lids = s.ports.iter().filter(|p| p.lid != 0).map(|p| (p.guid, p.lid)).collect();
    let lfts = accepted.routing.lfts.iter().map(|l| (s.nodes[l.node as usize].guid, l.ports.to_vec())).collect();
    (lids, lfts)
}

#[test]
fn a_sweep_from_a_discovered_fabric_sends_no_discovery_smp_and_routes_as_a_full_one() {
    let topo = sm_topology::parse_file(workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None };
    let config = Config::default();

    // A full sweep on one copy of the fabric.
    let mut full_sim = SimFabric::from_topology(&topo, node, port).expect("sim");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let full = sm_core::pipeline::once(&mut SimPort::new(&mut full_sim), &options, &registry, &config, &mut g2l, &mut held)
        .expect("full sweep");
    for a in DISCOVERY_READS {
        assert!(gets(&full_sim, a) > 0, "a full sweep reads attribute {a:#x}");
    }

    // Another copy, discovered first (as arbitration does), then swept
    // from the fabric that discovery returned.
    let mut sim = SimFabric::from_topology(&topo, node, port).expect("sim");
    let (fabric, report) = {
        let mut port = SimPort::new(&mut sim);
        let mut client = SmpClient::new(&mut port, options.sweep.retries);
        sweep::discover_within(&mut client, &options.sweep.limits()).expect("discovery")
    };
    assert_eq!(fabric.nodes.len(), topo.nodes.len());
    let discovery = DISCOVERY_READS.map(|a| gets(&sim, a));
    sim.reset_counters();
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let state = SweepState { guid2lid: &mut g2l, held: &mut held, cache: None, previous: None };
    let discovered = Discovered::from_fabric(fabric, report);
    let out = sm_core::pipeline::once_from(&mut SimPort::new(&mut sim), Some(discovered), &options, &registry, &config, state)
        .expect("sweep from the discovered fabric");
    // What the full sweep read is discovery's reads plus the later
    // stages' (P_Key programming reads NodeInfo for PartitionCap): the
    // sweep from the fabric repeats none of discovery's.
    for (i, a) in DISCOVERY_READS.into_iter().enumerate() {
        assert_eq!(gets(&sim, a) + discovery[i], gets(&full_sim, a), "attribute {a:#x}");
    }
    for a in [attr::NODE_DESCRIPTION, attr::PORT_INFO, attr::SWITCH_INFO] {
        assert_eq!(gets(&sim, a), 0, "attribute {a:#x} read again");
    }
    assert_eq!(out.sweep.discovery_smps.gets(attr::NODE_INFO), 0);

    assert_eq!(out.accepted.as_ref().map(|a| &a.engine), full.accepted.as_ref().map(|a| &a.engine));
    assert_eq!(lids_and_lfts(&out), lids_and_lfts(&full), "the same LIDs and LFTs as a full sweep");
    // And the switches hold the same tables.
    let mut switches = 0;
    for i in 0..topo.nodes.len() {
        if let Some(lft) = full_sim.lft(i) {
            switches += 1;
            assert_eq!(sim.lft(i), Some(lft), "switch {i}");
            assert_eq!(sim.linear_fdb_top(i), full_sim.linear_fdb_top(i), "switch {i}");
        }
    }
    assert!(switches > 0);
}

/// The SL2VL maps of an accepted routing, sorted.
fn sl2vl(out: &OnceOutcome) -> Vec<(u32, u8, u8, [u8; 16])> {
    let accepted = out.accepted.as_ref().expect("routed");
    let mut maps: Vec<_> = accepted.routing.sl2vl.iter().map(|m| (m.node, m.in_port, m.out_port, m.vl)).collect();
    maps.sort_unstable();
    maps
}

/// The SM on the embedded [`common::SMALL_NET`] with the unicast cache,
/// where `smcore --fabric` puts it, and what it keeps between sweeps.
struct CachedSm {
    sim: SimFabric,
    sm_node: usize,
    registry: Registry,
    options: OnceOptions<'static>,
    config: Config,
    g2l: Guid2Lid,
    held: HeldTables,
    cache: Option<sm_core::ucast_cache::UcastCache>,
}

impl CachedSm {
    fn new(engines: &'static str, config: Config) -> Self {
        let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
        let (sm_node, port) = sm_location(&topo);
        CachedSm {
            sim: SimFabric::from_topology(&topo, sm_node, port).expect("sim"),
            sm_node,
            registry: Registry::scan(&[bin_dir()]),
            options: OnceOptions { sweep: SweepOptions::default(), engines, dump_dir: None },
            config,
            g2l: Guid2Lid::default(),
            held: HeldTables::default(),
            cache: None,
        }
    }

    /// One heavy sweep, from discovery on.
    fn sweep(&mut self) -> OnceOutcome {
        let state = SweepState { guid2lid: &mut self.g2l, held: &mut self.held, cache: Some(&mut self.cache), previous: None };
        sm_core::pipeline::once_from(&mut SimPort::new(&mut self.sim), None, &self.options, &self.registry, &self.config, state)
            .expect("sweep")
    }
}

#[test]
fn a_cached_routing_keeps_the_engines_tables_its_path_sls_and_gets_the_qos_tables_once() {
    let mut sm = CachedSm::new("lash", Config { qos: true, qos_vlarb_low: Some("0:8,1:16".into()), ..Config::default() });
    let first = sm.sweep();
    let routed = first.accepted.as_ref().expect("lash routes");
    assert!(!routed.from_cache);
    assert!(!routed.routing.vlarb.is_empty(), "QoS adds VLArb tables");
    let kept = sm.cache.as_ref().map(|c| std::sync::Arc::clone(c.routing()));
    assert!(kept.is_some_and(|k| std::sync::Arc::ptr_eq(&k, routed)), "the cache holds the accepted routing itself");

    let again = sm.sweep();
    let reused = again.accepted.as_ref().expect("routed");
    assert!(reused.from_cache, "{:?}", again.describe());
    assert_eq!(reused.engine, routed.engine);
    assert_eq!(sl2vl(&again), sl2vl(&first), "the same SL2VL maps, QoS's not added twice");
    assert_eq!(reused.routing.vlarb.len(), routed.routing.vlarb.len());
    assert_eq!(reused.engine_sl2vl().len(), routed.engine_sl2vl().len());
    assert_eq!(reused.engine_vlarb().len(), routed.engine_vlarb().len(), "QoS's VLArb tables are not the engine's");
    assert_eq!((again.program.sl2vl.set, again.program.lft.set), (0, 0), "nothing to write again");
    let lids: Vec<u16> = routed.snapshot.ports.iter().filter(|p| p.lid != 0).map(|p| p.lid).collect();
    for &s in &lids {
        for &d in &lids {
            assert_eq!(reused.path_sl(s, d), routed.path_sl(s, d), "SL of {s} -> {d}");
        }
    }
}

/// A host that reboots comes back to the fabric the cached routing was
/// judged on: the routing and its verdict are reused, not verified again.
/// Anything the verifier reads that differs (a host gone, a port with
/// fewer VLs, another gate) is judged anew.
#[test]
fn a_host_back_where_it_was_keeps_the_cached_verdict_and_anything_else_is_judged_anew() {
    let mut sm = CachedSm::new("minhop", Config::default());
    let first = sm.sweep();
    assert!(!first.report.verification_reused, "the chain's routing is verified");
    // The host farthest from the SM (not the SM's own node).
    let sim = &sm.sim;
    let host = (0..sim.node_count()).rev().find(|&n| n != sm.sm_node && sim.port_state(n, 1).is_some()).expect("a host");

    sm.sim.remove_node(host).expect("host off");
    let off = sm.sweep();
    let reused = off.accepted.as_ref().expect("routed");
    assert!(reused.from_cache, "{:?}", off.describe());
    assert!(!off.report.verification_reused, "a fabric without the host is verified");
    assert!(reused.verification.pairs < first.accepted.as_ref().expect("routed").verification.pairs);

    sm.sim.restore_node(host).expect("host back");
    let back = sm.sweep();
    let accepted = back.accepted.as_ref().expect("routed");
    assert!(accepted.from_cache, "{:?}", back.describe());
    assert!(back.report.verification_reused, "the host is back where it was: {:?}", back.report.phases_ms);
    assert_eq!(lids_and_lfts(&back), lids_and_lfts(&first));
    assert_eq!(accepted.verification.pairs, first.accepted.as_ref().expect("routed").verification.pairs);

    // The rule itself, on the snapshot the cache judged.
    let cache = sm.cache.expect("cache kept");
    let gate = sm.config.gate_options();
    let judged = cache.routing().snapshot.clone();
    assert!(cache.verification_for(&judged, &gate).is_some());
    let end = judged.end_ports().next().expect("an end port") as usize;
    let mut armed = judged.clone();
    armed.ports[end].state = sm_abi::PortState::Armed;
    assert!(cache.verification_for(&armed, &gate).is_some(), "Armed after a reboot is still up");
    let mut down = judged.clone();
    down.ports[end].state = sm_abi::PortState::Down;
    assert!(cache.verification_for(&down, &gate).is_none(), "a port down changes what is usable");
    let mut other_vls = judged.clone();
    other_vls.ports[end].op_vls = if judged.ports[end].op_vls == 1 { 2 } else { 1 };
    assert!(cache.verification_for(&other_vls, &gate).is_none(), "other VLs: the VL checks may differ");
    let mut other_gate = gate.clone();
    other_gate.verify.credit_loops = !other_gate.verify.credit_loops;
    assert!(cache.verification_for(&judged, &other_gate).is_none(), "judged by another gate");
}

#[test]
fn hosts_whose_sa_state_was_restored_are_not_asked_to_re_register() {
    // A new master's first sweep sets ClientReregister on every CA port,
    // except those whose registrations it restored from sa_db_file.
    let topo = sm_topology::parse_file(&workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    let registry = Registry::scan(&[bin_dir()]);
    let sweep_with = |known: std::collections::HashSet<u64>| {
        let mut sim = SimFabric::from_topology(&topo, node, port).expect("sim");
        let sweep = SweepOptions { client_reregister: true, reregister_known: std::sync::Arc::new(known), ..SweepOptions::default() };
        let options = OnceOptions { sweep, engines: "minhop", dump_dir: None };
        let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
        let out = sm_core::pipeline::once(&mut SimPort::new(&mut sim), &options, &registry, &Config::default(), &mut g2l, &mut held)
            .expect("sweep");
        (sim.counters().client_reregistrations, out)
    };
    let (all, out) = sweep_with(Default::default());
    assert!(all > 2, "{all}");
    let snapshot = out.snapshot();
    let known: std::collections::HashSet<u64> = snapshot
        .ports
        .iter()
        .filter(|p| p.lid != 0 && snapshot.nodes[p.node as usize].kind == sm_abi::NodeKind::Ca)
        .map(|p| p.guid)
        .take(2)
        .collect();
    assert_eq!(known.len(), 2);
    let (asked, _) = sweep_with(known);
    assert_eq!(asked, all - 2);
}
