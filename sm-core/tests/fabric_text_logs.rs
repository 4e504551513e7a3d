//! Issue 32, item 16: a NodeDescription is whatever its host says, and it
//! reaches log lines (the silent-node warning, perfmgr events, isolation).
//! A newline in it must not forge a log line: fabric text is shown through
//! `sweep::Escaped` wherever it is logged.

use std::io::Write;
use std::sync::{Arc, Mutex};

use sm_abi::NodeKind;
use sm_core::perfmgr::isolation::{apply, Action, Request};
use sm_core::perfmgr::Event;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{self, FabricMemory, Guid2Lid, SmpClient, SweepOptions};
use sm_topology::gen;

const FORGED: &str = "ERROR smcore: FORGED";

/// Log lines written while `f` runs, as the daemon's text format gives them.
fn captured(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = buf.0.lock().expect("buffer").clone();
    String::from_utf8(bytes).expect("utf-8")
}

fn assert_not_forged(log: &str, what: &str) {
    assert!(
        log.contains("\\nERROR smcore: FORGED"),
        "{what}: the description is logged, escaped:\n{log}"
    );
    assert!(
        !log.lines().any(|l| l.starts_with(FORGED)),
        "{what}: a forged line:\n{log}"
    );
}

#[test]
fn a_silent_nodes_description_cannot_forge_a_log_line() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let spine = topo
        .nodes
        .iter()
        .position(|n| n.desc == "spine-1")
        .expect("spine-1");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    sim.set_description(spine, &format!("spine-1\n{FORGED}"))
        .expect("spine");
    let mut memory = FabricMemory::default();
    let mut g2l = Guid2Lid::default();
    let options = SweepOptions {
        retries: 1,
        ..SweepOptions::default()
    };
    let log = captured(|| {
        for silent in [false, true] {
            if silent {
                sim.set_answer_loss(spine, 1).expect("spine");
            }
            let mut port = SimPort::new(&mut sim);
            let out = sweep::sweep_with(
                &mut port,
                &options,
                &mut g2l,
                &mut memory,
                &options.limits(),
            )
            .expect("sweep");
            assert_eq!(out.discovery.kept_nodes, usize::from(silent));
        }
    });
    assert!(log.contains("did not answer this sweep"), "{log}");
    assert_not_forged(&log, "silent node");
}

#[test]
fn perfmgr_events_and_isolation_show_descriptions_escaped() {
    let event = Event {
        node_guid: 7,
        node_desc: format!("h\n{FORGED}"),
        port: 1,
        counter: "SymbolErrorCounter",
        delta: 50,
        threshold: 10,
    };
    let shown = event.to_string();
    assert!(!shown.contains('\n'), "{shown}");
    let log = captured(|| tracing::warn!("port counter threshold crossed: {event}"));
    assert_not_forged(&log, "perfmgr event");

    // An isolation refused (the SM leaf's only uplink) names the switch.
    let topo = gen::fat_tree_2level(2, 1, 2, 1).expect("fat tree");
    let sm = topo
        .nodes
        .iter()
        .position(|n| n.kind == NodeKind::Ca)
        .expect("a host");
    let (leaf, _) = topo.peer(sm, 1).expect("the SM's leaf");
    let uplink = (1..=topo.nodes[leaf].num_ports)
        .find(|&p| {
            topo.peer(leaf, p)
                .is_some_and(|(n, _)| topo.nodes[n].kind == NodeKind::Switch)
        })
        .expect("an uplink");
    let mut sim = SimFabric::from_topology(&topo, sm, 1).expect("sim");
    sim.set_description(leaf, &format!("leaf\n{FORGED}"))
        .expect("leaf");
    let out = {
        let mut port = SimPort::new(&mut sim);
        sweep::sweep(
            &mut port,
            &SweepOptions::default(),
            &mut Guid2Lid::default(),
        )
        .expect("sweep")
    };
    let request = Request {
        switch_guid: topo.nodes[leaf].node_guid,
        port: uplink,
        action: Action::Disable,
    };
    let log = captured(|| {
        let mut port = SimPort::new(&mut sim);
        let mut client = SmpClient::new(&mut port, 0);
        assert!(!apply(&out.fabric, &[request], &mut client));
    });
    assert!(log.contains("not isolated"), "{log}");
    assert_not_forged(&log, "isolation");
}

/// Engines put NodeDescriptions in their messages (the `file` engine names
/// the switches its file leaves out; the verifier names nodes in its
/// examples), and the chain logs them: escaped too.
#[test]
fn an_engines_message_naming_a_description_cannot_forge_a_log_line() {
    #[allow(dead_code)]
    #[path = "common.rs"]
    mod common;
    use sm_core::engines::chain::{self, ChainSpec};
    use sm_core::engines::Registry;

    let tmp = tempfile::tempdir().expect("tempdir");
    let net = common::write(tmp.path(), "small.net", common::SMALL_NET);
    let mut fabric = sm_core::offline::load_fabric(&net, 0).expect("small fabric loads");
    let registry = Registry::scan(&[common::bin_dir()]);
    // The routing in the file holds the first switch's table only.
    let routed = chain::run(
        &registry,
        &ChainSpec::parse("minhop,no_fallback", &registry).expect("minhop"),
        &fabric,
        &|_| String::new(),
        &Default::default(),
    );
    let routing = routed.routed.expect("minhop routes").routing;
    let first = routing.lfts.iter().next().expect("a switch").clone();
    let one = sm_abi::Routing::single_vl(vec![first.clone()]);
    let mut text = Vec::new();
    sm_core::dump::write_lfts(
        &mut text,
        &sm_core::dump::DumpInput {
            fabric: &fabric,
            routing: &one,
        },
    )
    .expect("dump");
    let file = common::write(
        tmp.path(),
        "one.lfts",
        &String::from_utf8(text).expect("utf-8"),
    );
    // Every node's description carries a forged line: the verifier's
    // examples of the pairs the file leaves unreachable name some of them.
    for node in fabric.nodes.iter_mut() {
        node.description = format!("node\n{FORGED}").into();
    }
    let spec = ChainSpec::parse("file,no_fallback", &registry).expect("file");
    let config = format!("lfts_file = {:?}", file.display().to_string());
    let log = captured(|| {
        chain::run(
            &registry,
            &spec,
            &fabric,
            &|_| config.clone(),
            &Default::default(),
        );
    });
    assert_not_forged(&log, "the verifier's examples of the file engine's routing");
}
