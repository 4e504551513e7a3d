//! [`SimPort`]: the SM's [`SmpPort`] onto the embedded fabric. It lives
//! with the simulator so that the production transport
//! ([`sm_transport::port`]) knows nothing of it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::SimFabric;
use sm_transport::port::{SmpPort, TransportError, TrapMad};

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

impl SmpPort for SimPort<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        Ok(self.fabric.handle(mad))
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        Ok(self.fabric.handle_to(dlid, mad).map(|r| r.mad))
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.traps
                .extend(self.fabric.take_traps().into_iter().map(|t| TrapMad { slid: t.slid, mad: t.mad }));
            if let Some(t) = self.traps.pop_front() {
                return Ok(Some(t));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // Something else (a test) may change the fabric meanwhile.
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
    }
}
