//! Routing engines: loading libraries and running the engine chain.

pub mod chain;
pub mod loader;
pub mod shared_sl;

pub use chain::{Attempt, ChainError, ChainOutcome, ChainSpec, CreditLoopPolicy, Failure, GateOptions};
pub use loader::{EngineEntry, LoadProblem, Registry};
