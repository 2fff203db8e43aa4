//! Where Fairway's configuration is, and reading Slurm's.
//!
//! The paths of `slurm.conf` and `StateSaveLocation` are copied once, when a plugin is
//! loaded ([`remember_paths`], again at `scontrol reconfigure`), never read from
//! `slurm_conf` by a thread of Fairway's own: `scontrol reconfigure` frees and re-reads
//! those strings without any lock that thread holds, and a NULL read mid-reconfigure
//! once sent the decay thread's state to `/dev/null`.

use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::RwLock;

use fairway_core::config::{self, Config, ConfigError};

/// The paths read from `slurm_conf` at load time (`None`: not yet read).
static PATHS: RwLock<Option<Paths>> = RwLock::new(None);

#[derive(Clone)]
struct Paths {
    slurm_conf: PathBuf,
    state_save: Option<PathBuf>,
    /// `PrivateData=jobs`.
    private_jobs: bool,
}

/// Copies `slurm.conf`'s path and `StateSaveLocation` from Slurm's configuration. Call
/// only where Slurm's configuration is stable: a plugin's `init`, and
/// `priority_p_reconfig` (after slurmctld has re-read it).
pub fn remember_paths() {
    let paths = read_paths();
    *PATHS.write().unwrap_or_else(|e| e.into_inner()) = Some(paths);
}

/// Drops the copied paths (a plugin's `fini`): the library's statics go with it when
/// Slurm unloads it, and what they pointed to would be lost, not freed.
pub fn forget_paths() {
    *PATHS.write().unwrap_or_else(|e| e.into_inner()) = None;
}

fn read_paths() -> Paths {
    // SAFETY: `slurm_conf` is libslurmfull's global, initialised before any plugin is
    // loaded; its strings are NULL or NUL-terminated. Called where no reconfigure runs.
    let (conf, state, private_data) = unsafe {
        let c = &*std::ptr::addr_of!(slurm_sys::slurm_conf);
        let s = |p: *mut std::os::raw::c_char| {
            (!p.is_null()).then(|| PathBuf::from(CStr::from_ptr(p).to_string_lossy().into_owned()))
        };
        (s(c.slurm_conf), s(c.state_save_location), u32::from(c.private_data))
    };
    Paths {
        slurm_conf: conf
            .or_else(|| std::env::var_os("SLURM_CONF").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf")),
        state_save: state.filter(|p| !p.as_os_str().is_empty()),
        private_jobs: private_data & slurm_sys::PRIVATE_DATA_JOBS != 0,
    }
}

/// Whether slurm.conf has `PrivateData=jobs`: users see only their own jobs.
pub fn private_jobs() -> bool {
    paths().private_jobs
}

fn paths() -> Paths {
    if let Some(p) = PATHS.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return p.clone();
    }
    // Not remembered yet (a client such as sshare, or a test): read now, once.
    let mut w = PATHS.write().unwrap_or_else(|e| e.into_inner());
    w.get_or_insert_with(read_paths).clone()
}

/// `slurm.conf` of this process: the path Slurm read (`slurm_conf.slurm_conf`), else
/// `$SLURM_CONF`, else Debian's default.
pub fn slurm_conf_path() -> PathBuf {
    paths().slurm_conf
}

/// `fairway.toml`: `$FAIRWAY_CONF`, else beside `slurm.conf`, else (configless Slurm,
/// where `slurm.conf` is slurmd's cache of slurmctld's) `/etc/slurm/fairway.toml`
/// ([`config::locate`]).
pub fn fairway_toml_path() -> PathBuf {
    config::locate_from_env(&slurm_conf_path())
}

/// Loads `fairway.toml`, logging where it came from. A missing file yields defaults.
pub fn load() -> Result<Config, ConfigError> {
    let path = fairway_toml_path();
    match Config::load(&path)? {
        Some(c) => {
            tracing::debug!("loaded {}", path.display());
            Ok(c)
        }
        None if crate::sym::in_slurmctld() => {
            tracing::info!("{} not found: Fairway's terms are off (defaults)", path.display());
            Ok(Config::default())
        }
        None => Ok(Config::default()),
    }
}

/// `StateSaveLocation`, where Fairway keeps its state files; `None` when slurm.conf
/// sets none or sets `/dev/null` (no state is kept then, rather than writing beside a
/// device).
pub fn state_dir() -> Option<PathBuf> {
    paths().state_save.filter(|p| p.is_dir())
}

/// `StateSaveLocation` (Slurm's default when unset), for paths that are only read.
pub fn state_save_location() -> PathBuf {
    paths().state_save.unwrap_or_else(|| PathBuf::from("/var/spool/slurmctld"))
}

/// Where the learned model's online calibration is kept (`[predictor] calibration_file`,
/// relative to `StateSaveLocation`).
pub fn calibration_path(config: &Config) -> PathBuf {
    state_save_location().join(&config.predictor.calibration_file)
}

