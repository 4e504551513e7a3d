//! Channel dependency graphs, one per virtual layer, kept acyclic while
//! paths are added to them.
//!
//! A dependency is a pair of channels a path uses back to back: it enters
//! switch `v` by channel `x` and leaves by channel `y`. Each layer stores
//! its dependencies twice as bit rows per switch (input port × output
//! port, and the transpose) so that successors and predecessors of a
//! channel are one word scan away, and keeps a topological order of the
//! channels that every dependency respects.
//!
//! The order is the kit's [`TopoOrder`] (Pearce–Kelly), which reads the
//! bit rows through its `Deps` view. Removing dependencies never breaks a
//! topological order, so a path that does not fit is rolled back by
//! clearing its new bits.

use smcore_kit::cdg::{bits, Deps, TopoOrder};
use smcore_kit::graph::Sw;

use crate::net::{Ch, Net};

/// The dependency graphs of all layers.
pub struct LayeredCdg<'a> {
    net: &'a Net,
    /// Words per bit row of each switch.
    row_words: Vec<u32>,
    /// First word of each switch's rows.
    base: Vec<usize>,
    /// Per layer: `fwd[base + in_port * W + out / 64]`.
    fwd: Vec<Vec<u64>>,
    /// Per layer: `bwd[base + out_port * W + in / 64]`.
    bwd: Vec<Vec<u64>>,
    /// Per layer: a topological order of the channels.
    order: Vec<TopoOrder>,
    added: Vec<(Ch, Ch)>,
    /// Dependencies each layer holds.
    pub edges: Vec<u64>,
    /// Per layer: paths inducing each dependency (`dep_base` numbering);
    /// allocated when the layer gets its first path.
    count: Vec<Vec<u32>>,
    /// Number of possible dependencies.
    deps: usize,
    dep_base: Vec<u32>,
    /// After a refused path: the channels from the refused dependency's
    /// head back to its tail, all joined by dependencies of the layer.
    pub cycle: Vec<Ch>,
    /// Per layer: dependencies known to close a cycle (bit per `dep`).
    /// Layers only grow between removals, so a refusal stays valid until
    /// the layer loses a dependency.
    refused: Vec<Vec<u64>>,
    /// Search even for known refusals, so that [`LayeredCdg::cycle`] is set.
    pub want_cycle: bool,
    /// Dependencies of all paths while seeding the order.
    union: Vec<u64>,
}

