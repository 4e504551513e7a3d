//! `smcore shadow`: beside the SM in charge, never writing to the fabric.
//!
//! Each round discovers the fabric and reads what the master programmed
//! ([`read`]), judges that live routing with the verifier every engine's
//! routing passes ([`Verdict`]), routes the same fabric with smcore's own
//! chain on the master's LIDs, and reports the difference ([`Diff`]).
//!
//! The port it runs on is wrapped in [`sm_transport::ReadOnly`]: only
//! SubnGets reach the fabric, whatever the code above does, and a umad
//! port is bound as an observer (no unsolicited method claimed, no issm:
//! it takes no part in the SM election and serves no SA). The path SLs
//! come from the master's SA (PathRecord Gets from the shadow's port),
//! from a `.psl` file, or are taken as SL 0 when neither is at hand — the
//! report says which.

pub mod read;
pub mod run;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sm_abi::abi_stable::std_types::{RArc, ROption};
use sm_abi::{path_sl_box, FabricSnapshot, NodeKind, PathSl, Routing, SlTable, NO_ROUTE, NONE};
use sm_transport::gmp::GmpAgent;
use sm_transport::{ReadOnly, SmpClient, SmpPort};
use smcore_kit::{Graph, Verification};
use thiserror::Error;

use crate::engines::chain::Routed;
use crate::engines::Registry;
use crate::routing::AcceptedRouting;
use crate::offline::RouteSettings;
use crate::report::RouteReport;
use crate::sweep::{SweepLimits, SweepOptions};

pub use read::LiveTables;

/// Why a round ended without a report.
#[derive(Debug, Error)]
pub enum ShadowError {
    /// The shadow's own node did not answer: no fabric to look at.
    #[error("discovery failed: {0}")]
    Discovery(String),
    /// The engine list does not parse or names no engine.
    #[error("{0}")]
    Engines(String),
    /// The path-SL file could not be used.
    #[error("{0}")]
    PathSlFile(String),
}

/// Where the path SLs of the live routing come from.
pub enum PathSls<'a> {
    /// PathRecord Gets to the master's SA (at the port's SM LID), for at
    /// most `limit` (source, destination) pairs; beyond that the rest are
    /// taken as SL 0 and the report says so.
    Sa {
        /// The GSI agent on the shadow's port.
        agent: &'a mut dyn GmpAgent,
        /// Pairs asked at most.
        limit: usize,
        /// Time an answer may take.
        timeout: Duration,
    },
    /// An `ibdiagnet.psl`-format file (`smcore`'s `smcore-path-sl.psl`
    /// dump): `<source node GUID> <destination LID> <SL>` per line.
    File(&'a Path),
    /// Every path on SL 0 (no SA reachable and no file).
    Zero,
}

/// What one round takes.
pub struct ShadowOptions<'a> {
    /// smcore's engine chain (as `--engines`).
    pub engines: &'a str,
    /// The gate and the engines' options.
    pub settings: &'a RouteSettings<'a>,
    /// Retries of an unanswered Get.
    pub retries: u32,
    /// The intended cabling to compare the fabric with (`--expect`).
    pub expect: Option<&'a crate::cabling::Cabling>,
}

/// A routing judged by the verifier.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Verdict {
    /// (source end port, destination LID) pairs checked.
    pub pairs: u64,
    /// Pairs that never arrive.
    pub unreachable: u64,
    /// Pairs caught in a forwarding loop.
    pub looping: u64,
    /// Whether the channel dependencies on the VLs the SL2VL tables give
    /// have a cycle (`None`: not checked).
    pub credit_loops: Option<bool>,
    /// One cycle, when there is one.
    pub credit_loop_example: Option<String>,
    /// VLs the paths use.
    pub vls_used: u8,
    /// CA-to-CA routes over the busiest directed inter-switch link.
    pub busiest_link: u64,
    /// Mean over every directed inter-switch link.
    pub mean_link: f64,
    /// Hops of the longest path.
    pub max_hops: u32,
    /// Mean hops per routed pair.
    pub avg_hops: f64,
    /// Pairs routed on more than the fewest hops.
    pub non_minimal: u64,
    /// The verifier's examples of what is wrong.
    pub examples: Vec<String>,
}

