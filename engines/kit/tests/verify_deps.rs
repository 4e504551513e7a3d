//! The verifier's channel dependencies, exactly, against each path walked
//! on its own, on the routings its per-path-SL walk exists for: tori (and
//! meshes, hypercubes, random fabrics) with an SL per (source, destination)
//! and SL2VL maps per (input port, output port) pair that change VL where a
//! torus-2QoS map would (a "dateline" per switch), several end ports per
//! switch with an LMC, optionally switch LIDs as destinations. There the
//! walk shares one state per (switch, SL) between all the paths that
//! cross it, gathers dependency bits per output VL and reads pair records
//! ahead; the set of dependencies it ends with must be the reference's,
//! not only agree with it on whether there is a cycle.
//!
//! Run: `cargo test -p smcore-kit --features proptest-fabrics --test verify_deps`.
#![cfg(feature = "proptest-fabrics")]

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use sm_abi::abi_stable::std_types::ROption;
use sm_abi::{path_sl_box, FabricSnapshot, Lft, PathSl, Routing, Sl2Vl, NONE, NO_ROUTE};
use smcore_kit::graph::Graph;
use smcore_kit::strategy::{hypercubes, meshes, random_fabrics, tori, Drawn, Sizes};
use smcore_kit::verify::{channel_dependencies, verify, ChannelDep, VerifyOptions};

/// An SL per (source LID, destination LID), from a multiplicative hash:
/// `nsl` distinct values.
struct PairSl {
    seed: u32,
    nsl: u32,
}

impl PathSl for PairSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        let h = (slid as u32).wrapping_mul(0x9E37_79B1) ^ (dlid as u32).wrapping_mul(0x85EB_CA77) ^ self.seed;
        (h.rotate_left(13).wrapping_mul(0xC2B2_AE3D) >> 16) as u8 % self.nsl as u8
    }
}

/// Shortest-path LFTs, the tie between equal next hops broken by
/// destination LID and `salt` (so trees differ from LID to LID, as
/// balanced engines make them).
fn shortest_lfts(f: &FabricSnapshot, g: &Graph, salt: usize) -> Vec<Lft> {
    let dm = g.distance_matrix();
    g.switch_nodes
        .iter()
        .enumerate()
        .map(|(s, &node)| {
            let mut ports = vec![NO_ROUTE; f.max_lid as usize + 1];
            for (lid, &pi) in g.lid_port.iter().enumerate().skip(1) {
                let t = if pi == NONE { NONE } else { g.entry_switch(f, pi) };
                if t == NONE {
                    continue;
                }
                let p = &f.ports[pi as usize];
                if t as usize == s {
                    ports[lid] = if p.node == node { 0 } else { f.ports[p.peer as usize].num };
                    continue;
                }
                let d = dm.get(s as u32, t) as u32;
                let nearer: Vec<u8> = g.sw_ports[s]
                    .iter()
                    .filter(|q| q.peer_sw != NONE && dm.get(q.peer_sw, t) as u32 + 1 == d)
                    .map(|q| q.port)
                    .collect();
                if !nearer.is_empty() {
                    ports[lid] = nearer[(lid + salt) % nearer.len()];
                }
            }
            Lft { node, ports: ports.into() }
        })
        .collect()
}

/// Per switch a dateline port: paths leaving by it, or having entered by
/// it, move to the upper half of `nvl` VLs; each switch with maps gets one
/// per (input, output) pair, the others none (SL n on VL n).
fn dateline_maps(f: &FabricSnapshot, g: &Graph, nvl: u8, seed: usize) -> Vec<Sl2Vl> {
    let half = (nvl / 2).max(1);
    let mut maps = Vec::new();
    for (s, &node) in g.switch_nodes.iter().enumerate() {
        if (s + seed) % 5 == 0 {
            continue;
        }
        let w = f.nodes[node as usize].num_ports;
        let dateline = 1 + ((s * 7 + seed) % w as usize) as u8;
        for i in 0..=w {
            for o in 1..=w {
                let mut vl = [0u8; 16];
                for (sl, v) in vl.iter_mut().enumerate() {
                    let base = sl as u8 % half;
                    *v = if i == dateline || o == dateline { (base + half).min(nvl - 1) } else { base };
                }
                maps.push(Sl2Vl { node, in_port: i, out_port: o, vl });
            }
        }
    }
    maps
}

