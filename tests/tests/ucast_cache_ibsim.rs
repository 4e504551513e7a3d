//! A host reboot under ibsim, with and without the unicast routing cache
//! (`--ucast-cache`): the host's link goes down and comes back while smcore
//! runs. Either way the fabric ends routed as before (read back with
//! `ibroute`, every pair reached, LIDs unchanged); with the cache the two
//! heavy sweeps of the reboot write no LFT block at all, and the SMPs they
//! send are counted against the run without it.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use smcore_tests::fabric_check::lfts_read_back;
use smcore_tests::diags::Generated;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{parse_guid2lid_file, parse_lfts_file, quality};
use smcore_tests::sm_run::RunningSm;
use smcore_tests::smcore::Smcore;

/// Per heavy sweep (number), its SMP count per phase, as the SM printed
/// them ("== heavy sweep N (...)", then "  <phase>  <sent>  ..." lines).
fn smps_per_sweep(output: &str) -> BTreeMap<u64, BTreeMap<String, u64>> {
    let mut out: BTreeMap<u64, BTreeMap<String, u64>> = BTreeMap::new();
    let mut current = None;
    let mut in_phases = false;
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("== heavy sweep ") {
            current = rest.split_whitespace().next().and_then(|n| n.parse::<u64>().ok());
            in_phases = false;
        } else if line.starts_with("SMPs per phase:") {
            in_phases = true;
        } else if in_phases && line.starts_with("  ") {
            let mut words = line.split_whitespace();
            if let (Some(n), Some(phase), Some(sent)) = (current, words.next(), words.next().and_then(|w| w.parse::<u64>().ok())) {
                out.entry(n).or_default().insert(phase.to_string(), sent);
            }
        } else {
            in_phases = false;
        }
    }
    out
}

struct Reboot {
    /// SMPs of the reboot's heavy sweeps, all phases.
    total: u64,
    /// LFT SMPs among them.
    lft: u64,
    sweeps: usize,
}

fn host_reboot(sm: &Smcore, net: &Path, host: &str, cache: bool) -> Reboot {
    let topo = sm_topology::parse_file(net).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(net).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("ucast-cache-").tempdir().expect("temp dir");
    let dumps = tmp.path().join("dumps");
    let report = tmp.path().join("report.json");
    let mut extra = vec!["--sweep-interval", "1"];
    if cache {
        extra.push("--ucast-cache");
    }
    let mut run = RunningSm::start(&sim, sm, &dumps, &report, &extra).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let first = run.wait_settled(Duration::from_secs(3), Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    let lids_before = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    for command in [format!("Unlink \"{host}\"[1]"), format!("ReLink \"{host}\"[1]")] {
        let before = run.heavy_sweeps();
        let answer = sim.send(&command).unwrap_or_else(|e| panic!("{command}: {e}"));
        assert!(!answer.contains("can't") && !answer.contains("not found"), "{command}: {answer}");
        run.wait_for(&command, Duration::from_secs(60), |r| r.heavy_sweeps() > before).unwrap_or_else(|e| panic!("{e}"));
        run.wait_settled(Duration::from_secs(3), Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    }
    // Back as before: the switches hold the dump, every pair is reached,
    // no LID moved.
    lfts_read_back(&sim, &dumps).unwrap_or_else(|e| panic!("cache {cache}: {e}"));
    let lfts = parse_lfts_file(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let lids = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    let q = quality(&topo, &lfts, &lids).unwrap_or_else(|e| panic!("{e}"));
    assert!(q.all_reachable(), "cache {cache}: {}/{} pairs", q.reachable_pairs, q.pairs);
    assert_eq!(lids.by_lid, lids_before.by_lid, "cache {cache}: LIDs changed");
    let (status, output) = run.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{output}");
    let sweeps = smps_per_sweep(&output);
    let reboot: Vec<&BTreeMap<String, u64>> = sweeps.range(first + 1..).map(|(_, v)| v).collect();
    assert!(reboot.len() >= 2, "cache {cache}: a sweep for the link going and one for it coming back:\n{output}");
    Reboot {
        total: reboot.iter().map(|s| s.get("total").copied().unwrap_or(0)).sum(),
        lft: reboot.iter().map(|s| s.get("lft").copied().unwrap_or(0)).sum(),
        sweeps: reboot.len(),
    }
}

#[test]
fn a_host_reboot_with_the_cache_writes_no_lft_block() {
    let fabric = Generated::fat_tree("ucast-cache-net-", 6, 3, 4, 3).unwrap_or_else(|e| panic!("{e}"));
    let (sm, net, topo) = (&fabric.sm, &fabric.net, &fabric.topo);
    // A host on the last leaf: not the SM's.
    let host = topo
        .nodes
        .iter()
        .rev()
        .find(|n| !n.is_switch())
        .map(|n| n.name.clone())
        .expect("a host");
    let without = host_reboot(&sm, &net, &host, false);
    let with = host_reboot(&sm, &net, &host, true);
    println!(
        "host reboot on {} switches: without the cache {} SMPs ({} LFT) in {} heavy sweeps; \
         with it {} SMPs ({} LFT) in {}; {} SMPs saved",
        topo.nodes.iter().filter(|n| n.is_switch()).count(),
        without.total,
        without.lft,
        without.sweeps,
        with.total,
        with.lft,
        with.sweeps,
        without.total.saturating_sub(with.total)
    );
    assert_eq!(with.lft, 0, "the cache patches nothing into the switches for a host");
    assert!(without.lft > 0, "without the cache the host's LID block is rewritten");
    assert!(with.total < without.total);
}
