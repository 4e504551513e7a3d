//! Quality of service as OpenSM configures it: the `qos_*` keys of
//! opensm.conf give, per port class (CAs, switch port 0, switch external
//! ports, routers), the SL2VL map and the VL arbitration tables written
//! where the routing engine supplies none ([`tables`]); `qos-policy.conf`
//! ([`policy`]) chooses the SL of a PathRecord, as far as the engine's own
//! SLs allow ([`decide_sl`]).
//!
//! Values are read in OpenSM's syntax (`"0:4,1:0,..."`, `"0,1,...,7"`) and
//! its defaults (include/opensm/osm_base.h). Unlike OpenSM, which warns and
//! then reads what it can, a malformed value is an error: a table silently
//! different from the file is what a move between SMs must not have.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use tracing::warn;



pub mod policy;
pub mod tables;

pub use policy::{PolicyError, QosPolicy};

/// OpenSM's `OSM_DEFAULT_QOS_MAX_VLS`.
pub const DEFAULT_MAX_VLS: u8 = 15;
/// OpenSM's `OSM_DEFAULT_QOS_HIGH_LIMIT`.
pub const DEFAULT_HIGH_LIMIT: u8 = 0;
/// OpenSM's `OSM_DEFAULT_QOS_VLARB_HIGH`.
pub const DEFAULT_VLARB_HIGH: &str = "0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0,8:0,9:0,10:0,11:0,12:0,13:0,14:0";
/// OpenSM's `OSM_DEFAULT_QOS_VLARB_LOW`.
pub const DEFAULT_VLARB_LOW: &str = "0:0,1:4,2:4,3:4,4:4,5:4,6:4,7:4,8:4,9:4,10:4,11:4,12:4,13:4,14:4";
/// OpenSM's `OSM_DEFAULT_QOS_SL2VL`.
pub const DEFAULT_SL2VL: &str = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7";
/// OpenSM's default policy file (`OSM_DEFAULT_QOS_POLICY_FILE`).
pub const DEFAULT_POLICY_FILE: &str = "/etc/opensm/qos-policy.conf";
/// Entries of a VLArb table (two blocks of 32).
pub const VLARB_ENTRIES: usize = 64;

/// A `qos_*` value that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum QosError {
    /// The key and what is wrong with its value.
    #[error("{key}: {message}")]
    Value {
        /// The key, e.g. `qos_ca_sl2vl`.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// A C `strtoul(.., 0)` number: decimal, `0x` hex or leading-`0` octal.
fn c_number(t: &str) -> Option<u64> {
    let t = t.trim();
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if t.len() > 1 && t.starts_with('0') {
        u64::from_str_radix(&t[1..], 8).ok()
    } else {
        t.parse().ok()
    }
}

/// A VLArb list, `"vl:weight,vl:weight,..."`: 1 to 64 entries, VLs 0-14,
/// weights 0-255. Entries not listed are VL 0 weight 0, as OpenSM fills
/// them.
pub fn parse_vlarb(text: &str) -> Result<Vec<(u8, u8)>, String> {
    let mut out = Vec::new();
    for (i, item) in text.split(',').enumerate() {
        let (vl, weight) = item
            .split_once(':')
            .ok_or_else(|| format!("entry {} `{}` is not vl:weight", i + 1, item.trim()))?;
        let vl = c_number(vl).filter(|&v| v <= 14).ok_or_else(|| format!("entry {}: VL `{}` is not 0-14", i + 1, vl.trim()))?;
        let weight = c_number(weight)
            .filter(|&w| w <= 255)
            .ok_or_else(|| format!("entry {}: weight `{}` is not 0-255", i + 1, weight.trim()))?;
        out.push((vl as u8, weight as u8));
    }
    if out.len() > VLARB_ENTRIES {
        return Err(format!("{} entries: a VLArb table holds at most {VLARB_ENTRIES}", out.len()));
    }
    Ok(out)
}

/// An SL2VL list: 16 VLs (0-15, 15 drops), SL 0 first.
pub fn parse_sl2vl(text: &str) -> Result<[u8; 16], String> {
    let vls = text
        .split(',')
        .enumerate()
        .map(|(i, t)| c_number(t).filter(|&v| v <= 15).map(|v| v as u8).ok_or_else(|| format!("SL {i}: VL `{}` is not 0-15", t.trim())))
        .collect::<Result<Vec<u8>, String>>()?;
    vls.try_into().map_err(|v: Vec<u8>| format!("{} VLs: one for each of the 16 SLs is needed", v.len()))
}

/// The QoS parameters of one port class (OpenSM's `struct qos_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosClass {
    /// `*_max_vls` (read, not used, as in OpenSM).
    pub max_vls: u8,
    /// `*_high_limit`: PortInfo:VLHighLimit.
    pub high_limit: u8,
    /// `*_vlarb_high`, 64 (VL, weight) entries.
    pub vlarb_high: [(u8, u8); VLARB_ENTRIES],
    /// `*_vlarb_low`, 64 (VL, weight) entries.
    pub vlarb_low: [(u8, u8); VLARB_ENTRIES],
    /// `*_sl2vl`: VL by SL.
    pub sl2vl: [u8; 16],
}

