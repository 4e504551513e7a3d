//! Proptest strategies that draw fabrics, for the engines' property tests
//! (feature `proptest-fabrics`).
//!
//! [`random_fabrics`] draws connected random irregular fabrics with CAs on
//! every switch, then optionally fails links and switches, and numbers the
//! LIDs with an LMC; [`meshes`] and [`hypercubes`] draw consistently cabled
//! ones (for dimension-ordered engines); [`any_family`] mixes those with
//! tori and fat trees. Each draw is a [`Drawn`] fabric that prints as its
//! parameters, so a failing case reads as the sizes that produced it.
//!
//! ```
//! use proptest::prelude::*;
//! use smcore_kit::strategy::{random_fabrics, Sizes};
//!
//! proptest! {
//!     #![proptest_config(ProptestConfig::with_cases(4))]
//!     #[test]
//!     fn has_switches(f in random_fabrics(Sizes::default())) {
//!         prop_assert!(f.topology.switches().count() >= 1);
//!         prop_assert!(!f.fabric.ports.is_empty());
//!     }
//! }
//! ```

use std::fmt;
use std::ops::Range;

use proptest::prelude::*;
use sm_abi::FabricSnapshot;
use sm_topology::{gen, lids, Topology};

use crate::conformance::RandomFabric;

/// One drawn fabric: how it was made, its topology and its LID-numbered
/// snapshot.
#[derive(Clone)]
pub struct Drawn {
    /// The parameters, e.g. `random RandomFabric { switches: 4, .. }`.
    pub spec: String,
    /// The topology, faults applied.
    pub topology: Topology,
    /// The snapshot with LIDs.
    pub fabric: FabricSnapshot,
}

impl fmt::Debug for Drawn {
    // The snapshot is thousands of lines; the parameters rebuild it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spec)
    }
}

/// Ranges of the random irregular fabrics [`random_fabrics`] draws, one
/// per [`RandomFabric`] field of the same name (the seed is any `u64`).
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Switches before faults.
    pub switches: Range<usize>,
    /// Ports per switch.
    pub radix: Range<usize>,
    /// CAs per switch.
    pub hosts: Range<usize>,
    /// Links added to the random spanning tree.
    pub extra_links: Range<usize>,
    /// Switch-to-switch links to fail.
    pub dead_links: Range<usize>,
    /// Switches to fail (at most all but one).
    pub dead_switches: Range<usize>,
    /// LMC of the snapshot.
    pub lmc: Range<u8>,
}

impl Default for Sizes {
    /// Up to 27 switches of 6 to 13 ports, 1 to 3 CAs each, up to 29
    /// extra links, up to 3 failed links and one failed switch, LMC 0..=2.
    fn default() -> Sizes {
        Sizes {
            switches: 2..28,
            radix: 6..14,
            hosts: 1..4,
            extra_links: 0..30,
            dead_links: 0..4,
            dead_switches: 0..2,
            lmc: 0..3,
        }
    }
}

impl Sizes {
    /// The same sizes without faults.
    pub fn healthy(self) -> Sizes {
        Sizes { dead_links: 0..1, dead_switches: 0..1, ..self }
    }
}

/// The parameters of a random irregular fabric within `sizes` (a drawn
/// [`RandomFabric`] may still be refused by the generator).
pub fn random_specs(sizes: Sizes) -> impl Strategy<Value = RandomFabric> {
    (
        (sizes.switches, sizes.radix, sizes.hosts, sizes.extra_links),
        (any::<u64>(), sizes.dead_links, sizes.dead_switches, sizes.lmc),
    )
        .prop_map(|((switches, radix, hosts, extra_links), (seed, dead_links, dead_switches, lmc))| {
            RandomFabric { switches, radix, hosts, extra_links, seed, dead_links, dead_switches, lmc }
        })
}

/// Random irregular fabrics within `sizes`; parameters the generator
/// refuses (too few ports for the links, more faults than links) are
/// drawn again.
pub fn random_fabrics(sizes: Sizes) -> impl Strategy<Value = Drawn> {
    random_specs(sizes).prop_filter_map("the generator refused these sizes", |spec| {
        let topology = spec.topology()?;
        let fabric = lids::snapshot(&topology, spec.lmc).ok()?;
        Some(Drawn { spec: format!("random {spec:?}"), topology, fabric })
    })
}

fn drawn(spec: String, topology: Topology, lmc: u8) -> Option<Drawn> {
    let fabric = lids::snapshot(&topology, lmc).ok()?;
    Some(Drawn { spec, topology, fabric })
}

/// Open 2D/3D meshes of 1 to 5 switches per dimension (at least 2 in
/// all), each switch with `hosts` CAs.
pub fn meshes(hosts: Range<usize>, lmc: Range<u8>) -> impl Strategy<Value = Drawn> {
    (prop::collection::vec(1usize..6, 2..=3), hosts, lmc).prop_filter_map(
        "a mesh of one switch",
        |(dims, hosts, lmc)| {
            if dims.iter().product::<usize>() < 2 {
                return None;
            }
            let topo = gen::torus(&dims, hosts, true).ok()?.0;
            drawn(format!("mesh {dims:?} hosts {hosts} lmc {lmc}"), topo, lmc)
        },
    )
}

