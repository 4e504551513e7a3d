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
    common::ctl(socket, &[command])
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
    let gone = ctl_json(&socket, &["status"]);
    assert!(gone["error"].as_str().is_some_and(|e| e.contains("smcore.sock")), "{gone}");
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

fn ctl_json(socket: &Path, command: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(["ctl", "--json", "--socket"])
        .arg(socket)
        .args(command)
        .output()
        .expect("run smcore ctl --json");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "one JSON object on one line: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{command:?}: not JSON ({e}): {text}"))
}

/// What the topology file says: ports counted by `portstatus` (every
/// external switch port, every linked CA port), the linked ones, and the
/// switch GUIDs.
struct Expected {
    ports: u64,
    linked: u64,
    switches: Vec<String>,
}

fn expected(topo: &Path) -> Expected {
    let text = std::fs::read_to_string(topo).expect("topology");
    let (mut ports, mut linked, mut switches, mut in_switch) = (0, 0, Vec::new(), false);
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("switchguid=0x") {
            let hex = rest.split('(').next().expect("guid");
            switches.push(format!("{:#018x}", u64::from_str_radix(hex, 16).expect("hex guid")));
        } else if let Some(rest) = line.strip_prefix("Switch") {
            in_switch = true;
            ports += rest.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).expect("port count");
        } else if line.starts_with("Ca") || line.starts_with("Rt") {
            in_switch = false;
        } else if line.starts_with('[') {
            linked += 1;
            if !in_switch {
                ports += 1;
            }
        }
    }
    Expected { ports, linked, switches }
}

