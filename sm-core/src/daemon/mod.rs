//! # The SM loop: heavy sweeps, light sweeps, traps, shutdown
//!
//! What `smcore` does when it is not told `--once`:
//!
//! 1. A heavy sweep ([`crate::pipeline::once`]): discovery, LIDs, the engine chain
//!    and its verify gate, dumps, programming of what differs.
//! 2. Then it waits, one sweep interval at a time. A trap (a switch
//!    reporting a port state change) ends the wait at once and causes a
//!    heavy sweep; the traps already queued with it (a switch going away
//!    makes all its neighbours trap) are read first and folded into that
//!    sweep, and those that arrive while it runs into one follow-up sweep.
//!    Only a trap from a port that flaps waits a short settling time to
//!    gather its next traps ([`traps`]: flap damping).
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
//! sweep now; a reroute flag (`reroute`) too, and drops the unicast cache
//! first so that the engines route afresh. After every heavy sweep its
//! outcome is published to the console ([`crate::control::publish`]).
//!
//! Where other SMs may run, the loop first waits until this SM is master
//! ([`standby::arbitrate`]); after every sweep it checks whether a higher
//! SM appeared and hands over to it ([`standby::check_peers`]). The first
//! heavy sweep as master sets ClientReregister on the end ports.
//!
//! Every heavy sweep is published to the SA. Multicast membership changes
//! (SA joins and leaves) are noticed between wait slices and reprogram
//! only the MFTs, after the group trees are checked with the unicast
//! routing for credit loops (`program_groups`). A programming that fails
//! (a switch that does not answer, or refuses the blocks) is retried with
//! a back-off that doubles up to [`MCAST_RETRY_MAX`]; traps and light
//! sweeps go on meanwhile.
//!
//! Traps come from anyone on the fabric: [`traps::TrapFilter`] decides
//! which may cause a heavy sweep (well-formed, from a port of the fabric,
//! not flapping, within a sweep budget).
//!
//! The loop's state lives in one struct, `Daemon`: what it borrows from its
//! caller ([`DaemonContext`]) and its own state by concern (the schedule of
//! sweeps, the routing in force, multicast, traps, the configuration as
//! re-read); each step of the loop is one of its methods. Of a heavy
//! sweep it keeps the fabric as programmed and the [`AcceptedRouting`]
//! in force; the rest of the outcome goes to the caller's `on_heavy`.
//!
//! Shutdown is a flag the caller's signal handler sets; every wait here is
//! sliced so the loop notices it within a fraction of a second, and a sweep
//! in progress finishes first, so the fabric is never left half-programmed.

pub mod aliases;
pub mod reload;
pub mod traps;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, error, info, info_span, warn};

use crate::config::Config;
use crate::engines::Registry;
use crate::mcast::program::{program_mfts, HeldMfts};
use crate::mcast::McGroups;
use crate::standby::{self, Arbitration, PeerAction, SmInfoState, StandbyOptions};
use crate::routing::AcceptedRouting;
use crate::sweep::incremental::Changes;
use sm_model::{Fabric, FabricPort};
use crate::sweep::{self, Guid2Lid, HeldTables};
use crate::pipeline::{OnceOptions, OnceOutcome};
use sm_transport::{SmpClient, SmpPort, TransportError};
use crate::ucast_cache::UcastCache;
use traps::{TrapFilter, TrapLimits, TrapVerdict};

/// The first wait before a failed multicast programming is tried again.
pub const MCAST_RETRY_MIN: Duration = Duration::from_millis(500);
/// The longest wait between multicast programming attempts.
pub const MCAST_RETRY_MAX: Duration = Duration::from_secs(30);

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct DaemonOptions<'a> {
    /// What each heavy sweep does.
    pub once: OnceOptions<'a>,
    /// Time between light sweeps.
    pub interval: Duration,
    /// How long the sweep of a flapping issuer's trap waits to gather its
    /// next traps (the first trap of a quiet issuer sweeps at once).
    pub trap_settle: Duration,
    /// Bounds on what traps may cost ([`traps`]).
    pub trap_limits: TrapLimits,
    /// Where `guid2lid` is persisted after every heavy sweep.
    pub guid2lid_path: Option<PathBuf>,
    /// Reuse the last routing when only end ports (or switches nothing
    /// routes through) went or came back ([`crate::ucast_cache`]).
    pub ucast_cache: bool,
    /// Incremental heavy sweeps ([`sweep::incremental`]): when traps or a
    /// light sweep name the switches that changed, only what lies behind
    /// them is read again; `Some(n)`: every n-th heavy sweep is full all
    /// the same (0: only when an incremental one cannot account for a
    /// change). `None`: every heavy sweep reads the whole fabric.
    pub incremental: Option<u32>,
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
    /// The configuration file, re-read on SIGHUP ([`reload`]); `None`:
    /// SIGHUP rescans the engine directories only.
    pub config_file: Option<reload::ConfigSource>,
    /// Every sweep interval sweeps heavily, whatever the light sweep would
    /// find (OpenSM `force_heavy_sweep`).
    pub force_heavy_sweep: bool,
    /// Traps that report a change cause a heavy sweep (OpenSM
    /// `sweep_on_trap`, default true); false: they are logged and the
    /// next light sweep finds the change.
    pub sweep_on_trap: bool,
    /// Coming out of standby, read `guid2lid_path` again and keep its LIDs
    /// (OpenSM `honor_guid2lid_file`); false: forget the LIDs known before,
    /// the ports' own LIDs stand.
    pub honor_guid2lid_file: bool,
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
    /// Asked for on the control socket, routing afresh (`reroute`).
    Reroute,
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
    /// Traps that caused (or joined) a heavy sweep.
    pub traps_accepted: u64,
    /// Traps dropped: malformed, forged, unknown issuer, or flapping.
    pub traps_dropped: u64,
    /// Multicast programmings (after a sweep or a membership change).
    pub mcast_updates: u64,
    /// Multicast programmings that left blocks unwritten.
    pub mcast_failures: u64,
    /// Why the loop ended other than by `stop`: the transport is gone.
    /// The process should exit non-zero so that its supervisor restarts it.
    pub fatal: Option<String>,
}

/// The signals the loop watches (the control socket's and the signal
/// handlers' requests; defined beside the control socket).
pub use crate::control::Signals;

/// What a wait ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Woken {
    /// The interval passed quietly: a light sweep is due.
    Interval,
    /// A signal flag is set; the loop looks at it.
    Signal,
    /// A heavy sweep for this cause.
    Sweep(Cause),
    /// Multicast membership changed, or a failed programming is due again.
    Groups,
    /// Hosts changed alias GUIDs, or a failed programming is due again.
    Aliases,
    /// The transport is gone.
    Fatal(String),
}

