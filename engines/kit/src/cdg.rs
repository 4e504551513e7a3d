//! Incremental acyclicity of channel dependency graphs (CDGs).
//!
//! Deadlock-free engines (lash, dfsssp, nue) put each route's channel
//! dependencies into a virtual layer only while the layer's dependency
//! graph stays acyclic. Checking that from scratch per route would cost a
//! full graph search each time, so the graph keeps a topological order of
//! its channels up to date as dependencies are added (Pearce & Kelly's
//! dynamic topological sort, [`TopoOrder`]): a dependency `x → y` that
//! already agrees with the order costs one comparison; otherwise only the
//! channels ordered between `y` and `x` are searched, forward from `y` (a
//! path back to `x` means `x → y` closes a cycle, and it is refused) and
//! backward from `x`, and just those channels are renumbered. Removing
//! dependencies never breaks a topological order, so a path that does not
//! fit is rolled back by removing what it added.
//!
//! The engines store their dependencies differently (adjacency lists, bit
//! rows per switch, turn slots with masks), each the fastest for its own
//! queries, so [`TopoOrder`] reads the graph through the [`Deps`] trait and
//! leaves the storage to them. [`Cdg`] is a complete graph on top of it:
//! reference-counted adjacency lists with tentative path insertion.

/// Dense index of a channel (a directed inter-switch link).
pub type Chan = u32;

/// The dependencies of a graph, as the searches of [`TopoOrder`] read them.
///
/// Both walks must list the dependencies the graph holds right now; the
/// order in which they are listed decides which cycle
/// [`TopoOrder::cycle`] names, nothing else.
pub trait Deps {
    /// Call `f` with every channel that `c` has a dependency into, until
    /// `f` returns false.
    fn each_succ(&self, c: Chan, f: impl FnMut(Chan) -> bool);
    /// Call `f` with every channel that has a dependency into `c`.
    fn each_pred(&self, c: Chan, f: impl FnMut(Chan));
}

/// The positions of the bits set in `word`, lowest first: the channels a
/// bit row of dependencies names.
#[inline]
pub fn bits(mut word: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        if word == 0 {
            return None;
        }
        let b = word.trailing_zeros();
        word &= word - 1;
        Some(b)
    })
}

/// Whether `to` is reachable from `from` over the dependencies of `deps`
/// (`n` channels), by a plain search: the reference the incremental check
/// is tested against.
pub fn reaches<D: Deps>(deps: &D, n: usize, from: Chan, to: Chan) -> bool {
    let mut seen = vec![false; n];
    let mut stack = vec![from];
    while let Some(c) = stack.pop() {
        if c == to {
            return true;
        }
        if std::mem::replace(&mut seen[c as usize], true) {
            continue;
        }
        deps.each_succ(c, |w| {
            stack.push(w);
            true
        });
    }
    false
}

/// A topological order of `n` channels, kept valid as dependencies are
/// added (see the module doc). The default is the order over no channel.
#[derive(Debug, Clone, Default)]
pub struct TopoOrder {
    /// Position of each channel in the order.
    ord: Vec<u32>,
    /// Channel at each position (the inverse of `ord`).
    at: Vec<Chan>,
    /// Search marks: `epoch - 1` forward, `epoch` backward.
    mark: Vec<u32>,
    epoch: u32,
    stack: Vec<Chan>,
    fwd: Vec<Chan>,
    back: Vec<Chan>,
    slots: Vec<u32>,
    /// Forward search tree, to name the cycle a refused dependency closes.
    parent: Vec<Chan>,
    /// After a refusal: the channel whose dependency into `x` closed it.
    hit: Chan,
    /// Insertions that needed a search (against the order).
    pub searches: u64,
    /// Channels those searches visited.
    pub visited: u64,
}

impl TopoOrder {
    /// The identity order over `n` channels.
    pub fn new(n: usize) -> TopoOrder {
        TopoOrder {
            ord: (0..n as u32).collect(),
            at: (0..n as u32).collect(),
            mark: vec![0; n],
            epoch: 0,
            stack: Vec::new(),
            fwd: Vec::new(),
            back: Vec::new(),
            slots: Vec::new(),
            parent: vec![0; n],
            hit: 0,
            searches: 0,
            visited: 0,
        }
    }

    /// Number of channels.
    pub fn len(&self) -> usize {
        self.ord.len()
    }

    /// True for an order over no channel.
    pub fn is_empty(&self) -> bool {
        self.ord.is_empty()
    }

    /// Position of `c` in the order.
    #[inline]
    pub fn position(&self, c: Chan) -> u32 {
        self.ord[c as usize]
    }

    /// Whether the dependency `x → y` agrees with the order.
    #[inline]
    pub fn respects(&self, x: Chan, y: Chan) -> bool {
        self.ord[x as usize] < self.ord[y as usize]
    }

