//! The real ibsim loads what `emit` writes, and ibnetdiscover run against it
//! reports the same nodes (by GUID), descriptions, port GUIDs, links and
//! rates. Fails, naming the packages, where ibsim or libumad2sim is not
//! installed.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sm_topology::model::{SPEED_DDR, SPEED_EDR, SPEED_FDR, SPEED_SDR};
use smcore_test_support::{require_tool, require_umad2sim};
use sm_topology::{emit, gen, parse_str, Topology, TopologyBuilder, TopologyError};


fn ok<T>(r: Result<T, TopologyError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Fails the test, naming what to install, when ibsim, ibnetdiscover or
/// libumad2sim is missing: a test that skips proves nothing (CI installs
/// them, `.ci/run`).
fn require_tools() {
    require_umad2sim();
    require_tool("ibsim");
    require_tool("ibnetdiscover");
}

/// Kills the simulator when the test ends, however it ends.
struct Sim(Child);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run ibsim on `topo` and return what ibnetdiscover reports, parsed.
fn discover(topo: &Topology, tag: &str) -> Topology {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let dir = tempfile::tempdir().expect("temp dir");
    let net = dir.path().join(format!("{tag}.net"));
    ok(emit::write_file(topo, &net));
    let limits = ok(emit::ibsim_check(topo));
    // A socket name per test: tests run in parallel, each with its own simulator.
    let sock =
        format!("smtopo{}_{}_{tag}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    let log = dir.path().join("ibsim.log");
    let log_file = std::fs::File::create(&log).expect("log file");
    let child = Command::new("ibsim")
        .args(limits.args())
        .args(["-s", "-n"])
        .arg(&net)
        .env("IBSIM_SOCKNAME", &sock)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("log fd"))
        .stderr(log_file)
        .spawn()
        .expect("start ibsim");
    let mut sim = Sim(child);
    let text = run_ibnetdiscover(&mut sim, &sock, &log);
    match parse_str(&text, &format!("ibnetdiscover of {tag}")) {
        Ok(t) => t,
        Err(e) => panic!("{e}\n{text}"),
    }
}

fn run_ibnetdiscover(sim: &mut Sim, sock: &str, log: &Path) -> String {
    let lib = require_umad2sim();
    let deadline = Instant::now() + Duration::from_secs(30);
    // A client that comes before the simulator has bound its sockets waits
    // two seconds before retrying; ibsim binds them right after saying
    // it is ready.
    while !std::fs::read_to_string(log).unwrap_or_default().contains("simulator ready")
        && Instant::now() < deadline
        && matches!(sim.0.try_wait(), Ok(None))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    loop {
        if let Ok(Some(status)) = sim.0.try_wait() {
            panic!(
                "ibsim exited with {status}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        let out = Command::new("ibnetdiscover")
            .env("LD_PRELOAD", &lib)
            .env("IBSIM_SOCKNAME", sock)
            .stdin(Stdio::null())
            .output()
            .expect("run ibnetdiscover");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && text.contains("Switch") {
            return text;
        }
        if Instant::now() > deadline {
            panic!(
                "ibnetdiscover kept failing: {}\nibsim: {}",
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn assert_same_fabric(topo: &Topology, tag: &str) {
    let seen = discover(topo, tag);
    let diffs = topo.differences_by_guid(&seen);
    assert!(diffs.is_empty(), "{tag}: ibsim differs:\n{}", diffs.join("\n"));
    // Generated ids are the ibnetdiscover ids, so names agree as well.
    for n in &topo.nodes {
        assert!(seen.find_node(&n.name).is_some(), "{tag}: {} not reported by name", n.name);
    }
}

#[test]
fn ibsim_reports_generated_fat_tree_and_kary_tree() {
    require_tools();
    assert_same_fabric(&ok(gen::fat_tree_2level(3, 2, 3, 4)), "fat");
    assert_same_fabric(&ok(gen::kary_ntree(2, 3, 2)), "kary");
}

#[test]
fn ibsim_reports_tori_with_radix_two_rings() {
    require_tools();
    assert_same_fabric(&ok(gen::torus(&[2, 3], 1, false)).0, "torus23");
    assert_same_fabric(&ok(gen::torus(&[3, 2, 2], 1, true)).0, "mesh322");
}

#[test]
fn ibsim_reports_random_hypercube_and_faults() {
    require_tools();
    assert_same_fabric(&ok(gen::random_irregular(10, 8, 2, 8, 17)), "random");
    assert_same_fabric(&ok(gen::hypercube(3, 1)), "cube");
    // Remove links only, keeping the first host attached: ibnetdiscover
    // starts there and reports what it can reach.
    let base = ok(gen::torus(&[3, 3], 1, false)).0;
    let (faulty, _) = ok(gen::with_faults(&base, 3, 0, 1));
    assert!(faulty.is_connected(), "the fixed seed removes links that leave the fabric connected");
    assert_same_fabric(&faulty, "faults");
}

#[test]
fn ibsim_reports_rates_multiport_cas_and_wide_switches() {
    require_tools();
    let mut b = TopologyBuilder::new();
    let h0 = ok(b.add_ca("host-0", 1));
    let dual = ok(b.add_ca("dual port host", 2));
    let big = ok(b.add_switch("wide switch", 64));
    let small = ok(b.add_switch("small switch", 8));
    for (rate, x, y) in [
        ((4, SPEED_FDR), (h0, 1), (big, 64)),
        ((12, SPEED_DDR), (dual, 1), (big, 1)),
        ((1, SPEED_SDR), (dual, 2), (small, 1)),
        ((4, SPEED_EDR), (big, 2), (small, 2)),
        ((2, SPEED_FDR), (big, 3), (small, 3)),
    ] {
        b.set_rate(rate.0, rate.1);
        ok(b.link(x, y));
    }
    assert_same_fabric(&ok(b.finish()), "rates");
}
