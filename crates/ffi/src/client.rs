//! Slurm's client API, for Fairway's tools (benchmarks) that link libslurm themselves.
//! Plugins never use it: it exists only with the `client` feature.

use std::ffi::{CStr, CString};

use slurm_sys as sys;

/// A batch job to submit.
#[derive(Debug, Clone)]
pub struct BatchJob {
    /// `--job-name`.
    pub name: String,
    /// The batch script.
    pub script: String,
    /// `--mincpus`.
    pub min_cpus: u32,
    /// `--time`, minutes.
    pub time_limit_min: u32,
    /// `--comment` (e.g. a Fairway directive).
    pub comment: Option<String>,
    /// `tres_per_node`, as `--gres=gpu:h100:1` sends it (`gres:gpu:h100:1`).
    pub tres_per_node: Option<String>,
    /// `--partition`.
    pub partition: Option<String>,
}

/// Submits jobs as the calling user, through `slurm_submit_batch_job`. Returns how
/// many were accepted, or Slurm's error if the first one was refused.
pub fn submit_batch(jobs: impl IntoIterator<Item = BatchJob>) -> Result<u32, String> {
    let cstr = |s: &str| CString::new(s).map_err(|e| e.to_string());
    let (out, dir, env0) = (cstr("/dev/null")?, cstr("/tmp")?, cstr("PATH=/usr/bin:/bin")?);
    let mut env = [env0.as_ptr().cast_mut(), std::ptr::null_mut()];
    let mut ok = 0;
    // SAFETY: the client API as slurm.h documents it: initialise once, fill a descriptor
    // initialised by slurm_init_job_desc_msg (the strings outlive the call), free each
    // response with its destructor.
    unsafe {
        sys::slurm_init(std::ptr::null());
        for job in jobs {
            let (name, script) = (cstr(&job.name)?, cstr(&job.script)?);
            let comment = job.comment.as_deref().map(cstr).transpose()?;
            let tres = job.tres_per_node.as_deref().map(cstr).transpose()?;
            let partition = job.partition.as_deref().map(cstr).transpose()?;
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
            d.min_cpus = job.min_cpus;
            d.time_limit = job.time_limit_min;
            if let Some(c) = &comment {
                d.comment = c.as_ptr().cast_mut();
            }
            if let Some(t) = &tres {
                d.tres_per_node = t.as_ptr().cast_mut();
            }
            if let Some(p) = &partition {
                d.partition = p.as_ptr().cast_mut();
            }
            let mut resp = std::ptr::null_mut();
            if sys::slurm_submit_batch_job(&mut d, &mut resp) == 0 {
                ok += 1;
                sys::slurm_free_submit_response_response_msg(resp);
            } else if ok == 0 {
                return Err(CStr::from_ptr(sys::slurm_strerror(sys::slurm_get_errno())).to_string_lossy().into_owned());
            }
        }
    }
    Ok(ok)
}
