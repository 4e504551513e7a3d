//! The file engine on generated fabrics: tables routed min-hop, dumped,
//! loaded back; LIDs reassigned between dump and load; ibroute output;
//! bad files.

mod common;

use std::path::{Path, PathBuf};

use common::{guid_level, minhop, relidded};
use sm_abi::{FabricSnapshot, Level, Lft, Routing, RoutingEngine, NO_ROUTE};
use smcore_file::FileEngine;
use smcore_kit::conformance::cases;
use smcore_kit::lfts_file::write_lfts;
use smcore_kit::verify::{verify, VerifyOptions};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write test file");
    p
}

fn load(path: &Path, fabric: &FabricSnapshot) -> Result<Routing, String> {
    FileEngine::with_file(path)
        .route(fabric)
        .map_err(|e| e.to_string())
}

/// LFTs by switch node index, full length.
fn by_node(fabric: &FabricSnapshot, lfts: &[Lft]) -> Vec<Option<Vec<u8>>> {
    let mut v = vec![None; fabric.nodes.len()];
    for l in lfts {
        v[l.node as usize] = Some(l.ports.to_vec());
    }
    v
}

fn warnings(r: &Routing) -> Vec<String> {
    r.diagnostics
        .iter()
        .filter(|d| d.level == Level::Warn)
        .map(|d| d.message.to_string())
        .collect()
}

#[test]
fn minhop_tables_load_back_identically_on_every_family() {
    let tmp = tempfile::tempdir().unwrap();
    for lmc in [0u8, 1] {
        for c in cases(lmc).unwrap() {
            let f = &c.fabric;
            let routed = minhop(f);
            let dump = write(
                tmp.path(),
                &format!("{}-{lmc}.dump", c.name),
                &write_lfts(f, &routed.lfts),
            );
            let loaded = load(&dump, f).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(
                by_node(f, &loaded.lfts),
                by_node(f, &routed.lfts),
                "{} lmc {lmc}",
                c.name
            );
            assert!(
                warnings(&loaded).is_empty(),
                "{}: {:?}",
                c.name,
                warnings(&loaded)
            );
            let v = verify(
                f,
                &loaded,
                &VerifyOptions {
                    credit_loops: false,
                    ..Default::default()
                },
            );
            assert_eq!((v.unreachable, v.looping), (0, 0), "{}", c.name);
        }
    }
}

/// The same fabric with every LID-holding port's LIDs handed out again in
/// reverse node order (aligned blocks as before), so almost every port
/// moves.
fn reassigned(f: &FabricSnapshot) -> FabricSnapshot {
    relidded(f, |holders| holders.reverse())
}

#[test]
fn reassigned_lids_keep_the_port_guid_level_routing() {
    let tmp = tempfile::tempdir().unwrap();
    for lmc in [0u8, 2] {
        for c in cases(lmc).unwrap().into_iter().filter(|c| !c.faulty) {
            let before = &c.fabric;
            let after = reassigned(before);
            assert_ne!(
                before.ports.iter().map(|p| p.lid).collect::<Vec<_>>(),
                after.ports.iter().map(|p| p.lid).collect::<Vec<_>>()
            );
            let routed = minhop(before);
            let dump = write(
                tmp.path(),
                &format!("{}.dump", c.name),
                &write_lfts(before, &routed.lfts),
            );
            let loaded = load(&dump, &after).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(
                guid_level(&after, &loaded.lfts),
                guid_level(before, &routed.lfts),
                "{} lmc {lmc}",
                c.name
            );
            let v = verify(
                &after,
                &loaded,
                &VerifyOptions {
                    credit_loops: false,
                    ..Default::default()
                },
            );
            assert_eq!(
                (v.unreachable, v.looping, v.non_minimal),
                (0, 0, 0),
                "{}",
                c.name
            );
            let info: Vec<&str> = loaded
                .diagnostics
                .iter()
                .map(|d| d.message.as_str())
                .collect();
            assert!(
                info.iter()
                    .any(|m| m.contains("moved to their port's new LID")
                        && !m.contains("; 0 entries")),
                "{info:?}"
            );
        }
    }
}

