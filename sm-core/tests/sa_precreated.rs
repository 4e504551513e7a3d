//! The groups the SM creates itself (issue 12, item 3) as the SA shows
//! them, and the MCMemberRecord rules osmtest's multicast flow checks:
//! requests crafted as they arrive on QP1, through [`Sa::handle`], on a
//! routed embedded fabric.

mod common;

use std::sync::{Arc, Mutex};

use sm_core::mcast::precreate::{precreate, PartitionGroups};
use sm_core::mcast::McGroups;
use sm_core::sa::{Sa, SaConfig, SaDb};
use sm_mad::mad::method;
use sm_mad::sa::{self, attr, status};
use sm_mad::sa_mc_member_record::{self as mcr, component as c};
use sm_mad::sa_path_record::selector;

const BROADCAST: u128 = 0xff12_401b_ffff_0000_0000_0000_ffff_ffff;

struct Setup {
    sa: Sa,
    groups: Arc<Mutex<McGroups>>,
    /// (LID, GID) of each host port.
    hosts: Vec<(u16, u128)>,
}

fn setup() -> Setup {
    let out = common::small_sweep();
    let db = SaDb::build_shared(&out);
    let prefix = u128::from(db.gid_prefix()) << 64;
    let hosts: Vec<(u16, u128)> = db
        .end_ports()
        .iter()
        .filter(|e| !e.switch)
        .map(|e| (e.lid, prefix | u128::from(e.guid)))
        .collect();
    assert!(hosts.len() >= 2);
    let mut g = McGroups::new();
    assert!(precreate(&mut g, &[PartitionGroups::default_partition()], 18).is_empty());
    let groups = Arc::new(Mutex::new(g));
    let sa = Sa::new(Arc::clone(&groups), SaConfig::default());
    sa.publish(db);
    Setup { sa, groups, hosts }
}

fn request(m: u8, mask: u64, rec: &mcr::Repr) -> Vec<u8> {
    let mut mad = vec![0u8; 256];
    sa::Repr {
        method: m,
        transaction_id: 0x4242_0000,
        attribute_id: attr::MC_MEMBER_RECORD,
        component_mask: mask,
        ..Default::default()
    }
    .emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
    rec.emit(&mut mcr::Packet::new_unchecked(&mut mad[sa::HEADER_LEN..sa::HEADER_LEN + mcr::LEN]));
    mad
}

/// Status and first record of the answer.
fn ask(sa: &mut Sa, from: u16, m: u8, mask: u64, rec: &mcr::Repr) -> (u16, Option<mcr::Repr>) {
    let a = sa.handle(from, 1, &request(m, mask, rec)).reply.expect("an answer");
    let st = u16::from_be_bytes([a[4], a[5]]);
    let r = mcr::Packet::new_checked(&a[sa::HEADER_LEN..])
        .ok()
        .and_then(|p| mcr::Repr::parse(&p).ok());
    (st, r)
}

/// The MGIDs an untrusted GetTable of every MCMemberRecord lists.
fn listed(sa: &mut Sa, from: u16) -> Vec<u128> {
    let a = sa
        .handle(from, 1, &request(method::GET_TABLE, 0, &mcr::Repr::default()))
        .reply
        .expect("an answer");
    assert_eq!(u16::from_be_bytes([a[4], a[5]]), 0);
    let p = sa::Packet::new_checked(&a[..]).expect("header");
    let payload = p.payload_length() as usize - 20;
    a[sa::HEADER_LEN..sa::HEADER_LEN + payload]
        .chunks(mcr::PADDED_LEN)
        .filter_map(|r| mcr::Packet::new_checked(r).ok().and_then(|p| mcr::Repr::parse(&p).ok()))
        .map(|r| r.mgid)
        .collect()
}

#[test]
fn the_broadcast_group_is_listed_and_joined_bare() {
    let Setup { mut sa, groups, hosts } = setup();
    // Listed before anyone joined, with OpenSM's parameters.
    assert_eq!(listed(&mut sa, hosts[0].0), vec![BROADCAST]);
    // Linux IPoIB's join: MGID, PortGID, JoinState (and P_Key).
    for (i, &(lid, gid)) in hosts.iter().take(2).enumerate() {
        let rec = mcr::Repr { mgid: BROADCAST, port_gid: gid, pkey: 0xFFFF, join_state: 1, ..Default::default() };
        let mask = c::MGID | c::PORT_GID | c::JOIN_STATE | if i == 1 { c::PKEY } else { 0 };
        let (st, r) = ask(&mut sa, lid, method::SET, mask, &rec);
        assert_eq!(st, 0, "bare join from LID {lid}");
        let r = r.expect("record");
        assert_eq!(
            (r.mgid, r.qkey, r.pkey, r.mtu, r.mtu_selector, r.rate, r.sl, r.scope, r.join_state),
            (BROADCAST, 0x0B1B, 0xFFFF, 4, selector::EXACTLY, 3, 0, 2, 1)
        );
    }
    // Both leave: the group stays, member-less, and is still listed.
    for &(lid, gid) in hosts.iter().take(2) {
        let rec = mcr::Repr { mgid: BROADCAST, port_gid: gid, join_state: 1, ..Default::default() };
        let (st, _) = ask(&mut sa, lid, method::DELETE, c::MGID | c::PORT_GID | c::JOIN_STATE, &rec);
        assert_eq!(st, 0);
    }
    let g = groups.lock().expect("groups");
    let b = g.get(&BROADCAST.to_be_bytes()).expect("the broadcast group stays");
    assert!(b.members.is_empty() && b.well_known);
    drop(g);
    assert_eq!(listed(&mut sa, hosts[0].0), vec![BROADCAST]);
    // A join that disagrees with the group's parameters is refused.
    let rec = mcr::Repr { mgid: BROADCAST, port_gid: hosts[0].1, qkey: 0x1234, join_state: 1, ..Default::default() };
    let (st, _) = ask(&mut sa, hosts[0].0, method::SET, c::MGID | c::PORT_GID | c::JOIN_STATE | c::QKEY, &rec);
    assert_eq!(st, status::REQ_INVALID);
}

