//! Trap intake: which traps may make the SM sweep.
//!
//! Any host can send an SMP Trap to the SM's LID, so a trap is a hint, not
//! a command. Before one costs a heavy sweep it has to
//!
//! * be a well-formed LID-routed SubnTrap(Notice) of a generic trap
//!   number the SM acts on (128 link state change, 144 capability change,
//!   145 system image GUID change); port error traps (129–131) and key
//!   violations (256–259) are logged and never sweep;
//! * name as IssuerLID the LID it came from, and, once a sweep has
//!   published the fabric, a LID that fabric holds (a forged or stale
//!   issuer is dropped);
//! * come from an issuer that is not flapping: more than
//!   [`TrapLimits::flap_traps`] sweep-causing traps within
//!   [`TrapLimits::flap_window`] silences that issuer for a hold-down that
//!   doubles while it keeps flapping (OpenSM disables such ports; we keep
//!   the port and let the light sweep, which reads every switch at every
//!   interval, find its real changes at the interval's pace);
//! * fit the global budget: at most [`TrapLimits::burst`] trap-caused heavy
//!   sweeps back to back, then one per [`TrapLimits::refill`]. A trap over
//!   budget is not lost: the sweep it asks for is deferred until the budget
//!   allows it, and every trap that arrives meanwhile is folded into it.
//!
//! The state is bounded: issuers are tracked only for LIDs of the fabric
//! (at most one entry each), each with at most `flap_traps + 1` times.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use sm_mad::mad::{attr, class, class_version, method, Header, BASE_VERSION, HEADER_LEN};
use sm_mad::notice::{trap, Source};
use sm_mad::{NoticePacket, NoticeRepr};

use crate::sweep::TrapMad;

/// Where the Notice starts in a LID-routed SMP: header, M_Key, reserved.
const SMP_DATA_OFFSET: usize = 64;

/// Bounds of the trap intake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrapLimits {
    /// Sweep-causing traps one issuer may send within `flap_window`.
    pub flap_traps: usize,
    /// The window `flap_traps` is counted in.
    pub flap_window: Duration,
    /// The first hold-down of a flapping issuer; doubled at each relapse.
    pub hold_down: Duration,
    /// The longest hold-down.
    pub max_hold_down: Duration,
    /// Trap-caused heavy sweeps allowed back to back.
    pub burst: u32,
    /// One more trap-caused heavy sweep is allowed per this much time.
    pub refill: Duration,
}

impl Default for TrapLimits {
    fn default() -> Self {
        TrapLimits {
            flap_traps: 8,
            flap_window: Duration::from_secs(30),
            hold_down: Duration::from_secs(60),
            max_hold_down: Duration::from_secs(900),
            burst: 4,
            refill: Duration::from_secs(2),
        }
    }
}

/// What a trap asks of the SM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrapVerdict {
    /// A topology or capability change: a heavy sweep.
    Sweep {
        /// The trap number.
        number: u16,
        /// The issuer.
        issuer: u16,
    },
    /// Worth a log line, not a sweep (port errors, key violations).
    Note {
        /// The trap number.
        number: u16,
        /// The issuer.
        issuer: u16,
    },
    /// Dropped, with the reason (logged at debug: a storm must not flood
    /// the log either).
    Drop(&'static str),
}

/// One issuer's recent sweep-causing traps and its hold-down.
#[derive(Debug, Default)]
struct Issuer {
    recent: VecDeque<Instant>,
    silenced_until: Option<Instant>,
    /// Its last trap, silenced or not.
    last: Option<Instant>,
    /// The hold-down the next relapse gets.
    next_hold_down: Option<Duration>,
}

/// Counts of the intake, for the status and the logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrapCounts {
    /// Traps that asked for a sweep and were let through.
    pub accepted: u64,
    /// Traps logged without a sweep.
    pub noted: u64,
    /// Malformed, forged or unknown traps.
    pub dropped: u64,
    /// Traps of an issuer in hold-down.
    pub suppressed: u64,
}

/// The trap intake (see the module documentation).
#[derive(Debug)]
pub struct TrapFilter {
    limits: TrapLimits,
    /// LIDs of the last published fabric; `None` before the first sweep.
    known: Option<HashSet<u16>>,
    issuers: HashMap<u16, Issuer>,
    /// Budget of trap-caused sweeps (fractional refill).
    tokens: f64,
    refilled: Instant,
    /// Counts so far.
    pub counts: TrapCounts,
}

