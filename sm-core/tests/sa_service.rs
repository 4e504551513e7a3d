//! The SA on the embedded fabric: a sweep routes a fabric, its outcome
//! becomes an [`SaDb`], and crafted MADs go through [`Sa::handle`] as they
//! would arrive on QP1. Answers are checked against the fabric and the
//! routing themselves: every record the sweep saw, LFT blocks equal to the
//! routing's, PathRecords only where the LFTs lead, with the engine's SL.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use common::{bin_dir, sm_location, workspace};
use proptest::prelude::*;
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::mcast::McGroups;
use sm_core::sa::{Sa, SaConfig, SaDb};
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::{method, status as mad_status};
use sm_mad::sa::{self, attr, rmpp, status};
use sm_mad::{
    sa_inform_info as ii, sa_lft_record as lftr, sa_link_record as lr, sa_mc_member_record as mcr,
    sa_node_record as nr, sa_path_record as pr, sa_port_info_record as pir,
    sa_sl2vl_record as slr, sa_vlarb_record as var,
};

fn routed_file(file: &str, engines: &str, config: &Config) -> OnceOutcome {
    let topo = sm_topology::parse_file(workspace().join("config/topologies").join(file))
        .expect("topology");
    routed_topo(&topo, engines, config)
}

fn routed_topo(topo: &sm_topology::Topology, engines: &str, config: &Config) -> OnceOutcome {
    routed_with(topo, engines, config, sm_core::sim::SimOptions::default())
}

fn routed_with(topo: &sm_topology::Topology, engines: &str, config: &Config, sim_options: sm_core::sim::SimOptions) -> OnceOutcome {
    let (node, port) = sm_location(topo);
    let mut sim = SimFabric::with_options(topo, node, port, sim_options).expect("sim");
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions {
        sweep: SweepOptions::default(),
        engines,
        dump_dir: None,
    };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let mut p = SimPort::new(&mut sim);
    let out = sm_core::pipeline::once(&mut p, &options, &registry, config, &mut g2l, &mut held).expect("sweep");
    assert!(out.accepted.is_some(), "{:?}", out.describe());
    out
}

fn small() -> OnceOutcome {
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    routed_topo(&topo, "minhop", &Config::default())
}

fn sa_with(db: SaDb) -> Sa {
    let sa = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig::default());
    sa.publish(db);
    sa
}

/// An SA request MAD.
fn request(m: u8, attribute: u16, mask: u64, data: &[u8]) -> Vec<u8> {
    let mut mad = vec![0u8; 256];
    sa::Repr {
        method: m,
        transaction_id: 0x1234_5678,
        attribute_id: attribute,
        component_mask: mask,
        ..Default::default()
    }
    .emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
    mad[sa::HEADER_LEN..sa::HEADER_LEN + data.len()].copy_from_slice(data);
    mad
}

fn ask(sa: &mut Sa, slid: u16, mad: &[u8]) -> Vec<u8> {
    let answer = sa.handle(slid, 1, mad).reply.expect("an answer");
    assert_eq!(&answer[8..16], &mad[8..16], "TID echoed");
    assert_eq!(&answer[16..18], &mad[16..18], "attribute echoed");
    answer
}

/// [`ask`] with a [`request`] made of the rest.
fn query(sa: &mut Sa, slid: u16, m: u8, attribute: u16, mask: u64, data: &[u8]) -> Vec<u8> {
    ask(sa, slid, &request(m, attribute, mask, data))
}

/// A GetTable of every record of `attribute`, from LID 1.
fn get_all(sa: &mut Sa, attribute: u16) -> Vec<u8> {
    query(sa, 1, method::GET_TABLE, attribute, 0, &[])
}

/// A Get from LID 1.
fn get(sa: &mut Sa, attribute: u16, mask: u64, data: &[u8]) -> Vec<u8> {
    query(sa, 1, method::GET, attribute, mask, data)
}

/// A GetTable from LID 1.
fn get_table(sa: &mut Sa, attribute: u16, mask: u64, data: &[u8]) -> Vec<u8> {
    query(sa, 1, method::GET_TABLE, attribute, mask, data)
}

/// A record template keyed by a LID in its first two bytes.
fn lid_key<const N: usize>(lid: u16) -> [u8; N] {
    let mut t = [0u8; N];
    t[..2].copy_from_slice(&lid.to_be_bytes());
    t
}

/// A PathRecord Get (GetTable with `table`) for the fields of `q` that
/// `mask` names.
fn path_query(sa: &mut Sa, slid: u16, table: bool, mask: u64, q: pr::Repr) -> Vec<u8> {
    let mut t = [0u8; pr::LEN];
    q.emit(&mut pr::Packet::new_unchecked(&mut t[..]));
    let m = if table {
        method::GET_TABLE
    } else {
        method::GET
    };
    query(sa, slid, m, attr::PATH_RECORD, mask, &t)
}

fn status_of(answer: &[u8]) -> u16 {
    u16::from_be_bytes([answer[4], answer[5]])
}

/// The records of a GetTable answer, after checking its RMPP header.
fn records(answer: &[u8], len: usize) -> Vec<Vec<u8>> {
    assert_eq!(answer[3], method::GET_TABLE_RESP);
    assert_eq!(status_of(answer), 0, "status");
    let p = sa::Packet::new_checked(answer).expect("header");
    assert_eq!(p.rmpp_version(), rmpp::VERSION);
    assert_eq!(p.rmpp_type(), rmpp::TYPE_DATA);
    assert_eq!(
        p.rmpp_flags(),
        rmpp::FLAG_ACTIVE | rmpp::FLAG_FIRST | rmpp::FLAG_LAST
    );
    assert_eq!(p.segment_number(), 1);
    assert_eq!(p.attribute_size(), len);
    let payload = p.payload_length() as usize - 20;
    assert_eq!(payload % len, 0, "whole records");
    assert!(answer.len() >= sa::HEADER_LEN + payload);
    answer[sa::HEADER_LEN..sa::HEADER_LEN + payload]
        .chunks(len)
        .map(<[u8]>::to_vec)
        .collect()
}

fn end_lids(out: &OnceOutcome) -> Vec<(u16, u64, bool)> {
    let f = &out.sweep.fabric;
    let mut v = Vec::new();
    for n in &f.nodes {
        if n.is_switch() {
            v.push((
                n.ports[0].info.as_ref().expect("port 0").lid,
                n.ports[0].guid,
                true,
            ));
        } else {
            for p in n.ports.iter().skip(1).filter(|p| p.peer.is_some()) {
                v.push((p.info.as_ref().expect("info").lid, p.guid, false));
            }
        }
    }
    v
}

#[test]
fn class_port_info_and_busy_before_publish() {
    let mut sa = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig::default());
    let a = query(&mut sa, 1, method::GET, attr::CLASS_PORT_INFO, 0, &[]);
    assert_eq!((a[3], status_of(&a)), (method::GET_RESP, 0));
    let cpi = sm_mad::sa_class_port_info::Repr::parse(
        &sm_mad::sa_class_port_info::Packet::new_checked(&a[56..]).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (cpi.base_version, cpi.class_version, cpi.resp_time_value),
        (1, 2, 18)
    );
    // OpenSM 3.3.23 with multicast on answers 0x2602: these bits, and
    // IsMultiPathSupported, which needs TraceRecord and dual-sided RMPP.
    use sm_mad::sa_class_port_info::capability as cap;
    assert_eq!(cpi.capability_mask, cap::GET_SET_NOTICE | cap::UD_MULTICAST | cap::PORT_INFO_CAPMASK_MATCH);
    assert_eq!(cpi.capability_mask, 0x2202);
    // disable_multicast: no IsUDMulticastSupported, as OpenSM.
    let mut quiet = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig { multicast: false, ..SaConfig::default() });
    let b = query(&mut quiet, 1, method::GET, attr::CLASS_PORT_INFO, 0, &[]);
    let off = sm_mad::sa_class_port_info::Repr::parse(&sm_mad::sa_class_port_info::Packet::new_checked(&b[56..]).unwrap()).unwrap();
    assert_eq!(off.capability_mask, cap::GET_SET_NOTICE | cap::PORT_INFO_CAPMASK_MATCH);
    let a = get_all(&mut sa, attr::NODE_RECORD);
    assert_eq!(status_of(&a), mad_status::BUSY, "nothing published yet");
    let a = get_all(&mut sa, attr::PATH_RECORD);
    assert_eq!(status_of(&a), mad_status::BUSY);
}

