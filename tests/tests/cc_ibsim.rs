//! Congestion control under ibsim. ibsim does not implement the
//! CongestionControl class (0x21): it hands such a MAD to its SMA handler
//! of the same attribute number, so the SwitchCongestionSetting Set
//! (0x14) lands on its GUIDInfo handler, which refuses a Set with status
//! 0x0008. What this checks of smcore on a foreign stack: with
//! `congestion_control TRUE` the sweep completes, every switch's refusal
//! is reported by node, and the SM exits cleanly (see docs/operations.md,
//! "Congestion control", for what ibsim does to the CAs' P_Key tables).
//!
//! Needs `cargo build --workspace` first, and ibsim-utils.

use smcore_tests::ibsim::Ibsim;
use smcore_tests::smcore::{Profile, Smcore};

#[test]
fn under_ibsim_every_switch_refusal_is_reported_and_the_sweep_completes() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("cc-ibsim-").tempdir().expect("temp dir");
    let net = tmp.path().join("ft.net");
    sm.gen(&["fat-tree", "--leaves", "2", "--spines", "1", "--hosts-per-leaf", "2", "--uplinks", "1"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let conf = tmp.path().join("opensm.conf");
    std::fs::write(&conf, "congestion_control TRUE\ncc_sw_cong_setting_control_map 0x1f\ncc_cct 0:1,1:2\n").expect("write");
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = tmp.path().join("dumps");
    let out = sim
        .client_command(sm.bin())
        .unwrap_or_else(|e| panic!("{e}"))
        .args(["--config", conf.to_str().expect("UTF-8"), "--once", "--dump-dir", dumps.to_str().expect("UTF-8")])
        .output()
        .unwrap_or_else(|e| panic!("cannot run: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "smcore --once failed:\n{stdout}\n{stderr}");
    println!("{stdout}");
    let switches: Vec<u64> = topo.switches().map(|i| topo.nodes[i].node_guid).collect();
    let cas = topo.end_nodes().count();
    // Every switch: one Set, refused; every CA port: a setting and one
    // table block, which ibsim's SMA handlers answer.
    let line = stdout.lines().find(|l| l.starts_with("CC ")).unwrap_or_else(|| panic!("no CC line:\n{stdout}"));
    let sent = switches.len() + 2 * cas;
    assert!(
        line.contains(&format!("{sent} Sets sent, {} acknowledged, {} failed", sent - switches.len(), switches.len())),
        "{line}"
    );
    for guid in &switches {
        let named = format!("SwitchCongestionSetting Set on {guid:#018x}");
        assert!(
            stderr.lines().any(|l| l.contains(&named) && l.contains("status 0x0008")),
            "no refusal logged for {guid:#x}:\n{stderr}"
        );
    }
    // The sweep went on: every switch's LFT was written and dumped.
    let lfts = std::fs::read_to_string(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lfts.matches("Unicast lids").count(), switches.len(), "{lfts}");
}
