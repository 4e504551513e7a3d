//! # The SM's settings, resolved
//!
//! Each setting of the running SM comes from a command-line flag, else
//! its config key (smcore.toml, or opensm.conf read as is), else its
//! default. [`SmSettings::resolve`] and [`DaemonSettings::resolve`] apply
//! those rules in one place, from [`Overrides`] (what the command line or
//! any other front end gave, without its parser) and a
//! [`Config`]; they read no file, open no device
//! and refuse a value out of range with a [`SettingsError`] that names the
//! flag or key it came from.
//!
//! [`SmSettings`] is what every run needs, `--once` included, and is
//! checked before any SMP goes out, so a typo costs nothing on the
//! fabric; [`DaemonSettings`] is what only the SM loop needs (election,
//! control socket, metrics, pid file).
//!
//! OpenSM's keys keep their units in the config and are converted here:
//! `sminfo_polling_timeout` counts milliseconds (the flag
//! `--sm-poll-interval` seconds) and `guid 0` means "no port chosen".

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{
    Config, DEFAULT_MAX_WIRE_SMPS, DEFAULT_SM_KEY, DEFAULT_TRANSACTION_RETRIES, DEFAULT_TRANSACTION_TIMEOUT_MS,
};
use crate::standby::{StandbyOptions, DEFAULT_POLL_INTERVAL, DEFAULT_POLL_RETRIES, MAX_PRIORITY};
use crate::sweep::DEFAULT_SUBNET_PREFIX;

/// The longest interval a flag or key may give: a day. Longer values are
/// typos (and past ~1e19 s `Duration` cannot hold them at all).
pub const MAX_SECONDS: f64 = 86_400.0;

/// The sweep interval when neither flag nor key sets it (OpenSM's).
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(10);

/// The engine list when neither flag nor key sets it: Min Hop with the
/// balancing pass, whose busiest link is never busier than OpenSM's rule
/// gives (`minhop`, still there by name) and does not hang on the LID or
/// GUID numbering. It is the chain's implicit fallback too.
pub const DEFAULT_ENGINES: &str = "minhop-balanced";

/// OpenSM's default `subnet_timeout` (4.096 µs × 2^18 ≈ 1 s), the packet
/// lifetime of the multicast groups the SM creates.
pub const DEFAULT_SUBNET_TIMEOUT: u8 = 18;

/// How long the heavy sweep of a flapping port's trap waits for the traps
/// that follow it; never longer than the sweep interval. The first trap of
/// a quiet port sweeps at once ([`crate::daemon::traps`]).
pub const TRAP_SETTLE: Duration = Duration::from_millis(300);

/// What the command line gave (each field a flag; `None`/`false`: not
/// given). Each beats its config key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--fabric`: run on the embedded fabric of this topology file.
    pub fabric: Option<PathBuf>,
    /// `--engines`.
    pub engines: Option<String>,
    /// `--dump-dir`.
    pub dump_dir: Option<PathBuf>,
    /// `--guid2lid`.
    pub guid2lid: Option<PathBuf>,
    /// `--reassign-lids`.
    pub reassign_lids: bool,
    /// `--lmc`.
    pub lmc: Option<u8>,
    /// `--sweep-interval`, seconds.
    pub sweep_interval: Option<f64>,
    /// `--device`.
    pub device: Option<String>,
    /// `--port`.
    pub port: Option<u8>,
    /// `--guid`.
    pub guid: Option<u64>,
    /// `--max-wire-smps`.
    pub max_wire_smps: Option<usize>,
    /// `--transaction-timeout`, milliseconds.
    pub transaction_timeout: Option<u64>,
    /// `--ucast-cache`.
    pub ucast_cache: bool,
    /// `--no-incremental-sweep`.
    pub no_incremental_sweep: bool,
    /// `--full-sweep-every`.
    pub full_sweep_every: Option<u32>,
    /// `--priority`.
    pub priority: Option<u8>,
    /// `--sm-poll-interval`, seconds.
    pub sm_poll_interval: Option<f64>,
    /// `--sm-poll-retries`.
    pub sm_poll_retries: Option<u32>,
    /// `--control-socket`.
    pub control_socket: Option<PathBuf>,
    /// `--pid-file`.
    pub pid_file: Option<PathBuf>,
    /// `--metrics-listen`.
    pub metrics_listen: Option<String>,
    /// `--node-name-map`.
    pub node_name_map: Option<PathBuf>,
}

/// The command line, recorded once at start and laid over every
/// configuration the SM runs with: the file it starts with and each one a
/// SIGHUP re-reads. A flag beats its key whenever the file is read, so a
/// reload never drops what the command line gave (`--torus-config`,
/// `--lmc`, `--dump-dir` ...); keys no flag gives come from the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandLine {
    /// The SM's flags.
    pub overrides: Overrides,
    /// Engine options given as flags (`--torus-config FILE` ...), by the
    /// key they set.
    pub options: toml::Table,
    /// `--log-file`.
    pub log_file: Option<PathBuf>,
    /// `--log-flags`.
    pub log_flags: Option<u8>,
    /// `--syslog`.
    pub syslog: bool,
    /// `--log-format`, by its name.
    pub log_format: Option<String>,
}

