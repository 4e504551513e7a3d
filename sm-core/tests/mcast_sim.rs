//! Multicast on the embedded fabric: groups become trees, trees become MFT
//! blocks in the switches, and a packet flooded by those MFTs reaches every
//! other member exactly once and no one else. Leaving clears what it must
//! and nothing more; on a torus routed by torus-2QoS the groups use the
//! engine's master tree and the unicast + multicast dependencies stay free
//! of credit loops.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use common::{bin_dir, mc_member as member, mc_mgid as mgid, mc_params as params, sm_location, workspace};
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::mcast::groups::join_state;
use sm_core::mcast::program::{program_mfts, HeldMfts};
use sm_core::mcast::tree::{plan, McastPlan, TreeSource};
use sm_core::mcast::McGroups;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{self, Fabric, Guid2Lid, HeldTables, SmpClient, SmpOp, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::forwarding::MftModifier;
use sm_mad::mad::attr;

fn routed(file: &str, engines: &str, config: &Config) -> (SimFabric, OnceOutcome) {
    let topo = sm_topology::parse_file(workspace().join("config/topologies").join(file)).expect("topology");
    let (node, port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, node, port).expect("sim");
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines, dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = {
        let mut p = SimPort::new(&mut sim);
        sm_core::pipeline::once(&mut p, &options, &registry, config, &mut g2l, &mut held).expect("sweep")
    };
    assert!(out.accepted.is_some(), "{file}: {:?}", out.describe());
    (sim, out)
}

/// CA port GUIDs of the fabric, in discovery order.
fn ca_ports(fabric: &Fabric) -> Vec<(usize, u8, u64)> {
    let mut v = Vec::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        if !n.is_switch() {
            for (p, port) in n.ports.iter().enumerate().skip(1) {
                if port.peer.is_some() {
                    v.push((i, p as u8, port.guid));
                }
            }
        }
    }
    v
}

/// The masks the switches hold for `mlid`, read back by SMP.
fn read_masks(sim: &mut SimFabric, fabric: &Fabric, mlid: u16) -> BTreeMap<usize, u16> {
    let mut port = SimPort::new(sim);
    let mut client = SmpClient::new(&mut port, 1);
    let mut out = BTreeMap::new();
    for (i, n) in fabric.nodes.iter().enumerate().filter(|(_, n)| n.is_switch()) {
        let mut mask: u16 = 0;
        for position in 0..=n.num_ports / 16 {
            let Some((m, index, _)) = MftModifier::locate(mlid, position * 16) else { continue };
            let m = m.to_u32().expect("modifier");
            let r = client.run_many(&[SmpOp::get(attr::MULTICAST_FORWARDING_TABLE, m, &n.path)]);
            let data = r.into_iter().next().expect("one").expect("MFT readable");
            let word = u16::from_be_bytes([data[2 * index], data[2 * index + 1]]);
            // Positions beyond 0 are folded into one mask only for the
            // small switches these tests use.
            assert!(position == 0 || word == 0, "test fabrics have < 16 ports");
            mask |= word;
        }
        out.insert(i, mask);
    }
    out
}

/// A switch's SwitchInfo.MulticastFDBTop, read by SMP.
fn read_mft_top(sim: &mut SimFabric, node: &sweep::FabricNode) -> u16 {
    let mut port = SimPort::new(sim);
    let mut client = SmpClient::new(&mut port, 1);
    let r = client.run_many(&[SmpOp::get(attr::SWITCH_INFO, 0, &node.path)]);
    let data = r.into_iter().next().expect("one").expect("SwitchInfo readable");
    let p = sm_mad::SwitchInfoPacket::new_checked(&data[..]).expect("SwitchInfo");
    sm_mad::SwitchInfoRepr::parse(&p).expect("SwitchInfo").multicast_fdb_top
}

/// Floods one packet from CA port (`node`, `port`) by the MFT masks and
/// counts copies per CA port received.
fn flood(fabric: &Fabric, masks: &BTreeMap<usize, u16>, from: (usize, u8)) -> BTreeMap<(usize, u8), usize> {
    let mut got = BTreeMap::new();
    let Some(first) = fabric.nodes[from.0].ports[from.1 as usize].peer else { return got };
    let mut queue = VecDeque::from([first]);
    let mut steps = 0;
    while let Some((sw, in_port)) = queue.pop_front() {
        steps += 1;
        assert!(steps < 100_000, "flooding does not end: the MFTs hold a cycle");
        let mask = masks.get(&sw).copied().unwrap_or(0);
        for out in 1..=fabric.nodes[sw].num_ports {
            if out == in_port || mask & (1 << out) == 0 {
                continue;
            }
            let Some((peer, pp)) = fabric.nodes[sw].ports[out as usize].peer else { continue };
            if fabric.nodes[peer].is_switch() {
                queue.push_back((peer, pp));
            } else {
                *got.entry((peer, pp)).or_insert(0) += 1;
            }
        }
    }
    got
}

