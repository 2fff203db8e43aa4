//! `preempt/fairway`: `PreemptType=preempt/fairway`, preempt/qos semantics plus
//! checkpoint-before-preempt.
//!
//! Who may preempt whom is exactly preempt/qos (`sacctmgr ... set Preempt=`, same-QoS
//! with `PreemptMode=WITHIN`), through `fairway_core::preempt::qos`. On top, from the
//! `[preempt]` section of `fairway.toml` (`fairway_core::preempt`):
//!
//! - Grace time per victim, from the checkpoint time its directive declares
//!   (`--comment "fairway: ckpt=60s"`) plus a margin, capped per QoS; with
//!   `SlurmctldParameters=preempt_send_user_signal` the victim gets its `--signal`
//!   (job_submit/fairway sets one for checkpointing jobs in preemptible QoS) at the
//!   start of that grace. A job that has saved its checkpoint runs `fairway ckpt-done`,
//!   which requeues it at once instead of waiting out the grace.
//! - Candidate order: jobs within `min_runtime` of their start last, then lowest
//!   priority, then least work lost since the start; Slurm takes the lowest first.
//! - A budget: a job preempted `max_preemptions` times is no longer preemptable. Only
//!   this plugin's own preemptions count (`fairway_core::preempt::budget`, kept in
//!   `StateSaveLocation/fairway-preemptions.json`), not Slurm's `restart_cnt`, which
//!   the job's owner raises with every requeue of their own.
//! - One round at a time: while the victims chosen for a job are inside their grace,
//!   that job takes no further victims (Slurm alone would after `KillWait +
//!   MessageTimeout`, long before a checkpoint of a few minutes is done).
//!
//! A job is preempted whole (all its nodes) by Slurm itself; nothing here splits a gang.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use fairway_core::preempt::{self, qos, Candidate, PreemptConfig, Preemptions, Rounds};
use fairway_core::Config;
use fairway_ffi::job::{JobRecord, QosView};
use fairway_ffi::plugin::Preempt;

/// The plugin's state for the life of slurmctld.
pub struct FairwayPreempt {
    cfg: PreemptConfig,
    /// `PreemptMode` of slurm.conf.
    global: qos::PreemptMode,
    /// Victims inside their grace, by when they were chosen.
    rounds: Mutex<Rounds>,
    /// Preemptions per job, for the budget; shared with the thread that saves them.
    preemptions: Arc<Mutex<Preemptions>>,
    /// Where they are kept (`None`: no StateSaveLocation; kept in memory only).
    preemptions_file: Option<PathBuf>,
}

/// The budget's file in StateSaveLocation.
const PREEMPTIONS_FILE: &str = fairway_core::preempt::budget::FILE_NAME;

/// The QoS as the core's preempt/qos model sees it; `preempts` names `other` when this
/// QoS's `Preempt=` list holds it (the only list entry a pairwise check needs).
fn core_qos(q: &QosView<'_>, other: Option<&QosView<'_>>) -> qos::Qos {
    let preempt = other.filter(|o| q.preempts(o)).map(|o| vec![o.name().into_owned()]).unwrap_or_default();
    qos::Qos {
        name: q.name().into_owned(),
        preempt,
        preempt_mode: qos::PreemptMode::from_bits(q.preempt_mode()),
        grace_time: q.grace_time(),
        priority: q.priority(),
    }
}

fn candidate(job: &JobRecord<'_>, preempt_count: u32) -> Candidate {
    Candidate {
        job_id: job.job_id(),
        gpus: job.gpus(),
        nodes: job.node_cnt(),
        priority: job.priority(),
        qos: job.qos().map(|q| q.name().into_owned()).unwrap_or_default(),
        start_time: job.start_time(),
        // slurmctld does not know when a job last saved; count from its start.
        last_checkpoint: None,
        preempt_count,
    }
}

impl FairwayPreempt {
    fn candidate(&self, job: &JobRecord<'_>) -> Candidate {
        let count = self.preemptions.lock().unwrap_or_else(|p| p.into_inner()).count(job.job_id());
        candidate(job, count)
    }

