//! OpenSM's LFT port selection: for every switch and every target LID, pick
//! among the ports on a least-hop path the one that carries the fewest routes
//! so far, with OpenSM's LMC refinements (prefer a neighbour in another
//! system, then another node) and its target order. The hop counts come from
//! a [`HopTable`], so min-hop, up/down and dimension-ordered engines share
//! this code and differ only in which paths they allow.

use std::path::PathBuf;

use rayon::prelude::*;
use serde::Deserialize;
use sm_abi::{EngineError, FabricSnapshot, Lft, NodeKind, NO_ROUTE, NONE};

use crate::cache::prefetch_ahead;
use crate::config::read_guid_list;
use crate::graph::{by_distance, DistanceMatrix, Graph, Sw, SwPort};

/// Hop counts an engine allows between switches.
pub trait HopTable: Sync {
    /// Least hops from switch `s` to switch `t`, `u8::MAX` when `t` cannot be
    /// reached from `s`.
    fn least(&self, s: Sw, t: Sw) -> u8;
    /// Hops from `s` to `t` when leaving `s` through `link` (whose peer is a
    /// switch); `u8::MAX` when that is not allowed.
    fn via(&self, s: Sw, link: &SwPort, t: Sw) -> u8;

    /// For every switch `t`, bit `j % 8` of `planes[(j / 8) * n + t]` (`n`
    /// switches, so `planes` holds `links.len().div_ceil(8)` byte planes
    /// of `n` bytes) set when `links[j]` lies on a least-hop path from `s`
    /// to `t`. Tables with row access override this with a vectorisable
    /// loop.
    fn candidate_masks(&self, s: Sw, links: &[SwPort], planes: &mut [u8]) {
        planes.fill(0);
        let n = planes.len() / links.len().div_ceil(8).max(1);
        for t in 0..n {
            let least = self.least(s, t as Sw);
            if least == u8::MAX {
                continue;
            }
            for (j, l) in links.iter().enumerate() {
                if self.via(s, l, t as Sw) == least {
                    planes[(j / 8) * n + t] |= 1 << (j % 8);
                }
            }
        }
    }
}

/// Unconstrained shortest paths.
/// (The matrix is symmetric; reading row `t` keeps a target's lookups in
/// one cache-friendly row.)
impl HopTable for DistanceMatrix {
    #[inline]
    fn least(&self, s: Sw, t: Sw) -> u8 {
        self.to(t)[s as usize]
    }
    #[inline]
    fn via(&self, _s: Sw, link: &SwPort, t: Sw) -> u8 {
        self.to(t)[link.peer_sw as usize].saturating_add(1)
    }

    fn candidate_masks(&self, s: Sw, links: &[SwPort], planes: &mut [u8]) {
        let own = self.to(s);
        let n = self.len();
        // Eight links a plane, so that each pass over the rows works on
        // bytes only (vectorised to a byte per lane).
        for (group, plane) in links.chunks(8).zip(planes.chunks_mut(n)) {
            plane.fill(0);
            for (k, l) in group.iter().enumerate() {
                let peer = self.to(l.peer_sw);
                let bit = 1u8 << k;
                for ((m, &ds), &dp) in plane.iter_mut().zip(own).zip(peer) {
                    // On a least-hop path: one hop closer, and `t` reachable.
                    let hit = (dp.wrapping_add(1) == ds) & (ds != u8::MAX);
                    *m |= bit & (hit as u8).wrapping_neg();
                }
            }
        }
    }
}

/// Options of the port selection.
#[derive(Debug, Clone, Default)]
pub struct BalanceOptions {
    /// DOR mode: among least-hop ports use only those leading to the same
    /// neighbour as the first one in search order (spreading only over
    /// parallel links). With LMC > 0 it also follows OpenSM's DOR rules for
    /// a port's later LIDs: each is searched from position 1 like the first,
    /// and among equally loaded parallel links the far end this port's LIDs
    /// went to least wins, one not used yet counting as 0.
    pub dor: bool,
    /// Per switch (by switch number), the order in which ports are searched
    /// (OpenSM's `port_order` / dimension ordering); `None` = port order.
    pub search_order: Option<Vec<Vec<u8>>>,
    /// Ports (node index, port number) left out of the route counting.
    pub ignored_ports: Vec<(u32, u8)>,
    /// OpenSM's `port_shifting`: among the least-hop ports of a LID, the
    /// scan for the least loaded one starts at candidate `(routes on all
    /// candidates / candidates)` instead of the first, so that LIDs do not
    /// line up on the same port number in every switch.
    pub port_shifting: bool,
    /// OpenSM's `scatter_ports`: when not 0, a target's first LID goes
    /// through a port drawn at random among its equally least loaded
    /// least-hop ports, from a generator seeded with this value (and the
    /// switch's GUID, so that every switch draws its own sequence whatever
    /// order the switches are routed in); the same seed gives the same
    /// tables.
    pub scatter_ports: u32,
    /// Targets (port indices, sorted) never scattered: the ports of the
    /// GUID routing order under OpenSM's `guid_routing_order_no_scatter`.
    pub no_scatter: Vec<u32>,
    /// OpenSM's `port_profile_switch_nodes`: routes to switch LIDs count
    /// in a port's load too (by default only routes to end ports do).
    pub port_profile_switch_nodes: bool,
}

/// OpenSM's options of the engines sharing this LFT builder, keyed as in
/// the engine's TOML options (other keys are left to their owners).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct BalanceFiles {
    /// Route the ports of these GUIDs first (OpenSM `guid_routing_order_file`).
    pub guid_routing_order_file: Option<PathBuf>,
    /// Switch ports left out of load equalisation: lines `<switch guid> <port>`
    /// (OpenSM `port_prof_ignore_file`, `-i`).
    pub port_prof_ignore_file: Option<PathBuf>,
    /// Per switch, the ports searched first, in this order: lines
    /// `<switch guid> <port> <port> ...`, the ports not named following in
    /// port order (OpenSM `port_search_ordering_file`, also read as
    /// `dimn_ports_file`; for DOR the order of the dimensions).
    pub port_search_ordering_file: Option<PathBuf>,
    /// Switch ports counted as more than one hop: lines `<switch guid>
    /// <port> <weight 1..255>` (OpenSM `hop_weights_file`).
    pub hop_weights_file: Option<PathBuf>,
    /// See [`BalanceOptions::port_shifting`] (OpenSM `port_shifting`).
    pub port_shifting: bool,
    /// See [`BalanceOptions::scatter_ports`] (OpenSM `scatter_ports`).
    pub scatter_ports: u32,
    /// The ports of the GUID routing order are not scattered (OpenSM
    /// `guid_routing_order_no_scatter`).
    pub guid_routing_order_no_scatter: bool,
    /// See [`BalanceOptions::port_profile_switch_nodes`].
    pub port_profile_switch_nodes: bool,
}

/// What [`BalanceFiles`] say about one fabric.
#[derive(Debug, Clone, Default)]
pub struct BalanceInputs {
    /// GUIDs for [`routing_order`].
    pub guid_order: Vec<u64>,
    /// For [`BalanceOptions::ignored_ports`].
    pub ignored_ports: Vec<(u32, u8)>,
    /// Search orders by switch node index: position → port number, port 0
    /// at position 0 (see [`BalanceInputs::options`]).
    pub search_orders: Vec<(u32, Vec<u8>)>,
    /// Hop weight factors (node index, port, weight) for
    /// [`crate::weights::WeightedHops`].
    pub hop_weights: Vec<(u32, u8, u8)>,
    /// [`BalanceFiles::port_shifting`], passed through.
    pub port_shifting: bool,
    /// [`BalanceFiles::scatter_ports`], passed through.
    pub scatter_ports: u32,
    /// [`BalanceFiles::guid_routing_order_no_scatter`], passed through.
    pub guid_routing_order_no_scatter: bool,
    /// [`BalanceFiles::port_profile_switch_nodes`], passed through.
    pub port_profile_switch_nodes: bool,
    /// Lines that were skipped, for `Routing::diag`: OpenSM goes on without
    /// them, and so do we.
    pub warnings: Vec<String>,
}

impl BalanceFiles {
    /// Read the files named. Fails only when one cannot be read.
    pub fn load(&self, fabric: &FabricSnapshot) -> Result<BalanceInputs, EngineError> {
        let mut inputs = BalanceInputs::default();
        if let Some(p) = &self.guid_routing_order_file {
            let list = read_guid_list(p)?;
            inputs.warnings.extend(list.warnings.iter().cloned());
            inputs.guid_order = list.guids();
        }
        if let Some(p) = &self.port_prof_ignore_file {
            let list = read_guid_list(p)?;
            inputs.warnings.extend(list.warnings.iter().cloned());
            for (guid, rest) in &list.entries {
                let node = fabric.nodes.iter().position(|n| n.guid == *guid);
                match (node, rest.trim().parse::<u8>()) {
                    (Some(n), Ok(port)) => inputs.ignored_ports.push((n as u32, port)),
                    (None, _) => inputs.warnings.push(format!("{}: switch 0x{guid:016x} not in the fabric", p.display())),
                    (_, Err(_)) => inputs.warnings.push(format!("{}: bad port `{rest}` for 0x{guid:016x}", p.display())),
                }
            }
        }
        let switches: std::collections::HashMap<u64, u32> = if self.port_search_ordering_file.is_some() || self.hop_weights_file.is_some() {
            fabric.switches().map(|n| (fabric.nodes[n as usize].guid, n)).collect()
        } else {
            Default::default()
        };
        if let Some(p) = &self.port_search_ordering_file {
            let mut listed = std::collections::HashSet::new();
            for (at, n, rest) in switch_lines(p, &switches, &mut inputs.warnings)? {
                if !listed.insert(n) {
                    let guid = fabric.nodes[n as usize].guid;
                    inputs.warnings.push(format!("{at}: switch 0x{guid:016x} listed before, line ignored"));
                    continue;
                }
                match search_order(fabric, n, &rest) {
                    Ok(Some(order)) => inputs.search_orders.push((n, order)),
                    Ok(None) => {}
                    Err(e) => inputs.warnings.push(format!("{at}: {e}, line ignored")),
                }
            }
        }
        if let Some(p) = &self.hop_weights_file {
            for (at, n, rest) in switch_lines(p, &switches, &mut inputs.warnings)? {
                let num_ports = fabric.nodes[n as usize].num_ports as u64;
                let words: Vec<&str> = rest.split_whitespace().collect();
                let port = words.first().and_then(|w| crate::config::parse_guid(w)).filter(|&p| p >= 1 && p <= num_ports);
                let weight = words.get(1).and_then(|w| crate::config::parse_guid(w)).filter(|&w| (1..=255).contains(&w));
                match (port, weight) {
                    (Some(port), Some(w)) => inputs.hop_weights.push((n, port as u8, w as u8)),
                    (None, _) => inputs.warnings.push(format!("{at}: bad port in `{rest}` (1..{num_ports}), line ignored")),
                    (_, None) => inputs.warnings.push(format!("{at}: bad hop weight in `{rest}` (1..255), line ignored")),
                }
            }
        }
        inputs.port_shifting = self.port_shifting;
        inputs.scatter_ports = self.scatter_ports;
        inputs.guid_routing_order_no_scatter = self.guid_routing_order_no_scatter;
        inputs.port_profile_switch_nodes = self.port_profile_switch_nodes;
        Ok(inputs)
    }
}

