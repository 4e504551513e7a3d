//! SwitchInfoRecord (IBA 15.2.5.4): a switch's SwitchInfo by its LID.
//!
//! ```text
//! offset  0  LID (16)  reserved (16)
//!         4  SwitchInfo (20 bytes)
//! ```

use crate::field::{fields, nested, packet};
use crate::sa::{components, repr_io};
use crate::switch_info::{self, Packet as SwitchInfoPacket, Repr as SwitchInfoRepr};

/// Length of the record (AttributeOffset 3).
pub const LEN: usize = 4 + switch_info::LEN;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = 24;

// SwitchInfo's fields follow LID.
components! {
    /// LID.
    c(0, 16) => LID,
    c(16, 16),  // reserved
    c(32, 16),  // LinearFDBCap
    c(48, 16),  // RandomFDBCap
    c(64, 16),  // MulticastFDBCap
    c(80, 16),  // LinearFDBTop
    c(96, 8),   // DefaultPort
    c(104, 8),  // DefaultMulticastPrimaryPort
    c(112, 8),  // DefaultMulticastNotPrimaryPort
    c(120, 5),  // LifeTimeValue
    c(125, 1),  // PortStateChange
    c(126, 2),  // OptimizedSLtoVLMappingProgramming
    c(128, 16), // LIDsPerPort
    c(144, 16), // PartitionEnforcementCap
    c(160, 1),  // InboundEnforcementCap
    c(161, 1),  // OutboundEnforcementCap
    c(162, 1),  // FilterRawInboundCap
    c(163, 1),  // FilterRawOutboundCap
    c(164, 1),  // EnhancedPort0
    c(165, 11), // reserved
    c(176, 16), // MulticastFDBTop
}

packet!(
    /// A view of SwitchInfoRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the switch (its port 0).
    lid, set_lid: u16 @ 0;
}

nested! { Packet;
    /// The SwitchInfo inside.
    switch_info, switch_info_mut: SwitchInfoPacket @ 4..LEN;
}

/// SwitchInfoRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The switch's LID.
    pub lid: u16,
    /// Its SwitchInfo.
    pub switch_info: SwitchInfoRepr,
}

repr_io! { Packet => Repr, LEN;
    /// Reads SwitchInfoRecord; fails only on a short buffer.
    parse;
    /// Writes SwitchInfoRecord, reserved bits zeroed.
    emit [2..4];
    lid: get lid, set_lid;
    switch_info: nested SwitchInfoRepr, switch_info, switch_info_mut;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            lid: 9,
            switch_info: SwitchInfoRepr {
                linear_fdb_cap: 0xc000,
                linear_fdb_top: 0x40,
                life_time_value: 0x12,
                port_state_change: true,
                lids_per_port: 1,
                enhanced_port0: true,
                multicast_fdb_top: 0xc003,
                ..Default::default()
            },
        };
        let buf = crate::sa::round_trip!(repr, PADDED_LEN);
        assert_eq!(&buf[..6], &[0, 9, 0, 0, 0xc0, 0]);
        assert_eq!(COMPONENTS[5].value(&buf), 0x40);
        assert_eq!(COMPONENTS[9].value(&buf), 0x12);
        assert_eq!(COMPONENTS[10].value(&buf), 1);
        assert_eq!(COMPONENTS[18].value(&buf), 1);
        assert_eq!(COMPONENTS[20].value(&buf), 0xc003);
    }
}
