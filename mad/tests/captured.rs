//! Known-byte tests: real MADs captured from ibsim, OpenSM and
//! infiniband-diags by tests/data/capture.sh. Each fixture keeps what the
//! tool printed from the very same bytes; the tests check that our parse
//! agrees with it and that emitting the parsed values gives the bytes back.

use std::path::Path;

use sm_mad::forwarding::{LftPacket, LftRepr, MftModifier, MftPacket, MftRepr, NO_ROUTE};
use sm_mad::mad::{attr, class, method};
use sm_mad::notice::{self, Details};
use sm_mad::port_info::{PhysState, PortState};
use sm_mad::smp::{Direction, Routing};
use sm_mad::vlarb::{VlArbBlock, VlArbEntry, VlArbModifier};
use sm_mad::*;

struct Fixture {
    name: String,
    bytes: Vec<u8>,
    comments: Vec<String>,
}

fn load(name: &str) -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut bytes = Vec::new();
    let mut comments = Vec::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix('#') {
            comments.push(comment.trim().to_string());
            continue;
        }
        for word in line.split_whitespace() {
            assert_eq!(word.len(), 4, "{name}: bad hex word {word:?}");
            let value = u16::from_str_radix(word, 16).unwrap();
            bytes.extend_from_slice(&value.to_be_bytes());
        }
    }
    Fixture {
        name: name.to_string(),
        bytes,
        comments,
    }
}

impl Fixture {
    /// The value the tool printed for `key` ("Key:.....value" in
    /// smpquery's style, "key.....value" in saquery's).
    fn printed(&self, key: &str) -> &str {
        self.comments
            .iter()
            .find_map(|line| {
                let rest = line.strip_prefix(key)?;
                rest.starts_with([':', '.'])
                    .then(|| rest.trim_start_matches([':', '.']).trim())
            })
            .unwrap_or_else(|| panic!("{}: tool printed no {key}", self.name))
    }

    fn printed_num(&self, key: &str) -> u64 {
        num(self.printed(key))
    }

    fn smp(&self) -> smp::Packet<&[u8]> {
        assert_eq!(self.bytes.len(), MAD_LEN, "{}", self.name);
        smp::Packet::new_checked(&self.bytes[..]).unwrap()
    }

    fn smp_repr(&self) -> SmpRepr {
        SmpRepr::parse(&self.smp()).unwrap()
    }
}

fn num(text: &str) -> u64 {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => text
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {text:?}")),
    }
}

/// smpquery prints MTUs in bytes.
fn mtu_code(bytes: u64) -> u8 {
    (1..=5)
        .find(|&code| port_info::mtu::bytes(code) == Some(bytes as u16))
        .unwrap()
}

/// smpquery prints VLCap/OperVLs as "VL0-7".
fn vl_code(text: &str) -> u8 {
    match text {
        "VL0" => 1,
        "VL0-1" => 2,
        "VL0-3" => 3,
        "VL0-7" => 4,
        "VL0-14" => 5,
        other => panic!("VL range {other:?}"),
    }
}

/// Re-emitting the parsed SMP must give the captured bytes, except path
/// entries beyond the hop count, which parsing drops on purpose.
fn assert_smp_reemits(fixture: &Fixture) {
    let repr = fixture.smp_repr();
    let mut out = [0u8; MAD_LEN];
    repr.emit(&mut smp::Packet::new_unchecked(&mut out[..]));
    let hops = repr.directed().map_or(0, |dr| usize::from(dr.hop_count));
    let (captured, emitted) = (&fixture.bytes, &out);
    assert_eq!(captured[..128], emitted[..128], "{}", fixture.name);
    if repr.directed().is_some() {
        for base in [128, 192] {
            assert_eq!(
                captured[base + 1..=base + hops],
                emitted[base + 1..=base + hops],
                "{}",
                fixture.name
            );
        }
    } else {
        assert!(emitted[128..].iter().all(|&b| b == 0));
    }
}

