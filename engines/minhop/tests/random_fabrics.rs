//! Property: on any random irregular fabric, with or without failed links
//! and switches, minhop reaches every pair that is still cabled together
//! over shortest paths, and routes each LID of an LMC block.

use proptest::prelude::*;
use sm_abi::{FabricSnapshot, RoutingEngine};
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn complete_and_minimal(
        drawn in random_fabrics(Sizes::default()),
    ) {
        complete_and_minimal_on(&drawn.fabric)?;
    }
}
