//! The SMInfo responder: answers SubnGet(SMInfo) and SubnSet(SMInfo) from
//! other SMs on a thread of its own, and the SM_Key proofs that let SMs
//! of one key recognise each other without showing the key.

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;

use sm_mad::mad::{attr, method, status};
use sm_mad::sm_info;
use sm_mad::smp::{self, Routing, DATA_LEN};
use sm_mad::{Mad, SmInfoPacket, SmInfoRepr};
use tracing::{debug, warn};

use super::SmInfoState;
use sm_transport::TransportError;
use sm_umad::{IncomingMad, MadSender};

/// The response to one SMP another SM sent us, as a 256-byte MAD, or
/// `None` when there is nothing to answer (not a well-formed SMP, a
/// response, a trap).
pub fn answer(state: &SmInfoState, request: &[u8]) -> Option<Vec<u8>> {
    let parsed = smp::Packet::new_checked(request).and_then(|p| smp::Repr::parse(&p));
    let request = match parsed {
        Ok(r) => r,
        Err(e) => {
            debug!("unreadable SMP from another SM ignored: {e}");
            return None;
        }
    };
    let (status, data) = answer_data(state, &request)?;
    // Same TID, attribute, modifier and route; D bit set; hop pointer and
    // return path as they arrived (the SMI moves the pointer on the way
    // back, IBA 14.2.2); the LID-routed ends of a directed route swap.
    let mut response = request.response(status, data);
    if let Routing::Directed(dr) = &mut response.routing {
        std::mem::swap(&mut dr.dr_slid, &mut dr.dr_dlid);
    }
    let mut mad = Mad::zeroed();
    response.emit(&mut mad.smp_mut());
    Some(mad.0.to_vec())
}

/// The status and SMInfo data answering `request` (a request that arrived
/// at our port), `None` for what gets no answer: the part of [`answer`]
/// an embedded fabric's SMA asks of an SM running on it.
pub fn answer_data(state: &SmInfoState, request: &smp::Repr) -> Option<(u16, [u8; DATA_LEN])> {
    if request.is_response()
        || matches!(
            request.method,
            method::TRAP | method::TRAP_REPRESS | method::REPORT
        )
    {
        return None;
    }
    // What goes in the SM_Key field: the key only to a requester that
    // proved it, never to anyone who asks (IBA 14.4.1: a Get without the
    // proof sees 0).
    let ours = |sm_key: u64| {
        let mut info = state.sm_info();
        info.sm_key = sm_key;
        let mut data = [0u8; DATA_LEN];
        info.emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
        data
    };
    let (status, data) = match (request.method, request.attribute_id) {
        (method::GET, attr::SM_INFO) => {
            // ActCount is not moved here: a responder thread that answers
            // while the SM loop hangs must not look alive.
            (0, ours(get_key_field(state, &request.data)))
        }
        (method::SET, attr::SM_INFO) => {
            let sender = SmInfoPacket::new_checked(&request.data[..sm_info::LEN])
                .and_then(|p| SmInfoRepr::parse(&p));
            match sender {
                Err(e) => {
                    warn!("SubnSet(SMInfo) with an unreadable SMInfo refused: {e}");
                    (status::INVALID_ATTR_VALUE, ours(0))
                }
                // Every control, whatever the key's value (0 included):
                // an SM that cannot show our key belongs to no subnet of
                // ours and commands nothing here.
                Ok(sender) if sender.sm_key != state.sm_key() => {
                    warn!(
                        from = format_args!("{:#018x}", sender.guid),
                        control = request.attribute_modifier,
                        "SubnSet(SMInfo) with a wrong SM_Key refused"
                    );
                    (status::INVALID_ATTR_VALUE, ours(0))
                }
                Ok(sender) => match state.apply(request.attribute_modifier, &sender) {
                    Ok(_) => (0, ours(state.sm_key())),
                    Err(why) => {
                        warn!(
                            from = format_args!("{:#018x}", sender.guid),
                            "SubnSet(SMInfo) refused: {why}"
                        );
                        (status::INVALID_ATTR_VALUE, ours(state.sm_key()))
                    }
                },
            }
        }
        (method::GET | method::SET, other) => {
            debug!(
                attribute = format_args!("{other:#06x}"),
                "SMP for an attribute the SM does not serve"
            );
            (status::UNSUPPORTED_METHOD_ATTR, [0; DATA_LEN])
        }
        (m, _) => {
            debug!(
                method = format_args!("{m:#04x}"),
                "SMP with a method the SM does not serve"
            );
            (status::UNSUPPORTED_METHOD, [0; DATA_LEN])
        }
    };
    Some((status, data))
}