fn node_info_checks(fixture: &Fixture) -> NodeInfoRepr {
    let smp = fixture.smp();
    assert_eq!(smp.attribute_id(), attr::NODE_INFO);
    let info = NodeInfoRepr::parse(&NodeInfoPacket::new_checked(smp.data()).unwrap()).unwrap();
    assert_eq!(
        u64::from(info.base_version),
        fixture.printed_num("BaseVers")
    );
    assert_eq!(
        u64::from(info.class_version),
        fixture.printed_num("ClassVers")
    );
    let node_type = match fixture.printed("NodeType") {
        "Switch" => NodeType::Switch,
        "Channel Adapter" => NodeType::Ca,
        other => panic!("{other}"),
    };
    assert_eq!(info.node_type, node_type);
    assert_eq!(u64::from(info.num_ports), fixture.printed_num("NumPorts"));
    assert_eq!(info.system_image_guid, fixture.printed_num("SystemGuid"));
    assert_eq!(info.node_guid, fixture.printed_num("Guid"));
    assert_eq!(info.port_guid, fixture.printed_num("PortGuid"));
    assert_eq!(
        u64::from(info.partition_cap),
        fixture.printed_num("PartCap")
    );
    assert_eq!(u64::from(info.device_id), fixture.printed_num("DevId"));
    assert_eq!(u64::from(info.revision), fixture.printed_num("Revision"));
    assert_eq!(
        u64::from(info.local_port_num),
        fixture.printed_num("LocalPort")
    );
    assert_eq!(u64::from(info.vendor_id), fixture.printed_num("VendorId"));
    let mut data = [0u8; 64];
    info.emit(&mut NodeInfoPacket::new_unchecked(&mut data[..]));
    assert_eq!(data[..], smp.data()[..], "{}", fixture.name);
    assert_smp_reemits(fixture);
    info
}

#[test]
fn nodeinfo_directed_route_zero_hops() {
    let f = load("nodeinfo_sw1_dr");
    let repr = f.smp_repr();
    assert_eq!(repr.method, method::GET_RESP);
    assert_eq!(repr.status, 0);
    let dr = repr.directed().unwrap();
    assert_eq!(dr.direction, Direction::Inbound);
    assert_eq!((dr.hop_pointer, dr.hop_count), (0, 0));
    assert_eq!(
        (dr.dr_slid, dr.dr_dlid),
        (smp::PERMISSIVE_LID, smp::PERMISSIVE_LID)
    );
    assert!(dr.initial_ports().is_empty());
    let info = node_info_checks(&f);
    assert_eq!(info.node_guid, 0x0002_c900_0000_0100);
    assert_eq!(info.num_ports, 8);
}

#[test]
fn nodeinfo_directed_route_one_hop() {
    let f = load("nodeinfo_sw2_dr");
    let repr = f.smp_repr();
    let dr = repr.directed().unwrap();
    assert_eq!(dr.direction, Direction::Inbound);
    assert_eq!(dr.hop_count, 1);
    assert_eq!(dr.initial_ports(), &[3]);
    let info = node_info_checks(&f);
    assert_eq!(info.node_type, NodeType::Switch);
    assert_eq!(info.local_port_num, 3);
}

#[test]
fn nodeinfo_directed_route_two_hops_to_a_ca() {
    let f = load("nodeinfo_h3_dr");
    let repr = f.smp_repr();
    let dr = repr.directed().unwrap();
    assert_eq!(dr.hop_count, 2);
    assert_eq!(dr.hop_pointer, 0);
    assert_eq!(dr.initial_ports(), &[3, 1]);
    // ibsim writes the request's path back as the return path.
    assert_eq!(dr.return_ports(), &[3, 1]);
    let info = node_info_checks(&f);
    assert_eq!(info.node_type, NodeType::Ca);
    assert_eq!(info.port_guid, 0x0002_c900_0000_3001);

    // The request smpquery sent is what our builder makes, bar the TID.
    let request =
        SmpRepr::directed_get(repr.transaction_id, attr::NODE_INFO, 0, 0, &[3, 1]).unwrap();
    let mut answer = request.response(0, repr.data);
    if let Routing::Directed(route) = &mut answer.routing {
        route.return_path = dr.return_path;
    }
    assert_eq!(answer, repr);
}

