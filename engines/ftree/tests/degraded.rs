//! Degraded fat trees, routed by ftree itself without a root file: a
//! leaf uplink, a spine, a middle switch missing, a leaf with fewer hosts,
//! random missing cables. Each is routed with every CA pair reached,
//! without a forwarding or credit loop on its one VL, and with its busiest
//! inter-switch link within 1.15 times the pristine tree's (or the least the
//! cables left around a leaf or a subtree force, when that is more). Fabrics that are
//! no longer fat trees are refused with the reason.
//!
//! The 12-ary 3-tree figures (the fabric) run in release:
//! `cargo test --release -p smcore-engine-ftree --test degraded -- --ignored --nocapture`.

mod common;

use common::*;
use sm_abi::{FabricSnapshot, NodeKind, Routing, RoutingEngine, NONE};
use sm_topology::{gen, Topology};
use smcore_ftree::Ftree;
use smcore_kit::verify::{verify, Verification, VerifyOptions};

/// Allowed busiest link against the pristine tree's.
const BOUND: f64 = 1.15;

/// `t` without node `desc` (and its cables).
fn without_node(t: &Topology, desc: &str) -> Topology {
    let gone = t.find_node_by_desc(desc).expect("node");
    let mut out = Topology::new();
    let mut index = vec![usize::MAX; t.nodes.len()];
    for (i, n) in t.nodes.iter().enumerate() {
        if i != gone {
            index[i] = out.nodes.len();
            out.nodes.push(n.clone());
        }
    }
    for l in &t.links {
        if !l.touches(gone) {
            let mut l = *l;
            l.a.0 = index[l.a.0];
            l.b.0 = index[l.b.0];
            out.links.push(l);
        }
    }
    out.canonicalize();
    out
}

/// `t` without the cable on port `port` of node `desc`.
fn without_cable(t: &Topology, desc: &str, port: u8) -> Topology {
    let n = t.find_node_by_desc(desc).expect("node");
    let mut t = t.clone();
    let before = t.links.len();
    t.links.retain(|l| l.a != (n, port) && l.b != (n, port));
    assert_eq!(t.links.len() + 1, before, "{desc} port {port} had no cable");
    t
}

/// `t` with only `keep` hosts left on switch `desc` (the others' cables cut).
fn with_hosts_on(t: &Topology, desc: &str, keep: usize) -> Topology {
    let s = t.find_node_by_desc(desc).expect("switch");
    let mut t = t.clone();
    let mut hosts: Vec<usize> = t
        .links
        .iter()
        .filter_map(|l| match (l.a.0 == s, l.b.0 == s) {
            (true, _) => Some(l.b.0),
            (_, true) => Some(l.a.0),
            _ => None,
        })
        .filter(|&o| t.nodes[o].kind == NodeKind::Ca)
        .collect();
    hosts.sort_unstable();
    let cut: Vec<usize> = hosts.into_iter().skip(keep).collect();
    t.links.retain(|l| !cut.iter().any(|&h| l.touches(h)));
    t
}

fn check(f: &FabricSnapshot, r: &Routing, what: &str) -> Verification {
    let v = verify(
        f,
        r,
        &VerifyOptions {
            credit_loops: true,
            switch_destinations: false,
            max_examples: 4,
        },
    );
    assert!(v.pairs > 0, "{what}: nothing verified");
    assert!(v.ok(), "{what}: {}", v.failure().unwrap_or_default());
    assert_eq!(v.unreachable + v.looping, 0, "{what}");
    assert!(
        v.credit_loops_checked && v.credit_loop.is_none(),
        "{what}: credit loop"
    );
    assert_eq!(v.vls_used, 1, "{what}: more than one VL");
    v
}

/// Level of a generated switch from its description (0 for leaves).
fn level(desc: &str, top: usize) -> usize {
    if desc.starts_with("leaf") {
        0
    } else if let Some(rest) = desc.strip_prefix("agg") {
        rest.split('-')
            .next()
            .and_then(|d| d.parse().ok())
            .expect("agg level")
    } else {
        top
    }
}

