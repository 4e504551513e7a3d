//! Two smcore SMs on one ibsim fabric: election, standby, failover.
//!
//! Each SM is attached to its own CA (umad2sim's `SIM_HOST`), with its own
//! dump directory and `guid2lid`. The first one (priority 10) becomes
//! master and brings the fabric up; the second (priority 5) must stand by
//! (its SMInfo, read with infiniband-diags' `sminfo`, says STANDBY; it
//! writes no report because it never sweeps) while the master answers its
//! polls. Then the master is killed outright (SIGKILL, as a crash) and the
//! standby must take over:
//!
//! * no LID changes: every port answers `ibnetdiscover -p` with the LID it
//!   had under the old master, and the new master's `guid2lid` says so too;
//! * the switches hold what the new master dumped (`ibroute`);
//! * traps now go to the new master: PortInfo.MasterSMLID of every switch
//!   and CA (`smpquery portinfo`) is its LID, and its `sminfo` says MASTER.
//!
//! The failover time (kill → the standby's first completed heavy sweep) is
//! printed; `bench/failover.sh` measures it over several runs.
//!
//! Two more tests start the SMs one after the other, the first alone and
//! so master: an SM of higher priority, or of equal priority and lower
//! GUID, that joins later stands by, and the master hands the subnet over
//! to it (SubnSet(SMInfo) HANDOVER after the heavy sweep its arrival
//! causes); the new master keeps every LID, programs the switches, takes
//! the traps, and the old one stands by without sweeping.
//!
//! Needs `cargo build -p sm-core -p smcore-minhop` (the smcore binary and
//! the minhop engine), ibsim-utils and infiniband-diags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use smcore_tests::fabric_check::{
    discovered_lids, lfts_read_back, lids_read_back, run_client, TOOL_TIMEOUT,
};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::parse_guid2lid_file;
use smcore_tests::proc::{collect, die_with_parent, drain, terminate};
use smcore_tests::smcore::{Profile, Smcore};

/// Poll interval and silent polls before a takeover, short for the test.
const POLL_INTERVAL: &str = "0.5";
const POLL_RETRIES: &str = "3";

/// One smcore SM on the simulator, attached to `host`.
struct Sm {
    name: &'static str,
    child: Child,
    out: Option<std::thread::JoinHandle<Vec<u8>>>,
    err: Option<std::thread::JoinHandle<Vec<u8>>>,
    report: PathBuf,
    dumps: PathBuf,
}

impl Sm {
    fn start(
        sim: &Ibsim,
        smcore: &Smcore,
        name: &'static str,
        host: &str,
        priority: u8,
        dir: &Path,
    ) -> Sm {
        let dumps = dir.join(format!("{name}-dumps"));
        let report = dir.join(format!("{name}-report.json"));
        let mut cmd = sim
            .client_command(smcore.bin())
            .unwrap_or_else(|e| panic!("{e}"));
        die_with_parent(&mut cmd);
        let mut child = cmd
            .env("SIM_HOST", host)
            .args([
                "--sweep-interval",
                "1",
                "--log",
                "info",
                "--engines",
                "minhop",
            ])
            .args(["--priority", &priority.to_string()])
            .args([
                "--sm-poll-interval",
                POLL_INTERVAL,
                "--sm-poll-retries",
                POLL_RETRIES,
            ])
            .arg("--dump-dir")
            .arg(&dumps)
            .arg("--report")
            .arg(&report)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning smcore {name}: {e}"));
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Sm {
            name,
            child,
            out,
            err,
            report,
            dumps,
        }
    }

