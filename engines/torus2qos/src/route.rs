//! Unicast: dimension-order routing on the discovered torus, around failed
//! links and switches, with dateline path SLs and SL2VL maps.

use abi_stable::std_types::RArc;
use rayon::prelude::*;
use sm_abi::{FabricSnapshot, Lft, NodeKind, PathSl, Sl2Vl, SlTable, NONE, NO_ROUTE};
use smcore_kit::graph::{Graph, Sw};

use crate::discover::{Dir, Torus};

/// What a switch does with traffic for one destination switch.
pub const HERE: u8 = 254;
/// No decision (the switch is not in the torus).
pub const NOWHERE: u8 = 255;

/// Ring state and the DOR decision function.
pub struct Router<'a> {
    /// The torus.
    pub t: &'a Torus,
    /// Per position and dimension: the ring through it is whole.
    intact: Vec<[bool; 3]>,
    /// Every ring is whole: plain DOR, no failure handling needed.
    pub pristine: bool,
}

/// Shortest direction from `a` to `b` on a ring of radix `r` (0 = +, 1 = -).
/// A tie (half way round an even ring) goes the way that stays on this
/// side of the dateline (between `r - 1` and 0), as OpenSM's torus-2QoS
/// does: + when `b > a`, - when `b < a`. So only strictly shorter paths
/// cross a dateline and set the loop bit of the path SL; on radix-4 rings
/// no chain of paths then goes round a ring, and DOR is free of credit
/// loops even for traffic that keeps to SL 0.
#[inline]
pub fn pristine_sign(a: usize, b: usize, r: usize, wrap: bool) -> usize {
    if !wrap {
        return (b < a) as usize;
    }
    // Coordinates are below the radix: the distance forward needs no
    // division, which the SL oracle would pay on every query the SA and
    // the verifier make.
    let fwd = if a < r && b < r {
        if b >= a {
            b - a
        } else {
            b + r - a
        }
    } else {
        (b + r - a) % r
    };
    match (2 * fwd).cmp(&r) {
        std::cmp::Ordering::Less => 0,
        std::cmp::Ordering::Greater => 1,
        std::cmp::Ordering::Equal => (b < a) as usize,
    }
}

/// The path from `a` to `b` crosses the dateline (between `r - 1` and 0)
/// when it goes the pristine way.
#[inline]
pub fn crosses_dateline(a: usize, b: usize, r: usize) -> bool {
    if a == b {
        return false;
    }
    if pristine_sign(a, b, r, true) == 0 {
        b < a
    } else {
        b > a
    }
}