impl CommandLine {
    /// Sets in `config` every key a flag gave; returns those keys, sorted
    /// (a re-read names the file's changes to them as overridden).
    pub fn apply(&self, config: &mut Config) -> Vec<String> {
        let o = &self.overrides;
        let mut set: Vec<&str> = Vec::new();
        for (key, value) in &self.options {
            config.set_option(key, value.clone());
        }
        let mut flag = |given: bool, key: &'static str| {
            if given {
                set.push(key);
            }
            given
        };
        if flag(o.engines.is_some(), "routing_engine") {
            config.routing_engine = o.engines.clone();
        }
        if let Some(v) = o.lmc {
            flag(true, "lmc");
            config.lmc = v;
        }
        if flag(o.dump_dir.is_some(), "dump_dir") {
            config.dump_dir = o.dump_dir.clone();
        }
        if flag(o.sweep_interval.is_some(), "sweep_interval") {
            config.sweep_interval = o.sweep_interval;
        }
        if flag(o.guid.is_some(), "guid") {
            config.guid = o.guid;
        }
        if flag(o.max_wire_smps.is_some(), "max_wire_smps") {
            config.max_wire_smps = o.max_wire_smps;
        }
        if flag(o.transaction_timeout.is_some(), "transaction_timeout") {
            config.transaction_timeout = o.transaction_timeout;
        }
        if flag(o.ucast_cache, "use_ucast_cache") {
            config.use_ucast_cache = true;
        }
        if flag(o.no_incremental_sweep, "incremental_sweep") {
            config.incremental_sweep = Some(false);
        }
        if flag(o.full_sweep_every.is_some(), "full_sweep_every") {
            config.full_sweep_every = o.full_sweep_every;
        }
        if flag(o.priority.is_some(), "sm_priority") {
            config.sm_priority = o.priority;
        }
        if let Some(secs) = o.sm_poll_interval {
            flag(true, "sminfo_polling_timeout");
            // The key counts milliseconds (the flag was checked in
            // seconds by [`SmSettings::resolve`]; `as` saturates).
            config.sminfo_polling_timeout = Some((secs * 1000.0).round() as u64);
        }
        if flag(o.sm_poll_retries.is_some(), "polling_retry_number") {
            config.polling_retry_number = o.sm_poll_retries;
        }
        if flag(o.control_socket.is_some(), "control_socket") {
            config.control_socket = o.control_socket.clone();
        }
        if flag(o.pid_file.is_some(), "pid_file") {
            config.pid_file = o.pid_file.clone();
        }
        if flag(o.metrics_listen.is_some(), "metrics_listen") {
            config.metrics_listen = o.metrics_listen.clone();
        }
        if flag(o.node_name_map.is_some(), "node_name_map") {
            config.node_name_map = o.node_name_map.clone();
        }
        if flag(self.log_file.is_some(), "log_file") {
            config.log_file = self.log_file.clone();
        }
        if flag(self.log_flags.is_some(), "log_flags") {
            config.log_flags = self.log_flags;
        }
        if flag(self.syslog, "syslog") {
            config.syslog = true;
        }
        if flag(self.log_format.is_some(), "log_format") {
            config.log_format = self.log_format.clone();
        }
        let mut keys: Vec<String> = set.into_iter().map(str::to_string).chain(self.options.keys().cloned()).collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A command-line flag, e.g. `--sweep-interval`.
    Flag(&'static str),
    /// A config key, e.g. `sweep_interval`.
    Key(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "{flag}"),
            Origin::Key(key) => write!(f, "config `{key}`"),
        }
    }
}

/// A setting out of range, with the flag or key that gave it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// The node name map cannot be read, or has a bad line (the text
    /// names file and line).
    #[error("{0}")]
    NodeNames(String),
    /// The sweep interval is not in (0, [`MAX_SECONDS`]] seconds.
    #[error("sweep interval {value} ({origin}): must be a number of seconds above 0 and at most {MAX_SECONDS}")]
    SweepInterval {
        /// The value given, in seconds.
        value: f64,
        /// Flag or key.
        origin: Origin,
    },
    /// The SM poll interval is not in (0, [`MAX_SECONDS`]] seconds.
    #[error("SM poll interval {value} s ({origin}): must be above 0 and at most {MAX_SECONDS} s")]
    PollInterval {
        /// The value given, in seconds (a key's milliseconds converted).
        value: f64,
        /// Flag or key.
        origin: Origin,
    },
    /// `packet_life_time` above 0x3F.
    #[error("packet_life_time {value:#x}: PacketLifeTime has 6 bits (0..0x3f)")]
    PacketLife {
        /// The value given.
        value: u8,
    },
    /// `max_rate_enum` not a rate code (2..24) nor 63.
    #[error("max_rate_enum {value}: a PathRecord rate code is 2..24 (63: no limit)")]
    MaxRateEnum {
        /// The value given.
        value: u8,
    },
    /// `sm_sl` above 15.
    #[error("sm_sl {value}: an SL is 0..15")]
    SmSl {
        /// The value given.
        value: u8,
    },
    /// LMC above 7.
    #[error("lmc {value} ({origin}): LMC is 0..7 (IBA PortInfo.LMC has 3 bits)")]
    Lmc {
        /// The value given.
        value: u8,
        /// Flag or key.
        origin: Origin,
    },
    /// `max_wire_smps` of 0: no SMP could ever be sent.
    #[error("max_wire_smps 0 ({origin}): must be at least 1")]
    WireSmps {
        /// Flag or key.
        origin: Origin,
    },
    /// `transaction_timeout` of 0: every SMP would time out at once.
    #[error("transaction_timeout 0 ({origin}): must be at least 1 ms")]
    TransactionTimeout {
        /// Flag or key.
        origin: Origin,
    },
    /// An SM priority above 15 (SMInfo.Priority has 4 bits).
    #[error("sm_priority {value} is not in 0..15 ({origin})")]
    Priority {
        /// The value given.
        value: u8,
        /// Flag or key.
        origin: Origin,
    },
    /// The metrics address is not `address:port`.
    #[error("metrics_listen `{text}` ({origin}): not an address:port (e.g. 127.0.0.1:9464)")]
    MetricsListen {
        /// The text given.
        text: String,
        /// Flag or key.
        origin: Origin,
    },
}

/// The flag's value if given, else the key's, with where it came from.
fn pick<T>(flag: Option<T>, flag_name: &'static str, key: Option<T>, key_name: &'static str) -> Option<(T, Origin)> {
    flag.map(|v| (v, Origin::Flag(flag_name))).or_else(|| key.map(|v| (v, Origin::Key(key_name))))
}

/// A positive, finite number of seconds no larger than [`MAX_SECONDS`].
pub fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0 && s <= MAX_SECONDS).then(|| Duration::try_from_secs_f64(s).ok()).flatten()
}

/// The engine list: `--engines`, else `routing_engine`, else
/// [`DEFAULT_ENGINES`] (shared with `smcore route`).
pub fn engines(flag: Option<&str>, config: &Config) -> String {
    flag.or(config.routing_engine.as_deref()).unwrap_or(DEFAULT_ENGINES).to_string()
}

