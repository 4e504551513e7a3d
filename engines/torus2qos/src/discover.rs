//! Torus topology discovery: place switches into torus coordinates.
//!
//! The seed fixes the origin switch and the neighbour it has in some
//! directions. From there the torus grows one empty position at a time:
//!
//! * **Square completion** (always first, driven by a work list of
//!   positions next to newly placed switches). Two placed torus neighbours
//!   `w1`, `w2` of an empty position `p` whose other common neighbour
//!   positions are all placed (the third corner of a face of the cube, or
//!   the far switch of a radix-4 ring) leave `p` as the only free corner:
//!   the one unplaced switch linked to both goes there. If `p`'s switch
//!   failed, no switch is linked to both and nothing is placed.
//! * **Line extension**, only when no square can be completed anywhere,
//!   one placement at a time, along the axes through the seed switch
//!   first (squares then fill the planes and cubes between the axes) and
//!   elsewhere only when those are stuck; an extension checked against a
//!   face with a placed sideways neighbour goes before one that cannot be. Behind a placed switch `w` (towards the position
//!   `p` ahead) lies a placed switch `b`. The switch ahead of `w` is the
//!   one neighbour of `w` that forms no 4-loop with `b`: sideways
//!   neighbours of `w` close a face with a sideways neighbour of `b`. On a
//!   radix-4 torus dimension the ring itself is a 4-loop, so this rule is
//!   not used there (hence both seed directions for such dimensions).
//!   Those rules read faces, and failed switches and cut cables can hide
//!   the very face that tells a sideways neighbour from the one ahead; so
//!   an extension is placed only when it is also proven: each unplaced
//!   neighbour of `w` can take only the free positions next to `w` that
//!   agree with the placed switches within two links of it, and by
//!   pigeonhole over those the candidate is left with `p` alone.
//!
//! A candidate linked to a placed switch that is not a torus neighbour of
//! the position is never placed there, and an ambiguous choice is left for
//! later, when more of the neighbourhood is known. Missing switches leave
//! positions empty; missing links only lower a candidate's support, so a
//! degraded torus still fills in from other faces. Mesh dimensions are
//! discovered in unbounded coordinates and shifted so the lowest is 0.

use std::collections::VecDeque;

use sm_abi::{FabricSnapshot, NONE};
use smcore_kit::graph::{Graph, Sw};

use crate::config::TorusConf;

/// Direction code: `2 * dim` for +, `2 * dim + 1` for -.
pub type Dir = usize;

/// The torus as discovered.
#[derive(Debug, Clone)]
pub struct Torus {
    /// Radix per dimension.
    pub radix: [usize; 3],
    /// Dimensions with radix 2 or more, in DOR order.
    pub dims: Vec<usize>,
    /// Dimension wraps around with a dateline (torus of radix 3 or more;
    /// a radix-2 ring is a mesh dimension with parallel links).
    pub wrap: [bool; 3],
    /// Switch at each position (`x + X*(y + Y*z)`), or [`NONE`].
    pub sw_at: Vec<Sw>,
    /// Position of each switch, or [`NONE`] when it could not be placed.
    pub pos_of: Vec<u32>,
    /// Ports leaving each position in each direction, in port order.
    pub ports: Vec<[Vec<u8>; 6]>,
    /// Direction of each port of each switch (by switch number, then
    /// port number), when the port carries a torus link.
    pub port_dir: Vec<Vec<Option<Dir>>>,
    /// What could not be placed, for the admin.
    pub warnings: Vec<String>,
    /// Index of the seed that anchored discovery.
    pub seed: usize,
}

impl Torus {
    /// Number of positions.
    pub fn positions(&self) -> usize {
        self.radix[0] * self.radix[1] * self.radix[2]
    }

    /// Coordinates of a position.
    #[inline]
    pub fn coord(&self, pos: u32) -> [usize; 3] {
        let p = pos as usize;
        [
            p % self.radix[0],
            (p / self.radix[0]) % self.radix[1],
            p / (self.radix[0] * self.radix[1]),
        ]
    }

    /// Position of coordinates.
    #[inline]
    pub fn pos(&self, c: [usize; 3]) -> u32 {
        (c[0] + self.radix[0] * (c[1] + self.radix[1] * c[2])) as u32
    }

