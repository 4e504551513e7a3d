//! Continuity: a re-route that keeps what still works.
//!
//! After a change (a link or a switch down or back), an engine computes its
//! fresh routing as usual and hands it here with the routing in force before
//! the change ([`PreviousRouting`], tables by switch GUID and LID) and its
//! own validity rule ([`Rule`]). [`continue_routing`]:
//!
//! 1. keeps every previous LFT entry still valid under the rule: its port
//!    is still a healthy link to a switch and, for the hop rules, it still
//!    lies on a least-hop path in the engine's own hop table (plain hops
//!    for min-hop, legal up/down hops for up/down), or it is the port the
//!    fresh routing chose itself. This is OpenSM's rule on
//!    re-sweeps (`osm_switch_recommend_path` with `ignore_existing_lfts`
//!    false): an existing entry stays when its port is healthy and on a
//!    minimum-hop path;
//! 2. routes every broken entry again: with a hop rule, among the valid
//!    ports the one carrying the fewest end-port LIDs (kept routes counted,
//!    the fresh routing's choice on a tie), then, destination by
//!    destination, each takes the valid port whose path leaves the least
//!    load on its busiest link (these entries change anyway: placing them
//!    by load costs no entry and leaves the rebalancing less to move; on
//!    the 12-ary 3-tree with a middle switch down, 22,000 entries changed
//!    become 9,226); with [`Rule::Healthy`], as the fresh routing does (the
//!    engine's discipline decides the path);
//! 3. verifies the merged tables (every pair reachable, no forwarding loop,
//!    no VL overrun, and no credit loop with the fresh routing's SLs and
//!    SL2VL maps when the engine promises deadlock freedom) and falls back
//!    to the fresh routing, with a diagnostic saying why, when they fail;
//! 4. with a hop rule, rebalances: while a link carries more end-port →
//!    end-port routes than the fresh routing's busiest link, a route
//!    crossing it is moved, at the link's own switch or at one upstream of
//!    it, to another valid port whose new path avoids the link and stays
//!    below its load on every link; each move is recorded with the link it
//!    relieved. Moves changing the fewest entries against the previous
//!    routing come first (an entry the change already forced to move moves
//!    again for free), then those loading no link above the fresh routing's
//!    busiest, then those taking the most routes off the link. When single moves cannot
//!    bring the busiest link down to the fresh routing's (none helps, or
//!    their number or time runs out), the fresh routing's routes to whole
//!    destinations are taken, one destination at a time, those relieving
//!    the busiest link first, until no link is above it; each entry so
//!    changed is a move recorded with the link it relieved.
//!
//! Routes to a LID on the switch itself or to an end port hanging off it
//! have one right answer and are the fresh routing's.

use sm_abi::{FabricSnapshot, Level, Lft, PreviousRouting, Routing, NONE, NO_ROUTE};

use crate::balance::HopTable;
use crate::graph::{DistanceMatrix, Graph, Sw, SwPort};
use crate::verify::{verify_with, VerifyOptions};

/// When a previous LFT entry is still valid.
pub enum Rule<'a> {
    /// Healthy, and on a least-hop path in the fabric as it is now (min-hop
    /// engines, and engines whose routes are minimal and whose discipline
    /// the verifier checks).
    MinHop(&'a DistanceMatrix),
    /// Healthy, and on a least-hop path of the engine's own hop table
    /// (`via == least`): legal up/down paths, dimension order.
    Hops(&'a dyn HopTable),
    /// Healthy, and to the switch the fresh routing goes to (over another
    /// of parallel links): engines whose order of dimensions fixes the next
    /// switch (dor). Broken entries take the fresh routing's port and no
    /// route is moved to rebalance.
    SameNext,
    /// Healthy (a usable link to a switch); the engine's VL/SL discipline is
    /// checked on the merged tables by the verifier, with the fresh
    /// routing's SLs. Broken entries take the fresh routing's port and no
    /// route is moved to rebalance.
    Healthy,
}

/// How [`continue_routing`] judges and rebalances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContinuityOptions {
    /// A credit loop in the merged tables sends the result back to the fresh
    /// routing (engines that promise deadlock freedom).
    pub deadlock_free: bool,
    /// Move routes off links loaded above the fresh routing's busiest link
    /// (hop rules only).
    pub rebalance: bool,
    /// At most this many single route moves while rebalancing.
    pub max_moves: usize,
    /// The most work the search for single moves may do, in switches
    /// visited (a destination's routes traced over every switch counts the
    /// switch count). A re-route holds the sweep (and every trap behind
    /// it), so when single moves have not brought the busiest link down to
    /// the fresh routing's within it, whole destinations of the fresh
    /// routing finish the work: on the 12-ary 3-tree with a spine back,
    /// 3,713 single moves had taken 51 s. Counted, not timed, so the same
    /// fabric routes the same way on any machine.
    pub rebalance_work: u64,
    /// Broken entries take the fresh routing's port rather than the least
    /// loaded valid one, and nothing is rebalanced: engines whose path SLs
    /// or layers were computed for their own paths (lash, torus-2QoS).
    pub take_fresh: bool,
    /// The most work placing the broken entries by load may do before the
    /// rebalancing (switches visited; counted, not timed): past it the rest
    /// keep the port with the fewest end-port LIDs. On the 12-ary 3-tree
    /// with a middle switch down, placing all 9,226 stays well within it
    /// (about 30 ms) and leaves the rebalancing nothing to move.
    pub place_work: u64,
}

impl Default for ContinuityOptions {
    fn default() -> Self {
        ContinuityOptions {
            deadlock_free: false,
            rebalance: true,
            max_moves: 100_000,
            rebalance_work: 1_000_000,
            take_fresh: false,
            place_work: 20_000_000,
        }
    }
}

/// One route moved by the rebalancing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// Node GUID of the switch whose entry moved.
    pub switch_guid: u64,
    /// The destination LID.
    pub lid: u16,
    /// The port it left.
    pub from_port: u8,
    /// The port it took.
    pub to_port: u8,
    /// The link it relieved: switch GUID and port (the busiest link crossed
    /// by the route, above the fresh routing's busiest).
    pub relieved: (u64, u8),
    /// That link's load before the move.
    pub load_before: u64,
}

