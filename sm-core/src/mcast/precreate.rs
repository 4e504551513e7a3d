//! The multicast groups the SM creates itself, before any host asks, as
//! OpenSM's partition code does (`osm_prtn_config.c`, `osm_prtn.c`).
//!
//! Linux IPoIB joins its partition's broadcast group with MGID, PortGID,
//! P_Key and JoinState only: it cannot create the group, so the SM must
//! have. OpenSM creates, per partition:
//!
//! - with the `ipoib` flag, the IPv4 broadcast group
//!   `ff1<scope>:401b:<pkey|0x8000>::ffff:ffff` (one per scope asked for,
//!   link-local when none), Q_Key 0x0b1b unless the partition sets one;
//! - with no partitions.conf at all, the same group for the default
//!   partition (0x7fff, so P_Key 0xffff);
//! - every `mgid=` line of the partition. IP groups among them (signature
//!   0x401b IPv4 or 0x601b IPv6) get the partition's P_Key written into
//!   MGID bytes 4..6 (where the line has 0000 or that P_Key; any other
//!   P_Key refuses the line), must carry the broadcast group's MTU and
//!   rate, and default to Q_Key 0x0b1b.
//!
//! OpenSM creates no IPv6 all-nodes, all-routers or solicited-node group
//! of its own: a site that wants them lists them as `mgid=` lines (its
//! documentation's example: `mgid=ff12:601b::1`, `::2`, `::16`). Neither
//! does smcore.
//!
//! The groups are well known: they have no member to start with and stay
//! when their last member leaves ([`super::McGroups::set_well_known`]).

use super::groups::{McError, McGroupParams, McGroups};
use sm_partition::{GroupFlags, PartitionConfig, PortMembership};
use std::collections::BTreeMap;

/// Q_Key of IPoIB groups (OpenSM's `OSM_IPOIB_BROADCAST_MGRP_QKEY`).
pub const IPOIB_QKEY: u32 = 0x0B1B;
/// MTU code of a group whose partition names none (2048 bytes; OpenSM's
/// `OSM_DEFAULT_MGRP_MTU`).
pub const DEFAULT_MTU: u8 = 4;
/// Rate code of a group whose partition names none (10 Gb/s; OpenSM's
/// `OSM_DEFAULT_MGRP_RATE`).
pub const DEFAULT_RATE: u8 = 3;
/// Scope of a group whose partition names none: link-local.
pub const DEFAULT_SCOPE: u8 = 2;
/// P_Key (without the membership bit) of the default partition.
pub const DEFAULT_PKEY: u16 = 0x7FFF;
/// IPv4 multicast signature in MGID bytes 2..4 (RFC 4391).
pub const IPV4_SIGNATURE: u16 = 0x401B;
/// IPv6 multicast signature in MGID bytes 2..4 (RFC 4391).
pub const IPV6_SIGNATURE: u16 = 0x601B;

/// Group options as partitions.conf gives them (on the partition line, or
/// on an `mgid=` line, where they override the partition's). `None`: not
/// given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupOptions {
    /// `mtu=`: MTU code (1 = 256 .. 5 = 4096).
    pub mtu: Option<u8>,
    /// `rate=`: rate code (IBA Table 225).
    pub rate: Option<u8>,
    /// `sl=`.
    pub sl: Option<u8>,
    /// `scope=` (may be given more than once: one group per scope).
    pub scopes: Vec<u8>,
    /// `Q_Key=`.
    pub qkey: Option<u32>,
    /// `TClass=`.
    pub tclass: Option<u8>,
    /// `FlowLabel=`.
    pub flow_label: Option<u32>,
}

/// One `mgid=` line of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDecl {
    /// The MGID as written.
    pub mgid: [u8; 16],
    /// Options of the line; those not given come from the partition.
    pub options: GroupOptions,
}

/// What one partition asks the SM to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionGroups {
    /// The partition's P_Key (the membership bit is ignored).
    pub pkey: u16,
    /// The `ipoib` flag: create the IPoIB broadcast group.
    pub ipoib: bool,
    /// The partition line's options.
    pub options: GroupOptions,
    /// The `mgid=` lines.
    pub groups: Vec<GroupDecl>,
}

