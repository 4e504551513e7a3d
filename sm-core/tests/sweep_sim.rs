//! Discovery, LID assignment and PortInfo programming against the embedded
//! simulated fabric: what the sweep finds must be the topology the fabric
//! was built from, and what it programs must be what the ports hold.

use std::collections::{BTreeMap, HashSet};

use sm_abi::NodeKind;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{
    self, Guid2Lid, SmpClient, SmpPort, SweepOptions, SweepOutcome, TransportError,
};
use sm_mad::mad::attr;
use sm_topology::{gen, Topology, TopologyBuilder};

fn run(fabric: &mut SimFabric, options: &SweepOptions, g2l: &mut Guid2Lid) -> SweepOutcome {
    let mut port = SimPort::new(fabric);
    sweep::sweep(&mut port, options, g2l).expect("the SM's own node answers")
}

fn lmc2() -> SweepOptions {
    SweepOptions {
        lmc: 2,
        ..SweepOptions::default()
    }
}

/// The fabrics every check runs on: (name, topology).
fn fabrics() -> Vec<(&'static str, Topology)> {
    vec![
        (
            "fat tree",
            gen::fat_tree_2level(6, 3, 4, 3).expect("fat tree"),
        ),
        // Radix 2 in x: parallel links; the rest are rings (loops).
        ("torus", gen::torus(&[2, 3, 4], 1, false).expect("torus").0),
        (
            "random",
            gen::random_irregular(12, 8, 2, 6, 11).expect("random"),
        ),
    ]
}

/// Checks the fabric as found against the topology, by GUID, and the LIDs
/// against what the simulated ports hold.
fn check_sweep(name: &str, topo: &Topology, sim: &SimFabric, out: &SweepOutcome, lmc: u8) {
    check_sweep_unreached(name, topo, sim, out, lmc, &[]);
}

/// [`check_sweep`] where the CA ports `unreached` (node index, port) have
/// no cable, so discovery cannot learn their GUIDs.
fn check_sweep_unreached(
    name: &str,
    topo: &Topology,
    sim: &SimFabric,
    out: &SweepOutcome,
    lmc: u8,
    unreached: &[(usize, u8)],
) {
    let found = out.fabric.to_topology();
    let mut expected = topo.clone();
    for &(node, port) in unreached {
        expected.nodes[node].port_guids[usize::from(port)] = 0;
    }
    let diff = expected.differences_by_guid(&found);
    assert!(diff.is_empty(), "{name}: {diff:#?}");
    assert_eq!(out.discovery, Default::default(), "{name}: nothing lost");

    let snap = out.fabric.snapshot(lmc);
    // The same fabric as the offline path describes it, but for LIDs,
    // states and operational VLs (ports are not programmed or activated
    // yet) and node order.
    let offline = sm_topology::lids::snapshot(topo, lmc).expect("offline snapshot");
    let key = |s: &sm_abi::FabricSnapshot, i: u32| {
        let p = &s.ports[i as usize];
        (s.nodes[p.node as usize].guid, p.num)
    };
    let offline_ports: BTreeMap<(u64, u8), u32> = (0..offline.ports.len() as u32)
        .map(|i| (key(&offline, i), i))
        .collect();
    assert_eq!(snap.ports.len(), offline.ports.len(), "{name}");
    for i in 0..snap.ports.len() as u32 {
        let (mine, theirs) = (
            &snap.ports[i as usize],
            &offline.ports[offline_ports[&key(&snap, i)] as usize],
        );
        if mine.guid == 0 && theirs.guid != 0 {
            // Never reached, so nothing is known of it but that it is there.
            assert!(!mine.is_linked() && !theirs.is_linked(), "{name}");
            continue;
        }
        assert_eq!(
            (
                mine.guid,
                mine.op_vls,
                mine.width,
                mine.speed,
                mine.is_linked()
            ),
            (
                theirs.guid,
                // A sweep alone programs no link: ports are still at the
                // reset value, VL0 only (the full sweep raises it).
                theirs.op_vls.min(1),
                theirs.width,
                theirs.speed,
                theirs.is_linked()
            ),
            "{name}: port {:?}",
            key(&snap, i)
        );
        if mine.is_linked() {
            assert_eq!(key(&snap, mine.peer), key(&offline, theirs.peer));
        }
    }
    let mut taken = HashSet::new();
    for (index, port) in snap.ports.iter().enumerate() {
        let node = &snap.nodes[port.node as usize];
        assert_eq!(
            snap.port_index(port.node, port.num) as usize,
            index,
            "{name}: layout"
        );
        if port.is_linked() {
            let peer = &snap.ports[port.peer as usize];
            assert_eq!(peer.peer as usize, index, "{name}: peers both ways");
        }
        let holds = match node.kind {
            NodeKind::Switch => port.num == 0,
            _ => port.num != 0 && port.is_linked(),
        };
        if !holds {
            continue;
        }
        let block = if node.kind == NodeKind::Switch {
            0
        } else {
            lmc
        };
        assert_eq!(
            port.lmc, block,
            "{name}: LMC of {:#x}[{}]",
            node.guid, port.num
        );
        assert_ne!(
            port.lid, 0,
            "{name}: {:#x}[{}] has a LID",
            node.guid, port.num
        );
        assert_eq!(port.lid % (1 << block), 0, "{name}: aligned");
        for lid in port.lid..port.lid + (1 << block) {
            assert!(taken.insert(lid), "{name}: LID {lid:#x} given twice");
        }
        assert!(port.lid + (1 << block) - 1 <= snap.max_lid);
        let index = topo.find_node_by_guid(node.guid).expect("known node");
        assert_eq!(
            sim.port_lid(index, port.num),
            Some(port.lid),
            "{name}: programmed"
        );
    }
}

