//! LinearForwardingTableRecord (IBA 15.2.5.6): one 64-entry block of a
//! switch's LFT.
//!
//! ```text
//! offset  0  LID (16)  BlockNum (16)
//!         4  reserved (32)
//!         8  LinearForwardingTable block (64 ports, one per LID)
//! ```

use crate::field::{fields, packet};
use crate::forwarding::LFT_BLOCK_LEN;
use crate::sa::components;
use crate::Result;

/// Length of the record (AttributeOffset 9).
pub const LEN: usize = 8 + LFT_BLOCK_LEN;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;

components! {
    /// LID.
    c(0, 16) => LID,
    /// BlockNum.
    c(16, 16) => BLOCK,
    c(32, 32),  // reserved
    c(64, 512), // LinearForwardingTable block
}

packet!(
    /// A view of LinearForwardingTableRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the switch.
    lid, set_lid: u16 @ 0;
    /// Block number (LIDs 64·n ..= 64·n + 63).
    block_num, set_block_num: u16 @ 2;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The 64 output ports.
    pub fn ports(&self) -> &[u8] {
        &self.buffer.as_ref()[8..LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The 64 output ports, writable.
    pub fn ports_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[8..LEN]
    }
}

/// LinearForwardingTableRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The switch's LID.
    pub lid: u16,
    /// Block number.
    pub block_num: u16,
    /// Output port per LID of the block.
    pub ports: [u8; LFT_BLOCK_LEN],
}

impl Repr {
    /// Reads the record; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut ports = [0; LFT_BLOCK_LEN];
        ports.copy_from_slice(packet.ports());
        Ok(Self {
            lid: packet.lid(),
            block_num: packet.block_num(),
            ports,
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the record, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_lid(self.lid);
        packet.set_block_num(self.block_num);
        packet.buffer.as_mut()[4..8].fill(0);
        packet.ports_mut().copy_from_slice(&self.ports);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let mut ports = [0xffu8; LFT_BLOCK_LEN];
        ports[1] = 3;
        let repr = Repr {
            lid: 5,
            block_num: 2,
            ports,
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(&buf[..10], &[0, 5, 0, 2, 0, 0, 0, 0, 0xff, 3]);
        assert_eq!(COMPONENTS[1].value(&buf), 2);
    }
}
