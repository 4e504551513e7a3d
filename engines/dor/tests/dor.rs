//! DOR on every generated family: complete and minimal everywhere; no
//! credit loop on one VL for meshes and hypercubes; paths really follow
//! dimension order; parallel links between two switches share the load.

use sm_abi::{FabricSnapshot, Lft, NodeKind, RoutingEngine, NONE, NO_ROUTE};
use sm_topology::{gen, lids};
use smcore_dor::Dor;
use smcore_kit::conformance::{assert_conformance, cases, Expect, Family};
use smcore_kit::verify::{verify, VerifyOptions};

#[test]
fn minimal_and_complete_with_lmc_0() {
    assert_conformance(&Dor::default(), 0, &Expect::minimal());
}

#[test]
fn minimal_and_complete_with_lmc_2() {
    assert_conformance(&Dor::default(), 2, &Expect::minimal());
}

fn deadlock_free_minimal(name: &str, f: &FabricSnapshot) {
    let r = Dor::default().route(f).unwrap();
    let v = verify(f, &r, &VerifyOptions::default());
    assert_eq!(
        (v.unreachable, v.looping, v.non_minimal),
        (0, 0, 0),
        "{name}"
    );
    assert_eq!(r.vls_used, 1);
    assert!(
        v.credit_loop.is_none(),
        "{name}: credit loop {:?}",
        v.credit_loop
    );
}

#[test]
fn meshes_and_hypercubes_have_no_credit_loop_on_one_vl() {
    for lmc in [0u8, 1] {
        for c in cases(lmc).unwrap() {
            if matches!(c.family, Family::Mesh | Family::Hypercube) && !c.faulty {
                deadlock_free_minimal(&format!("{} lmc {lmc}", c.name), &c.fabric);
            }
        }
    }
    let more = [
        ("mesh-6x5-h1", gen::torus(&[6, 5], 1, true).unwrap().0),
        ("mesh-4x4x3-h1", gen::torus(&[4, 4, 3], 1, true).unwrap().0),
        ("mesh-7x2-h3", gen::torus(&[7, 2], 3, true).unwrap().0),
        ("hypercube-5-h1", gen::hypercube(5, 1).unwrap()),
        ("hypercube-3-h3", gen::hypercube(3, 3).unwrap()),
    ];
    for (name, topo) in more {
        deadlock_free_minimal(name, &lids::snapshot(&topo, 0).unwrap());
    }
}

#[test]
fn tori_route_completely_but_have_credit_loops() {
    // The wrap-around rings are why DOR does not declare itself deadlock-free.
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "torus-5x4-h2")
        .unwrap();
    let r = Dor::default().route(&c.fabric).unwrap();
    let v = verify(&c.fabric, &r, &VerifyOptions::default());
    assert_eq!((v.unreachable, v.looping, v.non_minimal), (0, 0, 0));
    assert!(
        v.credit_loop.is_some(),
        "DOR on a 5x4 torus must have a credit loop"
    );
}

/// The switch-to-switch output ports of the path from end port `src` to
/// `dlid`, or None if the walk does not arrive.
fn path_ports(f: &FabricSnapshot, lfts: &[Option<&Lft>], src: u32, dlid: u16) -> Option<Vec<u8>> {
    let mut at = f.ports[f.ports[src as usize].peer as usize].node;
    let mut ports = Vec::new();
    for _ in 0..f.nodes.len() {
        let out = lfts[at as usize]?
            .ports
            .get(dlid as usize)
            .copied()
            .filter(|&p| p != NO_ROUTE)?;
        if out == 0 {
            return None; // switch LIDs are not destinations here
        }
        let peer = f.port_of(at, out)?.peer;
        if peer == NONE {
            return None;
        }
        let next = &f.ports[peer as usize];
        if f.nodes[next.node as usize].kind != NodeKind::Switch {
            return (next.lid != 0 && (next.lid..next.lid + (1 << next.lmc)).contains(&dlid))
                .then_some(ports);
        }
        ports.push(out);
        at = next.node;
    }
    None
}

/// Every CA-to-CA path as its list of switch-to-switch output ports.
fn all_paths(f: &FabricSnapshot) -> Vec<Vec<u8>> {
    let r = Dor::default().route(f).unwrap();
    let mut by_node: Vec<Option<&Lft>> = vec![None; f.nodes.len()];
    for l in r.lfts.iter() {
        by_node[l.node as usize] = Some(l);
    }
    let ends: Vec<u32> = f.end_ports().collect();
    let mut paths = Vec::new();
    for &s in &ends {
        for &d in &ends {
            if s == d {
                continue;
            }
            let dlid = f.ports[d as usize].lid;
            paths.push(
                path_ports(f, &by_node, s, dlid).unwrap_or_else(|| panic!("no path {s} -> {d}")),
            );
        }
    }
    paths
}

