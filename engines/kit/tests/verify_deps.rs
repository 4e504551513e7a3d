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
use sm_abi::abi_stable::std_types::{RArc, ROption};
use sm_abi::{path_sl_box, FabricSnapshot, Lft, PathSl, Routing, Sl2Vl, SlTable, NONE, NO_ROUTE};
use smcore_kit::graph::Graph;
use smcore_kit::strategy::{fat_trees, hypercubes, meshes, random_fabrics, tori, Drawn, Sizes};
use smcore_kit::verify::{channel_dependencies, verify, verify_unshared, ChannelDep, VerifyOptions};

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
    shortest_lfts_by(f, g, |lid, _| lid + salt)
}

/// Shortest-path LFTs, the tie between equal next hops broken by
/// `tie(destination LID, its switch)`.
fn shortest_lfts_by(f: &FabricSnapshot, g: &Graph, tie: impl Fn(usize, u32) -> usize) -> Vec<Lft> {
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
                    ports[lid] = nearer[tie(lid, t) % nearer.len()];
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
    let mut deps = BTreeSet::new();
    each_hop(f, r, switch_destinations, |prev, here| {
        if let Some(from) = prev {
            deps.insert((from, here));
        }
    });
    deps
}

/// Every path on its own: the highest VL (below 15) a hop takes, plus
/// one, and whether a hop takes a VL its port does not operate.
fn reference_vls(f: &FabricSnapshot, r: &Routing, switch_destinations: bool) -> (u8, bool) {
    let (mut used, mut beyond) = (0u8, false);
    each_hop(f, r, switch_destinations, |_, (pi, vl)| {
        if vl < 15 {
            used = used.max(vl + 1);
        }
        beyond |= vl >= f.ports[pi as usize].op_vls;
    });
    (used, beyond)
}

/// Calls `hop` for every hop from a switch of every path from an end port
/// (with an SL in range) that follows the LFTs, with the channel before
/// it on the path, if any.
fn each_hop(f: &FabricSnapshot, r: &Routing, switch_destinations: bool, mut hop: impl FnMut(Option<(u32, u8)>, (u32, u8))) {
    let g = Graph::new(f);
    let lfts: HashMap<u32, &[u8]> = r.lfts.iter().map(|l| (l.node, l.ports.as_slice())).collect();
    let lft = |node: u32, lid: u16| -> Option<u8> { lfts.get(&node).and_then(|l| l.get(lid as usize).copied()) };
    let maps: HashMap<(u32, u8, u8), [u8; 16]> = r.sl2vl.iter().map(|e| ((e.node, e.in_port, e.out_port), e.vl)).collect();
    // Every VL here is below 15 and below the bound the verifier sizes its
    // matrices to (pairs without a map entry make it 15), so no
    // dependency is left out on either side.
    let vl_of = |node: u32, i: u8, o: u8, sl: u8| -> u8 { maps.get(&(node, i, o)).map_or(sl, |m| m[sl as usize]) };
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
                if s == NONE || sl > 15 {
                    continue;
                }
                let mut in_port = f.ports[src.peer as usize].num;
                let mut prev: Option<(u32, u8)> = None;
                for _ in 0..g.switch_count() {
                    let node = g.switch_nodes[s as usize];
                    let Some(o) = lft(node, dlid as u16).filter(|&o| o != 0 && o != NO_ROUTE) else { break };
                    let pi = f.nodes[node as usize].first_port + o as u32;
                    let vl = vl_of(node, in_port, o, sl);
                    hop(prev, (pi, vl));
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

/// SLs by the switches the two LIDs hang off, as torus-2QoS gives them
/// (then the destinations of one switch can share their walks), except
/// for one pair in `odd` (none when 0), which takes another SL, or an SL
/// out of range when `invalid`.
struct SwitchPairSl {
    /// Per LID, the switch its port hangs off (NONE: none).
    entry: Vec<u32>,
    seed: u32,
    nsl: u32,
    odd: u32,
    invalid: bool,
}

impl PathSl for SwitchPairSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        let at = |lid: u16| self.entry.get(lid as usize).copied().unwrap_or(NONE);
        let h = |a: u32, b: u32| (a.wrapping_mul(0x9E37_79B1) ^ b.wrapping_mul(0x85EB_CA77) ^ self.seed).rotate_left(13).wrapping_mul(0xC2B2_AE3D) >> 16;
        let sl = h(at(slid), at(dlid)) % self.nsl;
        if self.odd > 0 && h(slid as u32, dlid as u32 ^ 0x5555) % self.odd == 0 {
            return if self.invalid { 16 + sl as u8 } else { ((sl + 1) % self.nsl.max(2)) as u8 };
        }
        sl as u8
    }
}

