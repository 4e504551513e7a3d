//! The SA against hostile hosts (issue 13, items 2, 5 and 10): a host must
//! not change another's multicast membership nor see who is a member,
//! trust comes from the configured SM_Key only, and no port can grow the
//! SA's state or answers without bound. Requests are crafted MADs through
//! [`Sa::handle`] on a routed embedded fabric, as they would arrive on QP1.

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sm_core::mcast::McGroups;
use sm_core::sa::{Report, Responder, Sa, SaConfig, SaDb};
use sm_core::sweep::umad::IncomingMad;
use sm_core::pipeline::OnceOutcome;
use sm_mad::mad::method;
use sm_mad::sa::{self, attr, status};
use sm_mad::{
    sa_inform_info as ii, sa_mc_member_record as mcr, sa_node_record as nr,
    sa_path_record as pr, sa_pkey_table_record as pkr, sa_sm_info_record as smir,
};

/// The IPoIB broadcast group of the default partition.
const BROADCAST: u128 = 0xff12_401b_ffff_0000_0000_0000_ffff_ffff;
const JOIN: u64 = mcr::component::MGID | mcr::component::PORT_GID | mcr::component::JOIN_STATE;
const CREATE: u64 = JOIN
    | mcr::component::QKEY
    | mcr::component::PKEY
    | mcr::component::TCLASS
    | mcr::component::FLOW_LABEL
    | mcr::component::SL;
/// [`SaConfig::default`]'s SM_Key (OpenSM's default).
const DEFAULT_KEY: u64 = 1;
const FULL: u8 = 1;
const NON: u8 = 2;

fn small() -> OnceOutcome {
    common::small_sweep()
}

/// A host port: its LID and GID.
#[derive(Debug, Clone, Copy)]
struct Host {
    lid: u16,
    gid: u128,
}

struct Setup {
    sa: Sa,
    groups: Arc<Mutex<McGroups>>,
    hosts: Vec<Host>,
    db_for_spawn: Option<SaDb>,
}

/// The host ports of the small fabric.
fn hosts() -> Vec<Host> {
    use std::sync::OnceLock;
    static HOSTS: OnceLock<Vec<Host>> = OnceLock::new();
    HOSTS.get_or_init(|| db_and_hosts().1).clone()
}

fn db_and_hosts() -> (SaDb, Vec<Host>) {
    use std::sync::OnceLock;
    static OUT: OnceLock<Mutex<OnceOutcome>> = OnceLock::new();
    let out = OUT.get_or_init(|| Mutex::new(small()));
    let db = SaDb::build_shared(&*out.lock().expect("fabric"));
    let prefix = u128::from(db.gid_prefix()) << 64;
    let hosts: Vec<Host> = db
        .end_ports()
        .iter()
        .filter(|e| !e.switch)
        .map(|e| Host {
            lid: e.lid,
            gid: prefix | u128::from(e.guid),
        })
        .collect();
    assert!(hosts.len() >= 4, "the small fabric has 4 hosts");
    (db, hosts)
}

fn setup(config: SaConfig) -> Setup {
    let (db, hosts) = db_and_hosts();
    let groups = Arc::new(Mutex::new(McGroups::new()));
    // `mut` for the SA of fe1a85f (publish took `&mut self`), so these
    // tests can be run against it to see them fail.
    #[allow(unused_mut)]
    let mut sa = Sa::new(Arc::clone(&groups), config);
    sa.publish(db);
    let (db2, _) = db_and_hosts();
    Setup {
        sa,
        groups,
        hosts,
        db_for_spawn: Some(db2),
    }
}

/// An SA request MAD carrying `key` as its SM_Key.
fn request(m: u8, attribute: u16, mask: u64, data: &[u8], key: u64) -> Vec<u8> {
    let mut mad = vec![0u8; 256];
    sa::Repr {
        method: m,
        transaction_id: 0x4242_0000,
        attribute_id: attribute,
        component_mask: mask,
        ..Default::default()
    }
    .emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
    mad[sa::HEADER_LEN..sa::HEADER_LEN + data.len()].copy_from_slice(data);
    mad[36..44].copy_from_slice(&key.to_be_bytes());
    mad
}

