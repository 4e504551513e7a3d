//! torus-2QoS through the `smcore` binary, judged by `ibdmchk` with smcore's
//! path-SL (`-c smcore-path-sl.psl`) and SL2VL (`-d opensm-sl2vl.dump`)
//! dumps, and against OpenSM 3.3.23's `-R torus-2QoS -Q` on the same fabrics.
//!
//! * `smcore route --engines torus-2QoS,no_fallback --torus-config C
//!   --dump-dir D` on a generated 4x4x4 torus (and on it with a switch
//!   removed, and with three cables cut) routes, and `ibdmchk` finds D
//!   connected and free of credit loops under the engine's SLs and SL2VL
//!   maps; without those files the same tables have credit loops (so the
//!   verdict rests on the SLs).
//! * A 6x6 torus with two failed switches adjacent in x is refused with
//!   the reason, and `no_fallback` leaves it unrouted.
//! * OpenSM under ibsim on the healthy 4x4x4 torus, the one with a switch
//!   removed, and the refused 6x6 case: the same verdict (routed by
//!   torus-2QoS or not).
//!
//! Needs `cargo build -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-torus2qos` first, and the Debian packages opensm,
//! ibsim-utils, ibutils. `-- --nocapture` prints the figures.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use smcore_tests::bench;
use smcore_tests::ibdmchk::{self, Verdict};
use smcore_tests::ibsim::Ibsim;
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::proc;
use smcore_tests::smcore::{Profile, Smcore};

const ENGINE: &str = "torus-2QoS";

fn smcore() -> Smcore {
    Smcore::locate(Profile::Debug).unwrap_or_else(|e| panic!("{e}"))
}

/// `ibdmchk` on a dump directory, with the path-SL and SL2VL files when
/// `with_sls` (the runner in tests/src/ibdmchk.rs passes neither).
fn ibdmchk_run(dir: &Path, with_sls: bool) -> Verdict {
    let mut cmd = Command::new("ibdmchk");
    proc::die_with_parent(&mut cmd);
    cmd.arg("-s").arg(dir.join("opensm-subnet.lst"));
    cmd.arg("-f").arg(dir.join("opensm.fdbs"));
    cmd.arg("-m").arg(dir.join("opensm.mcfdbs"));
    if with_sls {
        for (flag, file) in [("-c", "smcore-path-sl.psl"), ("-d", "opensm-sl2vl.dump")] {
            assert!(
                dir.join(file).is_file(),
                "{} missing",
                dir.join(file).display()
            );
            cmd.arg(flag).arg(dir.join(file));
        }
    }
    let mut child = cmd
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting ibdmchk (Debian package ibutils)");
    let out = child.stdout.take().map(proc::drain);
    let err = child.stderr.take().map(proc::drain);
    let outcome =
        proc::wait_with_timeout(&mut child, Duration::from_secs(120), Duration::from_secs(1))
            .expect("waiting for ibdmchk");
    let mut text = proc::collect(out);
    text.push_str(&proc::collect(err));
    let mut v = ibdmchk::parse_output(&text);
    v.timed_out = outcome == proc::Outcome::TimedOut;
    v
}

struct Fabric {
    name: String,
    net: PathBuf,
    conf: PathBuf,
    tmp: tempfile::TempDir,
}

