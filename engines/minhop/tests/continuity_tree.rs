//! Continuity on the 12-ary 3-tree (432 switches, 1,728 hosts): one leaf
//! uplink down, then one spine switch down, each after the healthy
//! routing. The re-route continued from the routing in force against the
//! one from scratch: LFT entries changed and busiest link (end-port →
//! end-port routes, as the verifier counts them).
//!
//! `cargo test --release -p smcore-engine-minhop --test continuity_tree -- --ignored --nocapture`
//! prints the figures; it is ignored by default for its run time.

use smcore_kit::churn::{measure, tree_faults};
use smcore_minhop::MinHop;

#[test]
#[ignore = "routes the 12-ary 3-tree six times"]
fn one_leaf_uplink_and_one_spine_down_on_the_12_ary_3_tree() {
    let healthy =
        sm_topology::lids::snapshot(&sm_topology::gen::kary_ntree(12, 3, 12).expect("12-ary 3-tree"), 0).expect("LIDs");
    let (leaf_down, spine_down) = tree_faults(&healthy);
    for (engine, name) in [(MinHop::balanced(), "minhop-balanced"), (MinHop::default(), "minhop")] {
        for (what, f) in [("one leaf uplink down", &leaf_down), ("one spine switch down", &spine_down)] {
            let c = measure(what, &healthy, f, &engine, name);
            assert!(c.changed < c.scratch_changed, "{what}, {name}: {c:?}");
            assert!(c.busiest <= c.scratch_busiest, "{what}, {name}: {c:?}");
        }
    }
}
