//! smcore routing engine: Nue, deadlock-free routing inside the complete
//! channel dependency graph (Domke, Hoefler, Matsuoka, HPDC 2016; OpenSM's
//! `nue`).
//!
//! # Algorithm
//!
//! Other VL-based engines route first and break credit loops afterwards,
//! which can need more VLs than the fabric has. Nue instead decides every
//! turn against the channel dependency graph (CDG) while routing, so it
//! never needs more virtual layers than it is given — one suffices.
//!
//! 1. **Layers.** The destination LIDs are split into `k` subsets, one per
//!    virtual layer (`k` = `nue_max_num_vls`, or the operational VLs). The
//!    split is per destination switch and keeps each subset compact and the
//!    subsets balanced ([`partition`]); a destination's path SL is its layer,
//!    and SL2VL maps SL *i* to VL *i* on every port, so the layers' CDGs are
//!    disjoint.
//! 2. **Escape paths.** Per layer, a spanning tree of the switches is rooted
//!    at a central switch of the layer's destinations (least total hop
//!    distance to up to 32 of their switches) and grown by Dijkstra on the current link weights,
//!    so layers get different trees. The turns of the tree paths towards
//!    the layer's destination switches are marked used at once: every turn
//!    up towards the root, and every turn into a tree channel that leads
//!    down into a subtree holding a destination (as OpenSM marks its escape
//!    paths). On a tree a walk without U-turns can never come back, so
//!    these turns are acyclic, and routing any of the layer's destinations
//!    purely along the tree only needs them. The other tree turns are left
//!    free: fixed in advance they block short routes no escape path needs
//!    (a pod-sized layer of a fat tree gets its root below the top, and
//!    its tree's down-then-up turns used to push most routes onto a few
//!    links: 16-ary 3-tree, 8 VLs, peak 36,960 routes per link against a
//!    mean of 3,960; now 6,656).
//! 3. **Routing in the CDG.** For each destination of the layer, a
//!    Dijkstra-like search grows the destination's sink tree backwards over
//!    channels: a switch `u` joins through channel `u→v` only if the turn
//!    from `u→v` into `v`'s already chosen channel is used or can be used
//!    without closing a cycle among the layer's used turns ([`cdg::Layer`]
//!    keeps a topological order of the channels incrementally, so most
//!    checks are one comparison). Turns that would close a cycle are blocked
//!    for the rest of the layer (unless the attempt that met them is
//!    withdrawn, see 4). Channel weights are `D²` (`D` = destination
//!    LIDs) plus the routes already placed on the link, so paths are short
//!    first and balanced second; after each destination the weights grow by
//!    the number of sources routed over each link. Equal distances are
//!    served first come, first served, which grows the sink trees
//!    breadth-first. All layers are routed together, destinations
//!    interleaved in LID order, so every layer sees the load of the others.
//! 4. **Impasse.** If the search cannot attach a switch that has sources,
//!    the destination's new turns are withdrawn, the unattached switches
//!    are pinned to their escape path (with every switch on it), and the
//!    search runs again around the pinned part; the pinned set only grows,
//!    and in the worst case the whole destination follows the escape tree,
//!    whose turns are already in the acyclic set. So every pair is
//!    reachable and the used turns of each layer stay acyclic by
//!    construction, on any topology, with any number of layers ≥ 1.
//!
//! Switch LIDs are data destinations only with `nue_include_switches`;
//! otherwise (OpenSM's default) they get plain weighted shortest paths on
//! SL 0, outside the deadlock-freedom argument, as in OpenSM. With LMC > 0
//! every LID of a port is a destination of its own, so the weight updates
//! spread a port's LIDs over different paths.
//!
//! Differences from OpenSM's implementation: the partitioner is a balanced
//! region-growing one instead of METIS (see [`partition`] for why), the
//! layer root is the switch of least total distance to the layer's
//! destinations instead of Brandes' betweenness centre of their convex
//! hull, and an impasse pins escape paths instead of OpenSM's local
//! backtracking.
//!
//! # Options (OpenSM names)
//!
//! * `nue_max_num_vls` — layers/VLs Nue may use (default 1, as OpenSM's):
//!   `0` = the operational VLs
//!   (the least `op_vls` over all linked ports, at most 8), `1` = no VLs
//!   needed at all, `2..=15` = at most that many (capped, with a warning, at
//!   the operational VLs; VLs left over are free for QoS).
//! * `nue_include_switches` — route towards switch LIDs inside the layers
//!   too (deadlock-free switch traffic).
//! * `nue_partition` (smcore only) — `"grown"` (default) or `"round_robin"`.

use std::cmp::Reverse;

