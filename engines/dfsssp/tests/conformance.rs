//! sssp and dfsssp on every generated family (healthy and faulty), LMC 0
//! and 1 (dfsssp also 2): sssp reaches every pair; dfsssp reaches every pair with no
//! credit loop under its path SLs and SL2VL maps, within the fabric's VLs.

use sm_abi::RoutingEngine;
use smcore_dfsssp::{Dfsssp, Sssp};
use smcore_kit::conformance::{assert_conformance, cases, check, Expect, Family};

#[test]
fn sssp_reaches_every_pair_lmc_0() {
    assert_conformance(&Sssp::default(), 0, &Expect::connectivity());
}

#[test]
fn sssp_reaches_every_pair_lmc_1() {
    assert_conformance(&Sssp::default(), 1, &Expect::connectivity());
}

#[test]
fn dfsssp_is_deadlock_free_lmc_0() {
    assert_conformance(&Dfsssp::default(), 0, &Expect::deadlock_free());
}

#[test]
fn dfsssp_is_deadlock_free_lmc_1() {
    assert_conformance(&Dfsssp::default(), 1, &Expect::deadlock_free());
}

#[test]
fn sssp_paths_are_shortest_on_healthy_fabrics() {
    // Links start at weight P² and one destination adds at most P, so the
    // balance never buys a detour on these sizes.
    for c in cases(0).unwrap().iter().filter(|c| !c.faulty) {
        let v = check(&Sssp::default(), c, &Expect::minimal()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.non_minimal, 0, "{}", c.name);
    }
}

#[test]
fn sssp_alone_has_credit_loops_on_tori_which_dfsssp_removes() {
    // The check is not vacuous: without layers the same routes loop.
    let all = cases(0).unwrap();
    let torus = all
        .iter()
        .find(|c| c.family == Family::Torus && c.name == "torus-3x3x3-h2")
        .unwrap();
    let r = Sssp::default().route(&torus.fabric).unwrap();
    let v = smcore_kit::verify(&torus.fabric, &r, &Default::default());
    assert!(
        v.credit_loop.is_some(),
        "sssp on a 3D torus should have credit loops"
    );
    let d = Dfsssp::default().route(&torus.fabric).unwrap();
    let v = smcore_kit::verify(&torus.fabric, &d, &Default::default());
    assert!(v.ok(), "{:?}", v.failure());
    assert!(
        d.vls_used >= 2 && d.vls_used <= 8,
        "vls_used {}",
        d.vls_used
    );
    assert_eq!(
        d.lfts, r.lfts,
        "dfsssp routes exactly as sssp when the per-LID trees fit"
    );
}

#[test]
fn dfsssp_is_deadlock_free_lmc_2() {
    assert_conformance(&Dfsssp::default(), 2, &Expect::deadlock_free());
}
