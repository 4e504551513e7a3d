//! The control socket: a Unix socket on which a running SM takes one-line
//! commands from `smcore ctl` (or `socat`), so an admin can reload engines
//! or force a sweep without signals, and ask how the SM is doing: OpenSM's
//! console, one command per connection.
//!
//! Commands, answered with text and the connection closed:
//!
//! * `reload` — rescan the engine directories, as SIGHUP does;
//! * `sweep` — a heavy sweep now;
//! * `reroute` — a heavy sweep that routes afresh, even where the unicast
//!   cache would reuse the last routing;
//! * `status` — the SM's state (role, last heavy sweep, engine, nodes);
//! * `portstatus` — ports by state, width and speed; the disabled, not
//!   active and reduced ones (OpenSM's `portstatus`);
//! * `lidbalance` — the routing summary and, per switch, how many LIDs
//!   its LFT sends out of each inter-switch port (OpenSM's `lidbalance`);
//!   `route` is the routing summary alone;
//! * `perfmgr` — the performance manager's top error ports;
//! * `dump_conf` — the configuration in force, secrets masked;
//! * `loglevel [FILTER]` — show or change the log filter (`debug`,
//!   `sm_core::sweep=trace,info`); a bad filter is refused and the old one
//!   kept;
//! * `explain SRC DST` — the path between two ports hop by hop, with its
//!   SL, the VL at each hop and the PathRecord the SA answers
//!   ([`crate::explain`]); ports by LID, GUID or NodeDescription.
//!
//! A line starting with `--json` gets the answer as one JSON object
//! (errors as `{"error": "..."}`).
//!
//! The read-only answers come from what the SM loop published after its
//! last heavy sweep ([`publish`]): a request renders it and never waits for
//! a sweep.
//!
//! The socket is created with mode 0600 (the SM runs as root; nobody else
//! may steer it) and removed when the SM stops. A stale socket file from a
//! crashed SM is replaced; a live one (something answers on it) is not.

pub mod view;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tracing::{info, warn};

use view::SweepView;

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

/// The signals the loop watches: set by the caller's handlers.
#[derive(Debug, Default)]
pub struct Signals {
    /// Stop (SIGINT, SIGTERM): a sweep still discovering ends at its next
    /// round; one that is programming finishes first. Shared with the
    /// sweep itself ([`crate::sweep::SweepOptions::stop`]).
    pub stop: Arc<AtomicBool>,
    /// Rescan the engine directories before the next sweep (SIGHUP).
    pub reload: AtomicBool,
    /// A heavy sweep now (the control socket's `sweep`).
    pub sweep: AtomicBool,
    /// A heavy sweep now that routes afresh: the unicast cache is dropped
    /// (the control socket's `reroute`).
    pub reroute: AtomicBool,
    /// Switch ports the performance manager's isolation policy asks to
    /// disable or enable ([`crate::perfmgr::isolation`]).
    pub isolate: Mutex<Vec<crate::perfmgr::isolation::Request>>,
}

/// What `status` reports; the SM loop updates it after every heavy sweep.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// Lines of `key: value`.
    pub lines: Vec<(String, String)>,
    /// The last heavy sweep, for `portstatus`, `lidbalance` and `route`.
    pub view: Option<Arc<SweepView>>,
    /// The configuration in force, for `dump_conf`.
    pub conf: Option<Arc<Vec<(String, Value)>>>,
    /// Differences from `expect_topology` by kind, as the last heavy sweep
    /// found them (`None`: no expected cabling).
    pub cabling: Option<std::collections::BTreeMap<String, usize>>,
    /// The SA's database in force, for `explain`.
    pub paths: Option<crate::explain::PathView>,
}

/// Publishes a heavy sweep's outcome to the console. The view is built
/// before the lock is taken: readers of `status` (the console, the metrics
/// endpoint) never wait for it.
pub fn publish(status: &Mutex<Status>, outcome: &crate::pipeline::OnceOutcome) {
    let view = Arc::new(SweepView::of(outcome));
    status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).view = Some(view);
}

/// Publishes the configuration in force for `dump_conf` (at start, and
/// again whenever it is re-read).
pub fn publish_config(status: &Mutex<Status>, config: &crate::config::Config) {
    let conf = Arc::new(view::config_lines(config));
    status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).conf = Some(conf);
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
    served: Option<crate::listener::Served>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        // The thread first: nobody may find the socket after it is gone.
        drop(self.served.take());
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
    serve_with(path, signals, status, Extras::default())
}

/// Asks the SA from a host of the embedded fabric: the words after
/// `saquery`, the answer's text and JSON.
pub type SaQuery = Arc<dyn Fn(&[&str]) -> Result<(String, Value), String> + Send + Sync>;

