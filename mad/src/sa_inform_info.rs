//! InformInfo (IBA 13.4.8.3) and InformInfoRecord (IBA 15.2.5.12): a
//! subscription to traps the SA forwards as Reports.
//!
//! ```text
//! InformInfo
//! offset  0  GID (128)
//!        16  LIDRangeBegin (16)  LIDRangeEnd (16)
//!        20  reserved (16)  IsGeneric  Subscribe
//!        24  Type (16)  TrapNumber / DeviceID (16)
//!        28  QPN (24)  reserved(3)|RespTimeValue(5)
//!        32  reserved (8)  ProducerType / VendorID (24)
//!
//! InformInfoRecord
//! offset  0  SubscriberGID (128)
//!        16  Enum (16)  reserved (48)
//!        24  InformInfo (36 bytes)
//!        60  padding to 64 (AttributeOffset 8)
//! ```

use crate::field::{fields, nested, packet};
use crate::sa::{c, gid_at, repr_io, set_gid_at, Component};

/// Length of InformInfo.
pub const LEN: usize = 36;
/// Length of InformInfoRecord's fields.
pub const RECORD_LEN: usize = 24 + LEN;
/// Length of InformInfoRecord in a GetTable answer.
pub const RECORD_PADDED_LEN: usize = 64;
/// LIDRangeBegin value meaning "every LID".
pub const ALL_LIDS: u16 = 0xFFFF;
/// Type / TrapNumber / ProducerType value meaning "any" (all ones).
pub const ANY_TYPE: u16 = 0xFFFF;

/// InformInfoRecord's ComponentMask bits, in record order.
pub const RECORD_COMPONENTS: &[Component] = &[
    c(0, 128),   // SubscriberGID
    c(128, 16),  // Enum
    c(144, 48),  // reserved
    c(192, 128), // GID
    c(320, 16),  // LIDRangeBegin
    c(336, 16),  // LIDRangeEnd
    c(352, 16),  // reserved
    c(368, 8),   // IsGeneric
    c(376, 8),   // Subscribe
    c(384, 16),  // Type
    c(400, 16),  // TrapNumber / DeviceID
    c(416, 24),  // QPN
    c(440, 3),   // reserved
    c(443, 5),   // RespTimeValue
    c(448, 8),   // reserved
    c(456, 24),  // ProducerType / VendorID
];

packet!(
    /// A view of InformInfo.
    Packet,
    LEN
);

fields! { Packet;
    /// LIDRangeBegin (0xFFFF: all).
    lid_range_begin, set_lid_range_begin: u16 @ 16;
    /// LIDRangeEnd.
    lid_range_end, set_lid_range_end: u16 @ 18;
    /// IsGeneric (1: generic traps).
    is_generic, set_is_generic: u8 @ 22;
    /// Subscribe (1) or unsubscribe (0).
    subscribe, set_subscribe: u8 @ 23;
    /// Type (0xFFFF: all).
    trap_type, set_trap_type: u16 @ 24;
    /// TrapNumber (generic) or DeviceID (vendor).
    trap_number, set_trap_number: u16 @ 26;
    /// QPN the Reports go to.
    qpn, set_qpn: u32 @ 28 => bits 8, 24;
    /// RespTimeValue.
    resp_time_value, set_resp_time_value: u8 @ 31 => bits 0, 5;
    /// ProducerType (generic) or VendorID (vendor).
    producer_type, set_producer_type: u24 @ 33;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// GID of the port whose traps are wanted (0: use the LID range).
    pub fn gid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets GID.
    pub fn set_gid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 0, gid)
    }
}

/// InformInfo as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)] // one field per wire field
pub struct Repr {
    pub gid: u128,
    pub lid_range_begin: u16,
    pub lid_range_end: u16,
    pub is_generic: u8,
    pub subscribe: u8,
    pub trap_type: u16,
    pub trap_number: u16,
    /// 24 bits.
    pub qpn: u32,
    /// 5 bits.
    pub resp_time_value: u8,
    /// 24 bits.
    pub producer_type: u32,
}

repr_io! { Packet => Repr, LEN;
    /// Reads InformInfo; fails only on a short buffer.
    parse;
    /// Writes InformInfo, reserved bits zeroed.
    emit [20..22, 31..33];
    gid: get gid, set_gid;
    lid_range_begin: get lid_range_begin, set_lid_range_begin;
    lid_range_end: get lid_range_end, set_lid_range_end;
    is_generic: get is_generic, set_is_generic;
    subscribe: get subscribe, set_subscribe;
    trap_type: get trap_type, set_trap_type;
    trap_number: get trap_number, set_trap_number;
    qpn: get qpn, set_qpn;
    resp_time_value: get resp_time_value, set_resp_time_value;
    producer_type: get producer_type, set_producer_type;
}

