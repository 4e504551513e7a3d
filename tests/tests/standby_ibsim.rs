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
//! The last test gives two SMs different SM_Keys (`sm_key` in a config
//! file): the later one, of higher priority, is not handed the subnet
//! and does not take it (it finds a master holding the subnet and stands
//! aside, sweeping nothing); the first stays MASTER and every port's
//! MasterSMLID still names it.
//!
//! Needs `cargo build -p sm-core -p smcore-minhop` (the smcore binary and
//! the minhop engine), ibsim-utils and infiniband-diags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sm_topology::Topology;
use smcore_tests::diags::Generated;
use smcore_tests::fabric_check::{
    discovered_lids, lfts_read_back, lids_read_back, run_client, TOOL_TIMEOUT,
};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::parse_guid2lid_file;
use smcore_tests::sm_run::RunningSm;

/// Poll interval and silent polls before a takeover, short for the test.
const POLL_INTERVAL: &str = "0.5";
const POLL_RETRIES: &str = "3";

/// One smcore SM on the simulator, attached to a host of its own; named
/// in every failure.
struct Sm {
    name: &'static str,
    run: RunningSm,
    report: PathBuf,
    dumps: PathBuf,
}

impl Sm {
    fn start(sim: &Ibsim, fabric: &Generated, name: &'static str, host: usize, priority: u8) -> Sm {
        Sm::start_with(sim, fabric, name, host, priority, &[])
    }

    /// [`Sm::start`] with an SM_Key of its own (a config file holding
    /// `sm_key`).
    fn start_keyed(
        sim: &Ibsim,
        fabric: &Generated,
        name: &'static str,
        host: usize,
        priority: u8,
        sm_key: u64,
    ) -> Sm {
        let config = fabric.dir().join(format!("{name}.toml"));
        std::fs::write(&config, format!("sm_key = {sm_key}\n"))
            .unwrap_or_else(|e| panic!("writing {}: {e}", config.display()));
        let config = config.display().to_string();
        Sm::start_with(sim, fabric, name, host, priority, &["--config", &config])
    }

    fn start_with(
        sim: &Ibsim,
        fabric: &Generated,
        name: &'static str,
        host: usize,
        priority: u8,
        extra: &[&str],
    ) -> Sm {
        let dumps = fabric.dir().join(format!("{name}-dumps"));
        let report = fabric.dir().join(format!("{name}-report.json"));
        let priority = priority.to_string();
        let mut args = vec![
            "--sweep-interval",
            "1",
            "--log",
            "info",
            "--engines",
            "minhop",
            "--priority",
            &priority,
            "--sm-poll-interval",
            POLL_INTERVAL,
            "--sm-poll-retries",
            POLL_RETRIES,
        ];
        args.extend_from_slice(extra);
        let host = &fabric.topo.nodes[host].name;
        let run = RunningSm::start_on(sim, Some(host), &fabric.sm, &dumps, &report, &args)
            .unwrap_or_else(|e| panic!("spawning smcore {name}: {e}"));
        Sm {
            name,
            run,
            report,
            dumps,
        }
    }

    /// The number of the last heavy sweep reported (0 before the first).
    fn heavy_sweeps(&self) -> u64 {
        self.run.heavy_sweeps()
    }

    /// Polls `done`; panics with the SM's output when it exits or
    /// `timeout` passes. Returns how long it took.
    fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl FnMut(&RunningSm) -> bool,
    ) -> Duration {
        let name = self.name;
        self.run
            .wait_for(what, timeout, done)
            .unwrap_or_else(|e| panic!("smcore {name}: {e}"))
    }

    /// Waits (up to 60 s) for the first heavy sweep: the SM is master.
    fn wait_first_heavy_sweep(&mut self, what: &str) -> Duration {
        self.wait_for(what, Duration::from_secs(60), |s| s.heavy_sweeps() >= 1)
    }

    /// Several polls later, the SM has swept no more (a standby's rule).
    fn assert_sweeps_no_more(&self, why: &str) {
        let sweeps = self.heavy_sweeps();
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(self.heavy_sweeps(), sweeps, "smcore {}: {why}", self.name);
    }

    /// SIGKILL: the SM dies as in a crash, mid-whatever it was doing.
    fn kill(self) -> String {
        self.run.kill()
    }

    /// SIGTERM, then its output.
    fn stop(self) -> String {
        let name = self.name;
        match self.run.stop(Duration::from_secs(5)) {
            Ok((_, output)) => output,
            Err(e) => panic!("stopping smcore {name}: {e}"),
        }
    }
}

