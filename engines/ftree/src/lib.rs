//! smcore routing engine: OpenSM's fat-tree (`ftree`) algorithm.
//!
//! Fat-tree routing is made for k-ary n-trees and their relatives (trees
//! with a non-constant K, missing CAs or leaves, any oversubscription),
//! and for one traffic pattern above all: shift / all-to-all, where every
//! compute node sends to the node a fixed distance further in the CA order
//! this engine writes out (`opensm-ftree-ca-order.dump`).
//!
//! ## Finding the tree ([`tree`])
//!
//! * **Ranks.** With a `root_guid_file`, rank 0 is the listed switches and
//!   every other switch its BFS distance from them. Without one, the
//!   switches with CAs are the leaves: ranks are the distance from them,
//!   reversed, then recomputed from the switches that came out as roots.
//!   If that fails and a `cn_guid_file` is given, the ranking is redone
//!   from the compute nodes' switches alone (so I/O nodes may sit on the
//!   spines without a root file). Switches the ranking does not reach are
//!   left out.
//! * **Compute nodes.** Every CA port, or only those in `cn_guid_file`
//!   (port GUIDs; a node GUID stands for all its ports). Ports in
//!   `io_guid_file` are I/O nodes: they may hang anywhere (a spine, say)
//!   and their routes may turn down-then-up `max_reverse_hops` times.
//! * **Port groups.** Links from a switch to one neighbour form a group;
//!   groups towards lower ranks are up-going, towards higher ranks
//!   down-going. Links between switches of one rank are not used.
//! * **Rules** (OpenSM's; a fabric that breaks one is refused with the
//!   rule in the error, so the chain falls through): 2 to 8 levels of
//!   switches; all compute nodes on switches of the leaf rank; at least two
//!   leaves. OpenSM also wants the tree pure without a root file: per rank
//!   the same number of up groups, the same number of down groups (leaves
//!   excepted), and the same number of ports in every up group and in every
//!   down group. (Down groups here count switch neighbours only, so I/O
//!   nodes on upper switches do not spoil a pure tree.) Here a tree that is
//!   not pure (a cable or switch missing, uneven groups) is routed as a
//!   degraded fat tree as long as its levels stay clear (no link between
//!   switches of one rank, every switch's rank from the roots agreeing with
//!   its distance from the leaves: [`tree::Tree::check_degraded`]), then
//!   its busiest links are relieved ([`rebalance`]); the error says which
//!   switch or link makes it no fat tree at all.
//! * **Index.** Switches get OpenSM's index tuples by BFS from the first
//!   leaf, so sorting by index keeps subtrees together. Leaves in index
//!   order, each with its compute nodes in port order and padded with
//!   dummies to the fullest leaf's count, give the CA order.
//!
//! ## Routing ([`route`])
//!
//! Destinations are routed one at a time, in CA order: for each compute
//! node, climb from its leaf through the up group whose links carry the
//! fewest destinations so far (least loaded port within it) up to a root,
//! setting each switch on the way to forward down; from every switch on the
//! way, descend into the subtrees not yet routed, least loaded down group
//! first, setting them to forward up. Other parents of the path are routed
//! too (without counting) so every switch gets the shortest up/down route.
//! Dummies for missing compute nodes move the counters without writing
//! entries, which keeps the rotation over the up links aligned between
//! leaves: on a complete tree all links between two levels carry the same
//! number of CA-to-CA routes in each direction (on two-level trees, max =
//! mean over all inter-switch links). Then the other CA ports are routed
//! the same way, then switch LIDs (not counted; a switch reaches another
//! where up/down allows, and with `connect_roots` upper switches reach the
//! rest through the last leaf). All routes go up then down, so
//! there are no credit loops. Routes to I/O nodes with reverse hops
//! (`max_reverse_hops` > 0) do turn down then up; OpenSM warns they may
//! close credit loops, so here paths to I/O nodes get SL 1 (VL 1 under
//! the default SL2VL map) and stay apart from the up/down traffic on SL 0,
//! whenever every switch port has a second data VL.
//!
//! LMC > 0 is refused, as in OpenSM. The result is checked before it is
//! returned: a CA that some CA-carrying switch cannot reach makes the
//! engine fail with the example, rather than hand the core tables with holes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Deserialize;
use sm_abi::abi_stable::std_types::ROption;
use sm_abi::{
    path_sl_box, EngineError, FabricSnapshot, Level, Lft, PathSl, PreviousRouting, Routing, RoutingEngine,
    NO_ROUTE,
};
use smcore_kit::continuity::{continue_fresh, ContinuityOptions, FabricRule};
use smcore_kit::config::{self, read_guid_list};
use smcore_kit::graph::{Graph, Sw};

