//! The engine ABI across sm-abi versions (issue 15 item 1): an engine built
//! against an older minor loads into this core and routes; an engine built
//! against a newer minor loads into an older core and routes; an engine
//! built against another major is refused, naming the file and both
//! versions. The engines and the older host are built from
//! tests/fixtures/abi-compat against the vendored sm-abi copies there.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use sm_abi::abi_stable::library::{lib_header_from_path, RootModule};
use sm_core::engines::chain::ChainSpec;
use sm_core::engines::Registry;

/// An engine directory holding only fixture library `file`.
fn dir_with(tmp: &Path, file: &str) -> PathBuf {
    let dir = tmp.join("engines");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixtures_dir().join(file), dir.join(file)).unwrap();
    dir
}

/// `smcore route` on the small fabric with `engine` alone, from `dir`:
/// routed by it, verified, every pair on a shortest path. Its stderr.
fn route_alone(tmp: &Path, dir: &Path, engine: &str) -> String {
    let net = write(tmp, "small.net", SMALL_NET);
    let chain = format!("{engine},no_fallback");
    let (code, out, err) = smcore(&["route", net.to_str().unwrap(), "--engine-dir", dir.to_str().unwrap(), "--engines", &chain]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.lines().any(|l| l.starts_with("result") && l.ends_with(&format!("routed by {engine}"))), "{out}");
    assert!(out.lines().any(|l| l.starts_with("reachable") && l.contains("12 of 12 pairs")), "{out}");
    assert!(out.contains("0 non-minimal pairs"), "{out}");
    err
}

/// The sm-abi version this core was built against.
fn our_abi() -> String {
    sm_abi::EngineLibraryRef::VERSION_STRINGS.to_string()
}

#[test]
fn the_abi_version_is_sm_abis_own_not_the_products() {
    assert_eq!(our_abi(), "1.2.0");
    let header = lib_header_from_path(&bin_dir().join("libsmcore_minhop.so")).expect("minhop library header");
    assert_eq!(header.version_strings().to_string(), our_abi());
    // The 1.0 fixture engine's own crate is 0.1.0; the library records the
    // sm-abi it was built against.
    let header = lib_header_from_path(&fixtures_dir().join("libsmcore_abi10_engine.so")).expect("1.0 engine header");
    assert_eq!(header.version_strings().to_string(), "1.0.0");
}

#[test]
fn engine_built_against_older_minor_loads_and_routes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_with(tmp.path(), "libsmcore_abi10_engine.so");
    let (code, out, err) = smcore(&["engines", "--engine-dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.lines().any(|l| l.starts_with("abi-minhop ") && l.contains("libsmcore_abi10_engine.so")), "{out}");
    assert!(!out.contains("skipped"), "{out}");

    // The core asks every oracle for its SL table (sm-abi 1.2); a 1.0
    // oracle's vtable has no such method, and the call answers the
    // trait's default (none) instead of failing the engine.
    route_alone(tmp.path(), &dir, "abi-minhop");

    // 1.1's optional root-module field is missing from a 1.0 library: the
    // core sees None instead of panicking; a 1.1 library has it.
    let reg = Registry::scan(&[dir, bin_dir()]);
    assert!(reg.problems.is_empty(), "{:?}", reg.problems);
    assert_eq!(reg.get("abi-minhop").expect("1.0 engine loaded").check_config(""), None);
    assert_eq!(reg.get("minhop").expect("minhop loaded").check_config(""), Some(Ok(())));
    let bad = reg.get("updn").expect("updn loaded").check_config("= not toml");
    assert!(matches!(&bad, Some(Err(e)) if e.contains("bad configuration")), "{bad:?}");
    // Before routing, the SM asks the chain's libraries that can answer.
    let spec = ChainSpec::parse("updn,abi-minhop", &reg).expect("both engines known");
    let bad = spec.bad_configs(&reg, &|_| "= not toml".to_string());
    assert_eq!(bad.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["updn", "minhop"], "{bad:?}");
}

#[test]
fn engine_built_against_newer_minor_routes_in_older_and_current_cores() {
    let fx = fixtures_dir();
    let lib = fx.join("libsmcore_abi13_engine.so");
    // A host built against sm-abi 1.0 routes through it and checks every
    // path against the shortest.
    let out = Command::new(fx.join("smcore-abi10-host")).arg(&lib).output().expect("run the 1.0 host");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("library sm-abi 1.3.0"), "{text}");
    assert!(text.contains("engine abi13-minhop"), "{text}");
    // Level::Error is new in 1.3: the old host has no name for it, and
    // carries on.
    assert!(text.contains("diagnostic Level(3): abi13-minhop:"), "{text}");
    assert!(text.contains("routed 12 pairs on shortest paths"), "{text}");

    // This core (1.2) too, logging the unknown level as a warning.
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_with(tmp.path(), "libsmcore_abi13_engine.so");
    let err = route_alone(tmp.path(), &dir, "abi13-minhop");
    assert!(err.lines().any(|l| l.contains("WARN") && l.contains("a level added in sm-abi 1.3")), "{err}");
}

#[test]
fn engine_built_against_another_major_is_refused_naming_file_and_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_with(tmp.path(), "libsmcore_abi20_engine.so");
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert!(reg.engines.is_empty(), "{:?}", reg.engines);
    let [problem] = reg.problems.as_slice() else { panic!("one problem expected: {:?}", reg.problems) };
    let text = problem.to_string();
    assert!(text.contains("libsmcore_abi20_engine.so"), "{text}");
    assert!(text.contains("incompatible engine ABI") && text.contains("2.0.0") && text.contains(&our_abi()), "{text}");

    let (code, out, _) = smcore(&["engines", "--engine-dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.lines().any(|l| l.starts_with("skipped") && l.contains("libsmcore_abi20_engine.so") && l.contains("2.0.0")), "{out}");

    // And the 1.0 host refuses it likewise.
    let fx = fixtures_dir();
    let out = Command::new(fx.join("smcore-abi10-host")).arg(fx.join("libsmcore_abi20_engine.so")).output().expect("run the 1.0 host");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && text.contains("2.0.0") && text.contains("1.0.0"), "{text}");
}
