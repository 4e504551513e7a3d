//! Shared helpers of the lash tests.
#![allow(dead_code)]

use sm_abi::{FabricSnapshot, NodeKind};
use sm_topology::{gen, lids, Topology};

/// A generated torus (or mesh) whose switch-to-switch cables are moved to
/// other ports, at random per switch: the same graph, but port numbers no
/// longer tell the dimension.
pub fn shuffled_torus(dims: &[usize], hosts: usize, mesh: bool, seed: u64) -> Topology {
    let (mut topo, _) = gen::torus(dims, hosts, mesh).expect("torus");
    let link_ports = 2 * dims.len();
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut rnd = move |m: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % m as u64) as usize
    };
    let perms: Vec<Vec<u8>> = topo
        .nodes
        .iter()
        .map(|n| {
            let mut p: Vec<u8> = (1..=link_ports as u8).collect();
            if n.kind == NodeKind::Switch {
                for i in (1..p.len()).rev() {
                    p.swap(i, rnd(i + 1));
                }
            }
            p
        })
        .collect();
    // CAs keep the identity, and host ports of switches lie above the link ports.
    let remap = |(node, port): (usize, u8)| {
        if port >= 1 && port as usize <= link_ports {
            (node, perms[node][port as usize - 1])
        } else {
            (node, port)
        }
    };
    for l in topo.links.iter_mut() {
        l.a = remap(l.a);
        l.b = remap(l.b);
    }
    topo.validate().expect("shuffled torus is valid");
    topo
}

/// Snapshot with LMC 0.
pub fn snap(topo: &Topology) -> FabricSnapshot {
    lids::snapshot(topo, 0).expect("lids")
}
