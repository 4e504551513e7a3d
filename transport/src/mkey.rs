//! M_Key: which management key each SMP carries, which key each port is
//! given, and the `guid2mkey` file that remembers them (IBA 14.2.4).
//!
//! With `m_key` configured (non-zero), every PortInfo Set the SM sends
//! writes M_Key, M_KeyProtectBits and M_KeyLeasePeriod ([`MKeys::stamp`]),
//! and every SMP carries the key the port at the end of its path holds.
//! The port is the one the topology discovered puts at the end of the
//! path (as OpenSM's `req_determine_mkey` walks its subnet): discovery
//! tells, as it accepts each node and link, which port GUID sits at the
//! end of each directed path and behind each port of each node. A NodeInfo
//! answer alone is never believed: a host that claims its leaf switch's
//! GUIDs, and is refused by discovery's checks, is not sent the leaf's
//! key. That knowledge
//! (`neighbors`) and the keys the ports were given (`guid2mkey`) are kept
//! on disk, so that after a restart an SM can still reach ports that a
//! protection level of 2 or 3 makes deaf to a wrong key.
//!
//! With `m_key_per_port`, each port's key is HMAC-SHA256 keyed by the
//! configured `m_key`, over the port GUID, truncated to 64 bits. OpenSM
//! derives its per-port keys with a hash of its own; ours differ, which
//! does not matter: the SM that sets a key is the one that uses it, and
//! `guid2mkey` records every key set.
//!
//! A request to a port whose key is not certain is tried with each
//! candidate in turn, one per retry ([`MKeys::key_for`]): the key last
//! written to the port, the key it should hold, the subnet's `m_key`.
//! With per-port keys the configured `m_key` is a secret and is never
//! sent: a port not known yet is asked with key 0.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use sm_mad::PortInfoPacket;
use tracing::{info, warn};

/// Highest M_KeyProtectBits value (IBA 14.2.4.1: levels 0-3).
pub const MAX_PROTECT_BITS: u8 = 3;

/// Domain separation for the per-port derivation, so that the secret used
/// here yields keys found nowhere else.
const DERIVATION_LABEL: &[u8] = b"smcore m_key per port v1";

/// OpenSM's options for M_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MKeyConfig {
    /// The subnet's M_Key (OpenSM `m_key`); 0 turns M_Key off: ports are
    /// left as they are and SMPs carry 0.
    pub m_key: u64,
    /// M_KeyProtectBits written to every port (OpenSM
    /// `m_key_protection_level`, 0-3).
    pub protect_bits: u8,
    /// M_KeyLeasePeriod in seconds (OpenSM `m_key_lease_period`; 0: the
    /// protection never lapses).
    pub lease_period: u16,
    /// Give each port its own key derived from `m_key` and its GUID
    /// (OpenSM `m_key_per_port`).
    pub per_port: bool,
}

impl MKeyConfig {
    /// Whether the SM manages M_Keys at all.
    pub fn enabled(&self) -> bool {
        self.m_key != 0
    }

    /// The key the port `port_guid` should hold.
    pub fn wanted(&self, port_guid: u64) -> u64 {
        if self.per_port {
            derive_port_key(self.m_key, port_guid)
        } else {
            self.m_key
        }
    }
}

/// The per-port key: HMAC-SHA256 keyed by `secret`, over a fixed label and
/// the port GUID, first 8 bytes big-endian. Never 0, which would switch the
/// port's protection off.
pub fn derive_port_key(secret: u64, port_guid: u64) -> u64 {
    let mut mac = match Hmac::<Sha256>::new_from_slice(&secret.to_be_bytes()) {
        Ok(mac) => mac,
        // HMAC takes keys of any length; this arm cannot be reached.
        Err(_) => return secret | 1,
    };
    mac.update(DERIVATION_LABEL);
    mac.update(&port_guid.to_be_bytes());
    let digest = mac.finalize().into_bytes();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    match u64::from_be_bytes(first) {
        0 => 1,
        key => key,
    }
}

/// Why M_Key state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MKeyError {
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A line that is not `0xGUID 0xKEY` (or, in the neighbours file,
    /// `0xNODEGUID:PORT 0xNODEGUID 0xPORTGUID`).
    #[error("{}:{line}: {why}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// A configuration value out of range.
    #[error("m_key_protection_level {0} is not 0..=3")]
    ProtectBits(u8),
}