#[test]
fn node_port_link_switch_and_lft_records_mirror_the_sweep() {
    let out = small();
    let ends = end_lids(&out);
    let mut sa = sa_with(SaDb::build_shared(&out));
    // NodeRecords: one per end port, GUIDs and LIDs as swept.
    let a = get_all(&mut sa, attr::NODE_RECORD);
    let recs = records(&a, nr::PADDED_LEN);
    assert_eq!(recs.len(), ends.len());
    let got: BTreeSet<(u16, u64)> = recs
        .iter()
        .map(|r| {
            let rec = nr::Repr::parse(&nr::Packet::new_checked(&r[..]).unwrap()).unwrap();
            (rec.lid, rec.node_info.port_guid)
        })
        .collect();
    let want: BTreeSet<(u16, u64)> = ends.iter().map(|&(l, g, _)| (l, g)).collect();
    assert_eq!(got, want);
    // Get by LID: exactly that node; by an unknown LID: no records; Get
    // without a key: too many.
    let (lid, guid, _) = ends[ends.len() - 1];
    let mut t: [u8; nr::LEN] = lid_key(lid);
    let a = get(&mut sa, attr::NODE_RECORD, nr::component::LID, &t);
    assert_eq!((a[3], status_of(&a)), (method::GET_RESP, 0));
    assert_eq!(
        nr::Packet::new_checked(&a[56..])
            .unwrap()
            .node_info()
            .port_guid(),
        guid
    );
    t[..2].copy_from_slice(&0x0bffu16.to_be_bytes());
    assert_eq!(
        status_of(&get(&mut sa, attr::NODE_RECORD, nr::component::LID, &t)),
        status::NO_RECORDS
    );
    assert_eq!(
        status_of(&get(&mut sa, attr::NODE_RECORD, 0, &t)),
        status::TOO_MANY_RECORDS
    );
    // By NodeGUID (not the LID key).
    let mut t = [0u8; nr::LEN];
    t[16..24].copy_from_slice(&out.sweep.fabric.nodes[1].guid.to_be_bytes());
    let a = get_table(&mut sa, attr::NODE_RECORD, nr::component::NODE_GUID, &t);
    assert!(!records(&a, nr::PADDED_LEN).is_empty());

    // PortInfoRecords: every switch port plus every CA port.
    let f = &out.sweep.fabric;
    let want_ports: usize = f
        .nodes
        .iter()
        .map(|n| {
            n.ports
                .iter()
                .enumerate()
                .filter(|(p, port)| port.info.is_some() && (n.is_switch() || *p > 0))
                .count()
        })
        .sum();
    let a = get_all(&mut sa, attr::PORT_INFO_RECORD);
    assert_eq!(records(&a, pir::PADDED_LEN).len(), want_ports);
    let (slid, _, _) = ends.iter().copied().find(|e| e.2).expect("a switch");
    let mut t: [u8; pir::LEN] = lid_key(slid);
    t[2] = 3;
    let a = get(
        &mut sa,
        attr::PORT_INFO_RECORD,
        pir::component::LID | pir::component::PORT_NUM,
        &t,
    );
    assert_eq!(status_of(&a), 0);
    let rec = pir::Repr::parse(&pir::Packet::new_checked(&a[56..]).unwrap()).unwrap();
    assert_eq!((rec.lid, rec.port_num, rec.port_info.m_key), (slid, 3, 0));

    // LinkRecords: both directions of every cable.
    let a = get_all(&mut sa, attr::LINK_RECORD);
    let links = records(&a, lr::PADDED_LEN);
    assert_eq!(links.len(), 2 * f.links().len());
    for l in &links {
        let r = lr::Repr::parse(&lr::Packet::new_checked(&l[..]).unwrap()).unwrap();
        let back = lr::Repr {
            from_lid: r.to_lid,
            from_port: r.to_port,
            to_port: r.from_port,
            to_lid: r.from_lid,
        };
        assert!(links
            .iter()
            .any(|m| lr::Repr::parse(&lr::Packet::new_checked(&m[..]).unwrap()).unwrap() == back));
    }

    // SwitchInfoRecords and LFTRecords: the routing's tables, block by block.
    let switches = f.nodes.iter().filter(|n| n.is_switch()).count();
    let a = get_all(&mut sa, attr::SWITCH_INFO_RECORD);
    assert_eq!(
        records(&a, sm_mad::sa_switch_info_record::PADDED_LEN).len(),
        switches
    );
    let routing = &out.accepted.as_ref().unwrap().routing;
    let a = get_all(&mut sa, attr::LFT_RECORD);
    let lfts = records(&a, lftr::PADDED_LEN);
    assert!(!lfts.is_empty());
    let lid_of_node: BTreeMap<u16, usize> = f
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, n)| (n.ports[0].info.unwrap().lid, i))
        .collect();
    for r in &lfts {
        let rec = lftr::Repr::parse(&lftr::Packet::new_checked(&r[..]).unwrap()).unwrap();
        let node = lid_of_node[&rec.lid];
        let lft = routing
            .lfts
            .iter()
            .find(|l| l.node as usize == node)
            .expect("switch LFT");
        for (k, &p) in rec.ports.iter().enumerate() {
            let lid = usize::from(rec.block_num) * 64 + k;
            assert_eq!(p, lft.ports.get(lid).copied().unwrap_or(0xFF), "LID {lid}");
        }
    }
    let t: [u8; lftr::LEN] = lid_key(slid);
    let a = get(
        &mut sa,
        attr::LFT_RECORD,
        lftr::component::LID | lftr::component::BLOCK,
        &t,
    );
    assert_eq!(status_of(&a), 0);
}

/// Every CA pair's PathRecord: it exists iff the LFTs lead from one to the
/// other, and carries the engine's SL.
fn check_all_paths(out: &mut OnceOutcome) -> BTreeSet<u8> {
    let db = SaDb::build_shared(&*out);
    let mut sa = sa_with(SaDb::build_shared(&*out));
    let routing = &out.accepted.as_ref().unwrap().routing;
    let cas: Vec<_> = end_lids(out).into_iter().filter(|e| !e.2).collect();
    let mut sls = BTreeSet::new();
    for &(slid, sguid, _) in &cas {
        for &(dlid, dguid, _) in &cas {
            let mut q = pr::Repr {
                slid,
                dlid,
                ..Default::default()
            };
            q.numb_path = 1;
            let mask = pr::component::SLID | pr::component::DLID | pr::component::NUMB_PATH;
            let a = path_query(&mut sa, slid, true, mask, q);
            let recs = records(&a, 64);
            assert_eq!(recs.len(), 1, "{slid} -> {dlid}");
            let r = pr::Repr::parse(&pr::Packet::new_checked(&recs[0][..]).unwrap()).unwrap();
            assert_eq!((r.slid, r.dlid), (slid, dlid));
            assert_eq!(r.sgid as u64, sguid);
            assert_eq!(r.dgid as u64, dguid);
            assert_eq!(
                r.sl,
                routing.path_sl.path_sl(slid, dlid),
                "{slid} -> {dlid}"
            );
            assert!(r.reversible);
            assert_eq!(r.packet_life_time, if slid == dlid { 0 } else { 18 });
            assert!(db.walk(slid, dlid).is_some());
            sls.insert(r.sl);
        }
    }
    // By GIDs, with a Get.
    let (slid, sguid, _) = cas[0];
    let (dlid, dguid, _) = cas[cas.len() - 1];
    let prefix = u128::from(db.gid_prefix()) << 64;
    let gids = pr::component::SGID | pr::component::DGID;
    let from = |sgid: u128| pr::Repr {
        sgid,
        dgid: prefix | u128::from(dguid),
        ..Default::default()
    };
    let a = path_query(&mut sa, slid, false, gids, from(prefix | u128::from(sguid)));
    assert_eq!(status_of(&a), 0);
    let r = pr::Packet::new_checked(&a[56..]).unwrap();
    assert_eq!((r.slid(), r.dlid()), (slid, dlid));
    // An unknown GUID is an invalid GID; an SL the routing does not use
    // for the pair finds nothing.
    let a = path_query(&mut sa, slid, false, gids, from(prefix | 0xdead));
    assert_eq!(status_of(&a), status::INVALID_GID);
    let wrong_sl = pr::Repr {
        slid,
        dlid,
        sl: (routing.path_sl.path_sl(slid, dlid) + 1) % 16,
        ..Default::default()
    };
    let mask = pr::component::SLID | pr::component::DLID | pr::component::SL;
    let a = path_query(&mut sa, slid, false, mask, wrong_sl);
    assert_eq!(status_of(&a), status::NO_RECORDS);
    sls
}

#[test]
fn path_records_follow_the_lfts_on_a_fat_tree() {
    let mut out = routed_file("fat-tree-64.net", "minhop", &Config::default());
    check_all_paths(&mut out);
    // A GetTable without components: every pair of end ports, switches included.
    let n = end_lids(&out).len();
    let mut sa = sa_with(SaDb::build_shared(&out));
    let a = get_all(&mut sa, attr::PATH_RECORD);
    assert_eq!(records(&a, 64).len(), n * n);
}

/// `max_rate_enum` (OpenSM's key): PathRecords faster than the limit
/// carry the fastest rate allowed; slower ones are untouched.
#[test]
fn path_records_keep_to_max_rate_enum() {
    let out = small();
    let rates = |max_rate_enum: u8| -> Vec<(u16, u16, u8)> {
        let path = sm_core::sa::PathDefaults { max_rate_enum, ..Default::default() };
        let sa = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig { path, ..SaConfig::default() });
        sa.publish(SaDb::build_shared(&out));
        let mut sa = sa;
        records(&get_all(&mut sa, attr::PATH_RECORD), 64)
            .iter()
            .map(|r| {
                let p = pr::Repr::parse(&pr::Packet::new_checked(&r[..]).expect("rec")).expect("parse");
                (p.slid, p.dlid, p.rate)
            })
            .collect()
    };
    let free = rates(sm_core::sa::path::NO_RATE_LIMIT);
    assert!(!free.is_empty());
    let fastest = free.iter().map(|r| sm_mad::rate::rate_of(r.2)).max().expect("paths");
    assert!(fastest > 100, "some path faster than 10 Gb/s: {free:?}");
    let limited = rates(3);
    assert_eq!(limited.len(), free.len());
    for (f, l) in free.iter().zip(&limited) {
        assert_eq!((f.0, f.1), (l.0, l.1));
        let want = if f.2 <= 3 { f.2 } else if sm_mad::rate::rate_of(f.2) > 100 { 3 } else { 2 };
        assert_eq!(l.2, want, "{f:?} under max_rate_enum 3");
    }
}

