//! Generates bindings against the Slurm installed on this machine.
//!
//! Public headers come from `SLURM_INCLUDE_DIR` (default `/usr/include`). With the
//! `internal` feature, internal headers come from a configured source tree of the SAME
//! version (`SLURM_SRC_DIR`, default `.cache/slurm-src/<version>/tree` made by
//! `scripts/slurm-src.sh`). The version is emitted as cfgs (`slurm_ge_23_02`, ...) and
//! as `DEP_SLURM_*` metadata so dependent build scripts emit the same cfgs.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// Versions at which the plugin ABI changed (reference notes, §9).
const API_STEPS: &[(u32, u32)] = &[(23, 2), (23, 11), (24, 5), (24, 11), (25, 5), (25, 11)];

fn version_number(header: &Path) -> u32 {
    let text = fs::read_to_string(header).unwrap_or_else(|e| {
        panic!(
            "slurm-sys: cannot read {}: {e}\n  install libslurm-dev (scripts/build-deps.sh) or set SLURM_INCLUDE_DIR",
            header.display()
        )
    });
    text.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("#define SLURM_VERSION_NUMBER")?;
            u32::from_str_radix(rest.trim().trim_start_matches("0x"), 16).ok()
        })
        .unwrap_or_else(|| panic!("slurm-sys: no SLURM_VERSION_NUMBER in {}", header.display()))
}

/// Gives macros their C types where bindgen would guess: `NO_VAL64` and friends are
/// 64-bit unsigned, not `int` (clang evaluates `(0xffff...fe)` for the fallback).
#[derive(Debug)]
struct MacroTypes;

impl bindgen::callbacks::ParseCallbacks for MacroTypes {
    fn int_macro(&self, name: &str, _value: i64) -> Option<bindgen::callbacks::IntKind> {
        use bindgen::callbacks::IntKind;
        if name.ends_with("VAL64") || name == "INFINITE64" {
            Some(IntKind::U64)
        } else if name == "NO_VAL" || name == "INFINITE" || name == "NICE_OFFSET" {
            Some(IntKind::U32)
        } else {
            None
        }
    }
}

fn dotted(v: u32) -> String {
    format!("{}.{:02}.{}", v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff)
}

