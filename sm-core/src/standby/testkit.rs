//! Fixtures shared by the standby tests: the embedded fabric with
//! another SM on it, behind a port that counts and silences its SMInfo
//! answers.

use std::sync::Arc;
use std::time::Duration;

use sm_mad::mad::{attr, method};
use sm_mad::sm_info::{self, SmState};
use sm_mad::smp::{self, DATA_LEN};
use sm_mad::{Mad, SmInfoPacket, SmInfoRepr};
use sm_topology::gen;

use super::{answer, Arbitration, SmInfoState, StandbyOptions, TakenFrom};
use crate::sim::SimFabric;
use sm_transport::{SmpClient, SmpPort, TransportError};

pub(super) fn mad_of(repr: &smp::Repr) -> Vec<u8> {
    let mut mad = Mad::zeroed();
    repr.emit(&mut mad.smp_mut());
    mad.0.to_vec()
}

pub(super) fn sminfo_data(info: SmInfoRepr) -> [u8; DATA_LEN] {
    let mut data = [0u8; DATA_LEN];
    info.emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
    data
}

pub(super) fn parse_answer(mad: &[u8]) -> (smp::Repr, SmInfoRepr) {
    let repr =
        smp::Repr::parse(&smp::Packet::new_checked(mad).expect("256 bytes")).expect("an SMP");
    let info =
        SmInfoRepr::parse(&SmInfoPacket::new_checked(&repr.data[..sm_info::LEN]).expect("len"))
            .expect("SMInfo");
    (repr, info)
}

pub(super) fn control_from(state: &SmInfoState, modifier: u32, sender: SmInfoRepr) -> (u16, SmInfoRepr) {
    let set = smp::Repr::directed_set(9, attr::SM_INFO, modifier, 0, &[1], sminfo_data(sender))
        .unwrap();
    let answer = answer(state, &mad_of(&set)).expect("answered");
    let (repr, info) = parse_answer(&answer);
    assert_eq!(repr.attribute_modifier, modifier);
    (repr.status, info)
}

pub(super) fn sm(guid: u64, state: SmState) -> SmInfoRepr {
    SmInfoRepr {
        guid,
        sm_key: 0,
        act_count: 0,
        priority: 1,
        state,
    }
}

/// The embedded fabric as seen from host 0, with another SM's SMInfo
/// answers that can be silenced (its process died) after some polls.
/// Called with the fabric and the count at every SMInfo Get.
pub(super) type OnGet = Box<dyn FnMut(&mut SimFabric, usize)>;

pub(super) struct Fake {
    pub(super) fabric: SimFabric,
    pub(super) sminfo_gets: usize,
    pub(super) silent_after: Option<usize>,
    pub(super) on_get: Option<OnGet>,
    /// LID-routed MADs sent, with their DLID.
    pub(super) lid_routed: Vec<(u16, Vec<u8>)>,
    /// An smcore SM behind the other host's port: SMInfo requests are
    /// answered by its responder code instead of the simulated SMInfo.
    pub(super) smcore_peer: Option<Arc<SmInfoState>>,
}

impl SmpPort for Fake {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        let is_sminfo_get = mad.len() > 17
            && u16::from_be_bytes([mad[16], mad[17]]) == attr::SM_INFO
            && mad[3] == method::GET;
        if is_sminfo_get {
            self.sminfo_gets += 1;
            if let Some(hook) = self.on_get.as_mut() {
                hook(&mut self.fabric, self.sminfo_gets);
            }
            if self.silent_after.is_some_and(|n| self.sminfo_gets > n) {
                return Ok(None);
            }
        }
        let is_sminfo = mad.len() > 17 && u16::from_be_bytes([mad[16], mad[17]]) == attr::SM_INFO;
        if let (true, Some(peer)) = (is_sminfo, &self.smcore_peer) {
            return Ok(answer(peer, mad));
        }
        Ok(self.fabric.handle(mad))
    }

    fn send_to(&mut self, dlid: u16, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        self.lid_routed.push((dlid, mad.to_vec()));
        Ok(None)
    }
}

