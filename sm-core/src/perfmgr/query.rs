//! Reading every port's counters from its PMA, LID-routed on QP1, with a
//! window of requests in flight as the SM does with SMPs: a fabric of
//! thousands of ports is read in a few round trips' time, and a port that
//! does not answer costs one timeout, not one per port after it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sm_mad::mad::{method, Header, HeaderRepr, MAD_LEN};
use sm_mad::perf::{
    self, attr, Counters, CountersRepr, Extended, ExtendedRepr, CLASS_VERSION, DATA_OFFSET, MGMT_CLASS,
};

use super::counters::{idx, Sample};
use sm_transport::gmp::GmpAgent;

/// Where PMA requests go and answers come from.
pub trait PmaTransport {
    /// Sends one request to `dlid`'s QP1; the answer is awaited up to
    /// `timeout`.
    fn send(&mut self, dlid: u16, mad: &[u8], timeout: Duration) -> Result<(), String>;
    /// The next answer before `deadline` with the LID it came from,
    /// `None` when none came.
    fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, String>;
    /// Sends one request to `dlid`'s queue pair `qp` (a PMA's redirect,
    /// with the GSI Q_Key); only QP1 unless the transport can do more.
    fn send_to(&mut self, dlid: u16, qp: u32, mad: &[u8], timeout: Duration) -> Result<(), String> {
        if qp == 1 {
            self.send(dlid, mad, timeout)
        } else {
            Err(format!("cannot send to QP {qp}"))
        }
    }
}

/// Any GSI agent of the PMA class: a umad one, one on the embedded fabric.
impl<A: GmpAgent + ?Sized> PmaTransport for A {
    fn send(&mut self, dlid: u16, mad: &[u8], timeout: Duration) -> Result<(), String> {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX).max(1);
        GmpAgent::send(self, dlid, 1, mad, ms).map_err(|e| e.to_string())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, String> {
        GmpAgent::receive(self, deadline).map_err(|e| e.to_string())
    }

    fn send_to(&mut self, dlid: u16, qp: u32, mad: &[u8], timeout: Duration) -> Result<(), String> {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX).max(1);
        GmpAgent::send(self, dlid, qp, mad, ms).map_err(|e| e.to_string())
    }
}

/// One port to read: the LID its node answers on and the port number.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The node's LID (a switch's port 0 LID, or the CA port's own).
    pub lid: u16,
    /// PortSelect.
    pub port: u8,
    /// Node GUID, for the record.
    pub node_guid: u64,
    /// NodeDescription, for people.
    pub node_desc: String,
    /// Whether the node is a switch.
    pub switch: bool,
    /// The far end of the port's link (node GUID, port) and whether it is
    /// a switch: the isolation policy disables a link at its switch end.
    pub peer: Option<((u64, u8), bool)>,
}

/// Counts of one query round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Requests sent.
    pub sent: u64,
    /// Answers matched to a request.
    pub answered: u64,
    /// Requests left unanswered.
    pub lost: u64,
    /// Answers with an error status (the port has no such attribute).
    pub refused: u64,
}

/// The request for `attribute` of `port` with transaction ID `tid`: a Get,
/// or a Set with `clear` (CounterSelect bits of the counters to clear).
pub fn request(attribute: u16, port: u8, tid: u64, clear: Option<(u16, u8)>) -> [u8; MAD_LEN] {
    let mut mad = [0u8; MAD_LEN];
    HeaderRepr {
        mgmt_class: MGMT_CLASS,
        class_version: CLASS_VERSION,
        method: if clear.is_some() { method::SET } else { method::GET },
        status: 0,
        class_specific: 0,
        transaction_id: tid,
        attribute_id: attribute,
        attribute_modifier: 0,
    }
    .emit(&mut Header::new_unchecked(&mut mad[..]));
    let data = &mut mad[DATA_OFFSET..];
    data[1] = port;
    if let Some((select, select2)) = clear {
        data[2..4].copy_from_slice(&select.to_be_bytes());
        if attribute == attr::PORT_COUNTERS {
            data[18] = select2;
        }
    }
    mad
}

/// Everything PortCounters' CounterSelect and CounterSelect2 can clear.
pub const CLEAR_ALL: (u16, u8) = (0xFFFF, 0xFF);