#[test]
fn mesh_paths_go_along_x_then_y_then_z() {
    // Generator ports: +x=1, -x=2, +y=3, -y=4, +z=5, -z=6.
    for (dims, name) in [
        (&[4usize, 3][..], "4x3"),
        (&[5, 5][..], "5x5"),
        (&[3, 3, 3][..], "3x3x3"),
    ] {
        let topo = gen::torus(dims, 2, true).unwrap().0;
        let f = lids::snapshot(&topo, 0).unwrap();
        let paths = all_paths(&f);
        assert!(
            paths.iter().any(|p| p.len() >= 3),
            "{name}: expected multi-hop paths"
        );
        for p in &paths {
            assert!(
                p.iter()
                    .all(|&port| (1..=2 * dims.len() as u8).contains(&port)),
                "{name}: {p:?}"
            );
            // Dimension of each hop never decreases, and within one
            // dimension the direction never changes.
            for w in p.windows(2) {
                let (d0, d1) = ((w[0] - 1) / 2, (w[1] - 1) / 2);
                assert!(
                    d0 < d1 || w[0] == w[1],
                    "{name}: path {p:?} is not in dimension order"
                );
            }
        }
    }
}

#[test]
fn hypercube_paths_correct_dimensions_in_increasing_order() {
    // Generator: dimension d on port d + 1 at both ends.
    let f = lids::snapshot(&gen::hypercube(4, 1).unwrap(), 0).unwrap();
    for p in all_paths(&f) {
        assert!(
            p.windows(2).all(|w| w[0] < w[1]),
            "path {p:?} is not in dimension order"
        );
    }
}

/// A 3x2 mesh cabled consistently with two cables per x link: +x on ports
/// 1 and 2, -x on 3 and 4, +y on 5, -y on 6, hosts on 7 and 8.
fn doubled_x_mesh() -> FabricSnapshot {
    let (w, h) = (3usize, 2usize);
    let name = |x: usize, y: usize| format!("sw-{x}-{y}");
    let mut text = String::new();
    for y in 0..h {
        for x in 0..w {
            text.push_str(&format!("Switch 8 \"{}\"\n", name(x, y)));
            if x + 1 < w {
                text.push_str(&format!(
                    "[1] \"{}\"[3]\n[2] \"{}\"[4]\n",
                    name(x + 1, y),
                    name(x + 1, y)
                ));
            }
            if x > 0 {
                text.push_str(&format!(
                    "[3] \"{}\"[1]\n[4] \"{}\"[2]\n",
                    name(x - 1, y),
                    name(x - 1, y)
                ));
            }
            if y + 1 < h {
                text.push_str(&format!("[5] \"{}\"[6]\n", name(x, y + 1)));
            }
            if y > 0 {
                text.push_str(&format!("[6] \"{}\"[5]\n", name(x, y - 1)));
            }
            text.push_str(&format!(
                "[7] \"h-{x}-{y}-a\"[1]\n[8] \"h-{x}-{y}-b\"[1]\n\n"
            ));
        }
    }
    for y in 0..h {
        for x in 0..w {
            for s in ["a", "b"] {
                text.push_str(&format!(
                    "Hca 1 \"h-{x}-{y}-{s}\"\n[1] \"{}\"[{}]\n\n",
                    name(x, y),
                    if s == "a" { 7 } else { 8 }
                ));
            }
        }
    }
    let topo = sm_topology::parse_str(&text, "doubled-x-mesh").unwrap();
    lids::snapshot(&topo, 0).unwrap()
}

