//! The unicast routing cache (OpenSM's `use_ucast_cache`).
//!
//! When a host reboots, or a leaf switch with its hosts goes away or comes
//! back, the routes between everything else do not need to change. The
//! cache keeps the last routing the engine chain produced (the
//! [`AcceptedRouting`] itself, shared, not a copy), and a heavy sweep whose fabric is the cached one minus end ports (or switches
//! nothing else routes through) reuses it instead of routing again: the
//! tables are already in the switches, so nothing but port states is
//! written. It is still judged by the same verification gate on the fabric
//! as it is now; if that fails (a spine is gone and paths crossed it), or
//! anything new appeared (a switch-to-switch link, a port with another LID
//! or another place), the chain routes afresh and that becomes the cache.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use sm_abi::abi_stable::std_types::{ROption, RVec};
use sm_abi::{FabricSnapshot, Lft, NodeKind, Port, PortState, Routing, Sl2Vl, VlArb, NONE, NO_ROUTE};
use smcore_kit::Verification;

use crate::engines::chain::GateOptions;
use crate::routing::AcceptedRouting;

/// A switch port or end port, by GUID.
type End = (u64, u8);

/// The last routing computed: the accepted routing itself, with what tells
/// whether it still applies.
pub struct UcastCache {
    routing: Arc<AcceptedRouting>,
    /// Switch GUID → its node in the cached routing's snapshot.
    switches: HashMap<u64, u32>,
    switch_links: BTreeSet<(End, End)>,
    /// End port GUID → (switch GUID, switch port, base LID).
    end_ports: HashMap<u64, (u64, u8, u16)>,
    /// The gate the routing passed: its verification stands for another
    /// sweep only under the same one.
    gate: GateOptions,
}

impl std::fmt::Debug for UcastCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UcastCache").field("engine", &self.routing.engine).field("switches", &self.switches.len()).finish()
    }
}

fn switch_links(f: &FabricSnapshot) -> BTreeSet<(End, End)> {
    let mut out = BTreeSet::new();
    for p in f.ports.iter().filter(|p| p.peer != NONE) {
        let q = &f.ports[p.peer as usize];
        let (a, b) = (&f.nodes[p.node as usize], &f.nodes[q.node as usize]);
        if a.kind == NodeKind::Switch && b.kind == NodeKind::Switch {
            let (x, y) = ((a.guid, p.num), (b.guid, q.num));
            out.insert(if x < y { (x, y) } else { (y, x) });
        }
    }
    out
}

fn end_ports(f: &FabricSnapshot) -> HashMap<u64, (u64, u8, u16)> {
    let mut out = HashMap::new();
    for i in f.end_ports() {
        let p = &f.ports[i as usize];
        if p.peer == NONE || p.lid == 0 {
            continue;
        }
        let q = &f.ports[p.peer as usize];
        out.insert(p.guid, (f.nodes[q.node as usize].guid, q.num, p.lid));
    }
    out
}

