//! Engine loader trust (issue 13, items 1 and 11): libraries another user
//! could have written are refused, relative engine paths are never resolved
//! against the working directory, and a hot-swapped build is never staged
//! at a path another user can predict.
//!
//! These tests chown files to `nobody`, so they must run as root (the SM
//! does); they fail with a clear message otherwise. Needs
//! `cargo build --workspace` first (the minhop engine beside the binary).

mod common;

use std::os::unix::fs::{chown, symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use common::*;
use sm_core::engines::loader::{search_path, search_path_with_config};
use sm_core::engines::Registry;

const NOBODY: u32 = 65534;
const MINHOP: &str = "libsmcore_minhop.so";

fn require_root() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "these tests chown files to another user and must run as root");
}

fn minhop_lib() -> PathBuf {
    let lib = bin_dir().join(MINHOP);
    assert!(lib.is_file(), "{} missing: run `cargo build --workspace` first", lib.display());
    lib
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `dir` (created) holding a copy of the minhop engine; returns the copy.
fn engine_dir(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    chmod(dir, 0o755);
    let lib = dir.join(MINHOP);
    std::fs::copy(minhop_lib(), &lib).expect("copy engine");
    chmod(&lib, 0o755);
    lib
}

/// The problem reported for `path`, which must exist.
fn problem_for(reg: &Registry, path: &Path) -> String {
    reg.problems
        .iter()
        .find(|p| p.path == path)
        .map(|p| p.reason.clone())
        .unwrap_or_else(|| panic!("no problem reported for {}: {:?}", path.display(), reg.problems))
}

fn assert_not_loaded(reg: &Registry) {
    assert!(reg.get("minhop").is_none(), "minhop was loaded from {:?}", reg.get("minhop").map(|e| &e.library));
}

#[test]
fn a_trusted_directory_still_loads() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("good");
    engine_dir(&dir);
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert!(reg.get("minhop").is_some(), "{:?}", reg.problems);
    assert!(reg.problems.is_empty(), "{:?}", reg.problems);
}

#[test]
fn a_world_writable_directory_with_a_library_of_another_user_is_refused() {
    require_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("shared");
    let lib = engine_dir(&dir);
    chmod(&dir, 0o777);
    chmod(&lib, 0o777);
    chown(&dir, Some(NOBODY), Some(NOBODY)).expect("chown dir");
    chown(&lib, Some(NOBODY), Some(NOBODY)).expect("chown lib");
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert_not_loaded(&reg);
    let why = problem_for(&reg, &dir);
    assert!(why.contains("refused") && why.contains(&dir.display().to_string()), "{why}");
}

#[test]
fn a_library_writable_by_others_or_owned_by_another_user_is_refused() {
    require_root();
    let tmp = tempfile::tempdir().expect("tmp");

    let dir = tmp.path().join("writable-file");
    let lib = engine_dir(&dir);
    chmod(&lib, 0o666);
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert_not_loaded(&reg);
    let why = problem_for(&reg, &lib);
    assert!(why.contains("writable by others") && why.contains("0666"), "{why}");

    let dir = tmp.path().join("group-writable-file");
    let lib = engine_dir(&dir);
    chmod(&lib, 0o775);
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &lib).contains("writable by its group"), "{:?}", reg.problems);

    let dir = tmp.path().join("foreign-file");
    let lib = engine_dir(&dir);
    chown(&lib, Some(NOBODY), None).expect("chown lib");
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &lib).contains("owned by uid 65534"), "{:?}", reg.problems);
}

#[test]
fn a_directory_or_parent_another_user_controls_is_refused() {
    require_root();
    let tmp = tempfile::tempdir().expect("tmp");

    // The directory itself: owned by nobody, not writable by others.
    let dir = tmp.path().join("foreign-dir");
    engine_dir(&dir);
    chown(&dir, Some(NOBODY), None).expect("chown dir");
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &dir).contains("owned by uid 65534"), "{:?}", reg.problems);

    // A world-writable parent lets anyone rename the directory away and
    // put their own in its place.
    let parent = tmp.path().join("open-parent");
    let dir = parent.join("engines");
    engine_dir(&dir);
    chmod(&parent, 0o777);
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &dir).contains("parent"), "{:?}", reg.problems);

    // A sticky one (as /tmp) does not: others cannot rename what is ours.
    chmod(&parent, 0o1777);
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert!(reg.get("minhop").is_some(), "{:?}", reg.problems);
}

#[test]
fn a_link_to_a_library_in_an_untrusted_directory_is_refused() {
    require_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let open = tmp.path().join("open");
    let planted = engine_dir(&open);
    chmod(&open, 0o777);
    let dir = tmp.path().join("engines");
    std::fs::create_dir(&dir).expect("mkdir");
    let link = dir.join(MINHOP);
    symlink(&planted, &link).expect("symlink");
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &link).contains("writable by others"), "{:?}", reg.problems);

    // The same link to a library in a trusted directory loads.
    chmod(&open, 0o755);
    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert!(reg.get("minhop").is_some(), "{:?}", reg.problems);
}

/// `target` as a path relative to the working directory.
fn relative_to_cwd(target: &Path) -> PathBuf {
    let cwd = std::env::current_dir().expect("cwd");
    let mut up = PathBuf::new();
    let mut base = cwd.as_path();
    loop {
        if let Ok(rest) = target.strip_prefix(base) {
            return up.join(rest);
        }
        up.push("..");
        base = base.parent().expect("a common ancestor");
    }
}

