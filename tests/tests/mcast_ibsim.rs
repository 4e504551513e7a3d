//! Multicast under ibsim: hosts on several leaves join a group through
//! smcore's SA (MCMemberRecord Set, sent by `sa_client` attached at each
//! host with `SIM_HOST`), smcore builds the group's tree and programs the
//! MFTs, and what the switches hold — read back with `dump_fts -M` — must
//! carry a packet from every member to every other member exactly once and
//! to nobody else. A member leaving shrinks the tree the same way; the SA
//! lists the group (`saquery -g`) with the MLID the switches use.
//!
//! Needs `cargo build --workspace` first, and ibsim-utils and
//! infiniband-diags.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use sm_topology::Topology;
use smcore_tests::ibdmchk::{require_loop_free, SlFiles};
use smcore_tests::diags::Generated;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::sm_run::RunningSm;
use smcore_tests::smcore::{Profile, Smcore};

const MGID: &str = "ff12:401b:ffff:0000:0000:0000:0001:0002";

/// Switch GUID → MLID → ports, from `dump_fts -M` (every switch's
/// non-empty MFT entries; one "x " or "  " column pair per port).
fn read_mfts(sim: &Ibsim) -> BTreeMap<u64, BTreeMap<u16, BTreeSet<u8>>> {
    let out = sim
        .client_command("dump_fts")
        .expect("dump_fts")
        .arg("-M")
        .stderr(Stdio::null())
        .output()
        .expect("run dump_fts");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut tables: BTreeMap<u64, BTreeMap<u16, BTreeSet<u8>>> = BTreeMap::new();
    let mut guid = None;
    for line in text.lines() {
        if line.starts_with("Multicast mlids") {
            guid = line
                .split(" guid 0x")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|g| u64::from_str_radix(g, 16).ok());
            if let Some(g) = guid {
                tables.entry(g).or_default();
            }
        } else if let (Some(g), Some(rest)) = (guid, line.strip_prefix("0x")) {
            let Some(mlid) = rest.get(..4).and_then(|h| u16::from_str_radix(h, 16).ok()) else { continue };
            // "0x%04x      " then the columns.
            let columns = rest.get(10..).unwrap_or("");
            let ports: BTreeSet<u8> =
                columns.as_bytes().chunks(2).enumerate().filter(|(_, c)| c[0] == b'x').map(|(i, _)| i as u8).collect();
            tables.entry(g).or_default().insert(mlid, ports);
        }
    }
    tables
}

/// Copies of one packet sent by host `from` that each host receives,
/// flooding by `mfts` over the cables of `topo`.
fn flood(topo: &Topology, mfts: &BTreeMap<u64, BTreeMap<u16, BTreeSet<u8>>>, mlid: u16, from: usize) -> BTreeMap<usize, usize> {
    let mut got = BTreeMap::new();
    let Some((first, first_port)) = topo.peer(from, 1) else { return got };
    let mut queue = VecDeque::from([(first, first_port)]);
    let mut steps = 0;
    while let Some((sw, in_port)) = queue.pop_front() {
        steps += 1;
        assert!(steps < 100_000, "the MFTs hold a cycle");
        let ports = mfts.get(&topo.nodes[sw].node_guid).and_then(|t| t.get(&mlid)).cloned().unwrap_or_default();
        for out in ports {
            if out == in_port || out == 0 {
                continue;
            }
            let Some((peer, pp)) = topo.peer(sw, out) else { continue };
            if topo.nodes[peer].is_switch() {
                queue.push_back((peer, pp));
            } else {
                *got.entry(peer).or_insert(0) += 1;
            }
        }
    }
    got
}

fn assert_reaches_exactly(topo: &Topology, mfts: &BTreeMap<u64, BTreeMap<u16, BTreeSet<u8>>>, mlid: u16, members: &[usize], when: &str) {
    for &m in members {
        let got = flood(topo, mfts, mlid, m);
        let want: BTreeMap<usize, usize> = members.iter().filter(|&&x| x != m).map(|&x| (x, 1)).collect();
        assert_eq!(got, want, "{when}: a packet from {} reaches {:?}", topo.nodes[m].desc, got);
    }
}

fn sa_client(sim: &Ibsim, host: &str, args: &[&str]) -> String {
    smcore_tests::fabric_check::client_output(sim, Some(host), env!("CARGO_BIN_EXE_sa_client"), args)
}

