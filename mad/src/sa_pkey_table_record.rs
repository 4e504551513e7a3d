//! P_KeyTableRecord (IBA 15.2.5.11): one 32-entry block of a port's
//! P_Key table.
//!
//! ```text
//! offset  0  LID (16)  BlockNum (16)
//!         4  PortNum  reserved (24)
//!         8  P_KeyTable block (32 × 16)
//! ```

use crate::field::{elements, fields, packet};
use crate::sa::{components, repr_io};

/// P_Keys per block.
pub const PKEYS: usize = 32;
/// Length of the record (AttributeOffset 9).
pub const LEN: usize = 8 + 2 * PKEYS;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;

components! {
    /// LID.
    c(0, 16) => LID,
    /// BlockNum.
    c(16, 16) => BLOCK,
    /// PortNum.
    c(32, 8) => PORT,
    c(40, 24),  // reserved
    c(64, 512), // P_KeyTable block
}

packet!(
    /// A view of P_KeyTableRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the port (a switch's port-0 LID for all its ports).
    lid, set_lid: u16 @ 0;
    /// Block number.
    block_num, set_block_num: u16 @ 2;
    /// Port number (switches).
    port_num, set_port_num: u8 @ 4;
}

elements! { Packet;
    /// P_Key `i` of the block (`i` < 32).
    pkey, set_pkey: u16 @ 8;
}

/// P_KeyTableRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// LID.
    pub lid: u16,
    /// Block number.
    pub block_num: u16,
    /// Port number.
    pub port_num: u8,
    /// The block's P_Keys (0: unused entry).
    pub pkeys: [u16; PKEYS],
}

repr_io! { Packet => Repr, LEN;
    /// Reads the record; fails only on a short buffer.
    parse;
    /// Writes the record, reserved bits zeroed.
    emit [5..8];
    lid: get lid, set_lid;
    block_num: get block_num, set_block_num;
    port_num: get port_num, set_port_num;
    pkeys: each pkey, set_pkey;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let mut pkeys = [0u16; PKEYS];
        pkeys[0] = 0xffff;
        let repr = Repr {
            lid: 4,
            block_num: 0,
            port_num: 2,
            pkeys,
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(&buf[..10], &[0, 4, 0, 0, 2, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(COMPONENTS[2].value(&buf), 2);
    }
}
