//! Properties of `minhop-balanced` (OpenSM's Min Hop greedy followed by the
//! kit's balancing pass) on random fabrics and random numberings:
//!
//! * every path stays a shortest path and every LID stays reachable;
//! * the busiest inter-switch link never carries more routes than under
//!   the greedy alone;
//! * renumbering the LIDs (the nodes in another order) changes no link's
//!   load: the pass ranks destinations by routing order and switches by
//!   GUID, never by LID or index;
//! * whatever the numbering (GUIDs shuffled, so OpenSM's routing order and
//!   its port ties change), the result is a local optimum: no single LFT
//!   entry moved to another least-hop port gives a less loaded busiest
//!   link (checked by brute force on small fabrics);
//! * with LMC, an end port's LIDs leave every switch through at least as
//!   many distinct ports as the greedy gave them.

use std::collections::BTreeMap;

use proptest::prelude::*;
use sm_abi::{FabricSnapshot, Lft, NodeKind, Routing, RoutingEngine, NONE};
use sm_topology::lids;
use smcore_kit::renumber::{guids_dealt, nodes_reordered};
use smcore_kit::strategy::{any_family, random_fabrics, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_kit::Graph;
use smcore_minhop::MinHop;

fn fast() -> VerifyOptions {
    VerifyOptions { credit_loops: false, ..Default::default() }
}

fn greedy(f: &FabricSnapshot) -> Routing {
    MinHop::default().route(f).expect("minhop routes")
}

fn balanced(f: &FabricSnapshot) -> Routing {
    MinHop::balanced().route(f).expect("minhop-balanced routes")
}

fn max_load(f: &FabricSnapshot, r: &Routing) -> u64 {
    verify(f, r, &fast()).inter_switch_load(f).0
}

/// Routes per directed inter-switch link, keyed by (switch GUID, port).
fn loads_by_link(f: &FabricSnapshot, r: &Routing) -> BTreeMap<(u64, u8), u64> {
    let v = verify(f, r, &fast());
    let mut out = BTreeMap::new();
    for (i, p) in f.ports.iter().enumerate() {
        let node = &f.nodes[p.node as usize];
        if p.peer == NONE || node.kind != NodeKind::Switch {
            continue;
        }
        if f.nodes[f.ports[p.peer as usize].node as usize].kind != NodeKind::Switch {
            continue;
        }
        out.insert((node.guid, p.num), v.port_load.get(i).copied().unwrap_or(0));
    }
    out
}

fn complete_minimal_and_no_busier(f: &FabricSnapshot) -> Result<u64, TestCaseError> {
    let r = balanced(f);
    let v = verify(f, &r, &fast());
    prop_assert_eq!(v.unreachable, 0, "{:?}", v.examples);
    prop_assert_eq!(v.looping, 0);
    prop_assert_eq!(v.non_minimal, 0);
    prop_assert_eq!(v.total_hops, v.total_min_hops);
    let g = verify(f, &greedy(f), &fast());
    // The greedy's reachability is the fabric's: the pass loses nothing.
    prop_assert_eq!(v.pairs, g.pairs);
    let (bal, _) = v.inter_switch_load(f);
    let (gr, _) = g.inter_switch_load(f);
    prop_assert!(bal <= gr, "balanced busiest link {} > greedy {}", bal, gr);
    Ok(bal)
}

/// Every way of moving one switch's route to one end-port LID onto
/// another least-hop port leaves the busiest link at least as busy.
fn no_single_move_helps(f: &FabricSnapshot, r: &Routing) -> Result<(), TestCaseError> {
    let m = max_load(f, r);
    if m == 0 {
        return Ok(());
    }
    let g = Graph::new(f);
    let dist = g.distance_matrix();
    for (si, lft) in r.lfts.iter().enumerate() {
        let s = g.sw_of_node[lft.node as usize];
        prop_assert_eq!(s as usize, si);
        for &ep in &g.end_ports {
            let t = g.entry_switch(f, ep);
            if t == NONE || t == s || dist.get(s, t) == u8::MAX {
                continue;
            }
            let p = &f.ports[ep as usize];
            for lid in p.lid as usize..p.lid as usize + p.lid_count() as usize {
                let cur = lft.ports[lid];
                for l in &g.sw_ports[si] {
                    if l.peer_sw == NONE || l.port == cur || dist.get(l.peer_sw, t) + 1 != dist.get(s, t) {
                        continue;
                    }
                    let mut lfts: Vec<Lft> = r.lfts.iter().cloned().collect();
                    lfts[si].ports[lid] = l.port;
                    let after = max_load(f, &Routing::single_vl(lfts));
                    prop_assert!(
                        after >= m,
                        "moving LID {} at switch {} from port {} to {} lowers the busiest link {} -> {}",
                        lid,
                        f.nodes[lft.node as usize].description,
                        cur,
                        l.port,
                        m,
                        after
                    );
                }
            }
        }
    }
    Ok(())
}

/// Distinct output ports an end port's LIDs take at each switch.
fn lmc_spread(f: &FabricSnapshot, r: &Routing) -> Vec<usize> {
    let g = Graph::new(f);
    let mut out = Vec::new();
    for lft in &r.lfts {
        for &ep in &g.end_ports {
            let p = &f.ports[ep as usize];
            let mut ports: Vec<u8> =
                (p.lid as usize..p.lid as usize + p.lid_count() as usize).map(|l| lft.ports[l]).collect();
            ports.sort_unstable();
            ports.dedup();
            out.push(ports.len());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn complete_minimal_and_never_busier_than_the_greedy(drawn in any_family(Sizes::default())) {
        complete_minimal_and_no_busier(&drawn.fabric)?;
    }

    #[test]
    fn renumbering_the_lids_changes_no_link_load(
        drawn in random_fabrics(Sizes::default()),
        seed in any::<u64>(),
    ) {
        let again = lids::snapshot(&nodes_reordered(&drawn.topology, seed), drawn.fabric.lmc).expect("snapshot");
        prop_assert_eq!(loads_by_link(&drawn.fabric, &balanced(&drawn.fabric)), loads_by_link(&again, &balanced(&again)));
        prop_assert_eq!(loads_by_link(&drawn.fabric, &greedy(&drawn.fabric)), loads_by_link(&again, &greedy(&again)));
    }

    #[test]
    fn lmc_lids_keep_their_spread(drawn in random_fabrics(Sizes { lmc: 1..3, ..Sizes::default() })) {
        complete_minimal_and_no_busier(&drawn.fabric)?;
        let g = lmc_spread(&drawn.fabric, &greedy(&drawn.fabric));
        let b = lmc_spread(&drawn.fabric, &balanced(&drawn.fabric));
        prop_assert_eq!(g.len(), b.len());
        for (i, (g, b)) in g.iter().zip(&b).enumerate() {
            prop_assert!(b >= g, "entry {}: the balanced pass narrows an end port's LIDs from {} ports to {}", i, g, b);
        }
    }
}

proptest! {
    // Brute force: every single move re-verified.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_local_optimum_whatever_the_numbering(
        drawn in random_fabrics(Sizes { switches: 2..9, radix: 6..9, hosts: 1..4, extra_links: 0..8, lmc: 0..1, ..Sizes::default() }),
        seed in any::<u64>(),
    ) {
        let f = lids::snapshot(&guids_dealt(&nodes_reordered(&drawn.topology, seed), seed.rotate_left(17)), 0).expect("snapshot");
        complete_minimal_and_no_busier(&f)?;
        no_single_move_helps(&f, &balanced(&f))?;
    }
}

/// On a 4-ary 3-tree the balanced routing reaches the bound no minimal
/// routing beats (each leaf's 4 hosts send to the 60 other hosts over its
/// 4 up-links: 60 routes a link), where OpenSM's greedy has 192; and the
/// brute-force check has teeth: after one move that overloads a link, it
/// finds the move back.
#[test]
fn balanced_is_optimal_on_a_4_ary_3_tree_and_the_check_sees_one_bad_move() {
    let topo = sm_topology::gen::kary_ntree(4, 3, 4).expect("4-ary 3-tree");
    let f = lids::snapshot(&topo, 0).expect("snapshot");
    assert_eq!(max_load(&f, &greedy(&f)), 192);
    let b = balanced(&f);
    assert_eq!(max_load(&f, &b), 60);
    assert!(no_single_move_helps(&f, &b).is_ok());
    let g = Graph::new(&f);
    let dist = g.distance_matrix();
    let lfts: Vec<Lft> = b.lfts.iter().cloned().collect();
    let mut worse = None;
    'search: for (si, lft) in lfts.iter().enumerate() {
        for &ep in &g.end_ports {
            let t = g.entry_switch(&f, ep);
            let s = si as u32;
            if t == s {
                continue;
            }
            let lid = f.ports[ep as usize].lid as usize;
            for l in &g.sw_ports[si] {
                if l.peer_sw == NONE || l.port == lft.ports[lid] || dist.get(l.peer_sw, t) + 1 != dist.get(s, t) {
                    continue;
                }
                let mut moved = lfts.clone();
                moved[si].ports[lid] = l.port;
                let r = Routing::single_vl(moved);
                if max_load(&f, &r) > 60 {
                    worse = Some(r);
                    break 'search;
                }
            }
        }
    }
    let worse = worse.expect("some single move overloads a link");
    assert!(no_single_move_helps(&f, &worse).is_err());
}
