//! # Incremental discovery: re-read only behind the ports that changed
//!
//! A full heavy sweep reads every node of the fabric again (on a 16-ary
//! 3-tree, ~48k SMPs) even when one host rebooted. When a light sweep or a
//! trap names the switches whose ports changed, [`rediscover`] starts from
//! the last complete fabric instead and reads:
//!
//! * SwitchInfo and the PortInfo of every port of each named switch (port
//!   0 included: a switch that rebooted has lost its LID, and is then
//!   read whole);
//! * NodeInfo through each of their ports that came up, or that is up but
//!   not Active (it trained again: what lies behind may have rebooted);
//! * every attribute of what those probes find new, or found again after
//!   a retrain, and so on outwards (a switch that came back, and what lies
//!   behind it);
//! * SwitchInfo of the switches a light sweep could not reach, on their
//!   new directed route (a spine that went away takes the routes of the
//!   switches behind it along).
//!
//! A link whose port went down is dropped; what no link leads to any more
//! is dropped with it. A node that does not answer is given the rounds it
//! takes for the changes to give it another route, and its neighbours are
//! read to prove it gone (a spine whose neighbours' traps were lost on
//! routes through it). Everything else is taken from the last fabric, as
//! the last heavy sweep programmed it; the switches that sweep gave new
//! LIDs are named again (their other ports may report them), see
//! [`Changes::add_relabelled`].
//!
//! The result is laid out as a full discovery of the same fabric would
//! lay it out ([`replay`]: node order, directed routes, which ports were
//! read), so that the later stages (LIDs for new nodes, the engines, the
//! SA) see the same input whichever discovery ran.
//!
//! Whatever the incremental walk cannot account for ends it with a
//! [`Fallback`], and the caller runs a full sweep: a port that now leads to
//! another node than before, a node that does not answer on a route that
//! no change explains, a probe lost, an incomplete last sweep, a route
//! longer than 63 hops.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use sm_abi::NodeKind;
use sm_mad::mad::attr;
use sm_mad::smp::{DATA_LEN, MAX_HOPS};
use sm_mad::{NodeInfoRepr, PortInfoRepr, PortState};
use tracing::{debug, info};

use super::discovery::{
    extended, managed_ports, DrPath,
    check_node_info, link_is_up, node_kind, parse_description, parse_node_info, parse_port_info, parse_switch_info,
    DiscoveryReport, Fabric, FabricNode, FabricPort, SweepError, SweepLimits,
};
use super::transport::{SmpClient, SmpError, SmpOp};

/// Every how many heavy sweeps one is full even though incremental ones
/// would do: a safety net for what no trap or light sweep reports (a
/// changed attribute behind an unchanged link state).
pub const DEFAULT_FULL_SWEEP_EVERY: u32 = 8;

/// Rounds after which a walk that still has something to read gives up:
/// every round either settles a node or changes a link, so a walk this
/// long is chasing something it cannot account for.
const MAX_ROUNDS: usize = 256;

/// What the light sweep or the traps say changed since the last heavy sweep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Switches (node GUID) with a port that changed state:
    /// PortStateChange set, or a trap 128 they issued. A set: a trap
    /// repeated until repressed names its switch once.
    pub switches: BTreeSet<u64>,
    /// Switches (node GUID) that did not answer the light sweep on their
    /// last directed route.
    pub lost: BTreeSet<u64>,
    /// Why only a full sweep will do (a trap that names no switch, a
    /// capability change), if anything says so.
    pub full: Option<String>,
}

impl Changes {
    /// Adds what a light sweep found.
    pub fn add_light(&mut self, light: &super::light::LightOutcome) {
        self.switches.extend(light.changed.iter().map(|&(_, guid)| guid));
        self.lost.extend(light.lost.iter().map(|&(_, guid)| guid));
        if light.incomplete {
            self.need_full("the last heavy sweep was incomplete");
        }
    }