#[test]
fn malformed_line_is_an_error_naming_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "mesh-4x3-h2")
        .unwrap();
    let routed = minhop(&c.fabric);
    let mut lines: Vec<String> = write_lfts(&c.fabric, &routed.lfts)
        .lines()
        .map(String::from)
        .collect();
    lines[5] = "0x0005 1x2 # Switch portguid 0x1: 'x'".into();
    let dump = write(tmp.path(), "bad.dump", &(lines.join("\n") + "\n"));
    let e = load(&dump, &c.fabric).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "file: {}:6: cannot parse the output port",
            dump.display()
        )),
        "{e}"
    );

    let junk = write(
        tmp.path(),
        "junk.dump",
        "Unicast lids [0-2] of switch Lid 2 guid 0x2 ('s'):\nhello\n",
    );
    let e = load(&junk, &c.fabric).unwrap_err();
    assert!(e.contains("junk.dump:2: unrecognised line"), "{e}");
}

#[test]
fn multicast_dumps_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let f = &cases(0).unwrap()[0].fabric;
    let sw = f.nodes[f.switches().next().unwrap() as usize].guid;
    let ibroute_m = format!(
        "Multicast mlids [0xc000-0xc3ff] of switch Lid 1 guid 0x{sw:016x} (leaf):\n            0               1\n     Ports: 12345678901234567890\n MLid\n0xc000      x   x\n"
    );
    let mcfdbs = format!("\nSwitch 0x{sw:016x}\nLID    : Out Port(s)\n0xC000 : 0x001 0x002\n");
    for (name, text) in [("mft.ibroute", ibroute_m), ("opensm.mcfdbs", mcfdbs)] {
        let p = write(tmp.path(), name, &text);
        let e = load(&p, f).unwrap_err();
        assert!(
            e.contains("multicast") && e.contains(&format!("{}:", p.display())),
            "{name}: {e}"
        );
    }
}

#[test]
fn unknown_switches_are_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "hypercube-4-h2")
        .unwrap();
    let f = &c.fabric;
    let routed = minhop(f);
    let stranger = "Unicast lids [0-3] of switch Lid 99 guid 0x00000000deadbeef ('gone'):\n0x0001 001 # Switch portguid 0x00000000deadbeef: 'gone'\n3 lids dumped\n";
    let dump = write(
        tmp.path(),
        "plus.dump",
        &(stranger.to_string() + &write_lfts(f, &routed.lfts)),
    );
    let loaded = load(&dump, f).unwrap();
    assert_eq!(by_node(f, &loaded.lfts), by_node(f, &routed.lfts));
    let w = warnings(&loaded);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains(":1: switch 0x00000000deadbeef ('gone') is not in the fabric"),
        "{w:?}"
    );

    // A fabric switch missing from the file is left without a table, with a warning.
    let without_first: Vec<Lft> = routed.lfts[1..].to_vec();
    let dump = write(tmp.path(), "less.dump", &write_lfts(f, &without_first));
    let loaded = load(&dump, f).unwrap();
    assert_eq!(loaded.lfts.len(), routed.lfts.len() - 1);
    let w = warnings(&loaded);
    assert!(
        w.iter().any(|m| m.contains("no LFT for 1 fabric switch")),
        "{w:?}"
    );

    // Only strangers: nothing to load is an error.
    let dump = write(tmp.path(), "strangers.dump", stranger);
    assert!(load(&dump, f)
        .unwrap_err()
        .contains("none of the 1 switches"));
}

#[test]
fn missing_file_and_missing_option_are_errors() {
    let f = &cases(0).unwrap()[0].fabric;
    let e = load(Path::new("/nonexistent/dir/opensm-lfts.dump"), f).unwrap_err();
    assert!(
        e.starts_with("file: /nonexistent/dir/opensm-lfts.dump: "),
        "{e}"
    );
    let e = FileEngine::from_config("lmc = 0\n")
        .unwrap()
        .route(f)
        .unwrap_err();
    assert!(e.reason.contains("no LFT file given"), "{e}");
    let tmp = tempfile::tempdir().unwrap();
    let empty = write(tmp.path(), "empty.dump", "# nothing\n\n");
    assert!(load(&empty, f)
        .unwrap_err()
        .contains("holds no unicast LFT"));
    // The path comes from the TOML text the core passes.
    let p = tmp.path().join("missing.dump");
    let e = FileEngine::from_config(&format!("lfts_file = \"{}\"\n", p.display()))
        .unwrap()
        .route(f)
        .unwrap_err();
    assert!(e.reason.contains("missing.dump"), "{e}");
}

