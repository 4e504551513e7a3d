//! The configuration as the settings each part of the SM takes: the link
//! parameters programming writes, the partition and QoS settings, the
//! verifier's gate. The configuration knows every part's settings type;
//! no part knows the configuration (design: config on top, typed settings
//! handed down).

use std::path::PathBuf;
use std::sync::Arc;

use tracing::warn;

use super::Config;
use crate::engines::chain::GateOptions;
use sm_partition::{PartEnforce, PartitionConfig, PartitionError, PartitionSettings, DEFAULT_PARTITION_CONFIG_FILE};
use crate::qos::{QosError, QosKeySets, QosKeys, QosPolicy, QosSettings};
use crate::sweep::program::LinkConfig;
use sm_mad::port_info::link_speed_ext;

impl Config {
    /// The link parameters over OpenSM's defaults. Out-of-range values are
    /// brought into the field's range (HOQLife and VLStallCount are 5 and
    /// 3 bits wide, OperationalVLs 1..=5); a `force_link_speed_ext` that
    /// is none of 0-15, 30 and 31 is 31, as OpenSM takes it.
    pub fn link_config(&self) -> LinkConfig {
        let d = LinkConfig::default();
        LinkConfig {
            max_op_vls: self.max_op_vls.unwrap_or(d.max_op_vls).clamp(1, 5),
            hoq_life: self.head_of_queue_lifetime.unwrap_or(d.hoq_life).min(0x1f),
            leaf_hoq_life: self.leaf_head_of_queue_lifetime.unwrap_or(d.leaf_hoq_life).min(0x1f),
            vl_stall_count: self.vl_stall_count.unwrap_or(d.vl_stall_count).min(7),
            leaf_vl_stall_count: self.leaf_vl_stall_count.unwrap_or(d.leaf_vl_stall_count).min(7),
            subnet_timeout: self.subnet_timeout.unwrap_or(d.subnet_timeout).min(0x1f),
            force_link_speed: self.force_link_speed.unwrap_or(d.force_link_speed) & 0xf,
            force_link_width: self.force_link_width.unwrap_or(d.force_link_width),
            force_link_speed_ext: match self.force_link_speed_ext.unwrap_or(d.force_link_speed_ext) {
                v @ (0..=0xF | link_speed_ext::DISABLE | link_speed_ext::SET_TO_SUPPORTED) => v,
                _ => link_speed_ext::SET_TO_SUPPORTED,
            },
            local_phy_errors: self.local_phy_errors_threshold.unwrap_or(d.local_phy_errors).min(0xf),
            overrun_errors: self.overrun_errors_threshold.unwrap_or(d.overrun_errors).min(0xf),
        }
    }

