//! What an incremental heavy sweep costs on the embedded fabric, against a
//! full one: a host reboot and a spine failure on a k-ary 3-tree.
//!
//! `cargo run --release -p sm-core --example incremental -- [K] [ENGINE] [REBOOTS]`
//! (defaults: 16, `ftree,minhop`, 0; REBOOTS more host reboots at the end
//! give the median of the SM's time for one; the engine libraries are looked for beside the
//! example's directory, where a release build of the workspace puts them).
//! Prints one line per event: SMPs of discovery, SMPs of the whole sweep
//! but the LFT blocks and LinearFDBTops written, those blocks, and the SM's
//! time (discovery to the last Set, then the SA database rebuilt from the
//! sweep; the in-process fabric answers at no cost), then the phase times.

use std::path::PathBuf;
use std::time::Instant;

use sm_abi::NodeKind;
use sm_core::config::Config;
use sm_core::engines::Registry;
use sm_core::sim::{SimFabric, SimPort};
use sm_core::sweep::incremental::{self, Changes};
use sm_core::sweep::light::light_sweep;
use sm_core::pipeline::SweepState;
use sm_core::sweep::stages::Discovered;
use sm_core::sweep::{Guid2Lid, HeldTables, SmpClient, SweepOptions};
use sm_core::pipeline::{OnceOptions, OnceOutcome};
use sm_mad::mad::attr;

struct Sm<'e> {
    sim: SimFabric,
    g2l: Guid2Lid,
    held: HeldTables,
    last: Option<OnceOutcome>,
    registry: Registry,
    options: OnceOptions<'e>,
    /// The unicast cache (OpenSM `use_ucast_cache`): a sweep whose fabric
    /// the last routing still fits verifies it instead of routing.
    cache: Option<sm_core::ucast_cache::UcastCache>,
    /// The SA's database in force, as the daemon's SA holds it.
    db: Option<sm_core::sa::db::SaDb>,
}

