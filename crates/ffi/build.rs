//! Re-emits slurm-sys's version cfgs for this crate and compiles the C shim that
//! carries `long double` arguments, which stable Rust cannot declare.

use std::env;

fn main() {
    for name in
        ["slurm_ge_23_02", "slurm_ge_23_11", "slurm_ge_24_05", "slurm_ge_24_11", "slurm_ge_25_05", "slurm_ge_25_11"]
    {
        println!("cargo::rustc-check-cfg=cfg({name})");
    }
    let cfgs = env::var("DEP_SLURM_CFGS").expect("slurm-sys must export its cfgs");
    for cfg in cfgs.split(',').filter(|c| !c.is_empty()) {
        println!("cargo:rustc-cfg={cfg}");
    }
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    cc::Build::new().file("csrc/long_double.c").flag("-fvisibility=hidden").compile("fairway_long_double");
}
