//! Waiting for child processes with a deadline.
//!
//! `std::process::Child` has no timed wait; OpenSM in run-once mode never
//! exits when no engine can route, so every wait here has a deadline.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// How a waited-for child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It exited (or was killed by a signal) on its own.
    Exited(ExitStatus),
    /// The deadline passed; it was terminated.
    TimedOut,
    /// The caller's stop condition held; it was terminated.
    Stopped,
}

impl Outcome {
    /// The exit status, when it exited on its own.
    pub fn status(&self) -> Option<ExitStatus> {
        match self {
            Outcome::Exited(s) => Some(*s),
            Outcome::TimedOut | Outcome::Stopped => None,
        }
    }

    /// It exited on its own with status 0.
    pub fn success(&self) -> bool {
        self.status().is_some_and(|s| s.success())
    }
}

/// Poll `child` until it exits or `timeout` passes. On timeout it gets
/// SIGTERM, then SIGKILL after `grace`, and is reaped either way.
///
/// SIGTERM first gives a program the chance to clean up; under ibsim a
/// client that exits cleanly frees its simulator slot (there are only 10),
/// one killed outright keeps it until `Ibsim::disconnect_stale`.
pub fn wait_with_timeout(child: &mut Child, timeout: Duration, grace: Duration) -> Result<Outcome> {
    wait_until(child, timeout, grace, || false)
}

/// Like [`wait_with_timeout`], and also terminate the child as soon as
/// `stop` returns true (checked about every 50 ms).
pub fn wait_until(
    child: &mut Child,
    timeout: Duration,
    grace: Duration,
    mut stop: impl FnMut() -> bool,
) -> Result<Outcome> {
    let deadline = Instant::now() + timeout;
    let mut next_check = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| Error::io("waiting for a child process", e))? {
            return Ok(Outcome::Exited(status));
        }
        let now = Instant::now();
        if now >= deadline {
            terminate(child, grace)?;
            return Ok(Outcome::TimedOut);
        }
        if now >= next_check {
            next_check = now + Duration::from_millis(50);
            if stop() {
                terminate(child, grace)?;
                return Ok(Outcome::Stopped);
            }
        }
        std::thread::sleep(poll_interval(deadline));
    }
}

/// SIGTERM, wait up to `grace`, then SIGKILL; always reaps.
pub fn terminate(child: &mut Child, grace: Duration) -> Result<()> {
    if child.try_wait().map_err(|e| Error::io("waiting for a child process", e))?.is_some() {
        return Ok(());
    }
    signal(child.id(), "TERM");
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if child.try_wait().map_err(|e| Error::io("waiting for a child process", e))?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Already-exited races are harmless: kill() then reports an error we
    // do not need, and wait() still reaps.
    let _ = child.kill();
    child.wait().map_err(|e| Error::io("reaping a child process", e))?;
    Ok(())
}

/// Send a signal by name to one process id (ours, never a group).
fn signal(pid: u32, name: &str) {
    // std has no portable signal API besides SIGKILL; kill(1) avoids a libc
    // dependency for this one call.
    let _ = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

fn poll_interval(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(5))
}

/// Make the child get SIGKILL when the thread that spawns it ends.
///
/// Without this, a test binary killed mid-run leaves its helpers behind,
/// and ibsim in particular spins at 100% CPU once its console (stdin)
/// closes. Linux delivers the signal when the spawning *thread* exits, so
/// spawn and own a child on the same thread.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Read a pipe to the end on a thread, so the child never blocks on a full
/// pipe while we wait for it.
pub fn drain<R: Read + Send + 'static>(mut pipe: R) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// Collect what [`drain`] read, as text.
pub fn collect(handle: Option<JoinHandle<Vec<u8>>>) -> String {
    handle.and_then(|h| h.join().ok()).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}
