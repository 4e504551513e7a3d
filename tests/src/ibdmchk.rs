//! The `ibdmchk` (Debian `ibutils`) verdict on a dump directory.
//!
//! `ibdmchk -s opensm-subnet.lst -f opensm.fdbs -m opensm.mcfdbs [-c
//! smcore-path-sl.psl -d opensm-sl2vl.dump]` rebuilds the fabric from the
//! subnet file, follows the unicast FDBs from every CA port to every CA LID,
//! and, only when all of them arrive, searches the channel dependency graph
//! (one channel per port and VL, the VLs from the path SLs and SL2VL tables
//! when given) for a credit loop. It works on any SM's dumps,
//! which is why tests use it as the judge independent of both SMs.
//!
//! Reading its verdict:
//! * the exit status says nothing once the loop check ran: ibutils 1.5.7
//!   crashes (SIGSEGV) in its clean-up right after printing the verdict;
//! * a fabric it could not read passes vacuously (0 nodes, 0 paths), so a
//!   verdict counts only with nodes defined and paths scanned;
//! * lines of the subnet file it cannot parse only give `-W-` warnings.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::proc::{self, Outcome};
use crate::{Error, Result};

/// What `ibdmchk` concluded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Nodes defined from the subnet file.
    pub nodes: Option<usize>,
    /// CA-to-CA paths scanned (printed only when all were traversed).
    pub paths_scanned: Option<usize>,
    /// CA-to-CA pairs it could not traverse.
    pub connectivity_errors: usize,
    /// `Some(true)`: a credit loop; `Some(false)`: none; `None`: the check
    /// did not run (connectivity failed) or did not finish.
    pub credit_loops: Option<bool>,
    /// Every `-E-` line (message only).
    pub errors: Vec<String>,
    /// Every `-W-` line (message only).
    pub warnings: Vec<String>,
    /// The process was killed for taking too long.
    pub timed_out: bool,
    /// Everything it printed.
    pub output: String,
}

impl Verdict {
    /// The fabric was read and every CA pair traversed.
    pub fn connected(&self) -> bool {
        self.nodes.unwrap_or(0) > 0 && self.paths_scanned.unwrap_or(0) > 0 && self.connectivity_errors == 0
    }

    /// Connected, checked, and loop free (warnings and other errors
    /// aside).
    pub fn loop_free(&self) -> bool {
        self.connected() && self.credit_loops == Some(false)
    }

    /// Connected, checked, loop free, and nothing else complained.
    pub fn is_clean(&self) -> bool {
        self.loop_free() && self.errors.is_empty() && self.warnings.is_empty()
    }

    /// One line for test output.
    pub fn summary(&self) -> String {
        format!(
            "nodes {}, paths {}, connectivity errors {}, credit loops {}, {} errors, {} warnings{}",
            self.nodes.map_or("?".into(), |n| n.to_string()),
            self.paths_scanned.map_or("-".into(), |n| n.to_string()),
            self.connectivity_errors,
            match self.credit_loops {
                Some(true) => "yes",
                Some(false) => "no",
                None => "not checked",
            },
            self.errors.len(),
            self.warnings.len(),
            if self.timed_out { ", timed out" } else { "" }
        )
    }
}

/// Which SL files `ibdmchk` is given along with the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlFiles {
    /// The path-SL (`-c`) and SL2VL (`-d`) files when both are in the dump
    /// directory, neither otherwise. smcore always writes both; OpenSM
    /// writes no path-SL file, so its dumps are checked with every path on
    /// SL 0, as before.
    #[default]
    IfPresent,
    /// Both files, failing with [`Error::Missing`] when one is absent: for
    /// multi-SL engines, whose verdict rests on their SLs.
    Required,
    /// Neither: every path on SL 0. The same tables of a multi-SL engine
    /// then usually show credit loops, which is how tests show that the
    /// SLs are what make the routing loop free.
    Without,
}

/// Check the dumps in `dir` (`opensm-subnet.lst`, `opensm.fdbs`,
/// `opensm.mcfdbs`, and the SL files when present, see
/// [`SlFiles::IfPresent`]). Fails only when a file is missing or the
/// program cannot be started.
pub fn check_dump_dir(dir: impl AsRef<Path>, timeout: Duration) -> Result<Verdict> {
    check_dump_dir_with(dir, SlFiles::IfPresent, timeout)
}

