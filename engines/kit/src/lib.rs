//! # smcore-kit — the engine kit
//!
//! Shared building blocks for smcore routing engines, linked into each
//! engine library (engines depend on `sm-abi` and this crate only):
//!
//! * [`graph`] — an index-based routing view of a
//!   [`FabricSnapshot`](sm_abi::FabricSnapshot): dense switch numbers, usable
//!   links, LID → port table, BFS and all-pairs switch distances.
//! * [`balance`] — OpenSM's LFT port selection (least hops, then the port
//!   with the fewest routes, LMC-aware system/node spreading), driven by any
//!   [`HopTable`](balance::HopTable) so that min-hop, up/down and
//!   dimension-ordered engines share it.
//! * [`verify`](mod@verify) — the route verifier the core runs on every result before it
//!   is programmed: reachability, forwarding loops, path lengths, link load
//!   and credit loops per VL.
//! * [`conformance`] — the same checks packaged as conformance tests over
//!   generated fabrics of every family, for engine authors.
//! * [`cdg`] — channel dependency graphs kept acyclic incrementally (a
//!   dynamic topological order), for engines that spread routes over
//!   deadlock-free virtual layers.
//! * [`continuity`] — a re-route after a change that keeps every previous
//!   LFT entry still valid under the engine's rule, routes what broke and
//!   rebalances only where the kept routes overload a link.
//! * [`weights`] — OpenSM's hop weights (`hop_weights_file`) as a
//!   [`HopTable`](balance::HopTable).
//! * [`config`] — parsing of the engine's TOML configuration text.
//! * [`lfts_file`] — reading `opensm-lfts.dump` and `ibroute` output (the
//!   `file` engine's input) and writing `opensm-lfts.dump`.
//! * [`renumber`] — the same fabric with nodes or GUIDs numbered
//!   differently, to check that a routing does not hang on numbering.
//! * `strategy` (feature `proptest-fabrics`) — proptest strategies that
//!   draw random fabrics of every family, for engines' property tests.

pub mod balance;
mod cache;
pub mod cdg;
pub mod config;
pub mod conformance;
pub mod churn;
pub mod continuity;

pub mod graph;
pub mod lfts_file;
pub mod renumber;
#[cfg(feature = "proptest-fabrics")]
pub mod strategy;
pub mod verify;
pub mod weights;

pub use graph::Graph;
pub use verify::{verify, verify_with_mcast, McastRoute, Verification, VerifyOptions};
