//! Properties on generated 2D/3D tori and meshes: discovery places every
//! switch where the generator put it; every CA pair is reached and the
//! routing is free of credit loops by the kit verifier (which follows the
//! engine's path SLs and SL2VL maps) with no failure, a failed switch and
//! failed links; path SLs never change because of a failure; refusals
//! name a ring broken into disjoint segments.

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use sm_abi::{NodeKind, RoutingEngine, NONE};
use smcore_torus2qos::config::TorusConf;
use smcore_torus2qos::Torus2Qos;

fn check_placement(fab: &Fab, f: &sm_abi::FabricSnapshot, eng: &Torus2Qos) {
    let t = eng.discover(f).unwrap();
    for s in &fab.layout.switches {
        let sw = (0..t.pos_of.len()).find(|&i| {
            let node = f.switches().nth(i).unwrap();
            node as usize == s.node
        });
        let sw = sw.unwrap();
        if t.pos_of[sw] == NONE {
            continue;
        }
        assert_eq!(
            t.coord(t.pos_of[sw]),
            s.coord,
            "switch {} misplaced",
            s.node
        );
    }
}

fn sl_map(f: &sm_abi::FabricSnapshot, r: &sm_abi::Routing) -> BTreeMap<(u64, u64), u8> {
    all_sls(f, r)
        .into_iter()
        .map(|(a, b, s)| ((a, b), s))
        .collect()
}

/// Routes, verifies and compares SLs with the pristine fabric.
fn route_and_compare(name: &str, base: &BTreeMap<(u64, u64), u8>, fab: &Fab) -> Result<(), String> {
    let f = fab.snapshot();
    let r = fab.engine().route(&f).map_err(|e| e.to_string())?;
    assert_ok(name, &f, &r);
    // Pairs a failure cut apart (a switch that lost every torus cable
    // keeps its hosts) have no path, so no SL to keep.
    for (a, b, sl) in fab.connected_sls(&f, &r) {
        assert_eq!(base.get(&(a, b)), Some(&sl), "{name}: SL of {:x?} changed", (a, b));
    }
    Ok(())
}

