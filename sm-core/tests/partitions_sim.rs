//! Partitions on the embedded fabric: a partitions.conf splits the hosts
//! in two; the P_Key tables read back from the simulated ports by SMP are
//! the ones the file gives, a second sweep writes nothing, and the SA
//! answers PathRecords and MCMember joins by partition membership.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use common::{bin_dir, sm_location};
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::mcast::McGroups;
use sm_core::sa::{Sa, SaConfig, SaDb};
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::{Guid2Lid, HeldTables, SmpClient, SmpOp, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::{attr as smp_attr, method};
use sm_mad::pkey_table;
use sm_mad::sa::{self, attr, status};
use sm_mad::{sa_mc_member_record as mcr, sa_path_record as pr, sa_pkey_table_record as pkr};

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

/// Port GUID and LID of the host named `name`, and its node index.
fn host(out: &OnceOutcome, name: &str) -> (u64, u16, usize) {
    let f = &out.sweep.fabric;
    let i = f.nodes.iter().position(|n| n.description == name).unwrap_or_else(|| panic!("no node {name}"));
    let p = &f.nodes[i].ports[1];
    (p.guid, p.info.expect("info").lid, i)
}

/// The first P_Key block of host `name`'s port, read by SMP from the sim.
fn read_block(run: &mut Run, out: &OnceOutcome, name: &str) -> [u16; pkey_table::PKEYS] {
    let (_, _, i) = host(out, name);
    let path = out.sweep.fabric.nodes[i].ports[1].path.clone().expect("path");
    let mut port = SimPort::new(&mut run.sim);
    let mut client = SmpClient::new(&mut port, 1);
    let answer = client.run_many(&[SmpOp::get(smp_attr::P_KEY_TABLE, 0, &path)]).remove(0).expect("P_KeyTable Get");
    let packet = pkey_table::Packet::new_checked(&answer[..pkey_table::LEN]).expect("block");
    pkey_table::Repr::parse(&packet).expect("block").pkeys
}

fn block(entries: &[u16]) -> [u16; pkey_table::PKEYS] {
    let mut b = [0; pkey_table::PKEYS];
    b[..entries.len()].copy_from_slice(entries);
    b
}

fn request(m: u8, attribute: u16, mask: u64, data: &[u8], sm_key: u64) -> Vec<u8> {
    let mut mad = vec![0u8; 256];
    sa::Repr { method: m, transaction_id: 0x77, attribute_id: attribute, component_mask: mask, ..Default::default() }
        .emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
    mad[36..44].copy_from_slice(&sm_key.to_be_bytes());
    mad[sa::HEADER_LEN..sa::HEADER_LEN + data.len()].copy_from_slice(data);
    mad
}

fn status_of(answer: &[u8]) -> u16 {
    u16::from_be_bytes([answer[4], answer[5]])
}

/// PathRecords (GetTable) from `slid` for SGID/DGID of two ports, with a
/// P_Key when given.
fn paths(sa: &mut Sa, prefix: u64, slid: u16, from: u64, to: u64, pkey: Option<u16>) -> Vec<pr::Repr> {
    paths_as(sa, prefix, slid, from, to, pkey, 0)
}

/// [`paths`] with an SM_Key (1: trusted, smcore's default key).
fn paths_as(sa: &mut Sa, prefix: u64, slid: u16, from: u64, to: u64, pkey: Option<u16>, sm_key: u64) -> Vec<pr::Repr> {
    use pr::component as c;
    let gid = |g: u64| (u128::from(prefix) << 64) | u128::from(g);
    let q = pr::Repr { sgid: gid(from), dgid: gid(to), pkey: pkey.unwrap_or(0), ..Default::default() };
    let mut t = [0u8; pr::LEN];
    q.emit(&mut pr::Packet::new_unchecked(&mut t[..]));
    let mask = c::SGID | c::DGID | if pkey.is_some() { c::PKEY } else { 0 };
    let a = sa.handle(slid, 1, &request(method::GET_TABLE, attr::PATH_RECORD, mask, &t, sm_key)).reply.expect("answer");
    if status_of(&a) == status::NO_RECORDS {
        return Vec::new();
    }
    assert_eq!(status_of(&a), 0);
    let p = sa::Packet::new_checked(&a[..]).expect("header");
    let n = (p.payload_length() as usize - 20) / 64;
    (0..n)
        .map(|k| pr::Repr::parse(&pr::Packet::new_checked(&a[56 + 64 * k..56 + 64 * (k + 1)]).unwrap()).unwrap())
        .collect()
}

fn setup() -> (Run, u64, u64, u64, u64) {
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let (node, port) = sm_location(&topo);
    let sim = SimFabric::from_topology(&topo, node, port).expect("sim");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut run = Run { sim, held: HeldTables::default(), g2l: Guid2Lid::default(), config: Config::default(), _dir: dir };
    // A first sweep without a file learns the GUIDs (and programs the
    // default partition, full for everyone).
    let out = once(&mut run);
    assert_eq!(read_block(&mut run, &out, "h2"), block(&[0xFFFF]));
    let [h1, h2, h3, h4] = ["h1", "h2", "h3", "h4"].map(|h| host(&out, h).0);
    let file: PathBuf = run._dir.path().join("partitions.conf");
    std::fs::write(
        &file,
        format!(
            "# two halves; everybody limited in the default but the SM\n\
             left = 0x0001, ipoib : {h1:#x}=full, {h2:#x}=full ;\n\
             right = 0x0002 , mtu=4 :\n    {h3:#x}=full,\n    {h4:#x} ;\n"
        ),
    )
    .expect("write partitions.conf");
    run.config.partition_config_file = Some(file);
    (run, h1, h2, h3, h4)
}

#[test]
fn halves_are_programmed_and_the_sa_keeps_them_apart() {
    let (mut run, h1, h2, h3, h4) = setup();
    let out = once(&mut run);
    assert_eq!(out.sweep.fabric.nodes[0].description, "h1", "the SM is on h1");
    // Tables as read back from the ports.
    assert_eq!(read_block(&mut run, &out, "h1"), block(&[0xFFFF, 0x8001]), "SELF is a full default member");
    assert_eq!(read_block(&mut run, &out, "h2"), block(&[0x7FFF, 0x8001]));
    assert_eq!(read_block(&mut run, &out, "h3"), block(&[0x7FFF, 0x8002]));
    assert_eq!(read_block(&mut run, &out, "h4"), block(&[0x7FFF, 0x0002]));
    assert!(out.program.pkey.set >= 4, "{:?}", out.program.pkey);
    assert_eq!(out.program.pkey.failed, 0);

    // A second sweep finds every table as written: no P_Key SMP at all.
    let again = once(&mut run);
    assert_eq!((again.program.pkey.set, again.program.pkey.read, again.program.pkey.failed), (0, 0, 0));
    assert_eq!(again.program.pkey.smps.sets(smp_attr::P_KEY_TABLE), 0);

    let prefix = out.sweep.fabric.nodes[0].ports[1].info.expect("info").gid_prefix;
    let prefix = if prefix == 0 { 0xfe80_0000_0000_0000 } else { prefix };
    let groups = Arc::new(Mutex::new(McGroups::new()));
    let mut sa = Sa::new(Arc::clone(&groups), SaConfig::default());
    let out = again;
    sa.publish(SaDb::build_shared(&out));
    let lid = |g: u64| {
        out.sweep.fabric.nodes.iter().flat_map(|n| n.ports.iter()).find(|p| p.guid == g).and_then(|p| p.info).expect("port").lid
    };
    let (l1, l2, l3, l4) = (lid(h1), lid(h2), lid(h3), lid(h4));

    // Between the halves: nothing (h2 and h3 share only the default, both
    // as limited members).
    assert!(paths(&mut sa, prefix, l2, h2, h3, None).is_empty());
    assert!(paths(&mut sa, prefix, l3, h3, h2, None).is_empty());
    assert!(paths(&mut sa, prefix, l2, h2, h3, Some(0x7FFF)).is_empty());
    assert!(paths(&mut sa, prefix, l2, h2, h3, Some(0x8002)).is_empty(), "h2 is not in right");
    // Limited-limited: h2 and h4 share the default only as limited members.
    assert!(paths(&mut sa, prefix, l4, h4, h2, None).is_empty());
    // Within a half: one record, on the shared P_Key.
    let p = paths(&mut sa, prefix, l3, h3, h4, None);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].slid, p[0].dlid, p[0].pkey), (l3, l4, 0x8002));
    // A host sees no path between ports it shares no partition with
    // (OpenSM's rule): h2 (left) asking for right's path. The SM's port
    // (a full default member) and SM_Key holders see it.
    assert!(paths(&mut sa, prefix, l2, h3, h4, None).is_empty(), "h2 shares nothing with h3 and h4");
    assert_eq!(paths(&mut sa, prefix, l1, h3, h4, None).len(), 1, "the SM's port shares the default with both");
    assert_eq!(paths_as(&mut sa, prefix, l2, h3, h4, None, 1).len(), 1, "SM_Key holders see every path");
    let p = paths(&mut sa, prefix, l2, h2, h1, None);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].pkey & 0x7FFF, 0x7FFF, "the default comes first in h2's table; h1 is a full member");
    let p = paths(&mut sa, prefix, l2, h2, h1, Some(0x8001));
    assert_eq!(p.iter().map(|r| r.pkey).collect::<Vec<_>>(), vec![0x8001], "the query's P_Key is kept");
    // The SM's port reaches everybody through the default partition.
    assert_eq!(paths(&mut sa, prefix, l1, h1, h3, None).len(), 1);

    // P_KeyTableRecords (trusted) are the tables programmed.
    let mut t = [0u8; pkr::LEN];
    t[..2].copy_from_slice(&l4.to_be_bytes());
    let a = sa
        .handle(l1, 1, &request(method::GET_TABLE, attr::PKEY_TABLE_RECORD, pkr::component::LID, &t, 1))
        .reply
        .expect("answer");
    assert_eq!(status_of(&a), 0);
    let rec = pkr::Repr::parse(&pkr::Packet::new_checked(&a[56..]).expect("record")).expect("record");
    assert_eq!((rec.lid, rec.port_num, rec.block_num), (l4, 1, 0));
    assert_eq!(rec.pkeys, block(&[0x7FFF, 0x0002]));

    // MCMember: h3 (full member of right) creates a group on P_Key 0x8002;
    // h4 (limited) may join, h2 (not in right) may not, nor create one.
    use mcr::component as c;
    let gid = |g: u64| (u128::from(prefix) << 64) | u128::from(g);
    let mgid = 0xff12_0000_0000_0000_0000_0000_0000_0042u128;
    let mc = |port: u64, pkey: u16, mgid: u128| {
        let mut t = [0u8; mcr::LEN];
        mcr::Repr { mgid, port_gid: gid(port), qkey: 0x11, pkey, join_state: 1, ..Default::default() }
            .emit(&mut mcr::Packet::new_unchecked(&mut t[..]));
        t
    };
    let create = c::MGID | c::PORT_GID | c::JOIN_STATE | c::QKEY | c::PKEY | c::TCLASS | c::FLOW_LABEL | c::SL;
    let join = c::MGID | c::PORT_GID | c::JOIN_STATE;
    let set = |sa: &mut Sa, slid: u16, mask: u64, t: &[u8; mcr::LEN]| {
        let a = sa.handle(slid, 1, &request(method::SET, attr::MC_MEMBER_RECORD, mask, t, 0)).reply.expect("answer");
        status_of(&a)
    };
    assert_eq!(set(&mut sa, l3, create, &mc(h3, 0x8002, mgid)), 0, "a member creates");
    assert_eq!(set(&mut sa, l2, join, &mc(h2, 0, mgid)), status::REQ_INVALID, "a non-member may not join");
    assert_eq!(set(&mut sa, l4, join, &mc(h4, 0, mgid)), 0, "a limited member may join");
    assert_eq!(set(&mut sa, l2, create, &mc(h2, 0x8002, mgid + 1)), status::REQ_INVALID, "nor create");
}

