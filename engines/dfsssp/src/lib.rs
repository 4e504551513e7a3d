//! smcore routing engines `sssp` and `dfsssp`: OpenSM's (Deadlock-Free)
//! Single-Source-Shortest-Path routing (Domke, Hoefler, Nagel, IPDPS 2011).
//!
//! **sssp** routes one destination LID at a time (every CA LID, every LID
//! of a port with LMC > 0, every switch LID) with Dijkstra over the switch
//! graph, and after each destination adds the routes just placed to the
//! weights of the channels they use, so the routing is balanced globally
//! rather than per switch port ([`sssp`]). Destinations are routed in
//! OpenSM's priority order: ports listed in `cn_guid_file` first, then those
//! in `io_guid_file`, then other end ports, switches' own LIDs last, each
//! group switch by switch (switches with the most end ports first). The
//! result has no forwarding loops and near-shortest paths but may have
//! credit loops on fabrics with cycles (tori, random graphs).
//!
//! **dfsssp** routes exactly as sssp and then gives every (source,
//! destination) path a virtual layer so that the channel dependency graph
//! of every layer is acyclic ([`layers`], with the incremental cycle check
//! of [`cdg`]). The path's SL is its layer's VL; every port gets an SL2VL
//! map sending SL i to VL i, so the credit-loop freedom holds on the wire.
//! Layers are limited by the operational VLs of the fabric (the fewest any
//! linked port operates, at most 8). When the paths do not fit, dfsssp
//! tries, in this order: placing them longest first instead of in routing
//! order; switch LIDs reusing the tree of their switch's first end port
//! (CA-to-CA routes unchanged, a third fewer distinct paths on a torus
//! with two hosts per switch, and on fat trees every path to a leaf
//! switch up*/down*);
//! one tree per destination switch. Each step is reported in the
//! diagnostics. Only when all fail does the engine return an error naming
//! a path that fits no layer, and the core's chain falls through.
//!
//! Sizes: the path SL table is one byte per (switch, LID), 3.7 MB for a
//! 16-ary 3-tree with 4,096 CAs; paths are walked from the forwarding
//! tables when needed rather than stored.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Deserialize;
use sm_abi::abi_stable::std_types::ROption;
use sm_abi::{
    path_sl_box, EngineError, FabricSnapshot, Level, Lft, NodeKind, PathSl, Routing, RoutingEngine,
    Sl2Vl, NONE,
};
use smcore_kit::config::{self, read_guid_list};
use smcore_kit::graph::{usable, Graph, Sw};

pub mod cdg;
pub mod layers;
pub mod net;
pub mod sssp;

use layers::Order;
use net::Net;
use sssp::{Class, Share, Tables};

/// Options of both engines, named as OpenSM's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SsspConfig {
    /// Port GUIDs of compute nodes, balanced first (OpenSM `cn_guid_file`, `-u`).
    pub cn_guid_file: Option<PathBuf>,
    /// Port GUIDs of I/O nodes, balanced after the compute nodes
    /// (OpenSM `io_guid_file`, `-G`).
    pub io_guid_file: Option<PathBuf>,
}

/// Most VLs the layers may use: data VLs 0..7 are what every IB switch in
/// practice operates; VL 15 is management.
pub const MAX_LAYERS: u8 = 8;

/// The sssp engine.
#[derive(Debug, Clone, Default)]
pub struct Sssp {
    cfg: SsspConfig,
}

/// The dfsssp engine.
#[derive(Debug, Clone, Default)]
pub struct Dfsssp {
    cfg: SsspConfig,
}

impl Sssp {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<Sssp, EngineError> {
        Ok(Sssp {
            cfg: config::parse("sssp", text)?,
        })
    }
    /// Build from parsed options.
    pub fn new(cfg: SsspConfig) -> Sssp {
        Sssp { cfg }
    }
}

impl Dfsssp {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<Dfsssp, EngineError> {
        Ok(Dfsssp {
            cfg: config::parse("dfsssp", text)?,
        })
    }
    /// Build from parsed options.
    pub fn new(cfg: SsspConfig) -> Dfsssp {
        Dfsssp { cfg }
    }
}

