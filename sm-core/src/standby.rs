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

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sm_mad::mad::{attr, method, status};
use sm_mad::port_info::capability;
use sm_mad::sm_info::{self, control, SmState};
use sm_mad::smp::{self, Routing, DATA_LEN};
use sm_mad::{Mad, SmInfoPacket, SmInfoRepr};
use tracing::{debug, info, warn};

use crate::sweep::{
    discover, Fabric, IncomingMad, MadSender, SmpClient, SmpError, SmpPort, TransportError,
};

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

/// A control another SM sent us in SubnSet(SMInfo), once the responder
/// accepted it, with the sender's port GUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// HANDOVER: become master.
    Handover {
        /// The SM that handed over.
        from: u64,
    },
    /// ACKNOWLEDGE: our handover was taken.
    Acknowledge {
        /// The SM that acknowledged.
        from: u64,
    },
    /// DISABLE: stop being an SM until told STANDBY.
    Disable {
        /// The master that disabled us.
        from: u64,
    },
    /// STANDBY: go back to standby.
    Standby {
        /// The master that said so.
        from: u64,
    },
    /// DISCOVER: elect again.
    Discover {
        /// The master that said so.
        from: u64,
    },
}

#[derive(Debug, Default)]
struct Inner {
    state: SmState,
    controls: VecDeque<Control>,
    /// Port GUIDs of SMs already reported as holding another SM_Key, so
    /// that a check after every sweep does not log them again.
    foreign: HashSet<u64>,
    /// A master we took for hung (port GUID, the ActCount it stopped at):
    /// while it shows that count it is no master to stand by for or hand
    /// over to, however it still answers.
    hung: Option<(u64, u32)>,
}

/// This SM's SMInfo and the controls other SMs sent it (see the module
/// documentation). Shared between the SM loop and the responder thread.
#[derive(Debug)]
pub struct SmInfoState {
    guid: AtomicU64,
    priority: u8,
    sm_key: u64,
    act_count: AtomicU32,
    inner: Mutex<Inner>,
    changed: Condvar,
}

impl SmInfoState {
    /// A state in Discovering with `priority` (above 15 is cut to 15) and
    /// `sm_key`. `guid` is the SM port's GUID, or 0 when not known yet:
    /// [`arbitrate`] fills it in from discovery.
    pub fn new(guid: u64, priority: u8, sm_key: u64) -> Self {
        Self {
            guid: AtomicU64::new(guid),
            priority: priority.min(MAX_PRIORITY),
            sm_key,
            act_count: AtomicU32::new(0),
            inner: Mutex::new(Inner {
                state: SmState::Discovering,
                ..Inner::default()
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing in Inner can be left half-updated by a panic.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The SM port's GUID (0 until known).
    pub fn guid(&self) -> u64 {
        self.guid.load(Ordering::Relaxed)
    }

    /// Sets the SM port's GUID.
    pub fn set_guid(&self, guid: u64) {
        self.guid.store(guid, Ordering::Relaxed);
    }

    /// Priority, 0..=15.
    pub fn priority(&self) -> u8 {
        self.priority
    }

    /// SM_Key.
    pub fn sm_key(&self) -> u64 {
        self.sm_key
    }

    /// Current SMState.
    pub fn state(&self) -> SmState {
        self.lock().state
    }

    /// Whether this SM is master now.
    pub fn is_master(&self) -> bool {
        self.state() == SmState::Master
    }

    /// Moves to `state` (logged when it changes).
    pub fn set_state(&self, state: SmState) {
        let mut inner = self.lock();
        if inner.state != state {
            info!(from = ?inner.state, to = ?state, guid = format_args!("{:#018x}", self.guid()), "SM state");
            inner.state = state;
        }
        drop(inner);
        self.changed.notify_all();
    }

    /// ActCount: the heartbeat a standby watches. Only the SM loop moves
    /// it ([`SmInfoState::bump_activity`], [`ActivityPort`]); the
    /// responder only reports it, so a master whose loop hangs while its
    /// responder thread still answers shows a count that stops.
    pub fn act_count(&self) -> u32 {
        self.act_count.load(Ordering::Relaxed)
    }

    /// Adds `n` to ActCount (e.g. the SMPs of a sweep). Wraps at 2^32.
    pub fn bump_act_count(&self, n: u32) {
        self.act_count.fetch_add(n, Ordering::Relaxed);
    }

    /// The SM loop made progress (an SMP exchanged, a sweep done, a wait
    /// slice passed): ActCount moves on by one.
    pub fn bump_activity(&self) {
        self.bump_act_count(1);
    }

    /// SMInfo as this SM sends it to SMs that proved our SM_Key (a Set
    /// carrying our key, a HANDOVER): the SM_Key in clear.
    pub fn sm_info(&self) -> SmInfoRepr {
        SmInfoRepr {
            guid: self.guid(),
            sm_key: self.sm_key,
            act_count: self.act_count(),
            priority: self.priority,
            state: self.state(),
        }
    }

    /// Whether `guid` is reported as an SM of another SM_Key for the first
    /// time (then it is remembered).
    fn first_foreign_report(&self, guid: u64) -> bool {
        self.lock().foreign.insert(guid)
    }

    /// The oldest control not handled yet.
    pub fn take_control(&self) -> Option<Control> {
        self.lock().controls.pop_front()
    }

    /// Waits up to `timeout` for a control; returns it if one came.
    pub fn wait_control(&self, timeout: Duration) -> Option<Control> {
        let deadline = Instant::now() + timeout;
        let mut inner = self.lock();
        loop {
            if let Some(c) = inner.controls.pop_front() {
                return Some(c);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            inner = self
                .changed
                .wait_timeout(inner, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Applies a SubnSet(SMInfo) control from the SM `sender` describes:
    /// the new state, or why it is refused.
    fn apply(&self, modifier: u32, sender: &SmInfoRepr) -> Result<SmState, String> {
        let from = sender.guid;
        let control = match modifier {
            control::HANDOVER => Control::Handover { from },
            control::ACKNOWLEDGE => Control::Acknowledge { from },
            control::DISABLE => Control::Disable { from },
            control::STANDBY => Control::Standby { from },
            control::DISCOVER => Control::Discover { from },
            other => return Err(format!("no SMInfo control {other}")),
        };
        let sender_ok = match control {
            Control::Acknowledge { .. } => {
                matches!(sender.state, SmState::Standby | SmState::Master)
            }
            _ => sender.state == SmState::Master,
        };
        if !sender_ok {
            return Err(format!(
                "{control:?} from an SM in state {:?}",
                sender.state
            ));
        }
        let mut inner = self.lock();
        let now = inner.state;
        let next = match (now, control) {
            (SmState::Standby, Control::Handover { .. }) => SmState::Master,
            (SmState::Standby, Control::Discover { .. }) => SmState::Discovering,
            (SmState::Standby, Control::Disable { .. }) => SmState::NotActive,
            (SmState::Standby, Control::Acknowledge { .. }) => SmState::Standby,
            (SmState::NotActive, Control::Standby { .. }) => SmState::Standby,
            // The sender hands over while we are still electing: it is
            // standing down, which the election will see.
            (SmState::Discovering, Control::Handover { .. }) => SmState::Discovering,
            // Another master yields to us (two subnets joined): we stay
            // master; the SM loop sweeps again to take its part.
            (SmState::Master, Control::Handover { .. }) => SmState::Master,
            (SmState::Master, Control::Acknowledge { .. }) => SmState::Master,
            (state, control) => {
                return Err(format!("{control:?} is not allowed in state {state:?}"))
            }
        };
        if next != now {
            info!(from = ?now, to = ?next, ?control, "SM state changed by another SM");
        }
        inner.state = next;
        inner.controls.push_back(control);
        drop(inner);
        self.changed.notify_all();
        Ok(next)
    }
}

/// The response to one SMP another SM sent us, as a 256-byte MAD, or
/// `None` when there is nothing to answer (not a well-formed SMP, a
/// response, a trap).
pub fn answer(state: &SmInfoState, request: &[u8]) -> Option<Vec<u8>> {
    let parsed = smp::Packet::new_checked(request).and_then(|p| smp::Repr::parse(&p));
    let request = match parsed {
        Ok(r) => r,
        Err(e) => {
            debug!("unreadable SMP from another SM ignored: {e}");
            return None;
        }
    };
    if request.is_response()
        || matches!(
            request.method,
            method::TRAP | method::TRAP_REPRESS | method::REPORT
        )
    {
        return None;
    }
    // What goes in the SM_Key field: the key only to a requester that
    // proved it, never to anyone who asks (IBA 14.4.1: a Get without the
    // proof sees 0).
    let ours = |sm_key: u64| {
        let mut info = state.sm_info();
        info.sm_key = sm_key;
        let mut data = [0u8; DATA_LEN];
        info.emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
        data
    };
    let (status, data) = match (request.method, request.attribute_id) {
        (method::GET, attr::SM_INFO) => {
            // ActCount is not moved here: a responder thread that answers
            // while the SM loop hangs must not look alive.
            (0, ours(get_key_field(state, &request.data)))
        }
        (method::SET, attr::SM_INFO) => {
            let sender = SmInfoPacket::new_checked(&request.data[..sm_info::LEN])
                .and_then(|p| SmInfoRepr::parse(&p));
            match sender {
                Err(e) => {
                    warn!("SubnSet(SMInfo) with an unreadable SMInfo refused: {e}");
                    (status::INVALID_ATTR_VALUE, ours(0))
                }
                // Every control, whatever the key's value (0 included):
                // an SM that cannot show our key belongs to no subnet of
                // ours and commands nothing here.
                Ok(sender) if sender.sm_key != state.sm_key() => {
                    warn!(
                        from = format_args!("{:#018x}", sender.guid),
                        control = request.attribute_modifier,
                        "SubnSet(SMInfo) with a wrong SM_Key refused"
                    );
                    (status::INVALID_ATTR_VALUE, ours(0))
                }
                Ok(sender) => match state.apply(request.attribute_modifier, &sender) {
                    Ok(_) => (0, ours(state.sm_key())),
                    Err(why) => {
                        warn!(
                            from = format_args!("{:#018x}", sender.guid),
                            "SubnSet(SMInfo) refused: {why}"
                        );
                        (status::INVALID_ATTR_VALUE, ours(state.sm_key()))
                    }
                },
            }
        }
        (method::GET | method::SET, other) => {
            debug!(
                attribute = format_args!("{other:#06x}"),
                "SMP for an attribute the SM does not serve"
            );
            (status::UNSUPPORTED_METHOD_ATTR, [0; DATA_LEN])
        }
        (m, _) => {
            debug!(
                method = format_args!("{m:#04x}"),
                "SMP with a method the SM does not serve"
            );
            (status::UNSUPPORTED_METHOD, [0; DATA_LEN])
        }
    };
    // Same TID, attribute, modifier and route; D bit set; hop pointer and
    // return path as they arrived (the SMI moves the pointer on the way
    // back, IBA 14.2.2); the LID-routed ends of a directed route swap.
    let mut response = request.response(status, data);
    if let Routing::Directed(dr) = &mut response.routing {
        std::mem::swap(&mut dr.dr_slid, &mut dr.dr_dlid);
    }
    let mut mad = Mad::zeroed();
    response.emit(&mut mad.smp_mut());
    Some(mad.0.to_vec())
}

/// The SM_Key field of our answer to a SubnGet(SMInfo) whose payload is
/// `payload`: our key when the payload's SM_Key is our key (the requester
/// proved it); [`key_proof`] of a non-zero other value, taken as a
/// challenge (smcore SMs check each other this way without either sending
/// the key to an SM that has not proved it); 0 otherwise (a plain Get, as
/// `sminfo` or OpenSM send).
fn get_key_field(state: &SmInfoState, payload: &[u8]) -> u64 {
    let asked = SmInfoPacket::new_checked(&payload[..sm_info::LEN.min(payload.len())])
        .and_then(|p| SmInfoRepr::parse(&p))
        .map_or(0, |i| i.sm_key);
    if asked == state.sm_key() {
        asked
    } else if asked != 0 {
        key_proof(state.sm_key(), asked, state.guid())
    } else {
        0
    }
}

/// Domain separation for [`key_proof`] (the second half of SipHash's key).
const PROOF_DOMAIN: u64 = u64::from_be_bytes(*b"smcoreSK");

/// Proof that the SM at port `guid` holds `sm_key`, answering `challenge`:
/// SipHash-2-4 keyed with the SM_Key over the challenge and the port
/// GUID. A PRF: seeing proofs, even for challenges of one's choosing,
/// teaches nothing about the key; bound to the answering port's GUID, an
/// SM cannot pass off another SM's proof as its own.
#[allow(deprecated)] // std's SipHasher is SipHash-2-4, frozen, not unsound.
fn key_proof(sm_key: u64, challenge: u64, guid: u64) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::SipHasher::new_with_keys(sm_key, PROOF_DOMAIN);
    // Fixed byte order: SMs on hosts of either endianness agree.
    h.write(&challenge.to_be_bytes());
    h.write(&guid.to_be_bytes());
    h.finish()
}

/// A fresh challenge for a SubnGet(SMInfo): unpredictable, non-zero and
/// never our own key (a peer would then show the key in clear).
fn challenge(sm_key: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    // RandomState is seeded from the OS once per process; the counter and
    // the clock make every value differ.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    let c = h.finish();
    if c == 0 || c == sm_key {
        c.wrapping_add(1) | 1
    } else {
        c
    }
}

/// What an SM's answer to our challenged SubnGet(SMInfo) says about its
/// SM_Key: the same as ours when the field is the proof for our key and
/// its port GUID, or our key in clear (OpenSM and the simulated SMs show
/// the key to anyone).
fn shows_our_key(state: &SmInfoState, challenge: u64, port_guid: u64, shown: u64) -> bool {
    shown == state.sm_key() || shown == key_proof(state.sm_key(), challenge, port_guid)
}

/// Our SMInfo as the payload of a SubnGet(SMInfo), with `challenge` in
/// the SM_Key field.
fn challenge_payload(state: &SmInfoState, challenge: u64) -> [u8; DATA_LEN] {
    let mut info = state.sm_info();
    info.sm_key = challenge;
    let mut data = [0u8; DATA_LEN];
    info.emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
    data
}

/// Answers every request of `requests` with `reply` until the queue
/// closes. A failed reply is logged: the requester retries as after a
/// lost MAD.
pub fn serve(
    state: &SmInfoState,
    requests: &Receiver<IncomingMad>,
    mut reply: impl FnMut(&IncomingMad, &[u8]) -> Result<(), TransportError>,
) {
    while let Ok(request) = requests.recv() {
        if let Some(response) = answer(state, &request.mad) {
            if let Err(e) = reply(&request, &response) {
                warn!(slid = request.slid, "SMInfo answer not sent: {e}");
            }
        }
    }
    debug!("SMInfo responder: request queue closed");
}

/// Starts the SMInfo responder thread (see [`serve`]); it ends when the
/// transport that feeds `requests` is gone.
pub fn spawn_responder(
    state: Arc<SmInfoState>,
    requests: Receiver<IncomingMad>,
    sender: MadSender,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sminfo-responder".into())
        .spawn(move || serve(&state, &requests, |to, mad| sender.reply(to, mad)))
}

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
    pub m_keys: crate::sweep::MKeys,
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
            m_keys: crate::sweep::MKeys::off(),
        }
    }
}

/// An [`SmpPort`] that moves ActCount each time the SM loop gets through
/// a call on it: every SMP exchanged in a sweep and every slice of the
/// wait for traps between sweeps. Wrap the SM loop's port in it, and a
/// standby sees the heartbeat stop when the loop hangs, even though the
/// responder thread still answers.
pub struct ActivityPort<'a> {
    port: &'a mut dyn SmpPort,
    state: &'a SmInfoState,
}

impl<'a> ActivityPort<'a> {
    /// `port`, counting on `state`.
    pub fn new(port: &'a mut dyn SmpPort, state: &'a SmInfoState) -> Self {
        Self { port, state }
    }
}

impl SmpPort for ActivityPort<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        let r = self.port.send(mad);
        self.state.bump_activity();
        r
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        let r = self.port.send_to(dlid, mad);
        self.state.bump_activity();
        r
    }

    fn exchange_many(
        &mut self,
        batch: &[crate::sweep::transport::Outgoing],
    ) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        let r = self.port.exchange_many(batch);
        self.state.bump_activity();
        r
    }

