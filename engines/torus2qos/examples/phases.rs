//! Time the engine's phases on a generated torus:
//! `cargo run --release -p smcore-engine-torus2qos --example phases -- 10x10x10 2`.

use std::time::Instant;

use sm_abi::RoutingEngine;
use sm_topology::{gen, lids};
use smcore_kit::graph::Graph;
use smcore_torus2qos::config::TorusConf;
use smcore_torus2qos::{discover, mcast, route, Torus2Qos};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dims: Vec<usize> = args
        .get(1)
        .map_or("10x10x10", |s| s.as_str())
        .split('x')
        .map(|d| d.parse().expect("dims like 10x10x10"))
        .collect();
    let hosts: usize = args.get(2).and_then(|h| h.parse().ok()).unwrap_or(2);
    let (topo, layout) = gen::torus(&dims, hosts, false).expect("torus");
    let f = lids::snapshot(&topo, 0).expect("lids");
    let conf = TorusConf::parse(&gen::torus_2qos_conf(&layout), "gen").expect("conf");
    for _ in 0..3 {
        let t0 = Instant::now();
        let g = Graph::new(&f);
        let t1 = Instant::now();
        let t = discover::discover(&f, &g, &conf).expect("discover");
        let t2 = Instant::now();
        let router = route::Router::new(&t);
        let dest = route::destination_lids(&f, &g, &conf.port_order);
        let dirs = if router.pristine {
            None
        } else {
            Some(route::decisions(&t, &router, &g).expect("decisions"))
        };
        let t3 = Instant::now();
        let lfts = route::build_lfts(&f, &g, &t, dirs.as_deref(), &dest);
        let t4 = Instant::now();
        let sl2vl = route::sl2vl(&f, &g, &t);
        let t5 = Instant::now();
        let tree = mcast::master_tree(&t).expect("tree");
        let t6 = Instant::now();
        let whole = Torus2Qos::with_conf(conf.clone()).route(&f).expect("route");
        let t7 = Instant::now();
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        println!(
            "graph {:.2} discover {:.2} decisions {:.2} lfts {:.2} sl2vl {:.2} ({}) mcast {:.2} ({} edges) | whole route {:.2} ms ({} lfts)",
            ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4), ms(t4, t5), sl2vl.len(), ms(t5, t6), tree.edges.len(), ms(t6, t7), lfts.len().min(whole.lfts.len())
        );
    }
}
