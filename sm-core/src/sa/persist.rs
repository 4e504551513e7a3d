//! The SA's registrations saved to a file and read back: multicast groups
//! with their members and JoinStates, ServiceRecords with their leases,
//! InformInfo subscriptions. The file is OpenSM's sa_db file
//! (`opensm-sa.dump`, read back through `sa_db_file`), line for line, so a
//! site moving from OpenSM keeps its file, and a file smcore writes is one
//! OpenSM reads:
//!
//! ```text
//! MC Group 0xc000  (well known): mgid=0x..:0x.. port_gid=0x..:0x.. qkey=0x.. mlid=0x..
//!     mtu=0x.. tclass=0x.. pkey=0x.. rate=0x.. pkt_life=0x.. sl_flow_hop=0x.. scope_state=0x.. proxy_join=0x..
//! mcm_port: port_gid=0x..:0x.. scope_state=0x.. proxy_join=0x..
//! InformInfo Record: subscriber_gid=.. subscriber_enum=.. InformInfo: gid=.. ... rep_addr: lid=.. ... sl=..
//! Service Record: id=.. gid=.. pkey=.. lease=.. key=.. name='..' data8=.. ... modified_time=.. lease_period=..
//! ```
//!
//! (each record on one line, records separated by a blank line). A
//! service's lease runs from `modified_time`, wall-clock Unix seconds, so
//! a record whose lease ran out while the SM was down is not restored.
//! GUIDInfo Records (alias GUIDs) are read past: alias GUIDs are not kept
//! here.
//!
//! A file is written whole to a temporary file in the same directory,
//! synced to disk when asked (`fsync_high_avail_files`), then renamed over
//! the old one: a crash leaves the old file or the new one, never half of
//! one. A file that cannot be read is refused whole with its name and the
//! line at fault ([`PersistError`]); the caller then starts with an empty
//! SA (hosts re-register on ClientReregister).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sm_mad::sa_inform_info::Repr as InfoRepr;
use sm_mad::sa_service_record::{Repr as ServiceRepr, NAME_LEN};

use super::handler::{locked, Sa};
use super::inform::Subscription;
use super::service::{self, Stored};
use crate::mcast::{McGroup, McGroupParams, McMember};

/// The Q_Key OpenSM records as a subscriber's Report address (the GSI's).
const GSI_QKEY: u32 = 0x8001_0000;
/// MTU, rate and lifetime selector "exactly" in the top two bits, as
/// OpenSM keeps a group's record.
const EXACTLY: u8 = 2 << 6;

/// Why a saved SA state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The file could not be opened, read, written or renamed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A line is not a record of the format.
    #[error("{path}:{line}: {what}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Line number, from 1.
        line: usize,
        /// What is wrong there.
        what: String,
    },
}

/// The registrations of an SA, as saved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaState {
    /// Multicast groups with their members.
    pub groups: Vec<McGroup>,
    /// Registered services.
    pub services: Vec<Stored>,
    /// InformInfo subscriptions.
    pub subscriptions: Vec<Subscription>,
}

/// What [`Sa::restore_state`] put back, and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Groups restored (with their members).
    pub groups: usize,
    /// Services restored.
    pub services: usize,
    /// Subscriptions restored.
    pub subscriptions: usize,
    /// Records not restored and why (a taken MLID, an expired lease...):
    /// their hosts must register again.
    pub skipped: Vec<String>,
}

fn hi_lo(v: u128) -> String {
    format!("0x{:016x}:0x{:016x}", (v >> 64) as u64, v as u64)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_be_bytes(b)
}