    fn wait_trap(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<crate::sweep::transport::TrapMad>, TransportError> {
        let r = self.port.wait_trap(timeout);
        self.state.bump_activity();
        r
    }
}

/// A port of the fabric behind which another SM runs (PortInfo IsSM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmPort {
    /// Node index in the fabric.
    pub node: usize,
    /// Port number (0 on a switch).
    pub port: u8,
    /// Port GUID.
    pub guid: u64,
    /// The port's LID.
    pub lid: u16,
    /// Directed route to the port.
    pub path: Vec<u8>,
}

/// Another SM and what its SMInfo said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Where it runs.
    pub port: SmPort,
    /// Its SMInfo.
    pub info: SmInfoRepr,
    /// Whether it proved it holds our SM_Key. An SM that did not belongs
    /// to no subnet of ours: never handed the subnet, never obeyed.
    pub same_key: bool,
}

/// Every port other than our own that advertises IsSM (and not
/// IsSMdisabled): port 0 of switches, ports 1.. of CAs and routers.
pub fn sm_ports(fabric: &Fabric) -> Vec<SmPort> {
    let mut out = Vec::new();
    for (i, node) in fabric.nodes.iter().enumerate() {
        for (p, port) in node.ports.iter().enumerate() {
            let p = p as u8;
            if (node.is_switch() && p != 0)
                || (!node.is_switch() && p == 0)
                || (i == 0 && p == fabric.sm_port)
            {
                continue;
            }
            let Some(info) = &port.info else { continue };
            if info.capability_mask & capability::IS_SM == 0
                || info.capability_mask & capability::IS_SM_DISABLED != 0
            {
                continue;
            }
            let path = if node.is_switch() {
                Some(node.path.clone())
            } else {
                port.path.clone()
            };
            let Some(path) = path else { continue };
            out.push(SmPort {
                node: i,
                port: p,
                guid: port.guid,
                lid: info.lid,
                path,
            });
        }
    }
    out
}

/// SMInfo of every SM port of `fabric`, each asked with a challenge
/// (one after the other: SM ports are few). An SM that does not answer,
/// answers garbage or claims another port's GUID is left out, logged; an
/// SM that does not prove our SM_Key is kept with `same_key` false (the
/// election may still need to know that it holds the subnet), logged the
/// first time.
pub fn read_peers(client: &mut SmpClient<'_>, fabric: &Fabric, state: &SmInfoState) -> Vec<Peer> {
    let mut peers = Vec::new();
    for port in sm_ports(fabric) {
        let guid = format!("{:#018x}", port.guid);
        let (answer, same_key) = challenged_get(client, state, &port);
        match answer {
            Ok(info) if info.guid != port.guid => {
                warn!(port = %guid, claimed = format_args!("{:#018x}", info.guid), "SMInfo names another port; SM ignored")
            }
            Ok(info) => {
                if !same_key && state.first_foreign_report(port.guid) {
                    warn!(
                        port = %guid,
                        lid = port.lid,
                        its_priority = info.priority,
                        its_state = ?info.state,
                        "an SM that does not hold our SM_Key: not of this subnet; \
                         never handed the subnet nor obeyed"
                    );
                }
                debug!(port = %guid, lid = port.lid, priority = info.priority, state = ?info.state, same_key, "SM found");
                peers.push(Peer { port, info, same_key });
            }
            Err(e) => {
                debug!(port = %guid, error = %e, "IsSM port without a usable SMInfo; no SM counted there")
            }
        }
    }
    peers
}

/// SubnGet(SMInfo) of the SM at `port` with a fresh challenge: its SMInfo,
/// and whether it proved our SM_Key.
fn challenged_get(
    client: &mut SmpClient<'_>,
    state: &SmInfoState,
    port: &SmPort,
) -> (Result<SmInfoRepr, SmpError>, bool) {
    let c = challenge(state.sm_key());
    let answer = client
        .get_with(attr::SM_INFO, 0, &port.path, challenge_payload(state, c))
        .and_then(|d| parse_sm_info(&d));
    let same_key = answer
        .as_ref()
        .is_ok_and(|info| shows_our_key(state, c, port.guid, info.sm_key));
    (answer, same_key)
}