impl Sm<'_> {
    fn sweep(&mut self, discovered: Option<Discovered>) -> &OnceOutcome {
        let state = SweepState { guid2lid: &mut self.g2l, held: &mut self.held, cache: Some(&mut self.cache), previous: None };
        let out = sm_core::pipeline::once_from(&mut SimPort::new(&mut self.sim), discovered, &self.options, &self.registry, &Config::default(), state)
            .unwrap_or_else(|e| panic!("sweep: {e}"));
        assert!(out.accepted.is_some(), "routed: {:?}", out.describe());
        self.last = Some(out);
        self.last.as_ref().expect("just set")
    }

    /// Changes named by the traps that reached the SM, and by a light
    /// sweep when none did (with its SMPs).
    fn changes(&mut self) -> (Changes, u64, &'static str) {
        let Sm { sim, last, options, .. } = self;
        let fabric = &last.as_ref().expect("swept").sweep.fabric;
        let mut changes = Changes::default();
        for t in sim.take_traps() {
            changes.add_trap(sm_mad::notice::trap::LINK_STATE_CHANGE, t.slid, Some(fabric));
        }
        if !changes.is_empty() {
            return (changes, 0, "traps");
        }
        let mut port = SimPort::new(sim);
        let mut client = SmpClient::new(&mut port, options.sweep.retries);
        let light = light_sweep(&mut client, fabric);
        changes.add_light(&light);
        (changes, light.smps, "light sweep")
    }

    /// One heavy sweep, incremental when `incremental`; prints its figures.
    fn measure(&mut self, what: &str, incremental: bool) -> f64 {
        let (mut changes, light_smps, how) = if incremental {
            self.changes()
        } else {
            self.sim.take_traps();
            (Changes::default(), 0, "-")
        };
        changes.add_relabelled(&self.last.as_ref().expect("swept").sweep.relabelled);
        self.sim.reset_counters();
        let t = Instant::now();
        let mut discovery = None;
        if incremental {
            // Borrowed apart: a copy of the last fabric is no work of the SM's.
            let Sm { sim, last, options, .. } = self;
            let last = &last.as_ref().expect("swept").sweep.fabric;
            let mut port = SimPort::new(sim);
            let mut client = SmpClient::new(&mut port, options.sweep.retries);
            let t = Instant::now();
            let result = incremental::rediscover(&mut client, last, &changes, &Default::default());
            let discovery_ms = t.elapsed().as_secs_f64() * 1e3;
            match result {
                Ok((fabric, report, walk)) => {
                    println!(
                        "  {what}: {} switches named; read {} nodes, {} probes, {} added, {} dropped, {} rounds, {discovery_ms:.1} ms",
                        changes.switches.len(),
                        walk.nodes_read,
                        walk.probes,
                        walk.added,
                        walk.dropped,
                        walk.rounds
                    );
                    discovery = Some(Discovered::new(fabric, report, client.stats().clone()))
                }
                Err(why) => println!("  {what}: falls back to a full sweep: {why}"),
            }
        }
        let read = discovery.is_some();
        self.sweep(discovery);
        let out = self.last.as_ref().expect("swept");
        // The SA's database is rebuilt after every heavy sweep, from the
        // one in force, as the daemon does: SM work too.
        let sa = Instant::now();
        let db = sm_core::sa::db::SaDb::build_after(out, self.db.as_ref());
        let sa_ms = sa.elapsed().as_secs_f64() * 1e3;
        let took = t.elapsed();
        self.db = Some(db);
        let c = self.sim.counters();
        let sets = |a: u16| c.by_attribute.get(&a).map_or(0, |x| x.set);
        let lft = sets(attr::LINEAR_FORWARDING_TABLE);
        let discovery_smps = out.sweep.discovery_smps.sent;
        let mut phases: Vec<String> = out.report.phases_ms.iter().map(|(k, v)| format!("{k} {v:.1}")).collect();
        let anew = self.db.as_ref().map_or(0, |d| d.nodes_rebuilt());
        phases.push(format!("SA database {sa_ms:.1} ({anew} nodes' records anew)"));
        println!(
            "| {what} | {} | {} | {how} (+{light_smps}) | {discovery_smps} | {} | {lft} | {:.1} | {} |",
            if read { "incremental" } else { "full" },
            out.accepted.as_ref().map_or("-", |a| a.engine.as_str()),
            c.sent - lft,
            took.as_secs_f64() * 1e3,
            phases.join(", ")
        );
        took.as_secs_f64() * 1e3
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let k: usize = args.next().map_or(16, |a| a.parse().expect("K: a number"));
    // ftree refuses a tree with a spine missing: minhop takes over then.
    let engine = args.next().unwrap_or_else(|| "ftree,minhop".to_string());
    // Host reboots repeated at the end, for a median of the SM's time.
    let reboots: usize = args.next().map_or(0, |a| a.parse().expect("REBOOTS: a number"));
    let exe = std::env::current_exe().expect("own path");
    let dir: PathBuf = exe.parent().and_then(|d| d.parent()).expect("target directory").to_path_buf();
    let registry = Registry::scan(&[dir]);
    let topo = sm_topology::gen::kary_ntree(k, 3, k).expect("tree");
    let (sm_node, sm_port) = topo
        .nodes
        .iter()
        .position(|n| n.kind == NodeKind::Ca)
        .map(|i| (i, 1u8))
        .expect("a host");
    let sim = SimFabric::from_topology(&topo, sm_node, sm_port).expect("sim");
    let engines: &'static str = Box::leak(engine.clone().into_boxed_str());
    let options = OnceOptions { sweep: SweepOptions::default(), engines, dump_dir: None };
    let mut sm = Sm { sim, g2l: Guid2Lid::default(), held: HeldTables::default(), last: None, registry, options, cache: None, db: None };
    let switches = topo.nodes.iter().filter(|n| n.kind == NodeKind::Switch).count();
    println!("{k}-ary 3-tree: {switches} switches, {} hosts, {engine}", topo.nodes.len() - switches);
    println!();
    println!("| event | sweep | engine | changes from (+ light sweep SMPs) | discovery SMPs | SMPs but LFT blocks | LFT blocks | SM ms | phases ms |");
    println!("|---|---|---|---|---:|---:|---:|---:|---|");
    let t = Instant::now();
    sm.sweep(None);
    println!("| first sweep | full | - | - | {} | - | - | {:.1} | - |", sm.last.as_ref().map_or(0, |o| o.sweep.discovery_smps.sent), t.elapsed().as_secs_f64() * 1e3);
    // The LIDs the first sweep gave are read back by a full one.
    sm.measure("nothing changed", false);
    // A host in the middle, not the SM's: not the highest LID either
    // (whose going lowers every switch's LinearFDBTop).
    let hosts: Vec<usize> = (0..topo.nodes.len()).filter(|&i| topo.nodes[i].kind == NodeKind::Ca && i != sm_node).collect();
    let host = hosts[hosts.len() / 2];
    for incremental in [false, true] {
        sm.sim.remove_node(host).expect("off");
        sm.measure("host off", incremental);
        sm.sim.restore_node(host).expect("on");
        sm.measure("host back", incremental);
        sm.sim.remove_node(host).expect("off");
        sm.sim.restore_node(host).expect("on");
        sm.measure("host rebooted between sweeps", incremental);
    }
    let spine = topo.nodes.iter().position(|n| n.desc.starts_with("spine")).expect("a spine");
    for incremental in [false, true] {
        sm.sim.remove_node(spine).expect("off");
        sm.measure("spine off", incremental);
        sm.sim.restore_node(spine).expect("on");
        sm.measure("spine back", incremental);
    }
    if reboots > 0 {
        let mut took: Vec<f64> = (0..reboots)
            .map(|_| {
                sm.sim.remove_node(host).expect("off");
                sm.sim.restore_node(host).expect("on");
                sm.measure("host rebooted between sweeps", true)
            })
            .collect();
        took.sort_by(f64::total_cmp);
        println!();
        println!(
            "host reboot, incremental, {reboots} runs: SM ms min {:.1}, median {:.1}, max {:.1}",
            took[0],
            took[reboots / 2],
            took[reboots - 1]
        );
    }
}