/// Links between two switches at the same distance from node `root`
/// (directed routes only cross switches).
fn same_round_links(topo: &Topology, root: usize) -> u64 {
    let mut dist = vec![usize::MAX; topo.nodes.len()];
    dist[root] = 0;
    let mut queue = std::collections::VecDeque::from([root]);
    while let Some(n) = queue.pop_front() {
        if n != root && !topo.nodes[n].is_switch() {
            continue;
        }
        for l in &topo.links {
            let far = if l.a.0 == n { l.b.0 } else if l.b.0 == n { l.a.0 } else { continue };
            if dist[far] == usize::MAX {
                dist[far] = dist[n] + 1;
                queue.push_back(far);
            }
        }
    }
    topo.links
        .iter()
        .filter(|l| l.a.0 != l.b.0 && topo.nodes[l.a.0].is_switch() && topo.nodes[l.b.0].is_switch())
        .filter(|l| dist[l.a.0] == dist[l.b.0])
        .count() as u64
}

#[test]
fn sweeps_find_every_node_and_link_and_program_unique_aligned_lids() {
    for (name, topo) in fabrics() {
        let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
        let mut g2l = Guid2Lid::default();
        let first = run(&mut sim, &lmc2(), &mut g2l);
        check_sweep(name, &topo, &sim, &first, 2);
        let ports: u64 = topo.nodes.iter().map(|n| u64::from(n.num_ports)).sum();
        let switches = topo.num_switches() as u64;
        let hosts = topo.nodes.len() as u64 - switches;
        // NodeInfo per node plus one per link seen from its far end first,
        // never a probe through a port already known; a link between two
        // switches of one discovery round is probed from both ends, since
        // the round's probes are in flight together.
        let d = &first.discovery_smps;
        assert_eq!(
            d.gets(attr::NODE_INFO),
            1 + topo.links.len() as u64 + same_round_links(&topo, 0),
            "{name}"
        );
        assert_eq!(d.gets(attr::NODE_DESCRIPTION), topo.nodes.len() as u64);
        assert_eq!(d.gets(attr::SWITCH_INFO), switches);
        let switch_ports: u64 = topo
            .nodes
            .iter()
            .filter(|n| n.is_switch())
            .map(|n| u64::from(n.num_ports) + 1)
            .sum();
        assert_eq!(d.gets(attr::PORT_INFO), switch_ports + hosts, "{name}");
        assert_eq!(first.program_smps.sets(attr::PORT_INFO), switches + hosts);
        assert_eq!(first.lids.fresh as u64, switches + hosts);
        println!(
            "{name}: {} nodes, {} links, {ports} ports: discovery {} SMPs, LID programming {} SMPs",
            topo.nodes.len(),
            topo.links.len(),
            d.sent,
            first.program_smps.sent
        );

        // Nothing changed: the same reads, no Set at all.
        let second = run(&mut sim, &lmc2(), &mut g2l);
        check_sweep(name, &topo, &sim, &second, 2);
        assert_eq!(
            second.program_smps.sent, 0,
            "{name}: second sweep sets nothing"
        );
        assert_eq!(second.discovery_smps.sent, d.sent, "{name}");
        assert_eq!(second.lids.kept, first.lids.fresh);
        println!("{name}: second sweep {} SMPs", second.total_smps());
    }
}

