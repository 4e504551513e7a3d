//! smcore running as an SM (no `--once`) on ibsim, with link and switch
//! failures injected through ibsim's console while it runs: it must find
//! each change (trap 128 or light sweep), re-route around it without a
//! restart, program what it dumped (read back with `ibroute`), reach every
//! pair that can still be reached, and never change a LID.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use sm_topology::Topology;
use smcore_tests::fabric_check::lfts_read_back;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{parse_guid2lid_file, parse_lfts_file, quality, LidMap};
use smcore_tests::proc::{collect, die_with_parent, drain, terminate};
use smcore_tests::smcore::{Profile, Smcore};

/// The running SM with its output drained in the background.
struct Running {
    child: Child,
    out: Option<std::thread::JoinHandle<Vec<u8>>>,
    err: Option<std::thread::JoinHandle<Vec<u8>>>,
    report: PathBuf,
    dumps: PathBuf,
}

impl Running {
    /// The number of the last heavy sweep reported, if any.
    fn heavy_sweeps(&self) -> u64 {
        std::fs::read_to_string(&self.report)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|j| j["heavy_sweep"].as_u64())
            .unwrap_or(0)
    }

    /// Waits until heavy sweep `n` (or a later one) has been reported and
    /// the fabric looks as `check` wants; returns how long it took.
    fn wait_for(&mut self, what: &str, mut done: impl FnMut(&Running) -> bool) -> Duration {
        let t = Instant::now();
        let deadline = t + Duration::from_secs(90);
        loop {
            if done(self) {
                return t.elapsed();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("smcore exited ({status}) waiting for {what}:\n{}", self.output());
            }
            if Instant::now() > deadline {
                let _ = terminate(&mut self.child, Duration::from_secs(2));
                panic!("timed out waiting for {what}:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn output(&mut self) -> String {
        format!("{}\n{}", collect(self.out.take()), collect(self.err.take()))
    }
}

/// Every switch in the dump holds, as `ibroute` reads it, what the dump says.
fn assert_switches_hold_the_dump(sim: &Ibsim, dumps: &Path, when: &str) {
    lfts_read_back(sim, dumps).unwrap_or_else(|e| panic!("{when}: {e}"));
}

/// `topo` without the given links (indices).
fn without(topo: &Topology, cut: &[usize]) -> Topology {
    let mut t = topo.clone();
    t.links = topo.links.iter().enumerate().filter(|(i, _)| !cut.contains(i)).map(|(_, l)| l.clone()).collect();
    t
}

/// Every end-port pair of `topo` is reached by the dumped LFTs.
fn assert_all_reached(topo: &Topology, dumps: &Path, when: &str) {
    let lfts = parse_lfts_file(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let lids = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    let q = quality(topo, &lfts, &lids).unwrap_or_else(|e| panic!("{e}"));
    assert!(q.all_reachable(), "{when}: {}/{} pairs reached: {:?}", q.reachable_pairs, q.pairs, q.unreachable_examples);
}

fn lid_map(dumps: &Path) -> BTreeMap<u64, u16> {
    let map: LidMap = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    map.by_lid.iter().map(|(&lid, &guid)| (guid, lid)).collect()
}

#[test]
fn link_and_switch_failures_are_routed_around_while_running() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("sm-faults-").tempdir().expect("temp dir");
    let net = tmp.path().join("ft.net");
    // Four leaves, three spines, each leaf one cable to each spine: an
    // uplink and a spine can be down together and every host is still
    // reachable.
    sm.gen(&["fat-tree", "--leaves", "4", "--spines", "3", "--hosts-per-leaf", "3", "--uplinks", "3"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let spine = topo.nodes.iter().position(|n| n.desc.contains("spine-1")).expect("spine-1");
    // Not the SM's leaf (leaf-0): cutting the SM off would leave it a
    // fabric of one leaf.
    let leaf = topo.nodes.iter().position(|n| n.desc.contains("leaf-3")).expect("leaf-3");
    let uplink = topo
        .links
        .iter()
        .position(|l| (l.a.0 == leaf && l.b.0 != spine && topo.nodes[l.b.0].is_switch()) || (l.b.0 == leaf && l.a.0 != spine && topo.nodes[l.a.0].is_switch()))
        .expect("an uplink of leaf-3 to another spine");
    let up = &topo.links[uplink];
    let (leaf_port, spine_links): (u8, Vec<usize>) = (
        if up.a.0 == leaf { up.a.1 } else { up.b.1 },
        topo.links.iter().enumerate().filter(|(_, l)| l.a.0 == spine || l.b.0 == spine).map(|(i, _)| i).collect(),
    );
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    let dumps = tmp.path().join("dumps");
    let report = tmp.path().join("report.json");
    let mut cmd = sim.client_command(sm.bin()).unwrap_or_else(|e| panic!("{e}"));
    die_with_parent(&mut cmd);
    let mut child = cmd
        .args(["--sweep-interval", "1", "--log", "info", "--dump-dir"])
        .arg(&dumps)
        .arg("--report")
        .arg(&report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn smcore");
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let mut sm_run = Running { child, out, err, report, dumps: dumps.clone() };

    let up_after = sm_run.wait_for("the first heavy sweep", |r| r.heavy_sweeps() >= 1);
    assert_all_reached(&topo, &dumps, "start");
    assert_switches_hold_the_dump(&sim, &dumps, "start");
    let lids = lid_map(&dumps);
    println!("fabric up after {:.2} s", up_after.as_secs_f64());

    let leaf_id = &topo.nodes[leaf].name;
    let spine_id = &topo.nodes[spine].name;
    let mut steps: Vec<(String, Topology, &str)> = vec![
        (format!("Unlink \"{leaf_id}\"[{leaf_port}]"), without(&topo, &[uplink]), "uplink down"),
        (format!("Unlink \"{spine_id}\""), without(&topo, &[&[uplink][..], &spine_links[..]].concat()), "spine down"),
        (format!("ReLink \"{spine_id}\""), without(&topo, &[uplink]), "spine back"),
        (format!("ReLink \"{leaf_id}\"[{leaf_port}]"), topo.clone(), "uplink back"),
    ];
    for (command, now, what) in steps.drain(..) {
        let before = sm_run.heavy_sweeps();
        let answer = sim.send(&command).unwrap_or_else(|e| panic!("{command}: {e}"));
        assert!(!answer.contains("can't") && !answer.contains("not found"), "{command}: {answer}");
        let links_now = now.links.len();
        let took = sm_run.wait_for(what, |r| {
            // A sweep after the command, whose dump shows the fabric as
            // it is now (a change may take two sweeps to settle).
            r.heavy_sweeps() > before && {
                let lfts = parse_lfts_file(r.dumps.join("opensm-lfts.dump"));
                let lids = parse_guid2lid_file(r.dumps.join("guid2lid"));
                match (lfts, lids) {
                    (Ok(l), Ok(m)) => quality(&now, &l, &m).is_ok_and(|q| q.all_reachable()),
                    _ => false,
                }
            }
        });
        println!("{what}: re-routed within {:.2} s ({links_now} links)", took.as_secs_f64());
        assert_switches_hold_the_dump(&sim, &dumps, what);
        assert_all_reached(&now, &dumps, what);
        // LIDs never change; ports that are away keep theirs reserved.
        for (guid, lid) in lid_map(&dumps) {
            assert_eq!(lids.get(&guid), Some(&lid), "{what}: port {guid:#x} changed LID");
        }
    }
    terminate(&mut sm_run.child, Duration::from_secs(10)).expect("terminate");
    let status = sm_run.child.wait().expect("wait");
    let text = sm_run.output();
    assert!(status.success(), "smcore did not stop cleanly ({status}):\n{text}");
    assert!(text.contains("smcore stopped"), "{text}");
}
