//! The performance manager: every port's PMA counters read on an interval,
//! kept as deltas, and error thresholds that raise one event per crossing.
//!
//! This is what OpenSM sites ask of an SM after routing: which cable is
//! going bad. The manager runs on a thread of its own with its own GSI
//! agent (class 0x04 on QP1), so a slow PMA never holds up a sweep, and it
//! reads the ports the last heavy sweep found ([`targets_from_fabric`]).
//! A counter crossing its threshold in one interval logs one warning; it
//! is logged again only after an interval below the threshold, so a bad
//! link is reported once, not every interval. Counters that reach half
//! their range are cleared (PortCounters Set), as OpenSM does, so the
//! next interval's deltas stay exact.

pub mod counters;
pub mod isolation;
pub mod query;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use sm_mad::perf::{COUNTERS, COUNTER_NAMES};
use tracing::{info, info_span, warn};

use crate::config::Config;
use sm_model::Escaped;
use sm_model::Fabric;
use counters::{Delta, PortHistory, ERROR_COUNTERS};
use query::{PmaTransport, QueryStats, Target};

/// OpenSM's `perfmgr_sweep_time_s` default.
pub const DEFAULT_INTERVAL_S: u64 = 180;
/// OpenSM's `perfmgr_max_outstanding_queries` default.
pub const DEFAULT_WINDOW: usize = 500;

/// Error counters' default thresholds, per interval. A link that loses
/// its training (LinkDowned, LinkErrorRecovery) or drops a packet for a
/// partition or integrity reason is worth a line at once; symbol and
/// receive errors come in small numbers on healthy links, so only a burst
/// is; relay errors and discards are normal in small numbers under load.
pub const DEFAULT_THRESHOLDS: [(&str, u64); 12] = [
    ("SymbolErrorCounter", 10),
    ("LinkErrorRecoveryCounter", 1),
    ("LinkDownedCounter", 1),
    ("PortRcvErrors", 10),
    ("PortRcvRemotePhysicalErrors", 10),
    ("PortRcvSwitchRelayErrors", 100),
    ("PortXmitDiscards", 100),
    ("PortXmitConstraintErrors", 1),
    ("PortRcvConstraintErrors", 1),
    ("LocalLinkIntegrityErrors", 1),
    ("ExcessiveBufferOverrunErrors", 1),
    ("VL15Dropped", 100),
];

/// How the manager runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfMgrConfig {
    /// Between two reads of the fabric.
    pub interval: Duration,
    /// PMA requests in flight at once.
    pub window: usize,
    /// Wait for each answer.
    pub timeout: Duration,
    /// Read switch ports only (OpenSM `perfmgr_ignore_cas`).
    pub ignore_cas: bool,
    /// Log threshold crossings (OpenSM `perfmgr_log_errors`).
    pub log_errors: bool,
    /// Threshold per counter ([`COUNTER_NAMES`] order); `None`: no event.
    pub thresholds: [Option<u64>; COUNTERS],
    /// Ask the SM to disable a link whose port stays above a threshold of
    /// [`ISOLATING_COUNTERS`], and to enable it again later (smcore
    /// `perfmgr_isolate_ports`, off by default; [`isolation`]).
    pub isolate: bool,
    /// Forget the counters of ports that left the fabric (OpenSM
    /// `perfmgr_rm_nodes`, default true); false keeps them, totals and
    /// all, and their port comes back to them when it returns.
    pub rm_nodes: bool,
    /// Follow a PMA's redirect to the LID and QP its ClassPortInfo names
    /// (OpenSM `perfmgr_redir`, default true).
    pub redirect: bool,
}