/// Who answers at the end of a directed path, from its NodeInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PathEnd {
    node_guid: u64,
    port_guid: u64,
    /// A switch, whose ports share port 0's key.
    switch: bool,
}

/// The shared state behind [`MKeys`].
#[derive(Debug)]
struct State {
    config: MKeyConfig,
    /// Try the key recorded for a port (OpenSM `m_key_lookup`); false:
    /// only the configured key.
    lookup: bool,
    /// `guid2mkey`: the key each port was last seen or made to hold.
    keys: BTreeMap<u64, u64>,
    /// Who answers behind port `.1` of node `.0`, from the NodeInfo
    /// answers of paths that go through it (OpenSM keeps the like in its
    /// `neighbors` file).
    neighbors: BTreeMap<(u64, u8), PathEnd>,
    /// The SM's own port: the end of the empty path.
    local: Option<PathEnd>,
    /// This process's paths, to skip the neighbour walk.
    paths: HashMap<Vec<u8>, PathEnd>,
    guid2mkey: Option<PathBuf>,
    neighbors_file: Option<PathBuf>,
    keys_dirty: bool,
    neighbors_dirty: bool,
}

/// M_Key settings and what is known of the ports' keys, shared by every
/// [`SmpClient`](crate::SmpClient) of the SM (clone it freely). The default
/// is M_Key off: SMPs carry 0 and PortInfo Sets are sent as built.
#[derive(Clone, Default)]
pub struct MKeys(Option<Arc<Mutex<State>>>);

impl std::fmt::Debug for MKeys {
    // Never print the keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("MKeys(off)"),
            Some(s) => {
                let s = lock(s);
                f.debug_struct("MKeys")
                    .field("protect_bits", &s.config.protect_bits)
                    .field("lease_period", &s.config.lease_period)
                    .field("per_port", &s.config.per_port)
                    .field("ports", &s.keys.len())
                    .finish_non_exhaustive()
            }
        }
    }
}