impl Verdict {
    fn of(v: &Verification, fabric: &FabricSnapshot) -> Self {
        let (busiest_link, mean_link) = v.inter_switch_load(fabric);
        Verdict {
            pairs: v.pairs,
            unreachable: v.unreachable,
            looping: v.looping,
            credit_loops: v.credit_loops_checked.then_some(v.credit_loop.is_some()),
            credit_loop_example: v.credit_loop.as_ref().map(|c| smcore_kit::verify::describe_cycle(fabric, &c.cycle)),
            vls_used: v.vls_used,
            busiest_link,
            mean_link: (mean_link * 10.0).round() / 10.0,
            max_hops: v.max_hops,
            avg_hops: (v.avg_hops() * 1000.0).round() / 1000.0,
            non_minimal: v.non_minimal,
            examples: v.examples.clone(),
        }
    }

    /// Whether nothing is wrong: every pair arrives, no loop of either
    /// kind.
    pub fn sound(&self) -> bool {
        self.unreachable == 0 && self.looping == 0 && self.credit_loops != Some(true)
    }
}

/// One switch whose LFT smcore would change.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SwitchDiff {
    /// Node GUID.
    pub guid: String,
    /// NodeDescription.
    pub description: String,
    /// Entries (LIDs in use) that would change.
    pub entries: u64,
}

/// The live routing against smcore's, on the same LIDs.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Diff {
    /// (switch, LID in use) entries compared.
    pub entries_compared: u64,
    /// Entries smcore would program otherwise.
    pub entries_differ: u64,
    /// Share of the entries, in percent.
    pub percent: f64,
    /// Switches with at least one such entry.
    pub switches_differ: usize,
    /// Destination LIDs with at least one such entry.
    pub destinations_differ: usize,
    /// Per switch, most changed first.
    pub switches: Vec<SwitchDiff>,
    /// (source end port, destination) pairs that arrive on the live
    /// routing and would not on smcore's.
    pub reachable_only_live: u64,
    /// Pairs that arrive only on smcore's.
    pub reachable_only_smcore: u64,
    /// Paths whose SL smcore's routing would change (of the pairs whose
    /// live SL is known).
    pub sl_differ: u64,
}

/// What was read.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ReadSummary {
    /// SubnGets sent (the port refuses anything else).
    pub gets: u64,
    /// MADs the read-only port refused (always 0 unless smcore has a bug:
    /// a refused MAD never reaches the fabric).
    pub refused: u64,
    /// Reads without a usable answer, by attribute.
    pub unread: BTreeMap<String, u64>,
    /// Switches whose LFT was read.
    pub lfts: usize,
    /// Entries of those LFTs that hold a port.
    pub lft_entries: u64,
    /// SL2VL tables read.
    pub sl2vl_tables: usize,
    /// Ports whose VL arbitration tables were read.
    pub vlarb_ports: usize,
    /// Ports whose P_Key tables were read, and the distinct P_Keys
    /// (membership bit cleared) they hold.
    pub pkey_ports: usize,
    /// Distinct partitions.
    pub partitions: Vec<String>,
    /// Multicast LIDs with an MFT entry on some switch.
    pub mlids: usize,
    /// MLIDs whose MFT entries form a cycle between switches (a packet
    /// would be copied round it).
    pub mcast_cycles: Vec<String>,
}

/// Where the path SLs came from, and what they are.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PathSlSummary {
    /// `SA at LID n`, `file NAME`, or `SL 0 assumed`.
    pub source: String,
    /// Pairs asked (SA) or lines read (file).
    pub pairs: u64,
    /// Pairs with an SL known.
    pub known: u64,
    /// Paths per SL.
    pub by_sl: BTreeMap<u8, u64>,
    /// Why some are not known.
    pub note: Option<String>,
}

/// One round's findings.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ShadowReport {
    /// Switches found.
    pub switches: usize,
    /// End ports with a LID.
    pub end_ports: usize,
    /// Highest LID in use.
    pub max_lid: u16,
    /// LMC of the end ports.
    pub lmc: u8,
    /// The master SM's LID, as the shadow's port knows it.
    pub master_lid: u16,
    /// Ports without a LID (the master has not addressed them).
    pub unaddressed_ports: usize,
    /// What was read.
    pub read: ReadSummary,
    /// The path SLs.
    pub path_sl: PathSlSummary,
    /// The live routing, judged.
    pub live: Verdict,
    /// The engine of smcore's chain that routed (`None`: none did).
    pub smcore_engine: Option<String>,
    /// Each engine tried.
    pub smcore_attempts: Vec<String>,
    /// smcore's routing, judged.
    pub smcore: Option<Verdict>,
    /// What smcore would change.
    pub diff: Option<Diff>,
    /// The fabric against the intended cabling, when one was given.
    pub cabling: Option<crate::cabling::CablingReport>,
    /// The round's time.
    pub elapsed_ms: f64,
}

/// Switches listed per switch in the text report.
const TEXT_SWITCHES: usize = 10;