    /// A switch sits at the position.
    #[inline]
    pub fn present(&self, pos: u32) -> bool {
        self.sw_at[pos as usize] != NONE
    }

    /// Coordinates one step from `c` along `dir`, or None off a mesh edge.
    #[inline]
    pub fn step(&self, c: [usize; 3], dir: Dir) -> Option<[usize; 3]> {
        let d = dir / 2;
        let r = self.radix[d];
        let mut n = c;
        if dir & 1 == 0 {
            if c[d] + 1 < r {
                n[d] = c[d] + 1;
            } else if self.wrap[d] {
                n[d] = 0;
            } else {
                return None;
            }
        } else if c[d] > 0 {
            n[d] = c[d] - 1;
        } else if self.wrap[d] {
            n[d] = r - 1;
        } else {
            return None;
        }
        Some(n)
    }

    /// A link leaves position `pos` in direction `dir`.
    #[inline]
    pub fn has_link(&self, pos: u32, dir: Dir) -> bool {
        !self.ports[pos as usize][dir].is_empty()
    }

    /// Readable coordinates.
    pub fn name(&self, c: [usize; 3]) -> String {
        match self.dims.len() {
            3 => format!("({},{},{})", c[0], c[1], c[2]),
            _ => {
                let v: Vec<String> = self.dims.iter().map(|&d| c[d].to_string()).collect();
                format!("({})", v.join(","))
            }
        }
    }
}

/// Relative coordinates during discovery: torus dimensions modulo their
/// radix, mesh dimensions unbounded.
type RC = [i32; 3];

/// Up to six neighbour positions, without allocating.
#[derive(Clone, Copy)]
struct Nbrs {
    v: [RC; 6],
    n: usize,
}

impl Nbrs {
    fn contains(&self, c: &RC) -> bool {
        self.v[..self.n].contains(c)
    }
}

impl IntoIterator for Nbrs {
    type Item = RC;
    type IntoIter = std::iter::Take<std::array::IntoIter<RC, 6>>;
    fn into_iter(self) -> Self::IntoIter {
        self.v.into_iter().take(self.n)
    }
}

/// Switch at each relative position, as a dense array: torus dimensions
/// span their radix, mesh dimensions `-(radix-1) ..= radix-1`.
struct PosMap {
    at: Vec<Sw>,
    span: [i32; 3],
    offset: [i32; 3],
    placed: Vec<RC>,
}

impl PosMap {
    fn new(radix: [usize; 3], ring: [bool; 3]) -> PosMap {
        let mut span = [1i32; 3];
        let mut offset = [0i32; 3];
        for d in 0..3 {
            let r = radix[d] as i32;
            if ring[d] || r == 1 {
                span[d] = r;
            } else {
                span[d] = 2 * r - 1;
                offset[d] = r - 1;
            }
        }
        let n = (span[0] * span[1] * span[2]) as usize;
        PosMap {
            at: vec![NONE; n],
            span,
            offset,
            placed: Vec::new(),
        }
    }

    #[inline]
    fn index(&self, c: &RC) -> Option<usize> {
        let mut i = 0usize;
        for d in (0..3).rev() {
            let k = c[d] + self.offset[d];
            if k < 0 || k >= self.span[d] {
                return None;
            }
            i = i * self.span[d] as usize + k as usize;
        }
        Some(i)
    }

    #[inline]
    fn get(&self, c: &RC) -> Option<&Sw> {
        self.index(c).map(|i| &self.at[i]).filter(|&&s| s != NONE)
    }

    #[inline]
    fn contains_key(&self, c: &RC) -> bool {
        self.get(c).is_some()
    }

    fn insert(&mut self, c: RC, s: Sw) {
        if let Some(i) = self.index(&c) {
            if self.at[i] == NONE {
                self.placed.push(c);
            }
            self.at[i] = s;
        }
    }

    fn keys(&self) -> impl Iterator<Item = &RC> + '_ {
        self.placed.iter()
    }
}

/// Positions waiting in the work list.
struct PosSet(Vec<bool>);

impl PosSet {
    fn insert(&mut self, map: &PosMap, c: RC) -> bool {
        match map.index(&c) {
            Some(i) if !self.0[i] => {
                self.0[i] = true;
                true
            }
            _ => false,
        }
    }

    fn remove(&mut self, map: &PosMap, c: &RC) {
        if let Some(i) = map.index(c) {
            self.0[i] = false;
        }
    }
}

