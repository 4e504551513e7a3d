//! The complete channel dependency graph of one virtual layer.
//!
//! Channels are directed switch-to-switch links; parallel cables between
//! the same two switches collapse into one channel. That is safe: a cycle
//! among per-cable channels maps onto a closed walk, hence a cycle, among
//! the collapsed ones, so an acyclic collapsed graph proves the per-cable
//! graph acyclic too. A dependency is a turn `(t→u) → (u→v)` with `v ≠ t`.
//!
//! Every dependency of a layer is *unknown*, *used* (some route of the
//! layer takes that turn, or it belongs to the escape paths) or *blocked*
//! (using it would close a cycle among the used ones). The used set is
//! kept acyclic by construction: a dependency joins it only through
//! [`Layer::try_use`], which maintains a topological order of the channels
//! incrementally (the kit's [`TopoOrder`], Pearce and Kelly's dynamic topological sort). An edge
//! that agrees with the current order costs one comparison; one that does
//! not triggers a search bounded to the channels between its two ends in
//! the order, which either finds the cycle or reorders just that window.

use smcore_kit::cdg::{bits, Deps, TopoOrder};
use smcore_kit::graph::{Graph, Sw};

/// Index of a channel.
pub type Ch = u32;

/// Channels of the switch graph and the dependency slots between them.
#[derive(Debug, Clone)]
pub struct Channels {
    /// Per switch, its out-channels are `start[u]..start[u + 1]`.
    pub start: Vec<u32>,
    /// Head switch of each channel.
    pub head: Vec<Sw>,
    /// Tail switch of each channel.
    pub tail: Vec<Sw>,
    /// The channel in the opposite direction.
    pub rev: Vec<Ch>,
    /// Per channel `c = (u→v)`: its out-dependencies are the slots
    /// `dep_start[c] + k` for the `k`-th out-channel of `v`.
    pub dep_start: Vec<u32>,
    /// Total dependency slots (U-turn slots included, never used).
    pub deps: usize,
}

impl Channels {
    /// Channels of the distinct switch neighbours in `graph`.
    pub fn new(graph: &Graph) -> Channels {
        let n = graph.switch_count();
        let mut start = Vec::with_capacity(n + 1);
        let mut head = Vec::new();
        let mut tail = Vec::new();
        start.push(0);
        for u in 0..n {
            for &v in &graph.sw_adj[u] {
                head.push(v);
                tail.push(u as Sw);
            }
            start.push(head.len() as u32);
        }
        let m = head.len();
        let mut rev = vec![0; m];
        for c in 0..m {
            let (u, v) = (tail[c], head[c]);
            let back = (start[v as usize]..start[v as usize + 1]).find(|&o| head[o as usize] == u);
            // sw_adj is built from bidirectional links, so the reverse exists.
            rev[c] = back.unwrap_or(c as u32);
        }
        let mut dep_start = Vec::with_capacity(m);
        let mut deps = 0usize;
        for &v in head.iter() {
            dep_start.push(deps as u32);
            deps += (start[v as usize + 1] - start[v as usize]) as usize;
        }
        Channels {
            start,
            head,
            tail,
            rev,
            dep_start,
            deps,
        }
    }

    /// Number of channels.
    pub fn len(&self) -> usize {
        self.head.len()
    }

    /// True without channels.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    /// Out-channels of switch `u`.
    #[inline]
    pub fn out(&self, u: Sw) -> std::ops::Range<u32> {
        self.start[u as usize]..self.start[u as usize + 1]
    }

    /// The channel `u→v`, if the two are neighbours.
    pub fn find(&self, u: Sw, v: Sw) -> Option<Ch> {
        self.out(u).find(|&c| self.head[c as usize] == v)
    }

    /// Slot of the dependency `x → y`; `y` must leave the head of `x`.
    #[inline]
    pub fn dep(&self, x: Ch, y: Ch) -> u32 {
        let v = self.head[x as usize];
        self.dep_start[x as usize] + (y - self.start[v as usize])
    }
}

/// State of one dependency slot.
pub const UNKNOWN: u8 = 0;
/// Some route (or escape path) of the layer takes this turn.
pub const USED: u8 = 1;
/// Taking this turn would close a cycle among the used ones.
pub const BLOCKED: u8 = 2;

/// The used/blocked dependencies of one layer with a topological order of
/// the channels under the used ones.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Per dependency slot: [`UNKNOWN`], [`USED`] or [`BLOCKED`].
    pub status: Vec<u8>,
    /// Per channel, bit k set when the turn into the k-th out-channel of
    /// its head is used (kept only when no switch has over 64 neighbours,
    /// see `masks`): the searches then visit used turns only.
    out_mask: Vec<u64>,
    /// Per channel `(u→v)`, bit j set when the turn from the reverse of
    /// `u`'s j-th out-channel into it is used.
    in_mask: Vec<u64>,
    masks: bool,
    order: TopoOrder,
}

