//! [`SmInfoState`]: what this SM says about itself in SMInfo and the
//! controls other SMs sent it, shared by the SM loop and the responder;
//! [`ActivityPort`], the SM loop's heartbeat (ActCount).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sm_mad::sm_info::{control, SmState};
use sm_mad::SmInfoRepr;
use tracing::info;

use super::MAX_PRIORITY;
use sm_transport::{SmpPort, TransportError};

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
pub(super) struct Inner {
    pub(super) state: SmState,
    pub(super) controls: VecDeque<Control>,
    /// Port GUIDs of SMs already reported as holding another SM_Key, so
    /// that a check after every sweep does not log them again.
    pub(super) foreign: HashSet<u64>,
    /// A master we took for hung (port GUID, the ActCount it stopped at):
    /// while it shows that count it is no master to stand by for or hand
    /// over to, however it still answers.
    pub(super) hung: Option<(u64, u32)>,
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
    /// [`arbitrate`](super::arbitrate) fills it in from discovery.
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

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
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
    pub(super) fn first_foreign_report(&self, guid: u64) -> bool {
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
    pub(super) fn apply(&self, modifier: u32, sender: &SmInfoRepr) -> Result<SmState, String> {
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
        batch: &[sm_transport::port::Outgoing],
    ) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        let r = self.port.exchange_many(batch);
        self.state.bump_activity();
        r
    }

    fn window_stats(&self) -> Option<sm_transport::window::WindowStats> {
        self.port.window_stats()
    }

    fn wait_trap(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<sm_transport::port::TrapMad>, TransportError> {
        let r = self.port.wait_trap(timeout);
        self.state.bump_activity();
        r
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::standby::testkit::*;
    use crate::sweep::discover;
    use sm_transport::{SmpClient, SmpPort};

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
}
