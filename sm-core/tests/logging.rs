//! The SM's log as an admin handles it: a file that logrotate moves away
//! and SIGUSR1 reopens (OpenSM's signal; by default it would kill the
//! process), JSON lines for a collector, and OpenSM's `log_flags`.

mod common;

use std::path::Path;
use std::process::Command;

use common::{bin_dir, count, signal, spawn_sm, wait_for, workspace, write};




fn ctl_sweep(socket: &Path) {
    let (ok, text) = common::ctl(socket, &["sweep"]);
    assert!(ok, "{text}");
}

#[test]
fn sigusr1_reopens_a_log_file_that_was_moved_away() {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("smcore.log");
    let moved = tmp.path().join("smcore.log.1");
    let socket = tmp.path().join("smcore.sock");
    let mut child = spawn_sm([
        "--sweep-interval".as_ref(),
        "60".as_ref(),
        "--log".as_ref(),
        "info".as_ref(),
        "--log-file".as_ref(),
        log.as_os_str(),
        "--control-socket".as_ref(),
        socket.as_os_str(),
    ]);
    wait_for(&mut child, "the first heavy sweep in the log", || count(&log, "heavy sweep done") >= 1);

    // What logrotate does without copytruncate: move, then signal.
    std::fs::rename(&log, &moved).expect("move the log");
    signal(&child, libc::SIGUSR1);
    ctl_sweep(&socket);
    wait_for(&mut child, "a heavy sweep in the reopened log", || count(&log, "heavy sweep done") >= 1);

    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "SIGUSR1 must not end the SM: {:?}", out.status);
    assert_eq!(count(&moved, "heavy sweep done"), 1, "the moved file keeps what it had");
    assert_eq!(count(&log, "SM stopped"), 1, "the SM's last words are in the new file");
    assert!(String::from_utf8_lossy(&out.stderr).trim().is_empty(), "nothing on stderr: {:?}", out.stderr);
}

#[test]
fn json_lines_and_opensm_log_flags() {
    let tmp = tempfile::tempdir().expect("tmp");
    // log_flags 0x03 (OpenSM's default: ERROR|INFO) is info.
    let conf = write(tmp.path(), "opensm.conf", "log_flags 0x03\n");
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--config")
        .arg(&conf)
        .arg("--fabric")
        .arg(workspace().join("config/topologies/fat-tree-64.net"))
        .args(["--once", "--log-format", "json"])
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .env_remove("SMCORE_LOG")
        .output()
        .expect("run smcore");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let records: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON record ({e}): {l}")))
        .collect();
    assert!(!records.is_empty(), "info records expected at log_flags 0x03");
    assert!(records.iter().all(|r| r["level"].is_string() && r["fields"].is_object()), "{err}");
    assert!(records.iter().any(|r| r["level"] == "INFO"), "{err}");
}

#[test]
fn a_log_file_that_cannot_be_opened_is_an_error_before_the_sm_starts() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(workspace().join("config/topologies/fat-tree-64.net"))
        .arg("--once")
        .arg("--log-file")
        .arg(tmp.path().join("no-such-dir/smcore.log"))
        .output()
        .expect("run smcore");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-dir/smcore.log"), "{err}");
}

#[test]
fn opensm_dash_d_flags_choose_the_level() {
    let run = |flags: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
            .args(["-D", flags, "--fabric"])
            .arg(workspace().join("config/topologies/fat-tree-64.net"))
            .arg("--once")
            .env("SMCORE_ENGINE_PATH", bin_dir())
            .env_remove("SMCORE_LOG")
            .output()
            .expect("run smcore");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // 0x08 (DEBUG) shows debug records; 0x01 (ERROR) shows none of them.
    assert!(run("0x08").contains("DEBUG"), "debug records at -D 0x08");
    assert!(!run("0x01").contains("DEBUG"), "no debug records at -D 0x01");
}

#[test]
fn log_syslog_sends_each_record_to_the_syslog_socket() {
    let tmp = tempfile::tempdir().expect("tmp");
    let socket = tmp.path().join("log");
    let daemon = std::os::unix::net::UnixDatagram::bind(&socket).expect("bind a syslog socket");
    daemon.set_read_timeout(Some(std::time::Duration::from_secs(30))).expect("timeout");
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(["--log", "syslog", "-D", "0x03", "--fabric"])
        .arg(workspace().join("config/topologies/fat-tree-64.net"))
        .arg("--once")
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .env("SMCORE_SYSLOG_SOCKET", &socket)
        .env_remove("SMCORE_LOG")
        .output()
        .expect("run smcore");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).trim().is_empty(), "nothing on stderr: {}", String::from_utf8_lossy(&out.stderr));
    let mut buf = [0u8; 4096];
    let n = daemon.recv(&mut buf).expect("a record in the syslog socket");
    let record = String::from_utf8_lossy(&buf[..n]).into_owned();
    // Facility daemon (3), severity info (6): <30>.
    assert!(record.starts_with("<30>smcore["), "{record}");
}