/// Least busiest link any routing can have, from cuts: for every switch
/// `x`, the switches whose leaves below all hang below `x` too carry
/// their hosts' routes to (and from) every other host over the cables
/// leaving them. (A leaf alone gives its CA-to-CA routes over its
/// remaining uplinks.)
fn cut_bound(f: &FabricSnapshot) -> u64 {
    use std::collections::BTreeSet;
    let total = f.end_ports().count() as u64;
    let switches: Vec<u32> = f.switches().collect();
    let index = |node: u32| switches.iter().position(|&s| s == node);
    let top = switches
        .iter()
        .map(|&s| level(&f.nodes[s as usize].description, 0))
        .max()
        .unwrap_or(0)
        + 1;
    let lvl: Vec<usize> = switches
        .iter()
        .map(|&s| level(&f.nodes[s as usize].description, top))
        .collect();
    // Per switch: (switch neighbours by cable, hosts).
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); switches.len()];
    let mut hosts = vec![0u64; switches.len()];
    for (i, &s) in switches.iter().enumerate() {
        let n = &f.nodes[s as usize];
        for p in 1..=n.num_ports as u32 {
            let port = &f.ports[(n.first_port + p) as usize];
            if port.peer == NONE {
                continue;
            }
            let other = f.ports[port.peer as usize].node;
            match f.nodes[other as usize].kind {
                NodeKind::Switch => adj[i].extend(index(other)),
                NodeKind::Ca if f.ports[port.peer as usize].lid != 0 => hosts[i] += 1,
                _ => {}
            }
        }
    }
    // Leaves below each switch, going down level by level.
    let mut below: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); switches.len()];
    let mut by_level: Vec<usize> = (0..switches.len()).collect();
    by_level.sort_by_key(|&i| lvl[i]);
    for &i in &by_level {
        if lvl[i] == 0 {
            below[i].insert(i);
            continue;
        }
        let mut set = BTreeSet::new();
        for &j in &adj[i] {
            if lvl[j] < lvl[i] {
                set.extend(below[j].iter().copied());
            }
        }
        below[i] = set;
    }
    let mut bound = 0;
    for x in 0..switches.len() {
        if below[x].is_empty() {
            continue;
        }
        let inside: Vec<bool> = (0..switches.len())
            .map(|y| !below[y].is_empty() && below[y].is_subset(&below[x]))
            .collect();
        let h: u64 = (0..switches.len())
            .filter(|&y| inside[y])
            .map(|y| hosts[y])
            .sum();
        let cables: u64 = (0..switches.len())
            .filter(|&y| inside[y])
            .map(|y| adj[y].iter().filter(|&&z| !inside[z]).count() as u64)
            .sum();
        if h > 0 && cables > 0 {
            bound = bound.max((h * (total - h)).div_ceil(cables));
        }
    }
    bound
}

/// Whether the switches form one piece (hosts left without a switch
/// aside).
fn switches_connected(t: &Topology) -> bool {
    t.connected_components()
        .iter()
        .filter(|c| c.iter().any(|&n| t.nodes[n].is_switch()))
        .count()
        == 1
}

struct Outcome {
    what: String,
    max: u64,
    mean: f64,
    allowed: u64,
    changed: usize,
    /// The engine's note on a degraded tree (walk and moves).
    note: String,
}

