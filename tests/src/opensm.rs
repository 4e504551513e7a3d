//! OpenSM (`opensm -o -R <engine>`) on an [`Ibsim`] fabric.
//!
//! Each run gets its own temporary directory as `OSM_TMP_DIR` (dumps) and
//! `OSM_CACHE_DIR` (`guid2lid`), so the LIDs of one run never leak into the
//! next and the dumps sit together with the LID file of the same run.
//!
//! What OpenSM 3.3.23 logs about routing (`osm_ucast_mgr.c`):
//!
//! * `ucast_mgr_route: building routing with '<engine>' routing algorithm...`
//!   at VERBOSE (0x04), once per engine it tries, the default minhop
//!   fallback included;
//! * `osm_ucast_mgr_process: <engine> tables configured on all switches` at
//!   INFO (0x02), naming the engine that actually routed, after its LFT
//!   blocks were queued for sending;
//! * `No routing engine able to successfully configure  switch tables on
//!   current fabric` at ERROR when none did. In run-once mode OpenSM then
//!   never exits, hence the mandatory timeout, and by default the run is
//!   stopped as soon as that line appears.
//!
//! The route window starts at the first engine's `building routing` line,
//! which needs VERBOSE. `-D 0x0B` (ERROR|INFO|DEBUG) does not include
//! VERBOSE and floods the log with per-MAD DEBUG lines, so both modes here
//! add 0x04 instead: [`LogMode::Timing`] is 0x07 and [`LogMode::Dumps`] is
//! 0x47 (0x43 + VERBOSE; the ROUTING bit 0x40 is what makes OpenSM write
//! its dump files).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::ibsim::Ibsim;
use crate::proc::{self, Outcome};
use crate::{Error, Result};

/// OpenSM's log level for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogMode {
    /// Write the dump files (`opensm-lfts.dump`, `opensm-subnet.lst`,
    /// `opensm.fdbs`, ...) and log the route window: `-D 0x47`.
    Dumps,
    /// Only what the route window needs, so logging costs little inside
    /// it: `-D 0x07`.
    Timing,
    /// Any `-D` value.
    Custom(u32),
}

impl LogMode {
    /// The `-D` value.
    pub fn level(self) -> u32 {
        match self {
            LogMode::Dumps => 0x47,
            LogMode::Timing => 0x07,
            LogMode::Custom(v) => v,
        }
    }
}

/// How to run OpenSM.
#[derive(Debug, Clone)]
pub struct OpenSmOptions {
    /// `-R` value: one engine or a comma-separated list.
    pub engines: String,
    /// More arguments (e.g. `--lmc 1`, `--torus_config FILE`).
    pub extra_args: Vec<String>,
    /// Log level.
    pub log: LogMode,
    /// Kill it after this long.
    pub timeout: Duration,
    /// Put the run's files here instead of a temporary directory that is
    /// deleted with the [`OpenSmRun`].
    pub dir: Option<PathBuf>,
    /// Stop OpenSM (outcome [`Outcome::Stopped`]) as soon as its log says
    /// no engine could route, instead of waiting for the timeout: in
    /// run-once mode it would never exit by itself.
    pub stop_when_unroutable: bool,
}

impl OpenSmOptions {
    /// `-R engines`, dumps on, two minutes.
    pub fn new(engines: impl Into<String>) -> Self {
        OpenSmOptions {
            engines: engines.into(),
            extra_args: Vec::new(),
            log: LogMode::Dumps,
            timeout: Duration::from_secs(120),
            dir: None,
            stop_when_unroutable: true,
        }
    }
}

/// The result of one OpenSM run.
#[derive(Debug)]
pub struct OpenSmRun {
    _tmp: Option<tempfile::TempDir>,
    /// Where its dumps, log and `guid2lid` are.
    pub dir: PathBuf,
    /// Its log file.
    pub log_file: PathBuf,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall time from start to exit.
    pub wall: Duration,
    /// What the log says about routing.
    pub log: LogSummary,
    /// The engine list asked for.
    pub requested: Vec<String>,
    /// Its stdout and stderr.
    pub output: String,
}

impl OpenSmRun {
    /// The dump directory (same as [`OpenSmRun::dir`]).
    pub fn dump_dir(&self) -> &Path {
        &self.dir
    }

