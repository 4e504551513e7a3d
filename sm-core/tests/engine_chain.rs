//! Loader and chain semantics: broken libraries are skipped with a reason,
//! failing engines fall through to the next one and to minhop-balanced
//! unless `no_fallback` is given, the verification gate rejects bad
//! results, and a re-route hands the engines the routing in force.

mod common;

use std::path::Path;

use common::*;
use sm_core::config::Config;
use sm_core::engines::chain::{self, ChainError, ChainSpec, Failure};
use sm_core::engines::Registry;

/// An engine directory with the good test engines, the wrong-ABI library,
/// a real non-engine shared library and a file that is not a library.
fn mixed_dir(tmp: &Path) -> std::path::PathBuf {
    let dir = tmp.join("engines");
    std::fs::create_dir_all(&dir).unwrap();
    let fx = fixtures_dir();
    std::fs::copy(fx.join("libsmcore_test_engines.so"), dir.join("libsmcore_test_engines.so")).unwrap();
    std::fs::copy(fx.join("libsmcore_wrong_abi.so"), dir.join("libsmcore_wrong_abi.so")).unwrap();
    let libm = ["/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("libm present");
    std::fs::copy(libm, dir.join("libnotanengine.so")).unwrap();
    std::fs::write(dir.join("garbage.so"), b"this is not an ELF file\n").unwrap();
    dir
}

fn registry(tmp: &Path) -> Registry {
    Registry::scan(&[mixed_dir(tmp), bin_dir()])
}

fn small_fabric(tmp: &Path) -> sm_abi::FabricSnapshot {
    let p = write(tmp, "small.net", SMALL_NET);
    sm_core::offline::load_fabric(&p, 0).expect("small fabric loads")
}

#[test]
fn broken_libraries_are_reported_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path());
    let names = reg.names();
    for n in ["test-panic", "test-loopy", "test-refuse", "test-decline", "minhop"] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let reason = |file: &str| {
        reg.problems
            .iter()
            .find(|p| p.path.file_name().is_some_and(|f| f == file))
            .map(|p| p.reason.clone())
            .unwrap_or_else(|| panic!("no problem reported for {file}: {:?}", reg.problems))
    };
    assert!(reason("libsmcore_wrong_abi.so").contains("incompatible engine ABI"), "{}", reason("libsmcore_wrong_abi.so"));
    assert!(reason("libnotanengine.so").contains("not an smcore engine"), "{}", reason("libnotanengine.so"));
    assert!(reason("garbage.so").contains("not a loadable library"), "{}", reason("garbage.so"));
}

#[test]
fn engines_command_lists_engines_and_skipped_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = mixed_dir(tmp.path());
    let (code, out, _) = smcore(&["engines", "--engine-dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    let line = out.lines().find(|l| l.starts_with("minhop ")).expect("minhop listed");
    assert!(line.contains("libsmcore_minhop.so") && line.contains("0.1.0"), "{line}");
    assert!(out.lines().any(|l| l.starts_with("test-panic") && l.contains("libsmcore_test_engines.so")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("skipped") && l.contains("libsmcore_wrong_abi.so") && l.contains("incompatible")), "{out}");
}

#[test]
fn panicking_and_declining_engines_fall_back_to_minhop_balanced() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path());
    let fabric = small_fabric(tmp.path());
    let spec = ChainSpec::parse("test-panic,test-decline", &reg).unwrap();
    // The implicit fallback is balanced whatever the LID numbering;
    // OpenSM's `minhop` routes only when named.
    assert_eq!(spec.sequence(), vec!["test-panic", "test-decline", "minhop-balanced"]);
    let cfg = Config::default();
    let out = chain::run(&reg, &spec, &fabric, &|n| cfg.engine_text(n), &Default::default());
    let routed = out.routed.as_ref().expect("minhop-balanced routes");
    assert_eq!(routed.engine, "minhop-balanced");
    assert_eq!(out.attempts.len(), 3);
    assert_eq!(out.attempts[0].failure, Some(Failure::Panic("deliberate test panic".into())));
    assert!(matches!(&out.attempts[1].failure, Some(Failure::Error(r)) if r.contains("not for me")));
    assert!(out.attempts[2].failure.is_none());
    let lines = out.describe();
    assert!(lines[0].starts_with("test-panic: panicked"), "{lines:?}");
    assert_eq!(lines[2], "minhop-balanced: routed");
}

