//! Property: on any consistently cabled 2D/3D mesh or hypercube, with any
//! number of hosts and LMC, DOR reaches every pair over shortest paths with
//! no credit loop on one VL.

use proptest::prelude::*;
use sm_abi::RoutingEngine;
use sm_abi::FabricSnapshot;
use smcore_dor::Dor;
use smcore_kit::strategy::{hypercubes, meshes};
use smcore_kit::verify::{verify, VerifyOptions};

fn check(f: &FabricSnapshot) -> Result<(), TestCaseError> {
    let r = Dor::default().route(f).unwrap();
    let v = verify(f, &r, &VerifyOptions::default());
    prop_assert_eq!(
        (v.unreachable, v.looping, v.non_minimal),
        (0, 0, 0),
        "{:?}",
        v.examples
    );
    prop_assert!(v.credit_loop.is_none(), "credit loop {:?}", v.credit_loop);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn meshes_route_minimal_and_loop_free(mesh in meshes(1..3, 0..2)) {
        check(&mesh.fabric)?;
    }

    #[test]
    fn hypercubes_route_minimal_and_loop_free(cube in hypercubes(1..3, 0..2)) {
        check(&cube.fabric)?;
    }
}
