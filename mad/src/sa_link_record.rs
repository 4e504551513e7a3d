//! LinkRecord (IBA 15.2.5.13): one direction of a link between two
//! ports, by LID (a switch's ports all use its port-0 LID).
//!
//! ```text
//! offset  0  FromLID (16)  FromPort  ToPort
//!         4  ToLID (16)    padding (16)
//! ```

use crate::field::{fields, packet};
use crate::sa::components;
use crate::Result;

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

impl Repr {
    /// Reads LinkRecord; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            from_lid: packet.from_lid(),
            from_port: packet.from_port(),
            to_port: packet.to_port(),
            to_lid: packet.to_lid(),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        6
    }

    /// Writes LinkRecord.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_from_lid(self.from_lid);
        packet.set_from_port(self.from_port);
        packet.set_to_port(self.to_port);
        packet.set_to_lid(self.to_lid);
    }
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