/// Failed multicast programmings in a row and when to try again.
#[derive(Debug, Clone, Copy, Default)]
struct Backoff {
    failures: u32,
    retry_at: Option<Instant>,
}

impl Backoff {
    fn failed(&mut self, now: Instant) -> Duration {
        let wait = MCAST_RETRY_MIN
            .saturating_mul(1u32 << self.failures.min(16))
            .min(MCAST_RETRY_MAX);
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(now + wait);
        wait
    }

    fn succeeded(&mut self) {
        *self = Backoff::default();
    }

    fn due(&self, now: Instant) -> bool {
        self.retry_at.is_none_or(|t| now >= t)
    }
}

/// What the loop borrows from its caller for as long as it runs.
pub struct DaemonContext<'r, 'o> {
    /// The SM's port.
    pub port: &'r mut dyn SmpPort,
    /// The loop's settings.
    pub options: &'r DaemonOptions<'o>,
    /// The engines; rescanned on `signals.reload`.
    pub registry: &'r mut Registry,
    /// The configuration the SM started with (a SIGHUP re-read replaces
    /// it inside the loop).
    pub config: &'r Config,
    /// LIDs by GUID: read, updated and persisted after every heavy sweep.
    pub guid2lid: &'r mut Guid2Lid,
    /// The tables written, carried from one sweep to the next.
    pub held: &'r mut HeldTables,
    /// The caller's signal flags.
    pub signals: &'r Signals,
}

/// When the next sweeps run.
struct Schedule {
    /// The heavy sweep to run next.
    due: Option<Cause>,
    /// Between light sweeps (the file's `sweep_interval` after a re-read).
    interval: Duration,
    /// Whether to look for a higher SM before waiting.
    check_peers: bool,
    /// The first sweep as master tells every client to register with the
    /// SA again: this SA knows none of their joins and subscriptions.
    reregister: bool,
}

/// The routing in the switches and what the loop keeps of the sweep that
/// programmed it.
#[derive(Default)]
struct RoutingState {
    /// The fabric of the last complete heavy sweep, as programmed (what
    /// light sweeps read, peers are looked for in, ports are isolated in).
    fabric: Option<Fabric>,
    /// The routing in the switches (`None`: the last sweep did not route).
    accepted: Option<Arc<AcceptedRouting>>,
    /// The unicast cache, when it is on.
    cache: Option<UcastCache>,
    /// The fabric the arbitration that made this SM master has just read:
    /// the next heavy sweep starts from it instead of reading it again,
    /// if nothing was written to the fabric in between and it is younger
    /// than the sweep interval (see `standby::Arbitration::Master`).
    arbitrated: Option<sweep::Discovered>,
    /// What traps and light sweeps said changed since the last heavy sweep.
    changes: Changes,
    /// Incremental heavy sweeps since the last full one.
    since_full: u32,
}

impl RoutingState {
    /// Forgets the routing: the next heavy sweep routes afresh.
    fn forget(&mut self) {
        *self = RoutingState::default();
    }
}

/// Multicast forwarding: what the switches hold, and when to try again.
struct McastState {
    mfts: HeldMfts,
    /// Membership generation in the switches (`None`: not programmed).
    programmed: Option<u64>,
    backoff: Backoff,
}

/// The trap intake.
struct TrapState {
    filter: TrapFilter,
    /// Port error traps counted for `babbling_port_policy`.
    port_errors: traps::PortErrors,
    /// A trap-caused sweep deferred by the trap budget or settling.
    pending: bool,
    /// A sweep whose re-read found a flapping port waits until then, to
    /// gather the port's next changes; the sweep after it goes on
    /// whatever it finds.
    settle_until: Option<Instant>,
}

/// The configuration as re-read on SIGHUP.
struct Settings {
    /// The configuration re-read, once there was a good one (until then
    /// the caller's).
    reloaded: Option<Config>,
    /// The file as last applied.
    source: Option<reload::ConfigSource>,
    /// The engine list a re-read set.
    engines: Option<String>,
    /// The QoS policy PathRecords follow (read at every heavy sweep, as
    /// OpenSM does; the last good one stays when the file has errors).
    qos_policy: Option<Arc<crate::qos::QosPolicy>>,
}

/// The SM loop: what it borrows from its caller, and its state by concern.
struct Daemon<'r, 'o> {
    ctx: DaemonContext<'r, 'o>,
    summary: DaemonSummary,
    schedule: Schedule,
    routing: RoutingState,
    mcast: McastState,
    /// Alias GUIDs on the ports, and when a failed pass is tried again.
    aliases: (aliases::HeldAliases, Option<Instant>),
    traps: TrapState,
    settings: Settings,
    /// The fabric compared with `expect_topology` after each heavy sweep.
    cabling: crate::cabling::CablingWatch,
}

/// Runs the SM on `ctx.port` until `ctx.signals.stop` is set. `on_heavy`
/// sees every heavy sweep's outcome (to print it, write the report) with
/// its number and cause. On `signals.reload` the engine directories are
/// rescanned ([`Registry::rescan`]) and a heavy sweep routes with what
/// they hold now; LIDs and programmed tables are kept, and a new build that
/// does not load leaves the old one in service. A transport that is gone
/// for good ends the loop with [`DaemonSummary::fatal`] set.
pub fn run(ctx: DaemonContext<'_, '_>, on_heavy: &mut dyn FnMut(&OnceOutcome, u64, Cause)) -> DaemonSummary {
    let DaemonContext { port, options, registry, config, guid2lid, held, signals } = ctx;
    // ActCount moves with each SMP and wait slice of this loop, so that a
    // standby sees it stop when the loop hangs (standby::ActivityPort).
    let mut beating;
    let port: &mut dyn SmpPort = match &options.standby {
        Some((state, _)) => {
            beating = standby::ActivityPort::new(port, state);
            &mut beating
        }
        None => port,
    };
    let mut d = Daemon {
        ctx: DaemonContext { port, options, registry, config, guid2lid, held, signals },
        summary: DaemonSummary::default(),
        schedule: Schedule { due: None, interval: options.interval, check_peers: false, reregister: true },
        routing: RoutingState::default(),
        mcast: McastState { mfts: HeldMfts::new(), programmed: None, backoff: Backoff::default() },
        aliases: Default::default(),
        traps: TrapState {
            filter: TrapFilter::new(options.trap_limits),
            port_errors: Default::default(),
            pending: false,
            settle_until: None,
        },
        settings: Settings { reloaded: None, source: options.config_file.clone(), engines: None, qos_policy: None },
        cabling: crate::cabling::CablingWatch::default(),
    };
    d.publish_config();
    d.show_status(|s| s.set("sweep_interval", format!("{:?}", d.schedule.interval)));
    d.schedule.due = d.become_master();
    if d.schedule.due.is_some() {
        d.run(on_heavy);
    }
    let s = &mut d.summary;
    s.traps_accepted = d.traps.filter.counts.accepted;
    s.traps_dropped = d.traps.filter.counts.dropped + d.traps.filter.counts.suppressed;
    info!(heavy = s.heavy_sweeps, light = s.light_sweeps, traps = s.traps, "SM stopped");
    d.summary
}

