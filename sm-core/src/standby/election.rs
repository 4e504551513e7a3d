//! The election: the other SMs of the fabric ([`sm_ports`],
//! [`read_peers`]), who ranks above whom ([`is_higher`]), who is master
//! ([`elect`]), and a master's check for a higher SM to hand over to
//! ([`check_peers`]).

use sm_mad::mad::attr;
use sm_mad::port_info::capability;
use sm_mad::sm_info::{self, control, SmState};
use sm_mad::smp::DATA_LEN;
use sm_mad::{SmInfoPacket, SmInfoRepr};
use tracing::{debug, info, warn};

use super::responder::{challenge, challenge_payload, shows_our_key};
use super::{Control, SmInfoState};
use sm_transport::{SmpClient, SmpError};
use sm_model::Fabric;

/// A port of the fabric behind which another SM runs (PortInfo IsSM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmPort {
    /// Node index in the fabric.
    pub node: usize,
    /// Port number (0 on a switch).
    pub port: u8,
    /// Port GUID.
    pub guid: u64,
    /// The port's LID.
    pub lid: u16,
    /// Directed route to the port.
    pub path: Vec<u8>,
}

/// Another SM and what its SMInfo said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Where it runs.
    pub port: SmPort,
    /// Its SMInfo.
    pub info: SmInfoRepr,
    /// Whether it proved it holds our SM_Key. An SM that did not belongs
    /// to no subnet of ours: never handed the subnet, never obeyed.
    pub same_key: bool,
}

/// Every port other than our own that advertises IsSM (and not
/// IsSMdisabled): port 0 of switches, ports 1.. of CAs and routers.
pub fn sm_ports(fabric: &Fabric) -> Vec<SmPort> {
    let mut out = Vec::new();
    for (i, node) in fabric.nodes.iter().enumerate() {
        for (p, port) in node.ports.iter().enumerate() {
            let p = p as u8;
            if (node.is_switch() && p != 0)
                || (!node.is_switch() && p == 0)
                || (i == 0 && p == fabric.sm_port)
            {
                continue;
            }
            let Some(info) = &port.info else { continue };
            if info.capability_mask & capability::IS_SM == 0
                || info.capability_mask & capability::IS_SM_DISABLED != 0
            {
                continue;
            }
            let path = if node.is_switch() {
                Some(node.path.clone())
            } else {
                port.path.clone()
            };
            let Some(path) = path else { continue };
            out.push(SmPort {
                node: i,
                port: p,
                guid: port.guid,
                lid: info.lid,
                path: path.to_vec(),
            });
        }
    }
    out
}

/// SMInfo of every SM port of `fabric`, each asked with a challenge
/// (one after the other: SM ports are few). An SM that does not answer,
/// answers garbage or claims another port's GUID is left out, logged; an
/// SM that does not prove our SM_Key is kept with `same_key` false (the
/// election may still need to know that it holds the subnet), logged the
/// first time.
pub fn read_peers(client: &mut SmpClient<'_>, fabric: &Fabric, state: &SmInfoState) -> Vec<Peer> {
    let mut peers = Vec::new();
    for port in sm_ports(fabric) {
        let guid = format!("{:#018x}", port.guid);
        let (answer, same_key) = challenged_get(client, state, &port);
        match answer {
            Ok(info) if info.guid != port.guid => {
                warn!(port = %guid, claimed = format_args!("{:#018x}", info.guid), "SMInfo names another port; SM ignored")
            }
            Ok(info) => {
                if !same_key && state.first_foreign_report(port.guid) {
                    warn!(
                        port = %guid,
                        lid = port.lid,
                        its_priority = info.priority,
                        its_state = ?info.state,
                        "an SM that does not hold our SM_Key: not of this subnet; \
                         never handed the subnet nor obeyed"
                    );
                }
                debug!(port = %guid, lid = port.lid, priority = info.priority, state = ?info.state, same_key, "SM found");
                peers.push(Peer { port, info, same_key });
            }
            Err(e) => {
                debug!(port = %guid, error = %e, "IsSM port without a usable SMInfo; no SM counted there")
            }
        }
    }
    peers
}

