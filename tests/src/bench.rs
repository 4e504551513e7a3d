//! Shared pieces of benchmarks and differential tests: an `smcore route`
//! run that keeps whatever the report says (refusals included), medians,
//! and a description of the machine a figure was measured on.
//!
//! [`crate::smcore::Smcore::route`] reads the report into a fixed struct,
//! which rejects the report of a fabric no engine routed (its loop verdict
//! is `null` then). Here the report stays a JSON value, and the attempts
//! list gives each engine's own route time, which is what a per-engine
//! benchmark must quote (the `route` phase covers the whole chain).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::proc::{self, Outcome};
use crate::smcore::Smcore;
use crate::{Error, Result};

/// Exit status of `smcore route` when no engine produced an acceptable
/// routing (and `no_fallback` kept minhop out).
pub const NOT_ROUTED_STATUS: i32 = 3;

/// One `smcore route` run, report kept as JSON.
#[derive(Debug)]
pub struct RouteOutcome {
    /// Exit status.
    pub status: ExitStatus,
    /// Wall time of the process.
    pub wall: Duration,
    /// The JSON report (`Value::Null` when none was written).
    pub report: Value,
    /// Its stdout and stderr.
    pub output: String,
}

impl RouteOutcome {
    /// The engine that routed, per the report.
    pub fn engine(&self) -> Option<&str> {
        self.report.get("engine").and_then(Value::as_str)
    }

    /// Exited 0 and `engine` is the one that routed.
    pub fn routed_by(&self, engine: &str) -> bool {
        self.status.success() && self.engine() == Some(engine)
    }

    /// Exited with [`NOT_ROUTED_STATUS`]: the chain refused the fabric.
    pub fn refused(&self) -> bool {
        self.status.code() == Some(NOT_ROUTED_STATUS)
    }

    /// The attempt record of `engine` (`outcome`, `reason`, `route_ms`, ...).
    pub fn attempt(&self, engine: &str) -> Option<&Value> {
        self.report
            .get("attempts")?
            .as_array()?
            .iter()
            .find(|a| a.get("engine").and_then(Value::as_str) == Some(engine))
    }

    /// `engine`'s own route time in milliseconds, from its attempt record.
    pub fn engine_route_ms(&self, engine: &str) -> Option<f64> {
        self.attempt(engine)?.get("route_ms")?.as_f64()
    }

    /// Why `engine` did not route (its attempt's `reason`).
    pub fn reason(&self, engine: &str) -> Option<&str> {
        self.attempt(engine)?.get("reason")?.as_str()
    }

    /// A number of the report (`max_routes_per_link`, `mean_routes_per_link`, ...).
    pub fn number(&self, key: &str) -> Option<f64> {
        self.report.get(key)?.as_f64()
    }

    /// A phase time in milliseconds (`parse`, `lids`, `route`, `verify`, `dump`, `total`).
    pub fn phase_ms(&self, name: &str) -> Option<f64> {
        self.report.get("phases_ms")?.get(name)?.as_f64()
    }
}

/// `smcore route NET --engines ENGINES --report REPORT [--dump-dir DIR] [extra]`.
pub fn route(
    sm: &Smcore,
    net: &Path,
    engines: &str,
    report: &Path,
    dump_dir: Option<&Path>,
    extra_args: &[String],
    timeout: Duration,
) -> Result<RouteOutcome> {
    let mut cmd = Command::new(sm.bin());
    proc::die_with_parent(&mut cmd);
    cmd.arg("route")
        .arg(net)
        .arg("--engines")
        .arg(engines)
        .arg("--report")
        .arg(report);
    if let Some(d) = dump_dir {
        cmd.arg("--dump-dir").arg(d);
    }
    cmd.args(extra_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A report left over from an earlier run must not pass for this one.
    let _ = std::fs::remove_file(report);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io(format!("running {}", sm.bin().display()), e))?;
    let out = child.stdout.take().map(proc::drain);
    let err = child.stderr.take().map(proc::drain);
    let outcome = proc::wait_with_timeout(&mut child, timeout, Duration::from_secs(2))?;
    let wall = start.elapsed();
    let mut output = proc::collect(out);
    output.push_str(&proc::collect(err));
    let Outcome::Exited(status) = outcome else {
        return Err(Error::Timeout {
            what: format!("smcore route {}", net.display()),
            secs: timeout.as_secs_f64(),
        });
    };
    let report = match std::fs::read(report) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            Error::parse(
                report.display().to_string(),
                e.line(),
                format!("smcore report is not JSON: {e}"),
            )
        })?,
        Err(_) => Value::Null,
    };
    Ok(RouteOutcome {
        status,
        wall,
        report,
        output,
    })
}

/// Median of the finite values.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Milliseconds with a precision that suits their size; `-` for none.
pub fn fmt_ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) if x >= 1.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.3}"),
        None => "-".into(),
    }
}

