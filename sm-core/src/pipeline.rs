//! # A heavy sweep, stage by stage
//!
//! design.md's "Data flow of one sweep" as functions, each taking what the
//! one before produced, so that no stage can run on the wrong input:
//!
//! | stage | takes | gives |
//! |---|---|---|
//! | [`read_fabric`] (or [`Discovered::from_fabric`]) | the port | [`Discovered`] |
//! | [`address`]: LIDs assigned (and programmed, or left to [`link`]) | [`Discovered`] | [`Addressed`] |
//! | [`link`]: link parameters (with LIDs, arming, enforcement) programmed, snapshot taken | [`Addressed`] | [`Linked`] |
//! | [`route`]: chain + verify gate, or the unicast cache; QoS tables | [`Linked`] | [`Decided`] |
//! | [`program`]: LFTs, VL tables, P_Keys, port states | [`Decided`] | [`OnceOutcome`] |
//! | [`write_dumps`] | [`OnceOutcome`] | files |
//!
//! The first two stages are the core's ([`crate::sweep::stages`]); from
//! [`link`] on they take the configuration's settings, the engines and the
//! policies, which is why they sit above the core. Publishing (the SA, the
//! console, the metrics) is the caller's: the daemon hands the outcome's
//! [`AcceptedRouting`] to each. [`once`] and [`once_from`] are these
//! stages in a row.
//!
//! Nothing is written to the fabric before [`address`]; from the start of
//! [`program`] on, the routing is written whole (see
//! [`SweepOptions::stop`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sm_abi::FabricSnapshot;

use crate::config::Config;
use crate::engines::chain::{describe_attempts, judge, Attempt, ChainOutcome, Routed};
use crate::engines::Registry;
use crate::offline::{self, OfflineError};
use crate::report::RouteReport;
use crate::routing::AcceptedRouting;
use crate::sweep::discovery::{Fabric, SweepError, SweepLimits};
use crate::sweep::lids::{Guid2Lid, LidSets};
use crate::sweep::pkey::Partitions;
use crate::sweep::program::{activate_ports, program_links, program_routing, HeldTables, Riders, RoutingProgramReport};
use crate::sweep::stages::{address, read_fabric, Addressed, Discovered, SendLids};
use crate::sweep::transport::{SmpClient, SmpError, SmpPort};
use crate::sweep::{SweepOptions, SweepOutcome};
use crate::ucast_cache::UcastCache;

/// Stage 3's result: link parameters in the ports, and the snapshot the
/// engines will route.
#[derive(Debug)]
pub struct Linked {
    sweep: SweepOutcome,
    snapshot: FabricSnapshot,
    program: RoutingProgramReport,
    report: RouteReport,
    /// Resolved in [`link`] when its Sets carried enforcement bits;
    /// otherwise [`route`] resolves them.
    partitions: Option<Partitions>,
}

