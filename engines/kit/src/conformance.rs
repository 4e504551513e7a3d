//! Conformance checks for engine authors.
//!
//! [`cases`] generates small fabrics of every family smcore knows — fat
//! trees (full, oversubscribed, with missing links), k-ary n-trees, 2D/3D
//! tori and meshes, hypercubes and random irregular graphs, healthy and
//! with faults — and [`check`] runs an engine on one and judges the result
//! with the same verifier the core uses as its gate. A vendor's test is:
//!
//! ```no_run
//! # use sm_abi::{EngineError, FabricSnapshot, Routing, RoutingEngine};
//! # #[derive(Default)]
//! # struct MyEngine;
//! # impl RoutingEngine for MyEngine {
//! #     fn route(&self, _: &FabricSnapshot) -> Result<Routing, EngineError> {
//! #         Err(EngineError::cannot_route("an example"))
//! #     }
//! # }
//! use smcore_kit::conformance::{assert_conformance, Expect};
//!
//! // #[test], in the engine crate's tests/
//! fn conforms() {
//!     assert_conformance(&MyEngine::default(), 0, &Expect::deadlock_free());
//! }
//! # let _ = conforms;
//! ```
//!
//! engine-template/tests/conformance.rs in the smcore repository is such a
//! test.

use sm_abi::{FabricSnapshot, RoutingEngine};
use sm_topology::{gen, lids, Topology, TopologyError};

use crate::verify::{verify, Verification, VerifyOptions};

/// Topology families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Two- or three-level fat trees and k-ary n-trees.
    FatTree,
    /// Tori (wrapped).
    Torus,
    /// Meshes (open).
    Mesh,
    /// Hypercubes.
    Hypercube,
    /// Random irregular graphs.
    Random,
}

/// One generated fabric.
#[derive(Debug, Clone)]
pub struct Case {
    /// Readable name, e.g. `torus-4x4x4-h2`.
    pub name: String,
    /// Family.
    pub family: Family,
    /// Faults were injected.
    pub faulty: bool,
    /// The topology.
    pub topology: Topology,
    /// The snapshot with LIDs.
    pub fabric: FabricSnapshot,
}

/// What a routing must satisfy.
#[derive(Debug, Clone)]
pub struct Expect {
    /// Every connected pair reached, no forwarding loops.
    pub reach_all: bool,
    /// Every path a shortest path.
    pub minimal: bool,
    /// No credit loops.
    pub deadlock_free: bool,
}

impl Expect {
    /// Reachability only.
    pub fn connectivity() -> Expect {
        Expect { reach_all: true, minimal: false, deadlock_free: false }
    }
    /// Reachability and shortest paths (min-hop style engines).
    pub fn minimal() -> Expect {
        Expect { reach_all: true, minimal: true, deadlock_free: false }
    }
    /// Reachability and no credit loops (deadlock-free engines).
    pub fn deadlock_free() -> Expect {
        Expect { reach_all: true, minimal: false, deadlock_free: true }
    }
}

fn case(name: String, family: Family, faulty: bool, topology: Topology, lmc: u8) -> Result<Case, TopologyError> {
    let fabric = lids::snapshot(&topology, lmc)?;
    Ok(Case { name, family, faulty, topology, fabric })
}

fn faulty(base: &Topology, links: usize, switches: usize, seed: u64) -> Result<Topology, TopologyError> {
    Ok(gen::with_faults(base, links, switches, seed)?.0)
}

