//! The SA's request handler: one MAD in, at most one MAD out. It checks
//! the common header (version, class, method), dispatches by attribute,
//! and turns every failure into the status IBA gives for it; it never
//! panics on any input (a property test feeds it random bytes).
//!
//! Trust: a request is trusted when its SM_Key equals the configured
//! [`SaConfig::sm_key`] and that key is not 0 (a key of 0 trusts nobody).
//! A request carrying another nonzero key is dropped unanswered (IBA
//! C15-0.1.5, as OpenSM does). Trusted requesters may read P_Key tables,
//! the SM_Key in SMInfoRecords, every multicast member and subscriber QPN,
//! and change any multicast membership; nobody else sees a key in any
//! answer (the SM_Key field of every answer is 0).
//!
//! Partitions: an untrusted requester sees the ports it shares a
//! partition with, at least one of the two a full member (OpenSM's
//! `osm_physp_share_pkey`), and its own: NodeRecords, PortInfoRecords,
//! GUIDInfoRecords, LinkRecords (both ends), SwitchInfo, LFT, MFT, SL2VL
//! and VLArb records, PathRecords (source and destination; filtered
//! before a table is counted against its cap), the multicast groups of
//! its partitions (MCMemberRecords, PathRecords to an MGID), and Reports
//! of traps 64-67 (o13-17.1.1). A request from a LID no port holds sees
//! none of them.
//!
//! Quotas: a GetTable answers at most [`SaConfig::max_records`] records
//! (a longer answer is ERR_NO_RESOURCES, not a silently cut table), a
//! port holds at most [`SaConfig::max_subscriptions_per_port`]
//! subscriptions, and multicast creates are bounded by [`SaConfig::mcast`].
//!
//! Locking: [`Sa`] is shared by the SA thread and the SM loop. Requests
//! take the published snapshot (an `Arc`) under a short lock and build
//! their answer outside it, so a long GetTable never holds up a publish.

use std::sync::{Arc, Mutex, MutexGuard};

use tracing::debug;

use sm_mad::mad::{self, method, status as mad_status};
use sm_mad::sa::{self, attr, rmpp, status, Component};
use sm_mad::{
    sa_class_port_info as cpi, sa_guid_info_record as gir, sa_lft_record as lftr,
    sa_link_record as lr, sa_mft_record as mftr, sa_multi_path_record as mpr, sa_node_record as nr,
    sa_pkey_table_record as pkr, sa_port_info_record as pir, sa_sl2vl_record as slr,
    sa_sm_info_record as smir, sa_switch_info_record as swr, sa_vlarb_record as var,
};

use super::db::{EndPort, SaDb};
use super::inform::{Report, Subscriptions};
use super::mcmember::{self, Requester};
use super::path::{self, PathDefaults};
use super::service::{self, ServiceLimits, Services};
use crate::mcast::{McGroups, McLimits};

/// Settings of the SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaConfig {
    /// PathRecord settings the routing does not decide.
    pub path: PathDefaults,
    /// ClassPortInfo.RespTimeValue (4.096 µs · 2^value).
    pub resp_time_value: u8,
    /// Most records one GetTable answers; a longer answer is refused with
    /// ERR_NO_RESOURCES (at most [`path::MAX_RECORDS`] for PathRecords).
    pub max_records: usize,
    /// The SA's SM_Key: requests carrying it are trusted (P_KeyTableRecords,
    /// SM_Keys in SMInfoRecords, multicast members, changes to any
    /// membership). OpenSM's default is 1. 0 trusts nobody.
    pub sm_key: u64,
    /// Priority of this SM, for its SMInfoRecord.
    pub sm_priority: u8,
    /// Most InformInfo subscriptions one port holds.
    pub max_subscriptions_per_port: usize,
    /// Bounds on multicast groups created through the SA.
    pub mcast: McLimits,
    /// Bounds on registered ServiceRecords.
    pub services: ServiceLimits,
    /// Drop a port's InformInfo subscriptions when it leaves the fabric
    /// (OpenSM `drop_event_subscriptions`; OpenSM's default keeps them).
    pub drop_event_subscriptions: bool,
    /// A join must agree with the group's parameters it names (OpenSM
    /// `mcgroup_join_validation`, default on).
    pub mcgroup_join_validation: bool,
    /// A group created with a requested MGID must have a valid one, and an
    /// IPoIB group needs its partition's broadcast group and must agree
    /// with it (OpenSM `ipoib_mcgroup_creation_validation`, default on).
    pub ipoib_mcgroup_creation_validation: bool,
    /// Bits 39..32 of the alias GUIDs this SA assigns
    /// (`sm_assigned_guid`).
    pub sm_assigned_guid: u8,
    /// Multicast served: ClassPortInfo says IsUDMulticastSupported
    /// (false with `disable_multicast`, as OpenSM).
    pub multicast: bool,
}

impl SaConfig {
    /// Whether a request carrying `key` is trusted: it is the SA's key,
    /// and that key is not 0.
    pub fn trusts(&self, key: u64) -> bool {
        self.sm_key != 0 && key == self.sm_key
    }
}

impl Default for SaConfig {
    fn default() -> Self {
        Self {
            path: PathDefaults::default(),
            resp_time_value: 18,
            max_records: path::MAX_RECORDS,
            sm_key: 1,
            sm_priority: 0,
            max_subscriptions_per_port: 32,
            mcast: McLimits::default(),
            services: ServiceLimits::default(),
            drop_event_subscriptions: false,
            mcgroup_join_validation: true,
            ipoib_mcgroup_creation_validation: true,
            sm_assigned_guid: 0,
            multicast: true,
        }
    }
}

/// What handling one request produced.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The response MAD, `None` when nothing must be answered (a response
    /// that arrived, a MAD of another class).
    pub reply: Option<Vec<u8>>,
    /// Multicast membership changed: MFTs must be recomputed.
    pub mcast_changed: bool,
    /// Reports to send (multicast group created/deleted).
    pub reports: Vec<Report>,
}

