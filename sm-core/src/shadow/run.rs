//! Driving shadow rounds: once, or every interval beside the SM in charge,
//! with the report in a file, on the metrics endpoint and behind
//! `smcore ctl status`.
//!
//! The shadow runs on a umad port bound as an observer
//! ([`crate::sweep::UmadPort::open_observer`]) with a GSI agent of its own
//! for the master's SA, or on the embedded fabric from one of its hosts,
//! after an SM has programmed it ([`EmbeddedMaster`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sm_sim::SharedFabric;
use sm_transport::gmp::GmpAgent;
use sm_transport::SmpPort;
use tracing::{error, info, warn};

use super::{round, Live, PathSls, ShadowOptions, ShadowReport};
use crate::config::Config;
use crate::engines::Registry;

/// How long one PathRecord may take.
const SA_TIMEOUT: Duration = Duration::from_millis(500);

/// Where the shadow looks from.
pub enum Vantage {
    /// A umad port (real HCA, or ibsim under umad2sim).
    Umad {
        /// The CA, e.g. `mlx5_0` (default: the first with an active port).
        ca: Option<String>,
        /// Its port.
        port: Option<u8>,
        /// Time an SMP's answer may take.
        timeout: Duration,
        /// SMPs in flight at once.
        window: usize,
    },
    /// A host port of the embedded fabric.
    Embedded {
        /// The fabric (programmed by an SM before).
        fabric: SharedFabric,
        /// The host's node and port.
        at: (usize, u8),
        /// The SM that programmed it, kept (its SA answering) while the
        /// shadow runs.
        master: Option<EmbeddedMaster>,
    },
}

/// Everything one run takes besides where it looks from.
pub struct RunOptions {
    /// One round, then exit.
    pub once: bool,
    /// Time between rounds.
    pub interval: Duration,
    /// Where the report goes as JSON (replaced after every round).
    pub report: Option<PathBuf>,
    /// OpenSM-format dumps of both routings after every round:
    /// `DIR/live/` the master's as read, `DIR/smcore/` smcore's.
    pub dump_dir: Option<PathBuf>,
    /// Path SLs from this `.psl` file instead of the SA.
    pub path_sl: Option<PathBuf>,
    /// Ask no SA (path SLs from the file, or SL 0).
    pub no_sa: bool,
    /// PathRecords asked at most per round.
    pub sa_limit: usize,
    /// smcore's engine chain.
    pub engines: String,
    /// Retries of an unanswered Get.
    pub retries: u32,
    /// Compare the fabric with this intended cabling every round.
    pub expect: Option<PathBuf>,
    /// Serve the shadow's series here (loopback).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Answer `smcore ctl` here.
    pub control_socket: Option<PathBuf>,
}

/// What ended a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The port could not be opened or was lost.
    #[error("{0}")]
    Transport(String),
    /// Bad input (engine list, path-SL file, report path, endpoints).
    #[error("{0}")]
    Input(String),
}

/// The last round, for callers (tests, `--once`).
pub struct Finished {
    /// Its report.
    pub report: ShadowReport,
    /// The routings it judged.
    pub live: Live,
}

