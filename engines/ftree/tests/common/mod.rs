//! Helpers shared by the ftree tests.
#![allow(dead_code)]

use std::path::PathBuf;

use sm_abi::{FabricSnapshot, NodeKind, Routing, RoutingEngine};
use sm_topology::builder::{ca_guid, ibnetdiscover_id};
use sm_topology::{lids, TopoLink, TopoNode, Topology};
use smcore_ftree::Ftree;
use smcore_kit::verify::{verify, Verification, VerifyOptions};

/// Snapshot with LMC 0.
pub fn snap(t: &Topology) -> FabricSnapshot {
    lids::snapshot(t, 0).expect("snapshot")
}

/// Route with `engine` and verify with credit loops and switch LIDs as
/// destinations; panics naming `what` on an engine error or a failure.
pub fn route_ok(engine: &Ftree, f: &FabricSnapshot, what: &str) -> (Routing, Verification) {
    route_checked(engine, f, what, true)
}

/// [`route_ok`] with CA LIDs as the only destinations (what the core's
/// gate requires): on damaged trees up/down cannot reach every switch.
pub fn route_ok_ca(engine: &Ftree, f: &FabricSnapshot, what: &str) -> (Routing, Verification) {
    route_checked(engine, f, what, false)
}

fn route_checked(
    engine: &Ftree,
    f: &FabricSnapshot,
    what: &str,
    switches: bool,
) -> (Routing, Verification) {
    let r = engine
        .route(f)
        .unwrap_or_else(|e| panic!("{what}: ftree refused: {e}"));
    let opts = VerifyOptions {
        credit_loops: true,
        switch_destinations: switches,
        max_examples: 4,
    };
    let v = verify(f, &r, &opts);
    assert!(v.pairs > 0, "{what}: nothing verified");
    assert!(v.ok(), "{what}: {}", v.failure().unwrap_or_default());
    (r, v)
}

/// Switch node GUIDs whose description starts with `prefix`.
pub fn guids_of(f: &FabricSnapshot, prefix: &str) -> Vec<u64> {
    f.nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Switch && n.description.starts_with(prefix))
        .map(|n| n.guid)
        .collect()
}

/// Port GUIDs of the CA ports whose node description starts with `prefix`.
pub fn ca_port_guids(f: &FabricSnapshot, prefix: &str) -> Vec<u64> {
    f.end_ports()
        .filter(|&p| {
            f.nodes[f.ports[p as usize].node as usize]
                .description
                .starts_with(prefix)
        })
        .map(|p| f.ports[p as usize].guid)
        .collect()
}

/// Cable `per_switch` new single-port hosts named `<name>-<n>` to free
/// ports of every switch whose description starts with `prefix`.
pub fn add_hosts(topo: &mut Topology, prefix: &str, per_switch: usize, name: &str) {
    let used = topo.port_links();
    let mut next = topo.nodes.iter().filter(|n| n.kind == NodeKind::Ca).count() + 5000;
    let targets: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].is_switch() && topo.nodes[i].desc.starts_with(prefix))
        .collect();
    for s in targets {
        let free: Vec<u8> = (1..=topo.nodes[s].num_ports)
            .filter(|&p| used[s][p as usize].is_none())
            .take(per_switch)
            .collect();
        assert_eq!(
            free.len(),
            per_switch,
            "switch {} has too few free ports",
            topo.nodes[s].desc
        );
        for p in free {
            let guid = ca_guid(next);
            next += 1;
            let host = topo.nodes.len();
            topo.nodes.push(TopoNode {
                kind: NodeKind::Ca,
                name: ibnetdiscover_id(NodeKind::Ca, guid),
                desc: format!("{name}-{host}"),
                num_ports: 1,
                node_guid: guid,
                sys_guid: guid,
                port_guids: TopoNode::default_port_guids(NodeKind::Ca, guid, 1),
            });
            topo.links.push(TopoLink::new((host, 1), (s, p)));
        }
    }
    topo.canonicalize();
}

/// A scratch directory unique to this test process and `tag`.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smcore-ftree-tests-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Write `text` to `name` in a scratch directory.
pub fn scratch_file(tag: &str, name: &str, text: &str) -> PathBuf {
    let p = scratch_dir(tag).join(name);
    std::fs::write(&p, text).expect("scratch file");
    p
}

/// GUIDs as a GUID file's text.
pub fn guid_file_text(guids: &[u64]) -> String {
    guids.iter().map(|g| format!("0x{g:016x}\n")).collect()
}

/// A TOML string value for a path.
pub fn toml_path(p: &std::path::Path) -> String {
    format!("{:?}", p.display().to_string())
}

/// Port GUIDs of the end ports whose node description `wanted` accepts.
pub fn port_guids_where(f: &sm_abi::FabricSnapshot, wanted: impl Fn(&str) -> bool) -> Vec<u64> {
    f.end_ports()
        .filter(|&p| wanted(f.nodes[f.ports[p as usize].node as usize].description.as_str()))
        .map(|p| f.ports[p as usize].guid)
        .collect()
}
