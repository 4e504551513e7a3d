//! DFSSSP's virtual layers: every path gets a layer (an SL, carried on the
//! VL of the same number) such that no layer's channel dependency graph
//! has a cycle.
//!
//! A path is identified by its source switch and destination LID: every
//! source LID that enters the fabric at a switch (its CAs' LIDs and the
//! switch's own) follows the same channels to a given LID, so they share
//! a layer. That keeps the table at switches × LIDs bytes.
//!
//! The paper (Domke, Hoefler, Nagel, IPDPS 2011) and OpenSM put every path
//! in layer 0, then repeatedly find a cycle, pick its weakest dependency
//! and move all paths inducing it one layer up. That wastes layers: many
//! moved paths did not need to move, and they move only one layer up. Here
//! every path goes straight into a layer whose graph stays acyclic with
//! it, checked incrementally with an online topological order
//! ([`crate::cdg`]): the layer that already holds the most of its
//! dependencies (best fit; paths alike gather, the layers' graphs stay
//! apart), in routing order or longest first (see [`Order`]). A path that
//! fits no layer gets room made for it: the cycle it would close in a
//! layer is known from the failed check, the cycle's dependency that the
//! fewest paths of the layer induce is cleared by moving those paths to
//! other layers that take them, and the path is tried again.
//!
//! On the 6×6×6 torus with 2 hosts per switch, where OpenSM 3.3.23 asks
//! for 9 VLs, every path to a CA LID fits 8 layers this way in routing
//! order (the switch LIDs then reuse their first host's tree, see the
//! crate doc), so the CA-to-CA routes are exactly sssp's.
//!
//! When fewer layers are needed than VLs are available, the layers are
//! spread over the spare VLs as OpenSM does (each spare VL goes to the
//! layer with the most paths per VL); any subset of an acyclic layer is
//! acyclic, so this keeps the routing free of credit loops and spreads the
//! traffic over the VLs' buffers.

use sm_abi::{NONE, NO_ROUTE};
use smcore_kit::graph::Sw;

use crate::cdg::LayeredCdg;
use crate::net::{Ch, Net};
use crate::sssp::Tables;

/// Layers of all paths.
#[derive(Debug, Clone)]
pub struct Assignment {
    /// Switches (row length of `sl`).
    pub nsw: usize,
    /// SL of the path from each source switch to each LID:
    /// `sl[lid * nsw + s]`.
    pub sl: Vec<u8>,
    /// Layers the cycle breaking needed.
    pub layers_needed: usize,
    /// VLs the paths use after spreading.
    pub vls_used: usize,
    /// Source-LID-weighted paths per VL.
    pub paths_per_vl: Vec<u64>,
    /// Paths (source switch, LID) placed.
    pub paths: u64,
}

/// A path that fits no layer.
#[derive(Debug, Clone)]
pub struct NoFit {
    /// Source switch.
    pub src: Sw,
    /// Destination LID.
    pub lid: u16,
    /// Channels of the path.
    pub hops: usize,
    /// Paths placed before it.
    pub placed: u64,
}

/// The paths, walked from the forwarding tables when needed rather than
/// stored (3.7 million of them on a 4,096-CA fat tree). A path is named by
/// `lid * nsw + source switch`, which is also its cell in the layer table.
struct Paths<'a> {
    net: &'a Net,
    tables: &'a Tables,
    src_weight: &'a [u64],
}

impl Paths<'_> {
    /// Walk path `id` into `chain`.
    fn chain(&self, id: usize, chain: &mut Vec<Ch>) {
        let nsw = self.net.nsw;
        walk(
            self.net,
            self.tables,
            (id % nsw) as Sw,
            (id / nsw) as u16,
            chain,
        );
    }

    /// Every path with at least one dependency, in routing order.
    fn each(&self, f: impl FnMut(usize, &[Ch])) {
        self.each_of_len(2..usize::MAX, f)
    }

    /// The paths whose channel count is in `len`, in routing order.
    fn each_of_len(&self, len: std::ops::Range<usize>, mut f: impl FnMut(usize, &[Ch])) {
        let nsw = self.net.nsw;
        let mut chain = Vec::with_capacity(16);
        for &(lid, _) in &self.tables.routed {
            for s in 0..nsw {
                if self.src_weight[s] == 0 {
                    continue;
                }
                walk(self.net, self.tables, s as Sw, lid, &mut chain);
                if chain.len() >= 2 && len.contains(&chain.len()) {
                    f(lid as usize * nsw + s, &chain);
                }
            }
        }
    }

    /// Every path with at least one dependency, in `order`.
    fn each_in(&self, order: Order, mut f: impl FnMut(usize, &[Ch])) {
        match order {
            Order::Routing => self.each(f),
            Order::LongestFirst => {
                let mut longest = 0;
                self.each(|_, c| longest = longest.max(c.len()));
                for len in (2..=longest).rev() {
                    self.each_of_len(len..len + 1, &mut f);
                }
            }
        }
    }
}

