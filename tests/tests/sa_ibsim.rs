//! The SA of a running smcore under ibsim, asked by the real clients:
//! `saquery` (infiniband-diags), `osmtest` (OpenSM 3.3.23) and this
//! workspace's `sa_client`. Every answer is checked against what the SM
//! dumped (LIDs, LFTs, path SLs) and the topology file.
//!
//! ibsim limits what can be seen: umad2sim does no RMPP, so a GetTable
//! answer reaches a client as its first 256 bytes, and the last 32 bytes
//! of a MAD arrive corrupted (OpenSM's answers too, checked by hand): only
//! records inside the first 224 bytes are read, and `osmtest -f v` runs with
//! `-d 1` (its full PathRecord table comparison reads the corrupted third
//! record). Unsolicited Reports reach only a client holding issm (which
//! would also take the port's SMPs), so Reports are tested on the handler
//! (`sm-core/tests/sa_service.rs`), not here.
//!
//! Needs `cargo build -p sm-core -p smcore-tests` (smcore, sa_client,
//! engines) first, and ibsim-utils, infiniband-diags and opensm.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use sm_topology::Topology;
use smcore_tests::diags::{fields, first_num, num, Generated};
use smcore_tests::fabric_check::client_output;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{parse_guid2lid_file, parse_lfts_file};
use smcore_tests::sm_run::RunningSm;

const TIMEOUT: Duration = Duration::from_secs(60);
const SETTLED: Duration = Duration::from_millis(2500);

fn sa_client() -> &'static str {
    env!("CARGO_BIN_EXE_sa_client")
}

/// The `key=value` fields of sa_client's lines.
fn kv(line: &str) -> BTreeMap<&str, u64> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k, num(v)))
        .collect()
}

struct Fabric<'a> {
    topo: &'a Topology,
    /// Port GUID → LID, from the SM's guid2lid.
    lids: BTreeMap<u64, u16>,
}

impl<'a> Fabric<'a> {
    fn read(topo: &'a Topology, dumps: &Path) -> Self {
        let map = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
        let lids = map.by_lid.iter().map(|(&lid, &guid)| (guid, lid)).collect();
        Fabric { topo, lids }
    }

    /// (ibsim node name, port GUID, LID) of every host.
    fn hosts(&self) -> Vec<(String, u64, u16)> {
        self.topo
            .nodes
            .iter()
            .filter(|n| !n.is_switch())
            .flat_map(|n| {
                n.port_guids
                    .iter()
                    .filter(|&&g| g != 0)
                    .map(move |&g| (n.name.clone(), g, n.node_guid))
            })
            .filter_map(|(name, g, _)| self.lids.get(&g).map(|&l| (name, g, l)))
            .collect()
    }

    fn node_guid_of_port(&self, guid: u64) -> u64 {
        self.topo
            .nodes
            .iter()
            .find(|n| n.port_guids.contains(&guid) || n.node_guid == guid)
            .map(|n| n.node_guid)
            .unwrap_or_else(|| panic!("no node with port {guid:#x}"))
    }
}