/// Stage 3: writes the link parameters of `config` where the ports do not
/// hold them, then takes the snapshot. Before routing: the engines and
/// the gate must see the VLs the ports will operate, not the one VL a port
/// resets to. `report` carries the sweep's figures so far.
///
/// The same Sets carry the LID fields [`address`] left to them
/// ([`SendLids::WithLinks`]) and, when a fabric is coming up
/// ([`fold_enforcement`]), the partition enforcement of the ports not yet
/// Active, the partitions then read and resolved here, once for the
/// sweep: a port gets one PortInfo Set before it is activated. A LID that
/// did not take marks the fabric incomplete, as in [`address`]. The SMPs
/// are all counted in the link phase; the LID and P_Key reports count the
/// answers.
pub fn link(
    port: &mut dyn SmpPort,
    options: &SweepOptions,
    addressed: Addressed,
    config: &Config,
    held: &mut HeldTables,
    mut report: RouteReport,
) -> Linked {
    let mut sweep = addressed;
    let mut program = RoutingProgramReport::default();
    let t = Instant::now();
    // Resolving the partitions here puts it before routing, where stage 4
    // does it while the engines route: worth it only when many ports
    // (a fabric coming up) save a Set each, not for the one port of a
    // host that rebooted.
    let mut partitions =
        fold_enforcement(&sweep.fabric).then(|| Partitions::resolve(&sweep.fabric, &config.partition_settings(), &mut held.pkeys));
    let lid_sets = std::mem::take(&mut sweep.lid_sets);
    let riders = Riders { lids: Some((&lid_sets, &mut sweep.program)), partitions: partitions.as_mut() };
    let mut client = SmpClient::new(port, options.retries).with_m_keys(options.m_keys.clone());
    // Failures are logged and not retried at once: a port that does not
    // implement a field would refuse at every sweep.
    program_links(&mut client, &mut sweep.fabric, &config.link_config(), held, riders, &mut program);
    if !lid_sets.ports.is_empty() {
        if sweep.program.failed != 0 {
            sweep.fabric.incomplete = true;
        }
        sweep.relabelled = relabelled_by(&lid_sets, &sweep.fabric);
        if let Err(e) = options.m_keys.flush() {
            tracing::error!(error = %e, "M_Key files not written");
        }
        // The LIDs the ports hold now, for a sweep that ends before
        // programming (stage 5 remembers the fabric again); the rest of
        // the fabric was remembered by `address`.
        held.memory.remember_ports(&sweep.fabric, lid_sets.ports.iter().map(|s| (s.node, usize::from(s.port))));
    }
    report.phase("link", t.elapsed());
    let snapshot = sweep.fabric.snapshot(sweep.lmc);
    Linked { sweep, snapshot, program, report, partitions }
}

/// Whether [`link`]'s Sets should carry the partition enforcement bits:
/// when at least one end port in 16 faces a switch port not yet Active.
fn fold_enforcement(fabric: &Fabric) -> bool {
    let (mut waiting, mut end_ports) = (0usize, 0usize);
    for n in &fabric.nodes {
        if !n.is_switch() {
            end_ports += n.ports.len().saturating_sub(1);
            continue;
        }
        for slot in n.ports.iter().skip(1) {
            let faces_end = slot.peer.is_some_and(|(peer, _)| fabric.nodes.get(peer).is_some_and(|p| !p.is_switch()));
            if faces_end && slot.info.is_some_and(|i| i.port_state != sm_mad::PortState::Active) {
                waiting += 1;
            }
        }
    }
    waiting > 0 && waiting * 16 >= end_ports
}

/// The switches whose port 0 holds another LID or MasterSMLID in
/// `programmed` than before `sets` (see [`relabelled_switches`]).
fn relabelled_by(sets: &LidSets, programmed: &Fabric) -> Vec<u64> {
    sets.ports
        .iter()
        .filter(|s| s.port == 0 && programmed.nodes[s.node].is_switch())
        .filter(|s| {
            let now = programmed.nodes[s.node].ports.first().and_then(|p| p.info).map(|i| (i.lid, i.master_sm_lid));
            now != Some(s.before)
        })
        .map(|s| programmed.nodes[s.node].guid)
        .collect()
}

/// Stage 4's result: the routing that passed the gate, if any, with the
/// QoS tables of the configuration added.
#[derive(Debug)]
pub struct Decided {
    sweep: SweepOutcome,
    attempts: Vec<Attempt>,
    accepted: Option<Arc<AcceptedRouting>>,
    program: RoutingProgramReport,
    report: RouteReport,
}

impl Decided {
    /// The routing to program, if one passed the gate.
    pub fn accepted(&self) -> Option<&Arc<AcceptedRouting>> {
        self.accepted.as_ref()
    }
}

