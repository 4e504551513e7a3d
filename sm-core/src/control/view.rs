//! What the console's read-only verbs show of the last heavy sweep:
//! `portstatus`, `lidbalance`, `route` and `dump_conf`.
//!
//! The SM loop builds a [`SweepView`] once per heavy sweep, outside any
//! lock, and swaps it into the shared [`super::Status`]; a console request
//! then only renders what is there. Every list is bounded, so an answer
//! costs the same on a fabric of ten nodes or ten thousand.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};
use sm_abi::{NodeKind, NO_ROUTE};
use sm_mad::port_info::{PhysState, PortState};
use sm_mad::speed::{self, LaneSpeed, SpeedBits, SpeedCaps};
use sm_mad::PortInfoRepr;

use crate::config::Config;
use sm_model::Fabric;
use crate::pipeline::OnceOutcome;

/// Ports listed per category of `portstatus` (the counts are complete).
pub const MAX_LISTED_PORTS: usize = 64;
/// Switches listed by `lidbalance` (the imbalanced count is complete).
pub const MAX_LISTED_SWITCHES: usize = 1024;

/// Configuration keys whose values are secrets.
const SECRET_KEYS: [&str; 3] = ["m_key", "sm_key", "sa_key"];

/// One port named in a `portstatus` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortRef {
    /// Node GUID.
    pub guid: String,
    /// NodeDescription.
    pub node: String,
    /// Port number.
    pub port: u8,
    /// Why it is listed (`Init`, `4x of 12x`, `QDR of EDR`, ...).
    pub detail: String,
}

/// A bounded list: the first [`MAX_LISTED_PORTS`] and how many there are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortList {
    /// How many ports are in the category.
    pub count: usize,
    /// The first of them.
    pub ports: Vec<PortRef>,
}

impl PortList {
    fn push(&mut self, port: PortRef) {
        self.count += 1;
        if self.ports.len() < MAX_LISTED_PORTS {
            self.ports.push(port);
        }
    }
}

/// OpenSM console's `portstatus`: ports by state, width and speed, and the
/// ports that deserve a look.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortStatus {
    /// Ports counted: external switch ports and CA/router ports that were
    /// read (switch port 0 is the switch itself, not a link).
    pub ports: usize,
    /// CA or router ports discovery never read (no cable, no answer).
    pub not_read: usize,
    /// By PortState (`Down`, `Init`, `Armed`, `Active`).
    pub states: BTreeMap<String, usize>,
    /// Ports with a link (Init, Armed, Active) by width (`4x`).
    pub widths: BTreeMap<String, usize>,
    /// Ports with a link by speed (`QDR`, `EDR`).
    pub speeds: BTreeMap<String, usize>,
    /// Ports with a link by width and speed as infiniband-diags name
    /// them, with the rate (`4X NDR (400 Gb/s)`).
    pub links: BTreeMap<String, usize>,
    /// Ports whose PortPhysicalState is Disabled.
    pub disabled: PortList,
    /// Ports with a link that is not Active (Init or Armed): the SM has
    /// not brought them up, or they fell back.
    pub not_active: PortList,
    /// Linked ports narrower than the widest width both ends enable and
    /// support.
    pub reduced_width: PortList,
    /// Linked ports slower than the fastest speed both ends enable and
    /// support.
    pub reduced_speed: PortList,
}

/// LIDs one switch's LFT sends out of its inter-switch ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwitchBalance {
    /// Node GUID.
    pub guid: String,
    /// NodeDescription.
    pub node: String,
    /// End-port LIDs the LFT forwards somewhere.
    pub lids: u64,
    /// Ports linked to another switch.
    pub switch_ports: usize,
    /// Fewest end-port LIDs out of one of those ports.
    pub min: u64,
    /// Most.
    pub max: u64,
    /// All of them together (mean = total / switch_ports).
    pub total: u64,
    /// Whether max and min differ by more than one LID and a tenth of
    /// the mean: some links carry more destinations than their siblings.
    pub imbalanced: bool,
}

impl SwitchBalance {
    fn mean(&self) -> f64 {
        if self.switch_ports == 0 {
            0.0
        } else {
            self.total as f64 / self.switch_ports as f64
        }
    }
}

