//! Route time and balance of smcore's tree engines against OpenSM 3.3.23's
//! on one large fat tree, in the same run.
//!
//! Run from the repository root with `bench/trees.sh` (it builds the
//! release profile first). The fabric is a k-ary n-tree (`--k 22 --n 3`:
//! 10,648 CAs, 1,452 switches of 44 ports). One ibsim serves every OpenSM
//! run. Per engine, alternately (A B A B ...):
//!
//! * A: `smcore route NET --engines <e>,no_fallback --report R`; the
//!   figure is the engine's own route time (`attempts[].route_ms` of the
//!   report), the `route` phase and the whole run are kept too;
//! * B: `opensm -o -R <e> -D 0x07`; the figure is the log window from
//!   `building routing with '<e>'` to `<e> tables configured on all
//!   switches` (the engine plus queueing the LFT blocks), as
//!   `smcore_tests::opensm` reads it.
//!
//! Then once per engine and side a run that writes dumps (`--dump-dir`,
//! OpenSM `-D 0x47`), judged by the same code for both SMs
//! ([`smcore_tests::lfts::quality`]): reachable CA pairs, hops, and
//! CA-to-CA routes per directed inter-switch link (max and mean). The dumps
//! of this size are gigabytes (the LID matrix above all), so they go to
//! `--work` (default `/dev/shm`) and are deleted as soon as they are read.
//!
//! Options: `--k K --n N`, `--engines LIST` (default minhop,updn,dnup,ftree),
//! `--runs N` (default 3), `--out FILE` (default bench/results-trees.md),
//! `--work DIR`, `--opensm-timeout SECS`, `--no-quality`, `--debug` (the
//! debug build, for trying the benchmark on a small tree).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use smcore_tests::bench::{self, fmt_ms, median, Machine};
use smcore_tests::ibsim::{Ibsim, IbsimOptions};
use smcore_tests::lfts::{quality_of_dump_dir, Quality};
use smcore_tests::opensm::{self, LogMode, OpenSmOptions};
use smcore_tests::smcore::{workspace_root, Profile, Smcore};

struct Args {
    k: usize,
    n: usize,
    engines: Vec<String>,
    runs: usize,
    out: PathBuf,
    work: PathBuf,
    opensm_timeout: Duration,
    quality: bool,
    profile: Profile,
}