/// A two-leaf fabric with the SM on host 0; `other` is a host on the
/// other leaf, and its port GUID.
pub(super) fn fabric() -> (SimFabric, usize, u64, u64) {
    let topo = gen::fat_tree_2level(2, 1, 2, 1).unwrap();
    let fabric = SimFabric::from_topology(&topo, 0, 1).unwrap();
    let other = topo.nodes.iter().rposition(|n| !n.is_switch()).unwrap();
    assert_ne!(other, 0);
    let guid_of = |n: usize| topo.nodes[n].port_guids[1];
    (fabric, other, guid_of(0), guid_of(other))
}

pub(super) fn fast() -> StandbyOptions {
    StandbyOptions {
        poll_interval: Duration::from_millis(5),
        poll_retries: 3,
        smp_retries: 0,
        // The fixture's masters keep one ActCount; the tests of a hung
        // master set their own limit.
        stuck_polls: 1000,
        m_keys: sm_transport::MKeys::off(),
        ignore_other_sm: false,
    }
}

pub(super) fn fake(fabric: SimFabric) -> Fake {
    Fake {
        fabric,
        sminfo_gets: 0,
        silent_after: None,
        on_get: None,
        lid_routed: Vec::new(),
        smcore_peer: None,
    }
}

/// [`fabric`] with another SM on the other leaf's host answering an
/// SMInfo of its own port GUID and the given fields: the port, that
/// host's index and the SMInfo it answers.
pub(super) fn with_peer(act_count: u32, priority: u8, state: SmState) -> (Fake, usize, SmInfoRepr) {
    let (mut f, other, _, other_guid) = fabric();
    let info = SmInfoRepr {
        guid: other_guid,
        sm_key: 0,
        act_count,
        priority,
        state,
    };
    f.set_sm_info(other, 1, Some(info)).unwrap();
    (fake(f), other, info)
}

/// [`with_peer`] where the peer's SMInfo shows `key`.
pub(super) fn with_keyed_peer(priority: u8, state: SmState, key: u64) -> (Fake, usize, SmInfoRepr) {
    let (mut port, other, mut info) = with_peer(0, priority, state);
    info.sm_key = key;
    port.fabric.set_sm_info(other, 1, Some(info)).unwrap();
    (port, other, info)
}

/// What an arbitration ended with, the fabric it may carry left out
/// (the tests that look at the fabric do so on their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    Master(Option<TakenFrom>),
    Stopped,
}

pub(super) fn ended(a: &Arbitration) -> Ended {
    match a {
        Arbitration::Master { took_over_from, .. } => Ended::Master(*took_over_from),
        Arbitration::Stopped => Ended::Stopped,
    }
}

pub(super) fn master_after(from: Option<TakenFrom>) -> Ended {
    Ended::Master(from)
}

/// The plain embedded-fabric transport, to program LIDs before a test.
pub(super) struct SimPortFor<'a>(&'a mut SimFabric);

impl SmpPort for SimPortFor<'_> {
    fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
        Ok(self.0.handle(mad))
    }
}

/// A sweep of the fake port's fabric, so that every port has the LID a
/// master would have given it.
pub(super) fn assign_lids(port: &mut Fake, g2l: &mut crate::sweep::Guid2Lid) {
    crate::sweep::sweep(
        &mut SimPortFor(&mut port.fabric),
        &crate::sweep::SweepOptions::default(),
        g2l,
    )
    .unwrap();
}

/// Points our port's MasterSMLID (host 0, port 1) at `lid`, as the
/// master that last swept did.
pub(super) fn set_our_master_sm_lid(port: &mut Fake, lid: u16) {
    let mut sim = SimPortFor(&mut port.fabric);
    let mut client = SmpClient::new(&mut sim, 0);
    let data = client.get(attr::PORT_INFO, 1, &[]).unwrap();
    let mut info = sm_mad::port_info::Repr::parse(
        &sm_mad::port_info::Packet::new_checked(&data[..sm_mad::port_info::LEN]).unwrap(),
    )
    .unwrap();
    info.master_sm_lid = lid;
    info.port_state = sm_mad::port_info::PortState::NoChange;
    info.port_physical_state = sm_mad::port_info::PhysState::NoChange;
    let mut out = [0u8; DATA_LEN];
    info.emit(&mut sm_mad::port_info::Packet::new_unchecked(&mut out[..]));
    client.set(attr::PORT_INFO, 1, &[], out).unwrap();
}
