//! The SA's partition rules against hostile hosts (issue 32, items 5-9,
//! 12, 13): two partitions on the embedded fabric, a host in each as a
//! full member and one as a limited member, the SM's port in one of them,
//! requests crafted as they arrive on QP1 from each, with and without the
//! SM_Key. A host sees the records of the ports it shares a partition
//! with and no other, the multicast groups of its partitions only, joins
//! and removes proxy memberships only in its partitions, registers
//! services on its own GID only, gets whole path tables, and Reports of
//! its partitions only.
//!
//! The partitions (the SM is on h1):
//!   left  = 0x0001: h1 full, h2 full
//!   right = 0x0002: h3 full, h4 limited
//!   default: h1 (SELF) full, every other host limited.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use common::{bin_dir, sm_location};
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::mcast::tree::{GroupTree, McastPlan, TreeSource};
use sm_core::mcast::McGroups;
use sm_core::sa::{Sa, SaConfig, SaDb};
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::method;
use sm_mad::sa::{self, attr, status};
use sm_mad::{
    sa_guid_info_record as gir, sa_inform_info as ii, sa_lft_record as lftr, sa_link_record as lr,
    sa_mc_member_record as mcr, sa_mft_record as mftr, sa_node_record as nr, sa_path_record as pr,
    sa_port_info_record as pir, sa_service_record as svc, sa_sl2vl_record as slr,
    sa_switch_info_record as swr, sa_vlarb_record as var,
};

/// smcore's default SM_Key: requests carrying it are trusted.
const KEY: u64 = 1;
/// A LID no port of the fabric holds.
const NOBODY: u16 = 0x0bff;
const FULL: u8 = 1;

struct Run {
    sim: SimFabric,
    held: HeldTables,
    g2l: Guid2Lid,
    config: Config,
    _dir: tempfile::TempDir,
}

fn once(run: &mut Run) -> OnceOutcome {
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None };
    let mut p = SimPort::new(&mut run.sim);
    let out = sm_core::pipeline::once(&mut p, &options, &registry, &run.config, &mut run.g2l, &mut run.held).expect("sweep");
    assert!(out.accepted.is_some(), "{:?}", out.describe());
    out
}

/// A host: LID and GID.
#[derive(Debug, Clone, Copy)]
struct Host {
    lid: u16,
    gid: u128,
}

struct Setup {
    run: Run,
    out: OnceOutcome,
    /// h1 (the SM's port) .. h4.
    h: [Host; 4],
}

fn setup() -> Setup {
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let (node, port) = sm_location(&topo);
    let sim = SimFabric::from_topology(&topo, node, port).expect("sim");
    let dir = tempfile::tempdir().expect("tempdir");
    // QoS on, so that SL2VL and VLArb tables are programmed (and their
    // records are there to filter).
    let config = Config { qos: true, ..Config::default() };
    let mut run = Run { sim, held: HeldTables::default(), g2l: Guid2Lid::default(), config, _dir: dir };
    let first = once(&mut run);
    let guid = |name: &str| {
        let n = first.sweep.fabric.nodes.iter().find(|n| n.description == name).expect("host");
        n.ports[1].guid
    };
    let [g1, g2, g3, g4] = ["h1", "h2", "h3", "h4"].map(guid);
    let file: PathBuf = run._dir.path().join("partitions.conf");
    std::fs::write(
        &file,
        format!("left = 0x0001, ipoib : {g1:#x}=full, {g2:#x}=full ;\nright = 0x0002 : {g3:#x}=full, {g4:#x} ;\n"),
    )
    .expect("write partitions.conf");
    run.config.partition_config_file = Some(file);
    let out = once(&mut run);
    let h = ["h1", "h2", "h3", "h4"].map(|name| host(&out, name));
    assert_eq!(out.sweep.fabric.nodes[0].description, "h1", "the SM is on h1");
    Setup { run, out, h }
}

fn host(out: &OnceOutcome, name: &str) -> Host {
    let f = &out.sweep.fabric;
    let node = f.nodes.iter().position(|n| n.description == name).unwrap_or_else(|| panic!("no node {name}"));
    let p = &f.nodes[node].ports[1];
    let info = p.info.expect("info");
    let prefix = if info.gid_prefix == 0 { 0xfe80_0000_0000_0000 } else { info.gid_prefix };
    Host { lid: info.lid, gid: (u128::from(prefix) << 64) | u128::from(p.guid) }
}

