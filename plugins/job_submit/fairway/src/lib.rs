//! `job_submit/fairway`: workload tiers, QoS and gang rules at submission.
//!
//! A thin shell over [`fairway_core::submit`]: each `sbatch`/`salloc`/`srun` request is
//! translated into a [`JobRequest`], the rules decide, and the fields they changed are
//! written back; notes reach the user as `sbatch: fairway: …` lines. `scontrol update`
//! is checked against the same rules (operators excepted).
//!
//! `fairway.toml` is re-read when its modification time changes, like
//! `job_submit/lua` re-reads its script: saving the file takes effect at the first
//! submission once it has been left alone for a second (a file still being written is
//! never read half), and a file that no longer parses is logged and ignored in favour of
//! the last good one. The same holds for `slurm.conf`'s
//! partitions and the runtime predictor's history, which the priority plugin writes.
//!
//! `time=auto` limits come from the learned model's upper quantile with its offsets as
//! calibrated online: priority/fairway (or site_factor/fairway) learns from each job that
//! ends and saves the calibration in `StateSaveLocation` (`fairway_ffi::calibration`); this
//! plugin re-reads that file when it changes. A file that does not load, or belongs to
//! another model, is logged and the model's own offsets are used.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fairway_core::predict::{JobRequest as PredictionRequest, LearnedPredictor, OnlineCalibration, RuntimePredictor};
use fairway_core::submit::counters::{self, Counters};
use fairway_core::submit::partitions::Partitions;
use fairway_core::submit::{self, JobRequest, Mode, Site};
use fairway_core::Config;
use fairway_ffi::job::JobDesc;
use fairway_ffi::plugin::{JobSubmit, Verdict};
use fairway_ffi::publish::{self, Publisher};

/// How long an admin-edited file must be left alone before it is re-read.
const AT_REST: Duration = Duration::from_secs(1);

/// A file re-read when its modification time changes.
struct Watched<T> {
    path: PathBuf,
    mtime: Option<SystemTime>,
    value: Arc<T>,
    /// Re-read only once the file has been at rest for [`AT_REST`]: set for files people
    /// edit in place, not for those the plugins replace whole (rename).
    settle: bool,
}

impl<T> Watched<T> {
    fn new(path: PathBuf, value: T) -> Self {
        let mtime = mtime(&path);
        Self { path, mtime, value: Arc::new(value), settle: false }
    }

    /// A file admins edit in place (fairway.toml, slurm.conf). An editor or a script
    /// writing it line by line leaves a half file for a while, which may well parse:
    /// read then, every rule in its missing half would be off for that submission.
    fn edited(path: PathBuf, value: T) -> Self {
        Self { settle: true, ..Self::new(path, value) }
    }

    /// The current value, reloading first if the file changed. A failed reload keeps
    /// the last good value (and is not retried until the file changes again).
    fn get<E: std::fmt::Display>(&mut self, load: impl FnOnce(&Path) -> Result<T, E>) -> Arc<T> {
        self.get_logged(load, true)
    }

