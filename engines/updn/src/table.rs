//! Up/down hop tables: for every destination switch, how many hops each
//! switch needs under the up/down rule, and which way it must leave.
//!
//! A forwarding table holds one port per destination, whatever path a
//! packet arrived by; but whether a switch may still go up depends on the
//! path (never up after down). OpenSM handles this with one BFS per
//! destination that tracks the direction of the step each switch was
//! reached by. It takes a neighbour's least hops whatever that
//! neighbour's own direction, so on irregular fabrics a switch can route
//! down into a neighbour whose shortest route then climbs again.
//!
//! Here every switch has a *mode* per destination, fixed by the same
//! level-by-level BFS from the destination: **down** when its route only
//! descends, **up** when it starts by climbing. A switch is reached at the
//! first level where it has a legal step into an already finished switch:
//! an up step into any switch, or a down step into a down-mode one; when
//! both exist at that level it takes down mode, so that switches above it
//! can descend through it. A down-mode switch then only uses down links to
//! down-mode neighbours and an up-mode switch only up links, whichever
//! port the balancing picks. Every route is therefore up*down* with
//! monotonically falling hop counts, and `via` gives exactly the hops of
//! the route the table will take.
//!
//! Preferring the shortest route can, with several roots, leave a switch
//! in up mode whose down route some other switch needed. When the BFS
//! leaves switches of the destination's part of the fabric unreached, the
//! destination is recomputed with every switch that *can* descend to it
//! held to down mode: that reaches every switch with any legal path, at
//! the price of longer routes for some.

use std::thread;

use smcore_kit::balance::HopTable;
use smcore_kit::graph::{Graph, Sw, SwPort};

use crate::rank::Orientation;

/// Table entry: bit 0 set when the switch routes down only, bits 1..8 the
/// hop count. One byte per (destination, switch) keeps the table as small
/// as OpenSM's min-hop matrix.
const UNREACHABLE: u8 = 0xFF;
/// Longest route the packed entry holds; LID routes in real fabrics stay
/// far below (directed-route discovery itself stops at 64 hops).
const MAX_HOPS: u8 = 126;

/// Least up/down-legal hops between switches, per destination.
#[derive(Debug, Clone)]
pub struct UpDownHops {
    n: usize,
    /// Row `s` holds switch `s`'s entries towards every destination (the
    /// BFS fills rows by destination; they are transposed once, so that a
    /// switch's candidate links are found from its row and its
    /// neighbours' rows, contiguous).
    entries: Vec<u8>,
    pos: Vec<u32>,
    /// Destinations that needed the down-preferring recomputation.
    pub recomputed: usize,
}

/// Destinations searched together by [`Batch::search`]: the bits of a word.
const BATCH: usize = 64;

impl UpDownHops {
    /// Compute the tables for every destination switch, in parallel,
    /// [`BATCH`] destinations per search.
    pub fn build(graph: &Graph, orient: &Orientation, comp: &[u32], comp_size: &[u32]) -> UpDownHops {
        let n = graph.switch_count();
        let mut entries = vec![UNREACHABLE; n * n];
        let mut recomputed = 0;
        if n > 0 {
            let batches = n.div_ceil(BATCH);
            let threads = thread::available_parallelism().map_or(1, |p| p.get()).min(batches);
            let per = batches.div_ceil(threads);
            recomputed = thread::scope(|scope| {
                let workers: Vec<_> = entries
                    .chunks_mut(per * BATCH * n)
                    .enumerate()
                    .map(|(i, chunk)| {
                        scope.spawn(move || {
                            let (mut batch, mut work) = (Batch::new(n), Work::new(n));
                            let mut redone = 0;
                            for (b, rows) in chunk.chunks_mut(BATCH * n).enumerate() {
                                let first = (i * per + b) * BATCH;
                                let reached = batch.search(graph, orient, first, rows);
                                for (j, row) in rows.chunks_mut(n).enumerate() {
                                    // A destination the search left switches of
                                    // its part without: the down-preferring pass.
                                    let t = first + j;
                                    let want = comp_size[comp[t] as usize] as usize;
                                    if work.short(graph, orient, t as Sw, row, reached[j] as usize, want) {
                                        redone += 1;
                                    }
                                }
                            }
                            redone
                        })
                    })
                    .collect();
                // A panicking worker re-raises here; the ABI adapter turns
                // it into an engine error.
                workers.into_iter().map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).sum()
            });
        }
        UpDownHops { n, entries: transpose(&entries, n), pos: orient.pos.clone(), recomputed }
    }

    /// The entry of switch `s` towards destination `t`.
    #[inline]
    fn entry(&self, s: Sw, t: Sw) -> u8 {
        self.entries[s as usize * self.n + t as usize]
    }

    /// Switch `s`'s entries towards every destination.
    #[inline]
    fn row(&self, s: Sw) -> &[u8] {
        &self.entries[s as usize * self.n..(s as usize + 1) * self.n]
    }

    /// Whether switch `s` has a route to destination switch `t`.
    #[inline]
    pub fn reaches(&self, s: Sw, t: Sw) -> bool {
        self.entry(s, t) != UNREACHABLE
    }
}