#[test]
fn constructor_failure_falls_through() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path());
    let fabric = small_fabric(tmp.path());
    let spec = ChainSpec::parse("test-refuse,minhop-balanced", &reg).unwrap();
    assert_eq!(spec.sequence(), vec!["test-refuse", "minhop-balanced"], "the fallback listed explicitly is not added twice");
    // OpenSM's minhop named in the list routes; the fallback comes after it.
    let named = ChainSpec::parse("test-refuse,minhop", &reg).unwrap();
    assert_eq!(named.sequence(), vec!["test-refuse", "minhop", "minhop-balanced"]);
    let cfg = Config::default();
    let out = chain::run(&reg, &named, &fabric, &|n| cfg.engine_text(n), &Default::default());
    assert!(matches!(&out.attempts[0].failure, Some(Failure::Create(r)) if r.contains("refusing")));
    assert_eq!(out.routed.map(|r| r.engine), Some("minhop".to_string()));
}

#[test]
fn no_fallback_routes_nothing_when_engines_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path());
    let fabric = small_fabric(tmp.path());
    let spec = ChainSpec::parse("test-loopy,no_fallback", &reg).unwrap();
    assert!(spec.no_fallback);
    assert_eq!(spec.sequence(), vec!["test-loopy"]);
    let cfg = Config::default();
    let out = chain::run(&reg, &spec, &fabric, &|n| cfg.engine_text(n), &Default::default());
    assert!(out.routed.is_none());
    match &out.attempts[0].failure {
        Some(Failure::Verification(r)) => assert!(r.contains("forwarding loops") || r.contains("unreachable"), "{r}"),
        other => panic!("expected a verification failure, got {other:?}"),
    }
}

#[test]
fn gate_rejects_bad_result_and_falls_back() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path());
    let fabric = small_fabric(tmp.path());
    let spec = ChainSpec::parse("test-loopy", &reg).unwrap();
    let cfg = Config::default();
    let out = chain::run(&reg, &spec, &fabric, &|n| cfg.engine_text(n), &Default::default());
    assert!(matches!(out.attempts[0].failure, Some(Failure::Verification(_))));
    let routed = out.routed.expect("fallback routes");
    assert_eq!(routed.engine, "minhop-balanced");
    assert!(routed.verification.ok());
}

#[test]
fn unknown_engine_lists_known_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path());
    match ChainSpec::parse("minhop,nosuch", &reg) {
        Err(ChainError::UnknownEngine { name, known }) => {
            assert_eq!(name, "nosuch");
            assert!(known.iter().any(|k| k == "minhop"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(ChainSpec::parse("no_fallback", &reg), Err(ChainError::Empty { .. })));
}

#[test]
fn first_directory_wins_for_duplicate_engines() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::copy(bin_dir().join("libsmcore_minhop.so"), a.join("libsmcore_minhop.so")).unwrap();
    std::fs::copy(bin_dir().join("libsmcore_minhop.so"), b.join("libminhop_copy.so")).unwrap();
    let reg = Registry::scan(&[a.clone(), b]);
    assert_eq!(reg.get("minhop").unwrap().library, a.join("libsmcore_minhop.so"));
    assert!(reg.problems.iter().any(|p| p.reason.contains("already provided")), "{:?}", reg.problems);
}

#[test]
fn a_reroute_hands_the_routing_in_force_to_the_engines_and_a_first_route_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = Registry::scan(&[bin_dir()]);
    let fabric = small_fabric(tmp.path());
    let cfg = Config::default();
    let spec = ChainSpec::parse("updn,minhop-balanced", &reg).unwrap();
    let continued = |r: &sm_abi::Routing| r.diagnostics.iter().any(|d| d.message.contains("continued from the previous routing"));
    let first = chain::run(&reg, &spec, &fabric, &|n| cfg.engine_text(n), &Default::default());
    let first = first.routed.expect("routes");
    assert!(!continued(&first.routing));
    let engine = first.engine.clone();
    let lfts = first.routing.lfts.clone();
    let accepted = sm_core::routing::AcceptedRouting::new(first, fabric.clone(), fabric.max_lid, false, false, (0, 0));
    let previous = accepted.previous();
    assert_eq!(previous.engine.as_str(), engine);
    assert_eq!(previous.lfts.len(), lfts.len());
    // Nothing changed: every entry is kept, and the tables are the same.
    let again = chain::run_after(&reg, &spec, &fabric, &|n| cfg.engine_text(n), &Default::default(), Some(&previous), &Default::default());
    let again = again.routed.expect("routes again");
    assert_eq!(again.engine, engine);
    assert!(continued(&again.routing), "{:?}", again.routing.diagnostics);
    assert!(again.routing.diagnostics.iter().any(|d| d.message.contains(" 0 routed again, 0 changed")), "{:?}", again.routing.diagnostics);
    assert_eq!(again.routing.lfts, lfts);
}
