//! `smcore --fabric ... --once` and the library's full sweep on the
//! embedded fabric: what is programmed must be what was routed, every
//! linked port must end Active, LID-routed SMPs must reach CAs, and a
//! sweep of an unchanged fabric must write no LFT block.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{bin_dir, sm_location, workspace};
use sm_abi::{NodeKind, NO_ROUTE};
use sm_core::config::Config;
use sm_core::dump::lfts_parse::parse_lfts_file_detailed;
use sm_core::engines::Registry;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{self, Guid2Lid, HeldTables, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::{attr, method};
use sm_mad::{smp, Mad, NodeInfoPacket, NodeInfoRepr, PortState};
use sm_topology::Topology;

fn smcore(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_smcore"))
        .args(args)
        .env("SMCORE_ENGINE_PATH", bin_dir())
        .output()
        .expect("run smcore")
}

fn topology_file(name: &str) -> String {
    workspace()
        .join("config/topologies")
        .join(name)
        .display()
        .to_string()
}

/// Switch node GUID → destination port GUID → egress port, from an
/// `opensm-lfts.dump`: the routing with LIDs taken out.
fn lfts_by_guid(path: &Path) -> BTreeMap<u64, BTreeMap<u64, u8>> {
    parse_lfts_file_detailed(path)
        .expect("lfts dump parses")
        .into_iter()
        .map(|sw| {
            let entries = sw
                .entries
                .iter()
                .map(|e| (e.port_guid.expect("dump names every destination"), e.port))
                .collect();
            (sw.guid, entries)
        })
        .collect()
}

#[test]
fn once_on_fat_tree_programs_what_route_dumps() {
    let tmp = tempfile::tempdir().expect("tmp");
    let sm_dir = tmp.path().join("sm");
    let route_dir = tmp.path().join("route");
    let topo = topology_file("fat-tree-64.net");
    let report = tmp.path().join("report.json");
    let out = smcore(&[
        "--fabric",
        &topo,
        "--once",
        "--dump-dir",
        sm_dir.to_str().expect("utf-8"),
        "--report",
        report.to_str().expect("utf-8"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("SMPs per phase"), "{stdout}");
    let out = smcore(&[
        "route",
        &topo,
        "--dump-dir",
        route_dir.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The SM numbers LIDs in discovery order, `route` in file order, so
    // the dumps are compared by port GUID.
    let sm = lfts_by_guid(&sm_dir.join("opensm-lfts.dump"));
    let offline = lfts_by_guid(&route_dir.join("opensm-lfts.dump"));
    assert_eq!(sm.len(), 12);
    assert_eq!(sm, offline);

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    let phases = &json["smps_per_phase"];
    // No "arm" and no "lids": the link parameters' Sets arm the ports and
    // carry their LIDs as they go (SMPs count where they were sent); the
    // LIDs are reported set all the same.
    for phase in ["discovery", "link", "switch_info", "lft", "activate"] {
        assert!(
            phases[phase].as_u64().is_some_and(|n| n > 0),
            "{phase}: {json}"
        );
    }
    let lids_line = stdout.lines().find(|l| l.trim_start().starts_with("lids ")).expect("a lids line");
    let set: usize = lids_line.split_whitespace().nth(2).and_then(|n| n.parse().ok()).expect("LIDs set");
    assert!(set > 0 && lids_line.contains(" 0 failed"), "{lids_line}");
    assert!(Path::new(&sm_dir.join("guid2lid")).exists());

    // A second start keeps the LIDs the file remembers (the fabric is
    // built afresh, without LIDs, each time).
    let first = std::fs::read_to_string(sm_dir.join("guid2lid")).expect("guid2lid");
    let out = smcore(&[
        "--fabric",
        &topo,
        "--once",
        "--dump-dir",
        sm_dir.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read_to_string(sm_dir.join("guid2lid")).expect("guid2lid"),
        first
    );
}

#[test]
fn once_refuses_what_it_cannot_do() {
    let topo = topology_file("fat-tree-64.net");
    let out = smcore(&["--fabric", &topo, "--once", "--engines", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("nosuch"), "{err}");
    let out = smcore(&["--fabric", &topo, "--sweep-interval", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sweep interval"));
    let out = smcore(&["--fabric", &topo, "--once", "route", &topo]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn once_on_torus_with_minhop_routes_and_programs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let report = tmp.path().join("report.json");
    let out = smcore(&[
        "--fabric",
        &topology_file("torus-4x4x4.net"),
        "--once",
        "--engines",
        "minhop",
        "--report",
        report.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    assert_eq!(json["engine"], "minhop", "{json}");
    assert!(
        json["smps_per_phase"]["lft"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{json}"
    );
    assert_eq!(json["reachable_pairs"], json["pairs"], "{json}");
}


fn run_once(
    sim: &mut SimFabric,
    engines: &str,
    g2l: &mut Guid2Lid,
    held: &mut HeldTables,
) -> OnceOutcome {
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions {
        sweep: SweepOptions::default(),
        engines,
        dump_dir: None,
    };
    let mut port = SimPort::new(sim);
    sm_core::pipeline::once(
        &mut port,
        &options,
        &registry,
        &Config::default(),
        g2l,
        held,
    )
    .expect("sweep")
}

/// NodeInfo of whatever holds `dlid`, by a LID-routed SMP from the SM.
fn lid_routed_node_info(sim: &mut SimFabric, dlid: u16, tid: u64) -> Option<NodeInfoRepr> {
    let mut mad = Mad::zeroed();
    smp::Repr::lid_get(tid, attr::NODE_INFO, 0, 0).emit(&mut mad.smp_mut());
    let reply = sim.handle_to(dlid, &mad.0)?;
    let packet = smp::Packet::new_checked(&reply.mad[..]).ok()?;
    let repr = smp::Repr::parse(&packet).ok()?;
    if repr.method != method::GET_RESP || repr.status != 0 || repr.transaction_id != tid {
        return None;
    }
    NodeInfoRepr::parse(&NodeInfoPacket::new_checked(&repr.data[..]).ok()?).ok()
}

/// Checks the fabric after a full sweep against the routing it accepted.
fn check_programmed(name: &str, topo: &Topology, sim: &mut SimFabric, out: &OnceOutcome) {
    let routed = out.accepted.as_ref().expect("routed");
    let max_lid = out.snapshot().max_lid;
    let sim_index: BTreeMap<u64, usize> = topo
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.node_guid, i))
        .collect();
    let mut switches = 0;
    for lft in routed.routing.lfts.iter() {
        let guid = out.snapshot().nodes[lft.node as usize].guid;
        let i = sim_index[&guid];
        assert_eq!(
            sim.linear_fdb_top(i),
            Some(max_lid),
            "{name}: switch {guid:#x}"
        );
        let held = sim.lft(i).expect("a switch");
        for (lid, &entry) in held
            .iter()
            .enumerate()
            .take(usize::from(max_lid) + 1)
            .skip(1)
        {
            let want = lft.ports.get(lid).copied().unwrap_or(NO_ROUTE);
            assert_eq!(entry, want, "{name}: switch {guid:#x} LID {lid}");
        }
        switches += 1;
    }
    assert_eq!(
        switches,
        topo.nodes.iter().filter(|n| n.is_switch()).count(),
        "{name}"
    );
    for link in &topo.links {
        for (node, port) in [link.a, link.b] {
            assert_eq!(
                sim.port_state(node, port),
                Some(PortState::Active),
                "{name}: {node}/{port}"
            );
        }
    }
    // Sample CAs, reached by LID through the programmed LFTs.
    let cas: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].kind == NodeKind::Ca)
        .collect();
    let step = (cas.len() / 8).max(1);
    for (k, &ca) in cas.iter().step_by(step).enumerate() {
        let lid = sim.port_lid(ca, 1).expect("CA port 1");
        assert_ne!(lid, 0, "{name}: CA {ca} has a LID");
        let info = lid_routed_node_info(sim, lid, 1000 + k as u64)
            .unwrap_or_else(|| panic!("{name}: LID {lid} unreachable ({:?})", sim.last_drop()));
        assert_eq!(
            info.node_guid, topo.nodes[ca].node_guid,
            "{name}: LID {lid}"
        );
    }
}

fn full_sweep_then_unchanged(file: &str, engines: &str) -> OnceOutcome {
    let topo = sm_topology::parse_file(workspace().join("config/topologies").join(file))
        .expect("topology");
    let (node, port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, node, port).expect("sim");
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let first = run_once(&mut sim, engines, &mut g2l, &mut held);
    check_programmed(file, &topo, &mut sim, &first);
    let p = &first.program;
    assert!(
        p.lft.set > 0 && p.lft.failed == 0 && p.lft.read == 0,
        "{file}: {p:?}"
    );
    assert!(p.arm.failed == 0 && p.activate.failed == 0, "{file}: {p:?}");
    assert_eq!(p.arm.set, p.activate.set, "{file}");
    assert_eq!(
        p.arm.set,
        2 * topo.links.len(),
        "{file}: both ends of every link"
    );

    // The same SM again: it knows what it wrote; nothing is sent but
    // discovery.
    let second = run_once(&mut sim, engines, &mut g2l, &mut held);
    let q = &second.program;
    assert_eq!(
        (q.lft.set, q.lft.read, q.lft.smps.sent),
        (0, 0, 0),
        "{file}: {q:?}"
    );
    assert_eq!(q.total_smps(), 0, "{file}: {q:?}");
    assert_eq!(second.sweep.program_smps.sent, 0, "{file}: LIDs held");
    check_programmed(file, &topo, &mut sim, &second);

    // A restarted SM (nothing remembered) reads the blocks and writes none.
    let mut forgetful = HeldTables::default();
    let third = run_once(&mut sim, engines, &mut g2l, &mut forgetful);
    let r = &third.program;
    assert_eq!(r.lft.set, 0, "{file}: {r:?}");
    assert_eq!(r.lft.read, p.lft.set, "{file}: {r:?}");
    check_programmed(file, &topo, &mut sim, &third);
    first
}

#[test]
fn fat_tree_programmed_in_process() {
    let out = full_sweep_then_unchanged("fat-tree-64.net", "minhop");
    // One SwitchInfo Set and one LFT Set per block (LIDs 0..=76: 2 blocks)
    // per switch, no read on a fresh fabric.
    let p = &out.program;
    assert_eq!(p.switch_info.smps.sent, 12);
    assert_eq!(p.lft.smps.sent, 24);
}

#[test]
fn torus_programmed_in_process() {
    full_sweep_then_unchanged("torus-4x4x4.net", "minhop");
}

#[test]
fn no_fallback_and_a_failing_engine_program_nothing() {
    let fx = common::fixtures_dir();
    let topo_path = topology_file("fat-tree-64.net");
    let out = smcore(&[
        "--fabric",
        &topo_path,
        "--once",
        "--engine-dir",
        fx.to_str().expect("utf-8"),
        "--engines",
        "test-decline,no_fallback",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let topo = sm_topology::parse_file(&topo_path).expect("topology");
    let (node, port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, node, port).expect("sim");
    let registry = Registry::scan(&[fx, bin_dir()]);
    let options = OnceOptions {
        sweep: SweepOptions::default(),
        engines: "test-decline,no_fallback",
        dump_dir: None,
    };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = sm_core::pipeline::once(
        &mut SimPort::new(&mut sim),
        &options,
        &registry,
        &Config::default(),
        &mut g2l,
        &mut held,
    )
    .expect("sweep");
    assert!(out.accepted.is_none());
    // Only the link parameters and the partitions, which do not depend on
    // a routing (the partitions go in while the engines route).
    assert_eq!(out.program.total_smps(), out.program.link.smps.sent + out.program.pkey.smps.sent);
    assert_eq!(out.program.lft.smps.sent + out.program.activate.smps.sent, 0);
    assert!(held.is_empty());
    for (i, n) in topo.nodes.iter().enumerate() {
        if n.is_switch() {
            assert_eq!(sim.linear_fdb_top(i), Some(0), "switch {i} untouched");
        }
    }
    // The link parameters' Sets armed the ports; none is Active, and an
    // Armed port passes SMPs only, so nothing is forwarded.
    let (a, b) = (topo.links[0].a, topo.links[0].b);
    assert_eq!(sim.port_state(a.0, a.1), Some(PortState::Armed));
    assert_eq!(sim.port_state(b.0, b.1), Some(PortState::Armed));
    for l in &topo.links {
        assert_ne!(sim.port_state(l.a.0, l.a.1), Some(PortState::Active));
        assert_ne!(sim.port_state(l.b.0, l.b.1), Some(PortState::Active));
    }
}

/// SL2VL of `(node, in, out)` as the node answers a SubnGet for it.
fn read_sl2vl(sim: &mut SimFabric, fabric: &sweep::Fabric, node: usize, input: u8, output: u8) -> [u8; 16] {
    use sm_mad::{Sl2VlModifier, Sl2VlPacket, Sl2VlRepr};
    let n = &fabric.nodes[node];
    let (path, modifier) = if n.is_switch() {
        (n.path.clone(), Sl2VlModifier { input_port: input, output_port: output, ..Default::default() }.to_u32())
    } else {
        (n.ports[usize::from(output)].path.clone().expect("a linked CA port"), 0)
    };
    let mut port = SimPort::new(sim);
    let mut client = sweep::SmpClient::new(&mut port, 0);
    let data = client.get(attr::SL_TO_VL_MAPPING_TABLE, modifier, &path).expect("SL2VL Get");
    Sl2VlRepr::parse(&Sl2VlPacket::new_checked(&data[..]).expect("length")).expect("SL2VL").vl_by_sl
}

#[test]
fn sl2vl_tables_of_a_layered_engine_are_programmed_once() {
    // 6-rings: lash needs more than one layer (a 4x4x4 torus fits in one).
    let (topo, _) = sm_topology::gen::torus(&[6, 6], 1, false).expect("torus");
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let mut g2l = Guid2Lid::default();
    let mut held = HeldTables::default();
    let out = run_once(&mut sim, "lash,no_fallback", &mut g2l, &mut held);
    let routed = out.accepted.as_ref().expect("lash routes a 6x6 torus");
    assert!(routed.routing.vls_used > 1, "a torus needs more than one layer");
    assert!(!routed.routing.sl2vl.is_empty(), "lash gives SL2VL tables");
    assert_eq!(out.program.sl2vl.set as usize, routed.routing.sl2vl.len(), "{:?}", out.program.sl2vl);
    assert_eq!(out.program.sl2vl.failed, 0);
    for e in routed.routing.sl2vl.iter() {
        let held_now = read_sl2vl(&mut sim, &out.sweep.fabric, e.node as usize, e.in_port, e.out_port);
        assert_eq!(held_now, e.vl, "node {} {}->{}", e.node, e.in_port, e.out_port);
    }
    // The lanes the tables name are operational on every link crossed.
    let faults = sim.vl_faults(&|s, d| routed.routing.path_sl.path_sl(s, d));
    assert!(faults.is_empty(), "{} packets dropped, e.g. {}", faults.len(), faults[0]);
    // Nothing changed: the next sweep writes no table.
    let again = run_once(&mut sim, "lash,no_fallback", &mut g2l, &mut held);
    assert_eq!(again.program.sl2vl.set, 0);
    assert_eq!(again.program.sl2vl.unchanged as usize, routed.routing.sl2vl.len());
}
