//! QoS on the embedded fabric (issue 12, item 5): with `qos` on, a routing
//! engine that gives no VL tables (minhop) has every port's SL2VL map and
//! VL arbitration tables written from the `qos_*` options, masked to the
//! port's OperationalVLs and cut to its VLArb capacities, as OpenSM's
//! osm_qos.c does; the fabric read back holds them, the SA's records are
//! them, and a second sweep writes nothing. With `qos` off nothing is
//! written. PathRecord SLs follow qos-policy.conf where the engine's SLs
//! do not matter (minhop) and the engine's where they do (torus-2QoS).
//!
//! Needs `cargo build --workspace` (the engines).

mod common;

use std::sync::{Arc, Mutex};

use common::{bin_dir, sm_location, workspace};
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::mcast::McGroups;
use sm_core::qos::{self, QosPolicy};
use sm_core::sa::{Sa, SaConfig, SaDb};
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::{attr, method};
use sm_mad::sa::{self, attr as sa_attr};
use sm_mad::smp::{self, DATA_LEN, PERMISSIVE_LID};
use sm_mad::{sa_path_record as pr, sa_sl2vl_record as slr, sa_vlarb_record as var, Mad, PortInfoRepr};
use sm_topology::Topology;

/// One heavy sweep of `sim` with `engines` and `config`.
fn sweep_once(sim: &mut SimFabric, engines: &str, config: &Config, held: &mut HeldTables) -> OnceOutcome {
    let registry = Registry::scan(&[bin_dir()]);
    let options = OnceOptions { sweep: SweepOptions::default(), engines, dump_dir: None };
    let mut g2l = Guid2Lid::default();
    let out = sm_core::pipeline::once(&mut SimPort::new(sim), &options, &registry, config, &mut g2l, held).expect("sweep");
    assert!(out.accepted.is_some(), "{engines} routes: {:?}", out.describe());
    out
}

fn small() -> Topology {
    sm_topology::parse_str(common::SMALL_NET, "small").expect("topology")
}

/// A directed-route Get answered by the simulator: its data.
fn dr_get(sim: &mut SimFabric, attribute: u16, modifier: u32, path: &[u8]) -> [u8; DATA_LEN] {
    let request = smp::Repr::directed_get(7, attribute, modifier, 0, path).expect("request");
    let mut mad = Mad::zeroed();
    request.emit(&mut mad.smp_mut());
    let answer = sim.handle_to(PERMISSIVE_LID, &mad.0).expect("an answer");
    let repr = smp::Repr::parse(&smp::Packet::new_checked(&answer.mad[..]).expect("smp")).expect("parse");
    assert_eq!(repr.status, 0, "Get {attribute:#x} {modifier:#x} on {path:?}");
    repr.data
}

fn sl2vl_of(data: &[u8; DATA_LEN]) -> [u8; 16] {
    std::array::from_fn(|sl| (data[sl / 2] >> if sl % 2 == 0 { 4 } else { 0 }) & 0xF)
}

/// OpenSM's masking of a table VL for a port with `info`'s OperationalVLs.
fn masked(vl: u8, info: &PortInfoRepr) -> u8 {
    let mask = (1u8 << (info.operational_vls.clamp(1, 5) - 1)) - 1;
    if vl == 15 {
        15
    } else {
        vl & mask
    }
}

const SWE_SL2VL: &str = "0,1,2,3,4,5,6,7,7,6,5,4,3,2,1,15";
const CA_SL2VL: &str = "3,2,1,0,3,2,1,0,3,2,1,0,3,2,1,0";

fn qos_config() -> Config {
    Config {
        qos: true,
        qos_swe_sl2vl: Some(SWE_SL2VL.into()),
        qos_sl2vl: Some(CA_SL2VL.into()),
        qos_vlarb_low: Some("0:8,1:16,2:32,3:64".into()),
        qos_ca_vlarb_high: Some("1:2,0:1".into()),
        qos_high_limit: Some(3),
        qos_swe_high_limit: Some(7),
        ..Config::default()
    }
}

/// An SA holding `out`.
fn sa_of(out: &mut OnceOutcome, policy: Option<&Arc<QosPolicy>>) -> Sa {
    let sa = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig::default());
    sa.publish(SaDb::build_shared(out).with_qos_policy(policy.cloned()));
    sa
}

