//! Cross-checking a dump directory with `ibdmchk` (Debian `ibutils`).
//!
//! `ibdmchk` in verification mode rebuilds the fabric from
//! `opensm-subnet.lst` (`-s`), loads the LFTs from `opensm.fdbs` (`-f`) and
//! the MFTs from `opensm.mcfdbs` (`-m`), optionally path SLs (`-c`) and
//! SL2VL tables (`-d`), then
//!
//! 1. follows the LFTs from every CA port to every CA LID and reports each
//!    pair it cannot reach (`-E- Fail to find a path from:... to:...`,
//!    `-E- Some Point to Point Traversals Failed.`); on any failure it exits
//!    with status 1 *before* the credit-loop stage;
//! 2. builds the channel dependency graph of the CA-to-CA paths, one channel
//!    per (port, VL), and searches it for a cycle: `-I- no credit loops
//!    found` or `Found credit loop on: ...` + `-E- credit loops in routing`.
//!
//! Reading the verdict needs care:
//!
//! * The exit status is useless past stage 1: ibutils 1.5.7 crashes with
//!   SIGSEGV in its clean-up right after printing the credit-loop verdict,
//!   so a clean run "fails" with signal 11 (shell status 139).
//! * An empty or unparsable fabric passes: with no nodes it scans 0 paths
//!   and finds no loop. A verdict only counts when nodes were defined and
//!   paths were scanned.
//! * Lines of `opensm-subnet.lst` it cannot parse are skipped with a `-W-
//!   Wrong syntax code` warning, silently dropping links; warnings count as
//!   failures here.
//!
//! Which pairs it checks: by default CA (and router) ports only, as sources
//! and destinations, every base LID to every base LID (all `2^lmc × 2^lmc`
//! combinations with LMC). Switch LIDs are left out of both checks unless
//! `-a` is given ([`IbdmchkOptions::all_paths`]); then switch-sourced paths
//! start at the LFT's output port. Even with `-a` the cycle search starts
//! only from CA port channels, so a cycle made solely of switch-to-switch
//! dependencies that no CA path touches can go unreported. Multicast
//! dependencies join the graph only with `-M`.
//!
//! The path SL comes from the *source node* (not port) and destination LID;
//! the first hop runs on VL = SL and every switch maps (in port, out port,
//! SL) to the next VL. A source node listed in the path-SL file with a
//! missing destination, or a switch listed in the SL2VL file with a missing
//! (in, out) pair, breaks the credit-loop stage (`-E- Fail to build
//! dependency graphs.`).
//!
//! LMC > 0 does not work with OpenSM-style LIDs: `ibdmchk` walks LIDs from 1
//! in steps of `2^lmc` and takes each as a base LID, while OpenSM aligns CA
//! base LIDs to multiples of `2^lmc` and packs switches (LMC 0) in between,
//! so `-l 1` on an OpenSM subnet fails with "un-assigned hops". Check LMC 0
//! routings, or expect that failure.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{FDBS_FILE, MCFDBS_FILE, PATH_SL_FILE, SL2VL_FILE, SUBNET_FILE};

/// How to run `ibdmchk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbdmchkOptions {
    /// Subnet LMC (`-l`); see the module notes before using more than 0.
    pub lmc: u8,
    /// Pass the path-SL file (`-c`).
    pub path_sl: bool,
    /// Pass the SL2VL file (`-d`).
    pub sl2vl: bool,
    /// Check switch LIDs too (`-a`).
    pub all_paths: bool,
    /// Include multicast in the credit-loop analysis (`-M`).
    pub multicast: bool,
}

impl Default for IbdmchkOptions {
    fn default() -> Self {
        IbdmchkOptions { lmc: 0, path_sl: true, sl2vl: true, all_paths: false, multicast: false }
    }
}

/// The command-line arguments for checking the dumps in `dir`.
pub fn ibdmchk_args(dir: &Path, opts: &IbdmchkOptions) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut file = |flag: &str, name: &str| {
        args.push(flag.into());
        args.push(dir.join(name).into_os_string());
    };
    file("-s", SUBNET_FILE);
    file("-f", FDBS_FILE);
    file("-m", MCFDBS_FILE);
    if opts.path_sl {
        file("-c", PATH_SL_FILE);
    }
    if opts.sl2vl {
        file("-d", SL2VL_FILE);
    }
    if opts.lmc != 0 {
        args.push("-l".into());
        args.push(opts.lmc.to_string().into());
    }
    if opts.all_paths {
        args.push("-a".into());
    }
    if opts.multicast {
        args.push("-M".into());
    }
    args
}

