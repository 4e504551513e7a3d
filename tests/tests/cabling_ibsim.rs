//! `smcore check --expect NET` under ibsim (umad2sim): the fabric read by
//! SubnGets from a host, compared with the net file ibsim was started
//! from. Pristine it matches; a link set to 1x with `ibportstate ...
//! width 1` (ibsim retrains it at once: LinkWidthActive follows
//! LinkWidthEnabled) is below the 4xQDR the file states; a cable unlinked
//! on ibsim's console is a missing link. Each fault undone, the fabric
//! matches again.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::process::Output;

use smcore_tests::diags::Generated;
use smcore_tests::ibsim::Ibsim;

fn run(sim: &Ibsim, program: &str, args: &[&str]) -> Output {
    sim.client_command(program)
        .unwrap_or_else(|e| panic!("{e}"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `smcore check --expect NET --json` from the first host: exit status
/// and the report.
fn check(sim: &Ibsim, fabric: &Generated) -> (i32, serde_json::Value) {
    let bin = fabric.sm.bin().to_str().expect("UTF-8 path");
    let net = fabric.net.to_str().expect("UTF-8 path");
    let out = run(sim, bin, &["check", "--expect", net, "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    (out.status.code().unwrap_or(-1), json)
}

/// The (GUID, port) pairs of a report's link entry, lower first.
fn ends(entry: &serde_json::Value) -> [(String, u64); 2] {
    let end = |e: &serde_json::Value| {
        (e["guid"].as_str().unwrap_or_default().to_string(), e["port"].as_u64().unwrap_or_default())
    };
    let mut v = [end(&entry["a"]), end(&entry["b"])];
    v.sort();
    v
}

#[test]
fn check_matches_then_names_a_narrow_link_and_an_unlinked_cable() {
    let fabric = Generated::fat_tree("cabling-ibsim-", 2, 2, 2, 2).unwrap_or_else(|e| panic!("{e}"));
    let topo = &fabric.topo;
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));

    let (code, report) = check(&sim, &fabric);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["clean"], true);
    assert_eq!((report["found_nodes"].as_u64(), report["found_links"].as_u64()), (Some(8), Some(8)));
    assert_eq!(report["smps"]["refused"], 0);

    // The client runs on the first host (umad2sim's default); its leaf is
    // one hop away (directed route "0,1"), the leaf's last port an uplink.
    let host = topo.nodes.iter().position(|n| !n.is_switch()).expect("a host");
    let (leaf, _) = topo.peer(host, 1).expect("the host is cabled");
    let uplink = topo.nodes[leaf].num_ports;
    let (spine, spine_port) = topo.peer(leaf, uplink).expect("the uplink is cabled");
    assert!(topo.nodes[spine].is_switch());
    let guid = |n: usize| format!("{:#018x}", topo.nodes[n].node_guid);
    let mut want = [(guid(leaf), u64::from(uplink)), (guid(spine), u64::from(spine_port))];
    want.sort();
    let port = uplink.to_string();

    // LinkWidthEnabled 1x: ibsim brings the link to 1X at once.
    let out = run(&sim, "ibportstate", &["-D", "0,1", &port, "width", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let (code, report) = check(&sim, &fabric);
    assert_eq!(code, 1, "{report}");
    let degraded = report["degraded_links"].as_array().expect("degraded links");
    assert_eq!(degraded.len(), 1, "{report}");
    assert_eq!(ends(&degraded[0]), want);
    assert_eq!((degraded[0]["width"].as_u64(), degraded[0]["expected_width"].as_u64()), (Some(1), Some(4)));
    assert_eq!((degraded[0]["rate"].as_str(), degraded[0]["expected_rate"].as_str()), (Some("1xQDR"), Some("4xQDR")));
    assert_eq!(degraded[0]["expected_from"], "file");
    assert_eq!(report["missing_links"].as_array().map(Vec::len), Some(0));
    // 1x or 4x enabled again: 4X, as the file says.
    let out = run(&sim, "ibportstate", &["-D", "0,1", &port, "width", "3"]);
    assert!(out.status.success(), "{}", text(&out));
    let (code, report) = check(&sim, &fabric);
    assert_eq!(code, 0, "{report}");

    // The cable pulled on ibsim's console: a missing link, both ends named.
    let name = &topo.nodes[leaf].name;
    let answer = sim.send(&format!("Unlink \"{name}\"[{uplink}]")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!answer.contains("unknown"), "{answer}");
    let (code, report) = check(&sim, &fabric);
    assert_eq!(code, 1, "{report}");
    let missing = report["missing_links"].as_array().expect("missing links");
    assert_eq!(missing.len(), 1, "{report}");
    assert_eq!(ends(&missing[0]), want);
    let descs = [missing[0]["a"]["description"].as_str(), missing[0]["b"]["description"].as_str()];
    assert!(descs.contains(&Some(topo.nodes[leaf].desc.as_str())) && descs.contains(&Some(topo.nodes[spine].desc.as_str())), "{report}");
    let total: usize = ["missing_nodes", "unexpected_nodes", "extra_links", "miswired_links", "degraded_links"]
        .iter()
        .map(|k| report[*k].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(total, 0, "the missing link is the only difference: {report}");
    // The text names it too.
    let bin = fabric.sm.bin().to_str().expect("UTF-8 path");
    let out = run(&sim, bin, &["check", "--expect", fabric.net.to_str().expect("UTF-8 path")]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(shown.contains("missing links:\n"), "{shown}");
    assert!(shown.contains(&format!("{} {:?} port {uplink}", guid(leaf), topo.nodes[leaf].desc)), "{shown}");

    sim.send(&format!("ReLink \"{name}\"[{uplink}]")).unwrap_or_else(|e| panic!("{e}"));
    let (code, report) = check(&sim, &fabric);
    assert_eq!(code, 0, "{report}");
}
