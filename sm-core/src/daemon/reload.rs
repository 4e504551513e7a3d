//! Re-reading the configuration file on SIGHUP, as OpenSM does for the
//! options it marks as updatable at runtime.
//!
//! The new file is compared with the one in force key by key. Keys that
//! take effect at the next heavy sweep (routing engine and engine options,
//! sweep interval, link parameters, partitions and QoS) are applied; keys
//! that are bound to what the SM set up at start (its port, keys, LMC,
//! logging, performance manager, sockets) keep their running value, and
//! the log names them as needing a restart. The command line the SM
//! started with is laid over every re-read file as it was over the first:
//! a flag stays in force across reloads whatever the file says (the log
//! names a change the flag overrides), and every key no flag gives comes
//! from the file. A file that does not parse
//! leaves the configuration in force untouched: a typo made while the SM
//! runs must not take the fabric with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{opensm, Config, ConfigError};
use crate::settings::CommandLine;

/// Keys whose running value is kept until a restart: each is used once at
/// start (the port, keys written into every port, LMC the LIDs were
/// spaced by, the threads and sockets the SM opened).
pub const RESTART_ONLY: &[&str] = &[
    "guid",
    "lmc",
    "m_key",
    "m_key_lease_period",
    "m_key_protection_level",
    "m_key_per_port",
    "guid2mkey",
    "sm_key",
    "sm_priority",
    "sminfo_polling_timeout",
    "polling_retry_number",
    "subnet_prefix",
    "sm_sl",
    "packet_life_time",
    "no_clients_rereg",
    "reassign_lids",
    "max_wire_smps",
    "transaction_timeout",
    "transaction_retries",
    "use_ucast_cache",
    "incremental_sweep",
    "full_sweep_every",
    "engine_dirs",
    "control_socket",
    "metrics_listen",
    "pid_file",
    "dump_dir",
    "log_file",
    "log_max_size",
    "accum_log_file",
    "log_flags",
    "log_format",
    "syslog",
    "perfmgr",
    "perfmgr_sweep_time_s",
    "perfmgr_max_outstanding_queries",
    "perfmgr_ignore_cas",
    "perfmgr_log_errors",
    "perfmgr_xmit_wait_log",
    "perfmgr_xmit_wait_threshold",
    "perfmgr_thresholds",
    "congestion_control",
    "cc_key",
    "cc_max_outstanding_mads",
    "cc_sw_cong_setting_control_map",
    "cc_sw_cong_setting_victim_mask",
    "cc_sw_cong_setting_credit_mask",
    "cc_sw_cong_setting_threshold",
    "cc_sw_cong_setting_packet_size",
    "cc_sw_cong_setting_credit_starvation_threshold",
    "cc_sw_cong_setting_credit_starvation_return_delay",
    "cc_sw_cong_setting_marking_rate",
    "cc_ca_cong_setting_port_control",
    "cc_ca_cong_setting_control_map",
    "cc_ca_cong_setting_ccti_timer",
    "cc_ca_cong_setting_ccti_increase",
    "cc_ca_cong_setting_trigger_threshold",
    "cc_ca_cong_setting_ccti_min",
    "cc_cct",
];

/// The configuration file the SM started with, and the command line it
/// started with, laid over the file at every re-read.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    /// The file.
    pub path: PathBuf,
    /// Its text as last applied.
    pub text: String,
    /// What the command line set, which wins over the file.
    pub command_line: CommandLine,
}

impl ConfigSource {
    /// Reads `path` as it is now (the text the SM started with).
    pub fn read(path: &Path, command_line: CommandLine) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
        Ok(Self { path: path.to_path_buf(), text, command_line })
    }
}

/// The outcome of one re-read.
#[derive(Debug, Clone, PartialEq)]
pub struct Reread {
    /// The configuration to run with: the new file, with the
    /// restart-only keys at their running values.
    pub config: Config,
    /// The new text (what the next re-read compares with).
    pub text: String,
    /// Keys whose change takes effect.
    pub applied: Vec<String>,
    /// Keys whose change waits for a restart.
    pub kept: Vec<String>,
    /// Keys the file changed but a command-line flag gives, which wins.
    pub overridden: Vec<String>,
}

fn is_toml(path: &Path, text: &str) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml")) || !opensm::is_opensm_format(text)
}

