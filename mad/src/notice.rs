//! Notice (IBA 14.2.5.1 and 13.4.8.2): the attribute of traps (SubnTrap)
//! and of SA reports.
//!
//! ```text
//! offset  0  IsGeneric(1)|Type(7)
//!         1  ProducerType (24, generic) or VendorID (24, vendor)
//!         4  TrapNumber (16, generic) or DeviceID (16, vendor)
//!         6  IssuerLID (16)
//!         8  NoticeToggle(1)|NoticeCount(15)
//!        10  DataDetails (54 bytes; layout depends on the trap number)
//!        64  IssuerGID (128): only in the SA's form (reports, InformInfo);
//!            an SMP has room for the first 64 bytes only
//! ```
//!
//! DataDetails layouts decoded here (offsets within DataDetails):
//! traps 64–67 (GID in/out of service, multicast group created/deleted):
//! GID at 6; trap 128 (link state change): switch LID at 0; traps 129–131
//! (link integrity, buffer overrun, flow control watchdog): LID at 2,
//! port at 4; trap 144 (capability mask change): LID at 2,
//! OtherLocalChanges in bit 0 of 5, CapabilityMask at 6, change flags at
//! 10, CapabilityMask2 at 12; trap 145 (system image GUID change): LID at
//! 2, GUID at 6.

use crate::field::{fields, packet};
use crate::Result;

/// Length of a Notice in an SMP (no IssuerGID).
pub const LEN: usize = 64;
/// Length of a Notice with IssuerGID (SA form).
pub const LEN_WITH_GID: usize = 80;
/// Offset of DataDetails.
pub const DETAILS_OFFSET: usize = 10;
/// Length of DataDetails.
pub const DETAILS_LEN: usize = 54;

/// Notice types (the 7-bit Type field).
pub mod notice_type {
    /// Fatal.
    pub const FATAL: u8 = 0;
    /// Urgent.
    pub const URGENT: u8 = 1;
    /// Security.
    pub const SECURITY: u8 = 2;
    /// Subnet management.
    pub const SUBNET_MANAGEMENT: u8 = 3;
    /// Informational.
    pub const INFO: u8 = 4;
}

/// ProducerType values of generic notices.
pub mod producer {
    /// Channel adapter.
    pub const CA: u32 = 1;
    /// Switch.
    pub const SWITCH: u32 = 2;
    /// Router.
    pub const ROUTER: u32 = 3;
    /// Class manager (the SM/SA).
    pub const CLASS_MANAGER: u32 = 4;
}

/// Trap numbers the SM acts on.
pub mod trap {
    /// GID now in service.
    pub const GID_IN_SERVICE: u16 = 64;
    /// GID out of service.
    pub const GID_OUT_OF_SERVICE: u16 = 65;
    /// Multicast group created.
    pub const MCAST_GROUP_CREATED: u16 = 66;
    /// Multicast group deleted.
    pub const MCAST_GROUP_DELETED: u16 = 67;
    /// Link state of a switch port changed (PortStateChange set).
    pub const LINK_STATE_CHANGE: u16 = 128;
    /// Local link integrity threshold reached.
    pub const LINK_INTEGRITY: u16 = 129;
    /// Excessive buffer overrun threshold reached.
    pub const BUFFER_OVERRUN: u16 = 130;
    /// Flow control update watchdog timer expired.
    pub const FLOW_CONTROL_WATCHDOG: u16 = 131;
    /// CapabilityMask, NodeDescription or similar changed.
    pub const CAPABILITY_CHANGE: u16 = 144;
    /// SystemImageGUID changed.
    pub const SYSTEM_IMAGE_GUID_CHANGE: u16 = 145;
    /// Bad M_Key.
    pub const BAD_M_KEY: u16 = 256;
    /// Bad P_Key.
    pub const BAD_P_KEY: u16 = 257;
    /// Bad Q_Key.
    pub const BAD_Q_KEY: u16 = 258;
    /// Bad P_Key at a switch external port.
    pub const BAD_SWITCH_P_KEY: u16 = 259;
}

packet!(
    /// A view of a Notice (64 bytes; IssuerGID read when the buffer has 80).
    Packet,
    LEN
);

