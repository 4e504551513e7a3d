//! VLArbitrationTable (IBA 14.2.5.9): one block of 32 (VL, weight)
//! entries of a port's high- or low-priority arbitration table.
//!
//! Each entry is two bytes: reserved(4)|VL(4), then Weight (units of 64
//! bytes; 0 skips the entry). AttributeModifier bits 31..16 select the
//! block ([`VlArbBlock`]), bits 15..0 the output port on a switch.

use crate::field::{bad, packet};
use crate::Result;

/// Entries per block.
pub const ENTRIES: usize = 32;
/// Length of a block.
pub const LEN: usize = ENTRIES * 2;

/// Which block of which table a VLArbitrationTable MAD carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u16)]
pub enum VlArbBlock {
    /// Low-priority table, entries 0..=31.
    #[default]
    Low0 = 1,
    /// Low-priority table, entries 32..=63.
    Low32 = 2,
    /// High-priority table, entries 0..=31.
    High0 = 3,
    /// High-priority table, entries 32..=63.
    High32 = 4,
}

impl VlArbBlock {
    /// The wire value (AttributeModifier bits 31..16); others are refused.
    pub fn from_u16(value: u16) -> Result<Self> {
        Ok(match value {
            1 => Self::Low0,
            2 => Self::Low32,
            3 => Self::High0,
            4 => Self::High32,
            other => return Err(bad("VLArbitrationTable block", other)),
        })
    }
}

/// Block and port, as the AttributeModifier says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlArbModifier {
    /// Which table and half.
    pub block: VlArbBlock,
    /// Output port (switches; ignored on CAs).
    pub port: u16,
}

impl VlArbModifier {
    /// The AttributeModifier.
    pub const fn to_u32(self) -> u32 {
        (self.block as u32) << 16 | self.port as u32
    }

    /// Reads an AttributeModifier; fails on a block number outside 1..=4.
    pub fn from_u32(modifier: u32) -> Result<Self> {
        Ok(Self {
            block: VlArbBlock::from_u16((modifier >> 16) as u16)?,
            port: modifier as u16,
        })
    }
}

/// One arbitration entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlArbEntry {
    /// VL (4 bits).
    pub vl: u8,
    /// Weight in 64-byte units.
    pub weight: u8,
}

packet!(
    /// A view of a VLArbitrationTable block.
    Packet,
    LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Entry `index`, if `index < 32`.
    pub fn entry(&self, index: usize) -> Option<VlArbEntry> {
        if index >= ENTRIES {
            return None;
        }
        let bytes = self.buffer.as_ref().get(index * 2..index * 2 + 2)?;
        Some(VlArbEntry {
            vl: bytes[0] & 0x0F,
            weight: bytes[1],
        })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets entry `index` (reserved bits zeroed, VL cut to 4 bits);
    /// `false` when `index >= 32`.
    pub fn set_entry(&mut self, index: usize, entry: VlArbEntry) -> bool {
        if index >= ENTRIES {
            return false;
        }
        match self.buffer.as_mut().get_mut(index * 2..index * 2 + 2) {
            Some(bytes) => {
                bytes[0] = entry.vl & 0x0F;
                bytes[1] = entry.weight;
                true
            }
            None => false,
        }
    }
}

/// A block as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The 32 entries.
    pub entries: [VlArbEntry; ENTRIES],
}

impl Repr {
    /// Reads a block; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut entries = [VlArbEntry::default(); ENTRIES];
        for (index, entry) in entries.iter_mut().enumerate() {
            *entry = packet.entry(index).unwrap_or_default();
        }
        Ok(Self { entries })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the block.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        for (index, &entry) in self.entries.iter().enumerate() {
            packet.set_entry(index, entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut repr = Repr::default();
        repr.entries[0] = VlArbEntry { vl: 1, weight: 4 };
        repr.entries[31] = VlArbEntry {
            vl: 14,
            weight: 255,
        };
        let mut buf = [0xf0u8; LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..4], &[1, 4, 0, 0]);
        assert_eq!(&buf[62..], &[14, 255]);
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.entry(32), None);
        assert_eq!(Repr::parse(&packet), Ok(repr));
        assert!(Packet::new_checked(&buf[..63]).is_err());
    }

    #[test]
    fn modifier() {
        let m = VlArbModifier {
            block: VlArbBlock::High0,
            port: 7,
        };
        assert_eq!(m.to_u32(), 0x0003_0007);
        assert_eq!(VlArbModifier::from_u32(0x0003_0007), Ok(m));
        assert!(VlArbModifier::from_u32(0x0005_0000).is_err());
        assert!(VlArbModifier::from_u32(0x0000_0001).is_err());
    }
}