#[test]
fn ports_the_switch_lacks_and_lids_beyond_the_fabric_are_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cases(0)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "mesh-4x3-h2")
        .unwrap();
    let f = &c.fabric;
    let node = f.switches().next().unwrap();
    let n = &f.nodes[node as usize];
    let text = format!(
        "Unicast lids [0-3] of switch Lid 1 guid 0x{:016x} ('{}'):\n0x0001 {:03}\n0x{:04x} 001\n0x0002 001\n",
        n.guid,
        n.description,
        n.num_ports + 1,
        f.max_lid + 1
    );
    let dump = write(tmp.path(), "odd.dump", &text);
    let loaded = load(&dump, f).unwrap();
    let lft = &loaded.lfts[0];
    assert_eq!(lft.ports.len(), f.max_lid as usize + 1);
    assert_eq!(lft.ports[1], NO_ROUTE);
    assert_eq!(lft.ports[2], 1);
    let w = warnings(&loaded).join("\n");
    assert!(
        w.contains("odd.dump:2: switch") && w.contains(&format!("has no port {}", n.num_ports + 1)),
        "{w}"
    );
    assert!(
        w.contains("1 entries for LIDs above the fabric's highest LID"),
        "{w}"
    );
}

fn ref_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sm-core/tests/data/dump")
        .join(name)
}

/// `ref-fabric.net` (2 switches, 4 CAs) with smcore's LIDs, which differ
/// from the ones OpenSM gave when its `ibroute` output was captured.
fn ref_fabric() -> FabricSnapshot {
    let topo = sm_topology::parse_file(ref_data("ref-fabric.net")).unwrap();
    sm_topology::lids::snapshot(&topo, 0).unwrap()
}