/// Stage 4: the unicast cache's routing when `cache` holds one that still
/// applies and passes the gate on `linked`'s fabric; otherwise the chain
/// `engines` routes, through the same gate as `smcore route`, and what it
/// accepts becomes the cache. Dumps are written after programming
/// ([`write_dumps`]): a dump that cannot be written must never keep
/// routing from the fabric.
///
/// The P_Key tables and partition enforcement are programmed meanwhile:
/// partitions do not depend on the routing (as in OpenSM, they go in
/// before the LFTs), and the SMPs they take would otherwise wait for the
/// engines. Nothing is Active yet, so no data passes before the routing is
/// in.
///
/// `previous`, the routing in force, reaches the engines on a re-route:
/// they keep what the change left valid.
#[allow(clippy::too_many_arguments)]
pub fn route(
    port: &mut dyn SmpPort,
    options: &OnceOptions<'_>,
    linked: Linked,
    registry: &Registry,
    config: &Config,
    cache: Option<&mut Option<UcastCache>>,
    held: &mut HeldTables,
    previous: Option<&sm_abi::PreviousRouting>,
) -> Result<Decided, OfflineError> {
    let engines = options.engines;
    let options = &options.sweep;
    let Linked { mut sweep, snapshot, mut program, report, partitions } = linked;
    let cached = cache.as_deref();
    let snap = &snapshot;
    let (chosen, mut report, partition_time) = std::thread::scope(|scope| {
        // Kept for routing here should no thread be had.
        let spare = report.clone();
        // The engines' logs belong to this sweep's span.
        let span = tracing::Span::current();
        let routing = std::thread::Builder::new().name("route".into()).spawn_scoped(scope, move || {
            let _entered = span.enter();
            let mut report = report;
            (choose(snap, registry, engines, config, cached, previous, &mut report), report)
        });
        let t = Instant::now();
        let mut client = SmpClient::new(&mut *port, options.retries).with_m_keys(options.m_keys.clone());
        let partitions = partitions.unwrap_or_else(|| Partitions::resolve(&sweep.fabric, &config.partition_settings(), &mut held.pkeys));
        crate::sweep::pkey::program_partitions(&mut client, &mut sweep.fabric, partitions, held, &mut program.pkey);
        let partition_time = t.elapsed();
        let (chosen, report) = match routing {
            Ok(handle) => handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(e) => {
                tracing::debug!("routing thread not started ({e}); routing after the partitions");
                let mut report = spare;
                (choose(snap, registry, engines, config, cached, previous, &mut report), report)
            }
        };
        (chosen, report, partition_time)
    });
    report.phase("partitions", partition_time);
    Ok(accept(sweep, snapshot, program, report, chosen?, config, cache))
}

/// The routing of the cache or the chain: (chain outcome, LinearFDBTop,
/// deadlock free, from the cache).
type Chosen = (ChainOutcome, u16, bool, bool);

fn choose(
    snapshot: &FabricSnapshot,
    registry: &Registry,
    engines: &str,
    config: &Config,
    cache: Option<&Option<UcastCache>>,
    previous: Option<&sm_abi::PreviousRouting>,
    report: &mut RouteReport,
) -> Result<Chosen, OfflineError> {
    if let Some(Some(c)) = cache {
        if let Some((chain, top, deadlock_free)) = cached_routing(c, snapshot, config, report) {
            return Ok((chain, top, deadlock_free, true));
        }
    }
    let chain = offline::route_fabric_after(snapshot, registry, engines, &config.route_settings(), None, report, previous)?;
    let deadlock_free = chain.routed.as_ref().is_some_and(|r| registry.get(&r.engine).is_some_and(|e| e.deadlock_free));
    Ok((chain, snapshot.max_lid, deadlock_free, false))
}

/// The chosen routing with the QoS tables of `config`, kept in the cache
/// when it is new.
fn accept(
    sweep: SweepOutcome,
    snapshot: FabricSnapshot,
    program: RoutingProgramReport,
    report: RouteReport,
    chosen: Chosen,
    config: &Config,
    cache: Option<&mut Option<UcastCache>>,
) -> Decided {
    let (chain, top, deadlock_free, from_cache) = chosen;
    // The engine's own tables come first; QoS appends its own after them.
    let engine_tables = chain.routed.as_ref().map_or((0, 0), |r| (r.routing.sl2vl.len(), r.routing.vlarb.len()));
    let ChainOutcome { attempts, routed } = crate::qos::tables::with_qos_tables(chain, &sweep.fabric, config.qos_tables_settings().as_ref());
    let accepted = routed.map(|routed| {
        Arc::new(AcceptedRouting::new(routed, snapshot, top, deadlock_free, from_cache, engine_tables))
    });
    if let (Some(slot), Some(accepted)) = (cache, &accepted) {
        if !accepted.from_cache {
            *slot = Some(UcastCache::keep(Arc::clone(accepted), config.gate_options()));
        }
    }
    Decided { sweep, attempts, accepted, program, report }
}