impl<'a> LayeredCdg<'a> {
    /// Empty graphs for `layers` layers.
    pub fn new(net: &'a Net, layers: usize) -> LayeredCdg<'a> {
        let mut row_words = Vec::with_capacity(net.nsw);
        let mut base = Vec::with_capacity(net.nsw);
        let mut words = 0usize;
        for s in 0..net.nsw {
            let w = (net.num_ports[s] as usize + 1).div_ceil(64);
            row_words.push(w as u32);
            base.push(words);
            words += w * (net.num_ports[s] as usize + 1);
        }
        let n = net.channels();
        let mut dep_base = Vec::with_capacity(net.nsw);
        let mut deps = 0u32;
        for s in 0..net.nsw {
            dep_base.push(deps);
            deps += (net.num_ports[s] as u32 + 1) * (net.num_ports[s] as u32 + 1);
        }
        LayeredCdg {
            net,
            row_words,
            base,
            fwd: vec![vec![0; words]; layers],
            bwd: vec![vec![0; words]; layers],
            order: vec![TopoOrder::new(n); layers],
            added: Vec::new(),
            edges: vec![0; layers],
            count: vec![Vec::new(); layers],
            deps: deps as usize,
            dep_base,
            cycle: Vec::new(),
            refused: vec![vec![0; (deps as usize).div_ceil(64)]; layers],
            want_cycle: false,
            union: Vec::new(),
        }
    }

    /// Dense number of the dependency `x → y`.
    #[inline]
    pub fn dep(&self, x: Ch, y: Ch) -> usize {
        let v = self.net.to[x as usize] as usize;
        let side = self.net.num_ports[v] as u32 + 1;
        (self.dep_base[v]
            + self.net.in_port[x as usize] as u32 * side
            + self.net.out_port[y as usize] as u32) as usize
    }

    /// Number of possible dependencies (the range of [`LayeredCdg::dep`]).
    pub fn dep_count(&self) -> usize {
        self.deps
    }

    /// Paths of layer `l` inducing `x → y`.
    pub fn paths_on(&self, l: usize, x: Ch, y: Ch) -> u32 {
        self.count[l].get(self.dep(x, y)).copied().unwrap_or(0)
    }

    /// Number of layers.
    pub fn layers(&self) -> usize {
        self.fwd.len()
    }

    #[inline]
    fn bit_index(&self, s: Sw, row: u8, col: u8) -> (usize, u64) {
        let w = self.row_words[s as usize] as usize;
        (
            self.base[s as usize] + row as usize * w + col as usize / 64,
            1u64 << (col % 64),
        )
    }

    /// Whether layer `l` holds the dependency `x → y` (`y` leaves the switch `x` enters).
    #[inline]
    pub fn has(&self, l: usize, x: Ch, y: Ch) -> bool {
        let v = self.net.to[x as usize];
        let (i, m) = self.bit_index(
            v,
            self.net.in_port[x as usize],
            self.net.out_port[y as usize],
        );
        self.fwd[l][i] & m != 0
    }

    fn set(&mut self, l: usize, x: Ch, y: Ch, on: bool) {
        let v = self.net.to[x as usize];
        let (ip, op) = (self.net.in_port[x as usize], self.net.out_port[y as usize]);
        let (i, m) = self.bit_index(v, ip, op);
        let (j, n) = self.bit_index(v, op, ip);
        if on {
            self.fwd[l][i] |= m;
            self.bwd[l][j] |= n;
            self.edges[l] += 1;
        } else {
            self.fwd[l][i] &= !m;
            self.bwd[l][j] &= !n;
            self.edges[l] -= 1;
        }
    }

    /// Add `x → y` to layer `l` unless it closes a cycle; true when the
    /// layer holds it afterwards.
    fn insert(&mut self, l: usize, x: Ch, y: Ch) -> bool {
        if self.has(l, x, y) {
            return true;
        }
        if !self.order[l].respects(x, y) {
            // The order searches the layer's rows while it changes; it is
            // moved out for that (no copy).
            let mut order = std::mem::take(&mut self.order[l]);
            let fits = order.insert(&self.rows(l), x, y);
            if !fits {
                order.cycle(x, y, &mut self.cycle);
            }
            self.order[l] = order;
            if !fits {
                return false;
            }
        }
        self.set(l, x, y, true);
        true
    }

    /// Add all dependencies of the channel sequence `chain` to layer `l`,
    /// or none of them when that would close a cycle.
    pub fn try_add_path(&mut self, l: usize, chain: &[Ch]) -> bool {
        self.added.clear();
        for pair in chain.windows(2) {
            let (x, y) = (pair[0], pair[1]);
            if self.has(l, x, y) {
                continue;
            }
            let d = self.dep(x, y);
            let known_bad = !self.want_cycle && self.refused[l][d / 64] & (1 << (d % 64)) != 0;
            if !known_bad && self.insert(l, x, y) {
                self.added.push((x, y));
            } else {
                if known_bad {
                    self.cycle.clear();
                }
                self.refused[l][d / 64] |= 1 << (d % 64);
                let added = std::mem::take(&mut self.added);
                for &(a, b) in &added {
                    self.set(l, a, b, false);
                }
                self.added = added;
                return false;
            }
        }
        for pair in chain.windows(2) {
            let d = self.dep(pair[0], pair[1]);
            if self.count[l].is_empty() {
                self.count[l] = vec![0; self.deps];
            }
            self.count[l][d] += 1;
        }
        true
    }

    /// Take a path `try_add_path` put into layer `l` out again; the
    /// dependencies no other path of the layer induces disappear.
    pub fn remove_path(&mut self, l: usize, chain: &[Ch]) {
        for pair in chain.windows(2) {
            let d = self.dep(pair[0], pair[1]);
            self.count[l][d] -= 1;
            if self.count[l][d] == 0 {
                self.set(l, pair[0], pair[1], false);
                self.refused[l].fill(0);
            }
        }
    }

    /// Start every layer from one order of the channels that respects as
    /// many dependencies of the paths as a depth-first search finds (all
    /// of them when their union is acyclic), so that most insertions later
    /// agree with the order and need no search: give every path to
    /// `seed_add`, then call `seed_finish`.
    pub fn seed_add(&mut self, chain: &[Ch]) {
        let net = self.net;
        if self.union.is_empty() {
            self.union = vec![0; self.fwd[0].len()];
        }
        for p in chain.windows(2) {
            let v = net.to[p[0] as usize];
            let (i, m) = self.bit_index(v, net.in_port[p[0] as usize], net.out_port[p[1] as usize]);
            self.union[i] |= m;
        }
    }

    /// See [`LayeredCdg::seed_add`].
    pub fn seed_finish(&mut self) {
        let net = self.net;
        let union = std::mem::take(&mut self.union);
        if union.is_empty() {
            return;
        }
        let n = net.channels();
        let mut state = vec![0u8; n];
        let mut finished: Vec<Ch> = Vec::with_capacity(n);
        let mut stack: Vec<(Ch, u16)> = Vec::new();
        for root in 0..n as Ch {
            if state[root as usize] != 0 {
                continue;
            }
            state[root as usize] = 1;
            stack.push((root, 0));
            while let Some(top) = stack.last_mut() {
                let (x, k) = (top.0, top.1);
                let v = net.to[x as usize];
                let w = self.row_words[v as usize] as usize;
                let row = self.base[v as usize] + net.in_port[x as usize] as usize * w;
                // Next successor at or after bit k.
                let mut found = None;
                let mut b = k as usize;
                while b < w * 64 {
                    let word = union[row + b / 64] >> (b % 64);
                    if word == 0 {
                        b = (b / 64 + 1) * 64;
                        continue;
                    }
                    b += word.trailing_zeros() as usize;
                    let y = net.out_channel(v, b as u8);
                    b += 1;
                    if y != sm_abi::NONE && state[y as usize] == 0 {
                        found = Some(y);
                        break;
                    }
                }
                top.1 = b as u16;
                match found {
                    Some(y) => {
                        state[y as usize] = 1;
                        stack.push((y, 0));
                    }
                    None => {
                        finished.push(x);
                        stack.pop();
                    }
                }
            }
        }
        // Reverse finishing order is topological for the tree edges.
        finished.reverse();
        for o in self.order.iter_mut() {
            o.seed(&finished);
        }
    }

    /// Whether every dependency of `chain` is already in layer `l`.
    pub fn holds_path(&self, l: usize, chain: &[Ch]) -> bool {
        chain.windows(2).all(|p| self.has(l, p[0], p[1]))
    }

    /// Check that layer `l` is acyclic by its order: every dependency
    /// points forward. For tests.
    pub fn order_is_topological(&self, l: usize) -> bool {
        self.order[l].is_topological(&self.rows(l))
    }

    /// Layer `l`'s dependencies, as the order's searches read them.
    fn rows(&self, l: usize) -> Rows<'_> {
        Rows {
            net: self.net,
            row_words: &self.row_words,
            base: &self.base,
            fwd: &self.fwd[l],
            bwd: &self.bwd[l],
        }
    }
}

/// One layer's bit rows, as the kit's order searches read them.
struct Rows<'r> {
    net: &'r Net,
    row_words: &'r [u32],
    base: &'r [usize],
    fwd: &'r [u64],
    bwd: &'r [u64],
}

impl Deps for Rows<'_> {
    #[inline]
    fn each_succ(&self, c: Ch, mut f: impl FnMut(Ch) -> bool) {
        let v = self.net.to[c as usize];
        let w = self.row_words[v as usize] as usize;
        let row = self.base[v as usize] + self.net.in_port[c as usize] as usize * w;
        for k in 0..w {
            for b in bits(self.fwd[row + k]) {
                if !f(self.net.out_channel(v, (k * 64 + b as usize) as u8)) {
                    return;
                }
            }
        }
    }

    #[inline]
    fn each_pred(&self, c: Ch, mut f: impl FnMut(Ch)) {
        let u = self.net.from[c as usize];
        let w = self.row_words[u as usize] as usize;
        let row = self.base[u as usize] + self.net.out_port[c as usize] as usize * w;
        for k in 0..w {
            for b in bits(self.bwd[row + k]) {
                f(self.net.port_in[self.net.port_base[u as usize] as usize + k * 64 + b as usize]);
            }
        }
    }
}
