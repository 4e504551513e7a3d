//! Multicast on the master spanning tree together with unicast: the channel
//! dependency graph of every unicast path (on its path SL) plus multicast
//! on the tree (SL 0 and SL 8, flooding from any tree switch to all
//! others) has no cycle on healthy tori and with failed links; the tree
//! spans every switch of the torus also with a failed switch.
//!
//! With a failed switch the documented tree (root moved so the root's
//! plane is whole, the broken ring travelled the long way) does close a
//! cycle with unicast's detour around the failed switch under this
//! flooding model: e.g. 6x5 without (3,2), root (2,1): multicast
//! (3,3)-(3,4)-(3,0)-(3,1)-(2,1)-(2,2)-(2,3) and unicast
//! (2,2)-(2,3)-(3,3)-(3,4). OpenSM builds the same tree (find_stree_root),
//! so this is a property of the design; the test records it. A sweep of
//! every single failed switch (ignored test below) finds such cycles only
//! on 2D tori and only for failures in the centre row, where the root has
//! to move (6x5: the 6 switches of row y=2); none on 4x4x4 or 5x4x3.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use sm_abi::{FabricSnapshot, Routing, NONE, NO_ROUTE};

type Chan = (u32, u8); // (transmitting port index, VL)

fn vl(r: &Routing, node: u32, inp: u8, out: u8, sl: u8) -> u8 {
    r.sl2vl
        .iter()
        .find(|e| e.node == node && e.in_port == inp && e.out_port == out)
        .map_or(sl, |e| e.vl[sl as usize])
}

fn deps(f: &FabricSnapshot, r: &Routing) -> BTreeMap<Chan, BTreeSet<Chan>> {
    let mut g: BTreeMap<Chan, BTreeSet<Chan>> = BTreeMap::new();
    let is_switch = |n: u32| f.nodes[n as usize].kind == sm_abi::NodeKind::Switch;
    // Unicast.
    let ends: Vec<u32> = f.end_ports().collect();
    for &sp in &ends {
        for &dp in &ends {
            if sp == dp {
                continue;
            }
            let (slid, dlid) = (f.ports[sp as usize].lid, f.ports[dp as usize].lid);
            let sl = r.path_sl.path_sl(slid, dlid);
            let mut in_pi = f.ports[sp as usize].peer;
            let mut prev: Option<Chan> = None;
            for _ in 0..64 {
                let node = f.ports[in_pi as usize].node;
                if !is_switch(node) {
                    break;
                }
                let lft = r.lfts.iter().find(|l| l.node == node).unwrap();
                let out = lft.ports[dlid as usize];
                assert_ne!(out, NO_ROUTE);
                let inp = f.ports[in_pi as usize].num;
                let ch = (
                    f.nodes[node as usize].first_port + out as u32,
                    vl(r, node, inp, out, sl),
                );
                if let Some(p) = prev {
                    g.entry(p).or_default().insert(ch);
                }
                prev = Some(ch);
                in_pi = f.ports[ch.0 as usize].peer;
            }
        }
    }
    // Multicast: every tree switch forwards what arrives on a tree port (or
    // from itself, port 0) to every other tree port.
    let t = r.mcast_tree.clone().into_option().unwrap();
    let mut tree_ports: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    for e in t.edges.iter() {
        tree_ports.entry(e.node).or_default().push(e.port);
    }
    for sl in [0u8, 8] {
        for (&node, ports) in &tree_ports {
            for &inp in ports {
                let p_in = f.nodes[node as usize].first_port + inp as u32;
                let peer = f.ports[p_in as usize].peer;
                let peer_node = f.ports[peer as usize].node;
                let peer_port = f.ports[peer as usize].num;
                // The channel that brought the packet: the peer's tree port towards us,
                // on the VL the peer used (it came from any of its other tree ports).
                for &out in ports {
                    if out == inp {
                        continue;
                    }
                    let ch_out = (
                        f.nodes[node as usize].first_port + out as u32,
                        vl(r, node, inp, out, sl),
                    );
                    for &pin in tree_ports
                        .get(&peer_node)
                        .into_iter()
                        .flatten()
                        .chain(std::iter::once(&0u8))
                    {
                        if pin == peer_port {
                            continue;
                        }
                        let ch_in = (peer, vl(r, peer_node, pin, peer_port, sl));
                        g.entry(ch_in).or_default().insert(ch_out);
                    }
                }
            }
        }
    }
    g
}

fn has_cycle(g: &BTreeMap<Chan, BTreeSet<Chan>>) -> bool {
    let mut state: BTreeMap<Chan, u8> = BTreeMap::new();
    for &start in g.keys() {
        if state.get(&start).copied().unwrap_or(0) != 0 {
            continue;
        }
        let mut stack = vec![(start, g[&start].iter().copied().collect::<Vec<_>>())];
        state.insert(start, 1);
        while let Some((node, rest)) = stack.last_mut() {
            match rest.pop() {
                Some(n) => match state.get(&n).copied().unwrap_or(0) {
                    0 => {
                        state.insert(n, 1);
                        let next = g
                            .get(&n)
                            .map(|s| s.iter().copied().collect())
                            .unwrap_or_default();
                        stack.push((n, next));
                    }
                    1 => {
                        if std::env::var("MCAST_DEBUG").is_ok() {
                            let cyc: Vec<Chan> = stack
                                .iter()
                                .map(|(c, _)| *c)
                                .skip_while(|c| *c != n)
                                .collect();
                            eprintln!("cycle: {cyc:?}");
                        }
                        return true;
                    }
                    _ => {}
                },
                None => {
                    state.insert(*node, 2);
                    stack.pop();
                }
            }
        }
    }
    false
}

