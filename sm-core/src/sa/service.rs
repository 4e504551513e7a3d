//! ServiceRecords (IBA 15.2.5.14): services ports register with the SA
//! (Set), others find (Get/GetTable) and their owners withdraw (Delete).
//!
//! A record is named by its RID (ServiceID, ServiceGID, ServiceP_Key); a
//! Set with the RID of a record replaces it. ServiceLease is in seconds,
//! 0xFFFFFFFF (or no lease in the ComponentMask) never expires; an
//! expired record is gone for every query from the moment it expires,
//! answers carry the seconds left. A record for a ServiceGID may be set,
//! replaced or deleted only by the port of that GID or by a trusted
//! requester: no host can register a service on another port's GID (and
//! with it keep the real owner from registering or withdrawing its own).
//! A port holds at most [`ServiceLimits::per_port`] records, so no host
//! can fill the SA's memory.
//!
//! Time is passed in (`now`) so that leases are tested without waiting.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sm_mad::sa::{self, status};
use sm_mad::sa_service_record::{component as c, Packet, Repr, COMPONENTS, INFINITE_LEASE, LEN};

use super::db::SaDb;

/// The default partition's P_Key, given to a record set without one.
const DEFAULT_PKEY: u16 = 0xFFFF;

/// Bounds on registered services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceLimits {
    /// Most records one port may hold.
    pub per_port: usize,
}

impl Default for ServiceLimits {
    fn default() -> Self {
        Self { per_port: 64 }
    }
}

/// Who asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requester {
    /// GUID of the requester's port (`None`: not a port of the subnet).
    pub guid: Option<u64>,
    /// The request carried the SA's SM_Key.
    pub trusted: bool,
}

#[derive(Debug, Clone)]
struct Entry {
    record: Repr,
    /// Port GUID of the registering port.
    owner: u64,
    /// `None`: never expires.
    expires: Option<Instant>,
    /// Wall-clock seconds (Unix time) of the Set that stored it: what a
    /// saved SA state counts the lease from (OpenSM's `modified_time`).
    modified_time: u32,
}

/// A registered service as a saved SA state holds it (OpenSM's sa_db
/// file): the record with its full lease, and the wall-clock second
/// (Unix time) the lease runs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// The record as registered (its ServiceLease the full lease).
    pub record: Repr,
    /// Unix time, in seconds, of the registration.
    pub modified_time: u32,
    /// The lease in seconds ([`INFINITE_LEASE`]: never expires).
    pub lease_period: u32,
}

/// Seconds since the Unix epoch, now (0 on a clock before it).
pub fn unix_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs().min(u64::from(u32::MAX)) as u32)
}

type Rid = (u64, u128, u16);

/// The registered services.
#[derive(Debug, Clone, Default)]
pub struct Services {
    entries: BTreeMap<Rid, Entry>,
}

/// The record of `data` with its P_Key defaulted when the mask does not
/// give one (the RID every method then uses).
fn parse(data: &[u8], mask: u64) -> Result<Repr, u16> {
    let p = Packet::new_checked(data).map_err(|_| status::REQ_INVALID)?;
    let mut r = Repr::parse(&p).map_err(|_| status::REQ_INVALID)?;
    if mask & c::PKEY == 0 {
        r.service_pkey = DEFAULT_PKEY;
    }
    Ok(r)
}

impl Services {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records registered and not expired at `now`.
    pub fn len(&self, now: Instant) -> usize {
        self.entries.values().filter(|e| live(e, now)).count()
    }

    /// Whether no record is live at `now`.
    pub fn is_empty(&self, now: Instant) -> bool {
        self.len(now) == 0
    }

    /// Drops expired records.
    pub fn expire(&mut self, now: Instant) {
        self.entries.retain(|_, e| live(e, now));
    }

    /// Drops the records of ports that left the fabric.
    pub fn retain_owners(&mut self, keep: impl Fn(u64) -> bool) {
        self.entries.retain(|_, e| keep(e.owner));
    }

