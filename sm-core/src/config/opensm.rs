//! OpenSM's own `opensm.conf`, read as it is: one `key value` per line,
//! `#` starts a comment, values in OpenSM's spellings (`TRUE`/`FALSE`,
//! C numbers: decimal, `0x` hex, leading-`0` octal; `(null)` for unset;
//! one pair of surrounding quotes is dropped, as OpenSM's reader does).
//!
//! Every key OpenSM knows is in [`KEYS`]: either mapped onto the same
//! [`Config`] fields the TOML file fills (or passed to the engines as the
//! option of the same name), or accepted and listed as not supported. A key
//! OpenSM does not know is an error naming file and line: OpenSM only logs
//! those, but a typo that silently changes nothing is what a move between
//! SMs must not have. `docs/opensm-conf-keys.md` is generated from [`KEYS`]
//! by [`keys_markdown`].

use std::path::{Path, PathBuf};

use super::{Config, ConfigError};

/// What smcore does with one OpenSM key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Read into the core's [`Config`] field of this name.
    Core(&'static str),
    /// Passed to every routing engine as the option of the same name; the
    /// text names the engines that read it.
    Engine(&'static str),
    /// Accepted and not read, because smcore does at least as much by its
    /// own means, which the text names (a value is not checked).
    Superseded(&'static str),
    /// Accepted, not used; the text says what smcore does instead.
    NotSupported(&'static str),
}

/// One key of `opensm.conf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The key as OpenSM spells it.
    pub name: &'static str,
    /// What smcore does with it.
    pub support: Support,
}

use Support::{Core, Engine, NotSupported, Superseded};

const UNUSED: Support = NotSupported("no such behaviour in smcore");

const fn k(name: &'static str, support: Support) -> Key {
    Key { name, support }
}

/// Every key of OpenSM's option table (opensm 3.3.23's `opensm -c`, plus
/// `dimn_ports_file` and `max_rate_enum` of later versions), in the order
/// `opensm -c` writes them, then smcore's own additions.
pub const KEYS: &[Key] = &[
    k("guid", Core("guid")),
    k("m_key", Core("m_key")),
    k("m_key_lease_period", Core("m_key_lease_period")),
    k("m_key_protection_level", Core("m_key_protection_level")),
    k("m_key_lookup", Core("m_key_lookup")),
    k("sm_key", Core("sm_key")),
    k("sa_key", Core("sa_key")),
    k("subnet_prefix", Core("subnet_prefix")),
    k("lmc", Core("lmc")),
    k("lmc_esp0", NotSupported("switches with an enhanced port 0 get one LID (LMC 0) whatever `lmc` says")),
    k("sm_sl", Core("sm_sl")),
    k("packet_life_time", Core("packet_life_time")),
    k("vl_stall_count", Core("vl_stall_count")),
    k("leaf_vl_stall_count", Core("leaf_vl_stall_count")),
    k("head_of_queue_lifetime", Core("head_of_queue_lifetime")),
    k("leaf_head_of_queue_lifetime", Core("leaf_head_of_queue_lifetime")),
    k("max_op_vls", Core("max_op_vls")),
    k("force_link_speed", Core("force_link_speed")),
    k("force_link_speed_ext", Core("force_link_speed_ext")),
    k("force_link_width", Core("force_link_width")),
    k("fdr10", NotSupported("FDR10 is enabled through Mellanox's vendor ExtendedPortInfo attribute, which smcore does not send; standard speeds follow `force_link_speed`/`force_link_speed_ext`")),
    k("subnet_timeout", Core("subnet_timeout")),
    k("local_phy_errors_threshold", Core("local_phy_errors_threshold")),
    k("overrun_errors_threshold", Core("overrun_errors_threshold")),
    k("use_mfttop", NotSupported("SwitchInfo:MulticastFDBTop is not written: switches keep the MFT range they report")),
    k("partition_config_file", Core("partition_config_file")),
    k("no_partition_enforcement", Core("no_partition_enforcement")),
    k("part_enforce", Core("part_enforce")),
    k("allow_both_pkeys", Core("allow_both_pkeys")),
    k("keep_pkey_indexes", Core("keep_pkey_indexes")),
    k("sm_assigned_guid", Core("sm_assigned_guid")),
    k("sweep_interval", Core("sweep_interval")),
    k("reassign_lids", Core("reassign_lids")),
    k("force_heavy_sweep", Core("force_heavy_sweep")),
    k("sweep_on_trap", Core("sweep_on_trap")),
    k("port_profile_switch_nodes", Engine("minhop, dor, updn, dnup (OpenSM's port selection; minhop-balanced balances by pair load)")),
    k("port_prof_ignore_file", Engine("minhop, updn, dnup")),
    k("hop_weights_file", Engine("minhop, dor; minhop-balanced without its balancing pass")),
    k("dimn_ports_file", Engine("minhop, minhop-balanced, dor (its order of dimensions), updn, dnup, as `port_search_ordering_file`")),
    k("port_search_ordering_file", Engine("minhop, minhop-balanced, dor (its order of dimensions), updn, dnup")),
    k("routing_engine", Core("routing_engine")),
    k("avoid_throttled_links", NotSupported("the engines see each link's active width and speed only, not the widths and speeds both ends enable, so a throttled link (running below them) cannot be told apart")),
    k("connect_roots", Engine("ftree")),
    k("use_ucast_cache", Core("use_ucast_cache")),
    k("lid_matrix_dump_file", Engine("file: min hop over the file's hop counts when no lfts_file is given")),
    k("lfts_file", Engine("file")),
    k("root_guid_file", Engine("ftree, updn")),
    k("cn_guid_file", Engine("ftree, dfsssp, sssp")),
    k("io_guid_file", Engine("ftree, dfsssp, sssp")),
    k("quasi_ftree_indexing", Engine("ftree")),
    k("max_reverse_hops", Engine("ftree")),
    k("ids_guid_file", Engine("updn")),
    k("guid_routing_order_file", Engine("minhop, updn, dnup")),
    k("do_mesh_analysis", Engine("lash")),
    k("lash_start_vl", Engine("lash")),
    k("nue_max_num_vls", Engine("nue")),
    k("nue_include_switches", Engine("nue")),
    k("port_shifting", Engine("minhop, minhop-balanced, dor, updn, dnup")),
    k("scatter_ports", Engine("minhop, minhop-balanced, dor, updn, dnup (seeded per switch: the same seed gives the same tables, not glibc's random() sequence)")),
    k("guid_routing_order_no_scatter", Engine("minhop, minhop-balanced, dor, updn, dnup")),
    k("sa_db_file", Core("sa_db_file")),
    k("sa_db_dump", Core("sa_db_dump")),
    k("torus_config", Engine("torus-2QoS")),
    k("sm_priority", Core("sm_priority")),
    k("ignore_other_sm", Core("ignore_other_sm")),
    k("sminfo_polling_timeout", Core("sminfo_polling_timeout")),
    k("polling_retry_number", Core("polling_retry_number")),
    k("honor_guid2lid_file", Core("honor_guid2lid_file")),
    k("max_wire_smps", Core("max_wire_smps")),
    k("max_wire_smps2", NotSupported("no second ceiling for SMPs past a timeout: the SMP window (transport/src/window.rs) grows with answers up to `max_wire_smps` and halves on loss")),
    k("max_smps_timeout", NotSupported("no second ceiling for SMPs past a timeout: the SMP window (transport/src/window.rs) grows with answers up to `max_wire_smps` and halves on loss")),
    k("transaction_timeout", Core("transaction_timeout")),
    k("transaction_retries", Core("transaction_retries")),
    k("long_transaction_timeout", NotSupported("AllInputPorts SL2VL Sets (`use_optimized_slvl`) wait `transaction_timeout`, as every SMP")),
    k("max_msg_fifo_timeout", NotSupported("SA requests wait in a bounded queue (full: new ones are dropped), not dropped by age")),
    k("single_thread", Superseded("the SA answers on a thread of its own from a database built once per sweep: a query never waits for the sweep, and the sweep never for a query (OpenSM's pool of SA threads, FALSE, exists for that)")),
    k("daemon", Superseded("smcore never forks: packaging/smcore.service runs it in the background under systemd, `--pid-file` writes its PID")),
    k("sm_inactive", Core("sm_inactive")),
    k("babbling_port_policy", Core("babbling_port_policy")),
    k("drop_event_subscriptions", Core("drop_event_subscriptions")),
    k("ipoib_mcgroup_creation_validation", Core("ipoib_mcgroup_creation_validation")),
    k("mcgroup_join_validation", Core("mcgroup_join_validation")),
    k("use_original_extended_sa_rates_only", Core("use_original_extended_sa_rates_only")),
    k("max_rate_enum", Core("max_rate_enum")),
    k("use_optimized_slvl", Core("use_optimized_slvl")),
    k("fsync_high_avail_files", Core("fsync_high_avail_files")),
    k("perfmgr", Core("perfmgr")),
    k("perfmgr_redir", Core("perfmgr_redir")),
    k("perfmgr_sweep_time_s", Core("perfmgr_sweep_time_s")),
    k("perfmgr_max_outstanding_queries", Core("perfmgr_max_outstanding_queries")),
    k("perfmgr_ignore_cas", Core("perfmgr_ignore_cas")),
    k("perfmgr_rm_nodes", Core("perfmgr_rm_nodes")),
    k("perfmgr_log_errors", Core("perfmgr_log_errors")),
    k("perfmgr_query_cpi", Superseded("a PMA's support for extended counters is learnt by asking: PortCountersExtended of every port, PortCounters where it is refused")),
    k("perfmgr_xmit_wait_log", Core("perfmgr_xmit_wait_log")),
    k("perfmgr_xmit_wait_threshold", Core("perfmgr_xmit_wait_threshold")),
    k("event_db_dump_file", Superseded("the counters are read live with `smcore ctl perfmgr` and exported as Prometheus metrics (--metrics-listen)")),
    k("event_plugin_name", Superseded("the performance manager's counters and events are exported on --metrics-listen (Prometheus), logged, and read with `smcore ctl perfmgr`: a site's collector reads them from outside, where OpenSM loads a plugin into the SM's process (third-party code smcore keeps out of it, as it keeps engines in a sandbox)")),
    k("event_plugin_options", Superseded("see event_plugin_name: no plugin is loaded, so it has no options")),
    k("node_name_map_name", Core("node_name_map")),
    k("log_flags", Core("log_flags")),
    k("force_log_flush", Superseded("every log record is written through to the file or syslog socket at once, as OpenSM's TRUE does")),
    k("log_file", Core("log_file")),
    k("log_max_size", Core("log_max_size")),
    k("accum_log_file", Core("accum_log_file")),
    k("per_module_logging_file", Superseded("per-module log levels are set by the tracing filter (`--log 'sm_core::sa=debug,info'`, SMCORE_LOG), changed at run time by `smcore ctl loglevel`")),
    k("dump_files_dir", Core("dump_files_dir")),
    k("enable_quirks", NotSupported("smcore has no vendor-specific quirks to enable")),
    k("no_clients_rereg", Core("no_clients_rereg")),
    k("disable_multicast", Core("disable_multicast")),
    k("exit_on_fatal", Core("exit_on_fatal")),
    k("console", Superseded("`smcore ctl` on the control socket (a Unix socket, --control-socket/control_socket) gives the console's commands: status, sweeps, port and perfmgr state, log level")),
    k("console_port", Superseded("`smcore ctl` talks to a Unix socket (--control-socket/control_socket), not a TCP port")),
    k("qos", Core("qos")),
    k("qos_policy_file", Core("qos_policy_file")),
    k("suppress_sl2vl_mad_status_errors", Core("suppress_sl2vl_mad_status_errors")),
    k("qos_max_vls", Core("qos_max_vls")),
    k("qos_high_limit", Core("qos_high_limit")),
    k("qos_vlarb_high", Core("qos_vlarb_high")),
    k("qos_vlarb_low", Core("qos_vlarb_low")),
    k("qos_sl2vl", Core("qos_sl2vl")),
    k("qos_ca_max_vls", Core("qos_ca_max_vls")),
    k("qos_ca_high_limit", Core("qos_ca_high_limit")),
    k("qos_ca_vlarb_high", Core("qos_ca_vlarb_high")),
    k("qos_ca_vlarb_low", Core("qos_ca_vlarb_low")),
    k("qos_ca_sl2vl", Core("qos_ca_sl2vl")),
    k("qos_sw0_max_vls", Core("qos_sw0_max_vls")),
    k("qos_sw0_high_limit", Core("qos_sw0_high_limit")),
    k("qos_sw0_vlarb_high", Core("qos_sw0_vlarb_high")),
    k("qos_sw0_vlarb_low", Core("qos_sw0_vlarb_low")),
    k("qos_sw0_sl2vl", Core("qos_sw0_sl2vl")),
    k("qos_swe_max_vls", Core("qos_swe_max_vls")),
    k("qos_swe_high_limit", Core("qos_swe_high_limit")),
    k("qos_swe_vlarb_high", Core("qos_swe_vlarb_high")),
    k("qos_swe_vlarb_low", Core("qos_swe_vlarb_low")),
    k("qos_swe_sl2vl", Core("qos_swe_sl2vl")),
    k("qos_rtr_max_vls", Core("qos_rtr_max_vls")),
    k("qos_rtr_high_limit", Core("qos_rtr_high_limit")),
    k("qos_rtr_vlarb_high", Core("qos_rtr_vlarb_high")),
    k("qos_rtr_vlarb_low", Core("qos_rtr_vlarb_low")),
    k("qos_rtr_sl2vl", Core("qos_rtr_sl2vl")),
    k("congestion_control", Core("congestion_control")),
    k("cc_key", Core("cc_key")),
    k("cc_max_outstanding_mads", Core("cc_max_outstanding_mads")),
    k("cc_sw_cong_setting_control_map", Core("cc_sw_cong_setting_control_map")),
    k("cc_sw_cong_setting_victim_mask", Core("cc_sw_cong_setting_victim_mask")),
    k("cc_sw_cong_setting_credit_mask", Core("cc_sw_cong_setting_credit_mask")),
    k("cc_sw_cong_setting_threshold", Core("cc_sw_cong_setting_threshold")),
    k("cc_sw_cong_setting_packet_size", Core("cc_sw_cong_setting_packet_size")),
    k("cc_sw_cong_setting_credit_starvation_threshold", Core("cc_sw_cong_setting_credit_starvation_threshold")),
    k("cc_sw_cong_setting_credit_starvation_return_delay", Core("cc_sw_cong_setting_credit_starvation_return_delay")),
    k("cc_sw_cong_setting_marking_rate", Core("cc_sw_cong_setting_marking_rate")),
    k("cc_ca_cong_setting_port_control", Core("cc_ca_cong_setting_port_control")),
    k("cc_ca_cong_setting_control_map", Core("cc_ca_cong_setting_control_map")),
    k("cc_ca_cong_setting_ccti_timer", Core("cc_ca_cong_setting_ccti_timer")),
    k("cc_ca_cong_setting_ccti_increase", Core("cc_ca_cong_setting_ccti_increase")),
    k("cc_ca_cong_setting_trigger_threshold", Core("cc_ca_cong_setting_trigger_threshold")),
    k("cc_ca_cong_setting_ccti_min", Core("cc_ca_cong_setting_ccti_min")),
    k("cc_cct", Core("cc_cct")),
    k("prefix_routes_file", NotSupported("the SA answers PathRecords inside the subnet only: no router ports to send other subnet prefixes to")),
    k("consolidate_ipv6_snm_req", UNUSED),
    k("log_prefix", Core("log_prefix")),
    // smcore's own, not OpenSM's (OpenSM logs it as unrecognised and goes on).
    k("m_key_per_port", Core("m_key_per_port")),
];

/// The entry for `name`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// Whether `text` is in OpenSM's format rather than TOML: its first line
/// that is neither blank nor a `#` comment has no `=` and is a lower-case
/// key, white space and a value (`^\s*[a-z_0-9]+\s+\S`). TOML's `key = v`
/// and `[table]` lines fail that test; an empty file is TOML.
pub fn is_opensm_format(text: &str) -> bool {
    let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')) else {
        return false;
    };
    if line.contains('=') {
        return false;
    }
    let key_len = line.bytes().take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_').count();
    let rest = &line[key_len..];
    key_len > 0 && rest.starts_with([' ', '\t']) && !rest.trim().is_empty()
}

/// Parse `opensm.conf` text; `path` only names it in errors. Keys OpenSM
/// knows that smcore does not use end up in [`Config::not_supported`], in
/// the order first met.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    for (i, raw) in text.lines().enumerate() {
        let fail = |message: String| ConfigError::Parse { path: path.to_path_buf(), line: i + 1, message };
        // As OpenSM: everything from the first `#` on is a comment.
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (name, rest) = line.split_once([' ', '\t']).unwrap_or((line, ""));
        let value = clean_value(rest);
        let Some(entry) = key(name) else {
            return Err(fail(format!("unknown key `{name}`: not an OpenSM option (see docs/opensm-conf-keys.md)")));
        };
        match entry.support {
            // Nothing to read: the document says what does it instead.
            Superseded(_) => {}
            NotSupported(_) => {
                if !config.not_supported.iter().any(|k| k == name) {
                    config.not_supported.push(name.to_string());
                }
            }
            Core(_) | Engine(_) => apply(&mut config, name, value).map_err(|m| fail(format!("{name} {value}: {m}")))?,
        }
    }
    Ok(config)
}