/// Port-GUID-level tables of OpenSM's own dump of the same run.
fn opensm_guid_level() -> Vec<(u64, u64, u8)> {
    let parsed = smcore_kit::lfts_file::parse_lfts_file_detailed(&ref_data(
        "opensm-minhop/opensm-lfts.dump",
    ))
    .unwrap();
    let mut v: Vec<(u64, u64, u8)> = parsed
        .iter()
        .flat_map(|s| {
            s.entries
                .iter()
                .map(move |e| (s.guid, e.port_guid.unwrap(), e.port))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn ibroute_output_is_loaded_and_followed_by_port_guid() {
    let f = ref_fabric();
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(ref_data("opensm-minhop/ibroute.2")).unwrap()
        + &std::fs::read_to_string(ref_data("opensm-minhop/ibroute.3")).unwrap();
    let p = write(tmp.path(), "ibroute.out", &text);
    let loaded = load(&p, &f).unwrap();
    assert!(warnings(&loaded).is_empty(), "{:?}", warnings(&loaded));
    let mut ours: Vec<(u64, u64, u8)> = guid_level(&f, &loaded.lfts)
        .into_iter()
        .map(|(s, d, _, p)| (s, d, p))
        .collect();
    ours.sort();
    assert_eq!(ours, opensm_guid_level());
    let v = verify(&f, &loaded, &VerifyOptions::default());
    assert_eq!((v.unreachable, v.looping), (0, 0));
    // The LIDs really differ: h2 had LID 4 under OpenSM.
    let h2 = f
        .ports
        .iter()
        .find(|p| p.guid == 0x0002c90000002001)
        .unwrap();
    assert_ne!(h2.lid, 4);
}

#[test]
fn ibroute_without_guids_stays_at_its_lids_and_says_so() {
    // `ibroute -n` names no destinations: after a LID change its entries
    // cannot follow their ports.
    let f = ref_fabric();
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(ref_data("opensm-minhop/ibroute.2")).unwrap()
        + &std::fs::read_to_string(ref_data("opensm-minhop/ibroute-n.3")).unwrap();
    let p = write(tmp.path(), "mixed.out", &text);
    let loaded = load(&p, &f).unwrap();
    let w = warnings(&loaded).join("\n");
    assert!(w.contains("6 entries name no destination GUID"), "{w}");
    let sw2 = f
        .nodes
        .iter()
        .position(|n| n.guid == 0x0002c90000000200)
        .unwrap() as u32;
    let lft = loaded.lfts.iter().find(|l| l.node == sw2).unwrap();
    // ibroute-n.3: "0x0005 001", written where LID 5 was h3; kept at LID 5.
    assert_eq!(lft.ports[5], 1);
    // With the LIDs unchanged (OpenSM's own), no warning is due.
    let mut same = f.clone();
    let g2l = [
        (0x0002c90000001001u64, 1u16),
        (0x0002c90000000100, 2),
        (0x0002c90000000200, 3),
        (0x0002c90000002001, 4),
        (0x0002c90000003001, 5),
        (0x0002c90000004001, 6),
    ];
    for p in same.ports.iter_mut() {
        if p.lid != 0 {
            p.lid = g2l.iter().find(|(g, _)| *g == p.guid).unwrap().1;
        }
    }
    let loaded = load(&p, &same).unwrap();
    assert!(warnings(&loaded).is_empty(), "{:?}", warnings(&loaded));
    let v = verify(&same, &loaded, &VerifyOptions::default());
    assert_eq!((v.unreachable, v.looping), (0, 0));
}

/// OpenSM's `lid_matrix_dump_file` without `lfts_file`: min hop over the
/// file's hop counts. The file says `a` reaches `b` in 3 hops by its port 1
/// and 2 by port 2 (through `c`), so `a` sends `b`'s hosts by port 2,
/// where the fabric's own counts would take the direct port 1.
#[test]
fn a_lid_matrix_routes_min_hop_over_its_hop_counts() {
    let text = "Switch 3 \"a\"\n[1] \"b\"[1]\n[2] \"c\"[1]\n\nSwitch 4 \"b\"\n[2] \"c\"[2]\n[3] \"h1\"[1]\n[4] \"h2\"[1]\n\n\
                Switch 2 \"c\"\n\nHca 1 \"h1\"\n\nHca 1 \"h2\"\n";
    let f = sm_topology::lids::snapshot(&sm_topology::parse_str(text, "triangle").unwrap(), 0).unwrap();
    let g = smcore_kit::Graph::new(&f);
    let d = g.distance_matrix();
    let node = |name: &str| f.nodes.iter().position(|n| n.description.as_str() == name).unwrap();
    let p0 = |n: usize| &f.ports[f.nodes[n].first_port as usize];
    let mut matrix = String::from("# written by hand\n");
    for s in 0..g.switch_count() {
        let sn = g.switch_nodes[s] as usize;
        matrix.push_str(&format!("Switch: guid 0x{:016x}\n", f.nodes[sn].guid));
        for t in 0..g.switch_count() {
            let tn = g.switch_nodes[t] as usize;
            let mut hops = vec![0xffu8; f.nodes[sn].num_ports as usize + 1];
            if s == t {
                hops[0] = 0;
            }
            for l in &g.sw_ports[s] {
                if l.peer_sw != sm_abi::NONE {
                    hops[l.port as usize] = d.get(l.peer_sw, t as u32).saturating_add(1);
                }
            }
            if f.nodes[sn].description.as_str() == "a" && f.nodes[tn].description.as_str() == "b" {
                hops[1] = 3;
            }
            let cols: Vec<String> = hops.iter().map(|h| format!("{h:02x}")).collect();
            matrix.push_str(&format!("0x{:04x}: {} # portguid 0x{:016x}\n", p0(tn).lid, cols.join(" "), p0(tn).guid));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "opensm-lid-matrix.dump", &matrix);
    let config = format!("lid_matrix_dump_file = {:?}", path.display().to_string());
    let routing = FileEngine::from_config(&config).unwrap().route(&f).unwrap_or_else(|e| panic!("{e}"));
    let lft = routing.lfts.iter().find(|l| l.node as usize == node("a")).unwrap();
    for h in ["h1", "h2"] {
        let lid = f.ports[f.nodes[node(h)].first_port as usize + 1].lid as usize;
        assert_eq!(lft.ports[lid], 2, "{h} through c, as the file's counts say");
    }
    let v = verify(&f, &routing, &VerifyOptions::default());
    assert_eq!((v.unreachable, v.looping), (0, 0));
    // A line that cannot be read names file and line.
    let bad = write(dir.path(), "bad.dump", "Switch: guid 0x1\n0x0001: 00 zz\n");
    let e = FileEngine::from_config(&format!("lid_matrix_dump_file = {:?}", bad.display().to_string()))
        .unwrap()
        .route(&f)
        .unwrap_err();
    assert!(e.reason.contains("bad.dump:2: cannot parse hops number `zz`"), "{e}");
}
