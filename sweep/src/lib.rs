//! # One sweep: discovery, LID assignment, PortInfo programming
//!
//! The first stages of design.md's "Data flow of one sweep": SMPs go out
//! through an [`SmpPort`], [`discovery`] builds the core model
//! ([`Fabric`]), [`lids`] decides and programs the LIDs, and
//! [`Fabric::snapshot`] hands the result to the engine chain as a
//! [`FabricSnapshot`](sm_abi::FabricSnapshot).
//!
//! [`program`](mod@program) writes the accepted routing (SwitchInfo, LFT blocks) and
//! brings ports up; [`stages`] is the full sweep stage by stage, and
//! [`once`] all of them in a row.
//!
//! [`light`] is the cheap check between heavy sweeps; the loop that
//! drives both is [`crate::daemon`].

pub mod discovery;
pub mod incremental;
pub mod light;
pub mod lids;
pub mod pkey;
pub mod port_info;
pub mod program;
pub mod stages;
pub mod vl;

// The transport layer lives in its own crate (sm-transport); its modules
// keep their old paths here for the sweep's callers.
pub use sm_transport::port as transport;
pub use sm_transport::{mkey, window};

pub use mkey::{guid2mkey_path, MKeyConfig, MKeyError, MKeys};
pub use sm_model::text;
pub use sm_model::{escaped, Escaped};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

pub use discovery::{
    discover, discover_within, DiscoveryReport, Fabric, FabricMemory, FabricNode, FabricPort, SweepError, SweepLimits,
};
pub use lids::{assign, program, Guid2Lid, Guid2LidError, LidAssignment, LidSet, LidSets, ProgramReport};
pub use program::{activate_ports, program_routing, HeldTables, PhaseReport, RoutingProgramReport};
pub use stages::Discovered;
pub use transport::{Outgoing, SmpClient, SmpError, SmpOp, SmpPort, SmpStats, TransportError, TrapMad};

/// Settings of one sweep.
#[derive(Debug, Clone)]
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
    /// Never set ClientReregister, whatever `client_reregister` says
    /// (OpenSM `no_clients_rereg`).
    pub no_clients_rereg: bool,
    /// End ports (port GUIDs) whose SA state the new master restored
    /// (`sa_db_file`): not asked to re-register by `client_reregister`,
    /// since their groups, services and subscriptions are there already.
    pub reregister_known: Arc<std::collections::HashSet<u64>>,
    /// GID prefix written to every port (OpenSM `subnet_prefix`): ports
    /// that reset to another (ibsim's 0) would have GIDs no SA client can
    /// use.
    pub subnet_prefix: u64,
    /// M_Key settings and known keys, shared by every client of the SM
    /// (default: off).
    pub m_keys: MKeys,
    /// Set (by a signal handler) to end the sweep early. Checked between
    /// rounds of discovery and between the phases before programming: a
    /// sweep stopped there ends with [`SweepError::Stopped`] having written
    /// nothing of its routing. Once the LFTs are being written, the sweep
    /// finishes programming (LFTs, SL2VL/VLArb, port states), so a switch
    /// is never left with half a routing.
    pub stop: Option<Arc<AtomicBool>>,
    /// Time a sweep may take up to the start of programming; past it the
    /// sweep ends with [`SweepError::OverBudget`] and programs nothing.
    /// `None`: no limit.
    pub budget: Option<Duration>,
    /// SL2VL tables of a switch that takes it are written with one
    /// AllInputPorts Set per output port (OpenSM `use_optimized_slvl`).
    pub optimized_sl2vl: bool,
    /// SL2VL Sets a port refuses (MAD status) are not logged as warnings
    /// (OpenSM `suppress_sl2vl_mad_status_errors`).
    pub suppress_sl2vl_status_errors: bool,
}

