//! ClassPortInfo (IBA 13.4.8.1) as the SA answers it: its capabilities,
//! response time, and where redirected requests and traps go.
//!
//! ```text
//! offset  0  BaseVersion  ClassVersion  CapabilityMask (16)
//!         4  CapabilityMask2(27)|RespTimeValue(5)
//!         8  RedirectGID (128)
//!        24  RedirectTC(8)|RedirectSL(4)|RedirectFL(20)
//!        28  RedirectLID (16)  RedirectP_Key (16)
//!        32  reserved(8)|RedirectQP(24)   36  RedirectQ_Key (32)
//!        40  TrapGID (128)
//!        56  TrapTC(8)|TrapSL(4)|TrapFL(20)
//!        60  TrapLID (16)  TrapP_Key (16)
//!        64  TrapHL(8)|TrapQP(24)   68  TrapQ_Key (32)
//! ```

use crate::field::{fields, packet};
use crate::sa::{gid_at, repr_io, set_gid_at};

/// Length of ClassPortInfo.
pub const LEN: usize = 72;

/// CapabilityMask bits: the common ones (IBA 13.4.8.1) and the SA's
/// (IBA 15.2.1.3).
pub mod capability {
    /// IsTrapSupported (common).
    pub const TRAP: u16 = 1 << 0;
    /// IsGetSetNoticeSupported: InformInfo subscriptions and Reports.
    pub const GET_SET_NOTICE: u16 = 1 << 1;
    /// IsSubnetOptionalRecordsSupported.
    pub const OPTIONAL_RECORDS: u16 = 1 << 8;
    /// IsUDMulticastSupported.
    pub const UD_MULTICAST: u16 = 1 << 9;
    /// IsMultiPathSupported.
    pub const MULTIPATH: u16 = 1 << 10;
    /// IsPortInfoCapMaskMatchSupported.
    pub const PORT_INFO_CAPMASK_MATCH: u16 = 1 << 13;
}

/// CapabilityMask2 bits of the SA (IBA 15.2.1.3).
pub mod capability2 {
    /// IsFullPortInfoRecordSupported (PortInfoRecord has the whole PortInfo).
    pub const FULL_PORT_INFO_RECORD: u32 = 1 << 6;
    /// IsExtendedSpeedsSupported.
    pub const EXTENDED_SPEEDS: u32 = 1 << 7;
}

packet!(
    /// A view of ClassPortInfo.
    Packet,
    LEN
);

fields! { Packet;
    /// BaseVersion.
    base_version, set_base_version: u8 @ 0;
    /// ClassVersion.
    class_version, set_class_version: u8 @ 1;
    /// CapabilityMask.
    capability_mask, set_capability_mask: u16 @ 2;
    /// CapabilityMask2 (27 bits).
    capability_mask2, set_capability_mask2: u32 @ 4 => bits 5, 27;
    /// RespTimeValue (5 bits).
    resp_time_value, set_resp_time_value: u8 @ 7 => bits 0, 5;
    /// RedirectTC.
    redirect_tc, set_redirect_tc: u8 @ 24;
    /// RedirectSL.
    redirect_sl, set_redirect_sl: u8 @ 25 => bits 4, 4;
    /// RedirectFL (20 bits).
    redirect_fl, set_redirect_fl: u32 @ 24 => bits 0, 20;
    /// RedirectLID.
    redirect_lid, set_redirect_lid: u16 @ 28;
    /// RedirectP_Key.
    redirect_pkey, set_redirect_pkey: u16 @ 30;
    /// RedirectQP.
    redirect_qp, set_redirect_qp: u24 @ 33;
    /// RedirectQ_Key.
    redirect_qkey, set_redirect_qkey: u32 @ 36;
    /// TrapTC.
    trap_tc, set_trap_tc: u8 @ 56;
    /// TrapSL.
    trap_sl, set_trap_sl: u8 @ 57 => bits 4, 4;
    /// TrapFL (20 bits).
    trap_fl, set_trap_fl: u32 @ 56 => bits 0, 20;
    /// TrapLID.
    trap_lid, set_trap_lid: u16 @ 60;
    /// TrapP_Key.
    trap_pkey, set_trap_pkey: u16 @ 62;
    /// TrapHL.
    trap_hl, set_trap_hl: u8 @ 64;
    /// TrapQP.
    trap_qp, set_trap_qp: u24 @ 65;
    /// TrapQ_Key.
    trap_qkey, set_trap_qkey: u32 @ 68;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// RedirectGID.
    pub fn redirect_gid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 8)
    }
    /// TrapGID.
    pub fn trap_gid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 40)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets RedirectGID.
    pub fn set_redirect_gid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 8, gid)
    }
    /// Sets TrapGID.
    pub fn set_trap_gid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 40, gid)
    }
}

