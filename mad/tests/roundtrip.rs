//! Property tests: Repr → emit → parse gives the Repr back for every
//! format, and parsing arbitrary bytes never panics (and, when it
//! succeeds, re-emits to something that parses the same).

use proptest::prelude::*;
use sm_mad::forwarding::{LftPacket, LftRepr, MftModifier, MftPacket, MftRepr};
use sm_mad::notice::{self, Details, Source};
use sm_mad::port_info::{PhysState, PortState};
use sm_mad::smp::{DirectedRoute, Direction, Routing};
use sm_mad::vlarb::{VlArbBlock, VlArbEntry, VlArbModifier};
use sm_mad::*;

/// The low `width` bits of `v`: fields narrower than their Rust type.
fn low(v: u64, width: u32) -> u64 {
    v & ((1u64 << width) - 1)
}

fn bytes<const N: usize>() -> impl Strategy<Value = [u8; N]> {
    prop::collection::vec(any::<u8>(), N).prop_map(|v| {
        let mut a = [0u8; N];
        a.copy_from_slice(&v);
        a
    })
}

/// `n` independent random words to carve a many-field Repr from (tuple
/// strategies stop at 12 fields).
fn words(n: usize) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(any::<u64>(), n)
}

fn header() -> impl Strategy<Value = MadHeaderRepr> {
    (any::<(u8, u8, u8, u16, u16, u64, u16, u32)>()).prop_map(
        |(
            mgmt_class,
            class_version,
            method,
            status,
            class_specific,
            transaction_id,
            attribute_id,
            attribute_modifier,
        )| {
            MadHeaderRepr {
                mgmt_class,
                class_version,
                method,
                status,
                class_specific,
                transaction_id,
                attribute_id,
                attribute_modifier,
            }
        },
    )
}

fn directed_route() -> impl Strategy<Value = DirectedRoute> {
    (0..=smp::MAX_HOPS)
        .prop_flat_map(|hops| {
            (
                Just(hops),
                0..=hops + 1,
                any::<(bool, u16, u16)>(),
                prop::collection::vec(any::<u8>(), usize::from(hops)),
                prop::collection::vec(any::<u8>(), usize::from(hops)),
            )
        })
        .prop_map(
            |(hop_count, hop_pointer, (inbound, dr_slid, dr_dlid), out, back)| {
                let mut initial_path = [0; smp::PATH_LEN];
                initial_path[1..=out.len()].copy_from_slice(&out);
                let mut return_path = [0; smp::PATH_LEN];
                return_path[1..=back.len()].copy_from_slice(&back);
                DirectedRoute {
                    direction: if inbound {
                        Direction::Inbound
                    } else {
                        Direction::Outbound
                    },
                    hop_pointer,
                    hop_count,
                    dr_slid,
                    dr_dlid,
                    initial_path,
                    return_path,
                }
            },
        )
}

fn smp_repr() -> impl Strategy<Value = SmpRepr> {
    (
        prop_oneof![
            Just(Routing::Lid),
            directed_route().prop_map(Routing::Directed)
        ],
        any::<(u8, u16, u64, u16, u32, u64)>(),
        bytes::<64>(),
    )
        .prop_map(
            |(
                routing,
                (method, status, transaction_id, attribute_id, attribute_modifier, m_key),
                data,
            )| {
                let status = match routing {
                    Routing::Lid => status,
                    Routing::Directed(_) => status & !smp::DIRECTION_BIT,
                };
                SmpRepr {
                    method,
                    status,
                    transaction_id,
                    attribute_id,
                    attribute_modifier,
                    m_key,
                    routing,
                    data,
                }
            },
        )
}