/// The counters that tell a failing link rather than congestion or a
/// misbehaving host: only their crossings isolate a port.
pub const ISOLATING_COUNTERS: [&str; 4] =
    ["SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "LocalLinkIntegrityErrors"];

impl Event {
    /// Whether this crossing asks for the port's isolation.
    pub fn isolates(&self) -> bool {
        ISOLATING_COUNTERS.contains(&self.counter)
    }
}

impl PerfMgrConfig {
    /// The manager `config` asks for; `None` when `perfmgr` is off. A
    /// threshold naming no counter is an error naming it.
    pub fn from_config(config: &Config) -> Result<Option<Self>, String> {
        if !config.perfmgr {
            return Ok(None);
        }
        let mut thresholds = [None; COUNTERS];
        for (name, value) in DEFAULT_THRESHOLDS {
            if let Some(i) = COUNTER_NAMES.iter().position(|(n, _)| *n == name) {
                thresholds[i] = Some(value);
            }
        }
        for (name, &value) in &config.perfmgr_thresholds {
            let i = COUNTER_NAMES.iter().position(|(n, _)| n == name).ok_or_else(|| {
                let known: Vec<&str> = COUNTER_NAMES.iter().map(|(n, _)| *n).collect();
                format!("perfmgr_thresholds: no counter `{name}` (counters: {})", known.join(", "))
            })?;
            // 0 switches the event off.
            thresholds[i] = (value > 0).then_some(value);
        }
        if config.perfmgr_xmit_wait_log {
            thresholds[counters::idx::XMIT_WAIT] = Some(config.perfmgr_xmit_wait_threshold.unwrap_or(0xFFFF).max(1));
        }
        Ok(Some(Self {
            interval: Duration::from_secs(config.perfmgr_sweep_time_s.unwrap_or(DEFAULT_INTERVAL_S).max(1)),
            window: config.perfmgr_max_outstanding_queries.unwrap_or(DEFAULT_WINDOW).max(1),
            timeout: Duration::from_millis(config.transaction_timeout.unwrap_or(crate::config::DEFAULT_TRANSACTION_TIMEOUT_MS)),
            ignore_cas: config.perfmgr_ignore_cas,
            log_errors: config.perfmgr_log_errors.unwrap_or(true),
            thresholds,
            isolate: config.perfmgr_isolate_ports,
            rm_nodes: config.perfmgr_rm_nodes.unwrap_or(true),
            redirect: config.perfmgr_redir.unwrap_or(true),
        }))
    }
}

/// Targets of nodes the node name map names carry that name (OpenSM
/// gives its perfmgr the mapped name too): in `smcore ctl perfmgr`, the
/// metrics and the threshold events.
pub fn name_targets(targets: &mut [Target], names: &crate::node_names::NodeNameMap) {
    for t in targets {
        if let Some(name) = names.get(t.node_guid) {
            t.node_desc = name.to_string();
        }
    }
}

/// The ports of `fabric` with a cable and a LID to reach them by: every
/// linked switch port (through the switch's LID) and every CA port with a
/// LID of its own.
pub fn targets_from_fabric(fabric: &Fabric, ignore_cas: bool) -> Vec<Target> {
    let mut out = Vec::new();
    for node in &fabric.nodes {
        if ignore_cas && !node.is_switch() {
            continue;
        }
        for (p, port) in node.ports.iter().enumerate().skip(1) {
            if port.peer.is_none() {
                continue;
            }
            let lid = node.ports.get(usize::from(node.address_port(p as u8))).and_then(|a| a.info.as_ref()).map_or(0, |i| i.lid);
            if lid == 0 || lid >= 0xC000 {
                continue;
            }
            let peer = port.peer.and_then(|(far, far_port)| {
                let f = fabric.nodes.get(far)?;
                Some(((f.guid, far_port), f.is_switch()))
            });
            out.push(Target {
                lid,
                port: p as u8,
                node_guid: node.guid,
                node_desc: node.description.clone(),
                switch: node.is_switch(),
                peer,
            });
        }
    }
    out
}

/// One threshold crossing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Node GUID.
    pub node_guid: u64,
    /// NodeDescription.
    pub node_desc: String,
    /// Port number.
    pub port: u8,
    /// The counter's name.
    pub counter: &'static str,
    /// Its delta in the interval.
    pub delta: u64,
    /// The threshold it crossed.
    pub threshold: u64,
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} +{} in one interval (threshold {}) on {:#018x} \"{}\" port {}",
            self.counter,
            self.delta,
            self.threshold,
            self.node_guid,
            Escaped(&self.node_desc),
            self.port
        )
    }
}

/// What the manager knows of one port.
#[derive(Debug, Clone)]
pub struct PortRecord {
    /// How it is reached.
    pub target: Target,
    /// Its counters.
    pub history: PortHistory,
    /// Counters whose threshold the port stands above (reported already).
    pub above: [bool; COUNTERS],
}

