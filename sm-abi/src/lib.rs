//! # sm-abi — the contract between smcore and its routing engines
//!
//! smcore loads every routing engine from a shared library (`cdylib`) at run
//! time. This crate is the *only* thing the two sides share: the types that
//! cross the library boundary, the engine trait object, and the root module a
//! library exports. Everything here is `#[repr(C)]` and checked by
//! [`abi_stable`] when a library is loaded, so an engine built against an
//! incompatible version of this crate is rejected with a clear error instead
//! of crashing the subnet manager.
//!
//! ## The data flow
//!
//! 1. The core discovers the fabric, assigns LIDs and hands every engine a
//!    read-only [`FabricSnapshot`]: flat arrays of [`Node`]s and [`Port`]s
//!    addressed by index. No pointers, no callbacks into the core.
//! 2. The engine computes a [`Routing`]: one linear forwarding table per
//!    switch, a [`PathSl`] object answering `path_sl(slid, dlid)`, and
//!    optionally SL2VL tables, VL arbitration tables and a multicast spanning
//!    tree, plus diagnostics.
//! 3. The core *verifies* the result (every end port reaches every end-port
//!    LID, no forwarding loops, no cycle in the channel dependency graph of
//!    any VL). A result that fails verification counts as a failed engine and
//!    the next engine of the chain is tried.
//!
//! Engines never send MADs and the core never computes routes.
//!
//! ## Writing an engine
//!
//! A vendor engine is a crate with `crate-type = ["cdylib"]` that depends on
//! this crate *by version* (`sm-abi = "1.1"`) and usually on the engine kit,
//! `smcore-kit`, which provides graph helpers, the OpenSM min-hop port
//! balancing and conformance checks. The repository's `engine-template/`
//! is such a crate, ready to copy. Implement [`RoutingEngine`] and export
//! the library with [`export_engines!`]. A complete engine, routing every
//! switch to every LID along shortest paths:
//!
//! ```no_run
//! use std::collections::VecDeque;
//! use sm_abi::{EngineError, FabricSnapshot, Lft, Routing, RoutingEngine, NO_ROUTE};
//!
//! struct Shortest;
//!
//! impl RoutingEngine for Shortest {
//!     fn route(&self, f: &FabricSnapshot) -> Result<Routing, EngineError> {
//!         let len = usize::from(f.max_lid) + 1;
//!         let mut lfts: Vec<Lft> = f
//!             .switches()
//!             .map(|node| Lft { node, ports: vec![NO_ROUTE; len].into() })
//!             .collect();
//!         let slot = |node: u32| lfts.iter().position(|l| l.node == node);
//!         let slots: Vec<Option<usize>> = (0..f.nodes.len() as u32).map(slot).collect();
//!         // Every LID's owner is a tree root; a breadth-first search back
//!         // from it gives each switch the port one hop closer.
//!         for port in f.ports.iter().filter(|p| p.lid != 0) {
//!             let lids = port.lid..port.lid + port.lid_count() as u16;
//!             // The switch that owns the LID, or the one the end port hangs
//!             // off, and the port it leaves by.
//!             let first = match slots[port.node as usize] {
//!                 Some(s) => Some((port.node, s, 0)),
//!                 None if port.is_linked() => {
//!                     let peer = &f.ports[port.peer as usize];
//!                     slots[peer.node as usize].map(|s| (peer.node, s, peer.num))
//!                 }
//!                 None => None,
//!             };
//!             let Some((sw, s, out)) = first else { continue };
//!             let mut seen = vec![false; f.nodes.len()];
//!             seen[sw as usize] = true;
//!             lids.clone().for_each(|lid| lfts[s].ports[lid as usize] = out);
//!             let mut queue = VecDeque::from([sw]);
//!             while let Some(sw) = queue.pop_front() {
//!                 let n = &f.nodes[sw as usize];
//!                 for num in 1..=n.num_ports {
//!                     let Some(p) = f.port_of(sw, num).filter(|p| p.is_linked()) else { continue };
//!                     let back = &f.ports[p.peer as usize];
//!                     let Some(s) = slots[back.node as usize] else { continue };
//!                     if std::mem::replace(&mut seen[back.node as usize], true) {
//!                         continue;
//!                     }
//!                     lids.clone().for_each(|lid| lfts[s].ports[lid as usize] = back.num);
//!                     queue.push_back(back.node);
//!                 }
//!             }
//!         }
//!         Ok(Routing::single_vl(lfts))
//!     }
//! }
//!
//! fn make(_config: &str) -> Result<Shortest, EngineError> {
//!     // `config` is the TOML text of the engine's section of smcore.toml,
//!     // with global options (lmc, guid files...) merged in.
//!     Ok(Shortest)
//! }
//!
//! sm_abi::export_engines! {
//!     "shortest" => { summary: "Shortest paths, no balancing", deadlock_free: false, create: make },
//! }
//! # fn main() {}
//! ```
//!
//! The engine crate must also depend on `abi_stable` (the export attribute
//! the macro expands to names that crate).
//!
//! Put the resulting `libmy_engine.so` into an engine directory
//! (`--engine-dir`, `SMCORE_ENGINE_PATH`, or beside the `smcore` binary) and
//! run `smcore engines` to see it listed; `smcore --engines my-engine` uses it.
//!
//! ## Rules of the contract
//!
//! * **Panics never cross the boundary.** [`export_engines!`] wraps every
//!   call in `catch_unwind`; a panic becomes an [`EngineError`] of kind
//!   [`ErrorKind::Panicked`] (its reason starts with [`PANIC_PREFIX`]) and
//!   the chain falls through.
//! * **Results are owned.** The [`Routing`] value is moved to the core; its
//!   path-SL oracle is reference counted ([`PathSlBox`]) and the core keeps
//!   clones of it. Libraries are never unloaded, so the vtables behind
//!   trait objects stay valid.
//! * **LFTs are dense**: [`Lft::ports`] is indexed by LID (entry 0 unused),
//!   its length is at least `max_lid + 1`, and [`NO_ROUTE`] marks a LID the
//!   switch cannot reach. Port 0 means "the switch itself".
//! * **Open enumerations.** [`NodeKind`], [`PortState`], [`Level`] and
//!   [`ErrorKind`] are `u8` newtypes whose named values are associated
//!   constants: a later minor version may add values, so a `match` on them
//!   needs a `_` arm. A node of a kind an engine does not know is neither a
//!   switch nor an end node; the core logs an unknown [`Level`] as a
//!   warning and treats an unknown [`ErrorKind`] as [`ErrorKind::Other`].
//!
//! ## Versioning
//!
//! This crate has its own semantic version, independent of smcore's: the
//! ABI version *is* this crate's package version, recorded in every engine
//! library (abi_stable's `package_version_strings!()` expands here, so it
//! reads sm-abi's `CARGO_PKG_VERSION`, not the engine's). When it loads a
//! library, abi_stable 0.11 checks
//!
//! 1. the version: the library's sm-abi must have the same major version
//!    as the core's (for 1.0 and later any minor, older or newer, is
//!    accepted; a different major is rejected naming the file and both
//!    versions);
//! 2. the layout of the root module and of every type reachable from it,
//!    field by field. The root module [`EngineLibrary`] is a prefix type:
//!    fields after `create` may be missing (older library) or extra (newer
//!    library). Every other type must match exactly.
//!
//! So within one major version:
//!
//! * a **minor** version may add fields at the end of [`EngineLibrary`]
//!   (each documented "Since 1.x"; the core reads them as `Option` and falls
//!   back when a library lacks them), add methods with a default body at
//!   the end of the [`PathSl`] and `Engine` traits (their vtables are
//!   prefix types too: an object from an older library runs the default,
//!   which means "not offered"; 1.2 added [`PathSl::sl_table`]), add named
//!   values to the open enumerations, and add functions, constants and
//!   helpers that do not cross the boundary;
//! * a **major** version is needed to change, remove or reorder any field,
//!   to change the meaning of a value, to add a field to any struct other
//!   than [`EngineLibrary`], or to change the types of any field or method.
//!
//! Fixed for the whole 1.x line: [`Node`], [`Port`], [`FabricSnapshot`],
//! [`Lft`], [`Sl2Vl`], [`VlWeight`], [`VlArb`], [`TreeEdge`],
//! [`SpanningTree`], [`Diagnostic`], [`Routing`], [`EngineError`],
//! [`EngineDescriptor`], and the `u8` representation of the open
//! enumerations. A new capability (a new kind of input or output) goes
//! through a new optional root-module function. An older core loading a
//! newer engine ignores the root-module fields it does not know and may
//! meet enumeration values it has no name for; a newer core loading an
//! older engine sees `None` for the fields the engine lacks. The policy in
//! full, with what each side sees, is `docs/abi-policy.md` in the smcore
//! repository.

