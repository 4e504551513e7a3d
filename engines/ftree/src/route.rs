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
    /// Per switch: `destination serial << 8 | hops`; the hops count for the
    /// current destination only when the serial is `cur`.
    mark: Vec<u32>,
    /// Per switch: remote switch of each up and down group, inline.
    up_remote: Vec<Vec<Sw>>,
    down_remote: Vec<Vec<Sw>>,
    cur: u32,
    lft: Vec<u8>,
    stride: usize,
    /// Group lists being walked, one slice per active call.
    /// Per switch: `destination serial << 8 | hops` of the best reverse-hop
    /// visit so far, and the credit it had.
    rev_mark: Vec<u32>,
    rev_credit: Vec<u16>,
    /// (counter, group) pairs.
    stack: Vec<(u32, u32)>,
}

/// Highest reverse hop credit used: enough to join any two switches of
/// an 8-level tree, and it keeps hop counts within a byte.
pub const MAX_REVERSE_HOPS: u16 = 8;

/// Options of one routing run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteOptions {
    /// Down-up turns an I/O node's routes may take (OpenSM `max_reverse_hops`),
    /// at most [`MAX_REVERSE_HOPS`].
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
        mark: vec![0; nsw],
        rev_mark: vec![0; nsw],
        rev_credit: vec![0; nsw],
        up_remote: tree
            .switches
            .iter()
            .map(|s| {
                s.up.iter()
                    .map(|&g| tree.groups[g as usize].remote)
                    .collect()
            })
            .collect(),
        down_remote: tree
            .switches
            .iter()
            .map(|s| {
                s.down
                    .iter()
                    .map(|&g| tree.groups[g as usize].remote)
                    .collect()
            })
            .collect(),
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
        let credit = if c.is_io {
            opts.max_reverse_hops.min(MAX_REVERSE_HOPS)
        } else {
            0
        };
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
    fn set(&mut self, s: Sw, lid: u16, port: u8, hops: u8) {
        self.mark[s as usize] = self.cur << 8 | hops as u32;
        if lid != 0 {
            self.lft[s as usize * self.stride + lid as usize] = port;
        }
    }

    /// Whether a reverse hop into `s` with `credit` left at `hops` can
    /// still add anything: not when an earlier one for this destination
    /// had at least as much credit at no more hops (OpenSM walks every
    /// such repeat, which grows as the number of children to the power of
    /// the credit). Records the visit when it goes ahead.
    fn first_reverse_visit(&mut self, s: Sw, credit: u16, hops: u8) -> bool {
        let m = self.rev_mark[s as usize];
        if m >> 8 == self.cur && self.rev_credit[s as usize] >= credit && (m & 0xFF) as u8 <= hops {
            return false;
        }
        self.rev_mark[s as usize] = self.cur << 8 | hops as u32;
        self.rev_credit[s as usize] = credit;
        true
    }

    /// Whether `s` already has a route to the destination no longer than `hops`.
    #[inline]
    fn has_route_within(&self, s: Sw, hops: u8) -> bool {
        let m = self.mark[s as usize];
        m >> 8 == self.cur && hops as u32 >= m & 0xFF
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

    /// Load counter of group `g` that orders it.
    #[inline]
    fn counter(&self, g: u32, up_counter: bool) -> u32 {
        if up_counter {
            self.g_up[g as usize]
        } else {
            self.g_down[g as usize]
        }
    }

    /// Push the groups of `list` whose remote switch is not `skip` and has
    /// no route within `hops` yet, ordered by counter then remote index; returns the
    /// slice's start. Sorting only these is enough: a walk below one of
    /// them never reaches the others' rank, so no candidate appears or
    /// disappears on the way, and most calls have none.
    fn push_candidates(&mut self, s: Sw, up: bool, skip: Sw, hops: u8) -> usize {
        let base = self.stack.len();
        let sw = &self.tree.switches[s as usize];
        let (list, remotes) = if up {
            (&sw.up, &self.up_remote[s as usize])
        } else {
            (&sw.down, &self.down_remote[s as usize])
        };
        // Up groups are ordered by their down counter and vice versa.
        let up_counter = !up;
        for (i, &remote) in remotes.iter().enumerate() {
            if remote == skip || self.has_route_within(remote, hops) {
                continue;
            }
            let g = list[i];
            // Lists are in remote index order, so a stable insertion by
            // counter orders by (counter, index).
            let k = self.counter(g, up_counter);
            let mut j = self.stack.len();
            self.stack.push((k, g));
            while j > base && self.stack[j - 1].0 > k {
                self.stack[j] = self.stack[j - 1];
                j -= 1;
            }
            self.stack[j] = (k, g);
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
        let base = self.push_candidates(s, false, prev, hops + 1);
        for i in base..self.stack.len() {
            let g = self.stack[i].1;
            let remote = tree.groups[g as usize].remote;
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
                    if self.first_reverse_visit(remote, credit - 1, hops + 1) {
                        created |= self.downgoing(remote, s, lid, main, credit - 1, hops + 1);
                    }
                }
            }
            return created;
        }
        if sw.up.is_empty() {
            return created;
        }
        let mut main_remote = NONE;
        if main {
            // First group with the lowest counter, in index order.
            let mut g = sw.up[0];
            for &h in &sw.up[1..] {
                if self.g_down[h as usize] < self.g_down[g as usize] {
                    g = h;
                }
            }
            let p = self.min_port(g, false);
            self.g_down[g as usize] += 1;
            self.p_down[p as usize] += 1;
            let remote = tree.groups[g as usize].remote;
            if !self.has_route_within(remote, hops + 1) {
                self.set(remote, lid, tree.ports[p as usize].remote_num, hops + 1);
            }
            created |= self.downgoing(remote, s, lid, true, credit, hops + 1);
            main_remote = remote;
        }
        // The other parents, if the main path did not reach them already.
        // A walk through one may reach another, hence the check again.
        let base = self.push_candidates(s, true, main_remote, hops + 1);
        for i in base..self.stack.len() {
            let g = self.stack[i].1;
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
            if self.first_reverse_visit(remote, credit - 1, hops + 1) {
                created |= self.downgoing(remote, s, lid, true, credit - 1, hops + 1);
            }
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