impl TrapFilter {
    /// An intake with `limits`, knowing no fabric yet.
    pub fn new(limits: TrapLimits) -> Self {
        TrapFilter {
            limits,
            known: None,
            issuers: HashMap::new(),
            tokens: f64::from(limits.burst),
            refilled: Instant::now(),
            counts: TrapCounts::default(),
        }
    }

    /// The LIDs a sweep found: only they may issue traps from now on.
    /// Issuers that left are forgotten (this is what bounds the state).
    pub fn set_fabric(&mut self, lids: impl IntoIterator<Item = u16>) {
        let known: HashSet<u16> = lids.into_iter().filter(|&l| l != 0).collect();
        self.issuers.retain(|lid, _| known.contains(lid));
        self.known = Some(known);
    }

    /// Judges one trap that arrived at `now`.
    pub fn judge(&mut self, trap: &TrapMad, now: Instant) -> TrapVerdict {
        let verdict = self.classify(trap, now);
        match &verdict {
            TrapVerdict::Sweep { .. } => self.counts.accepted += 1,
            TrapVerdict::Note { .. } => self.counts.noted += 1,
            TrapVerdict::Drop(why) if *why == SILENCED => self.counts.suppressed += 1,
            TrapVerdict::Drop(_) => self.counts.dropped += 1,
        }
        verdict
    }

    fn classify(&mut self, trap: &TrapMad, now: Instant) -> TrapVerdict {
        let (number, issuer) = match parse(trap) {
            Ok(x) => x,
            Err(why) => return TrapVerdict::Drop(why),
        };
        if trap.slid != 0 && issuer != trap.slid {
            return TrapVerdict::Drop("IssuerLID is not the LID the trap came from");
        }
        if let Some(known) = &self.known {
            if !known.contains(&issuer) {
                return TrapVerdict::Drop("issuer is no port of the fabric");
            }
        }
        match number {
            trap::LINK_STATE_CHANGE | trap::CAPABILITY_CHANGE | trap::SYSTEM_IMAGE_GUID_CHANGE => {}
            trap::LINK_INTEGRITY..=trap::FLOW_CONTROL_WATCHDOG | trap::BAD_M_KEY..=trap::BAD_SWITCH_P_KEY => {
                return TrapVerdict::Note { number, issuer };
            }
            _ => return TrapVerdict::Drop("trap number the SM does not act on"),
        }
        if self.flapping(issuer, now) {
            return TrapVerdict::Drop(SILENCED);
        }
        TrapVerdict::Sweep { number, issuer }
    }

    /// Records a sweep-causing trap of `issuer`; true when it is (now) in
    /// hold-down.
    fn flapping(&mut self, issuer: u16, now: Instant) -> bool {
        let limits = self.limits;
        let entry = self.issuers.entry(issuer).or_default();
        // Quiet for as long as its next hold-down would last: its past is
        // forgiven. Traps during a hold-down count as noise too, so a port
        // that never stops flapping is never forgiven.
        if let (Some(last), Some(next)) = (entry.last, entry.next_hold_down) {
            if now.saturating_duration_since(last) > next {
                entry.next_hold_down = None;
            }
        }
        entry.last = Some(now);
        if let Some(until) = entry.silenced_until {
            if now < until {
                return true;
            }
            entry.silenced_until = None;
            entry.recent.clear();
        }
        while entry.recent.front().is_some_and(|&t| now.saturating_duration_since(t) > limits.flap_window) {
            entry.recent.pop_front();
        }
        entry.recent.push_back(now);
        if entry.recent.len() <= limits.flap_traps {
            return false;
        }
        let hold = entry.next_hold_down.unwrap_or(limits.hold_down);
        entry.silenced_until = Some(now + hold);
        entry.next_hold_down = Some((hold * 2).min(limits.max_hold_down));
        entry.recent.clear();
        tracing::warn!(
            issuer,
            hold_down_s = hold.as_secs(),
            "port is flapping: its traps cause no heavy sweep during the hold-down; \
             light sweeps still find its changes"
        );
        true
    }

