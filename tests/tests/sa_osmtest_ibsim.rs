//! OpenSM's own SA test, `osmtest`, against smcore under ibsim, flow by
//! flow (issue 12, item 6). `-f c` writes the inventory the other flows
//! read.
//!
//! Where OpenSM itself fails a flow under ibsim (umad2sim has no RMPP
//! and cuts GetTable answers to 256 bytes), the flow runs in the form
//! OpenSM passes, or what it would have checked is read back with
//! sa_client; each test says which and why.
//!
//! Needs `cargo build --workspace` (smcore, engines, sa_client) and
//! opensm (osmtest), ibsim-utils, infiniband-diags.

use std::collections::BTreeMap;
use std::time::Duration;

use smcore_tests::diags::{fields, num, Generated};
use smcore_tests::fabric_check::{client_output, run_client, TOOL_TIMEOUT};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::sm_run::RunningSm;

const TIMEOUT: Duration = Duration::from_secs(60);
const SETTLED: Duration = Duration::from_millis(2500);

/// Runs `osmtest` under the simulator; its exit status and output.
fn osmtest(sim: &Ibsim, args: &[&str]) -> (bool, String) {
    let run = run_client(sim, "osmtest", args, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("cannot run osmtest (is opensm installed?): {e}"));
    (run.ok, format!("{}{}", run.stdout, run.stderr))
}

