//! The SM loop on the embedded fabric: links and switches fail and come
//! back while it runs; it must find each change (by trap, or by the light
//! sweep when traps are lost), re-route through the chain, program what
//! it routed, and never change a LID.

mod common;

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{bin_dir, sm_location};
use sm_abi::{FabricSnapshot, Routing, NO_ROUTE};
use sm_core::config::Config;
use sm_core::daemon::{self, Cause, DaemonOptions, Signals};
use sm_core::engines::Registry;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SmpPort, SweepOptions, TransportError, TrapMad};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_topology::gen;

/// What to do to the fabric before the next wait.
#[derive(Debug, Clone, Copy)]
enum Act {
    LinkDown(usize, u8),
    LinkUp(usize, u8),
    Remove(usize),
    Restore(usize),
}

/// The embedded fabric behind a port whose test script acts on it between
/// sweeps; with `deaf`, traps are dropped so only light sweeps can notice.
struct Scripted<'a> {
    port: SimPort<'a>,
    pending: Rc<RefCell<VecDeque<Act>>>,
    deaf: bool,
}

impl SmpPort for Scripted<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send(mad)
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        let acts: Vec<Act> = self.pending.borrow_mut().drain(..).collect();
        for act in acts {
            let f = self.port.fabric();
            let r = match act {
                Act::LinkDown(n, p) => f.link_down(n, p),
                Act::LinkUp(n, p) => f.link_up(n, p),
                Act::Remove(n) => f.remove_node(n),
                Act::Restore(n) => f.restore_node(n),
            };
            r.expect("script acts on the fabric");
        }
        if self.deaf {
            self.port.fabric().take_traps();
            std::thread::sleep(timeout);
            return Ok(None);
        }
        self.port.wait_trap(timeout)
    }
}

/// Minhop, sweeping every 50 ms: the scripts run in a fraction of a second.
fn fast_minhop(ucast_cache: bool) -> DaemonOptions<'static> {
    DaemonOptions {
        config_file: None,
        once: OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None },
        interval: Duration::from_millis(50),
        trap_settle: Duration::from_millis(10),
        trap_limits: Default::default(),
        guid2lid_path: None,
        ucast_cache,
        incremental: Some(sm_core::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY),
        standby: None,
        groups: None,
        sa: None,
        status: None,
        force_heavy_sweep: false,
        sweep_on_trap: true,
        honor_guid2lid_file: false,
    }
}

/// Port GUID → LID, from a sweep's snapshot.
fn lids(out: &OnceOutcome) -> BTreeMap<u64, u16> {
    out.snapshot().ports.iter().filter(|p| p.lid != 0).map(|p| (p.guid, p.lid)).collect()
}

/// Every switch of the fabric holds what `routing` says for `snapshot`.
fn assert_programmed(sim: &SimFabric, index: &BTreeMap<u64, usize>, snapshot: &FabricSnapshot, routing: &Routing) {
    for lft in routing.lfts.iter() {
        let guid = snapshot.nodes[lft.node as usize].guid;
        let held = sim.lft(index[&guid]).expect("a switch");
        for lid in 1..=usize::from(snapshot.max_lid) {
            let want = lft.ports.get(lid).copied().unwrap_or(NO_ROUTE);
            assert_eq!(held[lid], want, "switch {guid:#x} LID {lid}");
        }
    }
}

/// One sweep record: cause, nodes found, whether routed, LIDs, and the
/// check of the programmed tables done while the fabric was at hand.
struct Seen {
    cause: Cause,
    nodes: usize,
    lids: BTreeMap<u64, u16>,
    uses_link: bool,
}