impl SaState {
    /// The end ports (port GUIDs) with a registration here: members of a
    /// group, owners of a service, subscribers. A new master that restores
    /// this state need not ask them to re-register.
    pub fn known_ports(&self) -> std::collections::HashSet<u64> {
        let members = self.groups.iter().flat_map(|g| g.members.values().map(|m| m.port_guid));
        let services = self.services.iter().map(|s| s.record.service_gid as u64);
        let subscribers = self.subscriptions.iter().map(|s| s.subscriber_gid as u64);
        members.chain(services).chain(subscribers).collect()
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for g in &self.groups {
            let p = &g.params;
            let (creator_gid, creator_state, creator_proxy) = g
                .members
                .values()
                .next()
                .map_or((0, 0, false), |m| (u128::from_be_bytes(m.port_gid), m.join_state, m.proxy));
            let sl_flow_hop = (u32::from(p.sl) << 28) | ((p.flow_label & 0xF_FFFF) << 8) | u32::from(p.hop_limit);
            let _ = write!(
                out,
                "MC Group 0x{:04x} {}: mgid={} port_gid={} qkey=0x{:08x} mlid=0x{:04x} mtu=0x{:02x} tclass=0x{:02x} \
                 pkey=0x{:04x} rate=0x{:02x} pkt_life=0x{:02x} sl_flow_hop=0x{:08x} scope_state=0x{:02x} proxy_join=0x{:x}\n\n",
                g.mlid,
                if g.well_known { " (well known)" } else { "" },
                hi_lo(u128::from_be_bytes(p.mgid)),
                hi_lo(creator_gid),
                p.qkey,
                g.mlid,
                EXACTLY | p.mtu,
                p.tclass,
                p.pkey,
                EXACTLY | p.rate,
                EXACTLY | p.packet_life,
                sl_flow_hop,
                (p.scope << 4) | (creator_state & 0x0F),
                u8::from(creator_proxy),
            );
            for m in g.members.values() {
                let _ = write!(
                    out,
                    "mcm_port: port_gid={} scope_state=0x{:02x} proxy_join=0x{:x}\n\n",
                    hi_lo(u128::from_be_bytes(m.port_gid)),
                    (p.scope << 4) | (m.join_state & 0x0F),
                    u8::from(m.proxy),
                );
            }
        }
        for (n, s) in self.subscriptions.iter().enumerate() {
            let i = &s.info;
            let _ = write!(
                out,
                "InformInfo Record: subscriber_gid={} subscriber_enum=0x{:x} InformInfo: gid={} lid_range_begin=0x{:x} \
                 lid_range_end=0x{:x} is_generic=0x{:x} subscribe=0x{:x} trap_type=0x{:x} trap_num=0x{:x} \
                 qpn_resp_time_val=0x{:x} node_type=0x{:06x} rep_addr: lid=0x{:04x} path_bits=0x00 static_rate=0x00 \
                 remote_qp=0x{:08x} remote_qkey=0x{:08x} pkey_ix=0x0000 sl=0x00\n\n",
                hi_lo(s.subscriber_gid),
                n,
                hi_lo(i.gid),
                i.lid_range_begin,
                i.lid_range_end,
                i.is_generic,
                i.subscribe,
                i.trap_type,
                i.trap_number,
                ((i.qpn & 0xFF_FFFF) << 8) | u32::from(i.resp_time_value & 0x1F),
                i.producer_type & 0xFF_FFFF,
                s.lid,
                s.qpn,
                GSI_QKEY,
            );
        }
        for s in &self.services {
            let r = &s.record;
            let name_len = r.service_name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
            let name: String = r.service_name[..name_len]
                .iter()
                .map(|&b| if b.is_ascii_graphic() && b != b'\'' || b == b' ' { b as char } else { '?' })
                .collect();
            let d = &r.service_data;
            let _ = write!(
                out,
                "Service Record: id=0x{:016x} gid={} pkey=0x{:x} lease=0x{:x} key={} name='{}' \
                 data8=0x{:016x}:0x{:016x} data16=0x{:016x}:0x{:016x} data32=0x{:016x}:0x{:016x} \
                 data64=0x{:016x}:0x{:016x} modified_time=0x{:x} lease_period=0x{:x}\n\n",
                r.service_id,
                hi_lo(r.service_gid),
                r.service_pkey,
                r.service_lease,
                hi_lo(r.service_key),
                name,
                u64_at(d, 0),
                u64_at(d, 8),
                u64_at(d, 16),
                u64_at(d, 24),
                u64_at(d, 32),
                u64_at(d, 40),
                u64_at(d, 48),
                u64_at(d, 56),
                s.modified_time,
                s.lease_period,
            );
        }
        out
    }