/// What one answer said.
enum Answer {
    Counters(CountersRepr),
    Extended(ExtendedRepr),
    Refused,
    /// "Redirect required": ask again at this LID (0: the same) and QP.
    Redirect { lid: u16, qp: u32 },
}

/// The GSI's well-known Q_Key: the only one a redirect may name here (the
/// transports send with it).
const GSI_QKEY: u32 = 0x8001_0000;

fn parse_answer(mad: &[u8]) -> Option<(u64, Answer)> {
    let header = HeaderRepr::parse(&Header::new_checked(mad).ok()?).ok()?;
    if header.mgmt_class != MGMT_CLASS || header.method & method::RESPONSE == 0 {
        return None;
    }
    let tid = header.transaction_id;
    if header.status & sm_mad::mad::status::REDIRECT != 0 {
        // The answer carries ClassPortInfo saying where to ask (IBA
        // 13.4.8.1); a Q_Key other than the GSI's cannot be used.
        let cpi = sm_mad::sa_class_port_info::Repr::parse(
            &sm_mad::sa_class_port_info::Packet::new_checked(mad.get(DATA_OFFSET..)?).ok()?,
        )
        .ok()?;
        let usable = cpi.redirect_qp != 0 && (cpi.redirect_qkey == GSI_QKEY || cpi.redirect_qkey == 0);
        return Some((tid, if usable { Answer::Redirect { lid: cpi.redirect_lid, qp: cpi.redirect_qp } } else { Answer::Refused }));
    }
    if header.status & 0x1F != 0 || header.status >> 8 != 0 {
        return Some((tid, Answer::Refused));
    }
    let data = mad.get(DATA_OFFSET..)?;
    let answer = match header.attribute_id {
        attr::PORT_COUNTERS => Answer::Counters(CountersRepr::parse(&Counters::new_checked(data).ok()?).ok()?),
        attr::PORT_COUNTERS_EXTENDED => Answer::Extended(ExtendedRepr::parse(&Extended::new_checked(data).ok()?).ok()?),
        _ => return None,
    };
    Some((tid, answer))
}

/// Sends `requests` (target index, MAD) with at most `window` in flight;
/// the answers by target index. Transaction IDs are the caller's. With
/// `redirect` (OpenSM's `perfmgr_redir`) a PMA's "redirect required" is
/// followed once, to the LID and QP its ClassPortInfo names; without it,
/// or for a second redirect, the answer counts as refused.
fn exchange(
    transport: &mut dyn PmaTransport,
    requests: Vec<(usize, u64, [u8; MAD_LEN], u16)>,
    window: usize,
    timeout: Duration,
    stats: &mut QueryStats,
    redirect: bool,
) -> Vec<(usize, Answer)> {
    let mut pending = requests.into_iter();
    // By TID: the target, the LID the answer must come from, the deadline,
    // the request and whether it was redirected already.
    let mut in_flight: HashMap<u64, (usize, u16, Instant, [u8; MAD_LEN], bool)> = HashMap::new();
    let mut answers = Vec::new();
    loop {
        while in_flight.len() < window.max(1) {
            let Some((target, tid, mad, lid)) = pending.next() else { break };
            stats.sent += 1;
            if transport.send(lid, &mad, timeout).is_err() {
                stats.lost += 1;
                continue;
            }
            in_flight.insert(tid & 0xFFFF_FFFF, (target, lid, Instant::now() + timeout, mad, false));
        }
        if in_flight.is_empty() {
            return answers;
        }
        let Some(deadline) = in_flight.values().map(|v| v.2).min() else { return answers };
        match transport.receive(deadline) {
            Ok(Some((slid, mad))) => {
                // The kernel owns the TID's upper half: match the lower. An
                // answer must come from the LID asked: another host that
                // guesses a TID must not write a port's counters (with the
                // isolation policy on, that would disable links).
                let key = parse_answer(&mad).map(|(tid, answer)| (tid & 0xFFFF_FFFF, answer));
                if let Some((tid, answer)) = key.filter(|(tid, _)| in_flight.get(tid).is_some_and(|v| v.1 == slid)) {
                    if let Some((target, lid, _, mad, redirected)) = in_flight.remove(&tid) {
                        if let Answer::Redirect { lid: to, qp } = answer {
                            let to = if to == 0 { lid } else { to };
                            stats.sent += 1;
                            if redirect && !redirected && transport.send_to(to, qp, &mad, timeout).is_ok() {
                                in_flight.insert(tid, (target, to, Instant::now() + timeout, mad, true));
                                continue;
                            }
                            stats.answered += 1;
                            stats.refused += 1;
                            answers.push((target, Answer::Refused));
                            continue;
                        }
                        stats.answered += 1;
                        if matches!(answer, Answer::Refused) {
                            stats.refused += 1;
                        }
                        answers.push((target, answer));
                    }
                }
            }
            Ok(None) | Err(_) => {
                let now = Instant::now();
                let before = in_flight.len();
                in_flight.retain(|_, v| v.2 > now);
                stats.lost += (before - in_flight.len()) as u64;
            }
        }
    }
}