/// Why a declared group is not created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrecreateError {
    /// An `mgid=` line's MGID is not multicast.
    #[error("partition {pkey:#06x}: {} is not a multicast GID", super::groups::fmt_gid(.mgid))]
    NotMulticast {
        /// The partition.
        pkey: u16,
        /// The MGID.
        mgid: [u8; 16],
    },
    /// An IP group's MGID carries another partition's P_Key.
    #[error("partition {pkey:#06x}: IP group {} carries P_Key {found:#06x}", super::groups::fmt_gid(.mgid))]
    IpPkey {
        /// The partition.
        pkey: u16,
        /// The MGID.
        mgid: [u8; 16],
        /// The P_Key in the MGID.
        found: u16,
    },
    /// An IP group's MTU or rate differs from the broadcast group's
    /// (IPoIB sends every group's traffic with the broadcast group's).
    #[error("partition {pkey:#06x}: IP group {} has another MTU or rate than the partition's broadcast group", super::groups::fmt_gid(.mgid))]
    IpMtuRate {
        /// The partition.
        pkey: u16,
        /// The MGID.
        mgid: [u8; 16],
    },
    /// The group store refused it (no MLID left, ...).
    #[error("partition {pkey:#06x}: {source}")]
    Store {
        /// The partition.
        pkey: u16,
        /// Why.
        source: McError,
    },
}

/// The IPoIB broadcast MGID of the partition `pkey` in `scope`:
/// `ff1<scope>:401b:<pkey|0x8000>::ffff:ffff`.
pub fn ipoib_broadcast_mgid(pkey: u16, scope: u8) -> [u8; 16] {
    let mut mgid = [0u8; 16];
    mgid[0] = 0xFF;
    mgid[1] = 0x10 | (scope & 0x0F);
    mgid[2..4].copy_from_slice(&IPV4_SIGNATURE.to_be_bytes());
    mgid[4..6].copy_from_slice(&(pkey | 0x8000).to_be_bytes());
    mgid[12..16].copy_from_slice(&[0xFF; 4]);
    mgid
}

/// Whether `mgid` is an IPoIB group's (IPv4 or IPv6 signature).
pub fn is_ip_mgid(mgid: &[u8; 16]) -> bool {
    let sig = u16::from_be_bytes([mgid[2], mgid[3]]);
    mgid[0] == 0xFF && (sig == IPV4_SIGNATURE || sig == IPV6_SIGNATURE)
}

impl PartitionGroups {
    /// The default partition as OpenSM has it with no partitions.conf:
    /// P_Key 0x7fff (0xffff with the membership bit), `ipoib`, OpenSM's
    /// default MTU and rate.
    pub fn default_partition() -> Self {
        Self {
            pkey: DEFAULT_PKEY,
            ipoib: true,
            options: GroupOptions::default(),
            groups: Vec::new(),
        }
    }