/// Runs one round on `port` (wrapped read-only here) and returns its
/// report, with the live routing it judged for callers that explain paths.
pub fn round(
    port: &mut dyn SmpPort,
    path_sls: PathSls<'_>,
    registry: &Registry,
    options: &ShadowOptions<'_>,
) -> Result<(ShadowReport, Live), ShadowError> {
    let started = Instant::now();
    let mut guarded = ReadOnly::new(port);
    let sweep = SweepOptions { retries: options.retries, ..Default::default() };
    let discovered = crate::sweep::stages::read_fabric(&mut guarded, &sweep, &SweepLimits::default())
        .map_err(|e| ShadowError::Discovery(e.to_string()))?;
    let fabric = discovered.fabric().clone();
    let cabling = options.expect.map(|expected| crate::cabling::check_fabric(expected, &fabric));
    let lmc = end_port_lmc(&fabric);
    let snapshot = fabric.snapshot(lmc);
    let tables = {
        let mut client = SmpClient::new(&mut guarded, options.retries);
        read::read_tables(&mut client, &fabric)
    };
    let master_lid = master_lid(&fabric);
    let owners = lid_owners(&snapshot);
    let (oracle, path_sl) = match path_sls {
        PathSls::Sa { agent, limit, timeout } => ask_sa(agent, master_lid, &snapshot, limit, timeout),
        PathSls::File(p) => read_psl(p, &snapshot)?,
        PathSls::Zero => (
            AnsweredSl::default(),
            PathSlSummary { source: "SL 0 assumed".into(), note: Some("no SA asked and no path-SL file given".into()), ..Default::default() },
        ),
    };
    let live_routing = live_routing(&tables, oracle.clone());
    let graph = Graph::new(&snapshot);
    let verification = smcore_kit::verify::verify_with(&snapshot, &graph, &live_routing, &options.settings.gate.verify);
    let live_verdict = Verdict::of(&verification, &snapshot);

    let mut route_report = RouteReport::default();
    let outcome = crate::offline::route_fabric(&snapshot, registry, options.engines, options.settings, None, &mut route_report)
        .map_err(|e| ShadowError::Engines(e.to_string()))?;
    let smcore_attempts = outcome.describe();
    let (smcore_engine, smcore, diff) = match &outcome.routed {
        Some(r) => {
            let diff = compare(&snapshot, &owners, &live_routing, &r.routing, &oracle);
            (Some(r.engine.clone()), Some(Verdict::of(&r.verification, &snapshot)), Some(diff))
        }
        None => (None, None, None),
    };
    let refused = guarded.stats().refused;
    let gets = guarded.stats().gets;
    let read = ReadSummary {
        gets,
        refused,
        unread: tables.unread.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        lfts: tables.lfts.len(),
        lft_entries: tables.lft_entries(),
        sl2vl_tables: tables.sl2vl.len(),
        vlarb_ports: tables.vlarb.len(),
        pkey_ports: tables.pkeys.len(),
        partitions: partitions(&tables),
        mlids: tables.mfts.values().flat_map(|m| m.keys()).collect::<std::collections::BTreeSet<_>>().len(),
        mcast_cycles: mcast_cycles(&snapshot, &tables),
    };
    let report = ShadowReport {
        switches: snapshot.nodes.iter().filter(|n| n.kind == NodeKind::Switch).count(),
        end_ports: end_ports(&snapshot).count(),
        max_lid: snapshot.max_lid,
        lmc,
        master_lid,
        unaddressed_ports: unaddressed(&snapshot),
        read,
        path_sl,
        live: live_verdict,
        smcore_engine,
        smcore_attempts,
        smcore,
        diff,
        cabling,
        elapsed_ms: (started.elapsed().as_secs_f64() * 1e4).round() / 10.0,
    };
    let accept = |routed: Routed, deadlock_free: bool| {
        let tables = (routed.routing.sl2vl.len(), routed.routing.vlarb.len());
        let top = snapshot.max_lid;
        Arc::new(AcceptedRouting::new(routed, snapshot.clone(), top, deadlock_free, false, tables))
    };
    let smcore = outcome.routed.map(|r| {
        let deadlock_free = registry.get(&r.engine).is_some_and(|e| e.deadlock_free);
        accept(r, deadlock_free)
    });
    let live = accept(Routed { engine: LIVE.into(), routing: live_routing, verification }, false);
    Ok((report, Live { fabric, live, smcore }))
}

/// The engine name the live routing goes by (in dumps and explanations).
pub const LIVE: &str = "live (the master's, as read)";

