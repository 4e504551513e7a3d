//! [`arbitrate`]: the one call the SM makes before its first heavy sweep;
//! it returns when this SM must be master.

use std::sync::atomic::{AtomicBool, Ordering};

use sm_mad::sm_info::SmState;
use tracing::{info, warn};

use super::election::{electors, without_hung};
use super::poll::{handle_controls, poll, sleep_watching, PollEnd};
use super::{elect, read_peers, Control, Decision, SmInfoState, StandbyOptions, SLICE};
use crate::sweep::{discover, Discovered};
use sm_transport::{SmpClient, SmpPort};

/// How this SM came to be master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakenFrom {
    /// The SM we stood by for stopped answering.
    Silent {
        /// Its port GUID.
        guid: u64,
    },
    /// The master handed over to us.
    Handover {
        /// Its port GUID.
        guid: u64,
    },
}

/// What [`arbitrate`] ended with.
#[derive(Debug, Clone)]
pub enum Arbitration {
    /// This SM is master now: sweep.
    Master {
        /// `None` when no other master was seen (a first start, or the
        /// election made us master over other standbys).
        took_over_from: Option<TakenFrom>,
        /// The fabric the election that made us master was held on, for
        /// the first heavy sweep to start from instead of discovering it
        /// again.
        ///
        /// Given only when the election on this very discovery made us
        /// master: no master of ours was sweeping the fabric while it was
        /// read (one that existed would have made us stand by) and no
        /// polling came between the reading and the decision. A HANDOVER
        /// gives none: it ends a stretch of polling, or comes from a master
        /// that may still have been programming while we read.
        ///
        /// The caller takes it only for a heavy sweep that follows
        /// [`arbitrate`] directly (nothing written to the fabric in
        /// between, no wait for traps, no light sweep) and while it is
        /// younger than the sweep interval ([`Discovered::is_fresh`]). A
        /// trap that arrives meanwhile stays queued on the port and causes
        /// a heavy sweep of its own after the first, so a change it reports
        /// is never lost.
        discovered: Option<Box<Discovered>>,
    },
    /// `stop` was set.
    Stopped,
}

/// Decides whether this SM is master (see the module documentation) and
/// returns when it is, or when `stop` is set. Logs every step.
pub fn arbitrate(
    port: &mut dyn SmpPort,
    state: &SmInfoState,
    options: &StandbyOptions,
    stop: &AtomicBool,
) -> Arbitration {
    if !matches!(state.state(), SmState::Standby | SmState::NotActive) {
        state.set_state(SmState::Discovering);
    }
    let mut lost: Option<u64> = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Arbitration::Stopped;
        }
        if state.state() == SmState::NotActive {
            // Only a master's STANDBY control wakes us (the responder
            // applies it); DISCOVER is not allowed from NotActive.
            let _ = state.wait_control(SLICE);
            continue;
        }
        if let Some(end) = handle_controls(state) {
            match end {
                PollEnd::Handover { from } => {
                    return master(state, Some(TakenFrom::Handover { guid: from }), None)
                }
                PollEnd::Disabled => continue,
                _ => {}
            }
        }
        let mut client = SmpClient::new(port, options.smp_retries).with_m_keys(options.m_keys.clone());
        let (fabric, report) = match discover(&mut client) {
            Ok(found) => found,
            Err(e) => {
                warn!("election: our own port does not answer ({e}); trying again");
                if sleep_watching(state, options.poll_interval, stop) {
                    return Arbitration::Stopped;
                }
                continue;
            }
        };
        // Its age counts from here, the end of discovery, not from the
        // end of the election.
        let discovered = Discovered::new(fabric, report, client.stats().clone());
        let fabric = discovered.fabric();
        let own = fabric
            .nodes
            .first()
            .and_then(|n| n.ports.get(usize::from(fabric.sm_port)));
        if let Some(own) = own {
            if state.guid() != own.guid {
                state.set_guid(own.guid);
            }
        }
        let me = own
            .and_then(|p| p.info.as_ref())
            .map(|i| (i.lid, i.capability_mask));
        let our_master_lid = own
            .and_then(|p| p.info.as_ref())
            .map_or(0, |i| i.master_sm_lid);
        // As OpenSM with ignore_other_sm: other SMs' SMInfo is not asked.
        let peers = if options.ignore_other_sm {
            Vec::new()
        } else {
            electors(without_hung(state, read_peers(&mut client, fabric, state)), our_master_lid)
        };
        if state.state() == SmState::Master {
            // A HANDOVER arrived while we discovered.
            let from = match state.take_control() {
                Some(Control::Handover { from }) => Some(TakenFrom::Handover { guid: from }),
                _ => lost.map(|guid| TakenFrom::Silent { guid }),
            };
            return master(state, from, None);
        }
        match elect(state.priority(), state.guid(), &peers) {
            Decision::Master => {
                info!(
                    priority = state.priority(),
                    guid = format_args!("{:#018x}", state.guid()),
                    other_sms = peers.len(),
                    "elected master"
                );
                let discovered = Box::new(discovered);
                return master(state, lost.map(|guid| TakenFrom::Silent { guid }), Some(discovered));
            }
            Decision::Standby(i) => {
                let target = &peers[i];
                info!(
                    master = format_args!("{:#018x}", target.info.guid),
                    lid = target.port.lid,
                    its_priority = target.info.priority,
                    its_state = ?target.info.state,
                    priority = state.priority(),
                    "standing by"
                );
                state.set_state(SmState::Standby);
                match poll(port, state, options, target, me, stop) {
                    PollEnd::Stopped => return Arbitration::Stopped,
                    PollEnd::Handover { from } => {
                        return master(state, Some(TakenFrom::Handover { guid: from }), None)
                    }
                    PollEnd::Hung(act_count) => {
                        state.lock().hung = Some((target.info.guid, act_count));
                        lost = Some(target.info.guid);
                        state.set_state(SmState::Discovering);
                    }
                    PollEnd::Lost => {
                        lost = Some(target.info.guid);
                        state.set_state(SmState::Discovering);
                    }
                    PollEnd::Elect => {
                        if state.state() == SmState::Standby {
                            state.set_state(SmState::Discovering);
                        }
                    }
                    PollEnd::Disabled => {}
                }
            }
        }
    }
}