use abi_stable::std_types::{RArc, ROption};
use sm_abi::{
    path_sl_box, EngineError, FabricSnapshot, Level, Lft, PathSl, Routing, RoutingEngine, Sl2Vl,
    SlTable, NONE, NO_ROUTE,
};
use smcore_kit::graph::{Graph, Sw};

pub mod cdg;
pub mod partition;

use cdg::{Ch, Channels, Layer, Queue, BLOCKED, UNKNOWN, USED};
pub use partition::Partitioner;

/// Most VLs auto detection hands to Nue.
pub const AUTO_VL_CAP: u8 = 8;

/// Nue options, named as OpenSM's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NueConfig {
    /// `nue_max_num_vls`: 0 = auto, else 1..=15. Default 1, as OpenSM:
    /// deadlock-free without any SL2VL setup or SL-aware applications.
    pub max_num_vls: u8,
    /// `nue_include_switches`.
    pub include_switches: bool,
    /// `nue_partition`.
    pub partitioner: Partitioner,
}

impl Default for NueConfig {
    fn default() -> Self {
        NueConfig {
            max_num_vls: 1,
            include_switches: false,
            partitioner: Partitioner::Grown,
        }
    }
}

impl NueConfig {
    /// Parse the engine's TOML text. Unknown keys belong to other layers
    /// and are ignored; bad values of Nue's keys are errors naming them.
    pub fn parse(text: &str) -> Result<NueConfig, EngineError> {
        let table: toml::Table = toml::from_str(text)
            .map_err(|e| EngineError::new(format!("nue: bad configuration: {}", e.message())))?;
        let mut cfg = NueConfig::default();
        if let Some(v) = table.get("nue_max_num_vls") {
            let n = v.as_integer().ok_or_else(|| {
                EngineError::new(format!(
                    "nue: nue_max_num_vls must be an integer 0..=15 (0 = the operational VLs), not {v}"
                ))
            })?;
            if !(0..=15).contains(&n) {
                return Err(EngineError::new(format!(
                    "nue: nue_max_num_vls = {n} is out of range: use 0 (the operational VLs) or 1..=15"
                )));
            }
            cfg.max_num_vls = n as u8;
        }
        if let Some(v) = table.get("nue_include_switches") {
            cfg.include_switches = v.as_bool().ok_or_else(|| {
                EngineError::new(format!(
                    "nue: nue_include_switches must be true or false, not {v}"
                ))
            })?;
        }
        if let Some(v) = table.get("nue_partition") {
            cfg.partitioner = match v.as_str() {
                Some("grown") => Partitioner::Grown,
                Some("round_robin") => Partitioner::RoundRobin,
                _ => {
                    return Err(EngineError::new(format!(
                        "nue: nue_partition must be \"grown\" or \"round_robin\", not {v}"
                    )))
                }
            };
        }
        Ok(cfg)
    }
}

/// The Nue engine.
#[derive(Debug, Clone, Default)]
pub struct Nue {
    /// Options.
    pub cfg: NueConfig,
}

impl Nue {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<Nue, EngineError> {
        Ok(Nue {
            cfg: NueConfig::parse(text)?,
        })
    }

    /// Build from options.
    pub fn new(cfg: NueConfig) -> Nue {
        Nue { cfg }
    }
}

/// Path SL = layer of the destination LID.
#[derive(Debug, Clone)]
pub struct LayerSl {
    /// Layer per destination LID (index = LID).
    pub layer: Vec<u8>,
    /// Layers in use.
    pub layers: u8,
}

impl PathSl for LayerSl {
    fn uniform(&self) -> ROption<u8> {
        if self.layers <= 1 {
            ROption::RSome(0)
        } else {
            ROption::RNone
        }
    }
    fn path_sl(&self, _slid: u16, dlid: u16) -> u8 {
        self.layer.get(dlid as usize).copied().unwrap_or(0)
    }

    /// A class per layer: every source gives the destination's layer.
    fn sl_table(&self) -> ROption<RArc<SlTable>> {
        if self.layers <= 1 {
            return ROption::RNone;
        }
        let n = self.layer.iter().map(|&l| l as usize + 1).max().unwrap_or(1);
        let sl: Vec<u8> = (0..n * n).map(|i| (i / n) as u8).collect();
        ROption::RSome(RArc::new(SlTable { class_of: self.layer.iter().map(|&l| l as u32).collect(), classes: n as u32, sl: sl.into() }))
    }
}