    /// Adds a sweep-causing trap `number` from `issuer`, named by its LID
    /// in `fabric`: a link state change (128) of a switch is handled
    /// incrementally, anything else asks for a full sweep.
    pub fn add_trap(&mut self, number: u16, issuer: u16, fabric: Option<&Fabric>) {
        if number != sm_mad::notice::trap::LINK_STATE_CHANGE {
            self.need_full(format!("trap {number} from LID {issuer}"));
            return;
        }
        let switch = fabric.and_then(|f| {
            f.nodes.iter().find(|n| n.is_switch() && n.ports.first().and_then(|p| p.info.as_ref()).is_some_and(|i| i.lid == issuer))
        });
        match switch {
            Some(n) => {
                self.switches.insert(n.guid);
            }
            None => self.need_full(format!("trap 128 from LID {issuer}, not a switch of the last sweep")),
        }
    }

    /// Adds the switches the last heavy sweep relabelled
    /// ([`super::SweepOutcome::relabelled`]): their ports are read again.
    pub fn add_relabelled(&mut self, switches: &[u64]) {
        self.switches.extend(switches.iter().copied());
    }

    /// Asks for a full sweep, keeping the first reason.
    pub fn need_full(&mut self, why: impl Into<String>) {
        self.full.get_or_insert_with(|| why.into());
    }

    /// Whether nothing is known to have changed.
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty() && self.lost.is_empty() && self.full.is_none()
    }
}

/// Why an incremental discovery gave up: the caller sweeps in full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fallback {
    /// Nothing to start from, or a reason given with the changes.
    #[error("{0}")]
    Asked(String),
    /// A port leads to another node (or port) than the last sweep knew.
    #[error("port {port} of {guid:#018x} now leads to {found:#018x} port {found_port}, not where it led")]
    Moved {
        /// The node whose port was probed.
        guid: u64,
        /// The port.
        port: u8,
        /// The node found behind it.
        found: u64,
        /// The port found.
        found_port: u8,
    },
    /// An SMP got no usable answer on a route that no change explains.
    #[error("{guid:#018x} did not answer ({error}) and no change explains it")]
    Silent {
        /// The node.
        guid: u64,
        /// What the SMP got.
        error: String,
    },
    /// A NodeInfo that makes no sense, or contradicts the last sweep.
    #[error("NodeInfo through port {port} of {guid:#018x}: {why}")]
    Contradiction {
        /// The node probed from.
        guid: u64,
        /// Its port.
        port: u8,
        /// What is wrong.
        why: String,
    },
    /// A directed route would be longer than IBA allows.
    #[error("a directed route beyond {MAX_HOPS} hops")]
    TooFar,
    /// The walk did not settle.
    #[error("no end after {MAX_ROUNDS} rounds")]
    Endless,
    /// The stop flag or the budget ended the sweep.
    #[error(transparent)]
    Limits(#[from] SweepError),
}

/// What an incremental discovery read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IncrementalReport {
    /// Nodes whose attributes were read (wholly or their ports).
    pub nodes_read: usize,
    /// NodeInfo probes through ports.
    pub probes: usize,
    /// Nodes new to the fabric (or back in it).
    pub added: usize,
    /// Nodes of the last fabric no link leads to any more.
    pub dropped: usize,
    /// Links that went down.
    pub links_down: usize,
    /// Rounds of SMPs.
    pub rounds: usize,
}

/// How much of a node to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Read {
    /// SwitchInfo only: is it there, did its ports change.
    Verify,
    /// SwitchInfo and PortInfo of ports 0..=N of a switch (port 0 tells
    /// whether it rebooted: its LID is gone).
    Ports,
    /// Everything: NodeDescription, and SwitchInfo and PortInfo 0..=N of
    /// a switch, or PortInfo of the port (the one entered by) of a CA.
    Whole(u8),
}

/// The incremental walk's state: the fabric as now known (the last one,
/// updated; nodes no longer reachable stay in it until [`replay`] leaves
/// them out) and what is left to read.
struct Walk {
    model: Fabric,
    by_guid: HashMap<u64, usize>,
    pending: BTreeMap<usize, Read>,
    /// Nodes read (Ports or Whole) this sweep.
    read: HashSet<usize>,
    /// Links seen by a probe this sweep: not probed again.
    probed: HashSet<(usize, u8)>,
    report: IncrementalReport,
    /// Changes of the model's shape (links, nodes) so far this sweep: a
    /// round that moved it made progress.
    shape: u64,
    /// The model laid out as discovery would, with its index by GUID, and
    /// the `shape` it was laid out at: reused while the shape holds.
    layout: Option<(Fabric, HashMap<u64, usize>, u64)>,
}

