//! Per-path-SL channel dependencies of the destinations alone on their
//! switch (a torus with one CA per switch) in the common case (every
//! switch of their part of the fabric forwards them one hop nearer),
//! worked out for blocks of destinations at once, one bit per
//! destination, rather than by walking each destination's tree. A
//! switch's several destinations keep the walk, whose sharing between
//! them (see [`super::WalkRef`]) bit sets cannot match.
//!
//! A path's state as it crosses a link is (input port of the switch it
//! enters, SL, VL of the link). The states of a block are kept per switch
//! as bit sets over the block's destinations: a destination's bit in
//! state (p, SL, VL) of switch `n` says some path to it enters `n` by `p`
//! on that SL and VL. A switch sends a state's destinations out of each
//! port as its LFT says (the bits of the port's destinations, ANDed in),
//! each on the VL its map gives for (p, port, SL): one dependency per
//! (state, port) that carries any destination, and a state of the next
//! switch. Sources start states by their entry class (see
//! [`super::entry_classes`]), SL by SL, as the walk's seeds do.
//!
//! Each destination's bit enters a state once whatever the order the
//! states are taken in (the states only grow), so sweeps over the
//! switches, each sending on the bits its states got since the last,
//! reach the same sets, dependencies and VLs as the walk of every tree:
//! the walk's states at a switch are these sets' bits for one
//! destination. What the walk counts (pairs, hops, loads) does not
//! depend on SLs and is counted by [`Ctx::counts_alone`].
//!
//! A VL violation (a VL the port does not operate, or VL 15) is not
//! counted here: the verification is then made again by the walk, which
//! counts and describes each.

use rayon::prelude::*;

use super::{Code, Ctx, Sw, IDENTITY_NIBBLES, PORT_BIT};

/// Destinations per block: a state's bits fill at most `BLOCK / 64`
/// words, and the blocks (a few per thread on a torus of a thousand
/// switches) run in parallel.
pub(super) const BLOCK: usize = 256;
const WORDS: usize = BLOCK / 64;

/// A state key: a source's (entry class, SL) when `SEED` is set, else
/// (input port, SL, VL).
const SEED: u32 = 1 << 16;

fn key(port_or_class: u32, sl: u32, vl: u32) -> u32 {
    (port_or_class & 0xFF) << 8 | (sl & 15) << 4 | (vl & 15)
}

/// One block's states.
struct States<'a> {
    w: usize,
    /// Per switch, its states' slots, in the order they came.
    slots: Vec<Vec<u32>>,
    /// Per (switch, way in, SL), the first slot of its states (one per
    /// VL), `NO_SLOT` when none: `head_at` per switch, then 16 per way in
    /// (its input ports, then `side` on, its sources' entry classes).
    side: &'a [u32],
    head_at: Vec<usize>,
    head: Vec<u32>,
    /// Per slot, its switch and key, its head, and the next slot of its
    /// head,
    at: Vec<(Sw, u32)>,
    head_of: Vec<u32>,
    next: Vec<u32>,
    /// and `w` words of every bit the state has had, then `w` of those
    /// not sent on yet.
    bits: Vec<u64>,
    queued: Vec<bool>,
    /// Per switch, whether some state of it has bits not sent on.
    pending: Vec<bool>,
}

const NO_SLOT: u32 = u32::MAX;