pub mod rebalance;
pub mod route;
pub mod tree;

use route::{RouteOptions, Tables};
use tree::{Roles, Tree, UNRANKED};

/// Name of the CA order file (OpenSM's).
pub const CA_ORDER_FILE: &str = "opensm-ftree-ca-order.dump";

/// Options, named as OpenSM's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FtreeConfig {
    /// Root switch node GUIDs, one a line (OpenSM `root_guid_file`, `-a`).
    pub root_guid_file: Option<PathBuf>,
    /// Compute node port GUIDs (OpenSM `cn_guid_file`, `-u`).
    pub cn_guid_file: Option<PathBuf>,
    /// I/O node port GUIDs (OpenSM `io_guid_file`, `-G`).
    pub io_guid_file: Option<PathBuf>,
    /// Down-then-up turns allowed on routes to I/O nodes (OpenSM
    /// `max_reverse_hops`, `-H`). Paths to I/O nodes then use SL 1.
    pub max_reverse_hops: u32,
    /// Route switch LIDs that up/down leaves unreachable from upper
    /// switches through the last leaf (OpenSM `connect_roots`, `-z`).
    pub connect_roots: bool,
    /// Subnet LMC (shared key); fat-tree routing needs 0.
    pub lmc: u8,
    /// Where to write the CA order file (shared key).
    pub dump_dir: Option<PathBuf>,
    /// Index the tree from its roots (OpenSM `quasi_ftree_indexing`).
    pub quasi_ftree_indexing: bool,
}

/// The engine.
#[derive(Debug, Clone, Default)]
pub struct Ftree {
    cfg: FtreeConfig,
}

impl Ftree {
    /// Build from the TOML configuration text.
    pub fn from_config(text: &str) -> Result<Ftree, EngineError> {
        Ok(Ftree {
            cfg: config::parse("ftree", text)?,
        })
    }

    /// Build from parsed options.
    pub fn new(cfg: FtreeConfig) -> Ftree {
        Ftree { cfg }
    }

    fn roles(&self, notes: &mut Vec<String>) -> Result<Roles, EngineError> {
        let mut read = |path: &Option<PathBuf>,
                        what: &str|
         -> Result<Option<Vec<u64>>, EngineError> {
            let Some(p) = path else { return Ok(None) };
            let list = read_guid_list(p).map_err(|e| EngineError::new(format!("ftree: {e}")))?;
            notes.extend(list.warnings.iter().cloned());
            if list.entries.is_empty() {
                return Err(EngineError::new(format!(
                    "ftree: {what} {} lists no valid GUID",
                    p.display()
                )));
            }
            Ok(Some(list.guids()))
        };
        let roots = read(&self.cfg.root_guid_file, "root_guid_file")?;
        let cns = read(&self.cfg.cn_guid_file, "cn_guid_file")?
            .map(|v| v.into_iter().collect::<HashSet<_>>());
        let ios = read(&self.cfg.io_guid_file, "io_guid_file")?
            .map(|v| v.into_iter().collect::<HashSet<_>>());
        Ok(Roles {
            roots,
            cns,
            ios,
            leaves_from_cns: false,
            quasi_indexing: self.cfg.quasi_ftree_indexing,
        })
    }
}

/// Route a fabric, returning the tree too (for the CA order and tests).
///
/// Without a root file the leaves are the switches with CAs, as in
/// OpenSM. When that fails and a compute node file is given, the ranking
/// is tried once more from the compute nodes' switches alone: that is
/// what lets I/O nodes hang on the spines without a root file. The first
/// attempt's error is the one reported when both fail.
pub fn route_fabric(
    fabric: &FabricSnapshot,
    cfg: &FtreeConfig,
    roles: &Roles,
) -> Result<(Tree, Vec<Lft>, Vec<String>), EngineError> {
    if cfg.lmc > 0 || fabric.lmc > 0 {
        return Err(EngineError::new(format!(
            "ftree: LMC {} is not supported by fat-tree routing (LMC must be 0)",
            cfg.lmc.max(fabric.lmc)
        )));
    }
    let graph = Graph::new(fabric);
    let first = route_ranked(fabric, &graph, cfg, roles);
    if first.is_ok() || roles.roots.is_some() || roles.cns.is_none() || roles.leaves_from_cns {
        return first;
    }
    let retry = Roles {
        leaves_from_cns: true,
        ..roles.clone()
    };
    match route_ranked(fabric, &graph, cfg, &retry) {
        Ok(mut done) => {
            done.2.push(
                "ftree: ranked from the compute nodes' switches (ranking from all CAs failed)"
                    .into(),
            );
            Ok(done)
        }
        Err(_) => first,
    }
}

