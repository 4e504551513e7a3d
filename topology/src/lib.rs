//! Topology files, generators and offline LID assignment for smcore.
//!
//! * [`model`]: the [`Topology`] (nodes, links, rates) and its checks.
//! * [`parse`]: reads ibnetdiscover output and ibsim net files.
//! * [`emit`]: writes ibsim net files that ibsim loads and [`parse`] reads
//!   back identically.
//! * [`builder`]: builds topologies with deterministic GUIDs.
//! * [`gen`]: fat trees, tori and meshes (with torus-2QoS.conf),
//!   hypercubes, random irregular fabrics, fault injection.
//! * [`lids`]: LID assignment and the [`sm_abi::FabricSnapshot`] engines route.
//!
//! ```
//! let topo = sm_topology::gen::fat_tree_2level(4, 2, 4, 2)?;
//! let text = sm_topology::emit::to_net_string(&topo)?;
//! assert_eq!(sm_topology::parse_str(&text, "ft.net")?, topo);
//! let snap = sm_topology::lids::snapshot(&topo, 0)?;
//! assert_eq!(snap.end_ports().count(), 16);
//! # Ok::<(), sm_topology::TopologyError>(())
//! ```

pub mod builder;
pub mod emit;
pub mod error;
pub mod gen;
pub mod lids;
pub mod model;
pub mod parse;

pub use builder::TopologyBuilder;
pub use error::TopologyError;
pub use model::{connected_components, TopoLink, TopoNode, Topology};
pub use parse::{parse_file, parse_file_stated, parse_str, parse_str_stated, StatedRates};