/// The MLID the SM's multicast dump gives the group's entries (the only
/// group in these tests).
fn dumped_mlids(dumps: &Path) -> BTreeSet<u16> {
    std::fs::read_to_string(dumps.join("opensm.mcfdbs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("0x").and_then(|r| r.get(..4)).and_then(|h| u16::from_str_radix(h, 16).ok()))
        .collect()
}

#[test]
fn hosts_join_and_leave_and_the_mfts_read_back_carry_each_packet_once() {
    let fabric = Generated::fat_tree("mcast-ibsim-", 4, 3, 3, 3).unwrap_or_else(|e| panic!("{e}"));
    let (sm, tmp, net, topo) = (&fabric.sm, fabric.dir(), &fabric.net, &fabric.topo);
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = tmp.join("dumps");
    let report = tmp.join("report.json");
    let mut run = RunningSm::start(&sim, &sm, &dumps, &report, &["--sweep-interval", "1"]).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));

    // Members: one host on each of three leaves and a second one on the
    // last of them; not the SM's host (the first).
    let hosts: Vec<usize> = topo.nodes.iter().enumerate().filter(|(_, n)| !n.is_switch()).map(|(i, _)| i).collect();
    let leaf_of = |h: usize| topo.peer(h, 1).map(|(s, _)| s);
    let mut members: Vec<usize> = Vec::new();
    let mut leaves = BTreeSet::new();
    for &h in hosts.iter().skip(1) {
        if leaves.insert(leaf_of(h)) && leaves.len() <= 3 {
            members.push(h);
        }
    }
    members.truncate(3);
    let extra = hosts.iter().copied().skip(1).find(|&h| leaf_of(h) == leaf_of(members[2]) && h != members[2]).expect("a second host");
    members.push(extra);
    for &m in &members {
        sa_client(&sim, &topo.nodes[m].name, &["join", "--mgid", MGID]);
    }
    let waited = run
        .wait_for("the group's MFTs", Duration::from_secs(30), |r| {
            let mlids = dumped_mlids(r.dump_dir());
            mlids.len() == 1 && {
                let mfts = read_mfts(&sim);
                let mlid = *mlids.iter().next().unwrap_or(&0);
                members.iter().all(|&m| flood(&topo, &mfts, mlid, m).len() == members.len() - 1)
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
    println!("4 joins programmed and read back within {:.2} s", waited.as_secs_f64());
    let mlid = *dumped_mlids(&dumps).iter().next().expect("an MLID");
    assert!(mlid >= 0xC000);
    let mfts = read_mfts(&sim);
    assert_reaches_exactly(&topo, &mfts, mlid, &members, "after the joins");
    // The switches hold what the SM dumped.
    let dumped = std::fs::read_to_string(dumps.join("opensm.mcfdbs")).expect("mcfdbs");
    let used: BTreeSet<u64> = mfts.iter().filter(|(_, t)| t.contains_key(&mlid)).map(|(g, _)| *g).collect();
    for g in &used {
        assert!(dumped.contains(&format!("Switch 0x{g:016x}")), "switch {g:#x} holds MLID {mlid:#x} but the dump has no entry");
    }
    // The SA knows the group by its MGID, with that MLID.
    let groups = sim.client_command("saquery").expect("saquery").arg("-g").output().expect("saquery -g");
    let text = String::from_utf8_lossy(&groups.stdout).to_lowercase();
    assert!(text.contains(&format!("{mlid:#x}")) || text.contains(&format!("0x{mlid:04x}")), "saquery -g:\n{text}");
    assert!(text.contains("ff12:401b:ffff::1:2"), "saquery -g:\n{text}");

    // The extra member leaves: the others still reach each other once, and
    // it gets nothing.
    sa_client(&sim, &topo.nodes[extra].name, &["leave", "--mgid", MGID]);
    let rest: Vec<usize> = members.iter().copied().filter(|&m| m != extra).collect();
    run.wait_for("the leave", Duration::from_secs(30), |_| {
        let mfts = read_mfts(&sim);
        rest.iter().all(|&m| !flood(&topo, &mfts, mlid, m).contains_key(&extra))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_reaches_exactly(&topo, &read_mfts(&sim), mlid, &rest, "after a leave");
    let (status, output) = run.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{output}");
    assert!(output.contains("multicast forwarding programmed") || output.contains("smcore stopped"), "{output}");
}

#[test]
fn torus_2qos_groups_are_whole_and_free_of_credit_loops_with_unicast() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let root = smcore_tests::smcore::workspace_root();
    let net = root.join("config/topologies/torus-4x4x4.net");
    let conf = root.join("config/torus-2QoS.conf");
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("mcast-torus-").tempdir().expect("temp dir");
    let dumps = tmp.path().join("dumps");
    let report = tmp.path().join("report.json");
    let conf_arg = conf.display().to_string();
    let args = ["--sweep-interval", "5", "--engines", "torus-2QoS,no_fallback", "--torus-config", conf_arg.as_str()];
    let mut run = RunningSm::start(&sim, &sm, &dumps, &report, &args).unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", Duration::from_secs(60), |r| r.heavy_sweeps() >= 1)
        .unwrap_or_else(|e| panic!("{e}"));
    // Six hosts spread over the torus, not the SM's.
    let hosts: Vec<usize> = topo.nodes.iter().enumerate().filter(|(_, n)| !n.is_switch()).map(|(i, _)| i).collect();
    let members: Vec<usize> = hosts.iter().copied().skip(5).step_by(23).take(6).collect();
    assert_eq!(members.len(), 6);
    for &m in &members {
        sa_client(&sim, &topo.nodes[m].name, &["join", "--mgid", MGID]);
    }
    run.wait_for("the group's MFTs", Duration::from_secs(30), |r| {
        let mlids = dumped_mlids(r.dump_dir());
        mlids.len() == 1 && {
            let mfts = read_mfts(&sim);
            let mlid = *mlids.iter().next().unwrap_or(&0);
            members.iter().all(|&m| flood(&topo, &mfts, mlid, m).len() == members.len() - 1)
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mlid = *dumped_mlids(&dumps).iter().next().expect("an MLID");
    assert_reaches_exactly(&topo, &read_mfts(&sim), mlid, &members, "torus group");
    // ibdmchk on the SM's dumps: unicast, path SLs, SL2VL and the group.
    let v = require_loop_free(&dumps, SlFiles::Required, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"));
    let group_line = format!("Multicast Group:0x{mlid:04X} has:");
    let line = v.output.lines().find(|l| l.contains(&group_line)).unwrap_or_else(|| panic!("ibdmchk saw no group:\n{}", v.output));
    assert!(line.contains(&format!("and:{} HCAs", members.len())), "{line}");
    assert!(v.errors.is_empty(), "{:?}", v.errors);
    let (status, output) = run.stop(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{output}");
}
