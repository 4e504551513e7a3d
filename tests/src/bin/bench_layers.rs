//! Route time, VLs and balance of smcore's topology-agnostic deadlock-free
//! engines (lash, dfsssp, sssp, nue) against OpenSM 3.3.23's on the same
//! fabrics, in one run.
//!
//! Run from the repository root with `bench/layers.sh` (it builds the
//! release profile first). Three fabrics, each served to OpenSM by one
//! ibsim started once:
//!
//! * `torus`: a 3D torus (default 6x6x6, 2 hosts per switch); lash is run
//!   twice there, plain and with mesh analysis;
//! * `random`: a random irregular fabric (default 500 switches of 36 ports,
//!   4 hosts each, a random spanning tree plus 1,000 extra links, seed 1);
//! * `tree`: a k-ary n-tree (default 16-ary 3-tree, 4,096 CAs).
//!
//! Per engine and fabric:
//!
//! * smcore: `smcore route NET --engines <e>,no_fallback --report R.json`,
//!   the first of the runs also with `--dump-dir D`; the figure is the
//!   report's `route` phase (median over the runs), VLs are its
//!   `vls_used`;
//! * OpenSM: `opensm -o -Q -R <e> [engine options]` under ibsim, one run at
//!   `-D 0x07` for the time (the log window from `building routing with
//!   '<e>'` to `tables configured on all switches`, as
//!   `smcore_tests::opensm` reads it) and one at `-D 0x47` that writes the
//!   dumps. The VLs come from the engine's own log lines (lash `Lanes
//!   needed`, dfsssp `Virtual Lanes needed`); sssp assigns none; nue uses
//!   the `nue_max_num_vls` it was given unless it logs that it could not.
//!   When OpenSM's engine fails and its minhop fallback routes, that is a
//!   failure of the engine, and the fallback's figures are marked as such.
//!
//! Balance and path length of both SMs are judged from their dumps by the
//! same code ([`smcore_tests::lfts::quality_of_dump_dir`]): CA-to-CA routes
//! per directed inter-switch link (max / mean) and mean extra hops over the
//! shortest path.
//!
//! Every OpenSM run is under `--opensm-timeout` (default 600 s). A
//! `--budget-min` (default 38) keeps the whole benchmark bounded: once it
//! is spent, OpenSM dump runs are skipped (and said so).
//!
//! Options: `--fabrics LIST` (torus,random,tree), `--engines LIST`,
//! `--runs N` (smcore runs, default 3), `--nue-vls N` (default 8),
//! `--torus DIMS`, `--torus-hosts N`, `--random-switches N`,
//! `--random-hosts N`, `--random-ports N`, `--random-extra-links N`,
//! `--seed N`, `--k K --n N`, `--opensm-timeout SECS`, `--budget-min M`,
//! `--out FILE`, `--work DIR`, `--debug`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use smcore_tests::bench::{self, fmt_ms, median, Machine};
use smcore_tests::ibsim::{Ibsim, IbsimOptions};
use smcore_tests::lfts::{quality_of_dump_dir, Quality};
use smcore_tests::opensm::{self, LogMode, OpenSmOptions, OpenSmRun};
use smcore_tests::proc::Outcome;
use smcore_tests::smcore::{workspace_root, Profile, Smcore};

struct Args {
    fabrics: Vec<String>,
    engines: Vec<String>,
    runs: usize,
    nue_vls: u8,
    torus: String,
    torus_hosts: usize,
    random_switches: usize,
    random_hosts: usize,
    random_ports: usize,
    random_extra: usize,
    seed: u64,
    k: usize,
    n: usize,
    opensm_timeout: Duration,
    budget: Duration,
    out: PathBuf,
    work: PathBuf,
    profile: Profile,
}

