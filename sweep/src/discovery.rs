//! Discovery by directed-route SMPs from the SM port (IBA 14.2.2).
//!
//! Breadth first from the SM's own node: NodeInfo tells what answers at the
//! end of a path, so every node is reached first by a shortest path and
//! every directed route stays as short as the fabric allows. Switches are
//! expanded port by port; CAs and routers are leaves, because only switches
//! forward directed routes.
//!
//! Per new node the sweep sends NodeInfo, NodeDescription, and PortInfo of
//! each port it manages (all ports and port 0 of a switch, the port it was
//! reached by on a CA or router), plus SwitchInfo on switches. A link is
//! probed (NodeInfo through it) only from the end that sees it first: when
//! the far end is expanded later, the port is already known to lead back,
//! and no SMP is spent learning it again.
//!
//! A node that answers garbage, a truncated MAD or nothing is logged and
//! left out (or, for one port, that port); the sweep goes on with the rest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_abi::NodeKind;
use sm_mad::mad::attr;
use sm_mad::smp::{DATA_LEN, MAX_HOPS};
use sm_mad::{
    NodeDescriptionPacket, NodeDescriptionRepr, NodeInfoPacket, NodeInfoRepr, NodeType, PhysState,
    PortInfoPacket, PortInfoRepr, PortState, SwitchInfoPacket, SwitchInfoRepr,
};
use tracing::{debug, warn};

use super::mkey::MKeys;
use super::text::Escaped;
use super::transport::{SmpClient, SmpError, SmpOp};

// The model itself is sm-model's; discovery fills it.
pub use sm_model::{DrPath, Fabric, FabricNode, FabricPort};
pub(super) use sm_model::{extended, node_kind};

/// What discovery saw go wrong, beyond the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoveryReport {
    /// Probes that gave no usable NodeInfo (the port's far end is left out).
    pub lost_probes: usize,
    /// Other requests that failed (descriptions, port or switch infos).
    pub failed_requests: usize,
    /// Answers refused because a field made no sense (a port number out
    /// of range, a GUID of 0, a node contradicting what it said before).
    pub rejected_answers: usize,
    /// Requests sent again in a later round after getting no answer.
    pub retried: usize,
    /// Requests still without an answer after that second round.
    pub unanswered: usize,
    /// Nodes that did not answer this sweep, kept as the last sweep knew
    /// them ([`FabricMemory`]).
    pub kept_nodes: usize,
    /// Links this sweep could not see (an SMP lost) restored from memory.
    pub kept_links: usize,
    /// Port or switch attributes this sweep could not read, taken from
    /// memory.
    pub kept_attributes: usize,
    /// Nodes forgotten: silent for more than [`MAX_SILENT_SWEEPS`] sweeps,
    /// or no longer reachable through any link that is up.
    pub forgotten_nodes: usize,
}

impl DiscoveryReport {
    /// Whether SMPs were lost (not refused: a node that refuses or lies
    /// every time would make every sweep incomplete) or nodes were kept
    /// from memory: the fabric as found may differ from the fabric as it
    /// is, so another sweep is due.
    pub fn incomplete(&self) -> bool {
        self.unanswered + self.kept_nodes != 0
    }
}

/// Why a sweep ended before programming anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    /// The SM's own node did not answer.
    #[error("sweep: {0}")]
    Smp(#[from] SmpError),
    /// The stop flag was set; nothing was programmed by this sweep.
    #[error("sweep stopped before programming (stop requested)")]
    Stopped,
    /// The sweep ran past its time budget before programming; nothing
    /// was programmed by this sweep.
    #[error("sweep over its time budget of {0:?} before programming; nothing programmed")]
    OverBudget(Duration),
}

/// When a sweep must give up: a stop flag (SIGTERM) and a deadline. Checked
/// between rounds of discovery and between the phases before programming.
#[derive(Debug, Clone, Default)]
pub struct SweepLimits {
    /// Set by someone else to stop the sweep.
    pub stop: Option<Arc<AtomicBool>>,
    /// The sweep's start and budget.
    pub budget: Option<(Instant, Duration)>,
}