fn port_info_checks(f: &Fixture) -> PortInfoRepr {
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::PORT_INFO);
    let pi = PortInfoRepr::parse(&PortInfoPacket::new_checked(smp.data()).unwrap()).unwrap();
    assert_eq!(pi.gid_prefix, f.printed_num("GidPrefix"));
    assert_eq!(u64::from(pi.lid), f.printed_num("Lid"));
    assert_eq!(u64::from(pi.master_sm_lid), f.printed_num("SMLid"));
    assert_eq!(u64::from(pi.capability_mask), f.printed_num("CapMask"));
    assert_eq!(u64::from(pi.diag_code), f.printed_num("DiagCode"));
    assert_eq!(
        u64::from(pi.m_key_lease_period),
        f.printed_num("MkeyLeasePeriod")
    );
    assert_eq!(u64::from(pi.local_port_num), f.printed_num("LocalPort"));
    assert_eq!(f.printed("LinkWidthEnabled"), "4X");
    assert_eq!(pi.link_width_enabled, port_info::link_width::W4X);
    assert_eq!(f.printed("LinkWidthActive"), "4X");
    assert_eq!(pi.link_width_active, port_info::link_width::W4X);
    assert_eq!(
        f.printed("LinkWidthSupported"),
        "1X or 4X or 8X or 12X or 2X"
    );
    assert_eq!(pi.link_width_supported, 0x1f);
    assert_eq!(
        f.printed("LinkSpeedSupported"),
        "2.5 Gbps or 5.0 Gbps or 10.0 Gbps"
    );
    assert_eq!(pi.link_speed_supported, 0x7);
    assert_eq!(f.printed("LinkSpeedActive"), "2.5 Gbps");
    assert_eq!(pi.link_speed_active, port_info::link_speed::SDR);
    assert_eq!(f.printed("LinkSpeedEnabled"), "2.5 Gbps");
    assert_eq!(pi.link_speed_enabled, port_info::link_speed::SDR);
    let state = match f.printed("LinkState") {
        "Down" => PortState::Down,
        "Initialize" => PortState::Init,
        "Armed" => PortState::Armed,
        "Active" => PortState::Active,
        other => panic!("{other}"),
    };
    assert_eq!(pi.port_state, state);
    assert_eq!(f.printed("PhysLinkState"), "LinkUp");
    assert_eq!(pi.port_physical_state, PhysState::LinkUp);
    assert_eq!(f.printed("LinkDownDefState"), "Polling");
    assert_eq!(pi.link_down_default_state, 2);
    assert_eq!(
        u64::from(pi.m_key_protect_bits),
        f.printed_num("ProtectBits")
    );
    assert_eq!(u64::from(pi.lmc), f.printed_num("LMC"));
    assert_eq!(pi.neighbor_mtu, mtu_code(f.printed_num("NeighborMTU")));
    assert_eq!(u64::from(pi.master_sm_sl), f.printed_num("SMSL"));
    assert_eq!(pi.vl_cap, vl_code(f.printed("VLCap")));
    assert_eq!(u64::from(pi.init_type), f.printed_num("InitType"));
    assert_eq!(u64::from(pi.vl_high_limit), f.printed_num("VLHighLimit"));
    assert_eq!(
        u64::from(pi.vl_arbitration_high_cap),
        f.printed_num("VLArbHighCap")
    );
    assert_eq!(
        u64::from(pi.vl_arbitration_low_cap),
        f.printed_num("VLArbLowCap")
    );
    assert_eq!(u64::from(pi.init_type_reply), f.printed_num("InitReply"));
    assert_eq!(pi.mtu_cap, mtu_code(f.printed_num("MtuCap")));
    assert_eq!(u64::from(pi.vl_stall_count), f.printed_num("VLStallCount"));
    assert_eq!(u64::from(pi.hoq_life), f.printed_num("HoqLife"));
    assert_eq!(pi.operational_vls, vl_code(f.printed("OperVLs")));
    assert_eq!(
        u64::from(pi.partition_enforcement_inbound),
        f.printed_num("PartEnforceInb")
    );
    assert_eq!(
        u64::from(pi.partition_enforcement_outbound),
        f.printed_num("PartEnforceOutb")
    );
    assert_eq!(
        u64::from(pi.filter_raw_inbound),
        f.printed_num("FilterRawInb")
    );
    assert_eq!(
        u64::from(pi.filter_raw_outbound),
        f.printed_num("FilterRawOutb")
    );
    assert_eq!(
        u64::from(pi.m_key_violations),
        f.printed_num("MkeyViolations")
    );
    assert_eq!(
        u64::from(pi.p_key_violations),
        f.printed_num("PkeyViolations")
    );
    assert_eq!(
        u64::from(pi.q_key_violations),
        f.printed_num("QkeyViolations")
    );
    assert_eq!(u64::from(pi.guid_cap), f.printed_num("GuidCap"));
    assert_eq!(
        u64::from(pi.client_reregister),
        f.printed_num("ClientReregister")
    );
    assert_eq!(
        u64::from(pi.multicast_pkey_trap_suppression),
        f.printed_num("McastPkeyTrapSuppressionEnabled")
    );
    assert_eq!(u64::from(pi.subnet_timeout), f.printed_num("SubnetTimeout"));
    assert_eq!(u64::from(pi.resp_time_value), f.printed_num("RespTimeVal"));
    assert_eq!(
        u64::from(pi.local_phy_errors),
        f.printed_num("LocalPhysErr")
    );
    assert_eq!(u64::from(pi.overrun_errors), f.printed_num("OverrunErr"));
    assert_eq!(
        u64::from(pi.max_credit_hint),
        f.printed_num("MaxCreditHint")
    );
    assert_eq!(
        u64::from(pi.link_round_trip_latency),
        f.printed_num("RoundTrip")
    );
    assert_eq!(
        u64::from(pi.capability_mask2),
        f.printed_num("CapabilityMask2")
    );
    assert_eq!(f.printed("LinkSpeedExtActive"), "No Extended Speed");
    assert_eq!(pi.link_speed_ext_active, 0);
    assert_eq!(
        u64::from(pi.link_speed_ext_supported),
        f.printed_num("LinkSpeedExtSupported")
    );
    assert_eq!(
        u64::from(pi.link_speed_ext_enabled),
        f.printed_num("LinkSpeedExtEnabled")
    );

    let mut data = [0u8; 64];
    pi.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
    assert_eq!(data[..], smp.data()[..], "{}", f.name);
    assert_smp_reemits(f);
    pi
}