impl<'a> Router<'a> {
    /// Precompute which rings are whole.
    pub fn new(t: &'a Torus) -> Router<'a> {
        let n = t.positions();
        let mut intact = vec![[false; 3]; n];
        for &d in &t.dims {
            for p in 0..n as u32 {
                let c = t.coord(p);
                if c[d] != 0 {
                    continue;
                }
                let whole = ring_positions(t, c, d).all(|q| {
                    let qc = t.coord(q);
                    t.present(q) && (qc[d] + 1 == t.radix[d] && !t.wrap[d] || t.has_link(q, 2 * d))
                });
                for q in ring_positions(t, c, d) {
                    intact[q as usize][d] = whole;
                }
            }
        }
        let pristine = (0..n).all(|p| t.present(p as u32) && t.dims.iter().all(|&d| intact[p][d]));
        Router {
            t,
            intact,
            pristine,
        }
    }

    /// Direction from `c` towards coordinate `k` of dimension `d`, or None
    /// when the next switch that way is the missing target (turn here).
    fn arc(&self, c: [usize; 3], d: usize, k: usize) -> Option<Dir> {
        let t = self.t;
        let ps = pristine_sign(c[d], k, t.radix[d], t.wrap[d]);
        let cp = t.pos(c);
        if self.intact[cp as usize][d] {
            return Some(2 * d + ps);
        }
        let mut tc = c;
        tc[d] = k;
        let target_present = t.present(t.pos(tc));
        let signs: &[usize] = if t.wrap[d] { &[0, 1] } else { &[0] };
        for &o in signs {
            let dir = 2 * d + (ps ^ o);
            let mut cur = c;
            while let Some(next) = t.step(cur, dir) {
                if next[d] == k {
                    if target_present {
                        if t.has_link(t.pos(cur), dir) {
                            return Some(dir);
                        }
                        break;
                    }
                    // The target switch is missing: go as far as its
                    // neighbour, turn there.
                    return if cur == c { None } else { Some(dir) };
                }
                if !t.has_link(t.pos(cur), dir) {
                    break;
                }
                cur = next;
            }
        }
        None
    }

    /// Output direction at position `c` for traffic to position `dst`
    /// ([`HERE`] when `c == dst`), or None when no legal way exists.
    pub fn decide(&self, c: [usize; 3], dst: [usize; 3]) -> Option<u8> {
        let dims = &self.t.dims;
        if self.pristine {
            for &d in dims {
                if c[d] != dst[d] {
                    return Some(
                        (2 * d + pristine_sign(c[d], dst[d], self.t.radix[d], self.t.wrap[d]))
                            as u8,
                    );
                }
            }
            return Some(HERE);
        }
        for (i, &d) in dims.iter().enumerate() {
            if c[d] == dst[d] {
                continue;
            }
            if let Some(dir) = self.arc(c, d, dst[d]) {
                return Some(dir as u8);
            }
            // Early turn: the next switch of this dimension is the missing
            // switch on the way; move on in a later dimension instead.
            for &d2 in &dims[i + 1..] {
                if c[d2] != dst[d2] {
                    if let Some(dir) = self.arc(c, d2, dst[d2]) {
                        return Some(dir as u8);
                    }
                }
            }
            return None;
        }
        Some(HERE)
    }
}

fn ring_positions(t: &Torus, c: [usize; 3], d: usize) -> impl Iterator<Item = u32> + '_ {
    (0..t.radix[d]).map(move |k| {
        let mut q = c;
        q[d] = k;
        t.pos(q)
    })
}

/// Rings broken into disjoint segments, and missing switches adjacent in a
/// dimension other than the last one DOR routes: fabrics torus-2QoS cannot
/// route free of credit loops.
pub fn refusal(t: &Torus) -> Option<String> {
    let axes = ['x', 'y', 'z'];
    for &d in &t.dims {
        for p in 0..t.positions() as u32 {
            let c = t.coord(p);
            if c[d] != 0 {
                continue;
            }
            let r = t.radix[d];
            let present: Vec<bool> = ring_positions(t, c, d).map(|q| t.present(q)).collect();
            let link: Vec<bool> = ring_positions(t, c, d)
                .map(|q| t.has_link(q, 2 * d))
                .collect();
            if !present.iter().any(|&x| x) {
                continue;
            }
            // A segment starts at a present switch not joined to its predecessor.
            let mut starts = 0;
            for k in 0..r {
                if !present[k] {
                    continue;
                }
                let joined = if k > 0 {
                    present[k - 1] && link[k - 1]
                } else {
                    t.wrap[d] && present[r - 1] && link[r - 1]
                };
                if !joined {
                    starts += 1;
                }
            }
            if starts > 1 {
                let mut at = c;
                let others: Vec<String> = t
                    .dims
                    .iter()
                    .filter(|&&e| e != d)
                    .map(|&e| {
                        at[e] = c[e];
                        format!("{}={}", axes[e], c[e])
                    })
                    .collect();
                let missing: Vec<String> = (0..r)
                    .filter(|&k| !present[k])
                    .map(|k| format!("{}={k}", axes[d]))
                    .collect();
                let cut: Vec<String> = (0..r)
                    .filter(|&k| {
                        present[k] && !link[k] && (k + 1 < r || t.wrap[d]) && present[(k + 1) % r]
                    })
                    .map(|k| format!("{}={k}-{}", axes[d], (k + 1) % r))
                    .collect();
                return Some(format!(
                    "the {} ring at {} is broken into {starts} disjoint segments (missing switches: [{}], failed links: [{}]); \
                     torus-2QoS cannot route it free of credit loops",
                    axes[d],
                    if others.is_empty() { "the torus".to_string() } else { others.join(",") },
                    missing.join(" "),
                    cut.join(" ")
                ));
            }
        }
    }
    let last = *t.dims.last()?;
    for p in 0..t.positions() as u32 {
        if t.present(p) {
            continue;
        }
        let c = t.coord(p);
        for &d in &t.dims {
            if d == last {
                continue;
            }
            if let Some(n) = t.step(c, 2 * d) {
                if !t.present(t.pos(n)) {
                    return Some(format!(
                        "failed switches at {} and {} are adjacent in the {} dimension, which is not the last dimension \
                         DOR routes ({}); torus-2QoS cannot route around them free of credit loops",
                        t.name(c),
                        t.name(n),
                        axes[d],
                        axes[last]
                    ));
                }
            }
        }
    }
    None
}