fn parse_args() -> Result<Args, String> {
    let shm = Path::new("/dev/shm");
    let mut args = Args {
        fabrics: ["torus", "random", "tree"].map(String::from).to_vec(),
        engines: ["lash", "dfsssp", "sssp", "nue"].map(String::from).to_vec(),
        runs: 3,
        nue_vls: 8,
        torus: "6x6x6".into(),
        torus_hosts: 2,
        random_switches: 500,
        random_hosts: 4,
        random_ports: 36,
        random_extra: 1000,
        seed: 1,
        k: 16,
        n: 3,
        opensm_timeout: Duration::from_secs(600),
        budget: Duration::from_secs(38 * 60),
        out: workspace_root().join("bench/results-layers.md"),
        work: if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        },
        profile: Profile::Release,
    };
    let list = |v: String| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String, what: &str| v.parse::<usize>().map_err(|e| format!("{what}: {e}"));
        match a.as_str() {
            "--fabrics" => args.fabrics = list(value()?),
            "--engines" => args.engines = list(value()?),
            "--runs" => args.runs = num(value()?, "--runs")?,
            "--nue-vls" => {
                let v = num(value()?, "--nue-vls")?;
                if !(1..=15).contains(&v) {
                    return Err(format!("--nue-vls must be 1..=15, not {v}"));
                }
                args.nue_vls = v as u8;
            }
            "--torus" => args.torus = value()?,
            "--torus-hosts" => args.torus_hosts = num(value()?, "--torus-hosts")?,
            "--random-switches" => args.random_switches = num(value()?, "--random-switches")?,
            "--random-hosts" => args.random_hosts = num(value()?, "--random-hosts")?,
            "--random-ports" => args.random_ports = num(value()?, "--random-ports")?,
            "--random-extra-links" => args.random_extra = num(value()?, "--random-extra-links")?,
            "--seed" => args.seed = num(value()?, "--seed")? as u64,
            "--k" => args.k = num(value()?, "--k")?,
            "--n" => args.n = num(value()?, "--n")?,
            "--opensm-timeout" => {
                args.opensm_timeout = Duration::from_secs(num(value()?, "--opensm-timeout")? as u64)
            }
            "--budget-min" => {
                args.budget = Duration::from_secs(60 * num(value()?, "--budget-min")? as u64)
            }
            "--out" => args.out = PathBuf::from(value()?),
            "--work" => args.work = PathBuf::from(value()?),
            "--debug" => args.profile = Profile::Debug,
            "-h" | "--help" => {
                println!(
                    "usage: bench_layers [--fabrics torus,random,tree] [--engines LIST] [--runs N] [--nue-vls N] \
                     [--torus DIMS] [--torus-hosts N] [--random-switches N] [--random-hosts N] [--random-ports N] \
                     [--random-extra-links N] [--seed N] [--k K] [--n N] [--opensm-timeout SECS] [--budget-min M] \
                     [--out FILE] [--work DIR] [--debug]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.runs == 0 || args.engines.is_empty() || args.fabrics.is_empty() {
        return Err("need at least one run, one engine and one fabric".into());
    }
    if let Some(f) = args
        .fabrics
        .iter()
        .find(|f| !["torus", "random", "tree"].contains(&f.as_str()))
    {
        return Err(format!("unknown fabric {f} (torus, random, tree)"));
    }
    Ok(args)
}

/// One engine with its options, the same on both sides.
struct Variant {
    label: String,
    engine: String,
    sm_args: Vec<String>,
    osm_args: Vec<String>,
}

fn variants(args: &Args, fabric: &str) -> Vec<Variant> {
    let mut v = Vec::new();
    for e in &args.engines {
        let mut sm_args = Vec::new();
        // QoS on for every OpenSM run: nue drops to 1 VL without it, and the
        // SL-based engines then get their SL2VL programmed the same way.
        let mut osm_args = vec!["-Q".to_string()];
        if e == "nue" {
            sm_args.extend(["--nue-max-num-vls".to_string(), args.nue_vls.to_string()]);
            osm_args.extend(["--nue_max_num_vls".to_string(), args.nue_vls.to_string()]);
        }
        v.push(Variant {
            label: e.clone(),
            engine: e.clone(),
            sm_args: sm_args.clone(),
            osm_args: osm_args.clone(),
        });
        if e == "lash" && fabric == "torus" {
            sm_args.push("--do-mesh-analysis".into());
            osm_args.push("--do_mesh_analysis".into());
            v.push(Variant {
                label: "lash + mesh analysis".into(),
                engine: e.clone(),
                sm_args,
                osm_args,
            });
        }
    }
    v
}

/// What OpenSM's log says about the VLs of one run.
#[derive(Debug, Default, Clone)]
struct OsmVls {
    needed: Option<u32>,
    available: Option<u32>,
    note: Option<String>,
}

/// The last number after `marker` in the log.
fn last_number_after(text: &str, marker: &str) -> Option<u32> {
    text.lines()
        .filter_map(|l| l.split_once(marker).map(|(_, r)| r))
        .filter_map(|r| {
            r.trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
        })
        .last()
}

fn osm_vls(engine: &str, log: &str, nue_vls: u8) -> OsmVls {
    let mut v = OsmVls::default();
    match engine {
        "lash" => {
            v.needed = last_number_after(log, "Lanes needed:");
            if let Some(l) = log.lines().find(|l| l.contains("ERR 4D02")) {
                v.note = l.split_once(" -> ").map(|(_, m)| m.trim().to_string());
                // A lash that gives up logs its need only in the error.
                v.needed = v
                    .needed
                    .or_else(|| last_number_after(l, "Lane requirements ("));
            }
        }
        "dfsssp" => {
            v.needed = last_number_after(log, "Virtual Lanes needed:");
            v.available = last_number_after(log, "Virtual Lanes available:");
        }
        "sssp" => v.needed = Some(1),
        "nue" => {
            v.needed = Some(nue_vls as u32);
            if log.contains("NUE48") {
                v.needed = Some(1);
                v.note = Some("NUE48: QoS off, nue used 1 VL".into());
            } else if log.contains("NUE47") {
                v.needed = None;
                v.note = Some("NUE47: asked for more VLs than the ports support".into());
            }
        }
        _ => {}
    }
    v
}

/// One OpenSM run as recorded.
#[derive(Default)]
struct OsmFigures {
    route_ms: Option<f64>,
    wall_s: f64,
    /// Engine that routed (None: none did / timeout).
    routed_by: Option<String>,
    asked_routed: bool,
    timed_out: bool,
    vls: OsmVls,
    errors: Vec<String>,
}

fn osm_figures(run: &OpenSmRun, engine: &str, nue_vls: u8) -> OsmFigures {
    let text = std::fs::read(&run.log_file)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    OsmFigures {
        route_ms: run.route_time().map(|d| d.as_secs_f64() * 1e3),
        wall_s: run.wall.as_secs_f64(),
        routed_by: run.routed_by().map(String::from),
        asked_routed: run.success() && run.asked_engine_routed(),
        timed_out: matches!(run.outcome, Outcome::TimedOut),
        vls: osm_vls(engine, &text, nue_vls),
        errors: run.log.errors.iter().take(4).cloned().collect(),
    }
}

/// Everything measured for one engine on one fabric.
#[derive(Default)]
struct EngineResult {
    label: String,
    engine: String,
    sm_cmd: String,
    osm_cmd: String,
    sm_route_ms: Vec<f64>,
    sm_engine_ms: Vec<f64>,
    sm_total_ms: Vec<f64>,
    sm_vls: Option<f64>,
    sm_report_extra: Option<f64>,
    sm_report_max: Option<f64>,
    sm_report_mean: Option<f64>,
    /// Why smcore's engine did not route.
    sm_failure: Option<String>,
    sm_quality: Option<Quality>,
    osm_time: Option<OsmFigures>,
    osm_dump: Option<OsmFigures>,
    osm_quality: Option<Quality>,
    notes: Vec<String>,
}

struct FabricBench {
    name: String,
    gen: Vec<String>,
    switches: usize,
    end_ports: usize,
    ibsim_args: String,
    ibsim_ready_s: f64,
    results: Vec<EngineResult>,
    error: Option<String>,
}

struct Ctx<'a> {
    args: &'a Args,
    sm: &'a Smcore,
    started: Instant,
}

