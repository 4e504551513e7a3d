//! The common MAD header (IBA 13.4.3), the constants every class shares,
//! and [`Mad`], one whole 256-byte datagram.
//!
//! ```text
//! byte 0        1          2             3
//!      BaseVer  MgmtClass  ClassVersion  R | Method
//!      Status (16)                       ClassSpecific (16)
//!      TransactionID (64)
//!      AttributeID (16)                  Reserved (16)
//!      AttributeModifier (32)
//! ```

use crate::field::{bad, fields, packet};
use crate::{Error, Result};

/// Every MAD on an IB fabric is exactly this long (UD, QP0/QP1).
pub const MAD_LEN: usize = 256;
/// Length of the common header; class-specific data follows.
pub const HEADER_LEN: usize = 24;
/// The only BaseVersion IBA defines (OPA's 0x80 is a different wire).
pub const BASE_VERSION: u8 = 1;

/// Management class numbers (MgmtClass).
pub mod class {
    /// LID-routed subnet management (SMPs on QP0).
    pub const SUBN_LID: u8 = 0x01;
    /// Directed-route subnet management (SMPs on QP0).
    pub const SUBN_DIRECTED: u8 = 0x81;
    /// Subnet administration (the SA, on QP1).
    pub const SUBN_ADM: u8 = 0x03;
    /// Performance management.
    pub const PERF: u8 = 0x04;
    /// Baseboard management.
    pub const BM: u8 = 0x05;
    /// Device management.
    pub const DEV_MGT: u8 = 0x06;
    /// Communication management.
    pub const COMM_MGT: u8 = 0x07;
    /// Congestion control.
    pub const CC: u8 = 0x21;
}

/// Class versions of the classes the SM speaks.
pub mod class_version {
    /// Subnet management, both routings.
    pub const SUBN: u8 = 1;
    /// Subnet administration.
    pub const SUBN_ADM: u8 = 2;
}

/// Method numbers (the low 7 bits of the R/Method byte plus the R bit).
pub mod method {
    /// The R bit: set on every response method.
    pub const RESPONSE: u8 = 0x80;
    /// Get (SubnGet, SubnAdmGet).
    pub const GET: u8 = 0x01;
    /// Set (SubnSet, SubnAdmSet).
    pub const SET: u8 = 0x02;
    /// Send.
    pub const SEND: u8 = 0x03;
    /// Trap (SubnTrap): an unsolicited Notice.
    pub const TRAP: u8 = 0x05;
    /// Report (SubnAdmReport): the SA forwarding a Notice to a subscriber.
    pub const REPORT: u8 = 0x06;
    /// TrapRepress (SubnTrapRepress): tells a trap sender to stop repeating.
    pub const TRAP_REPRESS: u8 = 0x07;
    /// GetResp (SubnGetResp, SubnAdmGetResp): also answers a Set.
    pub const GET_RESP: u8 = 0x81;
    /// ReportResp.
    pub const REPORT_RESP: u8 = 0x86;
    /// SubnAdmGetTable.
    pub const GET_TABLE: u8 = 0x12;
    /// SubnAdmGetTableResp.
    pub const GET_TABLE_RESP: u8 = 0x92;
    /// SubnAdmGetTraceTable.
    pub const GET_TRACE_TABLE: u8 = 0x13;
    /// SubnAdmGetMulti.
    pub const GET_MULTI: u8 = 0x14;
    /// SubnAdmGetMultiResp.
    pub const GET_MULTI_RESP: u8 = 0x94;
    /// SubnAdmDelete.
    pub const DELETE: u8 = 0x15;
    /// SubnAdmDeleteResp.
    pub const DELETE_RESP: u8 = 0x95;
}