/// One line of a port search ordering file for switch node `n`: the ports
/// named (each 1..num_ports, once), then the others in port order, port 0
/// at position 0; `None` when the line names no port.
/// The lines of the GUID list at `p` naming a switch of `switches`, as
/// (`file:line`, switch node, what follows the GUID); the list's own
/// warnings, and one per GUID that is no switch of the fabric, go to
/// `warnings`.
fn switch_lines(
    p: &std::path::Path,
    switches: &std::collections::HashMap<u64, u32>,
    warnings: &mut Vec<String>,
) -> Result<Vec<(String, u32, String)>, EngineError> {
    let list = read_guid_list(p)?;
    warnings.extend(list.warnings.iter().cloned());
    let mut lines = Vec::with_capacity(list.entries.len());
    for ((guid, rest), line) in list.entries.into_iter().zip(list.lines) {
        let at = format!("{}:{line}", p.display());
        match switches.get(&guid) {
            Some(&n) => lines.push((at, n, rest)),
            None => warnings.push(format!("{at}: switch 0x{guid:016x} not in the fabric, line ignored")),
        }
    }
    Ok(lines)
}

fn search_order(fabric: &FabricSnapshot, n: u32, rest: &str) -> Result<Option<Vec<u8>>, String> {
    let num_ports = fabric.nodes[n as usize].num_ports as usize + 1;
    let mut seen = vec![false; num_ports];
    let mut order = vec![0u8];
    for word in rest.split_whitespace() {
        let port = crate::config::parse_guid(word)
            .filter(|&p| p >= 1 && (p as usize) < num_ports)
            .ok_or_else(|| format!("bad port `{word}` (1..{})", num_ports - 1))? as usize;
        if seen[port] {
            return Err(format!("port {port} named twice"));
        }
        seen[port] = true;
        order.push(port as u8);
    }
    if order.len() == 1 {
        return Ok(None);
    }
    order.extend((1..num_ports).filter(|&p| !seen[p]).map(|p| p as u8));
    Ok(Some(order))
}

impl BalanceInputs {
    /// The port selection's options on `graph`: ignored ports, search
    /// orders by switch number, shifting and scatter (with the GUID routing
    /// order's ports left out of the scatter under
    /// `guid_routing_order_no_scatter`). `dor` as [`BalanceOptions::dor`].
    pub fn options(&self, fabric: &FabricSnapshot, graph: &Graph, dor: bool) -> BalanceOptions {
        let search_order = (!self.search_orders.is_empty()).then(|| {
            let mut orders = vec![Vec::new(); graph.switch_count()];
            for (n, order) in &self.search_orders {
                let s = graph.sw_of_node[*n as usize];
                if s != NONE {
                    orders[s as usize] = order.clone();
                }
            }
            orders
        });
        let mut no_scatter = Vec::new();
        if self.guid_routing_order_no_scatter && self.scatter_ports != 0 {
            let listed: std::collections::HashSet<u64> = self.guid_order.iter().copied().collect();
            no_scatter = fabric
                .ports
                .iter()
                .enumerate()
                .filter(|(_, p)| p.lid != 0 && listed.contains(&p.guid))
                .map(|(i, _)| i as u32)
                .collect();
        }
        BalanceOptions {
            dor,
            search_order,
            ignored_ports: self.ignored_ports.clone(),
            port_shifting: self.port_shifting,
            scatter_ports: self.scatter_ports,
            no_scatter,
            port_profile_switch_nodes: self.port_profile_switch_nodes,
        }
    }

    /// The hop table with the file's weights, `None` without weights.
    pub fn weighted_hops(&self, fabric: &FabricSnapshot, graph: &Graph) -> Option<crate::weights::WeightedHops> {
        (!self.hop_weights.is_empty()).then(|| crate::weights::WeightedHops::new(fabric, graph, &self.hop_weights))
    }
}

/// Targets in OpenSM's routing order: the ports named by the GUID routing
/// order (in that order), then end ports grouped by the switch they hang
/// off (switches with more end ports first, ties in GUID order), then every
/// other port with a LID in port GUID order. Returns port indices.
pub fn routing_order(fabric: &FabricSnapshot, graph: &Graph, guid_order: &[u64]) -> Vec<u32> {
    let mut taken = vec![false; fabric.ports.len()];
    let mut order = Vec::new();
    // Ports with a LID, addressable by GUID.
    let mut lid_ports: Vec<u32> = fabric
        .ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.lid != 0)
        .map(|(i, _)| i as u32)
        .collect();
    lid_ports.sort_by_key(|&i| (fabric.ports[i as usize].guid, i));
    for guid in guid_order {
        if let Ok(pos) = lid_ports.binary_search_by_key(guid, |&i| fabric.ports[i as usize].guid) {
            let pi = lid_ports[pos];
            if !taken[pi as usize] {
                taken[pi as usize] = true;
                order.push(pi);
            }
        }
    }
    let mut sws: Vec<Sw> = (0..graph.switch_count() as Sw).collect();
    let end_links = |s: Sw| graph.sw_ports[s as usize].iter().filter(|l| l.peer_sw == NONE).count();
    sws.sort_by(|&a, &b| {
        let ga = fabric.nodes[graph.switch_nodes[a as usize] as usize].guid;
        let gb = fabric.nodes[graph.switch_nodes[b as usize] as usize].guid;
        end_links(b).cmp(&end_links(a)).then(ga.cmp(&gb))
    });
    for s in sws {
        for link in &graph.sw_ports[s as usize] {
            let pi = link.peer_port;
            if link.peer_sw == NONE && fabric.ports[pi as usize].lid != 0 && !taken[pi as usize] {
                taken[pi as usize] = true;
                order.push(pi);
            }
        }
    }
    for pi in lid_ports {
        if !taken[pi as usize] {
            taken[pi as usize] = true;
            order.push(pi);
        }
    }
    order
}

/// A neighbour already used by an earlier LID of the same target (LMC).
#[derive(Clone, Copy)]
struct Remote {
    node: u32,
    port: u8,
    forwarded_to: u32,
}

/// Compute one LFT per switch.
pub fn assign_lfts<H: HopTable>(
    fabric: &FabricSnapshot,
    graph: &Graph,
    hops: &H,
    order: &[u32],
    opts: &BalanceOptions,
) -> Vec<Lft> {
    let targets = targets(fabric, graph, order);
    // Shifting and scatter decide LID by LID: the general pass.
    let plain = !opts.port_shifting && opts.scatter_ports == 0 && !opts.port_profile_switch_nodes;
    let runs = (fabric.lmc == 0 && plain).then(|| Runs::new(&targets, fabric.max_lid));
    (0..graph.switch_count() as Sw)
        .into_par_iter()
        .map(|s| {
            let ports = match &runs {
                Some(runs) => assign_switch_runs(fabric, &SwitchLinks::new(fabric, graph, hops, opts, s), runs, opts.dor, s),
                None => assign_switch(fabric, graph, hops, &targets, opts, s),
            };
            Lft { node: graph.switch_nodes[s as usize], ports: ports.into() }
        })
        .collect()
}

/// Min-hop tables for `fabric` with the default options and OpenSM's
/// routing order: what the minhop engine returns unconfigured. For tests
/// that hold an engine against min hop (two engine libraries cannot be
/// linked into one binary: both export the ABI root module).
pub fn min_hop_lfts(fabric: &FabricSnapshot) -> Vec<Lft> {
    let graph = Graph::new(fabric);
    let order = routing_order(fabric, &graph, &[]);
    assign_lfts(fabric, &graph, &graph.distance_matrix(), &order, &BalanceOptions::default())
}

/// A routing target, flattened once so that every switch's pass over the
/// order list reads one compact array.
#[derive(Clone, Copy)]
struct Target {
    /// Port index of the target.
    port: u32,
    base_lid: u16,
    lid_count: u16,
    /// Switch the target is on or hangs off (NONE: not attached).
    t: Sw,
    /// Port of `t` the target is on (0 for a switch's own LID).
    t_port: u8,
    is_switch: bool,
}

fn targets(fabric: &FabricSnapshot, graph: &Graph, order: &[u32]) -> Vec<Target> {
    order
        .iter()
        .map(|&pi| {
            let p = &fabric.ports[pi as usize];
            let is_switch = fabric.nodes[p.node as usize].kind == NodeKind::Switch;
            let (t, t_port) = if is_switch {
                (graph.sw_of_node[p.node as usize], 0)
            } else if p.peer == NONE {
                (NONE, 0)
            } else {
                let peer = &fabric.ports[p.peer as usize];
                (graph.sw_of_node[peer.node as usize], peer.num)
            };
            Target { port: pi, base_lid: p.lid, lid_count: p.lid_count().min(u16::MAX as u32) as u16, t, t_port, is_switch }
        })
        .collect()
}

/// One switch's view for the port selection: its switch links in OpenSM's
/// scan order and their least-hop masks towards every switch.
struct SwitchLinks {
    /// OpenSM's `num_ports` (port 0 included).
    num_ports: usize,
    /// Switch-to-switch links (the only possible least-hop candidates)
    /// with their search position, in scan order from position 1.
    links: Vec<(usize, SwPort)>,
    /// Least-hop candidates towards every switch as bit masks over
    /// `links`, in byte planes (see [`HopTable::candidate_masks`]; a
    /// switch has at most 255 ports, so at most 32 planes).
    planes: Vec<u8>,
    n: usize,
    /// Ports left out of the counting.
    ignored: Vec<bool>,
}