impl Ctx<'_> {
    fn over_budget(&self) -> bool {
        self.started.elapsed() > self.args.budget
    }
}

fn run_smcore(
    ctx: &Ctx,
    net: &Path,
    topo: &sm_topology::Topology,
    v: &Variant,
    r: &mut EngineResult,
) {
    let chain = format!("{},no_fallback", v.engine);
    let tag = v.label.replace(' ', "_").replace('+', "");
    let report = ctx.args.work.join(format!("{tag}.report.json"));
    let dump = ctx.args.work.join(format!("{tag}-smcore-dumps"));
    r.sm_cmd = format!(
        "smcore route NET --engines {chain}{}{} --report R.json --dump-dir D",
        if v.sm_args.is_empty() { "" } else { " " },
        v.sm_args.join(" ")
    );
    for i in 0..ctx.args.runs {
        let dir = (i == 0).then_some(dump.as_path());
        let run = match bench::route(
            ctx.sm,
            net,
            &chain,
            &report,
            dir,
            &v.sm_args,
            Duration::from_secs(1800),
        ) {
            Ok(run) => run,
            Err(e) => {
                r.sm_failure = Some(e.to_string());
                return;
            }
        };
        if !run.routed_by(&v.engine) {
            r.sm_failure = Some(format!(
                "{} ({})",
                run.reason(&v.engine).unwrap_or(run.output.trim()),
                run.status
            ));
            // A refusal is the result: its time is still the engine's.
            r.sm_route_ms
                .push(run.phase_ms("route").unwrap_or(f64::NAN));
            r.sm_engine_ms
                .push(run.engine_route_ms(&v.engine).unwrap_or(f64::NAN));
            let _ = std::fs::remove_dir_all(&dump);
            return;
        }
        r.sm_route_ms
            .push(run.phase_ms("route").unwrap_or(f64::NAN));
        r.sm_engine_ms
            .push(run.engine_route_ms(&v.engine).unwrap_or(f64::NAN));
        r.sm_total_ms
            .push(run.phase_ms("total").unwrap_or(f64::NAN));
        r.sm_vls = run.number("vls_used");
        r.sm_report_extra = run.number("avg_extra_hops");
        r.sm_report_max = run.number("max_routes_per_link");
        r.sm_report_mean = run.number("mean_routes_per_link");
        if i == 0 {
            match quality_of_dump_dir(topo, &dump) {
                Ok(q) => r.sm_quality = Some(q),
                Err(e) => r.notes.push(format!("smcore dumps not judged: {e}")),
            }
            let _ = std::fs::remove_dir_all(&dump);
        }
        eprintln!(
            "  [{}] smcore run {}: route {:.1} ms, VLs {}",
            v.label,
            i + 1,
            run.phase_ms("route").unwrap_or(f64::NAN),
            run.number("vls_used").unwrap_or(f64::NAN)
        );
    }
}