/// The used turns of a layer, as the kit's order searches read them.
struct Used<'a> {
    ch: &'a Channels,
    status: &'a [u8],
    out_mask: &'a [u64],
    in_mask: &'a [u64],
    masks: bool,
}

impl Deps for Used<'_> {
    #[inline]
    fn each_succ(&self, w: Ch, mut f: impl FnMut(Ch) -> bool) {
        let ch = self.ch;
        let v = ch.head[w as usize];
        if self.masks {
            let s0 = ch.start[v as usize];
            for k in bits(self.out_mask[w as usize]) {
                if !f(s0 + k) {
                    return;
                }
            }
            return;
        }
        let base = ch.dep_start[w as usize];
        for (k, z) in ch.out(v).enumerate() {
            if self.status[base as usize + k] == USED && !f(z) {
                return;
            }
        }
    }

    #[inline]
    fn each_pred(&self, w: Ch, mut f: impl FnMut(Ch)) {
        // In-dependencies of w = (u→v) come from channels (t→u), t ≠ v.
        let ch = self.ch;
        let u = ch.tail[w as usize];
        if self.masks {
            let s0 = ch.start[u as usize];
            for k in bits(self.in_mask[w as usize]) {
                f(ch.rev[(s0 + k) as usize]);
            }
            return;
        }
        let v = ch.head[w as usize];
        let k = w - ch.start[u as usize];
        for o in ch.out(u) {
            if ch.head[o as usize] == v {
                continue;
            }
            let z = ch.rev[o as usize];
            if self.status[(ch.dep_start[z as usize] + k) as usize] == USED {
                f(z);
            }
        }
    }
}

impl Layer {
    /// A layer with no dependency used yet.
    pub fn new(ch: &Channels) -> Layer {
        let m = ch.len();
        Layer {
            status: vec![UNKNOWN; ch.deps],
            out_mask: vec![0; m],
            in_mask: vec![0; m],
            masks: (0..ch.start.len().saturating_sub(1) as Sw).all(|u| ch.out(u).len() <= 64),
            order: TopoOrder::new(m),
        }
    }

    /// Window searches done (order violations), for the diagnostics.
    pub fn searches(&self) -> u64 {
        self.order.searches
    }

    /// Channels visited by those searches.
    pub fn visited(&self) -> u64 {
        self.order.visited
    }

    /// Start from this channel order (a permutation of all channels) when
    /// no dependency is used yet, so that turns agreeing with it are free.
    pub fn seed(&mut self, order: &[Ch]) {
        debug_assert!(self.status.iter().all(|&s| s != USED));
        self.order.seed(order);
    }

    /// Forget every dependency (the next layer starts afresh) keeping the
    /// allocations.
    pub fn reset(&mut self) {
        self.status.fill(UNKNOWN);
        self.out_mask.fill(0);
        self.in_mask.fill(0);
        self.order.reset();
    }

    fn used<'a>(&'a self, ch: &'a Channels) -> Used<'a> {
        Used {
            ch,
            status: &self.status,
            out_mask: &self.out_mask,
            in_mask: &self.in_mask,
            masks: self.masks,
        }
    }

    /// Mark the dependency `x → y` used unless that closes a cycle among
    /// the used dependencies; then mark it blocked. Returns whether it is
    /// used now.
    pub fn try_use(&mut self, ch: &Channels, x: Ch, y: Ch) -> bool {
        let d = ch.dep(x, y) as usize;
        match self.status[d] {
            USED => return true,
            BLOCKED => return false,
            _ => {}
        }
        if !self.order.respects(x, y) {
            // The order searches the used turns while it changes; it is
            // moved out for that (no copy).
            let mut order = std::mem::take(&mut self.order);
            let fits = order.insert(&self.used(ch), x, y);
            self.order = order;
            if !fits {
                self.status[d] = BLOCKED;
                return false;
            }
        }
        self.set_used(ch, d, x, y);
        true
    }

    #[inline]
    fn set_used(&mut self, ch: &Channels, d: usize, x: Ch, y: Ch) {
        self.status[d] = USED;
        if self.masks {
            let u = ch.head[x as usize];
            self.out_mask[x as usize] |= 1 << (y - ch.start[u as usize]);
            self.in_mask[y as usize] |= 1 << (ch.rev[x as usize] - ch.start[u as usize]);
        }
    }

    /// Drop a dependency this layer marked (used or blocked) so that it is
    /// unknown again. Removing a used edge keeps the order topological.
    pub fn forget(&mut self, ch: &Channels, x: Ch, y: Ch) {
        let d = ch.dep(x, y) as usize;
        if self.status[d] == USED && self.masks {
            let u = ch.head[x as usize];
            self.out_mask[x as usize] &= !(1 << (y - ch.start[u as usize]));
            self.in_mask[y as usize] &= !(1 << (ch.rev[x as usize] - ch.start[u as usize]));
        }
        self.status[d] = UNKNOWN;
    }