/// The answer to `mad` from `slid`; every answer shows SM_Key 0.
fn ask(sa: &mut Sa, slid: u16, mad: &[u8]) -> Vec<u8> {
    let answer = sa.handle(slid, 1, mad).reply.expect("an answer");
    assert_eq!(&answer[8..16], &mad[8..16], "TID echoed");
    assert_eq!(&answer[36..44], &[0u8; 8], "no SM_Key in any answer");
    answer
}

/// Whatever [`Sa::handle`] makes of `mad` from `slid`.
fn raw(sa: &mut Sa, slid: u16, mad: &[u8]) -> sm_core::sa::Answer {
    sa.handle(slid, 1, mad)
}

fn status_of(answer: &[u8]) -> u16 {
    u16::from_be_bytes([answer[4], answer[5]])
}

/// The records of a successful GetTable answer.
fn records(answer: &[u8], len: usize) -> Vec<Vec<u8>> {
    assert_eq!(answer[3], method::GET_TABLE_RESP);
    assert_eq!(status_of(answer), 0, "status");
    let p = sa::Packet::new_checked(answer).expect("header");
    let payload = p.payload_length() as usize - 20;
    answer[sa::HEADER_LEN..sa::HEADER_LEN + payload]
        .chunks(len)
        .map(<[u8]>::to_vec)
        .collect()
}

fn mc_record(mgid: u128, port_gid: u128, join_state: u8) -> [u8; mcr::LEN] {
    let mut t = [0u8; mcr::LEN];
    mcr::Repr {
        mgid,
        port_gid,
        qkey: 0x0B1B,
        pkey: 0xFFFF,
        join_state,
        ..Default::default()
    }
    .emit(&mut mcr::Packet::new_unchecked(&mut t[..]));
    t
}

/// An MCMemberRecord request from `from`, with SM_Key `key`; its status.
fn mc(sa: &mut Sa, from: u16, m: u8, mask: u64, t: &[u8; mcr::LEN], key: u64) -> u16 {
    status_of(&ask(sa, from, &request(m, attr::MC_MEMBER_RECORD, mask, t, key)))
}

/// (JoinState, ProxyJoin) of `port_gid` in `mgid`, if a member.
fn membership(groups: &Mutex<McGroups>, mgid: u128, port_gid: u128) -> Option<(u8, bool)> {
    let g = groups.lock().expect("groups");
    g.get(&mgid.to_be_bytes())
        .and_then(|g| g.members.get(&port_gid.to_be_bytes()).map(|m| (m.join_state, m.proxy)))
}

#[test]
fn a_host_cannot_take_another_out_of_a_group() {
    let Setup {
        mut sa,
        groups,
        hosts,
        ..
    } = setup(SaConfig::default());
    let (a, b, c, d) = (hosts[0], hosts[1], hosts[2], hosts[3]);
    let t = |h: Host, js: u8| mc_record(BROADCAST, h.gid, js);
    assert_eq!(mc(&mut sa, a.lid, method::SET, CREATE, &t(a, FULL), 0), 0);
    assert_eq!(mc(&mut sa, b.lid, method::SET, JOIN, &t(b, FULL), 0), 0);
    // B deletes A's membership: refused as OpenSM does, A stays.
    let answer = sa.handle(b.lid, 1, &request(method::DELETE, attr::MC_MEMBER_RECORD, JOIN, &t(a, FULL), 0));
    let reply = answer.reply.expect("an answer");
    assert_eq!(
        (reply[3], status_of(&reply)),
        (method::DELETE_RESP, status::REQ_INVALID)
    );
    assert!(!answer.mcast_changed);
    assert_eq!(membership(&groups, BROADCAST, a.gid), Some((FULL, false)));
    // Nor from a LID no port of the subnet has.
    assert_eq!(
        mc(&mut sa, 0x0bff, method::DELETE, JOIN, &t(a, FULL), 0),
        status::REQ_INVALID
    );
    assert_eq!(membership(&groups, BROADCAST, a.gid), Some((FULL, false)));
    // A port leaves by itself.
    assert_eq!(mc(&mut sa, a.lid, method::DELETE, JOIN, &t(a, FULL), 0), 0);
    assert_eq!(membership(&groups, BROADCAST, a.gid), None);
    // A membership joined by proxy may be ended by any port of the
    // partition (o15-0.2.1 case 2).
    assert_eq!(mc(&mut sa, b.lid, method::SET, JOIN, &t(c, FULL), 0), 0);
    assert_eq!(membership(&groups, BROADCAST, c.gid), Some((FULL, true)));
    assert_eq!(mc(&mut sa, d.lid, method::DELETE, JOIN, &t(c, FULL), 0), 0);
    assert_eq!(membership(&groups, BROADCAST, c.gid), None);
    // Once the port joins by itself the membership is its own: a proxy
    // that joined it first cannot leave it open to removal by anyone.
    assert_eq!(mc(&mut sa, b.lid, method::SET, JOIN, &t(c, NON), 0), 0);
    assert_eq!(mc(&mut sa, c.lid, method::SET, JOIN, &t(c, FULL), 0), 0);
    assert_eq!(membership(&groups, BROADCAST, c.gid), Some((FULL | NON, false)));
    assert_eq!(
        mc(&mut sa, d.lid, method::DELETE, JOIN, &t(c, FULL), 0),
        status::REQ_INVALID
    );
    assert_eq!(membership(&groups, BROADCAST, c.gid), Some((FULL | NON, false)));
    // A trusted request (the SM_Key) may end any membership.
    assert_eq!(mc(&mut sa, a.lid, method::SET, JOIN, &t(a, FULL), 0), 0);
    assert_eq!(
        mc(&mut sa, b.lid, method::DELETE, JOIN, &t(a, FULL), DEFAULT_KEY),
        0
    );
    assert_eq!(membership(&groups, BROADCAST, a.gid), None);
    assert_eq!(membership(&groups, BROADCAST, b.gid), Some((FULL, false)));
}

