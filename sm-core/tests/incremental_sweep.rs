//! The incremental heavy sweep (`sweep::incremental`): after any sequence
//! of changes (host ports down and up, hosts rebooting or leaving, links
//! between switches down and up, switches down and up), discovery behind
//! the changed switches finds the fabric a full discovery finds, and the
//! sweep that follows gives the same LIDs, the same tables in the switches
//! and the same SA as a full sweep of an identical fabric. And what it
//! costs depends on what changed, not on the size of the fabric.

mod common;

use std::collections::BTreeMap;

use common::{bin_dir, sm_location};
use proptest::prelude::*;
use sm_abi::NodeKind;
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::sa::db::SaDb;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::incremental::{self, Changes};
use sm_core::sweep::light::light_sweep;
use sm_core::pipeline::SweepState;
use sm_core::sweep::stages::Discovered;
use sm_core::sweep::{self, Fabric, Guid2Lid, HeldTables, SmpClient, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_topology::Topology;

/// One SM on its own copy of the fabric.
struct Sm {
    sim: SimFabric,
    g2l: Guid2Lid,
    held: HeldTables,
    last: Option<OnceOutcome>,
}

fn options() -> OnceOptions<'static> {
    OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None }
}

impl Sm {
    fn new(topo: &Topology) -> Sm {
        let (node, port) = sm_location(topo);
        let sim = SimFabric::from_topology(topo, node, port).expect("sim");
        Sm { sim, g2l: Guid2Lid::default(), held: HeldTables::default(), last: None }
    }

    fn fabric(&self) -> &Fabric {
        &self.last.as_ref().expect("swept").sweep.fabric
    }

    /// A heavy sweep, from `discovered` when given.
    fn sweep(&mut self, registry: &Registry, discovered: Option<Discovered>) -> &OnceOutcome {
        let state = SweepState { guid2lid: &mut self.g2l, held: &mut self.held, cache: None, previous: None };
        let out = sm_core::pipeline::once_from(&mut SimPort::new(&mut self.sim), discovered, &options(), registry, &Config::default(), state)
            .expect("sweep");
        self.last = Some(out);
        self.last.as_ref().expect("just set")
    }

    /// What the traps of the last changes name.
    fn trap_changes(&mut self) -> Changes {
        let mut changes = Changes::default();
        for t in self.sim.take_traps() {
            changes.add_trap(sm_mad::notice::trap::LINK_STATE_CHANGE, t.slid, self.last.as_ref().map(|o| &o.sweep.fabric));
        }
        changes
    }

    /// What a light sweep finds.
    fn light_changes(&mut self) -> Changes {
        self.sim.take_traps();
        let fabric = self.last.as_ref().expect("swept").sweep.fabric.clone();
        let mut port = SimPort::new(&mut self.sim);
        let mut client = SmpClient::new(&mut port, options().sweep.retries);
        let mut changes = Changes::default();
        changes.add_light(&light_sweep(&mut client, &fabric));
        changes
    }

    /// A full discovery, reading only, and whether it missed anything.
    fn discover(&mut self) -> (Fabric, bool) {
        let mut port = SimPort::new(&mut self.sim);
        let mut client = SmpClient::new(&mut port, options().sweep.retries);
        let (fabric, report) = sweep::discover(&mut client).expect("discovery");
        (fabric, report.incomplete())
    }

    /// The incremental discovery behind `changes`, with the SMPs it took.
    fn rediscover(&mut self, changes: &Changes) -> Result<(Discovered, u64), incremental::Fallback> {
        let last = self.fabric().clone();
        let mut port = SimPort::new(&mut self.sim);
        let mut client = SmpClient::new(&mut port, options().sweep.retries);
        let (fabric, report, _) = incremental::rediscover(&mut client, &last, changes, &Default::default())?;
        let smps = client.stats().clone();
        Ok((Discovered::new(fabric, report, smps.clone()), smps.sent))
    }
}

