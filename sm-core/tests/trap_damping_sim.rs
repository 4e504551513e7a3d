//! Traps on the embedded fabric: the first change of a port re-routes at
//! once (the settling time here is an hour, longer than the test lives),
//! traps that arrive while a sweep runs are folded into one follow-up
//! sweep, and a port that flaps is damped (its traps settle, then are
//! suppressed) instead of sweeping at every change.

mod common;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::bin_dir;
use sm_core::config::Config;
use sm_core::daemon::{self, Cause, DaemonOptions, DaemonSummary, Signals};
use sm_core::engines::Registry;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SmpPort, SweepOptions, TransportError, TrapMad};
use sm_core::pipeline::{OnceOptions, OnceOutcome};

/// A cable to pull or plug back, by one of its ends.
#[derive(Debug, Clone, Copy)]
enum Act {
    Down(usize, u8),
    Up(usize, u8),
}

fn apply(sim: &mut SimFabric, act: Act) {
    match act {
        Act::Down(n, p) => sim.link_down(n, p),
        Act::Up(n, p) => sim.link_up(n, p),
    }
    .expect("the script acts on cables of the fabric")
}

/// What the port does to the fabric, and when.
#[derive(Default)]
struct Script {
    /// Before the next wait for traps.
    before_wait: VecDeque<Act>,
    /// Once a trap was handed to the SM: during the sweep it causes.
    during_sweep: VecDeque<Act>,
    /// Stop the SM once every trap the fabric sent was read.
    stop_when_drained: bool,
}

struct Scripted<'a, 's> {
    port: SimPort<'a>,
    script: Rc<RefCell<Script>>,
    signals: &'s Signals,
    /// A trap was handed to the SM: the next SMP is its sweep's.
    trap_given: bool,
}

impl Scripted<'_, '_> {
    fn during_sweep(&mut self) {
        if !self.trap_given {
            return;
        }
        let acts: Vec<Act> = self.script.borrow_mut().during_sweep.drain(..).collect();
        for act in acts {
            apply(self.port.fabric(), act);
        }
    }
}

impl SmpPort for Scripted<'_, '_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.during_sweep();
        self.port.send(mad)
    }
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.during_sweep();
        self.port.send_to(dlid, mad)
    }
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        let acts: Vec<Act> = self.script.borrow_mut().before_wait.drain(..).collect();
        for act in acts {
            apply(self.port.fabric(), act);
        }
        let got = self.port.wait_trap(timeout)?;
        match &got {
            Some(_) => self.trap_given = true,
            None if self.script.borrow().stop_when_drained => self.signals.stop.store(true, Ordering::Relaxed),
            None => {}
        }
        Ok(got)
    }
}

/// Light sweeps and trap settling an hour apart: within the test only a
/// trap that sweeps at once causes a heavy sweep.
fn options() -> DaemonOptions<'static> {
    DaemonOptions {
        config_file: None,
        once: OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None },
        interval: Duration::from_secs(3600),
        trap_settle: Duration::from_secs(3600),
        trap_limits: Default::default(),
        guid2lid_path: None,
        ucast_cache: false,
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

