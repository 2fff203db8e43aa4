//! A node's topology file (`[gpu.topology]` in fairway.toml), read by gpu/nvml inside
//! slurmd: whatever an admin writes is either loaded or explained, and a loaded file
//! gives GRES lines for gres.conf without panicking.
#![no_main]

use std::path::Path;

use fairway_core::topology::{GresStyle, Topology};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match Topology::parse(text, Path::new("node.toml")) {
        Ok(t) => {
            let _ = t.gres_gpus(GresStyle::Fairway);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
