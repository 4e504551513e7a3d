//! The multicast groups the SA's MCMemberRecord requests create, join and
//! leave (IBA 15.2.5.17), as the core keeps them.
//!
//! This is the membership state only: the SA checks a request against IBA's
//! rules and the group's parameters before it calls [`McGroups::create`],
//! [`McGroups::join`] or [`McGroups::leave`]; the core turns the members into
//! spanning trees and MFT entries ([`super::tree`], [`super::program`]).
//! Every change bumps [`McGroups::generation`], which is how the SM loop
//! notices that MFTs must be recomputed.

use std::collections::BTreeMap;

/// First multicast LID (IBA 4.1.1).
pub const MLID_FIRST: u16 = 0xC000;
/// Last multicast LID the core hands out; 0xFFFF is the permissive LID.
pub const MLID_LAST: u16 = 0xFFFE;

/// JoinState bits (IBA Table 213).
pub mod join_state {
    /// Full member: sends and receives.
    pub const FULL: u8 = 0x1;
    /// Non member: receives only, not counted for the group's life.
    pub const NON: u8 = 0x2;
    /// Send-only non member.
    pub const SEND_ONLY_NON: u8 = 0x4;
    /// Send-only full member (IBA 1.3).
    pub const SEND_ONLY_FULL: u8 = 0x8;
}

/// A group's fixed parameters: set by the creating request, then every
/// join must agree with them (the SA's checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McGroupParams {
    /// Multicast GID; all-zero in a create request asks the SA for one.
    pub mgid: [u8; 16],
    /// Q_Key.
    pub qkey: u32,
    /// P_Key.
    pub pkey: u16,
    /// MTU code (IBA: 1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// Rate code (IBA Table 225: 2 = 2.5 Gb/s, 3 = 10 Gb/s ...).
    pub rate: u8,
    /// PacketLifeTime code.
    pub packet_life: u8,
    /// Service level the group's traffic uses.
    pub sl: u8,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
    /// HopLimit.
    pub hop_limit: u8,
    /// TClass.
    pub tclass: u8,
    /// Scope (4 bits, also in the MGID).
    pub scope: u8,
}

/// One member end port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McMember {
    /// The member's port GID.
    pub port_gid: [u8; 16],
    /// Its port GUID (the GID's lower half), by which the core finds it.
    pub port_guid: u64,
    /// JoinState bits it holds (at least one).
    pub join_state: u8,
    /// Joined by a proxy on its behalf.
    pub proxy: bool,
}

/// A group and its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McGroup {
    /// Parameters fixed at creation.
    pub params: McGroupParams,
    /// The MLID the group's traffic is addressed to.
    pub mlid: u16,
    /// Members by port GID.
    pub members: BTreeMap<[u8; 16], McMember>,
    /// GUID of the port whose request created the group, when the SA
    /// created it: what per-port group quotas count.
    pub creator: Option<u64>,
    /// Created by the SM itself ([`super::precreate`]): lives without
    /// members, so it stays when the last one leaves.
    pub well_known: bool,
}

impl McGroup {
    /// The group's MGID.
    pub fn mgid(&self) -> [u8; 16] {
        self.params.mgid
    }

    /// Whether the group lives on: it is well known, or a full member
    /// remains (IBA: the group lives while one does).
    pub fn lives(&self) -> bool {
        self.well_known || self.has_full_member()
    }

    /// Whether a full member remains.
    pub fn has_full_member(&self) -> bool {
        self.members
            .values()
            .any(|m| m.join_state & (join_state::FULL | join_state::SEND_ONLY_FULL) != 0)
    }
}

