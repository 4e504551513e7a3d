//! Congestion control (IBA vol 1 annex A10): the CongestionControl class
//! (0x21, class version 2) every switch and CA that supports it answers on
//! QP1, and the attributes an SM sets: SwitchCongestionSetting,
//! CACongestionSetting and CongestionControlTable, after CongestionInfo.
//!
//! A CC MAD is the common 24-byte MAD header, the 64-bit CC_Key, 32 bytes
//! of CongestionLog data (reserved in the other attributes), then a
//! 192-byte attribute at offset 64.
//!
//! ```text
//! CC MAD
//! offset  0  common MAD header (24)   24 CC_Key (64)
//!        32  LogData (32 bytes)       64 MgtData (192 bytes)
//!
//! CongestionInfo (0x0011)
//! offset  0  CongestionInfo (16: bit 15 CreditStarvation)
//!         2  ControlTableCap (8: 64-entry CCT blocks the CA supports)
//!
//! SwitchCongestionSetting (0x0014)
//! offset  0  Control_Map (32)
//!         4  Victim_Mask (256: bit n = port n)   36 Credit_Mask (256)
//!        68  Threshold (4) | reserved (4)       69 Packet_Size (8)
//!        70  CS_Threshold (4) | reserved (12)
//!        72  CS_ReturnDelay (16: shift 2 | multiplier 14)
//!        74  Marking_Rate (16)
//!
//! CACongestionSetting (0x0016)
//! offset  0  Port_Control (16)   2 Control_Map (16: bit n = SL n)
//!         4  16 entries of 8 bytes, by SL:
//!            CCTI_Timer (16)  CCTI_Increase (8)  Trigger_Threshold (8)
//!            CCTI_Min (8)  reserved (24)
//!
//! CongestionControlTable (0x0017), AttributeModifier: block index
//! offset  0  CCTI_Limit (16)   2 reserved (16)
//!         4  64 entries of 16 bits: shift (2) | multiplier (14)
//! ```

use crate::field::{bad, fields, packet};
use crate::mad::{Header, HeaderRepr, HEADER_LEN, MAD_LEN};
use crate::Result;

/// Management class of congestion control.
pub const MGMT_CLASS: u8 = 0x21;
/// Class version of congestion control.
pub const CLASS_VERSION: u8 = 2;
/// Where the CC_Key is in a CC MAD.
pub const CC_KEY_OFFSET: usize = HEADER_LEN;
/// Where the CongestionLog data starts.
pub const LOG_DATA_OFFSET: usize = 32;
/// Length of the CongestionLog data.
pub const LOG_DATA_LEN: usize = 32;
/// Where the attribute starts in a CC MAD.
pub const DATA_OFFSET: usize = 64;
/// Attribute length in a CC MAD.
pub const DATA_LEN: usize = 192;

/// Congestion control attribute IDs.
pub mod attr {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// CongestionInfo: what the node supports.
    pub const CONGESTION_INFO: u16 = 0x0011;
    /// CongestionKeyInfo: the CC_Key and its protection.
    pub const CONGESTION_KEY_INFO: u16 = 0x0012;
    /// CongestionLog.
    pub const CONGESTION_LOG: u16 = 0x0013;
    /// SwitchCongestionSetting.
    pub const SWITCH_CONGESTION_SETTING: u16 = 0x0014;
    /// SwitchPortCongestionSetting.
    pub const SWITCH_PORT_CONGESTION_SETTING: u16 = 0x0015;
    /// CACongestionSetting.
    pub const CA_CONGESTION_SETTING: u16 = 0x0016;
    /// CongestionControlTable.
    pub const CONGESTION_CONTROL_TABLE: u16 = 0x0017;
    /// TimeStamp.
    pub const TIME_STAMP: u16 = 0x0018;
}

/// Length of the CC MAD's header (common header and CC_Key).
pub const CC_HEADER_LEN: usize = 32;

packet!(
    /// A view of a whole CC MAD (at least header, CC_Key and log data).
    Packet,
    DATA_OFFSET
);

crate::mad::header_fields!(Packet);

fields! { Packet;
    /// CC_Key: what the node's CC_Key must equal for it to act.
    cc_key, set_cc_key: u64 @ CC_KEY_OFFSET;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The attribute (MgtData), as long as the buffer has it.
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[DATA_OFFSET.min(b.len())..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The attribute (MgtData), writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let start = DATA_OFFSET.min(b.len());
        &mut b[start..]
    }
}

