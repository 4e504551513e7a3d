//! M_Key on the embedded fabric (IBA 14.2.4): with protection on, the SM
//! leaves every port holding the key it chose, a host that does not know
//! the key cannot reprogram a switch (what `ibportstate ... disable` does),
//! the SM itself still sweeps, and after a restart finds its keys again in
//! `guid2mkey`. Without `m_key` nothing changes.
//!
//! The "host" SMPs are sent from the SM's own port with another key: the
//! SMA at the target checks the key, not where the SMP came from.

mod common;

use common::Spy;
use sm_abi::NodeKind;
use sm_core::sim::{SimFabric, SimOptions, SimPort, TrapDelivery};
use sm_core::sweep::mkey::derive_port_key;
use sm_core::sweep::{self, Guid2Lid, MKeyConfig, MKeys, SweepOptions, SweepOutcome};
use sm_mad::mad::attr;
use sm_mad::smp::{self, DATA_LEN};
use sm_mad::notice::{trap, Details};
use sm_mad::{Mad, NoticePacket, NoticeRepr, PhysState, PortInfoPacket, PortInfoRepr, PortState};
use sm_topology::{gen, Topology};

const SECRET: u64 = 0x5ec7_e7c0_ffee_0001;

fn run(fabric: &mut SimFabric, options: &SweepOptions, g2l: &mut Guid2Lid) -> SweepOutcome {
    let mut port = SimPort::new(fabric);
    sweep::sweep(&mut port, options, g2l).expect("the SM's own node answers")
}

struct Bed {
    topo: Topology,
    fabric: SimFabric,
    /// The SM's CA.
    host: usize,
    /// The leaf switch behind the SM's port 1.
    leaf: usize,
    /// A port of `leaf` cabled to another host.
    victim_port: u8,
}

fn bed() -> Bed {
    let topo = gen::fat_tree_2level(2, 2, 2, 2).expect("fat tree");
    let host = topo.nodes.iter().position(|n| n.kind == NodeKind::Ca).expect("a host");
    let peer = |end: (usize, u8)| {
        topo.links.iter().find_map(|l| {
            if l.a == end {
                Some(l.b)
            } else if l.b == end {
                Some(l.a)
            } else {
                None
            }
        })
    };
    let (leaf, _) = peer((host, 1)).expect("the SM host is cabled");
    let victim_port = (1..=topo.nodes[leaf].num_ports)
        .find(|&p| peer((leaf, p)).is_some_and(|(n, _)| n != host && topo.nodes[n].kind == NodeKind::Ca))
        .expect("the leaf has another host");
    // Traps straight to the SM: nothing is routed yet after a sweep alone.
    let options = SimOptions { trap_delivery: TrapDelivery::Always, ..SimOptions::default() };
    let fabric = SimFabric::with_options(&topo, host, 1, options).expect("sim");
    Bed { topo, fabric, host, leaf, victim_port }
}

/// The key each port guarding an SMA must hold: port 0 of a switch, every
/// cabled CA port.
fn guarded_ports(topo: &Topology) -> Vec<(usize, u8, u64)> {
    let mut out = Vec::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        if n.kind == NodeKind::Switch {
            out.push((i, 0, n.port_guids[0]));
        } else {
            for p in 1..=n.num_ports {
                if topo.links.iter().any(|l| l.a == (i, p) || l.b == (i, p)) {
                    out.push((i, p, n.port_guids[usize::from(p)]));
                }
            }
        }
    }
    out
}

/// What `ibportstate <lid> <port> disable` sends: a PortInfo Set of the
/// port with PortPhysicalState Disabled, here with M_Key `key`.
fn disable_smp(port: u8, key: u64) -> Vec<u8> {
    let mut data = [0u8; DATA_LEN];
    PortInfoRepr { port_physical_state: PhysState::Disabled, ..PortInfoRepr::default() }
        .emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
    let set = smp::Repr::directed_set(0x4242, attr::PORT_INFO, u32::from(port), key, &[1], data).expect("path");
    let mut mad = Mad::zeroed();
    set.emit(&mut mad.smp_mut());
    mad.0.to_vec()
}

fn get_smp(attribute: u16, modifier: u32, key: u64) -> Vec<u8> {
    let get = smp::Repr::directed_get(0x4343, attribute, modifier, key, &[1]).expect("path");
    let mut mad = Mad::zeroed();
    get.emit(&mut mad.smp_mut());
    mad.0.to_vec()
}

fn protected(per_port: bool, protect_bits: u8, file: Option<&std::path::Path>) -> SweepOptions {
    let config = MKeyConfig { m_key: SECRET, protect_bits, lease_period: 0, per_port };
    SweepOptions { m_keys: MKeys::new(config, file).expect("M_Key state"), ..SweepOptions::default() }
}

