//! # torus-2QoS — smcore's routing engine for 2D/3D tori and meshes
//!
//! OpenSM's torus-2QoS, rebuilt: credit-loop-free dimension-order routing
//! on a torus with two QoS levels, that routes around failed links and a
//! failed switch without changing any path SL.
//!
//! 1. **Configuration** ([`config`]): `torus-2QoS.conf` (file named by the
//!    `torus_config` option, `--torus-config` on the command line) gives the
//!    radix of each dimension (mesh or torus per dimension), one or more
//!    seeds (a switch and its neighbours in named directions), dateline
//!    offsets, port group limits and the end-port order.
//! 2. **Discovery** ([`discover`]): from the seed, switches are placed into
//!    coordinates by completing 4-loops (faces of the cube between
//!    `(x,y,z)` and `(x+1,y+1,z+1)`) and extending lines; what cannot be
//!    placed is reported. A position without a switch is a failed switch,
//!    a missing link between neighbours a failed link.
//! 3. **Unicast** ([`route`]): DOR, x then y then z. The path SL has bit `d`
//!    set when the pristine shortest path crosses the dateline of dimension
//!    `d` (between coordinates radix-1 and 0); it depends on the two
//!    switches' coordinates only, so failures never change it. SL bit 3 is
//!    left for the second QoS level. SL2VL maps are per (input, output)
//!    port: on torus links VL bit 0 is the SL's dateline bit of the
//!    dimension the output port points in, VL bit 1 marks the first hop
//!    after a y→x, z→x or z→y turn (illegal under DOR), VL bit 2 is the QoS
//!    level (VLs 0-3 and 4-7); end ports carry the QoS level on VL 0/1.
//!    - A ring broken by failed links is travelled the long way round; a
//!      broken ring cannot close a credit loop, so its dateline no longer
//!      matters and the SL stays.
//!    - A failed switch on the way in a dimension makes the switch before
//!      it turn early into the next dimension that still needs travel; the
//!      turn back happens one hop later and that hop runs on VL bit 1.
//!      Several failed switches are handled when they are adjacent in the
//!      last DOR dimension.
//!    - Refused, with the reason: a ring (or mesh line) broken into disjoint
//!      segments; failed switches adjacent in another dimension; a pair with
//!      no legal way around failed switches (e.g. two diagonal ones); end
//!      ports on switches cabled to the torus that could not be placed; and,
//!      when failed switches form more than one group, any result the kit
//!      verifier finds a credit loop in. (OpenSM 3.3.23 refuses every case
//!      of several failed switches outside one column of its z dimension;
//!      this engine routes those it can prove free of credit loops.)
//!    - Parallel links between two switches are used round-robin by the
//!      rank of the destination port at its switch (management port and end
//!      ports, in `port_order`), so a failed one redistributes routes.
//! 4. **Multicast** ([`mcast`]): a master spanning tree rooted near the
//!    centre, along x then y then z lines, never across an intact ring's
//!    dateline. Multicast should use SL 0 or 8 only.

// Coordinates are indexed by dimension throughout; index loops read best.
#![allow(clippy::needless_range_loop)]

pub mod config;
pub mod discover;
pub mod mcast;
pub mod route;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sm_abi::{path_sl_box, EngineError, FabricSnapshot, Level, PreviousRouting, Routing, RoutingEngine, NONE};
use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
use smcore_kit::graph::Graph;

use crate::config::TorusConf;
use crate::discover::{node_name, Torus};
use crate::route::{Router, TorusSl};

/// The engine's name.
pub const NAME: &str = "torus-2QoS";

/// OpenSM's default location of the configuration file.
pub const DEFAULT_CONF: &str = "/etc/opensm/torus-2QoS.conf";

const SL2VL_KEYS: [&str; 5] = [
    "qos_sl2vl",
    "qos_ca_sl2vl",
    "qos_sw0_sl2vl",
    "qos_swe_sl2vl",
    "qos_rtr_sl2vl",
];

/// The engine.
#[derive(Debug)]
pub struct Torus2Qos {
    conf: TorusConf,
    conf_path: String,
    qos_notes: Vec<String>,
    /// Placement of the previous successful discovery (GUID, position), to
    /// report changes between sweeps.
    previous: Mutex<Option<Vec<(u64, u32)>>>,
}