fn sa_on(out: &OnceOutcome, config: SaConfig) -> (Sa, Arc<Mutex<McGroups>>) {
    let groups = Arc::new(Mutex::new(McGroups::new()));
    let sa = Sa::new(Arc::clone(&groups), config);
    sa.publish(SaDb::build_shared(out));
    (sa, groups)
}

fn request(m: u8, attribute: u16, mask: u64, data: &[u8], sm_key: u64) -> Vec<u8> {
    let mut mad = vec![0u8; 256];
    sa::Repr { method: m, transaction_id: 0x32, attribute_id: attribute, component_mask: mask, ..Default::default() }
        .emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
    mad[36..44].copy_from_slice(&sm_key.to_be_bytes());
    mad[sa::HEADER_LEN..sa::HEADER_LEN + data.len()].copy_from_slice(data);
    mad
}

fn status_of(answer: &[u8]) -> u16 {
    u16::from_be_bytes([answer[4], answer[5]])
}

fn ask(sa: &Sa, slid: u16, mad: &[u8]) -> Vec<u8> {
    sa.handle(slid, 1, mad).reply.expect("an answer")
}

/// The records of a GetTable (no component) from `slid`, `len` bytes each.
fn table(sa: &Sa, slid: u16, attribute: u16, len: usize, key: u64) -> Vec<Vec<u8>> {
    table_of(&ask(sa, slid, &request(method::GET_TABLE, attribute, 0, &[], key)), len)
}

fn table_of(a: &[u8], len: usize) -> Vec<Vec<u8>> {
    assert_eq!(status_of(a), 0, "status");
    let p = sa::Packet::new_checked(a).expect("header");
    let payload = p.payload_length() as usize - 20;
    a[sa::HEADER_LEN..sa::HEADER_LEN + payload].chunks(len).map(<[u8]>::to_vec).collect()
}

fn lid_at(r: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([r[at], r[at + 1]])
}

/// Every record kind keyed by a port's LID: (name, attribute, record
/// length, offsets of the LIDs it names).
const KINDS: &[(&str, u16, usize, &[usize])] = &[
    ("NodeRecord", attr::NODE_RECORD, nr::PADDED_LEN, &[0]),
    ("PortInfoRecord", attr::PORT_INFO_RECORD, pir::PADDED_LEN, &[0]),
    ("GUIDInfoRecord", attr::GUID_INFO_RECORD, gir::PADDED_LEN, &[0]),
    ("LinkRecord", attr::LINK_RECORD, lr::PADDED_LEN, &[0, 4]),
    ("SwitchInfoRecord", attr::SWITCH_INFO_RECORD, swr::PADDED_LEN, &[0]),
    ("LFTRecord", attr::LFT_RECORD, lftr::PADDED_LEN, &[0]),
    ("MFTRecord", attr::MFT_RECORD, mftr::PADDED_LEN, &[0]),
    ("SL2VLRecord", attr::SL2VL_RECORD, slr::PADDED_LEN, &[0]),
    ("VLArbRecord", attr::VLARB_RECORD, var::PADDED_LEN, &[0]),
];

