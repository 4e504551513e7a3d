//! The LASH engine: layered shortest path routing (Skeie, Lysne, Theiss 2002;
//! OpenSM's `lash`).
//!
//! Every pair of switches gets one shortest path, used by all end ports of
//! the destination switch; the paths are spread over virtual layers (one
//! SL each, mapped 1:1 to VLs) so that every layer's channel dependency
//! graph is acyclic, which makes the routing free of credit loops on any
//! topology, tori included. The steps:
//!
//! 1. **Mesh analysis** (`do_mesh_analysis`, optional): if the switches
//!    form an open or closed cartesian mesh (see [`mesh`]), each switch's
//!    links are ranked by dimension, so that path choices below prefer the
//!    lowest dimension first, i.e. dimension-ordered paths, whose layers
//!    stay few on tori. Otherwise links are ranked by port number.
//! 2. **Paths and layers together**, switch pairs in order of increasing
//!    distance. A pair {a, b} at distance k gets a first hop from a towards
//!    b (to a neighbour at distance k − 1, whose path to b already exists,
//!    so the paths to each destination form a tree and one LFT entry per
//!    switch and destination carries them) and likewise from b towards a.
//!    Both directions go into the same layer, so `sl(a, b) == sl(b, a)`.
//!    The acyclicity check is incremental: each layer keeps an online
//!    topological order of its channels ([`cdg`]). Two attempts run:
//!    - *rank order*: the lowest layer in which some choice of the two
//!      first hops keeps the layer's dependency graph acyclic, trying the
//!      first hops in link rank order; a new layer opens only when none
//!      fits. This needs the fewest layers, but always taking the first
//!      fitting hop sends everything the same way: on a 16-ary 3-tree one
//!      uplink carried 248 times the mean load.
//!    - *balanced*: the candidate paths sorted by the load they would join
//!      (CA-to-CA routes on each channel so far, a pair's path counting
//!      hosts(a)·hosts(b); the busiest channel of the path, then the sum,
//!      then switch-pair paths for hostless switches; on a mesh the
//!      dimension order first and then the switch's own port balance, as
//!      OpenSM's, which keeps paths dimension ordered), each tried in every
//!      layer from the lowest before the next candidate. Paths towards a
//!      switch without end ports carry no CA traffic and keep rank order;
//!      a pair with no such path in either direction is placed lowest
//!      layer first. It may open up to two layers more than rank order,
//!      never more than the VLs; beyond that it gives up.
//!    The attempt whose busiest channel carries fewer routes wins (rank
//!    order on a tie). OpenSM instead fixes each path first (its BFS order)
//!    and only then searches a layer for it ([`PathChoice::Fixed`]
//!    reproduces that): on a 6x6x6 torus with two hosts per switch that
//!    needs 9 layers, more than the 8 VLs, while choosing the first hop per
//!    layer needs 3 (rank order) or 5 (balanced, with mesh analysis:
//!    busiest link 864 routes, as OpenSM's 6-layer result).
//! 3. **Balancing**: paths move from the layers above the average to the
//!    least filled layers where they fit, as OpenSM does, so the SLs carry
//!    similar numbers of paths. The number of layers does not grow.
//! 4. Path SL = layer + `lash_start_vl`; every port maps SL n to VL n. The
//!    VLs available are the fewest operational VLs of any inter-switch port
//!    (at most 8, as OpenSM); if the layers do not fit above
//!    `lash_start_vl`, the engine fails with the count it needed.
//!
//! With LMC > 0 every LID of a port takes the same path (OpenSM's lash
//! refuses LMC > 0).

use serde::Deserialize;
use sm_abi::abi_stable::std_types::{RArc, RNone, ROption, RSome};
use sm_abi::{
    path_sl_box, EngineError, FabricSnapshot, Level, Lft, PathSl, Routing, RoutingEngine, Sl2Vl,
    SlTable, NONE, NO_ROUTE,
};
use smcore_kit::config;
use smcore_kit::graph::{Graph, Sw};