/// The name OpenSM gives its SA database dump in the dump directory.
pub const SA_DB_DUMP_NAME: &str = "opensm-sa.dump";

/// The dump directory: `--dump-dir`, else `dump_dir` (shared with
/// `smcore route`).
pub fn dump_dir(flag: Option<&Path>, config: &Config) -> Option<PathBuf> {
    flag.or(config.dump_dir.as_deref()).map(Path::to_path_buf)
}

/// Which port of which CA the SM runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortChoice {
    /// The port of this GUID (`--guid`, else a non-zero config `guid`:
    /// it beats `--device`/`--port`, which clap keeps from going with
    /// `--guid`).
    Guid(u64),
    /// The CA and port given (`None`: the first CA, the first active port).
    Device {
        /// `--device`.
        ca: Option<String>,
        /// `--port`.
        port: Option<u8>,
    },
}

/// The transport the SM runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// The embedded simulated fabric of this topology file.
    Sim {
        /// `--fabric`.
        topology: PathBuf,
    },
    /// A umad port (real HCA, or ibsim under umad2sim).
    Umad {
        /// Which port.
        port: PortChoice,
        /// SMPs kept in flight at once (`--max-wire-smps`,
        /// `max_wire_smps`).
        window: usize,
        /// Time an SMP's answer is waited for (`--transaction-timeout`,
        /// `transaction_timeout`).
        timeout: Duration,
    },
}

/// What every run of the SM needs, `--once` included.
#[derive(Debug, Clone, PartialEq)]
pub struct SmSettings {
    /// The engine list ([`engines`]).
    pub engines: String,
    /// Where dumps (and by default guid2lid and guid2mkey) go ([`dump_dir`]).
    pub dump_dir: Option<PathBuf>,
    /// The guid2lid file: `--guid2lid`, else guid2lid in the dump directory.
    pub guid2lid: Option<PathBuf>,
    /// The guid2mkey file: `guid2mkey`, else guid2mkey in the dump directory.
    pub guid2mkey: Option<PathBuf>,
    /// Forget held LIDs and guid2lid.
    pub reassign_lids: bool,
    /// LMC, 0..=7: `--lmc`, else `lmc`.
    pub lmc: u8,
    /// Time between light sweeps: `--sweep-interval`, else
    /// `sweep_interval`, else [`DEFAULT_SWEEP_INTERVAL`].
    pub interval: Duration,
    /// Time between a standby's polls: `--sm-poll-interval`, else
    /// `sminfo_polling_timeout` (ms), else [`DEFAULT_POLL_INTERVAL`].
    /// Checked on every run, even where no other SM can be (the embedded
    /// fabric): a bad value is a typo either way.
    pub poll_interval: Duration,
    /// Extra tries of an unanswered SMP (`transaction_retries`).
    pub retries: u32,
    /// GID prefix written to every port (`subnet_prefix`).
    pub subnet_prefix: u64,
    /// MasterSMSL written to every port (`sm_sl`).
    pub sm_sl: u8,
    /// Where the SMPs go.
    pub transport: Transport,
}

impl SmSettings {
    /// The settings `overrides` and `config` give (see the module
    /// documentation).
    pub fn resolve(overrides: &Overrides, config: &Config) -> Result<SmSettings, SettingsError> {
        let o = overrides;
        let interval = match pick(o.sweep_interval, "--sweep-interval", config.sweep_interval, "sweep_interval") {
            Some((value, origin)) => seconds(value).ok_or(SettingsError::SweepInterval { value, origin })?,
            None => DEFAULT_SWEEP_INTERVAL,
        };
        let polling_ms = config.sminfo_polling_timeout.map(|ms| ms as f64 / 1000.0);
        let poll_interval = match pick(o.sm_poll_interval, "--sm-poll-interval", polling_ms, "sminfo_polling_timeout") {
            Some((value, origin)) => seconds(value).ok_or(SettingsError::PollInterval { value, origin })?,
            None => DEFAULT_POLL_INTERVAL,
        };
        let (lmc, lmc_origin) = pick(o.lmc, "--lmc", Some(config.lmc), "lmc").unwrap_or((0, Origin::Key("lmc")));
        if lmc > 7 {
            return Err(SettingsError::Lmc { value: lmc, origin: lmc_origin });
        }
        let sm_sl = config.sm_sl.unwrap_or(0);
        if sm_sl > 15 {
            return Err(SettingsError::SmSl { value: sm_sl });
        }
        // A bad node name map stops the SM at startup, naming file and
        // line (the dumps read it again at every heavy sweep).
        config.node_names().map_err(|e| SettingsError::NodeNames(e.to_string()))?;
        let transport = match &o.fabric {
            Some(topology) => Transport::Sim { topology: topology.clone() },
            None => umad(o, config)?,
        };
        let dump_dir = dump_dir(o.dump_dir.as_deref(), config);
        Ok(SmSettings {
            engines: engines(o.engines.as_deref(), config),
            guid2lid: crate::sweep::program::guid2lid_path(o.guid2lid.as_deref(), dump_dir.as_deref()),
            guid2mkey: sm_transport::guid2mkey_path(config.guid2mkey.as_deref(), dump_dir.as_deref()),
            dump_dir,
            reassign_lids: o.reassign_lids || config.reassign_lids,
            lmc,
            interval,
            poll_interval,
            retries: config.transaction_retries.unwrap_or(DEFAULT_TRANSACTION_RETRIES),
            subnet_prefix: config.subnet_prefix.unwrap_or(DEFAULT_SUBNET_PREFIX),
            sm_sl,
            transport,
        })
    }
}

