//! PathRecord (IBA 15.2.5.16): the properties of a path between two end
//! ports — LIDs, GIDs, SL, MTU, rate, packet lifetime.
//!
//! ```text
//! offset  0  ServiceID (64)
//!         8  DGID (128)
//!        24  SGID (128)
//!        40  DLID (16)  SLID (16)
//!        44  RawTraffic(1)|reserved(3)|FlowLabel(20)|HopLimit(8)
//!        48  TClass  Reversible(1)|NumbPath(7)  P_Key (16)
//!        52  QoSClass(12)|SL(4)  MTUSelector(2)|MTU(6)  RateSelector(2)|Rate(6)
//!        56  PacketLifeTimeSelector(2)|PacketLifeTime(6)  Preference  reserved (48)
//! ```

use crate::field::{fields, packet};
use crate::sa::{components, gid_at, repr_io, set_gid_at};

/// Length of the record (AttributeOffset 8).
pub const LEN: usize = 64;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;

components! {
    c(0, 32),  // ServiceID (upper half)
    c(32, 32), // ServiceID (lower half)
    /// DGID.
    c(64, 128) => DGID,
    /// SGID.
    c(192, 128) => SGID,
    /// DLID.
    c(320, 16) => DLID,
    /// SLID.
    c(336, 16) => SLID,
    /// RawTraffic.
    c(352, 1) => RAW_TRAFFIC,
    c(353, 3), // reserved
    /// FlowLabel.
    c(356, 20) => FLOW_LABEL,
    /// HopLimit.
    c(376, 8) => HOP_LIMIT,
    /// TClass.
    c(384, 8) => TCLASS,
    /// Reversible.
    c(392, 1) => REVERSIBLE,
    /// NumbPath.
    c(393, 7) => NUMB_PATH,
    /// P_Key.
    c(400, 16) => PKEY,
    /// QoSClass.
    c(416, 12) => QOS_CLASS,
    /// SL.
    c(428, 4) => SL,
    /// MTUSelector.
    c(432, 2) => MTU_SELECTOR,
    /// MTU.
    c(434, 6) => MTU,
    /// RateSelector.
    c(440, 2) => RATE_SELECTOR,
    /// Rate.
    c(442, 6) => RATE,
    /// PacketLifeTimeSelector.
    c(448, 2) => PKT_LIFE_SELECTOR,
    /// PacketLifeTime.
    c(450, 6) => PKT_LIFE,
    /// Preference.
    c(456, 8) => PREFERENCE,
    ;
    /// ServiceID, both halves.
    pub const SERVICE_ID: u64 = 0x3;
}

/// The selector values of MTU, rate and packet lifetime (IBA 15.2.5.16).
pub mod selector {
    /// Greater than the value given.
    pub const GREATER: u8 = 0;
    /// Less than the value given.
    pub const LESS: u8 = 1;
    /// Exactly the value given.
    pub const EXACTLY: u8 = 2;
    /// The largest available.
    pub const LARGEST: u8 = 3;
}

packet!(
    /// A view of PathRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// ServiceID.
    service_id, set_service_id: u64 @ 0;
    /// DLID.
    dlid, set_dlid: u16 @ 40;
    /// SLID.
    slid, set_slid: u16 @ 42;
    /// RawTraffic.
    raw_traffic, set_raw_traffic: bool @ 44 => bit 7;
    /// FlowLabel (20 bits).
    flow_label, set_flow_label: u32 @ 44 => bits 8, 20;
    /// HopLimit.
    hop_limit, set_hop_limit: u8 @ 47;
    /// TClass.
    tclass, set_tclass: u8 @ 48;
    /// Reversible.
    reversible, set_reversible: bool @ 49 => bit 7;
    /// NumbPath: in a query, how many paths at most.
    numb_path, set_numb_path: u8 @ 49 => bits 0, 7;
    /// P_Key.
    pkey, set_pkey: u16 @ 50;
    /// QoSClass (12 bits).
    qos_class, set_qos_class: u16 @ 52 => bits 4, 12;
    /// SL (4 bits).
    sl, set_sl: u8 @ 53 => bits 0, 4;
    /// MTUSelector.
    mtu_selector, set_mtu_selector: u8 @ 54 => bits 6, 2;
    /// MTU (IBA encoding: 1 = 256 … 5 = 4096).
    mtu, set_mtu: u8 @ 54 => bits 0, 6;
    /// RateSelector.
    rate_selector, set_rate_selector: u8 @ 55 => bits 6, 2;
    /// Rate (IBA encoding: 2 = 2.5 Gb/s, 3 = 10, 6 = 20, 7 = 40, …).
    rate, set_rate: u8 @ 55 => bits 0, 6;
    /// PacketLifeTimeSelector.
    packet_life_time_selector, set_packet_life_time_selector: u8 @ 56 => bits 6, 2;
    /// PacketLifeTime (4.096 µs · 2^value).
    packet_life_time, set_packet_life_time: u8 @ 56 => bits 0, 6;
    /// Preference.
    preference, set_preference: u8 @ 57;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// DGID.
    pub fn dgid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 8)
    }

    /// SGID.
    pub fn sgid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets DGID.
    pub fn set_dgid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 8, gid)
    }

    /// Sets SGID.
    pub fn set_sgid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 24, gid)
    }
}

/// PathRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)] // one field per wire field
pub struct Repr {
    pub service_id: u64,
    pub dgid: u128,
    pub sgid: u128,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: bool,
    /// 20 bits.
    pub flow_label: u32,
    pub hop_limit: u8,
    pub tclass: u8,
    pub reversible: bool,
    /// 7 bits.
    pub numb_path: u8,
    pub pkey: u16,
    /// 12 bits.
    pub qos_class: u16,
    /// 4 bits.
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

repr_io! { Packet => Repr, LEN;
    /// Reads PathRecord; fails only on a short buffer.
    parse;
    /// Writes PathRecord, reserved bits zeroed.
    emit [44..45, 58..64];
    service_id: get service_id, set_service_id;
    dgid: get dgid, set_dgid;
    sgid: get sgid, set_sgid;
    dlid: get dlid, set_dlid;
    slid: get slid, set_slid;
    raw_traffic: get raw_traffic, set_raw_traffic;
    flow_label: get flow_label, set_flow_label;
    hop_limit: get hop_limit, set_hop_limit;
    tclass: get tclass, set_tclass;
    reversible: get reversible, set_reversible;
    numb_path: get numb_path, set_numb_path;
    pkey: get pkey, set_pkey;
    qos_class: get qos_class, set_qos_class;
    sl: get sl, set_sl;
    mtu_selector: get mtu_selector, set_mtu_selector;
    mtu: get mtu, set_mtu;
    rate_selector: get rate_selector, set_rate_selector;
    rate: get rate, set_rate;
    packet_life_time_selector: get packet_life_time_selector, set_packet_life_time_selector;
    packet_life_time: get packet_life_time, set_packet_life_time;
    preference: get preference, set_preference;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout() {
        let repr = Repr {
            dgid: 0xfe80_0000_0000_0000_0002_c903_0000_0002,
            sgid: 0xfe80_0000_0000_0000_0002_c903_0000_0001,
            dlid: 2,
            slid: 1,
            flow_label: 0xabcde,
            hop_limit: 0xff,
            reversible: true,
            numb_path: 1,
            pkey: 0xffff,
            sl: 5,
            mtu_selector: selector::EXACTLY,
            mtu: 4,
            rate_selector: selector::EXACTLY,
            rate: 3,
            packet_life_time_selector: selector::EXACTLY,
            packet_life_time: 18,
            ..Default::default()
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(
            &buf[40..58],
            &[0, 2, 0, 1, 0x0a, 0xbc, 0xde, 0xff, 0, 0x81, 0xff, 0xff, 0, 5, 0x84, 0x83, 0x92, 0]
        );
        assert!(buf[58..].iter().all(|&b| b == 0));
        assert_eq!(COMPONENTS[15].value(&buf), 5);
        assert_eq!(COMPONENTS[8].value(&buf), 0xabcde);
        assert_eq!(
            COMPONENTS[3].value(&buf),
            0xfe80_0000_0000_0000,
            "first 64 bits of the SGID"
        );
        let end = COMPONENTS.last().unwrap();
        assert_eq!(end.bit_offset + end.bit_width, 464);
    }

    proptest! {
        #[test]
        fn round_trip(raw in proptest::collection::vec(any::<u8>(), LEN)) {
            let mut raw = raw;
            raw[44] &= 0x8F;
            raw[58..].fill(0);
            let repr = Repr::parse(&Packet::new_checked(&raw[..]).unwrap()).unwrap();
            let mut out = [0u8; LEN];
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(&out[..], &raw[..]);
        }
    }
}
