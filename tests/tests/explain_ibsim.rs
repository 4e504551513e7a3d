//! `smcore ctl explain` and `smcore explain` against a running smcore
//! under ibsim, on a 4x4x3 torus routed by torus-2QoS: for host pairs
//! whose path SL is not 0, the hops (switch GUIDs, in and out ports) are
//! the ones `ibtracert` walks through the switches' LFTs between the same
//! LIDs, and the SL is the one `saquery` gets in the SA's PathRecord.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use smcore_tests::diags::{first_num, num, Generated};
use smcore_tests::fabric_check::{client_output, trace};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::parse_guid2lid_file;
use smcore_tests::sm_run::RunningSm;

const TIMEOUT: Duration = Duration::from_secs(60);
const SETTLED: Duration = Duration::from_millis(2500);

/// `smcore ARGS` (no simulator needed: it only talks to the socket).
fn smcore(bin: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(bin).args(args).output().expect("run smcore");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The nodes an `ibtracert` walk leaves: (node GUID, port it came in by,
/// port it leaves by), the source CA first (no in port).
fn traced(text: &str) -> Vec<(u64, Option<u8>, u8)> {
    let guid = |line: &str| line.split('{').nth(1).and_then(|s| s.split('}').next()).map(num).expect("GUID");
    let mut hops = Vec::new();
    // (GUID, in port) of the node the walk is at.
    let mut at: Option<(u64, Option<u8>)> = None;
    for line in text.lines() {
        if line.starts_with("From ") {
            at = Some((guid(line), None));
        } else if let Some(rest) = line.strip_prefix('[') {
            // `[OUT] -> switch port {GUID}[IN] lid ...`
            let out: u8 = rest.split(']').next().and_then(|p| p.parse().ok()).expect("out port");
            let (g, in_port) = at.expect("a From line first");
            hops.push((g, in_port, out));
            let entered: u8 = line
                .rsplit_once("}[")
                .and_then(|(_, r)| r.split(']').next())
                .and_then(|p| p.parse().ok())
                .expect("in port");
            at = Some((guid(line), Some(entered)));
        }
    }
    hops
}

#[test]
fn explain_agrees_with_ibtracert_and_saquery_on_a_torus_2qos_fabric() {
    let (generated, conf) = Generated::torus_2qos("explain-ibsim-", "4x4x3").unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&generated.net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = generated.dir().join("dumps");
    let report = generated.dir().join("report.json");
    let socket = generated.dir().join("smcore.sock");
    let socket_s = socket.to_str().expect("utf-8 path");
    let conf_s = conf.to_str().expect("utf-8 path");
    let args = [
        "--sweep-interval",
        "1",
        "--engines",
        "torus-2QoS,no_fallback",
        "--torus-config",
        conf_s,
        "--control-socket",
        socket_s,
    ];
    let mut run = RunningSm::start(&sim, &generated.sm, &dumps, &report, &args).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", TIMEOUT, |r| r.heavy_sweeps() >= 1 && r.dump_dir().join("guid2lid").is_file())
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_settled(SETTLED, TIMEOUT).unwrap_or_else(|e| panic!("{e}"));

    // Hosts: (node GUID, LID); path SLs as the SM dumped them.
    let lids: BTreeMap<u64, u16> = parse_guid2lid_file(dumps.join("guid2lid"))
        .unwrap_or_else(|e| panic!("{e}"))
        .by_lid
        .iter()
        .map(|(&lid, &guid)| (guid, lid))
        .collect();
    let hosts: Vec<(u64, u16)> = generated
        .hosts()
        .into_iter()
        .map(|i| &generated.topo.nodes[i])
        .filter_map(|n| n.port_guids.iter().find_map(|g| lids.get(g)).map(|&l| (n.node_guid, l)))
        .collect();
    assert!(hosts.len() >= 40, "hosts with LIDs: {hosts:?}");
    let psl = std::fs::read_to_string(dumps.join("smcore-path-sl.psl")).expect("path-SL dump");
    let dumped: BTreeMap<(u64, u16), u8> = psl
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [g, lid, sl] => Some(((num(g), lid.parse().ok()?), sl.parse().ok()?)),
            _ => None,
        })
        .collect();
    // Pairs whose SL is not 0 (across a dateline), and one whose SL is 0.
    let mut pairs: Vec<((u64, u16), (u64, u16))> = Vec::new();
    for s in hosts.iter().step_by(5) {
        if let Some(d) = hosts.iter().rev().find(|d| d.1 != s.1 && dumped.get(&(s.0, d.1)).is_some_and(|&sl| sl != 0)) {
            pairs.push((*s, *d));
        }
        if pairs.len() == 4 {
            break;
        }
    }
    assert!(pairs.len() >= 3, "pairs with SLs other than 0: {pairs:?}");
    let zero = hosts.iter().find_map(|d| (d.1 != hosts[0].1 && dumped.get(&(hosts[0].0, d.1)) == Some(&0)).then_some((hosts[0], *d)));
    pairs.extend(zero);

    let bin = generated.sm.bin();
    let mut nonzero_vl = false;
    for ((sguid, slid), (_, dlid)) in &pairs {
        let (ok, text) = smcore(bin, &["ctl", "--socket", socket_s, "--json", "explain", &slid.to_string(), &dlid.to_string()]);
        assert!(ok, "{text}");
        let e: Value = serde_json::from_str(&text).unwrap_or_else(|err| panic!("{err}: {text}"));
        assert_eq!(e["arrives"], true, "{text}");
        assert_eq!(e["source"]["lid"], *slid);
        assert_eq!(e["destination"]["lid"], *dlid);
        assert_eq!(num(e["source"]["node_guid"].as_str().expect("GUID")), *sguid);
        // The hops: ibtracert's, switch by switch.
        let hops: Vec<(u64, Option<u8>, u8)> = e["hops"]
            .as_array()
            .expect("hops")
            .iter()
            .map(|h| {
                let in_port = h["in_port"].as_u64().map(|p| p as u8);
                (num(h["node_guid"].as_str().expect("GUID")), in_port, h["out_port"].as_u64().expect("out port") as u8)
            })
            .collect();
        let walk = trace(&sim, *slid, *dlid).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(hops, traced(&walk), "explain {slid} {dlid}:\n{text}\nibtracert:\n{walk}");
        assert!(hops.len() >= 3, "{walk}");
        // The SL: the SA's PathRecord as saquery gets it, the dumped one.
        let sa = client_output(&sim, None, "saquery", &["--src-to-dst", &format!("{slid}:{dlid}")]);
        let sl = e["sl"].as_u64().expect("SL");
        assert_eq!(first_num(&sa, "sl"), Some(sl), "{sa}");
        assert_eq!(e["path_record"]["sl"], sl);
        assert_eq!(Some(&(sl as u8)), dumped.get(&(*sguid, *dlid)));
        // saquery shows the MTU byte whole: the selector in its top bits.
        assert_eq!(e["path_record"]["mtu_code"].as_u64(), first_num(&sa, "mtu").map(|m| m & 0x3F), "{sa}");
        // Every hop's VL is programmed, and runs on its port.
        for h in e["hops"].as_array().expect("hops") {
            assert!(h["vl"].is_u64(), "{h}");
            nonzero_vl |= h["vl"].as_u64() != Some(0);
        }
        assert_eq!(e["warnings"].as_array().map(Vec::len), Some(0), "{text}");
    }
    assert!(nonzero_vl, "some hop of a path across a dateline rides a VL other than 0");

    // `smcore explain` is the same answer, as text and as JSON.
    let ((_, slid), (_, dlid)) = pairs[0];
    let (s, d) = (slid.to_string(), dlid.to_string());
    let (ok, text) = smcore(bin, &["ctl", "--socket", socket_s, "explain", &s, &d]);
    assert!(ok, "{text}");
    assert!(text.contains(&format!("PathRecord {slid} -> {dlid}: SL ")), "{text}");
    let (ok2, short) = smcore(bin, &["explain", &s, &d, "--socket", socket_s]);
    assert!(ok2, "{short}");
    assert_eq!(short, text);
    let (_, json) = smcore(bin, &["explain", &s, &d, "--socket", socket_s, "--json"]);
    let (_, ctl_json) = smcore(bin, &["ctl", "--socket", socket_s, "--json", "explain", &s, &d]);
    assert_eq!(json, ctl_json);
    // A port the fabric does not have.
    let (ok, text) = smcore(bin, &["explain", &s, "no-such-host", "--socket", socket_s]);
    assert!(!ok && text.contains("no port"), "{text}");
    drop(run);
}