/// SubnGet(SMInfo) of the SM at `port` with a fresh challenge: its SMInfo,
/// and whether it proved our SM_Key.
pub(super) fn challenged_get(
    client: &mut SmpClient<'_>,
    state: &SmInfoState,
    port: &SmPort,
) -> (Result<SmInfoRepr, SmpError>, bool) {
    let c = challenge(state.sm_key());
    let answer = client
        .get_with(attr::SM_INFO, 0, &port.path, challenge_payload(state, c))
        .and_then(|d| parse_sm_info(&d));
    let same_key = answer
        .as_ref()
        .is_ok_and(|info| shows_our_key(state, c, port.guid, info.sm_key));
    (answer, same_key)
}

fn parse_sm_info(data: &[u8]) -> Result<SmInfoRepr, SmpError> {
    SmInfoPacket::new_checked(&data[..sm_info::LEN.min(data.len())])
        .and_then(|p| SmInfoRepr::parse(&p))
        .map_err(|e| SmpError::Malformed(format!("SMInfo: {e}")))
}

/// `peers` without the master we took for hung, as long as its ActCount
/// has not moved (once it moves, the SM is back and counts again).
pub(super) fn without_hung(state: &SmInfoState, peers: Vec<Peer>) -> Vec<Peer> {
    let mut inner = state.lock();
    let Some((guid, stopped_at)) = inner.hung else {
        return peers;
    };
    if peers
        .iter()
        .any(|p| p.info.guid == guid && p.info.act_count != stopped_at)
    {
        info!(sm = format_args!("{guid:#018x}"), "the hung master's ActCount moves again");
        inner.hung = None;
        return peers;
    }
    drop(inner);
    peers.into_iter().filter(|p| p.info.guid != guid).collect()
}

/// The SMs that take part in our election among `peers`: those that
/// proved our SM_Key; and, when none of them is master, a master of
/// another key that holds the subnet now (our port's MasterSMLID,
/// `our_master_lid`, is its LID: it swept and programmed this fabric).
/// Standing by for that one is not obeying it (its controls are refused:
/// wrong key); it keeps a second SM of another key from fighting a working
/// master for the switches. An SM of another key that only claims to be
/// master, without holding the subnet, takes no part: it cannot keep us
/// from taking over when our master is gone.
pub(super) fn electors(peers: Vec<Peer>, our_master_lid: u16) -> Vec<Peer> {
    let our_master = peers
        .iter()
        .any(|p| p.same_key && p.info.state == SmState::Master);
    peers
        .into_iter()
        .filter(|p| {
            p.same_key
                || (!our_master
                    && p.info.state == SmState::Master
                    && our_master_lid != 0
                    && p.port.lid == our_master_lid)
        })
        .inspect(|p| {
            if !p.same_key {
                warn!(
                    master = format_args!("{:#018x}", p.info.guid),
                    lid = p.port.lid,
                    "a master SM of another SM_Key holds this subnet (our port's MasterSMLID \
                     is its LID): not taking the subnet from it; waiting while it answers, \
                     without obeying it"
                );
            }
        })
        .collect()
}

/// Whether an SM of priority `a_priority` and port GUID `a_guid` ranks
/// above one of `b_priority`/`b_guid` (IBA 14.4.1.1: higher priority;
/// at equal priority, lower GUID).
pub fn is_higher(a_priority: u8, a_guid: u64, b_priority: u8, b_guid: u64) -> bool {
    a_priority > b_priority || (a_priority == b_priority && a_guid < b_guid)
}

/// What the election says this SM should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Master.
    Master,
    /// Standby, polling `peers[i]`.
    Standby(usize),
}

/// The election among `peers` for an SM of `priority`/`guid`:
/// an SM that is master already stays master (the highest of them if two
/// subnets with a master each were joined); otherwise the highest SM in
/// Discovering or Standby, if it ranks above us; otherwise us. SMs in
/// NotActive take no part.
pub fn elect(priority: u8, guid: u64, peers: &[Peer]) -> Decision {
    let best = |filter: &dyn Fn(&Peer) -> bool| {
        peers
            .iter()
            .enumerate()
            .filter(|(_, p)| filter(p))
            .reduce(|a, b| {
                if is_higher(
                    b.1.info.priority,
                    b.1.info.guid,
                    a.1.info.priority,
                    a.1.info.guid,
                ) {
                    b
                } else {
                    a
                }
            })
            .map(|(i, _)| i)
    };
    if let Some(i) = best(&|p| p.info.state == SmState::Master) {
        return Decision::Standby(i);
    }
    match best(&|p| matches!(p.info.state, SmState::Discovering | SmState::Standby)) {
        Some(i) if is_higher(peers[i].info.priority, peers[i].info.guid, priority, guid) => {
            Decision::Standby(i)
        }
        _ => Decision::Master,
    }
}

