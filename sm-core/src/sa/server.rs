//! The SA's thread: takes requests from the SM port's SA queue (a umad
//! port's, or the embedded fabric's), answers each through a [`Responder`]
//! (the port's [`GmpSender`] in the SM), and
//! takes new snapshots from the SM loop through [`SaHandle::publish`].
//!
//! The SM loop learns of membership changes from
//! [`crate::mcast::McGroups::generation`]; the signal channel of
//! [`SaHandle::membership_changes`] is a one-slot wake-up on top of it
//! (changes coalesce, so it holds at most one message whether or not
//! anyone reads it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{debug, warn};

use super::db::SaDb;
use super::handler::{Sa, SaConfig};
use super::inform::Report;
use crate::mcast::McGroups;
use sm_transport::gmp::{GmpSender, IncomingMad};

/// Where the SA's answers and Reports go.
pub trait Responder: Send + 'static {
    /// Answers the request `to`.
    fn reply(&self, to: &IncomingMad, mad: &[u8]) -> Result<(), String>;
    /// Sends a Report.
    fn report(&self, report: &Report) -> Result<(), String>;
}

/// Any sending end of an SM port: the umad port's, the embedded fabric's.
impl<S: GmpSender> Responder for S {
    fn reply(&self, to: &IncomingMad, mad: &[u8]) -> Result<(), String> {
        GmpSender::reply(self, to, mad).map_err(|e| e.to_string())
    }
    fn report(&self, report: &Report) -> Result<(), String> {
        self.send_gsi(report.dlid, report.dqpn, &report.mad, 0)
            .map_err(|e| e.to_string())
    }
}

/// The running SA, as the SM loop holds it.
pub struct SaHandle {
    sa: Arc<Sa>,
    /// Requests taken off the queue (the metrics endpoint's SA rate).
    requests_handled: Arc<std::sync::atomic::AtomicU64>,
    responder: Arc<dyn Responder + Sync>,
    mcast_tx: SyncSender<()>,
    mcast_rx: Mutex<Option<Receiver<()>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The saved registrations to read back before the first publish.
    restore_from: Mutex<Option<PendingRestore>>,
}

impl std::fmt::Debug for SaHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaHandle").finish_non_exhaustive()
    }
}

/// Signals a membership change; a change already signalled and not yet
/// taken covers this one.
fn signal(tx: &SyncSender<()>) {
    match tx.try_send(()) {
        Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
    }
}

fn send_reports(responder: &dyn Responder, reports: &[Report]) {
    for r in reports {
        if let Err(e) = responder.report(r) {
            warn!(dlid = r.dlid, "SA Report not sent: {e}");
        }
    }
}

/// Starts the SA thread on `requests`, answering through `responder`.
/// Until the first [`SaHandle::publish`] record queries are answered BUSY.
pub fn spawn<R: Responder + Sync>(
    responder: R,
    requests: Receiver<IncomingMad>,
    groups: Arc<Mutex<McGroups>>,
    config: SaConfig,
) -> SaHandle {
    let sa = Arc::new(Sa::new(groups, config));
    let responder: Arc<dyn Responder + Sync> = Arc::new(responder);
    let (mcast_tx, mcast_rx) = std::sync::mpsc::sync_channel(1);
    let stop = Arc::new(AtomicBool::new(false));
    let requests_handled = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let thread = {
        let (sa, responder, mcast_tx, stop, requests_handled) = (
            Arc::clone(&sa),
            Arc::clone(&responder),
            mcast_tx.clone(),
            Arc::clone(&stop),
            Arc::clone(&requests_handled),
        );
        std::thread::Builder::new()
            .name("sa".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let request = match requests.recv_timeout(Duration::from_millis(200)) {
                        Ok(r) => r,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => break,
                    };
                    requests_handled.fetch_add(1, Ordering::Relaxed);
                    let answer = sa.handle(request.slid, request.sqpn, &request.mad);
                    if let Some(reply) = &answer.reply {
                        if let Err(e) = responder.reply(&request, reply) {
                            warn!(slid = request.slid, "SA answer not sent: {e}");
                        }
                    }
                    send_reports(responder.as_ref(), &answer.reports);
                    if answer.mcast_changed {
                        debug!("multicast membership changed");
                        signal(&mcast_tx);
                    }
                }
            })
            .expect("spawn the SA thread")
    };
    SaHandle {
        sa,
        requests_handled,
        responder,
        mcast_tx,
        mcast_rx: Mutex::new(Some(mcast_rx)),
        stop,
        thread: Some(thread),
        restore_from: Mutex::new(None),
    }
}