/// The SA's state: the published snapshot, the multicast groups it
/// shares with the SM loop, and the subscriptions. Shared between the SA
/// thread and the SM loop (every method takes `&self`); see the module
/// comment on locking.
#[derive(Debug)]
pub struct Sa {
    view: Mutex<View>,
    pub(super) groups: Arc<Mutex<McGroups>>,
    /// Copy on write: a query clones the `Arc` and reads outside the lock.
    pub(super) subs: Mutex<Arc<Subscriptions>>,
    pub(super) services: Mutex<Services>,
    /// Alias GUID tables hosts set (shared with every published database,
    /// whose GID lookups they extend).
    aliases: Arc<Mutex<super::alias::AliasGuids>>,
    config: SaConfig,
}

/// What queries read, replaced whole by publishes.
#[derive(Debug, Clone, Default)]
struct View {
    db: Option<Arc<SaDb>>,
    /// MFT blocks as the last multicast plan left them.
    mft_records: Arc<Vec<[u8; mftr::PADDED_LEN]>>,
}

pub(super) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded state stays consistent across a panic (each change is
    // one assignment), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A response header for `req` (at least [`sa::HEADER_LEN`] bytes).
fn header(req: &[u8], resp_method: u8, status: u16) -> Vec<u8> {
    let mut out = vec![0u8; mad::MAD_LEN];
    out[..mad::HEADER_LEN].copy_from_slice(&req[..mad::HEADER_LEN]);
    let mut p = sa::Packet::new_unchecked(&mut out[..]);
    p.set_base_version(mad::BASE_VERSION);
    p.set_method(resp_method);
    p.set_status(status);
    // ClassSpecific and the reserved bits after AttributeID are zero in
    // an answer; so is everything after the common header but the echoed
    // ComponentMask (SM_Key always 0 in answers, C15-0.1.5).
    p.clear_reserved();
    p.set_component_mask(request_view(req).component_mask());
    out
}

/// The SA view of a request the handler has copied into a whole MAD.
fn request_view(req: &[u8]) -> sa::Packet<&[u8]> {
    sa::Packet::new_unchecked(req)
}

/// The request's method.
fn method_of(req: &[u8]) -> u8 {
    request_view(req).method()
}

fn response_method(request: u8) -> u8 {
    match request {
        method::GET | method::SET => method::GET_RESP,
        method::GET_TABLE => method::GET_TABLE_RESP,
        method::DELETE => method::DELETE_RESP,
        m => m | method::RESPONSE,
    }
}

/// An error answer: the request's data back with `status`.
fn error(req: &[u8], status: u16) -> Vec<u8> {
    let mut out = header(req, response_method(method_of(req)), status);
    out[sa::HEADER_LEN..].copy_from_slice(&req[sa::HEADER_LEN..mad::MAD_LEN]);
    out
}

/// A successful Get/Set/Delete answer carrying one record.
fn single(req: &[u8], record: &[u8]) -> Vec<u8> {
    let mut out = header(req, response_method(method_of(req)), 0);
    let n = record.len().min(sa::DATA_LEN);
    out[sa::HEADER_LEN..sa::HEADER_LEN + n].copy_from_slice(&record[..n]);
    out
}

/// A GetTable answer: all records in one message with the RMPP header of
/// its single (as the kernel will segment it) transfer.
fn table(req: &[u8], record_len: usize, records: &[u8]) -> Vec<u8> {
    table_with(req, method::GET_TABLE_RESP, record_len, records)
}

/// A multi-record answer with method `resp_method` (GetTableResp,
/// GetMultiResp).
fn table_with(req: &[u8], resp_method: u8, record_len: usize, records: &[u8]) -> Vec<u8> {
    let mut out = header(req, resp_method, 0);
    // Exactly the header and the records, as OpenSM sends them: a client
    // counts records as (length - header) / record size, so padding a
    // short answer to a whole MAD would show it records of zeros (an
    // empty MCMemberRecord table read as three groups with MGID `::`
    // where the transport hands over the MAD as sent, as umad2sim does).
    out.truncate(sa::HEADER_LEN);
    out.resize(sa::HEADER_LEN + records.len(), 0);
    out[sa::HEADER_LEN..sa::HEADER_LEN + records.len()].copy_from_slice(records);
    let mut p = sa::Packet::new_unchecked(&mut out[..]);
    p.set_rmpp_version(rmpp::VERSION);
    p.set_rmpp_type(rmpp::TYPE_DATA);
    p.set_rmpp_resp_time(rmpp::NO_RESP_TIME);
    p.set_rmpp_flags(rmpp::FLAG_ACTIVE | rmpp::FLAG_FIRST | rmpp::FLAG_LAST);
    p.set_rmpp_status(0);
    p.set_segment_number(1);
    // PayloadLength counts the SA header after the RMPP fields (20 bytes)
    // plus the records.
    p.set_payload_length((sa::HEADER_LEN - 36 + records.len()) as u32);
    p.set_attribute_offset((record_len / 8) as u16);
    out
}

/// Get (exactly one record) or GetTable (at most `max` records, else
/// ERR_NO_RESOURCES) over `records`.
fn answer_records(req: &[u8], record_len: usize, records: Vec<&[u8]>, max: usize) -> Vec<u8> {
    if method_of(req) == method::GET {
        match records.len() {
            0 => error(req, status::NO_RECORDS),
            1 => single(req, records[0]),
            _ => error(req, status::TOO_MANY_RECORDS),
        }
    } else if records.len() > max {
        debug!(records = records.len(), max, "GetTable answer too long, refused");
        error(req, status::NO_RESOURCES)
    } else {
        let mut data = Vec::with_capacity(records.len() * record_len);
        for r in records {
            data.extend_from_slice(&r[..record_len]);
        }
        table(req, record_len, &data)
    }
}

/// What a requester may see of the fabric: everything when trusted, else
/// the ports it shares a partition with ([`SaDb::share`](super::db::SaDb::share),
/// OpenSM's `osm_physp_share_pkey`). A request from a LID no port of the
/// subnet holds sees nothing. A switch's records (its ports, tables and
/// links) are its port 0's, by which its LID is held.
struct Sight<'a> {
    db: &'a SaDb,
    requester: Option<u64>,
    trusted: bool,
}