/// A fat tree (2 spines, 2 uplinks) under ibsim, and its first and last
/// hosts: on different leaves, so that one SM's polls of the other cross
/// the fabric.
fn fat_tree_on_ibsim(
    prefix: &str,
    leaves: u32,
    hosts_per_leaf: u32,
) -> (Generated, Ibsim, usize, usize) {
    let fabric =
        Generated::fat_tree(prefix, leaves, 2, hosts_per_leaf, 2).unwrap_or_else(|e| panic!("{e}"));
    let hosts = fabric.hosts();
    let (first, last) = (hosts[0], hosts[hosts.len() - 1]);
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    (fabric, sim, first, last)
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

/// Traps go to `master`: PortInfo.MasterSMLID of every switch (port 0)
/// and CA (port 1), found at its LID in `lids` (by port GUID), is its LID.
fn assert_traps_go_to(sim: &Ibsim, topo: &Topology, lids: &BTreeMap<u64, u16>, master: u16) {
    for (i, n) in topo.nodes.iter().enumerate() {
        let port = if n.is_switch() { 0 } else { 1 };
        let lid = lids[&n.port_guid(port)];
        assert_eq!(
            master_sm_lid(sim, lid, port),
            master,
            "MasterSMLID of {} (node {i}, LID {lid})",
            n.name
        );
    }
}

#[test]
fn the_standby_takes_over_a_killed_master_without_changing_a_lid() {
    let (fabric, sim, a_host, b_host) = fat_tree_on_ibsim("standby-", 4, 3);
    let topo = &fabric.topo;
    let a_guid = topo.nodes[a_host].port_guid(1);
    let b_guid = topo.nodes[b_host].port_guid(1);

    // The master: alone, it is elected and brings the fabric up.
    let mut a = Sm::start(&sim, &fabric, "a", a_host, 10);
    a.wait_first_heavy_sweep("the first master's first heavy sweep");
    let lids_a = guid2lid(&a.dumps);
    let a_lid = lids_a[&a_guid];
    let b_lid = lids_a[&b_guid];

    // The second SM must find the master and stand by.
    let mut b = Sm::start(&sim, &fabric, "b", b_host, 5);
    b.wait_for("the second SM to stand by", Duration::from_secs(30), |_| {
        sminfo(&sim, b_lid) == Some((5, 2))
    });
    assert_eq!(
        sminfo(&sim, a_lid),
        Some((10, 3)),
        "the first SM is master, priority 10"
    );
    // A standby does not sweep: several polls later it still has not.
    b.assert_sweeps_no_more("the standby swept while the master was alive");
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
    b.wait_first_heavy_sweep("the standby's first heavy sweep as master");
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
    assert_traps_go_to(&sim, topo, &after, b_lid);
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
    // The first master's first heavy sweep, right after its election,
    // routed the fabric the election had just read instead of reading it
    // a second time.
    assert!(
        a_log.contains("sweeping the fabric the arbitration read"),
        "the first master discovered the fabric again after its election:\n{a_log}"
    );
}

#[test]
fn a_higher_sm_started_later_is_handed_the_subnet() {
    let (fabric, sim, a_host, b_host) = fat_tree_on_ibsim("handover-", 3, 2);
    let topo = &fabric.topo;
    let (a_guid, b_guid) = (
        topo.nodes[a_host].port_guid(1),
        topo.nodes[b_host].port_guid(1),
    );

    // A low-priority master brings the fabric up.
    let mut a = Sm::start(&sim, &fabric, "a", a_host, 3);
    a.wait_first_heavy_sweep("the first master's first heavy sweep");
    let lids_a = guid2lid(&a.dumps);
    let (a_lid, b_lid) = (lids_a[&a_guid], lids_a[&b_guid]);
    let before = discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}"));

    // A higher one joins: it finds a master (which stays master for now),
    // asks it for the subnet (trap 144), and the master hands over at its
    // next heavy sweep.
    let mut b = Sm::start(&sim, &fabric, "b", b_host, 12);
    let took = b.wait_first_heavy_sweep("the handover to the higher SM");
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
    assert_traps_go_to(&sim, topo, &before, b_lid);
    // The old master, now standby, sweeps no more.
    a.assert_sweeps_no_more("the old master kept sweeping after the handover");
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
    let (fabric, sim, low, high) = fat_tree_on_ibsim("election-", 2, 2);
    let topo = &fabric.topo;
    let (low_guid, high_guid) = (topo.nodes[low].port_guid(1), topo.nodes[high].port_guid(1));
    assert!(low_guid < high_guid);

    // The higher GUID first: alone, it becomes master. The lower GUID,
    // started next, finds a master and stands by; the master then sees an
    // SM that outranks it on the GUID and hands over.
    let mut h = Sm::start(&sim, &fabric, "h", high, 7);
    h.wait_first_heavy_sweep("the higher GUID's first heavy sweep");
    let before = discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}"));
    let mut l = Sm::start(&sim, &fabric, "l", low, 7);
    l.wait_first_heavy_sweep("the lower GUID's first heavy sweep");
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
    h.assert_sweeps_no_more("the standby keeps sweeping");
    assert_eq!(sminfo(&sim, h_lid), Some((7, 2)));
    lfts_read_back(&sim, &l.dumps).unwrap_or_else(|e| panic!("{e}"));
    lids_read_back(&sim, &l.dumps).unwrap_or_else(|e| panic!("{e}"));
    assert_traps_go_to(&sim, topo, &lids, l_lid);
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