impl SwitchLinks {
    fn new<H: HopTable>(fabric: &FabricSnapshot, graph: &Graph, hops: &H, opts: &BalanceOptions, s: Sw) -> SwitchLinks {
        let node_idx = graph.switch_nodes[s as usize];
        let node = &fabric.nodes[node_idx as usize];
        let num_ports = node.num_ports as usize + 1;
        let mut by_num: Vec<Option<SwPort>> = vec![None; num_ports];
        for l in &graph.sw_ports[s as usize] {
            by_num[l.port as usize] = Some(*l);
        }
        let search: Vec<u8> = match &opts.search_order {
            Some(orders) if orders.get(s as usize).is_some_and(|o| o.len() == num_ports) => orders[s as usize].clone(),
            // Every port but 255, the LFT's "no route" (a port number
            // `as u8` would wrap to an empty range on a 255-port switch).
            _ => (0..num_ports.min(usize::from(NO_ROUTE))).map(|p| p as u8).collect(),
        };
        // OpenSM scans positions 1, 2, ..., then position 0 last.
        let mut links: Vec<(usize, SwPort)> = search
            .iter()
            .enumerate()
            .filter_map(|(pos, &num)| by_num.get(num as usize).copied().flatten().map(|l| (pos, l)))
            .filter(|(_, l)| l.port != 0 && l.peer_sw != NONE)
            .collect();
        links.sort_by_key(|&(pos, _)| (pos + num_ports - 1) % num_ports);
        let n = graph.switch_count();
        let mut planes: Vec<u8> = vec![0; n * links.len().div_ceil(8)];
        if !links.is_empty() {
            let link_list: Vec<SwPort> = links.iter().map(|&(_, l)| l).collect();
            hops.candidate_masks(s, &link_list, &mut planes);
        }
        let mut ignored = vec![false; num_ports];
        for &(n, p) in &opts.ignored_ports {
            if n == node_idx && (p as usize) < num_ports {
                ignored[p as usize] = true;
            }
        }
        SwitchLinks { num_ports, links, planes, n, ignored }
    }
}

impl SwitchLinks {
    /// The least-hop links towards switch `t`, as a bit mask over `links`.
    #[inline]
    fn mask(&self, t: Sw) -> [u64; 4] {
        let mut mask = [0u64; 4];
        for (p, plane) in self.planes.chunks(self.n).enumerate() {
            mask[p / 8] |= u64::from(plane[t as usize]) << (8 * (p % 8));
        }
        mask
    }

    /// The port of the first link of `mask` (in DOR mode, among those to
    /// the first one's neighbour) with the fewest routes; [`NO_ROUTE`]
    /// for an empty mask.
    fn least_counted(&self, mask: &[u64; 4], counts: &[u32], dor: bool) -> u8 {
        let mut first_remote = NONE;
        let mut best: Option<u8> = None;
        for (w, &word) in mask.iter().enumerate() {
            for b in crate::cdg::bits(word) {
                let link = self.links[w * 64 + b as usize].1;
                if dor_admits(dor, &mut first_remote, &link)
                    && best.is_none_or(|p| counts[link.port as usize] < counts[p as usize])
                {
                    best = Some(link.port);
                }
            }
        }
        best.unwrap_or(NO_ROUTE)
    }
}

/// The least-hop candidates towards the current destination switch, as
/// positions in the search order, kept while consecutive targets share
/// the switch or its mask.
struct Candidates {
    t: Sw,
    mask: [u64; 4],
    list: Vec<(usize, SwPort)>,
}

impl Candidates {
    fn new(num_ports: usize) -> Candidates {
        Candidates { t: NONE, mask: [0; 4], list: Vec::with_capacity(num_ports) }
    }

    /// Point at destination switch `t`; true when the set changed.
    fn update(&mut self, sl: &SwitchLinks, t: Sw, dor: bool) -> bool {
        if t == self.t {
            return false;
        }
        self.t = t;
        let mask = sl.mask(t);
        if mask == self.mask {
            return false;
        }
        self.mask = mask;
        self.list.clear();
        let mut first_remote = NONE;
        for (w, &word) in mask.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let (pos, link) = sl.links[w * 64 + bits.trailing_zeros() as usize];
                bits &= bits - 1;
                if dor_admits(dor, &mut first_remote, &link) {
                    self.list.push((pos, link));
                }
            }
        }
        true
    }
}

/// Without LMC, the targets cut into runs sharing their switch and kind
/// (end port or switch), so that a switch's pass handles a run at once.
struct Runs {
    runs: Vec<Run>,
    /// Target LIDs in routing order, and the port of its switch each is on.
    lids: Vec<u16>,
    t_ports: Vec<u8>,
}

#[derive(Clone, Copy)]
struct Run {
    t: Sw,
    /// Routes to end ports are counted; to switches not.
    counted: bool,
    start: u32,
    end: u32,
}

impl Runs {
    fn new(targets: &[Target], max_lid: u16) -> Runs {
        let mut r = Runs { runs: Vec::new(), lids: Vec::with_capacity(targets.len()), t_ports: Vec::with_capacity(targets.len()) };
        for tg in targets {
            if tg.t == NONE || tg.base_lid > max_lid || tg.lid_count == 0 {
                continue;
            }
            let at = r.lids.len() as u32;
            r.lids.push(tg.base_lid);
            r.t_ports.push(tg.t_port);
            match r.runs.last_mut() {
                Some(run) if run.t == tg.t && run.counted == !tg.is_switch => run.end = at + 1,
                _ => r.runs.push(Run { t: tg.t, counted: !tg.is_switch, start: at, end: at + 1 }),
            }
        }
        r
    }
}

/// OpenSM's choice without LMC, a run of targets at a time: fewest routes,
/// first in scan order. The scan always starts at position 1 (the order of
/// the candidates), so the candidates are kept sorted by (routes, scan
/// position), packed as `routes << 8 | index` in `queue[head..]`: the
/// choice is the front, and its new key goes back in from the rear, which
/// in the usual round-robin state is where it belongs. The order is
/// rebuilt whenever the candidate set changes (counts of its ports change
/// only through choices made from it: routes to end ports on this switch
/// use host ports, routes to switches are not counted).
fn assign_switch_runs(fabric: &FabricSnapshot, sl: &SwitchLinks, runs: &Runs, dor: bool, s: Sw) -> Vec<u8> {
    let mut counts = vec![0u32; sl.num_ports];
    let mut lft = vec![NO_ROUTE; fabric.max_lid as usize + 1];
    let mut cand = Candidates::new(sl.num_ports);
    let mut ports: Vec<u8> = Vec::with_capacity(sl.num_ports);
    let mut queue: Vec<u32> = Vec::with_capacity(8 * sl.num_ports);
    let mut head = 0usize;
    let mut queue_valid = false;
    // The last uncounted choice, its mask, and whether a count changed since.
    let (mut light_mask, mut light_port, mut light_stale) = ([0u64; 4], NO_ROUTE, true);
    for run in &runs.runs {
        let range = run.start as usize..run.end as usize;
        let lids = &runs.lids[range.clone()];
        if run.t == s {
            // The switch's own LID, or end ports on this switch: only one
            // way to go.
            for (&lid, &tp) in lids.iter().zip(&runs.t_ports[range]) {
                lft[lid as usize] = tp;
                if run.counted && !sl.ignored[tp as usize] {
                    counts[tp as usize] += 1;
                }
            }
            continue;
        }
        if !run.counted {
            // Routes to switches change no count: the least loaded
            // candidate, first in scan order, straight from the mask
            // (switch LIDs come one by one, towards ever other switches,
            // and rebuilding the queue for each would cost more), kept
            // while the mask and the counts stay.
            let mask = sl.mask(run.t);
            if mask != light_mask || light_stale {
                light_mask = mask;
                light_stale = false;
                light_port = sl.least_counted(&mask, &counts, dor);
            }
            if light_port != NO_ROUTE {
                for &lid in lids {
                    lft[lid as usize] = light_port;
                }
            }
            continue;
        }
        light_stale = true;
        if cand.update(sl, run.t, dor) {
            queue_valid = false;
            ports.clear();
            ports.extend(cand.list.iter().map(|&(_, l)| l.port));
        }
        if ports.is_empty() {
            continue;
        }
        if !queue_valid || head >= queue.len() {
            queue.clear();
            head = 0;
            queue.extend(ports.iter().enumerate().map(|(i, &p)| counts[p as usize] << 8 | i as u32));
            queue.sort_unstable();
            queue_valid = true;
        } else if head > 4 * ports.len() {
            queue.drain(..head);
            head = 0;
        }
        for &lid in lids {
            let key = queue[head];
            head += 1;
            let port = ports[(key & 0xFF) as usize];
            let counted = !sl.ignored[port as usize];
            let key = key + ((counted as u32) << 8);
            if queue.last().is_none_or(|&last| last < key) || queue.len() == head {
                queue.push(key);
            } else {
                let mut at = queue.len();
                while at > head && queue[at - 1] > key {
                    at -= 1;
                }
                queue.insert(at, key);
            }
            lft[lid as usize] = port;
            if counted {
                counts[port as usize] += 1;
            }
        }
    }
    lft
}

fn assign_switch<H: HopTable>(
    fabric: &FabricSnapshot,
    graph: &Graph,
    hops: &H,
    targets: &[Target],
    opts: &BalanceOptions,
    s: Sw,
) -> Vec<u8> {
    let sl = SwitchLinks::new(fabric, graph, hops, opts, s);
    let num_ports = sl.num_ports;
    let ignored = &sl.ignored;
    // With LMC, OpenSM scans from a rotating start and prefers other
    // systems and nodes for a port's later LIDs: one target at a time.
    let mut remotes: Vec<Vec<Remote>> = vec![Vec::new(); targets.len()];
    let mut counts = vec![0u32; num_ports];
    let mut lft = vec![NO_ROUTE; fabric.max_lid as usize + 1];
    let mut cand = Candidates::new(num_ports);
    let mut ordered: Vec<(usize, SwPort)> = Vec::with_capacity(num_ports);
    let mut scan: Vec<SwPort> = Vec::with_capacity(num_ports);
    let mut rng = Scatter::new(opts.scatter_ports, fabric.nodes[graph.switch_nodes[s as usize] as usize].guid);
    for offset in 0..(1u16 << fabric.lmc) {
        for (oi, tg) in targets.iter().enumerate() {
            if offset >= tg.lid_count {
                continue;
            }
            let lid = tg.base_lid as usize + offset as usize;
            if lid >= lft.len() || tg.t == NONE {
                continue;
            }
            let t = tg.t;
            if t == s {
                // The switch's own LID, or an end port on this switch: only
                // one way to go.
                lft[lid] = tg.t_port;
                if (!tg.is_switch || opts.port_profile_switch_nodes) && !ignored[tg.t_port as usize] {
                    counts[tg.t_port as usize] += 1;
                    note_remote(&mut remotes[oi], fabric, tg.port, opts.dor);
                }
                continue;
            }
            cand.update(&sl, t, opts.dor);
            if cand.list.is_empty() {
                continue;
            }
            // OpenSM scans from `start_from` round the search order; for
            // a port's later LMC LIDs that is after the previous LID's
            // port, except in DOR mode, where every LID starts at 1.
            let start_from = if offset > 0 && !opts.dor { lft[lid - 1] as usize + 1 } else { 1 };
            let rot = start_from % num_ports;
            ordered.clear();
            ordered.extend(cand.list.iter().copied());
            ordered.sort_by_key(|&(pos, _)| (pos + num_ports - rot) % num_ports);
            scan.clear();
            scan.extend(ordered.iter().map(|&(_, l)| l));
            // OpenSM scatters only a target's first LID.
            let scatter = opts.scatter_ports != 0 && offset == 0 && opts.no_scatter.binary_search(&tg.port).is_err();
            let choice = if scatter {
                rng.pick(&scan, &counts)
            } else if opts.port_shifting {
                choose_shifted(fabric, &scan, &counts, &remotes[oi], opts.dor, fabric.lmc > 0)
            } else {
                choose(fabric, &scan, &counts, Some(remotes[oi].as_slice()), opts.dor)
            };
            let Some(choice) = choice else {
                continue;
            };
            lft[lid] = choice.port;
            // OpenSM leaves routes to switches out of the port profile
            // unless port_profile_switch_nodes.
            if (!tg.is_switch || opts.port_profile_switch_nodes) && !ignored[choice.port as usize] {
                counts[choice.port as usize] += 1;
                note_remote(&mut remotes[oi], fabric, choice.peer_port, opts.dor);
            }
        }
    }
    lft
}