/// Reads PortCounters and PortCountersExtended of every target. A port
/// whose PMA refuses the extended set keeps the 32-bit traffic counters.
/// `None` for a port that did not answer PortCounters.
pub fn read_all(
    transport: &mut dyn PmaTransport,
    targets: &[Target],
    window: usize,
    timeout: Duration,
    next_tid: &mut u64,
    stats: &mut QueryStats,
) -> Vec<Option<Sample>> {
    read_all_with(transport, targets, window, timeout, next_tid, stats, true)
}

/// [`read_all`], following PMA redirects only with `redirect` (OpenSM's
/// `perfmgr_redir`).
pub fn read_all_with(
    transport: &mut dyn PmaTransport,
    targets: &[Target],
    window: usize,
    timeout: Duration,
    next_tid: &mut u64,
    stats: &mut QueryStats,
    redirect: bool,
) -> Vec<Option<Sample>> {
    let mut requests = Vec::with_capacity(targets.len() * 2);
    // Target index i: PortCounters at 2i, PortCountersExtended at 2i + 1.
    for (i, t) in targets.iter().enumerate() {
        for (k, attribute) in [attr::PORT_COUNTERS, attr::PORT_COUNTERS_EXTENDED].into_iter().enumerate() {
            *next_tid = next_tid.wrapping_add(1) & 0xFFFF_FFFF;
            requests.push((2 * i + k, *next_tid, request(attribute, t.port, *next_tid, None), t.lid));
        }
    }
    let mut samples: Vec<Option<Sample>> = vec![None; targets.len()];
    let mut extended: Vec<Option<ExtendedRepr>> = vec![None; targets.len()];
    for (slot, answer) in exchange(transport, requests, window, timeout, stats, redirect) {
        let i = slot / 2;
        match answer {
            Answer::Counters(c) => samples[i] = Some(Sample { values: c.values, extended: false }),
            Answer::Extended(e) => extended[i] = Some(e),
            Answer::Refused | Answer::Redirect { .. } => {}
        }
    }
    for (sample, ext) in samples.iter_mut().zip(extended) {
        if let (Some(s), Some(e)) = (sample.as_mut(), ext) {
            for (k, i) in [idx::XMIT_DATA, idx::RCV_DATA, idx::XMIT_PKTS, idx::RCV_PKTS].into_iter().enumerate() {
                s.values[i] = e.values[k];
            }
            s.extended = true;
        }
    }
    samples
}

/// Clears every counter of each target in `which` (PortCounters Set with
/// all CounterSelect bits); returns how many acknowledged.
pub fn clear(
    transport: &mut dyn PmaTransport,
    targets: &[&Target],
    window: usize,
    timeout: Duration,
    next_tid: &mut u64,
    stats: &mut QueryStats,
) -> usize {
    clear_with(transport, targets, window, timeout, next_tid, stats, true)
}

/// [`clear`], following PMA redirects only with `redirect`.
pub fn clear_with(
    transport: &mut dyn PmaTransport,
    targets: &[&Target],
    window: usize,
    timeout: Duration,
    next_tid: &mut u64,
    stats: &mut QueryStats,
    redirect: bool,
) -> usize {
    let requests = targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            *next_tid = next_tid.wrapping_add(1) & 0xFFFF_FFFF;
            (i, *next_tid, request(attr::PORT_COUNTERS, t.port, *next_tid, Some(CLEAR_ALL)), t.lid)
        })
        .collect();
    exchange(transport, requests, window, timeout, stats, redirect)
        .into_iter()
        .filter(|(_, a)| matches!(a, Answer::Counters(_)))
        .count()
}

