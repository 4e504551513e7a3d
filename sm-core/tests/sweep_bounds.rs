//! A sweep is bounded and a lost SMP is not a lost node.
//!
//! * Silent nodes cost one timeout (times the tries) per discovery round,
//!   whatever their number: their SMPs wait together, never one after the
//!   other. Counted here as the batches in which the transport had to wait
//!   for an answer that never came (each is one timeout on a real port).
//! * A stop flag set mid-sweep ends it at the next round with
//!   [`SweepError::Stopped`], before anything is written; a sweep past its
//!   budget ends with [`SweepError::OverBudget`], also before writing.
//! * A node that does not answer one sweep is kept as the last sweep knew
//!   it (LIDs, links), until its neighbours' ports show the link down or it
//!   has been silent for too many sweeps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::discovery::MAX_SILENT_SWEEPS;
use sm_core::sweep::{
    self, FabricMemory, Guid2Lid, Outgoing, SmpPort, SweepError, SweepOptions, TransportError,
};
use sm_mad::mad::method;
use sm_topology::{gen, Topology};

/// The embedded fabric behind a port that counts what a real one would
/// wait for: one timeout per batch in which some SMP got no answer.
struct Counting {
    fabric: SimFabric,
    timeouts: usize,
    batches: usize,
    sets: usize,
    /// Raised after this many batches.
    stop_after: Option<(usize, Arc<AtomicBool>)>,
}

impl Counting {
    fn new(fabric: SimFabric) -> Self {
        Self { fabric, timeouts: 0, batches: 0, sets: 0, stop_after: None }
    }

    fn answer(&mut self, mad: &[u8]) -> Option<Vec<u8>> {
        if mad.get(3) == Some(&method::SET) {
            self.sets += 1;
        }
        self.fabric.handle(mad)
    }
}

impl SmpPort for Counting {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.batches += 1;
        let answer = self.answer(mad);
        if answer.is_none() {
            self.timeouts += 1;
        }
        Ok(answer)
    }

    fn exchange_many(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        self.batches += 1;
        if let Some((after, flag)) = &self.stop_after {
            if self.batches > *after {
                flag.store(true, Ordering::Relaxed);
            }
        }
        let answers: Vec<Option<Vec<u8>>> = batch.iter().map(|o| self.answer(&o.mad)).collect();
        if answers.iter().any(Option::is_none) {
            self.timeouts += 1;
        }
        Ok(answers)
    }
}

/// A two-level fat tree of `leaves` leaves, and one silent host on each
/// leaf but the SM's.
fn silent_hosts(leaves: usize) -> (Topology, SimFabric, Vec<usize>) {
    let topo = gen::fat_tree_2level(leaves, 2, 2, 2).expect("fat tree");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    let mut silent = Vec::new();
    for l in 1..leaves {
        let leaf = topo.nodes.iter().position(|n| n.desc == format!("leaf-{l}")).expect("leaf");
        let host = topo
            .links
            .iter()
            .find_map(|k| {
                let far = if k.a.0 == leaf { k.b.0 } else if k.b.0 == leaf { k.a.0 } else { return None };
                (!topo.nodes[far].is_switch()).then_some(far)
            })
            .expect("a host on the leaf");
        sim.set_answer_loss(host, 1).expect("host");
        silent.push(host);
    }
    (topo, sim, silent)
}

