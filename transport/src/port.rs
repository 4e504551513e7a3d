//! How the sweep reaches the fabric: SMPs out, their answers back.
//!
//! [`SmpPort`] is the transport: one SMP and its answer
//! ([`SmpPort::send`]), a batch kept in flight as far as the transport
//! allows ([`SmpPort::exchange_many`]: the umad port keeps a window of
//! them, the embedded fabric answers each at once), and the traps that
//! arrive unasked ([`SmpPort::wait_trap`]). The sweep logic is the same
//! over every transport; only the waiting differs.
//!
//! [`SmpClient`] is the layer the sweep talks to: it stamps transaction
//! IDs, retries unanswered requests, checks that an answer really belongs
//! to its request, and counts every SMP, because the SMP count per sweep is
//! a first-class figure (design.md, "Performance principles").

use std::collections::BTreeMap;
use std::time::Duration;

use sm_mad::mad::{attr, method};
use sm_mad::smp::{self, Direction, DATA_LEN, PERMISSIVE_LID};
use sm_mad::{Mad, PortInfoPacket};

use crate::mkey::MKeys;

/// Why a transport could not carry an SMP at all (as opposed to the fabric
/// not answering, which is `Ok(None)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The device or simulator cannot be used any more.
    #[error("transport closed: {0}")]
    Closed(String),
    /// The request itself cannot be sent (wrong length, unsupported routing).
    #[error("cannot send: {0}")]
    Unsendable(String),
    /// Any other I/O failure, with the OS's or device's words.
    #[error("transport I/O: {0}")]
    Io(String),
}

/// A port the SM sends SMPs from (see the module documentation).
pub trait SmpPort {
    /// Sends one directed-route SMP (permissive DLID in the LRH) and waits
    /// for its answer: `Ok(None)` when none came.
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError>;

    /// Sends one SMP with `dlid` in the LRH (LID-routed SMPs, or directed
    /// routes with a LID-routed head). Transports that cannot address LIDs
    /// yet refuse.
    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        if dlid == PERMISSIVE_LID {
            self.send(mad)
        } else {
            Err(TransportError::Unsendable(format!(
                "LID-routed SMPs (DLID {dlid:#x}) are not supported by this transport"
            )))
        }
    }

    /// Sends every MAD of `batch` and returns the answers in the same
    /// order (`None` where none came). Transports that can keep several
    /// SMPs in flight override this; the default sends one at a time.
    fn exchange_many(&mut self, batch: &[Outgoing]) -> Result<Vec<Option<Vec<u8>>>, TransportError> {
        batch
            .iter()
            .map(|o| if o.dlid == PERMISSIVE_LID { self.send(&o.mad) } else { self.send_to(o.dlid, &o.mad) })
            .collect()
    }

    /// What the transport's SMP window did ([`crate::window`]); `None`
    /// for a transport without one.
    fn window_stats(&self) -> Option<crate::window::WindowStats> {
        None
    }

    /// Waits up to `timeout` for an unsolicited SubnTrap addressed to the
    /// SM and returns it. Transports that cannot receive traps just wait:
    /// the light sweep still finds every change through PortStateChange.
    fn wait_trap(&mut self, timeout: Duration) -> Result<Option<TrapMad>, TransportError> {
        std::thread::sleep(timeout);
        Ok(None)
    }
}

/// One SMP of a batch: the LRH DLID (permissive for directed routes) and
/// the MAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// LRH destination LID.
    pub dlid: u16,
    /// The 256-byte MAD.
    pub mad: Vec<u8>,
}

/// Requests [`SmpClient::run_many`] keeps out and in memory at once.
pub const RUN_CHUNK: usize = 16_384;

/// One request of [`SmpClient::run_many`]: a directed-route Get, or a Set
/// when `data` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmpOp {
    /// AttributeID.
    pub attribute: u16,
    /// AttributeModifier.
    pub modifier: u32,
    /// Directed route from the SM port.
    pub path: Vec<u8>,
    /// The attribute to Set; `None` for a Get.
    pub data: Option<[u8; DATA_LEN]>,
}

impl SmpOp {
    /// A SubnGet.
    pub fn get(attribute: u16, modifier: u32, path: &[u8]) -> Self {
        Self { attribute, modifier, path: path.to_vec(), data: None }
    }

