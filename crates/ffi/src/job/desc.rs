//! `job_desc_msg_t`: a submission or update request, read into the core's
//! `JobRequest` and written back after the `job_submit` rules.

use std::borrow::Cow;
use std::os::raw::c_char;

use fairway_core::submit::config::CpuBind;
use fairway_core::submit::{JobRequest, Warn};
use slurm_sys as sys;

use super::{bind_to_core, bind_to_slurm, opt_str, tres_to_core, tres_to_slurm};

/// A job submission or update request (`job_desc_msg_t`), as `sbatch` sent it.
pub struct JobDesc<'a>(&'a mut slurm_sys::job_desc_msg_t);

impl<'a> JobDesc<'a> {
    /// Wraps the pointer Slurm passed to `job_submit` / `job_modify`.
    ///
    /// # Safety
    /// `p` must be NULL or a valid `job_desc_msg_t` not used elsewhere during `'a`.
    pub unsafe fn from_ptr(p: *mut slurm_sys::job_desc_msg_t) -> Option<Self> {
        // SAFETY: per the contract.
        unsafe { p.as_mut() }.map(Self)
    }

    /// `--comment`.
    pub fn comment(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.comment)
    }

    /// `--job-name`.
    pub fn name(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.name)
    }

    /// `--partition`, if the user gave one.
    pub fn partition(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.partition)
    }

    /// `--qos`, if the user gave one.
    pub fn qos(&self) -> Option<Cow<'_, str>> {
        opt_str(self.0.qos)
    }

    /// The uid the job will run as.
    pub fn user_id(&self) -> u32 {
        self.0.user_id
    }
}

/// The user's default account, for a request that names no account (the key its run
/// history is kept under); looked up in slurmctld only, where the association manager is
/// (not in this crate's unit tests, which run without libslurmfull).
fn default_account(d: &sys::job_desc_msg_t) -> Option<String> {
    #[cfg(all(feature = "internal", not(test)))]
    if d.account.is_null() {
        return crate::assoc::default_account(d.user_id);
    }
    let _ = d;
    None
}