/// A PMA in memory, for tests: answers Get and Set of both attributes
/// from per-(LID, port) counters, and can be told to stay silent.
#[derive(Debug, Default)]
pub struct FakePma {
    /// PortCounters values by (LID, port).
    pub counters: HashMap<(u16, u8), [u64; perf::COUNTERS]>,
    /// Extended traffic values by (LID, port); absent: refuses the
    /// extended attribute.
    pub extended: HashMap<(u16, u8), [u64; 8]>,
    /// LIDs that never answer.
    pub silent: Vec<u16>,
    /// A host at this LID answers every request before the real PMA,
    /// with these counters (a forger that guessed the TIDs).
    pub forger: Option<(u16, [u64; perf::COUNTERS])>,
    /// LIDs whose PMA redirects QP1 requests to (LID, QP); the counters
    /// are then those of the redirect LID.
    pub redirects: HashMap<u16, (u16, u32)>,
    queue: std::collections::VecDeque<(u16, Vec<u8>)>,
}

impl PmaTransport for FakePma {
    fn send_to(&mut self, dlid: u16, qp: u32, mad: &[u8], timeout: Duration) -> Result<(), String> {
        if qp == 1 {
            return self.send(dlid, mad, timeout);
        }
        if !self.redirects.values().any(|&(l, q)| l == dlid && q == qp) {
            return Err(format!("no QP {qp} at LID {dlid}"));
        }
        self.answer(dlid, mad)
    }