fn run_opensm(
    ctx: &Ctx,
    sim: &Ibsim,
    topo: &sm_topology::Topology,
    v: &Variant,
    r: &mut EngineResult,
) {
    let mut opts = OpenSmOptions::new(&v.engine);
    opts.extra_args = v.osm_args.clone();
    opts.timeout = ctx.args.opensm_timeout;
    opts.log = LogMode::Timing;
    r.osm_cmd = format!(
        "opensm -o -R {} {} -D 0x07 (dump run: -D 0x47)",
        v.engine,
        v.osm_args.join(" ")
    );
    match opensm::run(sim, &opts) {
        Ok(run) => {
            let f = osm_figures(&run, &v.engine, ctx.args.nue_vls);
            eprintln!(
                "  [{}] OpenSM timing run: route {} ms, routed by {:?}, VLs {:?}, whole run {:.1} s{}",
                v.label,
                fmt_ms(f.route_ms),
                f.routed_by,
                f.vls.needed,
                f.wall_s,
                if f.timed_out { " TIMED OUT" } else { "" }
            );
            let stop = f.timed_out || f.routed_by.is_none();
            r.osm_time = Some(f);
            if stop {
                return;
            }
        }
        Err(e) => {
            r.notes.push(format!("OpenSM timing run: {e}"));
            return;
        }
    }
    if ctx.over_budget() {
        r.notes.push(format!(
            "OpenSM dump run skipped: the {:.0}-minute budget was spent",
            ctx.args.budget.as_secs_f64() / 60.0
        ));
        return;
    }
    let tag = v.label.replace(' ', "_").replace('+', "");
    let dir = ctx.args.work.join(format!("{tag}-opensm-dumps"));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        r.notes.push(format!("{}: {e}", dir.display()));
        return;
    }
    // The two big dumps nobody reads are streamed away.
    let sinks: Vec<_> = ["opensm-lid-matrix.dump", "opensm.fdbs"]
        .iter()
        .filter_map(|f| bench::DiscardFifo::create(&dir.join(f)).ok())
        .collect();
    opts.log = LogMode::Dumps;
    opts.dir = Some(dir.clone());
    match opensm::run(sim, &opts) {
        Ok(run) => {
            let f = osm_figures(&run, &v.engine, ctx.args.nue_vls);
            if f.routed_by.is_some() && run.success() {
                match quality_of_dump_dir(topo, &dir) {
                    Ok(q) => r.osm_quality = Some(q),
                    Err(e) => r.notes.push(format!("OpenSM dumps not judged: {e}")),
                }
            } else {
                r.notes.push(format!(
                    "OpenSM dump run: {:?}, routed by {:?}",
                    run.outcome, f.routed_by
                ));
            }
            eprintln!(
                "  [{}] OpenSM dump run: route {} ms, routed by {:?}, whole run {:.1} s",
                v.label,
                fmt_ms(f.route_ms),
                f.routed_by,
                f.wall_s
            );
            r.osm_dump = Some(f);
        }
        Err(e) => r.notes.push(format!("OpenSM dump run: {e}")),
    }
    for s in sinks {
        s.finish();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn bench_fabric(ctx: &Ctx, key: &str, out: &mut Vec<FabricBench>, write: &dyn Fn(&[FabricBench])) {
    let a = ctx.args;
    let (name, gen): (String, Vec<String>) = match key {
        "torus" => (
            format!("3D torus {}, {} hosts per switch", a.torus, a.torus_hosts),
            vec!["torus".into(), "--dims".into(), a.torus.clone(), "--hosts".into(), a.torus_hosts.to_string()],
        ),
        "random" => (
            format!(
                "random irregular, {} switches of {} ports, {} hosts each, spanning tree + {} extra links, seed {}",
                a.random_switches, a.random_ports, a.random_hosts, a.random_extra, a.seed
            ),
            [
                "random",
                "--switches",
                &a.random_switches.to_string(),
                "--ports",
                &a.random_ports.to_string(),
                "--hosts",
                &a.random_hosts.to_string(),
                "--extra-links",
                &a.random_extra.to_string(),
                "--seed",
                &a.seed.to_string(),
            ]
            .map(String::from)
            .to_vec(),
        ),
        _ => (
            format!("{}-ary {}-tree", a.k, a.n),
            ["kary-ntree", "--k", &a.k.to_string(), "--n", &a.n.to_string()]
                .map(String::from)
                .to_vec(),
        ),
    };
    let mut fb = FabricBench {
        name,
        gen: gen.clone(),
        switches: 0,
        end_ports: 0,
        ibsim_args: String::new(),
        ibsim_ready_s: 0.0,
        results: Vec::new(),
        error: None,
    };
    let net = a.work.join(format!("{key}.net"));
    let gen_refs: Vec<&str> = gen.iter().map(String::as_str).collect();
    let topo = match ctx
        .sm
        .gen(&gen_refs, &net)
        .map_err(|e| e.to_string())
        .and_then(|_| sm_topology::parse_file(&net).map_err(|e| e.to_string()))
    {
        Ok(t) => t,
        Err(e) => {
            fb.error = Some(e);
            out.push(fb);
            return;
        }
    };
    fb.switches = topo.num_switches();
    fb.end_ports = topo
        .end_nodes()
        .map(|i| topo.nodes[i].num_ports as usize)
        .sum();
    fb.ibsim_args = smcore_tests::ibsim::limit_args(&topo).join(" ");
    eprintln!(
        "[{key}] {}: {} switches, {} end ports",
        fb.name, fb.switches, fb.end_ports
    );
    let t = Instant::now();
    let sim = Ibsim::start_with(
        &net,
        &IbsimOptions {
            ready_timeout: Duration::from_secs(600),
            ..Default::default()
        },
    );
    fb.ibsim_ready_s = t.elapsed().as_secs_f64();
    out.push(fb);
    let sim = match sim {
        Ok(s) => s,
        Err(e) => {
            out.last_mut().expect("pushed").error = Some(format!("ibsim: {e}"));
            return;
        }
    };
    for v in variants(a, key) {
        let mut r = EngineResult {
            label: v.label.clone(),
            engine: v.engine.clone(),
            ..Default::default()
        };
        run_smcore(ctx, &net, &topo, &v, &mut r);
        let fb = out.last_mut().expect("pushed");
        fb.results.push(r);
        write(out);
        let fb = out.last_mut().expect("pushed");
        let r = fb.results.last_mut().expect("pushed");
        run_opensm(ctx, &sim, &topo, &v, r);
        write(out);
    }
    drop(sim);
}

fn ratio_cell(sm: Option<f64>, osm: Option<f64>) -> String {
    match sm.zip(osm) {
        Some((a, o)) if o > 0.0 => format!("{:.3}", a / o),
        _ => "-".into(),
    }
}

/// The OpenSM side of the route-time cell, marked when the asked engine
/// did not route.
fn osm_time_cell(f: Option<&OsmFigures>, timeout: Duration) -> String {
    match f {
        None => "-".into(),
        Some(f) if f.timed_out => match f.route_ms {
            // It routed but the sweep did not end in time.
            Some(ms) => format!(
                "timeout ({:.0} s) after routing in {}",
                timeout.as_secs_f64(),
                fmt_ms(Some(ms))
            ),
            None => format!("timeout ({:.0} s)", timeout.as_secs_f64()),
        },
        Some(f) if f.asked_routed => fmt_ms(f.route_ms),
        Some(f) => match &f.routed_by {
            Some(by) => format!("({} fallback: {})", by, fmt_ms(f.route_ms)),
            None => "not routed".into(),
        },
    }
}

fn osm_vls_cell(f: Option<&OsmFigures>, engine: &str) -> String {
    let Some(f) = f else { return "-".into() };
    let engine_routed = f.asked_routed
        || f.routed_by
            .as_deref()
            .is_some_and(|b| b.eq_ignore_ascii_case(engine));
    if !engine_routed {
        return match (&f.routed_by, f.vls.needed) {
            (Some(by), Some(n)) if engine == "lash" || engine == "dfsssp" => {
                format!("needs {n} ({by}: 1)")
            }
            (Some(by), _) => format!("({by}: 1)"),
            _ => "-".into(),
        };
    }
    match (f.vls.needed, f.vls.available) {
        (Some(n), Some(a)) => format!("{n} needed, spread on {a}"),
        (Some(n), None) => n.to_string(),
        _ => "?".into(),
    }
}

fn verdict(r: &EngineResult, osm: Option<&OsmFigures>) -> String {
    let mut v = Vec::new();
    match &r.sm_failure {
        Some(why) => v.push(format!("smcore {} FAILED: {}", r.engine, why)),
        None => v.push("smcore routed".into()),
    }
    match osm {
        None => v.push("OpenSM not run".into()),
        Some(f) if f.timed_out => v.push(match &f.routed_by {
            Some(by) => {
                format!("OpenSM TIMED OUT (its log says {by} had routed; the sweep did not finish)")
            }
            None => "OpenSM TIMED OUT".into(),
        }),
        Some(f) if f.asked_routed => v.push("OpenSM routed".into()),
        Some(f) => {
            let why = f
                .vls
                .note
                .clone()
                .or_else(|| f.errors.first().cloned())
                .unwrap_or_else(|| "no reason logged".into());
            match &f.routed_by {
                Some(by) => v.push(format!(
                    "OpenSM {} FAILED ({why}); {by} fallback routed, its figures in ()",
                    r.engine
                )),
                None => v.push(format!(
                    "OpenSM {} FAILED ({why}); nothing routed",
                    r.engine
                )),
            }
        }
    }
    let sm = if r.sm_failure.is_none() {
        median(&r.sm_route_ms)
    } else {
        None
    };
    let o = osm.filter(|f| f.asked_routed).and_then(|f| f.route_ms);
    if let Some((a, b)) = sm.zip(o) {
        let x = a / b;
        v.push(if x <= 0.1 {
            "time: meets goal ≤0.1×".into()
        } else if x <= 0.5 {
            "time: ≤0.5× but misses goal 0.1×".into()
        } else {
            "time: WORSE than 0.5× OpenSM".into()
        });
    }
    v.join("; ")
}

fn table(fb: &FabricBench, args: &Args) -> String {
    let mut md = String::from(
        "| engine | smcore route ms | OpenSM route ms | ratio | VLs smcore/OpenSM | max/mean link smcore | max/mean link OpenSM | avg extra hops smcore/OpenSM | verdicts |\n\
         |---|---:|---:|---:|---|---|---|---|---|\n",
    );
    for r in &fb.results {
        let osm = r.osm_time.as_ref();
        let sm_ms = median(&r.sm_route_ms);
        let sm_cell = match (&r.sm_failure, sm_ms) {
            (None, x) => fmt_ms(x),
            (Some(_), Some(x)) => format!("failed after {}", fmt_ms(Some(x))),
            (Some(_), None) => "failed".into(),
        };
        let osm_ms = osm.filter(|f| f.asked_routed).and_then(|f| f.route_ms);
        let ratio = if r.sm_failure.is_none() {
            ratio_cell(sm_ms, osm_ms)
        } else {
            "-".into()
        };
        let sm_vls = if r.sm_failure.is_some() {
            "-".to_string()
        } else {
            r.sm_vls.map_or("-".into(), |x| format!("{x:.0}"))
        };
        let fallback = osm.is_some_and(|f| !f.asked_routed && f.routed_by.is_some());
        let mark = |s: String| {
            if fallback && s != "-" {
                format!("({s})")
            } else {
                s
            }
        };
        let link = |q: Option<&Quality>| {
            q.map_or("-".to_string(), |q| {
                format!("{} / {:.1}", q.max_routes_per_link, q.mean_routes_per_link)
            })
        };
        let extra = |q: Option<&Quality>| q.map(|q| format!("{:.3}", q.avg_extra_hops));
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} / {} | {} |\n",
            r.label,
            sm_cell,
            osm_time_cell(osm, args.opensm_timeout),
            ratio,
            sm_vls,
            osm_vls_cell(osm, &r.engine),
            link(r.sm_quality.as_ref()),
            mark(link(r.osm_quality.as_ref())),
            extra(r.sm_quality.as_ref()).unwrap_or_else(|| "-".into()),
            mark(extra(r.osm_quality.as_ref()).unwrap_or_else(|| "-".into())),
            verdict(r, osm),
        ));
    }
    md
}