    /// Whether a trap-caused heavy sweep may run at `now`; takes one unit
    /// of the budget when it may. When it may not, the caller keeps the
    /// sweep pending and asks again ([`Self::next_allowed`]).
    pub fn take_sweep(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the budget next allows a trap-caused heavy sweep.
    pub fn next_allowed(&mut self, now: Instant) -> Instant {
        self.refill(now);
        if self.tokens >= 1.0 {
            return now;
        }
        let missing = 1.0 - self.tokens;
        now + self.limits.refill.mul_f64(missing)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled);
        self.refilled = now;
        let per = self.limits.refill.as_secs_f64();
        let gained = if per > 0.0 { elapsed.as_secs_f64() / per } else { f64::from(self.limits.burst) };
        self.tokens = (self.tokens + gained).min(f64::from(self.limits.burst));
    }
}

const SILENCED: &str = "issuer in flapping hold-down";

/// The SubnTrap(Notice) a port sends: generic trap `number` claiming
/// IssuerLID `issuer`, arriving from LID `slid`. For simulated fabrics and
/// tests that play a switch (or a host forging one).
pub fn generic_trap(slid: u16, issuer: u16, number: u16) -> TrapMad {
    use sm_mad::notice::{producer, Details, DETAILS_LEN};
    use sm_mad::{Mad, SmpRepr};
    let mut notice = NoticeRepr::link_state_change(issuer);
    notice.source = Source::Generic { producer_type: producer::SWITCH, trap_number: number };
    if number != trap::LINK_STATE_CHANGE {
        notice.details = Details::Raw([0; DETAILS_LEN]);
    }
    let mut data = [0u8; sm_mad::smp::DATA_LEN];
    notice.emit(&mut NoticePacket::new_unchecked(&mut data[..sm_mad::notice::LEN]));
    let smp = SmpRepr {
        method: method::TRAP,
        status: 0,
        transaction_id: 1,
        attribute_id: attr::NOTICE,
        attribute_modifier: 0,
        m_key: 0,
        routing: sm_mad::smp::Routing::Lid,
        data,
    };
    let mut mad = Mad::zeroed();
    smp.emit(&mut mad.smp_mut());
    TrapMad { slid, mad: mad.0.to_vec() }
}

