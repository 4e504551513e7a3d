//! MulticastForwardingTableRecord (IBA 15.2.5.8): one block (32 MLIDs ×
//! 16 ports) of a switch's MFT.
//!
//! ```text
//! offset  0  LID (16)  Position(4)|reserved(3)|BlockNum(9)
//!         4  reserved (32)
//!         8  MulticastForwardingTable block (32 port masks of 16 bits)
//! ```

use crate::field::{elements, fields, packet};
use crate::sa::components;
use crate::Result;

/// Port masks per block.
pub const MASKS: usize = 32;
/// Length of the record (AttributeOffset 9).
pub const LEN: usize = 8 + 2 * MASKS;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;

components! {
    /// LID.
    c(0, 16) => LID,
    /// Position.
    c(16, 4) => POSITION,
    c(20, 3),   // reserved
    /// BlockNum.
    c(23, 9) => BLOCK,
    c(32, 32),  // reserved
    c(64, 512), // MulticastForwardingTable block
}

packet!(
    /// A view of MulticastForwardingTableRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the switch.
    lid, set_lid: u16 @ 0;
    /// Position: which 16 ports the masks cover (ports 16·n ..= 16·n + 15).
    position, set_position: u16 @ 2 => bits 12, 4;
    /// Block number: MLIDs 0xC000 + 32·n ..
    block_num, set_block_num: u16 @ 2 => bits 0, 9;
}

elements! { Packet;
    /// Port mask `i` of the block (`i` < 32).
    mask, set_mask: u16 @ 8;
}

/// MulticastForwardingTableRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// LID of the switch.
    pub lid: u16,
    /// Position (4 bits).
    pub position: u8,
    /// Block number (9 bits).
    pub block_num: u16,
    /// Port masks, one per MLID of the block.
    pub masks: [u16; MASKS],
}

impl Repr {
    /// Reads the record; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            lid: packet.lid(),
            position: packet.position() as u8,
            block_num: packet.block_num(),
            masks: core::array::from_fn(|i| packet.mask(i)),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the record, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        let buf = packet.buffer.as_mut();
        buf[2..8].fill(0);
        packet.set_lid(self.lid);
        packet.set_position(u16::from(self.position));
        packet.set_block_num(self.block_num);
        for (i, &m) in self.masks.iter().enumerate() {
            packet.set_mask(i, m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let mut masks = [0u16; MASKS];
        masks[1] = 0x8006;
        let repr = Repr {
            lid: 2,
            position: 1,
            block_num: 0x101,
            masks,
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(
            &buf[..12],
            &[0, 2, 0x11, 0x01, 0, 0, 0, 0, 0, 0, 0x80, 0x06]
        );
        assert_eq!(COMPONENTS[3].value(&buf), 0x101);
    }
}
