//! Consistency of `fairway.toml` with `slurm.conf`'s priority settings.
//!
//! `fairway check-config` and the plugins (at startup) run the same checks, so an
//! admin sees the same explanation in the terminal and in `slurmctld.log`.

pub mod plugins;

use std::fmt;

use crate::config::Config;
use crate::terms;

/// The `slurm.conf` settings the checks look at (keys as Slurm spells them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmPriority {
    /// `PriorityType`.
    pub priority_type: String,
    /// `PrioritySiteFactorPlugin`.
    pub site_factor_plugin: String,
    /// `AccountingStorageType`.
    pub accounting_storage_type: String,
    /// `PriorityWeightAge`.
    pub weight_age: u32,
    /// `PriorityWeightFairshare`.
    pub weight_fairshare: u32,
    /// `PriorityCalcPeriod`, seconds.
    pub calc_period: u64,
    /// `JobSubmitPlugins`, as written (`fairway`, `job_submit/fairway`, …).
    pub job_submit_plugins: Vec<String>,
    /// Names of the partitions (empty when not known).
    pub partitions: Vec<String>,
    /// `PreemptType`.
    pub preempt_type: String,
    /// `PluginDir`, when set.
    pub plugin_dir: Option<String>,
}

impl SlurmPriority {
    /// Reads the relevant keys from `slurm.conf` text (case-insensitive keys, `#`
    /// comments; `Include` lines already expanded by [`crate::slurm_conf::read`]).
    /// Missing keys keep Slurm's defaults.
    pub fn parse(text: &str) -> Self {
        let mut s = Self {
            priority_type: "priority/multifactor".into(),
            site_factor_plugin: "site_factor/none".into(),
            accounting_storage_type: "accounting_storage/none".into(),
            calc_period: 300,
            preempt_type: "preempt/none".into(),
            ..Self::default()
        };
        for (k, v) in crate::slurm_conf::settings(text) {
            match k.to_ascii_lowercase().as_str() {
                "prioritytype" => s.priority_type = v.into(),
                "prioritysitefactorplugin" => s.site_factor_plugin = v.into(),
                "accountingstoragetype" => s.accounting_storage_type = v.into(),
                "priorityweightage" => s.weight_age = v.parse().unwrap_or(0),
                "priorityweightfairshare" => s.weight_fairshare = v.parse().unwrap_or(0),
                "jobsubmitplugins" => s.job_submit_plugins = v.split(',').map(str::trim).map(str::to_string).collect(),
                "partitionname" if !v.eq_ignore_ascii_case("default") => s.partitions.push(v.into()),
                "prioritycalcperiod" => {
                    // minutes, or Slurm time syntax
                    s.calc_period = crate::time::parse_duration(v).unwrap_or(300);
                }
                "preempttype" => s.preempt_type = v.into(),
                "plugindir" => s.plugin_dir = Some(v.into()),
                _ => {}
            }
        }
        s
    }
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The configuration does not do what it says.
    Error,
    /// Probably not what the site wants.
    Warning,
}

/// One problem, explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{s}: {}", self.message)
    }
}