impl SweepLimits {
    /// Limits starting now.
    pub fn new(stop: Option<Arc<AtomicBool>>, budget: Option<Duration>) -> Self {
        Self { stop, budget: budget.map(|b| (Instant::now(), b)) }
    }

    /// `Err` when the sweep must end now.
    pub fn check(&self) -> Result<(), SweepError> {
        if self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(SweepError::Stopped);
        }
        match self.budget {
            Some((start, budget)) if start.elapsed() > budget => Err(SweepError::OverBudget(budget)),
            _ => Ok(()),
        }
    }
}

/// Sweeps a node may stay silent (every SMP to it lost) and still be
/// kept as the last good sweep knew it. A lossy link loses some SMPs of
/// every sweep but rarely all of a node's for this many sweeps in a row;
/// a node that is really gone is usually proven so sooner, by its
/// neighbours' ports going Down.
pub const MAX_SILENT_SWEEPS: u32 = 3;

/// NodeInfo as a probe through a link may see it: `Err` says why it makes
/// no sense. Every field later used as an index or a size is checked here,
/// for known nodes as for new ones. `via_link`: the answer came through a
/// cable (LocalPortNum is then the port the SMP entered by, never 0);
/// otherwise it is the SM's own node.
pub fn check_node_info(info: &NodeInfoRepr, via_link: bool) -> Result<(), String> {
    if info.node_guid == 0 || info.port_guid == 0 {
        // A GUID is the identity of a node or port: 0 names nobody.
        return Err(format!("NodeGUID {:#x}, PortGUID {:#x}", info.node_guid, info.port_guid));
    }
    // Port 255 is reserved (IBA 14.2.5.3): a switch has at most 254.
    if info.num_ports == 0 || info.num_ports == u8::MAX {
        return Err(format!("NumPorts {}", info.num_ports));
    }
    let lowest = if info.node_type == NodeType::Switch && !via_link { 0 } else { 1 };
    if info.local_port_num < lowest || info.local_port_num > info.num_ports {
        return Err(format!("LocalPortNum {} outside {lowest}..={}", info.local_port_num, info.num_ports));
    }
    Ok(())
}

/// Discovers the fabric behind `client`'s port. The SM's port number is
/// learnt from its own node's NodeInfo (LocalPortNum), as a CA's first hop
/// must leave by it.
///
/// Fails only when the SM's own node does not answer: without it there is
/// no fabric to speak of.
pub fn discover(client: &mut SmpClient<'_>) -> Result<(Fabric, DiscoveryReport), SmpError> {
    match discover_within(client, &SweepLimits::default()) {
        Ok(found) => Ok(found),
        Err(SweepError::Smp(e)) => Err(e),
        // Without limits neither can happen.
        Err(other) => Err(SmpError::Malformed(other.to_string())),
    }
}

/// One request of a discovery round.
#[derive(Debug, Clone)]
enum Task {
    /// NodeInfo through `port` of `node`.
    Probe { node: usize, port: u8 },
    /// NodeDescription of `node`.
    Description { node: usize },
    /// SwitchInfo of `node`.
    SwitchInfo { node: usize },
    /// PortInfo of `port` of `node`, along the port's own path; with
    /// SMSupportExtendedSpeeds when `extended` (a second read, see
    /// [`crate::port_info::needs_extended_read`]).
    PortInfo { node: usize, port: u8, extended: bool },
}

/// A request of a round and whether it is a second try.
#[derive(Debug, Clone)]
struct Pending {
    task: Task,
    retry: bool,
}

