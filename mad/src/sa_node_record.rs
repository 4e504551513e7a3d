//! NodeRecord (IBA 15.2.5.2): a node's NodeInfo and NodeDescription, keyed
//! by the LID of the port the record is for (every end port, and port 0
//! of each switch).
//!
//! ```text
//! offset   0  LID (16)  reserved (16)
//!          4  NodeInfo (40 bytes)
//!         44  NodeDescription (64 bytes)
//!        108  padding to 112 (AttributeOffset 14)
//! ```

use crate::field::{fields, nested, packet};
use crate::node_description::{self, Packet as DescPacket, Repr as DescRepr};
use crate::node_info::{self, Packet as InfoPacket, Repr as InfoRepr};
use crate::sa::{components, repr_io};

/// Length of the record's fields.
pub const LEN: usize = 108;
/// Length in a GetTable answer (AttributeOffset × 8).
pub const PADDED_LEN: usize = 112;
const INFO: usize = 4;
const DESC: usize = INFO + node_info::LEN;

components! {
    /// LID.
    c(0, 16) => LID,
    c(16, 16),  // reserved
    c(32, 8),   // BaseVersion
    c(40, 8),   // ClassVersion
    /// NodeType.
    c(48, 8) => NODE_TYPE,
    c(56, 8),   // NumPorts
    /// SystemImageGUID.
    c(64, 64) => SYSTEM_IMAGE_GUID,
    /// NodeGUID.
    c(128, 64) => NODE_GUID,
    /// PortGUID.
    c(192, 64) => PORT_GUID,
    c(256, 16), // PartitionCap
    c(272, 16), // DeviceID
    c(288, 32), // Revision
    c(320, 8),  // LocalPortNum
    c(328, 24), // VendorID
    /// NodeDescription.
    c(352, 512) => NODE_DESCRIPTION,
}

packet!(
    /// A view of NodeRecord.
    Packet,
    LEN
);

fields! { Packet;
    /// LID of the port the record describes.
    lid, set_lid: u16 @ 0;
}

nested! { Packet;
    /// The NodeInfo inside.
    node_info, node_info_mut: InfoPacket @ INFO..DESC;
    /// The NodeDescription inside.
    node_description, node_description_mut: DescPacket @ DESC..LEN;
}

/// NodeRecord as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// LID of the port described.
    pub lid: u16,
    /// NodeInfo as that port answers it (PortGUID, LocalPortNum are the port's).
    pub node_info: InfoRepr,
    /// NodeDescription.
    pub node_description: DescRepr,
}

repr_io! { Packet => Repr, LEN;
    /// Reads NodeRecord; fails on a short buffer or a reserved NodeType.
    parse;
    /// Writes NodeRecord, reserved bits zeroed.
    emit [2..4];
    lid: get lid, set_lid;
    node_info: nested InfoRepr, node_info, node_info_mut;
    node_description: nested DescRepr, node_description, node_description_mut;
}

// Keeps the module's constants honest: the description ends the record.
const _: () = assert!(DESC + node_description::LEN == LEN);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_info::NodeType;

    pub(crate) fn sample() -> Repr {
        Repr {
            lid: 0x0102,
            node_info: InfoRepr {
                base_version: 1,
                class_version: 1,
                node_type: NodeType::Ca,
                num_ports: 2,
                system_image_guid: 0x1000,
                node_guid: 0x2000,
                port_guid: 0x2001,
                partition_cap: 64,
                device_id: 0x1003,
                revision: 7,
                local_port_num: 1,
                vendor_id: 0x02c9,
            },
            node_description: DescRepr::from_text("host-1 HCA-1").unwrap(),
        }
    }

    #[test]
    fn layout_and_round_trip() {
        let buf = crate::sa::round_trip!(sample(), PADDED_LEN);
        assert_eq!(&buf[..6], &[1, 2, 0, 0, 1, 1]);
        assert_eq!(buf[6], 1, "NodeType");
        assert_eq!(&buf[44..50], b"host-1");
        assert_eq!(COMPONENTS[7].value(&buf), 0x2000);
        assert_eq!(COMPONENTS[13].value(&buf), 0x02c9);
        let mut other = buf;
        other[50] ^= 1;
        assert!(!COMPONENTS[14].same(&buf, &other));
        assert!(COMPONENTS[13].same(&buf, &other));
    }
}
