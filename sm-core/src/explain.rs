//! `smcore explain SRC DST`: the path between two ports, hop by hop, as
//! the routing in force has it.
//!
//! For each node the path leaves (the source port, then every switch):
//! its GUID and description, the port it came in by and the one its LFT
//! sends the destination LID out of, the link leaving it (width, speed,
//! MTU, OperationalVLs at both ends) and the VL the path's SL is carried
//! on there (the SL2VL map of that switch's in→out pair, the source CA's
//! map of its port), as this SM programmed it. Then the partitions both
//! ends share and the PathRecord the SA answers for the pair — computed by
//! the SA's own code ([`crate::sa::path::query`] on an [`SaDb`]), so the
//! two cannot disagree — and warnings: a link that holds the path's MTU or
//! rate below the others', a VL the port does not run, a walk that does
//! not arrive (no LFT entry, a loop, a dead end), no partition in common.
//!
//! The walk is the SA's ([`SaDb::trace`]): what is shown is what
//! PathRecords are computed from.
//!
//! Three callers: `smcore route TOPO --explain SRC DST` (the routing just
//! computed, on the topology file: [`explain`]), the control socket's
//! `explain` (the SA's database in force: [`explain_in`]), and whoever
//! holds an [`AcceptedRouting`] of their own ([`explain`]; with the
//! fabric as discovered, build an [`SaDb`] from it and use
//! [`explain_in`], which then knows the ports' real MTUs).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;
use sm_abi::abi_stable::std_types::RString;
use sm_abi::{FabricSnapshot, NodeKind, PortState as AbiPortState, NONE};
use sm_mad::port_info::mtu;
use sm_mad::sa_path_record::{component as pc, Packet as PrPacket, Repr as PrRepr};
use sm_mad::{PortInfoRepr, PortState};
use sm_model::{Fabric, FabricNode, FabricPort};
use sm_partition::SaPartitions;
use thiserror::Error;

use crate::engines::chain::Routed;
use crate::routing::AcceptedRouting;
use crate::sa::db::{rate_of, EndPort, SaDb, SaSource, DEFAULT_GID_PREFIX};
use crate::sa::path::{self, PathDefaults, Step, WalkStop};

/// Why there is no explanation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExplainError {
    /// Nothing in the fabric answers to the name.
    #[error("no port {0:?} in the fabric (give a LID, a port or node GUID as 0x..., or a NodeDescription)")]
    Unknown(String),
    /// The description names several nodes.
    #[error("{name:?} is the NodeDescription of {count} nodes ({first}, ...): give a LID or a GUID")]
    Ambiguous {
        /// The name given.
        name: String,
        /// How many nodes carry it.
        count: usize,
        /// The first of them, by node GUID.
        first: String,
    },
    /// The node is there but none of its ports has a LID.
    #[error("{0:?} has no port with a LID")]
    NoLid(String),
    /// Nothing routed: there are no paths.
    #[error("no routing is in force: nothing to explain")]
    NotRouted,
    /// The words do not name two ports.
    #[error("{0}")]
    Usage(String),
}

/// One end of the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndInfo {
    /// `CA`, `switch` or `router`.
    pub kind: String,
    /// NodeGUID.
    pub node_guid: String,
    /// Port GUID.
    pub port_guid: String,
    /// NodeDescription.
    pub description: String,
    /// Port number (0: a switch itself).
    pub port: u8,
    /// The LID the path is explained for.
    pub lid: u16,
    /// The port's LMC.
    pub lmc: u8,
}

/// The link a hop leaves by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// Active width, `4x`.
    pub width: String,
    /// Active speed, `QDR`.
    pub speed: String,
    /// Data rate, Gb/s.
    pub rate_gbps: f64,
    /// MTU both ends support, bytes.
    pub mtu: u16,
    /// OperationalVLs (data VLs) of the port sending.
    pub op_vls: u8,
    /// OperationalVLs of the port at the other end.
    pub peer_op_vls: u8,
}

/// Where a hop's link arrives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Arrival {
    /// NodeGUID.
    pub node_guid: String,
    /// NodeDescription.
    pub description: String,
    /// `CA`, `switch` or `router`.
    pub kind: String,
    /// The port it enters by.
    pub port: u8,
}

/// One node the path leaves, and the link it leaves by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hop {
    /// `CA`, `switch` or `router`.
    pub kind: String,
    /// NodeGUID.
    pub node_guid: String,
    /// NodeDescription.
    pub description: String,
    /// The node's LID (a switch's port 0, a CA's port).
    pub lid: u16,
    /// The port the path came in by (`None`: it starts here).
    pub in_port: Option<u8>,
    /// The port it leaves by.
    pub out_port: u8,
    /// The link leaving.
    pub link: Link,
    /// The VL the path's SL is carried on over that link (`None`: this SM
    /// programmed no SL2VL map there; the port keeps its own).
    pub vl: Option<u8>,
    /// Whose map gives the VL: `engine`, `qos` or `none`.
    pub vl_map: String,
    /// Where the link arrives.
    pub to: Arrival,
}

/// A partition both ends are in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SharedPartition {
    /// The P_Key (without the membership bit).
    pub pkey: String,
    /// Its name in partitions.conf, when known.
    pub name: Option<String>,
    /// `full` or `limited`.
    pub source: String,
    /// `full` or `limited`.
    pub destination: String,
    /// Whether the two may talk on it (at least one full member).
    pub usable: bool,
}

/// The PathRecord the SA answers for the pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathRecordInfo {
    /// SLID.
    pub slid: u16,
    /// DLID.
    pub dlid: u16,
    /// SL.
    pub sl: u8,
    /// MTU code (1 = 256 .. 5 = 4096).
    pub mtu_code: u8,
    /// MTU, bytes.
    pub mtu: u16,
    /// Rate code (IBA table 224).
    pub rate_code: u8,
    /// Rate, Gb/s.
    pub rate_gbps: f64,
    /// PacketLifeTime code.
    pub packet_life: u8,
    /// P_Key.
    pub pkey: String,
    /// Whether the path back exists too.
    pub reversible: bool,
    /// Links crossed.
    pub hops: u8,
}