/// Trim the value and drop one pair of surrounding quotes, as OpenSM does.
fn clean_value(rest: &str) -> &str {
    let v = rest.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// A C `strtoull(.., 0)` number: decimal, `0x` hex or leading-`0` octal,
/// nothing else on the line, at most `max`.
fn number(v: &str, max: u64) -> Result<u64, String> {
    let parsed = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else if v.len() > 1 && v.starts_with('0') {
        u64::from_str_radix(&v[1..], 8)
    } else {
        v.parse::<u64>()
    };
    let n = parsed.map_err(|_| "expected a number (decimal, 0x hex or 0 octal)".to_string())?;
    if n > max {
        return Err(format!("out of range: at most {max}"));
    }
    Ok(n)
}

/// A number from `min` to `max`.
fn ranged(v: &str, min: u64, max: u64, why_min: &str) -> Result<u64, String> {
    let n = number(v, max)?;
    if n < min {
        return Err(format!("must be at least {min}{why_min}"));
    }
    Ok(n)
}

/// `TRUE` or `FALSE`. OpenSM reads anything but `TRUE` as FALSE; a `true`
/// meant as TRUE would then silently differ between the two SMs, so
/// anything else is refused.
fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "TRUE" => Ok(true),
        "FALSE" => Ok(false),
        _ => Err("expected TRUE or FALSE".into()),
    }
}

