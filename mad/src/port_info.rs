//! PortInfo (IBA 14.2.5.6): a port's addresses, link state and
//! capabilities. The SM reads it to discover and sets it to assign LIDs,
//! the SM LID and SL, and to walk ports Init → Armed → Active.
//!
//! ```text
//! offset  0  M_Key (64)
//!         8  GidPrefix (64)
//!        16  LID (16)  MasterSMLID (16)
//!        20  CapabilityMask (32)
//!        24  DiagCode (16)  M_KeyLeasePeriod (16)
//!        28  LocalPortNum  LinkWidthEnabled  LinkWidthSupported  LinkWidthActive
//!        32  LinkSpeedSupported(4)|PortState(4)
//!        33  PortPhysicalState(4)|LinkDownDefaultState(4)
//!        34  M_KeyProtectBits(2)|reserved(3)|LMC(3)
//!        35  LinkSpeedActive(4)|LinkSpeedEnabled(4)
//!        36  NeighborMTU(4)|MasterSMSL(4)
//!        37  VLCap(4)|InitType(4)
//!        38  VLHighLimit  VLArbitrationHighCap  VLArbitrationLowCap
//!        41  InitTypeReply(4)|MTUCap(4)
//!        42  VLStallCount(3)|HOQLife(5)
//!        43  OperationalVLs(4)|PartitionEnforcementInbound|..Outbound
//!            |FilterRawInbound|FilterRawOutbound
//!        44  M_KeyViolations (16)  P_KeyViolations (16)  Q_KeyViolations (16)
//!        50  GUIDCap
//!        51  ClientReregister(1)|MulticastPKeyTrapSuppressionEnabled(2)|SubnetTimeOut(5)
//!        52  reserved(3)|RespTimeValue(5)
//!        53  LocalPhyErrors(4)|OverrunErrors(4)
//!        54  MaxCreditHint (16)
//!        56  reserved(1)|LinkSpeedExtActive2(2)|LinkSpeedExtSupported2(2)
//!            |LinkSpeedExtEnabled2(3)   (IBA 1.7: XDR; reserved before)
//!        57  LinkRoundTripLatency(24)
//!        60  CapabilityMask2 (16)
//!        62  LinkSpeedExtActive(4)|LinkSpeedExtSupported(4)
//!        63  reserved(3)|LinkSpeedExtEnabled(5)
//! ```

use crate::field::{bad, fields, packet};
use crate::Result;

/// Length of PortInfo.
pub const LEN: usize = 64;

/// PortState (IBA 14.2.5.6, table "PortInfo").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[repr(u8)]
pub enum PortState {
    /// In a Set: leave the state alone.
    #[default]
    NoChange = 0,
    /// Down.
    Down = 1,
    /// Initialize: link up, only SMPs pass.
    Init = 2,
    /// Armed: waiting for the SM to activate.
    Armed = 3,
    /// Active.
    Active = 4,
    /// ActiveDefer (IBA 1.2.1).
    ActiveDefer = 5,
}

impl PortState {
    /// The wire value; 6..=15 are reserved and refused.
    pub fn from_u8(value: u8) -> Result<Self> {
        Ok(match value {
            0 => Self::NoChange,
            1 => Self::Down,
            2 => Self::Init,
            3 => Self::Armed,
            4 => Self::Active,
            5 => Self::ActiveDefer,
            other => return Err(bad("PortState", other)),
        })
    }
}

/// PortPhysicalState.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum PhysState {
    /// In a Set: leave the state alone.
    #[default]
    NoChange = 0,
    /// Sleep.
    Sleep = 1,
    /// Polling: looking for a peer.
    Polling = 2,
    /// Disabled.
    Disabled = 3,
    /// PortConfigurationTraining.
    PortConfigurationTraining = 4,
    /// LinkUp.
    LinkUp = 5,
    /// LinkErrorRecovery.
    LinkErrorRecovery = 6,
    /// PhyTest.
    PhyTest = 7,
}