/// An SA query from LID 1; the answer.
fn sa_query(sa: &Sa, m: u8, attribute: u16, mask: u64, data: &[u8]) -> Vec<u8> {
    let mut mad = vec![0u8; 256];
    sa::Repr { method: m, transaction_id: 0x51, attribute_id: attribute, component_mask: mask, ..Default::default() }
        .emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
    mad[sa::HEADER_LEN..sa::HEADER_LEN + data.len()].copy_from_slice(data);
    sa.handle(1, 1, &mad).reply.expect("an answer")
}

fn status_of(answer: &[u8]) -> u16 {
    u16::from_be_bytes([answer[4], answer[5]])
}

/// The records of a GetTable answer (RMPP: attribute offset in 8-byte words).
fn records(answer: &[u8]) -> Vec<&[u8]> {
    assert_eq!(status_of(answer), 0);
    let p = sa::Packet::new_checked(answer).expect("header");
    let len = usize::from(p.attribute_offset()) * 8;
    answer[sa::HEADER_LEN..].chunks(len).filter(|c| c.len() == len).collect()
}

#[test]
fn minhop_with_qos_gets_the_qos_tables_on_every_port() {
    let topo = small();
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let mut held = HeldTables::default();
    let config = qos_config();
    let mut out = sweep_once(&mut sim, "minhop", &config, &mut held);
    assert_eq!((out.program.sl2vl.failed, out.program.vlarb.failed), (0, 0), "{:?}", out.program);
    let (swe, ca) = (qos::parse_sl2vl(SWE_SL2VL).unwrap(), qos::parse_sl2vl(CA_SL2VL).unwrap());
    let low = qos::parse_vlarb("0:8,1:16,2:32,3:64").unwrap();
    let ca_high = qos::parse_vlarb("1:2,0:1").unwrap();
    let sa = sa_of(&mut out, None);
    let fabric = &out.sweep.fabric;
    let (mut switch_maps, mut ca_maps, mut arbs) = (0, 0, 0);
    for node in &fabric.nodes {
        if node.is_switch() {
            for out_port in 1..=node.num_ports {
                let info = node.ports[usize::from(out_port)].info.expect("port info");
                for in_port in 0..=node.num_ports {
                    let got = sl2vl_of(&dr_get(&mut sim, attr::SL_TO_VL_MAPPING_TABLE, u32::from(in_port) << 8 | u32::from(out_port), &node.path));
                    assert_eq!(got, swe.map(|vl| masked(vl, &info)), "switch {:#x} in {in_port} out {out_port}", node.guid);
                    switch_maps += 1;
                }
                let pi = dr_get(&mut sim, attr::PORT_INFO, u32::from(out_port), &node.path);
                assert_eq!(pi[38], 7, "switch port {out_port}: VLHighLimit of qos_swe_high_limit");
                let block = dr_get(&mut sim, attr::VL_ARBITRATION_TABLE, 1 << 16 | u32::from(out_port), &node.path);
                for (i, &(vl, weight)) in low.iter().enumerate().take(usize::from(info.vl_arbitration_low_cap)) {
                    assert_eq!((block[2 * i] & 0xF, block[2 * i + 1]), (masked(vl, &info), weight), "switch port {out_port} entry {i}");
                }
                arbs += 1;
            }
        } else {
            for (p, port) in node.ports.iter().enumerate().skip(1) {
                let (Some(info), Some(path)) = (&port.info, &port.path) else { continue };
                let got = sl2vl_of(&dr_get(&mut sim, attr::SL_TO_VL_MAPPING_TABLE, 0, path));
                assert_eq!(got, ca.map(|vl| masked(vl, info)), "CA {:#x} port {p}", node.guid);
                ca_maps += 1;
                let pi = dr_get(&mut sim, attr::PORT_INFO, p as u32, path);
                assert_eq!(pi[38], 3, "CA port {p}: VLHighLimit of qos_high_limit");
                let high = dr_get(&mut sim, attr::VL_ARBITRATION_TABLE, 3 << 16, path);
                assert_eq!((high[0] & 0xF, high[1]), (masked(ca_high[0].0, info), 2));
                assert_eq!((high[2] & 0xF, high[3]), (0, 1));
                let lo = dr_get(&mut sim, attr::VL_ARBITRATION_TABLE, 1 << 16, path);
                assert_eq!((lo[6] & 0xF, lo[7]), (masked(3, info), 64), "the shared qos_vlarb_low");
                arbs += 1;
            }
        }
    }
    assert_eq!((switch_maps, ca_maps), (2 * 4 * 5, 4));
    assert!(arbs >= 12);

    // The SA's records are what the ports hold: one SL2VL record per map
    // written, and four VLArb blocks per port (a second block the port's
    // capacity lacks shows empty, as OpenSM's).
    let maps = records(&sa_query(&sa, method::GET_TABLE, sa_attr::SL2VL_RECORD, 0, &[]))
        .iter()
        .map(|r| slr::Repr::parse(&slr::Packet::new_checked(r).expect("record")).expect("parse"))
        .collect::<Vec<_>>();
    let switch_records = maps.iter().filter(|r| r.out_port_num != 0).count();
    assert_eq!(switch_records, switch_maps, "one record per switch map");
    let sample = maps.iter().find(|r| r.in_port_num == 2 && r.out_port_num == 3).expect("a switch map record");
    let sw = fabric.nodes.iter().find(|n| n.is_switch() && n.ports[0].info.as_ref().is_some_and(|i| i.lid == sample.lid)).expect("switch");
    assert_eq!(sample.vl, sl2vl_of(&dr_get(&mut sim, attr::SL_TO_VL_MAPPING_TABLE, 0x0203, &sw.path)));
    let blocks = records(&sa_query(&sa, method::GET_TABLE, sa_attr::VLARB_RECORD, 0, &[]))
        .iter()
        .map(|r| var::Repr::parse(&var::Packet::new_checked(r).expect("record")).expect("parse"))
        .collect::<Vec<_>>();
    for ca_port in fabric.nodes.iter().filter(|n| !n.is_switch()).filter_map(|n| n.ports[1].info.as_ref()) {
        let of_port: Vec<_> = blocks.iter().filter(|b| b.lid == ca_port.lid).collect();
        assert_eq!(of_port.len(), 4, "blocks 1-4 of LID {}", ca_port.lid);
        let b3 = of_port.iter().find(|b| b.block_num == 3).expect("high block");
        assert_eq!(b3.entries[1], (0, 1));
    }

    // All held: a second sweep writes no table.
    let again = sweep_once(&mut sim, "minhop", &config, &mut held);
    assert_eq!((again.program.sl2vl.set, again.program.vlarb.set), (0, 0), "{:?}", again.program);
    assert!(again.program.sl2vl.unchanged >= switch_maps);
}