    /// Every group this partition declares, with its parameters; a group
    /// asked for in several scopes once per scope. Lines that cannot be
    /// created come back as errors (the others are still made).
    /// `packet_life` is the PacketLifeTime groups get (OpenSM: its
    /// `subnet_timeout`, 18 by default).
    pub fn group_params(&self, packet_life: u8) -> (Vec<McGroupParams>, Vec<PrecreateError>) {
        let pkey = self.pkey & 0x7FFF;
        let full_pkey = pkey | 0x8000;
        let part = &self.options;
        let mtu = part.mtu.unwrap_or(DEFAULT_MTU);
        let rate = part.rate.unwrap_or(DEFAULT_RATE);
        let mut out = Vec::new();
        let mut errors = Vec::new();
        if self.ipoib {
            let qkey = part.qkey.filter(|&q| q != 0).unwrap_or(IPOIB_QKEY);
            push_scopes(&mut out, ipoib_broadcast_mgid(pkey, DEFAULT_SCOPE), part, full_pkey, mtu, rate, qkey, packet_life);
        }
        for decl in &self.groups {
            let mut mgid = decl.mgid;
            if mgid[0] != 0xFF {
                errors.push(PrecreateError::NotMulticast { pkey, mgid });
                continue;
            }
            // A line's options override the partition's; the ones it
            // leaves out are inherited (OpenSM: TClass is not).
            let o = &decl.options;
            let merged = GroupOptions {
                mtu: o.mtu.or(part.mtu),
                rate: o.rate.or(part.rate),
                sl: o.sl.or(part.sl),
                scopes: if o.scopes.is_empty() { part.scopes.clone() } else { o.scopes.clone() },
                qkey: o.qkey.or(part.qkey),
                tclass: o.tclass,
                flow_label: o.flow_label.or(part.flow_label),
            };
            let g_mtu = merged.mtu.unwrap_or(DEFAULT_MTU);
            let g_rate = merged.rate.unwrap_or(DEFAULT_RATE);
            let mut qkey = merged.qkey.unwrap_or(0);
            if is_ip_mgid(&mgid) {
                let found = u16::from_be_bytes([mgid[4], mgid[5]]);
                if found != 0 && found != full_pkey && mgid != ipoib_broadcast_mgid(0x7FFF, 2) {
                    errors.push(PrecreateError::IpPkey { pkey, mgid, found });
                    continue;
                }
                if g_mtu != mtu || g_rate != rate {
                    errors.push(PrecreateError::IpMtuRate { pkey, mgid });
                    continue;
                }
                mgid[4..6].copy_from_slice(&full_pkey.to_be_bytes());
                if qkey == 0 {
                    qkey = IPOIB_QKEY;
                }
            }
            push_scopes(&mut out, mgid, &merged, full_pkey, g_mtu, g_rate, qkey, packet_life);
        }
        (out, errors)
    }
}

/// One group per scope of `o` (link-local when none), the scope written
/// into the MGID as OpenSM does.
#[allow(clippy::too_many_arguments)]
fn push_scopes(
    out: &mut Vec<McGroupParams>,
    mgid: [u8; 16],
    o: &GroupOptions,
    pkey: u16,
    mtu: u8,
    rate: u8,
    qkey: u32,
    packet_life: u8,
) {
    let default = [DEFAULT_SCOPE];
    let scopes: &[u8] = if o.scopes.is_empty() { &default } else { &o.scopes };
    for &scope in scopes {
        let scope = if scope == 0 { DEFAULT_SCOPE } else { scope & 0x0F };
        let mut g = mgid;
        g[1] = (g[1] & 0xF0) | scope;
        if out.iter().any(|p| p.mgid == g) {
            continue;
        }
        out.push(McGroupParams {
            mgid: g,
            qkey,
            pkey,
            mtu,
            rate,
            packet_life,
            sl: o.sl.unwrap_or(0),
            flow_label: o.flow_label.unwrap_or(0) & 0xF_FFFF,
            // Link-local traffic never leaves the subnet.
            hop_limit: if scope == DEFAULT_SCOPE { 0 } else { 0xFF },
            tclass: o.tclass.unwrap_or(0),
            scope,
        });
    }
}

/// The multicast groups OpenSM's partition code creates: for each
/// partition with members (all of them when `members` is `None`, before a
/// sweep has resolved any), its IPoIB broadcast group when it has `ipoib`,
/// and its `mgid=` groups. OpenSM gives groups their partition's SL only
/// with QoS on, SL 0 otherwise; so does this.
pub fn partition_groups(
    config: &PartitionConfig,
    members: Option<&BTreeMap<u16, BTreeMap<u64, PortMembership>>>,
    qos: bool,
) -> Vec<PartitionGroups> {
    let options = |f: &GroupFlags| GroupOptions {
        mtu: Some(f.mtu),
        rate: Some(f.rate),
        sl: qos.then_some(f.sl),
        scopes: f.scopes(),
        qkey: (f.qkey != 0).then_some(f.qkey),
        tclass: Some(f.tclass),
        flow_label: Some(f.flow_label),
    };
    config
        .partitions
        .iter()
        .filter(|p| members.is_none_or(|m| m.contains_key(&(p.pkey & 0x7FFF))))
        .map(|p| PartitionGroups {
            pkey: p.pkey,
            ipoib: p.ipoib,
            options: options(&p.flags),
            groups: p.groups.iter().map(|g| GroupDecl { mgid: g.mgid.to_be_bytes(), options: options(&g.flags) }).collect(),
        })
        .collect()
}