/// Figures of one routing run, also reported as diagnostics.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Operational VLs of the fabric (least op_vls over linked ports).
    pub operational_vls: u8,
    /// Layers routed.
    pub layers: usize,
    /// Destination LIDs per layer.
    pub layer_sizes: Vec<usize>,
    /// Destinations whose search reached an impasse and was repaired by
    /// pinning switches to the escape tree.
    pub repaired: usize,
    /// Switches pinned to the escape tree, summed over destinations.
    pub pinned: u64,
    /// Turns blocked because they would have closed a cycle.
    pub blocked: u64,
    /// Order-window searches of the incremental cycle check.
    pub searches: u64,
    /// Channels those searches visited.
    pub visited: u64,
}

impl RoutingEngine for Nue {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        self.route_with_stats(fabric).map(|(r, _)| r)
    }

    /// Continuity (sm-abi 1.3): an entry stays while its port is healthy, broken
    /// ones take Nue's own port; merged tables that loop, leave a pair
    /// unreachable or close a credit loop on Nue's layers give way to the
    /// fresh routing.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &sm_abi::PreviousRouting) -> Result<Routing, EngineError> {
        use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::Healthy, &ContinuityOptions { deadlock_free: true, take_fresh: true, ..ContinuityOptions::default() }, "nue"))
    }
}

/// One destination LID.
#[derive(Debug, Clone, Copy)]
struct Dest {
    lid: u16,
    sw: Sw,
    /// Port of `sw` that delivers it (0 for the switch's own LID).
    port: u8,
}

const FREE: u32 = u32::MAX;
/// `route` value of the destination switch itself.
const SINK: u32 = u32::MAX - 1;

impl Nue {
    /// Route and return the run's figures as well.
    pub fn route_with_stats(
        &self,
        fabric: &FabricSnapshot,
    ) -> Result<(Routing, Stats), EngineError> {
        let graph = Graph::new(fabric);
        let n = graph.switch_count();
        if n == 0 {
            return Err(EngineError::new("nue: the fabric has no switches"));
        }
        let mut notes: Vec<(Level, String)> = Vec::new();
        let mut stats = Stats::default();

        // Operational VLs: the least over linked ports that report some.
        let operational = fabric
            .ports
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                p.num != 0 && smcore_kit::graph::usable(fabric, *i as u32) && p.op_vls > 0
            })
            .map(|(_, p)| p.op_vls)
            .min()
            .unwrap_or(1)
            .clamp(1, 15);
        stats.operational_vls = operational;
        let k = match self.cfg.max_num_vls {
            0 => operational.min(AUTO_VL_CAP),
            v if v > operational => {
                notes.push((
                    Level::Warn,
                    format!(
                        "nue: nue_max_num_vls = {v} exceeds the {operational} operational VLs of the fabric; using {operational}"
                    ),
                ));
                operational
            }
            v => v,
        } as usize;

        let ctx = Ctx::new(fabric, &graph, self.cfg.include_switches);
        let mut run = Run::new(&ctx);

        // Destinations: every LID of every end port (and of every switch
        // when switches are traffic sinks), with its switch and port.
        let mut dests = Vec::new();
        let lids = graph.lid_port.len() as u32;
        for &p in &graph.end_ports {
            let port = &fabric.ports[p as usize];
            let sw = graph.entry_switch(fabric, p);
            if sw == NONE {
                continue;
            }
            let out = fabric.ports[port.peer as usize].num;
            // LIDs beyond max_lid have no LFT entry (the snapshot is
            // inconsistent there); they are left out rather than indexed.
            for l in port.lid as u32..(port.lid as u32 + port.lid_count()).min(lids) {
                dests.push(Dest {
                    lid: l as u16,
                    sw,
                    port: out,
                });
            }
        }
        let ca_dests = dests.len();
        let mut sw_dests = Vec::new();
        for s in 0..n as Sw {
            let p0 = &fabric.ports
                [fabric.nodes[graph.switch_nodes[s as usize] as usize].first_port as usize];
            for l in p0.lid as u32..(p0.lid as u32 + p0.lid_count()).min(lids) {
                sw_dests.push(Dest {
                    lid: l as u16,
                    sw: s,
                    port: 0,
                });
            }
        }
        if self.cfg.include_switches {
            dests.extend(sw_dests.iter().copied());
        }

        let mut weights = vec![0u64; n];
        for d in &dests {
            weights[d.sw as usize] += 1;
        }
        let (part, layers) = partition::partition(&graph, &weights, k, self.cfg.partitioner);
        stats.layers = layers;
        let total = dests.len() as u64;
        run.w0 = (total * total).max(1);

        let mut by_layer: Vec<Vec<Dest>> = vec![Vec::new(); layers];
        for d in &dests {
            by_layer[part[d.sw as usize] as usize].push(*d);
        }
        stats.layer_sizes = by_layer.iter().map(|v| v.len()).collect();
        let mut sl_of = vec![0u8; fabric.max_lid as usize + 1];
        // All layers are routed together, destinations interleaved in
        // OpenSM's order (CA LIDs first, then switch LIDs, each by LID):
        // the link weights are shared, and letting every layer see the load
        // the others placed so far balances better than routing one layer
        // after the other (measured on tori: lower peak link load).
        let mut states = Vec::with_capacity(layers);
        for ds in by_layer.iter() {
            if ds.is_empty() {
                states.push(None);
                continue;
            }
            let mut layer = Layer::new(&ctx.ch);
            let tree = run.escape_tree(&ctx, ds);
            run.mark_escape(&ctx, &tree, &mut layer)?;
            states.push(Some((layer, tree)));
        }
        let mut order: Vec<(Dest, u8)> = dests.iter().map(|d| (*d, part[d.sw as usize])).collect();
        order.sort_by_key(|(d, _)| (d.port == 0, d.lid));
        for (d, l) in &order {
            let Some((layer, tree)) = states[*l as usize].as_mut() else {
                continue;
            };
            let pinned = run.route_dest(&ctx, layer, tree, d.sw);
            if pinned > 0 {
                stats.repaired += 1;
                stats.pinned += pinned as u64;
            }
            run.commit(&ctx, d, true);
            if let Some(slot) = sl_of.get_mut(d.lid as usize) {
                *slot = *l;
            }
        }
        for (layer, _) in states.iter().flatten() {
            stats.blocked += layer.status.iter().filter(|&&s| s == BLOCKED).count() as u64;
            stats.searches += layer.searches();
            stats.visited += layer.visited();
        }
        if !self.cfg.include_switches {
            for d in &sw_dests {
                run.route_plain(&ctx, d.sw);
                run.commit(&ctx, d, false);
            }
        }

        let lfts: Vec<Lft> = run
            .lft
            .into_iter()
            .enumerate()
            .map(|(s, ports)| Lft {
                node: graph.switch_nodes[s],
                ports: ports.into(),
            })
            .collect();
        let mut routing = Routing::single_vl(lfts);
        routing.vls_used = layers as u8;
        if layers > 1 {
            routing.path_sl = path_sl_box(LayerSl {
                layer: sl_of,
                layers: layers as u8,
            });
            routing.sl2vl = sl2vl_one_to_one(fabric, operational).into();
        }
        notes.push((
            Level::Info,
            format!(
                "nue: {} destination LIDs ({} of CAs) in {} virtual layer(s) of sizes {:?} ({} operational VLs); \
                 {} repaired after an impasse by pinning {} switch routes to the escape tree; {} turns blocked",
                dests.len(),
                ca_dests,
                layers,
                stats.layer_sizes,
                operational,
                stats.repaired,
                stats.pinned,
                stats.blocked
            ),
        ));
        for (level, m) in notes {
            routing.diag(level, m);
        }
        Ok((routing, stats))
    }
}

