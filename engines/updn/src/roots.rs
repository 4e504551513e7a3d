//! updn root switches: from a GUID list (OpenSM's `root_guid_file`) or
//! detected from the CA hop histogram.

use std::collections::HashMap;

use sm_abi::{FabricSnapshot, NodeKind, NONE};
use smcore_kit::graph::{usable, Graph, Sw};

/// OpenSM's IB_SUBNET_PATH_HOPS_MAX: hop counts at or above it are left
/// out of the histogram.
const HOPS_MAX: usize = 64;

/// Number of CA and router ports cabled to each switch.
pub fn end_ports_per_switch(fabric: &FabricSnapshot, graph: &Graph) -> Vec<u32> {
    graph
        .sw_ports
        .iter()
        .map(|links| {
            links.iter().filter(|l| l.peer_sw == NONE && fabric.nodes[l.peer_node as usize].kind.is_end_node()).count()
                as u32
        })
        .collect()
}

/// OpenSM's root detection ("updn_find_root_nodes_by_min_hop"): each
/// switch builds a histogram of the min-hop distance to every CA and
/// router port (counted at the switch it hangs off), and is a root when
/// exactly one bar holds more than 90% of all those ports and no other bar
/// more than 5%. On a k-ary n-tree only the top level sees every host at
/// the same distance. Ports in other parts of a split fabric count in the
/// total but never in a bar, as in OpenSM.
pub fn detect(fabric: &FabricSnapshot, graph: &Graph) -> Vec<Sw> {
    let per_switch = end_ports_per_switch(fabric, graph);
    let total: u64 = per_switch.iter().map(|&c| c as u64).sum();
    if total == 0 {
        return Vec::new();
    }
    let thd1 = total as f64 * 0.9;
    let thd2 = total as f64 * 0.05;
    let attached: Vec<(Sw, u32)> =
        per_switch.iter().enumerate().filter(|(_, &c)| c > 0).map(|(s, &c)| (s as Sw, c)).collect();
    // Distances from every switch at once: the bit-parallel search costs a
    // fraction of a BFS per switch (3,468 of them on a 34-ary 3-tree).
    let dist = graph.distance_matrix();
    let n = graph.switch_count();
    let is_root: Vec<bool> = (0..n as Sw)
        .map(|s| {
            let row = dist.to(s);
            let mut hist = [0u64; HOPS_MAX];
            for &(c, count) in &attached {
                let d = row[c as usize] as usize;
                if d < HOPS_MAX {
                    hist[d] += count as u64;
                }
            }
            let over1 = hist.iter().filter(|&&h| h as f64 > thd1).count();
            let over2 = hist.iter().filter(|&&h| h as f64 > thd2).count();
            over1 == 1 && over2 == 1
        })
        .collect();
    (0..n as Sw).filter(|&s| is_root[s as usize]).collect()
}

/// Roots named by GUID, with what could not be used.
#[derive(Debug, Default)]
pub struct Named {
    /// Root switches, deduplicated, in the order first named.
    pub roots: Vec<Sw>,
    /// One message per GUID that names no usable node.
    pub warnings: Vec<String>,
    /// CAs that stood for the switch they are cabled to.
    pub notes: Vec<String>,
}

/// Resolve GUIDs to root switches. A switch GUID (node or port) names that
/// switch; a CA or router GUID names the switch it is cabled to (every
/// switch of a node GUID, the one switch of a port GUID), as OpenSM's
/// documentation of the root file describes.
pub fn resolve(fabric: &FabricSnapshot, graph: &Graph, guids: &[u64], origin: &str) -> Named {
    let mut by_node: HashMap<u64, u32> = HashMap::new();
    let mut by_port: HashMap<u64, u32> = HashMap::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        by_node.entry(n.guid).or_insert(i as u32);
    }
    for (i, p) in fabric.ports.iter().enumerate() {
        if p.guid != 0 {
            by_port.entry(p.guid).or_insert(i as u32);
        }
    }
    let mut named = Named::default();
    let add = |roots: &mut Vec<Sw>, s: Sw| {
        if !roots.contains(&s) {
            roots.push(s);
        }
    };
    for &g in guids {
        // A port GUID of a CA narrows the choice to that port's switch.
        let (node, port) = match (by_node.get(&g), by_port.get(&g)) {
            (Some(&n), _) => (n, None),
            (None, Some(&p)) => (fabric.ports[p as usize].node, Some(p)),
            (None, None) => {
                named.warnings.push(format!("{origin}: 0x{g:016x} is not a node or port GUID of this fabric, ignored"));
                continue;
            }
        };
        let n = &fabric.nodes[node as usize];
        if n.kind == NodeKind::Switch {
            add(&mut named.roots, graph.sw_of_node[node as usize]);
            continue;
        }
        let ports: Vec<u32> = match port {
            Some(p) => vec![p],
            None => (1..=n.num_ports as u32).map(|k| n.first_port + k).collect(),
        };
        let mut found = Vec::new();
        for p in ports {
            if !usable(fabric, p) {
                continue;
            }
            let peer_node = fabric.ports[fabric.ports[p as usize].peer as usize].node;
            let s = graph.sw_of_node[peer_node as usize];
            if s != NONE && !found.contains(&s) {
                found.push(s);
            }
        }
        if found.is_empty() {
            named.warnings.push(format!("{origin}: 0x{g:016x} is a CA not cabled to any switch, ignored"));
            continue;
        }
        for &s in &found {
            let sg = fabric.nodes[graph.switch_nodes[s as usize] as usize].guid;
            named.notes.push(format!("{origin}: CA 0x{g:016x} stands for its switch 0x{sg:016x}"));
            add(&mut named.roots, s);
        }
    }
    named
}