/// What the shared routing step produces.
pub struct Routed {
    /// The routing view.
    pub graph: Graph,
    /// Channels.
    pub net: Net,
    /// Forwarding decisions.
    pub tables: Tables,
    /// Messages for the admin.
    pub notes: Vec<(Level, String)>,
}

/// Route with SSSP: the part both engines share.
///
/// `share`: which LIDs of a switch reuse an earlier LID's tree (see
/// [`sssp::route`]).
pub fn route_sssp(
    engine: &str,
    cfg: &SsspConfig,
    fabric: &FabricSnapshot,
    share: Share,
) -> Result<Routed, EngineError> {
    let graph = Graph::new(fabric);
    if graph.switch_count() == 0 {
        return Err(EngineError::new(format!(
            "{engine}: the fabric has no switches"
        )));
    }
    let mut notes = Vec::new();
    let cn = guid_set(
        engine,
        &cfg.cn_guid_file,
        "cn_guid_file",
        fabric,
        &mut notes,
    )?;
    let io = guid_set(
        engine,
        &cfg.io_guid_file,
        "io_guid_file",
        fabric,
        &mut notes,
    )?;
    let net = Net::new(fabric, &graph);
    let order = sssp::routing_order(fabric, &graph, &net, &cn, &io);
    let count = |c: Class| order.iter().filter(|(_, k)| *k == c).count();
    if !cn.is_empty() || !io.is_empty() {
        notes.push((
            Level::Info,
            format!(
                "{engine}: balancing {} compute node ports first, then {} I/O node ports, then {} other end ports",
                count(Class::Compute),
                count(Class::Io),
                count(Class::Other)
            ),
        ));
    }
    let tables = sssp::route(fabric, &net, &order, share);
    Ok(Routed {
        graph,
        net,
        tables,
        notes,
    })
}

fn guid_set(
    engine: &str,
    path: &Option<PathBuf>,
    key: &str,
    fabric: &FabricSnapshot,
    notes: &mut Vec<(Level, String)>,
) -> Result<HashSet<u64>, EngineError> {
    let Some(p) = path else {
        return Ok(HashSet::new());
    };
    let list = read_guid_list(p).map_err(|e| EngineError::new(format!("{engine}: {key}: {e}")))?;
    for w in &list.warnings {
        notes.push((Level::Warn, format!("{engine}: {w}")));
    }
    let known: HashSet<u64> = fabric
        .ports
        .iter()
        .filter(|p| p.num != 0 && fabric.nodes[p.node as usize].kind.is_end_node())
        .map(|p| p.guid)
        .collect();
    let mut set = HashSet::new();
    for g in list.guids() {
        if known.contains(&g) {
            set.insert(g);
        } else {
            notes.push((
                Level::Warn,
                format!(
                    "{engine}: {}: 0x{g:016x} is not the port GUID of an end port in this fabric",
                    p.display()
                ),
            ));
        }
    }
    if set.is_empty() {
        notes.push((
            Level::Warn,
            format!(
                "{engine}: {} names no end port of this fabric; it has no effect",
                p.display()
            ),
        ));
    }
    Ok(set)
}

fn lfts_of(routed: &Routed) -> Vec<Lft> {
    routed
        .graph
        .switch_nodes
        .iter()
        .enumerate()
        .map(|(s, &node)| Lft {
            node,
            ports: routed.tables.lft(s as Sw).into(),
        })
        .collect()
}

impl RoutingEngine for Sssp {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let routed = route_sssp("sssp", &self.cfg, fabric, Share::Nothing)?;
        let mut routing = Routing::single_vl(lfts_of(&routed));
        for (level, m) in routed.notes {
            routing.diag(level, m);
        }
        Ok(routing)
    }

    /// Continuity (sm-abi 1.3): SSSP's paths are weighted, not least-hop: an entry
    /// stays while its port is healthy, broken ones take SSSP's own port;
    /// merged tables that loop or leave a pair unreachable give way to the
    /// fresh routing.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &sm_abi::PreviousRouting) -> Result<Routing, EngineError> {
        use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::Healthy, &ContinuityOptions { take_fresh: true, ..ContinuityOptions::default() }, "sssp"))
    }
}

