//! Alias GUIDs (OpenSM's osm_sa_guidinfo_record.c, doc/opensm-sriov.txt):
//! a port's GUIDInfo table past index 0 (the port GUID, read-only), set
//! and cleared by hosts with GUIDInfoRecord Set and Delete. The SA keeps
//! the tables by port GUID across sweeps; PathRecords to a GID with an
//! alias GUID go to the port that owns it ([`crate::sa::SaDb::end_by_gid`]).
//!
//! OpenSM's rules, as this follows them:
//! * Set and Delete name a port by LID and a block (both components
//!   required); a block beyond the port's GUIDCap has no record; index 0
//!   of block 0 may not be named.
//! * Set of a GUID writes it at its index unless another port (or another
//!   index of the same port) has it already: then the entry stays.
//! * Set of 0 keeps what the index holds; an empty index gets the GUID
//!   the SA assigned it before, else a new SM-assigned one: OpenIB's
//!   vendor ID (0x001405) in the top 24 bits, `sm_assigned_guid` in the
//!   next 8 (OpenSM's default 0), a running count in the low 32.
//! * Delete clears the named entries.
//! * The answer is the block as the table holds it afterwards.

use std::collections::HashMap;

use sm_mad::sa::status;
use sm_mad::sa_guid_info_record::GUIDS;

/// OpenIB's IEEE vendor ID, the top of an SM-assigned GUID.
pub const OPENIB_VENDOR_ID: u64 = 0x001405;

/// How many SM-assigned GUIDs one Set tries before giving up on an index
/// (every one taken by a host's own), as OpenSM.
const ASSIGN_TRIES: usize = 1000;

/// The alias GUID tables of the subnet's ports.
#[derive(Debug, Default, Clone)]
pub struct AliasGuids {
    /// Port GUID → its GUIDInfo entries (whole blocks, [0] the port GUID).
    tables: HashMap<u64, Vec<u64>>,
    /// Alias GUID → the port GUID whose table holds it.
    owner: HashMap<u64, u64>,
    /// Port GUID → the GUIDs the SA assigned it, by index.
    assigned: HashMap<u64, Vec<u64>>,
    /// SM-assigned GUIDs handed out so far.
    count: u32,
    /// Bits 39..32 of an SM-assigned GUID (OpenSM `sm_assigned_guid`).
    assigned_byte: u8,
    /// Counts Sets and Deletes that changed a table: the SM programs the
    /// ports' GUIDInfo when it moves.
    generation: u64,
}

impl AliasGuids {
    /// No aliases yet; SM-assigned GUIDs carry `assigned_byte`.
    pub fn new(assigned_byte: u8) -> Self {
        Self { assigned_byte, ..Self::default() }
    }

    /// The port GUID whose table holds alias `guid` (not the port GUIDs
    /// themselves).
    pub fn port_of(&self, guid: u64) -> Option<u64> {
        self.owner.get(&guid).copied()
    }

    /// Changes so far (see the field).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Block `block` of the table of `port`, if the SA holds one.
    pub fn block(&self, port: u64, block: u8) -> Option<[u64; GUIDS]> {
        let first = usize::from(block) * GUIDS;
        let t = self.tables.get(&port)?.get(first..first + GUIDS)?;
        let mut out = [0; GUIDS];
        out.copy_from_slice(t);
        Some(out)
    }

    /// Blocks of the table of `port` (0 when the SA holds none).
    pub fn blocks(&self, port: u64) -> usize {
        self.tables.get(&port).map_or(0, |t| t.len() / GUIDS)
    }

    /// Every port the SA holds a table for, with its entries.
    pub fn tables(&self) -> impl Iterator<Item = (u64, &[u64])> {
        self.tables.iter().map(|(&p, t)| (p, &t[..]))
    }

    fn next_assigned(&mut self) -> Option<u64> {
        self.count = self.count.checked_add(1)?;
        Some(OPENIB_VENDOR_ID << 40 | u64::from(self.assigned_byte) << 32 | u64::from(self.count))
    }

    /// The indexes of `block` a port with `guid_cap` entries has, or the
    /// SA status refusing the request; `mask` is the GUID components
    /// named (bit i: GUID i of the block).
    fn range(guid_cap: u8, block: u8, mask: u8) -> Result<std::ops::Range<usize>, u16> {
        let blocks = usize::from(guid_cap).div_ceil(GUIDS);
        if usize::from(block) >= blocks {
            return Err(status::NO_RECORDS);
        }
        if block == 0 && mask & 1 != 0 {
            // The port GUID is read-only.
            return Err(status::REQ_INVALID);
        }
        let first = usize::from(block) * GUIDS;
        Ok(first..(first + GUIDS).min(usize::from(guid_cap)))
    }

    fn table(&mut self, port: u64, guid_cap: u8) -> &mut Vec<u64> {
        let len = usize::from(guid_cap).div_ceil(GUIDS) * GUIDS;
        self.tables.entry(port).or_insert_with(|| {
            let mut t = vec![0; len.max(GUIDS)];
            t[0] = port;
            t
        })
    }