fn details(fb: &FabricBench) -> String {
    let mut md = String::from(
        "\n| engine | smcore route ms, every run | smcore engine ms (attempt) | smcore whole run ms | smcore report max / mean / extra hops | OpenSM whole run s (timing / dump) | OpenSM route ms in dump run (-D 0x47) | reachable CA pairs smcore / OpenSM |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| fmt_ms(Some(*x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for r in &fb.results {
        let reach = |q: Option<&Quality>| {
            q.map_or("-".to_string(), |q| {
                format!("{}/{}", q.reachable_pairs, q.pairs)
            })
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} / {} / {} | {} / {} | {} | {} / {} |\n",
            r.label,
            list(&r.sm_route_ms),
            list(&r.sm_engine_ms),
            list(&r.sm_total_ms),
            r.sm_report_max.map_or("-".into(), |x| format!("{x:.0}")),
            r.sm_report_mean.map_or("-".into(), |x| format!("{x:.1}")),
            r.sm_report_extra.map_or("-".into(), |x| format!("{x:.3}")),
            r.osm_time
                .as_ref()
                .map_or("-".into(), |f| format!("{:.1}", f.wall_s)),
            r.osm_dump
                .as_ref()
                .map_or("-".into(), |f| format!("{:.1}", f.wall_s)),
            r.osm_dump
                .as_ref()
                .map_or("-".into(), |f| fmt_ms(f.route_ms)),
            reach(r.sm_quality.as_ref()),
            reach(r.osm_quality.as_ref()),
        ));
    }
    md
}

