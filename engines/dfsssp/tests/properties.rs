//! Properties beyond conformance: parallel
//! cables, LMC path diversity, the 3D torus within 8 VLs, cn/io priority,
//! clear failure when the VLs do not suffice, the path SL oracle and the
//! ABI exports.

use sm_abi::abi_stable::std_types::RStr;
use sm_abi::{FabricSnapshot, NodeKind, Routing, RoutingEngine, NONE};
use sm_topology::{gen, lids, TopologyBuilder};
use smcore_dfsssp::{Dfsssp, Sssp, SsspConfig};
use smcore_kit::conformance::cases;
use smcore_kit::verify::{verify, VerifyOptions};

fn fabric(name: &str, lmc: u8) -> FabricSnapshot {
    cases(lmc)
        .unwrap()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .fabric
}

#[test]
fn parallel_cables_share_the_load() {
    // 4 leaves, 2 spines, 4 uplinks per leaf: two parallel cables to each spine.
    let f = fabric("fat-tree-4x2-h8-u4-parallel", 0);
    let r = Sssp::default().route(&f).unwrap();
    let v = verify(
        &f,
        &r,
        &VerifyOptions {
            credit_loops: false,
            ..Default::default()
        },
    );
    for (i, n) in f.nodes.iter().enumerate() {
        if n.kind != NodeKind::Switch || !n.description.starts_with("leaf") {
            continue;
        }
        let up: Vec<u64> = (1..=n.num_ports)
            .map(|p| n.first_port + p as u32)
            .filter(|&pi| {
                let peer = f.ports[pi as usize].peer;
                peer != NONE
                    && f.nodes[f.ports[peer as usize].node as usize].kind == NodeKind::Switch
            })
            .map(|pi| v.port_load[pi as usize])
            .collect();
        assert_eq!(up.len(), 4, "leaf {i}");
        let (lo, hi) = (*up.iter().min().unwrap(), *up.iter().max().unwrap());
        assert!(lo > 0 && hi - lo <= hi / 8, "leaf {i}: uplink loads {up:?}");
    }
}

#[test]
fn lmc_lids_of_a_port_take_different_paths() {
    // With LMC 1 on a fat tree with 3 spines the two LIDs of a host on
    // another leaf leave a leaf by different uplinks, for every such host.
    let f = fabric("fat-tree-6x3-h4", 1);
    let r = Sssp::default().route(&f).unwrap();
    let mut checked = 0;
    for lft in r
        .lfts
        .iter()
        .filter(|l| f.nodes[l.node as usize].description.starts_with("leaf"))
    {
        for p in f.end_ports() {
            let peer = f.ports[p as usize].peer;
            if f.ports[peer as usize].node == lft.node {
                continue;
            }
            let base = f.ports[p as usize].lid as usize;
            assert_ne!(
                lft.ports[base],
                lft.ports[base + 1],
                "host port {p} from leaf {}",
                lft.node
            );
            checked += 1;
        }
    }
    assert!(checked > 50);
}

fn torus(dims: &[usize], hosts: usize) -> FabricSnapshot {
    lids::snapshot(&gen::torus(dims, hosts, false).unwrap().0, 0).unwrap()
}

#[test]
fn dfsssp_routes_a_5x5x5_torus_within_8_vls() {
    // The 6x6x6 torus with 2 hosts per switch (OpenSM 3.3.23: "needs 9
    // VLs") is the release benchmark in examples/route_time.rs; 5x5x5 keeps
    // the debug test quick and still needs several layers.
    let f = torus(&[5, 5, 5], 2);
    let r = Dfsssp::default()
        .route(&f)
        .unwrap_or_else(|e| panic!("{e}"));
    let v = verify(&f, &r, &VerifyOptions::default());
    assert!(v.ok(), "{:?}", v.failure());
    assert!(
        r.vls_used >= 2 && r.vls_used <= 8,
        "vls_used {}",
        r.vls_used
    );
    assert!(v.vls_used <= 8);
    let plain = Sssp::default().route(&f).unwrap();
    assert!(verify(&f, &plain, &VerifyOptions::default())
        .credit_loop
        .is_some());
}

