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