fn assert_same_fabric(out: &SweepOutcome, topo: &Topology, what: &str) {
    assert_eq!(out.fabric.nodes.len(), topo.nodes.len(), "{what}: every node found");
    assert_eq!(out.fabric.links().len(), topo.links.len(), "{what}: every link found");
    assert_eq!(out.program.failed, 0, "{what}: no PortInfo Set failed");
}

#[test]
fn level_2_keys_every_port_and_a_host_without_the_key_cannot_disable_a_switch_port() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("guid2mkey");
    let Bed { topo, mut fabric, leaf, victim_port, .. } = bed();
    let options = protected(true, 2, Some(&file));
    let mut g2l = Guid2Lid::default();
    let first = run(&mut fabric, &options, &mut g2l);
    assert_same_fabric(&first, &topo, "first sweep");

    for (node, port, guid) in guarded_ports(&topo) {
        let held = fabric.m_key_state(node, port).expect("port exists");
        assert_eq!(
            (held.key, held.protect_bits),
            (derive_port_key(SECRET, guid), 2),
            "node {node} port {port} ({guid:#x}) holds the SM's key"
        );
        assert_eq!(options.m_keys.recorded(guid), Some(held.key), "guid2mkey knows {guid:#x}");
    }
    let text = std::fs::read_to_string(&file).expect("guid2mkey written");
    assert_eq!(text.lines().count(), guarded_ports(&topo).len(), "{text}");

    // A host with the subnet's secret itself, or any other guess, as key.
    let before = fabric.port_state(leaf, victim_port);
    assert_eq!(before, Some(PortState::Init), "the link is up before");
    let violations = fabric.m_key_state(leaf, 0).expect("switch").violations;
    fabric.take_traps();
    for wrong in [SECRET, 0, 0xdead_beef] {
        assert_eq!(fabric.handle(&disable_smp(victim_port, wrong)), None, "a wrong key gets no answer");
        assert_eq!(fabric.port_state(leaf, victim_port), before, "key {wrong:#x} disabled nothing");
        // Level 2: Gets with a wrong key are refused too.
        assert_eq!(fabric.handle(&get_smp(attr::PORT_INFO, 0, wrong)), None);
    }
    assert_eq!(fabric.m_key_state(leaf, 0).expect("switch").violations, violations + 6, "each counted");
    // And each reported to the SM as trap 256 naming the key offered.
    let offered: Vec<(u16, u64)> = fabric
        .take_traps()
        .iter()
        .map(|t| {
            let data = smp::Packet::new_checked(&t.mad[..]).expect("smp").data().to_vec();
            let notice = NoticeRepr::parse(&NoticePacket::new_checked(&data[..]).expect("notice")).expect("notice");
            let Details::Raw(raw) = notice.details else { panic!("trap 256 details are raw: {notice:?}") };
            assert_eq!(notice.trap_number(), Some(trap::BAD_M_KEY));
            let mut key = [0u8; 8];
            key.copy_from_slice(&raw[14..22]);
            (u16::from_be_bytes([raw[8], raw[9]]), u64::from_be_bytes(key))
        })
        .collect();
    assert_eq!(
        offered,
        [SECRET, 0, 0xdead_beef]
            .iter()
            .flat_map(|&k| [(attr::PORT_INFO, k), (attr::PORT_INFO, k)])
            .collect::<Vec<_>>()
    );

    // The SM, with the keys it set, sweeps again as before.
    let second = run(&mut fabric, &options, &mut g2l);
    assert_same_fabric(&second, &topo, "second sweep");
    assert_eq!(second.lids.fresh, 0, "LIDs kept");
    assert_eq!(second.program.set, 0, "ports hold LIDs and keys: nothing to Set");

    // An SM started afresh reads guid2mkey and its neighbours and still
    // reaches every port, its own first.
    let restarted = protected(true, 2, Some(&file));
    let third = run(&mut fabric, &restarted, &mut g2l);
    assert_same_fabric(&third, &topo, "after a restart");

    // Without the files, per-port keys cannot be guessed: not even the
    // SM's own port answers. (What the files are for.)
    let forgetful = protected(true, 2, None);
    let mut port = SimPort::new(&mut fabric);
    assert!(sweep::sweep(&mut port, &forgetful, &mut g2l).is_err());

    // The Set the host sent was a valid one: with the right key it works.
    let right = derive_port_key(SECRET, topo.nodes[leaf].port_guids[0]);
    assert!(fabric.handle(&disable_smp(victim_port, right)).is_some());
    assert_eq!(fabric.port_state(leaf, victim_port), Some(PortState::Down));
}

