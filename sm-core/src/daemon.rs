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
//! A reload flag (SIGHUP) rescans the engine directories: a new build of
//! an engine routes from the next heavy sweep, which follows at once.
//!
//! Shutdown is a flag the caller's signal handler sets; every wait here is
//! sliced so the loop notices it within a fraction of a second, and a sweep
//! in progress finishes first, so the fabric is never left half-programmed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tracing::{info, info_span, warn};

use crate::config::Config;
use crate::engines::Registry;
use crate::sweep::{self, Fabric, Guid2Lid, HeldTables, OnceOptions, OnceOutcome, SmpClient, SmpPort};
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
}

/// The signals the loop watches: set by the caller's handlers.
#[derive(Debug, Default)]
pub struct Signals {
    /// Finish the sweep in progress and return (SIGINT, SIGTERM).
    pub stop: AtomicBool,
    /// Rescan the engine directories before the next sweep (SIGHUP).
    pub reload: AtomicBool,
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
    // The fabric as the last complete heavy sweep left it, and whether
    // that sweep's routing is in the switches.
    let mut known: Option<Fabric> = None;
    let mut routed = false;
    let mut due = Some(Cause::Start);
    let mut cache: Option<UcastCache> = None;
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
            let engines: Vec<String> = registry.engines.iter().map(|e| format!("{} {}", e.name, e.version)).collect();
            info!(engines = %engines.join(", "), "engine directories rescanned");
            due = Some(Cause::Reload);
        }
        if let Some(cause) = due.take() {
            summary.heavy_sweeps += 1;
            let n = summary.heavy_sweeps;
            let span = info_span!("heavy_sweep", n, cause = ?cause);
            let _enter = span.enter();
            let slot = if options.ucast_cache { Some(&mut cache) } else { None };
            match sweep::program::once_cached(port, &options.once, registry, config, guid2lid, held, slot) {
                Ok(outcome) => {
                    routed = outcome.chain.routed.is_some();
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
                    known = Some(outcome.sweep.fabric);
                }
                Err(e) => {
                    warn!("heavy sweep failed: {e}");
                    known = None;
                    routed = false;
                }
            }
        }
        due = wait(port, options, signals, &mut summary);
        if due.is_some() || stop.load(Ordering::Relaxed) || signals.reload.load(Ordering::Relaxed) {
            continue;
        }
        summary.light_sweeps += 1;
        match &known {
            Some(fabric) if routed => {
                let span = info_span!("light_sweep", n = summary.light_sweeps);
                let _enter = span.enter();
                let mut client = SmpClient::new(port, options.once.sweep.retries);
                let light = sweep::light::light_sweep(&mut client, fabric);
                if light.needs_heavy_sweep() {
                    info!(changed = light.changed.len(), lost = light.lost.len(), "light sweep found a change");
                    due = Some(Cause::Change);
                }
            }
            _ => due = Some(Cause::Retry),
        }
    }
    info!(heavy = summary.heavy_sweeps, light = summary.light_sweeps, traps = summary.traps, "SM stopped");
    summary
}

/// Waits one interval, or until a trap or `stop`. A trap is followed by a
/// short settling time whose traps it absorbs.
fn wait(port: &mut dyn SmpPort, options: &DaemonOptions<'_>, signals: &Signals, summary: &mut DaemonSummary) -> Option<Cause> {
    // Short slices: the shutdown flag is checked between them.
    const SLICE: Duration = Duration::from_millis(100);
    let end = Instant::now() + options.interval;
    let mut settle_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if signals.stop.load(Ordering::Relaxed) || signals.reload.load(Ordering::Relaxed) {
            return None;
        }
        let until = settle_until.unwrap_or(end);
        if now >= until {
            return settle_until.map(|_| Cause::Trap);
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
