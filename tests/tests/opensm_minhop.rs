//! Differential test: smcore's minhop against OpenSM's `-R minhop` on the
//! same fabrics, judged from both SMs' dump files alone.
//!
//! For each fabric: `smcore route --engines minhop` offline, and OpenSM
//! 3.3.23 under a private ibsim. Both must reach every CA pair; smcore's
//! paths must be minimal; smcore's busiest inter-switch link must carry no
//! more CA-to-CA routes than OpenSM's. `ibdmchk` cross-checks connectivity
//! of both dumps.
//!
//! Needs `cargo build --workspace` first (the `smcore` binary and the
//! minhop engine), and the Debian packages opensm, ibsim-utils, ibutils.
//! `-- --nocapture` prints the figures.

use std::path::Path;
use std::time::Duration;

use smcore_tests::ibdmchk;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{quality_of_dump_dir, Quality};
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::smcore::{Profile, RouteOptions, Smcore};

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

fn line(who: &str, q: &Quality) -> String {
    format!(
        "{who:<7} reachable {}/{}  hops avg {:.3} extra {:.3} (max {})  routes/link max {} mean {:.1}",
        q.reachable_pairs,
        q.pairs,
        q.avg_hops,
        q.avg_extra_hops,
        q.max_extra_hops,
        q.max_routes_per_link,
        q.mean_routes_per_link
    )
}

/// Route `gen_args`'s fabric with both SMs and compare.
fn differential(name: &str, gen_args: &[&str]) {
    let sm = smcore();
    let tmp = tempfile::Builder::new().prefix(&format!("diff-{name}-")).tempdir().expect("temp dir");
    let net = tmp.path().join(format!("{name}.net"));
    sm.gen(gen_args, &net).unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));

    // smcore, offline.
    let sm_dir = tmp.path().join("smcore");
    let run = sm
        .route(&net, &RouteOptions::new("minhop", tmp.path().join("report.json")).dump_dir(&sm_dir))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(run.status.success(), "{name}: smcore route failed ({}):\n{}", run.status, run.output);
    let sq = quality_of_dump_dir(&topo, &sm_dir).unwrap_or_else(|e| panic!("{name}: smcore dumps: {e}"));

    // OpenSM under ibsim.
    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut opts = OpenSmOptions::new("minhop");
    opts.timeout = Duration::from_secs(120);
    let osm = opensm::run(&sim, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        osm.success(),
        "{name}: opensm did not finish cleanly ({:?}); log {}:\n{}",
        osm.outcome,
        osm.log_file.display(),
        osm.output
    );
    assert!(osm.asked_engine_routed(), "{name}: OpenSM routed with {:?}, not minhop", osm.routed_by());
    let oq = quality_of_dump_dir(&topo, osm.dump_dir()).unwrap_or_else(|e| panic!("{name}: OpenSM dumps: {e}"));
    drop(sim);

    let sm_chk = check(&sm_dir);
    let osm_chk = check(osm.dump_dir());
    println!(
        "{name}: {} switches, {} end ports\n  {}\n  {}\n  ibdmchk smcore: {}\n  ibdmchk OpenSM: {}\n  OpenSM route window {:?}, smcore route {:.2} ms (debug build)",
        topo.num_switches(),
        sq.end_ports,
        line("smcore", &sq),
        line("OpenSM", &oq),
        sm_chk.summary(),
        osm_chk.summary(),
        osm.route_time(),
        run.report.as_ref().map_or(f64::NAN, |r| r.phase_ms("route")),
    );

    assert!(
        sq.pairs > 0 && sq.pairs == oq.pairs,
        "{name}: pair counts differ: smcore {} OpenSM {}",
        sq.pairs,
        oq.pairs
    );
    assert!(sq.all_reachable(), "{name}: smcore leaves pairs unreachable: {:?}", sq.unreachable_examples);
    assert!(oq.all_reachable(), "{name}: OpenSM leaves pairs unreachable: {:?}", oq.unreachable_examples);
    assert_eq!(sq.non_minimal_pairs, 0, "{name}: smcore routes {} pairs over longer paths", sq.non_minimal_pairs);
    assert!(sm_chk.connected(), "{name}: ibdmchk on smcore's dumps: {}\n{}", sm_chk.summary(), sm_chk.output);
    assert!(osm_chk.connected(), "{name}: ibdmchk on OpenSM's dumps: {}", osm_chk.summary());
    assert!(
        sq.max_routes_per_link <= oq.max_routes_per_link,
        "{name}: smcore's busiest inter-switch link carries {} routes, OpenSM's {}",
        sq.max_routes_per_link,
        oq.max_routes_per_link
    );
}

fn check(dir: &Path) -> ibdmchk::Verdict {
    ibdmchk::check_dump_dir(dir, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn fat_tree_2level() {
    // 96 hosts, full bisection, two parallel cables from each leaf to each spine.
    differential(
        "fat-tree",
        &["fat-tree", "--leaves", "8", "--spines", "6", "--hosts-per-leaf", "12", "--uplinks", "12"],
    );
}

#[test]
fn kary_ntree_4_3() {
    // 64 hosts, 48 switches in three levels.
    differential("kary-ntree", &["kary-ntree", "--k", "4", "--n", "3"]);
}

#[test]
fn torus_2d() {
    differential("torus-2d", &["torus", "--dims", "8x6", "--hosts", "2"]);
}

#[test]
fn torus_3d() {
    differential("torus-3d", &["torus", "--dims", "4x4x3", "--hosts", "2"]);
}

#[test]
fn random_irregular_seed_1() {
    differential(
        "random-1",
        &["random", "--switches", "24", "--ports", "12", "--hosts", "4", "--extra-links", "12", "--seed", "1"],
    );
}

#[test]
fn random_irregular_seed_7() {
    differential(
        "random-7",
        &["random", "--switches", "24", "--ports", "12", "--hosts", "4", "--extra-links", "12", "--seed", "7"],
    );
}