/// Attribute IDs of the subnet management class (and the two common
/// ones). SA record attribute IDs overlap these numbers and belong to the
/// SA records module.
pub mod attr {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// Notice (carried by traps and reports).
    pub const NOTICE: u16 = 0x0002;
    /// InformInfo.
    pub const INFORM_INFO: u16 = 0x0003;
    /// NodeDescription.
    pub const NODE_DESCRIPTION: u16 = 0x0010;
    /// NodeInfo.
    pub const NODE_INFO: u16 = 0x0011;
    /// SwitchInfo.
    pub const SWITCH_INFO: u16 = 0x0012;
    /// GUIDInfo.
    pub const GUID_INFO: u16 = 0x0014;
    /// PortInfo.
    pub const PORT_INFO: u16 = 0x0015;
    /// P_KeyTable.
    pub const P_KEY_TABLE: u16 = 0x0016;
    /// SLtoVLMappingTable.
    pub const SL_TO_VL_MAPPING_TABLE: u16 = 0x0017;
    /// VLArbitrationTable.
    pub const VL_ARBITRATION_TABLE: u16 = 0x0018;
    /// LinearForwardingTable.
    pub const LINEAR_FORWARDING_TABLE: u16 = 0x0019;
    /// RandomForwardingTable.
    pub const RANDOM_FORWARDING_TABLE: u16 = 0x001A;
    /// MulticastForwardingTable.
    pub const MULTICAST_FORWARDING_TABLE: u16 = 0x001B;
    /// SMInfo.
    pub const SM_INFO: u16 = 0x0020;
    /// VendorDiag.
    pub const VENDOR_DIAG: u16 = 0x0030;
    /// LedInfo.
    pub const LED_INFO: u16 = 0x0031;
}

/// Status field bits shared by all classes (IBA 13.4.7). In a
/// directed-route SMP bit 15 is the D bit instead (see [`crate::smp`]).
pub mod status {
    /// The responder is busy: retry later.
    pub const BUSY: u16 = 0x0001;
    /// The request must be redirected (ClassPortInfo says where).
    pub const REDIRECT: u16 = 0x0002;
    /// Bits 4..2: which field of the request was rejected.
    pub const INVALID_FIELD_MASK: u16 = 0x001C;
    /// Class or base version not supported.
    pub const BAD_VERSION: u16 = 0x0004;
    /// Method not supported.
    pub const UNSUPPORTED_METHOD: u16 = 0x0008;
    /// Method/attribute combination not supported.
    pub const UNSUPPORTED_METHOD_ATTR: u16 = 0x000C;
    /// A value in the attribute or modifier is invalid.
    pub const INVALID_ATTR_VALUE: u16 = 0x001C;
    /// Bits 15..8: class-specific status (SA: ERR_NO_RECORDS and friends).
    pub const CLASS_SPECIFIC_MASK: u16 = 0xFF00;
}

packet!(
    /// A view of the 24-byte common header at the start of any MAD.
    Header,
    HEADER_LEN
);

/// Declares the common header's fields on a class's packet view, so that
/// every class (SMP, SA, PMA) reads the header through the same accessors
/// and the layout is written down once.
macro_rules! header_fields {
    ($P:ident) => {
        $crate::mad::header_fields!(@fields $P);

        impl<T: AsRef<[u8]>> $P<T> {
            /// The common MAD header.
            pub fn header(&self) -> $crate::mad::Header<&[u8]> {
                $crate::mad::Header::new_unchecked(self.buffer.as_ref())
            }
        }
    };
    (@fields $P:ident) => {
        $crate::field::fields! { $P;
            /// BaseVersion: 1 for every IBA MAD.
            base_version, set_base_version: u8 @ 0;
            /// MgmtClass (see [`class`](crate::mad::class)).
            mgmt_class, set_mgmt_class: u8 @ 1;
            /// ClassVersion.
            class_version, set_class_version: u8 @ 2;
            /// The whole R/Method byte (see [`method`](crate::mad::method)).
            method, set_method: u8 @ 3;
            /// The whole 16-bit Status field (see [`status`](crate::mad::status));
            /// in a directed-route SMP bit 15 is the D bit.
            status, set_status: u16 @ 4;
            /// TransactionID. The kernel owns the upper 32 bits of requests it
            /// sends (agent id), so only the lower half is the sender's to match.
            transaction_id, set_transaction_id: u64 @ 8;
            /// AttributeID (see [`attr`](crate::mad::attr)).
            attribute_id, set_attribute_id: u16 @ 16;
            /// AttributeModifier.
            attribute_modifier, set_attribute_modifier: u32 @ 20;
        }
    };
}
pub(crate) use header_fields;