/// Groups of missing positions joined along the last DOR dimension.
pub fn failed_switch_groups(t: &Torus) -> usize {
    let Some(&last) = t.dims.last() else { return 0 };
    let mut groups = 0;
    for p in 0..t.positions() as u32 {
        if t.present(p) {
            continue;
        }
        let c = t.coord(p);
        let starts = match t.step(c, 2 * last + 1) {
            Some(prev) => t.present(t.pos(prev)),
            None => true,
        };
        if starts {
            groups += 1;
        }
    }
    // A whole missing ring along the last dimension has no start.
    if groups == 0 && t.sw_at.contains(&NONE) {
        groups = 1;
    }
    groups
}

/// Destination LIDs of a switch: (LID, port at that switch, rank in port order).
pub type DestLids = Vec<(u16, u8, u32)>;

/// LIDs each switch delivers, with their round-robin rank (management port
/// and end ports ordered by `port_order`, then by port number).
pub fn destination_lids(
    fabric: &FabricSnapshot,
    graph: &Graph,
    port_order: &[u8],
) -> Vec<DestLids> {
    let mut out = Vec::with_capacity(graph.switch_count());
    for (s, &node) in graph.switch_nodes.iter().enumerate() {
        let n = &fabric.nodes[node as usize];
        let mut group: Vec<(u8, u16, u32)> = Vec::new();
        let p0 = &fabric.ports[n.first_port as usize];
        if p0.lid != 0 {
            group.push((0, p0.lid, p0.lid_count()));
        }
        for sp in &graph.sw_ports[s] {
            if sp.peer_sw != NONE {
                continue;
            }
            let peer = &fabric.ports[sp.peer_port as usize];
            if peer.lid != 0 {
                group.push((sp.port, peer.lid, peer.lid_count()));
            }
        }
        let rank_key = |p: u8| match port_order.iter().position(|&q| q == p) {
            Some(i) => (0, i as u32),
            None => (1, p as u32),
        };
        group.sort_by_key(|&(p, _, _)| rank_key(p));
        let mut lids = Vec::new();
        for (rank, &(port, lid, count)) in group.iter().enumerate() {
            for off in 0..count {
                lids.push((lid + off as u16, port, rank as u32 + off));
            }
        }
        out.push(lids);
    }
    out
}

/// Decisions for every (source switch, destination switch) pair, row-major
/// by source. Err names a pair without a legal route, or a forwarding loop.
pub fn decisions(t: &Torus, router: &Router, graph: &Graph) -> Result<Vec<u8>, String> {
    let n = graph.switch_count();
    let coords: Vec<Option<[usize; 3]>> = t
        .pos_of
        .iter()
        .map(|&p| (p != NONE).then(|| t.coord(p)))
        .collect();
    let mut dirs = vec![NOWHERE; n * n];
    dirs.par_chunks_mut(n.max(1))
        .enumerate()
        .try_for_each(|(s, row)| -> Result<(), String> {
            let Some(sc) = coords[s] else { return Ok(()) };
            for (dst, slot) in row.iter_mut().enumerate() {
                let Some(dc) = coords[dst] else { continue };
                *slot = router.decide(sc, dc).ok_or_else(|| {
                    format!(
                        "no route from {} to {} around the failed switches",
                        t.name(sc),
                        t.name(dc)
                    )
                })?;
            }
            Ok(())
        })?;
    if router.pristine {
        // DOR on whole rings always arrives.
        return Ok(dirs);
    }
    // Next switch of each switch in each direction.
    let next: Vec<[Sw; 6]> = coords
        .iter()
        .map(|c| {
            let mut v = [NONE; 6];
            if let Some(c) = c {
                for (dir, slot) in v.iter_mut().enumerate() {
                    if let Some(q) = t.step(*c, dir) {
                        *slot = t.sw_at[t.pos(q) as usize];
                    }
                }
            }
            v
        })
        .collect();
    // Every switch's chain of decisions must end at the destination.
    (0..n)
        .into_par_iter()
        .try_for_each(|dst| -> Result<(), String> {
            let Some(dc) = coords[dst] else { return Ok(()) };
            let mut state = vec![0u8; n];
            let mut path = Vec::new();
            for s0 in 0..n {
                let mut s = s0;
                path.clear();
                loop {
                    let code = dirs[s * n + dst];
                    if code == NOWHERE || code == HERE || state[s] == 2 {
                        break;
                    }
                    if state[s] == 1 {
                        return Err(format!(
                            "forwarding loop towards {} at {} around failed switches",
                            t.name(dc),
                            coords[s].map_or(String::new(), |c| t.name(c))
                        ));
                    }
                    state[s] = 1;
                    path.push(s);
                    match next[s][code as usize] {
                        NONE => {
                            return Err(format!(
                                "route towards {} leaves the torus at {}",
                                t.name(dc),
                                coords[s].map_or(String::new(), |c| t.name(c))
                            ))
                        }
                        x => s = x as usize,
                    }
                }
                for &x in &path {
                    state[x] = 2;
                }
            }
            Ok(())
        })?;
    Ok(dirs)
}

