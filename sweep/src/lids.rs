//! LID assignment and its programming by directed-route PortInfo Sets.
//!
//! A LID is an address that hosts, caches and path records keep using
//! after the SM has moved on. A port gets, in order of preference, the LID
//! the `guid2lid` file remembers for its GUID (so a fabric that powers up
//! again gets its old addresses, and a LID stays its owner's whatever
//! another port claims), then the LID it already holds when that is valid
//! (unicast, aligned to the port's block, not taken) and the file keeps it
//! for no other port (as OpenSM's `osm_lid_mgr.c`), then the lowest free
//! block not remembered for a port that is absent today. Switches take one LID on
//! port 0; CA and router ports take `2^lmc` LIDs aligned to `2^lmc`.
//! `reassign` forgets both the held LIDs and the file (OpenSM's
//! `--reassign_lids`).
//!
//! Programming reads nothing extra: discovery has just read every PortInfo,
//! so a Set is sent only to ports whose LID, LMC or master SM LID/SL
//! differ, with the rest of the attribute written back as it was read.
//! In a full sweep those fields ride on the PortInfo Set stage 3 sends the
//! port for its link parameters ([`LidSets`],
//! [`super::stages::SendLids::WithLinks`]): one Set per port, not two.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use sm_abi::MAX_UNICAST_LID;
use sm_mad::PortInfoRepr;
use tracing::{debug, warn};

use super::discovery::{parse_port_info, Fabric};
use super::transport::{SmpClient, SmpError};

/// Highest LMC IBA allows.
pub const MAX_LMC: u8 = 7;

/// The `guid2lid` file: port GUID → first and last LID, as OpenSM keeps it
/// between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guid2Lid {
    /// Port GUID → (base LID, last LID).
    pub entries: BTreeMap<u64, (u16, u16)>,
}

/// A line of `guid2lid` that does not read.
#[derive(Debug, thiserror::Error)]
pub enum Guid2LidError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A line is not `0x<guid> 0x<lid> 0x<lid_end>` with a sane range.
    #[error("{origin}:{line}: {why}")]
    Syntax {
        /// File name or other origin.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
}

impl Guid2Lid {
    /// Reads OpenSM's format: one `0x<port guid> 0x<lid> 0x<lid_end>` per
    /// line; blank lines and `#` comments are skipped.
    pub fn parse(text: &str, origin: &str) -> Result<Self, Guid2LidError> {
        let mut entries = BTreeMap::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |why: String| Guid2LidError::Syntax {
                origin: origin.to_string(),
                line: n + 1,
                why,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [guid, lid, end] = fields[..] else {
                return Err(err(format!("expected 3 fields, found {}", fields.len())));
            };
            let hex = |s: &str| {
                let digits = s
                    .strip_prefix("0x")
                    .or_else(|| s.strip_prefix("0X"))
                    .unwrap_or(s);
                u64::from_str_radix(digits, 16).map_err(|e| err(format!("{s:?}: {e}")))
            };
            let (guid, lid, end) = (hex(guid)?, hex(lid)?, hex(end)?);
            if lid == 0 || lid > end || end > u64::from(MAX_UNICAST_LID) {
                return Err(err(format!("bad LID range {lid:#x}..{end:#x}")));
            }
            entries.insert(guid, (lid as u16, end as u16));
        }
        Ok(Self { entries })
    }

    /// The file's text, in GUID order.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (guid, (lid, end)) in &self.entries {
            let _ = writeln!(out, "0x{guid:016x} 0x{lid:04x} 0x{end:04x}");
        }
        out
    }

    /// Reads `path`; a missing file is an empty map (a first start).
    pub fn read(path: &Path) -> Result<Self, Guid2LidError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(Guid2LidError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Writes `path` through a temporary file, so a crash never leaves a
    /// half-written map behind.
    pub fn write(&self, path: &Path) -> Result<(), Guid2LidError> {
        let io = |source| Guid2LidError::Io {
            path: path.display().to_string(),
            source,
        };
        // Synced before and after the rename: after a crash or power loss
        // the file is the old map or the new one, never empty, so hosts
        // keep their LIDs across an SM restart. The temporary's name is
        // unpredictable and created O_EXCL: never a link planted there.
        sm_fs::replace_bytes(path, sm_fs::PUBLIC, self.to_text().as_bytes()).map_err(io)?;
        Ok(())
    }
}

/// Where each LID came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LidAssignment {
    /// Ports that kept the LID they held.
    pub kept: usize,
    /// Ports given the LID `guid2lid` remembered.
    pub from_file: usize,
    /// Ports given a new LID.
    pub fresh: usize,
    /// Ports that needed a LID and found no room (logged).
    pub unassigned: usize,
    /// Highest LID in use.
    pub max_lid: u16,
}