    /// A SubnSet.
    pub fn set(attribute: u16, modifier: u32, path: &[u8], data: [u8; DATA_LEN]) -> Self {
        Self { attribute, modifier, path: path.to_vec(), data: Some(data) }
    }
}

/// A SubnTrap as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrapMad {
    /// LRH SLID: the LID of the port that sent it.
    pub slid: u16,
    /// The 256-byte MAD.
    pub mad: Vec<u8>,
}

/// Retries of an unanswered SMP when nobody says otherwise (OpenSM's
/// `transaction_retries`).
pub const DEFAULT_TRANSACTION_RETRIES: u32 = 3;
/// Answer timeout in milliseconds when nobody says otherwise (OpenSM's
/// `transaction_timeout`).
pub const DEFAULT_TRANSACTION_TIMEOUT_MS: u64 = 200;

/// Where a new client's transaction IDs start: a random point of the 32
/// bits the kernel keeps, so that a late answer to a request of an earlier
/// client (sweeps follow one another on the same port) matches no request
/// of this one: a client sends tens of thousands of SMPs at most, so two
/// clients' ranges overlap with odds of about 1 in 40,000, and even then an
/// answer is taken only for the same attribute and modifier (`check`).
/// 0, what a zeroed buffer carries, is never handed out.
pub fn fresh_tid() -> u64 {
    u64::from((random_u64() as u32).max(1))
}

/// 64 random bits from the OS; without OS randomness (a broken sandbox),
/// RandomState's per-process seed and the clock still make every value
/// differ. TID starts and SMInfo challenges come from here.
pub fn random_u64() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.finish()
    })
}

/// The transaction ID after `tid`: the next one of the kernel's 32 bits,
/// never 0.
fn following_tid(tid: u64) -> u64 {
    let t = (tid as u32).wrapping_add(1);
    u64::from(t.max(1))
}

/// SMPs sent, by attribute and method, and how they ended. Retries count
/// as SMPs: they cost the fabric as much as the first try.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmpStats {
    /// Every SMP handed to the transport.
    pub sent: u64,
    /// Of those, answered with a well-formed, matching response.
    pub answered: u64,
    /// Sent again after no answer.
    pub retries: u64,
    /// No answer after the last retry.
    pub unanswered: u64,
    /// Answers that could not be parsed or did not match the request.
    pub malformed: u64,
    /// Answers carrying a non-zero status.
    pub error_status: u64,
    /// SMPs sent per (AttributeID, method).
    pub by_attribute: BTreeMap<(u16, u8), u64>,
}

impl SmpStats {
    /// SubnGets of `attribute` sent (retries included).
    pub fn gets(&self, attribute: u16) -> u64 {
        self.by_attribute
            .get(&(attribute, method::GET))
            .copied()
            .unwrap_or(0)
    }

    /// SubnSets of `attribute` sent (retries included).
    pub fn sets(&self, attribute: u16) -> u64 {
        self.by_attribute
            .get(&(attribute, method::SET))
            .copied()
            .unwrap_or(0)
    }

    /// What was counted since `earlier`, a copy taken from the same client:
    /// the figure of one phase of a sweep.
    pub fn since(&self, earlier: &SmpStats) -> SmpStats {
        let mut by_attribute = self.by_attribute.clone();
        for (key, count) in &mut by_attribute {
            *count = count.saturating_sub(earlier.by_attribute.get(key).copied().unwrap_or(0));
        }
        by_attribute.retain(|_, count| *count != 0);
        SmpStats {
            sent: self.sent.saturating_sub(earlier.sent),
            answered: self.answered.saturating_sub(earlier.answered),
            retries: self.retries.saturating_sub(earlier.retries),
            unanswered: self.unanswered.saturating_sub(earlier.unanswered),
            malformed: self.malformed.saturating_sub(earlier.malformed),
            error_status: self.error_status.saturating_sub(earlier.error_status),
            by_attribute,
        }
    }
}

/// Why an SMP exchange gave no usable attribute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmpError {
    /// The transport failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// No answer, retries included.
    #[error("no answer after {tries} tries")]
    NoAnswer {
        /// SMPs sent for this request.
        tries: u32,
    },
    /// The answer is not a well-formed response to this request.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// The responder refused the request.
    #[error("status {0:#06x}")]
    Status(u16),
    /// The request could not be built (path too long).
    #[error("bad request: {0}")]
    BadRequest(sm_mad::Error),
}

