//! `smcore shadow` on the embedded fabric: an SM programs the fabric and
//! serves its SA, a shadow looks from another host. The shadow writes
//! nothing (every SMP that reached an SMA was a Get, the switches' tables
//! are as they were), its difference is the difference of the tables, its
//! verdict on the live routing rests on the master's path SLs as its SA
//! gives them, and the binary's loop answers `ctl status`, `ctl explain`
//! and the metrics endpoint.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{bin_dir, workspace};
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::shadow::run::{embedded_host, embedded_master};
use sm_core::shadow::{round, PathSls, ShadowOptions, ShadowReport};
use sm_core::sim::SharedFabric;

fn registry() -> Registry {
    Registry::scan(&[bin_dir()])
}

fn config() -> Config {
    Config::default()
}

/// Every switch's LFT as the fabric holds it, by node GUID.
fn tables(fabric: &SharedFabric) -> BTreeMap<u64, Vec<u8>> {
    let f = fabric.lock();
    (0..f.node_count()).filter_map(|i| f.lft(i).map(|t| (f.topology().nodes[i].node_guid, t.to_vec()))).collect()
}

/// The index of node `guid` in a round's snapshot.
fn index(live: &sm_core::shadow::Live, guid: u64) -> u32 {
    live.live.snapshot.nodes.iter().position(|n| n.guid == guid).expect("a node of the snapshot") as u32
}

/// One shadow round from the last host, path SLs from the master's SA
/// unless `sa` is false.
fn shadow(fabric: &SharedFabric, engines: &str, config: &Config, sa: bool) -> (ShadowReport, sm_core::shadow::Live) {
    let at = embedded_host(fabric, None).expect("a host");
    let settings = config.route_settings();
    let options = ShadowOptions { engines, settings: &settings, retries: 3, expect: None };
    let mut port = fabric.smp_port_at(at);
    let mut agent = fabric.agent(at);
    let sls = if sa {
        PathSls::Sa { agent: &mut agent, limit: usize::MAX, timeout: Duration::from_secs(2) }
    } else {
        PathSls::Zero
    };
    round(&mut port, sls, &registry(), &options).expect("a round")
}

#[test]
fn a_round_writes_nothing_and_finds_no_difference_from_the_same_engine() {
    let topo = workspace().join("config/topologies/fat-tree-64.net");
    let config = config();
    let master = embedded_master(&topo, "ftree", &registry(), &config).expect("the master");
    let before = tables(&master.fabric);
    master.fabric.lock().reset_counters();

    let (report, live) = shadow(&master.fabric, "ftree", &config, true);

    let counters = master.fabric.lock().counters().clone();
    let writes: u64 = counters.by_attribute.values().map(|a| a.set + a.other).sum();
    assert_eq!(writes, 0, "an SMA received something other than a Get: {:?}", counters.by_attribute);
    assert_eq!(counters.sent, report.read.gets, "every SMP that reached the fabric went through the read-only port");
    assert_eq!(report.read.refused, 0);
    assert_eq!(tables(&master.fabric), before, "a switch's LFT changed");
    assert_eq!(report.read.lfts, before.len());
    // The live routing read is the one programmed.
    for (&guid, held) in &before {
        let read = live.live.lft(index(&live, guid)).expect("an LFT read");
        assert_eq!(&read[..held.len().min(read.len())], &held[..held.len().min(read.len())], "switch {guid:#x}");
    }
    let diff = report.diff.as_ref().expect("smcore routed");
    assert_eq!(diff.entries_differ, 0, "{}", report.render());
    assert!(report.live.sound() && report.live.pairs == 64 * 63, "{}", report.render());
    assert_eq!(report.path_sl.known, 64 * 63, "{}", report.render());
    assert_eq!(report.smcore.as_ref().map(|v| v.busiest_link), Some(report.live.busiest_link));
}

