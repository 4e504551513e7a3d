//! Route-time benchmark: smcore's minhop against OpenSM's `-R minhop`.
//!
//! Run from the repository root with `bench/minhop.sh` (it builds the
//! release profile first). For each fabric, alternately (A B A B ...):
//!
//! * A: `target/release/smcore route NET --engines minhop --report R` (the
//!   JSON report gives the time per phase and peak memory);
//! * B: `opensm -o -R minhop -D 0x07` under one ibsim kept for the fabric;
//!   the route time is the log window from `building routing with
//!   'minhop'` to `minhop tables configured on all switches`.
//!
//! and once per fabric the physical floor: the time to allocate
//! switches × (max LID + 1) LFT bytes and write every entry once.
//!
//! Options: `--runs N` (default 3), `--only NAME[,NAME]`, `--out FILE`
//! (default bench/results-minhop.md), `--opensm-timeout SECS`, `--list`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use smcore_tests::ibsim::{Ibsim, IbsimOptions};
use smcore_tests::opensm::{self, LogMode, OpenSmOptions};
use smcore_tests::smcore::{workspace_root, Profile, RouteOptions, Smcore};

struct Fabric {
    name: &'static str,
    what: &'static str,
    gen: &'static [&'static str],
}

const FABRICS: &[Fabric] = &[
    Fabric {
        name: "ft2-1k",
        what: "2-level fat tree, 32 leaves x 32 hosts, 32 spines",
        gen: &["fat-tree", "--leaves", "32", "--spines", "32", "--hosts-per-leaf", "32", "--uplinks", "32"],
    },
    Fabric {
        name: "ft2-2k",
        what: "2-level fat tree, 64 leaves x 32 hosts, 32 spines",
        gen: &["fat-tree", "--leaves", "64", "--spines", "32", "--hosts-per-leaf", "32", "--uplinks", "32"],
    },
    Fabric {
        name: "torus3d-4k",
        what: "3D torus 8x8x8, 8 hosts per switch",
        gen: &["torus", "--dims", "8x8x8", "--hosts", "8"],
    },
    Fabric { name: "ft3-4k", what: "16-ary 3-tree (3-level fat tree)", gen: &["kary-ntree", "--k", "16", "--n", "3"] },
    Fabric {
        name: "torus3d-20k",
        what: "3D torus 12x12x12, 12 hosts per switch",
        gen: &["torus", "--dims", "12x12x12", "--hosts", "12"],
    },
    Fabric { name: "ft3-22k", what: "28-ary 3-tree (3-level fat tree)", gen: &["kary-ntree", "--k", "28", "--n", "3"] },
];