impl Torus2Qos {
    /// Build from the TOML configuration text (`torus_config` names the
    /// torus-2QoS.conf; QoS options are checked against what torus-2QoS needs).
    pub fn from_config(text: &str) -> Result<Torus2Qos, EngineError> {
        let table: toml::Table = smcore_kit::config::parse(NAME, text)?;
        let path = match table.get("torus_config") {
            Some(toml::Value::String(s)) => PathBuf::from(s),
            Some(other) => return Err(EngineError::new(format!("{NAME}: torus_config must be a file name, not {other}"))),
            None if Path::new(DEFAULT_CONF).exists() => PathBuf::from(DEFAULT_CONF),
            None => {
                return Err(EngineError::new(format!(
                    "{NAME}: no torus-2QoS.conf: give --torus-config FILE (option torus_config); {DEFAULT_CONF} does not exist"
                )))
            }
        };
        let conf = TorusConf::load(&path).map_err(|e| EngineError::new(format!("{NAME}: {e}")))?;
        Ok(Torus2Qos {
            conf,
            conf_path: path.display().to_string(),
            qos_notes: qos_notes(&table),
            previous: Mutex::new(None),
        })
    }

    /// An engine from an already parsed configuration.
    pub fn with_conf(conf: TorusConf) -> Torus2Qos {
        Torus2Qos {
            conf,
            conf_path: "torus-2QoS.conf".into(),
            qos_notes: Vec::new(),
            previous: Mutex::new(None),
        }
    }

    /// Discover the torus only (for tests and tools).
    pub fn discover(&self, fabric: &FabricSnapshot) -> Result<Torus, EngineError> {
        let graph = Graph::new(fabric);
        discover::discover(fabric, &graph, &self.conf)
            .map_err(|e| EngineError::new(format!("{NAME}: {e}")))
    }

    fn changes(&self, fabric: &FabricSnapshot, graph: &Graph, t: &Torus) -> Vec<String> {
        let now: Vec<(u64, u32)> = graph
            .switch_nodes
            .iter()
            .enumerate()
            .map(|(s, &n)| (fabric.nodes[n as usize].guid, t.pos_of[s]))
            .collect();
        let Ok(mut prev) = self.previous.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(old) = prev.as_ref() {
            let max = self.conf.max_changes;
            let pos_name = |p: u32| {
                if p == NONE {
                    "unplaced".to_string()
                } else {
                    t.name(t.coord(p))
                }
            };
            let mut all = Vec::new();
            for &(g, p) in old {
                match now.iter().find(|&&(h, _)| h == g) {
                    None => all.push(format!("switch {g:#x} at {} is gone", pos_name(p))),
                    Some(&(_, q)) if q != p => all.push(format!(
                        "switch {g:#x} moved from {} to {}",
                        pos_name(p),
                        pos_name(q)
                    )),
                    _ => {}
                }
            }
            for &(g, q) in &now {
                if !old.iter().any(|&(h, _)| h == g) {
                    all.push(format!("switch {g:#x} appeared at {}", pos_name(q)));
                }
            }
            let total = all.len();
            out.extend(all.into_iter().take(max));
            if total > max {
                out.push(format!(
                    "... {} more torus changes (max_changes {max})",
                    total - max
                ));
            }
        }
        *prev = Some(now);
        out
    }
}

/// Warnings about QoS options torus-2QoS overrides or needs set differently.
fn qos_notes(table: &toml::Table) -> Vec<String> {
    let mut out = Vec::new();
    for k in SL2VL_KEYS {
        if table.contains_key(k) {
            out.push(format!(
                "{k} is ignored: torus-2QoS programs every SL2VL map itself"
            ));
        }
    }
    for k in ["qos_vlarb_high", "qos_vlarb_low"] {
        if table.contains_key(k) {
            out.push(format!(
                "{k} should not be used with torus-2QoS: it maps SLs to VLs differently on inter-switch and end-port links; \
                 use qos_swe_vlarb_* and qos_ca_vlarb_*"
            ));
        }
    }
    let table_weights = |key: &str| -> Option<Result<[u32; 8], String>> {
        let v = table.get(key)?;
        let s = match v {
            toml::Value::String(s) => s.clone(),
            other => {
                return Some(Err(format!(
                    "{key}: expected a string like \"0:64,1:64\", got {other}"
                )))
            }
        };
        let mut w = [0u32; 8];
        for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let Some((vl, weight)) = item.split_once(':') else {
                return Some(Err(format!("{key}: `{item}` is not VL:weight")));
            };
            match (vl.trim().parse::<usize>(), weight.trim().parse::<u32>()) {
                (Ok(vl), Ok(weight)) if vl < 15 => {
                    if vl < 8 {
                        w[vl] += weight;
                    }
                }
                _ => return Some(Err(format!("{key}: `{item}` is not VL:weight"))),
            }
        }
        Some(Ok(w))
    };
    for level in ["high", "low"] {
        let key = format!("qos_swe_vlarb_{level}");
        let generic = format!("qos_vlarb_{level}");
        let got = table_weights(&key).or_else(|| table_weights(&generic));
        match got {
            None => {}
            Some(Err(e)) => out.push(e),
            Some(Ok(w)) => {
                for (lo, hi) in [(0usize, 4usize), (4, 8)] {
                    let first = w[lo];
                    if w[lo..hi].iter().any(|&x| x != first) {
                        out.push(format!(
                            "VL arbitration ({level}) is unfair across VLs {lo}-{}: weights {:?}; torus-2QoS spreads one QoS level over these VLs and needs equal weights",
                            hi - 1,
                            &w[lo..hi]
                        ));
                    }
                }
            }
        }
    }
    out
}

