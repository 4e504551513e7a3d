//! The compute node order file, `opensm-ftree-ca-order.dump`: one line per
//! compute node port in routing order, `0x<lid>\t<description>`, leaves
//! padded with `0xFFFF\tDUMMY` to the fullest leaf.

mod common;

use std::collections::BTreeSet;

use common::*;
use sm_abi::{Level, RoutingEngine};
use sm_topology::gen;
use smcore_ftree::{Ftree, CA_ORDER_FILE};

#[test]
fn ca_order_lists_every_compute_node_leaf_by_leaf() {
    let mut t = gen::kary_ntree(4, 2, 4).unwrap();
    // host-5 (on the second leaf) goes away: that leaf gets one dummy.
    let gone = t.find_node_by_desc("host-5").unwrap();
    t.links.retain(|l| !l.touches(gone));
    let f = snap(&t);
    let dir = scratch_dir("dump");
    let cfg = format!(
        "lmc = 0\ndump_dir = {}\nguid_routing_order_file = \"/elsewhere\"\n",
        toml_path(&dir)
    );
    let eng = Ftree::from_config(&cfg).unwrap();
    let (r, _) = route_ok(&eng, &f, "dump");
    assert!(
        !r.diagnostics.iter().any(|d| d.level == Level::Warn),
        "{:?}",
        r.diagnostics
    );
    let text = std::fs::read_to_string(dir.join(CA_ORDER_FILE)).expect("CA order file");
    assert!(!dir.join(format!("{CA_ORDER_FILE}.tmp")).exists());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 16, "4 leaves x 4 slots:\n{text}");
    assert!(text.ends_with('\n'));
    let dummies = lines.iter().filter(|l| **l == "0xFFFF\tDUMMY").count();
    assert_eq!(dummies, 1, "{text}");

    let mut lids = BTreeSet::new();
    for l in lines.iter().filter(|l| **l != "0xFFFF\tDUMMY") {
        let (lid, desc) = l
            .split_once('\t')
            .unwrap_or_else(|| panic!("no tab in {l:?}"));
        let hex = lid.strip_prefix("0x").unwrap_or_else(|| panic!("{l:?}"));
        assert_eq!(hex.len(), 4, "{l:?}");
        assert!(
            hex.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "{l:?}"
        );
        let lid = u16::from_str_radix(hex, 16).unwrap();
        // The line names the CA that owns the LID.
        let port = f
            .end_ports()
            .find(|&p| f.ports[p as usize].lid == lid)
            .expect("LID of a CA");
        assert_eq!(
            f.nodes[f.ports[port as usize].node as usize]
                .description
                .as_str(),
            desc
        );
        assert!(lids.insert(lid), "LID {lid} listed twice");
    }
    let all: BTreeSet<u16> = f.end_ports().map(|p| f.ports[p as usize].lid).collect();
    assert_eq!(lids, all, "every CA port once");

    // Each block of four lines is one leaf: its hosts share a switch.
    for block in lines.chunks(4) {
        let leaves: BTreeSet<u32> = block
            .iter()
            .filter(|l| **l != "0xFFFF\tDUMMY")
            .map(|l| {
                let lid = u16::from_str_radix(&l[2..6], 16).unwrap();
                let p = f
                    .end_ports()
                    .find(|&p| f.ports[p as usize].lid == lid)
                    .unwrap();
                f.ports[f.ports[p as usize].peer as usize].node
            })
            .collect();
        assert_eq!(leaves.len(), 1, "{block:?}");
    }
}

#[test]
fn an_unwritable_dump_dir_is_a_warning() {
    let f = snap(&gen::kary_ntree(2, 3, 2).unwrap());
    let not_a_dir = scratch_file("dump-bad", "plain-file", "x");
    let eng = Ftree::from_config(&format!("dump_dir = {}", toml_path(&not_a_dir))).unwrap();
    let r = eng
        .route(&f)
        .expect("routing must not fail on a dump problem");
    assert!(
        r.diagnostics
            .iter()
            .any(|d| d.level == Level::Warn && d.message.contains(CA_ORDER_FILE)),
        "{:?}",
        r.diagnostics
    );
}
