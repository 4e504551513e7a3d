//! General MADs on the embedded fabric: every port has a GSI (QP1) that
//! sends and receives LID-routed MADs through the LFTs the SM programmed,
//! and a PMA whose counters move with the traffic the fabric carries.
//!
//! * [`SimFabric::send_gmp`] sends a MAD from any port to a DLID: a host
//!   asking the SA, the SA answering or sending a Report, the
//!   performance manager reading a PMA. Each hop counts a packet and its
//!   data on the port it leaves by and the port it enters by.
//! * At the destination a request goes to the agent registered for its
//!   class there ([`SimFabric::listen_gmp`]: the SM's SA), else a PMA
//!   request is answered by the port's PMA, else it waits in the port's
//!   inbox with the answers ([`SimFabric::take_gmp`]).
//! * The PMA answers Get and Set (clear) of PortCounters and
//!   PortCountersExtended; [`SimFabric::add_port_errors`] injects errors
//!   and [`SimFabric::send_data`] carries data traffic.
//! * Every switch and CA port answers congestion control (class 0x21) as
//!   the `cc` module says.
//!
//! Not modelled: QP numbers other than 1 (every GMP goes to QP1), Q_Keys,
//! P_Key checks, redirection, RMPP segmentation (a long MAD arrives whole,
//! as a kernel's RMPP reassembles it), GMP loss other than by routing.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::SyncSender;

use sm_mad::mad::{method, status, Header, HEADER_LEN, MAD_LEN};
use sm_mad::perf::{self, attr, Counters, CountersRepr, Extended, ExtendedRepr, COUNTERS, COUNTER_NAMES, DATA_OFFSET};
use sm_transport::gmp::IncomingMad;

use super::route::Hop;
use super::{DropReason, SimError, SimFabric};

/// MADs one port's inbox holds before it drops new ones, as a receive
/// queue that nobody reads fills up.
pub const INBOX_LEN: usize = 4096;

/// What a port's PMA counts (IBA 16.1.3): the PortCounters values in
/// [`COUNTER_NAMES`] order, kept to 64 bits and cut to each field's
/// width (stopping at all ones) when read, and the PortCountersExtended
/// values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PmaCounters {
    /// PortCounters, in [`COUNTER_NAMES`] order.
    pub counters: [u64; COUNTERS],
    /// PortCountersExtended, in [`perf::EXTENDED_NAMES`] order.
    pub extended: [u64; 8],
}

/// Indices into [`PmaCounters::counters`].
mod idx {
    pub const XMIT_DATA: usize = 13;
    pub const RCV_DATA: usize = 14;
    pub const XMIT_PKTS: usize = 15;
    pub const RCV_PKTS: usize = 16;
    pub const XMIT_WAIT: usize = 17;
    pub const QP1_DROPPED: usize = 11;
    pub const VL15_DROPPED: usize = 12;
}

impl PmaCounters {
    /// `packets` packets of `bytes` each sent (`xmit`) or received by
    /// this port.
    fn count(&mut self, packets: u64, bytes: u64, xmit: bool) {
        // Data counters count 32-bit words (IBA 16.1.3.5).
        let words = packets.saturating_mul(bytes.div_ceil(4));
        let (data, pkts, ext_data, ext_pkts, ext_ucast) =
            if xmit { (idx::XMIT_DATA, idx::XMIT_PKTS, 0, 2, 4) } else { (idx::RCV_DATA, idx::RCV_PKTS, 1, 3, 5) };
        self.counters[data] = self.counters[data].saturating_add(words);
        self.counters[pkts] = self.counters[pkts].saturating_add(packets);
        self.extended[ext_data] = self.extended[ext_data].wrapping_add(words);
        self.extended[ext_pkts] = self.extended[ext_pkts].wrapping_add(packets);
        self.extended[ext_ucast] = self.extended[ext_ucast].wrapping_add(packets);
    }