impl Daemon<'_, '_> {
    fn stopping(&self) -> bool {
        self.ctx.signals.stop.load(Ordering::Relaxed)
    }

    fn run(&mut self, on_heavy: &mut dyn FnMut(&OnceOutcome, u64, Cause)) {
        while !self.stopping() && self.summary.fatal.is_none() {
            if self.ctx.signals.reload.swap(false, Ordering::Relaxed) {
                self.reload();
            }
            if self.ctx.signals.sweep.swap(false, Ordering::Relaxed) && self.schedule.due.is_none() {
                self.schedule.due = Some(Cause::Requested);
            }
            if self.ctx.signals.reroute.swap(false, Ordering::Relaxed) {
                // What the cache holds would be reused: the point is not to.
                self.routing.cache = None;
                self.schedule.due = Some(self.schedule.due.unwrap_or(Cause::Reroute));
            }
            let isolate = std::mem::take(&mut *self.ctx.signals.isolate.lock().unwrap_or_else(|p| p.into_inner()));
            if !isolate.is_empty() {
                self.isolate(&isolate);
            }
            if let Some(cause) = self.schedule.due.take() {
                self.heavy_sweep(cause, on_heavy);
                self.schedule.check_peers = true;
            }
            // After every sweep, heavy or light: a higher SM that came up
            // without a trap is found within one sweep interval.
            if std::mem::take(&mut self.schedule.check_peers) && !self.peers() {
                return;
            }
            if self.schedule.due.is_some() {
                continue;
            }
            match self.wait() {
                Woken::Sweep(cause) => self.schedule.due = Some(cause),
                Woken::Groups => {
                    if self.routing.fabric.is_some() {
                        let span = info_span!("multicast");
                        let _enter = span.enter();
                        self.program_groups();
                    }
                }
                Woken::Aliases => self.program_aliases(),
                Woken::Signal => {}
                Woken::Fatal(why) => self.fatal(why),
                Woken::Interval if self.ctx.options.force_heavy_sweep => {
                    // As OpenSM with force_heavy_sweep: no light sweep decides.
                    self.schedule.due = Some(Cause::Change);
                }
                Woken::Interval => self.light_sweep(),
            }
        }
    }

    fn fatal(&mut self, why: String) {
        error!("the SM's port is gone ({why}); stopping so that the service manager restarts the SM");
        self.summary.fatal = Some(why);
    }

    /// Rescans the engine directories; a heavy sweep follows.
    fn reload(&mut self) {
        let span = info_span!("reload");
        let _enter = span.enter();
        *self.ctx.registry = self.ctx.registry.rescan();
        // A new build must route: what the old one computed is stale.
        self.routing.cache = None;
        for p in &self.ctx.registry.problems {
            warn!("engine library skipped: {p}");
        }
        let engines: Vec<String> = self.ctx.registry.engines.iter().map(|e| format!("{} {}", e.name, e.version)).collect();
        info!(engines = %engines.join(", "), "engine directories rescanned");
        self.reread_config();
        self.schedule.due = Some(Cause::Reload);
    }

    /// Applies the isolation policy's requests on the fabric last
    /// discovered ([`crate::perfmgr::isolation::apply`]: never a link the
    /// SM needs to reach any node), then sweeps so the routing follows.
    fn isolate(&mut self, requests: &[crate::perfmgr::isolation::Request]) {
        let span = info_span!("isolate");
        let _enter = span.enter();
        // Ports are about to change: a fabric read before is no longer it.
        self.routing.arbitrated = None;
        let Some(fabric) = self.routing.fabric.as_ref() else { return };
        let mut client = SmpClient::new(&mut *self.ctx.port, self.ctx.options.once.sweep.retries).with_m_keys(self.ctx.options.once.sweep.m_keys.clone());
        if crate::perfmgr::isolation::apply(fabric, requests, &mut client) {
            // The sweep reads the switches whose ports were Set (and,
            // through a port found down, the far end), as a trap from
            // them would have it do.
            self.routing.changes.switches.extend(requests.iter().map(|r| r.switch_guid));
            self.schedule.due = Some(Cause::Change);
        }
    }

    /// OpenSM's `babbling_port_policy`: the port at `lid`/`port` sent its
    /// port error trap [`traps::BABBLING_TRAPS`] times in a row; the end
    /// of its link nearer the SM is disabled, through the isolation
    /// requests (so never a link the SM needs to reach part of the
    /// fabric; the wait ends and the loop applies it, then sweeps).
    fn babbling(&mut self, lid: u16, port: u8) {
        let Some(fabric) = self.routing.fabric.as_ref() else { return };
        let owner = fabric.nodes.iter().position(|n| {
            let at = if n.is_switch() { 0 } else { usize::from(port) };
            n.ports.get(at).and_then(|p| p.info.as_ref()).is_some_and(|i| i.lid == lid)
        });
        let Some(node) = owner else { return };
        let Some((peer, peer_port)) = fabric.nodes[node].ports.get(usize::from(port)).and_then(|p| p.peer) else {
            return;
        };
        let hops = |n: usize| fabric.nodes[n].path.len();
        let (switch, switch_port) = if fabric.nodes[node].is_switch()
            && !(fabric.nodes[peer].is_switch() && hops(peer) < hops(node))
        {
            (node, port)
        } else {
            (peer, peer_port)
        };
        if !fabric.nodes[switch].is_switch() {
            return;
        }
        let guid = fabric.nodes[switch].guid;
        warn!(lid, port, switch = format_args!("{guid:#018x}"), switch_port, "babbling port: disabling its link");
        self.ctx.signals.isolate.lock().unwrap_or_else(|p| p.into_inner()).push(crate::perfmgr::isolation::Request {
            switch_guid: guid,
            port: switch_port,
            action: crate::perfmgr::isolation::Action::Disable,
        });
    }