impl<'a> States<'a> {
    /// `side[n]`: switch `n`'s ports; `classes[n]`: its sources' entry
    /// classes.
    fn new(side: &'a [u32], classes: &[usize]) -> States<'a> {
        let nsw = side.len();
        let mut head_at = Vec::with_capacity(nsw);
        let mut len = 0;
        for (&k, &c) in side.iter().zip(classes) {
            head_at.push(len);
            len += (k as usize + c) * 16;
        }
        // A few dozen states per switch on a torus (input ports by SLs
        // by VLs): room for them at once spares copying them as they come.
        let slots = nsw * 32;
        States {
            w: 0,
            side,
            slots: vec![Vec::new(); nsw],
            head_at,
            head: vec![NO_SLOT; len],
            at: Vec::with_capacity(slots),
            head_of: Vec::with_capacity(slots),
            next: Vec::with_capacity(slots),
            bits: Vec::with_capacity(slots * 2 * WORDS),
            queued: Vec::with_capacity(slots),
            pending: vec![false; nsw],
        }
    }

    /// No states, for a block of `w` words; what was allocated is kept
    /// (a fresh page costs the kernel's zeroing at its first write).
    fn reset(&mut self, w: usize) {
        self.w = w;
        // Only what the last block used: a fabric of many switches has
        // far more heads than states.
        for &h in &self.head_of {
            self.head[h as usize] = NO_SLOT;
        }
        for &(n, _) in &self.at {
            self.slots[n as usize].clear();
        }
        self.head_of.clear();
        self.at.clear();
        self.next.clear();
        self.bits.clear();
        self.queued.clear();
        self.pending.fill(false);
    }

    /// The slot of state `key` of switch `n`.
    fn slot(&mut self, n: Sw, key: u32) -> usize {
        let port_or_class = (key >> 8 & 0xFF) as usize;
        let way = match key & SEED {
            0 => port_or_class,
            _ => self.side[n as usize] as usize + port_or_class,
        };
        let h = self.head_at[n as usize] + way * 16 + (key >> 4 & 15) as usize;
        let mut at = self.head[h];
        while at != NO_SLOT {
            if self.at[at as usize].1 == key {
                return at as usize;
            }
            at = self.next[at as usize];
        }
        let slot = self.at.len();
        self.head_of.push(h as u32);
        self.next.push(self.head[h]);
        self.head[h] = slot as u32;
        self.slots[n as usize].push(slot as u32);
        self.at.push((n, key));
        self.queued.push(false);
        self.bits.resize(self.bits.len() + 2 * self.w, 0);
        slot
    }

    /// ORs `add` into word `from` on of state `key` of switch `n`,
    /// queueing it when that brings it new bits.
    fn add(&mut self, n: Sw, key: u32, from: usize, add: &[u64]) {
        let slot = self.slot(n, key);
        let w = self.w;
        let (all, new) = self.bits[slot * 2 * w..(slot + 1) * 2 * w].split_at_mut(w);
        let mut any = 0;
        for ((a, f), &x) in all[from..].iter_mut().zip(new[from..].iter_mut()).zip(add) {
            let fresh = x & !*a;
            *a |= fresh;
            *f |= fresh;
            any |= fresh;
        }
        if any != 0 {
            self.queued[slot] = true;
            self.pending[n as usize] = true;
        }
    }

    /// The bits of `slot` not sent on yet, taken.
    fn take_new(&mut self, slot: usize, out: &mut [u64; WORDS]) {
        let w = self.w;
        let new = &mut self.bits[slot * 2 * w + w..(slot + 1) * 2 * w];
        out[..w].copy_from_slice(new);
        new.fill(0);
        self.queued[slot] = false;
    }
}

/// What a thread's blocks work in, kept from one block to the next.
struct Scratch<'a> {
    states: States<'a>,
    /// Per (switch, output port) the words of the destinations the LFT
    /// sends there (`out_at` per switch, room for a whole block), and per
    /// switch the ports that send any, as bits (all from 63 on).
    outs: Vec<u64>,
    out_at: Vec<usize>,
    live: Vec<u64>,
}

/// The bits of `bytes` equal to `v`.
#[inline]
fn eq_mask(bytes: &[u8; 64], v: u8) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
        let mut m = 0u64;
        // SAFETY: the build enables SSE2 (every x86-64 has it), and each
        // unaligned load reads 16 of the array's 64 bytes.
        unsafe {
            let want = _mm_set1_epi8(v as i8);
            for (i, chunk) in bytes.chunks_exact(16).enumerate() {
                let x = _mm_loadu_si128(chunk.as_ptr() as *const __m128i);
                m |= (_mm_movemask_epi8(_mm_cmpeq_epi8(x, want)) as u16 as u64) << (16 * i);
            }
        }
        m
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        bytes.iter().enumerate().fold(0, |m, (b, &x)| m | ((x == v) as u64) << b)
    }
}