    /// Start from this order (a permutation of all channels, first first)
    /// while the graph holds no dependency that disagrees with it, so that
    /// dependencies agreeing with it are free later.
    pub fn seed(&mut self, order: &[Chan]) {
        debug_assert_eq!(order.len(), self.at.len());
        for (p, &c) in order.iter().enumerate() {
            self.at[p] = c;
            self.ord[c as usize] = p as u32;
        }
    }

    /// Back to the identity order (for a graph emptied by its owner),
    /// keeping the allocations.
    pub fn reset(&mut self) {
        for (i, (o, a)) in self.ord.iter_mut().zip(self.at.iter_mut()).enumerate() {
            *o = i as u32;
            *a = i as u32;
        }
    }

    /// Two fresh mark values (forward, backward) for one search.
    fn fresh_marks(&mut self) -> (u32, u32) {
        if self.epoch >= u32::MAX - 2 {
            self.mark.fill(0);
            self.epoch = 0;
        }
        self.epoch += 2;
        (self.epoch - 1, self.epoch)
    }

    /// Make the order fit the new dependency `x → y` of `deps` (which does
    /// not hold it yet), or return false when `deps` has a path from `y` to
    /// `x`, so that `x → y` would close a cycle; the caller adds the
    /// dependency to its storage only on true. The order stays topological
    /// for `deps` either way.
    pub fn insert<D: Deps>(&mut self, deps: &D, x: Chan, y: Chan) -> bool {
        if x == y {
            self.hit = x;
            return false;
        }
        let (ox, oy) = (self.ord[x as usize], self.ord[y as usize]);
        if ox < oy {
            return true;
        }
        self.searches += 1;
        let (e, e2) = self.fresh_marks();
        // Forward from y among channels ordered before x: meeting x means
        // x is reachable from y.
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(y);
        self.mark[y as usize] = e;
        let mut closed = false;
        while let Some(w) = self.stack.pop() {
            self.visited += 1;
            self.fwd.push(w);
            let (ord, mark, parent, stack) = (&self.ord, &mut self.mark, &mut self.parent, &mut self.stack);
            deps.each_succ(w, |z| {
                if z == x {
                    closed = true;
                    return false;
                }
                if ord[z as usize] < ox && mark[z as usize] != e {
                    mark[z as usize] = e;
                    parent[z as usize] = w;
                    stack.push(z);
                }
                true
            });
            if closed {
                self.hit = w;
                return false;
            }
        }
        // Backward from x among channels ordered after y.
        self.back.clear();
        self.stack.push(x);
        self.mark[x as usize] = e2;
        while let Some(w) = self.stack.pop() {
            self.visited += 1;
            self.back.push(w);
            let (ord, mark, stack) = (&self.ord, &mut self.mark, &mut self.stack);
            deps.each_pred(w, |z| {
                if ord[z as usize] > oy && mark[z as usize] != e2 {
                    mark[z as usize] = e2;
                    stack.push(z);
                }
            });
        }
        // Everything that must precede x (back) goes before everything
        // reachable from y (fwd), reusing the same positions. Both sets lie
        // in the window oy..=ox of the order; a short window is scanned
        // (already sorted), a long one sorted by set.
        let window = (ox - oy + 1) as usize;
        let marked = self.back.len() + self.fwd.len();
        self.slots.clear();
        if window <= marked * 8 {
            self.back.clear();
            self.fwd.clear();
            for p in oy..=ox {
                let c = self.at[p as usize];
                let m = self.mark[c as usize];
                if m == e2 {
                    self.back.push(c);
                    self.slots.push(p);
                } else if m == e {
                    self.fwd.push(c);
                    self.slots.push(p);
                }
            }
        } else {
            let ord = &self.ord;
            self.back.sort_unstable_by_key(|&c| ord[c as usize]);
            self.fwd.sort_unstable_by_key(|&c| ord[c as usize]);
            self.slots
                .extend(self.back.iter().chain(self.fwd.iter()).map(|&c| ord[c as usize]));
            self.slots.sort_unstable();
        }
        for (i, &c) in self.back.iter().chain(self.fwd.iter()).enumerate() {
            let p = self.slots[i];
            self.ord[c as usize] = p;
            self.at[p as usize] = c;
        }
        true
    }

    /// After [`TopoOrder::insert`] refused `x → y`: the cycle it would have
    /// closed, as the channels from `y` to `x` joined by dependencies of
    /// the graph (`[x]` for `x == y`).
    pub fn cycle(&self, x: Chan, y: Chan, out: &mut Vec<Chan>) {
        out.clear();
        if x == y {
            out.push(x);
            return;
        }
        out.push(x);
        let mut k = self.hit;
        while k != y {
            out.push(k);
            k = self.parent[k as usize];
        }
        out.push(y);
        out.reverse();
    }