/// Reads `job_desc` into the core's view of a request, for the submission rules.
impl JobDesc<'_> {
    /// The fields the submission rules read.
    pub fn request(&self) -> JobRequest {
        let d = &*self.0;
        let s = |p: *const c_char| opt_str(p).map(Cow::into_owned);
        let v32 = |v: u32| (v != sys::NO_VAL).then_some(v);
        let v16 = |v: u16| (u32::from(v) != sys::NO_VAL16).then_some(v);
        JobRequest {
            user_id: d.user_id,
            account: s(d.account),
            default_account: default_account(d),
            name: s(d.name),
            comment: s(d.comment),
            extra: s(d.extra),
            batch: !d.script.is_null(),
            partition: s(d.partition),
            qos: s(d.qos),
            time_limit: v32(d.time_limit),
            min_nodes: v32(d.min_nodes),
            num_tasks: v32(d.num_tasks),
            ntasks_per_node: v16(d.ntasks_per_node).map(u32::from),
            tres_per_node: s(d.tres_per_node).map(tres_to_core),
            tres_per_job: s(d.tres_per_job).map(tres_to_core),
            tres_per_task: s(d.tres_per_task).map(tres_to_core),
            tres_per_socket: s(d.tres_per_socket).map(tres_to_core),
            req_switch: v32(d.req_switch),
            wait4switch: v32(d.wait4switch),
            requeue: v16(d.requeue).map(|r| r != 0),
            warn: v16(d.warn_signal).filter(|&sig| sig != 0).map(|signal| Warn {
                signal,
                lead: v16(d.warn_time).unwrap_or(0),
                batch_only: v16(d.warn_flags).is_some_and(|f| u32::from(f) & sys::KILL_JOB_BATCH != 0),
            }),
            tres_bind: s(d.tres_bind).map(bind_to_core),
            step_gpu_bind: self.env_var(GPU_BIND_ENV),
            cpu_bind: v16(d.cpu_bind_type).filter(|&b| b != 0).map(|b| match u32::from(b) {
                b if b & sys::CPU_BIND_TO_SOCKETS != 0 => CpuBind::Sockets,
                b if b & sys::CPU_BIND_TO_LDOMS != 0 => CpuBind::Ldoms,
                b if b & sys::CPU_BIND_TO_CORES != 0 => CpuBind::Cores,
                // Threads, maps, masks, none…: the user chose; treat as set.
                _ => CpuBind::None,
            }),
            admin_comment: s(d.admin_comment),
        }
    }

    /// Writes back every field in which `after` differs from `before`; returns the
    /// names of the fields written, for the log.
    pub fn apply(&mut self, before: &JobRequest, after: &JobRequest) -> Vec<&'static str> {
        let d = &mut *self.0;
        let mut changed = Vec::new();
        macro_rules! string {
            ($field:ident) => {
                string!($field, str::to_string)
            };
            ($field:ident, $to_slurm:expr) => {
                if before.$field != after.$field {
                    set_str(&mut d.$field, after.$field.as_deref().map($to_slurm).as_deref());
                    changed.push(stringify!($field));
                }
            };
        }
        macro_rules! number {
            ($field:ident, $none:expr) => {
                if before.$field != after.$field {
                    d.$field = after.$field.map_or($none, |v| v.try_into().unwrap_or($none));
                    changed.push(stringify!($field));
                }
            };
        }
        string!(partition);
        string!(qos);
        string!(tres_per_node, tres_to_slurm);
        string!(tres_per_job, tres_to_slurm);
        string!(tres_bind, bind_to_slurm);
        string!(admin_comment);
        number!(time_limit, sys::NO_VAL);
        number!(min_nodes, sys::NO_VAL);
        number!(req_switch, sys::NO_VAL);
        number!(wait4switch, sys::NO_VAL);
        if before.requeue != after.requeue {
            d.requeue = after.requeue.map_or(sys::NO_VAL16 as u16, u16::from);
            changed.push("requeue");
        }
        if before.warn != after.warn {
            if let Some(w) = &after.warn {
                d.warn_signal = w.signal;
                d.warn_time = w.lead;
                let flags = if u32::from(d.warn_flags) == sys::NO_VAL16 { 0 } else { d.warn_flags };
                d.warn_flags = if w.batch_only {
                    flags | sys::KILL_JOB_BATCH as u16
                } else {
                    flags & !(sys::KILL_JOB_BATCH as u16)
                };
            }
            changed.push("warn_signal");
        }
        if before.step_gpu_bind != after.step_gpu_bind {
            if let Some(how) = &after.step_gpu_bind {
                if self.set_env_var(GPU_BIND_ENV, how) {
                    changed.push("environment");
                }
            }
        }
        let d = &mut *self.0;
        if before.cpu_bind != after.cpu_bind {
            if let Some(b) = after.cpu_bind {
                let bits = match b {
                    CpuBind::Cores => sys::CPU_BIND_TO_CORES,
                    CpuBind::Sockets => sys::CPU_BIND_TO_SOCKETS,
                    CpuBind::Ldoms => sys::CPU_BIND_TO_LDOMS,
                    CpuBind::None => 0,
                };
                if bits != 0 {
                    d.cpu_bind_type = bits as u16;
                }
            }
            changed.push("cpu_bind_type");
        }
        changed
    }
}

/// What `srun` reads for `--gpu-bind` when not given it.
const GPU_BIND_ENV: &str = "SLURM_GPU_BIND";

/// The batch job's environment (`environment[..env_size]`, each `NAME=value`).
impl JobDesc<'_> {
    fn env(&self) -> &[*mut c_char] {
        let d = &*self.0;
        if d.environment.is_null() {
            return &[];
        }
        // SAFETY: Slurm unpacks `environment` as an xcalloc'ed array of `env_size` strings
        // (plus a NULL), alive for the callback.
        unsafe { std::slice::from_raw_parts(d.environment, d.env_size as usize) }
    }

    /// The value of `name` in the batch job's environment.
    fn env_var(&self, name: &str) -> Option<String> {
        self.env().iter().find_map(|&p| {
            let entry = opt_str(p)?;
            entry.strip_prefix(name)?.strip_prefix('=').map(str::to_string)
        })
    }

    /// Sets `name=value` in the batch job's environment, replacing an entry of that name
    /// or growing the array (with Slurm's allocator: slurmctld frees it); false when the
    /// request has no environment to set it in.
    fn set_env_var(&mut self, name: &str, value: &str) -> bool {
        let entry = format!("{name}={value}");
        let prefix = format!("{name}=");
        let at = self.env().iter().position(|&p| opt_str(p).is_some_and(|e| e.starts_with(&prefix)));
        let d = &mut *self.0;
        if let Some(i) = at {
            // SAFETY: `i < env_size`; the entry is xmalloc'ed (or NULL).
            unsafe { crate::string::replace_slurm_str(d.environment.add(i), &entry) };
            return true;
        }
        if d.environment.is_null() {
            // No environment at all (not from sbatch): leave Slurm to refuse it as it does.
            return false;
        }
        let n = d.env_size as usize;
        // SAFETY: a new array of n + 2 (NULL-terminated, as Slurm's unpacking sizes it) takes
        // the n existing pointers and the new entry; the old array, whose strings now
        // belong to the new one, is freed on its own.
        unsafe {
            let grown = crate::string::xcalloc::<*mut c_char>(n + 2, c"environment");
            std::ptr::copy_nonoverlapping(d.environment, grown, n);
            *grown.add(n) = crate::string::SlurmString::new(&entry).into_raw();
            let mut old = d.environment.cast::<std::os::raw::c_void>();
            slurm_sys::libslurmfull::slurm_xfree(&mut old);
            d.environment = grown;
        }
        d.env_size += 1;
        true
    }
}