/// Everything the manager has read, shared with the control socket and
/// the metrics endpoint.
#[derive(Debug, Default)]
pub struct PerfDb {
    /// By (node GUID, port).
    pub ports: BTreeMap<(u64, u8), PortRecord>,
    /// Reads of the whole fabric so far.
    pub sweeps: u64,
    /// When the last one ended.
    pub last_sweep: Option<SystemTime>,
    /// Its request counts.
    pub last_stats: QueryStats,
    /// Counts over every sweep.
    pub total_stats: QueryStats,
    /// Threshold crossings so far.
    pub events: u64,
    /// The last events (at most [`Self::KEEP_EVENTS`]).
    pub recent: Vec<Event>,
    /// The isolation policy's memory ([`isolation`]).
    pub isolation: isolation::Policy,
    /// What the policy asked for at the end of the last read, not taken
    /// yet ([`Self::take_requests`]).
    requests: Vec<isolation::Request>,
    next_tid: u64,
}

impl PerfDb {
    /// Events kept for `smcore ctl perfmgr`.
    pub const KEEP_EVENTS: usize = 64;

    /// Reads `targets` once: records deltas, returns the threshold
    /// crossings, clears counters past half their range. Ports no longer
    /// in `targets` are forgotten (they left the fabric).
    pub fn sweep(&mut self, transport: &mut dyn PmaTransport, targets: &[Target], cfg: &PerfMgrConfig) -> Vec<Event> {
        let mut tid = self.take_tid();
        let mut stats = QueryStats::default();
        let samples = query::read_all_with(transport, targets, cfg.window, cfg.timeout, &mut tid, &mut stats, cfg.redirect);
        let (events, to_clear) = self.record(targets, samples, cfg);
        let cleared = clear_counters(transport, &to_clear, cfg, &mut tid, &mut stats);
        self.finish(&to_clear, cleared, stats, &events, tid);
        events
    }

    /// [`Self::sweep`] on a shared database, locked only to read and write
    /// it, never while PMAs are asked: `smcore ctl perfmgr` and a metrics
    /// scrape do not wait on a slow fabric.
    pub fn sweep_shared(db: &Mutex<PerfDb>, transport: &mut dyn PmaTransport, targets: &[Target], cfg: &PerfMgrConfig) -> (Vec<Event>, QueryStats) {
        let lock = || db.lock().unwrap_or_else(PoisonError::into_inner);
        let mut tid = lock().take_tid();
        let mut stats = QueryStats::default();
        let samples = query::read_all_with(transport, targets, cfg.window, cfg.timeout, &mut tid, &mut stats, cfg.redirect);
        let (events, to_clear) = lock().record(targets, samples, cfg);
        let cleared = clear_counters(transport, &to_clear, cfg, &mut tid, &mut stats);
        lock().finish(&to_clear, cleared, stats, &events, tid);
        (events, stats)
    }

    /// The next transaction ID, from a random start: a host on the fabric
    /// cannot count on the next one.
    fn take_tid(&mut self) -> u64 {
        if self.next_tid == 0 {
            use std::hash::{BuildHasher, Hasher};
            self.next_tid = std::collections::hash_map::RandomState::new().build_hasher().finish() & 0xFFFF_FFFF;
        }
        self.next_tid
    }

    /// Takes in one read of `targets`: deltas and threshold crossings;
    /// returns the crossings and the ports to clear. Ports no longer in
    /// `targets` are forgotten (they left the fabric), unless
    /// [`PerfMgrConfig::rm_nodes`] is off.
    fn record(&mut self, targets: &[Target], samples: Vec<Option<counters::Sample>>, cfg: &PerfMgrConfig) -> (Vec<Event>, Vec<Target>) {
        if cfg.rm_nodes {
            let keep: std::collections::HashSet<(u64, u8)> = targets.iter().map(|t| (t.node_guid, t.port)).collect();
            self.ports.retain(|k, _| keep.contains(k));
        }
        let mut events = Vec::new();
        let mut to_clear = Vec::new();
        for (t, sample) in targets.iter().zip(samples) {
            let record = self.ports.entry((t.node_guid, t.port)).or_insert_with(|| PortRecord {
                target: t.clone(),
                history: PortHistory::default(),
                above: [false; COUNTERS],
            });
            record.target = t.clone();
            let Some(sample) = sample else {
                record.history.lost += 1;
                continue;
            };
            let delta = record.history.record(sample);
            events.extend(crossings(record, &delta, cfg));
            if cfg.isolate {
                let above = COUNTER_NAMES.iter().zip(&cfg.thresholds).enumerate().any(|(i, ((name, _), t))| {
                    ISOLATING_COUNTERS.contains(name) && t.is_some_and(|t| delta.values[i] >= t)
                });
                self.isolation.observe(t, above);
            }
            if sample.needs_clearing() {
                to_clear.push(t.clone());
            }
        }
        if cfg.isolate {
            let requests = self.isolation.tick();
            self.requests.extend(requests);
        }
        (events, to_clear)
    }

