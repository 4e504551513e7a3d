//! Degraded trees: moving destinations' flows off the busiest links.
//!
//! On a complete tree the walk of [`crate::route`] gives every link of a
//! level the same load. With a cable or a switch missing it cannot: each
//! destination's traffic reaches it down one main path, so a leaf with 11
//! uplinks left for 12 compute nodes gets the whole traffic of two
//! destinations down one of them (twice the pristine tree's busiest link),
//! and so does a switch that lost a parent. Tables are destination-based,
//! but nothing forces all sources of one destination onto one path: any
//! switch may forward a destination to any neighbour one hop closer to it
//! in the up/down sense.
//!
//! So after the walk, the CA-to-CA routes each directed inter-switch link
//! carries are counted, and while the busiest link can be relieved, one
//! entry at a time is moved: for a destination over that link, a switch
//! upstream of it (or the link's own switch) forwards to another
//! neighbour of the same direction (up stays up, down stays down) with an
//! equally short route that avoids the link, when the whole flow the
//! switch carries to the destination then loads no link of the new path
//! as much as the busiest link carried. Every move keeps paths up*/down*
//! (credit-loop free on one VL) and shortest, and strictly lowers the
//! sorted link loads, so the search ends; it stops when the busiest link
//! cannot be relieved. Only entries of destinations crossing a hot link
//! change, in a fixed order: the same fabric routes the same way, and a
//! small degradation leaves the rest of the walk's tables as they were.

use sm_abi::{NONE, NO_ROUTE};
use smcore_kit::graph::Sw;

use crate::route::Tables;
use crate::tree::{Tree, UNRANKED};

/// What the rebalancing did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rebalanced {
    /// Busiest link before, in CA-to-CA routes.
    pub before: u64,
    /// Busiest link after.
    pub after: u64,
    /// LFT entries changed.
    pub moves: u64,
}

/// A directed inter-switch link of the tree.
#[derive(Clone, Copy)]
struct Link {
    from: Sw,
    to: Sw,
    port: u8,
    up: bool,
}

/// One destination's routes as the tables give them, per switch.
struct Flow {
    /// Link taken towards the destination ([`NONE`]: none, or the
    /// destination's own switch).
    next: Vec<u32>,
    /// Hops to the destination's switch ([`u8::MAX`]: no route).
    hops: Vec<u8>,
    /// CA sources whose route crosses the switch (its own CAs included).
    weight: Vec<u64>,
    /// Busiest link load from the switch to the destination.
    path_max: Vec<u64>,
    /// The route from the switch crosses the hot link.
    via: Vec<bool>,
    /// Switches with a route, by hops ascending.
    order: Vec<Sw>,
}

/// What [`State::trace`] finds of one destination that only a move of
/// its own routes changes: kept per destination while the rebalancing
/// runs, so that a destination traced again costs a copy rather than a
/// walk of its column of every switch's table.
#[derive(Clone)]
struct Traced {
    next: Vec<u32>,
    hops: Vec<u8>,
    weight: Vec<u64>,
    order: Vec<Sw>,
}

/// Destinations × switches above which traced destinations are not kept
/// (about 17 bytes each: 128 MiB at most).
const TRACED_KEPT: usize = 8 << 20;

struct State<'a> {
    tree: &'a Tree,
    links: Vec<Link>,
    /// `[switch][port]` -> link, [`NONE`] for other ports.
    link_at: Vec<Vec<u32>>,
    /// Per switch, its links (up then down).
    out: Vec<Vec<u32>>,
    /// CA ports per switch (the sources it carries).
    cas: Vec<u64>,
    load: Vec<u64>,
    /// Destination switch and LID of every CA port of the tree.
    dests: Vec<(Sw, u16)>,
    flow: Flow,
    /// By LID, the destination as last traced (when the fabric is small
    /// enough to keep them all, see [`TRACED_KEPT`]).
    traced: Vec<Option<Traced>>,
}

