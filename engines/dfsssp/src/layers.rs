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
//! every path goes straight into the lowest layer whose graph stays
//! acyclic with it (first fit, destinations in routing order), checked
//! incrementally with an online topological order ([`crate::cdg`]). A path
//! that fits no layer gets room made for it ([`repair`]): the cycle it
//! would close in a layer is known from the failed check, the cycle's
//! dependency that the fewest paths of the layer induce is cleared by
//! moving those paths to other layers that take them, and the path is
//! tried again.
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
    /// LIDs + 1 (row length of `sl`).
    pub lids: usize,
    /// SL of the path from each source switch to each LID:
    /// `sl[s * lids + lid]`.
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

/// Every path with at least one dependency, its channels stored flat.
struct Paths {
    src: Vec<Sw>,
    lid: Vec<u16>,
    start: Vec<u32>,
    chans: Vec<Ch>,
}

impl Paths {
    fn chain(&self, p: u32) -> &[Ch] {
        &self.chans[self.start[p as usize] as usize..self.start[p as usize + 1] as usize]
    }
    fn len(&self) -> usize {
        self.src.len()
    }
}

/// Assign layers to the paths of `tables` using at most `vl_avail` VLs.
/// `src_weight[s]` is the number of source LIDs entering at switch `s`;
/// switches with none are not sources.
pub fn assign(
    net: &Net,
    tables: &Tables,
    src_weight: &[u64],
    vl_avail: usize,
) -> Result<Assignment, NoFit> {
    let nsw = net.nsw;
    let lids = tables.lids;
    let vl_avail = vl_avail.max(1);

    let mut paths = Paths {
        src: Vec::new(),
        lid: Vec::new(),
        start: vec![0],
        chans: Vec::new(),
    };
    let mut chain: Vec<Ch> = Vec::with_capacity(16);
    for &(lid, _) in &tables.routed {
        for s in 0..nsw as Sw {
            if src_weight[s as usize] == 0 {
                continue;
            }
            walk(net, tables, s, lid, &mut chain);
            if chain.len() >= 2 {
                paths.src.push(s);
                paths.lid.push(lid);
                paths.chans.extend_from_slice(&chain);
                paths.start.push(paths.chans.len() as u32);
            }
        }
    }
    let mut cdg = LayeredCdg::new(net, vl_avail);
    let mut layer_of = vec![NO_LAYER; paths.len()];
    let mut index: Option<DepPaths> = None;
    for p in 0..paths.len() as u32 {
        let c = paths.chain(p);
        if let Some(l) = (0..vl_avail).find(|&l| cdg.try_add_path(l, c)) {
            layer_of[p as usize] = l as u8;
            continue;
        }
        let idx = index.get_or_insert_with(|| DepPaths::new(&cdg, &paths));
        match repair(&mut cdg, &paths, idx, &mut layer_of, p) {
            Some(l) => layer_of[p as usize] = l as u8,
            None => {
                return Err(NoFit {
                    src: paths.src[p as usize],
                    lid: paths.lid[p as usize],
                    hops: c.len(),
                    placed: layer_of.iter().filter(|&&l| l != NO_LAYER).count() as u64,
                })
            }
        }
    }
    debug_assert!((0..vl_avail).all(|l| cdg.order_is_topological(l)));
    let mut layer = vec![0u8; nsw * lids];
    let mut needed = 1usize;
    for p in 0..paths.len() {
        let l = layer_of[p];
        layer[paths.src[p] as usize * lids + paths.lid[p] as usize] = l;
        needed = needed.max(l as usize + 1);
    }

    // Spread the layers over the VLs.
    let mut weight = vec![0u64; needed];
    let mut total_paths = 0u64;
    for &(lid, _) in &tables.routed {
        for s in 0..nsw {
            if src_weight[s] > 0 {
                weight[layer[s * lids + lid as usize] as usize] += src_weight[s];
                total_paths += 1;
            }
        }
    }
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
        for s in 0..nsw {
            if src_weight[s] == 0 {
                continue;
            }
            let cell = &mut sl[s * lids + lid as usize];
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
        lids,
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

const NO_LAYER: u8 = u8::MAX;

/// Which paths induce each dependency (whatever their layer), built the
/// first time a path fits no layer.
struct DepPaths {
    start: Vec<u32>,
    list: Vec<u32>,
}

impl DepPaths {
    fn new(cdg: &LayeredCdg<'_>, paths: &Paths) -> DepPaths {
        let mut n = 0usize;
        for p in 0..paths.len() as u32 {
            for w in paths.chain(p).windows(2) {
                n = n.max(cdg.dep(w[0], w[1]) + 1);
            }
        }
        let mut start = vec![0u32; n + 1];
        for p in 0..paths.len() as u32 {
            for w in paths.chain(p).windows(2) {
                start[cdg.dep(w[0], w[1]) + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = vec![0u32; start[n] as usize];
        for p in 0..paths.len() as u32 {
            for w in paths.chain(p).windows(2) {
                let d = cdg.dep(w[0], w[1]);
                list[fill[d] as usize] = p;
                fill[d] += 1;
            }
        }
        DepPaths { start, list }
    }

    fn paths(&self, d: usize) -> &[u32] {
        match (self.start.get(d), self.start.get(d + 1)) {
            (Some(&a), Some(&b)) => &self.list[a as usize..b as usize],
            _ => &[],
        }
    }
}

/// Most paths moved away to clear one dependency, and most dependencies
/// cleared for one path in one layer.
const MAX_MOVED: u32 = 2000;
const MAX_ROUNDS: usize = 200;

/// Make room for path `p`, which fits no layer as they are. In each layer
/// in turn: take the cycle the path would close, pick its dependency the
/// fewest paths of the layer induce, and move those paths to other layers
/// that take them; repeat while new cycles show up. Returns the layer `p`
/// went into.
fn repair(
    cdg: &mut LayeredCdg<'_>,
    paths: &Paths,
    idx: &DepPaths,
    layer_of: &mut [u8],
    p: u32,
) -> Option<usize> {
    let layers = cdg.layers();
    let chain = paths.chain(p);
    for l in 0..layers {
        for _ in 0..MAX_ROUNDS {
            if cdg.try_add_path(l, chain) {
                return Some(l);
            }
            let cyc = cdg.cycle.clone();
            let Some((x, y)) = cyc
                .windows(2)
                .map(|w| (w[0], w[1]))
                .min_by_key(|&(x, y)| cdg.paths_on(l, x, y))
            else {
                break;
            };
            if cdg.paths_on(l, x, y) > MAX_MOVED {
                break;
            }
            let victims: Vec<u32> = idx
                .paths(cdg.dep(x, y))
                .iter()
                .copied()
                .filter(|&v| layer_of[v as usize] == l as u8)
                .collect();
            for &v in &victims {
                cdg.remove_path(l, paths.chain(v));
            }
            let mut stuck = false;
            for &v in &victims {
                let c = paths.chain(v);
                match (0..layers)
                    .filter(|&m| m != l)
                    .find(|&m| cdg.try_add_path(m, c))
                {
                    Some(m) => layer_of[v as usize] = m as u8,
                    None => {
                        // It came from this layer, so it fits back.
                        let back = cdg.try_add_path(l, c);
                        debug_assert!(back);
                        stuck = true;
                    }
                }
            }
            if stuck {
                break;
            }
        }
    }
    None
}