/// The `n` × `n` matrix `m` transposed, in tiles that stay in cache.
fn transpose(m: &[u8], n: usize) -> Vec<u8> {
    const TILE: usize = 64;
    let mut out = vec![0u8; n * n];
    for r0 in (0..n).step_by(TILE) {
        for c0 in (0..n).step_by(TILE) {
            for r in r0..(r0 + TILE).min(n) {
                for c in c0..(c0 + TILE).min(n) {
                    out[c * n + r] = m[r * n + c];
                }
            }
        }
    }
    out
}

impl HopTable for UpDownHops {
    #[inline]
    fn least(&self, s: Sw, t: Sw) -> u8 {
        match self.entry(s, t) {
            UNREACHABLE => u8::MAX,
            e => e >> 1,
        }
    }

    #[inline]
    fn via(&self, s: Sw, link: &SwPort, t: Sw) -> u8 {
        let (own, next) = (self.entry(s, t), self.entry(link.peer_sw, t));
        if own == UNREACHABLE || next == UNREACHABLE {
            return u8::MAX;
        }
        let own_down = own & 1 == 1;
        let up = self.pos[link.peer_sw as usize] < self.pos[s as usize];
        // Up mode climbs first; down mode descends into a switch that
        // itself only descends.
        let legal = if up { !own_down } else { own_down && next & 1 == 1 };
        if legal {
            (next >> 1) + 1
        } else {
            u8::MAX
        }
    }

    /// [`HopTable::via`] `== least` for all destinations at once, from
    /// the rows of `s` and of each neighbour (whether a link steps up is
    /// fixed per link, so each pass is plain byte arithmetic).
    fn candidate_masks(&self, s: Sw, links: &[SwPort], planes: &mut [u8]) {
        let own = self.row(s);
        for (group, plane) in links.chunks(8).zip(planes.chunks_mut(self.n)) {
            plane.fill(0);
            for (k, l) in group.iter().enumerate() {
                let next = self.row(l.peer_sw);
                let bit = 1u8 << k;
                let up = self.pos[l.peer_sw as usize] < self.pos[s as usize];
                // Legal: up mode climbing, or down mode into down mode.
                let mode = u8::from(!up);
                for ((m, &o), &x) in plane.iter_mut().zip(own).zip(next) {
                    let reachable = (o != UNREACHABLE) & (x != UNREACHABLE);
                    let legal = (o & 1 == mode) & (up | (x & 1 == 1));
                    let hit = reachable & legal & ((x >> 1).wrapping_add(1) == o >> 1);
                    *m |= bit & (hit as u8).wrapping_neg();
                }
            }
        }
    }
}

/// [`Work::bfs`] for up to [`BATCH`] destinations at once, one bit each:
/// per switch, the destinations it is reached for at the level at hand
/// (`frontier`), those of them in down mode (`down`), and those reached
/// at all (`seen`). A switch is reached at a level for a destination when
/// a neighbour reached at the level before lets it step there (up into
/// any, down into one in down mode), in down mode when one lets it step
/// down: what the one-destination search decides, for all the batch's
/// destinations with a word's operations.
struct Batch {
    seen: Vec<u64>,
    frontier: Vec<u64>,
    down: Vec<u64>,
    next: Vec<u64>,
    next_down: Vec<u64>,
}

impl Batch {
    fn new(n: usize) -> Batch {
        Batch { seen: vec![0; n], frontier: vec![0; n], down: vec![0; n], next: vec![0; n], next_down: vec![0; n] }
    }