pub mod cdg;
pub mod mesh;

use cdg::Cdg;

/// Layers never exceed the 16 SLs.
const MAX_LAYERS: usize = 16;

/// OpenSM's cap on the VLs lash uses.
const VL_CAP: u8 = 8;

/// Options, named as OpenSM's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LashConfig {
    /// First VL (and SL) lash uses; layers take the VLs from here up.
    pub lash_start_vl: u8,
    /// Detect a cartesian mesh/torus and prefer dimension-ordered paths.
    pub do_mesh_analysis: bool,
}

/// How first hops are picked among equally short ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathChoice {
    /// Both attempts of step 2 of the crate doc (rank order, and balanced
    /// within two more layers); the one with the less loaded busiest link.
    #[default]
    LowestLayer,
    /// Lowest layer first; within a layer the first hop in rank order that
    /// fits, load ignored (the engine's earlier choice, for comparisons).
    RankOrder,
    /// Always the first hop in rank order (OpenSM's fixed BFS paths);
    /// only the layer is searched.
    Fixed,
}

/// The engine.
#[derive(Debug, Clone, Default)]
pub struct Lash {
    cfg: LashConfig,
    choice: PathChoice,
}

impl Lash {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<Lash, EngineError> {
        Ok(Lash {
            cfg: config::parse("lash", text)?,
            choice: PathChoice::default(),
        })
    }

    /// Build from parsed options.
    pub fn new(cfg: LashConfig) -> Lash {
        Lash {
            cfg,
            choice: PathChoice::default(),
        }
    }

    /// Choose first hops another way (for experiments and comparisons).
    pub fn with_choice(mut self, choice: PathChoice) -> Lash {
        self.choice = choice;
        self
    }

    /// Compute the layered routing without building the ABI result.
    pub fn plan(&self, fabric: &FabricSnapshot) -> Result<Plan, EngineError> {
        plan(fabric, &self.cfg, self.choice)
    }
}

/// The engine's decisions, before they become LFTs and SL tables.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The routing view it was computed on.
    pub graph: Graph,
    /// Channel (directed inter-switch link) → output port number.
    pub chan_port: Vec<u8>,
    /// Channel → switch it leads to.
    pub chan_to: Vec<Sw>,
    /// First channel of the path `s → d` at `[s * n + d]` ([`NONE`] for
    /// `s == d` or unreachable).
    pub next: Vec<u32>,
    /// Layer of the pair at `[s * n + d]` (symmetric).
    pub layer: Vec<u8>,
    /// Layers used.
    pub layers: usize,
    /// Paths (ordered switch pairs) per layer after balancing.
    pub per_layer: Vec<usize>,
    /// VLs available to lash (before `lash_start_vl`).
    pub vls_available: u8,
    /// Mesh analysis outcome when it ran: the mesh or why not.
    pub mesh: Option<Result<mesh::Mesh, String>>,
}

impl Plan {
    /// Switch sequence of the path `s → d` (empty when unreachable).
    pub fn path(&self, s: Sw, d: Sw) -> Vec<Sw> {
        let n = self.graph.switch_count();
        let mut v = vec![s];
        let mut cur = s;
        while cur != d {
            let c = self.next[cur as usize * n + d as usize];
            if c == NONE || v.len() > n {
                return Vec::new();
            }
            cur = self.chan_to[c as usize];
            v.push(cur);
        }
        v
    }
}

struct Channels {
    /// First channel of each switch (channels of switch s are base[s]..base[s+1]).
    base: Vec<u32>,
    port: Vec<u8>,
    to: Vec<Sw>,
    /// Channels of each switch in preference order.
    ranked: Vec<u32>,
    /// Mesh dimension of each channel (0 without a mesh).
    dim: Vec<u32>,
}

