//! Prometheus metrics: what the SM did and what the fabric's counters say,
//! as the text exposition format on a loopback HTTP endpoint
//! (`metrics_listen = "127.0.0.1:9464"`).
//!
//! The endpoint is loopback only: it names every node of the fabric, and
//! the people a site would not show its layout to share the fabric (a
//! site exports it further through its own proxy). Node descriptions come
//! from the fabric, so label values are escaped as the format requires: a
//! host cannot forge a series with a crafted NodeDescription.
//!
//! The server is a small HTTP/1.0 responder: a thread accepts, and each
//! connection is answered on a thread of its own, at most
//! [`MAX_CLIENTS`] at once (one more is told 503 and closed). One request
//! per connection, read whole within [`REQUEST_DEADLINE`] however the
//! client spaces its bytes, `GET /metrics` answered, anything else 404.
//! A client that never sends, or sends a byte a second, holds one slot
//! for the deadline and never a scrape, nor the SM.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sm_mad::perf::COUNTER_NAMES;
use tracing::info;

use crate::control::Status;
use crate::perfmgr::PerfDb;
use crate::pipeline::OnceOutcome;

/// What the SM loop records after each heavy sweep.
#[derive(Debug, Default)]
pub struct SweepMetrics {
    heavy_sweeps: u64,
    routed: bool,
    engine: String,
    credit_loops: Option<bool>,
    switches: usize,
    end_ports: usize,
    last_phase_seconds: BTreeMap<String, f64>,
    phase_seconds_total: BTreeMap<String, f64>,
    smps_sent: u64,
    smps_unanswered: u64,
    smps_retried: u64,
}