/// A change of the fabric, by index into the lists of [`Parts`].
#[derive(Debug, Clone, Copy)]
enum Event {
    /// Toggles the cable of a host (not the SM's).
    HostPort(usize),
    /// Powers a host off, or back on.
    Host(usize),
    /// Power-cycles a host between two sweeps: its port trains again.
    HostReboot(usize),
    /// Toggles a cable between two switches.
    Link(usize),
    /// Powers a switch off, or back on.
    Switch(usize),
    /// Power-cycles a switch between two sweeps: it comes back with no
    /// LID and empty tables, its links training again.
    SwitchReboot(usize),
}

/// The parts of a fabric events may touch.
struct Parts {
    host_ports: Vec<(usize, u8)>,
    hosts: Vec<usize>,
    links: Vec<(usize, u8)>,
    switches: Vec<usize>,
}

impl Parts {
    fn of(topo: &Topology) -> Parts {
        let (sm_node, _) = sm_location(topo);
        let kind = |i: usize| topo.nodes[i].kind;
        let mut parts = Parts { host_ports: Vec::new(), hosts: Vec::new(), links: Vec::new(), switches: Vec::new() };
        for link in &topo.links {
            let (a, b) = (link.a, link.b);
            match (kind(a.0), kind(b.0)) {
                (NodeKind::Switch, NodeKind::Switch) => parts.links.push(a),
                (NodeKind::Ca, _) if a.0 != sm_node => parts.host_ports.push(a),
                (_, NodeKind::Ca) if b.0 != sm_node => parts.host_ports.push(b),
                _ => {}
            }
        }
        for (i, n) in topo.nodes.iter().enumerate() {
            match n.kind {
                NodeKind::Switch => parts.switches.push(i),
                NodeKind::Ca if i != sm_node => parts.hosts.push(i),
                _ => {}
            }
        }
        parts
    }
}

/// Switches' LFTs and tops by node index.
fn tables(sim: &SimFabric) -> BTreeMap<usize, (Vec<u8>, Option<u16>)> {
    (0..sim.node_count()).filter_map(|i| sim.lft(i).map(|l| (i, (l.to_vec(), sim.linear_fdb_top(i))))).collect()
}

/// Port GUID → LID of an outcome.
fn lids(out: &OnceOutcome) -> BTreeMap<u64, u16> {
    let s = out.snapshot();
    s.ports.iter().filter(|p| p.lid != 0).map(|p| (p.guid, p.lid)).collect()
}

/// What the SA answers from: its end ports, its SM, and the SL of every
/// path.
fn sa_view(out: &OnceOutcome) -> (Vec<sm_core::sa::db::EndPort>, u16, u8, bool, Vec<u8>) {
    let db = SaDb::build_shared(out);
    let ends = db.end_ports().to_vec();
    let sls = ends.iter().flat_map(|a| ends.iter().map(move |b| (a.lid, b.lid))).map(|(a, b)| db.path_sl(a, b)).collect();
    (ends, db.sm_lid(), db.lmc(), db.routed(), sls)
}

/// Tallies of how the incremental sweeps went.
#[derive(Debug, Default)]
struct Tally {
    incremental: usize,
    fallbacks: Vec<String>,
}

