//! Continuity on the 12-ary 3-tree with updn and dnup: one leaf uplink
//! down, then one spine switch down, each after the healthy routing; the
//! re-route continued from the routing in force against the one from
//! scratch (LFT entries changed, busiest link).
//!
//! `cargo test --release -p smcore-engine-updn --test continuity_tree -- --ignored --nocapture`
//! prints the figures; it is ignored by default for its run time.

use sm_abi::RoutingEngine;
use smcore_kit::churn::{measure, tree_faults};
use smcore_updn::{DnUp, UpDn};

#[test]
#[ignore = "routes the 12-ary 3-tree six times per engine"]
fn one_leaf_uplink_and_one_spine_down_on_the_12_ary_3_tree() {
    let healthy =
        sm_topology::lids::snapshot(&sm_topology::gen::kary_ntree(12, 3, 12).expect("12-ary 3-tree"), 0).expect("LIDs");
    let (leaf_down, spine_down) = tree_faults(&healthy);
    let engines: [(Box<dyn RoutingEngine>, &str); 2] = [
        (Box::new(UpDn::from_config("").expect("updn")), "updn"),
        (Box::new(DnUp::from_config("").expect("dnup")), "dnup"),
    ];
    for (engine, name) in &engines {
        for (what, f) in [("one leaf uplink down", &leaf_down), ("one spine switch down", &spine_down)] {
            let c = measure(what, &healthy, f, engine.as_ref(), name);
            assert!(c.changed < c.scratch_changed, "{what}, {name}: {c:?}");
        }
    }
}