/// What [`continue_routing`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContinuityReport {
    /// Previous entries kept as they were.
    pub kept: u64,
    /// Previous entries the change broke (invalid under the rule, or
    /// missing), routed again.
    pub rerouted: u64,
    /// Entries that differ from the previous routing in the result.
    pub changed: u64,
    /// Routes moved by the rebalancing, in order.
    pub moves: Vec<Move>,
    /// The fresh routing's busiest inter-switch link (end-port → end-port
    /// routes).
    pub fresh_max: u64,
    /// The merged tables' busiest link before and after rebalancing.
    pub merged_max: (u64, u64),
    /// Why the merged tables were dropped for the fresh routing.
    pub fell_back: Option<String>,
    /// The search for single moves stopped at its work bound.
    pub budget_spent: bool,
    /// Destinations whose routes were taken whole from the fresh routing
    /// to finish the rebalancing.
    pub adopted: usize,
    /// Broken entries whose port the placement by load changed (from the
    /// port with the fewest end-port LIDs), before the rebalancing.
    pub placed: usize,
}

/// At most this many moves are listed one per diagnostic.
const MOVES_LISTED: usize = 32;

/// Continue from `previous`: keep what `rule` still allows, route the rest,
/// verify, rebalance (see the module comment). `fresh` is the engine's own
/// routing of `fabric` from scratch; its SLs, SL2VL and VLArb tables and
/// multicast tree are kept, its LFTs replaced by the merged ones. `name`
/// prefixes the diagnostics.
pub fn continue_routing(
    fabric: &FabricSnapshot,
    graph: &Graph,
    previous: &PreviousRouting,
    mut fresh: Routing,
    rule: &Rule<'_>,
    opts: &ContinuityOptions,
    name: &str,
) -> (Routing, ContinuityReport) {
    let mut report = ContinuityReport::default();
    if previous.lfts.is_empty() {
        return (fresh, report);
    }
    let n = graph.switch_count();
    // Destination switch of every LID (NONE: nobody answers to it).
    let lid_sw: Vec<Sw> =
        graph.lid_port.iter().map(|&pi| if pi == NONE { NONE } else { graph.entry_switch(fabric, pi) }).collect();
    let end_lid: Vec<bool> = graph
        .lid_port
        .iter()
        .map(|&pi| pi != NONE && fabric.nodes[fabric.ports[pi as usize].node as usize].kind.is_end_node())
        .collect();
    // Fresh LFT of each switch (index into fresh.lfts).
    let mut slot = vec![NONE; n];
    for (i, l) in fresh.lfts.iter().enumerate() {
        let s = graph.sw_of_node.get(l.node as usize).copied().unwrap_or(NONE);
        if s != NONE {
            slot[s as usize] = i as u32;
        }
    }
    let mut merged: Vec<Vec<u8>> = fresh.lfts.iter().map(|l| l.ports.to_vec()).collect();
    let link_of = |s: Sw, port: u8| graph.sw_ports[s as usize].iter().find(|l| l.port == port && l.peer_sw != NONE);
    let valid = |s: Sw, link: &SwPort, t: Sw| -> bool {
        match rule {
            Rule::MinHop(dist) => {
                let d = dist.get(s, t);
                d != u8::MAX && dist.get(link.peer_sw, t).saturating_add(1) == d
            }
            Rule::Hops(table) => {
                let least = table.least(s, t);
                least != u8::MAX && table.via(s, link, t) == least
            }
            Rule::SameNext | Rule::Healthy => true,
        }
    };
    let hop_rule = matches!(rule, Rule::MinHop(_) | Rule::Hops(_)) && !opts.take_fresh;
    // Per switch and port, the end-port LIDs routed through it (OpenSM's
    // per-port count), kept routes first.
    let mut counts: Vec<Vec<u32>> =
        graph.switch_nodes.iter().map(|&node| vec![0; fabric.nodes[node as usize].num_ports as usize + 1]).collect();
    let mut broken: Vec<(Sw, u16)> = Vec::new();
    let mut prev_of: Vec<Option<&[u8]>> = vec![None; n];
    for s in 0..n {
        let guid = fabric.nodes[graph.switch_nodes[s] as usize].guid;
        prev_of[s] = previous.lft(guid);
        let (Some(old), i) = (prev_of[s], slot[s]) else {
            continue;
        };
        if i == NONE {
            continue;
        }
        let lft = &mut merged[i as usize];
        for lid in 1..lft.len().min(lid_sw.len()) {
            let t = lid_sw[lid];
            if t == NONE || t == s as Sw {
                continue;
            }
            let was = old.get(lid).copied().unwrap_or(NO_ROUTE);
            let same_next = |link: &SwPort| link_of(s as Sw, lft[lid]).is_some_and(|f| f.peer_sw == link.peer_sw);
            match link_of(s as Sw, was) {
                // The fresh routing's own choice (a port, or no route) is
                // valid under the engine's rules whatever `rule` says: routes
                // an engine leaves out or makes longer than least-hop on
                // purpose, such as ftree's to switch LIDs, stay as they were.
                _ if was == lft[lid] => {
                    report.kept += 1;
                    if end_lid[lid] && was != NO_ROUTE {
                        counts[s][was as usize] += 1;
                    }
                }
                Some(link) if valid(s as Sw, link, t) && (!matches!(rule, Rule::SameNext) || same_next(link)) => {
                    lft[lid] = was;
                    report.kept += 1;
                    if end_lid[lid] {
                        counts[s][was as usize] += 1;
                    }
                }
                _ => {
                    report.rerouted += 1;
                    broken.push((s as Sw, lid as u16));
                }
            }
        }
    }
    if hop_rule {
        for &(s, lid) in &broken {
            let t = lid_sw[lid as usize];
            let lft = &mut merged[slot[s as usize] as usize];
            let own = lft[lid as usize];
            let best = graph.sw_ports[s as usize]
                .iter()
                .filter(|l| l.peer_sw != NONE && valid(s, l, t))
                .min_by_key(|l| (counts[s as usize][l.port as usize], l.port != own, l.port));
            if let Some(l) = best {
                lft[lid as usize] = l.port;
                if end_lid[lid as usize] {
                    counts[s as usize][l.port as usize] += 1;
                }
            }
        }
    }
    // Verify the merged tables with the fresh routing's SLs and VLs.
    let merged_lfts =
        fresh.lfts.iter().zip(&merged).map(|(l, m)| Lft { node: l.node, ports: m.clone().into() }).collect();
    let fresh_lfts = std::mem::replace(&mut fresh.lfts, merged_lfts);
    let vopts = VerifyOptions { credit_loops: opts.deadlock_free, ..VerifyOptions::default() };
    // Why tables fail the gate the engine's promises set, if they do.
    let judge = |r: &Routing| {
        let v = verify_with(fabric, graph, r, &vopts);
        if v.unreachable > 0 || v.looping > 0 || v.vl_violations > 0 {
            Some(v.failure().unwrap_or_else(|| "verification failed".into()))
        } else if opts.deadlock_free && v.credit_loop.is_some() {
            Some("credit loop with the fresh routing's SLs".to_string())
        } else {
            None
        }
    };
    if let Some(why) = judge(&fresh) {
        fresh.lfts = fresh_lfts;
        fresh.diag(
            Level::Warn,
            format!("{name}: the previous routing's kept entries do not verify ({why}); routed from scratch"),
        );
        report.fell_back = Some(why);
        report.changed = changed(graph, &prev_of, &fresh.lfts, &slot);
        return (fresh, report);
    }
    if hop_rule && opts.rebalance {
        let fresh_tables: Vec<&[u8]> = fresh_lfts.iter().map(|l| &l.ports[..]).collect();
        let loads = Loads::new(fabric, graph, &slot, &lid_sw, &end_lid);
        report.fresh_max = loads.max(&loads.compute(&fresh_tables));
        let mut tables: Vec<Vec<u8>> = merged;
        let mut order = broken.clone();
        order.sort_by_key(|&(s, lid)| (lid, s));
        report.placed = loads.place_broken(&mut tables, &order, &lid_sw, &|s, l, t| valid(s, l, t), opts.place_work);
        let mut moves = loads.rebalance(
            &mut tables,
            &prev_of,
            report.fresh_max,
            &|s, l, t| valid(s, l, t),
            opts.max_moves,
            opts.rebalance_work,
            &mut report,
        );
        if report.merged_max.1 > report.fresh_max {
            // Single moves could not bring the busiest link down to the
            // fresh routing's (stuck, or out of moves or time): whole
            // destinations of the fresh routing finish it.
            let before = moves.len();
            report.merged_max.1 = loads.adopt(&mut tables, &fresh_tables, report.fresh_max, &mut moves);
            report.adopted = moves[before..].iter().map(|m| m.1).collect::<std::collections::BTreeSet<_>>().len();
            if report.adopted > 0 && opts.deadlock_free {
                let adopted_lfts = fresh_lfts
                    .iter()
                    .zip(&tables)
                    .map(|(l, m)| Lft { node: l.node, ports: m.clone().into() })
                    .collect();
                fresh.lfts = adopted_lfts;
                if let Some(failure) = judge(&fresh) {
                    let why = format!(
                        "the kept routes with {} destinations of the fresh routing do not verify ({failure})",
                        report.adopted
                    );
                    fresh.lfts = fresh_lfts;
                    fresh.diag(Level::Warn, format!("{name}: {why}; routed from scratch"));
                    report.fell_back = Some(why);
                    report.changed = changed(graph, &prev_of, &fresh.lfts, &slot);
                    return (fresh, report);
                }
            }
        }
        report.moves = moves
            .into_iter()
            .map(|(s, lid, from, to, (rs, rp), load)| Move {
                switch_guid: fabric.nodes[graph.switch_nodes[s as usize] as usize].guid,
                lid,
                from_port: from,
                to_port: to,
                relieved: (fabric.nodes[graph.switch_nodes[rs as usize] as usize].guid, rp),
                load_before: load,
            })
            .collect();
        for (l, m) in fresh.lfts.iter_mut().zip(tables) {
            l.ports = m.into();
        }
    }
    report.changed = changed(graph, &prev_of, &fresh.lfts, &slot);
    fresh.diag(
        Level::Info,
        format!(
            "{name}: continued from the previous routing ({}): {} entries kept, {} routed again, {} changed; {} of those routed again placed by link load, {} routes moved to rebalance, {} destinations of them taken whole from the fresh routing (busiest link {} → {}, fresh routing {})",
            if previous.engine.is_empty() { "unnamed engine" } else { previous.engine.as_str() },
            report.kept,
            report.rerouted,
            report.changed,
            report.placed,
            report.moves.len(),
            report.adopted,
            report.merged_max.0,
            report.merged_max.1,
            report.fresh_max
        ),
    );
    for m in report.moves.iter().take(MOVES_LISTED) {
        fresh.diag(
            Level::Info,
            format!(
                "{name}: switch {:#018x} LID {} moved from port {} to {}, relieving link {:#018x}/{} ({} routes)",
                m.switch_guid, m.lid, m.from_port, m.to_port, m.relieved.0, m.relieved.1, m.load_before
            ),
        );
    }
    if report.moves.len() > MOVES_LISTED {
        fresh.diag(Level::Info, format!("{name}: and {} more moves", report.moves.len() - MOVES_LISTED));
    }
    (fresh, report)
}

