//! MCMemberRecord (IBA 15.2.5.17) on top of the core's [`McGroups`]:
//! Set joins (creating the group when its MGID is new or zero), Delete
//! leaves, Get/GetTable list memberships.
//!
//! The rules applied, as IBA gives them: a join names at least MGID,
//! PortGID and JoinState (else ERR_REQ_INSUFFICIENT_COMPONENTS); a create
//! also Q_Key, P_Key, TClass, FlowLabel and SL, and must make the port a
//! full member; a join to an existing group must agree with every group
//! parameter it names (with MTU/rate/lifetime selectors) or it is
//! ERR_REQ_INVALID; the PortGID must be a port of this subnet
//! (ERR_REQ_INVALID_GID for another prefix, ERR_REQ_INVALID for an unknown
//! GUID). The joined port must be in the group's partition (a limited
//! member may join). A port may join on behalf of another (proxy join)
//! only when it is in the group's partition too and the two may talk on
//! it ([`SaDb::check_proxy`](super::db::SaDb::check_proxy)); else a host could put a port
//! of another partition into that partition's groups.
//!
//! Who may change a membership that exists (IBA o15-0.2.1, o15-0.1.14):
//! the member port itself (the request's source LID is one of its LIDs),
//! a port that passes the proxy check for it when the member was joined
//! by proxy, or a trusted request (the SA's SM_Key). Anything else is
//! ERR_REQ_INVALID and changes nothing, so no host can take another out
//! of a group (say, IPoIB's broadcast group). Queries from untrusted
//! requesters show groups, not members: PortGID, JoinState and ProxyJoin
//! are zero (IBA 15.2.5.17, as OpenSM answers), and only the groups of
//! partitions the requester is in (OpenSM: `osm_physp_has_pkey`).
//!
//! The groups the SM creates itself ([`crate::mcast::precreate`], the
//! IPoIB broadcast group) have no member until hosts join them with
//! MGID, PortGID and JoinState alone; untrusted queries list them
//! member-less, as OpenSM does, so IPoIB and `saquery -g` find them.

use sm_mad::sa::status;
use sm_mad::sa_mc_member_record::{
    component as mc, join_state, Packet, Repr, COMPONENTS, PADDED_LEN,
};
use sm_mad::sa_path_record::selector;

use super::db::{rate_code, rate_of, SaDb};
use crate::mcast::{McError, McGroup, McGroupParams, McGroups, McLimits, McMember};

/// Components every join and leave must name.
pub const JOIN_MASK: u64 = mc::MGID | mc::PORT_GID | mc::JOIN_STATE;
/// Components a create must name besides [`JOIN_MASK`].
pub const CREATE_MASK: u64 = JOIN_MASK | mc::QKEY | mc::TCLASS | mc::PKEY | mc::FLOW_LABEL | mc::SL;

/// The outcome of a Set or Delete: the record to answer with, and whether
/// group membership (and so the MFTs) changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The answer's record.
    pub record: Repr,
    /// Membership changed.
    pub changed: bool,
    /// The group was created (trap 66) or deleted (trap 67) by this request.
    pub created: bool,
    /// The group went with its last full member.
    pub deleted: bool,
}

/// The record of `group` as seen by `member` (zero PortGID and JoinState
/// when none).
pub fn record_of(group: &McGroup, member: Option<&McMember>) -> Repr {
    let p = &group.params;
    Repr {
        mgid: u128::from_be_bytes(p.mgid),
        port_gid: member.map_or(0, |m| u128::from_be_bytes(m.port_gid)),
        qkey: p.qkey,
        mlid: group.mlid,
        mtu_selector: selector::EXACTLY,
        mtu: p.mtu,
        tclass: p.tclass,
        pkey: p.pkey,
        rate_selector: selector::EXACTLY,
        rate: p.rate,
        packet_life_time_selector: selector::EXACTLY,
        packet_life_time: p.packet_life,
        sl: p.sl,
        flow_label: p.flow_label,
        hop_limit: p.hop_limit,
        scope: p.scope,
        join_state: member.map_or(0, |m| m.join_state),
        proxy_join: member.is_some_and(|m| m.proxy),
    }
}

