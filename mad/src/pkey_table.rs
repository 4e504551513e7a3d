//! P_KeyTable (IBA 14.2.5.7): one block of 32 P_Keys of a port, each 16
//! bits, bit 15 the membership type (1 = full, 0 = limited). An entry of
//! 0 (or 0x8000) is unused.
//!
//! AttributeModifier: bits 15..0 the block number; on a switch bits
//! 31..16 the port number (the table of an external port, used for
//! partition enforcement), ignored on CAs.

use crate::field::{bad, packet};
use crate::Result;

/// P_Keys in one block.
pub const PKEYS: usize = 32;
/// Length of one block.
pub const LEN: usize = 2 * PKEYS;
/// The membership bit: set for a full member.
pub const FULL: u16 = 0x8000;

packet!(
    /// A view of one P_KeyTable block.
    Packet,
    LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Entry `i` of the block, if `i < 32`.
    pub fn pkey(&self, i: usize) -> Option<u16> {
        let b = self.buffer.as_ref().get(2 * i..2 * i + 2)?;
        (i < PKEYS).then(|| u16::from_be_bytes([b[0], b[1]]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets entry `i`; `false` when `i >= 32`.
    pub fn set_pkey(&mut self, i: usize, pkey: u16) -> bool {
        if i >= PKEYS {
            return false;
        }
        match self.buffer.as_mut().get_mut(2 * i..2 * i + 2) {
            Some(b) => {
                b.copy_from_slice(&pkey.to_be_bytes());
                true
            }
            None => false,
        }
    }
}

/// One block as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The 32 entries, membership bit included.
    pub pkeys: [u16; PKEYS],
}

impl Repr {
    /// Reads the block; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut pkeys = [0; PKEYS];
        for (i, p) in pkeys.iter_mut().enumerate() {
            *p = packet.pkey(i).unwrap_or(0);
        }
        Ok(Self { pkeys })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the block.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        for (i, &p) in self.pkeys.iter().enumerate() {
            packet.set_pkey(i, p);
        }
    }
}

/// The AttributeModifier of block `block` of port `port`'s table (`port`
/// is ignored by CAs; 0 for a switch's port 0).
pub const fn modifier(port: u8, block: u16) -> u32 {
    (port as u32) << 16 | block as u32
}

/// (port, block) of an AttributeModifier.
pub fn from_modifier(modifier: u32) -> Result<(u8, u16)> {
    if modifier >> 24 != 0 {
        return Err(bad("P_KeyTable AttributeModifier", modifier));
    }
    Ok(((modifier >> 16) as u8, modifier as u16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_big_endian() {
        let mut r = Repr::default();
        r.pkeys[0] = 0xFFFF;
        r.pkeys[1] = 0x0001;
        r.pkeys[31] = 0x8123;
        let mut buf = [0u8; LEN];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..4], &[0xFF, 0xFF, 0x00, 0x01]);
        assert_eq!(&buf[62..], &[0x81, 0x23]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), r);
        assert!(Packet::new_checked(&buf[..63]).is_err());
        assert_eq!(modifier(3, 2), 0x0003_0002);
        assert_eq!(from_modifier(0x0003_0002).unwrap(), (3, 2));
        assert!(from_modifier(0x0100_0000).is_err());
    }
}
