//! ibdmchk (ibutils), run on smcore's own dumps, agrees with smcore's
//! verifier: connectivity everywhere, and the same credit-loop verdict —
//! none on fat trees, present on tori routed by minhop.

mod common;

use common::*;
use sm_core::dump::ibdmchk::{run_ibdmchk, IbdmchkOptions};

/// ibdmchk is needed: a test that skips proves nothing.
fn require_ibdmchk() {
    smcore_test_support::require_tool("ibdmchk");
}

/// Generate, route with minhop, return (smcore's verdict, ibdmchk report).
fn route_and_check(gen: &[&str]) -> (bool, sm_core::dump::ibdmchk::IbdmchkReport, String) {
    let tmp = tempfile::tempdir().unwrap();
    let net = tmp.path().join("fabric.net");
    let mut args = vec!["gen"];
    args.extend_from_slice(gen);
    args.extend_from_slice(&["-o", net.to_str().unwrap()]);
    let (code, _, err) = smcore(&args);
    assert_eq!(code, 0, "gen {gen:?}: {err}");
    let dumps = tmp.path().join("dumps");
    let report = tmp.path().join("report.json");
    let (code, out, err) = smcore(&[
        "route",
        net.to_str().unwrap(),
        "--engines",
        "minhop",
        "--dump-dir",
        dumps.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["pairs"], json["reachable_pairs"], "{out}");
    let ours = json["credit_loops"].as_bool().expect("credit loops checked");
    let theirs = run_ibdmchk(&dumps, &IbdmchkOptions::default()).expect("ibdmchk runs");
    (ours, theirs, out)
}

fn agree(gen: &[&str], expect_loops: bool) {
    require_ibdmchk();
    let (ours, theirs, out) = route_and_check(gen);
    assert!(theirs.routes_ok(), "{gen:?}: ibdmchk finds unreachable pairs:\n{}", theirs.output);
    assert!(theirs.ca_paths_scanned.unwrap_or(0) > 0, "{gen:?}: ibdmchk scanned nothing:\n{}", theirs.output);
    assert_eq!(ours, theirs.has_credit_loop(), "{gen:?}: smcore says loops={ours}, ibdmchk disagrees:\n{out}\n{}", theirs.output);
    assert_eq!(ours, expect_loops, "{gen:?}:\n{out}");
}

#[test]
fn two_level_fat_tree_has_no_credit_loops() {
    agree(&["fat-tree", "--leaves", "6", "--spines", "3", "--hosts-per-leaf", "4", "--uplinks", "3"], false);
}

#[test]
fn three_level_tree_has_no_credit_loops() {
    agree(&["kary-ntree", "--k", "3", "--n", "3"], false);
}

#[test]
fn two_d_torus_has_credit_loops() {
    agree(&["torus", "--dims", "4x4", "--hosts", "1"], true);
}

#[test]
fn three_d_torus_has_credit_loops() {
    agree(&["torus", "--dims", "4x4x3", "--hosts", "1"], true);
}

#[test]
fn random_fabrics_agree_either_way() {
    require_ibdmchk();
    for seed in ["3", "8"] {
        let gen = ["random", "--switches", "12", "--ports", "8", "--hosts", "2", "--extra-links", "8", "--seed", seed];
        let (ours, theirs, out) = route_and_check(&gen);
        assert!(theirs.routes_ok(), "{}", theirs.output);
        assert_eq!(ours, theirs.has_credit_loop(), "seed {seed}:\n{out}\n{}", theirs.output);
    }
}
