//! Submits many small batch jobs through libslurm's API, far faster than running
//! `sbatch` once per job. Run it as the submitting user (the job's user is whoever
//! the munge credential says).
//!
//!     fairway-submit COUNT [CPUS_MAX]

use std::ffi::CString;
use std::os::raw::c_char;

use slurm_sys as sys;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let count: u32 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("usage: fairway-submit COUNT [CPUS_MAX]"))?;
    let cpus_max: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    let script = CString::new("#!/bin/sh\ntrue\n")?;
    let out = CString::new("/dev/null")?;
    let dir = CString::new("/tmp")?;
    let env0 = CString::new("PATH=/usr/bin:/bin")?;
    let mut env = [env0.as_ptr().cast_mut(), std::ptr::null_mut()];
    let mut ok = 0u32;
    // SAFETY: the libslurm client API used as documented in slurm.h: initialise once,
    // fill a descriptor initialised by slurm_init_job_desc_msg, free each response.
    unsafe {
        sys::slurm_init(std::ptr::null());
        for i in 0..count {
            let name = CString::new(format!("bench-{}", i % 97))?;
            let mut d: sys::job_desc_msg_t = std::mem::zeroed();
            sys::slurm_init_job_desc_msg(&mut d);
            d.name = name.as_ptr().cast_mut();
            d.script = script.as_ptr().cast_mut();
            d.std_out = out.as_ptr().cast_mut();
            d.work_dir = dir.as_ptr().cast_mut();
            d.environment = env.as_mut_ptr();
            d.env_size = 1;
            d.user_id = libc::getuid();
            d.group_id = libc::getgid();
            d.min_cpus = 1 + i % cpus_max.max(1);
            d.time_limit = 10 + i % 50;
            let mut resp = std::ptr::null_mut();
            if sys::slurm_submit_batch_job(&mut d, &mut resp) == 0 {
                ok += 1;
                sys::slurm_free_submit_response_response_msg(resp);
            } else if ok == 0 {
                let e = std::ffi::CStr::from_ptr(sys::slurm_strerror(sys::slurm_get_errno()) as *const c_char);
                anyhow::bail!("submission failed: {}", e.to_string_lossy());
            }
        }
    }
    println!("{ok}");
    Ok(())
}