    /// SubnAdmSet(ServiceRecord): registers or replaces the record of
    /// `data`. Returns the record as stored.
    pub fn set(
        &mut self,
        db: &SaDb,
        by: Requester,
        limits: &ServiceLimits,
        data: &[u8],
        mask: u64,
        now: Instant,
    ) -> Result<[u8; LEN], u16> {
        self.expire(now);
        if mask & (c::ID | c::GID) != (c::ID | c::GID) {
            return Err(status::INSUFFICIENT_COMPONENTS);
        }
        let owner = by.guid.ok_or(status::REQ_INVALID)?;
        let mut r = parse(data, mask)?;
        // The service must live on a port of this subnet, in the one
        // partition this SM manages. The port is found by the GID's
        // interface ID alone, as OpenSM does: osmtest (and clients built
        // like it) send the prefix in host byte order.
        if db.end_by_guid(r.service_gid as u64).is_none() {
            return Err(status::INVALID_GID);
        }
        if !by.trusted && r.service_gid as u64 != owner {
            return Err(status::DENIED);
        }
        if r.service_pkey & 0x7FFF != DEFAULT_PKEY & 0x7FFF {
            return Err(status::REQ_INVALID);
        }
        if mask & c::LEASE == 0 {
            r.service_lease = INFINITE_LEASE;
        }
        let rid = r.rid();
        match self.entries.get(&rid) {
            Some(_) => {}
            None => {
                let held = self.entries.values().filter(|e| e.owner == owner).count();
                if held >= limits.per_port {
                    tracing::debug!(owner = format_args!("{owner:#x}"), held, "ServiceRecord quota reached");
                    return Err(status::NO_RESOURCES);
                }
            }
        }
        let expires = (r.service_lease != INFINITE_LEASE)
            .then(|| now + Duration::from_secs(u64::from(r.service_lease)));
        self.entries.insert(
            rid,
            Entry {
                record: r,
                owner,
                expires,
                modified_time: unix_now(),
            },
        );
        Ok(emit(&r))
    }

    /// The live records at `now`, to save.
    pub fn stored(&self, now: Instant) -> Vec<Stored> {
        self.entries
            .values()
            .filter(|e| live(e, now))
            .map(|e| Stored {
                record: e.record,
                modified_time: e.modified_time,
                lease_period: e.record.service_lease,
            })
            .collect()
    }

    /// Puts back a saved record, its lease counted from its
    /// `modified_time` against the wall clock `wall_now` (Unix seconds):
    /// a record whose lease ran out meanwhile is not restored (returns
    /// false), nor one whose RID is registered already. Its owner is the
    /// port of its ServiceGID (a file does not say who registered it).
    pub fn restore(&mut self, saved: &Stored, now: Instant, wall_now: u32) -> bool {
        let expires = if saved.lease_period == INFINITE_LEASE {
            None
        } else {
            let end = u64::from(saved.modified_time) + u64::from(saved.lease_period);
            let Some(left) = end.checked_sub(u64::from(wall_now)).filter(|&l| l > 0) else {
                return false;
            };
            Some(now + Duration::from_secs(left))
        };
        let mut record = saved.record;
        record.service_lease = saved.lease_period;
        let rid = record.rid();
        if self.entries.contains_key(&rid) {
            return false;
        }
        self.entries.insert(
            rid,
            Entry {
                record,
                owner: record.service_gid as u64,
                expires,
                modified_time: saved.modified_time,
            },
        );
        true
    }

    /// SubnAdmDelete(ServiceRecord): removes the record with the RID of
    /// `data` (whatever else the mask names, as OpenSM), when `by` is the
    /// port of its ServiceGID or trusted. Returns it.
    pub fn delete(&mut self, by: Requester, data: &[u8], mask: u64, now: Instant) -> Result<[u8; LEN], u16> {
        self.expire(now);
        let rid = parse(data, mask)?.rid();
        let e = self.entries.get(&rid).ok_or(status::NO_RECORDS)?;
        if !by.trusted && by.guid != Some(e.record.service_gid as u64) {
            return Err(status::DENIED);
        }
        let e = self.entries.remove(&rid).ok_or(status::NO_RECORDS)?;
        Ok(answer(&e, now, by.trusted))
    }

    /// SubnAdmGet/GetTable(ServiceRecord): live records matching `data`
    /// under `mask`, with the lease left. ServiceKeys show to trusted
    /// requesters only (they still match for everyone).
    pub fn query(&self, data: &[u8], mask: u64, trusted: bool, now: Instant) -> Vec<[u8; LEN]> {
        let mut template = [0u8; LEN];
        let n = data.len().min(LEN);
        template[..n].copy_from_slice(&data[..n]);
        // The lease left is not something to select by.
        let mask = mask & !c::LEASE;
        self.entries
            .values()
            .filter(|e| live(e, now))
            .filter(|e| sa::matches(COMPONENTS, mask, &template, &emit(&e.record)))
            .map(|e| answer(e, now, trusted))
            .collect()
    }
}

fn live(e: &Entry, now: Instant) -> bool {
    e.expires.is_none_or(|t| t > now)
}

fn emit(r: &Repr) -> [u8; LEN] {
    let mut out = [0u8; LEN];
    r.emit(&mut Packet::new_unchecked(&mut out[..]));
    out
}

/// The record as answered: the lease left (rounded up), the key hidden
/// from untrusted requesters.
fn answer(e: &Entry, now: Instant, trusted: bool) -> [u8; LEN] {
    let mut r = e.record;
    if let Some(t) = e.expires {
        let left = t.saturating_duration_since(now);
        let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        r.service_lease = secs.min(u64::from(INFINITE_LEASE - 1)) as u32;
    }
    if !trusted {
        r.service_key = 0;
    }
    emit(&r)
}
