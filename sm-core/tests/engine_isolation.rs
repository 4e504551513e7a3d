//! Engines that cannot take the SM down: each deliberately broken engine
//! of tests/fixtures (a null write, abort, exit(0), an endless loop, an
//! allocation without end, a routing for another fabric, a panic) first in
//! the chain, with `engine_isolation = "process"` (the default): the
//! attempt ends with a failure of its own kind and the next engine routes,
//! through the library, `smcore route`, and the SM on the embedded fabric,
//! whose SA still answers. Inline, the same engines end the SM's process
//! (what the README says).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use sm_core::engines::chain::Failure;
use sm_core::engines::host::{HostFailure, Isolation, Mode};
use sm_core::engines::Registry;

fn engines_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("engines");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::copy(fixtures_dir().join("libsmcore_test_engines.so"), dir.join("libsmcore_test_engines.so")).expect("copy");
    dir
}

/// Limits small enough for the runaway engines to hit them quickly.
fn limited() -> Isolation {
    Isolation { mode: Mode::Process, timeout: Some(Duration::from_secs(3)), memory_mib: Some(512) }
}

/// The chain `bad,minhop` on fat-tree-64 through the library: the first
/// attempt's failure, and who routed.
fn attempt(bad: &str, isolation: Isolation) -> (Option<Failure>, Option<String>) {
    let tmp = tempfile::tempdir().expect("tmp");
    let registry = Registry::scan(&[engines_dir(tmp.path()), bin_dir()]);
    let fabric = sm_core::offline::load_fabric(&workspace().join("config/topologies/fat-tree-64.net"), 0).expect("fabric");
    let config = sm_core::config::Config::default();
    let mut settings = config.route_settings();
    settings.isolation = isolation;
    let mut report = sm_core::report::RouteReport::default();
    let out = sm_core::offline::route_fabric(&fabric, &registry, &format!("{bad},minhop"), &settings, None, &mut report).expect("chain");
    (out.attempts[0].failure.clone(), out.routed.map(|r| r.engine))
}

#[test]
fn every_broken_engine_is_its_attempts_failure_and_the_next_engine_routes() {
    let cases: [(&str, fn(&Failure) -> bool); 7] = [
        ("test-segv", |f| matches!(f, Failure::Host(HostFailure::Signal { signal, .. }) if signal == "SIGSEGV")),
        ("test-abort", |f| matches!(f, Failure::Host(HostFailure::Signal { signal, .. }) if signal == "SIGABRT")),
        ("test-exit", |f| matches!(f, Failure::Host(HostFailure::Exited(0)))),
        ("test-spin", |f| matches!(f, Failure::Host(HostFailure::TimedOut(t)) if *t == Duration::from_secs(3))),
        // Past the address-space limit the allocator aborts.
        ("test-alloc", |f| matches!(f, Failure::Host(HostFailure::Signal { signal, .. }) if signal == "SIGABRT")),
        ("test-wrong-size", |f| matches!(f, Failure::Host(HostFailure::Malformed(m)) if m.starts_with("lfts"))),
        ("test-panic", |f| matches!(f, Failure::Panic(m) if m.contains("deliberate test panic"))),
    ];
    // Built first: the time limit below is the attempt's, not cargo's.
    fixtures_dir();
    for (bad, expected) in cases {
        let started = Instant::now();
        // Only the endless loop is meant to meet the 3 s limit; the others
        // get room for a slow start on a busy machine.
        let isolation = if bad == "test-spin" { limited() } else { Isolation { timeout: Some(Duration::from_secs(25)), ..limited() } };
        let (failure, routed) = attempt(bad, isolation);
        let failure = failure.unwrap_or_else(|| panic!("{bad} routed"));
        assert!(expected(&failure), "{bad}: {failure:?} ({failure})");
        assert_eq!(routed.as_deref(), Some("minhop"), "{bad}: the next engine routes");
        assert!(started.elapsed() < Duration::from_secs(30), "{bad} took {:?}", started.elapsed());
    }
}

