//! Stamps `fairway --version` with the git commit and the Slurm release whose headers
//! were installed at build time (the release the packages built beside it are for).
//! Neither is required: a tarball build without git or Slurm says so.

use std::path::Path;
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    println!("cargo:rerun-if-env-changed=FAIRWAY_GIT_HASH");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    for f in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if root.join(f).exists() {
            println!("cargo:rerun-if-changed={}", root.join(f).display());
        }
    }
    let git = std::env::var("FAIRWAY_GIT_HASH").ok().or_else(|| {
        let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(&root).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    });
    let inc = std::env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let header = Path::new(&inc).join("slurm/slurm_version.h");
    if header.exists() {
        println!("cargo:rerun-if-changed={}", header.display());
    }
    // slurm_version.h: `#define SLURM_VERSION_NUMBER 0x160508` (0xMMmmuu).
    let slurm = std::fs::read_to_string(&header).ok().and_then(|t| {
        let hex = t.lines().find_map(|l| l.strip_prefix("#define SLURM_VERSION_NUMBER"))?.trim();
        let n = u32::from_str_radix(hex.trim_start_matches("0x"), 16).ok()?;
        Some(format!("{}.{:02}.{}", n >> 16 & 0xff, n >> 8 & 0xff, n & 0xff))
    });
    println!(
        "cargo:rustc-env=FAIRWAY_BUILD_INFO={} (git {}, for Slurm {})",
        env!("CARGO_PKG_VERSION"),
        git.as_deref().unwrap_or("unknown"),
        slurm.as_deref().unwrap_or("none: built without Slurm headers"),
    );
}