impl PartialEq for MKeys {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for MKeys {}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state stays consistent field by field; a panic elsewhere must
    // not lock the SM out of its own fabric.
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MKeys {
    /// M_Key off.
    pub fn off() -> Self {
        Self(None)
    }

    /// M_Keys per `config`, remembered in `guid2mkey` (and `neighbors`
    /// beside it) when a path is given: both are read now (a missing file
    /// is an empty one) and rewritten when they change. With `m_key` 0 the
    /// result is [`MKeys::off`] and nothing is read.
    pub fn new(config: MKeyConfig, guid2mkey: Option<&Path>) -> Result<Self, MKeyError> {
        if config.protect_bits > MAX_PROTECT_BITS {
            return Err(MKeyError::ProtectBits(config.protect_bits));
        }
        if !config.enabled() {
            return Ok(Self::off());
        }
        if guid2mkey.is_none() && config.protect_bits >= 2 && config.per_port {
            warn!(
                "M_Key per port at protection level {} without a guid2mkey file: after a restart \
                 this SM cannot reach the ports it keyed",
                config.protect_bits
            );
        }
        let neighbors_file = guid2mkey.map(neighbors_path);
        let keys = match guid2mkey {
            Some(p) => read_guid2mkey(p)?,
            None => BTreeMap::new(),
        };
        let (local, neighbors) = match &neighbors_file {
            Some(p) => read_neighbors(p)?,
            None => (None, BTreeMap::new()),
        };
        info!(
            protect_bits = config.protect_bits,
            lease_period = config.lease_period,
            per_port = config.per_port,
            known_ports = keys.len(),
            "M_Key protection on"
        );
        Ok(Self(Some(Arc::new(Mutex::new(State {
            config,
            lookup: true,
            keys,
            neighbors,
            local,
            paths: HashMap::new(),
            guid2mkey: guid2mkey.map(Path::to_path_buf),
            neighbors_file,
            keys_dirty: false,
            neighbors_dirty: false,
        })))))
    }

    /// As OpenSM with `m_key_lookup` FALSE: SMPs carry the configured key
    /// (a port's own with `per_port`), never one recorded in `guid2mkey`
    /// or learnt from a port's answer (those are still recorded).
    pub fn without_lookup(self) -> Self {
        if let Some(s) = &self.0 {
            lock(s).lookup = false;
        }
        self
    }

    /// Whether M_Key is on.
    pub fn enabled(&self) -> bool {
        self.0.is_some()
    }

    /// The settings (all zero when off).
    pub fn config(&self) -> MKeyConfig {
        self.0.as_ref().map_or_else(MKeyConfig::default, |s| lock(s).config)
    }

    /// The key recorded for `port_guid` (`guid2mkey`).
    pub fn recorded(&self, port_guid: u64) -> Option<u64> {
        self.0.as_ref().and_then(|s| lock(s).keys.get(&port_guid).copied())
    }

    /// The port GUID at the end of `path`, as far as known.
    pub fn port_at(&self, path: &[u8]) -> Option<u64> {
        self.0.as_ref().and_then(|s| lock(s).end_of(path)).map(|e| e.port_guid)
    }

    /// The M_Key for try `attempt` (0 first) of an SMP along `path`: the
    /// candidates for the port at its end, in turn.
    pub fn key_for(&self, path: &[u8], attempt: u32) -> u64 {
        let Some(s) = &self.0 else { return 0 };
        let candidates = lock(s).candidates(path);
        candidates[attempt as usize % candidates.len()]
    }

    /// Writes the M_Key fields the port at the end of `path` must hold into
    /// PortInfo `data` about to be Set on port `modifier`. Returns false
    /// (data untouched) when M_Key is off, the port is unknown, or the Set
    /// is for an external port of a switch, whose M_Key fields mean
    /// nothing (the switch's key is port 0's).
    pub fn stamp(&self, path: &[u8], modifier: u32, data: &mut [u8]) -> bool {
        let Some(s) = &self.0 else { return false };
        let s = lock(s);
        let Some(end) = s.end_of(path) else {
            warn!(?path, "PortInfo Set to a port of unknown GUID: its M_Key is left alone");
            return false;
        };
        if end.switch && modifier & 0xFF != 0 {
            return false;
        }
        let Ok(mut info) = PortInfoPacket::new_checked(data) else { return false };
        info.set_m_key(s.config.wanted(end.port_guid));
        info.set_m_key_protect_bits(s.config.protect_bits);
        info.set_m_key_lease_period(s.config.lease_period);
        true
    }

    /// Whether PortInfo `current`, read along `path`, already holds the
    /// M_Key fields the SM wants (always true when M_Key is off): a port
    /// that does not is Set even if its LIDs are right.
    pub fn holds(&self, path: &[u8], current: &sm_mad::PortInfoRepr) -> bool {
        let Some(s) = &self.0 else { return true };
        let s = lock(s);
        let Some(end) = s.end_of(path) else { return true };
        current.m_key == s.config.wanted(end.port_guid)
            && current.m_key_protect_bits == s.config.protect_bits
            && current.m_key_lease_period == s.config.lease_period
    }

    /// Takes note that discovery accepted, at the end of `path`, the node
    /// `node_guid` reached by its port `port_guid`: a new node found there,
    /// or a link to a known one. Never called for a NodeInfo answer that
    /// discovery has not checked against the topology.
    pub fn learn_node(&self, path: &[u8], node_guid: u64, port_guid: u64, switch: bool) {
        let Some(s) = &self.0 else { return };
        let mut s = lock(s);
        let end = PathEnd { node_guid, port_guid, switch };
        if path.is_empty() {
            if s.local != Some(end) {
                s.local = Some(end);
                s.neighbors_dirty = true;
            }
        } else if let Some(before) = s.end_of(&path[..path.len() - 1]) {
            let via = (before.node_guid, path[path.len() - 1]);
            if s.neighbors.insert(via, end) != Some(end) {
                s.neighbors_dirty = true;
            }
        }
        s.paths.insert(path.to_vec(), end);
    }

    /// Takes note of the M_Key of the port at the end of `path` as shown
    /// by a PortInfo Get of port `modifier`, or as written by a PortInfo
    /// Set of it that succeeded. Only the port whose key the SMA checks
    /// counts (port 0 of a switch, the CA port itself); a zero may be a
    /// key hidden by the protection level and tells nothing.
    pub fn learn_key(&self, path: &[u8], modifier: u32, key: u64) {
        let Some(s) = &self.0 else { return };
        if key == 0 {
            return;
        }
        let mut s = lock(s);
        let Some(end) = s.end_of(path) else { return };
        if end.switch && modifier & 0xFF != 0 {
            return;
        }
        let shown = key;
        if s.keys.insert(end.port_guid, shown) != Some(shown) {
            s.keys_dirty = true;
        }
    }

    /// Writes `guid2mkey` if a key changed since it was last written:
    /// atomically (a new file renamed over the old), synced, mode 0600
    /// (the keys are the fabric's management secret).
    pub fn flush_keys(&self) -> Result<(), MKeyError> {
        let Some(s) = &self.0 else { return Ok(()) };
        let mut s = lock(s);
        if !s.keys_dirty {
            return Ok(());
        }
        if let Some(path) = &s.guid2mkey {
            let text: String = s.keys.iter().map(|(g, k)| format!("{g:#018x} {k:#018x}\n")).collect();
            write_private(path, text.as_bytes())?;
        }
        s.keys_dirty = false;
        Ok(())
    }

    /// [`Self::flush_keys`], and the neighbours file the same way if what
    /// is known of the paths changed: once per sweep, at its end.
    pub fn flush(&self) -> Result<(), MKeyError> {
        self.flush_keys()?;
        let Some(s) = &self.0 else { return Ok(()) };
        let mut s = lock(s);
        if !s.neighbors_dirty {
            return Ok(());
        }
        if let Some(path) = &s.neighbors_file {
            let mut text = String::new();
            if let Some(local) = s.local {
                text.push_str(&format!("local {}\n", end_words(&local)));
            }
            for ((node, port), far) in &s.neighbors {
                text.push_str(&format!("{node:#018x}:{port} {}\n", end_words(far)));
            }
            write_private(path, text.as_bytes())?;
        }
        s.neighbors_dirty = false;
        Ok(())
    }
}

impl State {
    /// The port at the end of `path`: seen this run, or walked hop by hop
    /// through the neighbours remembered from earlier runs.
    fn end_of(&self, path: &[u8]) -> Option<PathEnd> {
        if let Some(end) = self.paths.get(path) {
            return Some(*end);
        }
        let mut at = self.local?;
        for &port in path {
            at = *self.neighbors.get(&(at.node_guid, port))?;
        }
        Some(at)
    }