/// A CC MAD's header as values: the common header and the CC_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// The common header.
    pub header: HeaderRepr,
    /// CC_Key.
    pub cc_key: u64,
}

impl Repr {
    /// A request of this class: `method` (Get or Set) of `attribute` with
    /// `modifier`, transaction `tid`, carrying `cc_key`.
    pub fn request(method: u8, attribute: u16, modifier: u32, tid: u64, cc_key: u64) -> Self {
        Self {
            header: HeaderRepr {
                mgmt_class: MGMT_CLASS,
                class_version: CLASS_VERSION,
                method,
                status: 0,
                class_specific: 0,
                transaction_id: tid,
                attribute_id: attribute,
                attribute_modifier: modifier,
            },
            cc_key,
        }
    }

    /// Reads the header; a MAD of another class or version is refused.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self> {
        p.check_len()?;
        let header = HeaderRepr::parse(&Header::new_checked(p.as_bytes())?)?;
        if header.mgmt_class != MGMT_CLASS {
            return Err(bad("MgmtClass", header.mgmt_class));
        }
        if header.class_version != CLASS_VERSION {
            return Err(bad("ClassVersion", header.class_version));
        }
        Ok(Self { header, cc_key: p.cc_key() })
    }

    /// Bytes [`Self::emit`] writes (the log data is zeroed).
    pub const fn buffer_len(&self) -> usize {
        DATA_OFFSET
    }

    /// Writes the header and CC_Key and zeroes the log data.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Packet<&mut T>) {
        self.header.emit(&mut Header::new_unchecked(&mut p.buffer.as_mut()[..]));
        p.set_cc_key(self.cc_key);
        p.buffer.as_mut()[LOG_DATA_OFFSET..DATA_OFFSET].fill(0);
    }

    /// A whole 256-byte MAD: this header and `data` as the attribute.
    pub fn to_mad(&self, data: &[u8]) -> [u8; MAD_LEN] {
        let mut mad = [0u8; MAD_LEN];
        self.emit(&mut Packet::new_unchecked(&mut mad[..]));
        let n = data.len().min(DATA_LEN);
        mad[DATA_OFFSET..DATA_OFFSET + n].copy_from_slice(&data[..n]);
        mad
    }
}

/// Length of CongestionInfo.
pub const CONGESTION_INFO_LEN: usize = 4;

packet!(
    /// A view of CongestionInfo.
    Info,
    CONGESTION_INFO_LEN
);

fields! { Info;
    /// CongestionInfo (16 bits; bit 15: CreditStarvation supported).
    congestion_info, set_congestion_info: u16 @ 0;
    /// ControlTableCap: 64-entry CongestionControlTable blocks supported.
    control_table_cap, set_control_table_cap: u8 @ 2;
}

/// CongestionInfo as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InfoRepr {
    /// CongestionInfo.
    pub congestion_info: u16,
    /// ControlTableCap.
    pub control_table_cap: u8,
}

impl InfoRepr {
    /// Reads CongestionInfo; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Info<&T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self { congestion_info: p.congestion_info(), control_table_cap: p.control_table_cap() })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        CONGESTION_INFO_LEN
    }

    /// Writes CongestionInfo.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Info<&mut T>) {
        p.set_congestion_info(self.congestion_info);
        p.set_control_table_cap(self.control_table_cap);
    }
}

/// Bytes of a 256-bit port mask.
pub const PORT_MASK_LEN: usize = 32;
/// Length of SwitchCongestionSetting.
pub const SWITCH_SETTING_LEN: usize = 76;

packet!(
    /// A view of SwitchCongestionSetting.
    SwitchSetting,
    SWITCH_SETTING_LEN
);

fields! { SwitchSetting;
    /// Control_Map: which of the other fields a Set applies.
    control_map, set_control_map: u32 @ 0;
    /// Threshold (4 bits): how aggressively packets are marked.
    threshold, set_threshold: u8 @ 68 => bits 4, 4;
    /// Packet_Size: packets smaller than this (64-byte units) are not marked.
    packet_size, set_packet_size: u8 @ 69;
    /// CS_Threshold (4 bits): credit starvation threshold.
    cs_threshold, set_cs_threshold: u16 @ 70 => bits 12, 4;
    /// CS_ReturnDelay (shift 2 bits | multiplier 14 bits).
    cs_return_delay, set_cs_return_delay: u16 @ 72;
    /// Marking_Rate: mean packets between two marked.
    marking_rate, set_marking_rate: u16 @ 74;
}