#![deny(missing_docs)]
// `#[sabi_trait]` expands to impls inside an anonymous const; the lint fires
// on the macro output, not on code written here.
#![allow(non_local_definitions)]

use std::panic::{catch_unwind, AssertUnwindSafe};

pub use abi_stable;
use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_trait::TD_Opaque,
    sabi_types::VersionStrings,
    std_types::{RArc, RBox, ROption, RResult, RStr, RString, RVec},
    StableAbi,
};

/// LFT entry meaning "this switch has no route to this LID" (OpenSM's
/// `OSM_NO_PATH`).
pub const NO_ROUTE: u8 = 0xFF;

/// Index value meaning "none" in index fields such as [`Port::peer`].
pub const NONE: u32 = u32::MAX;

/// Highest unicast LID (0xBFFF); multicast LIDs start at 0xC000.
pub const MAX_UNICAST_LID: u16 = 0xBFFF;

// ---------------------------------------------------------------------------
// Fabric snapshot
// ---------------------------------------------------------------------------

/// Declares a `u8` newtype whose named values are associated consts, so a
/// value this build does not know (sent by a newer peer) is representable
/// and a later minor version may add names without changing the layout.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:literal,)+ }) => {
        $(#[$meta])*
        #[repr(transparent)]
        #[derive(StableAbi, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u8);

        #[allow(non_upper_case_globals)]
        impl $name {
            $($(#[$vmeta])* pub const $variant: $name = $name($value);)+

            /// The name of a value this build knows, `None` for one added
            /// by a later minor version of this crate.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($variant)),)+
                    _ => None,
                }
            }

            /// Whether this build of the crate knows the value.
            pub fn is_known(self) -> bool {
                self.name().is_some()
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }
    };
}

