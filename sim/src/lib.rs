//! # sm-sim — the embedded simulated fabric
//!
//! An in-process fabric built from a [`Topology`] whose switches and CAs
//! answer SMPs as real ones do, so that the SM runs with no hardware and
//! no ibsim (design.md, "Transports"). The SM hands it whole MADs, as it
//! would write them to a umad device, and gets back what a umad read would
//! return — or nothing, when the fabric loses the packet.
//!
//! What is modelled:
//!
//! * **Directed routes** hop by hop per IBA 14.2.2: the hop pointer moves
//!   on every hop out and back, each node records the port it was entered
//!   by in ReturnPath, the response carries the D bit, only switches
//!   forward, and a permissive DrSLID/DrDLID ends the path at the SM or at
//!   the target. A non-permissive DrSLID sends the SMP LID-routed to the
//!   first node of the directed part (its DLID is the LRH's, given to
//!   [`SimFabric::handle_to`]); a non-permissive DrDLID makes the switch at
//!   the end of the directed part LID-route it on, and the response comes
//!   back the same way.
//! * **LID routing** through the LFTs the SM programmed: a DLID above
//!   LinearFDBTop or with no entry is dropped, as is one that meets a
//!   port that is not Active ([`SimOptions::lid_routing_needs_active`]).
//! * **SMAs** with NodeInfo, NodeDescription, PortInfo (port state machine
//!   included), SwitchInfo, LFT and MFT blocks, SL-to-VL tables, VL
//!   arbitration tables and SMInfo; status codes for unsupported methods
//!   and attributes and for invalid values or modifiers; M_Key checks as
//!   IBA 14.2.4 lays them out (a wrong key: Sets dropped, Gets answered
//!   at protection level 0, answered with the key zeroed at level 1,
//!   dropped at levels 2 and 3; M_KeyViolations counted and trap 256 sent
//!   to the port's MasterSMLID).
//! * **Link parameters** as hardware resets them: OperationalVLs 1 (VL0),
//!   NeighborMTU 1 (256 bytes), HOQLife infinite, VLCap and MTUCap from
//!   [`SimOptions`] (per node with [`SimOptions::node_caps`]).
//!   OperationalVLs and NeighborMTU are taken only while the port is
//!   Init (a Set in any other state leaves them), and
//!   [`SimFabric::vl_faults`] lists the data packets a routing's SLs and
//!   SL2VL tables would send on a VL a link does not operate.
//! * **Faults**: links and whole nodes go down and come back
//!   ([`SimFabric::link_down`], [`SimFabric::remove_node`], ...), switches
//!   set PortStateChange and send trap 128 to the SM LID they were given
//!   ([`SimFabric::take_traps`]).
//! * **Counters** of everything the SM sent, by attribute, and of every
//!   loss by reason ([`SimFabric::counters`]).
//! * **General MADs** (the `gsi` module): every port's QP1 sends and
//!   receives LID-routed MADs through the LFTs ([`SimFabric::send_gmp`]),
//!   an agent may take a class's requests at a port (the SM's SA:
//!   [`SimFabric::listen_gmp`]), and every port's PMA answers
//!   PortCounters and PortCountersExtended from counters that move with
//!   each packet carried ([`SimFabric::send_data`] adds data traffic,
//!   [`SimFabric::add_port_errors`] errors). [`SharedFabric`] puts the
//!   fabric behind a lock for an SM whose SA and performance manager run
//!   on threads of their own. Every switch and CA port answers
//!   congestion control (class 0x21) and keeps the settings and table an
//!   SM sets, with CC_Key checks (the `cc` module).
//! * **More than one SM**: [`SimFabric::add_sm`] puts another SM on a CA
//!   port; its SMPs start there ([`SimFabric::handle_from`],
//!   [`SharedFabric::smp_port_at`]), the traps addressed to its LID wait
//!   for it ([`SimFabric::take_traps_at`]), and its port's SMInfo is
//!   answered by the SM itself ([`SmInfoAgent`]), so two SM loops elect,
//!   poll and fail over on one fabric.
//!
//! A malformed MAD never panics the fabric: it is dropped, as a real
//! device drops what it cannot parse.
//!
//! Not modelled: time (packet lifetimes, M_Key leases — the lease period
//! is stored but protection never lapses —, traps repeated
//! until the SM represses them — each trap is sent once), multicast
//! traffic (the MFT is stored, never used), data traffic beyond what
//! [`SimFabric::send_data`] counts, partition
//! enforcement (P_Key tables are stored only), GUIDInfo and vendor
//! attributes, LMC on switch port 0 (base port 0 only), routers as
//! anything but end nodes, and buffer or credit limits.
//!
//! ```
//! use sm_sim::SimFabric;
//! use sm_mad::{mad::attr, smp, Mad, NodeInfoPacket};
//!
//! let topo = sm_topology::gen::fat_tree_2level(2, 1, 2, 1)?;
//! let mut fabric = SimFabric::from_topology(&topo, 0, 1)?;
//! // NodeInfo of the leaf switch behind host 0's port 1.
//! let get = smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &[1])?;
//! let mut mad = Mad::zeroed();
//! get.emit(&mut mad.smp_mut());
//! let reply = fabric.handle(&mad.0).expect("the leaf answers");
//! let reply = smp::Packet::new_checked(&reply[..])?;
//! let info = NodeInfoPacket::new_checked(reply.data())?;
//! assert_eq!(info.node_type(), 2);
//! assert_eq!(info.local_port_num(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod caps;
mod cc;
mod counters;
mod events;
mod gsi;
mod port;
mod route;
mod sma;
mod state;

