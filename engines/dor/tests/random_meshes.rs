//! Property: on any consistently cabled 2D/3D mesh or hypercube, with any
//! number of hosts and LMC, DOR reaches every pair over shortest paths with
//! no credit loop on one VL.

use proptest::prelude::*;
use sm_abi::RoutingEngine;
use sm_topology::{gen, lids};
use smcore_dor::Dor;
use smcore_kit::verify::{verify, VerifyOptions};

fn check(topo: &sm_topology::Topology, lmc: u8) -> Result<(), TestCaseError> {
    let f = lids::snapshot(topo, lmc).unwrap();
    let r = Dor::default().route(&f).unwrap();
    let v = verify(&f, &r, &VerifyOptions::default());
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
    fn meshes_route_minimal_and_loop_free(
        dims in prop::collection::vec(1usize..6, 2..=3),
        hosts in 1usize..3,
        lmc in 0u8..2,
    ) {
        prop_assume!(dims.iter().product::<usize>() >= 2);
        check(&gen::torus(&dims, hosts, true).unwrap().0, lmc)?;
    }

    #[test]
    fn hypercubes_route_minimal_and_loop_free(dim in 1usize..6, hosts in 1usize..3, lmc in 0u8..2) {
        check(&gen::hypercube(dim, hosts).unwrap(), lmc)?;
    }
}