fn sa_repr() -> impl Strategy<Value = SaRepr> {
    words(14).prop_map(|w| SaRepr {
        method: w[0] as u8,
        status: w[1] as u16,
        transaction_id: w[2],
        attribute_id: w[3] as u16,
        attribute_modifier: w[4] as u32,
        rmpp: RmppHeader {
            version: w[5] as u8,
            rmpp_type: w[6] as u8,
            resp_time: low(w[7], 5) as u8,
            flags: low(w[8], 3) as u8,
            status: w[9] as u8,
            segment_number: w[10] as u32,
            payload_length: w[11] as u32,
        },
        sm_key: w[12],
        attribute_offset: w[13] as u16,
        component_mask: w[13].rotate_left(17),
    })
}

fn node_info() -> impl Strategy<Value = NodeInfoRepr> {
    (
        prop_oneof![
            Just(NodeType::Ca),
            Just(NodeType::Switch),
            Just(NodeType::Router)
        ],
        words(11),
    )
        .prop_map(|(node_type, w)| NodeInfoRepr {
            base_version: w[0] as u8,
            class_version: w[1] as u8,
            node_type,
            num_ports: w[2] as u8,
            system_image_guid: w[3],
            node_guid: w[4],
            port_guid: w[5],
            partition_cap: w[6] as u16,
            device_id: w[7] as u16,
            revision: w[8] as u32,
            local_port_num: w[9] as u8,
            vendor_id: low(w[10], 24) as u32,
        })
}

fn port_state() -> impl Strategy<Value = PortState> {
    (0u8..=5).prop_map(|v| PortState::from_u8(v).unwrap())
}

fn phys_state() -> impl Strategy<Value = PhysState> {
    (0u8..=7).prop_map(|v| PhysState::from_u8(v).unwrap())
}

fn port_info() -> impl Strategy<Value = PortInfoRepr> {
    (port_state(), phys_state(), words(55)).prop_map(|(port_state, port_physical_state, w)| {
        PortInfoRepr {
            m_key: w[0],
            gid_prefix: w[1],
            lid: w[2] as u16,
            master_sm_lid: w[3] as u16,
            capability_mask: w[4] as u32,
            diag_code: w[5] as u16,
            m_key_lease_period: w[6] as u16,
            local_port_num: w[7] as u8,
            link_width_enabled: w[8] as u8,
            link_width_supported: w[9] as u8,
            link_width_active: w[10] as u8,
            link_speed_supported: low(w[11], 4) as u8,
            port_state,
            port_physical_state,
            link_down_default_state: low(w[12], 4) as u8,
            m_key_protect_bits: low(w[13], 2) as u8,
            lmc: low(w[14], 3) as u8,
            link_speed_active: low(w[15], 4) as u8,
            link_speed_enabled: low(w[16], 4) as u8,
            neighbor_mtu: low(w[17], 4) as u8,
            master_sm_sl: low(w[18], 4) as u8,
            vl_cap: low(w[19], 4) as u8,
            init_type: low(w[20], 4) as u8,
            vl_high_limit: w[21] as u8,
            vl_arbitration_high_cap: w[22] as u8,
            vl_arbitration_low_cap: w[23] as u8,
            init_type_reply: low(w[24], 4) as u8,
            mtu_cap: low(w[25], 4) as u8,
            vl_stall_count: low(w[26], 3) as u8,
            hoq_life: low(w[27], 5) as u8,
            operational_vls: low(w[28], 4) as u8,
            partition_enforcement_inbound: w[29] & 1 != 0,
            partition_enforcement_outbound: w[30] & 1 != 0,
            filter_raw_inbound: w[31] & 1 != 0,
            filter_raw_outbound: w[32] & 1 != 0,
            m_key_violations: w[33] as u16,
            p_key_violations: w[34] as u16,
            q_key_violations: w[35] as u16,
            guid_cap: w[36] as u8,
            client_reregister: w[37] & 1 != 0,
            multicast_pkey_trap_suppression: low(w[38], 2) as u8,
            subnet_timeout: low(w[39], 5) as u8,
            resp_time_value: low(w[40], 5) as u8,
            local_phy_errors: low(w[41], 4) as u8,
            overrun_errors: low(w[42], 4) as u8,
            max_credit_hint: w[43] as u16,
            link_round_trip_latency: low(w[44], 24) as u32,
            capability_mask2: w[45] as u16,
            link_speed_ext_active: low(w[46], 4) as u8,
            link_speed_ext_supported: low(w[47], 4) as u8,
            link_speed_ext_enabled: low(w[48], 5) as u8,
            link_speed_ext2_active: low(w[52], 2) as u8,
            link_speed_ext2_supported: low(w[53], 2) as u8,
            link_speed_ext2_enabled: low(w[54], 3) as u8,
        }
    })
}

