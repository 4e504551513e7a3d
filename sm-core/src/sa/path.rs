//! PathRecord queries (IBA 15.2.5.16): the end points a query names, the
//! LID pairs between them, and for each pair a walk through the routing's
//! LFTs. A pair the LFTs do not connect has no PathRecord; the SL is the
//! routing engine's `path_sl` for the pair (for torus-2QoS, the SL its
//! deadlock-freedom depends on), never one the SA picks. Ports sharing
//! no partition have no path (see [`sm_partition::common_pkey`]).

use sm_mad::sa::status;
use sm_mad::sa_path_record::{component as pc, selector, Packet as PrPacket, Repr as PrRepr};

use super::db::{rate_code, rate_of, EndPort, SaDb};

/// What a walk found: the MTU and rate the whole path supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// Links crossed.
    pub hops: u8,
    /// Smallest MTU code along the path.
    pub mtu: u8,
    /// Smallest data rate along the path (0.1 Gb/s).
    pub rate: u32,
}

/// Longest path a walk follows before calling it a loop (IBA's directed
/// route limit).
const MAX_HOPS: u8 = 64;

impl SaDb {
    /// The SL of the path `slid` → `dlid` for the query `q` under `mask`:
    /// the QoS policy's, as far as the engine's SLs allow
    /// ([`crate::qos::decide_sl`]). The engine's SLs bind when they are not
    /// uniform or the engine brought its own SL2VL maps (lash, dfsssp, nue,
    /// torus-2QoS proved deadlock freedom with those maps: another SL may
    /// land on a VL the engine did not check).
    fn policy_sl(&self, q: &PrRepr, mask: u64, slid: u16, dlid: u16) -> u8 {
        let engine_sl = self.path_sl(slid, dlid);
        let Some(policy) = self.qos_policy.as_deref() else {
            return engine_sl;
        };
        let guid = |lid| self.end_by_lid(lid).map_or(0, |e| e.guid);
        let query = crate::qos::PathQuery {
            service_id: (mask & pc::SERVICE_ID != 0).then_some(q.service_id),
            pkey: (mask & pc::PKEY != 0).then_some(q.pkey),
            qos_class: (mask & pc::QOS_CLASS != 0).then_some(q.qos_class),
            source_guid: guid(slid),
            destination_guid: guid(dlid),
        };
        let engine_maps = self.routing.as_ref().is_some_and(|r| !r.engine_sl2vl().is_empty());
        let (sl, overruled) = crate::qos::decide_sl(Some(policy), &query, engine_sl, !self.uniform_sl() || engine_maps);
        if let Some(want) = overruled {
            let mut seen = self.sl_overruled.lock().unwrap_or_else(|e| e.into_inner());
            if seen.insert((want, engine_sl)) {
                tracing::warn!(
                    policy_sl = want,
                    engine_sl,
                    "QoS policy asks for SL {want} where the routing engine's deadlock-free SL is {engine_sl}: the engine's SL is used"
                );
            }
        }
        sl
    }

    /// Follows the LFTs from the port holding `slid` to the one holding
    /// `dlid`; `None` when there is no such port or the tables do not
    /// lead there.
    pub fn walk(&self, slid: u16, dlid: u16) -> Option<Walk> {
        self.trace(slid, dlid, |_| {}).ok()
    }