/// A create with everything a create needs, MGID `mgid`, from host 0.
fn create(s: &mut Setup, mgid: u128, extra_mask: u64, f: impl FnOnce(&mut mcr::Repr)) -> (u16, Option<mcr::Repr>) {
    let (lid, gid) = s.hosts[0];
    let mut rec = mcr::Repr { mgid, port_gid: gid, qkey: 0x11, pkey: 0xFFFF, join_state: 1, ..Default::default() };
    f(&mut rec);
    let mask = c::MGID | c::PORT_GID | c::QKEY | c::PKEY | c::SL | c::FLOW_LABEL | c::JOIN_STATE | c::TCLASS | extra_mask;
    ask(&mut s.sa, lid, method::SET, mask, &rec)
}

#[test]
fn osmtests_multicast_rules() {
    let mut s = setup();
    // osmtest echoes a group's MTU and rate; with no group to echo they
    // are 0 with selector "greater than": any.
    let (st, r) = create(&mut s, 0, c::MTU | c::MTU_SELECTOR | c::RATE | c::RATE_SELECTOR, |r| {
        r.mtu = 0;
        r.mtu_selector = selector::GREATER;
        r.rate = 0;
        r.rate_selector = selector::GREATER;
    });
    assert_eq!(st, 0);
    assert!(r.is_some_and(|r| r.mtu >= 1 && r.rate >= 2));
    // 0 compared exactly is no MTU.
    let (st, _) = create(&mut s, 0, c::MTU | c::MTU_SELECTOR, |r| {
        r.mtu = 0;
        r.mtu_selector = selector::EXACTLY;
    });
    assert_eq!(st, status::REQ_INVALID);
    // The SA's own signature in link-local scope is refused, elsewhere
    // taken; reserved flag bits are refused.
    assert_eq!(create(&mut s, 0xff12_a01b_0000_0000_0000_0000_0000_0001, 0, |_| ()).0, status::REQ_INVALID);
    assert_eq!(create(&mut s, 0xff15_a01b_0000_0000_0000_0000_0000_0001, 0, |_| ()).0, 0);
    assert_eq!(create(&mut s, 0xff32_0000_0000_0000_0000_0000_0000_0001, 0, |_| ()).0, status::REQ_INVALID);
    // Missing components are reported before a bad MGID.
    let (lid, gid) = s.hosts[0];
    let rec = mcr::Repr { mgid: 1, port_gid: gid, pkey: 0xFFFF, join_state: 1, ..Default::default() };
    let mask = c::MGID | c::PORT_GID | c::QKEY | c::PKEY | c::SL | c::JOIN_STATE | c::TCLASS;
    assert_eq!(ask(&mut s.sa, lid, method::SET, mask, &rec).0, status::INSUFFICIENT_COMPONENTS);
    // Leaves name only bits the member holds, and some.
    let mgid = 0xff12_0000_0000_0000_0000_0000_0000_0077u128;
    assert_eq!(create(&mut s, mgid, 0, |r| r.join_state = 3).0, 0);
    let leave = |sa: &mut Sa, js: u8| {
        let rec = mcr::Repr { mgid, port_gid: gid, join_state: js, ..Default::default() };
        ask(sa, lid, method::DELETE, c::MGID | c::PORT_GID | c::JOIN_STATE, &rec).0
    };
    assert_eq!(leave(&mut s.sa, 6), status::REQ_INVALID);
    assert_eq!(leave(&mut s.sa, 0), status::REQ_INVALID);
    assert_eq!(leave(&mut s.sa, 2), 0);
    assert_eq!(leave(&mut s.sa, 2), status::REQ_INVALID);
    assert_eq!(leave(&mut s.sa, 1), 0);
    assert!(s.groups.lock().expect("groups").get(&mgid.to_be_bytes()).is_none());
}
