//! Route a generated torus (or mesh) with lash and print the layers and time:
//! `cargo run --release -p smcore-engine-lash --example lash_torus -- 6 6 6 [h=HOSTS] [mesh] [fixed] [no-analysis] [shuffle] [random=SWITCHES]`

use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

use sm_abi::RoutingEngine;
use sm_topology::{gen, lids};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_lash::{Lash, LashConfig, PathChoice};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dims: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).take(3).collect();
    let hosts = args
        .iter()
        .filter_map(|a| a.strip_prefix("h=").and_then(|h| h.parse().ok()))
        .next()
        .unwrap_or(2);
    let open = args.iter().any(|a| a == "mesh");
    let fixed = args.iter().any(|a| a == "fixed");
    let analysis = !args.iter().any(|a| a == "no-analysis");
    let shuffle = args.iter().any(|a| a == "shuffle");
    let random = args.iter().find_map(|a| {
        a.strip_prefix("random=")
            .and_then(|n| n.parse::<usize>().ok())
    });
    let topo = if let Some(n) = random {
        gen::random_irregular(n, 16, hosts, n * 3, 1).expect("random")
    } else if shuffle {
        common::shuffled_torus(&dims, hosts, open, 7)
    } else {
        gen::torus(&dims, hosts, open).expect("torus").0
    };
    let fabric = lids::snapshot(&topo, 0).expect("lids");
    let choice = if fixed {
        PathChoice::Fixed
    } else {
        PathChoice::LowestLayer
    };
    let engine = Lash::new(LashConfig {
        lash_start_vl: 0,
        do_mesh_analysis: analysis,
    })
    .with_choice(choice);
    let t = Instant::now();
    let plan = engine.plan(&fabric);
    let plan_time = t.elapsed();
    match &plan {
        Ok(p) => println!(
            "layers {} per layer {:?} mesh {:?}",
            p.layers,
            p.per_layer,
            p.mesh.as_ref().map(|m| m.as_ref().map(|m| m.describe()))
        ),
        Err(e) => println!("plan failed: {e}"),
    }

    let t = Instant::now();
    let r = engine.route(&fabric);
    let route_time = t.elapsed();
    println!(
        "plan {:.3} s, route {:.3} s",
        plan_time.as_secs_f64(),
        route_time.as_secs_f64()
    );
    if let Ok(r) = r {
        let t = Instant::now();
        let v = verify(&fabric, &r, &VerifyOptions::default());
        println!(
            "verify {:.3} s: unreachable {} loops {} credit loop {} vls_used {}",
            t.elapsed().as_secs_f64(),
            v.unreachable,
            v.looping,
            v.credit_loop.is_some(),
            v.vls_used
        );
    }
}