/// The ports that hold LIDs: (node, port, block size as LMC).
fn holders(fabric: &Fabric, lmc: u8) -> Vec<(usize, u8, u8)> {
    let mut out = Vec::new();
    for (i, n) in fabric.nodes.iter().enumerate() {
        if n.is_switch() {
            if n.ports[0].info.is_some() {
                out.push((i, 0, 0));
            }
        } else {
            for (p, port) in n.ports.iter().enumerate().skip(1) {
                if port.info.is_some() && port.path.is_some() {
                    out.push((i, p as u8, lmc));
                }
            }
        }
    }
    out
}

/// Which LIDs are taken, as a bitmap over the unicast range.
struct LidSpace {
    used: Vec<bool>,
}

impl LidSpace {
    fn new() -> Self {
        Self {
            used: vec![false; usize::from(MAX_UNICAST_LID) + 1],
        }
    }

    /// Whether `lid .. lid + 2^lmc` is a valid, free, aligned block.
    fn fits(&self, lid: u16, lmc: u8) -> bool {
        let count = 1usize << lmc;
        let lid = usize::from(lid);
        lid != 0
            && lid % count == 0
            && lid + count - 1 <= usize::from(MAX_UNICAST_LID)
            && self.used[lid..lid + count].iter().all(|u| !u)
    }

    fn take(&mut self, lid: u16, lmc: u8) {
        let lid = usize::from(lid);
        self.used[lid..lid + (1usize << lmc)].fill(true);
    }
}

/// Decides every port's LID (see the module documentation), updates the
/// model's PortInfo LID and LMC to what the ports are to hold, and records
/// the result in `guid2lid` (entries of absent ports stay). Nothing is sent.
pub fn assign(
    fabric: &mut Fabric,
    lmc: u8,
    reassign: bool,
    guid2lid: &mut Guid2Lid,
) -> LidAssignment {
    let lmc = lmc.min(MAX_LMC);
    let holders = holders(fabric, lmc);
    let mut space = LidSpace::new();
    let mut chosen: Vec<Option<u16>> = vec![None; holders.len()];
    let mut result = LidAssignment::default();

    if !reassign {
        // The file first (OpenSM's `osm_lid_mgr.c`): a LID remembered for
        // a port is that port's, whatever another port now claims to hold.
        // A host may set its own PortInfo to any LID; were the LIDs ports
        // hold taken first, in discovery order, one found before the LID's
        // owner would keep the owner's LID, the owner would be moved, and
        // `guid2lid` would record the theft.
        for (k, &(node, port, block)) in holders.iter().enumerate() {
            let slot = &fabric.nodes[node].ports[usize::from(port)];
            let Some(&(lid, _)) = guid2lid.entries.get(&slot.guid) else { continue };
            if space.fits(lid, block) {
                space.take(lid, block);
                chosen[k] = Some(lid);
                if slot.info.is_some_and(|i| i.lid == lid) {
                    result.kept += 1;
                } else {
                    result.from_file += 1;
                }
            }
        }
        // Then a LID a port holds, if valid, free, and remembered for no
        // other port (present or not).
        let mut owner = vec![0u64; usize::from(MAX_UNICAST_LID) + 1];
        for (&guid, &(lid, end)) in &guid2lid.entries {
            owner[usize::from(lid)..=usize::from(end)].fill(guid);
        }
        for (k, &(node, port, block)) in holders.iter().enumerate() {
            if chosen[k].is_some() {
                continue;
            }
            let slot = &fabric.nodes[node].ports[usize::from(port)];
            let Some(lid) = slot.info.as_ref().map(|i| i.lid).filter(|&l| space.fits(l, block)) else { continue };
            let first = usize::from(lid);
            let others = owner[first..first + (1usize << block)].iter().find(|&&g| g != 0 && g != slot.guid);
            if let Some(&other) = others {
                warn!(
                    guid = format_args!("{:#018x}", slot.guid),
                    port,
                    lid,
                    owner = format_args!("{other:#018x}"),
                    "port holds a LID guid2lid keeps for another port; not kept"
                );
                continue;
            }
            space.take(lid, block);
            chosen[k] = Some(lid);
            result.kept += 1;
        }
    }

    // LIDs the file keeps for ports that are away today are handed out
    // only when nothing else is left, so those ports get them back.
    let present: HashSet<u64> = holders
        .iter()
        .map(|&(n, p, _)| fabric.nodes[n].ports[usize::from(p)].guid)
        .collect();
    let mut reserved = LidSpace::new();
    if !reassign {
        for (guid, &(lid, end)) in &guid2lid.entries {
            if !present.contains(guid) {
                reserved.used[usize::from(lid)..=usize::from(end)].fill(true);
            }
        }
    }
    // One cursor per block size: the space only fills, so nothing below a
    // cursor can become free for that size again.
    let mut cursor = [1usize; MAX_LMC as usize + 1];
    for (k, &(node, port, block)) in holders.iter().enumerate() {
        if chosen[k].is_some() {
            continue;
        }
        let count = 1usize << block;
        let mut found = None;
        for respect_reserved in [true, false] {
            let mut lid = cursor[usize::from(block)].div_ceil(count) * count;
            while lid + count - 1 <= usize::from(MAX_UNICAST_LID) {
                let free = space.fits(lid as u16, block)
                    && !(respect_reserved && reserved.used[lid..lid + count].iter().any(|&r| r));
                if free {
                    found = Some(lid as u16);
                    break;
                }
                lid += count;
            }
            if found.is_some() {
                if respect_reserved {
                    cursor[usize::from(block)] = lid;
                }
                break;
            }
        }
        match found {
            Some(lid) => {
                space.take(lid, block);
                chosen[k] = Some(lid);
                result.fresh += 1;
            }
            None => {
                warn!(
                    guid = format_args!("{:#018x}", fabric.nodes[node].guid),
                    port, "no free LID left; port gets none"
                );
                result.unassigned += 1;
            }
        }
    }

    for (k, &(node, port, block)) in holders.iter().enumerate() {
        let Some(lid) = chosen[k] else { continue };
        let slot = &fabric.nodes[node].ports[usize::from(port)];
        let end = lid + ((1u16 << block) - 1);
        guid2lid.entries.insert(slot.guid, (lid, end));
        result.max_lid = result.max_lid.max(end);
        // Only a port whose LID moves is written: the fabric's nodes are
        // shared with the SM's memory, and a write copies the node.
        if slot.info.is_some_and(|i| (i.lid, i.lmc) != (lid, block)) {
            if let Some(info) = fabric.node_mut(node).ports[usize::from(port)].info.as_mut() {
                info.lid = lid;
                info.lmc = block;
            }
        }
    }
    debug!(?result, "LIDs assigned");
    result
}