use sm_abi::NodeKind;
use sm_mad::mad::{method, MAD_LEN};
use sm_mad::smp::{self, Direction, PERMISSIVE_LID};
use sm_mad::{Mad, PortState, SmInfoRepr};
use sm_topology::model::{DEFAULT_SPEED, DEFAULT_WIDTH};
use sm_topology::{Topology, TopologyError};

pub use caps::{CapsSpec, CapsSpecError};
pub use cc::{CcAgentState, CC_TABLE_BLOCKS};
pub use counters::{AttributeCounters, DropReason, SimCounters};
pub use gsi::{GmpCounters, PmaCounters, INBOX_LEN};
pub use port::{SharedFabric, SharedSimPort, SimGmpAgent, SimGmpSender, SimPort};

use state::Node;

/// Limits and identities the simulated devices report. The defaults are
/// those of a current switch ASIC and adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// SwitchInfo.LinearFDBCap: LFT entries per switch (at most 49,152,
    /// the unicast LID space).
    pub linear_fdb_cap: u16,
    /// SwitchInfo.MulticastFDBCap: MFT entries per switch (at most 16,384).
    pub multicast_fdb_cap: u16,
    /// PortInfo.VLCap (1 = VL0 … 5 = VL0-14). OperationalVLs starts at 1
    /// (VL0 only), as IBA's reset value: the SM must raise it.
    pub vl_cap: u8,
    /// PortInfo.MTUCap (1 = 256 … 5 = 4096). NeighborMTU starts at 1
    /// (256 bytes), as after a reset.
    pub mtu_cap: u8,
    /// VLCap and MTUCap of particular nodes, by node GUID, over
    /// [`Self::vl_cap`] and [`Self::mtu_cap`] (every port of the node).
    pub node_caps: std::collections::BTreeMap<u64, PortCaps>,
    /// PortInfo.VLArbitrationHighCap.
    pub vl_arb_high_cap: u8,
    /// PortInfo.VLArbitrationLowCap.
    pub vl_arb_low_cap: u8,
    /// LID-routed SMPs cross only links whose two ports are Active. IBA
    /// lets VL15 through Init and Armed ports too; ibsim does not, and an
    /// SM that relies on it would fail there, so the default is strict.
    pub lid_routing_needs_active: bool,
    /// How trap 128 reaches the SM.
    pub trap_delivery: TrapDelivery,
    /// NodeInfo.VendorID of every node (24 bits).
    pub vendor_id: u32,
    /// NodeInfo.DeviceID of switches.
    pub switch_device_id: u16,
    /// NodeInfo.DeviceID of CAs and routers.
    pub ca_device_id: u16,
    /// SwitchInfo.PartitionEnforcementCap: P_Key table entries of each
    /// switch external port, and the enforcement bits stored (never
    /// applied). 0 (the default): switches do not enforce partitions.
    pub partition_enforcement_cap: u16,
    /// PortInfo.GUIDCap of CA and router ports: GUIDInfo entries, the
    /// port GUID at index 0 and alias GUIDs after it (at least 1, at most
    /// 255). Switch port 0 has 1.
    pub ca_guid_cap: u8,
    /// Nodes (by GUID) whose PortInfo leaves the extended speed fields
    /// (LinkSpeedExtActive/Supported/Enabled) out unless the Get carries
    /// SMSupportExtendedSpeeds (AttributeModifier bit 31), as some
    /// switches do (what OpenSM's fix for NDR fabrics answers).
    pub ext_speeds_on_request: std::collections::BTreeSet<u64>,
    /// The generation every node's ports support (`--sim-caps speed=`):
    /// speeds up to it, and a link trains to the fastest its two ends
    /// support and enable. `None`: ports support SDR to NDR (and XDR on a
    /// cable the topology says runs it) and their links run at the
    /// topology's speed.
    pub link_speed: Option<sm_mad::speed::LaneSpeed>,
    /// The widest width, in lanes, every node's ports support
    /// (`--sim-caps width=`); links train to the widest both ends
    /// support. `None`: the topology's width.
    pub link_width: Option<u8>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            linear_fdb_cap: 49152,
            multicast_fdb_cap: 1024,
            vl_cap: 4,
            mtu_cap: 5,
            node_caps: std::collections::BTreeMap::new(),
            vl_arb_high_cap: 8,
            vl_arb_low_cap: 8,
            lid_routing_needs_active: true,
            trap_delivery: TrapDelivery::Routed,
            vendor_id: 0x0002c9,
            switch_device_id: 0xcb20,
            ca_device_id: 0x1017,
            partition_enforcement_cap: 0,
            ca_guid_cap: 1,
            ext_speeds_on_request: std::collections::BTreeSet::new(),
            link_speed: None,
            link_width: None,
        }
    }
}