impl PhysState {
    /// The wire value; 8..=15 are reserved and refused.
    pub fn from_u8(value: u8) -> Result<Self> {
        Ok(match value {
            0 => Self::NoChange,
            1 => Self::Sleep,
            2 => Self::Polling,
            3 => Self::Disabled,
            4 => Self::PortConfigurationTraining,
            5 => Self::LinkUp,
            6 => Self::LinkErrorRecovery,
            7 => Self::PhyTest,
            other => return Err(bad("PortPhysicalState", other)),
        })
    }
}

/// LinkWidth* bits.
pub mod link_width {
    /// 1x.
    pub const W1X: u8 = 0x01;
    /// 4x.
    pub const W4X: u8 = 0x02;
    /// 8x.
    pub const W8X: u8 = 0x04;
    /// 12x.
    pub const W12X: u8 = 0x08;
    /// 2x (IBA 1.3, with CapabilityMask2 bit 4).
    pub const W2X: u8 = 0x10;
    /// LinkWidthEnabled 0xFF: set to LinkWidthSupported.
    pub const SET_TO_SUPPORTED: u8 = 0xFF;

    /// Lanes of one LinkWidth bit (2x has the highest bit but two lanes);
    /// 0 for anything else.
    pub const fn lanes(bit: u8) -> u8 {
        match bit {
            W1X => 1,
            W2X => 2,
            W4X => 4,
            W8X => 8,
            W12X => 12,
            _ => 0,
        }
    }
}

/// LinkSpeed* bits (the non-extended speeds).
pub mod link_speed {
    /// 2.5 Gb/s (SDR).
    pub const SDR: u8 = 0x1;
    /// 5 Gb/s (DDR).
    pub const DDR: u8 = 0x2;
    /// 10 Gb/s (QDR).
    pub const QDR: u8 = 0x4;
    /// LinkSpeedEnabled 0xF: set to LinkSpeedSupported.
    pub const SET_TO_SUPPORTED: u8 = 0xF;
}

/// MTU encodings (NeighborMTU, MTUCap).
pub mod mtu {
    /// 256 bytes.
    pub const MTU_256: u8 = 1;
    /// 512 bytes.
    pub const MTU_512: u8 = 2;
    /// 1024 bytes.
    pub const MTU_1024: u8 = 3;
    /// 2048 bytes.
    pub const MTU_2048: u8 = 4;
    /// 4096 bytes.
    pub const MTU_4096: u8 = 5;

    /// Bytes an MTU code stands for, if it is one.
    pub const fn bytes(code: u8) -> Option<u16> {
        match code {
            1..=5 => Some(128 << code),
            _ => None,
        }
    }
}

/// VL encodings (VLCap, OperationalVLs).
pub mod vls {
    /// Data VLs a VLCap or OperationalVLs code stands for (1 = VL0,
    /// 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14); 0 for a code that is
    /// none.
    pub const fn count(code: u8) -> u8 {
        match code {
            1 => 1,
            2 => 2,
            3 => 4,
            4 => 8,
            5 => 15,
            _ => 0,
        }
    }
}

/// CapabilityMask bits the SM cares about.
pub mod capability {
    /// IsSM: an SM runs behind this port.
    pub const IS_SM: u32 = 0x0000_0002;
    /// IsNoticeSupported.
    pub const IS_NOTICE_SUPPORTED: u32 = 0x0000_0004;
    /// IsTrapSupported.
    pub const IS_TRAP_SUPPORTED: u32 = 0x0000_0008;
    /// IsSLMappingSupported.
    pub const IS_SL_MAPPING_SUPPORTED: u32 = 0x0000_0040;
    /// IsSMdisabled.
    pub const IS_SM_DISABLED: u32 = 0x0000_0400;
    /// IsExtendedSpeedsSupported.
    pub const IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 0x0000_4000;
    /// IsCapabilityMask2Supported.
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u32 = 0x0000_8000;
    /// IsClientReregistrationSupported.
    pub const IS_CLIENT_REREGISTRATION_SUPPORTED: u32 = 0x0200_0000;
    /// IsMulticastFDBTopSupported: SwitchInfo.MulticastFDBTop is honoured.
    pub const IS_MULTICAST_FDB_TOP_SUPPORTED: u32 = 0x4000_0000;
}

