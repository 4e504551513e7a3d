//! Ranking and link orientation.
//!
//! Both engines turn a ranking into a strict total order of the switches;
//! a step from `a` to `b` goes *up* when `b` comes before `a` in that order.
//! A strict order is what makes up/down routing free of credit loops on any
//! graph: a cycle of channel dependencies would have to turn from a down
//! step back to an up one, which no route does, and a cycle of up (or of
//! down) steps alone cannot close in a total order.

use std::cmp::Reverse;

use sm_abi::{FabricSnapshot, NONE};
use smcore_kit::graph::{Graph, Sw};

/// Rank of a switch the ranking BFS did not reach (OpenSM's 0xffffffff).
pub const UNRANKED: u32 = u32::MAX;

/// The order steps are judged by, with the ranks it came from.
#[derive(Debug, Clone)]
pub struct Orientation {
    /// Position of each switch in the order; smaller is further up.
    pub pos: Vec<u32>,
    /// The engine's rank of each switch (updn: distance from the roots;
    /// dnup: distance from the CA-attached switches), [`UNRANKED`] if none.
    pub rank: Vec<u32>,
}

impl Orientation {
    /// Whether the step from `from` to its neighbour `to` goes up.
    #[inline]
    pub fn up(&self, from: Sw, to: Sw) -> bool {
        self.pos[to as usize] < self.pos[from as usize]
    }

    /// Highest rank given (0 when nothing was ranked).
    pub fn max_rank(&self) -> u32 {
        self.rank.iter().copied().filter(|&r| r != UNRANKED).max().unwrap_or(0)
    }

    fn from_keys<K: Ord>(keys: Vec<K>, rank: Vec<u32>) -> Orientation {
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        idx.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        let mut pos = vec![0u32; keys.len()];
        for (p, &s) in idx.iter().enumerate() {
            pos[s] = p as u32;
        }
        Orientation { pos, rank }
    }
}

