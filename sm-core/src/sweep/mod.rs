//! # One sweep: discovery, LID assignment, PortInfo programming
//!
//! The first stages of design.md's "Data flow of one sweep": SMPs go out
//! through an [`SmpPort`], [`discovery`] builds the core model
//! ([`Fabric`]), [`lids`] decides and programs the LIDs, and
//! [`Fabric::snapshot`] hands the result to the engine chain as a
//! [`FabricSnapshot`](sm_abi::FabricSnapshot).
//!
//! [`program`](mod@program) writes the accepted routing (SwitchInfo, LFT blocks) and
//! brings ports up; [`once`] is the whole full sweep.
//!
//! [`light`] is the cheap check between heavy sweeps; the loop that
//! drives both is [`crate::daemon`].

pub mod discovery;
pub mod light;
pub mod lids;
pub mod mkey;
pub mod program;
pub mod transport;
pub mod umad;
pub mod vl;

pub use discovery::{discover, DiscoveryReport, Fabric, FabricNode, FabricPort};
pub use mkey::{guid2mkey_path, MKeyConfig, MKeyError, MKeys};
pub use lids::{assign, program, Guid2Lid, Guid2LidError, LidAssignment, ProgramReport};
pub use program::{
    activate_ports, once, program_routing, HeldTables, OnceError, OnceOptions, OnceOutcome, PhaseReport,
    RoutingProgramReport,
};
pub use transport::{Outgoing, SimPort, SmpClient, SmpError, SmpOp, SmpPort, SmpStats, TransportError, TrapMad};
pub use umad::{GsiClient, IncomingMad, MadSender, UmadDevice, UmadPort};

/// Settings of one sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepOptions {
    /// Subnet LMC: end ports get `2^lmc` LIDs.
    pub lmc: u8,
    /// Forget held LIDs and `guid2lid`; number the fabric afresh.
    pub reassign_lids: bool,
    /// Extra tries of an unanswered SMP.
    pub retries: u32,
    /// MasterSMSL written to every port.
    pub sm_sl: u8,
    /// Set ClientReregister on every end port that supports it: the first
    /// sweep of an SM that just became master, whose SA knows none of the
    /// clients' multicast joins and subscriptions (IBA 14.4.11).
    pub client_reregister: bool,
    /// M_Key settings and known keys, shared by every client of the SM
    /// (default: off).
    pub m_keys: MKeys,
}

impl Default for SweepOptions {
    fn default() -> Self {
        Self {
            lmc: 0,
            reassign_lids: false,
            retries: crate::config::DEFAULT_TRANSACTION_RETRIES,
            sm_sl: 0,
            client_reregister: false,
            m_keys: MKeys::off(),
        }
    }
}

/// What one sweep found and did, with its SMP figures per phase.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    /// The fabric with the LIDs it now holds.
    pub fabric: Fabric,
    /// What went wrong during discovery (also logged).
    pub discovery: DiscoveryReport,
    /// Where the LIDs came from.
    pub lids: LidAssignment,
    /// What programming sent.
    pub program: ProgramReport,
    /// SMPs of discovery.
    pub discovery_smps: SmpStats,
    /// SMPs of LID programming.
    pub program_smps: SmpStats,
}

impl SweepOutcome {
    /// All SMPs of the sweep.
    pub fn total_smps(&self) -> u64 {
        self.discovery_smps.sent + self.program_smps.sent
    }
}

/// Discovers the fabric behind `port`, assigns LIDs (updating `guid2lid`)
/// and programs them. Fails only when the SM's own node does not answer.
pub fn sweep(
    port: &mut dyn SmpPort,
    options: &SweepOptions,
    guid2lid: &mut Guid2Lid,
) -> Result<SweepOutcome, SmpError> {
    let mut client = SmpClient::new(port, options.retries).with_m_keys(options.m_keys.clone());
    let (read, discovery) = discover(&mut client)?;
    light::clear_seen_changes(&mut client, &read);
    let discovery_smps = client.stats().clone();
    let mut fabric = read.clone();
    let lids = assign(&mut fabric, options.lmc, options.reassign_lids, guid2lid);
    let program = program(&mut client, &read, &mut fabric, options.sm_sl, options.client_reregister);
    let program_smps = client.stats().since(&discovery_smps);
    if let Err(e) = options.m_keys.flush() {
        tracing::error!(error = %e, "M_Key files not written");
    }
    tracing::info!(
        nodes = fabric.nodes.len(),
        discovery_smps = discovery_smps.sent,
        program_smps = program_smps.sent,
        "sweep done"
    );
    Ok(SweepOutcome {
        fabric,
        discovery,
        lids,
        program,
        discovery_smps,
        program_smps,
    })
}