/// SL *i* → VL *i mod operational* on every switch port pair and CA port:
/// the layers stay apart and SLs beyond them remain usable for QoS.
fn sl2vl_one_to_one(fabric: &FabricSnapshot, operational: u8) -> Vec<Sl2Vl> {
    let mut vl = [0u8; 16];
    for (sl, v) in vl.iter_mut().enumerate() {
        *v = (sl as u8) % operational.max(1);
    }
    let mut out = Vec::new();
    for (i, node) in fabric.nodes.iter().enumerate() {
        if node.kind.is_end_node() {
            for p in 1..=node.num_ports {
                let pi = node.first_port + p as u32;
                if fabric.ports.get(pi as usize).is_some_and(|x| x.is_linked()) {
                    out.push(Sl2Vl {
                        node: i as u32,
                        in_port: 0,
                        out_port: p,
                        vl,
                    });
                }
            }
        } else {
            for ip in 0..=node.num_ports {
                for op in 1..=node.num_ports {
                    if ip != op {
                        out.push(Sl2Vl {
                            node: i as u32,
                            in_port: ip,
                            out_port: op,
                            vl,
                        });
                    }
                }
            }
        }
    }
    out
}

/// Read-only facts about the fabric.
struct Ctx<'a> {
    graph: &'a Graph,
    ch: Channels,
    /// Traffic sources per switch: attached end ports (+1 for the switch
    /// itself when switches are sinks and sources).
    sources: Vec<u64>,
    /// Connected component per switch.
    comp: Vec<u32>,
    /// Switches per component.
    comp_size: Vec<usize>,
    /// Whether a switch's routes must be deadlock-free (it has sources).
    needed: Vec<bool>,
    /// Per channel, the switch ports that realise it.
    ports_of: Vec<Vec<(u8, u32)>>,
    /// Ports in the snapshot.
    nports: usize,
}