/// LFT entries towards CA ports present in both fabrics that differ
/// between two routings (switches and CA ports matched by GUID: the
/// fabrics' LIDs may be numbered differently).
fn changed_entries(fa: &FabricSnapshot, a: &Routing, fb: &FabricSnapshot, b: &Routing) -> usize {
    use std::collections::HashMap;
    let lid_in_a: HashMap<u64, u16> = fa
        .end_ports()
        .map(|p| (fa.ports[p as usize].guid, fa.ports[p as usize].lid))
        .collect();
    let pairs: Vec<(u16, u16)> = fb
        .end_ports()
        .filter_map(|p| {
            let port = &fb.ports[p as usize];
            lid_in_a.get(&port.guid).map(|&la| (la, port.lid))
        })
        .collect();
    let lft_in_a: HashMap<u64, &[u8]> = a
        .lfts
        .iter()
        .map(|l| (fa.nodes[l.node as usize].guid, &l.ports[..]))
        .collect();
    let mut n = 0;
    for lb in b.lfts.iter() {
        let Some(la) = lft_in_a.get(&fb.nodes[lb.node as usize].guid) else {
            continue;
        };
        for &(lid_a, lid_b) in &pairs {
            if la.get(lid_a as usize) != lb.ports.get(lid_b as usize) {
                n += 1;
            }
        }
    }
    n
}

/// Route `t` degraded from `base`: routed, checked, within the bound.
fn degraded_ok(base: &Topology, pristine_max: u64, t: &Topology, what: &str) -> Outcome {
    let fb = snap(base);
    let rb = Ftree::default().route(&fb).expect("pristine");
    let f = snap(t);
    let eng = Ftree::default();
    let r = eng
        .route(&f)
        .unwrap_or_else(|e| panic!("{what}: ftree refused: {e}"));
    let again = eng.route(&f).expect("second routing");
    assert!(
        r.lfts
            .iter()
            .zip(again.lfts.iter())
            .all(|(a, b)| a.ports == b.ports),
        "{what}: two routings of one fabric differ"
    );
    let v = check(&f, &r, what);
    let (max, mean) = v.inter_switch_load(&f);
    let allowed = ((pristine_max.max(cut_bound(&f))) as f64 * BOUND) as u64;
    assert!(
        max <= allowed,
        "{what}: busiest link {max} routes, allowed {allowed} (pristine {pristine_max})"
    );
    Outcome {
        what: what.into(),
        max,
        mean,
        allowed,
        changed: changed_entries(&fb, &rb, &f, &r),
        note: r
            .diagnostics
            .iter()
            .map(|d| d.message.to_string())
            .find(|m| m.contains("degraded fat tree"))
            .map(|m| m[m.find("; busiest").map_or(0, |i| i + 2)..].to_string())
            .unwrap_or_else(|| "pure tree".into()),
    }
}

fn pristine_max(t: &Topology) -> u64 {
    let f = snap(t);
    let r = Ftree::default().route(&f).expect("pristine");
    check(&f, &r, "pristine").inter_switch_load(&f).0
}

/// The events and the brief's others on a k-ary 3-tree.
fn events(k: usize) -> Vec<(String, Topology)> {
    let base = gen::kary_ntree(k, 3, k).unwrap();
    let mut out = vec![
        (
            "one leaf uplink removed".to_string(),
            without_cable(&base, "leaf-0", (k + 1) as u8),
        ),
        (
            "one spine removed".to_string(),
            without_node(&base, "spine-0"),
        ),
        (
            "one level-1 switch removed".to_string(),
            without_node(&base, "agg1-0"),
        ),
        (
            "a leaf with one host".to_string(),
            with_hosts_on(&base, "leaf-3", 1),
        ),
        ("a leaf removed".to_string(), without_node(&base, "leaf-5")),
    ];
    for seed in 1..=3 {
        let (t, _) = gen::with_faults(&base, 4, 0, seed).unwrap();
        if t.is_connected() {
            out.push((format!("4 random cables removed (seed {seed})"), t));
        }
    }
    out
}

fn run_events(k: usize) -> Vec<Outcome> {
    let base = gen::kary_ntree(k, 3, k).unwrap();
    let pm = pristine_max(&base);
    events(k)
        .iter()
        .map(|(what, t)| {
            let o = degraded_ok(&base, pm, t, &format!("{k}-ary 3-tree, {what}"));
            println!(
                "{}: busiest link {} (pristine {pm}, ratio {:.3}, allowed {}), mean {:.1}, CA LFT entries changed {} [{}]",
                o.what,
                o.max,
                o.max as f64 / pm as f64,
                o.allowed,
                o.mean,
                o.changed,
                o.note
            );
            o
        })
        .collect()
}

