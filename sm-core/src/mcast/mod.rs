//! Multicast: the groups hosts join through the SA, the spanning tree each
//! group's traffic follows, and the MFT entries that carry it.
//!
//! - [`groups`]: membership as MCMemberRecord requests leave it.
//! - [`tree`]: per group, the switches and ports its traffic uses: a
//!   subtree of the engine's master spanning tree when the engine offers
//!   one (torus-2QoS), else a min-hop tree from the switch closest to all
//!   members. The result feeds the verifier (multicast dependencies join
//!   the unicast ones in the credit-loop check) and the MFT programming.
//! - [`precreate`]: the groups the SM creates itself (IPoIB broadcast
//!   groups and partitions.conf's `mgid=` lines), as OpenSM does.
//! - [`program`]: writes the MFT blocks that differ from what each switch
//!   holds.

pub mod groups;
pub mod precreate;
pub mod program;
pub mod tree;

pub use groups::{McError, McGroup, McGroupParams, McGroups, McLimits, McMember};
