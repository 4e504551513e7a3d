//! # A heavy sweep's first stages: the fabric read and addressed
//!
//! design.md's "Data flow of one sweep", stages 1 and 2 (the rest, from
//! the link parameters on, is [`crate::pipeline`]):
//!
//! | stage | takes | gives |
//! |---|---|---|
//! | [`read_fabric`] (or [`Discovered::from_fabric`]) | the port | [`Discovered`] |
//! | [`address`]: LIDs assigned (and programmed, or left to the link stage) | [`Discovered`] | [`Addressed`] |
//!
//! Nothing is written to the fabric before [`address`].

use std::time::{Duration, Instant};

use super::discovery::{self, discover_within, DiscoveryReport, Fabric, FabricMemory, SweepError, SweepLimits};
use super::lids::{assign, Guid2Lid, LidSets, ProgramReport};
use super::transport::{SmpClient, SmpPort, SmpStats};
use super::{light, SweepOptions, SweepOutcome};

/// Stage 1: the fabric as discovery read it. Nothing has been written.
#[derive(Debug, Clone)]
pub struct Discovered {
    fabric: Fabric,
    report: DiscoveryReport,
    smps: SmpStats,
    at: Instant,
}

impl Discovered {
    /// A fabric discovery just read through this SM's port, with its
    /// report and the SMPs it took. The standby arbitration reads the
    /// whole fabric while it looks for other SMs and hands it over this
    /// way, so that the first heavy sweep of a new master does not read it
    /// again.
    pub fn new(fabric: Fabric, report: DiscoveryReport, smps: SmpStats) -> Self {
        Discovered { fabric, report, smps, at: Instant::now() }
    }

    /// A fabric someone else already discovered through this SM's port,
    /// its SMPs counted elsewhere: the sweep goes on from it without
    /// sending a discovery SMP. `fabric` must be what [`discover_within`]
    /// returned on this port, with `report` its report.
    pub fn from_fabric(fabric: Fabric, report: DiscoveryReport) -> Self {
        Self::new(fabric, report, SmpStats::default())
    }

    /// The fabric read.
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// What went wrong while reading it.
    pub fn report(&self) -> &DiscoveryReport {
        &self.report
    }

    /// The SMPs the reading took.
    pub fn smps(&self) -> &SmpStats {
        &self.smps
    }

    /// Time since the reading ended.
    pub fn age(&self) -> Duration {
        self.at.elapsed()
    }

    /// Whether a sweep starting now may take this fabric instead of
    /// reading its own: younger than `max_age` (the sweep interval: older
    /// than that, the SM would have looked at the fabric again).
    pub fn is_fresh(&self, max_age: Duration) -> bool {
        self.age() < max_age
    }
}

/// Stage 1: discovers the fabric behind `port`.
pub fn read_fabric(port: &mut dyn SmpPort, options: &SweepOptions, limits: &SweepLimits) -> Result<Discovered, SweepError> {
    let mut client = SmpClient::new(port, options.retries).with_m_keys(options.m_keys.clone());
    let (fabric, report) = discover_within(&mut client, limits)?;
    Ok(Discovered::new(fabric, report, client.stats().clone()))
}

/// Stage 2's result: the fabric with the LIDs it now holds.
pub type Addressed = SweepOutcome;

fn plus(a: &SmpStats, b: &SmpStats) -> SmpStats {
    let mut by_attribute = a.by_attribute.clone();
    for (key, count) in &b.by_attribute {
        *by_attribute.entry(*key).or_default() += count;
    }
    SmpStats {
        sent: a.sent + b.sent,
        answered: a.answered + b.answered,
        retries: a.retries + b.retries,
        unanswered: a.unanswered + b.unanswered,
        malformed: a.malformed + b.malformed,
        error_status: a.error_status + b.error_status,
        by_attribute,
    }
}

/// Which stage sends the LID Sets [`address`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendLids {
    /// [`address`] itself, one Set per port with PortState NoChange: for a
    /// sweep that ends there ([`super::sweep_with`]).
    Now,
    /// [`link`], in the PortInfo Set that also carries the port's link
    /// parameters, arming and partition enforcement: a port then gets one
    /// Set where it got two or three ([`super::program::Riders`]). The
    /// model's PortInfo carries the LID and LMC assigned meanwhile.
    WithLinks,
}

/// Stage 2: completes `discovered` with `memory` (what earlier sweeps
/// knew: a node or link whose SMPs were lost this sweep is kept as it was
/// known, [`discovery::merge`]), clears the PortStateChange bits it saw,
/// assigns LIDs (updating `guid2lid`) and programs them, or leaves them to
/// [`link`] (`send`); `memory` then holds this sweep's fabric. The clears
/// count with discovery's SMPs.
pub fn address(
    port: &mut dyn SmpPort,
    options: &SweepOptions,
    discovered: Discovered,
    guid2lid: &mut Guid2Lid,
    memory: &mut FabricMemory,
    limits: &SweepLimits,
    send: SendLids,
) -> Result<Addressed, SweepError> {
    let Discovered { fabric: mut read, report: mut discovery, smps, .. } = discovered;
    discovery::merge(&mut read, memory, &mut discovery);
    read.incomplete = discovery.incomplete();
    // Nothing is written before this point.
    limits.check()?;
    let mut client = SmpClient::new(port, options.retries).with_m_keys(options.m_keys.clone());
    light::clear_seen_changes(&mut client, &read);
    let cleared = client.stats().clone();
    let discovery_smps = plus(&smps, &cleared);
    let mut fabric = read.clone();
    let lids = assign(&mut fabric, options.lmc, options.reassign_lids, guid2lid);
    let (program, lid_sets, relabelled) = match send {
        SendLids::Now => {
            let program =
                super::lids::program(&mut client, &read, &mut fabric, options.sm_sl, options.client_reregister, &options.reregister_known, options.subnet_prefix);
            (program, LidSets::default(), relabelled_switches(&read, &fabric))
        }
        SendLids::WithLinks => {
            let mut program = ProgramReport::default();
            let sets = LidSets::plan(
                client.m_keys(),
                &read,
                &fabric,
                options.sm_sl,
                options.client_reregister,
                &options.reregister_known,
                options.subnet_prefix,
                &mut program,
            );
            // Known once the Sets are answered ([`link`]).
            (program, sets, Vec::new())
        }
    };
    if program.failed != 0 {
        fabric.incomplete = true;
    }
    let program_smps = client.stats().since(&cleared);
    if let Err(e) = options.m_keys.flush() {
        tracing::error!(error = %e, "M_Key files not written");
    }
    memory.remember(&fabric);
    tracing::info!(
        nodes = fabric.nodes.len(),
        discovery_smps = discovery_smps.sent,
        program_smps = program_smps.sent,
        kept_nodes = discovery.kept_nodes,
        kept_links = discovery.kept_links,
        incomplete = fabric.incomplete,
        "sweep done"
    );
    Ok(SweepOutcome { fabric, lmc: options.lmc, discovery, lids, program, discovery_smps, program_smps, relabelled, lid_sets })
}

/// Switches whose port 0 holds another LID or MasterSMLID in `programmed`
/// than in `read` (the same fabric before LID programming).
fn relabelled_switches(read: &Fabric, programmed: &Fabric) -> Vec<u64> {
    let port0 = |n: &super::FabricNode| n.ports.first().and_then(|p| p.info).map(|i| (i.lid, i.master_sm_lid));
    read.nodes
        .iter()
        .zip(&programmed.nodes)
        .filter(|(r, p)| r.is_switch() && port0(r) != port0(p))
        .map(|(r, _)| r.guid)
        .collect()
}

