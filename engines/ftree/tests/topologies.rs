//! Fat trees that are not complete: missing CAs and leaves, missing links
//! (with a root file), oversubscription, CAs on the spines with compute and
//! I/O node files; and fabrics that are not fat trees at all.

mod common;

use common::*;
use sm_abi::{Level, RoutingEngine, NO_ROUTE};
use sm_topology::{gen, Topology};
use smcore_ftree::{Ftree, FtreeConfig};

fn engine(cfg: FtreeConfig) -> Ftree {
    Ftree::new(cfg)
}

/// Drop the cables of the hosts named in `hosts`.
fn without_hosts(t: &Topology, hosts: &[&str]) -> Topology {
    let mut t = t.clone();
    let gone: Vec<usize> = hosts
        .iter()
        .map(|h| t.find_node_by_desc(h).expect("host"))
        .collect();
    t.links.retain(|l| !gone.iter().any(|&g| l.touches(g)));
    t
}

#[test]
fn missing_cas_keep_every_pair_routed() {
    // Half-populated leaves, then a leaf with a single host left.
    let t = gen::kary_ntree(4, 3, 2).unwrap();
    route_ok(
        &Ftree::default(),
        &snap(&t),
        "4-ary-3-tree with 2 hosts per leaf",
    );
    let t = without_hosts(
        &gen::kary_ntree(4, 3, 4).unwrap(),
        &["host-0", "host-1", "host-2", "host-9"],
    );
    route_ok(
        &Ftree::default(),
        &snap(&t),
        "4-ary-3-tree with 4 hosts missing",
    );
}

#[test]
fn a_leaf_without_cas_is_still_crossed() {
    let base = gen::fat_tree_2level(6, 3, 4, 3).unwrap();
    let t = without_hosts(&base, &["host-4", "host-5", "host-6", "host-7"]);
    route_ok(&Ftree::default(), &snap(&t), "fat tree with an empty leaf");
}

#[test]
fn missing_links_route_with_a_root_file_and_without() {
    let mut routed = 0;
    for (name, base) in [
        ("4-ary-3-tree", gen::kary_ntree(4, 3, 4).unwrap()),
        ("fat-tree-6x3", gen::fat_tree_2level(6, 3, 4, 3).unwrap()),
        (
            "fat-tree-8x4-2links",
            gen::fat_tree_2level(8, 4, 8, 8).unwrap(),
        ),
    ] {
        for seed in 1..=3 {
            let (t, _) = gen::with_faults(&base, 2, 0, seed).unwrap();
            if !t.is_connected() {
                continue;
            }
            let f = snap(&t);
            let what = format!("{name} seed {seed} minus 2 links");
            // Without a root file: routed as a degraded fat tree, the
            // pure-tree rule it breaks in the note.
            let (r, _) = route_ok_ca(&Ftree::default(), &f, &what);
            assert!(
                r.diagnostics
                    .iter()
                    .any(|d| d.message.contains("degraded fat tree")
                        && d.message.contains("pure fat tree")),
                "{what}: {:?}",
                r.diagnostics
            );
            let roots = scratch_file(
                &what.replace(' ', "_"),
                "roots",
                &guid_file_text(&guids_of(&f, "spine")),
            );
            let eng = engine(FtreeConfig {
                root_guid_file: Some(roots),
                ..Default::default()
            });
            route_ok_ca(&eng, &f, &what);
            routed += 1;
        }
    }
    assert!(routed >= 6, "only {routed} faulty fabrics were connected");
}

#[test]
fn a_dead_spine_routes_with_a_root_file() {
    let base = gen::kary_ntree(4, 3, 4).unwrap();
    let (t, _) = gen::with_faults(&base, 0, 1, 3).unwrap();
    let f = snap(&t);
    let roots = scratch_file(
        "dead-spine",
        "roots",
        &guid_file_text(&guids_of(&f, "spine")),
    );
    let eng = engine(FtreeConfig {
        root_guid_file: Some(roots),
        ..Default::default()
    });
    // A dead leaf strands its hosts; a dead upper switch must not cost a pair.
    let (_, v) = route_ok_ca(&eng, &f, "4-ary-3-tree minus a switch");
    assert_eq!(v.unreachable, 0);
}

