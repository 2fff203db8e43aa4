//! The NVML calls `nvml-wrapper` does not wrap, behind safe functions, so that
//! `fairway-topo-detect` needs no `unsafe` of its own.
//!
//! `nvml-wrapper` 0.13 wraps almost all of NVML, but not `nvmlDeviceGetGpuInstanceId` and
//! `nvmlDeviceGetComputeInstanceId` on a MIG device, which Slurm's `gpu/nvml` reads to name
//! an instance's capability devices (`gpu<minor>/gi<id>/access`,
//! `gpu<minor>/gi<id>/ci<id>/access`). This crate makes those two calls through the symbols
//! `nvml-wrapper` has already loaded:
//!
//! - [`gpu_instance_id`]: a MIG device's GPU instance id.
//! - [`compute_instance_id`]: a MIG device's compute instance id.
//!
//! With `fairway-ffi` (Slurm's C ABI), this is one of the two crates with hand-written
//! `unsafe` in Fairway; each block says why it holds. It is apart from `fairway-ffi` so that
//! the `fairway` command, which reads a node's topology through NVML, builds and runs
//! without Slurm: nothing here links Slurm, and nothing needs libclang or CUDA to build
//! (`nvml-wrapper` `dlopen`s `libnvidia-ml.so.1` at run time).
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

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
