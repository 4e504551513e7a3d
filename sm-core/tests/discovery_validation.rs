//! Discovery takes nothing an SMP answer says on trust: a forged or garbled
//! answer (a port number past the node's ports, a GUID of 0, a node that
//! contradicts itself) is logged and treated as no answer, for nodes known
//! already as for new ones, and the sweep goes on with the rest. Never a
//! panic, whatever the bytes.

use std::collections::HashSet;

use proptest::prelude::*;
use sm_core::sim::SimFabric;
use sm_core::sweep::{self, discover, Guid2Lid, SmpClient, SmpPort, SweepOptions, TransportError};
use sm_mad::mad::{attr, method};
use sm_mad::smp::{self, DATA_LEN};
use sm_mad::{Mad, NodeInfoPacket, NodeInfoRepr, NodeType};
use sm_topology::gen;

/// Parses an SMP, lets `edit` change it, and builds it again.
fn rewrite(mad: &[u8], edit: impl FnOnce(&mut smp::Repr)) -> Option<Vec<u8>> {
    let packet = smp::Packet::new_checked(mad).ok()?;
    let mut repr = smp::Repr::parse(&packet).ok()?;
    edit(&mut repr);
    let mut out = Mad::zeroed();
    repr.emit(&mut out.smp_mut());
    Some(out.0.to_vec())
}

/// The embedded fabric, with every NodeInfo answer of the node `guid`
/// after its first carrying a LocalPortNum past its NumPorts: what a
/// node lying about itself (or a forger on its link) would send.
struct ForgedLocalPort {
    fabric: SimFabric,
    guid: u64,
    seen: usize,
    forged: usize,
}

impl SmpPort for ForgedLocalPort {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        let Some(answer) = self.fabric.handle(mad) else { return Ok(None) };
        let packet = smp::Packet::new_checked(&answer[..]).ok();
        let repr = packet.and_then(|p| smp::Repr::parse(&p).ok());
        let Some(repr) = repr.filter(|r| r.attribute_id == attr::NODE_INFO) else { return Ok(Some(answer)) };
        let Ok(info) = NodeInfoPacket::new_checked(&repr.data[..]).and_then(|p| NodeInfoRepr::parse(&p)) else {
            return Ok(Some(answer));
        };
        if info.node_guid != self.guid {
            return Ok(Some(answer));
        }
        self.seen += 1;
        if self.seen == 1 {
            return Ok(Some(answer));
        }
        self.forged += 1;
        Ok(rewrite(&answer, |r| {
            let mut forged = info;
            forged.local_port_num = info.num_ports.saturating_add(5);
            forged.emit(&mut NodeInfoPacket::new_unchecked(&mut r.data[..]));
        }))
    }
}

#[test]
fn a_known_guid_answering_a_port_past_its_ports_is_ignored_not_a_panic() {
    // Two spines, each leaf cabled to both: a leaf away from the SM is
    // reached from both spines, so the second answer is one of a known
    // GUID.
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let leaf = topo.nodes.iter().position(|n| n.desc == "leaf-2").expect("leaf-2");
    let guid = topo.nodes[leaf].node_guid;
    let mut port = ForgedLocalPort {
        fabric: SimFabric::from_topology(&topo, 0, 1).expect("sim"),
        guid,
        seen: 0,
        forged: 0,
    };
    let mut client = SmpClient::new(&mut port, 1);
    let (fabric, report) = discover(&mut client).expect("the SM's node answers");
    assert!(port.forged > 0, "the forged answer was asked for (seen {})", port.seen);
    // Every node is there, the spine by its honest first answer.
    assert_eq!(fabric.nodes.len(), topo.nodes.len());
    // The lie is refused; the link it came through is then learnt from
    // the leaf's own side, so nothing is missing.
    assert!(fabric.find(guid).is_some());
    assert_eq!(fabric.links().len(), topo.links.len());
    // Refused answers are counted as failures of this sweep.
    assert_ne!(report, Default::default());
    assert_fabric_consistent(&fabric);

    // The whole sweep goes on too.
    let mut port = ForgedLocalPort {
        fabric: SimFabric::from_topology(&topo, 0, 1).expect("sim"),
        guid,
        seen: 0,
        forged: 0,
    };
    let out = sweep::sweep(&mut port, &SweepOptions::default(), &mut Guid2Lid::default()).expect("sweep");
    assert_eq!(out.fabric.nodes.len(), topo.nodes.len());
}

