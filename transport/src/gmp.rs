//! General MADs (GMPs): the SA's queries and answers, the PMA's counters,
//! SA Reports — everything LID-routed to QP1 rather than sent as an SMP.
//!
//! Two roles, two traits, each implemented by the kernel's umad device
//! (`sm-umad`) and by the embedded fabric (`sm-sim`) as peers:
//!
//! * [`GmpAgent`]: one GSI agent of one management class on a port, that
//!   sends requests and reads what comes back (the performance manager
//!   reading PMAs, a host asking the SA, a tool);
//! * [`GmpSender`]: the sending end of the SM's own port, shared by the
//!   threads that answer [`IncomingMad`]s (the SA, the SMInfo responder)
//!   and send SA Reports.

use std::time::{Duration, Instant};

use sm_mad::mad::{Header, HEADER_LEN, MAD_LEN};

use crate::port::TransportError;

/// A MAD that arrived unasked: a query from an SA client, or an SMP
/// (SubnGet/SubnSet) from another SM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingMad {
    /// LRH SLID of the requester.
    pub slid: u16,
    /// The requester's QP (1 for GSI clients, 0 for SMPs).
    pub sqpn: u32,
    /// The MAD (256 bytes, or more for an RMPP transfer).
    pub mad: Vec<u8>,
}

/// The sending end of the SM's port, for the threads that answer requests
/// and send Reports. Shared between threads.
pub trait GmpSender: Send + Sync + 'static {
    /// Sends `mad`, the answer to `to`, back to its requester.
    fn reply(&self, to: &IncomingMad, mad: &[u8]) -> Result<(), TransportError>;
    /// Sends an unsolicited GSI MAD (an SA Report) to `dlid`/`dqpn`.
    /// `timeout_ms` > 0 keeps it waiting that long for an answer.
    fn send_gsi(&self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError>;
}

/// One GSI agent of one management class on a port.
pub trait GmpAgent: Send {
    /// Sends one MAD to `dlid`/`dqpn`; `timeout_ms` 0 waits for no answer,
    /// otherwise the answer is expected within that time.
    fn send(&mut self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError>;

    /// The next MAD that arrives before `deadline` (an answer, or an
    /// unsolicited request such as a Report), with the sender's LID;
    /// `None` on timeout.
    fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, TransportError>;

    /// Sends `mad` to `dlid` QP1 and waits up to `timeout` for the answer
    /// with the same transaction ID (its lower 32 bits: a kernel owns the
    /// upper half); what else arrives meanwhile is dropped.
    fn request(&mut self, dlid: u16, mad: &[u8], timeout: Duration) -> Result<Option<Vec<u8>>, TransportError> {
        if mad.len() < HEADER_LEN || mad.len() > MAD_LEN {
            return Err(TransportError::Unsendable(format!("MAD of {} bytes", mad.len())));
        }
        self.send(dlid, 1, mad, u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX).max(1))?;
        let tid = Header::new_unchecked(mad).transaction_id();
        let deadline = Instant::now() + timeout + Duration::from_millis(50);
        while let Some((_, answer)) = self.receive(deadline)? {
            let Ok(header) = Header::new_checked(&answer[..]) else { continue };
            if header.is_response() && header.transaction_id() as u32 == tid as u32 {
                let mut answer = answer;
                Header::new_unchecked(&mut answer[..]).set_transaction_id(tid);
                return Ok(Some(answer));
            }
        }
        Ok(None)
    }
}