#[test]
fn torus_loops_are_recognised_by_guid() {
    let (topo, _) = gen::torus(&[3, 3, 3], 1, false).expect("torus");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    let out = run(&mut sim, &SweepOptions::default(), &mut Guid2Lid::default());
    let guids: HashSet<u64> = out.fabric.nodes.iter().map(|n| n.guid).collect();
    assert_eq!(guids.len(), topo.nodes.len(), "each node once");
    assert_eq!(out.fabric.nodes.len(), topo.nodes.len());
    // A ring closes on a node found before: its link is known from both
    // ends and the far switch is not expanded a second time.
    let links = out.fabric.links();
    assert_eq!(links.len(), topo.links.len());
    for ((a, pa), (b, pb)) in links {
        assert_eq!(
            out.fabric.nodes[b].ports[usize::from(pb)].peer,
            Some((a, pa))
        );
    }
    assert!(
        topo.links.len() > topo.nodes.len() - 1,
        "the torus has cycles"
    );
}

#[test]
fn multi_port_cas_routers_and_unlinked_ports() {
    let mut b = TopologyBuilder::new();
    let sw0 = b.add_switch("sw0", 8).expect("switch");
    let sw1 = b.add_switch("sw1", 8).expect("switch");
    let sm = b.add_ca("sm-host", 2).expect("ca");
    let dual = b.add_ca("dual-host", 2).expect("ca");
    let half = b.add_ca("half-linked", 2).expect("ca");
    let router = b.add_router("router", 1).expect("router");
    b.link((sm, 1), (sw0, 1)).expect("link");
    b.link((sm, 2), (sw1, 1)).expect("link");
    b.link((dual, 1), (sw0, 2)).expect("link");
    b.link((dual, 2), (sw1, 2)).expect("link");
    b.link((half, 1), (sw1, 3)).expect("link");
    b.link((router, 1), (sw0, 3)).expect("link");
    b.link((sw0, 7), (sw1, 7)).expect("link");
    b.link((sw0, 8), (sw1, 8)).expect("link");
    let topo = b.finish().expect("topology");
    let mut sim = SimFabric::from_topology(&topo, sm, 1).expect("sim");
    let mut g2l = Guid2Lid::default();
    let out = run(&mut sim, &lmc2(), &mut g2l);
    // The half-linked CA's port 2 is never reached: its GUID stays unknown.
    check_sweep_unreached("mixed", &topo, &sim, &out, 2, &[(half, 2)]);
    let snap = out.fabric.snapshot(2);
    let guid = topo.nodes[half].node_guid;
    let node = out.fabric.find(guid).expect("half-linked CA found") as u32;
    let unlinked = snap.port_of(node, 2).expect("slot");
    assert_eq!((unlinked.lid, unlinked.peer), (0, sm_abi::NONE));
    // Both ports of the SM's own CA and of the dual CA have their own LIDs.
    for ca in [sm, dual] {
        for port in 1..=2 {
            assert_ne!(sim.port_lid(ca, port), Some(0));
        }
    }
    assert_eq!(out.fabric.nodes[0].guid, topo.nodes[sm].node_guid);
    assert_eq!(snap.sm_node, 0);
    let second = run(&mut sim, &lmc2(), &mut g2l);
    assert_eq!(second.program_smps.sent, 0);
}