impl Repr {
    /// Whether a generic trap `number` from a port at `lid` with `gid`,
    /// produced by `producer`, falls under this subscription.
    pub fn covers(&self, number: u16, trap_type: u8, producer: u32, lid: u16, gid: u128) -> bool {
        let any16 = |v: u16| v == ANY_TYPE;
        let source = if self.gid != 0 {
            self.gid == gid
        } else {
            self.lid_range_begin == ALL_LIDS
                || (lid >= self.lid_range_begin
                    && lid <= self.lid_range_end.max(self.lid_range_begin))
        };
        self.is_generic == 1
            && source
            && (any16(self.trap_number) || self.trap_number == number)
            && (any16(self.trap_type) || self.trap_type == u16::from(trap_type))
            && (self.producer_type == 0xFF_FFFF || self.producer_type == producer)
    }
}

packet!(
    /// A view of InformInfoRecord.
    RecordPacket,
    RECORD_LEN
);

fields! { RecordPacket;
    /// Enum: tells apart several subscriptions of one subscriber.
    subscriber_enum, set_subscriber_enum: u16 @ 16;
}

nested! { RecordPacket;
    /// The InformInfo inside.
    inform_info, inform_info_mut: Packet @ 24..RECORD_LEN;
}

impl<T: AsRef<[u8]>> RecordPacket<T> {
    /// SubscriberGID.
    pub fn subscriber_gid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RecordPacket<T> {
    /// Sets SubscriberGID.
    pub fn set_subscriber_gid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 0, gid)
    }
}

/// InformInfoRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RecordRepr {
    /// SubscriberGID.
    pub subscriber_gid: u128,
    /// Enum.
    pub subscriber_enum: u16,
    /// The subscription.
    pub inform_info: Repr,
}

repr_io! { RecordPacket => RecordRepr, RECORD_LEN;
    /// Reads InformInfoRecord; fails only on a short buffer.
    parse;
    /// Writes InformInfoRecord, reserved bits zeroed.
    emit [18..24];
    subscriber_gid: get subscriber_gid, set_subscriber_gid;
    subscriber_enum: get subscriber_enum, set_subscriber_enum;
    inform_info: nested Repr, inform_info, inform_info_mut;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Repr {
        Repr {
            gid: 0,
            lid_range_begin: ALL_LIDS,
            lid_range_end: 0,
            is_generic: 1,
            subscribe: 1,
            trap_type: ANY_TYPE,
            trap_number: 64,
            qpn: 1,
            resp_time_value: 18,
            producer_type: 0xFF_FFFF,
        }
    }

    #[test]
    fn layout_and_round_trip() {
        let repr = sample();
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(
            &buf[16..36],
            &[0xff, 0xff, 0, 0, 0, 0, 1, 1, 0xff, 0xff, 0, 64, 0, 0, 1, 18, 0, 0xff, 0xff, 0xff]
        );

        let record = RecordRepr {
            subscriber_gid: 0xfe80 << 112 | 7,
            subscriber_enum: 3,
            inform_info: repr,
        };
        let rbuf = crate::sa::round_trip!(
            record,
            RECORD_PADDED_LEN,
            RECORD_LEN,
            RecordPacket,
            RecordRepr
        );
        assert_eq!(RECORD_COMPONENTS[1].value(&rbuf), 3);
        assert_eq!(RECORD_COMPONENTS[10].value(&rbuf), 64);
        assert_eq!(RECORD_COMPONENTS[11].value(&rbuf), 1);
    }

    #[test]
    fn coverage() {
        let all = sample();
        assert!(all.covers(64, 4, 4, 5, 1));
        assert!(!all.covers(65, 4, 4, 5, 1));
        let mut range = all;
        range.lid_range_begin = 4;
        range.lid_range_end = 6;
        assert!(range.covers(64, 4, 4, 6, 1));
        assert!(!range.covers(64, 4, 4, 7, 1));
        let mut by_gid = all;
        by_gid.gid = 9;
        assert!(by_gid.covers(64, 4, 4, 100, 9));
        assert!(!by_gid.covers(64, 4, 4, 100, 8));
    }
}
