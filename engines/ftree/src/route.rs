//! Filling the LFTs on a [`Tree`]: one destination at a time, down-going
//! routes chosen by climbing from the destination's leaf, up-going routes by
//! descending from every switch on the way.
//!
//! Load counters live on ports and port groups and survive from one
//! destination to the next: `down` counts destinations routed down a link
//! (kept on the lower switch's up group), `up` counts the subtrees routed
//! up a link (kept on the upper switch's down group). Choosing the least
//! loaded group and port at every step, with destinations taken leaf by
//! leaf in index order, spreads the destinations of one leaf over all of
//! its up links and, on a complete tree, gives every link the same load.
//!
//! At scale (the 34-ary 3-tree: 39,304 destinations, each setting all
//! 3,468 switches) the walk keeps its per-destination state in bitsets,
//! writes entries by destination and transposes them at the end, and, on
//! trees where only the main paths' counters carry from one destination to
//! the next, walks blocks of destinations in parallel from counters a
//! cheap pass replays (see [`route`]). The tables are the same either way
//! (pinned by `tests/pinned_tables.rs`).

use rayon::prelude::*;
use sm_abi::{NONE, NO_ROUTE};
use smcore_kit::cdg::bits;
use smcore_kit::graph::Sw;

use crate::rebalance::{rebalance, Rebalanced};
use crate::tree::{Tree, UNRANKED};

/// LFT entries of all switches: one row per switch, indexed by LID.
pub struct Tables {
    /// Rows by switch number, each max LID + 1 entries long.
    pub rows: Vec<Vec<u8>>,
    /// On a degraded tree, what relieving its busiest links did.
    pub rebalanced: Option<Rebalanced>,
}

impl Tables {
    /// The row of switch `s`.
    pub fn row(&self, s: Sw) -> &[u8] {
        &self.rows[s as usize]
    }
}

/// The entries of one group list whose remotes share a word of the
/// per-destination bitsets: bit `b` of `mask` is the remote at position
/// `word * 64 + b`; the list entries of the set bits, in ascending bit
/// order, are `Lists::ent[base..]`.
#[derive(Clone, Copy)]
struct Chunk {
    word: u32,
    mask: u64,
    base: u32,
}

/// One entry of a group list: the group and what the walk needs of it,
/// together (read for every route set).
#[derive(Clone, Copy)]
struct Entry {
    group: u32,
    remote: Sw,
    /// Number in list order over all lists (the tie-break between equal
    /// counters).
    seq: u32,
    /// The group's ports in [`Tree::ports`].
    first: u32,
    len: u32,
    /// Port number of the first port on the remote switch.
    first_remote_num: u8,
}

impl Entry {
    fn new(tree: &Tree, g: u32, seq: u32) -> Entry {
        let grp = &tree.groups[g as usize];
        Entry {
            group: g,
            remote: grp.remote,
            seq,
            first: grp.first,
            len: grp.len,
            first_remote_num: tree.ports[grp.first as usize].remote_num,
        }
    }
}

/// What the up-going walk reads of an entry for every switch it routes,
/// apart (the remote comes from the bit position, what it has below from
/// [`Shared::kind`]): on a large tree the walk sets every switch for every
/// destination, and entries this small then stay in the core's cache from
/// one destination to the next.
#[derive(Clone, Copy)]
struct Hot {
    /// Port number of the group's first port on the remote switch.
    first_remote_num: u8,
    /// The group has several ports.
    multi: bool,
}

/// One switch's up or down group list: its chunks.
#[derive(Clone, Copy, Default)]
struct ListRef {
    chunk_first: u32,
    chunk_end: u32,
}

/// Every switch's up and down group lists, flat (the walk touches them
/// millions of times on a large tree), entries in bit order so a chunk's
/// are read in one sweep.
struct Lists {
    ent: Vec<Entry>,
    /// [`Hot`] of each entry of `ent`.
    hot: Vec<Hot>,
    chunks: Vec<Chunk>,
    /// `[switch * 2 + up]`.
    refs: Vec<ListRef>,
}

impl Lists {
    fn new(tree: &Tree, pos: &[u32]) -> Lists {
        let nsw = tree.switches.len();
        let mut l = Lists {
            ent: Vec::new(),
            hot: Vec::new(),
            chunks: Vec::new(),
            refs: vec![ListRef::default(); nsw * 2],
        };
        let mut by_pos: Vec<(u32, Entry)> = Vec::new();
        let mut seq = 0;
        for (s, sw) in tree.switches.iter().enumerate() {
            for (up, list) in [(false, &sw.down), (true, &sw.up)] {
                by_pos.clear();
                for &g in list {
                    let e = Entry::new(tree, g, seq);
                    by_pos.push((pos[e.remote as usize], e));
                    seq += 1;
                }
                by_pos.sort_unstable_by_key(|x| x.0);
                let chunk_first = l.chunks.len() as u32;
                for (i, &(p, e)) in by_pos.iter().enumerate() {
                    let (w, b) = (p >> 6, p & 63);
                    match l.chunks.last_mut() {
                        Some(c) if i > 0 && c.word == w => c.mask |= 1 << b,
                        _ => l.chunks.push(Chunk {
                            word: w,
                            mask: 1 << b,
                            base: l.ent.len() as u32,
                        }),
                    }
                    l.ent.push(e);
                    l.hot.push(Hot { first_remote_num: e.first_remote_num, multi: e.len > 1 });
                }
                l.refs[s * 2 + up as usize] = ListRef {
                    chunk_first,
                    chunk_end: l.chunks.len() as u32,
                };
            }
        }
        l
    }