#[test]
fn qos_off_writes_no_table_as_opensm() {
    let topo = small();
    let (sm_node, sm_port) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let out = sweep_once(&mut sim, "minhop", &Config::default(), &mut HeldTables::default());
    let p = &out.program;
    assert_eq!((p.sl2vl.set, p.sl2vl.unchanged, p.vlarb.set, p.vlarb.unchanged), (0, 0, 0, 0), "{p:?}");
}

/// PathRecord Get for `slid` → `dlid`, with a ServiceID when given; its SL.
fn path_sl(sa: &Sa, slid: u16, dlid: u16, service_id: Option<u64>) -> u8 {
    let mut mask = pr::component::SLID | pr::component::DLID;
    let q = pr::Repr { slid, dlid, service_id: service_id.unwrap_or(0), ..Default::default() };
    if service_id.is_some() {
        mask |= pr::component::SERVICE_ID;
    }
    let mut t = [0u8; pr::LEN];
    q.emit(&mut pr::Packet::new_unchecked(&mut t[..]));
    let a = sa_query(sa, method::GET, sa_attr::PATH_RECORD, mask, &t);
    assert_eq!(status_of(&a), 0, "path {slid} -> {dlid}");
    pr::Repr::parse(&pr::Packet::new_checked(&a[sa::HEADER_LEN..]).expect("record")).expect("parse").sl
}

/// LIDs of the CA ports of `out`.
fn ca_lids(out: &OnceOutcome) -> Vec<u16> {
    let f = &out.sweep.fabric;
    f.nodes.iter().filter(|n| !n.is_switch()).flat_map(|n| n.ports.iter().skip(1)).filter_map(|p| p.info.as_ref()).map(|i| i.lid).filter(|&l| l != 0).collect()
}