/// DOR keeps to the neighbour of the first least-hop link in scan order,
/// spreading only over parallel links to it.
#[inline]
fn dor_admits(dor: bool, first_remote: &mut u32, link: &SwPort) -> bool {
    if !dor {
        return true;
    }
    if *first_remote == NONE {
        *first_remote = link.peer_node;
    }
    link.peer_node == *first_remote
}

fn note_remote(list: &mut Vec<Remote>, fabric: &FabricSnapshot, peer_port: u32, dor: bool) {
    let p = &fabric.ports[peer_port as usize];
    if let Some(r) = list.iter_mut().find(|r| r.node == p.node && (!dor || r.port == p.num)) {
        r.forwarded_to += 1;
    } else {
        list.push(Remote { node: p.node, port: p.num, forwarded_to: 1 });
    }
}

/// OpenSM's choice among least-hop candidates (in search order): fewest
/// routes; with LMC, first a port towards a system not yet used by this
/// target's earlier LIDs, then towards a node not yet used, then the least
/// forwarded-to neighbour among equally loaded ports. In DOR mode (all
/// candidates lead to one neighbour) only the last rule applies, per far
/// end port, a far end not used yet counting as forwarded to 0 times.
fn choose(
    fabric: &FabricSnapshot,
    candidates: &[SwPort],
    counts: &[u32],
    remotes: Option<&[Remote]>,
    dor: bool,
) -> Option<SwPort> {
    let mut best: Option<SwPort> = None;
    let mut least_paths = u32::MAX;
    let mut best_other_sys: Option<SwPort> = None;
    let mut least_other_sys = u32::MAX;
    let mut best_other_node: Option<SwPort> = None;
    let mut least_other_node = u32::MAX;
    let mut least_forwarded = u32::MAX;
    for c in candidates {
        let count = counts[c.port as usize];
        let mut used: Option<&Remote> = None;
        if let Some(rem) = remotes {
            let peer = &fabric.ports[c.peer_port as usize];
            if dor {
                used = rem.iter().find(|r| r.node == peer.node && r.port == peer.num);
            } else {
                let sys = fabric.nodes[peer.node as usize].system_guid;
                let same_sys = rem.iter().find(|r| fabric.nodes[r.node as usize].system_guid == sys);
                match same_sys {
                    None => {
                        if count < least_other_sys {
                            least_other_sys = count;
                            best_other_sys = Some(*c);
                            least_forwarded = 0;
                        }
                    }
                    Some(_) => {
                        used = rem.iter().find(|r| r.node == peer.node);
                        if used.is_none() && count < least_other_node {
                            least_other_node = count;
                            best_other_node = Some(*c);
                            least_forwarded = 0;
                        }
                    }
                }
            }
        }
        // How often this target's LIDs already went to the far end. In DOR
        // mode a far end not used yet takes part as 0, so among equally
        // loaded parallel links a fresh one beats a used one; otherwise only
        // used neighbours take part (fresh ones won through the system and
        // node rules above).
        let forwarded = match used {
            Some(u) => Some(u.forwarded_to),
            None if dor && remotes.is_some() => Some(0),
            None => None,
        };
        if count < least_paths {
            best = Some(*c);
            least_paths = count;
            if let Some(f) = forwarded {
                least_forwarded = least_forwarded.min(f);
            }
        } else if let Some(f) = forwarded {
            if count == least_paths && f < least_forwarded {
                least_forwarded = f;
                best = Some(*c);
            }
        }
    }
    if remotes.is_some() && best.is_some() {
        if let Some(b) = best_other_sys.or(best_other_node) {
            return Some(b);
        }
    }
    best
}

/// OpenSM's choice under `port_shifting`: the candidates (in search
/// order) are scanned from index `(their routes / their number)` round,
/// taking the first with the fewest routes; with LMC the system and node
/// rules apply in that order too (in DOR mode every far end counts as a
/// new system, as in OpenSM, whose DOR branch never marks one found).
fn choose_shifted(
    fabric: &FabricSnapshot,
    candidates: &[SwPort],
    counts: &[u32],
    remotes: &[Remote],
    dor: bool,
    lmc: bool,
) -> Option<SwPort> {
    if candidates.is_empty() {
        return None;
    }
    // (link, routes, same system used, same node used, forwarded to).
    let paths: Vec<(SwPort, u32, bool, bool, u32)> = candidates
        .iter()
        .map(|c| {
            let count = counts[c.port as usize];
            let peer = &fabric.ports[c.peer_port as usize];
            if !lmc {
                return (*c, count, false, false, 0);
            }
            if dor {
                let used = remotes.iter().find(|r| r.node == peer.node && r.port == peer.num);
                return (*c, count, false, false, used.map_or(0, |u| u.forwarded_to));
            }
            let sys = fabric.nodes[peer.node as usize].system_guid;
            if !remotes.iter().any(|r| fabric.nodes[r.node as usize].system_guid == sys) {
                return (*c, count, false, false, 0);
            }
            let used = remotes.iter().find(|r| r.node == peer.node);
            (*c, count, true, used.is_some(), used.map_or(0, |u| u.forwarded_to))
        })
        .collect();
    let n = paths.len();
    let total: u64 = paths.iter().map(|p| u64::from(p.1)).sum();
    let shift = (total / n as u64) as usize;
    let (mut least, mut least_sys, mut least_node, mut least_fwd) = (u32::MAX, u32::MAX, u32::MAX, u32::MAX);
    let (mut best, mut best_sys, mut best_node) = (None, None, None);
    for i in 0..n {
        let (link, count, sys, node, fwd) = paths[(shift + i) % n];
        if lmc {
            if !sys && count < least_sys {
                least_sys = count;
                best_sys = Some(link);
                least_fwd = 0;
            } else if !node && count < least_node {
                least_node = count;
                best_node = Some(link);
                least_fwd = 0;
            }
        }
        let used = lmc && (sys || node);
        if count < least {
            best = Some(link);
            least = count;
            if used && fwd < least_fwd {
                least_fwd = fwd;
            }
        } else if used && count == least && fwd < least_fwd {
            least_fwd = fwd;
            best = Some(link);
        }
    }
    if lmc && best.is_some() {
        return best_sys.or(best_node).or(best);
    }
    best
}

/// The generator behind `scatter_ports`: splitmix64 from the seed and the
/// switch's GUID.
struct Scatter(u64);