/// LFTs from the decisions (`dirs`, source-major), or straight from the
/// coordinates when the torus is pristine (`dirs` = None: plain DOR).
pub fn build_lfts(
    fabric: &FabricSnapshot,
    graph: &Graph,
    t: &Torus,
    dirs: Option<&[u8]>,
    dest: &[DestLids],
) -> Vec<Lft> {
    let n = graph.switch_count();
    let len = fabric.max_lid as usize + 1;
    // Destination LIDs flattened: (LID, rank) per switch, CSR.
    let mut start = Vec::with_capacity(n + 1);
    let mut flat: Vec<(u16, u32)> = Vec::new();
    for lids in dest {
        start.push(flat.len());
        flat.extend(lids.iter().map(|&(lid, _, rank)| (lid, rank)));
    }
    start.push(flat.len());
    let coords: Vec<[u8; 3]> = t
        .pos_of
        .iter()
        .map(|&p| {
            if p == NONE {
                [255; 3]
            } else {
                let c = t.coord(p);
                [c[0] as u8, c[1] as u8, c[2] as u8]
            }
        })
        .collect();
    (0..n)
        .into_par_iter()
        .map(|s| {
            let mut ports = vec![NO_ROUTE; len];
            // Local deliveries always, whether or not the switch is placed.
            for &(lid, port, _) in &dest[s] {
                if let Some(slot) = ports.get_mut(lid as usize) {
                    *slot = port;
                }
            }
            let sp = t.pos_of[s];
            if sp != NONE {
                let groups: [&[u8]; 6] =
                    std::array::from_fn(|k| t.ports[sp as usize][k].as_slice());
                // Pristine DOR: the direction towards coordinate k of dimension d.
                let sc = coords[s];
                let table: Vec<Vec<u8>> = (0..3)
                    .map(|d| {
                        (0..t.radix[d])
                            .map(|k| {
                                if k == sc[d] as usize {
                                    NOWHERE
                                } else {
                                    (2 * d
                                        + pristine_sign(sc[d] as usize, k, t.radix[d], t.wrap[d]))
                                        as u8
                                }
                            })
                            .collect()
                    })
                    .collect();
                let row = dirs.map(|d| &d[s * n..(s + 1) * n]);
                for dst in 0..n {
                    let code = match row {
                        Some(r) => r[dst],
                        None => {
                            let dc = coords[dst];
                            if dc[0] == 255 {
                                NOWHERE
                            } else {
                                t.dims
                                    .iter()
                                    .find(|&&d| dc[d] != sc[d])
                                    .map_or(HERE, |&d| table[d][dc[d] as usize])
                            }
                        }
                    };
                    if code == HERE || code == NOWHERE {
                        continue;
                    }
                    let group = groups[code as usize];
                    let lids = &flat[start[dst]..start[dst + 1]];
                    match group.len() {
                        0 => {}
                        1 => {
                            for &(lid, _) in lids {
                                if let Some(slot) = ports.get_mut(lid as usize) {
                                    *slot = group[0];
                                }
                            }
                        }
                        g => {
                            for &(lid, rank) in lids {
                                if let Some(slot) = ports.get_mut(lid as usize) {
                                    *slot = group[rank as usize % g];
                                }
                            }
                        }
                    }
                }
            }
            Lft {
                node: graph.switch_nodes[s],
                ports: ports.into(),
            }
        })
        .collect()
}