#[test]
fn relative_engine_directories_are_never_resolved_against_the_working_directory() {
    let rel = relative_to_cwd(&bin_dir());
    assert!(rel.is_relative() && rel.join(MINHOP).is_file(), "{} does not reach the engines", rel.display());
    let reg = Registry::scan(std::slice::from_ref(&rel));
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &rel).contains("relative"), "{:?}", reg.problems);

    // SMCORE_ENGINE_PATH and configured entries stay relative, so scan
    // refuses them; the working directory is never consulted.
    let env = format!("{}:/nonexistent-smcore-engines", rel.display());
    let dirs = search_path_with_config(&[], &[PathBuf::from("conf/rel")], Some(&env));
    assert!(dirs.contains(&rel) && dirs.contains(&PathBuf::from("conf/rel")), "{dirs:?}");
    let reg = Registry::scan(&dirs);
    assert!(problem_for(&reg, &rel).contains("relative"), "{:?}", reg.problems);
    assert!(problem_for(&reg, Path::new("conf/rel")).contains("relative"), "{:?}", reg.problems);

    // A relative --engine-dir is what the operator typed: made absolute
    // once, at startup.
    let dirs = search_path(std::slice::from_ref(&rel), None);
    let cwd = std::env::current_dir().expect("cwd");
    assert_eq!(dirs[0], cwd.join(&rel));
}

#[test]
fn the_executables_directory_is_not_searched_when_others_can_write_it() {
    require_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("bin");
    engine_dir(&dir);
    let exe = dir.join("smcore");
    std::fs::copy(bin_dir().join("smcore"), &exe).expect("copy smcore");
    chmod(&exe, 0o755);
    let run = || {
        let out = std::process::Command::new(&exe)
            .arg("engines")
            .env_remove("SMCORE_ENGINE_PATH")
            .current_dir(tmp.path())
            .output()
            .expect("run smcore engines");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = run();
    assert!(listed.lines().any(|l| l.starts_with("minhop")), "{listed}");
    chmod(&dir, 0o777);
    let listed = run();
    assert!(!listed.lines().any(|l| l.starts_with("minhop")), "{listed}");
    assert!(listed.contains("writable by others"), "{listed}");
}

/// Mappings of this process whose file is under `dir`.
fn mapped_under(dir: &Path) -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let dir = dir.display().to_string();
    maps.lines().filter(|l| l.contains(&dir)).map(str::to_string).collect()
}

/// A new file renamed over the old one, as package managers install.
fn reinstall(lib: &Path) {
    let staged = lib.with_extension("so.new");
    std::fs::copy(minhop_lib(), &staged).expect("stage");
    chmod(&staged, 0o755);
    std::fs::rename(&staged, lib).expect("rename");
}

#[test]
fn a_hot_swapped_build_is_never_staged_where_another_user_can_reach_it() {
    require_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("engines");
    let lib = engine_dir(&dir);

    // The attacker's directory and a file of the victim's.
    let evil = tmp.path().join("evil");
    std::fs::create_dir(&evil).expect("mkdir");
    chmod(&evil, 0o777);
    chown(&evil, Some(NOBODY), Some(NOBODY)).expect("chown");
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"precious\n").expect("victim");
    // Planted ahead of time where the old loader staged copies: the
    // staging directory itself as a link to the attacker's, and in it,
    // links from every name a copy could take to the victim.
    let predictable = std::env::temp_dir().join(format!("smcore-engines-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&predictable);
    let _ = std::fs::remove_file(&predictable);
    symlink(&evil, &predictable).expect("plant the staging directory");
    for n in 0..64 {
        symlink(&victim, evil.join(format!("{n}-{MINHOP}"))).expect("plant a copy name");
    }
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _cleanup = Cleanup(predictable.clone());

    let reg = Registry::scan(std::slice::from_ref(&dir));
    assert!(reg.get("minhop").is_some(), "{:?}", reg.problems);
    reinstall(&lib);
    let reg = reg.rescan();
    assert!(reg.problems.is_empty(), "{:?}", reg.problems);
    let entry = reg.get("minhop").expect("minhop after the swap");
    assert_eq!(entry.library, dir.canonicalize().expect("real dir").join(MINHOP));

    assert_eq!(std::fs::read(&victim).expect("victim"), b"precious\n", "the loader wrote through a planted link");
    assert_eq!(std::fs::read_dir(&evil).expect("evil").count(), 64, "the loader wrote into the attacker's directory");
    assert!(mapped_under(&evil).is_empty(), "loaded from the attacker's directory: {:?}", mapped_under(&evil));
    assert!(mapped_under(&predictable).is_empty(), "{:?}", mapped_under(&predictable));
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    assert!(
        maps.contains(&format!("memfd:smcore-engine:{MINHOP}")),
        "the new build is not mapped from a private memory file"
    );
}

#[test]
fn loading_one_file_directly_checks_it_too() {
    require_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("one");
    let lib = engine_dir(&dir);
    chmod(&lib, 0o666);
    let mut reg = Registry::default();
    reg.load_file(&lib);
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &lib).contains("writable by others"), "{:?}", reg.problems);
    chmod(&lib, 0o644);
    chmod(&dir, 0o777);
    let mut reg = Registry::default();
    reg.load_file(&lib);
    assert_not_loaded(&reg);
    assert!(problem_for(&reg, &lib).contains("engine directory refused"), "{:?}", reg.problems);
    chmod(&dir, 0o755);
    let mut reg = Registry::default();
    reg.load_file(&lib);
    assert!(reg.get("minhop").is_some(), "{:?}", reg.problems);
}