/// OpenSM's default `subnet_prefix`: the link-local prefix fe80::/64.
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// What a sweep may take before programming, by default: silent nodes cost
/// one timeout per discovery round, so a sweep that takes this long is
/// stuck, not busy.
pub const DEFAULT_SWEEP_BUDGET: Duration = Duration::from_secs(120);

impl PartialEq for SweepOptions {
    fn eq(&self, other: &Self) -> bool {
        let same_stop = match (&self.stop, &other.stop) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_stop
            && self.lmc == other.lmc
            && self.reassign_lids == other.reassign_lids
            && self.retries == other.retries
            && self.sm_sl == other.sm_sl
            && self.client_reregister == other.client_reregister
            && self.no_clients_rereg == other.no_clients_rereg
            && self.reregister_known == other.reregister_known
            && self.subnet_prefix == other.subnet_prefix
            && self.budget == other.budget
            && self.optimized_sl2vl == other.optimized_sl2vl
            && self.suppress_sl2vl_status_errors == other.suppress_sl2vl_status_errors
    }
}

impl Eq for SweepOptions {}

impl SweepOptions {
    /// The limits of a sweep starting now.
    pub fn limits(&self) -> SweepLimits {
        SweepLimits::new(self.stop.clone(), self.budget)
    }
}

impl Default for SweepOptions {
    fn default() -> Self {
        Self {
            lmc: 0,
            reassign_lids: false,
            retries: sm_transport::port::DEFAULT_TRANSACTION_RETRIES,
            sm_sl: 0,
            client_reregister: false,
            no_clients_rereg: false,
            reregister_known: Arc::default(),
            subnet_prefix: DEFAULT_SUBNET_PREFIX,
            m_keys: MKeys::off(),
            stop: None,
            budget: Some(DEFAULT_SWEEP_BUDGET),
            optimized_sl2vl: false,
            suppress_sl2vl_status_errors: false,
        }
    }
}

/// What one sweep found and did, with its SMP figures per phase.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    /// The fabric with the LIDs it now holds.
    pub fabric: Fabric,
    /// The LMC the LIDs were assigned with.
    pub lmc: u8,
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
    /// Switches (node GUID) whose port 0 this sweep gave another LID or
    /// MasterSMLID: their other ports may report the new values, which
    /// the fabric does not hold until they are read again
    /// ([`incremental`] reads them at its next sweep).
    pub relabelled: Vec<u64>,
    /// LID Sets stage 2 decided and left to stage 3's Sets
    /// ([`stages::SendLids::WithLinks`]); empty once those ran, and when
    /// stage 2 sent them itself.
    pub lid_sets: lids::LidSets,
}

impl SweepOutcome {
    /// All SMPs of the sweep.
    pub fn total_smps(&self) -> u64 {
        self.discovery_smps.sent + self.program_smps.sent
    }
}

/// Discovers the fabric behind `port`, assigns LIDs (updating `guid2lid`)
/// and programs them. Fails only when the SM's own node does not answer
/// (or the options' stop flag or budget end it before programming).
pub fn sweep(
    port: &mut dyn SmpPort,
    options: &SweepOptions,
    guid2lid: &mut Guid2Lid,
) -> Result<SweepOutcome, SweepError> {
    sweep_with(port, options, guid2lid, &mut FabricMemory::default(), &options.limits())
}

/// [`sweep`] completed with `memory`, what earlier sweeps knew: a node or
/// link whose SMPs were lost this sweep is kept as it was known
/// ([`discovery::merge`]), and `memory` then holds this sweep's fabric.
pub fn sweep_with(
    port: &mut dyn SmpPort,
    options: &SweepOptions,
    guid2lid: &mut Guid2Lid,
    memory: &mut FabricMemory,
    limits: &SweepLimits,
) -> Result<SweepOutcome, SweepError> {
    let discovered = stages::read_fabric(port, options, limits)?;
    stages::address(port, options, discovered, guid2lid, memory, limits, stages::SendLids::Now)
}