/// The VLCap, MTUCap, speeds and widths a node's ports report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortCaps {
    /// PortInfo.VLCap, 1..=5.
    pub vl_cap: u8,
    /// PortInfo.MTUCap, 1..=5.
    pub mtu_cap: u8,
    /// The fastest generation the ports support (see
    /// [`SimOptions::link_speed`]).
    pub speed: Option<sm_mad::speed::LaneSpeed>,
    /// The widest width, in lanes (see [`SimOptions::link_width`]).
    pub width: Option<u8>,
}

impl SimOptions {
    /// The caps of node `guid`'s ports.
    pub(crate) fn caps_of(&self, guid: u64) -> PortCaps {
        self.node_caps.get(&guid).copied().unwrap_or(PortCaps {
            vl_cap: self.vl_cap,
            mtu_cap: self.mtu_cap,
            speed: self.link_speed,
            width: self.link_width,
        })
    }

    fn check(&self) -> Result<(), SimError> {
        let bad = |what: String| Err(SimError::BadOption(what));
        if self.linear_fdb_cap > 0xC000 {
            return bad(format!(
                "linear_fdb_cap {} exceeds 49152",
                self.linear_fdb_cap
            ));
        }
        if self.multicast_fdb_cap > 0x4000 {
            return bad(format!(
                "multicast_fdb_cap {} exceeds 16384",
                self.multicast_fdb_cap
            ));
        }
        if !(1..=5).contains(&self.vl_cap) {
            return bad(format!("vl_cap {} is not 1..=5", self.vl_cap));
        }
        if !(1..=5).contains(&self.mtu_cap) {
            return bad(format!("mtu_cap {} is not 1..=5", self.mtu_cap));
        }
        for (guid, caps) in &self.node_caps {
            if !(1..=5).contains(&caps.vl_cap) || !(1..=5).contains(&caps.mtu_cap) {
                return bad(format!("node {guid:#018x}: vl_cap {} / mtu_cap {} not 1..=5", caps.vl_cap, caps.mtu_cap));
            }
        }
        if self.vl_arb_high_cap > 64 || self.vl_arb_low_cap > 64 {
            return bad("VL arbitration caps above 64".to_string());
        }
        Ok(())
    }
}

/// How a switch's trap 128 gets to the SM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrapDelivery {
    /// As on a real fabric: LID-routed from the switch's LID to the
    /// MasterSMLID it was given, through the LFTs. A switch without both
    /// LIDs, or without a route, loses the trap (the SM's light sweep
    /// still finds PortStateChange).
    #[default]
    Routed,
    /// Straight into the SM's queue, with IssuerLID 0 while the switch has
    /// no LID: for tests of the SM's trap handling on a fabric not yet
    /// brought up.
    Always,
}

/// Why a fabric could not be built or a fault hook not applied.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The topology breaks a structural rule.
    #[error("topology: {0}")]
    Topology(#[from] TopologyError),
    /// A node index out of range.
    #[error("node {0} does not exist")]
    NoSuchNode(usize),
    /// A port number the node does not have.
    #[error("node {node} has no port {port}")]
    NoSuchPort {
        /// Node index.
        node: usize,
        /// Port number.
        port: u8,
    },
    /// A port without a cable, for a hook that acts on links.
    #[error("port {port} of node {node} has no cable")]
    NoCable {
        /// Node index.
        node: usize,
        /// Port number.
        port: u8,
    },
    /// The SM's port cannot carry an SM.
    #[error("the SM cannot run on port {port} of node {node}: {why}")]
    BadSmPort {
        /// Node index.
        node: usize,
        /// Port number.
        port: u8,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An option out of range.
    #[error("bad simulator option: {0}")]
    BadOption(String),
}

/// A MAD that reached the SM, with the LRH source LID a umad read would
/// report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimResponse {
    /// LRH SLID: the responder's LID for a LID-routed response, the
    /// permissive LID for a purely directed one.
    pub slid: u16,
    /// The 256-byte MAD.
    pub mad: Vec<u8>,
}

/// A trap a switch sent to the SM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimTrap {
    /// Node index of the switch (a convenience of the simulator; the SM
    /// learns the issuer from the Notice).
    pub node: usize,
    /// LRH SLID: the switch's LID (0 under [`TrapDelivery::Always`] before
    /// it has one).
    pub slid: u16,
    /// The 256-byte SubnTrap(Notice) MAD.
    pub mad: Vec<u8>,
    /// The SM port (node, port) it was delivered to.
    pub to: (usize, u8),
}

/// An SM's own answers to SubnGet/SubnSet(SMInfo) at its port, for an SM
/// that runs beside the fabric's first one ([`SimFabric::add_sm`]): the
/// request as it arrived, the status and attribute data to answer with
/// (`None`: no answer).
pub type SmInfoAgent = std::sync::Arc<dyn Fn(&smp::Repr) -> Option<(u16, [u8; smp::DATA_LEN])> + Send + Sync>;