#[test]
fn guid2lid_round_trips_and_is_reused_on_a_fresh_fabric() {
    let topo = gen::random_irregular(10, 8, 2, 5, 3).expect("random");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    let mut g2l = Guid2Lid::default();
    let first = run(&mut sim, &lmc2(), &mut g2l);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("guid2lid");
    g2l.write(&file).expect("write");
    let text = std::fs::read_to_string(&file).expect("read back");
    let line = text.lines().next().expect("a line");
    assert_eq!(
        line.split(' ').map(str::len).collect::<Vec<_>>(),
        [18, 6, 6]
    );
    let read = Guid2Lid::read(&file).expect("parse");
    assert_eq!(read, g2l);
    assert!(Guid2Lid::parse("0x1 0x0 0x0\n", "x").is_err());
    assert!(Guid2Lid::parse("0x1 0x4\n", "x").is_err());
    assert_eq!(
        Guid2Lid::read(&dir.path().join("missing")).expect("empty"),
        Guid2Lid::default()
    );

    // A powered-down fabric comes back with no LIDs, and this time the SM
    // runs elsewhere, so discovery order (and a fresh numbering) differ:
    // the file alone gives every port its old LID.
    let lids = |out: &SweepOutcome| -> BTreeMap<u64, u16> {
        let snap = out.fabric.snapshot(2);
        snap.ports
            .iter()
            .filter(|p| p.lid != 0)
            .map(|p| (p.guid, p.lid))
            .collect()
    };
    let last_host = topo
        .nodes
        .iter()
        .rposition(|n| !n.is_switch())
        .expect("a host");
    let mut reborn = SimFabric::from_topology(&topo, last_host, 1).expect("sim");
    let mut from_file = read.clone();
    let again = run(&mut reborn, &lmc2(), &mut from_file);
    assert_eq!(again.lids.from_file, first.lids.fresh);
    assert_eq!(lids(&again), lids(&first));

    // Without the file the numbering follows the new discovery order;
    // --reassign-lids does the same even with the file.
    let mut renumbered = SimFabric::from_topology(&topo, last_host, 1).expect("sim");
    let options = SweepOptions {
        reassign_lids: true,
        ..lmc2()
    };
    let fresh = run(&mut renumbered, &options, &mut read.clone());
    assert_eq!(fresh.lids.from_file, 0);
    assert_ne!(lids(&fresh), lids(&first));
}

#[test]
fn a_silent_node_is_skipped_and_the_rest_discovered() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let spine = topo
        .nodes
        .iter()
        .position(|n| n.desc.starts_with("spine"))
        .expect("a spine");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    sim.set_answer_loss(spine, 1).expect("node exists");
    let options = SweepOptions {
        retries: 1,
        ..SweepOptions::default()
    };
    let out = run(&mut sim, &options, &mut Guid2Lid::default());
    let guids: HashSet<u64> = out.fabric.nodes.iter().map(|n| n.guid).collect();
    assert!(!guids.contains(&topo.nodes[spine].node_guid));
    assert_eq!(guids.len(), topo.nodes.len() - 1, "every other node");
    assert!(out.discovery.lost_probes > 0);
    assert!(out.discovery_smps.unanswered > 0);
    assert!(out.discovery_smps.retries > 0);

    // Losing every third answer: the retries recover everything (with
    // a window of SMPs in flight, losses hit a batch's requests unevenly,
    // so this takes OpenSM's default of three retries).
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    sim.set_answer_loss(spine, 3).expect("node exists");
    let out = run(&mut sim, &SweepOptions::default(), &mut Guid2Lid::default());
    check_sweep("lossy", &topo, &sim, &out, 0);
    assert!(out.discovery_smps.retries > 0);
}

/// Answers through a real simulated fabric, but mangles every answer to a
/// request of exactly `hops` directed hops: truncated, or overwritten with
/// garbage, alternately.
struct Mangler<'a> {
    inner: SimPort<'a>,
    hops: u8,
    count: u32,
}

impl SmpPort for Mangler<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        let answer = self.inner.send(mad)?;
        let hop_count = mad.get(7).copied();
        Ok(match answer {
            Some(mut bytes) if hop_count == Some(self.hops) => {
                self.count += 1;
                if self.count & 1 == 0 {
                    bytes.truncate(100);
                } else {
                    for (i, b) in bytes.iter_mut().enumerate() {
                        *b = (i as u8).wrapping_mul(37) ^ 0x5A;
                    }
                }
                Some(bytes)
            }
            other => other,
        })
    }
}

#[test]
fn truncated_and_garbage_answers_are_survived() {
    // From host 0: its leaf at 1 hop, spines at 2, other leaves at 3, and
    // the hosts of other leaves at 4, which all answer rubbish.
    let topo = gen::fat_tree_2level(4, 2, 3, 2).expect("fat tree");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    let mut port = Mangler {
        inner: SimPort::new(&mut sim),
        hops: 4,
        count: 0,
    };
    let out = sweep::sweep(
        &mut port,
        &SweepOptions::default(),
        &mut Guid2Lid::default(),
    )
    .expect("the SM's node answers");
    let remote_hosts = 3 * 3;
    assert_eq!(out.fabric.nodes.len(), topo.nodes.len() - remote_hosts);
    assert_eq!(out.discovery.lost_probes, remote_hosts);
    assert!(out.discovery_smps.malformed >= remote_hosts as u64);
    assert_eq!(out.program.failed, 0);
}