/// CapabilityMask2 bits the SM cares about (valid only with
/// [`capability::IS_CAPABILITY_MASK2_SUPPORTED`]).
pub mod capability2 {
    /// IsLinkWidth2xSupported.
    pub const IS_LINK_WIDTH_2X_SUPPORTED: u16 = 0x0010;
    /// IsLinkSpeedHDRSupported.
    pub const IS_LINK_SPEED_HDR_SUPPORTED: u16 = 0x0020;
    /// IsLinkSpeedNDRSupported.
    pub const IS_LINK_SPEED_NDR_SUPPORTED: u16 = 0x0400;
    /// IsExtendedSpeeds2Supported: the LinkSpeedExt*2 fields of byte 56
    /// are valid.
    pub const IS_EXTENDED_SPEEDS_2_SUPPORTED: u16 = 0x0800;
    /// IsLinkSpeedXDRSupported.
    pub const IS_LINK_SPEED_XDR_SUPPORTED: u16 = 0x1000;
}

/// LinkSpeedExt* bits (FDR and up).
pub mod link_speed_ext {
    /// 14.0625 Gb/s (FDR).
    pub const FDR: u8 = 0x1;
    /// 25.78125 Gb/s (EDR).
    pub const EDR: u8 = 0x2;
    /// 53.125 Gb/s (HDR).
    pub const HDR: u8 = 0x4;
    /// 106.25 Gb/s (NDR).
    pub const NDR: u8 = 0x8;
    /// LinkSpeedExtEnabled 30: extended speeds off.
    pub const DISABLE: u8 = 30;
    /// LinkSpeedExtEnabled 31: set to LinkSpeedExtSupported.
    pub const SET_TO_SUPPORTED: u8 = 31;
}

/// LinkSpeedExt*2 bits (IBA 1.7, byte 56).
pub mod link_speed_ext2 {
    /// 212.5 Gb/s (XDR).
    pub const XDR: u8 = 0x1;
}

packet!(
    /// A view of PortInfo.
    Packet,
    LEN
);