    /// Whether every dependency of `deps` agrees with the order, which
    /// proves `deps` acyclic (a full check, for tests and debug asserts).
    pub fn is_topological<D: Deps>(&self, deps: &D) -> bool {
        (0..self.len() as Chan).all(|x| {
            let mut ok = true;
            deps.each_succ(x, |y| {
                ok = self.respects(x, y);
                ok
            });
            ok
        })
    }
}

/// Reference-counted dependency lists over dense channels.
#[derive(Debug, Clone)]
struct Lists {
    /// Successors with the number of paths inducing each dependency.
    out: Vec<Vec<(Chan, u32)>>,
    /// Predecessors (no counts; `out` holds them).
    inn: Vec<Vec<Chan>>,
}

impl Deps for Lists {
    #[inline]
    fn each_succ(&self, c: Chan, mut f: impl FnMut(Chan) -> bool) {
        for &(w, _) in &self.out[c as usize] {
            if !f(w) {
                return;
            }
        }
    }

    #[inline]
    fn each_pred(&self, c: Chan, mut f: impl FnMut(Chan)) {
        for &w in &self.inn[c as usize] {
            f(w);
        }
    }
}

/// One layer's dependency graph over `n` channels, kept acyclic: paths go
/// in whole or not at all. Dependencies are reference counted, as many
/// paths share them, and disappear with the last path inducing them.
#[derive(Debug, Clone)]
pub struct Cdg {
    deps: Lists,
    order: TopoOrder,
}