fn channels(graph: &Graph, mesh: Option<&mesh::Mesh>) -> Channels {
    let n = graph.switch_count();
    let mut base = Vec::with_capacity(n + 1);
    let mut port = Vec::new();
    let mut to = Vec::new();
    let mut ranked = Vec::new();
    let mut rank = Vec::new();
    let mut dims = Vec::new();
    for s in 0..n {
        base.push(port.len() as u32);
        let first = port.len();
        for sp in &graph.sw_ports[s] {
            if sp.peer_sw == NONE {
                continue;
            }
            port.push(sp.port);
            to.push(sp.peer_sw);
            let dim = match mesh {
                Some(m) => graph.sw_adj[s]
                    .iter()
                    .position(|&t| t == sp.peer_sw)
                    .map_or(0, |i| m.dim_of[s][i] as u32),
                None => 0,
            };
            rank.push((dim << 8) | sp.port as u32);
            dims.push(dim);
        }
        let mut mine: Vec<u32> = (first as u32..port.len() as u32).collect();
        mine.sort_by_key(|&c| rank[c as usize]);
        ranked.extend(mine);
    }
    base.push(port.len() as u32);
    Channels {
        base,
        port,
        to,
        ranked,
        dim: dims,
    }
}

/// VLs usable on every inter-switch link (OperationalVLs is a count; 0
/// means the SM could not read it and counts as 1).
fn available_vls(fabric: &FabricSnapshot, graph: &Graph) -> u8 {
    let mut v = VL_CAP;
    for ports in &graph.sw_ports {
        for sp in ports.iter().filter(|sp| sp.peer_sw != NONE) {
            for pi in [sp.port_index, sp.peer_port] {
                v = v.min(fabric.ports[pi as usize].op_vls.max(1));
            }
        }
    }
    v
}

