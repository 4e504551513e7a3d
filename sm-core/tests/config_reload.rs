//! SIGHUP re-reads the configuration file: a changed `sweep_interval`
//! takes effect (light sweeps come at the new pace), a key bound to the
//! start (LMC) keeps its running value and the log says it needs a
//! restart, and a file that no longer parses leaves the configuration in
//! force and the SM running.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{signal, spawn_sm, wait_for};

fn status(socket: &Path) -> String {
    common::ctl(socket, &["status"]).1
}

fn field(status: &str, key: &str) -> Option<String> {
    status.lines().find_map(|l| l.strip_prefix(&format!("{key}: ")).map(str::to_string))
}



#[test]
fn sighup_applies_runtime_keys_keeps_start_keys_and_survives_a_bad_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let conf = tmp.path().join("opensm.conf");
    let log = tmp.path().join("smcore.log");
    let socket = tmp.path().join("smcore.sock");
    std::fs::write(&conf, "sweep_interval 60\nlmc 0\n").expect("write conf");
    let mut child = spawn_sm([
        "--config".as_ref(),
        conf.as_os_str(),
        "--log".as_ref(),
        "info".as_ref(),
        "--log-file".as_ref(),
        log.as_os_str(),
        "--control-socket".as_ref(),
        socket.as_os_str(),
    ]);
    wait_for(&mut child, "the first heavy sweep", || field(&status(&socket), "heavy_sweeps").is_some());
    assert_eq!(field(&status(&socket), "sweep_interval").as_deref(), Some("60s"));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(field(&status(&socket), "light_sweeps"), None, "no light sweep within a minute's interval");

    std::fs::write(&conf, "# faster\nsweep_interval 1\nlmc 1\n").expect("rewrite conf");
    signal(&child, libc::SIGHUP);
    wait_for(&mut child, "the new interval", || field(&status(&socket), "sweep_interval").as_deref() == Some("1s"));
    wait_for(&mut child, "light sweeps at the new pace", || {
        field(&status(&socket), "light_sweeps").and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n >= 2)
    });
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("configuration re-read") && text.contains("applied=sweep_interval"), "{text}");
    assert!(text.contains("kept until a restart: lmc"), "{text}");

    // A typo made while the SM runs: reported, nothing changes.
    std::fs::write(&conf, "sweep_interval 1\nsweep_intervall 5\n").expect("rewrite conf");
    let before = field(&status(&socket), "heavy_sweeps");
    signal(&child, libc::SIGHUP);
    wait_for(&mut child, "the refusal in the log", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("configuration not applied") && t.contains("opensm.conf:2"))
    });
    wait_for(&mut child, "the reload's heavy sweep", || field(&status(&socket), "heavy_sweeps") != before);
    assert_eq!(field(&status(&socket), "sweep_interval").as_deref(), Some("1s"));

    signal(&child, libc::SIGTERM);
    assert!(child.wait().expect("wait").success());
}

/// The report's engine and heavy sweep number, once written.
fn report(path: &Path) -> Option<(Option<String>, u64)> {
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    Some((json["engine"].as_str().map(str::to_string), json["heavy_sweep"].as_u64()?))
}

#[test]
fn sighup_keeps_the_command_line_engine_options_in_force() {
    // The README's torus-2QoS command line, with a configuration file.
    let tmp = tempfile::tempdir().expect("tmp");
    let conf = tmp.path().join("opensm.conf");
    let log = tmp.path().join("smcore.log");
    let socket = tmp.path().join("smcore.sock");
    let json = tmp.path().join("report.json");
    std::fs::write(&conf, "sweep_interval 60\n").expect("write conf");
    let ws = common::workspace();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(ws.join("config/topologies/torus-4x4x4.net"))
        .args(["--engines", "torus-2QoS,no_fallback", "--torus-config"])
        .arg(ws.join("config/torus-2QoS.conf"))
        .arg("--config")
        .arg(&conf)
        .args(["--log", "info", "--log-file"])
        .arg(&log)
        .arg("--control-socket")
        .arg(&socket)
        .arg("--report")
        .arg(&json)
        .env("SMCORE_ENGINE_PATH", common::bin_dir())
        .env_remove("SMCORE_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn smcore");
    let torus = Some("torus-2QoS".to_string());
    wait_for(&mut child, "the first heavy sweep's report", || report(&json).is_some());
    assert_eq!(report(&json), Some((torus.clone(), 1)));

    // The file unchanged: the reload's heavy sweep still has the torus
    // configuration the command line gave.
    signal(&child, libc::SIGHUP);
    wait_for(&mut child, "the reload's heavy sweep", || report(&json).is_some_and(|(_, n)| n >= 2));
    assert_eq!(report(&json), Some((torus.clone(), 2)), "{}", std::fs::read_to_string(&log).unwrap_or_default());

    // The file names another torus configuration and engine list: the
    // command line wins, and the log says so.
    std::fs::write(&conf, "sweep_interval 60\ntorus_config /nonexistent/torus-2QoS.conf\nrouting_engine minhop\n").expect("rewrite conf");
    signal(&child, libc::SIGHUP);
    wait_for(&mut child, "the second reload's heavy sweep", || report(&json).is_some_and(|(_, n)| n >= 3));
    assert_eq!(report(&json), Some((torus, 3)), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("given on the command line, which wins: routing_engine, torus_config"), "{text}");

    signal(&child, libc::SIGTERM);
    assert!(child.wait().expect("wait").success());
}