/// Gives port `port` of discovered node `node` the LID `lid` behind the
/// SM's back, as a previous SM might have left it.
fn force_lid(sim: &mut SimFabric, out: &SweepOutcome, node: usize, port: u8, lid: u16) {
    use sm_mad::{PhysState, PortInfoPacket, PortInfoRepr, PortState};
    let slot = &out.fabric.nodes[node].ports[usize::from(port)];
    let path = slot.path.clone().expect("reached port");
    let mut sim_port = SimPort::new(sim);
    let mut client = SmpClient::new(&mut sim_port, 0);
    let data = client
        .get(attr::PORT_INFO, u32::from(port), &path)
        .expect("PortInfo");
    let mut info = PortInfoRepr::parse(&PortInfoPacket::new_checked(&data[..]).expect("length"))
        .expect("PortInfo parses");
    info.lid = lid;
    info.port_state = PortState::NoChange;
    info.port_physical_state = PhysState::NoChange;
    let mut data = [0u8; 64];
    info.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
    client
        .set(attr::PORT_INFO, u32::from(port), &path, data)
        .expect("Set");
}

#[test]
fn held_lids_are_kept_when_valid_and_replaced_when_not() {
    let topo = gen::fat_tree_2level(4, 2, 2, 2).expect("fat tree");
    let mut sim = SimFabric::from_topology(&topo, 0, 1).expect("sim");
    let mut g2l = Guid2Lid::default();
    let first = run(&mut sim, &lmc2(), &mut g2l);
    let hosts: Vec<usize> = (0..first.fabric.nodes.len())
        .filter(|&i| !first.fabric.nodes[i].is_switch())
        .collect();
    let lid_of = |out: &SweepOutcome, node: usize| {
        out.fabric.nodes[node].ports[1]
            .info
            .as_ref()
            .map(|i| i.lid)
            .expect("LID")
    };
    // hosts[1] moved to a free aligned block: valid, but guid2lid keeps
    // another LID for it, which wins (OpenSM's `osm_lid_mgr.c`). hosts[3]
    // takes hosts[2]'s LID: hosts[2] keeps it. hosts[4] holds a LID not
    // aligned to LMC 2.
    let (moved, thief, victim, crooked) = (hosts[1], hosts[3], hosts[2], hosts[4]);
    assert!(thief > victim);
    force_lid(&mut sim, &first, moved, 1, 0x400);
    force_lid(&mut sim, &first, thief, 1, lid_of(&first, victim));
    force_lid(&mut sim, &first, crooked, 1, 0x401);
    let second = run(&mut sim, &lmc2(), &mut g2l);
    check_sweep("moved", &topo, &sim, &second, 2);
    assert_eq!(lid_of(&second, moved), lid_of(&first, moved));
    assert_eq!(lid_of(&second, victim), lid_of(&first, victim));
    assert_ne!(lid_of(&second, thief), lid_of(&first, victim));
    assert_eq!(lid_of(&second, crooked) % 4, 0);
    assert_eq!(
        second.program_smps.sets(attr::PORT_INFO),
        3,
        "moved, thief and crooked only"
    );
    let moved_guid = second.fabric.nodes[moved].ports[1].guid;
    let first_lid = lid_of(&first, moved);
    assert_eq!(g2l.entries[&moved_guid], (first_lid, first_lid + 3));
    // Without the file, a valid LID a port holds is kept.
    let third = run(&mut sim, &lmc2(), &mut g2l);
    check_sweep("back", &topo, &sim, &third, 2);
    force_lid(&mut sim, &third, moved, 1, 0x400);
    g2l.entries.remove(&moved_guid);
    let fourth = run(&mut sim, &lmc2(), &mut g2l);
    assert_eq!(lid_of(&fourth, moved), 0x400);
    assert_eq!(g2l.entries[&moved_guid], (0x400, 0x403));
}