fn start(fabric: &Generated) -> (Ibsim, RunningSm) {
    let sim = Ibsim::start(&fabric.net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = fabric.dir().join("dumps");
    let report = fabric.dir().join("report.json");
    let mut run = RunningSm::start(&sim, &fabric.sm, &dumps, &report, &["--sweep-interval", "1"])
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", TIMEOUT, |r| {
        r.heavy_sweeps() >= 1 && r.dump_dir().join("guid2lid").is_file()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    run.wait_settled(SETTLED, TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    (sim, run)
}

/// Runs `saquery` under the simulator; its output (it must succeed).
fn saquery(sim: &Ibsim, args: &[&str]) -> String {
    let run = run_client(sim, "saquery", args, TOOL_TIMEOUT)
        .unwrap_or_else(|e| panic!("cannot run saquery (is infiniband-diags installed?): {e}"));
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(run.ok, "saquery {args:?} failed:\n{text}");
    text
}

#[test]
fn osmtest_flows_against_smcore() {
    let generated = Generated::fat_tree("sa-osmtest-", 4, 2, 4, 2).unwrap_or_else(|e| panic!("{e}"));
    let (sim, _run) = start(&generated);
    let inv = generated.dir().join("osmtest.dat");
    let inv_s = inv.to_str().expect("utf-8 path");
    let (ok, c) = osmtest(&sim, &["-f", "c", "-i", inv_s]);
    assert!(ok && c.contains("TEST \"Create Inventory\" PASS"), "{c}");

    // -f q with QoS off: no table is programmed (minhop gives none, QoS
    // adds none, as OpenSM), and still every port's SL2VL maps and VLArb
    // blocks 1-4 are found with a Get, as OpenSM answers them.
    let (ok, q) = osmtest(&sim, &["-f", "q", "-i", inv_s]);
    assert!(ok && q.contains("PASS") && !q.contains("FAIL"), "osmtest -f q:\n{q}");

    // -f f: the SA flooded with queries from the inventory.
    let (ok, f) = osmtest(&sim, &["-f", "f", "-i", inv_s]);
    assert!(ok && f.contains("PASS") && !f.contains("FAIL"), "osmtest -f f:\n{f}");

    // -f v with -d 1. Under ibsim OpenSM passes -f v in no form: umad2sim
    // has no RMPP, and osmtest waits for ever for OpenSM's multi-MAD
    // answer to its GetTable of every P_KeyTableRecord (checked by hand,
    // with and without -d 1). smcore answers that GetTable in one MAD, so
    // the flow runs to its end; what -d 1 leaves out is the comparison of
    // the inventory's PathRecords with a GetTable of all PathRecords, whose
    // answer umad2sim cuts to 256 bytes with the last 32 corrupted (the
    // third record reads as SLID 0 to DLID 0, "PKEY mismatch"). So the
    // inventory's paths are read back below one Get each instead.
    let (ok, v) = osmtest(&sim, &["-f", "v", "-d", "1", "-i", inv_s]);
    assert!(ok && v.contains("TEST \"Validate Inventory\" PASS"), "{v}");
    let inventory = std::fs::read_to_string(&inv).expect("osmtest inventory");
    let paths = inventory_paths(&inventory);
    assert!(!paths.is_empty(), "no complete DEFINE_PATH in the inventory:\n{inventory}");
    for p in &paths {
        let pair = format!("{}:{}", p.slid, p.dlid);
        let text = sa_client(&sim, None, &["path", "--pairs", &pair]);
        let got = kv(text.lines().find(|l| l.starts_with("slid=")).unwrap_or_else(|| panic!("{text}")));
        assert_eq!(
            (got["status"], got["sl"], got["mtu"], got["rate"]),
            (0, u64::from(p.sl), u64::from(p.mtu & 0x3F), u64::from(p.rate & 0x3F)),
            "PathRecord {pair} against the inventory's {p:?}"
        );
    }

    // -f m in its multiple mode (-M2), the form OpenSM passes under ibsim.
    // The default single mode ends with a GetTable of every group and
    // checks that none it created is left; umad2sim cuts that answer to
    // its first three records, so osmtest deletes only those and finds the
    // others left: OpenSM fails it the same way (ERR 02FE), and its run
    // and smcore's are otherwise the same, check for check and status for
    // status (compared by hand). -M2 skips only that last check.
    let (ok, m) = osmtest(&sim, &["-f", "m", "-M2", "-i", inv_s]);
    assert!(ok && m.contains("TEST \"Multicast\" PASS"), "{m}");
    assert!(
        m.contains("Found IPoIB MC Group, so we run SilverStorm Bug Flow"),
        "osmtest found the IPoIB broadcast group and joined it bare:\n{m}"
    );
    // The broadcast group was joined and left in the flow: it is still
    // there, as it was made.
    let groups = saquery(&sim, &["-g"]);
    assert_broadcast_group(&groups);

    // -f s: OpenSM under ibsim fails it where smcore does: the answer to
    // the second registration of the service with data does not compare
    // equal to what osmtest sent ("Data mismatch in service_data8", which
    // osmtest reports for any of the four data arrays). What smcore holds
    // is read back here by the service's ID and name: exactly what
    // osmtest registered last (ServiceData8.1 = 2, ServiceData16.1 = 3,
    // ServiceData32.1 = 4, ServiceData64.1 = 5). The rest of the flow is
    // done with sa_client below.
    let (_, s) = osmtest(&sim, &["-f", "s", "-i", inv_s]);
    assert!(!s.contains("IB_SA_MAD_STATUS_INVALID_GID"), "{s}");
    assert!(!s.contains("ERR 4A02"), "osmtest's plain registrations succeed:\n{s}");
    let with_data = s
        .lines()
        .rev()
        .find(|l| l.contains("register_service_with_data: Registering service"))
        .unwrap_or_else(|| panic!("osmtest registered no service with data:\n{s}"));
    let (name, id) = with_data
        .split_once("name: ")
        .and_then(|(_, r)| r.split_once(" id: "))
        .unwrap_or_else(|| panic!("{with_data}"));
    let text = sa_client(&sim, None, &["service", "get", "--id", id.trim(), "--name", name.trim()]);
    let line = text.lines().find(|l| l.starts_with("status=")).unwrap_or_else(|| panic!("{text}"));
    let mut want = [0u8; 64];
    want[1] = 2;
    want[16 + 3] = 3;
    want[32 + 7] = 4;
    want[48 + 15] = 5;
    let want: String = want.iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        line.contains("status=0x0000") && line.contains(&format!("data={want}")),
        "{line}\nosmtest -f s:\n{s}"
    );
    let listed = saquery(&sim, &["-S"]);
    assert!(listed.contains("osmt.srvc"), "{listed}\nosmtest -f s:\n{s}");
}

/// The rest of osmtest's ServiceRecord flow (`-f s`), which stops under
/// ibsim before it gets there (see above), done with sa_client:
/// registrations with a finite and an infinite lease, a re-registration
/// with other data (an update, not a second record), Gets by ID and name
/// and by the data, a lease running out, a delete.
#[test]
fn service_records_flow_against_smcore() {
    let generated = Generated::fat_tree("sa-service-", 2, 1, 2, 1).unwrap_or_else(|e| panic!("{e}"));
    let (sim, _run) = start(&generated);
    let get = |id: &str, name: &str, extra: &[&str]| {
        let mut args = vec!["service", "get", "--id", id, "--name", name];
        args.extend_from_slice(extra);
        let text = sa_client(&sim, None, &args);
        kv_owned(text.lines().find(|l| l.starts_with("status=")).unwrap_or_else(|| panic!("{text}")))
    };
    let set = |id: &str, name: &str, extra: &[&str]| {
        let mut args = vec!["service", "set", "--id", id, "--name", name, "--key-lsb", "11"];
        args.extend_from_slice(extra);
        let text = sa_client(&sim, None, &args);
        let f = kv_owned(text.lines().find(|l| l.starts_with("status=")).unwrap_or_else(|| panic!("{text}")));
        assert_eq!(f["status"], "0x0000", "set {id} {name} {extra:?}: {text}");
        f
    };
    set("0x100", "smcore.test.forever", &[]);
    set("0x101", "smcore.test.short", &["--lease", "3"]);
    set("0x102", "smcore.test.data", &["--data", "0x1111"]);
    let updated = set("0x102", "smcore.test.data", &["--data", "0x2222"]);
    assert_eq!(updated["data64_1"], "0x2222", "{updated:?}");
    for (id, name) in [("0x100", "smcore.test.forever"), ("0x101", "smcore.test.short"), ("0x102", "smcore.test.data")] {
        let f = get(id, name, &[]);
        assert_eq!((f["status"].as_str(), f["id"].as_str(), f["name"].as_str()), ("0x0000", id, name), "{f:?}");
    }
    // One record for the service: the old data is gone, the new matches.
    assert_eq!(get("0x102", "smcore.test.data", &["--data", "0x1111"])["status"], "0x0300");
    let f = get("0x102", "smcore.test.data", &["--data", "0x2222"]);
    assert_eq!((f["status"].as_str(), f["data8_0"].as_str(), f["data64_1"].as_str()), ("0x0000", "0x22", "0x2222"), "{f:?}");
    // A wrong name finds nothing.
    assert_eq!(get("0x100", "smcore.test.other", &[])["status"], "0x0300");
    // The 3 s lease runs out (the SA drops it within a second or so of its
    // end); the infinite one stays.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while get("0x101", "smcore.test.short", &[])["status"] == "0x0000" {
        assert!(std::time::Instant::now() < deadline, "the 3 s lease never ran out");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(get("0x101", "smcore.test.short", &[])["status"], "0x0300");
    assert_eq!(get("0x100", "smcore.test.forever", &[])["status"], "0x0000");
    // Delete, as the owner, with its key.
    let text = sa_client(&sim, None, &["service", "delete", "--id", "0x100", "--name", "smcore.test.forever", "--key-lsb", "11"]);
    assert!(text.contains("status=0x0000"), "{text}");
    assert_eq!(get("0x100", "smcore.test.forever", &[])["status"], "0x0300");
    assert_eq!(get("0x102", "smcore.test.data", &[])["status"], "0x0000");
}

/// The IPoIB broadcast group exists before any host joins (OpenSM's
/// default partition with no partitions.conf), `saquery -g` lists it with
/// OpenSM's parameters, and a join that names only MGID, PortGID and
/// JoinState (and P_Key, as Linux IPoIB sends it) succeeds from any host.
/// When the members leave, the group stays.
#[test]
fn ipoib_broadcast_group_is_there_for_bare_joins() {
    let generated = Generated::fat_tree("sa-ipoib-", 2, 1, 2, 1).unwrap_or_else(|e| panic!("{e}"));
    let (sim, _run) = start(&generated);
    let groups = saquery(&sim, &["-g"]);
    assert_broadcast_group(&groups);
    assert_eq!(fields(&groups, "MGID").len(), 1, "only the broadcast group:\n{groups}");
    let hosts: Vec<String> = generated.hosts().into_iter().map(|i| generated.topo.nodes[i].name.clone()).collect();
    assert!(hosts.len() >= 2, "{hosts:?}");
    for (i, h) in hosts.iter().take(2).enumerate() {
        let mut args = vec!["join", "--mgid", BROADCAST, "--bare"];
        if i == 1 {
            args.push("--with-pkey");
        }
        let text = sa_client(&sim, Some(h), &args);
        let f = kv_str(text.lines().find(|l| l.starts_with("mgid=")).unwrap_or_else(|| panic!("{text}")));
        assert_eq!(
            (f["status"], f["mgid"], f["qkey"], f["pkey"], f["mtu"], f["rate"]),
            ("0x0000", BROADCAST_SHORT, "0xb1b", "0xffff", "0x84", "0x83"),
            "bare join from {h}: {text}"
        );
    }
    // Members show to trusted requesters (smcore's SA key is 1).
    let members = saquery(&sim, &["--smkey", "1", "-m"]);
    assert_eq!(fields(&members, "PortGid").len(), 2, "{members}");
    for h in hosts.iter().take(2) {
        sa_client(&sim, Some(h), &["leave", "--mgid", BROADCAST]);
    }
    let groups = saquery(&sim, &["-g"]);
    assert_broadcast_group(&groups);
}

const BROADCAST: &str = "ff12:401b:ffff:0000:0000:0000:ffff:ffff";
const BROADCAST_SHORT: &str = "ff12:401b:ffff::ffff:ffff";

/// `saquery -g` output lists the default partition's IPoIB broadcast
/// group with OpenSM's parameters: P_Key 0xffff, MTU 2048 and 10 Gb/s
/// (exactly), SL 0 (saquery does not print the Q_Key; the join answers
/// carry it).
fn assert_broadcast_group(groups: &str) {
    let block = groups
        .split("MCMemberRecord group dump:")
        .find(|b| fields(b, "MGID").contains(&BROADCAST_SHORT))
        .unwrap_or_else(|| panic!("no IPoIB broadcast group:\n{groups}"));
    for (name, want) in [("Mtu", "0x84"), ("pkey", "0xFFFF"), ("Rate", "0x83"), ("SL", "0x0")] {
        assert_eq!(fields(block, name), vec![want], "{name} of\n{block}");
    }
}

/// Runs sa_client under the simulator (on `host` when given); its output
/// (it must succeed).
fn sa_client(sim: &Ibsim, host: Option<&str>, args: &[&str]) -> String {
    client_output(sim, host, env!("CARGO_BIN_EXE_sa_client"), args)
}

/// `a=1 b=0x2` → numbers by name.
fn kv(line: &str) -> BTreeMap<&str, u64> {
    line.split_whitespace()
        .filter_map(|x| x.split_once('='))
        .map(|(k, v)| (k, num(v)))
        .collect()
}

/// `a=x b=y` → strings by name.
fn kv_str(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace().filter_map(|x| x.split_once('=')).collect()
}

/// [`kv_str`], owned.
fn kv_owned(line: &str) -> BTreeMap<String, String> {
    kv_str(line).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A complete DEFINE_PATH of an osmtest inventory.
#[derive(Debug)]
struct InvPath {
    slid: u16,
    dlid: u16,
    sl: u8,
    mtu: u8,
    rate: u8,
}

/// The inventory's paths with both LIDs set (the inventory is written
/// from a GetTable answer umad2sim cut short, whose last record is
/// garbage: SLID and DLID 0).
fn inventory_paths(text: &str) -> Vec<InvPath> {
    let mut out = Vec::new();
    for block in text.split("DEFINE_PATH").skip(1) {
        let block = block.split("END").next().unwrap_or("");
        let get = |name: &str| {
            block.lines().find_map(|l| {
                let mut w = l.trim_start_matches('#').split_whitespace();
                (w.next() == Some(name)).then(|| w.next().map(num)).flatten()
            })
        };
        if let (Some(s), Some(d), Some(sl), Some(mtu), Some(rate)) = (get("slid"), get("dlid"), get("sl"), get("mtu"), get("rate")) {
            if s != 0 && d != 0 {
                out.push(InvPath { slid: s as u16, dlid: d as u16, sl: sl as u8, mtu: mtu as u8, rate: rate as u8 });
            }
        }
    }
    out
}

/// The numbers after the last `:` of `line`, split at `|`.
fn bars(line: &str) -> Vec<u8> {
    line.rsplit(':')
        .next()
        .unwrap_or("")
        .split('|')
        .filter_map(|x| x.trim().parse().ok())
        .collect()
}

/// SL2VLTableRecords are the maps on the ports: what `saquery SL2VL`
/// answers for a port the SM programmed equals what `smpquery sl2vl`
/// reads from it.
#[test]
fn sl2vl_records_read_back_from_the_ports() {
    let (generated, conf) =
        Generated::torus_2qos("sa-sl2vl-ibsim-", "4x4x3").unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&generated.net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = generated.dir().join("dumps");
    let report = generated.dir().join("report.json");
    let conf_s = conf.to_str().expect("utf-8 path");
    let mut run = RunningSm::start(
        &sim,
        &generated.sm,
        &dumps,
        &report,
        &["--sweep-interval", "1", "--engines", "torus-2QoS,no_fallback", "--torus-config", conf_s],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", TIMEOUT, |r| {
        r.heavy_sweeps() >= 1 && r.dump_dir().join("guid2lid").is_file()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    run.wait_settled(SETTLED, TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    // The first records of the table: umad2sim passes the first 256 bytes
    // of the answer and corrupts its last 32 (see sa_ibsim.rs), so only
    // the records inside bytes 56..224 are read: ten of 16 bytes.
    const READABLE: usize = (224 - 56) / 16;
    let table = saquery(&sim, &["SL2VL"]);
    let mut records: Vec<(u16, u8, u8, Vec<u8>)> = Vec::new();
    let mut lid = None;
    let (mut inp, mut outp) = (None, None);
    for line in table.lines() {
        let t = line.trim().trim_start_matches('\t');
        if let Some(v) = t.strip_prefix("LID") {
            lid = v.trim_start_matches('.').trim().strip_prefix("0x").and_then(|h| u16::from_str_radix(h, 16).ok())
                .or_else(|| v.trim_start_matches('.').trim().parse().ok());
        } else if let Some(v) = t.strip_prefix("InPort") {
            inp = v.trim_start_matches('.').trim().parse::<u8>().ok();
        } else if let Some(v) = t.strip_prefix("OutPort") {
            outp = v.trim_start_matches('.').trim().parse::<u8>().ok();
        } else if t.starts_with("VL:") {
            if records.len() == READABLE {
                break;
            }
            let (Some(l), Some(i), Some(o)) = (lid.take(), inp, outp) else { continue };
            records.push((l, i, o, bars(t)));
        }
    }
    assert_eq!(records.len(), READABLE, "SL2VL records read:\n{table}");
    let mut checked = 0;
    for (k, (l, i, o, want)) in records.iter().enumerate() {
        assert_eq!(want.len(), 16, "{table}");
        // A switch answers a map for every port pair, port 0 included, as
        // OpenSM's SA; torus-2QoS programs the maps to its external ports,
        // not those to the switch's base port 0, which are answered as
        // OpenSM answers a table it never set: zeros (ibsim's port holds
        // its own). A CA's one record (ports 0) is the LID's only one.
        let same_lid = |j: Option<usize>| j.and_then(|j| records.get(j)).is_some_and(|r| r.0 == *l);
        if *o == 0 {
            if same_lid(k.checked_sub(1)) || same_lid(Some(k + 1)) {
                assert_eq!(want, &[0; 16], "LID {l} in {i} out 0: never set, zeros as OpenSM\n{table}");
                continue;
            }
            if k + 1 == records.len() {
                continue;
            }
        }
        let lid_s = l.to_string();
        let port_s = o.to_string();
        let mut args = vec!["sl2vl", lid_s.as_str()];
        if *o != 0 {
            args.push(port_s.as_str());
        }
        let mut cmd = sim.client_command("smpquery").unwrap_or_else(|e| panic!("{e}"));
        let out = cmd.args(&args).output().expect("smpquery");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let row = text
            .lines()
            .find(|r| r.contains("ports:") && r.contains(&format!("in {i:2},")))
            .or_else(|| text.lines().rev().find(|r| r.contains("ports:")))
            .unwrap_or_else(|| panic!("no table row for in {i}:\n{text}"));
        assert_eq!(&bars(row), want, "LID {l} in {i} out {o}\nsaquery:\n{table}\nsmpquery:\n{text}");
        checked += 1;
    }
    assert!(checked + 2 >= READABLE, "SL2VL records compared: {checked} of {READABLE}\n{table}");
}

/// `osmtest -f q` (issue 12, items 5 and 6): every port's VLArb blocks
/// 1-4 and every SL2VL map (switch: each input port to each port listed;
/// CA: its one map) are found with a Get. With `qos TRUE` (OpenSM's
/// opensm.conf key) and minhop, which gives no VL tables, smcore writes the
/// qos_* tables on every port and the SA's records are those tables.
/// (With `qos FALSE`, see [`osmtest_flows_against_smcore`], nothing is
/// written and the records are zeros, as OpenSM answers them.)
#[test]
fn osmtest_q_flow_against_smcore_with_qos() {
    let generated = Generated::fat_tree("sa-osmtest-q-", 4, 2, 4, 2).unwrap_or_else(|e| panic!("{e}"));
    let conf = generated.dir().join("opensm.conf");
    std::fs::write(&conf, "qos TRUE\nqos_policy_file /nonexistent/qos-policy.conf\n").expect("write opensm.conf");
    let sim = Ibsim::start(&generated.net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = generated.dir().join("dumps");
    let report = generated.dir().join("report.json");
    let conf_s = conf.to_str().expect("utf-8 path");
    let mut run = RunningSm::start(&sim, &generated.sm, &dumps, &report, &["--sweep-interval", "1", "--config", conf_s])
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", TIMEOUT, |r| {
        r.heavy_sweeps() >= 1 && r.dump_dir().join("guid2lid").is_file()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    run.wait_settled(SETTLED, TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    let inv = generated.dir().join("osmtest.dat");
    let inv_s = inv.to_str().expect("utf-8 path");
    let (ok, c) = osmtest(&sim, &["-f", "c", "-i", inv_s]);
    assert!(ok && c.contains("TEST \"Create Inventory\" PASS"), "{c}");
    let (ok, q) = osmtest(&sim, &["-f", "q", "-i", inv_s]);
    assert!(ok && q.contains("PASS"), "osmtest -f q:\n{q}");
    // The maps are on the switches: every input port's map to a switch
    // port, read with smpquery, is OpenSM's default qos_sl2vl masked to
    // the port's VL0-7 (ibsim's).
    // (Directed route 0,1: the leaf switch osmtest's host hangs off.)
    let mut cmd = sim.client_command("smpquery").unwrap_or_else(|e| panic!("{e}"));
    let out = cmd.args(["-D", "sl2vl", "0,1", "1"]).output().expect("smpquery");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows: Vec<Vec<u8>> = text.lines().filter(|r| r.contains("ports:")).map(bars).collect();
    assert!(!rows.is_empty(), "{text}");
    for row in rows {
        assert_eq!(row, [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7], "{text}");
    }
}