#[test]
fn io_nodes_on_the_spines() {
    let mut t = gen::kary_ntree(4, 3, 4).unwrap();
    add_hosts(&mut t, "spine", 1, "io");
    let f = snap(&t);
    let cns = scratch_file("io", "cns", &guid_file_text(&ca_port_guids(&f, "host")));
    let ios = scratch_file("io", "ios", &guid_file_text(&ca_port_guids(&f, "io")));

    // All CAs as compute nodes: spines and leaves both rank as leaves and
    // the tree's up/down rules cannot join them.
    let e = Ftree::default().route(&f).unwrap_err();
    assert!(e.reason.contains("io_guid_file"), "{e}");

    // Compute nodes named, I/O nodes without reverse hops: CN <-> I/O is
    // routed, but I/O <-> I/O needs a down-up turn, so the engine says so.
    let cfg = FtreeConfig {
        cn_guid_file: Some(cns.clone()),
        io_guid_file: Some(ios.clone()),
        ..Default::default()
    };
    let e = engine(cfg.clone()).route(&f).unwrap_err();
    assert!(e.reason.contains("max_reverse_hops"), "{e}");

    // Two reverse hops reach every spine from every spine.
    let eng = engine(FtreeConfig {
        max_reverse_hops: 2,
        ..cfg.clone()
    });
    let r = eng.route(&f).unwrap_or_else(|e| panic!("{e}"));
    let v = smcore_kit::verify::verify(&f, &r, &smcore_kit::VerifyOptions::default());
    assert_eq!(
        v.unreachable + v.looping,
        0,
        "{}",
        v.failure().unwrap_or_default()
    );
    // Reverse hops turn down then up; on their own SL they close no credit loop.
    assert!(v.credit_loop.is_none(), "{:?}", v.credit_loop);
    assert_eq!(r.vls_used, 2);
    let io_lid = f.ports[f
        .end_ports()
        .find(|&p| ca_port_guids(&f, "io").contains(&f.ports[p as usize].guid))
        .unwrap() as usize]
        .lid;
    let host_lid = f.ports[f
        .end_ports()
        .find(|&p| ca_port_guids(&f, "host").contains(&f.ports[p as usize].guid))
        .unwrap() as usize]
        .lid;
    assert_eq!(r.path_sl.path_sl(host_lid, io_lid), 1);
    assert_eq!(r.path_sl.path_sl(io_lid, host_lid), 0);

    // A huge credit is capped (and repeat visits are pruned, so it stays quick).
    let big = engine(FtreeConfig {
        max_reverse_hops: 1000,
        ..cfg.clone()
    });
    let rb = big.route(&f).unwrap_or_else(|e| panic!("{e}"));
    assert!(rb
        .diagnostics
        .iter()
        .any(|d| d.level == Level::Warn && d.message.contains("capped")));
    let vb = smcore_kit::verify::verify(&f, &rb, &smcore_kit::VerifyOptions::default());
    assert!(vb.ok(), "{}", vb.failure().unwrap_or_default());

    // With a single data VL the split is impossible: a warning says so.
    let mut one_vl = f.clone();
    for p in one_vl.ports.iter_mut() {
        p.op_vls = p.op_vls.min(1);
    }
    let r1 = eng.route(&one_vl).unwrap_or_else(|e| panic!("{e}"));
    assert!(r1
        .diagnostics
        .iter()
        .any(|d| d.level == Level::Warn && d.message.contains("credit loops")));
    assert_eq!(r1.vls_used, 1);

    // The same with the roots given.
    let roots = scratch_file("io", "roots", &guid_file_text(&guids_of(&f, "spine")));
    let eng = engine(FtreeConfig {
        root_guid_file: Some(roots),
        max_reverse_hops: 2,
        ..cfg
    });
    let r = eng.route(&f).unwrap_or_else(|e| panic!("{e}"));
    let v = smcore_kit::verify::verify(&f, &r, &smcore_kit::VerifyOptions::default());
    assert_eq!(
        v.unreachable + v.looping,
        0,
        "{}",
        v.failure().unwrap_or_default()
    );
}