    /// Reads the text of the file `path` (named in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, PersistError> {
        let mut state = SaState::default();
        // The group whose mcm_port lines follow.
        let mut group: Option<McGroup> = None;
        let flush = |group: &mut Option<McGroup>, state: &mut SaState| {
            if let Some(g) = group.take() {
                state.groups.push(g);
            }
        };
        for (n, raw) in text.lines().enumerate() {
            let error = |what: String| PersistError::Parse {
                path: path.to_path_buf(),
                line: n + 1,
                what,
            };
            let line = raw.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut f = Fields { rest: line };
            if line.starts_with("MC Group") {
                flush(&mut group, &mut state);
                group = Some(f.group().map_err(error)?);
            } else if line.starts_with("mcm_port") {
                let g = group
                    .as_mut()
                    .ok_or_else(|| error("mcm_port line outside an MC Group".into()))?;
                let m = f.member().map_err(error)?;
                g.members.insert(m.port_gid, m);
            } else if line.starts_with("Service Record:") {
                flush(&mut group, &mut state);
                state.services.push(f.service().map_err(error)?);
            } else if line.starts_with("InformInfo Record:") {
                flush(&mut group, &mut state);
                state.subscriptions.push(f.inform().map_err(error)?);
            } else if line.starts_with("GUIDInfo Record:") {
                flush(&mut group, &mut state);
            } else {
                let shown: String = line.chars().take(40).collect();
                return Err(error(format!("not a record of an SA database file: {shown:?}")));
            }
        }
        flush(&mut group, &mut state);
        Ok(state)
    }

    /// Reads the file at `path`.
    pub fn load(path: &Path) -> Result<Self, PersistError> {
        let text = std::fs::read(path).map_err(|source| PersistError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let text = String::from_utf8(text).map_err(|e| {
            let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count();
            PersistError::Parse {
                path: path.to_path_buf(),
                line,
                what: "not text (invalid UTF-8)".into(),
            }
        })?;
        Self::parse(&text, path)
    }

    /// Writes the file at `path` atomically: a temporary file in the same
    /// directory, synced to disk when `fsync` (OpenSM's
    /// `fsync_high_avail_files`), renamed over `path`. Readable by its
    /// owner only, as OpenSM makes it.
    pub fn save(&self, path: &Path, fsync: bool) -> Result<(), PersistError> {
        write_atomic(path, self.render().as_bytes(), fsync)
    }
}

