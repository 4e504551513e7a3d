//! SMInfo (IBA 14.2.5.13): what an SM says about itself, for SM election
//! and handover.
//!
//! ```text
//! offset  0  GUID (64)
//!         8  SM_Key (64)
//!        16  ActCount (32)
//!        20  Priority(4)|SMState(4)
//! ```
//!
//! A SubnSet(SMInfo) carries a control packet in its AttributeModifier
//! (see [`control`]).

use crate::field::{bad, fields, packet};
use crate::Result;

/// Length of SMInfo.
pub const LEN: usize = 21;

/// SMState.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum SmState {
    /// Not active.
    #[default]
    NotActive = 0,
    /// Discovering.
    Discovering = 1,
    /// Standby.
    Standby = 2,
    /// Master.
    Master = 3,
}

impl SmState {
    /// The wire value; others are reserved and refused.
    pub fn from_u8(value: u8) -> Result<Self> {
        Ok(match value {
            0 => Self::NotActive,
            1 => Self::Discovering,
            2 => Self::Standby,
            3 => Self::Master,
            other => return Err(bad("SMState", other)),
        })
    }
}

/// SubnSet(SMInfo) AttributeModifier values.
pub mod control {
    /// HANDOVER: take over as master.
    pub const HANDOVER: u32 = 1;
    /// ACKNOWLEDGE: a handover was accepted.
    pub const ACKNOWLEDGE: u32 = 2;
    /// DISABLE: stop being an SM.
    pub const DISABLE: u32 = 3;
    /// STANDBY: go to standby.
    pub const STANDBY: u32 = 4;
    /// DISCOVER: start discovering.
    pub const DISCOVER: u32 = 5;
}

packet!(
    /// A view of SMInfo.
    Packet,
    LEN
);

fields! { Packet;
    /// GUID of the SM's port.
    guid, set_guid: u64 @ 0;
    /// SM_Key (0 unless the requester proved it knows the key).
    sm_key, set_sm_key: u64 @ 8;
    /// ActCount: a heartbeat that a live master keeps incrementing.
    act_count, set_act_count: u32 @ 16;
    /// Priority (4 bits).
    priority, set_priority: u8 @ 20 => bits 4, 4;
    /// SMState, raw (see [`SmState`]).
    sm_state, set_sm_state: u8 @ 20 => bits 0, 4;
}

/// SMInfo as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// GUID.
    pub guid: u64,
    /// SM_Key.
    pub sm_key: u64,
    /// ActCount.
    pub act_count: u32,
    /// Priority (4 bits).
    pub priority: u8,
    /// SMState.
    pub state: SmState,
}

impl Repr {
    /// Reads SMInfo; fails on a short buffer or a reserved SMState.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            guid: packet.guid(),
            sm_key: packet.sm_key(),
            act_count: packet.act_count(),
            priority: packet.priority(),
            state: SmState::from_u8(packet.sm_state())?,
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes SMInfo.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_guid(self.guid);
        packet.set_sm_key(self.sm_key);
        packet.set_act_count(self.act_count);
        packet.set_priority(self.priority);
        packet.set_sm_state(self.state as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            guid: 0x0002c90000000100,
            sm_key: 1,
            act_count: 0x45,
            priority: 14,
            state: SmState::Standby,
        };
        let mut buf = [0u8; LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[16..], &[0, 0, 0, 0x45, 0xe2]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        buf[20] = 0x04;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(bad("SMState", 4u8))
        );
        assert!(Packet::new_checked(&buf[..20]).is_err());
    }
}
