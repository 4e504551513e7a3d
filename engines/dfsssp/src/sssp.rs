//! Globally balanced shortest paths: one Dijkstra per destination LID over
//! the switch graph, with channel weights that grow with every route
//! placed, so later destinations avoid the channels earlier ones loaded.
//!
//! * Every channel starts at weight P² (P = end ports in the fabric). One
//!   destination adds at most P routes to a channel, so a detour of one hop
//!   costs more than any load difference the early destinations can build
//!   up: the weights choose among (nearly) shortest paths.
//! * Every switch's route to a LID adds the number of end ports attached
//!   to that switch (the routes its CAs will send) to each channel of the
//!   route (OpenSM's update rule). While no detour can win (the weights'
//!   extras stay below one hop over the depth), the search settles the
//!   switches in BFS order and adds each switch's routes at once, so the
//!   switches after it, towards the same destination, already see them:
//!   one destination's sources spread over parallel paths rather than all
//!   taking the path that was lightest before it (OpenSM adds the whole
//!   tree afterwards, which herds them; on a 16-ary 3-tree with 4,096 CAs
//!   this brings the busiest link from 5,888 CA routes to 4,080, the mean
//!   being 3,960). Otherwise a heap Dijkstra runs and the tree's routes
//!   are added afterwards, as subtree sums.
//! * Parallel cables between two switches form one group in the search;
//!   the lightest cable of the group carries the route, so the routes to
//!   consecutive destinations alternate over the cables.
//! * With LMC > 0 the LIDs of one port are routed one after the other, and
//!   the channels the port's earlier LIDs used cost extra (a fraction of a
//!   hop) so the next LID takes a different path where an equally short
//!   one exists.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use sm_abi::{FabricSnapshot, NodeKind, NONE, NO_ROUTE};
use smcore_kit::graph::{Graph, Sw};

use crate::net::{Ch, Net};

/// One destination port with the switch its LIDs hang off and the port of
/// that switch leading to it (0 for the switch's own LID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// Port index in the snapshot.
    pub port: u32,
    /// Switch the destination is attached to (or is).
    pub sw: Sw,
    /// Output port of `sw` towards it.
    pub last_port: u8,
}

/// Balancing class of a destination (OpenSM's priority order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Listed in `cn_guid_file`.
    Compute,
    /// Listed in `io_guid_file`.
    Io,
    /// Any other end port.
    Other,
    /// A switch's own LID (routed last: lowest priority for balance).
    Switch,
}

/// The destination ports in routing order: switches ordered by attached
/// end ports (most first), then for each class in priority order the
/// ports of each switch in port order; switches' own LIDs last.
pub fn routing_order(
    fabric: &FabricSnapshot,
    graph: &Graph,
    net: &Net,
    cn: &HashSet<u64>,
    io: &HashSet<u64>,
) -> Vec<(Dest, Class)> {
    let nsw = net.nsw;
    let mut attached: Vec<Vec<(u8, u32)>> = vec![Vec::new(); nsw];
    for &p in &graph.end_ports {
        let s = graph.entry_switch(fabric, p);
        if s == NONE {
            continue;
        }
        let peer = fabric.ports[p as usize].peer;
        attached[s as usize].push((fabric.ports[peer as usize].num, p));
    }
    for a in attached.iter_mut() {
        a.sort_unstable();
    }
    let mut sw_order: Vec<Sw> = (0..nsw as Sw).collect();
    sw_order.sort_by_key(|&s| Reverse(net.num_hca[s as usize]));
    let class_of = |p: u32| {
        let guid = fabric.ports[p as usize].guid;
        if cn.contains(&guid) {
            Class::Compute
        } else if io.contains(&guid) {
            Class::Io
        } else {
            Class::Other
        }
    };
    let mut out = Vec::new();
    for class in [Class::Compute, Class::Io, Class::Other] {
        for &s in &sw_order {
            for &(num, p) in &attached[s as usize] {
                if class_of(p) == class {
                    out.push((
                        Dest {
                            port: p,
                            sw: s,
                            last_port: num,
                        },
                        class,
                    ));
                }
            }
        }
    }
    for &s in &sw_order {
        let node = graph.switch_nodes[s as usize];
        let p0 = fabric.nodes[node as usize].first_port;
        let port = &fabric.ports[p0 as usize];
        if port.lid != 0 && fabric.nodes[node as usize].kind == NodeKind::Switch {
            out.push((
                Dest {
                    port: p0,
                    sw: s,
                    last_port: 0,
                },
                Class::Switch,
            ));
        }
    }
    out
}