#[test]
fn degraded_k_ary_3_trees_are_routed_balanced() {
    for k in [4, 6] {
        let outs = run_events(k);
        assert!(outs.len() >= 6, "{k}: too few events");
        // A missing leaf uplink or spine leaves most of the pristine
        // tables as they were (indexed by port position, the tree keeps
        // its pristine order).
        let entries = k * k * 3 * k * k * k;
        for o in outs.iter().take(2) {
            assert!(
                o.changed * 10 <= entries,
                "{}: {} of {entries} CA entries changed",
                o.what,
                o.changed
            );
        }
    }
}

#[test]
#[ignore = "the issue's 12-ary 3-tree (1,728 hosts): run in release"]
fn degraded_12_ary_3_tree_acceptance() {
    let outs = run_events(12);
    // The two events of the issue stay within the bound of the pristine
    // tree itself (no leaf loses more than its fair share there).
    let pm = pristine_max(&gen::kary_ntree(12, 3, 12).unwrap());
    for o in outs.iter().take(2) {
        assert!(
            o.max as f64 <= pm as f64 * BOUND,
            "{}: {} against {pm}",
            o.what,
            o.max
        );
    }
}

#[test]
fn the_walk_alone_overloads_a_degraded_leaf_and_the_moves_fix_it() {
    // On the 6-ary 3-tree without one leaf uplink, the walk sends two
    // destinations of that leaf down one link (twice the pristine load);
    // the engine's note gives the figures before and after the moves.
    let base = gen::kary_ntree(6, 3, 6).unwrap();
    let pm = pristine_max(&base);
    let t = without_cable(&base, "leaf-0", 7);
    let f = snap(&t);
    let r = Ftree::default().route(&f).expect("degraded tree routed");
    let note = r
        .diagnostics
        .iter()
        .map(|d| d.message.to_string())
        .find(|t| t.contains("degraded fat tree"))
        .expect("degraded note");
    let nums: Vec<u64> = note
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    println!("{note}");
    let v = check(&f, &r, "6-ary 3-tree minus a leaf uplink");
    let (max, _) = v.inter_switch_load(&f);
    // "busiest link B CA-to-CA routes after the walk, A after M entries moved"
    let n = nums.len();
    let (before, after, moves) = (nums[n - 3], nums[n - 2], nums[n - 1]);
    assert_eq!(after, max, "{note}");
    assert!(
        before >= 2 * (pm - pm / 10),
        "walk alone: {before}, pristine {pm}"
    );
    assert!(moves > 0 && after < before, "{note}");
}

#[test]
fn fabrics_no_longer_fat_trees_are_refused_with_the_reason() {
    // Two leaves cabled to each other: same rank, linked.
    let mut t = gen::kary_ntree(4, 3, 3).unwrap();
    let a = t.find_node_by_desc("leaf-0").unwrap();
    let b = t.find_node_by_desc("leaf-1").unwrap();
    t.links.push(sm_topology::TopoLink::new((a, 4), (b, 4)));
    t.canonicalize();
    let t = without_cable(&t, "leaf-2", 5);
    let e = Ftree::default().route(&snap(&t)).unwrap_err();
    assert!(e.reason.contains("rank alike"), "{e}");
    assert!(e.reason.contains("no longer a fat tree"), "{e}");

    // A middle switch that lost every uplink hangs below a leaf.
    let mut t = gen::kary_ntree(4, 3, 4).unwrap();
    let agg = t.find_node_by_desc("agg1-0").unwrap();
    t.links.retain(|l| {
        let up = |e: (usize, u8)| e.0 == agg && e.1 > 4;
        !up(l.a) && !up(l.b)
    });
    let e = Ftree::default().route(&snap(&t)).unwrap_err();
    assert!(e.reason.starts_with("ftree: "), "{e}");
    println!("{e}");

    // A switch above two spines only: it ranks as the one root, and the
    // other spines come out level with the leaves counted from it but two
    // levels above them counted from the leaves.
    let mut t = without_cable(&gen::kary_ntree(4, 3, 4).unwrap(), "leaf-0", 5);
    let guid = sm_topology::builder::switch_guid(900);
    let x = t.nodes.len();
    t.nodes.push(sm_topology::TopoNode {
        kind: NodeKind::Switch,
        name: sm_topology::builder::ibnetdiscover_id(NodeKind::Switch, guid),
        desc: "extra".into(),
        num_ports: 8,
        node_guid: guid,
        sys_guid: guid,
        port_guids: sm_topology::TopoNode::default_port_guids(NodeKind::Switch, guid, 8),
    });
    for (i, spine) in ["spine-0", "spine-1"].iter().enumerate() {
        let s = t.find_node_by_desc(spine).unwrap();
        t.links
            .push(sm_topology::TopoLink::new((x, i as u8 + 1), (s, 5)));
    }
    t.canonicalize();
    let e = Ftree::default().route(&snap(&t)).unwrap_err();
    assert!(
        e.reason.contains("cannot be determined consistently"),
        "{e}"
    );
    println!("{e}");
}

