//! The control socket: a Unix socket on which a running SM takes one-line
//! commands from `smcore ctl` (or `socat`), so an admin can reload engines
//! or force a sweep without signals, and ask how the SM is doing.
//!
//! Commands, one per connection, answered with text and the connection
//! closed:
//!
//! * `reload` — rescan the engine directories, as SIGHUP does;
//! * `sweep` — a heavy sweep now;
//! * `status` — the SM's state (role, last heavy sweep, engine, nodes).
//!
//! The socket is created with mode 0600 (the SM runs as root; nobody else
//! may steer it) and removed when the SM stops. A stale socket file from a
//! crashed SM is replaced; a live one (something answers on it) is not.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{info, warn};

use crate::daemon::Signals;

/// Why the control socket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Another SM answers on the socket.
    #[error("{0}: another SM is running there")]
    InUse(PathBuf),
    /// Creating, binding or connecting failed.
    #[error("{path}: {source}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// The OS's words.
        source: std::io::Error,
    },
}

/// What `status` reports; the SM loop updates it after every heavy sweep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Lines of `key: value`.
    pub lines: Vec<(String, String)>,
}

impl Status {
    /// Sets `key` (keeps the order keys first appeared in).
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.lines.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.lines.push((key.to_string(), value)),
        }
    }

    fn render(&self) -> String {
        self.lines
            .iter()
            .map(|(k, v)| format!("{k}: {v}\n"))
            .collect()
    }
}

/// Ports `perfmgr` lists.
const PERFMGR_TOP: usize = 20;

/// The listening socket; dropping it removes the file and ends the thread.
#[derive(Debug)]
pub struct ControlSocket {
    path: PathBuf,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept() with a connection of our own.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds `path` and serves commands on a thread of its own, setting
/// `signals` and reading `status`.
pub fn serve(
    path: &Path,
    signals: Arc<Signals>,
    status: Arc<Mutex<Status>>,
) -> Result<ControlSocket, ControlError> {
    serve_with(path, signals, status, None)
}

/// [`serve`], also answering `perfmgr` from the performance manager's
/// database when it runs.
pub fn serve_with(
    path: &Path,
    signals: Arc<Signals>,
    status: Arc<Mutex<Status>>,
    perf: Option<Arc<Mutex<crate::perfmgr::PerfDb>>>,
) -> Result<ControlSocket, ControlError> {
    let io = |source| ControlError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(ControlError::InUse(path.to_path_buf()));
        }
        std::fs::remove_file(path).map_err(io)?;
    }
    // Created 0600 from the start: a socket chmodded after bind is open
    // to everyone for a moment. The umask is the process's; nothing else
    // creates files while the SM starts up.
    let old_mask = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(old_mask);
    let listener = bound.map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thread = std::thread::Builder::new()
        .name("control".into())
        .spawn({
            let stop = Arc::clone(&stop);
            move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    match conn {
                        Ok(stream) => handle(stream, &signals, &status, perf.as_deref()),
                        Err(e) => warn!("control socket: {e}"),
                    }
                }
            }
        })
        .map_err(io)?;
    info!(socket = %path.display(), "control socket listening");
    Ok(ControlSocket {
        path: path.to_path_buf(),
        stop,
        thread: Some(thread),
    })
}

/// Whether the peer of `stream` may steer the SM: root or the SM's own
/// user. The socket's mode already says so; this holds even when someone
/// loosened the mode or the directory.
fn peer_allowed(stream: &UnixStream) -> Result<u32, String> {
    let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| format!("cannot tell who is asking: {e}"))?;
    let uid = cred.uid();
    if uid == 0 || uid == nix::unistd::geteuid().as_raw() {
        Ok(uid)
    } else {
        Err(format!("uid {uid} may not steer the SM"))
    }
}

fn handle(stream: UnixStream, signals: &Signals, status: &Mutex<Status>, perf: Option<&Mutex<crate::perfmgr::PerfDb>>) {
    let allowed = peer_allowed(&stream);
    // A client that never writes must not hold the SM's only control
    // thread.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    let mut reader = BufReader::new(stream.take(256));
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let answer = match (allowed, line.trim()) {
        (Err(why), _) => {
            warn!("control socket: refused: {why}");
            format!("error: {why}\n")
        }
        (Ok(_), "reload") => {
            signals.reload.store(true, Ordering::Relaxed);
            "ok: engine directories will be rescanned, then a heavy sweep\n".to_string()
        }
        (Ok(_), "sweep") => {
            signals.sweep.store(true, Ordering::Relaxed);
            "ok: heavy sweep requested\n".to_string()
        }
        (Ok(_), "status") => status.lock().map(|s| s.render()).unwrap_or_default(),
        (Ok(_), "perfmgr") => match perf {
            // The manager holds the lock for one read of the fabric at
            // most: the answer waits for that, never for a sweep.
            Some(db) => db.lock().map(|d| d.report(PERFMGR_TOP)).unwrap_or_default(),
            None => "error: the performance manager is off (opensm.conf `perfmgr TRUE`, or a umad port)\n".to_string(),
        },
        (Ok(_), other) => format!("error: unknown command {other:?} (reload, sweep, status, perfmgr)\n"),
    };
    info!(command = line.trim(), "control command");
    let mut stream = reader.into_inner().into_inner();
    let _ = stream.write_all(answer.as_bytes());
}

/// Sends `command` to the SM listening on `path`; returns its answer.
pub fn request(path: &Path, command: &str) -> Result<String, ControlError> {
    let io = |source| ControlError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut stream = UnixStream::connect(path).map_err(io)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    stream
        .write_all(format!("{command}\n").as_bytes())
        .map_err(io)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(io)?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_set_the_flags_and_status_answers() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("smcore.sock");
        let signals = Arc::new(Signals::default());
        let status = Arc::new(Mutex::new(Status::default()));
        status.lock().expect("lock").set("role", "master");
        let socket = serve(&path, Arc::clone(&signals), Arc::clone(&status)).expect("serve");
        let mode = std::fs::metadata(&path)
            .expect("socket")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(request(&path, "status").expect("status"), "role: master\n");
        assert!(request(&path, "sweep").expect("sweep").starts_with("ok"));
        assert!(signals.sweep.load(Ordering::Relaxed));
        assert!(request(&path, "reload").expect("reload").starts_with("ok"));
        assert!(signals.reload.load(Ordering::Relaxed));
        assert!(request(&path, "frobnicate")
            .expect("answer")
            .starts_with("error"));
        // A second SM may not take the socket over.
        assert!(matches!(
            serve(&path, Arc::clone(&signals), Arc::clone(&status)),
            Err(ControlError::InUse(_))
        ));
        drop(socket);
        assert!(!path.exists(), "removed on drop");
        // A stale file (no listener) is replaced.
        std::fs::write(&path, b"").expect("stale file");
        let again = serve(&path, signals, status).expect("stale socket replaced");
        drop(again);
    }
}