/// Forwarding decisions, stored per LID (`next[lid * nsw + s]`) because
/// both the routing and the layer assignment work one destination at a
/// time.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Switches.
    pub nsw: usize,
    /// LIDs + 1.
    pub lids: usize,
    /// Output port of each switch for each LID, [`NO_ROUTE`] if none.
    pub next: Vec<u8>,
    /// LIDs in the order they were routed (with their destination switch).
    pub routed: Vec<(u16, Sw)>,
}

impl Tables {
    /// Output port of switch `s` for `lid`.
    #[inline]
    pub fn port(&self, s: Sw, lid: u16) -> u8 {
        self.next[lid as usize * self.nsw + s as usize]
    }

    /// The LFT of switch `s`.
    pub fn lft(&self, s: Sw) -> Vec<u8> {
        (0..self.lids)
            .map(|l| self.next[l * self.nsw + s as usize])
            .collect()
    }
}

/// Which LIDs reuse the tree of an earlier LID of the same switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// None: every LID gets its own balanced tree (OpenSM).
    Nothing,
    /// A switch's own LID reuses the tree of its first end port's LID.
    SwitchLids,
    /// Every LID of a switch (the k-th LID of each port with LMC > 0)
    /// reuses the first one's tree.
    Everything,
}

/// Route every destination in `order`. With `share`, the LIDs of one
/// switch (its CAs' and its own, the k-th LID of each port with LMC > 0)
/// share one tree, routed for the first of them: fewer distinct paths,
/// hence fewer channel dependencies for DFSSSP's layers, at a coarser
/// grain of balance.
pub fn route(fabric: &FabricSnapshot, net: &Net, order: &[(Dest, Class)], share: Share) -> Tables {
    let mut shared: HashMap<(Sw, u32), SharedTree> = HashMap::new();
    let nsw = net.nsw;
    let lids = fabric.max_lid as usize + 1;
    let mut next = vec![NO_ROUTE; lids * nsw];
    let p = net.num_hca.iter().map(|&h| h as u64).sum::<u64>().max(1);
    let hop = p * p;
    let mut weight = vec![hop; net.channels()];
    let mut max_weight = hop;
    // Extra weight, for the LIDs after the first of a port, of the
    // channels its earlier LIDs use; it is taken off again after the port.
    let lmc_penalty = (hop / 4).max(1) / (nsw as u64).max(1) + p;
    let mut penalised: Vec<Ch> = Vec::new();
    let mut is_penalised = vec![false; net.channels()];
    let mut d = Dijkstra::new(nsw);
    let mut routed = Vec::new();
    for (dest, class) in order {
        let reuse = match share {
            Share::Nothing => false,
            Share::SwitchLids => *class == Class::Switch,
            Share::Everything => true,
        };
        let port = &fabric.ports[dest.port as usize];
        let count = port.lid_count();
        for off in 0..count {
            let lid = port.lid as u32 + off;
            if lid as usize >= lids {
                break;
            }
            let lid = lid as u16;
            let row = lid as usize * nsw;
            if let Some((l0, order, via)) = shared.get(&(dest.sw, off)).filter(|_| reuse) {
                let src = *l0 as usize * nsw;
                next.copy_within(src..src + nsw, row);
                next[row + dest.sw as usize] = dest.last_port;
                d.order.clone_from(order);
                d.via.clone_from(via);
                max_weight = max_weight.max(d.add_load(net, &mut weight));
                routed.push((lid, dest.sw));
                continue;
            }
            if d.levels_for != dest.sw {
                d.levels(net, dest.sw);
            }
            // While no detour can win the search runs level by level (see
            // `Dijkstra::by_levels`), placing each switch's routes as it
            // goes; otherwise a full Dijkstra, then the tree's routes.
            if (max_weight - hop).saturating_mul(d.depth as u64) < hop {
                max_weight = max_weight.max(d.by_levels(net, dest.sw, &mut weight));
            } else {
                d.run(net, dest.sw, &weight);
                max_weight = max_weight.max(d.add_load(net, &mut weight));
            }
            for &v in &d.order {
                next[row + v as usize] = if v == dest.sw {
                    dest.last_port
                } else {
                    net.out_port[d.via[v as usize] as usize]
                };
            }
            routed.push((lid, dest.sw));
            if share != Share::Nothing {
                shared
                    .entry((dest.sw, off))
                    .or_insert_with(|| (lid, d.order.clone(), d.via.clone()));
            }
            if off + 1 < count {
                for &v in &d.order[1..] {
                    let c = d.via[v as usize];
                    if !is_penalised[c as usize] {
                        is_penalised[c as usize] = true;
                        weight[c as usize] += lmc_penalty;
                        penalised.push(c);
                    }
                }
                max_weight = max_weight.max(weight.iter().copied().max().unwrap_or(hop));
            }
        }
        for c in penalised.drain(..) {
            is_penalised[c as usize] = false;
            weight[c as usize] -= lmc_penalty;
        }
    }
    Tables {
        nsw,
        lids,
        next,
        routed,
    }
}

