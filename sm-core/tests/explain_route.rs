//! `smcore route TOPO --explain SRC DST` on a torus routed by torus-2QoS:
//! the path SL, the hops and the VL at each hop agree with the dumps the
//! same run writes (the path-SL file, keyed by source node GUID; the
//! LFTs; the SL2VL maps).

mod common;

use std::collections::HashMap;

use common::*;

/// (switch GUID, LID) → out port, from opensm-lfts.dump.
fn lfts(text: &str) -> HashMap<(u64, u16), u8> {
    let mut lft = HashMap::new();
    let mut switch = 0u64;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Unicast lids") {
            let g = rest.split(" guid 0x").nth(1).expect("guid").split_whitespace().next().expect("guid");
            switch = u64::from_str_radix(g, 16).expect("hex guid");
        } else if let Some(hex) = line.strip_prefix("0x") {
            let mut words = hex.split_whitespace();
            let lid = u16::from_str_radix(words.next().expect("lid"), 16).expect("lid");
            let port: u8 = words.next().expect("port").parse().expect("port");
            lft.insert((switch, lid), port);
        }
    }
    lft
}

/// (switch GUID, in port, out port) → VL per SL, from opensm-sl2vl.dump.
fn sl2vl(text: &str) -> HashMap<(u64, u8, u8), Vec<u8>> {
    let mut maps = HashMap::new();
    let mut node = 0u64;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Switch 0x") {
            node = u64::from_str_radix(rest.split(',').next().expect("guid"), 16).expect("hex");
        } else if let Some((ports, vls)) = line.split_once(':') {
            let ports: Vec<u8> = ports.split_whitespace().filter_map(|w| w.parse().ok()).collect();
            if let [i, o] = ports[..] {
                maps.insert((node, i, o), vls.split_whitespace().map(|v| v.parse().expect("VL")).collect());
            }
        }
    }
    maps
}

/// One hop line of an explanation: (kind, node GUID, in port, out port, VL).
fn hop(line: &str) -> (String, u64, Option<u8>, u8, Option<u8>) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let kind = words[1].to_string();
    let guid = u64::from_str_radix(words[2].trim_start_matches("0x"), 16).expect("guid");
    // After the quoted description: in, out, width+speed, rate, "Gb/s", MTU, VL.
    let after = line.rsplit_once('"').expect("description").1;
    let rest: Vec<&str> = after.split_whitespace().collect();
    let in_port = rest[0].parse().ok();
    let out: u8 = rest[1].parse().expect("out port");
    let vl = rest[6].parse().ok();
    (kind, guid, in_port, out, vl)
}

#[test]
fn torus_2qos_paths_explained_as_the_dumps_have_them() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dumps = tmp.path().join("d");
    let topo = workspace().join("config/topologies/torus-4x4x4.net");
    let conf = workspace().join("config/torus-2QoS.conf");
    let pairs = [("host-0", "host-100"), ("host-2", "host-63"), ("host-127", "host-5"), ("host-77", "host-30")];
    let mut args = vec![
        "route".to_string(),
        topo.display().to_string(),
        "--engines".into(),
        "torus-2QoS,no_fallback".into(),
        "--torus-config".into(),
        conf.display().to_string(),
        "--dump-dir".into(),
        dumps.display().to_string(),
    ];
    for (s, d) in pairs {
        args.extend(["--explain".to_string(), s.to_string(), d.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = smcore(&args);
    assert_eq!(code, 0, "{out}{err}");
    let read = |f: &str| std::fs::read_to_string(dumps.join(f)).expect(f);
    let lft = lfts(&read("opensm-lfts.dump"));
    let maps = sl2vl(&read("opensm-sl2vl.dump"));
    let psl: HashMap<(u64, u16), u8> = read("smcore-path-sl.psl")
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some(((u64::from_str_radix(w.first()?.trim_start_matches("0x"), 16).ok()?, w.get(1)?.parse().ok()?), w.get(2)?.parse().ok()?))
        })
        .collect();
    let blocks: Vec<&str> = out.split("\nfrom ").skip(1).collect();
    assert_eq!(blocks.len(), pairs.len(), "{out}");
    let (mut sls, mut vls) = (Vec::new(), Vec::new());
    for ((src, dst), block) in pairs.iter().zip(&blocks) {
        assert!(block.starts_with("CA ") && block.lines().next().expect("from").contains(&format!("\"{src}\"")), "{block}");
        let dlid: u16 = block
            .lines()
            .find(|l| l.starts_with("to "))
            .and_then(|l| l.rsplit("(LID ").next())
            .and_then(|l| l.trim_end_matches(')').parse().ok())
            .expect("DLID");
        assert!(block.contains(&format!("\"{dst}\" port 1 (LID {dlid})")), "{block}");
        // The SL: the engine's, as its path-SL dump has it, and the SA's.
        let sl: u8 = block.split("path SL ").nth(1).and_then(|s| s.split_whitespace().next()).and_then(|s| s.parse().ok()).expect("SL");
        let from = block.lines().next().expect("from line");
        let node_guid = u64::from_str_radix(from.split_whitespace().nth(1).expect("GUID").trim_start_matches("0x"), 16).expect("hex");
        assert_eq!(Some(&sl), psl.get(&(node_guid, dlid)), "{src} -> {dst}");
        assert!(block.contains(&format!(": SL {sl}, MTU 4096")), "the PathRecord's SL: {block}");
        sls.push(sl);
        // The hops: the LFTs' out ports, the SL2VL maps' VLs.
        let hops: Vec<_> = block.lines().filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit())).map(hop).collect();
        assert!(hops.len() >= 2, "{block}");
        assert_eq!(hops[0].0, "CA");
        for (kind, guid, in_port, out, vl) in &hops[1..] {
            assert_eq!(kind, "switch");
            assert_eq!(Some(out), lft.get(&(*guid, dlid)), "{guid:#x} out port for LID {dlid}: {block}");
            let map = &maps[&(*guid, in_port.expect("in port"), *out)];
            assert_eq!(Some(map[usize::from(sl)]), *vl, "{guid:#x} {in_port:?}->{out} SL {sl}: {block}");
            vls.push(map[usize::from(sl)]);
        }
        assert!(block.contains(&format!("after {} link(s)", hops.len())), "{block}");
        assert!(!block.contains("warning:"), "{block}");
    }
    assert!(sls.iter().any(|&s| s != 0), "torus-2QoS gives these paths SLs other than 0: {sls:?}");
    assert!(vls.iter().any(|&v| v != 0), "and some hop a VL other than 0: {vls:?}");
    // A port the fabric does not have: an error, exit 2.
    let (code, _, err) = smcore(&[
        "route",
        &topo.display().to_string(),
        "--explain",
        "host-0",
        "no-such-host",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no port \"no-such-host\""), "{err}");
}