impl<'a> Sight<'a> {
    fn new(db: &'a SaDb, slid: u16, trusted: bool) -> Self {
        Self {
            db,
            requester: db.end_by_lid(slid).map(|e| e.guid),
            trusted,
        }
    }

    /// Whether the end port `guid` is visible.
    fn guid(&self, guid: u64) -> bool {
        self.trusted
            || self
                .requester
                .is_some_and(|r| self.db.share(r, guid))
    }

    /// Whether the end port holding `lid` is visible (a LID nobody holds
    /// is not).
    fn lid(&self, lid: u16) -> bool {
        self.trusted || self.db.end_by_lid(lid).is_some_and(|e| self.guid(e.guid))
    }

    /// Whether a record keyed by the LID in its first two bytes is visible.
    fn keyed(&self, record: &[u8]) -> bool {
        self.trusted || (record.len() >= 2 && self.lid(u16::from_be_bytes([record[0], record[1]])))
    }

    /// Whether the requester is in the partition of `pkey` (a multicast
    /// group's).
    fn in_partition(&self, pkey: u16) -> bool {
        self.trusted
            || self
                .requester
                .is_some_and(|r| self.db.has_pkey(r, pkey))
    }

    /// Whether a LinkRecord is visible: both of its ends are. A switch
    /// port cabled to an end port is judged by that end port (partition
    /// enforcement gives it the end port's table, as OpenSM's physical
    /// port holds it); between two switches, by the switches.
    fn link(&self, record: &[u8]) -> bool {
        if self.trusted {
            return true;
        }
        let p = lr::Packet::new_unchecked(record);
        let (Some(a), Some(b)) = (self.db.end_by_lid(p.from_lid()), self.db.end_by_lid(p.to_lid())) else {
            return false;
        };
        let judged = |end: &EndPort, peer: &EndPort| if end.switch && !peer.switch { peer.guid } else { end.guid };
        self.guid(judged(a, b)) && self.guid(judged(b, a))
    }
}

/// Records whose field `comp` (when `lid_first`, the LID at bytes 0..2 the
/// records are sorted by) and every other masked component match.
fn select<'a, const N: usize>(
    records: &'a [[u8; N]],
    comps: &[Component],
    mask: u64,
    template: &[u8],
    extra: impl Fn(&[u8]) -> bool,
) -> Vec<&'a [u8]> {
    let slice = if mask & 1 != 0 && template.len() >= 2 {
        let lid = u16::from_be_bytes([template[0], template[1]]);
        let lo = records.partition_point(|r| u16::from_be_bytes([r[0], r[1]]) < lid);
        let hi = records.partition_point(|r| u16::from_be_bytes([r[0], r[1]]) <= lid);
        &records[lo..hi]
    } else {
        records
    };
    slice
        .iter()
        .filter(|r| sa::matches(comps, mask, template, &r[..]) && extra(&r[..]))
        .map(|r| &r[..])
        .collect()
}

impl Sa {
    /// The alias GUID tables hosts set (the SM programs them on the ports).
    pub fn aliases(&self) -> Arc<Mutex<super::alias::AliasGuids>> {
        Arc::clone(&self.aliases)
    }

