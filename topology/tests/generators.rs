//! Structural properties of the generated fabrics.

use std::collections::{BTreeMap, BTreeSet};

use sm_abi::NodeKind;
use sm_topology::gen::{self, Direction};
use sm_topology::{Topology, TopologyError};

fn ok<T>(r: Result<T, TopologyError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Switch-to-switch link count per switch (parallel links count).
fn switch_degree(t: &Topology, s: usize) -> usize {
    t.links_of(s).filter(|l| l.other_end_node(s).is_some_and(|o| t.nodes[o].is_switch())).count()
}

fn host_count(t: &Topology, s: usize) -> usize {
    t.links_of(s).filter(|l| l.other_end_node(s).is_some_and(|o| !t.nodes[o].is_switch())).count()
}

fn switch_neighbors(t: &Topology, s: usize) -> BTreeSet<usize> {
    t.neighbors(s).into_iter().filter(|&o| t.nodes[o].is_switch()).collect()
}

fn by_desc_prefix<'a>(t: &'a Topology, prefix: &'a str) -> impl Iterator<Item = usize> + 'a {
    t.switches().filter(move |&s| t.nodes[s].desc.starts_with(prefix))
}

#[test]
fn kary_ntree_shape() {
    for (k, n) in [(2, 1), (2, 2), (2, 3), (3, 3), (4, 2), (4, 3), (2, 4)] {
        let t = ok(gen::kary_ntree(k, n, k));
        let per_level = k.pow(n as u32 - 1);
        assert_eq!(t.num_switches(), n * per_level, "k={k} n={n}");
        assert_eq!(t.end_nodes().count(), k.pow(n as u32), "k={k} n={n}");
        assert!(t.switches().all(|s| t.nodes[s].num_ports as usize == 2 * k));
        let inter = t
            .links
            .iter()
            .filter(|l| t.nodes[l.a.0].is_switch() && t.nodes[l.b.0].is_switch())
            .count();
        assert_eq!(inter, (n - 1) * per_level * k);
        assert!(t.is_connected());
        for leaf in by_desc_prefix(&t, "leaf-") {
            assert_eq!(host_count(&t, leaf), k);
            assert_eq!(switch_degree(&t, leaf), if n > 1 { k } else { 0 });
            // Hosts on the down ports 1..=k, uplinks on k+1..=2k.
            for l in t.links_of(leaf) {
                let (_, p) = if l.a.0 == leaf { l.a } else { l.b };
                let host = l.other_end_node(leaf).is_some_and(|o| !t.nodes[o].is_switch());
                assert_eq!(host, (p as usize) <= k);
            }
        }
        if n > 1 {
            assert_eq!(by_desc_prefix(&t, "spine-").count(), per_level);
            for s in by_desc_prefix(&t, "spine-") {
                assert_eq!(switch_degree(&t, s), k);
            }
        }
        for s in by_desc_prefix(&t, "agg") {
            assert_eq!(switch_degree(&t, s), 2 * k);
        }
        // A k-ary n-tree joins every switch pair of adjacent levels at most once.
        assert!(t.switches().all(|s| switch_neighbors(&t, s).len() == switch_degree(&t, s)));
    }
}

#[test]
fn kary_ntree_fewer_hosts_and_errors() {
    let t = ok(gen::kary_ntree(4, 2, 1));
    assert_eq!(t.end_nodes().count(), 4);
    assert!(matches!(gen::kary_ntree(4, 2, 5), Err(TopologyError::Generator(_))));
    assert!(gen::kary_ntree(128, 2, 1).is_err(), "256-port switches do not exist");
    assert!(gen::kary_ntree(0, 2, 0).is_err());
}

#[test]
fn fat_tree_2level_shape() {
    let t = ok(gen::fat_tree_2level(4, 2, 4, 2));
    assert_eq!(t.num_switches(), 6);
    assert_eq!(t.end_nodes().count(), 16);
    for leaf in by_desc_prefix(&t, "leaf-") {
        assert_eq!(t.nodes[leaf].num_ports, 6);
        assert_eq!(host_count(&t, leaf), 4);
        assert_eq!(switch_neighbors(&t, leaf).len(), 2, "one uplink to each spine");
    }
    for s in by_desc_prefix(&t, "spine-") {
        assert_eq!(t.nodes[s].num_ports, 4);
        assert_eq!(switch_degree(&t, s), 4);
    }
    assert!(t.is_connected());
}

#[test]
fn fat_tree_parallel_and_uneven_uplinks() {
    // Four uplinks over two spines: two parallel links from each leaf to each spine.
    let t = ok(gen::fat_tree_2level(2, 2, 4, 4));
    for leaf in by_desc_prefix(&t, "leaf-") {
        let mut per_spine: BTreeMap<usize, usize> = BTreeMap::new();
        for l in t.links_of(leaf) {
            if let Some(o) = l.other_end_node(leaf).filter(|&o| t.nodes[o].is_switch()) {
                *per_spine.entry(o).or_default() += 1;
            }
        }
        assert_eq!(per_spine.values().copied().collect::<Vec<_>>(), vec![2, 2]);
    }
    // Fewer uplinks than spines: consecutive leaves share a spine.
    let t = ok(gen::fat_tree_2level(4, 3, 2, 2));
    let degrees: Vec<usize> = by_desc_prefix(&t, "spine-").map(|s| switch_degree(&t, s)).collect();
    assert_eq!(degrees, vec![3, 3, 2]);
    assert_eq!(t.nodes[by_desc_prefix(&t, "spine-").next().expect("spine")].num_ports, 3);
    assert!(t.is_connected());
    assert!(gen::fat_tree_2level(1, 3, 2, 2).is_err(), "a spine would get no link");
    assert!(gen::fat_tree_2level(3, 2, 2, 1).is_err(), "one uplink per leaf splits the fabric");
}

#[test]
fn oversubscription_helper() {
    let t = ok(gen::fat_tree_2level_oversubscribed(2, 4, 36, (2, 1)));
    for leaf in by_desc_prefix(&t, "leaf-") {
        assert_eq!(host_count(&t, leaf), 24);
        assert_eq!(switch_degree(&t, leaf), 12);
    }
    let t = ok(gen::fat_tree_2level_oversubscribed(2, 2, 8, (1, 1)));
    assert_eq!(t.end_nodes().count(), 8);
    assert!(gen::fat_tree_2level_oversubscribed(2, 2, 8, (1, 0)).is_err());
}

fn check_layout(t: &Topology, layout: &gen::TorusLayout) {
    for (i, s) in layout.switches.iter().enumerate() {
        assert_eq!(layout.index(s.coord), Some(i));
        assert_eq!(t.nodes[s.node].node_guid, s.guid);
        for dir in Direction::ALL {
            match (s.ports[dir as usize], s.neighbors[dir as usize]) {
                (Some(p), Some(j)) => {
                    let n = &layout.switches[j];
                    assert_eq!(t.peer(s.node, p), Some((n.node, dir.opposite().port())));
                    assert_eq!(n.neighbors[dir.opposite() as usize], Some(i));
                }
                (None, None) => {
                    // Ports of dimensions the fabric lacks are host ports.
                    if dir.dim() < layout.ndims {
                        assert_eq!(t.peer(s.node, dir.port()), None);
                    }
                }
                other => panic!("inconsistent layout entry {other:?}"),
            }
        }
        for h in 0..layout.hosts_per_switch {
            let (host, port) =
                t.peer(s.node, layout.first_host_port + h as u8).expect("host linked");
            assert_eq!((t.nodes[host].kind, port), (NodeKind::Ca, 1));
        }
    }
}

#[test]
fn torus_2d_and_3d_neighbours() {
    let (t, layout) = ok(gen::torus(&[4, 4], 2, false));
    assert_eq!(t.num_switches(), 16);
    assert_eq!(t.end_nodes().count(), 32);
    for s in t.switches() {
        assert_eq!(switch_degree(&t, s), 4);
        assert_eq!(switch_neighbors(&t, s).len(), 4);
        assert_eq!(t.nodes[s].num_ports, 6);
    }
    check_layout(&t, &layout);
    assert_eq!(layout.at([1, 2, 0]).map(|s| t.nodes[s.node].desc.as_str()), Some("sw-1-2"));

    let (t, layout) = ok(gen::torus(&[3, 3, 3], 1, false));
    for s in t.switches() {
        assert_eq!(switch_neighbors(&t, s).len(), 6);
    }
    check_layout(&t, &layout);
    // Wrap-around: (2,0,0) +x is (0,0,0).
    let i = layout.index([2, 0, 0]).expect("in range");
    assert_eq!(layout.neighbor(i, Direction::XPlus).map(|s| s.coord), Some([0, 0, 0]));
}

#[test]
fn mesh_borders() {
    let (t, layout) = ok(gen::torus(&[3, 4], 1, true));
    let inter =
        t.links.iter().filter(|l| t.nodes[l.a.0].is_switch() && t.nodes[l.b.0].is_switch()).count();
    assert_eq!(inter, 2 * 4 + 3 * 3);
    let degree_at = |c: [usize; 3]| switch_degree(&t, layout.at(c).expect("in range").node);
    assert_eq!(degree_at([0, 0, 0]), 2);
    assert_eq!(degree_at([1, 0, 0]), 3);
    assert_eq!(degree_at([1, 1, 0]), 4);
    assert_eq!(layout.at([2, 0, 0]).map(|s| s.ports[Direction::XPlus as usize]), Some(None));
    check_layout(&t, &layout);
}

#[test]
fn radix_two_torus_uses_parallel_links() {
    let (t, layout) = ok(gen::torus(&[2, 3], 0, false));
    for s in t.switches() {
        assert_eq!(switch_degree(&t, s), 4, "every direction port is cabled");
        assert_eq!(switch_neighbors(&t, s).len(), 3, "x+ and x- reach the same switch");
    }
    check_layout(&t, &layout);
    // In a mesh, radix 2 is one link.
    let (t, _) = ok(gen::torus(&[2, 2], 0, true));
    assert_eq!(t.links.len(), 4);
}

#[test]
fn torus_conf_matches_layout() {
    let (_, layout) = ok(gen::torus(&[4, 3], 1, false));
    let conf = gen::torus_2qos_conf(&layout);
    let origin = layout.at([0, 0, 0]).expect("origin").guid;
    let x1 = layout.at([1, 0, 0]).expect("x1").guid;
    let x3 = layout.at([3, 0, 0]).expect("x3").guid;
    let y1 = layout.at([0, 1, 0]).expect("y1").guid;
    let lines: Vec<&str> = conf.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        vec![
            "torus 4 3 1".to_string(),
            format!("xp_link {origin:#x} {x1:#x}"),
            format!("xm_link {origin:#x} {x3:#x}"),
            format!("yp_link {origin:#x} {y1:#x}"),
        ]
    );
    let (_, layout) = ok(gen::torus(&[2, 2, 2], 20, true));
    let conf = gen::torus_2qos_conf(&layout);
    assert!(conf.contains("mesh 2 2 2\n"));
    assert!(conf.contains("zp_link"));
    assert!(conf.contains("portgroup_max_ports 21\n"));
    assert!(gen::torus(&[4], 1, false).is_err());
    assert!(gen::torus(&[4, 0], 1, false).is_err());
}