fn problems(fb: &FabricBench) -> Vec<String> {
    let mut p = Vec::new();
    if let Some(e) = &fb.error {
        p.push(format!("- fabric: {e}"));
    }
    for r in &fb.results {
        if let Some(f) = &r.sm_failure {
            p.push(format!("- {}: smcore: {f}", r.label));
        }
        if let Some(f) = &r.osm_time {
            if !f.asked_routed {
                p.push(format!(
                    "- {}: OpenSM ({}): routed by {:?}; {}; errors: {}",
                    r.label,
                    if f.timed_out { "timed out" } else { "finished" },
                    f.routed_by,
                    f.vls.note.as_deref().unwrap_or("-"),
                    if f.errors.is_empty() {
                        "none".into()
                    } else {
                        f.errors.join(" | ")
                    }
                ));
            } else if let Some(n) = &f.vls.note {
                p.push(format!("- {}: OpenSM: {n}", r.label));
            }
        }
        for n in &r.notes {
            p.push(format!("- {}: {n}", r.label));
        }
    }
    p
}

fn write_results(args: &Args, header: &str, fabrics: &[FabricBench]) -> std::io::Result<()> {
    let mut md = String::from(header);
    md.push_str(
        "\n## Method\n\n\
         - smcore: `target/release/smcore route NET --engines <e>,no_fallback [options] --report R.json --dump-dir D` \
         (the dump directory on the first run only); route ms is the median `route` phase of the report over the runs, \
         VLs its `vls_used`.\n\
         - OpenSM 3.3.23: `opensm -o -Q -R <e> [options] -f LOG -D 0x07` under one `ibsim -s NET` per fabric; \
         route ms is the log window from `building routing with '<e>'` to `<e> tables configured on all switches` \
         (engine plus queueing the LFT blocks). A second run at `-D 0x47` writes the dumps. VLs: lash's \
         `Lanes needed`, dfsssp's `Virtual Lanes needed` (it then spreads the paths over all available VLs), \
         sssp none (1), nue the `--nue_max_num_vls` it was given.\n\
         - Balance and extra hops: both SMs' `opensm-lfts.dump` + LID file judged by the same code \
         (`smcore_tests::lfts::quality_of_dump_dir`): CA-to-CA routes per directed inter-switch link, max / mean \
         (unused links included), and mean extra hops over the shortest path.\n\
         - When OpenSM's engine fails, its minhop fallback routes; that is a failure of the engine, and the fallback's \
         figures are shown in parentheses. ratio = smcore / OpenSM route ms, only where both engines routed.\n\
         - Goals (issue 6): route time ≤ 0.5× OpenSM, aim 0.1×.\n",
    );
    for fb in fabrics {
        md.push_str(&format!(
            "\n## {}\n\n`smcore gen {}`: {} switches, {} end ports. ibsim `-s {}` ready in {:.1} s.\n\n",
            fb.name,
            fb.gen.join(" "),
            fb.switches,
            fb.end_ports,
            fb.ibsim_args,
            fb.ibsim_ready_s
        ));
        md.push_str(&table(fb, args));
        md.push_str(&details(fb));
        let p = problems(fb);
        if !p.is_empty() {
            md.push_str("\nFailures and notes:\n\n");
            md.push_str(&p.join("\n"));
            md.push('\n');
        }
        md.push_str("\nCommands per engine:\n\n");
        for r in &fb.results {
            md.push_str(&format!("- {}: `{}`; `{}`\n", r.label, r.sm_cmd, r.osm_cmd));
        }
    }
    bench::write_results(&args.out, &md)
}

