//! Exhaustive failure sweeps (ignored by default, run in release:
//! `cargo test --release -p smcore-engine-torus2qos --test exhaustive --
//! --ignored`): every single failed switch, and every failed switch
//! together with every failed link, on small 2D and 3D tori. Each fabric is
//! either routed (reachable, free of credit loops, path SLs unchanged) or
//! refused for a ring broken into disjoint segments or failed switches that
//! would close a credit loop.

mod common;

use std::collections::BTreeMap;

use common::*;
use sm_abi::RoutingEngine;

fn sls(fab: &Fab) -> BTreeMap<(u64, u64), u8> {
    let (f, r) = fab.route();
    all_sls(&f, &r.unwrap())
        .into_iter()
        .map(|(a, b, s)| ((a, b), s))
        .collect()
}

fn judge(name: &str, base: &BTreeMap<(u64, u64), u8>, fab: &Fab) -> bool {
    let f = fab.snapshot();
    match fab.engine().route(&f) {
        Ok(r) => {
            assert_ok(name, &f, &r);
            for (a, b, s) in all_sls(&f, &r) {
                assert_eq!(base.get(&(a, b)), Some(&s), "{name}: SL changed");
            }
            true
        }
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.contains("disjoint")
                    || e.contains("separate groups")
                    || e.contains("adjacent")
                    || e.contains("no route from")
                    || e.contains("discovery failed for every seed"),
                "{name}: {e}"
            );
            false
        }
    }
}

#[test]
#[ignore = "exhaustive sweep of every failure, minutes in a debug build: run with --release -- --ignored"]
fn every_single_failed_switch() {
    for dims in [
        vec![4, 4, 4],
        vec![5, 5, 5],
        vec![6, 6],
        vec![5, 4, 3],
        vec![3, 3, 3],
        vec![7, 5],
    ] {
        let base = sls(&Fab::torus(&dims, 1));
        let n = Fab::torus(&dims, 1).layout.switches.len();
        for k in 0..n {
            let mut fab = Fab::torus(&dims, 1);
            fab.backup_seed = true;
            let c = fab.layout.switches[k].coord;
            fab.fail_switch(c);
            assert!(
                judge(&format!("{dims:?} without {c:?}"), &base, &fab),
                "{dims:?} without {c:?} refused"
            );
        }
    }
}

#[test]
#[ignore = "exhaustive sweep of every failure, minutes in a debug build: run with --release -- --ignored"]
fn failed_switch_with_a_failed_link() {
    for dims in [vec![4, 4, 4], vec![6, 5], vec![5, 4, 3]] {
        let base = sls(&Fab::torus(&dims, 1));
        let proto = Fab::torus(&dims, 1);
        let n = proto.layout.switches.len();
        let cables = proto.cables();
        let (mut routed, mut refused) = (0, 0);
        for k in (0..n).step_by(3) {
            for &(a, b) in cables.iter().step_by(5) {
                let mut fab = Fab::torus(&dims, 1);
                fab.backup_seed = true;
                let c = fab.layout.switches[k].coord;
                fab.fail_switch(c);
                fab.topo.links.retain(|l| !(l.a == a && l.b == b));
                if judge(
                    &format!("{dims:?} without {c:?} and {a:?}-{b:?}"),
                    &base,
                    &fab,
                ) {
                    routed += 1;
                } else {
                    refused += 1;
                }
            }
        }
        println!("{dims:?}: {routed} routed, {refused} refused");
        assert!(routed > 0);
    }
}

#[test]
#[ignore = "exhaustive sweep of every failure, minutes in a debug build: run with --release -- --ignored"]
fn every_pair_of_failed_switches() {
    for dims in [vec![4, 4, 4], vec![6, 6], vec![5, 3, 4]] {
        let base = sls(&Fab::torus(&dims, 1));
        let n = Fab::torus(&dims, 1).layout.switches.len();
        let (mut routed, mut refused) = (0, 0);
        for i in 0..n {
            for j in i + 1..n {
                let mut fab = Fab::torus(&dims, 1);
                fab.backup_seed = true;
                let (a, b) = (fab.layout.switches[i].coord, fab.layout.switches[j].coord);
                fab.fail_switch(a);
                fab.fail_switch(b);
                if judge(&format!("{dims:?} without {a:?} {b:?}"), &base, &fab) {
                    routed += 1;
                } else {
                    refused += 1;
                }
            }
        }
        println!("{dims:?}: two failed switches: {routed} routed, {refused} refused");
    }
}