    /// PortCounters as the PMA answers them: each value stopped at its
    /// field's all-ones.
    fn port_counters(&self, port_select: u8) -> CountersRepr {
        let mut values = self.counters;
        for (v, (_, width)) in values.iter_mut().zip(COUNTER_NAMES) {
            *v = (*v).min((1u64 << width) - 1);
        }
        CountersRepr { port_select, counter_select: 0, values }
    }

    /// Clears what PortCounters' CounterSelect (bits 0-10 the error
    /// counters in order, 11 VL15Dropped, 12-15 the data and packet
    /// counters) and CounterSelect2 (bit 0 PortXmitWait, bit 1
    /// QP1Dropped) name.
    fn clear(&mut self, select: u16, select2: u8) {
        for bit in 0..11 {
            if select & (1 << bit) != 0 {
                self.counters[bit] = 0;
            }
        }
        let named = [
            (select & (1 << 11) != 0, idx::VL15_DROPPED),
            (select & (1 << 12) != 0, idx::XMIT_DATA),
            (select & (1 << 13) != 0, idx::RCV_DATA),
            (select & (1 << 14) != 0, idx::XMIT_PKTS),
            (select & (1 << 15) != 0, idx::RCV_PKTS),
            (select2 & 1 != 0, idx::XMIT_WAIT),
            (select2 & 2 != 0, idx::QP1_DROPPED),
        ];
        for (on, i) in named {
            if on {
                self.counters[i] = 0;
            }
        }
    }

    /// Clears what PortCountersExtended's CounterSelect names (bit n:
    /// value n).
    fn clear_extended(&mut self, select: u16) {
        for (bit, v) in self.extended.iter_mut().enumerate() {
            if select & (1 << bit) != 0 {
                *v = 0;
            }
        }
    }
}

/// The GSI state of the whole fabric.
#[derive(Debug, Default)]
pub(super) struct Gsi {
    /// What arrived at each port's QP1 and nobody has taken: answers,
    /// Reports, requests no agent claims.
    inboxes: HashMap<(usize, u8), VecDeque<(u16, Vec<u8>)>>,
    /// Agents that take the requests of one class at a port.
    listeners: HashMap<(usize, u8, u8), SyncSender<IncomingMad>>,
    /// Congestion control agents by (node, port) (a switch's on port 0),
    /// made when the first CC MAD reaches them.
    pub(super) cc: HashMap<(usize, u8), super::cc::CcAgentState>,
}

/// What the fabric counts of general MADs (see [`super::SimCounters`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GmpCounters {
    /// MADs handed to [`SimFabric::send_gmp`].
    pub sent: u64,
    /// Of those, delivered to an agent or an inbox.
    pub delivered: u64,
    /// Requests the PMAs answered.
    pub pma_answers: u64,
    /// Requests the congestion control agents answered.
    pub cc_answers: u64,
    /// Lost on the way (no LID, no route, a full inbox or agent queue).
    pub dropped: u64,
}

impl SimFabric {
    /// Sends a general MAD from `from` (node, port) to `dlid`, QP1,
    /// LID-routed through the LFTs. A PMA request is answered at once
    /// (the answer waits in `from`'s inbox); anything else is delivered
    /// as the module documentation says. `Err` says why it was lost (a
    /// real fabric would not say).
    pub fn send_gmp(&mut self, from: (usize, u8), dlid: u16, mad: &[u8]) -> Result<(), DropReason> {
        self.counters.gmps.sent += 1;
        let delivered = self.carry_gmp(from, dlid, mad);
        match delivered {
            Ok(()) => self.counters.gmps.delivered += 1,
            Err(_) => self.counters.gmps.dropped += 1,
        }
        delivered
    }

