//! The files under packaging/ work with the real tools: systemd accepts
//! the units, the flags they pass are smcore's, and the logrotate file
//! rotates a running SM's log without losing it (the SM reopens on
//! SIGUSR1 found through its pid file).

mod common;

use std::path::Path;
use std::process::Command;

use common::{count, wait_for, workspace};
use smcore_test_support::require_tool;

fn packaging(name: &str) -> String {
    let path = workspace().join("packaging").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `systemd-analyze verify` on `unit` (a copy whose ExecStart is the
/// smcore under test: verify checks the program exists).
fn verify(dir: &Path, file: &str, text: &str, unit: &str) {
    let text = text.replace("/usr/sbin/smcore", env!("CARGO_BIN_EXE_smcore"));
    std::fs::write(dir.join(file), text).expect("write unit");
    let out = Command::new(require_tool("systemd-analyze"))
        .arg("verify")
        .arg(dir.join(unit))
        .output()
        .expect("run systemd-analyze");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.trim().is_empty(), "{unit}: {:?}\n{err}", out.status);
}

#[test]
fn systemd_accepts_both_units() {
    let tmp = tempfile::tempdir().expect("tmp");
    verify(tmp.path(), "smcore.service", &packaging("smcore.service"), "smcore.service");
    verify(tmp.path(), "smcore@.service", &packaging("smcore@.service"), "smcore@0x0002c90100000001.service");
}

/// The template's ExecStart arguments, for instance `guid`, with the
/// system directories moved under `root`.
fn template_args(root: &Path, guid: &str) -> Vec<String> {
    let text = packaging("smcore@.service");
    let line = text.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("an ExecStart line");
    line.split_whitespace()
        .skip(1)
        .filter(|a| *a != "$SMCORE_OPTS")
        .map(|a| {
            a.replace("%I", guid)
                .replace("/run/", &format!("{}/run/", root.display()))
                .replace("/var/log/", &format!("{}/log/", root.display()))
        })
        .collect()
}



#[test]
fn logrotate_rotates_the_log_of_an_sm_started_as_the_template_starts_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path();
    std::fs::create_dir_all(root.join("run")).expect("run dir");
    std::fs::create_dir_all(root.join("log")).expect("log dir");
    let guid = "0x0002c90100000001";
    let log = root.join(format!("log/smcore.{guid}.log"));
    let pid_file = root.join(format!("run/smcore.{guid}.pid"));
    let socket = root.join(format!("run/smcore.{guid}.sock"));

    // On the embedded fabric, the port GUID has nothing to choose; the
    // rest of the template's command line is used as it is.
    let mut args = template_args(root, guid);
    args.extend(["--sweep-interval", "60", "--log", "info"].map(String::from));
    let mut child = common::spawn_sm(args);
    wait_for(&mut child, "the first heavy sweep in the log", || count(&log, "heavy sweep done") >= 1);
    let pid = std::fs::read_to_string(&pid_file).expect("pid file");
    assert_eq!(pid.trim(), child.id().to_string());

    let conf = root.join("logrotate.conf");
    let rotate = packaging("smcore.logrotate")
        .replace("/var/log/", &format!("{}/log/", root.display()))
        .replace("/run/", &format!("{}/run/", root.display()));
    std::fs::write(&conf, rotate).expect("write logrotate conf");
    let out = Command::new(require_tool("logrotate"))
        .arg("-f")
        .arg("-s")
        .arg(root.join("logrotate.state"))
        .arg(&conf)
        .output()
        .expect("run logrotate");
    assert!(out.status.success(), "logrotate: {}", String::from_utf8_lossy(&out.stderr));

    let rotated = root.join(format!("log/smcore.{guid}.log.1"));
    assert_eq!(count(&rotated, "heavy sweep done"), 1, "the rotated file keeps the first sweep");
    let (swept, text) = common::ctl(&socket, &["sweep"]);
    assert!(swept, "{text}");
    wait_for(&mut child, "a sweep in the new log", || count(&log, "heavy sweep done") >= 1);

    common::signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(!pid_file.exists(), "the pid file goes with the SM");
}

/// What `man` prints for `page` (80 columns, no pager).
fn render(page: &Path) -> String {
    let out = Command::new(require_tool("man"))
        .arg("-l")
        .arg(page)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .output()
        .expect("run man");
    assert!(out.status.success(), "man -l {}: {}", page.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_install_script_stages_everything_and_the_manual_pages_render() {
    let tmp = tempfile::tempdir().expect("tmp");
    let stage = tmp.path().join("stage");
    let build = Path::new(env!("CARGO_BIN_EXE_smcore")).parent().expect("build dir");
    let install = |what: &str| {
        let out = Command::new("bash")
            .arg(workspace().join("packaging/install.sh"))
            .env("DESTDIR", &stage)
            .env("BUILD", build)
            .output()
            .expect("run install.sh");
        assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    install("first install");
    for file in [
        "usr/sbin/smcore",
        "usr/lib/smcore/engines/libsmcore_minhop.so",
        "usr/lib/smcore/engines/libsmcore_torus2qos.so",
        "lib/systemd/system/smcore.service",
        "lib/systemd/system/smcore@.service",
        "etc/logrotate.d/smcore",
        "etc/default/smcore",
        "etc/smcore/smcore.toml",
        "usr/share/doc/smcore/README.md",
        "usr/share/doc/smcore/docs/configuration.md",
    ] {
        assert!(stage.join(file).is_file(), "{file} not installed");
    }
    // The pages render, name what they document, and groff finds nothing
    // to warn about.
    let man8 = stage.join("usr/share/man/man8");
    let sm = render(&man8.join("smcore.8.gz"));
    for want in ["NAME", "SYNOPSIS", "--engines", "--fabric", "EXIT STATUS", "SIGHUP", "smcore.toml(5)"] {
        assert!(sm.contains(want), "smcore(8) lacks {want}:\n{sm}");
    }
    let toml = render(&stage.join("usr/share/man/man5/smcore.toml.5.gz"));
    for want in ["routing_engine", "sweep_interval", "[verify]", "credit_loops", "OPENSM.CONF", "root_guid_file"] {
        assert!(toml.contains(want), "smcore.toml(5) lacks {want}:\n{toml}");
    }
    let subs: Vec<_> = std::fs::read_dir(&man8).expect("man8").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    for sub in ["smcore-route.8.gz", "smcore-ctl.8.gz", "smcore-gen.8.gz", "smcore-engines.8.gz", "smcore-doctor.8.gz"] {
        assert!(subs.iter().any(|s| s == sub), "{sub} not in {subs:?}");
    }
    assert!(!subs.iter().any(|s| s.contains("manpages")), "the hidden subcommand has no page: {subs:?}");
    for page in std::fs::read_dir(&man8).expect("man8").flatten().chain(std::fs::read_dir(stage.join("usr/share/man/man5")).expect("man5").flatten()) {
        let text = Command::new("zcat").arg(page.path()).output().expect("zcat").stdout;
        let check = tmp.path().join("page");
        std::fs::write(&check, text).expect("write page");
        let out = Command::new(require_tool("groff")).args(["-man", "-Tutf8", "-ww", "-z"]).arg(&check).output().expect("groff");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.trim().is_empty(), "{}: {err}", page.path().display());
    }
    // A second install keeps what the admin edited.
    std::fs::write(stage.join("etc/smcore/smcore.toml"), "sweep_interval = 5\n").expect("edit");
    let said = install("second install");
    assert!(said.contains("kept"), "{said}");
    assert_eq!(std::fs::read_to_string(stage.join("etc/smcore/smcore.toml")).expect("read"), "sweep_interval = 5\n");
}
