//! LID assignment and the flat snapshot.

use proptest::prelude::*;
use sm_abi::{NodeKind, PortState, MAX_UNICAST_LID, NONE};
use sm_topology::lids::snapshot;
use sm_topology::{gen, Topology, TopologyError};

fn ok<T>(r: Result<T, TopologyError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Every property the snapshot promises, checked against its topology.
fn check(t: &Topology, lmc: u8) {
    let s = ok(snapshot(t, lmc));
    assert_eq!(s.lmc, lmc);
    assert_eq!(s.nodes.len(), t.nodes.len());
    let total: usize = t.nodes.iter().map(|n| n.num_ports as usize + 1).sum();
    assert_eq!(s.ports.len(), total);

    let mut ranges: Vec<(u32, u32, usize)> = Vec::new();
    let mut expected_next = 1u32;
    for (i, (n, tn)) in s.nodes.iter().zip(&t.nodes).enumerate() {
        assert_eq!(
            (n.guid, n.kind, n.num_ports, n.description.as_str()),
            (tn.node_guid, tn.kind, tn.num_ports, tn.desc.as_str())
        );
        for p in 0..=n.num_ports {
            let port = s.port_of(i as u32, p).expect("port slot");
            assert_eq!((port.node, port.num), (i as u32, p));
            assert_eq!(port.guid, tn.port_guid(p));
            let peer = t.peer(i, p);
            match peer {
                Some((pn, pp)) => {
                    assert_eq!(port.peer, s.port_index(pn as u32, pp));
                    assert_eq!(s.ports[port.peer as usize].peer, s.port_index(i as u32, p));
                    assert_eq!(port.state, PortState::Active);
                    assert!(port.width > 0 && port.speed > 0);
                }
                None => {
                    assert_eq!(port.peer, NONE);
                    let sw0 = p == 0 && n.kind == NodeKind::Switch;
                    assert_eq!(port.state, if sw0 { PortState::Active } else { PortState::Down });
                }
            }
            let wants_lid =
                if n.kind == NodeKind::Switch { p == 0 } else { p != 0 && peer.is_some() };
            if wants_lid {
                let count = 1u32 << port.lmc;
                assert_eq!(port.lmc, if n.kind == NodeKind::Switch { 0 } else { lmc });
                assert!(port.lid != 0);
                assert_eq!(port.lid as u32 % count, 0, "aligned block");
                assert!(port.lid as u32 >= expected_next, "LIDs follow node order");
                expected_next = port.lid as u32 + count;
                ranges.push((port.lid as u32, port.lid as u32 + count - 1, i));
            } else {
                assert_eq!(port.lid, 0);
            }
        }
    }
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].1 < w[1].0, "LID ranges overlap: {w:?}");
    }
    assert_eq!(s.max_lid as u32, ranges.last().map(|r| r.1).unwrap_or(0));
    let first_ca = t
        .nodes
        .iter()
        .enumerate()
        .find(|(i, n)| n.kind == NodeKind::Ca && t.links_of(*i).next().is_some())
        .map(|(i, _)| i as u32)
        .unwrap_or(NONE);
    assert_eq!(s.sm_node, first_ca);
    assert_eq!(s.end_ports().count(), t.end_nodes().map(|e| t.links_of(e).count()).sum::<usize>());
}

#[test]
fn fat_tree_lids_lmc0() {
    let t = ok(gen::fat_tree_2level(2, 2, 3, 2));
    let s = ok(snapshot(&t, 0));
    // Hosts first (6 LIDs), then 4 switches: 1..=10 with no holes.
    let mut lids: Vec<u16> = s.ports.iter().filter(|p| p.lid != 0).map(|p| p.lid).collect();
    lids.sort_unstable();
    assert_eq!(lids, (1..=10).collect::<Vec<u16>>());
    assert_eq!(s.max_lid, 10);
    assert_eq!(s.sm_node, 0);
    assert!(s
        .ports
        .iter()
        .filter(|p| p.peer != NONE)
        .all(|p| p.op_vls == 8 && p.width == 4 && p.speed == 4));
    check(&t, 0);
}

#[test]
fn lmc_blocks_are_aligned() {
    let t = ok(gen::fat_tree_2level(2, 1, 2, 1));
    let s = ok(snapshot(&t, 2));
    // Hosts: 4, 8, 12, 16 (1..3 skipped for alignment); switches 20, 21, 22.
    let lids: Vec<u16> = s.ports.iter().filter(|p| p.lid != 0).map(|p| p.lid).collect();
    assert_eq!(lids, vec![4, 8, 12, 16, 20, 21, 22]);
    assert_eq!(s.max_lid, 22);
    for lmc in 0..=3 {
        check(&t, lmc);
    }
}

#[test]
fn disconnected_hosts_get_no_lid() {
    let base = ok(gen::fat_tree_2level(3, 2, 2, 2));
    let (t, _) = ok(gen::with_faults(&base, 0, 2, 4));
    check(&t, 1);
    let s = ok(snapshot(&t, 1));
    let stranded = t.end_nodes().filter(|&e| t.links_of(e).next().is_none()).count();
    assert!(stranded > 0);
    assert_eq!(s.end_ports().count(), t.end_nodes().count() - stranded);
}

#[test]
fn no_ca_means_no_sm_node() {
    let t = ok(gen::hypercube(2, 0));
    let s = ok(snapshot(&t, 0));
    assert_eq!(s.sm_node, NONE);
    assert_eq!(s.max_lid, 4);
}

#[test]
fn lid_space_exhaustion_is_an_error() {
    // 384 hosts x 128 LIDs = 49152 > 0xbfff.
    let t = ok(gen::fat_tree_2level(16, 8, 24, 8));
    let e = snapshot(&t, 7).expect_err("too many LIDs");
    assert!(matches!(e, TopologyError::LidSpace { needed, .. } if needed > MAX_UNICAST_LID as u32));
    assert!(e.to_string().contains("0xbfff"), "{e}");
    assert!(snapshot(&t, 6).is_ok());
    assert!(matches!(snapshot(&t, 8), Err(TopologyError::Invalid(_))));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn snapshot_properties_on_random_fabrics(
        switches in 1usize..12,
        hosts in 0usize..4,
        lmc in 0u8..=4,
        faults in 0usize..3,
        seed in any::<u64>(),
    ) {
        let t = ok(gen::random_irregular(switches, 6 + hosts, hosts, 2.min(switches.saturating_sub(1)), seed));
        let (t, _) = ok(gen::with_faults(&t, 0, faults.min(switches), seed));
        check(&t, lmc);
    }

    #[test]
    fn snapshot_properties_on_tori(dims in prop::collection::vec(1usize..4, 2..=3), lmc in 0u8..=3, mesh in any::<bool>()) {
        let (t, _) = ok(gen::torus(&dims, 2, mesh));
        check(&t, lmc);
    }
}
