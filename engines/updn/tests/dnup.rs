//! dnup: ranking from the CA switches, for trees with CAs on the spines.

mod common;

use common::{add_hosts, pairs_without_legal_path};
use sm_abi::RoutingEngine;
use sm_topology::{gen, lids};
use smcore_kit::graph::Graph;
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_updn::{rank, DnUp, UpDn};

#[test]
fn tree_with_cas_on_the_spines_routes_without_credit_loops() {
    for (k, per_spine) in [(4, 2), (3, 1), (6, 3)] {
        let mut t = gen::kary_ntree(k, 2, k).unwrap();
        add_hosts(&mut t, "spine", per_spine);
        for lmc in [0, 2] {
            let f = lids::snapshot(&t, lmc).unwrap();
            let r = DnUp::default().route(&f).unwrap();
            let v = verify(&f, &r, &VerifyOptions::default());
            assert!(v.ok(), "{k}-ary tree, lmc {lmc}: {:?}", v.failure());
            assert_eq!(v.non_minimal, 0, "{k}-ary tree, lmc {lmc}");
        }
        // updn's detection finds no root here: every switch sees its own
        // CAs one hop closer than the rest.
        let f = lids::snapshot(&t, 0).unwrap();
        let e = UpDn::default().route(&f).unwrap_err();
        assert!(e.reason.contains("no root switches"), "{e}");
    }
}

#[test]
fn three_level_tree_with_cas_on_the_spines_cannot_be_routed_down_up() {
    // Leaves and spines both carry CAs (lowest rank), the middle level is
    // the top: a route between pods would climb to the middle, descend to
    // a spine and climb again, which the rule forbids (OpenSM's ranking
    // does the same and leaves these pairs unrouted). The engine says so.
    let mut t = gen::kary_ntree(2, 3, 2).unwrap();
    add_hosts(&mut t, "spine", 1);
    let f = lids::snapshot(&t, 0).unwrap();
    let g = Graph::new(&f);
    let e = DnUp::default().route(&f).unwrap_err();
    assert!(e.reason.starts_with("dnup: the up/down rule leaves"), "{e}");
    let leaves = rank::ca_switches(&g);
    assert!(pairs_without_legal_path(&f, &g, &rank::dnup(&f, &g, &leaves)) > 0);
}

#[test]
fn ranks_follow_the_distance_from_the_ca_switches() {
    let f = lids::snapshot(&gen::kary_ntree(2, 4, 2).unwrap(), 0).unwrap();
    let g = Graph::new(&f);
    let o = rank::dnup(&f, &g, &rank::ca_switches(&g));
    for s in 0..g.switch_count() {
        let d = &f.nodes[g.switch_nodes[s] as usize].description;
        let want = if d.starts_with("leaf") {
            0
        } else if d.starts_with("spine") {
            3
        } else {
            d[3..4].parse::<u32>().unwrap()
        };
        assert_eq!(o.rank[s], want, "{d}");
    }
}

#[test]
fn a_fabric_without_cas_is_an_error() {
    let mut b = sm_topology::TopologyBuilder::new();
    let a = b.add_switch("a", 2).unwrap();
    let c = b.add_switch("c", 2).unwrap();
    b.link((a, 1), (c, 1)).unwrap();
    let f = lids::snapshot(&b.finish().unwrap(), 0).unwrap();
    let e = DnUp::default().route(&f).unwrap_err();
    assert!(e.reason.contains("no switch has a CA"), "{e}");
}