#[test]
fn the_difference_is_the_difference_of_the_tables() {
    let topo = workspace().join("config/topologies/fat-tree-64.net");
    let config = config();
    let master = embedded_master(&topo, "minhop", &registry(), &config).expect("the master");
    let (report, live) = shadow(&master.fabric, "ftree", &config, true);
    let ours = live.smcore.as_ref().expect("smcore routed");
    assert_eq!(ours.engine, "ftree");
    // Counted here from the fabric's own tables and smcore's routing, over
    // every LID in use.
    let lids: Vec<u16> = live
        .live
        .snapshot
        .ports
        .iter()
        .filter(|p| p.lid != 0)
        .map(|p| p.lid)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let held = tables(&master.fabric);
    let mut differ = 0u64;
    for (&guid, table) in &held {
        let mine = ours.lft(index(&live, guid)).expect("smcore routes every switch");
        for &lid in &lids {
            let at = |t: &[u8]| t.get(usize::from(lid)).copied().unwrap_or(0xFF);
            if at(table) != at(mine) {
                differ += 1;
            }
        }
    }
    let diff = report.diff.as_ref().expect("a difference");
    assert!(differ > 0);
    assert_eq!(diff.entries_differ, differ, "{}", report.render());
    assert_eq!(diff.entries_compared, (held.len() * lids.len()) as u64);
    assert_eq!(diff.switches.iter().map(|s| s.entries).sum::<u64>(), differ);
}

#[test]
fn the_live_verdict_rests_on_the_masters_path_sls() {
    // A ring of 6: paths of two hops cross the dateline, so without the
    // SLs that move them to another VL the ring's channels close a cycle.
    let dir = tempfile::tempdir().expect("temp dir");
    let (topo, conf) = (dir.path().join("torus.net"), dir.path().join("torus-2QoS.conf"));
    let gen = std::process::Command::new(bin_dir().join("smcore"))
        .args(["gen", "torus", "--dims", "6x4x3", "--hosts", "1", "--torus-conf"])
        .arg(&conf)
        .arg("-o")
        .arg(&topo)
        .status()
        .expect("smcore gen");
    assert!(gen.success());
    let mut config = Config::default();
    config.set_option("torus_config", conf.display().to_string());
    let master = embedded_master(&topo, "torus-2QoS,no_fallback", &registry(), &config).expect("the master");
    assert_eq!(master.engine, "torus-2QoS");
    let (report, _) = shadow(&master.fabric, "torus-2QoS", &config, true);
    assert!(report.path_sl.by_sl.keys().any(|&sl| sl != 0), "{}", report.render());
    assert_eq!(report.path_sl.known, report.path_sl.pairs);
    assert_eq!(report.live.credit_loops, Some(false), "{}", report.render());
    assert!(report.live.vls_used >= 2, "{}", report.render());
    let diff = report.diff.as_ref().expect("a difference");
    assert_eq!((diff.entries_differ, diff.sl_differ), (0, 0), "{}", report.render());
    // The same tables with every path on SL 0: torus-2QoS's deadlock
    // freedom rests on its SLs, and the verdict sees it.
    let (blind, _) = shadow(&master.fabric, "torus-2QoS", &config, false);
    assert_eq!(blind.live.credit_loops, Some(true), "{}", blind.render());
    assert_eq!(blind.path_sl.source, "SL 0 assumed");
}

#[test]
fn the_loop_answers_ctl_explain_and_metrics_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("shadow.sock");
    let report = dir.path().join("shadow.json");
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let bin = bin_dir().join("smcore");
    let mut child = std::process::Command::new(&bin)
        .args(["shadow", "--fabric"])
        .arg(workspace().join("config/topologies/fat-tree-64.net"))
        .args(["--master-engines", "minhop", "--engines", "ftree", "--sweep-interval", "30", "--control-socket"])
        .arg(&socket)
        .arg("--report")
        .arg(&report)
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("smcore shadow");
    let ctl = |words: &[&str]| -> String {
        let out =
            std::process::Command::new(&bin).arg("ctl").arg("--socket").arg(&socket).args(words).output().expect("smcore ctl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = String::new();
    while Instant::now() < deadline {
        status = ctl(&["status"]);
        if status.contains("rounds: 1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(status.contains("role: shadow") && status.contains("rounds: 1"), "{status}");
    assert!(status.contains("difference: ") && !status.contains("difference: 0 of"), "{status}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("JSON");
    assert_eq!(json["read"]["refused"], 0);

    // A path explained on the live routing: the master's minhop.
    let explained = ctl(&["explain", "host-3", "host-40"]);
    assert!(explained.contains("live (the master's, as read)"), "{explained}");
    assert!(explained.contains("host-40"), "{explained}");

    let mut http = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics");
    http.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").expect("request");
    let mut body = String::new();
    http.read_to_string(&mut body).expect("answer");
    assert!(body.contains("smcore_shadow_rounds 1"), "{body}");
    let line = body.lines().find(|l| l.starts_with("smcore_shadow_lft_entries_differ ")).unwrap_or_else(|| panic!("{body}"));
    assert_eq!(line.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()), json["diff"]["entries_differ"].as_f64());

    let term = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "the shadow did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the control socket is removed at exit");
}