    /// Exited on its own with status 0.
    pub fn success(&self) -> bool {
        self.outcome.success()
    }

    /// The engine that routed, per the log.
    pub fn routed_by(&self) -> Option<&str> {
        self.log.routed_by.as_deref()
    }

    /// The first engine asked for is the one that routed. False when a
    /// later engine of the list, or OpenSM's default minhop fallback, did.
    pub fn asked_engine_routed(&self) -> bool {
        match (self.requested.first(), self.routed_by()) {
            (Some(want), Some(got)) => want.eq_ignore_ascii_case(got),
            _ => false,
        }
    }

    /// Route window from the log (see the module notes).
    pub fn route_time(&self) -> Option<Duration> {
        self.log.route_window
    }
}

/// Run `opensm -o -R <engines>` against `sim`.
pub fn run(sim: &Ibsim, opts: &OpenSmOptions) -> Result<OpenSmRun> {
    let (tmp, dir) = run_dir(opts, "opensm-run-")?;
    let log_file = dir.join("opensm.log");
    let requested: Vec<String> =
        opts.engines.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();

    let mut cmd = command(sim, None, opts, &dir, &log_file, &["-o"])?;
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| Error::io("starting opensm (Debian package opensm)", e))?;
    let out = child.stdout.take().map(proc::drain);
    let err = child.stderr.take().map(proc::drain);
    let mut watch = LogWatch::new(&log_file, NO_ENGINE_ROUTED);
    // OpenSM notices SIGTERM only every ~10 s, so it is killed after a short
    // grace and its simulator slot is freed from the console instead.
    let outcome = proc::wait_until(&mut child, opts.timeout, Duration::from_millis(500), || {
        opts.stop_when_unroutable && watch.seen()
    })?;
    if !matches!(outcome, Outcome::Exited(_)) {
        sim.disconnect_stale()?;
    }
    let wall = start.elapsed();
    let mut output = proc::collect(out);
    output.push_str(&proc::collect(err));

    let text = std::fs::read(&log_file).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let first = requested.first().map(String::as_str).unwrap_or("minhop");
    let log = parse_log(&text, first);
    Ok(OpenSmRun { _tmp: tmp, dir, log_file, outcome, wall, log, requested, output })
}

/// Where a run's files go: `opts.dir` (made absolute: OpenSM runs in the
/// simulator's client directory), else a temporary directory kept with
/// the run.
fn run_dir(opts: &OpenSmOptions, prefix: &str) -> Result<(Option<tempfile::TempDir>, PathBuf)> {
    match &opts.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| Error::io(format!("creating {}", d.display()), e))?;
            let d = std::path::absolute(d).map_err(|e| Error::io(format!("resolving {}", d.display()), e))?;
            Ok((None, d))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| Error::io("creating a temporary directory for OpenSM", e))?;
            let p = t.path().to_path_buf();
            Ok((Some(t), p))
        }
    }
}

/// `opensm MODE_ARGS -R ENGINES -f LOG -D LEVEL EXTRA` on `sim` (attached
/// to `host` when given), its files in `dir`, its output piped.
fn command(sim: &Ibsim, host: Option<&str>, opts: &OpenSmOptions, dir: &Path, log_file: &Path, mode_args: &[&str]) -> Result<Command> {
    let mut cmd = sim.client_command("opensm")?;
    if let Some(h) = host {
        cmd.env("SIM_HOST", h);
    }
    cmd.args(mode_args)
        .arg("-R")
        .arg(&opts.engines)
        .arg("-f")
        .arg(log_file)
        .arg("-D")
        .arg(format!("0x{:02X}", opts.log.level()))
        .args(&opts.extra_args)
        .env("OSM_TMP_DIR", dir)
        .env("OSM_CACHE_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(cmd)
}

/// Start of OpenSM's error line when every engine (and the fallback) failed.
const NO_ENGINE_ROUTED: &str = "No routing engine able to successfully configure";

/// Looks for a marker in a growing log file, reading only what is new.
struct LogWatch {
    path: PathBuf,
    marker: &'static str,
    offset: u64,
    /// The end of the text already read, long enough to hold a marker cut
    /// in two by a read.
    carry: String,
    seen: bool,
}

impl LogWatch {
    fn new(path: &Path, marker: &'static str) -> Self {
        LogWatch { path: path.to_path_buf(), marker, offset: 0, carry: String::new(), seen: false }
    }

    fn seen(&mut self) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        if self.seen {
            return true;
        }
        let Ok(mut f) = std::fs::File::open(&self.path) else { return false };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).and_then(|_| f.read_to_end(&mut buf)).is_err() {
            return false;
        }
        self.offset += buf.len() as u64;
        self.carry.push_str(&String::from_utf8_lossy(&buf));
        self.seen = self.carry.contains(self.marker);
        let keep = self.carry.len().saturating_sub(self.marker.len());
        let mut cut = keep;
        while !self.carry.is_char_boundary(cut) {
            cut += 1;
        }
        self.carry.drain(..cut);
        self.seen
    }
}

