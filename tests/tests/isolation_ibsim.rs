//! An engine that crashes cannot take the SM down under ibsim either: the
//! SM runs as a daemon (umad2sim) with the chain `test-segv,test-exit,
//! minhop` (engine_isolation "process", the default). Every heavy sweep the
//! first two fail in their own process (a signal, an exit), minhop routes,
//! and the SA keeps answering `saquery` from a host.
//!
//! Needs `cargo build --workspace` first (the fixtures are built here), and
//! ibsim-utils, infiniband-diags.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use smcore_tests::fabric_check::client_output;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::sm_run::RunningSm;
use smcore_tests::smcore::{target_dir, workspace_root, Profile, Smcore};

/// The deliberately broken engines, built and copied into `out`.
fn broken_engines(out: &Path) -> PathBuf {
    // The directory scripts/test.sh builds the fixtures into: a no-op there.
    let target = target_dir().join("fixtures");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "smcore-test-engines", "--manifest-path"])
        .arg(workspace_root().join("tests/fixtures/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("run cargo for the fixtures");
    assert!(status.success(), "building the fixtures failed");
    let dir = out.join("engines");
    std::fs::create_dir_all(&dir).expect("engine dir");
    std::fs::copy(target.join("debug/libsmcore_test_engines.so"), dir.join("libsmcore_test_engines.so")).expect("copy");
    dir
}

#[test]
fn the_sm_survives_crashing_engines_and_keeps_serving_the_sa() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("isolation-ibsim-").tempdir().expect("temp dir");
    let engines = broken_engines(tmp.path());
    let net = tmp.path().join("tree.net");
    sm.gen(&["kary-ntree", "--k", "2", "--n", "3"], &net).unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let (dumps, report, socket) = (tmp.path().join("dumps"), tmp.path().join("report.json"), tmp.path().join("sm.sock"));
    let args = [
        "--engine-dir",
        engines.to_str().expect("utf-8"),
        "--engines",
        "test-segv,test-exit,minhop",
        "--sweep-interval",
        "1",
        "--control-socket",
        socket.to_str().expect("utf-8"),
    ];
    let mut run = RunningSm::start(&sim, &sm, &dumps, &report, &args).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1).unwrap_or_else(|e| panic!("{e}"));
    let check = |r: &serde_json::Value| {
        let attempts = r["attempts"].as_array().cloned().unwrap_or_default();
        let reason = |i: usize| attempts.get(i).and_then(|a| a["reason"].as_str()).unwrap_or_default().to_string();
        assert!(reason(0).contains("SIGSEGV"), "{r}");
        assert!(reason(1).contains("exited with status 0"), "{r}");
        assert_eq!(r["engine"], "minhop", "{r}");
    };
    check(&run.report().expect("a report"));

    // The SA answers a host.
    let host = topo.nodes.iter().filter(|n| !n.is_switch()).nth(3).expect("a host");
    let nodes = client_output(&sim, Some(&host.name), "saquery", &["-N"]);
    assert!(nodes.contains("NodeRecord"), "{nodes}");

    // Another heavy sweep: the engines crash again, the SM stays.
    let out = Command::new(sm.bin()).args(["ctl", "--socket"]).arg(&socket).arg("sweep").output().expect("ctl");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ok"));
    run.wait_for("a second heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 2).unwrap_or_else(|e| panic!("{e}"));
    check(&run.report().expect("a report"));
    let nodes = client_output(&sim, Some(&host.name), "saquery", &["-N"]);
    assert!(nodes.contains("NodeRecord"), "{nodes}");
}