impl UcastCache {
    /// Keeps `routing`, as the chain computed it (not one reused from the
    /// cache: that would tie a reuse to a reuse) and judged it by `gate`.
    pub fn keep(routing: Arc<AcceptedRouting>, gate: GateOptions) -> UcastCache {
        let fabric = &routing.snapshot;
        UcastCache {
            switches: fabric
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.kind == NodeKind::Switch)
                .map(|(i, n)| (n.guid, i as u32))
                .collect(),
            switch_links: switch_links(fabric),
            end_ports: end_ports(fabric),
            routing,
            gate,
        }
    }

    /// The routing kept.
    pub fn routing(&self) -> &Arc<AcceptedRouting> {
        &self.routing
    }

    /// The engine that computed it.
    pub fn engine(&self) -> &str {
        &self.routing.engine
    }

    /// Whether that engine promises deadlock freedom (for the gate).
    pub fn deadlock_free(&self) -> bool {
        self.routing.deadlock_free
    }

    /// The LinearFDBTop the cached tables were written with: kept while the
    /// cache applies, so a host with the highest LID going away does not
    /// make every switch's top (and last block) change.
    pub fn max_lid(&self) -> u16 {
        self.routing.linear_fdb_top
    }

    /// Whether `fabric` is the cached fabric minus some of its parts, with
    /// every LID where it was; otherwise why not.
    pub fn applies_to(&self, fabric: &FabricSnapshot) -> Result<(), String> {
        if let Some(l) = switch_links(fabric).difference(&self.switch_links).next() {
            return Err(format!("new link between switches {:#018x}/{} and {:#018x}/{}", l.0 .0, l.0 .1, l.1 .0, l.1 .1));
        }
        for n in fabric.nodes.iter().filter(|n| n.kind == NodeKind::Switch) {
            if self.switches.get(&n.guid).and_then(|&i| self.routing.lft(i)).is_none() {
                return Err(format!("new switch {:#018x}", n.guid));
            }
        }
        for (guid, place) in end_ports(fabric) {
            match self.end_ports.get(&guid) {
                Some(cached) if *cached == place => {}
                Some(_) => return Err(format!("port {guid:#018x} moved or changed LID")),
                None => return Err(format!("new port {guid:#018x}")),
            }
        }
        Ok(())
    }

    /// The verification the cached routing passed, when `fabric` is the
    /// fabric it was judged on in everything the verifier reads and `gate`
    /// is the gate it passed: a host that rebooted, or came back to where
    /// it was. The routing is then the same one on the same fabric, and
    /// verifying it again would only repeat the verdict. Port states count
    /// as down or not (a port back from a reboot is Armed, not Active).
    pub fn verification_for(&self, fabric: &FabricSnapshot, gate: &GateOptions) -> Option<&Verification> {
        let judged = &self.routing.snapshot;
        let same_port = |a: &Port, b: &Port| {
            let down = |p: &Port| p.state == PortState::Down;
            Port { state: b.state, ..a.clone() } == *b && down(a) == down(b)
        };
        let same = *gate == self.gate
            && fabric.lmc == judged.lmc
            && fabric.max_lid == judged.max_lid
            && fabric.sm_node == judged.sm_node
            && fabric.nodes == judged.nodes
            && fabric.ports.len() == judged.ports.len()
            && fabric.ports.iter().zip(judged.ports.iter()).all(|(a, b)| same_port(a, b));
        same.then_some(&self.routing.verification)
    }

    /// The cached routing in `fabric`'s node numbering, with the engine's
    /// SL2VL and VLArb tables (QoS adds its own again on the fabric as it
    /// is now) and path SLs answered by the cached routing's oracle.
    pub fn routing_for(&self, fabric: &FabricSnapshot) -> Routing {
        let cached = &self.routing;
        let guid = |node: u32| cached.snapshot.nodes.get(node as usize).map(|n| n.guid).unwrap_or(0);
        let index: HashMap<u64, u32> = fabric.nodes.iter().enumerate().map(|(i, n)| (n.guid, i as u32)).collect();
        let top = usize::from(self.max_lid().max(fabric.max_lid)) + 1;
        let lfts = fabric
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let mut ports = cached.lft(*self.switches.get(&n.guid)?)?.to_vec();
                ports.resize(top, NO_ROUTE);
                Some(Lft { node: i as u32, ports: RVec::from(ports) })
            })
            .collect::<Vec<_>>();
        let sl2vl = cached
            .engine_sl2vl()
            .iter()
            .filter_map(|s| Some(Sl2Vl { node: *index.get(&guid(s.node))?, ..s.clone() }))
            .collect::<Vec<_>>();
        let vlarb = cached
            .engine_vlarb()
            .iter()
            .filter_map(|v| Some(VlArb { node: *index.get(&guid(v.node))?, ..v.clone() }))
            .collect::<Vec<_>>();
        Routing {
            lfts: lfts.into(),
            path_sl: cached.routing.path_sl.clone(),
            sl2vl: sl2vl.into(),
            vlarb: vlarb.into(),
            mcast_tree: ROption::RNone,
            vls_used: cached.routing.vls_used,
            diagnostics: RVec::new(),
        }
    }
}