impl SaHandle {
    /// Puts `db` in service; sends the Reports of GIDs in and out of
    /// service, and signals a membership change when members that left
    /// the fabric were dropped.
    pub fn publish(&self, db: SaDb) {
        let restore = self.restore_from.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut pending) = restore {
            // Read once: the first sweep may have read it already.
            pending.load();
            let loaded = pending.state.take().unwrap_or_else(|| super::persist::SaState::load(&pending.path));
            super::persist::restore_logged(&self.sa, &pending.path, loaded);
        }
        let (reports, changed) = self.sa.publish(db);
        send_reports(self.responder.as_ref(), &reports);
        if changed {
            signal(&self.mcast_tx);
        }
    }

    /// Reads the registrations saved in `path` (OpenSM's `sa_db_file`)
    /// into the SA at the first [`Self::publish`]: when this SM first
    /// sweeps as master, as OpenSM does — at start, or when a standby
    /// takes over from a master that kept the same file, so the new master
    /// has every group, service and subscription the old one saved. Until
    /// then the SA answers BUSY, so no query sees it without them.
    pub fn restore_at_first_publish(&self, path: std::path::PathBuf) {
        *self.restore_from.lock().unwrap_or_else(|p| p.into_inner()) = Some(PendingRestore { path, state: None });
    }

    /// The end ports the pending restore (see
    /// [`Self::restore_at_first_publish`]) has state for, read from the
    /// file now: `None` when no restore is pending, an error when the file
    /// cannot be read (then every host must re-register).
    pub fn pending_restore_ports(&self) -> Option<Result<std::collections::HashSet<u64>, String>> {
        let mut pending = self.restore_from.lock().unwrap_or_else(|p| p.into_inner());
        let pending = pending.as_mut()?;
        Some(match pending.load() {
            Ok(state) => Ok(state.known_ports()),
            // No file yet: nothing is known, as with an empty SA.
            Err(super::persist::PersistError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
            Err(e) => Err(e.to_string()),
        })
    }

    /// Takes the MFTs of a multicast plan, as programmed, for MFTRecord
    /// queries (call after every MFT programming).
    pub fn publish_mcast(&self, plan: &crate::mcast::tree::McastPlan) {
        self.sa.set_mcast(plan);
    }

    /// See [`Sa::stand_down`].
    pub fn stand_down(&self) {
        self.sa.stand_down();
    }

    /// The channel that gets `()` after multicast membership changed
    /// (changes not yet taken coalesce into one message); once, later
    /// calls give `None`.
    pub fn membership_changes(&self) -> Option<Receiver<()>> {
        self.mcast_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// The count of requests the SA thread has taken (metrics).
    pub fn requests_handled(&self) -> Arc<std::sync::atomic::AtomicU64> {
        Arc::clone(&self.requests_handled)
    }

    /// The SA state (for status displays and tests).
    pub fn sa(&self) -> &Arc<Sa> {
        &self.sa
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SaHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A restore from `sa_db_file` still to be done, with the file once read
/// (the first master sweep reads it to know whom not to ask to register
/// again; the first publish restores what it read).
struct PendingRestore {
    path: std::path::PathBuf,
    state: Option<Result<super::persist::SaState, super::persist::PersistError>>,
}

impl PendingRestore {
    fn load(&mut self) -> &Result<super::persist::SaState, super::persist::PersistError> {
        self.state.get_or_insert_with(|| super::persist::SaState::load(&self.path))
    }
}
