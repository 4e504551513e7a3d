//! lash through the `smcore` binary, judged by `ibdmchk` with smcore's
//! path-SL (`-c`) and SL2VL (`-d`) dumps, and against OpenSM 3.3.23's
//! `-R lash -Q` on the same fabric.
//!
//! * `smcore route --engines lash,no_fallback --dump-dir D` (with and
//!   without `--do-mesh-analysis`, and with `--lash-start-vl`) on a
//!   generated 3D torus and a random irregular fabric routes, and
//!   `ibdmchk` finds D connected and free of credit loops under lash's SLs;
//!   without the SL files the same tables do have credit loops on the
//!   torus (so the SLs are what the verdict rests on).
//! * OpenSM's `-R lash -Q` (with and without `--do_mesh_analysis`, and
//!   once without `-Q`) under ibsim on a 5x5x3 torus: the same verdict
//!   (both route), every CA pair OpenSM connects smcore connects too, and
//!   smcore needs no more VLs than OpenSM's lash layers.
//! * Ignored (slow): the 6x6x6 torus with two hosts per switch, where
//!   OpenSM's plain `-R lash -Q` needs 9 VLs and falls back; smcore's lash
//!   must route it within 8.
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-lash` first, and the Debian packages opensm, ibsim-utils,
//! ibutils. `-- --nocapture` prints the figures.

use std::path::Path;
use std::time::Duration;

use smcore_tests::ibdmchk::{self, SlFiles};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts;
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::smcore::{gen_args, GenFabric, Profile, Smcore};

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

fn generated(name: &str, args: &[&str]) -> GenFabric {
    smcore()
        .gen_temp("lash", name, args)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// lash routes (no fallback) with `extra` flags, ibdmchk with lash's SLs
/// finds the dumps connected and loop free; returns (VLs used, credit loops
/// without SLs).
fn check(f: &GenFabric, tag: &str, extra: &[&str]) -> (u64, Option<bool>) {
    let (dir, run) = f
        .route_by("lash,no_fallback", tag, extra, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    let vls = u64::from(run.vls_used());
    let v = ibdmchk::require_loop_free(&dir, SlFiles::Required, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{}/{tag}: {e}", f.name));
    println!(
        "{}/{tag}: {vls} VLs; ibdmchk with SLs: {}",
        f.name,
        v.summary()
    );
    let plain = ibdmchk::check_dump_dir_with(&dir, SlFiles::Without, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{}/{tag}: ibdmchk without SLs: {}", f.name, plain.summary());
    (vls, plain.credit_loops)
}

#[test]
fn torus_is_credit_loop_free_under_lash_sls() {
    let f = generated("torus-5x5x3", &["torus", "--dims", "5x5x3", "--hosts", "2"]);
    let (vls, plain) = check(&f, "plain", &[]);
    assert!(vls >= 2, "a 5-ring needs more than one layer");
    assert_eq!(
        plain,
        Some(true),
        "the same tables on one SL have credit loops"
    );
    let (mvls, _) = check(&f, "mesh", &["--do-mesh-analysis"]);
    assert!(mvls <= 8);
    let (svls, _) = check(
        &f,
        "start2",
        &["--lash-start-vl", "2", "--do-mesh-analysis"],
    );
    assert_eq!(svls, mvls + 2, "lash_start_vl moves every layer up");
}

#[test]
fn random_fabric_is_credit_loop_free_under_lash_sls() {
    let f = generated("random-24", gen_args::RANDOM_24);
    check(&f, "plain", &[]);
    check(&f, "mesh", &["--do-mesh-analysis"]);
}

/// Layers OpenSM's lash reports (`lash_core: Lanes in layer N: ...`).
fn opensm_layers(log: &str) -> Option<usize> {
    log.lines()
        .filter_map(|l| l.split("Lanes in layer ").nth(1))
        .filter_map(|rest| rest.split(':').next()?.trim().parse::<usize>().ok())
        .max()
        .map(|n| n + 1)
}

/// Run OpenSM's lash (`-Q` when `qos`) and smcore's on `f`; returns
/// (smcore routed, smcore VLs, OpenSM routed, OpenSM layers).
fn both(
    f: &GenFabric,
    sim: &Ibsim,
    tag: &str,
    mesh: bool,
    qos: bool,
) -> (bool, u64, bool, Option<usize>) {
    let flags: &[&str] = if mesh { &["--do-mesh-analysis"] } else { &[] };
    let (dir, run) = f
        .route("lash,no_fallback", tag, flags, Duration::from_secs(300))
        .unwrap_or_else(|e| panic!("{}: {e}", f.name));
    assert!(
        run.routed_by("lash") || run.refused(),
        "{}/{tag}: smcore failed oddly:\n{}",
        f.name,
        run.output
    );
    let vls = u64::from(run.vls_used());
    let mut o = OpenSmOptions::new("lash");
    o.timeout = Duration::from_secs(240);
    if qos {
        o.extra_args.push("-Q".into());
    }
    if mesh {
        o.extra_args.push("--do_mesh_analysis".into());
    }
    let osm = opensm::run(sim, &o).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        osm.success(),
        "opensm did not finish ({:?}); log {}:\n{}",
        osm.outcome,
        osm.log_file.display(),
        osm.output
    );
    let log = std::fs::read_to_string(&osm.log_file).unwrap_or_default();
    let layers = opensm_layers(&log);
    println!(
        "{}/{tag}: smcore lash {} ({} VLs, engine {:.1} ms); OpenSM{} routed by {:?} (route window {:?}), \
         lash layers {:?}, errors {:?}",
        f.name,
        if run.routed_by("lash") {
            "routed"
        } else {
            "refused"
        },
        vls,
        run.engine_route_ms("lash").unwrap_or(f64::NAN),
        if qos { " -Q" } else { "" },
        osm.routed_by(),
        osm.route_time(),
        layers,
        osm.log
            .errors
            .iter()
            .filter(|e| e.contains("lash") || e.contains("VL"))
            .take(2)
            .collect::<Vec<_>>()
    );
    if run.routed_by("lash") && osm.asked_engine_routed() {
        let topo = sm_topology::parse_file(&f.net).unwrap_or_else(|e| panic!("{e}"));
        let judge = |d: &Path| {
            let t =
                lfts::parse_lfts_file(d.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
            let l = lfts::lid_map_for_dump_dir(d).unwrap_or_else(|e| panic!("{e}"));
            lfts::reachable_pairs(&topo, &t, &l).unwrap_or_else(|e| panic!("{e}"))
        };
        let (ours, theirs) = (judge(&dir), judge(osm.dump_dir()));
        assert!(!ours.is_empty());
        assert!(
            theirs.is_subset(&ours),
            "{}/{tag}: pairs OpenSM connects that smcore does not",
            f.name
        );
        ibdmchk::require_loop_free(&dir, SlFiles::Required, Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{}/{tag}: {e}", f.name));
    }
    (
        run.routed_by("lash"),
        vls,
        osm.asked_engine_routed(),
        layers,
    )
}

/// OpenSM's lash on the same small torus: same verdict, no pair it
/// connects left out by smcore, and smcore needs no more layers.
#[test]
fn same_verdict_as_opensm_lash() {
    let f = generated("torus-5x5x3", &["torus", "--dims", "5x5x3", "--hosts", "1"]);
    let sim = Ibsim::start(&f.net).unwrap_or_else(|e| panic!("{e}"));
    for mesh in [false, true] {
        let tag = if mesh { "mesh" } else { "plain" };
        let (ours, vls, theirs, layers) = both(&f, &sim, tag, mesh, true);
        assert_eq!(ours, theirs, "{tag}: verdicts differ");
        assert!(ours, "{tag}: a 5x5x3 torus fits in 8 VLs");
        let layers = layers.expect("OpenSM's log names its lash layers");
        assert!(layers >= 2, "OpenSM needs several layers on a torus");
        assert!(
            vls as usize <= layers,
            "{tag}: smcore {vls} VLs, OpenSM {layers} layers"
        );
    }
    // Without -Q OpenSM's lash still computes its layers and says it
    // routed, but (per OpenSM's documentation) the SL2VL maps that make
    // them separate VLs are only programmed with QoS on; the verdict is
    // still the same.
    let (ours, _, theirs, _) = both(&f, &sim, "no-qos", false, false);
    assert_eq!(ours, theirs, "no-qos: verdicts differ");
}

/// The acceptance case: a 6x6x6 torus with two hosts per switch, where
/// OpenSM 3.3.23's lash is reported to need 9 VLs; smcore's must route it
/// within 8, with and without mesh analysis. OpenSM's outcome is printed,
/// not asserted. Slow (OpenSM discovers 648 nodes under ibsim): run with
/// `--ignored`.
#[test]
#[ignore = "slow: OpenSM discovers 648 nodes under ibsim"]
fn six_ary_3_cube() {
    let f = generated("torus-6x6x6", &["torus", "--dims", "6x6x6", "--hosts", "2"]);
    let sim = Ibsim::start(&f.net).unwrap_or_else(|e| panic!("{e}"));
    for mesh in [false, true] {
        let tag = if mesh { "mesh" } else { "plain" };
        let (ours, vls, theirs, layers) = both(&f, &sim, tag, mesh, true);
        assert!(
            ours && vls <= 8,
            "smcore {tag}: routed {ours} with {vls} VLs"
        );
        println!("{tag}: OpenSM lash routed: {theirs}, layers {layers:?}");
    }
}