fn parse_sm_info(data: &[u8]) -> Result<SmInfoRepr, SmpError> {
    SmInfoPacket::new_checked(&data[..sm_info::LEN.min(data.len())])
        .and_then(|p| SmInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("SMInfo: {e}")))
}

/// `peers` without the master we took for hung, as long as its ActCount
/// has not moved (once it moves, the SM is back and counts again).
fn without_hung(state: &SmInfoState, peers: Vec<Peer>) -> Vec<Peer> {
    let mut inner = state.lock();
    let Some((guid, stopped_at)) = inner.hung else {
        return peers;
    };
    if peers
        .iter()
        .any(|p| p.info.guid == guid && p.info.act_count != stopped_at)
    {
        info!(sm = format_args!("{guid:#018x}"), "the hung master's ActCount moves again");
        inner.hung = None;
        return peers;
    }
    drop(inner);
    peers.into_iter().filter(|p| p.info.guid != guid).collect()
}

/// The SMs that take part in our election among `peers`: those that
/// proved our SM_Key; and, when none of them is master, a master of
/// another key that holds the subnet now (our port's MasterSMLID,
/// `our_master_lid`, is its LID: it swept and programmed this fabric).
/// Standing by for that one is not obeying it (its controls are refused:
/// wrong key); it keeps a second SM of another key from fighting a working
/// master for the switches. An SM of another key that only claims to be
/// master, without holding the subnet, takes no part: it cannot keep us
/// from taking over when our master is gone.
fn electors(peers: Vec<Peer>, our_master_lid: u16) -> Vec<Peer> {
    let our_master = peers
        .iter()
        .any(|p| p.same_key && p.info.state == SmState::Master);
    peers
        .into_iter()
        .filter(|p| {
            p.same_key
                || (!our_master
                    && p.info.state == SmState::Master
                    && our_master_lid != 0
                    && p.port.lid == our_master_lid)
        })
        .inspect(|p| {
            if !p.same_key {
                warn!(
                    master = format_args!("{:#018x}", p.info.guid),
                    lid = p.port.lid,
                    "a master SM of another SM_Key holds this subnet (our port's MasterSMLID \
                     is its LID): not taking the subnet from it; waiting while it answers, \
                     without obeying it"
                );
            }
        })
        .collect()
}

/// Whether an SM of priority `a_priority` and port GUID `a_guid` ranks
/// above one of `b_priority`/`b_guid` (IBA 14.4.1.1: higher priority;
/// at equal priority, lower GUID).
pub fn is_higher(a_priority: u8, a_guid: u64, b_priority: u8, b_guid: u64) -> bool {
    a_priority > b_priority || (a_priority == b_priority && a_guid < b_guid)
}

/// What the election says this SM should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Master.
    Master,
    /// Standby, polling `peers[i]`.
    Standby(usize),
}

/// The election among `peers` for an SM of `priority`/`guid`:
/// an SM that is master already stays master (the highest of them if two
/// subnets with a master each were joined); otherwise the highest SM in
/// Discovering or Standby, if it ranks above us; otherwise us. SMs in
/// NotActive take no part.
pub fn elect(priority: u8, guid: u64, peers: &[Peer]) -> Decision {
    let best = |filter: &dyn Fn(&Peer) -> bool| {
        peers
            .iter()
            .enumerate()
            .filter(|(_, p)| filter(p))
            .reduce(|a, b| {
                if is_higher(
                    b.1.info.priority,
                    b.1.info.guid,
                    a.1.info.priority,
                    a.1.info.guid,
                ) {
                    b
                } else {
                    a
                }
            })
            .map(|(i, _)| i)
    };
    if let Some(i) = best(&|p| p.info.state == SmState::Master) {
        return Decision::Standby(i);
    }
    match best(&|p| matches!(p.info.state, SmState::Discovering | SmState::Standby)) {
        Some(i) if is_higher(peers[i].info.priority, peers[i].info.guid, priority, guid) => {
            Decision::Standby(i)
        }
        _ => Decision::Master,
    }
}

/// How this SM came to be master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakenFrom {
    /// The SM we stood by for stopped answering.
    Silent {
        /// Its port GUID.
        guid: u64,
    },
    /// The master handed over to us.
    Handover {
        /// Its port GUID.
        guid: u64,
    },
}

/// What [`arbitrate`] ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arbitration {
    /// This SM is master now: sweep.
    Master {
        /// `None` when no other master was seen (a first start, or the
        /// election made us master over other standbys).
        took_over_from: Option<TakenFrom>,
    },
    /// `stop` was set.
    Stopped,
}

/// Why a standby stopped polling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PollEnd {
    Stopped,
    Handover {
        from: u64,
    },
    /// The polled SM did not answer `poll_retries` times in a row.
    Lost,
    /// The polled master answered `stuck_polls` times in a row with the
    /// same ActCount (this one): its SM loop is hung.
    Hung(u32),
    /// Elect again: the polled SM stood down, another port answers at its
    /// address, or a master told us to.
    Elect,
    /// A master disabled us.
    Disabled,
}

/// Decides whether this SM is master (see the module documentation) and
/// returns when it is, or when `stop` is set. Logs every step.
pub fn arbitrate(
    port: &mut dyn SmpPort,
    state: &SmInfoState,
    options: &StandbyOptions,
    stop: &AtomicBool,
) -> Arbitration {
    if !matches!(state.state(), SmState::Standby | SmState::NotActive) {
        state.set_state(SmState::Discovering);
    }
    let mut lost: Option<u64> = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Arbitration::Stopped;
        }
        if state.state() == SmState::NotActive {
            // Only a master's STANDBY control wakes us (the responder
            // applies it); DISCOVER is not allowed from NotActive.
            let _ = state.wait_control(SLICE);
            continue;
        }
        if let Some(end) = handle_controls(state) {
            match end {
                PollEnd::Handover { from } => {
                    return master(state, Some(TakenFrom::Handover { guid: from }))
                }
                PollEnd::Disabled => continue,
                _ => {}
            }
        }
        let mut client = SmpClient::new(port, options.smp_retries).with_m_keys(options.m_keys.clone());
        let fabric = match discover(&mut client) {
            Ok((fabric, _)) => fabric,
            Err(e) => {
                warn!("election: our own port does not answer ({e}); trying again");
                if sleep_watching(state, options.poll_interval, stop) {
                    return Arbitration::Stopped;
                }
                continue;
            }
        };
        let own = fabric
            .nodes
            .first()
            .and_then(|n| n.ports.get(usize::from(fabric.sm_port)));
        if let Some(own) = own {
            if state.guid() != own.guid {
                state.set_guid(own.guid);
            }
        }
        let me = own
            .and_then(|p| p.info.as_ref())
            .map(|i| (i.lid, i.capability_mask));
        let our_master_lid = own
            .and_then(|p| p.info.as_ref())
            .map_or(0, |i| i.master_sm_lid);
        let peers = electors(
            without_hung(state, read_peers(&mut client, &fabric, state)),
            our_master_lid,
        );
        if state.state() == SmState::Master {
            // A HANDOVER arrived while we discovered.
            let from = match state.take_control() {
                Some(Control::Handover { from }) => Some(TakenFrom::Handover { guid: from }),
                _ => lost.map(|guid| TakenFrom::Silent { guid }),
            };
            return master(state, from);
        }
        match elect(state.priority(), state.guid(), &peers) {
            Decision::Master => {
                info!(
                    priority = state.priority(),
                    guid = format_args!("{:#018x}", state.guid()),
                    other_sms = peers.len(),
                    "elected master"
                );
                return master(state, lost.map(|guid| TakenFrom::Silent { guid }));
            }
            Decision::Standby(i) => {
                let target = &peers[i];
                info!(
                    master = format_args!("{:#018x}", target.info.guid),
                    lid = target.port.lid,
                    its_priority = target.info.priority,
                    its_state = ?target.info.state,
                    priority = state.priority(),
                    "standing by"
                );
                state.set_state(SmState::Standby);
                match poll(port, state, options, target, me, stop) {
                    PollEnd::Stopped => return Arbitration::Stopped,
                    PollEnd::Handover { from } => {
                        return master(state, Some(TakenFrom::Handover { guid: from }))
                    }
                    PollEnd::Hung(act_count) => {
                        state.lock().hung = Some((target.info.guid, act_count));
                        lost = Some(target.info.guid);
                        state.set_state(SmState::Discovering);
                    }
                    PollEnd::Lost => {
                        lost = Some(target.info.guid);
                        state.set_state(SmState::Discovering);
                    }
                    PollEnd::Elect => {
                        if state.state() == SmState::Standby {
                            state.set_state(SmState::Discovering);
                        }
                    }
                    PollEnd::Disabled => {}
                }
            }
        }
    }
}

fn master(state: &SmInfoState, took_over_from: Option<TakenFrom>) -> Arbitration {
    state.set_state(SmState::Master);
    match took_over_from {
        Some(TakenFrom::Silent { guid }) => {
            info!(
                from = format_args!("{guid:#018x}"),
                how = "master stopped answering",
                "taking over as master"
            )
        }
        Some(TakenFrom::Handover { guid }) => {
            info!(
                from = format_args!("{guid:#018x}"),
                how = "handover",
                "taking over as master"
            )
        }
        None => {}
    }
    Arbitration::Master { took_over_from }
}

/// Handles the controls queued by the responder: what they end, if
/// anything.
fn handle_controls(state: &SmInfoState) -> Option<PollEnd> {
    let mut end = None;
    while let Some(c) = state.take_control() {
        match c {
            Control::Handover { from } if state.state() == SmState::Master => {
                end = Some(PollEnd::Handover { from })
            }
            Control::Disable { .. } => end = Some(PollEnd::Disabled),
            Control::Discover { .. } => end = end.or(Some(PollEnd::Elect)),
            Control::Standby { .. } if end == Some(PollEnd::Disabled) => end = None,
            _ => {}
        }
    }
    end
}