#[test]
fn isolated_routing_is_the_inline_routing() {
    // The same LFTs and path SLs whether the engine runs in the SM or in
    // a host: nothing is lost on the way (torus-2QoS: SLs from a table,
    // SL2VL maps; dfsssp: SLs pair by pair, sent as a matrix).
    let tmp = tempfile::tempdir().expect("tmp");
    let registry = Registry::scan(&[bin_dir()]);
    for (topo, engines) in [("torus-4x4x4.net", "torus-2QoS,no_fallback"), ("random-24.net", "dfsssp,no_fallback")] {
        let fabric = sm_core::offline::load_fabric(&workspace().join("config/topologies").join(topo), 0).expect("fabric");
        let mut config = sm_core::config::Config::default();
        config.set_option("torus_config", workspace().join("config/torus-2QoS.conf").display().to_string());
        let route = |mode: Mode| {
            let mut settings = config.route_settings();
            settings.isolation = Isolation { mode, ..Isolation::default() };
            let mut report = sm_core::report::RouteReport::default();
            sm_core::offline::route_fabric(&fabric, &registry, engines, &settings, None, &mut report)
                .expect("chain")
                .routed
                .unwrap_or_else(|| panic!("{topo}: not routed"))
        };
        let (inline, isolated) = (route(Mode::Inline), route(Mode::Process));
        assert_eq!(inline.routing.lfts, isolated.routing.lfts, "{topo}");
        assert_eq!(inline.routing.sl2vl, isolated.routing.sl2vl, "{topo}");
        assert_eq!(inline.routing.vls_used, isolated.routing.vls_used, "{topo}");
        for s in 0..=fabric.max_lid {
            for d in 0..=fabric.max_lid {
                assert_eq!(inline.routing.path_sl.path_sl(s, d), isolated.routing.path_sl.path_sl(s, d), "{topo}: SL {s}->{d}");
            }
        }
    }
    drop(tmp);
}

#[test]
fn smcore_route_survives_each_isolated_and_dies_inline() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = engines_dir(tmp.path());
    let dir = dir.to_str().expect("utf-8");
    let topo = workspace().join("config/topologies/fat-tree-64.net");
    let topo = topo.to_str().expect("utf-8");
    let limits = write(tmp.path(), "limits.toml", "engine_timeout = 3\nengine_memory_limit = 512\n");
    let inline = write(tmp.path(), "inline.toml", "engine_isolation = \"inline\"\n");
    for bad in ["test-segv", "test-abort", "test-exit", "test-spin", "test-alloc", "test-wrong-size"] {
        let chain = format!("{bad},minhop");
        let (code, out, err) =
            smcore(&["route", topo, "--config", limits.to_str().expect("utf-8"), "--engine-dir", dir, "--engines", &chain]);
        assert_eq!(code, 0, "{bad}: {out}{err}");
        assert!(out.contains("result        routed by minhop"), "{bad}: {out}");
    }
    // Inline, the SM's process is the engine's: a null write kills it
    // (SIGSEGV), exit(0) ends it "successfully" with nothing routed.
    let inline = inline.to_str().expect("utf-8");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(["route", topo, "--config", inline, "--engine-dir", dir, "--engines", "test-segv,minhop"])
        .output()
        .expect("run");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(11), "{out:?}");
    let (code, out, _) = smcore(&["route", topo, "--config", inline, "--engine-dir", dir, "--engines", "test-exit,minhop"]);
    assert_eq!(code, 0);
    assert!(!out.contains("routed by"), "{out}");
}

