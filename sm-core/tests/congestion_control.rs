//! Congestion control (OpenSM's `congestion_control` and `cc_*` keys) on
//! the embedded fabric: after a routed sweep every switch holds the
//! configured SwitchCongestionSetting and every CA port the configured
//! CACongestionSetting and CongestionControlTable; a second pass sends
//! nothing, a node that comes back is sent everything again; a node with
//! another CC_Key is reported and the others are programmed all the same;
//! with the key off nothing is sent. Each key's bad values are errors
//! naming the line.
//!
//! Needs `cargo build --workspace` (the engines, the smcore binary).

mod common;

use common::{bin_dir, sm_location, smcore, workspace, write};
use sm_core::cc::{CcManager, CcSettings};
use sm_core::config::Config;
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_core::sim::{SharedFabric, SimFabric};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_mad::cc::ShiftMultiplier;

/// Every `cc_*` key as a site would write them in opensm.conf, with
/// values that differ from the defaults; 70 CCT entries: two blocks.
fn site_conf(key: u64) -> String {
    let cct: Vec<String> = (0..70).map(|i| format!("{}:{}", i % 4, 100 + i)).collect();
    format!(
        "congestion_control TRUE\n\
         cc_key {key:#x}\n\
         cc_max_outstanding_mads 4\n\
         cc_sw_cong_setting_control_map 0x1f\n\
         cc_sw_cong_setting_victim_mask 0x1fffe\n\
         cc_sw_cong_setting_credit_mask 0x6\n\
         cc_sw_cong_setting_threshold 0xa\n\
         cc_sw_cong_setting_packet_size 8\n\
         cc_sw_cong_setting_credit_starvation_threshold 0x3\n\
         cc_sw_cong_setting_credit_starvation_return_delay 2:300\n\
         cc_sw_cong_setting_marking_rate 17\n\
         cc_ca_cong_setting_port_control 0x0001\n\
         cc_ca_cong_setting_control_map 0xffff\n\
         cc_ca_cong_setting_ccti_timer 0 150\n\
         cc_ca_cong_setting_ccti_timer 3 0x200\n\
         cc_ca_cong_setting_ccti_increase 0 1\n\
         cc_ca_cong_setting_ccti_increase 15 9\n\
         cc_ca_cong_setting_trigger_threshold 1 7\n\
         cc_ca_cong_setting_ccti_min 2 5\n\
         cc_cct {}\n",
        cct.join(",")
    )
}

fn settings(text: &str) -> CcSettings {
    let tmp = tempfile::tempdir().expect("tmp");
    let path = write(tmp.path(), "opensm.conf", text);
    let config = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.not_supported.is_empty(), "{:?}", config.not_supported);
    let mut s = CcSettings::from_config(&config).expect("valid").expect("on");
    // A silent port costs tries x timeout: keep the tests quick.
    s.timeout = std::time::Duration::from_millis(100);
    s.retries = 1;
    s
}

/// fat-tree-64.net on the embedded fabric, swept and routed by minhop.
fn routed() -> (SharedFabric, OnceOutcome, HeldTables, Guid2Lid) {
    let topo = sm_topology::parse_file(workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    let fabric = SharedFabric::new(SimFabric::from_topology(&topo, node, port).expect("sim"));
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = sweep(&fabric, &mut g2l, &mut held);
    (fabric, out, held, g2l)
}

fn sweep(fabric: &SharedFabric, g2l: &mut Guid2Lid, held: &mut HeldTables) -> OnceOutcome {
    let registry = sm_core::engines::Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None };
    let out = sm_core::pipeline::once(&mut fabric.smp_port(), &options, &registry, &Config::default(), g2l, held)
        .expect("sweep");
    assert!(out.accepted.is_some(), "{:?}", out.describe());
    out
}

/// A GSI agent that counts the requests in flight (sent, not yet
/// answered) and keeps the most it saw.
struct Counting<A> {
    inner: A,
    in_flight: usize,
    most: usize,
}

impl<A: sm_transport::gmp::GmpAgent> sm_transport::gmp::GmpAgent for Counting<A> {
    fn send(&mut self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), sm_transport::port::TransportError> {
        self.in_flight += 1;
        self.most = self.most.max(self.in_flight);
        self.inner.send(dlid, dqpn, mad, timeout_ms)
    }