/// The live routing of a round and smcore's, for callers that look
/// further (explaining a path, dumps).
pub struct Live {
    /// The fabric as found, with the master's LIDs (node `i` is node `i`
    /// of both routings' snapshot).
    pub fabric: crate::sweep::Fabric,
    /// The master's routing as read (LFTs, SL2VL, VLArb, path SLs), with
    /// its verification.
    pub live: Arc<AcceptedRouting>,
    /// smcore's routing of the same fabric.
    pub smcore: Option<Arc<AcceptedRouting>>,
}

impl Live {
    /// What `explain` answers from: the live routing in an SA database
    /// built on the fabric as read (its ports' real MTUs and rates).
    pub fn path_view(&self) -> crate::explain::PathView {
        let db = crate::sa::SaDb::build_shared(crate::sa::db::SaSource {
            fabric: &self.fabric,
            lmc: self.live.snapshot.lmc,
            accepted: Some(&self.live),
            partitions: None,
        });
        crate::explain::PathView { db: Arc::new(db), defaults: Default::default(), names: Default::default() }
    }
}

/// The LMC the end ports hold (the highest; 0 without end ports).
fn end_port_lmc(fabric: &crate::sweep::Fabric) -> u8 {
    fabric
        .nodes
        .iter()
        .filter(|n| !n.is_switch())
        .flat_map(|n| n.ports.iter().skip(1))
        .filter_map(|p| p.info.map(|i| i.lmc))
        .max()
        .unwrap_or(0)
}

/// The master SM's LID as the shadow's own port holds it (node 0 is the
/// shadow's node).
fn master_lid(fabric: &crate::sweep::Fabric) -> u16 {
    fabric
        .nodes
        .first()
        .and_then(|n| n.ports.iter().skip(1).find_map(|p| p.info.filter(|i| i.master_sm_lid != 0).map(|i| i.master_sm_lid)))
        .unwrap_or(0)
}

/// (port index, base LID, LMC) of every end port with a LID.
fn end_ports(s: &FabricSnapshot) -> impl Iterator<Item = (u32, u16, u8)> + '_ {
    s.ports.iter().enumerate().filter_map(move |(i, p)| {
        let kind = s.nodes.get(p.node as usize)?.kind;
        (kind != NodeKind::Switch && p.lid != 0 && p.peer != NONE).then_some((i as u32, p.lid, p.lmc))
    })
}

/// Linked ports (end ports, switch port 0) the master left without a LID.
fn unaddressed(s: &FabricSnapshot) -> usize {
    s.ports
        .iter()
        .filter(|p| {
            let Some(node) = s.nodes.get(p.node as usize) else { return false };
            let addressed_slot = if node.kind == NodeKind::Switch { p.num == 0 } else { p.num != 0 && p.peer != NONE };
            addressed_slot && p.lid == 0
        })
        .count()
}

/// Every LID in use (each end port's 2^LMC and each switch's own), with
/// the port index that owns it: where a packet for it must arrive.
fn lid_owners(s: &FabricSnapshot) -> BTreeMap<u16, u32> {
    let mut owners = BTreeMap::new();
    for (i, p) in s.ports.iter().enumerate() {
        if p.lid == 0 {
            continue;
        }
        let Some(node) = s.nodes.get(p.node as usize) else { continue };
        let count = if node.kind == NodeKind::Switch {
            if p.num != 0 {
                continue;
            }
            1
        } else {
            1u32 << p.lmc
        };
        for k in 0..count {
            if let Ok(lid) = u16::try_from(u32::from(p.lid) + k) {
                owners.insert(lid, i as u32);
            }
        }
    }
    owners
}

/// The path SLs the shadow learnt, as an oracle (SL 0 where unknown).
#[derive(Debug, Clone, Default)]
pub struct AnsweredSl {
    by_pair: HashMap<(u16, u16), u8>,
}

impl AnsweredSl {
    /// The SL of `slid` → `dlid`, if it was learnt.
    pub fn get(&self, slid: u16, dlid: u16) -> Option<u8> {
        self.by_pair.get(&(slid, dlid)).copied()
    }
}

impl PathSl for AnsweredSl {
    fn uniform(&self) -> ROption<u8> {
        // Unknown pairs are SL 0: uniform only when every known one is too.
        if self.by_pair.values().all(|&sl| sl == 0) {
            ROption::RSome(0)
        } else {
            ROption::RNone
        }
    }

    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        self.get(slid, dlid).unwrap_or(0)
    }

    fn sl_table(&self) -> ROption<RArc<SlTable>> {
        ROption::RNone
    }
}

