//! A standby's polling of the SM it stands by for: SMInfo every
//! `poll_interval`, the controls the responder queued, the master's
//! heartbeat (ActCount), and trap 144 to a master that ranks below us.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sm_mad::mad::{attr, method};
use sm_mad::sm_info::SmState;
use sm_mad::smp::{self, DATA_LEN};
use sm_mad::Mad;
use tracing::{debug, info, warn};

use super::election::challenged_get;
use super::{is_higher, Control, Peer, SmInfoState, StandbyOptions, SLICE};
use sm_transport::{SmpClient, SmpError, SmpPort};

/// Why a standby stopped polling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PollEnd {
    Stopped,
    Handover {
        from: u64,
    },
    /// The polled SM did not answer `poll_retries` times in a row.
    Lost,
    /// The polled master answered `stuck_polls` times in a row with the
    /// same ActCount (this one): its SM loop is hung.
    Hung(u32),
    /// Elect again: the polled SM stood down, another port answers at its
    /// address, or a master told us to.
    Elect,
    /// A master disabled us.
    Disabled,
}

/// Handles the controls queued by the responder: what they end, if
/// anything.
pub(super) fn handle_controls(state: &SmInfoState) -> Option<PollEnd> {
    let mut end = None;
    while let Some(c) = state.take_control() {
        match c {
            Control::Handover { from } if state.state() == SmState::Master => {
                end = Some(PollEnd::Handover { from })
            }
            Control::Disable { .. } => end = Some(PollEnd::Disabled),
            Control::Discover { .. } => end = end.or(Some(PollEnd::Elect)),
            Control::Standby { .. } if end == Some(PollEnd::Disabled) => end = None,
            _ => {}
        }
    }
    end
}

/// Sleeps `d` unless `stop` is set first (then `true`) or a control comes
/// (then it is put back for the caller).
pub(super) fn sleep_watching(state: &SmInfoState, d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(SLICE.min(end.saturating_duration_since(Instant::now())));
        if !state.lock().controls.is_empty() {
            return false;
        }
    }
    stop.load(Ordering::Relaxed)
}

