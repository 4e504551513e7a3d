//! Nue's options (VL budget, auto detection, capping, switch destinations,
//! errors) and the 1-VL case on a 4x4x4 torus.

use sm_abi::{Level, RoutingEngine};
use sm_topology::{gen, lids};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_nue::{Nue, NueConfig, Partitioner};

fn torus(dims: &[usize], hosts: usize) -> sm_abi::FabricSnapshot {
    lids::snapshot(&gen::torus(dims, hosts, false).unwrap().0, 0).unwrap()
}

#[test]
fn four_ary_3_cube_with_one_vl_is_credit_loop_free() {
    let fabric = torus(&[4, 4, 4], 2);
    let nue = Nue::from_config("nue_max_num_vls = 1").unwrap();
    let r = nue.route(&fabric).unwrap();
    assert_eq!(r.vls_used, 1);
    assert!(r.sl2vl.is_empty(), "one layer needs no SL2VL map");
    assert_eq!(r.path_sl.uniform().into_option(), Some(0));
    let v = verify(&fabric, &r, &VerifyOptions::default());
    assert!(v.credit_loops_checked);
    assert!(v.ok(), "{:?}", v.failure());
    assert_eq!(v.unreachable + v.looping, 0);
    assert!(v.pairs > 0);
    // A 4-ring per dimension: Nue detours only rarely (minimal would be
    // the same average; allow a little for the broken cycles).
    let min_avg = v.total_min_hops as f64 / v.pairs as f64;
    assert!(
        v.avg_hops() < min_avg * 1.1,
        "avg hops {} vs minimal {min_avg}",
        v.avg_hops()
    );
}

/// The same tables on a 4x4x4 torus routed by a plain shortest-path rule
/// do have credit loops, so the check above is not vacuous.
#[test]
fn the_torus_has_credit_loops_under_shortest_paths() {
    let fabric = torus(&[4, 4, 4], 1);
    let r = smcore_nue_shortest(&fabric);
    let v = verify(&fabric, &r, &VerifyOptions::default());
    assert!(v.credit_loop.is_some());
}

/// Shortest paths (min hop) from the kit's balancing, for contrast.
fn smcore_nue_shortest(fabric: &sm_abi::FabricSnapshot) -> sm_abi::Routing {
    sm_abi::Routing::single_vl(smcore_kit::balance::min_hop_lfts(fabric))
}

fn auto() -> Nue {
    Nue::from_config("nue_max_num_vls = 0").unwrap()
}

#[test]
fn default_is_one_vl_as_opensm() {
    let r = Nue::from_config("")
        .unwrap()
        .route(&torus(&[3, 3, 3], 1))
        .unwrap();
    assert_eq!(r.vls_used, 1);
}

#[test]
fn auto_uses_the_operational_vls_capped_at_8() {
    let mut fabric = torus(&[3, 3, 3], 2);
    // Generated fabrics operate 8 data VLs.
    let (r, st) = auto().route_with_stats(&fabric).unwrap();
    assert_eq!(st.operational_vls, 8);
    assert_eq!(r.vls_used, 8);
    // 15 operational VLs: auto still stops at 8.
    for p in fabric.ports.iter_mut().filter(|p| p.op_vls > 0) {
        p.op_vls = 15;
    }
    let (r, _) = auto().route_with_stats(&fabric).unwrap();
    assert_eq!(r.vls_used, 8);
    // One port with 2 VLs limits the whole fabric.
    let linked = fabric
        .ports
        .iter()
        .position(|p| p.op_vls > 0 && p.num > 0 && p.is_linked())
        .unwrap();
    fabric.ports[linked].op_vls = 2;
    let (r, st) = auto().route_with_stats(&fabric).unwrap();
    assert_eq!(st.operational_vls, 2);
    assert_eq!(r.vls_used, 2);
    let v = verify(&fabric, &r, &VerifyOptions::default());
    assert!(v.ok(), "{:?}", v.failure());
}

#[test]
fn a_budget_above_the_operational_vls_is_capped_with_a_warning() {
    let mut fabric = torus(&[3, 3, 3], 1);
    for p in fabric.ports.iter_mut().filter(|p| p.op_vls > 0) {
        p.op_vls = 4;
    }
    let r = Nue::from_config("nue_max_num_vls = 12")
        .unwrap()
        .route(&fabric)
        .unwrap();
    assert_eq!(r.vls_used, 4);
    assert!(
        r.diagnostics
            .iter()
            .any(|d| d.level == Level::Warn && d.message.contains("exceeds the 4 operational VLs")),
        "{:?}",
        r.diagnostics
    );
    let v = verify(&fabric, &r, &VerifyOptions::default());
    assert!(v.ok(), "{:?}", v.failure());
    assert_eq!(v.vl_violations, 0);
}