/// Runs rounds until `once` is done or `stop` is set.
pub fn run(
    vantage: Vantage,
    registry: &Registry,
    config: &Config,
    options: &RunOptions,
    signals: Arc<crate::control::Signals>,
) -> Result<Option<Finished>, RunError> {
    let status = Arc::new(Mutex::new(crate::control::Status::default()));
    let series = Arc::new(Mutex::new(String::new()));
    {
        let mut s = status.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        s.set("role", "shadow (reads the fabric; never writes, takes no part in the SM election, serves no SA)");
        s.set("engines", options.engines.as_str());
    }
    let _control = match &options.control_socket {
        Some(path) => Some(
            crate::control::serve(path, Arc::clone(&signals), Arc::clone(&status)).map_err(|e| RunError::Input(e.to_string()))?,
        ),
        None => None,
    };
    let _metrics = match options.metrics_listen {
        Some(addr) => {
            let sources = crate::metrics::Sources {
                metrics: Arc::new(crate::metrics::Metrics::default()),
                status: None,
                perf: None,
                extra: Some(Arc::clone(&series)),
            };
            Some(crate::metrics::serve(addr, sources).map_err(|e| RunError::Input(e.to_string()))?)
        }
        None => None,
    };
    let settings = config.route_settings();
    let expected = match &options.expect {
        Some(path) => Some(crate::cabling::load_expected(path).map_err(|e| RunError::Input(e.to_string()))?),
        None => None,
    };
    let shadow =
        ShadowOptions { engines: &options.engines, settings: &settings, retries: options.retries, expect: expected.as_ref() };
    let mut opened = Opened::open(vantage)?;
    let mut rounds = 0u64;
    loop {
        signals.sweep.store(false, Ordering::Relaxed);
        let (port, agent) = opened.parts();
        let path_sls = match (&options.path_sl, agent) {
            (Some(file), _) => PathSls::File(file),
            (None, Some(agent)) if !options.no_sa => PathSls::Sa { agent, limit: options.sa_limit, timeout: SA_TIMEOUT },
            _ => PathSls::Zero,
        };
        match round(port, path_sls, registry, &shadow) {
            Ok((report, live)) => {
                rounds += 1;
                publish(&status, &series, &report, rounds);
                // `smcore ctl explain` answers on the live routing.
                let paths = live.path_view();
                status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).paths = Some(paths);
                if let Some(path) = &options.report {
                    write_report(path, &report)?;
                }
                if let Some(dir) = &options.dump_dir {
                    write_dumps(dir, &live)?;
                }
                info!(
                    round = rounds,
                    live_sound = report.live.sound(),
                    entries_differ = report.diff.as_ref().map_or(0, |d| d.entries_differ),
                    gets = report.read.gets,
                    ms = report.elapsed_ms,
                    "shadow round done"
                );
                if options.once {
                    return Ok(Some(Finished { report, live }));
                }
            }
            Err(super::ShadowError::PathSlFile(e)) => return Err(RunError::Input(e)),
            Err(super::ShadowError::Engines(e)) => return Err(RunError::Input(e)),
            Err(e) => {
                error!(error = %e, "shadow round failed");
                status.lock().unwrap_or_else(std::sync::PoisonError::into_inner).set("last round", format!("failed: {e}"));
                if options.once {
                    return Err(RunError::Transport(e.to_string()));
                }
            }
        }
        let until = Instant::now() + options.interval;
        while Instant::now() < until {
            if signals.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if signals.sweep.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if signals.stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
    }
}

/// The status lines and the series of `report`.
fn publish(status: &Mutex<crate::control::Status>, series: &Mutex<String>, report: &ShadowReport, rounds: u64) {
    let verdict = |v: &super::Verdict| {
        format!(
            "{}: {} unreachable, {} looping, credit loops {}, busiest link {}, {} VLs",
            if v.sound() { "sound" } else { "UNSOUND" },
            v.unreachable,
            v.looping,
            match v.credit_loops {
                Some(true) => "yes",
                Some(false) => "no",
                None => "not checked",
            },
            v.busiest_link,
            v.vls_used
        )
    };
    let mut s = status.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    s.set("rounds", rounds.to_string());
    s.set("last round", format!("{} ms, {} SubnGets, {} refused", report.elapsed_ms, report.read.gets, report.read.refused));
    s.set("fabric", format!("{} switches, {} end ports, master SM LID {}", report.switches, report.end_ports, report.master_lid));
    s.set("path SLs", report.path_sl.source.clone());
    s.set("live routing", verdict(&report.live));
    match (&report.smcore_engine, &report.smcore) {
        (Some(e), Some(v)) => s.set("smcore routing", format!("{e}, {}", verdict(v))),
        _ => s.set("smcore routing", format!("none: {}", report.smcore_attempts.join("; "))),
    }
    if let Some(c) = &report.cabling {
        s.set("cabling", format!("{} differences from the intended cabling", c.differences()));
    }
    if let Some(d) = &report.diff {
        s.set(
            "difference",
            format!("{} of {} LFT entries ({}%) on {} switches", d.entries_differ, d.entries_compared, d.percent, d.switches_differ),
        );
    }
    drop(s);
    *series.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = report.prometheus(rounds);
}

/// The live routing and smcore's as OpenSM's dump files, for `ibdmchk`
/// and for comparing with a read-back.
fn write_dumps(dir: &Path, live: &Live) -> Result<(), RunError> {
    let mut routings = vec![("live", &live.live)];
    if let Some(ours) = &live.smcore {
        routings.push(("smcore", ours));
    }
    for (name, accepted) in routings {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).map_err(|e| RunError::Input(format!("{}: {e}", sub.display())))?;
        crate::dump::write_all(&sub, &accepted.snapshot, &accepted.routing)
            .map_err(|e| RunError::Input(format!("{}: {e}", sub.display())))?;
    }
    Ok(())
}

fn write_report(path: &Path, report: &ShadowReport) -> Result<(), RunError> {
    let json = serde_json::to_string_pretty(report).map_err(|e| RunError::Input(e.to_string()))?;
    crate::safe_fs::replace_bytes(path, crate::safe_fs::PUBLIC, (json + "\n").as_bytes())
        .map_err(|e| RunError::Input(format!("{}: {e}", path.display())))
}

