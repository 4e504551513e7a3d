//! A template routing engine for smcore: shortest paths with OpenSM's
//! min-hop port balancing, built from the engine kit's pieces.
//!
//! What makes it an smcore engine is three things: a type implementing
//! [`RoutingEngine`], a constructor taking the engine's configuration text,
//! and the [`sm_abi::export_engines!`] line at the bottom. The rest is the
//! algorithm; replace it with yours.

use serde::Deserialize;
use sm_abi::{EngineError, FabricSnapshot, Level, Routing, RoutingEngine};
use smcore_kit::balance::{assign_lfts, routing_order, BalanceOptions};
use smcore_kit::{config, Graph};

/// The engine's name in `--engines` and smcore.toml.
pub const NAME: &str = "template-minhop";

/// Options: the keys of the engine's section in smcore.toml (global
/// options such as `lmc` are merged in; unknown keys are ignored).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TemplateConfig {
    /// Report how many switches were routed, as an informational
    /// diagnostic in smcore's log.
    pub report: bool,
}

/// The engine.
#[derive(Debug, Clone, Default)]
pub struct Template {
    cfg: TemplateConfig,
}

impl Template {
    /// Build from the TOML configuration text; a bad configuration is an
    /// error of kind `BadConfig`.
    pub fn from_config(text: &str) -> Result<Template, EngineError> {
        Ok(Template { cfg: config::parse(NAME, text)? })
    }
}

impl RoutingEngine for Template {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let graph = Graph::new(fabric);
        if graph.switch_count() == 0 {
            // Refusing is fine: smcore tries the next engine of its chain.
            return Err(EngineError::cannot_route(format!("{NAME}: the fabric has no switches")));
        }
        // Hop counts between switches, then every LID routed in OpenSM's
        // order, each switch picking the least loaded of its shortest ports.
        let hops = graph.distance_matrix();
        let order = routing_order(fabric, &graph, &[]);
        let mut routing = Routing::single_vl(assign_lfts(fabric, &graph, &hops, &order, &BalanceOptions::default()));
        if self.cfg.report {
            routing.diag(Level::Info, format!("{NAME}: routed {} switches", routing.lfts.len()));
        }
        Ok(routing)
    }
}

sm_abi::export_engines! {
    "template-minhop" => {
        summary: "Template engine: shortest paths, min-hop balancing",
        deadlock_free: false,
        create: Template::from_config,
    },
}
