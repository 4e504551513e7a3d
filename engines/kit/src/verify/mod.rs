//! Route verification: reachability, forwarding loops, path lengths, link
//! load and credit loops, all computed per destination tree.
//!
//! For one destination LID the LFT entries of all switches form a functional
//! graph ("each switch has one next hop"). Resolving it once per destination
//! answers, for every switch at once, whether the destination is reached,
//! how many switch hops it takes and whether the route loops; every source
//! then needs one lookup. The common case costs one pass: when every switch
//! of the destination's component forwards one hop nearer (checked against
//! the BFS distances its group of destinations shares), all routes are
//! shortest and the reversed BFS order is the tree's bottom-up order; other
//! LFTs take the general resolution (follow next hops, each switch once).
//!
//! The channel dependency graph (CDG) is built from the same trees: when
//! all paths share one SL and no SL2VL map splits them, each carrying tree
//! edge adds one dependency. Otherwise each destination's tree is walked
//! deepest switch first with one state per switch: per SL, the VLs its
//! paths leave on towards the next switch (sources of one entry class and
//! SL share a state). Entering the next switch, a state meets the record
//! of that switch's (input port, output port) pair, which holds the pair's
//! SL → VL map and its dependency bits side by side: per SL one nibble of
//! the map gives the VL out, and the input VLs of all SLs are ORed into the
//! bits at once, so a state costs one record (one cache line with up to 8
//! VLs; records of 9 or more VLs may straddle two), prefetched a few
//! switches ahead. Dependencies are bits per (switch, input port, output
//! port, output VL, input VL), set once whatever the number of paths.
//! Destinations hanging off one switch are resolved together, their LFT
//! entries and hop table rows shared. Cost ~ destinations × switches,
//! plus one path-SL query per (source LID, destination LID). With an SL
//! table, the destinations alone on their switch in the common case are
//! not walked: their dependencies come from bit sets over blocks of
//! destinations (`rounds.rs`), and a VL violation there sends the whole
//! verification back to the walk.
//!
//! The walk must give exactly the dependencies of every path walked on
//! its own: `tests/verify_deps.rs` holds it to that on tori with per-pair
//! SLs and dateline SL2VL maps, `tests/verify_reference.rs` the whole
//! verification on broken routings.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use sm_abi::{FabricSnapshot, NodeKind, Routing, SlTable, NONE, NO_ROUTE};

use crate::cache::{prefetch, prefetch_ahead};
use crate::graph::{by_distance, usable, Graph, Sw};

mod rounds;

/// What to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Build the channel dependency graph and look for cycles.
    pub credit_loops: bool,
    /// Also require every end port to reach every switch LID, and include
    /// those paths in the credit-loop analysis.
    pub switch_destinations: bool,
    /// How many example problems to keep.
    pub max_examples: usize,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions { credit_loops: true, switch_destinations: false, max_examples: 8 }
    }
}

/// A cycle in the channel dependency graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditLoop {
    /// Channels of one example cycle, as (transmitting port index, VL).
    pub cycle: Vec<(u32, u8)>,
    /// Channels that lie on some cycle.
    pub channels_on_cycles: usize,
    /// Number of strongly connected components with a cycle.
    pub cyclic_components: usize,
}

/// Result of verifying one routing.
#[derive(Debug, Clone, Default)]
pub struct Verification {
    /// (source end port, destination LID) pairs examined: both ends in the
    /// same physically connected part of the fabric.
    pub pairs: u64,
    /// Pairs skipped because no cable path joins them (a partitioned fabric
    /// is not the engine's fault).
    pub disconnected: u64,
    /// Pairs whose route does not arrive.
    pub unreachable: u64,
    /// Pairs whose route runs into a forwarding loop.
    pub looping: u64,
    /// Pairs routed longer than the shortest path in the fabric.
    pub non_minimal: u64,
    /// Sum of hops (links traversed) over routed pairs.
    pub total_hops: u64,
    /// Sum of hops of the shortest paths of routed pairs.
    pub total_min_hops: u64,
    /// Longest route in links.
    pub max_hops: u32,
    /// End-port → end-port routes carried by each transmitting port (index
    /// = port index). Only inter-switch links are meaningful for balance.
    pub port_load: Vec<u64>,
    /// Paths on a VL the transmitting port does not operate, mapped to VL 15,
    /// or given an invalid SL by the engine.
    pub vl_violations: u64,
    /// Highest VL any path uses, plus one.
    pub vls_used: u8,
    /// The CDG cycle found, if any (None also when not checked).
    pub credit_loop: Option<CreditLoop>,
    /// Whether credit loops were checked.
    pub credit_loops_checked: bool,
    /// Readable descriptions of the first problems found.
    pub examples: Vec<String>,
    /// Destinations whose per-path-SL walk was taken over from another
    /// destination of their switch (same tree beyond the switch, same
    /// source SLs) rather than walked again: a figure of the work spared.
    pub walks_shared: u64,
}

impl Verification {
    /// `c` pairs routed on shortest paths of `hops` links each.
    #[inline]
    fn add_shortest(&mut self, c: u64, hops: u32) {
        self.pairs += c;
        self.total_hops += hops as u64 * c;
        self.total_min_hops += hops as u64 * c;
        self.max_hops = self.max_hops.max(hops);
    }

    /// Everything reached, nothing loops, no credit loop, VLs within limits.
    pub fn ok(&self) -> bool {
        self.failure().is_none()
    }

    /// Why the routing fails verification, in one line.
    pub fn failure(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.unreachable > 0 {
            why.push(format!("{} of {} pairs unreachable", self.unreachable, self.pairs));
        }
        if self.looping > 0 {
            why.push(format!("{} pairs in forwarding loops", self.looping));
        }
        if self.vl_violations > 0 {
            why.push(format!("{} paths use a VL beyond the port's operational VLs", self.vl_violations));
        }
        if let Some(cl) = &self.credit_loop {
            why.push(format!(
                "credit loop: {} channels on cycles in {} components",
                cl.channels_on_cycles, cl.cyclic_components
            ));
        }
        if why.is_empty() {
            None
        } else {
            let mut s = why.join("; ");
            if let Some(e) = self.examples.first() {
                s.push_str(" (e.g. ");
                s.push_str(e);
                s.push(')');
            }
            Some(s)
        }
    }

    /// Average hops per routed pair.
    pub fn avg_hops(&self) -> f64 {
        let routed = self.pairs - self.unreachable - self.looping;
        if routed == 0 {
            0.0
        } else {
            self.total_hops as f64 / routed as f64
        }
    }

    /// (max, mean) routes over directed inter-switch links.
    pub fn inter_switch_load(&self, fabric: &FabricSnapshot) -> (u64, f64) {
        let mut max = 0;
        let mut sum = 0u64;
        let mut n = 0u64;
        for (i, p) in fabric.ports.iter().enumerate() {
            if p.peer == NONE || fabric.nodes[p.node as usize].kind != NodeKind::Switch {
                continue;
            }
            if fabric.nodes[fabric.ports[p.peer as usize].node as usize].kind != NodeKind::Switch {
                continue;
            }
            if !usable(fabric, i as u32) {
                continue;
            }
            let l = self.port_load.get(i).copied().unwrap_or(0);
            max = max.max(l);
            sum += l;
            n += 1;
        }
        (max, if n == 0 { 0.0 } else { sum as f64 / n as f64 })
    }
}

/// Destinations of one group resolved together (see
/// [`Ctx::resolve_chunk`], [`Ctx::resolve_fast`]); bounds the memory that
/// takes per thread.
const CHUNK: usize = 32;
// Both keep a chunk's destinations as the bits of a u32.
const _: () = assert!(CHUNK <= 32);

/// Below this many destinations per group (on average over the
/// destinations), the verifier
/// resolves them from [`LidColumns`].
const SMALL_GROUPS: usize = 8;

/// At most this many bytes of [`LidColumns`] (one per switch and
/// destination, up to as much again as the LFTs): beyond, verification
/// reads the LFTs by switch, slower on tori but without doubling the
/// memory of a fabric that large (10k switches by 48k destinations would
/// take 480 MB more).
const COLUMNS_MAX_BYTES: usize = 256 << 20;

/// Whether to resolve destinations from [`LidColumns`]: few destinations
/// per group (on average over destinations: `group_weight` is the sum of
/// the groups' squared sizes) and columns within `max_bytes`.
fn use_columns(group_weight: usize, dest_count: usize, switches: usize, max_bytes: usize) -> bool {
    group_weight < SMALL_GROUPS * dest_count && dest_count.saturating_mul(switches) <= max_bytes
}

/// How many switches ahead of the per-path-SL walk its pair records are
/// read (see [`Ctx::preload`]): enough for the reads to overlap, few
/// enough that what they bring is still cached when the walk gets there.
const PRELOAD: usize = 16;

/// Per-switch resolution state for one destination.
const UNKNOWN: u8 = 0;
const ACTIVE: u8 = 1;
const REACHES: u8 = 2;
const DEAD: u8 = 3;
const LOOPS: u8 = 4;

/// Where the (input port, output port) pairs of one switch sit in a
/// table of [`pairs_len`] slots (see [`PairIndex`]): the pairs of its
/// linked ports first, together (all a routing uses, a few cache lines
/// even on a switch with many unused ports), then a full square for
/// every pair.
struct Pairs {
    /// Linked ports (ports >= 1 that can carry traffic), ascending.
    k: u32,
    side: u32,
    /// Per port number: its rank among the linked ports, or `k` and up.
    dense: Vec<u8>,
}

impl Pairs {
    fn new(fabric: &FabricSnapshot, node: u32) -> Pairs {
        let n = &fabric.nodes[node as usize];
        let side = n.num_ports as u32 + 1;
        let mut dense = vec![u8::MAX; side as usize];
        let mut k = 0u32;
        for p in 1..side {
            if usable(fabric, n.first_port + p) {
                dense[p as usize] = k as u8;
                k += 1;
            }
        }
        Pairs { k, side, dense }
    }
}

/// Slots of a node's (input, output) pairs: `k` linked ports, `side` ports.
#[inline]
fn pairs_len(k: u32, side: u32) -> usize {
    (k * k + side * side) as usize
}

/// The slot of (in, out), with their ranks among the linked ports: the
/// linked square first, then the full one.
#[inline]
fn pair_slot(k: u32, side: u32, (i, o): (u8, u8), in_port: u8, out_port: u8) -> usize {
    let (i, o) = (i as u32, o as u32);
    if i < k && o < k {
        (i * k + o) as usize
    } else {
        (k * k + in_port as u32 * side + out_port as u32) as usize
    }
}

/// SL → VL lookup built from the routing's SL2VL list: per switch and
/// (input port, output port) pair, laid out as [`PairIndex`], the map as
/// a word of nibbles (SL n's VL in bits 4n..4n+4, a VL past 15 read as
/// 15). A pair the routing gives no map keeps SL n → VL n. Only switches'
/// maps are read: an end port's first link has no channel before it, so
/// its VL depends on nothing.
struct VlMap<'a> {
    pairs: &'a PairIndex,
    sw_of_node: &'a [u32],
    /// Per switch number: offset into `maps` of its pairs.
    base: Vec<usize>,
    maps: Vec<u64>,
    identity: bool,
    /// The highest VL below 15 the routing's maps give, if any.
    set_max: Option<u8>,
    /// Whether some pair of linked switch ports (all a route can take)
    /// has no map of the routing's: its paths keep their SL as their VL.
    identity_linked: bool,
}

impl<'a> VlMap<'a> {
    fn new(graph: &'a Graph, routing: &Routing, pairs: &'a PairIndex) -> VlMap<'a> {
        let n = graph.switch_count();
        let mut base = Vec::with_capacity(n + 1);
        base.push(0);
        if !routing.sl2vl.is_empty() {
            for s in 0..n {
                base.push(base[s] + pairs.len(s));
            }
        }
        let slots = base.last().copied().unwrap_or(0);
        let mut maps = vec![IDENTITY_NIBBLES; slots];
        // Per slot: whether the routing gave its map.
        let mut set = vec![false; slots];
        // The VLs below 15 the maps give, as bits.
        let mut given = 0u16;
        for e in routing.sl2vl.iter() {
            let Some(&sw) = graph.sw_of_node.get(e.node as usize).filter(|&&sw| sw != NONE) else { continue };
            let s = sw as usize;
            if !pairs.has(s, e.in_port, e.out_port) {
                continue;
            }
            let at = base[s] + pairs.index(s, e.in_port, e.out_port);
            let mut word = 0u64;
            for (sl, &vl) in e.vl.iter().enumerate() {
                let vl = vl.min(15);
                word |= (vl as u64) << (4 * sl);
                given |= 1 << vl;
            }
            maps[at] = word;
            set[at] = true;
        }
        // A switch without linked ports (all its links down) has no pair.
        let identity_linked = (0..n).any(|s| {
            let linked = (pairs.k[s] * pairs.k[s]) as usize;
            linked > 0
                && base.get(s).and_then(|&b| set.get(b..b + linked)).is_none_or(|square| square.iter().any(|&x| !x))
        });
        let set_max = (given & 0x7FFF != 0).then(|| 15 - (given & 0x7FFF).leading_zeros() as u8);
        let identity = routing.sl2vl.is_empty();
        VlMap { pairs, sw_of_node: &graph.sw_of_node, base, maps, identity, set_max, identity_linked }
    }

    /// The map word of pair slot `at` of switch `s`.
    #[inline]
    fn slot(&self, s: usize, at: usize) -> u64 {
        match self.identity {
            true => IDENTITY_NIBBLES,
            false => self.maps[self.base[s] + at],
        }
    }

    /// The map word of a node's (in, out) pair (SL n → VL n for a port the
    /// switch lacks, which a multicast entry may name).
    #[inline]
    fn word(&self, node: u32, in_port: u8, out_port: u8) -> u64 {
        match self.sw_of_node.get(node as usize) {
            Some(&sw) if sw != NONE && self.pairs.has(sw as usize, in_port, out_port) => {
                self.slot(sw as usize, self.pairs.index(sw as usize, in_port, out_port))
            }
            _ => IDENTITY_NIBBLES,
        }
    }

    #[inline]
    fn vl(&self, node: u32, in_port: u8, out_port: u8, sl: u8) -> u8 {
        (self.word(node, in_port, out_port) >> (4 * (sl & 15)) & 15) as u8
    }

    /// The (input port) row of a switch's table: its maps to every output
    /// port (None when the routing gives no maps).
    fn row(&self, s: usize, in_port: u8) -> Option<Vec<u64>> {
        if self.identity {
            return None;
        }
        Some((0..self.pairs.side[s]).map(|o| self.slot(s, self.pairs.index(s, in_port, o as u8))).collect())
    }

    /// How many VLs paths can take: the routing's maps' highest VL, and
    /// where a linked pair has no map, the highest SL a path may have
    /// (`max_sl`), plus one.
    fn vls(&self, max_sl: u8) -> u32 {
        let identity = self.identity_linked.then_some(max_sl.min(14));
        self.set_max.max(identity).map_or(1, |v| v as u32 + 1)
    }
}