    /// Fills `rows` (one per destination, from switch `first` on) as
    /// [`Work::bfs`] does without forced modes; gives how many switches
    /// each destination's search reached.
    fn search(&mut self, graph: &Graph, orient: &Orientation, first: usize, rows: &mut [u8]) -> [u32; BATCH] {
        let n = graph.switch_count();
        for v in [&mut self.seen, &mut self.frontier, &mut self.down] {
            v.fill(0);
        }
        let mut reached = [0u32; BATCH];
        rows.fill(UNREACHABLE);
        for (j, row) in rows.chunks_mut(n).enumerate() {
            let t = first + j;
            // Zero hops, down mode: arriving means delivered.
            row[t] = 1;
            self.seen[t] |= 1 << j;
            self.frontier[t] |= 1 << j;
            self.down[t] |= 1 << j;
            reached[j] = 1;
        }
        let pos = &orient.pos[..n];
        for hops in 1..=MAX_HOPS {
            let mut grew = false;
            for (m, adj) in graph.sw_adj.iter().enumerate() {
                let (mut by_up, mut by_down) = (0u64, 0u64);
                for &s in adj {
                    // The step is m → s, the direction traffic will take.
                    if pos[s as usize] < pos[m] {
                        by_up |= self.frontier[s as usize];
                    } else {
                        by_down |= self.down[s as usize];
                    }
                }
                let fresh = (by_up | by_down) & !self.seen[m];
                self.next[m] = fresh;
                self.next_down[m] = fresh & by_down;
                if fresh != 0 {
                    grew = true;
                    self.seen[m] |= fresh;
                    let mut bits = fresh;
                    while bits != 0 {
                        let j = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        rows[j * n + m] = (hops << 1) | (by_down >> j & 1) as u8;
                        reached[j] += 1;
                    }
                }
            }
            if !grew {
                break;
            }
            std::mem::swap(&mut self.frontier, &mut self.next);
            std::mem::swap(&mut self.down, &mut self.next_down);
        }
        reached
    }
}

/// Scratch space of one worker thread.
struct Work {
    frontier: Vec<Sw>,
    next: Vec<Sw>,
    can_descend: Vec<bool>,
    stack: Vec<Sw>,
    spare: Vec<u8>,
}

impl Work {
    fn new(n: usize) -> Work {
        Work {
            frontier: Vec::with_capacity(n),
            next: Vec::with_capacity(n),
            can_descend: vec![false; n],
            stack: Vec::with_capacity(n),
            spare: vec![UNREACHABLE; n],
        }
    }

    /// Fill `row` for destination `t`; `want` is the size of its part of
    /// the fabric. Returns whether the down-preferring pass was used.
    #[cfg(test)]
    fn destination(&mut self, graph: &Graph, orient: &Orientation, t: Sw, row: &mut [u8], want: usize) -> bool {
        let reached = self.bfs(graph, orient, t, row, None);
        self.short(graph, orient, t, row, reached, want)
    }

    /// `row`, filled for destination `t` by the plain search, reached
    /// `reached` switches of the `want` of its part of the fabric: when
    /// fewer, the down-preferring pass, taken when it reaches more.
    /// Returns whether it was.
    fn short(&mut self, graph: &Graph, orient: &Orientation, t: Sw, row: &mut [u8], reached: usize, want: usize) -> bool {
        if reached >= want {
            return false;
        }
        // Switches with an all-down route to `t`: walk down steps backwards.
        self.can_descend.fill(false);
        self.can_descend[t as usize] = true;
        self.stack.clear();
        self.stack.push(t);
        while let Some(y) = self.stack.pop() {
            for &x in &graph.sw_adj[y as usize] {
                if !self.can_descend[x as usize] && !orient.up(x, y) {
                    self.can_descend[x as usize] = true;
                    self.stack.push(x);
                }
            }
        }
        let mut spare = std::mem::take(&mut self.spare);
        let forced = std::mem::take(&mut self.can_descend);
        let again = self.bfs(graph, orient, t, &mut spare, Some(&forced));
        self.can_descend = forced;
        let better = again > reached;
        if better {
            row.copy_from_slice(&spare);
        }
        self.spare = spare;
        better
    }