/// [`discover`], ending early (with nothing to show) when `limits` say so.
///
/// The walk goes in rounds, each one batch of SMPs in flight together:
/// the probes of every port at the frontier, then the attributes of every
/// node those probes found. A silent node therefore costs one timeout
/// (times the tries) per round, whatever the number of silent nodes, never
/// one per node in turn. A request that got no answer at all is sent once
/// more in the next round, among that round's own: after a pause, and at
/// no extra wait.
pub fn discover_within(
    client: &mut SmpClient<'_>,
    limits: &SweepLimits,
) -> Result<(Fabric, DiscoveryReport), SweepError> {
    let mut walk = Walk {
        fabric: Fabric::default(),
        by_guid: HashMap::new(),
        report: DiscoveryReport::default(),
        m_keys: client.m_keys().clone(),
    };
    let root = node_info(client, &[])?;
    if let Err(why) = check_node_info(&root, false) {
        return Err(SmpError::Malformed(format!("the SM's own NodeInfo: {why}")).into());
    }
    walk.m_keys.learn_node(&[], root.node_guid, root.port_guid, root.node_type == NodeType::Switch);
    walk.fabric.sm_port = if root.node_type == NodeType::Switch { 0 } else { root.local_port_num };
    let mut tasks = walk.add_node(&root, Vec::new().into());
    let mut round = 0usize;
    while !tasks.is_empty() {
        limits.check()?;
        round += 1;
        tasks = walk.round(client, tasks);
        if round == 1 {
            // The SM's own node is in; the way out of it follows.
            let Some(first) = walk.fabric.nodes.first() else {
                return Err(SmpError::Malformed("the SM's own node is unusable".into()).into());
            };
            if !first.is_switch() {
                let sm_port = walk.fabric.sm_port;
                tasks.push(Pending { task: Task::Probe { node: 0, port: sm_port }, retry: false });
            }
        }
    }
    let Walk { fabric, report, .. } = walk;
    debug!(
        nodes = fabric.nodes.len(),
        links = fabric.links().len(),
        rounds = round + 1,
        smps = client.stats().sent,
        "discovery done"
    );
    Ok((fabric, report))
}

/// The state of one discovery walk.
struct Walk {
    fabric: Fabric,
    by_guid: HashMap<u64, usize>,
    report: DiscoveryReport,
    /// Told of each node and link accepted, and of nothing else: the key
    /// an SMP along a path carries is that of the port the topology puts
    /// there.
    m_keys: MKeys,
}

impl Walk {
    /// The directed route of `task`, or `None` (counted) when it cannot
    /// be taken.
    fn route(&mut self, task: &Task) -> Option<DrPath> {
        match *task {
            Task::Probe { node, port } => {
                let to_node = &self.fabric.nodes.get(node)?.path;
                if to_node.len() >= usize::from(MAX_HOPS) {
                    warn!(
                        node = format_args!("{:#018x}", self.fabric.nodes[node].guid),
                        port, "beyond the 63 hops a directed route can take; not probed"
                    );
                    self.report.lost_probes += 1;
                    return None;
                }
                Some(extended(to_node, port))
            }
            Task::Description { node } | Task::SwitchInfo { node } => Some(self.fabric.nodes.get(node)?.path.clone()),
            Task::PortInfo { node, port, .. } => self.fabric.nodes.get(node)?.ports.get(usize::from(port))?.path.clone(),
        }
    }

