//! `smcore.toml`: defaults for the SM and the engines. Command-line flags
//! override it. OpenSM's own `opensm.conf` is read too (see [`opensm`];
//! [`Config::load`] tells the two formats apart by content).
//!
//! Keys follow OpenSM's option names (snake case) where one exists. Any
//! top-level key that is not one of the core's own is an engine option and
//! is passed to every engine; `[engines.<name>]` tables add or override
//! options for one engine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::engines::CreditLoopPolicy;

pub mod cc_keys;
pub mod opensm;
pub mod typed;

/// A configuration file that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Unreadable file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Bad TOML or a bad value; the message names line and column.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Verifier settings.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct VerifyConfig {
    /// Look for credit loops.
    pub check_credit_loops: bool,
    /// `auto`, `fatal` or `warn`.
    pub credit_loops: CreditLoopPolicy,
    /// Also check routes to switch LIDs.
    pub switch_destinations: bool,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig { check_credit_loops: true, credit_loops: CreditLoopPolicy::Auto, switch_destinations: false }
    }
}

/// SMPs in flight when neither flag nor file says (see docs/measurements.md,
/// the SMP window).
pub const DEFAULT_MAX_WIRE_SMPS: usize = 64;
/// SM_Key when the file does not say: OpenSM's default, so that an OpenSM
/// and an smcore of a site that never set one see each other.
pub const DEFAULT_SM_KEY: u64 = 1;
/// Answer timeout (ms) and retries of an SMP when neither flag nor file
/// says: the transport's.
pub use sm_transport::port::{DEFAULT_TRANSACTION_RETRIES, DEFAULT_TRANSACTION_TIMEOUT_MS};

