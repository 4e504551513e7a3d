//! Property: on any random irregular fabric, with or without failed links
//! and switches and with LMC 0..2, sssp reaches every pair still cabled
//! together, and dfsssp either routes every such pair free of credit loops
//! within the fabric's VLs or says that the VLs do not suffice.

use proptest::prelude::*;
use sm_abi::RoutingEngine;
use smcore_dfsssp::{Dfsssp, Sssp};
use smcore_kit::strategy::{random_fabrics, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn complete_and_deadlock_free(
        drawn in random_fabrics(Sizes::default()),
        vls in prop::sample::select(vec![1u8, 2, 4, 8]),
    ) {
        let mut fabric = drawn.fabric;
        for p in fabric.ports.iter_mut() {
            p.op_vls = p.op_vls.min(vls);
        }
        let plain = Sssp::default().route(&fabric).unwrap();
        let v = verify(&fabric, &plain, &VerifyOptions { credit_loops: false, ..Default::default() });
        prop_assert_eq!(v.unreachable, 0, "{:?}", v.examples);
        prop_assert_eq!(v.looping, 0);
        match Dfsssp::default().route(&fabric) {
            Ok(r) => {
                let v = verify(&fabric, &r, &VerifyOptions::default());
                prop_assert!(v.ok(), "{:?}", v.failure());
                prop_assert!(r.vls_used <= vls);
            }
            Err(e) => {
                // Only a shortage of VLs is an acceptable reason, and only
                // when there are few.
                prop_assert!(e.reason.contains("virtual layers available"), "{}", e);
                prop_assert!(vls < 8, "{}", e);
            }
        }
    }
}