/// The sweep's side of a transport: builds directed-route SMPs, matches
/// answers, retries and counts. With [`MKeys`] on, each SMP carries the
/// M_Key of the port at the end of its path and each PortInfo Set writes
/// the M_Key fields (see [`crate::mkey`]).
pub struct SmpClient<'p> {
    port: &'p mut dyn SmpPort,
    next_tid: u64,
    retries: u32,
    m_keys: MKeys,
    stats: SmpStats,
}

impl<'p> SmpClient<'p> {
    /// A client over `port` that sends a request up to `1 + retries` times
    /// when no answer comes. A real fabric loses MADs now and then; giving
    /// up on a node at the first loss would drop it from the subnet for a
    /// whole sweep.
    pub fn new(port: &'p mut dyn SmpPort, retries: u32) -> Self {
        Self {
            port,
            next_tid: fresh_tid(),
            retries,
            m_keys: MKeys::off(),
            stats: SmpStats::default(),
        }
    }

    /// The client with M_Key handling per `keys` (shared with the SM's
    /// other clients: what one learns, the next uses).
    pub fn with_m_keys(mut self, keys: MKeys) -> Self {
        self.m_keys = keys;
        self
    }

    /// The M_Key state this client uses.
    pub fn m_keys(&self) -> &MKeys {
        &self.m_keys
    }

    /// The transaction ID the next request will carry.
    pub fn next_tid(&self) -> u64 {
        self.next_tid
    }

    /// Counts so far.
    pub fn stats(&self) -> &SmpStats {
        &self.stats
    }

    /// A SubnGet along the directed path `path`; the attribute data of
    /// the answer.
    pub fn get(
        &mut self,
        attribute: u16,
        modifier: u32,
        path: &[u8],
    ) -> Result<[u8; DATA_LEN], SmpError> {
        let request = smp::Repr::directed_get(0, attribute, modifier, 0, path)
            .map_err(SmpError::BadRequest)?;
        self.exchange(request, path)
    }

    /// A SubnGet along `path` that carries `data` in its payload (SMInfo
    /// polls put the requester's SMInfo there, with a challenge in the
    /// SM_Key field); otherwise as [`SmpClient::get`].
    pub fn get_with(
        &mut self,
        attribute: u16,
        modifier: u32,
        path: &[u8],
        data: [u8; DATA_LEN],
    ) -> Result<[u8; DATA_LEN], SmpError> {
        let mut request = smp::Repr::directed_get(0, attribute, modifier, 0, path)
            .map_err(SmpError::BadRequest)?;
        request.data = data;
        self.exchange(request, path)
    }

    /// A SubnSet of `data` along `path`; the attribute as the responder
    /// holds it afterwards.
    pub fn set(
        &mut self,
        attribute: u16,
        modifier: u32,
        path: &[u8],
        mut data: [u8; DATA_LEN],
    ) -> Result<[u8; DATA_LEN], SmpError> {
        if attribute == attr::PORT_INFO {
            self.m_keys.stamp(path, modifier, &mut data);
        }
        let request = smp::Repr::directed_set(0, attribute, modifier, 0, path, data)
            .map_err(SmpError::BadRequest)?;
        let result = self.exchange(request, path);
        self.save_keys();
        result
    }

    /// Every request of `ops`, as many in flight at once as the transport
    /// allows; results in the same order. An unanswered request is sent
    /// again (with a fresh TID) in the next round, up to the retries.
    ///
    /// Taken [`RUN_CHUNK`] requests at a time: a request, its MAD and its
    /// answer take about a kilobyte while out, and the LFT blocks of the
    /// largest fabric are millions of requests. The window drains once
    /// per chunk only, which costs nothing measurable.
    pub fn run_many(&mut self, ops: &[SmpOp]) -> Vec<Result<[u8; DATA_LEN], SmpError>> {
        let mut results = Vec::with_capacity(ops.len());
        for chunk in ops.chunks(RUN_CHUNK) {
            results.extend(self.run_chunk(chunk));
        }
        results
    }

