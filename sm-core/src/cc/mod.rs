//! The congestion control manager (OpenSM's osm_congestion_control.c; IBA
//! vol 1 annex A10): with `congestion_control` on, after every heavy sweep
//! that routed the fabric, every switch is sent a SwitchCongestionSetting
//! Set and every CA port a CACongestionSetting Set and the
//! CongestionControlTable blocks of `cc_cct`, as CongestionControl class
//! (0x21) GMPs on QP1 carrying `cc_key`, with at most
//! `cc_max_outstanding_mads` in flight.
//!
//! As OpenSM, a port is sent only what differs from what it answered
//! last, so a second sweep of an unchanged fabric sends nothing; the first
//! sweep after the SM starts sends everything, and a port new to the
//! fabric (or back in it) gets everything again. OpenSM reads no
//! CongestionInfo before its Sets, and neither does this manager. A port
//! that answers "unsupported class, method or attribute", or that leaves
//! more than [`TIMEOUT_LIMIT`] requests in a row unanswered, is taken to
//! have no congestion control and is not sent to again until the SM
//! restarts (OpenSM's `cc_unavailable_flag`). Errors are logged per node
//! and never stop the sweep.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use sm_mad::cc::{
    self, attr, CaEntry, CaSetting, CaSettingRepr, Cct, CctRepr, ShiftMultiplier, SwitchSetting, SwitchSettingRepr,
    CA_ENTRIES, CCT_BLOCK_ENTRIES, PORT_MASK_LEN,
};
use sm_mad::mad::{method, status, Header, MAD_LEN};
use sm_model::{Escaped, Fabric};
use sm_transport::gmp::GmpAgent;
use tracing::{debug, info, warn};

use crate::config::cc_keys::{parse_cct, parse_port_mask, parse_shift_multiplier};
use crate::config::Config;

/// OpenSM's `cc_max_outstanding_mads` default.
pub const DEFAULT_WINDOW: usize = 500;
pub use crate::config::cc_keys::CCT_MAX_ENTRIES;
/// Requests in a row a port may leave unanswered before it is taken to
/// have no congestion control (OpenSM's OSM_CC_TIMEOUT_COUNT_THRESHOLD).
pub const TIMEOUT_LIMIT: u32 = 3;

/// What the manager programs, from the `congestion_control` and `cc_*`
/// keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcSettings {
    /// CC_Key sent in every MAD.
    pub key: u64,
    /// Requests in flight at once.
    pub window: usize,
    /// Wait for each answer.
    pub timeout: Duration,
    /// Tries after the first of an unanswered request.
    pub retries: u32,
    /// SwitchCongestionSetting of every switch.
    pub switch: SwitchSettingRepr,
    /// CACongestionSetting of every CA port.
    pub ca: CaSettingRepr,
    /// CongestionControlTable blocks of every CA port (at least one: with
    /// no `cc_cct`, one block with CCTI_Limit 0, as OpenSM sends).
    pub table: Vec<CctRepr>,
}

