//! Continuity under random fault sequences: links and switches go down
//! and come back on fat trees, tori and random fabrics; after every event
//! the re-route continued from the routing in force is loop-free, reaches
//! every pair the cables still join, and never changes a route the event
//! left valid (healthy port on a least-hop path) unless its rebalancing
//! names the link that move relieved.

use proptest::prelude::*;
use sm_abi::{FabricSnapshot, Lft, PortState, PreviousLft, PreviousRouting, Routing, RoutingEngine, NONE};
use smcore_kit::continuity::{continue_routing, ContinuityOptions, Rule};
use smcore_kit::strategy::{fat_trees, random_fabrics, tori, Drawn, Sizes};
use smcore_kit::{verify, Graph, VerifyOptions};
use smcore_minhop::MinHop;

/// One event: the `n`th switch-to-switch link or the `n`th switch (taken
/// modulo how many there are) changes state, down if up, back if down.
#[derive(Debug, Clone, Copy)]
enum Event {
    Link(usize),
    Switch(usize),
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(prop_oneof![3 => any::<usize>().prop_map(Event::Link), 1 => any::<usize>().prop_map(Event::Switch)], 1..7)
}

fn families() -> impl Strategy<Value = Drawn> {
    let random = Sizes { switches: 4..16, lmc: 0..1, ..Sizes::default() }.healthy();
    prop_oneof![fat_trees(0..1), tori(1..3, 0..1), random_fabrics(random)]
}

/// The healthy fabric with `links` (port indices of one end) and the
/// links of `switches` (node indices) down at both ends.
fn with_faults(base: &FabricSnapshot, links: &[u32], switches: &[u32]) -> FabricSnapshot {
    let mut f = base.clone();
    let down = |f: &mut FabricSnapshot, pi: u32| {
        let peer = f.ports[pi as usize].peer;
        f.ports[pi as usize].state = PortState::Down;
        if peer != NONE {
            f.ports[peer as usize].state = PortState::Down;
        }
    };
    for &pi in links {
        down(&mut f, pi);
    }
    for &node in switches {
        let n = f.nodes[node as usize].clone();
        for num in 1..=n.num_ports {
            let pi = n.first_port + num as u32;
            if f.ports[pi as usize].peer != NONE {
                down(&mut f, pi);
            }
        }
    }
    f
}

fn previous_of(f: &FabricSnapshot, lfts: &[Lft]) -> PreviousRouting {
    let lfts: Vec<PreviousLft> =
        lfts.iter().map(|l| PreviousLft { guid: f.nodes[l.node as usize].guid, ports: l.ports.clone() }).collect();
    PreviousRouting { engine: "minhop-balanced".into(), lfts: lfts.into() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn continued_reroutes_keep_what_faults_left_valid(drawn in families(), events in events()) {
        let base = &drawn.fabric;
        let g0 = Graph::new(base);
        // Switch-to-switch links, one end each.
        let links: Vec<u32> = g0.sw_ports.iter().flatten().filter(|l| l.peer_sw != NONE && l.port_index < l.peer_port).map(|l| l.port_index).collect();
        let switches = g0.switch_nodes.clone();
        prop_assume!(!links.is_empty());
        let engine = MinHop::balanced();
        let mut accepted: Routing = engine.route(base).expect("routes the healthy fabric");
        let (mut down_links, mut down_switches): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
        let opts = ContinuityOptions::default();
        for event in events {
            match event {
                Event::Link(n) => {
                    let pi = links[n % links.len()];
                    match down_links.iter().position(|&x| x == pi) {
                        Some(i) => { down_links.swap_remove(i); }
                        None => down_links.push(pi),
                    }
                }
                Event::Switch(n) => {
                    let node = switches[n % switches.len()];
                    match down_switches.iter().position(|&x| x == node) {
                        Some(i) => { down_switches.swap_remove(i); }
                        None => down_switches.push(node),
                    }
                }
            }
            let f = with_faults(base, &down_links, &down_switches);
            let graph = Graph::new(&f);
            let dist = graph.distance_matrix();
            let previous = previous_of(&f, &accepted.lfts);
            let Ok(fresh) = engine.route(&f) else { continue };
            let (r, rep) = continue_routing(&f, &graph, &previous, fresh, &Rule::MinHop(&dist), &opts, "minhop-balanced");
            prop_assert!(rep.fell_back.is_none(), "{}: {:?}", drawn.spec, rep.fell_back);
            let v = verify(&f, &r, &VerifyOptions { credit_loops: false, ..VerifyOptions::default() });
            prop_assert_eq!((v.unreachable, v.looping, v.non_minimal), (0, 0, 0), "{}: {:?}", drawn.spec, v.examples);
            // Every route the event left valid is as it was, or moved by
            // the rebalancing off a link above the fresh routing's busiest.
            for m in &rep.moves {
                prop_assert!(m.load_before > rep.fresh_max, "{m:?} fresh {}", rep.fresh_max);
            }
            for l in r.lfts.iter() {
                let s = graph.sw_of_node[l.node as usize];
                let guid = f.nodes[l.node as usize].guid;
                let Some(before) = previous.lft(guid) else { continue };
                for (lid, (&was, &now)) in before.iter().zip(l.ports.iter()).enumerate().skip(1) {
                    let pi = graph.lid_port[lid];
                    if pi == NONE || was == now {
                        continue;
                    }
                    let t = graph.entry_switch(&f, pi);
                    if t == NONE || t == s {
                        continue;
                    }
                    let still_valid = graph.sw_ports[s as usize].iter().any(|p| {
                        p.port == was && p.peer_sw != NONE && dist.get(p.peer_sw, t) != u8::MAX && dist.get(p.peer_sw, t) + 1 == dist.get(s, t)
                    });
                    let moved = rep.moves.iter().any(|m| m.switch_guid == guid && usize::from(m.lid) == lid);
                    prop_assert!(!still_valid || moved, "{}: switch {guid:#x} LID {lid} changed {was} → {now} though the event left it valid", drawn.spec);
                }
            }
            // The engine's own re-route is this one.
            let through_engine = engine.reroute(&f, &previous).expect("re-routes");
            prop_assert_eq!(&through_engine.lfts, &r.lfts);
            accepted = r;
        }
    }
}