fields! { Packet;
    /// IsGeneric: generic (IBA-defined trap number) or vendor-specific.
    is_generic, set_is_generic: bool @ 0 => bit 7;
    /// Type (see [`notice_type`]).
    notice_type, set_notice_type: u8 @ 0 => bits 0, 7;
    /// ProducerType (generic) or VendorID (vendor), 24 bits.
    producer_type_or_vendor_id, set_producer_type_or_vendor_id: u24 @ 1;
    /// TrapNumber (generic) or DeviceID (vendor).
    trap_number_or_device_id, set_trap_number_or_device_id: u16 @ 4;
    /// IssuerLID.
    issuer_lid, set_issuer_lid: u16 @ 6;
    /// NoticeToggle: flips between successive notices (SA form).
    notice_toggle, set_notice_toggle: bool @ 8 => bit 7;
    /// NoticeCount (15 bits).
    notice_count, set_notice_count: u16 @ 8 => bits 0, 15;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// DataDetails, 54 bytes.
    pub fn data_details(&self) -> &[u8] {
        &self.buffer.as_ref()[DETAILS_OFFSET..DETAILS_OFFSET + DETAILS_LEN]
    }

    /// IssuerGID, when the buffer is long enough to hold it (SA form).
    pub fn issuer_gid(&self) -> Option<&[u8]> {
        self.buffer.as_ref().get(LEN..LEN_WITH_GID)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// DataDetails, writable.
    pub fn data_details_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[DETAILS_OFFSET..DETAILS_OFFSET + DETAILS_LEN]
    }

    /// IssuerGID, writable, when the buffer is long enough.
    pub fn issuer_gid_mut(&mut self) -> Option<&mut [u8]> {
        self.buffer.as_mut().get_mut(LEN..LEN_WITH_GID)
    }
}

/// Who produced a notice and what it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// IsGeneric = 1: an IBA-defined trap.
    Generic {
        /// ProducerType (see [`producer`]), 24 bits.
        producer_type: u32,
        /// TrapNumber (see [`trap`]).
        trap_number: u16,
    },
    /// IsGeneric = 0: vendor-defined.
    Vendor {
        /// VendorID, 24 bits.
        vendor_id: u32,
        /// DeviceID.
        device_id: u16,
    },
}

/// DataDetails, decoded by trap number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Details {
    /// Traps 64–67: the GID concerned.
    Gid {
        /// The GID.
        gid: [u8; 16],
    },
    /// Trap 128: a switch's port changed state.
    LinkStateChange {
        /// LIDADDR: the switch's LID.
        lid: u16,
    },
    /// Traps 129–131: a port error threshold or timer.
    PortError {
        /// LIDADDR.
        lid: u16,
        /// PORTNO.
        port: u8,
    },
    /// Trap 144: capabilities of a port changed.
    CapabilityChange {
        /// LIDADDR.
        lid: u16,
        /// OtherLocalChanges.
        other_local_changes: bool,
        /// The new CapabilityMask.
        capability_mask: u32,
        /// Which things changed (NodeDescription, link width/speed, ...).
        change_flags: u16,
        /// The new CapabilityMask2.
        capability_mask2: u16,
    },
    /// Trap 145: SystemImageGUID changed.
    SystemImageGuidChange {
        /// LIDADDR.
        lid: u16,
        /// The new SystemImageGUID.
        system_image_guid: u64,
    },
    /// Any other trap, or a vendor notice: the bytes as they are.
    Raw([u8; DETAILS_LEN]),
}

impl Details {
    /// Decodes DataDetails for `source`; unknown traps stay raw.
    pub fn parse(source: &Source, raw: &[u8; DETAILS_LEN]) -> Self {
        let u16_at = |off: usize| u16::from_be_bytes([raw[off], raw[off + 1]]);
        let Source::Generic { trap_number, .. } = *source else {
            return Self::Raw(*raw);
        };
        match trap_number {
            trap::GID_IN_SERVICE..=trap::MCAST_GROUP_DELETED => {
                let mut gid = [0; 16];
                gid.copy_from_slice(&raw[6..22]);
                Self::Gid { gid }
            }
            trap::LINK_STATE_CHANGE => Self::LinkStateChange { lid: u16_at(0) },
            trap::LINK_INTEGRITY..=trap::FLOW_CONTROL_WATCHDOG => Self::PortError {
                lid: u16_at(2),
                port: raw[4],
            },
            trap::CAPABILITY_CHANGE => Self::CapabilityChange {
                lid: u16_at(2),
                other_local_changes: raw[5] & 1 != 0,
                capability_mask: u32::from_be_bytes([raw[6], raw[7], raw[8], raw[9]]),
                change_flags: u16_at(10),
                capability_mask2: u16_at(12),
            },
            trap::SYSTEM_IMAGE_GUID_CHANGE => {
                let mut guid = [0; 8];
                guid.copy_from_slice(&raw[6..14]);
                Self::SystemImageGuidChange {
                    lid: u16_at(2),
                    system_image_guid: u64::from_be_bytes(guid),
                }
            }
            _ => Self::Raw(*raw),
        }
    }