/// The busiest of `links` once `c` routes now on the links of `old` take
/// them (the links both share carry them already).
fn busiest_with(load: &[u64], links: &[usize], old: &[usize], c: u64) -> u64 {
    links.iter().map(|&k| load[k] + if old.contains(&k) { 0 } else { c }).max().unwrap_or(0)
}

/// The rules that need nothing of the engine but the fabric, for
/// [`continue_fresh`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricRule {
    /// [`Rule::MinHop`] on the fabric's own distances.
    MinHop,
    /// [`Rule::SameNext`].
    SameNext,
    /// [`Rule::Healthy`].
    Healthy,
}

/// An engine's `reroute` in one call: `fresh` (its routing of `fabric` from
/// scratch) continued from `previous` under `rule` (see
/// [`continue_routing`]).
pub fn continue_fresh(
    fabric: &FabricSnapshot,
    previous: &PreviousRouting,
    fresh: Routing,
    rule: FabricRule,
    opts: &ContinuityOptions,
    name: &str,
) -> Routing {
    let graph = Graph::new(fabric);
    match rule {
        FabricRule::MinHop => {
            let dist = graph.distance_matrix();
            continue_routing(fabric, &graph, previous, fresh, &Rule::MinHop(&dist), opts, name).0
        }
        FabricRule::SameNext => continue_routing(fabric, &graph, previous, fresh, &Rule::SameNext, opts, name).0,
        FabricRule::Healthy => continue_routing(fabric, &graph, previous, fresh, &Rule::Healthy, opts, name).0,
    }
}