#[test]
fn hypercube_shape() {
    let t = ok(gen::hypercube(4, 2));
    assert_eq!(t.num_switches(), 16);
    assert_eq!(t.end_nodes().count(), 32);
    for s in t.switches() {
        assert_eq!(switch_neighbors(&t, s).len(), 4);
        assert_eq!(host_count(&t, s), 2);
    }
    assert!(t.is_connected());
    let t = ok(gen::hypercube(0, 1));
    assert_eq!((t.nodes.len(), t.links.len()), (2, 1));
}

#[test]
fn random_irregular_is_connected_and_bounded() {
    for seed in 0..40 {
        let t = ok(gen::random_irregular(12, 8, 2, 10, seed));
        assert!(t.is_connected(), "seed {seed}");
        assert_eq!(t.links.len(), 11 + 10 + 24);
        for s in t.switches() {
            assert_eq!(host_count(&t, s), 2);
            assert!(switch_degree(&t, s) <= 6);
        }
    }
    // Tight: two switch ports each is just enough for a path.
    let t = ok(gen::random_irregular(30, 3, 1, 0, 7));
    assert!(t.is_connected());
    assert!(gen::random_irregular(3, 2, 1, 0, 1).is_err());
    assert!(
        gen::random_irregular(4, 3, 0, 100, 1).is_err(),
        "not enough ports for the extra links"
    );
}