#[test]
fn a_join_naming_another_port_leaves_its_membership_alone() {
    let Setup {
        mut sa,
        groups,
        hosts,
        ..
    } = setup(SaConfig::default());
    let (a, b) = (hosts[0], hosts[1]);
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, CREATE, &mc_record(BROADCAST, a.gid, FULL), 0),
        0
    );
    // B "joins" A, which is a member by itself: refused, A unchanged
    // (its ProxyJoin is not turned on).
    assert_eq!(
        mc(&mut sa, b.lid, method::SET, JOIN, &mc_record(BROADCAST, a.gid, NON), 0),
        status::REQ_INVALID
    );
    assert_eq!(membership(&groups, BROADCAST, a.gid), Some((FULL, false)));
    assert_eq!(
        mc(&mut sa, b.lid, method::SET, JOIN, &mc_record(BROADCAST, a.gid, FULL), 0),
        status::REQ_INVALID
    );
    assert_eq!(membership(&groups, BROADCAST, a.gid), Some((FULL, false)));
    // Trusted, the join is taken; it adds JoinState bits and still leaves
    // ProxyJoin as A's own join set it.
    assert_eq!(
        mc(&mut sa, b.lid, method::SET, JOIN, &mc_record(BROADCAST, a.gid, NON), DEFAULT_KEY),
        0
    );
    assert_eq!(membership(&groups, BROADCAST, a.gid), Some((FULL | NON, false)));
    // A's own further joins are fine.
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, JOIN, &mc_record(BROADCAST, a.gid, 4), 0),
        0
    );
    assert_eq!(membership(&groups, BROADCAST, a.gid), Some((FULL | NON | 4, false)));
}

