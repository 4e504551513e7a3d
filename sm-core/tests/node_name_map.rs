//! OpenSM's `node_name_map_name` and `log_prefix` from an opensm.conf:
//! the dumps show the map's names instead of NodeDescriptions, every log
//! record starts with the prefix, and a bad map line stops the SM naming
//! file and line.

mod common;

use common::*;

/// The first switch of `opensm-lfts.dump`: its GUID and description.
fn first_switch(lfts: &str) -> (String, String) {
    let line = lfts.lines().find(|l| l.starts_with("Unicast lids")).expect("a switch section");
    let guid = line.split(" guid ").nth(1).and_then(|r| r.split_whitespace().next()).expect("guid").to_string();
    let desc = line.split("('").nth(1).and_then(|r| r.split("')").next()).expect("description").to_string();
    (guid, desc)
}

#[test]
fn dumps_show_mapped_names_and_log_records_carry_the_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let net = workspace().join("config/topologies/fat-tree-64.net");
    let plain = tmp.path().join("plain");
    let (code, _, err) = smcore(&["--fabric", net.to_str().unwrap(), "--once", "--dump-dir", plain.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let lfts = std::fs::read_to_string(plain.join("opensm-lfts.dump")).unwrap();
    let (guid, desc) = first_switch(&lfts);

    let map = write(tmp.path(), "nn.map", &format!("# site names\n{guid} \"rack7-leaf-a\"\n"));
    let log = tmp.path().join("sm.log");
    let conf = write(
        tmp.path(),
        "opensm.conf",
        &format!(
            "log_prefix fabric-x\nlog_flags 0x03\nlog_file {}\nnode_name_map_name {}\n",
            log.display(),
            map.display()
        ),
    );
    let named = tmp.path().join("named");
    let (code, _, err) = smcore(&[
        "--config",
        conf.to_str().unwrap(),
        "--fabric",
        net.to_str().unwrap(),
        "--once",
        "--dump-dir",
        named.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let lfts = std::fs::read_to_string(named.join("opensm-lfts.dump")).unwrap();
    assert_eq!(first_switch(&lfts), (guid.clone(), "rack7-leaf-a".to_string()));
    assert!(!lfts.contains(&format!("('{desc}')")) || desc == "rack7-leaf-a", "{desc} still shown");
    let subnet = std::fs::read_to_string(named.join("opensm-subnet.lst")).unwrap();
    assert!(subnet.contains("rack7-leaf-a"), "opensm-subnet.lst names it too");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.is_empty(), "the SM logged nothing at log_flags 0x03");
    for line in logged.lines() {
        assert!(line.starts_with("fabric-x: "), "{line}");
    }
}

#[test]
fn a_bad_node_name_map_line_stops_the_sm_naming_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let net = workspace().join("config/topologies/fat-tree-64.net");
    let map = write(tmp.path(), "nn.map", "0x10 \"ok\"\nnot-a-guid \"x\"\n");
    let (code, _, err) =
        smcore(&["--fabric", net.to_str().unwrap(), "--once", "--node-name-map", map.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains(&format!("{}:2: `not-a-guid` is not a GUID", map.display())), "{err}");
}

#[test]
fn smcore_route_dumps_show_the_names_of_the_toml_node_name_map() {
    let tmp = tempfile::tempdir().unwrap();
    let net = workspace().join("config/topologies/fat-tree-64.net");
    let plain = tmp.path().join("plain");
    let (code, _, err) = smcore(&["route", net.to_str().unwrap(), "--engines", "minhop", "--dump-dir", plain.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (guid, _) = first_switch(&std::fs::read_to_string(plain.join("opensm-lfts.dump")).unwrap());
    let map = write(tmp.path(), "nn.map", &format!("{guid} \"core-1\"\n"));
    let toml = write(tmp.path(), "smcore.toml", &format!("node_name_map = {:?}\n", map.display().to_string()));
    let named = tmp.path().join("named");
    let (code, _, err) = smcore(&[
        "--config",
        toml.to_str().unwrap(),
        "route",
        net.to_str().unwrap(),
        "--engines",
        "minhop",
        "--dump-dir",
        named.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let lfts = std::fs::read_to_string(named.join("opensm-lfts.dump")).unwrap();
    assert_eq!(first_switch(&lfts), (guid, "core-1".to_string()));
    // A bad map stops `smcore route` too, naming file and line.
    std::fs::write(&map, "0x1 \"a\"\n0x2\n").unwrap();
    let (code, _, err) = smcore(&["--config", toml.to_str().unwrap(), "route", net.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains(&format!("{}:2: no name", map.display())), "{err}");
}