/// Asks the SA at `sa_lid` for the PathRecord of every (end port,
/// destination LID) pair, up to `limit`.
fn ask_sa(
    agent: &mut dyn GmpAgent,
    sa_lid: u16,
    s: &FabricSnapshot,
    limit: usize,
    timeout: Duration,
) -> (AnsweredSl, PathSlSummary) {
    let mut summary = PathSlSummary { source: format!("SA at LID {sa_lid}"), ..Default::default() };
    let mut oracle = AnsweredSl::default();
    if sa_lid == 0 {
        summary.source = "SL 0 assumed".into();
        summary.note = Some("the shadow's port knows no SM LID: no SA to ask".into());
        return (oracle, summary);
    }
    let sources: Vec<u16> = end_ports(s).map(|(_, lid, _)| lid).collect();
    let destinations: Vec<u16> = end_ports(s).map(|(_, lid, _)| lid).collect();
    let wanted = sources.len() * destinations.len().saturating_sub(1);
    let (mut failed, mut no_record) = (0u64, 0u64);
    let mut tid = sm_transport::port::fresh_tid();
    'all: for &slid in &sources {
        for &dlid in &destinations {
            if slid == dlid {
                continue;
            }
            if summary.pairs as usize >= limit {
                break 'all;
            }
            summary.pairs += 1;
            tid = tid.wrapping_add(1);
            match crate::sa::client::path_record(agent, sa_lid, slid, dlid, tid, timeout) {
                Ok(answer) => match answer.record {
                    Some(r) => {
                        oracle.by_pair.insert((slid, dlid), r.sl);
                        *summary.by_sl.entry(r.sl).or_default() += 1;
                        summary.known += 1;
                    }
                    None => no_record += 1,
                },
                Err(_) => {
                    failed += 1;
                    // An SA that answers nothing at all is not asked 10,000
                    // times more.
                    if summary.known == 0 && failed >= 8 {
                        break 'all;
                    }
                }
            }
        }
    }
    let mut notes = Vec::new();
    if summary.pairs < wanted as u64 {
        notes.push(format!("{} of {wanted} pairs asked (limit {limit}); the others taken as SL 0", summary.pairs));
    }
    if failed > 0 {
        notes.push(format!("{failed} queries unanswered"));
    }
    if no_record > 0 {
        notes.push(format!("{no_record} answered without a record"));
    }
    summary.note = (!notes.is_empty()).then(|| notes.join("; "));
    (oracle, summary)
}

/// Reads an `ibdiagnet.psl`-format file: `<source node GUID> <DLID> <SL>`;
/// every end port of the source node gets the line's SL.
fn read_psl(path: &Path, s: &FabricSnapshot) -> Result<(AnsweredSl, PathSlSummary), ShadowError> {
    let text = std::fs::read_to_string(path).map_err(|e| ShadowError::PathSlFile(format!("{}: {e}", path.display())))?;
    let mut by_guid: HashMap<u64, Vec<u16>> = HashMap::new();
    for (port, lid, _) in end_ports(s) {
        if let Some(n) = s.ports.get(port as usize).and_then(|p| s.nodes.get(p.node as usize)) {
            by_guid.entry(n.guid).or_default().push(lid);
        }
    }
    let mut oracle = AnsweredSl::default();
    let mut summary = PathSlSummary { source: format!("file {}", path.display()), ..Default::default() };
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| ShadowError::PathSlFile(format!("{}:{}: {why}: `{line}`", path.display(), n + 1));
        let mut words = line.split_whitespace();
        let (Some(g), Some(d), Some(sl), None) = (words.next(), words.next(), words.next(), words.next()) else {
            return Err(bad("expected `<source node GUID> <destination LID> <SL>`"));
        };
        let guid = u64::from_str_radix(g.trim_start_matches("0x"), 16).map_err(|_| bad("the GUID is not hex"))?;
        let dlid: u16 = d.parse().map_err(|_| bad("the LID is not a number"))?;
        let sl: u8 = sl.parse().ok().filter(|&x: &u8| x < 16).ok_or_else(|| bad("the SL is not 0..15"))?;
        summary.pairs += 1;
        for &slid in by_guid.get(&guid).map(Vec::as_slice).unwrap_or(&[]) {
            oracle.by_pair.insert((slid, dlid), sl);
            *summary.by_sl.entry(sl).or_default() += 1;
            summary.known += 1;
        }
    }
    if summary.pairs == 0 {
        summary.note = Some("the file is empty: every path on SL 0 (what smcore writes when all paths are)".into());
    }
    Ok((oracle, summary))
}