/// smcore on `fabric` under a new ibsim, settled after its first heavy
/// sweep.
fn start(fabric: &Generated, extra: &[&str]) -> (Ibsim, RunningSm) {
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = fabric.dir().join("dumps");
    let report = fabric.dir().join("report.json");
    let mut args = vec!["--sweep-interval", "1"];
    args.extend_from_slice(extra);
    let mut run = RunningSm::start(&sim, &fabric.sm, &dumps, &report, &args)
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", TIMEOUT, |r| {
        r.heavy_sweeps() >= 1 && r.dump_dir().join("guid2lid").is_file()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    run.wait_settled(SETTLED, TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    (sim, run)
}

#[test]
fn saquery_osmtest_and_joins_against_smcore() {
    let generated = Generated::fat_tree("sa-ibsim-", 4, 2, 4, 2).unwrap_or_else(|e| panic!("{e}"));
    let (sim, run) = start(&generated, &[]);
    let fabric = Fabric::read(&generated.topo, run.dump_dir());
    let hosts = fabric.hosts();
    assert!(hosts.len() >= 8, "hosts with LIDs: {hosts:?}");

    // ClassPortInfo.
    let cpi = client_output(&sim, None, "saquery", &["-c"]);
    assert_eq!(fields(&cpi, "Class version"), ["2"], "{cpi}");

    // NodeRecords by LID: the port GUID the SM gave that LID.
    for (_, guid, lid) in hosts.iter().step_by(3) {
        let text = client_output(&sim, None, "saquery", &["NR", &lid.to_string()]);
        assert_eq!(first_num(&text, "lid"), Some(u64::from(*lid)), "{text}");
        assert_eq!(first_num(&text, "port_guid"), Some(*guid), "{text}");
    }

    // PathRecords between hosts: saquery (GetTable, first record) and
    // sa_client (Get), both with the pair asked and SL 0 (minhop).
    let (a, b) = (&hosts[0], &hosts[hosts.len() - 1]);
    let text = client_output(
        &sim,
        None,
        "saquery",
        &["--src-to-dst", &format!("{}:{}", a.2, b.2)],
    );
    assert_eq!(first_num(&text, "slid"), Some(u64::from(a.2)), "{text}");
    assert_eq!(first_num(&text, "dlid"), Some(u64::from(b.2)), "{text}");
    assert_eq!(first_num(&text, "sl"), Some(0), "{text}");
    let pairs: Vec<String> = hosts
        .iter()
        .zip(hosts.iter().rev())
        .map(|(s, d)| format!("{}:{}", s.2, d.2))
        .collect();
    let text = client_output(
        &sim,
        Some(&a.0),
        sa_client(),
        &["path", "--pairs", &pairs.join(",")],
    );
    for (line, (s, d)) in text
        .lines()
        .filter(|l| l.starts_with("slid="))
        .zip(hosts.iter().zip(hosts.iter().rev()))
    {
        let f = kv(line);
        assert_eq!(
            (f["status"], f["slid"], f["dlid"], f["sl"]),
            (0, u64::from(s.2), u64::from(d.2), 0),
            "{line}"
        );
    }

    // SwitchInfoRecord and the first LFT block of a switch, against the dump.
    let lfts =
        parse_lfts_file(run.dump_dir().join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let (sw_guid, table) = lfts.switches.iter().next().expect("a switch");
    let sw_lid = table.lid;
    assert_eq!(
        fabric.lids.get(sw_guid),
        Some(&sw_lid),
        "guid2lid and the LFT dump agree on switch {sw_guid:#x}"
    );
    let text = client_output(&sim, None, "saquery", &["SWIR", &sw_lid.to_string()]);
    assert_eq!(first_num(&text, "LID"), Some(u64::from(sw_lid)), "{text}");
    let text = client_output(&sim, None, "saquery", &["LFTR", &format!("{sw_lid}/0")]);
    // The first record only: the others of the (truncated) table are not
    // the SA's bytes.
    let mut read = BTreeMap::new();
    let table_lines = text
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("LID\tPort Number"))
        .skip(1);
    for l in table_lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        let entry = match f[..] {
            [lid, port] => lid.parse::<u16>().ok().zip(port.parse::<u8>().ok()),
            _ => None,
        };
        match entry {
            Some((lid, port)) => {
                read.insert(lid, port);
            }
            None => break,
        }
    }
    assert!(!read.is_empty(), "{text}");
    // LID 0 is reserved: neither routed nor dumped.
    for (lid, port) in read.iter().filter(|(&lid, _)| lid != 0) {
        let want = table.ports.get(usize::from(*lid)).copied().unwrap_or(255);
        assert_eq!(
            *port, want,
            "LFTRecord of switch LID {sw_lid}, LID {lid}\n{text}"
        );
    }

    // osmtest: inventory, then validation (see the module doc for -d 1).
    let inv = generated.dir().join("osmtest.dat");
    let inv_s = inv.to_str().expect("utf-8 path");
    let c = client_output(&sim, None, "osmtest", &["-f", "c", "-i", inv_s]);
    assert!(c.contains("TEST \"Create Inventory\" PASS"), "{c}");
    let v = client_output(&sim, None, "osmtest", &["-f", "v", "-d", "1", "-i", inv_s]);
    assert!(
        v.contains("ALL TESTS PASS") && v.contains("TEST \"Validate Inventory\" PASS"),
        "{v}"
    );

    // Multicast: two hosts join a group, it is listed with both members;
    // both leave and it is gone.
    let mgid = "ff12:401b:ffff::5a";
    let joiners = [&hosts[1], &hosts[hosts.len() - 2]];
    let mut mlid = None;
    for h in joiners {
        let text = client_output(&sim, Some(&h.0), sa_client(), &["join", "--mgid", mgid]);
        let line = text
            .lines()
            .find(|l| l.starts_with("mgid="))
            .unwrap_or_else(|| panic!("{text}"));
        let f: BTreeMap<&str, &str> = line
            .split_whitespace()
            .filter_map(|x| x.split_once('='))
            .collect();
        assert_eq!(f["status"], "0x0000", "{text}");
        assert!(
            mlid.is_none() || mlid == Some(f["mlid"].to_string()),
            "one MLID for the group: {text}"
        );
        mlid = Some(f["mlid"].to_string());
    }
    let groups = client_output(&sim, None, "saquery", &["-g"]);
    assert!(fields(&groups, "MGID").contains(&mgid), "{groups}");
    // Members show to trusted requesters only (smcore's SA key is 1).
    let members = client_output(&sim, None, "saquery", &["--smkey", "1", "-m"]);
    let gids: BTreeSet<u64> = fields(&members, "PortGid")
        .iter()
        .filter_map(|g| g.parse::<std::net::Ipv6Addr>().ok())
        .map(|g| u128::from(g) as u64)
        .collect();
    for h in joiners {
        assert!(gids.contains(&h.1), "member {:#x} listed\n{members}", h.1);
    }
    for h in joiners {
        client_output(&sim, Some(&h.0), sa_client(), &["leave", "--mgid", mgid]);
    }
    let groups = client_output(&sim, None, "saquery", &["-g"]);
    assert!(
        !fields(&groups, "MGID").contains(&mgid),
        "the group went with its members\n{groups}"
    );
    drop(run);
}

