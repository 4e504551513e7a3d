//! The Min Hop engine: OpenSM's default routing.
//!
//! Every switch forwards each LID through a port on a shortest path to it;
//! among equally short ports it picks the one that carries the fewest routes
//! so far (routes to switches are not counted), and with LMC > 0 it spreads
//! a port's LIDs over different neighbouring systems and nodes first. Min
//! hop guarantees minimal paths but not freedom from credit loops: on rings
//! and tori it usually has them, and the core's verifier will say so.
//!
//! The library exports two engines: `minhop`, OpenSM's rule exactly, and
//! `minhop-balanced`, the same tables followed by a balancing pass
//! ([`smcore_kit::balance::rebalance`]) that moves routes off the busiest
//! links onto other least-hop ports. OpenSM's greedy counts routes per
//! port of one switch, so how well it spreads end-to-end traffic depends on
//! the order it meets the destinations in (LID and GUID numbering); the
//! pass judges the whole fabric's link loads instead and only ever lowers
//! the busiest one. It is smcore's default routing.

use sm_abi::{EngineError, FabricSnapshot, Level, PreviousRouting, Routing, RoutingEngine};
use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
use smcore_kit::balance::{assign_lfts, balanced_lfts, routing_order, BalanceFiles};
use smcore_kit::config;
use smcore_kit::Graph;

/// Options, named as OpenSM's: those of OpenSM's unicast manager
/// (`guid_routing_order_file`, `port_prof_ignore_file`,
/// `port_search_ordering_file`, `hop_weights_file`, `port_shifting`,
/// `scatter_ports`, `guid_routing_order_no_scatter`), shared with dor and
/// updn.
pub type MinHopConfig = BalanceFiles;

/// The engine.
#[derive(Debug, Clone, Default)]
pub struct MinHop {
    cfg: MinHopConfig,
    /// Run the balancing pass after OpenSM's greedy (`minhop-balanced`).
    balanced: bool,
}

impl MinHop {
    /// OpenSM's Min Hop (`minhop`), from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<MinHop, EngineError> {
        Ok(MinHop { cfg: config::parse("minhop", text)?, balanced: false })
    }

    /// Min Hop with the balancing pass (`minhop-balanced`), from the TOML
    /// configuration text (the same options as `minhop`).
    pub fn balanced_from_config(text: &str) -> Result<MinHop, EngineError> {
        Ok(MinHop { cfg: config::parse("minhop-balanced", text)?, balanced: true })
    }

    /// `minhop-balanced` with default options.
    pub fn balanced() -> MinHop {
        MinHop { balanced: true, ..MinHop::default() }
    }
}

impl RoutingEngine for MinHop {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let graph = Graph::new(fabric);
        if graph.switch_count() == 0 {
            return Err(EngineError::new("minhop: the fabric has no switches"));
        }
        let inputs = self.cfg.load(fabric)?;
        let opts = inputs.options(fabric, &graph, false);
        let order = routing_order(fabric, &graph, &inputs.guid_order);
        let mut notes = inputs.warnings.clone();
        let weighted = inputs.weighted_hops(fabric, &graph);
        if weighted.is_some() && self.balanced {
            notes.push(
                "minhop-balanced: hop_weights_file given: OpenSM's rule over the weighted hop counts, without the balancing pass (it knows plain hops only)"
                    .into(),
            );
        }
        let dist = graph.distance_matrix();
        let (lfts, pass) = if let Some(hops) = &weighted {
            (assign_lfts(fabric, &graph, hops, &order, &opts), None)
        } else if self.balanced {
            let (lfts, pass) = balanced_lfts(fabric, &graph, &dist, &order, &opts);
            (lfts, Some(pass))
        } else {
            (assign_lfts(fabric, &graph, &dist, &order, &opts), None)
        };
        let mut routing = Routing::single_vl(lfts);
        if let Some(p) = pass {
            routing.diag(
                Level::Info,
                format!(
                    "minhop-balanced: busiest link {} with OpenSM's rule, {} balanced ({} moves, lower bound {}{})",
                    p.max_before,
                    p.max_after,
                    p.moves,
                    p.lower_bound,
                    if p.budget_exhausted { ", work budget exhausted" } else { "" }
                ),
            );
        }
        for n in notes {
            routing.diag(Level::Warn, n);
        }
        Ok(routing)
    }

    /// Continuity (sm-abi 1.3): an entry stays while its port is healthy and on
    /// a least-hop path (OpenSM's rule on re-sweeps); broken entries take the
    /// least loaded least-hop port; routes are moved only off links the kept
    /// ones load above the fresh routing's busiest.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> Result<Routing, EngineError> {
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::MinHop, &ContinuityOptions::default(), if self.balanced { "minhop-balanced" } else { "minhop" }))
    }
}

sm_abi::export_engines! {
    "minhop" => {
        summary: "OpenSM Min Hop: shortest paths, per-port route balancing, LMC-aware",
        deadlock_free: false,
        create: MinHop::from_config,
    },
    "minhop-balanced" => {
        summary: "Min Hop, then routes moved to other least-hop ports until the busiest link cannot be relieved (smcore's default)",
        deadlock_free: false,
        create: MinHop::balanced_from_config,
    },
}