impl Walk {
    /// The model's shape changed (a link came or went, a node came).
    fn reshaped(&mut self) {
        self.shape += 1;
    }

    /// The model as discovery would lay it out now: the routes to read it
    /// by. Laid out again only when its shape changed.
    fn layout(&mut self) -> (Fabric, HashMap<u64, usize>) {
        match self.layout.take() {
            Some((layout, at, shape)) if shape == self.shape => (layout, at),
            _ => {
                let layout = replay(&self.model);
                let at = layout.nodes.iter().enumerate().map(|(i, n)| (n.guid, i)).collect();
                (layout, at)
            }
        }
    }

    fn schedule(&mut self, node: usize, read: Read) {
        let slot = self.pending.entry(node).or_insert(read);
        if read > *slot {
            *slot = read;
        }
    }

    /// Schedules the neighbours of `node` not read this sweep, whose ports
    /// tell whether `node` is still there; returns how many.
    fn suspect_neighbours(&mut self, node: usize) -> usize {
        let neighbours: Vec<usize> = self.model.nodes[node]
            .ports
            .iter()
            .filter_map(|p| p.peer.map(|(n, _)| n))
            .filter(|&n| self.model.nodes[n].is_switch() && !self.read.contains(&n) && !self.pending.contains_key(&n))
            .collect();
        for &n in &neighbours {
            self.schedule(n, Read::Ports);
        }
        neighbours.len()
    }

    fn unlink(&mut self, (node, port): (usize, u8)) {
        if let Some((far, far_port)) = self.model.node_mut(node).ports[usize::from(port)].peer.take() {
            self.model.node_mut(far).ports[usize::from(far_port)].peer = None;
            self.report.links_down += 1;
            self.reshaped();
            // The far end saw its port go down too; read it, unless it is
            // read already or gone (then it is unreachable and skipped).
            if self.model.nodes[far].is_switch() && !self.read.contains(&far) {
                self.schedule(far, Read::Ports);
            }
        }
    }

    /// Takes a fresh PortInfo of `port` of switch `node`; returns whether
    /// a probe through it is due.
    fn port_read(&mut self, node: usize, port: u8, info: PortInfoRepr) -> bool {
        let slot = &mut self.model.node_mut(node).ports[usize::from(port)];
        slot.info = Some(info);
        if port == 0 {
            return false;
        }
        let up = link_is_up(&info);
        match slot.peer {
            Some(_) if !up => {
                self.unlink((node, port));
                false
            }
            // Up but not Active: it trained again, and the SM did not
            // activate it since; what is behind may be another boot of
            // the same node, or another node.
            Some(_) => info.port_state != PortState::Active && !self.probed.contains(&(node, port)),
            None => up,
        }
    }