fn route_ranked(
    fabric: &FabricSnapshot,
    graph: &Graph,
    cfg: &FtreeConfig,
    roles: &Roles,
) -> Result<(Tree, Vec<Lft>, Vec<String>), EngineError> {
    let tree = Tree::build(fabric, graph, roles)?;
    let opts = RouteOptions {
        max_reverse_hops: cfg.max_reverse_hops.min(u16::MAX as u32) as u16,
        connect_roots: cfg.connect_roots,
    };
    let tables = route::route(&tree, fabric.max_lid, &opts);
    let mut notes = Vec::new();
    check_reach(fabric, &tree, &tables, &mut notes)?;
    if tree.sibling_links > 0 {
        notes.push(format!(
            "ftree: {} link(s) between switches of equal rank are not used",
            tree.sibling_links
        ));
    }
    notes.extend(tree.notes.iter().cloned());
    if let Some(why) = &tree.degraded {
        let r = tables.rebalanced.unwrap_or_default();
        notes.push(format!(
            "ftree: routed as a degraded fat tree ({}); busiest link {} CA-to-CA routes after the walk, {} after {} \
             entries moved off the busiest links",
            why.strip_prefix("ftree: ").unwrap_or(why),
            r.before,
            r.after,
            r.moves
        ));
    }
    if tree.unranked > 0 {
        notes.push(format!(
            "ftree: {} switch(es) not connected to the tree are not routed",
            tree.unranked
        ));
    }
    let lfts = graph
        .switch_nodes
        .iter()
        .zip(tables.rows)
        .map(|(&node, row)| Lft {
            node,
            ports: row.into(),
        })
        .collect();
    Ok((tree, lfts, notes))
}

/// Every switch with CA ports must reach every CA port; otherwise the
/// up/down rules of this tree cannot connect them and the engine fails.
/// Switch LIDs missing only get a note (switch traffic is not required).
fn check_reach(
    fabric: &FabricSnapshot,
    tree: &Tree,
    tables: &Tables,
    notes: &mut Vec<String>,
) -> Result<(), EngineError> {
    let mut entry: Vec<Sw> = tree.cas.iter().map(|c| c.sw).collect();
    entry.sort_unstable();
    entry.dedup();
    // Per switch, in parallel: the missing count and the first CA missed.
    let per_switch: Vec<(u64, Option<&tree::CaPort>)> = entry
        .par_iter()
        .map(|&s| {
            let row = tables.row(s);
            let mut missing = 0u64;
            let mut first = None;
            for c in &tree.cas {
                if row[c.lid as usize] == NO_ROUTE {
                    missing += 1;
                    first = first.or(Some(c));
                }
            }
            (missing, first)
        })
        .collect();
    let missing: u64 = per_switch.iter().map(|m| m.0).sum();
    let example = entry
        .iter()
        .zip(&per_switch)
        .find_map(|(&s, m)| m.1.map(|c| (s, c)));
    if let Some((s, c)) = example {
        return Err(EngineError::new(format!(
            "ftree: {missing} routes from CA-carrying switches to CA ports are missing under the fat tree's \
             up/down rules (e.g. switch 0x{:016x} to LID {} of {:?}); non-compute nodes need io_guid_file and \
             max_reverse_hops",
            tree.switches[s as usize].guid,
            c.lid,
            fabric.nodes[c.node as usize].description.as_str()
        )));
    }
    let sw_missing: u64 = entry
        .par_iter()
        .map(|&s| {
            let row = tables.row(s);
            tree.switches
                .iter()
                .filter(|t| {
                    t.rank != UNRANKED
                        && t.lid != 0
                        && (t.lid as usize) < row.len()
                        && row[t.lid as usize] == NO_ROUTE
                })
                .count() as u64
        })
        .sum();
    if sw_missing > 0 {
        notes.push(format!(
            "ftree: {sw_missing} routes from CA-carrying switches to switch LIDs are missing"
        ));
    }
    Ok(())
}

/// The CA order file's text: per leaf in index order, one line per compute
/// node port (`0x<lid>\t<description>`), then `0xFFFF\tDUMMY` for each
/// compute node the leaf lacks against the fullest leaf.
pub fn ca_order_text(fabric: &FabricSnapshot, tree: &Tree) -> String {
    let mut out = String::new();
    for &leaf in &tree.leaves {
        let mut printed = 0;
        for &ci in &tree.switches[leaf as usize].cas {
            let c = &tree.cas[ci as usize];
            if !c.is_cn {
                continue;
            }
            out.push_str(&format!(
                "0x{:04x}\t{}\n",
                c.lid, fabric.nodes[c.node as usize].description
            ));
            printed += 1;
        }
        for _ in printed..tree.max_cn_per_leaf {
            out.push_str("0xFFFF\tDUMMY\n");
        }
    }
    out
}