fn main() {
    for var in ["SLURM_INCLUDE_DIR", "SLURM_SRC_DIR", "LIBCLANG_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=wrapper.h");

    let inc = PathBuf::from(env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into()));
    let version_h = inc.join("slurm/slurm_version.h");
    println!("cargo:rerun-if-changed={}", version_h.display());
    let ver = version_number(&version_h);
    let (major, minor) = (ver >> 16 & 0xff, ver >> 8 & 0xff);

    let mut cfgs = Vec::new();
    for &(maj, min) in API_STEPS {
        let name = format!("slurm_ge_{maj}_{min:02}");
        println!("cargo::rustc-check-cfg=cfg({name})");
        if (major, minor) >= (maj, min) {
            println!("cargo:rustc-cfg={name}");
            cfgs.push(name);
        }
    }
    // Read by dependents' build scripts as DEP_SLURM_VERSION_NUMBER / _VERSION / _CFGS.
    println!("cargo:version_number={ver}");
    println!("cargo:version={}", dotted(ver));
    println!("cargo:cfgs={}", cfgs.join(","));
    println!("cargo:rustc-env=SLURM_SYS_VERSION={}", dotted(ver));

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_arg(format!("-I{}", inc.display()))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .parse_callbacks(Box::new(MacroTypes))
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(true)
        // Evaluates macros such as `#define PRIORITY_FLAGS_FAIR_TREE SLURM_BIT(5)`.
        .clang_macro_fallback()
        .allowlist_type("job_desc_msg_t|slurm_conf_t|slurmdb_assoc_rec_t|slurmdb_qos_rec_t")
        .allowlist_type("priority_factors_object_t|slurm_err_t")
        .allowlist_var("slurm_conf|NO_VAL|NO_VAL16|NO_VAL64|INFINITE|INFINITE16|NICE_OFFSET")
        .allowlist_var("SLURM_SUCCESS|SLURM_ERROR|SLURM_VERSION_NUMBER|SLURMDB_FS_USE_PARENT")
        .allowlist_var("PRIORITY_FLAGS_.*|PRIORITY_RESET_.*|ESLURM_.*|QOS_FLAG_NO_DECAY")
        .allowlist_type("job_states")
        .allowlist_var("JOB_STATE_BASE|JOB_COMPLETING|JOB_RESIZING|JOB_POWER_UP_NODE|JOB_REVOKED|NO_CONSUME_VAL64")
        .allowlist_var("PRIVATE_DATA_JOBS|DEBUG_FLAG_PRIO|KILL_JOB_BATCH")
        .allowlist_type("cpu_bind_type")
        .allowlist_type("slurmdb_tres_rec_t|slurmdb_used_limits_t")
        // Client API, for tools that link libslurm themselves (bench/); plugins must not.
        .allowlist_function("slurm_init|slurm_init_job_desc_msg|slurm_submit_batch_job")
        .allowlist_function("slurm_free_submit_response_response_msg|slurm_get_errno|slurm_strerror");

    let internal = env::var_os("CARGO_FEATURE_INTERNAL").is_some();
    if internal {
        let src = match env::var_os("SLURM_SRC_DIR") {
            Some(d) => PathBuf::from(d),
            None => PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap())
                .join("../.cache/slurm-src")
                .join(dotted(ver))
                .join("tree"),
        };
        let src_version_h = src.join("slurm/slurm_version.h");
        if !src.join("config.h").exists() || !src_version_h.exists() {
            panic!(
                "slurm-sys: no configured Slurm {} source tree at {}\n  run scripts/slurm-src.sh (or set SLURM_SRC_DIR to a tree configured for Slurm {})",
                dotted(ver),
                src.display(),
                dotted(ver)
            );
        }
        let src_ver = version_number(&src_version_h);
        if src_ver != ver {
            panic!(
                "slurm-sys: installed headers are Slurm {} ({}) but the source tree {} is Slurm {}: internal struct layouts would not match the daemons; configure a tree of the installed version",
                dotted(ver),
                inc.display(),
                src.display(),
                dotted(src_ver)
            );
        }
        println!("cargo:rerun-if-changed={}", src.join("config.h").display());
        let interfaces = if (major, minor) >= (23, 2) { "src/interfaces" } else { "src/common" };
        let priority_h = if (major, minor) >= (23, 2) { "priority.h" } else { "slurm_priority.h" };
        let site_factor_h = format!("{interfaces}/site_factor.h");
        let mcs_h = if (major, minor) >= (23, 2) { "src/interfaces/mcs.h" } else { "src/common/slurm_mcs.h" };
        let preempt_h = if (major, minor) >= (23, 2) { "src/interfaces/preempt.h" } else { "src/slurmctld/preempt.h" };
        let internal_h = format!(
            "#include \"config.h\"\n#include \"src/slurmctld/slurmctld.h\"\n#include \"src/slurmctld/locks.h\"\n\
             #include \"src/common/assoc_mgr.h\"\n#include \"src/common/read_config.h\"\n#include \"{interfaces}/{priority_h}\"\n\
             #include \"{site_factor_h}\"\n#include \"{mcs_h}\"\n\
             #include \"src/common/slurm_protocol_api.h\"\n#include \"src/slurmctld/job_scheduler.h\"\n\
             #include \"{preempt_h}\"\n#include \"{interfaces}/gres.h\"\n#include \"{interfaces}/gpu.h\"\n"
        );
        // A real file (not header_contents) so clang's macro fallback sees its macros.
        // Rewritten only when it changes: bindgen makes it a rerun-if-changed input, and a
        // fresh mtime on every run would rebuild slurm-sys and every plugin each time.
        let internal_path = PathBuf::from(env::var("OUT_DIR").unwrap()).join("fairway_internal.h");
        if fs::read_to_string(&internal_path).ok().as_deref() != Some(internal_h.as_str()) {
            fs::write(&internal_path, internal_h).expect("slurm-sys: cannot write fairway_internal.h");
        }
        builder = builder
            .header(internal_path.display().to_string())
            .clang_arg(format!("-I{}", src.display()))
            .clang_arg(format!("-I{}/src/common", src.display()))
            .allowlist_type("job_record_t|job_details|part_record_t|slurmctld_lock_t|lock_level_t")
            .allowlist_type("assoc_mgr_lock_t|priority_factors_request_msg_t|priority_factors_t|priority_mult_t")
            .allowlist_var("assoc_mgr_root_assoc|assoc_mgr_assoc_list|assoc_mgr_qos_list|g_user_assoc_count")
            .allowlist_var("assoc_mgr_user_list")
            .allowlist_var("READ_LOCK|WRITE_LOCK|NO_LOCK|TRES_ARRAY_.*|ACCOUNTING_ENFORCE_LIMITS")
            // libslurmfull functions (present in every Slurm process, so safe to link
            // directly); slurmctld-only ones are looked up at run time instead.
            .allowlist_function("assoc_mgr_lock|assoc_mgr_unlock|slurm_with_slurmdbd|dump_assoc_mgr_state")
            .allowlist_function("assoc_mgr_normalize_assoc_shares|slurmdb_destroy_assoc_usage")
            .allowlist_function("site_factor_plugin_init|site_factor_plugin_fini|site_factor_g_.*")
            .allowlist_function("list_for_each_ro|list_count|list_create|list_append|list_destroy")
            .allowlist_function("slurm_copy_priority_factors_object|slurm_destroy_priority_factors_object")
            .allowlist_function("slurm_copy_priority_factors|slurm_destroy_priority_factors|xsize")
            .allowlist_function("assoc_mgr_is_user_acct_coord|slurm_mcs_get_privatedata|assoc_mgr_fill_in_user")
            .allowlist_function("assoc_mgr_find_tres_pos|slurm_get_tres_weight_array|list_sort|priority_sort_part_tier")
            // preempt/fairway
            .allowlist_type("job_queue_rec_t|slurm_preempt_data_type_t")
            .allowlist_function("bit_test|slurm_bit_test")
            .allowlist_var("PREEMPT_MODE_.*")
            // gpu/nvml (slurmd): the GPUs found, handed to gres/gpu
            .allowlist_type("node_config_load_t|gres_slurmd_conf_t|gpu_status_t")
            .allowlist_function("add_gres_to_list|destroy_gres_slurmd_conf")
            .allowlist_var("GRES_CONF_ENV_NVML")
    }

    let bindings =
        builder.generate().unwrap_or_else(|e| panic!("slurm-sys: bindgen failed over {}: {e}", inc.display()));
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(&out).expect("slurm-sys: cannot write bindings");
}