/// The SM_Key field of our answer to a SubnGet(SMInfo) whose payload is
/// `payload`: our key when the payload's SM_Key is our key (the requester
/// proved it); [`key_proof`] of a non-zero other value, taken as a
/// challenge (smcore SMs check each other this way without either sending
/// the key to an SM that has not proved it); 0 otherwise (a plain Get, as
/// `sminfo` or OpenSM send).
fn get_key_field(state: &SmInfoState, payload: &[u8]) -> u64 {
    let asked = SmInfoPacket::new_checked(&payload[..sm_info::LEN.min(payload.len())])
        .and_then(|p| SmInfoRepr::parse(&p))
        .map_or(0, |i| i.sm_key);
    if asked == state.sm_key() {
        asked
    } else if asked != 0 {
        key_proof(state.sm_key(), asked, state.guid())
    } else {
        0
    }
}

/// Domain separation for [`key_proof`] (the second half of SipHash's key).
const PROOF_DOMAIN: u64 = u64::from_be_bytes(*b"smcoreSK");

/// Proof that the SM at port `guid` holds `sm_key`, answering `challenge`:
/// SipHash-2-4 keyed with the SM_Key over the challenge and the port
/// GUID. A PRF: seeing proofs, even for challenges of one's choosing,
/// teaches nothing about the key; bound to the answering port's GUID, an
/// SM cannot pass off another SM's proof as its own.
#[allow(deprecated)] // std's SipHasher is SipHash-2-4, frozen, not unsound.
fn key_proof(sm_key: u64, challenge: u64, guid: u64) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::SipHasher::new_with_keys(sm_key, PROOF_DOMAIN);
    // Fixed byte order: SMs on hosts of either endianness agree.
    h.write(&challenge.to_be_bytes());
    h.write(&guid.to_be_bytes());
    h.finish()
}

/// A fresh challenge for a SubnGet(SMInfo): unpredictable, non-zero and
/// never our own key (a peer would then show the key in clear).
pub(super) fn challenge(sm_key: u64) -> u64 {
    let c = sm_transport::port::random_u64();
    if c == 0 || c == sm_key {
        c.wrapping_add(1) | 1
    } else {
        c
    }
}

/// What an SM's answer to our challenged SubnGet(SMInfo) says about its
/// SM_Key: the same as ours when the field is the proof for our key and
/// its port GUID, or our key in clear (OpenSM and the simulated SMs show
/// the key to anyone).
pub(super) fn shows_our_key(state: &SmInfoState, challenge: u64, port_guid: u64, shown: u64) -> bool {
    shown == state.sm_key() || shown == key_proof(state.sm_key(), challenge, port_guid)
}

/// Our SMInfo as the payload of a SubnGet(SMInfo), with `challenge` in
/// the SM_Key field.
pub(super) fn challenge_payload(state: &SmInfoState, challenge: u64) -> [u8; DATA_LEN] {
    let mut info = state.sm_info();
    info.sm_key = challenge;
    let mut data = [0u8; DATA_LEN];
    info.emit(&mut SmInfoPacket::new_unchecked(&mut data[..]));
    data
}

/// Answers every request of `requests` with `reply` until the queue
/// closes. A failed reply is logged: the requester retries as after a
/// lost MAD.
pub fn serve(
    state: &SmInfoState,
    requests: &Receiver<IncomingMad>,
    mut reply: impl FnMut(&IncomingMad, &[u8]) -> Result<(), TransportError>,
) {
    while let Ok(request) = requests.recv() {
        if let Some(response) = answer(state, &request.mad) {
            if let Err(e) = reply(&request, &response) {
                warn!(slid = request.slid, "SMInfo answer not sent: {e}");
            }
        }
    }
    debug!("SMInfo responder: request queue closed");
}

