//! The verifier against a straightforward reference: every (source LID,
//! destination LID) path walked hop by hop on its own, on random fabrics of
//! every family with random LFTs (shortest paths, then broken: forwarding
//! loops, black holes, bad ports, missing LIDs and missing LFTs), random
//! path SLs (uniform, declared or not, per path, invalid) and random SL2VL
//! maps and operational VLs. Reachability, loops, hop statistics and link
//! load must be identical; VL violations must be found by both or neither;
//! and on routings without VL violations (the ones the gate can accept)
//! both must agree on whether the channel dependency graph has a cycle, a
//! reported cycle being a real one of the reference's dependencies.
//!
//! Run: `cargo test -p smcore-kit --features proptest-fabrics --test verify_reference`.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use sm_abi::abi_stable::std_types::ROption;
use proptest::strategy::ValueTree;
use sm_abi::{path_sl_box, FabricSnapshot, Lft, PathSl, Routing, Sl2Vl, NONE, NO_ROUTE};
use smcore_kit::graph::{usable, Graph};
use smcore_kit::strategy::{any_family, Drawn, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};

/// splitmix64: the test's own deterministic randomness from one drawn seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn mix(a: u64, b: u64, c: u64) -> u64 {
    let mut r = Rng(a ^ b.rotate_left(21) ^ c.rotate_left(42));
    r.next()
}

/// Path SLs from a hash of (source, destination): `nsl` values, some
/// invalid (> 15) when `invalid` is set; `declared` is the uniform SL told
/// to the verifier (then every path answers it).
struct HashSl {
    seed: u64,
    nsl: u8,
    invalid: bool,
    declared: Option<u8>,
}

impl PathSl for HashSl {
    fn uniform(&self) -> ROption<u8> {
        self.declared.into()
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        if let Some(sl) = self.declared {
            return sl;
        }
        let h = mix(self.seed, slid as u64, dlid as u64);
        if self.invalid && h % 97 == 0 {
            return 16 + (h % 200) as u8;
        }
        (h % self.nsl as u64) as u8
    }
}

/// Shortest-path LFTs (ties broken by LID), then broken at random.
fn random_lfts(f: &FabricSnapshot, g: &Graph, rng: &mut Rng, breakage: u64) -> Vec<Lft> {
    let dm = g.distance_matrix();
    let mut lfts = Vec::new();
    for (s, &node) in g.switch_nodes.iter().enumerate() {
        let n = &f.nodes[node as usize];
        let mut ports = vec![NO_ROUTE; f.max_lid as usize + 1];
        for (lid, &pi) in g.lid_port.iter().enumerate() {
            if pi == NONE || lid == 0 {
                continue;
            }
            let t = g.entry_switch(f, pi);
            if t == NONE {
                continue;
            }
            if t as usize == s {
                ports[lid] = if f.ports[pi as usize].node == node { 0 } else { f.ports[f.ports[pi as usize].peer as usize].num };
                continue;
            }
            let d = dm.get(s as u32, t);
            let next: Vec<u8> = g.sw_ports[s]
                .iter()
                .filter(|p| p.peer_sw != NONE && dm.get(p.peer_sw, t) as u32 + 1 == d as u32)
                .map(|p| p.port)
                .collect();
            if !next.is_empty() {
                ports[lid] = next[lid % next.len()];
            }
        }
        // Breakage: random entries (loops, black holes, ports beyond the
        // switch or down), LFTs cut short, LFTs missing.
        if rng.chance(breakage / 4) {
            continue;
        }
        for p in ports.iter_mut() {
            if rng.chance(breakage) {
                *p = match rng.below(4) {
                    0 => NO_ROUTE,
                    _ => rng.below(n.num_ports as u64 + 3) as u8,
                };
            }
        }
        if rng.chance(breakage / 2) {
            ports.truncate(rng.below(ports.len() as u64) as usize);
        }
        lfts.push(Lft { node, ports: ports.into() });
    }
    lfts
}