impl Scatter {
    fn new(seed: u32, guid: u64) -> Scatter {
        Scatter(u64::from(seed) << 32 ^ guid)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A candidate drawn among those with the fewest routes.
    fn pick(&mut self, candidates: &[SwPort], counts: &[u32]) -> Option<SwPort> {
        let least = candidates.iter().map(|c| counts[c.port as usize]).min()?;
        let lightest: Vec<&SwPort> = candidates.iter().filter(|c| counts[c.port as usize] == least).collect();
        let i = (self.next() % lightest.len() as u64) as usize;
        Some(*lightest[i])
    }
}

/// Min-hop tables weighted by traffic: like [`assign_lfts`], each switch
/// sends each LID through a least-hop port, but instead of counting
/// destinations per port it counts the end-port sources whose routes to the
/// LID pass through the switch (so a destination no traffic reaches the
/// switch for weighs nothing). Destinations are taken in the routing
/// `order`, grouped by the switch they hang off; for each group the
/// switches decide farthest first, so every switch knows its weights when
/// it chooses. A port whose load ties is taken in port order; with LMC an
/// end port's later LIDs first try a neighbouring system, then a node, then
/// a port none of its earlier LIDs used (OpenSM's preferences). Ports in
/// `opts.ignored_ports` are never counted; `dor` and `search_order` are not
/// supported (min-hop only).
pub fn assign_lfts_weighted(
    fabric: &FabricSnapshot,
    graph: &Graph,
    dist: &DistanceMatrix,
    order: &[u32],
    opts: &BalanceOptions,
) -> Vec<Lft> {
    weighted_with(fabric, graph, dist, order, &LinkView::new(fabric, graph, opts), &sources(fabric, graph))
}

/// [`assign_lfts_weighted`] with the link view and the sources per switch
/// built.
fn weighted_with(
    fabric: &FabricSnapshot,
    graph: &Graph,
    dist: &DistanceMatrix,
    order: &[u32],
    view: &LinkView,
    hosts: &[u64],
) -> Vec<Lft> {
    let n = graph.switch_count();
    let targets = targets(fabric, graph, order);
    // End-port destinations grouped by their switch, groups in order of
    // first appearance: (lid, target index). Switch LIDs and end ports no
    // traffic reaches (a down link: the destinations [`rebalance`] and the
    // verifier leave out too) carry no counted traffic; they are routed
    // last, over the final loads: (lid, switch, port on it).
    let mut group_of = vec![NONE; n];
    let mut groups: Vec<(Sw, Vec<(u16, u32)>)> = Vec::new();
    let mut uncounted: Vec<(u16, Sw, u8)> = Vec::new();
    for (ti, tg) in targets.iter().enumerate() {
        if tg.t == NONE {
            continue;
        }
        if tg.is_switch || !crate::graph::usable(fabric, tg.port) {
            for off in 0..tg.lid_count {
                let lid = tg.base_lid as usize + off as usize;
                if lid <= fabric.max_lid as usize {
                    uncounted.push((lid as u16, tg.t, tg.t_port));
                }
            }
            continue;
        }
        let g = &mut group_of[tg.t as usize];
        if *g == NONE {
            *g = groups.len() as u32;
            groups.push((tg.t, Vec::new()));
        }
        let list = &mut groups[*g as usize].1;
        for off in 0..tg.lid_count {
            let lid = tg.base_lid as usize + off as usize;
            if lid <= fabric.max_lid as usize {
                list.push((lid as u16, ti as u32));
            }
        }
    }
    let mut tables: Vec<Vec<u8>> = vec![vec![NO_ROUTE; fabric.max_lid as usize + 1]; n];
    let mut loads: Vec<Vec<u64>> =
        graph.switch_nodes.iter().map(|&node| vec![0u64; fabric.nodes[node as usize].num_ports as usize + 1]).collect();
    let mut w: Vec<u64> = Vec::new();
    let mut ord = Vec::new();
    let lmc = fabric.lmc > 0;
    for (t, dests) in &groups {
        let t = *t;
        let g = dests.len();
        for &(lid, ti) in dests {
            let tp = targets[ti as usize].t_port;
            tables[t as usize][lid as usize] = tp;
            if !view.ignored[view.link(t, tp)] {
                loads[t as usize][tp as usize] += 1;
            }
        }
        let row = dist.to(t);
        by_distance(row, true, true, &mut ord);
        w.resize(n * g, 0);
        let mut start = 0;
        while start < ord.len() {
            let level = row[ord[start] as usize];
            let end = start + ord[start..].iter().take_while(|&&s| row[s as usize] == level).count();
            let run = &ord[start..end];
            let decided: Vec<(Sw, Vec<u8>, Vec<u64>, Vec<u64>)> = run
                .par_iter()
                .map(|&s| {
                    let si = s as usize;
                    // Sources routed through `s` per destination: its own end
                    // ports and whatever farther neighbours send it.
                    let mut ws: Vec<u64> = vec![hosts[si]; g];
                    for &u in &graph.sw_adj[si] {
                        if row[u as usize] != level.wrapping_add(1) {
                            continue;
                        }
                        let urow = &tables[u as usize];
                        let wu = &w[u as usize * g..(u as usize + 1) * g];
                        for (j, &(lid, _)) in dests.iter().enumerate() {
                            if view.next(u, urow[lid as usize]) == s {
                                ws[j] += wu[j];
                            }
                        }
                    }
                    let cands: Vec<&SwPort> = graph.sw_ports[si]
                        .iter()
                        .filter(|l| l.peer_sw != NONE && row[l.peer_sw as usize].wrapping_add(1) == level)
                        .collect();
                    let mut load = loads[si].clone();
                    let mut ports = Vec::with_capacity(g);
                    let mut used: Vec<(u64, u32, u8)> = Vec::new();
                    let mut used_by = NONE;
                    // The least loaded candidate, kept until a load changes.
                    let mut least: Option<&SwPort> = None;
                    for (j, &(_, ti)) in dests.iter().enumerate() {
                        if lmc && used_by != ti {
                            used.clear();
                            used_by = ti;
                        }
                        let choice = if !lmc && least.is_some() {
                            least
                        } else {
                            let mut best: Option<(&SwPort, (bool, bool, bool, u64))> = None;
                            for &c in &cands {
                                let key = if lmc {
                                    let sys = fabric.nodes[c.peer_node as usize].system_guid;
                                    (
                                        used.iter().any(|u| u.0 == sys),
                                        used.iter().any(|u| u.1 == c.peer_node),
                                        used.iter().any(|u| u.2 == c.port),
                                        load[c.port as usize],
                                    )
                                } else {
                                    (false, false, false, load[c.port as usize])
                                };
                                if best.is_none_or(|(_, k)| key < k) {
                                    best = Some((c, key));
                                }
                            }
                            best.map(|(c, _)| c)
                        };
                        let Some(c) = choice else {
                            ports.push(NO_ROUTE);
                            continue;
                        };
                        least = Some(c);
                        if ws[j] > 0 && !view.ignored[view.link(s, c.port)] {
                            load[c.port as usize] += ws[j];
                            least = None;
                        }
                        if lmc {
                            used.push((fabric.nodes[c.peer_node as usize].system_guid, c.peer_node, c.port));
                        }
                        ports.push(c.port);
                    }
                    (s, ports, ws, load)
                })
                .collect();
            for (s, ports, ws, load) in decided {
                let si = s as usize;
                for (j, &(lid, _)) in dests.iter().enumerate() {
                    tables[si][lid as usize] = ports[j];
                }
                w[si * g..(si + 1) * g].copy_from_slice(&ws);
                loads[si] = load;
            }
            start = end;
        }
    }
    // Uncounted LIDs: the least loaded least-hop port, first in port order.
    tables.par_iter_mut().enumerate().for_each(|(s, table)| {
        for &(lid, t, t_port) in &uncounted {
            if t as usize == s {
                table[lid as usize] = t_port;
                continue;
            }
            let row = dist.to(t);
            let here = row[s];
            if here == u8::MAX {
                continue;
            }
            let best = graph.sw_ports[s]
                .iter()
                .filter(|l| l.peer_sw != NONE && row[l.peer_sw as usize].wrapping_add(1) == here)
                .min_by_key(|l| (loads[s][l.port as usize], l.port));
            if let Some(l) = best {
                table[lid as usize] = l.port;
            }
        }
    });
    tables
        .into_iter()
        .enumerate()
        .map(|(s, ports)| Lft { node: graph.switch_nodes[s], ports: ports.into() })
        .collect()
}

/// The balanced min-hop tables: OpenSM's greedy ([`assign_lfts`]) and the
/// traffic-weighted tables ([`assign_lfts_weighted`]) are both built, the
/// one with the less loaded busiest link (the greedy on a tie) goes through
/// [`rebalance`]. The result's busiest link is never busier than the
/// greedy's. On fabrics where the weighted tables would cost more than
/// [`WEIGHTED_MAX_WORK`] steps (inter-switch links × LIDs; a 28-ary 3-tree
/// is past it) only the greedy is built.
pub fn balanced_lfts(
    fabric: &FabricSnapshot,
    graph: &Graph,
    dist: &DistanceMatrix,
    order: &[u32],
    opts: &BalanceOptions,
) -> (Vec<Lft>, Rebalance) {
    // The weighted tables cost about switches × end-port LIDs × links per
    // switch steps; past a bound (a few seconds of CPU) only the greedy
    // goes through the pass, whose cost is bounded on its own.
    let links: usize = graph.sw_ports.iter().map(|p| p.iter().filter(|l| l.peer_sw != NONE).count()).sum();
    let cost = links as u128 * fabric.max_lid as u128;
    let view = LinkView::new(fabric, graph, opts);
    let tr = Traffic::new(fabric, graph, order);
    let ((greedy, greedy_load), weighted) = rayon::join(
        || {
            let lfts = assign_lfts(fabric, graph, dist, order, opts);
            let load = tr.link_loads(&view, dist, &lfts);
            (lfts, load)
        },
        || {
            (cost <= WEIGHTED_MAX_WORK).then(|| {
                let lfts = weighted_with(fabric, graph, dist, order, &view, &tr.hosts);
                let load = tr.link_loads(&view, dist, &lfts);
                (lfts, load)
            })
        },
    );
    let g = view.counted_max(&greedy_load);
    let (mut lfts, load) = match weighted {
        Some((weighted, load)) if view.counted_max(&load) < g => (weighted, load),
        _ => (greedy, greedy_load),
    };
    let r = rebalance_with(fabric, graph, dist, &view, &tr, &mut lfts, load);
    (lfts, Rebalance { max_before: g, ..r })
}

/// Bound on inter-switch links × max LID for building the weighted tables
/// in [`balanced_lfts`]: about 2 s of CPU on a 2 GHz core.
pub const WEIGHTED_MAX_WORK: u128 = 200_000_000;

/// Sources per switch: the usable end ports entering the fabric there.
fn sources(fabric: &FabricSnapshot, graph: &Graph) -> Vec<u64> {
    let mut hosts = vec![0u64; graph.switch_count()];
    for &ep in &graph.end_ports {
        let s = graph.entry_switch(fabric, ep);
        if s != NONE {
            hosts[s as usize] += 1;
        }
    }
    hosts
}

/// The traffic the loads count: sources per switch, end-port destination
/// LIDs in routing order, and those destinations grouped by their switch.
struct Traffic {
    hosts: Vec<u64>,
    dests: Vec<Dest>,
    by_t: Vec<Vec<u32>>,
}

impl Traffic {
    fn new(fabric: &FabricSnapshot, graph: &Graph, order: &[u32]) -> Traffic {
        let n = graph.switch_count();
        let hosts = sources(fabric, graph);
        let mut dests: Vec<Dest> = Vec::new();
        for &pi in order {
            let p = &fabric.ports[pi as usize];
            if !fabric.nodes[p.node as usize].kind.is_end_node() || p.lid == 0 || !crate::graph::usable(fabric, pi) {
                continue;
            }
            let t = graph.entry_switch(fabric, pi);
            if t == NONE {
                continue;
            }
            let count = p.lid_count().min(u16::MAX as u32) as u16;
            for off in 0..count {
                let lid = p.lid as usize + off as usize;
                if lid <= fabric.max_lid as usize {
                    dests.push(Dest { lid: lid as u16, t, base_lid: p.lid, lid_count: count });
                }
            }
        }
        let mut by_t: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, d) in dests.iter().enumerate() {
            by_t[d.t as usize].push(i as u32);
        }
        Traffic { hosts, dests, by_t }
    }

    /// Routes per link of `lfts`.
    fn link_loads(&self, view: &LinkView, dist: &DistanceMatrix, lfts: &[Lft]) -> Vec<u64> {
        let tables: Vec<&[u8]> = lfts.iter().map(|l| l.ports.as_slice()).collect();
        link_loads(view, dist, &self.hosts, &self.dests, &self.by_t, &tables)
    }
}

/// What [`rebalance`] found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rebalance {
    /// End-port → end-port routes on the busiest counted inter-switch link
    /// before the pass.
    pub max_before: u64,
    /// The same after the pass (never more than `max_before`).
    pub max_after: u64,
    /// A bound no minimal routing can go below (0 when ports are left out
    /// of the counting): the pass stops as soon as it reaches it.
    pub lower_bound: u64,
    /// LFT entries changed.
    pub moves: u64,
    /// True when the pass stopped on its work budget rather than at a
    /// routing where no single move lowers the busiest link.
    pub budget_exhausted: bool,
}

/// Work budget of [`rebalance`], in switches, links and destinations
/// looked at while weighing moves: a fraction of a second of CPU. It
/// bounds the pass on fabrics where moves relieve the busiest link a few
/// routes at a time (large tori; huge trees where the greedy's imbalance
/// is structural); the result is still valid, only less balanced.
const REBALANCE_BUDGET: u64 = 20_000_000;

/// Flat per-link view for [`rebalance`]: link `base[s] + port`.
struct LinkView {
    base: Vec<u32>,
    /// Switch at the far end, [`NONE`] for an end node or no link.
    peer: Vec<Sw>,
    /// Node at the far end ([`NONE`] without a link).
    peer_node: Vec<u32>,
    /// Switch owning the link.
    owner: Vec<Sw>,
    /// Left out of the counting (`port_prof_ignore_file`).
    ignored: Vec<bool>,
}

