//! Subnet management packets (IBA 14.2.1): LID-routed (class 0x01) and
//! directed-route (class 0x81).
//!
//! ```text
//! offset   0  common MAD header; for directed route:
//!             Status = D bit (15) | status (14..0),
//!             ClassSpecific = HopPointer (byte 6) | HopCount (byte 7)
//!         24  M_Key (64)
//!         32  DrSLID (16)   DrDLID (16)      reserved in LID-routed SMPs
//!         36  reserved (28 bytes)
//!         64  SMP data (64 bytes): the attribute
//!        128  InitialPath (64 bytes)         reserved in LID-routed SMPs
//!        192  ReturnPath (64 bytes)          reserved in LID-routed SMPs
//! ```
//!
//! Path entry `i` is the port a directed-route SMP leaves by at hop `i`
//! (InitialPath) or arrived by (ReturnPath); entry 0 is unused, so a path
//! has at most [`MAX_HOPS`] hops.

use crate::field::{bad, fields, packet};
use crate::mad::{self, class, method};
use crate::Result;

/// An SMP is always a whole MAD.
pub const SMP_LEN: usize = mad::MAD_LEN;
/// Offset of the SMP data (the attribute).
pub const DATA_OFFSET: usize = 64;
/// Length of the SMP data.
pub const DATA_LEN: usize = 64;
/// Offset of InitialPath.
pub const INITIAL_PATH_OFFSET: usize = 128;
/// Offset of ReturnPath.
pub const RETURN_PATH_OFFSET: usize = 192;
/// Length of each path field, entry 0 included.
pub const PATH_LEN: usize = 64;
/// Hop counts above this do not fit the path fields (IBA C14-6).
pub const MAX_HOPS: u8 = 63;
/// DrSLID/DrDLID value meaning "directed route on this side".
pub const PERMISSIVE_LID: u16 = 0xFFFF;
/// Bit 15 of Status in a directed-route SMP: set on the way back.
pub const DIRECTION_BIT: u16 = 0x8000;

packet!(
    /// A view of an SMP of either routing.
    Packet,
    SMP_LEN
);

mad::header_fields!(Packet);

fields! { Packet;
    /// The D bit of a directed-route SMP: set on the way back (responses
    /// and traps returning along the reverse path).
    direction_bit, set_direction_bit: bool @ 4 => bit 7;
    /// HopPointer of a directed-route SMP.
    hop_pointer, set_hop_pointer: u8 @ 6;
    /// HopCount of a directed-route SMP: the length of the DR part of the
    /// path.
    hop_count, set_hop_count: u8 @ 7;
    /// M_Key.
    m_key, set_m_key: u64 @ 24;
    /// DrSLID: LID-routed part before the directed part, or permissive.
    dr_slid, set_dr_slid: u16 @ 32;
    /// DrDLID: LID-routed part after the directed part, or permissive.
    dr_dlid, set_dr_dlid: u16 @ 34;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Whether this is a directed-route SMP.
    pub fn is_directed(&self) -> bool {
        self.mgmt_class() == class::SUBN_DIRECTED
    }

    /// Whether the R bit marks this as a response.
    pub fn is_response(&self) -> bool {
        self.method() & method::RESPONSE != 0
    }

    /// Which way a directed-route SMP travels (meaningless when LID-routed).
    pub fn direction(&self) -> Direction {
        if self.direction_bit() {
            Direction::Inbound
        } else {
            Direction::Outbound
        }
    }

    /// The status proper: without the D bit when directed-route.
    pub fn smp_status(&self) -> u16 {
        if self.is_directed() {
            self.status() & !DIRECTION_BIT
        } else {
            self.status()
        }
    }

    /// The 64 bytes of SMP data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[DATA_OFFSET..DATA_OFFSET + DATA_LEN]
    }

    /// InitialPath, all 64 entries (entry 0 unused).
    pub fn initial_path(&self) -> &[u8] {
        &self.buffer.as_ref()[INITIAL_PATH_OFFSET..INITIAL_PATH_OFFSET + PATH_LEN]
    }

    /// ReturnPath, all 64 entries (entry 0 unused).
    pub fn return_path(&self) -> &[u8] {
        &self.buffer.as_ref()[RETURN_PATH_OFFSET..RETURN_PATH_OFFSET + PATH_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The 64 bytes of SMP data, writable: lay an attribute view over it.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[DATA_OFFSET..DATA_OFFSET + DATA_LEN]
    }

    /// InitialPath, writable.
    pub fn initial_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[INITIAL_PATH_OFFSET..INITIAL_PATH_OFFSET + PATH_LEN]
    }

    /// ReturnPath, writable.
    pub fn return_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[RETURN_PATH_OFFSET..RETURN_PATH_OFFSET + PATH_LEN]
    }

    /// Sets the direction of a directed-route SMP.
    pub fn set_direction(&mut self, direction: Direction) {
        self.set_direction_bit(direction == Direction::Inbound);
    }
}

