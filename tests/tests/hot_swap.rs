//! Engine hot swap. On the embedded fabric: with the SM running, a new
//! build of an engine library installed over the old one is in service at
//! the sweep after SIGHUP, and a broken file installed the same way is
//! refused while the old build keeps routing.
//!
//! Under ibsim: a new build is installed over the old one and
//! `smcore ctl reload` puts it in service. The switches, read back with `ibroute`, then hold
//! the new build's tables (its ties between equal-cost paths differ from
//! the old one's), every pair is reached and no LID moves. A broken file
//! installed the same way is refused and the switches keep the new build's
//! tables.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smcore_tests::fabric_check::lfts_read_back;
use smcore_tests::diags::Generated;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{parse_guid2lid_file, parse_lfts_file, quality};
use smcore_tests::sm_run::RunningSm;
use smcore_tests::smcore::{target_dir, workspace_root, Profile, Smcore};

/// The swap fixture engine built as build `build`, copied to a file of its
/// own in `out`.
fn swap_build(build: &str, out: &Path) -> PathBuf {
    let target = target_dir().join("fixtures-swap");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "smcore-swap-engine", "--manifest-path"])
        .arg(workspace_root().join("tests/fixtures/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env("SMCORE_SWAP_BUILD", build)
        .status()
        .expect("run cargo for the swap fixture");
    assert!(status.success(), "building the swap fixture failed");
    let copy = out.join(format!("libswap-build{build}.so"));
    std::fs::copy(target.join("debug/libsmcore_swap_engine.so"), &copy).expect("copy fixture");
    copy
}

/// A new file renamed over the old one, as package managers install.
fn install(from: &Path, to: &Path) {
    let tmp = to.with_extension("so.new");
    std::fs::copy(from, &tmp).expect("stage");
    std::fs::rename(&tmp, to).expect("rename");
}

fn ctl(sm: &Smcore, socket: &Path, command: &str) {
    let out = Command::new(sm.bin()).args(["ctl", "--socket"]).arg(socket).arg(command).output().expect("smcore ctl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.starts_with("ok"), "smcore ctl {command}: {text}");
}

fn wait_for(log: &Path, what: &str, mut done: impl FnMut(&str) -> bool, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if done(&text) {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("smcore exited ({status}) waiting for {what}:\n{text}");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("timed out waiting for {what}:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn a_new_engine_build_takes_over_after_sighup_and_a_broken_one_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let build1 = swap_build("1", tmp.path());
    let build2 = swap_build("2", tmp.path());
    let engines = tmp.path().join("engines");
    std::fs::create_dir(&engines).expect("engine dir");
    let installed = engines.join("libswap.so");
    install(&build1, &installed);

    let log = tmp.path().join("smcore.log");
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let topo = workspace_root().join("config/topologies/fat-tree-64.net");
    let mut child = Command::new(sm.bin())
        .arg("--fabric")
        .arg(&topo)
        .arg("--engine-dir")
        .arg(&engines)
        .args(["--engines", "swap,no_fallback", "--sweep-interval", "0.3", "--log", "info"])
        .env("SMCORE_ENGINE_PATH", sm.bin().parent().expect("the binary's directory"))
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn smcore");

    wait_for(&log, "build 1 routing", |t| t.contains("swap engine build 1") && t.contains("heavy sweep done"), &mut child);

    install(&build2, &installed);
    signal(&child, libc::SIGHUP);
    wait_for(&log, "build 2 routing", |t| t.contains("swap engine build 2"), &mut child);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let after = &text[text.find("engine directories rescanned").expect("a rescan")..];
    assert!(after.contains("swap engine build 2") && !after.contains("swap engine build 1"), "{text}");

    // A broken file installed over it: refused, build 2 keeps routing.
    let junk = tmp.path().join("junk.so");
    std::fs::write(&junk, b"this is not a shared library").expect("junk");
    install(&junk, &installed);
    let routed_before = text.matches("swap engine build 2").count();
    signal(&child, libc::SIGHUP);
    wait_for(
        &log,
        "the refusal and build 2 routing again",
        |t| t.contains("new build refused") && t.matches("swap engine build 2").count() > routed_before,
        &mut child,
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let refused = &text[text.find("new build refused").expect("refusal")..];
    assert!(refused.contains("swap engine build 2") && !refused.contains("swap engine build 1"), "{text}");
    assert!(!text.contains("no engine routed"), "{text}");

    signal(&child, libc::SIGTERM);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
}

#[test]
fn an_engine_upgrade_is_in_the_switches_after_reload_and_a_broken_one_is_refused() {
    let fabric = Generated::fat_tree("hot-swap-ibsim-", 4, 3, 3, 3).unwrap_or_else(|e| panic!("{e}"));
    let (sm, tmp, net, topo) = (&fabric.sm, fabric.dir(), &fabric.net, &fabric.topo);
    let build1 = swap_build("1", tmp);
    let build2 = swap_build("2", tmp);
    let engines = tmp.join("engines");
    std::fs::create_dir(&engines).expect("engine dir");
    let installed = engines.join("libswap.so");
    install(&build1, &installed);

    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = tmp.join("dumps");
    let report = tmp.join("report.json");
    let socket = tmp.join("smcore.sock");
    let engine_dir = engines.display().to_string();
    let socket_arg = socket.display().to_string();
    let args = [
        "--engine-dir",
        engine_dir.as_str(),
        "--engines",
        "swap,no_fallback",
        "--sweep-interval",
        "30",
        "--control-socket",
        socket_arg.as_str(),
        "--log",
        "info",
    ];
    let mut run = RunningSm::start(&sim, &sm, &dumps, &report, &args).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let dump = |r: &RunningSm| parse_lfts_file(r.dump_dir().join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let check = |r: &RunningSm, when: &str| {
        lfts_read_back(&sim, r.dump_dir()).unwrap_or_else(|e| panic!("{when}: {e}"));
        let lids = parse_guid2lid_file(r.dump_dir().join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
        let q = quality(&topo, &dump(r), &lids).unwrap_or_else(|e| panic!("{e}"));
        assert!(q.all_reachable(), "{when}: {}/{} pairs", q.reachable_pairs, q.pairs);
        lids.by_lid
    };
    let lids = check(&run, "build 1");
    let tables1 = dump(&run);

    // The upgrade: build 2 over build 1, then reload.
    install(&build2, &installed);
    let before = run.heavy_sweeps();
    ctl(&sm, &socket, "reload");
    run.wait_for("the sweep after the reload", Duration::from_secs(60), |r| r.heavy_sweeps() > before)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(check(&run, "build 2"), lids, "LIDs moved with the upgrade");
    let tables2 = dump(&run);
    assert_ne!(tables1, tables2, "build 2 routes differently, and its tables are what the switches hold");

    // A broken file over build 2: refused, the switches keep build 2's
    // tables.
    let junk = tmp.join("junk.so");
    std::fs::write(&junk, b"this is not a shared library").expect("junk");
    install(&junk, &installed);
    let before = run.heavy_sweeps();
    ctl(&sm, &socket, "reload");
    run.wait_for("the sweep after the refused reload", Duration::from_secs(60), |r| r.heavy_sweeps() > before)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(check(&run, "after the broken build"), lids);
    assert_eq!(dump(&run), tables2, "the old build stays in service");

    let (status, output) = run.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{output}");
    let refused = output.find("new build refused").unwrap_or_else(|| panic!("no refusal logged:\n{output}"));
    assert!(output[refused..].contains("swap engine build 2"), "build 2 routes after the refusal:\n{output}");
    assert!(!output[refused..].contains("swap engine build 1"), "{output}");
}
