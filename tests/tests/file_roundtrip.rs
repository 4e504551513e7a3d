//! The `file` engine through the `smcore` binary: tables routed by minhop
//! and dumped, loaded back with `--engines file,no_fallback --lfts-file`,
//! dump again: `opensm-lfts.dump` must come out byte for byte the same.
//! A broken LFT file must leave the fabric unrouted (no fallback) with the
//! file and line in the engine's reason.
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-file` first.

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
