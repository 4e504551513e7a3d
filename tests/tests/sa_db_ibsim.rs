//! The SA's registrations survive a restart of smcore under ibsim
//! (`sa_db_dump TRUE`, `sa_db_file`, as an opensm.conf gives them): hosts
//! join multicast groups, register a service and subscribe to a trap
//! through the workspace's `sa_client`; the SM is killed (SIGKILL, as a
//! crash) and started again on the same file, and `saquery -g`, `-S` and
//! `-I` run from a host answer what they answered before, without any host
//! registering again. Then the file is damaged: the SM names the file and
//! line, starts with an empty SA and keeps running.
//!
//! Needs `cargo build -p sm-core -p smcore-tests` (smcore, sa_client),
//! ibsim-utils and infiniband-diags.

use std::path::Path;
use std::time::Duration;

use smcore_tests::diags::Generated;
use smcore_tests::fabric_check::client_output;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::sm_run::RunningSm;

const MGID_A: &str = "ff12:601b:ffff::1:ff00:a1";
const MGID_B: &str = "ff12:601b:ffff::1:ff00:b2";

fn sa_client(sim: &Ibsim, host: &str, args: &[&str]) -> String {
    client_output(sim, Some(host), env!("CARGO_BIN_EXE_sa_client"), args)
}

