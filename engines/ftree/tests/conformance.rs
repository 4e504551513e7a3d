//! The kit's conformance suite: ftree routes every healthy fat tree and
//! k-ary n-tree case deadlock-free with all pairs reached, and refuses the
//! other families with a reason instead of handing out bad tables.

use sm_abi::RoutingEngine;
use smcore_ftree::Ftree;
use smcore_kit::conformance::{assert_conformance_on, cases, Expect, Family};

#[test]
fn healthy_fat_trees_conform() {
    assert_conformance_on(&Ftree::default(), 0, &Expect::deadlock_free(), |c| {
        c.family == Family::FatTree && !c.faulty
    });
}

#[test]
fn other_families_are_refused_with_a_reason() {
    for c in cases(0)
        .unwrap()
        .iter()
        .filter(|c| c.family != Family::FatTree)
    {
        match Ftree::default().route(&c.fabric) {
            Ok(_) => panic!("{}: ftree routed a {:?} fabric", c.name, c.family),
            Err(e) => {
                assert!(e.reason.starts_with("ftree: "), "{}: {e}", c.name);
                assert!(!e.reason.contains("panicked"), "{}: {e}", c.name);
            }
        }
    }
}

#[test]
fn faulty_fat_trees_are_routed_or_refused_never_broken() {
    // Without a root file a tree with a missing link or switch is not pure
    // and may be refused; whatever ftree returns must pass the gate.
    for c in cases(0)
        .unwrap()
        .iter()
        .filter(|c| c.family == Family::FatTree && c.faulty)
    {
        if Ftree::default().route(&c.fabric).is_ok() {
            smcore_kit::conformance::check(&Ftree::default(), c, &Expect::deadlock_free())
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn lmc_above_zero_is_refused() {
    let c = cases(1)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "4-ary-3-tree")
        .unwrap();
    let e = Ftree::default().route(&c.fabric).unwrap_err();
    assert!(e.reason.contains("LMC"), "{e}");
    let e = Ftree::from_config("lmc = 1")
        .unwrap()
        .route(&cases(0).unwrap()[0].fabric)
        .unwrap_err();
    assert!(e.reason.contains("LMC"), "{e}");
}