/// Where `ibdmchk` is on `PATH`, if it is.
pub fn find_ibdmchk() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("ibdmchk")).find(|p| p.is_file())
}

/// Run `ibdmchk` on the dumps in `dir` and parse what it prints. Fails only
/// when the program cannot be started.
pub fn run_ibdmchk(dir: &Path, opts: &IbdmchkOptions) -> io::Result<IbdmchkReport> {
    let out = Command::new("ibdmchk").args(ibdmchk_args(dir, opts)).current_dir(dir).output()?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let mut report = parse_ibdmchk_output(&text);
    report.exit_code = out.status.code();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        report.signal = out.status.signal();
    }
    Ok(report)
}

/// Outcome of the credit-loop stage.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CreditLoops {
    /// The stage did not run or did not finish (an earlier failure, or it
    /// could not build the dependency graph).
    #[default]
    NotChecked,
    /// `-I- no credit loops found`.
    Free,
    /// `-E- credit loops in routing`, with the channels of the loop as
    /// printed (`S<guid>/U1/P<port> VL: <vl>`), first the one where the cycle
    /// closed, then the way back.
    Found(Vec<String>),
}

/// What `ibdmchk` reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IbdmchkReport {
    /// Nodes built from the subnet file (`-I- Defined S/N systems/nodes`).
    pub nodes: Option<usize>,
    /// Unicast FDB entries read and the switches they belong to.
    pub fdb_entries: Option<(usize, usize)>,
    /// CA-to-CA paths traversed (`-I- Scanned:N CA to CA paths`); absent
    /// when some failed.
    pub ca_paths_scanned: Option<usize>,
    /// `(missing, total)` from `-E- Found M missing paths out of:N paths`.
    pub missing_paths: Option<(usize, usize)>,
    /// `(from, to)` port names of each pair that could not be traversed.
    pub unreachable: Vec<(String, String)>,
    /// SLs and VLs the credit-loop analysis used.
    pub sls_vls: Option<(usize, usize)>,
    /// The credit-loop verdict.
    pub credit_loops: CreditLoops,
    /// Every `-E-` line.
    pub errors: Vec<String>,
    /// Every `-W-` line.
    pub warnings: Vec<String>,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal that ended it, when one did (SIGSEGV after the verdict is
    /// normal for ibutils 1.5.7).
    pub signal: Option<i32>,
    /// Everything it printed.
    pub output: String,
}

impl IbdmchkReport {
    /// A non-empty fabric whose CA-to-CA paths were all traversed.
    pub fn routes_ok(&self) -> bool {
        self.nodes.unwrap_or(0) > 0
            && self.ca_paths_scanned.unwrap_or(0) > 0
            && self.unreachable.is_empty()
            && self.missing_paths.is_none()
            && !self.errors.iter().any(|e| e.contains("Traversals Failed"))
    }

    /// The credit-loop stage ran and found no loop.
    pub fn credit_loop_free(&self) -> bool {
        self.credit_loops == CreditLoops::Free
    }

    /// The credit-loop stage ran and found a loop.
    pub fn has_credit_loop(&self) -> bool {
        matches!(self.credit_loops, CreditLoops::Found(_))
    }

    /// Routes complete, no credit loop, no error and no warning.
    pub fn is_clean(&self) -> bool {
        self.routes_ok()
            && self.credit_loop_free()
            && self.errors.is_empty()
            && self.warnings.is_empty()
    }
}