impl CcSettings {
    /// What `config` asks for; `None` when `congestion_control` is off.
    /// A value out of its field's range is an error naming the key.
    pub fn from_config(config: &Config) -> Result<Option<Self>, String> {
        if !config.congestion_control {
            return Ok(None);
        }
        let mask = |key: &str, v: &Option<String>| -> Result<[u8; PORT_MASK_LEN], String> {
            v.as_deref().map_or(Ok([0; PORT_MASK_LEN]), |m| parse_port_mask(m).map_err(|e| format!("{key}: {e}")))
        };
        let nibble = |key: &str, v: Option<u8>| -> Result<u8, String> {
            match v.unwrap_or(0) {
                n @ 0..=15 => Ok(n),
                n => Err(format!("{key}: {n} out of range: at most 15 (4 bits)")),
            }
        };
        let return_delay = match &config.cc_sw_cong_setting_credit_starvation_return_delay {
            Some(v) => parse_shift_multiplier(v)
                .map_err(|e| format!("cc_sw_cong_setting_credit_starvation_return_delay: {e}"))?,
            None => ShiftMultiplier::default(),
        };
        let switch = SwitchSettingRepr {
            control_map: config.cc_sw_cong_setting_control_map.unwrap_or(0),
            victim_mask: mask("cc_sw_cong_setting_victim_mask", &config.cc_sw_cong_setting_victim_mask)?,
            credit_mask: mask("cc_sw_cong_setting_credit_mask", &config.cc_sw_cong_setting_credit_mask)?,
            threshold: nibble("cc_sw_cong_setting_threshold", config.cc_sw_cong_setting_threshold)?,
            packet_size: config.cc_sw_cong_setting_packet_size.unwrap_or(0),
            cs_threshold: nibble(
                "cc_sw_cong_setting_credit_starvation_threshold",
                config.cc_sw_cong_setting_credit_starvation_threshold,
            )?,
            cs_return_delay: return_delay,
            marking_rate: config.cc_sw_cong_setting_marking_rate.unwrap_or(0),
        };
        let lists = [
            ("cc_ca_cong_setting_ccti_timer", config.cc_ca_cong_setting_ccti_timer.len()),
            ("cc_ca_cong_setting_ccti_increase", config.cc_ca_cong_setting_ccti_increase.len()),
            ("cc_ca_cong_setting_trigger_threshold", config.cc_ca_cong_setting_trigger_threshold.len()),
            ("cc_ca_cong_setting_ccti_min", config.cc_ca_cong_setting_ccti_min.len()),
        ];
        if let Some((key, n)) = lists.iter().find(|(_, n)| *n > CA_ENTRIES) {
            return Err(format!("{key}: {n} values: one per SL, at most {CA_ENTRIES}"));
        }
        let at = |list: &[u8], sl: usize| list.get(sl).copied().unwrap_or(0);
        let entries: [CaEntry; CA_ENTRIES] = std::array::from_fn(|sl| CaEntry {
            ccti_timer: config.cc_ca_cong_setting_ccti_timer.get(sl).copied().unwrap_or(0),
            ccti_increase: at(&config.cc_ca_cong_setting_ccti_increase, sl),
            trigger_threshold: at(&config.cc_ca_cong_setting_trigger_threshold, sl),
            ccti_min: at(&config.cc_ca_cong_setting_ccti_min, sl),
        });
        let ca = CaSettingRepr {
            port_control: config.cc_ca_cong_setting_port_control.unwrap_or(0),
            control_map: config.cc_ca_cong_setting_control_map.unwrap_or(0),
            entries,
        };
        let cct = parse_cct(config.cc_cct.as_deref().unwrap_or("")).map_err(|e| format!("cc_cct: {e}"))?;
        Ok(Some(Self {
            key: config.cc_key.unwrap_or(0),
            window: config.cc_max_outstanding_mads.unwrap_or(DEFAULT_WINDOW).max(1),
            timeout: Duration::from_millis(config.transaction_timeout.unwrap_or(crate::config::DEFAULT_TRANSACTION_TIMEOUT_MS)),
            retries: config.transaction_retries.unwrap_or(crate::config::DEFAULT_TRANSACTION_RETRIES),
            switch,
            ca,
            table: table_blocks(&cct),
        }))
    }
}

/// The CongestionControlTable blocks of `entries`: CCTI_Limit the last
/// index in every block; with no entries one block with CCTI_Limit 0.
pub fn table_blocks(entries: &[ShiftMultiplier]) -> Vec<CctRepr> {
    let limit = entries.len().saturating_sub(1) as u16;
    let blocks = entries.len().div_ceil(CCT_BLOCK_ENTRIES).max(1);
    (0..blocks)
        .map(|b| {
            let mut block = CctRepr { ccti_limit: limit, ..CctRepr::default() };
            for (i, e) in entries.iter().skip(b * CCT_BLOCK_ENTRIES).take(CCT_BLOCK_ENTRIES).enumerate() {
                block.entries[i] = *e;
            }
            block
        })
        .collect()
}

/// One port the manager programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The LID it answers on (a switch's port 0 LID, a CA port's own).
    pub lid: u16,
    /// Node GUID.
    pub node_guid: u64,
    /// The port (0 for a switch).
    pub port: u8,
    /// NodeDescription, for the log.
    pub node_desc: String,
    /// Whether it is a switch.
    pub switch: bool,
}

/// Every switch (port 0) and every CA port with a LID of `fabric`:
/// OpenSM's walk of its port table. Routers are left alone, as OpenSM
/// leaves them.
pub fn targets(fabric: &Fabric) -> Vec<Target> {
    let mut out = Vec::new();
    for node in &fabric.nodes {
        let ports: Vec<u8> = match node.kind {
            sm_abi::NodeKind::Switch => vec![0],
            sm_abi::NodeKind::Ca => (1..=node.num_ports).collect(),
            _ => continue,
        };
        for p in ports {
            let lid = node.ports.get(usize::from(p)).and_then(|x| x.info.as_ref()).map_or(0, |i| i.lid);
            if lid == 0 || lid >= 0xC000 {
                continue;
            }
            out.push(Target {
                lid,
                node_guid: node.guid,
                port: p,
                node_desc: node.description.clone(),
                switch: node.is_switch(),
            });
        }
    }
    out
}