/// The standard set of small fabrics, with LIDs for the given LMC. Sizes
/// keep a debug-build test run quick while still exercising multi-level
/// trees, wrap-around rings, parallel links and faults.
pub fn cases(lmc: u8) -> Result<Vec<Case>, TopologyError> {
    use Family::*;
    let mut v = Vec::new();
    let ft = gen::fat_tree_2level(6, 3, 4, 3)?;
    v.push(case("fat-tree-6x3-h4".into(), FatTree, false, ft.clone(), lmc)?);
    v.push(case("fat-tree-6x3-h4-2links-down".into(), FatTree, true, faulty(&ft, 2, 0, 7)?, lmc)?);
    v.push(case("fat-tree-4x2-h8-u4-parallel".into(), FatTree, false, gen::fat_tree_2level(4, 2, 8, 4)?, lmc)?);
    v.push(case("fat-tree-2to1".into(), FatTree, false, gen::fat_tree_2level_oversubscribed(6, 2, 12, (2, 1))?, lmc)?);
    let kn = gen::kary_ntree(4, 3, 4)?;
    v.push(case("4-ary-3-tree".into(), FatTree, false, kn.clone(), lmc)?);
    v.push(case("4-ary-3-tree-spine-down".into(), FatTree, true, faulty(&kn, 0, 1, 3)?, lmc)?);
    v.push(case("2-ary-4-tree".into(), FatTree, false, gen::kary_ntree(2, 4, 2)?, lmc)?);
    let (t2, _) = gen::torus(&[5, 4], 2, false)?;
    v.push(case("torus-5x4-h2".into(), Torus, false, t2.clone(), lmc)?);
    v.push(case("torus-5x4-h2-link-down".into(), Torus, true, faulty(&t2, 1, 0, 11)?, lmc)?);
    let (t3, _) = gen::torus(&[3, 3, 3], 2, false)?;
    v.push(case("torus-3x3x3-h2".into(), Torus, false, t3.clone(), lmc)?);
    v.push(case("torus-3x3x3-h2-switch-down".into(), Torus, true, faulty(&t3, 0, 1, 5)?, lmc)?);
    v.push(case("torus-4x2x2-h1".into(), Torus, false, gen::torus(&[4, 2, 2], 1, false)?.0, lmc)?);
    v.push(case("mesh-4x3-h2".into(), Mesh, false, gen::torus(&[4, 3], 2, true)?.0, lmc)?);
    v.push(case("mesh-3x3x2-h1".into(), Mesh, false, gen::torus(&[3, 3, 2], 1, true)?.0, lmc)?);
    let hc = gen::hypercube(4, 2)?;
    v.push(case("hypercube-4-h2".into(), Hypercube, false, hc.clone(), lmc)?);
    v.push(case("hypercube-4-h2-2links-down".into(), Hypercube, true, faulty(&hc, 2, 0, 2)?, lmc)?);
    for seed in 1..=3 {
        let r = gen::random_irregular(16, 8, 3, 10, seed)?;
        v.push(case(format!("random-16-seed{seed}"), Random, false, r, lmc)?);
    }
    let r = gen::random_irregular(24, 10, 2, 20, 42)?;
    v.push(case("random-24-seed42-3links-down".into(), Random, true, faulty(&r, 3, 0, 9)?, lmc)?);
    Ok(v)
}

/// Parameters of a random irregular fabric with faults, for property tests.
#[derive(Debug, Clone, Copy)]
pub struct RandomFabric {
    /// Switches before faults.
    pub switches: usize,
    /// Ports per switch.
    pub radix: usize,
    /// Hosts per switch.
    pub hosts: usize,
    /// Links added to the random spanning tree.
    pub extra_links: usize,
    /// Generator seed (faults use a seed derived from it).
    pub seed: u64,
    /// Switch-to-switch links to remove.
    pub dead_links: usize,
    /// Switches to remove (at most all but one).
    pub dead_switches: usize,
    /// LMC of the snapshot.
    pub lmc: u8,
}

impl RandomFabric {
    /// The fabric, or None when the sizes cannot be cabled or the faults
    /// ask for more links than remain (the generator refuses; a property
    /// test skips such a case).
    pub fn build(&self) -> Option<FabricSnapshot> {
        lids::snapshot(&self.topology()?, self.lmc).ok()
    }

    /// The topology, faults applied (None as for [`RandomFabric::build`]).
    pub fn topology(&self) -> Option<Topology> {
        let topo = gen::random_irregular(self.switches, self.radix, self.hosts, self.extra_links, self.seed).ok()?;
        let dead_switches = self.dead_switches.min(self.switches.saturating_sub(1));
        let (topo, _) = gen::with_faults(&topo, self.dead_links, dead_switches, self.seed ^ 0x5eed).ok()?;
        Some(topo)
    }
}

