//! lash on every generated family, healthy and faulty, LMC 0 and 1, with
//! and without mesh analysis: every connected pair reached and no credit
//! loop under the engine's own path SLs and SL2VL maps; the layers fit the
//! VLs; the SL of a pair is the SL of the reverse pair.

use sm_abi::{FabricSnapshot, RoutingEngine, NONE};
use smcore_kit::conformance::{assert_conformance, cases, check, Expect};
use smcore_kit::Graph;
use smcore_lash::{Lash, LashConfig};

fn lash(start: u8, mesh: bool) -> Lash {
    Lash::new(LashConfig {
        lash_start_vl: start,
        do_mesh_analysis: mesh,
    })
}

#[test]
fn deadlock_free_on_every_family_lmc_0() {
    assert_conformance(&lash(0, false), 0, &Expect::deadlock_free());
}

#[test]
fn deadlock_free_on_every_family_with_mesh_analysis() {
    assert_conformance(&lash(0, true), 0, &Expect::deadlock_free());
}

#[test]
fn deadlock_free_on_every_family_lmc_1() {
    assert_conformance(&lash(0, true), 1, &Expect::deadlock_free());
}

#[test]
fn deadlock_free_with_a_start_vl() {
    assert_conformance(&lash(2, false), 0, &Expect::deadlock_free());
}

#[test]
fn every_path_is_a_shortest_path() {
    // LASH never detours: the layers, not the paths, break the cycles.
    assert_conformance(&lash(0, true), 0, &Expect::minimal());
}

/// (LID, switch) of every end port.
fn end_lids(f: &FabricSnapshot, g: &Graph) -> Vec<(u16, u32)> {
    g.end_ports
        .iter()
        .map(|&p| (f.ports[p as usize].lid, g.entry_switch(f, p)))
        .filter(|e| e.1 != NONE)
        .collect()
}

#[test]
fn sls_are_symmetric_and_within_the_layers() {
    for mesh in [false, true] {
        for c in cases(0).unwrap() {
            let engine = lash(1, mesh);
            let plan = engine.plan(&c.fabric).unwrap();
            let r = engine.route(&c.fabric).unwrap();
            assert!(
                plan.layers >= 1 && plan.layers < plan.vls_available as usize,
                "{}",
                c.name
            );
            assert_eq!(r.vls_used as usize, 1 + plan.layers, "{}", c.name);
            let g = Graph::new(&c.fabric);
            let lids = end_lids(&c.fabric, &g);
            let mut seen = vec![false; plan.layers];
            for &(a, sa) in &lids {
                for &(b, sb) in &lids {
                    let sl = r.path_sl.path_sl(a, b);
                    assert_eq!(
                        sl,
                        r.path_sl.path_sl(b, a),
                        "{}: sl({a},{b}) != sl({b},{a})",
                        c.name
                    );
                    assert!(
                        sl >= 1 && (sl as usize) < 1 + plan.layers,
                        "{}: SL {sl}",
                        c.name
                    );
                    seen[sl as usize - 1] = true;
                    // One SL per switch pair, whatever the ports.
                    if sa != sb {
                        assert_eq!(
                            sl,
                            plan.layer[sa as usize * g.switch_count() + sb as usize] + 1
                        );
                    }
                }
            }
            assert!(
                seen.iter().all(|&s| s),
                "{}: a layer carries no CA path",
                c.name
            );
        }
    }
}

#[test]
fn start_vl_shifts_every_sl_and_vl() {
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "torus-5x4-h2")
        .unwrap();
    let r0 = lash(0, false).route(&c.fabric).unwrap();
    let r3 = lash(3, false).route(&c.fabric).unwrap();
    assert!(r0.vls_used >= 2, "a 5x4 torus needs at least two layers");
    assert_eq!(r3.vls_used, r0.vls_used + 3);
    let lids: Vec<u16> = c
        .fabric
        .end_ports()
        .map(|p| c.fabric.ports[p as usize].lid)
        .collect();
    for &a in &lids {
        for &b in &lids {
            assert_eq!(r3.path_sl.path_sl(a, b), r0.path_sl.path_sl(a, b) + 3);
        }
    }
    assert_eq!(r0.lfts, r3.lfts, "the start VL does not change the paths");
    let v = check(&lash(3, false), &c, &Expect::deadlock_free()).unwrap();
    assert!(v.vls_used <= r3.vls_used);
}

