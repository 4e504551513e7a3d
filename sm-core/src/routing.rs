//! The routing in force: one value from the verify gate to everyone who
//! needs it.
//!
//! A routing that passed the gate (freshly computed, or reused from the
//! unicast cache and judged again) becomes one [`AcceptedRouting`], behind
//! one `Arc`: programming writes it, the SA answers PathRecord SLs and
//! LFT records from it, the unicast cache keeps it for later sweeps, the
//! daemon, the console and the metrics read it. Nobody holds a copy of its
//! tables, so no two of them can disagree about what is in the switches.

use sm_abi::abi_stable::std_types::ROption;
use sm_abi::{FabricSnapshot, PreviousLft, PreviousRouting, Routing, Sl2Vl, VlArb, NONE};
use smcore_kit::Verification;

use crate::engines::chain::Routed;

/// A routing that passed the gate, with the fabric it was judged on.
pub struct AcceptedRouting {
    /// The engine that computed it (also when reused from the cache).
    pub engine: String,
    /// Whether that engine promises deadlock freedom (the gate's rule for
    /// a reused routing).
    pub deadlock_free: bool,
    /// LFTs, path-SL oracle, SL2VL and VLArb (the QoS tables included),
    /// multicast tree, in the node numbering of [`Self::snapshot`].
    pub routing: Routing,
    /// Its verification (credit loops may be present if tolerated).
    pub verification: Verification,
    /// The fabric it was judged on (node `i` is node `i` of the sweep's
    /// fabric).
    pub snapshot: FabricSnapshot,
    /// LinearFDBTop the switches are programmed with.
    pub linear_fdb_top: u16,
    /// Reused from the unicast cache rather than routed by this sweep.
    pub from_cache: bool,
    /// How many of `routing.sl2vl` and `routing.vlarb` the engine gave:
    /// those come first, the QoS tables follow.
    engine_tables: (usize, usize),
    /// Per node of `snapshot`, its index in `routing.lfts` (`NONE`: no LFT).
    lft_index: Vec<u32>,
}

impl std::fmt::Debug for AcceptedRouting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcceptedRouting")
            .field("engine", &self.engine)
            .field("from_cache", &self.from_cache)
            .field("lfts", &self.routing.lfts.len())
            .field("linear_fdb_top", &self.linear_fdb_top)
            .finish()
    }
}

impl AcceptedRouting {
    /// The chain's accepted routing on `snapshot`. `engine_tables` counts
    /// the SL2VL and VLArb entries the engine gave, before QoS appended
    /// its own (see [`Self::engine_sl2vl`]).
    pub fn new(
        routed: Routed,
        snapshot: FabricSnapshot,
        linear_fdb_top: u16,
        deadlock_free: bool,
        from_cache: bool,
        engine_tables: (usize, usize),
    ) -> Self {
        let mut lft_index = vec![NONE; snapshot.nodes.len()];
        for (i, lft) in routed.routing.lfts.iter().enumerate() {
            if let Some(slot) = lft_index.get_mut(lft.node as usize) {
                *slot = i as u32;
            }
        }
        AcceptedRouting {
            engine: routed.engine,
            deadlock_free,
            routing: routed.routing,
            verification: routed.verification,
            snapshot,
            linear_fdb_top,
            from_cache,
            engine_tables,
            lft_index,
        }
    }

    /// Its LFTs as the previous routing of a re-route (sm-abi 1.3): by
    /// switch GUID, since node indices change between snapshots.
    pub fn previous(&self) -> PreviousRouting {
        let lfts = self
            .routing
            .lfts
            .iter()
            .filter_map(|l| {
                let node = self.snapshot.nodes.get(l.node as usize)?;
                Some(PreviousLft { guid: node.guid, ports: l.ports.clone() })
            })
            .collect::<Vec<_>>();
        PreviousRouting { engine: self.engine.as_str().into(), lfts: lfts.into() }
    }

    /// The LFT of node `node` (by LID), if it has one.
    pub fn lft(&self, node: u32) -> Option<&[u8]> {
        let i = *self.lft_index.get(node as usize)?;
        (i != NONE).then(|| &self.routing.lfts[i as usize].ports[..])
    }

    /// The SL the routing gives the path `slid` → `dlid`: the engine's own
    /// oracle, asked directly.
    pub fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        self.routing.path_sl.path_sl(slid, dlid)
    }

    /// The SL of every path, when the routing uses one.
    pub fn uniform_sl(&self) -> Option<u8> {
        match self.routing.path_sl.uniform() {
            ROption::RSome(sl) => Some(sl),
            ROption::RNone => None,
        }
    }

    /// The SL2VL maps the engine gave (without QoS's).
    pub fn engine_sl2vl(&self) -> &[Sl2Vl] {
        &self.routing.sl2vl[..self.engine_tables.0.min(self.routing.sl2vl.len())]
    }

    /// The VLArb tables the engine gave (without QoS's).
    pub fn engine_vlarb(&self) -> &[VlArb] {
        &self.routing.vlarb[..self.engine_tables.1.min(self.routing.vlarb.len())]
    }
}