    /// Takes the NodeInfo `found` through `port` of `node` along `path`.
    fn probe(&mut self, node: usize, port: u8, path: DrPath, found: NodeInfoRepr) -> Result<(), Fallback> {
        let guid = self.model.nodes[node].guid;
        let contradiction = |why: String| Fallback::Contradiction { guid, port, why };
        check_node_info(&found, true).map_err(contradiction)?;
        let kind = node_kind(found.node_type);
        let far_port = found.local_port_num;
        self.report.probes += 1;
        self.probed.insert((node, port));
        match self.model.nodes[node].ports[usize::from(port)].peer {
            Some((far, expected_port)) => {
                let n = &self.model.nodes[far];
                if n.guid != found.node_guid || expected_port != far_port {
                    return Err(Fallback::Moved { guid, port, found: found.node_guid, found_port: far_port });
                }
                self.probed.insert((far, far_port));
                // The same node, trained again: it may have rebooted.
                self.model.node_mut(far).ports[usize::from(far_port)].guid = found.port_guid;
                self.schedule(far, Read::Whole(far_port));
            }
            None => {
                let far = match self.by_guid.get(&found.node_guid) {
                    Some(&far) => {
                        let n = &self.model.nodes[far];
                        if n.kind != kind || n.num_ports != found.num_ports {
                            return Err(contradiction("another kind of node than this GUID was".into()));
                        }
                        if (far, far_port) == (node, port) {
                            return Err(contradiction("the port claims to be its own peer".into()));
                        }
                        let is_switch = n.is_switch();
                        let p = &n.ports[usize::from(far_port)];
                        if p.peer.is_some() {
                            // A link this sweep just made from the other
                            // side is the same cable; anything else moved.
                            if p.peer == Some((node, port)) {
                                return Ok(());
                            }
                            return Err(Fallback::Moved { guid, port, found: found.node_guid, found_port: far_port });
                        }
                        self.model.node_mut(far).ports[usize::from(far_port)].guid = found.port_guid;
                        // Its port came up: read it (a CA through that port).
                        let read = if is_switch { Read::Ports } else { Read::Whole(far_port) };
                        if !(is_switch && self.read.contains(&far)) {
                            self.schedule(far, read);
                        }
                        far
                    }
                    None => {
                        let far = self.add_node(&found, path);
                        self.schedule(far, Read::Whole(far_port));
                        far
                    }
                };
                self.probed.insert((far, far_port));
                self.model.node_mut(node).ports[usize::from(port)].peer = Some((far, far_port));
                self.model.node_mut(far).ports[usize::from(far_port)].peer = Some((node, port));
                self.reshaped();
            }
        }
        Ok(())
    }

    fn add_node(&mut self, info: &NodeInfoRepr, path: DrPath) -> usize {
        let kind = node_kind(info.node_type);
        let node = self.model.nodes.len();
        // No routes: the layout gives them.
        let (ports, _) = managed_ports(kind == NodeKind::Switch, info.num_ports, info.local_port_num, info.port_guid, None);
        self.model.nodes.push(Arc::new(FabricNode::from_node_info(info, path, ports)));
        self.by_guid.insert(info.node_guid, node);
        self.report.added += 1;
        node
    }
}

/// The SMPs of reading `read` of `node` along `path`.
fn read_ops(node: &FabricNode, read: Read, path: &[u8]) -> Vec<SmpOp> {
    let mut ops = Vec::new();
    if let Read::Whole(_) = read {
        ops.push(SmpOp::get(attr::NODE_DESCRIPTION, 0, path));
    }
    // A port known to support extended speeds is read with
    // SMSupportExtendedSpeeds.
    let port0 = node.ports.first().and_then(|p| p.info);
    let extended = |p: u8| {
        let info = node.ports.get(usize::from(p)).and_then(|s| s.info);
        info.is_some_and(|i| crate::port_info::has_extended_speeds(&i, if node.is_switch() { port0.as_ref() } else { None }))
    };
    if node.is_switch() {
        ops.push(SmpOp::get(attr::SWITCH_INFO, 0, path));
        if read != Read::Verify {
            ops.extend((0..=node.num_ports).map(|p| crate::port_info::get(p, path, extended(p))));
        }
    } else if let Read::Whole(port) = read {
        ops.push(crate::port_info::get(port, path, extended(port)));
    }
    ops
}

