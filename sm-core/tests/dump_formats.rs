//! The OpenSM-compatible dumps, checked against what OpenSM 3.3.23 wrote for
//! the same fabric under ibsim (`tests/data/dump/`, see its README), read
//! back by our LFT parser, and cross-checked with `ibdmchk` when installed.

use std::fs;
use std::path::{Path, PathBuf};

use sm_abi::abi_stable::std_types::{ROption, RString, RVec};
use sm_abi::{
    path_sl_box, FabricSnapshot, Lft, Node, NodeKind, PathSl, Port, PortState, Routing, Sl2Vl,
    NONE, NO_ROUTE,
};
use sm_core::dump::ibdmchk::{self, CreditLoops, IbdmchkOptions, IbdmchkReport};
use sm_core::dump::lfts_parse::{self, LftParseError};
use sm_core::dump::{self, DumpInput};

// ---------------------------------------------------------------------------
// Building fabrics by hand
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Builder {
    nodes: Vec<Node>,
    ports: Vec<Port>,
}

impl Builder {
    fn node(&mut self, kind: NodeKind, guid: u64, num_ports: u8, desc: &str) -> u32 {
        let index = self.nodes.len() as u32;
        let first_port = self.ports.len() as u32;
        self.nodes.push(Node {
            guid,
            system_guid: guid,
            kind,
            num_ports,
            first_port,
            description: RString::from(desc),
        });
        for num in 0..=num_ports {
            let (port_guid, state) = match kind {
                // Every port of a switch carries the port-0 GUID.
                NodeKind::Switch => (guid, PortState::Active),
                // A CA's port 0 is a placeholder; port p has GUID node + p,
                // as ibsim numbers them.
                _ if num == 0 => (0, PortState::Down),
                _ => (guid + num as u64, PortState::Active),
            };
            self.ports.push(Port {
                node: index,
                num,
                guid: port_guid,
                lid: 0,
                lmc: 0,
                peer: NONE,
                state,
                op_vls: 8,
                width: 4,
                speed: 1,
            });
        }
        index
    }

    fn switch(&mut self, guid: u64, num_ports: u8, desc: &str, lid: u16) -> u32 {
        let n = self.node(NodeKind::Switch, guid, num_ports, desc);
        self.port_mut(n, 0).lid = lid;
        n
    }

    fn ca(&mut self, guid: u64, desc: &str, lid: u16) -> u32 {
        let n = self.node(NodeKind::Ca, guid, 1, desc);
        self.port_mut(n, 1).lid = lid;
        n
    }

    fn port_mut(&mut self, node: u32, num: u8) -> &mut Port {
        let i = self.nodes[node as usize].first_port + num as u32;
        &mut self.ports[i as usize]
    }

    fn link(&mut self, a: u32, pa: u8, b: u32, pb: u8) {
        let ia = self.nodes[a as usize].first_port + pa as u32;
        let ib = self.nodes[b as usize].first_port + pb as u32;
        self.ports[ia as usize].peer = ib;
        self.ports[ib as usize].peer = ia;
    }

    fn build(self, sm_node: u32) -> FabricSnapshot {
        let lmc = self.ports.iter().map(|p| p.lmc).max().unwrap_or(0);
        let max_lid = self
            .ports
            .iter()
            .filter(|p| p.lid != 0)
            .map(|p| p.lid + (1 << p.lmc) - 1)
            .max()
            .unwrap_or(0);
        FabricSnapshot { nodes: self.nodes.into(), ports: self.ports.into(), lmc, max_lid, sm_node }
    }
}

fn lft(node: u32, ports: &[u8]) -> Lft {
    Lft { node, ports: ports.to_vec().into() }
}

/// Path SLs from a (slid, dlid) table.
struct TableSl {
    stride: usize,
    sl: Vec<u8>,
}

impl PathSl for TableSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        self.sl.get(slid as usize * self.stride + dlid as usize).copied().unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------
// The reference fabric: tests/data/dump/ref-fabric.net, with the LIDs and
// the minhop LFTs OpenSM gave it.
// ---------------------------------------------------------------------------

