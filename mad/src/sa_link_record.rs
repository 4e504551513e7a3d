//! LinkRecord (IBA 15.2.5.13): one direction of a link between two
//! ports, by LID (a switch's ports all use its port-0 LID).
//!
//! ```text
//! offset  0  FromLID (16)  FromPort  ToPort
//!         4  ToLID (16)    padding (16)
//! ```

use crate::field::{fields, packet};
use crate::sa::{components, repr_io};

/// Length of the record (AttributeOffset 1).
pub const LEN: usize = 8;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = 8;

components! {
    /// FromLID.
    c(0, 16) => FROM_LID,
    /// FromPort.
    c(16, 8) => FROM_PORT,
    /// ToPort.
    c(24, 8) => TO_PORT,
    /// ToLID.
    c(32, 16) => TO_LID,
}

packet!(
    /// A view of LinkRecord.
    Packet,
    6
);

fields! { Packet;
    /// FromLID.
    from_lid, set_from_lid: u16 @ 0;
    /// FromPort.
    from_port, set_from_port: u8 @ 2;
    /// ToPort.
    to_port, set_to_port: u8 @ 3;
    /// ToLID.
    to_lid, set_to_lid: u16 @ 4;
}

/// LinkRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[allow(missing_docs)]
pub struct Repr {
    pub from_lid: u16,
    pub from_port: u8,
    pub to_port: u8,
    pub to_lid: u16,
}

repr_io! { Packet => Repr, 6;
    /// Reads LinkRecord; fails only on a short buffer.
    parse;
    /// Writes LinkRecord.
    emit [];
    from_lid: get from_lid, set_from_lid;
    from_port: get from_port, set_from_port;
    to_port: get to_port, set_to_port;
    to_lid: get to_lid, set_to_lid;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            from_lid: 0x10,
            from_port: 3,
            to_port: 7,
            to_lid: 0x20,
        };
        // Emit writes the fields, not the padding (buffer_len 6).
        let buf = crate::sa::round_trip!(repr, LEN, repr.buffer_len());
        assert_eq!(buf, [0, 0x10, 3, 7, 0, 0x20, 0xee, 0xee]);
        assert_eq!(COMPONENTS[3].value(&buf), 0x20);
    }
}