/// Which attribute one request sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Item {
    /// SwitchCongestionSetting.
    Switch,
    /// CACongestionSetting.
    Ca,
    /// CongestionControlTable block n.
    Table(u32),
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Item::Switch => f.write_str("SwitchCongestionSetting"),
            Item::Ca => f.write_str("CACongestionSetting"),
            Item::Table(b) => write!(f, "CongestionControlTable block {b}"),
        }
    }
}

/// One request that did not take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The port.
    pub target: Target,
    /// What was being set.
    pub item: Item,
    /// Why: the status answered, or no answer.
    pub reason: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.target;
        write!(
            f,
            "{} Set on {:#018x} \"{}\" port {} (LID {}): {}",
            self.item,
            t.node_guid,
            Escaped(&t.node_desc),
            t.port,
            t.lid,
            self.reason
        )
    }
}

/// What one pass over the fabric did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CcReport {
    /// Sets sent (retries included).
    pub sent: u64,
    /// Sets the ports acknowledged.
    pub acknowledged: u64,
    /// Ports that hold what they should and were sent nothing.
    pub unchanged: u64,
    /// Ports skipped: no congestion control (unsupported, or silent).
    pub unavailable: u64,
    /// The requests that did not take, one per (port, attribute).
    pub failures: Vec<Failure>,
}

/// What a port answered last, attribute by attribute.
#[derive(Debug, Clone, Default)]
struct Held {
    switch: Option<SwitchSettingRepr>,
    ca: Option<CaSettingRepr>,
    table: BTreeMap<u32, CctRepr>,
}

/// The manager's memory between sweeps.
#[derive(Debug)]
pub struct CcManager {
    settings: CcSettings,
    /// By (node GUID, port): what the port answered to its last Sets.
    held: HashMap<(u64, u8), Held>,
    /// Unanswered requests in a row, by port.
    timeouts: HashMap<(u64, u8), u32>,
    /// Ports with no congestion control.
    unavailable: HashSet<(u64, u8)>,
    next_tid: u64,
}

/// One request in flight or to send.
struct Request {
    target: usize,
    item: Item,
    mad: [u8; MAD_LEN],
}

impl CcManager {
    /// A manager that has programmed nothing yet: its first pass sends
    /// every port everything.
    pub fn new(settings: CcSettings) -> Self {
        use std::hash::{BuildHasher, Hasher};
        // A random start: a host on the fabric cannot count on the TIDs.
        let tid = std::collections::hash_map::RandomState::new().build_hasher().finish() & 0xFFFF_FFFF;
        Self { settings, held: HashMap::new(), timeouts: HashMap::new(), unavailable: HashSet::new(), next_tid: tid.max(1) }
    }

    /// The settings it programs.
    pub fn settings(&self) -> &CcSettings {
        &self.settings
    }

    /// Forgets what every port answered: the next pass sends everything
    /// (OpenSM's subnet-wide need_update, e.g. after a failover).
    pub fn forget(&mut self) {
        self.held.clear();
    }

    fn tid(&mut self) -> u64 {
        self.next_tid = (self.next_tid + 1) & 0xFFFF_FFFF;
        if self.next_tid == 0 {
            self.next_tid = 1;
        }
        self.next_tid
    }

