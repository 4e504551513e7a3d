//! The Up/Down and Down/Up engines: OpenSM's `updn` and `dnup`.
//!
//! Both rank the switches, orient every link by rank (see [`rank`]) and
//! then route on least hops among the paths that climb first and only
//! descend afterwards, never climbing again once they went down (see
//! [`table`]). The LFTs come from the engine kit's port balancing, the
//! same as minhop's, LMC included. Such routes have no credit loops on any
//! topology, at the price of longer paths than min hop where the ranking
//! forbids a shortcut.
//!
//! * **updn** ranks from root switches: rank 0 for the roots, BFS distance
//!   from them for the rest. Roots come from `root_guid_file` (switch GUIDs,
//!   or CA GUIDs standing for their switch) or, without one, from OpenSM's
//!   detection on the CA hop histogram ([`roots::detect`]). No roots → the
//!   engine fails, so the chain falls through (OpenSM falls back to min hop).
//! * **dnup** ranks from the CAs: switches with a CA lowest, every other
//!   switch one more than its lowest-ranked neighbour; routes first move
//!   away from the CAs, then towards them. It suits fabrics with CAs on
//!   the spines, where updn's auto-detection finds nothing.
//!
//! Both fail with a reason when their ranking leaves two CA-attached
//! switches of one connected fabric without any legal route, rather than
//! handing the core tables with holes.

use std::path::PathBuf;

use serde::Deserialize;
use sm_abi::{EngineError, FabricSnapshot, Level, PreviousRouting, Routing, RoutingEngine, NONE};
use smcore_kit::continuity::{continue_routing, ContinuityOptions, Rule};
use smcore_kit::balance::{assign_lfts, routing_order, BalanceFiles, BalanceOptions};
use smcore_kit::config::{self, read_guid_list};
use smcore_kit::graph::{Graph, Sw};

pub mod rank;
pub mod roots;
pub mod table;

use rank::{Orientation, UNRANKED};
use table::UpDownHops;

/// updn options, named as OpenSM's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UpDnConfig {
    /// Root switches, one GUID a line (OpenSM `root_guid_file`, `-a`). A CA
    /// GUID stands for the switch it is cabled to. Without it roots are
    /// detected from the CA hop histogram.
    pub root_guid_file: Option<PathBuf>,
    /// Switch ids: lines `<switch guid> <id>`; between switches of equal
    /// rank the step towards the smaller id goes up (OpenSM `ids_guid_file`;
    /// without it the id is the GUID).
    pub ids_guid_file: Option<PathBuf>,
    /// The unicast manager's options updn shares with dnup.
    #[serde(flatten)]
    pub unicast: UnicastFiles,
}

/// dnup options, named as OpenSM's: updn's unicast manager options.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DnUpConfig {
    /// As updn's.
    #[serde(flatten)]
    pub unicast: UnicastFiles,
}

/// OpenSM's unicast manager options of updn and dnup (no hop weights: the
/// up/down rule decides the hops), as minhop reads them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UnicastFiles {
    /// Route the ports of these GUIDs first (OpenSM `guid_routing_order_file`).
    pub guid_routing_order_file: Option<PathBuf>,
    /// Switch ports left out of load equalisation: lines `<switch guid> <port>`
    /// (OpenSM `port_prof_ignore_file`, `-i`).
    pub port_prof_ignore_file: Option<PathBuf>,
    /// See `smcore_kit::balance::BalanceFiles::port_search_ordering_file`.
    pub port_search_ordering_file: Option<PathBuf>,
    /// See `smcore_kit::balance::BalanceFiles::port_shifting`.
    pub port_shifting: bool,
    /// See `smcore_kit::balance::BalanceFiles::scatter_ports`.
    pub scatter_ports: u32,
    /// See `smcore_kit::balance::BalanceFiles::guid_routing_order_no_scatter`.
    pub guid_routing_order_no_scatter: bool,
    /// See `smcore_kit::balance::BalanceFiles::port_profile_switch_nodes`.
    pub port_profile_switch_nodes: bool,
}

impl UnicastFiles {
    fn files(&self) -> BalanceFiles {
        BalanceFiles {
            guid_routing_order_file: self.guid_routing_order_file.clone(),
            port_prof_ignore_file: self.port_prof_ignore_file.clone(),
            port_search_ordering_file: self.port_search_ordering_file.clone(),
            hop_weights_file: None,
            port_shifting: self.port_shifting,
            scatter_ports: self.scatter_ports,
            guid_routing_order_no_scatter: self.guid_routing_order_no_scatter,
            port_profile_switch_nodes: self.port_profile_switch_nodes,
        }
    }
}