    /// The number of the last heavy sweep reported (0 before the first).
    fn heavy_sweeps(&self) -> u64 {
        std::fs::read_to_string(&self.report)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|j| j["heavy_sweep"].as_u64())
            .unwrap_or(0)
    }

    /// Polls `done` every 50 ms; panics with the SM's output when it exits
    /// or `timeout` passes. Returns how long it took.
    fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&Sm) -> bool,
    ) -> Duration {
        let t = Instant::now();
        loop {
            if done(self) {
                return t.elapsed();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let name = self.name;
                panic!(
                    "smcore {name} exited ({status}) waiting for {what}:\n{}",
                    self.output()
                );
            }
            if t.elapsed() > timeout {
                let _ = terminate(&mut self.child, Duration::from_secs(2));
                let name = self.name;
                panic!(
                    "timed out waiting for {what} (smcore {name}):\n{}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn output(&mut self) -> String {
        format!("{}\n{}", collect(self.out.take()), collect(self.err.take()))
    }

    /// SIGKILL: the SM dies as in a crash, mid-whatever it was doing.
    fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.output()
    }

    /// SIGTERM, then its output.
    fn stop(mut self) -> String {
        let _ = terminate(&mut self.child, Duration::from_secs(5));
        self.output()
    }
}

impl Drop for Sm {
    fn drop(&mut self) {
        let _ = terminate(&mut self.child, Duration::from_secs(2));
    }
}

/// `sminfo <lid>`: (priority, state) of the SM behind `lid`, `None` when
/// it does not answer.
fn sminfo(sim: &Ibsim, lid: u16) -> Option<(u8, u8)> {
    let run = run_client(
        sim,
        "sminfo",
        &["-t", "500", &lid.to_string()],
        TOOL_TIMEOUT,
    )
    .ok()?;
    if !run.ok {
        return None;
    }
    // "sminfo: sm lid 1 sm guid 0x..., activity count 5 priority 10 state 3 SMINFO_MASTER"
    let words: Vec<&str> = run.stdout.split_whitespace().collect();
    let after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1)?.parse::<u8>().ok())
    };
    Some((after("priority")?, after("state")?))
}

/// PortInfo.MasterSMLID of `port` of the node at `lid` (`smpquery portinfo`).
fn master_sm_lid(sim: &Ibsim, lid: u16, port: u8) -> u16 {
    let run = run_client(
        sim,
        "smpquery",
        &["portinfo", &lid.to_string(), &port.to_string()],
        TOOL_TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        run.ok,
        "smpquery portinfo {lid} {port} failed ({:?}):\n{}{}",
        run.outcome, run.stdout, run.stderr
    );
    run.stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("SMLid:")
                .map(|v| v.trim_start_matches('.').trim().to_string())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no SMLid in smpquery portinfo {lid} {port}:\n{}",
                run.stdout
            )
        })
}

/// Port GUID → base LID of an SM's `guid2lid`.
fn guid2lid(dumps: &Path) -> BTreeMap<u64, u16> {
    let map = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    let mut out = BTreeMap::new();
    for (&lid, &guid) in &map.by_lid {
        out.entry(guid).or_insert(lid);
    }
    out
}

