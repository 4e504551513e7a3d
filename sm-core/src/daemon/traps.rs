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
//! * come from an issuer that is not suppressed for flapping. Each
//!   sweep-causing trap adds one to its issuer's penalty, which decays
//!   exponentially ([`Damping::half_life`]), as BGP's route-flap
//!   dampening (RFC 2439) does. Above [`Damping::suppress`] its traps
//!   cause no sweep until the penalty decays below [`Damping::reuse`], and
//!   never for longer than [`Damping::max_suppress`] after its last trap
//!   (the penalty is capped). Traps during suppression still add to the
//!   penalty, so a port that never stops flapping stays suppressed.
//!   OpenSM disables such ports; we keep the port and let the light sweep,
//!   which reads every switch at every interval, find its real changes at
//!   the interval's pace;
//! * sweep at once, unless the port that changed flaps. A trap 128 names
//!   its switch, not the port, so the settling is decided on the ports:
//!   every port a heavy sweep finds changed (state or peer) adds one to
//!   that port's own penalty ([`TrapFilter::ports_changed`]), and a
//!   sweep whose re-read finds a changed port whose penalty shows it
//!   flapping ([`Damping::settle_above`], [`TrapFilter::port_flapping`])
//!   waits the settling time and reads again, gathering the port's next
//!   changes — unless the re-read found a link lost: a link that went
//!   away is routed around at once whatever its past, as BGP's dampening
//!   never holds a withdrawal back; only a flapping port's return waits.
//!   So a switch with one port going down and back and another port
//!   changing next reacts at once every time;
//! * fit the global budget: at most [`TrapLimits::burst`] trap-caused heavy
//!   sweeps back to back, then one per [`TrapLimits::refill`]. A trap over
//!   budget is not lost: the sweep it asks for is deferred until the budget
//!   allows it, and every trap that arrives meanwhile is folded into it.
//!
//! The state is bounded: issuers are tracked only for LIDs of the fabric
//! (at most one entry each, of fixed size).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use sm_mad::mad::{attr, class, class_version, method, Header, BASE_VERSION, HEADER_LEN};
use sm_mad::notice::{trap, Source};
use sm_mad::{NoticePacket, NoticeRepr};

use sm_transport::TrapMad;

/// Where the Notice starts in a LID-routed SMP: header, M_Key, reserved.
const SMP_DATA_OFFSET: usize = 64;

/// Bounds of the trap intake.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrapLimits {
    /// Flap damping of each issuer.
    pub damping: Damping,
    /// Trap-caused heavy sweeps allowed back to back.
    pub burst: u32,
    /// One more trap-caused heavy sweep is allowed per this much time.
    pub refill: Duration,
    /// Disable a port that keeps reporting errors (OpenSM
    /// `babbling_port_policy`; see [`PortErrors`]).
    pub babbling_port_policy: bool,
}

impl Default for TrapLimits {
    fn default() -> Self {
        TrapLimits { damping: Damping::default(), burst: 4, refill: Duration::from_secs(2), babbling_port_policy: false }
    }
}

/// Route-flap dampening of one issuer's traps (RFC 2439), in units of one
/// trap: each sweep-causing trap adds 1 to the penalty, which halves every
/// `half_life`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Damping {
    /// The time the penalty takes to halve.
    pub half_life: Duration,
    /// A change of a port whose penalty (before it) is at least this
    /// waits the settling time before its sweep goes on; below it, the
    /// sweep goes on at once. 1.5: a link that goes down and comes back
    /// reacts at once both times; a third change soon after waits.
    pub settle_above: f64,
    /// A penalty above this suppresses the issuer's sweeps.
    pub suppress: f64,
    /// A suppressed issuer is heard again once its penalty decays below
    /// this.
    pub reuse: f64,
    /// The longest suppression after an issuer's last trap: the penalty is
    /// capped at what decays to `reuse` in this time.
    pub max_suppress: Duration,
}

impl Default for Damping {
    fn default() -> Self {
        Damping {
            half_life: Duration::from_secs(60),
            settle_above: 1.5,
            suppress: 6.0,
            reuse: 3.0,
            max_suppress: Duration::from_secs(900),
        }
    }
}

impl Damping {
    /// The penalty cap: what decays to `reuse` in `max_suppress`.
    fn ceiling(&self) -> f64 {
        let halvings = self.max_suppress.as_secs_f64() / self.half_life.as_secs_f64().max(f64::MIN_POSITIVE);
        // Beyond 2^60 the cap no longer matters (and must stay finite).
        (self.reuse * halvings.min(60.0).exp2()).max(self.suppress)
    }

