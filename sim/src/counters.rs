//! What the simulated fabric counts: the SM's MAD budget is a first-class
//! figure (design.md, "Performance principles"), so every SMP the SM sends
//! is accounted for, and every one that gets no answer says why.

use std::collections::BTreeMap;

/// Why an SMP got no answer. A real fabric never says; the simulator does,
/// so that a test can tell a wrong LFT from a wrong directed path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Not a 256-byte SMP of class 0x01/0x81, version 1, or a hop count or
    /// hop pointer no directed route can have (IBA C14-6, C14-9:5).
    Malformed,
    /// A response or other non-request method sent towards the fabric.
    NotARequest,
    /// The hop pointer does not fit any step of IBA 14.2.2 at this node.
    BadHopPointer,
    /// A directed route asked a CA to forward (only switches forward).
    NotASwitch,
    /// A directed route or LFT named a port the node does not have (or
    /// port 0 as an exit), or a CA was asked to send by another port.
    BadPort,
    /// The exit port has no cable, its link is down or disabled, or the
    /// node behind it is gone.
    NoLink,
    /// A LID-routed packet met a port that is not Active.
    PortNotActive,
    /// A switch had no LFT entry for the DLID (0xFF, beyond LinearFDBTop,
    /// a multicast LID, or LFT port 0 for a LID not its own).
    NoRoute,
    /// A LID-routed packet reached a CA port that does not own its DLID.
    LidNotHere,
    /// A LID-routed packet went round the fabric without arriving.
    HopLimit,
    /// The SMP's M_Key did not match a protected port's M_Key.
    MKey,
    /// A response or trap arrived at a node or port where no SM listens.
    NotForSm,
    /// A LID-routed leg needed a LID that is still 0 (the SM's own, a
    /// switch's, or the trap's SM LID).
    NoLid,
    /// Lost on purpose by [`super::SimFabric::set_answer_loss`].
    Injected,
    /// A general MAD arrived where the receive queue (an agent's, or the
    /// port's inbox) was full.
    QueueFull,
}

/// Requests one attribute received at an SMA, by method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttributeCounters {
    /// SubnGet requests.
    pub get: u64,
    /// SubnSet requests.
    pub set: u64,
    /// Any other method.
    pub other: u64,
    /// Of those, answered with a non-zero status.
    pub errors: u64,
}

/// Running totals since the fabric was built or the counters were reset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimCounters {
    /// MADs handed to the fabric by the SM.
    pub sent: u64,
    /// Requests that reached an SMA and were processed there.
    pub handled: u64,
    /// Responses that made it back to the SM.
    pub answered: u64,
    /// Of those, with a non-zero status.
    pub error_status: u64,
    /// MADs (requests or their responses) that got the SM no answer.
    pub dropped: u64,
    /// `dropped`, by reason.
    pub drops: BTreeMap<DropReason, u64>,
    /// TrapRepress MADs the SM sent; the fabric takes them without answer.
    pub trap_represses: u64,
    /// Processed requests by AttributeID.
    pub by_attribute: BTreeMap<u16, AttributeCounters>,
    /// Trap 128s the switches generated.
    pub traps_generated: u64,
    /// Of those, delivered to the SM (see [`super::SimFabric::take_traps`]).
    pub traps_delivered: u64,
    /// PortInfo Sets with ClientReregister that a CA port took: each tells
    /// the port's clients to register with the SA again.
    pub client_reregistrations: u64,
    /// Of those, lost on the way (no LID, no route).
    pub traps_lost: u64,
    /// General MADs (SA, PMA) the ports sent.
    pub gmps: super::gsi::GmpCounters,
}

impl SimCounters {
    pub(super) fn drop(&mut self, reason: DropReason) {
        self.dropped += 1;
        *self.drops.entry(reason).or_default() += 1;
    }

    pub(super) fn attribute(&mut self, attribute_id: u16) -> &mut AttributeCounters {
        self.by_attribute.entry(attribute_id).or_default()
    }

    /// Drops for one reason.
    pub fn drops_for(&self, reason: DropReason) -> u64 {
        self.drops.get(&reason).copied().unwrap_or(0)
    }
}