/// Writes `bytes` to `path` through a temporary file in the same
/// directory and a rename, synced to disk when `fsync`.
pub fn write_atomic(path: &Path, bytes: &[u8], fsync: bool) -> Result<(), PersistError> {
    let io = |source| PersistError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        if fsync {
            file.sync_all()?;
        }
        drop(file);
        std::fs::rename(&tmp, path)?;
        if fsync {
            // The rename itself reaches the disk with its directory.
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::File::open(dir)?.sync_all()?;
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// The rest of one line, read field by field as OpenSM's loader does: a
/// field is found by its name ahead of the cursor, its value is hex up to
/// a space or a colon.
struct Fields<'a> {
    rest: &'a str,
}

impl Fields<'_> {
    fn hex(&mut self, name: &str, bits: u32) -> Result<u64, String> {
        let at = self.rest.find(name).ok_or_else(|| format!("no \"{}\" field", name.trim()))?;
        let value = &self.rest[at + name.len()..];
        let end = value.find(|c: char| c.is_whitespace() || c == ':').unwrap_or(value.len());
        let digits = &value[..end];
        let v = u64::from_str_radix(digits, 16)
            .ok()
            .filter(|&v| bits == 64 || v >> bits == 0)
            .ok_or_else(|| format!("\"{}\" is not a {bits}-bit hex number: {digits:?}", name.trim()))?;
        self.rest = &value[end..];
        Ok(v)
    }

    fn gid(&mut self, name: &str) -> Result<u128, String> {
        let hi = self.hex(name, 64)?;
        let field = name.trim().trim_end_matches("=0x");
        let lo = self.hex(":0x", 64).map_err(|e| format!("{field} (lower half): {e}"))?;
        Ok((u128::from(hi) << 64) | u128::from(lo))
    }

    fn group(&mut self) -> Result<McGroup, String> {
        let mlid = self.hex(" 0x", 16)? as u16;
        let well_known = self.rest.split(':').next().is_some_and(|s| s.contains("well known"));
        let mgid = self.gid(" mgid=0x")?;
        let port_gid = self.gid(" port_gid=0x")?;
        let qkey = self.hex(" qkey=0x", 32)? as u32;
        let _ = self.hex(" mlid=0x", 16)?;
        let mtu = self.hex(" mtu=0x", 8)? as u8;
        let tclass = self.hex(" tclass=0x", 8)? as u8;
        let pkey = self.hex(" pkey=0x", 16)? as u16;
        let rate = self.hex(" rate=0x", 8)? as u8;
        let packet_life = self.hex(" pkt_life=0x", 8)? as u8;
        let sl_flow_hop = self.hex(" sl_flow_hop=0x", 32)? as u32;
        let scope_state = self.hex(" scope_state=0x", 8)? as u8;
        let _proxy = self.hex(" proxy_join=0x", 8)?;
        let _ = port_gid;
        if mgid >> 120 != 0xFF {
            return Err(format!("MGID {} is not a multicast GID", hi_lo(mgid)));
        }
        Ok(McGroup {
            params: McGroupParams {
                mgid: mgid.to_be_bytes(),
                qkey,
                pkey,
                mtu: mtu & 0x3F,
                rate: rate & 0x3F,
                packet_life: packet_life & 0x3F,
                sl: (sl_flow_hop >> 28) as u8,
                flow_label: (sl_flow_hop >> 8) & 0xF_FFFF,
                hop_limit: sl_flow_hop as u8,
                tclass,
                scope: scope_state >> 4,
            },
            mlid,
            members: Default::default(),
            creator: None,
            well_known,
        })
    }

    fn member(&mut self) -> Result<McMember, String> {
        let gid = self.gid(" port_gid=0x")?;
        let scope_state = self.hex(" scope_state=0x", 8)? as u8;
        let proxy = self.hex(" proxy_join=0x", 8)? != 0;
        if scope_state & 0x0F == 0 {
            return Err("a member without a JoinState".into());
        }
        Ok(McMember {
            port_gid: gid.to_be_bytes(),
            port_guid: gid as u64,
            join_state: scope_state & 0x0F,
            proxy,
        })
    }

    fn name(&mut self) -> Result<[u8; NAME_LEN], String> {
        let at = self.rest.find(" name=").ok_or("no \"name=\" field")?;
        let value = &self.rest[at + " name=".len()..];
        let (text, rest) = match value.chars().next() {
            Some(q @ ('\'' | '"')) => {
                let body = &value[1..];
                let end = body.find(q).ok_or("the service name has no closing quote")?;
                (&body[..end], &body[end + 1..])
            }
            _ => {
                let end = value.find(' ').unwrap_or(value.len());
                (&value[..end], &value[end..])
            }
        };
        let mut name = [0u8; NAME_LEN];
        // Room for the terminating NUL, as OpenSM keeps it.
        let n = text.len().min(NAME_LEN - 1);
        name[..n].copy_from_slice(&text.as_bytes()[..n]);
        self.rest = rest;
        Ok(name)
    }

    fn service(&mut self) -> Result<Stored, String> {
        let mut r = ServiceRepr {
            service_id: self.hex(" id=0x", 64)?,
            service_gid: self.gid(" gid=0x")?,
            service_pkey: self.hex(" pkey=0x", 16)? as u16,
            service_lease: self.hex(" lease=0x", 32)? as u32,
            service_key: self.gid(" key=0x")?,
            ..Default::default()
        };
        r.service_name = self.name()?;
        for (i, field) in ["data8", "data16", "data32", "data64"].iter().enumerate() {
            let v = self.gid(&format!(" {field}=0x"))?;
            r.service_data[i * 16..i * 16 + 16].copy_from_slice(&v.to_be_bytes());
        }
        let modified_time = self.hex(" modified_time=0x", 32)? as u32;
        let lease_period = self.hex(" lease_period=0x", 32)? as u32;
        Ok(Stored {
            record: r,
            modified_time,
            lease_period,
        })
    }

    fn inform(&mut self) -> Result<Subscription, String> {
        let subscriber_gid = self.gid(" subscriber_gid=0x")?;
        let _ = self.hex(" subscriber_enum=0x", 16)?;
        let gid = self.gid(" gid=0x")?;
        let lid_range_begin = self.hex(" lid_range_begin=0x", 16)? as u16;
        let lid_range_end = self.hex(" lid_range_end=0x", 16)? as u16;
        let is_generic = self.hex(" is_generic=0x", 8)? as u8;
        let subscribe = self.hex(" subscribe=0x", 8)? as u8;
        let trap_type = self.hex(" trap_type=0x", 16)? as u16;
        let trap_number = self.hex(" trap_num=0x", 16)? as u16;
        let qpn_resp = self.hex(" qpn_resp_time_val=0x", 32)? as u32;
        let producer_type = self.hex(" node_type=0x", 32)? as u32 & 0xFF_FFFF;
        let lid = self.hex(" rep_addr: lid=0x", 16)? as u16;
        let _ = self.hex(" path_bits=0x", 8)?;
        let _ = self.hex(" static_rate=0x", 8)?;
        let qpn = self.hex(" remote_qp=0x", 32)? as u32 & 0xFF_FFFF;
        let _ = self.hex(" remote_qkey=0x", 32)?;
        let _ = self.hex(" pkey_ix=0x", 16)?;
        let _ = self.hex(" sl=0x", 8)?;
        Ok(Subscription {
            subscriber_gid,
            lid,
            qpn,
            info: InfoRepr {
                gid,
                lid_range_begin,
                lid_range_end,
                is_generic,
                subscribe,
                trap_type,
                trap_number,
                qpn: qpn_resp >> 8,
                resp_time_value: (qpn_resp & 0x1F) as u8,
                producer_type,
            },
        })
    }
}

