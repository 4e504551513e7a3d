//! LinearForwardingTable (IBA 14.2.5.10) and MulticastForwardingTable
//! (IBA 14.2.5.12) blocks.
//!
//! An LFT block is 64 one-byte egress ports for 64 consecutive LIDs; the
//! AttributeModifier is the block number, so block `b` covers LIDs
//! `64·b ..= 64·b + 63`.
//!
//! An MFT block is 32 16-bit port masks for 32 consecutive multicast
//! LIDs; the AttributeModifier holds the block number (bits 8..0, LIDs
//! `0xC000 + 32·b ..`) and the position (bits 31..28): which 16 ports the
//! masks cover (position `p`, mask bit `i` = port `16·p + i`).

use crate::field::{bad, packet};
use crate::Result;

/// Entries in an LFT block.
pub const LFT_BLOCK_LEN: usize = 64;
/// Entries in an MFT block.
pub const MFT_BLOCK_LEN: usize = 32;
/// Bytes of an MFT block.
pub const MFT_LEN: usize = MFT_BLOCK_LEN * 2;
/// Highest LFT block number: unicast LIDs end at 0xBFFF.
pub const LFT_MAX_BLOCK: u16 = 0xBFFF / LFT_BLOCK_LEN as u16;
/// Egress port meaning "drop": no route to that LID.
pub const NO_ROUTE: u8 = 0xFF;
/// First multicast LID.
pub const MULTICAST_LID_BASE: u16 = 0xC000;
/// Highest MFT block number (9 bits).
pub const MFT_MAX_BLOCK: u16 = 0x1FF;
/// Highest MFT position (4 bits: ports up to 255).
pub const MFT_MAX_POSITION: u8 = 0xF;

packet!(
    /// A view of an LFT block.
    LftPacket,
    LFT_BLOCK_LEN
);

impl<T: AsRef<[u8]>> LftPacket<T> {
    /// Egress port for the `index`-th LID of the block, if `index < 64`.
    pub fn port(&self, index: usize) -> Option<u8> {
        self.ports().get(index).copied()
    }

    /// All 64 egress ports.
    pub fn ports(&self) -> &[u8] {
        &self.buffer.as_ref()[..LFT_BLOCK_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> LftPacket<T> {
    /// All 64 egress ports, writable.
    pub fn ports_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[..LFT_BLOCK_LEN]
    }
}

/// An LFT block as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LftRepr {
    /// Egress port per LID of the block ([`NO_ROUTE`] to drop).
    pub ports: [u8; LFT_BLOCK_LEN],
}

impl Default for LftRepr {
    fn default() -> Self {
        Self {
            ports: [NO_ROUTE; LFT_BLOCK_LEN],
        }
    }
}

impl LftRepr {
    /// Reads a block; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &LftPacket<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut ports = [0; LFT_BLOCK_LEN];
        ports.copy_from_slice(packet.ports());
        Ok(Self { ports })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LFT_BLOCK_LEN
    }

    /// Writes the block.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut LftPacket<&mut T>) {
        packet.ports_mut().copy_from_slice(&self.ports);
    }

    /// The AttributeModifier for block `block`; fails past the unicast
    /// LID range.
    pub fn modifier(block: u16) -> Result<u32> {
        if block > LFT_MAX_BLOCK {
            return Err(bad("LFT block", block));
        }
        Ok(u32::from(block))
    }

    /// The block number in an AttributeModifier; fails on bits above the
    /// block number or past the unicast LID range.
    pub fn parse_modifier(modifier: u32) -> Result<u16> {
        match u16::try_from(modifier) {
            Ok(block) if block <= LFT_MAX_BLOCK => Ok(block),
            _ => Err(bad("LFT block", modifier)),
        }
    }

    /// Block holding `lid`, and its index within it.
    pub const fn block_of(lid: u16) -> (u16, usize) {
        (
            lid / LFT_BLOCK_LEN as u16,
            (lid % LFT_BLOCK_LEN as u16) as usize,
        )
    }
}

packet!(
    /// A view of an MFT block.
    MftPacket,
    MFT_LEN
);