/// Path SLs from torus coordinates alone: bit `d` is set when the pristine
/// DOR path crosses the dateline of dimension `d`. Failures never change it.
#[derive(Debug, Clone)]
pub struct TorusSl {
    /// Coordinates of the switch each LID enters the torus at (`[255; 3]` = unknown).
    pub coord: Vec<[u8; 3]>,
    /// Radix per dimension.
    pub radix: [usize; 3],
    /// Dimensions with a dateline.
    pub wrap: [bool; 3],
    /// The same SLs as a table over torus positions (see [`TorusSl::table`]),
    /// when it fits in [`SlTable::MAX_CLASSES`] (a 20x20x20 torus does).
    pub table: Option<RArc<SlTable>>,
}

impl TorusSl {
    /// SL for a pair of coordinates.
    #[inline]
    pub fn sl_between(&self, a: [u8; 3], b: [u8; 3]) -> u8 {
        let mut sl = 0;
        for d in 0..3 {
            if self.wrap[d] && crosses_dateline(a[d] as usize, b[d] as usize, self.radix[d]) {
                sl |= 1 << d;
            }
        }
        sl
    }

    /// Build from the torus: every LID delivered by a placed switch.
    pub fn new(fabric: &FabricSnapshot, t: &Torus, dest: &[DestLids]) -> TorusSl {
        let mut coord = vec![[255u8; 3]; fabric.max_lid as usize + 1];
        for (s, lids) in dest.iter().enumerate() {
            let p = t.pos_of[s];
            if p == NONE {
                continue;
            }
            let c = t.coord(p);
            for &(lid, _, _) in lids {
                if let Some(slot) = coord.get_mut(lid as usize) {
                    *slot = [c[0] as u8, c[1] as u8, c[2] as u8];
                }
            }
        }
        let mut sl = TorusSl {
            coord,
            radix: t.radix,
            wrap: t.wrap,
            table: None,
        };
        sl.table = sl.table().map(RArc::new);
        sl
    }

    /// The SLs by class, a class per torus position (x fastest) and one
    /// last for LIDs off the torus, which `path_sl` answers 0 to and from.
    /// Built row by row: a destination's row is the OR of three per-axis
    /// dateline vectors, so each entry is a couple of instructions.
    pub fn table(&self) -> Option<SlTable> {
        let [rx, ry, rz] = self.radix;
        let cells = rx * ry * rz;
        let n = cells + 1;
        // Without a dateline every path is on SL 0 (`uniform` says so).
        if n > SlTable::MAX_CLASSES || !self.wrap.iter().any(|&w| w) {
            return None;
        }
        let class_of: Vec<u32> = self
            .coord
            .iter()
            .map(|c| if c[0] == 255 { cells as u32 } else { (c[0] as usize + rx * (c[1] as usize + ry * c[2] as usize)) as u32 })
            .collect();
        let mut sl = vec![0u8; n * n];
        let axis = |d: usize, at: usize| -> Vec<u8> {
            (0..self.radix[d])
                .map(|from| (self.wrap[d] && crosses_dateline(from, at, self.radix[d])) as u8 * (1 << d))
                .collect()
        };
        sl[..cells * n].par_chunks_mut(n).enumerate().for_each(|(dc, row)| {
            let (dx, dy, dz) = (dc % rx, dc / rx % ry, dc / (rx * ry));
            let (cx, cy, cz) = (axis(0, dx), axis(1, dy), axis(2, dz));
            for z in 0..rz {
                for y in 0..ry {
                    let zy = cz[z] | cy[y];
                    let at = rx * (y + ry * z);
                    for (e, &c) in row[at..at + rx].iter_mut().zip(&cx) {
                        *e = zy | c;
                    }
                }
            }
        });
        Some(SlTable { class_of: class_of.into(), classes: n as u32, sl: sl.into() })
    }
}

