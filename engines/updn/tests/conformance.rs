//! updn and dnup on every generated family, LMC 0 and 2: every connected
//! pair reached and no credit loop, tori and meshes included; minimal
//! paths on healthy fat trees.

use sm_abi::{EngineError, FabricSnapshot, NodeKind, Routing, RoutingEngine};
use smcore_kit::conformance::{assert_conformance, assert_conformance_on, Expect, Family};
use smcore_kit::graph::Graph;
use smcore_updn::{rank, DnUp, UpDn};

/// updn as an admin would run it: detected roots where OpenSM's rule finds
/// some, else (tori, meshes, random fabrics) a root file naming one switch
/// per connected part of the fabric, the lowest GUID.
struct UpDnRooted;

impl RoutingEngine for UpDnRooted {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        match UpDn::default().route(fabric) {
            Err(e) if e.reason.contains("no root switches") => {
                UpDn::default().with_root_guids(one_root_per_part(fabric)).route(fabric)
            }
            other => other,
        }
    }
}

fn one_root_per_part(fabric: &FabricSnapshot) -> Vec<u64> {
    let g = Graph::new(fabric);
    let (comp, sizes) = rank::components(&g);
    let mut best = vec![u64::MAX; sizes.len()];
    for (s, &c) in comp.iter().enumerate() {
        let guid = fabric.nodes[g.switch_nodes[s] as usize].guid;
        best[c as usize] = best[c as usize].min(guid);
    }
    assert!(fabric.nodes.iter().any(|n| n.kind == NodeKind::Switch));
    best
}

#[test]
fn updn_reaches_all_without_credit_loops_lmc_0() {
    assert_conformance(&UpDnRooted, 0, &Expect::deadlock_free());
}

#[test]
fn updn_reaches_all_without_credit_loops_lmc_2() {
    assert_conformance(&UpDnRooted, 2, &Expect::deadlock_free());
}

#[test]
fn dnup_reaches_all_without_credit_loops_lmc_0() {
    assert_conformance(&DnUp::default(), 0, &Expect::deadlock_free());
}

#[test]
fn dnup_reaches_all_without_credit_loops_lmc_2() {
    assert_conformance(&DnUp::default(), 2, &Expect::deadlock_free());
}

fn full_fat_tree(c: &smcore_kit::conformance::Case) -> bool {
    c.family == Family::FatTree && !c.faulty
}

#[test]
fn updn_with_detected_roots_is_minimal_on_full_fat_trees() {
    let expect = Expect { reach_all: true, minimal: true, deadlock_free: true };
    for lmc in [0, 2] {
        assert_conformance_on(&UpDn::default(), lmc, &expect, full_fat_tree);
    }
}

/// updn with the top level named as roots, as in a root file.
struct UpDnSpines;

impl RoutingEngine for UpDnSpines {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let spines = fabric
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Switch && n.description.starts_with("spine"))
            .map(|n| n.guid)
            .collect();
        UpDn::default().with_root_guids(spines).route(fabric)
    }
}

#[test]
fn updn_with_the_spines_as_roots_is_minimal_on_full_fat_trees() {
    let expect = Expect { reach_all: true, minimal: true, deadlock_free: true };
    for lmc in [0, 2] {
        assert_conformance_on(&UpDnSpines, lmc, &expect, full_fat_tree);
    }
}

#[test]
fn dnup_is_minimal_on_full_fat_trees() {
    let expect = Expect { reach_all: true, minimal: true, deadlock_free: true };
    assert_conformance_on(&DnUp::default(), 0, &expect, full_fat_tree);
}
