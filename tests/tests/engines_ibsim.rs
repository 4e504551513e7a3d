//! End to end on ibsim for each tree routing engine: `smcore --once
//! --engines <e>,no_fallback` as the SM of a simulated 4-ary 3-tree (through
//! umad2sim), then infiniband-diags read back what the fabric holds:
//!
//! * `ibroute` of every switch prints exactly the LFT smcore dumped;
//! * `ibtracert` between sample CA pairs (both directions, across the
//!   spines and within a leaf) arrives at the destination CA;
//! * `ibnetdiscover -p` sees every port with the LID smcore's `guid2lid`
//!   gives it;
//! * smcore's report names the engine asked for (no fallback happened).
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-updn -p smcore-engine-ftree` first, and the Debian
//! packages ibsim-utils and infiniband-diags. `-- --nocapture` prints the figures.

use std::time::{Duration, Instant};

use smcore_tests::fabric_check::{lfts_read_back, lids_read_back, sm_once, trace};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::lid_map_for_dump_dir;
use smcore_tests::smcore::{Profile, Smcore};

fn end_to_end(engine: &str) {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new()
        .prefix(&format!("engine-ibsim-{engine}-"))
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join("k43.net");
    sm.gen(&["kary-ntree", "--k", "4", "--n", "3"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    let dumps = tmp.path().join("dumps");
    let report = tmp.path().join("report.json");
    let report_arg = report.to_str().expect("UTF-8 temp path");
    let t = Instant::now();
    let run = sm_once(
        &sim,
        &sm,
        &format!("{engine},no_fallback"),
        &dumps,
        &["--report", report_arg],
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let once = t.elapsed();
    assert!(
        run.ok,
        "{engine}: smcore --once failed ({:?}):\n{}\n{}",
        run.outcome, run.stdout, run.stderr
    );
    let rep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap_or_else(|e| panic!("{}: {e}", report.display())))
            .unwrap_or_else(|e| panic!("{}: {e}", report.display()));
    assert_eq!(
        rep.get("engine").and_then(|e| e.as_str()),
        Some(engine),
        "{engine}: smcore --once did not route with {engine}:\n{}",
        run.stdout
    );

    // What the switches hold.
    let t = Instant::now();
    let switches = lfts_read_back(&sim, &dumps).unwrap_or_else(|e| panic!("{engine}: {e}"));
    assert_eq!(switches, topo.num_switches(), "{engine}: switches in the dump");
    let ibroute = t.elapsed();

    // The LIDs the fabric answers to.
    let ports = lids_read_back(&sim, &dumps).unwrap_or_else(|e| panic!("{engine}: {e}"));
    let ca_ports: usize = topo.end_nodes().map(|i| topo.nodes[i].num_ports as usize).sum();
    assert_eq!(
        ports,
        topo.num_switches() + ca_ports,
        "{engine}: ports ibnetdiscover lists"
    );

    // Traces between CAs: first and last host (across the spines), both
    // ways; two hosts of one leaf; and two from the middle.
    let lids = lid_map_for_dump_dir(&dumps).unwrap_or_else(|e| panic!("{e}"));
    let mut cas: Vec<(u64, u16)> = topo
        .end_nodes()
        .flat_map(|i| topo.nodes[i].port_guids.iter().copied())
        .filter_map(|g| lids.by_lid.iter().find(|&(_, &pg)| pg == g).map(|(&l, _)| (g, l)))
        .collect();
    cas.sort_unstable();
    assert_eq!(cas.len(), ca_ports, "{engine}: every CA port has a LID");
    let n = cas.len();
    let samples = [(0, n - 1), (n - 1, 0), (0, 1), (n / 2, n / 4), (n / 4 + 1, 3 * n / 4)];
    for (a, b) in samples {
        trace(&sim, cas[a].1, cas[b].1).unwrap_or_else(|e| panic!("{engine}: {e}"));
    }
    println!(
        "{engine}: smcore --once {:.0} ms; {switches} switches' LFTs read back in {:.0} ms; {ports} LIDs; {} traces\n{}",
        once.as_secs_f64() * 1e3,
        ibroute.as_secs_f64() * 1e3,
        samples.len(),
        run.stdout.lines().filter(|l| l.starts_with("engine") || l.starts_with("time")).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn minhop() {
    end_to_end("minhop");
}

#[test]
fn updn() {
    end_to_end("updn");
}

#[test]
fn dnup() {
    end_to_end("dnup");
}

#[test]
fn ftree() {
    end_to_end("ftree");
}