fields! { Packet;
    /// M_Key.
    m_key, set_m_key: u64 @ 0;
    /// GidPrefix (subnet prefix).
    gid_prefix, set_gid_prefix: u64 @ 8;
    /// LID (base LID).
    lid, set_lid: u16 @ 16;
    /// MasterSMLID.
    master_sm_lid, set_master_sm_lid: u16 @ 18;
    /// CapabilityMask (see [`capability`]).
    capability_mask, set_capability_mask: u32 @ 20;
    /// DiagCode.
    diag_code, set_diag_code: u16 @ 24;
    /// M_KeyLeasePeriod (seconds).
    m_key_lease_period, set_m_key_lease_period: u16 @ 26;
    /// LocalPortNum: the port the SMP came in by.
    local_port_num, set_local_port_num: u8 @ 28;
    /// LinkWidthEnabled (see [`link_width`]).
    link_width_enabled, set_link_width_enabled: u8 @ 29;
    /// LinkWidthSupported.
    link_width_supported, set_link_width_supported: u8 @ 30;
    /// LinkWidthActive.
    link_width_active, set_link_width_active: u8 @ 31;
    /// LinkSpeedSupported (see [`link_speed`]).
    link_speed_supported, set_link_speed_supported: u8 @ 32 => bits 4, 4;
    /// PortState, raw (see [`PortState`]).
    port_state, set_port_state: u8 @ 32 => bits 0, 4;
    /// PortPhysicalState, raw (see [`PhysState`]).
    port_physical_state, set_port_physical_state: u8 @ 33 => bits 4, 4;
    /// LinkDownDefaultState (0 no change, 1 sleep, 2 polling).
    link_down_default_state, set_link_down_default_state: u8 @ 33 => bits 0, 4;
    /// M_KeyProtectBits.
    m_key_protect_bits, set_m_key_protect_bits: u8 @ 34 => bits 6, 2;
    /// LMC: 2^LMC LIDs per port.
    lmc, set_lmc: u8 @ 34 => bits 0, 3;
    /// LinkSpeedActive.
    link_speed_active, set_link_speed_active: u8 @ 35 => bits 4, 4;
    /// LinkSpeedEnabled.
    link_speed_enabled, set_link_speed_enabled: u8 @ 35 => bits 0, 4;
    /// NeighborMTU (see [`mtu`]).
    neighbor_mtu, set_neighbor_mtu: u8 @ 36 => bits 4, 4;
    /// MasterSMSL: the SL to reach the SM on.
    master_sm_sl, set_master_sm_sl: u8 @ 36 => bits 0, 4;
    /// VLCap: 1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14.
    vl_cap, set_vl_cap: u8 @ 37 => bits 4, 4;
    /// InitType.
    init_type, set_init_type: u8 @ 37 => bits 0, 4;
    /// VLHighLimit.
    vl_high_limit, set_vl_high_limit: u8 @ 38;
    /// VLArbitrationHighCap: entries in the high-priority VLArb table.
    vl_arbitration_high_cap, set_vl_arbitration_high_cap: u8 @ 39;
    /// VLArbitrationLowCap: entries in the low-priority VLArb table.
    vl_arbitration_low_cap, set_vl_arbitration_low_cap: u8 @ 40;
    /// InitTypeReply.
    init_type_reply, set_init_type_reply: u8 @ 41 => bits 4, 4;
    /// MTUCap (see [`mtu`]).
    mtu_cap, set_mtu_cap: u8 @ 41 => bits 0, 4;
    /// VLStallCount.
    vl_stall_count, set_vl_stall_count: u8 @ 42 => bits 5, 3;
    /// HOQLife.
    hoq_life, set_hoq_life: u8 @ 42 => bits 0, 5;
    /// OperationalVLs (encoded like VLCap).
    operational_vls, set_operational_vls: u8 @ 43 => bits 4, 4;
    /// PartitionEnforcementInbound.
    partition_enforcement_inbound, set_partition_enforcement_inbound: bool @ 43 => bit 3;
    /// PartitionEnforcementOutbound.
    partition_enforcement_outbound, set_partition_enforcement_outbound: bool @ 43 => bit 2;
    /// FilterRawInbound.
    filter_raw_inbound, set_filter_raw_inbound: bool @ 43 => bit 1;
    /// FilterRawOutbound.
    filter_raw_outbound, set_filter_raw_outbound: bool @ 43 => bit 0;
    /// M_KeyViolations.
    m_key_violations, set_m_key_violations: u16 @ 44;
    /// P_KeyViolations.
    p_key_violations, set_p_key_violations: u16 @ 46;
    /// Q_KeyViolations.
    q_key_violations, set_q_key_violations: u16 @ 48;
    /// GUIDCap: GUIDInfo entries.
    guid_cap, set_guid_cap: u8 @ 50;
    /// ClientReregister: tells the port's clients to rejoin (SM failover).
    client_reregister, set_client_reregister: bool @ 51 => bit 7;
    /// MulticastPKeyTrapSuppressionEnabled.
    multicast_pkey_trap_suppression, set_multicast_pkey_trap_suppression: u8 @ 51 => bits 5, 2;
    /// SubnetTimeOut: 4.096 µs × 2^value.
    subnet_timeout, set_subnet_timeout: u8 @ 51 => bits 0, 5;
    /// RespTimeValue.
    resp_time_value, set_resp_time_value: u8 @ 52 => bits 0, 5;
    /// LocalPhyErrors threshold.
    local_phy_errors, set_local_phy_errors: u8 @ 53 => bits 4, 4;
    /// OverrunErrors threshold.
    overrun_errors, set_overrun_errors: u8 @ 53 => bits 0, 4;
    /// MaxCreditHint.
    max_credit_hint, set_max_credit_hint: u16 @ 54;
    /// LinkSpeedExtActive2 (XDR; see [`link_speed_ext2`]).
    link_speed_ext2_active, set_link_speed_ext2_active: u8 @ 56 => bits 5, 2;
    /// LinkSpeedExtSupported2.
    link_speed_ext2_supported, set_link_speed_ext2_supported: u8 @ 56 => bits 3, 2;
    /// LinkSpeedExtEnabled2.
    link_speed_ext2_enabled, set_link_speed_ext2_enabled: u8 @ 56 => bits 0, 3;
    /// LinkRoundTripLatency (24 bits).
    link_round_trip_latency, set_link_round_trip_latency: u24 @ 57;
    /// CapabilityMask2.
    capability_mask2, set_capability_mask2: u16 @ 60;
    /// LinkSpeedExtActive (FDR and up).
    link_speed_ext_active, set_link_speed_ext_active: u8 @ 62 => bits 4, 4;
    /// LinkSpeedExtSupported.
    link_speed_ext_supported, set_link_speed_ext_supported: u8 @ 62 => bits 0, 4;
    /// LinkSpeedExtEnabled.
    link_speed_ext_enabled, set_link_speed_ext_enabled: u8 @ 63 => bits 0, 5;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes the reserved bits (bytes 34, 52, 56 and 63).
    pub fn clear_reserved(&mut self) {
        let buf = self.buffer.as_mut();
        buf[34] &= 0xC7;
        buf[52] &= 0x1F;
        buf[56] &= 0x7F;
        buf[63] &= 0x1F;
    }
}