/// What a port holds of M_Key (IBA 14.2.4), for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMKey {
    /// PortInfo.M_Key (0: no checking).
    pub key: u64,
    /// PortInfo.M_KeyProtectBits.
    pub protect_bits: u8,
    /// PortInfo.M_KeyLeasePeriod (stored, not counted down: the fabric has
    /// no clock).
    pub lease_period: u16,
    /// PortInfo.M_KeyViolations: SMPs refused for a wrong key.
    pub violations: u16,
}

/// A cable from the topology and whether it is plugged in.
#[derive(Debug, Clone)]
struct Link {
    a: (usize, u8),
    b: (usize, u8),
    /// Cleared by [`SimFabric::link_down`]: the cable is pulled.
    connected: bool,
}

impl Link {
    fn other_end(&self, end: (usize, u8)) -> (usize, u8) {
        if self.a == end {
            self.b
        } else {
            self.a
        }
    }
}

/// Where a request was delivered: the node, the port it came in by, and
/// for a directed route with a LID-routed tail, the switch that ended the
/// directed part.
#[derive(Debug, Clone, Copy)]
struct Target {
    node: usize,
    port: u8,
    dr_end: Option<usize>,
}

/// An in-process fabric of simulated switches and CAs. See the
/// [module documentation](self).
pub struct SimFabric {
    /// Kept to power a removed node back up as it was built.
    topology: Topology,
    nodes: Vec<Node>,
    links: Vec<Link>,
    /// Link index per node and port number.
    port_links: Vec<Vec<Option<usize>>>,
    sm_node: usize,
    sm_port: u8,
    options: SimOptions,
    traps: Vec<SimTrap>,
    next_trap_tid: u64,
    counters: SimCounters,
    last_drop: Option<DropReason>,
    /// Per node: lose every n-th answer (0: none), and answers so far.
    answer_loss: Vec<(u32, u32)>,
    /// Nodes that answer NodeInfo as another node's port would
    /// ([`Self::impersonate`]): the node and port they claim to be.
    impostors: std::collections::BTreeMap<usize, (usize, u8)>,
    /// The M_Keys each impostor received in SMPs, in order.
    heard_keys: std::collections::BTreeMap<usize, Vec<u64>>,
    /// Every port's QP1: inboxes and the agents listening.
    gsi: gsi::Gsi,
    /// SMs other than the first, by port, answering SMInfo themselves.
    other_sms: std::collections::BTreeMap<(usize, u8), SmInfoAgent>,
}