/// The umad transport's settings.
fn umad(o: &Overrides, config: &Config) -> Result<Transport, SettingsError> {
    let (window, window_origin) = pick(o.max_wire_smps, "--max-wire-smps", config.max_wire_smps, "max_wire_smps")
        .unwrap_or((DEFAULT_MAX_WIRE_SMPS, Origin::Key("max_wire_smps")));
    if window == 0 {
        return Err(SettingsError::WireSmps { origin: window_origin });
    }
    let (timeout, timeout_origin) =
        pick(o.transaction_timeout, "--transaction-timeout", config.transaction_timeout, "transaction_timeout")
            .unwrap_or((DEFAULT_TRANSACTION_TIMEOUT_MS, Origin::Key("transaction_timeout")));
    if timeout == 0 {
        return Err(SettingsError::TransactionTimeout { origin: timeout_origin });
    }
    let port = match o.guid.or(config.guid.filter(|&g| g != 0)) {
        Some(guid) => PortChoice::Guid(guid),
        None => PortChoice::Device { ca: o.device.clone(), port: o.port },
    };
    Ok(Transport::Umad { port, window, timeout: Duration::from_millis(timeout) })
}

/// What only the SM loop needs (not `--once`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSettings {
    /// This SM's priority in the election, 0..=15: `--priority`, else
    /// `sm_priority`, else 0.
    pub priority: u8,
    /// The key of SMInfo and SA trust: `sm_key`, else OpenSM's 1.
    pub sm_key: u64,
    /// Unanswered polls after which a standby takes over:
    /// `--sm-poll-retries`, else `polling_retry_number`, else
    /// [`DEFAULT_POLL_RETRIES`]; at least 1.
    pub poll_retries: u32,
    /// Keep the last routing while only hosts come and go:
    /// `--ucast-cache` or `use_ucast_cache`.
    pub ucast_cache: bool,
    /// Incremental heavy sweeps, and every how many heavy sweeps one is
    /// full all the same (0: never): `None` with `--no-incremental-sweep`
    /// or `incremental_sweep FALSE`; the period is `--full-sweep-every`,
    /// else `full_sweep_every`, else
    /// [`crate::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY`].
    pub incremental: Option<u32>,
    /// How long a flapping port's trap sweep waits for more traps:
    /// [`TRAP_SETTLE`], never longer than the sweep interval.
    pub trap_settle: Duration,
    /// The packet lifetime of the multicast groups the SM creates:
    /// `subnet_timeout`, else [`DEFAULT_SUBNET_TIMEOUT`].
    pub packet_life: u8,
    /// PacketLifeTime of the SA's PathRecords: `packet_life_time`, else
    /// 0x12.
    pub path_packet_life: u8,
    /// Highest rate code of the SA's PathRecords: `max_rate_enum`, at
    /// most 18 with `use_original_extended_sa_rates_only` (as OpenSM),
    /// else [`crate::sa::path::NO_RATE_LIMIT`].
    pub max_rate_enum: u8,
    /// `--metrics-listen`, else `metrics_listen`.
    pub metrics_listen: Option<SocketAddr>,
    /// `--control-socket`, else `control_socket`.
    pub control_socket: Option<PathBuf>,
    /// `--pid-file`, else `pid_file`.
    pub pid_file: Option<PathBuf>,
    /// The file the SA's registrations are read back from at start:
    /// `sa_db_file`.
    pub sa_db_file: Option<PathBuf>,
    /// Where the SA's registrations are saved whenever they change, with
    /// `sa_db_dump`: `sa_db_file`, else `opensm-sa.dump` in the dump
    /// directory (OpenSM's name); `None`: not saved.
    pub sa_db_save: Option<PathBuf>,
    /// Sync saved files to disk before they replace the old ones:
    /// `fsync_high_avail_files`, default true.
    pub fsync_high_avail_files: bool,
    /// `drop_event_subscriptions`.
    pub drop_event_subscriptions: bool,
    /// `mcgroup_join_validation`, default true.
    pub mcgroup_join_validation: bool,
    /// `ipoib_mcgroup_creation_validation`, default true.
    pub ipoib_mcgroup_creation_validation: bool,
    /// `sm_inactive`: start NotActive.
    pub sm_inactive: bool,
    /// `sm_assigned_guid`: bits 39..32 of SA-assigned alias GUIDs.
    pub sm_assigned_guid: u8,
    /// `disable_multicast`: no MFT programming, no IsUDMulticastSupported.
    pub disable_multicast: bool,
    /// `ignore_other_sm`: never read other SMs.
    pub ignore_other_sm: bool,
    /// The SA's key: `sa_key`, else `sm_key`, else OpenSM's 1.
    pub sa_key: u64,
}

impl DaemonSettings {
    /// The SM loop's settings `overrides` and `config` give, for a loop
    /// sweeping every `interval` ([`SmSettings::interval`]).
    pub fn resolve(overrides: &Overrides, config: &Config, interval: Duration) -> Result<DaemonSettings, SettingsError> {
        let o = overrides;
        let (priority, origin) =
            pick(o.priority, "--priority", config.sm_priority, "sm_priority").unwrap_or((0, Origin::Key("sm_priority")));
        if priority > MAX_PRIORITY {
            return Err(SettingsError::Priority { value: priority, origin });
        }
        let metrics_listen =
            match pick(o.metrics_listen.as_ref(), "--metrics-listen", config.metrics_listen.as_ref(), "metrics_listen") {
                Some((text, origin)) => Some(
                    text.parse::<SocketAddr>()
                        .map_err(|_| SettingsError::MetricsListen { text: text.clone(), origin })?,
                ),
                None => None,
            };
        Ok(DaemonSettings {
            priority,
            sm_key: config.sm_key.unwrap_or(DEFAULT_SM_KEY),
            poll_retries: o.sm_poll_retries.or(config.polling_retry_number).unwrap_or(DEFAULT_POLL_RETRIES).max(1),
            ucast_cache: o.ucast_cache || config.use_ucast_cache,
            incremental: (!o.no_incremental_sweep && config.incremental_sweep.unwrap_or(true)).then(|| {
                o.full_sweep_every
                    .or(config.full_sweep_every)
                    .unwrap_or(crate::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY)
            }),
            trap_settle: TRAP_SETTLE.min(interval),
            packet_life: config.subnet_timeout.unwrap_or(DEFAULT_SUBNET_TIMEOUT),
            path_packet_life: match config.packet_life_time {
                Some(value) if value > 0x3F => return Err(SettingsError::PacketLife { value }),
                Some(value) => value,
                None => crate::sa::PathDefaults::default().packet_life,
            },
            max_rate_enum: match config.max_rate_enum.unwrap_or(crate::sa::path::NO_RATE_LIMIT) {
                value if !(2..=24).contains(&value) && value != crate::sa::path::NO_RATE_LIMIT => {
                    return Err(SettingsError::MaxRateEnum { value })
                }
                value if config.use_original_extended_sa_rates_only => value.min(18),
                value => value,
            },
            metrics_listen,
            control_socket: o.control_socket.clone().or_else(|| config.control_socket.clone()),
            pid_file: o.pid_file.clone().or_else(|| config.pid_file.clone()),
            sa_db_file: config.sa_db_file.clone(),
            sa_db_save: config.sa_db_dump.then(|| {
                config
                    .sa_db_file
                    .clone()
                    .or_else(|| dump_dir(o.dump_dir.as_deref(), config).map(|d| d.join(SA_DB_DUMP_NAME)))
            }).flatten(),
            fsync_high_avail_files: config.fsync_high_avail_files.unwrap_or(true),
            drop_event_subscriptions: config.drop_event_subscriptions,
            mcgroup_join_validation: config.mcgroup_join_validation.unwrap_or(true),
            ipoib_mcgroup_creation_validation: config.ipoib_mcgroup_creation_validation.unwrap_or(true),
            sm_inactive: config.sm_inactive,
            sm_assigned_guid: config.sm_assigned_guid,
            disable_multicast: config.disable_multicast,
            ignore_other_sm: config.ignore_other_sm,
            sa_key: config.sa_key.or(config.sm_key).unwrap_or(DEFAULT_SM_KEY),
        })
    }