/// The order paths are placed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Destination by destination, in routing order (switch LIDs last).
    Routing,
    /// Most channels first, as in first-fit-decreasing bin packing: long
    /// paths carry the most dependencies and are the hardest to fit.
    LongestFirst,
}

const NO_LAYER: u8 = u8::MAX;

/// Assign layers to the paths of `tables` using at most `vl_avail` VLs.
/// `src_weight[s]` is the number of source LIDs entering at switch `s`;
/// switches with none are not sources.
pub fn assign(
    net: &Net,
    tables: &Tables,
    src_weight: &[u64],
    vl_avail: usize,
    order: Order,
) -> Result<Assignment, NoFit> {
    let nsw = net.nsw;
    let vl_avail = vl_avail.max(1);
    let paths = Paths {
        net,
        tables,
        src_weight,
    };
    let mut cdg = LayeredCdg::new(net, vl_avail);
    paths.each(|_, c| cdg.seed_add(c));
    cdg.seed_finish();

    // Paths without dependencies fit anywhere: they stay NO_LAYER here and
    // count as layer 0 when the layers are spread.
    let mut layer = vec![NO_LAYER; tables.lids * nsw];
    let mut index: Option<DepPaths> = None;
    let mut failed: Option<NoFit> = None;
    let mut placed = 0u64;
    paths.each_in(order, |id, c| {
        if failed.is_some() {
            return;
        }
        if let Some(l) = best_fit(&mut cdg, c) {
            layer[id] = l as u8;
            placed += 1;
            return;
        }
        layer[id] = NO_LAYER;
        let idx = index.get_or_insert_with(|| DepPaths::new(&cdg, &paths));
        match repair(&mut cdg, &paths, idx, &mut layer, c) {
            Some(l) => {
                layer[id] = l as u8;
                placed += 1;
            }
            None => {
                failed = Some(NoFit {
                    src: (id % nsw) as Sw,
                    lid: (id / nsw) as u16,
                    hops: c.len(),
                    placed,
                })
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    debug_assert!((0..vl_avail).all(|l| cdg.order_is_topological(l)));

    // Spread the layers over the VLs.
    let mut needed = 1usize;
    let mut weight = vec![0u64; vl_avail];
    let mut total_paths = 0u64;
    for &(lid, _) in &tables.routed {
        let row = &mut layer[lid as usize * nsw..(lid as usize + 1) * nsw];
        for (s, l) in row.iter_mut().enumerate() {
            if *l == NO_LAYER {
                *l = 0;
            }
            let l = *l;
            if src_weight[s] > 0 {
                weight[l as usize] += src_weight[s];
                needed = needed.max(l as usize + 1);
                total_paths += 1;
            }
        }
    }
    weight.truncate(needed);
    let mut split = vec![1usize; needed];
    for _ in needed..vl_avail {
        let l = (0..needed)
            .max_by(|&a, &b| {
                (weight[a] * split[b] as u64)
                    .cmp(&(weight[b] * split[a] as u64))
                    .then(b.cmp(&a))
            })
            .unwrap_or(0);
        split[l] += 1;
    }
    let mut first_vl = vec![0usize; needed];
    for l in 1..needed {
        first_vl[l] = first_vl[l - 1] + split[l - 1];
    }
    let vls = first_vl[needed - 1] + split[needed - 1];
    let mut per_vl = vec![0u64; vls];
    let mut sl = layer;
    for &(lid, _) in &tables.routed {
        let row = &mut sl[lid as usize * nsw..(lid as usize + 1) * nsw];
        for (s, cell) in row.iter_mut().enumerate() {
            if src_weight[s] == 0 {
                continue;
            }
            let l = *cell as usize;
            // The least loaded VL of the layer's share.
            let range = first_vl[l]..first_vl[l] + split[l];
            let vl = range.min_by_key(|&v| (per_vl[v], v)).unwrap_or(first_vl[l]);
            per_vl[vl] += src_weight[s];
            *cell = vl as u8;
        }
    }
    let vls_used = per_vl.iter().rposition(|&w| w > 0).map_or(1, |i| i + 1);
    Ok(Assignment {
        nsw,
        sl,
        layers_needed: needed,
        vls_used,
        paths_per_vl: per_vl,
        paths: total_paths,
    })
}

/// The switch-to-switch channels from `s` to `lid`, in order (empty when
/// `s` is the destination's switch or has no route).
pub fn walk(net: &Net, tables: &Tables, s: Sw, lid: u16, chain: &mut Vec<Ch>) {
    chain.clear();
    let mut v = s;
    for _ in 0..net.nsw {
        let port = tables.port(v, lid);
        if port == NO_ROUTE {
            chain.clear();
            return;
        }
        let c = net.out_channel(v, port);
        if c == NONE {
            return;
        }
        chain.push(c);
        v = net.to[c as usize];
    }
    // A forwarding loop (cannot happen with Dijkstra trees): no path.
    chain.clear();
}

/// Put a path into the layer that already holds the most of its
/// dependencies, among those that stay acyclic with it (the lowest on
/// ties): paths alike gather in one layer, which keeps the layers' graphs
/// apart and leaves room for the paths that need it. Most paths need no
/// new dependency in some layer and are placed by bit tests alone.
fn best_fit(cdg: &mut LayeredCdg<'_>, chain: &[Ch]) -> Option<usize> {
    let layers = cdg.layers();
    if let Some(l) = (0..layers).find(|&l| cdg.holds_path(l, chain)) {
        let held = cdg.try_add_path(l, chain);
        debug_assert!(held);
        return Some(l);
    }
    let mut ranked: Vec<(usize, usize)> = (0..layers)
        .map(|l| {
            (
                chain.windows(2).filter(|p| !cdg.has(l, p[0], p[1])).count(),
                l,
            )
        })
        .collect();
    ranked.sort_unstable();
    ranked
        .into_iter()
        .map(|(_, l)| l)
        .find(|&l| cdg.try_add_path(l, chain))
}

/// Which paths induce each dependency (whatever their layer), built the
/// first time a path fits no layer.
struct DepPaths {
    start: Vec<u64>,
    list: Vec<usize>,
}

impl DepPaths {
    fn new(cdg: &LayeredCdg<'_>, paths: &Paths<'_>) -> DepPaths {
        let n = cdg.dep_count();
        let mut start = vec![0u64; n + 1];
        paths.each(|_, c| {
            for w in c.windows(2) {
                start[cdg.dep(w[0], w[1]) + 1] += 1;
            }
        });
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = vec![0usize; start[n] as usize];
        paths.each(|id, c| {
            for w in c.windows(2) {
                let d = cdg.dep(w[0], w[1]);
                list[fill[d] as usize] = id;
                fill[d] += 1;
            }
        });
        DepPaths { start, list }
    }

    fn paths(&self, d: usize) -> &[usize] {
        &self.list[self.start[d] as usize..self.start[d + 1] as usize]
    }
}

/// Most paths moved away to clear one dependency, and most dependencies
/// cleared for one path in one layer.
const MAX_MOVED: u32 = 2000;
const MAX_ROUNDS: usize = 200;
/// Dependencies of one cycle tried before giving up on a layer.
const MAX_TRIED: usize = 64;

/// Make room for a path (channels `chain`) that fits no layer as they
/// are. In each layer in turn: take the cycle the path would close, pick
/// its dependency the fewest paths of the layer induce, and move those
/// paths to other layers that take them; repeat while new cycles show up.
/// Returns the layer the path went into.
fn repair(
    cdg: &mut LayeredCdg<'_>,
    paths: &Paths<'_>,
    idx: &DepPaths,
    layer: &mut [u8],
    chain: &[Ch],
) -> Option<usize> {
    let layers = cdg.layers();
    let mut vc = Vec::with_capacity(16);
    for l in 0..layers {
        for _ in 0..MAX_ROUNDS {
            cdg.want_cycle = true;
            let fits = cdg.try_add_path(l, chain);
            cdg.want_cycle = false;
            if fits {
                return Some(l);
            }
            // The cycle may run through the path's own dependencies (not
            // counted: they were rolled back); only the others can go.
            let mut cands: Vec<(u32, Ch, Ch)> = cdg
                .cycle
                .windows(2)
                .map(|w| (cdg.paths_on(l, w[0], w[1]), w[0], w[1]))
                .filter(|&(n, _, _)| n > 0 && n <= MAX_MOVED)
                .collect();
            cands.sort_unstable();
            cands.dedup();
            let mut cleared = false;
            for &(_, x, y) in cands.iter().take(MAX_TRIED) {
                let victims: Vec<usize> = idx
                    .paths(cdg.dep(x, y))
                    .iter()
                    .copied()
                    .filter(|&v| layer[v] == l as u8)
                    .collect();
                for &v in &victims {
                    paths.chain(v, &mut vc);
                    cdg.remove_path(l, &vc);
                }
                let mut stuck = false;
                for &v in &victims {
                    paths.chain(v, &mut vc);
                    match (0..layers)
                        .filter(|&m| m != l)
                        .find(|&m| cdg.try_add_path(m, &vc))
                    {
                        Some(m) => layer[v] = m as u8,
                        None => {
                            // It came from this layer, so it fits back.
                            let back = cdg.try_add_path(l, &vc);
                            debug_assert!(back);
                            stuck = true;
                        }
                    }
                }
                if !stuck {
                    cleared = true;
                    break;
                }
            }
            if !cleared {
                break;
            }
        }
    }
    None
}