fn switch_info() -> impl Strategy<Value = SwitchInfoRepr> {
    words(18).prop_map(|w| SwitchInfoRepr {
        linear_fdb_cap: w[0] as u16,
        random_fdb_cap: w[1] as u16,
        multicast_fdb_cap: w[2] as u16,
        linear_fdb_top: w[3] as u16,
        default_port: w[4] as u8,
        default_multicast_primary_port: w[5] as u8,
        default_multicast_not_primary_port: w[6] as u8,
        life_time_value: low(w[7], 5) as u8,
        port_state_change: w[8] & 1 != 0,
        optimized_sl2vl_programming: low(w[9], 2) as u8,
        lids_per_port: w[10] as u16,
        partition_enforcement_cap: w[11] as u16,
        inbound_enforcement_cap: w[12] & 1 != 0,
        outbound_enforcement_cap: w[13] & 1 != 0,
        filter_raw_inbound_cap: w[14] & 1 != 0,
        filter_raw_outbound_cap: w[15] & 1 != 0,
        enhanced_port0: w[16] & 1 != 0,
        multicast_fdb_top: w[17] as u16,
    })
}

fn sm_info() -> impl Strategy<Value = SmInfoRepr> {
    (any::<(u64, u64, u32)>(), 0u8..16, 0u8..4).prop_map(
        |((guid, sm_key, act_count), priority, state)| SmInfoRepr {
            guid,
            sm_key,
            act_count,
            priority,
            state: SmState::from_u8(state).unwrap(),
        },
    )
}

/// Details that parse back as themselves for the source they go with.
fn notice_repr() -> impl Strategy<Value = NoticeRepr> {
    let generic = prop_oneof![
        (64u16..=67, bytes::<16>()).prop_map(|(t, gid)| (t, Details::Gid { gid })),
        any::<u16>().prop_map(|lid| (128, Details::LinkStateChange { lid })),
        (129u16..=131, any::<(u16, u8)>())
            .prop_map(|(t, (lid, port))| (t, Details::PortError { lid, port })),
        any::<(u16, bool, u32, u16, u16)>().prop_map(|(lid, o, c, f, c2)| (
            144,
            Details::CapabilityChange {
                lid,
                other_local_changes: o,
                capability_mask: c,
                change_flags: f,
                capability_mask2: c2,
            }
        )),
        any::<(u16, u64)>().prop_map(|(lid, g)| (
            145,
            Details::SystemImageGuidChange {
                lid,
                system_image_guid: g
            }
        )),
        (256u16..=259, bytes::<54>()).prop_map(|(t, raw)| (t, Details::Raw(raw))),
    ];
    let source = prop_oneof![
        (generic, 0u32..1 << 24).prop_map(|((trap_number, details), producer_type)| (
            Source::Generic {
                producer_type,
                trap_number
            },
            details
        )),
        (0u32..1 << 24, any::<u16>(), bytes::<54>()).prop_map(|(vendor_id, device_id, raw)| (
            Source::Vendor {
                vendor_id,
                device_id
            },
            Details::Raw(raw)
        )),
    ];
    (
        source,
        0u8..128,
        any::<(u16, bool)>(),
        0u16..1 << 15,
        prop::option::of(bytes::<16>()),
    )
        .prop_map(
            |((source, details), notice_type, (issuer_lid, toggle), count, issuer_gid)| {
                NoticeRepr {
                    notice_type,
                    source,
                    issuer_lid,
                    toggle,
                    count,
                    details,
                    issuer_gid,
                }
            },
        )
}