/// `SlurmUser`'s uid.
pub fn slurm_user_id() -> u32 {
    // SAFETY: plain read of an integer field of the initialised global config.
    unsafe { (*std::ptr::addr_of!(slurm_sys::slurm_conf)).slurm_user_id }
}

/// Whether `uid` may administer jobs: root, `SlurmUser`, or a Slurm operator or
/// administrator (sacctmgr `AdminLevel=Operator|Admin`), as slurmctld's own
/// `validate_operator` decides. Outside slurmctld, and in builds without the `internal`
/// feature (public headers only), only root and SlurmUser count.
pub fn is_operator(uid: u32) -> bool {
    if uid == 0 || uid == slurm_user_id() {
        return true;
    }
    #[cfg(feature = "internal")]
    {
        // SAFETY: slurmctld's `bool validate_operator(uid_t)`, which takes assoc_mgr's
        // user read lock itself (after any slurmctld lock the caller holds, Slurm's order).
        crate::ctld::ctld().is_some_and(|c| unsafe { (c.validate_operator)(uid) })
    }
    #[cfg(not(feature = "internal"))]
    false
}

/// `PreemptMode` from slurm.conf (`PREEMPT_MODE_*` bits).
pub fn preempt_mode() -> u16 {
    // SAFETY: plain read of an integer field of the initialised global config.
    unsafe { (*std::ptr::addr_of!(slurm_sys::slurm_conf)).preempt_mode }
}

/// `FairShareDampeningFactor` from slurm.conf.
pub fn fs_dampening_factor() -> u16 {
    // SAFETY: plain read of an integer field of the initialised global config.
    unsafe { (*std::ptr::addr_of!(slurm_sys::slurm_conf)).fs_dampening_factor }
}

/// The priority settings of the loaded `slurm.conf`, for `fairway_core::check`.
pub fn slurm_priority() -> fairway_core::check::SlurmPriority {
    let text = |p: *mut std::os::raw::c_char, default: &str| {
        // SAFETY: NULL or a NUL-terminated string of the initialised config.
        if p.is_null() {
            default.to_string()
        } else {
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: plain reads of the initialised global config.
    let c = unsafe { &*std::ptr::addr_of!(slurm_sys::slurm_conf) };
    fairway_core::check::SlurmPriority {
        priority_type: text(c.priority_type, "priority/basic"),
        site_factor_plugin: text(c.site_factor_plugin, "site_factor/none"),
        accounting_storage_type: text(c.accounting_storage_type, "accounting_storage/none"),
        weight_age: c.priority_weight_age,
        weight_fairshare: c.priority_weight_fs,
        calc_period: u64::from(c.priority_calc_period),
        job_submit_plugins: text(c.job_submit_plugins, "")
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
        // Partitions and plugin files are checked by `fairway check-config`, which reads
        // slurm.conf itself (a plugin that did not load never runs this).
        ..Default::default()
    }
}

/// Logs what `fairway check-config` would say about this configuration (slurmctld).
pub fn log_findings(config: &Config) {
    for f in fairway_core::check::check(config, &slurm_priority()) {
        match f.severity {
            fairway_core::check::Severity::Error => tracing::error!("{}", f.message),
            fairway_core::check::Severity::Warning => tracing::info!("warning: {}", f.message),
        }
    }
}

#[cfg(feature = "internal")]
/// The position of `gres/gpu` in TRES arrays (negative if not configured).
pub fn gpu_tres_pos() -> i32 {
    let mut rec = slurm_sys::slurmdb_tres_rec_t {
        type_: c"gres".as_ptr().cast_mut(),
        name: c"gpu".as_ptr().cast_mut(),
        ..Default::default()
    };
    // SAFETY: a lookup by type and name; assoc_mgr takes its TRES read lock itself
    // (locked = false) and does not keep the pointers.
    unsafe { slurm_sys::assoc_mgr_find_tres_pos(&mut rec, false) }
}

#[cfg(feature = "internal")]
/// Whether `DebugFlags=Priority` is on (per-job priority logging).
pub fn debug_priority() -> bool {
    // SAFETY: plain read of the initialised global config.
    let flags = unsafe { (*std::ptr::addr_of!(slurm_sys::slurm_conf)).debug_flags };
    flags & u64::from(slurm_sys::DEBUG_FLAG_PRIO) != 0
}

/// The learned run-time model `[predictor] model` names (relative to fairway.toml's
/// directory): `Ok(None)` when unset; logged when loaded.
pub fn learned_model(config: &Config) -> Result<Option<fairway_core::predict::LearnedPredictor>, String> {
    let dir = fairway_toml_path().parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let Some(file) = config.predictor.model_file(&dir) else { return Ok(None) };
    let m = fairway_core::predict::LearnedPredictor::load(&file).map_err(|e| e.to_string())?;
    let c = &m.calibration;
    tracing::info!(
        "learned run-time model {}: quantile {}, fit on {} jobs, {:.1}% of {} calibration jobs outlived it",
        file.display(),
        c.quantile,
        c.fit_jobs,
        100.0 * c.under_rate,
        c.calibration_jobs
    );
    Ok(Some(m))
}