/// A string; `(null)` (OpenSM's spelling of unset) is `None`.
fn text(v: &str) -> Result<Option<String>, String> {
    match v {
        "(null)" => Ok(None),
        "" => Err("no value: give one, or (null) for none".into()),
        s => Ok(Some(s.to_string())),
    }
}

/// A `*_high_limit`: 0-255, or OpenSM's -1 for unset.
fn high_limit(v: &str) -> Result<Option<u8>, String> {
    if v == "-1" {
        return Ok(None);
    }
    Ok(Some(number(v, 255)? as u8))
}

/// A `*_vlarb_*` list (`(null)`: unset), checked.
fn vlarb(v: &str) -> Result<Option<String>, String> {
    let t = text(v)?;
    if let Some(t) = &t {
        crate::qos::parse_vlarb(t)?;
    }
    Ok(t)
}

/// A `*_sl2vl` list (`(null)`: unset), checked.
fn sl2vl(v: &str) -> Result<Option<String>, String> {
    let t = text(v)?;
    if let Some(t) = &t {
        crate::qos::parse_sl2vl(t)?;
    }
    Ok(t)
}

/// Store one honoured key's value.
fn apply(c: &mut Config, name: &str, v: &str) -> Result<(), String> {
    const U32: u64 = u32::MAX as u64;
    match name {
        "routing_engine" => c.routing_engine = text(v)?,
        "lmc" => c.lmc = number(v, 7).map_err(|e| format!("{e} (PortInfo.LMC has 3 bits)"))? as u8,
        "sweep_interval" => {
            c.sweep_interval =
                Some(ranged(v, 1, U32, ": OpenSM's 0 (no light sweeps) is not supported by smcore")? as f64)
        }
        "max_wire_smps" => {
            c.max_wire_smps = Some(ranged(v, 1, U32, ": OpenSM's 0 (no limit) is not supported by smcore")? as usize)
        }
        "transaction_timeout" => c.transaction_timeout = Some(ranged(v, 1, U32, " ms")?),
        "transaction_retries" => c.transaction_retries = Some(number(v, U32)? as u32),
        "use_ucast_cache" => c.use_ucast_cache = boolean(v)?,
        "no_clients_rereg" => c.no_clients_rereg = boolean(v)?,
        "force_heavy_sweep" => c.force_heavy_sweep = boolean(v)?,
        "sweep_on_trap" => c.sweep_on_trap = Some(boolean(v)?),
        "sm_inactive" => c.sm_inactive = boolean(v)?,
        "sm_assigned_guid" => c.sm_assigned_guid = number(v, 0xff)? as u8,
        "disable_multicast" => c.disable_multicast = boolean(v)?,
        "exit_on_fatal" => c.exit_on_fatal = Some(boolean(v)?),
        "ignore_other_sm" => c.ignore_other_sm = boolean(v)?,
        "use_optimized_slvl" => c.use_optimized_slvl = boolean(v)?,
        "babbling_port_policy" => c.babbling_port_policy = boolean(v)?,
        "keep_pkey_indexes" => c.keep_pkey_indexes = Some(boolean(v)?),
        "honor_guid2lid_file" => c.honor_guid2lid_file = boolean(v)?,
        "m_key_lookup" => c.m_key_lookup = Some(boolean(v)?),
        "suppress_sl2vl_mad_status_errors" => c.suppress_sl2vl_mad_status_errors = boolean(v)?,
        "reassign_lids" => c.reassign_lids = boolean(v)?,
        "sm_priority" => c.sm_priority = Some(number(v, 15)? as u8),
        "sminfo_polling_timeout" => c.sminfo_polling_timeout = Some(ranged(v, 1, U32, " ms")?),
        "polling_retry_number" => c.polling_retry_number = Some(ranged(v, 1, U32, "")? as u32),
        "sm_key" => c.sm_key = Some(number(v, u64::MAX)?),
        "sa_key" => c.sa_key = Some(number(v, u64::MAX)?),
        "subnet_prefix" => c.subnet_prefix = Some(number(v, u64::MAX)?),
        "sm_sl" => c.sm_sl = Some(number(v, 15)? as u8),
        "m_key" => c.m_key = Some(number(v, u64::MAX)?),
        "m_key_protection_level" => c.m_key_protection_level = Some(number(v, 3)? as u8),
        "m_key_lease_period" => c.m_key_lease_period = Some(number(v, u16::MAX as u64)? as u16),
        "m_key_per_port" => c.m_key_per_port = boolean(v)?,
        // Logging (`crate::logging`).
        "guid" => c.guid = Some(number(v, u64::MAX)?),
        // The performance manager (`crate::perfmgr`).
        "perfmgr" => c.perfmgr = boolean(v)?,
        "perfmgr_sweep_time_s" => c.perfmgr_sweep_time_s = Some(ranged(v, 1, U32, " s")?),
        "perfmgr_max_outstanding_queries" => c.perfmgr_max_outstanding_queries = Some(ranged(v, 1, U32, "")? as usize),
        "perfmgr_ignore_cas" => c.perfmgr_ignore_cas = boolean(v)?,
        "perfmgr_log_errors" => c.perfmgr_log_errors = Some(boolean(v)?),
        "perfmgr_rm_nodes" => c.perfmgr_rm_nodes = Some(boolean(v)?),
        "perfmgr_redir" => c.perfmgr_redir = Some(boolean(v)?),
        "perfmgr_xmit_wait_log" => c.perfmgr_xmit_wait_log = boolean(v)?,
        "perfmgr_xmit_wait_threshold" => c.perfmgr_xmit_wait_threshold = Some(number(v, U32)?),
        // Congestion control (`crate::cc`), each value its field's width.
        "congestion_control" => c.congestion_control = boolean(v)?,
        "cc_key" => c.cc_key = Some(number(v, u64::MAX)?),
        "cc_max_outstanding_mads" => c.cc_max_outstanding_mads = Some(ranged(v, 1, U32, "")? as usize),
        "cc_sw_cong_setting_control_map" => c.cc_sw_cong_setting_control_map = Some(number(v, U32)? as u32),
        "cc_sw_cong_setting_victim_mask" => {
            super::cc_keys::parse_port_mask(v)?;
            c.cc_sw_cong_setting_victim_mask = Some(v.to_string());
        }
        "cc_sw_cong_setting_credit_mask" => {
            super::cc_keys::parse_port_mask(v)?;
            c.cc_sw_cong_setting_credit_mask = Some(v.to_string());
        }
        "cc_sw_cong_setting_threshold" => {
            c.cc_sw_cong_setting_threshold = Some(number(v, 15).map_err(|e| format!("{e} (4 bits)"))? as u8)
        }
        "cc_sw_cong_setting_packet_size" => c.cc_sw_cong_setting_packet_size = Some(number(v, 0xff)? as u8),
        "cc_sw_cong_setting_credit_starvation_threshold" => {
            c.cc_sw_cong_setting_credit_starvation_threshold = Some(number(v, 15).map_err(|e| format!("{e} (4 bits)"))? as u8)
        }
        "cc_sw_cong_setting_credit_starvation_return_delay" => {
            super::cc_keys::parse_shift_multiplier(v)?;
            c.cc_sw_cong_setting_credit_starvation_return_delay = Some(v.to_string());
        }
        "cc_sw_cong_setting_marking_rate" => c.cc_sw_cong_setting_marking_rate = Some(number(v, 0xffff)? as u16),
        "cc_ca_cong_setting_port_control" => c.cc_ca_cong_setting_port_control = Some(number(v, 0xffff)? as u16),
        "cc_ca_cong_setting_control_map" => c.cc_ca_cong_setting_control_map = Some(number(v, 0xffff)? as u16),
        "cc_ca_cong_setting_ccti_timer" => {
            let (sl, n) = super::cc_keys::parse_sl_value(v, 0xffff)?;
            super::cc_keys::set_sl(&mut c.cc_ca_cong_setting_ccti_timer, sl, n as u16);
        }
        "cc_ca_cong_setting_ccti_increase" => {
            let (sl, n) = super::cc_keys::parse_sl_value(v, 0xff)?;
            super::cc_keys::set_sl(&mut c.cc_ca_cong_setting_ccti_increase, sl, n as u8);
        }
        "cc_ca_cong_setting_trigger_threshold" => {
            let (sl, n) = super::cc_keys::parse_sl_value(v, 0xff)?;
            super::cc_keys::set_sl(&mut c.cc_ca_cong_setting_trigger_threshold, sl, n as u8);
        }
        "cc_ca_cong_setting_ccti_min" => {
            let (sl, n) = super::cc_keys::parse_sl_value(v, 0xff)?;
            super::cc_keys::set_sl(&mut c.cc_ca_cong_setting_ccti_min, sl, n as u8);
        }
        "cc_cct" => {
            super::cc_keys::parse_cct(v)?;
            c.cc_cct = text(v)?;
        }
        // SA registrations kept (`crate::sa::persist`).
        "sa_db_file" => c.sa_db_file = text(v)?.map(Into::into),
        "sa_db_dump" => c.sa_db_dump = boolean(v)?,
        "fsync_high_avail_files" => c.fsync_high_avail_files = Some(boolean(v)?),
        "drop_event_subscriptions" => c.drop_event_subscriptions = boolean(v)?,
        "mcgroup_join_validation" => c.mcgroup_join_validation = Some(boolean(v)?),
        "ipoib_mcgroup_creation_validation" => c.ipoib_mcgroup_creation_validation = Some(boolean(v)?),
        "log_file" => c.log_file = text(v)?.map(Into::into),
        "node_name_map_name" => c.node_name_map = text(v)?.map(Into::into),
        "log_prefix" => c.log_prefix = text(v)?,
        "dump_files_dir" => c.dump_files_dir = text(v)?.map(Into::into),
        "log_max_size" => c.log_max_size = Some(number(v, u64::MAX >> 20)?),
        "accum_log_file" => c.accum_log_file = Some(boolean(v)?),
        "log_flags" => c.log_flags = Some(number(v, 0xff)? as u8),
        // Link parameters (the link manager, `sweep::program::LinkConfig`),
        // each its PortInfo field's width.
        "max_op_vls" => c.max_op_vls = Some(ranged(v, 1, 5, " (OperationalVLs 1..5)")? as u8),
        "head_of_queue_lifetime" => c.head_of_queue_lifetime = Some(number(v, 0x1f)? as u8),
        "leaf_head_of_queue_lifetime" => c.leaf_head_of_queue_lifetime = Some(number(v, 0x1f)? as u8),
        "vl_stall_count" => c.vl_stall_count = Some(number(v, 7)? as u8),
        "leaf_vl_stall_count" => c.leaf_vl_stall_count = Some(number(v, 7)? as u8),
        "subnet_timeout" => c.subnet_timeout = Some(number(v, 0x1f)? as u8),
        "packet_life_time" => c.packet_life_time = Some(number(v, 0x3f)? as u8),
        "max_rate_enum" => c.max_rate_enum = Some(number(v, 0xff)? as u8),
        "use_original_extended_sa_rates_only" => c.use_original_extended_sa_rates_only = boolean(v)?,
        "force_link_speed" => c.force_link_speed = Some(number(v, 0xff)? as u8),
        "force_link_width" => c.force_link_width = Some(number(v, 0xff)? as u8),
        "force_link_speed_ext" => c.force_link_speed_ext = Some(number(v, 0xff)? as u8),
        "local_phy_errors_threshold" => c.local_phy_errors_threshold = Some(number(v, 0xf)? as u8),
        "overrun_errors_threshold" => c.overrun_errors_threshold = Some(number(v, 0xf)? as u8),
        // Partitions (`partition`).
        "partition_config_file" => c.partition_config_file = text(v)?.map(PathBuf::from),
        "part_enforce" => {
            c.part_enforce = Some(
                sm_partition::PartEnforce::parse(v).ok_or_else(|| format!("{v:?}: both, in, out or off"))?,
            )
        }
        "no_partition_enforcement" => c.no_partition_enforcement = boolean(v)?,
        "allow_both_pkeys" => c.allow_both_pkeys = boolean(v)?,
        // QoS (`crate::qos`): the values are checked in OpenSM's syntax here
        // so that an error names the line.
        "qos" => c.qos = boolean(v)?,
        "qos_policy_file" => c.qos_policy_file = text(v)?.map(Into::into),
        "qos_max_vls" => c.qos_max_vls = Some(number(v, 15)? as u8),
        "qos_high_limit" => c.qos_high_limit = high_limit(v)?,
        "qos_vlarb_high" => c.qos_vlarb_high = vlarb(v)?,
        "qos_vlarb_low" => c.qos_vlarb_low = vlarb(v)?,
        "qos_sl2vl" => c.qos_sl2vl = sl2vl(v)?,
        "qos_ca_max_vls" => c.qos_ca_max_vls = Some(number(v, 15)? as u8),
        "qos_ca_high_limit" => c.qos_ca_high_limit = high_limit(v)?,
        "qos_ca_vlarb_high" => c.qos_ca_vlarb_high = vlarb(v)?,
        "qos_ca_vlarb_low" => c.qos_ca_vlarb_low = vlarb(v)?,
        "qos_ca_sl2vl" => c.qos_ca_sl2vl = sl2vl(v)?,
        "qos_sw0_max_vls" => c.qos_sw0_max_vls = Some(number(v, 15)? as u8),
        "qos_sw0_high_limit" => c.qos_sw0_high_limit = high_limit(v)?,
        "qos_sw0_vlarb_high" => c.qos_sw0_vlarb_high = vlarb(v)?,
        "qos_sw0_vlarb_low" => c.qos_sw0_vlarb_low = vlarb(v)?,
        "qos_sw0_sl2vl" => c.qos_sw0_sl2vl = sl2vl(v)?,
        "qos_swe_max_vls" => c.qos_swe_max_vls = Some(number(v, 15)? as u8),
        "qos_swe_high_limit" => c.qos_swe_high_limit = high_limit(v)?,
        "qos_swe_vlarb_high" => c.qos_swe_vlarb_high = vlarb(v)?,
        "qos_swe_vlarb_low" => c.qos_swe_vlarb_low = vlarb(v)?,
        "qos_swe_sl2vl" => c.qos_swe_sl2vl = sl2vl(v)?,
        "qos_rtr_max_vls" => c.qos_rtr_max_vls = Some(number(v, 15)? as u8),
        "qos_rtr_high_limit" => c.qos_rtr_high_limit = high_limit(v)?,
        "qos_rtr_vlarb_high" => c.qos_rtr_vlarb_high = vlarb(v)?,
        "qos_rtr_vlarb_low" => c.qos_rtr_vlarb_low = vlarb(v)?,
        "qos_rtr_sl2vl" => c.qos_rtr_sl2vl = sl2vl(v)?,
        // Engine options: the same names and TOML types the engines read
        // from smcore.toml.
        "port_prof_ignore_file"
        | "lfts_file"
        | "root_guid_file"
        | "cn_guid_file"
        | "io_guid_file"
        | "guid_routing_order_file"
        | "hop_weights_file"
        | "port_search_ordering_file"
        | "ids_guid_file"
        | "lid_matrix_dump_file"
        | "torus_config" => match text(v)? {
            Some(s) => {
                c.options.insert(name.into(), toml::Value::String(s));
            }
            None => {
                c.options.remove(name);
            }
        },
        // OpenSM's older name of the same option.
        "dimn_ports_file" => match text(v)? {
            Some(s) => {
                c.options.insert("port_search_ordering_file".into(), toml::Value::String(s));
            }
            None => {
                c.options.remove("port_search_ordering_file");
            }
        },
        "scatter_ports" => {
            c.options.insert(name.into(), toml::Value::Integer(number(v, u32::MAX as u64)? as i64));
        }
        "connect_roots"
        | "do_mesh_analysis"
        | "nue_include_switches"
        | "port_shifting"
        | "port_profile_switch_nodes"
        | "guid_routing_order_no_scatter"
        | "quasi_ftree_indexing" => {
            c.options.insert(name.into(), toml::Value::Boolean(boolean(v)?));
        }
        "max_reverse_hops" => {
            c.options.insert(name.into(), toml::Value::Integer(number(v, u16::MAX as u64)? as i64));
        }
        "lash_start_vl" | "nue_max_num_vls" => {
            c.options.insert(name.into(), toml::Value::Integer(number(v, 15)? as i64));
        }
        // Every Core/Engine key of KEYS has an arm above; a test checks it.
        _ => return Err("smcore has no reader for this key".into()),
    }
    Ok(())
}

