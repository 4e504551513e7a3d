//! # SM election, standby and failover (SMInfo, IBA 14.4)
//!
//! Several SMs may run on one subnet; exactly one of them, the master,
//! sweeps and programs it. The others stand by, watch the master, and one
//! of them takes over when it goes away, keeping the LIDs the ports hold,
//! so hosts keep their addresses and the fabric is never re-addressed.
//!
//! ## Pieces
//!
//! * [`SmInfoState`]: what this SM says about itself in SMInfo (port GUID,
//!   priority, SM_Key, SMState, ActCount), shared behind an `Arc` between
//!   the SM loop and the responder, plus the controls other SMs sent.
//! * [`spawn_responder`] / [`answer`]: answers SubnGet(SMInfo) and
//!   SubnSet(SMInfo) from other SMs on its own thread, so that an SM busy
//!   sweeping still answers its standby's polls. A Set carries a control
//!   in its AttributeModifier (HANDOVER, ACKNOWLEDGE, DISABLE, STANDBY,
//!   DISCOVER); the responder applies the transitions IBA 14.4.1 allows in
//!   the current state and refuses the rest with status 0x1C, as it
//!   refuses controls from an SM in the wrong state (the four commanding
//!   controls only come from a master; ACKNOWLEDGE from a master or
//!   standby). Other attributes get status 0x0C.
//! * [`arbitrate`]: the one call the SM makes before its first heavy
//!   sweep. It returns when this SM must be master:
//!   1. discover the fabric (discovery only, nothing is written) and read
//!      SMInfo of every other port whose PortInfo.CapabilityMask says IsSM;
//!   2. elect ([`elect`]): a master that exists stays master; otherwise the
//!      highest SM (higher priority; at equal priority the lower port
//!      GUID) is master, the others stand by;
//!   3. as standby, poll the chosen SM's SMInfo every `poll_interval`;
//!      after `poll_retries` polls in a row without an answer the master
//!      is gone: discover and elect again (the standby that now ranks
//!      highest wins, the others stand by for it). A HANDOVER from the
//!      master makes this SM master at once; DISABLE parks it in NotActive
//!      until a STANDBY control; DISCOVER makes it elect again.
//!
//!   When the election on a fabric just discovered makes this SM master,
//!   the result carries that fabric ([`Discovered`]), so that the first
//!   heavy sweep need not discover it again; its documentation says when
//!   the fabric is fresh enough to start from.
//! * [`check_peers`]: what a master calls after each heavy sweep: when a
//!   higher SM has appeared (a standby started later with a higher
//!   priority, or a second master after two subnets were joined), it hands
//!   over to it (SubnSet(SMInfo) HANDOVER) and turns standby; the caller
//!   then stops sweeping and calls [`arbitrate`] again.
//!
//! ## SM_Key
//!
//! Only SMs that hold the same SM_Key (`sm_key`) belong to one subnet
//! (IBA 14.4.1); the key is never handed to an SM that has not proved it:
//!
//! * SubnGet(SMInfo) is answered with SM_Key 0, unless the Get carries
//!   our key in its SMInfo payload (the requester proved it: the key is
//!   shown) or another non-zero value, taken as a challenge: the field
//!   then holds a proof, SipHash-2-4 keyed with our key over the challenge
//!   and our port GUID, which teaches nothing about the key.
//! * smcore asks every SM with a fresh challenge and counts it as of our
//!   key when the answer is the proof for our key and that port's GUID,
//!   or our key in clear (OpenSM shows its key to anyone).
//! * SubnSet(SMInfo) controls (HANDOVER, ACKNOWLEDGE, DISABLE, STANDBY,
//!   DISCOVER) are refused unless they carry our key, 0 included: there
//!   is no key that turns the check off.
//! * An SM of another key is never handed the subnet, never obeyed and
//!   never sent trap 144 or our key. It takes no part in the election,
//!   except a master that holds the subnet (our port's MasterSMLID is its
//!   LID) when no master of our key is seen: we wait while it answers
//!   rather than fight it for the switches, but obey none of its
//!   controls. One that only claims to be master cannot park a standby.
//!
//! ## ActCount
//!
//! A master's responder thread answers even while its SM loop hangs, so
//! ActCount moves only with the loop: each SMP and wait slice on the port
//! wrapped in [`ActivityPort`], and each [`check_peers`]; the responder
//! only reports it. A standby whose master answers `stuck_polls` polls in
//! a row with one ActCount takes it for gone, elects without it (until its
//! count moves again) and takes over.
//!
//! Taking over reprograms nothing by itself: the new master's first heavy
//! sweep reads the LIDs the ports hold and keeps them (the sweep never
//! moves a valid LID), routes, writes only the LFT blocks that differ, and
//! points every port's MasterSMLID (where traps go) at itself.
//!
//! ## Timing
//!
//! OpenSM polls every `sminfo_polling_timeout` (10 s) and gives up after
//! `polling_retry_number` (4) silent polls. smcore's default interval is
//! [`DEFAULT_POLL_INTERVAL`] (2 s) with the same 4 retries, so a dead
//! master is noticed within about 8 s plus one SMP timeout, then the
//! standby discovers once more before its first heavy sweep.
//!
//! ## Wiring (the SM on a umad port)
//!
//! ```text
//! let state = Arc::new(SmInfoState::new(0, priority, sm_key));
//! let requests = port.take_smp_requests().expect("taken once");
//! let _responder = standby::spawn_responder(Arc::clone(&state), requests, port.sender())?;
//! let port = &mut standby::ActivityPort::new(&mut port, &state); // the heartbeat
//! loop {
//!     match standby::arbitrate(&mut port, &state, &options, &signals.stop) {
//!         Arbitration::Stopped => break,
//!         Arbitration::Master { .. } => {}
//!     }
//!     // The SM loop. After each heavy sweep (and, cheaply, each light
//!     // sweep, with the last heavy sweep's fabric):
//!     //   check_peers(&mut SmpClient::new(port, retries), &fabric, &state)
//!     //     Stay => carry on; SweepNow => heavy sweep now;
//!     //     HandedOver { .. } => leave the SM loop, back to arbitrate.
//! }
//! ```
//!
//! CLI and config names follow OpenSM: `--priority N` (`sm_priority`,
//! 0..=15, default 0), `--sm-poll-interval SECONDS` (`sminfo_polling_timeout`
//! in ms, default 2 s here), `--sm-poll-retries N`
//! (`polling_retry_number`, default 4), `sm_key`. (OpenSM 3.3.23's
//! `opensm -c` spells the interval `sminfo_polling_timeout`.)
//!
//! ## Not modelled
//!
//! M_Key checks on SMInfo (OpenSM shows its SM_Key to a Get whose M_Key
//! passes; smcore asks for the key or a proof of it in the payload),
//! trap 144 on a priority change, and a limit on how long a higher SM may
//! stay Discovering while a standby waits for it.
//!
//! ## Modules
//!
//! `state` ([`SmInfoState`], [`ActivityPort`]), `responder` ([`answer`],
//! [`serve`], [`spawn_responder`], the SM_Key proofs), `election`
//! ([`sm_ports`], [`read_peers`], [`elect`], [`is_higher`],
//! [`check_peers`]), `poll` (a standby's polls of its master) and
//! `arbitration` ([`arbitrate`]).