#[test]
fn untrusted_queries_show_groups_not_members() {
    let Setup { mut sa, hosts, .. } = setup(SaConfig::default());
    let (a, b, c) = (hosts[0], hosts[1], hosts[2]);
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, CREATE, &mc_record(BROADCAST, a.gid, FULL), 0),
        0
    );
    assert_eq!(
        mc(&mut sa, b.lid, method::SET, JOIN, &mc_record(BROADCAST, b.gid, NON), 0),
        0
    );
    let parse = |r: &[u8]| mcr::Repr::parse(&mcr::Packet::new_checked(r).expect("record")).expect("record");
    let table = |sa: &mut Sa, mask: u64, t: &[u8; mcr::LEN], key: u64| {
        records(
            &ask(sa, c.lid, &request(method::GET_TABLE, attr::MC_MEMBER_RECORD, mask, t, key)),
            mcr::PADDED_LEN,
        )
        .iter()
        .map(|r| parse(r))
        .collect::<Vec<_>>()
    };
    // Untrusted: the group once, with its MGID, MLID, P_Key and Q_Key;
    // no PortGID, JoinState or ProxyJoin.
    for (mask, t) in [
        (0, mc_record(0, 0, 0)),
        (mcr::component::MGID, mc_record(BROADCAST, 0, 0)),
        (mcr::component::PORT_GID, mc_record(0, a.gid, 0)),
    ] {
        let recs = table(&mut sa, mask, &t, 0);
        assert_eq!(recs.len(), 1, "mask {mask:#x}: {recs:?}");
        let r = &recs[0];
        assert_eq!((r.mgid, r.mlid, r.pkey, r.qkey), (BROADCAST, 0xC000, 0xFFFF, 0x0B1B));
        assert_eq!((r.port_gid, r.join_state, r.proxy_join), (0, 0, false));
    }
    // A Get as well.
    let a1 = ask(
        &mut sa,
        c.lid,
        &request(method::GET, attr::MC_MEMBER_RECORD, mcr::component::MGID, &mc_record(BROADCAST, 0, 0), 0),
    );
    assert_eq!(status_of(&a1), 0);
    let r = parse(&a1[sa::HEADER_LEN..]);
    assert_eq!((r.mgid, r.port_gid, r.join_state), (BROADCAST, 0, 0));
    // Trusted: every member.
    let mut got: Vec<(u128, u8)> = table(&mut sa, 0, &mc_record(0, 0, 0), DEFAULT_KEY)
        .iter()
        .map(|r| (r.port_gid, r.join_state))
        .collect();
    got.sort_unstable();
    let mut want = vec![(a.gid, FULL), (b.gid, NON)];
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn trust_needs_the_configured_nonzero_key() {
    const KEY: u64 = 0x1234_5678_9abc_def0;
    let Setup { mut sa, hosts, .. } = setup(SaConfig {
        sm_key: KEY,
        ..Default::default()
    });
    let h = hosts[0];
    let mut t = [0u8; pkr::LEN];
    t[..2].copy_from_slice(&h.lid.to_be_bytes());
    let pkeys = |key: u64| request(method::GET_TABLE, attr::PKEY_TABLE_RECORD, pkr::component::LID, &t, key);
    assert_eq!(status_of(&ask(&mut sa, h.lid, &pkeys(0))), status::REQ_INVALID);
    // Every block of the port's table, as programmed.
    assert!(!records(&ask(&mut sa, h.lid, &pkeys(KEY)), pkr::PADDED_LEN).is_empty());
    // The old hard-wired key is no key here, and a wrong key gets no
    // answer at all (C15-0.1.5).
    assert!(sa.handle(h.lid, 1, &pkeys(1)).reply.is_none());
    assert!(sa.handle(h.lid, 1, &pkeys(KEY ^ 1)).reply.is_none());
    // SMInfoRecord: the key shows to the trusted only.
    let sm_key_shown = |sa: &mut Sa, key: u64| {
        let a = ask(sa, h.lid, &request(method::GET_TABLE, attr::SM_INFO_RECORD, 0, &[], key));
        let recs = records(&a, smir::PADDED_LEN);
        assert_eq!(recs.len(), 1);
        smir::Repr::parse(&smir::Packet::new_checked(&recs[0][..]).expect("record"))
            .expect("record")
            .sm_key
    };
    assert_eq!(sm_key_shown(&mut sa, 0), 0);
    assert_eq!(sm_key_shown(&mut sa, KEY), KEY);
}

