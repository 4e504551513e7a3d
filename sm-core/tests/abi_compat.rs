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
    assert_eq!(our_abi(), "1.3.0");
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
    assert_eq!(bad.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["updn", "minhop-balanced"], "{bad:?}");
}

/// A previous routing of `fabric` whose tables route nothing: nothing an
/// engine could keep.
fn previous_of(fabric: &sm_abi::FabricSnapshot, engine: &str) -> sm_abi::PreviousRouting {
    let lfts: Vec<sm_abi::PreviousLft> = fabric
        .switches()
        .map(|n| sm_abi::PreviousLft { guid: fabric.nodes[n as usize].guid, ports: vec![sm_abi::NO_ROUTE; fabric.max_lid as usize + 1].into() })
        .collect();
    sm_abi::PreviousRouting { engine: engine.into(), lfts: lfts.into() }
}

#[test]
fn a_reroute_reaches_engines_of_1_3_and_older_ones_route_from_scratch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_with(tmp.path(), "libsmcore_abi10_engine.so");
    let reg = Registry::scan(&[dir, bin_dir()]);
    assert!(reg.problems.is_empty(), "{:?}", reg.problems);
    let topo = sm_topology::parse_str(SMALL_NET, "small").expect("topology");
    let fabric = sm_topology::lids::snapshot(&topo, 0).expect("LIDs");
    let previous = previous_of(&fabric, "minhop");
    // A 1.0 engine's vtable has no `reroute`: the trait's default body
    // routes from scratch, and the routing is the one `route` gives.
    let old = reg.get("abi-minhop").expect("1.0 engine").create("").expect("created");
    let again = old.reroute(&fabric, &previous).into_result().expect("a 1.0 engine re-routes from scratch");
    let fresh = old.route(&fabric).into_result().expect("routes");
    assert_eq!(again.lfts, fresh.lfts);
    assert!(!again.diagnostics.iter().any(|d| d.message.contains("continued from the previous routing")));
    // A 1.3 engine continues from it (here every entry is broken and is
    // routed again), and says so.
    let new = reg.get("minhop-balanced").expect("minhop-balanced").create("").expect("created");
    let r = new.reroute(&fabric, &previous).into_result().expect("re-routed");
    let said: Vec<&str> = r.diagnostics.iter().map(|d| d.message.as_str()).collect();
    assert!(said.iter().any(|m| m.contains("continued from the previous routing (minhop)") && m.contains(" 0 entries kept")), "{said:?}");
}

#[test]
fn engine_built_against_newer_minor_routes_in_older_and_current_cores() {
    let fx = fixtures_dir();
    let lib = fx.join("libsmcore_abi14_engine.so");
    // A host built against sm-abi 1.0 routes through it and checks every
    // path against the shortest.
    let out = Command::new(fx.join("smcore-abi10-host")).arg(&lib).output().expect("run the 1.0 host");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("library sm-abi 1.4.0"), "{text}");
    assert!(text.contains("engine abi14-minhop"), "{text}");
    // Level::Error is new in 1.4: the old host has no name for it, and
    // carries on.
    assert!(text.contains("diagnostic Level(3): abi14-minhop:"), "{text}");
    assert!(text.contains("routed 12 pairs on shortest paths"), "{text}");

    // This core (1.3) too, logging the unknown level as a warning.
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir_with(tmp.path(), "libsmcore_abi14_engine.so");
    let err = route_alone(tmp.path(), &dir, "abi14-minhop");
    assert!(err.lines().any(|l| l.contains("WARN") && l.contains("a level added in sm-abi 1.4")), "{err}");
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
