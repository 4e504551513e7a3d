//! # The SM loop: heavy sweeps, light sweeps, traps, shutdown
//!
//! What `smcore` does when it is not told `--once`:
//!
//! 1. A heavy sweep ([`sweep::once`]): discovery, LIDs, the engine chain
//!    and its verify gate, dumps, programming of what differs.
//! 2. Then it waits, one sweep interval at a time. A trap (a switch
//!    reporting a port state change) ends the wait at once and, after a
//!    short pause that gathers the other traps of the same event (a switch
//!    going away makes all its neighbours trap), causes a heavy sweep.
//! 3. When the interval passes quietly, a light sweep reads
//!    PortStateChange from every switch ([`sweep::light`]); a set bit or a
//!    switch that stopped answering causes a heavy sweep. So changes are
//!    found even where traps are lost (no route to the SM yet, a switch
//!    that does not send them).
//!
//! A heavy sweep that finds nothing routable (every engine refused, or
//! `no_fallback` and the first engine refused) programs nothing: the
//! switches keep the tables they hold, and routing is tried again at every
//! light sweep until it succeeds. LIDs are kept throughout; the heavy
//! sweep re-reads them from the ports and `guid2lid`.
//!
//! A reload flag (SIGHUP, or `reload` on the control socket) rescans the
//! engine directories: a new build of an engine routes from the next heavy
//! sweep, which follows at once. A sweep flag (`sweep`) asks for a heavy
//! sweep now.
//!
//! Where other SMs may run, the loop first waits until this SM is master
//! ([`standby::arbitrate`]); after every sweep it checks whether a higher
//! SM appeared and hands over to it ([`standby::check_peers`]). The first
//! heavy sweep as master sets ClientReregister on the end ports.
//!
//! Every heavy sweep is published to the SA. Multicast membership changes
//! (SA joins and leaves) are noticed between wait slices and reprogram
//! only the MFTs, after the group trees are checked with the unicast
//! routing for credit loops (`program_groups`).
//!
//! Shutdown is a flag the caller's signal handler sets; every wait here is
//! sliced so the loop notices it within a fraction of a second, and a sweep
//! in progress finishes first, so the fabric is never left half-programmed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{error, info, info_span, warn};

use crate::config::Config;
use crate::engines::Registry;
use crate::mcast::program::{program_mfts, HeldMfts};
use crate::mcast::McGroups;
use crate::standby::{self, Arbitration, PeerAction, SmInfoState, StandbyOptions};
use crate::sweep::{self, Guid2Lid, HeldTables, OnceOptions, OnceOutcome, SmpClient, SmpPort};
use crate::ucast_cache::UcastCache;

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct DaemonOptions<'a> {
    /// What each heavy sweep does.
    pub once: OnceOptions<'a>,
    /// Time between light sweeps.
    pub interval: Duration,
    /// How long to gather further traps after the first before sweeping.
    pub trap_settle: Duration,
    /// Where `guid2lid` is persisted after every heavy sweep.
    pub guid2lid_path: Option<PathBuf>,
    /// Reuse the last routing when only end ports (or switches nothing
    /// routes through) went or came back ([`crate::ucast_cache`]).
    pub ucast_cache: bool,
    /// SM election and standby ([`crate::standby`]): before it sweeps, the
    /// SM waits until it is master. `None`: the only SM, master at once.
    pub standby: Option<(Arc<SmInfoState>, StandbyOptions)>,
    /// Multicast groups (the SA changes them): their trees are programmed
    /// after every routed heavy sweep and whenever membership changes.
    /// `None`: no multicast programming.
    pub groups: Option<Arc<Mutex<McGroups>>>,
    /// The SA ([`crate::sa`]): every heavy sweep's fabric and routing are
    /// published to it, so path records carry the routing's SLs.
    pub sa: Option<Arc<crate::sa::server::SaHandle>>,
    /// What the control socket's `status` reports ([`crate::control`]).
    pub status: Option<Arc<Mutex<crate::control::Status>>>,
}

/// Why a heavy sweep ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The first sweep.
    Start,
    /// A trap arrived.
    Trap,
    /// The light sweep found a change.
    Change,
    /// The previous heavy sweep did not route (or did not finish).
    Retry,
    /// The engine directories were rescanned (SIGHUP): engines of a new
    /// build route from this sweep on.
    Reload,
    /// Multicast membership changed: only MFTs are reprogrammed.
    Groups,
    /// Asked for on the control socket.
    Requested,
    /// This SM became master (at start after an election, or taking over
    /// from a master that went silent or handed over).
    Takeover,
}

