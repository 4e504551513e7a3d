//! The subnet administration MAD header (IBA 15.2.1), RMPP header
//! included (IBA 13.6.2.1). Records are another module's business: this
//! one hands out the data area after the header.
//!
//! ```text
//! offset  0  common MAD header (class 0x03, version 2)
//!        24  RMPPVersion  RMPPType  RRespTime(5)|RMPPFlags(3)  RMPPStatus
//!        28  SegmentNumber (32)
//!        32  PayloadLength / NewWindowLast (32)
//!        36  SM_Key (64)
//!        44  AttributeOffset (16, in 8-byte words)   reserved (16)
//!        48  ComponentMask (64)
//!        56  SA data (200 bytes in one MAD; longer when RMPP reassembled)
//! ```

use crate::field::{bad, fields, packet};
use crate::mad::{self, class, method};
use crate::Result;

/// Length of the SA header; the data area follows.
pub const HEADER_LEN: usize = 56;
/// Data bytes in one (non-RMPP) SA MAD.
pub const DATA_LEN: usize = mad::MAD_LEN - HEADER_LEN;

/// RMPP constants (IBA 13.6.2).
pub mod rmpp {
    /// The RMPP version IBA defines.
    pub const VERSION: u8 = 1;
    /// RMPPType: DATA.
    pub const TYPE_DATA: u8 = 1;
    /// RMPPType: ACK.
    pub const TYPE_ACK: u8 = 2;
    /// RMPPType: STOP.
    pub const TYPE_STOP: u8 = 3;
    /// RMPPType: ABORT.
    pub const TYPE_ABORT: u8 = 4;
    /// RMPPFlags: Active (this MAD takes part in an RMPP transfer).
    pub const FLAG_ACTIVE: u8 = 0x1;
    /// RMPPFlags: First segment.
    pub const FLAG_FIRST: u8 = 0x2;
    /// RMPPFlags: Last segment.
    pub const FLAG_LAST: u8 = 0x4;
    /// RRespTime meaning "no time value".
    pub const NO_RESP_TIME: u8 = 0x1F;
}

/// SA class-specific status codes (Status bits 15..8, IBA 15.2.1.1).
pub mod status {
    /// ERR_NO_RESOURCES.
    pub const NO_RESOURCES: u16 = 0x0100;
    /// ERR_REQ_INVALID.
    pub const REQ_INVALID: u16 = 0x0200;
    /// ERR_NO_RECORDS.
    pub const NO_RECORDS: u16 = 0x0300;
    /// ERR_TOO_MANY_RECORDS.
    pub const TOO_MANY_RECORDS: u16 = 0x0400;
    /// ERR_REQ_INVALID_GID.
    pub const INVALID_GID: u16 = 0x0500;
    /// ERR_REQ_INSUFFICIENT_COMPONENTS.
    pub const INSUFFICIENT_COMPONENTS: u16 = 0x0600;
    /// ERR_REQ_DENIED.
    pub const DENIED: u16 = 0x0700;
}

/// SA attribute IDs: the record types (IBA 15.2.5, table "Subnet
/// Administration attributes"). ClassPortInfo, Notice and InformInfo keep
/// their common numbers ([`mad::attr`]).
pub mod attr {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// Notice (in Reports).
    pub const NOTICE: u16 = 0x0002;
    /// InformInfo.
    pub const INFORM_INFO: u16 = 0x0003;
    /// NodeRecord.
    pub const NODE_RECORD: u16 = 0x0011;
    /// PortInfoRecord.
    pub const PORT_INFO_RECORD: u16 = 0x0012;
    /// SLtoVLMappingTableRecord.
    pub const SL2VL_RECORD: u16 = 0x0013;
    /// SwitchInfoRecord.
    pub const SWITCH_INFO_RECORD: u16 = 0x0014;
    /// LinearForwardingTableRecord.
    pub const LFT_RECORD: u16 = 0x0015;
    /// RandomForwardingTableRecord.
    pub const RFT_RECORD: u16 = 0x0016;
    /// MulticastForwardingTableRecord.
    pub const MFT_RECORD: u16 = 0x0017;
    /// SMInfoRecord.
    pub const SM_INFO_RECORD: u16 = 0x0018;
    /// LinkRecord.
    pub const LINK_RECORD: u16 = 0x0020;
    /// GuidInfoRecord.
    pub const GUID_INFO_RECORD: u16 = 0x0030;
    /// ServiceRecord.
    pub const SERVICE_RECORD: u16 = 0x0031;
    /// P_KeyTableRecord.
    pub const PKEY_TABLE_RECORD: u16 = 0x0033;
    /// PathRecord.
    pub const PATH_RECORD: u16 = 0x0035;
    /// VLArbitrationTableRecord.
    pub const VLARB_RECORD: u16 = 0x0036;
    /// MCMemberRecord.
    pub const MC_MEMBER_RECORD: u16 = 0x0038;
    /// TraceRecord.
    pub const TRACE_RECORD: u16 = 0x0039;
    /// MultiPathRecord.
    pub const MULTI_PATH_RECORD: u16 = 0x003A;
    /// ServiceAssociationRecord.
    pub const SERVICE_ASSOCIATION_RECORD: u16 = 0x003B;
    /// InformInfoRecord.
    pub const INFORM_INFO_RECORD: u16 = 0x00F3;
}

