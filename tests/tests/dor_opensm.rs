//! Differential test: smcore's dor against OpenSM's `-R dor` on small
//! meshes, a hypercube, a fat tree with parallel links (LMC 0 and 2) and a
//! torus, judged from both SMs' dump files.
//!
//! Both must reach every CA pair over shortest paths; `ibdmchk` must give
//! both the same verdict (connected, no credit loop: DOR on consistently
//! cabled meshes and hypercubes is deadlock-free); smcore's busiest
//! inter-switch link must carry no more routes than OpenSM's. On a torus
//! both must agree that there is a credit loop. And the
//! tables must be the same: the two SMs hand out different LIDs, so they
//! are compared per (switch GUID, destination port GUID).
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-dor` first and the Debian packages opensm, ibsim-utils,
//! ibutils. `-- --nocapture` prints the figures.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use smcore_tests::ibdmchk;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{lid_map_for_dump_dir, parse_lfts_file, quality_of_dump_dir, Quality};
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::smcore::{Profile, RouteOptions, Smcore};

fn line(who: &str, q: &Quality) -> String {
    format!(
        "{who:<7} reachable {}/{}  hops avg {:.3} extra {:.3}  routes/link max {} mean {:.1}",
        q.reachable_pairs,
        q.pairs,
        q.avg_hops,
        q.avg_extra_hops,
        q.max_routes_per_link,
        q.mean_routes_per_link
    )
}

/// (switch GUID, destination port GUID, LID offset within the port's LMC
/// block) → output port, from a dump directory.
fn guid_tables(dir: &Path) -> BTreeMap<(u64, u64, u16), u8> {
    let lfts = parse_lfts_file(dir.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let lids = lid_map_for_dump_dir(dir).unwrap_or_else(|e| panic!("{e}"));
    let mut base: BTreeMap<u64, u16> = BTreeMap::new();
    for (&lid, &guid) in &lids.by_lid {
        base.entry(guid).or_insert(lid);
    }
    let mut t = BTreeMap::new();
    for (sw, lft) in &lfts.switches {
        for (&lid, &guid) in &lids.by_lid {
            if let Some(p) = lft.port(lid) {
                t.insert((*sw, guid, lid - base[&guid]), p);
            }
        }
    }
    t
}

fn check(dir: &Path) -> ibdmchk::Verdict {
    ibdmchk::check_dump_dir(dir, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}"))
}

fn differential(name: &str, gen_args: &[&str], lmc: u8, loops: bool) {
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new()
        .prefix(&format!("dor-{name}-"))
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join(format!("{name}.net"));
    sm.gen(gen_args, &net).unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));

    let sm_dir = tmp.path().join("smcore");
    let run = sm
        .route(
            &net,
            &RouteOptions {
                extra_args: vec!["--lmc".into(), lmc.to_string()],
                ..RouteOptions::new("dor,no_fallback", tmp.path().join("report.json"))
                    .dump_dir(&sm_dir)
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        run.status.success(),
        "{name}: smcore route failed ({}):\n{}",
        run.status,
        run.output
    );
    let report = run
        .report
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no report\n{}", run.output));
    assert_eq!(
        report.engine.as_deref(),
        Some("dor"),
        "{name}:\n{}",
        run.output
    );
    assert_eq!(
        report.credit_loops, loops,
        "{name}: smcore's verifier on credit loops"
    );
    let sq =
        quality_of_dump_dir(&topo, &sm_dir).unwrap_or_else(|e| panic!("{name}: smcore dumps: {e}"));

    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{name}: {e}"));
    let osm = opensm::run(
        &sim,
        &OpenSmOptions {
            extra_args: vec!["-l".into(), lmc.to_string()],
            ..OpenSmOptions::new("dor")
        },
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        osm.success(),
        "{name}: opensm did not finish cleanly ({:?}):\n{}",
        osm.outcome,
        osm.output
    );
    assert!(
        osm.asked_engine_routed(),
        "{name}: OpenSM routed with {:?}, not dor",
        osm.routed_by()
    );
    let oq = quality_of_dump_dir(&topo, osm.dump_dir())
        .unwrap_or_else(|e| panic!("{name}: OpenSM dumps: {e}"));
    drop(sim);

    let (sm_chk, osm_chk) = (check(&sm_dir), check(osm.dump_dir()));
    let (ours, theirs) = (guid_tables(&sm_dir), guid_tables(osm.dump_dir()));
    let differing: Vec<_> = theirs
        .iter()
        .filter(|(k, v)| ours.get(k) != Some(v))
        .map(|(k, v)| {
            (
                format!("sw 0x{:x} dst 0x{:x} +{}", k.0, k.1, k.2),
                *v,
                ours.get(k).copied(),
            )
        })
        .take(5)
        .collect();
    println!(
        "{name}: {} switches, {} end ports\n  {}\n  {}\n  ibdmchk smcore: {}\n  ibdmchk OpenSM: {}\n  table entries compared {}, differing {}",
        topo.num_switches(),
        sq.end_ports,
        line("smcore", &sq),
        line("OpenSM", &oq),
        sm_chk.summary(),
        osm_chk.summary(),
        theirs.len(),
        theirs.iter().filter(|(k, v)| ours.get(k) != Some(v)).count()
    );

    assert!(
        sq.pairs > 0 && sq.pairs == oq.pairs,
        "{name}: pair counts differ: {} vs {}",
        sq.pairs,
        oq.pairs
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
    assert_eq!(
        sq.non_minimal_pairs, 0,
        "{name}: smcore routes {} pairs over longer paths",
        sq.non_minimal_pairs
    );
    assert!(
        sm_chk.connected(),
        "{name}: ibdmchk on smcore's dumps: {}\n{}",
        sm_chk.summary(),
        sm_chk.output
    );
    assert!(
        osm_chk.connected(),
        "{name}: ibdmchk on OpenSM's dumps: {}",
        osm_chk.summary()
    );
    assert_eq!(
        sm_chk.credit_loops, osm_chk.credit_loops,
        "{name}: ibdmchk verdicts differ"
    );
    assert_eq!(
        sm_chk.credit_loops,
        Some(loops),
        "{name}: ibdmchk on credit loops:\n{}",
        sm_chk.output
    );
    assert!(
        sq.max_routes_per_link <= oq.max_routes_per_link,
        "{name}: busiest link {} vs OpenSM {}",
        sq.max_routes_per_link,
        oq.max_routes_per_link
    );
    assert_eq!(ours.len(), theirs.len(), "{name}: entry counts differ");
    assert!(
        differing.is_empty(),
        "{name}: tables differ from OpenSM's, e.g. (entry, OpenSM, smcore) {differing:?}"
    );
}

#[test]
fn mesh_4x3() {
    differential(
        "mesh-4x3",
        &["mesh", "--dims", "4x3", "--hosts", "2"],
        0,
        false,
    );
}

#[test]
fn mesh_3x3x2() {
    differential(
        "mesh-3x3x2",
        &["mesh", "--dims", "3x3x2", "--hosts", "1"],
        0,
        false,
    );
}

#[test]
fn hypercube_4() {
    differential(
        "hypercube-4",
        &["hypercube", "--dim", "4", "--hosts", "2"],
        0,
        false,
    );
}

#[test]
fn fat_tree_with_parallel_links() {
    // Two cables from each leaf to each spine: DOR spreads over them.
    differential(
        "fat-tree-parallel",
        &[
            "fat-tree",
            "--leaves",
            "4",
            "--spines",
            "2",
            "--hosts-per-leaf",
            "6",
            "--uplinks",
            "4",
        ],
        0,
        false,
    );
}

#[test]
fn torus_4x4_has_credit_loops_in_both() {
    // DOR is not deadlock-free on tori; both SMs must agree on that.
    differential(
        "torus-4x4",
        &["torus", "--dims", "4x4", "--hosts", "1"],
        0,
        true,
    );
}

#[test]
fn mesh_3x3_with_lmc_1() {
    // LMC: every LID of a port leaves by the DOR port, spread over parallel links.
    differential(
        "mesh-3x3-lmc1",
        &["mesh", "--dims", "3x3", "--hosts", "2"],
        1,
        false,
    );
}

#[test]
fn fat_tree_with_parallel_links_and_lmc_2() {
    differential(
        "fat-tree-parallel-lmc2",
        &[
            "fat-tree",
            "--leaves",
            "4",
            "--spines",
            "2",
            "--hosts-per-leaf",
            "4",
            "--uplinks",
            "4",
        ],
        2,
        false,
    );
}
