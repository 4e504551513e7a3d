//! Every PortInfo Set the SM sends, one builder per purpose, so that "the
//! Set that carries the link parameters" is found by its name (OpenSM
//! says it by file: `osm_lid_mgr.c`, `osm_link_mgr.c`, `osm_pkey_mgr.c`).
//!
//! Each builder starts from what the port holds (or what the caller wants
//! of it), changes only the fields of its purpose, and leaves the rest as
//! read: PortState and PortPhysicalState are NoChange unless the purpose
//! is to change them, and ClientReregister is never asked again by a Set
//! whose purpose is not the port's addresses.
//!
//! | builder | purpose | sent by |
//! |---|---|---|
//! | [`addresses`] | LID, LMC, MasterSMLID/SL, GID prefix, ClientReregister | [`crate::lids`] |
//! | [`link`] | link parameters (MTU, VLs, widths, speeds, timers), arming; LIDs and P_Key enforcement riding along | [`crate::program`] |
//! | [`port_state`] | Arm, Activate | [`crate::program`] |
//! | [`enforcement`] | P_Key enforcement bits | [`crate::pkey`] |
//! | [`vl_high_limit`] | VLHighLimit | [`crate::vl`] |
//! | [`physical_state`] | Disabled / Polling (isolating a failing link) | the performance manager |

use sm_mad::mad::attr;
use sm_mad::smp::DATA_LEN;
use sm_mad::{PhysState, PortInfoPacket, PortInfoRepr, PortState};

use crate::transport::SmpOp;

/// AttributeModifier bit 31 of a PortInfo Set: SMSupportExtendedSpeeds
/// (without it a port ignores the extended speed fields).
const SM_SUPPORTS_EXTENDED_SPEEDS: u32 = 1 << 31;

/// Whether a port whose PortInfo is `info` — and, on a switch, whose port
/// 0 says `switch_port0` — supports extended speeds (CapabilityMask
/// IsExtendedSpeedsSupported; a switch says it on port 0).
pub fn has_extended_speeds(info: &PortInfoRepr, switch_port0: Option<&PortInfoRepr>) -> bool {
    let holder = switch_port0.unwrap_or(info);
    holder.capability_mask & sm_mad::port_info::capability::IS_EXTENDED_SPEEDS_SUPPORTED != 0
}

/// A PortInfo Get of `port`, with SMSupportExtendedSpeeds when the port is
/// known to support them.
pub fn get(port: u8, path: &[u8], extended_speeds: bool) -> SmpOp {
    SmpOp::get(attr::PORT_INFO, u32::from(port) | if extended_speeds { SM_SUPPORTS_EXTENDED_SPEEDS } else { 0 }, path)
}

/// Whether `answer`, read without SMSupportExtendedSpeeds, is to be read
/// again with it: the port supports extended speeds but left their fields
/// out, as switches do that only fill them for an SM that says it knows
/// them (OpenSM reads such ports twice the same way).
pub fn needs_extended_read(answer: &PortInfoRepr, switch_port0: Option<&PortInfoRepr>) -> bool {
    has_extended_speeds(answer, switch_port0) && answer.link_speed_ext_supported == 0
}

/// Every Set to a port that reported extended speeds says the SM knows
/// them: without it the port ignores their fields, and its answer leaves
/// them out.
fn set(info: &PortInfoRepr, port: u8, path: &[u8], mut modifier_bits: u32) -> SmpOp {
    if info.link_speed_ext_supported != 0 {
        modifier_bits |= SM_SUPPORTS_EXTENDED_SPEEDS;
    }
    let mut data = [0u8; DATA_LEN];
    info.emit(&mut PortInfoPacket::new_unchecked(&mut data[..]));
    SmpOp::set(attr::PORT_INFO, u32::from(port) | modifier_bits, path, data)
}

/// The LID manager's Set: the addresses `want` holds (LID, LMC,
/// MasterSMLID and SL, GID prefix, ClientReregister when asked); the
/// port's state is left as it is.
pub fn addresses(mut want: PortInfoRepr, port: u8, path: &[u8]) -> SmpOp {
    want.port_state = PortState::NoChange;
    want.port_physical_state = PhysState::NoChange;
    set(&want, port, path, 0)
}

/// The link manager's Set: the link parameters `want` holds, arming the
/// port when `arm` (an Init port with its parameters set goes to Armed in
/// the same Set). `riders` then adds what travels on the same Set (the
/// LIDs a port still lacks, its P_Key enforcement bits). With
/// `extended_speeds`, the Set says the SM supports them.
pub fn link(
    mut want: PortInfoRepr,
    arm: bool,
    port: u8,
    path: &[u8],
    extended_speeds: bool,
    riders: impl FnOnce(&mut PortInfoRepr),
) -> SmpOp {
    want.port_state = if arm { PortState::Armed } else { PortState::NoChange };
    want.port_physical_state = PhysState::NoChange;
    // A reregistration already asked for is not asked again; the LID
    // riders ask for it when the LID manager decided so.
    want.client_reregister = false;
    riders(&mut want);
    set(&want, port, path, if extended_speeds { SM_SUPPORTS_EXTENDED_SPEEDS } else { 0 })
}

/// Brings a port from `current` to `to` (Armed or Active), nothing else.
pub fn port_state(mut current: PortInfoRepr, to: PortState, port: u8, path: &[u8]) -> SmpOp {
    current.port_state = to;
    current.port_physical_state = PhysState::NoChange;
    set(&current, port, path, 0)
}

