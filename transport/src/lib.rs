//! # sm-transport — how the SM reaches the fabric
//!
//! The lowest layer of the data flow (design.md): [`port::SmpPort`] is the
//! transport, one trait every way of reaching a fabric implements (the
//! kernel's umad device in `sm-umad`, the embedded simulated fabric in
//! `sm-sim`, and the wrappers tests and the standby put around either);
//! [`port::SmpClient`] is what discovery and programming talk to: it
//! stamps transaction IDs, retries, checks answers and counts SMPs;
//! [`mkey`] gives each SMP the M_Key of the port it reaches; [`window`] is
//! the adaptive window of SMPs a transport keeps in flight; [`gmp`] carries
//! the general MADs (SA, PMA, Reports) through a [`gmp::GmpAgent`] and the
//! SM's [`gmp::GmpSender`]; [`fault::FaultInjector`] wraps any of them to
//! lose and corrupt MADs; [`readonly::ReadOnly`] wraps an SMP port so
//! that only SubnGets reach the fabric (shadow mode, cabling checks).
//!
//! Nothing here knows the fabric model, the routing or the configuration
//! file: those sit above and depend on this crate, never the other way.

pub mod fault;
pub mod gmp;
pub mod mkey;
pub mod port;
pub mod readonly;
pub mod window;

pub use fault::{FaultInjector, FaultStats, Faults};
pub use gmp::{GmpAgent, GmpSender, IncomingMad};
pub use mkey::{guid2mkey_path, MKeyConfig, MKeyError, MKeys};
pub use readonly::{ReadOnly, ReadOnlyStats};
pub use port::{Outgoing, SmpClient, SmpError, SmpOp, SmpPort, SmpStats, TransportError, TrapMad};
