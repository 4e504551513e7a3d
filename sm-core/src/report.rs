//! The route report: a human summary and the same figures as JSON.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use sm_abi::{FabricSnapshot, NodeKind};

use crate::engines::chain::ChainOutcome;

/// One engine of the chain.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptReport {
    /// Engine name.
    pub engine: String,
    /// `routed` or `failed`.
    pub outcome: String,
    /// Why it failed.
    pub reason: Option<String>,
    /// Time in the engine, ms.
    pub route_ms: f64,
    /// Time verifying, ms.
    pub verify_ms: f64,
}

/// Everything `smcore route` measured.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RouteReport {
    /// Topology file.
    pub topology: String,
    /// Engine that routed (None: nothing routed).
    pub engine: Option<String>,
    /// Chain, in order.
    pub attempts: Vec<AttemptReport>,
    /// Switch count.
    pub switches: usize,
    /// CA and router nodes.
    pub end_nodes: usize,
    /// End ports with LIDs.
    pub end_ports: usize,
    /// LIDs in use (highest LID).
    pub max_lid: u16,
    /// LMC.
    pub lmc: u8,
    /// Links by width and lane speed as infiniband-diags name them, with
    /// their rate (`4X NDR (400 Gb/s)`), each link counted once.
    pub links: BTreeMap<String, usize>,
    /// (source end port, destination LID) pairs checked.
    pub pairs: u64,
    /// Pairs routed to their destination.
    pub reachable_pairs: u64,
    /// Pairs in forwarding loops.
    pub looping_pairs: u64,
    /// Credit loops found (None: not checked or nothing routed).
    pub credit_loops: Option<bool>,
    /// One example cycle.
    pub credit_loop_example: Option<String>,
    /// VLs the routing uses.
    pub vls_used: u8,
    /// Max end-to-end routes over one directed inter-switch link.
    pub max_routes_per_link: u64,
    /// Mean of the same.
    pub mean_routes_per_link: f64,
    /// Mean hops (links) per routed pair.
    pub avg_hops: f64,
    /// Mean extra hops over the shortest path.
    pub avg_extra_hops: f64,
    /// Routed pairs longer than the shortest path.
    pub non_minimal_pairs: u64,
    /// Destinations whose per-path-SL walk the verifier took over from
    /// another destination of their switch instead of walking it again.
    pub walks_shared: u64,
    /// The unicast cache's routing was taken with the verification it
    /// passed, on the very fabric it was judged on (nothing verified again).
    pub verification_reused: bool,
    /// Time per phase, ms.
    pub phases_ms: BTreeMap<String, f64>,
    /// Peak resident memory of the process, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Peak resident set size of the largest engine host process, MiB
    /// (`None`: engines ran inline).
    pub engine_host_peak_rss_mib: Option<f64>,
    /// The SMP window of the SM's port since it was opened (None offline
    /// and on the embedded fabric, which answers at once).
    pub smp_window: Option<sm_transport::window::WindowStats>,
    /// Dump files written.
    pub dumps: Vec<String>,
}

impl RouteReport {
    /// Fill the fabric and routing figures.
    pub fn fill(&mut self, fabric: &FabricSnapshot, outcome: &ChainOutcome) {
        self.switches = fabric.nodes.iter().filter(|n| n.kind == NodeKind::Switch).count();
        self.end_nodes = fabric.nodes.len() - self.switches;
        self.end_ports = fabric.end_ports().count();
        self.max_lid = fabric.max_lid;
        self.lmc = fabric.lmc;
        self.links = link_names(fabric);
        self.attempts = outcome
            .attempts
            .iter()
            .map(|a| AttemptReport {
                engine: a.engine.clone(),
                outcome: if a.failure.is_none() { "routed".into() } else { "failed".into() },
                reason: a.failure.as_ref().map(|f| f.to_string()),
                route_ms: a.route_time.as_secs_f64() * 1e3,
                verify_ms: a.verify_time.as_secs_f64() * 1e3,
            })
            .collect();
        if let Some(r) = &outcome.routed {
            let v = &r.verification;
            self.engine = Some(r.engine.clone());
            self.pairs = v.pairs;
            self.reachable_pairs = v.pairs - v.unreachable - v.looping;
            self.looping_pairs = v.looping;
            self.credit_loops = v.credit_loops_checked.then_some(v.credit_loop.is_some());
            self.credit_loop_example =
                v.credit_loop.as_ref().map(|c| smcore_kit::verify::describe_cycle(fabric, &c.cycle));
            self.vls_used = v.vls_used.max(r.routing.vls_used);
            let (max, mean) = v.inter_switch_load(fabric);
            self.max_routes_per_link = max;
            self.mean_routes_per_link = mean;
            self.avg_hops = v.avg_hops();
            let routed = self.reachable_pairs.max(1) as f64;
            self.avg_extra_hops = (v.total_hops - v.total_min_hops) as f64 / routed;
            self.non_minimal_pairs = v.non_minimal;
            self.walks_shared = v.walks_shared;
        }
    }

