//! PortInfoRecord (IBA 15.2.5.3): a port's PortInfo, keyed by the LID of
//! its node's port (a switch's ports all use its port-0 LID) and the port
//! number.
//!
//! ```text
//! offset  0  EndportLID (16)  PortNum  Options
//!         4  PortInfo (64 bytes)
//!        68  padding to 72 (AttributeOffset 9)
//! ```

use crate::field::{fields, nested, packet};
use crate::port_info::{self, Packet as PortInfoPacket, Repr as PortInfoRepr};
use crate::sa::{components, repr_io};

/// Length of the record's fields.
pub const LEN: usize = 4 + port_info::LEN;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = 72;

// LID, PortNum, Options, then every PortInfo field (reserved ones
// included).
components! {
    /// EndportLID.
    c(0, 16) => LID,
    /// PortNum.
    c(16, 8) => PORT_NUM,
    /// Options.
    c(24, 8) => OPTIONS,
    c(32, 64),  // M_Key
    c(96, 64),  // GidPrefix
    /// PortInfo.LID (the base LID).
    c(160, 16) => BASE_LID,
    c(176, 16), // MasterSMLID
    /// PortInfo.CapabilityMask.
    c(192, 32) => CAPABILITY_MASK,
    c(224, 16), // DiagCode
    c(240, 16), // M_KeyLeasePeriod
    c(256, 8),  // LocalPortNum
    c(264, 8),  // LinkWidthEnabled
    c(272, 8),  // LinkWidthSupported
    c(280, 8),  // LinkWidthActive
    c(288, 4),  // LinkSpeedSupported
    /// PortInfo.PortState.
    c(292, 4) => PORT_STATE,
    c(296, 4),  // PortPhysicalState
    c(300, 4),  // LinkDownDefaultState
    c(304, 2),  // M_KeyProtectBits
    c(306, 3),  // reserved
    c(309, 3),  // LMC
    c(312, 4),  // LinkSpeedActive
    c(316, 4),  // LinkSpeedEnabled
    c(320, 4),  // NeighborMTU
    c(324, 4),  // MasterSMSL
    c(328, 4),  // VLCap
    c(332, 4),  // InitType
    c(336, 8),  // VLHighLimit
    c(344, 8),  // VLArbitrationHighCap
    c(352, 8),  // VLArbitrationLowCap
    c(360, 4),  // InitTypeReply
    c(364, 4),  // MTUCap
    c(368, 3),  // VLStallCount
    c(371, 5),  // HOQLife
    c(376, 4),  // OperationalVLs
    c(380, 1),  // PartitionEnforcementInbound
    c(381, 1),  // PartitionEnforcementOutbound
    c(382, 1),  // FilterRawInbound
    c(383, 1),  // FilterRawOutbound
    c(384, 16), // M_KeyViolations
    c(400, 16), // P_KeyViolations
    c(416, 16), // Q_KeyViolations
    c(432, 8),  // GUIDCap
    c(440, 1),  // ClientReregister
    c(441, 2),  // MulticastPKeyTrapSuppressionEnabled
    c(443, 5),  // SubnetTimeOut
    c(448, 3),  // reserved
    c(451, 5),  // RespTimeValue
    c(456, 4),  // LocalPhyErrors
    c(460, 4),  // OverrunErrors
    c(464, 16), // MaxCreditHint
    c(480, 8),  // reserved
    c(488, 24), // LinkRoundTripLatency
    c(512, 16), // CapabilityMask2
    c(528, 4),  // LinkSpeedExtActive
    c(532, 4),  // LinkSpeedExtSupported
    c(536, 3),  // reserved
    c(539, 5),  // LinkSpeedExtEnabled
}

packet!(
    /// A view of PortInfoRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// EndportLID: the LID of the node's port (port 0 on a switch).
    lid, set_lid: u16 @ 0;
    /// PortNum.
    port_num, set_port_num: u8 @ 2;
    /// Options (IBA 1.3): bit 0 asks for ports whose capability mask matches.
    options, set_options: u8 @ 3;
}

nested! { Packet;
    /// The PortInfo inside.
    port_info, port_info_mut: PortInfoPacket @ 4..LEN;
}

/// PortInfoRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// EndportLID.
    pub lid: u16,
    /// PortNum.
    pub port_num: u8,
    /// Options.
    pub options: u8,
    /// The port's PortInfo.
    pub port_info: PortInfoRepr,
}

repr_io! { Packet => Repr, LEN;
    /// Reads PortInfoRecord; fails on a short buffer or a reserved port state.
    parse;
    /// Writes PortInfoRecord.
    emit [];
    lid: get lid, set_lid;
    port_num: get port_num, set_port_num;
    options: get options, set_options;
    port_info: nested PortInfoRepr, port_info, port_info_mut;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port_info::PortState;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            lid: 0x21,
            port_num: 3,
            options: 0,
            port_info: PortInfoRepr {
                gid_prefix: 0xfe80_0000_0000_0000,
                lid: 0x21,
                capability_mask: 0x0251_0a6a,
                port_state: PortState::Active,
                lmc: 2,
                neighbor_mtu: 4,
                link_speed_ext_enabled: 0x1e,
                ..Default::default()
            },
        };
        let buf = crate::sa::round_trip!(repr, PADDED_LEN);
        assert_eq!(&buf[..4], &[0, 0x21, 3, 0]);
        assert_eq!(COMPONENTS.len(), 58);
        assert_eq!(COMPONENTS[4].value(&buf), 0xfe80_0000_0000_0000);
        assert_eq!(COMPONENTS[5].value(&buf), 0x21);
        assert_eq!(COMPONENTS[7].value(&buf), 0x0251_0a6a);
        assert_eq!(COMPONENTS[15].value(&buf), 4, "PortState");
        assert_eq!(COMPONENTS[20].value(&buf), 2, "LMC");
        assert_eq!(COMPONENTS[23].value(&buf), 4, "NeighborMTU");
        assert_eq!(COMPONENTS[57].value(&buf), 0x1e);
    }
}
