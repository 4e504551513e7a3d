//! SwitchInfo (IBA 14.2.5.4): forwarding table sizes and switch-wide
//! settings. The SM sets LinearFDBTop before programming LFT blocks and
//! clears PortStateChange after a light sweep sees it set.
//!
//! ```text
//! offset  0  LinearFDBCap (16)  RandomFDBCap (16)
//!         4  MulticastFDBCap (16)  LinearFDBTop (16)
//!         8  DefaultPort  DefaultMulticastPrimaryPort  DefaultMulticastNotPrimaryPort
//!        11  LifeTimeValue(5)|PortStateChange(1)|OptimizedSLtoVLMappingProgramming(2)
//!        12  LIDsPerPort (16)  PartitionEnforcementCap (16)
//!        16  InboundEnforcementCap|OutboundEnforcementCap|FilterRawInboundCap
//!            |FilterRawOutboundCap|EnhancedPort0|reserved(3)
//!        17  reserved
//!        18  MulticastFDBTop (16)
//! ```

use crate::field::{fields, packet};
use crate::Result;

/// Length of SwitchInfo.
pub const LEN: usize = 20;

packet!(
    /// A view of SwitchInfo.
    Packet,
    LEN
);

fields! { Packet;
    /// LinearFDBCap: LFT entries the switch has.
    linear_fdb_cap, set_linear_fdb_cap: u16 @ 0;
    /// RandomFDBCap.
    random_fdb_cap, set_random_fdb_cap: u16 @ 2;
    /// MulticastFDBCap: MFT entries (multicast LIDs).
    multicast_fdb_cap, set_multicast_fdb_cap: u16 @ 4;
    /// LinearFDBTop: highest LID the LFT forwards; above it, drop.
    linear_fdb_top, set_linear_fdb_top: u16 @ 6;
    /// DefaultPort.
    default_port, set_default_port: u8 @ 8;
    /// DefaultMulticastPrimaryPort.
    default_multicast_primary_port, set_default_multicast_primary_port: u8 @ 9;
    /// DefaultMulticastNotPrimaryPort.
    default_multicast_not_primary_port, set_default_multicast_not_primary_port: u8 @ 10;
    /// LifeTimeValue: packet lifetime in the switch, 4.096 µs × 2^value.
    life_time_value, set_life_time_value: u8 @ 11 => bits 3, 5;
    /// PortStateChange: some port changed state since the SM last
    /// cleared it (the SM writes 1 to clear).
    port_state_change, set_port_state_change: bool @ 11 => bit 2;
    /// OptimizedSLtoVLMappingProgramming.
    optimized_sl2vl_programming, set_optimized_sl2vl_programming: u8 @ 11 => bits 0, 2;
    /// LIDsPerPort.
    lids_per_port, set_lids_per_port: u16 @ 12;
    /// PartitionEnforcementCap.
    partition_enforcement_cap, set_partition_enforcement_cap: u16 @ 14;
    /// InboundEnforcementCap.
    inbound_enforcement_cap, set_inbound_enforcement_cap: bool @ 16 => bit 7;
    /// OutboundEnforcementCap.
    outbound_enforcement_cap, set_outbound_enforcement_cap: bool @ 16 => bit 6;
    /// FilterRawInboundCap.
    filter_raw_inbound_cap, set_filter_raw_inbound_cap: bool @ 16 => bit 5;
    /// FilterRawOutboundCap.
    filter_raw_outbound_cap, set_filter_raw_outbound_cap: bool @ 16 => bit 4;
    /// EnhancedPort0: port 0 supports enhanced functions (SL2VL, VLArb).
    enhanced_port0, set_enhanced_port0: bool @ 16 => bit 3;
    /// MulticastFDBTop: highest multicast LID in use (0xBFFF: none).
    multicast_fdb_top, set_multicast_fdb_top: u16 @ 18;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes the reserved bits of bytes 16 and 17.
    pub fn clear_reserved(&mut self) {
        let buf = self.buffer.as_mut();
        buf[16] &= 0xF8;
        buf[17] = 0;
    }
}