/// [`Pairs`] of every switch in flat arrays, by switch number: the hot
/// loops index (input port, output port) pairs without a pointer chase
/// per switch.
struct PairIndex {
    k: Vec<u32>,
    side: Vec<u32>,
    /// Per switch: offset of its rank-per-port-number row in `dense`.
    dense_at: Vec<u32>,
    dense: Vec<u8>,
}

impl PairIndex {
    fn new(fabric: &FabricSnapshot, graph: &Graph) -> PairIndex {
        let n = graph.switch_count();
        let mut x = PairIndex { k: Vec::with_capacity(n), side: Vec::with_capacity(n), dense_at: Vec::with_capacity(n), dense: Vec::new() };
        for &node in &graph.switch_nodes {
            let p = Pairs::new(fabric, node);
            x.k.push(p.k);
            x.side.push(p.side);
            x.dense_at.push(x.dense.len() as u32);
            x.dense.extend_from_slice(&p.dense);
        }
        x
    }

    fn len(&self, s: usize) -> usize {
        pairs_len(self.k[s], self.side[s])
    }

    /// Whether both ports exist on switch `s` (a multicast entry may name
    /// a port the switch lacks).
    #[inline]
    fn has(&self, s: usize, in_port: u8, out_port: u8) -> bool {
        (in_port as u32) < self.side[s] && (out_port as u32) < self.side[s]
    }

    /// The slot of (in, out) on switch `s` (see [`Pairs`]).
    #[inline(always)]
    fn index(&self, s: usize, in_port: u8, out_port: u8) -> usize {
        let d = self.dense_at[s] as usize;
        let ranks = (self.dense[d + in_port as usize], self.dense[d + out_port as usize]);
        pair_slot(self.k[s], self.side[s], ranks, in_port, out_port)
    }

    /// The (input port, output port) of slot `at` on switch `s`; `num`
    /// holds the port number of each linked rank.
    fn ports(&self, s: usize, at: usize, num: &[u8]) -> (u8, u8) {
        let (k, side) = (self.k[s] as usize, self.side[s] as usize);
        if at < k * k {
            (num[at / k], num[at % k])
        } else {
            let r = at - k * k;
            ((r / side) as u8, (r % side) as u8)
        }
    }
}

/// Deduplicated channel dependencies: per switch a bit matrix over
/// (input port, VL) × (output port, VL), shared between threads, its
/// port pairs laid out as [`Pairs`]. Per pair and output VL, the input
/// VLs are one group of `stride` bits (a power of two, so a group never
/// straddles a word): a state arriving on several VLs adds its
/// dependencies in one OR.
///
/// With one SL and no SL2VL the pairs' bits are packed back to back.
/// Otherwise each pair is a record of `rec` words: its SL → VL map (a
/// nibble per SL) and then its bits, so that the walk of per-path-SL
/// states reads one record per (switch, input port, output port) where a
/// separate map table would cost another line (a record of 2 words, up to
/// 8 VLs, is one line; wider ones may straddle two). The records of the
/// linked squares (all routes take) of all switches come first, side by
/// side, the full squares after them: the walk's records take half the
/// cache they would interleaved.
struct DepBits<'a> {
    vls: u32,
    stride: u32,
    /// Words per pair record, 0 when packed.
    rec: usize,
    /// Per switch number: offset in `bits` (in u64 words) of its bits, or
    /// with records, of its linked square's records.
    base: Vec<usize>,
    /// With records, per switch number: offset of its full square's.
    full: Vec<usize>,
    pairs: &'a PairIndex,
    bits: Vec<AtomicU64>,
}

/// SL n → VL n as a map word.
const IDENTITY_NIBBLES: u64 = 0xFEDC_BA98_7654_3210;

/// Dependency bits for a pair record's words, gathered before they are
/// written: up to 8 VLs fill the first word alone, kept apart so that it
/// stays in a register.
#[derive(Default, Clone, Copy)]
struct Gathered {
    first: u64,
    more: [u64; 3],
}

impl Gathered {
    /// The input VLs `vls` into the group starting at bit `bit`.
    #[inline(always)]
    fn add(&mut self, bit: u32, vls: u16) {
        let word = (vls as u64) << (bit % 64);
        match bit / 64 {
            0 => self.first |= word,
            w => self.more[w as usize - 1] |= word,
        }
    }
}

impl<'a> DepBits<'a> {
    /// `maps` (per switch number and pair slot: the map word) asks for
    /// pair records.
    fn new(pairs: &'a PairIndex, vls: u32, maps: Option<&(dyn Fn(usize, usize) -> u64 + Sync)>) -> DepBits<'a> {
        let stride = vls.next_power_of_two();
        let rec = maps.map_or(0, |_| 1 + ((vls * stride) as usize).div_ceil(64));
        let n = pairs.k.len();
        let mut base = Vec::with_capacity(n);
        let mut full = Vec::new();
        let mut words = 0usize;
        for s in 0..n {
            base.push(words);
            words += match rec {
                0 => (pairs.len(s) * (vls * stride) as usize).div_ceil(64),
                r => (pairs.k[s] * pairs.k[s]) as usize * r,
            };
        }
        if rec != 0 {
            full.reserve(n);
            for s in 0..n {
                full.push(words);
                words += (pairs.side[s] * pairs.side[s]) as usize * rec;
            }
        }
        // Zeroed by both threads: the pages are first touched here.
        let bits: Vec<AtomicU64> = (0..words).into_par_iter().map(|_| AtomicU64::new(0)).collect();
        let deps = DepBits { vls, stride, rec, base, full, pairs, bits };
        if let Some(map) = maps {
            (0..n).into_par_iter().for_each(|s| {
                for at in 0..pairs.len(s) {
                    deps.bits[deps.record(s, at)].store(map(s, at), Ordering::Relaxed);
                }
            });
        }
        deps
    }

    /// Index of the record of pair slot `at` of switch `s` (records only).
    #[inline(always)]
    fn record(&self, s: usize, at: usize) -> usize {
        let linked = (self.pairs.k[s] * self.pairs.k[s]) as usize;
        match at.checked_sub(linked) {
            None => self.base[s] + at * self.rec,
            Some(f) => self.full[s] + f * self.rec,
        }
    }

    /// Index of the record of the pair (`in_port`, `out_port`) of switch
    /// `s` (records only, both ports on the switch).
    #[inline(always)]
    fn record_of(&self, s: usize, in_port: u8, out_port: u8) -> usize {
        self.record(s, self.pairs.index(s, in_port, out_port))
    }

    /// The SL → VL map word of a record.
    #[inline]
    fn map(&self, record: usize) -> u64 {
        self.bits[record].load(Ordering::Relaxed)
    }

    /// Asks the cache for a record, without waiting for it.
    #[inline]
    fn prefetch(&self, record: usize) {
        prefetch(&self.bits, record);
    }

    /// ORs gathered bits into a record's words.
    #[inline(always)]
    fn or_gathered(&self, record: usize, bits: Gathered) {
        if bits.first != 0 {
            self.or_record(record, 0, bits.first);
        }
        for (w, &b) in bits.more.iter().enumerate().take(self.rec - 2) {
            if b != 0 {
                self.or_record(record, w + 1, b);
            }
        }
    }

    /// The dependency (input VL `in_vl` → output VL `out_vl`) into a
    /// record's bits.
    #[inline]
    fn or_dep(&self, record: usize, out_vl: u8, in_vl: u8) {
        let bit = out_vl as usize * self.stride as usize + in_vl as usize;
        self.or_record(record, bit / 64, 1 << (bit % 64));
    }

    /// OR `mask` into word `i` of a record's bits.
    #[inline]
    fn or_record(&self, record: usize, i: usize, mask: u64) {
        let word = &self.bits[record + 1 + i];
        if word.load(Ordering::Relaxed) & mask != mask {
            word.fetch_or(mask, Ordering::Relaxed);
        }
    }

    #[inline]
    fn add(&self, sw: Sw, in_port: u8, in_vl: u8, out_port: u8, out_vl: u8) {
        let s = sw as usize;
        if !self.pairs.has(s, in_port, out_port) {
            return;
        }
        self.add_mask(sw, self.pairs.index(s, in_port, out_port), out_vl, 1 << in_vl);
    }

    /// Dependencies from each input VL of `in_vls` into `out_vl` at pair
    /// slot `at` of switch `sw` (VLs below `vls` only).
    #[inline]
    fn add_mask(&self, sw: Sw, at: usize, out_vl: u8, in_vls: u16) {
        let (word, bit) = match self.rec {
            0 => {
                let bit = (at * self.vls as usize + out_vl as usize) * self.stride as usize;
                (self.base[sw as usize] + bit / 64, bit)
            }
            _ => {
                let bit = out_vl as usize * self.stride as usize;
                (self.record(sw as usize, at) + 1 + bit / 64, bit)
            }
        };
        let word = &self.bits[word];
        let mask = (in_vls as u64) << (bit % 64);
        // Most dependencies recur for many destinations: a plain load spares
        // the cache line a locked write.
        if word.load(Ordering::Relaxed) & mask != mask {
            word.fetch_or(mask, Ordering::Relaxed);
        }
    }

    /// Every dependency held at switch `s`: (switch, input port, VL,
    /// output port, VL), by pair slot, then output VL, then input VL.
    fn each_at(&self, s: usize, f: &mut impl FnMut(Sw, u8, u8, u8, u8)) {
        let (v, stride) = (self.vls as usize, self.stride as usize);
        // Port number of each linked rank.
        let k = self.pairs.k[s] as usize;
        let mut num = vec![0u8; k];
        let d = self.pairs.dense_at[s] as usize;
        for (port, &r) in self.pairs.dense[d..d + self.pairs.side[s] as usize].iter().enumerate() {
            if (r as usize) < k {
                num[r as usize] = port as u8;
            }
        }
        if self.rec == 0 {
            let words = (self.pairs.len(s) * v * stride).div_ceil(64);
            for w in 0..words {
                let word = self.bits[self.base[s] + w].load(Ordering::Relaxed);
                for b in crate::cdg::bits(word) {
                    let bit = w * 64 + b as usize;
                    let (group, in_vl) = (bit / stride, bit % stride);
                    let (at, out_vl) = (group / v, group % v);
                    let (i, o) = self.pairs.ports(s, at, &num);
                    f(s as Sw, i, in_vl as u8, o, out_vl as u8);
                }
            }
            return;
        }
        for at in 0..self.pairs.len(s) {
            let r = self.record(s, at);
            for w in 1..self.rec {
                let word = self.bits[r + w].load(Ordering::Relaxed);
                for b in crate::cdg::bits(word) {
                    let bit = (w - 1) * 64 + b as usize;
                    let (i, o) = self.pairs.ports(s, at, &num);
                    f(s as Sw, i, (bit % stride) as u8, o, (bit / stride) as u8);
                }
            }
        }
    }
}

/// Destination LIDs to examine, each with the port that owns it.
fn destinations(fabric: &FabricSnapshot, graph: &Graph, opts: &VerifyOptions) -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    for (lid, &pi) in graph.lid_port.iter().enumerate() {
        if pi == NONE || lid == 0 {
            continue;
        }
        let kind = fabric.nodes[fabric.ports[pi as usize].node as usize].kind;
        if kind.is_end_node() || opts.switch_destinations {
            out.push((lid as u16, pi));
        }
    }
    out
}

/// Where a packet goes when a switch sends it out of a port.
enum Next {
    /// Into this switch.
    Switch(Sw),
    /// Delivered to this port (an end port, or the switch's own port 0).
    Port(u32),
    /// Nowhere: no such port, or the link is down.
    Dead,
}

/// Per switch and output port, the precomputed [`Next`] with what the
/// walks need of the hop: the hot loop of the verifier is one LFT read
/// and one table read per hop.
struct HopTab {
    base: Vec<u32>,
    width: Vec<u16>,
    /// Low 32 bits: `< PORT_BIT`: switch number; `PORT_BIT | i`: port
    /// index `i`; DEAD_HOP. Bits 32..40: the port number the link enters
    /// the next switch by; bits 40..48: the transmitting port's
    /// operational VLs (at least 1).
    code: Vec<u64>,
}

const PORT_BIT: u32 = 1 << 31;
const DEAD_HOP: u32 = u32::MAX;

impl HopTab {
    fn new(fabric: &FabricSnapshot, graph: &Graph) -> HopTab {
        let mut base = Vec::with_capacity(graph.switch_count());
        let mut width = Vec::with_capacity(graph.switch_count());
        let mut code = Vec::new();
        for &node in &graph.switch_nodes {
            let n = &fabric.nodes[node as usize];
            base.push(code.len() as u32);
            width.push(n.num_ports as u16 + 1);
            let vls = |pi: u32| (fabric.ports[pi as usize].op_vls.max(1) as u64) << 40;
            code.push((PORT_BIT | n.first_port) as u64 | vls(n.first_port));
            for p in 1..=n.num_ports {
                let pi = n.first_port + p as u32;
                let c = if !usable(fabric, pi) {
                    DEAD_HOP as u64
                } else {
                    let peer = fabric.ports[pi as usize].peer;
                    match graph.sw_of_node[fabric.ports[peer as usize].node as usize] {
                        NONE => (PORT_BIT | peer) as u64,
                        sw => sw as u64 | (fabric.ports[peer as usize].num as u64) << 32,
                    }
                };
                code.push(c | vls(pi));
            }
        }
        HopTab { base, width, code }
    }

    /// The hop from switch `s` by port `out`, with (port entering the next
    /// switch, operational VLs of `out`).
    #[inline]
    fn next(&self, s: Sw, out: u8) -> (Next, u8, u8) {
        hop(self.row(s), out)
    }

    /// Switch `s`'s codes, by output port.
    #[inline]
    fn row(&self, s: Sw) -> &[u64] {
        let b = self.base[s as usize] as usize;
        &self.code[b..b + self.width[s as usize] as usize]
    }
}

/// One hop code of a [`HopTab`] row, read through its parts.
#[derive(Clone, Copy)]
struct Code(u64);

/// A port past a switch's row: dead, entering nothing, one VL.
const NO_CODE: Code = Code(DEAD_HOP as u64 | 1 << 40);

impl Code {
    /// The code of port `out` in a switch's row.
    #[inline]
    fn of(row: &[u64], out: u8) -> Code {
        row.get(out as usize).map_or(NO_CODE, |&c| Code(c))
    }

    /// The next switch, `PORT_BIT |` the port delivered to, or `DEAD_HOP`.
    #[inline]
    fn target(self) -> u32 {
        self.0 as u32
    }

    /// The port number the link enters the next switch by.
    #[inline]
    fn entered(self) -> u8 {
        (self.0 >> 32) as u8
    }

    /// The transmitting port's operational VLs.
    #[inline]
    fn op_vls(self) -> u8 {
        (self.0 >> 40) as u8
    }

    /// Whether the hop goes one nearer the destination from a switch
    /// `here` hops away by `dist`: into a switch a hop nearer, or into the
    /// destination port (`dest`, as the code of a hop delivering to it).
    /// A dead hop is neither.
    #[inline]
    fn nearer(self, dist: &[u8], here: u32, dest: u32) -> bool {
        let c = self.target();
        if c & PORT_BIT == 0 {
            dist.get(c as usize).is_some_and(|&d| d as u32 + 1 == here)
        } else {
            c == dest
        }
    }
}

