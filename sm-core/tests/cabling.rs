//! `smcore check`: the embedded fabric read through a read-only port and
//! compared with the topology file it was built from, pristine and with a
//! cable pulled or a link trained narrower than the file says.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use sm_core::cabling::{self, Cabling, CablingReport};
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::SweepOptions;
use sm_topology::Topology;

fn fat_tree() -> PathBuf {
    common::workspace().join("config/topologies/fat-tree-64.net")
}

/// The embedded fabric of `topo`, with the SM where `smcore --fabric` puts
/// it.
fn sim(topo: &Topology) -> SimFabric {
    let (node, port) = common::sm_location(topo);
    SimFabric::from_topology(topo, node, port).expect("fabric builds")
}

/// Reads `fabric` as `smcore check` does and compares it with `expected`;
/// asserts that nothing but SubnGets left the port and that no SMA saw a
/// Set.
fn check(expected: &Cabling, fabric: &mut SimFabric) -> CablingReport {
    fabric.reset_counters();
    let observed = {
        let mut port = SimPort::new(fabric);
        cabling::observe(&mut port, &SweepOptions::default()).expect("the fabric reads")
    };
    assert_eq!(observed.port.refused, 0, "the read-only port refused nothing: discovery sends Gets only");
    assert!(observed.port.gets > 0);
    let counters = fabric.counters();
    assert_eq!(counters.sent, observed.port.gets, "every SMP that reached the fabric went through the read-only port");
    let sets: u64 = counters.by_attribute.values().map(|a| a.set + a.other).sum();
    assert_eq!(sets, 0, "no SMA received anything but a Get: {:?}", counters.by_attribute);
    assert_eq!(counters.trap_represses, 0);
    assert!(!observed.fabric.incomplete);
    cabling::check_fabric(expected, &observed.fabric)
}

/// A link between two switches: (node, port) of each end.
fn switch_link(topo: &Topology) -> ((usize, u8), (usize, u8)) {
    let l = topo
        .links
        .iter()
        .find(|l| topo.nodes[l.a.0].is_switch() && topo.nodes[l.b.0].is_switch())
        .expect("a switch-switch link");
    (l.a, l.b)
}

#[test]
fn a_pristine_embedded_fabric_matches_its_file() {
    let topo = sm_topology::parse_file(fat_tree()).expect("parses");
    let expected = cabling::load_expected(&fat_tree()).expect("loads");
    let mut fabric = sim(&topo);
    let report = check(&expected, &mut fabric);
    assert!(report.is_clean(), "{}", report.render());
    assert_eq!((report.found_nodes, report.found_links), (topo.nodes.len(), topo.links.len()));
    // Nothing was written: no port got a LID, none left Init.
    for n in 0..topo.nodes.len() {
        assert_eq!(fabric.port_lid(n, if topo.nodes[n].is_switch() { 0 } else { 1 }), Some(0), "node {n}");
    }
}

#[test]
fn a_cable_pulled_between_switches_is_a_missing_link_naming_both_ends() {
    let topo = sm_topology::parse_file(fat_tree()).expect("parses");
    let expected = cabling::load_expected(&fat_tree()).expect("loads");
    let mut fabric = sim(&topo);
    let (a, b) = switch_link(&topo);
    fabric.link_down(a.0, a.1).expect("the cable pulls");
    let report = check(&expected, &mut fabric);
    assert_eq!(report.differences(), 1, "{}", report.render());
    let missing = &report.missing_links[0];
    let ends = [(missing.a.guid, missing.a.port), (missing.b.guid, missing.b.port)];
    let want = [(topo.nodes[a.0].node_guid, a.1), (topo.nodes[b.0].node_guid, b.1)];
    assert!(ends == want || ends == [want[1], want[0]], "{ends:x?} is not {want:x?}");
    let text = report.render();
    for (node, port) in [a, b] {
        let named = format!("{:#018x} {:?} port {port}", topo.nodes[node].node_guid, topo.nodes[node].desc);
        assert!(text.contains(&named), "{named} not in:\n{text}");
    }
    assert!(text.starts_with("1 difference:") && text.contains("missing links:\n"), "{text}");
    // Plugged back in, the fabric matches again.
    fabric.link_up(a.0, a.1).expect("the cable plugs");
    assert!(check(&expected, &mut fabric).is_clean());
}

#[test]
fn a_link_trained_at_1x_where_the_file_says_4x_is_degraded() {
    let topo = sm_topology::parse_file(fat_tree()).expect("parses");
    let expected = cabling::load_expected(&fat_tree()).expect("loads");
    let (a, b) = switch_link(&topo);
    let mut narrow = topo.clone();
    let link = narrow.links.iter_mut().find(|l| l.a == a && l.b == b).expect("the link");
    assert_eq!(link.width, 4, "the file says 4x");
    link.width = 1;
    let mut fabric = sim(&narrow);
    let report = check(&expected, &mut fabric);
    assert_eq!(report.differences(), 1, "{}", report.render());
    let d = &report.degraded_links[0];
    assert_eq!((d.width, d.expected_width, d.expected_from), (1, 4, "file"));
    assert_eq!((d.rate.as_str(), d.expected_rate.as_str()), ("1xQDR", "4xQDR"));
    assert_eq!(
        [(d.a.guid, d.a.port), (d.b.guid, d.b.port)],
        [(topo.nodes[a.0].node_guid, a.1), (topo.nodes[b.0].node_guid, b.1)]
    );
}