use std::time::Duration;

mod arbitration;
mod election;
mod poll;
mod responder;
mod state;
#[cfg(test)]
mod testkit;

pub use arbitration::{arbitrate, Arbitration, TakenFrom};
pub use election::{check_peers, check_peers_unless, elect, is_higher, read_peers, sm_ports, Decision, Peer, PeerAction, SmPort};
pub use responder::{answer, answer_data, serve, spawn_responder};
pub use state::{ActivityPort, Control, SmInfoState};

/// Highest SM priority (4 bits).
pub const MAX_PRIORITY: u8 = 15;
/// Default priority (OpenSM `sm_priority` default).
pub const DEFAULT_PRIORITY: u8 = 0;
/// smcore's default time between polls of the master (OpenSM's
/// `sminfo_polling_timeout` is 10 s; a shorter interval fails over sooner for
/// one SMInfo Get per interval).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// Silent polls in a row after which the master is taken for gone
/// (OpenSM `polling_retry_number`).
pub const DEFAULT_POLL_RETRIES: u32 = 4;

/// How long a wait sleeps before it looks at the stop flag again.
const SLICE: Duration = Duration::from_millis(100);

/// Settings of election and standby.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandbyOptions {
    /// Time between polls of the master (`--sm-poll-interval`, OpenSM
    /// `sminfo_polling_timeout`).
    pub poll_interval: Duration,
    /// Silent polls in a row that mean the master is gone
    /// (`--sm-poll-retries`, OpenSM `polling_retry_number`).
    pub poll_retries: u32,
    /// Extra tries of an unanswered SMP during discovery.
    pub smp_retries: u32,
    /// Answered polls in a row with the master's ActCount unchanged that
    /// mean its SM loop is hung: the master is taken for gone, as after
    /// `poll_retries` silent polls. Longer than `poll_retries`: a master
    /// computing a large fabric's routing sends no SMP for a while.
    pub stuck_polls: u32,
    /// M_Key state shared with the sweeps: ports keyed at protection level
    /// 2 or 3 drop SMPs without their key, polls included.
    pub m_keys: sm_transport::MKeys,
    /// Take no notice of other SMs (OpenSM `ignore_other_sm`): their
    /// SMInfo is never read, so this SM is master at once and never
    /// hands over to a higher one.
    pub ignore_other_sm: bool,
}

/// Default [`StandbyOptions::stuck_polls`]: 30 s at the default interval.
pub const DEFAULT_STUCK_POLLS: u32 = 15;

impl Default for StandbyOptions {
    fn default() -> Self {
        Self {
            poll_interval: DEFAULT_POLL_INTERVAL,
            poll_retries: DEFAULT_POLL_RETRIES,
            smp_retries: crate::config::DEFAULT_TRANSACTION_RETRIES,
            stuck_polls: DEFAULT_STUCK_POLLS,
            m_keys: sm_transport::MKeys::off(),
            ignore_other_sm: false,
        }
    }
}