/// Rediscovers `last` (the fabric of the last complete heavy sweep, as
/// programmed) behind `changes`, and returns the fabric as a full
/// discovery would have found it, with an empty [`DiscoveryReport`] (an
/// incremental discovery that misses anything falls back instead).
pub fn rediscover(
    client: &mut SmpClient<'_>,
    last: &Fabric,
    changes: &Changes,
    limits: &SweepLimits,
) -> Result<(Fabric, DiscoveryReport, IncrementalReport), Fallback> {
    if let Some(why) = &changes.full {
        return Err(Fallback::Asked(why.clone()));
    }
    if last.nodes.is_empty() {
        return Err(Fallback::Asked("no fabric to start from".into()));
    }
    if last.incomplete {
        return Err(Fallback::Asked("the last heavy sweep was incomplete".into()));
    }
    let mut model = last.clone();
    for n in &mut model.nodes {
        // Only the bits read this sweep are cleared after it (and only a
        // node whose bit is set is copied to clear it).
        if n.switch_info.is_some_and(|i| i.port_state_change) {
            if let Some(i) = Arc::make_mut(n).switch_info.as_mut() {
                i.port_state_change = false;
            }
        }
    }
    let by_guid = model.nodes.iter().enumerate().map(|(i, n)| (n.guid, i)).collect();
    let mut walk = Walk {
        model,
        by_guid,
        pending: BTreeMap::new(),
        read: HashSet::new(),
        probed: HashSet::new(),
        report: IncrementalReport::default(),
        shape: 0,
        layout: None,
    };
    for guid in &changes.switches {
        if let Some(&i) = walk.by_guid.get(guid) {
            walk.schedule(i, Read::Ports);
        }
    }
    for guid in &changes.lost {
        if let Some(&i) = walk.by_guid.get(guid) {
            walk.schedule(i, Read::Verify);
        }
    }
    let before = walk.model.nodes.iter().map(|n| n.guid).collect::<Vec<_>>();
    while !walk.pending.is_empty() {
        limits.check()?;
        walk.report.rounds += 1;
        if walk.report.rounds > MAX_ROUNDS {
            return Err(Fallback::Endless);
        }
        round(client, &mut walk)?;
    }
    let fabric = replay(&walk.model);
    let present: HashSet<u64> = fabric.nodes.iter().map(|n| n.guid).collect();
    walk.report.dropped = before.iter().filter(|g| !present.contains(g)).count();
    info!(
        nodes = fabric.nodes.len(),
        read = walk.report.nodes_read,
        probes = walk.report.probes,
        added = walk.report.added,
        dropped = walk.report.dropped,
        links_down = walk.report.links_down,
        rounds = walk.report.rounds,
        smps = client.stats().sent,
        "incremental discovery done"
    );
    Ok((fabric, DiscoveryReport::default(), walk.report))
}

/// One round: the pending reads on the routes the fabric as now known
/// gives, then the probes they call for.
fn round(client: &mut SmpClient<'_>, walk: &mut Walk) -> Result<(), Fallback> {
    let shape = walk.shape;
    let (layout, at) = walk.layout();
    let mut batch = Vec::new();
    let mut ops = Vec::new();
    for (node, read) in std::mem::take(&mut walk.pending) {
        let n = &walk.model.nodes[node];
        // Gone: no link leads to it any more.
        let Some(&i) = at.get(&n.guid) else { continue };
        let path = match read {
            Read::Whole(port) if !n.is_switch() => match layout.nodes[i].ports.get(usize::from(port)).and_then(|p| p.path.clone()) {
                Some(path) => path,
                None => continue,
            },
            _ => layout.nodes[i].path.clone(),
        };
        let these = read_ops(n, read, &path);
        batch.push((node, read, ops.len()..ops.len() + these.len()));
        ops.extend(these);
    }
    let answers = client.run_many(&ops);
    let mut failed = Vec::new();
    let mut probes = Vec::new();
    for (node, read, range) in batch {
        let ops = &ops[range.clone()];
        let answers = &answers[range];
        if let Some((op, Err(e))) = ops.iter().zip(answers).find(|(_, a)| a.is_err()) {
            debug!(guid = format_args!("{:#018x}", walk.model.nodes[node].guid), attribute = op.attribute, "no answer: {e}");
            failed.push((node, read, e.to_string()));
            continue;
        }
        if let Err(e) = apply(walk, node, read, ops, answers, &mut probes) {
            failed.push((node, read, e.to_string()));
        }
    }
    let routes: Vec<DrPath> = probes
        .iter()
        .map(|&(node, port)| {
            let guid = walk.model.nodes[node].guid;
            let to_node = at.get(&guid).map_or(&[][..], |&i| &layout.nodes[i].path[..]);
            if to_node.len() >= usize::from(MAX_HOPS) {
                return Err(Fallback::TooFar);
            }
            Ok(extended(to_node, port))
        })
        .collect::<Result<_, _>>()?;
    let probe_ops: Vec<SmpOp> = routes.iter().map(|path| SmpOp::get(attr::NODE_INFO, 0, path)).collect();
    let answers = client.run_many(&probe_ops);
    for ((&(node, port), path), answer) in probes.iter().zip(routes).zip(answers) {
        // Linked meanwhile from the far side (a cable between two ports
        // that both came up).
        if walk.probed.contains(&(node, port)) {
            continue;
        }
        match answer.and_then(|d| parse_node_info(&d)) {
            Ok(found) => {
                walk.probe(node, port, path.clone(), found)?;
                // Accepted into the model: an SMP along `path` now carries
                // the key of the port the model puts there, never that of
                // a GUID an unchecked answer named.
                if let Some((far, far_port)) = walk.model.nodes[node].ports[usize::from(port)].peer {
                    let f = &walk.model.nodes[far];
                    let far_guid = if f.is_switch() { f.ports[0].guid } else { f.ports[usize::from(far_port)].guid };
                    client.m_keys().learn_node(&path, f.guid, far_guid, f.is_switch());
                }
            }
            Err(e) => {
                return Err(Fallback::Silent { guid: walk.model.nodes[node].guid, error: format!("NodeInfo through port {port}: {e}") })
            }
        }
    }
    if !failed.is_empty() {
        if walk.shape == shape {
            // Nothing changed this round that could give the silent nodes
            // another route. A node gone without a word (a switch whose
            // neighbours' traps were lost on routes through it) is proven
            // gone by its neighbours' ports: read those not read yet.
            let mut suspects = 0;
            for (node, _, _) in &failed {
                suspects += walk.suspect_neighbours(*node);
            }
            if suspects == 0 {
                // They are silent where they are.
                let (node, _, error) = &failed[0];
                return Err(Fallback::Silent { guid: walk.model.nodes[*node].guid, error: error.clone() });
            }
        }
        for (node, read, _) in failed {
            walk.schedule(node, read);
        }
    }
    walk.layout = Some((layout, at, shape));
    Ok(())
}