    /// The election's options: these settings' polling, with the sweeps'
    /// SMP retries and M_Key state.
    pub fn standby_options(&self, sm: &SmSettings, m_keys: sm_transport::MKeys) -> StandbyOptions {
        StandbyOptions {
            poll_interval: sm.poll_interval,
            poll_retries: self.poll_retries,
            smp_retries: sm.retries,
            m_keys,
            ignore_other_sm: self.ignore_other_sm,
            ..StandbyOptions::default()
        }
    }

    /// The SA's settings: its key is [`Self::sa_key`] (OpenSM checks SA
    /// requests against `sa_key`, SMInfo against `sm_key`).
    pub fn sa_config(&self) -> crate::sa::handler::SaConfig {
        let path = crate::sa::PathDefaults { packet_life: self.path_packet_life, max_rate_enum: self.max_rate_enum, ..Default::default() };
        crate::sa::handler::SaConfig {
            sm_priority: self.priority,
            sm_key: self.sa_key,
            path,
            drop_event_subscriptions: self.drop_event_subscriptions,
            mcgroup_join_validation: self.mcgroup_join_validation,
            ipoib_mcgroup_creation_validation: self.ipoib_mcgroup_creation_validation,
            sm_assigned_guid: self.sm_assigned_guid,
            multicast: !self.disable_multicast,
            ..Default::default()
        }
    }