/// The path between two ports, as the routing in force has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The engine that computed the routing.
    pub engine: String,
    /// Where the path starts.
    pub source: EndInfo,
    /// Where it is meant to arrive.
    pub destination: EndInfo,
    /// The SL the routing engine gives the path.
    pub sl: u8,
    /// The SL the VLs are shown for: the PathRecord's (what hosts put in
    /// their packets), the engine's when there is no record.
    pub vl_sl: u8,
    /// Each node the path leaves, in order.
    pub hops: Vec<Hop>,
    /// Whether the walk through the LFTs arrives at the destination.
    pub arrives: bool,
    /// Partitions both ends are in.
    pub partitions: Vec<SharedPartition>,
    /// What the SA answers (`None`: no PathRecord, see the warnings).
    pub path_record: Option<PathRecordInfo>,
    /// What deserves a look.
    pub warnings: Vec<String>,
}

impl Explanation {
    /// Every node the node name map names shown by that name instead of
    /// its NodeDescription (OpenSM's `node_name_map_name`).
    pub fn rename(&mut self, names: &crate::node_names::NodeNameMap) {
        let name = |guid: &str, description: &mut String| {
            let g = guid.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok());
            if let Some(n) = g.and_then(|g| names.get(g)) {
                *description = n.to_string();
            }
        };
        name(&self.source.node_guid, &mut self.source.description);
        name(&self.destination.node_guid, &mut self.destination.description);
        for h in &mut self.hops {
            name(&h.node_guid, &mut h.description);
            name(&h.to.node_guid, &mut h.to.description);
        }
    }
}

/// The explanation of the path `src` → `dst` on `accepted`, with the
/// partitions in force (`None`: every port a full member of the default
/// partition). Ports are named by LID, port or node GUID (`0x...`) or
/// NodeDescription. The snapshot carries no MTUs: links are taken at
/// 4096 bytes, as the ports of a topology file come up (use
/// [`explain_in`] on the SA's database for the MTUs the ports hold).
pub fn explain(
    accepted: &Arc<AcceptedRouting>,
    partitions: Option<&Arc<SaPartitions>>,
    src: &str,
    dst: &str,
) -> Result<Explanation, ExplainError> {
    let fabric = fabric_of(&accepted.snapshot);
    let db = SaDb::build_shared(SaSource {
        fabric: &fabric,
        lmc: accepted.snapshot.lmc,
        accepted: Some(accepted),
        partitions,
    });
    explain_in(&db, &PathDefaults::default(), src, dst)
}

/// The routing `smcore route` accepted, as the SM would hold it (the
/// engine's own SL2VL and VLArb tables; no QoS tables offline).
pub fn accepted_offline(snapshot: FabricSnapshot, routed: Routed, deadlock_free: bool) -> Arc<AcceptedRouting> {
    let tables = (routed.routing.sl2vl.len(), routed.routing.vlarb.len());
    let top = snapshot.max_lid;
    Arc::new(AcceptedRouting::new(routed, snapshot, top, deadlock_free, false, tables))
}

/// What the control socket holds to explain paths: the SA's database in
/// force and the SA's PathRecord settings.
#[derive(Debug, Clone)]
pub struct PathView {
    /// The database (fabric, routing, partitions, QoS policy).
    pub db: Arc<SaDb>,
    /// PathRecord settings the routing does not decide.
    pub defaults: PathDefaults,
    /// Names shown instead of NodeDescriptions ([`Explanation::rename`]).
    pub names: Arc<crate::node_names::NodeNameMap>,
}

impl PartialEq for PathView {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.db, &other.db) && self.defaults == other.defaults && self.names == other.names
    }
}

/// [`explain_in`] for the words of a command line: two names, or more
/// words when a NodeDescription holds spaces (the one split that names
/// two ports is taken).
pub fn explain_words(db: &SaDb, defaults: &PathDefaults, words: &[&str]) -> Result<Explanation, ExplainError> {
    match words {
        [] | [_] => Err(ExplainError::Usage("explain takes two ports: SRC DST (LID, GUID or NodeDescription)".into())),
        [src, dst] => explain_in(db, defaults, src, dst),
        _ => {
            let splits: Vec<(String, String)> = (1..words.len())
                .map(|i| (words[..i].join(" "), words[i..].join(" ")))
                .filter(|(s, d)| resolve(db, s).is_ok() && resolve(db, d).is_ok())
                .collect();
            match splits.as_slice() {
                [(s, d)] => explain_in(db, defaults, s, d),
                [] => Err(ExplainError::Usage(format!(
                    "{:?} does not split into two ports (LID, GUID or NodeDescription)",
                    words.join(" ")
                ))),
                _ => Err(ExplainError::Usage(format!(
                    "{:?} splits into two ports in more than one way: give LIDs or GUIDs",
                    words.join(" ")
                ))),
            }
        }
    }
}