/// The updn engine.
#[derive(Debug, Clone, Default)]
pub struct UpDn {
    cfg: UpDnConfig,
    root_guids: Option<Vec<u64>>,
}

impl UpDn {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<UpDn, EngineError> {
        Ok(UpDn { cfg: config::parse("updn", text)?, root_guids: None })
    }

    /// Build from parsed options.
    pub fn new(cfg: UpDnConfig) -> UpDn {
        UpDn { cfg, root_guids: None }
    }

    /// Use these roots (switch or CA GUIDs, as in a root file) instead of
    /// the file or detection; for programs that drive the engine directly.
    pub fn with_root_guids(mut self, guids: Vec<u64>) -> UpDn {
        self.root_guids = Some(guids);
        self
    }

    /// The roots this engine would rank from, with the diagnostics the
    /// choice produced, or why there are none.
    pub fn roots(&self, fabric: &FabricSnapshot, graph: &Graph) -> Result<(Vec<Sw>, Notes), EngineError> {
        let mut notes = Notes::default();
        let mut unreadable = None;
        let named = if let Some(guids) = &self.root_guids {
            Some((roots::resolve(fabric, graph, guids, "root list"), guids.len(), "the root list".to_string()))
        } else if let Some(path) = &self.cfg.root_guid_file {
            match read_guid_list(path) {
                Ok(list) => {
                    notes.warn_all(list.warnings.iter().cloned());
                    let origin = path.display().to_string();
                    Some((roots::resolve(fabric, graph, &list.guids(), &origin), list.entries.len(), origin))
                }
                Err(e) => {
                    // OpenSM detects roots itself when it cannot parse the file.
                    notes.warn(format!("updn: {e}; detecting roots from the CA hop histogram instead"));
                    unreadable = Some(e.reason.to_string());
                    None
                }
            }
        } else {
            None
        };
        if let Some((named, read, origin)) = named {
            notes.warn_all(named.warnings);
            notes.info_all(named.notes);
            if named.roots.is_empty() {
                return Err(EngineError::new(format!(
                    "updn: no root switches: none of the {read} GUIDs in {origin} is a switch of this fabric or a CA cabled to one"
                )));
            }
            notes.info(format!("updn: {} from {origin}", describe_roots(fabric, graph, &named.roots)));
            return Ok((named.roots, notes));
        }
        let found = roots::detect(fabric, graph);
        if found.is_empty() {
            let why = match unreadable {
                Some(e) => format!("{e}, and "),
                None => "no root_guid_file is set and ".to_string(),
            };
            return Err(EngineError::new(format!(
                "updn: no root switches: {why}no switch sees a single hop distance for more than 90% of the CA ports \
                 with no other distance above 5% (OpenSM's root detection; typical of tori and irregular fabrics)"
            )));
        }
        notes.info(format!("updn: {} detected from the CA hop histogram", describe_roots(fabric, graph, &found)));
        Ok((found, notes))
    }
}

impl RoutingEngine for UpDn {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        self.route_after(fabric, None)
    }

    /// Continuity (sm-abi 1.3): an entry stays while its port is healthy and
    /// on a least-hop legal up/down path of the ranking as it is now; broken
    /// ones take the least loaded such port; routes move only off links
    /// above the fresh routing's busiest.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> Result<Routing, EngineError> {
        self.route_after(fabric, Some(previous))
    }
}

impl UpDn {
    fn route_after(&self, fabric: &FabricSnapshot, previous: Option<&PreviousRouting>) -> Result<Routing, EngineError> {
        let graph = Graph::new(fabric);
        if graph.switch_count() == 0 {
            return Err(EngineError::new("updn: the fabric has no switches"));
        }
        let shared = Shared::read(&self.cfg.unicast.files(), fabric, &graph)?;
        let (roots, mut notes) = self.roots(fabric, &graph)?;
        let ids = match &self.cfg.ids_guid_file {
            Some(path) => Some(read_ids(fabric, &graph, path, &mut notes)?),
            None => None,
        };
        let orient = rank::updn_with_ids(fabric, &graph, &roots, ids.as_deref());
        notes.info(format!("updn: switches ranked from the roots, highest rank {}", orient.max_rank()));
        let hint = format!(
            "ranked from {}; name roots in root_guid_file that every CA switch can climb to (a single root in each \
             connected part of the fabric always works)",
            describe_roots(fabric, &graph, &roots)
        );
        finish("updn", fabric, &graph, &orient, shared, notes, &hint, previous)
    }
}

