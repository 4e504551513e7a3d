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
) -> std::thread::JoinHandle<()> {
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
            guid2lid_path: None,
            ucast_cache: false,
            incremental: None,
            standby: Some((state, standby)),
            groups: None,
            sa: None,
            status: None,
            force_heavy_sweep: false,
            sweep_on_trap: true,
        };
        let mut registry = sm_core::engines::Registry::scan(&[bin_dir()]);
        let config = sm_core::config::Config::default();
        let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
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
    })
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
    let sm_a = run_sm(fabric.clone(), a, Arc::clone(&state_a), Arc::clone(&signals_a), Arc::clone(&heavy_a));
    wait("A's first heavy sweep", Duration::from_secs(30), || heavy_a.load(Ordering::Relaxed) >= 1);
    assert!(state_a.is_master());
    let sm_b = run_sm(fabric.clone(), b, Arc::clone(&state_b), Arc::clone(&signals_b), Arc::clone(&heavy_b));
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
    sm_b.join().expect("B ends");
}