    /// What this SM says of itself in SMInfo at start: `guid` (0: learnt
    /// at discovery), the priority and SM_Key; NotActive with
    /// `sm_inactive` (as OpenSM: no sweep until a master's STANDBY
    /// control), else Discovering.
    pub fn sm_info_state(&self, guid: u64) -> crate::standby::SmInfoState {
        let state = crate::standby::SmInfoState::new(guid, self.priority, self.sm_key);
        if self.sm_inactive {
            state.set_state(sm_mad::sm_info::SmState::NotActive);
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opensm(text: &str) -> Config {
        Config::parse_any(text, Path::new("opensm.conf")).expect("valid opensm.conf")
    }

    fn toml(text: &str) -> Config {
        Config::parse(text, Path::new("smcore.toml")).expect("valid smcore.toml")
    }

    fn sm(o: &Overrides, c: &Config) -> Result<SmSettings, SettingsError> {
        SmSettings::resolve(o, c)
    }

    fn daemon(o: &Overrides, c: &Config) -> Result<DaemonSettings, SettingsError> {
        DaemonSettings::resolve(o, c, DEFAULT_SWEEP_INTERVAL)
    }

    #[test]
    fn max_rate_enum_as_opensm_reads_it() {
        let rate = |text: &str| daemon(&Overrides::default(), &opensm(text)).map(|d| d.max_rate_enum);
        assert_eq!(rate("").unwrap(), crate::sa::path::NO_RATE_LIMIT);
        assert_eq!(rate("max_rate_enum 22\n").unwrap(), 22);
        // The deprecated key is max_rate_enum 18, over a higher limit only.
        assert_eq!(rate("use_original_extended_sa_rates_only TRUE\n").unwrap(), 18);
        assert_eq!(rate("use_original_extended_sa_rates_only TRUE\nmax_rate_enum 22\n").unwrap(), 18);
        assert_eq!(rate("use_original_extended_sa_rates_only TRUE\nmax_rate_enum 7\n").unwrap(), 7);
        assert_eq!(rate("use_original_extended_sa_rates_only FALSE\nmax_rate_enum 63\n").unwrap(), 63);
        for bad in ["max_rate_enum 1\n", "max_rate_enum 25\n", "max_rate_enum 62\n"] {
            let e = rate(bad).unwrap_err().to_string();
            assert!(e.starts_with("max_rate_enum "), "{bad}: {e}");
        }
    }

    #[test]
    fn nothing_given_gives_the_defaults() {
        let s = sm(&Overrides::default(), &Config::default()).unwrap();
        assert_eq!(s.engines, "minhop-balanced");
        assert_eq!(s.engines, DEFAULT_ENGINES);
        assert_eq!((s.dump_dir.as_ref(), s.guid2lid.as_ref(), s.guid2mkey.as_ref()), (None, None, None));
        assert_eq!((s.lmc, s.reassign_lids), (0, false));
        assert_eq!(s.interval, Duration::from_secs(10));
        assert_eq!(s.poll_interval, DEFAULT_POLL_INTERVAL);
        assert_eq!(s.retries, DEFAULT_TRANSACTION_RETRIES);
        assert_eq!(s.subnet_prefix, 0xfe80_0000_0000_0000);
        assert_eq!(
            s.transport,
            Transport::Umad {
                port: PortChoice::Device { ca: None, port: None },
                window: DEFAULT_MAX_WIRE_SMPS,
                timeout: Duration::from_millis(200)
            }
        );
        let d = daemon(&Overrides::default(), &Config::default()).unwrap();
        assert_eq!((d.priority, d.sm_key, d.poll_retries), (0, 1, 4));
        assert!(!d.ucast_cache);
        assert_eq!((d.trap_settle, d.packet_life), (Duration::from_millis(300), 18));
        assert_eq!((d.metrics_listen, d.control_socket.as_ref(), d.pid_file.as_ref()), (None, None, None));
    }

    #[test]
    fn incremental_sweeps_are_on_by_default_and_the_flag_beats_the_key() {
        let default = crate::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY;
        let none = Overrides::default();
        assert_eq!(daemon(&none, &Config::default()).unwrap().incremental, Some(default));
        let c = toml("incremental_sweep = true\nfull_sweep_every = 3\n");
        assert_eq!(daemon(&none, &c).unwrap().incremental, Some(3));
        let every = Overrides { full_sweep_every: Some(0), ..Overrides::default() };
        assert_eq!(daemon(&every, &c).unwrap().incremental, Some(0));
        let off = Overrides { no_incremental_sweep: true, ..Overrides::default() };
        assert_eq!(daemon(&off, &c).unwrap().incremental, None);
        assert_eq!(daemon(&none, &toml("incremental_sweep = false\n")).unwrap().incremental, None);
    }

    #[test]
    fn the_shipped_config_states_the_defaults() {
        let shipped = toml(include_str!("../../config/smcore.toml"));
        let o = Overrides::default();
        assert_eq!(sm(&o, &shipped).unwrap(), sm(&o, &Config::default()).unwrap());
        assert_eq!(daemon(&o, &shipped).unwrap(), daemon(&o, &Config::default()).unwrap());
    }

    #[test]
    fn config_beats_default() {
        let c = toml(
            r#"
            routing_engine = "updn,minhop"
            dump_dir = "/var/dumps"
            lmc = 2
            sweep_interval = 2.5
            sminfo_polling_timeout = 500
            transaction_retries = 1
            subnet_prefix = "0xfe80000000000001"
            sm_sl = 3
            max_wire_smps = 16
            transaction_timeout = 50
            guid2mkey = "/etc/keys"
            sm_priority = 7
            sm_key = 0x55
            polling_retry_number = 9
            use_ucast_cache = true
            subnet_timeout = 20
            metrics_listen = "127.0.0.1:9464"
            control_socket = "/run/sm.sock"
            pid_file = "/run/sm.pid"
            "#,
        );
        let o = Overrides::default();
        let s = sm(&o, &c).unwrap();
        assert_eq!(s.engines, "updn,minhop");
        assert_eq!(s.dump_dir.as_deref(), Some(Path::new("/var/dumps")));
        assert_eq!(s.guid2lid.as_deref(), Some(Path::new("/var/dumps/guid2lid")));
        assert_eq!(s.guid2mkey.as_deref(), Some(Path::new("/etc/keys")));
        assert_eq!(s.lmc, 2);
        assert_eq!(s.interval, Duration::from_millis(2500));
        assert_eq!(s.poll_interval, Duration::from_millis(500));
        assert_eq!((s.retries, s.subnet_prefix, s.sm_sl), (1, 0xfe80_0000_0000_0001, 3));
        assert!(sm(&o, &toml("reassign_lids = true")).unwrap().reassign_lids, "the key, as --reassign-lids");
        assert_eq!(sm(&o, &toml("sm_sl = 16")).unwrap_err(), SettingsError::SmSl { value: 16 });
        assert_eq!(
            s.transport,
            Transport::Umad {
                port: PortChoice::Device { ca: None, port: None },
                window: 16,
                timeout: Duration::from_millis(50)
            }
        );
        let d = daemon(&o, &c).unwrap();
        assert_eq!((d.priority, d.sm_key, d.poll_retries, d.ucast_cache, d.packet_life), (7, 0x55, 9, true, 20));
        assert_eq!(d.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(d.control_socket.as_deref(), Some(Path::new("/run/sm.sock")));
        assert_eq!(d.pid_file.as_deref(), Some(Path::new("/run/sm.pid")));
    }

    #[test]
    fn flags_beat_config() {
        let c = toml(
            r#"
            routing_engine = "updn"
            dump_dir = "/var/dumps"
            lmc = 2
            sweep_interval = 2.5
            sminfo_polling_timeout = 500
            max_wire_smps = 16
            transaction_timeout = 50
            guid = 0x99
            sm_priority = 7
            polling_retry_number = 9
            metrics_listen = "127.0.0.1:9464"
            control_socket = "/run/sm.sock"
            pid_file = "/run/sm.pid"
            "#,
        );
        let o = Overrides {
            engines: Some("ftree".into()),
            dump_dir: Some("/tmp/d".into()),
            guid2lid: Some("/tmp/g2l".into()),
            reassign_lids: true,
            lmc: Some(1),
            sweep_interval: Some(30.0),
            sm_poll_interval: Some(0.25),
            max_wire_smps: Some(2),
            transaction_timeout: Some(1000),
            guid: Some(0x42),
            priority: Some(12),
            sm_poll_retries: Some(2),
            metrics_listen: Some("[::1]:9000".into()),
            control_socket: Some("/tmp/c.sock".into()),
            pid_file: Some("/tmp/p.pid".into()),
            ..Overrides::default()
        };
        let s = sm(&o, &c).unwrap();
        assert_eq!(s.engines, "ftree");
        assert_eq!(s.dump_dir.as_deref(), Some(Path::new("/tmp/d")));
        assert_eq!(s.guid2lid.as_deref(), Some(Path::new("/tmp/g2l")));
        assert_eq!(s.guid2mkey.as_deref(), Some(Path::new("/tmp/d/guid2mkey")), "in the flag's dump directory");
        assert!(s.reassign_lids);
        assert_eq!(s.lmc, 1);
        assert_eq!(s.interval, Duration::from_secs(30));
        assert_eq!(s.poll_interval, Duration::from_millis(250));
        assert_eq!(
            s.transport,
            Transport::Umad { port: PortChoice::Guid(0x42), window: 2, timeout: Duration::from_secs(1) }
        );
        let d = daemon(&o, &c).unwrap();
        assert_eq!((d.priority, d.poll_retries), (12, 2));
        assert_eq!(d.metrics_listen, Some("[::1]:9000".parse().unwrap()));
        assert_eq!(d.control_socket.as_deref(), Some(Path::new("/tmp/c.sock")));
        assert_eq!(d.pid_file.as_deref(), Some(Path::new("/tmp/p.pid")));
        // Switches only add: --ucast-cache turns the cache on, its absence
        // leaves the key's choice.
        let on = Overrides { ucast_cache: true, ..Overrides::default() };
        assert!(daemon(&on, &Config::default()).unwrap().ucast_cache);
        // `--sm-poll-retries 0` would take over at the first late answer:
        // it counts as 1 (the config key refuses 0 when read).
        let zero = Overrides { sm_poll_retries: Some(0), ..Overrides::default() };
        assert_eq!(daemon(&zero, &c).unwrap().poll_retries, 1);
    }

    #[test]
    fn the_port_is_chosen_by_guid_else_by_device() {
        let device = Overrides { device: Some("mlx5_1".into()), port: Some(2), ..Overrides::default() };
        let port_of = |o: &Overrides, c: &Config| match sm(o, c).unwrap().transport {
            Transport::Umad { port, .. } => port,
            other => panic!("umad expected, got {other:?}"),
        };
        assert_eq!(port_of(&device, &Config::default()), PortChoice::Device { ca: Some("mlx5_1".into()), port: Some(2) });
        // A config GUID of 0 chooses nothing (OpenSM writes `guid 0x0`).
        assert_eq!(port_of(&device, &opensm("guid 0x0\n")), PortChoice::Device { ca: Some("mlx5_1".into()), port: Some(2) });
        assert_eq!(port_of(&device, &opensm("guid 0x77\n")), PortChoice::Guid(0x77));
        let by_guid = Overrides { guid: Some(0x42), ..Overrides::default() };
        assert_eq!(port_of(&by_guid, &opensm("guid 0x77\n")), PortChoice::Guid(0x42));
        // The embedded fabric takes none of it, and checks none of it.
        let sim = Overrides { fabric: Some("t.net".into()), max_wire_smps: Some(0), ..device };
        assert_eq!(sm(&sim, &Config::default()).unwrap().transport, Transport::Sim { topology: "t.net".into() });
    }

    #[test]
    fn opensm_keys_map_onto_the_settings() {
        let c = opensm(
            "routing_engine updn\nsweep_interval 15\nsminfo_polling_timeout 1500\npolling_retry_number 6\n\
             sm_priority 3\nsm_key 0x0000000000000007\nmax_wire_smps 4\ntransaction_timeout 300\n\
             subnet_prefix 0xfe80000000000000\nsubnet_timeout 17\nuse_ucast_cache TRUE\nlmc 1\n",
        );
        let s = sm(&Overrides::default(), &c).unwrap();
        assert_eq!(s.engines, "updn");
        assert_eq!(s.interval, Duration::from_secs(15));
        // OpenSM counts the poll interval in milliseconds.
        assert_eq!(s.poll_interval, Duration::from_millis(1500));
        assert_eq!(s.lmc, 1);
        assert_eq!(
            s.transport,
            Transport::Umad {
                port: PortChoice::Device { ca: None, port: None },
                window: 4,
                timeout: Duration::from_millis(300)
            }
        );
        let d = daemon(&Overrides::default(), &c).unwrap();
        assert_eq!((d.priority, d.sm_key, d.poll_retries, d.packet_life, d.ucast_cache), (3, 7, 6, 17, true));
        let options = d.standby_options(&s, sm_transport::MKeys::off());
        assert_eq!((options.poll_interval, options.poll_retries, options.smp_retries), (s.poll_interval, 6, s.retries));
        assert_eq!(options.stuck_polls, StandbyOptions::default().stuck_polls);
    }

    #[test]
    fn the_trap_settle_time_never_outlasts_the_interval() {
        let c = Config::default();
        assert_eq!(DaemonSettings::resolve(&Overrides::default(), &c, Duration::from_millis(100)).unwrap().trap_settle, Duration::from_millis(100));
        assert_eq!(DaemonSettings::resolve(&Overrides::default(), &c, Duration::from_secs(5)).unwrap().trap_settle, TRAP_SETTLE);
    }

    #[test]
    fn values_out_of_range_name_the_flag_or_key() {
        let flag = |o: Overrides| sm(&o, &Config::default()).expect_err("refused");
        for value in [0.0, -3.0, 1e20, f64::NAN, f64::INFINITY, MAX_SECONDS * 2.0] {
            let e = flag(Overrides { sweep_interval: Some(value), ..Overrides::default() });
            assert!(matches!(e, SettingsError::SweepInterval { origin: Origin::Flag("--sweep-interval"), .. }), "{e}");
            assert!(e.to_string().contains("sweep interval") && e.to_string().contains("--sweep-interval"), "{e}");
            let e = flag(Overrides { sm_poll_interval: Some(value), ..Overrides::default() });
            assert!(matches!(e, SettingsError::PollInterval { origin: Origin::Flag("--sm-poll-interval"), .. }), "{e}");
            assert!(e.to_string().contains("SM poll interval"), "{e}");
        }
        assert_eq!(
            flag(Overrides { lmc: Some(8), ..Overrides::default() }),
            SettingsError::Lmc { value: 8, origin: Origin::Flag("--lmc") }
        );
        assert!(flag(Overrides { lmc: Some(8), ..Overrides::default() }).to_string().contains("LMC is 0..7"));
        assert_eq!(
            flag(Overrides { max_wire_smps: Some(0), ..Overrides::default() }),
            SettingsError::WireSmps { origin: Origin::Flag("--max-wire-smps") }
        );
        assert_eq!(
            flag(Overrides { transaction_timeout: Some(0), ..Overrides::default() }),
            SettingsError::TransactionTimeout { origin: Origin::Flag("--transaction-timeout") }
        );
        let d = |o: Overrides, c: &Config| daemon(&o, c).expect_err("refused");
        assert_eq!(
            d(Overrides { priority: Some(16), ..Overrides::default() }, &Config::default()),
            SettingsError::Priority { value: 16, origin: Origin::Flag("--priority") }
        );
        let e = d(Overrides { metrics_listen: Some("localhost".into()), ..Overrides::default() }, &Config::default());
        assert_eq!(e, SettingsError::MetricsListen { text: "localhost".into(), origin: Origin::Flag("--metrics-listen") });
        assert!(e.to_string().contains("--metrics-listen"), "{e}");
    }

    #[test]
    fn a_bad_key_is_named_as_a_key_and_a_good_flag_overrides_it() {
        // Values a config file cannot hold past its own checks can still
        // come from a hand-built Config (or a future key): named as keys.
        let c = Config {
            lmc: 9,
            sweep_interval: Some(0.0),
            sminfo_polling_timeout: Some(0),
            max_wire_smps: Some(0),
            transaction_timeout: Some(0),
            sm_priority: Some(20),
            metrics_listen: Some("nowhere".into()),
            ..Config::default()
        };
        let fixed = Overrides {
            lmc: Some(0),
            sweep_interval: Some(1.0),
            sm_poll_interval: Some(1.0),
            max_wire_smps: Some(1),
            transaction_timeout: Some(1),
            priority: Some(1),
            metrics_listen: Some("127.0.0.1:1".into()),
            ..Overrides::default()
        };
        assert!(sm(&fixed, &c).is_ok() && daemon(&fixed, &c).is_ok(), "each flag beats its bad key");
        let unfix = |f: fn(&mut Overrides)| {
            let mut o = fixed.clone();
            f(&mut o);
            o
        };
        let cases: [(Overrides, SettingsError); 5] = [
            (unfix(|o| o.sweep_interval = None), SettingsError::SweepInterval { value: 0.0, origin: Origin::Key("sweep_interval") }),
            (unfix(|o| o.sm_poll_interval = None), SettingsError::PollInterval { value: 0.0, origin: Origin::Key("sminfo_polling_timeout") }),
            (unfix(|o| o.lmc = None), SettingsError::Lmc { value: 9, origin: Origin::Key("lmc") }),
            (unfix(|o| o.max_wire_smps = None), SettingsError::WireSmps { origin: Origin::Key("max_wire_smps") }),
            (unfix(|o| o.transaction_timeout = None), SettingsError::TransactionTimeout { origin: Origin::Key("transaction_timeout") }),
        ];
        for (o, want) in cases {
            assert_eq!(sm(&o, &c).expect_err("refused"), want);
        }
        assert_eq!(
            daemon(&unfix(|o| o.priority = None), &c).expect_err("refused"),
            SettingsError::Priority { value: 20, origin: Origin::Key("sm_priority") }
        );
        let e = daemon(&unfix(|o| o.metrics_listen = None), &c).expect_err("refused");
        assert_eq!(e, SettingsError::MetricsListen { text: "nowhere".into(), origin: Origin::Key("metrics_listen") });
        assert!(e.to_string().contains("config `metrics_listen`"), "{e}");
    }

    #[test]
    fn sm_inactive_starts_not_active_and_ignore_other_sm_reaches_the_election() {
        use sm_mad::sm_info::SmState;
        let plain = daemon(&Overrides::default(), &opensm("sm_priority 3\n")).unwrap();
        assert_eq!(plain.sm_info_state(0).state(), SmState::Discovering);
        assert!(!plain.standby_options(&sm(&Overrides::default(), &Config::default()).unwrap(), sm_transport::MKeys::off()).ignore_other_sm);
        let c = opensm("sm_inactive TRUE\nignore_other_sm TRUE\n");
        let d = daemon(&Overrides::default(), &c).unwrap();
        let state = d.sm_info_state(7);
        assert_eq!((state.state(), state.guid()), (SmState::NotActive, 7), "no sweep until a master's STANDBY");
        let options = d.standby_options(&sm(&Overrides::default(), &c).unwrap(), sm_transport::MKeys::off());
        assert!(options.ignore_other_sm);
        // NotActive holds in the election: it does not make itself master.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let topo = sm_topology::gen::fat_tree_2level(2, 1, 1, 1).unwrap();
        let host = topo.nodes.iter().position(|n| !n.is_switch()).unwrap();
        let mut fabric = crate::sim::SimFabric::from_topology(&topo, host, 1).unwrap();
        let stopper = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(300));
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            crate::standby::arbitrate(&mut crate::sim::SimPort::new(&mut fabric), &state, &options, &stop)
        });
        assert!(matches!(stopper, crate::standby::Arbitration::Stopped));
        assert_eq!(state.state(), SmState::NotActive);
    }

