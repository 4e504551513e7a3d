//! A listening socket served one connection at a time on a thread of its
//! own (the control socket, the metrics endpoint): the SM's loop never
//! waits on a client. Dropping the handle stops the thread and joins it.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tracing::warn;

/// The serving thread; stopped and joined on drop.
pub struct Served {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Wakes a thread blocked in accept (a connection of our own).
    wake: Box<dyn Fn() + Send>,
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served").finish_non_exhaustive()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        (self.wake)();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs `accept` then `handle` for each connection on a thread named
/// `name` until the returned handle is dropped; `wake` unblocks `accept`.
pub fn serve<S>(
    name: &'static str,
    mut accept: impl FnMut() -> io::Result<S> + Send + 'static,
    mut handle: impl FnMut(S) + Send + 'static,
    wake: impl Fn() + Send + 'static,
) -> io::Result<Served> {
    let stop = Arc::new(AtomicBool::new(false));
    let thread = std::thread::Builder::new().name(name.into()).spawn({
        let stop = Arc::clone(&stop);
        move || loop {
            let conn = accept();
            if stop.load(Ordering::Relaxed) {
                break;
            }
            match conn {
                Ok(stream) => handle(stream),
                Err(e) => warn!("{name}: {e}"),
            }
        }
    })?;
    Ok(Served { stop, thread: Some(thread), wake: Box::new(wake) })
}