/// One of the five `qos*` key sets of the configuration, as written
/// (OpenSM's syntax, not parsed yet): one class's own keys, or the shared
/// `qos_*` ones they fall back on.
#[derive(Debug, Clone, Copy, Default)]
pub struct QosKeys<'a> {
    /// The keys' prefix (`qos`, `qos_ca`, ...), for error messages.
    pub prefix: &'static str,
    /// `*_max_vls`.
    pub max_vls: Option<u8>,
    /// `*_high_limit`.
    pub high_limit: Option<u8>,
    /// `*_vlarb_high`.
    pub vlarb_high: Option<&'a str>,
    /// `*_vlarb_low`.
    pub vlarb_low: Option<&'a str>,
    /// `*_sl2vl`.
    pub sl2vl: Option<&'a str>,
}

/// What the configuration says of QoS, as written: [`QosSettings::build`]
/// parses and checks it.
#[derive(Debug, Clone, Copy, Default)]
pub struct QosKeySets<'a> {
    /// `qos`.
    pub enabled: bool,
    /// `qos_policy_file`.
    pub policy_file: Option<&'a Path>,
    /// `qos_*`, what every class falls back on.
    pub shared: QosKeys<'a>,
    /// `qos_ca_*`.
    pub ca: QosKeys<'a>,
    /// `qos_sw0_*`.
    pub sw0: QosKeys<'a>,
    /// `qos_swe_*`.
    pub swe: QosKeys<'a>,
    /// `qos_rtr_*`.
    pub rtr: QosKeys<'a>,
}

impl QosClass {
    /// OpenSM's `qos_build_config`: each value from the class's key, else
    /// the shared `qos_*` key, else OpenSM's default. `max_vls` 0 means
    /// unset, as in OpenSM.
    fn build(own: &QosKeys<'_>, shared: &QosKeys<'_>) -> Result<Self, QosError> {
        let pick = |field: &'static str, o: Option<&str>, s: Option<&str>, dflt: &'static str| -> (String, String) {
            match (o, s) {
                (Some(v), _) => (format!("{}_{field}", own.prefix), v.to_string()),
                (None, Some(v)) => (format!("{}_{field}", shared.prefix), v.to_string()),
                (None, None) => (format!("{}_{field}", shared.prefix), dflt.to_string()),
            }
        };
        let arb = |field: &'static str, o, s, dflt| -> Result<[(u8, u8); VLARB_ENTRIES], QosError> {
            let (key, text) = pick(field, o, s, dflt);
            let list = parse_vlarb(&text).map_err(|message| QosError::Value { key, message })?;
            let mut table = [(0u8, 0u8); VLARB_ENTRIES];
            table[..list.len()].copy_from_slice(&list);
            Ok(table)
        };
        let (key, text) = pick("sl2vl", own.sl2vl, shared.sl2vl, DEFAULT_SL2VL);
        let sl2vl = parse_sl2vl(&text).map_err(|message| QosError::Value { key, message })?;
        Ok(QosClass {
            max_vls: own.max_vls.filter(|&v| v > 0).or(shared.max_vls.filter(|&v| v > 0)).unwrap_or(DEFAULT_MAX_VLS),
            high_limit: own.high_limit.or(shared.high_limit).unwrap_or(DEFAULT_HIGH_LIMIT),
            vlarb_high: arb("vlarb_high", own.vlarb_high, shared.vlarb_high, DEFAULT_VLARB_HIGH)?,
            vlarb_low: arb("vlarb_low", own.vlarb_low, shared.vlarb_low, DEFAULT_VLARB_LOW)?,
            sl2vl,
        })
    }
}

/// Everything `qos*` of the configuration, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosSettings {
    /// `qos`: whether tables are programmed and the policy applies.
    pub enabled: bool,
    /// The policy file to read.
    pub policy_file: PathBuf,
    /// CA ports (`qos_ca_*`).
    pub ca: QosClass,
    /// Switch port 0, when enhanced (`qos_sw0_*`).
    pub sw0: QosClass,
    /// Switch external ports (`qos_swe_*`).
    pub swe: QosClass,
    /// Router ports (`qos_rtr_*`).
    pub rtr: QosClass,
}

impl QosSettings {
    /// The settings `keys` give; an error names the key whose value is
    /// malformed. Values are checked whether or not `qos` is on, so a file
    /// that will fail once QoS is turned on fails at once.
    pub fn build(keys: &QosKeySets<'_>) -> Result<Self, QosError> {
        Ok(QosSettings {
            enabled: keys.enabled,
            policy_file: keys.policy_file.map_or_else(|| PathBuf::from(DEFAULT_POLICY_FILE), Path::to_path_buf),
            ca: QosClass::build(&keys.ca, &keys.shared)?,
            sw0: QosClass::build(&keys.sw0, &keys.shared)?,
            swe: QosClass::build(&keys.swe, &keys.shared)?,
            rtr: QosClass::build(&keys.rtr, &keys.shared)?,
        })
    }
}