/// [`HopTab::next`] from a switch's row of codes.
#[inline]
fn hop(row: &[u64], out: u8) -> (Next, u8, u8) {
    let c = Code::of(row, out);
    let next = match c.target() {
        DEAD_HOP => Next::Dead,
        t if t & PORT_BIT != 0 => Next::Port(t & !PORT_BIT),
        t => Next::Switch(t),
    };
    (next, c.entered(), c.op_vls())
}

/// Where `out` takes a packet from a switch `here` hops from the
/// destination's switch, `row` its hop codes: the next switch (`NONE` at
/// the destination port `dest_port`) if that is one hop nearer by `dist`,
/// the port it enters by and the VLs the link operates.
#[inline]
fn minimal_hop(dist: &[u8], here: u8, row: &[u64], out: u8, dest_port: u32) -> (Option<u32>, u8, u8) {
    let c = Code::of(row, out);
    let next = c.nearer(dist, here as u32, PORT_BIT | dest_port).then(|| match c.target() {
        t if t & PORT_BIT != 0 => NONE,
        t => t,
    });
    (next, c.entered(), c.op_vls())
}

/// The LFTs by LID: per LID, every switch's output port, so that
/// resolving a destination reads one row in order where the LFTs by
/// switch give one cache line per switch and destination. Worth its
/// transposition (one pass over the LFTs, as much memory again) when few
/// destinations share a switch: groups of [`CHUNK`] already share their
/// lines. A LID past a switch's LFT reads [`NO_ROUTE`], which no port
/// has, so it fails the common case as a missing entry does.
struct LidColumns {
    switches: usize,
    /// Per LID, its row, `NONE` for a LID no destination has (a torus's
    /// switch LIDs, half of them, unless switches are destinations).
    row_of: Vec<u32>,
    ports: Vec<u8>,
}

/// LIDs per block of the transposition: one cache line of each LFT.
const COLUMN_BLOCK: usize = 64;

impl LidColumns {
    /// The columns of `lids` (ascending), each LID's row in their order.
    fn new(lfts: &[&[u8]], lids: &[u16]) -> LidColumns {
        let switches = lfts.len();
        let mut row_of = vec![NONE; lids.last().map_or(0, |&l| l as usize + 1)];
        for (r, &lid) in lids.iter().enumerate() {
            row_of[lid as usize] = r as u32;
        }
        // Zeroed pages are only mapped as the blocks are filled, by both
        // threads; a fill of NO_ROUTE here would touch them all first.
        let mut ports = vec![0u8; lids.len() * switches];
        if switches > 0 {
            ports.par_chunks_mut(COLUMN_BLOCK * switches).zip(lids.par_chunks(COLUMN_BLOCK)).for_each(|(block, part)| {
                for (s, lft) in lfts.iter().enumerate() {
                    for (i, &lid) in part.iter().enumerate() {
                        block[i * switches + s] = lft.get(lid as usize).copied().unwrap_or(NO_ROUTE);
                    }
                }
            });
        }
        LidColumns { switches, row_of, ports }
    }

    /// Every switch's output port for `lid` (a LID without a row: none).
    #[inline]
    fn row(&self, lid: u16) -> &[u8] {
        match self.row_of.get(lid as usize) {
            Some(&r) if r != NONE => {
                let at = r as usize * self.switches;
                self.ports.get(at..at + self.switches).unwrap_or(&[])
            }
            _ => &[],
        }
    }
}

/// End-port sources grouped by the switch their traffic enters at, so a
/// destination costs O(switches), not O(sources), on the fast path.
struct Sources {
    /// CSR offsets per switch into `ports`.
    start: Vec<u32>,
    ports: Vec<u32>,
    /// Sources not attached to a switch (back-to-back end ports).
    switchless: Vec<u32>,
}