    fn receive(&mut self, deadline: std::time::Instant) -> Result<Option<(u16, Vec<u8>)>, sm_transport::port::TransportError> {
        let got = self.inner.receive(deadline)?;
        if got.is_some() {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        Ok(got)
    }
}

fn program(fabric: &SharedFabric, manager: &mut CcManager, out: &OnceOutcome) -> sm_core::cc::CcReport {
    let sm = fabric.lock().sm_location();
    let mut agent = fabric.class_agent(sm, sm_mad::cc::MGMT_CLASS);
    manager.program(&out.sweep.fabric, &mut agent)
}

/// (node, port) of every switch (port 0) and cabled CA port.
fn agents(fabric: &SharedFabric) -> (Vec<usize>, Vec<(usize, u8)>) {
    let f = fabric.lock();
    let topo = f.topology();
    let switches = (0..topo.nodes.len()).filter(|&i| topo.nodes[i].kind == sm_abi::NodeKind::Switch).collect();
    (switches, topo.cabled_cas())
}

/// [`agents`], every one of them given CC_Key `key`.
fn keyed(fabric: &SharedFabric, key: u64) -> (Vec<usize>, Vec<(usize, u8)>) {
    let (switches, cas) = agents(fabric);
    let mut f = fabric.lock();
    for &sw in &switches {
        f.set_cc_key(sw, 0, key, false);
    }
    for &(ca, port) in &cas {
        f.set_cc_key(ca, port, key, false);
    }
    (switches, cas)
}

/// Every switch and CA port holds `s`.
fn assert_holds(fabric: &SharedFabric, s: &CcSettings, key: u64) {
    let (switches, cas) = agents(fabric);
    let f = fabric.lock();
    for &sw in &switches {
        let state = f.cc_state(sw, 0).unwrap_or_else(|| panic!("switch {sw} was sent nothing"));
        assert_eq!(state.switch, s.switch, "switch {sw}");
        assert_eq!((state.key, state.key_violations), (key, 0), "switch {sw}");
    }
    for &(ca, port) in &cas {
        let state = f.cc_state(ca, port).unwrap_or_else(|| panic!("CA {ca}/{port} was sent nothing"));
        assert_eq!(state.ca, s.ca, "CA {ca}/{port}");
        assert_eq!(&state.table[..s.table.len()], &s.table[..], "CA {ca}/{port}");
    }
}

#[test]
fn every_switch_and_ca_holds_the_configured_settings_and_table() {
    let key = 0x1234_5678_9abc_def0;
    let s = settings(&site_conf(key));
    // What the file says, as the wire carries it.
    assert_eq!(s.key, key);
    assert_eq!(s.window, 4);
    assert_eq!(s.switch.control_map, 0x1f);
    assert_eq!((s.switch.victim_mask[29], s.switch.victim_mask[30], s.switch.victim_mask[31]), (0x01, 0xff, 0xfe));
    assert_eq!(s.switch.credit_mask[31], 0x06);
    assert_eq!((s.switch.threshold, s.switch.packet_size, s.switch.cs_threshold), (0xa, 8, 3));
    assert_eq!(s.switch.cs_return_delay, ShiftMultiplier { shift: 2, multiplier: 300 });
    assert_eq!(s.switch.marking_rate, 17);
    assert_eq!((s.ca.port_control, s.ca.control_map), (1, 0xffff));
    assert_eq!((s.ca.entries[0].ccti_timer, s.ca.entries[3].ccti_timer, s.ca.entries[15].ccti_increase), (150, 0x200, 9));
    assert_eq!((s.ca.entries[1].trigger_threshold, s.ca.entries[2].ccti_min, s.ca.entries[4].ccti_timer), (7, 5, 0));
    assert_eq!(s.table.len(), 2);
    assert_eq!((s.table[0].ccti_limit, s.table[1].ccti_limit), (69, 69));
    assert_eq!(s.table[1].entries[5], ShiftMultiplier { shift: 1, multiplier: 169 });

    let (fabric, out, _, _) = routed();
    let (switches, cas) = keyed(&fabric, key);
    let mut manager = CcManager::new(s.clone());
    let sm = fabric.lock().sm_location();
    let mut agent = Counting { inner: fabric.class_agent(sm, sm_mad::cc::MGMT_CLASS), in_flight: 0, most: 0 };
    let report = manager.program(&out.sweep.fabric, &mut agent);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    // cc_max_outstanding_mads 4: never more in flight, and the window is used.
    assert_eq!(agent.most, 4);
    // One Set per switch, a setting and two table blocks per CA port.
    let expected = (switches.len() + 3 * cas.len()) as u64;
    assert_eq!((report.sent, report.acknowledged), (expected, expected));
    assert_holds(&fabric, &s, key);

    // Nothing changed: nothing is sent.
    let again = program(&fabric, &mut manager, &out);
    assert_eq!((again.sent, again.unchanged), (0, (switches.len() + cas.len()) as u64), "{again:?}");
    // After a takeover the SM forgets what the ports answered: everything
    // is sent again, as OpenSM does on becoming master.
    manager.forget();
    let after_takeover = program(&fabric, &mut manager, &out);
    assert_eq!((after_takeover.sent, after_takeover.acknowledged), (expected, expected));
}

#[test]
fn a_node_that_comes_back_is_sent_everything_again() {
    let s = settings(&site_conf(0));
    let (fabric, out, mut held, mut g2l) = routed();
    let mut manager = CcManager::new(s.clone());
    let first = program(&fabric, &mut manager, &out);
    assert!(first.failures.is_empty() && first.sent > 0, "{first:?}");
    let (_, cas) = agents(&fabric);
    let (host, port) = cas[cas.len() - 1];
    // The host powers off and on: it lost its settings.
    fabric.lock().remove_node(host).expect("remove");
    let out = sweep(&fabric, &mut g2l, &mut held);
    assert_eq!(program(&fabric, &mut manager, &out).sent, 0);
    fabric.lock().restore_node(host).expect("restore");
    assert!(fabric.lock().cc_state(host, port).is_none(), "a power cycle keeps no settings");
    let out = sweep(&fabric, &mut g2l, &mut held);
    let back = program(&fabric, &mut manager, &out);
    assert!(back.failures.is_empty(), "{:?}", back.failures);
    assert_eq!(back.sent, 3, "the host's setting and two table blocks: {back:?}");
    assert_holds(&fabric, &s, 0);
}

#[test]
fn a_wrong_cc_key_is_reported_and_the_others_are_programmed() {
    let key = 0x77;
    let s = settings(&site_conf(key));
    let (fabric, out, _, _) = routed();
    let (switches, cas) = keyed(&fabric, key);
    // One switch was given another key by someone else.
    let odd = switches[switches.len() / 2];
    fabric.lock().set_cc_key(odd, 0, 0x99, false);
    let mut manager = CcManager::new(s.clone());
    let report = program(&fabric, &mut manager, &out);
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let f = &report.failures[0];
    let odd_guid = fabric.lock().topology().nodes[odd].node_guid;
    assert_eq!((f.target.node_guid, f.target.port), (odd_guid, 0));
    assert!(f.to_string().contains("no answer"), "{f}");
    // Discarded, counted by the agent: the first try and one retry.
    let state = fabric.lock().cc_state(odd, 0).cloned().expect("agent");
    assert_eq!((state.key_violations, state.sets), (2, 0));
    // Everything else holds its settings.
    let expected = (switches.len() - 1 + 3 * cas.len()) as u64;
    assert_eq!(report.acknowledged, expected);
    for &sw in switches.iter().filter(|&&sw| sw != odd) {
        assert_eq!(fabric.lock().cc_state(sw, 0).expect("agent").switch, s.switch);
    }
    // The next pass tries the odd switch again, and only it.
    let again = program(&fabric, &mut manager, &out);
    assert_eq!((again.sent, again.failures.len()), (2, 1), "{again:?}");
}

#[test]
fn the_sm_programs_congestion_control_only_when_asked() {
    let tmp = tempfile::tempdir().expect("tmp");
    let net = workspace().join("config/topologies/fat-tree-64.net");
    let on = write(tmp.path(), "on.conf", &site_conf(0));
    let (code, out, err) = smcore(&["--config", on.to_str().expect("utf-8"), "--fabric", net.to_str().expect("utf-8"), "--once"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let line = out.lines().find(|l| l.starts_with("CC ")).unwrap_or_else(|| panic!("no CC line:\n{out}"));
    // fat-tree-64: 64 hosts with one port (a CA setting and two table
    // blocks each) and 12 switches (a switch setting each).
    assert!(line.contains("204 Sets sent, 204 acknowledged, 0 failed"), "{line}");
    let off = write(tmp.path(), "off.conf", "congestion_control FALSE\n");
    let (code, out, err) = smcore(&["--config", off.to_str().expect("utf-8"), "--fabric", net.to_str().expect("utf-8"), "--once"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!out.lines().any(|l| l.starts_with("CC ")), "{out}");
}

fn load_error(text: &str) -> String {
    let tmp = tempfile::tempdir().expect("tmp");
    let path = write(tmp.path(), "opensm.conf", text);
    let e = Config::load(&path).expect_err("must be refused").to_string();
    let name = path.display().to_string();
    assert!(e.starts_with(&name), "{e}");
    e[name.len()..].to_string()
}

#[test]
fn each_key_reads_opensm_values_and_refuses_bad_ones_by_line() {
    for (key, bad) in [
        ("congestion_control", "yes"),
        ("cc_key", "0x1ffffffffffffffff"),
        ("cc_max_outstanding_mads", "0"),
        ("cc_sw_cong_setting_control_map", "0x100000000"),
        ("cc_sw_cong_setting_victim_mask", "0x12g4"),
        ("cc_sw_cong_setting_credit_mask", "0x"),
        ("cc_sw_cong_setting_threshold", "16"),
        ("cc_sw_cong_setting_packet_size", "256"),
        ("cc_sw_cong_setting_credit_starvation_threshold", "0x10"),
        ("cc_sw_cong_setting_credit_starvation_return_delay", "4:0"),
        ("cc_sw_cong_setting_marking_rate", "65536"),
        ("cc_ca_cong_setting_port_control", "0x10000"),
        ("cc_ca_cong_setting_control_map", "-1"),
        ("cc_ca_cong_setting_ccti_timer", "16 1"),
        ("cc_ca_cong_setting_ccti_increase", "0 256"),
        ("cc_ca_cong_setting_trigger_threshold", "3"),
        ("cc_ca_cong_setting_ccti_min", "1 x"),
        ("cc_cct", "0:1,1"),
    ] {
        let e = load_error(&format!("# site\ncongestion_control TRUE\n{key} {bad}\n"));
        assert!(e.starts_with(":3: ") && e.contains(key), "{key} {bad}: {e}");
    }
    let e = load_error(&format!("cc_cct {}\n", vec!["0:1"; 129].join(",")));
    assert!(e.starts_with(":1: ") && e.contains("at most 128"), "{e}");
    let e = load_error("cc_sw_cong_setting_victim_mask 0x1\ncc_cct 0:1,2:16384\n");
    assert!(e.starts_with(":2: ") && e.contains("14 bits"), "{e}");
    // The file `opensm -c` writes: OpenSM's defaults, congestion control off.
    let tmp = tempfile::tempdir().expect("tmp");
    let path = write(
        tmp.path(),
        "opensm.conf",
        "congestion_control FALSE\ncc_key 0x0000000000000000\ncc_max_outstanding_mads 500\n\
         cc_sw_cong_setting_victim_mask 0x0000000000000000000000000000000000000000000000000000000000000000\n\
         cc_sw_cong_setting_credit_starvation_return_delay 0:0\ncc_ca_cong_setting_ccti_timer 0 0\ncc_cct (null)\n",
    );
    let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.not_supported.is_empty(), "{:?}", c.not_supported);
    assert_eq!((c.cc_key, c.cc_max_outstanding_mads, c.cc_cct.as_deref()), (Some(0), Some(500), None));
    assert_eq!(CcSettings::from_config(&c), Ok(None));
    // TOML: the same names.
    let toml = write(
        tmp.path(),
        "smcore.toml",
        "congestion_control = true\ncc_key = \"0x10\"\ncc_sw_cong_setting_threshold = 3\n\
         cc_ca_cong_setting_ccti_timer = [0, 5]\ncc_cct = \"1:1,2:2\"\n",
    );
    let c = Config::load(&toml).unwrap_or_else(|e| panic!("{e}"));
    let s = CcSettings::from_config(&c).expect("valid").expect("on");
    assert_eq!((s.key, s.switch.threshold, s.ca.entries[1].ccti_timer, s.table[0].ccti_limit), (0x10, 3, 5, 1));
    let bad = write(tmp.path(), "bad.toml", "congestion_control = true\ncc_sw_cong_setting_threshold = 16\n");
    let c = Config::load(&bad).unwrap_or_else(|e| panic!("{e}"));
    assert!(CcSettings::from_config(&c).expect_err("4 bits").contains("cc_sw_cong_setting_threshold"));
}

fn heavy_sweeps(report: &std::path::Path) -> u64 {
    std::fs::read_to_string(report)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|j| j["heavy_sweep"].as_u64())
        .unwrap_or(0)
}

#[test]
fn the_running_sm_programs_after_each_heavy_sweep_and_only_what_changed() {
    let tmp = tempfile::tempdir().expect("tmp");
    let conf = write(tmp.path(), "opensm.conf", &site_conf(0));
    let (report, socket) = (tmp.path().join("report.json"), tmp.path().join("smcore.sock"));
    let mut child = common::spawn_sm([
        "--config".as_ref(),
        conf.as_os_str(),
        "--sweep-interval".as_ref(),
        "60".as_ref(),
        "--report".as_ref(),
        report.as_os_str(),
        "--control-socket".as_ref(),
        socket.as_os_str(),
    ]);
    common::wait_for(&mut child, "the first heavy sweep", || heavy_sweeps(&report) >= 1);
    let (ok, status) = common::ctl(&socket, &["status"]);
    assert!(ok, "{status}");
    assert!(status.contains("congestion_control: 204 Sets acknowledged, 0 failed, 0 ports unchanged"), "{status}");
    let (ok, answer) = common::ctl(&socket, &["sweep"]);
    assert!(ok, "{answer}");
    common::wait_for(&mut child, "the requested sweep", || heavy_sweeps(&report) >= 2);
    let (_, status) = common::ctl(&socket, &["status"]);
    // 12 switches and 64 host ports hold their settings: nothing sent.
    assert!(status.contains("congestion_control: 0 Sets acknowledged, 0 failed, 76 ports unchanged"), "{status}");
    common::signal(&child, libc::SIGTERM);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status}");
}
