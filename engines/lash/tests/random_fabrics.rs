//! Property: on fabrics of every family (random irregular ones included),
//! with or without failed links and switches, any LMC and VL budget, with
//! and without mesh analysis, lash either reaches every pair still cabled
//! together over shortest paths free of credit loops within the fabric's
//! VLs, or says that the VLs do not hold its layers.

use proptest::prelude::*;
use sm_abi::RoutingEngine;
use smcore_kit::strategy::{any_family, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_lash::{Lash, LashConfig};

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn complete_minimal_and_deadlock_free(
        drawn in any_family(Sizes { switches: 2..20, ..Sizes::default() }),
        vls in prop::sample::select(vec![1u8, 2, 4, 8]),
        mesh in any::<bool>(),
    ) {
        let mut fabric = drawn.fabric;
        for p in fabric.ports.iter_mut() {
            p.op_vls = p.op_vls.min(vls);
        }
        let lash = Lash::new(LashConfig { lash_start_vl: 0, do_mesh_analysis: mesh });
        match lash.route(&fabric) {
            Ok(r) => {
                let v = verify(&fabric, &r, &VerifyOptions::default());
                prop_assert!(v.ok(), "{:?}", v.failure());
                prop_assert_eq!(v.non_minimal, 0);
                prop_assert!(r.vls_used <= vls);
            }
            Err(e) => {
                // Only a shortage of VLs is an acceptable reason.
                prop_assert!(e.reason.contains("layers"), "{}", e);
                prop_assert!(vls < 8, "{}", e);
            }
        }
    }
}