/// Whether `have` satisfies a selector request for `want` (codes compared
/// as numbers: for MTU and lifetime they are ordered).
fn selected(sel_given: bool, sel: u8, want: u8, have: u8) -> bool {
    match if sel_given { sel } else { selector::EXACTLY } {
        selector::GREATER => have > want,
        selector::LESS => have < want,
        selector::EXACTLY => have == want,
        _ => true,
    }
}

/// As [`selected`] for rate codes, compared by the rate they carry.
fn rate_selected(sel_given: bool, sel: u8, want: u8, have: u8) -> bool {
    let (w, h) = (rate_of(want), rate_of(have));
    match if sel_given { sel } else { selector::EXACTLY } {
        selector::GREATER => h > w,
        selector::LESS => h < w,
        selector::EXACTLY => h == w,
        _ => true,
    }
}

/// Whether a join request's named components agree with the group.
fn agrees(group: &McGroup, q: &Repr, mask: u64) -> bool {
    let p = &group.params;
    let given = |bit: u64| mask & bit != 0;
    (!given(mc::QKEY) || q.qkey == p.qkey)
        && (!given(mc::MLID) || q.mlid == group.mlid)
        && (!given(mc::MTU) || selected(given(mc::MTU_SELECTOR), q.mtu_selector, q.mtu, p.mtu))
        && (!given(mc::TCLASS) || q.tclass == p.tclass)
        && (!given(mc::PKEY) || q.pkey == p.pkey)
        && (!given(mc::RATE)
            || rate_selected(given(mc::RATE_SELECTOR), q.rate_selector, q.rate, p.rate))
        && (!given(mc::LIFE)
            || selected(
                given(mc::LIFE_SELECTOR),
                q.packet_life_time_selector,
                q.packet_life_time,
                p.packet_life,
            ))
        && (!given(mc::SL) || q.sl == p.sl)
        && (!given(mc::FLOW_LABEL) || q.flow_label == p.flow_label)
        && (!given(mc::HOP_LIMIT) || q.hop_limit == p.hop_limit)
        && (!given(mc::SCOPE) || q.scope == p.scope)
}

/// The MTU and rate every link of the fabric supports: what a new group
/// gets unless the creator asks for less (its traffic may cross any link).
fn fabric_limits(db: &SaDb) -> (u8, u32) {
    let linked = db.wires.iter().filter(|w| w.peer.is_some());
    let mtu = linked.clone().map(|w| w.mtu.max(1)).min().unwrap_or(1);
    let rate = linked
        .map(|w| w.rate)
        .filter(|&r| r != 0)
        .min()
        .unwrap_or(25);
    (mtu, rate)
}

/// The value a create gets for an MTU (or lifetime) component: what the
/// selector asks for within `limit`; `None` when it cannot be met.
fn choose(given: bool, sel_given: bool, sel: u8, want: u8, limit: u8, fallback: u8) -> Option<u8> {
    if !given {
        return Some(fallback);
    }
    match if sel_given { sel } else { selector::EXACTLY } {
        selector::GREATER => (limit > want).then_some(limit),
        selector::LESS => (want > 1).then(|| (want - 1).min(limit)),
        selector::EXACTLY => (want <= limit && want >= 1).then_some(want),
        _ => Some(limit),
    }
}

fn mc_error(e: &McError) -> u16 {
    match e {
        McError::NoMlid | McError::TooManyGroups(_) | McError::CreatorQuota(..) => {
            status::NO_RESOURCES
        }
        _ => status::REQ_INVALID,
    }
}

/// The request that wants to change memberships: the port it came from
/// (by its source LID; `None` when no port of the subnet has that LID)
/// and whether it carried the SA's SM_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requester {
    /// GUID of the requesting port.
    pub guid: Option<u64>,
    /// The request carried the SA's SM_Key.
    pub trusted: bool,
}

/// IBA o15-0.2.1: whether `by` may change the existing membership
/// `member` of the group of `group_pkey`: a membership joined by proxy
/// by a port that passes the proxy check for it, any other by the member
/// port itself.
fn may_modify(db: &SaDb, member: &McMember, group_pkey: u16, by: Requester) -> bool {
    by.trusted
        || by.guid.is_some_and(|guid| {
            guid == member.port_guid
                || (member.proxy && db.check_proxy(guid, member.port_guid, group_pkey).is_ok())
        })
}

