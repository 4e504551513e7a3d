//! `smcore --once` under umad2sim on fabrics of several families — a
//! torus routed by torus-2QoS (with SL2VL tables), a random irregular
//! fabric, and a hand-built one with parallel links, a two-port CA and a
//! loop — then read back with infiniband-diags: every cabled port Active
//! (`iblinkinfo`), `ibroute` equal to the dump, SL2VL equal to the dump
//! (`smpquery sl2vl`), LIDs as assigned (`ibnetdiscover -p`), traces
//! between CAs. The embedded fabric (`--fabric`) must give the same LFTs,
//! port GUID for port GUID.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use sm_core::dump::lfts_parse::parse_lfts_file_detailed;
use sm_abi::NodeKind;
use sm_topology::{Topology, TopologyBuilder};
use smcore_tests::fabric_check::{lfts_read_back, lids_read_back, run_client, sm_once, trace, TOOL_TIMEOUT};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::smcore::{Profile, Smcore};

/// Switch GUID → destination port GUID → egress port.
fn lfts_by_guid(dir: &Path) -> BTreeMap<u64, BTreeMap<u64, u8>> {
    parse_lfts_file_detailed(&dir.join("opensm-lfts.dump"))
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|sw| {
            let entries =
                sw.entries.iter().map(|e| (e.port_guid.unwrap_or_else(|| panic!("dump names LID {}", e.lid)), e.port)).collect();
            (sw.guid, entries)
        })
        .collect()
}

/// Every cabled port, as `iblinkinfo` prints it, is Active and LinkUp.
fn assert_all_active(sim: &Ibsim, links: usize) {
    let run = run_client(sim, "iblinkinfo", &[], TOOL_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.ok, "iblinkinfo: {}", run.stderr);
    // Ports without a cable print an empty peer name (`""`).
    let cabled: Vec<&str> = run.stdout.lines().filter(|l| l.contains("==(") && !l.contains("\"\"")).collect();
    // Each cable is listed from both ends (switch ports and CA ports).
    assert_eq!(cabled.len(), 2 * links, "{}", run.stdout);
    for line in cabled {
        assert!(line.contains("Active/") && line.contains("LinkUp"), "not Active: {line}");
    }
}

/// `opensm-sl2vl.dump`: (switch base LID, in, out) → VL per SL.
fn sl2vl_dump(dir: &Path) -> BTreeMap<(u16, u8, u8), Vec<u8>> {
    let text = std::fs::read_to_string(dir.join("opensm-sl2vl.dump")).unwrap_or_else(|e| panic!("{e}"));
    let mut out = BTreeMap::new();
    let mut lid = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Switch ") {
            lid = rest.split("base LID ").nth(1).and_then(|r| r.split(',').next()).and_then(|l| l.trim().parse().ok());
            continue;
        }
        if line.starts_with("Ca ") || line.starts_with("Rt ") {
            lid = None;
        }
        let (Some(lid), Some((ports, vls))) = (lid, line.split_once(':')) else { continue };
        let p: Vec<u8> = ports.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        let v: Vec<u8> = vls.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        if p.len() == 2 && v.len() == 16 {
            out.insert((lid, p[0], p[1]), v);
        }
    }
    out
}

