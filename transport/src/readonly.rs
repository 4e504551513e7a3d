//! A port that can only look: [`ReadOnly`] wraps any [`SmpPort`] and lets
//! through SubnGet alone. Every other method (SubnSet above all, but also
//! a SubnTrapRepress or anything unknown) is refused before it reaches the
//! fabric, counted, and answered with [`TransportError::Unsendable`], so
//! the caller fails loudly rather than believing it wrote.
//!
//! This is what `smcore shadow` and `smcore check` run on: they sit beside
//! the SM in charge of a live fabric, and the promise that they change
//! nothing is kept here, at the transport boundary, not by the care of the
//! code above it.

use std::time::Duration;

use sm_mad::mad::method;

use crate::port::{Outgoing, SmpPort, TransportError, TrapMad};

/// Offset of the MAD header's Method byte.
const METHOD_OFFSET: usize = 3;

/// What a [`ReadOnly`] port passed and refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadOnlyStats {
    /// SubnGets sent on.
    pub gets: u64,
    /// MADs refused (not a SubnGet).
    pub refused: u64,
}

/// An [`SmpPort`] that sends SubnGets only (see the module documentation).
#[derive(Debug)]
pub struct ReadOnly<P> {
    inner: P,
    stats: ReadOnlyStats,
}

impl<P> ReadOnly<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Self {
        Self { inner, stats: ReadOnlyStats::default() }
    }

    /// What passed and what was refused so far.
    pub fn stats(&self) -> ReadOnlyStats {
        self.stats
    }

    /// The wrapped port.
    pub fn get_ref(&self) -> &P {
        &self.inner
    }

    /// The wrapped port back.
    pub fn into_inner(self) -> P {
        self.inner
    }

    /// `Ok` when `mad` is a SubnGet; counts it either way.
    fn admit(&mut self, mad: &[u8]) -> Result<(), TransportError> {
        match mad.get(METHOD_OFFSET) {
            Some(&m) if m == method::GET => {
                self.stats.gets += 1;
                Ok(())
            }
            other => {
                self.stats.refused += 1;
                Err(TransportError::Unsendable(format!(
                    "read-only port: method {} refused (only SubnGet is sent)",
                    other.map_or_else(|| "missing".to_string(), |m| format!("{m:#04x}"))
                )))
            }
        }
    }
}

impl<P: SmpPort> SmpPort for ReadOnly<P> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.admit(mad)?;
        self.inner.send(mad)
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.admit(mad)?;
        self.inner.send_to(dlid, mad)
    }

    /// A batch with anything but SubnGets in it is refused whole: nothing
    /// of it is sent.
    fn exchange_many(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        let before = self.stats;
        for o in batch {
            if let Err(e) = self.admit(&o.mad) {
                let refused = self.stats.refused;
                self.stats = ReadOnlyStats { refused, ..before };
                return Err(e);
            }
        }
        self.inner.exchange_many(batch)
    }

    fn window_stats(&self) -> Option<crate::window::WindowStats> {
        self.inner.window_stats()
    }

    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        self.inner.wait_trap(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every MAD with itself and counts what reached it.
    #[derive(Default)]
    struct Echo {
        seen: usize,
    }

    impl SmpPort for Echo {
        fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
            self.seen += 1;
            Ok(Some(mad.to_vec()))
        }
    }

    fn mad(m: u8) -> Vec<u8> {
        let mut v = vec![0u8; 256];
        v[0] = 1;
        v[1] = 0x81;
        v[2] = 1;
        v[METHOD_OFFSET] = m;
        v
    }

    #[test]
    fn gets_pass_and_everything_else_is_refused_before_the_fabric() {
        let mut port = ReadOnly::new(Echo::default());
        assert!(port.send(&mad(method::GET)).expect("a Get passes").is_some());
        for m in [method::SET, method::TRAP_REPRESS, 0x7f] {
            assert!(matches!(port.send(&mad(m)), Err(TransportError::Unsendable(_))), "method {m:#x}");
            assert!(port.send_to(5, &mad(m)).is_err());
        }
        assert!(port.send(&[0u8; 2]).is_err(), "a MAD too short to have a method");
        assert_eq!(port.stats(), ReadOnlyStats { gets: 1, refused: 7 });
        assert_eq!(port.get_ref().seen, 1, "only the Get reached the fabric");
    }

    #[test]
    fn a_batch_with_one_set_sends_nothing() {
        let mut port = ReadOnly::new(Echo::default());
        let batch = [
            Outgoing { dlid: 0xffff, mad: mad(method::GET) },
            Outgoing { dlid: 0xffff, mad: mad(method::SET) },
        ];
        assert!(port.exchange_many(&batch).is_err());
        assert_eq!(port.get_ref().seen, 0);
        assert_eq!(port.stats(), ReadOnlyStats { gets: 0, refused: 1 });
        let gets = [Outgoing { dlid: 0xffff, mad: mad(method::GET) }, Outgoing { dlid: 0xffff, mad: mad(method::GET) }];
        assert_eq!(port.exchange_many(&gets).expect("Gets pass").len(), 2);
        assert_eq!(port.stats().gets, 2);
    }
}
