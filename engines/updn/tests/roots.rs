//! updn roots: OpenSM's detection from the CA hop histogram, the root GUID
//! file (switch or CA GUIDs, bad lines skipped with warnings), and the
//! failures the chain relies on.

mod common;

use common::{guids_of, pairs_without_legal_path, scratch_file, switches_named};
use sm_abi::{FabricSnapshot, Level, Routing, RoutingEngine};
use sm_topology::{gen, lids, TopologyBuilder};
use smcore_kit::graph::Graph;
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_updn::{rank, roots, UpDn, UpDnConfig};

fn kary(k: usize, n: usize) -> FabricSnapshot {
    lids::snapshot(&gen::kary_ntree(k, n, k).unwrap(), 0).unwrap()
}

fn assert_clean(f: &FabricSnapshot, r: &Routing) {
    let v = verify(f, r, &VerifyOptions::default());
    assert!(v.ok(), "{:?}", v.failure());
    assert!(v.pairs > 0);
}

fn messages(r: &Routing, level: Level) -> Vec<String> {
    r.diagnostics.iter().filter(|d| d.level == level).map(|d| d.message.to_string()).collect()
}

fn with_file(text: &str, name: &str) -> UpDn {
    UpDn::new(UpDnConfig { root_guid_file: Some(scratch_file(name, text)), ..Default::default() })
}

#[test]
fn detection_picks_the_top_level_of_k_ary_n_trees() {
    for (k, n) in [(4, 3), (2, 4), (3, 3), (8, 2), (2, 2)] {
        let f = kary(k, n);
        let g = Graph::new(&f);
        let mut found = roots::detect(&f, &g);
        found.sort_unstable();
        assert_eq!(found, switches_named(&f, &g, "spine"), "{k}-ary {n}-tree");
    }
}

#[test]
fn detection_finds_nothing_on_tori_and_the_engine_says_why() {
    let f = lids::snapshot(&gen::torus(&[4, 4], 2, false).unwrap().0, 0).unwrap();
    let g = Graph::new(&f);
    assert!(roots::detect(&f, &g).is_empty());
    let e = UpDn::default().route(&f).unwrap_err();
    assert!(e.reason.starts_with("updn: no root switches"), "{e}");
    assert!(e.reason.contains("root_guid_file"), "{e}");
}

#[test]
fn detected_roots_are_reported() {
    let f = kary(4, 3);
    let r = UpDn::default().route(&f).unwrap();
    assert_clean(&f, &r);
    let info = messages(&r, Level::Info).join("\n");
    assert!(info.contains("16 roots") && info.contains("detected from the CA hop histogram"), "{info}");
}

#[test]
fn root_file_with_bad_lines_warns_and_still_routes() {
    let f = kary(4, 3);
    let spines = guids_of(&f, "spine");
    let mut text = String::from("# top level\n\nnot-a-guid\n0xdeadbeef   # not in this fabric\n");
    for g in &spines[..2] {
        text.push_str(&format!("0x{g:016x}\n"));
    }
    text.push_str("0x12zz\n");
    let r = with_file(&text, "bad-lines").route(&f).unwrap();
    assert_clean(&f, &r);
    let warns = messages(&r, Level::Warn);
    assert_eq!(warns.len(), 3, "{warns:?}");
    assert!(warns.iter().any(|w| w.contains(":3:") && w.contains("not-a-guid")), "{warns:?}");
    assert!(warns.iter().any(|w| w.contains(":7:") && w.contains("0x12zz")), "{warns:?}");
    assert!(
        warns.iter().any(|w| w.contains("0x00000000deadbeef") && w.contains("not a node or port GUID")),
        "{warns:?}"
    );
    let info = messages(&r, Level::Info).join("\n");
    assert!(info.contains("2 roots"), "{info}");
}

#[test]
fn spines_given_as_roots_route_minimally() {
    for (k, n) in [(4, 3), (2, 4), (3, 3)] {
        let f = kary(k, n);
        let text: String = guids_of(&f, "spine").iter().map(|g| format!("{g:#x}\n")).collect();
        let r = with_file(&text, &format!("spines-{k}-{n}")).route(&f).unwrap();
        let v = verify(&f, &r, &VerifyOptions::default());
        assert!(v.ok(), "{:?}", v.failure());
        assert_eq!(v.non_minimal, 0, "{k}-ary {n}-tree");
    }
}

