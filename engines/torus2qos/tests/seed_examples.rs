//! The examples of the torus-2QoS documentation (seeds 002/003/004), on
//! generated tori whose coordinates are the pictures' coordinates (the
//! generated torus-2QoS.conf seeds at (0,0) with no dateline offset, so the
//! dateline lies between x=5 and x=0 and between y=radix-1 and y=0).

mod common;

use std::collections::BTreeSet;

use common::*;
use sm_abi::RoutingEngine;

// 6x5 torus of the unicast pictures:
//   m=(0,1) S=(1,1) n=(2,1) T=(3,1) o=(4,1) p=(5,1)
//   I=(2,2) r=(3,2)  D=(3,3)
const M: [usize; 3] = [0, 1, 0];
const S: [usize; 3] = [1, 1, 0];
const N: [usize; 3] = [2, 1, 0];
const T: [usize; 3] = [3, 1, 0];
const O: [usize; 3] = [4, 1, 0];
const P: [usize; 3] = [5, 1, 0];
const I: [usize; 3] = [2, 2, 0];
const R: [usize; 3] = [3, 2, 0];
const D: [usize; 3] = [3, 3, 0];

fn six_by_five() -> Fab {
    Fab::torus(&[6, 5], 1)
}

#[test]
fn pristine_path_is_dor() {
    let fab = six_by_five();
    let (f, r) = fab.route();
    let r = r.unwrap();
    assert_eq!(fab.coords(&f, &r, S, D), vec![S, N, T, R, D]);
    assert_ok("6x5", &f, &r);
}

#[test]
fn failed_link_s_n_takes_the_long_way_round() {
    let pristine = six_by_five();
    let (f0, r0) = pristine.route();
    let r0 = r0.unwrap();
    for (a, b) in [(S, N), (N, T)] {
        let mut fab = six_by_five();
        fab.fail_link(a, b);
        let (f, r) = fab.route();
        let r = r.unwrap();
        assert_eq!(
            fab.coords(&f, &r, S, D),
            vec![S, M, P, O, T, R, D],
            "link {a:?}-{b:?} failed"
        );
        assert_ok("6x5 link down", &f, &r);
        assert_eq!(all_sls(&f0, &r0), all_sls(&f, &r), "path SLs changed");
    }
}

#[test]
fn ring_broken_into_two_segments_is_refused() {
    let mut fab = six_by_five();
    fab.fail_link(N, T);
    fab.fail_link(T, O);
    let (_, r) = fab.route();
    let e = r.unwrap_err().to_string();
    assert!(e.contains("x ring at y=1") && e.contains("disjoint"), "{e}");
}

#[test]
fn failed_switch_t_turns_early_at_n() {
    let pristine = six_by_five();
    let (f0, r0) = pristine.route();
    let r0 = r0.unwrap();
    let mut fab = six_by_five();
    fab.fail_switch(T);
    let (f, r) = fab.route();
    let r = r.unwrap();
    let hops = fab.trace(&f, &r, S, fab.host_lid(&f, D));
    let coords: Vec<_> = hops.iter().map(|h| h.0).collect();
    assert_eq!(coords, vec![S, N, I, R, D]);
    // Hop I-r follows the illegal y-x turn at I: VL bit 1.
    let sl = r.path_sl.path_sl(fab.host_lid(&f, S), fab.host_lid(&f, D));
    let (_, inp, out) = hops[2];
    let vl = vl_at(&r, fab.node(I) as u32, inp, out, sl);
    assert_eq!(vl & 2, 2, "VL {vl} at I");
    // Hop r-D does not.
    let (_, inp, out) = hops[3];
    assert_eq!(vl_at(&r, fab.node(R) as u32, inp, out, sl) & 2, 0);
    assert_ok("6x5 T down", &f, &r);
    // Same SLs for every pair that still exists.
    let before: BTreeSet<_> = all_sls(&f0, &r0).into_iter().collect();
    for x in all_sls(&f, &r) {
        assert!(before.contains(&x), "{x:?} changed");
    }
}

