//! Routing engines: loading libraries and running the engine chain.

pub mod chain;
pub mod host;
pub mod sandbox;
pub mod wire;
pub mod loader;

pub use chain::{Attempt, ChainError, ChainOutcome, ChainSpec, CreditLoopPolicy, Failure, GateOptions};
pub use loader::{EngineEntry, LoadProblem, Registry};
