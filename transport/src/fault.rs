//! Fault injection as a wrapper any transport takes, as smoltcp's
//! `FaultInjector` wraps any `phy::Device`: [`FaultInjector`] around an
//! [`SmpPort`] (the umad port, the embedded fabric, any test port) or a
//! [`GmpAgent`] loses requests, loses answers after the request took
//! effect, and corrupts the data of answers, each with its own chance,
//! from a seeded generator so that a run can be repeated exactly.
//!
//! Link and node faults (a cable pulled, a switch rebooting, port errors)
//! are the fabric's, not the transport's: the embedded fabric makes them
//! (`SimFabric::link_down`, `remove_node`, `add_port_errors`), ibsim's
//! console makes them under umad2sim.

use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::gmp::GmpAgent;
use crate::port::{Outgoing, SmpPort, TransportError, TrapMad};

/// Where the attribute data of a MAD starts (SMP and PMA alike): a
/// corrupted answer keeps its header, so it is still taken for the answer
/// to its request, and the reader must catch the bad data.
const DATA_OFFSET: usize = 64;

/// What to inject, each as a chance in parts per million.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Faults {
    /// A request is lost on its way: nothing reaches the fabric.
    pub drop: u32,
    /// The answer is lost on its way back: a Set took effect, the sender
    /// hears nothing (its retry must be harmless).
    pub lose_answer: u32,
    /// One byte of the answer's attribute data is flipped.
    pub corrupt: u32,
    /// Seed of the generator (the same seed, the same faults).
    pub seed: u64,
}

/// A fault specification that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fault spec `{spec}`: {why} (e.g. `drop=2%,lose-answer=1%,corrupt=0.1%,seed=7`)")]
pub struct FaultSpecError {
    spec: String,
    why: String,
}

impl FromStr for Faults {
    type Err = FaultSpecError;

    /// `drop=P,lose-answer=P,corrupt=P,seed=N`, any subset, P a
    /// percentage (`2%`, `0.5%`) or a fraction (`0.02`).
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let err = |why: String| FaultSpecError { spec: spec.to_string(), why };
        let mut faults = Faults::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| err(format!("`{item}` is not KEY=VALUE")))?;
            let chance = || parse_chance(value).ok_or_else(|| err(format!("{key}: `{value}` is not a chance (0-100%)")));
            match key.trim() {
                "drop" => faults.drop = chance()?,
                "lose-answer" => faults.lose_answer = chance()?,
                "corrupt" => faults.corrupt = chance()?,
                "seed" => faults.seed = value.trim().parse().map_err(|_| err(format!("seed: `{value}` is not a number")))?,
                other => return Err(err(format!("unknown fault `{other}` (drop, lose-answer, corrupt, seed)"))),
            }
        }
        Ok(faults)
    }
}

/// `2%` or `0.02` as parts per million.
fn parse_chance(text: &str) -> Option<u32> {
    let text = text.trim();
    let fraction = match text.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().ok()? / 100.0,
        None => text.parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&fraction).then(|| (fraction * 1e6).round() as u32)
}

/// What a [`FaultInjector`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultStats {
    /// Requests passed on.
    pub passed: u64,
    /// Requests lost before the fabric.
    pub dropped: u64,
    /// Answers lost after the fabric.
    pub answers_lost: u64,
    /// Answers with a flipped byte.
    pub corrupted: u64,
}

/// A transport with faults (see the module documentation).
#[derive(Debug)]
pub struct FaultInjector<P> {
    inner: P,
    faults: Faults,
    state: u64,
    stats: FaultStats,
}

impl<P> FaultInjector<P> {
    /// `inner` with `faults`.
    pub fn new(inner: P, faults: Faults) -> Self {
        // xorshift never leaves 0.
        let state = faults.seed ^ 0x9E37_79B9_7F4A_7C15;
        Self { inner, faults, state: state.max(1), stats: FaultStats::default() }
    }

    /// What was injected so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// The wrapped transport.
    pub fn inner(&mut self) -> &mut P {
        &mut self.inner
    }

    fn next(&mut self) -> u64 {
        // xorshift64*.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn happens(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.next() % 1_000_000 < u64::from(ppm)
    }

    /// Whether this request is lost before the fabric.
    fn drops(&mut self) -> bool {
        let lost = self.happens(self.faults.drop);
        if lost {
            self.stats.dropped += 1;
        } else {
            self.stats.passed += 1;
        }
        lost
    }

    /// The answer as it arrives: lost, corrupted or whole.
    fn arrives(&mut self, answer: Option<Vec<u8>>) -> Option<Vec<u8>> {
        let mut answer = answer?;
        if self.happens(self.faults.lose_answer) {
            self.stats.answers_lost += 1;
            return None;
        }
        if answer.len() > DATA_OFFSET && self.happens(self.faults.corrupt) {
            let span = (answer.len() - DATA_OFFSET) as u64;
            let at = DATA_OFFSET + (self.next() % span) as usize;
            let bit = 1u8 << (self.next() % 8);
            answer[at] ^= bit;
            self.stats.corrupted += 1;
        }
        Some(answer)
    }
}

