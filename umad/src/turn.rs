//! Who reads the umad descriptor: the poll thread, or the sweep itself.
//!
//! Between sweeps the poll thread reads everything (traps, SA requests,
//! SMInfo from other SMs). While the sweep waits for the answers of its
//! SMP window it reads them itself: each answer handed from one thread to
//! the other would cost a wake-up of the sweep, tens of thousands of times
//! per sweep. The sweep sorts what it reads exactly as the poll thread
//! does (traps and requests go to their queues), so nothing is lost while
//! it holds the turn.
//!
//! Both may be in `poll()` at the moment the sweep takes its turn (the
//! poll thread finishes its slice first): whichever reads a message hands
//! it on, and the sweep waits in short slices, looking at the answers the
//! poll thread queued, until the poll thread has stepped aside.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How long the poll thread sleeps at a time while the sweep reads: it
/// notices the end of a sweep's turn within this, without being woken
/// (a wake-up per exchange would cost what the turn saves).
const PARKED_SLICE: Duration = Duration::from_millis(50);

/// The turn to read, shared by the poll thread and the sweep.
#[derive(Debug, Default)]
pub(super) struct ReadTurn {
    /// The sweep reads.
    sweep_reads: Mutex<bool>,
    wake: Condvar,
    /// The poll thread is out of `poll()` and waits for its turn.
    parked: AtomicBool,
}

impl ReadTurn {
    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        self.sweep_reads.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The sweep takes the turn (until [`ReadTurn::give_back`]).
    pub(super) fn take(&self) {
        *self.lock() = true;
    }

    /// The sweep is done reading. The poll thread resumes within
    /// [`PARKED_SLICE`]; it is not woken, since the next exchange usually
    /// follows at once.
    pub(super) fn give_back(&self) {
        *self.lock() = false;
    }

    /// Wakes a parked poll thread (the port is closing).
    pub(super) fn wake(&self) {
        self.wake.notify_all();
    }

    /// Whether the poll thread is out of `poll()` for the sweep's turn, so
    /// every message that comes is the sweep's to read.
    pub(super) fn poller_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }

    /// The poll thread, before each `poll()`: waits while the sweep reads.
    /// Returns whether it may read now (false: look at `stop` again).
    pub(super) fn poller_may_read(&self, stop: &AtomicBool) -> bool {
        let mut sweep_reads = self.lock();
        if !*sweep_reads {
            return true;
        }
        self.parked.store(true, Ordering::Release);
        while *sweep_reads && !stop.load(Ordering::Relaxed) {
            sweep_reads = self
                .wake
                .wait_timeout(sweep_reads, PARKED_SLICE)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        self.parked.store(false, Ordering::Release);
        !*sweep_reads
    }
}

/// Gives the turn back when dropped, on every way out of an exchange.
pub(super) struct Turn<'a>(&'a ReadTurn);

impl<'a> Turn<'a> {
    pub(super) fn take(turn: &'a ReadTurn) -> Self {
        turn.take();
        Turn(turn)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    #[test]
    fn the_poll_thread_parks_during_the_sweeps_turn_and_resumes_after_it() {
        let turn = Arc::new(ReadTurn::default());
        let stop = Arc::new(AtomicBool::new(false));
        let guard = Turn::take(&turn);
        let poller = std::thread::spawn({
            let (turn, stop) = (Arc::clone(&turn), Arc::clone(&stop));
            move || {
                let start = Instant::now();
                let may = turn.poller_may_read(&stop);
                (may, start.elapsed())
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while !turn.poller_parked() {
            assert!(Instant::now() < deadline, "the poll thread never parked");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        drop(guard);
        let (may, waited) = poller.join().expect("poller");
        assert!(may, "the turn is the poll thread's again");
        assert!(waited >= Duration::from_millis(20), "it waited for the sweep's turn to end");
        assert!(!turn.poller_parked());
    }

    #[test]
    fn stopping_ends_the_wait() {
        let turn = Arc::new(ReadTurn::default());
        let stop = Arc::new(AtomicBool::new(false));
        turn.take();
        let poller = std::thread::spawn({
            let (turn, stop) = (Arc::clone(&turn), Arc::clone(&stop));
            move || turn.poller_may_read(&stop)
        });
        stop.store(true, Ordering::Relaxed);
        turn.wake();
        assert!(!poller.join().expect("poller"), "stopped while the sweep held the turn");
    }

    #[test]
    fn without_a_sweep_the_poll_thread_reads_at_once() {
        let turn = ReadTurn::default();
        assert!(turn.poller_may_read(&AtomicBool::new(false)));
        assert!(!turn.poller_parked());
    }
}