    /// Check the used set is acyclic against the maintained order (every
    /// used dependency goes forward). For tests.
    pub fn order_is_topological(&self, ch: &Channels) -> bool {
        self.order.is_topological(&self.used(ch))
    }
}

/// Priority queue of the searches: least key first, and among equal keys
/// first in, first out. The tie order matters: ties are the rule (every
/// link starts with the same weight), and serving them in arrival order
/// grows the sink trees breadth-first, which measured far fewer impasses
/// than a last-in-first-out order.
#[derive(Debug, Clone, Default)]
pub struct Queue {
    seq: u32,
    /// key << 64 | seq << 32 | value, so one comparison orders entries.
    heap: std::collections::BinaryHeap<std::cmp::Reverse<u128>>,
}

impl Queue {
    /// Empty the queue.
    pub fn clear(&mut self) {
        self.heap.clear();
        self.seq = 0;
    }

    /// Insert.
    #[inline]
    pub fn push(&mut self, key: u64, value: u32) {
        self.seq = self.seq.wrapping_add(1);
        self.heap.push(std::cmp::Reverse(
            (key as u128) << 64 | (self.seq as u128) << 32 | value as u128,
        ));
    }

    /// Remove an entry of least key.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u32)> {
        self.heap
            .pop()
            .map(|std::cmp::Reverse(e)| ((e >> 64) as u64, e as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_topology::{gen, lids};

    /// Is `to` reachable from `from` over used dependencies? A plain
    /// search reading the turn slots (not the masks the layer searches).
    fn reaches(ch: &Channels, layer: &Layer, from: Ch, to: Ch) -> bool {
        let slots = Used { masks: false, ..layer.used(ch) };
        smcore_kit::cdg::reaches(&slots, ch.len(), from, to)
    }

    /// Every turn of a torus offered in a scrambled order: each is refused
    /// exactly when a plain search finds the cycle it would close, and the
    /// maintained order stays topological.
    #[test]
    fn try_use_refuses_exactly_the_turns_that_close_cycles() {
        let fabric = lids::snapshot(&gen::torus(&[4, 3, 3], 1, false).unwrap().0, 0).unwrap();
        let graph = Graph::new(&fabric);
        let ch = Channels::new(&graph);
        let mut turns = Vec::new();
        for x in 0..ch.len() as Ch {
            for y in ch.out(ch.head[x as usize]) {
                if ch.head[y as usize] != ch.tail[x as usize] {
                    turns.push((x, y));
                }
            }
        }
        // A fixed pseudo-random order.
        let mut state = 0x9e3779b97f4a7c15u64;
        for i in (1..turns.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            turns.swap(i, (state % (i as u64 + 1)) as usize);
        }
        for masks in [true, false] {
            check_turns(&ch, &turns, masks);
        }
    }

    fn check_turns(ch: &Channels, turns: &[(Ch, Ch)], masks: bool) {
        let mut layer = Layer::new(ch);
        assert!(layer.masks);
        // Without masks the searches scan every turn slot (switches with
        // more than 64 neighbours).
        layer.masks = masks;
        let (mut used, mut blocked) = (0, 0);
        for &(x, y) in turns {
            let closes = reaches(ch, &layer, y, x);
            assert_eq!(layer.try_use(ch, x, y), !closes);
            if closes {
                blocked += 1;
            } else {
                used += 1;
            }
            // Asking again gives the same answer from the cache.
            assert_eq!(layer.try_use(ch, x, y), !closes);
        }
        assert!(layer.order_is_topological(ch));
        // Forgetting every used turn leaves nothing for the searches.
        for &(x, y) in turns {
            if layer.status[ch.dep(x, y) as usize] == USED {
                layer.forget(ch, x, y);
            }
        }
        assert!(
            layer
                .out_mask
                .iter()
                .chain(layer.in_mask.iter())
                .all(|&m| m == 0)
                || !masks
        );
        assert!(layer.status.iter().all(|&s| s != USED));
        assert!(used > 0 && blocked > 0, "{used} used, {blocked} blocked");
        assert!(layer.searches() > 0);
    }

    #[test]
    fn parallel_cables_collapse_into_one_channel() {
        let topo = gen::fat_tree_2level(4, 2, 8, 4).unwrap();
        let fabric = lids::snapshot(&topo, 0).unwrap();
        let graph = Graph::new(&fabric);
        let ch = Channels::new(&graph);
        for c in 0..ch.len() as Ch {
            assert_eq!(ch.rev[ch.rev[c as usize] as usize], c);
            assert_eq!(ch.head[ch.rev[c as usize] as usize], ch.tail[c as usize]);
        }
        let adj: usize = graph.sw_adj.iter().map(|a| a.len()).sum();
        assert_eq!(ch.len(), adj);
    }
}