    /// Sends every switch and CA port of `fabric` what it does not hold
    /// yet, through `agent` (a GSI agent of class 0x21 on the SM's port);
    /// logs each failure and returns what happened. Ports no longer in
    /// the fabric are forgotten, so that one coming back is sent
    /// everything.
    pub fn program(&mut self, fabric: &Fabric, agent: &mut dyn GmpAgent) -> CcReport {
        let targets = targets(fabric);
        let present: HashSet<(u64, u8)> = targets.iter().map(|t| (t.node_guid, t.port)).collect();
        self.held.retain(|k, _| present.contains(k));
        self.timeouts.retain(|k, _| present.contains(k));
        let mut report = CcReport::default();
        let mut requests = Vec::new();
        for (i, t) in targets.iter().enumerate() {
            let key = (t.node_guid, t.port);
            if self.unavailable.contains(&key) {
                report.unavailable += 1;
                continue;
            }
            let held = self.held.get(&key).cloned().unwrap_or_default();
            let before = requests.len();
            if t.switch {
                if held.switch.as_ref() != Some(&self.settings.switch) {
                    let mut data = [0u8; cc::SWITCH_SETTING_LEN];
                    self.settings.switch.emit(&mut SwitchSetting::new_unchecked(&mut data[..]));
                    requests.push(self.request(i, Item::Switch, attr::SWITCH_CONGESTION_SETTING, 0, &data));
                }
            } else {
                if held.ca.as_ref() != Some(&self.settings.ca) {
                    let mut data = [0u8; cc::CA_SETTING_LEN];
                    self.settings.ca.emit(&mut CaSetting::new_unchecked(&mut data[..]));
                    requests.push(self.request(i, Item::Ca, attr::CA_CONGESTION_SETTING, 0, &data));
                }
                for (b, block) in self.settings.table.clone().iter().enumerate() {
                    let b = b as u32;
                    if held.table.get(&b) != Some(block) {
                        let mut data = [0u8; cc::CCT_LEN];
                        block.emit(&mut Cct::new_unchecked(&mut data[..]));
                        requests.push(self.request(i, Item::Table(b), attr::CONGESTION_CONTROL_TABLE, b, &data));
                    }
                }
            }
            if requests.len() == before {
                report.unchanged += 1;
            }
        }
        let mut tries = 0;
        while !requests.is_empty() {
            let lost = self.exchange(agent, &targets, requests, &mut report);
            tries += 1;
            if tries > self.settings.retries {
                for r in lost {
                    let t = &targets[r.target];
                    let key = (t.node_guid, t.port);
                    let count = self.timeouts.entry(key).or_insert(0);
                    *count += 1;
                    let failure = Failure {
                        target: t.clone(),
                        item: r.item,
                        reason: "no answer (a wrong CC_Key is discarded silently; or no congestion control agent)".into(),
                    };
                    // As OpenSM: a port that timed out before is not logged again.
                    if *count == 1 {
                        warn!("congestion control: {failure}");
                    } else {
                        debug!("congestion control: {failure}");
                    }
                    if *count > TIMEOUT_LIMIT && self.unavailable.insert(key) {
                        warn!(
                            "congestion control: {:#018x} \"{}\" port {} left {count} requests unanswered: taken to have no congestion control",
                            t.node_guid,
                            Escaped(&t.node_desc),
                            t.port
                        );
                    }
                    report.failures.push(failure);
                }
                break;
            }
            requests = lost
                .into_iter()
                .map(|r| {
                    let mut mad = r.mad;
                    Header::new_unchecked(&mut mad[..]).set_transaction_id(self.tid());
                    Request { mad, ..r }
                })
                .collect();
        }
        info!(
            sent = report.sent,
            acknowledged = report.acknowledged,
            unchanged = report.unchanged,
            failed = report.failures.len(),
            unavailable = report.unavailable,
            "congestion control programmed"
        );
        report
    }

    fn request(&mut self, target: usize, item: Item, attribute: u16, modifier: u32, data: &[u8]) -> Request {
        let tid = self.tid();
        let mad = cc::Repr::request(method::SET, attribute, modifier, tid, self.settings.key).to_mad(data);
        Request { target, item, mad }
    }