fn plan(
    fabric: &FabricSnapshot,
    cfg: &LashConfig,
    choice: PathChoice,
) -> Result<Plan, EngineError> {
    let graph = Graph::new(fabric);
    let n = graph.switch_count();
    if n == 0 {
        return Err(EngineError::new("lash: the fabric has no switches"));
    }
    let vls_available = available_vls(fabric, &graph);
    if cfg.lash_start_vl >= vls_available {
        return Err(EngineError::new(format!(
            "lash: lash_start_vl {} leaves no VL: inter-switch links operate {} VL(s)",
            cfg.lash_start_vl, vls_available
        )));
    }
    let max_layers = (vls_available - cfg.lash_start_vl) as usize;
    let mesh = cfg.do_mesh_analysis.then(|| mesh::analyse(&graph));
    let ch = channels(&graph, mesh.as_ref().and_then(|m| m.as_ref().ok()));
    let nch = ch.port.len();
    let dist = graph.distance_matrix();

    // Unordered pairs bucketed by distance (counting sort).
    let mut max_d = 0usize;
    let mut count = vec![0usize; 256];
    for a in 0..n {
        for &d in &dist.to(a as Sw)[a + 1..] {
            if d != u8::MAX {
                count[d as usize] += 1;
                max_d = max_d.max(d as usize);
            }
        }
    }
    let mut start = vec![0usize; max_d + 2];
    for d in 1..=max_d {
        start[d + 1] = start[d] + count[d];
    }
    let mut pairs = vec![(0u32, 0u32); start[max_d + 1]];
    let mut fill = start.clone();
    for a in 0..n {
        for (b, &d) in dist.to(a as Sw).iter().enumerate().skip(a + 1) {
            if d != u8::MAX && d > 0 {
                pairs[fill[d as usize]] = (a as u32, b as u32);
                fill[d as usize] += 1;
            }
        }
    }

    // Channels of the path s → d that starts with channel c (the rest exists).
    let build = |next: &[u32], out: &mut Vec<u32>, c: u32, d: Sw| {
        out.clear();
        out.push(c);
        let mut cur = ch.to[c as usize];
        while cur != d {
            let c = next[cur as usize * n + d as usize];
            out.push(c);
            cur = ch.to[c as usize];
        }
    };
    // End ports behind each switch: a switch pair's path carries
    // hosts(a)·hosts(b) CA-to-CA routes each way.
    let mut hosts = vec![0u64; n];
    for &pi in &graph.end_ports {
        let s = graph.entry_switch(fabric, pi);
        if s != NONE {
            hosts[s as usize] += 1;
        }
    }
    // Equally short first hops of s towards d (k hops away), in rank order.
    let candidates = |out: &mut Vec<u32>, s: Sw, d: Sw, k: u8| {
        out.clear();
        let row = dist.to(d);
        for &c in &ch.ranked[ch.base[s as usize] as usize..ch.base[s as usize + 1] as usize] {
            if row[ch.to[c as usize] as usize] == k - 1 {
                out.push(c);
            }
        }
    };
    let on_mesh = matches!(mesh, Some(Ok(_)));
    let strategies: &[Strategy] = match choice {
        PathChoice::LowestLayer => &[Strategy::Ranked, Strategy::Balanced],
        PathChoice::RankOrder => &[Strategy::Ranked],
        PathChoice::Fixed => &[Strategy::Fixed],
    };

    let mut next = vec![NONE; n * n];
    let mut layer = vec![0u8; n * n];
    let mut layers: Vec<Cdg> = Vec::new();
    let mut cand_a: Vec<u32> = Vec::new();
    let mut cand_b: Vec<u32> = Vec::new();
    let mut paths_a = CandidatePaths::default();
    let mut paths_b = CandidatePaths::default();
    // The result kept so far: (next, layer, layers, max CA routes on a channel).
    let mut kept: Option<(Vec<u32>, Vec<u8>, Vec<Cdg>, u64)> = None;
    for &strategy in strategies {
        // Balance may cost layers, but at most two more than the lowest
        // layer first choice needs, and never more than there are VLs.
        let cap = match &kept {
            Some((_, _, l, _)) => max_layers.min(l.len() + 2),
            None => MAX_LAYERS,
        };
        next.fill(NONE);
        layer.fill(0);
        layers.clear();
        let mut load = Loads::new(nch);
        let mut gave_up = false;
        for &(a, b) in &pairs {
            let k = dist.get(a, b);
            candidates(&mut cand_a, a, b, k);
            candidates(&mut cand_b, b, a, k);
            if strategy == Strategy::Fixed {
                cand_a.truncate(1);
                cand_b.truncate(1);
            }
            // A path towards a switch without end ports never carries CA
            // traffic (a CA's route only passes through it on the way to
            // another CA's switch), so only the layers matter for it, and
            // the cheaper lowest layer first placement serves it.
            let mut carries = false;
            for (cands, out, d) in [(&cand_a, &mut paths_a, b), (&cand_b, &mut paths_b, a)] {
                out.fill(cands, |buf, c| build(&next, buf, c, d));
                let s = match strategy {
                    Strategy::Balanced if hosts[d as usize] == 0 => Strategy::Ranked,
                    s => s,
                };
                carries |= s == Strategy::Balanced;
                out.order(s, on_mesh, &ch, &load);
            }
            let placed = if carries {
                place_best_path_first(&mut layers, &paths_a, &paths_b)
            } else {
                place_lowest_layer_first(&mut layers, &paths_a, &paths_b)
            };
            let (l, ia, ib) = match placed {
                Some(p) => p,
                None => {
                    if layers.len() >= cap {
                        gave_up = true;
                        break;
                    }
                    if layers.len() == MAX_LAYERS {
                        return Err(EngineError::new(format!(
                            "lash: the paths need more than {MAX_LAYERS} layers; {max_layers} VL(s) available"
                        )));
                    }
                    // An empty layer takes any pair: the two directions of a
                    // shortest-path pair share no channel.
                    let mut g = Cdg::new(nch);
                    let ok = g.add_path(paths_a.path(0)) && g.add_path(paths_b.path(0));
                    debug_assert!(ok);
                    layers.push(g);
                    (layers.len() - 1, 0, 0)
                }
            };
            let (pa, pb) = (paths_a.path(ia), paths_b.path(ib));
            let w = hosts[a as usize] * hosts[b as usize];
            load.add(pa, w, hosts[b as usize]);
            load.add(pb, w, hosts[a as usize]);
            layers[l].paths += 2;
            next[a as usize * n + b as usize] = pa[0];
            next[b as usize * n + a as usize] = pb[0];
            layer[a as usize * n + b as usize] = l as u8;
            layer[b as usize * n + a as usize] = l as u8;
        }
        if gave_up {
            continue;
        }
        let busiest = load.routes.iter().copied().max().unwrap_or(0);
        if kept.as_ref().is_none_or(|k| busiest < k.3) {
            let old = kept.replace((
                next.clone(),
                layer.clone(),
                std::mem::take(&mut layers),
                busiest,
            ));
            if let Some((n0, l0, g0, _)) = old {
                // Reuse the buffers.
                next = n0;
                layer = l0;
                layers = g0;
            }
        }
    }
    let Some((next, mut layer, mut layers, _)) = kept else {
        unreachable!("the first strategy has no cap");
    };

    if layers.len() > max_layers {
        return Err(EngineError::new(format!(
            "lash: the paths need {} layers (VLs {}..{}), but inter-switch links operate {} VL(s){}",
            layers.len(),
            cfg.lash_start_vl,
            cfg.lash_start_vl as usize + layers.len() - 1,
            vls_available,
            if cfg.lash_start_vl > 0 { format!(" and lash_start_vl is {}", cfg.lash_start_vl) } else { String::new() }
        )));
    }

    balance(
        &mut layers,
        &mut layer,
        &pairs,
        n,
        |out: &mut Vec<u32>, s: Sw, d: Sw| {
            let c = next[s as usize * n + d as usize];
            build(&next, out, c, d)
        },
    );

    let per_layer = layers.iter().map(|g| g.paths).collect();
    Ok(Plan {
        chan_port: ch.port,
        chan_to: ch.to,
        graph,
        next,
        layer,
        layers: layers.len().max(1),
        per_layer,
        vls_available,
        mesh,
    })
}

