//! MultiPathRecord (IBA 15.2.5.20): a GetMulti request for paths between
//! several source and destination GIDs; the answer is PathRecords.
//!
//! ```text
//! offset  0  RawTraffic(1)|reserved(3)|FlowLabel(20)|HopLimit(8)
//!         4  TClass  Reversible(1)|NumbPath(7)  P_Key (16)
//!         8  QoSClass(12)|SL(4)  MTUSelector(2)|MTU(6)  RateSelector(2)|Rate(6)
//!        12  PacketLifeTimeSelector(2)|PacketLifeTime(6)  ServiceID (8 MSB)
//!        14  IndependenceSelector(2)|reserved(6)  SGIDCount  DGIDCount
//!        17  ServiceID (56 LSB)
//!        24  SDGID 1..n (128 each: SGIDCount sources, then DGIDCount destinations)
//! ```
//!
//! Bytes 0..13 have the layout of PathRecord bytes 44..57, which is how a
//! query's path components are carried over to PathRecord matching.

use crate::field::{fields, packet};
use crate::sa::gid_at;
use crate::Result;

/// Length of the fixed part.
pub const FIXED_LEN: usize = 24;
/// GIDs that fit in one MAD's SA data.
pub const MAX_GIDS: usize = (200 - FIXED_LEN) / 16;

/// Component bits by name.
pub mod component {
    /// RawTraffic.
    pub const RAW_TRAFFIC: u64 = 1 << 0;
    /// FlowLabel.
    pub const FLOW_LABEL: u64 = 1 << 2;
    /// HopLimit.
    pub const HOP_LIMIT: u64 = 1 << 3;
    /// TClass.
    pub const TCLASS: u64 = 1 << 4;
    /// Reversible.
    pub const REVERSIBLE: u64 = 1 << 5;
    /// NumbPath.
    pub const NUMB_PATH: u64 = 1 << 6;
    /// P_Key.
    pub const PKEY: u64 = 1 << 7;
    /// QoSClass.
    pub const QOS_CLASS: u64 = 1 << 8;
    /// SL.
    pub const SL: u64 = 1 << 9;
    /// MTUSelector.
    pub const MTU_SELECTOR: u64 = 1 << 10;
    /// MTU.
    pub const MTU: u64 = 1 << 11;
    /// RateSelector.
    pub const RATE_SELECTOR: u64 = 1 << 12;
    /// Rate.
    pub const RATE: u64 = 1 << 13;
    /// PacketLifeTimeSelector.
    pub const PKT_LIFE_SELECTOR: u64 = 1 << 14;
    /// PacketLifeTime.
    pub const PKT_LIFE: u64 = 1 << 15;
    /// SGIDCount.
    pub const SGID_COUNT: u64 = 1 << 19;
    /// DGIDCount.
    pub const DGID_COUNT: u64 = 1 << 20;
}

/// The path components of a MultiPathRecord (bits 0..=15) as the
/// PathRecord component bits with the same meaning.
pub fn path_components(mask: u64) -> u64 {
    // MultiPathRecord bit → PathRecord bit.
    const MAP: [(u32, u32); 15] = [
        (0, 6),
        (2, 8),
        (3, 9),
        (4, 10),
        (5, 11),
        (6, 12),
        (7, 13),
        (8, 14),
        (9, 15),
        (10, 16),
        (11, 17),
        (12, 18),
        (13, 19),
        (14, 20),
        (15, 21),
    ];
    MAP.iter()
        .filter(|(m, _)| mask & (1u64 << m) != 0)
        .fold(0, |acc, (_, p)| acc | (1u64 << p))
}

packet!(
    /// A view of MultiPathRecord (fixed part; GIDs follow).
    Packet,
    FIXED_LEN
);

fields! { Packet;
    /// Reversible.
    reversible, set_reversible: bool @ 5 => bit 7;
    /// NumbPath: how many paths at most in all.
    numb_path, set_numb_path: u8 @ 5 => bits 0, 7;
    /// SGIDCount.
    sgid_count, set_sgid_count: u8 @ 15;
    /// DGIDCount.
    dgid_count, set_dgid_count: u8 @ 16;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The path fields laid out as PathRecord bytes 44..57.
    pub fn path_fields(&self) -> &[u8] {
        &self.buffer.as_ref()[0..13]
    }

    /// GID `i` of the list (sources first), if the buffer holds it.
    pub fn gid(&self, i: usize) -> Option<u128> {
        let off = FIXED_LEN + 16 * i;
        (self.buffer.as_ref().len() >= off + 16).then(|| gid_at(self.buffer.as_ref(), off))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets GID `i` of the list; the buffer must hold it.
    pub fn set_gid(&mut self, i: usize, gid: u128) {
        crate::sa::set_gid_at(self.buffer.as_mut(), FIXED_LEN + 16 * i, gid)
    }
}

/// The GID lists of a MultiPathRecord.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Repr {
    /// Reversible.
    pub reversible: bool,
    /// NumbPath.
    pub numb_path: u8,
    /// Source GIDs.
    pub sgids: Vec<u128>,
    /// Destination GIDs.
    pub dgids: Vec<u128>,
}

impl Repr {
    /// Reads the counts and GIDs; fails when the buffer does not hold the
    /// GIDs the counts announce.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        let (s, d) = (
            usize::from(packet.sgid_count()),
            usize::from(packet.dgid_count()),
        );
        crate::field::check_len(packet.as_bytes(), FIXED_LEN + 16 * (s + d))?;
        let gids: Vec<u128> = (0..s + d).filter_map(|i| packet.gid(i)).collect();
        Ok(Self {
            reversible: packet.reversible(),
            numb_path: packet.numb_path(),
            sgids: gids[..s].to_vec(),
            dgids: gids[s..].to_vec(),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        FIXED_LEN + 16 * (self.sgids.len() + self.dgids.len())
    }

    /// Writes counts and GIDs (the path fields are left as they are).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_reversible(self.reversible);
        packet.set_numb_path(self.numb_path);
        packet.set_sgid_count(self.sgids.len() as u8);
        packet.set_dgid_count(self.dgids.len() as u8);
        for (i, &g) in self.sgids.iter().chain(self.dgids.iter()).enumerate() {
            packet.set_gid(i, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            reversible: true,
            numb_path: 2,
            sgids: vec![1, 2],
            dgids: vec![3],
        };
        let mut buf = [0u8; 200];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!((buf[5], buf[15], buf[16]), (0x82, 2, 1));
        assert_eq!(buf[24 + 15], 1);
        assert_eq!(buf[24 + 47], 3);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        assert!(Repr::parse(&Packet::new_checked(&buf[..70]).unwrap()).is_err());
        assert_eq!(
            path_components(component::SL | component::NUMB_PATH),
            (1 << 15) | (1 << 12)
        );
    }
}