impl<T: AsRef<[u8]>> SwitchSetting<T> {
    /// Victim_Mask: ports marked even when they are the victim, not the
    /// root, of congestion (bit n of the 256 = port n, big-endian).
    pub fn victim_mask(&self) -> [u8; PORT_MASK_LEN] {
        let mut m = [0u8; PORT_MASK_LEN];
        m.copy_from_slice(&self.buffer.as_ref()[4..4 + PORT_MASK_LEN]);
        m
    }

    /// Credit_Mask: ports whose credit starvation is watched.
    pub fn credit_mask(&self) -> [u8; PORT_MASK_LEN] {
        let mut m = [0u8; PORT_MASK_LEN];
        m.copy_from_slice(&self.buffer.as_ref()[36..36 + PORT_MASK_LEN]);
        m
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SwitchSetting<T> {
    /// Sets [`Self::victim_mask`].
    pub fn set_victim_mask(&mut self, mask: &[u8; PORT_MASK_LEN]) {
        self.buffer.as_mut()[4..4 + PORT_MASK_LEN].copy_from_slice(mask);
    }

    /// Sets [`Self::credit_mask`].
    pub fn set_credit_mask(&mut self, mask: &[u8; PORT_MASK_LEN]) {
        self.buffer.as_mut()[36..36 + PORT_MASK_LEN].copy_from_slice(mask);
    }
}

/// A CCT entry or CS_ReturnDelay: a 2-bit shift and a 14-bit multiplier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct ShiftMultiplier {
    /// Shift (0..3).
    pub shift: u8,
    /// Multiplier (0..16383).
    pub multiplier: u16,
}

impl ShiftMultiplier {
    /// The 16-bit field.
    pub const fn to_bits(self) -> u16 {
        ((self.shift as u16 & 0x3) << 14) | (self.multiplier & 0x3FFF)
    }

    /// From the 16-bit field.
    pub const fn from_bits(v: u16) -> Self {
        Self { shift: (v >> 14) as u8, multiplier: v & 0x3FFF }
    }
}

/// SwitchCongestionSetting as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchSettingRepr {
    /// Control_Map.
    pub control_map: u32,
    /// Victim_Mask.
    pub victim_mask: [u8; PORT_MASK_LEN],
    /// Credit_Mask.
    pub credit_mask: [u8; PORT_MASK_LEN],
    /// Threshold (4 bits).
    pub threshold: u8,
    /// Packet_Size.
    pub packet_size: u8,
    /// CS_Threshold (4 bits).
    pub cs_threshold: u8,
    /// CS_ReturnDelay.
    pub cs_return_delay: ShiftMultiplier,
    /// Marking_Rate.
    pub marking_rate: u16,
}

impl SwitchSettingRepr {
    /// Reads SwitchCongestionSetting; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &SwitchSetting<&T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self {
            control_map: p.control_map(),
            victim_mask: p.victim_mask(),
            credit_mask: p.credit_mask(),
            threshold: p.threshold(),
            packet_size: p.packet_size(),
            cs_threshold: p.cs_threshold() as u8,
            cs_return_delay: ShiftMultiplier::from_bits(p.cs_return_delay()),
            marking_rate: p.marking_rate(),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        SWITCH_SETTING_LEN
    }

    /// Writes SwitchCongestionSetting (reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut SwitchSetting<&mut T>) {
        p.buffer.as_mut()[68..72].fill(0);
        p.set_control_map(self.control_map);
        p.set_victim_mask(&self.victim_mask);
        p.set_credit_mask(&self.credit_mask);
        p.set_threshold(self.threshold);
        p.set_packet_size(self.packet_size);
        p.set_cs_threshold(u16::from(self.cs_threshold));
        p.set_cs_return_delay(self.cs_return_delay.to_bits());
        p.set_marking_rate(self.marking_rate);
    }
}

/// Service levels of CACongestionSetting.
pub const CA_ENTRIES: usize = 16;
/// Length of one CACongestionSetting entry.
pub const CA_ENTRY_LEN: usize = 8;
/// Length of CACongestionSetting.
pub const CA_SETTING_LEN: usize = 4 + CA_ENTRIES * CA_ENTRY_LEN;

packet!(
    /// A view of CACongestionSetting.
    CaSetting,
    CA_SETTING_LEN
);

