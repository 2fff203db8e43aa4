//! What the decay thread keeps between passes and across restarts: when the last pass
//! ran and the last usage reset happened (`StateSaveLocation/fairway_priority_last_decay`,
//! `"<last pass> <last reset>\n"`), and whether usage was added since assoc_mgr's state
//! was last saved.

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

/// (last pass, last usage reset) from the state file; zeros if there is none.
pub(crate) fn read_state() -> (i64, i64) {
    let Some(path) = state_file() else { return (0, 0) };
    match std::fs::read_to_string(&path) {
        Ok(s) => match parse_state(&s) {
            Some(v) => v,
            None => {
                tracing::error!("{}: unreadable, starting decay afresh", path.display());
                (0, 0)
            }
        },
        Err(_) => {
            tracing::info!("no last decay ({}) to recover", path.display());
            (0, 0)
        }
    }
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
    let Some(path) = state_file() else { return };
    if let Err(e) = fairway_core::state_file::write_atomic(&path, format!("{last_ran} {last_reset}\n").as_bytes()) {
        tracing::error!("cannot save {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::parse_state;

    #[test]
    fn parses_both_forms_and_refuses_garbage() {
        assert_eq!(parse_state("1700000000 1690000000\n"), Some((1_700_000_000, 1_690_000_000)));
        assert_eq!(parse_state("1700000000\n"), Some((1_700_000_000, 0)));
        assert_eq!(parse_state(""), None);
        assert_eq!(parse_state("soon 12"), None);
        assert_eq!(parse_state("12 later"), None);
    }
}
