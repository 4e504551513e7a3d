//! Counters kept as deltas: what a port did between two reads.
//!
//! IBA's PortCounters stop at all ones instead of wrapping, and anyone
//! (another tool, a port reset) may clear them between two reads. So a
//! value smaller than the last one means "cleared since": the delta is the
//! new value (what was counted after the clear, a lower bound). A counter
//! at all ones is saturated: its delta is a lower bound too, and the
//! manager clears the port's counters so the next reads count again. The
//! 64-bit counters of PortCountersExtended never reach their limit in the
//! life of a fabric, so for them smaller also just means cleared.

use sm_mad::perf::{COUNTERS, COUNTER_NAMES};

/// Index of each counter in the arrays here ([`COUNTER_NAMES`] order).
pub mod idx {
    /// SymbolErrorCounter.
    pub const SYMBOL_ERRORS: usize = 0;
    /// LinkErrorRecoveryCounter.
    pub const LINK_ERROR_RECOVERY: usize = 1;
    /// LinkDownedCounter.
    pub const LINK_DOWNED: usize = 2;
    /// PortRcvErrors.
    pub const RCV_ERRORS: usize = 3;
    /// PortXmitDiscards.
    pub const XMIT_DISCARDS: usize = 6;
    /// PortXmitData (the first traffic counter).
    pub const XMIT_DATA: usize = 13;
    /// PortRcvData.
    pub const RCV_DATA: usize = 14;
    /// PortXmitPkts.
    pub const XMIT_PKTS: usize = 15;
    /// PortRcvPkts.
    pub const RCV_PKTS: usize = 16;
    /// PortXmitWait.
    pub const XMIT_WAIT: usize = 17;
}

/// Counters [`COUNTER_NAMES`] marks as errors (everything before the
/// traffic counters).
pub const ERROR_COUNTERS: std::ops::Range<usize> = 0..idx::XMIT_DATA;

/// One read of a port: PortCounters, with the traffic counters replaced
/// by PortCountersExtended's 64-bit ones where the port has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    /// Values in [`COUNTER_NAMES`] order.
    pub values: [u64; COUNTERS],
    /// Whether the traffic counters are 64-bit (from the extended set).
    pub extended: bool,
}

impl Sample {
    fn width(&self, i: usize) -> u32 {
        if self.extended && (idx::XMIT_DATA..=idx::RCV_PKTS).contains(&i) {
            64
        } else {
            COUNTER_NAMES[i].1
        }
    }

    /// Whether counter `i` stands at its maximum.
    pub fn saturated(&self, i: usize) -> bool {
        let w = self.width(i);
        w < 64 && self.values[i] == (1u64 << w) - 1
    }

    /// Whether any counter is at half its range or more: clearing now
    /// keeps the next interval's deltas exact.
    pub fn needs_clearing(&self) -> bool {
        (0..COUNTERS).any(|i| {
            let w = self.width(i);
            w < 64 && self.values[i] >= 1u64 << (w - 1)
        })
    }
}

/// What changed between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delta {
    /// Per counter, [`COUNTER_NAMES`] order.
    pub values: [u64; COUNTERS],
    /// Counters whose delta is only a lower bound (saturated or cleared by
    /// someone else between the reads).
    pub lower_bound: [bool; COUNTERS],
}

impl Delta {
    /// `now` against `before` (`None`: the first read, which counts from
    /// the counters' last clear).
    pub fn between(before: Option<&Sample>, now: &Sample) -> Delta {
        let mut d = Delta::default();
        for i in 0..COUNTERS {
            let new = now.values[i];
            let old = before.map_or(0, |b| b.values[i]);
            // A change of width (the port lost its extended counters)
            // cannot be compared: count from zero.
            let comparable = before.is_none_or(|b| b.width(i) == now.width(i));
            if comparable && new >= old {
                d.values[i] = new - old;
                d.lower_bound[i] = now.saturated(i);
            } else {
                d.values[i] = new;
                d.lower_bound[i] = true;
            }
        }
        d
    }

    /// The sum of the error counters' deltas.
    pub fn errors(&self) -> u64 {
        self.values[ERROR_COUNTERS].iter().sum()
    }
}

