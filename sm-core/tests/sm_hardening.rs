//! The SM loop against what a hostile or broken fabric does to it (issue
//! 13): MFT writes that fail, traps that are forged or never stop, MLIDs at
//! the edge of the multicast range, dumps that cannot be written. Each
//! test fails on the code before the fix it names.

mod common;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bin_dir, mc_member, mc_mgid, mc_params, sm_location};
use sm_core::config::Config;
use sm_core::daemon::traps::{generic_trap, TrapLimits};
use sm_core::daemon::{self, Cause, DaemonOptions, DaemonSummary, Signals};
use sm_core::engines::Registry;
use sm_core::mcast::program::{program_mfts, HeldMfts};
use sm_core::mcast::tree::{GroupTree, McastPlan, TreeSource};
use sm_core::mcast::McGroups;
use sm_core::sim::{SimFabric, SimOptions, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SmpClient, SmpPort, SweepOptions, TransportError, TrapMad};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::{attr, method};
use sm_mad::notice::trap;
use sm_topology::gen;

/// What the test port does besides passing SMPs to the embedded fabric.
#[derive(Default)]
struct Faults {
    /// Answer no MFT Set (a switch that drops them).
    drop_mft_sets: bool,
    /// MFT Sets seen.
    mft_sets: Cell<u64>,
    /// Traps handed to the SM at every wait, as many as it asks for.
    storm: Option<TrapMad>,
}

struct FaultyPort<'a> {
    port: SimPort<'a>,
    faults: Rc<Faults>,
}

impl SmpPort for FaultyPort<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        if self.is_mft_set(mad) {
            self.faults.mft_sets.set(self.faults.mft_sets.get() + 1);
            if self.faults.drop_mft_sets {
                return Ok(None);
            }
        }
        self.port.send(mad)
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        if self.is_mft_set(mad) {
            self.faults.mft_sets.set(self.faults.mft_sets.get() + 1);
            if self.faults.drop_mft_sets {
                return Ok(None);
            }
        }
        self.port.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        if let Some(t) = &self.faults.storm {
            // A storm: a trap every millisecond.
            std::thread::sleep(Duration::from_millis(1).min(timeout));
            return Ok(Some(t.clone()));
        }
        self.port.wait_trap(timeout)
    }
}

impl FaultyPort<'_> {
    fn is_mft_set(&self, mad: &[u8]) -> bool {
        mad.len() > 17
            && mad[3] == method::SET
            && u16::from_be_bytes([mad[16], mad[17]]) == attr::MULTICAST_FORWARDING_TABLE
    }
}

fn options(groups: Option<Arc<Mutex<McGroups>>>) -> DaemonOptions<'static> {
    DaemonOptions {
        config_file: None,
        once: OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None },
        interval: Duration::from_millis(50),
        trap_settle: Duration::from_millis(10),
        trap_limits: TrapLimits::default(),
        guid2lid_path: None,
        ucast_cache: false,
        incremental: Some(sm_core::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY),
        standby: None,
        groups,
        sa: None,
        status: None,
        force_heavy_sweep: false,
        sweep_on_trap: true,
        honor_guid2lid_file: false,
    }
}

/// Runs the loop on `sim` for `run_for`, then stops it.
fn run_daemon(sim: &mut SimFabric, faults: Rc<Faults>, options: &DaemonOptions<'_>, run_for: Duration) -> (DaemonSummary, Vec<Cause>) {
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let mut causes = Vec::new();
    let summary = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(run_for);
            signals.stop.store(true, Ordering::Relaxed);
        });
        let mut port = FaultyPort { port: SimPort::new(sim), faults };
        let mut on_heavy = |_: &OnceOutcome, _: u64, cause: Cause| causes.push(cause);
        daemon::run(daemon::DaemonContext { port: &mut port, options, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut on_heavy)
    });
    (summary, causes)
}

fn fat_tree() -> (sm_topology::Topology, SimFabric) {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let (sm_node, sm_port) = sm_location(&topo);
    let sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    (topo, sim)
}

/// Port GUIDs of the first two hosts of `topo`.
fn two_hosts(topo: &sm_topology::Topology) -> Vec<u64> {
    topo.nodes.iter().filter(|n| !n.is_switch()).take(2).map(|n| n.port_guid(1)).collect()
}

