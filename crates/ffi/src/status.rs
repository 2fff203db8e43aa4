//! Publishing `priority/fairway`'s status after each decay pass
//! ([`fairway_core::status`]), as `StateSaveLocation/fairway-status.json`.
//!
//! The decay thread hands the pass's jobs over and goes on: a thread of the publisher's
//! own builds the status, serializes and writes it (temp, fsync, rename), so the pass,
//! which holds slurmctld's locks, pays only for noting each job's terms. If a write is still
//! under way when the next pass ends, the older status is dropped for the newer. The
//! thread is joined at `fini`, before slurmctld unloads the plugin. The file is 0644, or
//! 0600 under `PrivateData=jobs` (then only slurmctld's user and root see the terms, as
//! only they see every job in sprio).

use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Instant;

use fairway_core::status::{Status, FILE_NAME};

/// The publishing thread, when started.
#[derive(Default)]
pub struct Publisher {
    running: Mutex<Option<(SyncSender<Pending>, JoinHandle<()>)>>,
}

/// A status to build on the publisher's thread.
pub type Pending = Box<dyn FnOnce() -> Status + Send>;

impl Publisher {
    /// Starts the publishing thread (in slurmctld only: sprio and sshare load the plugin
    /// too, and publish nothing).
    pub fn start() -> Self {
        let publisher = Self::default();
        if !crate::sym::in_slurmctld() {
            return publisher;
        }
        // One status in flight at most: a newer pass replaces an unwritten one.
        let (tx, rx) = mpsc::sync_channel::<Pending>(1);
        let spawned = std::thread::Builder::new().name("fairway_status".into()).spawn(move || {
            for pending in rx {
                crate::guard("status write", (), || write(&pending()));
            }
        });
        match spawned {
            Ok(handle) => *lock(&publisher.running) = Some((tx, handle)),
            Err(e) => tracing::error!("cannot start the status thread: {e}; {FILE_NAME} is not written"),
        }
        publisher
    }

    /// Hands a pass's status, to be built, to the thread.
    pub fn publish(&self, status: Pending) {
        if let Some((tx, _)) = lock(&self.running).as_ref() {
            match tx.try_send(status) {
                Ok(()) | Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => tracing::error!("the status thread has stopped"),
            }
        }
    }

    /// Stops the thread once it has written what it holds.
    pub fn stop(&self) {
        if let Some((tx, handle)) = lock(&self.running).take() {
            drop(tx);
            let _ = handle.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn write(status: &Status) {
    let Some(dir) = crate::conf::state_dir() else { return };
    let path = dir.join(FILE_NAME);
    let start = Instant::now();
    let mode = if crate::conf::private_jobs() { 0o600 } else { 0o644 };
    match fairway_core::state_file::write_atomic_mode(&path, &status.to_json(), mode) {
        Ok(()) => tracing::debug!(
            "wrote {} ({} jobs) in {:.1} ms",
            path.display(),
            status.jobs.len(),
            start.elapsed().as_secs_f64() * 1e3
        ),
        Err(e) => tracing::error!("cannot write {}: {e}", path.display()),
    }
}