/// What a master should do after [`check_peers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAction {
    /// Carry on.
    Stay,
    /// Another master handed over to us (two subnets joined): sweep again
    /// now to take over its part.
    SweepNow,
    /// We handed over to a higher SM and are standby now: stop sweeping
    /// and call [`arbitrate`](super::arbitrate) again.
    HandedOver {
        /// The new master's port GUID.
        to: u64,
    },
}

/// The master's check of the other SMs, after each heavy sweep on the
/// fabric it found: hands over to the highest SM that ranks above us and
/// is standby or master (a higher SM still discovering will see us as
/// master, stand by, and be handed over to at the next check).
pub fn check_peers(client: &mut SmpClient<'_>, fabric: &Fabric, state: &SmInfoState) -> PeerAction {
    check_peers_unless(client, fabric, state, false)
}

/// [`check_peers`], except that with `ignore_other_sm` (OpenSM's option
/// of that name) other SMs are not read and never handed the subnet; the
/// controls sent to us are still taken.
pub fn check_peers_unless(client: &mut SmpClient<'_>, fabric: &Fabric, state: &SmInfoState, ignore_other_sm: bool) -> PeerAction {
    // Called by the SM loop after each sweep: the loop is alive.
    state.bump_activity();
    let mut action = PeerAction::Stay;
    while let Some(c) = state.take_control() {
        if let Control::Handover { from } = c {
            info!(
                from = format_args!("{from:#018x}"),
                "another master handed over to us; sweeping again"
            );
            action = PeerAction::SweepNow;
        }
    }
    if !state.is_master() || ignore_other_sm {
        return action;
    }
    let peers = without_hung(state, read_peers(client, fabric, state));
    // Only an SM that proved our key is handed the subnet (and so sent
    // our key in the HANDOVER); one of another key is not of this subnet.
    let candidate = peers
        .iter()
        .filter(|p| p.same_key)
        .filter(|p| matches!(p.info.state, SmState::Standby | SmState::Master))
        .filter(|p| is_higher(p.info.priority, p.info.guid, state.priority(), state.guid()))
        .reduce(|a, b| {
            if is_higher(b.info.priority, b.info.guid, a.info.priority, a.info.guid) {
                b
            } else {
                a
            }
        });
    let Some(to) = candidate else { return action };
    let mut data = [0u8; DATA_LEN];
    state
        .sm_info()
        .emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
    match client.set(attr::SM_INFO, control::HANDOVER, &to.port.path, data) {
        Ok(_) => {
            info!(
                to = format_args!("{:#018x}", to.info.guid),
                its_priority = to.info.priority,
                priority = state.priority(),
                "handed over to a higher SM"
            );
            state.set_state(SmState::Standby);
            PeerAction::HandedOver { to: to.info.guid }
        }
        Err(e) => {
            warn!(to = format_args!("{:#018x}", to.info.guid), error = %e, "handover not taken; staying master");
            action
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use sm_mad::port_info::capability;
    use sm_mad::sm_info::{control, SmState};
    use sm_mad::SmInfoRepr;

    use super::*;
    use crate::standby::testkit::*;
    use crate::standby::*;
    use crate::sweep::discover;
    use sm_transport::SmpClient;

    fn peer(guid: u64, priority: u8, state: SmState) -> Peer {
        Peer {
            port: SmPort {
                node: 1,
                port: 1,
                guid,
                lid: 1,
                path: vec![1],
            },
            info: SmInfoRepr {
                guid,
                sm_key: 0,
                act_count: 0,
                priority,
                state,
            },
            same_key: true,
        }
    }

    #[test]
    fn election_rules() {
        assert!(is_higher(5, 9, 4, 1));
        assert!(is_higher(5, 1, 5, 2));
        assert!(!is_higher(5, 2, 5, 2));
        assert!(!is_higher(4, 1, 5, 9));
        use SmState::{Discovering, Master, NotActive, Standby};
        // (our priority, our GUID, the peers, the outcome)
        let cases = [
            // Alone: master.
            (0, 10, vec![], Decision::Master),
            // A master that exists stays master, even below us.
            (15, 1, vec![peer(20, 0, Master)], Decision::Standby(0)),
            // Two masters: the higher one.
            (
                15,
                1,
                vec![peer(20, 3, Master), peer(30, 7, Master)],
                Decision::Standby(1),
            ),
            // No master: priority first, then the lower GUID.
            (5, 10, vec![peer(20, 6, Standby)], Decision::Standby(0)),
            (5, 10, vec![peer(20, 4, Standby)], Decision::Master),
            (5, 10, vec![peer(9, 5, Discovering)], Decision::Standby(0)),
            (5, 10, vec![peer(11, 5, Discovering)], Decision::Master),
            (
                5,
                10,
                vec![
                    peer(11, 5, Standby),
                    peer(3, 5, Standby),
                    peer(2, 1, Standby),
                ],
                Decision::Standby(1),
            ),
            // NotActive SMs take no part.
            (0, 10, vec![peer(1, 15, NotActive)], Decision::Master),
        ];
        for (priority, guid, peers, want) in cases {
            assert_eq!(
                elect(priority, guid, &peers),
                want,
                "priority {priority}, GUID {guid}, peers {peers:?}"
            );
        }
    }

    #[test]
    fn sm_ports_skip_our_own_and_disabled_ones() {
        let (mut f, other, me, other_guid) = fabric();
        let info = SmInfoRepr {
            guid: other_guid,
            ..SmInfoRepr::default()
        };
        f.set_sm_info(other, 1, Some(info)).unwrap();
        // Our own port advertises IsSM too.
        f.set_sm_info(
            0,
            1,
            Some(SmInfoRepr {
                guid: me,
                ..SmInfoRepr::default()
            }),
        )
        .unwrap();
        let mut port = fake(f);
        let mut client = SmpClient::new(&mut port, 0);
        let (mut fabric, _) = discover(&mut client).unwrap();
        let found = sm_ports(&fabric);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].guid, other_guid);
        assert!(!found[0].path.is_empty());
        let node = found[0].node;
        if let Some(i) = fabric.node_mut(node).ports[1].info.as_mut() {
            i.capability_mask |= capability::IS_SM_DISABLED;
        }
        assert!(sm_ports(&fabric).is_empty());
    }

    #[test]
    fn a_master_hands_over_to_a_higher_standby() {
        let (mut port, _, standby) = with_peer(0, 9, SmState::Standby);
        let other_guid = standby.guid;
        let state = SmInfoState::new(0, 3, 0);
        state.set_state(SmState::Master);
        {
            let mut client = SmpClient::new(&mut port, 0);
            let (fabric, _) = discover(&mut client).unwrap();
            state.set_guid(fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid);
            // A lower standby: nothing to do.
            let lower_state = SmInfoState::new(state.guid(), 10, 0);
            lower_state.set_state(SmState::Master);
            assert_eq!(
                check_peers(&mut client, &fabric, &lower_state),
                PeerAction::Stay
            );
            assert_eq!(
                check_peers(&mut client, &fabric, &state),
                PeerAction::HandedOver { to: other_guid }
            );
        }
        assert_eq!(state.state(), SmState::Standby);
        // The simulated peer took the HANDOVER.
        let mut client = SmpClient::new(&mut port, 0);
        let (fabric, _) = discover(&mut client).unwrap();
        let peers = read_peers(&mut client, &fabric, &state);
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].info.state, SmState::Master);
        assert_eq!(
            elect(state.priority(), state.guid(), &peers),
            Decision::Standby(0)
        );
    }

    #[test]
    fn of_two_masters_the_lower_one_yields() {
        for (their_priority, expected) in [(9, true), (1, false)] {
            let (mut port, _, master) = with_peer(0, their_priority, SmState::Master);
            let mut client = SmpClient::new(&mut port, 0);
            let (fabric, _) = discover(&mut client).unwrap();
            let state = SmInfoState::new(
                fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid,
                5,
                0,
            );
            state.set_state(SmState::Master);
            let got = check_peers(&mut client, &fabric, &state);
            if expected {
                assert_eq!(got, PeerAction::HandedOver { to: master.guid });
                assert_eq!(state.state(), SmState::Standby);
            } else {
                // The lower master is the one to yield; we carry on.
                assert_eq!(got, PeerAction::Stay);
                assert!(state.is_master());
            }
        }
        // A master that another master handed over to sweeps again.
        let (f, _, me, _) = fabric();
        let mut port = fake(f);
        let mut client = SmpClient::new(&mut port, 0);
        let (fabric, _) = discover(&mut client).unwrap();
        let state = SmInfoState::new(me, 5, 0);
        state.set_state(SmState::Master);
        let from = SmInfoRepr {
            guid: 77,
            sm_key: 0,
            act_count: 0,
            priority: 1,
            state: SmState::Master,
        };
        assert_eq!(control_from(&state, control::HANDOVER, from).0, 0);
        assert_eq!(
            check_peers(&mut client, &fabric, &state),
            PeerAction::SweepNow
        );
        assert_eq!(check_peers(&mut client, &fabric, &state), PeerAction::Stay);
    }

    #[test]
    fn a_higher_sm_of_another_key_is_not_handed_the_subnet() {
        for our_key in [0, 1] {
            for their_state in [SmState::Standby, SmState::Master] {
                let (mut port, _, _) = with_keyed_peer(15, their_state, 0x2222);
                let mut client = SmpClient::new(&mut port, 0);
                let (fabric, _) = discover(&mut client).unwrap();
                let me = fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid;
                let state = SmInfoState::new(me, 1, our_key);
                state.set_state(SmState::Master);
                assert_eq!(
                    check_peers(&mut client, &fabric, &state),
                    PeerAction::Stay,
                    "key {our_key}: handed over to a {their_state:?} SM of another key"
                );
                assert!(state.is_master());
            }
        }
    }

    #[test]
    fn smcore_sms_prove_the_key_to_each_other_without_showing_it() {
        for (their_key, handed_over) in [(0x77, true), (0x78, false)] {
            let (mut port, _, other_guid, _) = {
                let (f, other, me, other_guid) = fabric();
                let mut port = fake(f);
                // IsSM on the other host's port; its SMInfo comes from a
                // real responder.
                port.fabric
                    .set_sm_info(other, 1, Some(sm(other_guid, SmState::Standby)))
                    .unwrap();
                (port, me, other_guid, other)
            };
            let peer = Arc::new(SmInfoState::new(other_guid, 9, their_key));
            peer.set_state(SmState::Standby);
            port.smcore_peer = Some(Arc::clone(&peer));
            let mut client = SmpClient::new(&mut port, 0);
            let (fabric, _) = discover(&mut client).unwrap();
            let me = fabric.nodes[0].ports[usize::from(fabric.sm_port)].guid;
            let state = SmInfoState::new(me, 3, 0x77);
            state.set_state(SmState::Master);
            let peers = read_peers(&mut client, &fabric, &state);
            assert_eq!(peers.len(), 1);
            assert_eq!(peers[0].same_key, handed_over, "key {their_key:#x}");
            assert_ne!(peers[0].info.sm_key, their_key, "the peer showed its key");
            let got = check_peers(&mut client, &fabric, &state);
            if handed_over {
                assert_eq!(got, PeerAction::HandedOver { to: other_guid });
                assert_eq!(peer.state(), SmState::Master, "the peer took the HANDOVER");
            } else {
                assert_eq!(got, PeerAction::Stay);
                assert_eq!(peer.state(), SmState::Standby);
            }
        }
    }

    #[test]
    fn a_hung_master_is_not_handed_the_subnet_back_until_it_moves_again() {
        // A master above us (priority 9) hangs: we take over...
        let (mut port, other, theirs) = with_peer(5, 9, SmState::Master);
        let options = StandbyOptions {
            stuck_polls: 3,
            ..fast()
        };
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &options, &stop)),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        // ...and, though it ranks above us and says Master, do not hand it
        // the subnet back while its ActCount stays where it stopped.
        let mut client = SmpClient::new(&mut port, 0);
        let (fabric, _) = discover(&mut client).unwrap();
        assert_eq!(check_peers(&mut client, &fabric, &state), PeerAction::Stay);
        assert!(state.is_master());
        // Its loop runs again: the higher master gets the subnet.
        drop(client);
        port.fabric
            .set_sm_info(
                other,
                1,
                Some(SmInfoRepr {
                    act_count: 6,
                    ..theirs
                }),
            )
            .unwrap();
        let mut client = SmpClient::new(&mut port, 0);
        assert_eq!(
            check_peers(&mut client, &fabric, &state),
            PeerAction::HandedOver { to: theirs.guid }
        );
    }
}
