//! Helpers shared by the updn/dnup tests.
#![allow(dead_code)]

use std::path::PathBuf;

use sm_abi::{FabricSnapshot, NodeKind};
use sm_topology::builder::{ca_guid, ibnetdiscover_id};
use sm_topology::{TopoLink, TopoNode, Topology};
use smcore_kit::graph::{Graph, Sw};
use smcore_updn::rank::{self, Orientation};

/// Switch GUIDs whose description starts with `prefix`.
pub fn guids_of(fabric: &FabricSnapshot, prefix: &str) -> Vec<u64> {
    fabric
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Switch && n.description.starts_with(prefix))
        .map(|n| n.guid)
        .collect()
}

/// Switch numbers whose description starts with `prefix`.
pub fn switches_named(fabric: &FabricSnapshot, graph: &Graph, prefix: &str) -> Vec<Sw> {
    (0..graph.switch_count() as Sw)
        .filter(|&s| fabric.nodes[graph.switch_nodes[s as usize] as usize].description.starts_with(prefix))
        .collect()
}

/// Cable `per_switch` new single-port hosts to the free ports of every
/// switch whose description starts with `prefix`.
pub fn add_hosts(topo: &mut Topology, prefix: &str, per_switch: usize) {
    let used = topo.port_links();
    let mut next = topo.nodes.iter().filter(|n| n.kind == NodeKind::Ca).count() + 1000;
    let targets: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].is_switch() && topo.nodes[i].desc.starts_with(prefix))
        .collect();
    for s in targets {
        let free: Vec<u8> =
            (1..=topo.nodes[s].num_ports).filter(|&p| used[s][p as usize].is_none()).take(per_switch).collect();
        assert_eq!(free.len(), per_switch, "switch {} has too few free ports", topo.nodes[s].desc);
        for p in free {
            let guid = ca_guid(next);
            next += 1;
            let host = topo.nodes.len();
            topo.nodes.push(TopoNode {
                kind: NodeKind::Ca,
                name: ibnetdiscover_id(NodeKind::Ca, guid),
                desc: format!("io-{}", host),
                num_ports: 1,
                node_guid: guid,
                sys_guid: guid,
                port_guids: TopoNode::default_port_guids(NodeKind::Ca, guid, 1),
            });
            topo.links.push(TopoLink::new((host, 1), (s, p)));
        }
    }
    topo.canonicalize();
}

/// A file in the target directory's scratch space, unique per test.
pub fn scratch_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smcore-updn-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("scratch file");
    path
}

/// Independent oracle: ordered pairs of switches with end ports, in one
/// connected part, that have no path climbing then descending under
/// `orient` (a BFS over (switch, has descended) states).
pub fn pairs_without_legal_path(fabric: &FabricSnapshot, graph: &Graph, orient: &Orientation) -> usize {
    let (comp, _) = rank::components(graph);
    let mut hosts: Vec<Sw> =
        graph.end_ports.iter().map(|&p| graph.entry_switch(fabric, p)).filter(|&s| s != sm_abi::NONE).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let n = graph.switch_count();
    let mut missing = 0;
    for &s in &hosts {
        let mut seen = vec![[false; 2]; n];
        let mut stack = vec![(s, 0usize)];
        seen[s as usize][0] = true;
        while let Some((x, down)) = stack.pop() {
            for &y in &graph.sw_adj[x as usize] {
                let step_down = !orient.up(x, y);
                if down == 1 && !step_down {
                    continue;
                }
                let d = usize::from(step_down) | down;
                if !seen[y as usize][d] {
                    seen[y as usize][d] = true;
                    stack.push((y, d));
                }
            }
        }
        for &t in &hosts {
            if t != s && comp[t as usize] == comp[s as usize] && !seen[t as usize][0] && !seen[t as usize][1] {
                missing += 1;
            }
        }
    }
    missing
}