/// Whether a create may name `mgid` (IBA 15.2.5.17.1, as OpenSM checks
/// it): multicast; IPoIB MGIDs (signature 0x401B, 0x601B) as they are;
/// others with the reserved flag bits clear, and the SA-assigned
/// signature 0xA01B only outside link-local scope (link-local ones are
/// the SA's to hand out).
fn valid_requested_mgid(mgid: &[u8; 16]) -> bool {
    if mgid[0] != 0xFF {
        return false;
    }
    let signature = u16::from_be_bytes([mgid[2], mgid[3]]);
    if crate::mcast::precreate::is_ip_mgid(mgid) {
        return true;
    }
    mgid[1] & 0xE0 == 0 && !(signature == 0xA01B && mgid[1] & 0x0F == 2)
}

/// What a join is checked against, beyond IBA's musts (OpenSM's keys of
/// the same names, both on by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinRules {
    /// A join of an existing group must agree with the group's parameters
    /// it names (`mcgroup_join_validation`); without it only the MGID,
    /// PortGID and JoinState count.
    pub join_validation: bool,
    /// A group created with a requested MGID must have a valid one, and an
    /// IPoIB group other than its partition's IPv4 broadcast group needs
    /// that broadcast group, and must agree with its parameters (RFC 4391;
    /// `ipoib_mcgroup_creation_validation`).
    pub ipoib_creation_validation: bool,
}

impl Default for JoinRules {
    fn default() -> Self {
        Self { join_validation: true, ipoib_creation_validation: true }
    }
}

/// The IPv4 broadcast group of the IPoIB MGID `mgid` (its scope and
/// P_Key), when `mgid` is an IPoIB one and not that group itself.
fn ipoib_broadcast_of(mgid: &[u8; 16]) -> Option<[u8; 16]> {
    let signature = u16::from_be_bytes([mgid[2], mgid[3]]);
    if signature != 0x401B && signature != 0x601B {
        return None;
    }
    let mut bcast = [0u8; 16];
    bcast[0] = 0xFF;
    bcast[1] = 0x10 | (mgid[1] & 0x0F);
    bcast[2] = 0x40;
    bcast[3] = 0x1B;
    bcast[4..6].copy_from_slice(&mgid[4..6]);
    bcast[12..16].copy_from_slice(&[0xFF; 4]);
    (bcast != *mgid).then_some(bcast)
}