impl<'a> Ctx<'a> {
    fn new(fabric: &FabricSnapshot, graph: &'a Graph, include_switches: bool) -> Ctx<'a> {
        let n = graph.switch_count();
        let ch = Channels::new(graph);
        let mut sources = vec![include_switches as u64; n];
        for &p in &graph.end_ports {
            let s = graph.entry_switch(fabric, p);
            if s != NONE {
                sources[s as usize] += 1;
            }
        }
        let needed = sources.iter().map(|&c| c > 0).collect();
        let mut comp = vec![NONE; n];
        let mut dist = vec![0u8; n];
        let mut queue = Vec::new();
        let mut c = 0;
        let mut comp_size = Vec::new();
        for s in 0..n {
            if comp[s] == NONE {
                graph.bfs(s as Sw, &mut dist, &mut queue);
                for &t in &queue {
                    comp[t as usize] = c;
                }
                comp_size.push(queue.len());
                c += 1;
            }
        }
        let mut ports_of = vec![Vec::new(); ch.len()];
        for u in 0..n {
            for sp in &graph.sw_ports[u] {
                if sp.peer_sw == NONE {
                    continue;
                }
                if let Some(c) = ch.find(u as Sw, sp.peer_sw) {
                    ports_of[c as usize].push((sp.port, sp.port_index));
                }
            }
        }
        Ctx {
            graph,
            ch,
            sources,
            comp,
            comp_size,
            needed,
            ports_of,
            nports: fabric.ports.len(),
        }
    }
}

/// Mutable routing state.
struct Run {
    n: usize,
    w0: u64,
    chan_load: Vec<u64>,
    port_load: Vec<u64>,
    lft: Vec<Vec<u8>>,
    // Per destination scratch.
    route: Vec<u32>,
    dist: Vec<u64>,
    order: Vec<Sw>,
    /// Keys are weighted distances; ties are served first in, first out.
    heap: Queue,
    touched: Vec<(Ch, Ch)>,
    sub: Vec<u64>,
    /// Per switch, its best queued offer in the current search.
    best: Vec<u64>,
    /// Per channel, the search (stamp) that queued it last.
    pushed: Vec<u32>,
    stamp: u32,
    pinned: Vec<bool>,
    tnext: Vec<u32>,
    tdist: Vec<u64>,
    torder: Vec<Sw>,
    hop: Vec<u8>,
    queue: Vec<Sw>,
}

/// Escape spanning forest of one layer.
struct Tree {
    /// Channel order in which the tree's turns are all forward.
    order: Vec<Ch>,
    /// Tree channels leaving each switch (CSR).
    start: Vec<u32>,
    chans: Vec<Ch>,
    /// Per switch, whether it or a switch below it (away from the root)
    /// attaches one of the layer's destinations.
    serves: Vec<bool>,
    /// Per switch, its tree channel towards the root (`NONE` at a root).
    up: Vec<Ch>,
}

impl Run {
    fn new(ctx: &Ctx) -> Run {
        let n = ctx.graph.switch_count();
        let max_lid = ctx.graph.lid_port.len();
        Run {
            n,
            w0: 1,
            chan_load: vec![0; ctx.ch.len()],
            port_load: vec![0; ctx.nports],
            lft: (0..n).map(|_| vec![NO_ROUTE; max_lid]).collect(),
            route: vec![FREE; n],
            dist: vec![u64::MAX; n],
            order: Vec::with_capacity(n),
            heap: Queue::default(),
            touched: Vec::new(),
            sub: vec![0; n],
            best: vec![u64::MAX; n],
            pushed: vec![0; ctx.ch.len()],
            stamp: 0,
            pinned: vec![false; n],
            tnext: vec![FREE; n],
            tdist: vec![0; n],
            torder: Vec::with_capacity(n),
            hop: vec![0; n],
            queue: Vec::new(),
        }
    }

    #[inline]
    fn weight(&self, c: Ch) -> u64 {
        self.w0 + self.chan_load[c as usize]
    }

