//! The workspace's `smcore` binary, run as a user would.
//!
//! Cargo gives `CARGO_BIN_EXE_smcore` only to tests of the package that
//! owns the binary, so from this package the binary is looked up in the
//! workspace's target directory; it must have been built first
//! (`cargo build --workspace`, with `--release` for benchmarks).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::proc::{self, Outcome};
use crate::{Error, Result};

/// `smcore gen` arguments of fabrics that several tests route.
pub mod gen_args {
    /// An irregular fabric small enough for debug-build tests: 24 switches
    /// of 8 ports, two hosts each, 20 links beyond a spanning tree (seed 4).
    pub const RANDOM_24: &[&str] =
        &["random", "--switches", "24", "--ports", "8", "--hosts", "2", "--extra-links", "20", "--seed", "4"];
}

/// Cargo build profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `target/debug`.
    Debug,
    /// `target/release`.
    Release,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Profile::Debug => "debug",
            Profile::Release => "release",
        }
    }

    fn build_command(self) -> &'static str {
        match self {
            Profile::Debug => "cargo build --workspace",
            Profile::Release => "cargo build --workspace --release",
        }
    }
}

/// The workspace root (the parent of this package).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(Path::to_path_buf).unwrap_or_else(|| here.to_path_buf())
}

/// The target directory: `CARGO_TARGET_DIR` when set (relative to the
/// workspace root), else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("target"),
    }
}

/// A built `smcore` binary and the engines beside it.
#[derive(Debug, Clone)]
pub struct Smcore {
    bin: PathBuf,
}

impl Smcore {
    /// The binary of `profile`, checking that it and the minhop engine
    /// library were built.
    pub fn locate(profile: Profile) -> Result<Smcore> {
        let dir = target_dir().join(profile.dir());
        let bin = dir.join("smcore");
        for (path, what) in [(&bin, "the smcore binary"), (&dir.join("libsmcore_minhop.so"), "the minhop engine")] {
            if !path.is_file() {
                return Err(Error::Missing {
                    path: path.clone(),
                    hint: format!("{what} is not built; run `{}` first", profile.build_command()),
                });
            }
        }
        Ok(Smcore { bin })
    }

    /// A binary at a given path.
    pub fn at(bin: impl Into<PathBuf>) -> Smcore {
        Smcore { bin: bin.into() }
    }