/// Takes the answers to reading `read` of `node`; the probes due go to
/// `probes`.
fn apply(
    walk: &mut Walk,
    node: usize,
    read: Read,
    ops: &[SmpOp],
    answers: &[Result<[u8; DATA_LEN], SmpError>],
    probes: &mut Vec<(usize, u8)>,
) -> Result<(), SmpError> {
    // Parse everything first: a node is taken whole or not at all.
    let mut description = None;
    let mut switch_info = None;
    let mut ports = Vec::new();
    for (op, answer) in ops.iter().zip(answers) {
        let Ok(data) = answer else { continue };
        match op.attribute {
            attr::NODE_DESCRIPTION => description = Some(parse_description(data)?),
            attr::SWITCH_INFO => switch_info = Some(parse_switch_info(data)?),
            _ => ports.push((op.modifier as u8, parse_port_info(data)?)),
        }
    }
    let n = walk.model.node_mut(node);
    if let Some(d) = description {
        n.description = d;
    }
    if let Some(info) = switch_info {
        let changed = info.port_state_change;
        n.switch_info = Some(info);
        if read == Read::Verify {
            if changed {
                walk.schedule(node, Read::Ports);
            }
            return Ok(());
        }
    }
    if let Read::Whole(port) = read {
        if !walk.model.nodes[node].is_switch() {
            // A CA's port: its link is known (the probe that found it).
            walk.model.node_mut(node).ports[usize::from(port)].info = ports.first().map(|&(_, i)| i);
            walk.read.insert(node);
            walk.report.nodes_read += 1;
            return Ok(());
        }
    }
    walk.read.insert(node);
    walk.report.nodes_read += 1;
    if read == Read::Ports {
        let port0 = |i: &PortInfoRepr| (i.lid, i.master_sm_lid);
        let before = walk.model.nodes[node].ports.first().and_then(|p| p.info.as_ref()).map(port0);
        if ports.first().is_some_and(|(p, i)| *p == 0 && Some(port0(i)) != before) {
            // Rebooted (or relabelled by someone else): read it whole.
            walk.schedule(node, Read::Whole(0));
        }
    }
    for (port, info) in ports {
        if walk.port_read(node, port, info) {
            probes.push((node, port));
        }
    }
    Ok(())
}

