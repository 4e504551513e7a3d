//! MAD loss must lose no host: smcore runs as an SM on a 4x4x3 torus
//! (two hosts per switch) under ibsim while three switches drop 30 % of
//! the packets they receive (ibsim's `Error "node" 30`) for 20 s. Then the
//! loss stops, the SM gets a couple of sweeps, and what the fabric really
//! holds is read back with infiniband-diags: every host has a LID
//! (`ibnetdiscover -p`), every CA pair is reachable through the LFTs the
//! switches hold (`ibroute` of every switch, walked), and every cabled port
//! is Active (`iblinkinfo -l` for switch ports, `smpquery portinfo` for
//! host ports).
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use smcore_tests::diags::{fields, Generated};
use smcore_tests::fabric_check::{discovered_lids, run_client, TOOL_TIMEOUT};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{parse_lfts_str, quality, LidMap, Lfts};
use smcore_tests::sm_run::RunningSm;

/// Switches that lose packets: away from the SM's host (on `sw-0-0-0`),
/// where most directed routes cross them.
const LOSSY: [&str; 3] = ["sw-1-1-1", "sw-2-2-1", "sw-1-2-2"];
const LOSS_PERCENT: u32 = 30;
const LOSS_TIME: Duration = Duration::from_secs(20);

#[test]
fn lost_smps_lose_no_host_and_no_pair() {
    let g = Generated::new("mad-loss-", "torus.net", |_| {
        ["torus", "--dims", "4x4x3", "--hosts", "2"].iter().map(|s| s.to_string()).collect()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&g.net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = g.dir().join("dumps");
    let report = g.dir().join("report.json");
    let mut sm = RunningSm::start(&sim, &g.sm, &dumps, &report, &["--sweep-interval", "2", "--log", "info"])
        .unwrap_or_else(|e| panic!("{e}"));
    sm.wait_for("the first heavy sweep", Duration::from_secs(180), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    sm.wait_settled(Duration::from_secs(6), Duration::from_secs(180)).unwrap_or_else(|e| panic!("{e}"));
    let before = read_back(&sim, &g);
    assert!(before.is_whole(), "before any loss: {before:?}");

    let ids: Vec<String> = LOSSY
        .iter()
        .map(|d| {
            let n = g.topo.nodes.iter().find(|n| n.desc == *d).unwrap_or_else(|| panic!("no switch {d}"));
            n.name.clone()
        })
        .collect();
    let sweeps_before_loss = sm.heavy_sweeps();
    for id in &ids {
        let cmd = format!("Error \"{id}\" {LOSS_PERCENT}");
        let answer = sim.send(&cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert!(!answer.contains("not found") && !answer.contains("bad"), "{cmd}: {answer}");
    }
    let t = Instant::now();
    while t.elapsed() < LOSS_TIME {
        std::thread::sleep(Duration::from_millis(500));
    }
    for id in &ids {
        let cmd = format!("Error \"{id}\" 0");
        sim.send(&cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
    let sweeps_in_loss = sm.heavy_sweeps() - sweeps_before_loss;
    // A couple of sweeps without loss: the light sweep retries whatever
    // the last heavy sweep missed, then the SM goes quiet.
    std::thread::sleep(Duration::from_secs(5));
    sm.wait_settled(Duration::from_secs(8), Duration::from_secs(180)).unwrap_or_else(|e| panic!("{e}"));
    let after = read_back(&sim, &g);
    println!("heavy sweeps during the loss: {sweeps_in_loss}; after it: {after:?}");
    // The SMP window backed off while SMPs were lost (the report holds
    // what it did since the SM started).
    let window = sm.report().and_then(|r| r.get("smp_window").cloned()).unwrap_or_default();
    let field = |k: &str| window.get(k).and_then(serde_json::Value::as_u64).unwrap_or_else(|| panic!("smp_window.{k} in {window}"));
    assert!(field("cuts") > 0, "no window cut through {LOSS_PERCENT} % loss: {window}");
    assert!(field("low") < field("peak"), "the window never shrank: {window}");
    let (status, output) = sm.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    let kept = output.lines().filter(|l| l.contains("kept as the last sweep knew it")).count();
    println!("nodes kept from memory through lost SMPs (log lines): {kept}");
    assert!(after.is_whole(), "after {} s of {LOSS_PERCENT} % loss on {LOSSY:?}: {after:?}\n{}", LOSS_TIME.as_secs(), tail(&output));
    assert!(status.success(), "smcore did not stop cleanly ({status})");
}

/// What the fabric holds, as infiniband-diags read it (printed whole on
/// failure).
#[derive(Debug)]
#[allow(dead_code)]
struct ReadBack {
    hosts: usize,
    hosts_without_lid: Vec<String>,
    pairs: usize,
    unreachable_pairs: usize,
    unreachable_examples: Vec<String>,
    cabled_ports: usize,
    not_active: Vec<String>,
}

impl ReadBack {
    fn is_whole(&self) -> bool {
        self.hosts_without_lid.is_empty() && self.unreachable_pairs == 0 && self.pairs > 0 && self.not_active.is_empty()
    }
}

fn read_back(sim: &Ibsim, g: &Generated) -> ReadBack {
    let topo = &g.topo;
    let lids = discovered_lids(sim).unwrap_or_else(|e| panic!("{e}"));
    let mut by_lid = BTreeMap::new();
    for (&guid, &lid) in &lids {
        if lid != 0 {
            by_lid.insert(lid, guid);
        }
    }
    let hosts = g.hosts();
    let mut hosts_without_lid = Vec::new();
    for &h in &hosts {
        let n = &topo.nodes[h];
        let guid = n.port_guids.get(1).copied().unwrap_or(0);
        if lids.get(&guid).copied().unwrap_or(0) == 0 {
            hosts_without_lid.push(n.desc.clone());
        }
    }
    // The LFTs the switches hold.
    let mut lfts = Lfts::default();
    for n in topo.nodes.iter().filter(|n| n.is_switch()) {
        let Some(&lid) = lids.get(&n.node_guid).filter(|&&l| l != 0) else { continue };
        let run = run_client(sim, "ibroute", &[&lid.to_string()], TOOL_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
        if !run.ok {
            continue;
        }
        let read = parse_lfts_str(&run.stdout, &format!("ibroute {lid}")).unwrap_or_else(|e| panic!("{e}"));
        lfts.switches.extend(read.switches);
    }
    let q = quality(topo, &lfts, &LidMap { by_lid }).unwrap_or_else(|e| panic!("{e}"));
    // Every cabled port Active: switch ports by iblinkinfo, host ports by
    // their own PortInfo.
    let mut not_active = Vec::new();
    let mut cabled_ports = 0;
    let run = run_client(sim, "iblinkinfo", &["-l", "--switches-only"], TOOL_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.ok, "iblinkinfo failed: {}{}", run.stdout, run.stderr);
    let switch_links = topo
        .links
        .iter()
        .map(|l| usize::from(topo.nodes[l.a.0].is_switch()) + usize::from(topo.nodes[l.b.0].is_switch()))
        .sum::<usize>();
    let active_lines = run.stdout.lines().filter(|l| l.contains("Active/") && l.contains("LinkUp")).count();
    cabled_ports += switch_links;
    if active_lines != switch_links {
        not_active.push(format!("{active_lines} of {switch_links} cabled switch ports Active"));
    }
    for &h in &hosts {
        let n = &topo.nodes[h];
        let guid = n.port_guids.get(1).copied().unwrap_or(0);
        cabled_ports += 1;
        let Some(&lid) = lids.get(&guid).filter(|&&l| l != 0) else {
            not_active.push(format!("{}: no LID to ask", n.desc));
            continue;
        };
        let run = run_client(sim, "smpquery", &["portinfo", &lid.to_string(), "1"], TOOL_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        let state = fields(&run.stdout, "LinkState:").first().map(|s| s.to_string()).unwrap_or_default();
        if state != "Active" {
            not_active.push(format!("{} (LID {lid}): {state:?}", n.desc));
        }
    }
    ReadBack {
        hosts: hosts.len(),
        hosts_without_lid,
        pairs: q.pairs,
        unreachable_pairs: q.pairs - q.reachable_pairs,
        unreachable_examples: q.unreachable_examples,
        cabled_ports,
        not_active,
    }
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(6000);
    let start = (start..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
    &text[start..]
}