#[test]
fn each_record_kind_shows_only_ports_the_requester_shares_a_partition_with() {
    let Setup { out, h: [h1, h2, h3, h4], .. } = setup();
    let (sa, _) = sa_on(&out, SaConfig::default());
    // MFT blocks on every switch, for MFTRecords.
    let fabric = &out.sweep.fabric;
    let switches = (0..fabric.nodes.len() as u32).filter(|&i| fabric.nodes[i as usize].is_switch());
    let tree = GroupTree {
        mlid: 0xC000,
        sl: 0,
        switches: switches.map(|s| (s, vec![1u8])).collect::<BTreeMap<_, _>>(),
        source: TreeSource::MinHop,
    };
    sa.set_mcast(&McastPlan { trees: vec![tree], problems: Vec::new() });
    // Who shares a partition with whom (one of the two a full member):
    // h1-h2 (left, default: h1 full), h1-h3 and h1-h4 (default, h1 full),
    // h3-h4 (right, h3 full); h2 with neither h3 nor h4 (limited default
    // members all, different halves).
    let other_half = |r: &Host| -> Vec<u16> {
        match r.lid {
            l if l == h2.lid => vec![h3.lid, h4.lid],
            l if l == h3.lid || l == h4.lid => vec![h2.lid],
            _ => Vec::new(),
        }
    };
    for &(name, attribute, len, lids) in KINDS {
        let all = table(&sa, h2.lid, attribute, len, KEY);
        assert!(!all.is_empty(), "{name}: the trusted table has records");
        let named = |recs: &[Vec<u8>], lid: u16| recs.iter().any(|r| lids.iter().any(|&at| lid_at(r, at) == lid));
        for r in [h1, h2, h3, h4] {
            let seen = table(&sa, r.lid, attribute, len, 0);
            assert!(seen.iter().all(|x| all.contains(x)), "{name}: only records of the fabric");
            for lid in other_half(&r) {
                assert!(!named(&seen, lid), "{name}: LID {lid} (another partition) shown to LID {}", r.lid);
            }
        }
        // A request from no port of the subnet sees nothing.
        assert!(table(&sa, NOBODY, attribute, len, 0).is_empty(), "{name}: shown to a LID nobody holds");
        // The ports of another partition are in the trusted table, and
        // shown to a port sharing one with them.
        if named(&all, h3.lid) {
            assert!(named(&table(&sa, h4.lid, attribute, len, 0), h3.lid), "{name}: h4 (limited) sees h3 (full)");
            assert!(named(&table(&sa, h1.lid, attribute, len, 0), h3.lid), "{name}: the SM's port sees h3");
        }
    }
    // Host records are there to hide (the check above is not vacuous).
    for &(name, attribute, len, lids) in &KINDS[..4] {
        let all = table(&sa, h2.lid, attribute, len, KEY);
        assert!(all.iter().any(|r| lids.iter().any(|&at| lid_at(r, at) == h3.lid)), "{name}: h3 has records");
    }
    // A Get by LID of a port in another partition finds nothing.
    let mut t = [0u8; nr::LEN];
    t[..2].copy_from_slice(&h3.lid.to_be_bytes());
    let a = ask(&sa, h2.lid, &request(method::GET, attr::NODE_RECORD, 1, &t, 0));
    assert_eq!(status_of(&a), status::NO_RECORDS);
    let a = ask(&sa, h4.lid, &request(method::GET, attr::NODE_RECORD, 1, &t, 0));
    assert_eq!(status_of(&a), 0);
}

fn mc_record(mgid: u128, port_gid: u128, pkey: u16, join_state: u8) -> [u8; mcr::LEN] {
    let mut t = [0u8; mcr::LEN];
    mcr::Repr { mgid, port_gid, qkey: 0x11, pkey, join_state, ..Default::default() }
        .emit(&mut mcr::Packet::new_unchecked(&mut t[..]));
    t
}

const JOIN: u64 = mcr::component::MGID | mcr::component::PORT_GID | mcr::component::JOIN_STATE;
const CREATE: u64 = JOIN
    | mcr::component::QKEY
    | mcr::component::PKEY
    | mcr::component::TCLASS
    | mcr::component::FLOW_LABEL
    | mcr::component::SL;

fn mc(sa: &Sa, from: u16, m: u8, mask: u64, t: &[u8; mcr::LEN], key: u64) -> u16 {
    status_of(&ask(sa, from, &request(m, attr::MC_MEMBER_RECORD, mask, t, key)))
}

fn membership(groups: &Mutex<McGroups>, mgid: u128, port_gid: u128) -> Option<(u8, bool)> {
    let g = groups.lock().expect("groups");
    g.get(&mgid.to_be_bytes()).and_then(|g| g.members.get(&port_gid.to_be_bytes()).map(|m| (m.join_state, m.proxy)))
}

/// MGIDs of the MCMemberRecords a GetTable from `slid` lists.
fn groups_seen(sa: &Sa, slid: u16, key: u64) -> BTreeSet<u128> {
    let a = ask(sa, slid, &request(method::GET_TABLE, attr::MC_MEMBER_RECORD, 0, &[], key));
    table_of(&a, mcr::PADDED_LEN).iter().map(|r| u128::from_be_bytes(r[..16].try_into().expect("MGID"))).collect()
}

