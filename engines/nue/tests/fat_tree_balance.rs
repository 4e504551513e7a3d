//! Balance on k-ary n-trees with several layers.
//!
//! Every CA-to-CA route on a k-ary n-tree can be minimal and up-down, and
//! those routes never form a credit loop, so Nue has no reason to route a
//! fat tree worse than a plain balanced min-hop routing. The reference is
//! the kit's `balance::assign_lfts` (OpenSM's min-hop port balancing) on
//! the same fabric; OpenSM's own nue stays within a few percent of it on
//! the 16-ary 3-tree (6,864 vs a perfectly even 6,656 routes per link).
//!
//! Regression: each layer's escape tree used to fix every one of its turns
//! in the layer's dependency graph, including turns towards subtrees
//! without any of the layer's destinations. With compact layers (one pod
//! each) the tree is rooted below the top, those turns run down and up
//! again in fat-tree terms and blocked most up-down routes, so the routes
//! piled onto a few links (16-ary 3-tree, 8 VLs: max 36,960 against a
//! mean of 3,960).

use sm_abi::{FabricSnapshot, Routing, RoutingEngine};
use sm_topology::{gen, lids};
use smcore_kit::balance::min_hop_lfts;
use smcore_kit::graph::Graph;
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_nue::Nue;

fn tree(k: usize, n: usize) -> FabricSnapshot {
    lids::snapshot(&gen::kary_ntree(k, n, k).unwrap(), 0).unwrap()
}

fn minhop(fabric: &FabricSnapshot) -> Routing {
    Routing::single_vl(min_hop_lfts(fabric))
}

/// Nue's peak routes per inter-switch link is within 25% of min-hop's, its
/// mean equal (all routes minimal), and the result is credit-loop free.
fn check(k: usize, n: usize, vls: u8) {
    let fabric = tree(k, n);
    let reference = verify(&fabric, &minhop(&fabric), &VerifyOptions::default());
    let (ref_max, ref_mean) = reference.inter_switch_load(&fabric);
    let nue = Nue::from_config(&format!("nue_max_num_vls = {vls}")).unwrap();
    let r = nue.route(&fabric).unwrap();
    let v = verify(&fabric, &r, &VerifyOptions::default());
    assert!(v.ok(), "{k}-ary {n}-tree, {vls} VLs: {:?}", v.failure());
    assert!(v.credit_loops_checked);
    let (max, mean) = v.inter_switch_load(&fabric);
    eprintln!("{k}-ary {n}-tree, {vls} VLs: nue max {max} mean {mean:.1}; min-hop max {ref_max} mean {ref_mean:.1}");
    assert!(
        (mean - ref_mean).abs() < 1e-9,
        "{k}-ary {n}-tree, {vls} VLs: nue detours (mean {mean} vs minimal {ref_mean})"
    );
    // No worse than the plain balancer, and at most twice the mean: OpenSM's
    // nue reaches 1.73x the mean on the 16-ary 3-tree with 8 VLs (6,864 /
    // 3,960), this engine 1.68x; funnelling through an escape tree costs a
    // multiple (4.4x on the 4-ary 3-tree with 1 VL, 9.3x on the 16-ary
    // 3-tree with 8 VLs before the fix).
    assert!(
        max <= ref_max && max as f64 <= 2.0 * mean,
        "{k}-ary {n}-tree, {vls} VLs: peak {max} routes on one link (mean {mean}), min-hop peak {ref_max}"
    );
}

#[test]
fn four_ary_3_tree_balanced_with_8_layers() {
    check(4, 3, 8);
}

#[test]
fn four_ary_3_tree_balanced_with_4_layers() {
    check(4, 3, 4);
}

#[test]
fn four_ary_3_tree_balanced_with_1_layer() {
    check(4, 3, 1);
}

#[test]
fn eight_ary_2_tree_balanced_with_8_layers() {
    check(8, 2, 8);
}

#[test]
fn six_ary_3_tree_balanced_with_8_layers() {
    check(6, 3, 8);
}

#[test]
fn eight_ary_3_tree_balanced_with_8_layers() {
    check(8, 3, 8);
}

#[test]
fn eight_ary_3_tree_balanced_with_2_layers() {
    check(8, 3, 2);
}

/// The grown partitioner splits a fat tree's destinations evenly, although
/// most of its switches carry none (the upper levels).
#[test]
fn grown_layers_of_a_fat_tree_are_even() {
    use smcore_nue::partition::{partition, Partitioner};
    for (k, n, parts) in [(8, 3, 8), (4, 3, 4), (6, 3, 3)] {
        let fabric = tree(k, n);
        let g = Graph::new(&fabric);
        let mut weights = vec![0u64; g.switch_count()];
        for &p in &g.end_ports {
            weights[g.entry_switch(&fabric, p) as usize] += 1;
        }
        let (part, used) = partition(&g, &weights, parts, Partitioner::Grown);
        assert_eq!(used, parts);
        let mut load = vec![0u64; used];
        for (s, &w) in weights.iter().enumerate() {
            load[part[s] as usize] += w;
        }
        let (lo, hi) = (load.iter().min().unwrap(), load.iter().max().unwrap());
        // Leaves carry k destinations each: one leaf of slack.
        assert!(
            hi - lo <= k as u64,
            "{k}-ary {n}-tree into {parts}: destinations per layer {load:?}"
        );
    }
}
