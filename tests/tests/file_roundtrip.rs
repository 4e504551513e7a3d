//! The `file` engine through the `smcore` binary: tables routed by minhop
//! and dumped, loaded back with `--engines file,no_fallback --lfts-file`,
//! dump again: `opensm-lfts.dump` must come out byte for byte the same.
//! A broken LFT file must leave the fabric unrouted (no fallback) with the
//! file and line in the engine's reason. And OpenSM's tables, read off ibsim with
//! `ibroute`, load into smcore's fabric (other LIDs) by port GUID.
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-file` first; the ibroute tests also need the Debian
//! packages opensm, ibsim-utils and infiniband-diags.

use std::path::Path;

use smcore_tests::smcore::{Profile, RouteOptions, Smcore};

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

fn route(
    sm: &Smcore,
    net: &Path,
    engines: &str,
    report: &Path,
    dump: Option<&Path>,
    extra: &[String],
) -> serde_json::Value {
    let mut opts = RouteOptions::new(engines, report);
    if let Some(d) = dump {
        opts = opts.dump_dir(d);
    }
    opts.extra_args = extra.to_vec();
    let run = sm.route(net, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        run.status.success(),
        "smcore route --engines {engines} failed ({}):\n{}",
        run.status,
        run.output
    );
    let text = std::fs::read_to_string(report)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", report.display(), run.output));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", report.display()))
}

fn roundtrip(name: &str, gen_args: &[&str], lmc: u8) {
    let sm = smcore();
    let tmp = tempfile::Builder::new()
        .prefix(&format!("file-rt-{name}-"))
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join(format!("{name}.net"));
    sm.gen(gen_args, &net).unwrap_or_else(|e| panic!("{e}"));
    let lmc_args = vec!["--lmc".to_string(), lmc.to_string()];
    let (a, b) = (tmp.path().join("A"), tmp.path().join("B"));

    let ra = route(
        &sm,
        &net,
        "minhop",
        &tmp.path().join("a.json"),
        Some(&a),
        &lmc_args,
    );
    assert_eq!(ra["engine"], "minhop", "{name}: {ra}");
    let dump_a = a.join("opensm-lfts.dump");
    let mut args = lmc_args.clone();
    args.extend(["--lfts-file".to_string(), dump_a.display().to_string()]);
    let rb = route(
        &sm,
        &net,
        "file,no_fallback",
        &tmp.path().join("b.json"),
        Some(&b),
        &args,
    );
    assert_eq!(rb["engine"], "file", "{name}: {rb}");
    assert_eq!(rb["reachable_pairs"], ra["reachable_pairs"], "{name}");
    assert_eq!(rb["credit_loops"], ra["credit_loops"], "{name}");

    let text_a = std::fs::read_to_string(&dump_a).expect("A dump");
    let text_b = std::fs::read_to_string(b.join("opensm-lfts.dump")).expect("B dump");
    assert!(text_a.lines().count() > 10, "{name}: dump too small");
    if text_a != text_b {
        let first = text_a.lines().zip(text_b.lines()).position(|(x, y)| x != y);
        panic!("{name}: opensm-lfts.dump differs (first differing line {first:?})");
    }
    println!(
        "{name} (LMC {lmc}): {} lines identical, {} pairs routed",
        text_a.lines().count(),
        rb["reachable_pairs"]
    );
}

#[test]
fn mesh_roundtrip() {
    roundtrip("mesh", &["mesh", "--dims", "4x3", "--hosts", "2"], 0);
}

#[test]
fn fat_tree_roundtrip_with_lmc() {
    roundtrip(
        "fat-tree",
        &[
            "fat-tree",
            "--leaves",
            "4",
            "--spines",
            "2",
            "--hosts-per-leaf",
            "4",
            "--uplinks",
            "4",
        ],
        1,
    );
}

#[test]
fn random_with_faults_roundtrip() {
    roundtrip(
        "random",
        &[
            "random",
            "--switches",
            "12",
            "--ports",
            "8",
            "--hosts",
            "2",
            "--extra-links",
            "6",
            "--seed",
            "3",
            "--remove-links",
            "2",
        ],
        0,
    );
}

#[test]
fn broken_file_leaves_the_fabric_unrouted_and_names_the_line() {
    let sm = smcore();
    let tmp = tempfile::tempdir().expect("temp dir");
    let net = tmp.path().join("m.net");
    sm.gen(&["mesh", "--dims", "3x3", "--hosts", "1"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let bad = tmp.path().join("bad.dump");
    std::fs::write(
        &bad,
        "Unicast lids [0-2] of switch Lid 2 guid 0x2 ('s'):\n0x0001 001 # ok\n0x0002 two\n",
    )
    .unwrap();
    // Run directly: the harness's report reader wants a routed fabric.
    let report = tmp.path().join("r.json");
    let out = std::process::Command::new(sm.bin())
        .arg("route")
        .arg(&net)
        .args(["--engines", "file,no_fallback", "--lfts-file"])
        .arg(&bad)
        .arg("--report")
        .arg(&report)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run smcore");
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\n{}",
            report.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let r: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    assert!(r["engine"].is_null(), "{r}");
    let reason = r["attempts"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains(&format!(
            "{}:3: cannot parse the output port",
            bad.display()
        )),
        "{r}"
    );
}

/// (switch GUID, destination port GUID, LID offset in its block) → port.
fn guid_tables(dir: &Path) -> std::collections::BTreeMap<(u64, u64, u16), u8> {
    use smcore_tests::lfts::{lid_map_for_dump_dir, parse_lfts_file};
    let lfts = parse_lfts_file(dir.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let lids = lid_map_for_dump_dir(dir).unwrap_or_else(|e| panic!("{e}"));
    let mut base = std::collections::BTreeMap::new();
    for (&lid, &guid) in &lids.by_lid {
        base.entry(guid).or_insert(lid);
    }
    let mut t = std::collections::BTreeMap::new();
    for (sw, lft) in &lfts.switches {
        for (&lid, &guid) in &lids.by_lid {
            if let Some(p) = lft.port(lid) {
                t.insert((*sw, guid, lid - base[&guid]), p);
            }
        }
    }
    t
}

/// OpenSM routes under ibsim; `ibroute` reads every switch's LFT back; the
/// file engine loads that output into smcore's fabric, whose LIDs differ
/// from OpenSM's, and must reproduce OpenSM's tables port GUID by port GUID.
fn ibroute_into_file_engine(name: &str, gen_args: &[&str], lmc: u8) {
    use smcore_tests::ibsim::Ibsim;
    use smcore_tests::opensm::{self, OpenSmOptions};
    let sm = smcore();
    let tmp = tempfile::Builder::new()
        .prefix(&format!("file-ibroute-{name}-"))
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join(format!("{name}.net"));
    sm.gen(gen_args, &net).unwrap_or_else(|e| panic!("{e}"));

    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{name}: {e}"));
    let opts = OpenSmOptions {
        extra_args: vec!["-l".into(), lmc.to_string()],
        ..OpenSmOptions::new("minhop")
    };
    let osm = opensm::run(&sim, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        osm.success(),
        "{name}: opensm failed ({:?}):\n{}",
        osm.outcome,
        osm.output
    );
    let theirs = switch_lids(osm.dump_dir());
    let mut text = String::new();
    for lid in &theirs {
        let out = sim
            .client_command("ibroute")
            .unwrap_or_else(|e| panic!("{e}"))
            .arg(lid.to_string())
            .output()
            .unwrap_or_else(|e| panic!("ibroute: {e}"));
        assert!(
            out.status.success(),
            "ibroute {lid}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    drop(sim);
    assert!(
        text.contains("valid lids dumped"),
        "{name}: not ibroute output:\n{text}"
    );
    let file = tmp.path().join("ibroute.out");
    std::fs::write(&file, &text).expect("write ibroute output");

    let b = tmp.path().join("B");
    let args = vec![
        "--lmc".to_string(),
        lmc.to_string(),
        "--lfts-file".to_string(),
        file.display().to_string(),
    ];
    let r = route(
        &sm,
        &net,
        "file,no_fallback",
        &tmp.path().join("b.json"),
        Some(&b),
        &args,
    );
    assert_eq!(r["engine"], "file", "{name}: {r}");
    assert_eq!(r["reachable_pairs"], r["pairs"], "{name}: {r}");

    let (want, got) = (guid_tables(osm.dump_dir()), guid_tables(&b));
    let lid_map = |d: &Path| {
        smcore_tests::lfts::lid_map_for_dump_dir(d)
            .unwrap_or_else(|e| panic!("{e}"))
            .by_lid
    };
    let (theirs_lids, ours_lids) = (lid_map(osm.dump_dir()), lid_map(&b));
    let lids_differ = theirs_lids
        .iter()
        .filter(|(l, g)| ours_lids.get(l) != Some(g))
        .count();
    println!(
        "{name} (LMC {lmc}): {} switches read with ibroute, {} entries, {lids_differ} of {} LIDs name another port in smcore",
        theirs.len(),
        want.len(),
        theirs_lids.len()
    );
    assert!(
        lids_differ > 0,
        "{name}: the two SMs gave the same LIDs; the remapping was not exercised"
    );
    assert_eq!(
        got, want,
        "{name}: tables loaded from ibroute differ from OpenSM's"
    );
}

/// The switches' LIDs in an OpenSM dump directory.
fn switch_lids(dir: &Path) -> Vec<u16> {
    let lfts = smcore_tests::lfts::parse_lfts_file(dir.join("opensm-lfts.dump"))
        .unwrap_or_else(|e| panic!("{e}"));
    lfts.switches.values().map(|s| s.lid).collect()
}

#[test]
fn opensm_tables_read_with_ibroute_load_by_port_guid() {
    ibroute_into_file_engine(
        "fat-tree",
        &[
            "fat-tree",
            "--leaves",
            "4",
            "--spines",
            "2",
            "--hosts-per-leaf",
            "3",
            "--uplinks",
            "2",
        ],
        0,
    );
}

#[test]
fn opensm_tables_read_with_ibroute_load_by_port_guid_with_lmc() {
    ibroute_into_file_engine("mesh", &["mesh", "--dims", "3x2", "--hosts", "2"], 1);
}