#[test]
fn level_1_answers_gets_with_the_key_hidden_and_drops_sets() {
    let Bed { topo, mut fabric, leaf, victim_port, .. } = bed();
    let options = protected(false, 1, None);
    let out = run(&mut fabric, &options, &mut Guid2Lid::default());
    assert_same_fabric(&out, &topo, "sweep");
    for (node, port, _) in guarded_ports(&topo) {
        assert_eq!(fabric.m_key_state(node, port).map(|m| (m.key, m.protect_bits)), Some((SECRET, 1)));
    }
    let answer = fabric.handle(&get_smp(attr::PORT_INFO, 0, 7)).expect("level 1 answers Gets");
    let data = smp::Packet::new_checked(&answer[..]).expect("smp").data().to_vec();
    assert_eq!(PortInfoPacket::new_checked(&data[..]).expect("PortInfo").m_key(), 0, "key hidden");
    let answer = fabric.handle(&get_smp(attr::PORT_INFO, 0, SECRET)).expect("answers");
    let data = smp::Packet::new_checked(&answer[..]).expect("smp").data().to_vec();
    assert_eq!(PortInfoPacket::new_checked(&data[..]).expect("PortInfo").m_key(), SECRET, "shown to the holder");
    assert_eq!(fabric.handle(&disable_smp(victim_port, 7)), None);
    assert_eq!(fabric.port_state(leaf, victim_port), Some(PortState::Init));
}

#[test]
fn without_m_key_ports_keep_key_0_and_anyone_may_set() {
    let Bed { topo, mut fabric, host, leaf, victim_port } = bed();
    let out = run(&mut fabric, &SweepOptions::default(), &mut Guid2Lid::default());
    assert_same_fabric(&out, &topo, "sweep");
    for (node, port, _) in guarded_ports(&topo) {
        assert_eq!(fabric.m_key_state(node, port).map(|m| (m.key, m.protect_bits)), Some((0, 0)));
    }
    assert!(fabric.m_key_state(host, 1).is_some());
    // The old behaviour, unprotected: any key goes.
    assert!(fabric.handle(&disable_smp(victim_port, 0x1234)).is_some());
    assert_eq!(fabric.port_state(leaf, victim_port), Some(PortState::Down));
}

#[test]
fn a_port_keyed_by_an_earlier_sm_with_a_recorded_key_is_rekeyed() {
    // A previous run (or another configuration) left an old subnet key on
    // every port; guid2mkey remembers it. The new SM takes over with it
    // and moves every port to its own key.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("guid2mkey");
    let Bed { topo, mut fabric, .. } = bed();
    let old = SweepOptions {
        m_keys: MKeys::new(MKeyConfig { m_key: 0x0_1d, protect_bits: 2, lease_period: 0, per_port: false }, Some(&file))
            .expect("state"),
        ..SweepOptions::default()
    };
    assert_same_fabric(&run(&mut fabric, &old, &mut Guid2Lid::default()), &topo, "old key");
    let new = protected(true, 3, Some(&file));
    let out = run(&mut fabric, &new, &mut Guid2Lid::default());
    assert_same_fabric(&out, &topo, "rekeyed");
    for (node, port, guid) in guarded_ports(&topo) {
        let held = fabric.m_key_state(node, port).expect("port");
        assert_eq!((held.key, held.protect_bits), (derive_port_key(SECRET, guid), 3), "node {node} port {port}");
    }
}

/// Directory of the smcore binary, beside which the workspace's engines
/// are built (`cargo build --workspace`).
fn engine_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_smcore")).parent().expect("bin dir").to_path_buf()
}