#[test]
fn a_bad_file_keeps_the_last_good_set() {
    let (mut run, _, _, _, _) = setup();
    let out = once(&mut run);
    assert_eq!(read_block(&mut run, &out, "h3"), block(&[0x7FFF, 0x8002]));
    let file = run.config.partition_config_file.clone().expect("file");
    std::fs::write(&file, "Default=0x7fff : ALL=full ;\nthis line has no colon\n").expect("write");
    let out = once(&mut run);
    assert_eq!(read_block(&mut run, &out, "h3"), block(&[0x7FFF, 0x8002]), "the last good set stays");
    assert_eq!(out.program.pkey.set, 0);
    // Fixed: the new set is programmed.
    std::fs::write(&file, "Default=0x7fff : ALL=full ;\n").expect("write");
    let out = once(&mut run);
    assert_eq!(read_block(&mut run, &out, "h3"), block(&[0xFFFF]));
}

/// `smcore --fabric ... --once` with `config`; (exit code, stdout, stderr).
fn smcore_once(config: &std::path::Path) -> (i32, String, String) {
    let net = common::write(config.parent().expect("dir"), "small.net", common::SMALL_NET);
    common::smcore(&["--config", config.to_str().expect("utf-8"), "--fabric", net.to_str().expect("utf-8"), "--once"])
}