/// The explanation of the path `src` → `dst` on the SA's database `db`,
/// with the SA's PathRecord settings `defaults`.
pub fn explain_in(db: &SaDb, defaults: &PathDefaults, src: &str, dst: &str) -> Result<Explanation, ExplainError> {
    let accepted = db.routing().ok_or(ExplainError::NotRouted)?;
    let snap = &accepted.snapshot;
    let (s, slid) = resolve(db, src)?;
    let (d, dlid) = resolve(db, dst)?;
    let engine_sl = accepted.path_sl(slid, dlid);
    let record = path_record(db, defaults, slid, dlid);
    let vl_sl = record.as_ref().map_or(engine_sl, |r| r.sl);
    let mut steps: Vec<Step> = Vec::new();
    let walked = db.trace(slid, dlid, |s| steps.push(*s));
    let mut warnings = Vec::new();
    // A loop: the walk went on to its limit; cut it where a switch came
    // round again.
    if walked == Err(WalkStop::TooLong) {
        let mut seen = HashSet::new();
        if let Some(again) = steps.iter().position(|s| !seen.insert(s.node)) {
            steps.truncate(again + 1);
            let n = steps[again].node;
            warnings.push(format!(
                "the LFTs loop: {} is reached again after {} links, and LID {dlid} is never delivered",
                node_name(snap, n),
                again
            ));
        } else {
            warnings.push(format!("the path is longer than any may be: LID {dlid} is never delivered"));
        }
    }
    match walked {
        Ok(_) | Err(WalkStop::TooLong) => {}
        Err(WalkStop::NoLftEntry { node, entry }) => warnings.push(match entry {
            0 => format!("{} sends LID {dlid} to its own port 0: the path ends there", node_name(snap, node)),
            _ => format!("{} has no LFT entry for LID {dlid}: the path ends there", node_name(snap, node)),
        }),
        Err(WalkStop::Unlinked { node, port }) => {
            warnings.push(format!("{} sends LID {dlid} out of port {port}, which has no link", node_name(snap, node)))
        }
        Err(WalkStop::NotASwitch { node, port }) => warnings.push(format!(
            "the path enters {} (port {port}), which is not the destination and does not forward",
            node_name(snap, node)
        )),
        Err(WalkStop::NoPort(lid)) => warnings.push(format!("no port holds LID {lid}")),
        Err(WalkStop::NotRouted) => return Err(ExplainError::NotRouted),
    }
    let hops: Vec<Hop> = steps.iter().map(|step| hop(accepted, step, vl_sl)).collect();
    link_warnings(&steps, &hops, &mut warnings);
    for (i, h) in hops.iter().enumerate() {
        let Some(vl) = h.vl else { continue };
        let at = format!("hop {} ({} {:?} port {})", i + 1, h.kind, h.description, h.out_port);
        if vl == 15 {
            warnings.push(format!("{at}: SL {vl_sl} maps to VL15: the path's packets are dropped there"));
            continue;
        }
        if h.link.op_vls != 0 && vl >= h.link.op_vls {
            warnings.push(format!(
                "{at}: SL {vl_sl} maps to VL{vl}, but the port runs {} data VL(s) (VL0-{}): not operational",
                h.link.op_vls,
                h.link.op_vls - 1
            ));
        }
        if h.link.peer_op_vls != 0 && vl >= h.link.peer_op_vls {
            warnings.push(format!(
                "{at}: SL {vl_sl} maps to VL{vl}, but the port at the other end ({:?} port {}) runs {} data VL(s): not operational",
                h.to.description, h.to.port, h.link.peer_op_vls
            ));
        }
    }
    let partitions = shared_partitions(db, &s, &d);
    if record.is_none() {
        let usable = partitions.iter().any(|p| p.usable);
        let why = if !usable {
            "the two ports share no partition with a full member"
        } else if walked.is_err() {
            "the LFTs do not lead from one to the other"
        } else {
            "the SA's SL for it is out of range"
        };
        warnings.push(format!("the SA answers no PathRecord for LID {slid} -> {dlid}: {why}"));
    }
    if let Some(r) = &record {
        if r.sl != engine_sl {
            warnings.push(format!(
                "the QoS policy gives the path SL {}, where the engine's is {engine_sl}: VLs are shown for SL {}",
                r.sl, r.sl
            ));
        }
        if !r.reversible {
            warnings.push(format!("no path back: the LFTs do not lead from LID {dlid} to LID {slid}"));
        }
    }
    Ok(Explanation {
        engine: accepted.engine.clone(),
        source: end_info(snap, &s, slid),
        destination: end_info(snap, &d, dlid),
        sl: engine_sl,
        vl_sl,
        hops,
        arrives: walked.is_ok(),
        partitions,
        path_record: record,
        warnings,
    })
}

/// The end port `name` designates, and the LID the path is explained for.
fn resolve(db: &SaDb, name: &str) -> Result<(EndPort, u16), ExplainError> {
    let unknown = || ExplainError::Unknown(name.to_string());
    let snap = &db.routing().ok_or(ExplainError::NotRouted)?.snapshot;
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        let lid: u16 = name.parse().map_err(|_| unknown())?;
        let end = db.end_by_lid(lid).ok_or_else(unknown)?;
        return Ok((*end, lid));
    }
    let first_end = |node: usize| db.end_ports().iter().find(|e| e.node as usize == node).copied();
    if let Some(hex) = name.strip_prefix("0x").or_else(|| name.strip_prefix("0X")) {
        let value = u64::from_str_radix(hex, 16).map_err(|_| unknown())?;
        if let Some(end) = db.end_by_guid(value) {
            return Ok((*end, end.lid));
        }
        if let Some(node) = snap.nodes.iter().position(|n| n.guid == value) {
            let end = first_end(node).ok_or_else(|| ExplainError::NoLid(name.to_string()))?;
            return Ok((end, end.lid));
        }
        // A LID in hex, as ibtracert takes them.
        return match u16::try_from(value).ok().and_then(|lid| Some((*db.end_by_lid(lid)?, lid))) {
            Some(found) => Ok(found),
            None => Err(unknown()),
        };
    }
    let named: Vec<usize> = snap.nodes.iter().enumerate().filter(|(_, n)| n.description.as_str() == name).map(|(i, _)| i).collect();
    match named.as_slice() {
        [] => Err(unknown()),
        [node] => {
            let end = first_end(*node).ok_or_else(|| ExplainError::NoLid(name.to_string()))?;
            Ok((end, end.lid))
        }
        many => Err(ExplainError::Ambiguous {
            name: name.to_string(),
            count: many.len(),
            first: guid(snap.nodes[many[0]].guid),
        }),
    }
}