    /// Level-by-level BFS from `t` over reversed steps. With `forced`,
    /// switches marked there accept only down steps and the others only
    /// up steps. Returns how many switches were reached.
    fn bfs(&mut self, graph: &Graph, orient: &Orientation, t: Sw, row: &mut [u8], forced: Option<&[bool]>) -> usize {
        row.fill(UNREACHABLE);
        row[t as usize] = 1; // zero hops, down mode: arriving means delivered
        self.frontier.clear();
        self.frontier.push(t);
        let mut reached = 1;
        let mut level = 0u8;
        while !self.frontier.is_empty() && level < MAX_HOPS {
            let hops = level + 1;
            self.next.clear();
            for &s in &self.frontier {
                let s_down = row[s as usize] & 1 == 1;
                for &m in &graph.sw_adj[s as usize] {
                    let e = row[m as usize];
                    if e != UNREACHABLE && e >> 1 != hops {
                        continue; // finished at an earlier level
                    }
                    // The step is m → s, the direction traffic will take.
                    let down = !orient.up(m, s);
                    if down && !s_down {
                        continue;
                    }
                    if let Some(f) = forced {
                        if f[m as usize] != down {
                            continue;
                        }
                    }
                    if e == UNREACHABLE {
                        row[m as usize] = (hops << 1) | down as u8;
                        self.next.push(m);
                        reached += 1;
                    } else if down {
                        row[m as usize] |= 1;
                    }
                }
            }
            std::mem::swap(&mut self.frontier, &mut self.next);
            level = hops;
        }
        reached
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank;
    use smcore_kit::conformance::cases;

    /// The invariant the LFTs rely on, checked through the `HopTable` view
    /// only: every switch that reaches a destination has a port with
    /// `via == least`, each such port leads one hop closer, and a port that
    /// steps down leads to a switch whose own such ports all step down. Any
    /// choice the balancing makes is then an up*down* route.
    fn assert_consistent(graph: &Graph, orient: &Orientation, hops: &UpDownHops, what: &str) {
        assert_masks(graph, hops, what);
        let n = graph.switch_count() as Sw;
        let candidates = |s: Sw, t: Sw| -> Vec<SwPort> {
            let least = hops.least(s, t);
            graph.sw_ports[s as usize]
                .iter()
                .filter(|l| l.peer_sw != sm_abi::NONE && hops.via(s, l, t) == least)
                .copied()
                .collect()
        };
        for t in 0..n {
            for s in 0..n {
                if s == t || hops.least(s, t) == u8::MAX {
                    continue;
                }
                let least = hops.least(s, t);
                let cs = candidates(s, t);
                assert!(!cs.is_empty(), "{what}: switch {s} reaches {t} but has no port for it");
                for l in cs {
                    assert_eq!(hops.least(l.peer_sw, t) + 1, least, "{what}: {s}->{t}");
                    if !orient.up(s, l.peer_sw) && l.peer_sw != t {
                        for next in candidates(l.peer_sw, t) {
                            assert!(
                                !orient.up(l.peer_sw, next.peer_sw),
                                "{what}: {s} descends into {} which climbs towards {t}",
                                l.peer_sw
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_table_choice_is_an_up_down_route() {
        for c in cases(0).unwrap() {
            let f = &c.fabric;
            let g = Graph::new(f);
            let (comp, sizes) = rank::components(&g);
            let dn = rank::dnup(f, &g, &rank::ca_switches(&g));
            assert_consistent(&g, &dn, &UpDownHops::build(&g, &dn, &comp, &sizes), &format!("{} dnup", c.name));
            // updn from every single root, and from the two lowest-GUID switches.
            for roots in (0..g.switch_count() as Sw).map(|r| vec![r]).chain([vec![0, 1]]) {
                let up = rank::updn(f, &g, &roots);
                let hops = UpDownHops::build(&g, &up, &comp, &sizes);
                assert_consistent(&g, &up, &hops, &format!("{} updn {roots:?}", c.name));
            }
        }
    }

    /// The batched search gives every destination the entries and the
    /// recomputations the one-destination search gives it.
    #[test]
    fn batched_searches_equal_one_destination_searches() {
        // The standard cases, and fabrics of more switches than a batch
        // has destinations (one irregular, with a switch and links down).
        let tree = sm_topology::gen::kary_ntree(6, 3, 1).unwrap();
        let irregular = sm_topology::gen::random_irregular(150, 6, 1, 40, 7).unwrap();
        let faulty = sm_topology::gen::with_faults(&irregular, 12, 1, 3).unwrap().0;
        let big = [tree, irregular, faulty].map(|t| sm_topology::lids::snapshot(&t, 0).unwrap());
        let fabrics = cases(0).unwrap().into_iter().map(|c| (c.name, c.fabric)).chain(big.into_iter().map(|f| ("big".to_string(), f)));
        for (name, f) in fabrics {
            let f = &f;
            let g = Graph::new(f);
            let n = g.switch_count();
            let (comp, sizes) = rank::components(&g);
            let orients = std::iter::once(rank::dnup(f, &g, &rank::ca_switches(&g)))
                .chain((0..n as Sw).map(|r| rank::updn(f, &g, &[r])));
            for orient in orients {
                let hops = UpDownHops::build(&g, &orient, &comp, &sizes);
                let mut work = Work::new(n);
                let mut rows = vec![UNREACHABLE; n * n];
                let mut redone = 0;
                for (t, row) in rows.chunks_mut(n.max(1)).enumerate() {
                    redone += work.destination(&g, &orient, t as Sw, row, sizes[comp[t] as usize] as usize) as usize;
                }
                assert_eq!(hops.entries, transpose(&rows, n), "{name}");
                assert_eq!(hops.recomputed, redone, "{name}");
            }
        }
    }

    /// The table through `least` and `via` only, so that its candidate
    /// masks are the trait's plain per-destination ones.
    struct Plain<'a>(&'a UpDownHops);

    impl HopTable for Plain<'_> {
        fn least(&self, s: Sw, t: Sw) -> u8 {
            self.0.least(s, t)
        }
        fn via(&self, s: Sw, link: &SwPort, t: Sw) -> u8 {
            self.0.via(s, link, t)
        }
    }

    /// The row-wise candidate masks are `via == least`, link by link and
    /// destination by destination.
    fn assert_masks(graph: &Graph, hops: &UpDownHops, what: &str) {
        let n = graph.switch_count();
        for s in 0..n as Sw {
            let links: Vec<SwPort> =
                graph.sw_ports[s as usize].iter().filter(|l| l.peer_sw != sm_abi::NONE).copied().collect();
            let mut fast = vec![0u8; n * links.len().div_ceil(8)];
            let mut plain = fast.clone();
            hops.candidate_masks(s, &links, &mut fast);
            Plain(hops).candidate_masks(s, &links, &mut plain);
            assert_eq!(fast, plain, "{what}: candidate masks of switch {s}");
        }
    }

    #[test]
    fn a_mode_taken_for_a_shortcut_is_recomputed_down_only() {
        // x reaches t down x-y1-y2-t (3 hops) or up via u, then down (2
        // hops); w is cabled to x alone and lies above it, so its only
        // legal route descends through x. The shortest-first BFS puts x in
        // up mode and strands w; the recomputation holds x to its down
        // route. The order is set by hand: the table takes any strict order.
        let text = "Switch 4 \"x\"\n[1] \"y1\"[1]\n[2] \"u\"[1]\n[3] \"w\"[1]\n\n\
                    Switch 4 \"y1\"\n[2] \"y2\"[1]\n\nSwitch 4 \"y2\"\n[2] \"t\"[1]\n\n\
                    Switch 4 \"u\"\n[2] \"t\"[2]\n\nSwitch 4 \"w\"\n\nSwitch 4 \"t\"\n";
        let topo = sm_topology::parse_str(text, "shortcut").unwrap();
        let f = sm_topology::lids::snapshot(&topo, 0).unwrap();
        let g = Graph::new(&f);
        let id = |name: &str| g.sw_of_node[f.nodes.iter().position(|n| n.description.as_str() == name).unwrap()];
        // Up is towards smaller positions: u above x, w above x (so w→x
        // descends), x above y1 above y2 above t, t below u.
        let order = ["u", "w", "x", "y1", "y2", "t"];
        let mut pos = vec![0u32; g.switch_count()];
        for (i, name) in order.iter().enumerate() {
            pos[id(name) as usize] = i as u32;
        }
        let orient = Orientation { pos, rank: vec![0; g.switch_count()] };
        let (comp, sizes) = rank::components(&g);
        let hops = UpDownHops::build(&g, &orient, &comp, &sizes);
        let (t, w, x) = (id("t"), id("w"), id("x"));
        // w's only legal route is w-x-y1-y2-t (4 hops): x must stay down.
        assert_eq!(hops.least(w, t), 4);
        assert_eq!(hops.least(x, t), 3);
        assert_eq!(hops.recomputed, 1);
        assert_consistent(&g, &orient, &hops, "shortcut");
    }
}