/// LFTs shared by the LIDs of one switch but for one LID in `odd_trees`
/// (none when 0), SLs by switch pair with `odd` exceptions: what lets the
/// verifier share walks between the destinations of a switch, and what
/// must stop it.
fn per_switch_routing(d: &Drawn, salt: usize, nsl: u32, nvl: u8, odd: u32, odd_trees: usize, invalid: bool) -> Routing {
    let f = &d.fabric;
    let g = Graph::new(f);
    let entry: Vec<u32> =
        g.lid_port.iter().map(|&pi| if pi == NONE { NONE } else { g.entry_switch(f, pi) }).collect();
    let lfts = shortest_lfts_by(f, &g, |lid, t| {
        if odd_trees > 0 && lid % odd_trees == 0 {
            lid + salt
        } else {
            t as usize + salt
        }
    });
    let mut r = Routing::single_vl(lfts);
    r.path_sl = path_sl_box(SwitchPairSl { entry, seed: salt as u32, nsl, odd, invalid });
    r.sl2vl = dateline_maps(f, &g, nvl, salt).into();
    r
}

fn several_hosts() -> impl Strategy<Value = Drawn> {
    prop_oneof![
        3 => tori(2..4, 0..2),
        1 => meshes(2..4, 0..2),
        1 => hypercubes(2..4, 0..2),
        1 => random_fabrics(Sizes { switches: 2..12, hosts: 2..4, extra_links: 0..12, ..Sizes::default() }.healthy()),
    ]
}

/// Ports `pick`ed (by port index) operate 1 or 2 VLs, fewer than the maps
/// use: VL violations where paths leave by them.
fn narrow_ports(fabric: &mut FabricSnapshot, pick: impl Fn(usize) -> bool) {
    for (i, p) in fabric.ports.iter_mut().enumerate() {
        if pick(i) {
            p.op_vls = 1 + (i % 2) as u8;
        }
    }
}