/// The cached routing as the chain's outcome, if it applies to `snapshot`
/// and passes the gate; with the LinearFDBTop to keep and whether its
/// engine promises deadlock freedom.
fn cached_routing(
    cache: &UcastCache,
    snapshot: &FabricSnapshot,
    config: &Config,
    report: &mut RouteReport,
) -> Option<(ChainOutcome, u16, bool)> {
    if let Err(why) = cache.applies_to(snapshot) {
        tracing::info!("unicast cache does not apply: {why}; routing anew");
        return None;
    }
    let routing = cache.routing_for(snapshot);
    let t = Instant::now();
    let gate = config.gate_options();
    let judged = match cache.verification_for(snapshot, &gate) {
        Some(verification) => {
            tracing::debug!("fabric as the cached routing was judged on: its verification stands");
            report.verification_reused = true;
            Ok(verification.clone())
        }
        None => judge(snapshot, &smcore_kit::Graph::new(snapshot), &routing, cache.deadlock_free(), &gate, cache.engine()),
    };
    let verify_time = t.elapsed();
    report.phase("verify", verify_time);
    let verification = match judged {
        Ok(v) => v,
        Err(why) => {
            tracing::info!("cached routing fails on the fabric as it is now ({why}); routing anew");
            return None;
        }
    };
    tracing::info!(engine = %cache.engine(), "routing taken from the unicast cache");
    let engine = cache.engine().to_string();
    let attempt = Attempt { engine: engine.clone(), failure: None, route_time: std::time::Duration::ZERO, verify_time };
    let chain = ChainOutcome { attempts: vec![attempt], routed: Some(Routed { engine, routing, verification }) };
    report.fill(snapshot, &chain);
    Some((chain, cache.max_lid().max(snapshot.max_lid), cache.deadlock_free()))
}

/// Everything one full sweep found and did.
#[derive(Debug)]
pub struct OnceOutcome {
    /// Discovery and LID programming; `sweep.fabric` is the fabric as
    /// programmed (port states, tops).
    pub sweep: SweepOutcome,
    /// Every engine tried (one, the cached routing's, on a cache hit).
    pub attempts: Vec<Attempt>,
    /// The routing that passed the gate and was programmed, with the
    /// snapshot it was judged on (`None`: nothing routed, nothing past the
    /// LIDs programmed).
    pub accepted: Option<Arc<AcceptedRouting>>,
    /// The routing figures, as `smcore route` reports them.
    pub report: RouteReport,
    /// Routing programming and port activation.
    pub program: RoutingProgramReport,
    /// Partitions and P_Key tables as programmed, for the SA (`None` when
    /// nothing was programmed).
    pub partitions: Option<Arc<sm_partition::SaPartitions>>,
}

impl<'a> From<&'a mut OnceOutcome> for crate::sa::db::SaSource<'a> {
    fn from(o: &'a mut OnceOutcome) -> Self {
        (&*o).into()
    }
}

impl<'a> From<&'a OnceOutcome> for crate::sa::db::SaSource<'a> {
    fn from(o: &'a OnceOutcome) -> Self {
        crate::sa::db::SaSource {
            fabric: &o.sweep.fabric,
            lmc: o.sweep.lmc,
            accepted: o.accepted.as_ref(),
            partitions: o.partitions.as_ref(),
        }
    }
}