impl PathSl for TorusSl {
    fn uniform(&self) -> abi_stable::std_types::ROption<u8> {
        if self.wrap.iter().any(|&w| w) {
            abi_stable::std_types::ROption::RNone
        } else {
            abi_stable::std_types::ROption::RSome(0)
        }
    }

    fn sl_table(&self) -> abi_stable::std_types::ROption<RArc<SlTable>> {
        self.table.clone().into()
    }

    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        let (Some(&a), Some(&b)) = (self.coord.get(slid as usize), self.coord.get(dlid as usize))
        else {
            return 0;
        };
        if a[0] == 255 || b[0] == 255 {
            return 0;
        }
        self.sl_between(a, b)
    }
}

/// What a switch port leads to, for SL2VL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortKind {
    /// The switch itself (port 0) or an end port.
    End,
    /// A torus link in this direction.
    Torus(Dir),
    /// A link to a switch outside the torus structure (not routed over).
    Other,
}

/// VL for `sl` entering on a port of kind `inp` and leaving on `out`:
/// bit 2 = QoS level (SL bit 3), bit 1 = first hop after a y-x, z-x or z-y
/// turn, bit 0 = the SL's dateline bit of the dimension travelled. End
/// ports carry the QoS level on VL 0/1.
#[inline]
pub fn vl_for(inp: Option<Dir>, out: Option<Dir>, out_is_end: bool, sl: u8) -> u8 {
    let qos = (sl >> 3) & 1;
    if out_is_end {
        return qos;
    }
    match out {
        Some(o) => {
            let od = o / 2;
            let illegal = matches!(inp, Some(i) if i / 2 > od) as u8;
            4 * qos + 2 * illegal + ((sl >> od) & 1)
        }
        None => 4 * qos,
    }
}

/// SL2VL maps for every switch (input port × output port) and end port.
pub fn sl2vl(fabric: &FabricSnapshot, graph: &Graph, t: &Torus) -> Vec<Sl2Vl> {
    let mut out = Vec::new();
    for (s, &node) in graph.switch_nodes.iter().enumerate() {
        let nd = &fabric.nodes[node as usize];
        let mut kinds: Vec<(u8, PortKind)> = vec![(0, PortKind::End)];
        for sp in &graph.sw_ports[s] {
            let k = if sp.peer_sw == NONE {
                PortKind::End
            } else {
                match t.port_dir[s].get(sp.port as usize).copied().flatten() {
                    Some(d) => PortKind::Torus(d),
                    None => PortKind::Other,
                }
            };
            kinds.push((sp.port, k));
        }
        let _ = nd;
        for &(ip, ik) in &kinds {
            let inp = match ik {
                PortKind::Torus(d) => Some(d),
                _ => None,
            };
            for &(op, ok) in &kinds {
                if op == 0 || op == ip {
                    continue;
                }
                let (o, end) = match ok {
                    PortKind::Torus(d) => (Some(d), false),
                    PortKind::End => (None, true),
                    PortKind::Other => (None, false),
                };
                let mut vl = [0u8; 16];
                for (sl, v) in vl.iter_mut().enumerate() {
                    *v = vl_for(inp, o, end, sl as u8);
                }
                out.push(Sl2Vl {
                    node,
                    in_port: ip,
                    out_port: op,
                    vl,
                });
            }
        }
    }
    for (i, nd) in fabric.nodes.iter().enumerate() {
        if nd.kind == NodeKind::Switch {
            continue;
        }
        for p in 1..=nd.num_ports {
            let port = &fabric.ports[(nd.first_port + p as u32) as usize];
            if port.peer == NONE {
                continue;
            }
            let mut vl = [0u8; 16];
            for (sl, v) in vl.iter_mut().enumerate() {
                *v = ((sl >> 3) & 1) as u8;
            }
            out.push(Sl2Vl {
                node: i as u32,
                in_port: 0,
                out_port: p,
                vl,
            });
        }
    }
    out
}

/// Switch number of a position (for tests and multicast).
pub fn sw_at(t: &Torus, c: [usize; 3]) -> Sw {
    t.sw_at[t.pos(c) as usize]
}
