//! # Subnet administration (IBA chapter 15)
//!
//! The SA answers queries on QP1 about the fabric the last heavy sweep
//! found and the routing it programmed:
//!
//! - [`db`]: [`SaDb`], the snapshot a sweep publishes — NodeRecords,
//!   PortInfoRecords, LinkRecords, SwitchInfoRecords, LFTRecords and the
//!   SL2VL and VLArb tables the routing programmed as wire bytes, plus what PathRecords need (LFTs, links with MTU and rate, the
//!   routing's path-SL oracle);
//! - [`path`]: PathRecord queries, walked through the LFTs, with the SL the
//!   engine gives each path;
//! - [`mcmember`]: MCMemberRecord joins, leaves and queries over the core's
//!   multicast groups;
//! - [`service`]: ServiceRecords registered with a lease, per-port quota
//!   and owner-only delete;
//! - [`inform`]: InformInfo subscriptions and the Reports for traps 64–67;
//! - [`handler`]: [`Sa::handle`], one MAD in, one answer out, with IBA's
//!   statuses for everything it does not serve;
//! - [`persist`]: the registrations saved to OpenSM's sa_db file and read
//!   back at start;
//! - [`server`]: the thread that serves the SM port's SA queue;
//! - [`client`]: the host's side, the queries a client sends.
//!
//! GetTable answers are one long MAD with an RMPP header for a single
//! transfer, exactly as long as its records (clients count records by
//! length); the kernel's RMPP agent segments it (umad2sim passes only the
//! first 256 bytes).

mod access;
pub mod alias;
pub mod client;
pub mod db;
pub mod handler;
pub mod inform;
pub mod mcmember;
pub mod path;
pub mod persist;
pub mod server;
pub mod service;

pub use db::{EndPort, SaDb};
pub use handler::{Answer, Sa, SaConfig};
pub use inform::{Report, Subscription, Subscriptions};
pub use path::PathDefaults;
pub use persist::{PersistError, SaState};
pub use server::{spawn, Responder, SaHandle};
pub use service::{ServiceLimits, Services};
