//! Mesh analysis finds generated meshes and tori (also with their cables
//! on shuffled ports), refuses random and faulty fabrics, and its
//! dimension-ordered paths need fewer layers on a shuffled torus.

mod common;

use sm_topology::gen;
use smcore_kit::conformance::{cases, check, Case, Expect, Family};
use smcore_kit::Graph;
use smcore_lash::mesh::{analyse, Dim};
use smcore_lash::{Lash, LashConfig, PathChoice};

fn dims(list: &[(usize, bool)]) -> Vec<Dim> {
    list.iter()
        .map(|&(size, closed)| Dim { size, closed })
        .collect()
}

fn sorted(mut v: Vec<Dim>) -> Vec<Dim> {
    v.sort_by_key(|d| (d.size, d.closed));
    v
}

#[test]
fn detects_meshes_and_tori() {
    type Want<'a> = (&'a [usize], bool, &'a [(usize, bool)]);
    let want: &[Want] = &[
        (&[5, 4], false, &[(5, true), (2, false), (2, false)]), // a ring of 4 is a 2x2 face
        (&[6, 3], false, &[(6, true), (3, true)]),
        (&[4, 3], true, &[(4, false), (3, false)]),
        (&[3, 3, 3], false, &[(3, true), (3, true), (3, true)]),
        (&[5, 5, 5], false, &[(5, true), (5, true), (5, true)]),
        (&[3, 3, 2], true, &[(3, false), (3, false), (2, false)]),
        (&[6, 5, 3], true, &[(6, false), (5, false), (3, false)]),
        (&[4, 4, 4], false, &[(2, false); 6]),
    ];
    for &(d, open, expect) in want {
        for shuffle in [None, Some(3)] {
            let topo = match shuffle {
                None => gen::torus(d, 1, open).unwrap().0,
                Some(seed) => common::shuffled_torus(d, 1, open, seed),
            };
            let f = common::snap(&topo);
            let m = analyse(&Graph::new(&f)).unwrap_or_else(|e| panic!("{d:?} open={open}: {e}"));
            assert_eq!(
                sorted(m.dims.clone()),
                sorted(dims(expect)),
                "{d:?} open={open} shuffled={shuffle:?}"
            );
        }
    }
    let hc = common::snap(&gen::hypercube(4, 1).unwrap());
    assert_eq!(
        analyse(&Graph::new(&hc)).unwrap().dims,
        dims(&[(2, false); 4])
    );
}

#[test]
fn refuses_random_and_faulty_fabrics() {
    for c in cases(0).unwrap() {
        let r = analyse(&Graph::new(&c.fabric));
        match c.family {
            Family::Random => assert!(r.is_err(), "{}: {:?}", c.name, r.map(|m| m.describe())),
            Family::Torus | Family::Mesh if c.faulty => assert!(r.is_err(), "{}", c.name),
            Family::Torus | Family::Mesh | Family::Hypercube if !c.faulty => {
                assert!(r.is_ok(), "{}", c.name)
            }
            _ => {}
        }
    }
    for seed in 0..20 {
        let topo = gen::random_irregular(40, 8, 2, 40, seed).unwrap();
        let r = analyse(&Graph::new(&common::snap(&topo)));
        assert!(
            r.is_err(),
            "random fabric {seed} taken for a {}",
            r.unwrap().describe()
        );
    }
}

#[test]
fn dimension_order_needs_fewer_layers_on_a_shuffled_torus() {
    let topo = common::shuffled_torus(&[5, 5, 5], 1, false, 7);
    let f = common::snap(&topo);
    let case = Case {
        name: "shuffled-5x5x5".into(),
        family: Family::Torus,
        faulty: false,
        topology: topo,
        fabric: f,
    };
    let layers = |mesh: bool, choice: PathChoice| {
        let e = Lash::new(LashConfig {
            lash_start_vl: 0,
            do_mesh_analysis: mesh,
        })
        .with_choice(choice);
        check(&e, &case, &Expect::deadlock_free()).unwrap();
        e.plan(&case.fabric).unwrap().layers
    };
    // Layers alone: the lowest layer first choice in rank order.
    let (with, without) = (
        layers(true, PathChoice::RankOrder),
        layers(false, PathChoice::RankOrder),
    );
    assert!(
        with < without,
        "with mesh analysis {with} layers, without {without}"
    );
    assert!(with <= 3, "{with}");
    // The balancing default may spend up to two more layers.
    let balanced = layers(true, PathChoice::LowestLayer);
    assert!(
        balanced <= with + 2,
        "balanced {balanced}, rank order {with}"
    );
}