    /// [`Self::walk`], showing each link crossed to `step` as it goes, and
    /// saying where a walk that does not arrive stopped.
    pub fn trace(&self, slid: u16, dlid: u16, mut step: impl FnMut(&Step)) -> Result<Walk, WalkStop> {
        let src = *self.end_by_lid(slid).ok_or(WalkStop::NoPort(slid))?;
        let dst = *self.end_by_lid(dlid).ok_or(WalkStop::NoPort(dlid))?;
        let routing = self.routing.as_ref().ok_or(WalkStop::NotRouted)?;
        let start = self.wire(src.node, src.port).ok_or(WalkStop::Unlinked { node: src.node, port: src.port })?;
        let mut walk = Walk {
            hops: 0,
            mtu: start.mtu.max(1),
            rate: start.rate,
        };
        if src == dst {
            return Ok(walk);
        }
        let (mut node, mut in_port) = (src.node, None);
        if !src.switch {
            let unlinked = WalkStop::Unlinked { node, port: src.port };
            let w = self.wire(node, src.port).ok_or(unlinked)?;
            let (n2, p2) = w.peer.ok_or(unlinked)?;
            walk.hops += 1;
            walk.mtu = walk.mtu.min(w.mtu.max(1));
            walk.rate = walk.rate.min(w.rate);
            step(&Step { node, in_port: None, out_port: src.port, peer: (n2, p2), mtu: w.mtu.max(1), rate: w.rate });
            (node, in_port) = (n2, Some(p2));
            if node == dst.node && (dst.switch || p2 == dst.port) {
                return Ok(walk);
            }
        }
        loop {
            if self.node_kind[node as usize] != sm_abi::NodeKind::Switch {
                return Err(WalkStop::NotASwitch { node, port: in_port.unwrap_or(0) });
            }
            if dst.switch && dst.node == node {
                return Ok(walk);
            }
            let out = routing
                .lft(node)
                .and_then(|lft| lft.get(usize::from(dlid)))
                .copied()
                .unwrap_or(sm_abi::NO_ROUTE);
            if out == 0 || out == sm_abi::NO_ROUTE {
                return Err(WalkStop::NoLftEntry { node, entry: out });
            }
            let unlinked = WalkStop::Unlinked { node, port: out };
            let w = self.wire(node, out).ok_or(unlinked)?;
            let (n2, p2) = w.peer.ok_or(unlinked)?;
            walk.hops += 1;
            if walk.hops > MAX_HOPS {
                return Err(WalkStop::TooLong);
            }
            walk.mtu = walk.mtu.min(w.mtu.max(1));
            walk.rate = walk.rate.min(w.rate);
            step(&Step { node, in_port, out_port: out, peer: (n2, p2), mtu: w.mtu.max(1), rate: w.rate });
            if n2 == dst.node && (dst.switch || p2 == dst.port) {
                return Ok(walk);
            }
            (node, in_port) = (n2, Some(p2));
        }
    }
}

/// One link a walk crosses: out of `node` by `out_port`, into `peer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The node sending (index in the fabric and the snapshot).
    pub node: u32,
    /// The port the walk entered it by (`None` at the source port).
    pub in_port: Option<u8>,
    /// The port it leaves by.
    pub out_port: u8,
    /// Node and port at the other end of the link.
    pub peer: (u32, u8),
    /// MTU code of the link (both ends).
    pub mtu: u8,
    /// Data rate of the link (0.1 Gb/s).
    pub rate: u32,
}

/// Where a walk that does not arrive stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkStop {
    /// No end port holds this LID.
    NoPort(u16),
    /// Nothing is routed.
    NotRouted,
    /// The port the path leaves by has no link.
    Unlinked {
        /// Node index.
        node: u32,
        /// Port number.
        port: u8,
    },
    /// The path entered a CA or router that is not the destination.
    NotASwitch {
        /// Node index.
        node: u32,
        /// The port it entered by.
        port: u8,
    },
    /// The switch's LFT has no port for the destination LID (no LFT, too
    /// short, unrouted, or port 0).
    NoLftEntry {
        /// Node index.
        node: u32,
        /// The entry found (255 for none).
        entry: u8,
    },
    /// Longer than any path may be: the LFTs loop.
    TooLong,
}

/// Settings of PathRecords the routing does not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathDefaults {
    /// PacketLifeTime code of every path (OpenSM: subnet_timeout... 0x12).
    pub packet_life: u8,
    /// P_Key of the default partition (paths take the P_Key their ports
    /// share; see [`sm_partition::common_pkey`]).
    pub pkey: u16,
    /// Highest rate code a PathRecord carries (OpenSM `max_rate_enum`):
    /// a higher code is lowered by [`limit_rate`]. [`NO_RATE_LIMIT`]
    /// (OpenSM's default) lowers none.
    pub max_rate_enum: u8,
}