/// Why a membership change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McError {
    /// Create for an MGID that exists.
    #[error("multicast group {} exists", fmt_gid(.0))]
    Exists([u8; 16]),
    /// Join or leave of a group that does not exist.
    #[error("no multicast group {}", fmt_gid(.0))]
    NoGroup([u8; 16]),
    /// Leave by a port that is not a member.
    #[error("port {} is not a member of {}", fmt_gid(.1), fmt_gid(.0))]
    NotMember([u8; 16], [u8; 16]),
    /// Every MLID is taken.
    #[error("no free multicast LID")]
    NoMlid,
    /// The MLID asked for is taken or not a multicast LID.
    #[error("MLID {0:#06x} is not free")]
    MlidTaken(u16),
    /// The MGID given is not a multicast GID (first byte 0xFF).
    #[error("{} is not a multicast GID", fmt_gid(.0))]
    NotMulticast([u8; 16]),
    /// JoinState 0 joins nothing.
    #[error("JoinState 0")]
    NoJoinState,
    /// As many groups exist as [`McLimits::max_groups`] allows.
    #[error("{0} multicast groups exist, the most allowed")]
    TooManyGroups(usize),
    /// The requesting port created as many live groups as
    /// [`McLimits::max_per_creator`] allows.
    #[error("port {0:#018x} created {1} multicast groups, the most allowed")]
    CreatorQuota(u64, usize),
}

/// Bounds on what requests from the fabric may create: every group costs
/// an MLID (and an MFT entry in every switch on its tree), so one host must
/// not be able to take them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McLimits {
    /// Most groups (so MLIDs) in all.
    pub max_groups: usize,
    /// Most live groups one port may have created.
    pub max_per_creator: usize,
}

impl Default for McLimits {
    fn default() -> Self {
        Self {
            max_groups: usize::from(MLID_LAST - MLID_FIRST) + 1,
            max_per_creator: 64,
        }
    }
}

/// `ff12:401b:ffff:0000:0000:0000:ffff:ffff` style.
pub fn fmt_gid(gid: &[u8; 16]) -> String {
    gid.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// All groups, by MGID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McGroups {
    groups: BTreeMap<[u8; 16], McGroup>,
    generation: u64,
    /// MGIDs handed out for creates that asked the SA to pick one.
    assigned: u64,
}

impl McGroups {
    /// No groups.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bumped by every change of a group or its members.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The group with `mgid`.
    pub fn get(&self, mgid: &[u8; 16]) -> Option<&McGroup> {
        self.groups.get(mgid)
    }

    /// The group addressed by `mlid`.
    pub fn by_mlid(&self, mlid: u16) -> Option<&McGroup> {
        self.groups.values().find(|g| g.mlid == mlid)
    }