/// Everything the endpoint shows, shared between the SM loop (writer),
/// the SA thread (request count) and the server (reader).
#[derive(Debug, Default)]
pub struct Metrics {
    sweeps: Mutex<SweepMetrics>,
    /// SA requests handled (the SA thread counts them).
    pub sa_requests: Arc<AtomicU64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Metrics {
    /// Metrics counting SA requests on `sa_requests` (the SA thread's
    /// counter), or on a counter of their own when there is no SA.
    pub fn new(sa_requests: Option<Arc<AtomicU64>>) -> Self {
        Self { sweeps: Mutex::default(), sa_requests: sa_requests.unwrap_or_default() }
    }

    /// Takes in one heavy sweep.
    pub fn record_heavy(&self, outcome: &OnceOutcome) {
        let mut m = lock(&self.sweeps);
        m.heavy_sweeps += 1;
        m.routed = outcome.accepted.is_some();
        m.engine = outcome.report.engine.clone().unwrap_or_default();
        m.credit_loops = outcome.report.credit_loops;
        m.switches = outcome.report.switches;
        m.end_ports = outcome.report.end_ports;
        m.last_phase_seconds.clear();
        for (phase, ms) in &outcome.report.phases_ms {
            m.last_phase_seconds.insert(phase.clone(), ms / 1000.0);
            *m.phase_seconds_total.entry(phase.clone()).or_insert(0.0) += ms / 1000.0;
        }
        let stats = [&outcome.sweep.discovery_smps, &outcome.sweep.program_smps];
        m.smps_sent += stats.iter().map(|s| s.sent).sum::<u64>() + outcome.program.total_smps();
        m.smps_unanswered += stats.iter().map(|s| s.unanswered).sum::<u64>();
        m.smps_retried += stats.iter().map(|s| s.retries).sum::<u64>();
    }

    /// The exposition text: SM state from `status`, sweeps, SA, and the
    /// performance manager's counters when it runs.
    pub fn render(&self, status: Option<&Mutex<Status>>, perf: Option<&Mutex<PerfDb>>) -> String {
        let mut out = String::new();
        metric_family(&mut out, "smcore_up", "gauge", "1 while the SM runs.");
        let _ = writeln!(out, "smcore_up 1");
        let role = status
            .map(|s| lock(s).lines.iter().find(|(k, _)| k == "role").map(|(_, v)| v.clone()).unwrap_or_default())
            .unwrap_or_default();
        metric_family(&mut out, "smcore_sm_role", "gauge", "The SM's role (master, standby, ...), as a label.");
        let _ = writeln!(out, "smcore_sm_role{{role=\"{}\"}} 1", escape(if role.is_empty() { "starting" } else { &role }));
        {
            let m = lock(&self.sweeps);
            metric_family(&mut out, "smcore_heavy_sweeps_total", "counter", "Heavy sweeps since start.");
            let _ = writeln!(out, "smcore_heavy_sweeps_total {}", m.heavy_sweeps);
            metric_family(&mut out, "smcore_routed", "gauge", "1 when the last heavy sweep's routing was accepted and programmed.");
            let _ = writeln!(out, "smcore_routed {}", u8::from(m.routed));
            metric_family(&mut out, "smcore_routing_engine", "gauge", "The engine that routed the last heavy sweep, as a label.");
            let _ = writeln!(out, "smcore_routing_engine{{engine=\"{}\"}} 1", escape(&m.engine));
            metric_family(&mut out, "smcore_credit_loops", "gauge", "1 when the last routing has a credit loop, 0 when checked free.");
            if let Some(loops) = m.credit_loops {
                let _ = writeln!(out, "smcore_credit_loops {}", u8::from(loops));
            }
            metric_family(&mut out, "smcore_fabric_switches", "gauge", "Switches the last heavy sweep found.");
            let _ = writeln!(out, "smcore_fabric_switches {}", m.switches);
            metric_family(&mut out, "smcore_fabric_end_ports", "gauge", "End ports the last heavy sweep found.");
            let _ = writeln!(out, "smcore_fabric_end_ports {}", m.end_ports);
            metric_family(&mut out, "smcore_sweep_phase_seconds", "gauge", "Duration of each phase of the last heavy sweep.");
            for (phase, s) in &m.last_phase_seconds {
                let _ = writeln!(out, "smcore_sweep_phase_seconds{{phase=\"{}\"}} {s}", escape(phase));
            }
            metric_family(&mut out, "smcore_sweep_phase_seconds_total", "counter", "Time spent in each phase over all heavy sweeps.");
            for (phase, s) in &m.phase_seconds_total {
                let _ = writeln!(out, "smcore_sweep_phase_seconds_total{{phase=\"{}\"}} {s}", escape(phase));
            }
            metric_family(&mut out, "smcore_smps_sent_total", "counter", "SMPs sent by heavy sweeps.");
            let _ = writeln!(out, "smcore_smps_sent_total {}", m.smps_sent);
            metric_family(&mut out, "smcore_smps_lost_total", "counter", "SMPs left unanswered after their retries.");
            let _ = writeln!(out, "smcore_smps_lost_total {}", m.smps_unanswered);
            metric_family(&mut out, "smcore_smps_retried_total", "counter", "SMPs sent again after no answer.");
            let _ = writeln!(out, "smcore_smps_retried_total {}", m.smps_retried);
        }
        if let Some(cabling) = status.and_then(|s| lock(s).cabling.clone()) {
            metric_family(
                &mut out,
                "smcore_cabling_differences",
                "gauge",
                "Differences between the fabric and expect_topology at the last comparison, by kind.",
            );
            for (kind, n) in cabling {
                let _ = writeln!(out, "smcore_cabling_differences{{kind=\"{}\"}} {n}", escape(&kind));
            }
        }
        metric_family(&mut out, "smcore_sa_requests_total", "counter", "SA requests handled.");
        let _ = writeln!(out, "smcore_sa_requests_total {}", self.sa_requests.load(Ordering::Relaxed));
        if let Some(perf) = perf {
            render_perf(&mut out, &lock(perf));
        }
        out
    }
}

fn metric_family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn render_perf(out: &mut String, db: &PerfDb) {
    metric_family(out, "smcore_perfmgr_sweeps_total", "counter", "Reads of every port's counters.");
    let _ = writeln!(out, "smcore_perfmgr_sweeps_total {}", db.sweeps);
    metric_family(out, "smcore_perfmgr_events_total", "counter", "Error threshold crossings.");
    let _ = writeln!(out, "smcore_perfmgr_events_total {}", db.events);
    metric_family(out, "smcore_perfmgr_queries_lost_total", "counter", "PMA requests left unanswered.");
    let _ = writeln!(out, "smcore_perfmgr_queries_lost_total {}", db.total_stats.lost);
    metric_family(
        out,
        "smcore_port_counter_total",
        "counter",
        "A port's PMA counter, summed over the deltas the performance manager read (data counters in units of 4 bytes).",
    );
    for r in db.ports.values() {
        for (i, (name, _)) in COUNTER_NAMES.iter().enumerate() {
            let _ = writeln!(
                out,
                "smcore_port_counter_total{{node_guid=\"{:#018x}\",port=\"{}\",node_desc=\"{}\",counter=\"{}\"}} {}",
                r.target.node_guid,
                r.target.port,
                escape(&r.target.node_desc),
                name,
                r.history.totals[i]
            );
        }
    }
}

/// A label value as the exposition format wants it: backslash, quote and
/// newline escaped; other control characters dropped.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Why the endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Not a loopback address.
    #[error("metrics_listen {0}: the metrics endpoint listens on loopback only (127.0.0.1 or ::1)")]
    NotLoopback(SocketAddr),
    /// Bind failed.
    #[error("metrics_listen {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The running endpoint; dropping it stops the thread.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    _served: crate::listener::Served,
}