/// What the reference computes.
#[derive(Debug, Default)]
struct Reference {
    pairs: u64,
    disconnected: u64,
    unreachable: u64,
    looping: u64,
    non_minimal: u64,
    total_hops: u64,
    total_min_hops: u64,
    max_hops: u32,
    port_load: Vec<u64>,
    vl_violations: u64,
    vls_used: u8,
    /// Channel dependencies: (transmitting port, VL) → (transmitting port, VL).
    deps: HashSet<((u32, u8), (u32, u8))>,
}

enum Fate {
    Delivered,
    Dead,
    Loops,
}

/// Every path on its own: the verifier's definitions, without its sharing.
fn reference(f: &FabricSnapshot, r: &Routing, opts: &VerifyOptions) -> Reference {
    let g = Graph::new(f);
    let nsw = g.switch_count();
    let mut lft: HashMap<u32, &[u8]> = HashMap::new();
    for l in r.lfts.iter() {
        lft.insert(l.node, l.ports.as_slice());
    }
    let mut sl2vl: HashMap<(u32, u8, u8), [u8; 16]> = HashMap::new();
    for e in r.sl2vl.iter() {
        sl2vl.insert((e.node, e.in_port, e.out_port), e.vl);
    }
    let mapped: HashSet<u32> = r.sl2vl.iter().map(|e| e.node).collect();
    let vl_of = |node: u32, i: u8, o: u8, sl: u8| -> u8 { sl2vl.get(&(node, i, o)).map_or(sl, |m| m[sl as usize]) };
    // The dependency matrices hold the VLs below this bound (see
    // `verify_with_mcast`): routings without VL violations stay below it.
    let uniform = r.path_sl.uniform().into_option().filter(|&sl| sl <= 15);
    let vls: u8 = if r.sl2vl.is_empty() {
        match uniform {
            Some(sl) => sl + 1,
            None => f.ports.iter().map(|p| p.op_vls).max().unwrap_or(1).clamp(1, 15),
        }
    } else {
        let mut max = 0;
        for e in r.sl2vl.iter().filter(|e| (e.node as usize) < f.nodes.len()) {
            max = max.max(e.vl.iter().copied().filter(|&v| v < 15).max().unwrap_or(0));
        }
        // Pairs of a mapped switch without an entry use SL n → VL n.
        for &node in &mapped {
            if (node as usize) < f.nodes.len() {
                let w = f.nodes[node as usize].num_ports as usize + 1;
                if r.sl2vl.iter().filter(|e| e.node == node && (e.in_port as usize) < w && (e.out_port as usize) < w).map(|e| (e.in_port, e.out_port)).collect::<HashSet<_>>().len() < w * w {
                    max = 14;
                }
            }
        }
        max + 1
    };
    let mut out = Reference { port_load: vec![0; f.ports.len()], ..Default::default() };
    let mut dist = vec![0u8; nsw];
    let mut queue = Vec::new();
    for (lid, &dp) in g.lid_port.iter().enumerate() {
        if dp == NONE || lid == 0 {
            continue;
        }
        let dest_is_end = f.nodes[f.ports[dp as usize].node as usize].kind.is_end_node();
        if !dest_is_end && !opts.switch_destinations {
            continue;
        }
        let lid = lid as u16;
        let t = g.entry_switch(f, dp);
        if t != NONE {
            g.bfs(t, &mut dist, &mut queue);
        }
        let is_end = dest_is_end as u32;
        for &sp in &g.end_ports {
            if sp == dp {
                continue;
            }
            let src = &f.ports[sp as usize];
            let e = g.entry_switch(f, sp);
            if e == NONE {
                if src.peer == dp {
                    out.pairs += 1;
                    out.total_hops += 1;
                    out.total_min_hops += 1;
                    out.max_hops = out.max_hops.max(1);
                } else {
                    out.disconnected += 1;
                }
                continue;
            }
            if t == NONE || dist[e as usize] == u8::MAX {
                out.disconnected += 1;
                continue;
            }
            out.pairs += 1;
            // The switch-to-switch and last links the path transmits on.
            let mut links = Vec::new();
            let mut seen = vec![false; nsw];
            let mut s = e;
            let fate = loop {
                if std::mem::replace(&mut seen[s as usize], true) {
                    break Fate::Loops;
                }
                let node = g.switch_nodes[s as usize];
                let n = &f.nodes[node as usize];
                let Some(&o) = lft.get(&node).and_then(|l| l.get(lid as usize)) else { break Fate::Dead };
                if o == 0 {
                    break if n.first_port == dp { Fate::Delivered } else { Fate::Dead };
                }
                if o > n.num_ports {
                    break Fate::Dead;
                }
                let pi = n.first_port + o as u32;
                if !usable(f, pi) {
                    break Fate::Dead;
                }
                let peer = f.ports[pi as usize].peer;
                links.push((s, o, pi));
                match g.sw_of_node[f.ports[peer as usize].node as usize] {
                    NONE if peer == dp => break Fate::Delivered,
                    NONE => break Fate::Dead,
                    next => s = next,
                }
            };
            match fate {
                Fate::Loops => out.looping += 1,
                Fate::Dead => out.unreachable += 1,
                Fate::Delivered => {
                    let sw_hops = links.len() as u32 - is_end;
                    let hops = 1 + sw_hops + is_end;
                    let min = 1 + dist[e as usize] as u32 + is_end;
                    out.total_hops += hops as u64;
                    out.total_min_hops += min as u64;
                    out.max_hops = out.max_hops.max(hops);
                    out.non_minimal += (hops > min) as u64;
                    if dest_is_end {
                        for &(_, _, pi) in &links {
                            out.port_load[pi as usize] += 1;
                        }
                    }
                    for off in 0..src.lid_count().max(1) {
                        let sl = r.path_sl.path_sl(src.lid + off as u16, lid);
                        if sl > 15 {
                            out.vl_violations += 1;
                            continue;
                        }
                        let mut in_port = f.ports[src.peer as usize].num;
                        let mut in_chan: Option<(u32, u8)> = None;
                        for &(s, o, pi) in &links {
                            let node = g.switch_nodes[s as usize];
                            let vl = vl_of(node, in_port, o, sl);
                            if let Some((from, ivl)) = in_chan {
                                if ivl < vls && vl < vls {
                                    out.deps.insert(((from, ivl), (pi, vl)));
                                }
                            }
                            if vl >= 15 {
                                out.vl_violations += 1;
                                break;
                            }
                            if vl >= f.ports[pi as usize].op_vls.max(1) {
                                out.vl_violations += 1;
                            }
                            out.vls_used = out.vls_used.max(vl + 1);
                            in_chan = Some((pi, vl));
                            in_port = f.ports[f.ports[pi as usize].peer as usize].num;
                        }
                    }
                }
            }
        }
    }
    out
}

