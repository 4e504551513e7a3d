//! Property: on any random irregular fabric, with or without failed links
//! and switches, any VL budget, any LMC, and with or without switches as
//! destinations, nue reaches every pair still cabled together, has no
//! credit loop under its path SLs and SL2VL maps, and stays within the
//! budget.

use proptest::prelude::*;
use sm_abi::{FabricSnapshot, RoutingEngine};
use smcore_kit::conformance::RandomFabric;
use smcore_kit::strategy::{random_fabrics, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_nue::{Nue, NueConfig, Partitioner};

fn reaches_all_on(fabric: &FabricSnapshot, vls: u8, include_switches: bool, round_robin: bool) -> Result<(), TestCaseError> {
    let partitioner = if round_robin { Partitioner::RoundRobin } else { Partitioner::Grown };
    let nue = Nue::new(NueConfig { max_num_vls: vls, include_switches, partitioner });
    let routing = nue.route(fabric).unwrap();
    let budget = if vls == 0 { 8 } else { vls };
    prop_assert!(routing.vls_used >= 1 && routing.vls_used <= budget);
    let opts = VerifyOptions { switch_destinations: include_switches, ..Default::default() };
    let v = verify(fabric, &routing, &opts);
    prop_assert!(v.ok(), "{:?}", v.failure());
    prop_assert_eq!(v.unreachable + v.looping, 0);
    prop_assert!(v.credit_loop.is_none());
    prop_assert!(v.vls_used <= routing.vls_used.max(1));
    Ok(())
}

/// A case that failed once.
#[test]
fn past_failure() {
    let spec = RandomFabric { switches: 7, radix: 11, hosts: 1, extra_links: 1, seed: 7725442215714392597, dead_links: 0, dead_switches: 0, lmc: 0 };
    let fabric = spec.build().expect("the generator builds this case");
    reaches_all_on(&fabric, 0, false, false).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn reaches_all_without_credit_loops(
        drawn in random_fabrics(Sizes {
            switches: 2..30,
            radix: 5..12,
            hosts: 1..4,
            extra_links: 0..40,
            dead_links: 0..5,
            dead_switches: 0..3,
            lmc: 0..2,
        }),
        vls in 0u8..5,
        include_switches in any::<bool>(),
        round_robin in any::<bool>(),
    ) {
        reaches_all_on(&drawn.fabric, vls, include_switches, round_robin)?;
    }
}
