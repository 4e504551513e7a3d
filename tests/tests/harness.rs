//! Checks of the test support itself against the real programs: ibsim's
//! console and socket isolation, umad clients, OpenSM's fallback as read
//! from its log. Needs `cargo build --workspace` first (for `smcore gen`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sm_topology::Topology;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::proc;
use smcore_tests::smcore::{Profile, Smcore};

fn gen(dir: &Path, name: &str, args: &[&str]) -> (PathBuf, Topology) {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let net = dir.join(name);
    sm.gen(args, &net).unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    (net, topo)
}

/// What `ibnetdiscover` finds through umad2sim.
fn discover(sim: &Ibsim) -> Topology {
    let mut cmd = sim.client_command("ibnetdiscover").unwrap_or_else(|e| panic!("{e}"));
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run ibnetdiscover");
    let out = child.stdout.take().map(proc::drain);
    let err = child.stderr.take().map(proc::drain);
    let outcome = proc::wait_with_timeout(&mut child, Duration::from_secs(60), Duration::from_secs(2)).expect("wait");
    let (out, err) = (proc::collect(out), proc::collect(err));
    assert!(outcome.success(), "ibnetdiscover: {outcome:?}\n{err}");
    sm_topology::parse_str(&out, "ibnetdiscover").unwrap_or_else(|e| panic!("{e}\n{out}"))
}

#[test]
fn console_faults_are_seen_by_umad_clients() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (net, topo) = gen(
        tmp.path(),
        "ft.net",
        &["fat-tree", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2", "--uplinks", "2"],
    );
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    let seen = discover(&sim);
    assert_eq!(seen.differences_by_guid(&topo), Vec::<String>::new());

    let leaf = topo.find_node_by_desc("leaf-0").expect("leaf-0");
    let name = topo.nodes[leaf].name.clone();
    let uplink = topo.nodes[leaf].num_ports;
    let answer = sim.send(&format!("Unlink \"{name}\"[{uplink}]")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!answer.contains("unknown"), "{answer}");
    assert_eq!(discover(&sim).links.len(), topo.links.len() - 1);

    sim.send(&format!("ReLink \"{name}\"[{uplink}]")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(discover(&sim).differences_by_guid(&topo), Vec::<String>::new());

    // Clients that exited cleanly gave their slots back.
    assert_eq!(sim.attached().unwrap_or_else(|e| panic!("{e}")), vec![]);
    assert!(sim.send(&"x".repeat(200)).is_err(), "over-long console lines are refused");
}

#[test]
fn simulators_run_side_by_side() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (net_a, a) = gen(tmp.path(), "a.net", &["torus", "--dims", "3x3", "--hosts", "1"]);
    let (net_b, b) = gen(tmp.path(), "b.net", &["hypercube", "--dim", "3", "--hosts", "1"]);
    let sim_a = Ibsim::start(&net_a).unwrap_or_else(|e| panic!("{e}"));
    let sim_b = Ibsim::start(&net_b).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(sim_a.sockname(), sim_b.sockname());
    assert_eq!(discover(&sim_b).differences_by_guid(&b), Vec::<String>::new());
    assert_eq!(discover(&sim_a).differences_by_guid(&a), Vec::<String>::new());
}

#[test]
fn opensm_fallback_and_no_fallback_are_recognised() {
    let tmp = tempfile::tempdir().expect("temp dir");
    // A fat tree is no torus: torus-2QoS refuses it.
    let (net, _) = gen(
        tmp.path(),
        "ft.net",
        &["fat-tree", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "2", "--uplinks", "2"],
    );
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    let run = opensm::run(&sim, &OpenSmOptions::new("torus-2QoS")).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.success(), "{:?}\n{}", run.outcome, run.output);
    assert_eq!(run.routed_by(), Some("minhop"));
    assert!(!run.asked_engine_routed());
    assert_eq!(run.log.tried.first().map(String::as_str), Some("torus-2QoS"));
    assert!(run.route_time().is_some());

    // With no_fallback nothing routes and run-once OpenSM would never
    // exit; the run stops once the log says so.
    let run = opensm::run(&sim, &OpenSmOptions::new("torus-2QoS,no_fallback")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.outcome, proc::Outcome::Stopped);
    assert!(run.log.no_engine_routed && run.routed_by().is_none(), "{:?}", run.log);
    // Its simulator slot was freed, and the next SM can attach.
    assert_eq!(sim.attached().unwrap_or_else(|e| panic!("{e}")), vec![]);
    let run = opensm::run(&sim, &OpenSmOptions::new("minhop")).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.success() && run.asked_engine_routed(), "{:?}\n{}", run.outcome, run.output);
}