#[test]
fn dfsssp_path_sl_table_matches_sl2vl_identity() {
    let f = torus(&[4, 4, 4], 1);
    let r = Dfsssp::default().route(&f).unwrap();
    assert!(r.vls_used > 1);
    assert!(r.path_sl.uniform().into_option().is_none());
    // SL i is VL i on every switch hop for the SLs in use.
    assert!(!r.sl2vl.is_empty());
    for t in r.sl2vl.iter() {
        for sl in 0..r.vls_used {
            assert_eq!(t.vl[sl as usize], sl);
        }
        assert!(t.vl.iter().all(|&vl| vl < r.vls_used));
    }
    // Every CA pair gets an SL below vls_used.
    let ends: Vec<u16> = f.end_ports().map(|p| f.ports[p as usize].lid).collect();
    let mut seen = vec![false; r.vls_used as usize];
    for &s in &ends {
        for &d in &ends {
            let sl = r.path_sl.path_sl(s, d);
            assert!(sl < r.vls_used, "{s}->{d}: SL {sl}");
            seen[sl as usize] = true;
        }
    }
    // Switch-sourced paths may be alone on some VL; CA pairs use several.
    assert!(
        seen.iter().filter(|&&x| x).count() >= 2,
        "SLs used {seen:?}"
    );
    // Unknown LIDs answer SL 0 instead of panicking.
    assert_eq!(r.path_sl.path_sl(0, 60000), 0);
}

#[test]
fn dfsssp_fails_clearly_when_the_vls_do_not_suffice() {
    let mut f = torus(&[4, 4, 4], 1);
    for p in f.ports.iter_mut() {
        p.op_vls = p.op_vls.min(1);
    }
    let e = Dfsssp::default().route(&f).unwrap_err();
    assert!(
        e.reason.contains("need more than the 1 virtual layers"),
        "{e}"
    );
    // sssp does not care.
    assert!(Sssp::default().route(&f).is_ok());
    // A fat tree's host-to-host routes need no second layer, but the
    // routes to switch LIDs turn down and up again: 2 VLs do.
    let mut t = fabric("4-ary-3-tree", 0);
    for p in t.ports.iter_mut() {
        p.op_vls = p.op_vls.min(2);
    }
    let r = Dfsssp::default()
        .route(&t)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(verify(&t, &r, &VerifyOptions::default()).ok());
    assert!(r.vls_used <= 2);
}

/// The doc's example: compute nodes and I/O nodes on one switch, two
/// cables to the switch with the other compute nodes.
fn io_fabric() -> FabricSnapshot {
    let mut b = TopologyBuilder::new();
    let s1 = b.add_switch("sw1", 8).unwrap();
    let s2 = b.add_switch("sw2", 8).unwrap();
    let mut cas = Vec::new();
    for name in ["cn1", "cn2", "cn3", "io1", "cn4", "io2", "cn5"] {
        cas.push(b.add_ca(name, 1).unwrap());
    }
    for (i, &c) in cas[..3].iter().enumerate() {
        b.link((c, 1), (s1, i as u8 + 1)).unwrap();
    }
    for (i, &c) in cas[3..].iter().enumerate() {
        b.link((c, 1), (s2, i as u8 + 1)).unwrap();
    }
    b.link((s1, 7), (s2, 7)).unwrap();
    b.link((s1, 8), (s2, 8)).unwrap();
    lids::snapshot(&b.finish().unwrap(), 0).unwrap()
}

fn uplinks_to(f: &FabricSnapshot, r: &Routing, names: &[&str]) -> Vec<u8> {
    let sw1 = f.nodes.iter().position(|n| n.description == "sw1").unwrap() as u32;
    let lft = r.lfts.iter().find(|l| l.node == sw1).unwrap();
    names
        .iter()
        .map(|name| {
            let n = f.nodes.iter().position(|n| n.description == *name).unwrap();
            let lid = f.ports[f.nodes[n].first_port as usize + 1].lid;
            lft.ports[lid as usize]
        })
        .collect()
}