#[test]
fn a_given_file_missing_or_wrong_stops_the_sm_and_names_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.conf");
    let cfg = common::write(dir.path(), "smcore.toml", &format!("partition_config_file = {:?}\n", missing.display().to_string()));
    let (code, _, err) = smcore_once(&cfg);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nope.conf"), "{err}");

    let bad = common::write(dir.path(), "partitions.conf", "Default=0x7fff : ALL=full ;\n\nleft=0x1 : 0xnothex ;\n");
    let cfg = common::write(dir.path(), "smcore.toml", &format!("partition_config_file = {:?}\n", bad.display().to_string()));
    let (code, _, err) = smcore_once(&cfg);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("{}:3: bad PortGUID", bad.display())), "{err}");

    // The same file fixed, in opensm.conf's format with OpenSM's keys.
    std::fs::write(&bad, "Default=0x7fff : ALL=full ;\n\nleft=0x1 : ALL_CAS=full ;\n").expect("write");
    let cfg = common::write(
        dir.path(),
        "opensm.conf",
        &format!("partition_config_file {}\npart_enforce in\nallow_both_pkeys FALSE\n", bad.display()),
    );
    let (code, out, err) = smcore_once(&cfg);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("pkey"), "the P_Key phase is reported:\n{out}");
}

#[test]
fn opensm_keys_reach_the_partition_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = common::write(dir.path(), "opensm.conf", "part_enforce out\nno_partition_enforcement FALSE\nallow_both_pkeys TRUE\n");
    let config = Config::load(&cfg).expect("opensm.conf");
    let s = config.partition_settings();
    assert_eq!((s.enforce, s.allow_both, s.explicit), (sm_core::partition::PartEnforce::Out, true, false));
    assert_eq!(s.file, PathBuf::from("/etc/opensm/partitions.conf"));
    let cfg = common::write(dir.path(), "opensm.conf", "part_enforce out\nno_partition_enforcement TRUE\n");
    let s = Config::load(&cfg).expect("opensm.conf").partition_settings();
    assert_eq!(s.enforce, sm_core::partition::PartEnforce::Off, "no_partition_enforcement wins");
    let cfg = common::write(dir.path(), "opensm.conf", "part_enforce sideways\n");
    let e = Config::load(&cfg).expect_err("bad value").to_string();
    assert!(e.contains(":1:"), "{e}");
    let cfg = common::write(dir.path(), "smcore.toml", "part_enforce = \"in\"\nallow_both_pkeys = true\n");
    let s = Config::load(&cfg).expect("toml").partition_settings();
    assert_eq!((s.enforce, s.allow_both), (sm_core::partition::PartEnforce::In, true));
}

