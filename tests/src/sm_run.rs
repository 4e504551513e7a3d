//! `smcore` running as an SM (no `--once`) on an [`Ibsim`], for tests that
//! change the fabric under it and watch it react.
//!
//! The SM rewrites its `--report` JSON after every heavy sweep (atomically,
//! with a `heavy_sweep` counter) and its dumps after every sweep that
//! routed, so the report is the clock a test waits on. Its output is
//! drained in the background so that it never blocks on a full pipe, and
//! is handed back with every failure, since that is where the SM says why.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::ibsim::Ibsim;
use crate::proc::{collect, drain, terminate};
use crate::smcore::Smcore;
use crate::{Error, Result};

/// A running `smcore` SM. Dropping it terminates the process.
pub struct RunningSm {
    child: Child,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
    report: PathBuf,
    dump_dir: PathBuf,
}

impl RunningSm {
    /// `smcore --dump-dir DUMP_DIR --report REPORT [extra]` on `sim`. Must
    /// be called on the thread that keeps the value (the child dies with
    /// its spawning thread, see [`crate::proc::die_with_parent`]).
    pub fn start(
        sim: &Ibsim,
        sm: &Smcore,
        dump_dir: &Path,
        report: &Path,
        extra: &[&str],
    ) -> Result<RunningSm> {
        RunningSm::start_on(sim, None, sm, dump_dir, report, extra)
    }

    /// [`RunningSm::start`] attached to the simulator's node `host`
    /// (umad2sim's `SIM_HOST`) when given, else to its default one.
    pub fn start_on(
        sim: &Ibsim,
        host: Option<&str>,
        sm: &Smcore,
        dump_dir: &Path,
        report: &Path,
        extra: &[&str],
    ) -> Result<RunningSm> {
        let mut cmd = sim.client_command(sm.bin())?;
        if let Some(host) = host {
            cmd.env("SIM_HOST", host);
        }
        cmd.arg("--dump-dir")
            .arg(dump_dir)
            .arg("--report")
            .arg(report)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| Error::io(format!("starting {}", sm.bin().display()), e))?;
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Ok(RunningSm {
            child,
            out,
            err,
            report: report.to_path_buf(),
            dump_dir: dump_dir.to_path_buf(),
        })
    }

    /// The dump directory.
    pub fn dump_dir(&self) -> &Path {
        &self.dump_dir
    }

    /// The last report written, if one is there and parses.
    pub fn report(&self) -> Option<Value> {
        let text = std::fs::read_to_string(&self.report).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The number of the last heavy sweep reported (0 before the first).
    pub fn heavy_sweeps(&self) -> u64 {
        self.report()
            .and_then(|j| j["heavy_sweep"].as_u64())
            .unwrap_or(0)
    }

    /// Polls `done` until it holds; fails (with the SM's output) when the
    /// SM exits or `timeout` passes. Returns how long it took.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&RunningSm) -> bool,
    ) -> Result<Duration> {
        let start = Instant::now();
        loop {
            if done(self) {
                return Ok(start.elapsed());
            }
            if let Some(status) = self
                .child
                .try_wait()
                .map_err(|e| Error::io("waiting for smcore", e))?
            {
                return Err(Error::Failed(format!(
                    "smcore exited ({status}) waiting for {what}:\n{}",
                    self.output()
                )));
            }
            if start.elapsed() > timeout {
                let _ = terminate(&mut self.child, Duration::from_secs(2));
                return Err(Error::Failed(format!(
                    "timed out after {:.0} s waiting for {what}:\n{}",
                    timeout.as_secs_f64(),
                    self.output()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until no heavy sweep has been reported for `quiet` (the SM has
    /// settled after a change, which may take more than one heavy sweep);
    /// returns the last heavy sweep's number.
    pub fn wait_settled(&mut self, quiet: Duration, timeout: Duration) -> Result<u64> {
        let mut last = (self.heavy_sweeps(), Instant::now());
        self.wait_for("the SM to settle", timeout, |r| {
            let n = r.heavy_sweeps();
            if n != last.0 {
                last = (n, Instant::now());
            }
            last.1.elapsed() >= quiet
        })?;
        Ok(last.0)
    }

    /// SIGTERM (SIGKILL after `grace`); returns the exit status and all the
    /// SM printed.
    pub fn stop(mut self, grace: Duration) -> Result<(ExitStatus, String)> {
        terminate(&mut self.child, grace)?;
        let status = self
            .child
            .wait()
            .map_err(|e| Error::io("reaping smcore", e))?;
        Ok((status, self.output()))
    }

    /// SIGKILL, as in a crash; returns all the SM printed.
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.output()
    }

    /// What the SM printed so far; only complete once it has exited.
    fn output(&mut self) -> String {
        format!("{}\n{}", collect(self.out.take()), collect(self.err.take()))
    }
}

impl Drop for RunningSm {
    fn drop(&mut self) {
        let _ = terminate(&mut self.child, Duration::from_secs(2));
    }
}
