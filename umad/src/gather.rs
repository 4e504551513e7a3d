//! Letting answers gather while many SMPs are out.
//!
//! Waiting in `poll()` for every single answer costs a wake-up per SMP: the
//! thread that queues the answer (umad2sim's receiver, or the kernel) wakes
//! the sweep, which reads one answer, sends one SMP and sleeps again. With
//! two cores shared by the SM, the simulator and the receiver, those
//! wake-ups are most of the SM's CPU time. When the window holds many SMPs,
//! the sweep instead pauses about as long as half of them take to come
//! back and then reads all that arrived, without waiting, one after the
//! other. A pause that found nothing falls back to the blocking wait, so a
//! slow or silent fabric is waited for as before, never spun on.

use std::time::{Duration, Instant};

/// Fewer SMPs out than this: the next answer is waited for in `poll()`.
const MIN_OUT: usize = 8;
/// Bounds of one pause. The upper one keeps an answer from waiting long
/// past its arrival when the estimate is off.
const MIN_PAUSE: Duration = Duration::from_micros(10);
const MAX_PAUSE: Duration = Duration::from_micros(500);
/// A gap this long between two answers is idleness (the sweep was
/// elsewhere), not the fabric's pace: it does not count.
const IDLE_GAP: Duration = Duration::from_millis(5);

/// The pace at which answers arrive, as the sweep reads them.
#[derive(Debug, Default)]
pub(super) struct Gather {
    last: Option<Instant>,
    /// Mean time between two answers, smoothed (ns); 0 until measured.
    per_answer_ns: f64,
}

impl Gather {
    /// An answer was read at `now`.
    pub(super) fn answered(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let gap = now.saturating_duration_since(last);
            if gap < IDLE_GAP {
                let ns = gap.as_nanos() as f64;
                self.per_answer_ns = if self.per_answer_ns == 0.0 { ns } else { 0.875 * self.per_answer_ns + 0.125 * ns };
            }
        }
        self.last = Some(now);
    }

    /// How long to let answers gather with `outstanding` SMPs out and none
    /// ready; `None`: wait for the next one in `poll()`.
    pub(super) fn pause(&self, outstanding: usize) -> Option<Duration> {
        if outstanding < MIN_OUT || self.per_answer_ns == 0.0 {
            return None;
        }
        let ns = self.per_answer_ns * (outstanding / 2) as f64;
        Some(Duration::from_nanos(ns as u64).clamp(MIN_PAUSE, MAX_PAUSE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_pause_before_the_pace_is_known_nor_with_few_smps_out() {
        let mut g = Gather::default();
        assert_eq!(g.pause(64), None);
        let t = Instant::now();
        g.answered(t);
        g.answered(t + Duration::from_micros(10));
        assert!(g.pause(64).is_some());
        assert_eq!(g.pause(MIN_OUT - 1), None);
    }

    #[test]
    fn the_pause_is_half_the_window_at_the_measured_pace_within_bounds() {
        let mut g = Gather::default();
        let mut t = Instant::now();
        for _ in 0..100 {
            g.answered(t);
            t += Duration::from_micros(4);
        }
        let p = g.pause(32).expect("paced");
        assert!(p >= Duration::from_micros(60) && p <= Duration::from_micros(68), "{p:?}");
        // A very slow fabric: never longer than the bound.
        let mut slow = Gather::default();
        let mut t = Instant::now();
        for _ in 0..10 {
            slow.answered(t);
            t += Duration::from_millis(4);
        }
        assert_eq!(slow.pause(64), Some(MAX_PAUSE));
    }

    #[test]
    fn idle_gaps_do_not_count_as_the_pace() {
        let mut g = Gather::default();
        let t = Instant::now();
        g.answered(t);
        g.answered(t + Duration::from_micros(10));
        g.answered(t + Duration::from_secs(2));
        g.answered(t + Duration::from_secs(2) + Duration::from_micros(10));
        let p = g.pause(16).expect("paced");
        assert!(p < Duration::from_micros(100), "{p:?}");
    }
}