    fn candidates(&self, path: &[u8]) -> Vec<u64> {
        let mut out = Vec::with_capacity(3);
        if let Some(end) = self.end_of(path) {
            if let Some(&k) = self.keys.get(&end.port_guid).filter(|_| self.lookup) {
                out.push(k);
            }
            let wanted = self.config.wanted(end.port_guid);
            if !out.contains(&wanted) {
                out.push(wanted);
            }
        }
        // With per-port keys the configured key is the derivation secret:
        // it must never go on the wire, where whatever answers at the end
        // of a path would read it. A port not known yet is asked with 0
        // (a port without a key, or at protection level 0 or 1, answers
        // Gets whatever the key).
        if !self.config.per_port && !out.contains(&self.config.m_key) {
            out.push(self.config.m_key);
        }
        if out.is_empty() {
            out.push(0);
        }
        out
    }
}

/// Where `guid2mkey` lives: the file configured, else `guid2mkey` in the
/// dump directory (beside `guid2lid`), else nowhere.
pub fn guid2mkey_path(file: Option<&Path>, dump_dir: Option<&Path>) -> Option<PathBuf> {
    file.map(Path::to_path_buf).or_else(|| dump_dir.map(|d| d.join("guid2mkey")))
}

fn neighbors_path(guid2mkey: &Path) -> PathBuf {
    guid2mkey.with_file_name(match guid2mkey.file_name() {
        Some(name) => format!("{}.neighbors", name.to_string_lossy()),
        None => "neighbors".to_string(),
    })
}

fn read_text(path: &Path) -> Result<Option<String>, MKeyError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MKeyError::Io { path: path.to_path_buf(), source }),
    }
}

fn parse_hex(word: &str) -> Option<u64> {
    u64::from_str_radix(word.strip_prefix("0x").or_else(|| word.strip_prefix("0X"))?, 16).ok()
}

/// `guid2mkey`: one `0xGUID 0xKEY` per line, as OpenSM writes it; `#`
/// starts a comment.
fn read_guid2mkey(path: &Path) -> Result<BTreeMap<u64, u64>, MKeyError> {
    let mut keys = BTreeMap::new();
    let Some(text) = read_text(path)? else { return Ok(keys) };
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| MKeyError::Parse { path: path.to_path_buf(), line: i + 1, why: why.to_string() };
        let mut words = line.split_whitespace();
        let (Some(guid), Some(key), None) = (words.next(), words.next(), words.next()) else {
            return Err(bad("expected `0xGUID 0xKEY`"));
        };
        let guid = parse_hex(guid).ok_or_else(|| bad("GUID is not 0x-hex"))?;
        let key = parse_hex(key).ok_or_else(|| bad("M_Key is not 0x-hex"))?;
        keys.insert(guid, key);
    }
    Ok(keys)
}