    /// Record a phase time.
    pub fn phase(&mut self, name: &str, d: std::time::Duration) {
        *self.phases_ms.entry(name.to_string()).or_default() += d.as_secs_f64() * 1e3;
    }
}

/// Peak resident set size of the largest child process this process
/// waited for (the engine hosts), MiB; `None` before any.
pub fn children_peak_rss_mib() -> Option<f64> {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).ok()?;
    // Linux gives ru_maxrss in KiB.
    let kib = usage.max_rss();
    (kib > 0).then(|| kib as f64 / 1024.0)
}

/// Every link of `fabric` (counted at the end with the lower port index)
/// by its name and rate.
pub fn link_names(fabric: &FabricSnapshot) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (i, p) in fabric.ports.iter().enumerate() {
        if !p.is_linked() || (p.peer as usize) < i {
            continue;
        }
        let lane = sm_mad::speed::LaneSpeed::from_units(p.speed);
        let rate = sm_mad::speed::gbps(sm_mad::speed::link_rate(p.width, lane));
        *out.entry(format!("{} ({rate} Gb/s)", sm_mad::speed::link_name(p.width, lane))).or_default() += 1;
    }
    out
}

/// Peak resident set size of this process (Linux), MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

impl fmt::Display for RouteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "topology      {}", self.topology)?;
        writeln!(
            f,
            "fabric        {} switches, {} end nodes, {} end ports, max LID {}, LMC {}",
            self.switches, self.end_nodes, self.end_ports, self.max_lid, self.lmc
        )?;
        if !self.links.is_empty() {
            let links: Vec<String> = self.links.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            writeln!(f, "links         {}", links.join(", "))?;
        }
        for a in &self.attempts {
            match &a.reason {
                None => writeln!(f, "engine        {}: routed in {:.1} ms (verified in {:.1} ms)", a.engine, a.route_ms, a.verify_ms)?,
                Some(r) => writeln!(f, "engine        {}: {r}", a.engine)?,
            }
        }
        match &self.engine {
            None => writeln!(f, "result        NOT ROUTED: no engine produced an acceptable routing")?,
            Some(e) => {
                writeln!(f, "result        routed by {e}")?;
                writeln!(f, "reachable     {} of {} pairs", self.reachable_pairs, self.pairs)?;
                let cl = match (self.credit_loops, &self.credit_loop_example) {
                    (None, _) => "not checked".to_string(),
                    (Some(false), _) => "none (deadlock free)".to_string(),
                    (Some(true), Some(ex)) => format!("PRESENT: {ex}"),
                    (Some(true), None) => "PRESENT".to_string(),
                };
                writeln!(f, "credit loops  {cl}")?;
                writeln!(f, "VLs used      {}", self.vls_used)?;
                writeln!(
                    f,
                    "link load     max {} / mean {:.1} routes per inter-switch link",
                    self.max_routes_per_link, self.mean_routes_per_link
                )?;
                writeln!(
                    f,
                    "hops          mean {:.3}, mean extra over shortest {:.3}, {} non-minimal pairs",
                    self.avg_hops, self.avg_extra_hops, self.non_minimal_pairs
                )?;
            }
        }
        let phases: Vec<String> = self.phases_ms.iter().map(|(k, v)| format!("{k} {v:.1} ms")).collect();
        writeln!(f, "time          {}", phases.join(", "))?;
        if let Some(m) = self.peak_rss_mib {
            match self.engine_host_peak_rss_mib {
                Some(h) => writeln!(f, "peak memory   {m:.1} MiB (engine host {h:.1} MiB)")?,
                None => writeln!(f, "peak memory   {m:.1} MiB")?,
            }
        }
        if let Some(w) = self.smp_window {
            writeln!(
                f,
                "SMP window    {} now (limit {}, peak {}{}, {} cut{} after timeouts)",
                w.size,
                w.limit,
                w.peak,
                w.low.map(|l| format!(", low {l}")).unwrap_or_default(),
                w.cuts,
                if w.cuts == 1 { "" } else { "s" }
            )?;
        }
        if !self.dumps.is_empty() {
            writeln!(f, "dumps         {}", self.dumps.join(" "))?;
        }
        Ok(())
    }
}