impl Default for PathDefaults {
    fn default() -> Self {
        Self {
            packet_life: 18,
            pkey: 0xFFFF,
            max_rate_enum: NO_RATE_LIMIT,
        }
    }
}

/// `max_rate_enum` that limits nothing (OpenSM's `SA_RATE_MAX_ENUM`).
pub const NO_RATE_LIMIT: u8 = 63;

/// `code` as a SA with `max_rate_enum` `max` answers it (OpenSM's
/// osm_sa_limit_rate): unchanged when its code is not above `max`; else
/// the fastest rate below it whose code is not above `max` and that is
/// not faster than `max`'s rate; 2.5 Gb/s when there is none. (Codes are
/// compared as numbers, as OpenSM does: with 18, the "original extended
/// rates", 28 Gb/s (19) becomes 25 Gb/s, 400 Gb/s (21) 300 Gb/s.)
pub fn limit_rate(code: u8, max: u8) -> u8 {
    if code <= max {
        return code;
    }
    let (rate, cap) = (rate_of(code), rate_of(max));
    super::db::RATES
        .iter()
        .rev()
        .find(|&&(c, r)| r < rate && c <= max && (cap == 0 || r <= cap))
        .map_or(2, |&(c, _)| c)
}

/// Most records one query returns (beyond it: ERR_NO_RESOURCES).
pub const MAX_RECORDS: usize = 1 << 18;