#[test]
fn torus_2qos_path_records_carry_the_routing_sl() {
    let (generated, conf) =
        Generated::torus_2qos("sa-torus-ibsim-", "4x4x3").unwrap_or_else(|e| panic!("{e}"));
    let conf_s = conf.to_str().expect("utf-8 path");
    let (sim, run) = start(
        &generated,
        &[
            "--engines",
            "torus-2QoS,no_fallback",
            "--torus-config",
            conf_s,
        ],
    );
    let fabric = Fabric::read(&generated.topo, run.dump_dir());
    // (source node GUID, destination LID) → SL, as the SM dumped it for ibdmchk.
    let psl =
        std::fs::read_to_string(run.dump_dir().join("smcore-path-sl.psl")).expect("path-SL dump");
    let dumped: BTreeMap<(u64, u16), u8> = psl
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f[..] {
                [g, lid, sl] => Some(((num(g), lid.parse().ok()?), sl.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    assert!(!dumped.is_empty(), "torus-2QoS dumps per-path SLs");
    let hosts = fabric.hosts();
    // Every host to a spread of destinations.
    let mut pairs = Vec::new();
    for (i, s) in hosts.iter().enumerate() {
        for d in hosts.iter().skip(i % 5).step_by(7) {
            if s.2 != d.2 {
                pairs.push((s.clone(), d.clone()));
            }
        }
    }
    let list: Vec<String> = pairs
        .iter()
        .map(|(s, d)| format!("{}:{}", s.2, d.2))
        .collect();
    let text = client_output(
        &sim,
        Some(&hosts[0].0),
        sa_client(),
        &["path", "--pairs", &list.join(",")],
    );
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("slid=")).collect();
    assert_eq!(lines.len(), pairs.len(), "{text}");
    let mut sls = BTreeSet::new();
    for (line, (s, d)) in lines.iter().zip(&pairs) {
        let f = kv(line);
        let want = dumped[&(fabric.node_guid_of_port(s.1), d.2)];
        assert_eq!(
            (f["status"], f["slid"], f["dlid"]),
            (0, u64::from(s.2), u64::from(d.2)),
            "{line}"
        );
        assert_eq!(f["sl"], u64::from(want), "SL of {} -> {}: {line}", s.2, d.2);
        sls.insert(want);
    }
    assert!(sls.len() > 1, "the sample crosses dateline SLs: {sls:?}");
    // saquery agrees on one pair.
    let (s, d) = &pairs[pairs.len() / 2];
    let text = client_output(
        &sim,
        None,
        "saquery",
        &["--src-to-dst", &format!("{}:{}", s.2, d.2)],
    );
    let want = dumped[&(fabric.node_guid_of_port(s.1), d.2)];
    assert_eq!(first_num(&text, "sl"), Some(u64::from(want)), "{text}");
    drop(run);
}