/// ClassPortInfo as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)] // one field per wire field
pub struct Repr {
    pub base_version: u8,
    pub class_version: u8,
    pub capability_mask: u16,
    /// 27 bits.
    pub capability_mask2: u32,
    /// 5 bits.
    pub resp_time_value: u8,
    pub redirect_gid: u128,
    pub redirect_tc: u8,
    pub redirect_sl: u8,
    pub redirect_fl: u32,
    pub redirect_lid: u16,
    pub redirect_pkey: u16,
    pub redirect_qp: u32,
    pub redirect_qkey: u32,
    pub trap_gid: u128,
    pub trap_tc: u8,
    pub trap_sl: u8,
    pub trap_fl: u32,
    pub trap_lid: u16,
    pub trap_pkey: u16,
    pub trap_hl: u8,
    pub trap_qp: u32,
    pub trap_qkey: u32,
}

repr_io! { Packet => Repr, LEN;
    /// Reads ClassPortInfo; fails only on a short buffer.
    parse;
    /// Writes ClassPortInfo, reserved bits zeroed.
    emit [32..33];
    base_version: get base_version, set_base_version;
    class_version: get class_version, set_class_version;
    capability_mask: get capability_mask, set_capability_mask;
    capability_mask2: get capability_mask2, set_capability_mask2;
    resp_time_value: get resp_time_value, set_resp_time_value;
    redirect_gid: get redirect_gid, set_redirect_gid;
    redirect_tc: get redirect_tc, set_redirect_tc;
    redirect_sl: get redirect_sl, set_redirect_sl;
    redirect_fl: get redirect_fl, set_redirect_fl;
    redirect_lid: get redirect_lid, set_redirect_lid;
    redirect_pkey: get redirect_pkey, set_redirect_pkey;
    redirect_qp: get redirect_qp, set_redirect_qp;
    redirect_qkey: get redirect_qkey, set_redirect_qkey;
    trap_gid: get trap_gid, set_trap_gid;
    trap_tc: get trap_tc, set_trap_tc;
    trap_sl: get trap_sl, set_trap_sl;
    trap_fl: get trap_fl, set_trap_fl;
    trap_lid: get trap_lid, set_trap_lid;
    trap_pkey: get trap_pkey, set_trap_pkey;
    trap_hl: get trap_hl, set_trap_hl;
    trap_qp: get trap_qp, set_trap_qp;
    trap_qkey: get trap_qkey, set_trap_qkey;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            base_version: 1,
            class_version: 2,
            capability_mask: 0x0603,
            capability_mask2: 0x1234,
            resp_time_value: 18,
            redirect_sl: 3,
            redirect_fl: 0xabcde,
            redirect_tc: 0x11,
            redirect_qp: 0x0a0b0c,
            trap_lid: 0x22,
            trap_hl: 0xff,
            trap_qp: 1,
            trap_qkey: 0x8001_0000,
            ..Default::default()
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(&buf[..8], &[1, 2, 0x06, 0x03, 0, 0x02, 0x46, 0x92]);
        assert_eq!(&buf[24..28], &[0x11, 0x3a, 0xbc, 0xde]);
        assert_eq!(&buf[32..36], &[0, 0x0a, 0x0b, 0x0c]);
        assert_eq!(&buf[64..72], &[0xff, 0, 0, 1, 0x80, 1, 0, 0]);
    }
}
