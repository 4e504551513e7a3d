//! Differential test: smcore's updn and dnup against OpenSM 3.3.23's
//! `-R updn` / `-R dnup` on the same fabrics, judged from both SMs' dumps.
//!
//! Per fabric and engine:
//!
//! * the verdict is the same: smcore (`--engines <e>,no_fallback`) routes
//!   exactly when OpenSM's log says `<e> tables configured` rather than its
//!   minhop fallback;
//! * when both route: every CA pair OpenSM's tables connect, smcore's
//!   connect too; smcore's busiest inter-switch link carries no more
//!   CA-to-CA routes than OpenSM's; `ibdmchk` finds smcore's dump
//!   connected and free of credit loops.
//!
//! Fabrics: a 4-ary 3-tree, the same tree with four cables cut, a random
//! irregular fabric (no roots detectable: both refuse updn; with a root GUID
//! file given to both: both route), and a 4-ary 3-tree with CAs on its
//! spines as well as its leaves (the case dnup is for).
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-updn` first, and the Debian packages opensm, ibsim-utils,
//! ibutils. `-- --nocapture` prints the figures.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sm_topology::builder::{ca_guid, ibnetdiscover_id};
use sm_topology::{TopoLink, TopoNode, Topology};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{self, Quality};
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::smcore::{Profile, Smcore};
use smcore_tests::{bench, ibdmchk};

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

/// One SM's result on one fabric: whether the asked engine routed and, if
/// so, the quality of its tables and the pairs they connect.
struct Side {
    routed: bool,
    why: String,
    quality: Option<Quality>,
    pairs: BTreeSet<(u64, u64)>,
}

fn judge(topo: &Topology, dir: &Path) -> (Quality, BTreeSet<(u64, u64)>) {
    let lfts = lfts::parse_lfts_file(dir.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let lids = lfts::lid_map_for_dump_dir(dir).unwrap_or_else(|e| panic!("{e}"));
    let q = lfts::quality(topo, &lfts, &lids).unwrap_or_else(|e| panic!("{e}"));
    let pairs = lfts::reachable_pairs(topo, &lfts, &lids).unwrap_or_else(|e| panic!("{e}"));
    // The pair walk and the memoised walk of `quality` must agree.
    assert_eq!(
        pairs.len(),
        q.reachable_pairs,
        "reachable pair counts of {} disagree",
        dir.display()
    );
    (q, pairs)
}

fn line(who: &str, s: &Side) -> String {
    match &s.quality {
        Some(q) => format!(
            "{who:<7} routed; reachable {}/{}  hops avg {:.3} extra {:.3}  routes/link max {} mean {:.1}",
            q.reachable_pairs, q.pairs, q.avg_hops, q.avg_extra_hops, q.max_routes_per_link, q.mean_routes_per_link
        ),
        None => format!("{who:<7} refused: {}", s.why),
    }
}

/// A fabric under test: its net file, topology and one ibsim for both
/// engines' OpenSM runs.
struct Fabric {
    name: String,
    net: PathBuf,
    topo: Topology,
    sim: Ibsim,
    tmp: tempfile::TempDir,
}

impl Fabric {
    fn generated(name: &str, gen_args: &[&str]) -> Fabric {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("updn-{name}-"))
            .tempdir()
            .expect("temp dir");
        let net = tmp.path().join(format!("{name}.net"));
        smcore().gen(gen_args, &net).unwrap_or_else(|e| panic!("{e}"));
        Fabric::from_net(name, net, tmp)
    }

    fn from_topology(name: &str, topo: &Topology) -> Fabric {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("updn-{name}-"))
            .tempdir()
            .expect("temp dir");
        let net = tmp.path().join(format!("{name}.net"));
        sm_topology::emit::write_file(topo, &net).unwrap_or_else(|e| panic!("{e}"));
        Fabric::from_net(name, net, tmp)
    }

    fn from_net(name: &str, net: PathBuf, tmp: tempfile::TempDir) -> Fabric {
        let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
        assert!(topo.is_connected(), "{name}: the generated fabric is not connected");
        let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{name}: {e}"));
        Fabric {
            name: name.into(),
            net,
            topo,
            sim,
            tmp,
        }
    }

    /// Route with `engine` on both SMs (`smcore_args`/`opensm_args` carry
    /// e.g. a root GUID file) and compare. Returns whether both routed.
    fn compare(&self, engine: &str, smcore_args: &[String], opensm_args: &[String]) -> bool {
        let name = format!("{}/{engine}", self.name);
        let dir = self.tmp.path().join(engine);

        // smcore, offline; no fallback, so a refusal shows.
        let sm_dir = dir.join("smcore");
        let run = bench::route(
            &smcore(),
            &self.net,
            &format!("{engine},no_fallback"),
            &dir.join("report.json"),
            Some(&sm_dir),
            smcore_args,
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let sm_routed = run.routed_by(engine);
        assert!(
            sm_routed || run.refused(),
            "{name}: smcore route failed oddly ({}):\n{}",
            run.status,
            run.output
        );
        let mut ours = Side {
            routed: sm_routed,
            why: run.reason(engine).unwrap_or("").to_string(),
            quality: None,
            pairs: BTreeSet::new(),
        };
        if sm_routed {
            let (q, p) = judge(&self.topo, &sm_dir);
            ours.quality = Some(q);
            ours.pairs = p;
        }

        // OpenSM under ibsim; its minhop fallback routing means "refused".
        let mut oopts = OpenSmOptions::new(engine);
        oopts.timeout = Duration::from_secs(60);
        oopts.extra_args = opensm_args.to_vec();
        let osm = opensm::run(&self.sim, &oopts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            osm.success(),
            "{name}: opensm did not finish cleanly ({:?}); log {}:\n{}",
            osm.outcome,
            osm.log_file.display(),
            osm.output
        );
        let osm_routed = osm.asked_engine_routed();
        let mut theirs = Side {
            routed: osm_routed,
            why: format!("routed by {:?}; errors {:?}", osm.routed_by(), osm.log.errors),
            quality: None,
            pairs: BTreeSet::new(),
        };
        if osm_routed {
            let (q, p) = judge(&self.topo, osm.dump_dir());
            theirs.quality = Some(q);
            theirs.pairs = p;
        }

        let check = |dir: &Path| {
            ibdmchk::check_dump_dir(dir, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let sm_chk = sm_routed.then(|| check(&sm_dir));
        let osm_chk = osm_routed.then(|| check(osm.dump_dir()));
        let summary = |c: &Option<ibdmchk::Verdict>| c.as_ref().map_or("-".into(), |c| c.summary());
        println!(
            "{name}: {} switches, {} CAs\n  {}\n  {}\n  ibdmchk smcore: {}\n  ibdmchk OpenSM: {}",
            self.topo.num_switches(),
            self.topo.end_nodes().count(),
            line("smcore", &ours),
            line("OpenSM", &theirs),
            summary(&sm_chk),
            summary(&osm_chk),
        );

        // Verdict. smcore's chain (and its engines) never accept tables
        // that leave a CA pair without a route; OpenSM's updn/dnup say
        // "configured" whatever their hop tables left out. So smcore must
        // route exactly when OpenSM's tables are complete.
        let osm_complete = theirs.quality.as_ref().is_some_and(Quality::all_reachable);
        if theirs.routed && !osm_complete && !ours.routed {
            let oq = theirs.quality.as_ref().expect("routed");
            println!(
                "  OpenSM's {engine} tables leave {} of {} pairs unreachable (e.g. {:?}); smcore refuses instead",
                oq.pairs - oq.reachable_pairs,
                oq.pairs,
                oq.unreachable_examples.first()
            );
            return false;
        }
        assert_eq!(
            ours.routed, theirs.routed,
            "{name}: verdicts differ: smcore {} ({}), OpenSM {} ({})",
            ours.routed, ours.why, theirs.routed, theirs.why
        );
        if !ours.routed {
            return false;
        }

        let (sq, oq) = (
            ours.quality.as_ref().expect("routed"),
            theirs.quality.as_ref().expect("routed"),
        );
        assert_eq!(sq.pairs, oq.pairs, "{name}: pair counts differ");
        let missing: Vec<_> = theirs.pairs.difference(&ours.pairs).take(5).collect();
        assert!(
            missing.is_empty(),
            "{name}: {} pairs OpenSM connects are not connected by smcore, e.g. {missing:x?}; smcore: {:?}",
            theirs.pairs.difference(&ours.pairs).count(),
            sq.unreachable_examples
        );
        assert!(
            sq.all_reachable(),
            "{name}: smcore leaves pairs unreachable: {:?}",
            sq.unreachable_examples
        );
        let sm_chk = sm_chk.expect("checked when routed");
        assert!(
            sm_chk.connected(),
            "{name}: ibdmchk on smcore's dumps: {}\n{}",
            sm_chk.summary(),
            sm_chk.output
        );
        assert_eq!(
            sm_chk.credit_loops,
            Some(false),
            "{name}: ibdmchk on smcore's dumps: {}\n{}",
            sm_chk.summary(),
            sm_chk.output
        );

        // Balance. smcore orders links between switches of equal rank,
        // which OpenSM leaves free both ways (see smcore_updn::rank); when
        // that makes OpenSM's tables plain min-hop, they carry credit loops
        // and can spread load more evenly than any loop-free up/down
        // routing. Only then may smcore's busiest link carry more.
        if sq.max_routes_per_link > oq.max_routes_per_link {
            let osm_chk = osm_chk.expect("checked when routed");
            assert_eq!(
                osm_chk.credit_loops,
                Some(true),
                "{name}: smcore's busiest inter-switch link carries {} routes ({:x?}), OpenSM's {} ({:x?}), \
                 and OpenSM's tables are not excused by a credit loop: {}",
                sq.max_routes_per_link,
                sq.busiest_link,
                oq.max_routes_per_link,
                oq.busiest_link,
                osm_chk.summary()
            );
            println!(
                "  smcore's busiest link carries {} routes, OpenSM's {}: OpenSM's {engine} tables have credit loops \
                 (ibdmchk), smcore's are loop free",
                sq.max_routes_per_link, oq.max_routes_per_link
            );
        }
        true
    }
}

#[test]
fn kary_ntree_4_3() {
    let f = Fabric::generated("k43", &["kary-ntree", "--k", "4", "--n", "3"]);
    assert!(f.compare("updn", &[], &[]), "updn must route a fat tree");
    assert!(f.compare("dnup", &[], &[]), "dnup must route a fat tree");
}

#[test]
fn kary_ntree_4_3_missing_links() {
    let f = Fabric::generated(
        "k43-cut4",
        &[
            "kary-ntree",
            "--k",
            "4",
            "--n",
            "3",
            "--remove-links",
            "4",
            "--fault-seed",
            "5",
        ],
    );
    assert_eq!(f.topo.links.len(), 64 + 2 * 64 - 4, "four inter-switch cables cut");
    assert!(
        f.compare("updn", &[], &[]),
        "updn must route a fat tree with a few cut cables"
    );
    f.compare("dnup", &[], &[]);
}

#[test]
fn random_irregular() {
    let f = Fabric::generated(
        "random",
        &[
            "random",
            "--switches",
            "16",
            "--ports",
            "8",
            "--hosts",
            "3",
            "--extra-links",
            "8",
            "--seed",
            "3",
        ],
    );
    // No switch stands out in the CA hop histogram: OpenSM's root
    // detection (and smcore's copy of it) finds no root.
    f.compare("updn", &[], &[]);
    f.compare("dnup", &[], &[]);
    // With the same root switch given to both, both must route.
    let root = f
        .topo
        .switches()
        .map(|i| f.topo.nodes[i].node_guid)
        .min()
        .expect("switches");
    let file = f.tmp.path().join("roots.guid");
    std::fs::write(&file, format!("0x{root:016x}\n")).expect("write root file");
    let path = file.to_str().expect("UTF-8 temp path").to_string();
    assert!(
        f.compare("updn", &["--root-guid-file".into(), path.clone()], &["-a".into(), path]),
        "updn with a root GUID file must route a connected fabric"
    );
}

/// A 4-ary n-tree with two more CAs on each spine's free up ports.
fn cas_on_spines(n: usize) -> Topology {
    let mut topo = sm_topology::gen::kary_ntree(4, n, 4).unwrap_or_else(|e| panic!("{e}"));
    let mut next_ca = topo.end_nodes().count();
    let spines: Vec<usize> = topo
        .switches()
        .filter(|&i| topo.nodes[i].desc.starts_with("spine-"))
        .collect();
    assert!(!spines.is_empty(), "the generator names its top level spine-*");
    for s in spines {
        let free: Vec<u8> = (1..=topo.nodes[s].num_ports)
            .filter(|&p| topo.peer(s, p).is_none())
            .take(2)
            .collect();
        assert_eq!(free.len(), 2, "a spine has free up ports");
        for p in free {
            let guid = ca_guid(next_ca);
            topo.nodes.push(TopoNode {
                kind: sm_abi::NodeKind::Ca,
                name: ibnetdiscover_id(sm_abi::NodeKind::Ca, guid),
                desc: format!("spine-host-{next_ca}"),
                num_ports: 1,
                node_guid: guid,
                sys_guid: guid,
                port_guids: TopoNode::default_port_guids(sm_abi::NodeKind::Ca, guid, 1),
            });
            let ca = topo.nodes.len() - 1;
            topo.links.push(TopoLink::new((ca, 1), (s, p)));
            next_ca += 1;
        }
    }
    topo.canonicalize();
    topo.validate().unwrap_or_else(|e| panic!("{e}"));
    topo
}

#[test]
fn cas_on_spines_dnup() {
    // Two levels: every switch carries CAs, so all ranks tie.
    let f = Fabric::from_topology("spine-cas-2", &cas_on_spines(2));
    assert!(
        f.compare("dnup", &[], &[]),
        "dnup must route a two-level tree with CAs on its spines"
    );
    f.compare("updn", &[], &[]);
    // Three levels: leaf-to-leaf routes between pods must climb to a spine
    // (rank 0, a CA switch) and descend again, which the rule forbids.
    let f = Fabric::from_topology("spine-cas-3", &cas_on_spines(3));
    assert!(
        !f.compare("dnup", &[], &[]),
        "no complete dnup routing exists on a three-level tree with spine CAs"
    );
    f.compare("updn", &[], &[]);
}