impl Sources {
    fn new(fabric: &FabricSnapshot, graph: &Graph) -> Sources {
        let n = graph.switch_count();
        let mut start = vec![0u32; n + 1];
        let mut switchless = Vec::new();
        let entries: Vec<Sw> = graph.end_ports.iter().map(|&p| graph.entry_switch(fabric, p)).collect();
        for &e in &entries {
            if e != NONE {
                start[e as usize + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut ports = vec![0u32; start[n] as usize];
        for (&p, &e) in graph.end_ports.iter().zip(&entries) {
            if e == NONE {
                switchless.push(p);
            } else {
                ports[fill[e as usize] as usize] = p;
                fill[e as usize] += 1;
            }
        }
        Sources { start, ports, switchless }
    }

    fn at(&self, s: Sw) -> &[u32] {
        &self.ports[self.range(s)]
    }

    fn range(&self, s: Sw) -> std::ops::Range<usize> {
        self.start[s as usize] as usize..self.start[s as usize + 1] as usize
    }
}

/// Thread-local accumulation.
struct Acc {
    v: Verification,
    /// The routes per port index, for `v.port_load`: 32 bits hold them
    /// (no port carries more than all pairs, under 2^32 with IB's 48k
    /// unicast LIDs) and keep the table half as large in the cache the
    /// walk scatters its additions over.
    load_32: Vec<u32>,
    /// Per switch, the routes to the destination at hand leaving it
    /// (zero once added to `load_32`).
    sent: Vec<u32>,
    status: Vec<u8>,
    depth: Vec<u32>,
    /// Per switch, for the destination at hand: the next switch (NONE when
    /// it delivers or the route dies) and the LFT's output port.
    next: Vec<u32>,
    out: Vec<u8>,
    /// Per switch, of the hop its output port makes: the port it enters
    /// the next switch by, and its operational VLs.
    into: Vec<u8>,
    ovl: Vec<u8>,
    stack: Vec<Sw>,
    /// Hop distances from the group's switch, and the BFS order that
    /// produced them (the switches of its connected component).
    dist: Vec<u8>,
    queue: Vec<Sw>,
    /// Switches that deliver, shallowest first (the general case's order).
    order: Vec<Sw>,
    load: Vec<u64>,
    by_depth: Vec<Vec<Sw>>,
    /// Per input port (by port index), the output port of the dependency
    /// this thread added from it last on the single-SL path (0: none
    /// yet): destinations after one another mostly leave a switch by the
    /// same port for each way in (a tree's leaf's hosts, a chunk's LIDs),
    /// and this spares the shared bits a read that mostly misses the cache.
    last_out: Vec<u8>,
    /// [`Ctx::resolve_chunk`]'s or [`Ctx::resolve_fast`]'s results: the
    /// chunk's destinations in the common case, as bits.
    c_ok: u32,
    /// On the per-path-SL path, per destination of the chunk: the one
    /// whose rows it reads (itself, or the first of a run of destinations
    /// whose entries agree on every switch but their own), and for the
    /// others of a run their own last hop (output port, port entered,
    /// operational VLs).
    c_rep: Vec<usize>,
    c_last: Vec<(u8, u8, u8)>,
    c_out: Vec<u8>,
    c_into: Vec<u8>,
    c_ovl: Vec<u8>,
    c_next: Vec<u32>,
    /// [`Ctx::chunk_fast`]'s routes per (switch, destination of the chunk).
    c_load: Vec<u32>,
    /// Per-path-SL states of the destination at hand, per switch: the SLs
    /// of paths leaving it towards the next switch and per SL the VLs they
    /// leave on. Cleared as they are handled.
    st_sl: Vec<u16>,
    st_vl: Vec<[u16; 16]>,
    /// The source states of the switch at hand: (entry class, SLs).
    seeds: Vec<(u32, u16)>,
    /// [`Ctx::preload`]'s records of the switches asked for ahead, by
    /// their position in the walk's order modulo [`PRELOAD`].
    pre: [Option<usize>; PRELOAD],
    walk_ref: WalkRef,
    /// The destinations in the common case left to [`Ctx::rounds`]:
    /// (LID, port, switch).
    round_dests: Vec<(u16, u32, Sw)>,
}

/// What the per-path-SL walk's seeds need of a source end port.
#[derive(Clone, Copy)]
struct SeedSrc {
    /// Its first LID and how many it has (1 << LMC; 1 without a LID).
    lid: u16,
    lids: u16,
    /// The rank of its entry class among its switch's sources'.
    class: u32,
}

/// Per switch, its sources' LIDs by (far entry class, SL table class):
/// with a table, the LIDs of a group have the same SL to any destination
/// and enter by ports whose maps to the other switches agree, so a group
/// is one seed wherever the destination is not on their switch (the only
/// place the groups are read).
struct SeedGroups {
    /// CSR offsets per switch into `groups`.
    start: Vec<u32>,
    /// (entry class rank of the far class's first source, SL class, how
    /// many LIDs).
    groups: Vec<(u32, u32, u32)>,
}

impl SeedGroups {
    /// Adds switch `s`'s groups (switches are added in order): its
    /// sources `srcs` by (`far_class` of each, SL class of each LID).
    fn add_switch(&mut self, s: usize, srcs: &[SeedSrc], far_class: &[u32], table: &SlTable) {
        let from = self.groups.len();
        for (src, &entry) in srcs.iter().zip(far_class) {
            for off in 0..src.lids {
                let class = table.class(src.lid.wrapping_add(off));
                match self.groups[from..].iter_mut().find(|g| g.0 == entry && g.1 == class) {
                    Some(g) => g.2 += 1,
                    None => self.groups.push((entry, class, 1)),
                }
            }
        }
        self.start[s + 1] = self.groups.len() as u32;
    }

    fn at(&self, s: Sw) -> &[(u32, u32, u32)] {
        &self.groups[self.start[s as usize] as usize..self.start[s as usize + 1] as usize]
    }
}

/// The last full per-path-SL walk of a group's destination, for the next
/// destinations of the group to take over. Two destinations behind one
/// switch `t` whose LFT entries agree on every switch but `t`, and whose
/// paths from the sources of every switch two or more hops from `t` have
/// the same SLs, have the same states everywhere but on `t` and its
/// neighbours: the deeper switches' states, dependencies and VLs are the
/// held walk's (already in the shared bits), and only the last two hops
/// are walked again, from the states the neighbours had then.
#[derive(Default)]
struct WalkRef {
    /// The group switch of the walk held, NONE when none is.
    t: Sw,
    /// Its LFT entries, per switch.
    out: Vec<u8>,
    /// With an SL table, the class of its destination LID: a destination
    /// of the same class has the same SL from every source, so the SLs
    /// below are not kept.
    class: u32,
    /// The SLs of the paths from the sources of the switches two or more
    /// hops from `t`, switch by switch in the walk's order, source by
    /// source, LID by LID.
    sls: Vec<u8>,
    /// The states of `t` and its neighbours as the walk came to them:
    /// (switch, SLs, VLs per SL).
    tail: Vec<(Sw, u16, [u16; 16])>,
    /// Whether its destination is an end port (its paths' last link).
    is_end: bool,
    /// What the switches two or more hops from `t` added to the findings
    /// (their paths and routes are a taker's too: the same entries, the
    /// same hops), the routes they sent out of each port (port index,
    /// routes), and the routes arriving at `t` and its neighbours from
    /// them: a taker adds these and counts only the last two hops.
    far: FarCounts,
    far_loads: Vec<(u32, u32)>,
    near_load: Vec<(Sw, u64)>,
    /// Takers whose share of `far_loads` is not added yet: added once,
    /// times their number, when the walk is let go ([`WalkRef::settle`]),
    /// rather than a pass over the far switches' ports per taker.
    takers: u32,
}

impl WalkRef {
    /// Adds the takers' far loads to `load_32`.
    fn settle(&mut self, load_32: &mut [u32]) {
        let n = std::mem::take(&mut self.takers);
        if n > 0 {
            for &(pi, l) in &self.far_loads {
                load_32[pi as usize] += l * n;
            }
        }
    }
}

/// Path counts of part of a destination's tree (see [`WalkRef`]); its
/// longest path is in the walk's own `max_hops` already (a taker is
/// counted in the same [`Acc`] as the walk it takes over).
#[derive(Default, Clone, Copy)]
struct FarCounts {
    pairs: u64,
    total_hops: u64,
    total_min_hops: u64,
    non_minimal: u64,
}

impl FarCounts {
    fn of(v: &Verification) -> FarCounts {
        FarCounts { pairs: v.pairs, total_hops: v.total_hops, total_min_hops: v.total_min_hops, non_minimal: v.non_minimal }
    }

    fn since(self, before: FarCounts) -> FarCounts {
        FarCounts {
            pairs: self.pairs - before.pairs,
            total_hops: self.total_hops - before.total_hops,
            total_min_hops: self.total_min_hops - before.total_min_hops,
            non_minimal: self.non_minimal - before.non_minimal,
        }
    }
}

/// Verify a routing against a fabric.
pub fn verify(fabric: &FabricSnapshot, routing: &Routing, opts: &VerifyOptions) -> Verification {
    let graph = Graph::new(fabric);
    verify_with(fabric, &graph, routing, opts)
}

/// [`verify`] with a prebuilt [`Graph`].
pub fn verify_with(fabric: &FabricSnapshot, graph: &Graph, routing: &Routing, opts: &VerifyOptions) -> Verification {
    verify_with_mcast(fabric, graph, routing, opts, &[])
}

/// The forwarding of one multicast group: its SL and, per switch, the
/// ports its MFT entry sends to. Traffic entering a switch by one of them
/// leaves by all the others, so each (in, out) pair is a channel
/// dependency on the VLs the group's SL maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastRoute {
    /// The group's MLID (for messages).
    pub mlid: u16,
    /// The group's SL.
    pub sl: u8,
    /// (switch node index, ports of its MFT entry); port 0 (the switch's
    /// own management port) carries no dependency.
    pub switches: Vec<(u32, Vec<u8>)>,
}

/// Per port index, the port whose state stands for it when traffic from an
/// end port enters a switch: end-facing ports of one switch with the same
/// SL2VL rows lead to the same VLs everywhere, so one state per (class,
/// SL) replaces one per source. With `far`, the rows are compared on the
/// ports to other switches only, all that traffic entering there leaves
/// by towards a destination elsewhere (the rows to end ports tell apart
/// the end-facing ports of a switch whose maps differ only there, each to
/// itself, say).
fn entry_classes(fabric: &FabricSnapshot, graph: &Graph, vlmap: &VlMap, far: bool) -> Vec<u32> {
    let mut rep: Vec<u32> = (0..fabric.ports.len() as u32).collect();
    let mut seen: std::collections::HashMap<Vec<u64>, u32> = std::collections::HashMap::new();
    for (s, ports) in graph.sw_ports.iter().enumerate() {
        seen.clear();
        let mut first = NONE;
        for p in ports.iter().filter(|p| p.peer_sw == NONE) {
            let row = vlmap.row(s, p.port).map(|row| match far {
                false => row,
                true => ports.iter().filter(|o| o.peer_sw != NONE).map(|o| row[o.port as usize]).collect(),
            });
            rep[p.port_index as usize] = match row {
                None => {
                    if first == NONE {
                        first = p.port_index;
                    }
                    first
                }
                Some(row) => *seen.entry(row).or_insert(p.port_index),
            };
        }
    }
    rep
}

/// [`verify_with`], with multicast groups' dependencies added to the
/// credit-loop check: a routing is only deadlock free if unicast and
/// multicast traffic together close no cycle.
pub fn verify_with_mcast(
    fabric: &FabricSnapshot,
    graph: &Graph,
    routing: &Routing,
    opts: &VerifyOptions,
    mcast: &[McastRoute],
) -> Verification {
    run(fabric, graph, routing, opts, mcast, None, true)
}

/// [`verify`] with every destination's per-path-SL walk made on its own
/// (none taken over from another destination of its switch): for tests
/// that hold the sharing to the plain walk.
#[doc(hidden)]
pub fn verify_unshared(fabric: &FabricSnapshot, routing: &Routing, opts: &VerifyOptions) -> Verification {
    run(fabric, &Graph::new(fabric), routing, opts, &[], None, false)
}

/// A channel dependency: (transmitting port index, VL) → (transmitting
/// port index, VL).
pub type ChannelDep = ((u32, u8), (u32, u8));

/// The channel dependencies [`verify`] searches for credit loops, sorted:
/// for tests that hold the verifier's sharing of work between paths
/// against a path-by-path reference.
#[doc(hidden)]
pub fn channel_dependencies(fabric: &FabricSnapshot, routing: &Routing, opts: &VerifyOptions) -> Vec<ChannelDep> {
    let mut out = Vec::new();
    run(fabric, &Graph::new(fabric), routing, opts, &[], Some(&mut out), true);
    out.sort_unstable();
    out
}

/// [`run_once`], with [`Ctx::rounds`] for the destinations alone on their
/// switch when the oracle gave a table and `share`; again by the walk
/// alone when those find a VL violation, which the walk counts and
/// describes (a routing that fails costs two verifications).
fn run(
    fabric: &FabricSnapshot,
    graph: &Graph,
    routing: &Routing,
    opts: &VerifyOptions,
    mcast: &[McastRoute],
    mut deps_out: Option<&mut Vec<ChannelDep>>,
    share: bool,
) -> Verification {
    if share {
        if let Some(v) = run_once(fabric, graph, routing, opts, mcast, deps_out.as_deref_mut(), true, true) {
            return v;
        }
    }
    run_once(fabric, graph, routing, opts, mcast, deps_out, share, false).unwrap_or_default()
}

/// One verification; `rounds`: the common case's per-path-SL
/// dependencies by [`Ctx::rounds`] where it applies, None when those
/// find a VL violation.
#[allow(clippy::too_many_arguments)]
fn run_once(
    fabric: &FabricSnapshot,
    graph: &Graph,
    routing: &Routing,
    opts: &VerifyOptions,
    mcast: &[McastRoute],
    deps_out: Option<&mut Vec<ChannelDep>>,
    share: bool,
    rounds: bool,
) -> Option<Verification> {
    let nsw = graph.switch_count();
    // LFT per switch number (empty when the engine gave none).
    let mut lfts: Vec<&[u8]> = vec![&[]; nsw];
    for lft in routing.lfts.iter() {
        if let Some(&s) = graph.sw_of_node.get(lft.node as usize) {
            if s != NONE {
                lfts[s as usize] = lft.ports.as_slice();
            }
        }
    }
    let pairs = PairIndex::new(fabric, graph);
    let vlmap = VlMap::new(graph, routing, &pairs);
    let uniform = routing.path_sl.uniform().into_option().filter(|&sl| sl <= 15);
    // An oracle given whole is read as the table, never pair by pair (the
    // core serves the same table); one of the wrong shape fails the routing.
    let (table, table_error) = match routing.path_sl.sl_table().into_option() {
        Some(t) if uniform.is_none() => match t.check(fabric.max_lid) {
            Ok(()) => (Some(t), None),
            Err(e) => (None, Some(e)),
        },
        _ => (None, None),
    };
    // The table's highest SL in range, and its highest: one pass over a
    // table of (switches × switches) entries on a torus.
    let table_sls = table.as_ref().map(|t| {
        t.sl.par_iter()
            .fold(|| (0u8, 0u8), |(fit, top), &sl| (if sl <= 15 { fit.max(sl) } else { fit }, top.max(sl)))
            .reduce(|| (0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)))
    });
    let mcast_sl = mcast.iter().map(|g| g.sl & 15).max().unwrap_or(0);
    // Channels are (port, VL); size the dependency matrices to the VLs paths can use.
    let vls: u32 = match (uniform, vlmap.identity) {
        (Some(sl), true) => sl.max(mcast_sl) as u32 + 1,
        (None, true) => fabric.ports.iter().map(|p| p.op_vls).max().unwrap_or(1).clamp(1, 15) as u32,
        (_, false) => {
            // The highest SL a path may keep as its VL: an oracle's
            // answers are not known ahead.
            let path_sl = match (uniform, &table) {
                (Some(sl), _) => sl,
                (None, Some(_)) => table_sls.map_or(0, |(fit, _)| fit),
                (None, None) => 15,
            };
            // A multicast tree may name a port no route takes, whose
            // pairs keep SL → VL: its SL bounds the VLs too.
            let mcast_vls = if mcast.is_empty() { 0 } else { mcast_sl as u32 + 1 };
            vlmap.vls(path_sl.max(mcast_sl)).max(mcast_vls)
        }
    }
    .clamp(1, 16);
    let fast = uniform.is_some() && vlmap.identity;
    // With [`Ctx::rounds`], the table's highest SL; an SL out of range
    // is a violation the walk counts.
    let rounds = table_sls.map(|(_, top)| top).filter(|&top| rounds && !fast && top <= 15);
    // The per-path-SL walk reads its SL2VL maps from the pair records, so
    // it has them whether or not credit loops are checked.
    let deps = if fast {
        opts.credit_loops.then(|| DepBits::new(&pairs, vls, None))
    } else {
        let map = |s: usize, at: usize| -> u64 { vlmap.slot(s, at) };
        Some(DepBits::new(&pairs, vls, Some(&map)))
    };
    let dests = destinations(fabric, graph, opts);
    // Group destinations by the switch they hang off, so one BFS serves a group.
    let mut groups: Vec<(Sw, Vec<(u16, u32)>)> = Vec::new();
    {
        let mut by_sw: Vec<Vec<(u16, u32)>> = vec![Vec::new(); nsw];
        let mut orphan = Vec::new();
        for (lid, pi) in dests {
            let t = graph.entry_switch(fabric, pi);
            if t == NONE {
                orphan.push((lid, pi));
            } else {
                by_sw[t as usize].push((lid, pi));
            }
        }
        for (t, v) in by_sw.into_iter().enumerate() {
            if !v.is_empty() {
                groups.push((t as Sw, v));
            }
        }
        if !orphan.is_empty() {
            groups.push((NONE, orphan));
        }
    }
    let dest_count: usize = groups.iter().map(|(_, g)| g.len()).sum();
    // The size of a destination's group, on average over destinations: a
    // tree's leaves bring dozens, whatever the many one-LID groups of its
    // upper switches.
    let group_weight: usize = groups.iter().map(|(_, g)| g.len() * g.len()).sum();
    let columns = use_columns(group_weight, dest_count, lfts.len(), COLUMNS_MAX_BYTES).then(|| {
        let mut lids: Vec<u16> = groups.iter().flat_map(|(_, g)| g.iter().map(|&(lid, _)| lid)).collect();
        lids.sort_unstable();
        lids.dedup();
        LidColumns::new(&lfts, &lids)
    });
    let sources = Sources::new(fabric, graph);
    let component = components(graph);
    let ncomp = component.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let mut comp_sources = vec![0u64; ncomp];
    for s in 0..nsw {
        comp_sources[component[s] as usize] += sources.at(s as Sw).len() as u64;
    }
    let attached = sources.ports.len() as u64;
    let examples = Mutex::new(Vec::<String>::new());
    let hops = HopTab::new(fabric, graph);
    let entry_rep = if fast { Vec::new() } else { entry_classes(fabric, graph, &vlmap, false) };
    let far_rep = if fast || table.is_none() { Vec::new() } else { entry_classes(fabric, graph, &vlmap, true) };
    let (mut seed_src, mut seed_base, mut seed_maps) = (Vec::new(), vec![0u32; nsw], Vec::new());
    let mut seed_groups = SeedGroups { start: vec![0; nsw + 1], groups: Vec::new() };
    if let Some(deps) = deps.as_ref().filter(|_| !fast) {
        seed_src.reserve(sources.ports.len());
        let (mut reps, mut far, mut far_class) = (Vec::new(), Vec::new(), Vec::new());
        for s in 0..nsw {
            seed_base[s] = seed_maps.len() as u32;
            reps.clear();
            far.clear();
            far_class.clear();
            for &sp in sources.at(s as Sw) {
                let entry = fabric.ports[sp as usize].peer as usize;
                let rep = entry_rep[entry];
                let rank = match reps.iter().position(|&r| r == rep) {
                    Some(k) => k,
                    None => {
                        reps.push(rep);
                        let in_port = fabric.ports[rep as usize].num;
                        for out in 0..pairs.side[s] {
                            seed_maps.push(deps.map(deps.record_of(s, in_port, out as u8)));
                        }
                        reps.len() - 1
                    }
                };
                let p = &fabric.ports[sp as usize];
                // An end port without a LID still sends, as LID 0 (the
                // oracle's answer for it is its own to give).
                seed_src.push(SeedSrc { lid: p.lid, lids: p.lid_count().max(1) as u16, class: rank as u32 });
                if let Some(&f) = far_rep.get(entry) {
                    // The class of the first source of this far class
                    // stands for them all away from their switch.
                    far_class.push(match far.iter().position(|&(r, _)| r == f) {
                        Some(k) => far[k].1,
                        None => {
                            far.push((f, rank as u32));
                            rank as u32
                        }
                    });
                }
            }
            if let Some(t) = &table {
                seed_groups.add_switch(s, &seed_src[sources.range(s as Sw)], &far_class, t);
            }
        }
    }
    let ctx = Ctx {
        hops: &hops,
        component: &component,
        comp_sources: &comp_sources,
        attached,
        fabric,
        graph,
        lfts: &lfts,
        columns: columns.as_ref(),
        uniform,
        fast,
        routing,
        deps: deps.as_ref(),
        sources: &sources,
        first_port: graph.switch_nodes.iter().map(|&n| fabric.nodes[n as usize].first_port).collect(),
        seed_src,
        seed_base,
        seed_maps,
        table: table.as_deref(),
        seed_groups,
        pairs: &pairs,
        opts,
        examples: &examples,
        vls,
        share,
        rounds,
        min_op_vls: hops.code.iter().map(|&c| Code(c).op_vls()).min().unwrap_or(1),
    };

    let make_acc = || Acc {
        v: Verification::default(),
        load_32: vec![0; fabric.ports.len()],
        sent: if columns.is_some() { vec![0; nsw] } else { Vec::new() },
        status: vec![UNKNOWN; nsw],
        depth: vec![0; nsw],
        next: vec![NONE; nsw],
        out: vec![0; nsw],
        into: vec![0; nsw],
        ovl: vec![1; nsw],
        stack: Vec::new(),
        dist: vec![u8::MAX; nsw],
        queue: Vec::new(),
        order: Vec::new(),
        load: vec![0; nsw],
        by_depth: Vec::new(),
        last_out: if fast { vec![0; fabric.ports.len()] } else { Vec::new() },
        c_ok: 0,
        c_rep: Vec::new(),
        c_last: Vec::new(),
        c_out: Vec::new(),
        c_into: Vec::new(),
        c_ovl: Vec::new(),
        c_next: Vec::new(),
        c_load: Vec::new(),
        st_sl: if fast { Vec::new() } else { vec![0; nsw] },
        st_vl: if fast { Vec::new() } else { vec![[0; 16]; nsw] },
        seeds: Vec::new(),
        pre: [None; PRELOAD],
        walk_ref: WalkRef { t: NONE, class: NONE, ..WalkRef::default() },
        round_dests: Vec::new(),
    };
    // Distances from every group's switch: one bit-parallel all-pairs
    // search costs far less than a BFS per group, when most switches have
    // destinations and the matrix is small.
    let matrix = (groups.len() >= nsw / 16 && nsw <= 8192).then(|| graph.distance_matrix());
    let total = groups
        .par_iter()
        .fold(make_acc, |mut acc, (t, group)| {
            if *t != NONE {
                match &matrix {
                    Some(m) => {
                        let row = m.to(*t);
                        acc.dist.copy_from_slice(row);
                        by_distance(row, false, false, &mut acc.queue);
                    }
                    None => graph.bfs(*t, &mut acc.dist, &mut acc.queue),
                }
            }
            if *t != NONE && group.len() > 1 {
                for (c, chunk) in group.chunks(CHUNK).enumerate() {
                    if ctx.fast {
                        ctx.resolve_fast(&mut acc, chunk);
                        ctx.chunk_fast(&mut acc, *t, chunk);
                    } else {
                        ctx.resolve_chunk(&mut acc, *t, chunk);
                    }
                    for (j, &(lid, pi)) in chunk.iter().enumerate() {
                        if !(ctx.fast && acc.c_ok & 1 << j != 0) {
                            ctx.destination(&mut acc, *t, lid, pi, Some(j), c * CHUNK + j + 1 == group.len());
                        }
                    }
                }
            } else {
                for (i, &(lid, pi)) in group.iter().enumerate() {
                    ctx.destination(&mut acc, *t, lid, pi, None, i + 1 == group.len());
                }
            }
            acc
        })
        .map(|mut a| {
            a.walk_ref.settle(&mut a.load_32);
            let mut v = a.v;
            v.port_load = a.load_32.into_iter().map(u64::from).collect();
            (v, a.round_dests)
        })
        .reduce(
            || (Verification { port_load: vec![0; fabric.ports.len()], ..Default::default() }, Vec::new()),
            |(mut a, mut ra), (b, rb)| {
                ra.extend(rb);
                a.pairs += b.pairs;
                a.disconnected += b.disconnected;
                a.unreachable += b.unreachable;
                a.looping += b.looping;
                a.non_minimal += b.non_minimal;
                a.total_hops += b.total_hops;
                a.total_min_hops += b.total_min_hops;
                a.max_hops = a.max_hops.max(b.max_hops);
                a.vl_violations += b.vl_violations;
                a.vls_used = a.vls_used.max(b.vls_used);
                a.walks_shared += b.walks_shared;
                for (x, y) in a.port_load.iter_mut().zip(b.port_load) {
                    *x += y;
                }
                (a, ra)
            },
        );
    let (mut total, mut round_dests) = total;
    if !round_dests.is_empty() {
        // Blocks of neighbouring LIDs: their LFT entries lie together.
        round_dests.sort_unstable();
        let top = ctx.rounds(&round_dests)?;
        total.vls_used = total.vls_used.max(top);
    }
    total.examples = examples.into_inner().unwrap_or_default();
    if let Some(e) = table_error {
        total.vl_violations += 1;
        total.examples.insert(0, format!("the engine's path SL oracle gave an unusable table: {e}"));
    }
    if let Some(deps) = deps.as_ref().filter(|_| opts.credit_loops) {
        for group in mcast {
            add_mcast_deps(fabric, graph, &vlmap, deps, group);
        }
        total.credit_loops_checked = true;
        if let Some(out) = deps_out {
            each_channel_dep(fabric, graph, deps, |from, ivl, to, vl| out.push(((from, ivl), (to, vl))));
        }
        total.credit_loop = find_credit_loop(fabric, graph, deps);
        if let Some(cl) = &total.credit_loop {
            if total.examples.len() < opts.max_examples {
                total.examples.push(describe_cycle(fabric, &cl.cycle));
            }
        }
    }
    Some(total)
}

struct Ctx<'a> {
    hops: &'a HopTab,
    component: &'a [u32],
    /// Switch-attached sources per connected component, and in all.
    comp_sources: &'a [u64],
    attached: u64,
    fabric: &'a FabricSnapshot,
    graph: &'a Graph,
    lfts: &'a [&'a [u8]],
    columns: Option<&'a LidColumns>,
    uniform: Option<u8>,
    /// One SL, no SL2VL: every hop of every path is on that VL, and the
    /// trees alone give the dependencies.
    fast: bool,
    routing: &'a Routing,
    deps: Option<&'a DepBits<'a>>,
    sources: &'a Sources,
    // Compact copies of what the hot loops read, per switch number and per
    // port index, to keep them out of the snapshot's wide records.
    first_port: Vec<u32>,
    /// Per source, in [`Sources`]' order: its LIDs and the rank of its
    /// entry class (see [`entry_classes`]) among those of its switch's
    /// sources, what the walk's seeds read of it, kept apart from the
    /// snapshot's wide port records; per switch,
    /// where the maps of those classes to every output port start in
    /// `seed_maps`, class after class: a small table that spares the
    /// sources' states the pair records, which they write nothing into.
    seed_src: Vec<SeedSrc>,
    seed_base: Vec<u32>,
    seed_maps: Vec<u64>,
    /// The oracle's table, when it gave one (see [`SlTable`]), and per
    /// switch its sources' LIDs grouped by (far entry class, SL class).
    table: Option<&'a SlTable>,
    seed_groups: SeedGroups,
    pairs: &'a PairIndex,
    opts: &'a VerifyOptions,
    examples: &'a Mutex<Vec<String>>,
    vls: u32,
    /// Whether destinations may take over a walk (see [`WalkRef`]).
    share: bool,
    /// With the oracle's table (its highest SL), when the per-path-SL
    /// dependencies of the destinations alone on their switch in the
    /// common case are left to [`Ctx::rounds`] (see `rounds.rs`).
    rounds: Option<u8>,
    /// The fewest operational VLs of a switch port (1 when none).
    min_op_vls: u8,
}