impl OnceOutcome {
    /// The snapshot the engines saw: the accepted routing's, or, when
    /// nothing routed, the fabric's taken again (nothing past the link
    /// parameters was written since).
    pub fn snapshot(&self) -> std::borrow::Cow<'_, FabricSnapshot> {
        match &self.accepted {
            Some(accepted) => std::borrow::Cow::Borrowed(&accepted.snapshot),
            None => std::borrow::Cow::Owned(self.sweep.fabric.snapshot(self.sweep.lmc)),
        }
    }

    /// One line per engine tried: who routed and why the others did not.
    pub fn describe(&self) -> Vec<String> {
        describe_attempts(&self.attempts)
    }
}

/// Stage 5: programs the accepted routing (LinearFDBTop, LFT blocks,
/// SL2VL/VLArb; the P_Keys went in while it was routed) and brings the
/// ports up. When nothing routed, nothing of it is programmed: an
/// unverified routing is worse than none. `held` is read and updated.
pub fn program(
    port: &mut dyn SmpPort,
    options: &SweepOptions,
    decided: Decided,
    held: &mut HeldTables,
    limits: &SweepLimits,
) -> Result<OnceOutcome, SweepError> {
    let Decided { mut sweep, attempts, accepted, mut program, mut report } = decided;
    if let Some(accepted) = &accepted {
        // The last point of return: from here on the routing is written
        // whole (see `SweepOptions::stop`).
        limits.check()?;
        let t = Instant::now();
        // A client of its own: the sweep's counts stay the sweep's, and each
        // phase here is measured from zero (TIDs are process-wide).
        let mut client = SmpClient::new(port, options.retries).with_m_keys(options.m_keys.clone());
        let fabric = &mut sweep.fabric;
        program_routing(&mut client, fabric, &accepted.routing, accepted.linear_fdb_top, held, &mut program);
        crate::sweep::vl::program_vl_tables(&mut client, fabric, &accepted.routing, held, &mut program, options.optimized_sl2vl, options.suppress_sl2vl_status_errors);
        activate_ports(&mut client, fabric, &mut program);
        report.phase("program", t.elapsed());
        report.smp_window = port.window_stats();
        // What did not take must be tried again, at the next light sweep.
        // (SL2VL and VLArb are left out: a port that does not implement
        // them refuses at every sweep, and would make every sweep heavy.)
        let failed = program.switch_info.failed + program.lft.failed + program.arm.failed + program.activate.failed;
        if failed != 0 {
            fabric.incomplete = true;
        }
        held.memory.remember(fabric);
    }
    let partitions = accepted.as_ref().and(held.pkeys.sa_view());
    Ok(OnceOutcome { sweep, attempts, accepted, report, program, partitions })
}

/// Stage 6: OpenSM-format files of the routing now in the switches. A
/// by-product: a failure is logged and the SM goes on. `guid2lid` is left
/// to the SM, which writes it with the ports that are away too.
///
/// Nodes the configuration's node name map names are written by that name
/// (the map is read again for each call: an edit shows at the next heavy
/// sweep; an unreadable map is logged and the descriptions are used).
pub fn write_dumps(dir: &Path, outcome: &mut OnceOutcome, config: &Config) {
    let Some(accepted) = &outcome.accepted else { return };
    let t = Instant::now();
    let names = config.node_names().unwrap_or_else(|e| {
        tracing::warn!("{e}: the dumps show NodeDescriptions");
        crate::node_names::NodeNameMap::default()
    });
    let snapshot = names.rename(&accepted.snapshot);
    match crate::dump::write_routing_dumps(dir, &snapshot, &accepted.routing) {
        Ok(files) => outcome.report.dumps = files.iter().map(|p| p.display().to_string()).collect(),
        Err(e) => tracing::warn!("dumps not written (the fabric is programmed all the same): {e}"),
    }
    outcome.report.phase("dump", t.elapsed());
}

/// Settings of [`once`].
#[derive(Debug, Clone)]
pub struct OnceOptions<'a> {
    /// The sweep's own settings (LMC, LID reassignment, retries).
    pub sweep: SweepOptions,
    /// Engine list, as `smcore route --engines`.
    pub engines: &'a str,
    /// Dumps go here when given.
    pub dump_dir: Option<&'a Path>,
}