/// Entries of `lfts` that differ from the previous tables (a switch the
/// previous routing did not have counts every entry it routes).
fn changed(graph: &Graph, prev: &[Option<&[u8]>], lfts: &[Lft], slot: &[u32]) -> u64 {
    let mut n = 0;
    for (s, &i) in slot.iter().enumerate() {
        if i == NONE {
            continue;
        }
        let new = &lfts[i as usize].ports;
        for (lid, &p) in new.iter().enumerate().skip(1) {
            let old = prev[s].and_then(|o| o.get(lid).copied()).unwrap_or(NO_ROUTE);
            if old != p && graph.lid_port.get(lid).is_some_and(|&pi| pi != NONE) {
                n += 1;
            }
        }
    }
    n
}

/// Link loads of a set of tables: end-port → end-port routes per switch
/// port, as the verifier counts them (each LID of an end port a
/// destination, each usable end port a source).
struct Loads<'a> {
    graph: &'a Graph,
    slot: &'a [u32],
    /// Sources entering at each switch.
    hosts: Vec<u64>,
    /// End-port destination LIDs and their switch.
    dests: Vec<(u16, Sw)>,
    /// Link index base per switch.
    base: Vec<usize>,
    links: usize,
    /// Per switch and port number, the switch at the other end
    /// ([`NONE`]: an end port, a port down, or no such port).
    peer_at: Vec<Vec<Sw>>,
}