impl Ctx<'_> {
    fn example(&self, msg: impl FnOnce() -> String) {
        if let Ok(mut ex) = self.examples.lock() {
            if ex.len() < self.opts.max_examples {
                ex.push(msg());
            }
        }
    }

    fn node_name(&self, node: u32) -> String {
        let n = &self.fabric.nodes[node as usize];
        if n.description.is_empty() {
            format!("0x{:016x}", n.guid)
        } else {
            format!("\"{}\"", n.description)
        }
    }

    /// Switch `s`'s LFT entry for `lid`, from the columns when there are.
    #[inline]
    fn entry(&self, s: Sw, lid: u16) -> Option<u8> {
        match self.columns {
            Some(c) => c.row(lid).get(s as usize).copied(),
            None => self.lfts[s as usize].get(lid as usize).copied(),
        }
    }

    /// Next hop of switch `s` towards `lid`: Ok(Some(switch)) to continue,
    /// Ok(None) when the destination port is reached, Err(()) when the
    /// route dies here.
    #[inline]
    fn step(&self, s: Sw, lid: u16, dest_port: u32) -> Result<Option<Sw>, ()> {
        let out = *self.lfts[s as usize].get(lid as usize).ok_or(())?;
        match self.hops.next(s, out).0 {
            Next::Switch(n) => Ok(Some(n)),
            Next::Port(p) if p == dest_port => Ok(None),
            _ => Err(()),
        }
    }

    /// The common case in one pass over `t`'s component in BFS order:
    /// every switch there forwards to a neighbour one hop nearer to `t`
    /// and `t` delivers. Then every switch reaches the destination along a
    /// shortest path, its depth is its BFS distance and the reversed BFS
    /// order visits each switch before the one it forwards to.
    fn resolve_minimal(&self, acc: &mut Acc, lid: u16, dest_port: u32) -> bool {
        for &s in &acc.queue {
            let Some(out) = self.entry(s, lid) else { return false };
            let (next, into, ovl) = minimal_hop(&acc.dist, acc.dist[s as usize], self.hops.row(s), out, dest_port);
            acc.out[s as usize] = out;
            acc.into[s as usize] = into;
            acc.ovl[s as usize] = ovl;
            match next {
                Some(n) => acc.next[s as usize] = n,
                None => return false,
            }
        }
        true
    }

    /// [`Ctx::resolve_minimal`] for the destinations of one chunk of a
    /// group at once, on the per-path-SL path (the single-SL path takes
    /// [`Ctx::resolve_fast`]), switch by switch: a switch's LFT entries for
    /// them share cache lines, and its hop table row serves them all. Per
    /// destination `j`, bit `j` of `c_ok` says whether the common case holds and
    /// `c_out` etc. hold what `resolve_minimal` leaves in `out` etc., for
    /// switch `s` at `j * switches + s`, the rows [`Ctx::destination`]
    /// takes.
    ///
    /// A destination whose entries agree with the previous one's on every
    /// switch but `t` (their own) has that one's tree but for its last
    /// hop: only that hop is resolved for it (see `c_rep`), so that a
    /// switch's hosts cost one resolution, as their walks cost one when
    /// they take it over.
    fn resolve_chunk(&self, acc: &mut Acc, t: Sw, chunk: &[(u16, u32)]) {
        let nsw = self.graph.switch_count();
        let len = chunk.len() * nsw;
        acc.c_out.resize(len, 0);
        acc.c_into.resize(len, 0);
        acc.c_ovl.resize(len, 1);
        acc.c_next.resize(len, NONE);
        // The chunk's rows of the columns, when there are.
        let mut cols: [&[u8]; CHUNK] = [&[]; CHUNK];
        if let Some(c) = self.columns {
            for (col, &(lid, _)) in cols.iter_mut().zip(chunk) {
                *col = c.row(lid);
            }
        }
        let Acc { queue, dist, c_rep, c_last, c_out, c_into, c_ovl, c_next, .. } = acc;
        let queue = &*queue;
        c_rep.clear();
        c_rep.extend(0..chunk.len());
        c_last.resize(chunk.len(), (0, 0, 1));
        let entry = |j: usize, su: usize, row: &[u8]| match self.columns {
            Some(_) => cols[j].get(su).copied(),
            None => row.get(chunk[j].0 as usize).copied(),
        };
        // The chunk's entries of one switch share a line or two of its
        // LFT, asked for ahead.
        let (first, last) = (chunk[0].0 as usize, chunk[chunk.len() - 1].0 as usize);
        if self.share && chunk.len() > 1 {
            let mut same = [true; CHUNK];
            let mut runs = chunk.len() - 1;
            for (i, &s) in queue.iter().enumerate() {
                if self.columns.is_none() {
                    prefetch_ahead(self.lfts, queue, i, first, last);
                }
                let su = s as usize;
                if s == t {
                    continue;
                }
                let row = self.lfts[su];
                let mut prev = entry(0, su, row);
                for (j, same) in same.iter_mut().enumerate().take(chunk.len()).skip(1) {
                    let e = entry(j, su, row);
                    if *same && (e.is_none() || e != prev) {
                        *same = false;
                        runs -= 1;
                    }
                    prev = e;
                }
                if runs == 0 {
                    break;
                }
            }
            for j in 1..chunk.len() {
                if same[j] {
                    c_rep[j] = c_rep[j - 1];
                }
            }
        }
        // Destinations still in the common case, and those of them
        // resolved at every switch (not a run's later ones, whose tree is
        // their run's), as bits.
        let mut ok: u32 = u32::MAX >> (32 - chunk.len());
        let reps: u32 = (0..chunk.len()).filter(|&j| c_rep[j] == j).fold(0, |m, j| m | 1 << j);
        for (i, &s) in queue.iter().enumerate() {
            if self.columns.is_none() {
                prefetch_ahead(self.lfts, queue, i, first, last);
            }
            let su = s as usize;
            let (row, codes, here) = (self.lfts[su], self.hops.row(s), dist[su]);
            let mut live = ok & reps;
            while live != 0 {
                let j = live.trailing_zeros() as usize;
                live &= live - 1;
                let Some(out) = entry(j, su, row) else {
                    ok &= !(1 << j);
                    continue;
                };
                let (next, into, ovl) = minimal_hop(dist, here, codes, out, chunk[j].1);
                let k = j * nsw + su;
                c_out[k] = out;
                match next {
                    Some(n) => {
                        c_into[k] = into;
                        c_ovl[k] = ovl;
                        c_next[k] = n;
                    }
                    None => ok &= !(1 << j),
                }
            }
            if s == t {
                // The later destinations of runs: their last hop.
                for j in crate::cdg::bits((ok & !reps) as u64).map(|j| j as usize) {
                    let hop = entry(j, su, row).map(|out| (out, minimal_hop(dist, here, codes, out, chunk[j].1)));
                    match hop {
                        Some((out, (Some(_), into, ovl))) => c_last[j] = (out, into, ovl),
                        _ => ok &= !(1 << j),
                    }
                }
            }
        }
        // A run's tree is its first destination's, good or not.
        acc.c_ok = (0..chunk.len()).filter(|&j| ok & 1 << j != 0 && ok & 1 << c_rep[j] != 0).fold(0, |m, j| m | 1 << j);
    }

    /// [`Ctx::resolve_chunk`] on the single-SL path, which needs only the
    /// entries (switch-major) and whether each destination is in the common
    /// case: a switch's entries are gathered side by side, then checked in
    /// one loop without branches, a hop good when it enters a switch one
    /// nearer or, at `t`, the destination port. A missing entry fails.
    fn resolve_fast(&self, acc: &mut Acc, chunk: &[(u16, u32)]) {
        let w = chunk.len();
        let nsw = self.graph.switch_count();
        acc.c_out.resize(w * nsw, 0);
        let (mut lids, mut dests) = ([0usize; CHUNK], [0u32; CHUNK]);
        let mut cols: [&[u8]; CHUNK] = [&[]; CHUNK];
        for (j, &(lid, dp)) in chunk.iter().enumerate() {
            lids[j] = lid as usize;
            // The code of a hop that delivers to the destination port.
            dests[j] = PORT_BIT | dp;
            if let Some(c) = self.columns {
                cols[j] = c.row(lid);
            }
        }
        let (lids, dests, cols) = (&lids[..w], &dests[..w], &cols[..w]);
        let first = lids.iter().copied().min().unwrap_or(0);
        let last = lids.iter().copied().max().unwrap_or(0);
        let Acc { queue, dist, c_out, .. } = acc;
        let (queue, dist) = (&*queue, &*dist);
        let mut bad: u32 = 0;
        for (i, &s) in queue.iter().enumerate() {
            let su = s as usize;
            let outs = &mut c_out[su * w..su * w + w];
            match self.columns {
                Some(_) => {
                    for (o, col) in outs.iter_mut().zip(cols) {
                        *o = col.get(su).copied().unwrap_or(NO_ROUTE);
                    }
                }
                None => {
                    prefetch_ahead(self.lfts, queue, i, first, last);
                    let row = self.lfts[su];
                    for (j, (o, &lid)) in outs.iter_mut().zip(lids).enumerate() {
                        match row.get(lid) {
                            Some(&p) => *o = p,
                            None => bad |= 1 << j,
                        }
                    }
                }
            }
            let (codes, here) = (self.hops.row(s), dist[su] as u32);
            for (j, (&o, &dest)) in outs.iter().zip(dests).enumerate() {
                bad |= (!Code::of(codes, o).nearer(dist, here, dest) as u32) << j;
            }
        }
        acc.c_ok = !bad & u32::MAX >> (32 - w);
    }

    /// Any LFTs: resolve every switch's fate for this destination (reaches,
    /// dies, loops) by following next hops, each switch once, and list the
    /// switches that reach it, shallowest first.
    fn resolve_general(&self, acc: &mut Acc, lid: u16, dest_port: u32) {
        let nsw = self.graph.switch_count();
        acc.status.fill(UNKNOWN);
        for s0 in 0..nsw as Sw {
            if acc.status[s0 as usize] != UNKNOWN {
                continue;
            }
            acc.stack.clear();
            let mut s = s0;
            let verdict = loop {
                match acc.status[s as usize] {
                    UNKNOWN => {}
                    ACTIVE => break LOOPS,
                    v => break v,
                }
                acc.status[s as usize] = ACTIVE;
                acc.stack.push(s);
                match self.step(s, lid, dest_port) {
                    Err(()) => {
                        acc.next[s as usize] = NONE;
                        break DEAD;
                    }
                    Ok(None) => {
                        acc.next[s as usize] = NONE;
                        acc.out[s as usize] = self.lfts[s as usize][lid as usize];
                        acc.depth[s as usize] = 0;
                        acc.stack.pop();
                        acc.status[s as usize] = REACHES;
                        break REACHES;
                    }
                    Ok(Some(n)) => {
                        acc.next[s as usize] = n;
                        acc.out[s as usize] = self.lfts[s as usize][lid as usize];
                        s = n;
                    }
                }
            };
            while let Some(x) = acc.stack.pop() {
                acc.status[x as usize] = verdict;
                if verdict == REACHES {
                    let n = acc.next[x as usize];
                    acc.depth[x as usize] = acc.depth[n as usize] + 1;
                }
            }
        }
        let mut max_depth = 0;
        for s in 0..nsw {
            if acc.status[s] == REACHES {
                max_depth = max_depth.max(acc.depth[s] as usize);
            }
        }
        if acc.by_depth.len() < max_depth + 1 {
            acc.by_depth.resize_with(max_depth + 1, Vec::new);
        }
        for b in acc.by_depth.iter_mut() {
            b.clear();
        }
        for s in 0..nsw {
            if acc.status[s] == REACHES {
                acc.by_depth[acc.depth[s] as usize].push(s as Sw);
            }
        }
        acc.order.clear();
        for b in &acc.by_depth {
            acc.order.extend_from_slice(b);
        }
        for &s in &acc.order {
            let (_, into, ovl) = self.hops.next(s, acc.out[s as usize]);
            acc.into[s as usize] = into;
            acc.ovl[s as usize] = ovl;
        }
    }

    /// The routes to one destination LID, `t` the switch it hangs off;
    /// `chunk`: its place in the chunk [`Ctx::resolve_chunk`] resolved;
    /// `last`: whether it is the last of its group (whose walk no
    /// destination after it can take over, so it is not held).
    fn destination(&self, acc: &mut Acc, t: Sw, lid: u16, dest_port: u32, chunk: Option<usize>, last: bool) {
        let nsw = self.graph.switch_count();
        let dest_is_end = self.fabric.nodes[self.fabric.ports[dest_port as usize].node as usize].kind.is_end_node();
        // Alone on its switch (a switch's hosts share their walks), in the
        // common case: counted here, its dependencies left to [`Ctx::rounds`].
        if self.rounds.is_some() && chunk.is_none() && t != NONE && self.counts_alone(acc, t, lid, dest_port, dest_is_end) {
            self.switchless_pairs(acc, dest_port);
            acc.v.disconnected += self.attached - self.comp_sources[self.component[t as usize] as usize];
            acc.round_dests.push((lid, dest_port, t));
            return;
        }
        self.switchless_pairs(acc, dest_port);
        let minimal = t != NONE
            && match chunk {
                Some(j) if acc.c_ok & 1 << j != 0 => {
                    // Only the per-path-SL walk comes here with a chunk's
                    // common case (`resolve_chunk` resolved it).
                    let rep = acc.c_rep[j];
                    let r = rep * nsw..(rep + 1) * nsw;
                    acc.out.copy_from_slice(&acc.c_out[r.clone()]);
                    acc.into.copy_from_slice(&acc.c_into[r.clone()]);
                    acc.ovl.copy_from_slice(&acc.c_ovl[r.clone()]);
                    acc.next.copy_from_slice(&acc.c_next[r]);
                    if rep != j {
                        // The tree is its run's; the last hop its own.
                        let tu = t as usize;
                        (acc.out[tu], acc.into[tu], acc.ovl[tu]) = acc.c_last[j];
                        acc.next[tu] = NONE;
                    }
                    true
                }
                Some(_) => false,
                None => self.resolve_minimal(acc, lid, dest_port),
            };
        if minimal {
            // Every switch of the component delivers; the others are cut off.
            acc.v.disconnected += self.attached - self.comp_sources[self.component[t as usize] as usize];
        } else {
            self.resolve_general(acc, lid, dest_port);
            for e in 0..nsw as Sw {
                let srcs = self.sources.at(e);
                if srcs.is_empty() || acc.status[e as usize] == REACHES {
                    continue;
                }
                let c = srcs.len() as u64 - srcs.contains(&dest_port) as u64;
                if c == 0 {
                    continue;
                }
                if t == NONE || self.component[e as usize] != self.component[t as usize] {
                    acc.v.disconnected += c;
                    continue;
                }
                acc.v.pairs += c;
                let st = acc.status[e as usize];
                if st == LOOPS {
                    acc.v.looping += c;
                } else {
                    acc.v.unreachable += c;
                }
                let src = &self.fabric.ports[srcs[0] as usize];
                self.example(|| {
                    format!(
                        "{} port {} -> LID {}: {}",
                        self.node_name(src.node),
                        src.num,
                        lid,
                        if st == LOOPS { "forwarding loop" } else { "no route" }
                    )
                });
            }
        }
        // Switches that deliver, deepest first: each before the switch it
        // forwards to, so routes (counted per source port) flow down the tree.
        let order = std::mem::take(if minimal { &mut acc.queue } else { &mut acc.order });
        let is_end = dest_is_end as u32;
        let sl = self.uniform.unwrap_or(0);
        let walk = !self.fast; // per-path-SL states
        // Switches within one hop of `t` lead `order` when it is by distance.
        let near = if minimal { order.iter().take_while(|&&s| acc.dist[s as usize] <= 1).count() } else { 0 };
        let mut held = std::mem::take(&mut acc.walk_ref);
        let shared = walk && minimal && self.share && self.takes_over(acc, &held, t, lid, dest_port, dest_is_end, &order, near);
        // A full walk of the common case is held for the next destinations.
        let mut record = walk && minimal && self.share && !shared && !last;
        // The common case, walked in full, takes [`Ctx::walk_alone`]
        // after the counts below.
        let alone = walk && minimal && !shared && self.deps.is_some();
        if record {
            held.settle(&mut acc.load_32);
            held.t = NONE;
            held.sls.clear();
            held.tail.clear();
            held.far = FarCounts::default();
            held.far_loads.clear();
            held.near_load.clear();
        }
        if shared {
            // The deeper switches' part is the held walk's.
            acc.v.walks_shared += 1;
            let f = held.far;
            acc.v.pairs += f.pairs;
            acc.v.total_hops += f.total_hops;
            acc.v.total_min_hops += f.total_min_hops;
            acc.v.non_minimal += f.non_minimal;
            held.takers += 1;
            for &(u, l) in &held.near_load {
                acc.load[u as usize] = l;
            }
        } else if walk && !alone {
            for (i, &s) in order.iter().enumerate().rev().take(PRELOAD) {
                acc.pre[i % PRELOAD] = self.preload(acc, s);
            }
        }
        let upto = match (shared, alone) {
            (true, _) => near,
            (false, true) => 0,
            (false, false) => order.len(),
        };
        for (i, &s) in order[..upto].iter().enumerate().rev() {
            // The record this switch's states push by, found when it was
            // asked for ahead (its slot is the one asked for next).
            let pre = (walk && !shared).then(|| acc.pre[i % PRELOAD]);
            if walk && !shared && i >= PRELOAD {
                acc.pre[i % PRELOAD] = self.preload(acc, order[i - PRELOAD]);
            }
            let mut l = acc.load[s as usize];
            acc.load[s as usize] = 0;
            let srcs = self.sources.at(s);
            if !srcs.is_empty() {
                let c = srcs.len() as u64 - (s == t && srcs.contains(&dest_port)) as u64;
                if c > 0 {
                    // Links: source→entry switch, the switch hops, and the
                    // last link into an end port (a switch destination ends
                    // on the switch).
                    let min = 1 + acc.dist[s as usize] as u32 + is_end;
                    let hops = if minimal { min } else { 1 + acc.depth[s as usize] + is_end };
                    acc.v.pairs += c;
                    acc.v.total_hops += hops as u64 * c;
                    acc.v.total_min_hops += min as u64 * c;
                    acc.v.max_hops = acc.v.max_hops.max(hops);
                    if hops > min {
                        acc.v.non_minimal += c;
                    }
                    l += c;
                }
            }
            if walk {
                if i + 1 == near {
                    // The deeper switches are done: their states are in
                    // those of `t`'s neighbours, which the next
                    // destinations may start from.
                    if shared {
                        for &(u, sls, vls) in &held.tail {
                            acc.st_sl[u as usize] = sls;
                            acc.st_vl[u as usize] = vls;
                        }
                    }
                }
                if !shared || i < near {
                    self.walk_switch(acc, s, (t, lid, dest_port), pre);
                }
            }
            if l == 0 {
                continue;
            }
            let out = acc.out[s as usize];
            if s == t {
                // Last hop into the destination end port (a switch
                // destination is delivered by port 0, no link).
                if dest_is_end {
                    let pi = self.first_port[s as usize] + out as u32;
                    self.add_load(acc, s, pi, l, shared);
                    if self.fast {
                        self.check_vl(&mut acc.v, pi, sl, acc.ovl[s as usize]);
                    }
                }
                continue;
            }
            let pi = self.first_port[s as usize] + out as u32;
            let n = acc.next[s as usize];
            if dest_is_end {
                self.add_load(acc, s, pi, l, shared);
            }
            acc.load[n as usize] += l;
            if self.fast {
                self.check_vl(&mut acc.v, pi, sl, acc.ovl[s as usize]);
                if let Some(deps) = self.deps {
                    // Dependency at the next switch: arriving link → its output.
                    let nout = acc.out[n as usize];
                    let way_in = (self.first_port[n as usize] + acc.into[s as usize] as u32) as usize;
                    // The turn this thread set last from this port is set for good.
                    if nout != 0 && acc.last_out[way_in] != nout {
                        acc.last_out[way_in] = nout;
                        deps.add(n, acc.into[s as usize], sl, nout, sl);
                    }
                }
            }
        }
        if let Some(deps) = self.deps.filter(|_| alone) {
            let hold = record.then_some((&mut held, near));
            record &= self.walk_alone(acc, deps, (t, lid, dest_port), &order, dest_is_end, hold);
        }
        if record {
            held.t = t;
            held.is_end = dest_is_end;
            held.class = self.table.map_or(NONE, |tb| tb.class(lid));
            held.out.clear();
            held.out.extend_from_slice(&acc.out);
        }
        acc.walk_ref = held;
        if minimal {
            acc.queue = order;
        } else {
            acc.order = order;
        }
        if dest_is_end && self.columns.is_some() && !shared {
            // Added in switch order, the ports' loads are read in order
            // too, where the walk's order would scatter them.
            let (sent, out, loads) = (&mut acc.sent, &acc.out, &mut acc.load_32);
            for (s, l) in sent.iter_mut().enumerate() {
                if *l != 0 {
                    loads[(self.first_port[s] + out[s] as u32) as usize] += std::mem::take(l);
                }
            }
        }
    }

    /// A destination alone on its switch `t`, in the common case (`acc`
    /// holding `t`'s distances and its switches by distance): its pairs,
    /// hops and loads in one pass over the switches, deepest first, the
    /// common case checked on the way. False, with nothing counted, when
    /// it is not in the common case.
    fn counts_alone(&self, acc: &mut Acc, t: Sw, lid: u16, dest_port: u32, is_end: bool) -> bool {
        let nsw = self.graph.switch_count();
        let Acc { v, load_32, load, out, dist, queue, .. } = acc;
        let (load, out, dist) = (&mut load[..nsw], &mut out[..nsw], &dist[..nsw]);
        let end = is_end as u32;
        let (mut pairs, mut hops, mut longest) = (0u64, 0u64, 0u32);
        let mut common = true;
        for &s in queue.iter().rev() {
            let su = s as usize;
            let Some(o) = self.entry(s, lid) else {
                common = false;
                break;
            };
            let c = Code::of(self.hops.row(s), o);
            let here = dist.get(su).copied().unwrap_or(u8::MAX) as u32;
            if !c.nearer(dist, here, PORT_BIT | dest_port) {
                common = false;
                break;
            }
            let srcs = self.sources.at(s);
            let own = srcs.len() as u64 - (s == t && srcs.contains(&dest_port)) as u64;
            let mut l = load[su];
            if own > 0 {
                // Links: source→entry switch, the switch hops, and the
                // last link into an end port; all shortest.
                let h = 1 + here + end;
                pairs += own;
                hops += h as u64 * own;
                longest = longest.max(h);
                l += own;
            }
            // What leaves `s`, kept for its port's load below.
            load[su] = l;
            out[su] = o;
            if s != t {
                load[c.target() as usize] += l;
            }
        }
        if !common {
            for &s in queue.iter() {
                load[s as usize] = 0;
            }
            return false;
        }
        v.pairs += pairs;
        v.total_hops += hops;
        v.total_min_hops += hops;
        v.max_hops = v.max_hops.max(longest);
        // Routes to a switch cross no link into it (port 0).
        for (s, (l, &o)) in load.iter_mut().zip(out.iter()).enumerate() {
            let l = std::mem::take(l);
            if l != 0 && is_end {
                load_32[(self.first_port[s] + o as u32) as usize] += l as u32;
            }
        }
        true
    }

    /// [`Ctx::destination`] on the single-SL path for every destination of
    /// the chunk [`Ctx::resolve_fast`] found in the common case, all at
    /// once, switch by switch in the group's order (deepest first, valid
    /// for each of their trees): what one switch's sources add is counted
    /// once for them all, the switch's entries for them lie side by side,
    /// and so do the ports their loads go to.
    fn chunk_fast(&self, acc: &mut Acc, t: Sw, chunk: &[(u16, u32)]) {
        let w = chunk.len();
        let ok = acc.c_ok;
        // The destinations that are end ports, as bits.
        let mut end: u32 = 0;
        for j in crate::cdg::bits(ok as u64).map(|j| j as usize) {
            let dp = chunk[j].1;
            self.switchless_pairs(acc, dp);
            acc.v.disconnected += self.attached - self.comp_sources[self.component[t as usize] as usize];
            end |= (self.fabric.nodes[self.fabric.ports[dp as usize].node as usize].kind.is_end_node() as u32) << j;
        }
        let (m, m_end) = (ok.count_ones() as u64, end.count_ones() as u64);
        if m == 0 {
            return;
        }
        let sl = self.uniform.unwrap_or(0);
        // Below every port's operational VLs, the SL's VL needs no check
        // per hop: only whether any hop was taken, for `vls_used`.
        let (within, mut used) = (sl < self.min_op_vls, false);
        // Routes per (switch, destination) still to pass on; all zero
        // between chunks, each taken as its switch is met.
        acc.c_load.resize(acc.c_load.len().max(self.graph.switch_count() * w), 0);
        let order = std::mem::take(&mut acc.queue);
        for &s in order.iter().rev() {
            let su = s as usize;
            let srcs = self.sources.at(s);
            let here = acc.dist[su] as u32;
            // Links: source→entry switch, the switch hops, and the last
            // link into an end port (a switch destination ends on the
            // switch); all shortest.
            let own = srcs.len() as u64;
            if own > 0 && s != t {
                let hops = m * (1 + here) as u64 + m_end;
                acc.v.pairs += own * m;
                acc.v.total_hops += own * hops;
                acc.v.total_min_hops += own * hops;
                acc.v.max_hops = acc.v.max_hops.max(1 + here + (m_end > 0) as u32);
            }
            let (row, first, codes) = (su * w, self.first_port[su], self.hops.row(s));
            // This switch's routes per destination, taken (which leaves
            // its slots zero); without sources of its own, only the
            // destinations some route passes through go on.
            let mut ls = [0u32; CHUNK];
            let slots = &mut acc.c_load[row..row + w];
            ls[..w].copy_from_slice(slots);
            slots.fill(0);
            let live = if s == t || own > 0 {
                ok
            } else {
                ok & ls[..w].iter().enumerate().fold(0, |m, (j, &l)| m | ((l != 0) as u32) << j)
            };
            if s == t {
                for j in crate::cdg::bits(live as u64).map(|j| j as usize) {
                    let mut l = ls[j] as u64;
                    if own > 0 {
                        let c = own - srcs.contains(&chunk[j].1) as u64;
                        if c > 0 {
                            acc.v.add_shortest(c, 1 + here + (end >> j & 1));
                            l += c;
                        }
                    }
                    // The last hop into the destination end port (a
                    // switch destination is delivered by port 0, no link).
                    if l == 0 || end & 1 << j == 0 {
                        continue;
                    }
                    let out = acc.c_out[row + j];
                    let pi = first + out as u32;
                    acc.load_32[pi as usize] += l as u32;
                    if !within {
                        self.check_vl(&mut acc.v, pi, sl, Code::of(codes, out).op_vls());
                    }
                    used = true;
                }
                continue;
            }
            for j in crate::cdg::bits(live as u64).map(|j| j as usize) {
                let l = ls[j] + own as u32;
                if l == 0 {
                    continue;
                }
                let out = acc.c_out[row + j];
                let pi = first + out as u32;
                // (`resolve_fast` found the hop one nearer, into a switch.)
                let c = Code::of(codes, out);
                if end & 1 << j != 0 {
                    acc.load_32[pi as usize] += l;
                }
                if !within {
                    self.check_vl(&mut acc.v, pi, sl, c.op_vls());
                }
                used = true;
                if c.target() & PORT_BIT != 0 {
                    continue;
                }
                let (n, into) = (c.target() as usize, c.entered());
                acc.c_load[n * w + j] += l;
                if let Some(deps) = self.deps {
                    // Dependency at the next switch: arriving link → its
                    // output; the turn this thread set last from this
                    // port is set for good.
                    let nout = acc.c_out[n * w + j];
                    let way_in = (self.first_port[n] + into as u32) as usize;
                    if nout != 0 && acc.last_out[way_in] != nout {
                        acc.last_out[way_in] = nout;
                        deps.add(n as Sw, into, sl, nout, sl);
                    }
                }
            }
        }
        if within && used {
            acc.v.vls_used = acc.v.vls_used.max(sl + 1);
        }
        acc.queue = order;
    }

    /// The pairs of end ports cabled straight to the destination port (no
    /// switch between), and of the other switchless ones, cut off from it.
    fn switchless_pairs(&self, acc: &mut Acc, dest_port: u32) {
        for &sp in &self.sources.switchless {
            if sp == dest_port {
                continue;
            }
            if self.fabric.ports[sp as usize].peer == dest_port {
                acc.v.add_shortest(1, 1);
            } else {
                acc.v.disconnected += 1;
            }
        }
    }

    /// `l` routes to the destination at hand leave switch `s` by port
    /// index `pi`. With [`LidColumns`] (many switches, few destinations
    /// each) they wait in `sent` to be added in switch order after the
    /// walk, which would scatter them over a table too large for the
    /// cache; otherwise, or when `now` (a taker's few last hops, which
    /// skip that pass), they are added at once, since an extra pass per
    /// destination would cost more than it spares.
    #[inline]
    fn add_load(&self, acc: &mut Acc, s: Sw, pi: u32, l: u64, now: bool) {
        if self.columns.is_some() && !now {
            acc.sent[s as usize] = l as u32;
        } else {
            acc.load_32[pi as usize] += l as u32;
        }
    }

    #[inline]
    fn check_vl(&self, v: &mut Verification, port_index: u32, vl: u8, op_vls: u8) {
        if vl < 15 && v.vls_used <= vl {
            v.vls_used = vl + 1;
        }
        if vl >= op_vls {
            v.vl_violations += 1;
            let p = &self.fabric.ports[port_index as usize];
            self.example(|| format!("{} port {} carries VL {} but operates {} VLs", self.node_name(p.node), p.num, vl, p.op_vls));
        }
    }

    /// The per-path-SL states of switch `s` for this destination, the
    /// switches that forward to it done (the order visits switches deepest
    /// first). A state is (input port, SL) with the VLs its paths arrived
    /// on; a switch's states leave it on one link, so what they bring to
    /// the next switch is one VL mask per SL, kept per switch: the states
    /// arriving by that link are entered into the next switch right here.
    /// Sources start states by their port's class (see [`entry_classes`]),
    /// one per (class, SL) whatever the number of sources. Walks taken
    /// over in part and those off the common case come here;
    /// [`Ctx::walk_alone`] walks the others.
    fn walk_switch(&self, acc: &mut Acc, s: Sw, dest: (Sw, u16, u32), pre: Option<Option<usize>>) {
        let lid = dest.1;
        self.seeds_of((&mut acc.seeds, &mut acc.v), s, dest, None);
        let su = s as usize;
        let Some(deps) = self.deps else { return };
        let out = acc.out[su];
        let side = self.pairs.side[su] as usize;
        for i in 0..acc.seeds.len() {
            let (class, mask) = acc.seeds[i];
            if out == 0 {
                break;
            }
            let map = self.seed_maps[self.seed_base[su] as usize + class as usize * side + out as usize];
            // Nothing precedes an end port's channel: no arriving VL, so
            // no dependency, and `enter` writes into no record (record 0
            // stands in).
            self.enter::<false>(acc, deps, s, 0, map, lid, mask, &[0; 16]);
        }
        let m = std::mem::take(&mut acc.st_sl[su]);
        if m == 0 {
            return;
        }
        let vls = std::mem::take(&mut acc.st_vl[su]);
        if let Some(rec) = pre.unwrap_or_else(|| self.push_record(acc, deps, s)) {
            self.enter::<true>(acc, deps, acc.next[su], rec, deps.map(rec), lid, m, &vls);
        }
    }

    /// The routes to a destination resolved the common way and walked in
    /// full (not taken over from another): [`Ctx::destination`]'s counts
    /// and [`Ctx::walk_switch`]'s per-path-SL states for every switch of
    /// `order` (deepest first), in one loop that keeps a switch's states
    /// in registers while its sources join them and they enter the next
    /// switch. The same counts, states and dependencies as switch by
    /// switch. `hold`: the walk to fill for the next destinations of the
    /// switch to take over, and how many switches of `order` are within
    /// one hop of it; false when the walk cannot be held (a VL violation
    /// beyond them, which takers would not count).
    #[inline(never)]
    fn walk_alone(
        &self,
        acc: &mut Acc,
        deps: &DepBits,
        dest: (Sw, u16, u32),
        order: &[Sw],
        is_end: bool,
        mut hold: Option<(&mut WalkRef, usize)>,
    ) -> bool {
        let (t, lid, dest_port) = dest;
        let end = is_end as u32;
        // The destination's SLs by source class, when the oracle gave a table.
        let row = self.table.map(|tb| tb.row(tb.class(lid)));
        if let Some(row) = row {
            // Read at every switch in the walk's order, all of it.
            for at in (0..row.len()).step_by(64) {
                prefetch(row, at);
            }
        }
        let mut top = 0u8;
        let nsw = self.graph.switch_count();
        let Acc { v, load_32, sent, load, st_sl, st_vl, out, next, ovl, into, dist, seeds, pre, .. } = acc;
        // Slices of one length, so that one bound covers them all.
        let (out, next, ovl, into, dist) = (&out[..nsw], &next[..nsw], &ovl[..nsw], &into[..nsw], &dist[..nsw]);
        let (load, st_sl, st_vl) = (&mut load[..nsw], &mut st_sl[..nsw], &mut st_vl[..nsw]);
        // The record `s`'s states enter the next switch by, asked for ahead.
        let seed_at = &self.seed_base[..nsw];
        let record = |s: Sw| -> Option<usize> {
            let su = s as usize;
            let n = *next.get(su)? as usize;
            let (o, on) = (out[su], *out.get(n)?);
            if o == 0 || on == 0 {
                return None;
            }
            let rec = deps.record_of(n, into[su], on);
            deps.prefetch(rec);
            // And the line of `s`'s sources' maps.
            prefetch(&self.seed_maps, seed_at[su] as usize + o as usize);
            Some(rec)
        };
        for (i, &s) in order.iter().enumerate().rev().take(PRELOAD) {
            pre[i % PRELOAD] = record(s);
        }
        let (violations, before) = (v.vl_violations, FarCounts::of(v));
        let mut kept = true;
        for (i, &s) in order.iter().enumerate().rev() {
            let rec = pre[i % PRELOAD];
            if i >= PRELOAD {
                pre[i % PRELOAD] = record(order[i - PRELOAD]);
            }
            // The switches beyond one hop of the destination's are done:
            // what takers start from (see [`WalkRef`]).
            let mut far = match hold.as_mut() {
                Some((h, near)) if i + 1 == *near => {
                    let near = &order[..*near];
                    h.far = FarCounts::of(v).since(before);
                    h.near_load.extend(near.iter().map(|&u| (u, load[u as usize])));
                    kept = v.vl_violations == violations;
                    h.tail.extend(near.iter().map(|&u| (u, st_sl[u as usize], st_vl[u as usize])));
                    None
                }
                Some((h, near)) if i >= *near => Some(h),
                _ => None,
            };
            let su = s as usize;
            if su >= nsw {
                break;
            }
            let (o, n) = (out[su], next[su]);
            let mut l = std::mem::take(&mut load[su]);
            // The states leaving `s`: those that entered it, and its sources'.
            let mut m = std::mem::take(&mut st_sl[su]);
            let mut vls = if m == 0 { [0; 16] } else { std::mem::take(&mut st_vl[su]) };
            let srcs = self.sources.at(s);
            if !srcs.is_empty() {
                let c = srcs.len() as u64 - (s == t && srcs.contains(&dest_port)) as u64;
                if c > 0 {
                    // Links: source→entry switch, the switch hops, and the
                    // last link into an end port; all shortest.
                    v.add_shortest(c, 1 + dist[su] as u32 + end);
                    l += c;
                }
                // Made even where they go no further (an SL out of range
                // is a violation wherever its source is).
                match row {
                    Some(row) if s != t => self.table_seeds((seeds, v), s, row, lid),
                    // A held walk keeps its sources' SLs (without a table).
                    _ => self.seeds_of((seeds, v), s, dest, far.as_deref_mut().map(|h| &mut h.sls)),
                }
                if o != 0 {
                    let at = (su, self.first_port[su] + o as u32, ovl[su], n != NONE);
                    let side = self.pairs.side[su] as usize;
                    let maps = &self.seed_maps[self.seed_base[su] as usize..];
                    for &(class, sls) in seeds.iter() {
                        let map = maps.get(class as usize * side + o as usize).copied().unwrap_or(IDENTITY_NIBBLES);
                        self.leave(v, deps, at, map, lid, sls, None, (&mut m, &mut vls), &mut top);
                    }
                }
            }
            if l != 0 && is_end {
                let pi = self.first_port[su] + o as u32;
                if let Some(h) = far {
                    h.far_loads.push((pi, l as u32));
                }
                // As [`Ctx::add_load`] adds it.
                match self.columns {
                    Some(_) => sent[su] = l as u32,
                    None => load_32[pi as usize] += l as u32,
                }
            }
            if n == NONE {
                continue;
            }
            let n = n as usize;
            if n >= nsw {
                break;
            }
            load[n] += l;
            let (Some(rec), true) = (rec, m != 0) else { continue };
            // The states enter the next switch by the pair record `rec`,
            // written in place: a copy would be read back whole after
            // narrow writes, which the store buffer cannot forward.
            let at = (n, self.first_port[n] + out[n] as u32, ovl[n], next[n] != NONE);
            let next_state = (&mut st_sl[n], &mut st_vl[n]);
            let bits = self.leave(v, deps, at, deps.map(rec), lid, m, Some(&vls), next_state, &mut top);
            deps.or_gathered(rec, bits);
        }
        v.vls_used = v.vls_used.max(top);
        kept
    }

    /// [`Ctx::seeds_of`] for a switch other than the destination's, with
    /// the oracle's table (`row`: the destination's SLs by source class):
    /// the switch's groups of sources.
    #[inline(always)]
    fn table_seeds(&self, (seeds, v): (&mut Vec<(u32, u16)>, &mut Verification), s: Sw, row: &[u8], lid: u16) {
        seeds.clear();
        let groups = self.seed_groups.at(s);
        // One group (a torus's switch with its CAs): its seed, nothing to
        // merge.
        if let &[(class, sl_class, _)] = groups {
            if let Some(&sl) = row.get(sl_class as usize).filter(|&&sl| sl <= 15) {
                seeds.push((class, 1 << sl));
                return;
            }
        }
        for &group in groups {
            self.push_seed((seeds, v), row, group, lid);
        }
    }

    /// Adds `n` sources of entry class `class` whose SL towards `lid` is
    /// `row`'s for their SL class to the seeds.
    #[inline(always)]
    fn push_seed(&self, (seeds, v): (&mut Vec<(u32, u16)>, &mut Verification), row: &[u8], (class, sl_class, n): (u32, u32, u32), lid: u16) {
        let sl = row.get(sl_class as usize).copied().unwrap_or(0);
        if sl > 15 {
            v.vl_violations += n as u64;
            self.example(|| format!("paths to LID {lid}: the engine's path SL table gives SL {sl}"));
            return;
        }
        match seeds.iter_mut().find(|e| e.0 == class) {
            Some(e) => e.1 |= 1 << sl,
            None => seeds.push((class, 1 << sl)),
        }
    }

    /// Paths to `lid` on `sl` leaving switch number `su` on `vl`, by
    /// port index `pi` that operates `op_vls`: the checks [`Ctx::enter`]
    /// makes, `top` the highest VL out plus one. False when they are
    /// mapped to VL 15 and go no further.
    #[inline(always)]
    fn vl_out(&self, v: &mut Verification, (su, pi, op_vls): (usize, u32, u8), sl: u8, vl: u8, lid: u16, top: &mut u8) -> bool {
        if vl >= 15 {
            v.vl_violations += 1;
            let node = self.graph.switch_nodes[su];
            self.example(|| format!("paths to LID {lid} on SL {sl} are mapped to VL 15 at {}", self.node_name(node)));
            return false;
        }
        *top = (*top).max(vl + 1);
        if vl >= op_vls {
            self.check_vl(v, pi, vl, op_vls);
        }
        true
    }

    /// The source states of switch `s` towards `lid` into `acc.seeds`: per
    /// entry class, the SLs its sources' paths take (each also pushed to
    /// `sls` when given). An SL the oracle gives out of range is a VL
    /// violation.
    fn seeds_of(&self, (seeds, v): (&mut Vec<(u32, u16)>, &mut Verification), s: Sw, (t, lid, dest_port): (Sw, u16, u32), mut sls: Option<&mut Vec<u8>>) {
        if let Some(table) = self.table {
            let row = table.row(table.class(lid));
            if s != t {
                // The destination's own port is a source of its switch
                // only: elsewhere the switch's groups stand for its sources.
                return self.table_seeds((seeds, v), s, row, lid);
            }
            seeds.clear();
            let range = self.sources.range(s);
            for (&sp, src) in self.sources.ports[range.clone()].iter().zip(&self.seed_src[range]) {
                for off in (sp != dest_port).then_some(0..src.lids).into_iter().flatten() {
                    self.push_seed((seeds, v), row, (src.class, table.class(src.lid.wrapping_add(off)), 1), lid);
                }
            }
            return;
        }
        seeds.clear();
        let range = self.sources.range(s);
        for (&sp, src) in self.sources.ports[range.clone()].iter().zip(&self.seed_src[range]) {
            if sp == dest_port {
                continue;
            }
            let mut mask = 0u16;
            for off in 0..src.lids {
                let slid = src.lid.wrapping_add(off);
                let sl = self.routing.path_sl.path_sl(slid, lid);
                if let Some(v) = sls.as_deref_mut() {
                    v.push(sl);
                }
                if sl > 15 {
                    v.vl_violations += 1;
                    self.example(|| format!("LID {slid} -> LID {lid}: the engine's path SL oracle gave SL {sl}"));
                    continue;
                }
                mask |= 1 << sl;
            }
            if mask != 0 {
                let class = src.class;
                match seeds.iter_mut().find(|e| e.0 == class) {
                    Some(e) => e.1 |= mask,
                    None => seeds.push((class, mask)),
                }
            }
        }
    }

    /// Whether the destination at hand (`lid` behind `t`, resolved the
    /// common way, `order` its switches by distance with the first `near`
    /// within one hop of `t`) can take over the walk held in `r` (see
    /// [`WalkRef`]).
    #[allow(clippy::too_many_arguments)]
    fn takes_over(&self, acc: &mut Acc, r: &WalkRef, t: Sw, lid: u16, dest_port: u32, is_end: bool, order: &[Sw], near: usize) -> bool {
        let tu = t as usize;
        if r.t != t || r.is_end != is_end || acc.out[..tu] != r.out[..tu] || acc.out[tu + 1..] != r.out[tu + 1..] {
            return false;
        }
        if let Some(table) = self.table {
            // One class: one SL from every source (the table's rows).
            return table.class(lid) == r.class;
        }
        // The SL of every path from a source of those switches, in the
        // held walk's order: equal SLs make equal seeds.
        let mut at = 0usize;
        for &s in order[near..].iter().rev() {
            let range = self.sources.range(s);
            for (&sp, src) in self.sources.ports[range.clone()].iter().zip(&self.seed_src[range]) {
                if sp == dest_port {
                    continue;
                }
                for off in 0..src.lids {
                    let sl = self.routing.path_sl.path_sl(src.lid.wrapping_add(off), lid);
                    if r.sls.get(at) != Some(&sl) {
                        return false;
                    }
                    at += 1;
                }
            }
        }
        at == r.sls.len()
    }

    /// The pair record switch `s`'s states will enter the next switch by,
    /// for the destination at hand (`None` when they stop at `s`).
    #[inline(always)]
    fn push_record(&self, acc: &Acc, deps: &DepBits, s: Sw) -> Option<usize> {
        let su = s as usize;
        let n = acc.next[su];
        if acc.out[su] == 0 || n == NONE || acc.out[n as usize] == 0 {
            return None;
        }
        Some(deps.record_of(n as usize, acc.into[su], acc.out[n as usize]))
    }

    /// Asks the cache for [`Ctx::push_record`] of `s`, [`PRELOAD`]
    /// switches ahead of the walk: those reads then overlap, where in the
    /// walk each would stall it. Gives the record, for the walk to use
    /// when it gets to `s`.
    #[inline]
    fn preload(&self, acc: &Acc, s: Sw) -> Option<usize> {
        let deps = self.deps?;
        let rec = self.push_record(acc, deps, s)?;
        deps.prefetch(rec);
        Some(rec)
    }

    /// States (`s`, input port, SL) for the SLs of `sls`, arrived on the
    /// VLs of `arrived[SL]`, `s` forwarding by a port (not 0): per SL its
    /// VL out, the dependencies from every VL it arrived on, and (unless
    /// `s` delivers) the VL it leaves on. The (input, output) pair's
    /// record `rec` holds its map (`map`, read ahead) and its dependency
    /// bits, which are gathered for all SLs and written once. `ARRIVED`
    /// false: sources' states, which arrived on no VL (`arrived` is all
    /// zero), so they add no dependency and the bits are not gathered.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn enter<const ARRIVED: bool>(
        &self,
        acc: &mut Acc,
        deps: &DepBits,
        s: Sw,
        rec: usize,
        map: u64,
        lid: u16,
        sls: u16,
        arrived: &[u16; 16],
    ) {
        let su = s as usize;
        let at = (su, self.first_port[su] + acc.out[su] as u32, acc.ovl[su], acc.next[su] != NONE);
        // The highest VL out, for `vls_used` once rather than per SL.
        let mut top = 0u8;
        let Acc { v, st_sl, st_vl, .. } = acc;
        let bits = self.leave(v, deps, at, map, lid, sls, ARRIVED.then_some(arrived), (&mut st_sl[su], &mut st_vl[su]), &mut top);
        v.vls_used = v.vls_used.max(top);
        if ARRIVED {
            deps.or_gathered(rec, bits);
        }
    }

    /// States (SLs `sls`) leaving switch number `su` by port index `pi`
    /// (operating `op_vls`) under the map word `map`, having arrived on
    /// the VLs of `arrived[SL]` (None: sources' states, which arrived on
    /// none): per SL its VL out, checked as [`Ctx::vl_out`] does and, when
    /// they go on (`carry`), added to the next switch's states `next`.
    /// Gives the dependency bits they add to their pair record, gathered
    /// for [`DepBits::or_gathered`].
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn leave(
        &self,
        v: &mut Verification,
        deps: &DepBits,
        (su, pi, op_vls, carry): (usize, u32, u8, bool),
        map: u64,
        lid: u16,
        sls: u16,
        arrived: Option<&[u16; 16]>,
        (next_sls, next_vls): (&mut u16, &mut [u16; 16]),
        top: &mut u8,
    ) -> Gathered {
        let below = ((1u32 << self.vls) - 1) as u16;
        let mut bits = Gathered::default();
        for sl in crate::cdg::bits(sls as u64) {
            let vl = (map >> (4 * sl) & 15) as u8;
            let came = arrived.map_or(0, |a| a[sl as usize] & below);
            if came != 0 && (vl as u32) < self.vls {
                bits.add(vl as u32 * deps.stride, came);
            }
            if self.vl_out(v, (su, pi, op_vls), sl as u8, vl, lid, top) && carry {
                next_vls[sl as usize] |= 1 << vl;
                *next_sls |= 1 << sl;
            }
        }
        bits
    }
}

