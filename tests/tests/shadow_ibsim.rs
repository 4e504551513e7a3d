//! `smcore shadow` beside OpenSM 3.3.23 as the master under ibsim.
//!
//! OpenSM runs as a daemon (`-s 0`: no periodic sweep, its tables stay as
//! its first sweep left them) on the fabric's first host; the shadow runs
//! once from another host. Judged from outside: every switch's LFT read
//! back with `ibroute` from a third host before and after the shadow
//! (identical: it wrote nothing), its report's count of entries smcore
//! would change equal to a comparison of that read-back with the routing
//! the shadow dumped, the live routing it read equal to the read-back, the
//! shadow's port sending no more packets than the Gets and SA queries it
//! reports, and its credit-loop verdict on the live routing equal to
//! `ibdmchk`'s on OpenSM's own dumps.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils,
//! infiniband-diags, ibutils and opensm.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sm_core::dump::lfts_parse::{parse_lfts, parse_lfts_file_detailed};
use sm_topology::Topology;
use smcore_tests::fabric_check::{client_output, run_client_on};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::opensm::{OpenSmDaemon, OpenSmOptions};
use smcore_tests::smcore::{Profile, Smcore};

const TIMEOUT: Duration = Duration::from_secs(180);

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

struct Fabric {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    net: PathBuf,
    topo: Topology,
}

fn generate(name: &str, args: &[&str]) -> Fabric {
    let tmp = tempfile::Builder::new().prefix(&format!("shadow-{name}-")).tempdir().expect("temp dir");
    let dir = tmp.path().to_path_buf();
    let net = dir.join(format!("{name}.net"));
    smcore().gen(args, &net).unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    Fabric { _tmp: tmp, dir, net, topo }
}

/// The ibsim names of the hosts (CAs), in file order.
fn hosts(topo: &Topology) -> Vec<String> {
    topo.nodes.iter().filter(|n| !n.is_switch()).map(|n| n.name.clone()).collect()
}

/// Every switch's LFT read back with `ibroute` from `host`, by switch
/// GUID, for the switch LIDs of `dump` (an `opensm-lfts.dump`).
fn read_back(sim: &Ibsim, host: &str, dump: &Path) -> BTreeMap<u64, BTreeMap<u16, u8>> {
    let switches = parse_lfts_file_detailed(dump).unwrap_or_else(|e| panic!("{e}"));
    assert!(!switches.is_empty(), "{}: no switch", dump.display());
    let mut held = BTreeMap::new();
    for sw in switches {
        let lid = sw.lid.unwrap_or_else(|| panic!("{}: switch {:#x} without a LID", dump.display(), sw.guid));
        let text = client_output(sim, Some(host), "ibroute", &[&lid.to_string()]);
        let read = parse_lfts(&text, "ibroute").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let [(guid, pairs)] = &read[..] else { panic!("ibroute {lid}: {} switches:\n{text}", read.len()) };
        assert_eq!(*guid, sw.guid, "ibroute {lid} answered for another switch");
        held.insert(*guid, pairs.iter().copied().collect());
    }
    held
}

/// Entries (switch, LID) where `dump` differs from `held`.
fn differing(held: &BTreeMap<u64, BTreeMap<u16, u8>>, dump: &Path) -> u64 {
    let mut n = 0;
    for sw in parse_lfts_file_detailed(dump).unwrap_or_else(|e| panic!("{e}")) {
        let ours: BTreeMap<u16, u8> = sw.pairs().into_iter().collect();
        let live = held.get(&sw.guid).unwrap_or_else(|| panic!("switch {:#x} not read back", sw.guid));
        let lids: std::collections::BTreeSet<u16> = ours.keys().chain(live.keys()).copied().collect();
        n += lids.iter().filter(|l| ours.get(l) != live.get(l)).count() as u64;
    }
    n
}

/// PortXmitPkts of `lid` port `port`, asked from `host`.
fn xmit_pkts(sim: &Ibsim, host: &str, lid: u16, port: u8) -> u64 {
    let text = client_output(sim, Some(host), "perfquery", &[&lid.to_string(), &port.to_string()]);
    text.lines()
        .find_map(|l| l.strip_prefix("PortXmitPkts:").map(|v| v.trim_start_matches('.').trim().parse::<u64>()))
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no PortXmitPkts in:\n{text}"))
}