#[test]
fn a_zero_sm_key_trusts_nobody() {
    // With SM_Key 0 configured nobody is trusted: a request carrying 0
    // is not, and any other key is wrong.
    let Setup { mut sa, hosts, .. } = setup(SaConfig {
        sm_key: 0,
        ..Default::default()
    });
    let h = hosts[0];
    let mut t = [0u8; pkr::LEN];
    t[..2].copy_from_slice(&h.lid.to_be_bytes());
    let pkeys = |key: u64| request(method::GET_TABLE, attr::PKEY_TABLE_RECORD, pkr::component::LID, &t, key);
    assert_eq!(status_of(&ask(&mut sa, h.lid, &pkeys(0))), status::REQ_INVALID);
    assert!(sa.handle(h.lid, 1, &pkeys(1)).reply.is_none());
    // Nor may a request carrying 0 change another port's membership.
    let (a, b) = (hosts[0], hosts[1]);
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, CREATE, &mc_record(BROADCAST, a.gid, FULL), 0),
        0
    );
    assert_eq!(
        mc(&mut sa, b.lid, method::SET, CREATE, &mc_record(BROADCAST - 1, b.gid, FULL), 0),
        0
    );
    let a1 = ask(
        &mut sa,
        b.lid,
        &request(method::GET_TABLE, attr::MC_MEMBER_RECORD, 0, &mc_record(0, 0, 0), 0),
    );
    let recs = records(&a1, mcr::PADDED_LEN);
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r[16..32] == [0u8; 16]), "no PortGID shown");
}

fn subscribe(sa: &mut Sa, from: u16, trap: u16, subscribe: u8, key: u64) -> u16 {
    let mut t = [0u8; ii::LEN];
    ii::Repr {
        lid_range_begin: ii::ALL_LIDS,
        is_generic: 1,
        subscribe,
        trap_type: ii::ANY_TYPE,
        trap_number: trap,
        producer_type: 0xFF_FFFF,
        ..Default::default()
    }
    .emit(&mut ii::Packet::new_unchecked(&mut t[..]));
    status_of(&ask(sa, from, &request(method::SET, attr::INFORM_INFO, 0, &t, key)))
}

#[test]
fn subscriptions_per_port_are_bounded() {
    /// [`SaConfig::default`]'s subscriptions per port.
    const PER_PORT: u16 = 32;
    let Setup { mut sa, hosts, .. } = setup(SaConfig::default());
    let (a, b) = (hosts[0], hosts[1]);
    for trap in 1..=PER_PORT {
        assert_eq!(subscribe(&mut sa, a.lid, trap, 1, 0), 0, "trap {trap}");
    }
    assert_eq!(
        subscribe(&mut sa, a.lid, PER_PORT + 1, 1, 0),
        status::NO_RESOURCES
    );
    // Subscribing again replaces; another port is not affected.
    assert_eq!(subscribe(&mut sa, a.lid, 1, 1, 0), 0);
    assert_eq!(subscribe(&mut sa, b.lid, PER_PORT + 1, 1, 0), 0);
    // Room again after an unsubscribe.
    assert_eq!(subscribe(&mut sa, a.lid, 1, 0, 0), 0);
    assert_eq!(subscribe(&mut sa, a.lid, PER_PORT + 1, 1, 0), 0);
    // The records: QPNs only to the trusted (C15-0.2-1.16).
    let a1 = ask(&mut sa, b.lid, &request(method::GET_TABLE, attr::INFORM_INFO_RECORD, 0, &[], 0));
    let recs = records(&a1, ii::RECORD_PADDED_LEN);
    assert_eq!(recs.len(), usize::from(PER_PORT) + 1);
    let qpn = |r: &[u8]| {
        ii::RecordRepr::parse(&ii::RecordPacket::new_checked(r).expect("record"))
            .expect("record")
            .inform_info
            .qpn
    };
    assert!(recs.iter().all(|r| qpn(r) == 0));
    let a1 = ask(
        &mut sa,
        b.lid,
        &request(method::GET_TABLE, attr::INFORM_INFO_RECORD, 0, &[], DEFAULT_KEY),
    );
    assert!(records(&a1, ii::RECORD_PADDED_LEN).iter().all(|r| qpn(r) == 1));
    // Security traps (256-259) are for trusted subscribers only.
    assert_eq!(subscribe(&mut sa, b.lid, 256, 1, 0), status::REQ_INVALID);
    assert_eq!(subscribe(&mut sa, b.lid, 256, 1, DEFAULT_KEY), 0);
}