/// Counts over the life of the loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonSummary {
    /// Heavy sweeps run.
    pub heavy_sweeps: u64,
    /// Light sweeps run.
    pub light_sweeps: u64,
    /// Traps received.
    pub traps: u64,
    /// Multicast programmings (after a sweep or a membership change).
    pub mcast_updates: u64,
}

/// The signals the loop watches: set by the caller's handlers.
#[derive(Debug, Default)]
pub struct Signals {
    /// Finish the sweep in progress and return (SIGINT, SIGTERM).
    pub stop: AtomicBool,
    /// Rescan the engine directories before the next sweep (SIGHUP).
    pub reload: AtomicBool,
    /// A heavy sweep now (the control socket's `sweep`).
    pub sweep: AtomicBool,
}

/// Runs the SM on `port` until `signals.stop` is set. `on_heavy` sees every
/// heavy sweep's outcome (to print it, write the report) with its number
/// and cause. On `signals.reload` the engine directories are rescanned
/// ([`Registry::rescan`]) and a heavy sweep routes with what they hold now;
/// LIDs and programmed tables are kept, and a new build that does not load
/// leaves the old one in service.
#[allow(clippy::too_many_arguments)]
pub fn run(
    port: &mut dyn SmpPort,
    options: &DaemonOptions<'_>,
    registry: &mut Registry,
    config: &Config,
    guid2lid: &mut Guid2Lid,
    held: &mut HeldTables,
    signals: &Signals,
    on_heavy: &mut dyn FnMut(&OnceOutcome, u64, Cause),
) -> DaemonSummary {
    let stop = &signals.stop;
    let mut summary = DaemonSummary::default();
    let mut due = match become_master(port, options, stop) {
        Some(cause) => Some(cause),
        None => return summary,
    };
    // The last complete heavy sweep, and whether its routing is in the
    // switches.
    let mut last: Option<OnceOutcome> = None;
    let mut routed = false;
    let mut cache: Option<UcastCache> = None;
    let mut mfts = HeldMfts::new();
    let mut groups_programmed: Option<u64> = None;
    // The first sweep as master tells every client to register with the
    // SA again: this SA knows none of their joins and subscriptions.
    let mut reregister = true;
    let mut check_peers = false;
    while !stop.load(Ordering::Relaxed) {
        if signals.reload.swap(false, Ordering::Relaxed) {
            let span = info_span!("reload");
            let _enter = span.enter();
            *registry = registry.rescan();
            // A new build must route: what the old one computed is stale.
            cache = None;
            for p in &registry.problems {
                warn!("engine library skipped: {p}");
            }
            let engines: Vec<String> = registry
                .engines
                .iter()
                .map(|e| format!("{} {}", e.name, e.version))
                .collect();
            info!(engines = %engines.join(", "), "engine directories rescanned");
            due = Some(Cause::Reload);
        }
        if signals.sweep.swap(false, Ordering::Relaxed) && due.is_none() {
            due = Some(Cause::Requested);
        }
        if let Some(cause) = due.take() {
            summary.heavy_sweeps += 1;
            let n = summary.heavy_sweeps;
            let span = info_span!("heavy_sweep", n, cause = ?cause);
            let _enter = span.enter();
            let slot = if options.ucast_cache {
                Some(&mut cache)
            } else {
                None
            };
            let mut once = options.once.clone();
            once.sweep.client_reregister = reregister;
            match sweep::program::once_cached(port, &once, registry, config, guid2lid, held, slot) {
                Ok(mut outcome) => {
                    reregister = false;
                    routed = outcome.chain.routed.is_some();
                    if let Some(sa) = &options.sa {
                        // Shared, not tabulated: the SA asks the routing's
                        // own SL oracle, whatever the fabric's size.
                        sa.publish(crate::sa::db::SaDb::build_shared(&mut outcome));
                    }
                    match &outcome.chain.routed {
                        Some(r) => info!(
                            engine = %r.engine,
                            nodes = outcome.sweep.fabric.nodes.len(),
                            "heavy sweep done"
                        ),
                        None => warn!(
                            "no engine routed the fabric; switches keep the tables they hold; \
                             routing is retried at the next sweep"
                        ),
                    }
                    if let Some(p) = &options.guid2lid_path {
                        if let Err(e) = guid2lid.write(p) {
                            warn!("{e}");
                        }
                    }
                    on_heavy(&outcome, n, cause);
                    show_status(options, |s| {
                        s.set("role", "master");
                        s.set("heavy_sweeps", n.to_string());
                        s.set("last_cause", format!("{cause:?}"));
                        s.set("nodes", outcome.sweep.fabric.nodes.len().to_string());
                        s.set(
                            "routed_by",
                            outcome
                                .chain
                                .routed
                                .as_ref()
                                .map_or("nothing (tables kept)".to_string(), |r| r.engine.clone()),
                        );
                    });
                    // Switches that left may come back with other tables.
                    let fabric = &outcome.sweep.fabric;
                    mfts.retain(|g| fabric.find(g).is_some());
                    if routed {
                        groups_programmed =
                            program_groups(port, options, &outcome, &mut mfts, &mut summary);
                    }
                    last = Some(outcome);
                }
                Err(e) => {
                    warn!("heavy sweep failed: {e}");
                    last = None;
                    routed = false;
                }
            }
            check_peers = true;
        }
        // After every sweep, heavy or light: a higher SM that came up
        // without a trap is found within one sweep interval.
        if std::mem::take(&mut check_peers) {
            if let (Some((state, _)), Some(outcome)) = (&options.standby, &last) {
                let mut client = SmpClient::new(port, options.once.sweep.retries);
                match standby::check_peers(&mut client, &outcome.sweep.fabric, state) {
                    PeerAction::Stay => {}
                    PeerAction::SweepNow => due = Some(Cause::Takeover),
                    PeerAction::HandedOver { to } => {
                        info!(
                            to = format_args!("{to:#018x}"),
                            "handed the subnet over; standing by"
                        );
                        if let Some(sa) = &options.sa {
                            sa.stand_down();
                        }
                        cache = None;
                        last = None;
                        routed = false;
                        match become_master(port, options, stop) {
                            Some(cause) => due = Some(cause),
                            None => break,
                        }
                        reregister = true;
                    }
                }
            }
        }
        if due.is_some() {
            continue;
        }
        let generation = || {
            options
                .groups
                .as_ref()
                .map(|g| g.lock().map_or(0, |g| g.generation()))
        };
        due = wait(port, options, signals, &mut summary, &|| {
            routed && generation() != groups_programmed
        });
        if due == Some(Cause::Groups) {
            due = None;
            if let Some(outcome) = &last {
                let span = info_span!("multicast");
                let _enter = span.enter();
                groups_programmed = program_groups(port, options, outcome, &mut mfts, &mut summary);
            }
            continue;
        }
        if due.is_some()
            || stop.load(Ordering::Relaxed)
            || signals.reload.load(Ordering::Relaxed)
            || signals.sweep.load(Ordering::Relaxed)
        {
            continue;
        }
        summary.light_sweeps += 1;
        match &last {
            Some(outcome) if routed => {
                let span = info_span!("light_sweep", n = summary.light_sweeps);
                let _enter = span.enter();
                let mut client = SmpClient::new(port, options.once.sweep.retries);
                let light = sweep::light::light_sweep(&mut client, &outcome.sweep.fabric);
                if light.needs_heavy_sweep() {
                    info!(
                        changed = light.changed.len(),
                        lost = light.lost.len(),
                        "light sweep found a change"
                    );
                    due = Some(Cause::Change);
                } else {
                    check_peers = true;
                }
            }
            _ => due = Some(Cause::Retry),
        }
    }
    info!(
        heavy = summary.heavy_sweeps,
        light = summary.light_sweeps,
        traps = summary.traps,
        "SM stopped"
    );
    summary
}

