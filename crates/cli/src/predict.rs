//! `fairway predict ...` and `fairway trace ...`.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use fairway_core::predict::{
    self, Evaluation, Features, FinishedJob, LearnedPredictor, TrainConfig, LAST_TWO, LEARNED,
};
use fairway_trace::synth::{self, SynthConfig};
use fairway_trace::{Format, Job};
use indicatif::{ProgressBar, ProgressStyle};

/// `fairway predict`.
#[derive(Subcommand)]
pub enum PredictCommand {
    /// Train the learned model on a whole trace and save it as JSON for the plugins.
    Train {
        #[command(flatten)]
        input: TraceInput,
        /// Where to write the model.
        #[arg(long)]
        out: PathBuf,
        /// Share of jobs that should finish within their prediction.
        #[arg(long, default_value_t = 0.85)]
        quantile: f64,
    },
    /// Score the time limit, last-two (Tsafrir) and learned predictors: train on the oldest
    /// jobs by submit time, test on the newest.
    Eval {
        #[command(flatten)]
        input: TraceInput,
        /// Share of jobs (oldest first) to train on.
        #[arg(long, default_value_t = 0.7)]
        train_frac: f64,
        /// Share of jobs that should finish within their prediction.
        #[arg(long, default_value_t = 0.85)]
        quantile: f64,
        /// Print CSV instead of a table.
        #[arg(long, conflicts_with = "json")]
        csv: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `fairway trace`.
#[derive(Subcommand)]
pub enum TraceCommand {
    /// Write a seeded synthetic AI workload in `sacct -P` format (fields as in
    /// `sacct -P -X -o JobID,User,Account,JobName,Partition,QOS,Submit,Start,End,Elapsed,Timelimit,AllocTRES,State`),
    /// readable with `--format sacct`.
    Synth {
        /// Jobs to generate.
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file ("-" for stdout).
        #[arg(long)]
        out: PathBuf,
    },
}

/// A trace file and its format.
#[derive(Args)]
pub struct TraceInput {
    /// The trace file.
    #[arg(long)]
    trace: PathBuf,
    /// Its format: sacct, sacct-json, swf, eagle, openb, helios, philly, pai.
    #[arg(long, value_parser = |s: &str| s.parse::<Format>())]
    format: Format,
}

impl TraceInput {
    /// Jobs with known run times, in submit order.
    fn finished_jobs(&self, bar: &ProgressBar) -> anyhow::Result<(Vec<Job>, Vec<FinishedJob>)> {
        bar.set_message(format!("reading {}", self.trace.display()));
        let jobs = fairway_trace::load_path(self.format, &self.trace)?;
        let mut finished: Vec<FinishedJob> = jobs.iter().filter_map(Job::finished).collect();
        finished.sort_by_key(|j| j.request.submit);
        Ok((jobs, finished))
    }
}

/// A spinner on stderr; indicatif draws nothing when stderr is not a terminal.
fn spinner() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"));
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Runs `fairway predict ...`.
pub fn predict(cmd: PredictCommand) -> anyhow::Result<()> {
    match cmd {
        PredictCommand::Train { input, out, quantile } => {
            let bar = spinner();
            let (all, jobs) = input.finished_jobs(&bar)?;
            bar.set_message(format!("training on {} jobs", jobs.len()));
            let mut examples = Vec::with_capacity(jobs.len());
            predict::replay(&jobs, |i, h| {
                let j = &jobs[i];
                examples.push((Features::new(h, &j.request), j.runtime, j.request.time_limit));
            });
            let model = LearnedPredictor::train(&examples, &TrainConfig { quantile, ..TrainConfig::default() })?;
            model.save(&out)?;
            bar.finish_and_clear();
            let c = &model.calibration;
            println!(
                "{}: {} of {} jobs usable; trees fit on {}, calibrated on {} ({}, \
                 {:.1}% under-predicted, target {:.1}%)",
                out.display(),
                jobs.len(),
                all.len(),
                c.fit_jobs,
                c.calibration_jobs,
                c.describe_offsets(),
                100.0 * c.under_rate,
                100.0 * (1.0 - c.quantile)
            );
            Ok(())
        }
        PredictCommand::Eval { input, train_frac, quantile, csv, json } => {
            let bar = spinner();
            let (all, jobs) = input.finished_jobs(&bar)?;
            bar.set_message(format!(
                "replaying {} jobs, training on the oldest {:.0}%",
                jobs.len(),
                100.0 * train_frac
            ));
            let (eval, _) = predict::evaluate(&jobs, train_frac, &TrainConfig { quantile, ..TrainConfig::default() })
                .context("evaluation failed")?;
            bar.finish_and_clear();
            if json {
                println!("{}", serde_json::to_string_pretty(&eval)?);
            } else if csv {
                print_csv(&eval)?;
            } else {
                print_table(&input, all.len(), &eval);
            }
            Ok(())
        }
    }
}

fn print_csv(eval: &Evaluation) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(std::io::stdout().lock());
    w.write_record(["predictor", "jobs", "mae_s", "median_ae_s", "within_50", "within_100", "under_rate"])?;
    for r in &eval.results {
        w.serialize((&r.predictor, r.jobs, r.mae_s, r.median_ae_s, r.within_50, r.within_100, r.under_rate))?;
    }
    w.flush()?;
    Ok(())
}

fn print_table(input: &TraceInput, loaded: usize, eval: &Evaluation) {
    println!(
        "{} ({}): {} jobs, {} with run times; trained on the oldest {}, tested on the newest {}",
        input.trace.display(),
        input.format,
        loaded,
        eval.train_jobs + eval.test_jobs,
        eval.train_jobs,
        eval.test_jobs
    );
    let c = &eval.calibration;
    println!(
        "learned model: trees fit on {} jobs, conformal {} from the next {}: \
         {:.1}% under-predicted there, target ≤ {:.1}%",
        c.fit_jobs,
        c.describe_offsets(),
        c.calibration_jobs,
        100.0 * c.under_rate,
        100.0 * (1.0 - c.quantile)
    );
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "predictor",
        "jobs",
        "MAE (s)",
        "median AE (s)",
        "within ±50%",
        "within ±100%",
        "under-predicted",
    ]);
    let num = |v: f64| if v.is_nan() { "n/a".to_string() } else { format!("{v:.0}") };
    let pct = |v: f64| if v.is_nan() { "n/a".to_string() } else { format!("{:.1}%", 100.0 * v) };
    for r in &eval.results {
        table.add_row(vec![
            Cell::new(&r.predictor),
            Cell::new(r.jobs).set_alignment(CellAlignment::Right),
            Cell::new(num(r.mae_s)).set_alignment(CellAlignment::Right),
            Cell::new(num(r.median_ae_s)).set_alignment(CellAlignment::Right),
            Cell::new(pct(r.within_50)).set_alignment(CellAlignment::Right),
            Cell::new(pct(r.within_100)).set_alignment(CellAlignment::Right),
            Cell::new(pct(r.under_rate)).set_alignment(CellAlignment::Right),
        ]);
    }
    println!("{table}");
    let find = |name: &str| eval.results.iter().find(|r| r.predictor == name);
    if let (Some(l2), Some(ml)) = (find(LAST_TWO), find(LEARNED)) {
        let ratio = ml.mae_s / l2.mae_s;
        let met = ratio <= 0.7 && ml.under_rate <= 0.15;
        println!(
            "goal (MAE ≤ 0.7× last two, under-prediction ≤ 15%): MAE ratio {ratio:.2}, under-prediction {:.1}%: {}",
            100.0 * ml.under_rate,
            if met { "met" } else { "not met" }
        );
    }
}

/// Runs `fairway trace ...`.
pub fn trace(cmd: TraceCommand) -> anyhow::Result<()> {
    match cmd {
        TraceCommand::Synth { jobs, seed, out } => {
            if jobs == 0 {
                bail!("--jobs must be at least 1");
            }
            let trace = synth::generate(&SynthConfig { jobs, seed, ..SynthConfig::default() });
            if out.as_os_str() == "-" {
                fairway_trace::write_sacct(&trace, std::io::stdout().lock())?;
            } else {
                let file = std::fs::File::create(&out).with_context(|| out.display().to_string())?;
                let mut w = std::io::BufWriter::new(file);
                fairway_trace::write_sacct(&trace, &mut w)?;
                w.flush()?;
                eprintln!("{}: {} jobs (sacct -P format; read with --format sacct)", out.display(), trace.len());
            }
            Ok(())
        }
    }
}