#[test]
fn group_creates_per_port_are_bounded() {
    /// [`SaConfig::default`]'s groups one port may create.
    const PER_PORT: u128 = 64;
    let Setup {
        mut sa,
        groups,
        hosts,
        ..
    } = setup(SaConfig::default());
    let (a, b) = (hosts[0], hosts[1]);
    // Not IPoIB MGIDs: those need their partition's broadcast group.
    let mgid = |n: u128| 0xff12_0123_ffff_0000_0000_0000_0000_0000u128 | n;
    for n in 0..PER_PORT {
        assert_eq!(
            mc(&mut sa, a.lid, method::SET, CREATE, &mc_record(mgid(n), a.gid, FULL), 0),
            0,
            "group {n}"
        );
    }
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, CREATE, &mc_record(mgid(PER_PORT), a.gid, FULL), 0),
        status::NO_RESOURCES
    );
    // Creating by proxy counts against the requester, not the member.
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, CREATE, &mc_record(mgid(PER_PORT), b.gid, FULL), 0),
        status::NO_RESOURCES
    );
    assert_eq!(groups.lock().expect("groups").len(), PER_PORT as usize);
    // Joining existing groups and other ports' creates are unaffected.
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, JOIN, &mc_record(mgid(0), a.gid, NON), 0),
        0
    );
    assert_eq!(
        mc(&mut sa, b.lid, method::SET, CREATE, &mc_record(mgid(PER_PORT), b.gid, FULL), 0),
        0
    );
    // A group of A's that ends frees its place.
    assert_eq!(
        mc(&mut sa, a.lid, method::DELETE, JOIN, &mc_record(mgid(1), a.gid, FULL), 0),
        0
    );
    assert_eq!(
        mc(&mut sa, a.lid, method::SET, CREATE, &mc_record(mgid(PER_PORT + 1), a.gid, FULL), 0),
        0
    );
}

#[test]
fn get_table_answers_are_capped() {
    let (db, _) = db_and_hosts();
    let nodes = db.end_ports().len();
    let Setup { mut sa, hosts, .. } = setup(SaConfig {
        max_records: nodes - 1,
        ..Default::default()
    });
    let h = hosts[0];
    // One record too many: refused, not cut short.
    let a = ask(&mut sa, h.lid, &request(method::GET_TABLE, attr::NODE_RECORD, 0, &[], 0));
    assert_eq!(status_of(&a), status::NO_RESOURCES);
    let mut t = [0u8; nr::LEN];
    t[..2].copy_from_slice(&h.lid.to_be_bytes());
    let a = ask(
        &mut sa,
        h.lid,
        &request(method::GET_TABLE, attr::NODE_RECORD, nr::component::LID, &t, 0),
    );
    assert_eq!(records(&a, nr::PADDED_LEN).len(), 1);
    // Every path: refused; one pair's: answered.
    let a = ask(&mut sa, h.lid, &request(method::GET_TABLE, attr::PATH_RECORD, 0, &[], 0));
    assert_eq!(status_of(&a), status::NO_RESOURCES);
    let mut t = [0u8; pr::LEN];
    pr::Repr {
        slid: h.lid,
        dlid: hosts[1].lid,
        ..Default::default()
    }
    .emit(&mut pr::Packet::new_unchecked(&mut t[..]));
    let a = ask(
        &mut sa,
        h.lid,
        &request(
            method::GET_TABLE,
            attr::PATH_RECORD,
            pr::component::SLID | pr::component::DLID,
            &t,
            0,
        ),
    );
    assert_eq!(records(&a, 64).len(), 1);
    // An answer of exactly the cap is sent whole.
    let Setup { mut sa, .. } = setup(SaConfig {
        max_records: nodes,
        ..Default::default()
    });
    let a = ask(&mut sa, h.lid, &request(method::GET_TABLE, attr::NODE_RECORD, 0, &[], 0));
    assert_eq!(records(&a, nr::PADDED_LEN).len(), nodes);
}

/// Counts the answers the SA thread sends.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<usize>>);

impl Responder for Counter {
    fn reply(&self, _to: &IncomingMad, _mad: &[u8]) -> Result<(), String> {
        *self.0.lock().map_err(|e| e.to_string())? += 1;
        Ok(())
    }
    fn report(&self, _report: &Report) -> Result<(), String> {
        Ok(())
    }
}

