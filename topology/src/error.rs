//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong reading, checking, generating or numbering
/// a topology.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A topology file (or string) is malformed. `origin` is the path or the
    /// name given to [`crate::parse_str`], `line` is 1-based.
    #[error("{origin}:{line}: {message}")]
    Parse {
        /// File path or name of the parsed text.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong, naming the node and port involved.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The topology breaks a structural rule (see [`crate::Topology::validate`]).
    #[error("invalid topology: {0}")]
    Invalid(String),
    /// A generator was asked for something impossible (port counts above 255,
    /// too few free ports for the requested links, ...).
    #[error("cannot generate topology: {0}")]
    Generator(String),
    /// The fabric needs more unicast LIDs than InfiniBand has.
    #[error(
        "LID space exhausted: {node:?} needs LIDs up to {needed:#x} but the highest unicast LID is 0xbfff"
    )]
    LidSpace {
        /// Name of the node whose LID block did not fit.
        node: String,
        /// Highest LID it would have needed.
        needed: u32,
    },
}

impl TopologyError {
    pub(crate) fn parse(origin: &str, line: usize, message: impl Into<String>) -> Self {
        TopologyError::Parse { origin: origin.to_string(), line, message: message.into() }
    }
}