const SW1: u64 = 0x0002c90000000100;
const SW2: u64 = 0x0002c90000000200;

struct Ref {
    fabric: FabricSnapshot,
    sw1: u32,
    sw2: u32,
}

fn ref_fabric() -> Ref {
    // The LIDs OpenSM gave it.
    ref_fabric_with_lids([2, 3], [1, 4, 5, 6], 0)
}

/// The reference fabric with these switch and CA LIDs and CA LMC.
fn ref_fabric_with_lids(sw_lids: [u16; 2], ca_lids: [u16; 4], lmc: u8) -> Ref {
    let mut b = Builder::default();
    // Node order differs from OpenSM's dump order on purpose.
    let sw1 = b.switch(SW1, 8, "sw1", sw_lids[0]);
    let sw2 = b.switch(SW2, 8, "sw2", sw_lids[1]);
    let h1 = b.ca(0x0002c90000001000, "h1", ca_lids[0]);
    let h2 = b.ca(0x0002c90000002000, "h2", ca_lids[1]);
    let h3 = b.ca(0x0002c90000003000, "h3", ca_lids[2]);
    let h4 = b.ca(0x0002c90000004000, "h4", ca_lids[3]);
    for h in [h1, h2, h3, h4] {
        b.port_mut(h, 1).lmc = lmc;
    }
    b.link(sw1, 1, h1, 1);
    b.link(sw1, 2, h2, 1);
    b.link(sw1, 3, sw2, 3);
    b.link(sw1, 4, sw2, 4);
    b.link(sw2, 1, h3, 1);
    b.link(sw2, 2, h4, 1);
    Ref { fabric: b.build(h1), sw1, sw2 }
}

/// OpenSM minhop's LFTs for the reference fabric, indexed by LID.
const SW1_LFT: [u8; 7] = [NO_ROUTE, 1, 0, 3, 2, 3, 4];
const SW2_LFT: [u8; 7] = [NO_ROUTE, 3, 3, 0, 4, 1, 2];

fn ref_routing(r: &Ref) -> Routing {
    Routing::single_vl(vec![lft(r.sw1, &SW1_LFT), lft(r.sw2, &SW2_LFT)])
}

fn expected_ref_pairs() -> Vec<(u64, Vec<(u16, u8)>)> {
    let pairs = |t: &[u8]| -> Vec<(u16, u8)> {
        t.iter().enumerate().filter(|(_, &p)| p != NO_ROUTE).map(|(l, &p)| (l as u16, p)).collect()
    };
    vec![(SW1, pairs(&SW1_LFT)), (SW2, pairs(&SW2_LFT))]
}

// ---------------------------------------------------------------------------
// A ring of four switches with one CA each. Port 1 holds the CA, port 2
// leads clockwise (to the next switch's port 3), port 3 counter-clockwise.
// Switch i has LID 1 + i, its CA LID 5 + i.
// ---------------------------------------------------------------------------

struct Ring {
    fabric: FabricSnapshot,
    switches: [u32; 4],
    cas: [u32; 4],
}

fn ring() -> Ring {
    let mut b = Builder::default();
    let mut switches = [0; 4];
    let mut cas = [0; 4];
    for i in 0..4u16 {
        switches[i as usize] =
            b.switch(0x0002c90000010000 + i as u64, 4, &format!("ring-sw{i}"), 1 + i);
        cas[i as usize] = b.ca(0x0002c90000020000 + 0x100 * i as u64, &format!("ring-h{i}"), 5 + i);
        b.link(switches[i as usize], 1, cas[i as usize], 1);
    }
    for i in 0..4 {
        b.link(switches[i], 2, switches[(i + 1) % 4], 3);
    }
    Ring { fabric: b.build(cas[0]), switches, cas }
}

/// LFTs of the ring where switch `i` reaches switch `j`'s LIDs through
/// `port(i, j)` (only asked for i != j).
fn ring_lfts(r: &Ring, port: impl Fn(usize, usize) -> u8) -> Vec<Lft> {
    (0..4)
        .map(|i| {
            let mut t = vec![NO_ROUTE; 9];
            for j in 0..4 {
                let (sw_lid, ca_lid) = (1 + j, 5 + j);
                if i == j {
                    t[sw_lid] = 0;
                    t[ca_lid] = 1;
                } else {
                    t[sw_lid] = port(i, j);
                    t[ca_lid] = port(i, j);
                }
            }
            lft(r.switches[i], &t)
        })
        .collect()
}

