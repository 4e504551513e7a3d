//! The same fabric numbered differently, for tests and benchmarks that
//! check a routing does not hang on numbering: nodes in another order
//! (offline LIDs are handed out in node order) or node GUIDs dealt out
//! again (routing orders and GUID ties change).

use sm_abi::NodeKind;
use sm_topology::{TopoNode, Topology};

/// A permutation of `0..n` from `seed` (xorshift Fisher-Yates).
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p.swap(i, (x % (i as u64 + 1)) as usize);
    }
    p
}

/// The same fabric with its nodes in another order: LIDs are handed out in
/// node order, so every LID changes, nothing else does.
pub fn nodes_reordered(t: &Topology, seed: u64) -> Topology {
    let perm = permutation(t.nodes.len(), seed);
    let mut new_index = vec![0; t.nodes.len()];
    for (new, &old) in perm.iter().enumerate() {
        new_index[old] = new;
    }
    let mut out = t.clone();
    out.nodes = perm.iter().map(|&old| t.nodes[old].clone()).collect();
    for l in &mut out.links {
        l.a.0 = new_index[l.a.0];
        l.b.0 = new_index[l.b.0];
    }
    out
}

/// The same cabling with the node names, node and system GUIDs dealt out
/// again among nodes of one kind (port GUIDs follow the node GUID).
pub fn guids_dealt(t: &Topology, seed: u64) -> Topology {
    let mut out = t.clone();
    for (kind, salt) in [(NodeKind::Switch, 1), (NodeKind::Ca, 2)] {
        let idx: Vec<usize> = (0..t.nodes.len()).filter(|&i| t.nodes[i].kind == kind).collect();
        let perm = permutation(idx.len(), seed ^ salt);
        for (k, &i) in idx.iter().enumerate() {
            let from = &t.nodes[idx[perm[k]]];
            let n = &mut out.nodes[i];
            n.node_guid = from.node_guid;
            n.sys_guid = from.sys_guid;
            n.name = from.name.clone();
            n.port_guids = TopoNode::default_port_guids(n.kind, n.node_guid, n.num_ports);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renumbering_keeps_the_cabling() {
        let t = sm_topology::gen::kary_ntree(2, 2, 2).unwrap();
        let r = nodes_reordered(&t, 7);
        let g = guids_dealt(&t, 7);
        assert!(r.validate().is_ok() && g.validate().is_ok());
        let mut p = permutation(50, 3);
        p.sort_unstable();
        assert_eq!(p, (0..50).collect::<Vec<_>>());
        // Every cable joins the same pair of node names after reordering.
        let ends = |t: &Topology| {
            let mut v: Vec<(String, u8, String, u8)> = t
                .links
                .iter()
                .map(|l| (t.nodes[l.a.0].desc.clone(), l.a.1, t.nodes[l.b.0].desc.clone(), l.b.1))
                .collect();
            v.sort();
            v
        };
        assert_eq!(ends(&t), ends(&r));
        assert_eq!(ends(&t), ends(&g));
    }
}