fn parse_args() -> Result<Args, String> {
    let shm = Path::new("/dev/shm");
    let mut args = Args {
        k: 22,
        n: 3,
        engines: ["minhop", "updn", "dnup", "ftree"].map(String::from).to_vec(),
        runs: 3,
        out: workspace_root().join("bench/results-trees.md"),
        work: if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        },
        opensm_timeout: Duration::from_secs(1800),
        quality: true,
        profile: Profile::Release,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String, what: &str| v.parse::<usize>().map_err(|e| format!("{what}: {e}"));
        match a.as_str() {
            "--k" => args.k = num(value()?, "--k")?,
            "--n" => args.n = num(value()?, "--n")?,
            "--engines" => {
                args.engines = value()?
                    .split(',')
                    .map(str::to_string)
                    .filter(|s| !s.is_empty())
                    .collect()
            }
            "--runs" => args.runs = num(value()?, "--runs")?,
            "--out" => args.out = PathBuf::from(value()?),
            "--work" => args.work = PathBuf::from(value()?),
            "--opensm-timeout" => args.opensm_timeout = Duration::from_secs(num(value()?, "--opensm-timeout")? as u64),
            "--no-quality" => args.quality = false,
            "--debug" => args.profile = Profile::Debug,
            "-h" | "--help" => {
                println!(
                    "usage: bench_trees [--k K] [--n N] [--engines LIST] [--runs N] [--out FILE] [--work DIR] \
                     [--opensm-timeout SECS] [--no-quality] [--debug]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.runs == 0 || args.engines.is_empty() {
        return Err("need at least one run and one engine".into());
    }
    Ok(args)
}

/// Everything measured for one engine.
#[derive(Default)]
struct EngineResult {
    engine: String,
    /// smcore: the engine's own time, the `route` phase, the whole run.
    sm_engine_ms: Vec<f64>,
    sm_route_phase_ms: Vec<f64>,
    sm_total_ms: Vec<f64>,
    sm_verify_ms: Vec<f64>,
    sm_rss_mib: Vec<f64>,
    /// smcore's own verifier's link load (from its report).
    sm_report_max: Option<f64>,
    sm_report_mean: Option<f64>,
    osm_route_ms: Vec<f64>,
    osm_wall_s: Vec<f64>,
    sm_quality: Option<Quality>,
    osm_quality: Option<Quality>,
    osm_dump_route_ms: Option<f64>,
    notes: Vec<String>,
    error: Option<String>,
}

struct Bench {
    name: String,
    gen: Vec<String>,
    switches: usize,
    end_ports: usize,
    max_lid: Option<f64>,
    ibsim_args: String,
    ibsim_ready_s: f64,
    results: Vec<EngineResult>,
}

fn time_engine(sm: &Smcore, sim: &Ibsim, net: &Path, engine: &str, args: &Args, b: &mut Bench) -> EngineResult {
    let mut r = EngineResult {
        engine: engine.into(),
        ..Default::default()
    };
    if let Err(e) = time_engine_inner(sm, sim, net, engine, args, b, &mut r) {
        eprintln!("[{engine}] stopped: {e}");
        r.error = Some(e);
    }
    r
}

fn time_engine_inner(
    sm: &Smcore,
    sim: &Ibsim,
    net: &Path,
    engine: &str,
    args: &Args,
    b: &mut Bench,
    r: &mut EngineResult,
) -> Result<(), String> {
    let chain = format!("{engine},no_fallback");
    let report = args.work.join(format!("bench-trees-{engine}.report.json"));
    let timeout = Duration::from_secs(3600);
    for i in 0..args.runs {
        // A: smcore.
        let run = bench::route(sm, net, &chain, &report, None, &[], timeout).map_err(|e| e.to_string())?;
        if !run.routed_by(engine) {
            return Err(format!(
                "smcore did not route with {engine} ({}): {}",
                run.status,
                run.reason(engine).unwrap_or(&run.output)
            ));
        }
        let ms = run.engine_route_ms(engine).unwrap_or(f64::NAN);
        r.sm_engine_ms.push(ms);
        r.sm_route_phase_ms.push(run.phase_ms("route").unwrap_or(f64::NAN));
        r.sm_total_ms.push(run.phase_ms("total").unwrap_or(f64::NAN));
        r.sm_verify_ms.push(run.phase_ms("verify").unwrap_or(f64::NAN));
        r.sm_rss_mib.push(run.number("peak_rss_mib").unwrap_or(f64::NAN));
        r.sm_report_max = run.number("max_routes_per_link");
        r.sm_report_mean = run.number("mean_routes_per_link");
        b.max_lid = run.number("max_lid");

        // B: OpenSM.
        let mut opts = OpenSmOptions::new(engine);
        opts.log = LogMode::Timing;
        opts.timeout = args.opensm_timeout;
        let osm = opensm::run(sim, &opts).map_err(|e| e.to_string())?;
        let oms = osm.route_time().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        let routed = osm.success() && osm.asked_engine_routed();
        if routed {
            r.osm_route_ms.push(oms);
        } else {
            r.notes.push(format!(
                "OpenSM run {}: {:?}, routed by {:?}, errors {:?}",
                i + 1,
                osm.outcome,
                osm.routed_by(),
                osm.log.errors.iter().take(3).collect::<Vec<_>>()
            ));
        }
        r.osm_wall_s.push(osm.wall.as_secs_f64());
        eprintln!(
            "[{engine}] run {}: smcore {engine} {:.1} ms (route phase {:.1}, total {:.1} ms, {:.0} MiB) | OpenSM route {:.1} ms{}, whole run {:.1} s",
            i + 1,
            ms,
            run.phase_ms("route").unwrap_or(f64::NAN),
            run.phase_ms("total").unwrap_or(f64::NAN),
            run.number("peak_rss_mib").unwrap_or(f64::NAN),
            oms,
            if routed { "" } else { " (NOT routed by the asked engine)" },
            osm.wall.as_secs_f64()
        );
    }
    Ok(())
}

/// One run per side with dumps, judged by the same code.
fn judge_engine(
    sm: &Smcore,
    sim: &Ibsim,
    net: &Path,
    topo: &sm_topology::Topology,
    args: &Args,
    r: &mut EngineResult,
) -> Result<(), String> {
    let engine = r.engine.clone();
    let engine = engine.as_str();
    let chain = format!("{engine},no_fallback");
    let report = args.work.join(format!("bench-trees-{engine}.report.json"));
    let timeout = Duration::from_secs(3600);

    // smcore's tables, judged from its dumps. smcore writes every dump
    // file through a temporary name and fsyncs it, so a FIFO cannot stand
    // in for the big ones: they must fit in the work directory (memory, for
    // /dev/shm) next to the parsed tables. The LID matrix dominates: about
    // 3 bytes per switch port for every (switch, LID), plus ~100 bytes per
    // entry for the LFT and FDB dumps.
    let lids: usize = topo
        .nodes
        .iter()
        .map(|n| if n.is_switch() { 1 } else { n.num_ports as usize })
        .sum();
    let ports = topo
        .switches()
        .map(|i| topo.nodes[i].num_ports as usize + 1)
        .max()
        .unwrap_or(0);
    let need_mib = (topo.num_switches() * (lids + 1) * (3 * ports + 130)) as u64 / (1 << 20);
    let have_mib = bench::mem_available_mib().unwrap_or(0);
    let dir = args.work.join(format!("bench-trees-{engine}-smcore"));
    let t = Instant::now();
    if have_mib < 2 * need_mib + 4096 {
        r.notes.push(format!(
            "smcore's dumps would take about {need_mib} MiB with {have_mib} MiB available: not written; \
             smcore's balance is its own verifier's figure (report max / mean column)"
        ));
    } else {
        let run = bench::route(sm, net, &chain, &report, Some(&dir), &[], timeout).map_err(|e| e.to_string())?;
        let q = if run.routed_by(engine) {
            quality_of_dump_dir(topo, &dir).map_err(|e| e.to_string())
        } else {
            Err(format!(
                "smcore did not route with {engine} when dumping ({})",
                run.status
            ))
        };
        let _ = std::fs::remove_dir_all(&dir);
        r.sm_quality = Some(q?);
        eprintln!("[{engine}] smcore quality run {:.1} s", t.elapsed().as_secs_f64());
    }

    // OpenSM's tables, judged from its dumps; the two big dumps nobody
    // reads go into FIFOs that discard them.
    let dir = args.work.join(format!("bench-trees-{engine}-opensm"));
    let t = Instant::now();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let sinks = ["opensm-lid-matrix.dump", "opensm.fdbs"]
        .iter()
        .map(|f| bench::DiscardFifo::create(&dir.join(f)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let mut opts = OpenSmOptions::new(engine);
    opts.log = LogMode::Dumps;
    opts.timeout = args.opensm_timeout;
    opts.dir = Some(dir.clone());
    let q = match opensm::run(sim, &opts) {
        Ok(osm) if osm.success() && osm.asked_engine_routed() => {
            r.osm_dump_route_ms = osm.route_time().map(|d| d.as_secs_f64() * 1e3);
            quality_of_dump_dir(topo, &dir).map_err(|e| e.to_string())
        }
        Ok(osm) => Err(format!(
            "OpenSM dump run: {:?}, routed by {:?}",
            osm.outcome,
            osm.routed_by()
        )),
        Err(e) => Err(e.to_string()),
    };
    let discarded: u64 = sinks.into_iter().map(bench::DiscardFifo::finish).sum();
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "[{engine}] OpenSM wrote {:.1} MiB of LID matrix and FDB dumps into FIFOs",
        discarded as f64 / 1048576.0
    );
    match q {
        Ok(q) => r.osm_quality = Some(q),
        Err(e) => r.notes.push(e),
    }
    eprintln!("[{engine}] OpenSM quality run {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

fn q_cells(q: Option<&Quality>) -> [String; 4] {
    match q {
        Some(q) => [
            format!("{}/{}", q.reachable_pairs, q.pairs),
            format!("{:.3}", q.avg_hops),
            q.max_routes_per_link.to_string(),
            format!("{:.1}", q.mean_routes_per_link),
        ],
        None => ["-".into(), "-".into(), "-".into(), "-".into()],
    }
}

fn write_results(args: &Args, b: &Bench, header: &str) -> std::io::Result<()> {
    let mut md = String::from(header);
    md.push_str(&format!(
        "\n## Fabric\n\n{} — `smcore gen {}`: {} switches, {} end ports, max LID {}. \
         ibsim `-s {}` ready in {:.1} s.\n",
        b.name,
        b.gen.join(" "),
        b.switches,
        b.end_ports,
        b.max_lid.map_or("-".into(), |x| format!("{x:.0}")),
        b.ibsim_args,
        b.ibsim_ready_s
    ));

    md.push_str(
        "\n## Route time\n\n\
         Medians over the runs. smcore: the engine's own route time from the report's attempt record \
         (the `route` phase is the same call seen from the chain). OpenSM: the log window \
         from `building routing with '<e>'` to `<e> tables configured on all switches` at `-D 0x07` \
         (the engine's matrices and LFTs plus queueing the LFT blocks; log time stamps in µs). \
         Both on the same fabric in the same run, alternating.\n\n\
         | engine | smcore engine ms | OpenSM route ms | smcore / OpenSM | OpenSM ÷ smcore | smcore route phase ms | smcore whole run ms | smcore verify ms | smcore peak RSS MiB |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &b.results {
        let (sm, osm) = (median(&r.sm_engine_ms), median(&r.osm_route_ms));
        let ratio = sm.zip(osm).map(|(a, o)| a / o);
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.engine,
            fmt_ms(sm),
            fmt_ms(osm),
            ratio.map_or("-".into(), |x| format!("{x:.4}")),
            ratio.map_or("-".into(), |x| if x > 0.1 {
                format!("{:.2}×", 1.0 / x)
            } else {
                format!("{:.0}×", 1.0 / x)
            }),
            fmt_ms(median(&r.sm_route_phase_ms)),
            fmt_ms(median(&r.sm_total_ms)),
            fmt_ms(median(&r.sm_verify_ms)),
            median(&r.sm_rss_mib).map_or("-".into(), |x| format!("{x:.0}")),
        ));
    }

    md.push_str(
        "\n## Balance and paths\n\n\
         From each SM's `opensm-lfts.dump` and LID file of one extra run per engine and side, judged by \
         the same code (`smcore_tests::lfts::quality`): CA-to-CA pairs whose LFT walk arrives, mean links \
         per path (end links included), and CA-to-CA routes per directed inter-switch link (max and mean, \
         unused links included). `smcore report max` is smcore's own verifier's figure from the timing \
         runs, as a cross-check.\n\n\
         | engine | smcore reachable | smcore hops | smcore max routes/link | smcore mean | OpenSM reachable | OpenSM hops | OpenSM max routes/link | OpenSM mean | max smcore / OpenSM | smcore report max / mean |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &b.results {
        let s = q_cells(r.sm_quality.as_ref());
        let o = q_cells(r.osm_quality.as_ref());
        let ratio = r
            .sm_quality
            .as_ref()
            .zip(r.osm_quality.as_ref())
            .filter(|(_, o)| o.max_routes_per_link > 0)
            .map_or("-".into(), |(s, o)| {
                format!("{:.3}", s.max_routes_per_link as f64 / o.max_routes_per_link as f64)
            });
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |\n",
            r.engine,
            s[0],
            s[1],
            s[2],
            s[3],
            o[0],
            o[1],
            o[2],
            o[3],
            ratio,
            r.sm_report_max.map_or("-".into(), |x| format!("{x:.0}")),
            r.sm_report_mean.map_or("-".into(), |x| format!("{x:.1}")),
        ));
    }

    md.push_str(
        "\n## Every run\n\n\
         | engine | smcore engine ms | OpenSM route ms | OpenSM whole run under ibsim, s | OpenSM route ms in the dump run (-D 0x47) |\n\
         |---|---|---|---|---:|\n",
    );
    let list = |v: &[f64]| v.iter().map(|x| fmt_ms(Some(*x))).collect::<Vec<_>>().join(", ");
    for r in &b.results {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.engine,
            list(&r.sm_engine_ms),
            list(&r.osm_route_ms),
            r.osm_wall_s
                .iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            fmt_ms(r.osm_dump_route_ms),
        ));
    }
    let problems: Vec<String> = b
        .results
        .iter()
        .flat_map(|r| {
            r.error
                .iter()
                .map(move |e| format!("- {}: stopped: {e}", r.engine))
                .chain(r.notes.iter().map(move |n| format!("- {}: {n}", r.engine)))
        })
        .collect();
    if !problems.is_empty() {
        md.push_str("\n## Problems during the runs\n\n");
        md.push_str(&problems.join("\n"));
        md.push('\n');
    }
    md.push_str(&format!(
        "\n## Commands\n\n\
         - `bench/trees.sh` (arguments passed on: `--k {} --n {} --engines {} --runs {}`)\n\
         - smcore, per run: `target/release/smcore route NET --engines <e>,no_fallback --report R.json` \
         (quality run: also `--dump-dir D`)\n\
         - OpenSM, per run: `IBSIM_SOCKNAME=… LD_PRELOAD={} OSM_TMP_DIR=T OSM_CACHE_DIR=T opensm -o -R <e> -f T/opensm.log -D 0x07` \
         (quality run: `-D 0x47`, which makes OpenSM write its dumps) against one `ibsim -s [limits] NET` \
         started once; each OpenSM run in a fresh directory.\n",
        args.k,
        args.n,
        args.engines.join(","),
        args.runs,
        smcore_tests::ibsim::UMAD2SIM_LIB,
    ));
    bench::write_results(&args.out, &md)
}