fn scenario(deaf: bool) {
    let (topo, (sm_node, sm_port), spines) = common::two_spine_tree();
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    // A leaf–spine cable: the first link of spine 0.
    let link = topo.links.iter().find(|l| l.a.0 == spines[0] || l.b.0 == spines[0]).expect("a spine link");
    let (cut_node, cut_port) = if link.a.0 == spines[0] { link.b } else { link.a };
    let cut_guids = (topo.nodes[link.a.0].node_guid, topo.nodes[link.b.0].node_guid);

    // Actions after heavy sweep n (1-based); stop after the last.
    let script: Vec<Vec<Act>> = vec![
        vec![Act::LinkDown(cut_node, cut_port)],
        vec![Act::LinkUp(cut_node, cut_port)],
        vec![Act::Remove(spines[1])],
        vec![Act::Restore(spines[1])],
    ];
    let pending = Rc::new(RefCell::new(VecDeque::new()));
    let signals = Signals::default();
    let seen: RefCell<Vec<Seen>> = RefCell::new(Vec::new());
    let mut registry = Registry::scan(&[bin_dir()]);
    let options = fast_minhop(false);
    let mut g2l = Guid2Lid::default();
    let mut held = HeldTables::default();
    let summary = {
        let mut port = Scripted { port: SimPort::new(&mut sim), pending: Rc::clone(&pending), deaf };
        let mut on_heavy = |out: &OnceOutcome, n: u64, cause: Cause| {
            let uses_link = {
                let s = &out.snapshot();
                s.ports.iter().any(|p| {
                    p.peer != u32::MAX
                        && s.nodes[p.node as usize].guid == cut_guids.0
                        && s.nodes[s.ports[p.peer as usize].node as usize].guid == cut_guids.1
                })
            };
            let routed = out.accepted.as_ref().expect("every sweep routes");
            assert_eq!(routed.verification.unreachable, 0, "sweep {n}");
            seen.borrow_mut().push(Seen { cause, nodes: out.sweep.fabric.nodes.len(), lids: lids(out), uses_link });
            match script.get(n as usize - 1) {
                Some(acts) => pending.borrow_mut().extend(acts.iter().copied()),
                None => signals.stop.store(true, Ordering::Relaxed),
            }
        };
        daemon::run(daemon::DaemonContext { port: &mut port, options: &options, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut on_heavy)
    };
    let seen = seen.into_inner();
    // The first sweep as master asks every host to register with the SA
    // again, once; the sweeps after it do not.
    let hosts = topo.nodes.iter().filter(|n| !n.is_switch()).count() as u64;
    assert_eq!(sim.counters().client_reregistrations, hosts);
    assert_eq!(seen.len(), 5, "one heavy sweep per change plus the first");
    assert_eq!(summary.heavy_sweeps, 5);
    let all = topo.nodes.len();
    let want_cause = if deaf { Cause::Change } else { Cause::Trap };
    assert_eq!(seen[0].cause, Cause::Start);
    for s in &seen[1..] {
        assert_eq!(s.cause, want_cause);
    }
    if deaf {
        assert_eq!(summary.traps, 0);
        assert!(summary.light_sweeps >= 4);
    } else {
        assert!(summary.traps >= 4);
    }
    assert!(seen[0].uses_link);
    assert!(!seen[1].uses_link, "the cut cable is not in the fabric routed");
    assert!(seen[2].uses_link, "the cable is back");
    assert_eq!(seen[3].nodes, all - 1, "the spine is gone");
    assert_eq!(seen[4].nodes, all);
    // LIDs never change: every port keeps the LID the first sweep gave it.
    for (i, s) in seen.iter().enumerate() {
        for (guid, lid) in &s.lids {
            assert_eq!(seen[0].lids.get(guid), Some(lid), "sweep {}: port {guid:#x}", i + 1);
        }
    }
}

#[test]
fn traps_cause_heavy_sweeps_that_route_around_failures() {
    scenario(false);
}

#[test]
fn light_sweeps_find_changes_when_traps_are_lost() {
    scenario(true);
}

#[test]
fn the_last_sweep_is_what_the_switches_hold() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let index: BTreeMap<u64, usize> = topo.nodes.iter().enumerate().map(|(i, n)| (n.node_guid, i)).collect();
    let spine = topo.nodes.iter().position(|n| n.desc.contains("spine")).expect("spine");
    let mut registry = Registry::scan(&[bin_dir()]);
    let options = fast_minhop(false);
    let pending = Rc::new(RefCell::new(VecDeque::from([Act::Remove(spine)])));
    let signals = Signals::default();
    let mut last: Option<FabricSnapshot> = None;
    let mut g2l = Guid2Lid::default();
    let mut held = HeldTables::default();
    {
        let mut port = Scripted { port: SimPort::new(&mut sim), pending: Rc::clone(&pending), deaf: false };
        // Sweep 1 sees the whole fabric, then the spine goes; stop after
        // the sweep that followed.
        let mut on_heavy = |out: &OnceOutcome, n: u64, _cause: Cause| {
            if n >= 2 {
                signals.stop.store(true, Ordering::Relaxed);
            }
            last = Some(out.snapshot().into_owned());
        };
        daemon::run(daemon::DaemonContext { port: &mut port, options: &options, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut on_heavy);
    }
    let last = last.expect("a sweep");
    assert_eq!(last.nodes.len(), topo.nodes.len() - 1);
    // Route the last snapshot again with the same engine: the switches
    // must hold exactly that (minhop is deterministic).
    let outcome = sm_core::offline::route_fabric(&last, &registry, "minhop", &Config::default().route_settings(), None, &mut Default::default())
        .expect("route");
    let routed = outcome.routed.expect("routed");
    assert_programmed(&sim, &index, &last, &routed.routing);
}

#[test]
fn the_sm_process_sweeps_until_sigterm_and_stops_cleanly() {
    let tmp = tempfile::tempdir().expect("tmp");
    let report = tmp.path().join("report.json");
    let topo = common::workspace().join("config/topologies/fat-tree-64.net");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(&topo)
        .args(["--sweep-interval", "0.2", "--report"])
        .arg(&report)
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn smcore");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !report.exists() {
        assert!(std::time::Instant::now() < deadline, "no heavy sweep reported");
        assert!(child.try_wait().expect("wait").is_none(), "smcore exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let it run a few light sweeps.
    std::thread::sleep(Duration::from_millis(700));
    assert!(child.try_wait().expect("wait").is_none(), "smcore exited on its own");
    // SAFETY: plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("== heavy sweep 1 (Start)"), "{stdout}");
    let stopped = stdout.lines().find(|l| l.starts_with("smcore stopped")).expect("a stop line");
    // Nothing changed on the embedded fabric: one heavy sweep, light
    // sweeps after it.
    assert!(stopped.contains(" 1 heavy sweeps"), "{stopped}");
    assert!(!stopped.contains(" 0 light sweeps"), "{stopped}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    assert_eq!(json["heavy_sweep"], 1);
    assert_eq!(json["reachable_pairs"], json["pairs"], "{json}");
}

/// LFT blocks written per heavy sweep, and how each sweep got its routing,
/// while a host's cable is pulled and plugged back, with and without the
/// unicast cache.
fn host_reboot(ucast_cache: bool) -> Vec<(u64, Cause, usize, usize)> {
    host_reboot_with(ucast_cache, Some(sm_core::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY))
        .into_iter()
        .map(|(n, cause, lft_sets, routed_anew, _)| (n, cause, lft_sets, routed_anew))
        .collect()
}

/// [`host_reboot`] with incremental sweeps as given, each sweep's record
/// ending with its discovery SMPs.
fn host_reboot_with(ucast_cache: bool, incremental: Option<u32>) -> Vec<(u64, Cause, usize, usize, u64)> {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    // A host other than the SM's, with the highest LID or not: the last.
    let host = topo.nodes.iter().rposition(|n| !n.is_switch()).expect("a host");
    let pending = Rc::new(RefCell::new(VecDeque::new()));
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let options = DaemonOptions {
        config_file: None,
        once: OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None },
        interval: Duration::from_millis(50),
        trap_settle: Duration::from_millis(10),
        trap_limits: Default::default(),
        guid2lid_path: None,
        ucast_cache,
        incremental,
        standby: None,
        groups: None,
        sa: None,
        status: None,
        force_heavy_sweep: false,
        sweep_on_trap: true,
        honor_guid2lid_file: false,
    };
    let script = [vec![Act::LinkDown(host, 1)], vec![Act::LinkUp(host, 1)]];
    let mut seen = Vec::new();
    let mut g2l = Guid2Lid::default();
    let mut held = HeldTables::default();
    {
        let mut port = Scripted { port: SimPort::new(&mut sim), pending: Rc::clone(&pending), deaf: false };
        let mut on_heavy = |out: &OnceOutcome, n: u64, cause: Cause| {
            let routed = out.accepted.as_ref().expect("routed");
            assert_eq!(routed.verification.unreachable, 0, "sweep {n}");
            let routed_anew = out.attempts.iter().any(|a| a.route_time > Duration::ZERO);
            seen.push((n, cause, out.program.lft.set, usize::from(routed_anew), out.sweep.discovery_smps.sent));
            match script.get(n as usize - 1) {
                Some(acts) => pending.borrow_mut().extend(acts.iter().copied()),
                None => signals.stop.store(true, Ordering::Relaxed),
            }
        };
        daemon::run(daemon::DaemonContext { port: &mut port, options: &options, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut on_heavy);
    }
    seen
}

#[test]
fn with_the_unicast_cache_a_host_reboot_writes_no_lft_block() {
    let cached = host_reboot(true);
    assert_eq!(cached.len(), 3, "{cached:?}");
    assert!(cached[0].2 > 0, "the first sweep programs the fabric: {cached:?}");
    for &(n, cause, lft_sets, routed_anew) in &cached[1..] {
        assert_eq!(cause, Cause::Trap);
        assert_eq!(lft_sets, 0, "sweep {n} wrote LFT blocks: {cached:?}");
        assert_eq!(routed_anew, 0, "sweep {n} routed anew: {cached:?}");
    }
    // Without the cache the same events re-route and rewrite the blocks
    // holding the host's LID on every switch.
    let uncached = host_reboot(false);
    assert!(uncached[1].2 > 0 && uncached[2].2 > 0, "{uncached:?}");
}

#[test]
fn a_host_port_going_and_coming_back_is_rediscovered_behind_its_leaf_only() {
    let incremental = host_reboot_with(false, Some(8));
    let full = host_reboot_with(false, None);
    assert_eq!(incremental.len(), 3, "{incremental:?}");
    // The first sweep gave every switch its LID, which their ports may
    // now report: the daemon read those ports again right after it, so
    // the host going reads its leaf only: SwitchInfo, the PortInfos of
    // ports 0..=4, and the PortStateChange clear.
    assert_eq!(incremental[1].4, 1 + 5 + 1, "{incremental:?}");
    // Then the leaf's SwitchInfo and the PortInfos of its ports 0..=4,
    // the host's NodeInfo, NodeDescription and PortInfo, and the
    // PortStateChange clear.
    assert_eq!(incremental[2].4, 1 + 5 + 3 + 1, "{incremental:?}");
    // Each full sweep reads the whole fabric again.
    assert!(full[1..].iter().all(|s| s.4 > 3 * incremental[2].4), "{full:?}");
    // Every second heavy sweep full: the third one reads the whole fabric.
    let periodic = host_reboot_with(false, Some(2));
    assert!(periodic[1].4 < full[1].4, "{periodic:?} {full:?}");
    assert_eq!(periodic[2].4, full[2].4, "{periodic:?} {full:?}");
    // The same tables are written either way.
    for (a, b) in incremental.iter().zip(&full) {
        assert_eq!((a.1, a.2), (b.1, b.2), "{incremental:?} {full:?}");
    }
}

#[test]
fn the_unicast_cache_gives_way_when_a_spine_goes() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let spine = topo.nodes.iter().position(|n| n.desc.contains("spine")).expect("spine");
    let pending = Rc::new(RefCell::new(VecDeque::from([Act::Remove(spine)])));
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let options = fast_minhop(true);
    let mut second = None;
    let mut g2l = Guid2Lid::default();
    let mut held = HeldTables::default();
    {
        let mut port = Scripted { port: SimPort::new(&mut sim), pending: Rc::clone(&pending), deaf: false };
        let mut on_heavy = |out: &OnceOutcome, n: u64, _cause: Cause| {
            if n == 2 {
                let routed = out.accepted.as_ref().expect("routed");
                second = Some((routed.verification.unreachable, out.attempts[0].route_time, out.program.lft.set));
                signals.stop.store(true, Ordering::Relaxed);
            }
        };
        daemon::run(daemon::DaemonContext { port: &mut port, options: &options, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut on_heavy);
    }
    let (unreachable, route_time, lft_sets) = second.expect("a second sweep");
    // Paths crossed the spine: the cached tables fail the gate, the chain
    // routes again, and the new tables are written.
    assert_eq!(unreachable, 0);
    assert!(route_time > Duration::ZERO, "routed anew");
    assert!(lft_sets > 0);
}

/// Continuity on the embedded fabric: pseudo-random sequences of switch
/// links and switches going down and coming back, on a fat tree, a torus
/// and a random fabric, the SM loop routing with minhop-balanced. After
/// every re-route every pair is reachable, and a switch's entry the event
/// left valid (its port healthy and on a least-hop path) is as it was,
/// unless the engine's rebalancing lists that move with the link it
/// relieved. `ctl reroute` at the end routes from scratch.
#[test]
fn re_routes_keep_every_route_the_fault_left_valid() {
    let fabrics = [
        ("fat tree", gen::fat_tree_2level(4, 3, 2, 3).expect("fat tree"), 11u64),
        ("torus", gen::torus(&[3, 3], 1, false).expect("torus").0, 23),
        ("random", gen::random_irregular(10, 8, 1, 6, 7).expect("random"), 37),
    ];
    for (name, topo, seed) in fabrics {
        let (sm_node, sm_port) = sm_location(&topo);
        let links = topo.port_links();
        let far_of = |(n, p): (usize, u8)| {
            let l = &topo.links[links[n][usize::from(p)].expect("linked")];
            if l.a == (n, p) { l.b.0 } else { l.a.0 }
        };
        let sm_switch = far_of((sm_node, sm_port));
        let switch_links: Vec<(usize, u8)> = topo
            .links
            .iter()
            .filter(|l| topo.nodes[l.a.0].is_switch() && topo.nodes[l.b.0].is_switch())
            .filter(|l| l.a.0 != sm_switch && l.b.0 != sm_switch)
            .map(|l| l.a)
            .collect();
        let switches: Vec<usize> = (0..topo.nodes.len()).filter(|&i| topo.nodes[i].is_switch() && i != sm_switch).collect();
        // The script: each step toggles one link or one switch, never one
        // touching a switch that is gone.
        let mut rng = seed;
        let mut next = || {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) as usize
        };
        let (mut links_down, mut gone): (Vec<(usize, u8)>, Vec<usize>) = (Vec::new(), Vec::new());
        let mut script: Vec<Act> = Vec::new();
        while script.len() < 8 {
            if next() % 4 == 0 {
                let s = switches[next() % switches.len()];
                if let Some(i) = gone.iter().position(|&g| g == s) {
                    gone.swap_remove(i);
                    script.push(Act::Restore(s));
                } else if !links_down.iter().any(|&l| l.0 == s || far_of(l) == s) {
                    gone.push(s);
                    script.push(Act::Remove(s));
                }
            } else {
                let l = switch_links[next() % switch_links.len()];
                if gone.contains(&l.0) || gone.contains(&far_of(l)) {
                    continue;
                }
                if let Some(i) = links_down.iter().position(|&d| d == l) {
                    links_down.swap_remove(i);
                    script.push(Act::LinkUp(l.0, l.1));
                } else {
                    links_down.push(l);
                    script.push(Act::LinkDown(l.0, l.1));
                }
            }
        }
        let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
        let pending = Rc::new(RefCell::new(VecDeque::new()));
        let signals = Signals::default();
        let mut registry = Registry::scan(&[bin_dir()]);
        let mut options = fast_minhop(false);
        options.once.engines = "minhop-balanced";
        let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
        let previous: RefCell<BTreeMap<u64, Vec<u8>>> = RefCell::new(BTreeMap::new());
        let checked = RefCell::new(0u64);
        let mut port = Scripted { port: SimPort::new(&mut sim), pending: Rc::clone(&pending), deaf: false };
        let mut on_heavy = |out: &OnceOutcome, n: u64, cause: Cause| {
            let routed = out.accepted.as_ref().expect("every sweep routes");
            assert_eq!((routed.verification.unreachable, routed.verification.looping), (0, 0), "{name}, sweep {n}");
            let f = &routed.snapshot;
            let graph = smcore_kit::Graph::new(f);
            let dist = graph.distance_matrix();
            let said: Vec<&str> = routed.routing.diagnostics.iter().map(|d| d.message.as_str()).collect();
            let listed_all = !said.iter().any(|m| m.contains("more moves"));
            // The routing in force before this sweep; a switch that was gone
            // has none (the daemon hands only the last accepted routing).
            let prev = std::mem::take(&mut *previous.borrow_mut());
            let mut now = BTreeMap::new();
            for lft in routed.routing.lfts.iter() {
                let guid = f.nodes[lft.node as usize].guid;
                let s = graph.sw_of_node[lft.node as usize];
                if let Some(before) = prev.get(&guid).filter(|_| cause != Cause::Reroute) {
                    for lid in 1..lft.ports.len().min(before.len()) {
                        *checked.borrow_mut() += 1;
                        let pi = graph.lid_port[lid];
                        if pi == u32::MAX || before[lid] == lft.ports[lid] {
                            continue;
                        }
                        let t = graph.entry_switch(f, pi);
                        if t == u32::MAX || t == s {
                            continue;
                        }
                        let valid = graph.sw_ports[s as usize].iter().any(|p| {
                            p.port == before[lid] && p.peer_sw != u32::MAX && dist.get(p.peer_sw, t).checked_add(1) == Some(dist.get(s, t))
                        });
                        if !valid {
                            continue;
                        }
                        let listed = format!("switch {guid:#018x} LID {lid} moved from port {} to {}, relieving link", before[lid], lft.ports[lid]);
                        assert!(
                            said.iter().any(|m| m.contains(&listed)) || !listed_all,
                            "{name}, sweep {n}: switch {guid:#x} LID {lid} changed {} → {} though the event left it valid; {said:?}",
                            before[lid],
                            lft.ports[lid]
                        );
                    }
                }
                // `ctl reroute` routes from scratch; every other re-route
                // continues.
                let continued = said.iter().any(|m| m.contains("continued from the previous routing"));
                assert_eq!(continued, n > 1 && cause != Cause::Reroute, "{name}, sweep {n} ({cause:?}): {said:?}");
                now.insert(guid, lft.ports.to_vec());
            }
            *previous.borrow_mut() = now;
            match script.get(n as usize - 1) {
                Some(act) => pending.borrow_mut().push_back(*act),
                None if cause != Cause::Reroute => signals.reroute.store(true, Ordering::Relaxed),
                None => signals.stop.store(true, Ordering::Relaxed),
            }
        };
        let context = daemon::DaemonContext {
            port: &mut port,
            options: &options,
            registry: &mut registry,
            config: &Config::default(),
            guid2lid: &mut g2l,
            held: &mut held,
            signals: &signals,
        };
        let summary = daemon::run(context, &mut on_heavy);
        assert_eq!(summary.heavy_sweeps, script.len() as u64 + 2, "{name}: one heavy sweep per event, the first and the reroute");
        assert!(checked.into_inner() > 0, "{name}: no entry compared");
    }
}

/// `no_clients_rereg`: the master's first sweep asks no host to register
/// with the SA again (the scenario above shows it asks every host when the
/// key is off).
#[test]
fn no_clients_rereg_asks_no_host_to_register_again() {
    let (topo, (sm_node, sm_port), _) = common::two_spine_tree();
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let mut options = fast_minhop(false);
    options.once.sweep.no_clients_rereg = true;
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let mut port = SimPort::new(&mut sim);
    let mut on_heavy = |out: &OnceOutcome, _: u64, _: Cause| {
        assert!(out.accepted.is_some());
        signals.stop.store(true, Ordering::Relaxed);
    };
    let context = daemon::DaemonContext {
        port: &mut port,
        options: &options,
        registry: &mut registry,
        config: &Config::default(),
        guid2lid: &mut g2l,
        held: &mut held,
        signals: &signals,
    };
    let summary = daemon::run(context, &mut on_heavy);
    assert_eq!(summary.heavy_sweeps, 1);
    assert_eq!(sim.counters().client_reregistrations, 0);
    let hosts = topo.nodes.iter().filter(|n| !n.is_switch()).count();
    let lids = (0..sim.node_count()).filter(|&n| sim.port_lid(n, 1).is_some_and(|l| l != 0)).count();
    assert!(lids >= hosts, "the sweep addressed the hosts all the same");
}

/// The causes of the heavy sweeps of an SM on a two-level fat tree with
/// `force_heavy_sweep` and `sweep_on_trap` as given: after the first sweep
/// a host's link goes down; the loop stops after `sweeps` heavy sweeps or
/// after `limit`, whichever comes first.
fn causes_with(force_heavy_sweep: bool, sweep_on_trap: bool, link_down: bool, sweeps: usize, limit: Duration) -> Vec<Cause> {
    sweeps_with(force_heavy_sweep, sweep_on_trap, link_down, sweeps, limit).into_iter().map(|(c, _)| c).collect()
}

/// [`causes_with`], each cause with its sweep's discovery SMPs.
fn sweeps_with(force_heavy_sweep: bool, sweep_on_trap: bool, link_down: bool, sweeps: usize, limit: Duration) -> Vec<(Cause, u64)> {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let host = topo.nodes.iter().rposition(|n| !n.is_switch()).expect("a host");
    let pending = Rc::new(RefCell::new(VecDeque::new()));
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let options = DaemonOptions { force_heavy_sweep, sweep_on_trap, ..fast_minhop(false) };
    let mut causes = Vec::new();
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop = &signals.stop;
        let done = &done;
        s.spawn(move || {
            let end = std::time::Instant::now() + limit;
            while !done.load(Ordering::Relaxed) && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
        });
        let mut port = Scripted { port: SimPort::new(&mut sim), pending: Rc::clone(&pending), deaf: false };
        let mut on_heavy = |out: &OnceOutcome, n: u64, cause: Cause| {
            assert!(out.accepted.is_some(), "sweep {n} routed");
            causes.push((cause, out.sweep.discovery_smps.sent));
            if n == 1 && link_down {
                pending.borrow_mut().push_back(Act::LinkDown(host, 1));
            }
            if causes.len() >= sweeps {
                done.store(true, Ordering::Relaxed);
            }
        };
        let ctx = daemon::DaemonContext {
            port: &mut port,
            options: &options,
            registry: &mut registry,
            config: &Config::default(),
            guid2lid: &mut g2l,
            held: &mut held,
            signals: &signals,
        };
        daemon::run(ctx, &mut on_heavy);
        done.store(true, Ordering::Relaxed);
    });
    causes
}

