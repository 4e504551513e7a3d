//! `smcore doctor` on this machine (no InfiniBand) and on fake sysfs trees:
//! each check says ok/warn/fail with a next step, and the exit status is 0
//! only when the SM can start.

mod common;

use std::path::Path;
use std::process::Command;

/// A fake sysfs tree with one umad device per `(ca, port, state, link_layer)`.
fn tree(root: &Path, devices: &[(&str, u8, &str, &str)]) {
    for (i, (ca, port, state, layer)) in devices.iter().enumerate() {
        let umad = root.join(format!("class/infiniband_mad/umad{i}"));
        let ports = root.join(format!("class/infiniband/{ca}/ports/{port}"));
        std::fs::create_dir_all(&umad).expect("mkdir");
        std::fs::create_dir_all(ports.join("gids")).expect("mkdir");
        for (file, text) in [
            (umad.join("ibdev"), format!("{ca}\n")),
            (umad.join("port"), format!("{port}\n")),
            (ports.join("state"), format!("{state}\n")),
            (ports.join("link_layer"), format!("{layer}\n")),
            (ports.join("gids/0"), format!("fe80:0000:0000:0000:0002:c903:0000:000{i}\n")),
        ] {
            std::fs::write(file, text).expect("write");
        }
    }
}

/// `smcore doctor --json ARGS` with sysfs at `sys` and /dev at `dev`: exit
/// status and the JSON answer.
fn doctor(sys: &Path, dev: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("doctor")
        .arg("--json")
        .args(args)
        .env("SMCORE_SYSFS_ROOT", sys)
        .env("SMCORE_DEV_ROOT", dev)
        .env("SMCORE_ENGINE_PATH", common::bin_dir())
        .output()
        .expect("run smcore doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (out.status.code().unwrap_or(-1), json)
}

/// The check called `name`: its verdict and detail.
fn check<'a>(json: &'a serde_json::Value, name: &str) -> (&'a str, &'a str) {
    let c = json["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name}: {json}"));
    (c["verdict"].as_str().unwrap_or_default(), c["detail"].as_str().unwrap_or_default())
}

#[test]
fn no_infiniband_device_is_a_clear_failure() {
    let (sys, dev) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    let (code, json) = doctor(sys.path(), dev.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(json["can_start"], false);
    let (verdict, detail) = check(&json, "devices");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("no InfiniBand device"), "{detail}");
    // The rest is still examined.
    assert_eq!(check(&json, "engines").0, "ok");
}

#[test]
fn a_roce_only_host_fails_and_says_why() {
    let (sys, dev) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    tree(sys.path(), &[("mlx5_0", 1, "4: ACTIVE", "Ethernet")]);
    let (code, json) = doctor(sys.path(), dev.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(check(&json, "devices").0, "fail");
    let (verdict, detail) = check(&json, "port");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("no InfiniBand port"), "{detail}");
}

#[test]
fn the_port_it_would_bind_and_why_then_the_device_files() {
    let (sys, dev) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    tree(
        sys.path(),
        &[("mlx5_0", 1, "4: ACTIVE", "Ethernet"), ("mlx5_1", 1, "2: INIT", "InfiniBand"), ("mlx5_2", 1, "4: ACTIVE", "InfiniBand")],
    );
    // No device files: the port is right, opening it is not.
    let (code, json) = doctor(sys.path(), dev.path(), &[]);
    assert_eq!(code, 1);
    let (verdict, detail) = check(&json, "port");
    assert_eq!(verdict, "ok");
    assert!(detail.contains("mlx5_2 port 1") && detail.contains("the first Active InfiniBand port"), "{detail}");
    let (verdict, detail) = check(&json, "access");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("umad2: No such file"), "{detail}");

    // Named: the RoCE port is refused as such.
    let (code, json) = doctor(sys.path(), dev.path(), &["--device", "mlx5_0", "--port", "1"]);
    assert_eq!(code, 1);
    let (verdict, detail) = check(&json, "port");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("not InfiniBand"), "{detail}");
}

#[test]
fn a_bad_configuration_and_an_unknown_engine_are_named() {
    let (sys, dev) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    let conf = sys.path().join("smcore.toml");
    std::fs::write(&conf, "lmc = 2\nsweep_interval = \"often\"\n").expect("write");
    let (code, json) = doctor(sys.path(), dev.path(), &["--config", conf.to_str().expect("utf-8"), "--engines", "ftree,bogus"]);
    assert_eq!(code, 1);
    let (verdict, detail) = check(&json, "config");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("smcore.toml:2"), "{detail}");
    let (verdict, detail) = check(&json, "chain");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("bogus"), "{detail}");
}

#[test]
fn on_this_machine_the_text_names_each_check_and_the_outcome() {
    let (sys, dev) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("doctor")
        .env("SMCORE_SYSFS_ROOT", sys.path())
        .env("SMCORE_DEV_ROOT", dev.path())
        .env("SMCORE_ENGINE_PATH", common::bin_dir())
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL  devices") && text.contains("next: install the HCA"), "{text}");
    assert!(text.ends_with("the SM cannot start: fix what FAILed\n"), "{text}");
}

#[test]
fn an_smi_gsi_pair_binds_smps_to_the_smi_device_and_general_mads_to_the_gsi_one() {
    // Two devices of one port GUID (rdma-core's SMI/GSI pairs); the first
    // listed, Active too, says IsSMDisabled in its CapabilityMask.
    let (sys, dev) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    tree(sys.path(), &[("mlx5_0", 1, "4: ACTIVE", "InfiniBand"), ("mlx5_1", 1, "4: ACTIVE", "InfiniBand")]);
    for (ca, cap) in [("mlx5_0", "0xa651ec48"), ("mlx5_1", "0xa651e848")] {
        let ports = sys.path().join(format!("class/infiniband/{ca}/ports/1"));
        std::fs::write(ports.join("cap_mask"), format!("{cap}\n")).expect("write");
        std::fs::write(ports.join("gids/0"), "fe80:0000:0000:0000:0002:c903:0000:0042\n").expect("write");
    }
    let (_, json) = doctor(sys.path(), dev.path(), &[]);
    let (verdict, detail) = check(&json, "port");
    assert_eq!(verdict, "ok", "{detail}");
    assert!(detail.contains("mlx5_1"), "the SMI device is bound: {detail}");
    let (verdict, detail) = check(&json, "gmp port");
    assert_eq!(verdict, "ok");
    assert!(detail.contains("SA and PMA on umad0 mlx5_0") && detail.contains("SMI/GSI pair"), "{detail}");
    // The GSI half named is refused, naming the SMI device.
    let (_, json) = doctor(sys.path(), dev.path(), &["--device", "mlx5_0"]);
    let (verdict, detail) = check(&json, "port");
    assert_eq!(verdict, "fail");
    assert!(detail.contains("IsSMDisabled") && detail.contains("mlx5_1 port 1"), "{detail}");
}