// 6x6 torus of the two-failed-switches pictures:
//   m=(0,1) S=(1,1) n=(2,1) T=(3,1) o=(4,1) p=(5,1)
//   q=(2,2) R=(3,2)   I=(2,3) u=(3,3)   D=(3,4)
#[test]
fn failed_switches_adjacent_in_the_last_dimension() {
    let (s, n, t, q, rr, i, u, d) = (
        [1, 1, 0],
        [2, 1, 0],
        [3, 1, 0],
        [2, 2, 0],
        [3, 2, 0],
        [2, 3, 0],
        [3, 3, 0],
        [3, 4, 0],
    );
    let mut fab = Fab::torus(&[6, 6], 1);
    fab.fail_switch(t);
    fab.fail_switch(rr);
    let (f, r) = fab.route();
    let r = r.unwrap();
    let hops = fab.trace(&f, &r, s, fab.host_lid(&f, d));
    let coords: Vec<_> = hops.iter().map(|h| h.0).collect();
    assert_eq!(coords, vec![s, n, q, i, u, d]);
    let sl = r.path_sl.path_sl(fab.host_lid(&f, s), fab.host_lid(&f, d));
    let (_, inp, out) = hops[3];
    assert_eq!(
        vl_at(&r, fab.node(i) as u32, inp, out, sl) & 2,
        2,
        "hop I-u must use a VL with bit 1 set"
    );
    assert_ok("6x6 T,R down", &f, &r);
}

// 6x6 torus, third picture:
//   S=(1,1) n=(2,1) O=(3,1) T=(4,1)   I=(2,2) q=(3,2) r=(4,2)   D=(4,3)
#[test]
fn failed_switches_adjacent_in_x_are_refused() {
    let mut fab = Fab::torus(&[6, 6], 1);
    fab.fail_switch([3, 1, 0]);
    fab.fail_switch([4, 1, 0]);
    let (_, r) = fab.route();
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("(3,1)") && e.contains("(4,1)") && e.contains("adjacent in the x dimension"),
        "{e}"
    );
    // The engine as loaded through the chain would refuse the same way.
    let eng = fab.engine();
    assert!(eng.route(&fab.snapshot()).is_err());
}

type Edges = BTreeSet<([usize; 3], [usize; 3])>;

/// Tree edges as unordered coordinate pairs, and the root.
fn tree_of(fab: &Fab) -> ([usize; 3], Edges) {
    let (f, r) = fab.route();
    let r = r.unwrap();
    let t = r.mcast_tree.clone().into_option().expect("a master tree");
    let mut edges = BTreeSet::new();
    for e in t.edges.iter() {
        let p = f.port_of(e.node, e.port).unwrap();
        let peer = &f.ports[p.peer as usize];
        let (a, b) = (fab.coord_of(e.node), fab.coord_of(peer.node));
        edges.insert(if a < b { (a, b) } else { (b, a) });
    }
    (fab.coord_of(t.root), edges)
}

fn link(a: [usize; 2], b: [usize; 2]) -> ([usize; 3], [usize; 3]) {
    let (a, b) = ([a[0], a[1], 0], [b[0], b[1], 0]);
    if a < b {
        (a, b)
    } else {
        (b, a)
    }
}

/// The pristine picture: x line on y=2 without wrap, y lines on every x without wrap.
fn pristine_tree_edges() -> Edges {
    let mut e = BTreeSet::new();
    for x in 0..5 {
        e.insert(link([x, 2], [x + 1, 2]));
    }
    for x in 0..6 {
        for y in 0..4 {
            e.insert(link([x, y], [x, y + 1]));
        }
    }
    e
}

#[test]
fn master_tree_pristine() {
    let (root, edges) = tree_of(&six_by_five());
    assert_eq!(root, [3, 2, 0]);
    assert_eq!(edges, pristine_tree_edges());
}

#[test]
fn master_tree_with_failed_link() {
    // Link (2,2)-(3,2) failed: the y=2 line wraps 5-0 instead.
    let mut fab = six_by_five();
    fab.fail_link([2, 2, 0], [3, 2, 0]);
    let (root, edges) = tree_of(&fab);
    assert_eq!(root, [3, 2, 0]);
    let mut want = pristine_tree_edges();
    want.remove(&link([2, 2], [3, 2]));
    want.insert(link([5, 2], [0, 2]));
    assert_eq!(edges, want);
}

#[test]
fn master_tree_with_failed_root() {
    // Switch (3,2) failed: root (2,1), x line on y=1, column x=3 runs
    // 1-0, wraps 0-4, then 4-3.
    let mut fab = six_by_five();
    fab.fail_switch([3, 2, 0]);
    let (root, edges) = tree_of(&fab);
    assert_eq!(root, [2, 1, 0]);
    let mut want = BTreeSet::new();
    for x in 0..5 {
        want.insert(link([x, 1], [x + 1, 1]));
    }
    for x in [0, 1, 2, 4, 5] {
        for y in 0..4 {
            want.insert(link([x, y], [x, y + 1]));
        }
    }
    want.insert(link([3, 1], [3, 0]));
    want.insert(link([3, 0], [3, 4]));
    want.insert(link([3, 4], [3, 3]));
    assert_eq!(edges, want);
}