/// Checks `fairway.toml` against `slurm.conf`'s priority settings.
pub fn check(config: &Config, slurm: &SlurmPriority) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut say = |severity, message: String| out.push(Finding { severity, message });
    let fairway_priority = slurm.priority_type == "priority/fairway";
    let fairway_site = slurm.site_factor_plugin == "site_factor/fairway";
    if fairway_priority && fairway_site {
        say(
            Severity::Error,
            "PriorityType=priority/fairway and PrioritySiteFactorPlugin=site_factor/fairway both add Fairway's terms, \
             so they would count twice: keep one (site_factor/fairway is for sites that stay on priority/multifactor)"
                .into(),
        );
    }
    if fairway_site && slurm.priority_type != "priority/multifactor" {
        say(
            Severity::Error,
            format!(
                "PrioritySiteFactorPlugin=site_factor/fairway only works under PriorityType=priority/multifactor, not {}",
                slurm.priority_type
            ),
        );
    }
    let p = &config.priority;
    if p.weight_deadline > 0 && p.deadline_qos.is_empty() {
        say(
            Severity::Warning,
            format!(
                "[priority] weight_deadline = {} applies to no job: deadline_qos is empty. List the QOS whose jobs may                  claim deadline urgency, e.g. deadline_qos = [\"high\"] (any user can set --deadline, so it is granted                  per QOS)",
                p.weight_deadline
            ),
        );
    }
    if terms::any_enabled(p) && !fairway_priority && !fairway_site {
        say(
            Severity::Warning,
            format!(
                "fairway.toml turns on Fairway's priority terms, but PriorityType={} and PrioritySiteFactorPlugin={} \
                 do not apply them: set PriorityType=priority/fairway, or PrioritySiteFactorPlugin=site_factor/fairway",
                slurm.priority_type, slurm.site_factor_plugin
            ),
        );
    }
    if slurm.accounting_storage_type != "accounting_storage/slurmdbd" {
        for (key, w) in [("PriorityWeightAge", slurm.weight_age), ("PriorityWeightFairshare", slurm.weight_fairshare)] {
            if w > 0 {
                say(
                    Severity::Warning,
                    format!("{key}={w} is ignored without AccountingStorageType=accounting_storage/slurmdbd"),
                );
            }
        }
    }
    check_job_submit(config, slurm, &mut say);
    check_predicted_limits(config, slurm, &mut say);
    check_online_calibration(config, slurm, &mut say);
    if let Some(max_wait) = config.priority.max_wait {
        if max_wait.0 < slurm.calc_period {
            say(
                Severity::Warning,
                format!(
                    "max_wait ({} s) is shorter than PriorityCalcPeriod ({} s): starving jobs are lifted at the next \
                     recalculation, so they may wait up to {} s longer than max_wait",
                    max_wait.0, slurm.calc_period, slurm.calc_period
                ),
            );
        }
    }
    out
}

/// Extended predicted limits need priority/fairway's decay thread to extend them, in
/// time: otherwise Slurm kills jobs at limits that were only ever meant for planning.
fn check_predicted_limits(config: &Config, slurm: &SlurmPriority, say: &mut impl FnMut(Severity, String)) {
    use crate::submit::config::PredictedLimits;
    let t = &config.job_submit.time;
    if t.predicted_limits == PredictedLimits::OnRequest {
        return;
    }
    if slurm.priority_type != "priority/fairway" {
        say(
            Severity::Error,
            format!(
                "[job_submit.time] predicted_limits = \"{}\" needs PriorityType=priority/fairway, which extends \
                 predicted limits before they run out; with PriorityType={} Slurm kills jobs at them: set \
                 PriorityType=priority/fairway or predicted_limits = \"on_request\"",
                if t.predicted_limits == PredictedLimits::AllJobs { "all_jobs" } else { "extended" },
                slurm.priority_type
            ),
        );
    }
    let floor = t.min_predicted_limit.map_or(60, |s| s.0);
    if floor < 2 * slurm.calc_period {
        say(
            Severity::Warning,
            format!(
                "[job_submit.time] min_predicted_limit ({floor} s) is under twice PriorityCalcPeriod ({} s): a \
                 predicted limit can run out before the first pass after the job starts extends it; set \
                 min_predicted_limit to at least {} s",
                slurm.calc_period,
                2 * slurm.calc_period
            ),
        );
    }
}