/// The whole configuration (serialized for the console's `dump_conf`).
#[derive(Debug, Clone, Deserialize, serde::Serialize, Default, PartialEq)]
#[serde(default)]
pub struct Config {
    /// Engine list, as OpenSM's `routing_engine` (e.g. `"torus-2QoS,no_fallback"`).
    pub routing_engine: Option<String>,
    /// LMC for end ports.
    pub lmc: u8,
    /// Extra engine directories, searched before `SMCORE_ENGINE_PATH` and the
    /// executable's directory.
    pub engine_dirs: Vec<PathBuf>,
    /// Where dumps go.
    pub dump_dir: Option<PathBuf>,
    /// Where the SM writes its dumps when no dump directory is given
    /// (OpenSM `dump_files_dir`, default /var/log there): the dumps only;
    /// guid2lid and guid2mkey are read back from `dump_dir` alone.
    pub dump_files_dir: Option<PathBuf>,
    /// Seconds between light sweeps (OpenSM `sweep_interval`).
    pub sweep_interval: Option<f64>,
    /// SMPs in flight at once on the umad port (OpenSM `max_wire_smps`).
    pub max_wire_smps: Option<usize>,
    /// Milliseconds to wait for an SMP's answer (OpenSM `transaction_timeout`).
    pub transaction_timeout: Option<u64>,
    /// Extra tries of an unanswered SMP (OpenSM `transaction_retries`).
    pub transaction_retries: Option<u32>,
    /// Keep the last routing when only end ports come and go (OpenSM
    /// `use_ucast_cache`).
    pub use_ucast_cache: bool,
    /// Forget held LIDs and guid2lid at start and number the fabric afresh
    /// (OpenSM `reassign_lids`; `--reassign-lids`).
    pub reassign_lids: bool,
    /// Never ask hosts to register with the SA again (PortInfo
    /// ClientReregister) when this SM becomes master (OpenSM
    /// `no_clients_rereg`).
    pub no_clients_rereg: bool,
    /// Rediscover only behind the ports a trap or a light sweep names
    /// (smcore's own, in the TOML format; default true,
    /// `--no-incremental-sweep`).
    pub incremental_sweep: Option<bool>,
    /// With incremental sweeps, every this many heavy sweeps is a full one
    /// all the same; 0: only when the incremental one cannot account for
    /// a change (smcore's own, in the TOML format; default
    /// [`crate::sweep::incremental::DEFAULT_FULL_SWEEP_EVERY`]).
    pub full_sweep_every: Option<u32>,
    /// This SM's priority in the master election, 0..15 (OpenSM
    /// `sm_priority`).
    pub sm_priority: Option<u8>,
    /// Milliseconds between a standby's polls of the master (OpenSM
    /// `sminfo_polling_timeout`).
    #[serde(alias = "sm_polling_timeout")]
    pub sminfo_polling_timeout: Option<u64>,
    /// SM_Key this SM uses in SMInfo and the SA trusts (OpenSM `sm_key`;
    /// default [`DEFAULT_SM_KEY`]).
    pub sm_key: Option<u64>,
    /// GID prefix of the subnet, written to every port (OpenSM
    /// `subnet_prefix`; default fe80::/64). An integer, or a `"0x…"`
    /// string for values above 2^63.
    #[serde(default, deserialize_with = "de_key")]
    pub subnet_prefix: Option<u64>,
    /// SL of the SM's own traffic, written to every port as MasterSMSL
    /// (OpenSM `sm_sl`; default 0).
    pub sm_sl: Option<u8>,
    /// Unanswered polls after which a standby takes over (OpenSM
    /// `polling_retry_number`).
    pub polling_retry_number: Option<u32>,
    /// M_Key written to every port and carried by every SMP (OpenSM
    /// `m_key`; 0 or absent: M_Key off). An integer, or a string
    /// `"0x..."` for keys above 2^63 (TOML integers are signed).
    #[serde(default, deserialize_with = "de_key")]
    pub m_key: Option<u64>,
    /// M_KeyProtectBits, 0-3 (OpenSM `m_key_protection_level`; default 0).
    pub m_key_protection_level: Option<u8>,
    /// M_KeyLeasePeriod in seconds (OpenSM `m_key_lease_period`; default
    /// 0, never lapses).
    pub m_key_lease_period: Option<u16>,
    /// Derive each port's M_Key from `m_key` and the port GUID (OpenSM
    /// `m_key_per_port`; smcore's derivation is HMAC-SHA256, not OpenSM's).
    pub m_key_per_port: bool,
    /// Where the keys given to ports are kept (OpenSM's `guid2mkey` in its
    /// cache directory); a `.neighbors` file goes beside it.
    pub guid2mkey: Option<PathBuf>,
    /// Most operational data VLs a link is given, as PortInfo encodes it
    /// (1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14; OpenSM
    /// `max_op_vls`, default 5).
    pub max_op_vls: Option<u8>,
    /// HOQLife of switch ports facing switches (OpenSM
    /// `head_of_queue_lifetime`, default 0x12).
    pub head_of_queue_lifetime: Option<u8>,
    /// HOQLife of switch ports facing CAs and routers, and of router ports
    /// (OpenSM `leaf_head_of_queue_lifetime`, default 0x10).
    pub leaf_head_of_queue_lifetime: Option<u8>,
    /// VLStallCount of switch ports facing switches (OpenSM
    /// `vl_stall_count`, default 7).
    pub vl_stall_count: Option<u8>,
    /// VLStallCount of switch ports facing CAs and routers (OpenSM
    /// `leaf_vl_stall_count`, default 7).
    pub leaf_vl_stall_count: Option<u8>,
    /// PortInfo:SubnetTimeOut of CA ports and switch port 0 (OpenSM
    /// `subnet_timeout`, default 18).
    pub subnet_timeout: Option<u8>,
    /// PacketLifeTime of the PathRecords the SA answers (OpenSM
    /// `packet_life_time`, default 0x12: 4.096 µs × 2^18 ≈ 1 s).
    pub packet_life_time: Option<u8>,
    /// Highest rate code the SA's PathRecords carry, 2..24 (OpenSM
    /// `max_rate_enum`, default 63: no limit); a faster path is answered
    /// with the fastest rate allowed (`sa::path::limit_rate`).
    pub max_rate_enum: Option<u8>,
    /// PathRecord rates kept to the original extended codes, up to 18
    /// (300 Gb/s): `max_rate_enum` at most 18 (OpenSM
    /// `use_original_extended_sa_rates_only`, deprecated by it).
    pub use_original_extended_sa_rates_only: bool,
    /// LinkSpeedEnabled written to every linked port; 0 leaves ports as
    /// they are, 15 (the default) sets every supported speed (OpenSM
    /// `force_link_speed`).
    pub force_link_speed: Option<u8>,
    /// LinkWidthEnabled written to every linked port; 0 leaves ports as
    /// they are, 255 (the default) sets every supported width (OpenSM
    /// `force_link_width`).
    pub force_link_width: Option<u8>,
    /// LinkSpeedExtEnabled written to linked ports whose both ends support
    /// extended speeds; 0 leaves them, 30 disables extended speeds, 31 (the
    /// default) sets every supported one (OpenSM `force_link_speed_ext`).
    pub force_link_speed_ext: Option<u8>,
    /// LocalPhyErrors threshold written to every port's PortInfo (OpenSM
    /// `local_phy_errors_threshold`, default 8; 4 bits).
    pub local_phy_errors_threshold: Option<u8>,
    /// Sweep heavily at every sweep interval, never lightly (OpenSM
    /// `force_heavy_sweep`).
    pub force_heavy_sweep: bool,
    /// Traps reporting a change cause a heavy sweep (OpenSM
    /// `sweep_on_trap`, default true).
    pub sweep_on_trap: Option<bool>,
    /// Start in SMInfo state NotActive: no sweep until a master's STANDBY
    /// control (OpenSM `sm_inactive`).
    pub sm_inactive: bool,
    /// Take no notice of other SMs: master at once, never hand over
    /// (OpenSM `ignore_other_sm`).
    pub ignore_other_sm: bool,
    /// Bits 39..32 of the alias GUIDs the SA assigns (OpenSM
    /// `sm_assigned_guid`, default 0).
    pub sm_assigned_guid: u8,
    /// No multicast: the SA creates and joins no group and no MFT is
    /// written (OpenSM `disable_multicast`).
    pub disable_multicast: bool,
    /// A guid2lid or guid2mkey file that cannot be read stops the SM at
    /// start (OpenSM `exit_on_fatal`, default true); false: logged, and
    /// the SM starts without it.
    pub exit_on_fatal: Option<bool>,
    /// Write a switch's SL2VL tables with one AllInputPorts Set per output
    /// port where it takes them (OpenSM `use_optimized_slvl`).
    pub use_optimized_slvl: bool,
    /// Disable a port whose error traps (129-131) keep coming (OpenSM
    /// `babbling_port_policy`).
    pub babbling_port_policy: bool,
    /// A P_Key a port holds keeps its index from one sweep to the next
    /// (OpenSM `keep_pkey_indexes`, default true).
    pub keep_pkey_indexes: Option<bool>,
    /// Coming out of standby, take the LIDs of the guid2lid file again
    /// (OpenSM `honor_guid2lid_file`).
    pub honor_guid2lid_file: bool,
    /// Try the keys recorded in guid2mkey (OpenSM `m_key_lookup`, default
    /// true); false: SMPs carry the configured key only.
    pub m_key_lookup: Option<bool>,
    /// SL2VL Sets a port refuses are not logged as warnings (OpenSM
    /// `suppress_sl2vl_mad_status_errors`).
    pub suppress_sl2vl_mad_status_errors: bool,
    /// The SA's key (OpenSM `sa_key`): SA requests carrying another
    /// nonzero SM_Key are dropped, those carrying it are trusted. Unset:
    /// `sm_key`.
    #[serde(default, deserialize_with = "de_key")]
    pub sa_key: Option<u64>,
    /// OverrunErrors threshold written to every port's PortInfo (OpenSM
    /// `overrun_errors_threshold`, default 8; 4 bits).
    pub overrun_errors_threshold: Option<u8>,
    /// Where routing engines run: `"process"` (the default: a child
    /// process per attempt, whose crash, exit, endless loop or runaway
    /// allocation is the engine's failure, not the SM's) or `"inline"`
    /// (in the SM's process: trusted builds, benchmarks).
    pub engine_isolation: Option<crate::engines::host::Mode>,
    /// Seconds an isolated engine may take before it is killed (default:
    /// a minute plus 20 ms per node).
    pub engine_timeout: Option<f64>,
    /// Address space of an isolated engine in MiB (default: half the
    /// machine's memory).
    pub engine_memory_limit: Option<u64>,
    /// Unix socket for `smcore ctl` (also --control-socket).
    pub control_socket: Option<PathBuf>,
    /// The SA's registrations (multicast groups, services, subscriptions)
    /// are read back from this file at start (OpenSM `sa_db_file`), and
    /// kept in it while `sa_db_dump` is on.
    pub sa_db_file: Option<PathBuf>,
    /// Save the SA's registrations whenever they change (OpenSM
    /// `sa_db_dump`): to `sa_db_file`, else `opensm-sa.dump` in the dump
    /// directory, as OpenSM does.
    pub sa_db_dump: bool,
    /// Sync saved files to disk before renaming them into place (OpenSM
    /// `fsync_high_avail_files`, default true).
    pub fsync_high_avail_files: Option<bool>,
    /// Keep a port's InformInfo subscriptions when it leaves the fabric
    /// unless this is set (OpenSM `drop_event_subscriptions`, default
    /// false).
    pub drop_event_subscriptions: bool,
    /// Refuse a join whose parameters disagree with its group's (OpenSM
    /// `mcgroup_join_validation`, default true).
    pub mcgroup_join_validation: Option<bool>,
    /// Check the MGID of a group created through the SA, and an IPoIB
    /// group against its broadcast group (OpenSM
    /// `ipoib_mcgroup_creation_validation`, default true).
    pub ipoib_mcgroup_creation_validation: Option<bool>,
    /// Verification.
    pub verify: VerifyConfig,
    /// Per-engine option tables.
    pub engines: BTreeMap<String, toml::Table>,
    /// Every other top-level key: engine options shared by all engines.
    #[serde(flatten)]
    pub options: toml::Table,
    /// OpenSM keys an opensm.conf gave that smcore accepts and does not use
    /// (empty for TOML); the SM logs them once at startup
    /// ([`Config::startup_warning`]).
    #[serde(skip)]
    pub not_supported: Vec<String>,
    /// Log file (OpenSM `log_file`; also --log-file); stderr when unset.
    pub log_file: Option<PathBuf>,
    /// Megabytes after which the log file is moved to `FILE.1` and started
    /// afresh (OpenSM `log_max_size`; 0 or unset: no limit).
    pub log_max_size: Option<u64>,
    /// Append to the log file at startup rather than start it empty
    /// (OpenSM `accum_log_file`; default true).
    pub accum_log_file: Option<bool>,
    /// OpenSM's `log_flags` (`-D`), mapped onto a log level when no
    /// --log/SMCORE_LOG filter is given.
    pub log_flags: Option<u8>,
    /// Log to syslog (`/dev/log`) instead of a file or stderr.
    pub syslog: bool,
    /// `text` or `json`.
    pub log_format: Option<String>,
    /// Text heading every log record, `PREFIX: ` (OpenSM `log_prefix`).
    pub log_prefix: Option<String>,
    /// The local port to run on, by port GUID (OpenSM `guid`; 0 or unset:
    /// --device/--port or the first active port).
    pub guid: Option<u64>,
    /// Write the SM's process id here while it runs.
    pub pid_file: Option<PathBuf>,
    /// Run the performance manager (OpenSM `perfmgr`).
    pub perfmgr: bool,
    /// Seconds between two reads of every port's counters (OpenSM
    /// `perfmgr_sweep_time_s`, default 180).
    pub perfmgr_sweep_time_s: Option<u64>,
    /// PMA requests in flight (OpenSM `perfmgr_max_outstanding_queries`).
    pub perfmgr_max_outstanding_queries: Option<usize>,
    /// Read switch ports only (OpenSM `perfmgr_ignore_cas`).
    pub perfmgr_ignore_cas: bool,
    /// Log threshold crossings (OpenSM `perfmgr_log_errors`, default true).
    pub perfmgr_log_errors: Option<bool>,
    /// Forget the counters of ports that left the fabric (OpenSM
    /// `perfmgr_rm_nodes`, default true).
    pub perfmgr_rm_nodes: Option<bool>,
    /// Follow PMA redirects (OpenSM `perfmgr_redir`, default true).
    pub perfmgr_redir: Option<bool>,
    /// Also raise events on PortXmitWait (OpenSM `perfmgr_xmit_wait_log`).
    pub perfmgr_xmit_wait_log: bool,
    /// PortXmitWait per interval that raises one (OpenSM
    /// `perfmgr_xmit_wait_threshold`).
    pub perfmgr_xmit_wait_threshold: Option<u64>,
    /// Per-interval thresholds by counter name as `perfquery` prints it
    /// (`SymbolErrorCounter = 10`); 0 turns a counter's events off.
    pub perfmgr_thresholds: BTreeMap<String, u64>,
    /// Disable a switch port whose link crosses a symbol, link recovery,
    /// link downed or link integrity threshold (off by default).
    pub perfmgr_isolate_ports: bool,
    /// Program congestion control on every switch and CA port after each
    /// heavy sweep (OpenSM `congestion_control`; the `cc` module).
    pub congestion_control: bool,
    /// CC_Key sent in every congestion control MAD (OpenSM `cc_key`,
    /// default 0).
    #[serde(default, deserialize_with = "de_key")]
    pub cc_key: Option<u64>,
    /// Congestion control MADs in flight (OpenSM `cc_max_outstanding_mads`,
    /// default 500).
    pub cc_max_outstanding_mads: Option<usize>,
    /// SwitchCongestionSetting Control_Map (OpenSM
    /// `cc_sw_cong_setting_control_map`).
    pub cc_sw_cong_setting_control_map: Option<u32>,
    /// SwitchCongestionSetting Victim_Mask, 256 bits in hex (OpenSM
    /// `cc_sw_cong_setting_victim_mask`).
    pub cc_sw_cong_setting_victim_mask: Option<String>,
    /// SwitchCongestionSetting Credit_Mask, 256 bits in hex (OpenSM
    /// `cc_sw_cong_setting_credit_mask`).
    pub cc_sw_cong_setting_credit_mask: Option<String>,
    /// SwitchCongestionSetting Threshold, 0..15 (OpenSM
    /// `cc_sw_cong_setting_threshold`).
    pub cc_sw_cong_setting_threshold: Option<u8>,
    /// SwitchCongestionSetting Packet_Size (OpenSM
    /// `cc_sw_cong_setting_packet_size`).
    pub cc_sw_cong_setting_packet_size: Option<u8>,
    /// SwitchCongestionSetting CS_Threshold, 0..15 (OpenSM
    /// `cc_sw_cong_setting_credit_starvation_threshold`).
    pub cc_sw_cong_setting_credit_starvation_threshold: Option<u8>,
    /// SwitchCongestionSetting CS_ReturnDelay, `SHIFT:MULTIPLIER` (OpenSM
    /// `cc_sw_cong_setting_credit_starvation_return_delay`).
    pub cc_sw_cong_setting_credit_starvation_return_delay: Option<String>,
    /// SwitchCongestionSetting Marking_Rate (OpenSM
    /// `cc_sw_cong_setting_marking_rate`).
    pub cc_sw_cong_setting_marking_rate: Option<u16>,
    /// CACongestionSetting Port_Control (OpenSM
    /// `cc_ca_cong_setting_port_control`).
    pub cc_ca_cong_setting_port_control: Option<u16>,
    /// CACongestionSetting Control_Map (OpenSM
    /// `cc_ca_cong_setting_control_map`).
    pub cc_ca_cong_setting_control_map: Option<u16>,
    /// CACongestionSetting CCTI_Timer by SL (index = SL; OpenSM's
    /// `cc_ca_cong_setting_ccti_timer SL VALUE` lines).
    pub cc_ca_cong_setting_ccti_timer: Vec<u16>,
    /// CACongestionSetting CCTI_Increase by SL.
    pub cc_ca_cong_setting_ccti_increase: Vec<u8>,
    /// CACongestionSetting Trigger_Threshold by SL.
    pub cc_ca_cong_setting_trigger_threshold: Vec<u8>,
    /// CACongestionSetting CCTI_Min by SL.
    pub cc_ca_cong_setting_ccti_min: Vec<u8>,
    /// The CongestionControlTable: a comma list of `SHIFT:MULTIPLIER`,
    /// at most 128 (OpenSM `cc_cct`).
    pub cc_cct: Option<String>,
    /// Serve Prometheus metrics on this loopback address
    /// (`127.0.0.1:9464`; also --metrics-listen).
    pub metrics_listen: Option<String>,
    /// The intended cabling, a topology file (ibnetdiscover / ibsim net
    /// format): compared with the fabric after every heavy sweep, each
    /// difference logged once ([`crate::cabling`]; `smcore check`).
    pub expect_topology: Option<PathBuf>,
    /// Names to show nodes by instead of their NodeDescription, in the
    /// format of rdma-core's `--node-name-map` (`0xGUID "name"` lines;
    /// [`crate::node_names`]; OpenSM `node_name_map_name`, also
    /// --node-name-map). Read at startup, where a bad line stops the SM,
    /// and again for every heavy sweep's dumps.
    pub node_name_map: Option<PathBuf>,
    /// OpenSM's partitions.conf (OpenSM `partition_config_file`; default
    /// /etc/opensm/partitions.conf, whose absence means the default
    /// partition only; a file given here must exist).
    pub partition_config_file: Option<PathBuf>,
    /// Partition enforcement on switch ports facing end nodes: `both` (the
    /// default), `in`, `out` or `off` (OpenSM `part_enforce`).
    pub part_enforce: Option<sm_partition::PartEnforce>,
    /// No partition enforcement on switches; wins over `part_enforce`
    /// (OpenSM `no_partition_enforcement`).
    pub no_partition_enforcement: bool,
    /// A port may be a full and a limited member of one partition
    /// (`both`; OpenSM `allow_both_pkeys`).
    pub allow_both_pkeys: bool,
    /// Program SL2VL and VLArb tables from the `qos_*` keys where the
    /// routing engine gives none, and choose PathRecord SLs from the QoS
    /// policy file (OpenSM `qos`, default false).
    pub qos: bool,
    /// The QoS policy file (OpenSM `qos_policy_file`, default
    /// `/etc/opensm/qos-policy.conf`; a missing file is no policy).
    pub qos_policy_file: Option<PathBuf>,
    /// `qos_max_vls` for every port class: read as OpenSM does, which uses it for
    /// nothing in the tables (its osm_qos.c builds and ignores it).
    pub qos_max_vls: Option<u8>,
    /// `qos_high_limit` for every port class: PortInfo:VLHighLimit (0-255; OpenSM default 0).
    pub qos_high_limit: Option<u8>,
    /// `qos_vlarb_high` for every port class: `"vl:weight,..."`, up to 64 entries.
    pub qos_vlarb_high: Option<String>,
    /// `qos_vlarb_low` for every port class: `"vl:weight,..."`, up to 64 entries.
    pub qos_vlarb_low: Option<String>,
    /// `qos_sl2vl` for every port class: 16 VLs, SL 0 first, comma separated.
    pub qos_sl2vl: Option<String>,
    /// `qos_ca_max_vls` for CA ports: read as OpenSM does, which uses it for
    /// nothing in the tables (its osm_qos.c builds and ignores it).
    pub qos_ca_max_vls: Option<u8>,
    /// `qos_ca_high_limit` for CA ports: PortInfo:VLHighLimit (0-255; OpenSM default 0).
    pub qos_ca_high_limit: Option<u8>,
    /// `qos_ca_vlarb_high` for CA ports: `"vl:weight,..."`, up to 64 entries.
    pub qos_ca_vlarb_high: Option<String>,
    /// `qos_ca_vlarb_low` for CA ports: `"vl:weight,..."`, up to 64 entries.
    pub qos_ca_vlarb_low: Option<String>,
    /// `qos_ca_sl2vl` for CA ports: 16 VLs, SL 0 first, comma separated.
    pub qos_ca_sl2vl: Option<String>,
    /// `qos_sw0_max_vls` for switch port 0 (enhanced): read as OpenSM does, which uses it for
    /// nothing in the tables (its osm_qos.c builds and ignores it).
    pub qos_sw0_max_vls: Option<u8>,
    /// `qos_sw0_high_limit` for switch port 0 (enhanced): PortInfo:VLHighLimit (0-255; OpenSM default 0).
    pub qos_sw0_high_limit: Option<u8>,
    /// `qos_sw0_vlarb_high` for switch port 0 (enhanced): `"vl:weight,..."`, up to 64 entries.
    pub qos_sw0_vlarb_high: Option<String>,
    /// `qos_sw0_vlarb_low` for switch port 0 (enhanced): `"vl:weight,..."`, up to 64 entries.
    pub qos_sw0_vlarb_low: Option<String>,
    /// `qos_sw0_sl2vl` for switch port 0 (enhanced): 16 VLs, SL 0 first, comma separated.
    pub qos_sw0_sl2vl: Option<String>,
    /// `qos_swe_max_vls` for switch external ports: read as OpenSM does, which uses it for
    /// nothing in the tables (its osm_qos.c builds and ignores it).
    pub qos_swe_max_vls: Option<u8>,
    /// `qos_swe_high_limit` for switch external ports: PortInfo:VLHighLimit (0-255; OpenSM default 0).
    pub qos_swe_high_limit: Option<u8>,
    /// `qos_swe_vlarb_high` for switch external ports: `"vl:weight,..."`, up to 64 entries.
    pub qos_swe_vlarb_high: Option<String>,
    /// `qos_swe_vlarb_low` for switch external ports: `"vl:weight,..."`, up to 64 entries.
    pub qos_swe_vlarb_low: Option<String>,
    /// `qos_swe_sl2vl` for switch external ports: 16 VLs, SL 0 first, comma separated.
    pub qos_swe_sl2vl: Option<String>,
    /// `qos_rtr_max_vls` for router ports: read as OpenSM does, which uses it for
    /// nothing in the tables (its osm_qos.c builds and ignores it).
    pub qos_rtr_max_vls: Option<u8>,
    /// `qos_rtr_high_limit` for router ports: PortInfo:VLHighLimit (0-255; OpenSM default 0).
    pub qos_rtr_high_limit: Option<u8>,
    /// `qos_rtr_vlarb_high` for router ports: `"vl:weight,..."`, up to 64 entries.
    pub qos_rtr_vlarb_high: Option<String>,
    /// `qos_rtr_vlarb_low` for router ports: `"vl:weight,..."`, up to 64 entries.
    pub qos_rtr_vlarb_low: Option<String>,
    /// `qos_rtr_sl2vl` for router ports: 16 VLs, SL 0 first, comma separated.
    pub qos_rtr_sl2vl: Option<String>,
}

