//! Route quality and time of Nue on generated fabrics, for both layer
//! partitioners and several VL budgets. Run in release:
//! `cargo run --release -p smcore-engine-nue --example measure`.

use std::time::Instant;

use sm_topology::{gen, lids};
use smcore_kit::verify::{verify, VerifyOptions};
use smcore_nue::{Nue, NueConfig, Partitioner};

fn main() {
    let fabrics = vec![
        (
            "torus-6x6x6-h2",
            gen::torus(&[6, 6, 6], 2, false).unwrap().0,
        ),
        (
            "torus-4x4x4-h2",
            gen::torus(&[4, 4, 4], 2, false).unwrap().0,
        ),
        ("kary-4-3-h4", gen::kary_ntree(4, 3, 4).unwrap()),
        (
            "random-64-r12-h4",
            gen::random_irregular(64, 12, 4, 100, 7).unwrap(),
        ),
    ];
    let filter: Option<String> = std::env::args().nth(1);
    // `measure FABRIC VLS RUNS`: only route, for `perf stat`.
    if let (Some(f), Some(vls), Some(runs)) = (
        std::env::args().nth(1),
        std::env::args().nth(2),
        std::env::args().nth(3),
    ) {
        let (_, topo) = fabrics
            .iter()
            .find(|(n, _)| n.contains(f.as_str()))
            .expect("fabric");
        let fabric = lids::snapshot(topo, 0).unwrap();
        let e = Nue::new(NueConfig {
            max_num_vls: vls.parse().unwrap(),
            ..Default::default()
        });
        for _ in 0..runs.parse::<usize>().unwrap() {
            std::hint::black_box(e.route_with_stats(&fabric).unwrap());
        }
        return;
    }
    println!("fabric              part  VLs  layers  repaired  blocked  ms(median of 5)  max_load  mean_load  avg_hops  credit_loop");
    for (name, topo) in &fabrics {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let fabric = lids::snapshot(topo, 0).unwrap();
        for vls in [1u8, 2, 4, 8] {
            for part in [Partitioner::Grown, Partitioner::RoundRobin] {
                if vls == 1 && part == Partitioner::RoundRobin {
                    continue;
                }
                let e = Nue::new(NueConfig {
                    max_num_vls: vls,
                    partitioner: part,
                    ..Default::default()
                });
                let mut times = Vec::new();
                let mut last = None;
                for _ in 0..5 {
                    let t = Instant::now();
                    let r = e.route_with_stats(&fabric).unwrap();
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                    last = Some(r);
                }
                times.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let (r, st) = last.unwrap();
                let v = verify(&fabric, &r, &VerifyOptions::default());
                let (max, mean) = v.inter_switch_load(&fabric);
                println!(
                    "{name:18}  {:5} {vls:3}  {:6}  {:5}/{:<5}  {:7}  {:15.2}  {max:8}  {mean:9.1}  {:8.3}  {}",
                    if part == Partitioner::Grown { "grown" } else { "rr" },
                    st.layers,
                    st.repaired, st.pinned,
                    st.blocked,
                    times[2],
                    v.avg_hops(),
                    if v.credit_loop.is_some() || v.unreachable > 0 { "FAIL" } else { "none" }
                );
                if std::env::var_os("NUE_DEBUG").is_some() {
                    println!("    searches {} visited {}", st.searches, st.visited);
                }
            }
        }
    }
}