/// One ComponentMask bit's field in a record: IBA numbers the bits after
/// the record's fields in order, reserved fields included, so a record
/// format is described by the bit span of each of its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Component {
    /// Offset of the field's first bit (bit 0 = MSB of byte 0).
    pub bit_offset: u16,
    /// Width in bits.
    pub bit_width: u16,
}

/// Shorthand for component tables: `(bit offset, bit width)`.
pub(crate) const fn c(bit_offset: u16, bit_width: u16) -> Component {
    Component {
        bit_offset,
        bit_width,
    }
}

/// A record's `COMPONENTS` table and its `component` module of named mask
/// bits, from one list of `c(bit offset, bit width) [=> NAME],` rows in
/// record order: a row's mask bit is its place in the list, so the names
/// cannot drift from the table. Items after a `;` go into the module too
/// (masks of several bits).
macro_rules! components {
    ($( $(#[$m:meta])* c($off:expr, $w:expr) $(=> $name:ident)? ),* $(,)?
     $(; $($extra:item)*)?) => {
        /// ComponentMask bits, in record order.
        pub const COMPONENTS: &[$crate::sa::Component] = &[$($crate::sa::c($off, $w)),*];

        /// Component bits by name.
        pub mod component {
            $crate::sa::components!(@bits (0u32) $({ $(#[$m])* $($name)? })*);
            $($($extra)*)?
        }
    };
    (@bits ($i:expr)) => {};
    (@bits ($i:expr) { $(#[$m:meta])* } $($rest:tt)*) => {
        $crate::sa::components!(@bits ($i + 1) $($rest)*);
    };
    (@bits ($i:expr) { $(#[$m:meta])* $name:ident } $($rest:tt)*) => {
        $(#[$m])*
        pub const $name: u64 = 1 << ($i);
        $crate::sa::components!(@bits ($i + 1) $($rest)*);
    };
}
pub(crate) use components;

impl Component {
    /// Whether `a` and `b` hold the same value in this field. Both must
    /// be at least as long as the field reaches.
    pub fn same(&self, a: &[u8], b: &[u8]) -> bool {
        let start = usize::from(self.bit_offset);
        let end = start + usize::from(self.bit_width);
        let (first, last) = (start / 8, (end - 1) / 8);
        if a.len() <= last || b.len() <= last {
            return false;
        }
        (first..=last).all(|i| {
            let lo = if i == first { start % 8 } else { 0 };
            let hi = if i == last { (end - 1) % 8 + 1 } else { 8 };
            // Bits lo..hi of the byte, MSB first.
            let mask = (0xFFu16 >> lo) as u8 & !((0xFFu16 >> hi) as u8);
            a[i] & mask == b[i] & mask
        })
    }

    /// The field's value when it is at most 64 bits wide.
    pub fn value(&self, buf: &[u8]) -> u64 {
        let start = usize::from(self.bit_offset);
        let width = usize::from(self.bit_width).min(64);
        (0..width).fold(0u64, |acc, k| {
            let bit = start + k;
            let v = buf.get(bit / 8).map_or(0, |b| (b >> (7 - bit % 8)) & 1);
            (acc << 1) | u64::from(v)
        })
    }
}

/// Whether `record` matches `template` on every field `mask` selects
/// (bits beyond `components` are ignored, as they name no field).
pub fn matches(components: &[Component], mask: u64, template: &[u8], record: &[u8]) -> bool {
    components
        .iter()
        .enumerate()
        .take(64)
        .filter(|(i, _)| mask & (1u64 << i) != 0)
        .all(|(_, comp)| comp.same(template, record))
}

/// A 128-bit GID at `off` (checked packets only).
pub(crate) fn gid_at(buf: &[u8], off: usize) -> u128 {
    let mut raw = [0u8; 16];
    raw.copy_from_slice(&buf[off..off + 16]);
    u128::from_be_bytes(raw)
}

/// Writes a 128-bit GID at `off`.
pub(crate) fn set_gid_at(buf: &mut [u8], off: usize, gid: u128) {
    buf[off..off + 16].copy_from_slice(&gid.to_be_bytes());
}

/// Component mask bit `n`.
pub const fn bit(n: u32) -> u64 {
    1u64 << n
}

/// A record's `Repr::parse`, `buffer_len` and `emit` from the list of
/// its fields, for records whose values map one to one onto the view's
/// accessors. After the doc comments of `parse` and of `emit` (with the
/// reserved byte ranges emit zeroes before writing the fields), a row a
/// `Repr` field:
/// * `name: get getter, setter;` a value field;
/// * `name: nested Repr, getter, getter_mut;` a format nested in the
///   record, parsed and emitted by its own `Repr`;
/// * `name: each getter, setter;` an array read and written by index.
macro_rules! repr_io {
    ($P:ident => $R:ident, $len:expr;
     $(#[$pm:meta])* parse;
     $(#[$em:meta])* emit [$($clear:expr),*];
     $($field:ident : $kind:ident $($arg:ident),+ ;)*) => {
        impl $R {
            $(#[$pm])*
            pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &$P<&T>) -> $crate::Result<Self> {
                packet.check_len()?;
                Ok(Self {
                    $($field: $crate::sa::repr_io!(@get packet, $kind $($arg),+),)*
                })
            }

            /// Bytes [`Self::emit`] writes.
            pub const fn buffer_len(&self) -> usize {
                $len
            }

            $(#[$em])*
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut $P<&mut T>) {
                $(packet.buffer.as_mut()[$clear].fill(0);)*
                $($crate::sa::repr_io!(@set self, packet, $field, $kind $($arg),+);)*
            }
        }
    };
    (@get $p:ident, get $get:ident, $set:ident) => {
        $p.$get()
    };
    (@get $p:ident, nested $Inner:ident, $get:ident, $get_mut:ident) => {
        $Inner::parse(&$p.$get())?
    };
    (@get $p:ident, each $get:ident, $set:ident) => {
        core::array::from_fn(|i| $p.$get(i))
    };
    (@set $r:ident, $p:ident, $f:ident, get $get:ident, $set:ident) => {
        $p.$set($r.$f)
    };
    (@set $r:ident, $p:ident, $f:ident, nested $Inner:ident, $get:ident, $get_mut:ident) => {
        $r.$f.emit(&mut $p.$get_mut())
    };
    (@set $r:ident, $p:ident, $f:ident, each $get:ident, $set:ident) => {
        for (i, &v) in $r.$f.iter().enumerate() {
            $p.$set(i, v);
        }
    };
}
pub(crate) use repr_io;

/// The round trip every record's tests make: emits `repr` into `buf_len`
/// bytes of 0xEE (so a reserved byte left unwritten shows), asserts that
/// they parse back to `repr` and that `min_len - 1` bytes are refused, and
/// gives the buffer for the layout checks. The record's `Packet`, `Repr`
/// and `LEN` are the defaults.
#[cfg(test)]
macro_rules! round_trip {
    ($repr:expr, $buf_len:expr) => {
        $crate::sa::round_trip!($repr, $buf_len, LEN, Packet, Repr)
    };
    ($repr:expr, $buf_len:expr, $min_len:expr) => {
        $crate::sa::round_trip!($repr, $buf_len, $min_len, Packet, Repr)
    };
    ($repr:expr, $buf_len:expr, $min_len:expr, $P:ident, $R:ident) => {{
        let repr = $repr;
        let mut buf = [0xeeu8; $buf_len];
        repr.emit(&mut $P::new_unchecked(&mut buf[..]));
        assert_eq!($R::parse(&$P::new_checked(&buf[..]).unwrap()), Ok(repr));
        assert!($P::new_checked(&buf[..$min_len - 1]).is_err());
        buf
    }};
}
#[cfg(test)]
pub(crate) use round_trip;

packet!(
    /// A view of an SA MAD (header plus whatever data follows).
    Packet,
    HEADER_LEN
);

crate::mad::header_fields!(Packet);

fields! { Packet;
    /// RMPPVersion: 0 when the sender does not use RMPP.
    rmpp_version, set_rmpp_version: u8 @ 24;
    /// RMPPType.
    rmpp_type, set_rmpp_type: u8 @ 25;
    /// RRespTime: the sender's response time value.
    rmpp_resp_time, set_rmpp_resp_time: u8 @ 26 => bits 3, 5;
    /// RMPPFlags: Active, First, Last.
    rmpp_flags, set_rmpp_flags: u8 @ 26 => bits 0, 3;
    /// RMPPStatus.
    rmpp_status, set_rmpp_status: u8 @ 27;
    /// SegmentNumber (DATA, ACK).
    segment_number, set_segment_number: u32 @ 28;
    /// PayloadLength (DATA) or NewWindowLast (ACK).
    payload_length, set_payload_length: u32 @ 32;
    /// SM_Key: only an SM's own requests carry a non-zero key.
    sm_key, set_sm_key: u64 @ 36;
    /// AttributeOffset: record size in 8-byte words, for GetTable answers.
    attribute_offset, set_attribute_offset: u16 @ 44;
    /// ComponentMask: which record fields a query matches on.
    component_mask, set_component_mask: u64 @ 48;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Record size in bytes (AttributeOffset × 8).
    pub fn attribute_size(&self) -> usize {
        usize::from(self.attribute_offset()) * 8
    }

    /// The data area: everything after the header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The data area, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Zeroes ClassSpecific, the reserved bits after AttributeID and after
    /// AttributeOffset.
    pub fn clear_reserved(&mut self) {
        let buf = self.buffer.as_mut();
        buf[6..8].fill(0);
        buf[18..20].fill(0);
        buf[46..48].fill(0);
    }
}

/// The RMPP header fields of an SA MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RmppHeader {
    /// RMPPVersion (0: not RMPP; [`rmpp::VERSION`]).
    pub version: u8,
    /// RMPPType.
    pub rmpp_type: u8,
    /// RRespTime (5 bits).
    pub resp_time: u8,
    /// RMPPFlags (3 bits).
    pub flags: u8,
    /// RMPPStatus.
    pub status: u8,
    /// SegmentNumber.
    pub segment_number: u32,
    /// PayloadLength or NewWindowLast.
    pub payload_length: u32,
}

/// The SA header as values (no data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// R/Method byte (see [`mad::method`]).
    pub method: u8,
    /// Status.
    pub status: u16,
    /// TransactionID.
    pub transaction_id: u64,
    /// AttributeID.
    pub attribute_id: u16,
    /// AttributeModifier.
    pub attribute_modifier: u32,
    /// RMPP header.
    pub rmpp: RmppHeader,
    /// SM_Key.
    pub sm_key: u64,
    /// AttributeOffset (8-byte words).
    pub attribute_offset: u16,
    /// ComponentMask.
    pub component_mask: u64,
}

impl Repr {
    /// Reads the header; fails on a short buffer or a class or version
    /// that is not the SA's.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        if packet.base_version() != mad::BASE_VERSION {
            return Err(bad("BaseVersion", packet.base_version()));
        }
        if packet.mgmt_class() != class::SUBN_ADM {
            return Err(bad("MgmtClass", packet.mgmt_class()));
        }
        if packet.class_version() != mad::class_version::SUBN_ADM {
            return Err(bad("ClassVersion", packet.class_version()));
        }
        Ok(Self {
            method: packet.method(),
            status: packet.status(),
            transaction_id: packet.transaction_id(),
            attribute_id: packet.attribute_id(),
            attribute_modifier: packet.attribute_modifier(),
            rmpp: RmppHeader {
                version: packet.rmpp_version(),
                rmpp_type: packet.rmpp_type(),
                resp_time: packet.rmpp_resp_time(),
                flags: packet.rmpp_flags(),
                status: packet.rmpp_status(),
                segment_number: packet.segment_number(),
                payload_length: packet.payload_length(),
            },
            sm_key: packet.sm_key(),
            attribute_offset: packet.attribute_offset(),
            component_mask: packet.component_mask(),
        })
    }

    /// Bytes [`Self::emit`] writes: the header only.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header, reserved bits zeroed; the data area is untouched.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.clear_reserved();
        packet.set_base_version(mad::BASE_VERSION);
        packet.set_mgmt_class(class::SUBN_ADM);
        packet.set_class_version(mad::class_version::SUBN_ADM);
        packet.set_method(self.method);
        packet.set_status(self.status);
        packet.set_transaction_id(self.transaction_id);
        packet.set_attribute_id(self.attribute_id);
        packet.set_attribute_modifier(self.attribute_modifier);
        packet.set_rmpp_version(self.rmpp.version);
        packet.set_rmpp_type(self.rmpp.rmpp_type);
        packet.set_rmpp_resp_time(self.rmpp.resp_time);
        packet.set_rmpp_flags(self.rmpp.flags);
        packet.set_rmpp_status(self.rmpp.status);
        packet.set_segment_number(self.rmpp.segment_number);
        packet.set_payload_length(self.rmpp.payload_length);
        packet.set_sm_key(self.sm_key);
        packet.set_attribute_offset(self.attribute_offset);
        packet.set_component_mask(self.component_mask);
    }

    /// Whether the R bit marks this as a response.
    pub const fn is_response(&self) -> bool {
        self.method & method::RESPONSE != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            method: method::GET_TABLE,
            status: status::NO_RECORDS,
            transaction_id: 0xabcdef,
            attribute_id: 0x0035,
            attribute_modifier: 7,
            rmpp: RmppHeader {
                version: rmpp::VERSION,
                rmpp_type: rmpp::TYPE_DATA,
                resp_time: rmpp::NO_RESP_TIME,
                flags: rmpp::FLAG_ACTIVE | rmpp::FLAG_FIRST,
                status: 0,
                segment_number: 1,
                payload_length: 0x1234,
            },
            sm_key: 0x1122334455667788,
            attribute_offset: 8,
            component_mask: 0x3,
        };
        let mut buf = [0xeeu8; mad::MAD_LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..8], &[1, 3, 2, 0x12, 3, 0, 0, 0]);
        assert_eq!(&buf[24..36], &[1, 1, 0xfb, 0, 0, 0, 0, 1, 0, 0, 0x12, 0x34]);
        assert_eq!(
            &buf[36..56],
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3]
        );
        assert!(buf[56..].iter().all(|&b| b == 0xee));
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.attribute_size(), 64);
        assert_eq!(packet.data().len(), DATA_LEN);
        assert_eq!(Repr::parse(&packet), Ok(repr));
    }

    #[test]
    fn component_bits() {
        let a = [0b1010_1100u8, 0xff, 0x12];
        let b = [0b1010_0000u8, 0x0f, 0x12];
        assert!(c(0, 4).same(&a, &b));
        assert!(!c(4, 4).same(&a, &b));
        assert!(c(12, 12).same(&a, &b));
        assert!(!c(6, 8).same(&a, &b));
        assert_eq!(c(4, 4).value(&a), 0xc);
        assert_eq!(c(12, 12).value(&a), 0xf12);
        assert!(matches(&[c(0, 4), c(4, 4)], 0b01, &a, &b));
        assert!(!matches(&[c(0, 4), c(4, 4)], 0b11, &a, &b));
        assert!(!c(16, 16).same(&a, &b), "beyond the buffer never matches");
    }

    #[test]
    fn rejects_other_classes() {
        let mut buf = [0u8; HEADER_LEN];
        Repr::default().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).is_ok());
        buf[1] = class::SUBN_LID;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(bad("MgmtClass", 1u8))
        );
        buf[1] = class::SUBN_ADM;
        buf[2] = 1;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(bad("ClassVersion", 1u8))
        );
        assert!(Packet::new_checked(&buf[..55]).is_err());
    }
}