/// What programming sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramReport {
    /// Ports that already held everything: no SMP.
    pub unchanged: usize,
    /// PortInfo Sets that took effect.
    pub set: usize,
    /// Sets refused, unanswered or not taking effect (logged).
    pub failed: usize,
}

/// The LID fields one port is to be Set with: [`LidSets`]' common fields
/// and these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LidSet {
    /// Node index in the fabric.
    pub node: usize,
    /// Port (0 on a switch).
    pub port: u8,
    /// LID and LMC [`assign`] chose.
    pub lid: u16,
    /// LMC [`assign`] chose.
    pub lmc: u8,
    /// Whether the Set asks for a client reregistration.
    pub reregister: bool,
    /// (LID, MasterSMLID) the port held when read: a switch whose port 0
    /// gets others is relabelled ([`super::SweepOutcome::relabelled`]).
    pub before: (u16, u16),
}

/// The PortInfo Sets that write the LIDs [`assign`] chose, the SM's LID
/// and SL and the GID prefix into the ports that do not hold them: one
/// per port, with PortState NoChange unless a Set of stage 3 carries them
/// along with its own fields ([`super::program::program_links`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LidSets {
    /// The SM port's new LID, written as MasterSMLID.
    pub sm_lid: u16,
    /// MasterSMSL.
    pub sm_sl: u8,
    /// GID prefix.
    pub subnet_prefix: u64,
    /// The ports to Set, in fabric order.
    pub ports: Vec<LidSet>,
}

