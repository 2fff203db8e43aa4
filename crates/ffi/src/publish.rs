//! A thread of a plugin's own for the files it publishes (priority/fairway's status after
//! each pass, job_submit/fairway's counters), so that the Slurm callback that has
//! something to publish, often under slurmctld's locks, only hands a closure over. One
//! write waits at most; one handed over while the queue is full is dropped, so a write
//! should read the newest state when it runs rather than carry a copy. The thread is
//! joined by [`Publisher::stop`] (or drop), at `fini`, before slurmctld unloads the
//! plugin's code.

use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// A write to run on the publisher's thread.
pub type Job = Box<dyn FnOnce() + Send>;

/// The publishing thread, when started.
#[derive(Default)]
pub struct Publisher {
    running: Mutex<Option<(SyncSender<Job>, JoinHandle<()>)>>,
}

impl Publisher {
    /// Starts a thread named `name`, in slurmctld only (sprio and sshare load the plugins
    /// too, and publish nothing); elsewhere every [`run`](Self::run) is a no-op.
    pub fn start(name: &str) -> Self {
        let publisher = Self::default();
        if !crate::sym::in_slurmctld() {
            return publisher;
        }
        let (tx, rx) = mpsc::sync_channel::<Job>(1);
        let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
            for job in rx {
                crate::guard("publishing", (), job);
            }
        });
        match spawned {
            Ok(handle) => *lock(&publisher.running) = Some((tx, handle)),
            Err(e) => tracing::error!("cannot start the {name} thread: {e}; nothing it writes is published"),
        }
        publisher
    }

    /// Hands a write to the thread.
    pub fn run(&self, job: Job) {
        if let Some((tx, _)) = lock(&self.running).as_ref() {
            match tx.try_send(job) {
                Ok(()) | Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => tracing::error!("a publishing thread has stopped"),
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

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Writes `bytes` as `StateSaveLocation/<name>` with `mode` (whole: temp, fsync, rename),
/// logging a failure; whether it was written. For the publisher's thread.
pub fn write_file(name: &str, bytes: &[u8], mode: u32) -> bool {
    let Some(dir) = crate::conf::state_dir() else { return false };
    let path = dir.join(name);
    match fairway_core::state_file::write_atomic_mode(&path, bytes, mode) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!("cannot write {}: {e}", path.display());
            false
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
