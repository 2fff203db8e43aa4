//! `tracing` into Slurm's log.
//!
//! Events become `log_var()` calls at the mapped Slurm level, so they land wherever the
//! host daemon logs (`SlurmctldLogFile`, syslog, a client's stderr) and obey its
//! `SlurmctldDebug`. Every line is prefixed with the plugin type (`priority/fairway: `),
//! as Slurm's own plugins do, and the format is always a constant `"%s"`.

use std::ffi::CString;
use std::fmt::Write as _;
use std::sync::OnceLock;

use slurm_sys::libslurmfull::{log_level, slurm_get_log_level, slurm_log_var};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

static PREFIX: OnceLock<&'static str> = OnceLock::new();

/// Routes this plugin's `tracing` events to Slurm's log, once per process.
///
/// `plugin_type` (e.g. `job_submit/fairway`) prefixes every line.
pub fn init(plugin_type: &'static str) {
    if PREFIX.set(plugin_type).is_ok() {
        // Another global subscriber can only exist if a second Rust plugin in the same
        // process got there first; each cdylib has its own copy of tracing's statics,
        // so in practice this always succeeds.
        let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(SlurmLog));
    }
}

fn slurm_level(level: &Level) -> i32 {
    match *level {
        Level::ERROR => log_level::ERROR,
        Level::WARN => log_level::INFO,
        Level::INFO => log_level::INFO,
        Level::DEBUG => log_level::DEBUG,
        Level::TRACE => log_level::DEBUG3,
    }
}

/// Writes `line` to Slurm's log at `level`, with the plugin prefix.
fn emit(level: i32, line: &str) {
    let prefix = PREFIX.get().copied().unwrap_or("fairway");
    let text = format!("{prefix}: {line}").replace('\0', "\u{2400}");
    if let Ok(c) = CString::new(text) {
        // SAFETY: constant "%s" format with one valid C string argument; log_var is
        // thread-safe (Slurm's logger takes its own lock).
        unsafe { slurm_log_var(level, c"%s".as_ptr(), c.as_ptr()) };
    }
}

/// Logs an error immediately, bypassing `tracing` (used by the panic guard, which must
/// work even if the subscriber is not installed).
pub fn error_now(line: &str) {
    emit(log_level::ERROR, line);
}

struct SlurmLog;

impl<S: Subscriber> Layer<S> for SlurmLog {
    fn enabled(&self, meta: &Metadata<'_>, _cx: Context<'_, S>) -> bool {
        // SAFETY: reads the logger's current level; no arguments.
        slurm_level(meta.level()) <= unsafe { slurm_get_log_level() }
    }

    fn on_event(&self, event: &Event<'_>, _cx: Context<'_, S>) {
        let mut v = Line::default();
        event.record(&mut v);
        emit(slurm_level(event.metadata().level()), &v.0);
    }
}

/// Renders an event as `message key=value ...`.
#[derive(Default)]
struct Line(String);

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}