    /// Sends every task of a round in one batch and takes the answers in
    /// order; returns the next round's tasks.
    fn round(&mut self, client: &mut SmpClient<'_>, tasks: Vec<Pending>) -> Vec<Pending> {
        let mut sent = Vec::with_capacity(tasks.len());
        let mut ops = Vec::with_capacity(tasks.len());
        for pending in tasks {
            let Some(path) = self.route(&pending.task) else { continue };
            let op = match pending.task {
                Task::Probe { .. } => SmpOp::get(attr::NODE_INFO, 0, &path),
                Task::Description { .. } => SmpOp::get(attr::NODE_DESCRIPTION, 0, &path),
                Task::SwitchInfo { .. } => SmpOp::get(attr::SWITCH_INFO, 0, &path),
                Task::PortInfo { port, extended, .. } => crate::port_info::get(port, &path, extended),
            };
            ops.push(op);
            sent.push((pending, path));
        }
        if ops.is_empty() {
            return Vec::new();
        }
        let answers = client.run_many(&ops);
        let mut next = Vec::new();
        for ((pending, path), answer) in sent.into_iter().zip(answers) {
            if let (Err(SmpError::NoAnswer { .. }), false) = (&answer, pending.retry) {
                // Lost, not refused: once more, next round.
                self.report.retried += 1;
                next.push(Pending { task: pending.task, retry: true });
                continue;
            }
            if let Err(SmpError::NoAnswer { .. }) = &answer {
                self.report.unanswered += 1;
            }
            match pending.task {
                Task::Probe { node, port } => {
                    // An earlier answer of this round may have linked this
                    // port already (a cable between two ports of a switch).
                    if self.fabric.nodes[node].ports[usize::from(port)].peer.is_none() {
                        let info = answer.and_then(|d| parse_node_info(&d));
                        next.extend(self.probe(node, port, path, info));
                    }
                }
                Task::Description { node } => {
                    let guid = self.fabric.nodes[node].guid;
                    match answer.and_then(|d| parse_description(&d)) {
                        Ok(d) => self.fabric.node_mut(node).description = d,
                        Err(e) => {
                            warn!(guid = format_args!("{guid:#018x}"), error = %e, "no NodeDescription");
                            self.report.failed_requests += 1;
                        }
                    }
                }
                Task::SwitchInfo { node } => {
                    let guid = self.fabric.nodes[node].guid;
                    match answer.and_then(|d| parse_switch_info(&d)) {
                        Ok(info) => self.fabric.node_mut(node).switch_info = Some(info),
                        Err(e) => {
                            warn!(guid = format_args!("{guid:#018x}"), error = %e, "no SwitchInfo");
                            self.report.failed_requests += 1;
                        }
                    }
                }
                Task::PortInfo { node, port, extended } => {
                    let guid = self.fabric.nodes[node].guid;
                    let info = port_info_or_log(answer, &mut self.report, port, guid);
                    let n = self.fabric.node_mut(node);
                    if extended && info.is_none() {
                        // The first read stands.
                        continue;
                    }
                    let port0 = if n.is_switch() && port != 0 { n.ports[0].info } else { None };
                    if !extended && info.as_ref().is_some_and(|i| crate::port_info::needs_extended_read(i, port0.as_ref())) {
                        next.push(Pending { task: Task::PortInfo { node, port, extended: true }, retry: false });
                    }
                    n.ports[usize::from(port)].info = info;
                    // A switch port found up leads further.
                    if !extended && n.is_switch() && port != 0 && self.expandable(node, port) {
                        next.push(Pending { task: Task::Probe { node, port }, retry: false });
                    }
                }
            }
        }
        next
    }

    /// Whether `port` of `node` is up and leads to a far end not known yet.
    fn expandable(&self, node: usize, port: u8) -> bool {
        let p = &self.fabric.nodes[node].ports[usize::from(port)];
        p.peer.is_none() && p.info.as_ref().is_some_and(link_is_up)
    }