/// The learned model's online calibration needs both ends: job_submit/fairway recording
/// each job's prediction, and a Fairway priority plugin seeing the job end.
fn check_online_calibration(config: &Config, slurm: &SlurmPriority, say: &mut impl FnMut(Severity, String)) {
    let p = &config.predictor;
    let job_submit = slurm.job_submit_plugins.iter().any(|p| p == "fairway" || p == "job_submit/fairway");
    if p.model.is_none() || p.calibration_step == 0.0 || !job_submit {
        return;
    }
    if !config.job_submit.time.record_prediction {
        say(
            Severity::Warning,
            "[predictor] calibration_step: the online calibration learns from the prediction job_submit/fairway \
             records in each job's AdminComment, which is off: set [job_submit.time] record_prediction = true, or \
             time=auto limits keep the model's offsets as trained"
                .into(),
        );
    }
    if slurm.priority_type != "priority/fairway" && slurm.site_factor_plugin != "site_factor/fairway" {
        say(
            Severity::Warning,
            format!(
                "[predictor] calibration_step: the online calibration learns at job end in priority/fairway or \
                 site_factor/fairway, and PriorityType={} with PrioritySiteFactorPlugin={} is neither: time=auto \
                 limits keep the model's offsets as trained",
                slurm.priority_type, slurm.site_factor_plugin
            ),
        );
    }
}