    /// GUIDInfoRecord Set of the GUIDs `mask` names in `block` of `port`
    /// (GUIDCap `guid_cap`); the block afterwards, or an SA status.
    pub fn set(&mut self, port: u64, guid_cap: u8, block: u8, mask: u8, guids: [u64; GUIDS]) -> Result<[u64; GUIDS], u16> {
        let range = Self::range(guid_cap, block, mask)?;
        self.table(port, guid_cap);
        for i in range {
            if mask & 1 << (i % GUIDS) == 0 {
                continue;
            }
            let held = self.tables.get(&port).map_or(0, |t| t[i]);
            let mut guid = guids[i % GUIDS];
            if guid == 0 {
                if held != 0 {
                    continue;
                }
                let before = self.assigned.get(&port).and_then(|a| a.get(i)).copied().unwrap_or(0);
                if before != 0 {
                    if self.owner.contains_key(&before) {
                        continue;
                    }
                    guid = before;
                } else {
                    for _ in 0..ASSIGN_TRIES {
                        let Some(a) = self.next_assigned() else {
                            return Err(status::NO_RESOURCES);
                        };
                        if !self.owner.contains_key(&a) && !self.tables.contains_key(&a) {
                            guid = a;
                            break;
                        }
                    }
                    if guid == 0 {
                        continue;
                    }
                    let len = self.tables.get(&port).map_or(GUIDS, Vec::len);
                    let a = self.assigned.entry(port).or_insert_with(|| vec![0; len]);
                    a[i] = guid;
                }
            }
            if self.owner.contains_key(&guid) || (guid != port && self.tables.contains_key(&guid)) || guid == port {
                // A duplicate: held by a port (this one elsewhere
                // included) or a port's own GUID; the entry stays.
                continue;
            }
            if held != 0 {
                self.owner.remove(&held);
            }
            self.owner.insert(guid, port);
            if let Some(t) = self.tables.get_mut(&port) {
                t[i] = guid;
                self.generation += 1;
            }
        }
        self.block(port, block).ok_or(status::NO_RECORDS)
    }

    /// GUIDInfoRecord Delete of the GUIDs `mask` names in `block` of
    /// `port`; the block afterwards (all but the port GUID empty when the
    /// SA holds no table), or an SA status.
    pub fn delete(&mut self, port: u64, guid_cap: u8, block: u8, mask: u8) -> Result<[u64; GUIDS], u16> {
        let range = Self::range(guid_cap, block, mask)?;
        let Some(t) = self.tables.get_mut(&port) else {
            let mut out = [0; GUIDS];
            if block == 0 {
                out[0] = port;
            }
            return Ok(out);
        };
        for i in range {
            if mask & 1 << (i % GUIDS) != 0 && t[i] != 0 {
                self.owner.remove(&t[i]);
                t[i] = 0;
                self.generation += 1;
            }
        }
        self.block(port, block).ok_or(status::NO_RECORDS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PORT: u64 = 0x0002_c903_0000_0001;
    const OTHER: u64 = 0x0002_c903_0000_0002;

    #[test]
    fn set_and_delete_follow_opensm_rules() {
        let mut a = AliasGuids::new(0);
        // GUIDCap 12: blocks 0 and 1 (entries 8..12).
        let b = a.set(PORT, 12, 0, 0b0000_0110, [0, 0xa1, 0xa2, 0xa3, 0, 0, 0, 0]).unwrap();
        assert_eq!(b, [PORT, 0xa1, 0xa2, 0, 0, 0, 0, 0], "only the named entries");
        assert_eq!(a.port_of(0xa1), Some(PORT));
        assert_eq!(a.set(PORT, 12, 0, 0b1, [1; 8]), Err(status::REQ_INVALID), "the port GUID is read-only");
        assert_eq!(a.set(PORT, 12, 2, 0b10, [1; 8]), Err(status::NO_RECORDS), "beyond GUIDCap");
        // Entries past GUIDCap in the last block are not there.
        let b = a.set(PORT, 12, 1, 0xff, [0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7]).unwrap();
        assert_eq!(b, [0xb0, 0xb1, 0xb2, 0xb3, 0, 0, 0, 0]);
        // A GUID another port holds is refused: the entry stays.
        let b = a.set(OTHER, 8, 0, 0b10, [0, 0xa1, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(b[1], 0);
        assert_eq!(a.port_of(0xa1), Some(PORT));
        // Replacing an entry frees the old GUID.
        a.set(PORT, 12, 0, 0b100, [0, 0, 0xc2, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!((a.port_of(0xa2), a.port_of(0xc2)), (None, Some(PORT)));
        // Delete clears what is named.
        let b = a.delete(PORT, 12, 0, 0b10).unwrap();
        assert_eq!(b, [PORT, 0, 0xc2, 0, 0, 0, 0, 0]);
        assert_eq!(a.port_of(0xa1), None);
        assert_eq!(a.delete(PORT, 12, 0, 0b1), Err(status::REQ_INVALID));
    }

    #[test]
    fn set_of_zero_keeps_or_assigns() {
        let mut a = AliasGuids::new(0x7);
        let b = a.set(PORT, 8, 0, 0b110, [0; 8]).unwrap();
        assert_eq!(b[1], OPENIB_VENDOR_ID << 40 | 0x7 << 32 | 1, "OpenIB's OUI, sm_assigned_guid, the count");
        assert_eq!(b[2], OPENIB_VENDOR_ID << 40 | 0x7 << 32 | 2);
        // 0 again keeps what is there.
        assert_eq!(a.set(PORT, 8, 0, 0b10, [0; 8]).unwrap(), b);
        // Deleted and asked for again: the same SM-assigned GUID.
        a.delete(PORT, 8, 0, 0b10).unwrap();
        assert_eq!(a.set(PORT, 8, 0, 0b10, [0; 8]).unwrap()[1], b[1]);
        assert_eq!(a.port_of(b[1]), Some(PORT));
    }
}
