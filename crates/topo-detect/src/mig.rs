//! MIG instances of a GPU, found as Slurm's `gpu/nvml` finds them (`_handle_mig`): the
//! instances NVML lists under the GPU, each with its GPU and compute instance ids, the
//! minors of their capability devices from `/proc/driver/nvidia-caps/mig-minors`, and a
//! profile `<slices>g.<GiB>gb` from the instance's attributes.

use std::collections::BTreeMap;
use std::path::Path;

use fairway_core::topology::MigInstance;
use fairway_nvml::{compute_instance_id, gpu_instance_id};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;

use crate::DetectError;

/// Where the driver lists the capability device minors of every possible instance.
pub const MIG_MINORS: &str = "/proc/driver/nvidia-caps/mig-minors";

/// `mig-minors` parsed: `gpu0/gi1/access` → 12, `gpu0/gi1/ci0/access` → 13, ….
pub fn parse_mig_minors(text: &str) -> BTreeMap<String, u32> {
    text.lines()
        .filter_map(|l| {
            let (key, minor) = l.split_once(' ')?;
            Some((key.to_string(), minor.trim().parse().ok()?))
        })
        .collect()
}

/// The profile Slurm names an instance by: GPU instance slices and memory in GiB,
/// rounded, e.g. `3g.40gb` for 3 slices and 40,192 MB.
pub fn profile_name(gpu_instance_slices: u32, memory_mb: u64) -> String {
    format!("{gpu_instance_slices}g.{}gb", (memory_mb as f64 / 1024.0).round() as u64)
}

/// `NVML_DEVICE_MIG_ENABLE` in nvml.h.
const NVML_DEVICE_MIG_ENABLE: u32 = 1;

/// Whether NVML reports the GPU in MIG mode now (a mode pending until the next reset does
/// not count, as in Slurm). GPUs without MIG say so with `NotSupported`.
pub(crate) fn is_mig(d: &Device) -> Result<bool, NvmlError> {
    match d.mig_mode() {
        Ok(m) => Ok(m.current == NVML_DEVICE_MIG_ENABLE),
        Err(NvmlError::NotSupported) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The MIG instances of GPU `index` (NVML index, `minor` its device minor), which is in
/// MIG mode. Instance indexes start at 0 and are contiguous, as Slurm assumes.
pub(crate) fn instances(
    d: &Device,
    index: u32,
    minor: u32,
    minors_file: &Path,
) -> Result<Vec<MigInstance>, DetectError> {
    let q = |what: &'static str| move |source| DetectError::Query { index, what, source };
    let max = d.mig_device_count().map_err(q("MIG device count"))?;
    let mut handles = Vec::new();
    for j in 0..max {
        match d.mig_device_by_index(j) {
            Ok(m) => handles.push(m),
            Err(NvmlError::NotFound) => break,
            Err(e) => return Err(q("MIG device handle")(e)),
        }
    }
    if handles.is_empty() {
        return Err(DetectError::MigWithoutInstances(index));
    }
    let text = std::fs::read_to_string(minors_file)
        .map_err(|source| DetectError::MigMinors { path: minors_file.to_path_buf(), source })?;
    let minors = parse_mig_minors(&text);
    let mut out = Vec::with_capacity(handles.len());
    for m in &handles {
        let gi = gpu_instance_id(m).map_err(q("MIG GPU instance id"))?;
        let ci = compute_instance_id(m).map_err(q("MIG compute instance id"))?;
        let lookup = |key: String| {
            minors
                .get(&key)
                .copied()
                .ok_or_else(|| DetectError::MigMinorMissing { path: minors_file.to_path_buf(), key })
        };
        let attrs = m.attributes().map_err(q("MIG attributes"))?;
        out.push(MigInstance {
            profile: profile_name(attrs.gpu_instance_slice_count, attrs.memory_size_mb),
            uuid: m.uuid().map_err(q("MIG UUID"))?,
            gi_cap_minor: lookup(format!("gpu{minor}/gi{gi}/access"))?,
            ci_cap_minor: lookup(format!("gpu{minor}/gi{gi}/ci{ci}/access"))?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_minors_as_the_driver_lists_them() {
        let m =
            parse_mig_minors("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\ngpu1/gi2/ci0/access 31\n");
        assert_eq!(m["gpu0/gi0/access"], 3);
        assert_eq!(m["gpu0/gi0/ci0/access"], 4);
        assert_eq!(m["gpu1/gi2/ci0/access"], 31);
        assert_eq!(m["config"], 1);
    }

    #[test]
    fn profiles_as_slurm_names_them() {
        // MB / 1024 rounded to the nearest GiB (roundl in Slurm), not up.
        assert_eq!(profile_name(1, 10240), "1g.10gb");
        assert_eq!(profile_name(3, 40192), "3g.39gb");
        assert_eq!(profile_name(3, 40448), "3g.40gb");
        assert_eq!(profile_name(7, 0), "7g.0gb");
    }
}