/// How one attempt orders and places the candidate paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// Least loaded path first, in the lowest layer it fits.
    Balanced,
    /// Lowest layer first, rank order within it.
    Ranked,
    /// Only the first path in rank order.
    Fixed,
}

/// Load so far, per channel.
struct Loads {
    /// CA-to-CA routes over the channel (the figure balance is judged by).
    routes: Vec<u64>,
    /// Switch-pair paths over the channel: the tie-breaker where no hosts
    /// are involved (e.g. between spine switches).
    paths: Vec<u64>,
    /// Destinations (end ports + 1 per switch) the switch sends out of this
    /// channel as the first hop: OpenSM's per-switch port balance.
    first: Vec<u64>,
    /// First hops over the channel.
    uses: Vec<u64>,
}

impl Loads {
    fn new(nch: usize) -> Loads {
        Loads {
            routes: vec![0; nch],
            paths: vec![0; nch],
            first: vec![0; nch],
            uses: vec![0; nch],
        }
    }

    fn add(&mut self, path: &[u32], routes: u64, dest_hosts: u64) {
        for &c in path {
            self.routes[c as usize] += routes;
            self.paths[c as usize] += 1;
        }
        self.first[path[0] as usize] += dest_hosts + 1;
        self.uses[path[0] as usize] += 1;
    }
}

/// Try the candidates in their order, each in every layer from the lowest;
/// returns (layer, index of a's path, index of b's path).
fn place_best_path_first(
    layers: &mut [Cdg],
    pa: &CandidatePaths,
    pb: &CandidatePaths,
) -> Option<(usize, usize, usize)> {
    for ia in 0..pa.len() {
        let p = pa.path(ia);
        for (l, g) in layers.iter_mut().enumerate() {
            if !g.add_path(p) {
                continue;
            }
            for ib in 0..pb.len() {
                if g.add_path(pb.path(ib)) {
                    return Some((l, ia, ib));
                }
            }
            g.remove_path(p);
        }
    }
    None
}