/// The master's routing as an engine's [`Routing`].
fn live_routing(t: &LiveTables, oracle: AnsweredSl) -> Routing {
    let mut r = Routing::single_vl(t.lfts.clone());
    r.path_sl = path_sl_box(oracle);
    // The switches' SL2VL as read; an empty set means identity, which is
    // also what a fabric of one-VL ports holds.
    r.sl2vl = t.sl2vl.clone().into();
    r.vlarb = t.vlarb.clone().into();
    r.vls_used = t.sl2vl.iter().flat_map(|e| e.vl.iter().copied()).filter(|&v| v < 15).max().map_or(1, |v| v + 1);
    r
}

/// The LFT entry of switch `node` for `lid` in `lfts`.
fn entry(lfts: &HashMap<u32, &[u8]>, node: u32, lid: u16) -> u8 {
    lfts.get(&node).and_then(|p| p.get(usize::from(lid)).copied()).unwrap_or(NO_ROUTE)
}

/// Whether a packet for `dlid` injected at port index `from` (an end
/// port) arrives at the port that owns `dlid` (false when it is lost or
/// loops: 64 hops at most).
fn walk(s: &FabricSnapshot, owner: &BTreeMap<u16, u32>, lfts: &HashMap<u32, &[u8]>, from: u32, dlid: u16) -> bool {
    let Some(&target) = owner.get(&dlid) else { return false };
    let mut at = s.ports.get(from as usize).map_or(NONE, |p| p.peer);
    for _ in 0..64 {
        if at == NONE {
            return false;
        }
        if at == target {
            return true;
        }
        let Some(port) = s.ports.get(at as usize) else { return false };
        let Some(node) = s.nodes.get(port.node as usize) else { return false };
        if node.kind != NodeKind::Switch {
            return false;
        }
        let out = entry(lfts, port.node, dlid);
        if out == 0 {
            // The switch itself: its port 0 owns the LID.
            return node.first_port == target;
        }
        if out == NO_ROUTE || out > node.num_ports {
            return false;
        }
        let leaving = node.first_port + u32::from(out);
        if leaving == target {
            return true;
        }
        at = s.ports.get(leaving as usize).map_or(NONE, |p| p.peer);
    }
    false
}

fn compare(s: &FabricSnapshot, owner: &BTreeMap<u16, u32>, live: &Routing, ours: &Routing, oracle: &AnsweredSl) -> Diff {
    let live_lfts: HashMap<u32, &[u8]> = live.lfts.iter().map(|l| (l.node, &l.ports[..])).collect();
    let our_lfts: HashMap<u32, &[u8]> = ours.lfts.iter().map(|l| (l.node, &l.ports[..])).collect();
    let mut diff = Diff::default();
    let mut destinations = std::collections::BTreeSet::new();
    for (i, node) in s.nodes.iter().enumerate() {
        if node.kind != NodeKind::Switch {
            continue;
        }
        let i = i as u32;
        let mut n = 0u64;
        for &lid in owner.keys() {
            diff.entries_compared += 1;
            if entry(&live_lfts, i, lid) != entry(&our_lfts, i, lid) {
                n += 1;
                destinations.insert(lid);
            }
        }
        if n > 0 {
            diff.switches.push(SwitchDiff { guid: format!("{:#018x}", node.guid), description: node.description.to_string(), entries: n });
        }
        diff.entries_differ += n;
    }
    diff.switches.sort_by(|a, b| b.entries.cmp(&a.entries).then_with(|| a.guid.cmp(&b.guid)));
    diff.switches_differ = diff.switches.len();
    diff.destinations_differ = destinations.len();
    diff.percent = if diff.entries_compared == 0 { 0.0 } else { (diff.entries_differ as f64 * 1e5 / diff.entries_compared as f64).round() / 1e3 };
    let sources: Vec<(u32, u16, u8)> = end_ports(s).collect();
    for &(from, slid, _) in &sources {
        for &(_, dlid, _) in &sources {
            if dlid == slid {
                continue;
            }
            let a = walk(s, owner, &live_lfts, from, dlid);
            let b = walk(s, owner, &our_lfts, from, dlid);
            match (a, b) {
                (true, false) => diff.reachable_only_live += 1,
                (false, true) => diff.reachable_only_smcore += 1,
                _ => {}
            }
            if let Some(sl) = oracle.get(slid, dlid) {
                if ours.path_sl.path_sl(slid, dlid) != sl {
                    diff.sl_differ += 1;
                }
            }
        }
    }
    diff
}

