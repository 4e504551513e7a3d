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

use crate::config::read_guid_list;
use crate::graph::{DistanceMatrix, Graph, Sw, SwPort};

/// Hop counts an engine allows between switches.
pub trait HopTable: Sync {
    /// Least hops from switch `s` to switch `t`, `u8::MAX` when `t` cannot be
    /// reached from `s`.
    fn least(&self, s: Sw, t: Sw) -> u8;
    /// Hops from `s` to `t` when leaving `s` through `link` (whose peer is a
    /// switch); `u8::MAX` when that is not allowed.
    fn via(&self, s: Sw, link: &SwPort, t: Sw) -> u8;

    /// For every switch `t`, bit `j` of `masks[t]` set when `links[j]` (at
    /// most 64 links of `s`) lies on a least-hop path from `s` to `t`.
    /// Tables with row access override this with a vectorisable loop.
    fn candidate_masks(&self, s: Sw, links: &[SwPort], masks: &mut [u64]) {
        for (t, m) in masks.iter_mut().enumerate() {
            let least = self.least(s, t as Sw);
            *m = 0;
            if least == u8::MAX {
                continue;
            }
            for (j, l) in links.iter().enumerate() {
                if self.via(s, l, t as Sw) == least {
                    *m |= 1 << j;
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

    fn candidate_masks(&self, s: Sw, links: &[SwPort], masks: &mut [u64]) {
        masks.fill(0);
        let own = self.to(s);
        for (j, l) in links.iter().enumerate() {
            let peer = self.to(l.peer_sw);
            let bit = 1u64 << j;
            for ((m, &ds), &dp) in masks.iter_mut().zip(own).zip(peer) {
                // On a least-hop path: one hop closer, and `t` reachable.
                let hit = (dp.wrapping_add(1) == ds) & (ds != u8::MAX);
                *m |= bit & (hit as u64).wrapping_neg();
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
}

/// What [`BalanceFiles`] say about one fabric.
#[derive(Debug, Clone, Default)]
pub struct BalanceInputs {
    /// GUIDs for [`routing_order`].
    pub guid_order: Vec<u64>,
    /// For [`BalanceOptions::ignored_ports`].
    pub ignored_ports: Vec<(u32, u8)>,
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
        Ok(inputs)
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
    (0..graph.switch_count() as Sw)
        .into_par_iter()
        .map(|s| Lft { node: graph.switch_nodes[s as usize], ports: assign_switch(fabric, graph, hops, &targets, opts, s).into() })
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

fn assign_switch<H: HopTable>(
    fabric: &FabricSnapshot,
    graph: &Graph,
    hops: &H,
    targets: &[Target],
    opts: &BalanceOptions,
    s: Sw,
) -> Vec<u8> {
    let node_idx = graph.switch_nodes[s as usize];
    let node = &fabric.nodes[node_idx as usize];
    // OpenSM's num_ports counts port 0.
    let num_ports = node.num_ports as usize + 1;
    let mut by_num: Vec<Option<SwPort>> = vec![None; num_ports];
    for l in &graph.sw_ports[s as usize] {
        by_num[l.port as usize] = Some(*l);
    }
    let search: Vec<u8> = match &opts.search_order {
        Some(orders) if orders.get(s as usize).is_some_and(|o| o.len() == num_ports) => orders[s as usize].clone(),
        _ => (0..num_ports as u8).collect(),
    };
    // Switch-to-switch links (the only possible least-hop candidates) with
    // their search position, in OpenSM's scan order from position 1: 1, 2,
    // ..., then position 0 last.
    let mut links: Vec<(usize, SwPort)> = search
        .iter()
        .enumerate()
        .filter_map(|(pos, &num)| by_num.get(num as usize).copied().flatten().map(|l| (pos, l)))
        .filter(|(_, l)| l.port != 0 && l.peer_sw != NONE)
        .collect();
    links.sort_by_key(|&(pos, _)| (pos + num_ports - 1) % num_ports);
    // Least-hop candidates towards every switch at once, as bit masks over
    // `links` (when they fit in 64 bits).
    let mut masks: Vec<u64> = Vec::new();
    if links.len() <= 64 {
        masks.resize(graph.switch_count(), 0);
        let link_list: Vec<SwPort> = links.iter().map(|&(_, l)| l).collect();
        hops.candidate_masks(s, &link_list, &mut masks);
    }
    let mut cached_mask = 0u64;
    let mut ignored = vec![false; num_ports];
    for &(n, p) in &opts.ignored_ports {
        if n == node_idx && (p as usize) < num_ports {
            ignored[p as usize] = true;
        }
    }
    let lmc_aware = fabric.lmc > 0;
    let mut remotes: Vec<Vec<Remote>> = if lmc_aware { vec![Vec::new(); targets.len()] } else { Vec::new() };
    let mut counts = vec![0u32; num_ports];
    let mut lft = vec![NO_ROUTE; fabric.max_lid as usize + 1];
    let mut candidates: Vec<(usize, SwPort)> = Vec::with_capacity(num_ports);
    let mut ordered: Vec<(usize, SwPort)> = Vec::with_capacity(num_ports);
    let mut scan: Vec<SwPort> = Vec::with_capacity(num_ports);
    let mut cached_t = NONE;
    let mut previous: Vec<u8> = Vec::with_capacity(num_ports);
    // Sorted candidate keys live in queue[head..].
    let mut queue: Vec<(u32, u16)> = Vec::with_capacity(8 * num_ports);
    let mut head = 0usize;
    let mut queue_valid = false;

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
                if !tg.is_switch && !ignored[tg.t_port as usize] {
                    counts[tg.t_port as usize] += 1;
                    if lmc_aware {
                        note_remote(&mut remotes[oi], fabric, tg.port, opts.dor);
                    }
                }
                continue;
            }
            // Least-hop ports towards `t`, as positions in the search
            // order; consecutive targets usually share `t`, so keep them.
            if t != cached_t && !masks.is_empty() {
                cached_t = t;
                let mask = masks[t as usize];
                if mask != cached_mask {
                    cached_mask = mask;
                    queue_valid = false;
                    candidates.clear();
                    let mut first_remote = NONE;
                    let mut bits = mask;
                    while bits != 0 {
                        let (pos, link) = links[bits.trailing_zeros() as usize];
                        bits &= bits - 1;
                        if !dor_admits(opts.dor, &mut first_remote, &link) {
                            continue;
                        }
                        candidates.push((pos, link));
                    }
                }
            } else if t != cached_t {
                // More than 64 switch links: per-target scan.
                cached_t = t;
                previous.clear();
                previous.extend(candidates.iter().map(|&(_, l)| l.port));
                candidates.clear();
                let least = hops.least(s, t);
                if least != u8::MAX {
                    let mut first_remote = NONE;
                    for &(pos, link) in &links {
                        if hops.via(s, &link, t) != least {
                            continue;
                        }
                        if !dor_admits(opts.dor, &mut first_remote, &link) {
                            continue;
                        }
                        candidates.push((pos, link));
                    }
                }
                queue_valid &= candidates.len() == previous.len()
                    && candidates.iter().zip(&previous).all(|(&(_, l), &p)| l.port == p);
            }
            if candidates.is_empty() {
                continue;
            }
            let choice = if !lmc_aware {
                // Fewest routes, first in scan order. Without LMC the scan
                // always starts at position 1 (the order of `candidates`), so
                // the candidates can be kept
                // sorted by (routes, scan position): the choice is the front,
                // and its new key goes back in from the rear, which in the
                // usual round-robin state is where it belongs. The order is
                // rebuilt whenever the candidate set changes (counts of its
                // ports change only through choices made from it: routes to
                // end ports on this switch use host ports, routes to switches
                // are not counted).
                if !queue_valid || head >= queue.len() {
                    queue.clear();
                    head = 0;
                    queue.extend(candidates.iter().enumerate().map(|(i, &(_, l))| (counts[l.port as usize], i as u16)));
                    queue.sort_unstable();
                    queue_valid = true;
                } else if head > 4 * candidates.len() {
                    queue.drain(..head);
                    head = 0;
                }
                let (count, i) = queue[head];
                head += 1;
                let l = candidates[i as usize].1;
                let key = (count + u32::from(!tg.is_switch && !ignored[l.port as usize]), i);
                let mut at = queue.len();
                while at > head && queue[at - 1] > key {
                    at -= 1;
                }
                if at == queue.len() {
                    queue.push(key);
                } else {
                    queue.insert(at, key);
                }
                l
            } else {
                // OpenSM scans from `start_from` round the search order; for
                // a port's later LMC LIDs that is after the previous LID's
                // port, except in DOR mode, where every LID starts at 1.
                let start_from = if offset > 0 && !opts.dor { lft[lid - 1] as usize + 1 } else { 1 };
                let rot = start_from % num_ports;
                ordered.clear();
                ordered.extend(candidates.iter().copied());
                ordered.sort_by_key(|&(pos, _)| (pos + num_ports - rot) % num_ports);
                scan.clear();
                scan.extend(ordered.iter().map(|&(_, l)| l));
                match choose(fabric, &scan, &counts, Some(remotes[oi].as_slice()), opts.dor) {
                    Some(c) => c,
                    None => continue,
                }
            };
            lft[lid] = choice.port;
            // OpenSM leaves routes to switches out of the port profile.
            if !tg.is_switch && !ignored[choice.port as usize] {
                counts[choice.port as usize] += 1;
                if lmc_aware {
                    note_remote(&mut remotes[oi], fabric, choice.peer_port, opts.dor);
                }
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

#[cfg(test)]
mod tests {
    use super::*;

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