/// The D bit of a directed-route SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// D = 0: from the requester towards the end of the path.
    #[default]
    Outbound,
    /// D = 1: back along the reverse path (responses).
    Inbound,
}

/// The directed-route part of an SMP.
///
/// Only path entries `1..=hop_count` carry meaning; [`Repr::parse`] zeroes
/// the others (devices leave junk there) so that equal routes compare
/// equal, and [`Repr::emit`] writes them as they are here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirectedRoute {
    /// The D bit.
    pub direction: Direction,
    /// HopPointer: which hop the SMP is at. The requester sends 0; a
    /// response that made it back to the requester has 0 again.
    pub hop_pointer: u8,
    /// HopCount: number of directed hops, at most [`MAX_HOPS`].
    pub hop_count: u8,
    /// DrSLID ([`PERMISSIVE_LID`] when the path starts at the requester).
    pub dr_slid: u16,
    /// DrDLID ([`PERMISSIVE_LID`] when the path ends at the target).
    pub dr_dlid: u16,
    /// InitialPath: exit port at each hop.
    pub initial_path: [u8; PATH_LEN],
    /// ReturnPath: entry port at each hop, filled in on the way out.
    pub return_path: [u8; PATH_LEN],
}

impl DirectedRoute {
    /// A purely directed route from the requester through `ports` (the
    /// exit port at each hop; empty for the requester's own node), as a
    /// requester sends it: outbound, hop pointer 0, both LIDs permissive.
    pub fn new(ports: &[u8]) -> Result<Self> {
        if ports.len() > usize::from(MAX_HOPS) {
            return Err(bad("HopCount", ports.len() as u64));
        }
        let mut initial_path = [0; PATH_LEN];
        initial_path[1..=ports.len()].copy_from_slice(ports);
        Ok(Self {
            direction: Direction::Outbound,
            hop_pointer: 0,
            hop_count: ports.len() as u8,
            dr_slid: PERMISSIVE_LID,
            dr_dlid: PERMISSIVE_LID,
            initial_path,
            return_path: [0; PATH_LEN],
        })
    }

    /// Exit ports of hops `1..=hop_count`.
    pub fn initial_ports(&self) -> &[u8] {
        &self.initial_path[1..=usize::from(self.hop_count.min(MAX_HOPS))]
    }

    /// Entry ports of hops `1..=hop_count`, as far as they were filled in.
    pub fn return_ports(&self) -> &[u8] {
        &self.return_path[1..=usize::from(self.hop_count.min(MAX_HOPS))]
    }
}

/// How an SMP is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Routing {
    /// Class 0x01: by the LRH's DLID through the switches' LFTs.
    Lid,
    /// Class 0x81: by port numbers in the SMP itself.
    Directed(DirectedRoute),
}

/// An SMP as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// R/Method byte (see [`mad::method`]).
    pub method: u8,
    /// Status: 16 bits when LID-routed, the low 15 when directed (the D
    /// bit lives in [`DirectedRoute::direction`]).
    pub status: u16,
    /// TransactionID.
    pub transaction_id: u64,
    /// AttributeID (see [`mad::attr`]).
    pub attribute_id: u16,
    /// AttributeModifier.
    pub attribute_modifier: u32,
    /// M_Key.
    pub m_key: u64,
    /// LID-routed or directed-route, with the route.
    pub routing: Routing,
    /// SMP data: the attribute.
    pub data: [u8; DATA_LEN],
}