open_enum! {
    /// What a node is.
    ///
    /// Open: a core built against a later minor version may send a kind this
    /// build does not know. Such a node is neither a switch nor an end node
    /// ([`NodeKind::is_switch`] and [`NodeKind::is_end_node`] are both
    /// false): engines never route through it and it is no source of
    /// traffic (the kit's graph may still route to a LID it carries). A core
    /// introduces a new kind only so that older engines can ignore it: its
    /// verifier asks them neither to route through such a node nor to reach
    /// it.
    NodeKind {
        /// Channel adapter (host or target).
        Ca = 1,
        /// Switch.
        Switch = 2,
        /// Router.
        Router = 3,
    }
}

impl NodeKind {
    /// End ports (CAs and routers) are sources and destinations of traffic.
    /// False for a kind this build does not know.
    pub fn is_end_node(self) -> bool {
        matches!(self, NodeKind::Ca | NodeKind::Router)
    }

    /// Whether the node is a switch.
    pub fn is_switch(self) -> bool {
        self == NodeKind::Switch
    }
}

open_enum! {
    /// Logical state of a port, as in PortInfo:PortState.
    ///
    /// Open: a state this build does not know counts as not active
    /// ([`PortState::is_active`] is false).
    PortState {
        /// Physically down or not present.
        Down = 1,
        /// Physical link up, not yet configured.
        Init = 2,
        /// Configured, waiting for the SM to activate.
        Armed = 3,
        /// Passing traffic.
        Active = 4,
    }
}

impl PortState {
    /// Whether the port passes traffic.
    pub fn is_active(self) -> bool {
        self == PortState::Active
    }
}

/// One node (switch, CA or router) of the fabric.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct Node {
    /// NodeInfo:NodeGUID.
    pub guid: u64,
    /// NodeInfo:SystemImageGUID (0 when the node reports none).
    pub system_guid: u64,
    /// Node type.
    pub kind: NodeKind,
    /// Number of external ports (port 0 is not counted).
    pub num_ports: u8,
    /// Index in [`FabricSnapshot::ports`] of this node's port 0. Port `p`
    /// of the node is at `first_port + p`; every node has a port-0 slot
    /// (for CAs and routers it is a placeholder that is never linked).
    pub first_port: u32,
    /// NodeDescription.
    pub description: RString,
}

/// One port of a node. Port 0 of a switch carries the switch's LID.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct Port {
    /// Index of the owning node in [`FabricSnapshot::nodes`].
    pub node: u32,
    /// Port number on the node (0 for a switch's management port).
    pub num: u8,
    /// Port GUID (for switch ports other than 0 this is the node's port-0
    /// GUID, as in IBA).
    pub guid: u64,
    /// Base LID, 0 if the port has none (external switch ports).
    pub lid: u16,
    /// LMC of this port: it answers to `lid .. lid + 2^lmc`.
    pub lmc: u8,
    /// Index of the port at the other end of the link, or [`NONE`].
    pub peer: u32,
    /// Port state.
    pub state: PortState,
    /// Operational data VLs (PortInfo:OperationalVLs as a count: 1, 2, 4, 8 or 15).
    pub op_vls: u8,
    /// Active link width as a lane count (1, 2, 4, 8, 12).
    pub width: u8,
    /// Active link speed in units of 2.5 Gb/s per lane (1 = SDR, 2 = DDR,
    /// 4 = QDR, ...; FDR/EDR and faster are given as their nearest multiple).
    pub speed: u8,
}

impl Port {
    /// True when the port is linked to another port.
    pub fn is_linked(&self) -> bool {
        self.peer != NONE
    }

    /// Number of LIDs this port answers to.
    pub fn lid_count(&self) -> u32 {
        if self.lid == 0 {
            0
        } else {
            1u32 << self.lmc
        }
    }
}

/// The fabric as the core knows it when routing: flat, index based, read only.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct FabricSnapshot {
    /// All nodes.
    pub nodes: RVec<Node>,
    /// All ports; see [`Node::first_port`].
    pub ports: RVec<Port>,
    /// Subnet LMC (end ports get `2^lmc` LIDs each).
    pub lmc: u8,
    /// Highest LID in use. LFTs must be at least `max_lid + 1` long.
    pub max_lid: u16,
    /// Index of the node the subnet manager runs on, or [`NONE`].
    pub sm_node: u32,
}

impl FabricSnapshot {
    /// Port `num` of node `node`, if the node has it.
    pub fn port_of(&self, node: u32, num: u8) -> Option<&Port> {
        let n = self.nodes.get(node as usize)?;
        if num > n.num_ports {
            return None;
        }
        self.ports.get(n.first_port as usize + num as usize)
    }

    /// Global index of port `num` of node `node`.
    pub fn port_index(&self, node: u32, num: u8) -> u32 {
        self.nodes[node as usize].first_port + num as u32
    }

    /// Indices of all switches, in node order.
    pub fn switches(&self) -> impl Iterator<Item = u32> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Switch)
            .map(|(i, _)| i as u32)
    }

    /// Indices of all end ports (linked CA and router ports with a LID).
    pub fn end_ports(&self) -> impl Iterator<Item = u32> + '_ {
        self.ports.iter().enumerate().filter_map(move |(i, p)| {
            let kind = self.nodes[p.node as usize].kind;
            (kind.is_end_node() && p.num != 0 && p.lid != 0 && p.is_linked()).then_some(i as u32)
        })
    }
}