impl LinkView {
    fn new(fabric: &FabricSnapshot, graph: &Graph, opts: &BalanceOptions) -> LinkView {
        let n = graph.switch_count();
        let mut base = Vec::with_capacity(n);
        let mut total = 0u32;
        for &node in &graph.switch_nodes {
            base.push(total);
            total += fabric.nodes[node as usize].num_ports as u32 + 1;
        }
        let mut v = LinkView {
            base,
            peer: vec![NONE; total as usize],
            peer_node: vec![NONE; total as usize],
            owner: vec![0; total as usize],
            ignored: vec![false; total as usize],
        };
        for s in 0..n {
            let b = v.base[s] as usize;
            let end = v.base.get(s + 1).map_or(total as usize, |&e| e as usize);
            v.owner[b..end].fill(s as Sw);
            for l in &graph.sw_ports[s] {
                v.peer[b + l.port as usize] = l.peer_sw;
                v.peer_node[b + l.port as usize] = l.peer_node;
            }
        }
        for &(node, port) in &opts.ignored_ports {
            let s = graph.sw_of_node.get(node as usize).copied().unwrap_or(NONE);
            if s != NONE && port <= fabric.nodes[node as usize].num_ports {
                v.ignored[v.base[s as usize] as usize + port as usize] = true;
            }
        }
        v
    }

    /// The busiest load on a link counted (not ignored).
    fn counted_max(&self, load: &[u64]) -> u64 {
        load.iter().zip(&self.ignored).filter(|(_, &ig)| !ig).map(|(&l, _)| l).max().unwrap_or(0)
    }

    #[inline]
    fn link(&self, s: Sw, port: u8) -> usize {
        self.base[s as usize] as usize + port as usize
    }

    /// The next switch from `s` on `port`, [`NONE`] when it is not a
    /// switch-to-switch link (or no route).
    #[inline]
    fn next(&self, s: Sw, port: u8) -> Sw {
        if port == NO_ROUTE {
            return NONE;
        }
        self.peer.get(self.link(s, port)).copied().unwrap_or(NONE)
    }
}

/// A destination LID of an end port.
#[derive(Clone, Copy)]
struct Dest {
    lid: u16,
    /// Switch the end port hangs off.
    t: Sw,
    /// Its base LID and LID count (the LMC siblings).
    base_lid: u16,
    lid_count: u16,
}

/// A balancing pass over min-hop tables: while the busiest counted
/// inter-switch link (counting end-port → end-port routes, each LID of an
/// end port a destination, as the verifier does) can be relieved by moving
/// one switch's route to one destination LID onto another least-hop port
/// without any link of the new path reaching that load, make the move that
/// leaves the new path least loaded. Every move keeps the path minimal;
/// the busiest load never grows, and the number of links carrying it
/// shrinks with each move, so the pass ends. With LMC a move never lowers
/// the number of distinct ports, nodes or systems the LIDs of one end port
/// leave a switch through.
///
/// Destinations are taken in the routing `order` and switches ranked by
/// node GUID, so LID numbering decides nothing but exact ties.
///
/// `lfts` are [`assign_lfts`]'s result on `dist` (one per switch, in switch
/// order); routes to switch LIDs are left as they are.
pub fn rebalance(
    fabric: &FabricSnapshot,
    graph: &Graph,
    dist: &DistanceMatrix,
    order: &[u32],
    lfts: &mut [Lft],
    opts: &BalanceOptions,
) -> Rebalance {
    let n = graph.switch_count();
    if n == 0 || lfts.len() != n || lfts.iter().zip(&graph.switch_nodes).any(|(l, &node)| l.node != node) {
        return Rebalance::default();
    }
    let view = LinkView::new(fabric, graph, opts);
    let tr = Traffic::new(fabric, graph, order);
    let load = tr.link_loads(&view, dist, lfts);
    rebalance_with(fabric, graph, dist, &view, &tr, lfts, load)
}

/// [`rebalance`] with the link view, traffic and the tables' loads built.
fn rebalance_with(
    fabric: &FabricSnapshot,
    graph: &Graph,
    dist: &DistanceMatrix,
    view: &LinkView,
    tr: &Traffic,
    lfts: &mut [Lft],
    mut load: Vec<u64>,
) -> Rebalance {
    let n = graph.switch_count();
    let mut out = Rebalance::default();
    let (hosts, dests, by_t) = (&tr.hosts, &tr.dests, &tr.by_t);
    let mut tables: Vec<&mut [u8]> = lfts.iter_mut().map(|l| l.ports.as_mut_slice()).collect();
    let counted_max = |load: &[u64]| view.counted_max(load);
    out.max_before = counted_max(&load);
    out.lower_bound = lower_bound(graph, dist, view, hosts, by_t);
    out.max_after = out.max_before;
    let mut rank: Vec<(u64, Sw)> =
        (0..n).map(|s| (fabric.nodes[graph.switch_nodes[s] as usize].guid, s as Sw)).collect();
    rank.sort_unstable();
    let mut sw_rank = vec![0u32; n];
    for (r, &(_, s)) in rank.iter().enumerate() {
        sw_rank[s as usize] = r as u32;
    }
    let mut pass = Pass {
        fabric,
        graph,
        dist,
        view,
        hosts,
        dests,
        sw_rank: &sw_rank,
        w: vec![0; n],
        crosses: vec![false; n],
        stamp: vec![0; n],
        generation: 0,
        ord: Vec::new(),
        ord_t: NONE,
        work: 0,
        moves: 0,
        lmc: fabric.lmc > 0,
        budget: REBALANCE_BUDGET,
    };
    loop {
        let m = counted_max(&load);
        out.max_after = m;
        if m == 0 || m <= out.lower_bound {
            break;
        }
        let mut hot: Vec<usize> =
            (0..load.len()).filter(|&i| load[i] == m && !view.ignored[i] && view.peer[i] != NONE).collect();
        hot.sort_by_key(|&i| (sw_rank[view.owner[i] as usize], i - view.base[view.owner[i] as usize] as usize));
        let mut relieved_all = true;
        for e in hot {
            if load[e] == m && !pass.relieve(e, m, &mut tables, &mut load) {
                relieved_all = false;
                break;
            }
        }
        if pass.work > pass.budget {
            out.budget_exhausted = true;
        }
        if !relieved_all || out.budget_exhausted {
            out.max_after = counted_max(&load);
            break;
        }
    }
    out.moves = pass.moves;
    out
}

/// Routes per link of `tables` (see [`rebalance`]). Destinations on one
/// switch are walked together so that each table row is read once per
/// group of nearby LIDs.
fn link_loads(
    view: &LinkView,
    dist: &DistanceMatrix,
    hosts: &[u64],
    dests: &[Dest],
    by_t: &[Vec<u32>],
    tables: &[&[u8]],
) -> Vec<u64> {
    let n = hosts.len();
    let links = view.peer.len();
    (0..n)
        .into_par_iter()
        .fold(
            || (vec![0u64; links], Vec::<u32>::new(), Vec::new(), Vec::new()),
            |(mut load, mut w, mut ord, mut lids), t| {
                let group = &by_t[t];
                if group.is_empty() {
                    return (load, w, ord, lids);
                }
                by_distance(dist.to(t as Sw), true, true, &mut ord);
                let g = group.len();
                lids.clear();
                lids.extend(group.iter().map(|&di| dests[di as usize].lid as usize));
                // Sources routed through each switch per destination of the
                // group, `g` a switch (end ports number fewer than LIDs, so
                // `u32` holds them); a switch's own are added as it is met.
                w.clear();
                w.resize(n * g, 0);
                // Each switch's row is read at the group's few LIDs: asked
                // for ahead.
                let first = lids.iter().copied().min().unwrap_or(0);
                let last = lids.iter().copied().max().unwrap_or(0);
                for (i, &s) in ord.iter().enumerate() {
                    prefetch_ahead(tables, &ord, i, first, last);
                    let si = s as usize;
                    let own = hosts[si] as u32;
                    // A switch no route to the group passes through (most
                    // of a tree's upper switches, for minhop) adds
                    // nothing: its row is not read.
                    if own == 0 && w[si * g..si * g + g].iter().all(|&x| x == 0) {
                        continue;
                    }
                    let row = tables[si];
                    let base = view.base[si] as usize;
                    let end = view.base.get(si + 1).map_or(links, |&e| e as usize);
                    let (peers, load) = (&view.peer[base..end], &mut load[base..end]);
                    for (j, &lid) in lids.iter().enumerate() {
                        let port = row[lid] as usize;
                        let Some(&next) = peers.get(port) else { continue };
                        if next == NONE {
                            continue;
                        }
                        let ws = w[si * g + j] + own;
                        load[port] += u64::from(ws);
                        w[next as usize * g + j] += ws;
                    }
                }
                (load, w, ord, lids)
            },
        )
        .map(|(load, ..)| load)
        .reduce(
            || vec![0u64; links],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            },
        )
}

/// A load no minimal routing can keep every link under: the routes a
/// switch's own end ports send (or its end ports receive) spread at best
/// evenly over its switch links. 0 when ports are left out of the
/// counting.
fn lower_bound(graph: &Graph, dist: &DistanceMatrix, view: &LinkView, hosts: &[u64], by_t: &[Vec<u32>]) -> u64 {
    if view.ignored.iter().any(|&i| i) {
        return 0;
    }
    let n = hosts.len();
    (0..n)
        .into_par_iter()
        .map(|s| {
            let deg = graph.sw_ports[s].iter().filter(|l| l.peer_sw != NONE).count() as u64;
            if deg == 0 {
                return 0;
            }
            let row = dist.to(s as Sw);
            let (mut dests_reached, mut sources_reaching) = (0u64, 0u64);
            for (t, &d) in row.iter().enumerate() {
                if d != 0 && d != u8::MAX {
                    dests_reached += by_t[t].len() as u64;
                    sources_reaching += hosts[t];
                }
            }
            let out = hosts[s] * dests_reached;
            let inward = by_t[s].len() as u64 * sources_reaching;
            out.max(inward).div_ceil(deg)
        })
        .max()
        .unwrap_or(0)
}

/// The sequential state of one [`rebalance`] run.
struct Pass<'a> {
    fabric: &'a FabricSnapshot,
    graph: &'a Graph,
    dist: &'a DistanceMatrix,
    view: &'a LinkView,
    hosts: &'a [u64],
    dests: &'a [Dest],
    sw_rank: &'a [u32],
    /// Sources routed through each switch towards the current destination.
    w: Vec<u64>,
    /// Whether a switch's path to the current destination crosses the hot link.
    crosses: Vec<bool>,
    /// Switches on the old path of a move being weighed (== generation).
    stamp: Vec<u32>,
    generation: u32,
    ord: Vec<Sw>,
    /// The destination switch `ord` is sorted for ([`NONE`]: none yet):
    /// a hot link's destinations come a switch at a time.
    ord_t: Sw,
    work: u64,
    moves: u64,
    lmc: bool,
    budget: u64,
}