/// `model` laid out as [`super::discovery::discover`] would find it with
/// no SMP lost: the same walk (rounds of NodeInfo probes through the ports
/// found up, in the same order), its answers taken from `model` instead of
/// the fabric. Node order, directed routes, the ports read (with the
/// attributes `model` holds) and the links are a full discovery's; nodes
/// no link leads to are left out.
///
/// The walk runs over light drafts (links and routes only); a node that
/// comes out as `model` already holds it, at the same index, is `model`'s
/// own (shared, not copied). After a host reboot that is every node but
/// the host, and an incremental sweep lays its model out up to three
/// times.
pub fn replay(model: &Fabric) -> Fabric {
    let mut r = Replay {
        model,
        nodes: Vec::with_capacity(model.nodes.len()),
        ports: Vec::new(),
        placed: vec![None; model.nodes.len()],
    };
    let Some(root) = model.nodes.first() else {
        return Fabric { nodes: Vec::new(), sm_port: model.sm_port, incomplete: false };
    };
    let root_port = if root.is_switch() { 0 } else { model.sm_port };
    let mut tasks = Vec::new();
    r.place(0, root_port, Vec::new().into(), &mut tasks);
    let mut first_round = true;
    while !tasks.is_empty() {
        let mut next = Vec::new();
        for task in tasks {
            match task {
                Task::Port(n, p) => {
                    let (m, at) = (r.nodes[n].m, r.nodes[n].first + usize::from(p));
                    let is_switch = model.nodes[m].is_switch();
                    let up = model.nodes[m].ports[usize::from(p)].info.as_ref().is_some_and(link_is_up);
                    r.ports[at].read = true;
                    if is_switch && p != 0 && r.ports[at].peer.is_none() && up {
                        next.push(Task::Probe(n, p));
                    }
                }
                Task::Probe(n, p) => {
                    let Draft { m: source, first, .. } = r.nodes[n];
                    let here = &r.nodes[n].path;
                    if r.ports[first + usize::from(p)].peer.is_some() || here.len() >= usize::from(MAX_HOPS) {
                        continue;
                    }
                    let Some((m, q)) = model.nodes[source].ports[usize::from(p)].peer else { continue };
                    // The route through this port, made only when a node or
                    // port takes it: the model's own when it is this one.
                    let route = |here: &DrPath| match &model.nodes[m].path {
                        known if known.len() == here.len() + 1 && known.last() == Some(&p) && same_route(&known[..here.len()], here) => {
                            known.clone()
                        }
                        _ => extended(here, p),
                    };
                    let (far, path) = match r.placed[m] {
                        Some(far) => (far, None),
                        None => {
                            let path = route(here);
                            r.place(m, q, path.clone(), &mut next);
                            (r.nodes.len() - 1, Some(path))
                        }
                    };
                    let far_at = r.nodes[far].first + usize::from(q);
                    // (A model's links join ports it has; discovery checks
                    // each LocalPortNum against NumPorts.)
                    if q > model.nodes[m].num_ports || (far, q) == (n, p) || r.ports[far_at].peer.is_some() {
                        continue;
                    }
                    if !model.nodes[m].is_switch() && r.ports[far_at].path.is_none() {
                        r.ports[far_at].guid = model.nodes[m].ports[usize::from(q)].guid;
                        r.ports[far_at].path = Some(path.unwrap_or_else(|| route(&r.nodes[n].path)));
                        next.push(Task::Port(far, q));
                    }
                    r.ports[first + usize::from(p)].peer = Some((far, q));
                    r.ports[far_at].peer = Some((n, p));
                }
            }
        }
        if std::mem::take(&mut first_round) && !root.is_switch() {
            next.push(Task::Probe(0, model.sm_port));
        }
        tasks = next;
    }
    let nodes = (0..r.nodes.len()).map(|n| r.node(n)).collect();
    Fabric { nodes, sm_port: model.sm_port, incomplete: false }
}

/// Whether two routes are the same: mostly the very same one (routes are
/// shared), else compared hop by hop (a few bytes: a loop, not a call).
fn same_route(a: &[u8], b: &[u8]) -> bool {
    std::ptr::eq(a, b) || (a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y))
}

/// One request of [`replay`]'s walk, as in discovery's.
enum Task {
    Probe(usize, u8),
    Port(usize, u8),
}