    /// Encodes DataDetails; bytes no field covers are zero.
    pub fn to_bytes(&self) -> [u8; DETAILS_LEN] {
        let mut raw = [0; DETAILS_LEN];
        match *self {
            Self::Gid { gid } => raw[6..22].copy_from_slice(&gid),
            Self::LinkStateChange { lid } => raw[0..2].copy_from_slice(&lid.to_be_bytes()),
            Self::PortError { lid, port } => {
                raw[2..4].copy_from_slice(&lid.to_be_bytes());
                raw[4] = port;
            }
            Self::CapabilityChange {
                lid,
                other_local_changes,
                capability_mask,
                change_flags,
                capability_mask2,
            } => {
                raw[2..4].copy_from_slice(&lid.to_be_bytes());
                raw[5] = u8::from(other_local_changes);
                raw[6..10].copy_from_slice(&capability_mask.to_be_bytes());
                raw[10..12].copy_from_slice(&change_flags.to_be_bytes());
                raw[12..14].copy_from_slice(&capability_mask2.to_be_bytes());
            }
            Self::SystemImageGuidChange {
                lid,
                system_image_guid,
            } => {
                raw[2..4].copy_from_slice(&lid.to_be_bytes());
                raw[6..14].copy_from_slice(&system_image_guid.to_be_bytes());
            }
            Self::Raw(bytes) => raw = bytes,
        }
        raw
    }
}

/// A Notice as values. [`Repr::parse`] picks the [`Details`] variant from
/// the trap number, so a round trip keeps a Repr only if its details
/// match its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Type (7 bits; see [`notice_type`]).
    pub notice_type: u8,
    /// Generic or vendor, with producer and number.
    pub source: Source,
    /// IssuerLID.
    pub issuer_lid: u16,
    /// NoticeToggle.
    pub toggle: bool,
    /// NoticeCount (15 bits).
    pub count: u16,
    /// DataDetails.
    pub details: Details,
    /// IssuerGID: present in the SA form only.
    pub issuer_gid: Option<[u8; 16]>,
}

impl Repr {
    /// The trap 128 a switch sends when a port changes state.
    pub const fn link_state_change(switch_lid: u16) -> Self {
        Self {
            notice_type: notice_type::URGENT,
            source: Source::Generic {
                producer_type: producer::SWITCH,
                trap_number: trap::LINK_STATE_CHANGE,
            },
            issuer_lid: switch_lid,
            toggle: false,
            count: 0,
            details: Details::LinkStateChange { lid: switch_lid },
            issuer_gid: None,
        }
    }

    /// The trap number of a generic notice.
    pub const fn trap_number(&self) -> Option<u16> {
        match self.source {
            Source::Generic { trap_number, .. } => Some(trap_number),
            Source::Vendor { .. } => None,
        }
    }

