//! The DOR engine: OpenSM's dimension-order routing.
//!
//! DOR is min hop with a different choice among equally short ports. Min
//! hop spreads the routes of a switch over every port on a shortest path;
//! DOR takes, at every switch and for every destination, the
//! lowest-numbered port that lies on a shortest path, and spreads only over
//! parallel links that go to the same neighbour as that port (they stand
//! for one dimension). Read from the destination back, every path is grown
//! along the lowest dimension still available, which is where the name
//! comes from.
//!
//! The port numbers are the dimensions, so the fabric must be cabled
//! consistently: on a hypercube, dimension `d` uses the same port number at
//! both ends of every cable; on a mesh, each dimension uses the same pair of
//! ports everywhere, one in each direction (e.g. +x on port 1 and -x on
//! port 2). With such cabling every path first corrects its lowest
//! dimension, then the next, and so on: a turn from a higher dimension back
//! to a lower one never happens, so meshes and hypercubes have no credit
//! loop on a single VL. On a torus the wrap-around links close rings inside
//! one dimension and DOR does have credit loops; it still routes every pair
//! over shortest paths. The engine therefore does not declare itself
//! deadlock-free (`deadlock_free: false`): the core's verifier judges each
//! fabric, as OpenSM's documentation says DOR is deadlock-free only on
//! consistently cabled hypercubes and meshes.
//!
//! The port selection itself is the kit's OpenSM balancing
//! ([`smcore_kit::balance`]) in its DOR mode, over least hops from the
//! switch distance matrix, in OpenSM's target order; the options shared
//! with min hop (`guid_routing_order_file`, `port_prof_ignore_file`) apply
//! the same way, as in OpenSM where both engines share the LFT builder.
//!
//! With LMC > 0, OpenSM's DOR differs from its min-hop LMC rules in two
//! ways the kit's DOR mode does not follow: every LID of a port is searched
//! from port 1 (min hop starts after the port its previous LID took), and
//! among equally loaded parallel links the one whose far end this port's
//! LIDs have been forwarded to least wins, a far end not used yet counting
//! as zero. [`lmc_lfts`] implements those rules (only the DOR choice among
//! parallel links exists there: no system or node spreading), so that the
//! tables are OpenSM's for every LMC.

use std::path::PathBuf;

use rayon::prelude::*;
use serde::Deserialize;
use sm_abi::{
    EngineError, FabricSnapshot, Level, Lft, NodeKind, Routing, RoutingEngine, NONE, NO_ROUTE,
};
use smcore_kit::balance::{assign_lfts, routing_order, BalanceOptions, HopTable};
use smcore_kit::config::{self, read_guid_list};
use smcore_kit::graph::{Sw, SwPort};
use smcore_kit::Graph;

/// Options, named as OpenSM's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DorConfig {
    /// Route the ports of these GUIDs first (OpenSM `guid_routing_order_file`).
    pub guid_routing_order_file: Option<PathBuf>,
    /// Switch ports left out of load equalisation: lines `<switch guid> <port>`
    /// (OpenSM `port_prof_ignore_file`, `-i`).
    pub port_prof_ignore_file: Option<PathBuf>,
}

/// The engine.
#[derive(Debug, Clone, Default)]
pub struct Dor {
    cfg: DorConfig,
}

impl Dor {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<Dor, EngineError> {
        Ok(Dor {
            cfg: config::parse("dor", text)?,
        })
    }
}

impl RoutingEngine for Dor {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let graph = Graph::new(fabric);
        if graph.switch_count() == 0 {
            return Err(EngineError::new("dor: the fabric has no switches"));
        }
        let mut notes = Vec::new();
        let guid_order = match &self.cfg.guid_routing_order_file {
            Some(p) => {
                let list = read_guid_list(p).map_err(|e| EngineError::new(format!("dor: {e}")))?;
                notes.extend(list.warnings.iter().cloned());
                list.guids()
            }
            None => Vec::new(),
        };
        let mut opts = BalanceOptions {
            dor: true,
            ..Default::default()
        };
        if let Some(p) = &self.cfg.port_prof_ignore_file {
            let list = read_guid_list(p).map_err(|e| EngineError::new(format!("dor: {e}")))?;
            notes.extend(list.warnings.iter().cloned());
            for (guid, rest) in &list.entries {
                let node = fabric.nodes.iter().position(|n| n.guid == *guid);
                match (node, rest.trim().parse::<u8>()) {
                    (Some(n), Ok(port)) => opts.ignored_ports.push((n as u32, port)),
                    (None, _) => notes.push(format!(
                        "{}: switch 0x{guid:016x} not in the fabric",
                        p.display()
                    )),
                    (_, Err(_)) => notes.push(format!(
                        "{}: bad port `{rest}` for 0x{guid:016x}",
                        p.display()
                    )),
                }
            }
        }
        let dist = graph.distance_matrix();
        let order = routing_order(fabric, &graph, &guid_order);
        let lfts = if fabric.lmc == 0 {
            assign_lfts(fabric, &graph, &dist, &order, &opts)
        } else {
            lmc_lfts(fabric, &graph, &dist, &order, &opts.ignored_ports)
        };
        let mut routing = Routing::single_vl(lfts);
        for n in notes {
            routing.diag(Level::Warn, n);
        }
        Ok(routing)
    }
}