impl MetricsServer {
    /// The address bound (the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

/// What the endpoint reads.
#[derive(Debug, Clone)]
pub struct Sources {
    /// Sweep and SA figures.
    pub metrics: Arc<Metrics>,
    /// The SM's status lines (its role).
    pub status: Option<Arc<Mutex<Status>>>,
    /// The performance manager's database, when it runs.
    pub perf: Option<Arc<Mutex<PerfDb>>>,
    /// Series rendered elsewhere (`smcore shadow`'s), appended as they are.
    pub extra: Option<Arc<Mutex<String>>>,
}

/// Listens on `addr` (loopback only) and serves `/metrics`.
pub fn serve(addr: SocketAddr, sources: Sources) -> Result<MetricsServer, MetricsError> {
    if !addr.ip().is_loopback() {
        return Err(MetricsError::NotLoopback(addr));
    }
    let listener = TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(|source| MetricsError::Bind { addr, source })?;
    let served = crate::listener::serve(
        "metrics endpoint",
        move || listener.accept().map(|(stream, _)| stream),
        {
            let clients = Arc::new(Mutex::new(Clients::default()));
            move |stream| dispatch(stream, &sources, &clients)
        },
        move || {
            let _ = TcpStream::connect_timeout(&bound, Duration::from_millis(200));
        },
    )
    .map_err(|source| MetricsError::Bind { addr, source })?;
    info!(%bound, "metrics endpoint listening");
    Ok(MetricsServer { addr: bound, _served: served })
}

/// Connections answered at once; more are refused with 503.
pub const MAX_CLIENTS: usize = 8;

/// The time a client has to send its whole request (line and headers).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// The time each write of the answer may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A stream read against one deadline for all its reads: each read waits
/// at most what is left, so a client cannot stretch its request by
/// sending a byte just before each read's timeout.
struct Deadlined {
    stream: TcpStream,
    deadline: Instant,
}

impl Read for Deadlined {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "request not sent in time"));
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// The clients being answered: how many, and those still sending their
/// request, oldest first (with a handle to close them by).
#[derive(Default)]
struct Clients {
    next: u64,
    active: usize,
    reading: std::collections::VecDeque<(u64, TcpStream)>,
}

/// One client's place in [`Clients`], given back when its thread ends.
struct Slot {
    id: u64,
    clients: Arc<Mutex<Clients>>,
}

impl Slot {
    /// The request is read: the client is no longer one that may give way.
    fn read_done(&self) {
        lock(&self.clients).reading.retain(|(id, _)| *id != self.id);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = lock(&self.clients);
        c.active -= 1;
        c.reading.retain(|(id, _)| *id != self.id);
    }
}

/// Answers `stream` on a thread of its own. With [`MAX_CLIENTS`] being
/// answered, the one that has been sending its request longest is closed
/// to make room (a scrape sends its request at once, a client holding a
/// slot does not); when all are past their request, the newcomer gets 503.
fn dispatch(mut stream: TcpStream, sources: &Sources, clients: &Arc<Mutex<Clients>>) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let slot = {
        let mut c = lock(clients);
        if c.active >= MAX_CLIENTS {
            match c.reading.pop_front() {
                // Its read ends at once; its thread gives its slot back.
                Some((_, oldest)) => {
                    let _ = oldest.shutdown(std::net::Shutdown::Both);
                }
                None => {
                    drop(c);
                    let _ = stream.write_all(b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    return;
                }
            }
        }
        let Ok(handle) = stream.try_clone() else { return };
        c.next += 1;
        c.active += 1;
        let id = c.next;
        c.reading.push_back((id, handle));
        Slot { id, clients: Arc::clone(clients) }
    };
    let sources = sources.clone();
    let spawned = std::thread::Builder::new().name("metrics client".into()).spawn(move || answer(stream, &sources, &slot));
    if let Err(e) = spawned {
        // The closure (and its slot) is dropped with the error.
        tracing::warn!("metrics endpoint: no thread for a client: {e}");
    }
}