/// Route one case and judge the result. `Err` carries a one-line reason.
pub fn check(engine: &dyn RoutingEngine, case: &Case, expect: &Expect) -> Result<Verification, String> {
    let routing = sm_abi::guard(|| engine.route(&case.fabric)).map_err(|e| format!("{}: engine failed: {e}", case.name))?;
    let opts = VerifyOptions { credit_loops: expect.deadlock_free, ..Default::default() };
    let v = verify(&case.fabric, &routing, &opts);
    let mut problems = Vec::new();
    if expect.reach_all && (v.unreachable > 0 || v.looping > 0) {
        problems.push(format!("{} unreachable, {} looping of {} pairs", v.unreachable, v.looping, v.pairs));
    }
    if v.vl_violations > 0 {
        problems.push(format!("{} VL violations", v.vl_violations));
    }
    if expect.minimal && v.non_minimal > 0 {
        problems.push(format!("{} pairs not on a shortest path", v.non_minimal));
    }
    if expect.deadlock_free && v.credit_loop.is_some() {
        problems.push("credit loop".to_string());
    }
    if v.pairs == 0 {
        problems.push("no pairs to check".to_string());
    }
    if let Some(p) = table_disagrees(&case.fabric, &routing) {
        problems.push(p);
    }
    if problems.is_empty() {
        Ok(v)
    } else {
        let mut s = format!("{}: {}", case.name, problems.join(", "));
        if let Some(e) = v.examples.first() {
            s.push_str(&format!(" (e.g. {e})"));
        }
        Err(s)
    }
}

/// Where an oracle gives an SL table (the core then verifies and serves the
/// table, never asking the oracle again), what is wrong with it: a shape
/// that does not fit the fabric, or the first pair of LIDs on which it
/// answers otherwise than the oracle's `path_sl`.
pub fn table_disagrees(fabric: &FabricSnapshot, routing: &sm_abi::Routing) -> Option<String> {
    let table = routing.path_sl.sl_table().into_option()?;
    if let Err(e) = table.check(fabric.max_lid) {
        return Some(e.to_string());
    }
    for dlid in 0..=fabric.max_lid {
        for slid in 0..=fabric.max_lid {
            let (t, o) = (table.get(slid, dlid), routing.path_sl.path_sl(slid, dlid));
            if t != o {
                return Some(format!("SL table gives SL {t} for LID {slid} -> {dlid}, path_sl {o}"));
            }
        }
    }
    None
}

/// Run [`check`] on every case of [`cases`]; panic listing every failure.
pub fn assert_conformance(engine: &dyn RoutingEngine, lmc: u8, expect: &Expect) {
    assert_conformance_on(engine, lmc, expect, |_| true)
}

/// [`assert_conformance`] on the cases `filter` keeps.
pub fn assert_conformance_on(engine: &dyn RoutingEngine, lmc: u8, expect: &Expect, filter: impl Fn(&Case) -> bool) {
    let all = match cases(lmc) {
        Ok(c) => c,
        Err(e) => panic!("generating conformance fabrics failed: {e}"),
    };
    let failures: Vec<String> = all.iter().filter(|c| filter(c)).filter_map(|c| check(engine, c, expect).err()).collect();
    assert!(failures.is_empty(), "conformance failures:\n  {}", failures.join("\n  "));
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_abi::abi_stable::std_types::{RArc, ROption};
    use sm_abi::{path_sl_box, PathSl, Routing, SlTable};

    /// A table of one class, SL 1, over the LIDs `covers`; `path_sl`
    /// answers `pair` (or 1).
    struct Oracle {
        covers: usize,
        pair: Option<(u16, u16, u8)>,
    }

    impl PathSl for Oracle {
        fn uniform(&self) -> ROption<u8> {
            ROption::RNone
        }
        fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
            match self.pair {
                Some((s, d, sl)) if (s, d) == (slid, dlid) => sl,
                _ => 1,
            }
        }
        fn sl_table(&self) -> ROption<RArc<SlTable>> {
            ROption::RSome(RArc::new(SlTable { class_of: vec![0; self.covers].into(), classes: 1, sl: vec![1].into() }))
        }
    }

    #[test]
    fn a_table_must_cover_the_fabric_and_agree_with_the_oracle_on_every_pair() {
        let c = cases(0).expect("fabrics").into_iter().next().expect("a case");
        let max = c.fabric.max_lid;
        let with = |o: Oracle| {
            let mut r = Routing::single_vl(Vec::new());
            r.path_sl = path_sl_box(o);
            table_disagrees(&c.fabric, &r)
        };
        assert_eq!(with(Oracle { covers: max as usize + 1, pair: None }), None);
        let short = with(Oracle { covers: max as usize, pair: None }).expect("too short");
        assert!(short.contains("cover LIDs"), "{short}");
        let odd = with(Oracle { covers: max as usize + 1, pair: Some((3, max, 2)) }).expect("one pair differs");
        assert_eq!(odd, format!("SL table gives SL 1 for LID 3 -> {max}, path_sl 2"));
    }
}