/// Sleeps `d` unless `stop` is set first (then `true`) or a control comes
/// (then it is put back for the caller).
fn sleep_watching(state: &SmInfoState, d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(SLICE.min(end.saturating_duration_since(Instant::now())));
        if !state.lock().controls.is_empty() {
            return false;
        }
    }
    stop.load(Ordering::Relaxed)
}

/// Polls `target`'s SMInfo every `poll_interval` while we stand by. `me`
/// is our port's LID and CapabilityMask, for trap 144.
fn poll(
    port: &mut dyn SmpPort,
    state: &SmInfoState,
    options: &StandbyOptions,
    target: &Peer,
    me: Option<(u16, u32)>,
    stop: &AtomicBool,
) -> PollEnd {
    let guid = target.info.guid;
    let mut misses = 0u32;
    let mut polls_below_us = 0u32;
    // The master's ActCount at the last answer, and the answers in a row
    // that showed it unchanged.
    let mut last_act_count = target.info.act_count;
    let mut stuck = 0u32;
    let mut next = Instant::now() + options.poll_interval;
    loop {
        // Wait for the next poll, watching for stop and controls.
        loop {
            if stop.load(Ordering::Relaxed) {
                return PollEnd::Stopped;
            }
            if let Some(end) = handle_controls(state) {
                if end != PollEnd::Disabled || state.state() == SmState::NotActive {
                    return end;
                }
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            if let Some(c) = state.wait_control((next - now).min(SLICE)) {
                // Put it back for handle_controls.
                state.lock().controls.push_front(c);
            }
        }
        next = Instant::now() + options.poll_interval;
        // One SMP per poll: the retries are the polls themselves.
        let mut client = SmpClient::new(port, 0).with_m_keys(options.m_keys.clone());
        let (answer, same_key) = challenged_get(&mut client, state, &target.port);
        let answer = match answer {
            // Whatever answers for our master must go on proving our key;
            // an answer that does not is no sign of our master's life.
            Ok(info) if target.same_key && !same_key && info.guid == guid => Err(
                SmpError::Malformed("the answer does not prove our SM_Key".into()),
            ),
            other => other,
        };
        match answer {
            Ok(info) if info.guid != guid => {
                warn!(
                    expected = format_args!("{guid:#018x}"),
                    found = format_args!("{:#018x}", info.guid),
                    "another SM answers on the master's route; electing again"
                );
                return PollEnd::Elect;
            }
            Ok(info) => {
                let alive = match info.state {
                    SmState::Master | SmState::Discovering => true,
                    // Still the one to wait for only while it ranks above us.
                    SmState::Standby => {
                        is_higher(info.priority, info.guid, state.priority(), state.guid())
                    }
                    SmState::NotActive => false,
                };
                if !alive {
                    info!(sm = format_args!("{guid:#018x}"), its_state = ?info.state, "the SM we stood by for stood down; electing again");
                    return PollEnd::Elect;
                }
                if misses > 0 {
                    info!(
                        sm = format_args!("{guid:#018x}"),
                        misses, "master answers again"
                    );
                }
                misses = 0;
                debug!(sm = format_args!("{guid:#018x}"), its_state = ?info.state, act_count = info.act_count, "master polled");
                // A master's loop moves ActCount as it works; its
                // responder thread answering is not enough.
                if info.state == SmState::Master && info.act_count == last_act_count {
                    stuck += 1;
                    if stuck >= options.stuck_polls.max(1) {
                        warn!(
                            sm = format_args!("{guid:#018x}"),
                            act_count = info.act_count,
                            polls = stuck,
                            "master answers but its ActCount has stopped: its SM loop is hung; \
                             electing a new master"
                        );
                        return PollEnd::Hung(info.act_count);
                    }
                } else {
                    stuck = 0;
                }
                last_act_count = info.act_count;
                let below_us = target.same_key
                    && info.state == SmState::Master
                    && !is_higher(info.priority, info.guid, state.priority(), state.guid());
                if below_us {
                    // A master below us hands over once it sees us in a
                    // heavy sweep; trap 144 (SM priority change) asks it
                    // for one, as OpenSM's standby does. Sent again now
                    // and then in case it was lost.
                    if polls_below_us.is_multiple_of(4 * options.poll_retries.max(1)) {
                        if let Some((lid, capability_mask)) = me {
                            send_trap_144(port, target, lid, capability_mask);
                        }
                    }
                    polls_below_us += 1;
                } else {
                    polls_below_us = 0;
                }
            }
            Err(e) => {
                misses += 1;
                warn!(sm = format_args!("{guid:#018x}"), misses, of = options.poll_retries, error = %e, "master did not answer a poll");
                if misses >= options.poll_retries.max(1) {
                    warn!(
                        sm = format_args!("{guid:#018x}"),
                        "master is gone; electing a new one"
                    );
                    return PollEnd::Lost;
                }
            }
        }
    }
}

/// Trap 144's ChangeFlags bit for "SM priority changed".
const TRAP_144_SM_PRIORITY_CHANGE: u16 = 0x0008;

/// Sends trap 144 (local changes: SM priority) from our port (`lid`,
/// `capability_mask`) to the master, LID-routed. Nothing answers but a
/// TrapRepress, which the transport does not count as an answer; a lost
/// trap is sent again at a later poll.
fn send_trap_144(port: &mut dyn SmpPort, target: &Peer, lid: u16, capability_mask: u32) {
    use sm_mad::notice::{self, notice_type, producer, trap, Details, Source};
    if target.port.lid == 0 || lid == 0 {
        return;
    }
    let notice = notice::Repr {
        notice_type: notice_type::INFO,
        source: Source::Generic {
            producer_type: producer::CA,
            trap_number: trap::CAPABILITY_CHANGE,
        },
        issuer_lid: lid,
        toggle: false,
        count: 0,
        details: Details::CapabilityChange {
            lid,
            other_local_changes: false,
            capability_mask,
            change_flags: TRAP_144_SM_PRIORITY_CHANGE,
            capability_mask2: 0,
        },
        issuer_gid: None,
    };
    let mut data = [0u8; DATA_LEN];
    notice.emit(&mut notice::Packet::new_unchecked(&mut data[..]));
    static NEXT_TID: AtomicU32 = AtomicU32::new(1);
    let tid = 0x7144_0000_0000 | u64::from(NEXT_TID.fetch_add(1, Ordering::Relaxed).max(1));
    let mut request = smp::Repr::lid_set(tid, attr::NOTICE, 0, 0, data);
    request.method = method::TRAP;
    let mut mad = Mad::zeroed();
    request.emit(&mut mad.smp_mut());
    info!(
        master = format_args!("{:#018x}", target.info.guid),
        lid = target.port.lid,
        "master ranks below us: trap 144 sent to ask for a handover"
    );
    if let Err(e) = port.send_to(target.port.lid, &mad.0) {
        debug!("trap 144 not sent: {e}");
    }
}

/// What a master should do after [`check_peers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAction {
    /// Carry on.
    Stay,
    /// Another master handed over to us (two subnets joined): sweep again
    /// now to take over its part.
    SweepNow,
    /// We handed over to a higher SM and are standby now: stop sweeping
    /// and call [`arbitrate`] again.
    HandedOver {
        /// The new master's port GUID.
        to: u64,
    },
}