#[test]
fn portinfo_before_any_sm() {
    let f = load("portinfo_sw2_p1_dr");
    assert_eq!(f.smp().attribute_modifier(), 1);
    assert_eq!(f.smp_repr().directed().unwrap().initial_ports(), &[3]);
    let pi = port_info_checks(&f);
    assert_eq!(pi.port_state, PortState::Init);
    assert_eq!(pi.lid, 0);
}

#[test]
fn portinfo_switch_port_0_after_opensm() {
    let f = load("portinfo_sw1_p0");
    assert_eq!(f.smp_repr().routing, Routing::Lid);
    let pi = port_info_checks(&f);
    assert_eq!((pi.lid, pi.master_sm_lid), (1, 1));
    assert_eq!(pi.port_state, PortState::Active);
}

#[test]
fn portinfo_switch_external_port_after_opensm() {
    let f = load("portinfo_sw1_p3");
    assert_eq!(f.smp().attribute_modifier(), 3);
    let pi = port_info_checks(&f);
    assert_eq!(pi.port_state, PortState::Active);
    assert_eq!(pi.hoq_life, 18);
}

#[test]
fn portinfo_ca_after_opensm() {
    let f = load("portinfo_h1");
    let pi = port_info_checks(&f);
    assert_eq!((pi.lid, pi.master_sm_lid), (3, 1));
    assert_eq!(pi.port_state, PortState::Active);
    assert_ne!(
        pi.capability_mask & port_info::capability::IS_TRAP_SUPPORTED,
        0
    );
}

