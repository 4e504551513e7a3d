//! Route-time measurement (ignored by default): smcore's torus-2QoS against
//! OpenSM 3.3.23's `-R torus-2QoS -Q` on a 10x10x10 torus with 2 CAs per
//! switch, alternating A B A B on the same machine.
//!
//! * A: `target/release/smcore route NET --engines torus-2QoS,no_fallback
//!   --torus-config C --report R`: the engine's route time from the report.
//! * B: `opensm -o -R torus-2QoS -Q --torus_config C -D 0x07` under one
//!   ibsim: the log window from `building routing with 'torus-2QoS'` to
//!   `torus-2QoS tables configured on all switches`.
//!
//! Run: `cargo build --release -p sm-core -p smcore-engine-minhop -p
//! smcore-engine-torus2qos && cargo test -p smcore-tests --test
//! torus2qos_bench -- --ignored --nocapture`. Prints medians and the
//! ratio; asserts only that both route (no timed assertions).

use std::time::Duration;

use smcore_tests::bench;
use smcore_tests::ibsim::{Ibsim, IbsimOptions};
use smcore_tests::opensm::{self, LogMode, OpenSmOptions};
use smcore_tests::smcore::{Profile, Smcore};

#[test]
#[ignore = "benchmark: release build, OpenSM on a 3,000-node ibsim fabric (bench/torus.sh)"]
fn route_time_10x10x10_against_opensm() {
    let sm = Smcore::locate(Profile::Release).unwrap_or_else(|e| panic!("{e}"));
    let runs: usize = std::env::var("TORUS2QOS_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let tmp = tempfile::Builder::new()
        .prefix("torus2qos-bench-")
        .tempdir()
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
    let sim = Ibsim::start_with(
        &net,
        &IbsimOptions {
            ready_timeout: Duration::from_secs(1800),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (mut ours, mut theirs, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let run = bench::route(
            &sm,
            &net,
            "torus-2QoS,no_fallback",
            &tmp.path().join("report.json"),
            None,
            &["--torus-config".to_string(), conf_s.clone()],
            Duration::from_secs(300),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            run.routed_by("torus-2QoS"),
            "smcore did not route:\n{}",
            run.output
        );
        let ms = run.engine_route_ms("torus-2QoS").unwrap_or(f64::NAN);
        ours.push(ms);
        totals.push(run.phase_ms("total").unwrap_or(f64::NAN));

        let mut o = OpenSmOptions::new("torus-2QoS");
        o.log = LogMode::Timing;
        o.timeout = Duration::from_secs(600);
        o.extra_args = vec!["-Q".into(), "--torus_config".into(), conf_s.clone()];
        let osm = opensm::run(&sim, &o).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            osm.asked_engine_routed(),
            "OpenSM did not route with torus-2QoS: {:?}",
            osm.log.errors
        );
        let oms = osm.route_time().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        theirs.push(oms);
        println!(
            "run {}: smcore torus-2QoS {ms:.2} ms (smcore total {:.1} ms) | OpenSM {oms:.1} ms",
            i + 1,
            totals[i]
        );
    }
    let (a, b) = (
        bench::median(&ours).unwrap_or(f64::NAN),
        bench::median(&theirs).unwrap_or(f64::NAN),
    );
    println!(
        "10x10x10 torus, 2 CAs/switch, {runs} runs each: smcore median {a:.2} ms, OpenSM median {b:.1} ms, ratio {:.3}",
        a / b
    );
}