#[test]
fn path_sl_follows_the_policy_unless_the_engine_sls_bind() {
    let policy = QosPolicy::parse("qos-ulps\n default : 1\n any, service-id 0x10 : 5\nend-qos-ulps\n", std::path::Path::new("qos-policy.conf")).unwrap();
    let policy = Some(Arc::new(policy));

    // minhop: every path on SL 0 of its own; the policy decides.
    let topo = small();
    let (n, p) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, n, p).expect("sim");
    let mut out = sweep_once(&mut sim, "minhop", &qos_config(), &mut HeldTables::default());
    let sa = sa_of(&mut out, policy.as_ref());
    let lids = ca_lids(&out);
    for &s in &lids {
        for &d in &lids {
            assert_eq!(path_sl(&sa, s, d, Some(0x10)), 5, "{s} -> {d}, service 0x10");
            assert_eq!(path_sl(&sa, s, d, None), 1, "{s} -> {d}, default");
        }
    }

    // lash brings its own SL2VL maps: its SLs bind, uniform or not.
    let topo = sm_topology::parse_file(workspace().join("config/topologies/torus-4x4x4.net")).expect("topology");
    let (n, p) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, n, p).expect("sim");
    let mut out = sweep_once(&mut sim, "lash", &qos_config(), &mut HeldTables::default());
    let sa = sa_of(&mut out, policy.as_ref());
    let routing = &out.accepted.as_ref().expect("routed").routing;
    assert!(!routing.sl2vl.is_empty(), "lash gives SL2VL maps");
    let lids = ca_lids(&out);
    for &s in lids.iter().take(4) {
        for &d in &lids {
            assert_eq!(path_sl(&sa, s, d, Some(0x10)), routing.path_sl.path_sl(s, d), "lash {s} -> {d}");
        }
    }

    // torus-2QoS: its SLs keep the torus deadlock free; they win.
    let mut config = qos_config();
    config.set_option("torus_config", workspace().join("config/torus-2QoS.conf").display().to_string());
    let topo = sm_topology::parse_file(workspace().join("config/topologies/torus-4x4x4.net")).expect("topology");
    let (n, p) = sm_location(&topo);
    let mut sim = SimFabric::from_topology(&topo, n, p).expect("sim");
    let mut out = sweep_once(&mut sim, "torus-2QoS,no_fallback", &config, &mut HeldTables::default());
    let sa = sa_of(&mut out, policy.as_ref());
    let routing = &out.accepted.as_ref().expect("routed").routing;
    let lids = ca_lids(&out);
    let mut differ = 0;
    for &s in lids.iter().take(8) {
        for &d in &lids {
            let engine = routing.path_sl.path_sl(s, d);
            assert_eq!(path_sl(&sa, s, d, Some(0x10)), engine, "{s} -> {d}");
            if engine != 5 {
                differ += 1;
            }
        }
    }
    assert!(differ > 0, "some path where the policy's SL 5 is not the engine's");

    // The file is read again at each heavy sweep; a broken one leaves the
    // last good policy in force.
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = common::write(tmp.path(), "qos-policy.conf", "qos-ulps\n default : 2\nend-qos-ulps\n");
    let config = Config { qos: true, qos_policy_file: Some(file.clone()), ..Config::default() };
    let policy = config.reload_qos_policy(None);
    let sl_of = |p: &Option<Arc<QosPolicy>>| p.as_ref().and_then(|p| p.sl_for(&qos::PathQuery::default()));
    assert_eq!(sl_of(&policy), Some(2));
    std::fs::write(&file, "qos-ulps\n default : 3\n any, pkey 0x10 : 99\nend-qos-ulps\n").expect("write");
    let policy = config.reload_qos_policy(policy);
    assert_eq!(sl_of(&policy), Some(2), "the last good policy is kept");
    assert!(Config { qos: false, ..config }.reload_qos_policy(policy).is_none(), "qos off: no policy");
}

#[test]
fn a_broken_policy_file_stops_smcore_at_startup_naming_the_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let policy = common::write(tmp.path(), "qos-policy.conf", "qos-ulps\n default : 0\n nfs : 1\nend-qos-ulps\n");
    let conf = common::write(tmp.path(), "opensm.conf", &format!("qos TRUE\nqos_policy_file {}\n", policy.display()));
    let net = workspace().join("config/topologies/fat-tree-64.net");
    let (code, _, err) = common::smcore(&["--config", conf.to_str().expect("utf-8"), "--fabric", net.to_str().expect("utf-8"), "--once"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains(&format!("{}:3: unknown ULP rule `nfs`", policy.display())), "{err}");
}
