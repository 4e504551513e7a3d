//! Property: on any random irregular fabric, with failed links and
//! switches and any LMC, min-hop tables written as a dump and loaded into
//! the same fabric with its LIDs shuffled give the same routing port GUID
//! by port GUID.

use proptest::prelude::*;
use sm_abi::{FabricSnapshot, Lft, Routing, RoutingEngine, NO_ROUTE};
use smcore_file::FileEngine;
use smcore_kit::balance::{assign_lfts, routing_order, BalanceOptions};
use smcore_kit::strategy::{random_fabrics, Sizes};
use smcore_kit::lfts_file::write_lfts;
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_kit::Graph;

fn minhop(f: &FabricSnapshot) -> Routing {
    let g = Graph::new(f);
    let order = routing_order(f, &g, &[]);
    Routing::single_vl(assign_lfts(
        f,
        &g,
        &g.distance_matrix(),
        &order,
        &BalanceOptions::default(),
    ))
}

/// LID blocks handed out again to the LID-holding ports in an order
/// shuffled by `seed`, aligned as before.
fn shuffled(f: &FabricSnapshot, seed: u64) -> FabricSnapshot {
    let mut g = f.clone();
    let mut holders: Vec<usize> = (0..g.ports.len())
        .filter(|&i| g.ports[i].lid != 0)
        .collect();
    // A cheap deterministic shuffle (xorshift) keyed by the seed.
    let mut x = seed | 1;
    for i in (1..holders.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        holders.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let (mut next, mut max) = (1u32, 0u32);
    for i in holders {
        let count = g.ports[i].lid_count();
        let lid = next.div_ceil(count) * count;
        g.ports[i].lid = lid as u16;
        next = lid + count;
        max = max.max(lid + count - 1);
    }
    g.max_lid = max as u16;
    g
}

fn guid_level(f: &FabricSnapshot, lfts: &[Lft]) -> Vec<(u64, u64, u32, u8)> {
    let mut v = Vec::new();
    for l in lfts {
        let sw = f.nodes[l.node as usize].guid;
        for p in f.ports.iter().filter(|p| p.lid != 0) {
            for off in 0..p.lid_count() {
                v.push((
                    sw,
                    p.guid,
                    off,
                    l.ports
                        .get(p.lid as usize + off as usize)
                        .copied()
                        .unwrap_or(NO_ROUTE),
                ));
            }
        }
    }
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn dump_then_load_after_lid_shuffle(
        drawn in random_fabrics(Sizes {
            switches: 2..20,
            radix: 6..12,
            hosts: 1..4,
            extra_links: 0..20,
            dead_links: 0..3,
            dead_switches: 0..2,
            lmc: 0..3,
        }),
        shuffle in any::<u64>(),
    ) {
        let before = drawn.fabric;
        let routed = minhop(&before);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opensm-lfts.dump");
        std::fs::write(&path, write_lfts(&before, &routed.lfts)).unwrap();
        let after = shuffled(&before, shuffle);
        let loaded = FileEngine::with_file(&path).route(&after).unwrap();
        prop_assert_eq!(guid_level(&after, &loaded.lfts), guid_level(&before, &routed.lfts));
        let v = verify(&after, &loaded, &VerifyOptions { credit_loops: false, ..Default::default() });
        prop_assert_eq!((v.unreachable, v.looping), (0, 0));
    }
}
