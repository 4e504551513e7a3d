//! VLArbitrationTableRecord (IBA 15.2.5.9): one 32-entry block of an
//! output port's VL arbitration table.
//!
//! ```text
//! offset  0  LID (16)  OutputPortNum (8)  BlockNum (8)
//!         4  reserved (32)
//!         8  VLArbitrationTable block: 32 × (reserved 4, VL 4, Weight 8)
//! ```
//!
//! BlockNum as in the VLArbitrationTable attribute modifier: 1 and 2 the
//! low-priority table's entries 0–31 and 32–63, 3 and 4 the high ones.

use crate::field::{fields, packet};
use crate::sa::components;
use crate::Result;

/// Entries per block.
pub const ENTRIES: usize = 32;
/// Length of the record (AttributeOffset 9).
pub const LEN: usize = 8 + 2 * ENTRIES;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;

components! {
    /// LID.
    c(0, 16) => LID,
    /// OutputPortNum.
    c(16, 8) => OUT_PORT,
    /// BlockNum.
    c(24, 8) => BLOCK,
    c(32, 32),  // reserved
    c(64, 512), // VLArbitrationTable block
}

packet!(
    /// A view of VLArbitrationTableRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the port (a switch's port-0 LID for all its ports).
    lid, set_lid: u16 @ 0;
    /// Output port (switches; 0 asks a CA's port by its LID).
    out_port_num, set_out_port_num: u8 @ 2;
    /// Block number (1..=4).
    block_num, set_block_num: u8 @ 3;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Entry `i` (< 32) as (VL, weight).
    pub fn entry(&self, i: usize) -> (u8, u8) {
        let b = self.buffer.as_ref();
        (b[8 + 2 * i] & 0x0F, b[9 + 2 * i])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets entry `i` (< 32); the reserved bits are zeroed.
    pub fn set_entry(&mut self, i: usize, vl: u8, weight: u8) {
        let b = self.buffer.as_mut();
        b[8 + 2 * i] = vl & 0x0F;
        b[9 + 2 * i] = weight;
    }
}

/// VLArbitrationTableRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// LID.
    pub lid: u16,
    /// Output port.
    pub out_port_num: u8,
    /// Block number.
    pub block_num: u8,
    /// (VL, weight) per entry.
    pub entries: [(u8, u8); ENTRIES],
}

impl Repr {
    /// Reads the record; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut entries = [(0, 0); ENTRIES];
        for (i, e) in entries.iter_mut().enumerate() {
            *e = packet.entry(i);
        }
        Ok(Self {
            lid: packet.lid(),
            out_port_num: packet.out_port_num(),
            block_num: packet.block_num(),
            entries,
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the record, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_lid(self.lid);
        packet.set_out_port_num(self.out_port_num);
        packet.set_block_num(self.block_num);
        packet.buffer.as_mut()[4..8].fill(0);
        for (i, &(vl, weight)) in self.entries.iter().enumerate() {
            packet.set_entry(i, vl, weight);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let mut entries = [(0u8, 0u8); ENTRIES];
        entries[0] = (1, 64);
        entries[31] = (15, 255);
        let repr = Repr {
            lid: 9,
            out_port_num: 4,
            block_num: 3,
            entries,
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(&buf[..10], &[0, 9, 4, 3, 0, 0, 0, 0, 1, 64]);
        assert_eq!(&buf[70..72], &[15, 255]);
        assert_eq!(COMPONENTS[1].value(&buf), 4);
        assert_eq!(COMPONENTS[2].value(&buf), 3);
    }
}