impl std::fmt::Debug for SimFabric {
    // Per-port state runs to megabytes on a large fabric; logs want the
    // shape.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFabric")
            .field("nodes", &self.nodes.len())
            .field("links", &self.links.len())
            .field("sm", &(self.sm_node, self.sm_port))
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl SimFabric {
    /// A fabric with every cable plugged in and trained: ports Init, no
    /// LIDs, empty forwarding tables. The SM sends from `sm_port` of
    /// `sm_node` (a CA port, or port 0 of a switch).
    pub fn from_topology(topo: &Topology, sm_node: usize, sm_port: u8) -> Result<Self, SimError> {
        Self::with_options(topo, sm_node, sm_port, SimOptions::default())
    }

    /// [`Self::from_topology`] with other device limits or behaviours.
    pub fn with_options(
        topo: &Topology,
        sm_node: usize,
        sm_port: u8,
        options: SimOptions,
    ) -> Result<Self, SimError> {
        options.check()?;
        topo.validate()?;
        let sm = topo
            .nodes
            .get(sm_node)
            .ok_or(SimError::NoSuchNode(sm_node))?;
        let bad = |why| {
            Err(SimError::BadSmPort {
                node: sm_node,
                port: sm_port,
                why,
            })
        };
        match sm.kind {
            NodeKind::Switch if sm_port != 0 => return bad("an SM on a switch uses port 0"),
            NodeKind::Ca | NodeKind::Router if sm_port == 0 || sm_port > sm.num_ports => {
                return bad("no such port");
            }
            NodeKind::Router => return bad("routers do not host SMs"),
            _ => {}
        }
        let port_links = topo.port_links();
        let mut fabric = Self {
            topology: topo.clone(),
            nodes: Vec::with_capacity(topo.nodes.len()),
            links: topo
                .links
                .iter()
                .map(|l| Link {
                    a: l.a,
                    b: l.b,
                    connected: true,
                })
                .collect(),
            port_links,
            sm_node,
            sm_port,
            options,
            traps: Vec::new(),
            next_trap_tid: 1,
            counters: SimCounters::default(),
            last_drop: None,
            answer_loss: vec![(0, 0); topo.nodes.len()],
            impostors: std::collections::BTreeMap::new(),
            heard_keys: std::collections::BTreeMap::new(),
            gsi: gsi::Gsi::default(),
            other_sms: std::collections::BTreeMap::new(),
        };
        for index in 0..topo.nodes.len() {
            let node = fabric.power_up(index);
            fabric.nodes.push(node);
        }
        for link in 0..fabric.links.len() {
            // Links train before any SM runs: nothing to report.
            fabric.settle_link(link, None);
        }
        Ok(fabric)
    }

    /// Node `index` as it powers up, ports Down until its links train.
    fn power_up(&self, index: usize) -> Node {
        let topo = &self.topology.nodes[index];
        let rates: Vec<(u8, u8)> = (0..=topo.num_ports)
            .map(|port| {
                self.link_at(index, port)
                    .and_then(|link| self.topology.links.get(link))
                    .map_or((DEFAULT_WIDTH, DEFAULT_SPEED), |l| (l.width, l.speed))
            })
            .collect();
        let sm_port = (index == self.sm_node).then_some(self.sm_port);
        Node::power_up(topo, &rates, &self.options, sm_port)
    }

    /// Sends one SMP from the SM port with the permissive DLID in its LRH:
    /// what an SM does for every directed-route SMP. Returns the MAD the
    /// SM would read back, or `None` when the fabric gives no answer.
    pub fn handle(&mut self, mad: &[u8]) -> Option<Vec<u8>> {
        self.handle_to(PERMISSIVE_LID, mad).map(|r| r.mad)
    }

    /// Sends one SMP from the SM port with `dlid` in its LRH: the target of
    /// a LID-routed SMP, or the first node of a directed route whose
    /// DrSLID is not permissive.
    pub fn handle_to(&mut self, dlid: u16, mad: &[u8]) -> Option<SimResponse> {
        self.handle_from((self.sm_node, self.sm_port), dlid, mad)
    }

    /// [`Self::handle_to`] from the SM at `origin` (the first SM's port,
    /// or one of [`Self::add_sm`]).
    pub fn handle_from(&mut self, origin: (usize, u8), dlid: u16, mad: &[u8]) -> Option<SimResponse> {
        self.counters.sent += 1;
        match self.exchange(origin, dlid, mad) {
            Ok(Some(response)) => {
                self.counters.answered += 1;
                let status = smp::Packet::new_unchecked(&response.mad[..]).smp_status();
                if status != 0 {
                    self.counters.error_status += 1;
                }
                Some(response)
            }
            Ok(None) => None,
            Err(reason) => {
                self.counters.drop(reason);
                self.last_drop = Some(reason);
                None
            }
        }
    }

    /// One request and its response; `Ok(None)` for MADs that rightly get
    /// none (TrapRepress).
    fn exchange(&mut self, origin: (usize, u8), dlid: u16, bytes: &[u8]) -> Result<Option<SimResponse>, DropReason> {
        let mut mad = Mad::from_slice(bytes).map_err(|_| DropReason::Malformed)?;
        let request = {
            let packet = smp::Packet::new_checked(&mad.0[..]).map_err(|_| DropReason::Malformed)?;
            smp::Repr::parse(&packet).map_err(|_| DropReason::Malformed)?
        };
        if request.method == method::TRAP_REPRESS {
            // Simulated switches send each trap once, so there is nothing
            // to stop repeating.
            self.counters.trap_represses += 1;
            return Ok(None);
        }
        if request.is_response() {
            return Err(DropReason::NotARequest);
        }
        if request
            .directed()
            .is_some_and(|dr| dr.direction == Direction::Inbound)
        {
            return Err(DropReason::NotARequest);
        }
        if !self.nodes.get(origin.0).is_some_and(|n| n.present) {
            return Err(DropReason::NoLink);
        }
        let target = match request.routing {
            smp::Routing::Lid => {
                let (node, port) = self.route_lid(origin, dlid)?;
                Target {
                    node,
                    port,
                    dr_end: None,
                }
            }
            smp::Routing::Directed(_) => self.dr_outbound(&mut mad, dlid, origin)?,
        };
        let answer = self.sma(target.node, target.port, &request)?;
        if self.lose_answer(target.node) {
            return Err(DropReason::Injected);
        }
        {
            let mut packet = mad.smp_mut();
            packet.set_method(method::GET_RESP);
            packet.data_mut().copy_from_slice(&answer.data);
            if packet.is_directed() {
                packet.set_status(answer.status & !smp::DIRECTION_BIT);
                packet.set_direction(Direction::Inbound);
            } else {
                packet.set_status(answer.status);
            }
        }
        let slid = match request.routing {
            smp::Routing::Lid => {
                // The response goes to the request's LRH SLID: the SM
                // port's LID, which must have been assigned by now.
                let sm_lid = self.responder_lid(origin.0, origin.1);
                if sm_lid == 0 {
                    return Err(DropReason::NoLid);
                }
                let (node, port) = self.route_lid((target.node, target.port), sm_lid)?;
                Self::arrived_at(origin, node, port, self.nodes[node].is_switch())?;
                self.responder_lid(target.node, target.port)
            }
            smp::Routing::Directed(dr) => {
                self.dr_inbound(&mut mad, target, origin)?;
                // The last leg of a response with a real DrSLID is
                // LID-routed from the node the request's LRH named.
                if dr.dr_slid == PERMISSIVE_LID {
                    PERMISSIVE_LID
                } else {
                    dlid
                }
            }
        };
        Ok(Some(SimResponse {
            slid,
            mad: mad.0[..MAD_LEN].to_vec(),
        }))
    }

    /// The base LID a packet from `port` of `node` carries as its SLID.
    fn responder_lid(&self, node: usize, port: u8) -> u16 {
        self.nodes[node]
            .address_port(port)
            .map_or(0, |p| p.info.lid)
    }

    /// Where a packet that arrived at (`node`, `port`) is taken by an SM:
    /// the SM port it reached, if any SM listens there.
    fn deliver_to_sm(&self, node: usize, port: u8) -> Result<(usize, u8), DropReason> {
        let is_switch = self.nodes[node].is_switch();
        std::iter::once((self.sm_node, self.sm_port))
            .chain(self.other_sms.keys().copied())
            .find(|&sm| Self::arrived_at(sm, node, port, is_switch).is_ok())
            .ok_or(DropReason::NotForSm)
    }

    /// Whether a packet at (`node`, `port`) has reached the SM at `sm`.
    fn arrived_at(sm: (usize, u8), node: usize, port: u8, is_switch: bool) -> Result<(), DropReason> {
        if node == sm.0 && (is_switch || port == sm.1) {
            Ok(())
        } else {
            Err(DropReason::NotForSm)
        }
    }

    /// Whether the answer `node` just produced is to be lost.
    fn lose_answer(&mut self, node: usize) -> bool {
        let Some((every, seen)) = self.answer_loss.get_mut(node) else {
            return false;
        };
        if *every == 0 {
            return false;
        }
        *seen += 1;
        *seen % *every == 0
    }

    /// Makes `node` lose every `every`-th answer after processing the
    /// request (0 stops it): a Set still takes effect, as when a response
    /// dies on a flaky link, so an SM's retries must be harmless.
    pub fn set_answer_loss(&mut self, node: usize, every: u32) -> Result<(), SimError> {
        let slot = self
            .answer_loss
            .get_mut(node)
            .ok_or(SimError::NoSuchNode(node))?;
        *slot = (every, 0);
        Ok(())
    }

    /// Sets the NodeDescription `node` answers with, as its host may at any
    /// time (cut to 64 bytes on a character boundary): anything, control
    /// characters included, which a topology file cannot hold.
    pub fn set_description(&mut self, node: usize, text: &str) -> Result<(), SimError> {
        let n = self.nodes.get_mut(node).ok_or(SimError::NoSuchNode(node))?;
        let text = state::truncate_utf8(text, n.description.len());
        n.description = [0; 64];
        n.description[..text.len()].copy_from_slice(text.as_bytes());
        Ok(())
    }

    /// Makes `node` lie about who it is: its NodeInfo answers become those
    /// `as_node` gives through `as_port` (GUIDs, type, port count, the port
    /// entered), whatever port they come in by; everything else it answers
    /// as itself. From then on the M_Key of every SMP reaching its SMA is
    /// kept ([`Self::heard_keys`]): what a hostile host would read.
    pub fn impersonate(&mut self, node: usize, as_node: usize, as_port: u8) -> Result<(), SimError> {
        if node >= self.nodes.len() {
            return Err(SimError::NoSuchNode(node));
        }
        let claimed = self.nodes.get(as_node).ok_or(SimError::NoSuchNode(as_node))?;
        if as_port > claimed.num_ports {
            return Err(SimError::NoSuchPort { node: as_node, port: as_port });
        }
        self.impostors.insert(node, (as_node, as_port));
        self.heard_keys.entry(node).or_default();
        Ok(())
    }

    /// The M_Keys SMPs carried to `node` since it began to lie
    /// ([`Self::impersonate`]); empty for an honest node.
    pub fn heard_keys(&self, node: usize) -> &[u64] {
        self.heard_keys.get(&node).map_or(&[], Vec::as_slice)
    }

    /// The traps that reached the SM since the last call, oldest first.
    pub fn take_traps(&mut self) -> Vec<SimTrap> {
        let first = (self.sm_node, self.sm_port);
        self.take_traps_at(first)
    }

    /// The traps delivered to the SM at `at` since the last call.
    pub fn take_traps_at(&mut self, at: (usize, u8)) -> Vec<SimTrap> {
        let (mine, others) = std::mem::take(&mut self.traps).into_iter().partition(|t| t.to == at);
        self.traps = others;
        mine
    }

    /// Runs a second (third, ...) SM on `port` of CA `node`: the port
    /// reports IsSM, SMPs sent with [`Self::handle_from`] start there,
    /// traps addressed to its LID are kept for it
    /// ([`Self::take_traps_at`]), and `agent` answers the SMInfo of its
    /// port, as that SM's own responder does.
    pub fn add_sm(&mut self, node: usize, port: u8, agent: SmInfoAgent) -> Result<(), SimError> {
        let n = self.nodes.get_mut(node).ok_or(SimError::NoSuchNode(node))?;
        if n.is_switch() || port == 0 {
            return Err(SimError::BadSmPort { node, port, why: "a second SM runs on a CA port here" });
        }
        let p = n.port_mut(port).ok_or(SimError::NoSuchPort { node, port })?;
        p.info.capability_mask |= sm_mad::port_info::capability::IS_SM;
        p.sm_info = Some(SmInfoRepr { guid: p.guid, ..SmInfoRepr::default() });
        self.other_sms.insert((node, port), agent);
        Ok(())
    }

    /// The SMInfo agent of an SM added with [`Self::add_sm`] at `at`.
    pub(crate) fn sm_agent(&self, at: (usize, u8)) -> Option<&SmInfoAgent> {
        self.other_sms.get(&at)
    }

    /// Totals since the fabric was built or [`Self::reset_counters`].
    pub fn counters(&self) -> &SimCounters {
        &self.counters
    }

    /// Zeroes the counters, e.g. between sweeps.
    pub fn reset_counters(&mut self) {
        self.counters = SimCounters::default();
        self.last_drop = None;
    }

    /// Why the most recent unanswered MAD got no answer.
    pub fn last_drop(&self) -> Option<DropReason> {
        self.last_drop
    }

    /// Number of nodes (indices as in the topology).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The SM's node and port.
    pub fn sm_location(&self) -> (usize, u8) {
        (self.sm_node, self.sm_port)
    }

    /// The topology the fabric was built from: node indices, names and
    /// cables as the fabric's.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Whether `node` is in the fabric (not removed).
    pub fn is_present(&self, node: usize) -> bool {
        self.nodes.get(node).is_some_and(|n| n.present)
    }

    /// PortInfo of (`node`, `port`) as its SMA keeps it: the fields the SM
    /// sets and the capabilities (the link-derived fields are filled in
    /// only when a Get is answered).
    pub fn held_port_info(&self, node: usize, port: u8) -> Option<sm_mad::PortInfoRepr> {
        Some(self.nodes.get(node)?.port(port)?.info)
    }

    /// Logical state of a port, as PortInfo would report it.
    pub fn port_state(&self, node: usize, port: u8) -> Option<PortState> {
        self.nodes.get(node)?.port(port).map(|p| p.state)
    }

    /// The LID a port answers to: a CA port's own, a switch's port 0 LID
    /// for any of its ports.
    pub fn port_lid(&self, node: usize, port: u8) -> Option<u16> {
        Some(self.nodes.get(node)?.address_port(port)?.info.lid)
    }

    /// The M_Key state guarding `port` of `node` (port 0's on a switch,
    /// whose ports share one key; the port itself on a CA).
    pub fn m_key_state(&self, node: usize, port: u8) -> Option<PortMKey> {
        let n = self.nodes.get(node)?;
        let info = &n.port(if n.is_switch() { 0 } else { port })?.info;
        Some(PortMKey {
            key: info.m_key,
            protect_bits: info.m_key_protect_bits,
            lease_period: info.m_key_lease_period,
            violations: info.m_key_violations,
        })
    }

    /// A switch's LFT as programmed (entries past the end read as 0xFF).
    pub fn lft(&self, node: usize) -> Option<&[u8]> {
        self.nodes.get(node)?.switch.as_ref().map(|sw| &sw.lft[..])
    }

    /// A switch's LinearFDBTop.
    pub fn linear_fdb_top(&self, node: usize) -> Option<u16> {
        self.nodes
            .get(node)?
            .switch
            .as_ref()
            .map(|sw| sw.info.linear_fdb_top)
    }

    /// A switch's SwitchInfo.PortStateChange.
    pub fn port_state_change(&self, node: usize) -> Option<bool> {
        self.nodes
            .get(node)?
            .switch
            .as_ref()
            .map(|sw| sw.info.port_state_change)
    }

    /// Puts another SM behind a CA port (or port 0 of a switch), or takes
    /// it away: the port then advertises IsSM and answers SMInfo with
    /// `info`, for SM election tests.
    pub fn set_sm_info(
        &mut self,
        node: usize,
        port: u8,
        info: Option<SmInfoRepr>,
    ) -> Result<(), SimError> {
        let n = self.nodes.get_mut(node).ok_or(SimError::NoSuchNode(node))?;
        let is_switch = n.is_switch();
        if is_switch && port != 0 {
            return Err(SimError::NoSuchPort { node, port });
        }
        let p = match n.port_mut(port) {
            Some(p) if is_switch || port != 0 => p,
            _ => return Err(SimError::NoSuchPort { node, port }),
        };
        if info.is_some() {
            p.info.capability_mask |= sm_mad::port_info::capability::IS_SM;
        } else {
            p.info.capability_mask &= !sm_mad::port_info::capability::IS_SM;
        }
        p.sm_info = info;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use sm_topology::gen;

    use super::*;

    #[test]
    fn options_are_checked() {
        assert!(SimOptions::default().check().is_ok());
        for bad in [
            SimOptions {
                linear_fdb_cap: 0xC001,
                ..SimOptions::default()
            },
            SimOptions {
                multicast_fdb_cap: 0x4001,
                ..SimOptions::default()
            },
            SimOptions {
                vl_cap: 0,
                ..SimOptions::default()
            },
            SimOptions {
                mtu_cap: 6,
                ..SimOptions::default()
            },
            SimOptions {
                vl_arb_low_cap: 65,
                ..SimOptions::default()
            },
        ] {
            assert!(matches!(bad.check(), Err(SimError::BadOption(_))));
        }
    }

    #[test]
    fn debug_output_is_a_summary() {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let f = SimFabric::from_topology(&topo, 0, 1).unwrap();
        let text = format!("{f:?}");
        assert!(text.starts_with("SimFabric { nodes: 6, links: 6"), "{text}");
        assert!(text.len() < 1000);
    }

    #[test]
    fn counters_add_up_and_reset() {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let mut f = SimFabric::from_topology(&topo, 0, 1).unwrap();
        let mut mad = Mad::zeroed();
        smp::Repr::directed_get(1, sm_mad::mad::attr::NODE_INFO, 0, 0, &[1])
            .unwrap()
            .emit(&mut mad.smp_mut());
        assert!(f.handle(&mad.0).is_some());
        assert!(f.handle(&mad.0[..10]).is_none());
        let c = f.counters();
        assert_eq!((c.sent, c.handled, c.answered, c.dropped), (2, 1, 1, 1));
        assert_eq!(c.by_attribute[&sm_mad::mad::attr::NODE_INFO].get, 1);
        assert_eq!(f.last_drop(), Some(DropReason::Malformed));
        f.reset_counters();
        assert_eq!(f.counters(), &SimCounters::default());
        assert_eq!(f.last_drop(), None);
    }

    /// GUIDInfo Get and Set on the SM's CA port (and a switch's port 0):
    /// the table is PortInfo.GUIDCap entries long, entry 0 is the port
    /// GUID and stays so, alias entries are kept as set, a block beyond
    /// GUIDCap is refused.
    #[test]
    fn guid_info_is_kept_as_set() {
        use sm_mad::guid_info;
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let options = SimOptions { ca_guid_cap: 12, ..SimOptions::default() };
        let mut f = SimFabric::with_options(&topo, 0, 1, options).unwrap();
        let mut ask = |set: Option<[u64; 8]>, block: u32, path: &[u8]| -> (u16, [u64; 8]) {
            let mut mad = Mad::zeroed();
            let repr = match set {
                Some(guids) => {
                    let mut data = [0; smp::DATA_LEN];
                    guid_info::Repr { guids }.emit(&mut guid_info::Packet::new_unchecked(&mut data[..]));
                    smp::Repr::directed_set(7, sm_mad::mad::attr::GUID_INFO, block, 0, path, data)
                }
                None => smp::Repr::directed_get(7, sm_mad::mad::attr::GUID_INFO, block, 0, path),
            };
            repr.unwrap().emit(&mut mad.smp_mut());
            let answer = f.handle(&mad.0).expect("an answer");
            let answer = smp::Repr::parse(&smp::Packet::new_checked(&answer[..]).unwrap()).unwrap();
            let block = guid_info::Repr::parse(&guid_info::Packet::new_checked(&answer.data[..]).unwrap()).unwrap();
            (answer.status, block.guids)
        };
        let (status, first) = ask(None, 0, &[]);
        assert_eq!(status, 0);
        let port_guid = first[0];
        assert_ne!(port_guid, 0);
        assert_eq!(&first[1..], &[0; 7]);
        // Entry 0 is read-only; the aliases are kept.
        let (status, set) = ask(Some([0xdead, 0xa1, 0xa2, 0, 0, 0, 0, 0xa7]), 0, &[]);
        assert_eq!((status, set), (0, [port_guid, 0xa1, 0xa2, 0, 0, 0, 0, 0xa7]));
        assert_eq!(ask(None, 0, &[]).1, set);
        // Block 1 holds entries 8..12: the rest of the block is not there.
        let (status, b1) = ask(Some([0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf]), 1, &[]);
        assert_eq!((status, b1), (0, [0xb8, 0xb9, 0xba, 0xbb, 0, 0, 0, 0]));
        assert_eq!(ask(None, 2, &[]).0, 0x001C, "beyond GUIDCap");
        assert_eq!(ask(None, 32, &[]).0, 0x001C, "no such block");
        // A switch's port 0 has its one GUID, not settable.
        let (status, sw) = ask(Some([1, 2, 3, 4, 5, 6, 7, 8]), 0, &[1]);
        assert_eq!(status, 0);
        assert!(sw[0] != 0 && sw[0] != 1 && sw[1..] == [0; 7], "{sw:x?}");
    }

    #[test]
    fn an_sm_can_be_added_and_removed() {
        let topo = gen::kary_ntree(2, 2, 1).unwrap();
        let mut f = SimFabric::from_topology(&topo, 0, 1).unwrap();
        let info = SmInfoRepr {
            guid: 5,
            ..SmInfoRepr::default()
        };
        assert!(f.set_sm_info(1, 1, Some(info)).is_ok());
        assert!(f.set_sm_info(1, 0, Some(info)).is_err());
        assert!(f.set_sm_info(2, 1, Some(info)).is_err());
        assert!(f.set_sm_info(2, 0, Some(info)).is_ok());
        assert!(f.set_sm_info(1, 1, None).is_ok());
        assert_eq!(f.nodes[1].ports[1].info.capability_mask & 2, 0);
        assert!(f.set_sm_info(77, 1, None).is_err());
    }
}