    /// The list entry of bit `b` of chunk `c`.
    #[inline]
    fn entry(&self, c: Chunk, b: u32) -> usize {
        (c.base + (c.mask & ((1u64 << b) - 1)).count_ones()) as usize
    }
}

/// Bit positions of the switches in the per-destination bitsets, and the
/// number of words: the roots by the up lists of the switches of rank 1,
/// then top-down each switch's down remotes, each list's switches not
/// placed yet next to each other (in a word of their own when they fit in
/// one). So the down lists that every destination scans, and mostly finds
/// routed already, and the up lists of rank 1, whose parents every
/// destination of the pod routes down, take a word or two on a regular
/// tree (on the 34-ary 3-tree, ordered by index, an up list of rank 1
/// took 18 words). The tables do not depend on the positions.
fn positions(tree: &Tree) -> (Vec<u32>, usize) {
    let nsw = tree.switches.len();
    let mut pos = vec![u32::MAX; nsw];
    let mut next = 0u32;
    let mut placed: Vec<Sw> = Vec::with_capacity(nsw);
    let mut by_order: Vec<Sw> = (0..nsw as Sw).collect();
    by_order.sort_by_key(|&s| tree.order.get(s as usize).copied().unwrap_or(s));
    let mut run: Vec<Sw> = Vec::new();
    // Place a run of remotes not placed yet next to each other, in a
    // word of their own when they fit in one.
    let mut place = |run: &[Sw], pos: &mut [u32], placed: &mut Vec<Sw>| {
        if run.len() <= 64 && next % 64 + run.len() as u32 > 64 {
            next = next.next_multiple_of(64);
        }
        for &r in run {
            pos[r as usize] = next;
            next += 1;
            placed.push(r);
        }
    };
    // Roots by the up lists of the switches below them, which every
    // destination scans for the parents its main path did not take.
    for &s in &by_order {
        let sw = &tree.switches[s as usize];
        if sw.rank != 1 {
            continue;
        }
        run.clear();
        for &g in &sw.up {
            let r = tree.groups[g as usize].remote;
            if tree.switches[r as usize].rank == 0 && pos[r as usize] == u32::MAX && !run.contains(&r) {
                run.push(r);
            }
        }
        place(&run, &mut pos, &mut placed);
    }
    run.clear();
    for &s in &by_order {
        if tree.switches[s as usize].rank == 0 && pos[s as usize] == u32::MAX {
            run.push(s);
        }
    }
    place(&run, &mut pos, &mut placed);
    let mut i = 0;
    while i < placed.len() {
        let s = placed[i] as usize;
        i += 1;
        run.clear();
        for &g in &tree.switches[s].down {
            let r = tree.groups[g as usize].remote;
            if pos[r as usize] == u32::MAX && !run.contains(&r) {
                run.push(r);
            }
        }
        place(&run, &mut pos, &mut placed);
    }
    for &s in &by_order {
        if pos[s as usize] == u32::MAX {
            pos[s as usize] = next;
            next += 1;
        }
    }
    (pos, (next as usize).div_ceil(64))
}

/// A destination being routed: a real LID or, for `lid == 0`, a dummy that
/// only moves the counters (a missing compute node of a leaf, so the
/// rotation over the up links stays in step between leaves).
struct Router<'a> {
    sh: &'a Shared<'a>,
    tree: &'a Tree,
    g_up: Vec<u32>,
    g_down: Vec<u32>,
    p_up: Vec<u32>,
    p_down: Vec<u32>,
    /// Per switch: rotating start for reverse hops from roots.
    down_idx: Vec<u32>,
    /// Per-destination state, cleared by [`Router::start`]: which switches
    /// have a route (a bit per position), with how many hops (per
    /// position, valid where the bit is set), and per word an upper bound
    /// of those hops (routes only get shorter within a destination), so a
    /// whole word answers "routed within h" when the bound is at most h.
    routed: Vec<u64>,
    hops: Vec<u8>,
    max_hops: Vec<u8>,
    /// The destination being routed, counted: marks in `rev_mark` from
    /// an earlier destination are told apart by it.
    cur: u32,
    /// Entries by destination, a column of `nsw` each, so one
    /// destination's writes stay within a few pages; transposed into rows
    /// at the end. `col` is the current destination's column.
    out: Vec<u8>,
    col: usize,
    /// Per switch: `destination serial << 8 | hops` of the best reverse-hop
    /// visit so far, and the credit it had.
    rev_mark: Vec<u32>,
    rev_credit: Vec<u16>,
    /// (`counter << 32 | list order`, entry), one slice per active call.
    stack: Vec<(u64, u32)>,
}