/// Issue 13 item 6: a switch that never takes an MFT block made the loop
/// retry at once, forever, never reading traps or sweeping. Now the
/// programming backs off and light sweeps go on.
#[test]
fn failing_mft_writes_back_off_and_the_loop_keeps_sweeping() {
    let (topo, mut sim) = fat_tree();
    let groups = Arc::new(Mutex::new(McGroups::new()));
    {
        let mut g = groups.lock().expect("groups");
        let hosts = two_hosts(&topo);
        g.create(mc_params(1, 0), None, mc_member(hosts[0])).expect("create");
        g.join(&mc_mgid(1), mc_member(hosts[1])).expect("join");
    }
    let faults = Rc::new(Faults { drop_mft_sets: true, ..Default::default() });
    let opts = options(Some(groups));
    let (summary, _) = run_daemon(&mut sim, Rc::clone(&faults), &opts, Duration::from_millis(1600));
    assert!(summary.light_sweeps >= 5, "the loop starved: {summary:?}");
    assert!(summary.mcast_failures >= 1, "{summary:?}");
    // 0.5 s, then 1 s of back-off: at most the sweep's attempt and two
    // retries in 1.6 s (without the back-off: hundreds).
    assert!(summary.mcast_updates <= 4, "no back-off: {summary:?}");
    assert!(faults.mft_sets.get() > 0);
}

/// A trap 128 from LID `slid`, claiming `issuer`.
fn trap_128(slid: u16, issuer: u16) -> TrapMad {
    generic_trap(slid, issuer, trap::LINK_STATE_CHANGE)
}

/// Issue 13 item 9: every trap from any LID caused a heavy sweep. A host
/// that forges traps from a LID no sweep found causes none now.
#[test]
fn a_storm_of_forged_traps_causes_no_heavy_sweep() {
    let (_, mut sim) = fat_tree();
    let faults = Rc::new(Faults { storm: Some(trap_128(0x3000, 0x3000)), ..Default::default() });
    let opts = options(None);
    let (summary, causes) = run_daemon(&mut sim, faults, &opts, Duration::from_millis(1000));
    assert!(summary.traps > 100, "the storm did not arrive: {summary:?}");
    assert!(!causes.contains(&Cause::Trap), "forged traps caused sweeps: {causes:?}");
    assert_eq!(summary.traps_dropped, summary.traps, "{summary:?}");
    assert!(summary.light_sweeps > 0, "{summary:?}");
}

/// Issue 13 item 9: a real switch whose port flaps (or a host replaying its
/// traps) may not keep the SM in heavy sweeps: the issuer is suppressed
/// after a few, and the trap budget bounds the pace before that.
#[test]
fn a_flapping_switch_causes_a_bounded_number_of_heavy_sweeps() {
    let (_, mut sim) = fat_tree();
    // The first switch's LID, as the first sweep will give it: learn it
    // from a sweep of an identical fabric.
    let switch_lid = {
        let (_, mut probe) = fat_tree();
        let registry = Registry::scan(&[bin_dir()]);
        let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
        let mut port = SimPort::new(&mut probe);
        let out = sm_core::pipeline::once(&mut port, &options(None).once, &registry, &Config::default(), &mut g2l, &mut held)
            .expect("sweep");
        let sw = out.snapshot().nodes.iter().position(|n| n.kind == sm_abi::NodeKind::Switch).expect("a switch");
        out.snapshot().ports.iter().find(|p| p.node as usize == sw && p.num == 0).expect("port 0").lid
    };
    let faults = Rc::new(Faults { storm: Some(trap_128(switch_lid, switch_lid)), ..Default::default() });
    let opts = options(None);
    let (summary, causes) = run_daemon(&mut sim, faults, &opts, Duration::from_millis(2000));
    let trap_sweeps = causes.iter().filter(|&&c| c == Cause::Trap).count();
    assert!(trap_sweeps >= 1, "a real switch's trap must sweep: {causes:?}");
    // Flap damping suppresses the issuer once its penalty (one per trap)
    // passes the threshold: no more sweeps than that many traps.
    let damping = TrapLimits::default().damping;
    assert!(trap_sweeps as f64 <= damping.suppress, "{trap_sweeps} trap sweeps: {summary:?}");
    assert!(summary.traps > 500, "{summary:?}");
}