#[test]
fn compute_nodes_only_on_some_leaves() {
    // Hosts of the first four leaves are compute nodes; the rest are
    // ordinary CAs on the same level, routed after them.
    let t = gen::kary_ntree(4, 3, 4).unwrap();
    let f = snap(&t);
    let first = port_guids_where(&f, |d| (0..16).any(|h| d == format!("host-{h}")));
    assert_eq!(first.len(), 16);
    let cns = scratch_file("some-cn", "cns", &guid_file_text(&first));
    let (r, _) = route_ok(
        &engine(FtreeConfig {
            cn_guid_file: Some(cns),
            ..Default::default()
        }),
        &f,
        "partial CNs",
    );
    assert!(
        r.diagnostics
            .iter()
            .any(|d| d.message.contains("16 compute nodes")),
        "{:?}",
        r.diagnostics
    );
}

#[test]
fn irregular_fabrics_are_refused() {
    let cases = [
        ("torus", gen::torus(&[4, 4], 2, false).unwrap().0),
        ("mesh", gen::torus(&[3, 3], 1, true).unwrap().0),
        ("hypercube", gen::hypercube(3, 2).unwrap()),
        ("random", gen::random_irregular(12, 8, 2, 6, 5).unwrap()),
    ];
    for (name, t) in cases {
        let e = Ftree::default().route(&snap(&t)).unwrap_err();
        assert!(e.reason.starts_with("ftree: "), "{name}: {e}");
        println!("{name}: {e}");
    }
}

#[test]
fn uneven_uplinks_route_as_a_degraded_tree_and_too_deep_is_refused() {
    // Four uplinks over three spines: a leaf's groups have 2, 1 and 1
    // ports. Not a pure tree (OpenSM refuses it), still a fat tree.
    let t = gen::fat_tree_2level(6, 3, 4, 4).unwrap();
    let (r, _) = route_ok_ca(&Ftree::default(), &snap(&t), "uneven uplinks");
    assert!(
        r.diagnostics
            .iter()
            .any(|d| d.message.contains("degraded fat tree") && d.message.contains("port groups")),
        "{:?}",
        r.diagnostics
    );
    // Too deep: a 2-ary 9-tree has nine levels.
    let t = gen::kary_ntree(2, 9, 1).unwrap();
    let e = Ftree::default().route(&snap(&t)).unwrap_err();
    assert!(e.reason.contains("9 level(s)"), "{e}");
}

/// Follow LFTs from switch node `from` to `lid`; true when it arrives.
fn switch_reaches(f: &sm_abi::FabricSnapshot, r: &sm_abi::Routing, from: u32, lid: u16) -> bool {
    let mut node = from;
    for _ in 0..32 {
        let Some(lft) = r.lfts.iter().find(|l| l.node == node) else {
            return false;
        };
        let port = lft.ports.get(lid as usize).copied().unwrap_or(NO_ROUTE);
        if port == NO_ROUTE {
            return false;
        }
        if port == 0 {
            return f.ports[f.nodes[node as usize].first_port as usize].lid == lid;
        }
        let p = &f.ports[(f.nodes[node as usize].first_port + port as u32) as usize];
        node = f.ports[p.peer as usize].node;
        if f.nodes[node as usize].kind != sm_abi::NodeKind::Switch {
            return false;
        }
    }
    false
}

