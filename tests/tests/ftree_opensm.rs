//! Differential test: smcore's ftree against OpenSM 3.3.23's `-R ftree` on
//! the same fabrics, judged from both SMs' dumps.
//!
//! Per fabric: the verdict is the same (smcore `--engines ftree,no_fallback`
//! routes exactly when OpenSM's log says `ftree tables configured` rather
//! than its minhop fallback); when both route, both connect every CA pair,
//! smcore's busiest inter-switch link carries no more CA-to-CA routes than
//! OpenSM's, `ibdmchk` finds smcore's dumps connected and free of credit
//! loops, and both SMs write the same compute node order
//! (`opensm-ftree-ca-order.dump`, compared by node description).
//!
//! Fabrics: 4-ary 2- and 3-trees, a 2:1 oversubscribed two-level tree, a
//! 4-ary 3-tree with three hosts missing (dummies in the CA order), the
//! same tree with three cables cut (OpenSM's ftree refuses it as impure
//! and falls back to minhop; smcore's routes it as a degraded fat tree,
//! and its tables must beat that fallback's busiest link and stay free of
//! credit loops; both route it given the spines as roots), and a torus
//! (both refuse).
//!
//! Needs `cargo build -p sm-core -p smcore-engine-ftree` first, and the
//! Debian packages opensm, ibsim-utils, ibutils. `-- --nocapture` prints
//! the figures.

use std::path::Path;
use std::time::Duration;

use sm_topology::Topology;
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{self, Quality};
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::smcore::{Profile, Smcore};
use smcore_tests::{bench, ibdmchk};

const CA_ORDER: &str = "opensm-ftree-ca-order.dump";

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

fn quality(topo: &Topology, dir: &Path) -> Quality {
    lfts::quality_of_dump_dir(topo, dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

fn line(who: &str, q: &Option<Quality>, why: &str) -> String {
    match q {
        Some(q) => format!(
            "{who:<7} routed; reachable {}/{}  hops avg {:.3} extra {:.3}  routes/link max {} mean {:.1}",
            q.reachable_pairs, q.pairs, q.avg_hops, q.avg_extra_hops, q.max_routes_per_link, q.mean_routes_per_link
        ),
        None => format!("{who:<7} refused: {why}"),
    }
}

/// The descriptions of a CA order file, in order (`DUMMY` for padding).
fn ca_order(dir: &Path) -> Vec<String> {
    let path = dir.join(CA_ORDER);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let (lid, desc) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("{}: no tab in {l:?}", path.display()));
            assert!(
                lid.starts_with("0x") && lid.len() == 6,
                "{}: bad LID field in {l:?}",
                path.display()
            );
            desc.trim().to_string()
        })
        .collect()
}

/// Route `gen_args`'s fabric with both SMs and compare; returns whether
/// they routed.
fn differential(name: &str, gen_args: &[&str]) -> bool {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("ftree-{name}-"))
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join(format!("{name}.net"));
    smcore()
        .gen(gen_args, &net)
        .unwrap_or_else(|e| panic!("{e}"));
    compare(name, &tmp, &net, &[], &[], false)
}

/// [`differential`] on a topology built here, with extra arguments for
/// each SM (`root` adds a root GUID file listing the `spine-*` switches).
fn differential_topo(name: &str, topo: &Topology, root: bool) -> bool {
    differential_topo_as(name, topo, root, false)
}

/// [`differential_topo`]; with `beyond`, a degraded tree smcore's ftree
/// routes while OpenSM's refuses it (and falls back): smcore's tables are
/// held to the fallback's.
fn differential_topo_as(name: &str, topo: &Topology, root: bool, beyond: bool) -> bool {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("ftree-{name}-"))
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join(format!("{name}.net"));
    sm_topology::emit::write_file(topo, &net).unwrap_or_else(|e| panic!("{e}"));
    let (mut sm_args, mut osm_args) = (Vec::new(), Vec::new());
    if root {
        let file = tmp.path().join("roots");
        let text: String = topo
            .nodes
            .iter()
            .filter(|n| n.is_switch() && n.desc.starts_with("spine"))
            .map(|n| format!("0x{:016x}\n", n.node_guid))
            .collect();
        std::fs::write(&file, text).expect("root file");
        sm_args = vec!["--root-guid-file".to_string(), file.display().to_string()];
        osm_args = vec!["-a".to_string(), file.display().to_string()];
    }
    compare(name, &tmp, &net, &sm_args, &osm_args, beyond)
}