#[test]
fn random_irregular_is_deterministic_per_seed() {
    let a = ok(gen::random_irregular(20, 10, 3, 15, 42));
    let b = ok(gen::random_irregular(20, 10, 3, 15, 42));
    assert_eq!(a, b);
    let c = ok(gen::random_irregular(20, 10, 3, 15, 43));
    assert_ne!(a.links, c.links);
}

#[test]
fn faults_remove_what_was_asked() {
    let base = ok(gen::fat_tree_2level(4, 4, 4, 4));
    let (t, report) = ok(gen::with_faults(&base, 3, 1, 9));
    assert_eq!(report.removed_switches.len(), 1);
    assert_eq!(report.removed_links.len(), 3);
    assert_eq!(t.num_switches(), base.num_switches() - 1);
    assert_eq!(t.end_nodes().count(), base.end_nodes().count(), "hosts stay");
    assert_eq!(t.links.len(), base.links.len() - report.detached_links - 3);
    assert!(t.find_node(&report.removed_switches[0]).is_none());
    for ((a, pa), (b, pb)) in &report.removed_links {
        let ia = t.find_node(a).expect("still there");
        let ib = t.find_node(b).expect("still there");
        assert!(t.peer(ia, *pa).is_none() && t.peer(ib, *pb).is_none());
        assert_eq!(
            base.peer(base.find_node(a).expect("a"), *pa),
            base.find_node(b).map(|i| (i, *pb))
        );
    }
    assert!(t.validate().is_ok());
    assert_eq!(gen::with_faults(&base, 3, 1, 9).map(|r| r.0).ok(), Some(t));
    assert!(gen::with_faults(&base, 0, 9, 1).is_err());
    assert!(gen::with_faults(&base, 17, 0, 1).is_err());
}

#[test]
fn removing_a_leaf_strands_its_hosts() {
    let base = ok(gen::fat_tree_2level(2, 1, 3, 1));
    // Removing every switch strands every host.
    let (t, report) = ok(gen::with_faults(&base, 0, 3, 0));
    assert_eq!(report.removed_switches.len(), 3);
    assert_eq!(t.num_switches(), 0);
    let comps = gen::connected_components(&t);
    assert_eq!(comps.len(), 6, "every host alone");
    assert!(comps.iter().all(|c| c.len() == 1));
}

#[test]
fn generated_guids_and_ids() {
    let t = ok(gen::fat_tree_2level(2, 1, 1, 1));
    for n in &t.nodes {
        let letter = if n.is_switch() { 'S' } else { 'H' };
        assert_eq!(n.name, format!("{letter}-{:016x}", n.node_guid));
        if !n.is_switch() {
            assert_eq!(n.port_guids[1], n.node_guid + 1);
        }
    }
    assert_eq!(t.nodes[0].kind, NodeKind::Ca, "a host comes first");
}