/// The distinct partitions the P_Key tables hold (P_Key without the
/// membership bit), each with its full and limited member ports.
fn partitions(t: &LiveTables) -> Vec<String> {
    let mut by_key: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    for keys in t.pkeys.values() {
        for &k in keys {
            let slot = by_key.entry(k & 0x7fff).or_default();
            if k & 0x8000 != 0 {
                slot.0 += 1;
            } else {
                slot.1 += 1;
            }
        }
    }
    by_key.into_iter().map(|(k, (full, limited))| format!("{k:#06x}: {full} full, {limited} limited")).collect()
}

/// MLIDs whose switch-to-switch MFT edges close a cycle.
fn mcast_cycles(s: &FabricSnapshot, t: &LiveTables) -> Vec<String> {
    let mut by_mlid: BTreeMap<u16, Vec<(u32, u32)>> = BTreeMap::new();
    for (&node, table) in &t.mfts {
        let Some(n) = s.nodes.get(node as usize) else { continue };
        for (&mlid, &mask) in table {
            for port in 1..=n.num_ports {
                if mask & (1u64 << port) == 0 {
                    continue;
                }
                let Some(p) = s.ports.get((n.first_port + u32::from(port)) as usize) else { continue };
                let Some(peer) = s.ports.get(p.peer as usize) else { continue };
                if s.nodes.get(peer.node as usize).is_some_and(|m| m.kind == NodeKind::Switch) {
                    by_mlid.entry(mlid).or_default().push((node, peer.node));
                }
            }
        }
    }
    let mut cycles = Vec::new();
    for (mlid, edges) in by_mlid {
        // An MFT tree sends each link both ways: count undirected edges
        // once; a tree on k switches has k-1.
        let mut undirected: Vec<(u32, u32)> = edges.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
        undirected.sort_unstable();
        undirected.dedup();
        let mut parent: HashMap<u32, u32> = HashMap::new();
        fn root(parent: &mut HashMap<u32, u32>, x: u32) -> u32 {
            let mut r = x;
            while let Some(&p) = parent.get(&r) {
                if p == r {
                    break;
                }
                r = p;
            }
            parent.insert(x, r);
            r
        }
        let mut cyclic = false;
        for (a, b) in undirected {
            parent.entry(a).or_insert(a);
            parent.entry(b).or_insert(b);
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            if ra == rb {
                cyclic = true;
                break;
            }
            parent.insert(ra, rb);
        }
        if cyclic {
            cycles.push(format!("{mlid:#06x}"));
        }
    }
    cycles
}

