//! `smcore --once` over the umad transport, against ibsim through umad2sim,
//! then read back with infiniband-diags: what the switches hold
//! (`ibroute`) must be what smcore says it programmed, and a LID-routed
//! trace (`ibtracert`) must cross the fabric.
//!
//! Needs `cargo build --workspace` first, and the Debian packages
//! ibsim-utils and infiniband-diags. `-- --nocapture` prints the figures.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use sm_core::dump::lfts_parse::{parse_lfts, parse_lfts_file_detailed};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::smcore::{Profile, Smcore};

fn run(sim: &Ibsim, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> (bool, String, String) {
    let out = sim
        .client_command(program)
        .unwrap_or_else(|e| panic!("{e}"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn once_over_umad_programs_what_ibroute_reads_back() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("umad-ibsim-").tempdir().expect("temp dir");
    let net = tmp.path().join("ft.net");
    sm.gen(&["fat-tree", "--leaves", "4", "--spines", "2", "--hosts-per-leaf", "4", "--uplinks", "2"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    let dumps = tmp.path().join("dumps");
    let dumps_arg = dumps.to_str().expect("UTF-8 temp path");
    let t = Instant::now();
    let (ok, stdout, stderr) = run(&sim, sm.bin(), &["--once", "--dump-dir", dumps_arg]);
    let wall = t.elapsed();
    assert!(ok, "smcore --once over umad failed:\n{stdout}\n{stderr}");
    println!("smcore --once over umad: {:.1} ms wall\n{stdout}", wall.as_secs_f64() * 1e3);

    // Every switch found, and every port numbered (LMC 0: one LID each).
    let lfts = dumps.join("opensm-lfts.dump");
    let ours = parse_lfts_file_detailed(&lfts).unwrap_or_else(|e| panic!("{e}"));
    let want_switches: BTreeSet<u64> = topo.switches().map(|i| topo.nodes[i].node_guid).collect();
    let got_switches: BTreeSet<u64> = ours.iter().map(|s| s.guid).collect();
    assert_eq!(got_switches, want_switches, "switches in {}", lfts.display());
    let lids: BTreeSet<u16> = ours.iter().flat_map(|s| s.entries.iter().map(|e| e.lid)).collect();
    assert_eq!(lids.len(), topo.num_switches() + topo.end_nodes().count(), "LIDs routed: {lids:?}");

    // What the switches hold, read over LID-routed SMPs.
    for sw in &ours {
        let lid = sw.lid.unwrap_or_else(|| panic!("switch {:#x} has no LID in the dump", sw.guid));
        let (ok, text, err) = run(&sim, "ibroute", &[&lid.to_string()]);
        assert!(ok, "ibroute {lid} failed:\n{text}\n{err}");
        let read = parse_lfts(&text, &format!("ibroute {lid}")).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(read.len(), 1, "ibroute {lid} printed {} switches", read.len());
        let held: BTreeMap<u16, u8> = read[0].1.iter().copied().collect();
        let programmed: BTreeMap<u16, u8> = sw.pairs().into_iter().collect();
        assert_eq!(read[0].0, sw.guid, "ibroute {lid} answered for another switch");
        assert_eq!(held, programmed, "LFT of switch LID {lid} ({})", sw.description);
    }

    // A trace between the first and last hosts, by LID.
    let ca_guids: Vec<u64> =
        topo.end_nodes().flat_map(|i| topo.nodes[i].port_guids.iter().copied()).filter(|&g| g != 0).collect();
    let lid_of = |guid: u64| {
        ours[0]
            .entries
            .iter()
            .find(|e| e.port_guid == Some(guid))
            .map(|e| e.lid)
            .unwrap_or_else(|| panic!("no LID for port {guid:#x}"))
    };
    let (Some(&first), Some(&last)) = (ca_guids.first(), ca_guids.last()) else {
        panic!("no hosts in the fabric");
    };
    let (from, to) = (lid_of(first), lid_of(last));
    let (ok, text, err) = run(&sim, "ibtracert", &[&from.to_string(), &to.to_string()]);
    assert!(ok && text.contains("To ca"), "ibtracert {from} {to} failed:\n{text}\n{err}");
}