struct Args {
    runs: usize,
    only: Option<Vec<String>>,
    out: PathBuf,
    opensm_timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        runs: 3,
        only: None,
        out: workspace_root().join("bench/results-minhop.md"),
        opensm_timeout: Duration::from_secs(3600),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--runs" => args.runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--only" => args.only = Some(value()?.split(',').map(str::to_string).collect()),
            "--out" => args.out = PathBuf::from(value()?),
            "--opensm-timeout" => {
                args.opensm_timeout =
                    Duration::from_secs(value()?.parse().map_err(|e| format!("--opensm-timeout: {e}"))?)
            }
            "--list" => {
                for f in FABRICS {
                    println!("{:<12} {}  (smcore gen {})", f.name, f.what, f.gen.join(" "));
                }
                std::process::exit(0);
            }
            "-h" | "--help" => {
                println!(
                    "usage: bench_minhop [--runs N] [--only NAME,...] [--out FILE] [--opensm-timeout SECS] [--list]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    Ok(args)
}

/// Everything measured on one fabric.
#[derive(Default)]
struct Result_ {
    name: String,
    what: String,
    gen: String,
    switches: usize,
    end_ports: usize,
    max_lid: u32,
    ibsim_args: String,
    ibsim_ready_s: f64,
    sm_route_ms: Vec<f64>,
    sm_phases: Vec<std::collections::BTreeMap<String, f64>>,
    sm_rss_mib: Vec<f64>,
    sm_max_routes: u64,
    osm_route_ms: Vec<f64>,
    osm_wall_s: Vec<f64>,
    osm_notes: Vec<String>,
    floor_ms: Vec<f64>,
    error: Option<String>,
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Allocate one LFT per switch and write each of its `entries` once, as an
/// engine minimally must. Returns the elapsed time.
fn lft_write_floor(switches: usize, entries: usize) -> Duration {
    let start = Instant::now();
    let mut tables: Vec<Vec<u8>> = Vec::with_capacity(switches);
    for s in 0..switches {
        let mut t = Vec::with_capacity(entries);
        // A value that depends on both indices, so the writes cannot be
        // folded into a memset of a constant.
        t.extend((0..entries).map(|lid| (lid as u8) ^ (s as u8)));
        tables.push(black_box(t));
    }
    let elapsed = start.elapsed();
    black_box(&tables);
    elapsed
}

fn bench_fabric(sm: &Smcore, f: &Fabric, args: &Args, work: &Path) -> Result_ {
    let mut r = Result_ { name: f.name.into(), what: f.what.into(), gen: f.gen.join(" "), ..Default::default() };
    if let Err(e) = bench_fabric_inner(sm, f, args, work, &mut r) {
        eprintln!("[{}] stopped: {e}", f.name);
        r.error = Some(e);
    }
    r
}

fn bench_fabric_inner(sm: &Smcore, f: &Fabric, args: &Args, work: &Path, r: &mut Result_) -> Result<(), String> {
    let net = work.join(format!("{}.net", f.name));
    sm.gen(f.gen, &net).map_err(|e| e.to_string())?;
    let topo = sm_topology::parse_file(&net).map_err(|e| e.to_string())?;
    r.switches = topo.num_switches();
    r.end_ports = topo.end_nodes().map(|i| topo.nodes[i].num_ports as usize).sum();
    r.ibsim_args = smcore_tests::ibsim::limit_args(&topo).join(" ");
    drop(topo);

    eprintln!("[{}] {} switches, {} end ports; starting ibsim {}", f.name, r.switches, r.end_ports, r.ibsim_args);
    let t = Instant::now();
    let sim = Ibsim::start_with(&net, &IbsimOptions { ready_timeout: Duration::from_secs(1800), ..Default::default() })
        .map_err(|e| e.to_string())?;
    r.ibsim_ready_s = t.elapsed().as_secs_f64();

    let report = work.join(format!("{}.report.json", f.name));
    for i in 0..args.runs {
        // A: smcore.
        let run = sm.route(&net, &RouteOptions::new("minhop", &report)).map_err(|e| e.to_string())?;
        if !run.status.success() {
            return Err(format!("smcore route failed ({}): {}", run.status, run.output));
        }
        let rep = run.report.ok_or("smcore wrote no report")?;
        r.max_lid = rep.max_lid;
        r.sm_max_routes = rep.max_routes_per_link;
        r.sm_route_ms.push(rep.phase_ms("route"));
        r.sm_rss_mib.push(rep.peak_rss_mib);
        r.sm_phases.push(rep.phases_ms.clone());

        // B: OpenSM.
        let mut opts = OpenSmOptions::new("minhop");
        opts.log = LogMode::Timing;
        opts.timeout = args.opensm_timeout;
        let osm = opensm::run(&sim, &opts).map_err(|e| e.to_string())?;
        let ms = osm.route_time().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        r.osm_route_ms.push(ms);
        r.osm_wall_s.push(osm.wall.as_secs_f64());
        let mut note = format!("run {}: {:?}, routed by {:?}", i + 1, osm.outcome, osm.routed_by());
        if !osm.log.errors.is_empty() {
            note.push_str(&format!(", {} error lines, first: {}", osm.log.errors.len(), osm.log.errors[0].trim()));
        }
        if !osm.success() || !osm.asked_engine_routed() {
            r.osm_notes.push(note.clone());
        }
        eprintln!(
            "[{}] run {}: smcore route {:.1} ms (total {:.1} ms, {:.0} MiB) | OpenSM route {:.1} ms, whole run {:.1} s ({})",
            f.name,
            i + 1,
            rep.phase_ms("route"),
            rep.phase_ms("total"),
            rep.peak_rss_mib,
            ms,
            osm.wall.as_secs_f64(),
            note
        );
    }
    drop(sim);

    let entries = r.max_lid as usize + 1;
    for _ in 0..5 {
        r.floor_ms.push(lft_write_floor(r.switches, entries).as_secs_f64() * 1e3);
    }
    Ok(())
}

fn sh(cmd: &str) -> String {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn fmt_ms(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) if x >= 1.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.3}"),
        None => "-".into(),
    }
}

fn list(v: &[f64]) -> String {
    v.iter().map(|x| fmt_ms(Some(*x))).collect::<Vec<_>>().join(", ")
}

fn write_results(args: &Args, results: &[Result_], header: &str) -> std::io::Result<()> {
    let mut md = String::new();
    md.push_str(header);
    md.push_str(
        "\n## Route time\n\n\
         Medians over the runs. smcore: the `route` phase of its report (the engine's LFT \
         computation, release build). OpenSM: the log window from `building routing with 'minhop'` \
         to `minhop tables configured on all switches` at `-D 0x07` (hop matrices, LFTs and queueing \
         the LFT blocks; time stamps in µs). Floor: allocating switches × (max LID + 1) bytes and \
         writing each once, on one core (the first of its runs also pays first-touch page faults; \
         the median is the warm figure). smcore's port balancing may use both cores (rayon). \
         Goals: smcore ≤ 0.1 × OpenSM and ≤ 30 × floor.\n\n\
         | fabric | switches | end ports | max LID | smcore route ms | OpenSM route ms | smcore / OpenSM | floor ms | smcore / floor | ≤0.1× OpenSM | ≤30× floor |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|:-:|\n",
    );
    for r in results {
        let (sm, osm, floor) = (median(&r.sm_route_ms), median(&r.osm_route_ms), median(&r.floor_ms));
        let ratio = sm.zip(osm).map(|(a, b)| a / b);
        let vs_floor = sm.zip(floor).map(|(a, b)| a / b);
        let yes = |ok: Option<bool>| match ok {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "-",
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.switches,
            r.end_ports,
            r.max_lid,
            fmt_ms(sm),
            fmt_ms(osm),
            ratio.map_or("-".into(), |x| format!("{x:.3}")),
            fmt_ms(floor),
            vs_floor.map_or("-".into(), |x| format!("{x:.1}")),
            yes(ratio.map(|x| x <= 0.1)),
            yes(vs_floor.map(|x| x <= 30.0)),
        ));
    }

