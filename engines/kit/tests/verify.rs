//! The verifier finds planted faults: dead ends, forwarding loops, credit
//! loops (single- and multi-VL), VL overruns; and it agrees with itself
//! between its fast per-tree path and its per-source path walk.

use sm_abi::abi_stable::std_types::ROption;
use sm_abi::{path_sl_box, FabricSnapshot, Lft, PathSl, Routing, NO_ROUTE};
use smcore_kit::verify::{verify, verify_with_mcast, McastRoute, VerifyOptions};

/// Ring of `n` switches `s0..`, host `hX` on port 1 of `sX`, `sX[2]` cabled
/// to `s(X+1)[3]`.
fn ring(n: usize) -> FabricSnapshot {
    let mut t = String::new();
    for x in 0..n {
        t.push_str(&format!("Switch 3 \"s{x}\"\n[1] \"h{x}\"[1]\n[2] \"s{}\"[3]\n\n", (x + 1) % n));
    }
    for x in 0..n {
        t.push_str(&format!("Hca 1 \"h{x}\"\n[1] \"s{x}\"[1]\n\n"));
    }
    let topo = sm_topology::parse_str(&t, "ring").expect("ring parses");
    sm_topology::lids::snapshot(&topo, 0).expect("ring LIDs")
}

/// Ring position of every node index (switch sX and host hX both give X).
fn position(f: &FabricSnapshot, node: u32) -> usize {
    let d = &f.nodes[node as usize];
    let name = if d.description.is_empty() { format!("{:x}", d.guid) } else { d.description.to_string() };
    name.trim_start_matches(|c: char| !c.is_ascii_digit()).parse().unwrap_or_else(|_| panic!("node {name}"))
}

fn host_pos_of_lid(f: &FabricSnapshot) -> Vec<usize> {
    let mut v = vec![usize::MAX; f.max_lid as usize + 1];
    for p in f.ports.iter() {
        if p.lid != 0 && f.nodes[p.node as usize].kind == sm_abi::NodeKind::Ca {
            v[p.lid as usize] = position(f, p.node);
        }
    }
    v
}

/// Every switch sends every other host's LID clockwise.
fn clockwise(f: &FabricSnapshot) -> Vec<Lft> {
    let hosts = host_pos_of_lid(f);
    f.switches()
        .map(|s| {
            let me = position(f, s);
            let ports = (0..=f.max_lid as usize)
                .map(|lid| match hosts[lid] {
                    usize::MAX => NO_ROUTE,
                    h if h == me => 1,
                    _ => 2,
                })
                .collect::<Vec<u8>>();
            Lft { node: s, ports: ports.into() }
        })
        .collect()
}

struct Layers {
    host_pos: Vec<usize>,
    n: usize,
}

impl PathSl for Layers {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    /// Layer 1 for the paths that go through s0 from s(n-1) and on towards
    /// s1: without them layer 0's dependency ring is cut at s0, and they
    /// alone never close a ring.
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        let (a, b) = (self.host_pos[slid as usize], self.host_pos[dlid as usize]);
        (a != 0 && b != 0 && b < a && self.n > 2) as u8
    }
}

/// Same SL everywhere, but not declared uniform: forces the per-source walk.
struct HiddenUniform;

impl PathSl for HiddenUniform {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, _: u16, _: u16) -> u8 {
        0
    }
}

fn opts() -> VerifyOptions {
    VerifyOptions::default()
}

#[test]
fn clockwise_ring_on_one_vl_has_a_credit_loop() {
    let f = ring(4);
    let v = verify(&f, &Routing::single_vl(clockwise(&f)), &opts());
    assert_eq!(v.unreachable + v.looping, 0);
    assert!(v.pairs == 12);
    let cl = v.credit_loop.as_ref().expect("credit loop found");
    assert_eq!(cl.cycle.len(), 4, "{cl:?}");
    assert!(!v.ok());
    assert!(v.failure().unwrap().contains("credit loop"));
    // Clockwise routes are not all shortest on a 4-ring.
    assert!(v.non_minimal > 0);
}

