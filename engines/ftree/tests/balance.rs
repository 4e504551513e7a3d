//! On complete fat trees every inter-switch link between two levels
//! carries the same number of CA-to-CA routes in each direction (so on
//! two-level trees max = mean over all inter-switch links; deeper trees
//! carry less per link higher up, as every link does in a k-ary n-tree),
//! and every route is a shortest path.

mod common;

use std::collections::BTreeMap;

use sm_abi::NodeKind;

use common::{route_ok, snap};
use sm_topology::gen;
use smcore_ftree::Ftree;

/// Level of a generated switch from its description: 0 for leaves.
fn level(desc: &str) -> usize {
    if desc.starts_with("leaf") {
        0
    } else if let Some(rest) = desc.strip_prefix("agg") {
        rest.split('-')
            .next()
            .and_then(|d| d.parse().ok())
            .expect("agg level")
    } else {
        assert!(desc.starts_with("spine"), "unexpected switch {desc}");
        usize::MAX
    }
}

fn assert_balanced(name: &str, t: &sm_topology::Topology) {
    let f = snap(t);
    let (_, v) = route_ok(&Ftree::default(), &f, name);
    let (max, mean) = v.inter_switch_load(&f);
    // (lower level, upward?) -> loads of the directed links.
    let mut classes: BTreeMap<(usize, bool), Vec<u64>> = BTreeMap::new();
    for (i, p) in f.ports.iter().enumerate() {
        if p.peer == sm_abi::NONE {
            continue;
        }
        let (a, b) = (
            &f.nodes[p.node as usize],
            &f.nodes[f.ports[p.peer as usize].node as usize],
        );
        if a.kind != NodeKind::Switch || b.kind != NodeKind::Switch {
            continue;
        }
        let (la, lb) = (level(&a.description), level(&b.description));
        classes
            .entry((la.min(lb), la < lb))
            .or_default()
            .push(v.port_load[i]);
    }
    println!("{name}: max {max} mean {mean:.2} hops {:.3}", v.avg_hops());
    assert!(max > 0, "{name}: no inter-switch load");
    for ((lower, up), loads) in &classes {
        let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        let dir = if *up { "up" } else { "down" };
        assert_eq!(
            lo, hi,
            "{name}: links {dir} from level {lower} carry {lo} to {hi} routes"
        );
    }
    if classes.len() == 2 {
        assert_eq!(
            max as f64, mean,
            "{name}: busiest link carries {max} routes, mean {mean}"
        );
    }
    assert_eq!(
        v.non_minimal, 0,
        "{name}: {} pairs not on a shortest path",
        v.non_minimal
    );
}

#[test]
fn kary_ntrees_are_perfectly_balanced() {
    for (k, n) in [
        (2, 2),
        (2, 3),
        (2, 4),
        (3, 2),
        (3, 3),
        (4, 2),
        (4, 3),
        (6, 2),
        (8, 2),
        (5, 3),
    ] {
        assert_balanced(
            &format!("{k}-ary-{n}-tree"),
            &gen::kary_ntree(k, n, k).unwrap(),
        );
    }
}

#[test]
fn full_two_level_trees_are_perfectly_balanced() {
    // leaves, spines, hosts per leaf, uplinks per leaf (hosts = uplinks,
    // uplinks a multiple of the spines: full bisection, some with parallel links).
    for (l, s, h, u) in [
        (6, 3, 3, 3),
        (4, 2, 4, 4),
        (8, 4, 8, 8),
        (12, 6, 6, 6),
        (8, 6, 12, 12),
    ] {
        assert_balanced(
            &format!("fat-tree-{l}x{s}-h{h}-u{u}"),
            &gen::fat_tree_2level(l, s, h, u).unwrap(),
        );
    }
}

#[test]
fn oversubscribed_trees_spread_evenly_over_the_uplinks() {
    // 2:1 and 3:1: fewer uplinks than hosts, still every uplink equally loaded.
    for (l, s, ports, ratio) in [(6, 2, 12, (2, 1)), (8, 4, 16, (3, 1)), (4, 4, 12, (2, 1))] {
        let t = gen::fat_tree_2level_oversubscribed(l, s, ports, ratio).unwrap();
        assert_balanced(&format!("fat-tree-{l}x{s}-{}to{}", ratio.0, ratio.1), &t);
    }
}
