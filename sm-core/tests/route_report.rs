//! `smcore route` end to end on the shipped example fabrics: report figures
//! are consistent, LMC multiplies destinations, dumps are written.

mod common;

use common::*;

fn route(args: &[&str]) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("r.json");
    let dumps = tmp.path().join("d");
    let mut a = vec!["route"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--report", report.to_str().unwrap(), "--dump-dir", dumps.to_str().unwrap()]);
    let (code, out, err) = smcore(&a);
    assert_eq!(code, 0, "{out}{err}");
    for f in ["opensm-lfts.dump", "opensm-subnet.lst", "opensm.fdbs", "opensm.mcfdbs", "guid2lid", "opensm-lid-matrix.dump"] {
        assert!(dumps.join(f).is_file(), "{f} missing");
    }
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

fn example(name: &str) -> String {
    workspace().join("config/topologies").join(name).display().to_string()
}

#[test]
fn lmc_two_routes_every_lid_of_every_port() {
    let r = route(&[&example("fat-tree-64.net"), "--lmc", "2"]);
    assert_eq!(r["engine"], "minhop-balanced");
    assert_eq!(r["lmc"], 2);
    assert_eq!(r["end_ports"], 64);
    // 64 sources, each to the 4 LIDs of the 63 other ports.
    assert_eq!(r["pairs"], 64 * 63 * 4);
    assert_eq!(r["reachable_pairs"], r["pairs"]);
    assert_eq!(r["non_minimal_pairs"], 0);
    assert_eq!(r["credit_loops"], false);
}

#[test]
fn torus_report_names_the_credit_loop() {
    let r = route(&[&example("torus-4x4x4.net")]);
    assert_eq!(r["credit_loops"], true);
    assert!(r["credit_loop_example"].as_str().unwrap().starts_with("credit loop through 0x"));
    assert_eq!(r["switches"], 64);
    assert_eq!(r["reachable_pairs"], r["pairs"]);
    assert!(r["max_routes_per_link"].as_u64().unwrap() as f64 >= r["mean_routes_per_link"].as_f64().unwrap());
    for phase in ["parse", "lids", "route", "verify", "dump", "total"] {
        assert!(r["phases_ms"][phase].is_number(), "phase {phase} missing");
    }
}

#[test]
fn engine_list_from_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = write(tmp.path(), "c.toml", "routing_engine = \"minhop\"\nlmc = 1\n");
    let r = route(&[&example("random-24.net"), "--config", cfg.to_str().unwrap()]);
    assert_eq!(r["lmc"], 1);
    assert_eq!(r["reachable_pairs"], r["pairs"]);
}

#[test]
fn gen_writes_torus_config_matching_the_fabric() {
    let tmp = tempfile::tempdir().unwrap();
    let net = tmp.path().join("t.net");
    let conf = tmp.path().join("t.conf");
    let (code, _, err) = smcore(&["gen", "torus", "--dims", "3x4", "--hosts", "2", "-o", net.to_str().unwrap(), "--torus-conf", conf.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let conf = std::fs::read_to_string(conf).unwrap();
    assert!(conf.lines().any(|l| l.trim() == "torus 3 4 1" || l.trim() == "torus 3 4"), "{conf}");
    let topo = sm_topology::parse_file(&net).unwrap();
    assert_eq!(topo.num_switches(), 12);
    let (code, _, err) = smcore(&["gen", "torus", "--dims", "3xq"]);
    assert_eq!(code, 2);
    assert!(err.contains("bad dimension"), "{err}");
}