/// Applies `events` to two copies of `topo`; after each, one SM sweeps
/// incrementally and the other in full, and both must agree.
fn run(topo: &Topology, registry: &Registry, events: &[(Event, bool)], tally: &mut Tally) {
    let parts = Parts::of(topo);
    let mut inc = Sm::new(topo);
    let mut full = Sm::new(topo);
    let mut inc_db = Some(SaDb::build_shared(inc.sweep(registry, None)));
    full.sweep(registry, None);
    let mut down_links = std::collections::HashSet::new();
    let mut off = std::collections::HashSet::new();
    for &(event, by_trap) in events {
        for sim in [&mut inc.sim, &mut full.sim] {
            match event {
                Event::HostPort(i) => {
                    let (n, p) = parts.host_ports[i % parts.host_ports.len()];
                    if down_links.contains(&(n, p)) { sim.link_up(n, p) } else { sim.link_down(n, p) }.expect("host cable");
                }
                Event::Host(i) | Event::Switch(i) => {
                    let list = if matches!(event, Event::Host(_)) { &parts.hosts } else { &parts.switches };
                    let n = list[i % list.len()];
                    if off.contains(&n) { sim.restore_node(n) } else { sim.remove_node(n) }.expect("power");
                }
                Event::HostReboot(i) | Event::SwitchReboot(i) => {
                    let list = if matches!(event, Event::HostReboot(_)) { &parts.hosts } else { &parts.switches };
                    let n = list[i % list.len()];
                    if !off.contains(&n) {
                        sim.remove_node(n).expect("power off");
                    }
                    sim.restore_node(n).expect("power on");
                }
                Event::Link(i) => {
                    let (n, p) = parts.links[i % parts.links.len()];
                    if down_links.contains(&(n, p)) { sim.link_up(n, p) } else { sim.link_down(n, p) }.expect("cable");
                }
            }
        }
        match event {
            Event::HostPort(i) => toggle(&mut down_links, parts.host_ports[i % parts.host_ports.len()]),
            Event::Link(i) => toggle(&mut down_links, parts.links[i % parts.links.len()]),
            Event::Host(i) => toggle(&mut off, parts.hosts[i % parts.hosts.len()]),
            Event::Switch(i) => toggle(&mut off, parts.switches[i % parts.switches.len()]),
            Event::HostReboot(i) => {
                off.remove(&parts.hosts[i % parts.hosts.len()]);
            }
            Event::SwitchReboot(i) => {
                off.remove(&parts.switches[i % parts.switches.len()]);
            }
        }
        let mut changes = if by_trap { inc.trap_changes() } else { inc.light_changes() };
        let mut lighted = !by_trap;
        loop {
            changes.add_relabelled(&inc.last.as_ref().expect("swept").sweep.relabelled);
            let (found, missed) = inc.discover();
            let discovered = match inc.rediscover(&changes) {
                Ok((discovered, _)) => Some(discovered),
                Err(why) => {
                    tally.fallbacks.push(format!("{event:?}: {why}"));
                    None
                }
            };
            let incremental = discovered.clone();
            inc.sweep(registry, discovered);
            // A trap that could not reach the SM (its route went through
            // what changed) is made up for by the next light sweep, which
            // finds the PortStateChange bits no sweep has cleared.
            let more = if by_trap && incremental.is_some() { inc.light_changes() } else { Changes::default() };
            if !more.is_empty() {
                lighted = true;
                changes = more;
                continue;
            }
            if let Some(discovered) = incremental {
                // Where a full discovery misses nodes (the SM's own switch
                // is off: its port answers nothing), the full sweep keeps
                // them from memory; the incremental one must not guess.
                assert!(!missed, "after {event:?}: incremental discovery where a full one lost SMPs");
                if let Some(d) = difference(discovered.fabric(), &found) {
                    panic!("after {event:?}: incremental and full discovery differ: {d}");
                }
                tally.incremental += 1;
            }
            break;
        }
        // The full sweep follows what the incremental one followed: a
        // light sweep clears the PortStateChange bits it reads.
        if lighted {
            full.light_changes();
        } else {
            full.sim.take_traps();
        }
        let a = inc.last.as_ref().expect("swept");
        let b = full.sweep(registry, None);
        if let Some(d) = difference(&a.sweep.fabric, &b.sweep.fabric) {
            panic!("after {event:?}: the fabrics as programmed differ: {d}");
        }
        assert_eq!(lids(a), lids(b), "after {event:?}: LIDs differ");
        assert_eq!(a.accepted.as_ref().map(|r| &r.snapshot), b.accepted.as_ref().map(|r| &r.snapshot), "after {event:?}");
        assert_eq!(sa_view(a), sa_view(b), "after {event:?}: the SA differs");
        // The SA's database made from the one before holds what one made
        // from scratch does.
        let after = SaDb::build_after(a, inc_db.as_ref());
        assert!(after.same_records(&SaDb::build_shared(a)), "after {event:?}: the SA's records taken over differ");
        inc_db = Some(after);
        assert_eq!(tables(&inc.sim), tables(&full.sim), "after {event:?}: the switches' tables differ");
    }
}