/// The dnup engine.
#[derive(Debug, Clone, Default)]
pub struct DnUp {
    cfg: DnUpConfig,
}

impl DnUp {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<DnUp, EngineError> {
        Ok(DnUp { cfg: config::parse("dnup", text)? })
    }

    /// Build from parsed options.
    pub fn new(cfg: DnUpConfig) -> DnUp {
        DnUp { cfg }
    }
}

impl RoutingEngine for DnUp {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        self.route_after(fabric, None)
    }

    /// Continuity (sm-abi 1.3): as updn's, on the ranking from the CA
    /// switches.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> Result<Routing, EngineError> {
        self.route_after(fabric, Some(previous))
    }
}

impl DnUp {
    fn route_after(&self, fabric: &FabricSnapshot, previous: Option<&PreviousRouting>) -> Result<Routing, EngineError> {
        let graph = Graph::new(fabric);
        if graph.switch_count() == 0 {
            return Err(EngineError::new("dnup: the fabric has no switches"));
        }
        let shared = Shared::read(&self.cfg.unicast.files(), fabric, &graph)?;
        let leaves = rank::ca_switches(&graph);
        if leaves.is_empty() {
            return Err(EngineError::new(
                "dnup: no switch has a CA or router cabled to it, so there is nothing to rank from",
            ));
        }
        let orient = rank::dnup(fabric, &graph, &leaves);
        let mut notes = Notes::default();
        notes.info(format!(
            "dnup: {} switches with CAs ranked lowest, highest rank {}",
            leaves.len(),
            orient.max_rank()
        ));
        let hint = "the ranking from the CA switches leaves them without a common switch to climb to; \
                    updn with a root_guid_file naming one root reaches every pair";
        finish("dnup", fabric, &graph, &orient, shared, notes, hint, previous)
    }
}

/// Diagnostics gathered while routing.
#[derive(Debug, Default)]
pub struct Notes(pub Vec<(Level, String)>);

impl Notes {
    fn warn(&mut self, m: String) {
        self.0.push((Level::Warn, m));
    }
    fn warn_all(&mut self, ms: impl IntoIterator<Item = String>) {
        self.0.extend(ms.into_iter().map(|m| (Level::Warn, m)));
    }
    fn info(&mut self, m: String) {
        self.0.push((Level::Info, m));
    }
    fn info_all(&mut self, ms: impl IntoIterator<Item = String>) {
        self.0.extend(ms.into_iter().map(|m| (Level::Info, m)));
    }
}

/// Options both engines share with minhop, read before any routing work
/// so that a bad file fails fast.
struct Shared {
    guid_order: Vec<u64>,
    balance: BalanceOptions,
    notes: Notes,
}

impl Shared {
    fn read(files: &BalanceFiles, fabric: &FabricSnapshot, graph: &Graph) -> Result<Shared, EngineError> {
        let inputs = files.load(fabric)?;
        let mut notes = Notes::default();
        notes.warn_all(inputs.warnings.iter().cloned());
        let balance = inputs.options(fabric, graph, false);
        Ok(Shared { guid_order: inputs.guid_order, balance, notes })
    }
}

/// OpenSM's `ids_guid_file`: each switch's id (its GUID unless a line
/// `<switch guid> <id>` names it). Lines naming no switch of the fabric or
/// with a bad id are skipped with a warning naming file and line.
fn read_ids(fabric: &FabricSnapshot, graph: &Graph, path: &std::path::Path, notes: &mut Notes) -> Result<Vec<u64>, EngineError> {
    let list = read_guid_list(path)?;
    notes.warn_all(list.warnings.iter().cloned());
    let mut ids: Vec<u64> =
        graph.switch_nodes.iter().map(|&n| fabric.nodes[n as usize].guid).collect();
    let by_guid: std::collections::HashMap<u64, Sw> =
        graph.switch_nodes.iter().enumerate().map(|(s, &n)| (fabric.nodes[n as usize].guid, s as Sw)).collect();
    for ((guid, rest), line) in list.entries.iter().zip(&list.lines) {
        let at = format!("{}:{line}", path.display());
        let s = by_guid.get(guid).copied();
        let Some(s) = s else {
            notes.warn(format!("updn: {at}: switch 0x{guid:016x} not in the fabric, line ignored"));
            continue;
        };
        match rest.split_whitespace().next().and_then(config::parse_guid) {
            Some(id) => ids[s as usize] = id,
            None => notes.warn(format!("updn: {at}: bad id `{rest}`, line ignored")),
        }
    }
    Ok(ids)
}