    /// Path of the binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// `smcore gen <args> -o <out>`, e.g. `["torus", "--dims", "4x4", "--hosts", "2"]`.
    pub fn gen(&self, args: &[&str], out: &Path) -> Result<()> {
        let output = Command::new(&self.bin)
            .arg("gen")
            .args(args)
            .arg("-o")
            .arg(out)
            .output()
            .map_err(|e| Error::io(format!("running {}", self.bin.display()), e))?;
        if !output.status.success() {
            return Err(Error::Failed(format!(
                "smcore gen {} failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        Ok(())
    }

    /// `smcore gen <args>` into a new temporary directory named after
    /// `prefix` and `name`, which also takes the reports and dumps of the
    /// runs on it (see [`GenFabric::route`]).
    pub fn gen_temp(&self, prefix: &str, name: &str, args: &[&str]) -> Result<GenFabric> {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{prefix}-{name}-"))
            .tempdir()
            .map_err(|e| Error::io("creating a temporary directory", e))?;
        let net = tmp.path().join(format!("{name}.net"));
        self.gen(args, &net)?;
        Ok(GenFabric { smcore: self.clone(), name: name.into(), net, tmp })
    }

    /// `smcore route <net> --engines <engines> --report <report> [--dump-dir <dir>] [extra]`.
    pub fn route(&self, net: &Path, opts: &RouteOptions) -> Result<RouteRun> {
        let mut cmd = Command::new(&self.bin);
        proc::die_with_parent(&mut cmd);
        cmd.arg("route").arg(net).arg("--engines").arg(&opts.engines).arg("--report").arg(&opts.report);
        if let Some(d) = &opts.dump_dir {
            cmd.arg("--dump-dir").arg(d);
        }
        cmd.args(&opts.extra_args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // A report left over from an earlier run must not pass for this one.
        let _ = std::fs::remove_file(&opts.report);
        let start = Instant::now();
        let mut child = cmd.spawn().map_err(|e| Error::io(format!("running {}", self.bin.display()), e))?;
        let out = child.stdout.take().map(proc::drain);
        let err = child.stderr.take().map(proc::drain);
        let outcome = proc::wait_with_timeout(&mut child, opts.timeout, Duration::from_secs(2))?;
        let wall = start.elapsed();
        let mut output = proc::collect(out);
        output.push_str(&proc::collect(err));
        let status = match outcome {
            Outcome::Exited(s) => s,
            Outcome::TimedOut | Outcome::Stopped => {
                return Err(Error::Timeout {
                    what: format!("smcore route {}", net.display()),
                    secs: opts.timeout.as_secs_f64(),
                })
            }
        };
        let report = match std::fs::read(&opts.report) {
            Ok(bytes) => Some(serde_json::from_slice::<Report>(&bytes).map_err(|e| {
                Error::parse(opts.report.display().to_string(), e.line(), format!("smcore report: {e}"))
            })?),
            Err(_) => None,
        };
        Ok(RouteRun { status, wall, report, output })
    }
}

/// A fabric written by [`Smcore::gen_temp`]; its directory is removed on drop.
#[derive(Debug)]
pub struct GenFabric {
    smcore: Smcore,
    /// Name for messages (and of the `.net` file).
    pub name: String,
    /// The topology file.
    pub net: PathBuf,
    /// The directory holding it and the runs' reports and dumps.
    pub tmp: tempfile::TempDir,
}

impl GenFabric {
    /// `smcore route` with `engines` and `extra` arguments, the report in
    /// `<tag>.json` and the dumps in `<tag>/` of the fabric's directory.
    /// Returns the dump directory and the run.
    pub fn route(&self, engines: &str, tag: &str, extra: &[&str], timeout: Duration) -> Result<(PathBuf, RouteRun)> {
        let dir = self.tmp.path().join(tag);
        let opts = RouteOptions {
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
            timeout,
            ..RouteOptions::new(engines, self.tmp.path().join(format!("{tag}.json"))).dump_dir(&dir)
        };
        Ok((dir, self.smcore.route(&self.net, &opts)?))
    }

    /// [`GenFabric::route`], failing unless the first of `engines` routed.
    pub fn route_by(&self, engines: &str, tag: &str, extra: &[&str], timeout: Duration) -> Result<(PathBuf, RouteRun)> {
        let (dir, run) = self.route(engines, tag, extra, timeout)?;
        let first = engines.split(',').next().unwrap_or(engines);
        if !run.routed_by(first) {
            return Err(Error::Failed(format!(
                "{}/{tag}: {first} did not route ({}):\n{}",
                self.name, run.status, run.output
            )));
        }
        Ok((dir, run))
    }
}

/// Options of [`Smcore::route`].
#[derive(Debug, Clone)]
pub struct RouteOptions {
    /// `--engines`.
    pub engines: String,
    /// `--dump-dir`.
    pub dump_dir: Option<PathBuf>,
    /// `--report`.
    pub report: PathBuf,
    /// More arguments.
    pub extra_args: Vec<String>,
    /// Kill it after this long.
    pub timeout: Duration,
}

impl RouteOptions {
    /// Route with `engines`, writing the JSON report to `report`.
    pub fn new(engines: impl Into<String>, report: impl Into<PathBuf>) -> Self {
        RouteOptions {
            engines: engines.into(),
            dump_dir: None,
            report: report.into(),
            extra_args: Vec::new(),
            timeout: Duration::from_secs(600),
        }
    }

    /// Also write dumps to `dir`.
    pub fn dump_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dump_dir = Some(dir.into());
        self
    }
}

/// One `smcore route` run.
#[derive(Debug)]
pub struct RouteRun {
    /// Exit status.
    pub status: ExitStatus,
    /// Wall time of the process.
    pub wall: Duration,
    /// The JSON report, when it wrote one.
    pub report: Option<Report>,
    /// Its stdout and stderr.
    pub output: String,
}

impl RouteRun {
    /// Exited 0 and `engine` is the one that routed.
    pub fn routed_by(&self, engine: &str) -> bool {
        self.status.success() && self.report.as_ref().and_then(|r| r.engine.as_deref()) == Some(engine)
    }

    /// Exited with [`crate::bench::NOT_ROUTED_STATUS`]: the chain refused the fabric.
    pub fn refused(&self) -> bool {
        self.status.code() == Some(crate::bench::NOT_ROUTED_STATUS)
    }

    /// `engine`'s own route time in milliseconds, from its attempt record.
    pub fn engine_route_ms(&self, engine: &str) -> Option<f64> {
        self.report.as_ref()?.attempts.iter().find(|a| a.engine == engine).map(|a| a.route_ms)
    }

    /// VLs the routing uses, per the report (0 without one).
    pub fn vls_used(&self) -> u8 {
        self.report.as_ref().map_or(0, |r| r.vls_used)
    }
}

/// One engine of the chain, as the report lists it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Attempt {
    /// Engine name.
    pub engine: String,
    /// `routed` or `failed`.
    pub outcome: String,
    /// Why it failed.
    pub reason: Option<String>,
    /// Time in the engine.
    pub route_ms: f64,
}

/// The parts of smcore's JSON route report the tests read. Fields missing
/// from the file take their defaults, so the report can grow freely.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Report {
    /// Engine that routed.
    pub engine: Option<String>,
    /// The chain, in order.
    pub attempts: Vec<Attempt>,
    /// Switches.
    pub switches: usize,
    /// End ports.
    pub end_ports: usize,
    /// Highest LID.
    pub max_lid: u32,
    /// CA pairs checked by smcore's verifier.
    pub pairs: u64,
    /// Of them reachable.
    pub reachable_pairs: u64,
    /// smcore's own link-load figure.
    pub max_routes_per_link: u64,
    /// smcore's own mean link load.
    pub mean_routes_per_link: f64,
    /// smcore's own mean hops.
    pub avg_hops: f64,
    /// smcore's own mean extra hops.
    pub avg_extra_hops: f64,
    /// smcore's verifier on credit loops; not checked (`null` in the
    /// report) when nothing was routed or the check was off.
    pub credit_loops: CreditLoops,
    /// VLs the routing uses.
    pub vls_used: u8,
    /// Milliseconds per phase (`parse`, `lids`, `route`, `verify`, `dump`, `total`).
    pub phases_ms: BTreeMap<String, f64>,
    /// Peak resident memory.
    pub peak_rss_mib: f64,
}

/// smcore's credit-loop verdict: `Some(found)` when its verifier checked,
/// `None` when it did not (an unrouted run writes `null`).
///
/// Compared with a `bool` it means "checked, and found loops or not": an
/// unchecked verdict equals neither `true` nor `false`, so a test asserting
/// a loop-free routing cannot pass on a run that was never checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct CreditLoops(pub Option<bool>);

impl CreditLoops {
    /// The verdict, `None` when not checked.
    pub fn checked(self) -> Option<bool> {
        self.0
    }
}

impl PartialEq<bool> for CreditLoops {
    fn eq(&self, found: &bool) -> bool {
        self.0 == Some(*found)
    }
}

impl Report {
    /// A phase's time in milliseconds (0 when absent).
    pub fn phase_ms(&self, name: &str) -> f64 {
        self.phases_ms.get(name).copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unrouted_report_parses() {
        // What `smcore route --engines torus-2QoS,no_fallback` wrote for a
        // fat tree without a torus-2QoS.conf.
        let r: Report = serde_json::from_str(
            r#"{"topology": "t.net", "engine": null, "attempts": [{"engine": "torus-2QoS", "outcome": "failed",
                "reason": "could not be created", "route_ms": 0.0, "verify_ms": 0.0}],
                "switches": 8, "end_nodes": 16, "end_ports": 16, "max_lid": 24, "lmc": 0, "pairs": 0,
                "reachable_pairs": 0, "looping_pairs": 0, "credit_loops": null, "credit_loop_example": null,
                "vls_used": 0, "max_routes_per_link": 0, "mean_routes_per_link": 0.0, "avg_hops": 0.0,
                "avg_extra_hops": 0.0, "non_minimal_pairs": 0, "phases_ms": {"route": 0.0, "total": 0.455223},
                "peak_rss_mib": 12.9296875, "dumps": []}"#,
        )
        .unwrap();
        assert_eq!((r.engine, r.switches, r.credit_loops.checked()), (None, 8, None));
        assert_eq!((r.attempts.len(), r.attempts[0].outcome.as_str()), (1, "failed"));
        assert!(r.credit_loops != false && r.credit_loops != true, "unchecked is neither verdict");
    }

    #[test]
    fn routed_report_parses() {
        let r: Report = serde_json::from_str(r#"{"engine": "minhop", "credit_loops": true}"#).unwrap();
        assert_eq!(r.credit_loops.checked(), Some(true));
        assert!(r.credit_loops == true);
        let r: Report = serde_json::from_str(r#"{"engine": "minhop", "credit_loops": false}"#).unwrap();
        assert!(r.credit_loops == false);
    }
}