impl<T: AsRef<[u8]>> MftPacket<T> {
    /// Port mask of the `index`-th multicast LID of the block, if
    /// `index < 32`.
    pub fn port_mask(&self, index: usize) -> Option<u16> {
        if index >= MFT_BLOCK_LEN {
            return None;
        }
        let bytes = self.buffer.as_ref().get(index * 2..index * 2 + 2)?;
        Some(u16::from_be_bytes([bytes[0], bytes[1]]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MftPacket<T> {
    /// Sets the mask of the `index`-th multicast LID; `false` when
    /// `index >= 32`.
    pub fn set_port_mask(&mut self, index: usize, mask: u16) -> bool {
        if index >= MFT_BLOCK_LEN {
            return false;
        }
        match self.buffer.as_mut().get_mut(index * 2..index * 2 + 2) {
            Some(bytes) => {
                bytes.copy_from_slice(&mask.to_be_bytes());
                true
            }
            None => false,
        }
    }
}

/// Where an MFT block sits, as its AttributeModifier says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MftModifier {
    /// Block number (9 bits): multicast LIDs `0xC000 + 32·block ..`.
    pub block: u16,
    /// Position (4 bits): ports `16·position ..= 16·position + 15`.
    pub position: u8,
}

impl MftModifier {
    /// The AttributeModifier; fails when either part is out of range.
    pub fn to_u32(self) -> Result<u32> {
        if self.block > MFT_MAX_BLOCK {
            return Err(bad("MFT block", self.block));
        }
        if self.position > MFT_MAX_POSITION {
            return Err(bad("MFT position", self.position));
        }
        Ok(u32::from(self.position) << 28 | u32::from(self.block))
    }

    /// Reads an AttributeModifier; fails when reserved bits 27..9 are set.
    pub fn from_u32(modifier: u32) -> Result<Self> {
        if modifier & 0x0FFF_FE00 != 0 {
            return Err(bad("MFT AttributeModifier", modifier));
        }
        Ok(Self {
            block: (modifier & 0x1FF) as u16,
            position: (modifier >> 28) as u8,
        })
    }

    /// Block, position and mask bit of port `port` for multicast `mlid`;
    /// `None` for a LID outside the multicast range.
    pub fn locate(mlid: u16, port: u8) -> Option<(Self, usize, u16)> {
        let offset = mlid.checked_sub(MULTICAST_LID_BASE)?;
        let modifier = Self {
            block: offset / MFT_BLOCK_LEN as u16,
            position: port / 16,
        };
        Some((
            modifier,
            usize::from(offset % MFT_BLOCK_LEN as u16),
            1 << (port % 16),
        ))
    }
}

/// An MFT block as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MftRepr {
    /// Port mask per multicast LID of the block.
    pub port_masks: [u16; MFT_BLOCK_LEN],
}

impl MftRepr {
    /// Reads a block; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &MftPacket<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut port_masks = [0; MFT_BLOCK_LEN];
        for (chunk, mask) in packet.as_bytes()[..MFT_LEN]
            .chunks_exact(2)
            .zip(port_masks.iter_mut())
        {
            *mask = u16::from_be_bytes([chunk[0], chunk[1]]);
        }
        Ok(Self { port_masks })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        MFT_LEN
    }

    /// Writes the block.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut MftPacket<&mut T>) {
        for (index, &mask) in self.port_masks.iter().enumerate() {
            packet.set_port_mask(index, mask);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lft_round_trip() {
        let mut repr = LftRepr::default();
        repr.ports[0] = 0;
        repr.ports[5] = 3;
        repr.ports[63] = 36;
        let mut buf = [0u8; LFT_BLOCK_LEN];
        repr.emit(&mut LftPacket::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..6], &[0, 0xff, 0xff, 0xff, 0xff, 3]);
        let packet = LftPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.port(63), Some(36));
        assert_eq!(packet.port(64), None);
        assert_eq!(LftRepr::parse(&packet), Ok(repr));
        assert!(LftPacket::new_checked(&buf[..63]).is_err());
    }

    #[test]
    fn lft_modifier() {
        assert_eq!(LftRepr::block_of(0x0105), (4, 5));
        assert_eq!(LftRepr::modifier(767), Ok(767));
        assert!(LftRepr::modifier(768).is_err());
        assert_eq!(LftRepr::parse_modifier(3), Ok(3));
        assert!(LftRepr::parse_modifier(0x1_0000).is_err());
        assert!(LftRepr::parse_modifier(768).is_err());
    }

    #[test]
    fn mft_round_trip() {
        let mut repr = MftRepr::default();
        repr.port_masks[0] = 0x8001;
        repr.port_masks[31] = 0x1234;
        let mut buf = [0u8; MFT_LEN];
        repr.emit(&mut MftPacket::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..2], &[0x80, 0x01]);
        assert_eq!(&buf[62..], &[0x12, 0x34]);
        let packet = MftPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.port_mask(31), Some(0x1234));
        assert_eq!(packet.port_mask(32), None);
        assert_eq!(MftRepr::parse(&packet), Ok(repr));
        let mut short = [0u8; 10];
        let mut p = MftPacket::new_unchecked(&mut short[..]);
        assert!(!p.set_port_mask(5, 1));
        assert_eq!(p.port_mask(5), None);
    }

    #[test]
    fn mft_modifier() {
        let m = MftModifier {
            block: 0x1ff,
            position: 2,
        };
        assert_eq!(m.to_u32(), Ok(0x2000_01ff));
        assert_eq!(MftModifier::from_u32(0x2000_01ff), Ok(m));
        assert!(MftModifier::from_u32(0x0000_0200).is_err());
        assert!(MftModifier {
            block: 0x200,
            position: 0
        }
        .to_u32()
        .is_err());
        assert!(MftModifier {
            block: 0,
            position: 16
        }
        .to_u32()
        .is_err());
        let (m, index, bit) = MftModifier::locate(0xC021, 17).unwrap();
        assert_eq!((m.block, m.position, index, bit), (1, 1, 1, 0x0002));
        assert_eq!(MftModifier::locate(0xBFFF, 1), None);
    }
}