/// The shadow's port and SA agent, opened.
enum Opened {
    Umad { port: Box<crate::sweep::UmadPort>, agent: Option<crate::sweep::umad::GsiClient> },
    Embedded { port: sm_sim::SharedSimPort, agent: sm_sim::SimGmpAgent, _master: Option<EmbeddedMaster> },
}

impl Opened {
    fn open(vantage: Vantage) -> Result<Opened, RunError> {
        match vantage {
            Vantage::Umad { ca, port, timeout, window } => {
                let smp = crate::sweep::UmadPort::open_observer(ca.as_deref(), port, timeout, window)
                    .map_err(|e| RunError::Transport(e.to_string()))?;
                let device = smp.device().clone();
                let agent = match crate::sweep::umad::GsiClient::open(
                    Some(&device.ca),
                    Some(device.port),
                    sm_mad::mad::class::SUBN_ADM,
                    2,
                    0,
                ) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        warn!(error = %e, "no GSI agent for the SA: path SLs taken as SL 0");
                        None
                    }
                };
                info!(ca = %device.ca, port = device.port, "shadow bound as an observer");
                Ok(Opened::Umad { port: Box::new(smp), agent })
            }
            Vantage::Embedded { fabric, at, master } => {
                Ok(Opened::Embedded { port: fabric.smp_port_at(at), agent: fabric.agent(at), _master: master })
            }
        }
    }

    fn parts(&mut self) -> (&mut dyn SmpPort, Option<&mut dyn GmpAgent>) {
        match self {
            Opened::Umad { port, agent } => (&mut **port, agent.as_mut().map(|a| a as &mut dyn GmpAgent)),
            Opened::Embedded { port, agent, .. } => (port, Some(agent)),
        }
    }
}

/// An SM that programmed the embedded fabric and serves its SA: the
/// master a shadow on `--fabric` looks at.
pub struct EmbeddedMaster {
    /// The fabric.
    pub fabric: SharedFabric,
    /// The engine that routed it.
    pub engine: String,
    /// Its SA (answers while this lives).
    _sa: crate::sa::server::SaHandle,
}

/// Builds the embedded fabric of `topology`, programs it with one sweep of
/// an SM on its first CA routed by `engines` (e.g. `file` with the
/// config's `lfts_file`, to load a dump), and starts that SM's SA.
pub fn embedded_master(topology: &Path, engines: &str, registry: &Registry, config: &Config) -> Result<EmbeddedMaster, RunError> {
    let bad = |e: String| RunError::Input(format!("{}: {e}", topology.display()));
    let topo = sm_topology::parse_file(topology).map_err(|e| bad(e.to_string()))?;
    let sm = topo.cabled_cas().first().copied().ok_or_else(|| bad("no CA with a linked port to run the master on".into()))?;
    let fabric = SharedFabric::new(sm_sim::SimFabric::from_topology(&topo, sm.0, sm.1).map_err(|e| bad(e.to_string()))?);
    let options = crate::pipeline::OnceOptions { sweep: crate::sweep::SweepOptions::default(), engines, dump_dir: None };
    let (mut g2l, mut held) = (crate::sweep::Guid2Lid::default(), crate::sweep::HeldTables::default());
    let out = crate::pipeline::once(&mut fabric.smp_port(), &options, registry, config, &mut g2l, &mut held)
        .map_err(|e| bad(format!("the master's sweep: {e}")))?;
    let engine = out.accepted.as_ref().map(|a| a.engine.clone()).ok_or_else(|| bad(format!("the master routed nothing: {}", out.describe().join("; "))))?;
    let groups = Arc::new(Mutex::new(crate::mcast::McGroups::new()));
    let sa = crate::sa::spawn(fabric.sender(), fabric.sa_requests(256), groups, crate::sa::SaConfig::default());
    sa.publish(crate::sa::SaDb::build_shared(&out));
    Ok(EmbeddedMaster { fabric, engine, _sa: sa })
}

/// The host a shadow on the embedded fabric looks from: `name` (a
/// NodeDescription, GUID or LID), else the last CA with a cable (the
/// master sits on the first).
pub fn embedded_host(fabric: &SharedFabric, name: Option<&str>) -> Result<(usize, u8), RunError> {
    if let Some(name) = name {
        return crate::embedded::find_host(fabric, name).map_err(RunError::Input);
    }
    let f = fabric.lock();
    let sm = f.sm_location().0;
    f.topology()
        .cabled_cas()
        .into_iter()
        .rev()
        .find(|&(i, _)| i != sm)
        .ok_or_else(|| RunError::Input("no second CA with a cable to look from".into()))
}