#[test]
fn nodedescription() {
    let f = load("nodedesc_h1");
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::NODE_DESCRIPTION);
    let nd = NodeDescriptionRepr::parse(&NodeDescriptionPacket::new_checked(smp.data()).unwrap())
        .unwrap();
    assert_eq!(nd.text(), f.printed("Node Description"));
    assert_eq!(nd, NodeDescriptionRepr::from_text("h1").unwrap());
    assert_smp_reemits(&f);
}

#[test]
fn switchinfo() {
    let f = load("switchinfo_sw2");
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::SWITCH_INFO);
    let si = SwitchInfoRepr::parse(&SwitchInfoPacket::new_checked(smp.data()).unwrap()).unwrap();
    assert_eq!(u64::from(si.linear_fdb_cap), f.printed_num("LinearFdbCap"));
    assert_eq!(u64::from(si.random_fdb_cap), f.printed_num("RandomFdbCap"));
    assert_eq!(
        u64::from(si.multicast_fdb_cap),
        f.printed_num("McastFdbCap")
    );
    assert_eq!(u64::from(si.linear_fdb_top), f.printed_num("LinearFdbTop"));
    assert_eq!(u64::from(si.default_port), f.printed_num("DefPort"));
    assert_eq!(
        u64::from(si.default_multicast_primary_port),
        f.printed_num("DefMcastPrimPort")
    );
    assert_eq!(
        u64::from(si.default_multicast_not_primary_port),
        f.printed_num("DefMcastNotPrimPort")
    );
    assert_eq!(u64::from(si.life_time_value), f.printed_num("LifeTime"));
    assert_eq!(
        u64::from(si.port_state_change),
        f.printed_num("StateChange")
    );
    assert_eq!(
        u64::from(si.optimized_sl2vl_programming),
        f.printed_num("OptSLtoVLMapping")
    );
    assert_eq!(u64::from(si.lids_per_port), f.printed_num("LidsPerPort"));
    assert_eq!(
        u64::from(si.partition_enforcement_cap),
        f.printed_num("PartEnforceCap")
    );
    assert_eq!(
        u64::from(si.inbound_enforcement_cap),
        f.printed_num("InboundPartEnf")
    );
    assert_eq!(
        u64::from(si.outbound_enforcement_cap),
        f.printed_num("OutboundPartEnf")
    );
    assert_eq!(
        u64::from(si.filter_raw_inbound_cap),
        f.printed_num("FilterRawInbound")
    );
    assert_eq!(
        u64::from(si.filter_raw_outbound_cap),
        f.printed_num("FilterRawOutbound")
    );
    assert_eq!(u64::from(si.enhanced_port0), f.printed_num("EnhancedPort0"));
    assert_eq!(
        u64::from(si.multicast_fdb_top),
        f.printed_num("MulticastFDBTop")
    );
    assert_eq!(si.linear_fdb_top, 5);
    let mut data = [0u8; 64];
    si.emit(&mut SwitchInfoPacket::new_unchecked(&mut data[..]));
    assert_eq!(data[..], smp.data()[..]);
    assert_smp_reemits(&f);
}

#[test]
fn linear_forwarding_table_block() {
    let f = load("lft_sw2_block0");
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::LINEAR_FORWARDING_TABLE);
    assert_eq!(LftRepr::parse_modifier(smp.attribute_modifier()), Ok(0));
    let lft = LftRepr::parse(&LftPacket::new_checked(smp.data()).unwrap()).unwrap();
    // ibroute printed "0x0001 003", ... one line per LID up to the top.
    let mut routed = 0;
    for line in &f.comments {
        let mut words = line.split_whitespace();
        let (Some(lid), Some(port)) = (words.next(), words.next()) else {
            continue;
        };
        let (Some(lid), Ok(port)) = (lid.strip_prefix("0x"), port.parse::<u8>()) else {
            continue;
        };
        let lid = usize::from_str_radix(lid, 16).unwrap();
        assert_eq!(lft.ports[lid], port, "LID {lid}");
        routed += 1;
    }
    assert_eq!(routed, 5);
    assert_eq!(&lft.ports[..6], &[NO_ROUTE, 3, 0, 3, 3, 1]);
    assert!(lft.ports[6..].iter().all(|&p| p == NO_ROUTE));
    assert_smp_reemits(&f);
}