/// The warning the SM logs once at startup: the keys read but not used.
pub fn not_supported_warning(path: &Path, keys: &[String]) -> Option<String> {
    (!keys.is_empty()).then(|| {
        format!(
            "{}: {} OpenSM option(s) not supported by smcore, accepted and not used (see docs/opensm-conf-keys.md): {}",
            path.display(),
            keys.len(),
            keys.join(", ")
        )
    })
}

/// `docs/opensm-conf-keys.md`, made from [`KEYS`].
pub fn keys_markdown() -> String {
    let mut out = String::from(
        "# opensm.conf keys in smcore\n\n\
         <!-- Generated from sm-core/src/config/opensm.rs (KEYS); \
         `SMCORE_BLESS=1 cargo test -p sm-core --lib config::opensm` rewrites it. -->\n\n\
         `smcore --config /etc/opensm/opensm.conf` reads OpenSM's own file. A file named `*.toml` is TOML \
         (`smcore.toml`); for any other the format is chosen by content: a file whose first line that is neither blank nor a `#` comment has no `=` and looks like \
         `key value` (`^\\s*[a-z_0-9]+\\s+\\S`) is read as opensm.conf, anything else as TOML.\n\n\
         Values are written as OpenSM writes them: `TRUE`/`FALSE` (nothing else), numbers in decimal, `0x` hex \
         or `0` octal, `(null)` for unset, one pair of surrounding quotes dropped, `#` to the end of a line a \
         comment; a key given twice takes the later value. A value smcore cannot use (out of range, not a \
         number, `sweep_interval 0`) and a key OpenSM does not know are errors naming file and line. Keys marked \
         *superseded* are accepted and not read: smcore does at least as much by the means the table names. Keys marked \
         *not supported* are accepted and listed once at startup in one warning.\n\n\
         Where a key is absent smcore uses its own default, which is OpenSM's except for `max_wire_smps` \
         (smcore: a window ceiling of 64, OpenSM: 4); a file written by `opensm -c` states OpenSM's value, so that one is used.\n\n\
         | Key | smcore | Notes |\n|---|---|---|\n",
    );
    for k in KEYS {
        let (what, note) = match k.support {
            Core(field) => ("honoured".to_string(), format!("`Config::{field}`")),
            Engine(engines) => ("honoured".to_string(), format!("engine option, read by {engines}")),
            Superseded(by) => ("superseded".to_string(), by.to_string()),
            NotSupported(why) => ("not supported".to_string(), why.to_string()),
        };
        out.push_str(&format!("| `{}` | {what} | {note} |\n", k.name));
    }
    out
}