/// Issue 13 item 6: MLIDs beyond a switch's MulticastFDBCap are never
/// written to it (they were, for a switch met for the first time, and
/// failed there), and a group in the last MFT block does not overflow the
/// MulticastFDBTop computation.
#[test]
fn mft_programming_respects_the_cap_and_the_last_block() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let (sm_node, sm_port) = sm_location(&topo);
    for (cap, far_mlid) in [(64u16, 0xC400u16), (0x4000, 0xFFFF)] {
        let opts = SimOptions { multicast_fdb_cap: cap, ..SimOptions::default() };
        let mut sim = SimFabric::with_options(&topo, sm_node, sm_port, opts).expect("sim");
        let registry = Registry::scan(&[bin_dir()]);
        let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
        let out = {
            let mut port = SimPort::new(&mut sim);
            sm_core::pipeline::once(&mut port, &options(None).once, &registry, &Config::default(), &mut g2l, &mut held)
                .expect("sweep")
        };
        let fabric = &out.sweep.fabric;
        let switches: Vec<u32> = (0..fabric.nodes.len() as u32).filter(|&i| fabric.nodes[i as usize].is_switch()).collect();
        let tree = |mlid| GroupTree {
            mlid,
            sl: 0,
            switches: switches.iter().map(|&s| (s, vec![1u8])).collect::<BTreeMap<_, _>>(),
            source: TreeSource::MinHop,
        };
        let plan = McastPlan { trees: vec![tree(0xC000), tree(far_mlid)], problems: Vec::new() };
        let mut port = SimPort::new(&mut sim);
        let mut client = SmpClient::new(&mut port, 1);
        let mut mfts = HeldMfts::new();
        let report = program_mfts(&mut client, fabric, &plan, &mut mfts);
        assert_eq!(report.failed, 0, "cap {cap:#x}: a block was sent that the switch cannot hold: {report:?}");
        assert!(report.written > 0, "{report:?}");
        if far_mlid - 0xC000 >= cap {
            assert_eq!(report.over_capacity as usize, switches.len(), "{report:?}");
        } else {
            for &s in &switches {
                assert_eq!(mfts.mask(fabric.nodes[s as usize].guid, far_mlid, 0), Some(1 << 1));
            }
        }
    }
}

/// Issue 13 item 7: a dump directory that cannot be written stopped the
/// sweep before programming. Now the fabric is programmed and the dump
/// failure only logged.
#[test]
fn an_unwritable_dump_does_not_keep_routing_from_the_fabric() {
    let (_, mut sim) = fat_tree();
    let dir = tempfile::tempdir().expect("tempdir");
    // A directory where the LFT dump must go: no file can replace it, not
    // even for root.
    std::fs::create_dir(dir.path().join("opensm-lfts.dump")).expect("plant");
    let registry = Registry::scan(&[bin_dir()]);
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let once = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: Some(dir.path()) };
    let out = {
        let mut port = SimPort::new(&mut sim);
        sm_core::pipeline::once(&mut port, &once, &registry, &Config::default(), &mut g2l, &mut held)
            .expect("the sweep must not fail because of a dump")
    };
    assert!(out.accepted.is_some());
    assert!(out.program.lft.set > 0, "nothing programmed: {:?}", out.program);
    // The switches hold routes.
    let sw = (0..sim.node_count()).find(|&i| sim.lft(i).is_some()).expect("a switch");
    assert!(sim.lft(sw).expect("lft").iter().any(|&p| p != 0xFF));
}

/// Issue 13 item 13: each heavy sweep wrote `guid2lid` twice, first from
/// the dumps with the present ports only (a crash then lost the LIDs of
/// hosts that were away). The sweep's dumps leave it to the SM now, which
/// writes it once, with every port it remembers.
#[test]
fn the_sweeps_dumps_leave_guid2lid_to_the_sm() {
    let (_, mut sim) = fat_tree();
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = Registry::scan(&[bin_dir()]);
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    // A host that was here before and is away now.
    g2l.entries.insert(0x0011_2233_4455_6677, (0x40, 0x40));
    let once = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: Some(dir.path()) };
    let out = {
        let mut port = SimPort::new(&mut sim);
        sm_core::pipeline::once(&mut port, &once, &registry, &Config::default(), &mut g2l, &mut held).expect("sweep")
    };
    assert!(dir.path().join("opensm-lfts.dump").exists(), "{:?}", out.report.dumps);
    assert!(!dir.path().join("guid2lid").exists(), "the dumps wrote guid2lid: {:?}", out.report.dumps);
    let path = dir.path().join("guid2lid");
    g2l.write(&path).expect("write");
    let back = Guid2Lid::read(&path).expect("read");
    assert_eq!(back.entries.get(&0x0011_2233_4455_6677), Some(&(0x40, 0x40)));
    assert!(back.entries.len() > 1);
}

