//! What the decay thread keeps between passes and across restarts: when the last pass
//! ran and the last usage reset happened (`StateSaveLocation/fairway_priority_last_decay`,
//! `"<last pass> <last reset>\n"`), and whether usage was added since assoc_mgr's state
//! was last saved.
//!
//! The same two times are written to priority/multifactor's own file
//! (`priority_last_decay_ran`, two big-endian `time_t` as Slurm's `pack_time` writes
//! them), and read from it when it is the newer: usage lives in assoc_mgr's state, which
//! both plugins share, and a stale multifactor file would make multifactor decay everyone's
//! usage over the whole time Fairway ran (and re-charge running jobs for it) when a site
//! rolls back. With both files kept, either plugin takes over where the other stopped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64};

/// When the decay thread last ran (Slurm's `g_last_ran`), shared with `job_end`.
pub(crate) static LAST_RAN: AtomicI64 = AtomicI64::new(0);

/// Whether a job added usage (or a reset cleared it) since the last save of assoc_mgr's state.
pub(crate) static USAGE_ADDED: AtomicBool = AtomicBool::new(false);

/// The state file, or `None` when slurmctld has no usable StateSaveLocation.
fn state_file() -> Option<PathBuf> {
    crate::conf::state_dir().map(|d| d.join("fairway_priority_last_decay"))
}

/// priority/multifactor's last-decay file.
fn multifactor_file() -> Option<PathBuf> {
    crate::conf::state_dir().map(|d| d.join("priority_last_decay_ran"))
}

/// (last pass, last usage reset): the newer of Fairway's and multifactor's files; zeros
/// if there is neither.
pub(crate) fn read_state() -> (i64, i64) {
    let ours = state_file().and_then(|path| {
        let why = match std::fs::read_to_string(&path) {
            Ok(s) => match parse_state(&s) {
                Some(state) => return Some(state),
                None => format!("{}: not two times (last pass, last reset)", path.display()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => format!("{}: {e}", path.display()),
        };
        tracing::error!("{}; ignored", fairway_core::state_file::set_aside(&path, &why));
        None
    });
    let theirs = multifactor_file().and_then(|path| std::fs::read(path).ok()).and_then(|b| unpack_multifactor(&b));
    match (ours, theirs) {
        (Some(o), Some(t)) if t.0 > o.0 => {
            tracing::info!("priority/multifactor ran decay after Fairway did (at {}): continuing from there", t.0);
            t
        }
        (Some(o), _) => o,
        (None, Some(t)) => {
            tracing::info!("continuing decay from priority/multifactor's last pass (at {})", t.0);
            t
        }
        (None, None) => {
            tracing::info!("no last decay to recover in StateSaveLocation");
            (0, 0)
        }
    }
}

/// multifactor's file: `pack_time(last_ran)`, `pack_time(last_reset)`, each an `int64_t`
/// in network byte order.
fn unpack_multifactor(b: &[u8]) -> Option<(i64, i64)> {
    let ran = i64::from_be_bytes(b.get(0..8)?.try_into().ok()?);
    let reset = i64::from_be_bytes(b.get(8..16)?.try_into().ok()?);
    Some((ran, reset))
}

fn pack_multifactor(last_ran: i64, last_reset: i64) -> [u8; 16] {
    let mut b = [0; 16];
    b[..8].copy_from_slice(&last_ran.to_be_bytes());
    b[8..].copy_from_slice(&last_reset.to_be_bytes());
    b
}

/// The file's text as (last pass, last reset); a file of one number (older Fairway)
/// has no reset yet. `None` when unreadable.
fn parse_state(s: &str) -> Option<(i64, i64)> {
    let mut f = s.split_whitespace().map(|t| t.parse::<i64>());
    match (f.next(), f.next()) {
        (Some(Ok(ran)), Some(Ok(reset))) => Some((ran, reset)),
        (Some(Ok(ran)), None) => Some((ran, 0)),
        _ => None,
    }
}

pub(crate) fn write_state(last_ran: i64, last_reset: i64) {
    let (Some(path), Some(mf)) = (state_file(), multifactor_file()) else { return };
    let ours = format!("{last_ran} {last_reset}\n");
    for (path, bytes) in [(path, ours.as_bytes()), (mf, &pack_multifactor(last_ran, last_reset)[..])] {
        if let Err(e) = fairway_core::state_file::write_atomic(&path, bytes) {
            tracing::error!("cannot save {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{pack_multifactor, parse_state, unpack_multifactor};

    #[test]
    fn multifactor_file_is_two_big_endian_times() {
        let b = pack_multifactor(1_700_000_000, 1_690_000_000);
        // 1_700_000_000 = 0x6553_F100, as Slurm's pack_time writes it
        assert_eq!(&b[..8], &[0, 0, 0, 0, 0x65, 0x53, 0xf1, 0x00]);
        assert_eq!(unpack_multifactor(&b), Some((1_700_000_000, 1_690_000_000)));
        assert_eq!(unpack_multifactor(&b[..12]), None);
    }

    #[test]
    fn parses_both_forms_and_refuses_garbage() {
        assert_eq!(parse_state("1700000000 1690000000\n"), Some((1_700_000_000, 1_690_000_000)));
        assert_eq!(parse_state("1700000000\n"), Some((1_700_000_000, 0)));
        assert_eq!(parse_state(""), None);
        assert_eq!(parse_state("soon 12"), None);
        assert_eq!(parse_state("12 later"), None);
    }
}