/// Runs the SM on `sim` until the script drains (or the watchdog ends it
/// after a minute: something waited for the settling time); `plan` adds to
/// the script after heavy sweep `n`. Returns the causes of the heavy
/// sweeps, the summary and whether the watchdog ended it.
fn run_scripted(sim: &mut SimFabric, plan: impl Fn(u64, &mut Script)) -> (Vec<Cause>, DaemonSummary, bool) {
    let script = Rc::new(RefCell::new(Script::default()));
    let signals = Signals::default();
    let causes: RefCell<Vec<Cause>> = RefCell::new(Vec::new());
    let mut registry = Registry::scan(&[bin_dir()]);
    let options = options();
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let ended_by_watchdog = AtomicBool::new(false);
    let summary: DaemonSummary = std::thread::scope(|s| {
        // Without a sweep at once, the trap would wait its hour: the test
        // ends here and says what it saw.
        s.spawn(|| {
            let end = Instant::now() + Duration::from_secs(60);
            while !signals.stop.load(Ordering::Relaxed) {
                if Instant::now() >= end {
                    ended_by_watchdog.store(true, Ordering::Relaxed);
                    signals.stop.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let mut port =
            Scripted { port: SimPort::new(sim), script: Rc::clone(&script), signals: &signals, trap_given: false };
        let mut on_heavy = |out: &OnceOutcome, n: u64, cause: Cause| {
            assert_eq!(out.accepted.as_ref().expect("routed").verification.unreachable, 0, "sweep {n}");
            causes.borrow_mut().push(cause);
            let mut sc = script.borrow_mut();
            plan(n, &mut sc);
        };
        let summary = daemon::run(
            daemon::DaemonContext {
                port: &mut port,
                options: &options,
                registry: &mut registry,
                config: &Config::default(),
                guid2lid: &mut g2l,
                held: &mut held,
                signals: &signals,
            },
            &mut on_heavy,
        );
        signals.stop.store(true, Ordering::Relaxed);
        summary
    });
    (causes.into_inner(), summary, ended_by_watchdog.load(Ordering::Relaxed))
}

#[test]
fn a_change_sweeps_at_once_traps_during_a_sweep_fold_and_a_flapping_port_is_damped() {
    let (topo, (sm_node, sm_port), spines) = common::two_spine_tree();
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    // Leaf ends of the uplinks of each spine, in cable order.
    let uplinks = |spine: usize| -> Vec<(usize, u8)> {
        topo.links
            .iter()
            .filter(|l| l.a.0 == spine || l.b.0 == spine)
            .map(|l| if l.a.0 == spine { l.b } else { l.a })
            .collect()
    };
    let (to_spine0, to_spine1) = (uplinks(spines[0]), uplinks(spines[1]));
    assert!(to_spine0.len() >= 2 && to_spine1.len() >= 3);
    // A: the cable that changes once, then flaps. B and C: cables that
    // fail while the sweep for A runs (other leaves, the other spine).
    let a = to_spine0[0];
    let (b, c) = (to_spine1[1], to_spine1[2]);
    assert!(a.0 != b.0 && a.0 != c.0 && b.0 != c.0);

    let (causes, summary, watchdog) = run_scripted(&mut sim, |n, sc| {
        match n {
            // A goes down; B and C go down during the sweep A's traps
            // cause.
            1 => {
                sc.before_wait.push_back(Act::Down(a.0, a.1));
                sc.during_sweep.extend([Act::Down(b.0, b.1), Act::Down(c.0, c.1)]);
            }
            // B's and C's traps, queued during sweep 2, make one sweep.
            // Then A comes back: its second change sweeps at once too.
            3 => sc.before_wait.push_back(Act::Up(a.0, a.1)),
            // A flaps: ten times down and up.
            4 => {
                for _ in 0..10 {
                    sc.before_wait.extend([Act::Down(a.0, a.1), Act::Up(a.0, a.1)]);
                }
                sc.stop_when_drained = true;
            }
            _ => {}
        }
    });
    assert!(!watchdog, "the SM waited for the settling time: {causes:?} {summary:?}");
    // The first change of A, B and C folded, A back: one sweep each, at
    // once; the flapping produces none.
    assert_eq!(causes, vec![Cause::Start, Cause::Trap, Cause::Trap, Cause::Trap], "{summary:?}");
    // Twenty changes of A: the first few traps were let through to
    // settle, the rest suppressed (a trap per change and end at most: a
    // switch traps again only once the SM read its PortStateChange).
    assert!(summary.traps_dropped >= 10, "the flapping ports were not suppressed: {summary:?}");
    assert!(summary.traps_accepted < summary.traps, "{summary:?}");
    assert!(sim.counters().traps_generated >= summary.traps);
}

/// The uplinks (leaf end) of a leaf away from the SM's, to both spines.
fn uplinks_of_a_leaf(topo: &sm_topology::Topology, (sm_node, sm_port): (usize, u8), spines: &[usize]) -> Vec<(usize, u8)> {
    let sm_leaf = topo.peer(sm_node, sm_port).map(|(s, _)| s);
    topo
        .nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| n.is_switch() && !spines.contains(&i) && Some(i) != sm_leaf)
        .map(|(i, _)| {
            let ups: Vec<(usize, u8)> = topo
                .links
                .iter()
                .filter_map(|l| {
                    if l.a.0 == i && spines.contains(&l.b.0) {
                        Some(l.a)
                    } else if l.b.0 == i && spines.contains(&l.a.0) {
                        Some(l.b)
                    } else {
                        None
                    }
                })
                .collect();
            ups
        })
        .find(|ups| ups.len() >= 2)
        .expect("a leaf with two uplinks")
}

/// A trap 128 names the switch, not the port: a switch whose one cable
/// went down and came back, and whose other cable fails next, is not
/// flapping. That third change re-routes at once (it waited the settling
/// time when the damping counted the switch's traps).
#[test]
fn another_port_of_a_switch_whose_cable_came_back_sweeps_at_once() {
    let (topo, (sm_node, sm_port), spines) = common::two_spine_tree();
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let leaf_uplinks = uplinks_of_a_leaf(&topo, (sm_node, sm_port), &spines);
    let (a, d) = (leaf_uplinks[0], leaf_uplinks[1]);
    let (causes, summary, watchdog) = run_scripted(&mut sim, |n, sc| match n {
        1 => sc.before_wait.push_back(Act::Down(a.0, a.1)),
        2 => sc.before_wait.push_back(Act::Up(a.0, a.1)),
        3 => sc.before_wait.push_back(Act::Down(d.0, d.1)),
        _ => sc.stop_when_drained = true,
    });
    assert!(!watchdog, "the third change of the leaf waited the settling time: {causes:?} {summary:?}");
    assert_eq!(causes, vec![Cause::Start, Cause::Trap, Cause::Trap, Cause::Trap], "{summary:?}");
}

/// A link lost is routed around at once, however often its port changed
/// before: only a flapping port's return may wait (it waited the settling
/// time when every change of a flapping port settled).
#[test]
fn a_link_lost_is_routed_around_at_once_even_when_its_port_flaps() {
    let (topo, (sm_node, sm_port), spines) = common::two_spine_tree();
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let a = uplinks_of_a_leaf(&topo, (sm_node, sm_port), &spines)[0];
    let (causes, summary, watchdog) = run_scripted(&mut sim, |n, sc| match n {
        1 => sc.before_wait.push_back(Act::Down(a.0, a.1)),
        2 => sc.before_wait.push_back(Act::Up(a.0, a.1)),
        3 => sc.before_wait.push_back(Act::Down(a.0, a.1)),
        _ => sc.stop_when_drained = true,
    });
    assert!(!watchdog, "the third change, a link lost, waited the settling time: {causes:?} {summary:?}");
    assert_eq!(causes, vec![Cause::Start, Cause::Trap, Cause::Trap, Cause::Trap], "{summary:?}");
}