/// At most this many LFT entries per CA port change when a degraded
/// tree's busiest links are relieved.
const MOVES_PER_CA: u64 = 16;

/// Most blocks of destinations walked in parallel.
const MAX_BLOCKS: usize = 32;

/// Highest reverse hop credit used: enough to join any two switches of
/// an 8-level tree, and it keeps hop counts within a byte.
pub const MAX_REVERSE_HOPS: u16 = 8;

/// Options of one routing run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteOptions {
    /// Down-up turns an I/O node's routes may take (OpenSM `max_reverse_hops`),
    /// at most [`MAX_REVERSE_HOPS`].
    pub max_reverse_hops: u16,
    /// Give switches above the leaves routes to switch LIDs the up/down
    /// rules leave out, through the last leaf (OpenSM `connect_roots`).
    pub connect_roots: bool,
}

/// Per switch: whether the down closures of its down remotes (each
/// remote with everything reachable from it going down) are pairwise
/// disjoint. True on k-ary n-trees; damaged or irregular trees may share
/// switches below two children, and then the walk keeps OpenSM's order.
fn disjoint_below(tree: &Tree) -> Vec<bool> {
    let nsw = tree.switches.len();
    // Per switch: (owner switch + 1, child) of the last closure marking it.
    let mut seen: Vec<(u32, u32)> = vec![(0, 0); nsw];
    let mut todo: Vec<Sw> = Vec::new();
    (0..nsw)
        .map(|s| {
            let down = &tree.switches[s].down;
            for (ci, &g) in down.iter().enumerate() {
                todo.clear();
                todo.push(tree.groups[g as usize].remote);
                while let Some(t) = todo.pop() {
                    let m = seen[t as usize];
                    if m.0 == s as u32 + 1 {
                        if m.1 != ci as u32 {
                            return false;
                        }
                        continue;
                    }
                    seen[t as usize] = (s as u32 + 1, ci as u32);
                    for &h in &tree.switches[t as usize].down {
                        todo.push(tree.groups[h as usize].remote);
                    }
                }
            }
            true
        })
        .collect()
}

/// One destination, as the walk starts it: `sw` gets `port` at `hops`,
/// then (with `walk`) the walk goes out from it.
#[derive(Clone, Copy)]
struct Dest {
    sw: Sw,
    /// 0 for a dummy.
    lid: u16,
    port: u8,
    hops: u8,
    walk: bool,
    main: bool,
    credit: u16,
}

/// The destinations in routing order: compute nodes leaf by leaf (each
/// leaf padded with dummies to the fullest leaf's count), then the other
/// CA ports (I/O and the like, counted so that they spread too), then
/// switch LIDs (routes without counting, switch traffic is light).
fn destinations(tree: &Tree, stride: usize, opts: &RouteOptions) -> Vec<Dest> {
    let mut out = Vec::new();
    for &leaf in &tree.leaves {
        let mut routed = 0;
        for &ci in &tree.switches[leaf as usize].cas {
            let c = &tree.cas[ci as usize];
            if !c.is_cn || c.lid as usize >= stride {
                continue;
            }
            out.push(Dest {
                sw: leaf,
                lid: c.lid,
                port: c.sw_port,
                hops: 1,
                walk: true,
                main: true,
                credit: 0,
            });
            routed += 1;
        }
        for _ in routed..tree.max_cn_per_leaf {
            out.push(Dest {
                sw: leaf,
                lid: 0,
                port: 0,
                hops: 1,
                walk: true,
                main: true,
                credit: 0,
            });
        }
    }
    for c in &tree.cas {
        if c.is_cn || c.lid as usize >= stride {
            continue;
        }
        let credit = if c.is_io {
            opts.max_reverse_hops.min(MAX_REVERSE_HOPS)
        } else {
            0
        };
        out.push(Dest {
            sw: c.sw,
            lid: c.lid,
            port: c.sw_port,
            hops: 1,
            walk: true,
            main: true,
            credit,
        });
    }
    let mut by_guid: Vec<Sw> = (0..tree.switches.len() as Sw).collect();
    by_guid.sort_by_key(|&s| tree.switches[s as usize].guid);
    for &s in &by_guid {
        let sw = &tree.switches[s as usize];
        if sw.lid == 0 || sw.lid as usize >= stride {
            continue;
        }
        out.push(Dest {
            sw: s,
            lid: sw.lid,
            port: 0,
            hops: 0,
            walk: sw.rank != UNRANKED,
            main: false,
            credit: 0,
        });
    }
    out
}

