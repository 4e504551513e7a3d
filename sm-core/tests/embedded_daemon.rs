//! `smcore --fabric config/topologies/fat-tree-64.net` is a whole fabric:
//! a simulated host's SA query reaches the running SM's SA through the
//! fabric (`smcore ctl saquery`), and the metrics endpoint shows the port
//! counters the performance manager read from the simulated PMAs.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use common::{ctl, signal, spawn_sm, wait_for};

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// The metrics page, or an empty string while the endpoint is not up.
fn scrape(addr: &str) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else { return String::new() };
    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut page = String::new();
    let _ = s.read_to_string(&mut page);
    page
}

/// The largest value of `counter` over every port on the page.
fn most(page: &str, counter: &str) -> u64 {
    let label = format!("counter=\"{counter}\"}} ");
    page.lines()
        .filter(|l| l.starts_with("smcore_port_counter_total{"))
        .filter_map(|l| l.split_once(&label).and_then(|(_, v)| v.trim().parse().ok()))
        .max()
        .unwrap_or(0)
}

#[test]
fn a_simulated_host_asks_the_running_sa_and_the_metrics_show_port_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("smcore.toml");
    std::fs::write(&conf, "perfmgr = true\nperfmgr_sweep_time_s = 1\npacket_life_time = 20\n").expect("config");
    let socket = dir.path().join("smcore.sock");
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut child = spawn_sm([
        "--config",
        conf.to_str().expect("utf-8"),
        "--control-socket",
        socket.to_str().expect("utf-8"),
        "--metrics-listen",
        metrics.as_str(),
        "--engines",
        "ftree",
        "--sweep-interval",
        "30",
    ]);

    // host-5 asks the SA for its path to host-40, by the SM LID its port
    // was given, through the LFTs; answered once the first sweep is done.
    let ask = || ctl(&socket, &["saquery", "--from", "host-5", "path", "host-40"]);
    wait_for(&mut child, "an SA answer to host-5", || ask().0);
    let (_, text) = ask();
    assert!(text.contains("PathRecord"), "{text}");
    assert!(text.contains("pkey 0xffff"), "{text}");
    let (ok, json) = ctl(&socket, &["--json", "saquery", "--from", "host-5", "path", "host-40"]);
    assert!(ok, "{json}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    assert_eq!(v["status"], 0, "{json}");
    assert_ne!(v["slid"], v["dlid"], "{json}");
    assert_eq!(v["packet_life"], 20, "packet_life_time from the config: {json}");
    // A name that is no host is refused, and says so.
    let (_, wrong) = ctl(&socket, &["saquery", "--from", "no-such-host", "path", "host-40"]);
    assert!(wrong.contains("no host called"), "{wrong}");

    // The performance manager reads the simulated PMAs; its own MADs and
    // the SA traffic move the counters the endpoint shows.
    wait_for(&mut child, "port counters on the metrics endpoint", || {
        let page = scrape(&metrics);
        most(&page, "PortXmitPkts") > 0 && most(&page, "PortRcvData") > 0
    });
    let page = scrape(&metrics);
    assert!(page.contains("smcore_perfmgr_sweeps_total"), "{page}");
    assert!(page.contains("node_desc=\"host-5\""), "every host port is read");

    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_main_job_on_the_embedded_fabric_reports_its_sa_and_pma_working() {
    let net = common::workspace().join("config/topologies/fat-tree-64.net");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(["--fabric", net.to_str().expect("utf-8"), "--once", "--engines", "ftree"])
        .env("SMCORE_ENGINE_PATH", common::bin_dir())
        .output()
        .expect("run smcore");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let sa = stdout.lines().find(|l| l.starts_with("SA ")).unwrap_or_else(|| panic!("no SA line:\n{stdout}"));
    assert!(sa.contains("host-63's PathRecord to the SM") && sa.contains("answered through the fabric"), "{sa}");
    let pma = stdout.lines().find(|l| l.starts_with("PMA ")).unwrap_or_else(|| panic!("no PMA line:\n{stdout}"));
    // The query and its answer crossed host-63's port.
    let count = |word: &str| -> u64 {
        let before = pma.split(word).next().unwrap_or_default();
        before.split_whitespace().last().and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    assert!(count(" packets sent") >= 1 && count(" received") >= 1, "{pma}");
}
