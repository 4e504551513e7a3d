//! What a re-route costs: the faults a fat tree meets most (one leaf uplink,
//! one spine switch), the routing in force handed on as a
//! [`PreviousRouting`], and the figures a site feels — LFT entries changed
//! and the busiest link — for an engine's re-route continued from the
//! routing in force against one from scratch.
//!
//! Engines' tests measure themselves with it (`continuity_tree` in minhop,
//! updn and ftree); `bench/recovery.sh` measures the same from outside,
//! under ibsim, against OpenSM.

use sm_abi::{FabricSnapshot, Lft, PortState, PreviousLft, PreviousRouting, Routing, RoutingEngine, NONE};

use crate::verify::{verify, VerifyOptions};
use crate::Graph;

/// Takes port `pi` and its peer down.
pub fn link_down(f: &mut FabricSnapshot, pi: u32) {
    let peer = f.ports[pi as usize].peer;
    f.ports[pi as usize].state = PortState::Down;
    if peer != NONE {
        f.ports[peer as usize].state = PortState::Down;
    }
}

/// The routing in force, as the core hands it to `reroute`: tables by
/// switch GUID.
pub fn previous_of(f: &FabricSnapshot, lfts: &[Lft], engine: &str) -> PreviousRouting {
    let lfts: Vec<PreviousLft> =
        lfts.iter().map(|l| PreviousLft { guid: f.nodes[l.node as usize].guid, ports: l.ports.clone() }).collect();
    PreviousRouting { engine: engine.into(), lfts: lfts.into() }
}

/// Entries of live LIDs that differ between two routings of `f`'s switches
/// (switches matched by GUID). A switch with every link down counts
/// nothing: the SM no longer reaches it, nor would a read-back.
pub fn changed(f: &FabricSnapshot, before: &[Lft], after: &[Lft]) -> u64 {
    let graph = Graph::new(f);
    let linked = |node: u32| {
        (1..=f.nodes[node as usize].num_ports)
            .any(|p| f.port_of(node, p).is_some_and(|p| p.is_linked() && p.state.is_active()))
    };
    let mut n = 0;
    for a in after.iter().filter(|a| linked(a.node)) {
        let guid = f.nodes[a.node as usize].guid;
        let Some(b) = before.iter().find(|b| f.nodes[b.node as usize].guid == guid) else { continue };
        for lid in 1..a.ports.len().min(b.ports.len()) {
            if graph.lid_port.get(lid).is_some_and(|&p| p != NONE) && a.ports[lid] != b.ports[lid] {
                n += 1;
            }
        }
    }
    n
}

/// The busiest link (end-port → end-port routes, as the verifier counts
/// them); panics when the routing leaves a pair unreachable or looping.
pub fn busiest(f: &FabricSnapshot, r: &Routing) -> u64 {
    let v = verify(f, r, &VerifyOptions { credit_loops: false, ..VerifyOptions::default() });
    assert_eq!((v.unreachable, v.looping), (0, 0), "{:?}", v.examples);
    v.port_load.iter().copied().max().unwrap_or(0)
}

/// A tree with one leaf uplink down and the same tree with one spine
/// switch down (every link of a top-level switch: the farthest from every
/// switch with end ports, the last such by index).
pub fn tree_faults(healthy: &FabricSnapshot) -> (FabricSnapshot, FabricSnapshot) {
    let graph = Graph::new(healthy);
    let is_leaf = |s: usize| graph.sw_ports[s].iter().any(|l| l.peer_sw == NONE);
    let leaf = (0..graph.switch_count()).find(|&s| is_leaf(s)).expect("a leaf");
    let uplink = graph.sw_ports[leaf].iter().find(|l| l.peer_sw != NONE).expect("an uplink").port_index;
    let mut leaf_down = healthy.clone();
    link_down(&mut leaf_down, uplink);
    // Distance from the nearest leaf, by one breadth-first search from all.
    let n = graph.switch_count();
    let mut level = vec![u32::MAX; n];
    let mut queue: std::collections::VecDeque<usize> = (0..n).filter(|&s| is_leaf(s)).collect();
    for &s in &queue {
        level[s] = 0;
    }
    while let Some(s) = queue.pop_front() {
        for l in &graph.sw_ports[s] {
            if l.peer_sw != NONE && level[l.peer_sw as usize] == u32::MAX {
                level[l.peer_sw as usize] = level[s] + 1;
                queue.push_back(l.peer_sw as usize);
            }
        }
    }
    let spine = (0..n).filter(|&s| level[s] != u32::MAX).max_by_key(|&s| (level[s], s)).expect("a spine");
    let mut spine_down = healthy.clone();
    for l in &graph.sw_ports[spine] {
        link_down(&mut spine_down, l.port_index);
    }
    (leaf_down, spine_down)
}

/// One event's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Churn {
    /// The healthy routing's busiest link.
    pub healthy_busiest: u64,
    /// Entries a re-route from scratch changes.
    pub scratch_changed: u64,
    /// The busiest link from scratch.
    pub scratch_busiest: u64,
    /// Entries the continued re-route changes.
    pub changed: u64,
    /// The busiest link after the continued re-route.
    pub busiest: u64,
}

/// Routes `healthy`, then `f` from scratch and continued from the healthy
/// routing; prints the figures under `what` and the continuity's
/// diagnostics.
pub fn measure(
    what: &str,
    healthy: &FabricSnapshot,
    f: &FabricSnapshot,
    engine: &dyn RoutingEngine,
    name: &str,
) -> Churn {
    let before = engine.route(healthy).expect("routes the healthy fabric");
    let scratch = engine.route(f).expect("routes from scratch");
    let continued = engine.reroute(f, &previous_of(f, &before.lfts, name)).expect("re-routes");
    let c = Churn {
        healthy_busiest: busiest(healthy, &before),
        scratch_changed: changed(f, &before.lfts, &scratch.lfts),
        scratch_busiest: busiest(f, &scratch),
        changed: changed(f, &before.lfts, &continued.lfts),
        busiest: busiest(f, &continued),
    };
    println!(
        "{what}, {name}: from scratch {} entries changed, busiest link {}; continued {} entries changed, busiest link {} (healthy busiest {})",
        c.scratch_changed, c.scratch_busiest, c.changed, c.busiest, c.healthy_busiest
    );
    for d in continued.diagnostics.iter().filter(|d| d.message.contains("continued")) {
        println!("  {}", d.message);
    }
    c
}