/// Everything a verification finds but its example texts (which threads
/// race to fill) and the count of walks taken over.
fn findings(v: &smcore_kit::verify::Verification) -> impl PartialEq + std::fmt::Debug {
    (
        (v.pairs, v.disconnected, v.unreachable, v.looping, v.non_minimal, v.total_hops, v.total_min_hops, v.max_hops),
        (v.port_load.clone(), v.vl_violations, v.vls_used, v.credit_loop.clone(), v.credit_loops_checked),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Destinations of one switch that take over another's walk end with
    /// the verification and the dependencies of walking every path: with
    /// trees and SLs that allow it, and with exceptions (a LID with a
    /// tree of its own, a pair with another SL, an SL out of range) that
    /// must stop it where they apply.
    #[test]
    fn shared_walks_give_what_walking_every_path_gives(
        d in several_hosts(),
        salt in 0usize..1000,
        nsl in 1u32..9,
        nvl in 2u8..9,
        odd in prop_oneof![Just(0u32), 1u32..40],
        odd_trees in prop_oneof![Just(0usize), 2usize..9],
        invalid in any::<bool>(),
        switch_destinations in any::<bool>(),
        narrow in 0u32..4,
        misdelivered in prop_oneof![3 => Just(0usize), 1 => 2usize..6],
    ) {
        let mut r = per_switch_routing(&d, salt, nsl, nvl, odd, odd_trees, invalid);
        if misdelivered > 0 {
            // Some LIDs' own switch sends them to itself rather than to
            // their port, their trees otherwise their neighbours': the
            // first of a switch's LIDs or a later one that fails only at
            // the last hop.
            let g = Graph::new(&d.fabric);
            for (lid, &pi) in g.lid_port.iter().enumerate() {
                if pi == NONE || lid % misdelivered != 1 {
                    continue;
                }
                let t = g.entry_switch(&d.fabric, pi);
                if t == NONE {
                    continue;
                }
                let node = g.switch_nodes[t as usize];
                if let Some(lft) = r.lfts.iter_mut().find(|l| l.node == node) {
                    if let Some(e) = lft.ports.get_mut(lid) {
                        *e = 0;
                    }
                }
            }
        }
        let opts = VerifyOptions { switch_destinations, ..Default::default() };
        // Some ports operating fewer VLs than the maps use: VL
        // violations, on switches deep in some trees and near in others.
        let mut fabric = d.fabric.clone();
        narrow_ports(&mut fabric, |i| (i + salt) % 11 < narrow as usize);
        let shared = verify(&fabric, &r, &opts);
        let alone = verify_unshared(&fabric, &r, &opts);
        prop_assert_eq!(alone.walks_shared, 0);
        prop_assert_eq!(findings(&shared), findings(&alone));
        if !(invalid && odd > 0) && misdelivered == 0 {
            let got: BTreeSet<ChannelDep> = channel_dependencies(&fabric, &r, &opts).into_iter().collect();
            prop_assert_eq!(got, reference_deps(&fabric, &r, switch_destinations));
        }
    }
}

/// Without exceptions, every destination of a switch but the first takes
/// over its walk: the sharing the property above holds to the plain walk
/// does happen.
#[test]
fn destinations_of_one_switch_share_their_walk() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for i in 0..8 {
        let d = tori(2..4, 0..2).new_tree(&mut runner).expect("draw").current();
        let r = per_switch_routing(&d, i, 4, 4, 0, 0, false);
        let v = verify(&d.fabric, &r, &VerifyOptions::default());
        // (The dateline maps are no deadlock-free scheme: credit loops
        // are allowed here; what sharing needs is routes that arrive,
        // on VLs the ports operate.)
        assert_eq!((v.unreachable, v.looping, v.vl_violations), (0, 0, 0), "{}", d.spec);
        let g = Graph::new(&d.fabric);
        let mut per_switch: HashMap<u32, u64> = HashMap::new();
        for &pi in g.lid_port.iter().skip(1).filter(|&&pi| pi != NONE) {
            if d.fabric.nodes[d.fabric.ports[pi as usize].node as usize].kind.is_end_node() {
                *per_switch.entry(g.entry_switch(&d.fabric, pi)).or_default() += 1;
            }
        }
        let want: u64 = per_switch.values().map(|&n| n - 1).sum();
        assert!(want > 0, "{}", d.spec);
        assert_eq!(v.walks_shared, want, "{}", d.spec);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// One SL and no SL2VL maps: the verifier takes the destinations of a
    /// switch's chunk together, switch by switch, and its dependencies
    /// must still be exactly the path-by-path ones, whether the
    /// destinations of a switch share their trees or each has its own.
    #[test]
    fn single_sl_dependencies_equal_the_path_by_path_reference(
        d in prop_oneof![2 => fat_trees(0..2), 1 => several_hosts()],
        salt in 0usize..1000,
        per_lid in any::<bool>(),
        switch_destinations in any::<bool>(),
    ) {
        let g = Graph::new(&d.fabric);
        let lfts = shortest_lfts_by(&d.fabric, &g, |lid, t| if per_lid { lid + salt } else { t as usize + salt });
        let r = Routing::single_vl(lfts);
        let opts = VerifyOptions { switch_destinations, ..Default::default() };
        let v = verify(&d.fabric, &r, &opts);
        prop_assert_eq!(v.unreachable + v.looping, 0, "{:?}", v.failure());
        let got: BTreeSet<ChannelDep> = channel_dependencies(&d.fabric, &r, &opts).into_iter().collect();
        prop_assert_eq!(got, reference_deps(&d.fabric, &r, switch_destinations));
    }
}

/// An oracle over classes of LIDs, asked pair by pair or (when `whole`)
/// also giving its table: the same SLs either way.
struct ClassSl {
    table: RArc<SlTable>,
    whole: bool,
}

impl PathSl for ClassSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        self.table.get(slid, dlid)
    }
    fn sl_table(&self) -> ROption<RArc<SlTable>> {
        if self.whole {
            ROption::RSome(self.table.clone())
        } else {
            ROption::RNone
        }
    }
}