/// `[job_submit]` against `JobSubmitPlugins` and the partitions.
fn check_job_submit(config: &Config, slurm: &SlurmPriority, say: &mut impl FnMut(Severity, String)) {
    let rules = &config.job_submit;
    let configured = !rules.gpu.is_empty()
        || !rules.partition.is_empty()
        || rules.qos.batch.is_some()
        || rules.qos.interactive.is_some()
        || rules.qos.opportunistic.is_some()
        || !rules.binding.gpu_bind.is_empty()
        || rules.time.record_prediction;
    let enabled = slurm.job_submit_plugins.iter().any(|p| p == "fairway" || p == "job_submit/fairway");
    if configured && !enabled {
        say(
            Severity::Warning,
            "fairway.toml sets [job_submit] rules, but JobSubmitPlugins does not include fairway: add JobSubmitPlugins=fairway (after any plugin that must run first)"
                .into(),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for g in &rules.gpu {
        if !seen.insert(g.name.as_str()) {
            say(Severity::Error, format!("[[job_submit.gpu]] lists GPU type {} twice: merge the entries", g.name));
        }
    }
    if slurm.partitions.is_empty() {
        return;
    }
    let known = |p: &str| slurm.partitions.iter().any(|q| q == p);
    for g in &rules.gpu {
        for p in g.partitions.iter().filter(|p| !known(p)) {
            say(
                Severity::Warning,
                format!("GPU type {} names partition {p}, which slurm.conf does not define", g.name),
            );
        }
    }
    for p in rules.partition.keys().filter(|p| !known(p)) {
        say(Severity::Warning, format!("[job_submit.partition.{p}]: slurm.conf defines no partition {p}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cfg(text: &str) -> Config {
        Config::parse(text, Path::new("fairway.toml")).unwrap()
    }

    #[test]
    fn parses_slurm_conf_keys_case_insensitively() {
        let s = SlurmPriority::parse(
            "# comment\npriorityType=priority/fairway # trailing\nPriorityWeightAge=1000 PriorityCalcPeriod=2\n",
        );
        assert_eq!(s.priority_type, "priority/fairway");
        assert_eq!(s.weight_age, 1000);
        assert_eq!(s.calc_period, 120);
        assert_eq!(s.site_factor_plugin, "site_factor/none");
    }

    #[test]
    fn a_deadline_weight_without_deadline_qos_is_a_warning() {
        let s = SlurmPriority::parse("PriorityType=priority/fairway\n");
        let f = check(&cfg("[priority]\nweight_deadline = 10\n"), &s);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].message.contains("deadline_qos is empty"), "{f:?}");
        assert!(check(&cfg("[priority]\nweight_deadline = 10\ndeadline_qos = [\"high\"]\n"), &s).is_empty());
    }

    #[test]
    fn extended_predicted_limits_need_priority_fairway_and_a_floor_of_two_passes() {
        let t = |extra: &str| cfg(&format!("[job_submit.time]\npredicted_limits = \"all_jobs\"\n{extra}"));
        let mf = SlurmPriority::parse("PriorityType=priority/multifactor\n");
        let f = check(&t(""), &mf);
        assert!(f.iter().any(|f| f.severity == Severity::Error && f.message.contains("Slurm kills jobs")), "{f:?}");
        let fw = SlurmPriority::parse("PriorityType=priority/fairway\n");
        assert!(check(&t(""), &fw).is_empty(), "10 minutes is twice the default 5-minute period");
        let f = check(&t("min_predicted_limit = \"5:00\"\n"), &fw);
        assert!(f.iter().any(|f| f.message.contains("at least 600 s")), "{f:?}");
        assert!(check(&cfg("[job_submit.time]\nauto_margin = 0.5\n"), &mf).is_empty(), "on_request: as before");
    }

    #[test]
    fn both_fairway_plugins_is_an_error() {
        let s = SlurmPriority::parse("PriorityType=priority/fairway\nPrioritySiteFactorPlugin=site_factor/fairway\n");
        let f = check(&Config::default(), &s);
        assert!(f.iter().any(|f| f.severity == Severity::Error && f.message.contains("count twice")), "{f:?}");
    }

    #[test]
    fn terms_without_a_fairway_plugin_are_a_warning() {
        let s = SlurmPriority::parse("PriorityType=priority/multifactor\n");
        let f = check(&cfg("[priority]\nweight_deadline = 10\ndeadline_qos = [\"high\"]\n"), &s);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].message.contains("do not apply them"));
    }

    #[test]
    fn a_clean_setup_has_no_findings() {
        let s = SlurmPriority::parse(
            "PriorityType=priority/fairway\nAccountingStorageType=accounting_storage/slurmdbd\nPriorityWeightAge=10\n",
        );
        assert!(check(&cfg("[priority]\nmax_wait = \"1-0\"\n"), &s).is_empty());
    }

    #[test]
    fn job_submit_rules_are_checked_against_slurm_conf() {
        let text = "[job_submit.qos]\nbatch = \"normal\"\n[[job_submit.gpu]]\nname = \"h100\"\nmemory_gb = 80\n\
                    per_node = 8\npartitions = [\"gpu\", \"gpus\"]\n[[job_submit.gpu]]\nname = \"h100\"\n\
                    memory_gb = 80\nper_node = 8\npartitions = [\"gpu\"]\n[job_submit.partition.debug]\n";
        let s = SlurmPriority::parse("PartitionName=DEFAULT MaxTime=1\nPartitionName=gpu Nodes=n1\n");
        let f: Vec<String> = check(&cfg(text), &s).iter().map(|f| f.to_string()).collect();
        assert_eq!(
            f,
            [
                "warning: fairway.toml sets [job_submit] rules, but JobSubmitPlugins does not include fairway: add \
                 JobSubmitPlugins=fairway (after any plugin that must run first)",
                "error: [[job_submit.gpu]] lists GPU type h100 twice: merge the entries",
                "warning: GPU type h100 names partition gpus, which slurm.conf does not define",
                "warning: [job_submit.partition.debug]: slurm.conf defines no partition debug",
            ]
        );
        let s = SlurmPriority::parse("JobSubmitPlugins=lua,fairway\n");
        assert!(check(&cfg("[job_submit.qos]\nbatch = \"normal\"\n"), &s).is_empty());
    }

    #[test]
    fn online_calibration_needs_the_record_and_a_fairway_priority_plugin() {
        let model = "[predictor]\nmodel = \"m.json\"\n";
        let s = SlurmPriority::parse("JobSubmitPlugins=fairway\nPriorityType=priority/multifactor\n");
        let f: Vec<String> = check(&cfg(model), &s).iter().map(|f| f.message.clone()).collect();
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].contains("record_prediction = true") && f[1].contains("PriorityType=priority/multifactor"));
        let recorded = format!("{model}[job_submit.time]\nrecord_prediction = true\n");
        let s = SlurmPriority::parse("JobSubmitPlugins=fairway\nPriorityType=priority/fairway\n");
        assert!(check(&cfg(&recorded), &s).is_empty());
        let s = SlurmPriority::parse(
            "JobSubmitPlugins=fairway\nPriorityType=priority/multifactor\nPrioritySiteFactorPlugin=site_factor/fairway\n",
        );
        assert!(check(&cfg(&recorded), &s).is_empty());
        // Nothing to say with the calibration off, without a model, or without job_submit/fairway.
        let off = SlurmPriority::parse("JobSubmitPlugins=fairway\n");
        assert!(check(&cfg(&format!("{model}calibration_step = 0\n")), &off).is_empty());
        assert!(check(&cfg(""), &off).is_empty());
        assert!(check(&cfg(model), &SlurmPriority::parse("")).is_empty());
    }

    #[test]
    fn weights_without_slurmdbd_and_short_max_wait_are_explained() {
        let s = SlurmPriority::parse("PriorityType=priority/fairway\nPriorityWeightFairshare=5\n");
        let f = check(&cfg("[priority]\nmax_wait = \"0:30\"\n"), &s);
        assert!(f.iter().any(|f| f.message.contains("PriorityWeightFairshare=5 is ignored")), "{f:?}");
        assert!(f.iter().any(|f| f.message.contains("shorter than PriorityCalcPeriod")), "{f:?}");
    }
}