#[test]
fn a_higher_sm_with_another_sm_key_does_not_take_over() {
    let (fabric, sim, a_host, r_host) = fat_tree_on_ibsim("smkey-", 3, 2);
    let topo = &fabric.topo;
    let (a_guid, r_guid) = (
        topo.nodes[a_host].port_guid(1),
        topo.nodes[r_host].port_guid(1),
    );

    // The subnet's master, with its key, brings the fabric up.
    let mut a = Sm::start_keyed(&sim, &fabric, "a", a_host, 3, 0x5a5a);
    a.wait_first_heavy_sweep("the master's first heavy sweep");
    let lids = guid2lid(&a.dumps);
    let (a_lid, r_lid) = (lids[&a_guid], lids[&r_guid]);
    let before = discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}"));
    assert_traps_go_to(&sim, topo, &before, a_lid);

    // An SM of another key and a higher priority joins. It must neither be
    // handed the subnet (the master does not hand over to it) nor take it
    // (it finds a master holding the subnet and waits, sweeping nothing).
    let mut r = Sm::start_keyed(&sim, &fabric, "r", r_host, 12, 0x7777);
    r.wait_for(
        "the SM of another key to stand aside",
        Duration::from_secs(30),
        |_| sminfo(&sim, r_lid).is_some_and(|(_, state)| state == 2),
    );
    // Several of the master's sweeps (1 s apart; each checks the other
    // SMs and would hand over to a higher one) and the other SM's polls.
    r.assert_sweeps_no_more("the SM of another key swept");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(r.heavy_sweeps(), 0, "the SM of another key swept");
    assert!(!r.report.exists(), "the SM of another key wrote a report");
    assert_eq!(
        sminfo(&sim, a_lid),
        Some((3, 3)),
        "the master is still MASTER"
    );
    assert_eq!(
        sminfo(&sim, r_lid),
        Some((12, 2)),
        "the SM of another key is not master"
    );
    assert_traps_go_to(&sim, topo, &before, a_lid);
    assert_eq!(
        discovered_lids(&sim).unwrap_or_else(|e| panic!("{e}")),
        before,
        "LIDs changed"
    );
    let heavy = a.heavy_sweeps();
    let r_log = r.stop();
    let a_log = a.stop();
    if std::env::var_os("STANDBY_TEST_LOGS").is_some() {
        println!("--- master:\n{a_log}\n--- other key:\n{r_log}");
    }
    assert!(heavy >= 1);
    assert!(
        !a_log.contains("handed over") && !r_log.contains("taking over as master"),
        "a handover happened:\n{a_log}\n--- other key:\n{r_log}"
    );
    assert!(
        a_log.contains("does not hold our SM_Key"),
        "the master did not report the SM of another key:\n{a_log}"
    );
    assert!(
        r_log.contains("another SM_Key holds this subnet"),
        "the SM of another key does not say why it stands aside:\n{r_log}"
    );
}