/// Trap number and IssuerLID of a well-formed generic SubnTrap(Notice).
fn parse(trap: &TrapMad) -> Result<(u16, u16), &'static str> {
    let mad = &trap.mad;
    if mad.len() < SMP_DATA_OFFSET + sm_mad::notice::LEN {
        return Err("short MAD");
    }
    let header = Header::new_unchecked(&mad[..]);
    if header.base_version() != BASE_VERSION
        || header.mgmt_class() != class::SUBN_LID
        || header.class_version() != class_version::SUBN
    {
        return Err("not a LID-routed SMP");
    }
    if header.method() != method::TRAP {
        return Err("not a Trap");
    }
    if header.attribute_id() != attr::NOTICE {
        return Err("attribute is not Notice");
    }
    const { assert!(HEADER_LEN <= SMP_DATA_OFFSET) };
    let data = &mad[SMP_DATA_OFFSET..SMP_DATA_OFFSET + sm_mad::notice::LEN];
    let notice = NoticePacket::new_checked(data)
        .ok()
        .and_then(|p| NoticeRepr::parse(&p).ok())
        .ok_or("unreadable Notice")?;
    match notice.source {
        Source::Generic { trap_number, .. } => Ok((trap_number, notice.issuer_lid)),
        Source::Vendor { .. } => Err("vendor notice"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trap_from(slid: u16, issuer: u16, number: u16) -> TrapMad {
        generic_trap(slid, issuer, number)
    }

    fn filter_knowing(lids: &[u16]) -> TrapFilter {
        let mut f = TrapFilter::new(TrapLimits::default());
        f.set_fabric(lids.iter().copied());
        f
    }

    #[test]
    fn a_link_state_change_from_a_known_switch_sweeps() {
        let mut f = filter_knowing(&[1, 2, 3]);
        assert_eq!(f.judge(&trap_from(2, 2, 128), Instant::now()), TrapVerdict::Sweep { number: 128, issuer: 2 });
    }

    #[test]
    fn forged_unknown_and_malformed_traps_are_dropped() {
        let mut f = filter_knowing(&[1, 2, 3]);
        let now = Instant::now();
        // Sent from LID 3 claiming to be switch 2.
        assert!(matches!(f.judge(&trap_from(3, 2, 128), now), TrapVerdict::Drop(_)));
        // A LID no sweep found.
        assert!(matches!(f.judge(&trap_from(99, 99, 128), now), TrapVerdict::Drop(_)));
        // SA-side trap numbers never come from the fabric.
        assert!(matches!(f.judge(&trap_from(2, 2, 64), now), TrapVerdict::Drop(_)));
        // Bytes that are not a trap at all.
        let mut junk = trap_from(2, 2, 128);
        Header::new_unchecked(&mut junk.mad[..]).set_mgmt_class(class::SUBN_DIRECTED);
        assert!(matches!(f.judge(&junk, now), TrapVerdict::Drop(_)));
        let short = TrapMad { slid: 2, mad: vec![1, 1, 1, 5] };
        assert!(matches!(f.judge(&short, now), TrapVerdict::Drop(_)));
        assert_eq!(f.counts.dropped, 5);
        assert_eq!(f.counts.accepted, 0);
    }

    #[test]
    fn port_errors_and_key_violations_are_noted_not_swept() {
        let mut f = filter_knowing(&[5]);
        let now = Instant::now();
        for n in [129, 130, 131, 256, 257, 259] {
            assert_eq!(f.judge(&trap_from(5, 5, n), now), TrapVerdict::Note { number: n, issuer: 5 });
        }
    }

    #[test]
    fn before_the_first_sweep_any_issuer_is_heard() {
        let mut f = TrapFilter::new(TrapLimits::default());
        assert!(matches!(f.judge(&trap_from(40, 40, 128), Instant::now()), TrapVerdict::Sweep { .. }));
    }

    #[test]
    fn a_flapping_issuer_is_held_down_and_the_hold_down_grows() {
        let limits = TrapLimits::default();
        let mut f = filter_knowing(&[7, 8]);
        let t0 = Instant::now();
        let mut swept = 0;
        for i in 0..100u32 {
            if matches!(f.judge(&trap_from(7, 7, 128), t0 + Duration::from_millis(u64::from(i) * 10)), TrapVerdict::Sweep { .. }) {
                swept += 1;
            }
        }
        assert_eq!(swept, limits.flap_traps);
        // Others are not affected.
        assert!(matches!(f.judge(&trap_from(8, 8, 128), t0 + Duration::from_secs(1)), TrapVerdict::Sweep { .. }));
        // After the hold-down it is heard again...
        let later = t0 + limits.hold_down + Duration::from_secs(2);
        assert!(matches!(f.judge(&trap_from(7, 7, 128), later), TrapVerdict::Sweep { .. }));
        // ...and a relapse silences it for twice as long.
        let mut t = later;
        for _ in 0..limits.flap_traps {
            t += Duration::from_millis(10);
            f.judge(&trap_from(7, 7, 128), t);
        }
        let relapse = t + limits.hold_down + Duration::from_secs(1);
        assert!(matches!(f.judge(&trap_from(7, 7, 128), relapse), TrapVerdict::Drop(SILENCED)));
        assert!(matches!(
            f.judge(&trap_from(7, 7, 128), t + 2 * limits.hold_down + Duration::from_secs(1)),
            TrapVerdict::Sweep { .. }
        ));
    }

    #[test]
    fn the_sweep_budget_allows_a_burst_then_one_per_refill() {
        let limits = TrapLimits::default();
        let mut f = TrapFilter::new(limits);
        let t0 = Instant::now();
        let allowed = (0..20).filter(|_| f.take_sweep(t0)).count();
        assert_eq!(allowed, limits.burst as usize);
        let next = f.next_allowed(t0);
        assert!(next > t0 && next <= t0 + limits.refill);
        assert!(f.take_sweep(next));
        assert!(!f.take_sweep(next));
    }

    #[test]
    fn issuers_that_left_the_fabric_are_forgotten() {
        let mut f = filter_knowing(&[1, 2]);
        let now = Instant::now();
        f.judge(&trap_from(1, 1, 128), now);
        f.judge(&trap_from(2, 2, 128), now);
        f.set_fabric([2]);
        assert_eq!(f.issuers.len(), 1);
        assert!(matches!(f.judge(&trap_from(1, 1, 128), now), TrapVerdict::Drop(_)));
    }
}
