//! How many SMPs the SM keeps in flight: a window that adapts.
//!
//! SMPs travel on VL15, which has little buffering on real switches and
//! drops what it cannot hold; a simulator answers as fast as it is asked.
//! A fixed window is either slow on the simulator or risky on hardware.
//! So the window starts at OpenSM's default of 4, grows by one for every
//! window's worth of answers (answers keep coming: there is room), and is
//! halved when an SMP times out (something dropped it: back off). The
//! configured `max_wire_smps` is its ceiling, so a site that sets OpenSM's
//! value gets no more in flight than OpenSM would send.
//!
//! One loss burst (several SMPs of the same window timing out) halves the
//! window once: only a timeout of an SMP sent after the last cut cuts
//! again, as TCP halves once per round trip.

/// Where the window starts (OpenSM's `max_wire_smps` default).
pub const INITIAL: usize = 4;

/// The window and what it went through, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmpWindow {
    limit: usize,
    size: usize,
    /// Answers since the window last grew.
    credit: usize,
    /// Sequence number of the next SMP sent.
    next_seq: u64,
    /// SMPs sent before this number do not cut the window again.
    cut_before: u64,
    stats: WindowStats,
}

/// What the window did since the port was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WindowStats {
    /// The ceiling (`max_wire_smps`).
    pub limit: usize,
    /// The window now.
    pub size: usize,
    /// The largest it has been.
    pub peak: usize,
    /// The smallest it has been after a cut (None: never cut).
    pub low: Option<usize>,
    /// Times it was halved after a timeout.
    pub cuts: u64,
}

impl SmpWindow {
    /// A window of at most `limit` SMPs (at least 1).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        let size = INITIAL.min(limit);
        Self {
            limit,
            size,
            credit: 0,
            next_seq: 0,
            cut_before: 0,
            stats: WindowStats { limit, size, peak: size, low: None, cuts: 0 },
        }
    }

    /// SMPs that may be in flight now.
    pub fn size(&self) -> usize {
        self.size
    }

    /// An SMP is sent: its sequence number, to give back to
    /// [`SmpWindow::timed_out`].
    pub fn sent(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// An answer came back.
    pub fn answered(&mut self) {
        if self.size >= self.limit {
            return;
        }
        self.credit += 1;
        if self.credit >= self.size {
            self.credit = 0;
            self.size += 1;
            self.stats.peak = self.stats.peak.max(self.size);
            self.stats.size = self.size;
        }
    }

    /// The SMP sent as `seq` got no answer in time. Returns whether the
    /// window was cut.
    pub fn timed_out(&mut self, seq: u64) -> bool {
        if seq < self.cut_before {
            return false;
        }
        self.size = (self.size / 2).max(1);
        self.credit = 0;
        self.cut_before = self.next_seq;
        self.stats.cuts += 1;
        self.stats.low = Some(self.stats.low.map_or(self.size, |low| low.min(self.size)));
        self.stats.size = self.size;
        true
    }

    /// What the window did so far.
    pub fn stats(&self) -> WindowStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers `n` SMPs in a row.
    fn answer(w: &mut SmpWindow, n: usize) {
        for _ in 0..n {
            w.sent();
            w.answered();
        }
    }

    #[test]
    fn it_starts_at_four_and_grows_to_its_limit_while_answers_come() {
        let mut w = SmpWindow::new(32);
        assert_eq!(w.size(), 4);
        answer(&mut w, 4);
        assert_eq!(w.size(), 5, "one more per window of answers");
        answer(&mut w, 10_000);
        assert_eq!(w.size(), 32, "never past the limit");
        assert_eq!(w.stats().peak, 32);
    }

    #[test]
    fn a_small_limit_is_the_window() {
        let mut w = SmpWindow::new(2);
        assert_eq!(w.size(), 2);
        answer(&mut w, 100);
        assert_eq!(w.size(), 2);
        assert_eq!(SmpWindow::new(0).size(), 1, "at least one SMP");
    }

    #[test]
    fn a_timeout_halves_it_once_per_burst() {
        let mut w = SmpWindow::new(64);
        answer(&mut w, 100_000);
        assert_eq!(w.size(), 64);
        // A window's worth in flight, several of them lost.
        let seqs: Vec<u64> = (0..64).map(|_| w.sent()).collect();
        assert!(w.timed_out(seqs[3]));
        assert!(!w.timed_out(seqs[10]), "same burst: no second cut");
        assert!(!w.timed_out(seqs[40]));
        assert_eq!(w.size(), 32);
        // An SMP sent after the cut that is lost too cuts again.
        let later = w.sent();
        assert!(w.timed_out(later));
        assert_eq!(w.size(), 16);
        let s = w.stats();
        assert_eq!((s.cuts, s.low, s.peak, s.limit), (2, Some(16), 64, 64));
    }

    #[test]
    fn it_never_falls_below_one_and_grows_back() {
        let mut w = SmpWindow::new(16);
        for _ in 0..10 {
            let seq = w.sent();
            w.timed_out(seq);
        }
        assert_eq!(w.size(), 1);
        answer(&mut w, 1_000);
        assert_eq!(w.size(), 16, "grows back once answers come again");
        assert_eq!(w.stats().low, Some(1));
    }
}