/// What the walk reads of a switch at every visit, apart from the rest.
#[derive(Clone, Copy)]
struct Kind {
    /// Has down groups.
    down: bool,
    /// Has CA ports.
    cas: bool,
}

/// What the destinations share, read-only.
struct Shared<'a> {
    tree: &'a Tree,
    pos: Vec<u32>,
    /// The switch at each bit position ([`NONE`] in the padding).
    at_pos: Vec<Sw>,
    words: usize,
    lists: Lists,
    disjoint_below: Vec<bool>,
    /// Per switch, what every visit reads.
    kind: Vec<Kind>,
    /// The up-going counters are read somewhere (some switch's subtrees
    /// overlap, or a down group has several ports): keep them.
    count_up: bool,
    /// Some route takes reverse hops, which read the rotating starts:
    /// keep them.
    rotate: bool,
}

/// Route every CA port and switch of the tree.
///
/// Destinations depend on each other only through the load counters. On
/// trees where the counters of up-going routes are never read (every
/// switch's subtrees are disjoint, so their order is moot, and down groups
/// have one port each) and no route takes reverse hops, only the
/// counters of the main paths carry over, and those follow from the main
/// paths alone: a cheap pass climbs them in order and keeps the counters
/// at the start of every block of destinations, and the blocks are then
/// walked in parallel, each from its own copy. Everywhere else one walk
/// takes the destinations in order. Both give the same tables.
pub fn route(tree: &Tree, max_lid: u16, opts: &RouteOptions) -> Tables {
    let nsw = tree.switches.len();
    let stride = max_lid as usize + 1;
    let (pos, words) = positions(tree);
    let dests = destinations(tree, stride, opts);
    let disjoint_below = disjoint_below(tree);
    let count_up = !tree.switches.iter().enumerate().all(|(s, sw)| {
        sw.down.is_empty()
            || (disjoint_below[s] && sw.down.iter().all(|&g| tree.groups[g as usize].len == 1))
    });
    let rotate = dests.iter().any(|d| d.credit > 0);
    let independent = !count_up && !rotate;
    let sh = Shared {
        tree,
        lists: Lists::new(tree, &pos),
        at_pos: {
            let mut at = vec![NONE; words * 64];
            for (sw, &p) in pos.iter().enumerate() {
                at[p as usize] = sw as Sw;
            }
            at
        },
        pos,
        words,
        disjoint_below,
        kind: tree
            .switches
            .iter()
            .map(|sw| Kind { down: !sw.down.is_empty(), cas: !sw.cas.is_empty() })
            .collect(),
        count_up,
        rotate,
    };

    // Per LID: which buffer and where in it its column is.
    let mut col_of_lid: Vec<(u32, usize)> = vec![(u32::MAX, 0); stride];
    let bufs: Vec<Vec<u8>> = if independent {
        // A few blocks per thread evens out their lengths; every block
        // holds a copy of the main-path counters, hence the cap.
        let blocks = (rayon::current_num_threads() * 4)
            .min(MAX_BLOCKS)
            .clamp(1, dests.len().max(1));
        let per = dests.len().div_ceil(blocks).max(1);
        let chunks: Vec<&[Dest]> = dests.chunks(per).collect();
        // Main-path counters at the start of every block.
        let mut g_down = vec![0u32; tree.groups.len()];
        let mut p_down = vec![0u32; tree.ports.len()];
        let mut starts = Vec::with_capacity(chunks.len());
        for chunk in &chunks {
            starts.push((g_down.clone(), p_down.clone()));
            for d in chunk.iter().filter(|d| d.walk && d.main) {
                climb(tree, d.sw, &mut g_down, &mut p_down);
            }
        }
        for (b, chunk) in chunks.iter().enumerate() {
            let mut slot = 0;
            for d in chunk.iter() {
                if d.lid != 0 {
                    col_of_lid[d.lid as usize] = (b as u32, slot * nsw);
                    slot += 1;
                }
            }
        }
        chunks
            .into_par_iter()
            .zip(starts)
            .map(|(chunk, (g_down, p_down))| {
                let cols = chunk.iter().filter(|d| d.lid != 0).count();
                let mut r = Router::new(&sh, nsw * cols);
                r.g_down = g_down;
                r.p_down = p_down;
                let mut slot = 0;
                for d in chunk {
                    r.col = slot * nsw;
                    r.run(d);
                    if d.lid != 0 {
                        slot += 1;
                    }
                }
                r.out
            })
            .collect()
    } else {
        let mut r = Router::new(&sh, nsw * stride);
        for d in &dests {
            r.col = d.lid as usize * nsw;
            r.run(d);
        }
        for (lid, c) in col_of_lid.iter_mut().enumerate() {
            *c = (0, lid * nsw);
        }
        vec![r.out]
    };

    let mut tables = Tables {
        rows: transpose(&bufs, &col_of_lid, nsw, stride),
        rebalanced: None,
    };
    drop(bufs);
    // A degraded tree's walk leaves some links with more than their share
    // (see [`crate::rebalance`]); routes with reverse hops are not up/down
    // and stay as walked. Pure trees keep OpenSM's tables: the walk's
    // order is what makes shift patterns free of contention there.
    if tree.degraded.is_some() && !rotate {
        let cap = (tree.cas.len() as u64).saturating_mul(MOVES_PER_CA);
        tables.rebalanced = Some(rebalance(tree, &mut tables, cap));
    }
    if opts.connect_roots {
        connect_roots(tree, &mut tables);
    }
    tables
}

