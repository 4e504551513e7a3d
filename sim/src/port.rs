//! The SM's ports onto the embedded fabric. They live with the simulator
//! so that the production transport ([`sm_transport`]) knows nothing of
//! it.
//!
//! * [`SimPort`] borrows the fabric: tests inspect and perturb it between
//!   sweeps.
//! * [`SharedFabric`] is the fabric behind a lock, for an SM whose SA,
//!   performance manager and sweeps run on threads of their own:
//!   [`SharedSimPort`] carries the SMPs, [`SimGmpAgent`] is a GSI agent on
//!   any port (the performance manager on the SM's, a host asking the SA
//!   on its own), and [`SimGmpSender`] is the SM port's sending end for the
//!   SA's answers and Reports.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{SimFabric, SimTrap};
use sm_mad::mad::{class, Header};
use sm_transport::gmp::{GmpAgent, GmpSender, IncomingMad};
use sm_transport::port::{SmpPort, TransportError, TrapMad};

/// How often a waiting reader looks at the fabric again: something else
/// (a test, another thread) changes it meanwhile.
const POLL: Duration = Duration::from_millis(2);

/// [`SmpPort`] over the embedded simulated fabric. It borrows the fabric so
/// that tests can inspect and perturb it between sweeps.
pub struct SimPort<'a> {
    fabric: &'a mut SimFabric,
    traps: VecDeque<TrapMad>,
}

impl<'a> SimPort<'a> {
    /// Sends from the SM port the fabric was built with.
    pub fn new(fabric: &'a mut SimFabric) -> Self {
        Self { fabric, traps: VecDeque::new() }
    }

    /// The fabric behind the port.
    pub fn fabric(&mut self) -> &mut SimFabric {
        self.fabric
    }
}

/// Waits up to `timeout` for the next trap, taking new ones from the
/// fabric with `take`.
fn wait_trap(
    queue: &mut VecDeque<TrapMad>,
    timeout: Duration,
    mut take: impl FnMut() -> Vec<SimTrap>,
) -> Option<TrapMad> {
    let deadline = Instant::now() + timeout;
    loop {
        queue.extend(take().into_iter().map(|t| TrapMad { slid: t.slid, mad: t.mad }));
        if let Some(t) = queue.pop_front() {
            return Some(t);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

impl SmpPort for SimPort<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        Ok(self.fabric.handle(mad))
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        Ok(self.fabric.handle_to(dlid, mad).map(|r| r.mad))
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        let fabric = &mut *self.fabric;
        Ok(wait_trap(&mut self.traps, timeout, || fabric.take_traps()))
    }
}

/// The embedded fabric shared by the threads of one SM (and a test).
#[derive(Clone, Debug)]
pub struct SharedFabric(Arc<Mutex<SimFabric>>);

impl SharedFabric {
    /// Puts `fabric` behind the lock.
    pub fn new(fabric: SimFabric) -> Self {
        Self(Arc::new(Mutex::new(fabric)))
    }

    /// The fabric, locked. A thread that panicked holding it left it as
    /// it was: every change the fabric makes is whole.
    pub fn lock(&self) -> MutexGuard<'_, SimFabric> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The SM's port: SMPs and traps.
    pub fn smp_port(&self) -> SharedSimPort {
        let at = self.lock().sm_location();
        self.smp_port_at(at)
    }

    /// The port of the SM at `at` (the first SM's, or one added with
    /// [`SimFabric::add_sm`]).
    pub fn smp_port_at(&self, at: (usize, u8)) -> SharedSimPort {
        SharedSimPort { fabric: self.clone(), at, traps: VecDeque::new() }
    }

    /// A GSI agent on `at` (node, port).
    pub fn agent(&self, at: (usize, u8)) -> SimGmpAgent {
        SimGmpAgent { fabric: self.clone(), at, class: None }
    }

    /// A GSI agent on `at` that receives MADs of management class `class`
    /// only, as a umad agent registered for one class does: agents of
    /// several classes on one port (the performance manager, congestion
    /// control) do not take each other's answers.
    pub fn class_agent(&self, at: (usize, u8), class: u8) -> SimGmpAgent {
        SimGmpAgent { fabric: self.clone(), at, class: Some(class) }
    }

    /// The sending end of the SM's port.
    pub fn sender(&self) -> SimGmpSender {
        let at = self.lock().sm_location();
        SimGmpSender { fabric: self.clone(), at }
    }

    /// Sends a general MAD from `at` to `dlid`. What the fabric loses is
    /// not an error: the requester times out, as on a real fabric; a MAD
    /// too short for its header cannot be sent at all.
    fn post(&self, at: (usize, u8), dlid: u16, mad: &[u8]) -> Result<(), TransportError> {
        if Header::new_checked(mad).is_err() {
            return Err(TransportError::Unsendable(format!("MAD of {} bytes", mad.len())));
        }
        let _ = self.lock().send_gmp(at, dlid, mad);
        Ok(())
    }

    /// The SA requests that reach the SM's port, in a queue of `depth`
    /// (what the SM's SA thread reads).
    pub fn sa_requests(&self, depth: usize) -> std::sync::mpsc::Receiver<IncomingMad> {
        let (tx, rx) = std::sync::mpsc::sync_channel(depth);
        let mut fabric = self.lock();
        let at = fabric.sm_location();
        fabric.listen_gmp(at, class::SUBN_ADM, tx);
        rx
    }
}

/// [`SmpPort`] over a [`SharedFabric`]: the lock is held for one SMP at a
/// time.
pub struct SharedSimPort {
    fabric: SharedFabric,
    at: (usize, u8),
    traps: VecDeque<TrapMad>,
}

impl SmpPort for SharedSimPort {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.send_to(sm_mad::smp::PERMISSIVE_LID, mad)
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        Ok(self.fabric.lock().handle_from(self.at, dlid, mad).map(|r| r.mad))
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        let (fabric, at) = (&self.fabric, self.at);
        Ok(wait_trap(&mut self.traps, timeout, || fabric.lock().take_traps_at(at)))
    }
}