/// OpenSM console's `lidbalance`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LidBalance {
    /// Switches with an LFT.
    pub switches: usize,
    /// Those flagged imbalanced.
    pub imbalanced: usize,
    /// The first [`MAX_LISTED_SWITCHES`] of them, in discovery order.
    pub listed: Vec<SwitchBalance>,
}

/// What the console shows of one heavy sweep.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepView {
    /// The routing figures (`smcore route`'s report).
    pub route: Value,
    /// `portstatus`.
    pub ports: PortStatus,
    /// `lidbalance`.
    pub balance: LidBalance,
    /// `dump_conf`: the configuration in force, secrets masked (empty
    /// in a view built by [`SweepView::of`]).
    pub conf: Vec<(String, Value)>,
}

impl SweepView {
    /// Everything the console needs from a heavy sweep's outcome (the
    /// configuration is published apart: [`config_lines`]).
    pub fn of(outcome: &OnceOutcome) -> Self {
        let r = &outcome.report;
        let route = json!({
            "engine": r.engine,
            "verdict": match &r.engine {
                Some(e) => format!("routed by {e}"),
                None => "NOT ROUTED (switches keep their tables)".to_string(),
            },
            "attempts": r.attempts.iter().map(|a| json!({"engine": a.engine, "outcome": a.outcome, "reason": a.reason})).collect::<Vec<_>>(),
            "switches": r.switches,
            "end_ports": r.end_ports,
            "max_lid": r.max_lid,
            "lmc": r.lmc,
            "pairs": r.pairs,
            "reachable_pairs": r.reachable_pairs,
            "looping_pairs": r.looping_pairs,
            "credit_loops": r.credit_loops,
            "vls_used": r.vls_used,
            "max_routes_per_link": r.max_routes_per_link,
            "mean_routes_per_link": r.mean_routes_per_link,
            "avg_hops": r.avg_hops,
        });
        SweepView {
            route,
            ports: port_status(&outcome.sweep.fabric),
            balance: outcome
                .accepted
                .as_ref()
                .map(|accepted| lid_balance(&accepted.snapshot, &accepted.routing.lfts))
                .unwrap_or_default(),
            conf: Vec::new(),
        }
    }

    /// `route`: the routing summary, one `key: value` per line.
    pub fn render_route(&self) -> String {
        let r = &self.route;
        let s = |k: &str| match &r[k] {
            Value::Null => "-".to_string(),
            Value::String(s) => s.clone(),
            Value::Number(n) if n.is_f64() => format!("{:.2}", n.as_f64().unwrap_or(0.0)),
            v => v.to_string(),
        };
        let credit = match r["credit_loops"].as_bool() {
            None => "not checked",
            Some(false) => "none",
            Some(true) => "PRESENT",
        };
        let mut out = format!("routing: {}\n", s("verdict"));
        for a in r["attempts"].as_array().into_iter().flatten() {
            let why = a["reason"].as_str().map(|w| format!(": {w}")).unwrap_or_default();
            out += &format!(
                "  engine {} {}{why}\n",
                a["engine"].as_str().unwrap_or("?"),
                a["outcome"].as_str().unwrap_or("?")
            );
        }
        out += &format!(
            "fabric: {} switches, {} end ports, max LID {}, LMC {}\n",
            s("switches"),
            s("end_ports"),
            s("max_lid"),
            s("lmc")
        );
        out +=
            &format!("reachable: {} of {} pairs ({} looping)\n", s("reachable_pairs"), s("pairs"), s("looping_pairs"));
        out += &format!("credit loops: {credit}\nVLs used: {}\n", s("vls_used"));
        out += &format!(
            "routes per link: max {} mean {}\navg hops: {}\n",
            s("max_routes_per_link"),
            s("mean_routes_per_link"),
            s("avg_hops")
        );
        out
    }