// ---------------------------------------------------------------------------
// Routing result
// ---------------------------------------------------------------------------

/// The linear forwarding table of one switch.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct Lft {
    /// Node index of the switch.
    pub node: u32,
    /// Output port per LID (index = LID), [`NO_ROUTE`] where unreachable.
    pub ports: RVec<u8>,
}

/// An SL-to-VL map for traffic entering a port and leaving by another.
///
/// For a switch, `in_port` is the port traffic arrives on (0 for traffic the
/// switch originates) and `out_port` the port it leaves by. For a CA or
/// router port, `in_port` is 0 and `out_port` is the port.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct Sl2Vl {
    /// Node index.
    pub node: u32,
    /// Input port.
    pub in_port: u8,
    /// Output port.
    pub out_port: u8,
    /// VL for each SL.
    pub vl: [u8; 16],
}

/// One entry of a VL arbitration table.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq)]
pub struct VlWeight {
    /// Virtual lane.
    pub vl: u8,
    /// Weight in units of 64 bytes.
    pub weight: u8,
}

/// VL arbitration configuration of one output port.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct VlArb {
    /// Node index.
    pub node: u32,
    /// Port number.
    pub port: u8,
    /// PortInfo:VLHighLimit.
    pub high_limit: u8,
    /// High-priority table.
    pub high: RVec<VlWeight>,
    /// Low-priority table.
    pub low: RVec<VlWeight>,
}

/// One directed edge of a multicast spanning tree: traffic may leave `node`
/// through `port`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeEdge {
    /// Switch node index.
    pub node: u32,
    /// Port number.
    pub port: u8,
}

/// A multicast spanning tree over the switches. Every group's tree must be a
/// subset of it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct SpanningTree {
    /// Root switch node index.
    pub root: u32,
    /// Switch-to-switch links of the tree, each given once per direction.
    pub edges: RVec<TreeEdge>,
}

open_enum! {
    /// Severity of a diagnostic message.
    ///
    /// Open: the core logs a level it does not know as a warning.
    Level {
        /// Informational.
        Info = 1,
        /// Something the admin should look at.
        Warn = 2,
    }
}

/// A message from the engine to the admin, logged by the core.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// Severity.
    pub level: Level,
    /// Text.
    pub message: RString,
}

/// A path-SL oracle given whole, as a table over classes of LIDs: the SL
/// of the path from `slid` to `dlid` is
/// `sl[class_of[dlid] * classes + class_of[slid]]`.
///
/// Engines whose SLs depend on less than the pair of LIDs (torus-2QoS: the
/// coordinates of the two switches; LASH: the pair of switches) give one,
/// so the core can verify every path by class and never asks the oracle
/// pair by pair. Since 1.2 (through [`PathSl::sl_table`]).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SlTable {
    /// Per LID (the index), its class; it covers every LID up to the
    /// snapshot's `max_lid`.
    pub class_of: RVec<u32>,
    /// How many classes there are (every `class_of` value is below it).
    pub classes: u32,
    /// SLs by (destination class, source class), destination major:
    /// `classes * classes` entries.
    pub sl: RVec<u8>,
}

/// What is wrong with an [`SlTable`] an engine gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlTableError {
    /// `class_of` ends before `max_lid`.
    ShortClasses {
        /// Entries given.
        len: usize,
        /// The snapshot's highest LID.
        max_lid: u16,
    },
    /// A LID's class is not below `classes`.
    ClassOutOfRange {
        /// The LID.
        lid: usize,
        /// Its class.
        class: u32,
    },
    /// `sl` does not hold `classes * classes` entries.
    WrongSize {
        /// Entries given.
        len: usize,
        /// Classes declared.
        classes: u32,
    },
}

impl std::fmt::Display for SlTableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlTableError::ShortClasses { len, max_lid } => {
                write!(f, "SL table classes cover LIDs 0..{len}, the fabric's go up to {max_lid}")
            }
            SlTableError::ClassOutOfRange { lid, class } => write!(f, "SL table: LID {lid} is in class {class}, past the last"),
            SlTableError::WrongSize { len, classes } => {
                write!(f, "SL table holds {len} SLs for {classes} classes (needs {classes}²)")
            }
        }
    }
}

impl std::error::Error for SlTableError {}

impl SlTable {
    /// Checks the table's shape against a fabric whose highest LID is
    /// `max_lid` (the SLs themselves are the verifier's to judge).
    pub fn check(&self, max_lid: u16) -> Result<(), SlTableError> {
        if self.class_of.len() <= max_lid as usize {
            return Err(SlTableError::ShortClasses { len: self.class_of.len(), max_lid });
        }
        if let Some((lid, &class)) = self.class_of.iter().enumerate().find(|(_, &c)| c >= self.classes) {
            return Err(SlTableError::ClassOutOfRange { lid, class });
        }
        let need = (self.classes as u64) * (self.classes as u64);
        if self.sl.len() as u64 != need {
            return Err(SlTableError::WrongSize { len: self.sl.len(), classes: self.classes });
        }
        Ok(())
    }

    /// The most classes the in-tree engines give a table for: its square
    /// is its size in bytes, 64 MiB here. Past it they answer pair by pair;
    /// the core takes any table that passes [`SlTable::check`].
    pub const MAX_CLASSES: usize = 8192;