#[test]
fn parallel_links_share_the_load_evenly() {
    let f = doubled_x_mesh();
    deadlock_free_minimal("doubled-x-mesh", &f);
    let r = Dor::default().route(&f).unwrap();
    let ends: Vec<u32> = f.end_ports().collect();
    for lft in r.lfts.iter() {
        let n = &f.nodes[lft.node as usize];
        // Routes to CA LIDs per output port of this switch.
        let mut count = [0u32; 9];
        for &e in &ends {
            let p = lft.ports[f.ports[e as usize].lid as usize];
            count[p as usize] += 1;
        }
        for (a, b) in [(1usize, 2usize), (3, 4)] {
            let linked = f.port_of(lft.node, a as u8).is_some_and(|p| p.is_linked());
            if !linked {
                assert_eq!(count[a] + count[b], 0, "{}", n.description);
                continue;
            }
            assert!(
                count[a] > 0 && count[b] > 0,
                "{}: parallel ports {a},{b} carry {} and {}",
                n.description,
                count[a],
                count[b]
            );
            assert!(
                count[a].abs_diff(count[b]) <= 1,
                "{}: parallel ports {a},{b} carry {} and {}",
                n.description,
                count[a],
                count[b]
            );
        }
    }
    // And the x-before-y order still holds with two cables per x hop.
    for p in all_paths(&f) {
        let dim = |port: u8| if port <= 4 { 0 } else { 1 };
        assert!(
            p.windows(2).all(|w| dim(w[0]) <= dim(w[1])),
            "path {p:?} is not in dimension order"
        );
    }
}

#[test]
fn options_and_bad_files() {
    let d = Dor::from_config("lmc = 0\nlfts_file = \"/x\"\nsomething_else = 3\n").unwrap();
    let f = &cases(0).unwrap()[0].fabric;
    assert!(d.route(f).is_ok());
    let e = Dor::from_config("guid_routing_order_file = \"/nonexistent/order\"\n")
        .unwrap()
        .route(f)
        .unwrap_err();
    assert!(
        e.reason.starts_with("dor: ") && e.reason.contains("/nonexistent/order"),
        "{e}"
    );
    assert!(Dor::from_config("port_prof_ignore_file = 1\n").is_err());
}

#[test]
fn lmc_lids_of_a_port_spread_over_parallel_links() {
    // Two cables between each leaf and spine: the LIDs of a remote host
    // leave a leaf over both cables to the DOR neighbour.
    let c = cases(1)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "fat-tree-4x2-h8-u4-parallel")
        .unwrap();
    let f = &c.fabric;
    let r = Dor::default().route(f).unwrap();
    deadlock_free_minimal(&c.name, f);
    let leaf = r
        .lfts
        .iter()
        .find(|l| f.nodes[l.node as usize].description.contains("leaf"))
        .unwrap();
    let mut spread = 0;
    for host in f
        .end_ports()
        .filter(|&p| f.ports[f.ports[p as usize].peer as usize].node != leaf.node)
    {
        let base = f.ports[host as usize].lid as usize;
        let (a, b) = (leaf.ports[base], leaf.ports[base + 1]);
        let peer = |p: u8| f.ports[f.port_of(leaf.node, p).unwrap().peer as usize].node;
        assert_eq!(peer(a), peer(b), "both LIDs go to the DOR neighbour");
        spread += usize::from(a != b);
    }
    assert!(spread > 0, "LMC LIDs never use the parallel cable");
}

/// OpenSM's `port_search_ordering_file` is DOR's order of dimensions: `a`
/// reaches `d` through `b` (port 1) or `c` (port 2) in two hops; DOR takes
/// the first dimension in search order, so naming port 2 first turns the
/// route.
#[test]
fn a_port_search_ordering_file_orders_the_dimensions() {
    let text = "Switch 2 \"a\"\n[1] \"b\"[1]\n[2] \"c\"[1]\n\nSwitch 2 \"b\"\n[2] \"d\"[1]\n\n\
                Switch 2 \"c\"\n[2] \"d\"[2]\n\nSwitch 3 \"d\"\n[3] \"h\"[1]\n\nHca 1 \"h\"\n";
    let f = lids::snapshot(&sm_topology::parse_str(text, "square").unwrap(), 0).unwrap();
    let node = |name: &str| f.nodes.iter().position(|n| n.description.as_str() == name).unwrap();
    let h = f.ports[f.nodes[node("h")].first_port as usize + 1].lid as usize;
    let a_port = |dor: &Dor| {
        let r = dor.route(&f).unwrap();
        r.lfts.iter().find(|l| l.node as usize == node("a")).unwrap().ports[h]
    };
    assert_eq!(a_port(&Dor::default()), 1, "port order: the first dimension is port 1");
    let file = std::env::temp_dir().join(format!("smcore-dor-order-{}", std::process::id()));
    std::fs::write(&file, format!("0x{:x} 2\n", f.nodes[node("a")].guid)).unwrap();
    let dor = Dor::from_config(&format!("port_search_ordering_file = {:?}", file.display().to_string())).unwrap();
    let port = a_port(&dor);
    std::fs::remove_file(&file).ok();
    assert_eq!(port, 2, "port 2 named first is the first dimension");
}