    fn carry_gmp(&mut self, from: (usize, u8), dlid: u16, mad: &[u8]) -> Result<(), DropReason> {
        if mad.len() < HEADER_LEN {
            return Err(DropReason::Malformed);
        }
        let header = Header::new_unchecked(mad);
        let (class, is_response) = (header.mgmt_class(), header.is_response());
        if class == sm_mad::mad::class::SUBN_LID || class == sm_mad::mad::class::SUBN_DIRECTED {
            // SMPs go on QP0 through the SMAs (`handle_to`).
            return Err(DropReason::Malformed);
        }
        if !self.nodes.get(from.0).is_some_and(|n| n.present && n.port(from.1).is_some()) {
            return Err(DropReason::BadPort);
        }
        let slid = self.responder_lid(from.0, from.1);
        if slid == 0 {
            return Err(DropReason::NoLid);
        }
        let at = self.carry(from, dlid, 1, mad.len())?;
        if !is_response {
            if let Some(queue) = self.gsi.listeners.get(&(at.0, at.1, class)) {
                let request = IncomingMad { slid, sqpn: 1, mad: mad.to_vec() };
                return queue.try_send(request).map_err(|_| DropReason::QueueFull);
            }
            if class == perf::MGMT_CLASS {
                let answer = self.pma(at, mad);
                self.counters.gmps.pma_answers += 1;
                // The answer goes back from the PMA's port to the SLID.
                let back = self.carry(at, slid, 1, answer.len())?;
                let answer_slid = self.responder_lid(at.0, at.1);
                return self.queue(back, answer_slid, answer);
            }
            if class == sm_mad::cc::MGMT_CLASS {
                // A wrong CC_Key: discarded, the requester times out.
                let Some(answer) = self.cc_agent(at, mad) else { return Ok(()) };
                self.counters.gmps.cc_answers += 1;
                let back = self.carry(at, slid, 1, answer.len())?;
                let answer_slid = self.responder_lid(at.0, at.1);
                return self.queue(back, answer_slid, answer);
            }
        }
        self.queue(at, slid, mad.to_vec())
    }

    /// LID-routes `packets` packets of `bytes` each from `from` to `dlid`,
    /// counting every hop on the ports' PMAs; where they arrived.
    fn carry(&mut self, from: (usize, u8), dlid: u16, packets: u64, bytes: usize) -> Result<(usize, u8), DropReason> {
        let mut hops: Vec<Hop> = Vec::new();
        let at = self.route_lid_via(from, dlid, Some(&mut hops))?;
        for ((out_node, out_port), (in_node, in_port)) in hops {
            if let Some(p) = self.nodes[out_node].port_mut(out_port) {
                p.pma.count(packets, bytes as u64, true);
            }
            if let Some(p) = self.nodes[in_node].port_mut(in_port) {
                p.pma.count(packets, bytes as u64, false);
            }
        }
        Ok(at)
    }

    fn queue(&mut self, at: (usize, u8), slid: u16, mad: Vec<u8>) -> Result<(), DropReason> {
        let inbox = self.gsi.inboxes.entry(at).or_default();
        if inbox.len() >= INBOX_LEN {
            if let Some(p) = self.nodes[at.0].port_mut(at.1) {
                p.pma.counters[idx::QP1_DROPPED] += 1;
            }
            return Err(DropReason::QueueFull);
        }
        inbox.push_back((slid, mad));
        Ok(())
    }

    /// The oldest MAD waiting at `at`'s QP1, with the LID it came from.
    pub fn take_gmp(&mut self, at: (usize, u8)) -> Option<(u16, Vec<u8>)> {
        self.gsi.inboxes.get_mut(&at)?.pop_front()
    }

    /// The oldest MAD of management class `class` waiting at `at`'s QP1,
    /// as a GSI agent registered for that class alone gets it: MADs of
    /// other classes stay for their own agents.
    pub fn take_gmp_of(&mut self, at: (usize, u8), class: u8) -> Option<(u16, Vec<u8>)> {
        let inbox = self.gsi.inboxes.get_mut(&at)?;
        let i = inbox.iter().position(|(_, m)| m.get(1) == Some(&class))?;
        inbox.remove(i)
    }

    /// Hands every request of management class `class` that arrives at
    /// `at` to `queue` (a full queue loses it), as an agent registered for
    /// the class does; replaces an earlier listener.
    pub fn listen_gmp(&mut self, at: (usize, u8), class: u8, queue: SyncSender<IncomingMad>) {
        self.gsi.listeners.insert((at.0, at.1, class), queue);
    }