#[test]
fn groups_and_proxy_memberships_stay_in_their_partition() {
    let Setup { out, h: [h1, h2, h3, h4], .. } = setup();
    let (sa, groups) = sa_on(&out, SaConfig::default());
    let right = 0xff12_0000_0000_0000_0000_0000_0000_0032u128;
    let left = right + 1;
    assert_eq!(mc(&sa, h3.lid, method::SET, CREATE, &mc_record(right, h3.gid, 0x8002, FULL), 0), 0);
    assert_eq!(mc(&sa, h2.lid, method::SET, CREATE, &mc_record(left, h2.gid, 0x8001, FULL), 0), 0);

    // Item 6: a GetTable lists the groups of the requester's partitions.
    let seen = |slid, key| groups_seen(&sa, slid, key);
    assert!(!seen(h2.lid, 0).contains(&right), "h2 is not in right");
    assert!(!seen(h1.lid, 0).contains(&right), "nor is the SM's port (without the SM_Key)");
    assert!(seen(h4.lid, 0).contains(&right), "a limited member sees its partition's group");
    assert!(!seen(h4.lid, 0).contains(&left));
    assert!(seen(h2.lid, KEY).contains(&right), "a trusted requester sees every group");
    assert!(seen(h1.lid, 0).contains(&left));
    // A PathRecord to the group is no way around it.
    let mut t = [0u8; pr::LEN];
    pr::Repr { dgid: right, ..Default::default() }.emit(&mut pr::Packet::new_unchecked(&mut t[..]));
    let to_group = request(method::GET, attr::PATH_RECORD, pr::component::DGID, &t, 0);
    let path_to = |slid| status_of(&ask(&sa, slid, &to_group));
    assert_eq!(path_to(h2.lid), status::NO_RECORDS);
    assert_eq!(path_to(h4.lid), 0);

    // Item 7: a proxy join needs the requester in the group's partition.
    let h4_in = mc_record(right, h4.gid, 0, FULL);
    assert_eq!(mc(&sa, h2.lid, method::SET, JOIN, &h4_in, 0), status::REQ_INVALID, "h2 puts h4 in right's group");
    assert_eq!(mc(&sa, h1.lid, method::SET, JOIN, &h4_in, 0), status::REQ_INVALID, "the SM's port, untrusted");
    assert_eq!(membership(&groups, right, h4.gid), None);
    // h4 (limited) may proxy-join h3 (full) and the other way round.
    assert_eq!(mc(&sa, h3.lid, method::SET, JOIN, &h4_in, 0), 0);
    assert_eq!(membership(&groups, right, h4.gid), Some((FULL, true)));

    // Item 8: a proxy membership is removed only from within the partition.
    assert_eq!(mc(&sa, h2.lid, method::DELETE, JOIN, &h4_in, 0), status::REQ_INVALID);
    assert_eq!(mc(&sa, h1.lid, method::DELETE, JOIN, &h4_in, 0), status::REQ_INVALID);
    assert_eq!(membership(&groups, right, h4.gid), Some((FULL, true)));
    assert_eq!(mc(&sa, h3.lid, method::DELETE, JOIN, &h4_in, 0), 0, "a port of the partition may");
    assert_eq!(membership(&groups, right, h4.gid), None);
    assert_eq!(mc(&sa, h3.lid, method::SET, JOIN, &h4_in, 0), 0);
    assert_eq!(mc(&sa, h2.lid, method::DELETE, JOIN, &h4_in, KEY), 0, "so may a trusted requester");
    assert_eq!(membership(&groups, right, h4.gid), None);
    // And a trusted requester may join by proxy across partitions.
    assert_eq!(mc(&sa, h2.lid, method::SET, JOIN, &h4_in, KEY), 0);
    assert_eq!(membership(&groups, right, h4.gid), Some((FULL, true)));
    // h4 (limited) proxy-joins h3 again after h3 left: both in right, h3 full.
    assert_eq!(mc(&sa, h3.lid, method::DELETE, JOIN, &mc_record(right, h3.gid, 0, FULL), 0), 0);
    assert_eq!(mc(&sa, h4.lid, method::SET, JOIN, &mc_record(right, h3.gid, 0, FULL), 0), 0);
    assert_eq!(membership(&groups, right, h3.gid), Some((FULL, true)));
}