#[test]
fn the_standby_takes_over_a_killed_master_without_changing_a_lid() {
    let smcore = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new()
        .prefix("standby-")
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join("ft.net");
    smcore
        .gen(
            &[
                "fat-tree",
                "--leaves",
                "4",
                "--spines",
                "2",
                "--hosts-per-leaf",
                "3",
                "--uplinks",
                "2",
            ],
            &net,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<usize> = topo
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    // On different leaves, so the standby's polls cross the fabric.
    let (a_host, b_host) = (hosts[0], hosts[hosts.len() - 1]);
    let a_guid = topo.nodes[a_host].port_guid(1);
    let b_guid = topo.nodes[b_host].port_guid(1);
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    // The master: alone, it is elected and brings the fabric up.
    let mut a = Sm::start(&sim, &smcore, "a", &topo.nodes[a_host].name, 10, tmp.path());
    a.wait_for(
        "the first master's first heavy sweep",
        Duration::from_secs(60),
        |s| s.heavy_sweeps() >= 1,
    );
    let lids_a = guid2lid(&a.dumps);
    let a_lid = lids_a[&a_guid];
    let b_lid = lids_a[&b_guid];

    // The second SM must find the master and stand by.
    let mut b = Sm::start(&sim, &smcore, "b", &topo.nodes[b_host].name, 5, tmp.path());
    b.wait_for("the second SM to stand by", Duration::from_secs(30), |_| {
        sminfo(&sim, b_lid) == Some((5, 2))
    });
    assert_eq!(
        sminfo(&sim, a_lid),
        Some((10, 3)),
        "the first SM is master, priority 10"
    );
    // A standby does not sweep: several polls later it still has not.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        b.heavy_sweeps(),
        0,
        "the standby swept while the master was alive"
    );
    assert!(!b.report.exists(), "the standby wrote a report");
    assert_eq!(
        sminfo(&sim, b_lid),
        Some((5, 2)),
        "still standby after several polls"
    );
    let before = discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        before.len(),
        topo.nodes.len(),
        "every node has a LID: {before:?}"
    );

    // Crash the master.
    let a_log = a.kill();
    let killed = Instant::now();
    b.wait_for(
        "the standby's first heavy sweep as master",
        Duration::from_secs(60),
        |s| s.heavy_sweeps() >= 1,
    );
    let failover = killed.elapsed();
    println!(
        "failover: {:.2} s from SIGKILL to the new master's first heavy sweep",
        failover.as_secs_f64()
    );

    // Nobody was re-addressed.
    let after = discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after, before, "LIDs changed in the failover");
    assert_eq!(
        guid2lid(&b.dumps),
        lids_a,
        "the new master's guid2lid differs from the old one's"
    );
    lids_read_back(&sim, &b.dumps).unwrap_or_else(|e| panic!("{e}"));
    // The switches hold what the new master dumped.
    let switches = lfts_read_back(&sim, &b.dumps).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        switches,
        topo.nodes.iter().filter(|n| n.is_switch()).count()
    );
    // Traps go to the new master.
    for (i, n) in topo.nodes.iter().enumerate() {
        let port = if n.is_switch() { 0 } else { 1 };
        let lid = after[&n.port_guid(port)];
        assert_eq!(
            master_sm_lid(&sim, lid, port),
            b_lid,
            "MasterSMLID of {} (node {i}, LID {lid})",
            n.name
        );
    }
    assert_eq!(
        sminfo(&sim, b_lid),
        Some((5, 3)),
        "the new master says MASTER"
    );

    let b_log = b.stop();
    assert!(
        b_log.contains("taking over as master"),
        "the standby's log does not say it took over:\n{b_log}\n--- old master:\n{a_log}"
    );
}

#[test]
fn a_higher_sm_started_later_is_handed_the_subnet() {
    let smcore = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new()
        .prefix("handover-")
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join("ft.net");
    smcore
        .gen(
            &[
                "fat-tree",
                "--leaves",
                "3",
                "--spines",
                "2",
                "--hosts-per-leaf",
                "2",
                "--uplinks",
                "2",
            ],
            &net,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<usize> = topo
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    let (a_host, b_host) = (hosts[0], hosts[hosts.len() - 1]);
    let (a_guid, b_guid) = (
        topo.nodes[a_host].port_guid(1),
        topo.nodes[b_host].port_guid(1),
    );
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    // A low-priority master brings the fabric up.
    let mut a = Sm::start(&sim, &smcore, "a", &topo.nodes[a_host].name, 3, tmp.path());
    a.wait_for(
        "the first master's first heavy sweep",
        Duration::from_secs(60),
        |s| s.heavy_sweeps() >= 1,
    );
    let lids_a = guid2lid(&a.dumps);
    let (a_lid, b_lid) = (lids_a[&a_guid], lids_a[&b_guid]);
    let before = discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}"));

    // A higher one joins: it finds a master (which stays master for now),
    // asks it for the subnet (trap 144), and the master hands over at its
    // next heavy sweep.
    let mut b = Sm::start(&sim, &smcore, "b", &topo.nodes[b_host].name, 12, tmp.path());
    let took = b.wait_for(
        "the handover to the higher SM",
        Duration::from_secs(60),
        |s| s.heavy_sweeps() >= 1,
    );
    println!(
        "handover: {:.2} s from the higher SM's start to its first heavy sweep",
        took.as_secs_f64()
    );
    assert_eq!(
        sminfo(&sim, b_lid),
        Some((12, 3)),
        "the higher SM is master"
    );
    a.wait_for(
        "the old master to stand by",
        Duration::from_secs(30),
        |_| sminfo(&sim, a_lid) == Some((3, 2)),
    );

    // Same LIDs, the new master's tables in the switches, traps to it.
    assert_eq!(
        discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}")),
        before,
        "LIDs changed in the handover"
    );
    assert_eq!(guid2lid(&b.dumps), lids_a);
    lfts_read_back(&sim, &b.dumps).unwrap_or_else(|e| panic!("{e}"));
    for n in &topo.nodes {
        let port = if n.is_switch() { 0 } else { 1 };
        let lid = before[&n.port_guid(port)];
        assert_eq!(
            master_sm_lid(&sim, lid, port),
            b_lid,
            "MasterSMLID of {} (LID {lid})",
            n.name
        );
    }
    // The old master, now standby, sweeps no more.
    let a_sweeps = a.heavy_sweeps();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        a.heavy_sweeps(),
        a_sweeps,
        "the old master kept sweeping after the handover"
    );
    assert_eq!(sminfo(&sim, a_lid), Some((3, 2)));

    let b_log = b.stop();
    let a_log = a.stop();
    if std::env::var_os("STANDBY_TEST_LOGS").is_some() {
        println!("--- higher SM:\n{b_log}\n--- old master:\n{a_log}");
    }
    assert!(
        b_log.contains("taking over as master") && b_log.contains("handover"),
        "the higher SM's log does not say it was handed over the subnet:\n{b_log}\n--- old master:\n{a_log}"
    );
}