/// Everything goes clockwise: the classic credit loop.
fn ring_clockwise(r: &Ring) -> Routing {
    Routing::single_vl(ring_lfts(r, |_, _| 2))
}

/// Routed as if the link sw3–sw0 did not exist: no cycle.
fn ring_as_line(r: &Ring) -> Routing {
    Routing::single_vl(ring_lfts(r, |i, j| if j > i { 2 } else { 3 }))
}

/// Clockwise, but paths that cross the dateline sw3→sw0 use SL 1, and SL 1
/// moves to VL 1 on the dateline link and stays there on sw0 and sw1 (no
/// clockwise path goes further). With `dateline_vls` false, SL n stays on VL n.
fn ring_clockwise_dateline(r: &Ring, dateline_vls: bool) -> Routing {
    let mut routing = ring_clockwise(r);
    let switch_of = |lid: usize| if lid <= 4 { lid - 1 } else { lid - 5 };
    let stride = 9;
    let mut sl = vec![0u8; stride * stride];
    for slid in 1..=8 {
        for dlid in 1..=8 {
            if switch_of(dlid) < switch_of(slid) {
                sl[slid * stride + dlid] = 1;
            }
        }
    }
    routing.path_sl = path_sl_box(TableSl { stride, sl });
    if dateline_vls {
        let mut tables = Vec::new();
        for (i, &sw) in r.switches.iter().enumerate() {
            for in_port in 0..=4u8 {
                for out_port in 1..=3u8 {
                    let mut vl = [0u8; 16];
                    let crossed = (i == 3 && out_port == 2) || ((i == 0 || i == 1) && in_port == 3);
                    vl[1] = u8::from(crossed);
                    tables.push(Sl2Vl { node: sw, in_port, out_port, vl });
                }
            }
        }
        for &ca in &r.cas {
            let mut vl = [0u8; 16];
            vl[1] = 1;
            tables.push(Sl2Vl { node: ca, in_port: 0, out_port: 1, vl });
        }
        routing.sl2vl = RVec::from(tables);
        routing.vls_used = 2;
    }
    routing
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dump").join(rel)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Write all dumps into a fresh directory. With `SMCORE_DUMP_KEEP=<dir>` in
/// the environment they are also copied to `<dir>/<label>/`, to feed them to
/// OpenSM or ibdmchk by hand.
fn write_dumps(label: &str, fabric: &FabricSnapshot, routing: &Routing) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    let files = dump::write_all(dir.path(), fabric, routing).expect("dumps written");
    assert_eq!(files.len(), 8);
    for f in &files {
        assert!(f.is_file(), "{} missing", f.display());
    }
    if let Some(keep) = std::env::var_os("SMCORE_DUMP_KEEP") {
        let keep = Path::new(&keep).join(label);
        fs::create_dir_all(&keep).expect("keep directory");
        for f in &files {
            fs::copy(f, keep.join(f.file_name().expect("file name"))).expect("copied");
        }
    }
    dir
}

fn assert_same_text(ours: &str, opensm: &str, what: &str) {
    if ours != opensm {
        let first = ours.lines().zip(opensm.lines()).position(|(a, b)| a != b);
        panic!(
            "{what} differs from OpenSM's (first differing line {:?})\n--- ours ---\n{ours}\n--- OpenSM ---\n{opensm}",
            first.map(|l| l + 1)
        );
    }
}

/// Run ibdmchk, or say why not and return `None`.
fn ibdmchk_on(dir: &Path, opts: &IbdmchkOptions) -> IbdmchkReport {
    // A cross-check that cannot run has checked nothing: fail, naming the
    // package (scripts/test.sh and CI install it).
    smcore_test_support::require_tool("ibdmchk");
    ibdmchk::run_ibdmchk(dir, opts).expect("ibdmchk runs")
}

