//! The Min Hop engine: OpenSM's default routing.
//!
//! Every switch forwards each LID through a port on a shortest path to it;
//! among equally short ports it picks the one that carries the fewest routes
//! so far (routes to switches are not counted), and with LMC > 0 it spreads
//! a port's LIDs over different neighbouring systems and nodes first. Min
//! hop guarantees minimal paths but not freedom from credit loops: on rings
//! and tori it usually has them, and the core's verifier will say so.

use std::path::PathBuf;

use serde::Deserialize;
use sm_abi::{EngineError, FabricSnapshot, Level, Routing, RoutingEngine};
use smcore_kit::balance::{assign_lfts, routing_order, BalanceFiles, BalanceOptions};
use smcore_kit::config;
use smcore_kit::Graph;

/// Options, named as OpenSM's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MinHopConfig {
    /// Route the ports of these GUIDs first (OpenSM `guid_routing_order_file`).
    pub guid_routing_order_file: Option<PathBuf>,
    /// Switch ports left out of load equalisation: lines `<switch guid> <port>`
    /// (OpenSM `port_prof_ignore_file`, `-i`).
    pub port_prof_ignore_file: Option<PathBuf>,
}

/// The engine.
#[derive(Debug, Clone, Default)]
pub struct MinHop {
    cfg: MinHopConfig,
}

impl MinHop {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<MinHop, EngineError> {
        Ok(MinHop { cfg: config::parse("minhop", text)? })
    }
}

impl RoutingEngine for MinHop {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let graph = Graph::new(fabric);
        if graph.switch_count() == 0 {
            return Err(EngineError::new("minhop: the fabric has no switches"));
        }
        let files = BalanceFiles {
            guid_routing_order_file: self.cfg.guid_routing_order_file.clone(),
            port_prof_ignore_file: self.cfg.port_prof_ignore_file.clone(),
        };
        let inputs = files.load(fabric)?;
        let notes = inputs.warnings;
        let guid_order = inputs.guid_order;
        let opts = BalanceOptions { ignored_ports: inputs.ignored_ports, ..BalanceOptions::default() };
        let dist = graph.distance_matrix();
        let order = routing_order(fabric, &graph, &guid_order);
        let lfts = assign_lfts(fabric, &graph, &dist, &order, &opts);
        let mut routing = Routing::single_vl(lfts);
        for n in notes {
            routing.diag(Level::Warn, n);
        }
        Ok(routing)
    }
}

sm_abi::export_engines! {
    "minhop" => {
        summary: "OpenSM Min Hop: shortest paths, per-port route balancing, LMC-aware",
        deadlock_free: false,
        create: MinHop::from_config,
    },
}