/// The first difference between two fabrics, said shortly.
fn difference(a: &Fabric, b: &Fabric) -> Option<String> {
    if a.nodes.len() != b.nodes.len() {
        let names = |f: &Fabric| f.nodes.iter().map(|n| n.description.clone()).collect::<Vec<_>>();
        return Some(format!("{} nodes {:?} against {} {:?}", a.nodes.len(), names(a), b.nodes.len(), names(b)));
    }
    for (i, (x, y)) in a.nodes.iter().zip(&b.nodes).enumerate() {
        let at = format!("node {i} ({} / {})", x.description, y.description);
        if (x.guid, &x.description, &x.path, x.switch_info) != (y.guid, &y.description, &y.path, y.switch_info) {
            return Some(format!("{at}: {}", fields(&(&x.path, &x.description, x.switch_info), &(&y.path, &y.description, y.switch_info))));
        }
        for (p, (u, v)) in x.ports.iter().zip(&y.ports).enumerate() {
            if u != v {
                return Some(format!("{at} port {p}: {}", fields(u, v)));
            }
        }
    }
    (a != b).then(|| format!("{:?}/{:?} against {:?}/{:?}", a.sm_port, a.incomplete, b.sm_port, b.incomplete))
}

/// The fields in which the Debug forms of `a` and `b` differ.
fn fields<T: std::fmt::Debug>(a: &T, b: &T) -> String {
    let (a, b) = (format!("{a:?}"), format!("{b:?}"));
    let differ: Vec<String> = a.split(", ").zip(b.split(", ")).filter(|(x, y)| x != y).map(|(x, y)| format!("{x} / {y}")).collect();
    differ.join("; ")
}

fn toggle<T: std::hash::Hash + Eq>(set: &mut std::collections::HashSet<T>, x: T) {
    if !set.remove(&x) {
        set.insert(x);
    }
}

fn event() -> impl Strategy<Value = (Event, bool)> {
    let e = prop_oneof![
        3 => any::<usize>().prop_map(Event::HostPort),
        2 => any::<usize>().prop_map(Event::Host),
        2 => any::<usize>().prop_map(Event::HostReboot),
        2 => any::<usize>().prop_map(Event::Link),
        1 => any::<usize>().prop_map(Event::Switch),
        1 => any::<usize>().prop_map(Event::SwitchReboot),
    ];
    (e, any::<bool>())
}