#[test]
fn at_equal_priority_the_lower_guid_ends_up_master() {
    let smcore = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new()
        .prefix("election-")
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join("ft.net");
    smcore
        .gen(
            &[
                "fat-tree",
                "--leaves",
                "2",
                "--spines",
                "2",
                "--hosts-per-leaf",
                "2",
                "--uplinks",
                "2",
            ],
            &net,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let hosts: Vec<usize> = topo
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    let (low, high) = (hosts[0], hosts[hosts.len() - 1]);
    let (low_guid, high_guid) = (topo.nodes[low].port_guid(1), topo.nodes[high].port_guid(1));
    assert!(low_guid < high_guid);
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    // The higher GUID first: alone, it becomes master. The lower GUID,
    // started next, finds a master and stands by; the master then sees an
    // SM that outranks it on the GUID and hands over.
    let mut h = Sm::start(&sim, &smcore, "h", &topo.nodes[high].name, 7, tmp.path());
    h.wait_for(
        "the higher GUID's first heavy sweep",
        Duration::from_secs(60),
        |s| s.heavy_sweeps() >= 1,
    );
    let before = discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}"));
    let mut l = Sm::start(&sim, &smcore, "l", &topo.nodes[low].name, 7, tmp.path());
    l.wait_for(
        "the lower GUID's first heavy sweep",
        Duration::from_secs(60),
        |s| s.heavy_sweeps() >= 1,
    );
    let lids = guid2lid(&l.dumps);
    let (l_lid, h_lid) = (lids[&low_guid], lids[&high_guid]);
    h.wait_for(
        "the higher GUID to stand by",
        Duration::from_secs(30),
        |_| sminfo(&sim, h_lid) == Some((7, 2)),
    );
    assert_eq!(
        sminfo(&sim, l_lid),
        Some((7, 3)),
        "the lower GUID is master"
    );
    // Settled: the standby does not sweep any more, the master's
    // tables are in the switches and traps go to it.
    let h_sweeps = h.heavy_sweeps();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(h.heavy_sweeps(), h_sweeps, "the standby keeps sweeping");
    assert_eq!(sminfo(&sim, h_lid), Some((7, 2)));
    lfts_read_back(&sim, &l.dumps).unwrap_or_else(|e| panic!("{e}"));
    lids_read_back(&sim, &l.dumps).unwrap_or_else(|e| panic!("{e}"));
    for n in &topo.nodes {
        let port = if n.is_switch() { 0 } else { 1 };
        let lid = lids[&n.port_guid(port)];
        assert_eq!(
            master_sm_lid(&sim, lid, port),
            l_lid,
            "MasterSMLID of {} (LID {lid})",
            n.name
        );
    }
    assert_eq!(
        discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}")),
        before,
        "LIDs changed in the handover"
    );
    let (h_log, l_log) = (h.stop(), l.stop());
    if std::env::var_os("STANDBY_TEST_LOGS").is_some() {
        println!("--- higher GUID:\n{h_log}\n--- lower GUID:\n{l_log}");
    }
    assert!(
        l_log.contains("handover"),
        "the lower GUID was not handed the subnet:\n{l_log}\n---\n{h_log}"
    );
}