    /// The class of `lid` (0 for a LID the table does not cover; a checked
    /// table covers every LID of its fabric).
    #[inline]
    pub fn class(&self, lid: u16) -> u32 {
        self.class_of.get(lid as usize).copied().unwrap_or(0)
    }

    /// The SL of `slid` → `dlid`.
    #[inline]
    pub fn get(&self, slid: u16, dlid: u16) -> u8 {
        self.row(self.class(dlid)).get(self.class(slid) as usize).copied().unwrap_or(0)
    }

    /// The SLs of every source class towards destination class `class`.
    #[inline]
    pub fn row(&self, class: u32) -> &[u8] {
        let n = self.classes as usize;
        let at = class as usize * n;
        self.sl.get(at..at + n).unwrap_or(&[])
    }
}

/// Answers which service level a path uses.
///
/// The core asks it for every (source LID, destination LID) pair it
/// verifies and for every SA PathRecord, so it must be cheap; an oracle
/// that can give itself whole as an [`SlTable`] does so through
/// [`PathSl::sl_table`], and the core then answers from the table.
#[sabi_trait]
pub trait PathSl: Send + Sync {
    /// When every path uses the same SL, that SL. Lets the verifier take its
    /// fast per-destination-tree path.
    fn uniform(&self) -> ROption<u8>;

    /// SL of the path from `slid` to `dlid` (0..=15).
    #[sabi(last_prefix_field)]
    fn path_sl(&self, slid: u16, dlid: u16) -> u8;

    /// Since 1.2. The oracle whole, when its SLs depend only on classes of
    /// LIDs: it must answer exactly what `path_sl` answers for every pair
    /// of the snapshot's LIDs. The core checks its shape, then verifies
    /// and serves SLs (SA PathRecords, dumps) from the table alone, so a
    /// table and a `path_sl` that disagree are never both in force.
    ///
    /// An oracle built against 1.0 or 1.1 has no such method in its
    /// vtable: the core's call then answers this default, none.
    fn sl_table(&self) -> ROption<RArc<SlTable>> {
        ROption::RNone
    }
}

/// Shared, type-erased [`PathSl`]: reference counted, so the core keeps
/// one oracle for verification, the SA and its routing cache by cloning the
/// handle (a clone is a reference-count increment, never a copy of the
/// engine's tables).
pub type PathSlBox = PathSl_TO<'static, RArc<()>>;

impl Clone for PathSlBox {
    fn clone(&self) -> Self {
        PathSl_TO::from_sabi(self.obj.shallow_clone())
    }
}

/// Every path uses one SL.
#[derive(Debug, Clone, Copy)]
pub struct UniformSl(pub u8);

impl PathSl for UniformSl {
    fn uniform(&self) -> ROption<u8> {
        ROption::RSome(self.0)
    }
    fn path_sl(&self, _slid: u16, _dlid: u16) -> u8 {
        self.0
    }
}

/// SL value meaning "the oracle failed for this pair" (a panic inside it).
pub const INVALID_SL: u8 = 0xFF;

/// Adapter that keeps a panicking [`PathSl`] from aborting the core: a
/// panic answers [`INVALID_SL`] (or "not uniform"), which the verifier
/// rejects.
struct GuardedSl<T>(T);

impl<T: PathSl> PathSl for GuardedSl<T> {
    fn uniform(&self) -> ROption<u8> {
        catch_unwind(AssertUnwindSafe(|| self.0.uniform())).unwrap_or(ROption::RNone)
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        catch_unwind(AssertUnwindSafe(|| self.0.path_sl(slid, dlid))).unwrap_or(INVALID_SL)
    }
    fn sl_table(&self) -> ROption<RArc<SlTable>> {
        catch_unwind(AssertUnwindSafe(|| self.0.sl_table())).unwrap_or(ROption::RNone)
    }
}

/// The oracle a checked [`SlTable`] makes: what the core puts in force in
/// place of an engine's oracle that gave one (see [`table_sl_box`]).
struct TableSl {
    table: RArc<SlTable>,
    /// Found once: the SA asks for it at every PathRecord under a QoS
    /// policy, and a table is up to tens of MiB.
    uniform: ROption<u8>,
}

impl PathSl for TableSl {
    fn uniform(&self) -> ROption<u8> {
        self.uniform
    }
    fn path_sl(&self, slid: u16, dlid: u16) -> u8 {
        self.table.get(slid, dlid)
    }
    fn sl_table(&self) -> ROption<RArc<SlTable>> {
        ROption::RSome(self.table.clone())
    }
}

/// The oracle that answers from `table` alone, giving the same table back
/// through [`PathSl::sl_table`]. Check the table first
/// ([`SlTable::check`]).
pub fn table_sl_box(table: RArc<SlTable>) -> PathSlBox {
    let uniform = match table.sl.first() {
        Some(&sl) if table.sl.iter().all(|&x| x == sl) => ROption::RSome(sl),
        // No class at all: no pair to ask about.
        None => ROption::RSome(0),
        _ => ROption::RNone,
    };
    PathSl_TO::from_ptr(RArc::new(TableSl { table, uniform }), TD_Opaque)
}

/// Box any [`PathSl`] implementation for a [`Routing`]. Always use this
/// rather than building the trait object by hand: it catches panics.
pub fn path_sl_box<T: PathSl + 'static>(value: T) -> PathSlBox {
    PathSl_TO::from_ptr(RArc::new(GuardedSl(value)), TD_Opaque)
}