#[test]
fn a_ca_guid_stands_for_its_switch() {
    let f = kary(4, 2);
    let g = Graph::new(&f);
    // The first host hangs off leaf-0; a port GUID works as well as the
    // node GUID.
    let host = f.end_ports().next().unwrap();
    let port_guid = f.ports[host as usize].guid;
    let leaf = f.nodes[f.ports[f.ports[host as usize].peer as usize].node as usize].guid;
    for guid in [f.nodes[f.ports[host as usize].node as usize].guid, port_guid] {
        let engine = UpDn::default().with_root_guids(vec![guid]);
        let (found, notes) = engine.roots(&f, &g).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(f.nodes[g.switch_nodes[found[0] as usize] as usize].guid, leaf);
        assert!(notes.0.iter().any(|(_, m)| m.contains("stands for its switch")), "{:?}", notes.0);
        let r = engine.route(&f).unwrap();
        assert_clean(&f, &r);
    }
}

#[test]
fn a_root_file_naming_nothing_in_the_fabric_fails() {
    let f = kary(4, 2);
    let e = with_file("0x1234\n0x5678\n", "nothing").route(&f).unwrap_err();
    assert!(e.reason.contains("no root switches") && e.reason.contains("none of the 2 GUIDs"), "{e}");
}

#[test]
fn an_unreadable_root_file_falls_back_to_detection_with_a_warning() {
    let f = kary(4, 2);
    let engine = UpDn::new(UpDnConfig { root_guid_file: Some("/nonexistent/roots".into()), ..Default::default() });
    let r = engine.route(&f).unwrap();
    assert_clean(&f, &r);
    let warns = messages(&r, Level::Warn).join("\n");
    assert!(warns.contains("/nonexistent/roots") && warns.contains("detecting roots"), "{warns}");
    // Where detection finds nothing either, the reason names both.
    let t = lids::snapshot(&gen::torus(&[3, 3], 1, false).unwrap().0, 0).unwrap();
    let e = engine.route(&t).unwrap_err();
    assert!(e.reason.contains("/nonexistent/roots") && e.reason.contains("no root switches"), "{e}");
}

#[test]
fn roots_without_a_common_upward_path_fail_with_the_reason() {
    // leaf-a - r1 - mid - r2 - leaf-b: with r1 and r2 both roots, mid is
    // below both, so leaf-a can climb to r1 only and leaf-b is not below r1.
    let mut b = TopologyBuilder::new();
    let names = ["leaf-a", "r1", "mid", "r2", "leaf-b"];
    let sw: Vec<usize> = names.iter().map(|n| b.add_switch(*n, 4).unwrap()).collect();
    for i in 0..4 {
        b.link((sw[i], 1), (sw[i + 1], 2)).unwrap();
    }
    for (i, &s) in sw.iter().enumerate() {
        let h = b.add_ca(format!("host-{i}"), 1).unwrap();
        b.link((h, 1), (s, 3)).unwrap();
    }
    let f = lids::snapshot(&b.finish().unwrap(), 0).unwrap();
    let g = Graph::new(&f);
    let roots = [guids_of(&f, "r1")[0], guids_of(&f, "r2")[0]];
    let e = UpDn::default().with_root_guids(roots.to_vec()).route(&f).unwrap_err();
    assert!(e.reason.contains("without a legal route"), "{e}");
    assert!(e.reason.contains("leaf-a") || e.reason.contains("leaf-b"), "{e}");
    let sws: Vec<_> = ["r1", "r2"].iter().map(|n| switches_named(&f, &g, n)[0]).collect();
    assert!(pairs_without_legal_path(&f, &g, &rank::updn(&f, &g, &sws)) > 0);
    // One root always works.
    let r = UpDn::default().with_root_guids(vec![roots[0]]).route(&f).unwrap();
    assert_clean(&f, &r);
}