#[test]
fn force_heavy_sweep_sweeps_heavily_at_every_interval() {
    // A quiet fabric: light sweeps find nothing, so one heavy sweep in
    // 20 intervals.
    let quiet = causes_with(false, true, false, 2, Duration::from_secs(1));
    assert_eq!(quiet, vec![Cause::Start], "{quiet:?}");
    // force_heavy_sweep: every interval is a heavy sweep, and each reads
    // the whole fabric (nothing names what changed: an incremental one
    // would read nothing).
    let forced = sweeps_with(true, true, false, 4, Duration::from_secs(20));
    let causes: Vec<Cause> = forced.iter().map(|s| s.0).collect();
    assert_eq!(causes, vec![Cause::Start, Cause::Change, Cause::Change, Cause::Change], "{forced:?}");
    assert!(forced[1..].iter().all(|s| s.1 * 10 >= forced[0].1 * 9), "{forced:?}");
}

#[test]
fn without_sweep_on_trap_the_light_sweep_finds_what_a_trap_reported() {
    let on_trap = causes_with(false, true, true, 2, Duration::from_secs(20));
    assert_eq!(on_trap, vec![Cause::Start, Cause::Trap], "{on_trap:?}");
    let no_trap_sweep = causes_with(false, false, true, 2, Duration::from_secs(20));
    assert_eq!(no_trap_sweep, vec![Cause::Start, Cause::Change], "{no_trap_sweep:?}");
}