/// Write the CA order file into `dir` (through a temporary name, so a
/// reader never sees half a file).
pub fn write_ca_order(dir: &Path, text: &str) -> std::io::Result<PathBuf> {
    let path = dir.join(CA_ORDER_FILE);
    let tmp = dir.join(format!("{CA_ORDER_FILE}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// SL 1 for paths to I/O nodes, SL 0 for the rest.
struct IoSl {
    io_lid: Vec<bool>,
}

impl PathSl for IoSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RNone
    }
    fn path_sl(&self, _slid: u16, dlid: u16) -> u8 {
        self.io_lid.get(dlid as usize).copied().unwrap_or(false) as u8
    }
}

/// Routes to I/O nodes with reverse hops turn down then up, which pure
/// up/down routes never do; mixed on one VL the two can close a credit
/// loop. Paths to I/O nodes therefore go on SL 1 (VL 1 with the default
/// SL2VL map), away from the compute traffic on SL 0, when every switch
/// port has a second data VL; otherwise a warning says loops may form.
fn reverse_hop_sl(fabric: &FabricSnapshot, tree: &Tree, routing: &mut Routing) {
    let two_vls = tree.switches.iter().all(|s| {
        let n = &fabric.nodes[s.node as usize];
        (1..=n.num_ports).all(|p| {
            let port = &fabric.ports[(n.first_port + p as u32) as usize];
            port.peer == sm_abi::NONE || port.op_vls >= 2
        })
    });
    if !two_vls {
        routing.diag(
            Level::Warn,
            "ftree: max_reverse_hops > 0 lets I/O routes turn down then up and some switch port has a single \
             data VL to keep them apart: they may form credit loops",
        );
        return;
    }
    let mut io_lid = vec![false; fabric.max_lid as usize + 1];
    for c in tree.cas.iter().filter(|c| c.is_io) {
        if let Some(slot) = io_lid.get_mut(c.lid as usize) {
            *slot = true;
        }
    }
    routing.path_sl = path_sl_box(IoSl { io_lid });
    routing.vls_used = 2;
    routing.diag(
        Level::Info,
        "ftree: paths to I/O nodes use SL 1 (reverse hops are allowed for them), the rest SL 0",
    );
}

impl RoutingEngine for Ftree {
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError> {
        let mut notes = Vec::new();
        let roles = self.roles(&mut notes)?;
        let (tree, lfts, more) = route_fabric(fabric, &self.cfg, &roles)?;
        notes.extend(more);
        let mut routing = Routing::single_vl(lfts);
        for n in notes {
            routing.diag(Level::Warn, n);
        }
        routing.diag(
            Level::Info,
            format!(
                "ftree: {} levels, {} leaves, {} compute nodes (at most {} per leaf)",
                tree.leaf_rank + 1,
                tree.leaves.len(),
                tree.cn_count(),
                tree.max_cn_per_leaf
            ),
        );
        if let Some(dir) = &self.cfg.dump_dir {
            if let Err(e) = write_ca_order(dir, &ca_order_text(fabric, &tree)) {
                routing.diag(
                    Level::Warn,
                    format!(
                        "ftree: cannot write {}: {e}",
                        dir.join(CA_ORDER_FILE).display()
                    ),
                );
            }
        }
        if self.cfg.max_reverse_hops > route::MAX_REVERSE_HOPS as u32 {
            routing.diag(
                Level::Warn,
                format!(
                    "ftree: max_reverse_hops {} capped at {}",
                    self.cfg.max_reverse_hops,
                    route::MAX_REVERSE_HOPS
                ),
            );
        }
        if self.cfg.max_reverse_hops > 0 && tree.cas.iter().any(|c| c.is_io) {
            reverse_hop_sl(fabric, &tree, &mut routing);
        }
        Ok(routing)
    }

    /// Continuity (sm-abi 1.3): on a fat tree the least-hop paths are the
    /// up/down ones: an entry stays while its port is healthy and on a
    /// least-hop path, broken ones take the least loaded such port, routes
    /// move only off links above the fresh routing's busiest; merged tables
    /// with a credit loop on ftree's SLs give way to ftree's own routing.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> Result<Routing, EngineError> {
        let fresh = self.route(fabric)?;
        Ok(continue_fresh(fabric, previous, fresh, FabricRule::MinHop, &ContinuityOptions { deadlock_free: true, ..ContinuityOptions::default() }, "ftree"))
    }
}

sm_abi::export_engines! {
    "ftree" => {
        summary: "OpenSM fat-tree: k-ary n-trees and relatives, balanced for shift/all-to-all, credit-loop free",
        deadlock_free: true,
        create: Ftree::from_config,
    },
}
