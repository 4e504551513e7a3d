//! Filling the LFTs on a [`Tree`]: one destination at a time, down-going
//! routes chosen by climbing from the destination's leaf, up-going routes by
//! descending from every switch on the way.
//!
//! Load counters live on ports and port groups and survive from one
//! destination to the next: `down` counts destinations routed down a link
//! (kept on the lower switch's up group), `up` counts the subtrees routed
//! up a link (kept on the upper switch's down group). Choosing the least
//! loaded group and port at every step, with destinations taken leaf by
//! leaf in index order, spreads the destinations of one leaf over all of
//! its up links and, on a complete tree, gives every link the same load.

use sm_abi::{NONE, NO_ROUTE};
use smcore_kit::graph::Sw;

use crate::tree::{Tree, UNRANKED};

/// LFT entries of all switches, flat: `switch * stride + lid`.
pub struct Tables {
    /// Entries.
    pub ports: Vec<u8>,
    /// Row length (max LID + 1).
    pub stride: usize,
}

impl Tables {
    /// The row of switch `s`.
    pub fn row(&self, s: Sw) -> &[u8] {
        &self.ports[s as usize * self.stride..(s as usize + 1) * self.stride]
    }
}

/// A destination being routed: a real LID or, for `lid == 0`, a dummy that
/// only moves the counters (a missing compute node of a leaf, so the
/// rotation over the up links stays in step between leaves).
struct Router<'a> {
    tree: &'a Tree,
    g_up: Vec<u32>,
    g_down: Vec<u32>,
    p_up: Vec<u32>,
    p_down: Vec<u32>,
    /// Per switch: rotating start for reverse hops from roots.
    down_idx: Vec<u32>,
    /// Hops from the current destination, valid where `stamp == cur`.
    hop: Vec<u8>,
    stamp: Vec<u32>,
    cur: u32,
    lft: Vec<u8>,
    stride: usize,
    /// Group lists being walked, one slice per active call.
    stack: Vec<u32>,
}

/// Options of one routing run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteOptions {
    /// Down-up turns an I/O node's routes may take (OpenSM `max_reverse_hops`).
    pub max_reverse_hops: u16,
    /// Give switches above the leaves routes to switch LIDs the up/down
    /// rules leave out, through the last leaf (OpenSM `connect_roots`).
    pub connect_roots: bool,
}

/// Route every CA port and switch of the tree.
pub fn route(tree: &Tree, max_lid: u16, opts: &RouteOptions) -> Tables {
    let nsw = tree.switches.len();
    let stride = max_lid as usize + 1;
    let mut r = Router {
        tree,
        g_up: vec![0; tree.groups.len()],
        g_down: vec![0; tree.groups.len()],
        p_up: vec![0; tree.ports.len()],
        p_down: vec![0; tree.ports.len()],
        down_idx: vec![0; nsw],
        hop: vec![0; nsw],
        stamp: vec![0; nsw],
        cur: 0,
        lft: vec![NO_ROUTE; nsw * stride],
        stride,
        stack: Vec::with_capacity(1024),
    };

    // Compute nodes, leaf by leaf, each leaf padded with dummies to the
    // fullest leaf's count.
    for &leaf in &tree.leaves {
        let mut routed = 0;
        for &ci in &tree.switches[leaf as usize].cas {
            let c = &tree.cas[ci as usize];
            if !c.is_cn || c.lid as usize >= stride {
                continue;
            }
            r.start();
            r.set(leaf, c.lid, c.sw_port, 1);
            r.downgoing(leaf, NONE, c.lid, true, 0, 1);
            routed += 1;
        }
        for _ in routed..tree.max_cn_per_leaf {
            r.start();
            r.set(leaf, 0, 0, 1);
            r.downgoing(leaf, NONE, 0, true, 0, 1);
        }
    }

    // Other CA ports (I/O and the like), counted so that they spread too.
    for c in &tree.cas {
        if c.is_cn || c.lid as usize >= stride {
            continue;
        }
        let credit = if c.is_io { opts.max_reverse_hops } else { 0 };
        r.start();
        r.set(c.sw, c.lid, c.sw_port, 1);
        r.downgoing(c.sw, NONE, c.lid, true, credit, 1);
    }

    // Switch LIDs: routes without counting, switch traffic is light.
    let mut by_guid: Vec<Sw> = (0..nsw as Sw).collect();
    by_guid.sort_by_key(|&s| tree.switches[s as usize].guid);
    for &s in &by_guid {
        let sw = &tree.switches[s as usize];
        if sw.lid == 0 || sw.lid as usize >= stride {
            continue;
        }
        r.start();
        r.set(s, sw.lid, 0, 0);
        if sw.rank != UNRANKED {
            r.downgoing(s, NONE, sw.lid, false, 0, 0);
        }
    }

    if opts.connect_roots {
        r.connect_roots();
    }
    Tables {
        ports: r.lft,
        stride,
    }
}

