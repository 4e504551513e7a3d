//! GUIDInfo (IBA 14.2.5.5): one block of 8 GUIDs of a port, the port GUID
//! at index 0 of block 0 (read-only) and alias GUIDs after it; an entry
//! of 0 is unused. PortInfo.GUIDCap says how many entries the port has.
//!
//! AttributeModifier: the block number (CAs: the table of the port the
//! SMP came through; switches: port 0's).

use crate::field::{bad, packet};
use crate::Result;

/// GUIDs in one block.
pub const GUIDS: usize = 8;
/// Length of one block.
pub const LEN: usize = 8 * GUIDS;

packet!(
    /// A view of one GUIDInfo block.
    Packet,
    LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Entry `i` of the block, if `i < 8`.
    pub fn guid(&self, i: usize) -> Option<u64> {
        let b = self.buffer.as_ref().get(8 * i..8 * i + 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        (i < GUIDS).then(|| u64::from_be_bytes(a))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets entry `i`; `false` when `i >= 8`.
    pub fn set_guid(&mut self, i: usize, guid: u64) -> bool {
        if i >= GUIDS {
            return false;
        }
        match self.buffer.as_mut().get_mut(8 * i..8 * i + 8) {
            Some(b) => {
                b.copy_from_slice(&guid.to_be_bytes());
                true
            }
            None => false,
        }
    }
}

/// One block as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The 8 entries.
    pub guids: [u64; GUIDS],
}

impl Repr {
    /// Reads the block; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut guids = [0; GUIDS];
        for (i, g) in guids.iter_mut().enumerate() {
            *g = packet.guid(i).unwrap_or(0);
        }
        Ok(Self { guids })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the block.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        for (i, &g) in self.guids.iter().enumerate() {
            packet.set_guid(i, g);
        }
    }
}

/// The block number of an AttributeModifier (GUIDCap is at most 255
/// entries: 32 blocks).
pub fn from_modifier(modifier: u32) -> Result<u8> {
    if modifier >= 32 {
        return Err(bad("GUIDInfo AttributeModifier", modifier));
    }
    Ok(modifier as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_big_endian() {
        let mut r = Repr::default();
        r.guids[0] = 0x0002_c903_0000_0001;
        r.guids[7] = 0x0102_0304_0506_0708;
        let mut buf = [0u8; LEN];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..8], &[0x00, 0x02, 0xc9, 0x03, 0, 0, 0, 1]);
        assert_eq!(&buf[56..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), r);
        assert!(Packet::new_checked(&buf[..63]).is_err());
        assert_eq!(from_modifier(31).unwrap(), 31);
        assert!(from_modifier(32).is_err());
    }
}