/// Emits into a buffer of garbage, parses back, and returns the bytes.
macro_rules! round_trip {
    ($repr:expr, $Packet:ident, $Repr:ty) => {{
        let repr = $repr;
        let mut buf = vec![0x5au8; repr.buffer_len()];
        repr.emit(&mut $Packet::new_unchecked(&mut buf[..]));
        let parsed = <$Repr>::parse(&$Packet::new_checked(&buf[..]).unwrap()).unwrap();
        prop_assert_eq!(parsed, repr);
        buf
    }};
}

/// Arbitrary bytes: parsing may fail but must not panic; what parses
/// re-emits to bytes that parse the same.
macro_rules! no_panic {
    ($bytes:expr, $Packet:ident, $Repr:ty) => {{
        let bytes: &[u8] = $bytes;
        if let Ok(packet) = $Packet::new_checked(bytes) {
            if let Ok(repr) = <$Repr>::parse(&packet) {
                let mut buf = vec![0u8; bytes.len()];
                repr.emit(&mut $Packet::new_unchecked(&mut buf[..]));
                let again = <$Repr>::parse(&$Packet::new_checked(&buf[..]).unwrap());
                prop_assert_eq!(again, Ok(repr));
            }
        }
        let _ = <$Repr>::parse(&$Packet::new_unchecked(bytes));
    }};
}