/// Waits until this SM is master ([`standby::arbitrate`]) when other SMs
/// may exist; the cause of the first heavy sweep, `None` when stopped.
fn become_master(
    port: &mut dyn SmpPort,
    options: &DaemonOptions<'_>,
    stop: &AtomicBool,
) -> Option<Cause> {
    let Some((state, standby_options)) = &options.standby else {
        return Some(Cause::Start);
    };
    show_status(options, |s| {
        s.set("role", "electing (standby until master)")
    });
    let span = info_span!("arbitration");
    let _enter = span.enter();
    match standby::arbitrate(port, state, standby_options, stop) {
        Arbitration::Stopped => None,
        Arbitration::Master {
            took_over_from: None,
        } => Some(Cause::Start),
        // arbitrate() has logged from whom and how.
        Arbitration::Master {
            took_over_from: Some(_),
        } => Some(Cause::Takeover),
    }
}

/// Updates the control socket's status, if there is one.
fn show_status(options: &DaemonOptions<'_>, f: impl FnOnce(&mut crate::control::Status)) {
    if let Some(status) = &options.status {
        f(&mut status
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()));
    }
}

/// Computes every group's tree on the routed fabric of `outcome`, checks
/// unicast and multicast together for credit loops when the engine's
/// routing alone is free of them (a group may not break that promise), and
/// writes the MFT blocks that differ. Returns the membership generation
/// programmed, `None` when nothing was (the next change retries).
fn program_groups(
    port: &mut dyn SmpPort,
    options: &DaemonOptions<'_>,
    outcome: &OnceOutcome,
    mfts: &mut HeldMfts,
    summary: &mut DaemonSummary,
) -> Option<u64> {
    let groups = options.groups.as_ref()?;
    let routed = outcome.chain.routed.as_ref()?;
    let fabric = &outcome.sweep.fabric;
    // One switch graph serves the plan and the credit-loop check.
    let graph = smcore_kit::graph::Graph::new(&outcome.snapshot);
    let (plan, generation) = {
        let mut g = groups
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Members whose port left the fabric leave their groups.
        let present: std::collections::HashSet<u64> = fabric
            .nodes
            .iter()
            .flat_map(|n| n.ports.iter().filter(|p| p.peer.is_some()).map(|p| p.guid))
            .collect();
        let gone = g.retain_ports(|guid| present.contains(&guid));
        if gone > 0 {
            info!(gone, "multicast memberships of departed ports dropped");
        }
        let plan = crate::mcast::tree::plan_on(
            &outcome.snapshot,
            &graph,
            routed.routing.mcast_tree.as_ref().into_option(),
            &g,
        );
        (plan, g.generation())
    };
    for p in &plan.problems {
        warn!("{p}");
    }
    let promised =
        routed.verification.credit_loops_checked && routed.verification.credit_loop.is_none();
    if promised && !plan.trees.is_empty() {
        let opts = smcore_kit::VerifyOptions {
            max_examples: 2,
            ..Default::default()
        };
        let v = smcore_kit::verify_with_mcast(
            &outcome.snapshot,
            &graph,
            &routed.routing,
            &opts,
            &plan.routes(),
        );
        if let Some(cycle) = &v.credit_loop {
            error!(
                channels = cycle.cycle.len(),
                example = %v.examples.last().map(String::as_str).unwrap_or(""),
                "multicast trees would close a credit loop with the unicast routing; MFTs not changed"
            );
            return Some(generation);
        }
    }
    let mut client = SmpClient::new(port, options.once.sweep.retries);
    let report = program_mfts(&mut client, fabric, &plan, mfts);
    if let Some(sa) = &options.sa {
        sa.publish_mcast(&plan);
    }
    if let Some(dir) = options.once.dump_dir {
        let path = dir.join("opensm.mcfdbs");
        let tmp = dir.join("opensm.mcfdbs.tmp");
        let written = std::fs::File::create(&tmp)
            .and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                crate::dump::mcfdbs::write_plan(&mut w, fabric, &plan)?;
                std::io::Write::flush(&mut w)
            })
            .and_then(|_| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            warn!("{}: {e}", path.display());
        }
    }
    summary.mcast_updates += 1;
    info!(
        groups = plan.trees.len(),
        written = report.written,
        unchanged = report.unchanged,
        failed = report.failed,
        "multicast forwarding programmed"
    );
    (report.failed == 0).then_some(generation)
}