/// The PathRecord the SA answers for (`slid`, `dlid`): its own query, as
/// `saquery -p` asks it (both LIDs in the component mask).
fn path_record(db: &SaDb, defaults: &PathDefaults, slid: u16, dlid: u16) -> Option<PathRecordInfo> {
    let mut query = [0u8; 64];
    PrRepr { slid, dlid, ..Default::default() }.emit(&mut PrPacket::new_unchecked(&mut query[..]));
    let answer = path::query(db, &query, pc::SLID | pc::DLID, 1, defaults, |_| true).ok()?;
    let rec = PrRepr::parse(&PrPacket::new_checked(answer.get(..64)?).ok()?).ok()?;
    let hops = db.walk(slid, dlid).map_or(0, |w| w.hops);
    Some(PathRecordInfo {
        slid: rec.slid,
        dlid: rec.dlid,
        sl: rec.sl,
        mtu_code: rec.mtu,
        mtu: mtu::bytes(rec.mtu).unwrap_or(0),
        rate_code: rec.rate,
        rate_gbps: f64::from(rate_of(rec.rate)) / 10.0,
        packet_life: rec.packet_life_time,
        pkey: format!("{:#06x}", rec.pkey),
        reversible: rec.reversible,
        hops,
    })
}

fn guid(g: u64) -> String {
    format!("{g:#018x}")
}

fn kind_name(kind: NodeKind) -> String {
    match kind {
        NodeKind::Switch => "switch",
        NodeKind::Ca => "CA",
        NodeKind::Router => "router",
        _ => "node",
    }
    .to_string()
}

/// `switch 0x... "desc"`, for warnings.
fn node_name(snap: &FabricSnapshot, node: u32) -> String {
    match snap.nodes.get(node as usize) {
        Some(n) => format!("{} {} {:?}", kind_name(n.kind), guid(n.guid), n.description.as_str()),
        None => format!("node {node}"),
    }
}

fn end_info(snap: &FabricSnapshot, e: &EndPort, lid: u16) -> EndInfo {
    let n = snap.nodes.get(e.node as usize);
    EndInfo {
        kind: n.map_or_else(String::new, |n| kind_name(n.kind)),
        node_guid: guid(n.map_or(0, |n| n.guid)),
        port_guid: guid(e.guid),
        description: n.map_or_else(String::new, |n| n.description.to_string()),
        port: e.port,
        lid,
        lmc: e.lmc,
    }
}

/// The LID that addresses `node` (a switch's port 0, a CA's port `port`).
fn node_lid(snap: &FabricSnapshot, node: u32, port: u8) -> u16 {
    let Some(n) = snap.nodes.get(node as usize) else { return 0 };
    let p = if n.kind == NodeKind::Switch { 0 } else { port };
    snap.port_of(node, p).map_or(0, |p| p.lid)
}

fn hop(accepted: &AcceptedRouting, step: &Step, sl: u8) -> Hop {
    let snap = &accepted.snapshot;
    let n = snap.nodes.get(step.node as usize);
    let out = snap.port_of(step.node, step.out_port);
    let peer_node = snap.nodes.get(step.peer.0 as usize);
    let peer = snap.port_of(step.peer.0, step.peer.1);
    let switch = n.is_some_and(|n| n.kind == NodeKind::Switch);
    let (vl, vl_map) = vl_of(accepted, step.node, switch, step.in_port.unwrap_or(0), step.out_port, sl);
    Hop {
        kind: n.map_or_else(String::new, |n| kind_name(n.kind)),
        node_guid: guid(n.map_or(0, |n| n.guid)),
        description: n.map_or_else(String::new, |n| n.description.to_string()),
        lid: node_lid(snap, step.node, step.out_port),
        in_port: step.in_port,
        out_port: step.out_port,
        link: Link {
            width: out.map_or_else(|| "?".into(), |p| format!("{}x", p.width)),
            speed: out.map_or_else(|| "?".into(), |p| sm_topology::model::speed_name(p.speed).map_or_else(|| format!("?{}", p.speed), str::to_string)),
            rate_gbps: f64::from(step.rate) / 10.0,
            mtu: mtu::bytes(step.mtu).unwrap_or(0),
            op_vls: out.map_or(0, |p| p.op_vls),
            peer_op_vls: peer.map_or(0, |p| p.op_vls),
        },
        vl,
        vl_map: vl_map.to_string(),
        to: Arrival {
            node_guid: guid(peer_node.map_or(0, |n| n.guid)),
            description: peer_node.map_or_else(String::new, |n| n.description.to_string()),
            kind: peer_node.map_or_else(String::new, |n| kind_name(n.kind)),
            port: step.peer.1,
        },
    }
}

/// The VL `sl` is carried on leaving `node` by `out_port` (entered by
/// `in_port`, 0 where the path starts), as this SM programmed it: the
/// last SL2VL entry of the routing for that port pair, as the last write
/// wins on the port (`crate::sweep::vl` writes them in order); a CA's map
/// is its port's, whatever the input port. `None` where nothing was
/// programmed.
fn vl_of(accepted: &AcceptedRouting, node: u32, switch: bool, in_port: u8, out_port: u8, sl: u8) -> (Option<u8>, &'static str) {
    let engine_entries = accepted.engine_sl2vl().len();
    let found = accepted
        .routing
        .sl2vl
        .iter()
        .enumerate()
        .rev()
        .find(|(_, e)| e.node == node && e.out_port == out_port && (!switch || e.in_port == in_port));
    match found {
        Some((i, e)) => (e.vl.get(usize::from(sl)).copied(), if i < engine_entries { "engine" } else { "qos" }),
        None => (None, "none"),
    }
}

/// Warnings for links that hold the path's MTU or rate below the others'.
fn link_warnings(steps: &[Step], hops: &[Hop], warnings: &mut Vec<String>) {
    let (Some(min_mtu), Some(max_mtu)) = (steps.iter().map(|s| s.mtu).min(), steps.iter().map(|s| s.mtu).max()) else {
        return;
    };
    let (Some(min_rate), Some(max_rate)) = (steps.iter().map(|s| s.rate).min(), steps.iter().map(|s| s.rate).max()) else {
        return;
    };
    for (i, (s, h)) in steps.iter().zip(hops).enumerate() {
        let link = format!("hop {} ({} {:?} port {} -> {:?} port {})", i + 1, h.kind, h.description, h.out_port, h.to.description, h.to.port);
        if min_mtu < max_mtu && s.mtu == min_mtu {
            warnings.push(format!(
                "{link}: MTU {} is below the path's other links ({} bytes): the path's MTU is {}",
                h.link.mtu,
                mtu::bytes(max_mtu).unwrap_or(0),
                h.link.mtu
            ));
        }
        if min_rate < max_rate && s.rate == min_rate {
            warnings.push(format!(
                "{link}: {}{} ({} Gb/s) is below the path's other links ({} Gb/s): the path's rate is {} Gb/s",
                h.link.width,
                h.link.speed,
                h.link.rate_gbps,
                f64::from(max_rate) / 10.0,
                h.link.rate_gbps
            ));
        }
    }
}