/// Adds one multicast group's dependencies. The VL traffic arrives on
/// depends on where it entered the previous switch, so each link's
/// possible arrival VLs are gathered first.
fn add_mcast_deps(fabric: &FabricSnapshot, graph: &Graph, vlmap: &VlMap, deps: &DepBits, group: &McastRoute) {
    let sl = group.sl & 15;
    let ports_of: std::collections::HashMap<u32, &[u8]> =
        group.switches.iter().map(|(n, p)| (*n, p.as_slice())).collect();
    let vls = deps.vls;
    for (node, ports) in &group.switches {
        let Some(&s) = graph.sw_of_node.get(*node as usize) else { continue };
        if s == NONE {
            continue;
        }
        let n = &fabric.nodes[*node as usize];
        // An entry may name ports the switch lacks: they carry nothing.
        for &i in ports.iter().filter(|&&p| p != 0 && p <= n.num_ports) {
            let Some(in_port) = fabric.ports.get((n.first_port + i as u32) as usize) else { continue };
            let Some(up) = fabric.ports.get(in_port.peer as usize) else { continue };
            // Traffic from an end port starts its path here: no dependency
            // on the link it came by.
            let Some(up_ports) = ports_of.get(&up.node) else { continue };
            if graph.sw_of_node.get(up.node as usize).is_none_or(|&x| x == NONE) {
                continue;
            }
            let mut arriving = [false; 16];
            for &j in up_ports.iter().filter(|&&j| j != up.num) {
                arriving[vlmap.vl(up.node, j, up.num, sl) as usize & 15] = true;
            }
            for &o in ports.iter().filter(|&&o| o != 0 && o != i) {
                let out_vl = vlmap.vl(*node, i, o, sl);
                for in_vl in (0..16u8).filter(|&v| arriving[v as usize]) {
                    if (in_vl as u32) < vls && (out_vl as u32) < vls {
                        deps.add(s, i, in_vl, o, out_vl);
                    }
                }
            }
        }
    }
}

