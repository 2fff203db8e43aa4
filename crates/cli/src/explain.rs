//! `fairway explain JOBID`: why a job waits, what its priority is made of, where it
//! stands in the queue and in fair share. Runs scontrol, sprio, squeue, sinfo and sshare as the
//! calling user (so it shows no more than they would) and lets
//! `fairway_core::explain` decide what to say.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use fairway_core::config::{self, Config};
use fairway_core::explain::{self, Explanation, Starvation};
use fairway_core::status::{self, JobTerms, Status};

use crate::slurm_cmd;

#[derive(Args)]
pub struct ExplainArgs {
    /// The job.
    job: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// slurm.conf beside which fairway.toml is read (for max_wait; $FAIRWAY_CONF names it
    /// instead) [default: $SLURM_CONF or /etc/slurm/slurm.conf].
    #[arg(long, env = "SLURM_CONF", default_value = "/etc/slurm/slurm.conf")]
    slurm_conf: PathBuf,
}

fn slurm(program: &str, args: &[&str]) -> anyhow::Result<String> {
    slurm_cmd::run(Path::new(program), args)
}

pub fn explain(a: ExplainArgs) -> anyhow::Result<()> {
    let id = a.job.as_str();
    if !is_job_id(id) {
        return Err(crate::Usage(format!("`{id}` is not a job id (digits)")).into());
    }
    let e = explanation(id, &a.slurm_conf)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e).context("cannot write JSON")?);
    } else {
        print!("{}", e.render());
    }
    Ok(())
}

/// Whether `id` is a job id `scontrol show job` takes (digits).
pub fn is_job_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 10 && id.bytes().all(|b| b.is_ascii_digit())
}

/// Everything explain says about job `id` (digits), from Slurm's commands run as the
/// caller.
pub fn explanation(id: &str, slurm_conf: &Path) -> anyhow::Result<Explanation> {
    let show = slurm("scontrol", &["show", "job", "-o", id])?;
    let job = explain::parse_scontrol_job(show.lines().next().unwrap_or(""));
    let get = |k: &str| job.get(k).cloned().unwrap_or_default();
    if get("JobId") != id {
        anyhow::bail!("job {id}: scontrol shows no such job (it may have ended and been purged)");
    }
    let state = get("JobState");
    let pending = state == "PENDING";
    let user = get("UserId").split('(').next().unwrap_or_default().to_string();
    let account = get("Account");
    let partitions: Vec<String> = get("Partition").split(',').map(str::to_string).collect();

    // Slurm's own factor breakdown (sprio answers for pending jobs only).
    let priority = if pending {
        explain::parse_sprio(&slurm("sprio", &["-h", "-j", id, "-o", explain::SPRIO_FORMAT]).unwrap_or_default(), id)
    } else {
        Vec::new()
    };
    let mut queue = Vec::new();
    if pending {
        for p in &partitions {
            let q = slurm("squeue", &["-h", "-t", "PD", "-p", p, "-o", "%i|%Q|%D|%b"]).unwrap_or_default();
            queue.extend(explain::queue_position(&q, id, p));
        }
    }
    let expected_start = slurm("squeue", &["-h", "-j", id, "--start", "-o", "%S"])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s != "N/A");
    // Every association the caller may see (PrivateData=usage shows a user their own).
    let fair_share = slurm("sshare", &["-a", "-h", "-P", "-o", explain::SSHARE_FORMAT])
        .ok()
        .and_then(|t| explain::fair_share(&t, &user, &account));
    // The nodes with its GPUs, as sinfo shows them to the caller (none under
    // PrivateData=nodes).
    let gpu_nodes = if pending {
        let sinfo = slurm("sinfo", &["-N", "-h", "-O", explain::GPU_SINFO_FORMAT]).unwrap_or_default();
        explain::gpu_nodes(&job, &sinfo)
    } else {
        None
    };
    let starvation = if pending { starvation(slurm_conf, &get("AccrueTime")) } else { None };
    let (fairway_terms, fairway_terms_note) = if pending { fairway_terms(id) } else { (None, None) };
    Ok(Explanation {
        job: id.to_string(),
        user,
        account,
        qos: get("QOS"),
        state,
        blocker: pending.then(|| explain::blocker(&job)),
        gpu_nodes,
        priority,
        queue,
        expected_start,
        fair_share,
        starvation,
        fairway_terms,
        fairway_terms_note,
        submit_changes: fairway_core::submit::recorded_changes(&get("AdminComment")).unwrap_or_default(),
    })
}

/// The starvation bound from fairway.toml, and how long the job has been eligible
/// (its AccrueTime, as Fairway counts it). None without a bound, or when fairway.toml
/// cannot be read (it is SlurmUser's; a user may not see it).
fn starvation(slurm_conf: &Path, accrue_time: &str) -> Option<Starvation> {
    let cfg = Config::load(&config::locate_from_env(slurm_conf)).ok().flatten()?;
    let max_wait = cfg.priority.max_wait?.0;
    // scontrol prints local time without a zone.
    let dt: jiff::civil::DateTime = accrue_time.parse().ok()?;
    let at = dt.to_zoned(jiff::tz::TimeZone::system()).ok()?.timestamp();
    let waited = jiff::Timestamp::now().as_second().saturating_sub(at.as_second()).max(0) as u64;
    Some(Starvation { max_wait, waited })
}

/// The job's terms at priority/fairway's last pass, from the status it writes in
/// StateSaveLocation; else why they cannot be shown (`explain::fairway_terms` decides).
fn fairway_terms(id: &str) -> (Option<JobTerms>, Option<String>) {
    let path = match slurm_cmd::state_save_location() {
        Ok(dir) => dir.join(status::FILE_NAME),
        Err(e) => return (None, Some(format!("cannot find StateSaveLocation: {e:#}"))),
    };
    let job = id.parse().unwrap_or_default();
    match explain::fairway_terms(&path, Status::read(&path), job, jiff::Timestamp::now().as_second()) {
        Ok(t) => (Some(t), None),
        Err(why) => (None, Some(why)),
    }
}