impl Config {
    /// Read a configuration file: a `*.toml` file is TOML; any other is
    /// OpenSM's `opensm.conf` when [`opensm::is_opensm_format`] says so, else
    /// TOML.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
        Config::parse_any(&text, path)
    }

    /// Configuration text of either format, told apart as [`Config::load`]
    /// does; `path` names the file (and its extension counts).
    pub fn parse_any(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let toml_name = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        if toml_name || !opensm::is_opensm_format(text) {
            return Config::parse(text, path);
        }
        opensm::parse(text, path)
    }

    /// The warning the SM logs once at startup, when logging is set up:
    /// the OpenSM keys `path` gave that smcore accepts and does not use.
    pub fn startup_warning(&self, path: &Path) -> Option<String> {
        opensm::not_supported_warning(path, &self.not_supported)
    }

    /// Parse configuration text; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1).unwrap_or(0);
            ConfigError::Parse { path: path.to_path_buf(), line, message: e.message().to_string() }
        })
    }

    /// The M_Key settings (`m_key` and the three options beside it).
    pub fn m_key_config(&self) -> sm_transport::MKeyConfig {
        sm_transport::MKeyConfig {
            m_key: self.m_key.unwrap_or(0),
            protect_bits: self.m_key_protection_level.unwrap_or(0),
            lease_period: self.m_key_lease_period.unwrap_or(0),
            per_port: self.m_key_per_port,
        }
    }

    /// The node name map `node_name_map` names, empty when unset.
    pub fn node_names(&self) -> Result<crate::node_names::NodeNameMap, crate::node_names::NodeNameMapError> {
        match &self.node_name_map {
            Some(path) => crate::node_names::NodeNameMap::load(path),
            None => Ok(crate::node_names::NodeNameMap::default()),
        }
    }

    /// Set a shared engine option (a command-line flag overriding the file).
    pub fn set_option(&mut self, key: &str, value: impl Into<toml::Value>) {
        self.options.insert(key.to_string(), value.into());
    }

    /// The TOML text given to engine `name`'s constructor: shared options,
    /// `lmc`, then the engine's own table.
    pub fn engine_text(&self, name: &str) -> String {
        let mut t = self.options.clone();
        t.insert("lmc".into(), toml::Value::Integer(self.lmc as i64));
        // Engines that write their own dumps (ftree's CA order) put them
        // beside the core's.
        if let Some(d) = &self.dump_dir {
            t.entry("dump_dir").or_insert_with(|| toml::Value::String(d.display().to_string()));
        }
        if let Some(own) = self.engines.get(name) {
            for (k, v) in own {
                t.insert(k.clone(), v.clone());
            }
        }
        toml::to_string(&t).unwrap_or_default()
    }
}