/// The main path of a destination from `s` up to a root: the first up
/// group with the lowest down counter, its least loaded port, as
/// [`Router::downgoing`] picks and counts them.
fn climb(tree: &Tree, mut s: Sw, g_down: &mut [u32], p_down: &mut [u32]) {
    loop {
        let sw = &tree.switches[s as usize];
        if sw.rank == 0 || sw.up.is_empty() {
            return;
        }
        let g = main_parent(&sw.up, g_down);
        let grp = &tree.groups[g as usize];
        g_down[g as usize] += 1;
        if grp.len > 1 {
            p_down[least_port(grp.first, grp.len, p_down) as usize] += 1;
        }
        s = grp.remote;
    }
}

/// The up group a destination's main path climbs through: the first of
/// `up` with the lowest down counter.
#[inline]
fn main_parent(up: &[u32], g_down: &[u32]) -> u32 {
    let mut g = up[0];
    for &h in &up[1..] {
        if g_down[h as usize] < g_down[g as usize] {
            g = h;
        }
    }
    g
}

/// The first of ports `first..first + len` with the lowest counter.
#[inline]
fn least_port(first: u32, len: u32, counters: &[u32]) -> u32 {
    let mut best = first;
    for p in first + 1..first + len {
        if counters[p as usize] < counters[best as usize] {
            best = p;
        }
    }
    best
}

/// Sort candidates by key. Counters advance round-robin from one
/// destination to the next, so the keys mostly come sorted or as a
/// rotation of a sorted list: those take one pass. Keys are unique (entry
/// numbers are), so unstable is stable.
fn sort_keys(v: &mut [(u64, u32)]) {
    let mut descents = v.windows(2).enumerate().filter(|(_, w)| w[0].0 > w[1].0).map(|(i, _)| i);
    match (descents.next(), descents.next()) {
        (None, _) => {}
        (Some(i), None) if v[v.len() - 1].0 < v[0].0 => v.rotate_left(i + 1),
        _ => v.sort_unstable_by_key(|x| x.0),
    }
}

/// Rows from the by-destination columns (`col_of_lid`: buffer and offset
/// of each LID's column, buffer `u32::MAX` for none), in parallel over
/// blocks of switches, a tile of LIDs at a time: each LID's column part
/// is copied whole into the tile (one cache line), and rows are written
/// from the tile, which stays in L1.
fn transpose(
    bufs: &[Vec<u8>],
    col_of_lid: &[(u32, usize)],
    nsw: usize,
    stride: usize,
) -> Vec<Vec<u8>> {
    const BLOCK: usize = 64;
    let mut rows: Vec<Vec<u8>> = vec![Vec::new(); nsw];
    rows.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(bi, block)| {
            let s0 = bi * BLOCK;
            let width = block.len();
            for row in block.iter_mut() {
                *row = vec![NO_ROUTE; stride];
            }
            let mut tile = [[NO_ROUTE; BLOCK]; BLOCK];
            for l0 in (0..stride).step_by(BLOCK) {
                let l1 = (l0 + BLOCK).min(stride);
                for (t, &(b, off)) in tile.iter_mut().zip(&col_of_lid[l0..l1]) {
                    if b == u32::MAX {
                        t[..width].fill(NO_ROUTE);
                    } else {
                        t[..width].copy_from_slice(&bufs[b as usize][off + s0..off + s0 + width]);
                    }
                }
                for (j, row) in block.iter_mut().enumerate() {
                    for (e, t) in row[l0..l1].iter_mut().zip(&tile) {
                        *e = t[j];
                    }
                }
            }
        });
    rows
}