#[test]
fn multicast_forwarding_table_block() {
    let f = load("mft_sw1_block0");
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::MULTICAST_FORWARDING_TABLE);
    assert_eq!(
        MftModifier::from_u32(smp.attribute_modifier()),
        Ok(MftModifier {
            block: 0,
            position: 0
        })
    );
    let mft = MftRepr::parse(&MftPacket::new_checked(smp.data()).unwrap()).unwrap();
    // No port joined a group in ibsim: ibroute dumped 0 valid mlids.
    assert!(f
        .comments
        .iter()
        .any(|l| l.contains("0 valid mlids dumped")));
    assert_eq!(mft, MftRepr::default());
    assert_smp_reemits(&f);
}

#[test]
fn sl2vl_mapping_table() {
    let f = load("sl2vl_sw1_in1_out3");
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::SL_TO_VL_MAPPING_TABLE);
    let modifier = Sl2VlModifier::from_u32(smp.attribute_modifier()).unwrap();
    assert_eq!((modifier.input_port, modifier.output_port), (1, 3));
    let table = Sl2VlRepr::parse(&Sl2VlPacket::new_checked(smp.data()).unwrap()).unwrap();
    // smpquery's row: "ports: in  1, out  3: | 0| 1| ...|14| 7|"
    let row = f
        .comments
        .iter()
        .find_map(|l| l.strip_prefix("ports: in  1, out  3:"))
        .unwrap();
    let printed: Vec<u8> = row
        .split('|')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    assert_eq!(table.vl_by_sl[..], printed[..]);
    assert_smp_reemits(&f);
}

fn vlarb_check(name: &str, block: VlArbBlock, printed_row: usize) {
    let f = load(name);
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::VL_ARBITRATION_TABLE);
    assert_eq!(
        VlArbModifier::from_u32(smp.attribute_modifier()),
        Ok(VlArbModifier { block, port: 1 })
    );
    let table = VlArbRepr::parse(&VlArbPacket::new_checked(smp.data()).unwrap()).unwrap();
    // smpquery prints "VL    : |0x0 |0x1 |..." and "WEIGHT: |0x0 |0x4 |..." per
    // table, low first; the cap (8 entries) bounds what it shows.
    let cells = |prefix: &str| -> Vec<u8> {
        let line = f
            .comments
            .iter()
            .filter_map(|l| l.strip_prefix(prefix))
            .nth(printed_row)
            .unwrap();
        line.split('|')
            .map(str::trim)
            .filter(|s| s.starts_with("0x"))
            .map(|s| num(s) as u8)
            .collect()
    };
    let (vls, weights) = (cells("VL    :"), cells("WEIGHT:"));
    assert_eq!(vls.len(), 8);
    for (i, (vl, weight)) in vls.into_iter().zip(weights).enumerate() {
        assert_eq!(
            table.entries[i],
            VlArbEntry { vl, weight },
            "{name} entry {i}"
        );
    }
    assert_smp_reemits(&f);
}

#[test]
fn vl_arbitration_tables() {
    vlarb_check("vlarb_h1_low", VlArbBlock::Low0, 0);
    vlarb_check("vlarb_h1_high", VlArbBlock::High0, 1);
}

#[test]
fn sminfo_from_opensm() {
    let f = load("sminfo_sw1");
    let smp = f.smp();
    assert_eq!(smp.attribute_id(), attr::SM_INFO);
    let info = SmInfoRepr::parse(&SmInfoPacket::new_checked(smp.data()).unwrap()).unwrap();
    // "sminfo: sm lid 1 sm guid 0x2c90000000100, activity count 69 priority 0 state 3 SMINFO_MASTER"
    let line = f
        .comments
        .iter()
        .find(|l| l.starts_with("sminfo: sm lid"))
        .unwrap();
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let after = |key: &str| num(words[words.iter().position(|w| *w == key).unwrap() + 1]);
    assert_eq!(info.guid, after("guid"));
    assert_eq!(u64::from(info.act_count), after("count"));
    assert_eq!(u64::from(info.priority), after("priority"));
    assert_eq!(info.state as u64, after("state"));
    assert_eq!(info.state, SmState::Master);
    // OpenSM's default SM_Key, shown because the query came from the SM's
    // own port (ibsim attaches every client to sw1).
    assert_eq!(info.sm_key, 1);
    assert_smp_reemits(&f);
}

