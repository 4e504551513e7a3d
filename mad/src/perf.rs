//! Performance management (IBA 16.1): the PMA class every port answers on
//! QP1, and its PortCounters and PortCountersExtended attributes.
//!
//! A PMA MAD is the common 24-byte MAD header, 40 reserved bytes, then a
//! 192-byte attribute at offset 64. The error counters in PortCounters
//! stop at all ones rather than wrap (IBA 16.1.3.5), so a reader tells a
//! counter that was cleared (smaller than before) from one that is stuck
//! at its maximum (all ones).
//!
//! ```text
//! PortCounters (0x0012)
//! offset  1  PortSelect   2 CounterSelect (16)
//!         4  SymbolErrorCounter (16)  6 LinkErrorRecoveryCounter  7 LinkDownedCounter
//!         8  PortRcvErrors (16)  10 PortRcvRemotePhysicalErrors (16)
//!        12  PortRcvSwitchRelayErrors (16)  14 PortXmitDiscards (16)
//!        16  PortXmitConstraintErrors  17 PortRcvConstraintErrors  18 CounterSelect2
//!        19  LocalLinkIntegrityErrors(4)|ExcessiveBufferOverrunErrors(4)
//!        20  QP1Dropped (16)  22 VL15Dropped (16)
//!        24  PortXmitData  28 PortRcvData  32 PortXmitPkts  36 PortRcvPkts  40 PortXmitWait (32 each)
//!
//! PortCountersExtended (0x001D)
//! offset  1  PortSelect   2 CounterSelect (16)
//!         8  PortXmitData  16 PortRcvData  24 PortXmitPkts  32 PortRcvPkts
//!        40  PortUnicastXmitPkts  48 PortUnicastRcvPkts
//!        56  PortMulticastXmitPkts  64 PortMulticastRcvPkts (64 each)
//! ```

use crate::field::{fields, packet};
use crate::Result;

/// Management class of the PMA.
pub const MGMT_CLASS: u8 = 0x04;
/// Class version of the PMA.
pub const CLASS_VERSION: u8 = 1;
/// Where the attribute starts in a PMA MAD.
pub const DATA_OFFSET: usize = 64;
/// Attribute length in a PMA MAD.
pub const DATA_LEN: usize = 192;
/// The GSI's well-known Q_Key (IBA 13.5.1.1), which a PMA request carries.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// PMA attribute IDs.
pub mod attr {
    /// ClassPortInfo: which optional counters the PMA has.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// PortCounters.
    pub const PORT_COUNTERS: u16 = 0x0012;
    /// PortCountersExtended.
    pub const PORT_COUNTERS_EXTENDED: u16 = 0x001D;
}

/// Length of PortCounters.
pub const COUNTERS_LEN: usize = 44;
/// Length of PortCountersExtended.
pub const EXTENDED_LEN: usize = 72;

packet!(
    /// A view of PortCounters.
    Counters,
    COUNTERS_LEN
);

fields! { Counters;
    /// PortSelect: the port the counters are of (0xFF: all ports).
    port_select, set_port_select: u8 @ 1;
    /// CounterSelect: in a Set, which counters to clear.
    counter_select, set_counter_select: u16 @ 2;
    /// SymbolErrorCounter.
    symbol_errors, set_symbol_errors: u16 @ 4;
    /// LinkErrorRecoveryCounter.
    link_error_recovery, set_link_error_recovery: u8 @ 6;
    /// LinkDownedCounter.
    link_downed, set_link_downed: u8 @ 7;
    /// PortRcvErrors.
    rcv_errors, set_rcv_errors: u16 @ 8;
    /// PortRcvRemotePhysicalErrors.
    rcv_remote_physical_errors, set_rcv_remote_physical_errors: u16 @ 10;
    /// PortRcvSwitchRelayErrors.
    rcv_switch_relay_errors, set_rcv_switch_relay_errors: u16 @ 12;
    /// PortXmitDiscards.
    xmit_discards, set_xmit_discards: u16 @ 14;
    /// PortXmitConstraintErrors.
    xmit_constraint_errors, set_xmit_constraint_errors: u8 @ 16;
    /// PortRcvConstraintErrors.
    rcv_constraint_errors, set_rcv_constraint_errors: u8 @ 17;
    /// CounterSelect2: in a Set, which of the later counters to clear.
    counter_select2, set_counter_select2: u8 @ 18;
    /// LocalLinkIntegrityErrors (4 bits).
    local_link_integrity_errors, set_local_link_integrity_errors: u8 @ 19 => bits 4, 4;
    /// ExcessiveBufferOverrunErrors (4 bits).
    excessive_buffer_overrun_errors, set_excessive_buffer_overrun_errors: u8 @ 19 => bits 0, 4;
    /// QP1Dropped.
    qp1_dropped, set_qp1_dropped: u16 @ 20;
    /// VL15Dropped.
    vl15_dropped, set_vl15_dropped: u16 @ 22;
    /// PortXmitData, in units of 4 bytes.
    xmit_data, set_xmit_data: u32 @ 24;
    /// PortRcvData, in units of 4 bytes.
    rcv_data, set_rcv_data: u32 @ 28;
    /// PortXmitPkts.
    xmit_pkts, set_xmit_pkts: u32 @ 32;
    /// PortRcvPkts.
    rcv_pkts, set_rcv_pkts: u32 @ 36;
    /// PortXmitWait.
    xmit_wait, set_xmit_wait: u32 @ 40;
}