fn compare(
    name: &str,
    tmp: &tempfile::TempDir,
    net: &Path,
    sm_args: &[String],
    osm_args: &[String],
    beyond: bool,
) -> bool {
    let sm = smcore();
    let net = net.to_path_buf();
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));

    let sm_dir = tmp.path().join("smcore");
    let run = bench::route(
        &sm,
        &net,
        "ftree,no_fallback",
        &tmp.path().join("report.json"),
        Some(&sm_dir),
        sm_args,
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    let ours = run.routed_by("ftree");
    assert!(
        ours || run.refused(),
        "{name}: smcore route failed oddly ({}):\n{}",
        run.status,
        run.output
    );
    let sq = ours.then(|| quality(&topo, &sm_dir));

    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut opts = OpenSmOptions::new("ftree");
    opts.timeout = Duration::from_secs(60);
    opts.extra_args = osm_args.to_vec();
    let osm = opensm::run(&sim, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        osm.success(),
        "{name}: opensm did not finish cleanly ({:?}); log {}:\n{}",
        osm.outcome,
        osm.log_file.display(),
        osm.output
    );
    let theirs = osm.asked_engine_routed();
    let oq = (theirs || beyond).then(|| quality(&topo, osm.dump_dir()));
    drop(sim);

    println!(
        "{name}: {} switches, {} CAs\n  {}\n  {}",
        topo.num_switches(),
        topo.end_nodes().count(),
        line("smcore", &sq, run.reason("ftree").unwrap_or("")),
        line("OpenSM", &oq, &format!("routed by {:?}", osm.routed_by())),
    );
    if beyond {
        assert!(
            ours && !theirs,
            "{name}: expected smcore's ftree to route the degraded tree OpenSM's refuses: smcore {ours} ({:?}), \
             OpenSM {theirs} (routed by {:?})",
            run.reason("ftree"),
            osm.routed_by()
        );
    } else {
        assert_eq!(
            ours,
            theirs,
            "{name}: verdicts differ: smcore {ours} ({:?}), OpenSM {theirs} (routed by {:?})",
            run.reason("ftree"),
            osm.routed_by()
        );
    }
    if !ours {
        return false;
    }
    let (sq, oq) = (sq.expect("routed"), oq.expect("routed"));
    assert_eq!(sq.pairs, oq.pairs, "{name}: pair counts differ");
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
    assert!(
        sq.max_routes_per_link <= oq.max_routes_per_link,
        "{name}: smcore's busiest inter-switch link carries {} routes, OpenSM's {}",
        sq.max_routes_per_link,
        oq.max_routes_per_link
    );
    let chk = ibdmchk::check_dump_dir(&sm_dir, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    println!("  ibdmchk smcore: {}", chk.summary());
    assert!(
        chk.connected(),
        "{name}: ibdmchk on smcore's dumps: {}\n{}",
        chk.summary(),
        chk.output
    );
    assert_eq!(
        chk.credit_loops,
        Some(false),
        "{name}: ibdmchk on smcore's dumps: {}",
        chk.summary()
    );

    if beyond {
        // OpenSM's fallback writes no CA order to compare with.
        return true;
    }
    let (so, oo) = (ca_order(&sm_dir), ca_order(osm.dump_dir()));
    assert_eq!(so.len(), oo.len(), "{name}: CA order lengths differ");
    assert_eq!(so, oo, "{name}: CA orders differ");
    true
}

#[test]
fn kary_ntree_4_2() {
    assert!(differential(
        "4-ary-2-tree",
        &["kary-ntree", "--k", "4", "--n", "2"]
    ));
}

#[test]
fn kary_ntree_4_3() {
    assert!(differential(
        "4-ary-3-tree",
        &["kary-ntree", "--k", "4", "--n", "3"]
    ));
}

#[test]
fn oversubscribed_2_to_1() {
    assert!(differential(
        "fat-tree-2to1",
        &[
            "fat-tree",
            "--leaves",
            "6",
            "--spines",
            "2",
            "--leaf-ports",
            "12",
            "--oversubscription",
            "2:1"
        ]
    ));
}

#[test]
fn torus_is_refused_by_both() {
    assert!(!differential(
        "torus-4x4",
        &["torus", "--dims", "4x4", "--hosts", "2"]
    ));
}

#[test]
fn missing_hosts_pad_the_ca_order_alike() {
    // Two hosts gone from one leaf and one from another: both SMs route
    // dummies in their place and list them as DUMMY.
    let mut topo = sm_topology::gen::kary_ntree(4, 3, 4).unwrap();
    for host in ["host-5", "host-6", "host-40"] {
        let h = topo.find_node_by_desc(host).unwrap();
        topo.links.retain(|l| !l.touches(h));
        topo.nodes[h].desc = format!("gone-{host}");
    }
    let gone: Vec<usize> = (0..topo.nodes.len())
        .filter(|&i| topo.nodes[i].desc.starts_with("gone-"))
        .collect();
    let mut keep = (0..topo.nodes.len()).map(|i| !gone.contains(&i));
    // Drop the disconnected hosts themselves: ibsim would still list them.
    let mut remap = vec![usize::MAX; topo.nodes.len()];
    let mut next = 0;
    for (i, r) in remap.iter_mut().enumerate() {
        if !gone.contains(&i) {
            *r = next;
            next += 1;
        }
    }
    topo.nodes.retain(|_| keep.next().unwrap_or(true));
    for l in &mut topo.links {
        l.a.0 = remap[l.a.0];
        l.b.0 = remap[l.b.0];
    }
    topo.canonicalize();
    assert!(differential_topo(
        "4-ary-3-tree-minus-3-hosts",
        &topo,
        false
    ));
}

#[test]
fn cut_links_route_beyond_opensm_and_with_roots_on_both() {
    let base = sm_topology::gen::kary_ntree(4, 3, 4).unwrap();
    let (topo, _) = sm_topology::gen::with_faults(&base, 3, 0, 2).unwrap();
    assert!(topo.is_connected());
    assert!(differential_topo_as("4-ary-3-tree-cut", &topo, false, true));
    assert!(differential_topo("4-ary-3-tree-cut-roots", &topo, true));
}
