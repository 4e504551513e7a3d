//! Engine hot swap: with the SM running, a new build of an engine library
//! installed over the old one is in service at the sweep after SIGHUP, and
//! a broken file installed the same way is refused while the old build
//! keeps routing. LIDs and programmed tables are kept throughout (the
//! embedded fabric is not restarted).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin_dir, workspace};

/// The swap fixture built with `SMCORE_SWAP_BUILD=build`, copied to a file
/// of its own.
fn swap_build(build: &str, out: &Path) -> PathBuf {
    let ws = workspace();
    let target = ws.join("target").join("fixtures-swap");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "smcore-swap-engine", "--manifest-path"])
        .arg(ws.join("tests/fixtures/Cargo.toml"))
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

/// Installs `from` as `to` the way package managers do: a new file renamed
/// over the old one (the old build stays intact for the process using it).
fn install(from: &Path, to: &Path) {
    let tmp = to.with_extension("so.new");
    std::fs::copy(from, &tmp).expect("stage");
    std::fs::rename(&tmp, to).expect("rename");
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
    let topo = workspace().join("config/topologies/fat-tree-64.net");
    let mut child = Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(&topo)
        .arg("--engine-dir")
        .arg(&engines)
        .args(["--engines", "swap,no_fallback", "--sweep-interval", "0.3", "--log", "info"])
        .env("SMCORE_ENGINE_PATH", bin_dir())
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