/// Why [`once`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum OnceError {
    /// The SM's own node did not answer.
    #[error("sweep: {0}")]
    Sweep(#[from] SmpError),
    /// The stop flag ended the sweep before programming: nothing of its
    /// routing was written.
    #[error("sweep stopped before programming (stop requested)")]
    Stopped,
    /// The sweep ran past its time budget before programming: nothing of
    /// its routing was written.
    #[error("sweep over its time budget of {0:?} before programming; nothing programmed")]
    OverBudget(std::time::Duration),
    /// Bad engine list, or dumps not written.
    #[error(transparent)]
    Offline(#[from] OfflineError),
}

impl From<SweepError> for OnceError {
    fn from(e: SweepError) -> Self {
        match e {
            SweepError::Smp(e) => OnceError::Sweep(e),
            SweepError::Stopped => OnceError::Stopped,
            SweepError::OverBudget(budget) => OnceError::OverBudget(budget),
        }
    }
}

/// What a heavy sweep reads and updates for the next one.
#[derive(Debug)]
pub struct SweepState<'a> {
    /// LIDs by GUID (the caller persists it).
    pub guid2lid: &'a mut Guid2Lid,
    /// The tables earlier sweeps wrote, and the fabric they knew.
    pub held: &'a mut HeldTables,
    /// The unicast routing cache, when it is on.
    pub cache: Option<&'a mut Option<UcastCache>>,
    /// The routing in force, for a re-route that keeps what still works
    /// (`None`: route from scratch, as a first sweep, `--reassign-lids` and
    /// `ctl reroute` do).
    pub previous: Option<&'a sm_abi::PreviousRouting>,
}

/// One full sweep: every stage from discovery to dumps.
///
/// `guid2lid` is read and updated (the caller persists it); `held` carries
/// the LFTs written from one sweep to the next.
pub fn once(
    port: &mut dyn SmpPort,
    options: &OnceOptions<'_>,
    registry: &Registry,
    config: &Config,
    guid2lid: &mut Guid2Lid,
    held: &mut HeldTables,
) -> Result<OnceOutcome, OnceError> {
    once_from(port, None, options, registry, config, SweepState { guid2lid, held, cache: None, previous: None })
}

/// [`once`] with the unicast routing cache of `state` (when it holds a
/// routing that still applies to the fabric found and passes the gate, it
/// is used instead of routing again; otherwise the chain routes and its
/// result becomes the cache), starting from `discovered` when given (a
/// fabric the standby arbitration read: [`Discovered::from_fabric`])
/// instead of discovering the fabric again.
pub fn once_from(
    port: &mut dyn SmpPort,
    discovered: Option<Discovered>,
    options: &OnceOptions<'_>,
    registry: &Registry,
    config: &Config,
    state: SweepState<'_>,
) -> Result<OnceOutcome, OnceError> {
    let SweepState { guid2lid, held, cache, previous } = state;
    let total = Instant::now();
    let mut report = RouteReport::default();
    let limits = options.sweep.limits();
    let t = Instant::now();
    let discovered = match discovered {
        Some(d) => d,
        None => read_fabric(port, &options.sweep, &limits)?,
    };
    let addressed = address(port, &options.sweep, discovered, guid2lid, &mut held.memory, &limits, SendLids::WithLinks)?;
    report.phase("sweep", t.elapsed());
    limits.check()?;
    let linked = link(port, &options.sweep, addressed, config, held, report);
    let decided = route(port, options, linked, registry, config, cache, held, previous)?;
    let mut outcome = program(port, &options.sweep, decided, held, &limits)?;
    if let Some(dir) = options.dump_dir {
        write_dumps(dir, &mut outcome, config);
    }
    outcome.report.phase("total", total.elapsed());
    outcome.report.peak_rss_mib = crate::report::peak_rss_mib();
    Ok(outcome)
}