fn master(state: &SmInfoState, took_over_from: Option<TakenFrom>, discovered: Option<Box<Discovered>>) -> Arbitration {
    state.set_state(SmState::Master);
    match took_over_from {
        Some(TakenFrom::Silent { guid }) => {
            info!(
                from = format_args!("{guid:#018x}"),
                how = "master stopped answering",
                "taking over as master"
            )
        }
        Some(TakenFrom::Handover { guid }) => {
            info!(
                from = format_args!("{guid:#018x}"),
                how = "handover",
                "taking over as master"
            )
        }
        None => {}
    }
    Arbitration::Master { took_over_from, discovered }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use sm_mad::mad::attr;
    use sm_mad::sm_info::{control, SmState};
    use sm_mad::smp;
    use sm_mad::SmInfoRepr;
    use sm_topology::gen;

    use super::*;
    use crate::sim::SimFabric;
    use crate::standby::testkit::*;
    use crate::standby::*;

    #[test]
    fn alone_on_the_fabric_is_master_at_once() {
        let (f, _, me, _) = fabric();
        let mut port = fake(f);
        let state = SmInfoState::new(0, 0, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &fast(), &stop)),
            master_after(None)
        );
        assert_eq!(state.guid(), me, "the GUID is learnt from discovery");
        assert_eq!(state.state(), SmState::Master);
        assert_eq!(port.sminfo_gets, 0);
    }

    #[test]
    fn ignoring_other_sms_is_master_at_once_without_asking_them() {
        // A master of priority 15 answers; it would be stood by for.
        let (mut port, _, _) = with_peer(1, 15, SmState::Master);
        let state = SmInfoState::new(0, 0, 0);
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = Arc::clone(&stop);
        // Without the option this would poll the master for ever: stop it.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(3));
            stopper.store(true, Ordering::Relaxed);
        });
        let options = StandbyOptions { ignore_other_sm: true, ..fast() };
        assert_eq!(ended(&arbitrate(&mut port, &state, &options, &stop)), master_after(None));
        assert_eq!(port.sminfo_gets, 0, "other SMs' SMInfo is not read");
        assert_eq!(state.state(), SmState::Master);
    }

    #[test]
    fn a_standby_takes_over_when_the_master_stops_answering() {
        // The master has a lower priority than us, yet stays master.
        let (mut port, _, theirs) = with_peer(1, 1, SmState::Master);
        port.silent_after = Some(5);
        let state = SmInfoState::new(0, 8, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &fast(), &stop)),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        // 1 at election, 4 answered polls, 3 silent ones, 1 at the
        // re-election (silent too: the dead SM's port may still say IsSM).
        assert_eq!(port.sminfo_gets, 1 + 4 + 3 + 1);
    }

    #[test]
    fn a_higher_sm_is_waited_for_and_a_lower_one_is_not() {
        let (mut port, _, _) = with_peer(0, 2, SmState::Discovering);
        let state = SmInfoState::new(0, 3, 0);
        let stop = AtomicBool::new(false);
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &fast(), &stop)),
            master_after(None)
        );

        // A higher one in Discovering: stand by; it hands over after a few
        // polls (from another thread, as the responder would).
        let (mut port, _, discovering) = with_peer(0, 4, SmState::Discovering);
        let higher = SmInfoRepr {
            state: SmState::Master,
            ..discovering
        };
        let state = Arc::new(SmInfoState::new(0, 3, 0));
        let st = Arc::clone(&state);
        let handover = std::thread::spawn(move || {
            while st.state() != SmState::Standby {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(20));
            let set = smp::Repr::directed_set(
                1,
                attr::SM_INFO,
                control::HANDOVER,
                0,
                &[1],
                sminfo_data(higher),
            )
            .unwrap();
            answer(&st, &mad_of(&set)).expect("answered")
        });
        let got = arbitrate(&mut port, &state, &fast(), &stop);
        let reply = handover.join().unwrap();
        assert_eq!(parse_answer(&reply).0.status, 0);
        assert_eq!(
            ended(&got),
            master_after(Some(TakenFrom::Handover { guid: higher.guid }))
        );
        assert!(port.sminfo_gets >= 2, "polled while standing by");
        // The fabric was read before the polling: none is handed on.
        assert!(matches!(got, Arbitration::Master { discovered: None, .. }));
    }

    #[test]
    fn disabled_waits_for_standby_and_stop_ends_it() {
        let (mut port, _, master) = with_peer(0, 0, SmState::Master);
        let state = Arc::new(SmInfoState::new(0, 3, 0));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (Arc::clone(&state), Arc::clone(&stop));
        let driver = std::thread::spawn(move || {
            let send = |ctl| {
                let set =
                    smp::Repr::directed_set(1, attr::SM_INFO, ctl, 0, &[1], sminfo_data(master))
                        .unwrap();
                parse_answer(&answer(&st, &mad_of(&set)).expect("answered"))
                    .0
                    .status
            };
            while st.state() != SmState::Standby {
                std::thread::sleep(Duration::from_millis(2));
            }
            assert_eq!(send(control::DISABLE), 0);
            std::thread::sleep(Duration::from_millis(50));
            let disabled = st.state();
            assert_eq!(send(control::STANDBY), 0);
            std::thread::sleep(Duration::from_millis(50));
            sp.store(true, Ordering::Relaxed);
            disabled
        });
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &fast(), &stop)),
            Ended::Stopped
        );
        assert_eq!(driver.join().unwrap(), SmState::NotActive);
        assert_eq!(state.state(), SmState::Standby);
    }

    #[test]
    fn a_master_of_another_key_does_not_park_us() {
        // A "master" of priority 15 and another key on a fresh fabric
        // (our port's MasterSMLID is not its LID): we are master at once.
        for our_key in [0, 1] {
            let (mut port, _, _) = with_keyed_peer(15, SmState::Master, 0x2222);
            let stop = Arc::new(AtomicBool::new(false));
            let guard = Arc::clone(&stop);
            // Standing by for it would poll forever: stop, to fail.
            port.on_get = Some(Box::new(move |_, n| {
                if n >= 30 {
                    guard.store(true, Ordering::Relaxed);
                }
            }));
            let state = SmInfoState::new(0, 3, our_key);
            assert_eq!(
                ended(&arbitrate(&mut port, &state, &fast(), &stop)),
                master_after(None),
                "key {our_key}"
            );
            assert!(port.sminfo_gets < 30);
        }
    }

    #[test]
    fn a_master_of_another_key_that_holds_the_subnet_is_waited_for_not_obeyed() {
        let (mut port, other, theirs) = with_keyed_peer(1, SmState::Master, 0x2222);
        let mut g2l = crate::sweep::Guid2Lid::default();
        assign_lids(&mut port, &mut g2l);
        let their_lid = port.fabric.port_lid(other, 1).unwrap();
        set_our_master_sm_lid(&mut port, their_lid);
        // It stops answering after a few polls: we take over then, not
        // before, and it got no trap 144 (no request to an SM of another
        // key).
        port.silent_after = Some(6);
        let state = SmInfoState::new(0, 8, 0x1111);
        let stop = AtomicBool::new(false);
        assert_eq!(
            ended(&arbitrate(&mut port, &state, &fast(), &stop)),
            master_after(Some(TakenFrom::Silent { guid: theirs.guid }))
        );
        assert!(port.sminfo_gets > 6, "took over while it answered");
        assert!(port.lid_routed.is_empty(), "trap 144 sent to an SM of another key");
    }

    #[test]
    fn a_master_of_another_key_does_not_keep_us_from_taking_over_a_dead_master() {
        // Our master A (our key, priority 1) on one host; a "master" R of
        // another key and priority 15 on another, answering all along. A
        // dies (its SM gone: no SMInfo, no IsSM); we take over from A,
        // R notwithstanding: it never held the subnet (our port's
        // MasterSMLID is A's LID).
        let topo = gen::fat_tree_2level(2, 1, 2, 1).unwrap();
        let hosts: Vec<usize> = (1..topo.nodes.len())
            .filter(|&i| !topo.nodes[i].is_switch())
            .collect();
        let (a, r) = (hosts[0], hosts[hosts.len() - 1]);
        for our_key in [0, 1] {
            let mut f = fake(SimFabric::from_topology(&topo, 0, 1).unwrap());
            let a_info = SmInfoRepr {
                sm_key: our_key,
                priority: 1,
                ..sm(topo.nodes[a].port_guids[1], SmState::Master)
            };
            let r_info = SmInfoRepr {
                sm_key: 0x2222,
                priority: 15,
                ..sm(topo.nodes[r].port_guids[1], SmState::Master)
            };
            f.fabric.set_sm_info(a, 1, Some(a_info)).unwrap();
            f.fabric.set_sm_info(r, 1, Some(r_info)).unwrap();
            let mut g2l = crate::sweep::Guid2Lid::default();
            assign_lids(&mut f, &mut g2l);
            let a_lid = f.fabric.port_lid(a, 1).unwrap();
            set_our_master_sm_lid(&mut f, a_lid);
            let stop = Arc::new(AtomicBool::new(false));
            let guard = Arc::clone(&stop);
            f.on_get = Some(Box::new(move |fabric, n| {
                if n == 8 {
                    fabric.set_sm_info(a, 1, None).unwrap();
                }
                if n >= 60 {
                    guard.store(true, Ordering::Relaxed);
                }
            }));
            let state = SmInfoState::new(0, 3, our_key);
            assert_eq!(
                ended(&arbitrate(&mut f, &state, &fast(), &stop)),
                master_after(Some(TakenFrom::Silent {
                    guid: a_info.guid
                })),
                "key {our_key}"
            );
        }
    }

    /// A fresh discovery of the fake port's fabric, as the first heavy
    /// sweep would do it without the fabric the arbitration carries.
    fn fresh(port: &mut Fake) -> Discovered {
        let mut client = SmpClient::new(port, 0);
        let (fabric, report) = discover(&mut client).expect("our port answers");
        Discovered::new(fabric, report, client.stats().clone())
    }

    /// The fabric an arbitration that ended in mastership carries.
    fn carried(got: Arbitration) -> Discovered {
        match got {
            Arbitration::Master { discovered: Some(found), .. } => *found,
            other => panic!("mastership with the discovered fabric expected, got {other:?}"),
        }
    }

    #[test]
    fn an_elected_master_carries_the_fabric_its_election_discovered() {
        // Alone: master at once, on the fabric discovery read, which is the
        // one a fresh discovery reads.
        let (f, _, _, _) = fabric();
        let mut port = fake(f);
        let state = SmInfoState::new(0, 0, 0);
        let stop = AtomicBool::new(false);
        let found = carried(arbitrate(&mut port, &state, &fast(), &stop));
        let again = fresh(&mut port);
        assert!(found.fabric().nodes.len() > 2, "the whole fabric: {} nodes", found.fabric().nodes.len());
        assert_eq!(found.fabric(), again.fabric());
        assert_eq!(found.report(), again.report());
        assert_eq!(found.smps().sent, again.smps().sent, "the discovery's SMPs, not the election's");
        assert!(found.age() >= again.age());

        // Taking over from a master gone silent: the fabric of the
        // election after the polls, not the one read before them.
        let (mut port, other, theirs) = with_peer(1, 1, SmState::Master);
        port.silent_after = Some(5);
        let before = fresh(&mut port);
        // The master's host disappears while we poll it.
        port.on_get = Some(Box::new(move |fabric, n| {
            if n == 5 {
                fabric.remove_node(other).expect("the host exists");
            }
        }));
        let state = SmInfoState::new(0, 8, 0);
        let got = arbitrate(&mut port, &state, &fast(), &stop);
        assert_eq!(ended(&got), master_after(Some(TakenFrom::Silent { guid: theirs.guid })));
        let found = carried(got);
        let again = fresh(&mut port);
        assert_eq!(found.fabric(), again.fabric());
        assert_eq!(found.report(), again.report());
        assert_eq!(found.fabric().nodes.len() + 1, before.fabric().nodes.len(), "read after the master's host left");
    }
}