#[test]
fn io_guid_file_balances_io_nodes_first() {
    let f = io_fabric();
    // Without the file, sw2's ports are routed in port order and both I/O
    // nodes land on the same cable.
    let plain = uplinks_to(&f, &Sssp::default().route(&f).unwrap(), &["io1", "io2"]);
    assert_eq!(plain[0], plain[1], "{plain:?}");
    let dir = tempfile::tempdir().unwrap();
    let io = dir.path().join("io.guids");
    let guid = |name: &str| {
        let n = f.nodes.iter().position(|n| n.description == name).unwrap();
        f.ports[f.nodes[n].first_port as usize + 1].guid
    };
    std::fs::write(
        &io,
        format!(
            "# I/O nodes\n0x{:016x}\n0x{:016x}\nbogus\n",
            guid("io1"),
            guid("io2")
        ),
    )
    .unwrap();
    let cfg = format!(
        "io_guid_file = {:?}\nlmc = 0\nunknown_key = 3\n",
        io.display().to_string()
    );
    for engine in [
        Box::new(Sssp::from_config(&cfg).unwrap()) as Box<dyn RoutingEngine>,
        Box::new(Dfsssp::from_config(&cfg).unwrap()),
    ] {
        let r = engine.route(&f).unwrap();
        let ports = uplinks_to(&f, &r, &["io1", "io2"]);
        assert_ne!(ports[0], ports[1], "I/O nodes share a cable: {ports:?}");
        assert!(
            r.diagnostics
                .iter()
                .any(|d| d.message.contains("io.guids:4")),
            "{:?}",
            r.diagnostics
        );
    }
    // As compute nodes they are balanced first the same way.
    let cn = dir.path().join("cn.guids");
    std::fs::write(
        &cn,
        format!("0x{:016x}\n0x{:016x}\n", guid("io1"), guid("io2")),
    )
    .unwrap();
    let r = Sssp::new(SsspConfig {
        cn_guid_file: Some(cn),
        io_guid_file: None,
    })
    .route(&f)
    .unwrap();
    let ports = uplinks_to(&f, &r, &["io1", "io2"]);
    assert_ne!(ports[0], ports[1]);
}

#[test]
fn unreadable_guid_file_is_an_error_naming_it() {
    let e = Sssp::from_config("cn_guid_file = \"/nonexistent/cn.txt\"")
        .unwrap()
        .route(&io_fabric())
        .unwrap_err();
    assert!(
        e.reason.contains("cn_guid_file") && e.reason.contains("/nonexistent/cn.txt"),
        "{e}"
    );
    let bad = Dfsssp::from_config("io_guid_file = 7").unwrap_err();
    assert!(bad.reason.starts_with("dfsssp: bad configuration"), "{bad}");
}

#[test]
fn exports_both_engines_through_the_abi() {
    let module = smcore_dfsssp::__smcore_root_module();
    let list = (module.engines())();
    let flags: Vec<(&str, bool)> = list
        .iter()
        .map(|e| (e.name.as_str(), e.deadlock_free))
        .collect();
    assert_eq!(flags, [("dfsssp", true), ("sssp", false)]);
    let create = module.create();
    let f = fabric("torus-3x3x3-h2", 0);
    for name in ["dfsssp", "sssp"] {
        let engine = create(RStr::from_str(name), RStr::from_str("lmc = 0\n"))
            .into_result()
            .unwrap();
        let r = engine.route(&f).into_result().unwrap();
        assert_eq!(r.lfts.len(), 27, "{name}");
    }
    assert!(create(RStr::from_str("nue"), RStr::from_str(""))
        .into_result()
        .is_err());
}

#[test]
fn dfsssp_routes_the_6x6x6_torus_opensm_fails_on() {
    // OpenSM 3.3.23's dfsssp gives up on this fabric ("needs 9 VLs, 8
    // available").
    let f = torus(&[6, 6, 6], 2);
    let r = Dfsssp::default()
        .route(&f)
        .unwrap_or_else(|e| panic!("{e}"));
    let v = verify(&f, &r, &VerifyOptions::default());
    assert!(v.ok(), "{:?}", v.failure());
    assert!(
        r.vls_used <= 8 && v.vls_used <= 8,
        "vls_used {} / {}",
        r.vls_used,
        v.vls_used
    );
    assert_eq!(v.non_minimal, 0);
    // Every path to a CA LID fits the layers as sssp routed it (only the
    // switch LIDs reuse their first host's tree), so the CA routes are
    // sssp's own, balance included.
    let plain = Sssp::default().route(&f).unwrap();
    let ca_lids: Vec<usize> = f
        .end_ports()
        .map(|p| f.ports[p as usize].lid as usize)
        .collect();
    for (a, b) in r.lfts.iter().zip(plain.lfts.iter()) {
        assert_eq!(a.node, b.node);
        for &l in &ca_lids {
            assert_eq!(a.ports[l], b.ports[l], "switch {} LID {l}", a.node);
        }
    }
    assert!(
        r.diagnostics
            .iter()
            .any(|d| d.message.contains("switch LIDs sharing")),
        "{:?}",
        r.diagnostics
    );
}