impl LidSets {
    /// The ports of `fabric` whose PortInfo as `read` (what the ports hold
    /// now) lacks the LID and LMC [`assign`] put in `fabric`, the SM port's
    /// LID as MasterSMLID, `sm_sl`, `subnet_prefix` or the M_Key fields
    /// `m_keys` wants (those the Set's sender writes in), or that are to
    /// be asked for a client reregistration (`client_reregister`, end
    /// ports that support it). Ports that hold everything are counted in
    /// `report.unchanged`.
    pub fn plan(
        m_keys: &super::MKeys,
        read: &Fabric,
        fabric: &Fabric,
        sm_sl: u8,
        client_reregister: bool,
        known: &std::collections::HashSet<u64>,
        subnet_prefix: u64,
        report: &mut ProgramReport,
    ) -> Self {
        let sm_lid = fabric
            .nodes
            .first()
            .and_then(|n| n.ports.get(usize::from(fabric.sm_port)))
            .and_then(|p| p.info.as_ref())
            .map_or(0, |i| i.lid);
        let mut sets = LidSets { sm_lid, sm_sl, subnet_prefix, ports: Vec::new() };
        // The LMC argument only sizes blocks, which programming does not need.
        for (node, port, _) in holders(fabric, 0) {
            let slot = &fabric.nodes[node].ports[usize::from(port)];
            let (Some(target), Some(path)) = (slot.info, slot.path.as_ref()) else {
                continue;
            };
            let Some(current) = read
                .nodes
                .get(node)
                .and_then(|n| n.ports.get(usize::from(port)))
                .and_then(|p| p.info)
            else {
                continue;
            };
            let reregister = client_reregister
                && !fabric.nodes[node].is_switch()
                && !known.contains(&slot.guid)
                && current.capability_mask & sm_mad::port_info::capability::IS_CLIENT_REREGISTRATION_SUPPORTED != 0;
            let holds = current.lid == target.lid
                && current.lmc == target.lmc
                && current.master_sm_lid == sm_lid
                && current.master_sm_sl == sm_sl
                && current.gid_prefix == subnet_prefix
                && !reregister
                // A port without the M_Key fields wanted is Set even when its
                // LIDs hold (the Set's M_Key fields are the client's doing).
                && m_keys.holds(path, &current);
            if holds {
                report.unchanged += 1;
                continue;
            }
            sets.ports.push(LidSet {
                node,
                port,
                lid: target.lid,
                lmc: target.lmc,
                reregister,
                before: (current.lid, current.master_sm_lid),
            });
        }
        sets
    }

    /// Writes `set`'s fields and the common ones into `info`, the
    /// attribute about to be Set.
    pub fn apply(&self, set: &LidSet, info: &mut PortInfoRepr) {
        info.lid = set.lid;
        info.lmc = set.lmc;
        info.master_sm_lid = self.sm_lid;
        info.master_sm_sl = self.sm_sl;
        info.gid_prefix = self.subnet_prefix;
        info.client_reregister = set.reregister;
    }

    /// Takes the answer to a Set that carried `set` into `report` (a LID
    /// or MasterSMLID not taken is a failure, logged). True when it took.
    pub fn answered(
        &self,
        set: &LidSet,
        guid: u64,
        answer: Result<&PortInfoRepr, &SmpError>,
        report: &mut ProgramReport,
    ) -> bool {
        let port = set.port;
        match answer {
            Ok(now) if now.lid == set.lid && now.master_sm_lid == self.sm_lid => {
                report.set += 1;
                true
            }
            Ok(now) => {
                warn!(guid = format_args!("{guid:#018x}"), port, lid = now.lid, wanted = set.lid, "PortInfo Set did not take effect");
                report.failed += 1;
                false
            }
            Err(e) => {
                warn!(guid = format_args!("{guid:#018x}"), port, error = %e, "PortInfo Set failed");
                report.failed += 1;
                false
            }
        }
    }
}

/// Writes the model's LIDs and LMCs and the SM's LID and SL into the ports
/// that do not hold them yet, by directed-route PortInfo Sets.
///
/// `read` is the fabric as discovery read it (what the ports hold now),
/// `fabric` the same with the LIDs [`assign`] chose. The SM LID is the
/// SM port's new LID. Each Set carries the attribute as it was read with
/// only the SM's fields changed: PortState and PortPhysicalState go as
/// NoChange, so that writing addresses never moves a port's state.
pub fn program(
    client: &mut SmpClient<'_>,
    read: &Fabric,
    fabric: &mut Fabric,
    sm_sl: u8,
    client_reregister: bool,
    known: &std::collections::HashSet<u64>,
    subnet_prefix: u64,
) -> ProgramReport {
    let mut report = ProgramReport::default();
    let sets = LidSets::plan(client.m_keys(), read, fabric, sm_sl, client_reregister, known, subnet_prefix, &mut report);
    let mut ops = Vec::with_capacity(sets.ports.len());
    let mut sent = Vec::with_capacity(sets.ports.len());
    for set in &sets.ports {
        let (node, port) = (set.node, usize::from(set.port));
        // Planned only where both are known.
        let (Some(mut want), Some(path)) = (read.nodes[node].ports[port].info, fabric.nodes[node].ports[port].path.as_ref())
        else {
            continue;
        };
        sets.apply(set, &mut want);
        ops.push(crate::port_info::addresses(want, set.port, path));
        sent.push(set);
    }
    let answers = client.run_many(&ops);
    for (set, answer) in sent.into_iter().zip(answers) {
        let now = answer.and_then(|d| parse_port_info(&d));
        let guid = fabric.nodes[set.node].guid;
        if sets.answered(set, guid, now.as_ref(), &mut report) {
            if let Ok(now) = now {
                fabric.node_mut(set.node).ports[usize::from(set.port)].info = Some(now);
            }
        }
    }
    report
}
