//! Nue on every generated family (healthy and faulty), LMC 0 and 1, with
//! one VL and with the operational VLs: every connected pair reached, no
//! credit loop, VLs within the limit, path SL = layer of the destination.

use sm_abi::{FabricSnapshot, Routing};
use smcore_kit::conformance::{assert_conformance, cases, check, Expect};
use smcore_nue::{Nue, NueConfig, Partitioner};

fn nue(vls: u8) -> Nue {
    Nue::new(NueConfig {
        max_num_vls: vls,
        ..Default::default()
    })
}

#[test]
fn one_vl_lmc_0() {
    assert_conformance(&nue(1), 0, &Expect::deadlock_free());
}

#[test]
fn one_vl_lmc_1() {
    assert_conformance(&nue(1), 1, &Expect::deadlock_free());
}

#[test]
fn auto_vls_lmc_0() {
    assert_conformance(&nue(0), 0, &Expect::deadlock_free());
}

#[test]
fn auto_vls_lmc_1() {
    assert_conformance(&nue(0), 1, &Expect::deadlock_free());
}

#[test]
fn two_vls_round_robin_partition() {
    let e = Nue::new(NueConfig {
        max_num_vls: 2,
        partitioner: Partitioner::RoundRobin,
        ..Default::default()
    });
    assert_conformance(&e, 0, &Expect::deadlock_free());
}

/// VLs used never exceed the limit, and the path SL of every (s, d) is the
/// layer Nue put d in, the same for every source.
#[test]
fn vls_within_limit_and_sl_is_the_destination_layer() {
    for vls in [1u8, 2, 3, 4] {
        for c in cases(0).unwrap() {
            let (r, stats) = nue(vls).route_with_stats(&c.fabric).unwrap();
            assert!(
                r.vls_used as usize <= vls as usize,
                "{}: {} VLs used > {vls}",
                c.name,
                r.vls_used
            );
            assert_eq!(r.vls_used as usize, stats.layers, "{}", c.name);
            let v = check(&nue(vls), &c, &Expect::deadlock_free()).unwrap();
            assert!(
                v.vls_used <= vls,
                "{}: verifier saw {} VLs",
                c.name,
                v.vls_used
            );
            same_sl_for_every_source(&c.fabric, &r, &c.name);
        }
    }
}

fn same_sl_for_every_source(fabric: &FabricSnapshot, r: &Routing, name: &str) {
    let lids: Vec<u16> = fabric
        .end_ports()
        .map(|p| fabric.ports[p as usize].lid)
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for &d in &lids {
        let sl = r.path_sl.path_sl(lids[0], d);
        seen.insert(sl);
        assert!(
            (sl as usize) < r.vls_used.max(1) as usize,
            "{name}: SL {sl} beyond layers"
        );
        for &s in &lids {
            assert_eq!(
                r.path_sl.path_sl(s, d),
                sl,
                "{name}: SL of {s}->{d} differs from the layer of {d}"
            );
        }
    }
    if r.vls_used > 1 {
        assert_eq!(
            seen.len(),
            r.vls_used as usize,
            "{name}: every layer has destinations"
        );
        assert!(r.path_sl.uniform().is_none());
        // SL2VL 1:1 on the switches.
        assert!(r
            .sl2vl
            .iter()
            .all(|m| (0..r.vls_used as usize).all(|sl| m.vl[sl] as usize == sl)));
        assert!(!r.sl2vl.is_empty());
    }
}