impl Router<'_> {
    #[inline]
    fn start(&mut self) {
        self.cur += 1;
    }

    #[inline]
    fn is_set(&self, s: Sw) -> bool {
        self.stamp[s as usize] == self.cur
    }

    #[inline]
    fn set(&mut self, s: Sw, lid: u16, port: u8, hops: u8) {
        self.stamp[s as usize] = self.cur;
        self.hop[s as usize] = hops;
        if lid != 0 {
            self.lft[s as usize * self.stride + lid as usize] = port;
        }
    }

    /// Whether `s` already has a route to the destination no longer than `hops`.
    #[inline]
    fn has_route_within(&self, s: Sw, hops: u8) -> bool {
        self.is_set(s) && hops >= self.hop[s as usize]
    }

    /// The first port of group `g` with the lowest counter.
    #[inline]
    fn min_port(&self, g: u32, up: bool) -> u32 {
        let grp = &self.tree.groups[g as usize];
        let counters = if up { &self.p_up } else { &self.p_down };
        let mut best = grp.first;
        for p in grp.first + 1..grp.first + grp.len {
            if counters[p as usize] < counters[best as usize] {
                best = p;
            }
        }
        best
    }

    /// Push `list` on the stack ordered by (counter, remote index); returns
    /// the slice's start.
    fn push_sorted(&mut self, list: &[u32], up_counter: bool) -> usize {
        let base = self.stack.len();
        let counters = if up_counter { &self.g_up } else { &self.g_down };
        let groups = &self.tree.groups;
        let order = &self.tree.order;
        let key = |g: u32| {
            ((counters[g as usize] as u64) << 32) | order[groups[g as usize].remote as usize] as u64
        };
        for &g in list {
            let k = key(g);
            let mut i = self.stack.len();
            self.stack.push(g);
            while i > base && key(self.stack[i - 1]) > k {
                self.stack[i] = self.stack[i - 1];
                i -= 1;
            }
            self.stack[i] = g;
        }
        base
    }

    /// Give every switch below `s` (except through `prev`) a route up
    /// towards `s`, least loaded down group first. Returns whether any
    /// route towards an end port was made below.
    fn upgoing(&mut self, s: Sw, prev: Sw, lid: u16, hops: u8) -> bool {
        let tree = self.tree;
        let sw = &tree.switches[s as usize];
        if sw.down.is_empty() && sw.cas.is_empty() {
            return false;
        }
        let mut created = !sw.cas.is_empty();
        let base = self.push_sorted(&sw.down, true);
        for i in base..base + sw.down.len() {
            let g = self.stack[i];
            let remote = tree.groups[g as usize].remote;
            if remote == prev {
                continue;
            }
            if self.has_route_within(remote, hops + 1) {
                continue;
            }
            let p = self.min_port(g, true);
            self.set(remote, lid, tree.ports[p as usize].remote_num, hops + 1);
            let routed = self.upgoing(remote, NONE, lid, hops + 1);
            if routed {
                created = true;
                self.p_up[p as usize] += 1;
                self.g_up[g as usize] += 1;
            }
        }
        self.stack.truncate(base);
        if created && !sw.down.is_empty() {
            self.down_idx[s as usize] = (self.down_idx[s as usize] + 1) % sw.down.len() as u32;
        }
        created
    }

    /// From `s`, which has a route to the destination, route the switches
    /// above it down towards `s` (the least loaded up group carries the
    /// main path and its counters), and everything below them up.
    fn downgoing(&mut self, s: Sw, prev: Sw, lid: u16, main: bool, credit: u16, hops: u8) -> bool {
        let tree = self.tree;
        let mut created = self.upgoing(s, prev, lid, hops);
        let sw = &tree.switches[s as usize];
        if sw.rank == 0 {
            if credit > 0 && !sw.down.is_empty() {
                // Going down again from a root: a reverse hop, spread by a
                // rotating start.
                let n = sw.down.len() as u32;
                self.down_idx[s as usize] = (self.down_idx[s as usize] + 1) % n;
                let start = self.down_idx[s as usize];
                for j in 0..n {
                    let g = sw.down[((start + j) % n) as usize];
                    let remote = tree.groups[g as usize].remote;
                    created |= self.downgoing(remote, s, lid, main, credit - 1, hops + 1);
                }
            }
            return created;
        }
        if sw.up.is_empty() {
            return created;
        }
        let base = self.push_sorted(&sw.up, false);
        let n = sw.up.len();
        let mut first = base;
        if main {
            let g = self.stack[base];
            let p = self.min_port(g, false);
            self.g_down[g as usize] += 1;
            self.p_down[p as usize] += 1;
            let remote = tree.groups[g as usize].remote;
            if !self.is_set(remote) || hops + 1 < self.hop[remote as usize] {
                self.set(remote, lid, tree.ports[p as usize].remote_num, hops + 1);
            }
            created |= self.downgoing(remote, s, lid, true, credit, hops + 1);
            first += 1;
        }
        for i in first..base + n {
            let g = self.stack[i];
            let remote = tree.groups[g as usize].remote;
            if self.has_route_within(remote, hops + 1) {
                continue;
            }
            let p = self.min_port(g, false);
            self.set(remote, lid, tree.ports[p as usize].remote_num, hops + 1);
            created |= self.downgoing(remote, s, lid, false, credit, hops + 1);
        }
        self.stack.truncate(base);
        if credit == 0 || sw.is_leaf {
            return created;
        }
        // Reverse hops: step down to each child and climb again from there.
        for gi in 0..sw.down.len() {
            let g = sw.down[gi];
            let remote = tree.groups[g as usize].remote;
            created |= self.downgoing(remote, s, lid, true, credit - 1, hops + 1);
        }
        created
    }

    /// Switches above the leaves forward switch LIDs they have no up/down
    /// route to the way they forward to the last leaf, which has one.
    fn connect_roots(&mut self) {
        let tree = self.tree;
        let Some(&leaf) = tree.leaves.last() else {
            return;
        };
        let leaf_lid = tree.switches[leaf as usize].lid as usize;
        if leaf_lid == 0 || leaf_lid >= self.stride {
            return;
        }
        let switch_lids: Vec<usize> = tree
            .switches
            .iter()
            .filter(|s| s.rank != UNRANKED && s.lid != 0 && (s.lid as usize) < self.stride)
            .map(|s| s.lid as usize)
            .collect();
        for (s, sw) in tree.switches.iter().enumerate() {
            if sw.rank == UNRANKED || sw.rank >= tree.leaf_rank {
                continue;
            }
            let row = s * self.stride;
            let towards_leaf = self.lft[row + leaf_lid];
            if towards_leaf == NO_ROUTE {
                continue;
            }
            for &lid in &switch_lids {
                if self.lft[row + lid] == NO_ROUTE
                    && self.lft[leaf as usize * self.stride + lid] != NO_ROUTE
                {
                    self.lft[row + lid] = towards_leaf;
                }
            }
        }
    }
}