/// A GSI agent on one port of a [`SharedFabric`]. What the fabric loses
/// is never an error here: the requester times out, as on a real fabric.
pub struct SimGmpAgent {
    fabric: SharedFabric,
    at: (usize, u8),
    /// The class it takes, when it is one class's agent.
    class: Option<u8>,
}

impl SimGmpAgent {
    /// The port's base LID (0 before the SM gave it one).
    pub fn lid(&self) -> u16 {
        self.fabric.lock().port_lid(self.at.0, self.at.1).unwrap_or(0)
    }
}

impl GmpAgent for SimGmpAgent {
    fn send(&mut self, dlid: u16, _dqpn: u32, mad: &[u8], _timeout_ms: u32) -> Result<(), TransportError> {
        self.fabric.post(self.at, dlid, mad)
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, TransportError> {
        // An answer from a responder thread comes within microseconds: the
        // pause between looks starts short and grows to POLL, so that a
        // host asking thousands of queries is not held 2 ms by each.
        let mut pause = Duration::from_micros(10);
        loop {
            let taken = match self.class {
                Some(class) => self.fabric.lock().take_gmp_of(self.at, class),
                None => self.fabric.lock().take_gmp(self.at),
            };
            if let Some(m) = taken {
                return Ok(Some(m));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            std::thread::sleep(left.min(pause));
            pause = (pause * 2).min(POLL);
        }
    }
}

/// The sending end of the SM's port on a [`SharedFabric`].
#[derive(Clone)]
pub struct SimGmpSender {
    fabric: SharedFabric,
    at: (usize, u8),
}

impl GmpSender for SimGmpSender {
    fn reply(&self, to: &IncomingMad, mad: &[u8]) -> Result<(), TransportError> {
        self.fabric.post(self.at, to.slid, mad)
    }

    fn send_gsi(&self, dlid: u16, _dqpn: u32, mad: &[u8], _timeout_ms: u32) -> Result<(), TransportError> {
        self.fabric.post(self.at, dlid, mad)
    }
}