fn end_words(end: &PathEnd) -> String {
    let kind = if end.switch { "switch" } else { "ca" };
    format!("{:#018x} {:#018x} {kind}", end.node_guid, end.port_guid)
}

type Neighbors = (Option<PathEnd>, BTreeMap<(u64, u8), PathEnd>);

fn read_neighbors(path: &Path) -> Result<Neighbors, MKeyError> {
    let mut local = None;
    let mut neighbors = BTreeMap::new();
    let Some(text) = read_text(path)? else { return Ok((local, neighbors)) };
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = || MKeyError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            why: "expected `0xNODEGUID:PORT 0xNODEGUID 0xPORTGUID switch|ca` or `local 0xNODEGUID 0xPORTGUID ca`"
                .to_string(),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let (first, node, port, switch) = match words.as_slice() {
            [first, node, port, "switch"] => (*first, *node, *port, true),
            [first, node, port, "ca"] => (*first, *node, *port, false),
            _ => return Err(bad()),
        };
        let end = PathEnd {
            node_guid: parse_hex(node).ok_or_else(bad)?,
            port_guid: parse_hex(port).ok_or_else(bad)?,
            switch,
        };
        if first == "local" {
            local = Some(end);
        } else {
            let (via_node, via_port) = first.split_once(':').ok_or_else(bad)?;
            let via_node = parse_hex(via_node).ok_or_else(bad)?;
            let via_port: u8 = via_port.parse().map_err(|_| bad())?;
            neighbors.insert((via_node, via_port), end);
        }
    }
    Ok((local, neighbors))
}