/// Parse `ibdmchk`'s verification-mode output (stdout and stderr together).
pub fn parse_ibdmchk_output(text: &str) -> IbdmchkReport {
    let mut r = IbdmchkReport { output: text.to_string(), ..Default::default() };
    let mut loop_trace: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("-I- Defined ") {
            if let Some(counts) = rest.strip_suffix(" systems/nodes") {
                r.nodes = counts.split('/').nth(1).and_then(|n| n.trim().parse().ok());
            } else if let Some((n, sw)) = rest.split_once(" fdb entries for:") {
                // The multicast line reads "... Multicast Fdb entries ...".
                if let (Ok(n), Ok(sw)) =
                    (n.trim().parse(), sw.trim_end_matches(" switches").trim().parse())
                {
                    r.fdb_entries = Some((n, sw));
                }
            }
        } else if let Some(rest) = line.strip_prefix("-I- Scanned:") {
            r.ca_paths_scanned = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        } else if let Some(rest) = line.strip_prefix("-I- Analyzing Fabric for Credit Loops ") {
            let nums: Vec<usize> =
                rest.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect();
            if let [sls, vls, ..] = nums[..] {
                r.sls_vls = Some((sls, vls));
            }
        } else if line == "-I- no credit loops found" {
            r.credit_loops = CreditLoops::Free;
        } else if let Some(ch) = line.strip_prefix("Found credit loop on: ") {
            loop_trace.push(ch.to_string());
        } else if let Some(ch) = line.trim_start().strip_prefix("- BT credit loop through: ") {
            loop_trace.push(ch.to_string());
        }

        if let Some(msg) = line.strip_prefix("-E- ") {
            if let Some(rest) = msg.strip_prefix("Fail to find a path from:") {
                if let Some((from, to)) = rest.split_once(" to:") {
                    r.unreachable.push((from.to_string(), to.to_string()));
                }
            } else if let Some(rest) = msg.strip_prefix("Found ") {
                if let Some((m, n)) = rest.split_once(" missing paths out of:") {
                    if let (Ok(m), Ok(n)) = (m.parse(), n.trim_end_matches(" paths").parse()) {
                        r.missing_paths = Some((m, n));
                    }
                }
            } else if msg == "credit loops in routing" {
                r.credit_loops = CreditLoops::Found(std::mem::take(&mut loop_trace));
            }
            r.errors.push(msg.to_string());
        } else if let Some(msg) = line.strip_prefix("-W- ") {
            r.warnings.push(msg.to_string());
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "\
-I- Parsing Subnet file:opensm-subnet.lst
-I- Defined 6/6 systems/nodes 
-I- Parsing FDBs file:opensm.fdbs
-I- Defined 12 fdb entries for:2 switches
-I- Parsing Multicast FDBs file:opensm.mcfdbs
-I- Defined 0 Multicast Fdb entries for:0 switches
-I- Verifying all CA to CA paths ... 
-I- Scanned:12 CA to CA paths 
-I- Using full credit loop check.
-I- Analyzing Fabric for Credit Loops 1 SLs, 1 VLs used.
-I- no credit loops found
";

    #[test]
    fn clean_run() {
        let r = parse_ibdmchk_output(CLEAN);
        assert_eq!(r.nodes, Some(6));
        assert_eq!(r.fdb_entries, Some((12, 2)));
        assert_eq!(r.ca_paths_scanned, Some(12));
        assert_eq!(r.sls_vls, Some((1, 1)));
        assert!(r.is_clean(), "{r:?}");
    }

    #[test]
    fn empty_fabric_is_not_clean() {
        let text = CLEAN.replace("6/6", "0/0").replace("Scanned:12", "Scanned:0");
        assert!(!parse_ibdmchk_output(&text).is_clean());
    }

    #[test]
    fn loop_and_unreachable() {
        let r = parse_ibdmchk_output(
            "-I- Defined 8/8 systems/nodes\n-I- Scanned:12 CA to CA paths\n\
             Found credit loop on: S01/U1/P2 VL: 0\n  - BT credit loop through: S02/U1/P2 VL: 0\n\
             -E- credit loops in routing\n",
        );
        assert_eq!(
            r.credit_loops,
            CreditLoops::Found(vec!["S01/U1/P2 VL: 0".into(), "S02/U1/P2 VL: 0".into()])
        );
        assert!(r.routes_ok() && !r.is_clean());

        let r = parse_ibdmchk_output(
            "-I- Defined 6/6 systems/nodes\n-E- Unassigned LFT for lid:6 Dead end at:S01/U1\n\
             -E- Fail to find a path from:S10/U1/1 to:S40/U1/1\n\
             -E- Found 2 missing paths out of:12 paths\n-E- Some Point to Point Traversals Failed.\n",
        );
        assert_eq!(r.unreachable, vec![("S10/U1/1".to_string(), "S40/U1/1".to_string())]);
        assert_eq!(r.missing_paths, Some((2, 12)));
        assert_eq!(r.credit_loops, CreditLoops::NotChecked);
        assert!(!r.routes_ok());
    }
}