fn service(id: u64, gid: u128) -> [u8; svc::LEN] {
    let mut t = [0u8; svc::LEN];
    svc::Repr { service_id: id, service_gid: gid, service_lease: svc::INFINITE_LEASE, ..Default::default() }
        .emit(&mut svc::Packet::new_unchecked(&mut t[..]));
    t
}

const RID: u64 = svc::component::ID | svc::component::GID;

fn sr(sa: &Sa, from: u16, m: u8, t: &[u8; svc::LEN], key: u64) -> u16 {
    status_of(&ask(sa, from, &request(m, attr::SERVICE_RECORD, RID, t, key)))
}

/// The ServiceGIDs a query for `id` finds.
fn services_of(sa: &Sa, id: u64) -> Vec<u128> {
    let a = ask(sa, 0, &request(method::GET_TABLE, attr::SERVICE_RECORD, svc::component::ID, &service(id, 0), KEY));
    table_of(&a, svc::LEN)
        .iter()
        .map(|r| svc::Repr::parse(&svc::Packet::new_checked(&r[..]).expect("record")).expect("record").service_gid)
        .collect()
}

#[test]
fn a_service_is_set_and_deleted_only_by_its_port() {
    let Setup { out, h: [h1, h2, h3, _], .. } = setup();
    let (sa, _) = sa_on(&out, SaConfig::default());
    // Item 9: h2 registers a service on h3's GID: refused, nothing kept.
    assert_eq!(sr(&sa, h2.lid, method::SET, &service(7, h3.gid), 0), status::DENIED);
    assert_eq!(sr(&sa, h1.lid, method::SET, &service(7, h3.gid), 0), status::DENIED, "nor the SM's port untrusted");
    assert!(services_of(&sa, 7).is_empty());
    // h3 registers its own; h2 can neither replace nor delete it.
    assert_eq!(sr(&sa, h3.lid, method::SET, &service(7, h3.gid), 0), 0);
    assert_eq!(sr(&sa, h2.lid, method::SET, &service(7, h3.gid), 0), status::DENIED);
    assert_eq!(sr(&sa, h2.lid, method::DELETE, &service(7, h3.gid), 0), status::DENIED);
    assert_eq!(services_of(&sa, 7), vec![h3.gid]);
    assert_eq!(sr(&sa, h3.lid, method::DELETE, &service(7, h3.gid), 0), 0);
    assert!(services_of(&sa, 7).is_empty());
    // A trusted requester may register on any port's GID; the port of
    // that GID may withdraw the record.
    assert_eq!(sr(&sa, h2.lid, method::SET, &service(8, h3.gid), KEY), 0);
    assert_eq!(services_of(&sa, 8), vec![h3.gid]);
    assert_eq!(sr(&sa, h2.lid, method::DELETE, &service(8, h3.gid), 0), status::DENIED);
    assert_eq!(sr(&sa, h3.lid, method::DELETE, &service(8, h3.gid), 0), 0);
    assert!(services_of(&sa, 8).is_empty());
}

/// (SLID, DLID) of every PathRecord of an all-paths GetTable from `slid`.
fn all_paths(sa: &Sa, slid: u16, key: u64) -> Result<BTreeSet<(u16, u16)>, u16> {
    let a = ask(sa, slid, &request(method::GET_TABLE, attr::PATH_RECORD, 0, &[0u8; pr::LEN], key));
    if status_of(&a) != 0 {
        return Err(status_of(&a));
    }
    Ok(table_of(&a, pr::LEN).iter().map(|r| (lid_at(r, 40), lid_at(r, 42))).collect())
}

#[test]
fn a_path_table_is_filtered_before_it_is_capped() {
    let Setup { out, h: [_, h2, h3, h4], .. } = setup();
    let (sa, _) = sa_on(&out, SaConfig::default());
    let every = all_paths(&sa, h2.lid, KEY).expect("trusted table");
    let mine = all_paths(&sa, h2.lid, 0).expect("h2's table");
    assert!(mine.len() + 1 < every.len(), "h2 sees fewer paths: {} of {}", mine.len(), every.len());
    assert!(mine.iter().all(|&(s, d)| ![h3.lid, h4.lid].contains(&s) && ![h3.lid, h4.lid].contains(&d)));
    // Item 12: with a cap h2's table just fits, it gets it whole.
    let (capped, _) = sa_on(&out, SaConfig { max_records: mine.len(), ..SaConfig::default() });
    assert_eq!(all_paths(&capped, h2.lid, 0), Ok(mine.clone()));
    // One fewer: refused as too long, not cut.
    let (tight, _) = sa_on(&out, SaConfig { max_records: mine.len() - 1, ..SaConfig::default() });
    assert_eq!(all_paths(&tight, h2.lid, 0), Err(status::NO_RESOURCES));
}