    /// As [`get`](Self::get); `announce`: log each reload (files that change at every
    /// job end would fill the log).
    fn get_logged<E: std::fmt::Display>(&mut self, load: impl FnOnce(&Path) -> Result<T, E>, announce: bool) -> Arc<T> {
        let now = mtime(&self.path);
        if now != self.mtime {
            // Still being written: the last good value, and read again next time. (An
            // mtime in the future, from a skewed file server, counts as at rest.)
            if self.settle && now.is_some_and(|t| SystemTime::now().duration_since(t).is_ok_and(|age| age < AT_REST)) {
                return self.value.clone();
            }
            let loaded = load(&self.path);
            if mtime(&self.path) != now {
                // Written while we read it: keep the last good value, read again next time.
                return self.value.clone();
            }
            self.mtime = now;
            match loaded {
                Ok(v) => {
                    if announce {
                        tracing::info!("reloaded {}", self.path.display());
                    } else {
                        tracing::debug!("reloaded {}", self.path.display());
                    }
                    self.value = Arc::new(v);
                }
                Err(e) => tracing::error!("{e}; keeping the last good {}", self.path.display()),
            }
        }
        self.value.clone()
    }
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// What the rules read, each reloaded on change.
struct Inputs {
    config: Watched<Config>,
    partitions: Watched<Partitions>,
    predictor: Watched<RuntimePredictor>,
    /// `[predictor] model` as last configured, and the model, if it loaded.
    model_file: Option<PathBuf>,
    model: Option<Watched<LearnedPredictor>>,
    /// The model's online calibration, as slurmctld's priority plugin last saved it.
    calibration: Watched<Option<OnlineCalibration>>,
}

impl Inputs {
    /// The learned model, (re)loaded when fairway.toml names another file or the file
    /// changes; a model that does not load is not retried until either happens.
    fn model(&mut self, config: &Config) -> Option<Arc<LearnedPredictor>> {
        let dir = self.config.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let file = config.predictor.model_file(&dir);
        if file != self.model_file {
            self.model_file.clone_from(&file);
            self.model = match fairway_ffi::conf::learned_model(config) {
                Ok(m) => file.zip(m).map(|(f, m)| Watched::new(f, m)),
                Err(e) => {
                    tracing::error!("{e}; time=auto uses the mean of the last two runs instead");
                    None
                }
            };
        }
        let load = |p: &Path| LearnedPredictor::load(p).map_err(|e| e.to_string());
        self.model.as_mut().map(|w| w.get(load))
    }
}

/// The plugin's state for the life of `slurmctld`.
pub struct FairwayJobSubmit {
    inputs: Mutex<Inputs>,
    /// Decisions since load, published for `fairway metrics` by `publisher`'s thread
    /// (joined when `fini` drops the plugin).
    counters: Arc<Mutex<Counters>>,
    publisher: Publisher,
}

impl FairwayJobSubmit {
    /// Counts a decision and has the counters written, off the submission's path (it
    /// holds slurmctld's job write lock). The write reads the counters as they are then.
    fn count(&self, note: impl FnOnce(&mut Counters)) {
        note(&mut self.counters.lock().unwrap_or_else(|e| e.into_inner()));
        let counters = self.counters.clone();
        self.publisher.run(Box::new(move || {
            let bytes = counters.lock().unwrap_or_else(|e| e.into_inner()).to_json();
            // Counts only, nothing about users or jobs: readable by all.
            publish::write_file(counters::FILE_NAME, &bytes, 0o644);
        }));
    }
}

/// fairway.toml as reloaded after a change. Unlike at startup, a file that has gone or
/// is empty is an error (the last good rules stay): an editor's truncate-then-write, or
/// a botched copy, must not silently turn every rule off. To turn rules off, delete
/// their sections, or remove the file and restart slurmctld.
fn load_config(path: &Path) -> Result<Config, String> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        return Err(format!("{} is empty", path.display()));
    }
    match Config::load(path) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(format!("{} is gone", path.display())),
        Err(e) => Err(e.to_string()),
    }
}

/// slurm.conf's partitions, its `Include` files followed (a change to an included file
/// alone is seen at the next change of slurm.conf itself, or at a restart).
fn load_partitions(path: &Path) -> Result<Partitions, String> {
    fairway_core::slurm_conf::read(path).map(|t| Partitions::parse(&t)).map_err(|e| e.to_string())
}

fn predictor_path(config: &Config) -> PathBuf {
    fairway_ffi::conf::state_save_location().join(&config.predictor.state_file)
}

/// The saved online calibration; one that does not load is logged and ignored (the
/// model's own offsets apply until slurmctld saves a good one).
fn load_calibration(path: &Path) -> Result<Option<OnlineCalibration>, String> {
    Ok(OnlineCalibration::load(path).unwrap_or_else(|e| {
        tracing::error!("{e}; time=auto uses the model's own offsets");
        None
    }))
}

impl FairwayJobSubmit {
    /// Runs the rules on `req` with the current inputs.
    fn evaluate(&self, req: &JobRequest, mode: Mode) -> Result<submit::Outcome, submit::Rejection> {
        let (config, partitions, predictor, model, calibration) = {
            let mut i = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
            let config = i.config.get(load_config);
            let partitions = i.partitions.get(load_partitions);
            let path = predictor_path(&config);
            if i.predictor.path != path {
                i.predictor = Watched::new(path.clone(), RuntimePredictor::load(&path).unwrap_or_default());
            }
            let predictor = i.predictor.get(RuntimePredictor::load);
            let model = i.model(&config);
            let path = fairway_ffi::conf::calibration_path(&config);
            if i.calibration.path != path {
                i.calibration = Watched::new(path.clone(), load_calibration(&path).unwrap_or_default());
            }
            let calibration = i.calibration.get_logged(load_calibration, false);
            (config, partitions, predictor, model, calibration)
        };
        // The calibration of this model, unless it is off; else the model's own offsets.
        let online = |m: &LearnedPredictor| {
            calibration.as_ref().as_ref().filter(|c| config.predictor.calibration_step > 0.0 && c.fits(m)).cloned()
        };
        // Without a model: the mean of the last two runs, and nothing for a new job.
        let predict = |r: &PredictionRequest| match model.as_deref() {
            Some(m) => Some(m.predict_online(&predictor, r, online(m).as_ref())),
            None => predictor.predict(&r.key, None),
        };
        let site = Site { partitions: &partitions, predict: &predict, now: fairway_ffi::plugin::unix_now() };
        submit::evaluate(&config.job_submit, &site, req, mode)
    }
}