#[test]
fn a_power_cycled_host_is_programmed_again() {
    let (mut run, ..) = setup();
    let out = once(&mut run);
    assert_eq!(read_block(&mut run, &out, "h4"), block(&[0x7FFF, 0x0002]));
    let (_, _, i) = host(&out, "h4");
    // Sim node indices are the topology's, the fabric's are discovery's.
    let topo = sm_topology::parse_str(common::SMALL_NET, "small").expect("topology");
    let sim_index = topo.nodes.iter().position(|n| n.name == "h4").expect("h4");
    assert_eq!(out.sweep.fabric.nodes[i].description, "h4");
    run.sim.remove_node(sim_index).expect("remove");
    run.sim.restore_node(sim_index).expect("restore");
    let out = once(&mut run);
    assert_eq!(read_block(&mut run, &out, "h4"), block(&[0x7FFF, 0x0002]), "written again after the reset");
    // What the reset made unknown is written blind (a read would cost as
    // much): the host's blocks, and its switch's port 0 and the port
    // facing it (the switch had a port leave Active). Nothing else.
    let f = &out.sweep.fabric;
    let blocks = |cap: u16| usize::from(cap).div_ceil(32);
    let sw2 = f.nodes.iter().find(|n| n.description == "sw2").expect("sw2");
    let enforce_cap = sw2.switch_info.expect("SwitchInfo").partition_enforcement_cap;
    let unknown = blocks(f.nodes[i].partition_cap) + blocks(sw2.partition_cap) + blocks(enforce_cap);
    assert_eq!(
        (out.program.pkey.set, out.program.pkey.read, out.program.pkey.smps.sent),
        (unknown, 0, unknown as u64),
        "only the blocks the reset made unknown: {:?}",
        out.program.pkey
    );
}