/// Polls `target`'s SMInfo every `poll_interval` while we stand by. `me`
/// is our port's LID and CapabilityMask, for trap 144.
pub(super) fn poll(
    port: &mut dyn SmpPort,
    state: &SmInfoState,
    options: &StandbyOptions,
    target: &Peer,
    me: Option<(u16, u32)>,
    stop: &AtomicBool,
) -> PollEnd {
    let guid = target.info.guid;
    let mut misses = 0u32;
    let mut polls_below_us = 0u32;
    // The master's ActCount at the last answer, and the answers in a row
    // that showed it unchanged.
    let mut last_act_count = target.info.act_count;
    let mut stuck = 0u32;
    let mut next = Instant::now() + options.poll_interval;
    loop {
        // Wait for the next poll, watching for stop and controls.
        loop {
            if stop.load(Ordering::Relaxed) {
                return PollEnd::Stopped;
            }
            if let Some(end) = handle_controls(state) {
                if end != PollEnd::Disabled || state.state() == SmState::NotActive {
                    return end;
                }
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            if let Some(c) = state.wait_control((next - now).min(SLICE)) {
                // Put it back for handle_controls.
                state.lock().controls.push_front(c);
            }
        }
        next = Instant::now() + options.poll_interval;
        // One SMP per poll: the retries are the polls themselves.
        let mut client = SmpClient::new(port, 0).with_m_keys(options.m_keys.clone());
        let (answer, same_key) = challenged_get(&mut client, state, &target.port);
        let answer = match answer {
            // Whatever answers for our master must go on proving our key;
            // an answer that does not is no sign of our master's life.
            Ok(info) if target.same_key && !same_key && info.guid == guid => Err(
                SmpError::Malformed("the answer does not prove our SM_Key".into()),
            ),
            other => other,
        };
        match answer {
            Ok(info) if info.guid != guid => {
                warn!(
                    expected = format_args!("{guid:#018x}"),
                    found = format_args!("{:#018x}", info.guid),
                    "another SM answers on the master's route; electing again"
                );
                return PollEnd::Elect;
            }
            Ok(info) => {
                let alive = match info.state {
                    SmState::Master | SmState::Discovering => true,
                    // Still the one to wait for only while it ranks above us.
                    SmState::Standby => {
                        is_higher(info.priority, info.guid, state.priority(), state.guid())
                    }
                    SmState::NotActive => false,
                };
                if !alive {
                    info!(sm = format_args!("{guid:#018x}"), its_state = ?info.state, "the SM we stood by for stood down; electing again");
                    return PollEnd::Elect;
                }
                if misses > 0 {
                    info!(
                        sm = format_args!("{guid:#018x}"),
                        misses, "master answers again"
                    );
                }
                misses = 0;
                debug!(sm = format_args!("{guid:#018x}"), its_state = ?info.state, act_count = info.act_count, "master polled");
                // A master's loop moves ActCount as it works; its
                // responder thread answering is not enough.
                if info.state == SmState::Master && info.act_count == last_act_count {
                    stuck += 1;
                    if stuck >= options.stuck_polls.max(1) {
                        warn!(
                            sm = format_args!("{guid:#018x}"),
                            act_count = info.act_count,
                            polls = stuck,
                            "master answers but its ActCount has stopped: its SM loop is hung; \
                             electing a new master"
                        );
                        return PollEnd::Hung(info.act_count);
                    }
                } else {
                    stuck = 0;
                }
                last_act_count = info.act_count;
                let below_us = target.same_key
                    && info.state == SmState::Master
                    && !is_higher(info.priority, info.guid, state.priority(), state.guid());
                if below_us {
                    // A master below us hands over once it sees us in a
                    // heavy sweep; trap 144 (SM priority change) asks it
                    // for one, as OpenSM's standby does. Sent again now
                    // and then in case it was lost.
                    if polls_below_us.is_multiple_of(4 * options.poll_retries.max(1)) {
                        if let Some((lid, capability_mask)) = me {
                            send_trap_144(port, target, lid, capability_mask);
                        }
                    }
                    polls_below_us += 1;
                } else {
                    polls_below_us = 0;
                }
            }
            Err(e) => {
                misses += 1;
                warn!(sm = format_args!("{guid:#018x}"), misses, of = options.poll_retries, error = %e, "master did not answer a poll");
                if misses >= options.poll_retries.max(1) {
                    warn!(
                        sm = format_args!("{guid:#018x}"),
                        "master is gone; electing a new one"
                    );
                    return PollEnd::Lost;
                }
            }
        }
    }
}

/// Trap 144's ChangeFlags bit for "SM priority changed".
const TRAP_144_SM_PRIORITY_CHANGE: u16 = 0x0008;

/// Sends trap 144 (local changes: SM priority) from our port (`lid`,
/// `capability_mask`) to the master, LID-routed. Nothing answers but a
/// TrapRepress, which the transport does not count as an answer; a lost
/// trap is sent again at a later poll.
fn send_trap_144(port: &mut dyn SmpPort, target: &Peer, lid: u16, capability_mask: u32) {
    use sm_mad::notice::{self, notice_type, producer, trap, Details, Source};
    if target.port.lid == 0 || lid == 0 {
        return;
    }
    let notice = notice::Repr {
        notice_type: notice_type::INFO,
        source: Source::Generic {
            producer_type: producer::CA,
            trap_number: trap::CAPABILITY_CHANGE,
        },
        issuer_lid: lid,
        toggle: false,
        count: 0,
        details: Details::CapabilityChange {
            lid,
            other_local_changes: false,
            capability_mask,
            change_flags: TRAP_144_SM_PRIORITY_CHANGE,
            capability_mask2: 0,
        },
        issuer_gid: None,
    };
    let mut data = [0u8; DATA_LEN];
    notice.emit(&mut notice::Packet::new_unchecked(&mut data[..]));
    let tid = 0x7144_0000_0000 | sm_transport::port::fresh_tid();
    let mut request = smp::Repr::lid_set(tid, attr::NOTICE, 0, 0, data);
    request.method = method::TRAP;
    let mut mad = Mad::zeroed();
    request.emit(&mut mad.smp_mut());
    info!(
        master = format_args!("{:#018x}", target.info.guid),
        lid = target.port.lid,
        "master ranks below us: trap 144 sent to ask for a handover"
    );
    if let Err(e) = port.send_to(target.port.lid, &mad.0) {
        debug!("trap 144 not sent: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use sm_mad::mad::{attr, method};
    use sm_mad::sm_info::SmState;
    use sm_mad::smp::{self, Routing};
    use sm_mad::SmInfoRepr;

    use super::*;
    use crate::standby::testkit::*;
    use crate::standby::*;
    use sm_transport::{SmpPort, TransportError};

    #[test]
    fn a_poll_answered_again_in_time_resets_the_count() {
        let (mut port, other, theirs) = with_peer(1, 1, SmState::Master);
        // Get 1 elects; polls (gets 2..) lose 3 and 4, answer 5, lose 6
        // and 7: never 3 misses in a row, so no takeover. At get 8 the
        // master has stood down (NotActive): elect again (get 9), and we
        // are master without having taken over from anyone.
        port.on_get = Some(Box::new(move |fabric, n| {
            let state = if n >= 8 {
                SmState::NotActive
            } else {
                SmState::Master
            };
            fabric
                .set_sm_info(other, 1, Some(SmInfoRepr { state, ..theirs }))
                .unwrap();
        }));
        struct Drops<'a>(&'a mut Fake);
        impl SmpPort for Drops<'_> {
            fn send(&mut self, mad: &[u8]) -> Result<Option<Vec<u8>>, TransportError> {
                let answer = self.0.send(mad)?;
                let sminfo = u16::from_be_bytes([mad[16], mad[17]]) == attr::SM_INFO;
                Ok(if sminfo && matches!(self.0.sminfo_gets, 3 | 4 | 6 | 7) {
                    None
                } else {
                    answer
                })
            }
        }
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        let got = arbitrate(&mut Drops(&mut port), &state, &fast(), &stop);
        assert_eq!(ended(&got), master_after(None));
        assert_eq!(port.sminfo_gets, 9);
    }

    #[test]
    fn a_standby_above_its_master_asks_for_a_handover_with_trap_144() {
        // LIDs first, as the master would have assigned them.
        let (mut port, other, theirs) = with_peer(1, 1, SmState::Master);
        let mut g2l = crate::sweep::Guid2Lid::default();
        assign_lids(&mut port, &mut g2l);
        let f = &port.fabric;
        let (master_lid, our_lid) = (f.port_lid(other, 1).unwrap(), f.port_lid(0, 1).unwrap());
        // Election, 13 answered polls (trap at the 1st and the 13th: every
        // 4 x retries), then silence.
        port.silent_after = Some(14);
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        let got = arbitrate(&mut port, &state, &fast(), &stop);
        assert_eq!(
            ended(&got),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        assert_eq!(
            port.lid_routed.len(),
            2,
            "one trap at the first poll, one 12 polls later"
        );
        let (dlid, mad) = &port.lid_routed[0];
        assert_eq!(*dlid, master_lid);
        let smp = smp::Repr::parse(&smp::Packet::new_checked(&mad[..]).unwrap()).unwrap();
        assert_eq!(
            (smp.method, smp.attribute_id, smp.routing),
            (method::TRAP, attr::NOTICE, Routing::Lid)
        );
        let notice = sm_mad::notice::Repr::parse(
            &sm_mad::notice::Packet::new_checked(&smp.data[..]).unwrap(),
        )
        .unwrap();
        assert_eq!(notice.trap_number(), Some(144));
        assert_eq!(notice.issuer_lid, our_lid);
        match notice.details {
            sm_mad::notice::Details::CapabilityChange {
                lid,
                change_flags,
                capability_mask,
                ..
            } => {
                assert_eq!((lid, change_flags), (our_lid, TRAP_144_SM_PRIORITY_CHANGE));
                assert_ne!(capability_mask, 0);
            }
            other => panic!("trap 144 details expected, got {other:?}"),
        }

        // A master above us gets no trap.
        let (mut port, _, _) = with_peer(1, 9, SmState::Master);
        assign_lids(&mut port, &mut g2l);
        port.silent_after = Some(6);
        let got = arbitrate(&mut port, &SmInfoState::new(0, 8, 0), &fast(), &stop);
        assert!(matches!(
            got,
            Arbitration::Master {
                took_over_from: Some(_),
                ..
            }
        ));
        assert!(port.lid_routed.is_empty());
    }

    #[test]
    fn a_master_that_answers_but_whose_act_count_stops_is_taken_over() {
        // The master's responder answers every poll, in state Master, but
        // its ActCount stays at 5: its SM loop is hung.
        let (mut port, _, theirs) = with_peer(5, 1, SmState::Master);
        let stop = Arc::new(AtomicBool::new(false));
        let guard = Arc::clone(&stop);
        port.on_get = Some(Box::new(move |_, n| {
            if n >= 60 {
                guard.store(true, Ordering::Relaxed);
            }
        }));
        let options = StandbyOptions {
            poll_interval: Duration::from_millis(5),
            poll_retries: 3,
            smp_retries: 0,
            ..StandbyOptions::default()
        };
        let state = SmInfoState::new(0, 8, 0);
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &options, &stop)),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        // The election, the stuck polls, the re-election (where the hung
        // master, answering still, is left out).
        assert!(port.sminfo_gets < 60, "{} SMInfo Gets", port.sminfo_gets);

        // Its ActCount moving, the same master is stood by for.
        let (mut port, other, theirs) = with_peer(5, 1, SmState::Master);
        let stop = Arc::new(AtomicBool::new(false));
        let guard = Arc::clone(&stop);
        port.on_get = Some(Box::new(move |fabric, n| {
            let info = SmInfoRepr {
                act_count: n as u32,
                ..theirs
            };
            fabric.set_sm_info(other, 1, Some(info)).unwrap();
            if n >= 60 {
                guard.store(true, Ordering::Relaxed);
            }
        }));
        let state = SmInfoState::new(0, 8, 0);
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &options, &stop)),
            Ended::Stopped
        );
        assert_eq!(state.state(), SmState::Standby);
    }
}