#[test]
fn sl2vl_is_one_to_one_on_inter_switch_ports() {
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "torus-3x3x3-h2")
        .unwrap();
    let r = lash(0, false).route(&c.fabric).unwrap();
    let g = Graph::new(&c.fabric);
    let mut inter = 0;
    for e in r.sl2vl.iter() {
        let node = &c.fabric.nodes[e.node as usize];
        let p = &c.fabric.ports[(node.first_port + e.out_port as u32) as usize];
        if g.sw_of_node[e.node as usize] != NONE
            && g.sw_of_node[c.fabric.ports[p.peer as usize].node as usize] != NONE
        {
            inter += 1;
            assert_eq!(&e.vl[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
        }
        assert!(
            e.vl.iter().all(|&v| v < p.op_vls.max(1)),
            "VL beyond the port's VLs"
        );
    }
    // 27 switches, 6 links each, 7 input ports (6 links and port 0) besides the output one... at least
    assert!(inter >= 27 * 6 * 6, "{inter} inter-switch SL2VL entries");
}

#[test]
fn fails_with_the_layer_count_when_vls_do_not_suffice() {
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "torus-5x4-h2")
        .unwrap();
    let need = lash(0, false).plan(&c.fabric).unwrap().layers;
    assert!(need >= 2);
    let mut f = c.fabric.clone();
    for p in f.ports.iter_mut() {
        p.op_vls = 1;
    }
    let e = lash(0, false).route(&f).unwrap_err();
    assert!(
        e.reason.contains(&format!("need {need} layers")) && e.reason.contains("1 VL"),
        "{e}"
    );
    // Enough VLs, but the start VL eats them.
    let mut f = c.fabric.clone();
    for p in f.ports.iter_mut() {
        p.op_vls = 4;
    }
    assert!(lash(4 - need as u8, false).route(&f).is_ok());
    let e = lash(5 - need as u8, false).route(&f).unwrap_err();
    assert!(e.reason.contains("lash_start_vl"), "{e}");
    let e = lash(4, false).route(&f).unwrap_err();
    assert!(e.reason.contains("lash_start_vl 4 leaves no VL"), "{e}");
}

#[test]
fn layers_are_balanced() {
    for c in cases(0).unwrap() {
        let plan = lash(0, true).plan(&c.fabric).unwrap();
        if plan.layers < 2 {
            continue;
        }
        let max = *plan.per_layer.iter().max().unwrap();
        let min = *plan.per_layer.iter().min().unwrap();
        assert!(
            min * 2 >= max,
            "{}: paths per layer {:?}",
            c.name,
            plan.per_layer
        );
    }
}

#[test]
fn one_path_per_switch_pair_along_the_lfts() {
    // Every CA of a destination switch is reached along the plan's switch
    // path, which is a shortest one.
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "random-24-seed42-3links-down")
        .unwrap();
    let engine = lash(0, false);
    let plan = engine.plan(&c.fabric).unwrap();
    let r = engine.route(&c.fabric).unwrap();
    let g = &plan.graph;
    let dist = g.distance_matrix();
    let n = g.switch_count();
    for &ep in &g.end_ports {
        let lid = c.fabric.ports[ep as usize].lid;
        let d = g.entry_switch(&c.fabric, ep);
        for s in 0..n as u32 {
            if dist.get(s, d) == u8::MAX {
                continue;
            }
            let path = plan.path(s, d);
            assert_eq!(path.len(), dist.get(s, d) as usize + 1);
            for w in path.windows(2) {
                let node = g.switch_nodes[w[0] as usize];
                let lft = r.lfts.iter().find(|l| l.node == node).unwrap();
                let port = lft.ports[lid as usize];
                let peer = c.fabric.ports[c.fabric.port_index(node, port) as usize].peer;
                assert_eq!(
                    g.sw_of_node[c.fabric.ports[peer as usize].node as usize],
                    w[1]
                );
            }
        }
    }
}

#[test]
fn the_layers_are_what_breaks_the_cycles() {
    // The same LFTs with every path on one SL have credit loops on a torus:
    // the checks above can fail.
    use sm_abi::{path_sl_box, UniformSl};
    use smcore_kit::verify::{verify, VerifyOptions};
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "torus-5x4-h2")
        .unwrap();
    let mut r = lash(0, false).route(&c.fabric).unwrap();
    assert!(r.vls_used > 1);
    assert!(verify(&c.fabric, &r, &VerifyOptions::default())
        .credit_loop
        .is_none());
    r.path_sl = path_sl_box(UniformSl(0));
    assert!(verify(&c.fabric, &r, &VerifyOptions::default())
        .credit_loop
        .is_some());
}

#[test]
fn parallel_links_share_the_routes() {
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "fat-tree-4x2-h8-u4-parallel")
        .unwrap();
    let r = lash(0, false).route(&c.fabric).unwrap();
    let g = Graph::new(&c.fabric);
    let mut groups = 0;
    for lft in r.lfts.iter() {
        let s = g.sw_of_node[lft.node as usize] as usize;
        // Routes go per destination switch (all its LIDs share the path).
        let mut load = vec![0usize; 256];
        for &node in &g.switch_nodes {
            let lid = c.fabric.ports[c.fabric.nodes[node as usize].first_port as usize].lid;
            let p = lft.ports[lid as usize];
            if p != sm_abi::NO_ROUTE {
                load[p as usize] += 1;
            }
        }
        for sp in &g.sw_ports[s] {
            let twins: Vec<u8> = g.sw_ports[s]
                .iter()
                .filter(|o| o.peer_sw == sp.peer_sw && sp.peer_sw != NONE)
                .map(|o| o.port)
                .collect();
            if twins.len() < 2 || twins[0] != sp.port {
                continue;
            }
            groups += 1;
            let loads: Vec<usize> = twins.iter().map(|&p| load[p as usize]).collect();
            let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
            assert!(
                max - min <= 1 + max / 4,
                "switch {s}: parallel ports {twins:?} lead to {loads:?} destination switches"
            );
        }
    }
    assert!(groups > 0, "the fabric has parallel links");
}
