//! The SM through a transport that loses and corrupts MADs
//! (`sm_transport::FaultInjector`, `--inject-faults`): lost SMPs cost
//! retries, not routes; corrupted answers never take the SM down.

mod common;

use common::{bin_dir, sm_location, workspace};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_transport::{FaultInjector, Faults};

fn fabric() -> SimFabric {
    let topo = sm_topology::parse_file(&workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    SimFabric::from_topology(&topo, node, port).expect("sim")
}

fn sweep(port: &mut dyn sm_core::sweep::SmpPort) -> Result<OnceOutcome, sm_core::pipeline::OnceError> {
    let registry = sm_core::engines::Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "ftree", dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    sm_core::pipeline::once(port, &options, &registry, &sm_core::config::Config::default(), &mut g2l, &mut held)
}

/// Every switch's LFT as the fabric holds it.
fn lfts(f: &SimFabric) -> Vec<Vec<u8>> {
    (0..f.node_count()).filter_map(|n| f.lft(n).map(<[u8]>::to_vec)).collect()
}

#[test]
fn lost_smps_and_lost_answers_cost_retries_not_routes() {
    let mut pristine = fabric();
    let out = sweep(&mut SimPort::new(&mut pristine)).expect("sweep");
    assert!(out.accepted.is_some());
    let want = lfts(&pristine);
    for seed in [1, 2, 3] {
        let mut f = fabric();
        let faults = Faults { drop: 30_000, lose_answer: 30_000, seed, ..Faults::default() };
        let mut port = FaultInjector::new(SimPort::new(&mut f), faults);
        let out = sweep(&mut port).expect("sweep");
        let stats = port.stats();
        assert!(stats.dropped > 10 && stats.answers_lost > 10, "seed {seed}: {stats:?}");
        assert!(out.accepted.is_some(), "seed {seed}: {:?}", out.describe());
        assert_eq!(out.sweep.fabric.nodes.len(), 76, "seed {seed}: every node found");
        assert_eq!(lfts(&f), want, "seed {seed}: the LFTs of a fabric without faults");
    }
}

#[test]
fn corrupted_answers_never_take_the_sm_down() {
    for seed in 1..=5 {
        let mut f = fabric();
        let faults = Faults { corrupt: 20_000, seed, ..Faults::default() };
        let mut port = FaultInjector::new(SimPort::new(&mut f), faults);
        // Routed, or refused with an error: never a panic, never a hang.
        match sweep(&mut port) {
            Ok(out) => assert!(out.sweep.fabric.nodes.len() <= 76 + 8, "seed {seed}"),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        assert!(port.stats().corrupted > 0, "seed {seed}: {:?}", port.stats());
    }
}