fn program(sim: &mut SimFabric, fabric: &Fabric, plan: &McastPlan, held: &mut HeldMfts) -> sm_core::mcast::program::MftReport {
    let mut port = SimPort::new(sim);
    let mut client = SmpClient::new(&mut port, 1);
    program_mfts(&mut client, fabric, plan, held)
}

fn assert_floods_exactly(fabric: &Fabric, masks: &BTreeMap<usize, u16>, members: &[(usize, u8, u64)], what: &str) {
    let set: BTreeSet<(usize, u8)> = members.iter().map(|&(n, p, _)| (n, p)).collect();
    for &(n, p, _) in members {
        let got = flood(fabric, masks, (n, p));
        let want: BTreeMap<(usize, u8), usize> =
            set.iter().filter(|&&x| x != (n, p)).map(|&x| (x, 1)).collect();
        let mut got_others = got.clone();
        // The sender's own switch does not send back to it (in port).
        got_others.remove(&(n, p));
        assert_eq!(got_others, want, "{what}: flooding from {n}/{p}");
    }
}

#[test]
fn fat_tree_groups_reach_every_member_once_and_leaving_clears_only_what_it_must() {
    let (mut sim, out) = routed("fat-tree-64.net", "minhop", &Config::default());
    let fabric = out.sweep.fabric.clone();
    let cas = ca_ports(&fabric);
    assert!(cas.len() >= 32);
    let mut groups = McGroups::new();
    // Group A: hosts spread over every leaf; group B: two hosts on one leaf;
    // group C: one host (no link used).
    let a: Vec<_> = cas.iter().copied().step_by(5).collect();
    let b: Vec<_> = cas[..2].to_vec();
    let c: Vec<_> = cas[7..8].to_vec();
    for (n, members, sl) in [(1u8, &a, 0u8), (2, &b, 0), (3, &c, 0)] {
        let mut it = members.iter();
        let first = it.next().expect("a member");
        groups.create(params(n, sl), None, member(first.2)).expect("create");
        for m in it {
            groups.join(&mgid(n), member(m.2)).expect("join");
        }
    }
    let routing = &out.accepted.as_ref().expect("routed").routing;
    let p = plan(&out.snapshot(), routing.mcast_tree.as_ref().into_option(), &groups);
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    assert_eq!(p.trees.len(), 3);
    assert_eq!(p.trees.iter().map(|t| t.source).collect::<Vec<_>>(), [TreeSource::MinHop, TreeSource::Local, TreeSource::Local]);
    // Unicast and multicast together: no credit loop.
    let graph = smcore_kit::graph::Graph::new(&out.snapshot());
    let v = smcore_kit::verify_with_mcast(&out.snapshot(), &graph, routing, &smcore_kit::VerifyOptions::default(), &p.routes());
    assert!(v.ok(), "{:?}", v.failure());

    let mut held = HeldMfts::new();
    let first = program(&mut sim, &fabric, &p, &mut held);
    assert!(first.written > 0 && first.failed == 0, "{first:?}");
    for (n, members) in [(1u8, &a), (2, &b), (3, &c)] {
        let mlid = groups.get(&mgid(n)).expect("group").mlid;
        let masks = read_masks(&mut sim, &fabric, mlid);
        assert_floods_exactly(&fabric, &masks, members, &format!("group {n}"));
        // A tree: the switches used are joined by (switches - 1) links.
        let used: Vec<usize> = masks.iter().filter(|(_, m)| **m != 0).map(|(s, _)| *s).collect();
        let links: usize = used
            .iter()
            .map(|&s| {
                (1..=fabric.nodes[s].num_ports)
                    .filter(|&o| masks[&s] & (1 << o) != 0)
                    .filter(|&o| fabric.nodes[s].ports[o as usize].peer.is_some_and(|(x, _)| fabric.nodes[x].is_switch()))
                    .count()
            })
            .sum();
        assert_eq!(links / 2 + 1, used.len().max(1), "group {n}: MFTs form a tree");
    }
    // Switches that use block 0 have MulticastFDBTop at its end, the others
    // at "none" (the sim's switches support MulticastFDBTop).
    let used: BTreeSet<u32> = p.trees.iter().flat_map(|t| t.switches.keys().copied()).collect();
    assert!(first.tops_set > 0, "{first:?}");
    for (i, n) in fabric.nodes.iter().enumerate().filter(|(_, n)| n.is_switch()) {
        let top = read_mft_top(&mut sim, n);
        let want = if used.contains(&(i as u32)) { 0xC01F } else { 0xBFFF };
        assert_eq!(top, want, "switch {i}");
    }
    // Unchanged membership: nothing to write.
    let again = program(&mut sim, &fabric, &p, &mut held);
    assert_eq!((again.written, again.failed, again.tops_set), (0, 0, 0), "{again:?}");

    // A member of A leaves; B ends. Only blocks with a change are written.
    let gone = a[1];
    groups.leave(&mgid(1), &member(gone.2).port_gid, join_state::FULL).expect("leave");
    let b_mlid = groups.get(&mgid(2)).expect("group").mlid;
    groups.leave(&mgid(2), &member(b[0].2).port_gid, join_state::FULL).expect("leave");
    groups.leave(&mgid(2), &member(b[1].2).port_gid, join_state::FULL).expect("leave");
    assert!(groups.get(&mgid(2)).is_none());
    let p2 = plan(&out.snapshot(), None, &groups);
    let switches = fabric.nodes.iter().filter(|n| n.is_switch()).count() as u64;
    let second = program(&mut sim, &fabric, &p2, &mut held);
    assert!(second.written > 0 && second.written <= switches, "one block per switch at most: {second:?}");
    let a_rest: Vec<_> = a.iter().copied().filter(|m| *m != gone).collect();
    let mlid_a = groups.get(&mgid(1)).expect("group").mlid;
    let masks = read_masks(&mut sim, &fabric, mlid_a);
    assert_floods_exactly(&fabric, &masks, &a_rest, "group 1 after a leave");
    assert!(read_masks(&mut sim, &fabric, b_mlid).values().all(|m| *m == 0), "an ended group's entries are cleared");
}