impl Sa {
    /// The registrations held at `now` (live services only).
    pub fn saved_state(&self, now: Instant) -> SaState {
        SaState {
            groups: locked(&self.groups).iter().cloned().collect(),
            services: locked(&self.services).stored(now),
            subscriptions: locked(&self.subs).iter().copied().collect(),
        }
    }

    /// Puts `state` back (at SM start, before the SA answers; or when a
    /// standby takes over): every group whose MGID and MLID are free,
    /// every service whose lease has not run out (by the wall clock
    /// `wall_now`, Unix seconds), every subscription. What cannot be
    /// restored is listed in the result. Members, services and
    /// subscriptions of ports not in the fabric go at the first publish,
    /// as on any sweep.
    pub fn restore_state(&self, state: &SaState, now: Instant, wall_now: u32) -> Restored {
        let mut done = Restored::default();
        {
            let mut groups = locked(&self.groups);
            for g in &state.groups {
                let mgid = crate::mcast::groups::fmt_gid(&g.params.mgid);
                if !g.lives() {
                    // OpenSM closes such a group on load too.
                    done.skipped.push(format!("group {mgid}: no full member"));
                    continue;
                }
                if let Some(present) = groups.get(&g.params.mgid) {
                    // Made meanwhile (a partition's group, made at start):
                    // the saved members join it.
                    if present.mlid != g.mlid {
                        done.skipped.push(format!(
                            "group {mgid}: saved with MLID {:#06x}, present with {:#06x}; members joined",
                            g.mlid, present.mlid
                        ));
                    }
                    for m in g.members.values() {
                        if let Err(e) = groups.join(&g.params.mgid, *m) {
                            done.skipped.push(format!("group {mgid}: member {}: {e}", crate::mcast::groups::fmt_gid(&m.port_gid)));
                        }
                    }
                    done.groups += 1;
                    continue;
                }
                match groups.restore(g.clone()) {
                    Ok(()) => done.groups += 1,
                    Err(e) => done.skipped.push(format!("group {mgid} (MLID {:#06x}): {e}", g.mlid)),
                }
            }
        }
        {
            let mut services = locked(&self.services);
            for s in &state.services {
                if services.restore(s, now, wall_now) {
                    done.services += 1;
                } else {
                    done.skipped.push(format!(
                        "service {:#018x} of {}: lease ran out, or registered already",
                        s.record.service_id,
                        hi_lo(s.record.service_gid)
                    ));
                }
            }
        }
        {
            let mut subs_guard = locked(&self.subs);
            let subs = std::sync::Arc::make_mut(&mut subs_guard);
            for s in &state.subscriptions {
                if subs.restore(*s) {
                    done.subscriptions += 1;
                }
            }
        }
        done
    }
}

/// Restores what was read from the file at `path` (`loaded`: the state,
/// or why it could not be read) into `sa`, logged: what was restored, what
/// was not and why, or why the file was not read (a missing file is no
/// error: nothing was saved yet; a file that cannot be read leaves the SA
/// empty, the error naming file and line).
pub fn restore_logged(sa: &Sa, path: &Path, loaded: Result<SaState, PersistError>) {
    match loaded.map(|state| sa.restore_state(&state, Instant::now(), unix_now())) {
        Ok(done) => {
            tracing::info!(
                file = %path.display(),
                "SA database restored: {} multicast groups, {} services, {} subscriptions",
                done.groups,
                done.services,
                done.subscriptions
            );
            for s in &done.skipped {
                tracing::warn!("SA database {}: not restored: {s}", path.display());
            }
        }
        Err(PersistError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(file = %path.display(), "no SA database to restore");
        }
        Err(e) => tracing::warn!("SA database not restored, the SA starts empty: {e}"),
    }
}