#[test]
fn per_source_walk_agrees_with_tree_fast_path() {
    let f = ring(5);
    let fast = verify(&f, &Routing::single_vl(clockwise(&f)), &opts());
    let mut r = Routing::single_vl(clockwise(&f));
    r.path_sl = path_sl_box(HiddenUniform);
    let slow = verify(&f, &r, &opts());
    assert_eq!(fast.credit_loop.is_some(), slow.credit_loop.is_some());
    assert_eq!(fast.port_load, slow.port_load);
    assert_eq!(fast.total_hops, slow.total_hops);
    assert_eq!(slow.vls_used, 1);
}

#[test]
fn two_layers_break_the_ring() {
    // On longer rings these two layers are not enough (paths from s3 and
    // s5 on a 6-ring close layer 1), so only the short rings qualify.
    for n in [3, 4] {
        let f = ring(n);
        let mut r = Routing::single_vl(clockwise(&f));
        r.path_sl = path_sl_box(Layers { host_pos: host_pos_of_lid(&f), n });
        r.vls_used = 2;
        let v = verify(&f, &r, &opts());
        assert!(v.credit_loop.is_none(), "ring {n}: {:?}", v.credit_loop);
        assert!(v.ok(), "{:?}", v.failure());
        assert_eq!(v.vls_used, 2);
    }
}

#[test]
fn sl2vl_can_merge_layers_back_into_a_loop() {
    let f = ring(4);
    let mut r = Routing::single_vl(clockwise(&f));
    r.path_sl = path_sl_box(Layers { host_pos: host_pos_of_lid(&f), n: 4 });
    // Map SL1 onto VL0 on every switch port pair: the layers collapse.
    for s in f.switches() {
        for i in 0..=3u8 {
            for o in 1..=3u8 {
                let mut vl = [0u8; 16];
                vl[1] = 0;
                r.sl2vl.push(sm_abi::Sl2Vl { node: s, in_port: i, out_port: o, vl });
            }
        }
    }
    let v = verify(&f, &r, &opts());
    assert!(v.credit_loop.is_some());
}

#[test]
fn planted_forwarding_loop_and_dead_end() {
    let f = ring(4);
    let mut lfts = clockwise(&f);
    let hosts = host_pos_of_lid(&f);
    let lid_of = |pos: usize| hosts.iter().position(|&h| h == pos).unwrap();
    // s1 sends h3's LID back anticlockwise (port 3) while s0 sends it clockwise.
    let s1 = lfts.iter().position(|l| position(&f, l.node) == 1).unwrap();
    lfts[s1].ports[lid_of(3)] = 3;
    // s2 has no route to h0.
    let s2 = lfts.iter().position(|l| position(&f, l.node) == 2).unwrap();
    lfts[s2].ports[lid_of(0)] = NO_ROUTE;
    let v = verify(&f, &Routing::single_vl(lfts), &opts());
    // h0 and h1 loop towards h3 (s0 -> s1 -> s0 ...).
    assert_eq!(v.looping, 2, "{v:?}");
    // h1 and h2 reach s2 on their way to h0 and die; h3 goes s3 -> s0 directly.
    assert_eq!(v.unreachable, 2, "{v:?}");
    assert!(v.examples.iter().any(|e| e.contains("forwarding loop")), "{:?}", v.examples);
    assert!(v.failure().unwrap().contains("unreachable"));
}

#[test]
fn route_to_a_down_or_wrong_port_is_unreachable() {
    let f = ring(3);
    let mut lfts = clockwise(&f);
    let hosts = host_pos_of_lid(&f);
    let lid0 = hosts.iter().position(|&h| h == 0).unwrap();
    let s0 = lfts.iter().position(|l| position(&f, l.node) == 0).unwrap();
    lfts[s0].ports[lid0] = 9; // beyond the switch's ports
    let v = verify(&f, &Routing::single_vl(lfts), &opts());
    assert_eq!(v.unreachable, 2);
}

#[test]
fn sl_beyond_operational_vls_is_a_violation() {
    let f = ring(3);
    let mut r = Routing::single_vl(clockwise(&f));
    r.path_sl = path_sl_box(sm_abi::UniformSl(9));
    let v = verify(&f, &r, &opts());
    assert!(v.vl_violations > 0);
    assert!(!v.ok());
}