#[test]
fn path_records_carry_torus_2qos_sls() {
    let mut config = Config::default();
    config.set_option(
        "torus_config",
        workspace()
            .join("config/torus-2QoS.conf")
            .display()
            .to_string(),
    );
    let mut out = routed_file("torus-4x4x4.net", "torus-2QoS,no_fallback", &config);
    let sls = check_all_paths(&mut out);
    assert!(sls.len() > 1, "torus-2QoS uses several SLs: {sls:?}");
}

#[test]
fn no_path_records_without_a_routing_or_a_route() {
    let mut out = small();
    // A switch LFT that drops one destination: that pair, and only that
    // pair's direction, loses its PathRecord.
    let cas: Vec<_> = end_lids(&out).into_iter().filter(|e| !e.2).collect();
    let (slid, dlid) = (cas[0].0, cas[cas.len() - 1].0);
    let routing = &mut std::sync::Arc::get_mut(out.accepted.as_mut().unwrap()).expect("not shared yet").routing;
    for lft in routing.lfts.iter_mut() {
        if let Some(p) = lft.ports.get_mut(usize::from(dlid)) {
            *p = sm_abi::NO_ROUTE;
        }
    }
    let db = SaDb::build_shared(&out);
    assert!(db.walk(slid, dlid).is_none());
    assert!(db.walk(dlid, slid).is_some());
    let mut sa = sa_with(db);
    let q = pr::Repr {
        slid,
        dlid,
        ..Default::default()
    };
    let mask = pr::component::SLID | pr::component::DLID;
    assert_eq!(
        status_of(&path_query(&mut sa, slid, false, mask, q)),
        status::NO_RECORDS
    );
    let back = pr::Repr {
        slid: dlid,
        dlid: slid,
        reversible: true,
        ..Default::default()
    };
    let a = path_query(&mut sa, slid, false, mask, back);
    assert_eq!(status_of(&a), 0, "the other direction still has a path");
    assert!(!pr::Packet::new_checked(&a[56..]).unwrap().reversible());
    let reversible = mask | pr::component::REVERSIBLE;
    let a = path_query(&mut sa, slid, false, reversible, back);
    assert_eq!(
        status_of(&a),
        status::NO_RECORDS,
        "a reversible path was asked for"
    );
    // No routing at all: no paths, the other records still there.
    out.accepted = None;
    let mut sa = sa_with(SaDb::build_shared(&out));
    let a = query(&mut sa, slid, method::GET_TABLE, attr::PATH_RECORD, 0, &[]);
    assert!(records(&a, 64).is_empty());
    let a = query(&mut sa, slid, method::GET_TABLE, attr::NODE_RECORD, 0, &[]);
    assert!(!records(&a, nr::PADDED_LEN).is_empty());
}

#[test]
fn header_errors_get_mad_status() {
    let mut sa = sa_with(SaDb::build_shared(&small()));
    let mut bad = request(method::GET, attr::NODE_RECORD, 0, &[]);
    bad[2] = 1;
    assert_eq!(status_of(&ask(&mut sa, 1, &bad)), mad_status::BAD_VERSION);
    let a = query(
        &mut sa,
        1,
        method::GET_TRACE_TABLE,
        attr::PATH_RECORD,
        0,
        &[],
    );
    assert_eq!(
        (a[3], status_of(&a)),
        (
            method::GET_TRACE_TABLE | 0x80,
            mad_status::UNSUPPORTED_METHOD
        )
    );
    let a = query(&mut sa, 1, method::GET_MULTI, attr::PATH_RECORD, 0, &[]);
    assert_eq!(
        (a[3], status_of(&a)),
        (method::GET_MULTI_RESP, mad_status::UNSUPPORTED_METHOD_ATTR)
    );
    let a = query(&mut sa, 1, method::GET, 0x0099, 0, &[]);
    assert_eq!(status_of(&a), mad_status::UNSUPPORTED_METHOD_ATTR);
    let a = query(&mut sa, 1, method::SET, attr::NODE_RECORD, 0, &[]);
    assert_eq!(status_of(&a), mad_status::UNSUPPORTED_METHOD_ATTR);
    let a = query(&mut sa, 1, method::GET, attr::INFORM_INFO, 0, &[]);
    assert_eq!(status_of(&a), mad_status::UNSUPPORTED_METHOD_ATTR);
    // Answers and other classes are not answered.
    let mut resp = request(method::GET_RESP, attr::NODE_RECORD, 0, &[]);
    assert!(sa.handle(1, 1, &resp).reply.is_none());
    resp[1] = 0x04;
    resp[3] = method::GET;
    assert!(sa.handle(1, 1, &resp).reply.is_none());
    assert!(sa.handle(1, 1, &[1, 3]).reply.is_none());
}

fn mc_request(mgid: u128, port_gid: u128, join_state: u8) -> [u8; mcr::LEN] {
    let mut t = [0u8; mcr::LEN];
    mcr::Repr {
        mgid,
        port_gid,
        qkey: 0x0B1B,
        pkey: 0xFFFF,
        sl: 0,
        join_state,
        ..Default::default()
    }
    .emit(&mut mcr::Packet::new_unchecked(&mut t[..]));
    t
}

/// An MCMemberRecord request; see [`query`].
fn mc_query(sa: &mut Sa, slid: u16, m: u8, mask: u64, t: &[u8; mcr::LEN]) -> Vec<u8> {
    query(sa, slid, m, attr::MC_MEMBER_RECORD, mask, t)
}

