//! Bad input gives one clear error line and a non-zero status, never a panic.

mod common;

use common::*;

fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| !l.trim().is_empty()).collect()
}

#[test]
fn unknown_engine_name() {
    let tmp = tempfile::tempdir().unwrap();
    let net = write(tmp.path(), "small.net", SMALL_NET);
    let (code, _, err) = smcore(&["route", net.to_str().unwrap(), "--engines", "minhop,bogus"]);
    assert_eq!(code, 2);
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("unknown routing engine `bogus`") && lines[0].contains("minhop"), "{err}");
}

#[test]
fn bad_topology_names_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let net = write(tmp.path(), "bad.net", "Switch 4 \"sw1\"\n[1] \"h1\"[1]\n[9] \"h2\"[1]\nHca 1 \"h1\"\nHca 1 \"h2\"\n");
    let (code, _, err) = smcore(&["route", net.to_str().unwrap()]);
    assert_eq!(code, 2);
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("bad.net:3"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn bad_engine_file_is_one_line_and_routing_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let net = write(tmp.path(), "small.net", SMALL_NET);
    let dir = tmp.path().join("engines");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("libbroken.so"), b"\x7fELF truncated").unwrap();
    let (code, out, err) = smcore(&["route", net.to_str().unwrap(), "--engine-dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("libbroken.so") && lines[0].contains("not a loadable library"), "{err}");
    assert!(out.contains("routed by minhop"), "{out}");
}

#[test]
fn bad_config_names_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let net = write(tmp.path(), "small.net", SMALL_NET);
    let cfg = write(tmp.path(), "smcore.toml", "lmc = 0\n[verify]\ncredit_loops = 7\n");
    let (code, _, err) = smcore(&["route", net.to_str().unwrap(), "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 2);
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("smcore.toml:3"), "{err}");
}

#[test]
fn nothing_routed_exits_non_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let net = write(tmp.path(), "small.net", SMALL_NET);
    let fx = fixtures_dir();
    let (code, out, _) = smcore(&["route", net.to_str().unwrap(), "--engine-dir", fx.to_str().unwrap(), "--engines", "test-decline,no_fallback"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("NOT ROUTED") && out.contains("not for me"), "{out}");
}

/// Issue 13 item 13: out-of-range intervals panicked in
/// `Duration::from_secs_f64`, and an LMC over 7 went on the wire.
#[test]
fn sm_intervals_and_lmc_out_of_range_are_refused_not_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let net = write(tmp.path(), "small.net", SMALL_NET);
    let net = net.to_str().unwrap();
    for (args, says) in [
        (vec!["--sweep-interval", "1e20"], "sweep interval"),
        (vec!["--sweep-interval=-3"], "sweep interval"),
        (vec!["--sm-poll-interval", "1e300"], "SM poll interval"),
        (vec!["--sm-poll-interval", "NaN"], "SM poll interval"),
        (vec!["--lmc", "8"], "LMC is 0..7"),
    ] {
        let mut all = vec!["--fabric", net, "--once"];
        all.extend(args.iter().copied());
        let (code, _, err) = smcore(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let lines = error_lines(&err);
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(says), "{args:?}: {err}");
    }
}

/// A host whose only RDMA device is in Ethernet mode (RoCE): the SM refuses
/// to start, saying why, rather than binding it; named, the same port is
/// refused as not InfiniBand (OpenSM binds such a port).
#[test]
fn the_sm_refuses_a_roce_port_and_says_so() {
    let root = tempfile::tempdir().expect("temp dir");
    let umad = root.path().join("class/infiniband_mad/umad0");
    let port = root.path().join("class/infiniband/mlx5_0/ports/1");
    std::fs::create_dir_all(&umad).expect("mkdir");
    std::fs::create_dir_all(port.join("gids")).expect("mkdir");
    for (file, text) in [
        (umad.join("ibdev"), "mlx5_0\n"),
        (umad.join("port"), "1\n"),
        (port.join("state"), "4: ACTIVE\n"),
        (port.join("link_layer"), "Ethernet\n"),
        (port.join("gids/0"), "fe80:0000:0000:0000:0002:c903:0000:0001\n"),
    ] {
        std::fs::write(file, text).expect("write");
    }
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
            .args(args)
            .env("SMCORE_SYSFS_ROOT", root.path())
            .output()
            .expect("run smcore");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["--once"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no InfiniBand port") && err.contains("mlx5_0 port 1 Ethernet (RoCE)"), "{err}");
    let (code, err) = run(&["--once", "--device", "mlx5_0", "--port", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("mlx5_0 port 1 is an Ethernet (RoCE) port, not InfiniBand"), "{err}");
    let (code, err) = run(&["--once", "--guid", "0x0002c90300000001"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not InfiniBand"), "{err}");
}

#[test]
fn a_bad_fault_spec_is_refused_naming_the_field() {
    let (code, _, err) = smcore(&["--fabric", "config/topologies/fat-tree-64.net", "--once", "--inject-faults", "drop=200%"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("drop: `200%` is not a chance"), "{err}");
}
