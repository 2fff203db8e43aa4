//! gpu plugins (slurmd and slurmstepd): the node's GPUs for gres/gpu (`AutoDetect=`).

use fairway_core::Config;

/// The operations of a gpu plugin (slurmd and slurmstepd).
pub trait Gpu: Sized + Send + Sync + 'static {
    /// Builds the plugin from `fairway.toml`.
    fn init(config: Config) -> Result<Self, String>;

    /// This node's GPUs, in NVML (PCI bus id) order, or none to leave them to gres.conf.
    fn system_gpus(&self) -> Vec<fairway_core::topology::GresGpu>;
}

/// Exports a gpu plugin backed by a [`Gpu`] impl: 22.05's seven `gpu_p_*` symbols, plus
/// 23.02's `gpu_p_usage_read` (24.05 dropped `gpu_p_reconfig`; exporting it is harmless).
/// Slurm loads only `gpu/nvml` for `AutoDetect=nvml`, so that is the type to give.
#[cfg(feature = "internal")]
#[macro_export]
macro_rules! gpu_plugin {
    (name: $name:literal, type: $type:literal, impl: $ty:ty) => {
        $crate::plugin_symbols!(name: $name, type: $type);

        $crate::__plugin_lifecycle!($type, $ty, $crate::plugin::Gpu);

        /// Nothing to redo: the GPUs are read once per slurmd, and a new topology (file or
        /// hardware) takes a slurmd restart, as with Slurm's own gpu/nvml.
        #[no_mangle]
        pub extern "C" fn gpu_p_reconfig() -> ::std::os::raw::c_int {
            $crate::SLURM_SUCCESS
        }

        /// The node's GPUs for gres/gpu to merge with gres.conf.
        #[no_mangle]
        pub unsafe extern "C" fn gpu_p_get_system_gpu_list(
            node_config: *mut $crate::__private::slurm_sys::node_config_load_t,
        ) -> $crate::list::SlurmList {
            $crate::guard("gpu_p_get_system_gpu_list", ::std::ptr::null_mut(), || {
                let gpus = FAIRWAY_PLUGIN.with(<$ty as $crate::plugin::Gpu>::system_gpus).unwrap_or_default();
                // SAFETY: slurmd's node_config, passed straight through.
                unsafe { $crate::gpu::system_gpu_list(node_config, &gpus) }
            })
        }

        /// GPU frequency control is not offered (as gpu/generic).
        #[no_mangle]
        pub extern "C" fn gpu_p_step_hardware_init(_usable_gpus: *mut ::std::ffi::c_void, _tres_freq: *mut ::std::os::raw::c_char) {}

        /// See `gpu_p_step_hardware_init`.
        #[no_mangle]
        pub extern "C" fn gpu_p_step_hardware_fini() {}

        /// Only gpu/nvml's own test hook uses this.
        #[no_mangle]
        pub extern "C" fn gpu_p_test_cpu_conv(_cpu_range: *mut ::std::os::raw::c_char) -> *mut ::std::os::raw::c_char {
            ::std::ptr::null_mut()
        }

        /// GPU energy is not read (as gpu/generic).
        #[no_mangle]
        pub extern "C" fn gpu_p_energy_read(_dv_ind: u32, _gpu: *mut $crate::__private::slurm_sys::gpu_status_t) -> ::std::os::raw::c_int {
            $crate::SLURM_SUCCESS
        }

        /// Per-process GPU usage for accounting is not gathered (as gpu/generic).
        #[no_mangle]
        pub extern "C" fn gpu_p_usage_read(_pid: ::std::os::raw::c_int, _data: *mut ::std::ffi::c_void) -> ::std::os::raw::c_int {
            $crate::SLURM_SUCCESS
        }

        /// How many GPUs this node has.
        #[no_mangle]
        pub unsafe extern "C" fn gpu_p_get_device_count(device_count: *mut ::std::os::raw::c_uint) {
            $crate::guard("gpu_p_get_device_count", (), || {
                let n = FAIRWAY_PLUGIN.with(|p| <$ty as $crate::plugin::Gpu>::system_gpus(p).len()).unwrap_or(0);
                // SAFETY: a pointer to the caller's counter, or NULL.
                if let Some(c) = unsafe { device_count.as_mut() } {
                    *c = n as ::std::os::raw::c_uint;
                }
            })
        }
    };
}
