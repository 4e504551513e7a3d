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
//! With LMC > 0 the kit's DOR mode also follows OpenSM's DOR rules for a
//! port's later LIDs (each searched from port 1 like the first; among
//! equally loaded parallel links the far end this port's LIDs went to least
//! wins, one not used yet counting as 0), so the tables are OpenSM's for
//! every LMC.

use sm_abi::{EngineError, FabricSnapshot, Level, PreviousRouting, Routing, RoutingEngine};
use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
use smcore_kit::balance::{assign_lfts, routing_order, BalanceFiles};
use smcore_kit::config;
use smcore_kit::Graph;

/// Options, named as OpenSM's, shared with min hop (`guid_routing_order_file`,
/// `port_prof_ignore_file`, `hop_weights_file`, `port_shifting`,
/// `scatter_ports`, `guid_routing_order_no_scatter`, and
/// `port_search_ordering_file`, which orders the dimensions).
pub type DorConfig = BalanceFiles;

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
        let inputs = self
            .cfg
            .load(fabric)
            .map_err(|e| EngineError::new(format!("dor: {e}")))?;
        // A port search ordering is DOR's order of dimensions.
        let opts = inputs.options(fabric, &graph, true);
        let order = routing_order(fabric, &graph, &inputs.guid_order);
        let lfts = match inputs.weighted_hops(fabric, &graph) {
            Some(hops) => assign_lfts(fabric, &graph, &hops, &order, &opts),
            None => assign_lfts(fabric, &graph, &graph.distance_matrix(), &order, &opts),
        };
        let mut routing = Routing::single_vl(lfts);
        for n in inputs.warnings {
            routing.diag(Level::Warn, n);
        }
        Ok(routing)
    }

    /// Continuity (sm-abi 1.3): the order of dimensions fixes every next switch,
    /// so an entry stays while its port is healthy and leads to the switch the
    /// fresh routing goes to (one of parallel links keeps its route).
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> Result<Routing, EngineError> {
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::SameNext, &ContinuityOptions { take_fresh: true, ..ContinuityOptions::default() }, "dor"))
    }
}

sm_abi::export_engines! {
    "dor" => {
        summary: "OpenSM DOR: shortest paths in dimension (port) order, balanced only over parallel links; deadlock-free on consistently cabled meshes and hypercubes",
        deadlock_free: false,
        create: Dor::from_config,
    },
}