/// Connected component of each switch over usable links.
fn components(graph: &Graph) -> Vec<u32> {
    let n = graph.switch_count();
    let mut comp = vec![NONE; n];
    let mut queue = Vec::new();
    let mut next = 0;
    for s in 0..n {
        if comp[s] != NONE {
            continue;
        }
        comp[s] = next;
        queue.clear();
        queue.push(s as Sw);
        while let Some(x) = queue.pop() {
            for &y in &graph.sw_adj[x as usize] {
                if comp[y as usize] == NONE {
                    comp[y as usize] = next;
                    queue.push(y);
                }
            }
        }
        next += 1;
    }
    comp
}

/// Every dependency held, as (transmitting port index, VL) of the channel
/// it comes from and of the channel it goes to.
fn each_channel_dep(fabric: &FabricSnapshot, graph: &Graph, deps: &DepBits, mut f: impl FnMut(u32, u8, u32, u8)) {
    for s in 0..graph.switch_count() {
        channel_deps_at(fabric, graph, deps, s, &mut f);
    }
}

/// The channel dependencies at switch `s`, as [`each_channel_dep`] gives them.
fn channel_deps_at(fabric: &FabricSnapshot, graph: &Graph, deps: &DepBits, s: usize, f: &mut impl FnMut(u32, u8, u32, u8)) {
    let n = &fabric.nodes[graph.switch_nodes[s] as usize];
    deps.each_at(s, &mut |_, in_port, in_vl, out_port, out_vl| {
        let from_port = fabric.ports[(n.first_port + in_port as u32) as usize].peer;
        if from_port != NONE {
            f(from_port, in_vl, n.first_port + out_port as u32, out_vl);
        }
    });
}