impl<P: SmpPort> SmpPort for FaultInjector<P> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        if self.drops() {
            return Ok(None);
        }
        let answer = self.inner.send(mad)?;
        Ok(self.arrives(answer))
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        if self.drops() {
            return Ok(None);
        }
        let answer = self.inner.send_to(dlid, mad)?;
        Ok(self.arrives(answer))
    }

    fn exchange_many(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        // The survivors go out as one batch, so the inner transport keeps
        // its window.
        let kept: Vec<bool> = batch.iter().map(|_| !self.drops()).collect();
        let out: Vec<Outgoing> = batch.iter().zip(&kept).filter(|(_, k)| **k).map(|(o, _)| o.clone()).collect();
        let mut answers = self.inner.exchange_many(&out)?.into_iter();
        let mut arrived = Vec::with_capacity(kept.len());
        for k in kept {
            let answer = if k { answers.next().flatten() } else { None };
            arrived.push(self.arrives(answer));
        }
        Ok(arrived)
    }

    fn window_stats(&self) -> Option<crate::window::WindowStats> {
        self.inner.window_stats()
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        self.inner.wait_trap(timeout)
    }
}

impl<A: GmpAgent> GmpAgent for FaultInjector<A> {
    fn send(&mut self, dlid: u16, dqpn: u32, mad: &[u8], timeout_ms: u32) -> Result<(), TransportError> {
        if self.drops() {
            return Ok(());
        }
        self.inner.send(dlid, dqpn, mad, timeout_ms)
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, TransportError> {
        loop {
            let Some((slid, mad)) = self.inner.receive(deadline)? else { return Ok(None) };
            if let Some(mad) = self.arrives(Some(mad)) {
                return Ok(Some((slid, mad)));
            }
        }
    }
}

/// A mutable borrow of a transport is a transport, so that a wrapper can
/// be put around the port an SM was given.
impl<P: SmpPort + ?Sized> SmpPort for &mut P {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        (**self).send(mad)
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        (**self).send_to(dlid, mad)
    }

    fn exchange_many(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        (**self).exchange_many(batch)
    }

    fn window_stats(&self) -> Option<crate::window::WindowStats> {
        (**self).window_stats()
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        (**self).wait_trap(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every SMP with itself (method turned into GetResp) and
    /// counts what reached it.
    #[derive(Default)]
    struct Echo {
        reached: u64,
    }

    impl SmpPort for Echo {
        fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
            self.reached += 1;
            Ok(Some(mad.to_vec()))
        }
    }

    fn faults(spec: &str) -> Faults {
        spec.parse().expect("a spec")
    }

    #[test]
    fn specs_parse_and_bad_ones_say_what_is_wrong() {
        let f = faults("drop=2%, lose-answer=0.5% ,corrupt=0.001,seed=7");
        assert_eq!(f, Faults { drop: 20_000, lose_answer: 5_000, corrupt: 1_000, seed: 7 });
        assert_eq!(faults(""), Faults::default());
        for (bad, says) in [
            ("drop", "not KEY=VALUE"),
            ("drop=120%", "not a chance"),
            ("lose=1%", "unknown fault `lose`"),
            ("seed=x", "seed"),
        ] {
            let e = bad.parse::<Faults>().expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_chances_come_true_about_as_often_as_asked_and_repeat_with_the_seed() {
        let run = |seed| {
            let mut port = FaultInjector::new(Echo::default(), Faults { drop: 100_000, lose_answer: 50_000, corrupt: 20_000, seed });
            let mad = vec![0u8; 256];
            let answered = (0..10_000).filter(|_| port.send(&mad).expect("send").is_some()).count();
            (port.stats(), answered, port.inner().reached)
        };
        let (stats, answered, reached) = run(1);
        assert_eq!(stats.passed + stats.dropped, 10_000);
        assert_eq!(reached, stats.passed, "a dropped request never reaches the fabric");
        assert!((900..1100).contains(&stats.dropped), "{stats:?}");
        assert!((350..560).contains(&stats.answers_lost), "{stats:?}");
        assert!((120..260).contains(&stats.corrupted), "{stats:?}");
        assert_eq!(answered as u64, stats.passed - stats.answers_lost);
        assert_eq!(run(1), (stats, answered, reached), "the same seed, the same faults");
        assert_ne!(run(2).0, stats);
    }

    #[test]
    fn a_corrupted_answer_keeps_its_header_and_differs_in_one_bit_of_its_data() {
        let mut port = FaultInjector::new(Echo::default(), Faults { corrupt: 1_000_000, ..Faults::default() });
        let mad: Vec<u8> = (0..=255).collect();
        let answer = port.send(&mad).expect("send").expect("an answer");
        assert_eq!(answer[..DATA_OFFSET], mad[..DATA_OFFSET]);
        let flipped: u32 = answer.iter().zip(&mad).map(|(a, b)| (a ^ b).count_ones()).sum();
        assert_eq!(flipped, 1);
    }

    #[test]
    fn a_batch_keeps_its_order_with_holes_where_requests_were_lost() {
        let mut port = FaultInjector::new(Echo::default(), Faults { drop: 500_000, seed: 3, ..Faults::default() });
        let batch: Vec<Outgoing> =
            (0..64u8).map(|i| Outgoing { dlid: sm_mad::smp::PERMISSIVE_LID, mad: vec![i; 256] }).collect();
        let answers = port.exchange_many(&batch).expect("batch");
        assert_eq!(answers.len(), 64);
        let holes = answers.iter().filter(|a| a.is_none()).count() as u64;
        assert_eq!(holes, port.stats().dropped);
        assert!(holes > 0 && holes < 64);
        for (i, a) in answers.iter().enumerate() {
            if let Some(a) = a {
                assert_eq!(a[0] as usize, i, "answer {i} is its own request's");
            }
        }
    }
}