fields! { CaSetting;
    /// Port_Control (bit 0: 0 QP based, 1 SL/port based).
    port_control, set_port_control: u16 @ 0;
    /// Control_Map: the SLs whose entry a Set applies.
    control_map, set_control_map: u16 @ 2;
}

/// One SL's entry of CACongestionSetting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaEntry {
    /// CCTI_Timer: the time (1.024 µs units) after which CCTI drops by one.
    pub ccti_timer: u16,
    /// CCTI_Increase: what a BECN adds to CCTI.
    pub ccti_increase: u8,
    /// Trigger_Threshold.
    pub trigger_threshold: u8,
    /// CCTI_Min: the least CCTI.
    pub ccti_min: u8,
}

impl<T: AsRef<[u8]>> CaSetting<T> {
    /// The entry of SL `sl` (< [`CA_ENTRIES`]).
    pub fn entry(&self, sl: usize) -> CaEntry {
        let b = &self.buffer.as_ref()[4 + sl * CA_ENTRY_LEN..];
        CaEntry { ccti_timer: u16::from_be_bytes([b[0], b[1]]), ccti_increase: b[2], trigger_threshold: b[3], ccti_min: b[4] }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CaSetting<T> {
    /// Sets the entry of SL `sl` (reserved bytes zero).
    pub fn set_entry(&mut self, sl: usize, e: &CaEntry) {
        let b = &mut self.buffer.as_mut()[4 + sl * CA_ENTRY_LEN..4 + (sl + 1) * CA_ENTRY_LEN];
        b[0..2].copy_from_slice(&e.ccti_timer.to_be_bytes());
        b[2] = e.ccti_increase;
        b[3] = e.trigger_threshold;
        b[4] = e.ccti_min;
        b[5..8].fill(0);
    }
}

/// CACongestionSetting as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaSettingRepr {
    /// Port_Control.
    pub port_control: u16,
    /// Control_Map.
    pub control_map: u16,
    /// The entries by SL.
    pub entries: [CaEntry; CA_ENTRIES],
}

impl CaSettingRepr {
    /// Reads CACongestionSetting; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &CaSetting<&T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self { port_control: p.port_control(), control_map: p.control_map(), entries: core::array::from_fn(|sl| p.entry(sl)) })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        CA_SETTING_LEN
    }

    /// Writes CACongestionSetting.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut CaSetting<&mut T>) {
        p.set_port_control(self.port_control);
        p.set_control_map(self.control_map);
        for (sl, e) in self.entries.iter().enumerate() {
            p.set_entry(sl, e);
        }
    }
}

/// Entries of one CongestionControlTable block.
pub const CCT_BLOCK_ENTRIES: usize = 64;
/// Length of CongestionControlTable.
pub const CCT_LEN: usize = 4 + CCT_BLOCK_ENTRIES * 2;

packet!(
    /// A view of one CongestionControlTable block.
    Cct,
    CCT_LEN
);

fields! { Cct;
    /// CCTI_Limit: the highest CCT index in use (the table's length - 1).
    ccti_limit, set_ccti_limit: u16 @ 0;
}