/// A 64-bit key as a TOML integer or a `"0x..."` string.
fn de_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Key {
        Int(i64),
        Text(String),
    }
    match Key::deserialize(d)? {
        Key::Int(v) => u64::try_from(v).map(Some).map_err(|_| serde::de::Error::custom("a key cannot be negative")),
        Key::Text(t) => {
            let digits = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"));
            digits
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom(format!("key {t:?} is not 0x followed by up to 16 hex digits")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_text_merges_shared_and_own_options() {
        let c = Config::parse(
            "lmc = 2\nguid_routing_order_file = \"/o\"\n[engines.updn]\nroot_guid_file = \"/r\"\nguid_routing_order_file = \"/u\"\n",
            Path::new("x.toml"),
        )
        .unwrap();
        let t: toml::Table = toml::from_str(&c.engine_text("updn")).unwrap();
        assert_eq!(t["lmc"].as_integer(), Some(2));
        assert_eq!(t["root_guid_file"].as_str(), Some("/r"));
        assert_eq!(t["guid_routing_order_file"].as_str(), Some("/u"));
        let m: toml::Table = toml::from_str(&c.engine_text("minhop")).unwrap();
        assert_eq!(m["guid_routing_order_file"].as_str(), Some("/o"));
    }

    #[test]
    fn shipped_config_states_the_defaults() {
        let shipped = Config::parse(include_str!("../../../config/smcore.toml"), Path::new("config/smcore.toml")).unwrap();
        let defaults = Config {
            routing_engine: Some(crate::settings::DEFAULT_ENGINES.into()),
            sweep_interval: Some(10.0),
            max_wire_smps: Some(DEFAULT_MAX_WIRE_SMPS),
            transaction_timeout: Some(DEFAULT_TRANSACTION_TIMEOUT_MS),
            transaction_retries: Some(DEFAULT_TRANSACTION_RETRIES),
            sm_priority: Some(0),
            sminfo_polling_timeout: Some(crate::standby::DEFAULT_POLL_INTERVAL.as_millis() as u64),
            polling_retry_number: Some(crate::standby::DEFAULT_POLL_RETRIES),
            sm_key: Some(DEFAULT_SM_KEY),
            subnet_prefix: Some(crate::sweep::DEFAULT_SUBNET_PREFIX),
            sm_sl: Some(0),
            m_key: Some(0),
            m_key_protection_level: Some(0),
            m_key_lease_period: Some(0),
            engine_isolation: Some(crate::engines::host::Mode::default()),
            ..Config::default()
        };
        assert_eq!(shipped, defaults);
    }

    #[test]
    fn m_key_options_read_as_opensm_names_them() {
        let c = Config::parse(
            "m_key = \"0xfedcba9876543210\"\nm_key_protection_level = 2\nm_key_lease_period = 60\nm_key_per_port = true\n",
            Path::new("x.toml"),
        )
        .unwrap();
        let m = c.m_key_config();
        assert_eq!((m.m_key, m.protect_bits, m.lease_period, m.per_port), (0xfedc_ba98_7654_3210, 2, 60, true));
        assert!(!c.options.contains_key("m_key"), "not an engine option");
        assert_eq!(Config::parse("m_key = 0x11\n", Path::new("x")).unwrap().m_key, Some(0x11));
        assert!(Config::parse("m_key = \"11\"\n", Path::new("x")).is_err());
        assert!(!Config::default().m_key_config().enabled());
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = Config::parse("lmc = 1\n\n[verify]\ncredit_loops = \"sometimes\"\n", Path::new("smcore.toml")).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("smcore.toml:4:"), "{s}");
    }
}
