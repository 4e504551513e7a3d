//! Files the SM writes where another local user may write too: links
//! planted at every name the SM writes through are never followed, and a
//! dump directory another user made (the README's `/tmp/smcore-dumps`
//! taken first) is refused before anything is read from it or written.

mod common;

use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

use common::{bin_dir, write, SMALL_NET};

/// `smcore --fabric NET --once ARGS` with the workspace's engines.
fn once(net: &Path, args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_smcore"))
        .arg("--fabric")
        .arg(net)
        .arg("--once")
        .args(["--engines", "minhop"])
        .args(args)
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .env_remove("SMCORE_LOG")
        .output()
        .expect("run smcore");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn links_planted_in_the_dump_directory_are_never_followed() {
    let tmp = tempfile::tempdir().expect("tmp");
    let net = write(tmp.path(), "small.net", SMALL_NET);
    let victim = write(tmp.path(), "shadow", "precious\n");
    let dumps = tmp.path().join("dumps");
    std::fs::create_dir(&dumps).expect("mkdir");
    let report = tmp.path().join("report.json");
    let dump_names = [
        "opensm-lfts.dump",
        "opensm-lid-matrix.dump",
        "opensm-subnet.lst",
        "opensm.fdbs",
        "opensm.mcfdbs",
        "opensm-sl2vl.dump",
        "smcore-path-sl.psl",
        "guid2lid",
    ];
    // Each name, and each temporary a predictable scheme gives it (the
    // SM reads guid2lid at start: only its temporaries).
    let mut planted = Vec::new();
    for name in dump_names {
        for link in [name.to_string(), format!(".{name}.tmp"), format!("{name}.tmp")] {
            if link != "guid2lid" {
                planted.push(dumps.join(link));
            }
        }
    }
    planted.push(tmp.path().join("report.json.tmp"));
    planted.push(report.clone());
    for p in &planted {
        symlink(&victim, p).expect("plant");
    }
    let (code, out, err) = once(&net, &["--dump-dir".as_ref(), dumps.as_os_str(), "--report".as_ref(), report.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "precious\n", "a planted link was followed");
    // The files are the SM's own, each in place of the link at its name.
    for name in ["opensm-lfts.dump", "opensm-subnet.lst", "guid2lid", "opensm.fdbs"] {
        let meta = std::fs::symlink_metadata(dumps.join(name)).expect(name);
        assert!(meta.file_type().is_file(), "{name} is a file of the SM's");
        assert_eq!(meta.mode() & 0o777, 0o644, "{name}");
    }
    assert!(std::fs::read_to_string(&report).expect("report").contains("\"reachable_pairs\""));
}

#[test]
fn a_dump_directory_another_user_made_first_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let net = write(tmp.path(), "small.net", SMALL_NET);
    // Taken first by another user, as /tmp/smcore-dumps may be, with a
    // guid2lid of theirs giving a host's LID to the port they choose.
    let theirs = tmp.path().join("smcore-dumps");
    std::fs::create_dir(&theirs).expect("mkdir");
    write(&theirs, "guid2lid", "0x0002c90000000001 0x0001 0x0001\n");
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        let (code, out, err) = once(&net, &["--dump-dir".as_ref(), theirs.as_os_str()]);
        assert_eq!(code, 2, "{out}\n{err}");
        assert!(err.contains("smcore-dumps") && err.contains("uid 65534"), "{err}");
        assert!(!theirs.join("opensm-lfts.dump").exists(), "nothing written there");
        std::os::unix::fs::chown(&theirs, Some(0), Some(0)).expect("chown back");
    }
    // Writable by anyone (sticky or not), whoever owns it.
    for mode in [0o777, 0o1777] {
        std::fs::set_permissions(&theirs, std::os::unix::fs::PermissionsExt::from_mode(mode)).expect("chmod");
        let (code, out, err) = once(&net, &["--dump-dir".as_ref(), theirs.as_os_str()]);
        assert_eq!(code, 2, "{mode:o}: {out}\n{err}");
        assert!(err.contains("writable by any user"), "{err}");
        assert!(!theirs.join("opensm-lfts.dump").exists(), "nothing written there");
    }
    // A guid2lid given by name in such a directory is refused as well.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).expect("chmod");
    let g = shared.join("guid2lid");
    let (code, out, err) = once(&net, &["--guid2lid".as_ref(), g.as_os_str()]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("guid2lid not used"), "{err}");
    // The SM's own directory, made by the SM: used.
    let own = tmp.path().join("own/dumps");
    let (code, out, err) = once(&net, &["--dump-dir".as_ref(), own.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(std::fs::metadata(&own).expect("made").mode() & 0o777, 0o755);
    assert!(own.join("opensm-lfts.dump").is_file());
}