#[test]
fn connect_roots_joins_every_switch_to_every_switch() {
    let f = snap(&gen::kary_ntree(4, 3, 4).unwrap());
    let switches: Vec<u32> = f.switches().collect();
    let lid = |s: u32| f.ports[f.nodes[s as usize].first_port as usize].lid;
    let count = |r: &sm_abi::Routing| {
        let mut missing = 0;
        for &a in &switches {
            for &b in &switches {
                if !switch_reaches(&f, r, a, lid(b)) {
                    missing += 1;
                }
            }
        }
        missing
    };
    let (plain, _) = route_ok(&Ftree::default(), &f, "plain");
    assert!(
        count(&plain) > 0,
        "up/down alone should leave some switch pairs apart"
    );
    let (joined, _) = route_ok(
        &engine(FtreeConfig {
            connect_roots: true,
            ..Default::default()
        }),
        &f,
        "connect_roots",
    );
    assert_eq!(count(&joined), 0);
}

#[test]
fn guid_file_problems() {
    let f = snap(&gen::kary_ntree(4, 2, 4).unwrap());
    let mut text = guid_file_text(&guids_of(&f, "spine"));
    text.push_str("not-a-guid\n");
    let roots = scratch_file("guids", "roots", &text);
    let (r, _) = route_ok(
        &engine(FtreeConfig {
            root_guid_file: Some(roots.clone()),
            ..Default::default()
        }),
        &f,
        "roots",
    );
    let warn = r
        .diagnostics
        .iter()
        .find(|d| d.level == Level::Warn && d.message.contains("not-a-guid"));
    let warn = warn.unwrap_or_else(|| panic!("no warning: {:?}", r.diagnostics));
    assert!(
        warn.message.contains(&format!("{}:", roots.display())),
        "{}",
        warn.message
    );

    // GUIDs naming nothing in the fabric are warnings, not errors.
    let mut text = guid_file_text(&guids_of(&f, "spine"));
    text.push_str("0x00000000deadbeef\n");
    let roots = scratch_file("guids", "roots-stranger", &text);
    let mut cn_guids = ca_port_guids(&f, "host");
    cn_guids.push(0xdead);
    let cns = scratch_file("guids", "cns-stranger", &guid_file_text(&cn_guids));
    let cfg = FtreeConfig {
        root_guid_file: Some(roots),
        cn_guid_file: Some(cns),
        ..Default::default()
    };
    let (r, _) = route_ok(&engine(cfg), &f, "strangers");
    let warns: Vec<&str> = r
        .diagnostics
        .iter()
        .filter(|d| d.level == Level::Warn)
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        warns
            .iter()
            .any(|w| w.contains("0x00000000deadbeef is not a switch")),
        "{warns:?}"
    );
    assert!(
        warns.iter().any(|w| w.contains("cn_guid_file: 1 GUID(s)")),
        "{warns:?}"
    );

    let empty = scratch_file("guids", "empty", "# nothing\n");
    let e = engine(FtreeConfig {
        root_guid_file: Some(empty),
        ..Default::default()
    })
    .route(&f)
    .unwrap_err();
    assert!(e.reason.contains("no valid GUID"), "{e}");
    let stranger = scratch_file("guids", "stranger", "0x1234\n");
    let e = engine(FtreeConfig {
        root_guid_file: Some(stranger),
        ..Default::default()
    })
    .route(&f)
    .unwrap_err();
    assert!(e.reason.contains("root_guid_file"), "{e}");
    let e = engine(FtreeConfig {
        cn_guid_file: Some("/nonexistent/cn".into()),
        ..Default::default()
    })
    .route(&f)
    .unwrap_err();
    assert!(e.reason.contains("/nonexistent/cn"), "{e}");
    let e = Ftree::from_config("max_reverse_hops = \"x\"").unwrap_err();
    assert!(e.reason.contains("ftree"), "{e}");
}