/// What an OpenSM log says about routing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogSummary {
    /// Engines in the order OpenSM tried them (`building routing with`).
    pub tried: Vec<String>,
    /// Engine named by `<engine> tables configured on all switches`.
    pub routed_by: Option<String>,
    /// From `building routing with '<first engine>'` to `tables configured
    /// on all switches`: the engine's (and any fallback's) route computation
    /// plus queueing the LFT blocks.
    pub route_window: Option<Duration>,
    /// OpenSM said no engine could route.
    pub no_engine_routed: bool,
    /// `SUBNET UP` was logged.
    pub subnet_up: bool,
    /// Error-level lines (`0x01 ->`), message part only.
    pub errors: Vec<String>,
}

/// Parse an OpenSM log. `first_engine` is the engine whose `building
/// routing` line opens the route window.
pub fn parse_log(text: &str, first_engine: &str) -> LogSummary {
    let mut s = LogSummary::default();
    let mut window_start: Option<u64> = None;
    let start_marker = format!("building routing with '{first_engine}'");
    for line in text.lines() {
        let Some((level, msg)) = split_line(line) else { continue };
        if let Some(rest) = msg.split_once("building routing with '").map(|(_, r)| r) {
            if let Some((engine, _)) = rest.split_once('\'') {
                s.tried.push(engine.to_string());
            }
            if window_start.is_none() && msg.contains(&start_marker) {
                window_start = timestamp_us(line);
            }
        } else if let Some(engine) = msg.strip_suffix(" tables configured on all switches") {
            let engine = engine.rsplit(' ').next().unwrap_or(engine);
            s.routed_by = Some(engine.to_string());
            if let (Some(a), Some(b)) = (window_start, timestamp_us(line)) {
                // The log has no date; a window across midnight wraps.
                let us = if b >= a { b - a } else { b + 86_400_000_000 - a };
                s.route_window = Some(Duration::from_micros(us));
            }
        } else if msg.contains(NO_ENGINE_ROUTED) {
            s.no_engine_routed = true;
        } else if msg.trim_end() == "SUBNET UP" {
            s.subnet_up = true;
        }
        if level == 0x01 {
            s.errors.push(msg.to_string());
        }
    }
    s
}

/// `(level, message)` of `Mon DD HH:MM:SS uuuuuu [TID] 0xLL -> message`.
fn split_line(line: &str) -> Option<(u32, &str)> {
    let (head, msg) = line.split_once(" -> ")?;
    let level = head.rsplit(' ').next()?.strip_prefix("0x")?;
    Some((u32::from_str_radix(level, 16).ok()?, msg))
}

/// Microseconds since midnight of a log line's time stamp.
fn timestamp_us(line: &str) -> Option<u64> {
    let mut f = line.split_whitespace();
    let _month = f.next()?;
    let _day = f.next()?;
    let hms = f.next()?;
    let usec: u64 = f.next()?.parse().ok()?;
    let mut parts = hms.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, sec) = (parts.next()??, parts.next()??, parts.next()??);
    Some(((h * 60 + m) * 60 + sec) * 1_000_000 + usec)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
