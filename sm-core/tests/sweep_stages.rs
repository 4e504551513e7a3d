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
use sm_core::sweep::stages::{self, Discovered, SweepState};
use sm_core::sweep::{self, Guid2Lid, HeldTables, OnceOptions, OnceOutcome, SimPort, SmpClient, SweepOptions};
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
    let full = sweep::once(&mut SimPort::new(&mut full_sim), &options, &registry, &config, &mut g2l, &mut held)
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
    let state = SweepState { guid2lid: &mut g2l, held: &mut held, cache: None };
    let discovered = Discovered::from_fabric(fabric, report);
    let out = stages::once_from(&mut SimPort::new(&mut sim), Some(discovered), &options, &registry, &config, state)
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