/// Tables, reachability check, LFTs; continued from `previous` on a
/// re-route.
#[allow(clippy::too_many_arguments)]
fn finish(
    engine: &str,
    fabric: &FabricSnapshot,
    graph: &Graph,
    orient: &Orientation,
    shared: Shared,
    mut notes: Notes,
    hint: &str,
    previous: Option<&PreviousRouting>,
) -> Result<Routing, EngineError> {
    let (comp, sizes) = rank::components(graph);
    let hops = UpDownHops::build(graph, orient, &comp, &sizes);
    check_pairs(engine, fabric, graph, orient, &hops, &comp, hint)?;
    if hops.recomputed > 0 {
        notes.info(format!(
            "{engine}: {} destination switches routed down-only wherever possible, to keep every legal route",
            hops.recomputed
        ));
    }
    let order = routing_order(fabric, graph, &shared.guid_order);
    let lfts = assign_lfts(fabric, graph, &hops, &order, &shared.balance);
    let mut routing = Routing::single_vl(lfts);
    for (level, m) in shared.notes.0.into_iter().chain(notes.0) {
        routing.diag(level, m);
    }
    if let Some(previous) = previous {
        let opts = ContinuityOptions::default();
        routing = continue_routing(fabric, graph, previous, routing, &Rule::Hops(&hops), &opts, engine).0;
    }
    Ok(routing)
}

/// Every two switches with end ports in one connected part of the fabric
/// must have a route both ways; the up/down rule can forbid it when the
/// ranking has several tops.
fn check_pairs(
    engine: &str,
    fabric: &FabricSnapshot,
    graph: &Graph,
    orient: &Orientation,
    hops: &UpDownHops,
    comp: &[u32],
    hint: &str,
) -> Result<(), EngineError> {
    let mut with_hosts: Vec<Sw> =
        graph.end_ports.iter().map(|&p| graph.entry_switch(fabric, p)).filter(|&s| s != NONE).collect();
    with_hosts.sort_unstable();
    with_hosts.dedup();
    let mut missing = 0u64;
    let mut pairs = 0u64;
    let mut example = None;
    for &t in &with_hosts {
        for &s in &with_hosts {
            if s == t || comp[s as usize] != comp[t as usize] {
                continue;
            }
            pairs += 1;
            if !hops.reaches(s, t) {
                missing += 1;
                example.get_or_insert((s, t));
            }
        }
    }
    let Some((s, t)) = example else {
        return Ok(());
    };
    let unranked = with_hosts.iter().filter(|&&s| orient.rank[s as usize] == UNRANKED).count();
    let extra = if unranked > 0 {
        format!("; {unranked} of them are in a part of the fabric the ranking never reached (no root there)")
    } else {
        String::new()
    };
    Err(EngineError::new(format!(
        "{engine}: the up/down rule leaves {missing} of {pairs} ordered pairs of CA switches without a legal route \
         (e.g. from {} to {}){extra}: {hint}",
        describe(fabric, graph, s),
        describe(fabric, graph, t)
    )))
}

fn describe(fabric: &FabricSnapshot, graph: &Graph, s: Sw) -> String {
    let n = &fabric.nodes[graph.switch_nodes[s as usize] as usize];
    format!("0x{:016x} \"{}\"", n.guid, n.description)
}

fn describe_roots(fabric: &FabricSnapshot, graph: &Graph, roots: &[Sw]) -> String {
    const SHOWN: usize = 8;
    let mut list: Vec<String> = roots
        .iter()
        .take(SHOWN)
        .map(|&r| format!("0x{:016x}", fabric.nodes[graph.switch_nodes[r as usize] as usize].guid))
        .collect();
    if roots.len() > SHOWN {
        list.push(format!("and {} more", roots.len() - SHOWN));
    }
    let noun = if roots.len() == 1 { "root" } else { "roots" };
    format!("{} {noun} ({})", roots.len(), list.join(", "))
}

sm_abi::export_engines! {
    "updn" => {
        summary: "OpenSM Up/Down: min hop under the up/down rule from root switches (file or auto-detected), credit-loop free",
        deadlock_free: true,
        create: UpDn::from_config,
    },
    "dnup" => {
        summary: "OpenSM Down/Up: up/down ranked from the CA switches, for fabrics with CAs near the roots, credit-loop free",
        deadlock_free: true,
        create: DnUp::from_config,
    },
}