impl<'a> Loads<'a> {
    fn new(fabric: &FabricSnapshot, graph: &'a Graph, slot: &'a [u32], lid_sw: &[Sw], end_lid: &[bool]) -> Loads<'a> {
        let n = graph.switch_count();
        let mut hosts = vec![0u64; n];
        for &ep in &graph.end_ports {
            let s = graph.entry_switch(fabric, ep);
            if s != NONE {
                hosts[s as usize] += 1;
            }
        }
        let dests =
            (0..lid_sw.len()).filter(|&l| end_lid[l] && lid_sw[l] != NONE).map(|l| (l as u16, lid_sw[l])).collect();
        let mut base = Vec::with_capacity(n);
        let mut links = 0;
        for &node in &graph.switch_nodes {
            base.push(links);
            links += fabric.nodes[node as usize].num_ports as usize + 1;
        }
        let peer_at = graph
            .switch_nodes
            .iter()
            .zip(&graph.sw_ports)
            .map(|(&node, ports)| {
                let mut at = vec![NONE; fabric.nodes[node as usize].num_ports as usize + 1];
                for l in ports {
                    if let Some(x) = at.get_mut(l.port as usize) {
                        *x = l.peer_sw;
                    }
                }
                at
            })
            .collect();
        Loads { graph, slot, hosts, dests, base, links, peer_at }
    }

    /// The switch behind port `port` of `s` ([`NONE`] when none).
    fn peer(&self, s: Sw, port: u8) -> Sw {
        self.peer_at[s as usize].get(port as usize).copied().unwrap_or(NONE)
    }

    /// The next switch from `s` towards `lid` in `tables`, NONE when the
    /// route leaves the switched fabric (or has none).
    fn next(&self, tables: &[impl AsRef<[u8]>], s: Sw, lid: u16) -> (u8, Sw) {
        let i = self.slot[s as usize];
        if i == NONE {
            return (NO_ROUTE, NONE);
        }
        let port = tables[i as usize].as_ref().get(lid as usize).copied().unwrap_or(NO_ROUTE);
        (port, self.peer(s, port))
    }

    /// Per destination and switch, the routes crossing the switch towards
    /// it (its own sources and those arriving), and the resulting link loads.
    fn through(&self, tables: &[impl AsRef<[u8]>], lid: u16) -> Vec<u64> {
        let n = self.graph.switch_count();
        let mut indeg = vec![0u32; n];
        let mut next = vec![NONE; n];
        for (s, next) in next.iter_mut().enumerate() {
            let (_, p) = self.next(tables, s as Sw, lid);
            *next = p;
            if p != NONE {
                indeg[p as usize] += 1;
            }
        }
        let mut through = self.hosts.clone();
        let mut stack: Vec<usize> = (0..n).filter(|&s| indeg[s] == 0).collect();
        while let Some(s) = stack.pop() {
            let p = next[s];
            if p != NONE {
                through[p as usize] += through[s];
                indeg[p as usize] -= 1;
                if indeg[p as usize] == 0 {
                    stack.push(p as usize);
                }
            }
        }
        through
    }

    fn compute(&self, tables: &[impl AsRef<[u8]>]) -> Vec<u64> {
        let mut load = vec![0u64; self.links];
        for &(lid, t) in &self.dests {
            self.add_dest(tables, lid, t, &mut load, true);
        }
        load
    }

    /// Adds (or takes away) the routes to `lid` in `tables` to `load`.
    fn add_dest(&self, tables: &[impl AsRef<[u8]>], lid: u16, t: Sw, load: &mut [u64], add: bool) {
        self.add_traced(tables, lid, t, &self.through(tables, lid), load, add);
    }

    /// [`Loads::add_dest`] with the routes crossing each switch towards
    /// `lid` already traced ([`Loads::through`] of `tables`).
    fn add_traced(&self, tables: &[impl AsRef<[u8]>], lid: u16, t: Sw, through: &[u64], load: &mut [u64], add: bool) {
        let mut crossed = Vec::new();
        self.column_traced(tables, lid, t, through, if add { 1 } else { -1 }, &mut crossed);
        for (k, c) in crossed {
            load[k as usize] = (load[k as usize] as i64 + c).max(0) as u64;
        }
    }

    /// The routes to `lid` in `tables` per link they cross, pushed onto
    /// `out` as (link, `sign` × routes).
    fn column(&self, tables: &[impl AsRef<[u8]>], lid: u16, t: Sw, sign: i64, out: &mut Vec<(u32, i64)>) {
        self.column_traced(tables, lid, t, &self.through(tables, lid), sign, out);
    }

    /// [`Loads::column`] with [`Loads::through`] of `tables` given.
    fn column_traced(&self, tables: &[impl AsRef<[u8]>], lid: u16, t: Sw, through: &[u64], sign: i64, out: &mut Vec<(u32, i64)>) {
        for (s, &c) in through.iter().enumerate() {
            if s as Sw == t || c == 0 {
                continue;
            }
            let (port, peer) = self.next(tables, s as Sw, lid);
            if peer != NONE {
                out.push(((self.base[s] + port as usize) as u32, sign * c as i64));
            }
        }
    }

    /// Takes the fresh routing's tables to whole destinations, one
    /// destination at a time, while a link carries more than `cap`: for the
    /// busiest link, among the destinations whose fresh routes cross it
    /// less than the present ones do, the one whose adoption leaves the
    /// lowest load on the links it adds to (fewest entries changed on a
    /// tie). Each destination's routes come whole from one verified
    /// routing, so no column loops; every changed entry is recorded as a
    /// move relieving the link. It ends at or below `cap`: while a link is
    /// above the fresh routing's busiest, some destination not yet taken
    /// crosses it more than in the fresh routing. Returns the busiest link
    /// after.
    #[allow(clippy::type_complexity)]
    fn adopt(
        &self,
        tables: &mut [Vec<u8>],
        fresh: &[&[u8]],
        cap: u64,
        moves: &mut Vec<(Sw, u16, u8, u8, (Sw, u8), u64)>,
    ) -> u64 {
        let n = self.graph.switch_count();
        let mut load = self.compute(tables);
        let entry =
            |tables: &[Vec<u8>], i: u32, lid: u16| tables[i as usize].get(lid as usize).copied().unwrap_or(NO_ROUTE);
        let fresh_entry = |i: u32, lid: u16| fresh[i as usize].get(lid as usize).copied().unwrap_or(NO_ROUTE);
        // Per destination: the change of every link's load its adoption
        // makes, and the entries it changes.
        let mut deltas: Vec<Vec<(u32, i64)>> = vec![Vec::new(); self.dests.len()];
        let mut entries = vec![0usize; self.dests.len()];
        let mut relief: Vec<Vec<u32>> = vec![Vec::new(); self.links];
        let mut sum = vec![0i64; self.links];
        let mut seen = vec![false; self.links];
        let mut pushed = Vec::new();
        for (d, &(lid, t)) in self.dests.iter().enumerate() {
            entries[d] =
                self.slot.iter().filter(|&&i| i != NONE && entry(tables, i, lid) != fresh_entry(i, lid)).count();
            if entries[d] == 0 {
                continue;
            }
            pushed.clear();
            self.column(&*tables, lid, t, -1, &mut pushed);
            self.column(fresh, lid, t, 1, &mut pushed);
            let mut touched = Vec::new();
            for &(l, c) in &pushed {
                if !seen[l as usize] {
                    seen[l as usize] = true;
                    touched.push(l);
                }
                sum[l as usize] += c;
            }
            for l in touched {
                let c = std::mem::take(&mut sum[l as usize]);
                seen[l as usize] = false;
                if c != 0 {
                    deltas[d].push((l, c));
                    if c < 0 {
                        relief[l as usize].push(d as u32);
                    }
                }
            }
        }
        let mut adopted = vec![false; self.dests.len()];
        while let Some(e) = (0..self.links).filter(|&l| load[l] > cap).max_by_key(|&l| (load[l], std::cmp::Reverse(l)))
        {
            let heavy = load[e];
            let mut best: Option<(u64, usize, usize)> = None;
            for &d in &relief[e] {
                let d = d as usize;
                if adopted[d] {
                    continue;
                }
                let worst = deltas[d]
                    .iter()
                    .filter(|&&(l, c)| c > 0 || l as usize == e)
                    .map(|&(l, c)| (load[l as usize] as i64 + c).max(0) as u64)
                    .max()
                    .unwrap_or(0);
                if best.is_none_or(|b| (worst, entries[d]) < (b.0, b.1)) {
                    best = Some((worst, entries[d], d));
                }
            }
            let Some((_, _, d)) = best else { break };
            adopted[d] = true;
            for &(l, c) in &deltas[d] {
                load[l as usize] = (load[l as usize] as i64 + c).max(0) as u64;
            }
            let lid = self.dests[d].0;
            let relieved = self.owner(e);
            for s in 0..n {
                let i = self.slot[s];
                if i == NONE {
                    continue;
                }
                let (from, to) = (entry(tables, i, lid), fresh_entry(i, lid));
                if from != to {
                    if let Some(x) = tables[i as usize].get_mut(lid as usize) {
                        *x = to;
                    }
                    moves.push((s as Sw, lid, from, to, relieved, heavy));
                }
            }
        }
        self.max(&load)
    }

    /// The links from `u` towards `lid` (on switch `t`) in `tables`, with
    /// `first` taken for u's own entry; None when the walk does not arrive.
    fn path(&self, tables: &[Vec<u8>], u: Sw, first: u8, lid: u16, t: Sw) -> Option<Vec<usize>> {
        let n = self.graph.switch_count();
        let mut links = Vec::new();
        let (mut s, mut port) = (u, first);
        while s != t {
            let peer = self.peer(s, port);
            if peer == NONE || links.len() > n {
                return None;
            }
            links.push(self.base[s as usize] + port as usize);
            s = peer;
            port = self.next(tables, s, lid).0;
        }
        Some(links)
    }

    /// Places the entries the change forced to move (`broken`, sorted by
    /// LID; first routed by end-port LID counts) by load instead: each takes
    /// the valid port whose path leaves the lowest load on its busiest link.
    /// These entries change whatever port they take, so this costs no
    /// entry. Stops once it has visited about `max_work` switches. Returns
    /// how many entries it gave another port.
    fn place_broken(
        &self,
        tables: &mut [Vec<u8>],
        broken: &[(Sw, u16)],
        lid_sw: &[Sw],
        valid: &dyn Fn(Sw, &SwPort, Sw) -> bool,
        max_work: u64,
    ) -> usize {
        let n = self.graph.switch_count() as u64;
        let mut load = self.compute(tables);
        let mut work = 0u64;
        let mut placed = 0;
        let mut i = 0;
        while i < broken.len() {
            let lid = broken[i].1;
            let end = i + broken[i..].iter().take_while(|b| b.1 == lid).count();
            let t = lid_sw.get(lid as usize).copied().unwrap_or(NONE);
            if t == NONE || self.dests.binary_search_by_key(&lid, |d| d.0).is_err() {
                i = end;
                continue;
            }
            // Routes crossing each switch towards `lid` in the tables as
            // they are (traced once, and again after each move).
            work += n;
            let mut through = self.through(tables, lid);
            for &(u, _) in &broken[i..end] {
                if work >= max_work {
                    return placed;
                }
                let c = through[u as usize];
                if c == 0 {
                    continue;
                }
                let (own, _) = self.next(tables, u, lid);
                let Some(old_links) = self.path(tables, u, own, lid, t) else { continue };
                let score = |links: &[usize]| busiest_with(&load, links, &old_links, c);
                let mut best = (score(&old_links), own);
                for l in self.graph.sw_ports[u as usize].iter().filter(|l| l.peer_sw != NONE && l.port != own) {
                    if !valid(u, l, t) {
                        continue;
                    }
                    let Some(new_links) = self.path(tables, u, l.port, lid, t) else { continue };
                    work += new_links.len() as u64;
                    let worst = score(&new_links);
                    if worst < best.0 {
                        best = (worst, l.port);
                    }
                }
                if best.1 != own {
                    self.add_traced(tables, lid, t, &through, &mut load, false);
                    tables[self.slot[u as usize] as usize][lid as usize] = best.1;
                    through = self.through(tables, lid);
                    self.add_traced(tables, lid, t, &through, &mut load, true);
                    placed += 1;
                    work += 3 * n;
                }
            }
            i = end;
        }
        placed
    }

    fn max(&self, load: &[u64]) -> u64 {
        load.iter().copied().max().unwrap_or(0)
    }

    fn owner(&self, link: usize) -> (Sw, u8) {
        let s = self.base.partition_point(|&b| b <= link) - 1;
        (s as Sw, (link - self.base[s]) as u8)
    }

    /// Move routes off links above `cap` (see the module comment); returns
    /// the moves as (switch, LID, from, to, relieved link, its load).
    #[allow(clippy::type_complexity)]
    #[allow(clippy::too_many_arguments)]
    fn rebalance(
        &self,
        tables: &mut [Vec<u8>],
        prev: &[Option<&[u8]>],
        cap: u64,
        valid: &dyn Fn(Sw, &SwPort, Sw) -> bool,
        max_moves: usize,
        max_work: u64,
        report: &mut ContinuityReport,
    ) -> Vec<(Sw, u16, u8, u8, (Sw, u8), u64)> {
        let mut load = self.compute(tables);
        let before = self.max(&load);
        let mut moves = Vec::new();
        // Links that no move could relieve at their present load.
        let mut stuck = vec![false; self.links];
        // Switches visited by the search so far.
        let mut work = 0u64;
        while moves.len() < max_moves {
            if work >= max_work {
                report.budget_spent = true;
                break;
            }
            let Some(busiest) = (0..self.links)
                .filter(|&l| !stuck[l] && load[l] > cap)
                .max_by_key(|&l| (load[l], std::cmp::Reverse(l)))
            else {
                break;
            };
            let (rs, rport) = self.owner(busiest);
            let heavy = load[busiest];
            // The best move: a destination crossing the link, at a switch on
            // its way there, to another valid port whose new path stays
            // below `heavy` on every link. Among those: first the one that
            // changes the fewest entries against the previous routing (an
            // entry the change already forced to move, or one going back to
            // its previous port, moves for free), then one that leaves every
            // link of its new path at or below `cap` (no new link to
            // relieve), then the one taking the most routes off the link (up
            // to what it must shed: fewer moves), then the lowest load it
            // leaves.
            let mut best: Option<((i32, bool, std::cmp::Reverse<u64>, u64, u64), Sw, u16, u8, u8)> = None;
            let need = heavy - cap;
            let n = self.graph.switch_count();
            let busiest_link = self.base[rs as usize] + rport as usize;
            // The links from `u` towards `lid` in the tables (`first`
            // replacing u's own entry), or None when the walk does not
            // arrive at `t`.
            let path = |u: Sw, first: u8, lid: u16, t: Sw| self.path(tables, u, first, lid, t);
            work += self.dests.len() as u64;
            for &(lid, t) in &self.dests {
                let (p, _) = self.next(tables, rs, lid);
                if p != rport || rs == t {
                    continue;
                }
                // Tracing the routes and finding who crosses the link.
                work += 2 * n as u64;
                let through = self.through(tables, lid);
                if through[rs as usize] == 0 {
                    continue;
                }
                // The switches whose route to `lid` crosses the link: `rs`
                // and every switch upstream of it. A move at any of them
                // takes its share off the link.
                let mut crosses = vec![None::<bool>; n];
                crosses[rs as usize] = Some(true);
                crosses[t as usize] = Some(false);
                for u in 0..n {
                    let mut chain = Vec::new();
                    let mut s = u as Sw;
                    let verdict = loop {
                        if let Some(v) = crosses[s as usize] {
                            break v;
                        }
                        chain.push(s);
                        let (_, peer) = self.next(tables, s, lid);
                        if peer == NONE || chain.len() > n {
                            break false;
                        }
                        s = peer;
                    };
                    for c in chain {
                        crosses[c as usize] = Some(verdict);
                    }
                }
                for u in (0..n as Sw).filter(|&u| crosses[u as usize] == Some(true) && through[u as usize] > 0) {
                    let c = through[u as usize];
                    let (own, _) = self.next(tables, u, lid);
                    let Some(old_links) = path(u, own, lid, t) else {
                        continue;
                    };
                    work += old_links.len() as u64 + 1;
                    for l in self.graph.sw_ports[u as usize].iter().filter(|l| l.peer_sw != NONE && l.port != own) {
                        if !valid(u, l, t) {
                            continue;
                        }
                        let Some(new_links) = path(u, l.port, lid, t) else {
                            continue;
                        };
                        work += new_links.len() as u64 + 1;
                        if new_links.contains(&busiest_link) {
                            continue;
                        }
                        let worst = busiest_with(&load, &new_links, &old_links, c);
                        if worst >= heavy {
                            continue;
                        }
                        let was = prev[u as usize].and_then(|p| p.get(lid as usize).copied());
                        let cost = i32::from(was != Some(l.port)) - i32::from(was != Some(own));
                        let key = (cost, worst > cap, std::cmp::Reverse(c.min(need)), worst, c);
                        if best.as_ref().is_none_or(|b| key < b.0) {
                            best = Some((key, u, lid, own, l.port));
                        }
                    }
                }
            }
            let Some((_, s, lid, from, to)) = best else {
                stuck[busiest] = true;
                continue;
            };
            // Only the routes to this LID move.
            let t = self.dests.iter().find(|d| d.0 == lid).map_or(NONE, |d| d.1);
            self.add_dest(tables, lid, t, &mut load, false);
            tables[self.slot[s as usize] as usize][lid as usize] = to;
            self.add_dest(tables, lid, t, &mut load, true);
            moves.push((s, lid, from, to, (rs, rport), heavy));
            stuck.iter_mut().for_each(|x| *x = false);
        }
        report.merged_max = (before, self.max(&load));
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{balanced_lfts, min_hop_lfts, routing_order, BalanceOptions};
    use sm_abi::abi_stable::std_types::RVec;
    use sm_abi::PortState;

    fn previous_of(f: &FabricSnapshot, lfts: &[Lft]) -> PreviousRouting {
        crate::churn::previous_of(f, lfts, "test")
    }

    fn tree() -> FabricSnapshot {
        sm_topology::lids::snapshot(&sm_topology::gen::kary_ntree(4, 3, 2).expect("4-ary 3-tree"), 0).expect("LIDs")
    }

    /// Take the link of port `num` of node `node` down (both ends).
    fn link_down(f: &mut FabricSnapshot, node: u32, num: u8) {
        let pi = f.port_index(node, num) as usize;
        let peer = f.ports[pi].peer as usize;
        f.ports[pi].state = PortState::Down;
        f.ports[peer].state = PortState::Down;
    }

    fn balanced(f: &FabricSnapshot) -> Vec<Lft> {
        let graph = Graph::new(f);
        let dist = graph.distance_matrix();
        let order = routing_order(f, &graph, &[]);
        balanced_lfts(f, &graph, &dist, &order, &BalanceOptions::default()).0
    }

    #[test]
    fn nothing_changes_when_nothing_changed() {
        let f = tree();
        let old = min_hop_lfts(&f);
        let graph = Graph::new(&f);
        let dist = graph.distance_matrix();
        // The fresh routing is another valid min-hop routing: every previous
        // entry is still valid and stays.
        let fresh = Routing::single_vl(balanced(&f));
        let (r, rep) = continue_routing(
            &f,
            &graph,
            &previous_of(&f, &old),
            fresh,
            &Rule::MinHop(&dist),
            &ContinuityOptions::default(),
            "t",
        );
        assert_eq!(rep.rerouted, 0, "{rep:?}");
        assert!(rep.moves.is_empty() || rep.merged_max.0 > rep.fresh_max, "{rep:?}");
        if rep.moves.is_empty() {
            assert_eq!(rep.changed, 0);
            assert_eq!(
                r.lfts.iter().map(|l| l.ports.clone()).collect::<Vec<_>>(),
                old.iter().map(|l| l.ports.clone()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_link_down_changes_only_what_it_broke_and_verifies() {
        let healthy = tree();
        let old = balanced(&healthy);
        let mut f = healthy.clone();
        // The first switch-to-switch link of the first switch.
        let g0 = Graph::new(&f);
        let link = g0
            .sw_ports
            .iter()
            .enumerate()
            .find_map(|(s, ls)| ls.iter().find(|l| l.peer_sw != NONE).map(|l| (g0.switch_nodes[s], l.port)))
            .expect("a link");
        link_down(&mut f, link.0, link.1);
        let graph = Graph::new(&f);
        let dist = graph.distance_matrix();
        let fresh = Routing::single_vl(balanced(&f));
        let (r, rep) = continue_routing(
            &f,
            &graph,
            &previous_of(&f, &old),
            fresh,
            &Rule::MinHop(&dist),
            &ContinuityOptions::default(),
            "t",
        );
        assert!(rep.fell_back.is_none(), "{rep:?}");
        assert!(rep.rerouted > 0 && rep.kept > rep.rerouted, "{rep:?}");
        let v = crate::verify(&f, &r, &VerifyOptions::default());
        assert_eq!((v.unreachable, v.looping), (0, 0));
        // Every entry that changed was broken or moved by the rebalancing.
        let prev = previous_of(&f, &old);
        for l in r.lfts.iter() {
            let s = graph.sw_of_node[l.node as usize];
            let guid = f.nodes[l.node as usize].guid;
            let before = prev.lft(guid).expect("previous table");
            for (lid, (&was, &now)) in before.iter().zip(l.ports.iter()).enumerate().skip(1) {
                if was == now || graph.lid_port[lid] == NONE {
                    continue;
                }
                let t = graph.entry_switch(&f, graph.lid_port[lid]);
                let still = graph.sw_ports[s as usize]
                    .iter()
                    .any(|p| p.port == was && p.peer_sw != NONE && dist.get(p.peer_sw, t) + 1 == dist.get(s, t));
                let moved = rep.moves.iter().any(|m| m.switch_guid == guid && m.lid as usize == lid);
                assert!(!still || moved || t == s, "switch {s} LID {lid}: {was} → {now} though still valid");
            }
        }
        assert!(rep.merged_max.1 <= rep.merged_max.0);
        assert!(r.diagnostics.iter().any(|d| d.message.contains("continued from the previous routing")));
    }

    #[test]
    fn merged_tables_that_loop_fall_back_to_the_fresh_routing() {
        let f = tree();
        let graph = Graph::new(&f);
        // Previous tables that send every LID back and forth over one link
        // between two switches: each is healthy, so Rule::Healthy keeps
        // them, and the verifier must refuse the loop.
        let fresh_lfts = min_hop_lfts(&f);
        let (a, la) = graph
            .sw_ports
            .iter()
            .enumerate()
            .find_map(|(s, ls)| ls.iter().find(|l| l.peer_sw != NONE).map(|l| (s, *l)))
            .expect("a link");
        let b = la.peer_sw as usize;
        let back = graph.sw_ports[b].iter().find(|l| l.peer_sw as usize == a).expect("the way back").port;
        let mut old = fresh_lfts.clone();
        for (s, port) in [(a, la.port), (b, back)] {
            let lft = old.iter_mut().find(|l| l.node == graph.switch_nodes[s]).expect("table");
            for lid in 1..lft.ports.len() {
                let t = graph.lid_port[lid];
                if t != NONE && graph.entry_switch(&f, t) != s as Sw {
                    lft.ports[lid] = port;
                }
            }
        }
        let (r, rep) = continue_routing(
            &f,
            &graph,
            &previous_of(&f, &old),
            Routing::single_vl(fresh_lfts.clone()),
            &Rule::Healthy,
            &ContinuityOptions::default(),
            "t",
        );
        assert!(rep.fell_back.as_deref().is_some_and(|w| !w.is_empty()), "{rep:?}");
        assert_eq!(
            r.lfts.iter().map(|l| l.ports.clone()).collect::<Vec<_>>(),
            fresh_lfts.iter().map(|l| l.ports.clone()).collect::<Vec<_>>()
        );
        assert!(r.diagnostics.iter().any(|d| d.message.contains("routed from scratch")));
    }

    /// Previous tables: OpenSM's min-hop greedy after piling every route of
    /// each switch onto its first valid port: valid, badly balanced.
    fn piled(f: &FabricSnapshot, graph: &Graph, dist: &DistanceMatrix) -> Vec<Lft> {
        let mut old = min_hop_lfts(f);
        for l in old.iter_mut() {
            let s = graph.sw_of_node[l.node as usize];
            for lid in 1..l.ports.len() {
                let pi = graph.lid_port[lid];
                if pi == NONE {
                    continue;
                }
                let t = graph.entry_switch(f, pi);
                if t == s {
                    continue;
                }
                if let Some(p) = graph.sw_ports[s as usize]
                    .iter()
                    .find(|p| p.peer_sw != NONE && dist.get(p.peer_sw, t) + 1 == dist.get(s, t))
                {
                    l.ports[lid] = p.port;
                }
            }
        }
        old
    }

    #[test]
    fn kept_routes_above_the_fresh_busiest_link_are_moved_naming_the_link() {
        let f = tree();
        let graph = Graph::new(&f);
        let dist = graph.distance_matrix();
        let old = piled(&f, &graph, &dist);
        let fresh = Routing::single_vl(balanced(&f));
        let (r, rep) = continue_routing(
            &f,
            &graph,
            &previous_of(&f, &old),
            fresh,
            &Rule::MinHop(&dist),
            &ContinuityOptions { rebalance_work: u64::MAX, ..ContinuityOptions::default() },
            "t",
        );
        assert!(!rep.budget_spent, "{rep:?}");
        assert_eq!(rep.rerouted, 0);
        assert!(rep.merged_max.0 > rep.fresh_max, "{rep:?}");
        assert!(!rep.moves.is_empty());
        assert!(rep.merged_max.1 < rep.merged_max.0, "{rep:?}");
        // Every entry that differs from the previous routing is named by a
        // move (an entry moved and then taken back by a whole destination
        // is named but unchanged).
        let named: std::collections::BTreeSet<(u64, u16)> = rep.moves.iter().map(|m| (m.switch_guid, m.lid)).collect();
        let mut differing = 0;
        for (l, o) in r.lfts.iter().zip(&old) {
            for (lid, (a, b)) in l.ports.iter().zip(o.ports.iter()).enumerate() {
                if a != b {
                    differing += 1;
                    assert!(named.contains(&(f.nodes[l.node as usize].guid, lid as u16)), "LID {lid} unnamed");
                }
            }
        }
        assert_eq!(rep.changed, differing);
        for m in &rep.moves {
            assert!(m.load_before > rep.fresh_max);
        }
        assert!(r.diagnostics.iter().any(|d| d.message.contains("relieving link")));
        let v = crate::verify(&f, &r, &VerifyOptions::default());
        assert_eq!((v.unreachable, v.looping, v.non_minimal), (0, 0, 0));
    }

    #[test]
    fn a_rebalancing_out_of_work_is_finished_with_whole_destinations_of_the_fresh_routing() {
        let f = tree();
        let graph = Graph::new(&f);
        let dist = graph.distance_matrix();
        let old = piled(&f, &graph, &dist);
        let fresh_lfts = balanced(&f);
        let opts = ContinuityOptions { rebalance_work: 0, ..ContinuityOptions::default() };
        let (r, rep) = continue_routing(
            &f,
            &graph,
            &previous_of(&f, &old),
            Routing::single_vl(fresh_lfts.clone()),
            &Rule::MinHop(&dist),
            &opts,
            "t",
        );
        // No single move was searched; whole destinations did the work,
        // down to the fresh routing's busiest link, each entry named.
        assert!(rep.budget_spent && rep.fell_back.is_none(), "{rep:?}");
        assert!(rep.adopted > 0, "{rep:?}");
        assert!(rep.merged_max.0 > rep.fresh_max && rep.merged_max.1 <= rep.fresh_max, "{rep:?}");
        assert_eq!(
            rep.changed,
            rep.moves.iter().map(|m| (m.switch_guid, m.lid)).collect::<std::collections::BTreeSet<_>>().len() as u64
        );
        for m in &rep.moves {
            assert!(m.load_before > rep.fresh_max, "{m:?}");
        }
        // Fewer entries change than with the fresh routing taken whole.
        let whole = changed(&graph, &prev_of_lfts(&f, &graph, &old), &fresh_lfts, &slots(&graph, &fresh_lfts));
        assert!(rep.changed < whole, "{} changed, {} from scratch", rep.changed, whole);
        let v = crate::verify(&f, &r, &VerifyOptions::default());
        assert_eq!((v.unreachable, v.looping, v.non_minimal), (0, 0, 0));
        assert!(
            v.port_load.iter().copied().max().unwrap_or(0)
                <= crate::verify(&f, &Routing::single_vl(fresh_lfts), &VerifyOptions::default())
                    .port_load
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0)
        );
    }

    /// Previous tables by switch, as `continue_routing` sees them.
    fn prev_of_lfts<'a>(f: &FabricSnapshot, graph: &Graph, old: &'a [Lft]) -> Vec<Option<&'a [u8]>> {
        graph
            .switch_nodes
            .iter()
            .map(|&node| {
                old.iter().find(|l| f.nodes[l.node as usize].guid == f.nodes[node as usize].guid).map(|l| &l.ports[..])
            })
            .collect()
    }

    /// The index of each switch's table in `lfts`.
    fn slots(graph: &Graph, lfts: &[Lft]) -> Vec<u32> {
        let mut slot = vec![NONE; graph.switch_count()];
        for (i, l) in lfts.iter().enumerate() {
            slot[graph.sw_of_node[l.node as usize] as usize] = i as u32;
        }
        slot
    }

    #[test]
    fn an_empty_previous_routing_gives_the_fresh_one() {
        let f = tree();
        let graph = Graph::new(&f);
        let dist = graph.distance_matrix();
        let fresh_lfts = balanced(&f);
        let empty = PreviousRouting { engine: "".into(), lfts: RVec::new() };
        let (r, rep) = continue_routing(
            &f,
            &graph,
            &empty,
            Routing::single_vl(fresh_lfts.clone()),
            &Rule::MinHop(&dist),
            &ContinuityOptions::default(),
            "t",
        );
        assert_eq!(rep, ContinuityReport::default());
        assert_eq!(r.lfts.len(), fresh_lfts.len());
        assert!(r.diagnostics.is_empty());
    }
}