/// Output of a shell command, trimmed (empty when it fails).
pub fn sh(cmd: &str) -> String {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// What a benchmark ran on.
#[derive(Debug, Clone)]
pub struct Machine {
    /// `nproc`.
    pub cpus: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Total memory (`free -h`).
    pub memory: String,
    /// `uname -r`.
    pub kernel: String,
    /// OpenSM package version.
    pub opensm: String,
    /// ibsim package version.
    pub ibsim: String,
    /// `git describe --always --dirty` of the workspace.
    pub commit: String,
}

impl Machine {
    /// Describe this machine.
    pub fn here(workspace: &Path) -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpus: sh("nproc"),
            cpu_model,
            memory: sh("free -h | awk '/^Mem:/{print $2}'"),
            kernel: sh("uname -r"),
            opensm: sh("dpkg-query -W -f='opensm ${Version}' opensm"),
            ibsim: sh("dpkg-query -W -f='ibsim-utils ${Version}' ibsim-utils"),
            commit: sh(&format!("git -C {} describe --always --dirty", workspace.display())),
        }
    }
}

/// 1-, 5- and 15-minute load averages.
pub fn load_average() -> String {
    sh("cut -d' ' -f1-3 /proc/loadavg")
}

/// The current UTC time, to the minute.
pub fn now_utc() -> String {
    sh("date -u '+%Y-%m-%d %H:%M UTC'")
}

/// A scratch path `dir/name`, created as a directory.
pub fn scratch_dir(dir: &Path, name: &str) -> Result<PathBuf> {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).map_err(|e| Error::io(format!("creating {}", p.display()), e))?;
    Ok(p)
}

/// A named pipe standing in for a dump file nobody needs, drained by a
/// thread into nothing.
///
/// OpenSM's `-D 0x40` writes every dump, among them `opensm-lid-matrix.dump`
/// (one line of hop counts per switch and LID) and `opensm.fdbs`: gigabytes
/// on a 10,000-port fabric, while only `opensm-lfts.dump` is read. OpenSM
/// opens each with a plain `fopen(path, "w")`, which on a FIFO blocks until
/// the reader is there and then streams into it, so these files never take
/// memory or disk.
pub struct DiscardFifo {
    path: PathBuf,
    reader: Option<std::thread::JoinHandle<u64>>,
}

impl DiscardFifo {
    /// Create the FIFO at `path` and start draining it.
    pub fn create(path: &Path) -> Result<DiscardFifo> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::Failed(format!("{} contains a NUL byte", path.display())))?;
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(Error::io(
                format!("mkfifo {}", path.display()),
                std::io::Error::last_os_error(),
            ));
        }
        let p = path.to_path_buf();
        let reader = std::thread::spawn(move || match std::fs::File::open(&p) {
            Ok(mut f) => std::io::copy(&mut f, &mut std::io::sink()).unwrap_or(0),
            Err(_) => 0,
        });
        Ok(DiscardFifo {
            path: path.to_path_buf(),
            reader: Some(reader),
        })
    }

    /// Stop draining (the writer must be done) and remove the FIFO; returns
    /// the bytes that went through it.
    pub fn finish(mut self) -> u64 {
        self.stop()
    }

    fn stop(&mut self) -> u64 {
        let Some(reader) = self.reader.take() else { return 0 };
        // A reader blocked in open() (nobody wrote the file) is released
        // by a writer that opens and closes at once. The reader may not
        // have reached open() yet, and the open fails (ENXIO) while no
        // reader waits, hence the loop.
        while !reader.is_finished() {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.path);
            std::thread::sleep(Duration::from_millis(5));
        }
        let n = reader.join().unwrap_or(0);
        let _ = std::fs::remove_file(&self.path);
        n
    }
}

impl Drop for DiscardFifo {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `MemAvailable` of `/proc/meminfo`, in MiB.
pub fn mem_available_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kib| kib / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn fifo_drains_a_writer_and_survives_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = dir.path().join("big.dump");
        let fifo = DiscardFifo::create(&p).expect("mkfifo");
        {
            let mut w = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .expect("open for writing");
            for _ in 0..100 {
                w.write_all(&[b'x'; 10_000]).expect("write");
            }
        }
        assert_eq!(fifo.finish(), 1_000_000);
        assert!(!p.exists());
        // Nobody writes: finishing must not hang.
        let fifo = DiscardFifo::create(&p).expect("mkfifo");
        assert_eq!(fifo.finish(), 0);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, f64::NAN, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN]), None);
    }
}

/// Ends a benchmark binary with `tool: msg` and exit status 2.
pub fn die(tool: &str, msg: impl std::fmt::Display) -> ! {
    eprintln!("{tool}: {msg}");
    std::process::exit(2);
}

/// A scratch directory `prefix…` inside `base`, removed when dropped; the
/// benchmark `tool` ends if it cannot be made.
pub fn work_dir(tool: &str, prefix: &str, base: &Path) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .unwrap_or_else(|e| die(tool, format!("temporary directory in {}: {e}", base.display())))
}

/// Writes a results file, creating its directory.
pub fn write_results(out: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, text)
}