impl<'a> Router<'a> {
    fn new(sh: &'a Shared<'a>, out_len: usize) -> Router<'a> {
        let tree = sh.tree;
        let nsw = tree.switches.len();
        Router {
            sh,
            tree,
            g_up: vec![0; tree.groups.len()],
            g_down: vec![0; tree.groups.len()],
            p_up: vec![0; tree.ports.len()],
            p_down: vec![0; tree.ports.len()],
            down_idx: vec![0; nsw],
            routed: vec![0; sh.words],
            hops: vec![0; sh.words * 64],
            max_hops: vec![0; sh.words],
            rev_mark: vec![0; nsw],
            rev_credit: vec![0; nsw],
            cur: 0,
            out: vec![NO_ROUTE; out_len],
            col: 0,
            stack: Vec::with_capacity(1024),
        }
    }

    /// Route one destination (its column set in `col`).
    fn run(&mut self, d: &Dest) {
        self.start();
        self.set(d.sw, d.lid, d.port, d.hops);
        if d.walk {
            self.downgoing(d.sw, NONE, d.lid, d.main, d.credit, d.hops);
        }
    }

    #[inline]
    fn start(&mut self) {
        self.cur += 1;
        self.routed.fill(0);
        self.max_hops.fill(0);
    }

    #[inline]
    fn set(&mut self, s: Sw, lid: u16, port: u8, hops: u8) {
        self.set_at(self.sh.pos[s as usize] as usize, s, lid, port, hops);
    }

    /// [`Router::set`] for the switch at bit position `p`.
    #[inline]
    fn set_at(&mut self, p: usize, s: Sw, lid: u16, port: u8, hops: u8) {
        self.routed[p >> 6] |= 1 << (p & 63);
        self.hops[p] = hops;
        let m = &mut self.max_hops[p >> 6];
        *m = (*m).max(hops);
        if lid != 0 {
            self.out[self.col + s as usize] = port;
        }
    }

    /// Whether a reverse hop into `s` with `credit` left at `hops` can
    /// still add anything: not when an earlier one for this destination
    /// had at least as much credit at no more hops (OpenSM walks every
    /// such repeat, which grows as the number of children to the power of
    /// the credit). Records the visit when it goes ahead.
    fn first_reverse_visit(&mut self, s: Sw, credit: u16, hops: u8) -> bool {
        let m = self.rev_mark[s as usize];
        if m >> 8 == self.cur && self.rev_credit[s as usize] >= credit && (m & 0xFF) as u8 <= hops {
            return false;
        }
        self.rev_mark[s as usize] = self.cur << 8 | hops as u32;
        self.rev_credit[s as usize] = credit;
        true
    }

    /// Whether `s` already has a route to the destination no longer than `hops`.
    #[inline]
    fn has_route_within(&self, s: Sw, hops: u8) -> bool {
        let p = self.sh.pos[s as usize] as usize;
        self.routed[p >> 6] >> (p & 63) & 1 != 0 && self.hops[p] <= hops
    }

    /// The bits of `mask` in `word` whose switches have a route no longer
    /// than `hops`.
    #[inline]
    fn routed_within(&self, word: u32, mask: u64, hops: u8) -> u64 {
        let w = word as usize;
        let set = self.routed[w] & mask;
        if self.max_hops[w] <= hops {
            return set;
        }
        bits(set)
            .filter(|&b| self.hops[w * 64 + b as usize] <= hops)
            .fold(0, |within, b| within | 1 << b)
    }

    /// The entries of chunk `c` whose remote is not `skip_pos` and has no
    /// route within `hops`, as bits.
    #[inline]
    fn open_bits(&self, c: Chunk, skip_pos: u32, hops: u8) -> u64 {
        let mut bits = c.mask & !self.routed_within(c.word, c.mask, hops);
        if skip_pos >> 6 == c.word {
            bits &= !(1u64 << (skip_pos & 63));
        }
        bits
    }

    /// Bit position of switch `s`, or `u32::MAX` for [`NONE`].
    #[inline]
    fn pos_of(&self, s: Sw) -> u32 {
        if s == NONE {
            u32::MAX
        } else {
            self.sh.pos[s as usize]
        }
    }

    /// The first port of the entry's group with the lowest counter, and
    /// its number on the remote switch.
    #[inline]
    fn min_port(&self, en: &Entry, up: bool) -> (u32, u8) {
        if en.len == 1 {
            return (en.first, en.first_remote_num);
        }
        let counters = if up { &self.p_up } else { &self.p_down };
        let best = least_port(en.first, en.len, counters);
        (best, self.tree.ports[best as usize].remote_num)
    }

    /// Count a route over port `p` of the entry's group (the port counter
    /// only matters, and is only kept, in groups of several ports).
    #[inline]
    fn count(&mut self, en: &Entry, p: u32, up: bool) {
        let (g, ports) = if up {
            (&mut self.g_up, &mut self.p_up)
        } else {
            (&mut self.g_down, &mut self.p_down)
        };
        g[en.group as usize] += 1;
        if en.len > 1 {
            ports[p as usize] += 1;
        }
    }

    /// Push the entries of `s`'s up or down list whose remote switch is not
    /// `skip` and has no route within `hops` yet, ordered by counter then
    /// list order; returns the slice's start. Sorting only these is
    /// enough: a walk below one of them never reaches the others' rank, so
    /// no candidate appears or disappears on the way, and most calls have
    /// none.
    fn push_candidates(&mut self, s: Sw, up: bool, skip: Sw, hops: u8) -> usize {
        let base = self.stack.len();
        let lr = self.sh.lists.refs[s as usize * 2 + up as usize];
        let skip_pos = self.pos_of(skip);
        for ci in lr.chunk_first..lr.chunk_end {
            let c = self.sh.lists.chunks[ci as usize];
            for b in bits(self.open_bits(c, skip_pos, hops)) {
                let e = self.sh.lists.entry(c, b);
                let en = &self.sh.lists.ent[e];
                let g = en.group as usize;
                // Up groups are ordered by their down counter and vice
                // versa, ties by list order (entry numbers follow it).
                let k = if up { self.g_down[g] } else { self.g_up[g] };
                self.stack
                    .push(((k as u64) << 32 | en.seq as u64, e as u32));
            }
        }
        sort_keys(&mut self.stack[base..]);
        base
    }

    /// Give every switch below `s` (except through `prev`) a route up
    /// towards `s`, least loaded down group first. Returns whether any
    /// route towards an end port was made below.
    ///
    /// Most calls find every switch below routed already (a destination
    /// reaches each switch from many above): when the down list is one
    /// chunk (a regular tree's always are, see [`positions`]) that is
    /// answered here, inlined into the caller, and only the others walk
    /// (a longer list would be scanned twice).
    #[inline(always)]
    fn upgoing(&mut self, s: Sw, prev: Sw, lid: u16, hops: u8) -> bool {
        let Kind { down: has_down, cas: has_cas, .. } = self.sh.kind[s as usize];
        if !has_down {
            return has_cas;
        }
        let lr = self.sh.lists.refs[s as usize * 2];
        if lr.chunk_end - lr.chunk_first == 1 {
            let c = self.sh.lists.chunks[lr.chunk_first as usize];
            if self.open_bits(c, self.pos_of(prev), hops + 1) == 0 {
                if has_cas {
                    self.turn(s);
                }
                return has_cas;
            }
        }
        self.upgoing_walk(s, prev, lid, hops, has_cas)
    }

    /// A route towards an end port was made below `s`: the next one
    /// starts its reverse hops from the next down group.
    #[inline]
    fn turn(&mut self, s: Sw) {
        if self.sh.rotate {
            let n = self.tree.switches[s as usize].down.len() as u32;
            self.down_idx[s as usize] = (self.down_idx[s as usize] + 1) % n;
        }
    }

    /// [`Router::upgoing`] past its quick answer.
    #[inline(never)]
    fn upgoing_walk(&mut self, s: Sw, prev: Sw, lid: u16, hops: u8, has_cas: bool) -> bool {
        let mut created = has_cas;
        if self.sh.disjoint_below[s as usize] {
            // The walks below the candidates are independent: take them
            // as they come, without ordering them by counter.
            let lr = self.sh.lists.refs[s as usize * 2];
            let skip_pos = self.pos_of(prev);
            for ci in lr.chunk_first..lr.chunk_end {
                let c = self.sh.lists.chunks[ci as usize];
                for b in bits(self.open_bits(c, skip_pos, hops + 1)) {
                    let e = self.sh.lists.entry(c, b);
                    let h = self.sh.lists.hot[e];
                    let at = c.word as usize * 64 + b as usize;
                    let remote = self.sh.at_pos[at];
                    // The full entry only for a group of several ports.
                    let (p, num) = if h.multi {
                        self.min_port(&self.sh.lists.ent[e], true)
                    } else {
                        (u32::MAX, h.first_remote_num)
                    };
                    self.set_at(at, remote, lid, num, hops + 1);
                    let Kind { down: remote_down, cas: remote_cas, .. } = self.sh.kind[remote as usize];
                    let below = if remote_down {
                        self.upgoing(remote, NONE, lid, hops + 1)
                    } else {
                        remote_cas
                    };
                    if below {
                        created = true;
                        if self.sh.count_up {
                            let en = self.sh.lists.ent[e];
                            self.count(&en, if p == u32::MAX { en.first } else { p }, true);
                        }
                    }
                }
            }
        } else {
            let base = self.push_candidates(s, false, prev, hops + 1);
            for i in base..self.stack.len() {
                let e = self.stack[i].1 as usize;
                let en = self.sh.lists.ent[e];
                let (p, num) = self.min_port(&en, true);
                self.set(en.remote, lid, num, hops + 1);
                if self.upgoing(en.remote, NONE, lid, hops + 1) {
                    created = true;
                    self.count(&en, p, true);
                }
            }
            self.stack.truncate(base);
        }
        if created {
            self.turn(s);
        }
        created
    }

    /// From `s`, which has a route to the destination, route the switches
    /// above it down towards `s` (the least loaded up group carries the
    /// main path and its counters), and everything below them up.
    fn downgoing(&mut self, s: Sw, prev: Sw, lid: u16, main: bool, credit: u16, hops: u8) -> bool {
        let tree = self.tree;
        let mut created = self.upgoing(s, prev, lid, hops);
        let sw = &tree.switches[s as usize];
        if sw.rank == 0 {
            if credit > 0 && !sw.down.is_empty() {
                // Going down again from a root: a reverse hop, spread by a
                // rotating start.
                let n = sw.down.len() as u32;
                self.down_idx[s as usize] = (self.down_idx[s as usize] + 1) % n;
                let start = self.down_idx[s as usize];
                for j in 0..n {
                    let g = sw.down[((start + j) % n) as usize];
                    let remote = tree.groups[g as usize].remote;
                    if self.first_reverse_visit(remote, credit - 1, hops + 1) {
                        created |= self.downgoing(remote, s, lid, main, credit - 1, hops + 1);
                    }
                }
            }
            return created;
        }
        if sw.up.is_empty() {
            return created;
        }
        let mut main_remote = NONE;
        if main {
            let g = main_parent(&sw.up, &self.g_down);
            let en = Entry::new(tree, g, 0);
            let (p, num) = self.min_port(&en, false);
            self.count(&en, p, false);
            let remote = en.remote;
            if !self.has_route_within(remote, hops + 1) {
                self.set(remote, lid, num, hops + 1);
            }
            created |= self.downgoing(remote, s, lid, true, credit, hops + 1);
            main_remote = remote;
        }
        // The other parents, if the main path did not reach them already.
        // A walk through one may reach another, hence the check again.
        let base = self.push_candidates(s, true, main_remote, hops + 1);
        for i in base..self.stack.len() {
            let e = self.stack[i].1 as usize;
            let en = self.sh.lists.ent[e];
            if self.has_route_within(en.remote, hops + 1) {
                continue;
            }
            let (_, num) = self.min_port(&en, false);
            self.set(en.remote, lid, num, hops + 1);
            created |= self.downgoing(en.remote, s, lid, false, credit, hops + 1);
        }
        self.stack.truncate(base);
        if credit == 0 || sw.is_leaf {
            return created;
        }
        // Reverse hops: step down to each child and climb again from there.
        for gi in 0..sw.down.len() {
            let g = sw.down[gi];
            let remote = tree.groups[g as usize].remote;
            if self.first_reverse_visit(remote, credit - 1, hops + 1) {
                created |= self.downgoing(remote, s, lid, true, credit - 1, hops + 1);
            }
        }
        created
    }
}