/// PathRecords matching `query` under `mask`, each 64 bytes; at most
/// `limit` of them, counted among the paths between ports `visible`
/// passes (by port GUID): the requester's partition filter, applied
/// before the limit so a table is never cut short of paths it may show.
/// Errors are SA status codes.
pub fn query(
    db: &SaDb,
    query: &[u8],
    mask: u64,
    limit: usize,
    defaults: &PathDefaults,
    visible: impl Fn(u64) -> bool,
) -> Result<Vec<u8>, u16> {
    let q = PrPacket::new_checked(query).map_err(|_| status::REQ_INVALID)?;
    let q = PrRepr::parse(&q).map_err(|_| status::REQ_INVALID)?;
    if mask & pc::RAW_TRAFFIC != 0 && q.raw_traffic {
        return Ok(Vec::new());
    }
    if mask & pc::DGID != 0 && (q.dgid >> 120) == 0xFF {
        // Multicast destinations are the handler's (it holds the groups).
        return Err(status::NO_RECORDS);
    }
    let pick = |gid_bit: u64, gid: u128, lid_bit: u64, lid: u16| -> Result<Option<EndPort>, u16> {
        let by_gid = if mask & gid_bit != 0 {
            Some(*db.end_by_gid(gid).ok_or(status::INVALID_GID)?)
        } else {
            None
        };
        let by_lid = if mask & lid_bit != 0 {
            Some(*db.end_by_lid(lid).ok_or(status::NO_RECORDS)?)
        } else {
            None
        };
        match (by_gid, by_lid) {
            (Some(a), Some(b)) if a != b => Err(status::NO_RECORDS),
            (a, b) => Ok(a.or(b)),
        }
    };
    let src = pick(pc::SGID, q.sgid, pc::SLID, q.slid)?;
    let dst = pick(pc::DGID, q.dgid, pc::DLID, q.dlid)?;
    let numb = if mask & pc::NUMB_PATH != 0 {
        usize::from(q.numb_path)
    } else {
        usize::MAX
    };
    // One more than an answer carries, so the caller can tell a table
    // that would be too long.
    let limit = limit.min(MAX_RECORDS + 1);
    // A requester sees the paths between ports it shares a partition
    // with (OpenSM's rule; not necessarily the path's partition).
    let sources: Vec<EndPort> = match src {
        Some(s) => vec![s],
        None => db.ends.clone(),
    };
    let sources: Vec<EndPort> = sources.into_iter().filter(|e| visible(e.guid)).collect();
    let dests: Vec<EndPort> = match dst {
        Some(d) => vec![d],
        None => db.ends.clone(),
    };
    let dests: Vec<EndPort> = dests.into_iter().filter(|e| visible(e.guid)).collect();
    let mut out = Vec::new();
    let mut count = 0usize;
    for s in &sources {
        for d in &dests {
            let mut per_pair = 0usize;
            for (slid, dlid, preference) in lid_pairs(s, d) {
                if per_pair >= numb || count >= limit {
                    break;
                }
                if mask & pc::SLID != 0 && slid != q.slid {
                    continue;
                }
                if mask & pc::DLID != 0 && dlid != q.dlid {
                    continue;
                }
                if let Some(rec) = record(db, &q, mask, s, d, slid, dlid, preference, defaults) {
                    let mut buf = [0u8; 64];
                    rec.emit(&mut PrPacket::new_unchecked(&mut buf[..]));
                    out.extend_from_slice(&buf);
                    count += 1;
                    per_pair += 1;
                }
            }
            if count >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// The LID pairs between two ports, preferred ones (same LMC offset) first.
fn lid_pairs(s: &EndPort, d: &EndPort) -> impl Iterator<Item = (u16, u16, u8)> {
    let (ns, nd) = (1u16 << s.lmc, 1u16 << d.lmc);
    let (sb, db) = (s.lid, d.lid);
    let same = (0..ns.max(nd)).map(move |k| (sb + k % ns, db + k % nd, 0u8));
    let rest = (0..ns)
        .flat_map(move |i| (0..nd).map(move |j| (i, j)))
        .filter(move |&(i, j)| {
            // Pairs already given as "same offset" pairs.
            let k_max = ns.max(nd);
            !(0..k_max).any(|k| k % ns == i && k % nd == j)
        })
        .map(move |(i, j)| (sb + i, db + j, 1u8));
    same.chain(rest)
}

/// The record for one LID pair, or `None` when the routing does not
/// connect it or a selector in the query cannot be met.
#[allow(clippy::too_many_arguments)]
fn record(
    db: &SaDb,
    q: &PrRepr,
    mask: u64,
    s: &EndPort,
    d: &EndPort,
    slid: u16,
    dlid: u16,
    preference: u8,
    defaults: &PathDefaults,
) -> Option<PrRepr> {
    // Ports that share no partition (or only as limited members both)
    // have no path; the query's P_Key only if both are in it.
    let pkey = sm_partition::common_pkey(
        db.pkey_table(s.guid),
        db.pkey_table(d.guid),
        (mask & pc::PKEY != 0).then_some(q.pkey),
    )?;
    let walk = db.walk(slid, dlid)?;
    let sl = db.policy_sl(q, mask, slid, dlid);
    if sl > 15 || (mask & pc::SL != 0 && q.sl != sl) {
        return None;
    }
    let reversible = db.walk(dlid, slid).is_some();
    if mask & pc::REVERSIBLE != 0 && q.reversible && !reversible {
        return None;
    }
    let mtu = select(
        mask & pc::MTU != 0,
        mask & pc::MTU_SELECTOR != 0,
        q.mtu_selector,
        q.mtu,
        walk.mtu,
        |m| m.checked_sub(1).filter(|&m| m >= 1),
    )?;
    let rate = select_rate(
        mask & pc::RATE != 0,
        mask & pc::RATE_SELECTOR != 0,
        q.rate_selector,
        q.rate,
        walk.rate,
    )
    .map(|rate| limit_rate(rate, defaults.max_rate_enum))?;
    let life = if s == d { 0 } else { defaults.packet_life };
    let packet_life = select(
        mask & pc::PKT_LIFE != 0,
        mask & pc::PKT_LIFE_SELECTOR != 0,
        q.packet_life_time_selector,
        q.packet_life_time,
        life,
        |l| l.checked_sub(1),
    )?;
    Some(PrRepr {
        service_id: if mask & pc::SERVICE_ID != 0 {
            q.service_id
        } else {
            0
        },
        dgid: db.gid(d),
        sgid: db.gid(s),
        dlid,
        slid,
        raw_traffic: false,
        flow_label: if mask & pc::FLOW_LABEL != 0 {
            q.flow_label
        } else {
            0
        },
        hop_limit: if mask & pc::HOP_LIMIT != 0 {
            q.hop_limit
        } else {
            0
        },
        tclass: if mask & pc::TCLASS != 0 { q.tclass } else { 0 },
        reversible,
        numb_path: 0,
        pkey,
        qos_class: 0,
        sl,
        mtu_selector: selector::EXACTLY,
        mtu,
        rate_selector: selector::EXACTLY,
        rate,
        packet_life_time_selector: selector::EXACTLY,
        packet_life_time: packet_life,
        preference,
    })
}

/// Applies an MTU or packet-lifetime selector: the path offers `have`; a
/// lower value is always usable (smaller packets, a longer wait), so
/// "less than" and "exactly" may lower it, never raise it.
fn select(
    value_given: bool,
    selector_given: bool,
    sel: u8,
    want: u8,
    have: u8,
    below: impl Fn(u8) -> Option<u8>,
) -> Option<u8> {
    if !value_given {
        return Some(have);
    }
    let sel = if selector_given {
        sel
    } else {
        selector::EXACTLY
    };
    match sel {
        selector::GREATER => (have > want).then_some(have),
        selector::LESS => {
            if have < want {
                Some(have)
            } else {
                below(want)
            }
        }
        selector::EXACTLY => (have >= want).then_some(want),
        _ => Some(have),
    }
}

/// The rate selector, comparing rates by what they carry (the codes are
/// not in rate order).
fn select_rate(
    value_given: bool,
    selector_given: bool,
    sel: u8,
    want: u8,
    have: u32,
) -> Option<u8> {
    let have_code = rate_code(have);
    if !value_given {
        return Some(have_code);
    }
    let want_rate = rate_of(want);
    if want_rate == 0 {
        return None;
    }
    let have = rate_of(have_code);
    let sel = if selector_given {
        sel
    } else {
        selector::EXACTLY
    };
    match sel {
        selector::GREATER => (have > want_rate).then_some(have_code),
        selector::LESS => {
            if have < want_rate {
                Some(have_code)
            } else {
                let below = super::db::RATES
                    .iter()
                    .rev()
                    .find(|&&(_, r)| r < want_rate)?;
                Some(below.0)
            }
        }
        selector::EXACTLY => (have >= want_rate).then_some(want),
        _ => Some(have_code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_above_max_rate_enum_are_lowered_as_opensm_does() {
        // No limit, or a code not above it: unchanged.
        for code in [2, 3, 7, 16, 21, 24] {
            assert_eq!(limit_rate(code, NO_RATE_LIMIT), code);
            assert_eq!(limit_rate(code, code), code);
        }
        // 18, the original extended rates: 2x and HDR codes go down.
        assert_eq!(limit_rate(19, 18), 15, "28 Gb/s becomes 25 Gb/s");
        assert_eq!(limit_rate(20, 18), 7, "50 Gb/s becomes 40 Gb/s");
        assert_eq!(limit_rate(21, 18), 18, "400 Gb/s becomes 300 Gb/s");
        assert_eq!(limit_rate(24, 18), 18);
        // A code above the limit whose rate is below it: the fastest
        // slower rate with a code not above the limit.
        assert_eq!(limit_rate(12, 10), 7, "56 Gb/s under 120 Gb/s' code 10: 40 Gb/s");
        assert_eq!(limit_rate(16, 3), 3, "100 Gb/s under 10 Gb/s");
        assert_eq!(limit_rate(7, 3), 3);
        assert_eq!(limit_rate(5, 2), 2, "nothing slower allowed: 2.5 Gb/s");
    }
}