/// PortInfo as values. Sub-byte fields hold the low bits only; emitting
/// drops any bit beyond a field's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)] // one field per wire field, named as in the IBA table
pub struct Repr {
    pub m_key: u64,
    pub gid_prefix: u64,
    pub lid: u16,
    pub master_sm_lid: u16,
    pub capability_mask: u32,
    pub diag_code: u16,
    pub m_key_lease_period: u16,
    pub local_port_num: u8,
    pub link_width_enabled: u8,
    pub link_width_supported: u8,
    pub link_width_active: u8,
    /// 4 bits.
    pub link_speed_supported: u8,
    pub port_state: PortState,
    pub port_physical_state: PhysState,
    /// 4 bits.
    pub link_down_default_state: u8,
    /// 2 bits.
    pub m_key_protect_bits: u8,
    /// 3 bits.
    pub lmc: u8,
    /// 4 bits.
    pub link_speed_active: u8,
    /// 4 bits.
    pub link_speed_enabled: u8,
    /// 4 bits.
    pub neighbor_mtu: u8,
    /// 4 bits.
    pub master_sm_sl: u8,
    /// 4 bits.
    pub vl_cap: u8,
    /// 4 bits.
    pub init_type: u8,
    pub vl_high_limit: u8,
    pub vl_arbitration_high_cap: u8,
    pub vl_arbitration_low_cap: u8,
    /// 4 bits.
    pub init_type_reply: u8,
    /// 4 bits.
    pub mtu_cap: u8,
    /// 3 bits.
    pub vl_stall_count: u8,
    /// 5 bits.
    pub hoq_life: u8,
    /// 4 bits.
    pub operational_vls: u8,
    pub partition_enforcement_inbound: bool,
    pub partition_enforcement_outbound: bool,
    pub filter_raw_inbound: bool,
    pub filter_raw_outbound: bool,
    pub m_key_violations: u16,
    pub p_key_violations: u16,
    pub q_key_violations: u16,
    pub guid_cap: u8,
    pub client_reregister: bool,
    /// 2 bits.
    pub multicast_pkey_trap_suppression: u8,
    /// 5 bits.
    pub subnet_timeout: u8,
    /// 5 bits.
    pub resp_time_value: u8,
    /// 4 bits.
    pub local_phy_errors: u8,
    /// 4 bits.
    pub overrun_errors: u8,
    pub max_credit_hint: u16,
    /// 2 bits.
    pub link_speed_ext2_active: u8,
    /// 2 bits.
    pub link_speed_ext2_supported: u8,
    /// 3 bits.
    pub link_speed_ext2_enabled: u8,
    /// 24 bits.
    pub link_round_trip_latency: u32,
    pub capability_mask2: u16,
    /// 4 bits.
    pub link_speed_ext_active: u8,
    /// 4 bits.
    pub link_speed_ext_supported: u8,
    /// 5 bits.
    pub link_speed_ext_enabled: u8,
}