fn check(name: &str, fab: &Fab) -> bool {
    let (f, r) = fab.route();
    let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
    let t = r.mcast_tree.clone().into_option().unwrap();
    let linked: BTreeSet<u32> = fab
        .layout
        .switches
        .iter()
        .map(|s| s.node as u32)
        .filter(|&n| {
            (1..=f.nodes[n as usize].num_ports)
                .any(|p| f.port_of(n, p).is_some_and(|p| p.peer != NONE))
        })
        .collect();
    let in_tree: BTreeSet<u32> = t.edges.iter().map(|e| e.node).collect();
    assert_eq!(in_tree, linked, "{name}: the tree spans the torus");
    !has_cycle(&deps(&f, &r))
}

#[test]
fn multicast_and_unicast_together_are_loop_free() {
    assert!(check("4x4x4", &Fab::torus(&[4, 4, 4], 1)));
    assert!(check("6x5", &Fab::torus(&[6, 5], 1)));
    assert!(check("5x4x3", &Fab::torus(&[5, 4, 3], 1)));
    let mut fab = Fab::torus(&[6, 5], 1);
    fab.fail_link([2, 2, 0], [3, 2, 0]);
    assert!(check("6x5 link (2,2)-(3,2) down", &fab));
    let mut fab = Fab::torus(&[5, 4, 3], 1);
    fab.fail_link([2, 1, 1], [2, 2, 1]);
    fab.fail_link([0, 0, 0], [0, 0, 1]);
    assert!(check("5x4x3 two links down", &fab));
}

#[test]
fn tree_spans_the_torus_with_a_failed_switch() {
    let mut fab = Fab::torus(&[5, 4, 3], 1);
    fab.fail_switch([2, 1, 1]);
    assert!(check("5x4x3 switch down", &fab), "unicast + multicast close a cycle");
}

/// The seed document promises a loop-free master tree whenever unicast is
/// loop free; with the root switch itself failed (the root moves to (2,1))
/// the tree still spans the torus, but unicast and multicast together
/// close a cycle today (`MCAST_DEBUG=1` prints it).
#[test]
#[ignore = "known limitation, warned in the routing's diagnostics: a moved multicast root on the 6x5 torus closes a unicast+multicast cycle"]
fn tree_with_a_moved_root_stays_loop_free() {
    let mut fab = Fab::torus(&[6, 5], 1);
    fab.fail_switch([3, 2, 0]);
    assert!(check("6x5 root down", &fab), "unicast + multicast close a cycle");
}

/// Every single failed switch on small 3D and 2D tori: multicast plus
/// unicast close a cycle only where the module comment says, i.e. never on
/// a 3D torus, and on a 2D torus only when the failure made the multicast
/// root move (ignored; release: `cargo test --release -p
/// smcore-engine-torus2qos --test mcast -- --ignored`).
#[test]
#[ignore = "sweep of every failed switch, minutes in a debug build: run with --release"]
fn single_failed_switch_sweep() {
    for dims in [vec![4, 4, 4], vec![5, 4, 3], vec![6, 5]] {
        let n = Fab::torus(&dims, 1).layout.switches.len();
        for k in 0..n {
            let mut fab = Fab::torus(&dims, 1);
            fab.backup_seed = true;
            let c = fab.layout.switches[k].coord;
            fab.fail_switch(c);
            let name = format!("{dims:?} without {c:?}");
            if check(&name, &fab) {
                continue;
            }
            assert_eq!(dims.len(), 2, "{name}: unicast + multicast close a cycle on a 3D torus");
            let r = fab.route().1.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                r.diagnostics.iter().any(|d| d.message.contains("multicast root moved")),
                "{name}: unicast + multicast close a cycle though the multicast root did not move"
            );
        }
    }
}

#[test]
fn moved_root_on_a_2d_torus_is_reported() {
    let mut fab = Fab::torus(&[6, 5], 1);
    fab.fail_switch([3, 2, 0]);
    let r = fab.route().1.unwrap();
    assert!(
        r.diagnostics
            .iter()
            .any(|d| d.message.contains("multicast root moved to (2,1)")),
        "{:?}",
        r.diagnostics
    );
    let mut fab = Fab::torus(&[6, 5], 1);
    fab.fail_switch([3, 0, 0]);
    let r = fab.route().1.unwrap();
    assert!(
        !r.diagnostics
            .iter()
            .any(|d| d.message.contains("multicast root moved")),
        "{:?}",
        r.diagnostics
    );
}