/// Every path on its own: the dependencies between the channels
/// (transmitting port, VL) it takes, from the first inter-switch or last
/// link on (an end port's own link depends on nothing before it).
fn reference_deps(f: &FabricSnapshot, r: &Routing, switch_destinations: bool) -> BTreeSet<ChannelDep> {
    let g = Graph::new(f);
    let lfts: HashMap<u32, &[u8]> = r.lfts.iter().map(|l| (l.node, l.ports.as_slice())).collect();
    let lft = |node: u32, lid: u16| -> Option<u8> { lfts.get(&node).and_then(|l| l.get(lid as usize).copied()) };
    let maps: HashMap<(u32, u8, u8), [u8; 16]> = r.sl2vl.iter().map(|e| ((e.node, e.in_port, e.out_port), e.vl)).collect();
    // Every VL here is below 15 and below the bound the verifier sizes its
    // matrices to (pairs without a map entry make it 15), so no
    // dependency is left out on either side.
    let vl_of = |node: u32, i: u8, o: u8, sl: u8| -> u8 { maps.get(&(node, i, o)).map_or(sl, |m| m[sl as usize]) };
    let mut deps = BTreeSet::new();
    for (dlid, &dp) in g.lid_port.iter().enumerate().skip(1) {
        if dp == NONE {
            continue;
        }
        let dest_is_end = f.nodes[f.ports[dp as usize].node as usize].kind.is_end_node();
        if !dest_is_end && !switch_destinations {
            continue;
        }
        for &sp in g.end_ports.iter().filter(|&&sp| sp != dp) {
            let src = &f.ports[sp as usize];
            for off in 0..src.lid_count().max(1) {
                let sl = r.path_sl.path_sl(src.lid + off as u16, dlid as u16);
                let mut s = g.entry_switch(f, sp);
                if s == NONE {
                    continue;
                }
                let mut in_port = f.ports[src.peer as usize].num;
                let mut prev: Option<(u32, u8)> = None;
                for _ in 0..g.switch_count() {
                    let node = g.switch_nodes[s as usize];
                    let Some(o) = lft(node, dlid as u16).filter(|&o| o != 0 && o != NO_ROUTE) else { break };
                    let pi = f.nodes[node as usize].first_port + o as u32;
                    let vl = vl_of(node, in_port, o, sl);
                    if let Some(from) = prev {
                        deps.insert((from, (pi, vl)));
                    }
                    prev = Some((pi, vl));
                    let peer = f.ports[pi as usize].peer;
                    match g.sw_of_node[f.ports[peer as usize].node as usize] {
                        NONE => break,
                        next => {
                            s = next;
                            in_port = f.ports[peer as usize].num;
                        }
                    }
                }
            }
        }
    }
    deps
}

fn per_path_routing(d: &Drawn, salt: usize, nsl: u32, nvl: u8) -> Routing {
    let g = Graph::new(&d.fabric);
    let mut r = Routing::single_vl(shortest_lfts(&d.fabric, &g, salt));
    r.path_sl = path_sl_box(PairSl { seed: salt as u32, nsl });
    r.sl2vl = dateline_maps(&d.fabric, &g, nvl, salt).into();
    r
}

fn fabrics() -> impl Strategy<Value = Drawn> {
    prop_oneof![
        3 => tori(1..4, 0..2),
        1 => meshes(1..3, 0..2),
        1 => hypercubes(1..3, 0..2),
        1 => random_fabrics(Sizes { switches: 2..12, hosts: 1..3, extra_links: 0..12, ..Sizes::default() }.healthy()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn dependencies_equal_the_path_by_path_reference(
        d in fabrics(),
        salt in 0usize..1000,
        nsl in 1u32..9,
        nvl in 2u8..9,
        switch_destinations in any::<bool>(),
    ) {
        let r = per_path_routing(&d, salt, nsl, nvl);
        let opts = VerifyOptions { switch_destinations, ..Default::default() };
        let v = verify(&d.fabric, &r, &opts);
        // Healthy shortest paths within the VLs the ports operate: the
        // walk runs for every pair.
        prop_assert_eq!(v.unreachable + v.looping, 0, "{:?}", v.failure());
        let got: BTreeSet<ChannelDep> = channel_dependencies(&d.fabric, &r, &opts).into_iter().collect();
        let want = reference_deps(&d.fabric, &r, switch_destinations);
        prop_assert_eq!(got.len(), want.len());
        prop_assert_eq!(got, want);
    }
}

/// The property above is about routings that split paths over VLs: the
/// draws do produce walks over several VLs with dependencies between them.
#[test]
fn the_draws_split_paths_over_vls() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut split, mut crossing) = (0, 0);
    for i in 0..20 {
        let d = fabrics().new_tree(&mut runner).expect("draw").current();
        let r = per_path_routing(&d, i, 4, 4);
        let v = verify(&d.fabric, &r, &VerifyOptions::default());
        split += (v.vls_used > 1) as u32;
        let deps = channel_dependencies(&d.fabric, &r, &VerifyOptions::default());
        crossing += deps.iter().any(|&((_, a), (_, b))| a != b) as u32;
    }
    assert!(split >= 10 && crossing >= 10, "split {split} crossing {crossing}");
}
