//! Busiest-link benchmark: OpenSM's `-R minhop`, smcore's `minhop` (the
//! same rule) and `minhop-balanced` (smcore's default routing: the greedy
//! followed by the kit's balancing pass) on several families, each as
//! generated, with its LIDs numbered differently (nodes in another order)
//! and with its GUIDs dealt out differently (which changes OpenSM's routing
//! order and every GUID tie).
//!
//! All three are judged alike: routes per directed inter-switch link
//! counted from each SM's own dump files (`smcore_tests::lfts`), end port
//! to end port. Run with `bench/minhop.sh` (after the route-time
//! benchmark) or alone: `target/release/bench_minhop_balance [--only
//! NAME,...] [--out FILE]`. The table goes into a marked section of
//! bench/results-minhop.md (the rest of the file is kept).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sm_topology::Topology;
use smcore_kit::renumber::{guids_dealt, nodes_reordered};
use smcore_tests::bench::sh;
use smcore_tests::ibsim::{Ibsim, IbsimOptions};
use smcore_tests::lfts::quality_of_dump_dir;
use smcore_tests::opensm::{self, OpenSmOptions};
use smcore_tests::smcore::{workspace_root, Profile, RouteOptions, Smcore};

const BEGIN: &str = "<!-- bench_minhop_balance: begin -->";
const END: &str = "<!-- bench_minhop_balance: end -->";

struct Family {
    name: &'static str,
    gen: &'static [&'static str],
}

const FAMILIES: &[Family] = &[
    Family { name: "ft2-96", gen: &["fat-tree", "--leaves", "8", "--spines", "6", "--hosts-per-leaf", "12", "--uplinks", "12"] },
    Family { name: "ft2-1k", gen: &["fat-tree", "--leaves", "32", "--spines", "32", "--hosts-per-leaf", "32", "--uplinks", "32"] },
    Family { name: "k4-3", gen: &["kary-ntree", "--k", "4", "--n", "3"] },
    Family { name: "k8-3", gen: &["kary-ntree", "--k", "8", "--n", "3"] },
    Family { name: "torus-8x6", gen: &["torus", "--dims", "8x6", "--hosts", "2"] },
    Family { name: "torus-4x4x3", gen: &["torus", "--dims", "4x4x3", "--hosts", "2"] },
    Family { name: "torus3d-4k", gen: &["torus", "--dims", "8x8x8", "--hosts", "8"] },
    Family {
        name: "random-1",
        gen: &["random", "--switches", "24", "--ports", "12", "--hosts", "4", "--extra-links", "12", "--seed", "1"],
    },
    Family {
        name: "random-7",
        gen: &["random", "--switches", "24", "--ports", "12", "--hosts", "4", "--extra-links", "12", "--seed", "7"],
    },
];

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Generated,
    LidsRenumbered,
    GuidsShuffled,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Generated => "as generated",
            Variant::LidsRenumbered => "LIDs renumbered",
            Variant::GuidsShuffled => "GUIDs shuffled",
        }
    }
}

fn transform(t: &Topology, v: Variant, seed: u64) -> Topology {
    match v {
        Variant::Generated => t.clone(),
        // LIDs (smcore's, offline) follow node order; ibsim's port
        // numbering and OpenSM's discovery follow the file.
        Variant::LidsRenumbered => nodes_reordered(t, seed),
        Variant::GuidsShuffled => guids_dealt(t, seed),
    }
}

struct Row {
    family: String,
    variant: &'static str,
    osm: Option<u64>,
    minhop: Option<u64>,
    balanced: Option<u64>,
    minhop_ms: f64,
    balanced_ms: f64,
    note: String,
}

