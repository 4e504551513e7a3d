//! Property: on any random irregular fabric, with or without failed links
//! and switches, any VL budget, any LMC, and with or without switches as
//! destinations, nue reaches every pair still cabled together, has no
//! credit loop under its path SLs and SL2VL maps, and stays within the
//! budget.

use proptest::prelude::*;
use sm_abi::RoutingEngine;
use smcore_kit::conformance::RandomFabric;
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_nue::{Nue, NueConfig, Partitioner};

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn reaches_all_without_credit_loops(
        switches in 2usize..30,
        radix in 5usize..12,
        hosts in 1usize..4,
        extra in 0usize..40,
        seed in any::<u64>(),
        dead_links in 0usize..5,
        dead_switches in 0usize..3,
        lmc in 0u8..2,
        vls in 0u8..5,
        include_switches in any::<bool>(),
        round_robin in any::<bool>(),
    ) {
        let fabric = RandomFabric {
            switches, radix, hosts, extra_links: extra, seed, dead_links, dead_switches, lmc,
        }
        .build();
        prop_assume!(fabric.is_some());
        let fabric = fabric.unwrap();
        let partitioner = if round_robin { Partitioner::RoundRobin } else { Partitioner::Grown };
        let nue = Nue::new(NueConfig { max_num_vls: vls, include_switches, partitioner });
        let routing = nue.route(&fabric).unwrap();
        let budget = if vls == 0 { 8 } else { vls };
        prop_assert!(routing.vls_used >= 1 && routing.vls_used <= budget);
        let opts = VerifyOptions { switch_destinations: include_switches, ..Default::default() };
        let v = verify(&fabric, &routing, &opts);
        prop_assert!(v.ok(), "{:?}", v.failure());
        prop_assert_eq!(v.unreachable + v.looping, 0);
        prop_assert!(v.credit_loop.is_none());
        prop_assert!(v.vls_used <= routing.vls_used.max(1));
    }
}