    /// Carries `packets` data packets of `bytes` each from `from` to
    /// `dlid` through the LFTs (the PMAs on the way count them); the port
    /// they arrived at.
    pub fn send_data(&mut self, from: (usize, u8), dlid: u16, packets: u64, bytes: usize) -> Result<(usize, u8), DropReason> {
        self.carry(from, dlid, packets, bytes)
    }

    /// Adds `n` to the PortCounters error counter called `name` (as
    /// perfquery prints it, e.g. `SymbolErrorCounter`) of `port` of
    /// `node`: a cable that takes errors.
    pub fn add_port_errors(&mut self, node: usize, port: u8, name: &str, n: u64) -> Result<(), SimError> {
        let Some(i) = COUNTER_NAMES.iter().position(|(c, _)| *c == name) else {
            return Err(SimError::BadOption(format!("no PortCounters counter is called {name}")));
        };
        let p = self
            .nodes
            .get_mut(node)
            .ok_or(SimError::NoSuchNode(node))?
            .port_mut(port)
            .ok_or(SimError::NoSuchPort { node, port })?;
        p.pma.counters[i] = p.pma.counters[i].saturating_add(n);
        Ok(())
    }

    /// What `port` of `node`'s PMA holds.
    pub fn port_counters(&self, node: usize, port: u8) -> Option<PmaCounters> {
        self.nodes.get(node)?.port(port).map(|p| p.pma)
    }

    /// The PMA of the port at `at` answers `request` (whole MAD).
    fn pma(&mut self, at: (usize, u8), request: &[u8]) -> Vec<u8> {
        let mut answer = vec![0u8; MAD_LEN];
        let n = request.len().min(MAD_LEN);
        answer[..n].copy_from_slice(&request[..n]);
        let header = Header::new_unchecked(request);
        let (m, attribute) = (header.method(), header.attribute_id());
        let select = answer.get(DATA_OFFSET + 1).copied().unwrap_or(0);
        let node = &mut self.nodes[at.0];
        // A switch's PMA speaks for any of its ports; a CA's for its own.
        let valid = if node.is_switch() { select <= node.num_ports } else { select == at.1 };
        let status = match (m, attribute) {
            (method::GET | method::SET, attr::PORT_COUNTERS | attr::PORT_COUNTERS_EXTENDED) if !valid => {
                status::INVALID_ATTR_VALUE
            }
            (method::GET | method::SET, attr::PORT_COUNTERS) => {
                let pma = &mut node.ports[usize::from(select)].pma;
                if m == method::SET {
                    let data = &answer[DATA_OFFSET..];
                    pma.clear(u16::from_be_bytes([data[2], data[3]]), data[18]);
                }
                let repr = pma.port_counters(select);
                repr.emit(&mut Counters::new_unchecked(&mut answer[DATA_OFFSET..]));
                0
            }
            (method::GET | method::SET, attr::PORT_COUNTERS_EXTENDED) => {
                let pma = &mut node.ports[usize::from(select)].pma;
                if m == method::SET {
                    let data = &answer[DATA_OFFSET..];
                    pma.clear_extended(u16::from_be_bytes([data[2], data[3]]));
                }
                ExtendedRepr { port_select: select, values: pma.extended }
                    .emit(&mut Extended::new_unchecked(&mut answer[DATA_OFFSET..]));
                0
            }
            (method::GET, attr::CLASS_PORT_INFO) => {
                let data = &mut answer[DATA_OFFSET..];
                data.fill(0);
                // BaseVersion, ClassVersion; CapabilityMask: PortCountersExtended
                // (bit 9) supported.
                data[0] = 1;
                data[1] = perf::CLASS_VERSION;
                data[2..4].copy_from_slice(&(1u16 << 9).to_be_bytes());
                0
            }
            (method::GET | method::SET, _) => status::UNSUPPORTED_METHOD_ATTR,
            _ => status::UNSUPPORTED_METHOD,
        };
        let mut h = Header::new_unchecked(&mut answer[..]);
        h.set_method(method::GET_RESP);
        h.set_status(status);
        answer
    }
}