/// The result of routing, owned by the core once returned.
#[repr(C)]
#[derive(StableAbi)]
pub struct Routing {
    /// One LFT per switch (any order; switches without an entry get none).
    pub lfts: RVec<Lft>,
    /// Path SL oracle.
    pub path_sl: PathSlBox,
    /// SL2VL maps; empty when the engine leaves SL2VL alone (then SL n is
    /// carried on VL n).
    pub sl2vl: RVec<Sl2Vl>,
    /// VL arbitration tables; empty when the engine leaves them alone.
    pub vlarb: RVec<VlArb>,
    /// Multicast master spanning tree, when the engine builds one.
    pub mcast_tree: ROption<SpanningTree>,
    /// Number of VLs the routing needs (1 for single-VL engines).
    pub vls_used: u8,
    /// Messages for the admin.
    pub diagnostics: RVec<Diagnostic>,
}

impl Routing {
    /// A routing with the given LFTs, every path on SL 0, one VL.
    pub fn single_vl(lfts: Vec<Lft>) -> Self {
        Routing {
            lfts: lfts.into(),
            path_sl: path_sl_box(UniformSl(0)),
            sl2vl: RVec::new(),
            vlarb: RVec::new(),
            mcast_tree: ROption::RNone,
            vls_used: 1,
            diagnostics: RVec::new(),
        }
    }

    /// Add a diagnostic.
    pub fn diag(&mut self, level: Level, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic { level, message: RString::from(message.into()) });
    }
}

impl std::fmt::Debug for Routing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routing")
            .field("lfts", &self.lfts.len())
            .field("sl2vl", &self.sl2vl.len())
            .field("vlarb", &self.vlarb.len())
            .field("mcast_tree", &self.mcast_tree.is_some())
            .field("vls_used", &self.vls_used)
            .field("diagnostics", &self.diagnostics)
            .finish()
    }
}

open_enum! {
    /// What kind of failure an [`EngineError`] reports. Open: the core
    /// treats a kind it does not know as [`ErrorKind::Other`].
    ErrorKind {
        /// Anything else (what [`EngineError::new`] gives).
        Other = 0,
        /// The engine cannot route this fabric (wrong shape, too few VLs...).
        CannotRoute = 1,
        /// The engine's configuration is invalid.
        BadConfig = 2,
        /// The engine panicked; [`guard`] sets this, the reason is the
        /// panic message.
        Panicked = 3,
        /// The library was asked for something it does not provide (an
        /// engine name it does not export, a capability it lacks).
        Unsupported = 4,
    }
}

/// Why an engine could not route. The reason is shown to the admin verbatim.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    /// Human-readable reason.
    pub reason: RString,
    /// What kind of failure it is; the core tells a panic from a refusal by
    /// it.
    pub kind: ErrorKind,
}

impl EngineError {
    /// An error with this reason, of kind [`ErrorKind::Other`].
    pub fn new(reason: impl Into<String>) -> Self {
        Self::with_kind(ErrorKind::Other, reason)
    }

    /// An error of kind `kind`.
    pub fn with_kind(kind: ErrorKind, reason: impl Into<String>) -> Self {
        EngineError { reason: RString::from(reason.into()), kind }
    }

    /// The engine cannot route this fabric.
    pub fn cannot_route(reason: impl Into<String>) -> Self {
        Self::with_kind(ErrorKind::CannotRoute, reason)
    }

    /// The engine's configuration is invalid.
    pub fn bad_config(reason: impl Into<String>) -> Self {
        Self::with_kind(ErrorKind::BadConfig, reason)
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for EngineError {}

// ---------------------------------------------------------------------------
// Engine trait object and root module
// ---------------------------------------------------------------------------

/// The engine as seen through the ABI. Implement [`RoutingEngine`] instead
/// and let [`export_engines!`] adapt it: the adapter catches panics.
#[sabi_trait]
pub trait Engine: Send + Sync {
    /// Route the fabric.
    #[sabi(last_prefix_field)]
    fn route(&self, fabric: &FabricSnapshot) -> RResult<Routing, EngineError>;

    /// Since 1.3. Route the fabric again after a change, given the routing
    /// in force before it ([`PreviousRouting`]): keep every route still
    /// valid under the engine's own rules and change only what the change
    /// forces. An engine built against an older minor lacks this vtable
    /// entry and the default body runs: it routes from scratch.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> RResult<Routing, EngineError> {
        let _ = previous;
        self.route(fabric)
    }
}

/// One switch's forwarding table in the routing in force before a
/// re-route. Since 1.3. Switches are named by node GUID, not by index:
/// node indices change between snapshots.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PreviousLft {
    /// NodeInfo:NodeGUID of the switch.
    pub guid: u64,
    /// Output port per LID (index = LID), [`NO_ROUTE`] where it had none.
    pub ports: RVec<u8>,
}

/// The routing the core accepted and programmed before this re-route
/// (what [`Engine::reroute`] continues from). Since 1.3.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq, Default)]
pub struct PreviousRouting {
    /// The engine that computed it (it may be another engine of the chain).
    pub engine: RString,
    /// One table per switch it routed, in no particular order.
    pub lfts: RVec<PreviousLft>,
}

impl PreviousRouting {
    /// The previous table of the switch with node GUID `guid`.
    pub fn lft(&self, guid: u64) -> Option<&[u8]> {
        self.lfts.iter().find(|l| l.guid == guid).map(|l| &l.ports[..])
    }
}

