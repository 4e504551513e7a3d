//! The `smcore` command.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use sm_core::config::Config;
use sm_core::engines::loader::{search_path_with_config, Registry};
use tracing::warn;

mod gen_cmd;

/// An InfiniBand subnet manager with routing engines loaded at run time.
#[derive(Parser, Debug)]
#[command(name = "smcore", version, about, long_about = None)]
struct Cli {
    /// Engine directory to search (repeatable; searched before
    /// SMCORE_ENGINE_PATH and the executable's directory).
    #[arg(long = "engine-dir", global = true, value_name = "DIR")]
    engine_dirs: Vec<PathBuf>,
    /// Configuration file: smcore.toml, or OpenSM's opensm.conf as is (told
    /// apart by name and content; see docs/opensm-conf-keys.md).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log filter (tracing env-filter syntax, e.g. `info`, `sm_core=debug`;
    /// default: from the config's `log_flags`, else `warn`).
    #[arg(long, global = true, env = "SMCORE_LOG")]
    log: Option<String>,
    /// OpenSM's `-D` log flags (e.g. 0x03, 0x43), mapped onto a level as
    /// the config's `log_flags` is; --log wins over it.
    #[arg(short = 'D', long = "log-flags", global = true, value_name = "FLAGS", value_parser = parse_flags)]
    log_flags: Option<u8>,
    /// Log to this file (`-` for stderr); reopened on SIGUSR1. The SM
    /// otherwise uses the config's `log_file`, else stderr.
    #[arg(long, global = true, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// Log to syslog (/dev/log, facility daemon).
    #[arg(long, global = true, conflicts_with = "log_file")]
    syslog: bool,
    /// `text` (default) or `json`, one object per line.
    #[arg(long, global = true, value_name = "FORMAT")]
    log_format: Option<sm_core::logging::Format>,
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    sm: SmArgs,
}

/// The SM itself: what runs when no subcommand is given.
#[derive(Args, Debug)]
struct SmArgs {
    /// Run on the embedded simulated fabric built from this topology file
    /// (the SM sits on its first CA with a linked port).
    #[arg(long, value_name = "TOPOLOGY")]
    fabric: Option<PathBuf>,
    /// With --fabric: the VLCap/MTUCap, speeds and widths the simulated
    /// ports report, as `vls=N,mtu=BYTES,speed=SDR..XDR,width=1x..12x` for
    /// every node or `GUID:...` for one (repeatable; default
    /// vls=8,mtu=4096, speeds up to NDR at the topology's rates). Ports
    /// still come up at one VL and 256 bytes, as hardware does; a link
    /// with an end given a speed or width trains to the best both support.
    #[arg(long, value_name = "SPEC", requires = "fabric")]
    sim_caps: Vec<sm_core::sim::CapsSpec>,
    /// Lose and corrupt the SM's own SMPs on purpose, to see it cope (for
    /// tests and trials, on any transport): `drop=P,lose-answer=P,
    /// corrupt=P,seed=N`, chances as `2%` or `0.02`. Reported at exit.
    #[arg(long, value_name = "SPEC")]
    inject_faults: Option<sm_transport::Faults>,
    /// Engine list, e.g. `updn,minhop` or `torus-2QoS,no_fallback`.
    #[arg(long, value_name = "LIST")]
    engines: Option<String>,
    /// One full sweep, then exit (as `opensm -o`).
    #[arg(long)]
    once: bool,
    /// Write OpenSM-format dumps (and guid2lid) here.
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Forget held LIDs and guid2lid; number the fabric afresh.
    #[arg(long)]
    reassign_lids: bool,
    /// The guid2lid file (default: guid2lid in the dump directory).
    #[arg(long, value_name = "FILE")]
    guid2lid: Option<PathBuf>,
    /// Seconds between light sweeps (OpenSM `sweep_interval`; default 10).
    #[arg(long, value_name = "SECONDS")]
    sweep_interval: Option<f64>,
    /// The umad CA to run on, e.g. `mlx5_0` (default: the first CA with an
    /// active port).
    #[arg(long, value_name = "CA")]
    device: Option<String>,
    /// The port of the CA to run on (default: its first active port).
    #[arg(long, value_name = "PORT")]
    port: Option<u8>,
    /// The port to run on by its GUID, as `ibstat -p` lists it (OpenSM's
    /// `--guid`; config `guid`); instead of --device/--port.
    #[arg(long, value_name = "GUID", value_parser = parse_guid, conflicts_with_all = ["device", "port"])]
    guid: Option<u64>,
    /// SMPs kept in flight at once on a umad port (OpenSM `max_wire_smps`).
    #[arg(long, value_name = "N")]
    max_wire_smps: Option<usize>,
    /// Milliseconds to wait for an SMP's answer (OpenSM `transaction_timeout`).
    #[arg(long, value_name = "MS")]
    transaction_timeout: Option<u64>,
    /// Keep the last routing while only hosts (or leaf switches) come and
    /// go (OpenSM `use_ucast_cache`).
    #[arg(long)]
    ucast_cache: bool,
    /// Re-read the whole fabric at every heavy sweep, not only behind the
    /// ports a trap or a light sweep names (smcore `incremental_sweep
    /// FALSE`).
    #[arg(long)]
    no_incremental_sweep: bool,
    /// With incremental sweeps, make every N-th heavy sweep a full one
    /// all the same; 0: only when an incremental one cannot account for a
    /// change (smcore `full_sweep_every`; default 8).
    #[arg(long, value_name = "N")]
    full_sweep_every: Option<u32>,
    /// This SM's priority in the election of the master SM, 0..15
    /// (OpenSM `sm_priority`; default 0).
    #[arg(long, value_name = "0..15")]
    priority: Option<u8>,
    /// Seconds between a standby's polls of the master (OpenSM
    /// `sminfo_polling_timeout`, which counts milliseconds; default 2).
    #[arg(long, value_name = "SECONDS")]
    sm_poll_interval: Option<f64>,
    /// Unanswered polls in a row after which a standby takes over (OpenSM
    /// `polling_retry_number`; default 4).
    #[arg(long, value_name = "N")]
    sm_poll_retries: Option<u32>,
    /// Listen for `smcore ctl` commands (status, sweep, portstatus, ...) on this Unix
    /// socket (config `control_socket`; `smcore ctl` looks at
    /// /run/smcore.sock unless told).
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Write the SM's pid here while it runs (config `pid_file`).
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Serve Prometheus metrics on this loopback address, e.g.
    /// 127.0.0.1:9464 (config `metrics_listen`).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Show nodes by these names in dumps and explanations: rdma-core's
    /// node-name-map format, `0xGUID "name"` lines (config
    /// `node_name_map`, OpenSM `node_name_map_name`).
    #[arg(long, value_name = "FILE")]
    node_name_map: Option<PathBuf>,
    #[command(flatten)]
    options: EngineOptions,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Route a topology file offline: verify, report, dump.
    Route(RouteArgs),
    /// List the engines found in the engine directories.
    Engines,
    /// Write a generated topology file.
    Gen(gen_cmd::GenArgs),
    /// Send a command to a running SM's control socket (OpenSM's console):
    /// `reload` (rescan the engine directories, as SIGHUP), `sweep` (a heavy
    /// sweep now), `reroute` (a heavy sweep that routes afresh), `status`,
    /// `portstatus`, `lidbalance`, `route`, `perfmgr`, `dump_conf`,
    /// `loglevel [FILTER]`, `explain SRC DST`.
    Ctl(CtlArgs),
    /// The path between two ports of the running SM's fabric, hop by hop:
    /// switches, ports, links, the SL and the VL at each hop, the
    /// partitions both ends share, the PathRecord the SA answers, and
    /// warnings. Ports by LID, GUID (0x...) or NodeDescription. The same
    /// as `smcore ctl explain SRC DST`.
    Explain(ExplainArgs),
    /// Check this host before starting the SM: umad devices and link
    /// layers, the port the SM would bind and why, device permissions,
    /// the kernel registering the SM's agents, another SM already running
    /// the subnet, the configuration and the engines. Exit 0 only when the
    /// SM can start.
    Doctor(DoctorArgs),
    /// Run beside the SM in charge (OpenSM or another smcore) and never
    /// write to the fabric: read what the master programmed (LIDs, LFTs,
    /// SL2VL, VLArb, P_Keys, MFTs, path SLs from its SA), judge that live
    /// routing with smcore's verifier, route the same fabric with
    /// smcore's own chain on the master's LIDs, and report the
    /// difference. Only SubnGets leave the port; it takes no part in the
    /// SM election and serves no SA. Exit status with --once: 0 when the
    /// live routing is sound, 1 when it is not.
    Shadow(ShadowArgs),
    /// Compare the fabric with the intended cabling (a topology file):
    /// missing, extra and miswired links, missing and unexpected nodes,
    /// links below their width or speed. Reads with SubnGets only; exit 0
    /// when the fabric matches, 1 when it differs, 2 on bad input.
    Check(CheckArgs),
    /// Host one routing attempt in a process of its own (what the SM
    /// starts for every isolated engine; not for people).
    #[command(hide = true, name = "engine-host")]
    EngineHost {
        /// The memory file holding the request.
        #[arg(long)]
        request_fd: i32,
        /// The memory file the answer goes to.
        #[arg(long)]
        answer_fd: i32,
        /// The engine library's file, as the SM loaded it.
        #[arg(long)]
        library_fd: Option<i32>,
        /// A pipe the host writes one byte to once its answer is sealed.
        #[arg(long)]
        ready_fd: Option<i32>,
        /// A directory the engine may write beneath (its dump_dir).
        #[arg(long)]
        writable: Vec<std::path::PathBuf>,
        /// Address-space limit in MiB.
        #[arg(long)]
        memory_mib: u64,
        /// CPU-time limit in seconds.
        #[arg(long)]
        cpu_seconds: u64,
    },
    /// Write the manual pages (smcore.8, smcore-<subcommand>.8,
    /// smcore.toml.5) into DIR: what packaging/install.sh installs.
    #[command(hide = true)]
    Manpages {
        /// Where to write them (created if missing).
        #[arg(value_name = "DIR")]
        out: PathBuf,
    },
}