/// Replaces a Slurm-owned `char *` field.
fn set_str(field: &mut *mut c_char, value: Option<&str>) {
    match value {
        // SAFETY: job_desc string fields are NULL or xmalloc'ed.
        Some(v) => unsafe { crate::string::replace_slurm_str(field, v) },
        None => {
            let mut p = (*field).cast::<std::os::raw::c_void>();
            // SAFETY: as above; xfree accepts NULL and the field is nulled below.
            unsafe { slurm_sys::libslurmfull::slurm_xfree(&mut p) };
            *field = std::ptr::null_mut();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;

    use slurm_sys as sys;

    use super::{JobDesc, GPU_BIND_ENV};
    #[test]
    fn a_request_reads_what_sbatch_sent() {
        let c = |s: &str| CString::new(s).unwrap();
        let (comment, part, gpus, env0, env1) = (
            c("fairway: model=7b"),
            c("gpu"),
            c(if cfg!(slurm_ge_23_02) { "gres/gpu:h100:8" } else { "gres:gpu:h100:8" }),
            c("PATH=/bin"),
            c(&format!("{GPU_BIND_ENV}=closest")),
        );
        let mut env = [env0.as_ptr().cast_mut(), env1.as_ptr().cast_mut(), std::ptr::null_mut()];
        let mut d = sys::job_desc_msg_t {
            user_id: 1000,
            comment: comment.as_ptr().cast_mut(),
            partition: part.as_ptr().cast_mut(),
            tres_per_node: gpus.as_ptr().cast_mut(),
            environment: env.as_mut_ptr(),
            env_size: 2,
            time_limit: sys::NO_VAL,
            min_nodes: 2,
            num_tasks: sys::NO_VAL,
            ntasks_per_node: sys::NO_VAL16 as u16,
            req_switch: sys::NO_VAL,
            wait4switch: sys::NO_VAL,
            requeue: 1,
            warn_signal: 10,
            warn_time: 60,
            warn_flags: sys::KILL_JOB_BATCH as u16,
            cpu_bind_type: 0,
            ..Default::default()
        };
        // SAFETY: `d` and the strings it points to outlive `job`.
        let job = unsafe { JobDesc::from_ptr(&mut d) }.unwrap();
        let r = job.request();
        assert_eq!(r.user_id, 1000);
        assert_eq!(r.comment.as_deref(), Some("fairway: model=7b"));
        assert_eq!(r.partition.as_deref(), Some("gpu"));
        assert_eq!(r.tres_per_node.as_deref(), Some("gres:gpu:h100:8"));
        assert_eq!((r.account, r.qos, r.tres_per_job), (None, None, None));
        assert!(!r.batch, "no script");
        assert_eq!((r.time_limit, r.min_nodes, r.num_tasks, r.ntasks_per_node), (None, Some(2), None, None));
        assert_eq!(r.requeue, Some(true));
        let w = r.warn.expect("warn signal");
        assert_eq!((w.signal, w.lead, w.batch_only), (10, 60, true));
        assert_eq!(r.step_gpu_bind.as_deref(), Some("closest"));
        assert_eq!(r.cpu_bind, None);
        assert_eq!(job.comment().as_deref(), Some("fairway: model=7b"));
        assert_eq!(job.user_id(), 1000);
        // SAFETY: NULL is allowed.
        assert!(unsafe { JobDesc::from_ptr(std::ptr::null_mut()) }.is_none());
    }
}
