//! The library exports lash through the ABI, as deadlock free, built from
//! its TOML configuration with OpenSM's option names.

use sm_abi::abi_stable::std_types::RStr;
use sm_topology::{gen, lids};

#[test]
fn exports_lash_as_deadlock_free() {
    let module = smcore_lash::__smcore_root_module();
    let list = (module.engines())();
    let names: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["lash"]);
    assert!(list[0].deadlock_free);
}

#[test]
fn creates_and_routes_through_the_abi() {
    let module = smcore_lash::__smcore_root_module();
    let create = module.create();
    let f = lids::snapshot(&gen::torus(&[3, 3], 1, false).unwrap().0, 0).unwrap();
    let cfg = "lmc = 0\nlash_start_vl = 2\ndo_mesh_analysis = true\ndump_dir = \"/tmp\"\n";
    let engine = create(RStr::from_str("lash"), RStr::from_str(cfg))
        .into_result()
        .unwrap();
    let routing = engine.route(&f).into_result().unwrap();
    assert_eq!(routing.lfts.len(), 9);
    assert!(routing.vls_used >= 3);
    assert!(
        routing
            .diagnostics
            .iter()
            .any(|d| d.message.contains("2-dimensional 3x3 torus")),
        "{:?}",
        routing.diagnostics
    );
    let bad = create(
        RStr::from_str("lash"),
        RStr::from_str("lash_start_vl = \"x\""),
    )
    .into_result();
    assert!(bad.is_err_and(|e| e.reason.starts_with("lash: bad configuration")));
}