    md.push_str(
        "\n## smcore phases (medians, ms) and memory\n\n\
         `total` is the whole `smcore route` run without dumps: parse the topology file, assign \
         LIDs, route, verify (reachability and credit loops), report.\n\n\
         | fabric | parse | lids | route | verify | total | peak RSS MiB | max routes/link |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let phase = |name: &str| median(&r.sm_phases.iter().filter_map(|p| p.get(name).copied()).collect::<Vec<_>>());
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            fmt_ms(phase("parse")),
            fmt_ms(phase("lids")),
            fmt_ms(phase("route")),
            fmt_ms(phase("verify")),
            fmt_ms(phase("total")),
            median(&r.sm_rss_mib).map_or("-".into(), |x| format!("{x:.0}")),
            r.sm_max_routes,
        ));
    }

    md.push_str(
        "\n## Every run\n\n\
         | fabric | smcore route ms | OpenSM route ms | OpenSM whole run under ibsim, s | floor ms | ibsim ready s | ibsim limits |\n\
         |---|---|---|---|---|---:|---|\n",
    );
    for r in results {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1} | `{}` |\n",
            r.name,
            list(&r.sm_route_ms),
            list(&r.osm_route_ms),
            r.osm_wall_s.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(", "),
            list(&r.floor_ms),
            r.ibsim_ready_s,
            r.ibsim_args,
        ));
    }
    let problems: Vec<String> = results
        .iter()
        .flat_map(|r| {
            r.error
                .iter()
                .map(move |e| format!("- {}: stopped: {e}", r.name))
                .chain(r.osm_notes.iter().map(move |n| format!("- {}: OpenSM {n}", r.name)))
        })
        .collect();
    if !problems.is_empty() {
        md.push_str("\n## Problems during the runs\n\n");
        md.push_str(&problems.join("\n"));
        md.push('\n');
    }

    md.push_str("\n## Fabrics and commands\n\n");
    for r in results {
        md.push_str(&format!("- {}: {} — `smcore gen {} -o {}.net`\n", r.name, r.what, r.gen, r.name));
    }
    md.push_str(&format!(
        "\nPer run: `target/release/smcore route NET --engines minhop --report R.json`, then \
         `IBSIM_SOCKNAME=… LD_PRELOAD={} OSM_TMP_DIR=T OSM_CACHE_DIR=T opensm -o -R minhop -f T/opensm.log -D 0x07` \
         against `ibsim -s [limits] NET` (one ibsim per fabric, started once; each OpenSM run in a fresh \
         temporary directory). Runs: {} per side, alternating.\n",
        smcore_tests::ibsim::UMAD2SIM_LIB,
        args.runs
    ));
    smcore_tests::bench::write_results(&args.out, &md)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_minhop: {e}");
            std::process::exit(2);
        }
    };
    let sm = match Smcore::locate(Profile::Release) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench_minhop: {e}");
            std::process::exit(2);
        }
    };
    let work = match tempfile::Builder::new().prefix("bench-minhop-").tempdir() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("bench_minhop: temporary directory: {e}");
            std::process::exit(2);
        }
    };

    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let load_before = sh("cut -d' ' -f1-3 /proc/loadavg");
    let started = sh("date -u '+%Y-%m-%d %H:%M UTC'");
    let header_for = |load_after: &str| {
        format!(
            "# minhop route time: smcore vs OpenSM\n\n\
             Written by `bench/minhop.sh` (`tests/src/bin/bench_minhop.rs`), started {started}.\n\n\
             - Machine: {} CPUs (nproc), CPU model \"{cpu}\", {} memory, kernel {}\n\
             - Load average (1/5/15 min) at start: {load_before}; at end: {load_after} — other jobs shared the machine\n\
             - smcore: {} (release build, commit {})\n\
             - OpenSM: {}; ibsim: {}\n",
            sh("nproc"),
            sh("free -h | awk '/^Mem:/{print $2}'"),
            sh("uname -r"),
            sm.bin().display(),
            sh(&format!("git -C {} describe --always --dirty", workspace_root().display())),
            sh("dpkg-query -W -f='opensm ${Version}' opensm"),
            sh("dpkg-query -W -f='ibsim-utils ${Version}' ibsim-utils"),
        )
    };

    let mut results = Vec::new();
    for f in FABRICS {
        if let Some(only) = &args.only {
            if !only.iter().any(|o| o == f.name) {
                continue;
            }
        }
        results.push(bench_fabric(&sm, f, &args, work.path()));
        // Partial results survive an interrupted run.
        if let Err(e) = write_results(&args, &results, &header_for("(still running)")) {
            eprintln!("bench_minhop: writing {}: {e}", args.out.display());
        }
    }
    let load_after = sh("cut -d' ' -f1-3 /proc/loadavg");
    if let Err(e) = write_results(&args, &results, &header_for(&load_after)) {
        eprintln!("bench_minhop: writing {}: {e}", args.out.display());
        std::process::exit(1);
    }
    eprintln!("wrote {}", args.out.display());
}