/// A port's history: the last sample (or the cleared state after the
/// manager cleared it), the last delta and the totals since the manager
/// first saw the port.
#[derive(Debug, Clone, Default)]
pub struct PortHistory {
    /// What the next delta is taken against.
    pub last: Option<Sample>,
    /// The last interval's delta.
    pub delta: Delta,
    /// Sum of every delta.
    pub totals: [u64; COUNTERS],
    /// Reads that were answered.
    pub reads: u64,
    /// Reads that were not.
    pub lost: u64,
}

impl PortHistory {
    /// Takes in a new sample; returns its delta.
    pub fn record(&mut self, sample: Sample) -> Delta {
        let delta = Delta::between(self.last.as_ref(), &sample);
        for (t, d) in self.totals.iter_mut().zip(delta.values.iter()) {
            *t = t.saturating_add(*d);
        }
        self.delta = delta;
        self.last = Some(sample);
        self.reads += 1;
        delta
    }

    /// The manager cleared the port's counters after the last read: the
    /// next read counts from zero.
    pub fn cleared(&mut self) {
        if let Some(last) = self.last.as_mut() {
            last.values = [0; COUNTERS];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(pairs: &[(usize, u64)]) -> Sample {
        let mut s = Sample::default();
        for &(i, v) in pairs {
            s.values[i] = v;
        }
        s
    }

    #[test]
    fn deltas_count_what_happened_between_reads() {
        let mut h = PortHistory::default();
        let first = h.record(sample(&[(idx::SYMBOL_ERRORS, 5), (idx::XMIT_PKTS, 100)]));
        assert_eq!(first.values[idx::SYMBOL_ERRORS], 5, "the first read counts from the last clear");
        let d = h.record(sample(&[(idx::SYMBOL_ERRORS, 12), (idx::XMIT_PKTS, 150)]));
        assert_eq!(d.values[idx::SYMBOL_ERRORS], 7);
        assert_eq!(d.values[idx::XMIT_PKTS], 50);
        assert!(!d.lower_bound[idx::SYMBOL_ERRORS]);
        assert_eq!(h.totals[idx::SYMBOL_ERRORS], 12);
    }

    #[test]
    fn a_counter_cleared_by_someone_else_counts_from_zero_as_a_lower_bound() {
        let mut h = PortHistory::default();
        h.record(sample(&[(idx::RCV_ERRORS, 40)]));
        let d = h.record(sample(&[(idx::RCV_ERRORS, 3)]));
        assert_eq!(d.values[idx::RCV_ERRORS], 3);
        assert!(d.lower_bound[idx::RCV_ERRORS]);
    }

    #[test]
    fn a_saturated_counter_is_a_lower_bound_and_asks_for_clearing() {
        let mut h = PortHistory::default();
        h.record(sample(&[(idx::LINK_DOWNED, 200)]));
        let s = sample(&[(idx::LINK_DOWNED, 255)]);
        assert!(s.saturated(idx::LINK_DOWNED) && s.needs_clearing());
        let d = h.record(s);
        assert_eq!(d.values[idx::LINK_DOWNED], 55);
        assert!(d.lower_bound[idx::LINK_DOWNED]);
        // After the manager's clear, the next read is a plain delta.
        h.cleared();
        let d = h.record(sample(&[(idx::LINK_DOWNED, 2)]));
        assert_eq!((d.values[idx::LINK_DOWNED], d.lower_bound[idx::LINK_DOWNED]), (2, false));
        assert_eq!(h.totals[idx::LINK_DOWNED], 257);
    }

    #[test]
    fn extended_traffic_counters_are_64_bit() {
        let mut s = sample(&[(idx::XMIT_DATA, u32::MAX as u64)]);
        assert!(s.saturated(idx::XMIT_DATA));
        s.extended = true;
        assert!(!s.saturated(idx::XMIT_DATA) && !s.needs_clearing());
        let mut h = PortHistory::default();
        h.record(s);
        let mut t = s;
        t.values[idx::XMIT_DATA] = 1 << 40;
        assert_eq!(h.record(t).values[idx::XMIT_DATA], (1 << 40) - u32::MAX as u64);
    }
}