/// Try the layers from the lowest, each with the candidates in their order.
fn place_lowest_layer_first(
    layers: &mut [Cdg],
    pa: &CandidatePaths,
    pb: &CandidatePaths,
) -> Option<(usize, usize, usize)> {
    for (l, g) in layers.iter_mut().enumerate() {
        for ia in 0..pa.len() {
            let p = pa.path(ia);
            if !g.add_path(p) {
                continue;
            }
            for ib in 0..pb.len() {
                if g.add_path(pb.path(ib)) {
                    return Some((l, ia, ib));
                }
            }
            g.remove_path(p);
        }
    }
    None
}

/// The candidate paths of one direction of a pair, stored flat.
#[derive(Default)]
struct CandidatePaths {
    chans: Vec<u32>,
    /// Path i is `chans[ends[i]..ends[i + 1]]` (ends[0] == 0).
    ends: Vec<usize>,
    /// Order in which the paths are tried (indices into `ends`).
    order: Vec<usize>,
    keys: Vec<(u64, u64, u64, u64)>,
    buf: Vec<u32>,
}

impl CandidatePaths {
    fn fill(&mut self, cands: &[u32], mut build: impl FnMut(&mut Vec<u32>, u32)) {
        self.chans.clear();
        self.ends.clear();
        self.ends.push(0);
        for &c in cands {
            build(&mut self.buf, c);
            self.chans.extend_from_slice(&self.buf);
            self.ends.push(self.chans.len());
        }
        self.order.clear();
        self.order.extend(0..cands.len());
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    /// The i-th path to try.
    fn path(&self, i: usize) -> &[u32] {
        let j = self.order[i];
        &self.chans[self.ends[j]..self.ends[j + 1]]
    }

    /// Sort the paths into the order they are tried (stable: rank order
    /// among equals).
    fn order(&mut self, strategy: Strategy, on_mesh: bool, ch: &Channels, load: &Loads) {
        if self.order.len() < 2 {
            return;
        }
        self.keys.clear();
        for j in 0..self.order.len() {
            let p = &self.chans[self.ends[j]..self.ends[j + 1]];
            let c0 = p[0] as usize;
            let key = match strategy {
                // Parallel links to one neighbour are interchangeable for
                // the layers: the one with the fewest first hops goes first.
                Strategy::Ranked | Strategy::Fixed => {
                    let t = ch.to[c0];
                    let pos = (0..self.order.len())
                        .position(|i| ch.to[self.chans[self.ends[i]] as usize] == t)
                        .unwrap_or(j);
                    (pos as u64, load.uses[c0], 0, 0)
                }
                // On a mesh: dimension order first (few layers), then the
                // switch's own port balance (as OpenSM's), then the path's
                // busiest channel and its sum.
                Strategy::Balanced if on_mesh => {
                    let r = |c: &u32| load.routes[*c as usize];
                    let busiest = p.iter().map(r).max().unwrap_or(0);
                    (
                        ch.dim[c0] as u64,
                        load.first[c0],
                        busiest,
                        p.iter().map(r).sum(),
                    )
                }
                // Elsewhere: the path's busiest channel, then the sum over
                // it, then the same in switch-pair paths.
                Strategy::Balanced => {
                    let mut k = (0u64, 0u64, 0u64, 0u64);
                    for &c in p {
                        let (r, q) = (load.routes[c as usize], load.paths[c as usize]);
                        k.0 = k.0.max(r);
                        k.1 += r;
                        k.2 = k.2.max(q);
                        k.3 += q;
                    }
                    k
                }
            };
            self.keys.push(key);
        }
        let keys = &self.keys;
        self.order.sort_by_key(|&j| keys[j]);
    }
}

/// OpenSM's balancing step: move pairs from layers above the average to the
/// least filled layer that takes them.
fn balance(
    layers: &mut [Cdg],
    layer: &mut [u8],
    pairs: &[(u32, u32)],
    n: usize,
    path_of: impl Fn(&mut Vec<u32>, Sw, Sw),
) {
    let nl = layers.len();
    if nl < 2 {
        return;
    }
    let total: usize = layers.iter().map(|g| g.paths).sum();
    let avg = total / nl;
    let (mut pa, mut pb) = (Vec::new(), Vec::new());
    let mut order: Vec<usize> = Vec::with_capacity(nl);
    // Longest paths first: they are the hardest to place elsewhere later.
    for &(a, b) in pairs.iter().rev() {
        let from = layer[a as usize * n + b as usize] as usize;
        if layers[from].paths <= avg + 1 {
            continue;
        }
        order.clear();
        order.extend((0..nl).filter(|&l| l != from && layers[l].paths + 2 < layers[from].paths));
        if order.is_empty() {
            continue;
        }
        order.sort_by_key(|&l| layers[l].paths);
        path_of(&mut pa, a, b);
        path_of(&mut pb, b, a);
        for &to in &order {
            let g = &mut layers[to];
            if !g.add_path(&pa) {
                continue;
            }
            if !g.add_path(&pb) {
                g.remove_path(&pa);
                continue;
            }
            g.paths += 2;
            layers[from].remove_path(&pa);
            layers[from].remove_path(&pb);
            layers[from].paths -= 2;
            layer[a as usize * n + b as usize] = to as u8;
            layer[b as usize * n + a as usize] = to as u8;
            break;
        }
    }
}

/// SL per (source switch, destination switch), looked up through a LID →
/// switch table.
struct LashSl {
    n: usize,
    lid_sw: Vec<u32>,
    sl: Vec<u8>,
    base: u8,
    uniform: bool,
    /// The same SLs as a table (see [`LashSl::table`]).
    table: Option<RArc<SlTable>>,
}

impl LashSl {
    /// The SLs as a table whose classes are the switches, and one last
    /// class for LIDs on no switch (the base SL to and from them).
    fn table(&self) -> Option<SlTable> {
        let n = self.n;
        if self.uniform || n + 1 > SlTable::MAX_CLASSES {
            return None;
        }
        let class_of = self.lid_sw.iter().map(|&s| if s == NONE { n as u32 } else { s }).collect::<Vec<u32>>();
        let mut sl = vec![self.base; (n + 1) * (n + 1)];
        for (d, row) in sl.chunks_mut(n + 1).take(n).enumerate() {
            for (s, e) in row[..n].iter_mut().enumerate() {
                *e = self.sl[s * n + d];
            }
        }
        Some(SlTable { class_of: class_of.into(), classes: n as u32 + 1, sl: sl.into() })
    }
}

impl PathSl for LashSl {
    fn uniform(&self) -> ROption<u8> {
        if self.uniform {
            RSome(self.base)
        } else {
            RNone
        }
    }

