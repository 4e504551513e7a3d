//! SLtoVLMappingTable (IBA 14.2.5.8): the VL each of the 16 SLs uses on
//! one (input port, output port) pair of a switch, or on a CA/router
//! port. Each byte holds two SLs, the even one in the high nibble.
//!
//! AttributeModifier on a switch: bits 15..8 input port, 7..0 output
//! port; bit 17 applies the table to all input ports and bit 16 to all
//! output ports (the optimised programming OpenSM uses when SwitchInfo
//! advertises it). It is ignored on CAs.

use crate::field::{bad, packet};
use crate::Result;

/// Length of the table.
pub const LEN: usize = 8;
/// Number of SLs.
pub const SLS: usize = 16;
/// VL 15 in the table: drop packets on that SL.
pub const DROP_VL: u8 = 15;

packet!(
    /// A view of an SLtoVLMappingTable.
    Packet,
    LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// VL of service level `sl`, if `sl < 16`.
    pub fn vl(&self, sl: usize) -> Option<u8> {
        if sl >= SLS {
            return None;
        }
        let byte = *self.buffer.as_ref().get(sl / 2)?;
        Some(if sl & 1 == 0 { byte >> 4 } else { byte & 0x0F })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the VL of `sl` (low 4 bits of `vl`); `false` when `sl >= 16`.
    pub fn set_vl(&mut self, sl: usize, vl: u8) -> bool {
        if sl >= SLS {
            return false;
        }
        let Some(byte) = self.buffer.as_mut().get_mut(sl / 2) else {
            return false;
        };
        *byte = if sl & 1 == 0 {
            (*byte & 0x0F) | (vl << 4)
        } else {
            (*byte & 0xF0) | (vl & 0x0F)
        };
        true
    }
}

/// The table as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// VL per SL (4 bits each).
    pub vl_by_sl: [u8; SLS],
}

impl Repr {
    /// Reads the table; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut vl_by_sl = [0; SLS];
        for (sl, vl) in vl_by_sl.iter_mut().enumerate() {
            *vl = packet.vl(sl).unwrap_or(0);
        }
        Ok(Self { vl_by_sl })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the table (VLs above 15 lose their high bits).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        for (sl, &vl) in self.vl_by_sl.iter().enumerate() {
            packet.set_vl(sl, vl);
        }
    }
}

/// Which port pair a table applies to, as its AttributeModifier says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sl2VlModifier {
    /// Input port (ignored with `all_input_ports`).
    pub input_port: u8,
    /// Output port (ignored with `all_output_ports`).
    pub output_port: u8,
    /// Bit 17: every input port.
    pub all_input_ports: bool,
    /// Bit 16: every output port.
    pub all_output_ports: bool,
}

impl Sl2VlModifier {
    /// The AttributeModifier.
    pub const fn to_u32(self) -> u32 {
        (self.all_input_ports as u32) << 17
            | (self.all_output_ports as u32) << 16
            | (self.input_port as u32) << 8
            | self.output_port as u32
    }

    /// Reads an AttributeModifier; fails when reserved bits 31..18 are set.
    pub fn from_u32(modifier: u32) -> Result<Self> {
        if modifier & 0xFFFC_0000 != 0 {
            return Err(bad("SLtoVL AttributeModifier", modifier));
        }
        Ok(Self {
            input_port: (modifier >> 8) as u8,
            output_port: modifier as u8,
            all_input_ports: modifier & 1 << 17 != 0,
            all_output_ports: modifier & 1 << 16 != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibble_order_and_round_trip() {
        let mut repr = Repr::default();
        for (sl, vl) in repr.vl_by_sl.iter_mut().enumerate() {
            *vl = sl as u8 % 8;
        }
        repr.vl_by_sl[15] = DROP_VL;
        let mut buf = [0u8; LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x6f]);
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.vl(15), Some(15));
        assert_eq!(packet.vl(16), None);
        assert_eq!(Repr::parse(&packet), Ok(repr));
        assert!(Packet::new_checked(&buf[..7]).is_err());
    }

    #[test]
    fn modifier() {
        let m = Sl2VlModifier {
            input_port: 1,
            output_port: 3,
            ..Default::default()
        };
        assert_eq!(m.to_u32(), 0x0103);
        assert_eq!(Sl2VlModifier::from_u32(0x0103), Ok(m));
        let all = Sl2VlModifier {
            all_input_ports: true,
            all_output_ports: true,
            ..Default::default()
        };
        assert_eq!(all.to_u32(), 0x30000);
        assert_eq!(Sl2VlModifier::from_u32(0x30000), Ok(all));
        assert!(Sl2VlModifier::from_u32(0x40000).is_err());
    }
}