    /// Re-reads the configuration file, applying what may change at
    /// runtime and saying in the log what changed; a file that does not
    /// parse keeps the configuration in force.
    fn reread_config(&mut self) {
        let Some(source) = &self.settings.source else { return };
        let text = match std::fs::read_to_string(&source.path) {
            Ok(t) => t,
            Err(e) => {
                warn!(file = %source.path.display(), "configuration not re-read ({e}); the one in force stays");
                return;
            }
        };
        let r = match reload::reread(&source.path, &source.text, &text, &source.command_line) {
            Ok(r) => r,
            Err(e) => {
                warn!("configuration not applied: {e}; the one in force stays");
                return;
            }
        };
        let mut applied = r.applied.clone();
        // The command line is laid over r.config: its flags are there.
        if let Some(s) = r.config.sweep_interval.filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0) {
            self.schedule.interval = Duration::from_secs_f64(s);
        }
        let list = r.config.routing_engine.clone().unwrap_or_else(|| crate::settings::DEFAULT_ENGINES.into());
        match crate::engines::chain::ChainSpec::parse(&list, self.ctx.registry) {
            Ok(_) => self.settings.engines = Some(list),
            Err(e) => {
                warn!("routing_engine `{list}` not applied: {e}; the engines in force stay");
                applied.retain(|k| k != "routing_engine");
            }
        }
        if !r.overridden.is_empty() {
            warn!("changed in the configuration but given on the command line, which wins: {}", r.overridden.join(", "));
        }
        if applied.is_empty() && r.kept.is_empty() {
            info!(file = %source.path.display(), "configuration re-read: nothing changed");
        } else {
            info!(
                file = %source.path.display(),
                applied = %applied.join(", "),
                needs_restart = %r.kept.join(", "),
                "configuration re-read"
            );
        }
        if !r.kept.is_empty() {
            warn!("changed in the configuration, kept until a restart: {}", r.kept.join(", "));
        }
        // The routing must be computed with what changed.
        self.routing.cache = None;
        self.settings.source = Some(reload::ConfigSource { text: r.text, ..source.clone() });
        self.settings.reloaded = Some(r.config);
        let interval = self.schedule.interval;
        self.show_status(|s| {
            s.set("sweep_interval", format!("{interval:?}"));
            s.set("config_applied", if applied.is_empty() { "-".to_string() } else { applied.join(",") });
        });
        self.publish_config();
    }

    /// Tells the console's `dump_conf` the configuration in force.
    fn publish_config(&self) {
        let Some(status) = &self.ctx.options.status else { return };
        let config = self.settings.reloaded.as_ref().unwrap_or(self.ctx.config);
        let engines = self.settings.engines.as_deref().unwrap_or(self.ctx.options.once.engines);
        let shown = config_in_force(config, self.ctx.options, self.schedule.interval, engines);
        crate::control::publish_config(status, &shown);
    }

    fn heavy_sweep(&mut self, cause: Cause, on_heavy: &mut dyn FnMut(&OnceOutcome, u64, Cause)) {
        self.summary.heavy_sweeps += 1;
        // Whatever caused it, this sweep sees what a pending trap asked for.
        self.traps.pending = false;
        let n = self.summary.heavy_sweeps;
        let span = info_span!("heavy_sweep", n, cause = ?cause);
        let _enter = span.enter();
        let read = self.routing.arbitrated.take().filter(|d| d.is_fresh(self.schedule.interval));
        if let Some(d) = &read {
            info!(nodes = d.fabric().nodes.len(), age = ?d.age(), "sweeping the fabric the arbitration read");
        }
        let changes = std::mem::take(&mut self.routing.changes);
        let kept_changes = changes.clone();
        let (read, incremental_read) = match read {
            Some(d) => (Some(d), false),
            None => {
                let read = self.rediscover(cause, changes);
                let incremental = read.is_some();
                (read, incremental)
            }
        };
        // The ports the re-read found changed: a flapping one makes the
        // sweep wait the settling time (once) and read again.
        if let (Some(d), Some(old)) = (read.as_ref().filter(|_| incremental_read), &self.routing.fabric) {
            let changed = changed_ports(old, d.fabric());
            let now = Instant::now();
            let settled = self.traps.settle_until.take().is_some();
            // A lost link is routed around at once, whatever its past (as
            // BGP's damping never holds a withdrawal back); a flapping
            // port's return can wait.
            let lost = changed.iter().any(|c| c.2);
            let ports: Vec<(u64, u8)> = changed.iter().map(|&(g, p, _)| (g, p)).collect();
            if !settled && !lost && cause == Cause::Trap && self.traps.filter.port_flapping(&ports, now) {
                info!(
                    ports = ports.len(),
                    settle = ?self.ctx.options.trap_settle,
                    "a port that changed flaps: the sweep waits the settling time and reads again"
                );
                self.routing.changes = kept_changes;
                self.traps.settle_until = Some(now + self.ctx.options.trap_settle);
                self.traps.pending = true;
                self.summary.heavy_sweeps -= 1;
                return;
            }
            self.traps.filter.ports_changed(&ports, now);
        }
        if !incremental_read {
            // A full read (a fresh discovery, or the arbitration's).
            self.routing.since_full = 0;
        }
        let slot = if self.ctx.options.ucast_cache { Some(&mut self.routing.cache) } else { None };
        let mut once = self.ctx.options.once.clone();
        // Dumps are written once the SA and the multicast tables have the
        // new routing (see below), not inside the sweep.
        let dump_dir = self.ctx.options.once.dump_dir;
        once.dump_dir = None;
        once.sweep.client_reregister = self.schedule.reregister && !once.sweep.no_clients_rereg;
        if self.schedule.reregister {
            // A new master that restores the SA's registrations from
            // sa_db_file asks only the hosts it has nothing for to
            // register again; if the file cannot be read, every host, even
            // with no_clients_rereg (as OpenSM).
            match self.ctx.options.sa.as_ref().and_then(|sa| sa.pending_restore_ports()) {
                Some(Ok(known)) => {
                    info!(ports = known.len(), "SA state restored from sa_db_file: those ports are not asked to re-register");
                    once.sweep.reregister_known = Arc::new(known);
                }
                Some(Err(e)) => {
                    warn!("{e}: every host is asked to register again");
                    once.sweep.client_reregister = true;
                }
                None => {}
            }
        }
        once.sweep.stop = Some(Arc::clone(&self.ctx.signals.stop));
        if let Some(engines) = &self.settings.engines {
            once.engines = engines;
        }
        let config = self.settings.reloaded.as_ref().unwrap_or(self.ctx.config);
        // As OpenSM: the QoS policy file is read again at every heavy sweep.
        self.settings.qos_policy = config.reload_qos_policy(self.settings.qos_policy.take());
        // A re-route continues from the routing in force; `ctl reroute` and
        // --reassign-lids route from scratch (OpenSM's ignore_existing_lfts).
        let previous = (cause != Cause::Reroute && !once.sweep.reassign_lids)
            .then(|| self.routing.accepted.as_ref().map(|a| a.previous()))
            .flatten();
        let state = crate::pipeline::SweepState {
            guid2lid: &mut *self.ctx.guid2lid,
            held: &mut *self.ctx.held,
            cache: slot,
            previous: previous.as_ref(),
        };
        let result = crate::pipeline::once_from(&mut *self.ctx.port, read, &once, self.ctx.registry, config, state);
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(crate::pipeline::OnceError::Stopped) => {
                info!("heavy sweep stopped before programming");
                return;
            }
            Err(e) => {
                if let Some(why) = transport_gone(&e) {
                    self.fatal(why);
                    return;
                }
                warn!("heavy sweep failed: {e}");
                self.routing.fabric = None;
                self.routing.accepted = None;
                return;
            }
        };
        self.schedule.reregister = false;
        // What hosts and switches wait for first: the SA's answers and the
        // multicast tables on the new routing; then the files.
        self.publish_sa(&outcome);
        self.keep(&outcome);
        let mut outcome = outcome;
        if let Some(dir) = dump_dir {
            let config = self.settings.reloaded.as_ref().unwrap_or(self.ctx.config);
            crate::pipeline::write_dumps(dir, &mut outcome, config);
        }
        self.publish(&outcome, n, cause, on_heavy);
        self.check_cabling(&outcome.sweep.fabric);
        self.refresh_relabelled(&outcome.sweep.relabelled);
    }

    /// The switches a heavy sweep gave new LIDs report them on their other
    /// ports too, which the fabric as programmed does not show: their ports
    /// are read again now, while nothing waits, rather than at the next
    /// incremental sweep, which a fault starts (on a 12-ary 3-tree after
    /// the first sweep, 11,336 SMPs and 90 ms before the first fault's
    /// re-route). When the re-read finds anything else changed (a link,
    /// a node), or cannot read, the switches are left to the next heavy
    /// sweep, as before.
    fn refresh_relabelled(&mut self, switches: &[u64]) {
        if switches.is_empty() {
            return;
        }
        let fabric = match (&self.ctx.options.incremental, &self.routing.fabric, &self.routing.accepted) {
            (Some(_), Some(fabric), Some(_)) => fabric,
            _ => {
                self.routing.changes.add_relabelled(switches);
                return;
            }
        };
        let mut changes = Changes::default();
        changes.add_relabelled(switches);
        let t = Instant::now();
        let (read, smps) = read_behind(&mut self.ctx, fabric, &changes);
        match read {
            Ok((read, _, r)) if r.links_down == 0 && r.added == 0 && r.dropped == 0 && r.probes == 0 => {
                info!(switches = switches.len(), smps = smps.sent, took = ?t.elapsed(), "relabelled switches read again");
                self.routing.fabric = Some(read);
            }
            Ok((_, _, r)) => {
                info!(links_down = r.links_down, added = r.added, dropped = r.dropped, "relabelled switches read again found changes: left to the next heavy sweep");
                self.routing.changes.add_relabelled(switches);
            }
            Err(why) => {
                info!("relabelled switches not read again ({why}): left to the next heavy sweep");
                self.routing.changes.add_relabelled(switches);
            }
        }
    }

    /// Compares the fabric with `expect_topology`, when set: differences
    /// go to the log once each, their count by kind to the console's
    /// status and the metrics.
    fn check_cabling(&mut self, fabric: &Fabric) {
        let config = self.settings.reloaded.as_ref().unwrap_or(self.ctx.config);
        let file = config.expect_topology.clone();
        match self.cabling.after_sweep(file.as_deref(), fabric) {
            Some(report) => self.show_status(|s| {
                let n = report.differences();
                s.set("cabling", match n { 0 => "as expected".to_string(), 1 => "1 difference".to_string(), n => format!("{n} differences") });
                s.cabling = Some(report.counts().into_iter().map(|(k, v)| (k.to_string(), v)).collect());
            }),
            None if file.is_none() => self.show_status(|s| s.cabling = None),
            // Not compared this sweep: the last comparison stands.
            None => {}
        }
    }

    /// The trap intake and the SA learn of a heavy sweep.
    fn publish_sa(&mut self, outcome: &OnceOutcome) {
        self.traps.filter.set_fabric(fabric_lids(outcome));
        // `explain` shows the node name map's names (read again, as the
        // dumps do; checked at startup).
        let names = Arc::new(self.settings.reloaded.as_ref().unwrap_or(self.ctx.config).node_names().unwrap_or_default());
        let paths = if let Some(sa) = &self.ctx.options.sa {
            // The SA holds the accepted routing itself and asks its own
            // SL oracle, whatever the fabric's size. The records of nodes
            // this sweep left alone are the database's in force.
            let previous = sa.sa().db();
            let db = crate::sa::db::SaDb::build_after(outcome, previous.as_deref());
            sa.publish(db.with_qos_policy(self.settings.qos_policy.clone()));
            let defaults = sa.sa().config().path;
            sa.sa().db().map(|db| crate::explain::PathView { db, defaults, names })
        } else if self.ctx.options.status.is_some() {
            // No SA: the console's `explain` gets a database of its own.
            let db = crate::sa::db::SaDb::build_shared(outcome).with_qos_policy(self.settings.qos_policy.clone());
            Some(crate::explain::PathView { db: Arc::new(db), defaults: Default::default(), names })
        } else {
            None
        };
        self.show_status(|s| s.paths = paths);
    }

    /// The publish stage: the log, `guid2lid`, the caller, the console
    /// learn of a heavy sweep (after [`Self::publish_sa`] and the dumps).
    fn publish(&mut self, outcome: &OnceOutcome, n: u64, cause: Cause, on_heavy: &mut dyn FnMut(&OnceOutcome, u64, Cause)) {
        match &outcome.accepted {
            Some(r) => info!(engine = %r.engine, nodes = outcome.sweep.fabric.nodes.len(), "heavy sweep done"),
            None => warn!(
                "no engine routed the fabric; switches keep the tables they hold; \
                 routing is retried at the next sweep"
            ),
        }
        if let Some(p) = &self.ctx.options.guid2lid_path {
            if let Err(e) = self.ctx.guid2lid.write(p) {
                warn!("{e}");
            }
        }
        // The console first, the caller (the report file) after: whoever
        // sees the report of sweep n finds the console at sweep n too.
        if let Some(status) = &self.ctx.options.status {
            crate::control::publish(status, outcome);
        }
        self.show_status(|s| {
            s.set("role", "master");
            s.set("heavy_sweeps", n.to_string());
            s.set("last_cause", format!("{cause:?}"));
            s.set("nodes", outcome.sweep.fabric.nodes.len().to_string());
            s.set(
                "routed_by",
                outcome.accepted.as_ref().map_or("nothing (tables kept)".to_string(), |r| r.engine.clone()),
            );
        });
        on_heavy(outcome, n, cause);
    }

    /// Keeps what the loop needs of a heavy sweep from here on (the fabric
    /// as programmed and the routing in force), and programs the multicast
    /// groups on a new routing.
    fn keep(&mut self, outcome: &OnceOutcome) {
        // Switches that left may come back with other tables.
        let fabric = &outcome.sweep.fabric;
        let index = fabric.index_by_guid();
        self.mcast.mfts.retain(|g| index.contains_key(&g));
        self.routing.accepted = outcome.accepted.clone();
        // Nodes are shared: the copy is of pointers.
        self.routing.fabric = Some(outcome.sweep.fabric.clone());
        if self.routing.accepted.is_some() {
            // A heavy sweep programs the groups whatever the back-off says:
            // switches may have come back.
            self.mcast.backoff.succeeded();
            self.program_groups();
        }
        // Ports that came back, hosts that rebooted: their aliases are
        // written again.
        self.aliases.0.forget();
        self.program_aliases();
    }

    /// The SA's alias GUID tables, if the SM serves an SA.
    fn alias_tables(&self) -> Option<Arc<Mutex<crate::sa::alias::AliasGuids>>> {
        self.ctx.options.sa.as_ref().map(|sa| sa.sa().aliases())
    }

    /// Whether alias GUIDs are to be written: hosts changed them since,
    /// and a failed pass's pause is over.
    fn aliases_due(&self, now: Instant) -> bool {
        let Some(tables) = self.alias_tables() else { return false };
        let generation = tables.lock().map_or(0, |t| t.generation());
        self.routing.fabric.is_some() && self.aliases.0.programmed != Some(generation) && self.aliases.1.is_none_or(|at| now >= at)
    }

    /// Writes the alias GUID tables to the ports (see [`aliases`]).
    fn program_aliases(&mut self) {
        let (Some(fabric), Some(tables)) = (self.routing.fabric.clone(), self.alias_tables()) else { return };
        let mut client = SmpClient::new(&mut *self.ctx.port, self.ctx.options.once.sweep.retries).with_m_keys(self.ctx.options.once.sweep.m_keys.clone());
        let done = aliases::program(&mut client, &fabric, &tables, &mut self.aliases.0);
        // A port that does not take its table is tried again in a while,
        // not at every wait slice.
        self.aliases.1 = (done.failed > 0).then(|| Instant::now() + Duration::from_secs(10));
    }

    /// The fabric read again behind what `changes` name, for a heavy sweep
    /// of `cause`; `None` (logged why) when the sweep must read it whole.
    fn rediscover(&mut self, cause: Cause, changes: Changes) -> Option<sweep::Discovered> {
        let every = self.ctx.options.incremental?;
        if !matches!(cause, Cause::Trap | Cause::Change) {
            return None;
        }
        let (Some(fabric), Some(_)) = (&self.routing.fabric, &self.routing.accepted) else { return None };
        if changes.is_empty() {
            // Nothing names what changed (`force_heavy_sweep`'s sweep
            // every interval, say): only reading it all can tell.
            info!("full heavy sweep: nothing names what changed");
            return None;
        }
        if every != 0 && self.routing.since_full + 1 >= every {
            info!(every, "full heavy sweep: the periodic one");
            return None;
        }
        let t = Instant::now();
        let (read, smps) = read_behind(&mut self.ctx, fabric, &changes);
        match read {
            Ok((fabric, report, _)) => {
                self.routing.since_full += 1;
                info!(smps = smps.sent, took = ?t.elapsed(), "incremental discovery");
                Some(sweep::Discovered::new(fabric, report, smps))
            }
            Err(why) => {
                info!(smps = smps.sent, "full heavy sweep: {why}");
                None
            }
        }
    }

    /// Whether a higher SM took the subnet; false when the loop must end.
    fn peers(&mut self) -> bool {
        let (Some((state, _)), Some(fabric)) = (&self.ctx.options.standby, &self.routing.fabric) else {
            return true;
        };
        let mut client = SmpClient::new(&mut *self.ctx.port, self.ctx.options.once.sweep.retries).with_m_keys(self.ctx.options.once.sweep.m_keys.clone());
        let ignore = self.ctx.options.standby.as_ref().is_some_and(|(_, o)| o.ignore_other_sm);
        match standby::check_peers_unless(&mut client, fabric, state, ignore) {
            PeerAction::Stay => true,
            PeerAction::SweepNow => {
                self.schedule.due = Some(Cause::Takeover);
                true
            }
            PeerAction::HandedOver { to } => {
                info!(to = format_args!("{to:#018x}"), "handed the subnet over; standing by");
                if let Some(sa) = &self.ctx.options.sa {
                    sa.stand_down();
                }
                self.routing.forget();
                self.schedule.reregister = true;
                self.schedule.due = self.become_master();
                self.schedule.due.is_some()
            }
        }
    }

    fn light_sweep(&mut self) {
        self.summary.light_sweeps += 1;
        let n = self.summary.light_sweeps;
        self.show_status(|s| s.set("light_sweeps", n.to_string()));
        let Some(fabric) = self.routing.fabric.as_ref().filter(|_| self.routing.accepted.is_some()) else {
            self.schedule.due = Some(Cause::Retry);
            return;
        };
        let span = info_span!("light_sweep", n = self.summary.light_sweeps);
        let _enter = span.enter();
        let mut client = SmpClient::new(&mut *self.ctx.port, self.ctx.options.once.sweep.retries).with_m_keys(self.ctx.options.once.sweep.m_keys.clone());
        let light = sweep::light::light_sweep(&mut client, fabric);
        self.routing.changes.add_light(&light);
        if light.needs_heavy_sweep() {
            info!(changed = light.changed.len(), lost = light.lost.len(), "light sweep found a change");
            self.schedule.due = Some(Cause::Change);
        } else {
            self.schedule.check_peers = true;
        }
    }

    /// Waits until this SM is master ([`standby::arbitrate`]) when other
    /// SMs may exist; the cause of the first heavy sweep, `None` when
    /// stopped.
    fn become_master(&mut self) -> Option<Cause> {
        let Some((state, standby_options)) = &self.ctx.options.standby else {
            return Some(Cause::Start);
        };
        self.show_status(|s| s.set("role", "electing (standby until master)"));
        let span = info_span!("arbitration");
        let _enter = span.enter();
        match standby::arbitrate(&mut *self.ctx.port, state, standby_options, &self.ctx.signals.stop) {
            Arbitration::Stopped => None,
            Arbitration::Master { took_over_from, discovered } => {
                if took_over_from.is_some() {
                    self.out_of_standby();
                }
                self.routing.arbitrated = discovered.map(|d| *d);
                // arbitrate() has logged from whom and how.
                Some(if took_over_from.is_some() { Cause::Takeover } else { Cause::Start })
            }
        }
    }

    /// As OpenSM coming out of standby: the guid2lid map known before is
    /// dropped; with `honor_guid2lid_file` the file is read again in its
    /// place (one that does not read leaves the map empty).
    fn out_of_standby(&mut self) {
        *self.ctx.guid2lid = Guid2Lid::default();
        let Some(path) = self.ctx.options.guid2lid_path.as_ref().filter(|_| self.ctx.options.honor_guid2lid_file) else {
            info!("out of standby: guid2lid forgotten, the ports' LIDs stand");
            return;
        };
        match Guid2Lid::read(path) {
            Ok(g) => {
                info!(file = %path.display(), ports = g.entries.len(), "out of standby: guid2lid read again");
                *self.ctx.guid2lid = g;
            }
            Err(e) => warn!(file = %path.display(), "out of standby: guid2lid not read ({e}); the ports' LIDs stand"),
        }
    }

    /// Updates the control socket's status, if there is one.
    fn show_status(&self, f: impl FnOnce(&mut crate::control::Status)) {
        if let Some(status) = &self.ctx.options.status {
            f(&mut status.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        }
    }

    /// Membership generation of the groups, if the SM has groups.
    fn generation(&self) -> Option<u64> {
        self.ctx.options.groups.as_ref().map(|g| g.lock().map_or(0, |g| g.generation()))
    }

    /// Whether multicast programming is due: membership changed since the
    /// switches were programmed, and a failed attempt's back-off is over.
    fn groups_due(&self, now: Instant) -> bool {
        self.routing.accepted.is_some() && self.generation() != self.mcast.programmed && self.mcast.backoff.due(now)
    }

    /// Programs the groups of the last sweep; on failure the back-off
    /// decides when to try again.
    fn program_groups(&mut self) {
        let (Some(fabric), Some(accepted)) = (&self.routing.fabric, &self.routing.accepted) else { return };
        let Some(groups) = &self.ctx.options.groups else { return };
        let mut client = SmpClient::new(&mut *self.ctx.port, self.ctx.options.once.sweep.retries).with_m_keys(self.ctx.options.once.sweep.m_keys.clone());
        let result = program_groups(&mut client, self.ctx.options, groups, fabric, accepted, &mut self.mcast.mfts);
        match result {
            GroupsProgrammed { generation, complete: true } => {
                self.summary.mcast_updates += 1;
                self.mcast.programmed = Some(generation);
                self.mcast.backoff.succeeded();
            }
            GroupsProgrammed { complete: false, .. } => {
                self.summary.mcast_updates += 1;
                self.summary.mcast_failures += 1;
                let wait = self.mcast.backoff.failed(Instant::now());
                warn!(retry_in_ms = wait.as_millis() as u64, "multicast forwarding incomplete; retried after a back-off");
            }
        }
    }

    /// Waits one interval, or until a trap, a signal or a membership
    /// change. A trap that may sweep ends the wait as soon as the traps
    /// queued behind it are read (they join its sweep); a flapping
    /// issuer's trap waits the settling time first, whose traps it
    /// absorbs; the trap budget may defer the sweep.
    fn wait(&mut self) -> Woken {
        // Short slices: the shutdown flag is checked between them.
        const SLICE: Duration = Duration::from_millis(100);
        // Traps read back to back without waiting before a due sweep
        // starts anyway (a storm must not hold it back).
        const GATHER: u32 = 256;
        let mut gathered = 0u32;
        let end = Instant::now() + self.schedule.interval;
        let mut sweep_at: Option<Instant> = None;
        if self.traps.pending {
            let allowed = self.traps.filter.next_allowed(Instant::now());
            sweep_at = Some(self.traps.settle_until.map_or(allowed, |u| u.max(allowed)));
        }
        loop {
            let now = Instant::now();
            let signals = self.ctx.signals;
            if signals.stop.load(Ordering::Relaxed)
                || signals.reload.load(Ordering::Relaxed)
                || signals.sweep.load(Ordering::Relaxed)
                || signals.reroute.load(Ordering::Relaxed)
                || !signals.isolate.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
            {
                return Woken::Signal;
            }
            // A trap just read may have others queued behind it: read
            // them first (without waiting) so that they join the sweep.
            let draining = gathered > 0 && gathered < GATHER;
            if let Some(at) = sweep_at.filter(|&at| now >= at && !draining) {
                if self.traps.filter.take_sweep(now) {
                    self.traps.pending = false;
                    return Woken::Sweep(Cause::Trap);
                }
                self.traps.pending = true;
                let next = self.traps.filter.next_allowed(now);
                if next > at {
                    debug!("trap-caused sweep deferred by the trap budget");
                }
                sweep_at = Some(next);
            }
            if now >= end {
                // The light sweep is due. A trap sweep still settling or
                // deferred by the budget is kept for the next wait: the
                // light sweep reads PortStateChange only and would miss a
                // capability change (trap 144: another SM came up).
                if sweep_at.is_some() {
                    self.traps.pending = true;
                }
                return Woken::Interval;
            }
            if sweep_at.is_none() && self.groups_due(now) {
                return Woken::Groups;
            }
            if sweep_at.is_none() && self.aliases_due(now) {
                return Woken::Aliases;
            }
            let until = sweep_at.map_or(end, |at| at.min(end));
            let timeout = if draining { Duration::ZERO } else { until.saturating_duration_since(now).min(SLICE) };
            match self.ctx.port.wait_trap(timeout) {
                Ok(Some(trap)) => {
                    self.summary.traps += 1;
                    gathered = gathered.saturating_add(1);
                    let at = Instant::now();
                    match self.traps.filter.judge(&trap, at) {
                        TrapVerdict::Sweep { number, issuer } if !self.ctx.options.sweep_on_trap => {
                            // As OpenSM with sweep_on_trap FALSE: the light
                            // sweep finds what the trap reports.
                            info!(number, issuer, "trap received (sweep_on_trap is off: no sweep)");
                        }
                        TrapVerdict::Sweep { number, issuer } => {
                            info!(number, issuer, "trap received");
                            self.routing.changes.add_trap(number, issuer, self.routing.fabric.as_ref());
                            // At once, unless a flapping port's sweep is
                            // settling: the trap joins it.
                            let due = self.traps.settle_until.filter(|&u| u > at).unwrap_or(at);
                            sweep_at = Some(sweep_at.map_or(due, |s| s.min(due)));
                        }
                        TrapVerdict::Note { number, issuer } => {
                            warn!(number, issuer, "trap received: port error or key violation reported");
                            if self.ctx.options.trap_limits.babbling_port_policy {
                                if let Some((lid, port)) = self.traps.port_errors.count(&trap, at) {
                                    self.babbling(lid, port);
                                }
                            }
                        }
                        TrapVerdict::Drop(why) => debug!(slid = trap.slid, "trap dropped: {why}"),
                    }
                }
                Ok(None) => gathered = 0,
                Err(TransportError::Closed(why)) => return Woken::Fatal(why),
                Err(e) => {
                    // A transport that cannot wait cannot sweep either; the
                    // next heavy sweep will say why, then the loop retries.
                    warn!("waiting for traps: {e}");
                    std::thread::sleep(SLICE);
                    return Woken::Sweep(Cause::Retry);
                }
            }
        }
    }
}