/// The thread that keeps the file at `path` up to date: once a second,
/// while the SA serves (it has a snapshot published: this SM is master),
/// the registrations are written when they differ from what was last
/// written; once more when it stops. A standby, whose SA serves nothing,
/// never overwrites the file.
#[derive(Debug)]
pub struct Saver {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Saver {
    /// Starts saving `sa` to `path`, synced to disk when `fsync`.
    pub fn spawn(sa: std::sync::Arc<Sa>, path: PathBuf, fsync: bool) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("sa-db".into())
            .spawn(move || {
                let mut last: Option<String> = None;
                let mut last_error: Option<String> = None;
                loop {
                    let stopping = flag.load(Ordering::Relaxed);
                    if sa.db().is_some() {
                        let text = sa.saved_state(Instant::now()).render();
                        if last.as_ref() != Some(&text) {
                            match write_atomic(&path, text.as_bytes(), fsync) {
                                Ok(()) => {
                                    tracing::debug!(path = %path.display(), "SA database saved");
                                    last = Some(text);
                                    last_error = None;
                                }
                                Err(e) => {
                                    let shown = e.to_string();
                                    if last_error.as_ref() != Some(&shown) {
                                        tracing::warn!("SA database not saved: {shown}");
                                    }
                                    last_error = Some(shown);
                                }
                            }
                        }
                    }
                    if stopping {
                        break;
                    }
                    for _ in 0..10 {
                        if flag.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                }
            })
            .expect("spawn the SA database thread");
        Self { stop, thread: Some(thread) }
    }
}

impl Drop for Saver {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Unix time now (re-exported for the daemon's restore).
pub fn unix_now() -> u32 {
    service::unix_now()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcast::{McGroups, McLimits};
    use crate::sa::SaConfig;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const PREFIX: u128 = 0xfe80_0000_0000_0000 << 64;

    fn member(guid: u64, join_state: u8, proxy: bool) -> McMember {
        let gid = PREFIX | u128::from(guid);
        McMember {
            port_gid: gid.to_be_bytes(),
            port_guid: guid,
            join_state,
            proxy,
        }
    }

    fn group(mgid: u128, mlid: u16, members: &[McMember], well_known: bool) -> McGroup {
        McGroup {
            params: McGroupParams {
                mgid: mgid.to_be_bytes(),
                qkey: 0x0B1B,
                pkey: 0xFFFF,
                mtu: 4,
                rate: 3,
                packet_life: 0x12,
                sl: 3,
                flow_label: 0x12345,
                hop_limit: 7,
                tclass: 0x40,
                scope: 2,
            },
            mlid,
            members: members.iter().map(|m| (m.port_gid, *m)).collect(),
            creator: None,
            well_known,
        }
    }

    fn service(id: u64, guid: u64, lease_period: u32, modified_time: u32) -> Stored {
        let mut name = [0u8; NAME_LEN];
        name[..9].copy_from_slice(b"svc name1");
        let mut data = [0u8; 64];
        for (i, b) in data.iter_mut().enumerate() {
            *b = i as u8 * 3;
        }
        Stored {
            record: ServiceRepr {
                service_id: id,
                service_gid: PREFIX | u128::from(guid),
                service_pkey: 0xFFFF,
                service_lease: lease_period,
                service_key: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
                service_name: name,
                service_data: data,
            },
            modified_time,
            lease_period,
        }
    }

    fn subscription(guid: u64) -> Subscription {
        Subscription {
            subscriber_gid: PREFIX | u128::from(guid),
            lid: 7,
            qpn: 0x48,
            info: InfoRepr {
                gid: 0,
                lid_range_begin: 0xFFFF,
                lid_range_end: 0,
                is_generic: 1,
                subscribe: 1,
                trap_type: 0xFFFF,
                trap_number: 64,
                qpn: 0x48,
                resp_time_value: 18,
                producer_type: 0xFF_FFFF,
            },
        }
    }

    fn sample(now: u32) -> SaState {
        SaState {
            groups: vec![
                group(0xff12_401b_ffff_0000_0000_0000_ffff_ffff, 0xC000, &[member(0x11, 1, false), member(0x12, 2, true)], true),
                group(0xff12_601b_ffff_0000_0000_0001_ff00_0011, 0xC001, &[member(0x11, 1, false)], false),
            ],
            services: vec![service(0x1000_0000_0000_0001, 0x12, u32::MAX, now - 100), service(2, 0x11, 600, now - 100)],
            subscriptions: vec![subscription(0x11)],
        }
    }

    #[test]
    fn a_state_reads_back_as_written() {
        let state = sample(1_700_000_000);
        let text = state.render();
        assert_eq!(SaState::parse(&text, Path::new("x")).unwrap(), state);
        // OpenSM's layout: one record a line, a blank line after each.
        assert!(text.starts_with("MC Group 0xc000  (well known): mgid=0xff12401bffff0000:0x00000000ffffffff "), "{text}");
        assert!(text.contains("\nmcm_port: port_gid=0xfe80000000000000:0x0000000000000012 scope_state=0x22 proxy_join=0x1\n\n"));
        assert!(text.contains(" name='svc name1' "));
    }

    #[test]
    fn a_bad_line_is_named_by_file_and_line() {
        let mut text = sample(1_700_000_000).render();
        text.push_str("Service Record: id=0x12 gid=0xfe80000000000000:0xzz\n");
        let line = text.lines().count();
        let e = SaState::parse(&text, Path::new("/var/cache/opensm/opensm-sa.dump")).unwrap_err();
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("/var/cache/opensm/opensm-sa.dump:{line}: ")), "{shown}");
        assert!(shown.contains("gid"), "{shown}");
        let e = SaState::parse("\n\nthis is no SA file\n", Path::new("f")).unwrap_err();
        assert!(e.to_string().starts_with("f:3: not a record"), "{e}");
        let e = SaState::parse("mcm_port: port_gid=0x0:0x1 scope_state=0x21 proxy_join=0x0\n", Path::new("f")).unwrap_err();
        assert!(e.to_string().starts_with("f:1: mcm_port line outside"), "{e}");
    }