impl Fabric {
    /// A generated torus; the torus-2QoS.conf is always the healthy one's.
    fn generated(name: &str, dims: &str, faults: &[&str]) -> Fabric {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("torus2qos-{name}-"))
            .tempdir()
            .expect("temp dir");
        let net = tmp.path().join(format!("{name}.net"));
        let conf = tmp.path().join("torus-2QoS.conf");
        let mut args = vec!["torus", "--dims", dims, "--hosts", "1", "--torus-conf"];
        let conf_s = conf.display().to_string();
        args.push(&conf_s);
        args.extend_from_slice(faults);
        smcore().gen(&args, &net).unwrap_or_else(|e| panic!("{e}"));
        Fabric {
            name: name.into(),
            net,
            conf,
            tmp,
        }
    }

    /// A torus with the switches at the given coordinates removed.
    fn without_switches(name: &str, dims: &[usize], coords: &[[usize; 3]]) -> Fabric {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("torus2qos-{name}-"))
            .tempdir()
            .expect("temp dir");
        let (topo, layout) = sm_topology::gen::torus(dims, 1, false).unwrap();
        let conf = tmp.path().join("torus-2QoS.conf");
        std::fs::write(&conf, sm_topology::gen::torus_2qos_conf(&layout)).unwrap();
        let mut t = sm_topology::Topology::new();
        let gone: Vec<usize> = coords.iter().map(|&c| layout.at(c).unwrap().node).collect();
        let mut index = vec![usize::MAX; topo.nodes.len()];
        for (i, n) in topo.nodes.iter().enumerate() {
            if !gone.contains(&i) {
                index[i] = t.nodes.len();
                t.nodes.push(n.clone());
            }
        }
        for l in &topo.links {
            if !gone.contains(&l.a.0) && !gone.contains(&l.b.0) {
                let mut l = *l;
                l.a.0 = index[l.a.0];
                l.b.0 = index[l.b.0];
                t.links.push(l);
            }
        }
        t.canonicalize();
        let net = tmp.path().join(format!("{name}.net"));
        sm_topology::emit::write_file(&t, &net).unwrap_or_else(|e| panic!("{e}"));
        Fabric {
            name: name.into(),
            net,
            conf,
            tmp,
        }
    }

    /// smcore's verdict: Some(dump dir) when torus-2QoS routed, else the reason.
    fn smcore_route(&self) -> Result<PathBuf, String> {
        let dir = self.tmp.path().join("smcore");
        let args = vec![
            "--torus-config".to_string(),
            self.conf.display().to_string(),
        ];
        let run = bench::route(
            &smcore(),
            &self.net,
            &format!("{ENGINE},no_fallback"),
            &self.tmp.path().join("report.json"),
            Some(&dir),
            &args,
            Duration::from_secs(120),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        if run.routed_by(ENGINE) {
            Ok(dir)
        } else {
            assert!(
                run.refused(),
                "{}: smcore route failed oddly ({}):\n{}",
                self.name,
                run.status,
                run.output
            );
            Err(run.reason(ENGINE).unwrap_or("").to_string())
        }
    }

    /// OpenSM's verdict under ibsim: torus-2QoS configured the tables.
    fn opensm_routes(&self) -> bool {
        let sim = Ibsim::start(&self.net).unwrap_or_else(|e| panic!("{}: {e}", self.name));
        let mut o = OpenSmOptions::new(ENGINE);
        o.timeout = Duration::from_secs(90);
        o.extra_args = vec![
            "-Q".into(),
            "--torus_config".into(),
            self.conf.display().to_string(),
        ];
        let run = opensm::run(&sim, &o).unwrap_or_else(|e| panic!("{}: {e}", self.name));
        println!(
            "{}: OpenSM {:?}, routed by {:?}, errors {:?}",
            self.name,
            run.outcome,
            run.routed_by(),
            run.log.errors.iter().take(3).collect::<Vec<_>>()
        );
        run.asked_engine_routed()
    }
}

fn assert_clean(name: &str, dir: &Path) {
    let v = ibdmchk_run(dir, true);
    println!("{name}: ibdmchk with SLs: {}", v.summary());
    assert!(v.connected(), "{name}: {}\n{}", v.summary(), v.output);
    assert_eq!(
        v.credit_loops,
        Some(false),
        "{name}: {}\n{}",
        v.summary(),
        v.output
    );
}

#[test]
fn healthy_torus_is_clean_only_with_the_engines_sls() {
    let f = Fabric::generated("4x4x4", "4x4x4", &[]);
    let dir = f
        .smcore_route()
        .unwrap_or_else(|e| panic!("4x4x4 refused: {e}"));
    assert_clean("4x4x4", &dir);
    let bare = ibdmchk_run(&dir, false);
    println!("4x4x4: ibdmchk without SLs: {}", bare.summary());
    assert_eq!(
        bare.credit_loops,
        Some(true),
        "DOR on a torus without datelines must loop"
    );
}

#[test]
fn failures_routed_and_clean() {
    for (name, faults) in [
        (
            "4x4x4-switch-down",
            vec!["--remove-switches", "1", "--fault-seed", "3"],
        ),
        (
            "4x4x4-3-links-down",
            vec!["--remove-links", "3", "--fault-seed", "5"],
        ),
    ] {
        let f = Fabric::generated(name, "4x4x4", &faults);
        match f.smcore_route() {
            Ok(dir) => assert_clean(name, &dir),
            Err(e) => panic!("{name} refused: {e}"),
        }
    }
}

#[test]
fn adjacent_failed_switches_in_x_refused() {
    let f = Fabric::without_switches("6x6-O-T-down", &[6, 6], &[[3, 1, 0], [4, 1, 0]]);
    let e = f.smcore_route().expect_err("must be refused");
    assert!(e.contains("adjacent in the x dimension"), "{e}");
}

#[test]
fn same_verdict_as_opensm() {
    let cases = [
        (Fabric::generated("4x4x4", "4x4x4", &[]), true),
        (
            Fabric::without_switches("4x4x4-one-down", &[4, 4, 4], &[[1, 2, 3]]),
            true,
        ),
        (
            Fabric::without_switches("6x6-O-T-down", &[6, 6], &[[3, 1, 0], [4, 1, 0]]),
            false,
        ),
    ];
    for (f, expect) in cases {
        let ours = f.smcore_route();
        let theirs = f.opensm_routes();
        println!(
            "{}: smcore {}, OpenSM {}",
            f.name,
            if ours.is_ok() { "routed" } else { "refused" },
            if theirs { "routed" } else { "refused" }
        );
        assert_eq!(
            ours.is_ok(),
            theirs,
            "{}: smcore {:?} vs OpenSM routed={theirs}",
            f.name,
            ours
        );
        assert_eq!(ours.is_ok(), expect, "{}: {:?}", f.name, ours);
    }
}