    /// Records what NodeInfo `info`, read through `port` of `node` along
    /// `path`, says: the link and, if the far end is new, the node behind
    /// it. Returns the requests this calls for.
    fn probe(
        &mut self,
        node: usize,
        port: u8,
        path: DrPath,
        info: Result<NodeInfoRepr, SmpError>,
    ) -> Vec<Pending> {
        let info = match info {
            Ok(info) => info,
            Err(e) => {
                warn!(path = ?path, error = %e, "no usable NodeInfo; the node behind is left out");
                self.report.lost_probes += 1;
                return Vec::new();
            }
        };
        if let Err(why) = check_node_info(&info, true) {
            warn!(guid = format_args!("{:#018x}", info.node_guid), path = ?path, %why,
                "NodeInfo makes no sense; answer ignored");
            self.report.rejected_answers += 1;
            return Vec::new();
        }
        let mut tasks = Vec::new();
        let far = match self.by_guid.get(&info.node_guid) {
            Some(&known) => {
                let n = &self.fabric.nodes[known];
                if n.kind != node_kind(info.node_type) || n.num_ports != info.num_ports {
                    warn!(guid = format_args!("{:#018x}", info.node_guid), path = ?path,
                        "NodeInfo contradicts what this GUID said before; link ignored");
                    self.report.rejected_answers += 1;
                    return Vec::new();
                }
                known
            }
            None => {
                let far = self.fabric.nodes.len();
                tasks = self.add_node(&info, path.clone());
                far
            }
        };
        let far_port = info.local_port_num;
        // In range: checked above against NumPorts, which is the known
        // node's own.
        let Some(far_slot) = self.fabric.nodes[far].ports.get(usize::from(far_port)) else {
            self.report.rejected_answers += 1;
            return tasks;
        };
        if (far, far_port) == (node, port) {
            // A port cannot be cabled to itself: the answer lied.
            warn!(guid = format_args!("{:#018x}", info.node_guid), port, "port claims to be its own peer; link ignored");
            self.report.rejected_answers += 1;
            return tasks;
        }
        if let Some(other) = far_slot.peer {
            // Two cables cannot end in one port: one of the answers lied.
            warn!(
                guid = format_args!("{:#018x}", info.node_guid),
                port = far_port,
                ?other,
                "port already linked elsewhere; link ignored"
            );
            self.report.rejected_answers += 1;
            return tasks;
        }
        if !self.fabric.nodes[far].is_switch() && far_slot.path.is_none() {
            // Another port of a CA known already (multi-port CA, or the SM's
            // own CA seen from the fabric): managed through itself.
            let slot = &mut self.fabric.node_mut(far).ports[usize::from(far_port)];
            slot.guid = info.port_guid;
            slot.path = Some(path.clone());
            tasks.push(Pending { task: Task::PortInfo { node: far, port: far_port, extended: false }, retry: false });
        }
        self.fabric.node_mut(node).ports[usize::from(port)].peer = Some((far, far_port));
        self.fabric.node_mut(far).ports[usize::from(far_port)].peer = Some((node, port));
        // Accepted: from now on an SMP along `path` carries the key of the
        // port found there, as the topology has it (a switch's is port 0's).
        let f = &self.fabric.nodes[far];
        let far_guid = if f.is_switch() { f.ports[0].guid } else { f.ports[usize::from(far_port)].guid };
        self.m_keys.learn_node(&path, f.guid, far_guid, f.is_switch());
        tasks
    }

    /// Adds a new node (checked by [`check_node_info`]) and returns the
    /// requests for its description, switch and port infos.
    fn add_node(&mut self, info: &NodeInfoRepr, path: DrPath) -> Vec<Pending> {
        let kind = node_kind(info.node_type);
        let node = self.fabric.nodes.len();
        let (ports, port_nums) =
            managed_ports(kind == NodeKind::Switch, info.num_ports, info.local_port_num, info.port_guid, Some(&path));
        self.by_guid.insert(info.node_guid, node);
        self.fabric.nodes.push(Arc::new(FabricNode::from_node_info(info, path, ports)));
        let mut tasks = vec![Pending { task: Task::Description { node }, retry: false }];
        if kind == NodeKind::Switch {
            tasks.push(Pending { task: Task::SwitchInfo { node }, retry: false });
        }
        tasks.extend(port_nums.into_iter().map(|port| Pending { task: Task::PortInfo { node, port, extended: false }, retry: false }));
        tasks
    }
}

/// The port slots of a node reached by its port `entered`, and the numbers
/// of those the SM manages it through: every port of a switch (all behind
/// port 0's SMA), the entered one of a CA or router (each port its own
/// SMA). Those carry the port GUID, and `path` when given.
pub(super) fn managed_ports(
    is_switch: bool,
    num_ports: u8,
    entered: u8,
    guid: u64,
    path: Option<&DrPath>,
) -> (Vec<FabricPort>, Vec<u8>) {
    let nums: Vec<u8> = if is_switch { (0..=num_ports).collect() } else { vec![entered] };
    let mut ports = vec![FabricPort::default(); usize::from(num_ports) + 1];
    for &num in &nums {
        if let Some(slot) = ports.get_mut(usize::from(num)) {
            slot.guid = guid;
            slot.path = path.cloned();
        }
    }
    (ports, nums)
}


fn node_info(client: &mut SmpClient<'_>, path: &[u8]) -> Result<NodeInfoRepr, SmpError> {
    parse_node_info(&client.get(attr::NODE_INFO, 0, path)?)
}