    /// Closes one read: the clears that took, the counts, the events.
    fn finish(&mut self, to_clear: &[Target], cleared: bool, stats: QueryStats, events: &[Event], next_tid: u64) {
        if cleared {
            for t in to_clear {
                if let Some(r) = self.ports.get_mut(&(t.node_guid, t.port)) {
                    r.history.cleared();
                }
            }
        }
        self.next_tid = next_tid;
        self.sweeps += 1;
        self.last_sweep = Some(SystemTime::now());
        self.last_stats = stats;
        self.total_stats.sent += stats.sent;
        self.total_stats.answered += stats.answered;
        self.total_stats.lost += stats.lost;
        self.total_stats.refused += stats.refused;
        self.events += events.len() as u64;
        self.recent.extend(events.iter().cloned());
        let excess = self.recent.len().saturating_sub(Self::KEEP_EVENTS);
        self.recent.drain(..excess);
    }

    /// The isolation policy's requests since the last call
    /// ([`PerfMgrConfig::isolate`]).
    pub fn take_requests(&mut self) -> Vec<isolation::Request> {
        std::mem::take(&mut self.requests)
    }

    /// The ports with the most errors in the last interval, then in total:
    /// `smcore ctl perfmgr`.
    pub fn top_error_ports(&self, n: usize) -> Vec<&PortRecord> {
        let mut ports: Vec<&PortRecord> = self.ports.values().collect();
        ports.sort_by_key(|r| {
            let total: u64 = r.history.totals[ERROR_COUNTERS].iter().sum();
            std::cmp::Reverse((r.history.delta.errors(), total))
        });
        ports.retain(|r| r.history.totals[ERROR_COUNTERS].iter().any(|&v| v > 0));
        ports.truncate(n);
        ports
    }

    /// A report for people: the state, the top error ports with their
    /// non-zero error counters (last interval / total), the last events.
    pub fn report(&self, n: usize) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "perfmgr: {} sweeps, {} ports, {} events; last sweep: {} sent, {} answered, {} lost",
            self.sweeps,
            self.ports.len(),
            self.events,
            self.last_stats.sent,
            self.last_stats.answered,
            self.last_stats.lost
        );
        for r in self.top_error_ports(n) {
            let counters: Vec<String> = ERROR_COUNTERS
                .filter(|&i| r.history.totals[i] > 0)
                .map(|i| format!("{}={}/{}", COUNTER_NAMES[i].0, r.history.delta.values[i], r.history.totals[i]))
                .collect();
            let _ = writeln!(
                out,
                "port {:#018x} \"{}\" {} lid {}: {}",
                r.target.node_guid,
                Escaped(&r.target.node_desc),
                r.target.port,
                r.target.lid,
                counters.join(" ")
            );
        }
        for e in &self.recent {
            let _ = writeln!(out, "event {e}");
        }
        out
    }
}

/// Clears the counters of `to_clear`; whether every port acknowledged.
/// When some did not, which ones is unknown: the next delta of each sees
/// a smaller value and counts from zero.
fn clear_counters(transport: &mut dyn PmaTransport, to_clear: &[Target], cfg: &PerfMgrConfig, tid: &mut u64, stats: &mut QueryStats) -> bool {
    if to_clear.is_empty() {
        return false;
    }
    let refs: Vec<&Target> = to_clear.iter().collect();
    let cleared = query::clear_with(transport, &refs, cfg.window, cfg.timeout, tid, stats, cfg.redirect);
    if cleared != to_clear.len() {
        warn!(asked = to_clear.len(), cleared, "not every PMA acknowledged the counter clear");
    }
    cleared == to_clear.len()
}

