//! Property: on any random irregular fabric, with failed links and
//! switches and any LMC, min-hop tables written as a dump and loaded into
//! the same fabric with its LIDs shuffled give the same routing port GUID
//! by port GUID.

mod common;

use common::{guid_level, minhop, relidded};
use proptest::prelude::*;
use sm_abi::{FabricSnapshot, RoutingEngine};
use smcore_file::FileEngine;
use smcore_kit::lfts_file::write_lfts;
use smcore_kit::strategy::{random_fabrics, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};

/// LID blocks handed out again to the LID-holding ports in an order
/// shuffled by `seed`, aligned as before.
fn shuffled(f: &FabricSnapshot, seed: u64) -> FabricSnapshot {
    relidded(f, |holders| {
        // A cheap deterministic shuffle (xorshift) keyed by the seed.
        let mut x = seed | 1;
        for i in (1..holders.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            holders.swap(i, (x % (i as u64 + 1)) as usize);
        }
    })
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