pub(super) fn parse_node_info(data: &[u8]) -> Result<NodeInfoRepr, SmpError> {
    NodeInfoPacket::new_checked(data)
        .and_then(|p| NodeInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("NodeInfo: {e}")))
}

/// A PortInfo answer parsed, or `None` with the failure logged and counted.
fn port_info_or_log(
    answer: Result<[u8; DATA_LEN], SmpError>,
    report: &mut DiscoveryReport,
    port: u8,
    guid: u64,
) -> Option<PortInfoRepr> {
    match answer.and_then(|data| parse_port_info(&data)) {
        Ok(info) => Some(info),
        Err(e) => {
            warn!(guid = format_args!("{guid:#018x}"), port, error = %e, "no usable PortInfo");
            report.failed_requests += 1;
            None
        }
    }
}

pub(super) fn parse_description(data: &[u8]) -> Result<String, SmpError> {
    NodeDescriptionPacket::new_checked(data)
        .and_then(|p| NodeDescriptionRepr::parse(&p))
        .map(|d| d.text())
        .map_err(|e| SmpError::Malformed(format!("NodeDescription: {e}")))
}

pub(super) fn parse_switch_info(data: &[u8]) -> Result<SwitchInfoRepr, SmpError> {
    SwitchInfoPacket::new_checked(data)
        .and_then(|p| SwitchInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("SwitchInfo: {e}")))
}

pub(super) fn parse_port_info(data: &[u8]) -> Result<PortInfoRepr, SmpError> {
    PortInfoPacket::new_checked(data)
        .and_then(|p| PortInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("PortInfo: {e}")))
}

/// What the last sweeps knew of the fabric, kept from one sweep to the
/// next (inside [`super::HeldTables`]), so that a node, link or attribute
/// a sweep could not read (its SMPs lost) is not taken for gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricMemory {
    /// The fabric as the last sweep left it (with what it kept).
    pub last: Fabric,
    /// Sweeps in a row each node (by GUID) of `last` has been silent.
    pub silent: HashMap<u64, u32>,
}

impl FabricMemory {
    /// Takes the PortInfo of `ports` ((node, port) of `fabric`) from
    /// `fabric`, which [`FabricMemory::remember`] took whole earlier in
    /// the same sweep: what a few Sets changed since, without another copy
    /// of the whole fabric. A node no longer at its index is left alone.
    pub fn remember_ports(&mut self, fabric: &Fabric, ports: impl IntoIterator<Item = (usize, usize)>) {
        for (node, port) in ports {
            let (Some(now), Some(kept)) = (fabric.nodes.get(node), self.last.nodes.get(node)) else { continue };
            if kept.guid != now.guid || Arc::ptr_eq(now, kept) {
                continue;
            }
            if let (Some(from), true) = (now.ports.get(port), port < kept.ports.len()) {
                let info = from.info;
                self.last.node_mut(node).ports[port].info = info;
            }
        }
    }

    /// Remembers `fabric`, the outcome of a sweep (after [`merge`]).
    pub fn remember(&mut self, fabric: &Fabric) {
        self.last = fabric.clone();
        if !self.silent.is_empty() {
            let index = fabric.index_by_guid();
            self.silent.retain(|guid, _| index.contains_key(guid));
        }
    }
}

/// Whether a port read this sweep shows its link down.
fn seen_down(fabric: &Fabric, (node, port): (usize, u8)) -> bool {
    fabric
        .nodes
        .get(node)
        .and_then(|n| n.ports.get(usize::from(port)))
        .and_then(|p| p.info.as_ref())
        .is_some_and(|i| !link_is_up(i))
}

/// Whether a port, as its PortInfo says, has its link up: something lies
/// behind it to discover.
pub(super) fn link_is_up(info: &PortInfoRepr) -> bool {
    info.port_physical_state == PhysState::LinkUp && info.port_state != PortState::Down
}

/// A port this sweep did not reach (its link kept from memory, or its
/// PortInfo lost) keeps what was known of it.
fn keeps(port: &FabricPort, old: &FabricPort) -> bool {
    port.info.is_none() && old.info.is_some() && (port.path.is_some() || port.peer.is_some())
}