#[test]
fn membership_signals_do_not_pile_up() {
    let Setup {
        hosts,
        mut db_for_spawn,
        ..
    } = setup(SaConfig::default());
    let (a, b) = (hosts[0], hosts[1]);
    let counter = Counter::default();
    let (tx, rx) = mpsc::channel();
    let groups = Arc::new(Mutex::new(McGroups::new()));
    let handle = sm_core::sa::spawn(counter.clone(), rx, Arc::clone(&groups), SaConfig::default());
    handle.publish(db_for_spawn.take().expect("db"));
    let send = |from: Host, m: u8, mask: u64, t: &[u8; mcr::LEN]| {
        tx.send(IncomingMad {
            slid: from.lid,
            sqpn: 1,
            mad: request(m, attr::MC_MEMBER_RECORD, mask, t, 0),
        })
        .expect("SA thread");
    };
    send(a, method::SET, CREATE, &mc_record(BROADCAST, a.gid, FULL));
    const N: usize = 200;
    for i in 0..N {
        let m = if i % 2 == 0 { method::SET } else { method::DELETE };
        send(b, m, JOIN, &mc_record(BROADCAST, b.gid, FULL));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while *counter.0.lock().expect("counter") < N + 1 {
        assert!(Instant::now() < deadline, "the SA thread answers");
        std::thread::sleep(Duration::from_millis(10));
    }
    // N + 1 changes, nobody read the channel: it holds one wake-up.
    let changes = handle.membership_changes().expect("the receiver");
    assert_eq!(changes.try_iter().count(), 1);
    assert_eq!(membership(&groups, BROADCAST, a.gid), Some((FULL, false)));
    handle.stop();
}

/// A plausible request for the SA's stateful paths, or random bytes.
fn op() -> impl Strategy<Value = (u8, u16, u64, Vec<u8>, u16, u64)> {
    (
        prop::sample::select(vec![
            method::GET,
            method::GET_TABLE,
            method::SET,
            method::DELETE,
            method::GET_MULTI,
        ]),
        prop::sample::select(vec![
            attr::MC_MEMBER_RECORD,
            attr::INFORM_INFO,
            attr::INFORM_INFO_RECORD,
            attr::PKEY_TABLE_RECORD,
            attr::SM_INFO_RECORD,
            attr::MULTI_PATH_RECORD,
            attr::MFT_RECORD,
            attr::GUID_INFO_RECORD,
            attr::PATH_RECORD,
            attr::NODE_RECORD,
        ]),
        prop_oneof![Just(JOIN), Just(CREATE), any::<u64>()],
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 200),
            (0u8..4, 0usize..4, 0u8..16).prop_map(|(g, h, js)| {
                let hosts = hosts();
                let mut v = mc_record(BROADCAST - u128::from(g), hosts[h].gid, js).to_vec();
                v.resize(200, 0);
                v
            }),
        ],
        0u16..16,
        prop_oneof![Just(0u64), Just(DEFAULT_KEY), any::<u64>()],
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Sequences of joins, leaves, subscriptions and queries, trusted or
    /// not, never panic; a request with a wrong key is never answered and
    /// every other one is.
    #[test]
    fn request_sequences_never_panic(ops in proptest::collection::vec(op(), 1..24)) {
        let Setup { mut sa, .. } = setup(SaConfig::default());
        for (m, attribute, mask, data, slid, key) in ops {
            let answer = raw(&mut sa, slid, &request(m, attribute, mask, &data, key));
            if key != 0 && key != DEFAULT_KEY {
                prop_assert!(answer.reply.is_none());
            } else {
                let reply = answer.reply.expect("answered");
                prop_assert_eq!(reply[3] & 0x80, 0x80);
                prop_assert_eq!(&reply[36..44], &[0u8; 8]);
            }
        }
    }

    /// Truncated and oversized MADs with any SM_Key never panic.
    #[test]
    fn short_and_long_mads_never_panic(
        m in prop::sample::select(vec![method::GET_TABLE, method::SET, method::DELETE]),
        attribute in prop::sample::select(vec![attr::MC_MEMBER_RECORD, attr::INFORM_INFO, attr::PATH_RECORD]),
        key in prop_oneof![Just(0u64), Just(DEFAULT_KEY)],
        len in 0usize..400,
    ) {
        let Setup { mut sa, .. } = setup(SaConfig::default());
        let mut mad = request(m, attribute, JOIN, &[0xFF; 200], key);
        mad.resize(len, 0xA5);
        let _ = raw(&mut sa, 1, &mad);
    }
}
