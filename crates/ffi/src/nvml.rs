//! The NVML calls `nvml-wrapper` does not wrap, behind safe functions, so that
//! `fairway-topo-detect` needs no `unsafe` of its own.

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::Device;

/// A MIG device's GPU instance id (`nvmlDeviceGetGpuInstanceId`), as Slurm's gpu/nvml
/// reads it to name the instance's capability device (`gpu<minor>/gi<id>/access`).
pub fn gpu_instance_id(mig: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_sym(mig.nvml().lib().nvmlDeviceGetGpuInstanceId.as_ref())?;
    let mut id = 0;
    // SAFETY: the handle is NVML's own (nvml-wrapper's `Device` is only made from one) and
    // the `Device` borrows the `Nvml` it came from, so NVML is still initialised; NVML
    // writes one unsigned int to `id`.
    nvml_try(unsafe { sym(mig.handle(), &mut id) })?;
    Ok(id)
}

/// A MIG device's compute instance id (`nvmlDeviceGetComputeInstanceId`).
pub fn compute_instance_id(mig: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_sym(mig.nvml().lib().nvmlDeviceGetComputeInstanceId.as_ref())?;
    let mut id = 0;
    // SAFETY: as in `gpu_instance_id`.
    nvml_try(unsafe { sym(mig.handle(), &mut id) })?;
    Ok(id)
}