#[test]
fn mcmember_create_join_query_leave() {
    use mcr::component as c;
    let out = small();
    let groups = Arc::new(Mutex::new(McGroups::new()));
    let mut sa = Sa::new(Arc::clone(&groups), SaConfig::default());
    sa.publish(SaDb::build_shared(&out));
    let cas: Vec<_> = end_lids(&out).into_iter().filter(|e| !e.2).collect();
    let gid = |guid: u64| (0xfe80u128 << 112) | u128::from(guid);
    // Not an IPoIB MGID: those need their partition's broadcast group first.
    let mgid = 0xff12_0123_ffff_0000_0000_0000_0000_0001u128;
    let join = c::MGID | c::PORT_GID | c::JOIN_STATE;
    let create = c::MGID
        | c::PORT_GID
        | c::JOIN_STATE
        | c::QKEY
        | c::PKEY
        | c::TCLASS
        | c::FLOW_LABEL
        | c::SL;
    let t = mc_request(mgid, gid(cas[0].1), 1);
    let a = mc_query(&mut sa, cas[0].0, method::SET, c::MGID | c::PORT_GID, &t);
    assert_eq!(status_of(&a), status::INSUFFICIENT_COMPONENTS);
    let a = mc_query(&mut sa, cas[0].0, method::SET, join, &t);
    assert_eq!(
        status_of(&a),
        status::INSUFFICIENT_COMPONENTS,
        "a create names Q_Key, P_Key, ..."
    );
    let answer = sa.handle(
        cas[0].0,
        1,
        &request(method::SET, attr::MC_MEMBER_RECORD, create, &t),
    );
    let a = answer.reply.unwrap();
    assert_eq!((a[3], status_of(&a)), (method::GET_RESP, 0));
    assert!(answer.mcast_changed);
    let rec = mcr::Repr::parse(&mcr::Packet::new_checked(&a[56..]).unwrap()).unwrap();
    assert_eq!(
        (rec.mgid, rec.mlid, rec.join_state, rec.qkey),
        (mgid, 0xC000, 1, 0x0B1B)
    );
    // A join that contradicts the group is refused; a plain one is taken,
    // also by proxy from another port.
    let mut t2 = mc_request(mgid, gid(cas[1].1), 1);
    t2[32..36].copy_from_slice(&7u32.to_be_bytes());
    let a = mc_query(&mut sa, cas[1].0, method::SET, join | c::QKEY, &t2);
    assert_eq!(status_of(&a), status::REQ_INVALID);
    for (i, &(_, guid, _)) in cas.iter().enumerate().skip(1) {
        let t = mc_request(mgid, gid(guid), if i == 3 { 2 } else { 1 });
        let a = mc_query(&mut sa, cas[1].0, method::SET, join, &t);
        assert_eq!(status_of(&a), 0);
    }
    assert_eq!(
        groups
            .lock()
            .unwrap()
            .get(&mgid.to_be_bytes())
            .unwrap()
            .members
            .len(),
        cas.len()
    );
    // A PathRecord to the group: its MLID and parameters, from the requester.
    let to = |dgid: u128| pr::Repr {
        dgid,
        ..Default::default()
    };
    let a = path_query(&mut sa, cas[2].0, false, pr::component::DGID, to(mgid));
    assert_eq!(status_of(&a), 0);
    let p = pr::Repr::parse(&pr::Packet::new_checked(&a[56..120]).unwrap()).unwrap();
    assert_eq!(
        (p.dlid, p.slid, p.sgid as u64, p.pkey),
        (0xC000, cas[2].0, cas[2].1, 0xFFFF)
    );
    let a = path_query(&mut sa, cas[2].0, false, pr::component::DGID, to(mgid + 1));
    assert_eq!(status_of(&a), status::NO_RECORDS, "no such group");
    // GetTable, trusted (SM_Key 1): one record per member; by JoinState:
    // the full members. Untrusted: the group, no member shown.
    let trusted = |mask: u64, t: &[u8; mcr::LEN]| {
        let mut q = request(method::GET_TABLE, attr::MC_MEMBER_RECORD, mask, t);
        q[36..44].copy_from_slice(&1u64.to_be_bytes());
        q
    };
    let a = ask(&mut sa, 1, &trusted(c::MGID, &mc_request(mgid, 0, 0)));
    assert_eq!(records(&a, mcr::PADDED_LEN).len(), cas.len());
    let a = ask(&mut sa, 1, &trusted(c::JOIN_STATE, &mc_request(0, 0, 1)));
    assert_eq!(records(&a, mcr::PADDED_LEN).len(), cas.len() - 1);
    let a = mc_query(
        &mut sa,
        1,
        method::GET_TABLE,
        c::MGID,
        &mc_request(mgid, 0, 0),
    );
    assert_eq!(records(&a, mcr::PADDED_LEN).len(), 1);
    // Unknown port: invalid; other prefix: invalid GID.
    let a = mc_query(
        &mut sa,
        1,
        method::SET,
        create,
        &mc_request(mgid, gid(0xdead), 1),
    );
    assert_eq!(status_of(&a), status::REQ_INVALID);
    let a = mc_query(
        &mut sa,
        1,
        method::SET,
        create,
        &mc_request(mgid, 0x1234 << 64, 1),
    );
    assert_eq!(status_of(&a), status::INVALID_GID);
    // Leaves: a member goes; a non-member's leave is invalid; the group
    // ends with its last full member.
    // A leave naming bits the member does not hold is invalid (IBA
    // o15-0.1.14, as OpenSM checks it).
    let answer = sa.handle(
        cas[0].0,
        1,
        &request(method::DELETE, attr::MC_MEMBER_RECORD, join, &mc_request(mgid, gid(cas[0].1), 3)),
    );
    assert_eq!(answer.reply.map(|a| status_of(&a)), Some(status::REQ_INVALID));
    for (i, &(lid, guid, _)) in cas.iter().enumerate() {
        let answer = sa.handle(
            lid,
            1,
            &request(
                method::DELETE,
                attr::MC_MEMBER_RECORD,
                join,
                &mc_request(mgid, gid(guid), if i == 3 { 2 } else { 1 }),
            ),
        );
        let a = answer.reply.unwrap();
        assert_eq!((a[3], status_of(&a)), (method::DELETE_RESP, 0));
        assert!(answer.mcast_changed);
        if groups.lock().unwrap().is_empty() {
            break;
        }
    }
    assert!(groups.lock().unwrap().is_empty(), "no full member left");
    let a = mc_query(
        &mut sa,
        1,
        method::DELETE,
        join,
        &mc_request(mgid, gid(cas[0].1), 1),
    );
    assert_eq!(status_of(&a), status::REQ_INVALID);
    // A create with MGID 0 gets one assigned.
    let a = mc_query(
        &mut sa,
        cas[0].0,
        method::SET,
        create,
        &mc_request(0, gid(cas[0].1), 1),
    );
    assert_eq!(status_of(&a), 0);
    assert_eq!(a[56], 0xFF);
}

#[test]
fn inform_info_subscriptions_get_reports_for_gids_in_and_out_of_service() {
    let full = small();
    let fewer_net = common::SMALL_NET
        .replace("[2] \"h4\"[1]\n", "")
        .replace("Hca 1 \"h4\"\n", "");
    let fewer = routed_topo(
        &sm_topology::parse_str(&fewer_net, "fewer").unwrap(),
        "minhop",
        &Config::default(),
    );
    let groups = Arc::new(Mutex::new(McGroups::new()));
    let mut sa = Sa::new(groups, SaConfig::default());
    sa.publish(SaDb::build_shared(&full));
    let cas: Vec<_> = end_lids(&full).into_iter().filter(|e| !e.2).collect();
    let subscriber = cas
        .iter()
        .find(|c| {
            fewer
                .sweep
                .fabric
                .nodes
                .iter()
                .any(|n| n.ports.iter().any(|p| p.guid == c.1))
        })
        .unwrap();
    let mut t = [0u8; ii::LEN];
    let mut info = ii::Repr {
        lid_range_begin: ii::ALL_LIDS,
        is_generic: 1,
        subscribe: 1,
        trap_type: ii::ANY_TYPE,
        trap_number: 65,
        qpn: 1,
        producer_type: 0xFF_FFFF,
        ..Default::default()
    };
    info.emit(&mut ii::Packet::new_unchecked(&mut t[..]));
    let a = query(&mut sa, subscriber.0, method::SET, attr::INFORM_INFO, 0, &t);
    assert_eq!((a[3], status_of(&a)), (method::GET_RESP, 0));
    let a = get_all(&mut sa, attr::INFORM_INFO_RECORD);
    assert_eq!(records(&a, ii::RECORD_PADDED_LEN).len(), 1);
    // The fabric loses a host: one Report of trap 65 with its GID.
    let before: BTreeSet<u64> = end_lids(&full).iter().map(|e| e.1).collect();
    let after: BTreeSet<u64> = end_lids(&fewer).iter().map(|e| e.1).collect();
    let gone: Vec<u64> = before.difference(&after).copied().collect();
    assert!(!gone.is_empty());
    let (reports, _) = sa.publish(SaDb::build_shared(&fewer));
    assert_eq!(reports.len(), gone.len());
    for r in &reports {
        assert_eq!((r.dlid, r.dqpn), (subscriber.0, 1));
        assert_eq!((r.mad[1], r.mad[3]), (3, method::REPORT));
        let notice =
            sm_mad::NoticeRepr::parse(&sm_mad::NoticePacket::new_checked(&r.mad[56..]).unwrap())
                .unwrap();
        assert_eq!(notice.trap_number(), Some(65));
        let sm_mad::NoticeDetails::Gid { gid } = notice.details else {
            panic!("GID details")
        };
        assert!(gone.contains(&u64::from_be_bytes(gid[8..].try_into().unwrap())));
    }
    // Unsubscribe; unsubscribing again is invalid.
    info.subscribe = 0;
    info.emit(&mut ii::Packet::new_unchecked(&mut t[..]));
    for want in [0, status::REQ_INVALID] {
        let a = query(&mut sa, subscriber.0, method::SET, attr::INFORM_INFO, 0, &t);
        assert_eq!(status_of(&a), want);
    }
    let (reports, _) = sa.publish(SaDb::build_shared(&full));
    assert!(reports.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let sa = sa_fixture();
        let _ = sa.handle(1, 1, &bytes);
    }

    #[test]
    fn random_queries_never_panic(
        m in prop::sample::select(vec![method::GET, method::GET_TABLE, method::SET, method::DELETE, 0x14]),
        attribute in prop::sample::select(vec![attr::CLASS_PORT_INFO, attr::INFORM_INFO, attr::NODE_RECORD, attr::PORT_INFO_RECORD,
            attr::LINK_RECORD, attr::SWITCH_INFO_RECORD, attr::LFT_RECORD, attr::PATH_RECORD, attr::MC_MEMBER_RECORD,
            attr::INFORM_INFO_RECORD, 0x0033]),
        mask in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 200),
        slid in 0u16..16,
    ) {
        let sa = sa_fixture();
        let answer = sa.handle(slid, 1, &request(m, attribute, mask, &data));
        let reply = answer.reply.expect("every request is answered");
        prop_assert_eq!(reply[3] & 0x80, 0x80);
    }
}

fn sa_fixture() -> Sa {
    use std::sync::OnceLock;
    static OUT: OnceLock<Mutex<OnceOutcome>> = OnceLock::new();
    let out = OUT.get_or_init(|| Mutex::new(small()));
    sa_with(SaDb::build_shared(&*out.lock().unwrap()))
}