/// Find a cycle in the channel dependency graph (Tarjan's SCC, iterative).
fn find_credit_loop(fabric: &FabricSnapshot, graph: &Graph, deps: &DepBits) -> Option<CreditLoop> {
    let v = deps.vls as usize;
    let nch = fabric.ports.len() * v;
    // Adjacency in CSR form, from each switch's dependencies read in
    // parallel (millions on a large tree).
    let lists: Vec<Vec<(u32, u32)>> = (0..graph.switch_count())
        .into_par_iter()
        .map(|s| {
            let mut edges = Vec::new();
            channel_deps_at(fabric, graph, deps, s, &mut |from, in_vl, to, out_vl| {
                edges.push(((from as usize * v + in_vl as usize) as u32, (to as usize * v + out_vl as usize) as u32));
            });
            edges
        })
        .collect();
    let edges = || lists.iter().flatten();
    let mut start = vec![0u32; nch + 1];
    for &(a, _) in edges() {
        start[a as usize + 1] += 1;
    }
    for i in 0..nch {
        start[i + 1] += start[i];
    }
    let mut adj = vec![0u32; start[nch] as usize];
    let mut fill = start.clone();
    for &(a, b) in edges() {
        adj[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
    }
    drop(lists);

    // Iterative Tarjan.
    let mut index = vec![u32::MAX; nch];
    let mut low = vec![0u32; nch];
    let mut on_stack = vec![false; nch];
    let mut comp = vec![u32::MAX; nch];
    let mut stack: Vec<u32> = Vec::new();
    let mut call: Vec<(u32, u32)> = Vec::new();
    let mut next_index = 0u32;
    let mut ncomp = 0u32;
    let mut cyclic: Vec<u32> = Vec::new();
    let mut on_cycles = 0usize;
    for root in 0..nch as u32 {
        if index[root as usize] != u32::MAX || start[root as usize] == start[root as usize + 1] {
            continue;
        }
        call.push((root, start[root as usize]));
        index[root as usize] = next_index;
        low[root as usize] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (u, ref mut ei)) = call.last_mut() {
            if *ei < start[u as usize + 1] {
                let w = adj[*ei as usize];
                *ei += 1;
                if index[w as usize] == u32::MAX {
                    index[w as usize] = next_index;
                    low[w as usize] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w as usize] = true;
                    call.push((w, start[w as usize]));
                } else if on_stack[w as usize] {
                    low[u as usize] = low[u as usize].min(index[w as usize]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p as usize] = low[p as usize].min(low[u as usize]);
                }
                if low[u as usize] == index[u as usize] {
                    let mut size = 0usize;
                    let mut self_loop = false;
                    while let Some(w) = stack.pop() {
                        on_stack[w as usize] = false;
                        comp[w as usize] = ncomp;
                        size += 1;
                        if w == u {
                            break;
                        }
                    }
                    if size == 1 {
                        let r = start[u as usize] as usize..start[u as usize + 1] as usize;
                        self_loop = adj[r].contains(&u);
                    }
                    if size > 1 || self_loop {
                        cyclic.push(u);
                        on_cycles += size;
                    }
                    ncomp += 1;
                }
            }
        }
    }
    let &first = cyclic.first()?;
    // Walk inside the first cyclic component until a channel repeats.
    let c = comp[first as usize];
    let mut seen_at = std::collections::HashMap::new();
    let mut path = Vec::new();
    let mut u = first;
    loop {
        if let Some(&i) = seen_at.get(&u) {
            path.drain(..i);
            break;
        }
        seen_at.insert(u, path.len());
        path.push(u);
        let r = start[u as usize] as usize..start[u as usize + 1] as usize;
        match adj[r].iter().find(|&&w| comp[w as usize] == c) {
            Some(&w) => u = w,
            None => break,
        }
    }
    Some(CreditLoop {
        cycle: path.iter().map(|&ch| (ch / v as u32, (ch % v as u32) as u8)).collect(),
        channels_on_cycles: on_cycles,
        cyclic_components: cyclic.len(),
    })
}

/// One line naming the channels of a cycle.
pub fn describe_cycle(fabric: &FabricSnapshot, cycle: &[(u32, u8)]) -> String {
    let mut s = String::from("credit loop through ");
    for (i, &(pi, vl)) in cycle.iter().enumerate().take(12) {
        if i > 0 {
            s.push_str(" -> ");
        }
        let p = &fabric.ports[pi as usize];
        let n = &fabric.nodes[p.node as usize];
        s.push_str(&format!("0x{:016x}[{}] VL{}", n.guid, p.num, vl));
    }
    if cycle.len() > 12 {
        s.push_str(&format!(" ... ({} channels)", cycle.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns hold every switch's entry for every LID, in LFTs of
    /// any lengths (shorter than the LIDs, empty, longer, across block
    /// boundaries), and `NO_ROUTE` where a switch's LFT ends.
    #[test]
    fn lid_columns_are_the_lfts_transposed() {
        let lens = [0usize, 1, 63, 64, 65, 130, 200, 300];
        let lfts: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(s, &n)| (0..n).map(|lid| ((lid * 7 + s * 13) % 250) as u8).collect())
            .collect();
        let views: Vec<&[u8]> = lfts.iter().map(Vec::as_slice).collect();
        for n in [1usize, 64, 129, 257] {
            // Every LID up to `n`, and every third one (a torus's CAs
            // between its switches).
            for step in [1usize, 3] {
                let lids: Vec<u16> = (0..n).step_by(step).map(|l| l as u16).collect();
                let c = LidColumns::new(&views, &lids);
                for lid in 0..n + 1 {
                    let row = c.row(lid as u16);
                    if lid % step != 0 || lid >= n {
                        assert!(row.is_empty(), "LID {lid} has no row ({n} LIDs, every {step})");
                        continue;
                    }
                    assert_eq!(row.len(), views.len());
                    for (s, lft) in views.iter().enumerate() {
                        assert_eq!(row[s], lft.get(lid).copied().unwrap_or(NO_ROUTE), "switch {s}, LID {lid}, {n} LIDs, every {step}");
                    }
                }
            }
        }
        assert!(LidColumns::new(&[], &[1, 3, 10]).row(3).is_empty());
    }

    #[test]
    fn lid_columns_only_for_small_groups_and_within_their_memory_cap() {
        // A torus: one destination per switch; a tree: leaves of 16.
        assert!(use_columns(1000, 1000, 1000, COLUMNS_MAX_BYTES));
        assert!(!use_columns(16 * 4096, 4096, 768, COLUMNS_MAX_BYTES));
        // The torus again at 10k switches and 48k destinations: past the cap.
        assert!(!use_columns(48_000, 48_000, 10_000, COLUMNS_MAX_BYTES));
        assert!(use_columns(48_000, 48_000, 10_000, 48_000 * 10_000));
    }
}