/// Reads `settings.policy_file` when QoS is on: the policy PathRecords
/// follow from now on, which the caller keeps (the daemon's SA database
/// carries it; see `sa::db::SaDb::with_qos_policy`). A file that does not
/// exist is no policy (as OpenSM); a file with errors is logged
/// (file:line) and `current`, the last good policy, stays.
pub fn load_policy(settings: &QosSettings, current: Option<Arc<QosPolicy>>) -> Option<Arc<QosPolicy>> {
    if !settings.enabled {
        return None;
    }
    match load_policy_file(&settings.policy_file) {
        Ok(Some(p)) => {
            for w in &p.warnings {
                warn!("{w}");
            }
            Some(Arc::new(p))
        }
        Ok(None) => None,
        Err(e) => {
            let kept = if current.is_some() { "the last good policy is kept" } else { "no policy applies" };
            warn!("QoS policy not loaded: {e}; {kept}");
            current
        }
    }
}

/// The policy in `path`; `Ok(None)` if there is no such file.
pub fn load_policy_file(path: &Path) -> Result<Option<QosPolicy>, PolicyError> {
    match std::fs::read_to_string(path) {
        Ok(text) => QosPolicy::parse(&text, path).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PolicyError::Io { path: path.to_path_buf(), message: e.to_string() }),
    }
}

/// What a PathRecord query says that a policy matches on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathQuery {
    /// ServiceID, when the query's component mask has it.
    pub service_id: Option<u64>,
    /// P_Key, when the query's component mask has it.
    pub pkey: Option<u16>,
    /// QoSClass, when the query's component mask has it.
    pub qos_class: Option<u16>,
    /// Source port GUID.
    pub source_guid: u64,
    /// Destination port GUID.
    pub destination_guid: u64,
}

/// The SL of a path: the policy's choice for `query`, unless the engine's
/// SLs are what keeps its routing deadlock free (`engine_binds`: a routing
/// whose path SLs are not uniform, such as torus-2QoS's, lash's, dfsssp's
/// or nue's layers, or one whose engine brought its own SL2VL maps) and
/// the policy asks for another SL; then the engine's SL is used. The
/// second value is the SL the policy asked for in that case, for the
/// caller to log (the SA does, once per distinct pair of SLs).
pub fn decide_sl(policy: Option<&QosPolicy>, query: &PathQuery, engine_sl: u8, engine_binds: bool) -> (u8, Option<u8>) {
    let Some(want) = policy.and_then(|p| p.sl_for(query)) else {
        return (engine_sl, None);
    };
    if want == engine_sl || !engine_binds {
        return (want, None);
    }
    (engine_sl, Some(want))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opensm_defaults_parse() {
        let keys = QosKeySets { shared: QosKeys { prefix: "qos", ..QosKeys::default() }, ..QosKeySets::default() };
        let s = QosSettings::build(&keys).unwrap();
        assert!(!s.enabled);
        assert_eq!(s.policy_file, PathBuf::from(DEFAULT_POLICY_FILE));
        assert_eq!(s.ca.sl2vl, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7]);
        assert_eq!(s.swe.vlarb_high[0], (0, 4));
        assert_eq!(s.swe.vlarb_high[1], (1, 0));
        assert_eq!(s.swe.vlarb_low[0], (0, 0));
        assert_eq!(s.swe.vlarb_low[14], (14, 4));
        assert_eq!(s.swe.vlarb_low[15], (0, 0), "not listed: VL 0 weight 0");
        assert_eq!((s.rtr.max_vls, s.sw0.high_limit), (DEFAULT_MAX_VLS, DEFAULT_HIGH_LIMIT));
    }

    #[test]
    fn malformed_tables_are_refused() {
        assert!(parse_vlarb("0-4").is_err());
        assert!(parse_vlarb(&vec!["1:1"; 65].join(",")).is_err());
        assert_eq!(parse_vlarb(&vec!["1:1"; 64].join(",")).unwrap().len(), 64);
        assert!(parse_sl2vl("0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,16").is_err());
        assert_eq!(parse_sl2vl(DEFAULT_SL2VL).unwrap()[15], 7);
    }

    #[test]
    fn the_engine_wins_only_where_its_sls_matter() {
        let p = QosPolicy::parse("qos-ulps\n default : 3\n any, service-id 0x10 : 5\nend-qos-ulps\n", Path::new("q")).unwrap();
        let q = PathQuery { service_id: Some(0x10), ..PathQuery::default() };
        assert_eq!(decide_sl(Some(&p), &q, 0, false), (5, None), "uniform engine SL: the policy decides");
        assert_eq!(decide_sl(Some(&p), &q, 2, true), (2, Some(5)), "layered engine: its SL");
        assert_eq!(decide_sl(Some(&p), &q, 5, true), (5, None));
        assert_eq!(decide_sl(Some(&p), &PathQuery::default(), 0, false), (3, None), "default");
        assert_eq!(decide_sl(None, &q, 1, false), (1, None), "no policy: the engine's SL");
    }
}