/// Classes by the switch a LID hangs off (LIDs off every switch: one class
/// of their own), split in two on switches where `split` picks some of
/// their LIDs; SLs drawn per class pair, out of range for one pair in
/// `bad` (none when 0).
fn class_table(d: &Drawn, salt: usize, nsl: u32, split: usize, bad: u32) -> SlTable {
    let f = &d.fabric;
    let g = Graph::new(f);
    let nsw = g.switch_count() as u32;
    let class_of: Vec<u32> = (0..=f.max_lid as usize)
        .map(|lid| match g.lid_port.get(lid).copied().filter(|&pi| pi != NONE) {
            Some(pi) => {
                let t = g.entry_switch(f, pi);
                if t == NONE {
                    2 * nsw
                } else {
                    t + nsw * (split > 0 && (lid + salt) % split == 0) as u32
                }
            }
            None => 2 * nsw,
        })
        .collect();
    let n = 2 * nsw + 1;
    let sl = (0..n * n)
        .map(|i| {
            let h = (i.wrapping_mul(0x9E37_79B1) ^ salt as u32).rotate_left(13).wrapping_mul(0xC2B2_AE3D) >> 16;
            if bad > 0 && h % bad == 0 {
                16 + (h % nsl) as u8
            } else {
                (h % nsl) as u8
            }
        })
        .collect::<Vec<u8>>();
    SlTable { class_of: class_of.into(), classes: n, sl: sl.into() }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// An oracle given whole as a table is verified by class (a switch's
    /// sources grouped, a destination of a walk's class taking it over
    /// without asking its SLs again) and must give exactly what asking
    /// the same oracle pair by pair gives: the same findings, walks
    /// shared or not, and the path-by-path dependencies. Classes that
    /// split a switch's LIDs and SLs out of range are among the draws.
    #[test]
    fn a_table_gives_what_asking_pair_by_pair_gives(
        d in several_hosts(),
        salt in 0usize..1000,
        nsl in 1u32..9,
        nvl in 2u8..9,
        split in prop_oneof![Just(0usize), 2usize..5],
        bad in prop_oneof![3 => Just(0u32), 1 => 1u32..60],
        switch_destinations in any::<bool>(),
        twist in any::<bool>(),
    ) {
        table_against_pairs(&d, (salt, nsl, nvl, split, bad), switch_destinations, twist, 0)?;
    }

    /// The same with at most one host per switch and no switch
    /// destinations: every destination is alone on its switch, and the
    /// common case's dependencies are worked out by blocks of
    /// destinations as bit sets rather than by walks; some ports
    /// operating fewer VLs than the maps use send it back to the walks.
    #[test]
    fn destinations_alone_on_their_switch_give_what_asking_pair_by_pair_gives(
        d in prop_oneof![
            2 => tori(0..2, 0..1),
            1 => meshes(1..2, 0..1),
            1 => random_fabrics(Sizes { switches: 2..14, hosts: 0..2, extra_links: 0..12, ..Sizes::default() }.healthy()),
        ],
        salt in 0usize..1000,
        nsl in 1u32..9,
        nvl in 2u8..9,
        split in prop_oneof![Just(0usize), 2usize..5],
        bad in prop_oneof![3 => Just(0u32), 1 => 1u32..60],
        narrow in prop_oneof![2 => Just(0u32), 1 => 1u32..4],
    ) {
        table_against_pairs(&d, (salt, nsl, nvl, split, bad), false, false, narrow)?;
    }
}