Nov 22 03:15:28 140700 [5F60C6C0] 0x02 -> osm_vendor_init: 1000 pending umads specified
Nov 22 03:15:28 140825 [5F60C6C0] 0x04 -> ucast_mgr_route: building routing with 'updn' routing algorithm...
Nov 22 03:15:28 140830 [5F60C6C0] 0x01 -> updn_lid_matrices: ERR AA0B: No guid set for root
Nov 22 03:15:28 140836 [5F60C6C0] 0x01 -> ucast_mgr_route: updn: cannot build lid matrices
Nov 22 03:15:28 140840 [5F60C6C0] 0x04 -> ucast_mgr_route: building routing with 'minhop' routing algorithm...
Nov 22 03:15:29 000875 [5F60C6C0] 0x02 -> osm_ucast_mgr_process: minhop tables configured on all switches
Nov 22 03:15:29 100000 [5F60C6C0] 0x02 -> SUBNET UP
";

    #[test]
    fn fallback_and_window() {
        let s = parse_log(LOG, "updn");
        assert_eq!(s.tried, vec!["updn", "minhop"]);
        assert_eq!(s.routed_by.as_deref(), Some("minhop"));
        assert_eq!(s.route_window, Some(Duration::from_micros(1_000_000 - 140825 + 875)));
        assert!(s.subnet_up && !s.no_engine_routed);
        assert_eq!(s.errors.len(), 2);
    }

    #[test]
    fn window_across_midnight() {
        let log =
            "Jan 1 23:59:59 999000 [1] 0x04 -> ucast_mgr_route: building routing with 'minhop' routing algorithm...\n\
                   Jan 2 00:00:00 001000 [1] 0x02 -> osm_ucast_mgr_process: minhop tables configured on all switches\n";
        assert_eq!(parse_log(log, "minhop").route_window, Some(Duration::from_micros(2000)));
    }

    #[test]
    fn nothing_routed() {
        let log = "Nov 22 03:15:28 140825 [1] 0x01 -> osm_ucast_mgr_process: No routing engine able to successfully configure  switch tables on current fabric\n";
        let s = parse_log(log, "torus-2QoS");
        assert!(s.no_engine_routed && s.routed_by.is_none() && s.route_window.is_none());
    }
}

/// OpenSM running as the subnet's master (no `-o`): for tests that look at
/// a fabric it keeps, as `smcore shadow` does. Dropping it kills it.
pub struct OpenSmDaemon {
    child: std::process::Child,
    _tmp: Option<tempfile::TempDir>,
    /// Its dumps, log and `guid2lid`.
    pub dir: PathBuf,
    /// Its log file.
    pub log_file: PathBuf,
    out: Option<std::thread::JoinHandle<Vec<u8>>>,
    err: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl OpenSmDaemon {
    /// `opensm -R ENGINES -s 0` (no periodic sweep: the tables stay as the
    /// first sweep left them) on `sim`, attached to `host` when given;
    /// returns once its log says `SUBNET UP`.
    pub fn start(sim: &Ibsim, host: Option<&str>, opts: &OpenSmOptions) -> Result<OpenSmDaemon> {
        let (tmp, dir) = run_dir(opts, "opensm-daemon-")?;
        let log_file = dir.join("opensm.log");
        // -d2: the log is flushed after every line, so SUBNET UP is seen
        // when it happens.
        let mut cmd = command(sim, host, opts, &dir, &log_file, &["-d2", "-s", "0"])?;
        let mut child = cmd.spawn().map_err(|e| Error::io("starting opensm (Debian package opensm)", e))?;
        let out = child.stdout.take().map(proc::drain);
        let err = child.stderr.take().map(proc::drain);
        let mut daemon = OpenSmDaemon { child, _tmp: tmp, dir, log_file, out, err };
        let deadline = Instant::now() + opts.timeout;
        loop {
            let log = std::fs::read(&daemon.log_file).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            if log.contains("SUBNET UP") {
                return Ok(daemon);
            }
            if let Ok(Some(status)) = daemon.child.try_wait() {
                let mut output = proc::collect(daemon.out.take());
                output.push_str(&proc::collect(daemon.err.take()));
                return Err(Error::Failed(format!("opensm exited ({status}) before SUBNET UP:\n{output}\n{log}")));
            }
            if Instant::now() > deadline {
                return Err(Error::Failed(format!("opensm: no SUBNET UP within {:?}; log {}", opts.timeout, daemon.log_file.display())));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What its log says about routing.
    pub fn log(&self) -> LogSummary {
        let text = std::fs::read(&self.log_file).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        parse_log(&text, "minhop")
    }
}

impl Drop for OpenSmDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