/// `key value` pairs of an opensm.conf (later lines win, comments dropped).
fn opensm_pairs(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|raw| {
            let line = raw.split('#').next().unwrap_or("").trim();
            let (k, v) = line.split_once([' ', '\t']).unwrap_or((line, ""));
            (!k.is_empty()).then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// The keys that differ between `old` and `new`: (applied, kept). A kept
/// (restart-only) key gets its old value back in `new`.
fn split_changes<V: PartialEq + Clone>(old: &BTreeMap<String, V>, new: &mut BTreeMap<String, V>) -> (Vec<String>, Vec<String>) {
    let (mut applied, mut kept) = (Vec::new(), Vec::new());
    let keys: std::collections::BTreeSet<String> = old.keys().chain(new.keys()).cloned().collect();
    for k in keys {
        if old.get(&k) == new.get(&k) {
            continue;
        }
        if RESTART_ONLY.contains(&k.as_str()) {
            match old.get(&k) {
                Some(v) => new.insert(k.clone(), v.clone()),
                None => new.remove(&k),
            };
            kept.push(k);
        } else {
            applied.push(k);
        }
    }
    (applied, kept)
}

/// Reads `new_text` (the file at `path` now) against `old_text` (the file
/// in force), then lays `command_line` over it as at start.
pub fn reread(path: &Path, old_text: &str, new_text: &str, command_line: &CommandLine) -> Result<Reread, ConfigError> {
    let parse_err = |message: String| ConfigError::Parse { path: path.to_path_buf(), line: 0, message };
    // Check the new file as it is first: its errors name its own lines.
    Config::parse_any(new_text, path)?;
    let (merged, applied, kept) = if is_toml(path, new_text) {
        let old: BTreeMap<String, toml::Value> =
            if is_toml(path, old_text) { toml::from_str::<toml::Table>(old_text).unwrap_or_default().into_iter().collect() } else { BTreeMap::new() };
        let new: toml::Table = toml::from_str(new_text).map_err(|e| parse_err(e.to_string()))?;
        let mut new: BTreeMap<String, toml::Value> = new.into_iter().collect();
        let (applied, kept) = split_changes(&old, &mut new);
        let table: toml::Table = new.into_iter().collect();
        (toml::to_string(&table).map_err(|e| parse_err(e.to_string()))?, applied, kept)
    } else {
        let old = if is_toml(path, old_text) { BTreeMap::new() } else { opensm_pairs(old_text) };
        let mut new = opensm_pairs(new_text);
        let (applied, kept) = split_changes(&old, &mut new);
        (new.iter().map(|(k, v)| format!("{k} {v}\n")).collect(), applied, kept)
    };
    let mut config = Config::parse_any(&merged, path)?;
    let flagged = command_line.apply(&mut config);
    let (applied, kept, overridden) = split_flagged(applied, kept, &flagged);
    Ok(Reread { config, text: new_text.to_string(), applied, kept, overridden })
}

/// Takes the keys a flag gives out of the file's changes: (applied, kept,
/// overridden).
fn split_flagged(applied: Vec<String>, kept: Vec<String>, flagged: &[String]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let by_flag = |k: &String| flagged.binary_search(k).is_ok();
    let mut overridden: Vec<String> = applied.iter().chain(&kept).filter(|k| by_flag(k)).cloned().collect();
    overridden.sort();
    let keep = |v: Vec<String>| v.into_iter().filter(|k| !by_flag(k)).collect();
    (keep(applied), keep(kept), overridden)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_keys_apply_and_restart_keys_keep_their_running_value() {
        let path = Path::new("/etc/opensm/opensm.conf");
        let old = "sweep_interval 10\nlmc 0\nrouting_engine minhop\n";
        let new = "# edited\nsweep_interval 2\nlmc 2\nrouting_engine updn,minhop\n";
        let r = reread(path, old, new, &CommandLine::default()).expect("valid");
        assert_eq!(r.applied, ["routing_engine", "sweep_interval"]);
        assert_eq!(r.kept, ["lmc"]);
        assert_eq!(r.config.sweep_interval, Some(2.0));
        assert_eq!(r.config.routing_engine.as_deref(), Some("updn,minhop"));
        assert_eq!(r.config.lmc, 0, "LMC waits for a restart");
    }

    #[test]
    fn toml_files_are_compared_by_key() {
        let path = Path::new("/etc/smcore/smcore.toml");
        let old = "sweep_interval = 10.0\nsm_key = 7\n";
        let new = "sweep_interval = 1.0\nsm_key = 8\nqos = true\n";
        let r = reread(path, old, new, &CommandLine::default()).expect("valid");
        assert_eq!(r.applied, ["qos", "sweep_interval"]);
        assert_eq!(r.kept, ["sm_key"]);
        assert_eq!((r.config.sweep_interval, r.config.sm_key, r.config.qos), (Some(1.0), Some(7), true));
    }

    /// `smcore --engines torus-2QoS,no_fallback --torus-config T --lmc 1
    /// --dump-dir D --sweep-interval 5`.
    fn torus_command_line() -> CommandLine {
        let mut c = CommandLine::default();
        c.options.insert("torus_config".into(), "/etc/smcore/torus-2QoS.conf".into());
        c.overrides.engines = Some("torus-2QoS,no_fallback".into());
        c.overrides.lmc = Some(1);
        c.overrides.dump_dir = Some(PathBuf::from("/var/lib/smcore"));
        c.overrides.sweep_interval = Some(5.0);
        c
    }

    #[test]
    fn the_command_line_stays_in_force_when_the_file_is_unchanged() {
        let path = Path::new("/etc/opensm/opensm.conf");
        let text = "sweep_interval 10\nrouting_engine minhop\nqos FALSE\n";
        let r = reread(path, text, text, &torus_command_line()).expect("valid");
        assert!(r.applied.is_empty() && r.kept.is_empty() && r.overridden.is_empty(), "{r:?}");
        let c = &r.config;
        assert_eq!(c.options.get("torus_config").and_then(|v| v.as_str()), Some("/etc/smcore/torus-2QoS.conf"));
        assert!(c.engine_text("torus-2QoS").contains("torus_config = \"/etc/smcore/torus-2QoS.conf\""), "{}", c.engine_text("torus-2QoS"));
        assert!(c.engine_text("torus-2QoS").contains("lmc = 1"));
        assert_eq!(c.routing_engine.as_deref(), Some("torus-2QoS,no_fallback"));
        assert_eq!((c.lmc, c.sweep_interval), (1, Some(5.0)));
        assert_eq!(c.dump_dir.as_deref(), Some(Path::new("/var/lib/smcore")));
    }

    #[test]
    fn a_file_change_to_a_key_a_flag_gives_is_overridden_and_others_apply() {
        for (path, old, new) in [
            ("/etc/opensm/opensm.conf", "sweep_interval 10\n", "sweep_interval 2\nrouting_engine updn\ntorus_config /tmp/x\nlmc 2\nqos TRUE\n"),
            (
                "/etc/smcore/smcore.toml",
                "sweep_interval = 10.0\n",
                "sweep_interval = 2.0\nrouting_engine = \"updn\"\ntorus_config = \"/tmp/x\"\nlmc = 2\nqos = true\n",
            ),
        ] {
            let r = reread(Path::new(path), old, new, &torus_command_line()).expect("valid");
            assert_eq!(r.overridden, ["lmc", "routing_engine", "sweep_interval", "torus_config"], "{path}");
            assert_eq!((r.applied.as_slice(), r.kept.as_slice()), (&["qos".to_string()][..], &[][..]), "{path}");
            let c = &r.config;
            assert_eq!(c.options.get("torus_config").and_then(|v| v.as_str()), Some("/etc/smcore/torus-2QoS.conf"), "{path}");
            assert_eq!((c.lmc, c.sweep_interval, c.qos), (1, Some(5.0), true), "{path}");
            assert_eq!(c.routing_engine.as_deref(), Some("torus-2QoS,no_fallback"), "{path}");
        }
    }

    #[test]
    fn keys_no_flag_gives_come_from_the_file() {
        let path = Path::new("/etc/opensm/opensm.conf");
        let r = reread(path, "", "root_guid_file /etc/roots\n", &torus_command_line()).expect("valid");
        assert_eq!(r.applied, ["root_guid_file"]);
        assert_eq!(r.config.options.get("root_guid_file").and_then(|v| v.as_str()), Some("/etc/roots"));
        assert_eq!(r.config.options.get("torus_config").and_then(|v| v.as_str()), Some("/etc/smcore/torus-2QoS.conf"));
    }

    #[test]
    fn a_file_that_does_not_parse_is_an_error_naming_its_line() {
        let path = Path::new("/etc/opensm/opensm.conf");
        let e = reread(path, "sweep_interval 10\n", "sweep_interval 10\nsweep_intervall 3\n", &CommandLine::default()).expect_err("typo");
        assert!(e.to_string().contains("opensm.conf:2"), "{e}");
    }
}