    fn run_chunk(&mut self, ops: &[SmpOp]) -> Vec<Result<[u8; DATA_LEN], SmpError>> {
        let mut results: Vec<Option<Result<[u8; DATA_LEN], SmpError>>> = vec![None; ops.len()];
        let mut requests: Vec<Option<smp::Repr>> = ops
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let built = match op.data {
                    None => smp::Repr::directed_get(0, op.attribute, op.modifier, 0, &op.path),
                    Some(mut d) => {
                        if op.attribute == attr::PORT_INFO {
                            self.m_keys.stamp(&op.path, op.modifier, &mut d);
                        }
                        smp::Repr::directed_set(0, op.attribute, op.modifier, 0, &op.path, d)
                    }
                };
                built.map_err(|e| results[i] = Some(Err(SmpError::BadRequest(e)))).ok()
            })
            .collect();
        let mut pending: Vec<usize> = (0..ops.len()).filter(|&i| requests[i].is_some()).collect();
        let mut tries = 0;
        while !pending.is_empty() {
            tries += 1;
            let mut batch = Vec::with_capacity(pending.len());
            for &i in &pending {
                let Some(request) = requests[i].as_mut() else { continue };
                request.transaction_id = self.next_tid;
                // A retry may be lost to a wrong key, not to the fabric:
                // each try takes the next candidate key.
                request.m_key = self.m_keys.key_for(&ops[i].path, tries - 1);
                self.next_tid = following_tid(self.next_tid);
                let mut mad = Mad::zeroed();
                request.emit(&mut mad.smp_mut());
                self.stats.sent += 1;
                *self.stats.by_attribute.entry((request.attribute_id, request.method)).or_default() += 1;
                batch.push(Outgoing { dlid: PERMISSIVE_LID, mad: mad.0.to_vec() });
            }
            let answers = match self.port.exchange_many(&batch) {
                Ok(a) => a,
                Err(e) => {
                    for &i in &pending {
                        results[i] = Some(Err(SmpError::Transport(e.clone())));
                    }
                    break;
                }
            };
            let mut again = Vec::new();
            for (k, &i) in pending.iter().enumerate() {
                let Some(request) = requests[i] else { continue };
                match answers.get(k).cloned().flatten() {
                    Some(answer) => results[i] = Some(self.check(&request, &answer, &ops[i].path)),
                    None if tries <= self.retries => {
                        self.stats.retries += 1;
                        again.push(i);
                    }
                    None => {
                        self.stats.unanswered += 1;
                        results[i] = Some(Err(SmpError::NoAnswer { tries }));
                    }
                }
            }
            pending = again;
        }
        self.save_keys();
        results.into_iter().map(|r| r.unwrap_or(Err(SmpError::NoAnswer { tries }))).collect()
    }

    fn exchange(&mut self, mut request: smp::Repr, path: &[u8]) -> Result<[u8; DATA_LEN], SmpError> {
        let mut tries = 0;
        loop {
            // A fresh TID per try, so that a late answer to an earlier try
            // is never taken for this one's.
            request.transaction_id = self.next_tid;
            self.next_tid = following_tid(self.next_tid);
            request.m_key = self.m_keys.key_for(path, tries);
            let mut mad = Mad::zeroed();
            request.emit(&mut mad.smp_mut());
            tries += 1;
            self.stats.sent += 1;
            *self
                .stats
                .by_attribute
                .entry((request.attribute_id, request.method))
                .or_default() += 1;
            match self.port.send(&mad.0)? {
                Some(answer) => return self.check(&request, &answer, path),
                None if tries <= self.retries => self.stats.retries += 1,
                None => {
                    self.stats.unanswered += 1;
                    return Err(SmpError::NoAnswer { tries });
                }
            }
        }
    }

    /// Accepts `answer` only as a directed-route GetResp to `request`.
    fn check(&mut self, request: &smp::Repr, answer: &[u8], path: &[u8]) -> Result<[u8; DATA_LEN], SmpError> {
        let parsed = smp::Packet::new_checked(answer)
            .and_then(|packet| smp::Repr::parse(&packet))
            .map_err(|e| e.to_string())
            .and_then(|repr| {
                let inbound = repr
                    .directed()
                    .is_some_and(|dr| dr.direction == Direction::Inbound);
                if repr.method != method::GET_RESP {
                    Err(format!("method {:#04x} is not GetResp", repr.method))
                } else if repr.transaction_id != request.transaction_id {
                    Err(format!(
                        "TID {:#x} answers no request of ours (sent {:#x})",
                        repr.transaction_id, request.transaction_id
                    ))
                } else if repr.attribute_id != request.attribute_id
                    || repr.attribute_modifier != request.attribute_modifier
                {
                    Err(format!(
                        "answer is for attribute {:#06x}/{:#x}",
                        repr.attribute_id, repr.attribute_modifier
                    ))
                } else if !inbound {
                    Err("not a directed-route response".to_string())
                } else {
                    Ok(repr)
                }
            });
        match parsed {
            Err(why) => {
                self.stats.malformed += 1;
                Err(SmpError::Malformed(why))
            }
            Ok(repr) if repr.status != 0 => {
                self.stats.error_status += 1;
                Err(SmpError::Status(repr.status))
            }
            Ok(repr) => {
                self.stats.answered += 1;
                self.learn(path, request, &repr);
                Ok(repr.data)
            }
        }
    }
}

