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
    // A killed SM keeps its slot until it is disconnected.
    sim.disconnect_stale().unwrap_or_else(|e| panic!("{e}"));
    // The last run's report would pass for this one's first sweep.
    let _ = std::fs::remove_file(fabric.dir().join("report.json"));
    let conf = conf.display().to_string();
    let mut sm = RunningSm::start_on(
        sim,
        Some(host),
        &fabric.sm,
        &fabric.dir().join("dumps"),
        &fabric.dir().join("report.json"),
        &["--sweep-interval", "1", "--log", "info", "--config", &conf],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    sm.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    sm
}

#[test]
fn a_restarted_sm_answers_the_groups_services_and_subscriptions_it_had() {
    let fabric = Generated::fat_tree("sa-db-ibsim-", 2, 2, 3, 2).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<String> = fabric.hosts().iter().map(|&h| fabric.topo.nodes[h].name.clone()).collect();
    let (sm_host, a, b, asker) = (&hosts[0], &hosts[1], &hosts[hosts.len() - 1], &hosts[2]);
    let db = fabric.dir().join("sa.db");
    let conf = fabric.dir().join("opensm.conf");
    std::fs::write(&conf, format!("sa_db_dump TRUE\nsa_db_file {}\nfsync_high_avail_files TRUE\n", db.display()))
        .unwrap_or_else(|e| panic!("{e}"));

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
    let mut saved = String::new();
    for _ in 0..50 {
        saved = std::fs::read_to_string(&db).unwrap_or_default();
        if saved.contains("InformInfo Record:") && saved.contains("name='forever'") && saved.matches("mcm_port:").count() >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(saved.contains("InformInfo Record:") && saved.contains("name='forever'"), "the file:\n{saved}");
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
