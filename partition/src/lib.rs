//! Partitions (IBA 10.9): OpenSM's `partitions.conf` ([`conf`]), resolved
//! at each heavy sweep against the ports found into each port's P_Key
//! table ([`resolve`]), programmed by `sweep::pkey`, and checked by the SA
//! (every record an untrusted requester reads, MCMember joins and
//! leaves, the Reports subscribers get).
//!
//! The file is read again at every heavy sweep, as OpenSM does; a file
//! that does not parse is logged with its file:line and the last good set
//! stays in force ([`PartitionState`]).

pub mod conf;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use sm_abi::NodeKind;
use tracing::{info, warn};

pub use conf::{
    GroupFlags, McGroupConf, MemberRule, Members, Membership, Partition, PartitionConfig, PartitionError,
    DEFAULT_PKEY,
};

use sm_model::Fabric;

/// OpenSM's default partitions.conf.
pub const DEFAULT_PARTITION_CONFIG_FILE: &str = "/etc/opensm/partitions.conf";

/// The membership bit of a P_Key table entry.
pub const FULL: u16 = 0x8000;

/// `part_enforce`: where switches check P_Keys on ports facing end nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PartEnforce {
    /// Inbound and outbound (OpenSM's default).
    #[default]
    Both,
    /// Inbound only.
    In,
    /// Outbound only.
    Out,
    /// None: switch external ports get no P_Key table.
    Off,
}

impl PartEnforce {
    /// OpenSM's spelling (`both`, `in`, `out`, `off`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "both" => Self::Both,
            "in" => Self::In,
            "out" => Self::Out,
            "off" => Self::Off,
            _ => return None,
        })
    }

    /// (PartitionEnforcementInbound, PartitionEnforcementOutbound).
    pub fn bits(self) -> (bool, bool) {
        match self {
            Self::Both => (true, true),
            Self::In => (true, false),
            Self::Out => (false, true),
            Self::Off => (false, false),
        }
    }
}

/// The partition settings of a [`Config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSettings {
    /// The file, and whether it was given (a missing default file is
    /// OpenSM's default partition only; a missing given file is an error).
    pub file: PathBuf,
    /// Whether `file` was given.
    pub explicit: bool,
    /// Enforcement on switch external ports.
    pub enforce: PartEnforce,
    /// `allow_both_pkeys`: a port may hold a full and a limited entry of
    /// one partition.
    pub allow_both: bool,
    /// `keep_pkey_indexes`: a P_Key a port holds keeps its index from one
    /// sweep to the next; new ones take free entries.
    pub keep_indexes: bool,
}

impl PartitionSettings {
    /// Reads the partitions: OpenSM's default when the default file is
    /// missing.
    pub fn load(&self) -> Result<PartitionConfig, PartitionError> {
        if !self.explicit && !self.file.exists() {
            return Ok(PartitionConfig::default());
        }
        PartitionConfig::load(&self.file)
    }
}

/// P_Key tables held, by (node GUID, port).
pub type HeldTablesByPort = std::collections::HashMap<(u64, u8), Arc<[u16]>>;

/// The partitions in force from one sweep to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionState {
    /// The last set read without error.
    pub last_good: Option<Arc<PartitionConfig>>,
    /// The error last logged (logged again only when it changes).
    last_error: Option<String>,
}

impl PartitionState {
    /// Reads the file again; on an error logs it (once while it stays the
    /// same) and keeps the last good set (OpenSM's default if none).
    pub fn refresh(&mut self, settings: &PartitionSettings) -> Arc<PartitionConfig> {
        match settings.load() {
            Ok(c) => {
                self.last_error = None;
                if self.last_good.as_deref() != Some(&c) {
                    info!(file = %settings.file.display(), partitions = c.partitions.len(), "partitions read");
                    self.last_good = Some(Arc::new(c));
                }
            }
            Err(e) => {
                let msg = e.to_string();
                if self.last_error.as_deref() != Some(&msg) {
                    warn!(error = %msg, "partition configuration not used; the last good set stays in force");
                    self.last_error = Some(msg);
                }
            }
        }
        self.last_good.get_or_insert_with(|| Arc::new(PartitionConfig::default())).clone()
    }
}

/// One end port as resolution sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndPortKind {
    /// Port GUID.
    pub guid: u64,
    /// Kind of its node.
    pub kind: NodeKind,
}

/// A port's membership of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PortMembership {
    /// Holds the full-member P_Key.
    pub full: bool,
    /// Holds the limited-member P_Key.
    pub limited: bool,
}

/// The partitions resolved against the ports of one sweep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The configuration resolved.
    pub config: Arc<PartitionConfig>,
    /// Members of each partition by P_Key (low 15 bits), by port GUID.
    /// Partitions with no member are left out (OpenSM deletes them: no
    /// multicast group is made for them).
    pub members: BTreeMap<u16, BTreeMap<u64, PortMembership>>,
    /// P_Key table of each end port by port GUID, in table order: entries
    /// with the membership bit, the default partition's at index 0 (or an
    /// `indx0` partition's).
    pub tables: HashMap<u64, Vec<u16>>,
}