impl<'a> State<'a> {
    fn new(tree: &'a Tree, stride: usize) -> State<'a> {
        let nsw = tree.switches.len();
        let mut links = Vec::new();
        let mut link_at = vec![Vec::new(); nsw];
        let mut out = vec![Vec::new(); nsw];
        for (s, sw) in tree.switches.iter().enumerate() {
            for (up, list) in [(true, &sw.up), (false, &sw.down)] {
                for &g in list {
                    let grp = &tree.groups[g as usize];
                    for p in &tree.ports[grp.first as usize..(grp.first + grp.len) as usize] {
                        let at: &mut Vec<u32> = &mut link_at[s];
                        if at.len() <= p.num as usize {
                            at.resize(p.num as usize + 1, NONE);
                        }
                        at[p.num as usize] = links.len() as u32;
                        out[s].push(links.len() as u32);
                        links.push(Link {
                            from: s as Sw,
                            to: grp.remote,
                            port: p.num,
                            up,
                        });
                    }
                }
            }
        }
        let cas = tree.switches.iter().map(|s| s.cas.len() as u64).collect();
        let dests = tree
            .cas
            .iter()
            .filter(|c| (c.lid as usize) < stride)
            .map(|c| (c.sw, c.lid))
            .collect();
        State {
            tree,
            load: vec![0; links.len()],
            links,
            link_at,
            out,
            cas,
            traced: Vec::new(),
            dests,
            flow: Flow {
                next: vec![NONE; nsw],
                hops: vec![u8::MAX; nsw],
                weight: vec![0; nsw],
                path_max: vec![0; nsw],
                via: vec![false; nsw],
                order: Vec::with_capacity(nsw),
            },
        }
    }

    /// Fill [`State::flow`] for destination `(dsw, lid)`; `hot` is the
    /// switch whose route marks [`Flow::via`] ([`NONE`]: none).
    fn trace(&mut self, tables: &Tables, dsw: Sw, lid: u16, hot: Sw) {
        if let Some(t) = self.traced.get(lid as usize).and_then(Option::as_ref) {
            let f = &mut self.flow;
            f.next.copy_from_slice(&t.next);
            f.hops.copy_from_slice(&t.hops);
            f.weight.copy_from_slice(&t.weight);
            f.order.clear();
            f.order.extend_from_slice(&t.order);
        } else {
            self.walk(tables, dsw, lid);
            if let Some(slot) = self.traced.get_mut(lid as usize) {
                let f = &self.flow;
                *slot = Some(Traced {
                    next: f.next.clone(),
                    hops: f.hops.clone(),
                    weight: f.weight.clone(),
                    order: f.order.clone(),
                });
            }
        }
        self.mark(hot);
    }

    /// Routes, hops, order and weights of destination `(dsw, lid)` from the
    /// tables.
    fn walk(&mut self, tables: &Tables, dsw: Sw, lid: u16) {
        let nsw = self.tree.switches.len();
        let f = &mut self.flow;
        f.hops.fill(u8::MAX);
        f.weight.fill(0);
        f.order.clear();
        for s in 0..nsw {
            f.next[s] = NONE;
            if self.tree.switches[s].rank == UNRANKED {
                continue;
            }
            let port = tables.rows[s][lid as usize];
            if port == NO_ROUTE || s == dsw as usize {
                continue;
            }
            f.next[s] = self.link_at[s].get(port as usize).copied().unwrap_or(NONE);
        }
        // Hops by following the routes (they only get shorter along a
        // path; a route that runs out or loops gets none).
        f.hops[dsw as usize] = 0;
        let mut chain: Vec<Sw> = Vec::new();
        for s in 0..nsw {
            if f.hops[s] != u8::MAX || f.next[s] == NONE {
                continue;
            }
            chain.clear();
            let mut t = s;
            let mut base = u8::MAX;
            while chain.len() <= nsw {
                if f.hops[t] != u8::MAX {
                    base = f.hops[t];
                    break;
                }
                if f.next[t] == NONE {
                    break;
                }
                chain.push(t as Sw);
                t = self.links[f.next[t] as usize].to as usize;
            }
            if base == u8::MAX {
                // Dead end or loop: no route from this chain.
                for &c in &chain {
                    f.next[c as usize] = NONE;
                }
                continue;
            }
            for (i, &c) in chain.iter().rev().enumerate() {
                f.hops[c as usize] = base.saturating_add(i as u8 + 1);
            }
        }
        // Order by hops (counting sort), then weights far to near and the
        // busiest link on the way and the hot mark near to far.
        let max_h = f
            .hops
            .iter()
            .filter(|&&h| h != u8::MAX)
            .max()
            .copied()
            .unwrap_or(0) as usize;
        let mut count = vec![0usize; max_h + 2];
        for &h in &f.hops {
            if h != u8::MAX {
                count[h as usize + 1] += 1;
            }
        }
        for i in 1..count.len() {
            count[i] += count[i - 1];
        }
        f.order.resize(count[max_h + 1], 0);
        for s in 0..nsw {
            let h = f.hops[s];
            if h != u8::MAX {
                f.order[count[h as usize]] = s as Sw;
                count[h as usize] += 1;
            }
        }
        for &s in &f.order {
            f.weight[s as usize] = self.cas[s as usize];
        }
        for &s in f.order.iter().rev() {
            let l = f.next[s as usize];
            if l != NONE {
                let to = self.links[l as usize].to as usize;
                f.weight[to] += f.weight[s as usize];
            }
        }
    }

    /// The busiest link on the way and the hot mark of the traced
    /// destination, near to far, with the loads as they are.
    fn mark(&mut self, hot: Sw) {
        let f = &mut self.flow;
        for &s in &f.order {
            let l = f.next[s as usize];
            if l == NONE {
                f.path_max[s as usize] = 0;
                f.via[s as usize] = s == hot;
            } else {
                let to = self.links[l as usize].to as usize;
                f.path_max[s as usize] = self.load[l as usize].max(f.path_max[to]);
                f.via[s as usize] = s == hot || f.via[to];
            }
        }
    }

    /// Add (or take off) the flow of the traced destination: every switch's
    /// sources less the destination itself, over its link.
    fn count_traced(&mut self, dsw: Sw) {
        let f = &self.flow;
        for &s in &f.order {
            let l = f.next[s as usize];
            if l == NONE || s == dsw {
                continue;
            }
            self.load[l as usize] += f.weight[s as usize];
        }
    }

    /// Move `w` routes from the path starting with link `old` to the path
    /// starting with link `new`.
    fn shift(&mut self, old: u32, new: u32, w: u64) {
        for (l, add) in [(old, false), (new, true)] {
            let mut l = l;
            let mut guard = 0;
            while l != NONE && guard <= self.tree.switches.len() {
                let ld = &mut self.load[l as usize];
                *ld = if add { *ld + w } else { ld.saturating_sub(w) };
                l = self.flow.next[self.links[l as usize].to as usize];
                guard += 1;
            }
        }
    }

    /// The traced destination's routes after its flow `w` at `x` moved
    /// from link `old` to `new` (the hops stay, so does the order): the
    /// weights along both paths, and the kept copy.
    fn moved(&mut self, x: Sw, old: u32, new: u32, w: u64, lid: u16) {
        let nsw = self.tree.switches.len();
        let f = &mut self.flow;
        for (first, add) in [(old, false), (new, true)] {
            let mut l = first;
            let mut guard = 0;
            while l != NONE && guard <= nsw {
                let to = self.links[l as usize].to as usize;
                f.weight[to] = if add { f.weight[to] + w } else { f.weight[to].saturating_sub(w) };
                l = f.next[to];
                guard += 1;
            }
        }
        f.next[x as usize] = new;
        if let Some(Some(t)) = self.traced.get_mut(lid as usize) {
            t.next.copy_from_slice(&f.next);
            t.weight.copy_from_slice(&f.weight);
        }
    }

    fn busiest(&self) -> (u32, u64) {
        let mut best = (NONE, 0);
        for (i, &l) in self.load.iter().enumerate() {
            if best.0 == NONE || l > best.1 {
                best = (i as u32, l);
            }
        }
        best
    }
}

/// The best move for the traced destination off hot link `hot`
/// (carrying `cur`): (new busiest of the moved flow, switch, new link).
fn best_move(st: &State, hot: u32, cur: u64) -> Option<(u64, Sw, u32)> {
    let f = &st.flow;
    let mut best: Option<(u64, u64, Sw, u32)> = None;
    for &x in &f.order {
        let xs = x as usize;
        let w = f.weight[xs];
        if !f.via[xs] || w == 0 || f.next[xs] == NONE {
            continue;
        }
        let up = st.links[f.next[xs] as usize].up;
        let want = f.hops[xs].wrapping_sub(1);
        for &b in &st.out[xs] {
            let lb = st.links[b as usize];
            if lb.up != up || b == f.next[xs] || b == hot {
                continue;
            }
            let r = lb.to as usize;
            if f.hops[r] != want || f.via[r] {
                continue;
            }
            let cost = st.load[b as usize].max(f.path_max[r]) + w;
            let new_max = cost.max(cur - w.min(cur));
            if new_max >= cur {
                continue;
            }
            // Lowest resulting maximum, then the larger flow (more relief
            // per entry changed), then the first in order.
            let better = match best {
                None => true,
                Some((m, bw, _, _)) => new_max < m || (new_max == m && w > bw),
            };
            if better {
                best = Some((new_max, w, x, b));
            }
        }
    }
    best.map(|(m, _, x, b)| (m, x, b))
}

/// Relieve the busiest links of `tables` as described in the module
/// comment; at most `max_moves` entries change.
pub fn rebalance(tree: &Tree, tables: &mut Tables, max_moves: u64) -> Rebalanced {
    let stride = tables.rows.first().map_or(0, |r| r.len());
    let mut st = State::new(tree, stride);
    if st.links.is_empty() {
        return Rebalanced::default();
    }
    let dests = std::mem::take(&mut st.dests);
    if dests.len().saturating_mul(tree.switches.len()) <= TRACED_KEPT {
        st.traced = vec![None; stride];
    }
    for &(dsw, lid) in &dests {
        st.trace(tables, dsw, lid, NONE);
        st.count_traced(dsw);
    }
    let before = st.busiest().1;
    let mut moves = 0u64;
    'outer: while moves < max_moves {
        let (hot, cur) = st.busiest();
        let Link { from: u, port, .. } = st.links[hot as usize];
        let mut moved = false;
        for &(dsw, lid) in &dests {
            if tables.rows[u as usize][lid as usize] != port {
                continue;
            }
            // Move this destination's flows off the link while that helps.
            loop {
                let now = st.load[hot as usize];
                if now < cur || moves >= max_moves {
                    break;
                }
                st.trace(tables, dsw, lid, u);
                let Some((_, x, b)) = best_move(&st, hot, now) else {
                    break;
                };
                let old = st.flow.next[x as usize];
                let w = st.flow.weight[x as usize];
                st.shift(old, b, w);
                st.moved(x, old, b, w, lid);
                tables.rows[x as usize][lid as usize] = st.links[b as usize].port;
                moves += 1;
                moved = true;
                if tables.rows[u as usize][lid as usize] != port {
                    break;
                }
            }
            if st.load[hot as usize] < cur {
                continue 'outer;
            }
        }
        if !moved {
            break;
        }
    }
    let after = st.busiest().1;
    debug_assert!(after <= before);
    Rebalanced {
        before,
        after,
        moves,
    }
}