#[test]
fn torus_groups_follow_the_engine_master_tree_without_credit_loops() {
    let mut config = Config::default();
    config.set_option("torus_config", workspace().join("config/torus-2QoS.conf").display().to_string());
    let (mut sim, out) = routed("torus-4x4x4.net", "torus-2QoS,no_fallback", &config);
    let fabric = out.sweep.fabric.clone();
    let routing = &out.accepted.as_ref().expect("routed").routing;
    let master = routing.mcast_tree.as_ref().into_option().expect("torus-2QoS builds a master tree");
    let cas = ca_ports(&fabric);
    let mut groups = McGroups::new();
    for (n, step, sl) in [(1u8, 3usize, 0u8), (2, 7, 0), (3, 11, 8)] {
        let members: Vec<_> = cas.iter().copied().step_by(step).collect();
        groups.create(params(n, sl), None, member(members[0].2)).expect("create");
        for m in &members[1..] {
            groups.join(&mgid(n), member(m.2)).expect("join");
        }
    }
    let p = plan(&out.snapshot(), Some(master), &groups);
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    assert!(p.trees.iter().all(|t| t.source == TreeSource::Engine), "{:?}", p.trees.iter().map(|t| t.source).collect::<Vec<_>>());
    // Every tree edge is a master tree edge.
    let master_edges: BTreeSet<(u32, u8)> = master.edges.iter().map(|e| (e.node, e.port)).collect();
    for t in &p.trees {
        for (node, ports) in &t.switches {
            for &port in ports {
                let fp = &fabric.nodes[*node as usize].ports[port as usize];
                if fp.peer.is_some_and(|(x, _)| fabric.nodes[x].is_switch()) {
                    assert!(master_edges.contains(&(*node, port)), "MLID {:#x}: {node}/{port} is not in the master tree", t.mlid);
                }
            }
        }
    }
    let graph = smcore_kit::graph::Graph::new(&out.snapshot());
    let v = smcore_kit::verify_with_mcast(&out.snapshot(), &graph, routing, &smcore_kit::VerifyOptions::default(), &p.routes());
    assert!(v.ok(), "{:?}", v.failure());
    let mut held = HeldMfts::new();
    let r = program(&mut sim, &fabric, &p, &mut held);
    assert_eq!(r.failed, 0);
    for (n, step) in [(1u8, 3usize), (2, 7), (3, 11)] {
        let members: Vec<_> = cas.iter().copied().step_by(step).collect();
        let mlid = groups.get(&mgid(n)).expect("group").mlid;
        let masks = read_masks(&mut sim, &fabric, mlid);
        assert_floods_exactly(&fabric, &masks, &members, &format!("torus group {n}"));
    }
}