    #[test]
    fn saving_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opensm-sa.dump");
        let state = sample(1_700_000_000);
        state.save(&path, true).unwrap();
        SaState { groups: vec![], ..state.clone() }.save(&path, false).unwrap();
        let back = SaState::load(&path).unwrap();
        assert!(back.groups.is_empty());
        assert_eq!(back.services, state.services);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let missing = SaState::load(&dir.path().join("none")).unwrap_err();
        assert!(matches!(missing, PersistError::Io { .. }));
    }

    #[test]
    fn an_sa_restores_what_another_saved() {
        let wall = 1_700_000_000;
        let now = Instant::now();
        let first = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig::default());
        let mut state = sample(wall);
        // A lease that ran out while the SM was down is not restored.
        state.services.push(service(3, 0x11, 50, wall - 100));
        let done = first.restore_state(&state, now, wall);
        assert_eq!((done.groups, done.services, done.subscriptions), (2, 2, 1), "{done:?}");
        assert_eq!(done.skipped.len(), 1, "{:?}", done.skipped);
        let saved = first.saved_state(now + Duration::from_secs(1));
        let mut expected = sample(wall);
        expected.services.sort_by_key(|s| s.record.rid());
        let mut got = saved.clone();
        got.services.sort_by_key(|s| s.record.rid());
        assert_eq!(got, expected);
        // The lease left counts from the registration: 600 - 100 s.
        let later = first.saved_state(now + Duration::from_secs(501));
        assert_eq!(later.services.len(), 1, "the 600 s lease ran out 500 s after the restore");

