//! Property: on any random irregular fabric, with or without failed links
//! and switches, minhop reaches every pair that is still cabled together
//! over shortest paths, and routes each LID of an LMC block.

use proptest::prelude::*;
use sm_abi::RoutingEngine;
use sm_topology::{gen, lids};
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
        // Some size combinations cannot be cabled (no free ports for the
        // spanning tree); the generator says so and the case is skipped.
        let topo = gen::random_irregular(switches, radix, hosts, extra, seed);
        prop_assume!(topo.is_ok());
        let topo = topo.unwrap();
        let dead_switches = dead_switches.min(switches - 1);
        // Asking for more dead links than survive the dead switches is refused.
        let faulted = gen::with_faults(&topo, dead_links, dead_switches, seed ^ 0x5eed);
        prop_assume!(faulted.is_ok());
        let (topo, _) = faulted.unwrap();
        let fabric = lids::snapshot(&topo, lmc).unwrap();
        let routing = MinHop::default().route(&fabric).unwrap();
        let v = verify(&fabric, &routing, &VerifyOptions { credit_loops: false, ..Default::default() });
        prop_assert_eq!(v.unreachable, 0, "{:?}", v.examples);
        prop_assert_eq!(v.looping, 0);
        prop_assert_eq!(v.non_minimal, 0);
        prop_assert_eq!(v.total_hops, v.total_min_hops);
    }
}