/// `saquery ARG` from `host`, without the lines that change by the second
/// (a service's lease left).
fn saquery(sim: &Ibsim, host: &str, arg: &str) -> String {
    client_output(sim, Some(host), "saquery", &[arg])
        .lines()
        .filter(|l| !l.contains("ServiceLease"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn start(sim: &Ibsim, fabric: &Generated, host: &str, conf: &Path) -> RunningSm {
    let mut sm = spawn(sim, fabric, "sm", host, conf, &[]);
    sm.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    sm
}

/// smcore `name` on `host` with the opensm.conf `conf`, its own dump
/// directory and report.
fn spawn(sim: &Ibsim, fabric: &Generated, name: &str, host: &str, conf: &Path, extra: &[&str]) -> RunningSm {
    // A killed SM keeps its slot until it is disconnected.
    sim.disconnect_stale().unwrap_or_else(|e| panic!("{e}"));
    // The last run's report would pass for this one's first sweep.
    let report = fabric.dir().join(format!("{name}-report.json"));
    let _ = std::fs::remove_file(&report);
    let conf = conf.display().to_string();
    let mut args = vec!["--sweep-interval", "1", "--log", "info", "--config", &conf];
    args.extend_from_slice(extra);
    RunningSm::start_on(sim, Some(host), &fabric.sm, &fabric.dir().join(format!("{name}-dumps")), &report, &args)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The opensm.conf of these tests: registrations saved to, and read back
/// from, `sa.db` in the fabric's directory.
fn sa_db_conf(fabric: &Generated) -> (std::path::PathBuf, std::path::PathBuf) {
    let db = fabric.dir().join("sa.db");
    let conf = fabric.dir().join("opensm.conf");
    std::fs::write(&conf, format!("sa_db_dump TRUE\nsa_db_file {}\nfsync_high_avail_files TRUE\n", db.display()))
        .unwrap_or_else(|e| panic!("{e}"));
    (db, conf)
}

/// Waits (up to 5 s) for `db` to hold what `done` looks for; its text.
fn saved(db: &Path, done: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    for _ in 0..50 {
        text = std::fs::read_to_string(db).unwrap_or_default();
        if done(&text) {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} never held what was registered:\n{text}", db.display());
}

#[test]
fn a_restarted_sm_answers_the_groups_services_and_subscriptions_it_had() {
    let fabric = Generated::fat_tree("sa-db-ibsim-", 2, 2, 3, 2).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<String> = fabric.hosts().iter().map(|&h| fabric.topo.nodes[h].name.clone()).collect();
    let (sm_host, a, b, asker) = (&hosts[0], &hosts[1], &hosts[hosts.len() - 1], &hosts[2]);
    let (db, conf) = sa_db_conf(&fabric);

    let sm = start(&sim, &fabric, sm_host, &conf);
    sa_client(&sim, a, &["join", "--mgid", MGID_A]);
    sa_client(&sim, b, &["join", "--mgid", MGID_A]);
    sa_client(&sim, b, &["join", "--mgid", MGID_B, "--join-state", "1"]);
    sa_client(&sim, a, &["service", "set", "--id", "0x1234", "--name", "kept-service", "--lease", "3600"]);
    sa_client(&sim, b, &["service", "set", "--id", "0x99", "--name", "forever", "--data", "0x77"]);
    sa_client(&sim, b, &["inform", "--trap", "64", "--seconds", "0"]);
    let groups = saquery(&sim, asker, "-g");
    let services = saquery(&sim, asker, "-S");
    let informs = saquery(&sim, asker, "-I");
    // umad2sim hands a client the first 256 bytes of an answer: one
    // ServiceRecord (the first by ServiceID). The second is asked for by
    // its RID, its lease left aside.
    let kept = || {
        let text = sa_client(&sim, a, &["service", "get", "--id", "0x1234", "--name", "kept-service"]);
        text.split_whitespace().filter(|w| !w.starts_with("lease=")).collect::<Vec<_>>().join(" ")
    };
    let kept_before = kept();
    assert!(kept_before.contains("status=0x0000 id=0x1234 name=kept-service"), "{kept_before}");
    for (what, text, want) in [
        ("groups", &groups, "ff12:601b:ffff::1:ff00:a1"),
        ("groups", &groups, "ff12:601b:ffff::1:ff00:b2"),
        ("services", &services, "forever"),
        ("subscriptions", &informs, "InformInfoRecord"),
    ] {
        assert!(text.contains(want), "saquery lists the {what} ({want}):\n{text}");
    }
    // Saved within a second of the last change.
    let saved = saved(&db, |t| t.contains("InformInfo Record:") && t.contains("name='forever'") && t.matches("mcm_port:").count() >= 3);
    sm.kill();

    let sm = start(&sim, &fabric, sm_host, &conf);
    assert_eq!(saquery(&sim, asker, "-g"), groups, "saquery -g after the restart");
    assert_eq!(saquery(&sim, asker, "-S"), services, "saquery -S after the restart");
    assert_eq!(saquery(&sim, asker, "-I"), informs, "saquery -I after the restart");
    assert_eq!(kept(), kept_before, "the leased service after the restart");
    // A member restored is a member: its leave is accepted.
    let left = sa_client(&sim, b, &["leave", "--mgid", MGID_B, "--join-state", "1"]);
    assert!(left.contains("status=0x0000") || left.contains("status=0"), "{left}");
    sm.kill();

    // A damaged file: named with its line, the SA starts empty, the SM runs.
    std::fs::write(&db, format!("{saved}MC Group 0xc0zz : mgid=0xff12\n")).unwrap_or_else(|e| panic!("{e}"));
    let line = saved.lines().count() + 1;
    let sm = start(&sim, &fabric, sm_host, &conf);
    let after = saquery(&sim, asker, "-S");
    assert!(!after.contains("forever"), "nothing restored from a damaged file:\n{after}");
    let output = sm.kill();
    let named = format!("{}:{line}:", db.display());
    assert!(output.contains(&named), "the SM names {named}:\n{output}");
}

/// The acceptance test of the handover: a master and a standby smcore on
/// one fabric, keeping one SA database file (as two OpenSMs of a site do
/// on shared storage); hosts join groups and register services with the
/// master; the master is killed (SIGKILL); the standby takes over, reads
/// the file at its first sweep as master, and `saquery -g` and `-S` from
/// a host list the same groups and services as before the kill.
#[test]
fn the_standby_that_takes_over_answers_the_groups_and_services_of_the_master() {
    let fabric = Generated::fat_tree("sa-db-standby-", 2, 2, 3, 2).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<String> = fabric.hosts().iter().map(|&h| fabric.topo.nodes[h].name.clone()).collect();
    let (master_host, standby_host) = (&hosts[0], &hosts[hosts.len() - 1]);
    let (a, b, asker) = (&hosts[1], &hosts[hosts.len() - 2], &hosts[2]);
    let (db, conf) = sa_db_conf(&fabric);
    let polls = ["--sm-poll-interval", "0.5", "--sm-poll-retries", "3"];
    let mut master = spawn(&sim, &fabric, "master", master_host, &conf, &[&["--priority", "10"][..], &polls].concat());
    master
        .wait_for("the master's first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut standby = spawn(&sim, &fabric, "standby", standby_host, &conf, &[&["--priority", "5"][..], &polls].concat());
    // The standby answers SMInfo as such; it never sweeps while the master
    // lives.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(standby.heavy_sweeps(), 0, "the standby swept while the master lived");

    sa_client(&sim, a, &["join", "--mgid", MGID_A]);
    sa_client(&sim, b, &["join", "--mgid", MGID_A]);
    sa_client(&sim, b, &["join", "--mgid", MGID_B]);
    sa_client(&sim, a, &["service", "set", "--id", "0x42", "--name", "handed-over", "--lease", "3600"]);
    let groups = saquery(&sim, asker, "-g");
    let services = saquery(&sim, asker, "-S");
    for want in ["ff12:601b:ffff::1:ff00:a1", "ff12:601b:ffff::1:ff00:b2"] {
        assert!(groups.contains(want), "saquery -g lists {want}:\n{groups}");
    }
    assert!(services.contains("handed-over"), "saquery -S:\n{services}");
    saved(&db, |t| t.contains("name='handed-over'") && t.matches("mcm_port:").count() >= 3);

    let killed_at = std::time::Instant::now();
    master.kill();
    standby
        .wait_for("the standby's first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    println!("the standby took over {:.2} s after the kill", killed_at.elapsed().as_secs_f64());
    assert_eq!(saquery(&sim, asker, "-g"), groups, "saquery -g from the new master");
    assert_eq!(saquery(&sim, asker, "-S"), services, "saquery -S from the new master");
    let output = standby.kill();
    assert!(output.contains("SA database restored:") && output.contains(" 1 services"), "{output}");
}

/// A file OpenSM wrote is read back: OpenSM 3.3.23 runs on the fabric with
/// `sa_db_dump TRUE`, hosts join two groups and register a service with
/// it, it stops (SIGTERM: it saves `opensm-sa.dump` on its way out), and
/// smcore started on the same fabric with `sa_db_file` naming that file
/// answers `saquery -g` with both groups, `-S` with the service, and
/// takes a restored member's leave.
#[test]
fn a_file_opensm_wrote_is_read_back() {
    let fabric = Generated::fat_tree("sa-db-opensm-", 2, 2, 3, 2).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<String> = fabric.hosts().iter().map(|&h| fabric.topo.nodes[h].name.clone()).collect();
    let (sm_host, a, b, asker) = (&hosts[0], &hosts[1], &hosts[hosts.len() - 1], &hosts[2]);
    let osm_dir = fabric.dir().join("opensm");
    std::fs::create_dir_all(&osm_dir).unwrap_or_else(|e| panic!("{e}"));
    let osm_conf = fabric.dir().join("opensm-sa-dump.conf");
    std::fs::write(&osm_conf, "sa_db_dump TRUE\n").unwrap_or_else(|e| panic!("{e}"));
    let mut opts = smcore_tests::opensm::OpenSmOptions::new("minhop");
    opts.extra_args = vec!["-F".into(), osm_conf.display().to_string()];
    opts.dir = Some(osm_dir.clone());
    let osm = smcore_tests::opensm::OpenSmDaemon::start(&sim, Some(sm_host), &opts).unwrap_or_else(|e| panic!("{e}"));
    sa_client(&sim, a, &["join", "--mgid", MGID_A]);
    sa_client(&sim, b, &["join", "--mgid", MGID_A]);
    sa_client(&sim, b, &["join", "--mgid", MGID_B]);
    sa_client(&sim, a, &["service", "set", "--id", "0x77", "--name", "from-opensm"]);
    let sm_pid = sim
        .attached()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|c| c.is_sm)
        .map(|c| c.pid)
        .expect("OpenSM attached as an SM");
    let term = std::process::Command::new("kill").args(["-TERM", &sm_pid.to_string()]).status();
    assert!(term.is_ok_and(|s| s.success()), "SIGTERM to OpenSM");
    let file = osm_dir.join("opensm-sa.dump");
    let text = saved(&file, |t| t.contains("from-opensm") && t.matches("mcm_port:").count() >= 3);
    println!("OpenSM's file:\n{text}");
    drop(osm);

    let conf = fabric.dir().join("smcore-from-opensm.conf");
    std::fs::write(&conf, format!("sa_db_file {}\n", file.display())).unwrap_or_else(|e| panic!("{e}"));
    let sm = start(&sim, &fabric, sm_host, &conf);
    let groups = saquery(&sim, asker, "-g");
    for want in ["ff12:601b:ffff::1:ff00:a1", "ff12:601b:ffff::1:ff00:b2"] {
        assert!(groups.contains(want), "smcore lists {want} from OpenSM's file:\n{groups}\nthe file:\n{text}");
    }
    let services = saquery(&sim, asker, "-S");
    assert!(services.contains("from-opensm"), "{services}");
    let left = sa_client(&sim, b, &["leave", "--mgid", MGID_B]);
    assert!(left.contains("status=0x0000"), "{left}");
    let output = sm.kill();
    assert!(output.contains("SA database restored:") && output.contains(" 1 services"), "{output}");
}
