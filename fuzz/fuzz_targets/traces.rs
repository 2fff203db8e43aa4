//! The trace loaders behind `fairway predict` and `fairway sim` (sacct -P and --json,
//! SWF, Eagle, openb, Helios, Philly, PAI): whatever a file holds, a loader returns jobs
//! or an error, never a panic. The first byte picks the format.
#![no_main]

use fairway_trace::{load, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else { return };
    let (_, format) = Format::ALL[usize::from(which) % Format::ALL.len()];
    let _ = load(format, bytes);
});