impl JobSubmit for FairwayJobSubmit {
    fn init(config: Config) -> Result<Self, String> {
        let toml = fairway_ffi::conf::fairway_toml_path();
        let path = predictor_path(&config);
        let predictor = RuntimePredictor::load(&path).unwrap_or_else(|e| {
            tracing::error!("{e}; starting without runtime history");
            RuntimePredictor::default()
        });
        let slurm_conf = fairway_ffi::conf::slurm_conf_path();
        let partitions = load_partitions(&slurm_conf).unwrap_or_else(|e| {
            tracing::error!("{e}: partition limits unknown");
            Partitions::default()
        });
        let rules = &config.job_submit;
        tracing::info!(
            "rules: {} GPU types, {} partitions with rules, tier QoS {}, time=auto margin {:.0}%",
            rules.gpu.len(),
            rules.partition.len(),
            if rules.qos.batch.is_some() || rules.qos.interactive.is_some() { "on" } else { "off" },
            rules.time.auto_margin * 100.0
        );
        let calibration_path = fairway_ffi::conf::calibration_path(&config);
        let calibration = load_calibration(&calibration_path).unwrap_or_default();
        let mut inputs = Inputs {
            config: Watched::edited(toml, config),
            partitions: Watched::edited(slurm_conf, partitions),
            predictor: Watched::new(path, predictor),
            model_file: None,
            model: None,
            calibration: Watched::new(calibration_path, calibration),
        };
        let config = inputs.config.value.clone();
        inputs.model(&config);
        let counters = Arc::new(Mutex::new(Counters::new(fairway_ffi::plugin::unix_now())));
        Ok(Self { inputs: Mutex::new(inputs), counters, publisher: Publisher::start("fairway_submit") })
    }

    fn submit(&self, job: &mut JobDesc<'_>, submit_uid: u32) -> Verdict {
        let req = job.request();
        match self.evaluate(&req, Mode::Submit) {
            Ok(outcome) => {
                let changed = job.apply(&req, &outcome.job);
                tracing::info!(
                    submit_uid,
                    name = ?req.name,
                    predicted = ?outcome.predicted,
                    "job_submit: accepted; set {}",
                    if changed.is_empty() { "nothing".to_string() } else { changed.join(", ") }
                );
                self.count(|c| c.submitted(Ok(!changed.is_empty())));
                let notes: Vec<String> = outcome.notes.iter().map(|n| format!("fairway: {n}")).collect();
                Ok((!notes.is_empty()).then(|| notes.join("\n")))
            }
            Err(r) => {
                tracing::info!(submit_uid, name = ?req.name, "job_submit: rejected: {}", r.message);
                self.count(|c| c.submitted(Err(r.kind)));
                Err(r.into())
            }
        }
    }

    fn modify(&self, job: &mut JobDesc<'_>, current: Option<JobRequest>, submit_uid: u32) -> Verdict {
        // Operators may change anything; Slurm's own permission checks already ran.
        if fairway_ffi::conf::is_operator(submit_uid) {
            return Ok(None);
        }
        let update = job.request();
        let checked = match current {
            Some(current) => self.evaluate(&current.updated_by(&update), Mode::Modify).map(drop),
            None => submit::check_update_without_job(&update),
        };
        match checked {
            Ok(_) => Ok(None),
            Err(r) => {
                tracing::info!(submit_uid, "job_modify: rejected: {}", r.message);
                self.count(|c| c.update_refused(r.kind));
                Err(r.into())
            }
        }
    }
}

fairway_ffi::job_submit_plugin!(name: "Fairway job_submit plugin", type: "job_submit/fairway", impl: FairwayJobSubmit);