/// The end ports of `fabric`: CA and router ports with a PortInfo, and each
/// switch's port 0.
pub fn end_ports(fabric: &Fabric) -> Vec<EndPortKind> {
    let mut out = Vec::new();
    for n in &fabric.nodes {
        if n.is_switch() {
            if let Some(p) = n.ports.first() {
                out.push(EndPortKind { guid: p.guid, kind: n.kind });
            }
        } else {
            for p in n.ports.iter().skip(1).filter(|p| p.info.is_some()) {
                out.push(EndPortKind { guid: p.guid, kind: n.kind });
            }
        }
    }
    out
}

/// Applies the rules of `config` to `ports` (`sm_guid`: the SM's port, for
/// `SELF`).
pub fn resolve(config: Arc<PartitionConfig>, ports: &[EndPortKind], sm_guid: u64, allow_both: bool) -> Resolved {
    let mut members: BTreeMap<u16, BTreeMap<u64, PortMembership>> = BTreeMap::new();
    let known: HashMap<u64, NodeKind> = ports.iter().map(|p| (p.guid, p.kind)).collect();
    for p in &config.partitions {
        let set = members.entry(p.pkey).or_default();
        for rule in &p.rules {
            let guids: Vec<u64> = match rule.members {
                Members::All => ports.iter().map(|e| e.guid).collect(),
                Members::AllCas => ports.iter().filter(|e| e.kind == NodeKind::Ca).map(|e| e.guid).collect(),
                Members::AllSwitches => ports.iter().filter(|e| e.kind == NodeKind::Switch).map(|e| e.guid).collect(),
                Members::AllRouters => ports.iter().filter(|e| e.kind == NodeKind::Router).map(|e| e.guid).collect(),
                Members::SelfPort => vec![sm_guid],
                Members::Guid(g) => vec![g],
            };
            for g in guids.into_iter().filter(|g| known.contains_key(g)) {
                let m = set.entry(g).or_default();
                match (rule.membership, allow_both) {
                    (Membership::Limited, _) => *m = PortMembership { full: false, limited: true },
                    (Membership::Full, _) | (Membership::Both, false) => {
                        *m = PortMembership { full: true, limited: false }
                    }
                    (Membership::Both, true) => *m = PortMembership { full: true, limited: true },
                }
            }
        }
    }
    members.retain(|_, m| !m.is_empty());
    let indx0: Vec<u16> = config.partitions.iter().filter(|p| p.indx0).map(|p| p.pkey).collect();
    let mut tables: HashMap<u64, Vec<u16>> = HashMap::new();
    // The default partition first, then by P_Key.
    let mut order: Vec<u16> = members.keys().copied().collect();
    order.sort_by_key(|&k| (k != DEFAULT_PKEY, k));
    for pkey in order {
        for (&g, m) in &members[&pkey] {
            let t = tables.entry(g).or_default();
            if m.full {
                t.push(pkey | FULL);
            }
            if m.limited {
                t.push(pkey);
            }
        }
    }
    for t in tables.values_mut() {
        // Stable: the indx0 partition's entries first, the rest in order.
        t.sort_by_key(|e| !indx0.contains(&(e & 0x7FFF)));
    }
    Resolved { config, members, tables }
}

/// Resolves `config` against the ports of `fabric`.
pub fn resolve_fabric(config: Arc<PartitionConfig>, fabric: &Fabric, allow_both: bool) -> Resolved {
    let sm_guid = fabric
        .nodes
        .first()
        .and_then(|n| n.ports.get(usize::from(fabric.sm_port)))
        .map(|p| p.guid)
        .unwrap_or(0);
    resolve(config, &end_ports(fabric), sm_guid, allow_both)
}

/// The P_Key two ports may talk on: the first entry of `src`'s table whose
/// partition `dst` is in too, with at least one of them a full member; or,
/// when `wanted` is given, `wanted` itself if it qualifies.
pub fn common_pkey(src: &[u16], dst: &[u16], wanted: Option<u16>) -> Option<u16> {
    let full_in = |t: &[u16], base: u16| t.iter().any(|&e| e & 0x7FFF == base && e & FULL != 0);
    let in_ = |t: &[u16], base: u16| t.iter().any(|&e| e & 0x7FFF == base);
    let ok = |base: u16| base != 0 && in_(src, base) && in_(dst, base) && (full_in(src, base) || full_in(dst, base));
    match wanted {
        Some(w) => ok(w & 0x7FFF).then_some(w),
        None => src.iter().copied().find(|&e| ok(e & 0x7FFF)),
    }
}