/// Starts the SMInfo responder thread (see [`serve`]); it ends when the
/// transport that feeds `requests` is gone.
pub fn spawn_responder(
    state: Arc<SmInfoState>,
    requests: Receiver<IncomingMad>,
    sender: MadSender,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sminfo-responder".into())
        .spawn(move || serve(&state, &requests, |to, mad| sender.reply(to, mad)))
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};

    use sm_mad::mad::{attr, class, method, status};
    use sm_mad::sm_info::{control, SmState};
    use sm_mad::smp::{self, Direction, Routing, DATA_LEN};
    use sm_mad::SmInfoRepr;

    use super::*;
    use crate::standby::testkit::*;
    use crate::standby::*;
    use sm_transport::TransportError;
    use sm_umad::IncomingMad;

    /// A DR request as it reaches the SM at the end of a 2-hop path: hop
    /// pointer and return path filled in on the way.
    fn arrived(mut request: smp::Repr) -> smp::Repr {
        if let Routing::Directed(dr) = &mut request.routing {
            dr.hop_pointer = dr.hop_count + 1;
            dr.return_path[1] = 7;
            dr.return_path[2] = 2;
        }
        request
    }

    #[test]
    fn get_is_answered_along_the_way_it_came() {
        let state = SmInfoState::new(0xabc, 9, 0x55);
        state.set_state(SmState::Standby);
        let request = arrived(
            smp::Repr::directed_get(0x1234_0000_0042, attr::SM_INFO, 0, 0, &[3, 1]).unwrap(),
        );
        let reply = answer(&state, &mad_of(&request)).expect("answered");
        let raw = smp::Packet::new_checked(&reply[..]).unwrap();
        assert_eq!(raw.mgmt_class(), class::SUBN_DIRECTED);
        assert_eq!(raw.method(), method::GET_RESP);
        assert!(raw.direction_bit());
        assert_eq!(raw.smp_status(), 0);
        assert_eq!(raw.hop_pointer(), 3);
        assert_eq!(raw.hop_count(), 2);
        let (repr, info) = parse_answer(&reply);
        assert_eq!(repr.transaction_id, 0x1234_0000_0042);
        let dr = repr.directed().unwrap();
        assert_eq!(dr.direction, Direction::Inbound);
        assert_eq!(dr.initial_ports(), &[3, 1]);
        assert_eq!(dr.return_ports(), &[7, 2]);
        assert_eq!((dr.dr_slid, dr.dr_dlid), (0xffff, 0xffff));
        // A plain Get proves no key: the SM_Key field is 0.
        assert_eq!(
            info,
            SmInfoRepr {
                guid: 0xabc,
                sm_key: 0,
                act_count: 0,
                priority: 9,
                state: SmState::Standby
            }
        );

        // LID-routed: no D bit; ActCount is what the SM loop made it,
        // however many answers the responder gives.
        state.set_state(SmState::Master);
        state.bump_activity();
        let lid = smp::Repr::lid_get(7, attr::SM_INFO, 0, 0);
        for _ in 0..3 {
            let reply = answer(&state, &mad_of(&lid)).expect("answered");
            let (repr, info) = parse_answer(&reply);
            assert_eq!(repr.routing, Routing::Lid);
            assert_eq!(repr.method, method::GET_RESP);
            assert_eq!(reply[1], class::SUBN_LID);
            assert_eq!((info.state, info.act_count), (SmState::Master, 1));
        }
    }

    #[test]
    fn other_attributes_methods_and_non_requests() {
        let state = SmInfoState::new(1, 0, 0);
        let get = smp::Repr::directed_get(1, attr::NODE_INFO, 0, 0, &[1]).unwrap();
        let answer_mad = answer(&state, &mad_of(&get)).expect("answered");
        let raw = smp::Packet::new_checked(&answer_mad[..]).unwrap();
        assert_eq!(raw.smp_status(), status::UNSUPPORTED_METHOD_ATTR);
        assert!(raw.direction_bit());
        let mut send = smp::Repr::lid_get(1, attr::SM_INFO, 0, 0);
        send.method = method::SEND;
        let answer_mad = answer(&state, &mad_of(&send)).expect("answered");
        assert_eq!(
            smp::Packet::new_checked(&answer_mad[..])
                .unwrap()
                .smp_status(),
            status::UNSUPPORTED_METHOD
        );
        // Responses, traps and garbage get no answer.
        let resp = get.response(0, [0; DATA_LEN]);
        assert_eq!(answer(&state, &mad_of(&resp)), None);
        let mut trap = smp::Repr::lid_get(1, attr::NOTICE, 0, 0);
        trap.method = method::TRAP;
        assert_eq!(answer(&state, &mad_of(&trap)), None);
        assert_eq!(answer(&state, &[1, 2, 3]), None);
    }

    /// SubnSet(SMInfo) `ctl` from SM 7 in `from`: the status and the
    /// state the answer gives.
    fn control_by_7(me: &SmInfoState, ctl: u32, from: SmState) -> (u16, SmState) {
        let (st, info) = control_from(me, ctl, sm(7, from));
        (st, info.state)
    }

    /// Each of `controls` from SM 7 in `from` is refused in our state.
    fn refused(me: &SmInfoState, controls: &[u32], from: SmState) {
        for &ctl in controls {
            assert_eq!(
                control_by_7(me, ctl, from).0,
                status::INVALID_ATTR_VALUE,
                "control {ctl} from a {from:?} SM in {:?}",
                me.state()
            );
        }
    }

    #[test]
    fn controls_follow_the_state_machine() {
        use SmState::{Master, NotActive, Standby};
        let me = SmInfoState::new(2, 3, 0);
        me.set_state(Standby);
        // Only a master commands.
        refused(&me, &[control::HANDOVER], Standby);
        assert_eq!(me.state(), Standby);
        assert_eq!(me.take_control(), None);
        // STANDBY is not a transition from Standby; 9 is no control.
        refused(&me, &[control::STANDBY, 9], Master);
        // DISABLE → NotActive; then only STANDBY brings it back.
        assert_eq!(control_by_7(&me, control::DISABLE, Master), (0, NotActive));
        assert_eq!(me.take_control(), Some(Control::Disable { from: 7 }));
        refused(&me, &[control::HANDOVER, control::DISCOVER], Master);
        assert_eq!(control_by_7(&me, control::STANDBY, Master), (0, Standby));
        assert_eq!(me.take_control(), Some(Control::Standby { from: 7 }));
        // HANDOVER → Master; ACKNOWLEDGE from the old master, now standby.
        assert_eq!(control_by_7(&me, control::HANDOVER, Master), (0, Master));
        assert_eq!(control_by_7(&me, control::ACKNOWLEDGE, Standby).0, 0);
        refused(&me, &[control::DISABLE], Master);
        assert_eq!(me.take_control(), Some(Control::Handover { from: 7 }));
        assert_eq!(me.take_control(), Some(Control::Acknowledge { from: 7 }));
        assert_eq!(me.take_control(), None);
        assert_eq!(me.state(), SmState::Master);
    }

    #[test]
    fn a_wrong_sm_key_is_refused_and_not_shown() {
        let me = SmInfoState::new(2, 3, 0x1111);
        me.set_state(SmState::Standby);
        let mut sender = sm(7, SmState::Master);
        sender.sm_key = 0x2222;
        let (st, info) = control_from(&me, control::HANDOVER, sender);
        assert_eq!(
            (st, info.sm_key, info.state),
            (status::INVALID_ATTR_VALUE, 0, SmState::Standby)
        );
        sender.sm_key = 0x1111;
        let (st, info) = control_from(&me, control::HANDOVER, sender);
        assert_eq!((st, info.sm_key, info.state), (0, 0x1111, SmState::Master));
    }

    #[test]
    fn the_responder_answers_until_its_queue_closes() {
        let state = Arc::new(SmInfoState::new(5, 1, 0));
        let (tx, rx) = mpsc::sync_channel(4);
        let (out_tx, out_rx) = mpsc::channel();
        let st = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            serve(&st, &rx, |to, mad| {
                out_tx
                    .send((to.slid, mad.to_vec()))
                    .map_err(|e| TransportError::Closed(e.to_string()))
            })
        });
        let get = smp::Repr::lid_get(3, attr::SM_INFO, 0, 0);
        for (slid, mad) in [(12, mad_of(&get)), (13, vec![0; 8]), (14, mad_of(&get))] {
            tx.send(IncomingMad { slid, sqpn: 0, mad }).unwrap();
        }
        drop(tx);
        thread.join().expect("responder ends when the queue closes");
        let got: Vec<(u16, Vec<u8>)> = out_rx.iter().collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), vec![12, 14]);
        assert_eq!(parse_answer(&got[0].1).1.guid, 5);
    }

    /// A plain SubnGet(SMInfo) with `payload` in its data, as a rogue
    /// host would send it: the SM_Key field of the answer.
    fn key_shown(state: &SmInfoState, payload: Option<SmInfoRepr>) -> u64 {
        let mut get = smp::Repr::directed_get(0x99, attr::SM_INFO, 0, 0, &[1]).unwrap();
        if let Some(p) = payload {
            get.data = sminfo_data(p);
        }
        let reply = answer(state, &mad_of(&get)).expect("answered");
        let (repr, info) = parse_answer(&reply);
        assert_eq!(repr.status, 0);
        info.sm_key
    }

    #[test]
    fn sminfo_get_shows_the_key_only_to_a_requester_that_proved_it() {
        let me = SmInfoState::new(0xabc, 3, 0x1111);
        for st in [SmState::Discovering, SmState::Standby, SmState::Master] {
            me.set_state(st);
            // Untrusted: a Get without a payload (sminfo, OpenSM), or with
            // a wrong key in it, never sees the key.
            assert_eq!(key_shown(&me, None), 0, "plain Get in {st:?}");
            let mut asker = sm(7, SmState::Standby);
            asker.sm_key = 0x2222;
            let shown = key_shown(&me, Some(asker));
            assert_ne!(shown, 0x1111, "a wrong key in the Get got the key ({st:?})");
            // The requester that shows our key sees it.
            asker.sm_key = 0x1111;
            assert_eq!(key_shown(&me, Some(asker)), 0x1111, "{st:?}");
        }
    }

    #[test]
    fn a_rogue_learns_no_key_and_commands_nothing() {
        // The rogue reads our SMInfo, then sends DISABLE as a "master"
        // with whatever key it read: refused, our standby stays standby.
        let me = SmInfoState::new(0xabc, 3, 0x1111);
        me.set_state(SmState::Standby);
        let learnt = key_shown(&me, None);
        let mut rogue = sm(7, SmState::Master);
        rogue.priority = 15;
        rogue.sm_key = learnt;
        for ctl in [control::DISABLE, control::DISCOVER, control::HANDOVER] {
            let (st, info) = control_from(&me, ctl, rogue);
            assert_eq!(st, status::INVALID_ATTR_VALUE, "control {ctl} obeyed");
            assert_eq!(info.sm_key, 0, "a refused Set showed the key");
        }
        assert_eq!(me.state(), SmState::Standby);
        assert_eq!(me.take_control(), None);

        // A key of 0 is a key like any other: it does not turn the check
        // off (a master of another key cannot park or promote us).
        let zero = SmInfoState::new(0xabc, 3, 0);
        zero.set_state(SmState::Standby);
        rogue.sm_key = 0x2222;
        for ctl in [control::DISABLE, control::HANDOVER, control::DISCOVER] {
            assert_eq!(
                control_from(&zero, ctl, rogue).0,
                status::INVALID_ATTR_VALUE,
                "control {ctl} with a wrong key obeyed by an SM of key 0"
            );
        }
        assert_eq!(zero.state(), SmState::Standby);
        rogue.sm_key = 0;
        assert_eq!(control_from(&zero, control::DISABLE, rogue).0, 0);
    }
}
