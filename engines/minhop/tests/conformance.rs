//! Min hop on every generated family, LMC 0 and 2: every connected pair
//! reached, every path a shortest path; on tori it has credit loops and
//! the verifier must say so.

use sm_abi::RoutingEngine;
use smcore_kit::conformance::{assert_conformance, cases, Expect, Family};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_minhop::MinHop;

#[test]
fn minimal_and_complete_with_lmc_0() {
    assert_conformance(&MinHop::default(), 0, &Expect::minimal());
}

#[test]
fn minimal_and_complete_with_lmc_2() {
    assert_conformance(&MinHop::default(), 2, &Expect::minimal());
}

#[test]
fn fat_trees_are_deadlock_free() {
    for c in cases(0).unwrap().iter().filter(|c| c.family == Family::FatTree && !c.faulty) {
        let r = MinHop::default().route(&c.fabric).unwrap();
        let v = verify(&c.fabric, &r, &VerifyOptions::default());
        assert!(v.credit_loop.is_none(), "{}: {:?}", c.name, v.credit_loop);
    }
}

#[test]
fn three_d_torus_has_credit_loops() {
    let c = cases(0).unwrap().into_iter().find(|c| c.name == "torus-3x3x3-h2").unwrap();
    let r = MinHop::default().route(&c.fabric).unwrap();
    let v = verify(&c.fabric, &r, &VerifyOptions::default());
    assert_eq!(v.unreachable, 0);
    assert!(v.credit_loop.is_some(), "minhop on a 3D torus must have credit loops");
}

#[test]
fn lmc_lids_of_a_port_spread_over_different_neighbours() {
    // With LMC 2 on a fat tree with 3 spines, the 4 LIDs of a remote host
    // should leave a leaf through at least 3 different spines.
    let c = cases(2).unwrap().into_iter().find(|c| c.name == "fat-tree-6x3-h4").unwrap();
    let r = MinHop::default().route(&c.fabric).unwrap();
    let f = &c.fabric;
    let leaf = r.lfts.iter().find(|l| f.nodes[l.node as usize].description.contains("leaf")).unwrap();
    // A host not on this leaf.
    let host = f
        .end_ports()
        .find(|&p| {
            let peer = f.ports[p as usize].peer;
            f.ports[peer as usize].node != leaf.node
        })
        .unwrap();
    let base = f.ports[host as usize].lid as usize;
    let mut ports: Vec<u8> = (0..4).map(|o| leaf.ports[base + o]).collect();
    ports.sort();
    ports.dedup();
    assert!(ports.len() >= 3, "LMC LIDs use ports {ports:?}");
}