impl Repr {
    /// Reads an SMP. Fails on a short buffer, a class other than 0x01 or
    /// 0x81, a version other than 1, or a hop count or hop pointer that no
    /// directed route can have.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Self> {
        packet.check_len()?;
        if packet.base_version() != mad::BASE_VERSION {
            return Err(bad("BaseVersion", packet.base_version()));
        }
        if packet.class_version() != mad::class_version::SUBN {
            return Err(bad("ClassVersion", packet.class_version()));
        }
        let routing = match packet.mgmt_class() {
            class::SUBN_LID => Routing::Lid,
            class::SUBN_DIRECTED => {
                let hop_count = packet.hop_count();
                if hop_count > MAX_HOPS {
                    return Err(bad("HopCount", hop_count));
                }
                // C14-9:5/C14-13:5: a pointer past the end is discarded.
                if packet.hop_pointer() > hop_count + 1 {
                    return Err(bad("HopPointer", packet.hop_pointer()));
                }
                let hops = 1..=usize::from(hop_count);
                let mut initial_path = [0; PATH_LEN];
                initial_path[hops.clone()].copy_from_slice(&packet.initial_path()[hops.clone()]);
                let mut return_path = [0; PATH_LEN];
                return_path[hops.clone()].copy_from_slice(&packet.return_path()[hops]);
                Routing::Directed(DirectedRoute {
                    direction: packet.direction(),
                    hop_pointer: packet.hop_pointer(),
                    hop_count,
                    dr_slid: packet.dr_slid(),
                    dr_dlid: packet.dr_dlid(),
                    initial_path,
                    return_path,
                })
            }
            other => return Err(bad("MgmtClass", other)),
        };
        let mut data = [0; DATA_LEN];
        data.copy_from_slice(packet.data());
        Ok(Self {
            method: packet.method(),
            status: packet.smp_status(),
            transaction_id: packet.transaction_id(),
            attribute_id: packet.attribute_id(),
            attribute_modifier: packet.attribute_modifier(),
            m_key: packet.m_key(),
            routing,
            data,
        })
    }

    /// Bytes [`Self::emit`] writes: a whole MAD.
    pub const fn buffer_len(&self) -> usize {
        SMP_LEN
    }

    /// Writes all 256 bytes, reserved ones zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.as_bytes_mut()[..SMP_LEN].fill(0);
        packet.set_base_version(mad::BASE_VERSION);
        packet.set_mgmt_class(self.mgmt_class());
        packet.set_class_version(mad::class_version::SUBN);
        packet.set_method(self.method);
        packet.set_transaction_id(self.transaction_id);
        packet.set_attribute_id(self.attribute_id);
        packet.set_attribute_modifier(self.attribute_modifier);
        packet.set_m_key(self.m_key);
        match &self.routing {
            Routing::Lid => packet.set_status(self.status),
            Routing::Directed(dr) => {
                packet.set_status(self.status & !DIRECTION_BIT);
                packet.set_direction(dr.direction);
                packet.set_hop_pointer(dr.hop_pointer);
                packet.set_hop_count(dr.hop_count);
                packet.set_dr_slid(dr.dr_slid);
                packet.set_dr_dlid(dr.dr_dlid);
                packet.initial_path_mut().copy_from_slice(&dr.initial_path);
                packet.return_path_mut().copy_from_slice(&dr.return_path);
            }
        }
        packet.data_mut().copy_from_slice(&self.data);
    }

    /// MgmtClass implied by the routing.
    pub const fn mgmt_class(&self) -> u8 {
        match self.routing {
            Routing::Lid => class::SUBN_LID,
            Routing::Directed(_) => class::SUBN_DIRECTED,
        }
    }

    /// Whether the R bit marks this as a response.
    pub const fn is_response(&self) -> bool {
        self.method & method::RESPONSE != 0
    }

    /// The directed route, if any.
    pub const fn directed(&self) -> Option<&DirectedRoute> {
        match &self.routing {
            Routing::Lid => None,
            Routing::Directed(dr) => Some(dr),
        }
    }

    /// A SubnGet along the directed path `ports` (exit port per hop; empty
    /// for the local node).
    pub fn directed_get(
        transaction_id: u64,
        attribute_id: u16,
        attribute_modifier: u32,
        m_key: u64,
        ports: &[u8],
    ) -> Result<Self> {
        Self::directed_set(
            transaction_id,
            attribute_id,
            attribute_modifier,
            m_key,
            ports,
            [0; DATA_LEN],
        )
        .map(|repr| Self {
            method: method::GET,
            ..repr
        })
    }

    /// A SubnSet of `data` along the directed path `ports`.
    pub fn directed_set(
        transaction_id: u64,
        attribute_id: u16,
        attribute_modifier: u32,
        m_key: u64,
        ports: &[u8],
        data: [u8; DATA_LEN],
    ) -> Result<Self> {
        Ok(Self {
            method: method::SET,
            status: 0,
            transaction_id,
            attribute_id,
            attribute_modifier,
            m_key,
            routing: Routing::Directed(DirectedRoute::new(ports)?),
            data,
        })
    }

    /// A LID-routed SubnGet (the destination LID goes in the LRH, which
    /// the transport writes).
    pub const fn lid_get(
        transaction_id: u64,
        attribute_id: u16,
        attribute_modifier: u32,
        m_key: u64,
    ) -> Self {
        Self {
            method: method::GET,
            status: 0,
            transaction_id,
            attribute_id,
            attribute_modifier,
            m_key,
            routing: Routing::Lid,
            data: [0; DATA_LEN],
        }
    }

    /// A LID-routed SubnSet of `data`.
    pub const fn lid_set(
        transaction_id: u64,
        attribute_id: u16,
        attribute_modifier: u32,
        m_key: u64,
        data: [u8; DATA_LEN],
    ) -> Self {
        Self {
            method: method::SET,
            status: 0,
            transaction_id,
            attribute_id,
            attribute_modifier,
            m_key,
            routing: Routing::Lid,
            data,
        }
    }

    /// The SubnGetResp an SMA answers this request with: same TID,
    /// attribute and route, D bit set. The hop pointer is left as it is:
    /// moving it hop by hop is the forwarding logic's job (IBA 14.2.2).
    pub fn response(&self, status: u16, data: [u8; DATA_LEN]) -> Self {
        let routing = match self.routing {
            Routing::Lid => Routing::Lid,
            Routing::Directed(dr) => Routing::Directed(DirectedRoute {
                direction: Direction::Inbound,
                ..dr
            }),
        };
        Self {
            method: method::GET_RESP,
            status,
            routing,
            data,
            ..*self
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The whole underlying buffer, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn emit(repr: &Repr) -> [u8; SMP_LEN] {
        let mut buf = [0xa5u8; SMP_LEN];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf
    }

    #[test]
    fn directed_get_layout() {
        let repr =
            Repr::directed_get(0x11223344, mad::attr::NODE_INFO, 0, 0x55, &[3, 1, 7]).unwrap();
        let buf = emit(&repr);
        assert_eq!(&buf[..8], &[1, 0x81, 1, 1, 0, 0, 0, 3]);
        assert_eq!(&buf[16..18], &[0, 0x11]);
        assert_eq!(&buf[24..32], &[0, 0, 0, 0, 0, 0, 0, 0x55]);
        assert_eq!(&buf[32..36], &[0xff, 0xff, 0xff, 0xff]);
        assert!(buf[36..128].iter().all(|&b| b == 0));
        assert_eq!(&buf[128..133], &[0, 3, 1, 7, 0]);
        assert!(buf[192..].iter().all(|&b| b == 0));
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert!(packet.is_directed());
        assert_eq!(packet.direction(), Direction::Outbound);
        assert_eq!(Repr::parse(&packet), Ok(repr));
        assert_eq!(repr.directed().unwrap().initial_ports(), &[3, 1, 7]);
    }

    #[test]
    fn response_sets_d_bit_and_keeps_status_apart() {
        let req = Repr::directed_get(9, mad::attr::PORT_INFO, 2, 0, &[1]).unwrap();
        let resp = req.response(mad::status::INVALID_ATTR_VALUE, [7; DATA_LEN]);
        let buf = emit(&resp);
        assert_eq!(&buf[3..6], &[0x81, 0x80, 0x1c]);
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.direction(), Direction::Inbound);
        assert_eq!(packet.smp_status(), mad::status::INVALID_ATTR_VALUE);
        assert_eq!(Repr::parse(&packet), Ok(resp));
    }

    #[test]
    fn lid_routed_keeps_bit_15() {
        let mut repr = Repr::lid_set(1, mad::attr::SWITCH_INFO, 0, 0, [1; DATA_LEN]);
        repr.status = 0x8001;
        let buf = emit(&repr);
        assert_eq!(&buf[..6], &[1, 1, 1, 2, 0x80, 0x01]);
        assert!(buf[128..].iter().all(|&b| b == 0));
        assert_eq!(Repr::parse(&Packet::new_unchecked(&buf[..])), Ok(repr));
    }

    #[test]
    fn rejects_bad_smps() {
        assert_eq!(
            Packet::new_checked(&[0u8; 255][..]).unwrap_err(),
            Error::Truncated {
                need: 256,
                got: 255
            }
        );
        let good = emit(&Repr::directed_get(1, 0x11, 0, 0, &[1, 2]).unwrap());
        let parse = |buf: &[u8]| Repr::parse(&Packet::new_unchecked(buf));
        let mut buf = good;
        buf[1] = 0x03;
        assert_eq!(parse(&buf), Err(bad("MgmtClass", 3u8)));
        let mut buf = good;
        buf[2] = 2;
        assert_eq!(parse(&buf), Err(bad("ClassVersion", 2u8)));
        let mut buf = good;
        buf[7] = 64;
        assert_eq!(parse(&buf), Err(bad("HopCount", 64u8)));
        let mut buf = good;
        buf[6] = 4;
        assert_eq!(parse(&buf), Err(bad("HopPointer", 4u8)));
        buf[6] = 3;
        assert!(parse(&buf).is_ok());
        assert!(DirectedRoute::new(&[1; 64]).is_err());
        assert!(DirectedRoute::new(&[1; 63]).is_ok());
    }

    #[test]
    fn parse_ignores_path_bytes_beyond_hop_count() {
        let repr = Repr::directed_get(1, 0x11, 0, 0, &[4]).unwrap();
        let mut buf = emit(&repr);
        buf[INITIAL_PATH_OFFSET] = 9;
        buf[INITIAL_PATH_OFFSET + 2] = 9;
        buf[RETURN_PATH_OFFSET + 40] = 9;
        assert_eq!(Repr::parse(&Packet::new_unchecked(&buf[..])), Ok(repr));
    }
}