    fn send(&mut self, dlid: u16, mad: &[u8], _timeout: Duration) -> Result<(), String> {
        if self.silent.contains(&dlid) {
            return Ok(());
        }
        if let Some(&(lid, qp)) = self.redirects.get(&dlid) {
            let mut answer = mad.to_vec();
            let mut h = Header::new_unchecked(&mut answer[..]);
            h.set_method(method::GET_RESP);
            h.set_status(sm_mad::mad::status::REDIRECT);
            let cpi = sm_mad::sa_class_port_info::Repr {
                redirect_lid: lid,
                redirect_qp: qp,
                redirect_qkey: GSI_QKEY,
                ..sm_mad::sa_class_port_info::Repr::default()
            };
            cpi.emit(&mut sm_mad::sa_class_port_info::Packet::new_unchecked(&mut answer[DATA_OFFSET..]));
            self.queue.push_back((dlid, answer));
            return Ok(());
        }
        self.answer(dlid, mad)
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<(u16, Vec<u8>)>, String> {
        match self.queue.pop_front() {
            Some(m) => Ok(Some(m)),
            None => {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                Ok(None)
            }
        }
    }
}

impl FakePma {
    /// The PMA at `dlid` answers `mad`.
    fn answer(&mut self, dlid: u16, mad: &[u8]) -> Result<(), String> {
        let header = HeaderRepr::parse(&Header::new_checked(mad).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        let port = mad[DATA_OFFSET + 1];
        let mut answer = mad.to_vec();
        // GetResp answers both Get and Set.
        Header::new_unchecked(&mut answer[..]).set_method(method::GET_RESP);
        let data = &mut answer[DATA_OFFSET..];
        match header.attribute_id {
            attr::PORT_COUNTERS => {
                let Some(values) = self.counters.get_mut(&(dlid, port)) else { return Ok(()) };
                if header.method == method::SET {
                    *values = [0; perf::COUNTERS];
                    if let Some(e) = self.extended.get_mut(&(dlid, port)) {
                        *e = [0; 8];
                    }
                }
                CountersRepr { port_select: port, counter_select: 0, values: *values }
                    .emit(&mut Counters::new_unchecked(&mut data[..]));
            }
            attr::PORT_COUNTERS_EXTENDED => match self.extended.get(&(dlid, port)) {
                Some(values) => {
                    ExtendedRepr { port_select: port, values: *values }.emit(&mut Extended::new_unchecked(&mut data[..]))
                }
                // "Unsupported attribute" (IBA 13.4.7 status 3 << 2).
                None => Header::new_unchecked(&mut answer[..]).set_status(sm_mad::mad::status::UNSUPPORTED_METHOD_ATTR),
            },
            _ => return Ok(()),
        }
        if let Some((lid, values)) = self.forger {
            let mut forged = answer.clone();
            CountersRepr { port_select: port, counter_select: 0, values }
                .emit(&mut Counters::new_unchecked(&mut forged[DATA_OFFSET..]));
            self.queue.push_back((lid, forged));
        }
        self.queue.push_back((dlid, answer));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenSM's perfmgr_redir: a PMA that redirects to another LID and QP
    /// is read there; with redirects off its port reads as refused.
    #[test]
    fn a_redirecting_pma_is_followed_only_when_redirects_are_on() {
        let mut pma = FakePma::default();
        let t = target(7, 1);
        let mut v = [0u64; perf::COUNTERS];
        v[idx::SYMBOL_ERRORS] = 42;
        pma.counters.insert((70, 1), v);
        pma.redirects.insert(7, (70, 5));
        let (mut stats, mut tid) = (QueryStats::default(), 0);
        let samples = read_all_with(&mut pma, std::slice::from_ref(&t), 4, Duration::from_millis(20), &mut tid, &mut stats, true);
        assert_eq!(samples[0].expect("read at the redirect").values[idx::SYMBOL_ERRORS], 42);
        let mut stats = QueryStats::default();
        let samples = read_all_with(&mut pma, std::slice::from_ref(&t), 4, Duration::from_millis(20), &mut tid, &mut stats, false);
        assert!(samples[0].is_none());
        assert_eq!(stats.refused, 2, "both attributes refused: {stats:?}");
    }

    fn target(lid: u16, port: u8) -> Target {
        Target { lid, port, node_guid: u64::from(lid), node_desc: format!("n{lid}"), switch: port > 1, peer: None }
    }

    #[test]
    fn every_port_is_read_through_a_window_and_silent_ones_are_lost_once() {
        let mut pma = FakePma::default();
        let targets: Vec<Target> = (1..=20u16).map(|l| target(l, 1)).collect();
        for t in &targets {
            let mut v = [0u64; perf::COUNTERS];
            v[idx::SYMBOL_ERRORS] = u64::from(t.lid);
            v[idx::XMIT_DATA] = 7;
            pma.counters.insert((t.lid, t.port), v);
            if t.lid % 2 == 0 {
                pma.extended.insert((t.lid, t.port), [1 << 33, 0, 0, 0, 0, 0, 0, 0]);
            }
        }
        pma.silent.push(5);
        let mut stats = QueryStats::default();
        let mut tid = 0;
        let samples = read_all(&mut pma, &targets, 4, Duration::from_millis(20), &mut tid, &mut stats);
        assert_eq!(stats.sent, 40);
        assert_eq!(stats.lost, 2, "LID 5's two requests");
        assert!(samples[4].is_none());
        let s3 = samples[2].expect("LID 3 answered");
        assert_eq!((s3.values[idx::SYMBOL_ERRORS], s3.values[idx::XMIT_DATA], s3.extended), (3, 7, false));
        let s4 = samples[3].expect("LID 4 answered");
        assert_eq!((s4.values[idx::XMIT_DATA], s4.extended), (1 << 33, true));
    }

    #[test]
    fn a_clear_resets_the_counters_it_names() {
        let mut pma = FakePma::default();
        pma.counters.insert((9, 3), [5; perf::COUNTERS]);
        let t = target(9, 3);
        let mut stats = QueryStats::default();
        let mut tid = 0;
        assert_eq!(clear(&mut pma, &[&t], 2, Duration::from_millis(20), &mut tid, &mut stats), 1);
        assert_eq!(pma.counters[&(9, 3)], [0; perf::COUNTERS]);
        let set = request(attr::PORT_COUNTERS, 3, 1, Some(CLEAR_ALL));
        assert_eq!((set[3], &set[DATA_OFFSET + 2..DATA_OFFSET + 4], set[DATA_OFFSET + 18]), (method::SET, &[0xFF, 0xFF][..], 0xFF));
    }

    #[test]
    fn an_answer_from_another_lid_is_not_taken_for_the_port() {
        let mut pma = FakePma::default();
        let t = target(7, 2);
        pma.counters.insert((7, 2), [0; perf::COUNTERS]);
        let mut forged = [0; perf::COUNTERS];
        forged[idx::LINK_DOWNED] = 250;
        pma.forger = Some((99, forged));
        let mut stats = QueryStats::default();
        let mut tid = 0;
        let samples = read_all(&mut pma, std::slice::from_ref(&t), 4, Duration::from_millis(20), &mut tid, &mut stats);
        let s = samples[0].expect("the real PMA answered");
        assert_eq!(s.values[idx::LINK_DOWNED], 0, "the forged counters were taken");
    }
}