    /// `lidbalance`: the routing summary, then one line per switch.
    pub fn render_balance(&self) -> String {
        let b = &self.balance;
        let mut out = self.render_route();
        out += &format!("switches: {}, imbalanced: {}\n", b.switches, b.imbalanced);
        for s in &b.listed {
            out += &format!("switch {} \"{}\": {} LIDs", s.guid, s.node, s.lids);
            if s.switch_ports == 0 {
                out += ", no inter-switch ports\n";
                continue;
            }
            out += &format!(
                ", {} inter-switch ports: min {} max {} mean {:.1}{}\n",
                s.switch_ports,
                s.min,
                s.max,
                s.mean(),
                if s.imbalanced { "  IMBALANCED" } else { "" }
            );
        }
        if b.switches > b.listed.len() {
            out += &format!("... {} more switches\n", b.switches - b.listed.len());
        }
        out
    }

    /// `lidbalance --json`.
    pub fn balance_json(&self) -> Value {
        let switches: Vec<Value> = self
            .balance
            .listed
            .iter()
            .map(|s| {
                let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                v["mean"] = json!(s.mean());
                v
            })
            .collect();
        json!({
            "routing": self.route,
            "switches": self.balance.switches,
            "imbalanced": self.balance.imbalanced,
            "listed": switches,
        })
    }

    /// `portstatus`, as OpenSM's console lays it out.
    pub fn render_ports(&self) -> String {
        let p = &self.ports;
        let counts =
            |m: &BTreeMap<String, usize>| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
        let mut out = format!("ports: {} ({} CA ports not read)\n", p.ports, p.not_read);
        out += &format!("states: {}\n", counts(&p.states));
        out += &format!("widths: {}\n", counts(&p.widths));
        out += &format!("speeds: {}\n", counts(&p.speeds));
        out += &format!("links: {}\n", counts(&p.links));
        for (name, list) in [
            ("disabled", &p.disabled),
            ("not active", &p.not_active),
            ("reduced width", &p.reduced_width),
            ("reduced speed", &p.reduced_speed),
        ] {
            out += &format!("{name}: {}\n", list.count);
            for r in &list.ports {
                out += &format!("  {} \"{}\" port {}: {}\n", r.guid, r.node, r.port, r.detail);
            }
            if list.count > list.ports.len() {
                out += &format!("  ... {} more\n", list.count - list.ports.len());
            }
        }
        out
    }

    /// `dump_conf`: `key value` lines.
    pub fn render_conf(&self) -> String {
        self.conf.iter().map(|(k, v)| format!("{k} {}\n", conf_value(v))).collect()
    }