#[test]
fn lids_remembered_for_absent_ports_stay_free_and_a_switch_can_host_the_sm() {
    let topo = gen::torus(&[3, 3], 1, true).expect("mesh").0;
    let leaf = topo.switches().next().expect("a switch");
    let mut sim = SimFabric::from_topology(&topo, leaf, 0).expect("sim on a switch");
    let mut g2l = Guid2Lid::parse(
        "# ports of a rack that is powered off today\n\
         0x00000000deadbeef 0x0001 0x0001\n0x00000000deadbeee 0x0004 0x0007\n",
        "test",
    )
    .expect("parses");
    let out = run(&mut sim, &lmc2(), &mut g2l);
    check_sweep("mesh", &topo, &sim, &out, 2);
    assert_eq!(out.fabric.sm_port, 0);
    assert_eq!(out.fabric.nodes[0].guid, topo.nodes[leaf].node_guid);
    let snap = out.fabric.snapshot(2);
    assert!(snap
        .ports
        .iter()
        .all(|p| p.lid != 1 && !(4..=7).contains(&p.lid)));
    assert_eq!(
        g2l.entries[&0xdead_beef],
        (1, 1),
        "absent ports are remembered"
    );
    println!(
        "3x3 mesh from a switch: discovery {} SMPs, programming {}",
        out.discovery_smps.sent, out.program_smps.sent
    );
}

/// The LID the managed port of CA `node` holds in `out`.
fn ca_lid(out: &SweepOutcome, node: usize) -> (u64, u16) {
    out.fabric.nodes[node]
        .ports
        .iter()
        .find_map(|p| p.path.as_ref().and(Some((p.guid, p.info?.lid))))
        .expect("a managed port")
}

/// The LID the simulated port of GUID `guid` holds.
fn sim_lid(sim: &SimFabric, topo: &Topology, guid: u64) -> Option<u16> {
    topo.nodes.iter().enumerate().find_map(|(i, n)| {
        let port = n.port_guids.iter().position(|&g| g == guid)?;
        sim.port_lid(i, port as u8)
    })
}

/// Issue 32, item 2: a host sets its own PortInfo to the LID of a port
/// discovered after it. `guid2lid` remembers that LID for its owner: the
/// owner keeps it, the thief is given back its own, and the file records
/// no theft (OpenSM's `osm_lid_mgr.c`: the file wins; a LID a port holds is
/// kept only when it is persistent for no other GUID).
#[test]
fn a_host_that_sets_itself_another_ports_lid_does_not_keep_it() {
    let topo = gen::fat_tree_2level(6, 3, 4, 3).expect("fat tree");
    let sm = topo.nodes.iter().position(|n| n.kind == NodeKind::Ca).expect("a host");
    let mut sim = SimFabric::from_topology(&topo, sm, 1).expect("sim");
    let mut g2l = Guid2Lid::default();
    let first = run(&mut sim, &SweepOptions::default(), &mut g2l);
    // Hosts in discovery order, the SM's own (node 0) left out.
    let hosts: Vec<usize> = (1..first.fabric.nodes.len()).filter(|&i| !first.fabric.nodes[i].is_switch()).collect();
    let (thief, owner) = (hosts[0], hosts[hosts.len() - 1]);
    let (thief_guid, thief_lid) = ca_lid(&first, thief);
    let (owner_guid, owner_lid) = ca_lid(&first, owner);
    assert_ne!(thief_lid, owner_lid);
    let file = g2l.clone();

    // What the thief's own tools do: write its own PortInfo with the
    // owner's LID.
    let thief_port = first.fabric.nodes[thief].ports.iter().position(|p| p.path.is_some()).expect("managed") as u8;
    force_lid(&mut sim, &first, thief, thief_port, owner_lid);
    assert_eq!(sim_lid(&sim, &topo, thief_guid), Some(owner_lid), "the thief holds the owner's LID");

    let second = run(&mut sim, &SweepOptions::default(), &mut g2l);
    let (_, thief_now) = ca_lid(&second, thief);
    let (_, owner_now) = ca_lid(&second, owner);
    assert_eq!(owner_now, owner_lid, "the owner keeps its LID");
    assert_eq!(thief_now, thief_lid, "the thief gets its own back");
    assert_eq!(g2l, file, "guid2lid records no theft");
    assert_eq!(g2l.entries[&owner_guid].0, owner_lid);
    assert_eq!(g2l.entries[&thief_guid].0, thief_lid);
    assert_eq!(second.lids.fresh, 0);
    assert_eq!(second.lids.from_file, 1, "the thief's port, set back: {:?}", second.lids);
    check_sweep("fat tree after the theft", &topo, &sim, &second, 0);
    assert_eq!(sim_lid(&sim, &topo, thief_guid), Some(thief_lid), "the thief's port set back");
}