/// Multi-source BFS hop distances over switch links.
pub fn bfs_levels(graph: &Graph, sources: &[Sw], within: Option<&[bool]>) -> Vec<u32> {
    let mut level = vec![UNRANKED; graph.switch_count()];
    let mut queue: Vec<Sw> = Vec::with_capacity(graph.switch_count());
    for &s in sources {
        if level[s as usize] == UNRANKED {
            level[s as usize] = 0;
            queue.push(s);
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let s = queue[head];
        head += 1;
        let next = level[s as usize] + 1;
        for &m in &graph.sw_adj[s as usize] {
            let allowed = match within {
                Some(w) => w[m as usize],
                None => true,
            };
            if level[m as usize] == UNRANKED && allowed {
                level[m as usize] = next;
                queue.push(m);
            }
        }
    }
    level
}

/// Connected components of the switch graph: component of each switch and
/// the size of each component.
pub fn components(graph: &Graph) -> (Vec<u32>, Vec<u32>) {
    let n = graph.switch_count();
    let mut comp = vec![NONE; n];
    let mut sizes = Vec::new();
    let mut stack = Vec::new();
    for start in 0..n {
        if comp[start] != NONE {
            continue;
        }
        let id = sizes.len() as u32;
        let mut size = 0u32;
        comp[start] = id;
        stack.push(start as Sw);
        while let Some(s) = stack.pop() {
            size += 1;
            for &m in &graph.sw_adj[s as usize] {
                if comp[m as usize] == NONE {
                    comp[m as usize] = id;
                    stack.push(m);
                }
            }
        }
        sizes.push(size);
    }
    (comp, sizes)
}

fn guid(fabric: &FabricSnapshot, graph: &Graph, s: Sw) -> u64 {
    fabric.nodes[graph.switch_nodes[s as usize] as usize].guid
}

/// updn: roots get rank 0, every other switch its BFS distance from the
/// nearest root; equal ranks are ordered by GUID, the smaller one up, as
/// OpenSM orders them.
///
/// OpenSM lets traffic cross a link between two roots in either direction
/// (its "root connection" hack), which can close a credit loop when three
/// or more roots are cabled in a cycle. Here roots that are cabled to each
/// other are ordered by their BFS distance, inside the roots, from the
/// lowest-GUID root of their group instead: every root of a group can then
/// still reach every other (up to the group's first root, then down), so
/// no pair OpenSM connects through root links is lost, and the order stays
/// strict.
pub fn updn(fabric: &FabricSnapshot, graph: &Graph, roots: &[Sw]) -> Orientation {
    updn_with_ids(fabric, graph, roots, None)
}

/// [`updn`] with OpenSM's node ids (`ids_guid_file`): equal ranks are
/// ordered by `ids[s]` (smaller up) instead of the GUID, the GUID only
/// breaking ties between equal ids.
pub fn updn_with_ids(fabric: &FabricSnapshot, graph: &Graph, roots: &[Sw], ids: Option<&[u64]>) -> Orientation {
    let n = graph.switch_count();
    let rank = bfs_levels(graph, roots, None);
    let mut is_root = vec![false; n];
    for &r in roots {
        is_root[r as usize] = true;
    }
    let mut by_guid: Vec<Sw> = roots.to_vec();
    by_guid.sort_by_key(|&r| guid(fabric, graph, r));
    let mut sub = vec![UNRANKED; n];
    for &r in &by_guid {
        if sub[r as usize] != UNRANKED {
            continue;
        }
        let group = bfs_levels(graph, &[r], Some(&is_root));
        for (s, &d) in group.iter().enumerate() {
            if d != UNRANKED {
                sub[s] = d;
            }
        }
    }
    let keys: Vec<(u32, u32, u64, u64)> = (0..n as Sw)
        .map(|s| {
            let own = if is_root[s as usize] { sub[s as usize] } else { 0 };
            let g = guid(fabric, graph, s);
            let id = ids.and_then(|ids| ids.get(s as usize).copied()).unwrap_or(g);
            (rank[s as usize], own, id, g)
        })
        .collect();
    Orientation::from_keys(keys, rank)
}

/// Switches with at least one CA or router cabled to them.
pub fn ca_switches(graph: &Graph) -> Vec<Sw> {
    (0..graph.switch_count() as Sw).filter(|&s| graph.sw_ports[s as usize].iter().any(|l| l.peer_sw == NONE)).collect()
}

/// dnup: switches with a CA get the lowest rank (OpenSM numbers it 0, its
/// documentation 1), every other switch one more than its lowest-ranked
/// neighbour; traffic first climbs to higher ranks, then descends.
///
/// OpenSM treats a link between equal ranks as free in both directions,
/// so on fabrics where many switches share a rank (a torus or a random
/// fabric with hosts everywhere: all of them) dnup is plain min-hop and
/// has credit loops. Here equal ranks are ordered, so that routes stay
/// loop free: first by BFS distance from one reference switch per
/// connected part of the fabric (its highest-ranked switch, lowest GUID
/// among those), nearer up, then by GUID. On a fabric where every switch
/// carries CAs this is up/down with that switch as the root, so every pair
/// stays reachable.
pub fn dnup(fabric: &FabricSnapshot, graph: &Graph, leaves: &[Sw]) -> Orientation {
    let n = graph.switch_count();
    let rank = bfs_levels(graph, leaves, None);
    let (comp, sizes) = components(graph);
    let mut reference: Vec<Option<Sw>> = vec![None; sizes.len()];
    for s in 0..n as Sw {
        let c = comp[s as usize] as usize;
        let better = match reference[c] {
            None => true,
            Some(r) => {
                // Unranked switches (no CA anywhere in their part) all tie.
                let (rs, rr) = (rank[s as usize], rank[r as usize]);
                let key = |x: u32| if x == UNRANKED { 0 } else { x as u64 + 1 };
                (key(rs), Reverse(guid(fabric, graph, s))) > (key(rr), Reverse(guid(fabric, graph, r)))
            }
        };
        if better {
            reference[c] = Some(s);
        }
    }
    let refs: Vec<Sw> = reference.into_iter().flatten().collect();
    let dist = bfs_levels(graph, &refs, None);
    let keys: Vec<(Reverse<u32>, u32, u64)> =
        (0..n as Sw).map(|s| (Reverse(rank[s as usize]), dist[s as usize], guid(fabric, graph, s))).collect();
    Orientation::from_keys(keys, rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenSM's `ids_guid_file`: between switches of equal rank the one
    /// with the smaller id is up; the GUID is the default id.
    #[test]
    fn ids_order_switches_of_equal_rank() {
        // Root r over a and b, which are cabled to each other.
        let text = "Switch 3 \"r\"\n[1] \"a\"[1]\n[2] \"b\"[1]\n\nSwitch 3 \"a\"\n[2] \"b\"[2]\n[3] \"h1\"[1]\n\n\
                    Switch 3 \"b\"\n[3] \"h2\"[1]\n\nHca 1 \"h1\"\n\nHca 1 \"h2\"\n";
        let f = sm_topology::lids::snapshot(&sm_topology::parse_str(text, "v").unwrap(), 0).unwrap();
        let g = Graph::new(&f);
        let sw = |name: &str| g.sw_of_node[f.nodes.iter().position(|n| n.description.as_str() == name).unwrap()];
        let (r, a, b) = (sw("r"), sw("a"), sw("b"));
        let by_guid = updn(&f, &g, &[r]);
        let a_smaller = guid(&f, &g, a) < guid(&f, &g, b);
        assert_eq!(by_guid.up(b, a), a_smaller, "by GUID, the smaller is up");
        // Ids the other way round turn the link between a and b.
        let mut ids: Vec<u64> = (0..g.switch_count() as Sw).map(|s| guid(&f, &g, s)).collect();
        ids[a as usize] = if a_smaller { 20 } else { 10 };
        ids[b as usize] = if a_smaller { 10 } else { 20 };
        let by_id = updn_with_ids(&f, &g, &[r], Some(&ids));
        assert_eq!(by_id.up(b, a), !a_smaller);
        assert!(by_id.up(a, r) && by_id.up(b, r), "ranks still come first");
    }
}