/// `smpquery sl2vl LID OUT` of a few switches equals the dump.
fn assert_sl2vl_read_back(sim: &Ibsim, dir: &Path) {
    let dump = sl2vl_dump(dir);
    assert!(!dump.is_empty(), "no switch SL2VL in the dump");
    let mut outs: Vec<(u16, u8)> = dump.keys().map(|&(lid, _, out)| (lid, out)).collect();
    outs.dedup();
    for &(lid, out) in outs.iter().step_by(outs.len().div_ceil(6).max(1)) {
        let run = run_client(sim, "smpquery", &["sl2vl", &lid.to_string(), &out.to_string()], TOOL_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(run.ok, "smpquery sl2vl {lid} {out}: {}", run.stderr);
        let mut compared = 0;
        for line in run.stdout.lines().filter(|l| l.starts_with("ports: in")) {
            // "ports: in  3, out  3: | 0| 1| ..."
            let nums: Vec<u8> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
            let (input, output, vls) = (nums[0], nums[1], &nums[2..]);
            if input == output {
                // Never used: traffic does not leave by the port it came in.
                continue;
            }
            let want = dump.get(&(lid, input, output)).unwrap_or_else(|| panic!("no dump row {lid} {input} {output}"));
            assert_eq!(vls, &want[..], "switch LID {lid} in {input} out {output}");
            compared += 1;
        }
        assert!(compared > 0, "{}", run.stdout);
    }
}

/// Three switches in a ring, two cables between the first two, a
/// two-port CA on two switches, single-port CAs on each.
fn odd_fabric() -> Topology {
    let mut b = TopologyBuilder::new();
    let s: Vec<usize> = (0..3).map(|i| b.add_switch(format!("sw-{i}"), 8).expect("switch")).collect();
    let dual = b.add_ca("dual-port-host", 2).expect("ca");
    let hosts: Vec<usize> = (0..6).map(|i| b.add_ca(format!("host-{i}"), 1).expect("ca")).collect();
    b.link((s[0], 1), (s[1], 1)).expect("link");
    b.link((s[0], 2), (s[1], 2)).expect("parallel link");
    b.link((s[1], 3), (s[2], 3)).expect("link");
    b.link((s[2], 4), (s[0], 4)).expect("link");
    b.link((dual, 1), (s[0], 5)).expect("link");
    b.link((dual, 2), (s[2], 5)).expect("link");
    for (i, &h) in hosts.iter().enumerate() {
        b.link((h, 1), (s[i % 3], 6 + (i / 3) as u8)).expect("link");
    }
    b.finish().expect("topology")
}

fn bring_up(name: &str, topo_file: &Path, engines: &str, extra: &[&str]) {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(topo_file).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("sm-families-").tempdir().expect("temp dir");
    let sim = Ibsim::start(topo_file).unwrap_or_else(|e| panic!("{e}"));
    let on_sim = tmp.path().join("ibsim");
    let run = sm_once(&sim, &sm, engines, &on_sim, extra, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.ok, "{name}: smcore --once failed:\n{}\n{}", run.stdout, run.stderr);
    println!("{name}: {:.0} ms\n{}", run.wall.as_secs_f64() * 1e3, run.stdout);

    assert_all_active(&sim, topo.links.len());
    let switches = lfts_read_back(&sim, &on_sim).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(switches, topo.num_switches(), "{name}");
    lids_read_back(&sim, &on_sim).unwrap_or_else(|e| panic!("{name}: {e}"));
    if on_sim.join("opensm-sl2vl.dump").exists() && engines.starts_with("torus-2QoS") {
        assert_sl2vl_read_back(&sim, &on_sim);
    }
    // Traces from the SM's CA to every other CA port.
    let lids = smcore_tests::lfts::lid_map_for_dump_dir(&on_sim).unwrap_or_else(|e| panic!("{e}"));
    let ca_lids: Vec<u16> = lids
        .by_lid
        .iter()
        .filter(|(_, g)| topo.nodes.iter().any(|n| n.kind == NodeKind::Ca && n.port_guids.contains(g)))
        .map(|(&l, _)| l)
        .collect();
    for &to in ca_lids.iter().skip(1).step_by(ca_lids.len().div_ceil(8).max(1)) {
        trace(&sim, ca_lids[0], to).unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    // The embedded fabric routes the same topology to the same tables.
    let embedded = tmp.path().join("embedded");
    let mut args = vec!["--fabric", topo_file.to_str().expect("utf-8"), "--once", "--engines", engines, "--dump-dir"];
    args.push(embedded.to_str().expect("utf-8"));
    args.extend_from_slice(extra);
    let out = std::process::Command::new(sm.bin())
        .args(&args)
        .env("SMCORE_ENGINE_PATH", sm.bin().parent().expect("bin dir"))
        .output()
        .expect("smcore --fabric");
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lfts_by_guid(&embedded), lfts_by_guid(&on_sim), "{name}: embedded fabric and ibsim differ");
}

#[test]
fn torus_routed_by_torus_2qos_comes_up_with_its_sl2vl_tables() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().expect("tmp");
    let net = tmp.path().join("torus.net");
    let conf = tmp.path().join("torus-2QoS.conf");
    sm.gen(&["torus", "--dims", "4x3x3", "--hosts", "1", "--torus-conf", conf.to_str().expect("utf-8")], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    bring_up("torus 4x3x3", &net, "torus-2QoS,no_fallback", &["--torus-config", conf.to_str().expect("utf-8")]);
}

#[test]
fn random_irregular_fabric_comes_up() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().expect("tmp");
    let net = tmp.path().join("random.net");
    sm.gen(&["random", "--switches", "12", "--hosts", "2", "--extra-links", "8", "--seed", "7"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    bring_up("random 12", &net, "updn", &[]);
}

#[test]
fn parallel_links_two_port_cas_and_loops_come_up() {
    let tmp = tempfile::tempdir().expect("tmp");
    let net = tmp.path().join("odd.net");
    sm_topology::emit::write_file(&odd_fabric(), &net).unwrap_or_else(|e| panic!("{e}"));
    bring_up("parallel links + 2-port CA", &net, "minhop", &[]);
}

#[test]
fn the_file_engine_programs_a_dumped_routing_on_a_fresh_fabric() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().expect("tmp");
    let net = tmp.path().join("ft.net");
    sm.gen(&["fat-tree", "--leaves", "4", "--spines", "2", "--hosts-per-leaf", "3", "--uplinks", "2"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    // The routing to reproduce: updn's, dumped by an SM run.
    let first = tmp.path().join("first");
    {
        let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
        let run = sm_once(&sim, &sm, "updn,no_fallback", &first, &[], Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(run.ok, "{}\n{}", run.stdout, run.stderr);
    }
    // A fresh fabric (new ibsim: no LIDs, empty tables), routed by the file.
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let again = tmp.path().join("again");
    let lfts = first.join("opensm-lfts.dump");
    let run = sm_once(&sim, &sm, "file,no_fallback", &again, &["--lfts-file", lfts.to_str().expect("utf-8")], Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(run.ok, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("routed by file"), "{}", run.stdout);
    lfts_read_back(&sim, &again).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lfts_by_guid(&again), lfts_by_guid(&first), "the file engine changed the routing");
}

#[test]
fn a_fabric_whose_top_lid_is_a_multiple_of_64_reads_back() {
    // 64 switches and 64 hosts: LIDs 1..=128, so the top LID sits alone at
    // the start of an LFT block, which ibroute does not read.
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().expect("tmp");
    let net = tmp.path().join("torus.net");
    sm.gen(&["torus", "--dims", "4x4x4", "--hosts", "1"], &net).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = tmp.path().join("dumps");
    let run = sm_once(&sim, &sm, "minhop", &dumps, &[], Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.ok, "{}\n{}", run.stdout, run.stderr);
    let max_lid = smcore_tests::lfts::lid_map_for_dump_dir(&dumps).unwrap_or_else(|e| panic!("{e}")).max_lid();
    assert_eq!(max_lid, 128);
    assert_eq!(lfts_read_back(&sim, &dumps).unwrap_or_else(|e| panic!("{e}")), 64);
}