impl SmpClient<'_> {
    /// Keys set must be on disk before an SM that restarts needs them:
    /// written after each batch that changed one (only the first sweep's
    /// PortInfo Sets, or a port that changed hands).
    fn save_keys(&self) {
        if let Err(e) = self.m_keys.flush_keys() {
            tracing::error!(error = %e, "guid2mkey not written");
        }
    }

    /// What a good answer along `path` to `request` tells about M_Keys:
    /// which key the port there holds (PortInfo as read, or as a Set that
    /// succeeded wrote it). Which port is there is not taken from a
    /// NodeInfo answer: whatever answers at the end of a path may claim any
    /// GUID, and the key of the port it names would be sent to it. Discovery
    /// tells [`MKeys`] once it has accepted a node or link into the
    /// topology ([`MKeys::learn_node`]).
    fn learn(&self, path: &[u8], request: &smp::Repr, answer: &smp::Repr) {
        if !self.m_keys.enabled() {
            return;
        }
        match answer.attribute_id {
            attr::PORT_INFO => {
                // A Set that succeeded wrote the request's key, whatever
                // the answer shows (ibsim, for one, keeps no M_Key and
                // answers 0).
                let source = if request.method == method::SET { &request.data } else { &answer.data };
                if let Ok(info) = PortInfoPacket::new_checked(&source[..]) {
                    self.m_keys.learn_key(path, answer.attribute_modifier, info.m_key());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers from a script, whatever was asked.
    struct Scripted(Vec<Option<Vec<u8>>>);

    impl SmpPort for Scripted {
        fn send(&mut self, _mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
            Ok(if self.0.is_empty() {
                None
            } else {
                self.0.remove(0)
            })
        }
    }

    #[test]
    fn garbage_truncated_and_foreign_answers_are_errors() {
        let mut good = Mad::zeroed();
        smp::Repr::directed_get(1, 0x11, 0, 0, &[])
            .map(|r| r.response(0, [0; DATA_LEN]))
            .expect("empty path is valid")
            .emit(&mut good.smp_mut());
        let mut port = Scripted(vec![
            Some(vec![0xAB; 256]),
            Some(vec![1, 0x81, 1]),
            Some(good.0.to_vec()), // TID 1, but the third try has TID 3
            None,
        ]);
        let mut client = SmpClient::new(&mut port, 1);
        for _ in 0..3 {
            assert!(matches!(
                client.get(0x11, 0, &[]),
                Err(SmpError::Malformed(_))
            ));
        }
        assert_eq!(
            client.get(0x11, 0, &[]),
            Err(SmpError::NoAnswer { tries: 2 })
        );
        let s = client.stats();
        assert_eq!((s.sent, s.malformed, s.retries, s.unanswered), (5, 3, 1, 1));
        assert_eq!(s.gets(0x11), 5);
    }

    #[test]
    fn clients_never_share_a_transaction_id() {
        let mut port = Scripted(vec![None, None, None, None]);
        let mut first = SmpClient::new(&mut port, 0);
        let mut used = Vec::new();
        for _ in 0..2 {
            used.push(first.next_tid());
            assert!(first.get(0x11, 0, &[]).is_err());
        }
        let mut second = SmpClient::new(&mut port, 0);
        for _ in 0..2 {
            used.push(second.next_tid());
            assert!(second.get(0x11, 0, &[]).is_err());
        }
        let mut sorted = used.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 4, "TIDs {used:?}");
        assert!(used.iter().all(|&t| t as u32 != 0));
        assert_eq!(following_tid(0xFFFF_FFFF), 1, "0 is never handed out");
        assert_eq!(following_tid(0x1_0000_0005), 6, "the kernel keeps 32 bits");
    }
}