#[test]
fn load_counts_every_pair_once_per_link() {
    let f = ring(4);
    let v = verify(&f, &Routing::single_vl(clockwise(&f)), &opts());
    // Clockwise on a 4-ring: each host sends to 3 others over 1, 2, 3
    // switch hops, so every ring link carries 1 + 2 + 3 = 6 routes.
    let (max, mean) = v.inter_switch_load(&f);
    assert_eq!(max, 6);
    assert!((mean - 3.0).abs() < 1e-9, "{mean}"); // anticlockwise links carry none
}

/// Panics for one destination: the guard in `path_sl_box` must turn that
/// into an invalid SL the verifier rejects, not an abort.
struct Panicky;

impl PathSl for Panicky {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, _slid: u16, dlid: u16) -> u8 {
        if dlid.is_multiple_of(2) {
            panic!("no SL for {dlid}");
        }
        0
    }
}

#[test]
fn panicking_sl_oracle_is_a_verification_failure() {
    let f = ring(3);
    let mut r = Routing::single_vl(clockwise(&f));
    r.path_sl = path_sl_box(Panicky);
    let v = verify(&f, &r, &opts());
    assert!(v.vl_violations > 0);
    assert!(v.examples.iter().any(|e| e.contains("path SL oracle gave SL 255")), "{:?}", v.examples);
    assert!(!v.ok());
}

/// A multicast tree along the ring: `order` lists ring positions, each
/// switch linked to the next one in the list; every host is a member.
fn ring_tree(f: &FabricSnapshot, order: &[usize]) -> McastRoute {
    let node_at = |pos: usize| {
        f.switches().find(|&s| position(f, s) == pos).unwrap_or_else(|| panic!("switch at {pos}"))
    };
    let n = f.switches().count();
    let switches = order
        .iter()
        .enumerate()
        .map(|(k, &pos)| {
            let mut ports = vec![1u8];
            // Port 2 goes to pos+1, port 3 to pos-1 (see `ring`).
            for &other in [k.checked_sub(1).map(|j| order[j]), order.get(k + 1).copied()].iter().flatten() {
                ports.push(if other == (pos + 1) % n { 2 } else { 3 });
            }
            (node_at(pos), ports)
        })
        .collect();
    McastRoute { mlid: 0xC000, sl: 0, switches }
}

/// The 4-switch ring routed clockwise on two layers, cut at s0: loop free.
fn layered_ring() -> (FabricSnapshot, Routing, smcore_kit::graph::Graph) {
    let f = ring(4);
    let mut r = Routing::single_vl(clockwise(&f));
    r.path_sl = path_sl_box(Layers { host_pos: host_pos_of_lid(&f), n: 4 });
    r.vls_used = 2;
    let graph = smcore_kit::graph::Graph::new(&f);
    (f, r, graph)
}

#[test]
fn multicast_tree_through_the_cut_closes_the_unicast_ring() {
    let (f, r, graph) = layered_ring();
    // Unicast alone is loop free (the layers cut layer 0 at s0).
    let alone = verify_with_mcast(&f, &graph, &r, &opts(), &[]);
    assert!(alone.ok(), "{:?}", alone.failure());
    // A tree that ends at s0 adds no dependency across s0.
    let ends_at_cut = verify_with_mcast(&f, &graph, &r, &opts(), &[ring_tree(&f, &[0, 1, 2, 3])]);
    assert!(ends_at_cut.credit_loop.is_none(), "{:?}", ends_at_cut.credit_loop);
    // One that passes through s0 from s3 to s1 on SL 0 closes the ring.
    let through_cut = verify_with_mcast(&f, &graph, &r, &opts(), &[ring_tree(&f, &[3, 0, 1, 2])]);
    let cl = through_cut.credit_loop.as_ref().expect("multicast closes the ring");
    assert_eq!(cl.cycle.len(), 4, "{cl:?}");
    // On SL 1 (the other layer) the same tree is harmless: layer 1 holds
    // only the paths through s0, which close nothing with it.
    let mut on_sl1 = ring_tree(&f, &[3, 0, 1, 2]);
    on_sl1.sl = 1;
    let v = verify_with_mcast(&f, &graph, &r, &opts(), &[on_sl1]);
    assert!(v.credit_loop.is_none(), "{:?}", v.credit_loop);
}

