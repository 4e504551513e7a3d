//! The multicast master spanning tree.
//!
//! From a root near the centre of the torus the tree runs along the root's
//! line in the first DOR dimension, then from every switch of that line
//! along the second dimension, then the third. Traffic from the root to the
//! tips therefore turns only the way DOR turns, and with the root's plane
//! whole every switch is reached that way. On a whole ring a line never
//! crosses the dateline (it spreads both ways from where it starts); on a
//! ring broken by a failure it follows the one intact arc, dateline or not,
//! as unicast does. The root is the switch nearest the centre whose plane
//! (all switches sharing its last-dimension coordinate) and whose
//! last-dimension ring have no failed switch, so a failed switch never
//! forces extra turns.

use sm_abi::{FabricSnapshot, SpanningTree, TreeEdge, NONE};

use crate::discover::Torus;

/// The tree as positions: root and (parent, child, direction) edges.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Root position.
    pub root: u32,
    /// Edges from parent to child with the direction travelled.
    pub edges: Vec<(u32, u32, usize)>,
    /// Switches that had to be attached with turns DOR does not make.
    pub extra: usize,
    /// No root with a whole plane existed.
    pub root_compromised: bool,
}

fn order_key(o: i64) -> (i64, bool) {
    (o.abs(), o > 0)
}

/// Sort key of a root candidate: distance from the centre, then the
/// offsets of z, y, x (0 before -1 before +1 before -2 ...).
type RootKey = (i64, (i64, bool), (i64, bool), (i64, bool));

/// Choose the root.
pub fn choose_root(t: &Torus) -> Option<(u32, bool)> {
    let last = *t.dims.last()?;
    let centre: Vec<i64> = (0..3).map(|d| (t.radix[d] / 2) as i64).collect();
    let mut cands: Vec<(u32, RootKey)> = (0..t.positions() as u32)
        .filter(|&p| t.present(p))
        .map(|p| {
            let c = t.coord(p);
            let o: Vec<i64> = (0..3).map(|d| c[d] as i64 - centre[d]).collect();
            (
                p,
                (
                    o.iter().map(|x| x.abs()).sum(),
                    order_key(o[2]),
                    order_key(o[1]),
                    order_key(o[0]),
                ),
            )
        })
        .collect();
    cands.sort_by_key(|&(_, k)| k);
    let whole = |p: u32| {
        let c = t.coord(p);
        let plane = (0..t.positions() as u32)
            .filter(|&q| t.coord(q)[last] == c[last])
            .all(|q| t.present(q));
        let line = (0..t.radix[last]).all(|k| {
            let mut q = c;
            q[last] = k;
            t.present(t.pos(q))
        });
        plane && line
    };
    if let Some(&(p, _)) = cands.iter().find(|&&(p, _)| whole(p)) {
        return Some((p, false));
    }
    cands.first().map(|&(p, _)| (p, true))
}

fn ring_whole(t: &Torus, c: [usize; 3], d: usize) -> bool {
    (0..t.radix[d]).all(|k| {
        let mut q = c;
        q[d] = k;
        let p = t.pos(q);
        t.present(p) && (k + 1 == t.radix[d] && !t.wrap[d] || t.has_link(p, 2 * d))
    })
}

/// Build the master tree over the placed switches.
pub fn master_tree(t: &Torus) -> Option<Tree> {
    let (root, root_compromised) = choose_root(t)?;
    let n = t.positions();
    let mut in_tree = vec![false; n];
    in_tree[root as usize] = true;
    let mut members = vec![root];
    let mut edges = Vec::new();
    for &d in &t.dims {
        let current = members.clone();
        for &f in &current {
            let fc = t.coord(f);
            let whole = ring_whole(t, fc, d);
            for k in 0..t.radix[d] {
                if k == fc[d] {
                    continue;
                }
                let mut tc = fc;
                tc[d] = k;
                if !t.present(t.pos(tc)) {
                    continue;
                }
                let dirs: Vec<usize> = if whole {
                    vec![2 * d + (k < fc[d]) as usize]
                } else {
                    vec![2 * d, 2 * d + 1]
                };
                for dir in dirs {
                    // Walk only if the whole arc is there.
                    let mut cur = fc;
                    let mut ok = true;
                    let mut steps = Vec::new();
                    while cur != tc {
                        let cp = t.pos(cur);
                        let Some(next) = t.step(cur, dir) else {
                            ok = false;
                            break;
                        };
                        if !t.has_link(cp, dir) {
                            ok = false;
                            break;
                        }
                        steps.push((cp, t.pos(next)));
                        cur = next;
                    }
                    if ok {
                        for (a, b) in steps {
                            if !in_tree[b as usize] {
                                in_tree[b as usize] = true;
                                members.push(b);
                                edges.push((a, b, dir));
                            }
                        }
                        break;
                    }
                }
            }
        }
    }
    // Whatever is left joins through any torus link, with turns DOR does not make.
    let mut extra = 0;
    loop {
        let mut grew = false;
        for p in 0..n as u32 {
            if !t.present(p) || in_tree[p as usize] {
                continue;
            }
            let c = t.coord(p);
            for dir in 0..6 {
                if !t.has_link(p, dir) {
                    continue;
                }
                let Some(q) = t.step(c, dir) else { continue };
                let q = t.pos(q);
                if in_tree[q as usize] {
                    in_tree[p as usize] = true;
                    edges.push((q, p, dir ^ 1));
                    extra += 1;
                    grew = true;
                    break;
                }
            }
        }
        if !grew {
            break;
        }
    }
    Some(Tree {
        root,
        edges,
        extra,
        root_compromised,
    })
}

/// The tree in the ABI's terms: switch-to-switch links, once per direction.
pub fn to_spanning_tree(
    fabric: &FabricSnapshot,
    switch_nodes: &[u32],
    t: &Torus,
    tree: &Tree,
) -> SpanningTree {
    let mut edges = Vec::with_capacity(tree.edges.len() * 2);
    for &(a, _b, dir) in &tree.edges {
        let sa = t.sw_at[a as usize];
        let Some(&port) = t.ports[a as usize][dir].first() else {
            continue;
        };
        let node = switch_nodes[sa as usize];
        let pi = fabric.nodes[node as usize].first_port + port as u32;
        let peer = fabric.ports[pi as usize].peer;
        edges.push(TreeEdge { node, port });
        if peer != NONE {
            let pp = &fabric.ports[peer as usize];
            edges.push(TreeEdge {
                node: pp.node,
                port: pp.num,
            });
        }
    }
    SpanningTree {
        root: switch_nodes[t.sw_at[tree.root as usize] as usize],
        edges: edges.into(),
    }
}