header_fields!(@fields Header);

fields! { Header;
    /// ClassSpecific: hop pointer and count in directed-route SMPs.
    class_specific, set_class_specific: u16 @ 6;
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Whether the R bit marks this as a response.
    pub fn is_response(&self) -> bool {
        self.method() & method::RESPONSE != 0
    }

    /// The bytes after the common header (class-specific header and data).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// The bytes after the common header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Zeroes the reserved 16 bits after AttributeID.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[18..20].fill(0);
    }
}

/// The common header as values. BaseVersion is implied: parsing rejects
/// anything but [`BASE_VERSION`], emitting writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HeaderRepr {
    /// MgmtClass.
    pub mgmt_class: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// R/Method byte.
    pub method: u8,
    /// Status.
    pub status: u16,
    /// ClassSpecific.
    pub class_specific: u16,
    /// TransactionID.
    pub transaction_id: u64,
    /// AttributeID.
    pub attribute_id: u16,
    /// AttributeModifier.
    pub attribute_modifier: u32,
}

impl HeaderRepr {
    /// Reads the header; fails on a short buffer or a BaseVersion other
    /// than 1.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Header<&T>) -> Result<Self> {
        packet.check_len()?;
        if packet.base_version() != BASE_VERSION {
            return Err(bad("BaseVersion", packet.base_version()));
        }
        Ok(Self {
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            transaction_id: packet.transaction_id(),
            attribute_id: packet.attribute_id(),
            attribute_modifier: packet.attribute_modifier(),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Header<&mut T>) {
        packet.set_base_version(BASE_VERSION);
        packet.set_mgmt_class(self.mgmt_class);
        packet.set_class_version(self.class_version);
        packet.set_method(self.method);
        packet.set_status(self.status);
        packet.set_class_specific(self.class_specific);
        packet.set_transaction_id(self.transaction_id);
        packet.set_attribute_id(self.attribute_id);
        packet.clear_reserved();
        packet.set_attribute_modifier(self.attribute_modifier);
    }

    /// Whether the R bit marks this as a response.
    pub const fn is_response(&self) -> bool {
        self.method & method::RESPONSE != 0
    }
}

/// One whole MAD, as read from or written to a umad file or the
/// simulated fabric. Views of any format can be laid over it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Mad(pub [u8; MAD_LEN]);

impl Mad {
    /// All zeroes.
    pub const fn zeroed() -> Self {
        Self([0; MAD_LEN])
    }

    /// Copies a MAD out of `bytes`, which must be exactly [`MAD_LEN`] long:
    /// anything else is not one MAD (RMPP payloads are longer and go
    /// through the SA view instead).
    pub fn from_slice(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < MAD_LEN {
            return Err(Error::Truncated {
                need: MAD_LEN,
                got: bytes.len(),
            });
        }
        if bytes.len() > MAD_LEN {
            return Err(bad("MAD length", bytes.len() as u64));
        }
        let mut mad = Self::zeroed();
        mad.0.copy_from_slice(bytes);
        Ok(mad)
    }

    /// The common header, read-only. Always in bounds.
    pub fn header(&self) -> Header<&[u8]> {
        Header::new_unchecked(&self.0[..])
    }

    /// The common header, writable.
    pub fn header_mut(&mut self) -> Header<&mut [u8]> {
        Header::new_unchecked(&mut self.0[..])
    }