/// SubnAdmSet(MCMemberRecord): join, creating the group if need be
/// (within `limits`, counted against the requesting port), checked as
/// `rules` say.
pub fn join(
    db: &SaDb,
    groups: &mut McGroups,
    by: Requester,
    limits: &McLimits,
    rules: JoinRules,
    data: &[u8],
    mask: u64,
) -> Result<Change, u16> {
    let q = Repr::parse(&Packet::new_checked(data).map_err(|_| status::REQ_INVALID)?)
        .map_err(|_| status::REQ_INVALID)?;
    if mask & JOIN_MASK != JOIN_MASK {
        return Err(status::INSUFFICIENT_COMPONENTS);
    }
    // A code is a valid MTU or rate only where it is compared exactly or
    // as an upper bound: "greater than 0" (osmtest asks it, a group's
    // values echoed back when there is none to echo) means any.
    let bounded = |sel_bit: u64, sel: u8| mask & sel_bit == 0 || matches!(sel, selector::EXACTLY | selector::LESS);
    if (mask & mc::RATE != 0 && rate_of(q.rate) == 0 && bounded(mc::RATE_SELECTOR, q.rate_selector))
        || (mask & mc::MTU != 0
            && !(1..=5).contains(&q.mtu)
            && bounded(mc::MTU_SELECTOR, q.mtu_selector))
    {
        return Err(status::REQ_INVALID);
    }
    if (q.port_gid >> 64) as u64 != db.gid_prefix() {
        return Err(status::INVALID_GID);
    }
    let port = db.end_by_gid(q.port_gid).ok_or(status::REQ_INVALID)?;
    if q.join_state == 0 {
        return Err(status::REQ_INVALID);
    }
    // A request from no port of the subnet changes nothing (unless trusted).
    let Some(creator) = by.guid.or(by.trusted.then_some(port.guid)) else {
        return Err(status::REQ_INVALID);
    };
    let member = McMember {
        port_gid: q.port_gid.to_be_bytes(),
        port_guid: port.guid,
        join_state: q.join_state,
        proxy: by.guid != Some(port.guid),
    };
    let mgid = q.mgid.to_be_bytes();
    let group_pkey = groups.get(&mgid).map_or(q.pkey, |g| g.params.pkey);
    db.check_join(port.guid, group_pkey)?;
    if member.proxy && !by.trusted {
        db.check_proxy(creator, port.guid, group_pkey)?;
    }
    if q.mgid != 0 {
        if let Some(group) = groups.get(&mgid) {
            if rules.join_validation && !agrees(group, &q, mask) {
                return Err(status::REQ_INVALID);
            }
            if let Some(have) = group.members.get(&member.port_gid) {
                if !may_modify(db, have, group.params.pkey, by) {
                    return Err(status::REQ_INVALID);
                }
            }
            let before = groups.generation();
            let group = groups.join(&mgid, member).map_err(|e| mc_error(&e))?;
            let m = group.members.get(&member.port_gid).copied();
            let record = record_of(group, m.as_ref());
            return Ok(Change {
                record,
                changed: groups.generation() != before,
                created: false,
                deleted: false,
            });
        }
    }
    // Create: the components first, then the MGID (OpenSM's order, which
    // osmtest checks).
    if mask & CREATE_MASK != CREATE_MASK {
        return Err(status::INSUFFICIENT_COMPONENTS);
    }
    if q.mgid != 0 && rules.ipoib_creation_validation {
        if !valid_requested_mgid(&mgid) {
            return Err(status::REQ_INVALID);
        }
        if let Some(bcast) = ipoib_broadcast_of(&mgid) {
            let fits = groups.get(&bcast).is_some_and(|b| agrees(b, &q, mask & !(mc::MGID | mc::PORT_GID | mc::JOIN_STATE)));
            if !fits {
                return Err(status::REQ_INVALID);
            }
        }
    }
    if q.join_state & join_state::FULL == 0 && q.join_state & join_state::SEND_ONLY_FULL == 0 {
        return Err(status::REQ_INVALID);
    }
    if q.pkey & 0x7FFF == 0 {
        return Err(status::REQ_INVALID);
    }
    let (max_mtu, max_rate) = fabric_limits(db);
    let given = |bit: u64| mask & bit != 0;
    let mtu = choose(
        given(mc::MTU),
        given(mc::MTU_SELECTOR),
        q.mtu_selector,
        q.mtu,
        max_mtu,
        max_mtu,
    )
    .ok_or(status::REQ_INVALID)?;
    let rate = if given(mc::RATE) {
        let want = rate_of(q.rate);
        let limit = rate_of(rate_code(max_rate));
        let ok = match if given(mc::RATE_SELECTOR) {
            q.rate_selector
        } else {
            selector::EXACTLY
        } {
            selector::GREATER => limit > want,
            selector::LESS => limit < want || want > 25,
            selector::EXACTLY => want <= limit,
            _ => true,
        };
        if !ok {
            return Err(status::REQ_INVALID);
        }
        match if given(mc::RATE_SELECTOR) {
            q.rate_selector
        } else {
            selector::EXACTLY
        } {
            selector::EXACTLY => q.rate,
            selector::LESS if limit >= want => rate_code(want - 1),
            _ => rate_code(max_rate),
        }
    } else {
        rate_code(max_rate)
    };
    let packet_life = choose(
        given(mc::LIFE),
        given(mc::LIFE_SELECTOR),
        q.packet_life_time_selector,
        q.packet_life_time,
        63,
        18,
    )
    .ok_or(status::REQ_INVALID)?;
    let scope = if given(mc::SCOPE) {
        q.scope
    } else if q.mgid != 0 {
        mgid[1] & 0x0F
    } else {
        2
    };
    let params = McGroupParams {
        mgid,
        qkey: q.qkey,
        pkey: q.pkey | 0x8000,
        mtu,
        rate,
        packet_life,
        sl: q.sl,
        flow_label: q.flow_label,
        hop_limit: q.hop_limit,
        tclass: q.tclass,
        scope,
    };
    let mlid = given(mc::MLID).then_some(q.mlid).filter(|&m| m != 0);
    let group = groups
        .create_by(params, mlid, member, creator, limits)
        .map_err(|e| mc_error(&e))?;
    let m = group.members.get(&member.port_gid).copied();
    Ok(Change {
        record: record_of(group, m.as_ref()),
        changed: true,
        created: true,
        deleted: false,
    })
}