/// The master's check of the other SMs, after each heavy sweep on the
/// fabric it found: hands over to the highest SM that ranks above us and
/// is standby or master (a higher SM still discovering will see us as
/// master, stand by, and be handed over to at the next check).
pub fn check_peers(client: &mut SmpClient<'_>, fabric: &Fabric, state: &SmInfoState) -> PeerAction {
    // Called by the SM loop after each sweep: the loop is alive.
    state.bump_activity();
    let mut action = PeerAction::Stay;
    while let Some(c) = state.take_control() {
        if let Control::Handover { from } = c {
            info!(
                from = format_args!("{from:#018x}"),
                "another master handed over to us; sweeping again"
            );
            action = PeerAction::SweepNow;
        }
    }
    if !state.is_master() {
        return action;
    }
    let peers = without_hung(state, read_peers(client, fabric, state));
    // Only an SM that proved our key is handed the subnet (and so sent
    // our key in the HANDOVER); one of another key is not of this subnet.
    let candidate = peers
        .iter()
        .filter(|p| p.same_key)
        .filter(|p| matches!(p.info.state, SmState::Standby | SmState::Master))
        .filter(|p| is_higher(p.info.priority, p.info.guid, state.priority(), state.guid()))
        .reduce(|a, b| {
            if is_higher(b.info.priority, b.info.guid, a.info.priority, a.info.guid) {
                b
            } else {
                a
            }
        });
    let Some(to) = candidate else { return action };
    let mut data = [0u8; DATA_LEN];
    state
        .sm_info()
        .emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
    match client.set(attr::SM_INFO, control::HANDOVER, &to.port.path, data) {
        Ok(_) => {
            info!(
                to = format_args!("{:#018x}", to.info.guid),
                its_priority = to.info.priority,
                priority = state.priority(),
                "handed over to a higher SM"
            );
            state.set_state(SmState::Standby);
            PeerAction::HandedOver { to: to.info.guid }
        }
        Err(e) => {
            warn!(to = format_args!("{:#018x}", to.info.guid), error = %e, "handover not taken; staying master");
            action
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use sm_mad::mad::class;
    use sm_mad::smp::Direction;
    use sm_topology::gen;

    use super::*;
    use crate::sim::SimFabric;

    fn peer(guid: u64, priority: u8, state: SmState) -> Peer {
        Peer {
            port: SmPort {
                node: 1,
                port: 1,
                guid,
                lid: 1,
                path: vec![1],
            },
            info: SmInfoRepr {
                guid,
                sm_key: 0,
                act_count: 0,
                priority,
                state,
            },
            same_key: true,
        }
    }

    #[test]
    fn election_rules() {
        assert!(is_higher(5, 9, 4, 1));
        assert!(is_higher(5, 1, 5, 2));
        assert!(!is_higher(5, 2, 5, 2));
        assert!(!is_higher(4, 1, 5, 9));
        use SmState::{Discovering, Master, NotActive, Standby};
        // (our priority, our GUID, the peers, the outcome)
        let cases = [
            // Alone: master.
            (0, 10, vec![], Decision::Master),
            // A master that exists stays master, even below us.
            (15, 1, vec![peer(20, 0, Master)], Decision::Standby(0)),
            // Two masters: the higher one.
            (
                15,
                1,
                vec![peer(20, 3, Master), peer(30, 7, Master)],
                Decision::Standby(1),
            ),
            // No master: priority first, then the lower GUID.
            (5, 10, vec![peer(20, 6, Standby)], Decision::Standby(0)),
            (5, 10, vec![peer(20, 4, Standby)], Decision::Master),
            (5, 10, vec![peer(9, 5, Discovering)], Decision::Standby(0)),
            (5, 10, vec![peer(11, 5, Discovering)], Decision::Master),
            (
                5,
                10,
                vec![
                    peer(11, 5, Standby),
                    peer(3, 5, Standby),
                    peer(2, 1, Standby),
                ],
                Decision::Standby(1),
            ),
            // NotActive SMs take no part.
            (0, 10, vec![peer(1, 15, NotActive)], Decision::Master),
        ];
        for (priority, guid, peers, want) in cases {
            assert_eq!(
                elect(priority, guid, &peers),
                want,
                "priority {priority}, GUID {guid}, peers {peers:?}"
            );
        }
    }

    fn mad_of(repr: &smp::Repr) -> Vec<u8> {
        let mut mad = Mad::zeroed();
        repr.emit(&mut mad.smp_mut());
        mad.0.to_vec()
    }

    fn sminfo_data(info: SmInfoRepr) -> [u8; DATA_LEN] {
        let mut data = [0u8; DATA_LEN];
        info.emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
        data
    }

    fn parse_answer(mad: &[u8]) -> (smp::Repr, SmInfoRepr) {
        let repr =
            smp::Repr::parse(&smp::Packet::new_checked(mad).expect("256 bytes")).expect("an SMP");
        let info =
            SmInfoRepr::parse(&SmInfoPacket::new_checked(&repr.data[..sm_info::LEN]).expect("len"))
                .expect("SMInfo");
        (repr, info)
    }

    /// A DR request as it reaches the SM at the end of a 2-hop path: hop
    /// pointer and return path filled in on the way.
    fn arrived(mut request: smp::Repr) -> smp::Repr {
        if let Routing::Directed(dr) = &mut request.routing {
            dr.hop_pointer = dr.hop_count + 1;
            dr.return_path[1] = 7;
            dr.return_path[2] = 2;
        }
        request
    }

    #[test]
    fn get_is_answered_along_the_way_it_came() {
        let state = SmInfoState::new(0xabc, 9, 0x55);
        state.set_state(SmState::Standby);
        let request = arrived(
            smp::Repr::directed_get(0x1234_0000_0042, attr::SM_INFO, 0, 0, &[3, 1]).unwrap(),
        );
        let reply = answer(&state, &mad_of(&request)).expect("answered");
        let raw = smp::Packet::new_checked(&reply[..]).unwrap();
        assert_eq!(raw.mgmt_class(), class::SUBN_DIRECTED);
        assert_eq!(raw.method(), method::GET_RESP);
        assert!(raw.direction_bit());
        assert_eq!(raw.smp_status(), 0);
        assert_eq!(raw.hop_pointer(), 3);
        assert_eq!(raw.hop_count(), 2);
        let (repr, info) = parse_answer(&reply);
        assert_eq!(repr.transaction_id, 0x1234_0000_0042);
        let dr = repr.directed().unwrap();
        assert_eq!(dr.direction, Direction::Inbound);
        assert_eq!(dr.initial_ports(), &[3, 1]);
        assert_eq!(dr.return_ports(), &[7, 2]);
        assert_eq!((dr.dr_slid, dr.dr_dlid), (0xffff, 0xffff));
        // A plain Get proves no key: the SM_Key field is 0.
        assert_eq!(
            info,
            SmInfoRepr {
                guid: 0xabc,
                sm_key: 0,
                act_count: 0,
                priority: 9,
                state: SmState::Standby
            }
        );

        // LID-routed: no D bit; ActCount is what the SM loop made it,
        // however many answers the responder gives.
        state.set_state(SmState::Master);
        state.bump_activity();
        let lid = smp::Repr::lid_get(7, attr::SM_INFO, 0, 0);
        for _ in 0..3 {
            let reply = answer(&state, &mad_of(&lid)).expect("answered");
            let (repr, info) = parse_answer(&reply);
            assert_eq!(repr.routing, Routing::Lid);
            assert_eq!(repr.method, method::GET_RESP);
            assert_eq!(reply[1], class::SUBN_LID);
            assert_eq!((info.state, info.act_count), (SmState::Master, 1));
        }
    }

    #[test]
    fn other_attributes_methods_and_non_requests() {
        let state = SmInfoState::new(1, 0, 0);
        let get = smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &[1]).unwrap();
        let answer_mad = answer(&state, &mad_of(&get)).expect("answered");
        let raw = smp::Packet::new_checked(&answer_mad[..]).unwrap();
        assert_eq!(raw.smp_status(), status::UNSUPPORTED_METHOD_ATTR);
        assert!(raw.direction_bit());
        let mut send = smp::Repr::lid_get(1, attr::SM_INFO, 0, 0);
        send.method = method::SEND;
        let answer_mad = answer(&state, &mad_of(&send)).expect("answered");
        assert_eq!(
            smp::Packet::new_checked(&answer_mad[..])
                .unwrap()
                .smp_status(),
            status::UNSUPPORTED_METHOD
        );
        // Responses, traps and garbage get no answer.
        let resp = get.response(0, [0; DATA_LEN]);
        assert_eq!(answer(&state, &mad_of(&resp)), None);
        let mut trap = smp::Repr::lid_get(1, attr::NOTICE, 0, 0);
        trap.method = method::TRAP;
        assert_eq!(answer(&state, &mad_of(&trap)), None);
        assert_eq!(answer(&state, &[1, 2, 3]), None);
    }

    fn control_from(state: &SmInfoState, modifier: u32, sender: SmInfoRepr) -> (u16, SmInfoRepr) {
        let set = smp::Repr::directed_set(9, attr::SM_INFO, modifier, 0, &[1], sminfo_data(sender))
            .unwrap();
        let answer = answer(state, &mad_of(&set)).expect("answered");
        let (repr, info) = parse_answer(&answer);
        assert_eq!(repr.attribute_modifier, modifier);
        (repr.status, info)
    }

    fn sm(guid: u64, state: SmState) -> SmInfoRepr {
        SmInfoRepr {
            guid,
            sm_key: 0,
            act_count: 0,
            priority: 1,
            state,
        }
    }

    /// SubnSet(SMInfo) `ctl` from SM 7 in `from`: the status and the
    /// state the answer gives.
    fn control_by_7(me: &SmInfoState, ctl: u32, from: SmState) -> (u16, SmState) {
        let (st, info) = control_from(me, ctl, sm(7, from));
        (st, info.state)
    }

    /// Each of `controls` from SM 7 in `from` is refused in our state.
    fn refused(me: &SmInfoState, controls: &[u32], from: SmState) {
        for &ctl in controls {
            assert_eq!(
                control_by_7(me, ctl, from).0,
                status::INVALID_ATTR_VALUE,
                "control {ctl} from a {from:?} SM in {:?}",
                me.state()
            );
        }
    }

    #[test]
    fn controls_follow_the_state_machine() {
        use SmState::{Master, NotActive, Standby};
        let me = SmInfoState::new(2, 3, 0);
        me.set_state(Standby);
        // Only a master commands.
        refused(&me, &[control::HANDOVER], Standby);
        assert_eq!(me.state(), Standby);
        assert_eq!(me.take_control(), None);
        // STANDBY is not a transition from Standby; 9 is no control.
        refused(&me, &[control::STANDBY, 9], Master);
        // DISABLE → NotActive; then only STANDBY brings it back.
        assert_eq!(control_by_7(&me, control::DISABLE, Master), (0, NotActive));
        assert_eq!(me.take_control(), Some(Control::Disable { from: 7 }));
        refused(&me, &[control::HANDOVER, control::DISCOVER], Master);
        assert_eq!(control_by_7(&me, control::STANDBY, Master), (0, Standby));
        assert_eq!(me.take_control(), Some(Control::Standby { from: 7 }));
        // HANDOVER → Master; ACKNOWLEDGE from the old master, now standby.
        assert_eq!(control_by_7(&me, control::HANDOVER, Master), (0, Master));
        assert_eq!(control_by_7(&me, control::ACKNOWLEDGE, Standby).0, 0);
        refused(&me, &[control::DISABLE], Master);
        assert_eq!(me.take_control(), Some(Control::Handover { from: 7 }));
        assert_eq!(me.take_control(), Some(Control::Acknowledge { from: 7 }));
        assert_eq!(me.take_control(), None);
        assert_eq!(me.state(), SmState::Master);
    }

    #[test]
    fn a_wrong_sm_key_is_refused_and_not_shown() {
        let me = SmInfoState::new(2, 3, 0x1111);
        me.set_state(SmState::Standby);
        let mut sender = sm(7, SmState::Master);
        sender.sm_key = 0x2222;
        let (st, info) = control_from(&me, control::HANDOVER, sender);
        assert_eq!(
            (st, info.sm_key, info.state),
            (status::INVALID_ATTR_VALUE, 0, SmState::Standby)
        );
        sender.sm_key = 0x1111;
        let (st, info) = control_from(&me, control::HANDOVER, sender);
        assert_eq!((st, info.sm_key, info.state), (0, 0x1111, SmState::Master));
    }

    #[test]
    fn the_responder_answers_until_its_queue_closes() {
        let state = Arc::new(SmInfoState::new(5, 1, 0));
        let (tx, rx) = mpsc::sync_channel(4);
        let (out_tx, out_rx) = mpsc::channel();
        let st = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            serve(&st, &rx, |to, mad| {
                out_tx
                    .send((to.slid, mad.to_vec()))
                    .map_err(|e| TransportError::Closed(e.to_string()))
            })
        });
        let get = smp::Repr::lid_get(3, attr::SM_INFO, 0, 0);
        for (slid, mad) in [(12, mad_of(&get)), (13, vec![0; 8]), (14, mad_of(&get))] {
            tx.send(IncomingMad { slid, sqpn: 0, mad }).unwrap();
        }
        drop(tx);
        thread.join().expect("responder ends when the queue closes");
        let got: Vec<(u16, Vec<u8>)> = out_rx.iter().collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![12, 14]);
        assert_eq!(parse_answer(&got[0].1).1.guid, 5);
    }

    /// The embedded fabric as seen from host 0, with another SM's SMInfo
    /// answers that can be silenced (its process died) after some polls.
    /// Called with the fabric and the count at every SMInfo Get.
    type OnGet = Box<dyn FnMut(&mut SimFabric, usize)>;

    struct Fake {
        fabric: SimFabric,
        sminfo_gets: usize,
        silent_after: Option<usize>,
        on_get: Option<OnGet>,
        /// LID-routed MADs sent, with their DLID.
        lid_routed: Vec<(u16, Vec<u8>)>,
        /// An smcore SM behind the other host's port: SMInfo requests are
        /// answered by its responder code instead of the simulated SMInfo.
        smcore_peer: Option<Arc<SmInfoState>>,
    }

    impl SmpPort for Fake {
        fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
            let is_sminfo_get = mad.len() > 17
                && u16::from_be_bytes([mad[16], mad[17]]) == attr::SM_INFO
                && mad[3] == method::GET;
            if is_sminfo_get {
                self.sminfo_gets += 1;
                if let Some(hook) = self.on_get.as_mut() {
                    hook(&mut self.fabric, self.sminfo_gets);
                }
                if self.silent_after.is_some_and(|n| self.sminfo_gets > n) {
                    return Ok(None);
                }
            }
            let is_sminfo = mad.len() > 17 && u16::from_be_bytes([mad[16], mad[17]]) == attr::SM_INFO;
            if let (true, Some(peer)) = (is_sminfo, &self.smcore_peer) {
                return Ok(answer(peer, mad));
            }
            Ok(self.fabric.handle(mad))
        }

        fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
            self.lid_routed.push((dlid, mad.to_vec()));
            Ok(None)
        }
    }

    /// A two-leaf fabric with the SM on host 0; `other` is a host on the
    /// other leaf, and its port GUID.
    fn fabric() -> (SimFabric, usize, u64, u64) {
        let topo = gen::fat_tree_2level(2, 1, 2, 1).unwrap();
        let fabric = SimFabric::from_topology(&topo, 0, 1).unwrap();
        let other = topo.nodes.iter().rposition(|n| !n.is_switch()).unwrap();
        assert_ne!(other, 0);
        let guid_of = |n: usize| topo.nodes[n].port_guids[1];
        (fabric, other, guid_of(0), guid_of(other))
    }

    fn fast() -> StandbyOptions {
        StandbyOptions {
            poll_interval: Duration::from_millis(5),
            poll_retries: 3,
            smp_retries: 0,
            // The fixture's masters keep one ActCount; the tests of a hung
            // master set their own limit.
            stuck_polls: 1000,
            m_keys: crate::sweep::MKeys::off(),
        }
    }

    fn fake(fabric: SimFabric) -> Fake {
        Fake {
            fabric,
            sminfo_gets: 0,
            silent_after: None,
            on_get: None,
            lid_routed: Vec::new(),
            smcore_peer: None,
        }
    }

    /// [`fabric`] with another SM on the other leaf's host answering an
    /// SMInfo of its own port GUID and the given fields: the port, that
    /// host's index and the SMInfo it answers.
    fn with_peer(act_count: u32, priority: u8, state: SmState) -> (Fake, usize, SmInfoRepr) {
        let (mut f, other, _, other_guid) = fabric();
        let info = SmInfoRepr {
            guid: other_guid,
            sm_key: 0,
            act_count,
            priority,
            state,
        };
        f.set_sm_info(other, 1, Some(info)).unwrap();
        (fake(f), other, info)
    }

    fn master_after(from: Option<TakenFrom>) -> Arbitration {
        Arbitration::Master {
            took_over_from: from,
        }
    }

    #[test]
    fn alone_on_the_fabric_is_master_at_once() {
        let (f, _, me, _) = fabric();
        let mut port = fake(f);
        let state = SmInfoState::new(0, 0, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            arbitrate(&mut port, &state, &fast(), &stop),
            master_after(None)
        );
        assert_eq!(state.guid(), me, "the GUID is learnt from discovery");
        assert_eq!(state.state(), SmState::Master);
        assert_eq!(port.sminfo_gets, 0);
    }

    #[test]
    fn a_standby_takes_over_when_the_master_stops_answering() {
        // The master has a lower priority than us, yet stays master.
        let (mut port, _, theirs) = with_peer(1, 1, SmState::Master);
        port.silent_after = Some(5);
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            arbitrate(&mut port, &state, &fast(), &stop),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        // 1 at election, 4 answered polls, 3 silent ones, 1 at the
        // re-election (silent too: the dead SM's port may still say IsSM).
        assert_eq!(port.sminfo_gets, 1 + 4 + 3 + 1);
    }

    #[test]
    fn a_poll_answered_again_in_time_resets_the_count() {
        let (mut port, other, theirs) = with_peer(1, 1, SmState::Master);
        // Get 1 elects; polls (gets 2..) lose 3 and 4, answer 5, lose 6
        // and 7: never 3 misses in a row, so no takeover. At get 8 the
        // master has stood down (NotActive): elect again (get 9), and we
        // are master without having taken over from anyone.
        port.on_get = Some(Box::new(move |fabric, n| {
            let state = if n >= 8 {
                SmState::NotActive
            } else {
                SmState::Master
            };
            fabric
                .set_sm_info(other, 1, Some(SmInfoRepr { state, ..theirs }))
                .unwrap();
        }));
        struct Drops<'a>(&'a mut Fake);
        impl SmpPort for Drops<'_> {
            fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
                let answer = self.0.send(mad)?;
                let sminfo = u16::from_be_bytes([mad[16], mad[17]]) == attr::SM_INFO;
                Ok(if sminfo && matches!(self.0.sminfo_gets, 3 | 4 | 6 | 7) {
                    None
                } else {
                    answer
                })
            }
        }
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        let got = arbitrate(&mut Drops(&mut port), &state, &fast(), &stop);
        assert_eq!(got, master_after(None));
        assert_eq!(port.sminfo_gets, 9);
    }

    #[test]
    fn a_higher_sm_is_waited_for_and_a_lower_one_is_not() {
        let (mut port, _, _) = with_peer(0, 2, SmState::Discovering);
        let state = SmInfoState::new(0, 3, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            arbitrate(&mut port, &state, &fast(), &stop),
            master_after(None)
        );

        // A higher one in Discovering: stand by; it hands over after a few
        // polls (from another thread, as the responder would).
        let (mut port, _, discovering) = with_peer(0, 4, SmState::Discovering);
        let higher = SmInfoRepr {
            state: SmState::Master,
            ..discovering
        };
        let state = Arc::new(SmInfoState::new(0, 3, 0));
        let st = Arc::clone(&state);
        let handover = std::thread::spawn(move || {
            while st.state() != SmState::Standby {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(20));
            let set = smp::Repr::directed_set(
                1,
                attr::SM_INFO,
                control::HANDOVER,
                0,
                &[1],
                sminfo_data(higher),
            )
            .unwrap();
            answer(&st, &mad_of(&set)).expect("answered")
        });
        let got = arbitrate(&mut port, &state, &fast(), &stop);
        let reply = handover.join().unwrap();
        assert_eq!(parse_answer(&reply).0.status, 0);
        assert_eq!(
            got,
            master_after(Some(TakenFrom::Handover { guid: higher.guid }))
        );
        assert!(port.sminfo_gets >= 2, "polled while standing by");
    }

    #[test]
    fn disabled_waits_for_standby_and_stop_ends_it() {
        let (mut port, _, master) = with_peer(0, 0, SmState::Master);
        let state = Arc::new(SmInfoState::new(0, 3, 0));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (Arc::clone(&state), Arc::clone(&stop));
        let driver = std::thread::spawn(move || {
            let send = |ctl| {
                let set =
                    smp::Repr::directed_set(1, attr::SM_INFO, ctl, 0, &[1], sminfo_data(master))
                        .unwrap();
                parse_answer(&answer(&st, &mad_of(&set)).expect("answered"))
                    .0
                    .status
            };
            while st.state() != SmState::Standby {
                std::thread::sleep(Duration::from_millis(2));
            }
            assert_eq!(send(control::DISABLE), 0);
            std::thread::sleep(Duration::from_millis(50));
            let disabled = st.state();
            assert_eq!(send(control::STANDBY), 0);
            std::thread::sleep(Duration::from_millis(50));
            sp.store(true, Ordering::Relaxed);
            disabled
        });
        assert_eq!(
            arbitrate(&mut port, &state, &fast(), &stop),
            Arbitration::Stopped
        );
        assert_eq!(driver.join().unwrap(), SmState::NotActive);
        assert_eq!(state.state(), SmState::Standby);
    }

    #[test]
    fn a_master_hands_over_to_a_higher_standby() {
        let (mut port, _, standby) = with_peer(0, 9, SmState::Standby);
        let other_guid = standby.guid;
        let state = SmInfoState::new(0, 3, 0);
        state.set_state(SmState::Master);
        {
            let mut client = SmpClient::new(&mut port, 0);
            let (fabric, _) = discover(&mut client).unwrap();
            state.set_guid(fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid);
            // A lower standby: nothing to do.
            let lower_state = SmInfoState::new(state.guid(), 10, 0);
            lower_state.set_state(SmState::Master);
            assert_eq!(
                check_peers(&mut client, &fabric, &lower_state),
                PeerAction::Stay
            );
            assert_eq!(
                check_peers(&mut client, &fabric, &state),
                PeerAction::HandedOver { to: other_guid }
            );
        }
        assert_eq!(state.state(), SmState::Standby);
        // The simulated peer took the HANDOVER.
        let mut client = SmpClient::new(&mut port, 0);
        let (fabric, _) = discover(&mut client).unwrap();
        let peers = read_peers(&mut client, &fabric, &state);
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].info.state, SmState::Master);
        assert_eq!(
            elect(state.priority(), state.guid(), &peers),
            Decision::Standby(0)
        );
    }

    #[test]
    fn a_standby_above_its_master_asks_for_a_handover_with_trap_144() {
        // LIDs first, as the master would have assigned them.
        let (mut port, other, theirs) = with_peer(1, 1, SmState::Master);
        let mut g2l = crate::sweep::Guid2Lid::default();
        assign_lids(&mut port, &mut g2l);
        let f = &port.fabric;
        let (master_lid, our_lid) = (f.port_lid(other, 1).unwrap(), f.port_lid(0, 1).unwrap());
        // Election, 13 answered polls (trap at the 1st and the 13th: every
        // 4 x retries), then silence.
        port.silent_after = Some(14);
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        let got = arbitrate(&mut port, &state, &fast(), &stop);
        assert_eq!(
            got,
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        assert_eq!(
            port.lid_routed.len(),
            2,
            "one trap at the first poll, one 12 polls later"
        );
        let (dlid, mad) = &port.lid_routed[0];
        assert_eq!(*dlid, master_lid);
        let smp = smp::Repr::parse(&smp::Packet::new_checked(&mad[..]).unwrap()).unwrap();
        assert_eq!(
            (smp.method, smp.attribute_id, smp.routing),
            (method::TRAP, attr::NOTICE, Routing::Lid)
        );
        let notice = sm_mad::notice::Repr::parse(
            &sm_mad::notice::Packet::new_checked(&smp.data[..]).unwrap(),
        )
        .unwrap();
        assert_eq!(notice.trap_number(), Some(144));
        assert_eq!(notice.issuer_lid, our_lid);
        match notice.details {
            sm_mad::notice::Details::CapabilityChange {
                lid,
                change_flags,
                capability_mask,
                ..
            } => {
                assert_eq!((lid, change_flags), (our_lid, TRAP_144_SM_PRIORITY_CHANGE));
                assert_ne!(capability_mask, 0);
            }
            other => panic!("trap 144 details expected, got {other:?}"),
        }

        // A master above us gets no trap.
        let (mut port, _, _) = with_peer(1, 9, SmState::Master);
        assign_lids(&mut port, &mut g2l);
        port.silent_after = Some(6);
        let got = arbitrate(&mut port, &SmInfoState::new(0, 8, 0), &fast(), &stop);
        assert!(matches!(
            got,
            Arbitration::Master {
                took_over_from: Some(_)
            }
        ));
        assert!(port.lid_routed.is_empty());
    }

    #[test]
    fn of_two_masters_the_lower_one_yields() {
        for (their_priority, expected) in [(9, true), (1, false)] {
            let (mut port, _, master) = with_peer(0, their_priority, SmState::Master);
            let mut client = SmpClient::new(&mut port, 0);
            let (fabric, _) = discover(&mut client).unwrap();
            let state = SmInfoState::new(
                fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid,
                5,
                0,
            );
            state.set_state(SmState::Master);
            let got = check_peers(&mut client, &fabric, &state);
            if expected {
                assert_eq!(got, PeerAction::HandedOver { to: master.guid });
                assert_eq!(state.state(), SmState::Standby);
            } else {
                // The lower master is the one to yield; we carry on.
                assert_eq!(got, PeerAction::Stay);
                assert!(state.is_master());
            }
        }
        // A master that another master handed over to sweeps again.
        let (f, _, me, _) = fabric();
        let mut port = fake(f);
        let mut client = SmpClient::new(&mut port, 0);
        let (fabric, _) = discover(&mut client).unwrap();
        let state = SmInfoState::new(me, 5, 0);
        state.set_state(SmState::Master);
        let from = SmInfoRepr {
            guid: 77,
            sm_key: 0,
            act_count: 0,
            priority: 1,
            state: SmState::Master,
        };
        assert_eq!(control_from(&state, control::HANDOVER, from).0, 0);
        assert_eq!(
            check_peers(&mut client, &fabric, &state),
            PeerAction::SweepNow
        );
        assert_eq!(check_peers(&mut client, &fabric, &state), PeerAction::Stay);
    }

    /// The plain embedded-fabric transport, to program LIDs before a test.
    struct SimPortFor<'a>(&'a mut SimFabric);

    impl SmpPort for SimPortFor<'_> {
        fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
            Ok(self.0.handle(mad))
        }
    }

    /// A sweep of the fake port's fabric, so that every port has the LID a
    /// master would have given it.
    fn assign_lids(port: &mut Fake, g2l: &mut crate::sweep::Guid2Lid) {
        crate::sweep::sweep(
            &mut SimPortFor(&mut port.fabric),
            &crate::sweep::SweepOptions::default(),
            g2l,
        )
        .unwrap();
    }

    #[test]
    fn sm_ports_skip_our_own_and_disabled_ones() {
        let (mut f, other, me, other_guid) = fabric();
        let info = SmInfoRepr {
            guid: other_guid,
            ..SmInfoRepr::default()
        };
        f.set_sm_info(other, 1, Some(info)).unwrap();
        // Our own port advertises IsSM too.
        f.set_sm_info(
            0,
            1,
            Some(SmInfoRepr {
                guid: me,
                ..SmInfoRepr::default()
            }),
        )
        .unwrap();
        let mut port = fake(f);
        let mut client = SmpClient::new(&mut port, 0);
        let (mut fabric, _) = discover(&mut client).unwrap();
        let found = sm_ports(&fabric);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].guid, other_guid);
        assert!(!found[0].path.is_empty());
        let node = found[0].node;
        if let Some(i) = fabric.nodes[node].ports[1].info.as_mut() {
            i.capability_mask |= capability::IS_SM_DISABLED;
        }
        assert!(sm_ports(&fabric).is_empty());
    }

    /// A plain SubnGet(SMInfo) with `payload` in its data, as a rogue
    /// host would send it: the SM_Key field of the answer.
    fn key_shown(state: &SmInfoState, payload: Option<SmInfoRepr>) -> u64 {
        let mut get = smp::Repr::directed_get(0x99, attr::SM_INFO, 0, 0, &[1]).unwrap();
        if let Some(p) = payload {
            get.data = sminfo_data(p);
        }
        let reply = answer(state, &mad_of(&get)).expect("answered");
        let (repr, info) = parse_answer(&reply);
        assert_eq!(repr.status, 0);
        info.sm_key
    }

    #[test]
    fn sminfo_get_shows_the_key_only_to_a_requester_that_proved_it() {
        let me = SmInfoState::new(0xabc, 3, 0x1111);
        for st in [SmState::Discovering, SmState::Standby, SmState::Master] {
            me.set_state(st);
            // Untrusted: a Get without a payload (sminfo, OpenSM), or with
            // a wrong key in it, never sees the key.
            assert_eq!(key_shown(&me, None), 0, "plain Get in {st:?}");
            let mut asker = sm(7, SmState::Standby);
            asker.sm_key = 0x2222;
            let shown = key_shown(&me, Some(asker));
            assert_ne!(shown, 0x1111, "a wrong key in the Get got the key ({st:?})");
            // The requester that shows our key sees it.
            asker.sm_key = 0x1111;
            assert_eq!(key_shown(&me, Some(asker)), 0x1111, "{st:?}");
        }
    }

    #[test]
    fn a_rogue_learns_no_key_and_commands_nothing() {
        // The rogue reads our SMInfo, then sends DISABLE as a "master"
        // with whatever key it read: refused, our standby stays standby.
        let me = SmInfoState::new(0xabc, 3, 0x1111);
        me.set_state(SmState::Standby);
        let learnt = key_shown(&me, None);
        let mut rogue = sm(7, SmState::Master);
        rogue.priority = 15;
        rogue.sm_key = learnt;
        for ctl in [control::DISABLE, control::DISCOVER, control::HANDOVER] {
            let (st, info) = control_from(&me, ctl, rogue);
            assert_eq!(st, status::INVALID_ATTR_VALUE, "control {ctl} obeyed");
            assert_eq!(info.sm_key, 0, "a refused Set showed the key");
        }
        assert_eq!(me.state(), SmState::Standby);
        assert_eq!(me.take_control(), None);

        // A key of 0 is a key like any other: it does not turn the check
        // off (a master of another key cannot park or promote us).
        let zero = SmInfoState::new(0xabc, 3, 0);
        zero.set_state(SmState::Standby);
        rogue.sm_key = 0x2222;
        for ctl in [control::DISABLE, control::HANDOVER, control::DISCOVER] {
            assert_eq!(
                control_from(&zero, ctl, rogue).0,
                status::INVALID_ATTR_VALUE,
                "control {ctl} with a wrong key obeyed by an SM of key 0"
            );
        }
        assert_eq!(zero.state(), SmState::Standby);
        rogue.sm_key = 0;
        assert_eq!(control_from(&zero, control::DISABLE, rogue).0, 0);
    }

    /// [`with_peer`] where the peer's SMInfo shows `key`.
    fn with_keyed_peer(priority: u8, state: SmState, key: u64) -> (Fake, usize, SmInfoRepr) {
        let (mut port, other, mut info) = with_peer(0, priority, state);
        info.sm_key = key;
        port.fabric.set_sm_info(other, 1, Some(info)).unwrap();
        (port, other, info)
    }

    #[test]
    fn a_higher_sm_of_another_key_is_not_handed_the_subnet() {
        for our_key in [0, 1] {
            for their_state in [SmState::Standby, SmState::Master] {
                let (mut port, _, _) = with_keyed_peer(15, their_state, 0x2222);
                let mut client = SmpClient::new(&mut port, 0);
                let (fabric, _) = discover(&mut client).unwrap();
                let me = fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid;
                let state = SmInfoState::new(me, 1, our_key);
                state.set_state(SmState::Master);
                assert_eq!(
                    check_peers(&mut client, &fabric, &state),
                    PeerAction::Stay,
                    "key {our_key}: handed over to a {their_state:?} SM of another key"
                );
                assert!(state.is_master());
            }
        }
    }

    #[test]
    fn a_master_of_another_key_does_not_park_us() {
        // A "master" of priority 15 and another key on a fresh fabric
        // (our port's MasterSMLID is not its LID): we are master at once.
        for our_key in [0, 1] {
            let (mut port, _, _) = with_keyed_peer(15, SmState::Master, 0x2222);
            let stop = Arc::new(AtomicBool::new(false));
            let guard = Arc::clone(&stop);
            // Standing by for it would poll forever: stop, to fail.
            port.on_get = Some(Box::new(move |_, n| {
                if n >= 30 {
                    guard.store(true, Ordering::Relaxed);
                }
            }));
            let state = SmInfoState::new(0, 3, our_key);
            assert_eq!(
                arbitrate(&mut port, &state, &fast(), &stop),
                master_after(None),
                "key {our_key}"
            );
            assert!(port.sminfo_gets < 30);
        }
    }

    /// Points our port's MasterSMLID (host 0, port 1) at `lid`, as the
    /// master that last swept did.
    fn set_our_master_sm_lid(port: &mut Fake, lid: u16) {
        let mut sim = SimPortFor(&mut port.fabric);
        let mut client = SmpClient::new(&mut sim, 0);
        let data = client.get(attr::PORT_INFO, 1, &[]).unwrap();
        let mut info = sm_mad::port_info::Repr::parse(
            &sm_mad::port_info::Packet::new_checked(&data[..sm_mad::port_info::LEN]).unwrap(),
        )
        .unwrap();
        info.master_sm_lid = lid;
        info.port_state = sm_mad::port_info::PortState::NoChange;
        info.port_physical_state = sm_mad::port_info::PhysState::NoChange;
        let mut out = [0u8; DATA_LEN];
        info.emit(&mut sm_mad::port_info::Packet::new_unchecked(&mut out[..]));
        client.set(attr::PORT_INFO, 1, &[], out).unwrap();
    }

    #[test]
    fn a_master_of_another_key_that_holds_the_subnet_is_waited_for_not_obeyed() {
        let (mut port, other, theirs) = with_keyed_peer(1, SmState::Master, 0x2222);
        let mut g2l = crate::sweep::Guid2Lid::default();
        assign_lids(&mut port, &mut g2l);
        let their_lid = port.fabric.port_lid(other, 1).unwrap();
        set_our_master_sm_lid(&mut port, their_lid);
        // It stops answering after a few polls: we take over then, not
        // before, and it got no trap 144 (no request to an SM of another
        // key).
        port.silent_after = Some(6);
        let state = SmInfoState::new(0, 8, 0x1111);
        let stop = AtomicBool::new(false);
        assert_eq!(
            arbitrate(&mut port, &state, &fast(), &stop),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        assert!(port.sminfo_gets > 6, "took over while it answered");
        assert!(port.lid_routed.is_empty(), "trap 144 sent to an SM of another key");
    }

    #[test]
    fn smcore_sms_prove_the_key_to_each_other_without_showing_it() {
        for (their_key, handed_over) in [(0x77, true), (0x78, false)] {
            let (mut port, _, other_guid, _) = {
                let (f, other, me, other_guid) = fabric();
                let mut port = fake(f);
                // IsSM on the other host's port; its SMInfo comes from a
                // real responder.
                port.fabric
                    .set_sm_info(other, 1, Some(sm(other_guid, SmState::Standby)))
                    .unwrap();
                (port, me, other_guid, other)
            };
            let peer = Arc::new(SmInfoState::new(other_guid, 9, their_key));
            peer.set_state(SmState::Standby);
            port.smcore_peer = Some(Arc::clone(&peer));
            let mut client = SmpClient::new(&mut port, 0);
            let (fabric, _) = discover(&mut client).unwrap();
            let me = fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid;
            let state = SmInfoState::new(me, 3, 0x77);
            state.set_state(SmState::Master);
            let peers = read_peers(&mut client, &fabric, &state);
            assert_eq!(peers.len(), 1);
            assert_eq!(peers[0].same_key, handed_over, "key {their_key:#x}");
            assert_ne!(peers[0].info.sm_key, their_key, "the peer showed its key");
            let got = check_peers(&mut client, &fabric, &state);
            if handed_over {
                assert_eq!(got, PeerAction::HandedOver { to: other_guid });
                assert_eq!(peer.state(), SmState::Master, "the peer took the HANDOVER");
            } else {
                assert_eq!(got, PeerAction::Stay);
                assert_eq!(peer.state(), SmState::Standby);
            }
        }
    }

    #[test]
    fn a_master_that_answers_but_whose_act_count_stops_is_taken_over() {
        // The master's responder answers every poll, in state Master, but
        // its ActCount stays at 5: its SM loop is hung.
        let (mut port, _, theirs) = with_peer(5, 1, SmState::Master);
        let stop = Arc::new(AtomicBool::new(false));
        let guard = Arc::clone(&stop);
        port.on_get = Some(Box::new(move |_, n| {
            if n >= 60 {
                guard.store(true, Ordering::Relaxed);
            }
        }));
        let options = StandbyOptions {
            poll_interval: Duration::from_millis(5),
            poll_retries: 3,
            smp_retries: 0,
            ..StandbyOptions::default()
        };
        let state = SmInfoState::new(0, 8, 0);
        assert_eq!(
            arbitrate(&mut port, &state, &options, &stop),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        // The election, the stuck polls, the re-election (where the hung
        // master, answering still, is left out).
        assert!(port.sminfo_gets < 60, "{} SMInfo Gets", port.sminfo_gets);

        // Its ActCount moving, the same master is stood by for.
        let (mut port, other, theirs) = with_peer(5, 1, SmState::Master);
        let stop = Arc::new(AtomicBool::new(false));
        let guard = Arc::clone(&stop);
        port.on_get = Some(Box::new(move |fabric, n| {
            let info = SmInfoRepr {
                act_count: n as u32,
                ..theirs
            };
            fabric.set_sm_info(other, 1, Some(info)).unwrap();
            if n >= 60 {
                guard.store(true, Ordering::Relaxed);
            }
        }));
        let state = SmInfoState::new(0, 8, 0);
        assert_eq!(
            arbitrate(&mut port, &state, &options, &stop),
            Arbitration::Stopped
        );
        assert_eq!(state.state(), SmState::Standby);
    }

    #[test]
    fn the_sm_loop_moves_act_count_through_its_port() {
        let (f, _, _, _) = fabric();
        let mut port = fake(f);
        let state = SmInfoState::new(0, 0, 0);
        let mut beat = ActivityPort::new(&mut port, &state);
        let mut client = SmpClient::new(&mut beat, 0);
        discover(&mut client).unwrap();
        let after_sweep = state.act_count();
        assert!(after_sweep > 0);
        beat.wait_trap(Duration::from_millis(1)).unwrap();
        assert_eq!(state.act_count(), after_sweep + 1);
    }

    #[test]
    fn a_master_of_another_key_does_not_keep_us_from_taking_over_a_dead_master() {
        // Our master A (our key, priority 1) on one host; a "master" R of
        // another key and priority 15 on another, answering all along. A
        // dies (its SM gone: no SMInfo, no IsSM); we take over from A,
        // R notwithstanding: it never held the subnet (our port's
        // MasterSMLID is A's LID).
        let topo = gen::fat_tree_2level(2, 1, 2, 1).unwrap();
        let hosts: Vec<usize> = (1..topo.nodes.len())
            .filter(|&i| !topo.nodes[i].is_switch())
            .collect();
        let (a, r) = (hosts[0], hosts[hosts.len() - 1]);
        for our_key in [0, 1] {
            let mut f = fake(SimFabric::from_topology(&topo, 0, 1).unwrap());
            let a_info = SmInfoRepr {
                sm_key: our_key,
                priority: 1,
                ..sm(topo.nodes[a].port_guids[1], SmState::Master)
            };
            let r_info = SmInfoRepr {
                sm_key: 0x2222,
                priority: 15,
                ..sm(topo.nodes[r].port_guids[1], SmState::Master)
            };
            f.fabric.set_sm_info(a, 1, Some(a_info)).unwrap();
            f.fabric.set_sm_info(r, 1, Some(r_info)).unwrap();
            let mut g2l = crate::sweep::Guid2Lid::default();
            assign_lids(&mut f, &mut g2l);
            let a_lid = f.fabric.port_lid(a, 1).unwrap();
            set_our_master_sm_lid(&mut f, a_lid);
            let stop = Arc::new(AtomicBool::new(false));
            let guard = Arc::clone(&stop);
            f.on_get = Some(Box::new(move |fabric, n| {
                if n == 8 {
                    fabric.set_sm_info(a, 1, None).unwrap();
                }
                if n >= 60 {
                    guard.store(true, Ordering::Relaxed);
                }
            }));
            let state = SmInfoState::new(0, 3, our_key);
            assert_eq!(
                arbitrate(&mut f, &state, &fast(), &stop),
                master_after(Some(TakenFrom::Silent {
                    guid: a_info.guid
                })),
                "key {our_key}"
            );
        }
    }

    #[test]
    fn a_hung_master_is_not_handed_the_subnet_back_until_it_moves_again() {
        // A master above us (priority 9) hangs: we take over...
        let (mut port, other, theirs) = with_peer(5, 9, SmState::Master);
        let options = StandbyOptions {
            stuck_polls: 3,
            ..fast()
        };
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            arbitrate(&mut port, &state, &options, &stop),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        // ...and, though it ranks above us and says Master, do not hand it
        // the subnet back while its ActCount stays where it stopped.
        let mut client = SmpClient::new(&mut port, 0);
        let (fabric, _) = discover(&mut client).unwrap();
        assert_eq!(check_peers(&mut client, &fabric, &state), PeerAction::Stay);
        assert!(state.is_master());
        // Its loop runs again: the higher master gets the subnet.
        drop(client);
        port.fabric
            .set_sm_info(
                other,
                1,
                Some(SmInfoRepr {
                    act_count: 6,
                    ..theirs
                }),
            )
            .unwrap();
        let mut client = SmpClient::new(&mut port, 0);
        assert_eq!(
            check_peers(&mut client, &fabric, &state),
            PeerAction::HandedOver { to: theirs.guid }
        );
    }
}