fn answer(stream: TcpStream, sources: &Sources, slot: &Slot) {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let Ok(write_end) = stream.try_clone() else { return };
    let mut reader = BufReader::new(Deadlined { stream, deadline }.take(8192));
    let mut request_line = String::new();
    if !reader.read_line(&mut request_line).is_ok_and(|n| n > 0) {
        return;
    }
    // The headers are read (and ignored) so the client sees its request
    // taken before the answer; a request cut short (the deadline, the
    // client closed, or closed to make room) gets no answer.
    let mut header = String::new();
    loop {
        header.clear();
        match reader.read_line(&mut header) {
            Ok(n) if n > 0 && header.ends_with('\n') => {
                if header.trim().is_empty() {
                    break;
                }
            }
            _ => return,
        }
    }
    slot.read_done();
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (code, body) = if method == "GET" && (path == "/metrics" || path.starts_with("/metrics?")) {
        ("200 OK", {
            let mut body = sources.metrics.render(sources.status.as_deref(), sources.perf.as_deref());
            if let Some(extra) = &sources.extra {
                body.push_str(&extra.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            }
            body
        })
    } else {
        ("404 Not Found", "only /metrics here\n".to_string())
    };
    let mut stream = write_end;
    let head = format!(
        "HTTP/1.0 {code}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").expect("send");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read");
        text
    }

    #[test]
    fn metrics_are_served_on_loopback_and_other_paths_are_404() {
        let sources = Sources { metrics: Arc::new(Metrics::default()), status: None, perf: None, extra: None };
        sources.metrics.sa_requests.fetch_add(7, Ordering::Relaxed);
        let server = serve("127.0.0.1:0".parse().expect("addr"), sources).expect("serve");
        let text = get(server.local_addr(), "/metrics");
        assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
        assert!(text.contains("\nsmcore_sa_requests_total 7\n"), "{text}");
        assert!(text.contains("# TYPE smcore_heavy_sweeps_total counter"), "{text}");
        assert!(get(server.local_addr(), "/").starts_with("HTTP/1.0 404"));
    }

    fn endpoint() -> MetricsServer {
        let sources = Sources { metrics: Arc::new(Metrics::default()), status: None, perf: None, extra: None };
        serve("127.0.0.1:0".parse().expect("addr"), sources).expect("serve")
    }

    /// A client that sends a request line and then a header a byte at a
    /// time, `every` apart, never ending it, until `stop` or its
    /// connection breaks; returns a handle to read its end.
    fn trickle(addr: SocketAddr, every: Duration, stop: &Arc<std::sync::atomic::AtomicBool>) -> (TcpStream, std::thread::JoinHandle<()>) {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(b"GET /metrics HTTP/1.0\r\nX-Slow: ").expect("send");
        let reader = s.try_clone().expect("clone");
        let stop = Arc::clone(stop);
        let t = std::thread::spawn(move || {
            // At most a minute, whatever happens.
            for _ in 0..(60_000 / every.as_millis().max(1)) {
                if stop.load(Ordering::Relaxed) || s.write_all(b"a").is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        });
        (reader, t)
    }

    #[test]
    fn a_client_sending_a_byte_at_a_time_does_not_hold_a_scrape() {
        let server = endpoint();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Connected first: a server answering one client at a time would
        // be reading it while the scrape waits behind.
        let (_slow, t) = trickle(server.local_addr(), Duration::from_millis(100), &stop);
        let mut s = TcpStream::connect(server.local_addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n").expect("send");
        let mut text = String::new();
        let answered = s.read_to_string(&mut text);
        stop.store(true, Ordering::Relaxed);
        t.join().expect("slow client");
        answered.expect("the scrape is answered while the slow client still sends");
        assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
    }

    #[test]
    fn a_request_not_sent_whole_by_the_deadline_is_closed_unanswered() {
        let server = endpoint();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (mut slow, t) = trickle(server.local_addr(), Duration::from_millis(200), &stop);
        // Far past REQUEST_DEADLINE: a per-read timeout would never end it.
        slow.set_read_timeout(Some(REQUEST_DEADLINE * 6)).expect("timeout");
        let mut text = Vec::new();
        let end = slow.read_to_end(&mut text);
        stop.store(true, Ordering::Relaxed);
        t.join().expect("slow client");
        match end {
            Ok(_) => {}
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "closed by the server, not held: {e}"),
        }
        assert!(text.is_empty(), "no answer to a request never finished: {:?}", String::from_utf8_lossy(&text));
    }

    #[test]
    fn when_full_the_longest_unfinished_request_gives_way_to_a_scrape() {
        let server = endpoint();
        let idle: Vec<TcpStream> = (0..MAX_CLIENTS).map(|_| TcpStream::connect(server.local_addr()).expect("connect")).collect();
        let mut s = TcpStream::connect(server.local_addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n").expect("send");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("answered");
        assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
        // The first idle client was closed to make room, unanswered.
        let mut first = &idle[0];
        first.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut rest = Vec::new();
        assert!(first.read_to_end(&mut rest).is_ok_and(|n| n == 0), "{rest:?}");
    }

    #[test]
    fn a_non_loopback_address_is_refused() {
        let sources = Sources { metrics: Arc::new(Metrics::default()), status: None, perf: None, extra: None };
        assert!(matches!(serve("0.0.0.0:0".parse().expect("addr"), sources), Err(MetricsError::NotLoopback(_))));
    }

    #[test]
    fn a_crafted_node_description_cannot_forge_a_series() {
        let forged = "x\"} 1\nsmcore_routed 0\n";
        let e = escape(forged);
        assert!(!e.contains('\n') && e.matches('"').count() == e.matches("\\\"").count(), "{e}");
        assert_eq!(escape("a\\b"), "a\\\\b");
    }
}
