//! `--sim-caps`: the embedded fabric reports the VLCap/MTUCap an admin
//! gives, so a fabric's limits can be tried before it is cabled, and an
//! engine that needs more VLs than a port has is refused with the port.

mod common;

use common::*;

fn torus_run(extra: &[&str]) -> (i32, String, String) {
    let ws = workspace();
    let net = ws.join("config/topologies/torus-4x4x4.net");
    let conf = ws.join("config/torus-2QoS.conf");
    let mut args = vec![
        "--fabric",
        net.to_str().expect("utf-8 path"),
        "--once",
        "--engines",
        "torus-2QoS,no_fallback",
        "--torus-config",
        conf.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    smcore(&args)
}

#[test]
fn torus_2qos_routes_on_two_data_vls_and_is_refused_on_one() {
    let (code, out, err) = torus_run(&["--sim-caps", "vls=2,mtu=2048"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("routed by torus-2QoS"), "{out}");

    let (code, out, err) = torus_run(&["--sim-caps", "vls=1"]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(out.contains("beyond the port's operational VLs"), "{out}");
}

#[test]
fn one_switch_with_a_single_vl_is_the_port_the_refusal_names() {
    // "S-0002c90000000003" is sw-3-0-0 in the topology file.
    let (code, out, err) = torus_run(&["--sim-caps", "vls=8", "--sim-caps", "0x0002c90000000003:vls=1"]);
    assert_eq!(code, 3, "{out}\n{err}");
    // The port named is on that switch, or faces it: a link operates the
    // VLs both its ends can.
    let line = out.lines().find(|l| l.starts_with("engine")).unwrap_or_default();
    let topo = sm_topology::parse_file(common::workspace().join("config/topologies/torus-4x4x4.net")).expect("topology");
    let sw = topo.nodes.iter().position(|n| n.desc == "sw-3-0-0").expect("sw-3-0-0");
    let named = |node: usize, port: u8| line.contains(&format!("\"{}\" port {port} ", topo.nodes[node].desc));
    let at_or_facing = topo.links.iter().any(|l| {
        (l.a.0 == sw || l.b.0 == sw) && (named(l.a.0, l.a.1) || named(l.b.0, l.b.1))
    });
    assert!(at_or_facing, "{out}");
}

#[test]
fn a_spec_iba_has_no_code_for_is_one_error_line() {
    let (code, _, err) = torus_run(&["--sim-caps", "vls=3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("1, 2, 4, 8 or 15 data VLs"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