/// The partitions both ends' P_Key tables hold, in the source's table
/// order.
fn shared_partitions(db: &SaDb, s: &EndPort, d: &EndPort) -> Vec<SharedPartition> {
    let (ts, td) = (db.pkey_table(s.guid), db.pkey_table(d.guid));
    let membership = |t: &[u16], base: u16| -> Option<bool> {
        let mut entries = t.iter().filter(|&&e| e & 0x7FFF == base).peekable();
        entries.peek()?;
        Some(entries.any(|&e| e & sm_partition::FULL != 0))
    };
    let word = |full: bool| if full { "full" } else { "limited" }.to_string();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for &e in ts {
        let base = e & 0x7FFF;
        if base == 0 || !seen.insert(base) {
            continue;
        }
        let (Some(sf), Some(df)) = (membership(ts, base), membership(td, base)) else { continue };
        let name = db
            .partitions
            .as_ref()
            .and_then(|p| p.resolved.config.get(base))
            .map(|p| p.name.clone());
        out.push(SharedPartition {
            pkey: format!("{base:#06x}"),
            name,
            source: word(sf),
            destination: word(df),
            usable: sf || df,
        });
    }
    out
}

impl Explanation {
    /// The explanation as text.
    pub fn render(&self) -> String {
        let mut t = String::new();
        let end = |e: &EndInfo| {
            format!("{} {} {:?} port {} (LID {})", e.kind, e.node_guid, e.description, e.port, e.lid)
        };
        let _ = writeln!(t, "from {}", end(&self.source));
        let _ = writeln!(t, "to   {}", end(&self.destination));
        let _ = writeln!(t, "routed by {}; path SL {} (the engine's)", self.engine, self.sl);
        let _ = writeln!(t);
        let _ = writeln!(t, "hop  node                                          in  out  link                    MTU   VL");
        for (i, h) in self.hops.iter().enumerate() {
            let node = format!("{} {} {:?}", h.kind, h.node_guid, h.description);
            let in_port = h.in_port.map_or_else(|| "-".to_string(), |p| p.to_string());
            let link = format!("{}{} {} Gb/s", h.link.width, h.link.speed, h.link.rate_gbps);
            let vl = match (h.vl, h.vl_map.as_str()) {
                (Some(vl), "qos") => format!("{vl} (QoS map)"),
                (Some(vl), _) => vl.to_string(),
                (None, _) => "- (not programmed)".to_string(),
            };
            let _ = writeln!(
                t,
                "{:<4} {:<45} {:>3} {:>4}  {:<23} {:<5} {} of {}",
                i + 1,
                node,
                in_port,
                h.out_port,
                link,
                h.link.mtu,
                vl,
                h.link.op_vls
            );
        }
        if self.arrives {
            let _ = writeln!(t, "arrives at {} after {} link(s)", end(&self.destination), self.hops.len());
        } else {
            let _ = writeln!(t, "does not arrive");
        }
        let _ = writeln!(t);
        if self.partitions.is_empty() {
            let _ = writeln!(t, "partitions shared: none");
        }
        for p in &self.partitions {
            let name = p.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            let usable = if p.usable { "" } else { ", limited both: no traffic" };
            let _ = writeln!(t, "partition {}{name}: source {}, destination {}{usable}", p.pkey, p.source, p.destination);
        }
        match &self.path_record {
            Some(r) => {
                let _ = writeln!(
                    t,
                    "PathRecord {} -> {}: SL {}, MTU {} (code {}), rate {} Gb/s (code {}), packet life {}, P_Key {}, {}, {} hop(s)",
                    r.slid,
                    r.dlid,
                    r.sl,
                    r.mtu,
                    r.mtu_code,
                    r.rate_gbps,
                    r.rate_code,
                    r.packet_life,
                    r.pkey,
                    if r.reversible { "reversible" } else { "not reversible" },
                    r.hops
                );
            }
            None => {
                let _ = writeln!(t, "PathRecord: none (the SA answers no record)");
            }
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(t);
            for w in &self.warnings {
                let _ = writeln!(t, "warning: {w}");
            }
        }
        t
    }
}

/// OperationalVLs code of a data VL count.
fn vls_code(count: u8) -> u8 {
    match count {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 3,
        5..=8 => 4,
        _ => 5,
    }
}

