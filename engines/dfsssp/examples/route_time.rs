//! Route time of sssp and dfsssp on large generated fabrics, with the
//! kit's verifier on the result. Run in release:
//!
//! ```text
//! cargo run --release -p smcore-engine-dfsssp --example route_time -- [torus|tree|all] [runs]
//! ```
//!
//! * `torus`: 6x6x6 3D torus, 2 hosts per switch (OpenSM 3.3.23's dfsssp
//!   fails on it asking for 9 VLs);
//! * `tree`: 16-ary 3-tree, 4,096 CAs, 768 switches.
//!
//! Prints the median wall time of `runs` routings per engine (CPU time
//! equals wall time: the engines are single threaded), the VLs used and
//! the verifier's verdict.

use std::time::{Duration, Instant};

use sm_abi::{FabricSnapshot, RoutingEngine};
use sm_topology::{gen, lids};
use smcore_dfsssp::{Dfsssp, Sssp};
use smcore_kit::verify::{verify, VerifyOptions};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn run(name: &str, fabric: &FabricSnapshot, runs: usize) {
    let engines: [(&str, Box<dyn RoutingEngine>); 2] = [
        ("sssp", Box::new(Sssp::default())),
        ("dfsssp", Box::new(Dfsssp::default())),
    ];
    for (ename, engine) in engines.iter() {
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..runs {
            let t = Instant::now();
            let r = engine.route(fabric);
            times.push(t.elapsed());
            last = Some(r);
        }
        let med = median(times.clone());
        match last.expect("at least one run") {
            Ok(r) => {
                let t = Instant::now();
                let v = verify(
                    fabric,
                    &r,
                    &VerifyOptions {
                        credit_loops: *ename == "dfsssp",
                        ..Default::default()
                    },
                );
                let (max, mean) = v.inter_switch_load(fabric);
                println!(
                    "{name} {ename}: median {:.3} s over {runs} runs (min {:.3} s); vls_used {}; verify {:.2} s: \
                     pairs {} unreachable {} looping {} non-minimal {} credit loop {} vl violations {}; \
                     routes/link max {max} mean {mean:.1}",
                    med.as_secs_f64(),
                    times.iter().min().unwrap().as_secs_f64(),
                    r.vls_used,
                    t.elapsed().as_secs_f64(),
                    v.pairs,
                    v.unreachable,
                    v.looping,
                    v.non_minimal,
                    if v.credit_loops_checked { if v.credit_loop.is_some() { "YES" } else { "no" } } else { "unchecked" },
                    v.vl_violations,
                );
                for d in r.diagnostics.iter() {
                    println!("    {:?}: {}", d.level, d.message);
                }
            }
            Err(e) => println!(
                "{name} {ename}: median {:.3} s, FAILED: {e}",
                med.as_secs_f64()
            ),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("all");
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    if which == "torus" || which == "all" {
        let (t, _) = gen::torus(&[6, 6, 6], 2, false).expect("torus");
        let f = lids::snapshot(&t, 0).expect("lids");
        run("torus-6x6x6-h2", &f, runs);
    }
    if which == "tree" || which == "all" {
        let t = gen::kary_ntree(16, 3, 16).expect("tree");
        let f = lids::snapshot(&t, 0).expect("lids");
        run("16-ary-3-tree", &f, runs);
    }
    if let Some(vls) = which.strip_prefix("tree-vls=") {
        // The tree with fewer VLs, to time the fallbacks.
        let t = gen::kary_ntree(16, 3, 16).expect("tree");
        let mut f = lids::snapshot(&t, 0).expect("lids");
        let vls: u8 = vls.parse().expect("VL count");
        for p in f.ports.iter_mut() {
            p.op_vls = p.op_vls.min(vls);
        }
        run(which, &f, runs);
    }
    if let Some(dims) = which.strip_prefix("torus=") {
        let d: Vec<usize> = dims.split('x').filter_map(|x| x.parse().ok()).collect();
        let (t, _) = gen::torus(&d, 2, false).expect("torus");
        let f = lids::snapshot(&t, 0).expect("lids");
        run(which, &f, runs);
    }
}
