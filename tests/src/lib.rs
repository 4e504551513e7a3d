//! Test support for smcore's workspace-level tests and benchmarks.
//!
//! Everything here drives external programs (ibsim, OpenSM, ibdmchk, the
//! `smcore` binary) or reads the files they write, so that the tests judge
//! smcore from the outside, with the same tools an admin would use:
//!
//! * [`ibsim`]: one private `ibsim` per test, its console kept open.
//! * [`opensm`]: `opensm -o -R <engine>` under an [`ibsim::Ibsim`], with its
//!   dumps, its route time and whether the engine asked for really routed.
//! * [`lfts`]: `opensm-lfts.dump` and LID files of any SM, and route quality
//!   computed from them alone.
//! * [`ibdmchk`]: the `ibdmchk` verdict on a dump directory.
//! * [`smcore`]: finding and running the workspace's `smcore` binary.
//! * [`proc`]: waiting for child processes with a deadline.
//! * [`diags`]: fabrics generated into a temporary directory, and the
//!   `name....value` output of infiniband-diags.

pub mod bench;
pub mod diags;
pub mod fabric_check;
pub mod ibdmchk;
pub mod ibsim;
pub mod lfts;
pub mod opensm;
pub mod proc;
pub mod sm_run;
pub mod smcore;

use std::path::PathBuf;

/// Why a helper could not do its job.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on a file or a process failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file did not have the expected format.
    #[error("{file}:{line}: {message}")]
    Parse {
        /// The file (or a name for the text).
        file: String,
        /// 1-based line number, 0 when the problem is not on one line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A program did not reach the expected state in time.
    #[error("{what} did not finish within {secs:.0} s")]
    Timeout {
        /// The program or state waited for.
        what: String,
        /// The deadline in seconds.
        secs: f64,
    },
    /// A program failed or said something we cannot use.
    #[error("{0}")]
    Failed(String),
    /// A required program or build product is missing.
    #[error("{path} not found: {hint}")]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
        /// How to get it.
        hint: String,
    },
}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl From<smcore_test_support::Missing> for Error {
    fn from(m: smcore_test_support::Missing) -> Self {
        let hint = match m.package {
            Some(p) => format!("install the Debian package {p} (.ci/run and scripts/test.sh do)"),
            None => "not installed".to_string(),
        };
        Error::Missing { path: m.what.into(), hint }
    }
}

impl Error {
    /// An [`Error::Io`] with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    /// An [`Error::Parse`].
    pub fn parse(file: impl Into<String>, line: usize, message: impl Into<String>) -> Self {
        Error::Parse { file: file.into(), line, message: message.into() }
    }
}
