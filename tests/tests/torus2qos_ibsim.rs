//! torus-2QoS end to end: smcore running as an SM (no `--once`) on an ibsim
//! 5x5x3 torus with `--engines torus-2QoS,no_fallback`, while links and
//! switches fail and come back through ibsim's console.
//!
//! torus-2QoS's promise is that a failure never changes a path SL (the SL
//! depends on the two switches' coordinates only), so that traffic in
//! flight keeps its VLs and no credit loop can form across a re-route:
//!
//! * (a) one x link down: a new heavy sweep, every CA pair of the fabric
//!   without that link reached by the dumped LFTs, `ibroute` equal to the
//!   dump, `smcore-path-sl.psl` identical to the healthy fabric's;
//! * (b) the link back: the healthy LFTs and path SLs again;
//! * (c) one switch down (all its ports): routed around it, every remaining
//!   pair reached, each remaining path's SL as before;
//! * (d) the switch next to it in x down too: failed switches adjacent in a
//!   dimension other than the last are beyond torus-2QoS (the seeds'
//!   rule), so the SM must refuse (report: no engine, the engine's reason)
//!   and the switches must keep the tables of (c) through two refused
//!   sweeps, read back with `ibroute` (its up neighbours and every third
//!   other switch);
//! * (e) both back: routed again with the healthy fabric's LFTs and path SLs.
//!
//! No port's LID changes at any point (`guid2lid`). `ibroute` reads back
//! every switch after (a) and a sample (every 5th or 3rd) after the other
//! routed steps, which keeps the test under a minute on a busy machine.
//! The fabric is 5x5x3 (150 LIDs), not 4x4x4: with 128 LIDs the top LID is
//! a multiple of 64, and `ibroute` (infiniband-diags 44) never reads the
//! LFT block that holds it, whichever SM programmed it.
//!
//! Needs the debug build of `sm-core` and `smcore-engine-torus2qos`, and
//! ibsim-utils and infiniband-diags.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sm_topology::Topology;
use smcore_tests::fabric_check::{lfts_read_back, run_client, TOOL_TIMEOUT};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::lfts::{parse_guid2lid_file, parse_lfts_file, parse_lfts_str, quality, Lfts};
use smcore_tests::sm_run::RunningSm;
use smcore_tests::smcore::{Profile, Smcore};

/// How long one fabric change may take to be routed.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// No heavy sweep for this long: the SM has finished reacting.
const SETTLED: Duration = Duration::from_millis(2000);

/// (source node GUID, destination LID) → SL, from `smcore-path-sl.psl`.
type PathSls = BTreeMap<(u64, u16), u8>;

fn path_sls(dir: &Path) -> PathSls {
    let file = dir.join("smcore-path-sl.psl");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut out = PathSls::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let parsed = match f[..] {
            [guid, lid, sl] => u64::from_str_radix(guid.trim_start_matches("0x"), 16)
                .ok()
                .zip(lid.parse::<u16>().ok())
                .zip(sl.parse::<u8>().ok()),
            _ => None,
        };
        let ((guid, lid), sl) =
            parsed.unwrap_or_else(|| panic!("{}:{}: bad line {line:?}", file.display(), i + 1));
        assert!(
            out.insert((guid, lid), sl).is_none(),
            "{}:{}: path listed twice",
            file.display(),
            i + 1
        );
    }
    out
}

/// Every path of `now` existed in `healthy` with the same SL; returns how
/// many were compared.
fn assert_sls_kept(healthy: &PathSls, now: &PathSls, when: &str) -> usize {
    assert!(!now.is_empty(), "{when}: no path SL dumped");
    let changed: Vec<String> = now
        .iter()
        .filter(|(k, sl)| healthy.get(k) != Some(sl))
        .take(5)
        .map(|((g, l), sl)| {
            format!(
                "{g:#x} -> LID {l}: SL {sl}, healthy {:?}",
                healthy.get(&(*g, *l))
            )
        })
        .collect();
    assert!(changed.is_empty(), "{when}: path SLs changed: {changed:?}");
    now.len()
}

/// Port GUID → LID, from the SM's `guid2lid`.
fn lids(dir: &Path) -> BTreeMap<u64, u16> {
    let map = parse_guid2lid_file(dir.join("guid2lid")).unwrap_or_else(|e| panic!("{e}"));
    map.by_lid.iter().map(|(&lid, &guid)| (guid, lid)).collect()
}

