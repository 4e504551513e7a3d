//! Whatever the damage, ftree either refuses with a reason or returns
//! tables the core's gate accepts: every CA pair reached, no forwarding
//! loop, no credit loop. Swept over small trees with random cut cables,
//! dead switches, missing hosts, with and without a root file.

mod common;

use common::*;
use sm_abi::RoutingEngine;
use sm_topology::gen;
use smcore_ftree::{Ftree, FtreeConfig};
use smcore_kit::verify::{verify, VerifyOptions};

#[test]
fn damaged_trees_are_routed_correctly_or_refused() {
    let mut routed = 0;
    let mut refused = 0;
    let mut seed = 0u64;
    for (k, n) in [(2, 3), (3, 2), (3, 3), (4, 2), (4, 3), (2, 4)] {
        for hosts in [1, k] {
            let base = gen::kary_ntree(k, n, hosts).unwrap();
            for (links, switches) in [(0, 0), (1, 0), (3, 0), (0, 1), (2, 1)] {
                seed += 1;
                let Ok((t, _)) = gen::with_faults(&base, links, switches, seed) else {
                    continue;
                };
                let f = snap(&t);
                for with_roots in [false, true] {
                    let what = format!("{k}-ary-{n}-tree h{hosts} -{links} links -{switches} switches seed {seed} roots {with_roots}");
                    let eng = if with_roots {
                        let roots = scratch_file(
                            "damaged",
                            &format!("roots-{seed}"),
                            &guid_file_text(&guids_of(&f, "spine")),
                        );
                        Ftree::new(FtreeConfig {
                            root_guid_file: Some(roots),
                            ..Default::default()
                        })
                    } else {
                        Ftree::default()
                    };
                    match eng.route(&f) {
                        Ok(r) => {
                            let v = verify(&f, &r, &VerifyOptions::default());
                            assert!(v.ok(), "{what}: {}", v.failure().unwrap_or_default());
                            routed += 1;
                        }
                        Err(e) => {
                            assert!(e.reason.starts_with("ftree: "), "{what}: {e}");
                            refused += 1;
                        }
                    }
                }
            }
        }
    }
    println!("routed {routed}, refused {refused}");
    assert!(
        routed > 40,
        "only {routed} damaged trees routed ({refused} refused)"
    );
}

#[test]
fn irregular_fabrics_with_forced_roots_are_routed_correctly_or_refused() {
    // A root file makes ftree skip the pure-tree rules, so it will try
    // irregular graphs too; its own reachability check must catch them.
    let mut outcomes = (0, 0);
    for seed in 1..=12u64 {
        let t = gen::random_irregular(12, 8, 2, 6, seed).unwrap();
        let f = snap(&t);
        let switches: Vec<u64> = f.switches().map(|s| f.nodes[s as usize].guid).collect();
        let roots: Vec<u64> = switches.iter().copied().step_by(5).collect();
        let file = scratch_file(
            "irregular",
            &format!("roots-{seed}"),
            &guid_file_text(&roots),
        );
        let eng = Ftree::new(FtreeConfig {
            root_guid_file: Some(file),
            ..Default::default()
        });
        match eng.route(&f) {
            Ok(r) => {
                let v = verify(&f, &r, &VerifyOptions::default());
                assert!(v.ok(), "seed {seed}: {}", v.failure().unwrap_or_default());
                outcomes.0 += 1;
            }
            Err(e) => {
                assert!(e.reason.starts_with("ftree: "), "seed {seed}: {e}");
                outcomes.1 += 1;
            }
        }
    }
    println!(
        "irregular with roots: routed {}, refused {}",
        outcomes.0, outcomes.1
    );
}