#[test]
fn a_file_without_rates_is_held_to_what_the_ports_support() {
    // The embedded fabric's ports support 1x and the cable's width: a
    // link trained at 1x on ports that support 4x is degraded even when
    // the file says nothing of rates.
    let text = "Switch 4 \"S-0000000000000010\" # \"sw-a\"\n[1] \"S-0000000000000020\"[1]\n[2] \"H-0000000000000001\"[1]\n\n\
                Switch 4 \"S-0000000000000020\" # \"sw-b\"\n[1] \"S-0000000000000010\"[1]\n[2] \"H-0000000000000002\"[1]\n\n\
                Ca 1 \"H-0000000000000001\" # \"h1\"\n[1] \"S-0000000000000010\"[2]\n\n\
                Ca 1 \"H-0000000000000002\" # \"h2\"\n[1] \"S-0000000000000020\"[2]\n";
    let (topo, stated) = sm_topology::parse_str_stated(text, "plain").expect("parses");
    assert!(stated.is_empty());
    let expected = Cabling::from_topology(&topo, &stated);
    let mut narrow = topo.clone();
    let (a, b) = switch_link(&topo);
    narrow.links.iter_mut().filter(|l| (l.a, l.b) == (a, b)).for_each(|l| l.width = 1);
    let mut fabric = sim(&narrow);
    let report = check(&expected, &mut fabric);
    // Every simulated port claims the extended speeds (up to NDR) and
    // runs at QDR: each link is below what its ports support, the one
    // trained at 1x in width as well.
    assert_eq!(report.differences(), 3, "{}", report.render());
    assert_eq!(report.degraded_links.len(), 3);
    for d in &report.degraded_links {
        assert_eq!((d.expected_from, d.expected_rate.as_str()), ("ports", "4xNDR"));
        let is_narrow = d.a.description == "sw-a" && d.b.description == "sw-b";
        assert_eq!(d.rate, if is_narrow { "1xQDR" } else { "4xQDR" });
    }
}

fn smcore(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smcore")).args(args).output().expect("run smcore");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn the_command_exits_0_on_a_pristine_fabric_1_on_another_2_on_bad_input() {
    let tree = fat_tree();
    let (code, out) = smcore(&["check", "--expect", path(&tree), "--fabric", path(&tree)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("cabling as expected: 76 nodes, 96 links expected; 76 nodes, 96 links found"), "{out}");
    let (code, out) = smcore(&["check", "--expect", path(&tree), "--fabric", path(&tree), "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(v["clean"], true);
    assert_eq!(v["smps"]["refused"], 0);
    assert!(v["smps"]["gets"].as_u64().is_some_and(|g| g > 0));
    // Another fabric than the file: every kind of node difference.
    let other = common::workspace().join("config/topologies/4-ary-3-tree.net");
    let (code, out) = smcore(&["check", "--expect", path(&tree), "--fabric", path(&other), "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(v["clean"], false);
    assert!(v["unexpected_nodes"].as_array().is_some_and(|n| !n.is_empty()));
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = common::write(dir.path(), "bad.net", "Switch 2 \"sw\"\n[3] \"h\"[1]\n");
    let (code, _) = smcore(&["check", "--expect", path(&bad), "--fabric", path(&tree)]);
    assert_eq!(code, 2);
}

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// The metrics page, or an empty string while the endpoint is not up.
fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return String::new() };
    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut page = String::new();
    let _ = s.read_to_string(&mut page);
    page
}

#[test]
fn the_running_sm_compares_after_each_heavy_sweep_and_warns_once() {
    // The file the SM is told to expect lacks a link between two
    // switches that the fabric has: an extra link.
    let topo = sm_topology::parse_file(fat_tree()).expect("parses");
    let (a, b) = switch_link(&topo);
    let mut fewer = topo.clone();
    fewer.links.retain(|l| (l.a, l.b) != (a, b));
    let dir = tempfile::tempdir().expect("tempdir");
    let expected = common::write(dir.path(), "expected.net", &sm_topology::emit::to_net_string(&fewer).expect("emits"));
    let conf = common::write(dir.path(), "smcore.toml", &format!("expect_topology = {:?}\n", path(&expected)));
    let socket = dir.path().join("smcore.sock");
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut child = common::spawn_sm([
        "--config",
        path(&conf),
        "--control-socket",
        path(&socket),
        "--metrics-listen",
        metrics.as_str(),
        "--sweep-interval",
        "30",
    ]);
    common::wait_for(&mut child, "the cabling gauge", || scrape(&metrics).contains("smcore_cabling_differences{kind=\"extra_link\"} 1"));
    let page = scrape(&metrics);
    for kind in cabling::KINDS.iter().filter(|&&k| k != "extra_link") {
        assert!(page.contains(&format!("smcore_cabling_differences{{kind=\"{kind}\"}} 0")), "{kind}:\n{page}");
    }
    let (_, status) = common::ctl(&socket, &["status"]);
    assert!(status.contains("cabling: 1 difference"), "{status}");
    // Two more heavy sweeps find the same difference: it is not logged again.
    for n in [2, 3] {
        assert!(common::ctl(&socket, &["sweep"]).0);
        common::wait_for(&mut child, "another heavy sweep", || common::ctl(&socket, &["status"]).1.contains(&format!("heavy_sweeps: {n}")));
    }
    assert!(scrape(&metrics).contains("smcore_cabling_differences{kind=\"extra_link\"} 1"));
    common::signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().expect("wait");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("cabling: extra link")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    for (node, port) in [a, b] {
        let named = format!("{:#018x} {:?} port {port}", topo.nodes[node].node_guid, topo.nodes[node].desc);
        assert!(warnings[0].contains(&named), "{named} not in {}", warnings[0]);
    }
}
