//! Ties half way round an even ring: the path goes the way that does not
//! cross the dateline, as OpenSM's torus-2QoS routes them (its
//! `ring_dir_idx` and `use_vl1` take the path inside the ring when both
//! ways are as long). More pairs travel on SL 0, and a 4x4x4 torus is free
//! of credit loops even for traffic that ignores the path SL.

mod common;

use common::*;
use sm_abi::{Routing, RoutingEngine};
use smcore_kit::verify::{verify, VerifyOptions};

/// OpenSM's rule for one ring: the path from `a` to `b` wraps round (and
/// so needs the loop VL) only when the wrapping way is strictly shorter.
fn opensm_wraps(a: usize, b: usize, r: usize) -> bool {
    let (s, l) = if a < b { (a, b) } else { (b, a) };
    let inside = l - s;
    let wrapping = s + r - l;
    a != b && wrapping < inside
}

#[test]
fn a_tie_never_crosses_the_dateline() {
    let fab = Fab::torus(&[4, 4, 4], 1);
    let (f, r) = fab.route();
    let r = r.unwrap();
    // Half way along x both ways: through x = 1, never through x = 3.
    assert_eq!(
        fab.coords(&f, &r, [0, 0, 0], [2, 0, 0]),
        vec![[0, 0, 0], [1, 0, 0], [2, 0, 0]]
    );
    assert_eq!(
        fab.coords(&f, &r, [2, 0, 0], [0, 0, 0]),
        vec![[2, 0, 0], [1, 0, 0], [0, 0, 0]]
    );
    assert_eq!(
        fab.coords(&f, &r, [1, 3, 1], [1, 1, 1]),
        vec![[1, 3, 1], [1, 2, 1], [1, 1, 1]]
    );
    assert_eq!(
        fab.coords(&f, &r, [1, 1, 3], [1, 1, 1]),
        vec![[1, 1, 3], [1, 1, 2], [1, 1, 1]]
    );
    // A tie keeps SL 0; the strictly shorter way over the dateline sets
    // the dimension's bit.
    let sl = |a, b| r.path_sl.path_sl(fab.host_lid(&f, a), fab.host_lid(&f, b));
    assert_eq!(sl([0, 0, 0], [2, 0, 0]), 0);
    assert_eq!(sl([3, 0, 0], [1, 0, 0]), 0);
    assert_eq!(sl([3, 0, 0], [0, 0, 0]), 1);
    assert_eq!(sl([0, 3, 0], [0, 0, 0]), 2);
    assert_eq!(sl([0, 0, 0], [3, 3, 3]), 7);
}

/// On the 4x4x4 torus with three hosts per switch, 24,696 of the 36,864
/// host pairs (a host with itself included) travel on SL 0 under OpenSM's
/// rule; "a tie goes +" gave 15,552.
#[test]
fn sl0_pairs_on_four_cubed_are_opensms() {
    let fab = Fab::torus(&[4, 4, 4], 3);
    let (f, r) = fab.route();
    let r = r.unwrap();
    let hosts = f.end_ports().count();
    assert_eq!(hosts, 192);
    // Every pair of distinct hosts by its path SL, against OpenSM's rule
    // applied to the coordinates of their switches.
    let ends: Vec<(u16, [usize; 3])> = f
        .end_ports()
        .map(|p| {
            let port = &f.ports[p as usize];
            let switch_port = &f.ports[port.peer as usize];
            (port.lid, fab.coord_of(switch_port.node))
        })
        .collect();
    let mut sl0 = hosts; // a host to itself
    for &(la, ca) in &ends {
        for &(lb, cb) in &ends {
            if la == lb {
                continue;
            }
            let expected =
                (0..3).fold(0u8, |sl, d| sl | (opensm_wraps(ca[d], cb[d], 4) as u8) << d);
            let got = r.path_sl.path_sl(la, lb);
            assert_eq!(got, expected, "SL from {ca:?} to {cb:?}");
            sl0 += (got == 0) as usize;
        }
    }
    assert_eq!((sl0, hosts * hosts), (24_696, 36_864));
}

/// The LFTs alone, every path on SL 0 and one VL (as traffic that ignores
/// the PathRecord SL would use them): no credit loop on 4x4x4, as
/// ibdmchk finds for OpenSM's tables. The routing with its SLs stays
/// verified as before.
#[test]
fn four_cubed_is_credit_loop_free_on_one_vl() {
    let fab = Fab::torus(&[4, 4, 4], 2);
    let (f, r) = fab.route();
    let r = r.unwrap();
    assert_ok("4x4x4", &f, &r);
    let one_vl = Routing::single_vl(r.lfts.to_vec());
    let v = verify(&f, &one_vl, &VerifyOptions::default());
    assert!(
        v.ok(),
        "4x4x4 on SL 0 alone: {}",
        v.failure().unwrap_or_default()
    );
    assert!(v.pairs > 0);
    // Round a failure one VL is not enough (the long way round a broken
    // ring, the turn VLs), but the path SLs stay the pristine ones.
    let pristine = all_sls(&f, &r);
    let mut broken = Fab::torus(&[4, 4, 4], 2);
    broken.fail_link([1, 2, 2], [2, 2, 2]);
    let fb = broken.snapshot();
    let rb = broken.engine().route(&fb).unwrap();
    assert_ok("4x4x4, link x=1-2 down", &fb, &rb);
    assert_eq!(
        all_sls(&fb, &rb),
        pristine,
        "a failed link changed a path SL"
    );
}