#[test]
fn a_budget_below_the_operational_vls_leaves_the_rest_for_qos() {
    let fabric = torus(&[3, 3, 3], 2);
    let r = Nue::from_config("nue_max_num_vls = 3")
        .unwrap()
        .route(&fabric)
        .unwrap();
    assert_eq!(r.vls_used, 3);
    // SL i -> VL i for all 8 operational VLs, so SLs 3..7 reach VLs 3..7.
    for m in r.sl2vl.iter() {
        for sl in 0..8 {
            assert_eq!(m.vl[sl], sl as u8);
        }
    }
    let v = verify(&fabric, &r, &VerifyOptions::default());
    assert!(v.ok(), "{:?}", v.failure());
    assert!(v.vls_used <= 3);
}

#[test]
fn include_switches_routes_ca_to_switch_deadlock_free() {
    for vls in [1, 4] {
        let fabric = torus(&[4, 3, 3], 1);
        let text = format!("nue_max_num_vls = {vls}\nnue_include_switches = true");
        let r = Nue::from_config(&text).unwrap().route(&fabric).unwrap();
        let opts = VerifyOptions {
            switch_destinations: true,
            ..Default::default()
        };
        let v = verify(&fabric, &r, &opts);
        assert!(v.ok(), "{vls} VLs: {:?}", v.failure());
        // Without the option switch LIDs are reached but outside the layers.
        let plain = Nue::from_config(&format!("nue_max_num_vls = {vls}"))
            .unwrap()
            .route(&fabric)
            .unwrap();
        let reach = verify(
            &fabric,
            &plain,
            &VerifyOptions {
                credit_loops: false,
                switch_destinations: true,
                ..Default::default()
            },
        );
        assert_eq!(reach.unreachable + reach.looping, 0);
    }
}

#[test]
fn bad_option_values_are_clear_errors() {
    for (text, expect) in [
        (
            "nue_max_num_vls = 16",
            "nue_max_num_vls = 16 is out of range",
        ),
        (
            "nue_max_num_vls = -1",
            "nue_max_num_vls = -1 is out of range",
        ),
        (
            "nue_max_num_vls = \"auto\"",
            "nue_max_num_vls must be an integer",
        ),
        (
            "nue_max_num_vls = 2.5",
            "nue_max_num_vls must be an integer",
        ),
        (
            "nue_include_switches = 1",
            "nue_include_switches must be true or false",
        ),
        ("nue_partition = \"metis\"", "nue_partition must be"),
        ("nue_max_num_vls = ", "nue: bad configuration"),
    ] {
        let e = Nue::from_config(text).unwrap_err();
        assert!(e.reason.contains(expect), "{text}: {e}");
    }
    // Other layers' keys are not Nue's business.
    let cfg = Nue::from_config("lmc = 1\nroot_guid_file = \"x\"\nnue_max_num_vls = 0")
        .unwrap()
        .cfg;
    assert_eq!(
        cfg,
        NueConfig {
            max_num_vls: 0,
            include_switches: false,
            partitioner: Partitioner::Grown
        }
    );
}

#[test]
fn no_switches_is_an_error() {
    let fabric = sm_abi::FabricSnapshot {
        nodes: Default::default(),
        ports: Default::default(),
        lmc: 0,
        max_lid: 0,
        sm_node: sm_abi::NONE,
    };
    let e = Nue::default().route(&fabric).unwrap_err();
    assert!(e.reason.contains("no switches"), "{e}");
}

/// With LMC 1 each LID of a port is routed on its own and the weight
/// updates push the second LID onto other links. Where a switch has
/// several shortest next hops towards a host, the two LIDs leave by
/// different ports wherever the first LID's added load outweighs the load
/// already on the links (measured: 34% of such cases with 1 VL, 50% with
/// 8; a copy of the first LID's routes would give 0%).
#[test]
fn lmc_lids_of_a_port_take_different_paths() {
    use smcore_kit::graph::Graph;
    let fabric = lids::snapshot(&gen::torus(&[4, 4, 4], 1, false).unwrap().0, 1).unwrap();
    let r = Nue::from_config("nue_max_num_vls = 1")
        .unwrap()
        .route(&fabric)
        .unwrap();
    let v = verify(&fabric, &r, &VerifyOptions::default());
    assert!(v.ok(), "{:?}", v.failure());
    let g = Graph::new(&fabric);
    let dm = g.distance_matrix();
    let (mut differ, mut total) = (0, 0);
    for p in fabric.end_ports() {
        let lid = fabric.ports[p as usize].lid as usize;
        let home = g.entry_switch(&fabric, p);
        for lft in r.lfts.iter() {
            let s = g.sw_of_node[lft.node as usize];
            if s == home {
                continue;
            }
            let d = dm.get(s, home);
            let choices = g.sw_adj[s as usize]
                .iter()
                .filter(|&&n| dm.get(n, home) + 1 == d)
                .count();
            if choices < 2 {
                continue;
            }
            total += 1;
            if lft.ports[lid] != lft.ports[lid + 1] {
                differ += 1;
            }
        }
    }
    assert!(total > 0);
    assert!(
        differ * 4 > total,
        "only {differ} of {total} switch/port pairs with a choice split the two LIDs"
    );
}