#[test]
fn roots_cabled_in_a_ring_stay_connected_and_loop_free() {
    // Four roots in a ring (OpenSM would let traffic run round it both
    // ways), each with a leaf below it: every pair must be reachable and
    // the ring must not close a credit loop.
    let mut b = TopologyBuilder::new();
    let roots: Vec<usize> = (0..4).map(|i| b.add_switch(format!("root-{i}"), 6).unwrap()).collect();
    let leaves: Vec<usize> = (0..4).map(|i| b.add_switch(format!("leaf-{i}"), 6).unwrap()).collect();
    for i in 0..4 {
        b.link((roots[i], 1), (roots[(i + 1) % 4], 2)).unwrap();
        b.link((roots[i], 3), (leaves[i], 1)).unwrap();
        for h in 0..2 {
            let host = b.add_ca(format!("host-{i}-{h}"), 1).unwrap();
            b.link((host, 1), (leaves[i], 2 + h as u8)).unwrap();
        }
    }
    let f = lids::snapshot(&b.finish().unwrap(), 0).unwrap();
    let r = UpDn::default().with_root_guids(guids_of(&f, "root")).route(&f).unwrap();
    assert_clean(&f, &r);
}

#[test]
fn routing_order_file_routes_its_ports_first() {
    // On a leaf, the first destination routed takes the first up port in
    // scan order; naming a far host first gives it that port everywhere.
    let f = kary(4, 2);
    let g = Graph::new(&f);
    let last_host = f.end_ports().last().unwrap();
    let port = &f.ports[last_host as usize];
    let own_leaf = f.ports[port.peer as usize].node;
    let order = scratch_file("order", &format!("bad line\n{:#x}\n", port.guid));
    let engine = UpDn::new(UpDnConfig {
        unicast: smcore_updn::UnicastFiles { guid_routing_order_file: Some(order), ..Default::default() },
        ..Default::default()
    });
    let r = engine.route(&f).unwrap();
    assert_clean(&f, &r);
    assert!(messages(&r, Level::Warn).iter().any(|w| w.contains("bad")));
    for leaf in switches_named(&f, &g, "leaf") {
        let node = g.switch_nodes[leaf as usize];
        if node == own_leaf {
            continue;
        }
        let first_up = g.sw_ports[leaf as usize].iter().find(|l| l.peer_sw != sm_abi::NONE).unwrap().port;
        let lft = r.lfts.iter().find(|l| l.node == node).unwrap();
        assert_eq!(lft.ports[port.lid as usize], first_up);
    }
}

#[test]
fn bad_configuration_is_an_error() {
    let e = UpDn::from_config("root_guid_file = 3").unwrap_err();
    assert!(e.reason.starts_with("updn: bad configuration"), "{e}");
    assert!(UpDn::from_config("root_guid_file = \"/etc/opensm/roots\"\nlmc = 2\n").is_ok());
}

#[test]
fn unicast_manager_options_reach_updn() {
    // port_shifting changes which up port a leaf gives some hosts, and the
    // routing stays clean; the ids file is read, its bad lines named.
    let f = kary(4, 2);
    let plain = UpDn::default().route(&f).unwrap();
    let shifted = UpDn::from_config("port_shifting = true").unwrap().route(&f).unwrap();
    assert_clean(&f, &shifted);
    assert_ne!(plain.lfts, shifted.lfts, "port_shifting must change some entries");
    let spine = f.nodes.iter().find(|n| n.description.as_str().starts_with("spine")).unwrap().guid;
    let ids = scratch_file("ids", &format!("{spine:#x} 0x10\n{spine:#x} nope\n0xdead 3\n"));
    let engine = UpDn::from_config(&format!("ids_guid_file = {:?}", ids.display().to_string())).unwrap();
    let r = engine.route(&f).unwrap();
    assert_clean(&f, &r);
    let warns = messages(&r, Level::Warn);
    assert!(warns.iter().any(|w| w.contains(":2: bad id `nope`")), "{warns:?}");
    assert!(warns.iter().any(|w| w.contains(":3: switch 0x000000000000dead not in the fabric")), "{warns:?}");
}