/// DOR tables with OpenSM's DOR rules for LMC > 0 (see the crate notes):
/// targets in `order` (port indices), all targets' first LIDs, then all
/// second LIDs, and so on; for each, the least-hop ports in port order,
/// kept to the neighbour of the first one; of those the one with the
/// fewest routes so far, a later one winning a tie when this port's LIDs
/// went to its far end fewer times. Routes to switches and through
/// `ignored` ports (node index, port) are not counted. With LMC 0 the result
/// equals the kit's DOR mode.
pub fn lmc_lfts<H: HopTable>(
    fabric: &FabricSnapshot,
    graph: &Graph,
    hops: &H,
    order: &[u32],
    ignored: &[(u32, u8)],
) -> Vec<Lft> {
    let targets: Vec<Target> = order
        .iter()
        .map(|&pi| Target::new(fabric, graph, pi))
        .collect();
    (0..graph.switch_count() as Sw)
        .into_par_iter()
        .map(|s| Lft {
            node: graph.switch_nodes[s as usize],
            ports: lmc_switch(fabric, graph, hops, &targets, ignored, s).into(),
        })
        .collect()
}

#[derive(Clone, Copy)]
struct Target {
    base_lid: u16,
    lid_count: u32,
    /// Switch the target is or hangs off, NONE when not attached.
    t: Sw,
    /// Port of `t` leading to the target (0 for a switch).
    t_port: u8,
    /// The target port's node and number (the far end when `t` is the switch routing).
    node: u32,
    num: u8,
    is_switch: bool,
}

impl Target {
    fn new(fabric: &FabricSnapshot, graph: &Graph, pi: u32) -> Target {
        let p = &fabric.ports[pi as usize];
        let is_switch = fabric.nodes[p.node as usize].kind == NodeKind::Switch;
        let (t, t_port) = if is_switch {
            (graph.sw_of_node[p.node as usize], 0)
        } else if p.peer == NONE {
            (NONE, 0)
        } else {
            let peer = &fabric.ports[p.peer as usize];
            (graph.sw_of_node[peer.node as usize], peer.num)
        };
        Target {
            base_lid: p.lid,
            lid_count: p.lid_count(),
            t,
            t_port,
            node: p.node,
            num: p.num,
            is_switch,
        }
    }
}

/// A far end (node, port) this target's LIDs were forwarded to, and how often.
type FarEnd = (u32, u8, u32);

fn lmc_switch<H: HopTable>(
    fabric: &FabricSnapshot,
    graph: &Graph,
    hops: &H,
    targets: &[Target],
    ignored_ports: &[(u32, u8)],
    s: Sw,
) -> Vec<u8> {
    let node = graph.switch_nodes[s as usize];
    let num_ports = fabric.nodes[node as usize].num_ports as usize + 1;
    let mut ignored = vec![false; num_ports];
    for &(n, p) in ignored_ports {
        if n == node && (p as usize) < num_ports {
            ignored[p as usize] = true;
        }
    }
    // Switch-to-switch links in port order: the only least-hop candidates.
    let links: Vec<SwPort> = graph.sw_ports[s as usize]
        .iter()
        .copied()
        .filter(|l| l.peer_sw != NONE)
        .collect();
    let mut counts = vec![0u32; num_ports];
    let mut far: Vec<Vec<FarEnd>> = vec![Vec::new(); targets.len()];
    let mut lft = vec![NO_ROUTE; fabric.max_lid as usize + 1];
    let max_count = targets.iter().map(|t| t.lid_count).max().unwrap_or(0);
    for offset in 0..max_count {
        for (ti, tg) in targets.iter().enumerate() {
            if offset >= tg.lid_count || tg.t == NONE {
                continue;
            }
            let lid = tg.base_lid as usize + offset as usize;
            if lid >= lft.len() {
                continue;
            }
            let (port, far_end) = if tg.t == s {
                (tg.t_port, (tg.node, tg.num))
            } else {
                let least = hops.least(s, tg.t);
                if least == u8::MAX {
                    continue;
                }
                let mut first_remote = NONE;
                let mut best: Option<SwPort> = None;
                let (mut least_paths, mut least_fwd) = (u32::MAX, u32::MAX);
                for l in &links {
                    if hops.via(s, l, tg.t) != least {
                        continue;
                    }
                    if first_remote == NONE {
                        first_remote = l.peer_node;
                    } else if l.peer_node != first_remote {
                        continue;
                    }
                    let count = counts[l.port as usize];
                    let peer_num = fabric.ports[l.peer_port as usize].num;
                    let fwd = far[ti]
                        .iter()
                        .find(|f| f.0 == l.peer_node && f.1 == peer_num)
                        .map_or(0, |f| f.2);
                    if count < least_paths {
                        best = Some(*l);
                        least_paths = count;
                        least_fwd = least_fwd.min(fwd);
                    } else if count == least_paths && fwd < least_fwd {
                        least_fwd = fwd;
                        best = Some(*l);
                    }
                }
                let Some(b) = best else { continue };
                (
                    b.port,
                    (b.peer_node, fabric.ports[b.peer_port as usize].num),
                )
            };
            lft[lid] = port;
            if !tg.is_switch && !ignored[port as usize] {
                counts[port as usize] += 1;
                match far[ti]
                    .iter_mut()
                    .find(|f| f.0 == far_end.0 && f.1 == far_end.1)
                {
                    Some(f) => f.2 += 1,
                    None => far[ti].push((far_end.0, far_end.1, 1)),
                }
            }
        }
    }
    lft
}

sm_abi::export_engines! {
    "dor" => {
        summary: "OpenSM DOR: shortest paths in dimension (port) order, balanced only over parallel links; deadlock-free on consistently cabled meshes and hypercubes",
        deadlock_free: false,
        create: Dor::from_config,
    },
}
