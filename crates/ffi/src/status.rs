//! Publishing `priority/fairway`'s status after each decay pass
//! ([`fairway_core::status`]), as `StateSaveLocation/fairway-status.json`.
//!
//! The decay thread hands the pass's jobs over and goes on: a thread of the publisher's
//! own builds the status, serializes and writes it (temp, fsync, rename), so the pass,
//! which holds slurmctld's locks, pays only for noting each job's terms
//! ([`crate::publish`]). A status is dropped only if two are already waiting, which takes
//! writes slower than a calc period. The thread is joined at `fini`, before slurmctld
//! unloads the plugin. The file is 0644, or
//! 0600 under `PrivateData=jobs` (then only slurmctld's user and root see the terms, as
//! only they see every job in sprio).

use std::time::Instant;

use fairway_core::status::{Status, FILE_NAME};

use crate::publish::Publisher;

/// A status to build on the publisher's thread.
pub type Pending = Box<dyn FnOnce() -> Status + Send>;

/// The thread that writes the status ([`Publisher`]), in slurmctld.
pub fn publisher() -> Publisher {
    Publisher::start("fairway_status")
}

/// Hands a pass's status, to be built and written, to `publisher`'s thread.
pub fn publish(publisher: &Publisher, status: Pending) {
    publisher.run(Box::new(move || write(&status())));
}

fn write(status: &Status) {
    let start = Instant::now();
    let mode = if crate::conf::private_jobs() { 0o600 } else { 0o644 };
    if crate::publish::write_file(FILE_NAME, &status.to_json(), mode) {
        tracing::debug!(
            "wrote {FILE_NAME} ({} jobs) in {:.1} ms",
            status.jobs.len(),
            start.elapsed().as_secs_f64() * 1e3
        );
    }
}