    /// `penalty` as decayed over `elapsed`.
    fn decay(&self, penalty: f64, elapsed: Duration) -> f64 {
        let half_life = self.half_life.as_secs_f64();
        if half_life <= 0.0 {
            return 0.0;
        }
        penalty * (-elapsed.as_secs_f64() / half_life).exp2()
    }
}

/// One issuer's flap penalty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlapState {
    /// The penalty as of `at`.
    penalty: f64,
    at: Instant,
    /// Its sweeps are suppressed (until the penalty decays below reuse).
    suppressed: bool,
}

/// What the damping makes of one sweep-causing trap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damped {
    /// The issuer is quiet: sweep at once.
    Now,
    /// The issuer flaps: sweep after the settling time.
    Settle,
    /// The issuer is suppressed: no sweep.
    Suppressed,
}

impl FlapState {
    /// A state with no penalty at `now`.
    pub fn new(now: Instant) -> Self {
        FlapState { penalty: 0.0, at: now, suppressed: false }
    }

    /// The penalty at `now`.
    pub fn penalty(&self, damping: &Damping, now: Instant) -> f64 {
        damping.decay(self.penalty, now.saturating_duration_since(self.at))
    }

    /// Records one flap (a sweep-causing trap) at `now`.
    pub fn flap(&mut self, damping: &Damping, now: Instant) -> Damped {
        let before = self.penalty(damping, now);
        if self.suppressed && before < damping.reuse {
            self.suppressed = false;
        }
        self.penalty = (before + 1.0).min(damping.ceiling());
        self.at = now;
        if self.suppressed {
            return Damped::Suppressed;
        }
        if self.penalty > damping.suppress {
            self.suppressed = true;
            return Damped::Suppressed;
        }
        if before >= damping.settle_above {
            Damped::Settle
        } else {
            Damped::Now
        }
    }

    /// Whether the issuer is suppressed at `now`.
    pub fn is_suppressed(&self, damping: &Damping, now: Instant) -> bool {
        self.suppressed && self.penalty(damping, now) >= damping.reuse
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

/// Counts of the intake, for the status and the logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrapCounts {
    /// Traps that asked for a sweep and were let through.
    pub accepted: u64,
    /// Traps logged without a sweep.
    pub noted: u64,
    /// Malformed, forged or unknown traps.
    pub dropped: u64,
    /// Traps of an issuer suppressed for flapping.
    pub suppressed: u64,
}

/// The trap intake (see the module documentation).
#[derive(Debug)]
pub struct TrapFilter {
    limits: TrapLimits,
    /// LIDs of the last published fabric; `None` before the first sweep.
    known: Option<HashSet<u16>>,
    issuers: HashMap<u16, FlapState>,
    /// Flap penalty of every port (node GUID, port number) a heavy sweep
    /// found changed, while it lasts.
    ports: HashMap<(u64, u8), FlapState>,
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
            ports: HashMap::new(),
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
        match self.damp(issuer, now) {
            Damped::Now | Damped::Settle => TrapVerdict::Sweep { number, issuer },
            Damped::Suppressed => TrapVerdict::Drop(SILENCED),
        }
    }

    /// Records a sweep-causing trap of `issuer` in its flap penalty.
    fn damp(&mut self, issuer: u16, now: Instant) -> Damped {
        let damping = self.limits.damping;
        let state = self.issuers.entry(issuer).or_insert_with(|| FlapState::new(now));
        let was_suppressed = state.is_suppressed(&damping, now);
        let damped = state.flap(&damping, now);
        if damped == Damped::Suppressed && !was_suppressed {
            tracing::warn!(
                issuer,
                penalty = format!("{:.1}", state.penalty(&damping, now)),
                "port is flapping: its traps cause no heavy sweep until its penalty decays; \
                 light sweeps still find its changes"
            );
        }
        damped
    }

    /// Whether one of `changed` (ports a sweep's re-read found changed:
    /// node GUID, port number) flaps at `now`: its penalty before this
    /// change is at least [`Damping::settle_above`].
    pub fn port_flapping(&self, changed: &[(u64, u8)], now: Instant) -> bool {
        let damping = &self.limits.damping;
        changed.iter().any(|k| self.ports.get(k).is_some_and(|s| s.penalty(damping, now) >= damping.settle_above))
    }

