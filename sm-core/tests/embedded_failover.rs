//! Two SMs on one embedded fabric, each a whole SM loop on a thread of its
//! own with its own port and SMInfo: the one of higher priority is master
//! and routes, the other stands by and polls it; when the master's host
//! leaves the fabric, the standby takes over and every port is given its
//! LID as the new master's SM LID.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bin_dir, sm_location, workspace};
use sm_core::daemon::{self, DaemonOptions, Signals};
use sm_core::pipeline::OnceOptions;
use sm_core::sim::{SharedFabric, SimFabric};
use sm_core::standby::{SmInfoState, StandbyOptions};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};

/// An SM's loop on `at`, as `smcore` runs it, until `signals.stop`.
fn run_sm(
    fabric: SharedFabric,
    at: (usize, u8),
    state: Arc<SmInfoState>,
    signals: Arc<Signals>,
    heavy: Arc<AtomicU64>,
    lids: Lids,
) -> std::thread::JoinHandle<Guid2Lid> {
    std::thread::spawn(move || {
        let standby = StandbyOptions {
            poll_interval: Duration::from_millis(100),
            poll_retries: 3,
            ..StandbyOptions::default()
        };
        let options = DaemonOptions {
            config_file: None,
            once: OnceOptions { sweep: SweepOptions::default(), engines: "ftree,minhop", dump_dir: None },
            interval: Duration::from_millis(200),
            trap_settle: Duration::from_millis(10),
            trap_limits: Default::default(),
            guid2lid_path: lids.file.clone(),
            ucast_cache: false,
            incremental: None,
            standby: Some((state, standby)),
            groups: None,
            sa: None,
            status: None,
            force_heavy_sweep: false,
            sweep_on_trap: true,
            honor_guid2lid_file: lids.honor,
        };
        let mut registry = sm_core::engines::Registry::scan(&[bin_dir()]);
        let config = sm_core::config::Config::default();
        let (mut g2l, mut held) = (lids.known, HeldTables::default());
        let mut port = fabric.smp_port_at(at);
        let context = daemon::DaemonContext {
            port: &mut port,
            options: &options,
            registry: &mut registry,
            config: &config,
            guid2lid: &mut g2l,
            held: &mut held,
            signals: &signals,
        };
        daemon::run(context, &mut |_, _, _| {
            heavy.fetch_add(1, Ordering::Relaxed);
        });
        g2l
    })
}

/// An SM's guid2lid: the map it starts with, its file, and whether it
/// reads the file again when it comes out of standby.
#[derive(Clone, Default)]
struct Lids {
    known: Guid2Lid,
    file: Option<std::path::PathBuf>,
    honor: bool,
}

fn wait(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let end = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_standby_takes_over_when_the_masters_host_leaves() {
    failover(Lids::default());
}

#[test]
fn coming_out_of_standby_the_guid2lid_file_is_honoured_or_forgotten() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("guid2lid");
    // B started knowing one absent port; its file, written since, names another.
    let known = Guid2Lid { entries: [(0xbeef, (88, 88))].into_iter().collect() };
    let in_file = Guid2Lid { entries: [(0xdead, (77, 77))].into_iter().collect() };
    in_file.write(&file).expect("write guid2lid");
    let honoured = failover(Lids { known: known.clone(), file: Some(file.clone()), honor: true });
    assert_eq!(honoured.entries.get(&0xdead), Some(&(77, 77)), "the file is read again");
    assert!(!honoured.entries.contains_key(&0xbeef), "what was known before is dropped");
    in_file.write(&file).expect("write guid2lid");
    let forgotten = failover(Lids { known, file: Some(file), honor: false });
    assert!(
        !forgotten.entries.contains_key(&0xbeef) && !forgotten.entries.contains_key(&0xdead),
        "honor_guid2lid_file FALSE: only the ports' LIDs stand: {:?}",
        forgotten.entries.len()
    );
    assert!(forgotten.entries.len() > 10, "the fabric's LIDs are recorded");
}

/// A is master, B stands by, A's host leaves, B takes over; B's guid2lid
/// at the end.
fn failover(lids_b: Lids) -> Guid2Lid {
    let topo = sm_topology::parse_file(&workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let a = sm_location(&topo);
    let b = (topo.nodes.iter().enumerate().filter(|(_, n)| n.kind == sm_abi::NodeKind::Ca).nth(40).expect("a host").0, 1);
    let fabric = SharedFabric::new(SimFabric::from_topology(&topo, a.0, a.1).expect("sim"));
    // Each SM's SMInfo is its own state's, as its responder would answer.
    let (state_a, state_b) = (Arc::new(SmInfoState::new(0, 12, 0)), Arc::new(SmInfoState::new(0, 3, 0)));
    for (at, state) in [(a, &state_a), (b, &state_b)] {
        let state = Arc::clone(state);
        let agent: sm_core::sim::SmInfoAgent = Arc::new(move |r| sm_core::standby::answer_data(&state, r));
        fabric.lock().add_sm(at.0, at.1, agent).expect("an SM port");
    }
    let sm_lid_everywhere = |at: (usize, u8)| {
        let f = fabric.lock();
        let Some(lid) = f.port_lid(at.0, at.1).filter(|&l| l != 0) else { return false };
        (0..f.node_count())
            .filter(|&n| f.is_present(n) && f.topology().nodes[n].kind == sm_abi::NodeKind::Ca)
            .all(|n| f.held_port_info(n, 1).is_some_and(|p| p.master_sm_lid == lid))
    };

    let (signals_a, signals_b) = (Arc::new(Signals::default()), Arc::new(Signals::default()));
    let (heavy_a, heavy_b) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let sm_a = run_sm(fabric.clone(), a, Arc::clone(&state_a), Arc::clone(&signals_a), Arc::clone(&heavy_a), Lids::default());
    wait("A's first heavy sweep", Duration::from_secs(30), || heavy_a.load(Ordering::Relaxed) >= 1);
    assert!(state_a.is_master());
    let sm_b = run_sm(fabric.clone(), b, Arc::clone(&state_b), Arc::clone(&signals_b), Arc::clone(&heavy_b), lids_b);
    wait("B to stand by", Duration::from_secs(30), || state_b.state() == sm_mad::SmState::Standby);
    // B polls A for a while and routes nothing.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(heavy_b.load(Ordering::Relaxed), 0, "a standby does not sweep");
    assert!(state_a.is_master() && sm_lid_everywhere(a));

    fabric.lock().remove_node(a.0).expect("A's host leaves");
    wait("B to take over", Duration::from_secs(30), || state_b.is_master() && heavy_b.load(Ordering::Relaxed) >= 1);
    wait("every host to name B as its SM", Duration::from_secs(30), || sm_lid_everywhere(b));

    for s in [&signals_a, &signals_b] {
        s.stop.store(true, Ordering::Relaxed);
    }
    sm_a.join().expect("A ends");
    sm_b.join().expect("B ends")
}