    /// Reads a Notice (with IssuerGID when the buffer has 80 bytes);
    /// fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let source = if packet.is_generic() {
            Source::Generic {
                producer_type: packet.producer_type_or_vendor_id(),
                trap_number: packet.trap_number_or_device_id(),
            }
        } else {
            Source::Vendor {
                vendor_id: packet.producer_type_or_vendor_id(),
                device_id: packet.trap_number_or_device_id(),
            }
        };
        let mut raw = [0; DETAILS_LEN];
        raw.copy_from_slice(packet.data_details());
        let issuer_gid = packet.issuer_gid().map(|bytes| {
            let mut gid = [0; 16];
            gid.copy_from_slice(bytes);
            gid
        });
        Ok(Self {
            notice_type: packet.notice_type(),
            details: Details::parse(&source, &raw),
            source,
            issuer_lid: packet.issuer_lid(),
            toggle: packet.notice_toggle(),
            count: packet.notice_count(),
            issuer_gid,
        })
    }

    /// Bytes [`Self::emit`] writes: 80 with IssuerGID, else 64.
    pub const fn buffer_len(&self) -> usize {
        if self.issuer_gid.is_some() {
            LEN_WITH_GID
        } else {
            LEN
        }
    }

    /// Writes the Notice. IssuerGID is written only if both it and room
    /// for it are there: an SMP's 64 bytes have none.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        let (generic, producer_or_vendor, number) = match self.source {
            Source::Generic {
                producer_type,
                trap_number,
            } => (true, producer_type, trap_number),
            Source::Vendor {
                vendor_id,
                device_id,
            } => (false, vendor_id, device_id),
        };
        packet.set_is_generic(generic);
        packet.set_notice_type(self.notice_type);
        packet.set_producer_type_or_vendor_id(producer_or_vendor);
        packet.set_trap_number_or_device_id(number);
        packet.set_issuer_lid(self.issuer_lid);
        packet.set_notice_toggle(self.toggle);
        packet.set_notice_count(self.count);
        packet
            .data_details_mut()
            .copy_from_slice(&self.details.to_bytes());
        if let (Some(gid), Some(room)) = (self.issuer_gid, packet.issuer_gid_mut()) {
            room.copy_from_slice(&gid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(repr: Repr, len: usize) -> Vec<u8> {
        let mut buf = vec![0xaau8; len];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        buf
    }

    #[test]
    fn trap_128_layout() {
        let buf = round_trip(Repr::link_state_change(0x0102), LEN);
        assert_eq!(&buf[..12], &[0x81, 0, 0, 2, 0, 128, 1, 2, 0, 0, 1, 2]);
        assert!(buf[12..].iter().all(|&b| b == 0));
    }

    #[test]
    fn gid_traps_and_issuer_gid() {
        let gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 0, 0, 0, 0x10, 1];
        let repr = Repr {
            notice_type: notice_type::SUBNET_MANAGEMENT,
            source: Source::Generic {
                producer_type: producer::CLASS_MANAGER,
                trap_number: trap::GID_OUT_OF_SERVICE,
            },
            issuer_lid: 1,
            toggle: true,
            count: 0x7fff,
            details: Details::Gid { gid },
            issuer_gid: Some([7; 16]),
        };
        assert_eq!(repr.buffer_len(), LEN_WITH_GID);
        let buf = round_trip(repr, LEN_WITH_GID);
        assert_eq!(&buf[8..10], &[0xff, 0xff]);
        assert_eq!(&buf[16..32], &gid);
        assert_eq!(&buf[64..], &[7; 16]);
    }

    #[test]
    fn other_details() {
        let generic = |trap_number, details| Repr {
            notice_type: notice_type::INFO,
            source: Source::Generic {
                producer_type: producer::CA,
                trap_number,
            },
            issuer_lid: 9,
            toggle: false,
            count: 3,
            details,
            issuer_gid: None,
        };
        let buf = round_trip(
            generic(
                trap::LINK_INTEGRITY,
                Details::PortError {
                    lid: 0x0203,
                    port: 7,
                },
            ),
            LEN,
        );
        assert_eq!(&buf[10..16], &[0, 0, 2, 3, 7, 0]);
        let buf = round_trip(
            generic(
                trap::CAPABILITY_CHANGE,
                Details::CapabilityChange {
                    lid: 0x0405,
                    other_local_changes: true,
                    capability_mask: 0x0a0b0c0d,
                    change_flags: 0x0001,
                    capability_mask2: 0x0030,
                },
            ),
            LEN,
        );
        assert_eq!(
            &buf[10..24],
            &[0, 0, 4, 5, 0, 1, 0xa, 0xb, 0xc, 0xd, 0, 1, 0, 0x30]
        );
        let buf = round_trip(
            generic(
                trap::SYSTEM_IMAGE_GUID_CHANGE,
                Details::SystemImageGuidChange {
                    lid: 6,
                    system_image_guid: 0x0102030405060708,
                },
            ),
            LEN,
        );
        assert_eq!(&buf[12..24], &[0, 6, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        round_trip(
            generic(trap::BAD_M_KEY, Details::Raw([5; DETAILS_LEN])),
            LEN,
        );
        let vendor = Repr {
            source: Source::Vendor {
                vendor_id: 0x02c9,
                device_id: 128,
            },
            ..generic(0, Details::Raw([1; DETAILS_LEN]))
        };
        let buf = round_trip(vendor, LEN);
        assert_eq!(&buf[..6], &[0x04, 0, 2, 0xc9, 0, 128]);
        assert!(Packet::new_checked(&buf[..63]).is_err());
    }
}