/// The transport failure behind a sweep error, when the port is gone.
fn transport_gone(e: &crate::pipeline::OnceError) -> Option<String> {
    match e {
        crate::pipeline::OnceError::Sweep(sweep::SmpError::Transport(TransportError::Closed(why))) => Some(why.clone()),
        _ => None,
    }
}

/// Ports (node GUID, port number) of `new` whose state or peer differs
/// from `old`'s, for the flap damping of the trap intake, each with whether
/// the change lost a link (a port that had a peer and has none now, or
/// another). A node `old` did not have counts none: the ports it was found
/// by changed.
fn changed_ports(old: &Fabric, new: &Fabric) -> Vec<(u64, u8, bool)> {
    let index = old.index_by_guid();
    let peer = |f: &Fabric, p: &FabricPort| p.peer.and_then(|(n, q)| f.nodes.get(n).map(|x| (x.guid, q)));
    let state = |p: &FabricPort| p.info.map(|i| i.port_state);
    let mut changed = Vec::new();
    for node in &new.nodes {
        let Some(was) = index.get(&node.guid).and_then(|&i| old.nodes.get(i)) else { continue };
        for (num, port) in node.ports.iter().enumerate().skip(1) {
            let (before, after) = (was.ports.get(num).and_then(|b| peer(old, b)), peer(new, port));
            if was.ports.get(num).map(state) != Some(state(port)) || before != after {
                changed.push((node.guid, num as u8, before.is_some() && before != after));
            }
        }
    }
    changed
}