    /// The partition settings (`no_partition_enforcement` wins over
    /// `part_enforce`, as in OpenSM).
    pub fn partition_settings(&self) -> PartitionSettings {
        let enforce =
            if self.no_partition_enforcement { PartEnforce::Off } else { self.part_enforce.unwrap_or_default() };
        PartitionSettings {
            file: self.partition_config_file.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_PARTITION_CONFIG_FILE)),
            // The default path named (as `opensm -c` writes it) is still
            // the default: missing, it means the default partition only.
            explicit: self
                .partition_config_file
                .as_ref()
                .is_some_and(|p| p.as_path() != std::path::Path::new(DEFAULT_PARTITION_CONFIG_FILE)),
            enforce,
            allow_both: self.allow_both_pkeys,
            keep_indexes: self.keep_pkey_indexes.unwrap_or(true),
        }
    }

    /// Startup check of the partition file (an explicitly given file that
    /// is missing or wrong stops the SM before it starts).
    pub fn check_partitions(&self) -> Result<PartitionConfig, PartitionError> {
        self.partition_settings().load()
    }

    /// The QoS settings; an error names the key whose value is malformed.
    /// Values are checked whether or not `qos` is on, so a file that will
    /// fail once QoS is turned on fails at once.
    pub fn qos_settings(&self) -> Result<QosSettings, QosError> {
        macro_rules! keys {
            ($prefix:literal, $m:ident, $h:ident, $vh:ident, $vl:ident, $s:ident) => {
                QosKeys {
                    prefix: $prefix,
                    max_vls: self.$m,
                    high_limit: self.$h,
                    vlarb_high: self.$vh.as_deref(),
                    vlarb_low: self.$vl.as_deref(),
                    sl2vl: self.$s.as_deref(),
                }
            };
        }
        QosSettings::build(&QosKeySets {
            enabled: self.qos,
            policy_file: self.qos_policy_file.as_deref(),
            shared: keys!("qos", qos_max_vls, qos_high_limit, qos_vlarb_high, qos_vlarb_low, qos_sl2vl),
            ca: keys!("qos_ca", qos_ca_max_vls, qos_ca_high_limit, qos_ca_vlarb_high, qos_ca_vlarb_low, qos_ca_sl2vl),
            sw0: keys!("qos_sw0", qos_sw0_max_vls, qos_sw0_high_limit, qos_sw0_vlarb_high, qos_sw0_vlarb_low, qos_sw0_sl2vl),
            swe: keys!("qos_swe", qos_swe_max_vls, qos_swe_high_limit, qos_swe_vlarb_high, qos_swe_vlarb_low, qos_swe_sl2vl),
            rtr: keys!("qos_rtr", qos_rtr_max_vls, qos_rtr_high_limit, qos_rtr_vlarb_high, qos_rtr_vlarb_low, qos_rtr_sl2vl),
        })
    }

    /// The QoS settings when `qos` is on and they are good; a malformed
    /// value is logged (the daemon refused such a file at startup) and no
    /// QoS table is programmed.
    pub fn qos_tables_settings(&self) -> Option<QosSettings> {
        if !self.qos {
            return None;
        }
        self.qos_settings().map_err(|e| warn!("QoS tables not programmed: {e}")).ok()
    }

    /// [`crate::qos::load_policy`] with these settings: the policy
    /// PathRecords follow from now on. A malformed `qos_*` value is logged
    /// and `current` stays ([`Self::check_qos`] refuses it at startup).
    pub fn reload_qos_policy(&self, current: Option<Arc<QosPolicy>>) -> Option<Arc<QosPolicy>> {
        match self.qos_settings() {
            Ok(s) => crate::qos::load_policy(&s, current),
            Err(e) => {
                warn!("QoS settings not used: {e}");
                current
            }
        }
    }

    /// Startup check: the `qos_*` values and, with `qos` on, the policy
    /// file (a missing file is no policy, as in OpenSM).
    pub fn check_qos(&self) -> Result<(), String> {
        let settings = self.qos_settings().map_err(|e| e.to_string())?;
        if settings.enabled {
            crate::qos::load_policy_file(&settings.policy_file).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// What routing takes: the gate, each engine's options, the LMC.
    pub fn route_settings(&self) -> crate::offline::RouteSettings<'_> {
        crate::offline::RouteSettings {
            gate: self.gate_options(),
            lmc: self.lmc,
            engine_text: Box::new(move |name| self.engine_text(name)),
            isolation: crate::engines::host::Isolation {
                mode: self.engine_isolation.unwrap_or_default(),
                timeout: self.engine_timeout.filter(|t| t.is_finite() && *t > 0.0).map(std::time::Duration::from_secs_f64),
                memory_mib: self.engine_memory_limit.filter(|&m| m > 0),
            },
            // `smcore route` checks the map before it routes.
            node_names: self.node_names().unwrap_or_default(),
        }
    }

    /// The verifier and gate settings.
    pub fn gate_options(&self) -> GateOptions {
        GateOptions {
            verify: smcore_kit::VerifyOptions {
                credit_loops: self.verify.check_credit_loops,
                switch_destinations: self.verify.switch_destinations,
                ..Default::default()
            },
            credit_loops: self.verify.credit_loops,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn force_link_speed_ext_outside_opensms_values_is_set_to_supported() {
        let ext = |v: u8| super::Config { force_link_speed_ext: Some(v), ..Default::default() }.link_config().force_link_speed_ext;
        assert_eq!((ext(0), ext(2), ext(15), ext(30), ext(31)), (0, 2, 15, 30, 31));
        assert_eq!((ext(16), ext(29), ext(32), ext(255)), (31, 31, 31, 31));
    }

    use std::path::Path;

    use super::*;
    use crate::qos::{DEFAULT_MAX_VLS, DEFAULT_POLICY_FILE};

    #[test]
    fn link_parameters_are_brought_into_their_fields() {
        assert_eq!(Config::default().link_config(), LinkConfig::default());
        let wild = Config {
            max_op_vls: Some(9),
            head_of_queue_lifetime: Some(0x40),
            vl_stall_count: Some(9),
            ..Config::default()
        };
        let c = wild.link_config();
        assert_eq!((c.max_op_vls, c.hoq_life, c.vl_stall_count), (5, 0x1f, 7));
    }

    #[test]
    fn qos_defaults_are_opensm_s() {
        let s = Config::default().qos_settings().unwrap();
        assert!(!s.enabled);
        assert_eq!(s.policy_file, PathBuf::from(DEFAULT_POLICY_FILE));
        assert_eq!(s.ca.sl2vl, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7]);
    }

    #[test]
    fn toml_qos_keys_are_opensm_names() {
        let c = Config::parse(
            "qos = true\nqos_policy_file = \"/q\"\nqos_swe_sl2vl = \"0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1\"\nqos_high_limit = 4\n",
            Path::new("smcore.toml"),
        )
        .unwrap();
        assert!(c.options.keys().all(|k| !k.starts_with("qos")), "not engine options: {:?}", c.options);
        let s = c.qos_settings().unwrap();
        assert!(s.enabled);
        assert_eq!(s.policy_file, PathBuf::from("/q"));
        assert_eq!((s.swe.sl2vl[8], s.ca.sl2vl[8], s.rtr.high_limit), (1, 8, 4));
    }

    #[test]
    fn qos_class_keys_override_shared_ones() {
        let c = Config {
            qos: true,
            qos_sl2vl: Some("0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3".into()),
            qos_ca_sl2vl: Some("0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,15".into()),
            qos_high_limit: Some(10),
            qos_swe_high_limit: Some(255),
            qos_vlarb_low: Some("0:32,1:0x20,2:010".into()),
            qos_max_vls: Some(0),
            qos_rtr_max_vls: Some(4),
            ..Config::default()
        };
        let s = c.qos_settings().unwrap();
        assert_eq!(s.ca.sl2vl[15], 15);
        assert_eq!(s.swe.sl2vl[4], 0);
        assert_eq!((s.ca.high_limit, s.swe.high_limit), (10, 255));
        assert_eq!(&s.sw0.vlarb_low[..4], &[(0, 32), (1, 32), (2, 8), (0, 0)]);
        assert_eq!((s.ca.max_vls, s.rtr.max_vls), (DEFAULT_MAX_VLS, 4), "0 is unset");
    }

    #[test]
    fn malformed_qos_values_name_their_key() {
        let bad = |c: Config| c.qos_settings().unwrap_err().to_string();
        let e = bad(Config { qos_swe_sl2vl: Some("0,1,2".into()), ..Config::default() });
        assert!(e.starts_with("qos_swe_sl2vl: 3 VLs"), "{e}");
        let e = bad(Config { qos_vlarb_high: Some("0:4,15:1".into()), ..Config::default() });
        assert!(e.starts_with("qos_vlarb_high: entry 2: VL `15`"), "{e}");
        let e = bad(Config { qos_ca_vlarb_low: Some("0:256".into()), ..Config::default() });
        assert!(e.contains("weight `256`"), "{e}");
    }
}