/// Whether `node` lacks an attribute its memory `m` holds: a description,
/// a SwitchInfo, a port's PortInfo ([`merge`] takes them from memory).
fn lacks(node: &FabricNode, m: &FabricNode) -> bool {
    (node.description.is_empty() && !m.description.is_empty())
        || (node.is_switch() && node.switch_info.is_none() && m.switch_info.is_some())
        || node.ports.iter().zip(&m.ports).any(|(p, old)| keeps(p, old))
}

/// Completes `fabric`, as this sweep's discovery found it, with what
/// `memory` knew and this sweep could not read, because an SMP lost is no
/// proof that anything is gone:
///
/// * a node that did not answer is kept (LIDs, links, attributes as last
///   known) until it has been silent for more than [`MAX_SILENT_SWEEPS`]
///   sweeps, or no link that is up leads to it any more;
/// * a link is kept unless one of its ends, read this sweep, is Down (the
///   neighbour's side proves the link gone) or now leads elsewhere;
/// * a PortInfo, SwitchInfo or description that did not answer is taken
///   from memory.
///
/// Counts go into `report`; `memory`'s silence counts are updated (call
/// [`FabricMemory::remember`] with the final fabric afterwards).
pub fn merge(fabric: &mut Fabric, memory: &mut FabricMemory, report: &mut DiscoveryReport) {
    let mem = &memory.last;
    if mem.nodes.is_empty() || fabric.nodes.is_empty() {
        return;
    }
    // A node's memory is only trusted when it is the same kind of node.
    let same = |a: &FabricNode, b: &FabricNode| a.kind == b.kind && a.num_ports == b.num_ports;
    // Memory index → index in the merged fabric: present nodes first.
    // (A GUID index: a scan per node is quadratic, seconds on the largest
    // fabrics, at every heavy sweep.)
    let index = fabric.index_by_guid();
    // Every node answered as memory knows it, at the same index, with the
    // same links and nothing missing: nothing to merge (what an
    // incremental sweep finds, every node shared with memory but the few
    // it read).
    if mem.nodes.len() == fabric.nodes.len()
        && index.len() == fabric.nodes.len()
        && mem.nodes.iter().zip(&fabric.nodes).all(|(m, n)| {
            Arc::ptr_eq(m, n)
                || (m.guid == n.guid
                    && same(m, n)
                    && m.ports.len() == n.ports.len()
                    && m.ports.iter().zip(&n.ports).all(|(a, b)| a.peer == b.peer)
                    && !lacks(n, m))
        })
    {
        if !memory.silent.is_empty() {
            for m in &mem.nodes {
                memory.silent.remove(&m.guid);
            }
        }
        return;
    }
    let find = |guid: u64| index.get(&guid).copied();
    let mut to_new: Vec<Option<usize>> =
        mem.nodes.iter().map(|m| find(m.guid).filter(|&i| same(&fabric.nodes[i], m))).collect();
    // Silent nodes that may be kept, in memory order.
    let mut candidates = Vec::new();
    for (k, m) in mem.nodes.iter().enumerate() {
        if to_new[k].is_some() {
            memory.silent.remove(&m.guid);
            continue;
        }
        if find(m.guid).is_some() {
            // Answers now as another kind of node: memory is stale.
            continue;
        }
        let silent = memory.silent.entry(m.guid).or_insert(0);
        *silent += 1;
        if *silent > MAX_SILENT_SWEEPS {
            warn!(guid = format_args!("{:#018x}", m.guid), sweeps = *silent - 1, "silent for too many sweeps; forgotten");
            report.forgotten_nodes += 1;
            continue;
        }
        to_new[k] = Some(fabric.nodes.len() + candidates.len());
        candidates.push(k);
    }
    // Links of memory that this sweep did not see and did not disprove,
    // in merged indices.
    let present = fabric.nodes.len();
    let slot = |f: &Fabric, (n, p): (usize, u8)| f.nodes.get(n).and_then(|n| n.ports.get(usize::from(p))).cloned();
    let mut links = Vec::new();
    for (a, b) in mem.links() {
        let (Some(na), Some(nb)) = (to_new[a.0], to_new[b.0]) else { continue };
        let (ea, eb) = ((na, a.1), (nb, b.1));
        let mut disproved = false;
        let mut seen = false;
        for (end, other) in [(ea, eb), (eb, ea)] {
            if end.0 >= present {
                continue;
            }
            match slot(fabric, end) {
                None => disproved = true,
                Some(p) if p.peer == Some(other) => seen = true,
                Some(p) if p.peer.is_some() => disproved = true,
                Some(_) => disproved |= seen_down(fabric, end),
            }
        }
        if !seen && !disproved {
            links.push((ea, eb));
        }
    }
    // Only what a link leads to from the SM's node is kept.
    let total = present + candidates.len();
    let mut adjacency: Vec<Vec<usize>> = vec![Vec::new(); total];
    for ((a, _), (b, _)) in fabric.links().into_iter().chain(links.iter().copied()) {
        adjacency[a].push(b);
        adjacency[b].push(a);
    }
    let mut reached = vec![false; total];
    let mut stack = vec![0usize];
    reached[0] = true;
    while let Some(n) = stack.pop() {
        for &m in &adjacency[n] {
            if !reached[m] {
                reached[m] = true;
                stack.push(m);
            }
        }
    }
    // Final indices of the kept nodes.
    let mut final_index: Vec<Option<usize>> = (0..total).map(|i| (i < present).then_some(i)).collect();
    for (c, &k) in candidates.iter().enumerate() {
        let tentative = present + c;
        let m = &mem.nodes[k];
        if !reached[tentative] {
            debug!(guid = format_args!("{:#018x}", m.guid), "silent and no link up leads to it; forgotten");
            report.forgotten_nodes += 1;
            memory.silent.remove(&m.guid);
            continue;
        }
        warn!(guid = format_args!("{:#018x}", m.guid), desc = %Escaped(&m.description),
            "did not answer this sweep; kept as the last sweep knew it");
        final_index[tentative] = Some(fabric.nodes.len());
        let mut node = FabricNode::clone(m);
        for p in &mut node.ports {
            p.peer = None;
        }
        if let Some(i) = node.switch_info.as_mut() {
            // Whatever changed there, this sweep did not see it; the light
            // sweep reads the bit itself.
            i.port_state_change = false;
        }
        fabric.nodes.push(Arc::new(node));
        report.kept_nodes += 1;
    }
    // Memory node of each final node, to take attributes from.
    let mut mem_of: Vec<Option<usize>> = vec![None; fabric.nodes.len()];
    for (k, n) in to_new.iter().enumerate() {
        if let Some(f) = n.and_then(|n| final_index[n]) {
            mem_of[f] = Some(k);
        }
    }
    for ((a, pa), (b, pb)) in links {
        let (Some(a), Some(b)) = (final_index[a], final_index[b]) else { continue };
        fabric.node_mut(a).ports[usize::from(pa)].peer = Some((b, pb));
        fabric.node_mut(b).ports[usize::from(pb)].peer = Some((a, pa));
        if a < present || b < present {
            report.kept_links += 1;
        }
    }
    // Attributes of present nodes that did not answer.
    for (i, node) in fabric.nodes.iter_mut().enumerate().take(present) {
        let Some(m) = mem_of[i].map(|k| &mem.nodes[k]) else { continue };
        if !lacks(node, m) {
            // Nearly every node answered whole: not copied for nothing.
            continue;
        }
        let node = Arc::make_mut(node);
        if node.description.is_empty() && !m.description.is_empty() {
            node.description = m.description.clone();
        }
        if node.is_switch() && node.switch_info.is_none() {
            if let Some(mut info) = m.switch_info {
                info.port_state_change = false;
                node.switch_info = Some(info);
                report.kept_attributes += 1;
            }
        }
        for (p, port) in node.ports.iter_mut().enumerate() {
            let Some(old) = m.ports.get(p) else { continue };
            if keeps(port, old) {
                port.info = old.info;
                if port.path.is_none() {
                    port.path = old.path.clone();
                    port.guid = old.guid;
                }
                report.kept_attributes += 1;
            }
        }
    }
}
