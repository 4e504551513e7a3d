//! # sm-core — the smcore subnet manager library
//!
//! The core discovers the fabric, assigns LIDs, hands a
//! [`FabricSnapshot`](sm_abi::FabricSnapshot) to the engine chain, verifies
//! the result and programs (or, offline, dumps) it. It never computes routes
//! itself: every routing engine is a shared library loaded through `sm-abi`.

pub mod cabling;
pub mod cc;
pub mod config;
pub mod control;
pub mod daemon;
pub mod doctor;
pub mod dump;
pub mod embedded;
pub mod engines;
pub mod explain;
pub(crate) mod listener;
pub mod logging;
pub mod manpages;
pub mod mcast;
pub mod metrics;
pub mod node_names;
pub mod offline;
pub mod perfmgr;
pub mod pipeline;
pub mod pidfile;
pub mod qos;
pub mod report;
pub mod routing;
pub mod sa;
pub mod settings;
pub mod shadow;
/// The embedded simulated fabric (crate sm-sim), a peer of the umad
/// transport behind the same trait.
pub use sm_sim as sim;
pub mod standby;
pub mod sweep;
pub mod ucast_cache;

// Partitions (partitions.conf, resolved into P_Key tables) are a crate of
// their own below the core; the old path stays for callers.
pub use sm_partition as partition;

// Safe file replacement, a crate of its own at the bottom.
pub use sm_fs as safe_fs;