/// [`a_table_gives_what_asking_pair_by_pair_gives`] for one fabric and
/// draw: `narrow` of every 11 ports operate fewer VLs than the maps use.
fn table_against_pairs(
    d: &Drawn,
    (salt, nsl, nvl, split, bad): (usize, u32, u8, usize, u32),
    switch_destinations: bool,
    twist: bool,
    narrow: u32,
) -> Result<(), TestCaseError> {
    let mut fabric = d.fabric.clone();
    narrow_ports(&mut fabric, |i| (i + salt) % 11 < narrow as usize);
    let f = &fabric;
    let g = Graph::new(f);
    let table = RArc::new(class_table(d, salt, nsl, split, bad));
    let lfts = shortest_lfts_by(f, &g, |_, t| t as usize + salt);
    let mut maps = dateline_maps(f, &g, nvl, salt);
    if twist {
        // End-facing ports whose maps differ only towards end ports,
        // some of which operate fewer VLs: the VL of the last hop
        // from a source on the destination's switch depends on the
        // port it entered by, though its maps towards the other
        // switches are its neighbours'.
        let end_facing = |node: u32, port: u8| {
            let pi = f.nodes[node as usize].first_port + port as u32;
            let peer = f.ports[pi as usize].peer;
            port > 0 && peer != NONE && g.sw_of_node[f.ports[peer as usize].node as usize] == NONE
        };
        for m in maps.iter_mut().filter(|m| end_facing(m.node, m.in_port) && end_facing(m.node, m.out_port)) {
            for v in m.vl.iter_mut() {
                *v = (*v + m.in_port) % nvl;
            }
        }
        let narrow: Vec<bool> = (0..f.ports.len())
            .map(|i| {
                let p = &f.ports[i];
                (i + salt) % 3 == 0 && end_facing(p.node, p.num) && g.sw_of_node[p.node as usize] != NONE
            })
            .collect();
        narrow_ports(&mut fabric, |i| narrow[i]);
    }
    let f = &fabric;
    let routing = |whole: bool| {
        let mut r = Routing::single_vl(lfts.clone());
        r.path_sl = path_sl_box(ClassSl { table: table.clone(), whole });
        r.sl2vl = maps.clone().into();
        r
    };
    let (by_table, by_pair) = (routing(true), routing(false));
    let opts = VerifyOptions { switch_destinations, ..Default::default() };
    let v = verify(f, &by_table, &opts);
    prop_assert_eq!(findings(&v), findings(&verify(f, &by_pair, &opts)));
    prop_assert_eq!(findings(&verify_unshared(f, &by_table, &opts)), findings(&v));
    if bad == 0 {
        let got: BTreeSet<ChannelDep> = channel_dependencies(f, &by_table, &opts).into_iter().collect();
        prop_assert_eq!(got, reference_deps(f, &by_pair, switch_destinations));
        prop_assert_eq!((v.vls_used, v.vl_violations > 0), reference_vls(f, &by_pair, switch_destinations));
    }
    Ok(())
}

/// A table of the wrong shape fails the verification, saying so.
#[test]
fn a_table_of_the_wrong_shape_fails_verification() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let d = tori(2..4, 0..2).new_tree(&mut runner).expect("draw").current();
    let g = Graph::new(&d.fabric);
    let mut t = class_table(&d, 7, 4, 0, 0);
    t.class_of.truncate(d.fabric.max_lid as usize);
    let mut r = Routing::single_vl(shortest_lfts_by(&d.fabric, &g, |_, t| t as usize));
    r.path_sl = path_sl_box(ClassSl { table: RArc::new(t), whole: true });
    let v = verify(&d.fabric, &r, &VerifyOptions::default());
    assert!(!v.ok() && v.vl_violations > 0, "{v:?}");
    assert!(v.examples.first().is_some_and(|e| e.contains("unusable table") && e.contains("cover LIDs")), "{:?}", v.examples);
}