/// SubnAdmDelete(MCMemberRecord): leave with the JoinState bits given,
/// when `by` may change that membership.
pub fn leave(
    db: &SaDb,
    groups: &mut McGroups,
    by: Requester,
    data: &[u8],
    mask: u64,
) -> Result<Change, u16> {
    let q = Repr::parse(&Packet::new_checked(data).map_err(|_| status::REQ_INVALID)?)
        .map_err(|_| status::REQ_INVALID)?;
    if mask & JOIN_MASK != JOIN_MASK {
        return Err(status::INSUFFICIENT_COMPONENTS);
    }
    if (q.port_gid >> 64) as u64 != db.gid_prefix() {
        return Err(status::INVALID_GID);
    }
    let mgid = q.mgid.to_be_bytes();
    let port_gid = q.port_gid.to_be_bytes();
    let group = groups.get(&mgid).ok_or(status::REQ_INVALID)?;
    let before = group
        .members
        .get(&port_gid)
        .copied()
        .ok_or(status::REQ_INVALID)?;
    if !may_modify(db, &before, group.params.pkey, by) {
        return Err(status::REQ_INVALID);
    }
    // IBA o15-0.1.14: a leave names bits the member holds, only those.
    if q.join_state == 0 || q.join_state & !before.join_state != 0 {
        return Err(status::REQ_INVALID);
    }
    if !agrees(
        group,
        &q,
        mask & !(mc::JOIN_STATE | mc::PORT_GID | mc::MGID),
    ) {
        return Err(status::REQ_INVALID);
    }
    let mut record = record_of(group, Some(&before));
    let left = groups
        .leave(&mgid, &port_gid, q.join_state)
        .map_err(|e| mc_error(&e))?;
    let deleted = left.is_none();
    record.join_state = before.join_state & !q.join_state;
    Ok(Change {
        record,
        changed: true,
        created: false,
        deleted,
    })
}

/// SubnAdmGet/GetTable(MCMemberRecord), padded to [`PADDED_LEN`]: for a
/// trusted requester one record per membership that matches; for others
/// one record per group with a matching membership, its PortGID,
/// JoinState and ProxyJoin zero (IBA 15.2.5.17: members are not shown to
/// untrusted requesters), and only groups whose P_Key `sees` (the
/// partitions the requester is in).
pub fn query(
    groups: &McGroups,
    data: &[u8],
    mask: u64,
    trusted: bool,
    sees: impl Fn(u16) -> bool,
) -> Vec<[u8; PADDED_LEN]> {
    let mut out = Vec::new();
    for g in groups.iter() {
        if !trusted && !sees(g.params.pkey) {
            continue;
        }
        // A well-known group without members is still a group: untrusted
        // requesters (IPoIB looking for its broadcast group, `saquery -g`)
        // see it as OpenSM shows it, as if its creator were a full member.
        if !trusted && g.members.is_empty() && mask & mc::PORT_GID == 0 {
            let mut rec = [0u8; PADDED_LEN];
            record_of(g, None).emit(&mut Packet::new_unchecked(&mut rec[..]));
            let js = mask & mc::JOIN_STATE != 0;
            let want_js = data.get(48).map_or(0, |b| b & 0x0F);
            if sm_mad::sa::matches(COMPONENTS, mask & !mc::JOIN_STATE, data, &rec)
                && (!js || join_state::FULL & want_js == want_js)
            {
                out.push(rec);
            }
            continue;
        }
        for m in g.members.values() {
            let mut rec = [0u8; PADDED_LEN];
            record_of(g, Some(m)).emit(&mut Packet::new_unchecked(&mut rec[..]));
            // JoinState in a query matches members holding those bits.
            let js = mask & mc::JOIN_STATE != 0;
            let want_js = data.get(48).map_or(0, |b| b & 0x0F);
            if sm_mad::sa::matches(COMPONENTS, mask & !mc::JOIN_STATE, data, &rec)
                && (!js || m.join_state & want_js == want_js)
            {
                if trusted {
                    out.push(rec);
                } else {
                    let mut shown = [0u8; PADDED_LEN];
                    record_of(g, None).emit(&mut Packet::new_unchecked(&mut shown[..]));
                    out.push(shown);
                    break;
                }
            }
        }
    }
    out
}