fn assert_lids_kept(first: &BTreeMap<u64, u16>, dir: &Path, when: &str) {
    let now = lids(dir);
    assert!(!now.is_empty(), "{when}: empty guid2lid");
    for (guid, lid) in now {
        assert_eq!(
            first.get(&guid),
            Some(&lid),
            "{when}: port {guid:#x} changed LID"
        );
    }
}

/// `topo` without the links touching any node of `nodes` or listed in `links`.
fn without(topo: &Topology, links: &[usize], nodes: &[usize]) -> Topology {
    let mut t = topo.clone();
    t.links = topo
        .links
        .iter()
        .enumerate()
        .filter(|(i, l)| !links.contains(i) && !nodes.iter().any(|&n| l.touches(n)))
        .map(|(_, l)| *l)
        .collect();
    t
}

/// The dumped LFTs reach every end-port pair of `topo`.
fn reaches_all(topo: &Topology, dir: &Path) -> Result<usize, String> {
    let lfts = parse_lfts_file(dir.join("opensm-lfts.dump")).map_err(|e| e.to_string())?;
    let lids = parse_guid2lid_file(dir.join("guid2lid")).map_err(|e| e.to_string())?;
    let q = quality(topo, &lfts, &lids).map_err(|e| e.to_string())?;
    if q.all_reachable() {
        Ok(q.pairs)
    } else {
        Err(format!(
            "{}/{} pairs reached: {:?}",
            q.reachable_pairs, q.pairs, q.unreachable_examples
        ))
    }
}

/// `ibroute` of each switch in `guids` prints the LFT `expected` holds for it.
fn assert_switches_hold(sim: &Ibsim, expected: &Lfts, guids: &[u64], when: &str) {
    for guid in guids {
        let want = expected
            .get(*guid)
            .unwrap_or_else(|| panic!("{when}: switch {guid:#x} not in the dump"));
        let run = run_client(sim, "ibroute", &[&want.lid.to_string()], TOOL_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            run.ok,
            "{when}: ibroute {} failed: {}{}",
            want.lid, run.stdout, run.stderr
        );
        let read = parse_lfts_str(&run.stdout, &format!("ibroute {}", want.lid))
            .unwrap_or_else(|e| panic!("{e}"));
        let held = read
            .get(*guid)
            .unwrap_or_else(|| panic!("{when}: ibroute {} answered another switch", want.lid));
        let top = held.ports.len().max(want.ports.len());
        let diff: Vec<String> = (0..top as u16)
            .filter(|&l| held.port(l) != want.port(l))
            .take(5)
            .map(|l| {
                format!(
                    "LID {l}: holds {:?}, expected {:?}",
                    held.port(l),
                    want.port(l)
                )
            })
            .collect();
        assert!(
            diff.is_empty(),
            "{when}: switch {} ({guid:#x}) changed its LFT: {diff:?}",
            want.desc
        );
    }
}

/// The link of switch `a` towards switch `b`: (index, port on `a`).
fn link_between(topo: &Topology, a: usize, b: usize) -> (usize, u8) {
    topo.links
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            if l.a.0 == a && l.b.0 == b {
                Some((i, l.a.1))
            } else if l.b.0 == a && l.a.0 == b {
                Some((i, l.b.1))
            } else {
                None
            }
        })
        .unwrap_or_else(|| {
            panic!(
                "no link between {} and {}",
                topo.nodes[a].desc, topo.nodes[b].desc
            )
        })
}

fn console(sim: &Ibsim, command: &str) {
    let answer = sim
        .send(command)
        .unwrap_or_else(|e| panic!("{command}: {e}"));
    assert!(
        !answer.contains("can't") && !answer.contains("not found"),
        "{command}: {answer}"
    );
}