    fn sl_table(&self) -> ROption<RArc<SlTable>> {
        self.table.clone().into()
    }

    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        let s = self.lid_sw.get(slid as usize).copied().unwrap_or(NONE);
        let d = self.lid_sw.get(dlid as usize).copied().unwrap_or(NONE);
        if s == NONE || d == NONE {
            return self.base;
        }
        self.sl[s as usize * self.n + d as usize]
    }
}

/// SL n → VL n where the port has VL n, else wrapped into its VLs (only
/// SLs lash does not use, or last hops to end ports, which no dependency
/// leaves, land there).
fn map_for(op_vls: u8) -> [u8; 16] {
    let v = op_vls.clamp(1, 15);
    std::array::from_fn(|sl| {
        if (sl as u8) < v {
            sl as u8
        } else {
            sl as u8 % v
        }
    })
}

impl RoutingEngine for Lash {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let p = self.plan(fabric)?;
        let g = &p.graph;
        let n = g.switch_count();
        let base = self.cfg.lash_start_vl;

        // LID → switch the traffic enters or leaves the switched fabric at.
        let lid_sw: Vec<u32> = g
            .lid_port
            .iter()
            .map(|&pi| {
                if pi == NONE {
                    NONE
                } else {
                    g.entry_switch(fabric, pi)
                }
            })
            .collect();
        let mut lfts = Vec::with_capacity(n);
        for s in 0..n {
            let node = g.switch_nodes[s];
            let mut ports = vec![NO_ROUTE; fabric.max_lid as usize + 1];
            for (lid, &pi) in g.lid_port.iter().enumerate() {
                let d = lid_sw[lid];
                if pi == NONE || d == NONE {
                    continue;
                }
                ports[lid] = if d as usize == s {
                    let port = &fabric.ports[pi as usize];
                    if port.node == node {
                        0
                    } else {
                        // An end port cabled to this switch.
                        fabric.ports[port.peer as usize].num
                    }
                } else {
                    let c = p.next[s * n + d as usize];
                    if c == NONE {
                        NO_ROUTE
                    } else {
                        p.chan_port[c as usize]
                    }
                };
            }
            lfts.push(Lft {
                node,
                ports: ports.into(),
            });
        }