/// A Set of one setting on `current`, leaving the port's states and
/// asking no reregistration.
fn setting(mut current: PortInfoRepr, change: impl FnOnce(&mut PortInfoRepr), port: u8, path: &[u8]) -> SmpOp {
    change(&mut current);
    current.port_state = PortState::NoChange;
    current.port_physical_state = PhysState::NoChange;
    current.client_reregister = false;
    set(&current, port, path, 0)
}

/// The P_Key manager's Set: the partition enforcement bits on `current`.
pub fn enforcement(current: PortInfoRepr, inbound: bool, outbound: bool, port: u8, path: &[u8]) -> SmpOp {
    let change = |p: &mut PortInfoRepr| {
        p.partition_enforcement_inbound = inbound;
        p.partition_enforcement_outbound = outbound;
    };
    setting(current, change, port, path)
}

/// VL arbitration's Set: VLHighLimit on `current`.
pub fn vl_high_limit(current: PortInfoRepr, limit: u8, port: u8, path: &[u8]) -> SmpOp {
    setting(current, |p| p.vl_high_limit = limit, port, path)
}

/// Disables a port's link, or lets it train again (Polling): the
/// isolation of a failing link and its end.
pub fn physical_state(mut current: PortInfoRepr, phys: PhysState, port: u8, path: &[u8]) -> SmpOp {
    current.port_physical_state = phys;
    current.port_state = PortState::NoChange;
    set(&current, port, path, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(op: &SmpOp) -> PortInfoRepr {
        let data = op.data.expect("a Set");
        PortInfoRepr::parse(&PortInfoPacket::new_checked(&data[..]).expect("PortInfo")).expect("parse")
    }

    fn active() -> PortInfoRepr {
        PortInfoRepr {
            lid: 7,
            port_state: PortState::Active,
            port_physical_state: PhysState::LinkUp,
            client_reregister: true,
            vl_high_limit: 4,
            ..PortInfoRepr::default()
        }
    }

    #[test]
    fn each_builder_changes_only_its_purpose() {
        let path = [0u8, 1, 2];
        let s = sent(&vl_high_limit(active(), 9, 3, &path));
        assert_eq!((s.vl_high_limit, s.lid), (9, 7));
        assert_eq!((s.port_state, s.port_physical_state, s.client_reregister), (PortState::NoChange, PhysState::NoChange, false));

        let s = sent(&enforcement(active(), true, false, 3, &path));
        assert!(s.partition_enforcement_inbound && !s.partition_enforcement_outbound);
        assert_eq!((s.port_state, s.client_reregister, s.vl_high_limit), (PortState::NoChange, false, 4));

        let s = sent(&port_state(active(), PortState::Armed, 3, &path));
        assert_eq!((s.port_state, s.port_physical_state), (PortState::Armed, PhysState::NoChange));

        let s = sent(&physical_state(active(), PhysState::Disabled, 3, &path));
        assert_eq!((s.port_state, s.port_physical_state), (PortState::NoChange, PhysState::Disabled));

        // Addresses keep the reregistration the LID manager asked for.
        let s = sent(&addresses(active(), 3, &path));
        assert_eq!((s.port_state, s.client_reregister, s.lid), (PortState::NoChange, true, 7));
    }

    #[test]
    fn every_set_to_a_port_that_reported_extended_speeds_says_the_sm_knows_them() {
        let ndr = PortInfoRepr { link_speed_ext_supported: 0xF, ..active() };
        for op in [
            addresses(ndr, 2, &[0]),
            port_state(ndr, PortState::Armed, 2, &[0]),
            enforcement(ndr, true, true, 2, &[0]),
            vl_high_limit(ndr, 1, 2, &[0]),
            physical_state(ndr, PhysState::Disabled, 2, &[0]),
        ] {
            assert_eq!(op.modifier, 2 | SM_SUPPORTS_EXTENDED_SPEEDS);
        }
        assert_eq!(get(2, &[0], true).modifier, 2 | SM_SUPPORTS_EXTENDED_SPEEDS);
        assert_eq!(get(2, &[0], false).modifier, 2);
        let sw_port = PortInfoRepr { capability_mask: 0, ..ndr };
        let port0 = PortInfoRepr { capability_mask: sm_mad::port_info::capability::IS_EXTENDED_SPEEDS_SUPPORTED, ..active() };
        assert!(has_extended_speeds(&sw_port, Some(&port0)));
        assert!(!needs_extended_read(&sw_port, Some(&port0)), "its fields are there");
        assert!(needs_extended_read(&PortInfoRepr { link_speed_ext_supported: 0, ..sw_port }, Some(&port0)));
    }

    #[test]
    fn the_link_set_arms_carries_its_riders_and_says_extended_speeds() {
        let op = link(active(), true, 5, &[0u8, 1], true, |p| p.lid = 42);
        assert_eq!(op.modifier, 5 | SM_SUPPORTS_EXTENDED_SPEEDS);
        let s = sent(&op);
        assert_eq!((s.port_state, s.lid, s.client_reregister), (PortState::Armed, 42, false));
        let op = link(active(), false, 5, &[0u8, 1], false, |p| p.client_reregister = true);
        assert_eq!(op.modifier, 5);
        let s = sent(&op);
        assert_eq!((s.port_state, s.client_reregister), (PortState::NoChange, true));
    }
}