fn subscribe(sa: &Sa, from: u16, trap: u16) {
    let mut t = [0u8; ii::LEN];
    ii::Repr {
        lid_range_begin: ii::ALL_LIDS,
        is_generic: 1,
        subscribe: 1,
        trap_type: ii::ANY_TYPE,
        trap_number: trap,
        producer_type: 0xFF_FFFF,
        ..Default::default()
    }
    .emit(&mut ii::Packet::new_unchecked(&mut t[..]));
    assert_eq!(status_of(&ask(sa, from, &request(method::SET, attr::INFORM_INFO, 0, &t, 0))), 0);
}

/// (destination LID, trap number) of Reports.
fn sent(reports: &[sm_core::sa::Report]) -> BTreeSet<(u16, u16)> {
    let trap = |mad: &[u8]| u16::from_be_bytes([mad[sa::HEADER_LEN + 4], mad[sa::HEADER_LEN + 5]]);
    reports.iter().map(|r| (r.dlid, trap(&r.mad))).collect()
}

#[test]
fn reports_reach_only_subscribers_that_may_know() {
    let Setup { mut run, out, h: [h1, h2, h3, h4] } = setup();
    // A port's subscriptions go with it (OpenSM's drop_event_subscriptions).
    let (sa, _) = sa_on(&out, SaConfig { drop_event_subscriptions: true, ..SaConfig::default() });
    for h in [h1, h2, h3, h4] {
        for trap in 64..=67 {
            subscribe(&sa, h.lid, trap);
        }
    }
    // Item 13, traps 66/67: a group of right is news to right's members only.
    let right = 0xff12_0000_0000_0000_0000_0000_0000_0033u128;
    let create = request(method::SET, attr::MC_MEMBER_RECORD, CREATE, &mc_record(right, h3.gid, 0x8002, FULL), 0);
    let created = sa.handle(h3.lid, 1, &create);
    assert_eq!(sent(&created.reports), BTreeSet::from([(h3.lid, 66), (h4.lid, 66)]));
    let leave = request(method::DELETE, attr::MC_MEMBER_RECORD, JOIN, &mc_record(right, h3.gid, 0, FULL), 0);
    let deleted = sa.handle(h3.lid, 1, &leave);
    assert_eq!(sent(&deleted.reports), BTreeSet::from([(h3.lid, 67), (h4.lid, 67)]));

    // Traps 64/65: h4 leaves the fabric and comes back; the ports that
    // share a partition with it hear of it (h3 in right, the SM's port, a
    // full default member), h2 does not.
    // Sim node indices are the topology's, the fabric's are discovery's.
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let h4_sim = topo.nodes.iter().position(|n| n.name == "h4").expect("h4");
    run.sim.link_down(h4_sim, 1).expect("link down");
    let without = once(&mut run);
    assert!(without.sweep.fabric.nodes.iter().all(|n| n.description != "h4"), "h4 is gone");
    let (reports, _) = sa.publish(SaDb::build_shared(&without));
    // (h4's own subscription is told too: a port shares with itself.)
    assert_eq!(sent(&reports), BTreeSet::from([(h1.lid, 65), (h3.lid, 65), (h4.lid, 65)]));
    run.sim.link_up(h4_sim, 1).expect("link up");
    let back = once(&mut run);
    let (reports, _) = sa.publish(SaDb::build_shared(&back));
    assert_eq!(sent(&reports), BTreeSet::from([(h1.lid, 64), (h3.lid, 64)]));
}


