//! The GPU list slurmd's gres/gpu plugin asks a gpu plugin for (`gpu_p_get_system_gpu_list`),
//! built with Slurm's own `add_gres_to_list` so every field is set as `gpu/nvml` sets it.

use std::ffi::CString;

use fairway_core::topology::GresGpu;
use slurm_sys as sys;

use crate::list::SlurmList;

/// A new Slurm list of `gres_slurmd_conf_t`, one record per GPU, or NULL when there are
/// none (what `gpu/generic` returns: gres.conf alone then describes the GPUs).
///
/// # Safety
/// `node_config` is the pointer slurmd passed to `gpu_p_get_system_gpu_list`.
pub unsafe fn system_gpu_list(node_config: *mut sys::node_config_load_t, gpus: &[GresGpu]) -> SlurmList {
    // SAFETY: slurmd's node_config, live for the call.
    let Some(node) = (unsafe { node_config.as_ref() }) else {
        tracing::error!("gpu_p_get_system_gpu_list: no node configuration given");
        return std::ptr::null_mut();
    };
    if gpus.is_empty() {
        return std::ptr::null_mut();
    }
    let c = |s: &str| CString::new(s).unwrap_or_default();
    // SAFETY: the list owns its records and frees them with Slurm's destructor.
    let list = unsafe { sys::list_create(Some(sys::destroy_gres_slurmd_conf)) };
    let name = c("gpu");
    for g in gpus {
        let (cores, file, ty, links) = (c(&g.cores), c(&g.file), c(&g.type_name), c(&g.links));
        let unique_id = g.unique_id.as_deref().map(c);
        let unique_id_ptr = unique_id.as_ref().map_or(std::ptr::null_mut(), |u| u.as_ptr().cast_mut());
        // SAFETY (both versions): add_gres_to_list copies every string (xstrdup); no CPU
        // bitmap is given (machine CPU ids are NVML's to know; Cores are abstract ids).
        #[cfg(not(slurm_ge_23_02))]
        unsafe {
            sys::add_gres_to_list(
                list,
                name.as_ptr().cast_mut(),
                1,
                node.cpu_cnt as i32,
                cores.as_ptr().cast_mut(),
                std::ptr::null_mut(),
                file.as_ptr().cast_mut(),
                ty.as_ptr().cast_mut(),
                links.as_ptr().cast_mut(),
                unique_id_ptr,
                sys::GRES_CONF_ENV_NVML,
            )
        };
        // 23.02+: the same fields in a template record.
        #[cfg(slurm_ge_23_02)]
        unsafe {
            // SAFETY: a plain C struct of integers and pointers; all-zero is its empty value.
            let mut rec: sys::gres_slurmd_conf_t = std::mem::zeroed();
            rec.config_flags = sys::GRES_CONF_ENV_NVML;
            rec.count = 1;
            rec.cpu_cnt = node.cpu_cnt;
            rec.cpus = cores.as_ptr().cast_mut();
            rec.file = file.as_ptr().cast_mut();
            rec.links = links.as_ptr().cast_mut();
            rec.name = name.as_ptr().cast_mut();
            rec.type_name = ty.as_ptr().cast_mut();
            rec.unique_id = unique_id_ptr;
            sys::add_gres_to_list(list, &mut rec);
        }
    }
    list
}

/// This node's name as slurmd knows it by default: the short host name.
pub fn node_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    host.trim().split('.').next().unwrap_or_default().to_string()
}
