//! Reading ibnetdiscover output and ibsim net files.

use std::path::PathBuf;

use sm_abi::NodeKind;
use sm_topology::model::{SPEED_DDR, SPEED_FDR, SPEED_QDR, SPEED_SDR};
use sm_topology::{parse_file, parse_str, Topology, TopologyError};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn parse(text: &str) -> Topology {
    match parse_str(text, "net.topo") {
        Ok(t) => t,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn error(text: &str) -> String {
    match parse_str(text, "net.topo") {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.to_string(),
    }
}

fn link_between(t: &Topology, a: &str, pa: u8) -> (String, u8, u8, u8) {
    let n = t.find_node(a).expect("node exists");
    let (pn, pp) = t.peer(n, pa).expect("port is linked");
    let l = t.links.iter().find(|l| l.other_end((n, pa)).is_some()).expect("link");
    (t.nodes[pn].name.clone(), pp, l.width, l.speed)
}

#[test]
fn real_ibnetdiscover_output() {
    let t = parse_file(data("mixed.ibnetdiscover")).expect("parses");
    assert_eq!(t.nodes.len(), 6);
    assert_eq!(t.num_switches(), 2);
    assert_eq!(t.links.len(), 7, "parallel links are kept, both-ends declarations merged");

    let sw2 = t.find_node("S-0000000000200001").expect("switch by id");
    let n = &t.nodes[sw2];
    assert_eq!(n.kind, NodeKind::Switch);
    assert_eq!(n.desc, "edge switch two");
    assert_eq!(n.num_ports, 8);
    assert_eq!(n.node_guid, 0x200001);
    assert_eq!(n.sys_guid, 0x200001);
    assert!(n.port_guids.iter().all(|&g| g == 0x200001));

    let dual = t.find_node_by_guid(0x100000).expect("dual-port CA");
    let d = &t.nodes[dual];
    assert_eq!(d.kind, NodeKind::Ca);
    assert_eq!(d.desc, "dual port host");
    assert_eq!(d.port_guids, vec![0, 0x100001, 0x100002]);
    assert_eq!(t.links_of(dual).count(), 2);

    assert_eq!(
        link_between(&t, "H-0000000000100000", 2),
        ("S-0000000000200001".into(), 1, 4, SPEED_FDR)
    );
    assert_eq!(
        link_between(&t, "H-0000000000100005", 1),
        ("S-0000000000200000".into(), 5, 1, SPEED_SDR)
    );
    assert_eq!(
        link_between(&t, "H-0000000000100007", 1),
        ("S-0000000000200001".into(), 6, 12, SPEED_DDR)
    );
    let parallel =
        t.links.iter().filter(|l| t.nodes[l.a.0].is_switch() && t.nodes[l.b.0].is_switch()).count();
    assert_eq!(parallel, 2);
    assert!(t.is_connected());
}

/// The ibsim net file the capture was made from, read without GUID lines,
/// must get the GUIDs ibsim gave its nodes.
#[test]
fn ibsim_guid_numbering_matches_ibsim() {
    let net = parse_file(data("mixed.net")).expect("parses");
    let disc = parse_file(data("mixed.ibnetdiscover")).expect("parses");
    for n in &net.nodes {
        let i = disc.find_node_by_guid(n.node_guid).unwrap_or_else(|| panic!("{} missing", n.name));
        let o = &disc.nodes[i];
        assert_eq!(
            (o.kind, o.num_ports, &o.desc, o.sys_guid),
            (n.kind, n.num_ports, &n.desc, n.sys_guid)
        );
        assert_eq!(o.port_guids, n.port_guids, "{}", n.name);
    }
    // Links: the same, except that ibsim ran the three links the file gives
    // no rate for at its default 4xSDR where this crate assumes 4xQDR.
    let diffs = net.differences_by_guid(&disc);
    assert_eq!(diffs.len(), 6, "{diffs:#?}");
    assert!(diffs.iter().all(|d| d.contains("4xQDR") || d.contains("4xSDR")), "{diffs:#?}");
    let hca2 = net.find_node("hca2").expect("hca2");
    assert_eq!(net.nodes[hca2].desc, "hca2", "ibsim uses the id when there is no description");
}

#[test]
fn ibsim_plain_net_file() {
    let t = parse(
        "# comment\n\
         Switch\t8 \"Switch1\"\n\
         [1]\t\"Hca1\"[1]\n\
         [2]\t\"Hca2\"[2]\n\
         [3]\t\"Switch2\"[3]\n\
         [4]\t\"Switch2\"[4]\n\
         \n\
         Switch 8 \"Switch2\"\n\
         [3]\t\"Switch1\"[3]\n\
         [4]\t\"Switch1\"[4]\n\
         \n\
         Hca\t2 \"Hca1\"\n\
         [1]\t\"Switch1\"[1]\n\
         \n\
         Hca\t2 \"Hca2\"\n\
         [2]\t\"Switch1\"[2]\n",
    );
    assert_eq!(t.nodes.len(), 4);
    assert_eq!(t.links.len(), 4);
    let guids: Vec<u64> = t.nodes.iter().map(|n| n.node_guid).collect();
    assert_eq!(guids, vec![0x200000, 0x200001, 0x100000, 0x100003]);
    assert!(t.links.iter().all(|l| (l.width, l.speed) == (4, SPEED_QDR)));
}

#[test]
fn header_variants_and_port_guids() {
    let t = parse(
        "vendid=0x2c9\n\
         devid=0xbd36\n\
         sysimgguid=0x2c903004a4b5c\n\
         switchguid=0x2c903004a4b5c(2c903004a4b5d)\n\
         Switch\t36 \"S-0002c903004a4b5c\"\t\t# \"MF0;ib-core:IS5030/U1\" enhanced port 0 lid 4 lmc 0\n\
         [1]\t\"H-0002c9030010b6a0\"[1](2c9030010b6a1) \t\t# \"node01 HCA-1\" lid 12 4xQDR\n\
         [2]\t\"H-0002c9030010b6a0\"[2](2c9030010b6a2) \t\t# \"node01 HCA-1\" lid 13 4xQDR\n\
         [3][ext 3]\t\"S-0002c903004a4b60\"[1][ext 1]\t\t# \"spine\" lid 5 4xQDR\n\
         \n\
         switchguid=0x2c903004a4b60(2c903004a4b60)\n\
         Switch\t36 \"S-0002c903004a4b60\"\t\t# spine base port 0 lid 5 lmc 0\n\
         [1]\t\"S-0002c903004a4b5c\"[3]\t\t# \"MF0;ib-core:IS5030/U1\" lid 4 4xQDR\n\
         \n\
         caguid=0x2c9030010b6a0\n\
         Ca\t2 \"H-0002c9030010b6a0\"\t\t# \"node01 HCA-1\"\n\
         [1](2c9030010b6a1) \t\"S-0002c903004a4b5c\"[1]\t\t# lid 12 lmc 0 \"MF0;ib-core:IS5030/U1\" lid 4 4xQDR\n\
         [2](2c9030010b6a2) \t\"S-0002c903004a4b5c\"[2]\t\t# lid 13 lmc 0 \"MF0;ib-core:IS5030/U1\" lid 4 4xQDR\n",
    );
    let core = &t.nodes[0];
    assert_eq!(core.desc, "MF0;ib-core:IS5030/U1");
    assert_eq!(core.sys_guid, 0x2c903004a4b5c);
    assert_eq!(core.port_guids[0], 0x2c903004a4b5d, "switch port GUID from the parentheses");
    assert_eq!(t.nodes[1].desc, "spine", "unquoted description cut before 'base port'");
    assert_eq!(t.nodes[1].sys_guid, t.nodes[1].node_guid, "sysimgguid applies to one node");
    assert_eq!(t.nodes[2].port_guids, vec![0, 0x2c9030010b6a1, 0x2c9030010b6a2]);
    assert_eq!(t.links.len(), 3);
}

#[test]
fn one_sided_links_routers_and_ca_to_ca() {
    let t = parse(
        "Switch 4 \"sw\"\n\
         [1] \"h1\"[1]\n\
         [2] \"h2\"\n\
         \n\
         Ca 1 \"h1\"\n\
         \n\
         Ca 2 \"h2\"\n\
         [2](99) \"h3\"[1] (77) # lid 0 lmc 0 \"h3\" lid 0 2xEDR\n\
         \n\
         rtguid=0x500000\n\
         Rt 1 \"r1\" # \"router one\"\n\
         [1] \"sw\"[3] w=2 s=7 e=1\n\
         \n\
         Ca 1 \"h3\"\n",
    );
    assert_eq!(t.links.len(), 4);
    // "h2" without a peer port means port 1, as in ibsim.
    assert_eq!(link_between(&t, "sw", 2).0, "h2");
    assert_eq!(link_between(&t, "sw", 2).1, 1);
    let h2 = t.find_node("h2").expect("h2");
    assert_eq!(t.nodes[h2].port_guids[2], 0x99, "GUIDs in parentheses are hex");
    let h3 = t.find_node("h3").expect("h3");
    assert_eq!(t.nodes[h3].port_guids[1], 0x77);
    assert_eq!(link_between(&t, "h2", 2).2, 2);
    let r1 = t.find_node("r1").expect("r1");
    assert_eq!(t.nodes[r1].kind, NodeKind::Router);
    assert_eq!(t.nodes[r1].node_guid, 0x500000);
    assert_eq!(link_between(&t, "r1", 1), ("sw".into(), 3, 4, SPEED_FDR));
}

#[test]
fn ids_carry_guids_without_guid_lines() {
    let t = parse(
        "Switch 2 \"S-0008f10400411a08\"\n[1] \"H-0008f10403961354\"[1]\n\n\
         Ca 1 \"H-0008f10403961354\"\n[1] \"S-0008f10400411a08\"[1]\n",
    );
    assert_eq!(t.nodes[0].node_guid, 0x0008f10400411a08);
    assert_eq!(t.nodes[1].node_guid, 0x0008f10403961354);
    assert_eq!(t.nodes[1].port_guids[1], 0x0008f10403961355);
}

#[test]
fn guid_lines_absolute_and_relative() {
    let t = parse(
        "switchguid=0x1000\nSwitch 2 \"a\"\n\nSwitch 2 \"b\"\n\n\
         switchguid+0x10\nSwitch 2 \"c\"\n\n\
         caguid=0x2000\nCa 3 \"x\"\n\nCa 1 \"y\"\n",
    );
    let g: Vec<u64> = t.nodes.iter().map(|n| n.node_guid).collect();
    assert_eq!(g, vec![0x1000, 0x1001, 0x1010, 0x2000, 0x2004]);
}

#[test]
fn default_rates_from_width_and_speed_lines() {
    let t =
        parse("width=8\nspeed=3\nSwitch 2 \"a\"\n[1] \"b\"[1]\n\nSwitch 2 \"b\"\n[1] \"a\"[1]\n");
    assert_eq!((t.links[0].width, t.links[0].speed), (12, SPEED_DDR));
}

#[test]
fn errors_name_file_line_and_node() {
    assert_eq!(
        error("Switch 24 \"sw1\"\n[1] \"sw2\"[1]\n[37] \"sw2\"[2]\n"),
        "net.topo:3: port 37 out of range for switch \"sw1\" (24 ports)"
    );
    assert_eq!(
        error("Switch 4 \"sw1\"\n[1] \"nowhere\"[1]\n"),
        "net.topo:2: port 1 of \"sw1\" is linked to unknown node \"nowhere\""
    );
    assert_eq!(
        error("Switch 4 \"a\"\n[1] \"b\"[9]\n\nSwitch 4 \"b\"\n"),
        "net.topo:2: peer port 9 out of range for switch \"b\" (4 ports)"
    );
    assert_eq!(
        error("Switch 4 \"a\"\n[1] \"b\"[1]\n[1] \"b\"[2]\n\nSwitch 4 \"b\"\n"),
        "net.topo:3: port 1 of \"a\" is declared twice (first at line 2)"
    );
    let e = error("Switch 4 \"a\"\n[1] \"b\"[1]\n\nSwitch 4 \"b\"\n[1] \"a\"[2]\n");
    assert!(
        e.starts_with(
            "net.topo:2: \"a\"[1] is linked to \"b\"[1], but line 5 links \"b\"[1] to \"a\"[2]"
        ),
        "{e}"
    );
    let e =
        error("Switch 4 \"a\"\n[1] \"c\"[1]\n\nSwitch 4 \"b\"\n[1] \"c\"[1]\n\nSwitch 4 \"c\"\n");
    assert!(
        e.starts_with("net.topo:5: \"c\"[1] is claimed by \"b\"[1] here and by \"a\"[1] at line 2"),
        "{e}"
    );
    assert_eq!(
        error("Switch 4 \"a\"\n[1] \"b\"[1] # \"b\" lid 1 4xQDR\n\nSwitch 4 \"b\"\n[1] \"a\"[1] # \"a\" lid 1 4xSDR\n"),
        "net.topo:2: link \"a\" -- \"b\" runs at 4xQDR here but at 4xSDR at line 5"
    );
    assert_eq!(
        error("\n[1] \"b\"[1]\n"),
        "net.topo:2: port line outside a node record (records start with a Switch/Ca/Rt line and end at a blank line)"
    );
    assert_eq!(
        error("Switch 300 \"a\"\n"),
        "net.topo:1: Switch port count 300 out of range (1-255)"
    );
    assert_eq!(error("Switch 0 \"a\"\n"), "net.topo:1: Switch port count 0 out of range (1-255)");
    assert_eq!(error("Ca \"a\"\n"), "net.topo:1: expected the number of ports after \"Ca\"");
    assert_eq!(error("Ca 2 a\n"), "net.topo:1: expected a quoted node id after \"Ca 2\"");
    assert_eq!(
        error("Switch 2 \"a\"\n\nCa 1 \"a\"\n"),
        "net.topo:3: node id \"a\" already used at line 1"
    );
    assert_eq!(
        error("caguid=0x10\nCa 1 \"a\"\n\ncaguid=0x10\nCa 1 \"b\"\n"),
        "net.topo:5: node GUID 0x10 of \"b\" is already used by \"a\" (line 2)"
    );
    let e = error("Rt 1 \"r\"\n");
    assert!(e.starts_with("net.topo:1: router \"r\" gets node GUID 0"), "{e}");
    assert_eq!(
        error("Switch 2 \"a\"\n[x] \"b\"\n"),
        "net.topo:2: expected a port number like \"[3]\""
    );
    assert_eq!(
        error("Switch 2 \"a\"\n[1] b[1]\n"),
        "net.topo:2: expected a quoted peer node id after the port number"
    );
    assert_eq!(
        error("include \"other.net\"\n"),
        "net.topo:1: ibsim \"include\" lines are not supported; flatten the file first"
    );
    assert_eq!(error("switchguid=zz\n"), "net.topo:1: expected a GUID after \"switchguid\"");
    assert_eq!(
        error("Switch 2 \"a\"\n[1] \"a\"[1]\n"),
        "net.topo:2: port 1 of \"a\" is linked to itself"
    );
}

#[test]
fn missing_file_names_the_path() {
    let e = parse_file("/nonexistent/dir/fabric.net").expect_err("no such file");
    assert!(matches!(e, TopologyError::Io { .. }));
    assert!(e.to_string().starts_with("/nonexistent/dir/fabric.net: "), "{e}");
}

#[test]
fn crlf_and_leading_whitespace() {
    let t = parse("Switch 2 \"a\"\r\n  [1] \"b\"[1]\r\n\r\nCa 1 \"b\"\r\n\t[1] \"a\"[1]\r\n");
    assert_eq!(t.links.len(), 1);
}
