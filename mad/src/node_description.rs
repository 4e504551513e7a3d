//! NodeDescription (IBA 14.2.5.2): 64 bytes of UTF-8 naming the node,
//! padded with NULs, not necessarily NUL-terminated.

use crate::field::{bad, packet};
use crate::Result;

/// Length of NodeDescription.
pub const LEN: usize = 64;

packet!(
    /// A view of NodeDescription.
    Packet,
    LEN
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The 64 raw bytes.
    pub fn description(&self) -> &[u8] {
        &self.buffer.as_ref()[..LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The 64 raw bytes, writable.
    pub fn description_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[..LEN]
    }
}

/// NodeDescription as values: the raw bytes, because devices put
/// anything there and an SM must pass it on unchanged (SA NodeRecords,
/// dumps), whatever its encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The 64 bytes as on the wire.
    pub bytes: [u8; LEN],
}

impl Repr {
    /// A description from text; fails beyond 64 bytes rather than cut a
    /// name (or a UTF-8 sequence) short.
    pub fn from_text(text: &str) -> Result<Self> {
        if text.len() > LEN {
            return Err(bad("NodeDescription length", text.len() as u64));
        }
        let mut bytes = [0; LEN];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Ok(Self { bytes })
    }

    /// The text up to the first NUL, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        let end = self.bytes.iter().position(|&b| b == 0).unwrap_or(LEN);
        String::from_utf8_lossy(&self.bytes[..end]).into_owned()
    }

    /// Reads NodeDescription; fails only on a short buffer.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let mut bytes = [0; LEN];
        bytes.copy_from_slice(packet.description());
        Ok(Self { bytes })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes NodeDescription.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.description_mut().copy_from_slice(&self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trip() {
        let repr = Repr::from_text("sw-leaf-01 HCA-1").unwrap();
        assert_eq!(repr.text(), "sw-leaf-01 HCA-1");
        let mut buf = [0xffu8; LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..4], b"sw-l");
        assert!(buf[16..].iter().all(|&b| b == 0));
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        let full = Repr::from_text(&"x".repeat(64)).unwrap();
        assert_eq!(full.text().len(), 64);
        assert!(Repr::from_text(&"x".repeat(65)).is_err());
        assert!(Packet::new_checked(&buf[..63]).is_err());
    }
}
