//! Splitting the destinations into one subset per virtual layer.
//!
//! Nue wants each layer's destinations close together (OpenSM runs METIS
//! on the switch graph for that): routes towards nearby destinations use
//! similar turns, so a layer's dependency graph fills up with fewer
//! conflicting turns and fewer routes need detours.
//!
//! [`grown`] is a balanced region-growing partitioner: `k` seeds spread by
//! farthest-point selection over the switches that carry destinations, then
//! the part with the least destination weight so far always takes the next
//! switch from its own BFS frontier. Parts are connected (within a
//! connected fabric), compact, and balanced to within one switch's weight
//! in the common case. [`round_robin`] deals the destination switches out
//! in turn and serves as the measured baseline.
//!
//! Why not METIS: it is not installed here (Debian `libmetis-dev` would
//! be), a binding crate needs bindgen and clang (absent), and a system
//! library dependency would follow every engine `.so` to every site. The
//! region grower is a few dozen lines and measured as follows (release,
//! `cargo run --release -p smcore-engine-nue --example measure`; routes per
//! directed inter-switch link, max / mean, and average hops):
//!
//! | fabric            | VLs | grown              | round robin        |
//! |-------------------|-----|--------------------|--------------------|
//! | torus 6x6x6, h2   | 2   | 1714 / 664.5, 6.625 | 3548 / 690.1, 6.804 |
//! | torus 6x6x6, h2   | 4   | 1062 / 652.0, 6.538 | 1804 / 679.0, 6.726 |
//! | torus 6x6x6, h2   | 8   | 998 / 649.7, 6.522  | 1150 / 674.8, 6.697 |
//! | random 64 sw, h4  | 4   | 1124 / 550.2, 4.747 | 1076 / 556.6, 4.780 |
//!
//! Compact layers always route shorter (lower mean load), block fewer
//! turns (2241 vs 10024 on the torus with 8 VLs, which also makes routing
//! faster) and usually lower the peak; round robin's peak is a few percent
//! lower in some cases (the random fabric above, the 4x4x4 torus with 4
//! VLs: 196 vs 200). On k-ary n-trees both give the same figures.

use sm_abi::NONE;
use smcore_kit::graph::{Graph, Sw};

/// How to split destinations into layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partitioner {
    /// Balanced BFS-grown regions of the switch graph.
    #[default]
    Grown,
    /// Destination switches dealt out in turn.
    RoundRobin,
}

/// Layer of every switch (`weights[s]` = destination LIDs at switch `s`);
/// switches without destinations get a layer too (their neighbours'), which
/// does not matter for routing. Returns the layer per switch and the number
/// of layers actually used (≤ `k`, renumbered densely from 0).
pub fn partition(graph: &Graph, weights: &[u64], k: usize, how: Partitioner) -> (Vec<u8>, usize) {
    let carriers = weights.iter().filter(|&&w| w > 0).count();
    let k = k.clamp(1, carriers.max(1));
    if k == 1 {
        return (vec![0; graph.switch_count()], 1);
    }
    let raw = match how {
        Partitioner::Grown => grown(graph, weights, k),
        Partitioner::RoundRobin => round_robin(weights, k),
    };
    // Renumber the parts that received destinations densely.
    let mut seen = vec![u8::MAX; k];
    let mut used = 0u8;
    for (s, &p) in raw.iter().enumerate() {
        if weights[s] > 0 && seen[p as usize] == u8::MAX {
            seen[p as usize] = used;
            used += 1;
        }
    }
    let layer = raw
        .iter()
        .map(|&p| {
            if seen[p as usize] == u8::MAX {
                0
            } else {
                seen[p as usize]
            }
        })
        .collect();
    (layer, used.max(1) as usize)
}