/// Issue 16 item 5: OpenSM console's verbs on a running SM. portstatus
/// counts what the topology holds, lidbalance names every switch,
/// dump_conf hides the keys, reroute routes afresh where `sweep` reuses the
/// unicast cache, loglevel changes the filter of the running SM (and
/// refuses a bad one), and `--json` answers parse.
#[test]
fn console_verbs_report_the_fabric_and_steer_the_running_sm() {
    let tmp = tempfile::tempdir().expect("tmp");
    let report = tmp.path().join("report.json");
    let socket = tmp.path().join("smcore.sock");
    let stderr_path = tmp.path().join("stderr.log");
    let config = tmp.path().join("smcore.toml");
    std::fs::write(&config, "sm_key = 4242\nsa_key = 31337\nlmc = 0\n").expect("config");
    let topo = common::workspace().join("config/topologies/fat-tree-64.net");
    let want = expected(&topo);
    let mut child = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--config")
        .arg(&config)
        .arg("--fabric")
        .arg(&topo)
        .args(["--sweep-interval", "60", "--ucast-cache", "--report"])
        .arg(&report)
        .arg("--control-socket")
        .arg(&socket)
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .env_remove("RUST_LOG")
        .env_remove("SMCORE_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&stderr_path).expect("stderr file")))
        .spawn()
        .expect("spawn smcore");
    wait_for(&mut child, "the first heavy sweep", || heavy_sweeps(&report) >= 1);

    // portstatus: every port of the file, all Active 4x, as linked.
    let ports = ctl_json(&socket, &["portstatus"]);
    assert_eq!(ports["ports"].as_u64(), Some(want.ports), "{ports}");
    assert_eq!(ports["states"]["Active"].as_u64(), Some(want.linked), "{ports}");
    let states: u64 = ports["states"].as_object().expect("states").values().filter_map(|v| v.as_u64()).sum();
    assert_eq!(states, want.ports, "{ports}");
    assert_eq!(ports["widths"]["4x"].as_u64(), Some(want.linked), "{ports}");
    assert_eq!(ports["speeds"]["QDR"].as_u64(), Some(want.linked), "{ports}");
    assert_eq!(ports["not_active"]["count"].as_u64(), Some(0), "{ports}");
    assert_eq!(ports["disabled"]["count"].as_u64(), Some(0), "{ports}");
    let (ok, text) = ctl(&socket, "portstatus");
    assert!(ok && text.contains(&format!("states: Active {}", want.linked)), "{text}");

    // lidbalance: every switch once, every end-port LID forwarded, and
    // the routing summary.
    let balance = ctl_json(&socket, &["lidbalance"]);
    let mut listed: Vec<String> = balance["listed"]
        .as_array()
        .expect("listed")
        .iter()
        .map(|s| s["guid"].as_str().expect("guid").to_string())
        .collect();
    listed.sort();
    let mut switches = want.switches.clone();
    switches.sort();
    assert_eq!(listed, switches, "{balance}");
    assert_eq!(balance["switches"].as_u64(), Some(switches.len() as u64));
    assert_eq!(balance["routing"]["engine"], "minhop-balanced", "{balance}");
    assert_eq!(balance["routing"]["credit_loops"], false, "{balance}");
    for s in balance["listed"].as_array().expect("listed") {
        assert_eq!(s["lids"].as_u64(), Some(64), "every host LID is forwarded: {s}");
    }
    let (ok, text) = ctl(&socket, "lidbalance");
    assert!(ok && text.contains("routing: routed by minhop") && text.contains("\"spine-0\""), "{text}");
    let route = ctl_json(&socket, &["route"]);
    assert_eq!(route["verdict"], "routed by minhop-balanced", "{route}");

    // dump_conf: the keys are there, their values are not.
    let (ok, conf) = ctl(&socket, "dump_conf");
    assert!(ok, "{conf}");
    assert!(conf.contains("sm_key ********\n") && conf.contains("sa_key ********\n"), "{conf}");
    assert!(!conf.contains("4242") && !conf.contains("31337"), "a secret shows: {conf}");
    assert!(conf.contains("lmc 0\n"), "{conf}");
    // What the command line set, not the file's default.
    assert!(conf.contains("sweep_interval 60.0\n") && conf.contains("use_ucast_cache true\n"), "{conf}");
    assert_eq!(ctl_json(&socket, &["dump_conf"])["sm_key"], "********");

    // loglevel: the SM starts at warn; debug lines appear once asked for.
    assert!(!std::fs::read_to_string(&stderr_path).expect("stderr").contains("DEBUG"));
    assert_eq!(ctl_json(&socket, &["loglevel"])["filter"], "warn");
    let changed = ctl_json(&socket, &["loglevel", "debug"]);
    assert_eq!(changed["previous"], "warn", "{changed}");
    let (ok, answer) = ctl(&socket, "loglevel verbose");
    assert!(!ok && answer.contains("not a level"), "{answer}");
    let refused = ctl_json(&socket, &["loglevel", "sm_core=loud"]);
    assert!(refused["error"].is_string(), "{refused}");
    assert_eq!(ctl_json(&socket, &["loglevel"])["filter"], "debug", "a refused filter keeps the old one");

    // sweep: the cache is reused (no routing phase), and debug lines show.
    assert!(ctl_json(&socket, &["sweep"])["ok"].is_string());
    wait_for(&mut child, "the requested sweep", || heavy_sweeps(&report) >= 2);
    let phases = |report: &Path| -> serde_json::Value {
        let text = std::fs::read_to_string(report).expect("report");
        serde_json::from_str::<serde_json::Value>(&text).expect("report JSON")["phases_ms"].clone()
    };
    assert!(phases(&report).get("route").is_none(), "the cached routing is reused: {}", phases(&report));
    let log = std::fs::read_to_string(&stderr_path).expect("stderr");
    assert!(log.contains("DEBUG") && log.contains("discovery done"), "{log}");
    assert!(log.contains("heavy_sweep{n=2 cause=Requested}: routing taken from the unicast cache"), "{log}");

    // reroute: the engines route again.
    let (ok, answer) = ctl(&socket, "reroute");
    assert!(ok && answer.starts_with("ok"), "{answer}");
    wait_for(&mut child, "the reroute sweep", || heavy_sweeps(&report) >= 3);
    assert!(phases(&report).get("route").is_some(), "reroute computed the routing: {}", phases(&report));
    let status = ctl_json(&socket, &["status"]);
    assert_eq!(status["last_cause"], "Reroute", "{status}");

    let unknown = ctl_json(&socket, &["teleport"]);
    assert!(unknown["error"].as_str().is_some_and(|e| e.contains("unknown command")), "{unknown}");

    // SAFETY: plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("== heavy sweep 3 (Reroute)"), "{stdout}");
    let log = std::fs::read_to_string(&stderr_path).expect("stderr");
    assert!(!log.contains("heavy_sweep{n=3 cause=Reroute}: routing taken from the unicast cache"), "{log}");
}

/// `dump_conf` follows SIGHUP: a re-read file's sweep interval and engine
/// list are what it shows, a start-only key (LMC) keeps its running value.
#[test]
fn dump_conf_shows_the_configuration_a_sighup_applied() {
    let tmp = tempfile::tempdir().expect("tmp");
    let conf = tmp.path().join("opensm.conf");
    let socket = tmp.path().join("smcore.sock");
    std::fs::write(&conf, "sweep_interval 60\nlmc 0\nsm_sl 3\n").expect("write conf");
    let mut child =
        common::spawn_sm(["--config".as_ref(), conf.as_os_str(), "--control-socket".as_ref(), socket.as_os_str()]);
    let dump = |socket: &Path| ctl(socket, "dump_conf").1;
    wait_for(&mut child, "the first heavy sweep", || ctl(&socket, "status").1.contains("heavy_sweeps: 1"));
    let before = dump(&socket);
    assert!(before.contains("sweep_interval 60.0\n") && before.contains("routing_engine minhop-balanced\n"), "{before}");
    assert!(before.contains("sm_sl 3\n"), "the SL every port is given as MasterSMSL: {before}");
    std::fs::write(&conf, "sweep_interval 30\nlmc 1\nrouting_engine updn\n").expect("rewrite conf");
    common::signal(&child, libc::SIGHUP);
    wait_for(&mut child, "the re-read configuration", || dump(&socket).contains("sweep_interval 30.0\n"));
    let after = dump(&socket);
    assert!(after.contains("routing_engine updn\n"), "{after}");
    assert!(after.contains("lmc 0\n"), "LMC is kept until a restart: {after}");
    common::signal(&child, libc::SIGTERM);
    assert!(child.wait().expect("wait").success());
}