    /// Sends `requests` with at most the window in flight; takes in the
    /// answers; returns the requests left unanswered.
    fn exchange(&mut self, agent: &mut dyn GmpAgent, targets: &[Target], requests: Vec<Request>, report: &mut CcReport) -> Vec<Request> {
        let timeout = self.settings.timeout;
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX).max(1);
        let mut pending = requests.into_iter();
        // By TID (lower 32 bits: the kernel owns the upper half).
        let mut in_flight: HashMap<u32, (Request, Instant)> = HashMap::new();
        let mut lost = Vec::new();
        loop {
            while in_flight.len() < self.settings.window {
                let Some(r) = pending.next() else { break };
                report.sent += 1;
                let lid = targets[r.target].lid;
                if let Err(e) = agent.send(lid, 1, &r.mad, ms) {
                    debug!(lid, "congestion control: send failed: {e}");
                    lost.push(r);
                    continue;
                }
                let tid = Header::new_unchecked(&r.mad[..]).transaction_id() as u32;
                in_flight.insert(tid, (r, Instant::now() + timeout));
            }
            if in_flight.is_empty() {
                return lost;
            }
            let Some(deadline) = in_flight.values().map(|(_, d)| *d).min() else { return lost };
            match agent.receive(deadline) {
                Ok(Some((slid, mad))) => {
                    let Ok(p) = cc::Packet::new_checked(&mad[..]) else { continue };
                    if p.mgmt_class() != cc::MGMT_CLASS || p.method() & method::RESPONSE == 0 {
                        continue;
                    }
                    let tid = p.transaction_id() as u32;
                    // The answer must come from the LID asked.
                    if in_flight.get(&tid).is_none_or(|(r, _)| targets[r.target].lid != slid) {
                        continue;
                    }
                    if let Some((r, _)) = in_flight.remove(&tid) {
                        self.answered(&targets[r.target], r.item, p.status(), p.data(), report);
                    }
                }
                Ok(None) | Err(_) => {
                    let now = Instant::now();
                    let expired: Vec<u32> = in_flight.iter().filter(|(_, (_, d))| *d <= now).map(|(t, _)| *t).collect();
                    for tid in expired {
                        if let Some((r, _)) = in_flight.remove(&tid) {
                            lost.push(r);
                        }
                    }
                }
            }
        }
    }

    /// Takes in one answer.
    fn answered(&mut self, t: &Target, item: Item, mad_status: u16, data: &[u8], report: &mut CcReport) {
        let key = (t.node_guid, t.port);
        self.timeouts.remove(&key);
        if mad_status & 0x7FFF != 0 {
            let field = mad_status & status::INVALID_FIELD_MASK;
            // OpenSM's test: an unsupported class version, method or
            // method/attribute means no congestion control here.
            let unsupported =
                matches!(field, status::BAD_VERSION | status::UNSUPPORTED_METHOD | status::UNSUPPORTED_METHOD_ATTR);
            let failure = Failure { target: t.clone(), item, reason: format!("status {mad_status:#06x}") };
            warn!("congestion control: {failure}{}", if unsupported { ": no congestion control there" } else { "" });
            if unsupported {
                self.unavailable.insert(key);
            }
            report.failures.push(failure);
            return;
        }
        let held = self.held.entry(key).or_default();
        let data = &data[..data.len().min(cc::DATA_LEN)];
        let taken = match item {
            Item::Switch => SwitchSetting::new_checked(data)
                .and_then(|p| SwitchSettingRepr::parse(&p))
                .map(|s| held.switch = Some(s)),
            Item::Ca => CaSetting::new_checked(data).and_then(|p| CaSettingRepr::parse(&p)).map(|s| held.ca = Some(s)),
            Item::Table(b) => Cct::new_checked(data).and_then(|p| CctRepr::parse(&p)).map(|s| {
                held.table.insert(b, s);
            }),
        };
        match taken {
            Ok(()) => report.acknowledged += 1,
            Err(e) => {
                let failure = Failure { target: t.clone(), item, reason: format!("unreadable answer: {e}") };
                warn!("congestion control: {failure}");
                report.failures.push(failure);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cct_lists_and_their_blocks() {
        let cct = parse_cct("0:0, 1:2,3:16383").expect("cct");
        assert_eq!(cct[2], ShiftMultiplier { shift: 3, multiplier: 16383 });
        assert!(parse_cct("4:1").expect_err("shift").contains("2 bits"));
        assert!(parse_cct("0:1,2").expect_err("no colon").contains("entry 1"));
        assert!(parse_cct(&vec!["0:1"; 129].join(",")).is_err());
        assert!(parse_cct("(null)").expect("none").is_empty());
        let blocks = table_blocks(&parse_cct(&vec!["1:5"; 70].join(",")).expect("cct"));
        assert_eq!(blocks.len(), 2);
        assert_eq!((blocks[0].ccti_limit, blocks[1].ccti_limit), (69, 69));
        assert_eq!(blocks[1].entries[5], ShiftMultiplier { shift: 1, multiplier: 5 });
        assert_eq!(blocks[1].entries[6], ShiftMultiplier::default());
        let none = table_blocks(&[]);
        assert_eq!((none.len(), none[0].ccti_limit), (1, 0));
    }

    #[test]
    fn settings_follow_the_keys_and_off_means_none() {
        assert_eq!(CcSettings::from_config(&Config::default()), Ok(None));
        let mut c = Config { congestion_control: true, ..Config::default() };
        c.cc_sw_cong_setting_threshold = Some(16);
        assert!(CcSettings::from_config(&c).expect_err("4 bits").contains("cc_sw_cong_setting_threshold"));
        c.cc_sw_cong_setting_threshold = Some(0xf);
        c.cc_ca_cong_setting_ccti_timer = vec![0, 0, 7];
        c.cc_sw_cong_setting_credit_starvation_return_delay = Some("2:9".into());
        let s = CcSettings::from_config(&c).expect("valid").expect("on");
        assert_eq!(s.switch.threshold, 0xf);
        assert_eq!(s.switch.cs_return_delay, ShiftMultiplier { shift: 2, multiplier: 9 });
        assert_eq!(s.ca.entries[2].ccti_timer, 7);
        assert_eq!((s.window, s.key, s.table.len()), (DEFAULT_WINDOW, 0, 1));
    }
}
