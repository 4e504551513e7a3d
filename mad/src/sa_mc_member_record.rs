//! MCMemberRecord (IBA 15.2.5.17): a multicast group and one port's
//! membership in it.
//!
//! ```text
//! offset  0  MGID (128)
//!        16  PortGID (128)
//!        32  Q_Key (32)
//!        36  MLID (16)  MTUSelector(2)|MTU(6)  TClass
//!        40  P_Key (16)  RateSelector(2)|Rate(6)  PacketLifeTimeSelector(2)|PacketLifeTime(6)
//!        44  SL(4)|FlowLabel(20)|HopLimit(8)
//!        48  Scope(4)|JoinState(4)  ProxyJoin(1)|reserved(23)
//!        52  padding to 56 (AttributeOffset 7)
//! ```

use crate::field::{fields, packet};
use crate::sa::{components, gid_at, repr_io, set_gid_at};

/// Length of the record's fields.
pub const LEN: usize = 52;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = 56;

components! {
    /// MGID.
    c(0, 128) => MGID,
    /// PortGID.
    c(128, 128) => PORT_GID,
    /// Q_Key.
    c(256, 32) => QKEY,
    /// MLID.
    c(288, 16) => MLID,
    /// MTUSelector.
    c(304, 2) => MTU_SELECTOR,
    /// MTU.
    c(306, 6) => MTU,
    /// TClass.
    c(312, 8) => TCLASS,
    /// P_Key.
    c(320, 16) => PKEY,
    /// RateSelector.
    c(336, 2) => RATE_SELECTOR,
    /// Rate.
    c(338, 6) => RATE,
    /// PacketLifeTimeSelector.
    c(344, 2) => LIFE_SELECTOR,
    /// PacketLifeTime.
    c(346, 6) => LIFE,
    /// SL.
    c(352, 4) => SL,
    /// FlowLabel.
    c(356, 20) => FLOW_LABEL,
    /// HopLimit.
    c(376, 8) => HOP_LIMIT,
    /// Scope.
    c(384, 4) => SCOPE,
    /// JoinState.
    c(388, 4) => JOIN_STATE,
    /// ProxyJoin.
    c(392, 1) => PROXY_JOIN,
}

/// JoinState bits.
pub mod join_state {
    /// Full member.
    pub const FULL: u8 = 0x1;
    /// Non member.
    pub const NON: u8 = 0x2;
    /// Send-only non member.
    pub const SEND_ONLY: u8 = 0x4;
    /// Send-only full member (IBA 1.3).
    pub const SEND_ONLY_FULL: u8 = 0x8;
}

packet!(
    /// A view of MCMemberRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// Q_Key.
    qkey, set_qkey: u32 @ 32;
    /// MLID.
    mlid, set_mlid: u16 @ 36;
    /// MTUSelector.
    mtu_selector, set_mtu_selector: u8 @ 38 => bits 6, 2;
    /// MTU.
    mtu, set_mtu: u8 @ 38 => bits 0, 6;
    /// TClass.
    tclass, set_tclass: u8 @ 39;
    /// P_Key.
    pkey, set_pkey: u16 @ 40;
    /// RateSelector.
    rate_selector, set_rate_selector: u8 @ 42 => bits 6, 2;
    /// Rate.
    rate, set_rate: u8 @ 42 => bits 0, 6;
    /// PacketLifeTimeSelector.
    packet_life_time_selector, set_packet_life_time_selector: u8 @ 43 => bits 6, 2;
    /// PacketLifeTime.
    packet_life_time, set_packet_life_time: u8 @ 43 => bits 0, 6;
    /// SL.
    sl, set_sl: u8 @ 44 => bits 4, 4;
    /// FlowLabel (20 bits).
    flow_label, set_flow_label: u32 @ 44 => bits 8, 20;
    /// HopLimit.
    hop_limit, set_hop_limit: u8 @ 47;
    /// Scope.
    scope, set_scope: u8 @ 48 => bits 4, 4;
    /// JoinState.
    join_state, set_join_state: u8 @ 48 => bits 0, 4;
    /// ProxyJoin.
    proxy_join, set_proxy_join: bool @ 49 => bit 7;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// MGID.
    pub fn mgid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 0)
    }

    /// PortGID.
    pub fn port_gid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 16)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets MGID.
    pub fn set_mgid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 0, gid)
    }

    /// Sets PortGID.
    pub fn set_port_gid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 16, gid)
    }
}

/// MCMemberRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)] // one field per wire field
pub struct Repr {
    pub mgid: u128,
    pub port_gid: u128,
    pub qkey: u32,
    pub mlid: u16,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub tclass: u8,
    pub pkey: u16,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub sl: u8,
    /// 20 bits.
    pub flow_label: u32,
    pub hop_limit: u8,
    pub scope: u8,
    pub join_state: u8,
    pub proxy_join: bool,
}

repr_io! { Packet => Repr, LEN;
    /// Reads MCMemberRecord; fails only on a short buffer.
    parse;
    /// Writes MCMemberRecord, reserved bits zeroed.
    emit [49..52];
    mgid: get mgid, set_mgid;
    port_gid: get port_gid, set_port_gid;
    qkey: get qkey, set_qkey;
    mlid: get mlid, set_mlid;
    mtu_selector: get mtu_selector, set_mtu_selector;
    mtu: get mtu, set_mtu;
    tclass: get tclass, set_tclass;
    pkey: get pkey, set_pkey;
    rate_selector: get rate_selector, set_rate_selector;
    rate: get rate, set_rate;
    packet_life_time_selector: get packet_life_time_selector, set_packet_life_time_selector;
    packet_life_time: get packet_life_time, set_packet_life_time;
    sl: get sl, set_sl;
    flow_label: get flow_label, set_flow_label;
    hop_limit: get hop_limit, set_hop_limit;
    scope: get scope, set_scope;
    join_state: get join_state, set_join_state;
    proxy_join: get proxy_join, set_proxy_join;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout() {
        let repr = Repr {
            mgid: 0xff12_401b_ffff_0000_0000_0000_ffff_ffff,
            port_gid: 0xfe80_0000_0000_0000_0002_c903_0000_0001,
            qkey: 0x0b1b,
            mlid: 0xc001,
            mtu_selector: 2,
            mtu: 4,
            pkey: 0xffff,
            rate: 3,
            sl: 0xa,
            flow_label: 0x12345,
            hop_limit: 1,
            scope: 2,
            join_state: join_state::FULL,
            proxy_join: true,
            ..Default::default()
        };
        let buf = crate::sa::round_trip!(repr, PADDED_LEN);
        assert_eq!(
            &buf[32..52],
            &[
                0, 0, 0x0b, 0x1b, 0xc0, 1, 0x84, 0, 0xff, 0xff, 3, 0, 0xa1, 0x23, 0x45, 1, 0x21,
                0x80, 0, 0
            ]
        );
        assert_eq!(COMPONENTS[16].value(&buf), 1);
        assert_eq!(COMPONENTS[12].value(&buf), 0xa);
    }

    proptest! {
        #[test]
        fn round_trip(raw in proptest::collection::vec(any::<u8>(), LEN)) {
            let mut raw = raw;
            raw[49] &= 0x80;
            raw[50..].fill(0);
            let repr = Repr::parse(&Packet::new_checked(&raw[..]).unwrap()).unwrap();
            let mut out = [0u8; LEN];
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(&out[..], &raw[..]);
        }
    }
}