#[test]
fn multipath_guidinfo_pkey_and_sminfo_records() {
    use sm_mad::{
        sa_guid_info_record as gir, sa_multi_path_record as mpr, sa_pkey_table_record as pkr,
        sa_sm_info_record as smir,
    };
    let out = small();
    let db = SaDb::build_shared(&out);
    let prefix = u128::from(db.gid_prefix()) << 64;
    let mut sa = sa_with(db);
    let cas: Vec<_> = end_lids(&out).into_iter().filter(|e| !e.2).collect();
    let gid = |i: usize| prefix | u128::from(cas[i].1);
    // MultiPathRecord: 2 sources × 2 destinations, NumbPath 3.
    let mut t = [0u8; 200];
    mpr::Repr {
        reversible: false,
        numb_path: 3,
        sgids: vec![gid(0), gid(1)],
        dgids: vec![gid(2), gid(3)],
    }
    .emit(&mut mpr::Packet::new_unchecked(&mut t[..]));
    let counts = mpr::component::SGID_COUNT | mpr::component::DGID_COUNT;
    let multi = |sa: &mut Sa, mask: u64, t: &[u8]| {
        query(
            sa,
            cas[0].0,
            method::GET_MULTI,
            attr::MULTI_PATH_RECORD,
            mask,
            t,
        )
    };
    let a = multi(&mut sa, counts | mpr::component::NUMB_PATH, &t);
    assert_eq!(a[3], method::GET_MULTI_RESP);
    let p = sa::Packet::new_checked(&a[..]).unwrap();
    assert_eq!((status_of(&a), p.payload_length()), (0, 20 + 3 * 64));
    let first = pr::Repr::parse(&pr::Packet::new_checked(&a[56..120]).unwrap()).unwrap();
    assert_eq!((first.sgid, first.dgid), (gid(0), gid(2)));
    // Without both counts, or with a multicast GID: refused.
    let a = multi(&mut sa, mpr::component::SGID_COUNT, &t);
    assert_eq!(status_of(&a), status::INSUFFICIENT_COMPONENTS);
    mpr::Repr {
        reversible: false,
        numb_path: 0,
        sgids: vec![gid(0)],
        dgids: vec![0xff12_401b_ffff_0000_0000_0000_ffff_ffff],
    }
    .emit(&mut mpr::Packet::new_unchecked(&mut t[..]));
    let a = multi(&mut sa, counts, &t);
    assert_eq!(status_of(&a), status::REQ_INVALID);
    // GUIDInfoRecord of a port: its GUID in block 0.
    let t: [u8; gir::LEN] = lid_key(cas[1].0);
    let a = get_table(&mut sa, attr::GUID_INFO_RECORD, gir::component::LID, &t);
    let recs = records(&a, gir::PADDED_LEN);
    assert_eq!(recs.len(), 1);
    assert_eq!(
        gir::Packet::new_checked(&recs[0][..]).unwrap().guid(0),
        cas[1].1
    );
    // P_KeyTableRecords for trusted requesters only.
    let t: [u8; pkr::LEN] = lid_key(cas[1].0);
    let mut q = request(
        method::GET_TABLE,
        attr::PKEY_TABLE_RECORD,
        pkr::component::LID,
        &t,
    );
    assert_eq!(
        status_of(&ask(&mut sa, 1, &q)),
        status::REQ_INVALID,
        "SM_Key 0 is not trusted"
    );
    q[36..44].copy_from_slice(&1u64.to_be_bytes());
    // Every block of the port's table as programmed, block 0 first with
    // the default partition (full) at index 0.
    let recs = records(&ask(&mut sa, 1, &q), pkr::PADDED_LEN);
    assert!(!recs.is_empty());
    assert_eq!(
        pkr::Packet::new_checked(&recs[0][..]).unwrap().pkey(0),
        0xFFFF
    );
    // SMInfoRecord: this SM, master; Set refused.
    let a = get_all(&mut sa, attr::SM_INFO_RECORD);
    let recs = records(&a, smir::PADDED_LEN);
    assert_eq!(recs.len(), 1);
    let rec = smir::Repr::parse(&smir::Packet::new_checked(&recs[0][..]).unwrap()).unwrap();
    assert_eq!((rec.sm_state, rec.sm_key), (3, 0));
    assert_ne!(rec.lid, 0);
    let mut t = [0u8; smir::LEN];
    t[24] = 0x20;
    let a = get_table(&mut sa, attr::SM_INFO_RECORD, smir::component::PRIORITY, &t);
    assert!(
        records(&a, smir::PADDED_LEN).is_empty(),
        "no SM of priority 2"
    );
    let a = query(&mut sa, 1, method::SET, attr::SM_INFO_RECORD, 0, &[]);
    assert_eq!(status_of(&a), mad_status::UNSUPPORTED_METHOD_ATTR);
}

#[test]
fn inform_info_is_keyed_by_requester_not_qpn_field() {
    let out = small();
    let mut sa = sa_with(SaDb::build_shared(&out));
    let lid = end_lids(&out).into_iter().find(|e| !e.2).unwrap().0;
    let set = |sa: &mut Sa, subscribe: u8, qpn: u32, trap: u16| {
        let mut t = [0u8; ii::LEN];
        ii::Repr {
            subscribe,
            qpn,
            trap_number: trap,
            ..Default::default()
        }
        .emit(&mut ii::Packet::new_unchecked(&mut t[..]));
        status_of(
            &sa.handle(lid, 7, &request(method::SET, attr::INFORM_INFO, 0, &t))
                .reply
                .unwrap(),
        )
    };
    // osmtest's sequence: subscribe with QPN 0, unsubscribe with QPN 1,
    // subscribe twice (replacing), a second trap, cleanup of both.
    assert_eq!(set(&mut sa, 0, 0, 0), status::REQ_INVALID);
    assert_eq!(set(&mut sa, 1, 0, 0), 0);
    assert_eq!(set(&mut sa, 0, 1, 0), 0);
    assert_eq!(set(&mut sa, 1, 1, 0), 0);
    assert_eq!(set(&mut sa, 1, 0, 0), 0);
    assert_eq!(set(&mut sa, 1, 0, 0x1234), 0);
    assert_eq!(sa.subscriptions().iter().count(), 2);
    assert!(
        sa.subscriptions()
            .iter()
            .all(|s| s.qpn == 7 && s.lid == lid),
        "Reports go to the requester's QP"
    );
    assert_eq!(set(&mut sa, 0, 1, 0x1234), 0);
    assert_eq!(set(&mut sa, 0, 1, 0), 0);
    assert_eq!(sa.subscriptions().iter().count(), 0);
}

/// The SL2VL map of a switch or CA port in the routing, by SA key
/// (LID, in port, out port); CA maps are keyed with ports 0.
fn routing_sl2vl(out: &OnceOutcome) -> BTreeMap<(u16, u8, u8), [u8; 16]> {
    let f = &out.sweep.fabric;
    let routing = &out.accepted.as_ref().expect("routed").routing;
    let mut want = BTreeMap::new();
    for e in routing.sl2vl.iter() {
        let n = &f.nodes[e.node as usize];
        let key = if n.is_switch() {
            (n.ports[0].info.as_ref().expect("port 0").lid, e.in_port, e.out_port)
        } else {
            (n.ports[usize::from(e.out_port)].info.as_ref().expect("info").lid, 0, 0)
        };
        want.insert(key, e.vl);
    }
    want
}