/// Every LID of the swept fabric, for the trap intake.
fn fabric_lids(outcome: &OnceOutcome) -> Vec<u16> {
    let snapshot = outcome.snapshot();
    let mut lids = Vec::new();
    for p in snapshot.ports.iter().filter(|p| p.lid != 0) {
        let span = 1u16 << p.lmc.min(7);
        lids.extend((0..span).map(|k| p.lid.saturating_add(k)));
    }
    lids
}

/// What [`program_groups`] did.
struct GroupsProgrammed {
    /// The membership generation the plan was built from.
    generation: u64,
    /// Whether every block was written (else it is retried).
    complete: bool,
}

/// Computes every group's tree on `fabric` routed by `routed`, checks
/// unicast and multicast together for credit loops when the engine's
/// routing alone is free of them (a group may not break that promise), and
/// writes the MFT blocks that differ.
fn program_groups(
    client: &mut SmpClient<'_>,
    options: &DaemonOptions<'_>,
    groups: &Mutex<McGroups>,
    fabric: &Fabric,
    routed: &AcceptedRouting,
    mfts: &mut HeldMfts,
) -> GroupsProgrammed {
    // One switch graph serves the plan and the credit-loop check.
    let graph = smcore_kit::graph::Graph::new(&routed.snapshot);
    let (plan, generation) = {
        let mut g = groups.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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
        let plan =
            crate::mcast::tree::plan_on(&routed.snapshot, &graph, routed.routing.mcast_tree.as_ref().into_option(), &g);
        (plan, g.generation())
    };
    for p in &plan.problems {
        warn!("{p}");
    }
    let promised = routed.verification.credit_loops_checked && routed.verification.credit_loop.is_none();
    if promised && !plan.trees.is_empty() {
        let opts = smcore_kit::VerifyOptions { max_examples: 2, ..Default::default() };
        let v = smcore_kit::verify_with_mcast(&routed.snapshot, &graph, &routed.routing, &opts, &plan.routes());
        if let Some(cycle) = &v.credit_loop {
            error!(
                channels = cycle.cycle.len(),
                example = %v.examples.last().map(String::as_str).unwrap_or(""),
                "multicast trees would close a credit loop with the unicast routing; MFTs not changed"
            );
            // Retrying cannot help until membership or routing changes.
            return GroupsProgrammed { generation, complete: true };
        }
    }
    let report = program_mfts(client, fabric, &plan, mfts);
    if let Some(sa) = &options.sa {
        sa.publish_mcast(&plan);
    }
    if let Some(dir) = options.once.dump_dir {
        let path = dir.join("opensm.mcfdbs");
        let written = sm_fs::replace(&path, sm_fs::PUBLIC, |mut w| {
            crate::dump::mcfdbs::write_plan(&mut w, fabric, &plan)
        });
        if let Err(e) = written {
            warn!("{}: {e}", path.display());
        }
    }
    info!(
        groups = plan.trees.len(),
        written = report.written,
        unchanged = report.unchanged,
        failed = report.failed,
        over_capacity = report.over_capacity,
        "multicast forwarding programmed"
    );
    GroupsProgrammed { generation, complete: report.failed == 0 }
}