impl<T: AsRef<[u8]>> Cct<T> {
    /// Entry `i` of the block (< [`CCT_BLOCK_ENTRIES`]).
    pub fn entry(&self, i: usize) -> ShiftMultiplier {
        let b = self.buffer.as_ref();
        ShiftMultiplier::from_bits(u16::from_be_bytes([b[4 + 2 * i], b[5 + 2 * i]]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Cct<T> {
    /// Sets entry `i` of the block.
    pub fn set_entry(&mut self, i: usize, e: ShiftMultiplier) {
        self.buffer.as_mut()[4 + 2 * i..6 + 2 * i].copy_from_slice(&e.to_bits().to_be_bytes());
    }
}

/// One CongestionControlTable block as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CctRepr {
    /// CCTI_Limit.
    pub ccti_limit: u16,
    /// The block's entries.
    pub entries: [ShiftMultiplier; CCT_BLOCK_ENTRIES],
}

impl Default for CctRepr {
    fn default() -> Self {
        Self { ccti_limit: 0, entries: [ShiftMultiplier::default(); CCT_BLOCK_ENTRIES] }
    }
}

impl CctRepr {
    /// Reads a CongestionControlTable block; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Cct<&T>) -> Result<Self> {
        p.check_len()?;
        Ok(Self { ccti_limit: p.ccti_limit(), entries: core::array::from_fn(|i| p.entry(i)) })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        CCT_LEN
    }

    /// Writes the block (reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, p: &mut Cct<&mut T>) {
        p.set_ccti_limit(self.ccti_limit);
        p.buffer.as_mut()[2..4].fill(0);
        for (i, e) in self.entries.iter().enumerate() {
            p.set_entry(i, *e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::method;

    #[test]
    fn the_cc_key_sits_after_the_common_header_and_the_data_at_64() {
        let repr = Repr::request(method::SET, attr::CA_CONGESTION_SETTING, 0, 0x1234, 0xDEAD_BEEF_0000_0001);
        let mad = repr.to_mad(&[0xAB; 4]);
        assert_eq!((mad[1], mad[2], mad[3]), (MGMT_CLASS, CLASS_VERSION, method::SET));
        assert_eq!(&mad[24..32], &0xDEAD_BEEF_0000_0001u64.to_be_bytes());
        assert!(mad[32..64].iter().all(|&b| b == 0));
        assert_eq!(&mad[64..68], &[0xAB; 4]);
        let p = Packet::new_checked(&mad[..]).expect("long enough");
        assert_eq!(Repr::parse(&p).expect("parse"), repr);
        assert_eq!(p.data().len(), DATA_LEN);
        // Another class is refused.
        let mut other = mad;
        other[1] = 0x04;
        assert!(Repr::parse(&Packet::new_checked(&other[..]).expect("long enough")).is_err());
        assert!(Packet::new_checked(&mad[..63]).is_err());
    }

    #[test]
    fn switch_setting_round_trips_at_its_offsets() {
        let mut victim = [0u8; PORT_MASK_LEN];
        victim[31] = 0x06;
        let mut credit = [0u8; PORT_MASK_LEN];
        credit[0] = 0x80;
        let repr = SwitchSettingRepr {
            control_map: 0x1F,
            victim_mask: victim,
            credit_mask: credit,
            threshold: 0xA,
            packet_size: 8,
            cs_threshold: 0x3,
            cs_return_delay: ShiftMultiplier { shift: 2, multiplier: 0x123 },
            marking_rate: 0x0102,
        };
        let mut buf = [0xFFu8; SWITCH_SETTING_LEN];
        repr.emit(&mut SwitchSetting::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[0..4], &[0, 0, 0, 0x1F]);
        assert_eq!(buf[35], 0x06);
        assert_eq!(buf[36], 0x80);
        assert_eq!((buf[68], buf[69]), (0xA0, 8));
        assert_eq!(&buf[70..76], &[0x30, 0x00, 0x81, 0x23, 0x01, 0x02]);
        let back = SwitchSettingRepr::parse(&SwitchSetting::new_checked(&buf[..]).expect("long enough")).expect("parse");
        assert_eq!(back, repr);
        assert!(SwitchSetting::new_checked(&buf[..75]).is_err());
    }

    #[test]
    fn ca_setting_and_cct_round_trip() {
        let mut entries = [CaEntry::default(); CA_ENTRIES];
        entries[3] = CaEntry { ccti_timer: 0x0304, ccti_increase: 5, trigger_threshold: 6, ccti_min: 7 };
        let ca = CaSettingRepr { port_control: 1, control_map: 0x8008, entries };
        let mut buf = [0xFFu8; CA_SETTING_LEN];
        ca.emit(&mut CaSetting::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[0..4], &[0, 1, 0x80, 0x08]);
        assert_eq!(&buf[4 + 3 * 8..4 + 4 * 8], &[3, 4, 5, 6, 7, 0, 0, 0]);
        assert_eq!(CaSettingRepr::parse(&CaSetting::new_checked(&buf[..]).expect("long")).expect("parse"), ca);

        let mut cct = CctRepr { ccti_limit: 70, ..CctRepr::default() };
        cct.entries[1] = ShiftMultiplier { shift: 1, multiplier: 0x3FFF };
        let mut buf = [0xFFu8; CCT_LEN];
        cct.emit(&mut Cct::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[0..8], &[0, 70, 0, 0, 0, 0, 0x7F, 0xFF]);
        assert_eq!(CctRepr::parse(&Cct::new_checked(&buf[..]).expect("long")).expect("parse"), cct);

        let info = InfoRepr { congestion_info: 0x8000, control_table_cap: 2 };
        let mut buf = [0u8; CONGESTION_INFO_LEN];
        info.emit(&mut Info::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x80, 0, 2, 0]);
        assert_eq!(InfoRepr::parse(&Info::new_checked(&buf[..]).expect("long")).expect("parse"), info);
    }
}