// ---------------------------------------------------------------------------
// Formats against OpenSM's own output
// ---------------------------------------------------------------------------

#[test]
fn dumps_match_opensm_minhop_reference() {
    let r = ref_fabric();
    let routing = ref_routing(&r);
    let dir = write_dumps("ref-minhop", &r.fabric, &routing);
    let ours = |name: &str| read(&dir.path().join(name));
    let opensm = |name: &str| read(&data(&format!("opensm-minhop/{name}")));

    for name in [dump::LFTS_FILE, dump::LID_MATRIX_FILE, dump::FDBS_FILE, dump::MCFDBS_FILE] {
        assert_same_text(&ours(name), &opensm(name), name);
    }
    // ibsim reports revision 0xA1; the snapshot has no revision.
    assert_same_text(
        &ours(dump::SUBNET_FILE),
        &opensm(dump::SUBNET_FILE).replace("Rev:000000A1", "Rev:00000000"),
        dump::SUBNET_FILE,
    );
    // OpenSM writes guid2lid in hash-table order: compare the records, and
    // check the blank line that ends each one.
    let records = |t: &str| {
        let mut v: Vec<String> = t.lines().filter(|l| !l.is_empty()).map(String::from).collect();
        v.sort();
        v
    };
    let g = ours(dump::GUID2LID_FILE);
    assert_eq!(records(&g), records(&opensm(dump::GUID2LID_FILE)));
    assert!(g.lines().skip(1).step_by(2).all(str::is_empty), "{g}");
}

