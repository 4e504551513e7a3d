//! M_Key under ibsim: `smcore --once` with protection level 2 and per-port
//! keys sweeps and routes the fabric, records the key of every port in
//! `guid2mkey` (mode 0600, one derived key per port GUID), and a second
//! run, reading that file back, sweeps again with the same LIDs.
//!
//! ibsim 0.10 does not implement M_Key: `sim_mad.c` leaves the SMP's M_Key
//! unread (the lines that would read it in `decode_sim_MAD` are commented
//! out), `do_portinfo` stores none of M_Key, M_KeyProtectBits or
//! M_KeyLeasePeriod from a Set, and `update_portinfo` (`sim_net.c`) never
//! writes them, so its ports read M_Key 0 and obey anyone. The test checks
//! that this is still so (`smpquery -K portinfo` shows a zero key after the
//! SM keyed every port): the day it fails, ibsim enforces M_Key and the
//! acceptance test "`ibportstate` from a host cannot disable a switch
//! port" can be written here. The enforcement itself is tested on the
//! embedded fabric (sm-core/tests/mkey_sim.rs).
//!
//! Needs `cargo build --workspace` first, and the Debian packages
//! ibsim-utils and infiniband-diags.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use sm_abi::NodeKind;
use sm_core::sweep::mkey::derive_port_key;
use smcore_tests::diags::num;
use smcore_tests::fabric_check::{run_client, TOOL_TIMEOUT};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::parse_guid2lid_file;
use smcore_tests::smcore::{Profile, Smcore};

const SECRET: u64 = 0x8badf00d_5ec7e7c0;

#[test]
fn level_2_per_port_keys_are_recorded_for_every_port_and_survive_a_restart() {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new().prefix("mkey-ibsim-").tempdir().expect("temp dir");
    let net = tmp.path().join("ft.net");
    sm.gen(&["fat-tree", "--leaves", "3", "--spines", "2", "--hosts-per-leaf", "2", "--uplinks", "2"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));

    let config = tmp.path().join("smcore.toml");
    std::fs::write(
        &config,
        format!("m_key = \"{SECRET:#x}\"\nm_key_protection_level = 2\nm_key_per_port = true\n"),
    )
    .expect("config written");
    let dumps = tmp.path().join("dumps");
    let args = ["--once", "--config", config.to_str().expect("UTF-8"), "--dump-dir", dumps.to_str().expect("UTF-8")];

    let first = run_client(&sim, sm.bin(), &args, TOOL_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    assert!(first.ok, "smcore --once with M_Key failed:\n{}\n{}", first.stdout, first.stderr);

    // One key per port that guards an SMA: port 0 of each switch, each
    // cabled CA port; each the HMAC of the secret and the GUID.
    let mut want = BTreeMap::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        let ports: Vec<u8> = if n.kind == NodeKind::Switch {
            vec![0]
        } else {
            (1..=n.num_ports).filter(|&p| topo.links.iter().any(|l| l.a == (i, p) || l.b == (i, p))).collect()
        };
        for p in ports {
            let guid = n.port_guids[usize::from(p)];
            want.insert(guid, derive_port_key(SECRET, guid));
        }
    }
    let file = dumps.join("guid2mkey");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let got: BTreeMap<u64, u64> = text
        .lines()
        .map(|l| {
            let w: Vec<u64> = l
                .split_whitespace()
                .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{l}: {e}")))
                .collect();
            assert_eq!(w.len(), 2, "guid2mkey line {l:?}");
            (w[0], w[1])
        })
        .collect();
    assert_eq!(got, want, "guid2mkey:\n{text}");
    for f in [&file, &dumps.join("guid2mkey.neighbors")] {
        let mode = std::fs::metadata(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())).permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{} is private", f.display());
    }

    // ibsim kept none of it (see the module documentation).
    let lids = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    let switch = topo.switches().next().expect("a switch");
    let switch_guid = topo.nodes[switch].port_guids[0];
    let lid = lids
        .by_lid
        .iter()
        .find_map(|(&lid, &guid)| (guid == switch_guid).then_some(lid))
        .unwrap_or_else(|| panic!("switch {switch_guid:#x} has no LID in guid2lid: {lids:?}"));
    let q = run_client(&sim, "smpquery", &["-K", "portinfo", &lid.to_string(), "0"], TOOL_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(q.ok, "smpquery: {}", q.stderr);
    let field = |name: &str| {
        q.stdout.lines().find_map(|l| {
            let v = l.trim().strip_prefix(name)?.strip_prefix(':')?;
            Some(num(v.trim_start_matches('.').trim()))
        })
    };
    assert_eq!(
        (field("Mkey"), field("ProtectBits")),
        (Some(0), Some(0)),
        "ibsim now keeps M_Key: write the ibportstate acceptance test\n{}",
        q.stdout
    );

    // A restart: the keys and paths come back from the files; the sweep
    // finds the same fabric and keeps every LID.
    let second = run_client(&sim, sm.bin(), &args, TOOL_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    assert!(second.ok, "second smcore --once failed:\n{}\n{}", second.stdout, second.stderr);
    let again = parse_guid2lid_file(dumps.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again, lids, "LIDs kept across the restart");
    let text_again = std::fs::read_to_string(&file).expect("guid2mkey");
    assert_eq!(text_again, text, "the keys did not change");
}
