//! Switch-to-switch hop counts as OpenSM keeps them in its "LID matrix".
//!
//! OpenSM only keeps hop counts towards switch LIDs; a CA's distance is its
//! switch's distance plus one. Through port `p` of switch `s`, the count
//! towards switch `t` is one more than the distance from the switch behind
//! `p` to `t`; port 0 holds the least count over all ports. Those are BFS
//! distances over the switch graph, so a breadth-first search from every
//! switch gives the whole matrix.

use rayon::prelude::*;
use sm_abi::{NodeKind, NONE};

use super::Ctx;

/// OpenSM's `OSM_NO_PATH`, also its "unknown hop count".
pub(crate) const NO_PATH: u8 = 0xFF;

pub(crate) struct Hops {
    /// Dense switch number per node, `NONE` for other nodes.
    rank: Vec<u32>,
    /// Switch node index per rank.
    nodes: Vec<u32>,
    /// Distance from rank `a` to rank `b` at `a * n + b`.
    dist: Vec<u8>,
}

impl Hops {
    pub fn new(ctx: &Ctx<'_>) -> Self {
        let fabric = ctx.fabric;
        let mut rank = vec![NONE; fabric.nodes.len()];
        let nodes: Vec<u32> = fabric.switches().collect();
        for (r, &n) in nodes.iter().enumerate() {
            rank[n as usize] = r as u32;
        }
        let n = nodes.len();

        // Compressed adjacency: parallel links collapse into repeated
        // neighbours, which BFS tolerates.
        let mut adj_start = Vec::with_capacity(n + 1);
        let mut adj = Vec::new();
        for &sw in &nodes {
            adj_start.push(adj.len());
            for num in 1..=ctx.node(sw).num_ports {
                if let Some(peer) = ctx.live_peer(ctx.node(sw).first_port + num as u32) {
                    let other = ctx.port(peer).node;
                    if other != sw && rank[other as usize] != NONE {
                        adj.push(rank[other as usize]);
                    }
                }
            }
        }
        adj_start.push(adj.len());

        let mut dist = vec![NO_PATH; n * n];
        if n > 0 {
            dist.par_chunks_mut(n).enumerate().for_each_init(
                || Vec::with_capacity(n),
                |queue, (src, row)| {
                    queue.clear();
                    row[src] = 0;
                    queue.push(src as u32);
                    let mut head = 0;
                    while head < queue.len() {
                        let u = queue[head] as usize;
                        head += 1;
                        // Hop counts live in a byte; anything further is "no path".
                        let next = row[u].saturating_add(1);
                        if next == NO_PATH {
                            continue;
                        }
                        for &v in &adj[adj_start[u]..adj_start[u + 1]] {
                            if row[v as usize] == NO_PATH {
                                row[v as usize] = next;
                                queue.push(v);
                            }
                        }
                    }
                },
            );
        }
        Hops { rank, nodes, dist }
    }

    /// Dense rank of a switch node, `None` for other nodes.
    pub fn rank(&self, node: u32) -> Option<usize> {
        self.rank.get(node as usize).copied().filter(|&r| r != NONE).map(|r| r as usize)
    }

    /// Least hops from switch rank `a` to switch rank `b`.
    pub fn dist(&self, a: usize, b: usize) -> u8 {
        self.dist[a * self.nodes.len() + b]
    }

    /// Hops from switch `sw` to switch rank `target` leaving through `port`,
    /// as in OpenSM's `osm_switch_get_hop_count`.
    pub fn via_port(&self, ctx: &Ctx<'_>, sw: u32, port: u8, target: usize) -> u8 {
        let Some(s) = self.rank(sw) else { return NO_PATH };
        if port == 0 {
            return self.dist(s, target);
        }
        if port > ctx.node(sw).num_ports {
            return NO_PATH;
        }
        let Some(peer) = ctx.live_peer(ctx.node(sw).first_port + port as u32) else {
            return NO_PATH;
        };
        let other = ctx.port(peer).node;
        if other == sw || ctx.node(other).kind != NodeKind::Switch {
            return NO_PATH;
        }
        match self.rank(other) {
            Some(o) => match self.dist(o, target) {
                NO_PATH => NO_PATH,
                d => d.saturating_add(1),
            },
            None => NO_PATH,
        }
    }

    /// The lowest-numbered port of `sw` on a shortest path to switch rank
    /// `target` (0 when `sw` is the target).
    pub fn best_port(&self, ctx: &Ctx<'_>, sw: u32, target: usize) -> u8 {
        let Some(s) = self.rank(sw) else { return 0 };
        let best = self.dist(s, target);
        if best == 0 || best == NO_PATH {
            return 0;
        }
        (1..=ctx.node(sw).num_ports)
            .find(|&p| self.via_port(ctx, sw, p, target) == best)
            .unwrap_or(0)
    }
}
