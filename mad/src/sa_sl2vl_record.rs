//! SLtoVLMappingTableRecord (IBA 15.2.5.4): the SL-to-VL map a port
//! applies to packets from one input port leaving by one output port.
//!
//! ```text
//! offset  0  LID (16)  InputPortNum (8)  OutputPortNum (8)
//!         4  reserved (32)
//!         8  SLtoVLMappingTable (16 × 4 bits, SL 0 in the high nibble)
//! ```

use crate::field::{fields, packet};
use crate::sa::components;
use crate::Result;

/// Length of the record (AttributeOffset 2).
pub const LEN: usize = 16;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = LEN;

components! {
    /// LID.
    c(0, 16) => LID,
    /// InputPortNum.
    c(16, 8) => IN_PORT,
    /// OutputPortNum.
    c(24, 8) => OUT_PORT,
    c(32, 32), // reserved
    c(64, 64), // SLtoVLMappingTable
}

packet!(
    /// A view of SLtoVLMappingTableRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the port (a switch's port-0 LID for all its ports).
    lid, set_lid: u16 @ 0;
    /// Input port (switches; 0 for a CA port).
    in_port_num, set_in_port_num: u8 @ 2;
    /// Output port (switches; 0 for a CA port).
    out_port_num, set_out_port_num: u8 @ 3;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The VL of SL `sl` (< 16).
    pub fn vl(&self, sl: usize) -> u8 {
        let b = self.buffer.as_ref()[8 + sl / 2];
        if sl.is_multiple_of(2) {
            b >> 4
        } else {
            b & 0x0F
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the VL of SL `sl` (< 16) to `vl` (low 4 bits).
    pub fn set_vl(&mut self, sl: usize, vl: u8) {
        let b = &mut self.buffer.as_mut()[8 + sl / 2];
        *b = if sl.is_multiple_of(2) {
            (*b & 0x0F) | (vl << 4)
        } else {
            (*b & 0xF0) | (vl & 0x0F)
        };
    }
}

/// SLtoVLMappingTableRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// LID.
    pub lid: u16,
    /// Input port.
    pub in_port_num: u8,
    /// Output port.
    pub out_port_num: u8,
    /// VL per SL (each < 16).
    pub vl: [u8; 16],
}

impl Repr {
    /// Reads the record; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut vl = [0; 16];
        for (sl, v) in vl.iter_mut().enumerate() {
            *v = packet.vl(sl);
        }
        Ok(Self {
            lid: packet.lid(),
            in_port_num: packet.in_port_num(),
            out_port_num: packet.out_port_num(),
            vl,
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the record, reserved bits zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_lid(self.lid);
        packet.set_in_port_num(self.in_port_num);
        packet.set_out_port_num(self.out_port_num);
        packet.buffer.as_mut()[4..8].fill(0);
        for (sl, &v) in self.vl.iter().enumerate() {
            packet.set_vl(sl, v & 0x0F);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let mut vl = [0u8; 16];
        for (sl, v) in vl.iter_mut().enumerate() {
            *v = (sl % 8) as u8;
        }
        vl[15] = 15;
        let repr = Repr {
            lid: 7,
            in_port_num: 3,
            out_port_num: 5,
            vl,
        };
        let buf = crate::sa::round_trip!(repr, LEN);
        assert_eq!(&buf[..8], &[0, 7, 3, 5, 0, 0, 0, 0]);
        assert_eq!(&buf[8..16], &[0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x6F]);
        assert_eq!(COMPONENTS[1].value(&buf), 3);
        assert_eq!(COMPONENTS[2].value(&buf), 5);
    }
}
