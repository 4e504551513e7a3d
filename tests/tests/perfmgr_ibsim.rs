//! The performance manager under ibsim, whose PMAs answer PortCounters
//! and PortCountersExtended: counters set on ibsim's console
//! (`PerformanceSet`) show up as deltas in `smcore ctl perfmgr` and in the
//! metrics a real Prometheus server scrapes from the SM, a threshold
//! crossing is logged once, and a counter past half its range is cleared
//! on the port (read back with `perfquery`).
//!
//! Needs `cargo build --workspace` first, and ibsim-utils,
//! infiniband-diags and prometheus.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smcore_tests::diags::Generated;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::sm_run::RunningSm;

fn ctl(bin: &Path, socket: &Path, command: &str) -> String {
    let out = Command::new(bin).args(["ctl", "--socket"]).arg(socket).arg(command).output().expect("smcore ctl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sweeps the manager has done, from `ctl perfmgr`'s first line.
fn perf_sweeps(report: &str) -> u64 {
    report
        .strip_prefix("perfmgr: ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn perfquery_field(sim: &Ibsim, lid: u16, port: u8, field: &str) -> Option<u64> {
    let out = sim
        .client_command("perfquery")
        .expect("perfquery")
        .args([lid.to_string(), port.to_string()])
        .stderr(Stdio::null())
        .output()
        .expect("run perfquery");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix(field).map(|rest| rest.trim_start_matches(':').trim_start_matches('.').trim()))
        .and_then(|v| v.parse().ok())
}

/// The LID `ctl perfmgr` lists port `port` of node `guid` under.
fn lid_in_report(report: &str, guid: u64, port: u8) -> u16 {
    let head = format!("port {guid:#018x} ");
    report
        .lines()
        .filter(|l| l.starts_with(&head))
        .find_map(|l| {
            let (before, after) = l.split_once(" lid ")?;
            (before.rsplit(' ').next()? == port.to_string()).then_some(())?;
            after.split(':').next()?.trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("port {port} of {guid:#x} not in:\n{report}"))
}

/// A free loopback port (bound and released; good enough for a test).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A Prometheus server scraping `target` every second; killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(dir: &Path, target: &str) -> Prometheus {
        let bin = smcore_test_support::require_tool("prometheus");
        let conf = dir.join("prometheus.yml");
        std::fs::write(
            &conf,
            format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: smcore\n    static_configs:\n      - targets: ['{target}']\n"),
        )
        .expect("write prometheus.yml");
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        Prometheus { child, port }
    }

    /// The value of the instant query `query`, if it has one sample.
    fn query(&self, query: &str) -> Option<f64> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let encoded: String = query
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() || b == b'_' { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        write!(s, "GET /api/v1/query?query={encoded} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let body = text.split_once("\r\n\r\n")?.1;
        let json: serde_json::Value = serde_json::from_str(body).ok()?;
        let result = json["data"]["result"].as_array()?;
        (result.len() == 1).then(|| result[0]["value"][1].as_str()?.parse().ok())?
    }

    fn wait_for(&self, query: &str, want: f64, sm: &mut RunningSm) {
        let deadline = Instant::now() + Duration::from_secs(60);
        sm.wait_for(&format!("prometheus to see {query} = {want}"), Duration::from_secs(60), |_| {
            assert!(Instant::now() < deadline);
            self.query(query) == Some(want)
        })
        .unwrap_or_else(|e| panic!("{e}\nlast value: {:?}", self.query(query)));
    }
}

#[test]
fn counters_set_on_the_simulator_become_deltas_events_and_clears() {
    let fabric = Generated::fat_tree("perfmgr-ibsim-", 2, 1, 2, 1).unwrap_or_else(|e| panic!("{e}"));
    let (sm, tmp, net, topo) = (&fabric.sm, fabric.dir(), &fabric.net, &fabric.topo);
    let sim = Ibsim::start(net).unwrap_or_else(|e| panic!("{e}"));
    let conf = tmp.join("smcore.toml");
    std::fs::write(&conf, "perfmgr = true\nperfmgr_sweep_time_s = 1\n").expect("write config");
    let socket = tmp.join("smcore.sock");
    let dumps = tmp.join("dumps");
    let report = tmp.join("report.json");
    let metrics = format!("127.0.0.1:{}", free_port());
    let extra = [
        "--metrics-listen",
        metrics.as_str(),
        "--config",
        conf.to_str().expect("utf-8"),
        "--control-socket",
        socket.to_str().expect("utf-8"),
        "--sweep-interval",
        "30",
        "--log",
        "warn",
    ];
    let mut run = RunningSm::start(&sim, sm, &dumps, &report, &extra).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("a first perfmgr sweep", Duration::from_secs(30), |_| perf_sweeps(&ctl(sm.bin(), &socket, "perfmgr")) >= 1)
        .unwrap_or_else(|e| panic!("{e}"));

    let prometheus = Prometheus::start(tmp, &metrics);
    prometheus.wait_for("smcore_heavy_sweeps_total", 1.0, &mut run);

    // A host that is not the SM's (the SM's counters move with its own
    // MADs), and a switch port facing a host.
    let hosts: Vec<usize> = topo.nodes.iter().enumerate().filter(|(_, n)| !n.is_switch()).map(|(i, _)| i).collect();
    let host = hosts[1];
    let (leaf, leaf_port) = topo.peer(host, 1).expect("the host's leaf");
    let host_name = &topo.nodes[host].name;
    let leaf_name = &topo.nodes[leaf].name;
    for cmd in [
        format!("PerformanceSet \"{host_name}\"[1] PortCounters.SymbolErrorCounter=50"),
        format!("PerformanceSet \"{leaf_name}\"[{leaf_port}] PortCounters.LinkDownedCounter=200"),
    ] {
        sim.send(&cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
    let host_guid = topo.nodes[host].node_guid;
    let leaf_guid = topo.nodes[leaf].node_guid;
    let symbol_event = format!("SymbolErrorCounter +50 in one interval (threshold 10) on {host_guid:#018x}");
    let downed_event = format!("LinkDownedCounter +200 in one interval (threshold 1) on {leaf_guid:#018x}");
    run.wait_for("both events", Duration::from_secs(30), |_| {
        let r = ctl(sm.bin(), &socket, "perfmgr");
        r.contains(&symbol_event) && r.contains(&downed_event)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let at_event = perf_sweeps(&ctl(sm.bin(), &socket, "perfmgr"));
    run.wait_for("three more perfmgr sweeps", Duration::from_secs(30), |_| {
        perf_sweeps(&ctl(sm.bin(), &socket, "perfmgr")) >= at_event + 3
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let text = ctl(sm.bin(), &socket, "perfmgr");
    // The deltas: nothing since; the totals keep what happened.
    assert!(text.contains("SymbolErrorCounter=0/50"), "{text}");
    assert!(text.contains("LinkDownedCounter=0/200"), "{text}");

    // The same totals, scraped from the SM by Prometheus.
    prometheus.wait_for(
        &format!("smcore_port_counter_total{{node_guid=\"{host_guid:#018x}\",port=\"1\",counter=\"SymbolErrorCounter\"}}"),
        50.0,
        &mut run,
    );
    prometheus.wait_for(
        &format!("smcore_port_counter_total{{node_guid=\"{leaf_guid:#018x}\",port=\"{leaf_port}\",counter=\"LinkDownedCounter\"}}"),
        200.0,
        &mut run,
    );
    prometheus.wait_for("smcore_perfmgr_events_total", 2.0, &mut run);

    // 200 is past half of the 8-bit LinkDownedCounter: the manager
    // cleared the port; 50 of 65535 symbol errors stay on theirs.
    let leaf_lid = lid_in_report(&text, leaf_guid, leaf_port);
    let host_lid = lid_in_report(&text, host_guid, 1);
    assert_eq!(perfquery_field(&sim, leaf_lid, leaf_port, "LinkDownedCounter"), Some(0), "cleared");
    assert_eq!(perfquery_field(&sim, host_lid, 1, "SymbolErrorCounter"), Some(50), "left alone");

    let (status, output) = run.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{status}\n{output}");
    let logged: Vec<&str> = output.lines().filter(|l| l.contains("port counter threshold crossed")).collect();
    assert_eq!(logged.len(), 2, "one line per crossing:\n{output}");
    assert!(logged.iter().any(|l| l.contains(&symbol_event)), "{logged:?}");
}

/// PortPhysicalState of `port` of the node at `lid`, as `smpquery portinfo`
/// prints it (`PhysLinkState:...Disabled`).
fn phys_state(sim: &Ibsim, lid: u16, port: u8) -> String {
    let out = sim
        .client_command("smpquery")
        .expect("smpquery")
        .args(["portinfo", &lid.to_string(), &port.to_string()])
        .stderr(Stdio::null())
        .output()
        .expect("run smpquery");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("PhysLinkState:").map(|v| v.trim_start_matches('.').trim().to_string()))
        .unwrap_or_else(|| format!("(no PhysLinkState in {text:?})"))
}

/// The isolation policy (issue 32, item 3): one LinkDownedCounter step (a
/// reboot) isolates nothing; errors that go on, read after read, disable a
/// link the SM can do without and never one it needs (a host's only
/// cable); the disabled link is enabled again after its hold.
#[test]
fn the_isolation_policy_needs_sustained_errors_spares_what_the_sm_needs_and_is_undone() {
    let fabric = Generated::fat_tree("perfmgr-isolate-", 2, 2, 2, 2).unwrap_or_else(|e| panic!("{e}"));
    let (sm, tmp, net, topo) = (&fabric.sm, fabric.dir(), &fabric.net, &fabric.topo);
    let sim = Ibsim::start(net).unwrap_or_else(|e| panic!("{e}"));
    let conf = tmp.join("smcore.toml");
    std::fs::write(&conf, "perfmgr = true\nperfmgr_sweep_time_s = 1\nperfmgr_isolate_ports = true\n").expect("write config");
    let socket = tmp.join("smcore.sock");
    let dumps = tmp.join("dumps");
    let report = tmp.join("report.json");
    let extra = ["--config", conf.to_str().expect("utf-8"), "--control-socket", socket.to_str().expect("utf-8"), "--log", "warn"];
    let mut run = RunningSm::start(&sim, sm, &dumps, &report, &extra).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("a first perfmgr sweep", Duration::from_secs(30), |_| perf_sweeps(&ctl(sm.bin(), &socket, "perfmgr")) >= 1)
        .unwrap_or_else(|e| panic!("{e}"));

    let hosts: Vec<usize> = topo.nodes.iter().enumerate().filter(|(_, n)| !n.is_switch()).map(|(i, _)| i).collect();
    let uplink = |leaf: usize| {
        (1..=topo.nodes[leaf].num_ports)
            .find(|&p| topo.peer(leaf, p).is_some_and(|(n, _)| topo.nodes[n].is_switch()))
            .expect("an uplink")
    };
    // The SM runs on the first host.
    let (sm_leaf, _) = topo.peer(hosts[0], 1).expect("the SM's leaf");
    let sm_uplink = uplink(sm_leaf);
    let far_host = *hosts.iter().find(|&&h| topo.peer(h, 1).is_some_and(|(l, _)| l != sm_leaf)).expect("a host elsewhere");
    let (far_leaf, far_host_port) = topo.peer(far_host, 1).expect("its leaf");
    let far_uplink = uplink(far_leaf);
    let set = |node: usize, port: u8, counter: &str, value: u64| {
        let cmd = format!("PerformanceSet \"{}\"[{port}] PortCounters.{counter}={value}", topo.nodes[node].name);
        sim.send(&cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    };
    let sweeps = || perf_sweeps(&ctl(sm.bin(), &socket, "perfmgr"));

    // A reboot's worth: one step each on the SM leaf's uplink and a host's
    // cable, then several reads.
    set(sm_leaf, sm_uplink, "LinkDownedCounter", 1);
    set(far_leaf, far_host_port, "LinkDownedCounter", 1);
    let at = sweeps();
    run.wait_for("five perfmgr sweeps", Duration::from_secs(30), |_| sweeps() >= at + 5).unwrap_or_else(|e| panic!("{e}"));
    let text = ctl(sm.bin(), &socket, "perfmgr");
    let sm_leaf_lid = lid_in_report(&text, topo.nodes[sm_leaf].node_guid, sm_uplink);
    let far_leaf_lid = lid_in_report(&text, topo.nodes[far_leaf].node_guid, far_host_port);
    assert!(phys_state(&sim, sm_leaf_lid, sm_uplink).contains("LinkUp"), "one step isolates nothing");
    assert!(phys_state(&sim, far_leaf_lid, far_host_port).contains("LinkUp"), "one step isolates nothing");

    // Symbol errors read after read on the far leaf's uplink (it has a
    // twin) and on the far host's only cable.
    let mut errors = 0;
    for _ in 0..6 {
        errors += 50;
        set(far_leaf, far_uplink, "SymbolErrorCounter", errors);
        set(far_leaf, far_host_port, "SymbolErrorCounter", errors);
        let at = sweeps();
        run.wait_for("the next perfmgr sweep", Duration::from_secs(30), |_| sweeps() > at).unwrap_or_else(|e| panic!("{e}"));
        if phys_state(&sim, far_leaf_lid, far_uplink).contains("Disabled") {
            break;
        }
    }
    run.wait_for("the failing uplink disabled", Duration::from_secs(30), |_| {
        phys_state(&sim, far_leaf_lid, far_uplink).contains("Disabled")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(phys_state(&sim, far_leaf_lid, far_host_port).contains("LinkUp"), "the host's only cable stays up");
    // The hold over (10 intervals of 1 s), the uplink trains again.
    run.wait_for("the uplink enabled again", Duration::from_secs(60), |_| {
        !phys_state(&sim, far_leaf_lid, far_uplink).contains("Disabled")
    })
    .unwrap_or_else(|e| panic!("{e}"));

    let (status, output) = run.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{status}\n{output}");
    assert_eq!(output.matches("port isolated").count(), 1, "{output}");
    assert!(output.contains("port isolation over"), "{output}");
    assert!(output.contains("failing link not isolated: without it the SM would lose part of the fabric"), "{output}");
}