/// SwitchInfo as values. Sub-byte fields hold the low bits only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)] // one field per wire field, named as in the IBA table
pub struct Repr {
    pub linear_fdb_cap: u16,
    pub random_fdb_cap: u16,
    pub multicast_fdb_cap: u16,
    pub linear_fdb_top: u16,
    pub default_port: u8,
    pub default_multicast_primary_port: u8,
    pub default_multicast_not_primary_port: u8,
    /// 5 bits.
    pub life_time_value: u8,
    pub port_state_change: bool,
    /// 2 bits.
    pub optimized_sl2vl_programming: u8,
    pub lids_per_port: u16,
    pub partition_enforcement_cap: u16,
    pub inbound_enforcement_cap: bool,
    pub outbound_enforcement_cap: bool,
    pub filter_raw_inbound_cap: bool,
    pub filter_raw_outbound_cap: bool,
    pub enhanced_port0: bool,
    pub multicast_fdb_top: u16,
}

impl Repr {
    /// Reads SwitchInfo; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            linear_fdb_cap: packet.linear_fdb_cap(),
            random_fdb_cap: packet.random_fdb_cap(),
            multicast_fdb_cap: packet.multicast_fdb_cap(),
            linear_fdb_top: packet.linear_fdb_top(),
            default_port: packet.default_port(),
            default_multicast_primary_port: packet.default_multicast_primary_port(),
            default_multicast_not_primary_port: packet.default_multicast_not_primary_port(),
            life_time_value: packet.life_time_value(),
            port_state_change: packet.port_state_change(),
            optimized_sl2vl_programming: packet.optimized_sl2vl_programming(),
            lids_per_port: packet.lids_per_port(),
            partition_enforcement_cap: packet.partition_enforcement_cap(),
            inbound_enforcement_cap: packet.inbound_enforcement_cap(),
            outbound_enforcement_cap: packet.outbound_enforcement_cap(),
            filter_raw_inbound_cap: packet.filter_raw_inbound_cap(),
            filter_raw_outbound_cap: packet.filter_raw_outbound_cap(),
            enhanced_port0: packet.enhanced_port0(),
            multicast_fdb_top: packet.multicast_fdb_top(),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes SwitchInfo, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.clear_reserved();
        packet.set_linear_fdb_cap(self.linear_fdb_cap);
        packet.set_random_fdb_cap(self.random_fdb_cap);
        packet.set_multicast_fdb_cap(self.multicast_fdb_cap);
        packet.set_linear_fdb_top(self.linear_fdb_top);
        packet.set_default_port(self.default_port);
        packet.set_default_multicast_primary_port(self.default_multicast_primary_port);
        packet.set_default_multicast_not_primary_port(self.default_multicast_not_primary_port);
        packet.set_life_time_value(self.life_time_value);
        packet.set_port_state_change(self.port_state_change);
        packet.set_optimized_sl2vl_programming(self.optimized_sl2vl_programming);
        packet.set_lids_per_port(self.lids_per_port);
        packet.set_partition_enforcement_cap(self.partition_enforcement_cap);
        packet.set_inbound_enforcement_cap(self.inbound_enforcement_cap);
        packet.set_outbound_enforcement_cap(self.outbound_enforcement_cap);
        packet.set_filter_raw_inbound_cap(self.filter_raw_inbound_cap);
        packet.set_filter_raw_outbound_cap(self.filter_raw_outbound_cap);
        packet.set_enhanced_port0(self.enhanced_port0);
        packet.set_multicast_fdb_top(self.multicast_fdb_top);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            linear_fdb_cap: 0xc000,
            random_fdb_cap: 0x0102,
            multicast_fdb_cap: 0x0400,
            linear_fdb_top: 0x0305,
            default_port: 4,
            default_multicast_primary_port: 5,
            default_multicast_not_primary_port: 6,
            life_time_value: 18,
            port_state_change: true,
            optimized_sl2vl_programming: 1,
            lids_per_port: 7,
            partition_enforcement_cap: 32,
            inbound_enforcement_cap: true,
            outbound_enforcement_cap: false,
            filter_raw_inbound_cap: false,
            filter_raw_outbound_cap: true,
            enhanced_port0: true,
            multicast_fdb_top: 0xc010,
        };
        let mut buf = [0xffu8; LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(
            buf,
            [0xc0, 0, 1, 2, 4, 0, 3, 5, 4, 5, 6, 0x95, 0, 7, 0, 32, 0x98, 0, 0xc0, 0x10]
        );
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(Packet::new_checked(&buf[..19]).is_err());
    }
}