/// The keys smcore honours, as the table docs/moving-from-opensm.md
/// carries between its `opensm-keys` markers (a test keeps the two the
/// same; `SMCORE_BLESS=1` rewrites the document's copy).
pub fn supported_keys_markdown() -> String {
    let honoured = KEYS.iter().filter(|k| matches!(k.support, Core(_) | Engine(_))).count();
    let superseded = KEYS.iter().filter(|k| matches!(k.support, Superseded(_))).count();
    let mut out = format!(
        "{honoured} of the {} keys are honoured and {superseded} superseded by smcore's own means \
         (docs/opensm-conf-keys.md names them); the others are accepted and reported once at startup.\n\n\
         | Key | Read by |\n|---|---|\n",
        KEYS.len()
    );
    for k in KEYS {
        match k.support {
            Core(_) => out.push_str(&format!("| `{}` | the SM |\n", k.name)),
            Engine(engines) => out.push_str(&format!("| `{}` | engines: {engines} |\n", k.name)),
            Superseded(_) | NotSupported(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_is_told_by_the_first_line_that_says_something() {
        assert!(is_opensm_format("# c\n\nsm_key 0x1\n"));
        assert!(is_opensm_format("  lmc\t0\n"));
        assert!(!is_opensm_format("# c\nlmc = 0\n"));
        assert!(!is_opensm_format("[verify]\ncredit_loops = \"warn\"\n"));
        assert!(!is_opensm_format(""));
        assert!(!is_opensm_format("# only comments\n"));
        assert!(!is_opensm_format("lmc\n"));
        assert!(!is_opensm_format("Lmc 0\n"));
    }

    #[test]
    fn every_honoured_key_has_a_reader_and_names_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for k in KEYS {
            assert!(seen.insert(k.name), "{} twice", k.name);
            if matches!(k.support, Core(_) | Engine(_)) {
                // One of a number, a boolean or a path is every key's type;
                // the reader must take one of them.
                let errors: Vec<String> = ["1", "TRUE", "/x", "0:4", "both", "0:4,1:0", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7", "0 1"]
                    .iter()
                    .map_while(|sample| apply(&mut Config::default(), k.name, sample).err())
                    .collect();
                assert!(errors.len() < 8, "{}: {errors:?}", k.name);
            }
        }
    }

    #[test]
    fn values_in_opensm_spellings() {
        assert_eq!(number("0x12", 255), Ok(0x12));
        assert_eq!(number("010", 255), Ok(8));
        assert_eq!(number("0", 255), Ok(0));
        assert!(number("abc", 255).is_err());
        assert!(number("-1", 255).is_err());
        assert!(number("256", 255).is_err());
        assert_eq!(clean_value(" \"/etc/x y\" "), "/etc/x y");
        assert_eq!(text("(null)"), Ok(None));
        assert!(boolean("true").is_err());
        let c = parse("routing_engine 'updn,minhop'  # trailing\nlmc 0x2\nsm_key 0xffffffffffffffff\n", Path::new("o"))
            .unwrap();
        assert_eq!(c.routing_engine.as_deref(), Some("updn,minhop"));
        assert_eq!((c.lmc, c.sm_key), (2, Some(u64::MAX)));
        assert_eq!(parse("sm_sl 3\n", Path::new("o")).unwrap().sm_sl, Some(3));
        assert!(parse("sm_sl 16\n", Path::new("o")).is_err(), "an SL is 0..15");
        assert!(parse("no_clients_rereg TRUE\n", Path::new("o")).unwrap().no_clients_rereg);
        assert!(parse("reassign_lids TRUE\n", Path::new("o")).unwrap().reassign_lids);
        assert_eq!(parse("packet_life_time 0x14\n", Path::new("o")).unwrap().packet_life_time, Some(0x14));
        assert!(parse("packet_life_time 0x40\n", Path::new("o")).is_err(), "6 bits");
        let c = parse("root_guid_file /r\nroot_guid_file (null)\nmax_reverse_hops 3\n", Path::new("o")).unwrap();
        assert!(!c.options.contains_key("root_guid_file"), "the later (null) unsets it");
        assert_eq!(c.options["max_reverse_hops"].as_integer(), Some(3));
        // The unicast manager's options reach the engines under the names
        // they read; dimn_ports_file is OpenSM's other name for the search
        // ordering.
        let c = parse(
            "port_shifting TRUE\nscatter_ports 0x10\nguid_routing_order_no_scatter FALSE\ndimn_ports_file /d\n\
             hop_weights_file /w\nids_guid_file /i\n",
            Path::new("o"),
        )
        .unwrap();
        assert_eq!(c.options["port_shifting"].as_bool(), Some(true));
        assert_eq!(c.options["scatter_ports"].as_integer(), Some(16));
        assert_eq!(c.options["guid_routing_order_no_scatter"].as_bool(), Some(false));
        assert_eq!(c.options["port_search_ordering_file"].as_str(), Some("/d"));
        assert_eq!(c.options["hop_weights_file"].as_str(), Some("/w"));
        assert_eq!(c.options["ids_guid_file"].as_str(), Some("/i"));
        assert!(parse("port_shifting yes\n", Path::new("o")).is_err());
    }

    #[test]
    fn doc_is_in_sync_with_the_table() {
        let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/opensm-conf-keys.md");
        let want = keys_markdown();
        if std::env::var_os("SMCORE_BLESS").is_some() {
            std::fs::write(&doc, &want).unwrap();
        }
        let have = std::fs::read_to_string(&doc).unwrap_or_default();
        assert!(
            have == want,
            "{} is out of date: run `SMCORE_BLESS=1 cargo test -p sm-core --lib config::opensm`",
            doc.display()
        );
    }

    #[test]
    fn the_moving_from_opensm_document_lists_the_keys_the_table_honours() {
        const BEGIN: &str = "<!-- opensm-keys:begin (generated: SMCORE_BLESS=1 cargo test -p sm-core --lib config::opensm) -->\n";
        const END: &str = "<!-- opensm-keys:end -->";
        let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/moving-from-opensm.md");
        let text = std::fs::read_to_string(&readme).unwrap_or_default();
        let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
            panic!("{} has no opensm-keys markers", readme.display());
        };
        let want = supported_keys_markdown();
        if std::env::var_os("SMCORE_BLESS").is_some() && text[b + BEGIN.len()..e] != want {
            let fresh = format!("{}{want}{}", &text[..b + BEGIN.len()], &text[e..]);
            std::fs::write(&readme, fresh).unwrap();
            return;
        }
        assert!(
            text[b + BEGIN.len()..e] == want,
            "docs/moving-from-opensm.md's opensm.conf key table is out of date: run `SMCORE_BLESS=1 cargo test -p sm-core --lib config::opensm`"
        );
    }
}