/// Switches above the leaves forward switch LIDs they have no up/down
/// route to the way they forward to the last leaf, which has one.
fn connect_roots(tree: &Tree, tables: &mut Tables) {
    let Some(&leaf) = tree.leaves.last() else {
        return;
    };
    let stride = tables.rows.first().map_or(0, |r| r.len());
    let leaf_lid = tree.switches[leaf as usize].lid as usize;
    if leaf_lid == 0 || leaf_lid >= stride {
        return;
    }
    // The leaf's own row is never changed here (it is not above the
    // leaves), so which switch LIDs it reaches can be read once.
    let leaf_row = &tables.rows[leaf as usize];
    let switch_lids: Vec<usize> = tree
        .switches
        .iter()
        .filter(|s| s.rank != UNRANKED && s.lid != 0 && (s.lid as usize) < stride)
        .map(|s| s.lid as usize)
        .filter(|&lid| leaf_row[lid] != NO_ROUTE)
        .collect();
    for (s, sw) in tree.switches.iter().enumerate() {
        if sw.rank == UNRANKED || sw.rank >= tree.leaf_rank {
            continue;
        }
        let row = &mut tables.rows[s];
        let towards_leaf = row[leaf_lid];
        if towards_leaf == NO_ROUTE {
            continue;
        }
        for &lid in &switch_lids {
            if row[lid] == NO_ROUTE {
                row[lid] = towards_leaf;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sort_keys;

    /// Sorted, rotated, and shuffled key lists all come out sorted.
    #[test]
    fn sort_keys_sorts_rotations_and_anything_else() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for len in 0..40usize {
            let sorted: Vec<(u64, u32)> = (0..len).map(|i| ((i as u64 / 3) << 32 | i as u64, i as u32)).collect();
            let mut cases = vec![sorted.clone()];
            for r in 0..len {
                let mut v = sorted.clone();
                v.rotate_left(r);
                cases.push(v);
            }
            let mut shuffled = sorted.clone();
            for i in (1..len).rev() {
                shuffled.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            cases.push(shuffled);
            for mut v in cases {
                sort_keys(&mut v);
                assert_eq!(v, sorted, "length {len}");
            }
        }
    }
}
