//! The embedded fabric carries general MADs: a simulated host asks the
//! SM's SA through the LFTs the SM programmed and gets its answer back the
//! same way; the performance manager reads every port's PMA, whose
//! counters move with the traffic and show injected errors.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bin_dir, sm_location, workspace};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_core::sa::client::{self, QueryError};
use sm_core::sa::{SaConfig, SaDb};
use sm_core::sim::{SharedFabric, SimFabric};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_mad::perf::COUNTER_NAMES;

const TIMEOUT: Duration = Duration::from_millis(500);

/// fat-tree-64.net on the embedded fabric, swept and routed by `engines`.
fn routed(engines: &str) -> (SharedFabric, OnceOutcome) {
    let topo = sm_topology::parse_file(&workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    let fabric = SharedFabric::new(SimFabric::from_topology(&topo, node, port).expect("sim"));
    let registry = sm_core::engines::Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines, dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let config = sm_core::config::Config::default();
    let out = sm_core::pipeline::once(&mut fabric.smp_port(), &options, &registry, &config, &mut g2l, &mut held)
        .expect("sweep");
    assert!(out.accepted.is_some(), "{:?}", out.describe());
    (fabric, out)
}

/// Every CA of the topology on its first port, the SM's first.
fn hosts(fabric: &SharedFabric) -> Vec<(usize, u8)> {
    let f = fabric.lock();
    let sm = f.sm_location();
    let mut hosts = vec![sm];
    for (i, n) in f.topology().nodes.iter().enumerate() {
        if n.kind == sm_abi::NodeKind::Ca && i != sm.0 {
            hosts.push((i, 1));
        }
    }
    hosts
}

fn lid(fabric: &SharedFabric, at: (usize, u8)) -> u16 {
    fabric.lock().port_lid(at.0, at.1).expect("a port")
}

#[test]
fn a_host_asks_the_sa_through_the_fabric_and_the_answer_follows_the_lfts() {
    let (fabric, out) = routed("ftree");
    let groups = Arc::new(Mutex::new(sm_core::mcast::McGroups::new()));
    let sa = sm_core::sa::spawn(fabric.sender(), fabric.sa_requests(64), groups, SaConfig::default());
    sa.publish(SaDb::build_shared(&out));

    let hosts = hosts(&fabric);
    let (from, to) = (hosts[5], hosts[40]);
    let (slid, dlid) = (lid(&fabric, from), lid(&fabric, to));
    // The SM LID the host was given is where it finds the SA.
    let sa_lid = fabric.lock().held_port_info(from.0, from.1).expect("port").master_sm_lid;
    assert_eq!(sa_lid, lid(&fabric, hosts[0]));
    let before = fabric.lock().port_counters(from.0, from.1).expect("counters");

    let mut agent = fabric.agent(from);
    let answer = client::path_record(&mut agent, sa_lid, slid, dlid, 7, Duration::from_secs(2)).expect("an answer");
    assert_eq!(answer.status, 0);
    let record = answer.record.expect("a record");
    assert_eq!((record.slid, record.dlid), (slid, dlid));
    assert_eq!(record.pkey, 0xFFFF);

    // The query left by the host's port and the answer came in by it.
    let after = fabric.lock().port_counters(from.0, from.1).expect("counters");
    let pkts = |c: &sm_core::sim::PmaCounters, name: &str| {
        c.counters[COUNTER_NAMES.iter().position(|(n, _)| *n == name).expect("a counter")]
    };
    assert_eq!(pkts(&after, "PortXmitPkts") - pkts(&before, "PortXmitPkts"), 1);
    assert_eq!(pkts(&after, "PortRcvPkts") - pkts(&before, "PortRcvPkts"), 1);
    assert!(sa.requests_handled().load(std::sync::atomic::Ordering::Relaxed) >= 1);

    // A host whose only cable is pulled gets no answer: nothing reaches
    // the SA, nothing comes back.
    let cut = hosts[9];
    let (cut_slid, cut_sa) = (lid(&fabric, cut), sa_lid);
    fabric.lock().link_down(cut.0, cut.1).expect("link down");
    let mut lonely = fabric.agent(cut);
    assert_eq!(
        client::path_record(&mut lonely, cut_sa, cut_slid, dlid, 8, TIMEOUT),
        Err(QueryError::NoAnswer(cut_sa))
    );
}

#[test]
fn an_sa_query_before_the_sm_programmed_the_fabric_is_lost() {
    let topo = sm_topology::parse_file(&workspace().join("config/topologies/fat-tree-64.net")).expect("topology");
    let (node, port) = sm_location(&topo);
    let fabric = SharedFabric::new(SimFabric::from_topology(&topo, node, port).expect("sim"));
    // No LIDs yet: the host cannot even address the SA.
    let host = hosts(&fabric)[3];
    let mut agent = fabric.agent(host);
    assert!(matches!(client::path_record(&mut agent, 1, 0, 2, 1, TIMEOUT), Err(QueryError::NoAnswer(1))));
    assert_eq!(fabric.lock().counters().gmps.dropped, 1);
}

#[test]
fn the_performance_manager_reads_pma_counters_that_move_and_show_injected_errors() {
    let (fabric, out) = routed("minhop");
    let targets = sm_core::perfmgr::targets_from_fabric(&out.sweep.fabric, false);
    assert!(targets.len() > 64, "every switch and host port: {}", targets.len());
    let sm = fabric.lock().sm_location();
    let mut agent = fabric.agent(sm);
    let (mut tid, mut stats) = (1u64, sm_core::perfmgr::query::QueryStats::default());
    let read = |agent: &mut sm_core::sim::SimGmpAgent, tid: &mut u64, stats: &mut _| {
        sm_core::perfmgr::query::read_all(agent, &targets, 16, TIMEOUT, tid, stats)
    };
    let first = read(&mut agent, &mut tid, &mut stats);
    assert!(first.iter().all(Option::is_some), "every PMA answers");

    let hosts = hosts(&fabric);
    let (a, b) = (hosts[2], hosts[60]);
    let b_lid = lid(&fabric, b);
    fabric.lock().send_data(a, b_lid, 1000, 2048).expect("a route");
    let name = |n: &str| COUNTER_NAMES.iter().position(|(c, _)| *c == n).expect("a counter");
    let (leaf, leaf_port) = fabric.lock().topology().peer(b.0, b.1).expect("b's leaf");
    fabric.lock().add_port_errors(leaf, leaf_port, "SymbolErrorCounter", 7).expect("inject");

    let second = read(&mut agent, &mut tid, &mut stats);
    let find = |lid: u16, port: u8| targets.iter().position(|t| t.lid == lid && t.port == port).expect("a target");
    let at_a = find(lid(&fabric, a), a.1);
    let sample = |s: &[Option<sm_core::perfmgr::counters::Sample>], i: usize| s[i].expect("answered").values;
    let sent = sample(&second, at_a)[name("PortXmitPkts")] - sample(&first, at_a)[name("PortXmitPkts")];
    assert!(sent >= 1000, "host a sent its 1000 packets: {sent}");
    let leaf_lid = fabric.lock().port_lid(leaf, 0).expect("leaf LID");
    let at_leaf = find(leaf_lid, leaf_port);
    assert_eq!(sample(&second, at_leaf)[name("SymbolErrorCounter")], 7);
    assert!(sample(&second, at_leaf)[name("PortXmitPkts")] >= 1000, "the leaf passed them on to b");

    // A clear (PortCounters Set) resets them.
    let leaf_target = &targets[at_leaf];
    assert_eq!(sm_core::perfmgr::query::clear(&mut agent, &[leaf_target], 4, TIMEOUT, &mut tid, &mut stats), 1);
    let third = read(&mut agent, &mut tid, &mut stats);
    assert_eq!(sample(&third, at_leaf)[name("SymbolErrorCounter")], 0);
}

/// A host's agent asks the SA at its SM LID: the answer's status and data.
fn ask(fabric: &SharedFabric, at: (usize, u8), method: u8, attribute: u16, mask: u64, data: &[u8], tid: u64) -> (u16, Vec<u8>) {
    use sm_transport::gmp::GmpAgent;
    let sa_lid = fabric.lock().held_port_info(at.0, at.1).expect("port").master_sm_lid;
    let mad = client::request(method, attribute, tid, mask, data);
    let answer = fabric.agent(at).request(sa_lid, &mad, Duration::from_secs(2)).expect("send").expect("an answer");
    let p = sm_mad::sa::Packet::new_checked(&answer[..]).expect("an SA MAD");
    (p.status(), p.data().to_vec())
}

#[test]
fn a_multicast_join_and_an_inform_info_report_travel_the_fabric() {
    use sm_mad::mad::{attr as mad_attr, method};
    use sm_mad::sa::attr;
    use sm_mad::{sa_inform_info as ii, sa_mc_member_record as mcr};
    use sm_transport::gmp::GmpAgent;

    let (fabric, out) = routed("ftree");
    let groups = Arc::new(Mutex::new(sm_core::mcast::McGroups::new()));
    let sa = sm_core::sa::spawn(fabric.sender(), fabric.sa_requests(64), Arc::clone(&groups), SaConfig::default());
    sa.publish(SaDb::build_shared(&out));
    let hosts = hosts(&fabric);

    // host 7 joins (creates) a group.
    let joiner = hosts[7];
    let guid = fabric.lock().topology().nodes[joiner.0].port_guid(joiner.1);
    let mgid = 0xff12_0000_0000_0000_0000_0000_0000_1234u128;
    let mut t = [0u8; mcr::LEN];
    mcr::Repr { mgid, port_gid: (0xfe80u128 << 112) | u128::from(guid), qkey: 0xB1B, pkey: 0xFFFF, scope: 2, join_state: 1, ..Default::default() }
        .emit(&mut mcr::Packet::new_unchecked(&mut t[..]));
    use mcr::component::{FLOW_LABEL, JOIN_STATE, MGID, PKEY, PORT_GID, QKEY, SL, TCLASS};
    let mask = MGID | PORT_GID | QKEY | TCLASS | PKEY | SL | FLOW_LABEL | JOIN_STATE;
    let (status, data) = ask(&fabric, joiner, method::SET, attr::MC_MEMBER_RECORD, mask, &t, 11);
    assert_eq!(status, 0);
    let joined = mcr::Repr::parse(&mcr::Packet::new_checked(&data[..]).expect("a record")).expect("parse");
    assert_eq!(joined.mgid, mgid);
    assert!(joined.mlid >= 0xC000, "a multicast LID: {:#x}", joined.mlid);
    assert!(groups.lock().expect("groups").generation() > 0, "the SM's groups hold the join");

    // host 20 subscribes to trap 65 (GID out of service)...
    let listener = hosts[20];
    let mut t = [0u8; ii::LEN];
    ii::Repr { lid_range_begin: 0xFFFF, is_generic: 1, subscribe: 1, trap_type: 0xFFFF, trap_number: 65, qpn: 1, producer_type: 0xFF_FFFF, ..Default::default() }
        .emit(&mut ii::Packet::new_unchecked(&mut t[..]));
    let (status, _) = ask(&fabric, listener, method::SET, attr::INFORM_INFO, 0, &t, 12);
    assert_eq!(status, 0);
    // ...then host 30 leaves the fabric; the next sweep's SA database
    // takes its GID out of service and the Report crosses the fabric.
    let gone = hosts[30];
    fabric.lock().remove_node(gone.0).expect("remove");
    let registry = sm_core::engines::Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines: "ftree", dump_dir: None };
    let (mut g2l, mut held) = (Guid2Lid::default(), HeldTables::default());
    let again = sm_core::pipeline::once(&mut fabric.smp_port(), &options, &registry, &sm_core::config::Config::default(), &mut g2l, &mut held)
        .expect("sweep");
    sa.publish(SaDb::build_shared(&again));
    let gone_guid = fabric.lock().topology().nodes[gone.0].port_guid(gone.1);
    let mut agent = fabric.agent(listener);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut reported = false;
    while let Some((_, m)) = agent.receive(deadline).expect("receive") {
        let p = sm_mad::sa::Packet::new_checked(&m[..]).expect("an SA MAD");
        if p.method() == method::REPORT && p.attribute_id() == mad_attr::NOTICE {
            let n = sm_mad::notice::Packet::new_checked(p.data()).expect("a notice");
            let gid = n.data_details().get(6..22).and_then(|g| g.try_into().ok()).map_or(0, u128::from_be_bytes);
            assert_eq!(n.trap_number_or_device_id(), 65);
            reported |= gid as u64 == gone_guid;
        }
    }
    assert!(reported, "the Report of host 30's GID reached host 20");
}