/// The VLs every path can use: the fewest data VLs any linked port
/// operates (ports reporting 0 are unknown and ignored), at most
/// [`MAX_LAYERS`].
pub fn available_vls(fabric: &FabricSnapshot) -> u8 {
    fabric
        .ports
        .iter()
        .enumerate()
        .filter(|(i, p)| p.num != 0 && p.op_vls > 0 && usable(fabric, *i as u32))
        .map(|(_, p)| p.op_vls)
        .min()
        .unwrap_or(1)
        .clamp(1, MAX_LAYERS)
}

impl RoutingEngine for Dfsssp {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let vl_avail = available_vls(fabric);
        // OpenSM's routes first (one balanced tree per LID). When their
        // paths need more layers than the fabric has VLs, place them again
        // longest first, then route again with fewer distinct paths:
        // switch LIDs on the tree of their switch's first end port, then
        // one tree per destination switch.
        let mut failures: Vec<String> = Vec::new();
        let mut chosen = None;
        let mut ca_failed_in_order = false;
        'levels: for (share, what) in [
            (Share::Nothing, "one tree per destination LID"),
            (
                Share::SwitchLids,
                "switch LIDs sharing their first end port's tree",
            ),
            (Share::Everything, "one tree per destination switch"),
        ] {
            let routed = route_sssp("dfsssp", &self.cfg, fabric, share)?;
            for (order, how) in [
                (Order::Routing, "in routing order"),
                (Order::LongestFirst, "longest first"),
            ] {
                // In routing order CA LIDs come before switch LIDs and are
                // routed the same whether switch LIDs share trees or not:
                // if a path to a CA LID did not fit, it will not now.
                if share == Share::SwitchLids && order == Order::Routing && ca_failed_in_order {
                    continue;
                }
                match layer(fabric, &routed, vl_avail, order) {
                    Ok(a) => {
                        chosen = Some((routed, a, format!("{what}, paths placed {how}")));
                        break 'levels;
                    }
                    Err((why, to_switch)) => {
                        if share == Share::Nothing && order == Order::Routing {
                            ca_failed_in_order = !to_switch;
                        }
                        failures.push(format!("with {what}, placed {how}: {why}"));
                    }
                }
            }
        }
        let Some((routed, assignment, what)) = chosen else {
            return Err(EngineError::new(format!(
                "dfsssp: the routes need more than the {vl_avail} virtual layers available (the fewest operational \
                 VLs of any linked port{}): {}",
                if vl_avail == MAX_LAYERS { ", capped at 8" } else { "" },
                failures.join("; ")
            )));
        };
        let lid_sw = source_switches(fabric, &routed).0;
        let vls = assignment.vls_used as u8;
        let mut routing = Routing::single_vl(lfts_of(&routed));
        routing.vls_used = vls;
        if vls > 1 {
            routing.sl2vl = sl2vl_maps(fabric, &routed.graph, vls).into();
            routing.path_sl = path_sl_box(LayerSl {
                nsw: assignment.nsw,
                lid_sw,
                sl: assignment.sl,
            });
        }
        for (level, m) in routed.notes {
            routing.diag(level, m);
        }
        if !failures.is_empty() {
            routing.diag(
                Level::Info,
                format!("dfsssp: routed with {what}: {}", failures.join("; ")),
            );
        }
        routing.diag(
            Level::Info,
            format!(
                "dfsssp: {} paths in {} layer(s) free of credit loops, spread over {} of {} available VLs (paths per VL, \
                 counted per source LID: {:?})",
                assignment.paths,
                assignment.layers_needed,
                vls,
                vl_avail,
                assignment.paths_per_vl
            ),
        );
        Ok(routing)
    }

    /// Continuity (sm-abi 1.3): an entry stays while its port is healthy, broken
    /// ones take DFSSSP's own port; merged tables that loop, leave a pair
    /// unreachable or close a credit loop on DFSSSP's layers give way to the
    /// fresh routing.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &sm_abi::PreviousRouting) -> Result<Routing, EngineError> {
        use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::Healthy, &ContinuityOptions { deadlock_free: true, take_fresh: true, ..ContinuityOptions::default() }, "dfsssp"))
    }
}