#[test]
fn a_whole_sweep_at_level_3_routes_and_activates_every_port() {
    use sm_core::config::Config;
    use sm_core::engines::Registry;
    use sm_core::sweep::HeldTables;
    use sm_core::pipeline::OnceOptions;

    let Bed { topo, mut fabric, .. } = bed();
    let registry = Registry::scan(&[engine_dir()]);
    assert!(registry.get("minhop").is_some(), "minhop engine in {} (cargo build --workspace)", engine_dir().display());
    let options = OnceOptions { sweep: protected(true, 3, None), engines: "minhop", dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    for round in ["first", "second"] {
        let out = sm_core::pipeline::once(&mut SimPort::new(&mut fabric), &options, &registry, &Config::default(), &mut g2l, &mut held)
            .expect("sweep");
        assert!(out.accepted.is_some(), "{round}: routed");
        assert_same_fabric(&out.sweep, &topo, round);
        let p = &out.program;
        for (phase, r) in [("switch_info", &p.switch_info), ("lft", &p.lft), ("arm", &p.arm), ("activate", &p.activate)] {
            assert_eq!(r.failed, 0, "{round}: {phase} had failures");
            assert_eq!(r.smps.unanswered, 0, "{round}: {phase} SMPs went unanswered");
        }
        for (i, n) in topo.nodes.iter().enumerate() {
            for port in 1..=n.num_ports {
                if topo.links.iter().any(|l| l.a == (i, port) || l.b == (i, port)) {
                    assert_eq!(fabric.port_state(i, port), Some(PortState::Active), "{round}: node {i} port {port}");
                }
            }
        }
    }
    for (node, port, guid) in guarded_ports(&topo) {
        let held = fabric.m_key_state(node, port).expect("port");
        assert_eq!((held.key, held.protect_bits, held.violations), (derive_port_key(SECRET, guid), 3, 0));
    }
}

/// The M_Key of an SMP.
fn m_key(mad: &[u8]) -> Option<u64> {
    smp::Packet::new_checked(mad).and_then(|p| smp::Repr::parse(&p)).ok().map(|r| r.m_key)
}

#[test]
fn with_per_port_keys_the_secret_never_goes_on_the_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("guid2mkey");
    let Bed { topo, mut fabric, .. } = bed();
    let mut g2l = Guid2Lid::default();
    // A first run, a second, and one after a restart (keys from the file).
    for run in 0..2 {
        let options = protected(true, 2, Some(&file));
        for round in 0..2 {
            let mut keys = Vec::new();
            let swept = {
                let mut spy = Spy { inner: SimPort::new(&mut fabric), note: |mad: &[u8]| keys.extend(m_key(mad)) };
                sweep::sweep(&mut spy, &options, &mut g2l)
            };
            let out = swept.unwrap_or_else(|e| panic!("run {run} round {round}: {e}; keys {keys:x?}"));
            assert_same_fabric(&out, &topo, "sweep");
            assert!(!keys.is_empty());
            assert!(!keys.contains(&SECRET), "an SMP carried the per-port secret");
        }
    }
}

/// Issue 32, item 1: a host that answers NodeInfo with its leaf switch's
/// GUIDs (here: the leaf as seen through the SM's own cable) is refused by
/// discovery, and must never be sent the leaf's key, nor any other port's:
/// the key of a path is that of the port the discovered topology puts at
/// its end, never that of a GUID an answer claimed.
#[test]
fn a_host_claiming_its_leafs_guids_is_never_sent_a_key() {
    let Bed { topo, mut fabric, host, leaf, victim_port } = bed();
    let victim = topo
        .links
        .iter()
        .find_map(|l| {
            if l.a == (leaf, victim_port) {
                Some(l.b.0)
            } else if l.b == (leaf, victim_port) {
                Some(l.a.0)
            } else {
                None
            }
        })
        .expect("the victim port is cabled");
    let sm_cable = topo
        .links
        .iter()
        .find_map(|l| {
            if l.a == (host, 1) {
                Some(l.b.1)
            } else if l.b == (host, 1) {
                Some(l.a.1)
            } else {
                None
            }
        })
        .expect("the SM host is cabled");
    fabric.impersonate(victim, leaf, sm_cable).expect("impersonate");
    let options = protected(true, 2, None);
    let mut g2l = Guid2Lid::default();
    let keys: Vec<u64> = guarded_ports(&topo).iter().map(|&(_, _, guid)| derive_port_key(SECRET, guid)).collect();
    let leaf_key = derive_port_key(SECRET, topo.nodes[leaf].port_guids[0]);
    for sweep in 1..=3 {
        let out = run(&mut fabric, &options, &mut g2l);
        assert_eq!(out.fabric.nodes.len(), topo.nodes.len() - 1, "sweep {sweep}: the liar is left out");
        assert_eq!(out.fabric.links().len(), topo.links.len() - 1, "sweep {sweep}: its link too");
        assert!(out.discovery.rejected_answers >= 1, "sweep {sweep}: its answer refused");
        assert_eq!(fabric.m_key_state(leaf, 0).map(|m| m.key), Some(leaf_key), "the leaf holds its key");
        let heard = fabric.heard_keys(victim);
        assert!(!heard.is_empty(), "sweep {sweep}: the liar is probed");
        assert!(!heard.contains(&leaf_key), "sweep {sweep}: the leaf's key reached the liar: {heard:x?}");
        assert!(
            heard.iter().all(|k| !keys.contains(k) && *k != SECRET),
            "sweep {sweep}: a key reached the liar: {heard:x?}"
        );
    }
    // The leaf's uplink stays up: what the liar would have disabled.
    assert!(fabric.port_state(leaf, sm_cable).is_some_and(|s| s != PortState::Down));
}