/// `config` with what the SM loop actually runs with written over it: the
/// command line may have overridden the file, and a re-read file may have
/// changed the sweep interval and the engines.
fn config_in_force(
    config: &crate::config::Config,
    options: &DaemonOptions<'_>,
    interval: Duration,
    engines: &str,
) -> crate::config::Config {
    let mut shown = config.clone();
    let sweep = &options.once.sweep;
    shown.sweep_interval = Some(interval.as_secs_f64());
    shown.use_ucast_cache = options.ucast_cache;
    shown.incremental_sweep = Some(options.incremental.is_some());
    shown.full_sweep_every = options.incremental;
    shown.lmc = sweep.lmc;
    shown.transaction_retries = Some(sweep.retries);
    shown.subnet_prefix = Some(sweep.subnet_prefix);
    shown.sm_sl = Some(sweep.sm_sl);
    shown.routing_engine = Some(engines.to_string());
    shown.dump_dir = options.once.dump_dir.map(std::path::Path::to_path_buf);
    shown
}

/// `fabric` read again behind `changes` on the SM's port
/// ([`sweep::incremental::rediscover`], with the sweep's options and the
/// loop's stop signal), and the SMPs that took.
#[allow(clippy::type_complexity)]
fn read_behind(
    ctx: &mut DaemonContext<'_, '_>,
    fabric: &Fabric,
    changes: &Changes,
) -> (
    Result<(Fabric, sweep::DiscoveryReport, sweep::incremental::IncrementalReport), sweep::incremental::Fallback>,
    sm_transport::SmpStats,
) {
    let mut options = ctx.options.once.sweep.clone();
    options.stop = Some(Arc::clone(&ctx.signals.stop));
    let mut client = SmpClient::new(&mut *ctx.port, options.retries).with_m_keys(options.m_keys.clone());
    let read = sweep::incremental::rediscover(&mut client, fabric, changes, &options.limits());
    (read, client.stats().clone())
}
