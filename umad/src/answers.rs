//! The hand-over of answers from the poll thread to the sweep.
//!
//! A sweep waits for tens of thousands of answers one after another, so
//! the cost of handing one over is paid per SMP. A plain queue under a
//! mutex, with a condition variable signalled only while the sweep is
//! actually asleep, costs no system call when the sweep finds answers
//! already waiting, and the sweep takes every answer queued in one go.
//! (tokio's channel plus a `block_on` with a timer cost about eight futex
//! calls per SMP under ibsim, more than the MAD's own reads and writes.)

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use sm_transport::port::TransportError;
use super::Received;

/// What the poll thread hands over: an answer, or the reason the
/// transport died.
pub(super) type Answer = Result<Received, TransportError>;

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Answer>,
    /// The sweep sleeps on the condition variable.
    waiting: bool,
    /// The poll thread is gone: nothing more will come.
    writer_gone: bool,
    /// The port is gone: nobody reads any more.
    reader_gone: bool,
}

/// The queue between the poll thread (one writer) and the sweep (one
/// reader).
#[derive(Debug, Default)]
pub(super) struct Answers {
    state: Mutex<State>,
    ready: Condvar,
}

/// What a wait gave.
#[derive(Debug)]
pub(super) enum Taken {
    /// Answers were moved to the caller's queue.
    Some,
    /// Nothing came before the deadline.
    Timeout,
    /// Nothing will ever come: the poll thread is gone.
    Closed,
}

impl Answers {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves a queue that is
        // still consistent (every step is a single push or swap).
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `answer`; false once nobody reads any more.
    pub(super) fn push(&self, answer: Answer) -> bool {
        let mut s = self.lock();
        if s.reader_gone {
            return false;
        }
        s.queue.push_back(answer);
        if s.waiting {
            s.waiting = false;
            drop(s);
            self.ready.notify_one();
        }
        true
    }

    /// Whether the reading side is gone.
    pub(super) fn is_closed(&self) -> bool {
        self.lock().reader_gone
    }

    /// The poll thread ends: a sleeping reader wakes to see it.
    pub(super) fn close_writer(&self) {
        let mut s = self.lock();
        s.writer_gone = true;
        drop(s);
        self.ready.notify_one();
    }

    /// The port ends: later answers are dropped.
    pub(super) fn close_reader(&self) {
        let mut s = self.lock();
        s.reader_gone = true;
        s.queue.clear();
    }

    /// Moves every queued answer to the back of `into`, waiting until
    /// `deadline` for the first one when none is queued.
    pub(super) fn take(&self, into: &mut VecDeque<Answer>, deadline: Instant) -> Taken {
        let mut s = self.lock();
        loop {
            if !s.queue.is_empty() {
                into.append(&mut s.queue);
                return Taken::Some;
            }
            if s.writer_gone {
                return Taken::Closed;
            }
            let now = Instant::now();
            if now >= deadline {
                return Taken::Timeout;
            }
            s.waiting = true;
            let (guard, _) = self
                .ready
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            s = guard;
            s.waiting = false;
        }
    }

    /// The next queued answer, without waiting.
    #[cfg(test)]
    pub(super) fn try_take(&self) -> Option<Answer> {
        self.lock().queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn answer(mark: u8) -> Answer {
        Ok(Received { status: 0, mad: vec![mark] })
    }

    #[test]
    fn a_waiting_reader_is_woken_and_takes_everything_queued() {
        let q = Arc::new(Answers::default());
        let writer = std::thread::spawn({
            let q = Arc::clone(&q);
            move || {
                std::thread::sleep(Duration::from_millis(20));
                for mark in 0..3 {
                    assert!(q.push(answer(mark)));
                }
            }
        });
        let mut got = VecDeque::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while got.len() < 3 {
            match q.take(&mut got, deadline) {
                Taken::Some => {}
                other => panic!("expected answers, got {other:?}"),
            }
        }
        writer.join().expect("writer");
        let marks: Vec<u8> = got.into_iter().map(|a| a.expect("answer").mad[0]).collect();
        assert_eq!(marks, vec![0, 1, 2], "answers keep their order");
    }

    #[test]
    fn an_empty_queue_times_out_at_the_deadline() {
        let q = Answers::default();
        let start = Instant::now();
        let mut got = VecDeque::new();
        assert!(matches!(q.take(&mut got, start + Duration::from_millis(30)), Taken::Timeout));
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(got.is_empty());
    }

    #[test]
    fn what_was_queued_before_the_writer_ended_is_still_taken_then_closed() {
        let q = Answers::default();
        assert!(q.push(answer(7)));
        q.close_writer();
        let mut got = VecDeque::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        assert!(matches!(q.take(&mut got, deadline), Taken::Some));
        assert!(matches!(q.take(&mut got, deadline), Taken::Closed));
    }

    #[test]
    fn a_closed_reader_refuses_answers() {
        let q = Answers::default();
        q.close_reader();
        assert!(q.is_closed());
        assert!(!q.push(answer(1)));
        assert!(q.try_take().is_none());
    }
}