#[test]
fn sa_get_table_response_header() {
    let f = load("sa_noderecord_resp");
    let packet = SaPacket::new_checked(&f.bytes[..]).unwrap();
    let sa = SaRepr::parse(&packet).unwrap();
    assert_eq!(sa.method, method::GET_TABLE_RESP);
    assert_eq!(sa.status, 0);
    assert_eq!(sa.attribute_id, 0x0011); // NodeRecord
    assert_eq!(sa.attribute_offset, 14); // 112-byte NodeRecords
    assert_eq!(sa.component_mask, 0);
    // libibumad hands over the reassembled payload with RMPP Active set.
    assert_eq!(sa.rmpp.flags, sa::rmpp::FLAG_ACTIVE);

    // The records: LID, reserved, NodeInfo, NodeDescription, padding.
    let record = packet.attribute_size();
    for (i, expect_lid) in [(0usize, 1u16), (1, 2)] {
        let rec = &packet.data()[i * record..];
        assert_eq!(u16::from_be_bytes([rec[0], rec[1]]), expect_lid);
        let info = NodeInfoRepr::parse(&NodeInfoPacket::new_checked(&rec[4..]).unwrap()).unwrap();
        assert_eq!(info.node_type, NodeType::Switch);
        assert_eq!(
            info.node_guid,
            0x0002_c900_0000_0000 | u64::from(expect_lid) << 8
        );
        // The dump ends inside the second record's NodeDescription.
        assert_eq!(rec[44..48], *format!("sw{expect_lid}\0").as_bytes());
        if let Ok(nd) = NodeDescriptionPacket::new_checked(&rec[44..]) {
            assert_eq!(
                NodeDescriptionRepr::parse(&nd).unwrap().text(),
                f.printed("NodeDescription")
            );
        }
    }
    // The first record against what saquery printed.
    let info =
        NodeInfoRepr::parse(&NodeInfoPacket::new_checked(&packet.data()[4..]).unwrap()).unwrap();
    assert_eq!(info.node_guid, f.printed_num("node_guid"));
    assert_eq!(u64::from(info.num_ports), f.printed_num("num_ports"));
    assert_eq!(u64::from(info.revision), f.printed_num("revision"));

    let mut out = f.bytes.clone();
    sa.emit(&mut SaPacket::new_unchecked(&mut out[..]));
    assert_eq!(out, f.bytes);
}

#[test]
fn trap_128_from_ibsim() {
    let f = load("trap128_sw2");
    // ibsim's dump stops 32 bytes short of a whole MAD; it zeroed them.
    assert_eq!(f.bytes.len(), 224);
    let mut bytes = f.bytes.clone();
    bytes.resize(MAD_LEN, 0);
    let mad = Mad::from_slice(&bytes).unwrap();
    let header = MadHeaderRepr::parse(&mad.header()).unwrap();
    assert_eq!(header.mgmt_class, class::SUBN_LID);
    assert_eq!(header.method, method::TRAP);
    assert_eq!(header.attribute_id, attr::NOTICE);
    let smp = SmpRepr::parse(&mad.smp()).unwrap();
    assert_eq!(smp.routing, Routing::Lid);
    let notice = NoticeRepr::parse(&NoticePacket::new_checked(&smp.data[..]).unwrap()).unwrap();
    assert_eq!(notice, NoticeRepr::link_state_change(2));
    assert_eq!(notice.trap_number(), Some(notice::trap::LINK_STATE_CHANGE));
    assert_eq!(notice.details, Details::LinkStateChange { lid: 2 });
    let mut out = [0u8; MAD_LEN];
    smp.emit(&mut SmpPacket::new_unchecked(&mut out[..]));
    assert_eq!(out[..], bytes[..]);
}