proptest! {
    #[test]
    fn mad_header(repr in header()) {
        round_trip!(repr, MadHeader, MadHeaderRepr);
    }

    #[test]
    fn smp(repr in smp_repr()) {
        let buf = round_trip!(repr, SmpPacket, SmpRepr);
        let packet = SmpPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(packet.is_directed(), repr.directed().is_some());
        if let Some(dr) = repr.directed() {
            prop_assert_eq!(packet.direction(), dr.direction);
            prop_assert_eq!(packet.hop_pointer(), dr.hop_pointer);
            prop_assert_eq!(packet.hop_count(), dr.hop_count);
        }
    }

    #[test]
    fn directed_builder(ports in prop::collection::vec(any::<u8>(), 0..=63), tid: u64, attr: u16, m: u32) {
        let repr = SmpRepr::directed_get(tid, attr, m, 0, &ports).unwrap();
        let buf = round_trip!(repr, SmpPacket, SmpRepr);
        prop_assert_eq!(&buf[129..129 + ports.len()], &ports[..]);
        prop_assert_eq!(repr.directed().unwrap().initial_ports(), &ports[..]);
    }

    #[test]
    fn sa(repr in sa_repr()) {
        round_trip!(repr, SaPacket, SaRepr);
    }

    #[test]
    fn node_info_rt(repr in node_info()) {
        round_trip!(repr, NodeInfoPacket, NodeInfoRepr);
    }

    #[test]
    fn node_description(bytes in bytes::<64>()) {
        round_trip!(NodeDescriptionRepr { bytes }, NodeDescriptionPacket, NodeDescriptionRepr);
    }

    #[test]
    fn port_info_rt(repr in port_info()) {
        round_trip!(repr, PortInfoPacket, PortInfoRepr);
    }

    #[test]
    fn switch_info_rt(repr in switch_info()) {
        round_trip!(repr, SwitchInfoPacket, SwitchInfoRepr);
    }

    #[test]
    fn lft(ports in bytes::<64>()) {
        round_trip!(LftRepr { ports }, LftPacket, LftRepr);
    }

    #[test]
    fn mft(masks in prop::collection::vec(any::<u16>(), 32)) {
        let mut port_masks = [0; 32];
        port_masks.copy_from_slice(&masks);
        round_trip!(MftRepr { port_masks }, MftPacket, MftRepr);
    }

    #[test]
    fn mft_modifier(block in 0u16..=0x1ff, position in 0u8..=15) {
        let m = MftModifier { block, position };
        prop_assert_eq!(MftModifier::from_u32(m.to_u32().unwrap()), Ok(m));
    }

    #[test]
    fn sl2vl(vls in prop::collection::vec(0u8..16, 16), input_port: u8, output_port: u8, all_in: bool, all_out: bool) {
        let mut vl_by_sl = [0; 16];
        vl_by_sl.copy_from_slice(&vls);
        round_trip!(Sl2VlRepr { vl_by_sl }, Sl2VlPacket, Sl2VlRepr);
        let m = Sl2VlModifier { input_port, output_port, all_input_ports: all_in, all_output_ports: all_out };
        prop_assert_eq!(Sl2VlModifier::from_u32(m.to_u32()), Ok(m));
    }

    #[test]
    fn vlarb(entries in prop::collection::vec((0u8..16, any::<u8>()), 32), block in 1u16..=4, port: u16) {
        let mut repr = VlArbRepr::default();
        for (slot, (vl, weight)) in repr.entries.iter_mut().zip(entries) {
            *slot = VlArbEntry { vl, weight };
        }
        round_trip!(repr, VlArbPacket, VlArbRepr);
        let m = VlArbModifier { block: VlArbBlock::from_u16(block).unwrap(), port };
        prop_assert_eq!(VlArbModifier::from_u32(m.to_u32()), Ok(m));
    }

    #[test]
    fn sm_info_rt(repr in sm_info()) {
        round_trip!(repr, SmInfoPacket, SmInfoRepr);
    }

    #[test]
    fn notice_rt(repr in notice_repr()) {
        let buf = round_trip!(repr, NoticePacket, NoticeRepr);
        prop_assert_eq!(buf.len(), if repr.issuer_gid.is_some() { notice::LEN_WITH_GID } else { notice::LEN });
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let b = &bytes[..];
        no_panic!(b, MadHeader, MadHeaderRepr);
        no_panic!(b, SmpPacket, SmpRepr);
        no_panic!(b, SaPacket, SaRepr);
        no_panic!(b, NodeInfoPacket, NodeInfoRepr);
        no_panic!(b, NodeDescriptionPacket, NodeDescriptionRepr);
        no_panic!(b, PortInfoPacket, PortInfoRepr);
        no_panic!(b, SwitchInfoPacket, SwitchInfoRepr);
        no_panic!(b, LftPacket, LftRepr);
        no_panic!(b, MftPacket, MftRepr);
        no_panic!(b, Sl2VlPacket, Sl2VlRepr);
        no_panic!(b, VlArbPacket, VlArbRepr);
        no_panic!(b, SmInfoPacket, SmInfoRepr);
        no_panic!(b, NoticePacket, NoticeRepr);
        let _ = Mad::from_slice(b);
    }

    #[test]
    fn smp_from_mostly_valid_bytes(mut bytes in bytes::<256>(), class_directed: bool) {
        // Random bytes rarely pass the class/version checks; force them so
        // the hop fields and paths get exercised.
        bytes[0] = 1;
        bytes[1] = if class_directed { 0x81 } else { 0x01 };
        bytes[2] = 1;
        no_panic!(&bytes[..], SmpPacket, SmpRepr);
        if let Ok(repr) = SmpRepr::parse(&SmpPacket::new_checked(&bytes[..]).unwrap()) {
            let mut out = [0u8; 256];
            repr.emit(&mut SmpPacket::new_unchecked(&mut out[..]));
            // Everything but reserved bytes and unused path entries survives;
            // ClassSpecific is reserved in LID-routed SMPs.
            prop_assert_eq!(&out[..6], &bytes[..6]);
            if class_directed {
                prop_assert_eq!(&out[6..8], &bytes[6..8]);
                prop_assert_eq!(&out[32..36], &bytes[32..36]);
            }
            prop_assert_eq!(&out[8..18], &bytes[8..18]);
            prop_assert_eq!(&out[20..32], &bytes[20..32]);
            prop_assert_eq!(&out[64..128], &bytes[64..128]);
        }
    }
}