/// The threshold crossings of one port's new delta; updates which
/// counters it stands above.
fn crossings(record: &mut PortRecord, delta: &Delta, cfg: &PerfMgrConfig) -> Vec<Event> {
    let mut out = Vec::new();
    for (i, threshold) in cfg.thresholds.iter().enumerate() {
        let Some(threshold) = *threshold else { continue };
        let above = delta.values[i] >= threshold;
        if above && !record.above[i] {
            out.push(Event {
                node_guid: record.target.node_guid,
                node_desc: record.target.node_desc.clone(),
                port: record.target.port,
                counter: COUNTER_NAMES[i].0,
                delta: delta.values[i],
                threshold,
            });
        }
        record.above[i] = above;
    }
    out
}

/// Runs the manager until `stop`: reads `targets` (refreshed by the SM
/// after each heavy sweep) every interval into `db`.
/// `isolate` is handed each request of the isolation policy when it is on
/// ([`isolation`]).
pub fn run(
    cfg: &PerfMgrConfig,
    transport: &mut dyn PmaTransport,
    targets: &Mutex<Vec<Target>>,
    db: &Mutex<PerfDb>,
    stop: &AtomicBool,
    isolate: &dyn Fn(&isolation::Request),
) {
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(50).min(next - Instant::now()));
            continue;
        }
        next = Instant::now() + cfg.interval;
        let ports = targets.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if ports.is_empty() {
            continue;
        }
        let span = info_span!("perfmgr");
        let _enter = span.enter();
        let (events, stats) = PerfDb::sweep_shared(db, transport, &ports, cfg);
        if cfg.log_errors {
            for e in &events {
                warn!("port counter threshold crossed: {e}");
            }
        }
        if cfg.isolate {
            let requests = db.lock().unwrap_or_else(PoisonError::into_inner).take_requests();
            requests.iter().for_each(isolate);
        }
        info!(ports = ports.len(), answered = stats.answered, lost = stats.lost, "perfmgr sweep done");
    }
}

/// The manager's shared state: what the SM hands it and what readers see.
#[derive(Debug, Clone, Default)]
pub struct Shared {
    /// Ports to read.
    pub targets: Arc<Mutex<Vec<Target>>>,
    /// What was read.
    pub db: Arc<Mutex<PerfDb>>,
}

#[cfg(test)]
mod tests {
    use super::counters::idx;
    use super::query::FakePma;
    use super::*;

    fn cfg() -> PerfMgrConfig {
        let config = Config { perfmgr: true, ..Config::default() };
        let mut c = PerfMgrConfig::from_config(&config).expect("valid").expect("on");
        c.timeout = Duration::from_millis(20);
        c
    }

    fn target(lid: u16, port: u8) -> Target {
        Target { lid, port, node_guid: 0x100 + u64::from(lid), node_desc: format!("sw{lid}"), switch: true, peer: None }
    }

