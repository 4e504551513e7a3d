//! One layer's channel dependency graph with an online topological order.
//!
//! Channels are the directed inter-switch links (an output port of a
//! switch). A path adds the dependencies between the consecutive channels
//! it uses. The layer stays deadlock free as long as this graph is acyclic,
//! so the graph keeps a topological order of its channels up to date as
//! dependencies are added (Pearce & Kelly's dynamic topological sort): an
//! edge that already agrees with the order costs nothing, otherwise only
//! the channels between the two ends in the order are searched and
//! reordered, and a cycle shows up as the forward search reaching the tail.
//! Removing a dependency never invalidates the order, so paths can be
//! taken out again (rollback of a path that did not fit, balancing).
//!
//! Dependencies are reference counted: many paths share them.

/// A dependency graph over `n` channels with an online topological order.
#[derive(Debug, Clone)]
pub struct Cdg {
    /// Position of each channel in the order.
    ord: Vec<u32>,
    /// Successors with the number of paths creating each dependency.
    out: Vec<Vec<(u32, u32)>>,
    /// Predecessors (no counts; `out` holds them).
    inn: Vec<Vec<u32>>,
    /// Search marks (`mark[c] == epoch`: seen by the forward search,
    /// `bmark`: by the backward one).
    mark: Vec<u32>,
    bmark: Vec<u32>,
    epoch: u32,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    stack: Vec<u32>,
    bstack: Vec<u32>,
    slots: Vec<u32>,
    /// Paths in this layer (counted by the caller's units).
    pub paths: usize,
}

impl Cdg {
    /// An empty graph over `n` channels.
    pub fn new(n: usize) -> Cdg {
        Cdg {
            ord: (0..n as u32).collect(),
            out: vec![Vec::new(); n],
            inn: vec![Vec::new(); n],
            mark: vec![0; n],
            bmark: vec![0; n],
            epoch: 0,
            fwd: Vec::new(),
            bwd: Vec::new(),
            stack: Vec::new(),
            bstack: Vec::new(),
            slots: Vec::new(),
            paths: 0,
        }
    }

    fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.fill(0);
            self.bmark.fill(0);
            self.epoch = 1;
        }
        self.epoch
    }

    /// Add the dependency `x → y`. Returns false (and changes nothing) when
    /// it would close a cycle.
    pub fn add(&mut self, x: u32, y: u32) -> bool {
        if let Some(e) = self.out[x as usize].iter_mut().find(|e| e.0 == y) {
            e.1 += 1;
            return true;
        }
        let (ox, oy) = (self.ord[x as usize], self.ord[y as usize]);
        if x == y {
            return false;
        }
        if ox > oy && !self.reorder(x, y, ox, oy) {
            return false;
        }
        self.out[x as usize].push((y, 1));
        self.inn[y as usize].push(x);
        true
    }

    /// Pearce–Kelly: the new edge x → y goes against the order (ord y < ord x).
    /// Finds the channels reachable from y below x's position (forward) and
    /// those reaching x above y's position (backward), then moves the
    /// backward group before the forward group within the positions they
    /// occupy. Any path from y to x runs strictly upwards in the order, so
    /// it lies in both groups: the two searches run in turns and a channel
    /// seen by both is a cycle. Most rejected paths meet early that way,
    /// long before either search would have finished.
    fn reorder(&mut self, x: u32, y: u32, ox: u32, oy: u32) -> bool {
        let ep = self.next_epoch();
        self.fwd.clear();
        self.bwd.clear();
        self.stack.clear();
        self.bstack.clear();
        self.stack.push(y);
        self.mark[y as usize] = ep;
        self.bstack.push(x);
        self.bmark[x as usize] = ep;
        loop {
            let mut busy = false;
            if let Some(c) = self.stack.pop() {
                busy = true;
                self.fwd.push(c);
                for &(w, _) in &self.out[c as usize] {
                    if self.bmark[w as usize] == ep {
                        return false;
                    }
                    if self.mark[w as usize] != ep && self.ord[w as usize] < ox {
                        self.mark[w as usize] = ep;
                        self.stack.push(w);
                    }
                }
            }
            if let Some(c) = self.bstack.pop() {
                busy = true;
                self.bwd.push(c);
                for &w in &self.inn[c as usize] {
                    if self.mark[w as usize] == ep {
                        return false;
                    }
                    if self.bmark[w as usize] != ep && self.ord[w as usize] > oy {
                        self.bmark[w as usize] = ep;
                        self.bstack.push(w);
                    }
                }
            }
            if !busy {
                break;
            }
        }
        let ord = &self.ord;
        self.fwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.bwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.slots.clear();
        self.slots.extend(
            self.bwd
                .iter()
                .chain(self.fwd.iter())
                .map(|&c| ord[c as usize]),
        );
        self.slots.sort_unstable();
        for (i, &c) in self.bwd.iter().chain(self.fwd.iter()).enumerate() {
            self.ord[c as usize] = self.slots[i];
        }
        true
    }

    /// Drop one reference to the dependency `x → y` (which must exist).
    pub fn remove(&mut self, x: u32, y: u32) {
        let outs = &mut self.out[x as usize];
        let Some(i) = outs.iter().position(|e| e.0 == y) else {
            return;
        };
        outs[i].1 -= 1;
        if outs[i].1 == 0 {
            outs.swap_remove(i);
            let ins = &mut self.inn[y as usize];
            if let Some(j) = ins.iter().position(|&w| w == x) {
                ins.swap_remove(j);
            }
        }
    }

    /// Add all dependencies of a channel sequence, or none of them.
    pub fn add_path(&mut self, chans: &[u32]) -> bool {
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
    pub fn remove_path(&mut self, chans: &[u32]) {
        for i in 1..chans.len() {
            self.remove(chans[i - 1], chans[i]);
        }
    }

    /// True when the graph has no cycle (a full check, for tests).
    pub fn is_acyclic(&self) -> bool {
        self.out
            .iter()
            .enumerate()
            .all(|(x, o)| o.iter().all(|&(y, _)| self.ord[x] < self.ord[y as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn failed_path_leaves_nothing_behind() {
        let mut g = Cdg::new(5);
        assert!(g.add_path(&[0, 1, 2]));
        assert!(!g.add_path(&[3, 2, 0, 4]));
        assert!(g.add_path(&[3, 4]));
        assert!(g.add_path(&[4, 0]));
        g.remove_path(&[0, 1, 2]);
        assert!(g.add_path(&[2, 3]));
        assert!(g.is_acyclic());
    }

    #[test]
    fn random_edges_agree_with_a_full_check() {
        // xorshift: deterministic, no dependency.
        let mut s = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let n = 30;
        let mut g = Cdg::new(n);
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for _ in 0..400 {
            let x = (next() % n as u64) as u32;
            let y = (next() % n as u64) as u32;
            let accepted = g.add(x, y);
            // Reference: is x reachable from y over the accepted edges?
            let mut seen = vec![false; n];
            let mut st = vec![y];
            let mut cyc = x == y;
            while let Some(c) = st.pop() {
                if c == x {
                    cyc = true;
                    break;
                }
                if std::mem::replace(&mut seen[c as usize], true) {
                    continue;
                }
                st.extend(edges.iter().filter(|e| e.0 == c).map(|e| e.1));
            }
            assert_eq!(accepted, !cyc, "edge {x}->{y}");
            if accepted {
                edges.push((x, y));
            }
            if next() % 5 == 0 && !edges.is_empty() {
                let i = (next() % edges.len() as u64) as usize;
                let (a, b) = edges.swap_remove(i);
                g.remove(a, b);
            }
            assert!(g.is_acyclic());
        }
    }
}