/// Owned, type-erased engine.
pub type EngineBox = Engine_TO<'static, RBox<()>>;

/// What engine authors implement.
pub trait RoutingEngine: Send + Sync + 'static {
    /// Route the fabric or say why not.
    fn route(&self, fabric: &FabricSnapshot) -> Result<Routing, EngineError>;

    /// Route the fabric again after a change, continuing from `previous`
    /// (see [`Engine::reroute`]). The default routes from scratch; the kit's
    /// `continuity` module keeps what is still valid.
    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> Result<Routing, EngineError> {
        let _ = previous;
        self.route(fabric)
    }
}

/// Adapter from [`RoutingEngine`] to the ABI [`Engine`], turning panics into
/// errors.
pub struct Guarded<E>(pub E);

impl<E: RoutingEngine> Engine for Guarded<E> {
    fn route(&self, fabric: &FabricSnapshot) -> RResult<Routing, EngineError> {
        guard(|| self.0.route(fabric)).into()
    }

    fn reroute(&self, fabric: &FabricSnapshot, previous: &PreviousRouting) -> RResult<Routing, EngineError> {
        guard(|| self.0.reroute(fabric, previous)).into()
    }
}

/// Box an engine for the ABI.
pub fn engine_box<E: RoutingEngine>(engine: E) -> EngineBox {
    Engine_TO::from_value(Guarded(engine), TD_Opaque)
}

/// What the reason of an [`ErrorKind::Panicked`] error made by [`guard`]
/// starts with; the panic message follows.
pub const PANIC_PREFIX: &str = "engine panicked: ";

/// Run `f`, turning a panic into an [`EngineError`] of kind
/// [`ErrorKind::Panicked`].
pub fn guard<T>(f: impl FnOnce() -> Result<T, EngineError>) -> Result<T, EngineError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = if let Some(s) = payload.downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s.clone()
            } else {
                "unknown panic payload".to_string()
            };
            Err(EngineError::with_kind(ErrorKind::Panicked, format!("{PANIC_PREFIX}{msg}")))
        }
    }
}

/// One engine a library exports.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EngineDescriptor {
    /// Engine name as used in `--engines` (OpenSM's names for the built-in ones).
    pub name: RString,
    /// Engine build version (the engine crate's version).
    pub version: RString,
    /// One-line description.
    pub summary: RString,
    /// The engine promises routes free of credit loops (given its path SLs
    /// and SL2VL maps). The core then treats a credit loop in its result as
    /// a failure; for other engines it is reported but tolerated.
    pub deadlock_free: bool,
}

/// The root module every engine library exports.
///
/// A prefix type: `engines` and `create` (ABI 1.0) are present in every
/// library of this major version. Every field after them was added by a
/// minor version and is optional: a library built against an older minor
/// lacks it, and the accessor on [`EngineLibraryRef`] returns `None`
/// (`missing_field(option)`), so the host falls back instead of panicking.
/// New capabilities are added here, at the end, never elsewhere.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = EngineLibraryRef)))]
#[sabi(missing_field(option))]
pub struct EngineLibrary {
    /// The engines this library provides.
    pub engines: extern "C" fn() -> RVec<EngineDescriptor>,
    /// Build the engine `name` from the TOML text of its configuration.
    #[sabi(last_prefix_field)]
    pub create: extern "C" fn(name: RStr<'_>, config: RStr<'_>) -> RResult<EngineBox, EngineError>,
    /// Since 1.1. Check the configuration of engine `name` without routing
    /// (the exported adapter builds the engine and drops it), so the core can
    /// report a bad configuration before the first sweep.
    /// Absent in 1.0 libraries: the core then learns of a bad configuration
    /// when `create` fails.
    pub check_config: extern "C" fn(name: RStr<'_>, config: RStr<'_>) -> RResult<(), EngineError>,
}

