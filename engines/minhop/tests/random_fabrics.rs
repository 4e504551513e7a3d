//! Property: on any random irregular fabric, with or without failed links
//! and switches, minhop reaches every pair that is still cabled together
//! over shortest paths, and routes each LID of an LMC block.

use proptest::prelude::*;
use sm_abi::{FabricSnapshot, RoutingEngine};
use smcore_kit::conformance::RandomFabric;
use smcore_kit::strategy::{random_fabrics, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_minhop::MinHop;

fn complete_and_minimal_on(fabric: &FabricSnapshot) -> Result<(), TestCaseError> {
    let routing = MinHop::default().route(fabric).unwrap();
    let v = verify(fabric, &routing, &VerifyOptions { credit_loops: false, ..Default::default() });
    prop_assert_eq!(v.unreachable, 0, "{:?}", v.examples);
    prop_assert_eq!(v.looping, 0);
    prop_assert_eq!(v.non_minimal, 0);
    prop_assert_eq!(v.total_hops, v.total_min_hops);
    Ok(())
}

/// Cases that failed once: two switches joined by several parallel
/// links, and two switches of which one is dead.
#[test]
fn past_failures() {
    for (extra, dead_links, dead_switches) in [(5, 0, 0), (0, 1, 1)] {
        let spec = RandomFabric { switches: 2, radix: 6, hosts: 1, extra_links: extra, seed: 0, dead_links, dead_switches, lmc: 0 };
        let fabric = spec.build().expect("the generator builds this case");
        complete_and_minimal_on(&fabric).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn complete_and_minimal(
        drawn in random_fabrics(Sizes::default()),
    ) {
        complete_and_minimal_on(&drawn.fabric)?;
    }
}