impl ShadowReport {
    /// The report for people.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "fabric      {} switches, {} end ports, LIDs up to {}, LMC {}; master SM at LID {}",
            self.switches, self.end_ports, self.max_lid, self.lmc, self.master_lid
        );
        if self.unaddressed_ports > 0 {
            let _ = writeln!(o, "            {} ports without a LID", self.unaddressed_ports);
        }
        let r = &self.read;
        let _ = writeln!(
            o,
            "read        {} SubnGets, {} refused: {} LFTs ({} entries), {} SL2VL tables, {} VLArb ports, {} P_Key tables, {} MLIDs",
            r.gets, r.refused, r.lfts, r.lft_entries, r.sl2vl_tables, r.vlarb_ports, r.pkey_ports, r.mlids
        );
        if !r.unread.is_empty() {
            let list: Vec<String> = r.unread.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(o, "            unanswered: {}", list.join(", "));
        }
        if !r.partitions.is_empty() {
            let _ = writeln!(o, "partitions  {}", r.partitions.join("; "));
        }
        if !r.mcast_cycles.is_empty() {
            let _ = writeln!(o, "multicast   MFT cycles on MLIDs {}", r.mcast_cycles.join(", "));
        }
        let sls: Vec<String> = self.path_sl.by_sl.iter().map(|(sl, n)| format!("SL {sl}: {n}")).collect();
        let _ = writeln!(
            o,
            "path SLs    {}: {} pairs, {} known{}{}",
            self.path_sl.source,
            self.path_sl.pairs,
            self.path_sl.known,
            if sls.is_empty() { String::new() } else { format!(" ({})", sls.join(", ")) },
            self.path_sl.note.as_deref().map(|n| format!("; {n}")).unwrap_or_default()
        );
        let verdict = |o: &mut String, name: &str, v: &Verdict| {
            let loops = match v.credit_loops {
                Some(true) => "CREDIT LOOPS",
                Some(false) => "no credit loops",
                None => "credit loops not checked",
            };
            let _ = writeln!(
                o,
                "{name:<11} {}: {} pairs, {} unreachable, {} looping, {loops}, {} VLs, busiest link {} routes (mean {}), hops max {} mean {}",
                if v.sound() { "sound" } else { "UNSOUND" },
                v.pairs,
                v.unreachable,
                v.looping,
                v.vls_used,
                v.busiest_link,
                v.mean_link,
                v.max_hops,
                v.avg_hops
            );
            if let Some(c) = &v.credit_loop_example {
                let _ = writeln!(o, "            a cycle: {c}");
            }
            for e in v.examples.iter().take(3) {
                let _ = writeln!(o, "            {e}");
            }
        };
        verdict(&mut o, "live", &self.live);
        match (&self.smcore_engine, &self.smcore) {
            (Some(engine), Some(v)) => verdict(&mut o, &format!("smcore ({engine})"), v),
            _ => {
                let _ = writeln!(o, "smcore      no engine routed: {}", self.smcore_attempts.join("; "));
            }
        }
        if let Some(c) = &self.cabling {
            for line in c.render().lines() {
                let _ = writeln!(o, "cabling     {line}");
            }
        }
        if let Some(d) = &self.diff {
            let _ = writeln!(
                o,
                "difference  {} of {} LFT entries ({}%) on {} switches, {} destinations; reachable only live {}, only smcore {}; {} path SLs differ",
                d.entries_differ,
                d.entries_compared,
                d.percent,
                d.switches_differ,
                d.destinations_differ,
                d.reachable_only_live,
                d.reachable_only_smcore,
                d.sl_differ
            );
            for s in d.switches.iter().take(TEXT_SWITCHES) {
                let _ = writeln!(o, "            {} {:<24} {} entries", s.guid, crate::sweep::escaped(&s.description), s.entries);
            }
            if d.switches.len() > TEXT_SWITCHES {
                let _ = writeln!(o, "            ... {} more switches (--report FILE.json lists all)", d.switches.len() - TEXT_SWITCHES);
            }
        }
        o
    }

    /// Prometheus series (text exposition), for the metrics endpoint.
    pub fn prometheus(&self, rounds: u64) -> String {
        let mut o = String::new();
        let mut gauge = |name: &str, help: &str, rows: &[(&str, f64)]| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (labels, v) in rows {
                let _ = writeln!(o, "{name}{labels} {v}");
            }
        };
        gauge("smcore_shadow_rounds", "Shadow rounds completed.", &[("", rounds as f64)]);
        let both = |f: &dyn Fn(&Verdict) -> f64| -> Vec<(&'static str, f64)> {
            let mut rows = vec![("{routing=\"live\"}", f(&self.live))];
            if let Some(v) = &self.smcore {
                rows.push(("{routing=\"smcore\"}", f(v)));
            }
            rows
        };
        gauge("smcore_shadow_unreachable_pairs", "Pairs that never arrive.", &both(&|v| v.unreachable as f64));
        gauge("smcore_shadow_looping_pairs", "Pairs in a forwarding loop.", &both(&|v| v.looping as f64));
        gauge(
            "smcore_shadow_credit_loops",
            "1 when the channel dependencies have a cycle.",
            &both(&|v| if v.credit_loops == Some(true) { 1.0 } else { 0.0 }),
        );
        gauge("smcore_shadow_busiest_link_routes", "CA-to-CA routes over the busiest inter-switch link.", &both(&|v| v.busiest_link as f64));
        gauge("smcore_shadow_vls_used", "VLs the paths use.", &both(&|v| f64::from(v.vls_used)));
        if let Some(d) = &self.diff {
            gauge("smcore_shadow_lft_entries_differ", "LFT entries smcore would program otherwise.", &[("", d.entries_differ as f64)]);
            gauge("smcore_shadow_switches_differ", "Switches whose LFT smcore would change.", &[("", d.switches_differ as f64)]);
        }
        if let Some(c) = &self.cabling {
            let rows: Vec<(String, f64)> = c.counts().into_iter().map(|(k, n)| (format!("{{kind=\"{k}\"}}"), n as f64)).collect();
            let rows: Vec<(&str, f64)> = rows.iter().map(|(k, n)| (k.as_str(), *n)).collect();
            gauge("smcore_cabling_differences", "Differences from the intended cabling, by kind.", &rows);
        }
        gauge("smcore_shadow_read_gets", "SubnGets of the last round.", &[("", self.read.gets as f64)]);
        gauge("smcore_shadow_refused_mads", "MADs the read-only port refused (0 unless smcore has a bug).", &[("", self.read.refused as f64)]);
        gauge("smcore_shadow_unread", "Reads of the last round without a usable answer.", &[("", self.read.unread.values().sum::<u64>() as f64)]);
        o
    }
}