#[test]
fn healthy_tori_and_meshes() {
    let cases: Vec<(Vec<usize>, usize, bool)> = vec![
        (vec![4, 4, 4], 1, false),
        (vec![5, 5, 5], 1, false),
        (vec![6, 6], 2, false),
        (vec![3, 3, 3], 2, false),
        (vec![5, 4], 2, false),
        (vec![4, 2, 2], 1, false),
        (vec![2, 3, 5], 1, false),
        (vec![7, 1, 3], 1, false),
        (vec![4, 4], 2, true),
        (vec![3, 4, 2], 1, true),
    ];
    for (dims, hosts, mesh) in cases {
        let fab = if mesh {
            Fab::mesh(&dims, hosts)
        } else {
            Fab::torus(&dims, hosts)
        };
        let name = format!("{}{:?}", if mesh { "mesh" } else { "torus" }, dims);
        let f = fab.snapshot();
        let eng = fab.engine();
        check_placement(&fab, &f, &eng);
        let r = eng.route(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        let v = assert_ok(&name, &f, &r);
        // DOR on a healthy torus is minimal.
        assert_eq!(v.non_minimal, 0, "{name}");
        assert_eq!(r.vls_used, 8);
        assert!(r.mcast_tree.is_some());
        // SLs use only the dateline bits of wrapped dimensions.
        let wrapped: u8 = (0..dims.len())
            .filter(|&d| !mesh && dims[d] > 2)
            .map(|d| 1 << d)
            .sum();
        for (_, _, sl) in all_sls(&f, &r) {
            assert_eq!(sl & !wrapped, 0, "{name}: SL {sl}");
        }
        // The master tree spans every switch: n-1 links, each given twice.
        let t = r.mcast_tree.clone().into_option().unwrap();
        assert_eq!(t.edges.len(), 2 * (fab.layout.switches.len() - 1), "{name}");
    }
}

#[test]
fn eight_cubed_healthy() {
    let fab = Fab::torus(&[8, 8, 8], 1);
    let (f, r) = fab.route();
    let r = r.unwrap();
    assert_ok("8x8x8", &f, &r);
}

#[test]
fn one_failed_switch_anywhere() {
    for dims in [vec![4, 4, 4], vec![5, 5, 5], vec![6, 6], vec![5, 4]] {
        let pristine = Fab::torus(&dims, 1);
        let (f0, r0) = pristine.route();
        let base = sl_map(&f0, &r0.unwrap());
        let n = pristine.layout.switches.len();
        // A spread of positions, including corners next to the datelines.
        for k in [0, n / 3, n / 2 + 1, n - 1] {
            let c = pristine.layout.switches[k].coord;
            let mut fab = Fab::torus(&dims, 1);
            fab.fail_switch(c);
            let name = format!("{dims:?} switch {c:?} down");
            // The first seed's switch may be the failed one: a second seed
            // with datelines that keep the coordinates takes over.
            fab.backup_seed = true;
            route_and_compare(&name, &base, &fab).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

#[test]
fn switches_adjacent_in_z_are_routed() {
    let pristine = Fab::torus(&[4, 4, 4], 1);
    let (f0, r0) = pristine.route();
    let base = sl_map(&f0, &r0.unwrap());
    let mut fab = Fab::torus(&[4, 4, 4], 1);
    fab.fail_switch([1, 2, 1]);
    fab.fail_switch([1, 2, 2]);
    route_and_compare("4x4x4 two in z", &base, &fab).unwrap();
    let mut fab = Fab::torus(&[4, 4, 4], 1);
    fab.fail_switch([1, 2, 1]);
    fab.fail_switch([1, 3, 1]);
    let e = fab.route().1.unwrap_err().to_string();
    assert!(e.contains("adjacent in the y dimension"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Several failed links on 2D and 3D tori: either routed (reachable,
    /// loop free, same SLs) or refused for one of torus-2QoS's documented
    /// reasons: a ring fell apart, a switch kept too few links to be
    /// placed in the torus (its hosts then cannot be routed), or the links
    /// around the seed are gone so the torus cannot be found from it (no
    /// backup seed here). OpenSM refuses the same.
    #[test]
    fn failed_links(shape in 0usize..3, picks in proptest::collection::vec(any::<u32>(), 1..5)) {
        let dims: Vec<usize> = [vec![4, 4, 4], vec![6, 5], vec![3, 5, 4]][shape].clone();
        let pristine = Fab::torus(&dims, 1);
        let (f0, r0) = pristine.route();
        let base = sl_map(&f0, &r0.unwrap());
        let mut fab = Fab::torus(&dims, 1);
        fab.fail_picked(&[], &picks);
        let name = format!("{dims:?} with {} failed links", picks.len());
        match route_and_compare(&name, &base, &fab) {
            Ok(()) => {}
            Err(e) => prop_assert!(
                e.contains("disjoint segments")
                    || e.contains("could not be placed")
                    || e.contains("topology discovery failed for every seed"),
                "{}: {}",
                name,
                e
            ),
        }
    }
}

/// The case proptest found: on a 6x5 torus three failed links leave
/// (1,2) with one torus link; it cannot be placed, and the refusal names
/// it and its hosts.
#[test]
fn a_switch_left_with_one_link_is_refused_naming_it() {
    let mut fab = Fab::torus(&[6, 5], 1);
    fab.fail_picked(&[], &[1749796102, 4129388373, 3354738570]);
    let e = fab.route().1.unwrap_err().to_string();
    assert!(e.contains("could not be placed") && e.contains("sw-1-2"), "{e}");
    assert!(e.contains("end port(s) hang off switches outside the torus"), "{e}");
}

#[test]
fn one_failed_link_is_always_routed() {
    for dims in [vec![4, 4, 4], vec![5, 3]] {
        let pristine = Fab::torus(&dims, 1);
        let (f0, r0) = pristine.route();
        let base = sl_map(&f0, &r0.unwrap());
        for (a, b) in pristine.cables().into_iter().step_by(7) {
            let mut fab = Fab::torus(&dims, 1);
            fab.topo.links.retain(|l| !(l.a == a && l.b == b));
            route_and_compare(&format!("{dims:?} {a:?}-{b:?}"), &base, &fab).unwrap();
        }
    }
}

#[test]
fn seed_elsewhere_with_datelines_gives_the_same_coordinates() {
    let fab = Fab::torus(&[5, 6, 3], 1);
    let g = |c: [usize; 3]| fab.layout.at(c).unwrap().guid;
    let (o, xp, ym, zp) = (g([2, 1, 1]), g([3, 1, 1]), g([2, 0, 1]), g([2, 1, 2]));
    let text = format!(
        "torus 5 6 3\nxp_link {o:#x} {xp:#x}\nym_link {o:#x} {ym:#x}\nzp_link {o:#x} {zp:#x}\nx_dateline -2\ny_dateline -1\nz_dateline -1\n"
    );
    let eng = Torus2Qos::with_conf(TorusConf::parse(&text, "d.conf").unwrap());
    let f = fab.snapshot();
    check_placement(&fab, &f, &eng);
    let r = eng.route(&f).unwrap();
    let r0 = fab.engine().route(&f).unwrap();
    assert_eq!(
        all_sls(&f, &r),
        all_sls(&f, &r0),
        "same datelines, same SLs"
    );
}

#[test]
fn next_seed_is_used_when_the_first_seed_switch_failed() {
    let mut fab = Fab::torus(&[5, 5], 1);
    let g = |c: [usize; 3]| fab.layout.at(c).unwrap().guid;
    let (a, b) = (g([2, 2, 0]), g([3, 2, 0]));
    let (c, d) = (g([2, 3, 0]), g([2, 2, 0]));
    let text = format!(
        "torus 5 5 1\nxp_link {:#x} {:#x}\nyp_link {:#x} {:#x}\nnext_seed\nxp_link {a:#x} {b:#x}\nym_link {c:#x} {d:#x}\n",
        g([0, 0, 0]),
        g([1, 0, 0]),
        g([0, 0, 0]),
        g([0, 1, 0])
    );
    // Oops-proof: the second seed's links must share a first switch.
    assert!(TorusConf::parse(&text, "n.conf").is_err());
    let text = format!(
        "torus 5 5 1\nxp_link {:#x} {:#x}\nyp_link {:#x} {:#x}\nnext_seed\nxp_link {a:#x} {b:#x}\nyp_link {a:#x} {c:#x}\nx_dateline -2\ny_dateline -2\n",
        g([0, 0, 0]),
        g([1, 0, 0]),
        g([0, 0, 0]),
        g([0, 1, 0])
    );
    let _ = d;
    fab.fail_switch([0, 0, 0]);
    let eng = Torus2Qos::with_conf(TorusConf::parse(&text, "n.conf").unwrap());
    let f = fab.snapshot();
    check_placement(&fab, &f, &eng);
    let r = eng.route(&f).unwrap();
    assert_ok("5x5 seed 2", &f, &r);
}

#[test]
fn radix_four_needs_both_seed_directions() {
    let fab = Fab::torus(&[4, 5], 1);
    let g = |c: [usize; 3]| fab.layout.at(c).unwrap().guid;
    let text = format!(
        "torus 4 5 1\nxp_link {:#x} {:#x}\nyp_link {:#x} {:#x}\n",
        g([0, 0, 0]),
        g([1, 0, 0]),
        g([0, 0, 0]),
        g([0, 1, 0])
    );
    let conf = TorusConf::parse(&text, "r4.conf").unwrap();
    assert!(
        conf.warnings
            .iter()
            .any(|w| w.contains("insufficient seed") && w.contains("radix-4")),
        "{:?}",
        conf.warnings
    );
    // With the generator's conf (both directions) it works.
    let (f, r) = fab.route();
    assert_ok("4x5", &f, &r.unwrap());
}

#[test]
fn parallel_links_round_robin_and_redistribute() {
    // 5x5 torus, 3 hosts per switch; the host on port 5 of (1,0) and of
    // (2,0) make way for a second cable (1,0)[5] - (2,0)[5] beside the +x link.
    let mut fab = Fab::torus(&[5, 5], 3);
    let (a, b) = (fab.node([1, 0, 0]), fab.node([2, 0, 0]));
    fab.topo
        .links
        .retain(|l| !(l.a == (a, 5) || l.b == (a, 5) || l.a == (b, 5) || l.b == (b, 5)));
    fab.topo
        .links
        .push(sm_topology::model::TopoLink::new((a, 5), (b, 5)));
    fab.topo.canonicalize();
    let f = fab.snapshot();
    let r = fab.engine().route(&f).unwrap();
    assert_ok("parallel", &f, &r);
    let lft = r.lfts.iter().find(|l| l.node == a as u32).unwrap();
    // LIDs delivered by (2,0): its management port and hosts on ports 6, 7.
    let mut dest_lids = vec![f.ports[f.nodes[b].first_port as usize].lid];
    for p in [6u8, 7] {
        let port = f.port_of(b as u32, p).unwrap();
        dest_lids.push(f.ports[port.peer as usize].lid);
    }
    let used: Vec<u8> = dest_lids.iter().map(|&l| lft.ports[l as usize]).collect();
    assert_eq!(used, vec![1, 5, 1], "round robin by destination port rank");
    // port_order reverses the hosts' ranks.
    let mut conf = fab.conf();
    conf.port_order = vec![7];
    let r2 = Torus2Qos::with_conf(conf).route(&f).unwrap();
    let lft2 = r2.lfts.iter().find(|l| l.node == a as u32).unwrap();
    let used2: Vec<u8> = dest_lids.iter().map(|&l| lft2.ports[l as usize]).collect();
    assert_eq!(
        used2,
        vec![5, 1, 1],
        "port 7 first, then the management port, then port 6"
    );
    // One of the two fails: everything takes the other.
    fab.fail_port([1, 0, 0], 5);
    let f = fab.snapshot();
    let r = fab.engine().route(&f).unwrap();
    let lft = r.lfts.iter().find(|l| l.node == a as u32).unwrap();
    for &l in &dest_lids {
        assert_eq!(lft.ports[l as usize], 1);
    }
}

#[test]
fn sl2vl_follows_the_qos_rules() {
    let fab = Fab::torus(&[4, 4, 4], 1);
    let (f, r) = fab.route();
    let r = r.unwrap();
    let sw = fab.node([1, 1, 1]) as u32;
    // Port 1 = +x, 3 = +y, 5 = +z, 7 = host.
    for sl in 0..16u8 {
        let q = (sl >> 3) & 1;
        assert_eq!(vl_at(&r, sw, 7, 1, sl), 4 * q + (sl & 1), "x out, SL {sl}");
        assert_eq!(
            vl_at(&r, sw, 1, 3, sl),
            4 * q + ((sl >> 1) & 1),
            "x->y legal"
        );
        assert_eq!(
            vl_at(&r, sw, 3, 1, sl),
            4 * q + 2 + (sl & 1),
            "y->x illegal"
        );
        assert_eq!(
            vl_at(&r, sw, 5, 3, sl),
            4 * q + 2 + ((sl >> 1) & 1),
            "z->y illegal"
        );
        assert_eq!(
            vl_at(&r, sw, 3, 5, sl),
            4 * q + ((sl >> 2) & 1),
            "y->z legal"
        );
        assert_eq!(vl_at(&r, sw, 1, 7, sl), q, "to the host");
    }
    // CA ports: VL 0/1 by QoS level.
    let ca = f.nodes.iter().position(|n| n.kind == NodeKind::Ca).unwrap() as u32;
    let e = r.sl2vl.iter().find(|e| e.node == ca).unwrap();
    assert_eq!(e.vl, [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
}

#[test]
fn configuration_through_toml_and_qos_warnings() {
    let fab = Fab::torus(&[4, 4], 1);
    let dir = std::env::temp_dir().join(format!("torus2qos-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("torus-2QoS.conf");
    std::fs::write(&conf, sm_topology::gen::torus_2qos_conf(&fab.layout)).unwrap();
    let text = format!(
        "lmc = 0\ntorus_config = \"{}\"\nqos_swe_sl2vl = \"0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7\"\nqos_swe_vlarb_low = \"0:64,1:64,2:32,3:64,4:8,5:8,6:8,7:8\"\nunrelated = 3\n",
        conf.display()
    );
    let eng = Torus2Qos::from_config(&text).unwrap();
    let r = eng.route(&fab.snapshot()).unwrap();
    let msgs: Vec<String> = r
        .diagnostics
        .iter()
        .map(|d| d.message.to_string())
        .collect();
    assert!(
        msgs.iter().any(|m| m.contains("qos_swe_sl2vl is ignored")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("unfair across VLs 0-3")),
        "{msgs:?}"
    );
    assert!(
        !msgs.iter().any(|m| m.contains("unfair across VLs 4-7")),
        "{msgs:?}"
    );
    // A second sweep with a switch gone reports the change.
    let mut fab2 = Fab::torus(&[4, 4], 1);
    fab2.fail_switch([2, 2, 0]);
    let r = eng.route(&fab2.snapshot()).unwrap();
    let msgs: Vec<String> = r
        .diagnostics
        .iter()
        .map(|d| d.message.to_string())
        .collect();
    assert!(
        msgs.iter()
            .any(|m| m.contains("moved from (2,2) to unplaced")),
        "{msgs:?}"
    );
    // Errors name the file and line.
    std::fs::write(&conf, "torus 4 4 1\nxp_link 0x1 nonsense\n").unwrap();
    let e = Torus2Qos::from_config(&text).unwrap_err().to_string();
    assert!(e.contains("torus-2QoS.conf:2:"), "{e}");
    let e = Torus2Qos::from_config("torus_config = \"/nonexistent/t.conf\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/t.conf"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn exported_through_the_abi() {
    let module = smcore_torus2qos::__smcore_root_module();
    let list = (module.engines())();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name.as_str(), "torus-2QoS");
    assert!(list[0].deadlock_free);
}

#[test]
fn misconfigured_radix_fails_with_a_reason() {
    let fab = Fab::torus(&[5, 5], 1);
    let mut conf = fab.conf();
    conf.radix = [6, 5, 1];
    let e = Torus2Qos::with_conf(conf).route(&fab.snapshot());
    assert!(e.is_err(), "a 5x5 torus configured as 6x5 must not route");
}

#[test]
fn switches_removed_from_the_fabric() {
    // gen::with_faults drops the switch node itself (as discovery would).
    for (dims, seed) in [
        (vec![4, 4, 4], 1u64),
        (vec![5, 5, 5], 2),
        (vec![6, 6], 3),
        (vec![4, 4, 4], 4),
    ] {
        let pristine = Fab::torus(&dims, 1);
        let (f0, r0) = pristine.route();
        let base = sl_map(&f0, &r0.unwrap());
        let (topo, report) = sm_topology::gen::with_faults(&pristine.topo, 0, 1, seed).unwrap();
        let fab = Fab {
            topo,
            layout: pristine.layout.clone(),
            backup_seed: true,
        };
        let name = format!("{dims:?} without {:?}", report.removed_switches);
        route_and_compare(&name, &base, &fab).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn separate_failed_switches_are_routed_only_without_credit_loops() {
    let pristine = Fab::torus(&[6, 6], 1);
    let (f0, r0) = pristine.route();
    let base = sl_map(&f0, &r0.unwrap());
    for pair in [
        [[1, 1, 0], [4, 4, 0]],
        [[1, 1, 0], [3, 2, 0]],
        [[0, 0, 0], [2, 0, 0]],
    ] {
        let mut fab = Fab::torus(&[6, 6], 1);
        fab.backup_seed = true;
        for c in pair {
            fab.fail_switch(c);
        }
        match route_and_compare(&format!("{pair:?}"), &base, &fab) {
            Ok(()) => eprintln!("{pair:?}: routed"),
            Err(e) => assert!(
                e.contains("separate groups") || e.contains("disjoint"),
                "{pair:?}: {e}"
            ),
        }
    }
}

#[test]
fn lmc_two_routes_every_lid() {
    let fab = Fab::torus(&[4, 4, 3], 1);
    let f = sm_topology::lids::snapshot(&fab.topo, 2).unwrap();
    let r = fab.engine().route(&f).unwrap();
    let v = assert_ok("4x4x3 lmc 2", &f, &r);
    assert_eq!(v.pairs, 48 * 47 * 4);
}

#[test]
fn a_two_dimensional_torus_named_y_and_z() {
    // "torus 1 5 4": the generator's x axis is the conf's y, its y the conf's z.
    let fab = Fab::torus(&[5, 4], 1);
    let g = |c: [usize; 3]| fab.layout.at(c).unwrap().guid;
    let text = format!(
        "torus 1 5 4\nyp_link {o:#x} {:#x}\nzp_link {o:#x} {:#x}\nzm_link {o:#x} {:#x}\n",
        g([1, 0, 0]),
        g([0, 1, 0]),
        g([0, 3, 0]),
        o = g([0, 0, 0])
    );
    let eng = Torus2Qos::with_conf(TorusConf::parse(&text, "yz.conf").unwrap());
    let f = fab.snapshot();
    let t = eng.discover(&f).unwrap();
    for s in &fab.layout.switches {
        let sw = f.switches().position(|n| n as usize == s.node).unwrap();
        assert_eq!(t.coord(t.pos_of[sw]), [0, s.coord[0], s.coord[1]]);
    }
    let r = eng.route(&f).unwrap();
    assert_ok("torus 1 5 4", &f, &r);
    // SL bits are those of y and z (1 and 2).
    assert!(all_sls(&f, &r).iter().all(|&(_, _, sl)| sl & 1 == 0));
    assert!(all_sls(&f, &r).iter().any(|&(_, _, sl)| sl & 4 != 0));
}

#[test]
fn pristine_fast_path_matches_the_decision_matrix() {
    use smcore_torus2qos::{discover, route};
    for (dims, hosts) in [(vec![5, 4, 3], 2), (vec![6, 6], 1), (vec![4, 2, 3], 1)] {
        let fab = Fab::torus(&dims, hosts);
        let f = fab.snapshot();
        let g = smcore_kit::Graph::new(&f);
        let conf = fab.conf();
        let t = discover::discover(&f, &g, &conf).unwrap();
        let router = route::Router::new(&t);
        assert!(router.pristine);
        let dest = route::destination_lids(&f, &g, &conf.port_order);
        let dirs = route::decisions(&t, &router, &g).unwrap();
        let a = route::build_lfts(&f, &g, &t, None, &dest);
        let b = route::build_lfts(&f, &g, &t, Some(&dirs), &dest);
        assert_eq!(a, b, "{dims:?}");
    }
}

/// Found by stressing `failed_links`: the four picks are the four torus
/// cables of (0,3) on a 6x5 torus, whose host then has no path to anyone;
/// the SLs of the pairs that still have one stay as they were.
#[test]
fn a_switch_whose_torus_cables_all_failed_keeps_the_others_sls() {
    let dims = vec![6, 5];
    let (f0, r0) = Fab::torus(&dims, 1).route();
    let base = sl_map(&f0, &r0.unwrap());
    let mut fab = Fab::torus(&dims, 1);
    fab.fail_picked(&[], &[1672562622, 909091412, 2744919043, 2175593384]);
    let (f, r) = fab.route();
    let r = r.unwrap();
    let v = assert_ok("6x5 island", &f, &r);
    assert!(v.disconnected > 0, "the island's host is cut off");
    let kept = fab.connected_sls(&f, &r);
    assert!(kept.len() < all_sls(&f, &r).len() && !kept.is_empty());
    route_and_compare("6x5 island", &base, &fab).unwrap();
}

#[test]
fn switch_cut_off_with_its_hosts_is_left_alone() {
    // All torus cables of (2,2) fail but its host stays: an island, routed around.
    let mut fab = Fab::torus(&[5, 5], 1);
    for dir_port in 1..=4u8 {
        fab.fail_port([2, 2, 0], dir_port);
    }
    let (f, r) = fab.route();
    let r = r.unwrap();
    let v = assert_ok("5x5 island", &f, &r);
    assert!(v.disconnected > 0);
}

#[test]
fn unplaceable_switch_with_hosts_is_refused_with_the_reason() {
    // An extra switch with a host, cabled to a torus switch's host port:
    // it is no torus position, so its host cannot be routed.
    let mut fab = Fab::torus(&[5, 5], 2);
    let a = fab.node([1, 1, 0]);
    let host = fab
        .topo
        .links
        .iter()
        .find(|l| l.b == (a, 6) || l.a == (a, 6))
        .map(|l| if l.a.0 == a { l.b.0 } else { l.a.0 })
        .unwrap();
    fab.topo.links.retain(|l| !(l.a == (a, 6) || l.b == (a, 6)));
    let mut extra = fab.topo.nodes[a].clone();
    extra.node_guid = 0x0002_c900_dead_0000;
    extra.port_guids =
        sm_topology::TopoNode::default_port_guids(extra.kind, extra.node_guid, extra.num_ports);
    extra.name = "S-extra".into();
    extra.desc = "extra".into();
    fab.topo.nodes.push(extra);
    let x = fab.topo.nodes.len() - 1;
    fab.topo
        .links
        .push(sm_topology::TopoLink::new((a, 6), (x, 1)));
    fab.topo
        .links
        .push(sm_topology::TopoLink::new((x, 2), (host, 1)));
    fab.topo.canonicalize();
    let e = fab.route().1.unwrap_err().to_string();
    assert!(
        e.contains("outside the torus") && e.contains("extra"),
        "{e}"
    );
}
