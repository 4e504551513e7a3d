//! `smcore ctl` against a running SM on the embedded fabric: `status` says
//! what the SM did, `sweep` causes a heavy sweep, `reload` rescans the
//! engine directories and sweeps, a bad command is refused, and the socket
//! goes away with the SM.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bin_dir;

fn ctl(socket: &Path, command: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(["ctl", "--socket"])
        .arg(socket)
        .arg(command)
        .output()
        .expect("run smcore ctl");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn heavy_sweeps(report: &Path) -> u64 {
    std::fs::read_to_string(report)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|j| j["heavy_sweep"].as_u64())
        .unwrap_or(0)
}

fn wait_for(child: &mut std::process::Child, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        assert!(child.try_wait().expect("wait").is_none(), "smcore exited waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctl_status_sweep_and_reload_steer_a_running_sm() {
    let tmp = tempfile::tempdir().expect("tmp");
    let report = tmp.path().join("report.json");
    let socket = tmp.path().join("smcore.sock");
    let topo = common::workspace().join("config/topologies/fat-tree-64.net");
    let mut child = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(&topo)
        // Long enough that no light sweep or retry muddles the count.
        .args(["--sweep-interval", "60", "--report"])
        .arg(&report)
        .arg("--control-socket")
        .arg(&socket)
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn smcore");
    wait_for(&mut child, "the first heavy sweep", || heavy_sweeps(&report) >= 1);

    let (ok, status) = ctl(&socket, "status");
    assert!(ok, "{status}");
    assert!(status.contains("role: master"), "{status}");
    assert!(status.contains("heavy_sweeps: 1"), "{status}");
    assert!(status.contains("routed_by: minhop"), "{status}");

    let (ok, answer) = ctl(&socket, "sweep");
    assert!(ok && answer.starts_with("ok"), "{answer}");
    wait_for(&mut child, "the requested sweep", || heavy_sweeps(&report) >= 2);
    let (ok, answer) = ctl(&socket, "reload");
    assert!(ok && answer.starts_with("ok"), "{answer}");
    wait_for(&mut child, "the sweep after the reload", || heavy_sweeps(&report) >= 3);
    let (_, status) = ctl(&socket, "status");
    assert!(status.contains("last_cause: Reload"), "{status}");

    let (ok, answer) = ctl(&socket, "teleport");
    assert!(!ok && answer.contains("unknown command"), "{answer}");

    // SAFETY: plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("== heavy sweep 2 (Requested)"), "{stdout}");
    assert!(stdout.contains("== heavy sweep 3 (Reload)"), "{stdout}");
    assert!(!socket.exists(), "the socket is removed when the SM stops");
    let (ok, answer) = ctl(&socket, "status");
    assert!(!ok && answer.contains("smcore.sock"), "a clear error names the socket: {answer}");
}

/// Issue 13 item 13: only root or the SM's own user may steer it, even when
/// the socket's mode was loosened (SO_PEERCRED); before, anyone who could
/// open the socket could make the SM sweep.
#[test]
fn another_user_cannot_steer_the_sm_even_through_an_open_socket() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};
    assert!(nix::unistd::geteuid().is_root(), "this test runs as root (CI does): it runs a client as uid 65534");
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    let path = dir.path().join("smcore.sock");
    let signals = Arc::new(sm_core::daemon::Signals::default());
    let status = Arc::new(Mutex::new(sm_core::control::Status::default()));
    let _socket = sm_core::control::serve(&path, Arc::clone(&signals), status).expect("serve");
    // An admin's mistake: the socket opened to everyone.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod socket");
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(["ctl", "--socket"])
        .arg(&path)
        .arg("sweep")
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run smcore ctl as nobody");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("may not steer"), "{text}");
    assert!(!signals.sweep.load(Ordering::Relaxed), "nobody made the SM sweep");
    // Root still may.
    let (ok, text) = ctl(&path, "sweep");
    assert!(ok, "{text}");
    assert!(signals.sweep.load(Ordering::Relaxed));
}