    /// Adds one change of each of `changed` to its port's penalty; ports
    /// whose penalty has decayed to nothing are forgotten (this bounds the
    /// state to ports that changed lately).
    pub fn ports_changed(&mut self, changed: &[(u64, u8)], now: Instant) {
        let damping = self.limits.damping;
        self.ports.retain(|_, s| s.penalty(&damping, now) >= FORGOTTEN);
        for &k in changed {
            self.ports.entry(k).or_insert_with(|| FlapState::new(now)).flap(&damping, now);
        }
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

const SILENCED: &str = "issuer suppressed for flapping";

/// A port penalty below this is forgotten.
const FORGOTTEN: f64 = 0.01;

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

/// Traps 129–131 of one port in a row after which OpenSM's
/// `babbling_port_policy` disables it.
pub const BABBLING_TRAPS: u32 = 250;
/// A trap not repeated within this long starts its count again (OpenSM's
/// trap suppression timeout)...
const PORT_ERROR_AGING: Duration = Duration::from_secs(5);
/// ... or within this long once it came 10 times (OpenSM's unhealthy
/// port timeout).
const UNHEALTHY_AGING: Duration = Duration::from_secs(60);

/// Port error traps (129–131) counted by (LIDADDR, PORTNO, trap) as
/// OpenSM's trap aging counts them: each one that comes before the
/// previous has aged out adds one.
#[derive(Debug, Default)]
pub struct PortErrors {
    seen: HashMap<(u16, u8, u16), (u32, Instant)>,
}

impl PortErrors {
    /// Counts `trap` if it is a port error trap; the LID and port it
    /// names once it has come [`BABBLING_TRAPS`] times in a row (then
    /// counted afresh).
    pub fn count(&mut self, trap: &TrapMad, now: Instant) -> Option<(u16, u8)> {
        use sm_mad::notice::Details;
        let data = trap.mad.get(SMP_DATA_OFFSET..SMP_DATA_OFFSET + sm_mad::notice::LEN)?;
        let notice = NoticePacket::new_checked(data).ok().and_then(|p| NoticeRepr::parse(&p).ok())?;
        let (Source::Generic { trap_number, .. }, Details::PortError { lid, port }) = (notice.source, notice.details) else {
            return None;
        };
        if self.seen.len() > 4096 {
            self.seen.retain(|_, (_, last)| now.saturating_duration_since(*last) < UNHEALTHY_AGING);
        }
        let (n, last) = self.seen.entry((lid, port, trap_number)).or_insert((0, now));
        let aging = if *n >= 10 { UNHEALTHY_AGING } else { PORT_ERROR_AGING };
        if now.saturating_duration_since(*last) > aging {
            *n = 0;
        }
        *n += 1;
        *last = now;
        if *n >= BABBLING_TRAPS {
            *n = 0;
            return Some((lid, port));
        }
        None
    }
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
    let notice =
        NoticePacket::new_checked(data).ok().and_then(|p| NoticeRepr::parse(&p).ok()).ok_or("unreadable Notice")?;
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

    fn sweeps_now(v: &TrapVerdict) -> bool {
        matches!(v, TrapVerdict::Sweep { .. })
    }

    #[test]
    fn a_port_that_goes_down_and_comes_back_sweeps_at_once_both_times_then_settles() {
        let mut f = filter_knowing(&[7]);
        let t0 = Instant::now();
        let port = [(0x77, 3)];
        // Down: the trap sweeps, the re-read finds the port changed.
        assert!(sweeps_now(&f.judge(&trap_from(7, 7, 128), t0)));
        assert!(!f.port_flapping(&port, t0));
        f.ports_changed(&port, t0);
        // Back: once more at once.
        let t1 = t0 + Duration::from_millis(500);
        assert!(sweeps_now(&f.judge(&trap_from(7, 7, 128), t1)));
        assert!(!f.port_flapping(&port, t1));
        f.ports_changed(&port, t1);
        // A third change of the same port soon after: it flaps, its sweep
        // settles.
        let t2 = t0 + Duration::from_secs(1);
        assert!(sweeps_now(&f.judge(&trap_from(7, 7, 128), t2)));
        assert!(f.port_flapping(&port, t2));
        // Another port of the same switch changing then is not held back.
        assert!(!f.port_flapping(&[(0x77, 4)], t2));
        // Quiet for long: forgotten.
        let d = Damping::default();
        let later = t2 + 10 * d.half_life;
        assert!(!f.port_flapping(&port, later));
        f.ports_changed(&[(0x77, 4)], later);
        assert!(!f.ports.contains_key(&(0x77, 3)), "decayed penalties are forgotten");
    }

    #[test]
    fn the_penalty_grows_with_each_flap_then_suppresses_and_decays_to_reuse() {
        let d = Damping::default();
        let mut f = filter_knowing(&[7, 8]);
        let t0 = Instant::now();
        let verdicts: Vec<TrapVerdict> =
            (0..10u64).map(|i| f.judge(&trap_from(7, 7, 128), t0 + Duration::from_millis(i * 10))).collect();
        // Penalties 1 to 6 sweep, beyond 6 the issuer is suppressed.
        assert!(verdicts[..6].iter().all(sweeps_now), "{verdicts:?}");
        assert!(verdicts[6..].iter().all(|v| *v == TrapVerdict::Drop(SILENCED)), "{verdicts:?}");
        assert_eq!(f.counts.suppressed, 4);
        // Others are not affected.
        assert!(sweeps_now(&f.judge(&trap_from(8, 8, 128), t0 + Duration::from_secs(1))));
        // Ten flaps in 0.1 s: the penalty is about 10; it decays below
        // reuse (3) after log2(10 / 3) half-lives, about 1.74.
        let last = t0 + Duration::from_millis(90);
        let p = f.issuers[&7].penalty(&d, last);
        assert!((p - 9.99).abs() < 0.05, "{p}");
        let free_after = d.half_life.mul_f64((p / d.reuse).log2());
        let before = last + free_after - Duration::from_secs(1);
        assert!(f.issuers[&7].is_suppressed(&d, before));
        let after = last + free_after + Duration::from_secs(1);
        assert!(!f.issuers[&7].is_suppressed(&d, after));
        // Heard again.
        assert!(sweeps_now(&f.judge(&trap_from(7, 7, 128), after)));
        // Quiet for long: forgiven, the next trap sweeps at once.
        assert!(sweeps_now(&f.judge(&trap_from(7, 7, 128), after + 10 * d.half_life)));
    }

    #[test]
    fn the_pace_of_flapping_decides_between_settling_and_suppression() {
        let d = Damping::default();
        let t0 = Instant::now();
        // A flap every half-life: the penalty tends to 1 / (1 - 1/2) = 2,
        // reached only in the limit: every sweep starts at once.
        let mut slow = FlapState::new(t0);
        let every = |n: u32, gap: Duration| (0..n).map(move |i| t0 + gap * i);
        assert!(every(50, d.half_life).all(|t| slow.flap(&d, t) == Damped::Now));
        // Every half a half-life: towards 1 / (1 - 2^-1/2) = 3.4, settles.
        let mut medium = FlapState::new(t0);
        let got: Vec<Damped> = every(50, d.half_life / 2).map(|t| medium.flap(&d, t)).collect();
        assert!(got[10..].iter().all(|&x| x == Damped::Settle), "{got:?}");
        // Every tenth of a half-life: towards 14.9, suppressed for good.
        let mut fast = FlapState::new(t0);
        let got: Vec<Damped> = every(200, d.half_life / 10).map(|t| fast.flap(&d, t)).collect();
        let first = got.iter().position(|&x| x == Damped::Suppressed).expect("suppressed");
        assert!(got[first..].iter().all(|&x| x == Damped::Suppressed), "{got:?}");
    }

    #[test]
    fn suppression_never_outlasts_the_maximum_after_the_last_trap() {
        let d = Damping::default();
        let t0 = Instant::now();
        let mut storm = FlapState::new(t0);
        let mut t = t0;
        // A storm: a hundred thousand traps in a tenth of a second
        // reach the cap.
        for _ in 0..100_000 {
            t += Duration::from_micros(1);
            storm.flap(&d, t);
        }
        assert_eq!(storm.penalty(&d, t), d.ceiling());
        assert!(storm.is_suppressed(&d, t + d.max_suppress - Duration::from_secs(1)));
        assert!(!storm.is_suppressed(&d, t + d.max_suppress + Duration::from_millis(1)));
        assert_ne!(storm.flap(&d, t + d.max_suppress + Duration::from_millis(1)), Damped::Suppressed);
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
