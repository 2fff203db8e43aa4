//! Whatever an admin writes in fairway.toml is either loaded or explained: the parser
//! never panics (the plugins read this file inside slurmctld).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Err(e) = fairway_core::Config::parse(text, Path::new("fairway.toml")) {
        let _ = e.to_string();
    }
});