    #[test]
    fn a_crossing_is_reported_once_until_the_port_calms_down() {
        let mut pma = FakePma::default();
        let t = target(3, 7);
        pma.counters.insert((3, 7), [0; COUNTERS]);
        let mut db = PerfDb::default();
        let cfg = cfg();
        assert!(db.sweep(&mut pma, std::slice::from_ref(&t), &cfg).is_empty());
        // 50 symbol errors in an interval: one event.
        pma.counters.get_mut(&(3, 7)).expect("port")[idx::SYMBOL_ERRORS] = 50;
        let events = db.sweep(&mut pma, std::slice::from_ref(&t), &cfg);
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].counter, events[0].delta, events[0].port), ("SymbolErrorCounter", 50, 7));
        // Still climbing: no second event.
        pma.counters.get_mut(&(3, 7)).expect("port")[idx::SYMBOL_ERRORS] = 100;
        assert!(db.sweep(&mut pma, std::slice::from_ref(&t), &cfg).is_empty());
        // A quiet interval re-arms it.
        assert!(db.sweep(&mut pma, std::slice::from_ref(&t), &cfg).is_empty());
        pma.counters.get_mut(&(3, 7)).expect("port")[idx::SYMBOL_ERRORS] = 120;
        assert_eq!(db.sweep(&mut pma, std::slice::from_ref(&t), &cfg).len(), 1);
        assert_eq!(db.events, 2);
        let report = db.report(5);
        assert!(report.contains("SymbolErrorCounter=20/120"), "{report}");
    }

    #[test]
    fn counters_past_half_range_are_cleared_and_counting_goes_on() {
        let mut pma = FakePma::default();
        let t = target(4, 1);
        let mut v = [0; COUNTERS];
        v[idx::LINK_DOWNED] = 200;
        pma.counters.insert((4, 1), v);
        let mut db = PerfDb::default();
        db.sweep(&mut pma, std::slice::from_ref(&t), &cfg());
        assert_eq!(pma.counters[&(4, 1)][idx::LINK_DOWNED], 0, "cleared after the read");
        pma.counters.get_mut(&(4, 1)).expect("port")[idx::LINK_DOWNED] = 3;
        db.sweep(&mut pma, std::slice::from_ref(&t), &cfg());
        let r = &db.ports[&(t.node_guid, 1)];
        assert_eq!((r.history.delta.values[idx::LINK_DOWNED], r.history.totals[idx::LINK_DOWNED]), (3, 203));
    }

    #[test]
    fn a_threshold_for_no_counter_is_refused_by_name() {
        let mut config = Config { perfmgr: true, ..Config::default() };
        config.perfmgr_thresholds.insert("SymbolErrors".into(), 5);
        let e = PerfMgrConfig::from_config(&config).expect_err("unknown counter");
        assert!(e.contains("`SymbolErrors`") && e.contains("SymbolErrorCounter"), "{e}");
    }

    #[test]
    fn ports_that_left_the_fabric_are_forgotten_and_silent_ones_counted() {
        let mut pma = FakePma::default();
        let (a, b) = (target(5, 1), target(6, 1));
        pma.counters.insert((5, 1), [0; COUNTERS]);
        pma.silent.push(6);
        let mut db = PerfDb::default();
        db.sweep(&mut pma, &[a.clone(), b.clone()], &cfg());
        assert_eq!(db.ports[&(b.node_guid, 1)].history.lost, 1);
        db.sweep(&mut pma, std::slice::from_ref(&a), &cfg());
        assert!(!db.ports.contains_key(&(b.node_guid, 1)));
    }

    #[test]
    fn targets_take_the_names_of_the_node_name_map() {
        let names = crate::node_names::NodeNameMap::parse(&format!("0x{:x} \"leaf-3\"\n", 0x105), std::path::Path::new("m"))
            .expect("map");
        let mut targets = vec![target(5, 1), target(6, 1)];
        name_targets(&mut targets, &names);
        assert_eq!((targets[0].node_desc.as_str(), targets[1].node_desc.as_str()), ("leaf-3", "sw6"));
    }

    #[test]
    fn perfmgr_rm_nodes_false_keeps_the_counters_of_ports_that_left() {
        let config = Config { perfmgr: true, perfmgr_rm_nodes: Some(false), ..Config::default() };
        let mut cfg = PerfMgrConfig::from_config(&config).expect("valid").expect("on");
        cfg.timeout = Duration::from_millis(20);
        assert!(!cfg.rm_nodes);
        let mut pma = FakePma::default();
        let (a, b) = (target(5, 1), target(6, 1));
        pma.counters.insert((5, 1), [0; COUNTERS]);
        let mut v = [0; COUNTERS];
        v[idx::SYMBOL_ERRORS] = 7;
        pma.counters.insert((6, 1), v);
        let mut db = PerfDb::default();
        db.sweep(&mut pma, &[a.clone(), b.clone()], &cfg);
        // b leaves: its record stays, with what it had counted.
        db.sweep(&mut pma, std::slice::from_ref(&a), &cfg);
        let kept = &db.ports[&(b.node_guid, 1)];
        assert_eq!(kept.history.totals[idx::SYMBOL_ERRORS], 7);
        // It comes back: counting goes on from the kept totals.
        pma.counters.get_mut(&(6, 1)).expect("port")[idx::SYMBOL_ERRORS] = 9;
        db.sweep(&mut pma, &[a, b.clone()], &cfg);
        assert_eq!(db.ports[&(b.node_guid, 1)].history.totals[idx::SYMBOL_ERRORS], 9);
    }
}