#[derive(Args, Debug)]
struct CtlArgs {
    /// The SM's control socket (its `--control-socket`).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_CONTROL_SOCKET)]
    socket: PathBuf,
    /// The answer as one JSON object (errors as {"error": "..."}).
    #[arg(long)]
    json: bool,
    /// reload | sweep | reroute | status | portstatus | lidbalance | route |
    /// perfmgr | dump_conf | loglevel [FILTER] | saquery [--from HOST] path
    /// DEST (on the embedded fabric: a PathRecord asked of the SA by a
    /// simulated host; hosts by NodeDescription, node GUID or LID) |
    /// explain SRC DST (the path between two ports, hop by hop)
    #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

#[derive(Args, Debug)]
struct ShadowArgs {
    /// One round, print the report, exit.
    #[arg(long)]
    once: bool,
    /// Seconds between rounds (default 60).
    #[arg(long, value_name = "SECONDS")]
    sweep_interval: Option<f64>,
    /// smcore's engine chain to compare with, e.g. `ftree` (default: the
    /// config's `routing_engine`, else minhop-balanced).
    #[arg(long, value_name = "LIST")]
    engines: Option<String>,
    /// Write the report as JSON here (replaced after every round).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Write both routings as OpenSM-format dumps after every round:
    /// DIR/live (the master's, as read) and DIR/smcore.
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// The path SLs from this file (`<source node GUID> <destination LID>
    /// <SL>` per line, ibdiagnet's .psl format, as smcore's
    /// smcore-path-sl.psl dump) instead of the master's SA.
    #[arg(long, value_name = "FILE")]
    path_sl: Option<PathBuf>,
    /// Ask the master's SA for no PathRecord: path SLs from --path-sl, else
    /// SL 0 for every path.
    #[arg(long)]
    no_sa: bool,
    /// PathRecords asked of the master's SA at most per round (the
    /// remaining pairs are taken as SL 0, and the report says so).
    #[arg(long, value_name = "N", default_value_t = 250_000)]
    sa_path_limit: usize,
    /// The umad CA to look from (default: the first CA with an active port).
    #[arg(long, value_name = "CA")]
    device: Option<String>,
    /// Its port.
    #[arg(long, value_name = "PORT")]
    port: Option<u8>,
    /// The port by GUID, instead of --device/--port.
    #[arg(long, value_name = "GUID", value_parser = parse_guid, conflicts_with_all = ["device", "port"])]
    guid: Option<u64>,
    /// Look at the embedded simulated fabric of this topology file instead
    /// of a umad port: an SM on its first CA programs it first (with
    /// --master-engines) and serves its SA; the shadow looks from --from.
    #[arg(long, value_name = "TOPOLOGY")]
    fabric: Option<PathBuf>,
    /// Also compare the fabric with this intended cabling (as `smcore check
    /// --expect`) every round.
    #[arg(long, value_name = "TOPOLOGY")]
    expect: Option<PathBuf>,
    /// With --fabric: the engines of the SM that programs the fabric
    /// (default minhop; `file` with --lfts-file loads a dump).
    #[arg(long, value_name = "LIST", requires = "fabric")]
    master_engines: Option<String>,
    /// With --fabric: the host the shadow looks from (NodeDescription,
    /// GUID or LID; default the last CA with a cable).
    #[arg(long, value_name = "HOST", requires = "fabric")]
    from: Option<String>,
    /// Answer `smcore ctl status` / `sweep` on this Unix socket.
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Serve the shadow's series (smcore_shadow_*) on this loopback
    /// address.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    options: EngineOptions,
}

#[derive(Args, Debug)]
struct ExplainArgs {
    /// Where the path starts: a LID, a port or node GUID, or a NodeDescription.
    src: String,
    /// Where it goes.
    dst: String,
    /// The SM's control socket (its `--control-socket`).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_CONTROL_SOCKET)]
    socket: PathBuf,
    /// The answer as one JSON object (errors as {"error": "..."}).
    #[arg(long)]
    json: bool,
}

/// `smcore explain SRC DST`: `smcore ctl explain SRC DST`, the answer
/// printed; exit 2 on an error.
fn explain_cmd(args: &ExplainArgs) -> ExitCode {
    ctl_request(&args.socket, &format!("explain {} {}", args.src, args.dst), args.json)
}

/// Sends `line` (with `--json` in front when `json`) to the control socket
/// and prints the answer; exit 2 on an error answer or none.
fn ctl_request(socket: &Path, line: &str, json: bool) -> ExitCode {
    let line = if json { format!("--json {line}") } else { line.to_string() };
    match sm_core::control::request(socket, &line) {
        Ok(answer) => {
            print!("{answer}");
            if answer.starts_with("error") || answer.starts_with("{\"error\"") {
                ExitCode::from(EXIT_BAD_INPUT)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) if json => {
            println!("{}", serde_json::json!({ "error": e.to_string() }));
            ExitCode::from(EXIT_BAD_INPUT)
        }
        Err(e) => fail(EXIT_BAD_INPUT, e),
    }
}

/// `smcore route TOPO --explain SRC DST ...`: each path explained on the
/// routing just computed (the topology file read again for its snapshot).
fn route_explain(args: &RouteArgs, registry: &Registry, config: &Config, outcome: sm_core::engines::chain::ChainOutcome) -> ExitCode {
    let Some(routed) = outcome.routed else { return ExitCode::from(EXIT_NOT_ROUTED) };
    let snapshot = match sm_core::offline::load_fabric(&args.topology, config.route_settings().lmc) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    // Nodes the node name map names are shown, and found, by that name.
    let snapshot = match config.node_names() {
        Ok(names) => names.rename(&snapshot).into_owned(),
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    let deadlock_free = registry.get(&routed.engine).is_some_and(|e| e.deadlock_free);
    let accepted = sm_core::explain::accepted_offline(snapshot, routed, deadlock_free);
    for pair in args.explain.chunks(2) {
        let [src, dst] = pair else { continue };
        match sm_core::explain::explain(&accepted, None, src, dst) {
            Ok(e) => print!("\n{}", e.render()),
            Err(e) => return fail(EXIT_BAD_INPUT, e),
        }
    }
    ExitCode::SUCCESS
}

#[derive(Args, Debug)]
struct DoctorArgs {
    /// The checks as one JSON object.
    #[arg(long)]
    json: bool,
    /// The HCA the SM would be started on (`--device`).
    #[arg(long = "device", value_name = "CA")]
    ca: Option<String>,
    /// Its port (`--port`).
    #[arg(long, value_name = "N")]
    port: Option<u8>,
    /// The port by GUID (`--guid`).
    #[arg(long, value_name = "GUID", value_parser = parse_guid)]
    guid: Option<u64>,
    /// The engine list the SM would be started with (`--engines`).
    #[arg(long, value_name = "LIST")]
    engines: Option<String>,
}

/// `smcore doctor`: the checks, printed; exit 0 when the SM can start, 1
/// when it cannot.
fn doctor(cli: &Cli, args: &DoctorArgs) -> ExitCode {
    let question = sm_core::doctor::Question {
        ca: args.ca.clone(),
        port: args.port,
        guid: args.guid,
        config: cli.config.clone(),
        engine_dirs: cli.engine_dirs.clone(),
        engine_path: std::env::var("SMCORE_ENGINE_PATH").ok(),
        engines: args.engines.clone(),
    };
    let checks = sm_core::doctor::examine(&question);
    let can = sm_core::doctor::can_start(&checks);
    if args.json {
        println!("{}", serde_json::json!({ "can_start": can, "checks": checks }));
    } else {
        print!("{}", sm_core::doctor::render(&checks));
    }
    if can {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `smcore shadow`: rounds beside the SM in charge, never writing.
fn shadow(args: &ShadowArgs, mut config: Config, registry: &Registry) -> ExitCode {
    use sm_core::shadow::run::{self, RunError, RunOptions, Vantage};
    for p in &registry.problems {
        warn!("engine library skipped: {p}");
    }
    args.options.apply(&mut config);
    let engines = sm_core::settings::engines(args.engines.as_deref(), &config);
    let vantage = match &args.fabric {
        Some(topology) => {
            let master_engines = args.master_engines.as_deref().unwrap_or("minhop");
            let master = match run::embedded_master(topology, master_engines, registry, &config) {
                Ok(m) => m,
                Err(e) => return fail(EXIT_BAD_INPUT, e),
            };
            let at = match run::embedded_host(&master.fabric, args.from.as_deref()) {
                Ok(at) => at,
                Err(e) => return fail(EXIT_BAD_INPUT, e),
            };
            println!("master      an SM on the embedded fabric, routed by {}; the shadow looks from node {} port {}", master.engine, at.0, at.1);
            Vantage::Embedded { fabric: master.fabric.clone(), at, master: Some(master) }
        }
        None => {
            let (ca, port) = match args.guid {
                Some(guid) => match sm_core::sweep::umad::find_guid(&sm_core::sweep::umad::devices(), guid) {
                    Some(d) => (Some(d.ca), Some(d.port)),
                    None => return fail(EXIT_BAD_INPUT, format!("no local port has GUID {guid:#018x}")),
                },
                None => (args.device.clone(), args.port),
            };
            Vantage::Umad {
                ca,
                port,
                timeout: std::time::Duration::from_millis(
                    config.transaction_timeout.unwrap_or(sm_core::sweep::transport::DEFAULT_TRANSACTION_TIMEOUT_MS).max(1),
                ),
                window: config.max_wire_smps.unwrap_or(sm_core::config::DEFAULT_MAX_WIRE_SMPS).max(1),
            }
        }
    };
    let options = RunOptions {
        once: args.once,
        interval: std::time::Duration::from_secs_f64(args.sweep_interval.unwrap_or(60.0).max(0.1)),
        report: args.report.clone(),
        dump_dir: args.dump_dir.clone(),
        path_sl: args.path_sl.clone(),
        no_sa: args.no_sa,
        sa_limit: args.sa_path_limit,
        engines,
        retries: sm_core::sweep::transport::DEFAULT_TRANSACTION_RETRIES,
        expect: args.expect.clone(),
        metrics_listen: args.metrics_listen,
        control_socket: args.control_socket.clone(),
    };
    let signals = Arc::new(sm_core::daemon::Signals::default());
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(signal, Arc::clone(&signals.stop)) {
            return fail(EXIT_BAD_INPUT, format!("signal handler: {e}"));
        }
    }
    match run::run(vantage, registry, &config, &options, signals) {
        Ok(Some(finished)) => {
            print!("{}", finished.report.render());
            if finished.report.live.sound() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(RunError::Input(e)) => fail(EXIT_BAD_INPUT, e),
        Err(RunError::Transport(e)) => fail(EXIT_TRANSPORT_LOST, e),
    }
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// The intended cabling (ibnetdiscover / ibsim net format).
    #[arg(long, value_name = "TOPOLOGY")]
    expect: PathBuf,
    /// The differences as one JSON object.
    #[arg(long)]
    json: bool,
    /// The HCA to read the fabric through.
    #[arg(long = "device", value_name = "CA")]
    ca: Option<String>,
    /// Its port.
    #[arg(long, value_name = "N")]
    port: Option<u8>,
    /// The local port by GUID.
    #[arg(long, value_name = "GUID", value_parser = parse_guid, conflicts_with_all = ["ca", "port"])]
    guid: Option<u64>,
    /// Check the embedded simulated fabric built from this topology file
    /// instead of a umad port.
    #[arg(long, value_name = "TOPOLOGY", conflicts_with_all = ["ca", "port", "guid"])]
    fabric: Option<PathBuf>,
}

/// `smcore check`: the fabric read through a port that sends SubnGets
/// only, compared with `--expect`; exit 0 when it matches, 1 when it
/// differs, 2 on bad input or a fabric that cannot be read.
fn check(config: &Config, args: &CheckArgs) -> ExitCode {
    let expected = match sm_core::cabling::load_expected(&args.expect) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    let options = sm_core::sweep::SweepOptions {
        retries: config.transaction_retries.unwrap_or(sm_core::config::DEFAULT_TRANSACTION_RETRIES),
        ..Default::default()
    };
    let (observed, source) = if let Some(topology) = &args.fabric {
        let mut fabric = match sim_fabric(topology, &[]) {
            Ok(f) => f,
            Err(code) => return code,
        };
        let mut port = sm_core::sim::SimPort::new(&mut fabric);
        (sm_core::cabling::observe(&mut port, &options), topology.display().to_string())
    } else {
        let (ca, port_number) = match args.guid {
            Some(guid) => match sm_core::sweep::umad::find_guid(&sm_core::sweep::umad::devices(), guid) {
                Some(d) => (Some(d.ca), Some(d.port)),
                None => return fail(EXIT_BAD_INPUT, format!("no local port has GUID {guid:#018x}")),
            },
            None => (args.ca.clone(), args.port),
        };
        let timeout = std::time::Duration::from_millis(
            config.transaction_timeout.unwrap_or(sm_core::config::DEFAULT_TRANSACTION_TIMEOUT_MS),
        );
        let window = config.max_wire_smps.unwrap_or(sm_core::config::DEFAULT_MAX_WIRE_SMPS);
        let mut port = match sm_core::sweep::UmadPort::open_observer(ca.as_deref(), port_number, timeout, window) {
            Ok(p) => p,
            Err(e) => return fail(EXIT_BAD_INPUT, e),
        };
        let source = format!("umad:{}/{}", port.device().ca, port.device().port);
        (sm_core::cabling::observe(&mut port, &options), source)
    };
    let observed = match observed {
        Ok(o) => o,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    let report = sm_core::cabling::check_fabric(&expected, &observed.fabric);
    if args.json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("expected".into(), args.expect.display().to_string().into());
            o.insert("fabric".into(), source.into());
            o.insert("smps".into(), serde_json::json!({ "gets": observed.port.gets, "refused": observed.port.refused }));
        }
        println!("{v}");
    } else {
        print!("{}", report.render());
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Where `smcore ctl` looks when not told.
const DEFAULT_CONTROL_SOCKET: &str = "/run/smcore.sock";

/// Engine options shared by `route` and the SM, spelled as OpenSM's options
/// in kebab case; each sets the snake-case key of the same name for every
/// engine (an engine ignores keys it does not use).
#[derive(Args, Debug, Default)]
struct EngineOptions {
    /// LMC: end ports get 2^LMC LIDs.
    #[arg(long)]
    lmc: Option<u8>,
    /// Route the ports of these GUIDs first (minhop, updn).
    #[arg(long, value_name = "FILE")]
    guid_routing_order_file: Option<PathBuf>,
    /// Switch ports (`<guid> <port>` lines) left out of load equalisation.
    #[arg(long, value_name = "FILE")]
    port_prof_ignore_file: Option<PathBuf>,
    /// Root switches (updn, ftree).
    #[arg(long, value_name = "FILE")]
    root_guid_file: Option<PathBuf>,
    /// Compute nodes (ftree).
    #[arg(long, value_name = "FILE")]
    cn_guid_file: Option<PathBuf>,
    /// I/O nodes (ftree).
    #[arg(long, value_name = "FILE")]
    io_guid_file: Option<PathBuf>,
    /// Reverse hops allowed for I/O nodes (ftree).
    #[arg(long, value_name = "N")]
    max_reverse_hops: Option<u32>,
    /// LFTs to load (file).
    #[arg(long, value_name = "FILE")]
    lfts_file: Option<PathBuf>,
    /// torus-2QoS.conf (torus-2QoS).
    #[arg(long, value_name = "FILE")]
    torus_config: Option<PathBuf>,
    /// First VL lash may use.
    #[arg(long, value_name = "VL")]
    lash_start_vl: Option<u8>,
    /// Detect a mesh and order ports by dimension (lash).
    #[arg(long)]
    do_mesh_analysis: bool,
    /// VLs nue may use (0: all operational VLs).
    #[arg(long, value_name = "N")]
    nue_max_num_vls: Option<u8>,
    /// Route switch LIDs inside nue's layers too (nue).
    #[arg(long)]
    nue_include_switches: bool,
    /// Route between root switches too (ftree).
    #[arg(long)]
    connect_roots: bool,
}

impl EngineOptions {
    /// `smcore route`: the options set in `config`.
    fn apply(&self, config: &mut Config) {
        if let Some(l) = self.lmc {
            config.lmc = l;
        }
        for (key, value) in self.table() {
            config.set_option(&key, value);
        }
    }

    /// The engine options given, by the key each sets (`--lmc` is the
    /// SM's [`sm_core::settings::Overrides::lmc`]).
    fn table(&self) -> toml::Table {
        let mut t = toml::Table::new();
        let files = [
            ("guid_routing_order_file", &self.guid_routing_order_file),
            ("port_prof_ignore_file", &self.port_prof_ignore_file),
            ("root_guid_file", &self.root_guid_file),
            ("cn_guid_file", &self.cn_guid_file),
            ("io_guid_file", &self.io_guid_file),
            ("lfts_file", &self.lfts_file),
            ("torus_config", &self.torus_config),
        ];
        for (key, value) in files {
            if let Some(p) = value {
                t.insert(key.into(), p.display().to_string().into());
            }
        }
        let numbers = [
            ("max_reverse_hops", self.max_reverse_hops.map(i64::from)),
            ("lash_start_vl", self.lash_start_vl.map(i64::from)),
            ("nue_max_num_vls", self.nue_max_num_vls.map(i64::from)),
        ];
        for (key, value) in numbers {
            if let Some(n) = value {
                t.insert(key.into(), n.into());
            }
        }
        let switches = [
            ("do_mesh_analysis", self.do_mesh_analysis),
            ("nue_include_switches", self.nue_include_switches),
            ("connect_roots", self.connect_roots),
        ];
        for (key, on) in switches {
            if on {
                t.insert(key.into(), true.into());
            }
        }
        t
    }
}

#[derive(Args, Debug)]
struct RouteArgs {
    /// Topology file (ibnetdiscover / ibsim net format).
    topology: PathBuf,
    /// Engine list, e.g. `updn,minhop` or `torus-2QoS,no_fallback`.
    #[arg(long, value_name = "LIST")]
    engines: Option<String>,
    /// Write OpenSM-format dumps here.
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Explain the path SRC -> DST on the routing computed (ports by LID,
    /// GUID or NodeDescription); may be given more than once.
    #[arg(long, num_args = 2, value_names = ["SRC", "DST"], action = clap::ArgAction::Append)]
    explain: Vec<String>,
    #[command(flatten)]
    options: EngineOptions,
}

/// Exit status when no engine routed.
const EXIT_NOT_ROUTED: u8 = 3;
/// Exit status when the SM's port went away (the service manager restarts
/// the SM).
const EXIT_TRANSPORT_LOST: u8 = 4;
/// Exit status for bad input (file, config, engine list).
const EXIT_BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The engine host answers before anything else is set up: no log, no
    // configuration, only the request in its memory file.
    if let Some(Command::EngineHost { request_fd, answer_fd, library_fd, ready_fd, writable, memory_mib, cpu_seconds }) = &cli.command {
        let fds = sm_core::engines::host::HostFds { request: *request_fd, answer: *answer_fd, library: *library_fd, ready: *ready_fd, writable };
        return sm_core::engines::host::serve(fds, *memory_mib, *cpu_seconds);
    }
    // The doctor reports a configuration that does not load; it does not
    // stop at it.
    if let Some(Command::Doctor(args)) = &cli.command {
        return doctor(&cli, args);
    }
    // The config says where the log goes, so it is read first; its errors
    // go to stderr.
    let mut config = match &cli.config {
        Some(p) => match Config::load(p) {
            Ok(c) => c,
            Err(e) => return fail(EXIT_BAD_INPUT, e),
        },
        None => Config::default(),
    };
    let logging = match log_settings(&cli, &config).and_then(|s| sm_core::logging::init(&s).map_err(|e| e.to_string())) {
        Ok(r) => r,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    if let Some(warning) = cli.config.as_deref().and_then(|p| config.startup_warning(p)) {
        tracing::warn!("{warning}");
    }
    if let Err(e) = config.check_qos() {
        return fail(EXIT_BAD_INPUT, e);
    }
    let Some(command) = &cli.command else {
        return run_sm(&cli, config, &logging);
    };
    if cli.sm.fabric.is_some() || cli.sm.once {
        // Otherwise `smcore --fabric X route Y` would quietly route Y only.
        return fail(EXIT_BAD_INPUT, "--fabric and --once run the SM; they do not go with a subcommand");
    }
    if let Command::Gen(args) = command {
        return gen_cmd::run(args);
    }
    if let Command::Check(args) = command {
        return check(&config, args);
    }
    if let Command::Manpages { out } = command {
        use clap::CommandFactory;
        return match sm_core::manpages::write_all(Cli::command(), out) {
            Ok(files) => {
                for f in files {
                    println!("{}", f.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(EXIT_BAD_INPUT, format!("{}: {e}", out.display())),
        };
    }
    if let Command::Explain(args) = command {
        return explain_cmd(args);
    }
    if let Command::Ctl(args) = command {
        return ctl_request(&args.socket, &args.command.join(" "), args.json);
    }
    let env = std::env::var("SMCORE_ENGINE_PATH").ok();
    let registry = Registry::scan(&search_path_with_config(&cli.engine_dirs, &config.engine_dirs, env.as_deref()));
    if let Command::Shadow(args) = command {
        return shadow(args, config, &registry);
    }

    match command {
        Command::Engines => {
            if registry.engines.is_empty() {
                println!("no engines found (searched: {})", dir_list(&registry));
            }
            for e in &registry.engines {
                println!("{:<12} {:<8} {}", e.name, e.version, e.library.display());
            }
            for p in &registry.problems {
                println!("skipped      {p}");
            }
            ExitCode::SUCCESS
        }
        Command::Route(args) => {
            for p in &registry.problems {
                warn!("engine library skipped: {p}");
            }
            args.options.apply(&mut config);
            let (engines, dump_dir) = match outputs(args.engines.as_deref(), args.dump_dir.as_deref(), &mut config) {
                Ok(x) => x,
                Err(code) => return code,
            };
            if let Err(e) = config.node_names() {
                return fail(EXIT_BAD_INPUT, e);
            }
            let (report, outcome) =
                match sm_core::offline::route_file(&args.topology, &registry, &engines, &config.route_settings(), dump_dir.as_deref()) {
                    Ok(r) => r,
                    Err(e) => return fail(EXIT_BAD_INPUT, e),
                };
            print!("{report}");
            if let Some(path) = &args.report {
                let json = serde_json::to_string_pretty(&report).unwrap_or_default();
                if let Err(e) = sm_core::safe_fs::replace_bytes(path, sm_core::safe_fs::PUBLIC, (json + "\n").as_bytes()) {
                    return fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display()));
                }
            }
            if !args.explain.is_empty() {
                return route_explain(args, &registry, &config, outcome);
            }
            if outcome.routed.is_some() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_NOT_ROUTED)
            }
        }
        Command::Gen(_)
        | Command::Ctl(_)
        | Command::Manpages { .. }
        | Command::EngineHost { .. }
        | Command::Doctor(_)
        | Command::Shadow(_)
        | Command::Check(_)
        | Command::Explain(_) => ExitCode::SUCCESS,
    }
}

/// The engine list and the dump directory ([`sm_core::settings::engines`],
/// [`sm_core::settings::dump_dir`]), the directory created if given.
fn outputs(engines: Option<&str>, dump_dir: Option<&Path>, config: &mut Config) -> Result<(String, Option<PathBuf>), ExitCode> {
    let engines = sm_core::settings::engines(engines, config);
    let dump_dir = sm_core::settings::dump_dir(dump_dir, config);
    use_dump_dir(&dump_dir, config)?;
    Ok((engines, dump_dir))
}

/// Creates the dump directory, if one is given, and tells the engines that
/// write dumps of their own where it is.
fn use_dump_dir(dump_dir: &Option<PathBuf>, config: &mut Config) -> Result<(), ExitCode> {
    if let Some(d) = dump_dir {
        // guid2lid and guid2mkey are read back from it: another local
        // user must not be able to plant them.
        sm_core::safe_fs::trusted_dir(d).map_err(|e| fail(EXIT_BAD_INPUT, format!("dump directory not used: {e}")))?;
    }
    config.dump_dir = dump_dir.clone();
    Ok(())
}

impl SmArgs {
    /// What the command line sets of the SM's settings.
    fn overrides(&self) -> sm_core::settings::Overrides {
        sm_core::settings::Overrides {
            fabric: self.fabric.clone(),
            engines: self.engines.clone(),
            dump_dir: self.dump_dir.clone(),
            guid2lid: self.guid2lid.clone(),
            reassign_lids: self.reassign_lids,
            lmc: self.options.lmc,
            sweep_interval: self.sweep_interval,
            device: self.device.clone(),
            port: self.port,
            guid: self.guid,
            max_wire_smps: self.max_wire_smps,
            transaction_timeout: self.transaction_timeout,
            ucast_cache: self.ucast_cache,
            no_incremental_sweep: self.no_incremental_sweep,
            full_sweep_every: self.full_sweep_every,
            priority: self.priority,
            sm_poll_interval: self.sm_poll_interval,
            sm_poll_retries: self.sm_poll_retries,
            control_socket: self.control_socket.clone(),
            pid_file: self.pid_file.clone(),
            metrics_listen: self.metrics_listen.clone(),
            node_name_map: self.node_name_map.clone(),
        }
    }
}

/// The ends of a umad port's responders: its sender, the SMInfo requests
/// and the SA requests.
type Responders = (
    sm_core::sweep::MadSender,
    Option<std::sync::mpsc::Receiver<sm_core::sweep::IncomingMad>>,
    Option<std::sync::mpsc::Receiver<sm_core::sweep::IncomingMad>>,
);

/// The port the SM runs on, as opened.
enum Opened {
    Sim(sm_core::sim::SharedFabric),
    Umad(sm_core::sweep::UmadPort),
}

/// The SM's port and what the rest of the SM takes from it.
struct OpenedPort {
    port: Opened,
    /// `umad:CA/PORT` or the topology file, for reports and status.
    source: String,
    /// A umad port's responders.
    responders: Option<Responders>,
    /// Traps the umad port's bounded queue had to drop (a storm),
    /// reported at exit.
    trap_drops: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// The umad port's device, for the performance manager's own agent.
    umad_device: Option<sm_core::sweep::UmadDevice>,
}

impl OpenedPort {
    /// Without `--fabric` the SM runs on a umad device (real HCA, or
    /// ibsim under umad2sim's LD_PRELOAD).
    fn open(transport: &sm_core::settings::Transport, caps: &[sm_core::sim::CapsSpec]) -> Result<OpenedPort, ExitCode> {
        use sm_core::settings::{PortChoice, Transport};
        use sm_core::sweep::umad;
        match transport {
            Transport::Sim { topology } => Ok(OpenedPort {
                port: Opened::Sim(sm_core::sim::SharedFabric::new(sim_fabric(topology, caps)?)),
                source: topology.display().to_string(),
                responders: None,
                trap_drops: None,
                umad_device: None,
            }),
            Transport::Umad { port, window, timeout } => {
                let (device, port_number) = match port {
                    PortChoice::Guid(guid) => match umad::find_guid(&umad::devices(), *guid) {
                        Some(d) => (Some(d.ca), Some(d.port)),
                        None => {
                            let have: Vec<String> = umad::devices()
                                .iter()
                                .map(|d| format!("{:#018x} ({} port {})", d.port_guid, d.ca, d.port))
                                .collect();
                            return Err(fail(
                                EXIT_BAD_INPUT,
                                format!("no local port has GUID {guid:#018x}; ports: {}", have.join(", ")),
                            ));
                        }
                    },
                    PortChoice::Device { ca, port } => (ca.clone(), *port),
                };
                let mut u = sm_core::sweep::UmadPort::open(device.as_deref(), port_number, *timeout, *window)
                    .map_err(|e| fail(EXIT_BAD_INPUT, e))?;
                Ok(OpenedPort {
                    source: format!("umad:{}/{}", u.device().ca, u.device().port),
                    responders: Some((u.sender(), u.take_smp_requests(), u.take_sa_requests())),
                    trap_drops: Some(u.trap_drop_counter()),
                    // The performance manager's agent: on the GSI device
                    // of an SMI/GSI pair.
                    umad_device: Some(u.gsi_device().clone()),
                    port: Opened::Umad(u),
                })
            }
        }
    }
}

/// The SA and SMInfo responders: the SA's handle, and the SM's SMInfo
/// state with the election's options. Another SM may run on a real (or
/// ibsim) fabric: the SM elects, and answers its SMInfo queries from the
/// first moment. On the embedded fabric the SA answers its simulated
/// hosts; no other SM runs there.
#[allow(clippy::type_complexity)]
fn start_responders(
    sim: Option<&sm_core::sim::SharedFabric>,
    responders: Option<Responders>,
    groups: &Arc<std::sync::Mutex<sm_core::mcast::McGroups>>,
    settings: &sm_core::settings::DaemonSettings,
    standby_options: sm_core::standby::StandbyOptions,
) -> Result<
    (Option<Arc<sm_core::sa::server::SaHandle>>, Option<(Arc<sm_core::standby::SmInfoState>, sm_core::standby::StandbyOptions)>),
    String,
> {
    let sa_config = settings.sa_config();
    if let Some(fabric) = sim {
        let requests = fabric.sa_requests(SIM_SA_QUEUE);
        let sa = sm_core::sa::server::spawn(fabric.sender(), requests, Arc::clone(groups), sa_config);
        return Ok((Some(Arc::new(sa)), None));
    }
    let Some((sender, smp_requests, sa_requests)) = responders else { return Ok((None, None)) };
    let sa = sa_requests
        .map(|requests| Arc::new(sm_core::sa::server::spawn(sender.clone(), requests, Arc::clone(groups), sa_config)));
    let state = Arc::new(settings.sm_info_state(0));
    if let Some(requests) = smp_requests {
        sm_core::standby::spawn_responder(Arc::clone(&state), requests, sender.clone())
            .map_err(|e| format!("SMInfo responder: {e}"))?;
    }
    Ok((sa, Some((state, standby_options))))
}

/// Has the SA read `sa_db_file` back when this SM first sweeps as master
/// (a file that cannot be read is logged, and the SA starts empty), and
/// starts saving it with `sa_db_dump`.
fn restore_sa(
    sa: Option<&sm_core::sa::server::SaHandle>,
    settings: &sm_core::settings::DaemonSettings,
) -> Option<sm_core::sa::persist::Saver> {
    let sa = sa?;
    if let Some(path) = &settings.sa_db_file {
        sa.restore_at_first_publish(path.clone());
    }
    let path = settings.sa_db_save.clone()?;
    Some(sm_core::sa::persist::Saver::spawn(Arc::clone(sa.sa()), path, settings.fsync_high_avail_files))
}

/// The control socket and the metrics endpoint, when configured; each
/// stops serving when dropped (the socket first).
struct Endpoints {
    _control: Option<sm_core::control::ControlSocket>,
    _metrics: Option<sm_core::metrics::MetricsServer>,
}

impl Endpoints {
    fn serve(
        settings: &sm_core::settings::DaemonSettings,
        metrics: &Arc<sm_core::metrics::Metrics>,
        status: &Arc<std::sync::Mutex<sm_core::control::Status>>,
        perf: Option<Arc<std::sync::Mutex<sm_core::perfmgr::PerfDb>>>,
        signals: &Arc<sm_core::daemon::Signals>,
        log: &sm_core::logging::LogFilter,
        sim: Option<&sm_core::sim::SharedFabric>,
    ) -> Result<Endpoints, String> {
        let served = match settings.metrics_listen {
            Some(addr) => {
                let sources = sm_core::metrics::Sources {
                    metrics: Arc::clone(metrics),
                    status: Some(Arc::clone(status)),
                    perf: perf.clone(),
                    extra: None,
                };
                Some(sm_core::metrics::serve(addr, sources).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let control = match &settings.control_socket {
            Some(path) => Some(
                sm_core::control::serve_with(
                    path,
                    Arc::clone(signals),
                    Arc::clone(status),
                    sm_core::control::Extras { perf, log: Some(log.clone()), saquery: sim.map(|f| sm_core::embedded::saquery(f.clone())) },
                )
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        Ok(Endpoints { _control: control, _metrics: served })
    }
}

/// SIGINT and SIGTERM stop the SM, SIGHUP reloads, SIGUSR1 reopens the log.
fn handle_signals(signals: &Arc<sm_core::daemon::Signals>, reopen: &sm_core::logging::Reopen) -> Result<(), String> {
    let handlers = [
        (signal_hook::consts::SIGINT, false),
        (signal_hook::consts::SIGTERM, false),
        (signal_hook::consts::SIGHUP, true),
    ];
    for (signal, reload) in handlers {
        let signals = Arc::clone(signals);
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        let registered = unsafe {
            signal_hook::low_level::register(signal, move || {
                let flag: &std::sync::atomic::AtomicBool = if reload { &signals.reload } else { &signals.stop };
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
            })
        };
        if let Err(e) = registered {
            return Err(format!("cannot handle signal {signal}: {e}"));
        }
    }
    // OpenSM's signal to reopen its log after logrotate moved it.
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, reopen.flag())
        .map(drop)
        .map_err(|e| format!("cannot handle SIGUSR1: {e}"))
}

/// SA requests the embedded fabric queues for the SA thread, as the umad
/// port's SA queue does.
const SIM_SA_QUEUE: usize = 1024;

/// Starts the performance manager's thread when it is configured: it
/// reads the PMAs through a GSI agent of its own on the SM's port (a umad
/// agent, or one on the embedded fabric).
fn start_perfmgr(
    config: Option<&sm_core::perfmgr::PerfMgrConfig>,
    sim: Option<&sm_core::sim::SharedFabric>,
    device: Option<&sm_core::sweep::UmadDevice>,
    perf: &sm_core::perfmgr::Shared,
    signals: &Arc<sm_core::daemon::Signals>,
) -> Option<std::thread::JoinHandle<()>> {
    let cfg = config?;
    match (sim, device) {
        (Some(fabric), _) => {
            let at = fabric.lock().sm_location();
            spawn_perfmgr(cfg, Ok(fabric.class_agent(at, sm_mad::perf::MGMT_CLASS)), perf, signals)
        }
        (None, Some(device)) => {
            let agent = sm_core::sweep::GsiClient::open(
                Some(&device.ca),
                Some(device.port),
                sm_mad::perf::MGMT_CLASS,
                sm_mad::perf::CLASS_VERSION,
                0,
            );
            spawn_perfmgr(cfg, agent.map_err(|e| e.to_string()), perf, signals)
        }
        (None, None) => None,
    }
}

/// The congestion control manager and its GSI agent (class 0x21, on the
/// SM's port: umad, or the embedded fabric), when `congestion_control` is
/// on; a port with no such agent is logged and the SM runs without.
#[allow(clippy::type_complexity)]
fn start_congestion_control(
    settings: Option<sm_core::cc::CcSettings>,
    sim: Option<&sm_core::sim::SharedFabric>,
    device: Option<&sm_core::sweep::UmadDevice>,
) -> Option<(sm_core::cc::CcManager, Box<dyn sm_transport::gmp::GmpAgent>)> {
    let settings = settings?;
    let agent: Box<dyn sm_transport::gmp::GmpAgent> = match (sim, device) {
        (Some(fabric), _) => {
            let at = fabric.lock().sm_location();
            Box::new(fabric.class_agent(at, sm_mad::cc::MGMT_CLASS))
        }
        (None, Some(device)) => {
            match sm_core::sweep::GsiClient::open(Some(&device.ca), Some(device.port), sm_mad::cc::MGMT_CLASS, sm_mad::cc::CLASS_VERSION, 0) {
                Ok(a) => Box::new(a),
                Err(e) => {
                    warn!("congestion control not programmed: no GSI agent for class 0x21: {e}");
                    return None;
                }
            }
        }
        (None, None) => return None,
    };
    Some((sm_core::cc::CcManager::new(settings), agent))
}

/// The performance manager's thread on `agent`.
fn spawn_perfmgr<A: sm_transport::gmp::GmpAgent + 'static>(
    cfg: &sm_core::perfmgr::PerfMgrConfig,
    agent: Result<A, String>,
    perf: &sm_core::perfmgr::Shared,
    signals: &Arc<sm_core::daemon::Signals>,
) -> Option<std::thread::JoinHandle<()>> {
    let mut client = match agent {
        Ok(a) => a,
        Err(e) => {
            warn!("performance manager not started: no PMA agent: {e}");
            return None;
        }
    };
    let (cfg, shared, stop) = (cfg.clone(), perf.clone(), Arc::clone(&signals.stop));
    let signals = Arc::clone(signals);
    let isolate = move |r: &sm_core::perfmgr::isolation::Request| {
        signals.isolate.lock().unwrap_or_else(|p| p.into_inner()).push(r.clone());
    };
    std::thread::Builder::new()
        .name("perfmgr".into())
        .spawn(move || sm_core::perfmgr::run(&cfg, &mut client, &shared.targets, &shared.db, &stop, &isolate))
        .map_err(|e| warn!("performance manager not started: {e}"))
        .ok()
}

fn registry(cli: &Cli, config: &Config) -> Registry {
    let env = std::env::var("SMCORE_ENGINE_PATH").ok();
    let registry = Registry::scan(&search_path_with_config(&cli.engine_dirs, &config.engine_dirs, env.as_deref()));
    for p in &registry.problems {
        warn!("engine library skipped: {p}");
    }
    registry
}

/// `smcore [--fabric TOPOLOGY] [--once] ...`: the SM, on the embedded
/// fabric or a umad port; one full sweep with `--once`, else the loop of
/// [`sm_core::daemon`] until SIGINT or SIGTERM.
fn run_sm(cli: &Cli, mut config: Config, logging: &sm_core::logging::Logging) -> ExitCode {
    use sm_core::settings::{DaemonSettings, SmSettings};
    use sm_core::sweep::{self, Guid2Lid, HeldTables, SweepOptions};
    use sm_core::pipeline::OnceOptions;

    let args = &cli.sm;
    // Recorded once: laid over the file now and over each file a SIGHUP
    // re-reads.
    let command_line = sm_core::settings::CommandLine {
        overrides: args.overrides(),
        options: args.options.table(),
        log_file: cli.log_file.clone(),
        log_flags: cli.log_flags,
        syslog: cli.syslog,
        log_format: cli.log_format.map(|f| f.to_string()),
    };
    command_line.apply(&mut config);
    let overrides = command_line.overrides.clone();
    let settings = match SmSettings::resolve(&overrides, &config) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    if let Err(code) = use_dump_dir(&settings.dump_dir, &mut config) {
        return code;
    }
    // The files the SM reads back (LIDs, M_Keys) wherever they are.
    for file in [&settings.guid2lid, &settings.guid2mkey].into_iter().flatten() {
        let dir = sm_core::safe_fs::parent(file);
        // A directory that is not there yet is the writer's error to give.
        if std::fs::symlink_metadata(&dir).is_ok() {
            if let Err(e) = sm_core::safe_fs::check_trusted_dir(&dir) {
                return fail(EXIT_BAD_INPUT, format!("{} not used: {e}", file.display()));
            }
        }
    }
    // A partition file given but missing or wrong stops the SM before it
    // starts; later errors keep the last good set (sweep::pkey).
    let perf_config = match sm_core::perfmgr::PerfMgrConfig::from_config(&config) {
        Ok(p) => p,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    let cc_settings = match sm_core::cc::CcSettings::from_config(&config) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    let partitions = match config.check_partitions() {
        Ok(p) => p,
        Err(e) => return fail(EXIT_BAD_INPUT, format!("partitions: {e}")),
    };
    let registry = registry(cli, &config);
    // The engine list is checked before any SMP goes out, so a typo costs
    // nothing on the fabric.
    match sm_core::engines::chain::ChainSpec::parse(&settings.engines, &registry) {
        Err(e) => return fail(EXIT_BAD_INPUT, e),
        // Reported, not fatal: the chain falls through such an engine, as
        // it always has; the admin hears of it before the first sweep.
        Ok(spec) => {
            for (engine, why) in spec.bad_configs(&registry, &|n| config.engine_text(n)) {
                warn!(engine = %engine, "engine configuration refused: {why}");
            }
        }
    }
    let mut opened = match OpenedPort::open(&settings.transport, &args.sim_caps) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let source = opened.source.clone();
    // The umad port's responders' ends, its trap drop counter and its
    // device (for the performance manager's own agent).
    let responders = opened.responders.take();
    let trap_drops = opened.trap_drops.clone();
    let umad_device = opened.umad_device.clone();
    // The embedded fabric, shared with the SA and the performance manager.
    let sim = match &opened.port {
        Opened::Sim(fabric) => Some(fabric.clone()),
        Opened::Umad(_) => None,
    };
    let mut sim_port = None;
    let base: &mut dyn sweep::SmpPort = match &mut opened.port {
        Opened::Sim(fabric) => sim_port.insert(fabric.smp_port()),
        Opened::Umad(umad) => umad,
    };
    // Faults on purpose, between the SM and whichever port it has.
    let mut faulty = None;
    let port: &mut dyn sweep::SmpPort = match args.inject_faults {
        Some(f) => faulty.insert(sm_transport::FaultInjector::new(base, f)),
        None => base,
    };
    // A file that cannot be read stops the SM (OpenSM's exit_on_fatal);
    // with exit_on_fatal FALSE it is logged and the SM starts without it.
    let exit_on_fatal = config.exit_on_fatal.unwrap_or(true);
    let mut guid2lid = match &settings.guid2lid {
        Some(p) => match Guid2Lid::read(p) {
            Ok(g) => g,
            Err(e) if !exit_on_fatal => {
                tracing::error!("{e}; starting without it (exit_on_fatal FALSE): LIDs are assigned afresh");
                Guid2Lid::default()
            }
            Err(e) => return fail(EXIT_BAD_INPUT, e),
        },
        None => Guid2Lid::default(),
    };
    let m_keys = match sweep::MKeys::new(config.m_key_config(), settings.guid2mkey.as_deref()) {
        Ok(k) => Ok(k),
        Err(e) if !exit_on_fatal => {
            tracing::error!("{e}; starting without it (exit_on_fatal FALSE): only the configured M_Key is tried");
            sweep::MKeys::new(config.m_key_config(), None)
        }
        Err(e) => Err(e),
    };
    let m_keys = match m_keys {
        Ok(k) if config.m_key_lookup == Some(false) => k.without_lookup(),
        Ok(k) => k,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    let options = OnceOptions {
        sweep: SweepOptions {
            lmc: settings.lmc,
            reassign_lids: settings.reassign_lids,
            retries: settings.retries,
            m_keys,
            subnet_prefix: settings.subnet_prefix,
            sm_sl: settings.sm_sl,
            no_clients_rereg: config.no_clients_rereg,
            optimized_sl2vl: config.use_optimized_slvl,
            suppress_sl2vl_status_errors: config.suppress_sl2vl_mad_status_errors,
            ..SweepOptions::default()
        },
        engines: &settings.engines,
        // OpenSM's dump_files_dir takes the dumps when no dump directory
        // is given (a failure to write them is only logged).
        dump_dir: settings.dump_dir.as_deref().or(config.dump_files_dir.as_deref()),
    };
    let mut held = HeldTables::default();
    if args.once {
        let mut outcome = match sm_core::pipeline::once(port, &options, &registry, &config, &mut guid2lid, &mut held) {
            Ok(o) => o,
            Err(e) => return fail(EXIT_BAD_INPUT, e),
        };
        outcome.report.topology = source;
        // After the dumps, which write a guid2lid of today's ports only: this
        // one also remembers ports that are away.
        if let Some(p) = &settings.guid2lid {
            if let Err(e) = guid2lid.write(p) {
                return fail(EXIT_BAD_INPUT, e);
            }
        }
        if let Err(code) = show_sweep(&outcome, None, args.report.as_deref()) {
            return code;
        }
        report_faults(faulty.as_ref().map(|f| f.stats()));
        // As OpenSM: congestion control once the fabric is routed.
        if let (Some((mut manager, mut agent)), Some(_)) =
            (start_congestion_control(cc_settings, sim.as_ref(), umad_device.as_ref()), &outcome.accepted)
        {
            let started = std::time::Instant::now();
            let r = manager.program(&outcome.sweep.fabric, agent.as_mut());
            println!(
                "CC            {} Sets sent, {} acknowledged, {} failed, {} ports without congestion control ({} µs)",
                r.sent,
                r.acknowledged,
                r.failures.len(),
                r.unavailable,
                started.elapsed().as_micros()
            );
            for f in &r.failures {
                println!("CC            failed: {f}");
            }
        }
        // The embedded fabric's hosts and PMAs answer too: one SA query
        // and one PMA read show it.
        if let (Some(fabric), Some(_)) = (&sim, &outcome.accepted) {
            match sm_core::embedded::self_check(fabric, &outcome) {
                Ok(check) => println!("{check}"),
                Err(e) => warn!("embedded fabric: no SA or PMA check: {e}"),
            }
        }
        return if outcome.accepted.is_some() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_NOT_ROUTED) };
    }

    let daemon_settings = match DaemonSettings::resolve(&overrides, &config, settings.interval) {
        Ok(d) => d,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    // Removed when run_sm returns, whichever way.
    let _pid_file = match &daemon_settings.pid_file {
        Some(p) => match sm_core::pidfile::PidFile::create(p) {
            Ok(f) => Some(f),
            Err(e) => return fail(EXIT_BAD_INPUT, e),
        },
        None => None,
    };
    let signals = Arc::new(sm_core::daemon::Signals::default());
    if let Err(e) = handle_signals(&signals, &logging.reopen) {
        return fail(EXIT_BAD_INPUT, e);
    }
    let groups = Arc::new(std::sync::Mutex::new(sm_core::mcast::McGroups::new()));
    // The groups OpenSM's partition code creates (each `ipoib`
    // partition's IPoIB broadcast group, the `mgid=` lines): Linux IPoIB
    // joins them without the fields needed to create them. Made from the
    // file now, and again after each heavy sweep from the partitions it
    // resolved (a partition without members has none, a re-read file may
    // add some).
    let packet_life = daemon_settings.packet_life;
    let precreate = move |groups: &std::sync::Mutex<sm_core::mcast::McGroups>, wanted: &[sm_core::mcast::precreate::PartitionGroups]| {
        let mut g = groups.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for e in sm_core::mcast::precreate::precreate(&mut g, wanted, packet_life) {
            warn!("multicast group not created: {e}");
        }
    };
    let mut groups_made = sm_core::mcast::precreate::partition_groups(&partitions, None, config.qos);
    let heavy_groups = Arc::clone(&groups);
    let standby_options = daemon_settings.standby_options(&settings, options.sweep.m_keys.clone());
    let (sa, standby) = match start_responders(sim.as_ref(), responders, &groups, &daemon_settings, standby_options) {
        Ok(started) => started,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    // The saved registrations come back at the first master sweep, before
    // the SA answers (BUSY until that sweep publishes).
    let _sa_saver = restore_sa(sa.as_deref(), &daemon_settings);
    precreate(&groups, &groups_made);
    let status = Arc::new(std::sync::Mutex::new(sm_core::control::Status::default()));
    status.lock().map(|mut s| s.set("transport", source.clone())).ok();
    let cc_status = Arc::clone(&status);
    // The performance manager reads the PMAs on a thread and GSI agent of
    // its own, on a umad port or on the embedded fabric.
    let perf = sm_core::perfmgr::Shared::default();
    let perf_thread = start_perfmgr(perf_config.as_ref(), sim.as_ref(), umad_device.as_ref(), &perf, &signals);
    let perf_db = perf_thread.as_ref().map(|_| Arc::clone(&perf.db));
    let metrics = Arc::new(sm_core::metrics::Metrics::new(sa.as_ref().map(|s| s.requests_handled())));
    // Served until run_sm returns.
    let _endpoints = match Endpoints::serve(&daemon_settings, &metrics, &status, perf_db, &signals, &logging.filter, sim.as_ref()) {
        Ok(e) => e,
        Err(e) => return fail(EXIT_BAD_INPUT, e),
    };
    // SIGHUP re-reads the file the SM started with; the command line is
    // laid over it again.
    let config_file = match &cli.config {
        Some(path) => match sm_core::daemon::reload::ConfigSource::read(path, command_line.clone()) {
            Ok(source) => Some(source),
            Err(e) => return fail(EXIT_BAD_INPUT, e),
        },
        None => None,
    };
    let daemon = sm_core::daemon::DaemonOptions {
        config_file,
        once: options,
        interval: settings.interval,
        trap_settle: daemon_settings.trap_settle,
        trap_limits: sm_core::daemon::traps::TrapLimits {
            babbling_port_policy: config.babbling_port_policy,
            ..Default::default()
        },
        guid2lid_path: settings.guid2lid.clone(),
        ucast_cache: daemon_settings.ucast_cache,
        incremental: daemon_settings.incremental,
        standby,
        // disable_multicast: no MFT is programmed (the SA still keeps
        // groups, as OpenSM's).
        groups: (!config.disable_multicast).then_some(groups),
        sa,
        status: Some(status),
        force_heavy_sweep: config.force_heavy_sweep,
        sweep_on_trap: config.sweep_on_trap.unwrap_or(true),
        honor_guid2lid_file: config.honor_guid2lid_file,
    };
    let report_path = args.report.clone();
    let qos = config.qos;
    let ignore_cas = perf_config.as_ref().is_some_and(|c| c.ignore_cas);
    let perf_targets = perf_thread.as_ref().map(|_| Arc::clone(&perf.targets));
    // Congestion control after every heavy sweep that routed, on a GSI
    // agent of class 0x21 of its own (OpenSM: once the subnet is up).
    let mut congestion = start_congestion_control(cc_settings, sim.as_ref(), umad_device.as_ref());
    // Checked at startup (SmSettings::resolve).
    let node_names = config.node_names().unwrap_or_default();
    let mut on_heavy = |outcome: &sm_core::pipeline::OnceOutcome, n: u64, cause: sm_core::daemon::Cause| {
        metrics.record_heavy(outcome);
        if let Some(targets) = &perf_targets {
            let mut ports = sm_core::perfmgr::targets_from_fabric(&outcome.sweep.fabric, ignore_cas);
            sm_core::perfmgr::name_targets(&mut ports, &node_names);
            *targets.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = ports;
        }
        if let (Some((manager, agent)), Some(_)) = (congestion.as_mut(), &outcome.accepted) {
            let span = tracing::info_span!("congestion_control");
            let _enter = span.enter();
            // As OpenSM on becoming master: whatever another SM set in
            // between, every port is sent everything again.
            if cause == sm_core::daemon::Cause::Takeover {
                manager.forget();
            }
            let r = manager.program(&outcome.sweep.fabric, agent.as_mut());
            let line = format!("{} Sets acknowledged, {} failed, {} ports unchanged", r.acknowledged, r.failures.len(), r.unchanged);
            cc_status.lock().map(|mut s| s.set("congestion_control", line)).ok();
        }
        if let Some(p) = &outcome.partitions {
            let wanted = sm_core::mcast::precreate::partition_groups(&p.resolved.config, Some(&p.resolved.members), qos);
            if wanted != groups_made {
                precreate(&heavy_groups, &wanted);
                groups_made = wanted;
            }
        }
        println!("== heavy sweep {n} ({cause:?})");
        let mut outcome_report = outcome.report.clone();
        outcome_report.topology = source.clone();
        let _ = show_sweep_report(outcome, &outcome_report, Some(n), report_path.as_deref());
    };
    let mut registry = registry;
    let context = sm_core::daemon::DaemonContext {
        port,
        options: &daemon,
        registry: &mut registry,
        config: &config,
        guid2lid: &mut guid2lid,
        held: &mut held,
        signals: &signals,
    };
    let summary = sm_core::daemon::run(context, &mut on_heavy);
    println!(
        "smcore stopped: {} heavy sweeps, {} light sweeps, {} traps ({} dropped by the intake, {} by the full queue)",
        summary.heavy_sweeps,
        summary.light_sweeps,
        summary.traps,
        summary.traps_dropped,
        trap_drops.map_or(0, |d: Arc<std::sync::atomic::AtomicU64>| d.load(std::sync::atomic::Ordering::Relaxed))
    );
    report_faults(faulty.as_ref().map(|f| f.stats()));
    // The performance manager ends with the SM (after its current read).
    signals.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(t) = perf_thread {
        let _ = t.join();
    }
    if let Some(why) = &summary.fatal {
        return fail(EXIT_TRANSPORT_LOST, format!("the SM's port is gone: {why}"));
    }
    ExitCode::SUCCESS
}

fn show_sweep(outcome: &sm_core::pipeline::OnceOutcome, n: Option<u64>, report: Option<&std::path::Path>) -> Result<(), ExitCode> {
    show_sweep_report(outcome, &outcome.report, n, report)
}

/// Prints a heavy sweep's routing report and SMP figures; writes them as
/// JSON to `report` (replaced atomically, so a reader never sees half).
fn show_sweep_report(
    outcome: &sm_core::pipeline::OnceOutcome,
    route_report: &sm_core::report::RouteReport,
    n: Option<u64>,
    report: Option<&std::path::Path>,
) -> Result<(), ExitCode> {
    print!("{route_report}");
    let s = &outcome.sweep;
    let p = &outcome.program;
    let phases = [
        ("discovery", s.discovery_smps.sent, String::new()),
        (
            "lids",
            s.program_smps.sent,
            format!("{} set, {} unchanged, {} failed", s.program.set, s.program.unchanged, s.program.failed),
        ),
        ("link", p.link.smps.sent, phase_line(&p.link, "ports")),
        ("switch_info", p.switch_info.smps.sent, phase_line(&p.switch_info, "switches")),
        ("lft", p.lft.smps.sent, format!("{}, {} read", phase_line(&p.lft, "blocks"), p.lft.read)),
        ("sl2vl", p.sl2vl.smps.sent, phase_line(&p.sl2vl, "tables")),
        ("vlarb", p.vlarb.smps.sent, phase_line(&p.vlarb, "blocks")),
        ("pkey", p.pkey.smps.sent, format!("{}, {} read", phase_line(&p.pkey, "blocks/ports"), p.pkey.read)),
        ("arm", p.arm.smps.sent, phase_line(&p.arm, "ports")),
        ("activate", p.activate.smps.sent, phase_line(&p.activate, "ports")),
    ];
    println!("SMPs per phase:");
    let mut json_phases = serde_json::Map::new();
    for (name, sent, detail) in &phases {
        println!("  {name:<12} {sent:>7}  {detail}");
        json_phases.insert((*name).to_string(), serde_json::json!(sent));
    }
    let total = s.total_smps() + p.total_smps();
    println!("  {:<12} {total:>7}", "total");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if let Some(path) = report {
        let mut json = serde_json::to_value(route_report).unwrap_or_default();
        if let Some(obj) = json.as_object_mut() {
            obj.insert("smps_per_phase".into(), serde_json::Value::Object(json_phases));
            obj.insert("smps_total".into(), serde_json::json!(total));
            if let Some(n) = n {
                obj.insert("heavy_sweep".into(), serde_json::json!(n));
            }
        }
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        // Through a temporary of an unpredictable name: never a link
        // planted beside the report.
        if let Err(e) = sm_core::safe_fs::replace_bytes(path, sm_core::safe_fs::PUBLIC, (text + "\n").as_bytes()) {
            return Err(fail(EXIT_BAD_INPUT, format!("{}: {e}", path.display())));
        }
    }
    Ok(())
}

/// The embedded fabric of `--fabric TOPOLOGY`, with the SM where the
/// offline snapshot puts it.
fn sim_fabric(topology: &std::path::Path, caps: &[sm_core::sim::CapsSpec]) -> Result<sm_core::sim::SimFabric, ExitCode> {
    let topo = match sm_topology::parse_file(topology) {
        Ok(t) => t,
        Err(e) => return Err(fail(EXIT_BAD_INPUT, e)),
    };
    // Where the offline snapshot puts its sm_node: the first CA with a
    // cable, on its first cabled port.
    let Some(&(sm_node, sm_port)) = topo.cabled_cas().first() else {
        return Err(fail(EXIT_BAD_INPUT, format!("{}: no CA with a linked port to run the SM on", topology.display())));
    };
    let mut options = sm_core::sim::SimOptions::default();
    for spec in caps {
        options.apply_caps(spec);
    }
    sm_core::sim::SimFabric::with_options(&topo, sm_node, sm_port, options)
        .map_err(|e| fail(EXIT_BAD_INPUT, format!("{}: {e}", topology.display())))
}

/// What `--inject-faults` did, on stdout with the sweep reports.
fn report_faults(stats: Option<sm_transport::FaultStats>) {
    if let Some(s) = stats {
        println!(
            "faults injected: {} SMPs dropped, {} answers lost, {} answers corrupted ({} SMPs passed)",
            s.dropped, s.answers_lost, s.corrupted, s.passed
        );
    }
}

fn phase_line(p: &sm_core::sweep::PhaseReport, what: &str) -> String {
    format!("{} {what} set, {} unchanged, {} failed", p.set, p.unchanged, p.failed)
}

fn dir_list(r: &Registry) -> String {
    r.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":")
}

/// One clear line on stderr, and the exit status.
/// OpenSM's `-D` value: `0x` hex or decimal, one byte.
fn parse_flags(text: &str) -> Result<u8, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not OpenSM's log flags (one byte, e.g. 0x03)"))
}

/// A GUID as `ibstat -p` prints it (`0x` hex) or bare hex.
fn parse_guid(text: &str) -> Result<u64, String> {
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    u64::from_str_radix(hex, 16).map_err(|_| format!("`{text}` is not a GUID (hex, e.g. 0x0002c90300000001)"))
}

/// Where and how to log: flags first, then the config. A subcommand
/// (`route`, `ctl`, ...) logs to stderr unless told otherwise by a flag:
/// the config's log file is the running SM's, maybe not writable by the
/// admin asking it a question.
fn log_settings(cli: &Cli, config: &Config) -> Result<sm_core::logging::LogSettings, String> {
    use sm_core::logging::{flags_filter, Destination, Format, LogSettings, SYSLOG_SOCKET};
    // `--log syslog` names the destination, not a filter (OpenSM users
    // know it from `-l syslog`-style options).
    let to_syslog = cli.log.as_deref() == Some("syslog");
    let filter = match (cli.log.as_ref().filter(|_| !to_syslog), cli.log_flags.or(config.log_flags)) {
        (Some(f), _) => f.clone(),
        (None, Some(flags)) => flags_filter(flags).to_string(),
        (None, None) => "warn".to_string(),
    };
    let is_sm = cli.command.is_none();
    let destination = if cli.syslog || to_syslog || (is_sm && cli.log_file.is_none() && config.syslog) {
        // The socket can be moved for tests and containers.
        Destination::Syslog(std::env::var_os("SMCORE_SYSLOG_SOCKET").map_or_else(|| SYSLOG_SOCKET.into(), Into::into))
    } else {
        match cli.log_file.as_ref().or(config.log_file.as_ref().filter(|_| is_sm)) {
            Some(p) if p.as_os_str() == "-" => Destination::Stderr,
            Some(p) => Destination::File(p.clone()),
            None => Destination::Stderr,
        }
    };
    let format = match (cli.log_format, &config.log_format) {
        (Some(f), _) => f,
        (None, Some(name)) => name.parse::<Format>()?,
        (None, None) => Format::Text,
    };
    Ok(LogSettings {
        filter,
        destination,
        max_size: config.log_max_size.unwrap_or(0).saturating_mul(1 << 20),
        append: config.accum_log_file.unwrap_or(true),
        format,
        prefix: config.log_prefix.clone(),
    })
}

fn fail(code: u8, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("smcore: error: {e}");
    ExitCode::from(code)
}