/// Hypercubes of dimension 1 to 5, each switch with `hosts` CAs.
pub fn hypercubes(hosts: Range<usize>, lmc: Range<u8>) -> impl Strategy<Value = Drawn> {
    (1usize..6, hosts, lmc).prop_filter_map("the generator refused", |(dim, hosts, lmc)| {
        drawn(format!("hypercube {dim} hosts {hosts} lmc {lmc}"), gen::hypercube(dim, hosts).ok()?, lmc)
    })
}

/// Wrapped 2D/3D tori of 2 to 5 switches per dimension.
pub fn tori(hosts: Range<usize>, lmc: Range<u8>) -> impl Strategy<Value = Drawn> {
    (prop::collection::vec(2usize..6, 2..=3), hosts, lmc).prop_filter_map(
        "the generator refused",
        |(dims, hosts, lmc)| {
            let topo = gen::torus(&dims, hosts, false).ok()?.0;
            drawn(format!("torus {dims:?} hosts {hosts} lmc {lmc}"), topo, lmc)
        },
    )
}

/// Two-level fat trees (up to 6 leaves and 4 spines) and k-ary n-trees
/// (k 2..=4, n 2..=3).
pub fn fat_trees(lmc: Range<u8>) -> impl Strategy<Value = Drawn> {
    prop_oneof![
        (2usize..7, 1usize..5, 1usize..5, 1usize..3, lmc.clone()).prop_filter_map(
            "the generator refused",
            |(leaves, spines, hosts, uplinks, lmc)| {
                let topo = gen::fat_tree_2level(leaves, spines, hosts, uplinks).ok()?;
                drawn(format!("fat tree {leaves} leaves {spines} spines hosts {hosts} uplinks {uplinks} lmc {lmc}"), topo, lmc)
            }
        ),
        (2usize..5, 2usize..4, lmc).prop_filter_map("the generator refused", |(k, n, lmc)| {
            let topo = gen::kary_ntree(k, n, k).ok()?;
            drawn(format!("{k}-ary {n}-tree lmc {lmc}"), topo, lmc)
        }),
    ]
}

/// Any family: random irregular fabrics within `sizes`, tori, meshes,
/// hypercubes and fat trees, each of the regular ones healthy or with up
/// to `sizes.dead_links` failed links and `sizes.dead_switches` failed
/// switches.
pub fn any_family(sizes: Sizes) -> impl Strategy<Value = Drawn> {
    let hosts = sizes.hosts.clone();
    let lmc = sizes.lmc.clone();
    let faults = (sizes.dead_links.clone(), sizes.dead_switches.clone(), any::<u64>());
    let regular = prop_oneof![
        tori(hosts.clone(), lmc.clone()),
        meshes(hosts.clone(), lmc.clone()),
        hypercubes(hosts, lmc.clone()),
        fat_trees(lmc),
    ];
    prop_oneof![
        random_fabrics(sizes),
        (regular, faults).prop_filter_map("more faults than the fabric has", |(d, (links, switches, seed))| {
            let switches = switches.min(d.topology.switches().count().saturating_sub(1));
            if links == 0 && switches == 0 {
                return Some(d);
            }
            let (topo, _) = gen::with_faults(&d.topology, links, switches, seed).ok()?;
            drawn(format!("{} with {links} links and {switches} switches failed (seed {seed})", d.spec), topo, d.fabric.lmc)
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    /// Every draw is a fabric with switches and CAs holding LIDs, and the
    /// mixed strategy reaches every family.
    #[test]
    fn draws_usable_fabrics_of_every_family() {
        let mut runner = TestRunner::deterministic();
        let strategy = any_family(Sizes::default());
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..400 {
            let d = strategy.new_tree(&mut runner).expect("a fabric is drawn").current();
            assert!(d.topology.switches().count() >= 1, "{d:?}");
            assert!(d.fabric.ports.iter().any(|p| p.lid != 0), "{d:?}");
            seen.insert(d.spec.split([' ', '-']).next().unwrap_or_default().to_string());
        }
        for family in ["random", "torus", "mesh", "hypercube", "fat"] {
            assert!(seen.contains(family), "{family} never drawn: {seen:?}");
        }
        assert!(seen.iter().any(|s| s.parse::<usize>().is_ok()), "no k-ary n-tree drawn: {seen:?}");
    }

    /// Random fabrics stay within their sizes.
    #[test]
    fn random_fabrics_respect_the_sizes() {
        let mut runner = TestRunner::deterministic();
        let sizes = Sizes { switches: 3..6, hosts: 2..3, ..Sizes::default() }.healthy();
        let strategy = random_fabrics(sizes);
        for _ in 0..100 {
            let d = strategy.new_tree(&mut runner).expect("a fabric is drawn").current();
            let n = d.topology.switches().count();
            assert!((3..6).contains(&n), "{d:?}");
            assert_eq!(d.topology.nodes.len(), n * 3, "{d:?}");
        }
    }
}