fn fail(msg: String) -> ! {
    bench::die("bench_trees", msg)
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| fail(e));
    let sm = Smcore::locate(args.profile).unwrap_or_else(|e| fail(e.to_string()));
    let work = bench::work_dir("bench_trees", "bench-trees-", &args.work);
    let args = Args {
        work: work.path().to_path_buf(),
        ..args
    };

    let machine = Machine::here(&workspace_root());
    let load_before = bench::load_average();
    let started = bench::now_utc();
    let header_for = |load_after: &str| {
        format!(
            "# Tree engines: route time and balance, smcore vs OpenSM\n\n\
             Written by `bench/trees.sh` (`tests/src/bin/bench_trees.rs`), started {started}.\n\n\
             - Machine: {} CPUs (nproc), CPU model \"{}\", {} memory, kernel {}\n\
             - Load average (1/5/15 min) at start: {load_before}; at end: {load_after} — other jobs shared the machine\n\
             - smcore: {} ({} build, commit {})\n\
             - OpenSM: {}; ibsim: {}\n",
            machine.cpus,
            machine.cpu_model,
            machine.memory,
            machine.kernel,
            sm.bin().display(),
            if args.profile == Profile::Release { "release" } else { "DEBUG" },
            machine.commit,
            machine.opensm,
            machine.ibsim,
        )
    };

    let net = args.work.join(format!("kary-{}-{}.net", args.k, args.n));
    let gen: Vec<String> = ["kary-ntree", "--k", &args.k.to_string(), "--n", &args.n.to_string()]
        .map(String::from)
        .to_vec();
    let gen_refs: Vec<&str> = gen.iter().map(String::as_str).collect();
    sm.gen(&gen_refs, &net).unwrap_or_else(|e| fail(e.to_string()));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| fail(e.to_string()));
    let mut b = Bench {
        name: format!("{}-ary {}-tree", args.k, args.n),
        gen: gen.clone(),
        switches: topo.num_switches(),
        end_ports: topo.end_nodes().map(|i| topo.nodes[i].num_ports as usize).sum(),
        max_lid: None,
        ibsim_args: smcore_tests::ibsim::limit_args(&topo).join(" "),
        ibsim_ready_s: 0.0,
        results: Vec::new(),
    };
    eprintln!(
        "[{}] {} switches, {} end ports; starting ibsim {}",
        b.name, b.switches, b.end_ports, b.ibsim_args
    );
    let t = Instant::now();
    let sim = Ibsim::start_with(
        &net,
        &IbsimOptions {
            ready_timeout: Duration::from_secs(1800),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| fail(e.to_string()));
    b.ibsim_ready_s = t.elapsed().as_secs_f64();

    // Times first, for every engine; then the (slow, gigabyte) dump runs.
    // Partial results are written after each step, so an interrupted run
    // keeps what it measured.
    let partial = |b: &Bench| {
        if let Err(e) = write_results(&args, b, &header_for("(still running)")) {
            eprintln!("bench_trees: writing {}: {e}", args.out.display());
        }
    };
    for engine in &args.engines {
        let r = time_engine(&sm, &sim, &net, engine, &args, &mut b);
        b.results.push(r);
        partial(&b);
    }
    if args.quality {
        for i in 0..b.results.len() {
            if b.results[i].error.is_some() {
                continue;
            }
            let mut r = std::mem::take(&mut b.results[i]);
            if let Err(e) = judge_engine(&sm, &sim, &net, &topo, &args, &mut r) {
                eprintln!("[{}] quality: {e}", r.engine);
                r.notes.push(format!("quality run: {e}"));
            }
            b.results[i] = r;
            partial(&b);
        }
    }
    drop(sim);
    if let Err(e) = write_results(&args, &b, &header_for(&bench::load_average())) {
        fail(format!("writing {}: {e}", args.out.display()));
    }
    eprintln!("wrote {}", args.out.display());
}
