//! Partitions under ibsim, asked by infiniband-diags: smcore runs with a
//! partitions.conf that splits the hosts in two; `smpquery pkeys` reads
//! every host's P_Key table back from the simulated port and finds what the
//! file gives, and `saquery -p` finds no PathRecord between the halves
//! and one within a half.
//!
//! Needs `cargo build --workspace` (smcore, engines) first, and
//! ibsim-utils and infiniband-diags; fails when they are missing.

use std::collections::BTreeSet;
use std::time::Duration;

use smcore_tests::diags::Generated;
use smcore_tests::fabric_check::{run_client, TOOL_TIMEOUT};
use smcore_tests::proc::Outcome;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::parse_guid2lid_file;
use smcore_tests::sm_run::RunningSm;

const TIMEOUT: Duration = Duration::from_secs(60);
const SETTLED: Duration = Duration::from_millis(2500);

/// Runs a diags client under the simulator; (success, stdout + stderr).
fn client(sim: &Ibsim, program: &str, args: &[&str]) -> (bool, String) {
    let run = run_client(sim, program, args, TOOL_TIMEOUT)
        .unwrap_or_else(|e| panic!("cannot run {program} (infiniband-diags installed?): {e}"));
    assert!(matches!(run.outcome, Outcome::Exited(_)), "{program} {args:?} timed out");
    (run.ok, format!("{}{}", run.stdout, run.stderr))
}

/// The P_Keys `smpquery pkeys` prints (entries other than 0), in order.
fn pkeys(text: &str) -> Vec<u16> {
    text.lines()
        .filter(|l| l.trim_start().split(':').next().is_some_and(|i| !i.is_empty() && i.trim().chars().all(|c| c.is_ascii_digit())))
        .flat_map(|l| l.split_once(':').map(|(_, r)| r).unwrap_or("").split_whitespace())
        .filter_map(|w| w.strip_prefix("0x").and_then(|h| u16::from_str_radix(h, 16).ok()))
        .filter(|&p| p & 0x7FFF != 0)
        .collect()
}

/// Number of PathRecords `saquery -p --src-to-dst` prints.
fn path_records(sim: &Ibsim, slid: u16, dlid: u16) -> (usize, String) {
    let (_, text) = client(sim, "saquery", &["-p", "--src-to-dst", &format!("{slid}:{dlid}")]);
    (text.matches("PathRecord dump").count(), text)
}