fn smcore_max(sm: &Smcore, net: &Path, engine: &str, topo: &Topology, work: &Path) -> Result<(u64, f64), String> {
    let dir = work.join(format!("dump-{engine}"));
    let _ = std::fs::remove_dir_all(&dir);
    let run = sm
        .route(net, &RouteOptions::new(format!("{engine},no_fallback"), work.join("r.json")).dump_dir(&dir))
        .map_err(|e| e.to_string())?;
    if !run.status.success() {
        return Err(format!("smcore route --engines {engine} failed: {}", run.output));
    }
    let q = quality_of_dump_dir(topo, &dir).map_err(|e| e.to_string())?;
    if !q.all_reachable() || q.non_minimal_pairs != 0 {
        return Err(format!("{engine}: {} of {} pairs reached, {} non-minimal", q.reachable_pairs, q.pairs, q.non_minimal_pairs));
    }
    Ok((q.max_routes_per_link, run.report.map_or(f64::NAN, |r| r.phase_ms("route"))))
}

fn bench(sm: &Smcore, f: &Family, v: Variant, work: &Path) -> Row {
    let mut row = Row {
        family: f.name.into(),
        variant: v.name(),
        osm: None,
        minhop: None,
        balanced: None,
        minhop_ms: f64::NAN,
        balanced_ms: f64::NAN,
        note: String::new(),
    };
    let mut notes = Vec::new();
    let dir = work.join(format!("{}-{}", f.name, v.name().replace(' ', "-")));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        row.note = e.to_string();
        return row;
    }
    let gen = dir.join("gen.net");
    let net = dir.join("fabric.net");
    let topo = match sm
        .gen(f.gen, &gen)
        .map_err(|e| e.to_string())
        .and_then(|_| sm_topology::parse_file(&gen).map_err(|e| e.to_string()))
    {
        Ok(t) => transform(&t, v, 0x5eed_0000 + f.name.len() as u64),
        Err(e) => {
            row.note = e;
            return row;
        }
    };
    if let Err(e) = sm_topology::emit::write_file(&topo, &net) {
        row.note = e.to_string();
        return row;
    }
    match smcore_max(sm, &net, "minhop", &topo, &dir) {
        Ok((m, ms)) => (row.minhop, row.minhop_ms) = (Some(m), ms),
        Err(e) => notes.push(e),
    }
    match smcore_max(sm, &net, "minhop-balanced", &topo, &dir) {
        Ok((m, ms)) => (row.balanced, row.balanced_ms) = (Some(m), ms),
        Err(e) => notes.push(e),
    }
    let osm = Ibsim::start_with(&net, &IbsimOptions { ready_timeout: Duration::from_secs(600), ..Default::default() })
        .map_err(|e| e.to_string())
        .and_then(|sim| {
            let mut opts = OpenSmOptions::new("minhop");
            opts.timeout = Duration::from_secs(600);
            let run = opensm::run(&sim, &opts).map_err(|e| e.to_string())?;
            if !run.success() || !run.asked_engine_routed() {
                return Err(format!("OpenSM: {:?}, routed by {:?}", run.outcome, run.routed_by()));
            }
            let q = quality_of_dump_dir(&topo, run.dump_dir()).map_err(|e| e.to_string())?;
            if !q.all_reachable() {
                return Err(format!("OpenSM reached {} of {} pairs", q.reachable_pairs, q.pairs));
            }
            Ok(q.max_routes_per_link)
        });
    match osm {
        Ok(m) => row.osm = Some(m),
        Err(e) => notes.push(e),
    }
    row.note = notes.join("; ");
    row
}

fn ratio(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => format!("{:.3}", a as f64 / b as f64),
        _ => "-".into(),
    }
}

