//! SMInfoRecord (IBA 15.2.5.9): an SM's SMInfo by the LID of its port.
//!
//! ```text
//! offset  0  LID (16)  reserved (16)
//!         4  SMInfo: GUID (64), SM_Key (64), ActCount (32), Priority(4)|SMState(4)
//!        25  padding to 32 (AttributeOffset 4)
//! ```

use crate::field::{fields, packet};
use crate::sa::{components, repr_io};

/// Length of the record's fields.
pub const LEN: usize = 25;
/// Length in a GetTable answer.
pub const PADDED_LEN: usize = 32;

components! {
    /// LID.
    c(0, 16) => LID,
    c(16, 16),  // reserved
    /// GUID.
    c(32, 64) => GUID,
    c(96, 64),  // SM_Key
    c(160, 32), // ActCount
    /// Priority.
    c(192, 4) => PRIORITY,
    /// SMState.
    c(196, 4) => STATE,
}

packet!(
    /// A view of SMInfoRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the SM's port.
    lid, set_lid: u16 @ 0;
    /// The SM's port GUID.
    guid, set_guid: u64 @ 4;
    /// SM_Key (0 unless the requester is trusted).
    sm_key, set_sm_key: u64 @ 12;
    /// ActCount.
    act_count, set_act_count: u32 @ 20;
    /// Priority.
    priority, set_priority: u8 @ 24 => bits 4, 4;
    /// SMState (0 not active, 1 discovering, 2 standby, 3 master).
    sm_state, set_sm_state: u8 @ 24 => bits 0, 4;
}

/// SMInfoRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[allow(missing_docs)] // one field per wire field
pub struct Repr {
    pub lid: u16,
    pub guid: u64,
    pub sm_key: u64,
    pub act_count: u32,
    pub priority: u8,
    pub sm_state: u8,
}

repr_io! { Packet => Repr, LEN;
    /// Reads the record; fails only on a short buffer.
    parse;
    /// Writes the record, reserved bits zeroed.
    emit [2..4];
    lid: get lid, set_lid;
    guid: get guid, set_guid;
    sm_key: get sm_key, set_sm_key;
    act_count: get act_count, set_act_count;
    priority: get priority, set_priority;
    sm_state: get sm_state, set_sm_state;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            lid: 1,
            guid: 0x1234,
            sm_key: 0,
            act_count: 7,
            priority: 5,
            sm_state: 3,
        };
        let buf = crate::sa::round_trip!(repr, PADDED_LEN);
        assert_eq!(&buf[..4], &[0, 1, 0, 0]);
        assert_eq!(buf[24], 0x53);
        assert_eq!(COMPONENTS[5].value(&buf), 5);
        assert_eq!(COMPONENTS[6].value(&buf), 3);
    }
}