impl RootModule for EngineLibraryRef {
    declare_root_module_statics! {EngineLibraryRef}
    const BASE_NAME: &'static str = "smcore_engine";
    const NAME: &'static str = "smcore_engine";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// Export engines from a `cdylib`.
///
/// Each entry is
/// `"name" => { summary: "...", deadlock_free: bool, create: constructor }`
/// where the constructor is `fn(&str) -> Result<E, EngineError>` taking the
/// engine's TOML config text, with `E: RoutingEngine`. The engine version
/// recorded is the calling crate's `CARGO_PKG_VERSION`. The calling crate
/// must depend on `abi_stable` too.
#[macro_export]
macro_rules! export_engines {
    ($($name:literal => { summary: $summary:literal, deadlock_free: $df:expr, create: $ctor:path $(,)? }),+ $(,)?) => {
        extern "C" fn __smcore_engines() -> $crate::abi_stable::std_types::RVec<$crate::EngineDescriptor> {
            let mut v = $crate::abi_stable::std_types::RVec::new();
            $(
                v.push($crate::EngineDescriptor {
                    name: $name.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    summary: $summary.into(),
                    deadlock_free: $df,
                });
            )+
            v
        }

        extern "C" fn __smcore_create(
            name: $crate::abi_stable::std_types::RStr<'_>,
            config: $crate::abi_stable::std_types::RStr<'_>,
        ) -> $crate::abi_stable::std_types::RResult<$crate::EngineBox, $crate::EngineError> {
            let name = name.as_str();
            let config = config.as_str();
            $crate::guard(|| {
                $(
                    if name == $name {
                        return $ctor(config).map($crate::engine_box);
                    }
                )+
                Err($crate::EngineError::with_kind(
                    $crate::ErrorKind::Unsupported,
                    format!("this library has no engine named `{name}`"),
                ))
            })
            .into()
        }

        extern "C" fn __smcore_check_config(
            name: $crate::abi_stable::std_types::RStr<'_>,
            config: $crate::abi_stable::std_types::RStr<'_>,
        ) -> $crate::abi_stable::std_types::RResult<(), $crate::EngineError> {
            __smcore_create(name, config).map(|_| ())
        }

        /// Root module of this engine library.
        #[$crate::abi_stable::export_root_module]
        pub fn __smcore_root_module() -> $crate::EngineLibraryRef {
            use $crate::abi_stable::prefix_type::PrefixTypeTrait;
            $crate::EngineLibrary {
                engines: __smcore_engines,
                create: __smcore_create,
                check_config: __smcore_check_config,
            }
            .leak_into_prefix()
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_enum_values_are_neither_switch_nor_end_node_and_print_their_number() {
        let future = NodeKind(9);
        assert!(!future.is_switch() && !future.is_end_node() && !future.is_known());
        assert!(NodeKind::Ca.is_end_node() && NodeKind::Router.is_end_node() && NodeKind::Switch.is_switch());
        assert_eq!(format!("{future:?} {:?}", NodeKind::Switch), "NodeKind(9) Switch");
        assert!(!PortState(7).is_active() && PortState::Active.is_active());
        assert_eq!(Level(3).name(), None);
    }

    #[test]
    fn a_panic_becomes_an_error_of_kind_panicked() {
        let e = guard::<()>(|| panic!("boom")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Panicked);
        assert_eq!(e.reason.as_str(), format!("{PANIC_PREFIX}boom"));
        assert_eq!(EngineError::new("x").kind, ErrorKind::Other);
        assert_eq!(EngineError::bad_config("x").kind, ErrorKind::BadConfig);
    }

    /// Answers the number of questions it was asked before.
    struct Counting(std::sync::atomic::AtomicU8);

    impl PathSl for Counting {
        fn uniform(&self) -> ROption<u8> {
            ROption::RNone
        }
        fn path_sl(&self, _slid: u16, _dlid: u16) -> u8 {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        }
    }

    /// SLs by switch: LIDs 1..=2 on switch 0, 3..=4 on switch 1.
    fn by_switch() -> SlTable {
        SlTable { class_of: vec![0, 0, 0, 1, 1].into(), classes: 2, sl: vec![0, 1, 2, 3].into() }
    }

    #[test]
    fn a_table_answers_by_class_destination_major_and_its_oracle_gives_it_back() {
        let t = by_switch();
        assert_eq!(t.check(4), Ok(()));
        // (src class 1, dst class 0) is sl[0 * 2 + 1].
        assert_eq!((t.get(3, 1), t.get(1, 3), t.get(4, 4), t.get(2, 2)), (1, 2, 3, 0));
        assert_eq!(t.row(1), &[2, 3]);
        let oracle = table_sl_box(RArc::new(t.clone()));
        assert_eq!(oracle.path_sl(4, 2), 1);
        assert_eq!(oracle.uniform(), ROption::RNone);
        assert_eq!(oracle.sl_table().map(|x| (*x).clone()), ROption::RSome(t));
        let flat = SlTable { class_of: vec![0; 3].into(), classes: 1, sl: vec![5].into() };
        assert_eq!(table_sl_box(RArc::new(flat)).uniform(), ROption::RSome(5));
    }

    #[test]
    fn a_table_of_the_wrong_shape_is_refused_naming_what_is_wrong() {
        assert_eq!(by_switch().check(5), Err(SlTableError::ShortClasses { len: 5, max_lid: 5 }));
        let mut t = by_switch();
        t.class_of[3] = 2;
        assert_eq!(t.check(4), Err(SlTableError::ClassOutOfRange { lid: 3, class: 2 }));
        let mut t = by_switch();
        t.sl.pop();
        assert_eq!(t.check(4), Err(SlTableError::WrongSize { len: 3, classes: 2 }));
        assert!(t.check(4).unwrap_err().to_string().contains("3 SLs for 2 classes"));
    }

    #[test]
    fn an_oracle_without_a_table_answers_none_and_a_panicking_one_too() {
        assert_eq!(path_sl_box(Counting(0.into())).sl_table(), ROption::RNone);
        struct Panicky;
        impl PathSl for Panicky {
            fn uniform(&self) -> ROption<u8> {
                ROption::RNone
            }
            fn path_sl(&self, _: u16, _: u16) -> u8 {
                0
            }
            fn sl_table(&self) -> ROption<RArc<SlTable>> {
                panic!("no table today")
            }
        }
        assert_eq!(path_sl_box(Panicky).sl_table(), ROption::RNone);
    }

    #[test]
    fn a_cloned_oracle_is_the_same_oracle() {
        let a = path_sl_box(Counting(0.into()));
        let b = a.clone();
        // One oracle behind both handles: the clone continues the count.
        assert_eq!((a.path_sl(1, 2), b.path_sl(2, 1)), (0, 1));
        drop(a);
        assert_eq!(b.path_sl(1, 1), 2);
    }
}