/// The embedded fabric behind a port that, once `armed` holds the
/// issuer's LID and port, plays that switch sending trap 129 (link
/// integrity) `left` times.
struct Babbler<'a> {
    port: SimPort<'a>,
    armed: Rc<RefCell<Option<(u16, u8)>>>,
    left: usize,
}

impl SmpPort for Babbler<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send(mad)
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        if let Some((lid, port)) = *self.armed.borrow() {
            if self.left > 0 {
                self.left -= 1;
                let mut trap = sm_core::daemon::traps::generic_trap(lid, lid, 129);
                // DataDetails (at 10 in the Notice, 64 in the SMP): LIDADDR at 2, PORTNO at 4.
                trap.mad[64 + 12..64 + 14].copy_from_slice(&lid.to_be_bytes());
                trap.mad[64 + 14] = port;
                return Ok(Some(trap));
            }
        }
        self.port.wait_trap(timeout)
    }
}

/// A spine port facing a leaf sends 300 link integrity traps after the
/// first sweep; returns the heavy sweeps' causes and that port's state.
fn babbling(policy: bool) -> (Vec<Cause>, Option<sm_mad::PortState>) {
    let (topo, (sm_node, sm_port), spines) = common::two_spine_tree();
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let link = topo.links.iter().find(|l| l.a.0 == spines[0] || l.b.0 == spines[0]).expect("a spine link");
    let (spine, spine_port) = if link.a.0 == spines[0] { link.a } else { link.b };
    let spine_guid = topo.nodes[spine].node_guid;
    let armed = Rc::new(RefCell::new(None));
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let mut options = fast_minhop(false);
    options.trap_limits.babbling_port_policy = policy;
    let mut causes = Vec::new();
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (stop, done) = (&signals.stop, &done);
        s.spawn(move || {
            let end = std::time::Instant::now() + Duration::from_secs(if policy { 20 } else { 2 });
            while !done.load(Ordering::Relaxed) && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
        });
        let mut port = Babbler { port: SimPort::new(&mut sim), armed: Rc::clone(&armed), left: 300 };
        let mut on_heavy = |out: &OnceOutcome, _n: u64, cause: Cause| {
            causes.push(cause);
            if causes.len() == 1 {
                let f = &out.sweep.fabric;
                let sw = f.find(spine_guid).expect("the spine");
                let lid = f.nodes[sw].ports[0].info.expect("port 0").lid;
                *armed.borrow_mut() = Some((lid, spine_port));
            } else {
                done.store(true, Ordering::Relaxed);
            }
        };
        let ctx = daemon::DaemonContext {
            port: &mut port,
            options: &options,
            registry: &mut registry,
            config: &Config::default(),
            guid2lid: &mut g2l,
            held: &mut held,
            signals: &signals,
        };
        daemon::run(ctx, &mut on_heavy);
        done.store(true, Ordering::Relaxed);
    });
    (causes, sim.port_state(spine, spine_port))
}

#[test]
fn babbling_port_policy_disables_a_port_whose_error_traps_keep_coming() {
    let (causes, state) = babbling(false);
    assert_eq!(causes, vec![Cause::Start], "port error traps alone never sweep");
    assert_eq!(state, Some(sm_mad::PortState::Active), "without the policy the port stays up");
    let (causes, state) = babbling(true);
    assert_eq!(causes, vec![Cause::Start, Cause::Change], "the disabled link is routed around");
    assert_eq!(state, Some(sm_mad::PortState::Down), "the babbling port is disabled");
}