/// A port that works for `good_waits` waits, then is gone for good.
struct DyingPort<'a> {
    port: SimPort<'a>,
    good_waits: u32,
}

impl SmpPort for DyingPort<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send(mad)
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        if self.good_waits == 0 {
            return Err(TransportError::Closed("umad device removed".into()));
        }
        self.good_waits -= 1;
        self.port.wait_trap(timeout)
    }
}

/// Issue 13 item 3: when the transport is truly gone the loop ends and
/// says why (the process then exits non-zero for its service manager),
/// instead of living on deaf.
#[test]
fn a_transport_that_is_gone_ends_the_loop_with_the_reason() {
    let (_, mut sim) = fat_tree();
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let opts = options(None);
    let summary = std::thread::scope(|s| {
        // A safety net only: the loop must end long before.
        s.spawn(|| {
            let end = std::time::Instant::now() + Duration::from_secs(30);
            while !signals.stop.load(Ordering::Relaxed) && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            signals.stop.store(true, Ordering::Relaxed);
        });
        let mut port = DyingPort { port: SimPort::new(&mut sim), good_waits: 3 };
        let mut on_heavy = |_: &OnceOutcome, _: u64, _: Cause| {};
        let summary = daemon::run(daemon::DaemonContext { port: &mut port, options: &opts, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut on_heavy);
        signals.stop.store(true, Ordering::Relaxed);
        summary
    });
    assert_eq!(summary.fatal.as_deref(), Some("umad device removed"), "{summary:?}");
    assert_eq!(summary.heavy_sweeps, 1, "{summary:?}");
}

/// A port that hands the SM one trap 144 (capability change: another SM
/// came up), from a LID of the fabric, just before a light sweep is due.
struct LateTrapPort<'a> {
    port: SimPort<'a>,
    trap: Option<TrapMad>,
    waits: u32,
}

impl SmpPort for LateTrapPort<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send(mad)
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.port.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        self.waits += 1;
        // The interval is one slice long: the first wait slice ends it.
        std::thread::sleep(timeout);
        Ok(if self.waits == 1 { self.trap.take() } else { None })
    }
}

/// A trap whose settling time runs past the end of the interval must still
/// cause its heavy sweep: the light sweep reads PortStateChange only and
/// does not see a capability change (seen under ibsim: a master never
/// noticed a second SM whose trap 144 came late in an interval).
#[test]
fn a_trap_late_in_the_interval_still_causes_its_heavy_sweep() {
    let (_, mut sim) = fat_tree();
    // The SM's own LID is 1 on a fresh fabric; any fabric LID will do.
    let trap = generic_trap(1, 1, trap::CAPABILITY_CHANGE);
    let signals = Signals::default();
    let mut registry = Registry::scan(&[bin_dir()]);
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let mut opts = options(None);
    opts.interval = Duration::from_millis(40);
    opts.trap_settle = Duration::from_millis(200);
    let mut causes = Vec::new();
    {
        let mut port = LateTrapPort { port: SimPort::new(&mut sim), trap: Some(trap), waits: 0 };
        let mut on_heavy = |_: &OnceOutcome, n: u64, cause: Cause| {
            causes.push(cause);
            if n >= 2 {
                signals.stop.store(true, Ordering::Relaxed);
            }
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                let end = std::time::Instant::now() + Duration::from_secs(5);
                while !signals.stop.load(Ordering::Relaxed) && std::time::Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(20));
                }
                signals.stop.store(true, Ordering::Relaxed);
            });
            daemon::run(daemon::DaemonContext { port: &mut port, options: &opts, registry: &mut registry, config: &Config::default(), guid2lid: &mut g2l, held: &mut held, signals: &signals }, &mut on_heavy);
        });
    }
    assert_eq!(causes, vec![Cause::Start, Cause::Trap], "the trap's sweep was lost");
}