/// What the control socket answers beyond the SM's flags and status.
#[derive(Default, Clone)]
pub struct Extras {
    /// `perfmgr`: the performance manager's database, when it runs.
    pub perf: Option<Arc<Mutex<crate::perfmgr::PerfDb>>>,
    /// `loglevel`: the filter of the log smcore installed.
    pub log: Option<crate::logging::LogFilter>,
    /// `saquery`: SA queries from the embedded fabric's hosts.
    pub saquery: Option<SaQuery>,
}

/// [`serve`], also answering what `extras` holds.
pub fn serve_with(
    path: &Path,
    signals: Arc<Signals>,
    status: Arc<Mutex<Status>>,
    extras: Extras,
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
    let wake_path = path.to_path_buf();
    let served = crate::listener::serve(
        "control socket",
        move || listener.accept().map(|(stream, _)| stream),
        move |stream| handle(stream, &signals, &status, &extras),
        move || {
            let _ = UnixStream::connect(&wake_path);
        },
    )
    .map_err(io)?;
    info!(socket = %path.display(), "control socket listening");
    Ok(ControlSocket { path: path.to_path_buf(), served: Some(served) })
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

/// A verb's answer: text for people and the same as JSON, or an error.
type Answer = Result<(String, Value), String>;

fn ok(message: &str) -> Answer {
    Ok((format!("ok: {message}\n"), json!({ "ok": message })))
}

/// The commands, for the error that names them.
const COMMANDS: &str = "reload, sweep, reroute, status, portstatus, lidbalance, route, perfmgr, dump_conf, loglevel, saquery, explain";

fn handle(stream: UnixStream, signals: &Signals, status: &Mutex<Status>, extras: &Extras) {
    let allowed = peer_allowed(&stream);
    // A client that never writes must not hold the SM's only control
    // thread.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut line = String::new();
    let mut reader = BufReader::new(stream.take(256));
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut words = line.split_whitespace().peekable();
    let as_json = words.next_if_eq(&"--json").is_some();
    let verb = words.next().unwrap_or("");
    let args: Vec<&str> = words.collect();
    let answer = match allowed {
        Err(why) => {
            warn!("control socket: refused: {why}");
            Err(why)
        }
        Ok(_) => answer(verb, &args, signals, status, extras),
    };
    info!(command = line.trim(), "control command");
    let text = match (answer, as_json) {
        (Ok((text, _)), false) => text,
        (Ok((_, value)), true) => format!("{value}\n"),
        (Err(why), false) => format!("error: {why}\n"),
        (Err(why), true) => format!("{}\n", json!({ "error": why })),
    };
    let mut stream = reader.into_inner().into_inner();
    let _ = stream.write_all(text.as_bytes());
}

fn answer(
    verb: &str,
    args: &[&str],
    signals: &Signals,
    status: &Mutex<Status>,
    extras: &Extras,
) -> Answer {
    let (perf, log) = (extras.perf.as_deref(), extras.log.as_ref());
    let takes_arg = matches!(verb, "loglevel" | "saquery" | "explain");
    if !takes_arg && !args.is_empty() {
        return Err(format!("{verb} takes no argument"));
    }
    // Clones of the Arcs: the lock is held for no longer than that.
    let (view, conf, paths) = {
        let s = status.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (s.view.clone(), s.conf.clone(), s.paths.clone())
    };
    let need_view = || view.clone().ok_or_else(|| "no heavy sweep has finished yet".to_string());
    match verb {
        "reload" => {
            signals.reload.store(true, Ordering::Relaxed);
            ok("engine directories will be rescanned, then a heavy sweep")
        }
        "sweep" => {
            signals.sweep.store(true, Ordering::Relaxed);
            ok("heavy sweep requested")
        }
        "reroute" => {
            signals.reroute.store(true, Ordering::Relaxed);
            ok("heavy sweep requested; the routing is computed afresh (the unicast cache is dropped)")
        }
        "status" => {
            let s = status.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let object: serde_json::Map<String, Value> = s.lines.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            Ok((s.render(), Value::Object(object)))
        }
        "portstatus" => {
            let v = need_view()?;
            Ok((v.render_ports(), serde_json::to_value(&v.ports).unwrap_or(Value::Null)))
        }
        "lidbalance" => {
            let v = need_view()?;
            Ok((v.render_balance(), v.balance_json()))
        }
        "route" => {
            let v = need_view()?;
            Ok((v.render_route(), v.route.clone()))
        }
        "dump_conf" => {
            let conf = conf.ok_or_else(|| "the configuration is not published yet".to_string())?;
            let view = SweepView { conf: conf.to_vec(), ..Default::default() };
            Ok((view.render_conf(), view.conf_json()))
        }
        "loglevel" => match (args, log) {
            (_, None) => Err("logging was not set up by smcore; its filter cannot change".to_string()),
            ([], Some(log)) => {
                let current = log.current();
                Ok((format!("{current}\n"), json!({ "filter": current })))
            }
            ([filter], Some(log)) => {
                let previous = log.set(filter).map_err(|e| e.to_string())?;
                info!(filter, previous = %previous, "log filter changed from the control socket");
                let text = format!("ok: log filter {filter} (was {previous})\n");
                Ok((text, json!({ "ok": "log filter changed", "filter": filter, "previous": previous })))
            }
            _ => Err("loglevel takes one filter (e.g. `debug` or `sm_core::sweep=trace,info`)".to_string()),
        },
        "perfmgr" => match perf {
            // The manager holds the lock for one read of the fabric at
            // most: the answer waits for that, never for a sweep.
            Some(db) => {
                let d = db.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                Ok((d.report(PERFMGR_TOP), perfmgr_json(&d)))
            }
            None => Err("the performance manager is off (opensm.conf `perfmgr TRUE`, or a umad port)".to_string()),
        },
        "saquery" => match &extras.saquery {
            Some(ask) => ask(args),
            None => Err("saquery asks from a host of the embedded fabric (`--fabric`); on a real fabric use saquery(8)".to_string()),
        },
        "explain" => {
            let paths = paths.ok_or_else(|| "no heavy sweep has finished yet".to_string())?;
            let mut e = crate::explain::explain_words(&paths.db, &paths.defaults, args).map_err(|e| e.to_string())?;
            e.rename(&paths.names);
            Ok((e.render(), serde_json::to_value(&e).unwrap_or(Value::Null)))
        }
        other => Err(format!("unknown command {other:?} ({COMMANDS})")),
    }
}

/// `perfmgr --json`: the figures of [`crate::perfmgr::PerfDb::report`].
fn perfmgr_json(d: &crate::perfmgr::PerfDb) -> Value {
    use crate::perfmgr::counters::ERROR_COUNTERS;
    use sm_mad::perf::COUNTER_NAMES;
    let top: Vec<Value> = d
        .top_error_ports(PERFMGR_TOP)
        .into_iter()
        .map(|r| {
            let counters: serde_json::Map<String, Value> = ERROR_COUNTERS
                .filter(|&i| r.history.totals[i] > 0)
                .map(|i| {
                    let counts = json!({ "delta": r.history.delta.values[i], "total": r.history.totals[i] });
                    (COUNTER_NAMES[i].0.to_string(), counts)
                })
                .collect();
            json!({
                "guid": format!("{:#018x}", r.target.node_guid),
                "node": r.target.node_desc,
                "port": r.target.port,
                "lid": r.target.lid,
                "counters": counters,
            })
        })
        .collect();
    json!({
        "sweeps": d.sweeps,
        "ports": d.ports.len(),
        "events": d.events,
        "last_sweep": { "sent": d.last_stats.sent, "answered": d.last_stats.answered, "lost": d.last_stats.lost },
        "top_error_ports": top,
        "recent_events": d.recent.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
    })
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
        assert!(request(&path, "reroute").expect("reroute").starts_with("ok"));
        assert!(signals.reroute.load(Ordering::Relaxed));
        // Nothing swept yet: the fabric verbs say so, as text and as JSON.
        assert_eq!(request(&path, "portstatus").expect("answer"), "error: no heavy sweep has finished yet\n");
        let answer = request(&path, "--json lidbalance").expect("answer");
        let v: Value = serde_json::from_str(&answer).expect("JSON");
        assert_eq!(v["error"], "no heavy sweep has finished yet");
        let v: Value = serde_json::from_str(&request(&path, "--json status").expect("answer")).expect("JSON");
        assert_eq!(v["role"], "master");
        assert!(request(&path, "status now").expect("answer").starts_with("error: status takes no argument"));
        // The configuration, published at start, with its secrets masked.
        let config = crate::config::Config::parse("sm_key = 77\nlmc = 1\n", Path::new("t.toml")).expect("config");
        publish_config(&status, &config);
        let conf = request(&path, "dump_conf").expect("dump_conf");
        assert!(conf.contains("lmc 1\n") && conf.contains("sm_key ********\n") && !conf.contains("77"), "{conf}");
        let v: Value = serde_json::from_str(&request(&path, "--json dump_conf").expect("answer")).expect("JSON");
        assert_eq!(v["sm_key"], "********");
        // This test process installed no subscriber through smcore.
        assert!(request(&path, "loglevel debug").expect("answer").starts_with("error: logging was not set up"));
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