        let sl: Vec<u8> = p.layer.iter().map(|&l| l + base).collect();
        let mut oracle = LashSl {
            n,
            lid_sw,
            sl,
            base,
            uniform: p.layers == 1,
            table: None,
        };
        oracle.table = oracle.table().map(RArc::new);

        let mut sl2vl = Vec::new();
        for &node in &g.switch_nodes {
            let nd = &fabric.nodes[node as usize];
            let live: Vec<u8> = (1..=nd.num_ports)
                .filter(|&q| smcore_kit::graph::usable(fabric, nd.first_port + q as u32))
                .collect();
            for &out in &live {
                let vl = map_for(fabric.ports[(nd.first_port + out as u32) as usize].op_vls);
                for in_port in std::iter::once(0).chain(live.iter().copied()) {
                    if in_port != out {
                        sl2vl.push(Sl2Vl {
                            node,
                            in_port,
                            out_port: out,
                            vl,
                        });
                    }
                }
            }
        }
        for &pi in &g.end_ports {
            let port = &fabric.ports[pi as usize];
            sl2vl.push(Sl2Vl {
                node: port.node,
                in_port: 0,
                out_port: port.num,
                vl: map_for(port.op_vls),
            });
        }

        let mut routing = Routing::single_vl(lfts);
        routing.path_sl = path_sl_box(oracle);
        routing.sl2vl = sl2vl.into();
        routing.vls_used = base + p.layers as u8;
        match &p.mesh {
            Some(Ok(m)) => routing.diag(
                Level::Info,
                format!("lash: mesh analysis found a {}", m.describe()),
            ),
            Some(Err(why)) => routing.diag(
                Level::Info,
                format!("lash: mesh analysis: not a mesh ({why}); port order kept"),
            ),
            None => {}
        }
        routing.diag(
            Level::Info,
            format!(
                "lash: {} layer(s) on SL/VL {}..{} of {} VL(s); paths per layer {:?}",
                p.layers,
                base,
                base as usize + p.layers - 1,
                p.vls_available,
                p.per_layer
            ),
        );
        if fabric.lmc > 0 {
            routing.diag(
                Level::Info,
                "lash: LMC > 0: all LIDs of a port share its path and SL",
            );
        }
        Ok(routing)
    }

    /// Continuity (sm-abi 1.3): LASH routes on least hops: an entry stays while its
    /// port is healthy and on a least-hop path; broken ones take LASH's own
    /// port and nothing moves to rebalance (the layers are LASH's); merged
    /// tables with a credit loop on LASH's SLs give way to the fresh routing.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &sm_abi::PreviousRouting) -> Result<Routing, EngineError> {
        use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::MinHop, &ContinuityOptions { deadlock_free: true, take_fresh: true, ..ContinuityOptions::default() }, "lash"))
    }
}

sm_abi::export_engines! {
    "lash" => {
        summary: "OpenSM LASH: shortest paths spread over acyclic virtual layers (SLs), deadlock free",
        deadlock_free: true,
        create: Lash::from_config,
    },
}
