//! The library exports both engines through the ABI, as deadlock free,
//! and builds them from their TOML configuration.

use sm_abi::abi_stable::std_types::RStr;
use sm_topology::{gen, lids};

#[test]
fn exports_updn_and_dnup_as_deadlock_free() {
    let module = smcore_updn::__smcore_root_module();
    let list = (module.engines())();
    let names: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["updn", "dnup"]);
    assert!(list.iter().all(|e| e.deadlock_free));
}

#[test]
fn creates_and_routes_through_the_abi() {
    let module = smcore_updn::__smcore_root_module();
    let create = module.create();
    let f = lids::snapshot(&gen::kary_ntree(2, 3, 2).unwrap(), 0).unwrap();
    for name in ["updn", "dnup"] {
        let engine = create(RStr::from_str(name), RStr::from_str("lmc = 0\n")).into_result().unwrap();
        let routing = engine.route(&f).into_result().unwrap();
        assert_eq!(routing.lfts.len(), 12, "{name}");
    }
    let bad = create(RStr::from_str("updn"), RStr::from_str("root_guid_file = [1]")).into_result();
    assert!(bad.is_err_and(|e| e.reason.starts_with("updn: bad configuration")));
    let unknown = create(RStr::from_str("ftree"), RStr::from_str("")).into_result();
    assert!(unknown.is_err());
}