/// Peers in range and symmetric, port lists sized by NumPorts.
fn assert_fabric_consistent(fabric: &sweep::Fabric) {
    let mut guids = HashSet::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        assert!(guids.insert(n.guid), "GUID {:#x} twice", n.guid);
        assert_eq!(n.ports.len(), usize::from(n.num_ports) + 1);
        for (p, port) in n.ports.iter().enumerate() {
            if let Some((m, q)) = port.peer {
                let back = fabric.nodes.get(m).and_then(|m| m.ports.get(usize::from(q))).and_then(|x| x.peer);
                assert_eq!(back, Some((i, p as u8)), "link {i}/{p} -> {m}/{q} is one-sided");
            }
        }
    }
    let _ = fabric.snapshot(0);
    let _ = fabric.to_topology();
}

/// Answers every SMP as a well-formed response whose attribute comes from
/// a script: the request's own TID and attribute, garbage inside.
struct Scripted {
    answers: Vec<Option<Vec<u8>>>,
    next: usize,
}

impl SmpPort for Scripted {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        if self.answers.is_empty() {
            return Ok(None);
        }
        let pick = self.answers[self.next % self.answers.len()].clone();
        self.next += 1;
        let Some(bytes) = pick else { return Ok(None) };
        let mut data = [0u8; DATA_LEN];
        let n = bytes.len().min(DATA_LEN);
        data[..n].copy_from_slice(&bytes[..n]);
        Ok(rewrite(mad, |r| {
            *r = r.response(0, data);
            r.method = method::GET_RESP;
        }))
    }
}

/// A NodeInfo with random fields, GUIDs from a small set so that nodes
/// meet again under the same GUID saying other things.
fn node_info() -> impl Strategy<Value = Vec<u8>> {
    (0u8..4, any::<u8>(), 0u64..6, 0u64..6, any::<u8>()).prop_map(|(kind, ports, guid, port_guid, local)| {
        let info = NodeInfoRepr {
            base_version: 1,
            class_version: 1,
            node_type: match kind {
                0 => NodeType::Ca,
                1 | 2 => NodeType::Switch,
                _ => NodeType::Router,
            },
            num_ports: ports % 12,
            system_image_guid: guid,
            node_guid: guid,
            port_guid,
            partition_cap: 1,
            device_id: 0,
            revision: 0,
            local_port_num: local % 16,
            vendor_id: 0,
        };
        let mut data = vec![0u8; DATA_LEN];
        info.emit(&mut NodeInfoPacket::new_unchecked(&mut data[..]));
        data
    })
}

/// One answer: structured NodeInfo, random bytes (any attribute), a
/// truncated attribute, or silence.
fn answer() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        4 => node_info().prop_map(Some),
        3 => proptest::collection::vec(any::<u8>(), DATA_LEN).prop_map(Some),
        1 => proptest::collection::vec(any::<u8>(), 0..8).prop_map(Some),
        1 => Just(None),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Random answers into discovery, LID assignment and the snapshot:
    /// no panic, and what comes out is a consistent fabric.
    #[test]
    fn random_answers_never_panic_discovery(
        root in node_info(),
        rest in proptest::collection::vec(answer(), 1..40),
    ) {
        // A sane-looking root first, so that the walk goes past it.
        let mut answers = vec![Some(root)];
        answers.extend(rest);
        let mut port = Scripted { answers: answers.clone(), next: 0 };
        let mut client = SmpClient::new(&mut port, 0);
        if let Ok((fabric, _)) = discover(&mut client) {
            assert_fabric_consistent(&fabric);
        }
        let mut port = Scripted { answers, next: 0 };
        let options = SweepOptions { retries: 0, ..SweepOptions::default() };
        if let Ok(out) = sweep::sweep(&mut port, &options, &mut Guid2Lid::default()) {
            assert_fabric_consistent(&out.fabric);
        }
    }
}