struct Disc<'a> {
    conf: &'a TorusConf,
    graph: &'a Graph,
    /// Dimension treated as a ring while discovering (looped, any radix ≥ 2).
    ring: [bool; 3],
    at: PosMap,
    coord: Vec<Option<RC>>,
    lo: [i32; 3],
    hi: [i32; 3],
    /// Coordinates of the seed switch: lines are extended only along the
    /// axes through it (squares fill in everything else).
    origin: RC,
}

impl Disc<'_> {
    fn norm(&self, mut c: RC) -> RC {
        for d in 0..3 {
            if self.ring[d] || self.conf.radix[d] == 1 {
                c[d] = c[d].rem_euclid(self.conf.radix[d] as i32);
            }
        }
        c
    }

    fn neighbours(&self, c: RC) -> Nbrs {
        let mut v = Nbrs {
            v: [[0; 3]; 6],
            n: 0,
        };
        for d in 0..3 {
            if self.conf.radix[d] < 2 {
                continue;
            }
            for s in [1, -1] {
                let mut n = c;
                n[d] += s;
                let n = self.norm(n);
                if n != c && !v.contains(&n) {
                    v.v[v.n] = n;
                    v.n += 1;
                }
            }
        }
        v
    }

    fn fits(&self, c: RC) -> bool {
        (0..3).all(|d| {
            if self.ring[d] || self.conf.radix[d] == 1 {
                return true;
            }
            let lo = self.lo[d].min(c[d]);
            let hi = self.hi[d].max(c[d]);
            (hi - lo) < self.conf.radix[d] as i32
        })
    }

    fn linked(&self, a: Sw, b: Sw) -> bool {
        self.graph.sw_adj[a as usize].contains(&b)
    }

    fn place(&mut self, s: Sw, c: RC, queue: &mut VecDeque<RC>) {
        self.at.insert(c, s);
        self.coord[s as usize] = Some(c);
        for d in 0..3 {
            self.lo[d] = self.lo[d].min(c[d]);
            self.hi[d] = self.hi[d].max(c[d]);
        }
        for d in 0..3 {
            if self.conf.radix[d] < 2 {
                continue;
            }
            for s in [1, -1, 2, -2] {
                let mut n = c;
                n[d] += s;
                queue.push_back(self.norm(n));
            }
        }
    }

    /// Placed switches at torus-neighbour positions of `p`.
    fn placed_around(&self, p: RC) -> Vec<(RC, Sw)> {
        self.neighbours(p)
            .into_iter()
            .filter_map(|n| self.at.get(&n).map(|&s| (n, s)))
            .collect()
    }

    /// A candidate linked to a placed switch that is not around `p` cannot be at `p`.
    fn conflicts(&self, f: Sw, around: &[(RC, Sw)]) -> bool {
        self.graph.sw_adj[f as usize]
            .iter()
            .any(|&g| self.coord[g as usize].is_some() && !around.iter().any(|&(_, w)| w == g))
    }

    /// Square completion: the one unplaced switch linked to two placed
    /// neighbours `w1`, `w2` of `p` whose other common neighbour
    /// positions are all placed (so `p` is the only free corner).
    fn try_square(&self, p: RC) -> Option<Sw> {
        if self.at.contains_key(&p) || !self.fits(p) {
            return None;
        }
        let around = self.placed_around(p);
        if around.len() < 2 {
            return None;
        }
        let mut found: Option<Sw> = None;
        for (i, &(c1, w1)) in around.iter().enumerate() {
            for &(c2, w2) in &around[i + 1..] {
                let n1 = self.neighbours(c1);
                let closed = self
                    .neighbours(c2)
                    .into_iter()
                    .filter(|q| *q != p && n1.contains(q))
                    .all(|q| self.at.contains_key(&q));
                if !closed {
                    continue;
                }
                for &f in &self.graph.sw_adj[w1 as usize] {
                    if self.coord[f as usize].is_some()
                        || !self.linked(f, w2)
                        || self.conflicts(f, &around)
                    {
                        continue;
                    }
                    match found {
                        None => found = Some(f),
                        Some(g) if g == f => {}
                        Some(_) => return None,
                    }
                }
            }
        }
        found
    }

    /// The neighbour positions of `a` include `b`.
    fn adjacent(&self, a: RC, b: RC) -> bool {
        a != b && self.neighbours(a).contains(&b)
    }

    /// Switch `g`, unplaced, could sit at the free position `s` as far as
    /// the switches within two links of it tell: each placed neighbour of
    /// `g` is next to `s`, and each unplaced neighbour of `g` has a free
    /// position next to `s` that is next to all of its own placed
    /// neighbours. The true position always passes, so a position that
    /// fails is not `g`'s.
    fn possible(&self, g: Sw, s: RC) -> bool {
        if self.at.contains_key(&s) || !self.fits(s) {
            return false;
        }
        let adj = &self.graph.sw_adj[g as usize];
        let placed_ok = adj.iter().all(|&h| match self.coord[h as usize] {
            Some(hc) => self.adjacent(hc, s),
            None => true,
        });
        placed_ok
            && adj.iter().filter(|&&x| x != g && self.coord[x as usize].is_none()).all(|&x| {
                let held: Vec<RC> = self.graph.sw_adj[x as usize]
                    .iter()
                    .filter_map(|&q| self.coord[q as usize])
                    .collect();
                held.is_empty()
                    || self.neighbours(s).into_iter().any(|r| {
                        !self.at.contains_key(&r) && held.iter().all(|&q| self.adjacent(q, r))
                    })
            })
    }

    /// A line extension's candidate `f` is proven to sit at `p`, next to
    /// the placed `w`: every unplaced neighbour of `w` sits at a distinct
    /// free neighbour position of `w`, so the positions each could take
    /// ([`Self::possible`]) are narrowed by pigeonhole (k switches that
    /// between them fit only k positions take those positions) until `f`
    /// has `p` alone. The heuristic filters of [`Self::try_line`] choose
    /// the candidate; this is what makes the choice safe when failed
    /// switches and cut cables have hidden the faces those filters read.
    fn forced(&self, w: Sw, wc: RC, f: Sw, p: RC) -> bool {
        let free: Vec<RC> = self
            .neighbours(wc)
            .into_iter()
            .filter(|q| !self.at.contains_key(q))
            .collect();
        let mut near: Vec<Sw> = self.graph.sw_adj[w as usize]
            .iter()
            .copied()
            .filter(|&g| self.coord[g as usize].is_none())
            .collect();
        near.sort_unstable();
        near.dedup();
        // More unplaced neighbours than free positions, or too many to
        // enumerate: not a degraded torus around w, so nothing is proven.
        if near.len() > free.len() || near.len() > 8 {
            return false;
        }
        let mut dom: Vec<u8> = near
            .iter()
            .map(|&g| {
                free.iter()
                    .enumerate()
                    .filter(|&(_, &q)| self.possible(g, q))
                    .fold(0u8, |m, (i, _)| m | 1 << i)
            })
            .collect();
        let subsets = 1u32 << near.len();
        loop {
            let mut changed = false;
            for set in 1..subsets {
                let union = (0..near.len())
                    .filter(|&i| set & 1 << i != 0)
                    .fold(0u8, |m, i| m | dom[i]);
                let (k, n) = (set.count_ones(), union.count_ones());
                if n < k {
                    return false;
                }
                if n == k {
                    for (i, d) in dom.iter_mut().enumerate() {
                        if set & 1 << i == 0 && *d & union != 0 {
                            *d &= !union;
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let (Some(i), Some(j)) = (near.iter().position(|&g| g == f), free.iter().position(|&q| q == p)) else {
            return false;
        };
        dom[i] == 1 << j
    }

    /// Line extension, used only when no square can be completed anywhere.
    fn try_line(&self, p: RC, axis_only: bool, supported_only: bool) -> Option<Sw> {
        if self.at.contains_key(&p) || !self.fits(p) {
            return None;
        }
        let around = self.placed_around(p);
        // Line extension from some placed neighbour w with a placed switch behind it.
        for &(wc, w) in &around {
            for d in 0..3 {
                let r = self.conf.radix[d];
                if r < 3 || (r == 4 && self.ring[d]) {
                    continue;
                }
                if axis_only && (0..3).any(|e| e != d && p[e] != self.origin[e]) {
                    continue;
                }
                for s in [1i32, -1] {
                    let mut ahead = wc;
                    ahead[d] += s;
                    if self.norm(ahead) != p {
                        continue;
                    }
                    let mut behind = wc;
                    behind[d] -= s;
                    let Some(&b) = self.at.get(&self.norm(behind)) else {
                        continue;
                    };
                    let line: Vec<Sw> = self.graph.sw_adj[w as usize]
                        .iter()
                        .copied()
                        .filter(|&f| {
                            // Into unknown territory: w is its only placed neighbour.
                            self.coord[f as usize].is_none()
                                && self.graph.sw_adj[f as usize]
                                    .iter()
                                    .all(|&g| g == w || self.coord[g as usize].is_none())
                        })
                        .filter(|&f| {
                            // No 4-loop f - w - b - x - f with x != w.
                            !self.graph.sw_adj[f as usize]
                                .iter()
                                .any(|&x| x != w && self.linked(x, b))
                        })
                        .filter(|&f| {
                            // The switch ahead closes a face with every placed
                            // sideways neighbour of w. A sideways neighbour
                            // of w posing as the switch ahead cannot close
                            // one with the neighbour opposite to it.
                            let sideways: Vec<Sw> = (0..3)
                                .filter(|&e| e != d && self.conf.radix[e] > 1)
                                .flat_map(|e| {
                                    [1, -1].map(|t| {
                                        let mut q = wc;
                                        q[e] += t;
                                        self.at.get(&self.norm(q)).copied()
                                    })
                                })
                                .flatten()
                                .collect();
                            !(supported_only && sideways.is_empty())
                                && sideways.iter().all(|&y| {
                                    self.graph.sw_adj[f as usize]
                                        .iter()
                                        .any(|&x| x != w && self.linked(x, y))
                                })
                        })
                        .collect();
                    if line.len() == 1 && self.forced(w, wc, line[0], p) {
                        return Some(line[0]);
                    }
                }
            }
        }
        None
    }
}

/// Why discovery failed.
pub fn discover(fabric: &FabricSnapshot, graph: &Graph, conf: &TorusConf) -> Result<Torus, String> {
    let mut why = Vec::new();
    for (i, seed) in conf.seeds.iter().enumerate() {
        match discover_from(fabric, graph, conf, i) {
            Ok(t) => return Ok(t),
            Err(e) => why.push(format!("seed {} (line {}): {e}", i + 1, seed.line)),
        }
    }
    Err(format!(
        "topology discovery failed for every seed: {}",
        why.join("; ")
    ))
}

/// A seed switch: present and linked to some other switch (a switch whose
/// every link is down is as good as failed).
fn switch_by_guid(fabric: &FabricSnapshot, graph: &Graph, guid: u64) -> Option<Sw> {
    graph
        .switch_nodes
        .iter()
        .position(|&n| fabric.nodes[n as usize].guid == guid)
        .map(|s| s as Sw)
        .filter(|&s| !graph.sw_adj[s as usize].is_empty())
}

fn discover_from(
    fabric: &FabricSnapshot,
    graph: &Graph,
    conf: &TorusConf,
    seed_ix: usize,
) -> Result<Torus, String> {
    let seed = &conf.seeds[seed_ix];
    let n = graph.switch_count();
    let origin_guid = seed.origin.ok_or("the seed has no links")?;
    let origin = switch_by_guid(fabric, graph, origin_guid).ok_or_else(|| {
        format!("switch {origin_guid:#x} is not in the fabric or has no working link")
    })?;
    let ring = [conf.looped[0], conf.looped[1], conf.looped[2]];
    let mut disc = Disc {
        conf,
        graph,
        ring,
        at: PosMap::new(conf.radix, ring),
        coord: vec![None; n],
        lo: [0; 3],
        hi: [0; 3],
        origin: [0; 3],
    };
    let mut c0: RC = [0; 3];
    for d in 0..3 {
        if ring[d] {
            c0[d] = (-seed.dateline[d]).rem_euclid(conf.radix[d] as i64) as i32;
        }
    }
    disc.origin = c0;
    let mut queue = VecDeque::new();
    disc.place(origin, c0, &mut queue);
    for d in 0..3 {
        if conf.radix[d] < 2 {
            continue;
        }
        let mut any = false;
        for (k, s) in [(2 * d, 1), (2 * d + 1, -1)] {
            let Some(g) = seed.links[k] else { continue };
            let Some(nb) = switch_by_guid(fabric, graph, g) else {
                return Err(format!(
                    "seed switch {g:#x} is not in the fabric or has no working link"
                ));
            };
            // An unlinked pair still fixes both positions (the link may
            // have failed); its absence shows up as a failed link.
            let mut c = c0;
            c[d] += s;
            let c = disc.norm(c);
            match (disc.at.get(&c), disc.coord[nb as usize]) {
                (None, None) => disc.place(nb, c, &mut queue),
                (Some(&x), _) if x == nb => {}
                _ => {
                    return Err(format!(
                        "seed switch {g:#x} is given two different positions"
                    ))
                }
            }
            any = true;
        }
        if !any {
            return Err(format!(
                "no seed link for the {} dimension",
                ['x', 'y', 'z'][d]
            ));
        }
    }
    let mut queued = PosSet(vec![false; disc.at.at.len()]);
    loop {
        // Squares first: they are unambiguous. Positions that cannot be
        // decided yet wait until a neighbour is placed.
        while let Some(p) = queue.pop_front() {
            queued.remove(&disc.at, &p);
            if disc.at.contains_key(&p) {
                continue;
            }
            if let Some(s) = disc.try_square(p) {
                let mut fresh = VecDeque::new();
                disc.place(s, p, &mut fresh);
                for q in fresh {
                    if !disc.at.contains_key(&q) && queued.insert(&disc.at, q) {
                        queue.push_back(q);
                    }
                }
            }
        }
        // Then one line extension, and back to squares.
        let mut frontier: Vec<RC> = disc
            .at
            .keys()
            .flat_map(|&c| disc.neighbours(c))
            .filter(|q| !disc.at.contains_key(q))
            .collect();
        frontier.sort();
        frontier.dedup();
        // Along the seed's axes first; elsewhere only when that is stuck.
        // Extensions backed by a face with a placed sideways neighbour go
        // before those with nothing to check against.
        let tiers = [(true, true), (false, true), (true, false), (false, false)];
        let pick = tiers.into_iter().find_map(|(axis_only, supported)| {
            frontier
                .iter()
                .find_map(|&p| disc.try_line(p, axis_only, supported).map(|s| (p, s)))
        });
        let Some((p, s)) = pick else { break };
        let mut fresh = VecDeque::new();
        disc.place(s, p, &mut fresh);
        for q in fresh {
            if !disc.at.contains_key(&q) && queued.insert(&disc.at, q) {
                queue.push_back(q);
            }
        }
    }

    // Shift mesh dimensions so the lowest coordinate is 0.
    let mut shift = [0i32; 3];
    for d in 0..3 {
        if !ring[d] && conf.radix[d] > 1 {
            shift[d] = disc.lo[d];
        }
    }
    let radix = conf.radix;
    let wrap = [
        ring[0] && radix[0] > 2,
        ring[1] && radix[1] > 2,
        ring[2] && radix[2] > 2,
    ];
    let dims = conf.dims();
    let npos = radix[0] * radix[1] * radix[2];
    let mut t = Torus {
        radix,
        dims,
        wrap,
        sw_at: vec![NONE; npos],
        pos_of: vec![NONE; n],
        ports: vec![Default::default(); npos],
        port_dir: graph
            .switch_nodes
            .iter()
            .map(|&nd| vec![None; fabric.nodes[nd as usize].num_ports as usize + 1])
            .collect(),
        warnings: Vec::new(),
        seed: seed_ix,
    };
    for (s, c) in disc.coord.iter().enumerate() {
        if let Some(c) = c {
            let u = [
                (c[0] - shift[0]) as usize,
                (c[1] - shift[1]) as usize,
                (c[2] - shift[2]) as usize,
            ];
            let p = t.pos(u);
            t.sw_at[p as usize] = s as Sw;
            t.pos_of[s] = p;
        }
    }
    // Classify links.
    let mut misfit = Vec::new();
    let mut unplaced_links = 0usize;
    for s in 0..n {
        let p = t.pos_of[s];
        if p == NONE {
            continue;
        }
        let c = t.coord(p);
        for sp in &graph.sw_ports[s] {
            if sp.peer_sw == NONE {
                continue;
            }
            let q = t.pos_of[sp.peer_sw as usize];
            if q == NONE {
                unplaced_links += 1;
                continue;
            }
            let qc = t.coord(q);
            let mut dir = None;
            for &d in &t.dims {
                if radix[d] == 2 && !wrap[d] && ring[d] {
                    // Radix-2 ring: both cables join the same two switches;
                    // all of them point "towards the other one".
                    let mut o = c;
                    o[d] = 1 - c[d];
                    if o == qc {
                        dir = Some(2 * d + c[d]);
                    }
                    continue;
                }
                if t.step(c, 2 * d) == Some(qc) {
                    dir = Some(2 * d);
                } else if t.step(c, 2 * d + 1) == Some(qc) {
                    dir = Some(2 * d + 1);
                }
            }
            match dir {
                Some(k) => {
                    t.ports[p as usize][k].push(sp.port);
                    t.port_dir[s][sp.port as usize] = Some(k);
                }
                None => misfit.push(format!(
                    "{}[{}] {} - {}[{}] {}",
                    node_name(fabric, graph.switch_nodes[s]),
                    sp.port,
                    t.name(c),
                    node_name(fabric, sp.peer_node),
                    fabric.ports[sp.peer_port as usize].num,
                    t.name(qc)
                )),
            }
        }
    }
    let unplaced: Vec<Sw> = (0..n as Sw)
        .filter(|&s| t.pos_of[s as usize] == NONE)
        .collect();
    if !unplaced.is_empty() {
        let names: Vec<String> = unplaced
            .iter()
            .take(8)
            .map(|&s| node_name(fabric, graph.switch_nodes[s as usize]))
            .collect();
        t.warnings.push(format!(
            "{} switch(es) could not be placed into the {}x{}x{} torus ({} link(s) to them unused): {}{}",
            unplaced.len(),
            radix[0],
            radix[1],
            radix[2],
            unplaced_links / 2 + unplaced_links % 2,
            names.join(", "),
            if unplaced.len() > 8 { ", ..." } else { "" }
        ));
    }
    if !misfit.is_empty() {
        t.warnings.push(format!(
            "{} link end(s) join placed switches that are not torus neighbours and are not used: {}{}",
            misfit.len(),
            misfit.iter().take(4).cloned().collect::<Vec<_>>().join("; "),
            if misfit.len() > 4 { "; ..." } else { "" }
        ));
    }
    // A placement guessed from a degraded neighbourhood (a line extended
    // past a failed switch, where a cut cable hid that the candidate was a
    // sideways neighbour) shows later as a switch that cannot be placed
    // because the positions of its placed neighbours have no free position
    // touching them all. With every placement right, the switch's own
    // position always does; so this refuses only wrong tori, and routing
    // one would be worse than routing none.
    for &s in &unplaced {
        let around: Vec<[usize; 3]> = graph.sw_adj[s as usize]
            .iter()
            .filter_map(|&g| {
                let q = t.pos_of[g as usize];
                (q != NONE).then(|| t.coord(q))
            })
            .collect();
        // One placed neighbour proves nothing: a stray switch hanging off
        // a full torus has no free position next to it either.
        if around.len() < 2 {
            continue;
        }
        let first = around[0];
        let touches = |c: [usize; 3]| around.iter().all(|&q| (0..6).any(|k| t.step(c, k) == Some(q)));
        let fits = (0..6).filter_map(|k| t.step(first, k)).any(|c| !t.present(t.pos(c)) && touches(c));
        if !fits {
            let names: Vec<String> = around.iter().map(|&c| t.name(c)).collect();
            return Err(format!(
                "{} is cabled to switches placed at {}, which no free torus position touches: the configured \
                 radix does not match the cabling (check the radices and seeds), or a placement made across failed switches and links is \
                 wrong; the torus cannot be trusted",
                node_name(fabric, graph.switch_nodes[s as usize]),
                names.join(", ")
            ));
        }
    }
    let placed = n - unplaced.len();
    if placed * 2 < n.max(1) && n > 4 {
        return Err(format!(
            "only {placed} of {n} switches could be placed: the fabric does not look like the configured {}x{}x{} torus from this seed",
            radix[0], radix[1], radix[2]
        ));
    }
    Ok(t)
}

/// Description or GUID of a node.
pub fn node_name(fabric: &FabricSnapshot, node: u32) -> String {
    let n = &fabric.nodes[node as usize];
    if n.description.is_empty() {
        format!("{:#018x}", n.guid)
    } else {
        format!("\"{}\" ({:#x})", n.description, n.guid)
    }
}