/// A move: at switch `s`, route the destination out of `port`.
#[derive(Clone, Copy)]
struct Move {
    s: Sw,
    port: u8,
    /// Highest load on the new part of the path after the move.
    score: u64,
}

impl Pass<'_> {
    /// Move routes off hot link `e` (carrying `m`, the busiest load) until
    /// it carries less. False when no single move can.
    fn relieve(&mut self, e: usize, m: u64, tables: &mut [&mut [u8]], load: &mut [u64]) -> bool {
        let u = self.view.owner[e];
        let port = (e - self.view.base[u as usize] as usize) as u8;
        for di in 0..self.dests.len() {
            if self.work > self.budget {
                return false;
            }
            let d = self.dests[di];
            self.work += 1;
            if tables[u as usize][d.lid as usize] != port || d.t == u {
                continue;
            }
            // Several moves may come from one destination.
            while let Some(mv) = self.best_move(&d, u, port, m, tables, load) {
                self.apply(&d, mv, tables, load);
                if load[e] < m {
                    return true;
                }
            }
        }
        false
    }

    fn best_move(&mut self, d: &Dest, u: Sw, port: u8, m: u64, tables: &[&mut [u8]], load: &[u64]) -> Option<Move> {
        let lid = d.lid as usize;
        let row_t = self.dist.to(d.t);
        let mut ord = std::mem::take(&mut self.ord);
        if self.ord_t != d.t {
            by_distance(row_t, true, true, &mut ord);
            self.ord_t = d.t;
        }
        self.work += ord.len() as u64;
        // Routes are shortest (a hop is one nearer), so only switches at
        // least as far as `u` can route through it: `ord` (farthest
        // first) starts with them, and the rest cross nothing.
        let du = row_t[u as usize];
        let part = ord.partition_point(|&s| row_t[s as usize] >= du);
        let beyond = |x: Sw| x != NONE && row_t[x as usize] >= du;
        for &s in &ord[..part] {
            self.w[s as usize] = self.hosts[s as usize];
        }
        // One line of every switch's row, read again below: asked for
        // ahead.
        for (i, &s) in ord[..part].iter().enumerate() {
            prefetch_ahead(tables, &ord[..part], i, lid, lid);
            let next = self.view.next(s, tables[s as usize][lid]);
            if beyond(next) {
                self.w[next as usize] += self.w[s as usize];
            }
        }
        for &s in ord[..part].iter().rev() {
            let p = tables[s as usize][lid];
            let next = self.view.next(s, p);
            self.crosses[s as usize] = if s == u { p == port } else { beyond(next) && self.crosses[next as usize] };
        }
        let mut best: Option<Move> = None;
        for &s in &ord[..part] {
            let si = s as usize;
            let ws = self.w[si];
            if !self.crosses[si] || ws == 0 {
                continue;
            }
            let cur = tables[si][lid];
            let mut old_marked = false;
            for l in &self.graph.sw_ports[si] {
                if l.peer_sw == NONE || l.port == cur || (beyond(l.peer_sw) && self.crosses[l.peer_sw as usize]) {
                    continue;
                }
                if row_t[l.peer_sw as usize].wrapping_add(1) != row_t[si] || self.view.ignored[self.view.link(s, l.port)] {
                    continue;
                }
                let first = load[self.view.link(s, l.port)] + ws;
                if first >= m || best.is_some_and(|b| first > b.score) {
                    continue;
                }
                if self.lmc && !self.lmc_keeps_spread(d, s, cur, l, tables) {
                    continue;
                }
                if !old_marked {
                    self.mark_old_path(s, lid, tables);
                    old_marked = true;
                }
                // The new part of the path: from the neighbour until it
                // meets the old path.
                let mut score = first;
                let mut x = l.peer_sw;
                while self.stamp[x as usize] != self.generation {
                    self.work += 1;
                    let p = tables[x as usize][lid];
                    let li = self.view.link(x, p);
                    if !self.view.ignored[li] {
                        score = score.max(load[li] + ws);
                    }
                    x = self.view.next(x, p);
                    if x == NONE || score >= m {
                        break;
                    }
                }
                if x == NONE || score >= m {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some(b) => (score, self.sw_rank[si], l.port) < (b.score, self.sw_rank[b.s as usize], b.port),
                };
                if better {
                    best = Some(Move { s, port: l.port, score });
                }
            }
        }
        self.ord = ord;
        best
    }

    /// Stamp the switches on `s`'s current path to the destination.
    fn mark_old_path(&mut self, s: Sw, lid: usize, tables: &[&mut [u8]]) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.fill(0);
            self.generation = 1;
        }
        let mut x = s;
        while x != NONE && self.stamp[x as usize] != self.generation {
            self.work += 1;
            self.stamp[x as usize] = self.generation;
            x = self.view.next(x, tables[x as usize][lid]);
        }
        // `s` itself is where both paths start, not a meeting point.
        self.stamp[s as usize] = self.generation.wrapping_sub(1);
    }

    /// With LMC: the move does not lower the number of distinct neighbour
    /// systems, nodes or ports this end port's LIDs leave `s` through.
    fn lmc_keeps_spread(&self, d: &Dest, s: Sw, cur: u8, to: &SwPort, tables: &[&mut [u8]]) -> bool {
        let row = &tables[s as usize];
        let lids = d.base_lid as usize..d.base_lid as usize + d.lid_count as usize;
        let spread = |replace: u8| {
            let mut ports: Vec<u8> = Vec::new();
            for lid in lids.clone() {
                let p = if lid == d.lid as usize { replace } else { row.get(lid).copied().unwrap_or(NO_ROUTE) };
                if !ports.contains(&p) {
                    ports.push(p);
                }
            }
            let mut nodes: Vec<u32> = Vec::new();
            let mut systems: Vec<u64> = Vec::new();
            for &p in &ports {
                let node = self.view.peer_node.get(self.view.link(s, p)).copied().unwrap_or(NONE);
                if node == NONE {
                    continue;
                }
                if !nodes.contains(&node) {
                    nodes.push(node);
                }
                let sys = self.fabric.nodes[node as usize].system_guid;
                if !systems.contains(&sys) {
                    systems.push(sys);
                }
            }
            (ports.len(), nodes.len(), systems.len())
        };
        let (p0, n0, s0) = spread(cur);
        let (p1, n1, s1) = spread(to.port);
        p1 >= p0 && n1 >= n0 && s1 >= s0
    }

    fn apply(&mut self, d: &Dest, mv: Move, tables: &mut [&mut [u8]], load: &mut [u64]) {
        let lid = d.lid as usize;
        let ws = self.w[mv.s as usize];
        self.mark_old_path(mv.s, lid, tables);
        let meet_generation = self.generation;
        // Find the meeting point: the first switch of the new path on the old.
        let mut x = self.view.next(mv.s, mv.port);
        load[self.view.link(mv.s, mv.port)] += ws;
        while x != NONE && self.stamp[x as usize] != meet_generation {
            let p = tables[x as usize][lid];
            load[self.view.link(x, p)] += ws;
            x = self.view.next(x, p);
        }
        let meet = x;
        let mut y = mv.s;
        while y != meet && y != NONE {
            let p = tables[y as usize][lid];
            load[self.view.link(y, p)] -= ws;
            y = self.view.next(y, p);
        }
        tables[mv.s as usize][lid] = mv.port;
        self.moves += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::RandomFabric;

    /// Two switches joined by parallel links on ports 1 and 2, two hosts on
    /// the far switch.
    fn pair_lmc(lmc: u8) -> FabricSnapshot {
        let text = "Switch 4 \"a\"\n[1] \"b\"[1]\n[2] \"b\"[2]\n\nSwitch 4 \"b\"\n[3] \"h1\"[1]\n[4] \"h2\"[1]\n\nHca 1 \"h1\"\n\nHca 1 \"h2\"\n";
        let topo = sm_topology::parse_str(text, "pair").unwrap();
        sm_topology::lids::snapshot(&topo, lmc).unwrap()
    }

    fn pair() -> FabricSnapshot {
        pair_lmc(0)
    }

    /// Switch `a`'s ports towards every LID of every end port, in end port order.
    fn route_lids(f: &FabricSnapshot, opts: &BalanceOptions) -> Vec<Vec<u8>> {
        let g = Graph::new(f);
        let d = g.distance_matrix();
        let order = routing_order(f, &g, &[]);
        let lfts = assign_lfts(f, &g, &d, &order, opts);
        let a = f.nodes.iter().position(|n| n.description.as_str() == "a").unwrap() as u32;
        let lft = lfts.into_iter().find(|l| l.node == a).unwrap();
        f.end_ports()
            .map(|p| {
                let port = &f.ports[p as usize];
                (0..port.lid_count()).map(|i| lft.ports[port.lid as usize + i as usize]).collect()
            })
            .collect()
    }

    fn route(f: &FabricSnapshot, opts: &BalanceOptions) -> Vec<u8> {
        route_lids(f, opts).into_iter().map(|lids| lids[0]).collect()
    }

    #[test]
    fn equal_ports_alternate_starting_with_the_lowest() {
        assert_eq!(route(&pair(), &BalanceOptions::default()), vec![1, 2]);
    }

    #[test]
    fn search_position_zero_is_scanned_last() {
        // OpenSM scans positions 1, 2, ... and position 0 last; with port 2
        // at position 0 the first host goes to port 1 and the second to 2.
        let f = pair();
        let g = Graph::new(&f);
        let mut orders = vec![vec![0u8, 1, 2, 3, 4]; g.switch_count()];
        let a = f.nodes.iter().position(|n| n.description.as_str() == "a").unwrap() as u32;
        orders[g.sw_of_node[a as usize] as usize] = vec![2, 1, 0, 3, 4];
        let opts = BalanceOptions { search_order: Some(orders), ..Default::default() };
        assert_eq!(route(&f, &opts), vec![1, 2]);
        // Position 1 holds port 2 here, so it is the first choice.
        let mut orders = vec![vec![0u8, 1, 2, 3, 4]; g.switch_count()];
        orders[g.sw_of_node[a as usize] as usize] = vec![0, 2, 1, 3, 4];
        let opts = BalanceOptions { search_order: Some(orders), ..Default::default() };
        assert_eq!(route(&f, &opts), vec![2, 1]);
    }

    #[test]
    fn dor_keeps_to_the_first_neighbour_and_ignored_ports_are_not_counted() {
        let f = pair();
        let a = f.nodes.iter().position(|n| n.description.as_str() == "a").unwrap() as u32;
        // Port 1 ignored for counting: it never gets busier, so it keeps winning.
        let opts = BalanceOptions { ignored_ports: vec![(a, 1)], ..Default::default() };
        assert_eq!(route(&f, &opts), vec![1, 1]);
        // DOR still spreads over parallel links to the same neighbour.
        let opts = BalanceOptions { dor: true, ..Default::default() };
        assert_eq!(route(&f, &opts), vec![1, 2]);
    }

    #[test]
    fn dor_with_lmc_spreads_each_ports_lids_over_the_parallel_links() {
        // OpenSM's DOR: every LID is searched from port 1, and on a tie in
        // load the far end this port's LIDs have not used yet wins. After
        // h1 -> 1 and h2 -> 2, both links carry one route: h1's second LID
        // takes port 2 (fresh for h1), h2's then port 1 (now less loaded).
        // The min-hop LMC rule (start after the previous LID's port, fresh
        // far ends left out of the tie) would send h1's LIDs both to port 1.
        let f = pair_lmc(1);
        let dor = BalanceOptions { dor: true, ..Default::default() };
        assert_eq!(route_lids(&f, &dor), vec![vec![1, 2], vec![2, 1]]);
    }

    /// OpenSM's rule without LMC, one target at a time and straight from
    /// the hop table: for each switch and LID, the least-hop ports in scan
    /// order (in DOR mode those towards the first one's neighbour), the
    /// first with the fewest routes; routes to switches and through
    /// ignored ports are not counted.
    fn reference_lfts<H: HopTable>(f: &FabricSnapshot, g: &Graph, hops: &H, opts: &BalanceOptions) -> Vec<Vec<u8>> {
        assert_eq!(f.lmc, 0);
        let order = routing_order(f, g, &[]);
        let targets = targets(f, g, &order);
        (0..g.switch_count() as Sw)
            .map(|s| {
                let sl = SwitchLinks::new(f, g, hops, opts, s);
                let mut counts = vec![0u32; sl.num_ports];
                let mut lft = vec![NO_ROUTE; f.max_lid as usize + 1];
                for tg in &targets {
                    let lid = tg.base_lid as usize;
                    if tg.t == NONE || lid >= lft.len() {
                        continue;
                    }
                    let port = if tg.t == s {
                        tg.t_port
                    } else {
                        let least = hops.least(s, tg.t);
                        if least == u8::MAX {
                            continue;
                        }
                        let on_path: Vec<SwPort> =
                            sl.links.iter().map(|&(_, l)| l).filter(|l| hops.via(s, l, tg.t) == least).collect();
                        let Some(first) = on_path.first() else { continue };
                        let mut best: Option<SwPort> = None;
                        for l in &on_path {
                            if opts.dor && l.peer_node != first.peer_node {
                                continue;
                            }
                            if best.is_none_or(|b| counts[l.port as usize] < counts[b.port as usize]) {
                                best = Some(*l);
                            }
                        }
                        best.map_or(NO_ROUTE, |b| b.port)
                    };
                    lft[lid] = port;
                    if !tg.is_switch && !sl.ignored[port as usize] {
                        counts[port as usize] += 1;
                    }
                }
                lft
            })
            .collect()
    }

    fn assert_reference(name: &str, f: &FabricSnapshot, opts: &BalanceOptions) {
        let g = Graph::new(f);
        let d = g.distance_matrix();
        let order = routing_order(f, &g, &[]);
        let got: Vec<Vec<u8>> = assign_lfts(f, &g, &d, &order, opts).into_iter().map(|l| l.ports.to_vec()).collect();
        let want = reference_lfts(f, &g, &d, opts);
        for (s, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(a, b, "{name}: switch {s} differs from OpenSM's rule ({opts:?})");
        }
    }

    /// The run-at-a-time selection (candidate masks over any number of
    /// links, the sorted queue, switch LIDs left uncounted) is OpenSM's
    /// rule exactly: on random irregular fabrics with failures, tori, fat
    /// trees with more than 64 and 128 parallel up-links, with DOR, a
    /// shuffled search order and ports left out of the counting.
    #[test]
    fn run_selection_is_opensms_rule() {
        let mut fabrics: Vec<(String, FabricSnapshot)> = Vec::new();
        for seed in 0..24 {
            let spec = RandomFabric {
                switches: 4 + seed as usize % 20,
                radix: 6 + seed as usize % 8,
                hosts: 1 + seed as usize % 3,
                extra_links: seed as usize % 25,
                seed,
                dead_links: seed as usize % 3,
                dead_switches: seed as usize % 2,
                lmc: 0,
            };
            if let Some(f) = spec.build() {
                fabrics.push((format!("{spec:?}"), f));
            }
        }
        assert!(fabrics.len() >= 12, "too few random fabrics built: {}", fabrics.len());
        let gens = [
            ("4x3x3 torus", sm_topology::gen::torus(&[4, 3, 3], 2, false).unwrap().0),
            ("4-ary 3-tree", sm_topology::gen::kary_ntree(4, 3, 4).unwrap()),
            // Leaves with 140 up-links to 2 spines: three mask words.
            ("fat tree, 140 up-links a leaf", sm_topology::gen::fat_tree_2level(3, 2, 5, 140).unwrap()),
            ("fat tree, 70 up-links a leaf", sm_topology::gen::fat_tree_2level(4, 7, 3, 70).unwrap()),
        ];
        for (name, topo) in gens {
            fabrics.push((name.into(), sm_topology::lids::snapshot(&topo, 0).unwrap()));
        }
        for (name, f) in &fabrics {
            let g = Graph::new(f);
            assert_reference(name, f, &BalanceOptions::default());
            assert_reference(name, f, &BalanceOptions { dor: true, ..Default::default() });
            // Every third switch searches its ports backwards and leaves
            // its lowest linked port out of the counting.
            let mut orders = Vec::new();
            let mut ignored = Vec::new();
            for (s, &node) in g.switch_nodes.iter().enumerate() {
                let np = f.nodes[node as usize].num_ports;
                let mut o: Vec<u8> = (0..=np).collect();
                if s % 3 == 0 {
                    o[1..].reverse();
                    if let Some(l) = g.sw_ports[s].iter().find(|l| l.peer_sw != NONE) {
                        ignored.push((node, l.port));
                    }
                }
                orders.push(o);
            }
            let opts = BalanceOptions { search_order: Some(orders), ignored_ports: ignored, ..Default::default() };
            assert_reference(name, f, &opts);
        }
    }

    /// An end port behind a down link receives no traffic: the weighted
    /// tables must not count it, or their loads and the loads the
    /// balancing pass and the verifier count (usable destinations only)
    /// part ways. Here h2 (down) comes between h1 and h3 in the routing
    /// order; counted, it would push both of h0's routes onto one of a's
    /// two links.
    #[test]
    fn weighted_tables_count_only_usable_destinations() {
        let text = "Switch 4 \"a\"\n[1] \"b\"[1]\n[2] \"b\"[2]\n[3] \"h0\"[1]\n\n\
                    Switch 5 \"b\"\n[3] \"h1\"[1]\n[4] \"h2\"[1]\n[5] \"h3\"[1]\n\n\
                    Hca 1 \"h0\"\n\nHca 1 \"h1\"\n\nHca 1 \"h2\"\n\nHca 1 \"h3\"\n";
        let topo = sm_topology::parse_str(text, "down").unwrap();
        let mut f = sm_topology::lids::snapshot(&topo, 0).unwrap();
        let node = |name: &str| f.nodes.iter().position(|n| n.description.as_str() == name).unwrap() as u32;
        let ca_port = |f: &FabricSnapshot, name: &str| f.nodes[node(name) as usize].first_port + 1;
        let h2 = ca_port(&f, "h2");
        f.ports[h2 as usize].state = sm_abi::PortState::Down;
        let g = Graph::new(&f);
        let d = g.distance_matrix();
        let guids: Vec<u64> = ["h1", "h2", "h3"].iter().map(|h| f.ports[ca_port(&f, h) as usize].guid).collect();
        let order = routing_order(&f, &g, &guids);
        let opts = BalanceOptions::default();
        let lfts = assign_lfts_weighted(&f, &g, &d, &order, &opts);
        let view = LinkView::new(&f, &g, &opts);
        let load = Traffic::new(&f, &g, &order).link_loads(&view, &d, &lfts);
        let a = g.sw_of_node[node("a") as usize];
        assert_eq!((load[view.link(a, 1)], load[view.link(a, 2)]), (1, 1), "h0's routes to h1 and h3 share a link");
        // The down port's LID is still routed, uncounted.
        let lid = f.ports[h2 as usize].lid as usize;
        assert!(lfts.iter().all(|l| l.ports[lid] != NO_ROUTE), "h2's LID left unrouted");
    }

    /// A switch with the most ports NodeInfo can give (255) still has its
    /// links: its ports' search order must not wrap around.
    #[test]
    fn a_255_port_switch_routes_through_its_links() {
        let text = "Switch 255 \"a\"\n[1] \"b\"[1]\n[254] \"h0\"[1]\n\n\
                    Switch 4 \"b\"\n[2] \"h1\"[1]\n\n\
                    Hca 1 \"h0\"\n\nHca 1 \"h1\"\n";
        let topo = sm_topology::parse_str(text, "wide").unwrap();
        let f = sm_topology::lids::snapshot(&topo, 0).unwrap();
        let node = |name: &str| f.nodes.iter().position(|n| n.description.as_str() == name).unwrap() as u32;
        let h1 = f.ports[f.nodes[node("h1") as usize].first_port as usize + 1].lid as usize;
        let lfts = min_hop_lfts(&f);
        let a = lfts.iter().find(|l| l.node == node("a")).expect("a's table");
        assert_eq!(a.ports[h1], 1, "h1 is reached through a's port 1");
    }

    #[test]
    fn balance_files_name_ignored_ports_and_skip_bad_lines() {
        let f = pair();
        let a = f.nodes.iter().position(|n| n.description.as_str() == "a").unwrap();
        let path = std::env::temp_dir().join(format!("smcore-kit-port-prof-{}", std::process::id()));
        let guid = f.nodes[a].guid;
        std::fs::write(&path, format!("0x{guid:x} 1\n0x{guid:x} one\n0xfeedbeef 2\nnot-a-guid\n")).unwrap();
        let files = BalanceFiles { port_prof_ignore_file: Some(path.clone()), ..Default::default() };
        let inputs = files.load(&f);
        std::fs::remove_file(&path).unwrap();
        let inputs = inputs.unwrap();
        assert_eq!(inputs.ignored_ports, vec![(a as u32, 1)]);
        assert_eq!(inputs.warnings.len(), 3, "{:?}", inputs.warnings);
        assert!(inputs.warnings.iter().any(|w| w.contains("0x00000000feedbeef not in the fabric")));
        let missing = BalanceFiles { guid_routing_order_file: Some(path.clone()), ..Default::default() };
        assert!(missing.load(&f).unwrap_err().reason.contains(&*path.to_string_lossy()));
    }

}