#[test]
fn torus_2qos_keeps_path_sls_through_failures_while_running() {
    let test_start = Instant::now();
    let sm = Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::Builder::new()
        .prefix("torus2qos-ibsim-")
        .tempdir()
        .expect("temp dir");
    let net = tmp.path().join("torus.net");
    let conf = tmp.path().join("torus-2QoS.conf");
    let conf_s = conf.to_str().expect("utf-8 path");
    sm.gen(
        &[
            "torus",
            "--dims",
            "5x5x3",
            "--hosts",
            "1",
            "--torus-conf",
            conf_s,
        ],
        &net,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));
    let node = |desc: &str| {
        topo.nodes
            .iter()
            .position(|n| n.desc == desc)
            .unwrap_or_else(|| panic!("no {desc}"))
    };
    // Away from the seed (sw-0-0-0 and its neighbours) and the SM's host.
    let (lx, ly) = (node("sw-1-3-1"), node("sw-2-3-1"));
    let (link, link_port) = link_between(&topo, lx, ly);
    let (s1, s2) = (node("sw-2-2-1"), node("sw-3-2-1"));
    let host_of = |sw: usize| {
        topo.links.iter().find_map(|l| {
            if l.a.0 == sw && !topo.nodes[l.b.0].is_switch() {
                Some(l.b.0)
            } else if l.b.0 == sw && !topo.nodes[l.a.0].is_switch() {
                Some(l.a.0)
            } else {
                None
            }
        })
    };
    let s1_host = host_of(s1).expect("a host on the first failed switch");

    let sim = Ibsim::start(&net).unwrap_or_else(|e| panic!("{e}"));
    let dumps = tmp.path().join("dumps");
    let report = tmp.path().join("report.json");
    let mut run = RunningSm::start(
        &sim,
        &sm,
        &dumps,
        &report,
        &[
            "--engines",
            "torus-2QoS,no_fallback",
            "--torus-config",
            conf_s,
            "--sweep-interval",
            "1",
            "--log",
            "info",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));

    // A change is routed when a heavy sweep after it dumped LFTs that reach
    // every pair of the fabric as it now is; then the SM must settle. Every
    // `every`-th switch of the dump is read back (all of them after the
    // changes that matter; a sample elsewhere keeps the test short).
    let routed = |run: &mut RunningSm, before: u64, now: &Topology, what: &str, every: usize| {
        let took = run
            .wait_for(what, STEP_TIMEOUT, |r| {
                r.heavy_sweeps() > before && reaches_all(now, r.dump_dir()).is_ok()
            })
            .unwrap_or_else(|e| panic!("{e}"));
        run.wait_settled(SETTLED, STEP_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        let pairs = reaches_all(now, &dumps).unwrap_or_else(|e| panic!("{what}: {e}"));
        let switches = if every == 1 {
            lfts_read_back(&sim, &dumps).unwrap_or_else(|e| panic!("{what}: {e}"))
        } else {
            let lfts =
                parse_lfts_file(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
            let sample: Vec<u64> = lfts.switches.keys().copied().step_by(every).collect();
            assert_switches_hold(&sim, &lfts, &sample, what);
            sample.len()
        };
        let engine = run
            .report()
            .and_then(|r| r["engine"].as_str().map(str::to_string));
        assert_eq!(
            engine.as_deref(),
            Some("torus-2QoS"),
            "{what}: routed by another engine"
        );
        println!(
            "{what}: routed within {:.2} s, {pairs} pairs reached, {switches} switches read back",
            took.as_secs_f64()
        );
    };

    routed(&mut run, 0, &topo, "healthy fabric", 5);
    let first_lids = lids(&dumps);
    let healthy_lfts =
        parse_lfts_file(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let healthy = path_sls(&dumps);
    assert!(
        healthy.values().any(|&sl| sl != 0),
        "a 5x5x3 torus has paths across datelines"
    );

    // (a) one x link down.
    let before = run.heavy_sweeps();
    let cut = format!("\"{}\"[{link_port}]", topo.nodes[lx].name);
    console(&sim, &format!("Unlink {cut}"));
    routed(
        &mut run,
        before,
        &without(&topo, &[link], &[]),
        "(a) link down",
        1,
    );
    let now = path_sls(&dumps);
    assert_eq!(now, healthy, "(a) link down: path SLs changed");
    assert_lids_kept(&first_lids, &dumps, "(a) link down");

    // (b) back.
    let before = run.heavy_sweeps();
    console(&sim, &format!("ReLink {cut}"));
    routed(&mut run, before, &topo, "(b) link back", 5);
    assert_eq!(path_sls(&dumps), healthy, "(b) link back: path SLs changed");
    let lfts_b = parse_lfts_file(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        lfts_b.switches == healthy_lfts.switches,
        "(b) link back: LFTs differ from the healthy fabric's"
    );
    assert_lids_kept(&first_lids, &dumps, "(b) link back");

    // (c) one switch down.
    let before = run.heavy_sweeps();
    console(&sim, &format!("Unlink \"{}\"", topo.nodes[s1].name));
    routed(
        &mut run,
        before,
        &without(&topo, &[], &[s1]),
        "(c) switch down",
        3,
    );
    let now = path_sls(&dumps);
    let compared = assert_sls_kept(&healthy, &now, "(c) switch down");
    let gone = [topo.nodes[s1].node_guid, topo.nodes[s1_host].node_guid];
    assert!(
        now.keys().all(|(g, _)| !gone.contains(g)),
        "(c): the failed switch or its host still has path SLs"
    );
    // Every other source still has a path to every other reachable LID.
    let sources = topo.nodes.len() - gone.len();
    assert_eq!(
        compared,
        sources * (first_lids.len() - 2 - 1),
        "(c): paths missing from the path-SL dump"
    );
    assert_lids_kept(&first_lids, &dumps, "(c) switch down");
    let tables_c =
        parse_lfts_file(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    let sls_c = now;

    // (d) its x neighbour down too: not routable.
    let before = run.heavy_sweeps();
    console(&sim, &format!("Unlink \"{}\"", topo.nodes[s2].name));
    let refusal = |r: &RunningSm| {
        let rep = r.report()?;
        let n = rep["heavy_sweep"].as_u64()?;
        let attempt = rep["attempts"]
            .as_array()?
            .iter()
            .find(|a| a["engine"] == "torus-2QoS")?
            .clone();
        (n > before && rep["engine"].is_null() && attempt["outcome"] == "failed")
            .then_some((n, attempt))
    };
    let mut first_refusal = 0;
    run.wait_for("(d) the refusal", STEP_TIMEOUT, |r| match refusal(r) {
        Some((n, _)) => {
            first_refusal = n;
            true
        }
        None => false,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // A second refused sweep (the SM retries every interval): whatever a
    // refusal does to the switches, it has done it twice by now.
    run.wait_for("(d) a second refusal", STEP_TIMEOUT, |r| {
        refusal(r).is_some_and(|(n, _)| n > first_refusal)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let (_, attempt) = refusal(&run).expect("still refused");
    println!("(d) refused: {}", attempt["reason"]);
    assert!(
        attempt["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "(d): refusal without a reason: {attempt}"
    );
    // Dumps are of routed sweeps only: still (c)'s.
    assert_eq!(
        path_sls(&dumps),
        sls_c,
        "(d): the path-SL dump changed though nothing routed"
    );
    assert_lids_kept(&first_lids, &dumps, "(d) refused");
    // The switches still up hold (c)'s tables: the neighbours of the newly
    // failed switch (whose routes through it are now dead ends, the
    // tables an SM would most want to change) and every third other one.
    let s2_guid = topo.nodes[s2].node_guid;
    let neighbours: Vec<u64> = topo
        .links
        .iter()
        .filter_map(|l| match (l.a.0 == s2, l.b.0 == s2) {
            (true, _) => Some(l.b.0),
            (_, true) => Some(l.a.0),
            _ => None,
        })
        .map(|n| topo.nodes[n].node_guid)
        .filter(|g| tables_c.get(*g).is_some())
        .collect();
    assert_eq!(
        neighbours.len(),
        5,
        "(d): the up switches next to the second failed one"
    );
    let mut up: Vec<u64> = tables_c
        .switches
        .keys()
        .copied()
        .filter(|&g| g != s2_guid)
        .step_by(3)
        .collect();
    up.extend(neighbours);
    up.sort_unstable();
    up.dedup();
    assert_switches_hold(&sim, &tables_c, &up, "(d) refused");

    // (e) both back: the healthy routing.
    let before = run.heavy_sweeps();
    console(&sim, &format!("ReLink \"{}\"", topo.nodes[s2].name));
    console(&sim, &format!("ReLink \"{}\"", topo.nodes[s1].name));
    run.wait_for("(e) both switches back", STEP_TIMEOUT, |r| {
        r.heavy_sweeps() > before
            && reaches_all(&topo, r.dump_dir()).is_ok()
            && std::fs::read_to_string(r.dump_dir().join("smcore-path-sl.psl"))
                .is_ok_and(|t| t.lines().count() == healthy.len())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    routed(&mut run, before, &topo, "(e) both back", 3);
    assert_eq!(
        path_sls(&dumps),
        healthy,
        "(e) both back: path SLs differ from the healthy fabric's"
    );
    let lfts_e = parse_lfts_file(dumps.join("opensm-lfts.dump")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        lfts_e.switches == healthy_lfts.switches,
        "(e) both back: LFTs differ from the healthy fabric's"
    );
    assert_lids_kept(&first_lids, &dumps, "(e) both back");
    assert_eq!(lids(&dumps), first_lids, "(e): LID set differs");

    let (status, text) = run.stop(Duration::from_secs(10)).expect("stop smcore");
    assert!(
        status.success(),
        "smcore did not stop cleanly ({status}):\n{text}"
    );
    assert!(
        text.contains("no engine routed"),
        "the refusal is not in smcore's output:\n{text}"
    );
    println!("whole test {:.1} s", test_start.elapsed().as_secs_f64());
}

/// Balance (ignored; a benchmark, run by `bench/torus.sh` with the release
/// build): CA-to-CA routes per directed inter-switch link of smcore's
/// torus-2QoS and OpenSM 3.3.23's `-R torus-2QoS -Q` on the 10x10x10 torus
/// with 2 CAs per switch that `torus2qos_bench` times, both judged from
/// their LFT dumps by the same code ([`smcore_tests::lfts::quality`]).
/// The dumps go to `TORUS2QOS_BENCH_WORK` (default `/dev/shm`) and are
/// deleted once read. Asserts that both route every pair.
#[test]
#[ignore = "benchmark: release build, OpenSM on a 3,000-node ibsim fabric (bench/torus.sh)"]
fn balance_10x10x10_against_opensm() {
    use smcore_tests::bench;
    use smcore_tests::ibsim::IbsimOptions;
    use smcore_tests::lfts::{quality_of_dump_dir, Quality};
    use smcore_tests::opensm::{self, LogMode, OpenSmOptions};

    let sm = Smcore::locate(Profile::Release).unwrap_or_else(|e| panic!("{e}"));
    let work = std::env::var_os("TORUS2QOS_BENCH_WORK")
        .map_or_else(|| std::path::PathBuf::from("/dev/shm"), Into::into);
    let tmp = tempfile::Builder::new()
        .prefix("torus2qos-balance-")
        .tempdir_in(&work)
        .expect("temp dir");
    let net = tmp.path().join("t10.net");
    let conf = tmp.path().join("torus-2QoS.conf");
    let conf_s = conf.display().to_string();
    sm.gen(
        &[
            "torus",
            "--dims",
            "10x10x10",
            "--hosts",
            "2",
            "--torus-conf",
            &conf_s,
        ],
        &net,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let topo = sm_topology::parse_file(&net).unwrap_or_else(|e| panic!("{e}"));

    let show = |who: &str, q: &Quality| {
        println!(
            "{who}: {}/{} CA pairs reached, avg hops {:.3}, non-minimal pairs {}, routes per directed inter-switch link \
             max {} mean {:.1} max/mean {:.3} ({} links)",
            q.reachable_pairs,
            q.pairs,
            q.avg_hops,
            q.non_minimal_pairs,
            q.max_routes_per_link,
            q.mean_routes_per_link,
            q.max_routes_per_link as f64 / q.mean_routes_per_link,
            q.inter_switch_links
        );
    };

    let dir = tmp.path().join("smcore");
    let t = Instant::now();
    let run = bench::route(
        &sm,
        &net,
        "torus-2QoS,no_fallback",
        &tmp.path().join("report.json"),
        Some(&dir),
        &["--torus-config".to_string(), conf_s.clone()],
        Duration::from_secs(600),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        run.routed_by("torus-2QoS"),
        "smcore did not route:\n{}",
        run.output
    );
    let ours = quality_of_dump_dir(&topo, &dir).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "smcore run {:.1} s; its report: max {} mean {:.1} routes per link",
        t.elapsed().as_secs_f64(),
        run.number("max_routes_per_link").unwrap_or(f64::NAN),
        run.number("mean_routes_per_link").unwrap_or(f64::NAN)
    );
    show("smcore torus-2QoS", &ours);

    let sim = Ibsim::start_with(
        &net,
        &IbsimOptions {
            ready_timeout: Duration::from_secs(1800),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path().join("opensm");
    std::fs::create_dir_all(&dir).expect("OpenSM dir");
    // The LID matrix and FDB dumps are big and not read.
    let sinks: Vec<bench::DiscardFifo> = ["opensm-lid-matrix.dump", "opensm.fdbs"]
        .iter()
        .map(|f| bench::DiscardFifo::create(&dir.join(f)).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut o = OpenSmOptions::new("torus-2QoS");
    o.log = LogMode::Dumps;
    o.timeout = Duration::from_secs(1200);
    o.dir = Some(dir.clone());
    o.extra_args = vec!["-Q".into(), "--torus_config".into(), conf_s.clone()];
    let t = Instant::now();
    let osm = opensm::run(&sim, &o).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        osm.success() && osm.asked_engine_routed(),
        "OpenSM did not route with torus-2QoS ({:?}): {:?}",
        osm.outcome,
        osm.log.errors
    );
    let theirs = quality_of_dump_dir(&topo, &dir).unwrap_or_else(|e| panic!("{e}"));
    for s in sinks {
        s.finish();
    }
    println!("OpenSM run {:.1} s", t.elapsed().as_secs_f64());
    show("OpenSM torus-2QoS", &theirs);
    assert!(
        ours.all_reachable() && theirs.all_reachable(),
        "not every CA pair reached"
    );
}