    /// Spanning forest rooted, per component, at the switch with the least
    /// total hop distance to (a sample of) the layer's destination switches,
    /// grown by Dijkstra on the current weights.
    fn escape_tree(&mut self, ctx: &Ctx, ds: &[Dest]) -> Tree {
        let n = self.n;
        let g = ctx.graph;
        let mut dsw: Vec<Sw> = ds.iter().map(|d| d.sw).collect();
        dsw.sort_unstable();
        dsw.dedup();
        const SAMPLES: usize = 32;
        let stride = dsw.len().div_ceil(SAMPLES).max(1);
        let mut sum = vec![0u64; n];
        let mut hits = vec![0u32; n];
        for &s in dsw.iter().step_by(stride) {
            g.bfs(s, &mut self.hop, &mut self.queue);
            for &t in &self.queue {
                sum[t as usize] += self.hop[t as usize] as u64;
                hits[t as usize] += 1;
            }
        }
        let comps = ctx.comp.iter().copied().max().map_or(0, |c| c as usize + 1);
        let mut root = vec![NONE; comps];
        for s in 0..n {
            let c = ctx.comp[s] as usize;
            let better = match root[c] {
                NONE => true,
                r => (Reverse(hits[s]), sum[s]) < (Reverse(hits[r as usize]), sum[r as usize]),
            };
            if better {
                root[c] = s as Sw;
            }
        }
        let mut up = vec![NONE; n];
        self.dist.fill(u64::MAX);
        self.heap.clear();
        let mut done = vec![false; n];
        let mut settled = Vec::with_capacity(n);
        for &r in &root {
            self.dist[r as usize] = 0;
            self.heap.push(0, r);
        }
        while let Some((d, u)) = self.heap.pop() {
            if done[u as usize] {
                continue;
            }
            done[u as usize] = true;
            settled.push(u);
            for c in ctx.ch.out(u) {
                let v = ctx.ch.head[c as usize];
                let nd = d + self.weight(c) + self.chan_load[ctx.ch.rev[c as usize] as usize];
                if !done[v as usize] && nd < self.dist[v as usize] {
                    self.dist[v as usize] = nd;
                    up[v as usize] = ctx.ch.rev[c as usize];
                    self.heap.push(nd, v);
                }
            }
        }
        let mut start = vec![0u32; n + 1];
        for v in 0..n {
            if up[v] != NONE {
                start[v + 1] += 1;
                start[ctx.ch.head[up[v] as usize] as usize + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut chans = vec![0; start[n] as usize];
        for v in 0..n {
            let c = up[v];
            if c != NONE {
                let p = ctx.ch.head[c as usize] as usize;
                chans[fill[v] as usize] = c;
                fill[v] += 1;
                chans[fill[p] as usize] = ctx.ch.rev[c as usize];
                fill[p] += 1;
            }
        }
        // A channel order under which every tree turn goes forward: up
        // channels from the deepest switches first, then the rest, then
        // down channels from the roots outwards.
        let mut in_tree = vec![false; ctx.ch.len()];
        let mut order = Vec::with_capacity(ctx.ch.len());
        for &v in settled.iter().rev() {
            let c = up[v as usize];
            if c != NONE {
                order.push(c);
                in_tree[c as usize] = true;
                in_tree[ctx.ch.rev[c as usize] as usize] = true;
            }
        }
        order.extend((0..ctx.ch.len() as Ch).filter(|&c| !in_tree[c as usize]));
        for &v in &settled {
            let c = up[v as usize];
            if c != NONE {
                order.push(ctx.ch.rev[c as usize]);
            }
        }
        // Escape paths only ever lead towards the layer's destinations, so
        // a tree channel away from the root is needed only into a subtree
        // that holds one of them.
        let mut serves = vec![false; n];
        for &s in &dsw {
            serves[s as usize] = true;
        }
        for &v in settled.iter().rev() {
            let c = up[v as usize];
            if c != NONE && serves[v as usize] {
                serves[ctx.ch.head[c as usize] as usize] = true;
            }
        }
        Tree {
            start,
            chans,
            order,
            serves,
            up,
        }
    }

    /// Mark the turns of the tree paths towards the layer's destinations
    /// used (every non-U-turn going up, or down into a serving subtree).
    fn mark_escape(
        &mut self,
        ctx: &Ctx,
        tree: &Tree,
        layer: &mut Layer,
    ) -> Result<(), EngineError> {
        layer.seed(&tree.order);
        for b in 0..self.n {
            let outs = &tree.chans[tree.start[b] as usize..tree.start[b + 1] as usize];
            for &o_in in outs {
                let x = ctx.ch.rev[o_in as usize]; // (a→b)
                for &y in outs {
                    if y == o_in {
                        continue; // U-turn
                    }
                    // Only turns of tree paths towards the layer's
                    // destinations: up towards the root, or down into a
                    // subtree holding a destination. Marking every tree turn
                    // would also fix turns no escape path takes, and those
                    // block the short routes of other sources (on a fat tree
                    // rooted below the top, most up-down routes).
                    if y != tree.up[b] && !tree.serves[ctx.ch.head[y as usize] as usize] {
                        continue;
                    }
                    if !layer.try_use(&ctx.ch, x, y) {
                        return Err(EngineError::new(
                            "nue: internal error: the escape tree's turns are not acyclic",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Route every switch towards destination switch `t` inside the
    /// layer's CDG. Returns how many switches had to be pinned to their
    /// escape-tree path (0 when the plain search attached every switch).
    ///
    /// At an impasse the attempt's new turns are withdrawn, the switches
    /// left unattached are pinned — with their whole escape path towards
    /// `t` — to the escape tree (whose turns are used already), and the
    /// search runs again around them. The pinned set only grows, so this
    /// ends; in the worst case every switch follows the tree.
    fn route_dest(&mut self, ctx: &Ctx, layer: &mut Layer, tree: &Tree, t: Sw) -> usize {
        self.pinned.fill(false);
        let mut pinned = 0usize;
        let mut oriented = false;
        loop {
            if self.attempt(ctx, layer, t, pinned > 0) {
                return pinned;
            }
            for &(x, y) in &self.touched {
                layer.forget(&ctx.ch, x, y);
            }
            if !oriented {
                self.orient_tree(ctx, tree, t);
                oriented = true;
            }
            let tc = ctx.comp[t as usize];
            for s in 0..self.n {
                if self.route[s] != FREE || !ctx.needed[s] || ctx.comp[s] != tc {
                    continue;
                }
                let mut u = s as Sw;
                while u != t && !self.pinned[u as usize] {
                    self.pinned[u as usize] = true;
                    pinned += 1;
                    u = ctx.ch.head[self.tnext[u as usize] as usize];
                }
            }
        }
    }

    /// Escape paths towards `t`: each switch's tree channel towards `t`,
    /// the tree distance, and the tree in BFS order from `t`.
    fn orient_tree(&mut self, ctx: &Ctx, tree: &Tree, t: Sw) {
        self.tnext.fill(FREE);
        self.torder.clear();
        self.tnext[t as usize] = SINK;
        self.tdist[t as usize] = 0;
        self.torder.push(t);
        let mut head = 0;
        while head < self.torder.len() {
            let v = self.torder[head];
            head += 1;
            for &o in
                &tree.chans[tree.start[v as usize] as usize..tree.start[v as usize + 1] as usize]
            {
                let u = ctx.ch.head[o as usize];
                if self.tnext[u as usize] == FREE {
                    let c = ctx.ch.rev[o as usize];
                    self.tnext[u as usize] = c;
                    self.tdist[u as usize] = self.tdist[v as usize] + self.weight(c);
                    self.torder.push(u);
                }
            }
        }
    }

    /// One search; false when a switch with sources stays unattached.
    fn attempt(&mut self, ctx: &Ctx, layer: &mut Layer, t: Sw, use_pins: bool) -> bool {
        let ch = &ctx.ch;
        self.route.fill(FREE);
        self.order.clear();
        self.heap.clear();
        self.touched.clear();
        self.best.fill(u64::MAX);
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.pushed.fill(0);
            self.stamp = 1;
        }
        self.route[t as usize] = SINK;
        self.order.push(t);
        self.dist[t as usize] = 0;
        if use_pins {
            // Pinned switches first, each after its tree parent.
            for i in 1..self.torder.len() {
                let u = self.torder[i];
                if self.pinned[u as usize] {
                    self.route[u as usize] = self.tnext[u as usize];
                    self.dist[u as usize] = self.tdist[u as usize];
                    self.order.push(u);
                }
            }
        }
        for i in 0..self.order.len() {
            let u = self.order[i];
            self.push_into(ctx, layer, u);
        }
        while let Some((d, c)) = self.heap.pop() {
            let u = ch.tail[c as usize];
            if self.route[u as usize] != FREE {
                continue;
            }
            let v = ch.head[c as usize];
            let next = self.route[v as usize];
            if next != SINK {
                let slot = ch.dep(c, next) as usize;
                let before = layer.status[slot];
                let ok = layer.try_use(ch, c, next);
                if before == UNKNOWN {
                    self.touched.push((c, next));
                }
                if !ok {
                    self.reoffer(ctx, layer, u);
                    continue;
                }
            }
            self.route[u as usize] = c;
            self.dist[u as usize] = d;
            self.order.push(u);
            self.push_into(ctx, layer, u);
        }
        let tc = ctx.comp[t as usize];
        if self.order.len() == ctx.comp_size[tc as usize] {
            return true;
        }
        if (0..self.n).any(|s| self.route[s] == FREE && ctx.needed[s] && ctx.comp[s] == tc) {
            return false;
        }
        // Switches without sources the search left out carry no routed
        // traffic; give them a next hop towards the attached part anyway so
        // switch-originated packets are delivered.
        let mut head = 0;
        while head < self.order.len() {
            let v = self.order[head];
            head += 1;
            for o in ch.out(v) {
                let u = ch.head[o as usize];
                if self.route[u as usize] == FREE {
                    self.route[u as usize] = ch.rev[o as usize];
                    self.order.push(u);
                }
            }
        }
        true
    }

    /// Offer the channels into the newly attached switch `u`. Like
    /// Dijkstra with decrease-key, a candidate only enters the queue when
    /// it beats its switch's best offer so far; the others are offered
    /// again by [`Run::reoffer`] if the best is refused.
    #[inline]
    fn push_into(&mut self, ctx: &Ctx, layer: &Layer, u: Sw) {
        let ch = &ctx.ch;
        let c = self.route[u as usize];
        let d = self.dist[u as usize];
        for o in ch.out(u) {
            let w = ch.head[o as usize];
            if self.route[w as usize] != FREE {
                continue;
            }
            let x = ch.rev[o as usize];
            let st = if c == SINK {
                USED
            } else {
                layer.status[ch.dep(x, c) as usize]
            };
            if st == BLOCKED {
                continue;
            }
            let key = d + self.weight(x);
            if key < self.best[w as usize] {
                self.best[w as usize] = key;
                self.pushed[x as usize] = self.stamp;
                self.heap.push(key, x);
            }
        }
    }

    /// `u`'s best offer was refused: queue every channel from `u` into an
    /// attached switch not queued yet in this search. Their keys are at
    /// least the refused one's, so the queue stays monotone.
    fn reoffer(&mut self, ctx: &Ctx, layer: &Layer, u: Sw) {
        let ch = &ctx.ch;
        self.best[u as usize] = u64::MAX;
        for x in ch.out(u) {
            if self.pushed[x as usize] == self.stamp {
                continue;
            }
            let v = ch.head[x as usize];
            let c = self.route[v as usize];
            if c == FREE {
                continue;
            }
            let st = if c == SINK {
                USED
            } else {
                layer.status[ch.dep(x, c) as usize]
            };
            if st == BLOCKED {
                continue;
            }
            let key = self.dist[v as usize] + self.weight(x);
            self.best[u as usize] = self.best[u as usize].min(key);
            self.pushed[x as usize] = self.stamp;
            self.heap.push(key, x);
        }
    }

    /// Least-hop paths towards switch `t`, each switch taking the least
    /// loaded of its next hops one hop nearer, no CDG constraint (switch
    /// LIDs when switches are not traffic sinks; their routes carry
    /// management traffic only, so a BFS does instead of a weighted search).
    fn route_plain(&mut self, ctx: &Ctx, t: Sw) {
        let ch = &ctx.ch;
        self.route.fill(FREE);
        self.order.clear();
        self.route[t as usize] = SINK;
        self.dist[t as usize] = 0;
        self.order.push(t);
        let mut head = 0;
        while head < self.order.len() {
            let v = self.order[head];
            head += 1;
            let next = self.dist[v as usize] + 1;
            for o in ch.out(v) {
                let u = ch.head[o as usize] as usize;
                let x = ch.rev[o as usize];
                let r = self.route[u];
                if r == FREE {
                    self.route[u] = x;
                    self.dist[u] = next;
                    self.order.push(u as Sw);
                } else if r != SINK
                    && self.dist[u] == next
                    && self.chan_load[x as usize] < self.chan_load[r as usize]
                {
                    self.route[u] = x;
                }
            }
        }
    }

    /// Write the routes of `self.route` for destination `d` into the LFTs
    /// and add the routed sources to the link weights. `order` lists every
    /// routed switch after its next hop.
    fn commit(&mut self, ctx: &Ctx, d: &Dest, count: bool) {
        let lid = d.lid as usize;
        for &u in self.order.iter() {
            self.sub[u as usize] = ctx.sources[u as usize];
        }
        for i in (0..self.order.len()).rev() {
            let u = self.order[i] as usize;
            let c = self.route[u];
            if c == SINK {
                self.lft[u][lid] = d.port;
                continue;
            }
            let s = self.sub[u];
            let v = ctx.ch.head[c as usize] as usize;
            self.sub[v] += s;
            if count {
                self.chan_load[c as usize] += s;
            }
            // Parallel cables: the least loaded one, first in port order.
            let ports = &ctx.ports_of[c as usize];
            let mut best = ports[0];
            for &p in &ports[1..] {
                if self.port_load[p.1 as usize] < self.port_load[best.1 as usize] {
                    best = p;
                }
            }
            if count {
                self.port_load[best.1 as usize] += s.max(1);
            }
            self.lft[u][lid] = best.0;
        }
    }
}

sm_abi::export_engines! {
    "nue" => {
        summary: "Nue: routes inside the complete channel dependency graph per virtual layer, credit-loop free within any VL budget (1 VL included)",
        deadlock_free: true,
        create: Nue::from_config,
    },
}