/// Source LIDs entering the fabric at each switch: the switch of every
/// LID, and how many LIDs each switch is the source switch of.
fn source_switches(fabric: &FabricSnapshot, routed: &Routed) -> (Vec<Sw>, Vec<u64>) {
    let mut lid_sw = vec![NONE; routed.tables.lids];
    let mut src_weight = vec![0u64; routed.net.nsw];
    for (lid, &pi) in routed.graph.lid_port.iter().enumerate() {
        if pi == NONE || lid == 0 || lid >= lid_sw.len() {
            continue;
        }
        let s = routed.graph.entry_switch(fabric, pi);
        if s != NONE {
            lid_sw[lid] = s;
            src_weight[s as usize] += 1;
        }
    }
    (lid_sw, src_weight)
}

/// Layers for the paths of `routed`, or why they do not fit.
fn layer(
    fabric: &FabricSnapshot,
    routed: &Routed,
    vl_avail: u8,
    order: Order,
) -> Result<layers::Assignment, (String, bool)> {
    let (_, src_weight) = source_switches(fabric, routed);
    layers::assign(&routed.net, &routed.tables, &src_weight, vl_avail as usize, order).map_err(|e| {
        let node = &fabric.nodes[routed.graph.switch_nodes[e.src as usize] as usize];
        let owner = routed.graph.lid_port.get(e.lid as usize).copied().unwrap_or(NONE);
        let to_switch =
            owner != NONE && fabric.nodes[fabric.ports[owner as usize].node as usize].kind == NodeKind::Switch;
        let why = format!(
            "the path from switch 0x{:016x} \"{}\" to {} LID {} ({} switch-to-switch hops) closes a credit loop \
             in every layer after {} paths were placed",
            node.guid,
            node.description,
            if to_switch { "switch" } else { "end port" },
            e.lid,
            e.hops,
            e.placed
        );
        (why, to_switch)
    })
}

/// SL i on VL i for the VLs in use; higher SLs (no path is given one)
/// wrap onto them so packets sent with them still flow.
fn sl2vl_maps(fabric: &FabricSnapshot, graph: &Graph, vls: u8) -> Vec<Sl2Vl> {
    let mut vl = [0u8; 16];
    for (sl, v) in vl.iter_mut().enumerate() {
        *v = sl as u8 % vls;
    }
    let mut out = Vec::new();
    for &node in &graph.switch_nodes {
        let n = &fabric.nodes[node as usize];
        let live: Vec<u8> = (1..=n.num_ports)
            .filter(|&p| usable(fabric, n.first_port + p as u32))
            .collect();
        for &o in &live {
            for i in std::iter::once(0).chain(live.iter().copied()) {
                out.push(Sl2Vl {
                    node,
                    in_port: i,
                    out_port: o,
                    vl,
                });
            }
        }
    }
    for &p in &graph.end_ports {
        let port = &fabric.ports[p as usize];
        if fabric.nodes[port.node as usize].kind != NodeKind::Switch {
            out.push(Sl2Vl {
                node: port.node,
                in_port: 0,
                out_port: port.num,
                vl,
            });
        }
    }
    out
}

/// The path SL oracle: source LID → the switch it enters at, then one
/// byte per (destination LID, switch).
struct LayerSl {
    nsw: usize,
    lid_sw: Vec<Sw>,
    sl: Vec<u8>,
}

impl PathSl for LayerSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }

    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        let (slid, dlid) = (slid as usize, dlid as usize);
        match self.lid_sw.get(slid) {
            Some(&s) if s != NONE => self
                .sl
                .get(dlid * self.nsw + s as usize)
                .copied()
                .unwrap_or(0),
            _ => 0,
        }
    }
}

sm_abi::export_engines! {
    "dfsssp" => {
        summary: "OpenSM DFSSSP: globally balanced shortest paths, paths spread over virtual layers free of credit loops",
        deadlock_free: true,
        create: Dfsssp::from_config,
    },
    "sssp" => {
        summary: "OpenSM SSSP: globally balanced shortest paths (Dijkstra with link loads as weights), LMC-aware",
        deadlock_free: false,
        create: Sssp::from_config,
    },
}