#[test]
fn random_faults_are_routed_within_the_bound_or_refused_with_the_reason() {
    let (mut routed, mut refused, mut pure) = (0, 0, 0);
    let mut seed = 100u64;
    for (k, n) in [(2, 3), (3, 3), (4, 2), (4, 3), (2, 4), (6, 2), (3, 4)] {
        let base = gen::kary_ntree(k, n, k).unwrap();
        let pm = pristine_max(&base);
        for (links, switches) in [(1, 0), (2, 0), (4, 0), (0, 1), (1, 1), (3, 2)] {
            for _ in 0..3 {
                seed += 1;
                let Ok((t, _)) = gen::with_faults(&base, links, switches, seed) else {
                    continue;
                };
                if !switches_connected(&t) {
                    // A part cut off from the subnet manager's is not in
                    // its snapshot at all; here its hosts would keep LIDs.
                    continue;
                }
                let what =
                    format!("{k}-ary {n}-tree -{links} links -{switches} switches seed {seed}");
                let f = snap(&t);
                match Ftree::default().route(&f) {
                    Ok(r) => {
                        let v = check(&f, &r, &what);
                        if !r
                            .diagnostics
                            .iter()
                            .any(|d| d.message.contains("degraded fat tree"))
                        {
                            // Still a pure tree (every switch of a rank lost
                            // alike): OpenSM's walk, as pinned.
                            pure += 1;
                            continue;
                        }
                        let (max, _) = v.inter_switch_load(&f);
                        // A move shifts one switch's whole flow to a
                        // destination, a leaf's hosts at least: one such
                        // granule above the bound is allowed (small trees).
                        let allowed = (pm.max(cut_bound(&f)) as f64 * BOUND) as u64 + k as u64;
                        println!("{what}: busiest {max}, pristine {pm}, allowed {allowed}");
                        assert!(
                            max <= allowed,
                            "{what}: busiest link {max}, allowed {allowed}"
                        );
                        routed += 1;
                    }
                    Err(e) => {
                        println!("{what}: refused: {e}");
                        assert!(e.reason.starts_with("ftree: "), "{what}: {e}");
                        assert!(
                            e.reason.contains("no longer a fat tree")
                                || e.reason.contains("up/down rules")
                                || e.reason.contains("leaf rank")
                                || e.reason.contains("level(s) of switches")
                                || e.reason.contains("fewer than two leaf"),
                            "{what}: refused without saying why it is no fat tree: {e}"
                        );
                        refused += 1;
                    }
                }
            }
        }
    }
    println!("routed {routed} degraded, {pure} pure, refused {refused}");
    assert!(
        routed >= 60,
        "only {routed} degraded trees routed ({pure} pure, {refused} refused)"
    );
}