#[test]
fn a_partitions_conf_splits_the_hosts() {
    let generated = Generated::fat_tree("part-ibsim-", 2, 1, 4, 1).unwrap_or_else(|e| panic!("{e}"));
    let mut hosts: Vec<(String, u64)> = generated
        .topo
        .nodes
        .iter()
        .filter(|n| !n.is_switch())
        .flat_map(|n| n.port_guids.iter().filter(|&&g| g != 0).map(move |&g| (n.name.clone(), g)))
        .collect();
    hosts.sort();
    assert!(hosts.len() >= 8, "{hosts:?}");
    let half = hosts.len() / 2;
    let (left, right) = hosts.split_at(half);
    let list = |h: &[(String, u64)]| h.iter().map(|(_, g)| format!("{g:#x}=full")).collect::<Vec<_>>().join(", ");
    let conf = generated.dir().join("partitions.conf");
    std::fs::write(
        &conf,
        format!("# the hosts in two halves\nleft=0x0010, ipoib : {} ;\nright=0x0020 :\n  {} ;\n", list(left), list(right)),
    )
    .expect("write partitions.conf");
    let toml = generated.dir().join("smcore.toml");
    std::fs::write(&toml, format!("partition_config_file = {:?}\n", conf.display().to_string())).expect("write smcore.toml");

    let sim = Ibsim::start(&generated.net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = generated.dir().join("dumps");
    let report = generated.dir().join("report.json");
    let toml_arg = toml.display().to_string();
    let mut run = RunningSm::start(&sim, &generated.sm, &dumps, &report, &["--sweep-interval", "1", "--config", &toml_arg])
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_for("the first heavy sweep", TIMEOUT, |r| r.heavy_sweeps() >= 1 && r.dump_dir().join("guid2lid").is_file())
        .unwrap_or_else(|e| panic!("{e}"));
    run.wait_settled(SETTLED, TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    let g2l = parse_guid2lid_file(run.dump_dir().join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    let lid = |g: u64| g2l.by_lid.iter().find(|(_, &pg)| pg == g).map(|(&l, _)| l).unwrap_or_else(|| panic!("no LID for {g:#x}"));

    // The SM's port: a full member of the default partition (SELF).
    let (ok, text) = client(&sim, "sminfo", &[]);
    assert!(ok, "{text}");
    let sm_lid: u16 = text
        .split("sm lid ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("sminfo: {text}"));

    // Every host's table as the file gives it.
    for (i, (name, guid)) in hosts.iter().enumerate() {
        let l = lid(*guid);
        let (ok, text) = client(&sim, "smpquery", &["pkeys", &l.to_string()]);
        assert!(ok, "smpquery pkeys {l} ({name}): {text}");
        let default = if l == sm_lid { 0xFFFF } else { 0x7FFF };
        let own = if i < half { 0x8010 } else { 0x8020 };
        assert_eq!(pkeys(&text), vec![default, own], "{name} (LID {l}):\n{text}");
    }

    // Partition enforcement: the switch port facing each host holds the
    // host's table (ibsim's switches have a PartitionEnforcementCap).
    let topo = &generated.topo;
    let links = topo.port_links();
    for (name, guid) in &hosts {
        let h = topo.nodes.iter().position(|n| n.port_guids.contains(guid)).expect("host node");
        let p = topo.nodes[h].port_guids.iter().position(|g| g == guid).expect("host port");
        let link = &topo.links[links[h][p].expect("host cable")];
        let (sw, sw_port) = if link.a.0 == h { link.b } else { link.a };
        assert!(topo.nodes[sw].is_switch(), "{name} is cabled to a switch");
        let sw_guid = topo.nodes[sw].port_guids.first().copied().filter(|&g| g != 0).unwrap_or(topo.nodes[sw].node_guid);
        let (ok, info) = client(&sim, "smpquery", &["switchinfo", &lid(sw_guid).to_string()]);
        assert!(ok && info.contains("PartEnforceCap:..................64"), "{info}");
        let (ok, text) = client(&sim, "smpquery", &["pkeys", &lid(sw_guid).to_string(), &sw_port.to_string()]);
        assert!(ok, "{text}");
        let (ok, host_text) = client(&sim, "smpquery", &["pkeys", &lid(*guid).to_string()]);
        assert!(ok, "{host_text}");
        assert_eq!(pkeys(&text), pkeys(&host_text), "switch port facing {name}:\n{text}");
    }

    // PathRecords: none between the halves (away from the SM's port, which
    // reaches everybody), one within a half.
    let others: Vec<u16> = hosts.iter().map(|(_, g)| lid(*g)).filter(|&l| l != sm_lid).collect();
    let left_lids: BTreeSet<u16> = left.iter().map(|(_, g)| lid(*g)).filter(|&l| l != sm_lid).collect();
    let (a, b) = (
        *others.iter().find(|l| left_lids.contains(l)).expect("a left host"),
        *others.iter().find(|l| !left_lids.contains(l)).expect("a right host"),
    );
    let c = *others.iter().rev().find(|l| !left_lids.contains(l) && **l != b).expect("another right host");
    let (n, text) = path_records(&sim, a, b);
    assert_eq!(n, 0, "between the halves {a} -> {b}:\n{text}");
    let (n, text) = path_records(&sim, b, a);
    assert_eq!(n, 0, "between the halves {b} -> {a}:\n{text}");
    let (n, text) = path_records(&sim, b, c);
    assert_eq!(n, 1, "within the right half {b} -> {c}:\n{text}");
    assert!(text.contains("0x8020"), "the right half's P_Key:\n{text}");
    let (n, text) = path_records(&sim, sm_lid, b);
    assert_eq!(n, 1, "from the SM's port {sm_lid} -> {b}:\n{text}");
    // The IPoIB broadcast group of the `ipoib` partition only: the right
    // half has no `ipoib`, and a file's implicit default partition none.
    let (ok, groups) = client(&sim, "saquery", &["-g"]);
    assert!(ok, "{groups}");
    assert!(groups.contains("ff12:401b:8010::ffff:ffff"), "the left half's broadcast group:\n{groups}");
    assert_eq!(groups.matches("MGID").count(), 1, "one group only:\n{groups}");
    // Every block written took; enforcement bits ibsim does not keep are
    // reported once, for all the ports that refused them together, and
    // not rewritten at later sweeps.
    let (_, log) = run.stop(Duration::from_secs(5)).unwrap_or_else(|e| panic!("{e}"));
    assert!(log.contains("SMPs per phase"), "the SM's report is in its output:\n{log}");
    assert!(!log.contains("P_Key block Set"), "{log}");
    let unkept: Vec<&str> = log.lines().filter(|l| l.contains("do not keep partition enforcement")).collect();
    assert_eq!(unkept.len(), 1, "one warning for the sweep:\n{log}");
    assert!(
        unkept[0].contains(&format!("ports={}", hosts.len())),
        "it counts every switch port facing a host ({}):\n{}",
        hosts.len(),
        unkept[0]
    );
    assert!(!log.contains("does not keep partition enforcement"), "no per-port warning:\n{log}");
}