/// Multicast trees may name a port no route can take (a link gone down):
/// its pairs have no map and keep SL → VL. Two trees on SL 3 around a
/// ring whose s0–s1 link is down close a cycle that leaves VL 0 only
/// there, on VL 3, though every pair a route can take maps to VL 0: the
/// verifier must count VL 3 among the channels to see it.
#[test]
fn multicast_through_a_down_port_keeps_its_sl_as_its_vl() {
    let mut f = ring(4);
    let sw_at = |f: &FabricSnapshot, pos: usize| f.switches().find(|&s| position(f, s) == pos).expect("switch");
    let (s0, s1) = (sw_at(&f, 0), sw_at(&f, 1));
    // s0[2] is cabled to s1[3].
    for (node, port) in [(s0, 2u32), (s1, 3)] {
        let pi = (f.nodes[node as usize].first_port + port) as usize;
        f.ports[pi].state = sm_abi::PortState::Down;
    }
    // No unicast route; every pair of ports a route could take maps every
    // SL to VL 0 (the down ports' pairs have no map).
    let lfts: Vec<Lft> =
        f.switches().map(|s| Lft { node: s, ports: vec![NO_ROUTE; f.max_lid as usize + 1].into() }).collect();
    let mut r = Routing::single_vl(lfts);
    for s in f.switches().collect::<Vec<_>>() {
        let first = f.nodes[s as usize].first_port;
        let up = |p: u8| f.ports[(first + p as u32) as usize].state != sm_abi::PortState::Down;
        for i in (0..=3u8).filter(|&i| i == 0 || up(i)) {
            for o in (1..=3u8).filter(|&o| up(o)) {
                r.sl2vl.push(sm_abi::Sl2Vl { node: s, in_port: i, out_port: o, vl: [0; 16] });
            }
        }
    }
    let graph = smcore_kit::graph::Graph::new(&f);
    let mut trees = [ring_tree(&f, &[0, 1, 2, 3]), ring_tree(&f, &[2, 3, 0, 1])];
    for t in trees.iter_mut() {
        t.sl = 3;
    }
    let v = verify_with_mcast(&f, &graph, &r, &opts(), &trees);
    let cl = v.credit_loop.as_ref().expect("the trees close the ring on VL 3 past the down link");
    assert!(cl.cycle.iter().any(|&(_, vl)| vl == 3), "{cl:?}");
    // Either tree alone is a tree: nothing closes.
    for t in &trees {
        let one = verify_with_mcast(&f, &graph, &r, &opts(), std::slice::from_ref(t));
        assert!(one.credit_loop.is_none(), "{:?}", one.credit_loop);
    }
}

/// A multicast entry naming ports its switch lacks (from a table no one
/// checked) adds nothing through them: the verdict is the one without.
#[test]
fn multicast_ports_a_switch_lacks_carry_nothing() {
    let (f, r, graph) = layered_ring();
    for order in [[0, 1, 2, 3], [3, 0, 1, 2]] {
        let tree = ring_tree(&f, &order);
        let mut wide = tree.clone();
        for (_, ports) in wide.switches.iter_mut() {
            ports.extend([9, 200]);
        }
        let want = verify_with_mcast(&f, &graph, &r, &opts(), &[tree]);
        let got = verify_with_mcast(&f, &graph, &r, &opts(), &[wide]);
        assert_eq!(got.credit_loop, want.credit_loop);
    }
}

#[test]
fn a_first_switch_with_every_link_down_is_verified_without_sl2vl_maps() {
    // The VL maps' "identity on linked pairs" check read past its table
    // for a switch without linked ports when the routing gives no SL2VL.
    let topo = sm_topology::gen::kary_ntree(2, 2, 2).expect("2-ary 2-tree");
    let mut f = sm_topology::lids::snapshot(&topo, 0).expect("LIDs");
    let first = f.switches().next().expect("a switch");
    let n = f.nodes[first as usize].clone();
    for num in 1..=n.num_ports {
        let pi = (n.first_port + u32::from(num)) as usize;
        let peer = f.ports[pi].peer;
        f.ports[pi].state = sm_abi::PortState::Down;
        if peer != sm_abi::NONE {
            f.ports[peer as usize].state = sm_abi::PortState::Down;
        }
    }
    let routing = Routing::single_vl(smcore_kit::balance::min_hop_lfts(&f));
    let v = verify(&f, &routing, &opts());
    assert_eq!((v.unreachable, v.looping), (0, 0), "{:?}", v.examples);
    assert!(v.pairs > 0);
}