/// A tree routed for the first LID of a switch (its LID, settle order and
/// chosen channels), reused for the switch's other LIDs.
type SharedTree = (u16, Vec<Sw>, Vec<Ch>);

/// Dijkstra towards one destination switch over the reversed channels.
struct Dijkstra {
    dist: Vec<u64>,
    via: Vec<Ch>,
    /// `(via, to[via])` side by side, for the path walks of
    /// [`Dijkstra::by_levels`] (one cache line per step).
    hop: Vec<(Ch, Sw)>,
    /// Switches in settling order (the destination first).
    order: Vec<Sw>,
    heap: BinaryHeap<Reverse<(u64, Sw)>>,
    load: Vec<u64>,
    /// Hop distance of every switch to `levels_for`, BFS order, depth.
    level: Vec<u8>,
    bfs: Vec<Sw>,
    levels_for: Sw,
    depth: u32,
    /// `dist[v]` is current while `stamp[v] == version`.
    stamp: Vec<u64>,
    version: u64,
}

impl Dijkstra {
    fn new(nsw: usize) -> Dijkstra {
        Dijkstra {
            dist: vec![u64::MAX; nsw],
            via: vec![NONE; nsw],
            hop: vec![(NONE, NONE); nsw],
            order: Vec::with_capacity(nsw),
            heap: BinaryHeap::with_capacity(nsw),
            load: vec![0; nsw],
            level: vec![u8::MAX; nsw],
            bfs: Vec::with_capacity(nsw),
            levels_for: NONE,
            depth: 0,
            stamp: vec![0; nsw],
            version: 0,
        }
    }

    fn levels(&mut self, net: &Net, t: Sw) {
        self.level.fill(u8::MAX);
        self.bfs.clear();
        self.level[t as usize] = 0;
        self.bfs.push(t);
        let mut head = 0;
        while head < self.bfs.len() {
            let v = self.bfs[head];
            head += 1;
            let d = self.level[v as usize];
            for &u in &net.adj[v as usize] {
                if self.level[u as usize] == u8::MAX {
                    self.level[u as usize] = d.saturating_add(1);
                    self.bfs.push(u);
                }
            }
        }
        self.depth = self
            .bfs
            .last()
            .map_or(0, |&v| self.level[v as usize] as u32);
        self.levels_for = t;
    }