impl RoutingEngine for Torus2Qos {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let fail = |m: String| EngineError::new(format!("{NAME}: {m}"));
        let graph = Graph::new(fabric);
        if graph.switch_count() == 0 {
            return Err(fail("the fabric has no switches".into()));
        }
        let t = discover::discover(fabric, &graph, &self.conf).map_err(fail)?;
        if let Some(why) = route::refusal(&t) {
            // Switches or links discovery could not fit usually mean the
            // configured radix or seed does not match the cabling.
            let hint = if t.warnings.is_empty() {
                String::new()
            } else {
                format!(
                    " (discovery: {}; check the radices and seeds of {})",
                    t.warnings.join("; "),
                    self.conf_path
                )
            };
            return Err(fail(format!("{why}{hint}")));
        }
        // End ports on switches discovery could not place cannot be routed:
        // say so rather than leave the verifier to count unreachable pairs.
        // Switches cut off from the torus altogether (islands) are not the
        // torus's business.
        let mut joined = vec![false; graph.switch_count()];
        let mut stack: Vec<u32> = (0..graph.switch_count() as u32)
            .filter(|&s| t.pos_of[s as usize] != NONE)
            .collect();
        for &s in &stack {
            joined[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &n in &graph.sw_adj[s as usize] {
                if !joined[n as usize] {
                    joined[n as usize] = true;
                    stack.push(n);
                }
            }
        }
        let stranded: Vec<String> = fabric
            .end_ports()
            .filter_map(|pi| {
                let p = &fabric.ports[pi as usize];
                let peer = &fabric.ports[p.peer as usize];
                let sw = graph.sw_of_node[peer.node as usize];
                (sw != NONE && t.pos_of[sw as usize] == NONE && joined[sw as usize])
                    .then(|| node_name(fabric, peer.node))
            })
            .collect();
        if !stranded.is_empty() {
            let mut names = stranded.clone();
            names.dedup();
            return Err(fail(format!(
                "{} end port(s) hang off switches outside the torus and cannot be routed: {}{}; {}",
                stranded.len(),
                names.iter().take(4).cloned().collect::<Vec<_>>().join(", "),
                if names.len() > 4 { ", ..." } else { "" },
                t.warnings.join("; ")
            )));
        }
        let max = self.conf.portgroup_max_ports;
        for p in 0..t.positions() as u32 {
            for dir in 0..6 {
                let k = t.ports[p as usize][dir].len();
                if k > max {
                    return Err(fail(format!(
                        "{k} parallel links leave {} in one direction, more than portgroup_max_ports {max}",
                        t.name(t.coord(p))
                    )));
                }
            }
        }
        let dest = route::destination_lids(fabric, &graph, &self.conf.port_order);
        for (s, lids) in dest.iter().enumerate() {
            let ports = lids
                .iter()
                .map(|l| l.1)
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            if ports > max {
                return Err(fail(format!(
                    "switch {} has {ports} ports in its host port group (end ports plus the management port), more than portgroup_max_ports {max}",
                    node_name(fabric, graph.switch_nodes[s])
                )));
            }
        }
        let router = Router::new(&t);
        // A pristine torus needs no decision matrix: DOR straight from the
        // coordinates while the tables are written.
        let dirs = if router.pristine {
            None
        } else {
            Some(route::decisions(&t, &router, &graph).map_err(fail)?)
        };
        let lfts = route::build_lfts(fabric, &graph, &t, dirs.as_deref(), &dest);
        let sl = TorusSl::new(fabric, &t, &dest);
        let sl2vl = route::sl2vl(fabric, &graph, &t);
        let mut routing = Routing::single_vl(lfts);
        routing.path_sl = path_sl_box(sl);
        routing.sl2vl = sl2vl.into();

        // Several separate groups of failed switches are beyond what the
        // VL bit 1 argument covers; accept them only if no credit loop results.
        let groups = route::failed_switch_groups(&t);
        if groups > 1 {
            let v = smcore_kit::verify::verify_with(
                fabric,
                &graph,
                &routing,
                &smcore_kit::VerifyOptions::default(),
            );
            if v.credit_loop.is_some() {
                let missing: Vec<String> = (0..t.positions() as u32)
                    .filter(|&p| !t.present(p))
                    .take(8)
                    .map(|p| t.name(t.coord(p)))
                    .collect();
                return Err(fail(format!(
                    "failed switches at {} form {groups} separate groups; routing around them would close a credit loop ({})",
                    missing.join(" "),
                    v.failure().unwrap_or_default()
                )));
            }
        }

        // Multicast master tree.
        if let Some(tree) = mcast::master_tree(&t) {
            if tree.root_compromised {
                routing.diag(Level::Warn, "no multicast root has a plane free of failed switches; the master spanning tree makes extra turns");
            }
            // On a 2D torus a failed switch in the centre row moves the root
            // off it; multicast flooding on that tree together with
            // unicast's detour around the failed switch can then close a
            // credit loop (found by the tests' dependency sweep).
            if let Some(&last) = t.dims.last() {
                let rc = t.coord(tree.root);
                if t.dims.len() == 2 && rc[last] != t.radix[last] / 2 {
                    routing.diag(
                        Level::Warn,
                        format!(
                            "multicast root moved to {} by failed switches in the centre row of a 2D torus: multicast \
                             traffic together with unicast routed around them can close a credit loop",
                            t.name(rc)
                        ),
                    );
                }
            }
            if tree.extra > 0 {
                routing.diag(
                    Level::Warn,
                    format!("{} switch(es) joined the multicast master spanning tree with turns DOR does not make", tree.extra),
                );
            }
            routing.mcast_tree = abi_stable::std_types::ROption::RSome(mcast::to_spanning_tree(
                fabric,
                &graph.switch_nodes,
                &t,
                &tree,
            ));
            routing.diag(
                Level::Info,
                format!(
                    "multicast master spanning tree rooted at {}; multicast must use SL 0 or SL 8 only",
                    t.name(t.coord(tree.root))
                ),
            );
        }

        // VLs: 0-3 and 4-7 on inter-switch links, 0/1 on end ports.
        let min_isl_vls = graph
            .sw_ports
            .iter()
            .flatten()
            .filter(|sp| sp.peer_sw != NONE)
            .map(|sp| fabric.ports[sp.port_index as usize].op_vls)
            .min()
            .unwrap_or(8);
        routing.vls_used = 8.min(min_isl_vls.max(1));
        if min_isl_vls < 8 {
            routing.diag(
                Level::Warn,
                format!(
                    "inter-switch links operate only {min_isl_vls} data VLs: torus-2QoS needs 8 for two QoS levels{}",
                    if min_isl_vls < 4 { " and 4 to route around a failed switch" } else { "" }
                ),
            );
        }

        for w in &self.conf.warnings {
            routing.diag(Level::Warn, w.clone());
        }
        for w in &t.warnings {
            routing.diag(Level::Warn, w.clone());
        }
        for w in &self.qos_notes {
            routing.diag(Level::Warn, w.clone());
        }
        let missing = (0..t.positions() as u32).filter(|&p| !t.present(p)).count();
        let mut failed_links = 0;
        for p in 0..t.positions() as u32 {
            for &d in &t.dims {
                if let Some(n) = t.step(t.coord(p), 2 * d) {
                    if t.present(p) && t.present(t.pos(n)) && !t.has_link(p, 2 * d) {
                        failed_links += 1;
                    }
                }
            }
        }
        routing.diag(
            Level::Info,
            format!(
                "{} {}x{}x{} torus from seed {} of {}: {} switches placed, {missing} failed switch position(s), {failed_links} failed torus link(s)",
                NAME,
                t.radix[0],
                t.radix[1],
                t.radix[2],
                t.seed + 1,
                self.conf_path,
                t.pos_of.iter().filter(|&&p| p != NONE).count()
            ),
        );
        for c in self.changes(fabric, &graph, &t) {
            routing.diag(Level::Info, c);
        }
        Ok(routing)
    }

    /// Continuity (sm-abi 1.3): an entry stays while its port is healthy and
    /// on a least-hop path; broken ones take torus-2QoS's own port and
    /// nothing moves to rebalance (the path SLs are torus-2QoS's); merged
    /// tables with a credit loop on those SLs give way to the fresh routing.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> Result<Routing, EngineError> {
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::MinHop, &ContinuityOptions { deadlock_free: true, take_fresh: true, ..ContinuityOptions::default() }, NAME))
    }
}

sm_abi::export_engines! {
    "torus-2QoS" => {
        summary: "OpenSM torus-2QoS: DOR on 2D/3D tori with datelines, two QoS levels, routes around failures without changing path SLs",
        deadlock_free: true,
        create: Torus2Qos::from_config,
    },
}
