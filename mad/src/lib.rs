//! InfiniBand management datagram (MAD) wire formats for smcore.
//!
//! Every format comes in two layers, as in smoltcp's `wire` module:
//!
//! * a typed view over bytes, `Packet<T: AsRef<[u8]>>`, whose getters (and
//!   setters when `T: AsMut<[u8]>`) read and write fields in place. Build
//!   it with `new_checked` on bytes from the wire: that checks the length
//!   once, after which every accessor is in bounds;
//! * a plain `Repr` struct with `parse`, `emit` and `buffer_len`, for code
//!   that wants values rather than offsets.
//!
//! All fields are big-endian, as the IBA specifies. Modules:
//!
//! | module | format |
//! | --- | --- |
//! | [`mad`] | common MAD header, method/class/attribute constants, status bits, the 256-byte [`Mad`] |
//! | [`smp`] | LID-routed and directed-route SMPs |
//! | [`sa`] | SA header (RMPP fields, SM_Key, AttributeOffset, ComponentMask) |
//! | [`node_info`] | NodeInfo |
//! | [`node_description`] | NodeDescription |
//! | [`port_info`] | PortInfo |
//! | [`switch_info`] | SwitchInfo |
//! | [`forwarding`] | LinearForwardingTable, MulticastForwardingTable |
//! | [`sl2vl`] | SLtoVLMappingTable |
//! | [`vlarb`] | VLArbitrationTable |
//! | [`sm_info`] | SMInfo |
//! | [`notice`] | Notice (traps) |
//! | [`cc`] | congestion control: CC MAD header, CongestionInfo, Switch/CA settings, CongestionControlTable |
//!
//! ```
//! use sm_mad::{mad, node_info, smp, Mad};
//!
//! // A directed-route SubnGet(NodeInfo) two hops out: port 3, then port 1.
//! let request = smp::Repr::directed_get(0x1234, mad::attr::NODE_INFO, 0, 0, &[3, 1])?;
//! let mut mad = Mad::zeroed();
//! request.emit(&mut smp::Packet::new_unchecked(&mut mad.0[..]));
//!
//! // ...and the way back: a response is parsed the same way.
//! let packet = smp::Packet::new_checked(&mad.0[..])?;
//! let parsed = smp::Repr::parse(&packet)?;
//! assert_eq!(parsed, request);
//! assert_eq!(packet.hop_count(), 2);
//! let info = node_info::Packet::new_checked(packet.data())?;
//! assert_eq!(info.num_ports(), 0);
//! # Ok::<(), sm_mad::Error>(())
//! ```

mod field;

pub mod cc;
pub mod forwarding;
pub mod mad;
pub mod node_description;
pub mod node_info;
pub mod guid_info;
pub mod pkey_table;
pub mod notice;
pub mod perf;
pub mod port_info;
pub mod rate;
pub mod sa;
pub mod sa_class_port_info;
pub mod sa_guid_info_record;
pub mod sa_inform_info;
pub mod sa_lft_record;
pub mod sa_link_record;
pub mod sa_mc_member_record;
pub mod sa_mft_record;
pub mod sa_multi_path_record;
pub mod sa_node_record;
pub mod sa_path_record;
pub mod sa_pkey_table_record;
pub mod sa_service_record;
pub mod sa_sl2vl_record;
pub mod sa_port_info_record;
pub mod sa_sm_info_record;
pub mod sa_switch_info_record;
pub mod sa_vlarb_record;
pub mod sl2vl;
pub mod sm_info;
pub mod smp;
pub mod speed;
pub mod switch_info;
pub mod vlarb;

pub use forwarding::{
    LftPacket, LftRepr, MftModifier, MftPacket, MftRepr, LFT_BLOCK_LEN, MFT_BLOCK_LEN,
};
pub use mad::{Header as MadHeader, HeaderRepr as MadHeaderRepr, Mad, MAD_LEN};
pub use node_description::{Packet as NodeDescriptionPacket, Repr as NodeDescriptionRepr};
pub use node_info::{NodeType, Packet as NodeInfoPacket, Repr as NodeInfoRepr};
pub use notice::{Details as NoticeDetails, Packet as NoticePacket, Repr as NoticeRepr};
pub use port_info::{Packet as PortInfoPacket, PhysState, PortState, Repr as PortInfoRepr};
pub use sa::{Packet as SaPacket, Repr as SaRepr, RmppHeader};
pub use sl2vl::{Packet as Sl2VlPacket, Repr as Sl2VlRepr, Sl2VlModifier};
pub use sm_info::{Packet as SmInfoPacket, Repr as SmInfoRepr, SmState};
pub use smp::{DirectedRoute, Direction, Packet as SmpPacket, Repr as SmpRepr, Routing};
pub use switch_info::{Packet as SwitchInfoPacket, Repr as SwitchInfoRepr};
pub use vlarb::{Packet as VlArbPacket, Repr as VlArbRepr, VlArbBlock, VlArbEntry, VlArbModifier};

/// Why bytes could not be read as a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the format.
    #[error("truncated: need {need} bytes, got {got}")]
    Truncated {
        /// Bytes the format needs.
        need: usize,
        /// Bytes the buffer has.
        got: usize,
    },
    /// A field holds a value this format does not allow (a reserved
    /// encoding, a count out of range, a wrong class or version).
    #[error("bad value {value:#x} for {field}")]
    BadValue {
        /// IBA name of the field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
}

/// Result of reading a format.
pub type Result<T> = core::result::Result<T, Error>;