/// OpenSM's default (`drop_event_subscriptions FALSE`): a port that left
/// the fabric keeps its subscriptions, and is told of its own return;
/// with the key on they went with it.
#[test]
fn subscriptions_outlive_their_port_unless_dropped() {
    let Setup { mut run, out, h: [h1, _, _, h4] } = setup();
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let h4_sim = topo.nodes.iter().position(|n| n.name == "h4").expect("h4");
    let (kept, _) = sa_on(&out, SaConfig::default());
    let (dropped, _) = sa_on(&out, SaConfig { drop_event_subscriptions: true, ..SaConfig::default() });
    for sa in [&kept, &dropped] {
        subscribe(sa, h4.lid, 64);
        subscribe(sa, h1.lid, 64);
    }
    run.sim.link_down(h4_sim, 1).expect("link down");
    let without = once(&mut run);
    kept.publish(SaDb::build_shared(&without));
    dropped.publish(SaDb::build_shared(&without));
    assert_eq!(kept.subscriptions().iter().count(), 2, "h4's subscription is kept while it is away");
    assert_eq!(dropped.subscriptions().iter().count(), 1);
    run.sim.link_up(h4_sim, 1).expect("link up");
    let back = once(&mut run);
    let (reports, _) = kept.publish(SaDb::build_shared(&back));
    assert_eq!(sent(&reports), BTreeSet::from([(h1.lid, 64), (h4.lid, 64)]));
    let (reports, _) = dropped.publish(SaDb::build_shared(&back));
    assert_eq!(sent(&reports), BTreeSet::from([(h1.lid, 64)]));
}

/// OpenSM's `mcgroup_join_validation`: on (the default), a join naming a
/// Q_Key other than its group's is refused; off, only MGID, PortGID and
/// JoinState count and the port joins.
#[test]
fn a_join_disagreeing_with_its_group_is_refused_only_with_join_validation() {
    let Setup { out, h: [_, h2, _, _], .. } = setup();
    let mgid = 0xff12_0000_0000_0000_0000_0000_0000_0044u128;
    for (validate, want) in [(true, status::REQ_INVALID), (false, 0)] {
        let (sa, groups) = sa_on(&out, SaConfig { mcgroup_join_validation: validate, ..SaConfig::default() });
        // The SM's port creates the group with Q_Key 0x11 (trusted: in
        // every partition).
        let db = sa.db().expect("published");
        let h1_gid = db.end_by_lid(db.sm_lid()).map(|e| db.gid(e)).expect("the SM's port");
        assert_eq!(mc(&sa, db.sm_lid(), method::SET, CREATE, &mc_record(mgid, h1_gid, 0xFFFF, FULL), KEY), 0);
        let mut other = mc_record(mgid, h2.gid, 0xFFFF, FULL);
        mcr::Packet::new_unchecked(&mut other[..]).set_qkey(0x22);
        let got = mc(&sa, h2.lid, method::SET, JOIN | mcr::component::QKEY, &other, 0);
        assert_eq!(got, want, "validation {validate}");
        assert_eq!(membership(&groups, mgid, h2.gid).is_some(), !validate);
    }
}

/// OpenSM's `ipoib_mcgroup_creation_validation` (RFC 4391): on (the
/// default), an IPoIB group is created only where its partition's IPv4
/// broadcast group is, and with the broadcast group's Q_Key; off, any.
#[test]
fn an_ipoib_group_needs_its_broadcast_group_only_with_creation_validation() {
    let Setup { out, h: [_, h2, _, _], .. } = setup();
    let bcast = 0xff12_401b_ffff_0000_0000_0000_ffff_ffffu128;
    let snm = 0xff12_601b_ffff_0000_0000_0001_ff00_0007u128;
    let create = |sa: &Sa, mgid: u128, qkey: u32| {
        let mut t = mc_record(mgid, h2.gid, 0xFFFF, FULL);
        mcr::Packet::new_unchecked(&mut t[..]).set_qkey(qkey);
        mc(sa, h2.lid, method::SET, CREATE, &t, 0)
    };
    for validate in [true, false] {
        let (sa, _) = sa_on(&out, SaConfig { ipoib_mcgroup_creation_validation: validate, ..SaConfig::default() });
        let refused = if validate { status::REQ_INVALID } else { 0 };
        assert_eq!(create(&sa, snm, 0x11), refused, "no broadcast group yet, validation {validate}");
        assert_eq!(create(&sa, bcast, 0x11), 0);
        assert_eq!(create(&sa, snm + 1, 0x22), refused, "another Q_Key than the broadcast group's, validation {validate}");
        assert_eq!(create(&sa, snm + 2, 0x11), 0, "the broadcast group's Q_Key");
    }
}