fn fail(msg: String) -> ! {
    bench::die("bench_layers", msg)
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| fail(e));
    let sm = Smcore::locate(args.profile).unwrap_or_else(|e| fail(e.to_string()));
    let work = bench::work_dir("bench_layers", "bench-layers-", &args.work);
    let args = Args {
        work: work.path().to_path_buf(),
        ..args
    };
    let machine = Machine::here(&workspace_root());
    let load_before = bench::load_average();
    let started_at = bench::now_utc();
    let cmdline = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let header_for = |load_after: &str, elapsed: Duration| {
        format!(
            "# Deadlock-free engines (lash, dfsssp, sssp, nue): smcore vs OpenSM\n\n\
             Written by `bench/layers.sh{}{}` (`tests/src/bin/bench_layers.rs`), started {started_at}, \
             whole benchmark {:.1} min.\n\n\
             - Machine: {} CPUs (nproc), CPU model \"{}\", {} memory, kernel {}\n\
             - Load average (1/5/15 min) at start: {load_before}; at end: {load_after} — other agents' builds and \
             tests shared the 2 cores, so absolute times are noisy\n\
             - smcore: {} ({} build, commit {})\n\
             - OpenSM: {}; ibsim: {}\n\
             - smcore runs per engine: {}; OpenSM: one timing run and one dump run per engine; OpenSM timeout {:.0} s; \
             nue_max_num_vls {} on both sides\n",
            if cmdline.is_empty() { "" } else { " " },
            cmdline,
            elapsed.as_secs_f64() / 60.0,
            machine.cpus,
            machine.cpu_model,
            machine.memory,
            machine.kernel,
            sm.bin().display(),
            if args.profile == Profile::Release { "release" } else { "DEBUG" },
            machine.commit,
            machine.opensm,
            machine.ibsim,
            args.runs,
            args.opensm_timeout.as_secs_f64(),
            args.nue_vls,
        )
    };
    let ctx = Ctx {
        args: &args,
        sm: &sm,
        started: Instant::now(),
    };
    let write = |fabrics: &[FabricBench]| {
        let h = header_for("(still running)", ctx.started.elapsed());
        if let Err(e) = write_results(&args, &h, fabrics) {
            eprintln!("bench_layers: writing {}: {e}", args.out.display());
        }
    };
    let mut fabrics = Vec::new();
    for key in &args.fabrics {
        bench_fabric(&ctx, key, &mut fabrics, &write);
    }
    let h = header_for(&bench::load_average(), ctx.started.elapsed());
    if let Err(e) = write_results(&args, &h, &fabrics) {
        fail(format!("writing {}: {e}", args.out.display()));
    }
    eprintln!(
        "wrote {} in {:.1} min",
        args.out.display(),
        ctx.started.elapsed().as_secs_f64() / 60.0
    );
}