/// Kahn: does the dependency graph have a cycle?
fn has_cycle(deps: &HashSet<((u32, u8), (u32, u8))>) -> bool {
    let mut indeg: HashMap<(u32, u8), usize> = HashMap::new();
    let mut succ: HashMap<(u32, u8), Vec<(u32, u8)>> = HashMap::new();
    for &(a, b) in deps {
        indeg.entry(a).or_insert(0);
        *indeg.entry(b).or_insert(0) += 1;
        succ.entry(a).or_default().push(b);
    }
    let mut ready: Vec<(u32, u8)> = indeg.iter().filter(|(_, &d)| d == 0).map(|(&c, _)| c).collect();
    let mut done = 0;
    while let Some(c) = ready.pop() {
        done += 1;
        for &w in succ.get(&c).map(|v| v.as_slice()).unwrap_or(&[]) {
            let d = indeg.get_mut(&w).expect("counted");
            *d -= 1;
            if *d == 0 {
                ready.push(w);
            }
        }
    }
    done < indeg.len()
}

/// A random routing on a drawn fabric, with the fabric's operational VLs
/// perturbed.
fn routing_for(d: &Drawn, seed: u64) -> (FabricSnapshot, Routing, VerifyOptions) {
    let mut rng = Rng(seed);
    let mut f = d.fabric.clone();
    let g = Graph::new(&f);
    // Half the cases keep healthy shortest paths (so credit loops and VL
    // mapping get exercised on complete routings too).
    let breakage = if rng.chance(50) { 0 } else { 1 + rng.below(12) };
    let lfts = random_lfts(&f, &g, &mut rng, breakage);
    let mut r = Routing::single_vl(lfts);
    let nsl = 1 + rng.below(8) as u8;
    r.path_sl = match rng.below(5) {
        0 => path_sl_box(HashSl { seed: 0, nsl: 1, invalid: false, declared: Some(0) }),
        1 => path_sl_box(HashSl { seed: 0, nsl: 1, invalid: false, declared: Some(rng.below(4) as u8) }),
        2 => path_sl_box(HashSl { seed: rng.next(), nsl: 1, invalid: false, declared: None }),
        3 => path_sl_box(HashSl { seed: rng.next(), nsl, invalid: false, declared: None }),
        _ => path_sl_box(HashSl { seed: rng.next(), nsl, invalid: true, declared: None }),
    };
    if rng.chance(50) {
        let nvl = 1 + rng.below(8);
        let dense = rng.chance(50);
        for &node in &g.switch_nodes {
            if !dense && !rng.chance(50) {
                continue;
            }
            let w = f.nodes[node as usize].num_ports;
            for i in 0..=w {
                for o in 1..=w {
                    if !dense && !rng.chance(30) {
                        continue;
                    }
                    let mut vl = [0u8; 16];
                    for v in vl.iter_mut() {
                        *v = if rng.chance(2) { 15 } else { rng.below(nvl) as u8 };
                    }
                    r.sl2vl.push(Sl2Vl { node, in_port: i, out_port: o, vl });
                }
            }
        }
    }
    if rng.chance(30) {
        for p in f.ports.iter_mut() {
            if rng.chance(20) {
                p.op_vls = 1 + rng.below(8) as u8;
            }
        }
    }
    let opts = VerifyOptions { switch_destinations: rng.chance(30), ..Default::default() };
    (f, r, opts)
}

