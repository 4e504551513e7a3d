//! Property: on any random irregular fabric, with or without failed links
//! and switches, minhop reaches every pair that is still cabled together
//! over shortest paths, and routes each LID of an LMC block.

use proptest::prelude::*;
use sm_abi::RoutingEngine;
use smcore_kit::conformance::RandomFabric;
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_minhop::MinHop;

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn complete_and_minimal(
        switches in 2usize..28,
        radix in 6usize..14,
        hosts in 1usize..4,
        extra in 0usize..30,
        seed in any::<u64>(),
        dead_links in 0usize..4,
        dead_switches in 0usize..2,
        lmc in 0u8..3,
    ) {
        let fabric = RandomFabric {
            switches, radix, hosts, extra_links: extra, seed, dead_links, dead_switches, lmc,
        }
        .build();
        prop_assume!(fabric.is_some());
        let fabric = fabric.unwrap();
        let routing = MinHop::default().route(&fabric).unwrap();
        let v = verify(&fabric, &routing, &VerifyOptions { credit_loops: false, ..Default::default() });
        prop_assert_eq!(v.unreachable, 0, "{:?}", v.examples);
        prop_assert_eq!(v.looping, 0);
        prop_assert_eq!(v.non_minimal, 0);
        prop_assert_eq!(v.total_hops, v.total_min_hops);
    }
}
