//! ServiceRecord (IBA 15.2.5.14): a service a port registers with the SA
//! for others to find, for ServiceLease seconds (0xFFFFFFFF: no end).
//!
//! ```text
//! offset   0  ServiceID (64)
//!          8  ServiceGID (128)
//!         24  ServiceP_Key (16)  reserved (16)
//!         28  ServiceLease (32)
//!         32  ServiceKey (128)
//!         48  ServiceName (64 bytes, NUL-terminated UTF-8)
//!        112  ServiceData8 (16 × 8)
//!        128  ServiceData16 (8 × 16)
//!        144  ServiceData32 (4 × 32)
//!        160  ServiceData64 (2 × 64)
//! ```
//!
//! A record is named by its RID: ServiceID, ServiceGID and ServiceP_Key.

use crate::field::{fields, packet};
use crate::sa::{components, gid_at, set_gid_at};
use crate::Result;

/// Length of the record (AttributeOffset 22).
pub const LEN: usize = 176;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;
/// ServiceLease meaning "never expires".
pub const INFINITE_LEASE: u32 = 0xFFFF_FFFF;
/// Bytes of ServiceName.
pub const NAME_LEN: usize = 64;

components! {
    /// ServiceID.
    c(0, 64) => ID,
    /// ServiceGID.
    c(64, 128) => GID,
    /// ServiceP_Key.
    c(192, 16) => PKEY,
    c(208, 16), // reserved
    /// ServiceLease.
    c(224, 32) => LEASE,
    /// ServiceKey.
    c(256, 128) => KEY,
    /// ServiceName.
    c(384, 512) => NAME,
    /// ServiceData8.0.
    c(896, 8) => DATA8_0,
    /// ServiceData8.1.
    c(904, 8) => DATA8_1,
    /// ServiceData8.2.
    c(912, 8) => DATA8_2,
    /// ServiceData8.3.
    c(920, 8) => DATA8_3,
    /// ServiceData8.4.
    c(928, 8) => DATA8_4,
    /// ServiceData8.5.
    c(936, 8) => DATA8_5,
    /// ServiceData8.6.
    c(944, 8) => DATA8_6,
    /// ServiceData8.7.
    c(952, 8) => DATA8_7,
    /// ServiceData8.8.
    c(960, 8) => DATA8_8,
    /// ServiceData8.9.
    c(968, 8) => DATA8_9,
    /// ServiceData8.10.
    c(976, 8) => DATA8_10,
    /// ServiceData8.11.
    c(984, 8) => DATA8_11,
    /// ServiceData8.12.
    c(992, 8) => DATA8_12,
    /// ServiceData8.13.
    c(1000, 8) => DATA8_13,
    /// ServiceData8.14.
    c(1008, 8) => DATA8_14,
    /// ServiceData8.15.
    c(1016, 8) => DATA8_15,
    /// ServiceData16.0.
    c(1024, 16) => DATA16_0,
    /// ServiceData16.1.
    c(1040, 16) => DATA16_1,
    /// ServiceData16.2.
    c(1056, 16) => DATA16_2,
    /// ServiceData16.3.
    c(1072, 16) => DATA16_3,
    /// ServiceData16.4.
    c(1088, 16) => DATA16_4,
    /// ServiceData16.5.
    c(1104, 16) => DATA16_5,
    /// ServiceData16.6.
    c(1120, 16) => DATA16_6,
    /// ServiceData16.7.
    c(1136, 16) => DATA16_7,
    /// ServiceData32.0.
    c(1152, 32) => DATA32_0,
    /// ServiceData32.1.
    c(1184, 32) => DATA32_1,
    /// ServiceData32.2.
    c(1216, 32) => DATA32_2,
    /// ServiceData32.3.
    c(1248, 32) => DATA32_3,
    /// ServiceData64.0.
    c(1280, 64) => DATA64_0,
    /// ServiceData64.1.
    c(1344, 64) => DATA64_1,
}

