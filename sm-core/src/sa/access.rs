//! Who may see and join what: the partition checks the SA applies to a
//! request, on the P_Key tables its database holds (OpenSM's
//! `osm_physp_has_pkey`, `osm_physp_share_pkey`).

use super::db::SaDb;

impl SaDb {
    /// MCMember join check: the port must be in the group's partition (a
    /// limited member may join; OpenSM: `osm_physp_has_pkey`). SA status on
    /// refusal. A P_Key of 0 (a create without one) is left to the create
    /// checks, which refuse it.
    pub fn check_join(&self, port_guid: u64, group_pkey: u16) -> Result<(), u16> {
        let base = group_pkey & 0x7FFF;
        if base == 0 || self.has_pkey(port_guid, group_pkey) {
            Ok(())
        } else {
            Err(sm_mad::sa::status::REQ_INVALID)
        }
    }

    /// Whether the end port `guid` is in the partition of `pkey`, as a full
    /// or a limited member (OpenSM: `osm_physp_has_pkey`). The invalid
    /// P_Key (0) is nobody's.
    pub fn has_pkey(&self, guid: u64, pkey: u16) -> bool {
        let base = pkey & 0x7FFF;
        base != 0 && self.pkey_table(guid).iter().any(|&e| e & 0x7FFF == base)
    }

    /// Whether two end ports share a partition they may talk on, at least
    /// one of them a full member (OpenSM: `osm_physp_share_pkey`); a port
    /// shares with itself, even one in no partition. What the SA lets an
    /// untrusted requester see of another port.
    pub fn share(&self, a: u64, b: u64) -> bool {
        a == b || sm_partition::common_pkey(self.pkey_table(a), self.pkey_table(b), None).is_some()
    }

    /// MCMember proxy check (a request from `requester` about the membership
    /// of another port, `port`, in the group of `group_pkey`): the requester
    /// must be in the group's partition too, and the two must be able to
    /// talk on it (at least one a full member). Without it a host could join
    /// a port of another partition into that partition's groups, or end such
    /// a membership. SA status on refusal.
    pub fn check_proxy(&self, requester: u64, port: u64, group_pkey: u16) -> Result<(), u16> {
        let ok = requester == port
            || (self.has_pkey(requester, group_pkey)
                && sm_partition::common_pkey(self.pkey_table(requester), self.pkey_table(port), Some(group_pkey)).is_some());
        if ok {
            Ok(())
        } else {
            Err(sm_mad::sa::status::REQ_INVALID)
        }
    }
}