/// Makes the groups `partitions` declare exist, as well-known groups (see
/// [`McGroups::set_well_known`]: groups no longer declared lose that and
/// go when they have no full member). The first declaration of an MGID
/// wins. Returns what could not be created.
pub fn precreate(
    groups: &mut McGroups,
    partitions: &[PartitionGroups],
    packet_life: u8,
) -> Vec<PrecreateError> {
    let mut wanted: Vec<(u16, McGroupParams)> = Vec::new();
    let mut errors = Vec::new();
    for p in partitions {
        let (params, errs) = p.group_params(packet_life);
        errors.extend(errs);
        for g in params {
            if !wanted.iter().any(|(_, w)| w.mgid == g.mgid) {
                wanted.push((p.pkey & 0x7FFF, g));
            }
        }
    }
    let params: Vec<McGroupParams> = wanted.iter().map(|(_, g)| *g).collect();
    for (mgid, e) in groups.set_well_known(&params) {
        let pkey = wanted
            .iter()
            .find(|(_, g)| g.mgid == mgid)
            .map_or(0, |(p, _)| *p);
        errors.push(PrecreateError::Store { pkey, source: e });
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcast::groups::{join_state, McMember};

    fn gid(s: &str) -> [u8; 16] {
        s.parse::<std::net::Ipv6Addr>().map(|a| a.octets()).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn broadcast_mgid_carries_pkey_and_scope() {
        assert_eq!(ipoib_broadcast_mgid(0x7FFF, 2), gid("ff12:401b:ffff::ffff:ffff"));
        assert_eq!(ipoib_broadcast_mgid(0x0001, 5), gid("ff15:401b:8001::ffff:ffff"));
        assert_eq!(ipoib_broadcast_mgid(0x8002, 2), gid("ff12:401b:8002::ffff:ffff"));
        assert!(is_ip_mgid(&gid("ff12:601b::1")));
        assert!(!is_ip_mgid(&gid("ff12:a01b::1")));
    }

    #[test]
    fn default_partition_is_openssms_broadcast_group() {
        let (params, errors) = PartitionGroups::default_partition().group_params(18);
        assert!(errors.is_empty());
        assert_eq!(params.len(), 1, "only the IPv4 broadcast group, as OpenSM");
        let p = params[0];
        assert_eq!(p.mgid, gid("ff12:401b:ffff::ffff:ffff"));
        assert_eq!((p.pkey, p.qkey, p.mtu, p.rate, p.sl, p.scope), (0xFFFF, 0x0B1B, 4, 3, 0, 2));
        assert_eq!((p.packet_life, p.hop_limit, p.tclass, p.flow_label), (18, 0, 0, 0));
    }

    #[test]
    fn partition_options_and_scopes() {
        let part = PartitionGroups {
            pkey: 0x8001,
            ipoib: true,
            options: GroupOptions {
                mtu: Some(5),
                rate: Some(7),
                sl: Some(1),
                scopes: vec![2, 5],
                qkey: Some(0x1234),
                ..Default::default()
            },
            groups: Vec::new(),
        };
        let (params, errors) = part.group_params(18);
        assert!(errors.is_empty());
        let mgids: Vec<_> = params.iter().map(|p| p.mgid).collect();
        assert_eq!(mgids, vec![gid("ff12:401b:8001::ffff:ffff"), gid("ff15:401b:8001::ffff:ffff")]);
        assert!(params.iter().all(|p| (p.pkey, p.mtu, p.rate, p.sl, p.qkey) == (0x8001, 5, 7, 1, 0x1234)));
        assert_eq!(params.iter().map(|p| (p.scope, p.hop_limit)).collect::<Vec<_>>(), vec![(2, 0), (5, 0xFF)]);
    }

    #[test]
    fn mgid_lines_ip_rules() {
        let decl = |s: &str, options: GroupOptions| GroupDecl { mgid: gid(s), options };
        let part = PartitionGroups {
            pkey: 0x0002,
            ipoib: false,
            options: GroupOptions::default(),
            groups: vec![
                // IPv6 all-nodes, P_Key left 0: the partition's goes in.
                decl("ff12:601b::1", GroupOptions::default()),
                // Matching P_Key: kept.
                decl("ff12:401b:8002::16", GroupOptions::default()),
                // Another partition's P_Key: refused.
                decl("ff12:401b:8003::16", GroupOptions::default()),
                // IP group with another MTU than the broadcast group's.
                decl("ff12:601b::2", GroupOptions { mtu: Some(5), ..Default::default() }),
                // A plain group keeps its Q_Key (0 when none) and options.
                decl("ff15::1", GroupOptions { sl: Some(1), qkey: Some(0xDEAD), mtu: Some(2), ..Default::default() }),
                decl("fe80::1", GroupOptions::default()),
            ],
        };
        let (params, errors) = part.group_params(18);
        let got: Vec<_> = params.iter().map(|p| (p.mgid, p.qkey, p.mtu, p.sl, p.scope)).collect();
        assert_eq!(
            got,
            vec![
                (gid("ff12:601b:8002::1"), 0x0B1B, 4, 0, 2),
                (gid("ff12:401b:8002::16"), 0x0B1B, 4, 0, 2),
                // OpenSM writes the scope asked for (link-local by default)
                // into every precreated MGID.
                (gid("ff12::1"), 0xDEAD, 2, 1, 2),
            ]
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(matches!(errors[0], PrecreateError::IpPkey { found: 0x8003, .. }));
        assert!(matches!(errors[1], PrecreateError::IpMtuRate { .. }));
        assert!(matches!(errors[2], PrecreateError::NotMulticast { .. }));
    }

    fn member(guid: u64, state: u8) -> McMember {
        let mut port_gid = [0u8; 16];
        port_gid[0] = 0xFE;
        port_gid[1] = 0x80;
        port_gid[8..].copy_from_slice(&guid.to_be_bytes());
        McMember { port_gid, port_guid: guid, join_state: state, proxy: false }
    }

    #[test]
    fn precreated_groups_survive_their_members_and_go_when_undeclared() {
        let mut g = McGroups::new();
        let errors = precreate(&mut g, &[PartitionGroups::default_partition()], 18);
        assert!(errors.is_empty(), "{errors:?}");
        let bcast = gid("ff12:401b:ffff::ffff:ffff");
        let group = g.get(&bcast).cloned().unwrap_or_else(|| panic!("no broadcast group"));
        assert!(group.well_known && group.members.is_empty());
        assert_eq!(group.mlid, crate::mcast::groups::MLID_FIRST);
        // Joined and left: the group stays, with its MLID.
        assert!(g.join(&bcast, member(1, join_state::FULL)).is_ok());
        assert_eq!(g.leave(&bcast, &member(1, 0).port_gid, join_state::FULL).map(|x| x.is_some()), Ok(true));
        assert!(g.join(&bcast, member(2, join_state::FULL)).is_ok());
        assert_eq!(g.retain_ports(|_| false), 1);
        assert_eq!(g.get(&bcast).map(|x| (x.mlid, x.members.len())), Some((group.mlid, 0)));
        // Precreating again changes nothing.
        let gen = g.generation();
        assert!(precreate(&mut g, &[PartitionGroups::default_partition()], 18).is_empty());
        assert_eq!((g.generation(), g.len()), (gen, 1));
        // Undeclared: a group with a full member stays (an ordinary group
        // now), an empty one goes.
        let other = PartitionGroups { pkey: 5, ..PartitionGroups::default_partition() };
        assert!(g.join(&bcast, member(3, join_state::FULL)).is_ok());
        assert!(precreate(&mut g, std::slice::from_ref(&other), 18).is_empty());
        assert_eq!(g.get(&bcast).map(|x| x.well_known), Some(false));
        assert!(g.get(&ipoib_broadcast_mgid(5, 2)).is_some_and(|x| x.well_known));
        assert!(precreate(&mut g, &[], 18).is_empty());
        assert!(g.get(&ipoib_broadcast_mgid(5, 2)).is_none());
        assert_eq!(g.len(), 1);
    }
}