impl Repr {
    /// Reads PortInfo; fails on a short buffer or a reserved PortState or
    /// PortPhysicalState.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            m_key: packet.m_key(),
            gid_prefix: packet.gid_prefix(),
            lid: packet.lid(),
            master_sm_lid: packet.master_sm_lid(),
            capability_mask: packet.capability_mask(),
            diag_code: packet.diag_code(),
            m_key_lease_period: packet.m_key_lease_period(),
            local_port_num: packet.local_port_num(),
            link_width_enabled: packet.link_width_enabled(),
            link_width_supported: packet.link_width_supported(),
            link_width_active: packet.link_width_active(),
            link_speed_supported: packet.link_speed_supported(),
            port_state: PortState::from_u8(packet.port_state())?,
            port_physical_state: PhysState::from_u8(packet.port_physical_state())?,
            link_down_default_state: packet.link_down_default_state(),
            m_key_protect_bits: packet.m_key_protect_bits(),
            lmc: packet.lmc(),
            link_speed_active: packet.link_speed_active(),
            link_speed_enabled: packet.link_speed_enabled(),
            neighbor_mtu: packet.neighbor_mtu(),
            master_sm_sl: packet.master_sm_sl(),
            vl_cap: packet.vl_cap(),
            init_type: packet.init_type(),
            vl_high_limit: packet.vl_high_limit(),
            vl_arbitration_high_cap: packet.vl_arbitration_high_cap(),
            vl_arbitration_low_cap: packet.vl_arbitration_low_cap(),
            init_type_reply: packet.init_type_reply(),
            mtu_cap: packet.mtu_cap(),
            vl_stall_count: packet.vl_stall_count(),
            hoq_life: packet.hoq_life(),
            operational_vls: packet.operational_vls(),
            partition_enforcement_inbound: packet.partition_enforcement_inbound(),
            partition_enforcement_outbound: packet.partition_enforcement_outbound(),
            filter_raw_inbound: packet.filter_raw_inbound(),
            filter_raw_outbound: packet.filter_raw_outbound(),
            m_key_violations: packet.m_key_violations(),
            p_key_violations: packet.p_key_violations(),
            q_key_violations: packet.q_key_violations(),
            guid_cap: packet.guid_cap(),
            client_reregister: packet.client_reregister(),
            multicast_pkey_trap_suppression: packet.multicast_pkey_trap_suppression(),
            subnet_timeout: packet.subnet_timeout(),
            resp_time_value: packet.resp_time_value(),
            local_phy_errors: packet.local_phy_errors(),
            overrun_errors: packet.overrun_errors(),
            max_credit_hint: packet.max_credit_hint(),
            link_speed_ext2_active: packet.link_speed_ext2_active(),
            link_speed_ext2_supported: packet.link_speed_ext2_supported(),
            link_speed_ext2_enabled: packet.link_speed_ext2_enabled(),
            link_round_trip_latency: packet.link_round_trip_latency(),
            capability_mask2: packet.capability_mask2(),
            link_speed_ext_active: packet.link_speed_ext_active(),
            link_speed_ext_supported: packet.link_speed_ext_supported(),
            link_speed_ext_enabled: packet.link_speed_ext_enabled(),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes PortInfo, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.clear_reserved();
        packet.set_m_key(self.m_key);
        packet.set_gid_prefix(self.gid_prefix);
        packet.set_lid(self.lid);
        packet.set_master_sm_lid(self.master_sm_lid);
        packet.set_capability_mask(self.capability_mask);
        packet.set_diag_code(self.diag_code);
        packet.set_m_key_lease_period(self.m_key_lease_period);
        packet.set_local_port_num(self.local_port_num);
        packet.set_link_width_enabled(self.link_width_enabled);
        packet.set_link_width_supported(self.link_width_supported);
        packet.set_link_width_active(self.link_width_active);
        packet.set_link_speed_supported(self.link_speed_supported);
        packet.set_port_state(self.port_state as u8);
        packet.set_port_physical_state(self.port_physical_state as u8);
        packet.set_link_down_default_state(self.link_down_default_state);
        packet.set_m_key_protect_bits(self.m_key_protect_bits);
        packet.set_lmc(self.lmc);
        packet.set_link_speed_active(self.link_speed_active);
        packet.set_link_speed_enabled(self.link_speed_enabled);
        packet.set_neighbor_mtu(self.neighbor_mtu);
        packet.set_master_sm_sl(self.master_sm_sl);
        packet.set_vl_cap(self.vl_cap);
        packet.set_init_type(self.init_type);
        packet.set_vl_high_limit(self.vl_high_limit);
        packet.set_vl_arbitration_high_cap(self.vl_arbitration_high_cap);
        packet.set_vl_arbitration_low_cap(self.vl_arbitration_low_cap);
        packet.set_init_type_reply(self.init_type_reply);
        packet.set_mtu_cap(self.mtu_cap);
        packet.set_vl_stall_count(self.vl_stall_count);
        packet.set_hoq_life(self.hoq_life);
        packet.set_operational_vls(self.operational_vls);
        packet.set_partition_enforcement_inbound(self.partition_enforcement_inbound);
        packet.set_partition_enforcement_outbound(self.partition_enforcement_outbound);
        packet.set_filter_raw_inbound(self.filter_raw_inbound);
        packet.set_filter_raw_outbound(self.filter_raw_outbound);
        packet.set_m_key_violations(self.m_key_violations);
        packet.set_p_key_violations(self.p_key_violations);
        packet.set_q_key_violations(self.q_key_violations);
        packet.set_guid_cap(self.guid_cap);
        packet.set_client_reregister(self.client_reregister);
        packet.set_multicast_pkey_trap_suppression(self.multicast_pkey_trap_suppression);
        packet.set_subnet_timeout(self.subnet_timeout);
        packet.set_resp_time_value(self.resp_time_value);
        packet.set_local_phy_errors(self.local_phy_errors);
        packet.set_overrun_errors(self.overrun_errors);
        packet.set_max_credit_hint(self.max_credit_hint);
        packet.set_link_speed_ext2_active(self.link_speed_ext2_active);
        packet.set_link_speed_ext2_supported(self.link_speed_ext2_supported);
        packet.set_link_speed_ext2_enabled(self.link_speed_ext2_enabled);
        packet.set_link_round_trip_latency(self.link_round_trip_latency);
        packet.set_capability_mask2(self.capability_mask2);
        packet.set_link_speed_ext_active(self.link_speed_ext_active);
        packet.set_link_speed_ext_supported(self.link_speed_ext_supported);
        packet.set_link_speed_ext_enabled(self.link_speed_ext_enabled);
    }

    /// Number of data VLs an OperationalVLs/VLCap code stands for
    /// (1, 2, 4, 8 or 15), or `None` for a reserved code.
    pub const fn data_vls(code: u8) -> Option<u8> {
        match code {
            1 => Some(1),
            2 => Some(2),
            3 => Some(4),
            4 => Some(8),
            5 => Some(15),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each field set to a distinct value, so a shifted or overlapping
    /// field shows up as a wrong byte.
    fn sample() -> Repr {
        Repr {
            m_key: 0x0102030405060708,
            gid_prefix: 0xfe80000000000000,
            lid: 0x1112,
            master_sm_lid: 0x1314,
            capability_mask: 0x15161718,
            diag_code: 0x191a,
            m_key_lease_period: 0x1b1c,
            local_port_num: 0x1d,
            link_width_enabled: 0x1e,
            link_width_supported: 0x1f,
            link_width_active: 0x20,
            link_speed_supported: 0x7,
            port_state: PortState::Armed,
            port_physical_state: PhysState::LinkUp,
            link_down_default_state: 2,
            m_key_protect_bits: 3,
            lmc: 5,
            link_speed_active: 0x4,
            link_speed_enabled: 0x6,
            neighbor_mtu: 5,
            master_sm_sl: 0xa,
            vl_cap: 4,
            init_type: 0x9,
            vl_high_limit: 0x21,
            vl_arbitration_high_cap: 0x22,
            vl_arbitration_low_cap: 0x23,
            init_type_reply: 0xc,
            mtu_cap: 4,
            vl_stall_count: 6,
            hoq_life: 0x13,
            operational_vls: 3,
            partition_enforcement_inbound: true,
            partition_enforcement_outbound: false,
            filter_raw_inbound: true,
            filter_raw_outbound: false,
            m_key_violations: 0x2425,
            p_key_violations: 0x2627,
            q_key_violations: 0x2829,
            guid_cap: 0x2a,
            client_reregister: true,
            multicast_pkey_trap_suppression: 2,
            subnet_timeout: 0x12,
            resp_time_value: 0x11,
            local_phy_errors: 0xb,
            overrun_errors: 0xd,
            max_credit_hint: 0x2b2c,
            link_speed_ext2_active: 1,
            link_speed_ext2_supported: 3,
            link_speed_ext2_enabled: 5,
            link_round_trip_latency: 0x2d2e2f,
            capability_mask2: 0x3031,
            link_speed_ext_active: 0x2,
            link_speed_ext_supported: 0x3,
            link_speed_ext_enabled: 0x17,
        }
    }

    #[test]
    fn layout() {
        let mut buf = [0xffu8; LEN];
        sample().emit(&mut Packet::new_unchecked(&mut buf[..]));
        let expect: [u8; LEN] = [
            1, 2, 3, 4, 5, 6, 7, 8, // M_Key
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, // GidPrefix
            0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, // LID, SM LID, CapMask
            0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, // diag, lease, port, widths
            0x73, // LinkSpeedSupported 7 | PortState Armed
            0x52, // LinkUp | Polling
            0xc5, // ProtectBits 3 | LMC 5
            0x46, // LinkSpeedActive 4 | Enabled 6
            0x5a, // NeighborMTU 4096 | SMSL 10
            0x49, // VLCap 4 | InitType 9
            0x21, 0x22, 0x23, // VLHighLimit, arb caps
            0xc4, // InitTypeReply | MTUCap
            0xd3, // VLStallCount 6 | HOQLife 0x13
            0x3a, // OperationalVLs 3 | PEI | FRI
            0x24, 0x25, 0x26, 0x27, 0x28, 0x29, // violations
            0x2a, // GUIDCap
            0xd2, // ClientReregister | suppression 2 | SubnetTimeOut 0x12
            0x11, // RespTimeValue
            0xbd, // LocalPhyErrors | OverrunErrors
            0x2b, 0x2c, // MaxCreditHint
            0x3d, // reserved | LinkSpeedExtActive2 1 | Supported2 3 | Enabled2 5
            0x2d, 0x2e, 0x2f, // LinkRoundTripLatency
            0x30, 0x31, // CapabilityMask2
            0x23, // LinkSpeedExtActive 2 | Supported 3
            0x17, // LinkSpeedExtEnabled
        ];
        assert_eq!(buf, expect);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Ok(sample())
        );
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut buf = [0u8; LEN];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_port_state(0xff);
        p.set_lmc(0xff);
        p.set_client_reregister(true);
        assert_eq!(buf[32], 0x0f);
        assert_eq!(buf[34], 0x07);
        assert_eq!(buf[51], 0x80);
        assert_eq!(buf.iter().filter(|&&b| b != 0).count(), 3);
    }

    #[test]
    fn reserved_states_refused() {
        let mut buf = [0u8; LEN];
        buf[32] = 0x06;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(bad("PortState", 6u8))
        );
        buf[32] = 0x04;
        buf[33] = 0x80;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(bad("PortPhysicalState", 8u8))
        );
        assert!(Packet::new_checked(&buf[..63]).is_err());
        assert_eq!(mtu::bytes(mtu::MTU_4096), Some(4096));
        assert_eq!(mtu::bytes(0), None);
        assert_eq!(Repr::data_vls(4), Some(8));
    }
}
