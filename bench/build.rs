//! The submitter links the installed libslurm (clients may; plugins must not).
fn main() {
    println!("cargo:rustc-link-lib=dylib=slurm");
}