    /// Every group, in MGID order.
    pub fn iter(&self) -> impl Iterator<Item = &McGroup> {
        self.groups.values()
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Creates a group with `params` and its first member. An all-zero MGID
    /// gets one assigned (`ff1<scope>:a01b:<pkey>::<n>`, in the SA-assigned
    /// space OpenSM also uses); `mlid` asks for a given MLID, else the
    /// lowest free one is taken.
    pub fn create(
        &mut self,
        mut params: McGroupParams,
        mlid: Option<u16>,
        first: McMember,
    ) -> Result<&McGroup, McError> {
        if first.join_state == 0 {
            return Err(McError::NoJoinState);
        }
        if params.mgid == [0; 16] {
            params.mgid = self.assign_mgid(&params);
        }
        if params.mgid[0] != 0xFF {
            return Err(McError::NotMulticast(params.mgid));
        }
        if self.groups.contains_key(&params.mgid) {
            return Err(McError::Exists(params.mgid));
        }
        let mlid = match mlid {
            Some(m) if (MLID_FIRST..=MLID_LAST).contains(&m) && self.by_mlid(m).is_none() => m,
            Some(m) => return Err(McError::MlidTaken(m)),
            None => self.free_mlid().ok_or(McError::NoMlid)?,
        };
        let mut members = BTreeMap::new();
        members.insert(first.port_gid, first);
        self.generation += 1;
        let mgid = params.mgid;
        Ok(self.groups.entry(mgid).or_insert(McGroup {
            params,
            mlid,
            members,
            creator: None,
            well_known: false,
        }))
    }

    /// [`Self::create`] for a request from the port `creator`, within
    /// `limits` (checked before anything changes).
    pub fn create_by(
        &mut self,
        params: McGroupParams,
        mlid: Option<u16>,
        first: McMember,
        creator: u64,
        limits: &McLimits,
    ) -> Result<&McGroup, McError> {
        if self.groups.len() >= limits.max_groups {
            return Err(McError::TooManyGroups(self.groups.len()));
        }
        let mine = self.created_by(creator);
        if mine >= limits.max_per_creator {
            return Err(McError::CreatorQuota(creator, mine));
        }
        let mgid = self.create(params, mlid, first)?.params.mgid;
        let group = self
            .groups
            .get_mut(&mgid)
            .ok_or(McError::NoGroup(mgid))?;
        group.creator = Some(creator);
        Ok(group)
    }

    /// How many live groups the port `guid` created.
    pub fn created_by(&self, guid: u64) -> usize {
        self.groups
            .values()
            .filter(|g| g.creator == Some(guid))
            .count()
    }

    /// Adds `member` to the group (or adds JoinState bits to a member).
    /// A later proxy request only adds JoinState bits (as OpenSM does), so
    /// another port cannot turn a port's own membership into a proxy one;
    /// the port's own join makes a proxy membership its own (ProxyJoin
    /// off), so a proxy joining it first cannot leave it open to removal by
    /// any port.
    pub fn join(&mut self, mgid: &[u8; 16], member: McMember) -> Result<&McGroup, McError> {
        if member.join_state == 0 {
            return Err(McError::NoJoinState);
        }
        let group = self.groups.get_mut(mgid).ok_or(McError::NoGroup(*mgid))?;
        let entry = group.members.entry(member.port_gid).or_insert(McMember {
            join_state: 0,
            ..member
        });
        let before = entry.join_state;
        entry.join_state |= member.join_state;
        entry.proxy &= member.proxy;
        if entry.join_state != before {
            self.generation += 1;
        }
        Ok(group)
    }

    /// Clears `bits` of the member's JoinState; the member goes when none
    /// is left, the group when no full member is left (its non-members
    /// with it). Returns the group as it remains, `None` if it went.
    pub fn leave(
        &mut self,
        mgid: &[u8; 16],
        port_gid: &[u8; 16],
        bits: u8,
    ) -> Result<Option<&McGroup>, McError> {
        let group = self.groups.get_mut(mgid).ok_or(McError::NoGroup(*mgid))?;
        let member = group
            .members
            .get_mut(port_gid)
            .ok_or(McError::NotMember(*mgid, *port_gid))?;
        member.join_state &= !bits;
        if member.join_state == 0 {
            group.members.remove(port_gid);
        }
        self.generation += 1;
        if !group.lives() {
            self.groups.remove(mgid);
            return Ok(None);
        }
        Ok(self.groups.get(mgid))
    }

    /// Drops every membership of the ports not in `alive` (end ports that
    /// left the fabric), and the groups left without a full member.
    /// Returns how many memberships went.
    pub fn retain_ports(&mut self, alive: impl Fn(u64) -> bool) -> usize {
        let mut gone = 0;
        for g in self.groups.values_mut() {
            let before = g.members.len();
            g.members.retain(|_, m| alive(m.port_guid));
            gone += before - g.members.len();
        }
        self.groups.retain(|_, g| g.lives());
        if gone > 0 {
            self.generation += 1;
        }
        gone
    }

    /// Puts back a group as a saved SA state had it (its MGID, MLID,
    /// members and well-known mark): refused when the MGID or the MLID is
    /// taken, the MLID is not a multicast one, or the group would not
    /// live (no full member, not well known).
    pub fn restore(&mut self, group: McGroup) -> Result<(), McError> {
        let mgid = group.params.mgid;
        if mgid[0] != 0xFF {
            return Err(McError::NotMulticast(mgid));
        }
        if self.groups.contains_key(&mgid) {
            return Err(McError::Exists(mgid));
        }
        if !(MLID_FIRST..=MLID_LAST).contains(&group.mlid) || self.by_mlid(group.mlid).is_some() {
            return Err(McError::MlidTaken(group.mlid));
        }
        if !group.lives() {
            return Err(McError::NoJoinState);
        }
        self.groups.insert(mgid, group);
        self.generation += 1;
        Ok(())
    }

    /// Makes `wanted` the well-known groups (see [`super::precreate`]):
    /// each is created without members where its MGID is new (the lowest
    /// free MLID), or marked well known where a group has that MGID (its
    /// parameters and members are kept: hosts use them). Groups well known
    /// before but not in `wanted` become ordinary ones, and go when no
    /// full member is left. Returns the MGIDs that could not be created.
    pub fn set_well_known(&mut self, wanted: &[McGroupParams]) -> Vec<([u8; 16], McError)> {
        let mut failed = Vec::new();
        let mut changed = false;
        for g in self.groups.values_mut() {
            let keep = wanted.iter().any(|w| w.mgid == g.params.mgid);
            if g.well_known != keep {
                g.well_known = keep;
                changed = true;
            }
        }
        let before = self.groups.len();
        self.groups.retain(|_, g| g.lives());
        changed |= self.groups.len() != before;
        for params in wanted {
            if self.groups.contains_key(&params.mgid) {
                continue;
            }
            if params.mgid[0] != 0xFF {
                failed.push((params.mgid, McError::NotMulticast(params.mgid)));
                continue;
            }
            let Some(mlid) = self.free_mlid() else {
                failed.push((params.mgid, McError::NoMlid));
                continue;
            };
            self.groups.insert(
                params.mgid,
                McGroup {
                    params: *params,
                    mlid,
                    members: BTreeMap::new(),
                    creator: None,
                    well_known: true,
                },
            );
            changed = true;
        }
        if changed {
            self.generation += 1;
        }
        failed
    }

    fn free_mlid(&self) -> Option<u16> {
        let used: std::collections::BTreeSet<u16> = self.groups.values().map(|g| g.mlid).collect();
        (MLID_FIRST..=MLID_LAST).find(|m| !used.contains(m))
    }

    fn assign_mgid(&mut self, params: &McGroupParams) -> [u8; 16] {
        loop {
            self.assigned += 1;
            let mut gid = [0u8; 16];
            gid[0] = 0xFF;
            gid[1] = 0x10 | (params.scope & 0x0F);
            gid[2] = 0xA0;
            gid[3] = 0x1B;
            gid[4..6].copy_from_slice(&params.pkey.to_be_bytes());
            gid[8..16].copy_from_slice(&self.assigned.to_be_bytes());
            if !self.groups.contains_key(&gid) {
                return gid;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(last: u8) -> McGroupParams {
        let mut mgid = [0u8; 16];
        mgid[0] = 0xFF;
        mgid[1] = 0x12;
        mgid[15] = last;
        McGroupParams {
            mgid,
            qkey: 0x0B1B,
            pkey: 0xFFFF,
            mtu: 4,
            rate: 3,
            packet_life: 18,
            sl: 0,
            flow_label: 0,
            hop_limit: 0,
            tclass: 0,
            scope: 2,
        }
    }

    fn member(guid: u64, state: u8) -> McMember {
        let mut port_gid = [0u8; 16];
        port_gid[0] = 0xFE;
        port_gid[1] = 0x80;
        port_gid[8..].copy_from_slice(&guid.to_be_bytes());
        McMember {
            port_gid,
            port_guid: guid,
            join_state: state,
            proxy: false,
        }
    }

    #[test]
    fn create_join_leave_lifecycle() {
        let mut g = McGroups::new();
        let p = params(1);
        let mlid = g
            .create(p, None, member(1, join_state::FULL))
            .map(|x| x.mlid);
        assert_eq!(mlid, Ok(MLID_FIRST));
        assert_eq!(
            g.create(p, None, member(2, join_state::FULL)).err(),
            Some(McError::Exists(p.mgid))
        );
        let gen = g.generation();
        g.join(&p.mgid, member(2, join_state::NON))
            .map(|_| ())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(g.generation() > gen);
        // Joining again with the same bits changes nothing.
        let gen = g.generation();
        assert!(g.join(&p.mgid, member(2, join_state::NON)).is_ok());
        assert_eq!(g.generation(), gen);
        assert_eq!(g.get(&p.mgid).map(|x| x.members.len()), Some(2));
        // The last full member leaving ends the group, non-members too.
        assert_eq!(
            g.leave(&p.mgid, &member(1, 0).port_gid, join_state::FULL)
                .map(|x| x.is_some()),
            Ok(false)
        );
        assert!(g.is_empty());
        assert_eq!(
            g.join(&p.mgid, member(3, 1)).err(),
            Some(McError::NoGroup(p.mgid))
        );
    }

    #[test]
    fn mlids_are_distinct_and_reused_after_a_group_ends() {
        let mut g = McGroups::new();
        let a = g.create(params(1), None, member(1, 1)).map(|x| x.mlid).ok();
        let b = g.create(params(2), None, member(1, 1)).map(|x| x.mlid).ok();
        assert_eq!((a, b), (Some(0xC000), Some(0xC001)));
        assert_eq!(
            g.create(params(3), Some(0xC001), member(1, 1)).err(),
            Some(McError::MlidTaken(0xC001))
        );
        assert!(g.leave(&params(1).mgid, &member(1, 0).port_gid, 1).is_ok());
        assert_eq!(
            g.create(params(4), None, member(1, 1)).map(|x| x.mlid).ok(),
            Some(0xC000)
        );
        assert_eq!(
            g.by_mlid(0xC001).map(|x| x.params.mgid),
            Some(params(2).mgid)
        );
    }

    #[test]
    fn zero_mgid_gets_one_assigned_and_unicast_gids_are_refused() {
        let mut g = McGroups::new();
        let mut p = params(0);
        p.mgid = [0; 16];
        let mgid = g
            .create(p, None, member(1, 1))
            .map(|x| x.mgid())
            .unwrap_or_default();
        assert_eq!(&mgid[..4], &[0xFF, 0x12, 0xA0, 0x1B]);
        let mut bad = params(0);
        bad.mgid[0] = 0xFE;
        assert_eq!(
            g.create(bad, None, member(1, 1)).err(),
            Some(McError::NotMulticast(bad.mgid))
        );
        assert_eq!(
            g.create(params(9), None, member(1, 0)).err(),
            Some(McError::NoJoinState)
        );
    }

    #[test]
    fn departed_ports_lose_their_memberships() {
        let mut g = McGroups::new();
        assert!(g.create(params(1), None, member(1, 1)).is_ok());
        assert!(g.join(&params(1).mgid, member(2, 1)).is_ok());
        assert!(g.create(params(2), None, member(2, 1)).is_ok());
        assert_eq!(g.retain_ports(|guid| guid == 1), 2);
        assert_eq!(g.len(), 1);
        assert_eq!(g.get(&params(1).mgid).map(|x| x.members.len()), Some(1));
    }

    #[test]
    fn a_later_join_keeps_the_members_proxy_flag() {
        let mut g = McGroups::new();
        assert!(g.create(params(1), None, member(1, join_state::FULL)).is_ok());
        let proxy = McMember {
            proxy: true,
            ..member(1, join_state::NON)
        };
        assert!(g.join(&params(1).mgid, proxy).is_ok());
        let m = g.get(&params(1).mgid).and_then(|x| x.members.get(&member(1, 0).port_gid).copied());
        assert_eq!(m.map(|m| (m.proxy, m.join_state)), Some((false, 3)));
        // Joined by proxy first, then by itself: its own membership.
        assert!(g.join(&params(1).mgid, McMember { proxy: true, ..member(2, join_state::NON) }).is_ok());
        let proxy_of = |g: &McGroups| g.get(&params(1).mgid).and_then(|x| x.members.get(&member(2, 0).port_gid).map(|m| m.proxy));
        assert_eq!(proxy_of(&g), Some(true));
        assert!(g.join(&params(1).mgid, member(2, join_state::NON)).is_ok());
        assert_eq!(proxy_of(&g), Some(false));
    }

    #[test]
    fn creates_are_bounded_per_creator_and_in_all() {
        let limits = McLimits {
            max_groups: 3,
            max_per_creator: 2,
        };
        let mut g = McGroups::new();
        for n in 1..=2 {
            assert!(g.create_by(params(n), None, member(1, 1), 1, &limits).is_ok());
        }
        assert_eq!(
            g.create_by(params(3), None, member(1, 1), 1, &limits).err(),
            Some(McError::CreatorQuota(1, 2))
        );
        assert_eq!(g.created_by(1), 2);
        // Another port still may, up to the overall bound.
        assert!(g.create_by(params(3), None, member(2, 1), 2, &limits).is_ok());
        assert_eq!(
            g.create_by(params(4), None, member(2, 1), 2, &limits).err(),
            Some(McError::TooManyGroups(3))
        );
        // A group that ends no longer counts.
        assert!(g.leave(&params(1).mgid, &member(1, 0).port_gid, 1).is_ok());
        assert!(g.create_by(params(5), None, member(1, 1), 1, &limits).is_ok());
    }
}