#[test]
fn silent_nodes_wait_together_not_one_after_another() {
    let retries = 3u32;
    let options = SweepOptions { retries, ..SweepOptions::default() };
    let tries = retries as usize + 1;
    let (topo, sim, silent) = silent_hosts(8);
    let mut port = Counting::new(sim);
    let out = sweep::sweep(&mut port, &options, &mut Guid2Lid::default()).expect("sweep");
    assert_eq!(out.fabric.nodes.len(), topo.nodes.len() - silent.len(), "all but the silent hosts");
    // One round with the silent probes, one more with their second try.
    assert!(
        port.timeouts <= 2 * tries,
        "{} silent hosts cost {} timeouts; at most {} expected (serially it would be {})",
        silent.len(),
        port.timeouts,
        2 * tries,
        silent.len() * tries
    );

    // Twice the silent hosts: no more waiting.
    let (_, sim, more) = silent_hosts(16);
    let mut port = Counting::new(sim);
    sweep::sweep(&mut port, &options, &mut Guid2Lid::default()).expect("sweep");
    assert!(more.len() > silent.len());
    assert!(port.timeouts <= 2 * tries, "{} timeouts for {} silent hosts", port.timeouts, more.len());
}

#[test]
fn a_stop_mid_sweep_ends_it_before_anything_is_written() {
    let topo = gen::fat_tree_2level(8, 4, 4, 4).expect("fat tree");
    let flag = Arc::new(AtomicBool::new(false));
    let mut port = Counting::new(SimFabric::from_topology(&topo, 0, 1).expect("sim"));
    port.stop_after = Some((2, Arc::clone(&flag)));
    let options = SweepOptions { stop: Some(Arc::clone(&flag)), ..SweepOptions::default() };
    let err = sweep::sweep(&mut port, &options, &mut Guid2Lid::default()).expect_err("stopped");
    assert_eq!(err, SweepError::Stopped);
    assert_eq!(port.sets, 0, "nothing written");
    // Promptly: the round under way when the flag was set is the last.
    assert!(port.batches <= 3, "{} batches", port.batches);

    // No budget left: over budget, nothing written either.
    let mut port = Counting::new(SimFabric::from_topology(&topo, 0, 1).expect("sim"));
    let options = SweepOptions { budget: Some(Duration::ZERO), ..SweepOptions::default() };
    std::thread::sleep(Duration::from_millis(2));
    let err = sweep::sweep(&mut port, &options, &mut Guid2Lid::default()).expect_err("over budget");
    assert_eq!(err, SweepError::OverBudget(Duration::ZERO));
    assert_eq!(port.sets, 0, "nothing written");

    // Not set: the sweep runs whole.
    let mut port = Counting::new(SimFabric::from_topology(&topo, 0, 1).expect("sim"));
    let options = SweepOptions { stop: Some(Arc::new(AtomicBool::new(false))), ..SweepOptions::default() };
    let out = sweep::sweep(&mut port, &options, &mut Guid2Lid::default()).expect("sweep");
    assert_eq!(out.fabric.nodes.len(), topo.nodes.len());
}

/// One sweep with `memory`, on the embedded fabric.
fn sweep_with(sim: &mut SimFabric, memory: &mut FabricMemory, g2l: &mut Guid2Lid) -> sweep::SweepOutcome {
    let options = SweepOptions { retries: 1, ..SweepOptions::default() };
    let mut port = SimPort::new(sim);
    sweep::sweep_with(&mut port, &options, g2l, memory, &options.limits()).expect("sweep")
}

