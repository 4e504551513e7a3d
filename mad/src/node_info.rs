//! NodeInfo (IBA 14.2.5.3): what a node is and how many ports it has.
//!
//! ```text
//! offset  0  BaseVersion  ClassVersion  NodeType  NumPorts
//!         4  SystemImageGUID (64)
//!        12  NodeGUID (64)
//!        20  PortGUID (64)
//!        28  PartitionCap (16)  DeviceID (16)
//!        32  Revision (32)
//!        36  LocalPortNum  VendorID (24)
//! ```

use crate::field::{bad, fields, packet};
use crate::Result;

/// Length of NodeInfo.
pub const LEN: usize = 40;

/// NodeType.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NodeType {
    /// Channel adapter.
    Ca = 1,
    /// Switch.
    Switch = 2,
    /// Router.
    Router = 3,
}

impl NodeType {
    /// The wire value; other values are reserved and refused.
    pub fn from_u8(value: u8) -> Result<Self> {
        match value {
            1 => Ok(Self::Ca),
            2 => Ok(Self::Switch),
            3 => Ok(Self::Router),
            other => Err(bad("NodeType", other)),
        }
    }
}

packet!(
    /// A view of NodeInfo.
    Packet,
    LEN
);

fields! { Packet;
    /// BaseVersion of MADs the node supports.
    base_version, set_base_version: u8 @ 0;
    /// ClassVersion of the SM class the node supports.
    class_version, set_class_version: u8 @ 1;
    /// NodeType, raw (see [`NodeType`]).
    node_type, set_node_type: u8 @ 2;
    /// NumPorts: physical ports (a switch's port 0 is not counted).
    num_ports, set_num_ports: u8 @ 3;
    /// SystemImageGUID.
    system_image_guid, set_system_image_guid: u64 @ 4;
    /// NodeGUID.
    node_guid, set_node_guid: u64 @ 12;
    /// PortGUID of the port the SMP came in by (port 0's on a switch).
    port_guid, set_port_guid: u64 @ 20;
    /// PartitionCap: P_Key table entries.
    partition_cap, set_partition_cap: u16 @ 28;
    /// DeviceID.
    device_id, set_device_id: u16 @ 30;
    /// Revision.
    revision, set_revision: u32 @ 32;
    /// LocalPortNum: the port the SMP came in by. Discovery relies on it
    /// to learn the far end of a link.
    local_port_num, set_local_port_num: u8 @ 36;
    /// VendorID (24 bits).
    vendor_id, set_vendor_id: u24 @ 37;
}

/// NodeInfo as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// BaseVersion.
    pub base_version: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// NodeType.
    pub node_type: NodeType,
    /// NumPorts.
    pub num_ports: u8,
    /// SystemImageGUID.
    pub system_image_guid: u64,
    /// NodeGUID.
    pub node_guid: u64,
    /// PortGUID.
    pub port_guid: u64,
    /// PartitionCap.
    pub partition_cap: u16,
    /// DeviceID.
    pub device_id: u16,
    /// Revision.
    pub revision: u32,
    /// LocalPortNum.
    pub local_port_num: u8,
    /// VendorID (24 bits).
    pub vendor_id: u32,
}

impl Repr {
    /// Reads NodeInfo; fails on a short buffer or a reserved NodeType.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        Ok(Self {
            base_version: packet.base_version(),
            class_version: packet.class_version(),
            node_type: NodeType::from_u8(packet.node_type())?,
            num_ports: packet.num_ports(),
            system_image_guid: packet.system_image_guid(),
            node_guid: packet.node_guid(),
            port_guid: packet.port_guid(),
            partition_cap: packet.partition_cap(),
            device_id: packet.device_id(),
            revision: packet.revision(),
            local_port_num: packet.local_port_num(),
            vendor_id: packet.vendor_id(),
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes NodeInfo (VendorID above 24 bits is dropped).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_base_version(self.base_version);
        packet.set_class_version(self.class_version);
        packet.set_node_type(self.node_type as u8);
        packet.set_num_ports(self.num_ports);
        packet.set_system_image_guid(self.system_image_guid);
        packet.set_node_guid(self.node_guid);
        packet.set_port_guid(self.port_guid);
        packet.set_partition_cap(self.partition_cap);
        packet.set_device_id(self.device_id);
        packet.set_revision(self.revision);
        packet.set_local_port_num(self.local_port_num);
        packet.set_vendor_id(self.vendor_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let repr = Repr {
            base_version: 1,
            class_version: 1,
            node_type: NodeType::Switch,
            num_ports: 36,
            system_image_guid: 0x0102030405060708,
            node_guid: 0x1112131415161718,
            port_guid: 0x2122232425262728,
            partition_cap: 0x3132,
            device_id: 0x3334,
            revision: 0x35363738,
            local_port_num: 0x39,
            vendor_id: 0x02c9ab,
        };
        let mut buf = [0u8; LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..4], &[1, 1, 2, 36]);
        assert_eq!(
            &buf[28..],
            &[0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 2, 0xc9, 0xab]
        );
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
            Ok(repr)
        );
        buf[2] = 4;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(bad("NodeType", 4u8))
        );
        assert!(Packet::new_checked(&buf[..39]).is_err());
    }
}
