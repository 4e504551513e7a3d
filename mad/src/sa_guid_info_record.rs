//! GUIDInfoRecord (IBA 15.2.5.18): one 8-GUID block of a port's GUIDInfo
//! (its port GUID and alias GUIDs).
//!
//! ```text
//! offset  0  LID (16)  BlockNum  reserved
//!         4  reserved (32)
//!         8  GUID 0..7 (64 each)
//! ```

use crate::field::{elements, fields, packet};
use crate::sa::{components, repr_io};

/// GUIDs per block.
pub const GUIDS: usize = 8;
/// Length of the record (AttributeOffset 9).
pub const LEN: usize = 8 + 8 * GUIDS;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;

components! {
    /// LID.
    c(0, 16) => LID,
    /// BlockNum.
    c(16, 8) => BLOCK,
    c(24, 8),   // reserved
    c(32, 32),  // reserved
    c(64, 64),  // GUID 0
    c(128, 64), // GUID 1
    c(192, 64), // GUID 2
    c(256, 64), // GUID 3
    c(320, 64), // GUID 4
    c(384, 64), // GUID 5
    c(448, 64), // GUID 6
    c(512, 64), // GUID 7
}

packet!(
    /// A view of GUIDInfoRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the port.
    lid, set_lid: u16 @ 0;
    /// Block number.
    block_num, set_block_num: u8 @ 2;
}

elements! { Packet;
    /// GUID `i` of the block (`i` < 8).
    guid, set_guid: u64 @ 8;
}

/// GUIDInfoRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// LID of the port.
    pub lid: u16,
    /// Block number.
    pub block_num: u8,
    /// The block's GUIDs (0: unused).
    pub guids: [u64; GUIDS],
}

repr_io! { Packet => Repr, LEN;
    /// Reads the record; fails only on a short buffer.
    parse;
    /// Writes the record, reserved bits zeroed.
    emit [3..8];
    lid: get lid, set_lid;
    block_num: get block_num, set_block_num;
    guids: each guid, set_guid;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            lid: 3,
            block_num: 1,
            guids: [0x11, 0, 0, 0, 0, 0, 0, 0x88],
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(&buf[..9], &[0, 3, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(buf[15], 0x11);
        assert_eq!(COMPONENTS[11].value(&buf), 0x88);
    }
}
