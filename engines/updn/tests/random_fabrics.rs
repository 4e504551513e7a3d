//! Properties on random irregular fabrics, with failed links and switches:
//! updn with one root per connected part and dnup reach every pair that
//! is still cabled together, without forwarding or credit loops. With
//! several roots updn either does the same or fails, and then an
//! independent search confirms that the up/down rule really leaves some
//! pair without a route; likewise dnup when only some switches carry CAs.

mod common;

use common::pairs_without_legal_path;
use proptest::prelude::*;
use sm_abi::{FabricSnapshot, RoutingEngine};
use sm_topology::lids;
use smcore_kit::graph::{Graph, Sw};
use smcore_kit::strategy::{random_fabrics, Sizes};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_updn::{rank, DnUp, UpDn};

fn guid(f: &FabricSnapshot, g: &Graph, s: Sw) -> u64 {
    f.nodes[g.switch_nodes[s as usize] as usize].guid
}

/// Either the engine routed cleanly and the independent search agrees every
/// pair has a legal path, or it refused and the search confirms some pair
/// has none.
fn routes_or_none_legal(
    f: &FabricSnapshot,
    result: Result<sm_abi::Routing, sm_abi::EngineError>,
    missing: usize,
) -> Result<(), TestCaseError> {
    match result {
        Ok(r) => {
            prop_assert_eq!(missing, 0);
            check_clean(f, &r)
        }
        Err(e) => {
            prop_assert!(e.reason.contains("without a legal route"), "{e}");
            prop_assert!(missing > 0, "engine failed but every pair has a legal path: {e}");
            Ok(())
        }
    }
}

fn check_clean(f: &FabricSnapshot, r: &sm_abi::Routing) -> Result<(), TestCaseError> {
    let v = verify(f, r, &VerifyOptions::default());
    prop_assert_eq!(v.unreachable, 0, "{:?}", v.examples);
    prop_assert_eq!(v.looping, 0, "{:?}", v.examples);
    prop_assert!(v.credit_loop.is_none(), "credit loop {:?}", v.credit_loop);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn updn_with_a_root_per_part_reaches_every_connected_pair(
        drawn in random_fabrics(Sizes::default()),
        pick in any::<u64>(),
    ) {
        let f = drawn.fabric;
        let g = Graph::new(&f);
        let (comp, sizes) = rank::components(&g);
        let roots: Vec<u64> = (0..sizes.len() as u32)
            .map(|c| {
                let members: Vec<Sw> = (0..g.switch_count() as Sw).filter(|&s| comp[s as usize] == c).collect();
                guid(&f, &g, members[(pick % members.len() as u64) as usize])
            })
            .collect();
        let r = UpDn::default().with_root_guids(roots).route(&f);
        prop_assert!(r.is_ok(), "{:?}", r.err());
        check_clean(&f, &r.unwrap())?;
    }

    #[test]
    fn updn_with_several_roots_routes_or_proves_it_cannot(
        drawn in random_fabrics(Sizes {
            switches: 3..28,
            hosts: 2..3,
            dead_links: 0..3,
            dead_switches: 0..1,
            lmc: 0..1,
            ..Sizes::default()
        }),
        picks in proptest::collection::vec(any::<u64>(), 2..5),
    ) {
        let f = drawn.fabric;
        let g = Graph::new(&f);
        let mut sws: Vec<Sw> = picks.iter().map(|p| (p % g.switch_count() as u64) as Sw).collect();
        sws.sort_unstable();
        sws.dedup();
        let roots = sws.iter().map(|&s| guid(&f, &g, s)).collect();
        let missing = pairs_without_legal_path(&f, &g, &rank::updn(&f, &g, &sws));
        routes_or_none_legal(&f, UpDn::default().with_root_guids(roots).route(&f), missing)?;
    }

    #[test]
    fn dnup_reaches_every_connected_pair(drawn in random_fabrics(Sizes::default())) {
        let f = drawn.fabric;
        let r = DnUp::default().route(&f);
        prop_assert!(r.is_ok(), "{:?}", r.err());
        check_clean(&f, &r.unwrap())?;
    }

    #[test]
    fn dnup_with_cas_on_some_switches_routes_or_proves_it_cannot(
        drawn in random_fabrics(Sizes { switches: 3..28, hosts: 2..3, lmc: 0..1, ..Sizes::default() }.healthy()),
        bare in proptest::collection::vec(any::<bool>(), 28),
    ) {
        // Unplug the CAs of some switches: ranks then differ and the
        // ranking can have several tops, which the rule cannot cross.
        let mut topo = drawn.topology;
        let switch_nodes: Vec<usize> = topo.switches().collect();
        let unplug: Vec<bool> = (0..topo.nodes.len())
            .map(|i| switch_nodes.iter().position(|&s| s == i).is_some_and(|k| bare[k]))
            .collect();
        let nodes = topo.nodes.clone();
        topo.links.retain(|l| {
            let ca = |n: usize| !nodes[n].is_switch();
            !((unplug[l.a.0] && ca(l.b.0)) || (unplug[l.b.0] && ca(l.a.0)))
        });
        let f = lids::snapshot(&topo, 0).unwrap();
        let g = Graph::new(&f);
        let leaves = rank::ca_switches(&g);
        prop_assume!(!leaves.is_empty());
        let missing = pairs_without_legal_path(&f, &g, &rank::dnup(&f, &g, &leaves));
        routes_or_none_legal(&f, DnUp::default().route(&f), missing)?;
    }

    #[test]
    fn updn_with_detected_roots_routes_cleanly_or_says_none_were_found(
        drawn in random_fabrics(Sizes { switches: 2..20, extra_links: 0..10, lmc: 0..1, ..Sizes::default() }.healthy()),
    ) {
        let f = drawn.fabric;
        match UpDn::default().route(&f) {
            Ok(r) => check_clean(&f, &r)?,
            Err(e) => prop_assert!(
                e.reason.contains("no root switches") || e.reason.contains("without a legal route"),
                "{e}"
            ),
        }
    }
}
