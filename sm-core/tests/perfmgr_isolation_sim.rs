//! `perfmgr_isolate_ports` on the embedded fabric (issue 32, item 3): the
//! SM applies the isolation policy's requests only where it keeps every
//! node it reaches — never its own cable, never its leaf's only uplink,
//! never a host's only cable — and enables an isolated link again.

use sm_abi::NodeKind;
use sm_core::perfmgr::isolation::{apply, keeps_sm_connected, Action, Request};
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{self, Guid2Lid, SmpClient, SweepOptions, SweepOutcome};
use sm_mad::PhysState;
use sm_topology::{gen, Topology};

fn run(fabric: &mut SimFabric, g2l: &mut Guid2Lid) -> SweepOutcome {
    let mut port = SimPort::new(fabric);
    sweep::sweep(&mut port, &SweepOptions::default(), g2l).expect("the SM's own node answers")
}

fn peer(topo: &Topology, end: (usize, u8)) -> (usize, u8) {
    topo.links
        .iter()
        .find_map(|l| {
            if l.a == end {
                Some(l.b)
            } else if l.b == end {
                Some(l.a)
            } else {
                None
            }
        })
        .expect("cabled")
}

fn uplinks(topo: &Topology, leaf: usize) -> Vec<u8> {
    (1..=topo.nodes[leaf].num_ports)
        .filter(|&p| {
            topo.links
                .iter()
                .any(|l| l.a == (leaf, p) || l.b == (leaf, p))
        })
        .filter(|&p| topo.nodes[peer(topo, (leaf, p)).0].kind == NodeKind::Switch)
        .collect()
}

fn request(topo: &Topology, switch: usize, port: u8, action: Action) -> Request {
    Request {
        switch_guid: topo.nodes[switch].node_guid,
        port,
        action,
    }
}

fn apply_on(sim: &mut SimFabric, out: &SweepOutcome, requests: &[Request]) -> bool {
    let mut port = SimPort::new(sim);
    let mut client = SmpClient::new(&mut port, 1);
    apply(&out.fabric, requests, &mut client)
}

fn disabled(sim: &SimFabric, node: usize, port: u8) -> bool {
    sim.held_port_info(node, port)
        .is_some_and(|i| i.port_physical_state == PhysState::Disabled)
        || sim.port_state(node, port) == Some(sm_mad::PortState::Down)
}

#[test]
fn a_link_the_sm_needs_is_never_isolated() {
    // One spine: every link is the only way to something.
    let topo = gen::fat_tree_2level(2, 1, 2, 1).expect("fat tree");
    let sm = topo
        .nodes
        .iter()
        .position(|n| n.kind == NodeKind::Ca)
        .expect("a host");
    let mut sim = SimFabric::from_topology(&topo, sm, 1).expect("sim");
    let mut g2l = Guid2Lid::default();
    let out = run(&mut sim, &mut g2l);
    let nodes = out.fabric.nodes.len();
    assert_eq!(nodes, topo.nodes.len());
    let (sm_leaf, sm_leaf_port) = peer(&topo, (sm, 1));
    let up = uplinks(&topo, sm_leaf)[0];
    let other_host = topo
        .nodes
        .iter()
        .enumerate()
        .position(|(i, n)| i != sm && n.kind == NodeKind::Ca && peer(&topo, (i, 1)).0 == sm_leaf)
        .expect("another host on the SM's leaf");
    let (_, host_port) = peer(&topo, (other_host, 1));
    for (what, port) in [
        ("the SM's own cable", sm_leaf_port),
        ("the SM leaf's only uplink", up),
        ("a host's only cable", host_port),
    ] {
        assert!(
            !apply_on(
                &mut sim,
                &out,
                &[request(&topo, sm_leaf, port, Action::Disable)]
            ),
            "{what}: nothing Set"
        );
        assert!(!disabled(&sim, sm_leaf, port), "{what}: still up");
    }
    let again = run(&mut sim, &mut g2l);
    assert_eq!(
        again.fabric.nodes.len(),
        nodes,
        "the SM still reaches every node"
    );
}

#[test]
fn a_redundant_link_is_isolated_one_of_two_only_and_enabled_again() {
    // Two spines, two uplinks per leaf: each uplink has a twin.
    let topo = gen::fat_tree_2level(2, 2, 2, 2).expect("fat tree");
    let sm = topo
        .nodes
        .iter()
        .position(|n| n.kind == NodeKind::Ca)
        .expect("a host");
    let mut sim = SimFabric::from_topology(&topo, sm, 1).expect("sim");
    let mut g2l = Guid2Lid::default();
    let out = run(&mut sim, &mut g2l);
    let nodes = out.fabric.nodes.len();
    let (sm_leaf, _) = peer(&topo, (sm, 1));
    let ups = uplinks(&topo, sm_leaf);
    assert_eq!(ups.len(), 2);
    // Both asked at once: the first goes, the second would cut the SM off
    // from every other leaf.
    let both: Vec<Request> = ups
        .iter()
        .map(|&p| request(&topo, sm_leaf, p, Action::Disable))
        .collect();
    assert!(apply_on(&mut sim, &out, &both));
    assert!(disabled(&sim, sm_leaf, ups[0]), "the first uplink isolated");
    assert!(!disabled(&sim, sm_leaf, ups[1]), "the second kept");
    let after = run(&mut sim, &mut g2l);
    assert_eq!(after.fabric.nodes.len(), nodes, "every node still reached");
    // Now the remaining uplink is needed.
    assert!(!apply_on(&mut sim, &after, &both[1..]));
    assert!(!keeps_sm_connected(
        &after.fabric,
        &[(
            after
                .fabric
                .find(topo.nodes[sm_leaf].node_guid)
                .expect("leaf"),
            ups[1]
        )]
    ));
    // The hold over: enabled again, and the link comes back.
    assert!(apply_on(
        &mut sim,
        &after,
        &[request(&topo, sm_leaf, ups[0], Action::Enable)]
    ));
    assert!(!disabled(&sim, sm_leaf, ups[0]), "enabled again");
    let back = run(&mut sim, &mut g2l);
    assert_eq!(
        back.fabric.links().len(),
        topo.links.len(),
        "every link back"
    );
    // An Enable for a port that is not disabled sends nothing.
    assert!(!apply_on(
        &mut sim,
        &back,
        &[request(&topo, sm_leaf, ups[1], Action::Enable)]
    ));
}