/// The LID of `host`'s port 1 as the master gave it (smpquery from `host`
/// itself reads its own port by directed route).
fn own_lid(sim: &Ibsim, host: &str) -> u16 {
    let text = client_output(sim, Some(host), "smpquery", &["-D", "portinfo", "0", "1"]);
    text.lines()
        .find_map(|l| l.strip_prefix("Lid:").map(|v| v.trim_start_matches('.').trim().parse::<u16>()))
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no Lid in:\n{text}"))
}

struct ShadowRun {
    report: Value,
    text: String,
    code: Option<i32>,
}

/// `smcore shadow --once --engines ENGINES` from `host`, dumps and report
/// under `dir`.
fn shadow(sim: &Ibsim, host: &str, engines: &str, dir: &Path) -> ShadowRun {
    let sm = smcore();
    std::fs::create_dir_all(dir).expect("the run's directory");
    let (report, dumps) = (dir.join("shadow.json"), dir.join("shadow-dumps"));
    let args = [
        "shadow",
        "--once",
        "--engines",
        engines,
        "--report",
        report.to_str().expect("utf-8"),
        "--dump-dir",
        dumps.to_str().expect("utf-8"),
    ];
    let run = run_client_on(sim, Some(host), sm.bin(), &args, TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{}{}", run.stdout, run.stderr);
    let json = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{}: {e}\n{text}", report.display()));
    let report = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    ShadowRun { report, text, code: run.outcome.status().and_then(|s| s.code()) }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// OpenSM with `engine` as master of a k-ary 3-tree, a shadow with
/// smcore's ftree beside it: returns the report for the caller's own
/// expectations after the checks every such run must pass.
fn beside_opensm(fabric: &Fabric, engine: &str) -> Value {
    let hosts = hosts(&fabric.topo);
    let (master_host, shadow_host, diag_host) = (&hosts[0], &hosts[hosts.len() - 1], &hosts[hosts.len() / 2]);
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let mut opts = OpenSmOptions::new(engine);
    opts.timeout = Duration::from_secs(60);
    opts.dir = Some(fabric.dir.join(format!("opensm-{engine}")));
    let master = OpenSmDaemon::start(&sim, Some(master_host), &opts).unwrap_or_else(|e| panic!("{e}"));
    let osm_dump = master.dir.join("opensm-lfts.dump");
    let before = read_back(&sim, diag_host, &osm_dump);
    let shadow_lid = own_lid(&sim, shadow_host);
    let sent_before = xmit_pkts(&sim, diag_host, shadow_lid, 1);

    let run = shadow(&sim, shadow_host, "ftree", &fabric.dir.join(engine));
    let r = &run.report;
    println!("OpenSM {engine} master, smcore shadow with ftree:\n{}", run.text);

    let sent_after = xmit_pkts(&sim, diag_host, shadow_lid, 1);
    let after = read_back(&sim, diag_host, &osm_dump);
    assert_eq!(before, after, "the switches' LFTs changed while the shadow ran");
    assert_eq!(n(&r["read"]["refused"]), 0, "{}", run.text);
    let (gets, asked) = (n(&r["read"]["gets"]), n(&r["path_sl"]["pairs"]));
    assert!(gets > 0 && n(&r["read"]["lfts"]) == before.len() as u64, "{}", run.text);
    // Every packet the shadow's port sent is one the report counts (its
    // Gets and its PathRecord queries) or the PMA's answer to the first
    // perfquery; the few Gets to the shadow's own node (NodeInfo,
    // PortInfo, its tables) are answered by the HCA without leaving the
    // port.
    let sent = sent_after - sent_before;
    let counted = gets + asked;
    assert!(
        sent <= counted + 2 && sent + 16 >= counted,
        "port sent {sent} packets, the shadow counts {gets} Gets and {asked} SA queries"
    );
    // The path SLs came from OpenSM's SA, for every pair.
    assert!(r["path_sl"]["source"].as_str().is_some_and(|s| s.starts_with("SA at LID")), "{}", run.text);
    let ends = n(&r["end_ports"]);
    assert_eq!((asked, n(&r["path_sl"]["known"])), (ends * (ends - 1), ends * (ends - 1)), "{}", run.text);
    // What the shadow read is what ibroute reads.
    let dumps = fabric.dir.join(engine).join("shadow-dumps");
    assert_eq!(differing(&before, &dumps.join("live/opensm-lfts.dump")), 0, "the live routing as read differs from the read-back");
    // Its count is the read-back comparison's.
    let differ = differing(&before, &dumps.join("smcore/opensm-lfts.dump"));
    assert_eq!(n(&r["diff"]["entries_differ"]), differ, "{}", run.text);
    assert!(r["live"]["unreachable"] == 0 && r["live"]["looping"] == 0, "{}", run.text);
    assert_eq!(run.code, Some(0), "{}", run.text);
    drop(master);
    r.clone()
}

#[test]
fn beside_opensm_ftree_only_real_differences_and_nothing_written() {
    let fabric = generate("tree4", &["kary-ntree", "--k", "4", "--n", "3"]);
    let r = beside_opensm(&fabric, "ftree");
    // Both ftrees balance a pristine tree alike; they differ in few entries.
    assert_eq!(r["live"]["busiest_link"], r["smcore"]["busiest_link"], "{r}");
    assert!(r["diff"]["percent"].as_f64().is_some_and(|p| p < 5.0), "{r}");
}

#[test]
fn beside_opensm_minhop_the_differences_and_both_busiest_links() {
    let fabric = generate("tree4", &["kary-ntree", "--k", "4", "--n", "3"]);
    let r = beside_opensm(&fabric, "minhop");
    assert!(n(&r["diff"]["entries_differ"]) > 0, "{r}");
    let (live, ours) = (n(&r["live"]["busiest_link"]), n(&r["smcore"]["busiest_link"]));
    assert!(live > ours && ours > 0, "OpenSM minhop's busiest link {live}, smcore ftree's {ours}");
}

/// The shadow's verdict on OpenSM's live routing and `ibdmchk`'s on
/// OpenSM's own dumps of it.
fn loops_beside_opensm(name: &str, gen: &[&str], engine: &str) -> (bool, bool) {
    let fabric = generate(name, gen);
    let hosts = hosts(&fabric.topo);
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let mut opts = OpenSmOptions::new(engine);
    opts.timeout = Duration::from_secs(60);
    opts.dir = Some(fabric.dir.join("opensm"));
    let master = OpenSmDaemon::start(&sim, Some(&hosts[0]), &opts).unwrap_or_else(|e| panic!("{e}"));
    let run = shadow(&sim, &hosts[hosts.len() - 1], "minhop", &fabric.dir.join("shadow"));
    let ours = run.report["live"]["credit_loops"].as_bool().unwrap_or_else(|| panic!("not checked:\n{}", run.text));
    let theirs = smcore_tests::ibdmchk::check_dump_dir(&master.dir, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
    assert!(theirs.connected(), "{name}: ibdmchk finds OpenSM's routing disconnected: {}", theirs.summary());
    assert_eq!(run.report["live"]["unreachable"], 0, "{}", run.text);
    // The exit status says whether the live routing is sound.
    assert_eq!(run.code, Some(if ours { 1 } else { 0 }), "{}", run.text);
    println!("{name} ({engine}): shadow says credit loops {ours}, ibdmchk {}", !theirs.loop_free());
    (ours, !theirs.loop_free())
}

#[test]
fn the_live_verdict_agrees_with_ibdmchk_on_opensms_dumps() {
    let tree = loops_beside_opensm("tree3", &["kary-ntree", "--k", "3", "--n", "3"], "ftree");
    assert_eq!(tree, (false, false), "a fat tree routed by OpenSM's ftree");
    let torus = loops_beside_opensm("torus4x4", &["torus", "--dims", "4x4", "--hosts", "1"], "minhop");
    assert_eq!(torus, (true, true), "a torus routed by OpenSM's minhop");
    for seed in ["3", "8"] {
        let gen = ["random", "--switches", "12", "--ports", "8", "--hosts", "2", "--extra-links", "8", "--seed", seed];
        let (ours, theirs) = loops_beside_opensm(&format!("random{seed}"), &gen, "minhop");
        assert_eq!(ours, theirs, "random seed {seed}: the shadow and ibdmchk disagree");
    }
}
