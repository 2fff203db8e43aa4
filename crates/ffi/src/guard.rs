//! The panic guard around every exported function.
//!
//! A panic must never unwind into Slurm: that is undefined behaviour and, at best,
//! kills `slurmctld`. [`guard`] runs the body under `catch_unwind`; on a panic it logs
//! the message and location through Slurm's log and returns the caller's fallback
//! (`SLURM_ERROR` for functions that return a code).

use std::any::Any;
use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Where the last panic on this thread happened, recorded by the hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Replaces the default hook (which writes to stderr, often /dev/null in a daemon)
/// with one that records the location for [`guard`] to log.
fn install_hook() {
    HOOK.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let at = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_else(|| "unknown location".into());
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(at));
        }));
    });
}

fn payload_text(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

/// Runs `body`; if it panics, logs `what` with the panic's message and location and
/// returns `on_panic` instead.
///
/// `what` names the Slurm entry point (`job_submit`, `priority_p_set`), so the log line
/// tells an admin which call failed.
pub fn guard<R>(what: &'static str, on_panic: R, body: impl FnOnce() -> R) -> R {
    install_hook();
    match run_guarded(body) {
        Ok(r) => r,
        Err(payload) => {
            let at = LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_default();
            crate::log::error_now(&format!(
                "{what}: internal error (panic: {} at {at}); the call returns an error and the daemon continues",
                payload_text(payload.as_ref())
            ));
            on_panic
        }
    }
}

// Kept out of line so the unwinding frame is gone before the error is reported.
#[inline(never)]
fn run_guarded<R>(body: impl FnOnce() -> R) -> Result<R, Box<dyn Any + Send>> {
    panic::catch_unwind(AssertUnwindSafe(body))
}

#[cfg(test)]
mod tests {
    use super::{guard, payload_text};

    #[test]
    fn returns_the_body_value() {
        assert_eq!(guard("t_ok", -1, || 7), 7);
    }

    #[test]
    fn a_panic_returns_the_fallback_and_is_logged() {
        let r = guard("t_panics", -1, || -> i32 { panic!("boom {}", 42) });
        assert_eq!(r, -1);
        // Still here: nothing unwound past the guard. The log says which entry point,
        // the message and where.
        let lines = crate::test_log::LINES.lock().unwrap();
        let (level, line) = lines.iter().find(|(_, l)| l.contains("t_panics")).expect("panic logged");
        assert_eq!(*level, slurm_sys::libslurmfull::log_level::ERROR);
        assert!(line.contains("panic: boom 42 at "), "{line}");
        assert!(line.contains("guard.rs:"), "{line}");
        assert!(line.starts_with("fairway: "), "{line}");
    }

    #[test]
    fn nested_guards_contain_the_inner_panic() {
        let r = guard("t_outer", 0, || guard("t_inner", 1, || -> i32 { panic!("inner") }) + 10);
        assert_eq!(r, 11);
    }

    #[test]
    fn non_string_payloads_are_named() {
        assert_eq!(payload_text(&"s"), "s");
        assert_eq!(payload_text(&String::from("owned")), "owned");
        assert_eq!(payload_text(&17u8), "non-string panic payload");
        assert_eq!(guard("t_any", 3, || -> i32 { std::panic::panic_any(5u32) }), 3);
    }
}