    /// Route towards `t` when every channel weighs one hop (P²) plus an
    /// extra below P² / depth: then a path with more hops always costs
    /// more than a shortest one, so each switch's best route goes through
    /// a neighbour one hop closer, and the switches can be settled in BFS
    /// order with no heap. Each switch's routes (one per end port on it)
    /// are added to the channels of its path as soon as it is settled, so
    /// the switches settled after it see them: the sources of one
    /// destination spread over parallel paths instead of all taking the
    /// one that was lightest before this destination. Returns the
    /// heaviest weight it touched.
    fn by_levels(&mut self, net: &Net, t: Sw, weight: &mut [u64]) -> u64 {
        let mut max = 0;
        self.order.clear();
        self.order.extend_from_slice(&self.bfs);
        self.version += 1;
        self.dist[t as usize] = 0;
        self.via[t as usize] = NONE;
        self.hop[t as usize] = (NONE, NONE);
        self.stamp[t as usize] = self.version;
        for i in 1..self.bfs.len() {
            let u = self.bfs[i];
            let want = self.level[u as usize] - 1;
            let mut best = u64::MAX;
            let mut best_c = NONE;
            let groups = &net.out_groups
                [net.out_start[u as usize] as usize..net.out_start[u as usize + 1] as usize];
            for &(v, a, b) in groups {
                if self.level[v as usize] != want {
                    continue;
                }
                // Cost of v's path now, loads placed since it settled
                // included (walked again only after a change).
                let dv = if self.stamp[v as usize] == self.version {
                    self.dist[v as usize]
                } else {
                    let mut dv = 0u64;
                    let mut x = v;
                    while x != t {
                        let (c, next) = self.hop[x as usize];
                        dv += weight[c as usize];
                        x = next;
                    }
                    self.dist[v as usize] = dv;
                    self.stamp[v as usize] = self.version;
                    dv
                };
                for &c in &net.out_ch[a as usize..b as usize] {
                    let w = dv + weight[c as usize];
                    if w < best {
                        best = w;
                        best_c = c;
                    }
                }
            }
            self.dist[u as usize] = best;
            self.via[u as usize] = best_c;
            self.hop[u as usize] = (best_c, net.to[best_c as usize]);
            self.stamp[u as usize] = self.version;
            let l = net.num_hca[u as usize] as u64;
            if l > 0 {
                self.version += 1;
                let mut x = u;
                while x != t {
                    let (c, next) = self.hop[x as usize];
                    weight[c as usize] += l;
                    max = max.max(weight[c as usize]);
                    x = next;
                }
            }
        }
        max
    }

    fn run(&mut self, net: &Net, t: Sw, weight: &[u64]) {
        self.dist.fill(u64::MAX);
        self.order.clear();
        self.heap.clear();
        self.dist[t as usize] = 0;
        self.via[t as usize] = NONE;
        self.heap.push(Reverse((0, t)));
        while let Some(Reverse((dv, v))) = self.heap.pop() {
            if dv > self.dist[v as usize] {
                continue;
            }
            self.order.push(v);
            let groups = &net.groups
                [net.rin_start[v as usize] as usize..net.rin_start[v as usize + 1] as usize];
            for &(u, a, b) in groups {
                if self.dist[u as usize] <= dv {
                    continue;
                }
                // Lightest cable of the group; first in port order on ties.
                let mut best = NONE;
                let mut bw = u64::MAX;
                for &c in &net.group_ch[a as usize..b as usize] {
                    let w = weight[c as usize];
                    if w < bw {
                        bw = w;
                        best = c;
                    }
                }
                let nd = dv + bw;
                if nd < self.dist[u as usize] {
                    self.dist[u as usize] = nd;
                    self.via[u as usize] = best;
                    self.heap.push(Reverse((nd, u)));
                }
            }
        }
    }

    /// Add the routes of this destination's tree to the channel weights;
    /// returns the heaviest weight it touched.
    fn add_load(&mut self, net: &Net, weight: &mut [u64]) -> u64 {
        let mut max = 0;
        for &v in &self.order {
            self.load[v as usize] = net.num_hca[v as usize] as u64;
        }
        for &v in self.order.iter().skip(1).rev() {
            let c = self.via[v as usize];
            let l = self.load[v as usize];
            if l > 0 {
                weight[c as usize] += l;
                max = max.max(weight[c as usize]);
                self.load[net.to[c as usize] as usize] += l;
            }
        }
        max
    }
}
