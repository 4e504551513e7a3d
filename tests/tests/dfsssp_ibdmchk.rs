//! dfsssp judged from the outside.
//!
//! * `smcore route --engines dfsssp,no_fallback --dump-dir D` on a 3D torus
//!   and on a random irregular fabric (both have credit loops under
//!   shortest-path routing on one VL), then `ibdmchk` on D with the path-SL
//!   file (`-c`) and the SL2VL file (`-d`) the core writes: every CA pair
//!   connected, no credit loop, no complaint. The same dumps without `-c`
//!   and `-d` (every path on VL 0) must show a credit loop, so the layers
//!   are what makes the routing deadlock free.
//! * Differential against OpenSM 3.3.23's `-R dfsssp` under ibsim on small
//!   fabrics: the same verdict (both route, or both refuse), and where both
//!   route, every CA pair reachable in both dumps.
//! * The 6x6x6 torus with 2 hosts per switch: OpenSM's dfsssp stops with
//!   "Not enough VLs available (avail=8, needed=9)"; smcore's routes it,
//!   and ibdmchk finds no credit loop within 8 VLs.
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-dfsssp` first, and the Debian packages opensm, ibsim-utils,
//! ibutils. `-- --nocapture` prints the figures.

use std::time::Duration;

use smcore_tests::ibdmchk::{self, SlFiles};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::quality_of_dump_dir;
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::smcore::{Profile, RouteOptions, Smcore};

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

/// Route `gen_args`'s fabric with dfsssp and judge the dumps with ibdmchk.
fn route_and_check(name: &str, gen_args: &[&str]) {
    let f = smcore()
        .gen_temp("dfsssp", name, gen_args)
        .unwrap_or_else(|e| panic!("{e}"));
    let (dir, run) = f
        .route_by("dfsssp,no_fallback", "dumps", &[], Duration::from_secs(600))
        .unwrap_or_else(|e| panic!("{e}"));
    let report = run
        .report
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no report:\n{}", run.output));
    assert!(
        report.credit_loops.checked() == Some(false),
        "{name}: smcore's own verifier found a credit loop or did not check: {:?}",
        report.credit_loops
    );

    let check = |sls| {
        ibdmchk::check_dump_dir_with(&dir, sls, Duration::from_secs(300))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (with_sls, plain) = (check(SlFiles::Required), check(SlFiles::Without));
    println!(
        "{name}: {} switches, {} end ports, {} pairs; route {:.1} ms (debug build)\n  ibdmchk -c -d: {}\n  ibdmchk (VL 0 only): {}",
        report.switches,
        report.end_ports,
        report.pairs,
        report.phase_ms("route"),
        with_sls.summary(),
        plain.summary()
    );
    assert!(
        with_sls.is_clean(),
        "{name}: ibdmchk with path SLs: {}\n{}",
        with_sls.summary(),
        with_sls.output
    );
    assert!(
        with_sls.output.contains("VLs used") && !with_sls.output.contains(" 1 VLs used"),
        "{name}: ibdmchk did not analyse several VLs:\n{}",
        with_sls.output
    );
    assert!(plain.connected(), "{name}: {}", plain.summary());
    assert_eq!(
        plain.credit_loops,
        Some(true),
        "{name}: the same routes on one VL should loop: {}",
        plain.summary()
    );
}

#[test]
fn torus_4x4x3_is_credit_loop_free_per_ibdmchk() {
    route_and_check("torus", &["torus", "--dims", "4x4x3", "--hosts", "2"]);
}

#[test]
fn random_fabric_is_credit_loop_free_per_ibdmchk() {
    route_and_check(
        "random",
        &[
            "random",
            "--switches",
            "24",
            "--ports",
            "12",
            "--hosts",
            "4",
            "--extra-links",
            "12",
            "--seed",
            "1",
        ],
    );
}

/// Same verdict as OpenSM's dfsssp on the same fabric.
fn differential(name: &str, gen_args: &[&str]) {
    let f = smcore()
        .gen_temp("dfsssp-diff", name, gen_args)
        .unwrap_or_else(|e| panic!("{e}"));
    let net = &f.net;
    let topo = sm_topology::parse_file(net).unwrap_or_else(|e| panic!("{e}"));

    let (dir, run) = f
        .route(
            "dfsssp,no_fallback",
            "smcore",
            &[],
            Duration::from_secs(600),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let ours = run.routed_by("dfsssp");

    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut opts = OpenSmOptions::new("dfsssp");
    opts.timeout = Duration::from_secs(120);
    let osm = opensm::run(&sim, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    drop(sim);
    let theirs = osm.asked_engine_routed();
    println!(
        "{name}: smcore dfsssp {}, OpenSM dfsssp {} (routed by {:?}, outcome {:?})",
        if ours { "routed" } else { "refused" },
        if theirs { "routed" } else { "refused" },
        osm.routed_by(),
        osm.outcome
    );
    assert_eq!(
        ours,
        theirs,
        "{name}: verdicts differ; smcore:\n{}\nOpenSM log {}",
        run.output,
        osm.log_file.display()
    );
    if ours {
        let sq = quality_of_dump_dir(&topo, &dir)
            .unwrap_or_else(|e| panic!("{name}: smcore dumps: {e}"));
        let oq = quality_of_dump_dir(&topo, osm.dump_dir())
            .unwrap_or_else(|e| panic!("{name}: OpenSM dumps: {e}"));
        println!(
            "  smcore: reachable {}/{}, routes/link max {} mean {:.1}, extra hops {:.3}\n  OpenSM: reachable {}/{}, routes/link max {} mean {:.1}, extra hops {:.3}",
            sq.reachable_pairs,
            sq.pairs,
            sq.max_routes_per_link,
            sq.mean_routes_per_link,
            sq.avg_extra_hops,
            oq.reachable_pairs,
            oq.pairs,
            oq.max_routes_per_link,
            oq.mean_routes_per_link,
            oq.avg_extra_hops
        );
        assert!(
            sq.all_reachable(),
            "{name}: smcore leaves pairs unreachable: {:?}",
            sq.unreachable_examples
        );
        assert!(
            oq.all_reachable(),
            "{name}: OpenSM leaves pairs unreachable: {:?}",
            oq.unreachable_examples
        );
    }
}

#[test]
fn same_verdict_as_opensm_on_a_kary_ntree() {
    differential("kary-ntree", &["kary-ntree", "--k", "4", "--n", "2"]);
}

#[test]
fn same_verdict_as_opensm_on_a_2d_torus() {
    differential("torus-2d", &["torus", "--dims", "4x4", "--hosts", "1"]);
}

#[test]
fn same_verdict_as_opensm_on_a_3d_torus() {
    differential("torus-3d", &["torus", "--dims", "4x4x3", "--hosts", "2"]);
}

/// The fabric OpenSM 3.3.23's dfsssp gives up on ("Not enough VLs
/// available (avail=8, needed=9)"): smcore's dfsssp routes it, and
/// ibdmchk confirms no credit loop within 8 VLs.
#[test]
fn torus_6x6x6_routes_within_8_vls_where_opensm_gives_up() {
    route_and_check("torus-6x6x6", &["torus", "--dims", "6x6x6", "--hosts", "2"]);
    let sm = smcore();
    let tmp = tempfile::Builder::new()
        .prefix("dfsssp-6x6x6-opensm-")
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join("t.net");
    sm.gen(&["torus", "--dims", "6x6x6", "--hosts", "2"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let mut opts = OpenSmOptions::new("dfsssp");
    opts.timeout = Duration::from_secs(300);
    let osm = opensm::run(&sim, &opts).unwrap_or_else(|e| panic!("{e}"));
    drop(sim);
    let log = std::fs::read_to_string(&osm.log_file).unwrap_or_default();
    let why: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Not enough VLs"))
        .collect();
    println!("OpenSM dfsssp: routed by {:?}; {:?}", osm.routed_by(), why);
    assert!(
        !osm.asked_engine_routed(),
        "OpenSM's dfsssp routed the 6x6x6 torus after all"
    );
    assert!(
        !why.is_empty(),
        "OpenSM failed for another reason; log {}",
        osm.log_file.display()
    );
}

/// Route time against OpenSM on the same machine, the same 16-ary 3-tree
/// (4,096 CAs, 768 switches), alternating the SMs (A B A B). smcore:
/// release `smcore route`, its `route` phase (the engine call); OpenSM:
/// its log's route window at `-D 0x07` (`building routing with` to
/// `tables configured`, which also covers queueing the LFT blocks).
/// Needs `cargo build --release -p sm-core -p smcore-engine-minhop -p
/// smcore-engine-dfsssp`. Run with `-- --ignored --nocapture`.
#[test]
#[ignore = "benchmark: minutes, release build"]
fn bench_route_time_vs_opensm_on_16_ary_3_tree() {
    let sm = Smcore::locate(Profile::Release).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new()
        .prefix("dfsssp-bench-")
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join("tree.net");
    sm.gen(&["kary-ntree", "--k", "16", "--n", "3"], &net)
        .unwrap_or_else(|e| panic!("{e}"));
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    for engine in ["sssp", "dfsssp"] {
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..runs {
            let run = sm
                .route(
                    &net,
                    &RouteOptions::new(
                        format!("{engine},no_fallback"),
                        tmp.path().join("report.json"),
                    ),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            let report = run
                .report
                .unwrap_or_else(|| panic!("no report:\n{}", run.output));
            assert_eq!(report.engine.as_deref(), Some(engine), "{}", run.output);
            ours.push(report.phase_ms("route") / 1000.0);

            let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
            let mut opts = OpenSmOptions::new(engine);
            opts.log = opensm::LogMode::Timing;
            opts.timeout = Duration::from_secs(600);
            let osm = opensm::run(&sim, &opts).unwrap_or_else(|e| panic!("{e}"));
            drop(sim);
            assert!(
                osm.asked_engine_routed(),
                "OpenSM {engine} did not route: {:?}",
                osm.routed_by()
            );
            theirs.push(osm.route_time().map_or(f64::NAN, |d| d.as_secs_f64()));
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        let (a, b) = (median(&mut ours), median(&mut theirs));
        println!("{engine}: smcore {ours:.3?} s (median {a:.3}), OpenSM {theirs:.3?} s (median {b:.3}), ratio {:.3}", a / b);
    }
}