    /// Notes a preemption of `job_id` and, when it is a new one, saves the counts off the
    /// scheduler's path (slurmctld holds the job write lock here).
    fn note_preemption(&self, job_id: u32, chosen: i64, until: i64) {
        let mut p = self.preemptions.lock().unwrap_or_else(|p| p.into_inner());
        if !p.note(job_id, chosen, until) {
            return;
        }
        tracing::info!(
            "JobId={job_id} preempted {} time(s) (max_preemptions={})",
            p.count(job_id),
            self.cfg.max_preemptions
        );
        drop(p);
        if let Some(path) = self.preemptions_file.clone() {
            let shared = Arc::clone(&self.preemptions);
            std::thread::spawn(move || {
                // Saved from the shared state, so the newest counts win whichever thread runs last.
                let snapshot = shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Err(e) = snapshot.save(&path) {
                    tracing::error!("cannot save the preemption budget: {e}");
                }
            });
        }
    }
}

impl Preempt for FairwayPreempt {
    fn init(config: Config) -> Result<Self, String> {
        fairway_ffi::conf::log_findings(&config);
        let global = qos::PreemptMode::from_bits(fairway_ffi::conf::preempt_mode());
        let c = &config.preempt;
        tracing::info!(
            "preempt/qos semantics, PreemptMode={:?}; min_runtime={}s max_preemptions={} grace: ckpt+{:.0}%, min {}s, default {}s, {} QoS caps",
            global.action,
            c.min_runtime,
            c.max_preemptions,
            c.grace_margin * 100.0,
            c.min_grace,
            c.default_grace,
            c.qos.len()
        );
        let preemptions_file = fairway_ffi::conf::state_dir().map(|d| d.join(PREEMPTIONS_FILE));
        let preemptions = match preemptions_file.as_deref() {
            Some(path) => Preemptions::load(path).unwrap_or_else(|e| {
                let line = fairway_core::state_file::set_aside(path, &e);
                tracing::error!("{line}; the preemption budget starts afresh");
                Preemptions::default()
            }),
            None => Preemptions::default(),
        };
        Ok(Self {
            cfg: config.preempt,
            global,
            rounds: Mutex::new(Rounds::default()),
            preemptions: Arc::new(Mutex::new(preemptions)),
            preemptions_file,
        })
    }

    fn preemptable(&self, preemptee: &JobRecord<'_>, preemptor: &JobRecord<'_>, now: i64) -> bool {
        let (ee_q, or_q) = (preemptee.qos(), preemptor.qos());
        let ee = ee_q.as_ref().map(|q| core_qos(q, None));
        let or = or_q.as_ref().map(|q| core_qos(q, ee_q.as_ref()));
        qos::preemptable(or.as_ref(), ee.as_ref(), preemptor.priority(), preemptee.priority(), self.global)
            && preempt::is_preemptable(&self.candidate(preemptee), &self.cfg)
            && preempt::may_take(
                &mut self.rounds.lock().unwrap_or_else(|p| p.into_inner()),
                preemptee.preempt_time(),
                preemptor.preempt_start_time(),
                now,
            )
    }

    fn enabled(&self) -> bool {
        self.global.action != qos::Action::Off
    }

    fn mode(&self, job: &JobRecord<'_>) -> u16 {
        let q = job.qos().map(|q| core_qos(&q, None));
        let action = qos::mode(q.as_ref(), self.global);
        qos::PreemptMode { action, within: false, gang: false }.to_bits()
    }

    fn prio(&self, job: &JobRecord<'_>, now: i64) -> u32 {
        preempt::preempt_prio(&self.candidate(job), now, &self.cfg)
    }

    fn grace_time(&self, job: &JobRecord<'_>) -> u32 {
        let q = job.qos();
        let name = q.as_ref().map_or(Cow::Borrowed(""), |q| q.name());
        let (comment, extra) = (job.comment(), job.extra());
        let texts: Vec<&str> = [comment.as_deref(), extra.as_deref()].into_iter().flatten().collect();
        let g = preempt::victim_grace(&self.cfg, &name, q.as_ref().map_or(0, |q| q.grace_time()), &texts, None);
        tracing::info!(
            "JobId={} (QoS {name}) chosen for preemption: grace {} s ({:?}{}); it may end it early with `fairway ckpt-done`",
            job.job_id(),
            g.secs,
            g.source,
            if g.capped { ", capped by max_grace" } else { "" }
        );
        let chosen = if job.preempt_time() != 0 { job.preempt_time() } else { fairway_ffi::plugin::unix_now() };
        self.rounds.lock().unwrap_or_else(|p| p.into_inner()).chosen(chosen, chosen + i64::from(g.secs));
        self.note_preemption(job.job_id(), chosen, chosen + i64::from(g.secs));
        g.secs
    }
}

fairway_ffi::preempt_plugin!(name: "Fairway preemption plugin", type: "preempt/fairway", impl: FairwayPreempt);
