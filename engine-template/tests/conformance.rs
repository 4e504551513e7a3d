//! The kit's conformance fabrics (fat trees, tori, meshes, hypercubes,
//! random graphs, with and without faults), judged by the verifier smcore
//! itself applies before it programs a routing.

use sm_abi::RoutingEngine;
use smcore_kit::conformance::{assert_conformance, Expect};
use smcore_template::Template;

#[test]
fn every_pair_reached_on_shortest_paths_with_and_without_lmc() {
    for lmc in [0, 2] {
        assert_conformance(&Template::default(), lmc, &Expect::minimal());
    }
}

#[test]
fn a_bad_configuration_is_refused_as_such() {
    let err = Template::from_config("report = \"yes\"").expect_err("report is a boolean");
    assert_eq!(err.kind, sm_abi::ErrorKind::BadConfig);
}

#[test]
fn a_fabric_without_switches_is_refused() {
    let empty = sm_abi::FabricSnapshot {
        nodes: Default::default(),
        ports: Default::default(),
        lmc: 0,
        max_lid: 0,
        sm_node: sm_abi::NONE,
    };
    let err = Template::default().route(&empty).expect_err("nothing to route");
    assert_eq!(err.kind, sm_abi::ErrorKind::CannotRoute);
}