/// Replaces `path` with `bytes`: written to a fresh temporary file beside
/// it (mode 0600, O_EXCL so nothing planted there is reused), synced,
/// renamed over, and the directory synced so the rename survives a crash.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), MKeyError> {
    let io = |source| MKeyError::Io { path: path.to_path_buf(), source };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    // A leftover of a crashed run of the same PID.
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn on(per_port: bool) -> MKeyConfig {
        MKeyConfig { m_key: 0x1234_5678_9abc_def0, protect_bits: 2, lease_period: 0, per_port }
    }

    #[test]
    fn per_port_keys_differ_by_guid_and_secret_and_are_never_zero() {
        let a = derive_port_key(7, 0x0002_c903_0000_0001);
        assert_eq!(a, derive_port_key(7, 0x0002_c903_0000_0001));
        assert_ne!(a, derive_port_key(7, 0x0002_c903_0000_0002));
        assert_ne!(a, derive_port_key(8, 0x0002_c903_0000_0001));
        assert_ne!(a, 0);
        assert_eq!(on(false).wanted(5), on(false).m_key);
        assert_eq!(on(true).wanted(5), derive_port_key(on(true).m_key, 5));
    }

    #[test]
    fn off_unless_a_key_is_configured() {
        let keys = MKeys::new(MKeyConfig { protect_bits: 2, ..MKeyConfig::default() }, None).unwrap();
        assert!(!keys.enabled());
        assert_eq!(keys.key_for(&[1, 2], 0), 0);
        let mut data = [0xAAu8; 64];
        assert!(!keys.stamp(&[], 0, &mut data));
        assert!(data.iter().all(|&b| b == 0xAA));
        assert!(matches!(
            MKeys::new(MKeyConfig { protect_bits: 4, ..on(false) }, None),
            Err(MKeyError::ProtectBits(4))
        ));
    }

    #[test]
    fn candidates_follow_what_was_learnt() {
        let keys = MKeys::new(on(true), None).unwrap();
        let base = on(true).m_key;
        // Nothing known: never the secret, 0.
        assert_eq!((keys.key_for(&[1], 0), keys.key_for(&[1], 1)), (0, 0));
        keys.learn_node(&[], 0x10, 0x11, false);
        keys.learn_node(&[1], 0x20, 0x20, true);
        let wanted = derive_port_key(base, 0x20);
        assert_eq!(keys.key_for(&[1], 0), wanted);
        assert_eq!(keys.key_for(&[1], 1), wanted);
        assert!((0..4).all(|a| keys.key_for(&[1], a) != base), "the secret stays home");
        // Port 3 of the switch does not hold the switch's key.
        keys.learn_key(&[1], 3, 0x98);
        assert_eq!(keys.recorded(0x20), None);
        keys.learn_key(&[1], 0, 0x99);
        assert_eq!([0, 1, 2].map(|a| keys.key_for(&[1], a)), [0x99, wanted, 0x99]);
        // One subnet key: it is every port's, and the last resort.
        let shared = MKeys::new(on(false), None).unwrap();
        assert_eq!(shared.key_for(&[1], 0), base);
        shared.learn_node(&[], 0x10, 0x11, false);
        shared.learn_key(&[], 1, 0x42);
        assert_eq!([0, 1, 2].map(|a| shared.key_for(&[], a)), [0x42, base, 0x42]);
        // A zero in an answer is a hidden key, not a key.
        keys.learn_key(&[1], 0, 0);
        assert_eq!(keys.recorded(0x20), Some(0x99));
        let mut data = [0u8; 64];
        assert!(!keys.stamp(&[1], 2, &mut data), "a switch's external port");
        assert!(keys.stamp(&[1], 0, &mut data));
        let p = PortInfoPacket::new_checked(&data[..]).unwrap();
        assert_eq!((p.m_key(), p.m_key_protect_bits(), p.m_key_lease_period()), (wanted, 2, 0));
        assert!(!keys.stamp(&[4, 4], 1, &mut data), "unknown port");
    }

    #[test]
    fn without_lookup_only_the_configured_key_is_tried() {
        let base = on(false).m_key;
        let shared = MKeys::new(on(false), None).unwrap().without_lookup();
        shared.learn_node(&[], 0x10, 0x11, false);
        shared.learn_key(&[], 1, 0x42);
        assert_eq!(shared.recorded(0x11), Some(0x42), "still recorded");
        assert_eq!([0, 1, 2].map(|a| shared.key_for(&[], a)), [base; 3]);
        // With lookup (the default) the recorded key comes first.
        let looked = MKeys::new(on(false), None).unwrap();
        looked.learn_node(&[], 0x10, 0x11, false);
        looked.learn_key(&[], 1, 0x42);
        assert_eq!(looked.key_for(&[], 0), 0x42);
    }

    #[test]
    fn files_survive_a_restart_private_and_the_path_walk_finds_ports() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("guid2mkey");
        let keys = MKeys::new(on(true), Some(&file)).unwrap();
        keys.learn_node(&[], 0x10, 0x11, false);
        keys.learn_node(&[1], 0x20, 0x20, true);
        keys.learn_node(&[1, 3], 0x30, 0x31, false);
        keys.learn_key(&[1, 3], 2, 0x77);
        keys.flush().unwrap();
        for f in [&file, &neighbors_path(&file)] {
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
        }
        assert!(std::fs::read_to_string(&file).unwrap().contains("0x0000000000000031 0x0000000000000077"));
        let again = MKeys::new(on(true), Some(&file)).unwrap();
        assert_eq!(again.port_at(&[]), Some(0x11));
        assert_eq!(again.port_at(&[1]), Some(0x20));
        assert_eq!(again.port_at(&[1, 3]), Some(0x31));
        assert_eq!(again.key_for(&[1, 3], 0), 0x77);
        assert_eq!(again.port_at(&[2]), None);
    }

    proptest::proptest! {
        // The files are read at start from a directory an operator may
        // share: whatever is in them, reading never panics.
        #[test]
        fn any_file_text_reads_or_is_refused(text in "(0x[0-9a-f]{0,17}|:|[0-9]{1,4}| |\\n|local|switch|ca|#|\\PC){0,40}") {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("guid2mkey");
            std::fs::write(&file, &text).unwrap();
            std::fs::write(neighbors_path(&file), &text).unwrap();
            let _ = MKeys::new(on(true), Some(&file));
        }
    }

    #[test]
    fn bad_files_are_refused_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("guid2mkey");
        std::fs::write(&file, "0x1 0x2\n# note\n0x3 banana\n").unwrap();
        match MKeys::new(on(false), Some(&file)) {
            Err(MKeyError::Parse { line: 3, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