    #[test]
    fn the_sa_checks_sa_key_not_sm_key() {
        // As OpenSM: SA requests are checked against sa_key.
        let d = daemon(&Overrides::default(), &opensm("sm_key 0x7\nsa_key 0x55\n")).unwrap();
        assert_eq!((d.sm_key, d.sa_key), (7, 0x55));
        let sa = d.sa_config();
        assert!(sa.trusts(0x55) && !sa.trusts(7), "{sa:?}");
        assert_eq!(d.sm_info_state(0).sm_key(), 7, "SMInfo keeps sm_key");
        // Unset, the SA keeps smcore's key: sm_key.
        let d = daemon(&Overrides::default(), &toml("sm_key = 9\n")).unwrap();
        assert!(d.sa_config().trusts(9));
        assert!(daemon(&Overrides::default(), &Config::default()).unwrap().sa_config().trusts(1));
    }

    #[test]
    fn disable_multicast_and_sm_assigned_guid_reach_the_sa() {
        let d = daemon(&Overrides::default(), &opensm("disable_multicast TRUE\nsm_assigned_guid 0x2a\n")).unwrap();
        let sa = d.sa_config();
        assert_eq!((sa.multicast, sa.sm_assigned_guid), (false, 0x2a));
        let sa = daemon(&Overrides::default(), &Config::default()).unwrap().sa_config();
        assert_eq!((sa.multicast, sa.sm_assigned_guid), (true, 0));
    }
}