packet!(
    /// A view of ServiceRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// ServiceID.
    service_id, set_service_id: u64 @ 0;
    /// ServiceP_Key.
    service_pkey, set_service_pkey: u16 @ 24;
    /// ServiceLease in seconds.
    service_lease, set_service_lease: u32 @ 28;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// ServiceGID.
    pub fn service_gid(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 8)
    }

    /// ServiceKey.
    pub fn service_key(&self) -> u128 {
        gid_at(self.buffer.as_ref(), 32)
    }

    /// ServiceName bytes.
    pub fn service_name(&self) -> &[u8] {
        &self.buffer.as_ref()[48..112]
    }

    /// ServiceData8, 16, 32 and 64: the 64 data bytes as sent.
    pub fn service_data(&self) -> &[u8] {
        &self.buffer.as_ref()[112..LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets ServiceGID.
    pub fn set_service_gid(&mut self, gid: u128) {
        set_gid_at(self.buffer.as_mut(), 8, gid)
    }

    /// Sets ServiceKey.
    pub fn set_service_key(&mut self, key: u128) {
        set_gid_at(self.buffer.as_mut(), 32, key)
    }

    /// ServiceName bytes, writable.
    pub fn service_name_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[48..112]
    }

    /// The service data bytes, writable.
    pub fn service_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[112..LEN]
    }
}

/// ServiceRecord as values. The service data is kept as its 64 wire
/// bytes (big-endian 8-, 16-, 32- and 64-bit fields), which the SA only
/// stores and compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// ServiceID.
    pub service_id: u64,
    /// ServiceGID.
    pub service_gid: u128,
    /// ServiceP_Key.
    pub service_pkey: u16,
    /// ServiceLease in seconds ([`INFINITE_LEASE`]: never expires).
    pub service_lease: u32,
    /// ServiceKey.
    pub service_key: u128,
    /// ServiceName.
    pub service_name: [u8; NAME_LEN],
    /// ServiceData8..ServiceData64 as wire bytes.
    pub service_data: [u8; 64],
}

impl Default for Repr {
    fn default() -> Self {
        Self {
            service_id: 0,
            service_gid: 0,
            service_pkey: 0,
            service_lease: 0,
            service_key: 0,
            service_name: [0; NAME_LEN],
            service_data: [0; 64],
        }
    }
}

impl Repr {
    /// Reads the record; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut service_name = [0; NAME_LEN];
        service_name.copy_from_slice(packet.service_name());
        let mut service_data = [0; 64];
        service_data.copy_from_slice(packet.service_data());
        Ok(Self {
            service_id: packet.service_id(),
            service_gid: packet.service_gid(),
            service_pkey: packet.service_pkey(),
            service_lease: packet.service_lease(),
            service_key: packet.service_key(),
            service_name,
            service_data,
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the record, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_service_id(self.service_id);
        packet.set_service_gid(self.service_gid);
        packet.set_service_pkey(self.service_pkey);
        packet.buffer.as_mut()[26..28].fill(0);
        packet.set_service_lease(self.service_lease);
        packet.set_service_key(self.service_key);
        packet.service_name_mut().copy_from_slice(&self.service_name);
        packet.service_data_mut().copy_from_slice(&self.service_data);
    }

    /// The record's RID: (ServiceID, ServiceGID, ServiceP_Key).
    pub fn rid(&self) -> (u64, u128, u16) {
        (self.service_id, self.service_gid, self.service_pkey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let mut service_name = [0u8; NAME_LEN];
        service_name[..4].copy_from_slice(b"osmt");
        let mut service_data = [0u8; 64];
        service_data[1] = 2; // ServiceData8.1
        service_data[16..18].copy_from_slice(&3u16.to_be_bytes()); // ServiceData16.0
        service_data[56..64].copy_from_slice(&4u64.to_be_bytes()); // ServiceData64.1
        let repr = Repr {
            service_id: 0x1122_3344_5566_7788,
            service_gid: 0xfe80_0000_0000_0000_0002_c901_0000_0001,
            service_pkey: 0xffff,
            service_lease: 10,
            service_key: 0x0102,
            service_name,
            service_data,
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(&buf[..8], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(&buf[24..32], &[0xff, 0xff, 0, 0, 0, 0, 0, 10]);
        assert_eq!(&buf[48..52], b"osmt");
        assert_eq!(COMPONENTS.len(), 37);
        assert_eq!(COMPONENTS[4].value(&buf), 10, "ServiceLease");
        assert_eq!(COMPONENTS[8].value(&buf), 2, "ServiceData8.1");
        assert_eq!(COMPONENTS[23].value(&buf), 3, "ServiceData16.0");
        assert_eq!(COMPONENTS[36].value(&buf), 4, "ServiceData64.1");
        assert_eq!(component::DATA64_1, 1 << 36);
        assert_eq!(component::NAME, 1 << 6);
    }
}
