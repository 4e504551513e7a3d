//! `smcore route`: the routing pipeline on a topology file, without MADs.
//!
//! topology file → fabric snapshot with LIDs → engine chain (+ verify gate)
//! → report and OpenSM-format dumps. The same chain and gate run in the SM.

use std::path::Path;
use std::time::Instant;

use sm_abi::FabricSnapshot;
use thiserror::Error;
use tracing::info_span;

use crate::dump::{self, DumpError};
use crate::engines::chain::{self, ChainError, ChainOutcome, GateOptions};
use crate::engines::Registry;
use crate::report::{peak_rss_mib, RouteReport};

/// What stops `smcore route` before any engine runs, or after.
#[derive(Debug, Error)]
pub enum OfflineError {
    /// Bad topology file.
    #[error(transparent)]
    Topology(#[from] sm_topology::TopologyError),
    /// Bad engine list.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// Dumps could not be written.
    #[error(transparent)]
    Dump(#[from] DumpError),
}

/// Load a topology file and assign LIDs.
pub fn load_fabric(path: &Path, lmc: u8) -> Result<FabricSnapshot, OfflineError> {
    let topo = sm_topology::parse_file(path)?;
    Ok(sm_topology::lids::snapshot(&topo, lmc)?)
}

/// What routing takes of the configuration: the verifier's gate, the
/// options text of each engine (by name), the subnet's LMC.
pub struct RouteSettings<'a> {
    /// The gate every routing passes before it is accepted.
    pub gate: GateOptions,
    /// The subnet's LMC (for a topology file read offline).
    pub lmc: u8,
    /// The options given to the engine of this name.
    pub engine_text: Box<dyn Fn(&str) -> String + 'a>,
    /// Where the engines run (a process of their own by default).
    pub isolation: crate::engines::host::Isolation,
    /// Names the dumps show nodes by (OpenSM `node_name_map_name`).
    pub node_names: crate::node_names::NodeNameMap,
}

/// Route a fabric through the chain from scratch, filling a report; writes
/// dumps when `dump_dir` is given and something routed.
pub fn route_fabric(
    fabric: &FabricSnapshot,
    registry: &Registry,
    engines: &str,
    settings: &RouteSettings<'_>,
    dump_dir: Option<&Path>,
    report: &mut RouteReport,
) -> Result<ChainOutcome, OfflineError> {
    route_fabric_after(fabric, registry, engines, settings, dump_dir, report, None)
}

/// [`route_fabric`], continuing from `previous` (the routing in force)
/// when given: the engines keep the routes the change left valid.
pub fn route_fabric_after(
    fabric: &FabricSnapshot,
    registry: &Registry,
    engines: &str,
    settings: &RouteSettings<'_>,
    dump_dir: Option<&Path>,
    report: &mut RouteReport,
    previous: Option<&sm_abi::PreviousRouting>,
) -> Result<ChainOutcome, OfflineError> {
    let spec = chain::ChainSpec::parse(engines, registry)?;
    let outcome = chain::run_after(
        registry,
        &spec,
        fabric,
        &|name| (settings.engine_text)(name),
        &settings.gate,
        previous,
        &settings.isolation,
    );
    let (mut route, mut verify) = (0.0, 0.0);
    for a in &outcome.attempts {
        route += a.route_time.as_secs_f64();
        verify += a.verify_time.as_secs_f64();
    }
    report.phase("route", std::time::Duration::from_secs_f64(route));
    report.phase("verify", std::time::Duration::from_secs_f64(verify));
    report.fill(fabric, &outcome);
    if let (Some(dir), Some(routed)) = (dump_dir, &outcome.routed) {
        let t = Instant::now();
        let named = settings.node_names.rename(fabric);
        let files = dump::write_all(dir, &named, &routed.routing)?;
        report.phase("dump", t.elapsed());
        report.dumps = files.iter().map(|p| p.display().to_string()).collect();
    }
    Ok(outcome)
}

/// The whole of `smcore route`.
pub fn route_file(
    topology: &Path,
    registry: &Registry,
    engines: &str,
    settings: &RouteSettings<'_>,
    dump_dir: Option<&Path>,
) -> Result<(RouteReport, ChainOutcome), OfflineError> {
    let span = info_span!("route", topology = %topology.display());
    let _g = span.enter();
    let total = Instant::now();
    let mut report = RouteReport { topology: topology.display().to_string(), ..Default::default() };
    let t = Instant::now();
    let topo = sm_topology::parse_file(topology)?;
    report.phase("parse", t.elapsed());
    let t = Instant::now();
    let fabric = sm_topology::lids::snapshot(&topo, settings.lmc)?;
    drop(topo);
    report.phase("lids", t.elapsed());
    let outcome = route_fabric(&fabric, registry, engines, settings, dump_dir, &mut report)?;
    report.phase("total", total.elapsed());
    report.peak_rss_mib = peak_rss_mib();
    if settings.isolation.mode == crate::engines::host::Mode::Process {
        report.engine_host_peak_rss_mib = crate::report::children_peak_rss_mib();
    }
    Ok((report, outcome))
}