    /// The MAD as an SMP. Always in bounds (an SMP is a whole MAD).
    pub fn smp(&self) -> crate::smp::Packet<&[u8]> {
        crate::smp::Packet::new_unchecked(&self.0[..])
    }

    /// The MAD as an SMP, writable.
    pub fn smp_mut(&mut self) -> crate::smp::Packet<&mut [u8]> {
        crate::smp::Packet::new_unchecked(&mut self.0[..])
    }

    /// The MAD as an SA MAD. Always in bounds.
    pub fn sa(&self) -> crate::sa::Packet<&[u8]> {
        crate::sa::Packet::new_unchecked(&self.0[..])
    }

    /// The MAD as an SA MAD, writable.
    pub fn sa_mut(&mut self) -> crate::sa::Packet<&mut [u8]> {
        crate::sa::Packet::new_unchecked(&mut self.0[..])
    }
}

impl Default for Mad {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl From<[u8; MAD_LEN]> for Mad {
    fn from(bytes: [u8; MAD_LEN]) -> Self {
        Self(bytes)
    }
}

impl AsRef<[u8]> for Mad {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl AsMut<[u8]> for Mad {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl core::fmt::Debug for Mad {
    // Logs want the header decoded and the rest as hex, not 256 numbers.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let h = self.header();
        write!(
            f,
            "Mad {{ class {:#04x} v{} method {:#04x} status {:#06x} cs {:#06x} tid {:#018x} attr {:#06x} mod {:#010x} data ",
            h.mgmt_class(),
            h.class_version(),
            h.method(),
            h.status(),
            h.class_specific(),
            h.transaction_id(),
            h.attribute_id(),
            h.attribute_modifier()
        )?;
        for b in &self.0[HEADER_LEN..] {
            write!(f, "{b:02x}")?;
        }
        write!(f, " }}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let repr = HeaderRepr {
            mgmt_class: class::SUBN_LID,
            class_version: 1,
            method: method::GET_RESP,
            status: status::INVALID_ATTR_VALUE,
            class_specific: 0x1234,
            transaction_id: 0x0102_0304_0506_0708,
            attribute_id: attr::PORT_INFO,
            attribute_modifier: 0xdead_beef,
        };
        let mut buf = [0xffu8; HEADER_LEN];
        repr.emit(&mut Header::new_unchecked(&mut buf[..]));
        assert_eq!(
            buf,
            [
                1, 1, 1, 0x81, 0, 0x1c, 0x12, 0x34, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0x15, 0, 0, 0xde,
                0xad, 0xbe, 0xef
            ]
        );
        let packet = Header::new_checked(&buf[..]).unwrap();
        assert!(packet.is_response());
        assert_eq!(HeaderRepr::parse(&packet), Ok(repr));
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            Header::new_checked(&[0u8; 23][..]).unwrap_err(),
            Error::Truncated { need: 24, got: 23 }
        );
        let mut buf = [0u8; HEADER_LEN];
        buf[0] = 2;
        assert_eq!(
            HeaderRepr::parse(&Header::new_unchecked(&buf[..])),
            Err(Error::BadValue {
                field: "BaseVersion",
                value: 2
            })
        );
        assert_eq!(
            HeaderRepr::parse(&Header::new_unchecked(&buf[..3])),
            Err(Error::Truncated { need: 24, got: 3 })
        );
    }

    #[test]
    fn mad_from_slice() {
        assert!(matches!(
            Mad::from_slice(&[0; 255]),
            Err(Error::Truncated {
                need: 256,
                got: 255
            })
        ));
        assert!(matches!(
            Mad::from_slice(&[0; 257]),
            Err(Error::BadValue { .. })
        ));
        let mut bytes = [0u8; MAD_LEN];
        bytes[1] = 0x81;
        let mad = Mad::from_slice(&bytes).unwrap();
        assert_eq!(mad.header().mgmt_class(), class::SUBN_DIRECTED);
        assert!(format!("{mad:?}").starts_with("Mad { class 0x81"));
    }
}