#[test]
fn the_sm_on_the_embedded_fabric_survives_a_crashing_engine_and_keeps_its_sa() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = engines_dir(tmp.path());
    let socket = tmp.path().join("sm.sock");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(workspace().join("config/topologies/fat-tree-64.net"))
        .arg("--engine-dir")
        .arg(&dir)
        .args(["--engines", "test-segv,test-abort,minhop", "--sweep-interval", "1", "--control-socket"])
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("smcore");
    let ctl = |words: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
            .arg("ctl")
            .arg("--socket")
            .arg(&socket)
            .args(words)
            .output()
            .expect("ctl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answer = String::new();
    while Instant::now() < deadline {
        answer = ctl(&["saquery", "--from", "host-5", "path", "host-40"]);
        if answer.contains("packet_life") && !answer.starts_with("error") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(answer.contains("packet_life") && !answer.starts_with("error"), "{answer}");
    // Another heavy sweep: the crashing engines are tried again, the SM
    // stays up and routes with minhop.
    assert!(ctl(&["sweep"]).starts_with("ok"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().expect("wait").is_none(), "the SM died");
    let status = ctl(&["status"]);
    assert!(status.contains("minhop"), "{status}");
    let answer = ctl(&["saquery", "--from", "host-5", "path", "host-40"]);
    assert!(answer.contains("packet_life") && !answer.starts_with("error"), "{answer}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_host_loads_the_build_in_service_not_what_the_path_holds_now() {
    // The SM loaded the test engines; then a broken file is renamed over
    // the library (as a failed upgrade would leave it). The engine host
    // must still run the build the SM holds.
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = engines_dir(tmp.path());
    let registry = Registry::scan(&[dir.clone(), bin_dir()]);
    let junk = tmp.path().join("junk.so");
    std::fs::write(&junk, b"not a library").expect("junk");
    std::fs::rename(&junk, dir.join("libsmcore_test_engines.so")).expect("rename over");
    let fabric = sm_core::offline::load_fabric(&workspace().join("config/topologies/fat-tree-64.net"), 0).expect("fabric");
    let config = sm_core::config::Config::default();
    let settings = config.route_settings();
    assert_eq!(settings.isolation.mode, Mode::Process, "isolation is the default");
    let mut report = sm_core::report::RouteReport::default();
    let out = sm_core::offline::route_fabric(&fabric, &registry, "test-panic,minhop", &settings, None, &mut report).expect("chain");
    let failure = out.attempts[0].failure.clone().expect("test-panic fails");
    assert!(matches!(&failure, Failure::Panic(m) if m.contains("deliberate test panic")), "{failure:?}");
}

#[test]
fn an_isolated_engine_writes_only_in_its_dump_dir_connects_nowhere_and_starts_nothing() {
    // test-escape tries to write a file outside, connect to a TCP port,
    // start /bin/true and write into its dump_dir, and says what worked.
    // Isolated, only the dump_dir write does; inline (the same engine in
    // the SM's process) everything does: what the sandbox takes away.
    let tmp = tempfile::tempdir().expect("tmp");
    let registry = Registry::scan(&[engines_dir(tmp.path()), bin_dir()]);
    let fabric = sm_core::offline::load_fabric(&workspace().join("config/topologies/fat-tree-64.net"), 0).expect("fabric");
    let outside = tmp.path().join("outside");
    let dumps = tmp.path().join("dumps");
    std::fs::create_dir_all(&outside).expect("dir");
    std::fs::create_dir_all(&dumps).expect("dir");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    // Read by test-escape alone (the host inherits the environment).
    std::env::set_var("TEST_ESCAPE_DIR", &outside);
    std::env::set_var("TEST_ESCAPE_PORT", listener.local_addr().expect("addr").port().to_string());
    let run = |mode: Mode| {
        let config = sm_core::config::Config { dump_dir: Some(dumps.clone()), ..Default::default() };
        let mut settings = config.route_settings();
        settings.isolation = Isolation { mode, timeout: Some(Duration::from_secs(25)), memory_mib: Some(512) };
        let mut report = sm_core::report::RouteReport::default();
        let out = sm_core::offline::route_fabric(&fabric, &registry, "test-escape,minhop", &settings, None, &mut report).expect("chain");
        assert_eq!(out.routed.map(|r| r.engine).as_deref(), Some("minhop"));
        out.attempts[0].failure.clone().expect("test-escape declines").to_string()
    };
    let said = run(Mode::Process);
    for denied in ["write=denied", "connect=denied", "spawn=denied"] {
        assert!(said.contains(denied), "{said}");
    }
    assert!(said.contains("dump_dir=ok"), "{said}");
    assert!(!outside.join("escaped").exists(), "{said}");
    assert!(matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock), "a connection arrived: {said}");
    assert_eq!(std::fs::read(dumps.join("test-escape.dump")).expect("written in the dump_dir"), b"allowed");
    let said = run(Mode::Inline);
    for done in ["write=ok", "connect=ok", "spawn=ok", "dump_dir=ok"] {
        assert!(said.contains(done), "inline: {said}");
    }
    assert!(outside.join("escaped").exists());
    assert!(listener.accept().is_ok(), "inline, the engine connects");
}