/// Waits one interval, or until a trap or `stop`. A trap is followed by a
/// short settling time whose traps it absorbs.
fn wait(
    port: &mut dyn SmpPort,
    options: &DaemonOptions<'_>,
    signals: &Signals,
    summary: &mut DaemonSummary,
    groups_changed: &dyn Fn() -> bool,
) -> Option<Cause> {
    // Short slices: the shutdown flag is checked between them.
    const SLICE: Duration = Duration::from_millis(100);
    let end = Instant::now() + options.interval;
    let mut settle_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if signals.stop.load(Ordering::Relaxed)
            || signals.reload.load(Ordering::Relaxed)
            || signals.sweep.load(Ordering::Relaxed)
        {
            return None;
        }
        let until = settle_until.unwrap_or(end);
        if now >= until {
            return settle_until.map(|_| Cause::Trap);
        }
        if settle_until.is_none() && groups_changed() {
            return Some(Cause::Groups);
        }
        match port.wait_trap((until - now).min(SLICE)) {
            Ok(Some(trap)) => {
                summary.traps += 1;
                info!(slid = trap.slid, "trap received");
                settle_until.get_or_insert(Instant::now() + options.trap_settle);
            }
            Ok(None) => {}
            Err(e) => {
                // A transport that cannot wait cannot sweep either; the
                // next heavy sweep will say why, then the loop retries.
                warn!("waiting for traps: {e}");
                std::thread::sleep(SLICE);
                return Some(Cause::Retry);
            }
        }
    }
}