/// A node [`replay`] placed: its model node, the port it was entered by,
/// its route, and where its ports start in [`Replay::ports`].
struct Draft {
    m: usize,
    entered: u8,
    path: DrPath,
    first: usize,
}

/// What [`replay`]'s walk decides of one port: its GUID and route (the
/// ports discovery manages), whether its PortInfo is read, its link.
#[derive(Default, Clone)]
struct DraftPort {
    guid: u64,
    path: Option<DrPath>,
    read: bool,
    peer: Option<(usize, u8)>,
}

/// [`replay`]'s state: the nodes laid out so far, and where each node of
/// the model went.
struct Replay<'m> {
    model: &'m Fabric,
    nodes: Vec<Draft>,
    ports: Vec<DraftPort>,
    placed: Vec<Option<usize>>,
}

impl Replay<'_> {
    /// Adds model node `m` as discovery adds a node reached at `port`
    /// along `path`; adds the PortInfo reads it calls for to `tasks`.
    fn place(&mut self, m: usize, port: u8, path: DrPath, tasks: &mut Vec<Task>) {
        let n = &self.model.nodes[m];
        let index = self.nodes.len();
        self.placed[m] = Some(index);
        let first = self.ports.len();
        self.ports.resize(first + usize::from(n.num_ports) + 1, DraftPort::default());
        // As [`managed_ports`]: a switch manages all its ports along its
        // route, a CA the port it was entered by.
        let nums = if n.is_switch() { 0..=n.num_ports } else { port..=port };
        let guid = n.ports.get(usize::from(port)).map_or(0, |p| p.guid);
        for num in nums {
            if let Some(slot) = self.ports.get_mut(first + usize::from(num)).filter(|_| num <= n.num_ports) {
                slot.guid = guid;
                slot.path = Some(path.clone());
            }
            tasks.push(Task::Port(index, num));
        }
        self.nodes.push(Draft { m, entered: port, path, first });
    }

    /// Draft `n` as a node: `model`'s own when it is the same.
    fn node(&self, n: usize) -> Arc<FabricNode> {
        let d = &self.nodes[n];
        let kept = &self.model.nodes[d.m];
        let drafts = &self.ports[d.first..d.first + usize::from(kept.num_ports) + 1];
        // PortInfo's LocalPortNum is the port the SMP came in by: on a
        // switch, the one it was reached by; a CA port is read through
        // itself (the SM's own node: as read).
        let local = |p: usize| (!d.path.is_empty()).then(|| if kept.is_switch() { d.entered } else { p as u8 });
        let info = |p: usize, draft: &DraftPort| match (draft.read, kept.ports[p].info, local(p)) {
            (true, Some(mut info), Some(num)) => {
                info.local_port_num = num;
                Some(info)
            }
            (true, info, _) => info,
            (false, _, _) => None,
        };
        // `old` is the model's port itself: its PortInfo is the one laid
        // out when it is read and already has its LocalPortNum.
        let same_path = |a: &Option<DrPath>, b: &Option<DrPath>| match (a, b) {
            (Some(a), Some(b)) => same_route(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        let same = n == d.m
            && same_route(&kept.path, &d.path)
            && kept.ports.len() == drafts.len()
            && kept.ports.iter().zip(drafts).enumerate().all(|(p, (old, draft))| {
                old.guid == draft.guid
                    && old.peer == draft.peer
                    && same_path(&old.path, &draft.path)
                    && match (draft.read, &old.info) {
                        (false, info) => info.is_none(),
                        (true, Some(i)) => local(p).is_none_or(|num| i.local_port_num == num),
                        (true, None) => true,
                    }
            });
        if same {
            return Arc::clone(kept);
        }
        Arc::new(FabricNode {
            guid: kept.guid,
            system_guid: kept.system_guid,
            kind: kept.kind,
            num_ports: kept.num_ports,
            partition_cap: kept.partition_cap,
            description: kept.description.clone(),
            path: d.path.clone(),
            ports: drafts
                .iter()
                .enumerate()
                .map(|(p, draft)| FabricPort { guid: draft.guid, info: info(p, draft), peer: draft.peer, path: draft.path.clone() })
                .collect(),
            switch_info: kept.switch_info,
        })
    }
}