impl Cdg {
    /// An empty graph over `n` channels.
    pub fn new(n: usize) -> Cdg {
        Cdg {
            deps: Lists {
                out: vec![Vec::new(); n],
                inn: vec![Vec::new(); n],
            },
            order: TopoOrder::new(n),
        }
    }

    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.order.len()
    }

    /// Add one reference to the dependency `x → y`. Returns false (and
    /// changes nothing) when it would close a cycle.
    pub fn add(&mut self, x: Chan, y: Chan) -> bool {
        if let Some(e) = self.deps.out[x as usize].iter_mut().find(|e| e.0 == y) {
            e.1 += 1;
            return true;
        }
        if !self.order.insert(&self.deps, x, y) {
            return false;
        }
        self.deps.out[x as usize].push((y, 1));
        self.deps.inn[y as usize].push(x);
        true
    }

    /// Drop one reference to the dependency `x → y` (nothing when absent).
    pub fn remove(&mut self, x: Chan, y: Chan) {
        let outs = &mut self.deps.out[x as usize];
        let Some(i) = outs.iter().position(|e| e.0 == y) else {
            return;
        };
        outs[i].1 -= 1;
        if outs[i].1 == 0 {
            outs.swap_remove(i);
            let ins = &mut self.deps.inn[y as usize];
            if let Some(j) = ins.iter().position(|&w| w == x) {
                ins.swap_remove(j);
            }
        }
    }

    /// Add the dependencies of a channel sequence (a path), or none of them
    /// when that would close a cycle.
    pub fn add_path(&mut self, chans: &[Chan]) -> bool {
        for i in 1..chans.len() {
            if !self.add(chans[i - 1], chans[i]) {
                for j in 1..i {
                    self.remove(chans[j - 1], chans[j]);
                }
                return false;
            }
        }
        true
    }

    /// Remove the dependencies of a channel sequence added before.
    pub fn remove_path(&mut self, chans: &[Chan]) {
        for p in chans.windows(2) {
            self.remove(p[0], p[1]);
        }
    }

    /// Number of paths inducing `x → y` (0: the graph lacks it).
    pub fn refs(&self, x: Chan, y: Chan) -> u32 {
        self.deps.out[x as usize]
            .iter()
            .find(|e| e.0 == y)
            .map_or(0, |e| e.1)
    }

    /// The dependencies held, each with its reference count, sorted.
    pub fn dependencies(&self) -> Vec<(Chan, Chan, u32)> {
        let mut all: Vec<_> = self
            .deps
            .out
            .iter()
            .enumerate()
            .flat_map(|(x, o)| o.iter().map(move |&(y, n)| (x as Chan, y, n)))
            .collect();
        all.sort_unstable();
        all
    }

    /// True when the graph has no cycle, judged by its order (a full check,
    /// for tests).
    pub fn is_acyclic(&self) -> bool {
        self.order.is_topological(&self.deps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// From scratch: does `edges` over `n` nodes have a cycle (Kahn)?
    fn has_cycle(n: usize, edges: &[(Chan, Chan)]) -> bool {
        let mut indeg = vec![0usize; n];
        for &(_, y) in edges {
            indeg[y as usize] += 1;
        }
        let mut ready: Vec<usize> = (0..n).filter(|&c| indeg[c] == 0).collect();
        let mut done = 0;
        while let Some(c) = ready.pop() {
            done += 1;
            for &(x, y) in edges {
                if x as usize == c {
                    indeg[y as usize] -= 1;
                    if indeg[y as usize] == 0 {
                        ready.push(y as usize);
                    }
                }
            }
        }
        done < n
    }

    #[test]
    fn bits_lists_the_set_positions() {
        assert_eq!(bits(0).count(), 0);
        assert_eq!(bits(1 << 63 | 0b1010).collect::<Vec<_>>(), vec![1, 3, 63]);
    }

    #[test]
    fn ring_closes_only_at_the_last_edge() {
        let mut g = Cdg::new(4);
        assert!(g.add(3, 2));
        assert!(g.add(2, 1));
        assert!(g.add(1, 0));
        assert!(!g.add(0, 3));
        assert!(g.is_acyclic());
        g.remove(2, 1);
        assert!(g.add(0, 3));
        assert!(g.is_acyclic());
        assert!(!g.add(2, 1));
        assert!(!g.add(1, 1), "a channel cannot depend on itself");
    }

    #[test]
    fn failed_path_leaves_nothing_behind() {
        let mut g = Cdg::new(5);
        assert!(g.add_path(&[0, 1, 2]));
        let before = g.dependencies();
        assert!(!g.add_path(&[3, 2, 0, 4]));
        assert_eq!(g.dependencies(), before);
        assert!(g.add_path(&[3, 4]));
        assert!(g.add_path(&[4, 0]));
        g.remove_path(&[0, 1, 2]);
        assert!(g.add_path(&[2, 3]));
        assert!(g.is_acyclic());
    }

    /// A refused dependency names a cycle of the graph: consecutive
    /// channels joined by held dependencies, from `y` back to `x`.
    #[test]
    fn refusal_names_the_cycle() {
        let mut g = Cdg::new(6);
        assert!(g.add_path(&[5, 4, 3, 2, 1]));
        assert!(!g.order.insert(&g.deps, 1, 4));
        let mut cycle = Vec::new();
        g.order.cycle(1, 4, &mut cycle);
        assert_eq!(cycle, vec![4, 3, 2, 1]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(Chan, Chan),
        Path(Vec<Chan>),
        /// Remove the i-th (modulo) accepted path.
        Remove(usize),
    }

    fn ops(n: Chan) -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            4 => (0..n, 0..n).prop_map(|(x, y)| Op::Add(x, y)),
            3 => prop::collection::vec(0..n, 2..6).prop_map(Op::Path),
            1 => any::<usize>().prop_map(Op::Remove),
        ];
        prop::collection::vec(op, 1..200)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random insertions and removals: every verdict equals a
        /// from-scratch cycle check, a refused path leaves the dependencies
        /// exactly as they were, and the order stays topological.
        #[test]
        fn verdicts_match_a_full_check(n in 2usize..24, ops in ops(24)) {
            let mut g = Cdg::new(n);
            // Accepted paths, as edge lists (a single Add is a 2-path).
            let mut held: Vec<Vec<Chan>> = Vec::new();
            let edges_of = |held: &[Vec<Chan>]| -> Vec<(Chan, Chan)> {
                held.iter().flat_map(|p| p.windows(2).map(|w| (w[0], w[1]))).collect()
            };
            for op in ops {
                let path = match op {
                    Op::Add(x, y) => vec![x % n as Chan, y % n as Chan],
                    Op::Path(p) => p.into_iter().map(|c| c % n as Chan).collect(),
                    Op::Remove(i) => {
                        if !held.is_empty() {
                            let p = held.swap_remove(i % held.len());
                            g.remove_path(&p);
                        }
                        prop_assert!(g.is_acyclic());
                        continue;
                    }
                };
                let mut with = edges_of(&held);
                with.extend(path.windows(2).map(|w| (w[0], w[1])));
                let cyclic = has_cycle(n, &with);
                if path.len() == 2 {
                    // The single-edge case is the plain reachability test.
                    let closes = path[0] == path[1] || reaches(&g.deps, n, path[1], path[0]);
                    prop_assert_eq!(cyclic, closes);
                }
                let before = g.dependencies();
                let accepted = g.add_path(&path);
                prop_assert_eq!(accepted, !cyclic, "path {:?}", path);
                if accepted {
                    held.push(path);
                } else {
                    prop_assert_eq!(g.dependencies(), before);
                }
                prop_assert!(g.is_acyclic());
                // The reference counts are the multiset of held edges.
                let mut counted: Vec<(Chan, Chan, u32)> = Vec::new();
                let mut all = edges_of(&held);
                all.sort_unstable();
                for e in all {
                    match counted.last_mut() {
                        Some(l) if (l.0, l.1) == e => l.2 += 1,
                        _ => counted.push((e.0, e.1, 1)),
                    }
                }
                prop_assert_eq!(g.dependencies(), counted);
            }
        }
    }
}