/// What the SA knows of partitions: each end port's P_Key table and the
/// tables the ports were programmed with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaPartitions {
    /// Resolved membership (tables by port GUID).
    pub resolved: Resolved,
    /// Tables the ports hold as programmed (or read), by (node GUID, port):
    /// the sweep's own record, shared.
    pub held: Arc<HeldTablesByPort>,
}

impl SaPartitions {
    /// P_Key table of the end port with `guid` (empty: in no partition).
    pub fn table(&self, guid: u64) -> &[u16] {
        self.resolved.tables.get(&guid).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The P_Key table the SA assumes for a port when no partition
/// information is there (a database built without a sweep).
pub const DEFAULT_TABLE: &[u16] = &[0xFFFF];

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn ca(guid: u64) -> EndPortKind {
        EndPortKind { guid, kind: NodeKind::Ca }
    }

    #[test]
    fn two_halves_and_the_default() {
        let c = PartitionConfig::parse(
            "Default=0x7fff : ALL=full ;\nleft=0x1 : 0x10=full, 0x11=full, 0x12=limited ;\nright=0x2, ipoib : 0x20=full, 0x21 ;\n",
            Path::new("p"),
        )
        .unwrap();
        let sw = EndPortKind { guid: 0x99, kind: NodeKind::Switch };
        let ports = [ca(0x10), ca(0x11), ca(0x12), ca(0x20), ca(0x21), sw];
        let r = resolve(Arc::new(c), &ports, 0x10, false);
        assert_eq!(r.tables[&0x10], vec![0xFFFF, 0x8001]);
        assert_eq!(r.tables[&0x12], vec![0xFFFF, 0x0001]);
        assert_eq!(r.tables[&0x21], vec![0xFFFF, 0x0002]);
        assert_eq!(r.tables[&0x99], vec![0xFFFF]);
        // Without the default partition in common, halves cannot talk on
        // their own P_Keys.
        assert_eq!(common_pkey(&[0x8001], &[0x8002], None), None);
        assert_eq!(common_pkey(&[0x8001], &[0x0001], None), Some(0x8001));
        assert_eq!(common_pkey(&[0x0001], &[0x0001], None), None, "limited-limited");
        assert_eq!(common_pkey(&r.tables[&0x12], &r.tables[&0x21], Some(0x0001)), None);
        assert_eq!(common_pkey(&r.tables[&0x12], &r.tables[&0x21], None), Some(0xFFFF));
        assert_eq!(common_pkey(&r.tables[&0x10], &r.tables[&0x12], Some(0x8001)), Some(0x8001));
    }

    #[test]
    fn limited_default_and_both() {
        let c = PartitionConfig::parse("p=0x5, indx0 : 0x10=both, 0x11=full ;\n", Path::new("p")).unwrap();
        let ports = [ca(0x10), ca(0x11), ca(0x12)];
        let r = resolve(Arc::new(c.clone()), &ports, 0x11, true);
        assert_eq!(r.tables[&0x10], vec![0x8005, 0x0005, 0x7FFF], "indx0 first; default limited with a file");
        assert_eq!(r.tables[&0x11], vec![0x8005, 0xFFFF], "SELF is a full member of the default");
        assert_eq!(r.tables[&0x12], vec![0x7FFF]);
        let r = resolve(Arc::new(c), &ports, 0x11, false);
        assert_eq!(r.tables[&0x10], vec![0x8005, 0x7FFF], "both is full without allow_both_pkeys");
        assert!(!r.members.contains_key(&0x6));
    }

    #[test]
    fn missing_default_file_is_the_default_but_a_given_one_is_an_error() {
        let mut s = PartitionSettings {
            file: PathBuf::from("/nonexistent/partitions.conf"),
            explicit: false,
            enforce: PartEnforce::Both,
            allow_both: false,
            keep_indexes: true,
        };
        assert_eq!(s.load().unwrap(), PartitionConfig::default());
        s.explicit = true;
        assert!(matches!(s.load(), Err(PartitionError::Io { .. })));
    }

    #[test]
    fn a_bad_file_keeps_the_last_good_set() {
        let dir = std::env::temp_dir().join(format!("smcore-part-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("partitions.conf");
        std::fs::write(&file, "Default=0x7fff : ALL=full ; a=0x3 : ALL ;\n").unwrap();
        let s = PartitionSettings { file: file.clone(), explicit: true, enforce: PartEnforce::Both, allow_both: false, keep_indexes: true };
        let mut state = PartitionState::default();
        let good = state.refresh(&s);
        assert!(good.get(3).is_some());
        std::fs::write(&file, "Default=0x7fff : ALL=full ;\nbroken\n").unwrap();
        assert_eq!(state.refresh(&s), good);
        assert!(state.last_error.as_deref().is_some_and(|e| e.ends_with("partitions.conf:2: no partition definition found (a header ends with ':')")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