fn num(v: Option<u64>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

fn section(rows: &[Row], header: &str) -> String {
    let mut md = format!("{BEGIN}\n## Busiest link: OpenSM minhop, smcore minhop, smcore minhop-balanced (default)\n\n{header}\n");
    md.push_str(
        "Routes (end port → end-port LID) on the busiest directed inter-switch link, each counted from the \
         SM's own dumps by the same code (`smcore_tests::lfts::quality_of_dump_dir`); every pair reached \
         over a shortest path on all three. `minhop` is OpenSM's rule; `minhop-balanced` adds the balancing \
         pass and is what smcore routes with by default. Variants: the generator's file; the same nodes in \
         another order (smcore numbers LIDs in file order, OpenSM in discovery order); the same cabling with \
         node GUIDs dealt out again (OpenSM's routing order and GUID ties change). Route ms: smcore's \
         `route` phase.\n\n\
         | fabric | variant | OpenSM | smcore minhop | smcore balanced | minhop / OpenSM | balanced / OpenSM | balanced / minhop | minhop ms | balanced ms | note |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} |\n",
            r.family,
            r.variant,
            num(r.osm),
            num(r.minhop),
            num(r.balanced),
            ratio(r.minhop, r.osm),
            ratio(r.balanced, r.osm),
            ratio(r.balanced, r.minhop),
            r.minhop_ms,
            r.balanced_ms,
            r.note
        ));
    }
    let worst = rows.iter().filter_map(|r| Some(r.balanced? as f64 / r.osm? as f64)).fold(0.0f64, f64::max);
    md.push_str(&format!("\nWorst balanced / OpenSM: {worst:.3} (goal: ≤ 1 on every row).\n{END}\n"));
    md
}

fn write(out: &Path, rows: &[Row], header: &str) -> std::io::Result<()> {
    let old = std::fs::read_to_string(out).unwrap_or_default();
    let new = section(rows, header);
    let text = match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if e > b => format!("{}{}{}", &old[..b], new, old[e + END.len()..].trim_start_matches('\n')),
        _ if old.is_empty() => new,
        _ => format!("{}\n{}", old.trim_end(), new),
    };
    std::fs::write(out, text)
}

fn main() {
    let mut only: Option<Vec<String>> = None;
    let mut out = workspace_root().join("bench/results-minhop.md");
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match (a.as_str(), it.next()) {
            ("--only", Some(v)) => only = Some(v.split(',').map(str::to_string).collect()),
            ("--out", Some(v)) => out = PathBuf::from(v),
            _ => {
                eprintln!("usage: bench_minhop_balance [--only NAME,...] [--out FILE]");
                std::process::exit(2);
            }
        }
    }
    let sm = Smcore::locate(Profile::Release).unwrap_or_else(|e| {
        eprintln!("bench_minhop_balance: {e}");
        std::process::exit(2)
    });
    let work = tempfile::Builder::new().prefix("bench-minhop-balance-").tempdir().unwrap_or_else(|e| {
        eprintln!("bench_minhop_balance: temporary directory: {e}");
        std::process::exit(2)
    });
    let header = format!(
        "Written by `bench/minhop.sh` (`tests/src/bin/bench_minhop_balance.rs`), {}; smcore {} (commit {}); {}.\n",
        sh("date -u '+%Y-%m-%d %H:%M UTC'"),
        sm.bin().display(),
        sh(&format!("git -C {} describe --always --dirty", workspace_root().display())),
        sh("dpkg-query -W -f='opensm ${Version}' opensm"),
    );
    let mut rows = Vec::new();
    for f in FAMILIES {
        if only.as_ref().is_some_and(|o| !o.iter().any(|n| n == f.name)) {
            continue;
        }
        for v in [Variant::Generated, Variant::LidsRenumbered, Variant::GuidsShuffled] {
            let r = bench(&sm, f, v, work.path());
            eprintln!(
                "{:<12} {:<16} OpenSM {:>8} minhop {:>8} balanced {:>8}  balanced/OpenSM {}  {}",
                r.family,
                r.variant,
                num(r.osm),
                num(r.minhop),
                num(r.balanced),
                ratio(r.balanced, r.osm),
                r.note
            );
            rows.push(r);
        }
    }
    if let Err(e) = write(&out, &rows, &header) {
        eprintln!("bench_minhop_balance: writing {}: {e}", out.display());
        std::process::exit(1);
    }
    print!("{}", section(&rows, &header));
}