/// Destination switches in turn, heaviest first, each to the lightest part.
pub fn round_robin(weights: &[u64], k: usize) -> Vec<u8> {
    let mut order: Vec<usize> = (0..weights.len()).filter(|&s| weights[s] > 0).collect();
    order.sort_by_key(|&s| std::cmp::Reverse(weights[s]));
    let mut load = vec![0u64; k];
    let mut part = vec![0u8; weights.len()];
    for (i, s) in order.into_iter().enumerate() {
        // Deal in turn; among equal loads keep the turn order.
        let p = (0..k)
            .min_by_key(|&p| (load[p], (p + k - i % k) % k))
            .unwrap_or(0);
        part[s] = p as u8;
        load[p] += weights[s];
    }
    part
}

/// Balanced region growing; see the module text.
pub fn grown(graph: &Graph, weights: &[u64], k: usize) -> Vec<u8> {
    let n = graph.switch_count();
    let mut dist = vec![u8::MAX; n];
    let mut queue = Vec::new();
    // Farthest-point seeds: each next seed maximises its hop distance to
    // the seeds chosen so far (unreachable counts as farthest).
    let mut near = vec![u32::MAX; n];
    let first = (0..n).find(|&s| weights[s] > 0).unwrap_or(0);
    let mut seeds = Vec::with_capacity(k);
    let mut next = first;
    while seeds.len() < k {
        seeds.push(next as Sw);
        graph.bfs(next as Sw, &mut dist, &mut queue);
        for s in 0..n {
            let d = if dist[s] == u8::MAX {
                u32::MAX - 1
            } else {
                dist[s] as u32
            };
            near[s] = near[s].min(d);
        }
        let cand = (0..n)
            .filter(|&s| weights[s] > 0 && near[s] > 0)
            .max_by_key(|&s| (near[s], std::cmp::Reverse(s)));
        match cand {
            Some(s) => next = s,
            None => break,
        }
    }
    let mut part = vec![NONE; n];
    let mut load = vec![0u64; seeds.len()];
    // Switches claimed per part: among equally loaded parts the smaller
    // grows first. Ordering ties by part number alone let part 0 claim
    // every switch without destinations (all the upper levels of a fat
    // tree) one by one, and then the leaves behind them: 2,304 of 4,096
    // destinations in one of 8 layers on the 16-ary 3-tree.
    let mut size = vec![1u32; seeds.len()];
    let mut frontier: Vec<std::collections::VecDeque<Sw>> = vec![Default::default(); seeds.len()];
    for (p, &s) in seeds.iter().enumerate() {
        part[s as usize] = p as u32;
        load[p] += weights[s as usize];
        frontier[p].push_back(s);
    }
    let mut assigned = seeds.len();
    // Each step: the lightest part with a frontier claims one more switch.
    while assigned < n {
        let mut order: Vec<usize> = (0..seeds.len())
            .filter(|&p| !frontier[p].is_empty())
            .collect();
        if order.is_empty() {
            break;
        }
        order.sort_by_key(|&p| (load[p], size[p], p));
        let mut grew = false;
        for p in order {
            while let Some(&s) = frontier[p].front() {
                let fresh = graph.sw_adj[s as usize]
                    .iter()
                    .copied()
                    .find(|&t| part[t as usize] == NONE);
                match fresh {
                    Some(t) => {
                        part[t as usize] = p as u32;
                        load[p] += weights[t as usize];
                        size[p] += 1;
                        frontier[p].push_back(t);
                        assigned += 1;
                        grew = true;
                        break;
                    }
                    None => {
                        frontier[p].pop_front();
                    }
                }
            }
            if grew {
                break;
            }
        }
        if !grew {
            break;
        }
    }
    // Components without a seed: grow part 0's label into them by BFS so
    // every switch has some part (their destinations still get one).
    for s in 0..n {
        if part[s] == NONE {
            let p = (0..seeds.len()).min_by_key(|&p| (load[p], p)).unwrap_or(0);
            graph.bfs(s as Sw, &mut dist, &mut queue);
            for &t in &queue {
                if part[t as usize] == NONE {
                    part[t as usize] = p as u32;
                    load[p] += weights[t as usize];
                }
            }
        }
    }
    part.into_iter().map(|p| p as u8).collect()
}