packet!(
    /// A view of PortCountersExtended.
    Extended,
    EXTENDED_LEN
);

fields! { Extended;
    /// PortSelect.
    port_select, set_port_select: u8 @ 1;
    /// CounterSelect.
    counter_select, set_counter_select: u16 @ 2;
    /// PortXmitData (64 bits, units of 4 bytes).
    xmit_data, set_xmit_data: u64 @ 8;
    /// PortRcvData.
    rcv_data, set_rcv_data: u64 @ 16;
    /// PortXmitPkts.
    xmit_pkts, set_xmit_pkts: u64 @ 24;
    /// PortRcvPkts.
    rcv_pkts, set_rcv_pkts: u64 @ 32;
    /// PortUnicastXmitPkts.
    unicast_xmit_pkts, set_unicast_xmit_pkts: u64 @ 40;
    /// PortUnicastRcvPkts.
    unicast_rcv_pkts, set_unicast_rcv_pkts: u64 @ 48;
    /// PortMulticastXmitPkts.
    multicast_xmit_pkts, set_multicast_xmit_pkts: u64 @ 56;
    /// PortMulticastRcvPkts.
    multicast_rcv_pkts, set_multicast_rcv_pkts: u64 @ 64;
}

/// The counters of [`COUNTER_NAMES`] order, as read from one port.
pub const COUNTERS: usize = 18;

/// Each counter's name (as `perfquery` prints it) and width in bits; the
/// order of [`CountersRepr::values`].
pub const COUNTER_NAMES: [(&str, u32); COUNTERS] = [
    ("SymbolErrorCounter", 16),
    ("LinkErrorRecoveryCounter", 8),
    ("LinkDownedCounter", 8),
    ("PortRcvErrors", 16),
    ("PortRcvRemotePhysicalErrors", 16),
    ("PortRcvSwitchRelayErrors", 16),
    ("PortXmitDiscards", 16),
    ("PortXmitConstraintErrors", 8),
    ("PortRcvConstraintErrors", 8),
    ("LocalLinkIntegrityErrors", 4),
    ("ExcessiveBufferOverrunErrors", 4),
    ("QP1Dropped", 16),
    ("VL15Dropped", 16),
    ("PortXmitData", 32),
    ("PortRcvData", 32),
    ("PortXmitPkts", 32),
    ("PortRcvPkts", 32),
    ("PortXmitWait", 32),
];

/// PortCounters as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CountersRepr {
    /// PortSelect.
    pub port_select: u8,
    /// CounterSelect (Set only).
    pub counter_select: u16,
    /// The counters in [`COUNTER_NAMES`] order.
    pub values: [u64; COUNTERS],
}