/// Host h1's first P_Key block after a change of partitions, with
/// `keep_pkey_indexes` as given.
fn after_a_change(keep: bool) -> [u16; pkey_table::PKEYS] {
    let (mut run, h1, h2, _, _) = setup();
    run.config.keep_pkey_indexes = Some(keep);
    let file = run.config.partition_config_file.clone().expect("file");
    std::fs::write(&file, format!("Default=0x7fff : ALL=full ;\na = 0x0001 : {h1:#x} ;\nb = 0x0002 : {h1:#x} ;\n")).expect("write");
    let out = once(&mut run);
    assert_eq!(read_block(&mut run, &out, "h1"), block(&[0xFFFF, 0x0001, 0x0002]));
    // Partition a goes, c comes.
    std::fs::write(&file, format!("Default=0x7fff : ALL=full ;\nb = 0x0002 : {h1:#x} ;\nc = 0x0003 : {h1:#x}, {h2:#x} ;\n")).expect("write");
    let out = once(&mut run);
    read_block(&mut run, &out, "h1")
}

#[test]
fn keep_pkey_indexes_keeps_each_partition_at_its_index() {
    // As OpenSM with keep_pkey_indexes TRUE (its default): b stays at
    // index 2, the new c takes the index a left.
    assert_eq!(after_a_change(true), block(&[0xFFFF, 0x0003, 0x0002]));
    // FALSE: the table is rewritten in order.
    assert_eq!(after_a_change(false), block(&[0xFFFF, 0x0002, 0x0003]));
}