    /// `dump_conf --json`.
    pub fn conf_json(&self) -> Value {
        Value::Object(self.conf.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }
}

fn conf_value(v: &Value) -> String {
    match v {
        Value::Null => "(default)".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every key of `config` with its value, in the file's names, sorted;
/// tables flattened to `table.key`; secrets masked.
pub fn config_lines(config: &Config) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    match serde_json::to_value(config) {
        Ok(Value::Object(map)) => flatten("", map, &mut out),
        // Serialize of plain data does not fail; say so rather than hide it.
        Ok(_) | Err(_) => out.push(("error".to_string(), json!("the configuration cannot be shown"))),
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn flatten(prefix: &str, map: serde_json::Map<String, Value>, out: &mut Vec<(String, Value)>) {
    for (k, v) in map {
        let key = format!("{prefix}{k}");
        if SECRET_KEYS.contains(&k.as_str()) && !v.is_null() {
            out.push((key, json!("********")));
            continue;
        }
        match v {
            Value::Object(inner) if !inner.is_empty() => flatten(&format!("{key}."), inner, out),
            // 64-bit identifiers read better as OpenSM writes them.
            Value::Number(n) if k == "subnet_prefix" || k == "guid" => {
                out.push((key, json!(format!("{:#018x}", n.as_u64().unwrap_or(0)))));
            }
            v => out.push((key, v)),
        }
    }
}


/// The widest width and fastest speed a port may train to by itself:
/// enabled and supported.
fn port_best(info: &PortInfoRepr, caps: SpeedCaps) -> (u8, SpeedBits) {
    (speed::widest(info.link_width_enabled & info.link_width_supported), speed::usable(info, caps))
}

fn port_status(fabric: &Fabric) -> PortStatus {
    let mut st = PortStatus::default();
    for node in &fabric.nodes {
        let first = usize::from(node.is_switch());
        for (num, port) in node.ports.iter().enumerate().skip(first) {
            if !node.is_switch() && num == 0 {
                continue;
            }
            let Some(info) = &port.info else {
                if !node.is_switch() {
                    st.not_read += 1;
                }
                continue;
            };
            st.ports += 1;
            let r = |detail: String| PortRef {
                guid: format!("{:#018x}", node.guid),
                node: node.description.clone(),
                port: num as u8,
                detail,
            };
            *st.states.entry(format!("{:?}", info.port_state)).or_default() += 1;
            if info.port_physical_state == PhysState::Disabled {
                st.disabled.push(r("Disabled".into()));
            }
            match info.port_state {
                PortState::Active => {}
                PortState::Init | PortState::Armed => st.not_active.push(r(format!("{:?}", info.port_state))),
                // No link: no width or speed to speak of.
                _ => continue,
            }
            let width = speed::active_lanes(info);
            let active = speed::active(info, node.speed_caps(num as u8));
            let name = |s: Option<LaneSpeed>| s.map_or("?", LaneSpeed::name);
            *st.widths.entry(format!("{width}x")).or_default() += 1;
            *st.speeds.entry(name(active).to_string()).or_default() += 1;
            let rate = speed::gbps(speed::link_rate(width, active));
            *st.links.entry(format!("{} ({rate} Gb/s)", speed::link_name(width, active))).or_default() += 1;
            // What the link could run at: the best both ends allow.
            let (mut best_width, mut best_speeds) = port_best(info, node.speed_caps(num as u8));
            let peer = port.peer.and_then(|(n, p)| {
                let peer_node = fabric.nodes.get(n)?;
                Some((peer_node.ports.get(usize::from(p))?.info.as_ref()?, peer_node.speed_caps(p)))
            });
            if let Some((peer, peer_caps)) = peer {
                best_width = speed::widest(
                    info.link_width_enabled
                        & info.link_width_supported
                        & peer.link_width_enabled
                        & peer.link_width_supported,
                );
                best_speeds = best_speeds.common(port_best(peer, peer_caps).1);
            }
            if width < best_width {
                st.reduced_width.push(r(format!("{width}x of {best_width}x")));
            }
            let best = best_speeds.fastest();
            if active < best {
                st.reduced_speed.push(r(format!("{} of {}", name(active), name(best))));
            }
        }
    }
    st
}

fn lid_balance(snapshot: &sm_abi::FabricSnapshot, lfts: &[sm_abi::Lft]) -> LidBalance {
    let mut end_lids = Vec::new();
    for i in snapshot.end_ports() {
        let p = &snapshot.ports[i as usize];
        end_lids.extend((0..p.lid_count()).map(|k| usize::from(p.lid) + k as usize));
    }
    let mut out = LidBalance::default();
    for lft in lfts {
        let Some(node) = snapshot.nodes.get(lft.node as usize) else { continue };
        if node.kind != NodeKind::Switch {
            continue;
        }
        let mut per_port = vec![0u64; usize::from(node.num_ports) + 1];
        let mut lids = 0;
        for &lid in &end_lids {
            match lft.ports.get(lid) {
                Some(&p) if p != NO_ROUTE && usize::from(p) < per_port.len() => {
                    per_port[usize::from(p)] += 1;
                    lids += 1;
                }
                _ => {}
            }
        }
        let switch_ports: Vec<u64> = (1..=node.num_ports)
            .filter(|&p| {
                snapshot.port_of(lft.node, p).is_some_and(|port| {
                    port.is_linked()
                        && snapshot.ports.get(port.peer as usize).is_some_and(|peer| {
                            snapshot.nodes.get(peer.node as usize).is_some_and(|n| n.kind == NodeKind::Switch)
                        })
                })
            })
            .map(|p| per_port[usize::from(p)])
            .collect();
        let min = switch_ports.iter().copied().min().unwrap_or(0);
        let max = switch_ports.iter().copied().max().unwrap_or(0);
        let total: u64 = switch_ports.iter().sum();
        let mean_tenth = if switch_ports.is_empty() { 0 } else { total / switch_ports.len() as u64 / 10 };
        let imbalanced = max - min > 1.max(mean_tenth);
        out.switches += 1;
        out.imbalanced += usize::from(imbalanced);
        if out.listed.len() < MAX_LISTED_SWITCHES {
            out.listed.push(SwitchBalance {
                guid: format!("{:#018x}", node.guid),
                node: node.description.to_string(),
                lids,
                switch_ports: switch_ports.len(),
                min,
                max,
                total,
                imbalanced,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_mad::port_info::link_width;

    #[test]
    fn widths_and_speeds_rank_as_links_run() {
        // 2x has the highest bit of the mask but only two lanes.
        assert_eq!(speed::widest(link_width::W4X | link_width::W2X), 4);
        assert_eq!(speed::widest(link_width::W1X | link_width::W4X | link_width::W12X), 12);
        let bits = |base, ext| SpeedBits { base, ext, ext2: 0 }.fastest();
        assert_eq!(bits(0x7, 0), Some(LaneSpeed::Qdr));
        assert_eq!(bits(0x7, 0x2), Some(LaneSpeed::Edr));
        assert_eq!(bits(0x1, 0), Some(LaneSpeed::Sdr));
    }

    /// A switch with a 4x and a 1x host link and two empty ports, swept
    /// but not activated (LIDs only): every port is counted by its state,
    /// the 1x link is named at both ends.
    #[test]
    fn portstatus_counts_states_and_names_unactivated_and_narrow_links() {
        use crate::sim::{SimFabric, SimPort};
        use crate::sweep::{Guid2Lid, SweepOptions};
        let mut b = sm_topology::TopologyBuilder::new();
        let sw = b.add_switch("sw", 4).expect("switch");
        let h0 = b.add_ca("h0", 1).expect("ca");
        let h1 = b.add_ca("h1", 1).expect("ca");
        b.link((h0, 1), (sw, 1)).expect("link");
        b.set_rate(1, 4);
        b.link((h1, 1), (sw, 2)).expect("link");
        let topo = b.finish().expect("topology");
        let mut sim = SimFabric::from_topology(&topo, h0, 1).expect("sim");
        let mut port = SimPort::new(&mut sim);
        let swept = crate::sweep::sweep(&mut port, &SweepOptions::default(), &mut Guid2Lid::default()).expect("sweep");
        let st = port_status(&swept.fabric);
        assert_eq!(st.ports, 6, "{st:?}");
        assert_eq!(st.states.get("Down"), Some(&2), "{st:?}");
        assert_eq!(st.states.get("Init"), Some(&4), "{st:?}");
        assert_eq!(st.not_active.count, 4);
        assert_eq!(st.widths.get("4x"), Some(&2), "{st:?}");
        assert_eq!(st.widths.get("1x"), Some(&2), "{st:?}");
        let narrow: Vec<(&str, u8, &str)> =
            st.reduced_width.ports.iter().map(|p| (p.node.as_str(), p.port, p.detail.as_str())).collect();
        assert_eq!(narrow.len(), 2, "{narrow:?}");
        assert!(narrow.contains(&("sw", 2, "1x of 4x")) && narrow.contains(&("h1", 1, "1x of 4x")), "{narrow:?}");
        let text = SweepView { ports: st, ..Default::default() }.render_ports();
        assert!(text.contains("states: Down 2, Init 4\n") && text.contains("reduced width: 2\n"), "{text}");
    }

    /// Two switches joined by two cables, two hosts on each: an LFT that
    /// sends both remote hosts over one cable is flagged, one that spreads
    /// them is not.
    #[test]
    fn lidbalance_flags_a_switch_that_loads_one_of_parallel_links() {
        use crate::sim::{SimFabric, SimPort};
        use crate::sweep::{Guid2Lid, SweepOptions};
        let mut b = sm_topology::TopologyBuilder::new();
        let s0 = b.add_switch("s0", 4).expect("switch");
        let s1 = b.add_switch("s1", 4).expect("switch");
        let hosts: Vec<usize> = (0..4).map(|i| b.add_ca(format!("h{i}"), 1).expect("ca")).collect();
        b.link((s0, 3), (s1, 3)).expect("link");
        b.link((s0, 4), (s1, 4)).expect("link");
        for (i, &h) in hosts.iter().enumerate() {
            let (sw, port) = if i < 2 { (s0, i as u8 + 1) } else { (s1, i as u8 - 1) };
            b.link((h, 1), (sw, port)).expect("link");
        }
        let topo = b.finish().expect("topology");
        let mut sim = SimFabric::from_topology(&topo, hosts[0], 1).expect("sim");
        let mut port = SimPort::new(&mut sim);
        let swept = crate::sweep::sweep(&mut port, &SweepOptions::default(), &mut Guid2Lid::default()).expect("sweep");
        let snap = swept.fabric.snapshot(0);
        let switch =
            |desc: &str| snap.nodes.iter().position(|n| n.description.as_str() == desc).expect("switch") as u32;
        let host_lid = |desc: &str| {
            let n = snap.nodes.iter().position(|n| n.description.as_str() == desc).expect("host") as u32;
            usize::from(snap.port_of(n, 1).expect("port").lid)
        };
        let len = usize::from(snap.max_lid) + 1;
        // s0: h0, h1 local on 1, 2; h2 and h3 both over port 3.
        let mut lopsided = vec![NO_ROUTE; len];
        lopsided[host_lid("h0")] = 1;
        lopsided[host_lid("h1")] = 2;
        lopsided[host_lid("h2")] = 3;
        lopsided[host_lid("h3")] = 3;
        // s1: h2, h3 local on 1, 2; h0 over port 3, h1 over port 4.
        let mut spread = vec![NO_ROUTE; len];
        spread[host_lid("h2")] = 1;
        spread[host_lid("h3")] = 2;
        spread[host_lid("h0")] = 3;
        spread[host_lid("h1")] = 4;
        let lfts = vec![
            sm_abi::Lft { node: switch("s0"), ports: lopsided.into() },
            sm_abi::Lft { node: switch("s1"), ports: spread.into() },
        ];
        let balance = lid_balance(&snap, &lfts);
        assert_eq!((balance.switches, balance.imbalanced), (2, 1), "{balance:?}");
        let s0 = &balance.listed[0];
        assert_eq!(
            (s0.node.as_str(), s0.lids, s0.switch_ports, s0.min, s0.max, s0.imbalanced),
            ("s0", 4, 2, 0, 2, true)
        );
        let s1 = &balance.listed[1];
        assert_eq!((s1.node.as_str(), s1.lids, s1.min, s1.max, s1.imbalanced), ("s1", 4, 1, 1, false));
        let text = SweepView { balance, ..Default::default() }.render_balance();
        assert!(text.contains("\"s0\": 4 LIDs, 2 inter-switch ports: min 0 max 2 mean 1.0  IMBALANCED\n"), "{text}");
    }

    #[test]
    fn secrets_are_masked_and_tables_flattened() {
        let config = Config::parse(
            "m_key = \"0x1234\"\nsm_key = 99\nsa_key = 7\nlmc = 2\nsubnet_prefix = \"0xfe80000000000001\"\n[engines.minhop]\nfoo = 3\n",
            std::path::Path::new("t.toml"),
        )
        .expect("parse");
        let lines = config_lines(&config);
        let get = |k: &str| lines.iter().find(|(key, _)| key == k).map(|(_, v)| conf_value(v));
        assert_eq!(get("m_key").as_deref(), Some("********"));
        assert_eq!(get("sm_key").as_deref(), Some("********"));
        assert_eq!(get("sa_key").as_deref(), Some("********"));
        assert_eq!(get("lmc").as_deref(), Some("2"));
        assert_eq!(get("subnet_prefix").as_deref(), Some("0xfe80000000000001"));
        assert_eq!(get("engines.minhop.foo").as_deref(), Some("3"));
        assert_eq!(get("sweep_interval").as_deref(), Some("(default)"));
        let text = SweepView { conf: lines, ..Default::default() }.render_conf();
        assert!(!text.contains("4660") && !text.contains("0x1234") && !text.contains(" 99"), "{text}");
    }
}