/// Checks that every `[gpu.topology]` file (relative to `dir`, fairway.toml's directory)
/// is a valid topology file: slurmd's gpu/nvml would otherwise report no GPUs there.
pub fn check_gpu_topology(config: &Config, dir: &std::path::Path) -> Vec<Finding> {
    config
        .gpu
        .topology
        .iter()
        .filter_map(|(nodes, file)| {
            let path = dir.join(file);
            crate::topology::Topology::load(&path).err().map(|e| Finding {
                severity: Severity::Error,
                message: format!(
                    "[gpu.topology] \"{nodes}\": {e}; gpu/nvml would report no GPUs on those nodes where NVML cannot"
                ),
            })
        })
        .collect()
}

/// The learned model `[predictor] model` names, if any, must load: otherwise the
/// plugins fall back to the mean of the last two runs (and log why).
pub fn check_predictor_model(config: &Config, dir: &std::path::Path) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(q) = config.predictor.quantile {
        out.push(Finding {
            severity: Severity::Warning,
            message: format!(
                "[predictor] quantile = {} is ignored: the upper quantile is the one the model was trained \
                 for (`fairway predict train --quantile`); remove the key",
                q.get()
            ),
        });
    }
    let Some(path) = config.predictor.model_file(dir) else { return out };
    match crate::predict::LearnedPredictor::load(&path) {
        Ok(_) => out,
        Err(e) => out.into_iter().chain([Finding {
            severity: Severity::Error,
            message: format!(
                "[predictor] model: {e}; the plugins would predict with the mean of the last two runs (write one with `fairway predict train`)"
            ),
        }]).collect(),
    }
}

#[cfg(test)]
mod gpu_topology_tests {
    use super::*;

    #[test]
    fn a_missing_or_invalid_topology_file_is_an_error() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
        let ok = Config::parse("[gpu.topology]\n\"c[1-2]\" = \"topology/dgx-h100.toml\"\n", &dir).unwrap();
        assert!(check_gpu_topology(&ok, &dir).is_empty());
        let bad = Config::parse("[gpu.topology]\n\"c3\" = \"topology/none.toml\"\n", &dir).unwrap();
        let f = check_gpu_topology(&bad, &dir);
        assert_eq!(f.len(), 1);
        assert!(f[0].message.starts_with("[gpu.topology] \"c3\": ") && f[0].message.contains("none.toml"), "{}", f[0]);
    }
}