fn small() -> Sizes {
    Sizes { switches: 2..14, hosts: 1..3, extra_links: 0..16, ..Sizes::default() }
}

fn hosts() -> Sizes {
    Sizes { switches: 2..10, hosts: 2..5, extra_links: 0..8, ..Sizes::default() }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn verifier_equals_the_path_by_path_reference(d in any_family(small()), seed in any::<u64>()) {
        let (f, r, opts) = routing_for(&d, seed);
        agrees(&f, &r, &opts)?;
    }

    /// Healthy shortest paths on one SL, several hosts per switch (so the
    /// verifier resolves each switch's destinations as one chunk), and one
    /// switch's LFT cut short: the LIDs past its end are missing there.
    #[test]
    fn a_cut_short_lft_fails_its_missing_lids(d in any_family(hosts()), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let g = Graph::new(&d.fabric);
        let mut lfts = random_lfts(&d.fabric, &g, &mut rng, 0);
        let cut = rng.below(lfts.len() as u64) as usize;
        let len = lfts[cut].ports.len() as u64;
        let keep = 1 + rng.below(len.saturating_sub(1).max(1)) as usize;
        let mut ports: Vec<u8> = lfts[cut].ports.iter().copied().collect();
        ports.truncate(keep);
        lfts[cut].ports = ports.into();
        agrees(&d.fabric, &Routing::single_vl(lfts), &VerifyOptions::default())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One SL on every path, healthy shortest paths, several hosts per
    /// switch, and one switch port facing an end port operating fewer VLs
    /// than the SL needs: the last hops into that end port are violations,
    /// found on the chunked single-SL path as the reference finds them
    /// (the other properties rarely narrow just that port).
    #[test]
    fn a_last_hop_on_a_vl_its_port_lacks_is_a_violation(d in any_family(hosts()), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let mut f = d.fabric.clone();
        let g = Graph::new(&f);
        let lfts = random_lfts(&f, &g, &mut rng, 0);
        let facing: Vec<usize> = (0..f.ports.len())
            .filter(|&i| {
                let p = &f.ports[i];
                g.sw_of_node[p.node as usize] != NONE
                    && p.num != 0
                    && usable(&f, i as u32)
                    && f.nodes[f.ports[p.peer as usize].node as usize].kind.is_end_node()
            })
            .collect();
        prop_assume!(!facing.is_empty());
        for p in f.ports.iter_mut() {
            p.op_vls = 4;
        }
        let narrow = facing[rng.below(facing.len() as u64) as usize];
        f.ports[narrow].op_vls = 1;
        let mut r = Routing::single_vl(lfts);
        r.path_sl = path_sl_box(HashSl { seed: 0, nsl: 1, invalid: false, declared: Some(2) });
        let opts = VerifyOptions::default();
        // Unless no path reaches that end port (a cut-off part).
        prop_assume!(reference(&f, &r, &opts).vl_violations > 0);
        agrees(&f, &r, &opts)?;
    }
}

/// What the verifier finds equals what the reference finds (see the
/// module's text for what must agree).
fn agrees(f: &FabricSnapshot, r: &Routing, opts: &VerifyOptions) -> Result<(), TestCaseError> {
    let v = verify(f, r, opts);
    let want = reference(f, r, opts);
    prop_assert_eq!(v.pairs, want.pairs);
    prop_assert_eq!(v.disconnected, want.disconnected);
    prop_assert_eq!(v.unreachable, want.unreachable);
    prop_assert_eq!(v.looping, want.looping);
    prop_assert_eq!(v.non_minimal, want.non_minimal);
    prop_assert_eq!(v.total_hops, want.total_hops);
    prop_assert_eq!(v.total_min_hops, want.total_min_hops);
    prop_assert_eq!(v.max_hops, want.max_hops);
    prop_assert_eq!(&v.port_load, &want.port_load);
    prop_assert_eq!(v.vl_violations > 0, want.vl_violations > 0, "violations {} vs {}", v.vl_violations, want.vl_violations);
    prop_assert_eq!(v.vls_used, want.vls_used);
    prop_assert!(v.credit_loops_checked);
    if want.vl_violations == 0 {
        prop_assert_eq!(v.credit_loop.is_some(), has_cycle(&want.deps), "{:?}", v.credit_loop);
        if let Some(cl) = &v.credit_loop {
            prop_assert!(!cl.cycle.is_empty());
            for (i, &a) in cl.cycle.iter().enumerate() {
                let b = cl.cycle[(i + 1) % cl.cycle.len()];
                prop_assert!(want.deps.contains(&(a, b)), "{:?} -> {:?} is no dependency of the reference", a, b);
            }
            let distinct: HashSet<_> = cl.cycle.iter().collect();
            prop_assert_eq!(distinct.len(), cl.cycle.len());
        }
    }
    Ok(())
}

/// The generator above does produce the cases the property is about.
#[test]
fn the_draws_cover_broken_and_multi_sl_routings() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (any_family(small()), any::<u64>());
    let (mut broken, mut loops, mut credit, mut walked) = (0, 0, 0, 0);
    for _ in 0..60 {
        let (d, seed) = strategy.new_tree(&mut runner).expect("draw").current();
        let (f, r, opts) = routing_for(&d, seed);
        let v = verify(&f, &r, &opts);
        broken += (v.unreachable > 0) as u32;
        loops += (v.looping > 0) as u32;
        credit += (v.credit_loop.is_some() && v.vl_violations == 0) as u32;
        walked += (r.path_sl.uniform().is_none() && v.vl_violations == 0 && v.vls_used > 1) as u32;
    }
    assert!(broken > 0 && loops > 0 && credit > 0 && walked > 0, "broken {broken} loops {loops} credit {credit} walked {walked}");
}