impl CountersRepr {
    /// Reads PortCounters; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Counters<&T>) -> Result<Self> {
        p.check_len()?;
        let values = [
            p.symbol_errors().into(),
            p.link_error_recovery().into(),
            p.link_downed().into(),
            p.rcv_errors().into(),
            p.rcv_remote_physical_errors().into(),
            p.rcv_switch_relay_errors().into(),
            p.xmit_discards().into(),
            p.xmit_constraint_errors().into(),
            p.rcv_constraint_errors().into(),
            p.local_link_integrity_errors().into(),
            p.excessive_buffer_overrun_errors().into(),
            p.qp1_dropped().into(),
            p.vl15_dropped().into(),
            p.xmit_data().into(),
            p.rcv_data().into(),
            p.xmit_pkts().into(),
            p.rcv_pkts().into(),
            p.xmit_wait().into(),
        ];
        Ok(Self { port_select: p.port_select(), counter_select: p.counter_select(), values })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        COUNTERS_LEN
    }

    /// Writes PortCounters (each value cut to its field's width).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Counters<&mut T>) {
        let v = &self.values;
        p.set_port_select(self.port_select);
        p.set_counter_select(self.counter_select);
        p.set_symbol_errors(v[0] as u16);
        p.set_link_error_recovery(v[1] as u8);
        p.set_link_downed(v[2] as u8);
        p.set_rcv_errors(v[3] as u16);
        p.set_rcv_remote_physical_errors(v[4] as u16);
        p.set_rcv_switch_relay_errors(v[5] as u16);
        p.set_xmit_discards(v[6] as u16);
        p.set_xmit_constraint_errors(v[7] as u8);
        p.set_rcv_constraint_errors(v[8] as u8);
        p.set_local_link_integrity_errors(v[9] as u8);
        p.set_excessive_buffer_overrun_errors(v[10] as u8);
        p.set_qp1_dropped(v[11] as u16);
        p.set_vl15_dropped(v[12] as u16);
        p.set_xmit_data(v[13] as u32);
        p.set_rcv_data(v[14] as u32);
        p.set_xmit_pkts(v[15] as u32);
        p.set_rcv_pkts(v[16] as u32);
        p.set_xmit_wait(v[17] as u32);
    }
}

/// PortCountersExtended as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExtendedRepr {
    /// PortSelect.
    pub port_select: u8,
    /// PortXmitData, PortRcvData, PortXmitPkts, PortRcvPkts, then the
    /// unicast and multicast xmit/rcv packet counts.
    pub values: [u64; 8],
}

/// Names of [`ExtendedRepr::values`].
pub const EXTENDED_NAMES: [&str; 8] = [
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
    "PortUnicastXmitPkts",
    "PortUnicastRcvPkts",
    "PortMulticastXmitPkts",
    "PortMulticastRcvPkts",
];

impl ExtendedRepr {
    /// Reads PortCountersExtended; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Extended<&T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self {
            port_select: p.port_select(),
            values: [
                p.xmit_data(),
                p.rcv_data(),
                p.xmit_pkts(),
                p.rcv_pkts(),
                p.unicast_xmit_pkts(),
                p.unicast_rcv_pkts(),
                p.multicast_xmit_pkts(),
                p.multicast_rcv_pkts(),
            ],
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        EXTENDED_LEN
    }

    /// Writes PortCountersExtended.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Extended<&mut T>) {
        let v = &self.values;
        p.set_port_select(self.port_select);
        p.set_xmit_data(v[0]);
        p.set_rcv_data(v[1]);
        p.set_xmit_pkts(v[2]);
        p.set_rcv_pkts(v[3]);
        p.set_unicast_xmit_pkts(v[4]);
        p.set_unicast_rcv_pkts(v[5]);
        p.set_multicast_xmit_pkts(v[6]);
        p.set_multicast_rcv_pkts(v[7]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip_at_the_offsets_perfquery_reads() {
        let mut values = [0u64; COUNTERS];
        for (i, v) in values.iter_mut().enumerate() {
            *v = (i as u64 + 1) & ((1u64 << COUNTER_NAMES[i].1) - 1);
        }
        let repr = CountersRepr { port_select: 3, counter_select: 0, values };
        let mut buf = [0u8; COUNTERS_LEN];
        repr.emit(&mut Counters::new_unchecked(&mut buf[..]));
        // SymbolErrorCounter 1 at 4..6, PortXmitData 14 at 24..28,
        // LocalLinkIntegrity 10 / ExcessiveBufferOverrun 11 share byte 19.
        assert_eq!(&buf[4..6], &[0, 1]);
        assert_eq!(&buf[24..28], &[0, 0, 0, 14]);
        assert_eq!(buf[19], 0xAB);
        let back = CountersRepr::parse(&Counters::new_checked(&buf[..]).expect("long enough")).expect("parse");
        assert_eq!(back, repr);
    }

    #[test]
    fn extended_round_trips_and_short_buffers_are_refused() {
        let repr = ExtendedRepr { port_select: 1, values: [1 << 40, 2, 3, 4, 5, 6, 7, u64::MAX] };
        let mut buf = [0u8; EXTENDED_LEN];
        repr.emit(&mut Extended::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[8..16], &(1u64 << 40).to_be_bytes());
        let back = ExtendedRepr::parse(&Extended::new_checked(&buf[..]).expect("long enough")).expect("parse");
        assert_eq!(back, repr);
        assert!(Extended::new_checked(&buf[..40]).is_err());
        assert!(Counters::new_checked(&buf[..43]).is_err());
    }
}