#[test]
fn sl2vl_records_are_the_maps_the_routing_programmed() {
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let out = routed_topo(&topo, "lash", &Config::default());
    let want = routing_sl2vl(&out);
    assert!(!want.is_empty(), "lash programs SL2VL maps");
    let mut sa = sa_with(SaDb::build_shared(&out));
    let got: BTreeMap<(u16, u8, u8), [u8; 16]> = records(&get_all(&mut sa, attr::SL2VL_RECORD), slr::LEN)
        .iter()
        .map(|r| {
            let r = slr::Repr::parse(&slr::Packet::new_checked(&r[..]).expect("record")).expect("parse");
            ((r.lid, r.in_port_num, r.out_port_num), r.vl)
        })
        .collect();
    // Every port answered, as OpenSM's SA: a switch's every input port
    // (0 included) to every output port (0 included), a CA port's one
    // map; what was programmed where it was, zeros elsewhere.
    let keys = all_sl2vl_keys(&out);
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), keys, "one record for each map OpenSM answers");
    for (key, vl) in &got {
        assert_eq!(vl, want.get(key).unwrap_or(&[0; 16]), "{key:?}");
    }
    assert!(want.keys().all(|k| got.contains_key(k)), "every map programmed is answered");
    assert!(want.len() < got.len(), "lash leaves some maps (port 0's) unprogrammed");

    // Get by (LID, in, out) on a switch: exactly that map.
    let (&(lid, inp, outp), vl) = want.iter().find(|((_, i, o), _)| *i != 0 || *o != 0).expect("a switch map");
    let mut t = [0u8; slr::LEN];
    slr::Repr { lid, in_port_num: inp, out_port_num: outp, vl: [0; 16] }
        .emit(&mut slr::Packet::new_unchecked(&mut t[..]));
    let a = get(&mut sa, attr::SL2VL_RECORD, 0b111, &t);
    assert_eq!(status_of(&a), 0);
    let r = slr::Repr::parse(&slr::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec")).expect("parse");
    assert_eq!((r.lid, r.in_port_num, r.out_port_num, r.vl), (lid, inp, outp, *vl));

    // A CA port asked for by LID whatever the port numbers (osmtest asks
    // with 0): its one map.
    let ca = end_lids(&out).into_iter().find(|e| !e.2).expect("a CA");
    if let Some(vl) = want.get(&(ca.0, 0, 0)) {
        let mut t = lid_key::<{ slr::LEN }>(ca.0);
        t[2] = 1;
        t[3] = 1;
        let a = get(&mut sa, attr::SL2VL_RECORD, 0b111, &t);
        assert_eq!(status_of(&a), 0);
        assert_eq!(slr::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec").vl(0), vl[0]);
    }

    // A switch's port 0 to itself: a record (zeros: not programmed).
    let sw = end_lids(&out).into_iter().find(|e| e.2).expect("a switch").0;
    let t = lid_key::<{ slr::LEN }>(sw);
    let a = get(&mut sa, attr::SL2VL_RECORD, 0b111, &t);
    assert_eq!(status_of(&a), 0);
    let r = slr::Repr::parse(&slr::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec")).expect("parse");
    assert_eq!((r.lid, r.in_port_num, r.out_port_num), (sw, 0, 0));
    assert_eq!(&r.vl, want.get(&(sw, 0, 0)).unwrap_or(&[0; 16]));
    // Ports the switch does not have: no record.
    let mut t = lid_key::<{ slr::LEN }>(sw);
    t[2] = 200;
    t[3] = 201;
    assert_eq!(status_of(&get(&mut sa, attr::SL2VL_RECORD, 0b111, &t)), status::NO_RECORDS);
    // Set is not a method of this record.
    assert_eq!(
        status_of(&query(&mut sa, 1, method::SET, attr::SL2VL_RECORD, 0, &t)),
        mad_status::UNSUPPORTED_METHOD_ATTR
    );
}

/// The (LID, in port, out port) keys of the SL2VL records OpenSM's SA
/// answers (osm_sa_slvl_record.c): every pair of a switch's ports 0..=N,
/// one (LID, 0, 0) for each CA port; sorted.
fn all_sl2vl_keys(out: &OnceOutcome) -> Vec<(u16, u8, u8)> {
    let f = &out.sweep.fabric;
    let mut keys = Vec::new();
    for n in &f.nodes {
        if n.is_switch() {
            let lid = n.ports[0].info.as_ref().expect("port 0").lid;
            for o in 0..=n.num_ports {
                for i in 0..=n.num_ports {
                    keys.push((lid, i, o));
                }
            }
        } else {
            for p in n.ports.iter().skip(1).filter_map(|p| p.info.as_ref()).filter(|i| i.lid != 0) {
                keys.push((p.lid, 0, 0));
            }
        }
    }
    keys.sort();
    keys
}

/// The (LID, port, block) keys of the VLArb records OpenSM's SA answers
/// (osm_sa_vlarb_record.c): blocks 1-4 of every port of a switch (0
/// included) and of every CA port (by its number); sorted.
fn all_vlarb_keys(out: &OnceOutcome) -> Vec<(u16, u8, u8)> {
    let f = &out.sweep.fabric;
    let mut keys = Vec::new();
    for n in &f.nodes {
        let ports: Vec<(u16, u8)> = if n.is_switch() {
            let lid = n.ports[0].info.as_ref().expect("port 0").lid;
            (0..=n.num_ports).map(|p| (lid, p)).collect()
        } else {
            n.ports
                .iter()
                .enumerate()
                .skip(1)
                .filter_map(|(p, x)| x.info.as_ref().filter(|i| i.lid != 0).map(|i| (i.lid, p as u8)))
                .collect()
        };
        for (lid, p) in ports {
            keys.extend((1..=4).map(|b| (lid, p, b)));
        }
    }
    keys.sort();
    keys
}

#[test]
fn sl2vl_and_vlarb_records_without_tables_are_zeros_for_every_port() {
    // minhop programs no VL tables (nor does QoS, off): every port is
    // still answered, as OpenSM answers the tables it never set, all zeros.
    let out = small();
    let mut sa = sa_with(SaDb::build_shared(&out));
    let maps: Vec<slr::Repr> = records(&get_all(&mut sa, attr::SL2VL_RECORD), slr::LEN)
        .iter()
        .map(|r| slr::Repr::parse(&slr::Packet::new_checked(&r[..]).expect("rec")).expect("parse"))
        .collect();
    let keys: Vec<(u16, u8, u8)> = maps.iter().map(|r| (r.lid, r.in_port_num, r.out_port_num)).collect();
    assert_eq!(keys, all_sl2vl_keys(&out));
    assert!(maps.iter().all(|r| r.vl == [0; 16]));
    let arbs: Vec<var::Repr> = records(&get_all(&mut sa, attr::VLARB_RECORD), var::LEN)
        .iter()
        .map(|r| var::Repr::parse(&var::Packet::new_checked(&r[..]).expect("rec")).expect("parse"))
        .collect();
    let keys: Vec<(u16, u8, u8)> = arbs.iter().map(|r| (r.lid, r.out_port_num, r.block_num)).collect();
    assert_eq!(keys, all_vlarb_keys(&out));
    assert!(arbs.iter().all(|r| r.entries == [(0, 0); var::ENTRIES]));
    assert_eq!(
        get_all(&mut sa, attr::MC_MEMBER_RECORD).len(),
        sa::HEADER_LEN,
        "no groups: no MCMemberRecords, not three records of zeros"
    );
}

#[test]
fn vlarb_records_are_the_blocks_the_routing_programmed() {
    let mut out = small();
    let f = out.sweep.fabric.clone();
    let sw = f.nodes.iter().position(|n| n.is_switch()).expect("a switch");
    let ca = f.nodes.iter().position(|n| !n.is_switch()).expect("a CA");
    let w = |vl: u8, weight: u8| sm_abi::VlWeight { vl, weight };
    {
        let routing = &mut std::sync::Arc::get_mut(out.accepted.as_mut().expect("routed")).expect("not shared yet").routing;
        // Switch port 3: a low table longer than one block, a short high one.
        let low: Vec<_> = (0..40).map(|i| w((i % 8) as u8, 32)).collect();
        routing.vlarb.push(sm_abi::VlArb {
            node: sw as u32,
            port: 3,
            high_limit: 4,
            high: vec![w(1, 255)].into(),
            low: low.into(),
        });
        routing.vlarb.push(sm_abi::VlArb {
            node: ca as u32,
            port: 1,
            high_limit: 0,
            high: Vec::new().into(),
            low: vec![w(0, 64), w(1, 64)].into(),
        });
    }
    let sw_lid = f.nodes[sw].ports[0].info.as_ref().expect("port 0").lid;
    let ca_lid = f.nodes[ca].ports[1].info.as_ref().expect("info").lid;
    let mut sa = sa_with(SaDb::build_shared(&out));
    let all: Vec<var::Repr> = records(&get_all(&mut sa, attr::VLARB_RECORD), var::LEN)
        .iter()
        .map(|r| var::Repr::parse(&var::Packet::new_checked(&r[..]).expect("rec")).expect("parse"))
        .collect();
    let keys: Vec<(u16, u8, u8)> = all.iter().map(|r| (r.lid, r.out_port_num, r.block_num)).collect();
    assert_eq!(keys, all_vlarb_keys(&out), "blocks 1-4 of every port, as OpenSM answers");
    let written = [(sw_lid, 3, 1), (sw_lid, 3, 2), (sw_lid, 3, 3), (ca_lid, 1, 1)];
    for r in &all {
        let key = (r.lid, r.out_port_num, r.block_num);
        assert_eq!(written.contains(&key), r.entries != [(0, 0); var::ENTRIES], "{key:?}: {:?}", r.entries);
    }
    // Block 2 holds low entries 32..40; the rest of the block is empty.
    let b2 = all.iter().find(|r| (r.lid, r.out_port_num, r.block_num) == (sw_lid, 3, 2)).expect("block 2");
    assert_eq!(b2.entries[0], (0, 32));
    assert_eq!(b2.entries[7], (7, 32));
    assert_eq!(b2.entries[8], (0, 0));
    // Get as osmtest asks a CA: LID, port 0, block.
    let mut t = lid_key::<{ var::LEN }>(ca_lid);
    t[3] = 1;
    let a = get(&mut sa, attr::VLARB_RECORD, 0b111, &t);
    assert_eq!(status_of(&a), 0);
    let r = var::Repr::parse(&var::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec")).expect("parse");
    assert_eq!(&r.entries[..3], &[(0, 64), (1, 64), (0, 0)]);
    assert_eq!(r.out_port_num, 1, "a CA's record names its port, as OpenSM's");
    // Block 4 was not written: zeros.
    t[3] = 4;
    let a = get(&mut sa, attr::VLARB_RECORD, 0b111, &t);
    assert_eq!(status_of(&a), 0);
    let r = var::Repr::parse(&var::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec")).expect("parse");
    assert_eq!(r.entries, [(0, 0); var::ENTRIES]);
    // A port the switch does not have: no record.
    let mut t = lid_key::<{ var::LEN }>(sw_lid);
    t[2] = 200;
    t[3] = 1;
    assert_eq!(status_of(&get(&mut sa, attr::VLARB_RECORD, 0b111, &t)), status::NO_RECORDS);
}

#[test]
fn a_path_record_get_from_a_port_to_itself_is_the_self_path() {
    let out = small();
    let mut sa = sa_with(SaDb::build_shared(&out));
    for (lid, guid, _) in end_lids(&out) {
        let gid = (0xfe80u128 << 112) | u128::from(guid);
        let a = path_query(
            &mut sa,
            lid,
            false,
            pr::component::SGID | pr::component::DGID,
            pr::Repr { sgid: gid, dgid: gid, ..Default::default() },
        );
        assert_eq!(status_of(&a), 0, "self path of LID {lid}");
        let r = pr::Repr::parse(&pr::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec")).expect("parse");
        assert_eq!((r.slid, r.dlid, r.sgid, r.dgid), (lid, lid, gid, gid));
        assert_eq!(r.hop_limit, 0);
        let a = path_query(
            &mut sa,
            lid,
            false,
            pr::component::SLID | pr::component::DLID,
            pr::Repr { slid: lid, dlid: lid, ..Default::default() },
        );
        assert_eq!(status_of(&a), 0, "self path of LID {lid} by LIDs");
    }
}

mod services {
    use super::*;
    use sm_core::sa::service::{Requester, ServiceLimits, Services};
    use sm_mad::sa_service_record::{self as svc, component as sc};
    use std::time::{Duration, Instant};

    fn record(id: u64, gid: u128, lease: u32, name: &str) -> [u8; svc::LEN] {
        let mut service_name = [0u8; svc::NAME_LEN];
        service_name[..name.len()].copy_from_slice(name.as_bytes());
        let mut out = [0u8; svc::LEN];
        svc::Repr {
            service_id: id,
            service_gid: gid,
            service_lease: lease,
            service_key: 0x77,
            service_name,
            ..Default::default()
        }
        .emit(&mut svc::Packet::new_unchecked(&mut out[..]));
        out
    }

    fn parse(b: &[u8]) -> svc::Repr {
        svc::Repr::parse(&svc::Packet::new_checked(b).expect("record")).expect("parse")
    }

    const SET_MASK: u64 = sc::ID | sc::GID | sc::LEASE | sc::KEY | sc::NAME;

    struct Fixture {
        db: SaDb,
        /// (LID, port GUID) of two hosts.
        hosts: [(u16, u64); 2],
    }

    fn fixture() -> Fixture {
        let out = small();
        let hosts: Vec<(u16, u64)> = end_lids(&out).into_iter().filter(|e| !e.2).map(|e| (e.0, e.1)).collect();
        Fixture { db: SaDb::build_shared(&out), hosts: [hosts[0], hosts[1]] }
    }

    fn gid(guid: u64) -> u128 {
        (0xfe80u128 << 112) | u128::from(guid)
    }

    #[test]
    fn leases_expire_and_answers_carry_the_time_left() {
        let f = fixture();
        let by = Requester { guid: Some(f.hosts[0].1), trusted: false };
        let mut s = Services::new();
        let t0 = Instant::now();
        let limits = ServiceLimits::default();
        s.set(&f.db, by, &limits, &record(1, gid(f.hosts[0].1), 10, "short"), SET_MASK, t0).expect("set");
        s.set(&f.db, by, &limits, &record(2, gid(f.hosts[0].1), svc::INFINITE_LEASE, "forever"), SET_MASK, t0)
            .expect("set");
        // No lease in the mask: infinite.
        let r = s.set(&f.db, by, &limits, &record(3, gid(f.hosts[0].1), 5, "nolease"), SET_MASK & !sc::LEASE, t0)
            .expect("set");
        assert_eq!(parse(&r).service_lease, svc::INFINITE_LEASE);
        assert_eq!(parse(&r).service_pkey, 0xFFFF, "the default P_Key when none given");
        let at = |d: u64| t0 + Duration::from_secs(d);
        let found = s.query(&[], 0, false, at(4));
        assert_eq!(found.len(), 3);
        let short = found.iter().map(|r| parse(r)).find(|r| r.service_id == 1).expect("short");
        assert_eq!(short.service_lease, 6, "seconds left");
        assert_eq!(short.service_key, 0, "keys hidden from untrusted requesters");
        assert_eq!(parse(&s.query(&[], 0, true, at(4))[0]).service_key, 0x77);
        let left: Vec<u64> = s.query(&[], 0, false, at(10)).iter().map(|r| parse(r).service_id).collect();
        assert_eq!(left, vec![2, 3], "the 10 s lease is over at 10 s");
        assert_eq!(s.len(at(1_000_000)), 2);
    }

    #[test]
    fn only_the_owner_or_a_trusted_request_replaces_or_deletes() {
        let f = fixture();
        let owner = Requester { guid: Some(f.hosts[0].1), trusted: false };
        let other = Requester { guid: Some(f.hosts[1].1), trusted: false };
        let trusted = Requester { guid: Some(f.hosts[1].1), trusted: true };
        let limits = ServiceLimits::default();
        let now = Instant::now();
        let mut s = Services::new();
        let rec = record(9, gid(f.hosts[0].1), svc::INFINITE_LEASE, "svc");
        s.set(&f.db, owner, &limits, &rec, SET_MASK, now).expect("set");
        assert_eq!(s.set(&f.db, other, &limits, &rec, SET_MASK, now), Err(status::DENIED));
        assert_eq!(s.delete(other, &rec, sc::NAME, now), Err(status::DENIED));
        assert_eq!(s.len(now), 1);
        // Same RID from the owner: replaced, still one record.
        let renamed = record(9, gid(f.hosts[0].1), svc::INFINITE_LEASE, "renamed");
        s.set(&f.db, owner, &limits, &renamed, SET_MASK, now).expect("replace");
        assert_eq!(s.len(now), 1);
        // Delete by RID whatever the mask names (osmtest sends only the name).
        let gone = s.delete(trusted, &renamed, sc::NAME, now).expect("trusted delete");
        assert_eq!(&parse(&gone).service_name[..7], b"renamed");
        assert_eq!(s.delete(owner, &renamed, sc::NAME, now), Err(status::NO_RECORDS));
        // A GID of no port here, and a Set without the RID's components.
        assert_eq!(
            s.set(&f.db, owner, &limits, &record(1, gid(0xdead), 1, "x"), SET_MASK, now),
            Err(status::INVALID_GID)
        );
        assert_eq!(
            s.set(&f.db, owner, &limits, &rec, sc::NAME, now),
            Err(status::INSUFFICIENT_COMPONENTS)
        );
    }

    #[test]
    fn a_port_holds_at_most_its_quota() {
        let f = fixture();
        let by = Requester { guid: Some(f.hosts[0].1), trusted: false };
        let limits = ServiceLimits { per_port: 4 };
        let now = Instant::now();
        let mut s = Services::new();
        for id in 0..4 {
            s.set(&f.db, by, &limits, &record(id, gid(f.hosts[0].1), 60, "q"), SET_MASK, now).expect("within quota");
        }
        assert_eq!(
            s.set(&f.db, by, &limits, &record(4, gid(f.hosts[0].1), 60, "q"), SET_MASK, now),
            Err(status::NO_RESOURCES)
        );
        // Replacing one of its own is no new record; another port has its own quota.
        s.set(&f.db, by, &limits, &record(0, gid(f.hosts[0].1), 60, "q2"), SET_MASK, now).expect("replace");
        let other = Requester { guid: Some(f.hosts[1].1), trusted: false };
        s.set(&f.db, other, &limits, &record(4, gid(f.hosts[1].1), 60, "q"), SET_MASK, now).expect("other port");
        // Expired records free the quota.
        s.set(&f.db, by, &limits, &record(5, gid(f.hosts[0].1), 60, "q"), SET_MASK, now + Duration::from_secs(61))
            .expect("after the leases ran out");
    }

    #[test]
    fn service_records_through_the_handler() {
        let f = fixture();
        let (lid, guid) = f.hosts[0];
        let mut sa = sa_with(f.db);
        let rec = record(0x42, gid(guid), svc::INFINITE_LEASE, "through-handler");
        let a = query(&mut sa, lid, method::SET, attr::SERVICE_RECORD, SET_MASK, &rec);
        assert_eq!(status_of(&a), 0);
        assert_eq!(a[3], method::GET_RESP);
        assert_eq!(parse(&a[sa::HEADER_LEN..]).service_id, 0x42);
        // Found by name (Get) and in the table.
        let a = query(&mut sa, f.hosts[1].0, method::GET, attr::SERVICE_RECORD, sc::NAME, &rec);
        assert_eq!(status_of(&a), 0);
        assert_eq!(parse(&a[sa::HEADER_LEN..]).service_gid, gid(guid));
        let all = records(&get_all(&mut sa, attr::SERVICE_RECORD), svc::LEN);
        assert_eq!(all.len(), 1);
        // Another host may not delete it; the owner may.
        let a = query(&mut sa, f.hosts[1].0, method::DELETE, attr::SERVICE_RECORD, sc::NAME, &rec);
        assert_eq!(status_of(&a), status::DENIED);
        let a = query(&mut sa, lid, method::DELETE, attr::SERVICE_RECORD, sc::NAME, &rec);
        assert_eq!((a[3], status_of(&a)), (method::DELETE_RESP, 0));
        let a = query(&mut sa, lid, method::GET, attr::SERVICE_RECORD, sc::NAME, &rec);
        assert_eq!(status_of(&a), status::NO_RECORDS);
    }
}

/// Alias GUIDs (OpenSM's GUIDInfoRecord Set and Delete): a host sets
/// GUIDs in its port's table, asks the SA to assign one, reads the table
/// back with a GetTable; a PathRecord to the alias GID goes to the port;
/// another port cannot take the same GUID; a delete frees it.
#[test]
fn guid_info_record_set_and_delete_give_ports_alias_guids() {
    use sm_mad::sa_guid_info_record as gir;
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let options = sm_core::sim::SimOptions { ca_guid_cap: 16, ..Default::default() };
    let out = routed_with(&topo, "minhop", &Config::default(), options);
    let db = SaDb::build_shared(&out);
    let prefix = u128::from(db.gid_prefix()) << 64;
    let mut sa = sa_with(db);
    let cas: Vec<_> = end_lids(&out).into_iter().filter(|e| !e.2).collect();
    assert!(cas.len() >= 2);
    let ((lid, guid, _), (other, other_guid, _)) = (cas[0], cas[1]);
    const LID_BLOCK: u64 = 0b11;
    let gid = |i: u32| 1u64 << (4 + i);
    let rec = |lid: u16, block_num: u8, guids: [u64; 8]| {
        let mut t = [0u8; gir::LEN];
        gir::Repr { lid, block_num, guids }.emit(&mut gir::Packet::new_unchecked(&mut t[..]));
        t
    };
    let answer = |a: &[u8]| gir::Repr::parse(&gir::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec")).expect("parse");
    let alias = 0x0002_c9ff_fe00_0a01u64;
    // Set GUID 1 to an alias, GUID 2 to 0 (the SA assigns one).
    let a = query(&mut sa, lid, method::SET, attr::GUID_INFO_RECORD, LID_BLOCK | gid(1) | gid(2), &rec(lid, 0, [0, alias, 0, 0, 0, 0, 0, 0]));
    assert_eq!(status_of(&a), 0);
    let set = answer(&a);
    assert_eq!((set.lid, set.guids[0], set.guids[1]), (lid, guid, alias));
    assert_eq!(set.guids[2] >> 40, 0x001405, "SM-assigned: OpenIB's OUI");
    assert_eq!((set.guids[2] >> 32) & 0xff, 0, "sm_assigned_guid 0 (OpenSM's default) in bits 39..32");
    assert_eq!(&set.guids[3..], &[0; 5]);
    // Without the block component: refused, as OpenSM.
    let a = query(&mut sa, lid, method::SET, attr::GUID_INFO_RECORD, 0b1 | gid(1), &rec(lid, 0, [0; 8]));
    assert_eq!(status_of(&a), status::INSUFFICIENT_COMPONENTS);
    // The port GUID is read-only; a block beyond GUIDCap has no record.
    let a = query(&mut sa, lid, method::SET, attr::GUID_INFO_RECORD, LID_BLOCK | gid(0), &rec(lid, 0, [1; 8]));
    assert_eq!(status_of(&a), status::REQ_INVALID);
    let a = query(&mut sa, lid, method::SET, attr::GUID_INFO_RECORD, LID_BLOCK | gid(1), &rec(lid, 2, [1; 8]));
    assert_eq!(status_of(&a), status::NO_RECORDS);
    // The table read back: blocks 0 and 1 (GUIDCap 16), block 0 as set.
    let t = lid_key::<{ gir::LEN }>(lid);
    let table: Vec<gir::Repr> = records(&get_table(&mut sa, attr::GUID_INFO_RECORD, 0b1, &t), gir::LEN)
        .iter()
        .map(|r| gir::Repr::parse(&gir::Packet::new_checked(&r[..]).expect("rec")).expect("parse"))
        .collect();
    assert_eq!(table.len(), 2, "{table:x?}");
    assert_eq!(table[0].guids, set.guids);
    assert_eq!((table[1].block_num, table[1].guids), (1, [0; 8]));
    // A PathRecord to the alias GID (and to the SM-assigned one) goes to the port.
    let gids = pr::component::SGID | pr::component::DGID;
    for g in [alias, set.guids[2]] {
        let q = pr::Repr { sgid: prefix | u128::from(other_guid), dgid: prefix | u128::from(g), ..Default::default() };
        let a = path_query(&mut sa, other, false, gids, q);
        assert_eq!(status_of(&a), 0, "path to alias {g:#x}");
        let r = pr::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec");
        assert_eq!((r.slid(), r.dlid()), (other, lid));
    }
    // Another port cannot take the alias: its entry stays empty.
    let a = query(&mut sa, other, method::SET, attr::GUID_INFO_RECORD, LID_BLOCK | gid(1), &rec(other, 0, [0, alias, 0, 0, 0, 0, 0, 0]));
    assert_eq!((status_of(&a), answer(&a).guids[1]), (0, 0));
    // Delete frees it: the alias GID is unknown again.
    let a = query(&mut sa, lid, method::DELETE, attr::GUID_INFO_RECORD, LID_BLOCK | gid(1), &rec(lid, 0, [0; 8]));
    assert_eq!((status_of(&a), answer(&a).guids[1]), (0, 0));
    let q = pr::Repr { sgid: prefix | u128::from(other_guid), dgid: prefix | u128::from(alias), ..Default::default() };
    assert_eq!(status_of(&path_query(&mut sa, other, false, gids, q)), status::INVALID_GID);
    // The table outlives a new sweep's database.
    sa.publish(SaDb::build_shared(&out));
    let a = get(&mut sa, attr::GUID_INFO_RECORD, 0b11, &rec(lid, 0, [0; 8]));
    assert_eq!(answer(&a).guids[2], set.guids[2]);
}

#[test]
fn alias_guids_hosts_set_are_written_to_their_ports() {
    // A host sets an alias and has the SA assign another; the SM writes
    // the port's GUIDInfo block; a second pass writes nothing; a Delete is
    // written as an empty entry. Read back from the port with SubnGet.
    use sm_core::daemon::aliases::{program, HeldAliases, Programmed};
    use sm_mad::{guid_info, sa_guid_info_record as gir};
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let (node, port) = sm_location(&topo);
    let mut sim = SimFabric::with_options(&topo, node, port, sm_core::sim::SimOptions { ca_guid_cap: 16, ..Default::default() }).expect("sim");
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "minhop", dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let out = sm_core::pipeline::once(&mut SimPort::new(&mut sim), &options, &registry, &Config::default(), &mut g2l, &mut held).expect("sweep");
    let mut sa = sa_with(SaDb::build_shared(&out));
    let cas: Vec<_> = end_lids(&out).into_iter().filter(|e| !e.2).collect();
    let (lid, guid, _) = cas[1];
    let rec = |guids: [u64; 8]| {
        let mut t = [0u8; gir::LEN];
        gir::Repr { lid, block_num: 0, guids }.emit(&mut gir::Packet::new_unchecked(&mut t[..]));
        t
    };
    let (lid_block, entry) = (0b11u64, |i: u32| 1u64 << (4 + i));
    let alias = 0x0002_c9ff_fe00_0b01u64;
    let a = query(&mut sa, lid, method::SET, attr::GUID_INFO_RECORD, lid_block | entry(1) | entry(2), &rec([0, alias, 0, 0, 0, 0, 0, 0]));
    assert_eq!(status_of(&a), 0);
    let assigned = gir::Repr::parse(&gir::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("rec")).expect("parse").guids[2];
    assert_ne!(assigned, 0);
    // The port's block 0, read with a SubnGet from the SM.
    let read = |sim: &mut SimFabric| {
        let f = out.sweep.fabric.clone();
        let (n, p) = f.nodes.iter().find_map(|n| n.ports.iter().position(|p| p.guid == guid).map(|p| (n, p))).expect("the port");
        let path = n.ports[p].path.clone().expect("a CA port's path");
        let mut sp = SimPort::new(sim);
        let mut client = sm_core::sweep::SmpClient::new(&mut sp, 2);
        let d = client.get(sm_mad::mad::attr::GUID_INFO, 0, &path).expect("GUIDInfo Get");
        guid_info::Repr::parse(&guid_info::Packet::new_checked(&d[..guid_info::LEN]).expect("block")).expect("parse").guids
    };
    assert_eq!(&read(&mut sim)[1..3], &[0, 0], "nothing on the port before the SM writes it");
    let mut held_aliases = HeldAliases::default();
    let aliases = sa.aliases();
    let pass = |sim: &mut SimFabric, held_aliases: &mut HeldAliases| {
        let mut sp = SimPort::new(sim);
        let mut client = sm_core::sweep::SmpClient::new(&mut sp, 2);
        program(&mut client, &out.sweep.fabric, &aliases, held_aliases)
    };
    let first = pass(&mut sim, &mut held_aliases);
    assert_eq!((first.written, first.failed), (2, 0), "blocks 0 and 1 of GUIDCap 16: {first:?}");
    assert_eq!(read(&mut sim)[..3], [guid, alias, assigned]);
    assert_eq!(pass(&mut sim, &mut held_aliases), Programmed { written: 0, unchanged: 2, failed: 0 });
    let a = query(&mut sa, lid, method::DELETE, attr::GUID_INFO_RECORD, lid_block | entry(1), &rec([0, alias, 0, 0, 0, 0, 0, 0]));
    assert_eq!(status_of(&a), 0);
    assert_eq!(pass(&mut sim, &mut held_aliases).written, 1);
    assert_eq!(read(&mut sim)[..3], [guid, 0, assigned]);
}