        // A second SA whose MLID 0xC000 is taken keeps its own group and
        // lists the saved one as not restored.
        let mut taken = McGroups::new();
        taken
            .create_by(
                group(0xff12_0000_0000_0000_0000_0000_0000_0099, 0, &[], false).params,
                Some(0xC000),
                member(0x13, 1, false),
                0x13,
                &McLimits::default(),
            )
            .unwrap();
        let second = Sa::new(Arc::new(Mutex::new(taken)), SaConfig::default());
        let done = second.restore_state(&saved, now, wall);
        assert_eq!(done.groups, 1);
        assert!(done.skipped.iter().any(|s| s.contains("0xc000")), "{:?}", done.skipped);
    }

    #[test]
    fn a_group_without_full_member_is_not_restored() {
        let sa = Sa::new(Arc::new(Mutex::new(McGroups::new())), SaConfig::default());
        let state = SaState {
            groups: vec![group(0xff12_601b_ffff_0000_0000_0001_ff00_0011, 0xC001, &[member(0x11, 2, false)], false)],
            ..SaState::default()
        };
        let done = sa.restore_state(&state, Instant::now(), 0);
        assert_eq!(done.groups, 0);
        assert_eq!(locked(&sa.groups).len(), 0);
    }

    #[test]
    fn saved_members_join_a_group_made_meanwhile() {
        // The partitions' broadcast group, made at start without members.
        let mut made = McGroups::new();
        let bcast = group(0xff12_401b_ffff_0000_0000_0000_ffff_ffff, 0xC000, &[], true);
        made.set_well_known(&[bcast.params]);
        let sa = Sa::new(Arc::new(Mutex::new(made)), SaConfig::default());
        let done = sa.restore_state(&sample(1_700_000_000), Instant::now(), 1_700_000_000);
        assert_eq!(done.groups, 2, "{:?}", done.skipped);
        let groups = locked(&sa.groups);
        let g = groups.get(&bcast.params.mgid).expect("the broadcast group");
        assert_eq!((g.mlid, g.members.len(), g.well_known), (0xC000, 2, true));
    }

    struct Nowhere;

    /// A database of the ports of [`sample`] (GUIDs 0x11 and 0x12).
    fn two_ports() -> crate::sa::SaDb {
        let mut db = crate::sa::SaDb::empty();
        db.gid_prefix = 0xfe80_0000_0000_0000;
        for (i, guid) in [0x11u64, 0x12].into_iter().enumerate() {
            let lid = i as u16 + 1;
            db.ends.push(crate::sa::EndPort { node: i as u32, port: 1, guid, lid, lmc: 0, switch: false, guid_cap: 1 });
            db.by_lid.insert(lid, i as u32);
            db.by_guid.insert(guid, i as u32);
        }
        db
    }

    impl crate::sa::Responder for Nowhere {
        fn reply(&self, _: &sm_transport::gmp::IncomingMad, _: &[u8]) -> Result<(), String> {
            Ok(())
        }
        fn report(&self, _: &crate::sa::Report) -> Result<(), String> {
            Ok(())
        }
    }

    /// The handover, as the daemon wires it: the master's SA saves its
    /// registrations while it serves; the standby's SA, told to restore
    /// the same file at its first publish, holds nothing until then (and
    /// writes nothing), and every registration after it.
    #[test]
    fn a_standby_sa_takes_the_saved_registrations_at_its_first_publish() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sa.db");
        let wall = unix_now();
        let spawn = || {
            let (_tx, rx) = std::sync::mpsc::channel();
            crate::sa::spawn(Nowhere, rx, Arc::new(Mutex::new(McGroups::new())), SaConfig::default())
        };
        let master = spawn();
        master.sa().restore_state(&sample(wall), Instant::now(), wall);
        let standby = spawn();
        standby.restore_at_first_publish(path.clone());
        let standby_saver = Saver::spawn(Arc::clone(standby.sa()), path.clone(), false);
        {
            let _master_saver = Saver::spawn(Arc::clone(master.sa()), path.clone(), false);
            std::thread::sleep(Duration::from_millis(300));
            assert!(!path.exists(), "an SA that serves nothing (a standby, a master before its first sweep) writes nothing");
            master.publish(two_ports());
            // Written within a second; the standby's saver never writes.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !std::fs::read_to_string(&path).unwrap_or_default().contains("Service Record:") {
                assert!(Instant::now() < deadline, "the master's registrations were never saved");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let saved = SaState::load(&path).unwrap();
        assert_eq!(saved.groups.len(), 2);
        assert!(standby.sa().saved_state(Instant::now()).groups.is_empty(), "nothing before the first publish");
        standby.publish(two_ports());
        let mut taken = standby.sa().saved_state(Instant::now());
        let mut expected = sample(wall);
        for s in [&mut taken, &mut expected] {
            s.services.sort_by_key(|x| x.record.rid());
        }
        assert_eq!(taken.groups, expected.groups);
        assert_eq!(taken.services, expected.services);
        assert_eq!(taken.subscriptions, expected.subscriptions);
        drop(standby_saver);
    }
}