    /// An SA with nothing published yet: queries are answered BUSY until
    /// [`Self::publish`].
    pub fn new(groups: Arc<Mutex<McGroups>>, config: SaConfig) -> Self {
        Self {
            view: Mutex::default(),
            aliases: Arc::new(Mutex::new(super::alias::AliasGuids::new(config.sm_assigned_guid))),
            groups,
            subs: Mutex::default(),
            services: Mutex::default(),
            config,
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &SaConfig {
        &self.config
    }

    /// Stops answering from the snapshot in service (this SM handed the
    /// subnet to another master, whose SA clients must use): queries get
    /// BUSY again until the next [`Self::publish`], which then reports no
    /// GID changes (there is nothing to compare with).
    pub fn stand_down(&self) {
        *locked(&self.view) = View::default();
    }

    /// Takes the MFT contents of a multicast plan (as programmed) for
    /// MFTRecord queries; switch LIDs come from the snapshot in service.
    pub fn set_mcast(&self, plan: &crate::mcast::tree::McastPlan) {
        let db = locked(&self.view).db.clone();
        let Some(db) = db else {
            locked(&self.view).mft_records = Arc::default();
            return;
        };
        let mut records = Vec::new();
        // (switch LID, block, position) → masks.
        let mut blocks: std::collections::BTreeMap<(u16, u16, u8), [u16; mftr::MASKS]> =
            Default::default();
        for tree in &plan.trees {
            let Some(index) = tree.mlid.checked_sub(0xC000) else {
                continue;
            };
            let (block, slot) = (index / mftr::MASKS as u16, usize::from(index) % mftr::MASKS);
            for (&node, ports) in &tree.switches {
                let Some(lid) = db.switch_lid(node) else {
                    continue;
                };
                for &port in ports {
                    let position = port / 16;
                    let masks = blocks
                        .entry((lid, block, position))
                        .or_insert([0; mftr::MASKS]);
                    masks[slot] |= 1 << (port % 16);
                }
            }
        }
        for ((lid, block_num, position), masks) in blocks {
            let mut rec = [0u8; mftr::PADDED_LEN];
            mftr::Repr {
                lid,
                position,
                block_num,
                masks,
            }
            .emit(&mut mftr::Packet::new_unchecked(&mut rec[..]));
            records.push(rec);
        }
        let mut view = locked(&self.view);
        // Not after a stand-down that came meanwhile.
        if view.db.is_some() {
            view.mft_records = Arc::new(records);
        }
    }

    /// The snapshot in service.
    pub fn db(&self) -> Option<Arc<SaDb>> {
        locked(&self.view).db.clone()
    }

    /// Subscriptions held (a snapshot).
    pub fn subscriptions(&self) -> Arc<Subscriptions> {
        Arc::clone(&locked(&self.subs))
    }

    /// Puts `db` in service. Returns the Reports for GIDs that came into
    /// service (trap 64) or went out of it (trap 65) since the last
    /// snapshot, and whether multicast membership changed (members that
    /// left the fabric are dropped from their groups).
    pub fn publish(&self, mut db: SaDb) -> (Vec<Report>, bool) {
        db.aliases = Arc::clone(&self.aliases);
        let db = Arc::new(db);
        let mut reports = Vec::new();
        let sa_gid = db.end_by_lid(db.sm_lid).map_or(0, |e| db.gid(e));
        let old = locked(&self.view).db.clone();
        let mut subs_guard = locked(&self.subs);
        let subs = Arc::make_mut(&mut subs_guard);
        if let Some(old) = &old {
            for e in db.end_ports() {
                if old.end_by_guid(e.guid).is_none() {
                    reports.extend(subs.reports(
                        sm_mad::notice::trap::GID_IN_SERVICE,
                        db.gid(e),
                        e.lid,
                        db.sm_lid,
                        sa_gid,
                        |s| db.share(s.subscriber_gid as u64, e.guid),
                    ));
                }
            }
            for e in old.end_ports() {
                if db.end_by_guid(e.guid).is_none() {
                    // The port is gone: who may know of it is decided by
                    // the partitions it was in.
                    reports.extend(subs.reports(
                        sm_mad::notice::trap::GID_OUT_OF_SERVICE,
                        old.gid(e),
                        e.lid,
                        db.sm_lid,
                        sa_gid,
                        |s| old.share(s.subscriber_gid as u64, e.guid),
                    ));
                }
            }
        }
        if self.config.drop_event_subscriptions {
            subs.retain(|gid| db.end_by_gid(gid).is_some());
        }
        drop(subs_guard);
        // Services of ports that left the fabric go with them.
        locked(&self.services).retain_owners(|guid| db.end_by_guid(guid).is_some());
        let changed = locked(&self.groups).retain_ports(|guid| db.end_by_guid(guid).is_some()) > 0;
        // The MFT records stay until the next multicast plan replaces them.
        locked(&self.view).db = Some(db);
        (reports, changed)
    }

    /// Handles one MAD from `slid`, QP `sqpn`. Never panics.
    pub fn handle(&self, slid: u16, sqpn: u32, mad_bytes: &[u8]) -> Answer {
        if mad_bytes.len() < mad::HEADER_LEN {
            return Answer::default();
        }
        let mut req = [0u8; mad::MAD_LEN];
        let n = mad_bytes.len().min(mad::MAD_LEN);
        req[..n].copy_from_slice(&mad_bytes[..n]);
        let view = request_view(&req);
        if view.mgmt_class() != mad::class::SUBN_ADM || view.header().is_response() {
            // Not ours, or an answer (a ReportResp to one of our Reports).
            return Answer::default();
        }
        let reply = |m: Vec<u8>| Answer {
            reply: Some(m),
            ..Default::default()
        };
        if view.base_version() != mad::BASE_VERSION || view.class_version() != mad::class_version::SUBN_ADM {
            return reply(error(&req, mad_status::BAD_VERSION));
        }
        let m = view.method();
        if !matches!(
            m,
            method::GET | method::GET_TABLE | method::SET | method::DELETE | method::GET_MULTI
        ) {
            return reply(error(&req, mad_status::UNSUPPORTED_METHOD));
        }
        let attribute = view.attribute_id();
        let mask = view.component_mask();
        let sm_key = view.sm_key();
        if sm_key != 0 && sm_key != self.config.sm_key {
            // C15-0.1.5: a request with a wrong SM_Key is discarded (an
            // answer would tell a guesser that the key was wrong).
            debug!(slid, attribute, "SA request with a wrong SM_Key dropped");
            return Answer::default();
        }
        let trusted = self.config.trusts(sm_key);
        let max = self.config.max_records;
        let query = matches!(m, method::GET | method::GET_TABLE);
        let supported = match attribute {
            attr::CLASS_PORT_INFO => m == method::GET,
            attr::NODE_RECORD
            | attr::PORT_INFO_RECORD
            | attr::LINK_RECORD
            | attr::SWITCH_INFO_RECORD
            | attr::LFT_RECORD
            | attr::MFT_RECORD
            | attr::PKEY_TABLE_RECORD
            | attr::SL2VL_RECORD
            | attr::VLARB_RECORD
            | attr::SM_INFO_RECORD
            | attr::PATH_RECORD
            | attr::INFORM_INFO_RECORD => query,
            attr::MC_MEMBER_RECORD | attr::SERVICE_RECORD => m != method::GET_MULTI,
            attr::GUID_INFO_RECORD => query || m == method::SET || m == method::DELETE,
            attr::MULTI_PATH_RECORD => m == method::GET_MULTI,
            attr::INFORM_INFO => m == method::SET,
            _ => false,
        };
        if !supported {
            return reply(error(&req, mad_status::UNSUPPORTED_METHOD_ATTR));
        }
        if attribute == attr::CLASS_PORT_INFO {
            return reply(single(&req, &self.class_port_info()));
        }
        // The snapshot is taken under a short lock; the answer is built
        // outside it.
        let View { db, mft_records } = locked(&self.view).clone();
        let Some(db) = db else {
            return reply(error(&req, mad_status::BUSY));
        };
        let data = view.data();
        let all = |_: &[u8]| true;
        // Every record of a port is filtered by what the requester may
        // see; filtered before any count, so a table is whole.
        let sight = Sight::new(&db, slid, trusted);
        let seen = |r: &[u8]| sight.keyed(r);
        match attribute {
            attr::NODE_RECORD => {
                let t = normalise_lid(&db, data);
                reply(answer_records(
                    &req,
                    nr::PADDED_LEN,
                    select(&db.node_records, nr::COMPONENTS, mask, &t, seen),
                    max,
                ))
            }
            attr::PORT_INFO_RECORD => {
                let t = normalise_lid(&db, data);
                // CapabilityMask(2) components match ports that have at
                // least the bits asked for (IsPortInfoCapMaskMatchSupported).
                const CAP: u64 = 1 << 7;
                const CAP2: u64 = 1 << 53;
                let (cap, cap2) = (
                    pir::COMPONENTS[7].value(&t) as u32,
                    pir::COMPONENTS[53].value(&t) as u32,
                );
                let extra = |r: &[u8]| {
                    sight.keyed(r)
                        && (mask & CAP == 0 || pir::COMPONENTS[7].value(r) as u32 & cap == cap)
                        && (mask & CAP2 == 0 || pir::COMPONENTS[53].value(r) as u32 & cap2 == cap2)
                };
                let recs = select(
                    &db.port_records,
                    pir::COMPONENTS,
                    mask & !(CAP | CAP2),
                    &t,
                    extra,
                );
                reply(answer_records(&req, pir::PADDED_LEN, recs, max))
            }
            attr::LINK_RECORD => reply(answer_records(
                &req,
                lr::PADDED_LEN,
                select(&db.link_records, lr::COMPONENTS, mask, data, |r| sight.link(r)),
                max,
            )),
            attr::SWITCH_INFO_RECORD => {
                let recs = select(&db.switch_records, swr::COMPONENTS, mask, data, seen);
                reply(answer_records(&req, swr::PADDED_LEN, recs, max))
            }
            attr::LFT_RECORD => {
                let recs = db.lft_records(mask, data);
                reply(answer_records(&req, lftr::PADDED_LEN, select(&recs, lftr::COMPONENTS, mask, data, seen), max))
            }
            attr::MFT_RECORD => reply(answer_records(
                &req,
                mftr::PADDED_LEN,
                select(&mft_records, mftr::COMPONENTS, mask, data, seen),
                max,
            )),
            attr::GUID_INFO_RECORD if m == method::SET || m == method::DELETE => {
                reply(self.alias_change(&db, &req, m, mask, data))
            }
            attr::GUID_INFO_RECORD => {
                let t = normalise_lid(&db, data);
                let records = self.guid_records(&db);
                reply(answer_records(
                    &req,
                    gir::PADDED_LEN,
                    select(&records, gir::COMPONENTS, mask, &t, seen),
                    max,
                ))
            }
            attr::PKEY_TABLE_RECORD => {
                // P_Key tables are handed to trusted requesters only.
                if !trusted {
                    return reply(error(&req, status::REQ_INVALID));
                }
                let t = normalise_lid(&db, data);
                reply(answer_records(
                    &req,
                    pkr::PADDED_LEN,
                    select(&db.pkey_records, pkr::COMPONENTS, mask, &t, all),
                    max,
                ))
            }
            attr::SL2VL_RECORD => {
                // A CA port has one map, asked for by its LID: the port
                // numbers of the query do not narrow it (as in OpenSM,
                // whose osmtest asks with ports 0).
                let t = normalise_lid(&db, data);
                let mask = mask & !ca_port_components(&db, &t, mask, 0b110);
                reply(answer_records(
                    &req,
                    slr::PADDED_LEN,
                    select(&db.sl2vl_records(keyed_lid(mask, &t)), slr::COMPONENTS, mask, &t, seen),
                    max,
                ))
            }
            attr::VLARB_RECORD => {
                let t = normalise_lid(&db, data);
                let mask = mask & !ca_port_components(&db, &t, mask, 0b010);
                reply(answer_records(
                    &req,
                    var::PADDED_LEN,
                    select(&db.vlarb_records(keyed_lid(mask, &t)), var::COMPONENTS, mask, &t, seen),
                    max,
                ))
            }
            attr::SM_INFO_RECORD => {
                let own = self.sm_info_record(&db, trusted);
                let recs = select(
                    std::slice::from_ref(&own),
                    smir::COMPONENTS,
                    mask,
                    data,
                    all,
                );
                reply(answer_records(&req, smir::PADDED_LEN, recs, max))
            }
            attr::PATH_RECORD
                if mask & sm_mad::sa_path_record::component::DGID != 0 && data[8] == 0xFF =>
            {
                match self.multicast_path(&db, slid, data, mask, &sight) {
                    Ok(rec) => {
                        if m == method::GET {
                            reply(single(&req, &rec))
                        } else {
                            reply(answer_records(&req, 64, vec![&rec[..]], max))
                        }
                    }
                    Err(code) => reply(error(&req, code)),
                }
            }
            attr::PATH_RECORD => {
                // One record more than an answer may carry tells a table
                // too long to send (refused) from one that just fits.
                let max = max.min(path::MAX_RECORDS);
                let limit = if m == method::GET { 2 } else { max + 1 };
                // The partition filter goes first: a table cut before it
                // would lack paths the requester may see.
                match path::query(&db, data, mask, limit, &self.config.path, |g| sight.guid(g)) {
                    Ok(records) => {
                        let recs: Vec<&[u8]> = records.chunks(64).collect();
                        if m == method::GET && recs.len() > 1 {
                            // A Get asks for one path (NumbPath 1): the first.
                            reply(single(&req, recs[0]))
                        } else {
                            reply(answer_records(&req, 64, recs, max))
                        }
                    }
                    Err(code) => reply(error(&req, code)),
                }
            }
            attr::MULTI_PATH_RECORD => match self.multi_path(&db, data, mask, &sight) {
                Ok(records) => {
                    reply(table_with(&req, method::GET_MULTI_RESP, 64, &records))
                }
                Err(code) => reply(error(&req, code)),
            },
            attr::INFORM_INFO => {
                let gid = db.end_by_lid(slid).map_or(0, |e| db.gid(e));
                if gid == 0 {
                    return reply(error(&req, status::REQ_INVALID));
                }
                // C15-0.2-1.16: subscriptions to the security traps
                // (256-259) are for trusted requesters only.
                let security = sm_mad::sa_inform_info::Packet::new_checked(data)
                    .is_ok_and(|p| p.is_generic() != 0 && (256..=259).contains(&p.trap_number()));
                if security && !trusted {
                    return reply(error(&req, status::REQ_INVALID));
                }
                let result = Arc::make_mut(&mut locked(&self.subs)).set(
                    gid,
                    slid,
                    sqpn,
                    data,
                    self.config.max_subscriptions_per_port,
                );
                match result {
                    Ok(info) => {
                        let mut rec = [0u8; sm_mad::sa_inform_info::LEN];
                        info.emit(&mut sm_mad::sa_inform_info::Packet::new_unchecked(
                            &mut rec[..],
                        ));
                        reply(single(&req, &rec))
                    }
                    Err(code) => reply(error(&req, code)),
                }
            }
            attr::INFORM_INFO_RECORD => {
                let subs = self.subscriptions();
                let recs = subs.records(data, mask, trusted);
                let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
                reply(answer_records(
                    &req,
                    sm_mad::sa_inform_info::RECORD_PADDED_LEN,
                    refs,
                    max,
                ))
            }
            attr::MC_MEMBER_RECORD => self.mc_member(&db, slid, trusted, &req, mask),
            attr::SERVICE_RECORD => reply(self.service(&db, slid, trusted, &req, mask)),
            _ => reply(error(&req, mad_status::UNSUPPORTED_METHOD_ATTR)),
        }
    }

    /// SubnAdmGetMulti(MultiPathRecord): PathRecords between every source
    /// and destination GID named, NumbPath of them at most in all.
    fn multi_path(&self, db: &SaDb, data: &[u8], mask: u64, sight: &Sight) -> Result<Vec<u8>, u16> {
        use mpr::component as c;
        if mask & (c::SGID_COUNT | c::DGID_COUNT) != (c::SGID_COUNT | c::DGID_COUNT) {
            return Err(status::INSUFFICIENT_COMPONENTS);
        }
        let packet = mpr::Packet::new_checked(data).map_err(|_| status::REQ_INVALID)?;
        let q = mpr::Repr::parse(&packet).map_err(|_| status::REQ_INVALID)?;
        if q.sgids.is_empty() || q.dgids.is_empty() {
            return Err(status::REQ_INVALID);
        }
        if q.sgids
            .iter()
            .chain(q.dgids.iter())
            .any(|g| g >> 120 == 0xFF)
        {
            return Err(status::REQ_INVALID);
        }
        let mut template = [0u8; 64];
        template[44..57].copy_from_slice(packet.path_fields());
        let pr_mask = mpr::path_components(mask & !c::NUMB_PATH)
            | sm_mad::sa_path_record::component::SGID
            | sm_mad::sa_path_record::component::DGID;
        // Without NumbPath every path is asked for: one more than an answer
        // may carry tells a table too long to send.
        let max = self.config.max_records.min(path::MAX_RECORDS);
        let limit = if mask & c::NUMB_PATH != 0 {
            usize::from(q.numb_path).min(max)
        } else {
            max + 1
        };
        let mut out = Vec::new();
        for &s in &q.sgids {
            for &d in &q.dgids {
                let left = limit.saturating_sub(out.len() / 64);
                if left == 0 {
                    break;
                }
                template[24..40].copy_from_slice(&s.to_be_bytes());
                template[8..24].copy_from_slice(&d.to_be_bytes());
                match path::query(db, &template, pr_mask, left.min(1), &self.config.path, |g| sight.guid(g)) {
                    Ok(recs) => out.extend_from_slice(&recs),
                    Err(status::NO_RECORDS) => {}
                    Err(code) => return Err(code),
                }
            }
        }
        if out.len() / 64 > max {
            return Err(status::NO_RESOURCES);
        }
        Ok(out)
    }

    /// A PathRecord to a multicast group (DGID = its MGID): addressed to
    /// its MLID, with the group's SL, MTU, rate, lifetime and P_Key; from
    /// the SGID or SLID given, else from the requester. A group of a
    /// partition an untrusted requester is not in is not there for it.
    fn multicast_path(
        &self,
        db: &SaDb,
        slid: u16,
        data: &[u8],
        mask: u64,
        sight: &Sight,
    ) -> Result<[u8; 64], u16> {
        use sm_mad::sa_path_record::{component as pc, selector, Packet, Repr};
        let q = Repr::parse(&Packet::new_checked(data).map_err(|_| status::REQ_INVALID)?)
            .map_err(|_| status::REQ_INVALID)?;
        let source = if mask & pc::SGID != 0 {
            db.end_by_gid(q.sgid).ok_or(status::INVALID_GID)?
        } else if mask & pc::SLID != 0 {
            db.end_by_lid(q.slid).ok_or(status::NO_RECORDS)?
        } else {
            db.end_by_lid(slid).ok_or(status::REQ_INVALID)?
        };
        let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let group = groups
            .get(&q.dgid.to_be_bytes())
            .ok_or(status::NO_RECORDS)?;
        let p = &group.params;
        if !sight.in_partition(p.pkey) {
            return Err(status::NO_RECORDS);
        }
        if (mask & pc::SL != 0 && q.sl != p.sl) || (mask & pc::PKEY != 0 && q.pkey != p.pkey) {
            return Err(status::NO_RECORDS);
        }
        let rec = Repr {
            dgid: q.dgid,
            sgid: db.gid(source),
            dlid: group.mlid,
            slid: if mask & pc::SLID != 0 {
                q.slid
            } else {
                source.lid
            },
            flow_label: p.flow_label,
            hop_limit: p.hop_limit,
            tclass: p.tclass,
            pkey: p.pkey,
            sl: p.sl,
            mtu_selector: selector::EXACTLY,
            mtu: p.mtu,
            rate_selector: selector::EXACTLY,
            rate: p.rate,
            packet_life_time_selector: selector::EXACTLY,
            packet_life_time: p.packet_life,
            ..Default::default()
        };
        let mut out = [0u8; 64];
        rec.emit(&mut Packet::new_unchecked(&mut out[..]));
        Ok(out)
    }

    /// This SM's SMInfoRecord: it is the master (the SA runs on the master
    /// only); its SM_Key shows to trusted requesters only.
    fn sm_info_record(&self, db: &SaDb, trusted: bool) -> [u8; smir::PADDED_LEN] {
        let guid = db.end_by_lid(db.sm_lid).map_or(0, |e| e.guid);
        let repr = smir::Repr {
            lid: db.sm_lid,
            guid,
            sm_key: if trusted { self.config.sm_key } else { 0 },
            act_count: 0,
            priority: self.config.sm_priority,
            sm_state: 3,
        };
        let mut rec = [0u8; smir::PADDED_LEN];
        repr.emit(&mut smir::Packet::new_unchecked(&mut rec[..]));
        rec
    }

    /// ServiceRecord Set, Delete, Get and GetTable.
    fn service(&self, db: &SaDb, slid: u16, trusted: bool, req: &[u8], mask: u64) -> Vec<u8> {
        use sm_mad::sa_service_record::LEN;
        let view = request_view(req);
        let data = view.data();
        let by = service::Requester {
            guid: db.end_by_lid(slid).map(|e| e.guid),
            trusted,
        };
        let now = std::time::Instant::now();
        let mut services = locked(&self.services);
        let result = match method_of(req) {
            method::SET => services.set(db, by, &self.config.services, data, mask, now),
            method::DELETE => services.delete(by, data, mask, now),
            _ => {
                let recs = services.query(data, mask, trusted, now);
                drop(services);
                let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
                return answer_records(req, LEN, refs, self.config.max_records);
            }
        };
        drop(services);
        match result {
            Ok(rec) => single(req, &rec),
            Err(code) => error(req, code),
        }
    }

    /// GUIDInfoRecords: the database's (block 0 of every end port), with
    /// the blocks of the ports hosts gave alias GUIDs as the SA holds them.
    fn guid_records(&self, db: &SaDb) -> Vec<[u8; gir::PADDED_LEN]> {
        let aliases = locked(&self.aliases);
        let mut records: Vec<[u8; gir::PADDED_LEN]> = db
            .guid_records
            .iter()
            .filter(|r| {
                let lid = u16::from_be_bytes([r[0], r[1]]);
                db.end_by_lid(lid).is_none_or(|e| aliases.blocks(e.guid) == 0)
            })
            .copied()
            .collect();
        for (port, _) in aliases.tables() {
            let Some(e) = db.end_by_guid(port) else { continue };
            for block_num in 0..aliases.blocks(port) {
                let Some(guids) = aliases.block(port, block_num as u8) else { continue };
                let mut rec = [0u8; gir::PADDED_LEN];
                gir::Repr { lid: e.lid, block_num: block_num as u8, guids }.emit(&mut gir::Packet::new_unchecked(&mut rec[..]));
                records.push(rec);
            }
        }
        records.sort_by_key(|r| (u16::from_be_bytes([r[0], r[1]]), r[2]));
        records
    }

    /// GUIDInfoRecord Set or Delete (OpenSM's rules: [`super::alias`]):
    /// LID and block must be given; the answer is the block afterwards.
    fn alias_change(&self, db: &SaDb, req: &[u8], m: u8, mask: u64, data: &[u8]) -> Vec<u8> {
        const LID_AND_BLOCK: u64 = 0b11;
        if mask & LID_AND_BLOCK != LID_AND_BLOCK {
            return error(req, status::INSUFFICIENT_COMPONENTS);
        }
        let Ok(rec) = gir::Packet::new_checked(data).and_then(|p| gir::Repr::parse(&p)) else {
            return error(req, status::REQ_INVALID);
        };
        let Some(end) = db.end_by_lid(rec.lid) else {
            return error(req, status::NO_RECORDS);
        };
        // GUID i of the block is component 4 + i.
        let named = (mask >> 4) as u8;
        let mut aliases = locked(&self.aliases);
        let result = if m == method::SET {
            aliases.set(end.guid, end.guid_cap, rec.block_num, named, rec.guids)
        } else {
            aliases.delete(end.guid, end.guid_cap, rec.block_num, named)
        };
        drop(aliases);
        match result {
            Ok(guids) => {
                let mut out = [0u8; gir::PADDED_LEN];
                gir::Repr { lid: end.lid, block_num: rec.block_num, guids }.emit(&mut gir::Packet::new_unchecked(&mut out[..]));
                single(req, &out)
            }
            Err(code) => error(req, code),
        }
    }

    fn mc_member(&self, db: &SaDb, slid: u16, trusted: bool, req: &[u8], mask: u64) -> Answer {
        use sm_mad::sa_mc_member_record::{Packet, PADDED_LEN};
        let view = request_view(req);
        let data = view.data();
        let by = Requester {
            guid: db.end_by_lid(slid).map(|e| e.guid),
            trusted,
        };
        let mut groups = locked(&self.groups);
        let result = match method_of(req) {
            method::SET => {
                let rules = mcmember::JoinRules {
                    join_validation: self.config.mcgroup_join_validation,
                    ipoib_creation_validation: self.config.ipoib_mcgroup_creation_validation,
                };
                mcmember::join(db, &mut groups, by, &self.config.mcast, rules, data, mask)
            }
            method::DELETE => mcmember::leave(db, &mut groups, by, data, mask),
            _ => {
                let sight = Sight::new(db, slid, trusted);
                let recs = mcmember::query(&groups, data, mask, trusted, |pkey| sight.in_partition(pkey));
                drop(groups);
                let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
                return Answer {
                    reply: Some(answer_records(req, PADDED_LEN, refs, self.config.max_records)),
                    ..Default::default()
                };
            }
        };
        drop(groups);
        match result {
            Ok(change) => {
                let mut rec = [0u8; PADDED_LEN];
                change.record.emit(&mut Packet::new_unchecked(&mut rec[..]));
                let mut reports = Vec::new();
                let trap = if change.created {
                    Some(sm_mad::notice::trap::MCAST_GROUP_CREATED)
                } else if change.deleted {
                    Some(sm_mad::notice::trap::MCAST_GROUP_DELETED)
                } else {
                    None
                };
                if let Some(number) = trap {
                    let sa_gid = db.end_by_lid(db.sm_lid).map_or(0, |e| db.gid(e));
                    // Only subscribers in the group's partition learn of it.
                    let pkey = change.record.pkey;
                    reports = Arc::make_mut(&mut locked(&self.subs)).reports(
                        number,
                        change.record.mgid,
                        0xFFFF,
                        db.sm_lid,
                        sa_gid,
                        |s| db.has_pkey(s.subscriber_gid as u64, pkey),
                    );
                }
                Answer {
                    reply: Some(single(req, &rec)),
                    mcast_changed: change.changed,
                    reports,
                }
            }
            Err(code) => Answer {
                reply: Some(error(req, code)),
                ..Default::default()
            },
        }
    }

    fn class_port_info(&self) -> [u8; cpi::LEN] {
        let repr = cpi::Repr {
            base_version: mad::BASE_VERSION,
            class_version: mad::class_version::SUBN_ADM,
            // As OpenSM with multicast on: UD multicast groups are served
            // (MCMemberRecord joins, MFTs). Not IsMultiPathSupported:
            // that promises TraceRecord and requests over dual-sided
            // RMPP, neither of which this SA answers.
            capability_mask: cpi::capability::GET_SET_NOTICE
                | if self.config.multicast { cpi::capability::UD_MULTICAST } else { 0 }
                | cpi::capability::PORT_INFO_CAPMASK_MATCH,
            capability_mask2: cpi::capability2::FULL_PORT_INFO_RECORD
                | cpi::capability2::EXTENDED_SPEEDS,
            resp_time_value: self.config.resp_time_value,
            redirect_qp: 1,
            redirect_qkey: 0x8001_0000,
            ..Default::default()
        };
        let mut out = [0u8; cpi::LEN];
        repr.emit(&mut cpi::Packet::new_unchecked(&mut out[..]));
        out
    }
}

/// `ports` (component bits of port numbers) when the query names a CA
/// port by LID, whose records carry port 0; else nothing.
fn ca_port_components(db: &SaDb, template: &[u8], mask: u64, ports: u64) -> u64 {
    if mask & 1 == 0 || template.len() < 2 {
        return 0;
    }
    let lid = u16::from_be_bytes([template[0], template[1]]);
    match db.end_by_lid(lid) {
        Some(e) if !e.switch => ports,
        _ => 0,
    }
}

/// The query template with a LID of an LMC range replaced by the port's
/// base LID, by which its records are keyed.
/// The LID a query's record template names, when its mask gives one
/// (component 0).
fn keyed_lid(mask: u64, template: &[u8]) -> Option<u16> {
    (mask & 1 != 0 && template.len() >= 2).then(|| u16::from_be_bytes([template[0], template[1]]))
}

fn normalise_lid(db: &SaDb, data: &[u8]) -> Vec<u8> {
    let mut t = data.to_vec();
    if t.len() >= 2 {
        let lid = u16::from_be_bytes([t[0], t[1]]);
        if let Some(e) = db.end_by_lid(lid) {
            if !e.switch {
                t[..2].copy_from_slice(&e.lid.to_be_bytes());
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_table_status(sa: &mut Sa) -> u16 {
        let mut mad = vec![0u8; 256];
        sa::Repr { method: method::GET_TABLE, transaction_id: 7, attribute_id: attr::NODE_RECORD, ..Default::default() }
            .emit(&mut sa::Packet::new_unchecked(&mut mad[..]));
        let answer = sa.handle(1, 1, &mad).reply.expect("an answer");
        sa::Packet::new_unchecked(&answer[..]).status()
    }

    #[test]
    fn a_standby_sa_answers_busy_until_published_again() {
        let mut sa = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig::default());
        assert_eq!(node_table_status(&mut sa), mad_status::BUSY);
        sa.publish(SaDb::empty());
        assert_ne!(node_table_status(&mut sa), mad_status::BUSY);
        sa.stand_down();
        assert_eq!(node_table_status(&mut sa), mad_status::BUSY);
        // Back as master: nothing to compare with, so no Report.
        let (reports, _) = sa.publish(SaDb::empty());
        assert!(reports.is_empty());
        assert_ne!(node_table_status(&mut sa), mad_status::BUSY);
    }
}
