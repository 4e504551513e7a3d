//! Route time on OpenSM's reference case for this engine, a 16-ary 3-tree
//! with 4,096 CAs (768 switches). Ignored by default; run in release:
//! `cargo test --release -p smcore-engine-ftree --test bench -- --ignored --nocapture`.

use std::time::Instant;

use sm_abi::RoutingEngine;
use sm_topology::{gen, lids};
use smcore_ftree::Ftree;

#[test]
#[ignore = "benchmark: run in release"]
fn bench_16_ary_3_tree() {
    let t = gen::kary_ntree(16, 3, 16).unwrap();
    let f = lids::snapshot(&t, 0).unwrap();
    let eng = Ftree::default();
    let mut times = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        let r = eng.route(&f).unwrap_or_else(|e| panic!("{e}"));
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.lfts.len(), 768);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "ftree 16-ary 3-tree (768 switches, 4096 CAs): route median {:.1} ms (min {:.1}, max {:.1}, 7 runs)",
        times[3], times[0], times[6]
    );
    let v = smcore_kit::verify(
        &f,
        &eng.route(&f).unwrap(),
        &smcore_kit::VerifyOptions::default(),
    );
    assert!(v.ok(), "{}", v.failure().unwrap_or_default());
}

/// Route time on the 12-ary 3-tree, pristine and degraded (the
/// walk, then the moves off the busiest links). Ignored by default; run in
/// release: `cargo test --release -p smcore-engine-ftree --test bench degraded -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark: run in release"]
fn bench_12_ary_3_tree_degraded() {
    let base = gen::kary_ntree(12, 3, 12).unwrap();
    let leaf = base.find_node_by_desc("leaf-0").unwrap();
    let mut uplink = base.clone();
    uplink
        .links
        .retain(|l| l.a != (leaf, 13) && l.b != (leaf, 13));
    let spine_node = base.find_node_by_desc("spine-0").unwrap();
    let mut no_spine = base.clone();
    no_spine.links.retain(|l| !l.touches(spine_node));
    for (what, t) in [
        ("pristine", &base),
        ("one leaf uplink removed", &uplink),
        ("spine-0 cut off", &no_spine),
    ] {
        let f = lids::snapshot(t, 0).unwrap();
        let eng = Ftree::default();
        let mut times = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            let r = eng.route(&f).unwrap_or_else(|e| panic!("{what}: {e}"));
            times.push(start.elapsed().as_secs_f64() * 1e3);
            assert!(!r.lfts.is_empty());
        }
        times.sort_by(|a, b| a.total_cmp(b));
        println!(
            "ftree 12-ary 3-tree, {what}: route median {:.1} ms (min {:.1}, max {:.1}, 5 runs)",
            times[2], times[0], times[4]
        );
    }
}