#[test]
fn lmc_dumps_match_opensm_lash_lmc1_reference() {
    // OpenSM with -l 1: CA base LIDs aligned to 2, switches (LMC 0) packed
    // in between, LID 1 left unused.
    let r = ref_fabric_with_lids([4, 5], [2, 6, 8, 10], 1);
    // Route with the LFTs OpenSM's lash computed, read back from its dump.
    let parsed = lfts_parse::parse_lfts_file(&data("opensm-lash-qos-lmc1/opensm-lfts.dump"))
        .expect("parsed");
    let lfts = parsed
        .iter()
        .map(|(guid, pairs)| {
            let node = r.fabric.nodes.iter().position(|n| n.guid == *guid).expect("switch");
            let mut t = vec![NO_ROUTE; r.fabric.max_lid as usize + 1];
            for &(lid, port) in pairs {
                t[lid as usize] = port;
            }
            lft(node as u32, &t)
        })
        .collect();
    let dir = write_dumps("ref-lash-lmc1", &r.fabric, &Routing::single_vl(lfts));
    for name in [dump::LFTS_FILE, dump::LID_MATRIX_FILE, dump::FDBS_FILE] {
        assert_same_text(
            &read(&dir.path().join(name)),
            &read(&data(&format!("opensm-lash-qos-lmc1/{name}"))),
            name,
        );
    }
    let records = |t: &str| {
        let mut v: Vec<String> = t.lines().filter(|l| !l.is_empty()).map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(
        records(&read(&dir.path().join(dump::GUID2LID_FILE))),
        records(&read(&data("opensm-lash-qos-lmc1/guid2lid")))
    );
}

#[test]
fn sl2vl_matches_opensm_lash_qos_reference() {
    let r = ref_fabric();
    let mut routing = ref_routing(&r);
    // OpenSM's default QoS SL2VL with 8 data VLs: SL n on VL n mod 8.
    let qos: [u8; 16] = std::array::from_fn(|sl| (sl % 8) as u8);
    let mut tables = Vec::new();
    for sw in [r.sw1, r.sw2] {
        for in_port in 0..=8 {
            for out_port in 1..=4 {
                tables.push(Sl2Vl { node: sw, in_port, out_port, vl: qos });
            }
        }
    }
    for (node, n) in r.fabric.nodes.iter().enumerate() {
        if n.kind == NodeKind::Ca {
            tables.push(Sl2Vl { node: node as u32, in_port: 0, out_port: 1, vl: qos });
        }
    }
    routing.sl2vl = tables.into();

    let mut out = Vec::new();
    dump::write_sl2vl(&mut out, &DumpInput { fabric: &r.fabric, routing: &routing })
        .expect("written");
    let ours = String::from_utf8(out).expect("ASCII");
    assert_same_text(&ours, &read(&data("opensm-lash-qos/opensm-sl2vl.dump")), dump::SL2VL_FILE);
}

#[test]
fn sl2vl_without_tables_is_the_identity() {
    let r = ref_fabric();
    let routing = ref_routing(&r);
    let mut out = Vec::new();
    dump::write_sl2vl(&mut out, &DumpInput { fabric: &r.fabric, routing: &routing })
        .expect("written");
    let text = String::from_utf8(out).expect("ASCII");
    let identity = ": 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15";
    let rows: Vec<&str> =
        text.lines().filter(|l| !l.starts_with('#') && l.contains(" : ")).collect();
    // Two switches × 4 linked out ports × 9 in ports, plus 4 CA ports.
    assert_eq!(rows.len(), 2 * 4 * 9 + 4);
    assert!(rows.iter().all(|l| l.ends_with(identity)), "{text}");
    assert!(text.starts_with("Switch 0x0002c90000000100, base LID 2, \"sw1\"\n"), "{text}");
    assert!(text.contains("\nChannel Adapter 0x0002c90000001001, base LID 1, \"h1\"\n"), "{text}");
}

#[test]
fn path_sl_file_lists_source_node_dlid_sl() {
    let r = ring();
    let input = |routing: &Routing| {
        let mut out = Vec::new();
        dump::write_path_sl(&mut out, &DumpInput { fabric: &r.fabric, routing }).expect("written");
        String::from_utf8(out).expect("ASCII")
    };
    // Every path on SL 0 needs no file content: ibdmchk's default.
    assert_eq!(input(&ring_clockwise(&r)), "");

    let text = input(&ring_clockwise_dateline(&r, true));
    let lines: Vec<&str> = text.lines().collect();
    // 8 nodes, each to the 7 LIDs it does not own.
    assert_eq!(lines.len(), 8 * 7);
    // ring-h3 (node GUID ...20300) to ring-h0 (LID 5) crosses the dateline.
    assert!(lines.contains(&"0x0002c90000020300 5 1"), "{text}");
    assert!(lines.contains(&"0x0002c90000020000 8 0"), "{text}");
    // Switch sources are listed too, for ibdmchk -a.
    assert!(lines.contains(&"0x0002c90000010003 1 1"), "{text}");
}

#[test]
fn lid_matrix_and_fdbs_report_non_minimal_routes() {
    let r = ring();
    let routing = ring_clockwise(&r);
    let dir = write_dumps("ring-clockwise", &r.fabric, &routing);
    let fdbs = read(&dir.path().join(dump::FDBS_FILE));
    // ring-sw0 to ring-sw3 (LID 4) clockwise is 3 hops; port 3 does it in 1.
    let sw0 = fdbs.split("dump_ucast_routes: Switch ").nth(1).expect("first switch");
    assert!(sw0.starts_with("0x0002c90000010000\n"), "{fdbs}");
    assert!(
        sw0.contains("\n0x0004 : 002  : 03   : No 1 hop path possible via port 3!\n"),
        "{fdbs}"
    );
    assert!(
        sw0.contains("\n0x0008 : 002  : 04   : No 2 hop path possible via port 3!\n"),
        "{fdbs}"
    );
    assert!(sw0.contains("\n0x0005 : 001  : 01   : yes\n"), "{fdbs}");

    let matrix = read(&dir.path().join(dump::LID_MATRIX_FILE));
    let expected_sw0 = "Switch: guid 0x0002c90000010000\n\
                        0x0001: 00 ff 02 02 ff # portguid 0x0002c90000010000\n\
                        0x0002: 01 ff 01 03 ff # portguid 0x0002c90000010001\n\
                        0x0003: 02 ff 02 02 ff # portguid 0x0002c90000010002\n\
                        0x0004: 01 ff 03 01 ff # portguid 0x0002c90000010003\n";
    assert!(matrix.starts_with(expected_sw0), "{matrix}");
}

#[test]
fn invalid_routing_is_an_error_naming_the_file() {
    let r = ref_fabric();
    // An LFT for a CA (node 2 is h1).
    let routing = Routing::single_vl(vec![lft(2, &SW1_LFT)]);
    let dir = tempfile::tempdir().expect("temporary directory");
    match dump::write_all(dir.path(), &r.fabric, &routing) {
        Err(e @ dump::DumpError::Write { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("opensm-lfts.dump"), "{msg}");
            assert!(msg.contains("not a switch"), "{msg}");
        }
        other => panic!("expected a write error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Reading LFTs back
// ---------------------------------------------------------------------------

#[test]
fn lft_parser_reads_opensm_dump_and_ibroute_output() {
    let expected = expected_ref_pairs();
    let file = data("opensm-minhop/opensm-lfts.dump");
    assert_eq!(lfts_parse::parse_lfts_file(&file).expect("parsed"), expected);

    // ibroute of both switches, concatenated as dump_lfts.sh does.
    let both = read(&data("opensm-minhop/ibroute.2")) + &read(&data("opensm-minhop/ibroute.3"));
    assert_eq!(lfts_parse::parse_lfts(&both, "ibroute.2+3").expect("parsed"), expected);

    // -a adds the invalid LID 0 entry, -n drops the destination names, -D
    // names the switch by directed route.
    assert_eq!(
        lfts_parse::parse_lfts_file(&data("opensm-minhop/ibroute-a.2")).expect("parsed"),
        expected[..1]
    );
    assert_eq!(
        lfts_parse::parse_lfts_file(&data("opensm-minhop/ibroute-n.3")).expect("parsed"),
        expected[1..]
    );
    assert_eq!(
        lfts_parse::parse_lfts_file(&data("opensm-minhop/ibroute-dr-0-1")).expect("parsed"),
        expected[..1]
    );
    let dr = lfts_parse::parse_lfts_file_detailed(&data("opensm-minhop/ibroute-dr-0-1-3"))
        .expect("parsed");
    assert_eq!((dr[0].guid, dr[0].lid, dr[0].description.as_str()), (SW2, None, "sw2"));
    assert_eq!(dr[0].pairs(), expected[1].1);

    let detailed = lfts_parse::parse_lfts_file_detailed(&file).expect("parsed");
    assert_eq!((detailed[0].lid, detailed[0].description.as_str()), (Some(2), "sw1"));
    assert_eq!(detailed[0].entries[0].port_guid, Some(0x0002c90000001001));
}

#[test]
fn lft_parser_reads_lmc_paths() {
    // LMC 1 (lash): the second LID of each CA is "path #2 out of 2".
    let sw = lfts_parse::parse_lfts_file_detailed(&data("opensm-lash-qos-lmc1/ibroute.4"))
        .expect("parsed");
    assert_eq!(sw.len(), 1);
    let lids: Vec<u16> = sw[0].entries.iter().map(|e| e.lid).collect();
    assert_eq!(lids, (2..=11).collect::<Vec<u16>>());
    let h1_path2 = sw[0].entries.iter().find(|e| e.lid == 3).expect("LID 3");
    assert_eq!((h1_path2.port, h1_path2.port_guid), (1, Some(0x0002c90000001001)));
    let dump = lfts_parse::parse_lfts_file(&data("opensm-lash-qos-lmc1/opensm-lfts.dump"))
        .expect("parsed");
    assert_eq!(dump[0].1, sw[0].pairs());
}

#[test]
fn lft_dump_round_trips_through_the_parser() {
    let check = |fabric: &FabricSnapshot, routing: &Routing| {
        let mut out = Vec::new();
        dump::write_lfts(&mut out, &DumpInput { fabric, routing }).expect("written");
        let text = String::from_utf8(out).expect("ASCII");
        let parsed = lfts_parse::parse_lfts(&text, "ours").expect("parsed");
        let mut expected: Vec<(u64, Vec<(u16, u8)>)> = routing
            .lfts
            .iter()
            .map(|l| {
                let guid = fabric.nodes[l.node as usize].guid;
                let pairs = l
                    .ports
                    .iter()
                    .enumerate()
                    .filter(|(_, &p)| p != NO_ROUTE)
                    .map(|(lid, &p)| (lid as u16, p))
                    .collect();
                (guid, pairs)
            })
            .collect();
        let mut parsed_sorted = parsed;
        parsed_sorted.sort();
        expected.sort();
        assert_eq!(parsed_sorted, expected);
    };
    let r = ref_fabric();
    check(&r.fabric, &ref_routing(&r));
    let ring = ring();
    check(&ring.fabric, &ring_clockwise(&ring));
    check(&ring.fabric, &ring_as_line(&ring));
}

#[test]
fn lft_parser_errors_name_file_and_line() {
    let syntax = |text: &str| match lfts_parse::parse_lfts(text, "lfts.dump") {
        Err(e @ LftParseError::Syntax { .. }) => e.to_string(),
        other => panic!("expected a syntax error, got {other:?}"),
    };
    let e = syntax("0x0001 001 # Switch portguid 0x1: 'a'\n");
    assert!(e.starts_with("lfts.dump:1: LFT entry before any"), "{e}");

    let fdbs = read(&data("opensm-minhop/opensm.fdbs"));
    let e = syntax(&fdbs);
    assert!(e.starts_with("lfts.dump:1: unrecognised line (this looks like opensm.fdbs"), "{e}");

    let e = syntax("Unicast lids [0-2] of switch Lid 2 guid 0x2 ('s'):\n0x0001 001\n0x0001 002\n");
    assert!(
        e.starts_with(
            "lfts.dump:3: LID 0x0001 of switch 0x0000000000000002 already has an entry at line 2"
        ),
        "{e}"
    );

    let e = syntax("Unicast lids [0-2] of switch Lid 2 guid 0x2 ('s'):\n\n0x0001 abc\n");
    assert!(e.starts_with("lfts.dump:3: cannot parse the output port"), "{e}");

    let e = syntax("Unicast lids [0-2] of switch Lid 2 guid 0x2 ('s'):\nUnicast lids [0-2] of switch Lid 3 guid 0x2 ('t'):\n");
    assert!(
        e.starts_with("lfts.dump:2: switch 0x0000000000000002 was already listed at line 1"),
        "{e}"
    );

    match lfts_parse::parse_lfts_file(Path::new("/nonexistent/opensm-lfts.dump")) {
        Err(e @ LftParseError::Io { .. }) => {
            assert!(e.to_string().starts_with("/nonexistent/opensm-lfts.dump: "))
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// ibdmchk: its captured verdicts, then live runs on our dumps
// ---------------------------------------------------------------------------

#[test]
fn ibdmchk_reference_outputs_parse() {
    let clean = ibdmchk::parse_ibdmchk_output(&read(&data("ibdmchk/ref-minhop-clean.out")));
    assert!(clean.is_clean(), "{clean:?}");
    assert_eq!((clean.nodes, clean.ca_paths_scanned), (Some(6), Some(12)));

    let lash = ibdmchk::parse_ibdmchk_output(&read(&data("ibdmchk/ref-lash-qos-clean.out")));
    assert!(lash.is_clean(), "{lash:?}");
    assert_eq!(lash.sls_vls, Some((1, 8)));

    let torus =
        ibdmchk::parse_ibdmchk_output(&read(&data("ibdmchk/torus-4x4-minhop-credit-loop.out")));
    assert!(torus.routes_ok() && torus.has_credit_loop(), "{torus:?}");
    let CreditLoops::Found(trace) = &torus.credit_loops else { unreachable!() };
    assert_eq!(trace.first(), Some(&"S0002c90000020003/U1/P2 VL: 0".to_string()));

    let broken = ibdmchk::parse_ibdmchk_output(&read(&data("ibdmchk/unreachable.out")));
    assert!(!broken.routes_ok());
    assert_eq!(broken.missing_paths, Some((2, 12)));
    assert_eq!(broken.credit_loops, CreditLoops::NotChecked);
}

#[test]
fn ibdmchk_accepts_the_reference_routing() {
    let r = ref_fabric();
    let dir = write_dumps("ref-minhop", &r.fabric, &ref_routing(&r));
    let report = ibdmchk_on(dir.path(), &IbdmchkOptions::default());
    assert!(report.is_clean(), "{}", report.output);
    assert_eq!(
        (report.nodes, report.fdb_entries, report.ca_paths_scanned),
        (Some(6), Some((12, 2)), Some(12))
    );

    // Switch LIDs too.
    let all = IbdmchkOptions { all_paths: true, ..Default::default() };
    let report = ibdmchk_on(dir.path(), &all);
    assert!(report.is_clean(), "{}", report.output);
}

#[test]
fn ibdmchk_flags_an_unreachable_destination() {
    let r = ref_fabric();
    let mut sw1 = SW1_LFT;
    sw1[6] = NO_ROUTE; // sw1 forgets h4
    let routing = Routing::single_vl(vec![lft(r.sw1, &sw1), lft(r.sw2, &SW2_LFT)]);
    let dir = write_dumps("ref-unreachable", &r.fabric, &routing);
    assert!(read(&dir.path().join(dump::FDBS_FILE)).contains("\n0x0006 : UNREACHABLE\n"));
    let report = ibdmchk_on(dir.path(), &IbdmchkOptions::default());
    assert!(!report.routes_ok(), "{}", report.output);
    assert_eq!(report.missing_paths, Some((2, 12)), "{}", report.output);
    let to_h4 = "S0002c90000004000/U1/1";
    assert!(report.unreachable.iter().all(|(_, to)| to == to_h4), "{:?}", report.unreachable);
    assert_eq!(report.credit_loops, CreditLoops::NotChecked);
}

#[test]
fn ibdmchk_finds_the_credit_loop_of_a_clockwise_ring() {
    let r = ring();
    let dir = write_dumps("ring-clockwise", &r.fabric, &ring_clockwise(&r));
    let report = ibdmchk_on(dir.path(), &IbdmchkOptions::default());
    assert!(report.routes_ok(), "{}", report.output);
    assert!(report.has_credit_loop(), "{}", report.output);
    assert!(!report.is_clean());
}

#[test]
fn ibdmchk_accepts_the_ring_routed_as_a_line() {
    let r = ring();
    let dir = write_dumps("ring-line", &r.fabric, &ring_as_line(&r));
    let report = ibdmchk_on(dir.path(), &IbdmchkOptions::default());
    assert!(report.is_clean(), "{}", report.output);
    assert_eq!(report.ca_paths_scanned, Some(12));
}

#[test]
fn ibdmchk_reads_our_path_sls_and_sl2vl_tables() {
    let r = ring();
    // Same clockwise LFTs; the dateline SL/VL scheme breaks the cycle...
    let dir = write_dumps("ring-dateline", &r.fabric, &ring_clockwise_dateline(&r, true));
    let report = ibdmchk_on(dir.path(), &IbdmchkOptions::default());
    assert!(report.is_clean(), "{}", report.output);
    assert_eq!(report.sls_vls, Some((2, 2)), "{}", report.output);

    // ...which ibdmchk only sees through both files: without the SL2VL
    // tables SL 1 stays on VL 1 and loops there.
    let dir = write_dumps("ring-dateline-sls-only", &r.fabric, &ring_clockwise_dateline(&r, false));
    let report = ibdmchk_on(dir.path(), &IbdmchkOptions::default());
    assert!(report.has_credit_loop(), "{}", report.output);
    let CreditLoops::Found(trace) = &report.credit_loops else { unreachable!() };
    assert!(trace.iter().all(|ch| ch.ends_with("VL: 1")), "{trace:?}");

    // And without the path-SL file every path is on SL 0: the plain loop.
    let dir = write_dumps("ring-dateline", &r.fabric, &ring_clockwise_dateline(&r, true));
    let opts = IbdmchkOptions { path_sl: false, ..Default::default() };
    let report = ibdmchk_on(dir.path(), &opts);
    assert!(report.has_credit_loop(), "{}", report.output);
}