/// [`check_dump_dir`] with an explicit choice of SL files.
pub fn check_dump_dir_with(dir: impl AsRef<Path>, sls: SlFiles, timeout: Duration) -> Result<Verdict> {
    use sm_core::dump::ibdmchk::{ibdmchk_args, IbdmchkOptions};
    use sm_core::dump::{FDBS_FILE, MCFDBS_FILE, PATH_SL_FILE, SL2VL_FILE, SUBNET_FILE};
    let dir = dir.as_ref();
    for f in [SUBNET_FILE, FDBS_FILE, MCFDBS_FILE] {
        if !dir.join(f).is_file() {
            return Err(Error::Missing { path: dir.join(f), hint: "the SM run did not write its dumps".into() });
        }
    }
    let sl_files = [PATH_SL_FILE, SL2VL_FILE];
    let with_sls = match sls {
        SlFiles::Without => false,
        SlFiles::IfPresent => sl_files.iter().all(|f| dir.join(f).is_file()),
        SlFiles::Required => {
            if let Some(f) = sl_files.iter().find(|f| !dir.join(f).is_file()) {
                return Err(Error::Missing {
                    path: dir.join(f),
                    hint: "the SM run did not write the SL files (smcore writes them with --dump-dir)".into(),
                });
            }
            true
        }
    };
    let opts = IbdmchkOptions { path_sl: with_sls, sl2vl: with_sls, ..IbdmchkOptions::default() };
    let mut cmd = Command::new(smcore_test_support::find_tool("ibdmchk")?);
    proc::die_with_parent(&mut cmd);
    let mut child = cmd
        .args(ibdmchk_args(dir, &opts))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("starting ibdmchk (Debian package ibutils)", e))?;
    let out = child.stdout.take().map(proc::drain);
    let err = child.stderr.take().map(proc::drain);
    let outcome = proc::wait_with_timeout(&mut child, timeout, Duration::from_secs(1))?;
    let mut text = proc::collect(out);
    text.push_str(&proc::collect(err));
    let mut v = parse_output(&text);
    v.timed_out = outcome == Outcome::TimedOut;
    Ok(v)
}

/// [`check_dump_dir_with`], failing (with the verdict and ibdmchk's output)
/// unless the dumps are connected and loop free.
pub fn require_loop_free(dir: impl AsRef<Path>, sls: SlFiles, timeout: Duration) -> Result<Verdict> {
    let dir = dir.as_ref();
    let v = check_dump_dir_with(dir, sls, timeout)?;
    if !v.loop_free() {
        return Err(Error::Failed(format!("ibdmchk on {} ({sls:?}): {}\n{}", dir.display(), v.summary(), v.output)));
    }
    Ok(v)
}

/// Parse `ibdmchk`'s verification output (stdout and stderr together) with
/// the SM's own reader (`sm_core::dump::ibdmchk`).
pub fn parse_output(text: &str) -> Verdict {
    use sm_core::dump::ibdmchk::{parse_ibdmchk_output, CreditLoops};
    let r = parse_ibdmchk_output(text);
    let connectivity_errors = r.missing_paths.map_or(0, |(m, _)| m).max(r.unreachable.len());
    Verdict {
        nodes: r.nodes,
        paths_scanned: r.ca_paths_scanned,
        connectivity_errors,
        credit_loops: match r.credit_loops {
            CreditLoops::Free => Some(false),
            CreditLoops::Found(_) => Some(true),
            CreditLoops::NotChecked => None,
        },
        errors: r.errors,
        warnings: r.warnings,
        timed_out: false,
        output: r.output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean() {
        let v = parse_output(
            "-I- Defined 22/22 systems/nodes \n-I- Verifying all CA to CA paths ... \n\
             -I- Scanned:240 CA to CA paths \n-I- Analyzing Fabric for Credit Loops 1 SLs, 1 VLs used.\n\
             -I- no credit loops found\n",
        );
        assert_eq!((v.nodes, v.paths_scanned, v.credit_loops), (Some(22), Some(240), Some(false)));
        assert!(v.is_clean(), "{}", v.summary());
    }

    #[test]
    fn unreachable_pairs() {
        let v = parse_output(
            "-I- Defined 6/6 systems/nodes\n-E- Fail to find a path from:S1/U1/1 to:S4/U1/1\n\
             -E- Found 2 missing paths out of:12 paths\n-E- Some Point to Point Traversals Failed.\n",
        );
        assert_eq!(v.connectivity_errors, 2);
        assert_eq!(v.credit_loops, None);
        assert!(!v.connected());
    }

    #[test]
    fn empty_fabric_is_not_a_pass() {
        let v =
            parse_output("-I- Defined 0/0 systems/nodes\n-I- Scanned:0 CA to CA paths\n-I- no credit loops found\n");
        assert!(!v.connected() && !v.is_clean());
    }

    #[test]
    fn credit_loop() {
        let v = parse_output(
            "-I- Defined 8/8 systems/nodes\n-I- Scanned:12 CA to CA paths\n\
             Found credit loop on: S01/U1/P2 VL: 0\n-E- credit loops in routing\n",
        );
        assert_eq!(v.credit_loops, Some(true));
        assert!(v.connected() && !v.is_clean());
    }

    #[test]
    fn required_sl_files_must_be_there() {
        let tmp = tempfile::tempdir().unwrap();
        for f in ["opensm-subnet.lst", "opensm.fdbs", "opensm.mcfdbs", "opensm-sl2vl.dump"] {
            std::fs::write(tmp.path().join(f), "").unwrap();
        }
        match check_dump_dir_with(tmp.path(), SlFiles::Required, Duration::from_secs(5)) {
            Err(Error::Missing { path, .. }) => assert!(path.ends_with("smcore-path-sl.psl"), "{}", path.display()),
            other => panic!("expected the missing path-SL file, got {other:?}"),
        }
    }
}