#[test]
fn a_silent_switch_is_kept_until_proven_gone() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let spine = topo.nodes.iter().position(|n| n.desc == "spine-1").expect("spine-1");
    let leaf = topo.nodes.iter().position(|n| n.desc == "leaf-3").expect("leaf-3");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    let mut memory = FabricMemory::default();
    let mut g2l = Guid2Lid::default();
    let first = sweep_with(&mut sim, &mut memory, &mut g2l);
    assert!(!first.fabric.incomplete);
    let links = first.fabric.links().len();
    let lid_of = |f: &sweep::Fabric, guid: u64| {
        let n = &f.nodes[f.find(guid).expect("node")];
        n.ports[usize::from(n.address_port(1))].info.map(|i| i.lid)
    };

    // The spine stops answering (every SMP to it lost): kept, with its
    // links and LID, and the sweep says it is incomplete.
    sim.set_answer_loss(spine, 1).expect("spine");
    let guid = topo.nodes[spine].node_guid;
    for n in 1..=MAX_SILENT_SWEEPS {
        let out = sweep_with(&mut sim, &mut memory, &mut g2l);
        assert_eq!(out.fabric.nodes.len(), topo.nodes.len(), "silent sweep {n}: every node");
        assert_eq!(out.fabric.links().len(), links, "silent sweep {n}: every link");
        assert_eq!(out.discovery.kept_nodes, 1);
        assert!(out.fabric.incomplete);
        // The next light sweep asks for another heavy one.
        let mut port = SimPort::new(&mut sim);
        let mut client = sweep::SmpClient::new(&mut port, 0);
        assert!(sweep::light::light_sweep(&mut client, &out.fabric).needs_heavy_sweep());
        assert_eq!(lid_of(&out.fabric, guid), lid_of(&first.fabric, guid));
        // Routing sees the spine's ports as they were, not Down.
        let snap = out.fabric.snapshot(0);
        let s = out.fabric.find(guid).expect("spine kept");
        let p = snap.nodes[s].first_port as usize + 1;
        let was = first.fabric.snapshot(0);
        let q = was.nodes[first.fabric.find(guid).expect("spine")].first_port as usize + 1;
        assert_eq!(snap.ports[p].state, was.ports[q].state);
        assert_ne!(snap.ports[p].state, sm_abi::PortState::Down);
    }
    // Silent for too long: forgotten.
    let out = sweep_with(&mut sim, &mut memory, &mut g2l);
    assert!(out.fabric.find(guid).is_none());
    assert_eq!(out.discovery.forgotten_nodes, 1);

    // Answers again: back, complete.
    sim.set_answer_loss(spine, 0).expect("spine");
    let out = sweep_with(&mut sim, &mut memory, &mut g2l);
    assert_eq!(out.fabric.links().len(), links);
    assert!(!out.fabric.incomplete, "{:?}", out.discovery);
    let mut port = SimPort::new(&mut sim);
    let mut client = sweep::SmpClient::new(&mut port, 0);
    assert!(!sweep::light::light_sweep(&mut client, &out.fabric).needs_heavy_sweep());

    // A switch really gone: its neighbours' ports go Down, which proves
    // it; forgotten at once, with the hosts behind it.
    sim.remove_node(leaf).expect("leaf");
    let out = sweep_with(&mut sim, &mut memory, &mut g2l);
    assert!(out.fabric.find(topo.nodes[leaf].node_guid).is_none());
    assert_eq!(out.discovery.kept_nodes, 0, "{:?}", out.discovery);
    assert_eq!(out.fabric.nodes.len(), topo.nodes.len() - 3, "the leaf and its two hosts");
}

#[test]
fn answers_lost_now_and_then_drop_no_node_link_or_lid() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    let mut memory = FabricMemory::default();
    let mut g2l = Guid2Lid::default();
    let first = sweep_with(&mut sim, &mut memory, &mut g2l);
    let links = first.fabric.links().len();
    // Every switch loses every other answer: with one retry some SMPs
    // still die, differently each sweep.
    for (i, n) in topo.nodes.iter().enumerate() {
        if n.is_switch() {
            sim.set_answer_loss(i, 2).expect("switch");
        }
    }
    for _ in 0..4 {
        let out = sweep_with(&mut sim, &mut memory, &mut g2l);
        assert_eq!(out.fabric.nodes.len(), topo.nodes.len());
        assert_eq!(out.fabric.links().len(), links);
        for (i, n) in out.fabric.nodes.iter().enumerate() {
            if !n.is_switch() {
                let lid = n.ports[1].info.map(|i| i.lid);
                let before = first.fabric.find(n.guid).and_then(|j| first.fabric.nodes[j].ports[1].info).map(|i| i.lid);
                assert_eq!(lid, before, "host {i} kept its LID");
            }
        }
    }
}