/// The fabric a snapshot describes, as discovery would leave it: LIDs,
/// links, widths, speeds and OperationalVLs from the snapshot, every
/// linked port at MTU 4096 (the snapshot has no MTUs).
pub fn fabric_of(s: &FabricSnapshot) -> Fabric {
    let nodes = s
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let ports = (0..=n.num_ports)
                .map(|p| {
                    let Some(port) = s.port_of(i as u32, p) else { return FabricPort::default() };
                    let peer = (port.peer != NONE)
                        .then(|| s.ports.get(port.peer as usize))
                        .flatten()
                        .map(|q| (q.node as usize, q.num));
                    let placeholder = p == 0 && n.kind != NodeKind::Switch;
                    let speed = sm_mad::speed::active_bits(port.speed);
                    let info = (!placeholder).then(|| PortInfoRepr {
                        lid: port.lid,
                        lmc: port.lmc,
                        gid_prefix: DEFAULT_GID_PREFIX,
                        mtu_cap: mtu::MTU_4096,
                        neighbor_mtu: if peer.is_some() { mtu::MTU_4096 } else { 0 },
                        link_width_active: sm_mad::speed::width_bit(port.width),
                        link_speed_active: speed.base,
                        link_speed_ext_active: speed.ext,
                        link_speed_ext2_active: speed.ext2,
                        operational_vls: vls_code(port.op_vls),
                        port_state: match port.state {
                            AbiPortState::Active => PortState::Active,
                            AbiPortState::Armed => PortState::Armed,
                            AbiPortState::Init => PortState::Init,
                            _ => PortState::Down,
                        },
                        ..PortInfoRepr::default()
                    });
                    FabricPort { guid: port.guid, info, peer, path: None }
                })
                .collect();
            Arc::new(FabricNode {
                guid: n.guid,
                system_guid: n.system_guid,
                kind: n.kind,
                num_ports: n.num_ports,
                partition_cap: 0,
                description: RString::as_str(&n.description).to_string(),
                path: Arc::from(Vec::<u8>::new()),
                ports,
                switch_info: None,
            })
        })
        .collect();
    Fabric { nodes, sm_port: 0, incomplete: false }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_abi::abi_stable::std_types::ROption;
    use sm_abi::{path_sl_box, PathSl, Routing, Sl2Vl, NO_ROUTE};

    /// Path SLs that differ by destination: SL = DLID mod 4.
    struct ByDlid;

    impl PathSl for ByDlid {
        fn uniform(&self) -> ROption<u8> {
            ROption::RNone
        }
        fn path_sl(&self, _slid: u16, dlid: u16) -> u8 {
            (dlid % 4) as u8
        }
    }

    /// The map every port pair gets: SL n on VL n mod 2 (VL 15 for SL 15).
    fn map() -> [u8; 16] {
        std::array::from_fn(|sl| if sl == 15 { 15 } else { (sl % 2) as u8 })
    }

    /// A 2-ary 3-tree with two hosts per leaf (12 switches, 8 hosts),
    /// LIDs assigned, after `alter` changed its snapshot.
    fn snapshot(alter: impl FnOnce(&mut FabricSnapshot)) -> FabricSnapshot {
        let topo = sm_topology::gen::kary_ntree(2, 3, 2).expect("tree");
        let mut snap = sm_topology::lids::snapshot(&topo, 0).expect("LIDs");
        alter(&mut snap);
        snap
    }

    /// Min-hop LFTs, [`ByDlid`] SLs and the SL2VL map on every port pair
    /// of every switch and every CA port.
    fn routed(snap: FabricSnapshot) -> Arc<AcceptedRouting> {
        let lfts = smcore_kit::balance::min_hop_lfts(&snap);
        let mut sl2vl = Vec::new();
        for (i, n) in snap.nodes.iter().enumerate() {
            let node = i as u32;
            if n.kind == NodeKind::Switch {
                for in_port in 0..=n.num_ports {
                    for out_port in 1..=n.num_ports {
                        sl2vl.push(Sl2Vl { node, in_port, out_port, vl: map() });
                    }
                }
            } else {
                for out_port in 1..=n.num_ports {
                    sl2vl.push(Sl2Vl { node, in_port: 0, out_port, vl: map() });
                }
            }
        }
        let routing = Routing {
            path_sl: path_sl_box(ByDlid),
            sl2vl: sl2vl.into(),
            vls_used: 2,
            ..Routing::single_vl(lfts)
        };
        let routed = Routed { engine: "test".into(), routing, verification: Default::default() };
        accepted_offline(snap, routed, true)
    }

    fn hosts(snap: &FabricSnapshot) -> Vec<usize> {
        (0..snap.nodes.len()).filter(|&i| snap.nodes[i].kind == NodeKind::Ca).collect()
    }

    fn lid_of(snap: &FabricSnapshot, node: usize) -> u16 {
        snap.port_of(node as u32, 1).expect("port 1").lid
    }

    /// (node, in port, out port) of each node the LFTs send `dlid`
    /// through from the CA `src`, read from the snapshot and the LFTs
    /// directly.
    fn lft_walk(accepted: &AcceptedRouting, src: usize, dlid: u16) -> Vec<(u32, Option<u8>, u8)> {
        let snap = &accepted.snapshot;
        let mut out = vec![(src as u32, None, 1)];
        let mut at = snap.port_of(src as u32, 1).expect("port").peer;
        loop {
            let port = &snap.ports[at as usize];
            let node = &snap.nodes[port.node as usize];
            if node.kind != NodeKind::Switch {
                assert_eq!(port.lid, dlid, "the walk arrives at the destination");
                return out;
            }
            let lft = accepted.lft(port.node).expect("an LFT");
            let exit = lft[usize::from(dlid)];
            assert_ne!(exit, NO_ROUTE);
            out.push((port.node, Some(port.num), exit));
            at = snap.port_of(port.node, exit).expect("exit port").peer;
            assert!(out.len() < 16, "no loop");
        }
    }

    #[test]
    fn hops_are_the_lfts_and_the_sl_the_engines_whatever_names_the_ends() {
        let accepted = routed(snapshot(|_| {}));
        let snap = &accepted.snapshot;
        let hs = hosts(snap);
        let (a, b) = (hs[0], hs[hs.len() - 1]);
        let (slid, dlid) = (lid_of(snap, a), lid_of(snap, b));
        let by_lid = explain(&accepted, None, &slid.to_string(), &dlid.to_string()).expect("by LID");
        let port_guid = format!("{:#x}", snap.port_of(b as u32, 1).expect("port").guid);
        let by_guid = explain(&accepted, None, &format!("{:#x}", snap.nodes[a].guid), &port_guid).expect("by GUID");
        let by_desc = explain(&accepted, None, snap.nodes[a].description.as_str(), snap.nodes[b].description.as_str())
            .expect("by description");
        assert_eq!(by_lid, by_guid);
        assert_eq!(by_lid, by_desc);
        let e = by_lid;
        assert!(e.arrives, "{}", e.render());
        assert_eq!((e.source.lid, e.destination.lid), (slid, dlid));
        let walked: Vec<(u32, Option<u8>, u8)> = lft_walk(&accepted, a, dlid);
        let shown: Vec<(String, Option<u8>, u8)> = e.hops.iter().map(|h| (h.node_guid.clone(), h.in_port, h.out_port)).collect();
        let expected: Vec<(String, Option<u8>, u8)> =
            walked.iter().map(|&(n, i, o)| (guid(snap.nodes[n as usize].guid), i, o)).collect();
        assert_eq!(shown, expected);
        assert_eq!(e.hops.len(), 6, "host, leaf, agg, spine, agg, leaf");
        assert_eq!(e.hops[0].kind, "CA");
        assert!(e.hops[1..].iter().all(|h| h.kind == "switch"));
        // The engine's SL, the SA's SL, and the VL each hop's map gives it.
        assert_eq!(e.sl, accepted.path_sl(slid, dlid));
        assert_eq!(e.sl, (dlid % 4) as u8);
        let record = e.path_record.as_ref().expect("a PathRecord");
        assert_eq!((record.slid, record.dlid, record.sl), (slid, dlid, e.sl));
        assert_eq!(record.hops, 6);
        assert_eq!(record.mtu, 4096);
        assert!(record.reversible);
        assert!(e.hops.iter().all(|h| h.vl == Some(e.sl % 2) && h.vl_map == "engine"), "{}", e.render());
        assert_eq!(e.partitions.len(), 1);
        assert_eq!((e.partitions[0].pkey.as_str(), e.partitions[0].usable), ("0x7fff", true));
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        let text = e.render();
        assert!(text.contains(&format!("path SL {}", e.sl)) && text.contains(&format!("PathRecord {slid} -> {dlid}: SL {}", e.sl)), "{text}");
        // A destination whose SL is odd rides VL 1.
        let odd = hs.iter().map(|&h| lid_of(snap, h)).find(|l| l % 2 == 1 && *l != slid).expect("an odd LID");
        let e = explain(&accepted, None, &slid.to_string(), &odd.to_string()).expect("odd");
        assert!(e.hops.iter().all(|h| h.vl == Some(1)), "{}", e.render());
    }

    /// The inter-switch link the path `a` → `b` crosses second (leaf → agg),
    /// as (node, port) at both ends.
    fn second_link(accepted: &AcceptedRouting, a: usize, dlid: u16) -> ((u32, u8), (u32, u8)) {
        let walk = lft_walk(accepted, a, dlid);
        let (node, _, out) = walk[1];
        let peer = accepted.snapshot.port_of(node, out).expect("port").peer;
        let p = &accepted.snapshot.ports[peer as usize];
        ((node, out), (p.node, p.num))
    }

    #[test]
    fn a_narrower_slower_or_smaller_link_is_named() {
        let plain = routed(snapshot(|_| {}));
        let hs = hosts(&plain.snapshot);
        let (a, b) = (hs[0], hs[hs.len() - 1]);
        let dlid = lid_of(&plain.snapshot, b);
        let ((n1, p1), (n2, p2)) = second_link(&plain, a, dlid);
        // That link at 1x on both ends: the same LFTs, the same path.
        let narrow = routed(snapshot(|s| {
            for (n, p) in [(n1, p1), (n2, p2)] {
                let i = s.port_index(n, p) as usize;
                s.ports[i].width = 1;
            }
        }));
        let e = explain(&narrow, None, &lid_of(&narrow.snapshot, a).to_string(), &dlid.to_string()).expect("narrow");
        assert!(e.arrives);
        assert_eq!(e.hops[1].link.width, "1x");
        assert_eq!(e.hops[1].link.rate_gbps, 10.0);
        assert_eq!(e.path_record.as_ref().expect("record").rate_gbps, 10.0, "the SA's rate is the narrow link's");
        let rate: Vec<&String> = e.warnings.iter().filter(|w| w.contains("Gb/s) is below")).collect();
        assert_eq!(rate.len(), 1, "{:?}", e.warnings);
        assert!(rate[0].starts_with("hop 2 ") && rate[0].contains("1xQDR (10 Gb/s)"), "{}", rate[0]);
        // An MTU of 1024 on the far end of that link: the SA's database
        // built from a fabric whose port says so.
        let mut fabric = fabric_of(&plain.snapshot);
        fabric.node_mut(n2 as usize).ports[usize::from(p2)].info.as_mut().expect("PortInfo").mtu_cap = mtu::MTU_1024;
        let db = SaDb::build_shared(SaSource { fabric: &fabric, lmc: 0, accepted: Some(&plain), partitions: None });
        let e = explain_in(&db, &PathDefaults::default(), &lid_of(&plain.snapshot, a).to_string(), &dlid.to_string())
            .expect("small MTU");
        assert_eq!(e.hops[1].link.mtu, 1024);
        assert!(e.hops.iter().enumerate().all(|(i, h)| i == 1 || h.link.mtu == 4096));
        assert_eq!(e.path_record.as_ref().expect("record").mtu, 1024);
        let small: Vec<&String> = e.warnings.iter().filter(|w| w.contains("MTU")).collect();
        assert_eq!(small.len(), 1, "{:?}", e.warnings);
        assert!(small[0].starts_with("hop 2 ") && small[0].contains("MTU 1024 is below"), "{}", small[0]);
    }

    #[test]
    fn a_vl_beyond_the_ports_operational_vls_is_named() {
        let plain = routed(snapshot(|_| {}));
        let hs = hosts(&plain.snapshot);
        let a = hs[0];
        // A destination whose SL rides VL 1.
        let b = *hs.iter().rev().find(|&&h| lid_of(&plain.snapshot, h) % 2 == 1).expect("odd LID");
        let dlid = lid_of(&plain.snapshot, b);
        let ((n1, p1), _) = second_link(&plain, a, dlid);
        let one_vl = routed(snapshot(|s| {
            let i = s.port_index(n1, p1) as usize;
            s.ports[i].op_vls = 1;
        }));
        let e = explain(&one_vl, None, &lid_of(&one_vl.snapshot, a).to_string(), &dlid.to_string()).expect("explained");
        assert_eq!(e.hops[1].vl, Some(1));
        let vl: Vec<&String> = e.warnings.iter().filter(|w| w.contains("not operational")).collect();
        assert_eq!(vl.len(), 1, "{:?}", e.warnings);
        assert!(vl[0].starts_with(&format!("hop 2 (switch {:?} port {p1})", e.hops[1].description)), "{}", vl[0]);
        // An even SL rides VL 0: nothing to say.
        let c = *hs.iter().rev().find(|&&h| lid_of(&plain.snapshot, h) % 2 == 0).expect("even LID");
        let e = explain(&one_vl, None, &lid_of(&one_vl.snapshot, a).to_string(), &lid_of(&one_vl.snapshot, c).to_string())
            .expect("explained");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn a_walk_that_stops_or_loops_is_named_and_has_no_path_record() {
        let mut accepted = routed(snapshot(|_| {}));
        let hs = hosts(&accepted.snapshot);
        let (a, b) = (hs[0], hs[hs.len() - 1]);
        let dlid = lid_of(&accepted.snapshot, b);
        let walk = lft_walk(&accepted, a, dlid);
        let (spine, _, _) = walk[3];
        fn lfts(acc: &mut Arc<AcceptedRouting>) -> &mut sm_abi::abi_stable::std_types::RVec<sm_abi::Lft> {
            &mut Arc::get_mut(acc).expect("not shared").routing.lfts
        }
        // The spine has no entry for the destination.
        for lft in lfts(&mut accepted).iter_mut().filter(|l| l.node == spine) {
            lft.ports[usize::from(dlid)] = NO_ROUTE;
        }
        let e = explain(&accepted, None, &lid_of(&accepted.snapshot, a).to_string(), &dlid.to_string()).expect("explained");
        assert!(!e.arrives);
        assert_eq!(e.hops.len(), 3, "up to the spine: {}", e.render());
        assert!(e.path_record.is_none());
        let spine_guid = guid(accepted.snapshot.nodes[spine as usize].guid);
        assert!(e.warnings.iter().any(|w| w.contains(&spine_guid) && w.contains("no LFT entry")), "{:?}", e.warnings);
        assert!(e.warnings.iter().any(|w| w.contains("no PathRecord")), "{:?}", e.warnings);
        // The spine sends it back down where it came from: a loop.
        let back = walk[3].1.expect("the spine's in port");
        for lft in lfts(&mut accepted).iter_mut().filter(|l| l.node == spine) {
            lft.ports[usize::from(dlid)] = back;
        }
        let e = explain(&accepted, None, &lid_of(&accepted.snapshot, a).to_string(), &dlid.to_string()).expect("explained");
        assert!(!e.arrives);
        assert!(e.warnings.iter().any(|w| w.contains("the LFTs loop")), "{:?}", e.warnings);
        assert!(e.hops.len() <= 6, "the loop is cut where it closes: {}", e.render());
        assert!(e.path_record.is_none());
    }

    #[test]
    fn unknown_and_ambiguous_ports_are_errors_and_descriptions_may_hold_spaces() {
        let accepted = routed(snapshot(|s| {
            let hs: Vec<usize> = (0..s.nodes.len()).filter(|&i| s.nodes[i].kind == NodeKind::Ca).collect();
            s.nodes[hs[0]].description = "node a HCA-1".into();
            s.nodes[hs[1]].description = "node b HCA-1".into();
            s.nodes[hs[2]].description = "twin".into();
            s.nodes[hs[3]].description = "twin".into();
        }));
        assert_eq!(explain(&accepted, None, "nosuchhost", "1").err(), Some(ExplainError::Unknown("nosuchhost".into())));
        assert!(matches!(explain(&accepted, None, "1", "60000"), Err(ExplainError::Unknown(_))));
        assert!(matches!(explain(&accepted, None, "0xdeadbeef", "1"), Err(ExplainError::Unknown(_))));
        let twin = explain(&accepted, None, "twin", "1").err().expect("ambiguous");
        assert!(matches!(twin, ExplainError::Ambiguous { count: 2, .. }), "{twin:?}");
        assert!(twin.to_string().contains("give a LID or a GUID"), "{twin}");
        let fabric = fabric_of(&accepted.snapshot);
        let db = SaDb::build_shared(SaSource { fabric: &fabric, lmc: 0, accepted: Some(&accepted), partitions: None });
        let d = PathDefaults::default();
        let e = explain_words(&db, &d, &["node", "a", "HCA-1", "node", "b", "HCA-1"]).expect("split at the one place");
        assert_eq!((e.source.description.as_str(), e.destination.description.as_str()), ("node a HCA-1", "node b HCA-1"));
        assert!(matches!(explain_words(&db, &d, &["node"]), Err(ExplainError::Usage(_))));
        assert!(matches!(explain_words(&db, &d, &["node", "c", "x"]), Err(ExplainError::Usage(_))));
    }

    #[test]
    fn the_node_name_map_names_ends_and_hops() {
        let accepted = routed(snapshot(|_| {}));
        let cas: Vec<String> =
            accepted.snapshot.nodes.iter().filter(|n| n.kind == NodeKind::Ca).map(|n| n.description.to_string()).collect();
        let mut e = explain(&accepted, None, &cas[0], &cas[cas.len() - 1]).expect("a path");
        assert!(!e.hops.is_empty());
        let sw = e.hops.iter().find(|h| h.kind == "switch").expect("a switch on the path").node_guid.clone();
        let map = format!("{} \"source-host\"\n{sw} \"spine-7\"\n", e.source.node_guid);
        let names = crate::node_names::NodeNameMap::parse(&map, std::path::Path::new("m")).expect("map");
        let before = e.destination.description.clone();
        e.rename(&names);
        assert_eq!(e.source.description, "source-host");
        assert!(e.hops.iter().filter(|h| h.node_guid == sw).all(|h| h.description == "spine-7"));
        assert!(e.hops.iter().filter(|h| h.to.node_guid == sw).all(|h| h.to.description == "spine-7"));
        assert!(e.render().contains("spine-7"));
        if e.destination.node_guid != e.source.node_guid && e.destination.node_guid != sw {
            assert_eq!(e.destination.description, before, "unnamed nodes keep their description");
        }
    }
}
