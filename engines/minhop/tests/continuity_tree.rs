//! Continuity on the 12-ary 3-tree (432 switches, 1,728 hosts): one leaf
//! uplink down, then one spine switch down, each after the healthy
//! routing. The re-route continued from the routing in force against the
//! one from scratch: LFT entries changed and busiest link (end-port →
//! end-port routes, as the verifier counts them).
//!
//! `cargo test -p smcore-engine-minhop --test continuity_tree -- --ignored --nocapture`
//! prints the figures; it is ignored by default for its run time.

use sm_abi::{FabricSnapshot, Lft, PortState, PreviousLft, PreviousRouting, Routing, RoutingEngine, NONE};
use smcore_kit::{verify, Graph, VerifyOptions};
use smcore_minhop::MinHop;

fn tree() -> FabricSnapshot {
    sm_topology::lids::snapshot(&sm_topology::gen::kary_ntree(12, 3, 12).expect("12-ary 3-tree"), 0).expect("LIDs")
}

fn down(f: &mut FabricSnapshot, pi: u32) {
    let peer = f.ports[pi as usize].peer;
    f.ports[pi as usize].state = PortState::Down;
    if peer != NONE {
        f.ports[peer as usize].state = PortState::Down;
    }
}

fn previous_of(f: &FabricSnapshot, lfts: &[Lft], engine: &str) -> PreviousRouting {
    let lfts: Vec<PreviousLft> =
        lfts.iter().map(|l| PreviousLft { guid: f.nodes[l.node as usize].guid, ports: l.ports.clone() }).collect();
    PreviousRouting { engine: engine.into(), lfts: lfts.into() }
}

/// Entries of live LIDs that differ between two routings of `f`'s switches.
fn changed(f: &FabricSnapshot, before: &[Lft], after: &[Lft]) -> u64 {
    let graph = Graph::new(f);
    let mut n = 0;
    for a in after {
        let Some(b) = before.iter().find(|b| f.nodes[b.node as usize].guid == f.nodes[a.node as usize].guid) else { continue };
        for lid in 1..a.ports.len().min(b.ports.len()) {
            if graph.lid_port.get(lid).is_some_and(|&p| p != NONE) && a.ports[lid] != b.ports[lid] {
                n += 1;
            }
        }
    }
    n
}

fn busiest(f: &FabricSnapshot, r: &Routing) -> u64 {
    let v = verify(f, r, &VerifyOptions { credit_loops: false, ..VerifyOptions::default() });
    assert_eq!((v.unreachable, v.looping), (0, 0), "{:?}", v.examples);
    v.port_load.iter().copied().max().unwrap_or(0)
}

fn measure(what: &str, healthy: &FabricSnapshot, f: &FabricSnapshot, engine: &MinHop, name: &str) -> (u64, u64, u64, u64) {
    let before = engine.route(healthy).expect("routes the healthy tree");
    let scratch = engine.route(f).expect("routes from scratch");
    let continued = engine.reroute(f, &previous_of(f, &before.lfts, name)).expect("re-routes");
    let figures = (
        changed(f, &before.lfts, &scratch.lfts),
        busiest(f, &scratch),
        changed(f, &before.lfts, &continued.lfts),
        busiest(f, &continued),
    );
    println!(
        "{what}, {name}: from scratch {} entries changed, busiest link {}; continued {} entries changed, busiest link {} (healthy busiest {})",
        figures.0,
        figures.1,
        figures.2,
        figures.3,
        busiest(healthy, &before)
    );
    for d in continued.diagnostics.iter().filter(|d| d.message.contains("continued")) {
        println!("  {}", d.message);
    }
    figures
}

#[test]
#[ignore = "routes the 12-ary 3-tree six times"]
fn one_leaf_uplink_and_one_spine_down_on_the_12_ary_3_tree() {
    let healthy = tree();
    let graph = Graph::new(&healthy);
    // A leaf: a switch with end ports; its first uplink.
    let leaf = (0..graph.switch_count())
        .find(|&s| graph.sw_ports[s].iter().any(|l| l.peer_sw == NONE))
        .expect("a leaf");
    let uplink = graph.sw_ports[leaf].iter().find(|l| l.peer_sw != NONE).expect("an uplink").port_index;
    let mut leaf_down = healthy.clone();
    down(&mut leaf_down, uplink);
    // A spine: a switch all of whose links lead to switches, at the
    // greatest distance from the leaf.
    let mut dist = vec![0u8; graph.switch_count()];
    graph.bfs(leaf as u32, &mut dist, &mut Vec::new());
    let spine = (0..graph.switch_count())
        .filter(|&s| graph.sw_ports[s].iter().all(|l| l.peer_sw != NONE))
        .max_by_key(|&s| (dist[s], std::cmp::Reverse(s)))
        .expect("a spine");
    let mut spine_down = healthy.clone();
    for l in &graph.sw_ports[spine] {
        down(&mut spine_down, l.port_index);
    }
    for (engine, name) in [(MinHop::balanced(), "minhop-balanced"), (MinHop::default(), "minhop")] {
        for (what, f) in [("one leaf uplink down", &leaf_down), ("one spine switch down", &spine_down)] {
            let (scratch_changed, _, changed, _) = measure(what, &healthy, f, &engine, name);
            assert!(changed < scratch_changed, "{what}, {name}");
        }
    }
}