fn families() -> Vec<(&'static str, Topology)> {
    vec![
        ("2-ary 3-tree", sm_topology::gen::kary_ntree(2, 3, 1).expect("tree")),
        ("3-ary 2-tree", sm_topology::gen::kary_ntree(3, 2, 1).expect("tree")),
        ("4-ary 3-tree", sm_topology::gen::kary_ntree(4, 3, 2).expect("tree")),
        ("3x3 torus", sm_topology::gen::torus(&[3, 3], 1, false).expect("torus").0),
        ("random", sm_topology::gen::random_irregular(8, 6, 2, 4, 7).expect("random")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn incremental_sweeps_equal_full_sweeps(events in proptest::collection::vec(event(), 1..10)) {
        let registry = Registry::scan(&[bin_dir()]);
        for (name, topo) in families() {
            let mut tally = Tally::default();
            run(&topo, &registry, &events, &mut tally);
            // Host and cable changes never need a full sweep (but the one
            // after a sweep that lost SMPs, when the SM's own switch was
            // off, is full).
            let needless: Vec<_> =
                tally.fallbacks.iter().filter(|f| !f.starts_with("Switch") && !f.ends_with("was incomplete")).collect();
            prop_assert!(needless.is_empty(), "{name}: fell back on {needless:?}");
        }
    }
}

/// The SM's own switch: with it off, the SM sees nothing of the fabric.
fn sm_switch(topo: &Topology) -> usize {
    let (node, port) = sm_location(topo);
    topo.peer(node, port).expect("the SM is cabled").0
}

#[test]
fn every_switch_leaves_comes_back_and_reboots_incrementally_but_the_sms_own() {
    let registry = Registry::scan(&[bin_dir()]);
    for (name, topo) in families() {
        let parts = Parts::of(&topo);
        for (k, &switch) in parts.switches.iter().enumerate() {
            for by_trap in [false, true] {
                let mut tally = Tally::default();
                run(&topo, &registry, &[(Event::Switch(k), by_trap), (Event::Switch(k), by_trap)], &mut tally);
                let what = format!("{name}, {} off and on (traps: {by_trap})", topo.nodes[switch].desc);
                if switch == sm_switch(&topo) {
                    // A full discovery loses the SM port's probe and keeps
                    // the fabric from memory; the incremental one does not
                    // guess, and the sweep after an incomplete one is full.
                    assert_eq!(tally.incremental, 0, "{what}");
                } else {
                    assert_eq!(tally.fallbacks, Vec::<String>::new(), "{what}");
                    assert_eq!(tally.incremental, 2, "{what}");
                }
                let mut tally = Tally::default();
                run(&topo, &registry, &[(Event::SwitchReboot(k), by_trap)], &mut tally);
                if switch != sm_switch(&topo) {
                    assert_eq!(tally.fallbacks, Vec::<String>::new(), "{what}, rebooted");
                    assert_eq!(tally.incremental, 1, "{what}, rebooted");
                }
            }
        }
    }
}

/// SMPs of one trap-driven incremental sweep of `sm`: (discovery, all of
/// the sweep but the LFT blocks written).
fn incremental_smps(sm: &mut Sm, registry: &Registry) -> (u64, u64) {
    let changes = sm.trap_changes();
    assert!(!changes.is_empty(), "the change was trapped");
    sm.sim.reset_counters();
    let (discovered, discovery) = sm.rediscover(&changes).expect("incremental");
    sm.sweep(registry, Some(discovered));
    let c = sm.sim.counters();
    let lft_sets = c.by_attribute.get(&sm_mad::mad::attr::LINEAR_FORWARDING_TABLE).map_or(0, |a| a.set);
    (discovery, c.sent - lft_sets)
}

#[test]
fn a_host_reboot_costs_the_same_smps_whatever_the_size_of_the_fabric() {
    let registry = Registry::scan(&[bin_dir()]);
    // Same switches (8 ports), 12 and 48 of them.
    let mut costs = Vec::new();
    for n in [2, 3] {
        let topo = sm_topology::gen::kary_ntree(4, n, 4).expect("tree");
        let mut sm = Sm::new(&topo);
        sm.sweep(&registry, None);
        // A second full sweep: the first one's LIDs are read back.
        sm.sweep(&registry, None);
        sm.sim.take_traps();
        let parts = Parts::of(&topo);
        // Not the host with the highest LID: its going would lower every
        // switch's LinearFDBTop, a change of the tables like an LFT block.
        let host = parts.hosts[0];
        sm.sim.remove_node(host).expect("off");
        let gone = incremental_smps(&mut sm, &registry);
        sm.sim.restore_node(host).expect("on");
        let back = incremental_smps(&mut sm, &registry);
        // Off and on between two sweeps: the port trains again.
        sm.sim.remove_node(host).expect("off");
        sm.sim.restore_node(host).expect("on");
        let before = SaDb::build_shared(sm.last.as_ref().expect("swept"));
        let rebooted = incremental_smps(&mut sm, &registry);
        // The sweep shares every node it did not change with the last
        // one, so the SA makes records anew for the host and its leaf
        // alone.
        let last = sm.last.as_ref().expect("swept");
        let after = SaDb::build_after(last, Some(&before));
        assert!(after.same_records(&SaDb::build_shared(last)));
        assert!(after.nodes_rebuilt() <= 2, "{} of {} nodes' SA records made anew", after.nodes_rebuilt(), topo.nodes.len());
        costs.push((topo.nodes.len(), gone, back, rebooted));
    }
    // The leaf's SwitchInfo and the PortInfos of its ports 0..=8; then
    // the host's NodeInfo, NodeDescription and PortInfo.
    for &(_, gone, back, rebooted) in &costs {
        assert_eq!(gone.0, 1 + 9, "{costs:?}");
        assert_eq!(back.0, 1 + 9 + 3, "{costs:?}");
        assert_eq!(rebooted.0, 1 + 9 + 3, "{costs:?}");
    }
    assert_eq!(costs[0].1, costs[1].1, "host gone: {costs:?}");
    assert_eq!(costs[0].2, costs[1].2, "host back: {costs:?}");
    assert_eq!(costs[0].3, costs[1].3, "host rebooted: {costs:?}");
}