impl Ctx<'_> {
    /// The dependencies of destinations `dests` (lid, port, switch), each
    /// in the common case, into the shared bits; gives the highest VL
    /// their paths use plus one, or None on a VL violation.
    pub(super) fn rounds(&self, dests: &[(u16, u32, Sw)]) -> Option<u8> {
        let sl_max = self.rounds?;
        let nsw = self.graph.switch_count();
        let side = &self.pairs.side;
        // Per switch, its sources' entry classes (their maps to every port
        // are what `seed_maps` holds of it).
        let classes: Vec<usize> = (0..nsw)
            .map(|n| {
                let end = self.seed_base.get(n + 1).map_or(self.seed_maps.len(), |&b| b as usize);
                (end - self.seed_base[n] as usize) / (side[n] as usize).max(1)
            })
            .collect();
        let scratch = || {
            let mut out_at = Vec::with_capacity(nsw);
            let mut words = 0usize;
            for &k in side.iter() {
                out_at.push(words);
                words += k as usize * WORDS;
            }
            Scratch { states: States::new(side, &classes), outs: vec![0; words], out_at, live: vec![0; nsw] }
        };
        dests
            .par_chunks(BLOCK)
            .map_init(scratch, |sc, block| self.rounds_block(block, sl_max, sc))
            .try_reduce(|| 0, |a, b| Some(a.max(b)))
    }

    fn rounds_block(&self, block: &[(u16, u32, Sw)], sl_max: u8, sc: &mut Scratch) -> Option<u8> {
        let (deps, table) = (self.deps?, self.table?);
        let nsw = self.graph.switch_count();
        let w = block.len().div_ceil(64);
        let side = &self.pairs.side;
        let rows: Vec<&[u8]> = block.iter().map(|&(lid, _, _)| table.row(table.class(lid))).collect();
        // Per (switch, output port): the destinations its LFT sends there
        // (every word a port's destinations take is written below).
        let Scratch { states: st, outs, out_at, live } = sc;
        live.fill(0);
        st.reset(w);
        // The block's components, each with its destinations as bits per
        // word, by component, when it spans several (a partitioned fabric):
        // a switch sends only the destinations of its own. Made once here,
        // read for every switch below.
        let mut comp_bits: Vec<(u32, [u64; WORDS])> = Vec::new();
        for (j, &(_, _, t)) in block.iter().enumerate() {
            let c = self.component[t as usize];
            let at = comp_bits.binary_search_by_key(&c, |e| e.0).unwrap_or_else(|at| {
                comp_bits.insert(at, (c, [0; WORDS]));
                at
            });
            comp_bits[at].1[j / 64] |= 1 << (j % 64);
        }
        let several = comp_bits.len() > 1;
        let in_comp = |c: u32, word: usize| -> u64 {
            if !several {
                return u64::MAX;
            }
            comp_bits.binary_search_by_key(&c, |e| e.0).map_or(0, |at| comp_bits[at].1[word])
        };
        let mut bytes = [0u8; 64];
        for n in 0..nsw {
            let (row, cn, k) = (self.lfts[n], self.component[n], side[n] as usize);
            let at = out_at[n];
            for (word, part) in block.chunks(64).enumerate() {
                for (b, &(lid, _, _)) in bytes.iter_mut().zip(part) {
                    *b = row.get(lid as usize).copied().unwrap_or(0);
                }
                // Past the block's end: port 0, never a port sent to here.
                bytes[part.len()..].fill(0);
                let keep = in_comp(cn, word);
                for q in 1..k {
                    let m = eq_mask(&bytes, q as u8) & keep;
                    outs[at + q * WORDS + word] = m;
                    live[n] |= ((m != 0) as u64) << q.min(63);
                }
            }
        }

        // Sources' states: away from the destination's switch a group of
        // sources (see [`super::SeedGroups`]) is one state per SL. The
        // block's SL-table rows are read 64 destinations at a time, for
        // every switch: 64 lines, which stay in the cache.
        for (jw, part) in block.chunks(64).enumerate() {
            let j0 = jw * 64;
            for (s, &cs) in self.component.iter().enumerate().take(nsw) {
                let groups = self.seed_groups.at(s as Sw);
                if groups.is_empty() {
                    continue;
                }
                // The destinations of another component, or on `s`.
                let mut skip = !in_comp(cs, jw);
                for (b, &(_, _, t)) in part.iter().enumerate() {
                    skip |= ((t as usize == s) as u64) << b;
                }
                skip |= u64::MAX.checked_shl(part.len() as u32).unwrap_or(0);
                for &(class, sl_class, _) in groups {
                    for (b, j) in bytes.iter_mut().zip(j0..j0 + part.len()) {
                        *b = rows[j].get(sl_class as usize).copied().unwrap_or(0);
                    }
                    for sl in 0..=sl_max {
                        let m = eq_mask(&bytes, sl) & !skip;
                        if m != 0 {
                            st.add(s as Sw, SEED | key(class, sl as u32, 0), jw, &[m]);
                        }
                    }
                }
            }
        }
        // On the destination's switch, every source but the destination,
        // each by its own entry class and each LID's SL.
        let mut one = [0u64; WORDS];
        for (j, &(_, dest_port, t)) in block.iter().enumerate() {
            one[..w].fill(0);
            one[j / 64] = 1 << (j % 64);
            let range = self.sources.range(t);
            for (&sp, src) in self.sources.ports[range.clone()].iter().zip(&self.seed_src[range]) {
                if sp == dest_port {
                    continue;
                }
                for off in 0..src.lids {
                    let sl = rows[j].get(table.class(src.lid.wrapping_add(off)) as usize).copied().unwrap_or(0);
                    st.add(t, SEED | key(src.class, sl as u32, 0), 0, &one[..w]);
                }
            }
        }

        let mut top = 0u8;
        let mut new = [0u64; WORDS];
        let mut sent = [0u64; WORDS];
        // Sweeps over the switches, each taking every state of a switch
        // with bits not sent on (its port sets, maps and codes then serve
        // them all), forwards and backwards in turn, until none has any.
        let mut forward = true;
        // Blocks start their sweeps at switches far apart: the threads
        // then mostly write different switches' dependency bits, where in
        // step they would take each other's cache lines at every write.
        let offset = (block.first().map_or(0, |d| d.0 as usize) * 2_654_435_761) % nsw.max(1);
        loop {
            let mut swept = false;
            for i in 0..nsw {
                let i = (i + offset) % nsw;
                let nu = if forward { i } else { nsw - 1 - i };
                if !std::mem::take(&mut st.pending[nu]) {
                    continue;
                }
                swept = true;
                for e in 0..st.slots[nu].len() {
                    let slot = st.slots[nu][e] as usize;
                    let k = st.at[slot].1;
                    if !st.queued[slot] {
                        continue;
                    }
                    st.take_new(slot, &mut new);
                    let n = nu as Sw;
                    let (seed, pc, sl, vl_in) = (k & SEED != 0, (k >> 8 & 0xFF) as u8, k >> 4 & 15, (k & 15) as u8);
                    let (sd, codes) = (side[nu] as usize, self.hops.row(n));
                    let at = out_at[nu];
                    for q in (1..sd).filter(|&q| live[nu] >> q.min(63) & 1 != 0) {
                        let to = &outs[at + q * WORDS..at + q * WORDS + w];
                        let mut any = 0;
                        for ((c, &a), &b) in sent.iter_mut().zip(&new[..w]).zip(to) {
                            *c = a & b;
                            any |= *c;
                        }
                        if any == 0 {
                            continue;
                        }
                        let (map, rec) = if seed {
                            let i = self.seed_base[nu] as usize + pc as usize * sd + q;
                            (self.seed_maps.get(i).copied().unwrap_or(IDENTITY_NIBBLES), None)
                        } else {
                            let rec = deps.record_of(nu, pc, q as u8);
                            (deps.map(rec), Some(rec))
                        };
                        let vl = (map >> (4 * sl) & 15) as u8;
                        let code = Code::of(codes, q as u8);
                        if vl >= 15 || vl >= code.op_vls() {
                            return None;
                        }
                        top = top.max(vl + 1);
                        if let Some(rec) = rec.filter(|_| (vl_in as u32) < self.vls && (vl as u32) < self.vls) {
                            deps.or_dep(rec, vl, vl_in);
                        }
                        if code.target() & PORT_BIT == 0 {
                            st.add(code.target(), key(code.entered() as u32, sl, vl as u32), 0, &sent[..w]);
                        }
                    }
                }
            }
            if !swept {
                break;
            }
            forward = !forward;
        }
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::eq_mask;

    /// The SSE2 compare gives what comparing byte by byte gives.
    #[test]
    fn eq_mask_marks_exactly_the_equal_bytes() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..200 {
            let mut bytes = [0u8; 64];
            for b in bytes.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Few values, so that most draws repeat some; 255 too.
                *b = if round % 7 == 0 { 255 } else { (seed % 9) as u8 };
            }
            for v in [0u8, 1, 3, 8, 15, 255] {
                let want = bytes.iter().enumerate().fold(0u64, |m, (i, &x)| m | ((x == v) as u64) << i);
                assert_eq!(eq_mask(&bytes, v), want, "round {round}, value {v}");
            }
        }
    }
}
