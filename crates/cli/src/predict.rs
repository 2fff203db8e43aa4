//! `fairway predict ...` and `fairway trace ...`.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use fairway_core::predict::{
    self, Evaluation, Features, FinishedJob, LearnedPredictor, TrainConfig, LAST_TWO, LEARNED, LEARNED_ONLINE,
    LEARNED_TYPICAL,
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
    /// jobs by submit time, test on the newest. The learned model's upper quantile is
    /// scored twice: with its offsets fixed at training, and calibrated online as the
    /// plugins do (each test job predicted at submission, learned from once it has ended).
    Eval {
        #[command(flatten)]
        input: TraceInput,
        /// Share of jobs (oldest first) to train on.
        #[arg(long, default_value_t = 0.7)]
        train_frac: f64,
        /// Score this saved model (`fairway predict train`) on every job of the trace
        /// instead of training one on its oldest jobs.
        #[arg(long, conflicts_with = "train_frac")]
        model: Option<PathBuf>,
        /// Share of jobs that should finish within their prediction.
        #[arg(long, default_value_t = 0.85)]
        quantile: f64,
        /// Step of the online calibration (log space; 0: offsets fixed at training), as
        /// `[predictor] calibration_step` in fairway.toml.
        #[arg(long, default_value_t = predict::DEFAULT_STEP, value_parser = online_step)]
        online_step: f64,
        /// Print CSV instead of a table.
        #[arg(long, conflicts_with = "json")]
        csv: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also draw the upper quantile's under-prediction over runs of consecutive test
        /// jobs, offsets fixed and online, as an SVG file.
        #[arg(long)]
        plot: Option<PathBuf>,
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
        /// Drift: from `--drift-from` on, every run takes this factor longer (same limits).
        #[arg(long, default_value_t = 1.0)]
        drift: f64,
        /// Share of the trace (by submission) after which run times drift.
        #[arg(long, default_value_t = 0.7)]
        drift_from: f64,
        /// Output file ("-" for stdout).
        #[arg(long)]
        out: PathBuf,
        /// Time zone of the times written, as sacct on a host in it prints them.
        #[arg(long, default_value = "local", value_parser = time_zone)]
        tz: jiff::tz::TimeZone,
    },
}

/// A `--tz` value: `local` (the system's zone), `UTC`, or an IANA name (`Europe/Berlin`).
pub fn time_zone(s: &str) -> Result<jiff::tz::TimeZone, String> {
    match s {
        "local" | "system" => jiff::tz::TimeZone::try_system().map_err(|e| format!("the system's time zone: {e}")),
        name => jiff::tz::TimeZone::get(name)
            .map_err(|e| format!("`{name}`: {e} (an IANA name such as Europe/Berlin, UTC, or local)")),
    }
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
    /// Time zone of a `sacct -P` trace's times (sacct prints its host's local time, with
    /// no zone): `local`, `UTC` or an IANA name. Other formats' times are read as UTC.
    #[arg(long, default_value = "local", value_parser = time_zone)]
    tz: jiff::tz::TimeZone,
}

impl TraceInput {
    /// Jobs with known run times, in submit order.
    fn finished_jobs(&self, bar: &ProgressBar) -> anyhow::Result<(Vec<Job>, Vec<FinishedJob>)> {
        bar.set_message(format!("reading {}", self.trace.display()));
        let jobs = fairway_trace::load_path_in(self.format, &self.trace, &self.tz)?;
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
        PredictCommand::Eval { input, train_frac, model, quantile, online_step, csv, json, plot } => {
            let bar = spinner();
            let (all, jobs) = input.finished_jobs(&bar)?;
            bar.set_message(format!(
                "replaying {} jobs, training on the oldest {:.0}%",
                jobs.len(),
                100.0 * train_frac
            ));
            let eval = match &model {
                Some(file) => {
                    let m = LearnedPredictor::load(file)?;
                    predict::evaluate_model(&jobs, &m, online_step).context("evaluation failed")?
                }
                None => {
                    let cfg = TrainConfig { quantile, ..TrainConfig::default() };
                    predict::evaluate(&jobs, train_frac, &cfg, online_step).context("evaluation failed")?.0
                }
            };
            bar.finish_and_clear();
            if let Some(path) = &plot {
                let title =
                    format!("{} ({})", input.trace.file_name().unwrap_or_default().to_string_lossy(), input.format);
                plot_windows(path, &title, &eval).with_context(|| format!("writing {}", path.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&eval)?);
            } else if csv {
                print_csv(&eval)?;
            } else {
                print_table(&input, model.as_deref(), all.len(), &eval);
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

fn print_table(input: &TraceInput, model: Option<&std::path::Path>, loaded: usize, eval: &Evaluation) {
    let c = &eval.calibration;
    match model {
        None => {
            println!(
                "{} ({}): {} jobs, {} with run times; trained on the oldest {}, tested on the newest {}",
                input.trace.display(),
                input.format,
                loaded,
                eval.train_jobs + eval.test_jobs,
                eval.train_jobs,
                eval.test_jobs
            );
            println!(
                "learned model: trees fit on {} jobs, conformal {} from the next {}: \
                 {:.1}% under-predicted there, target ≤ {:.1}%",
                c.fit_jobs,
                c.describe_offsets(),
                c.calibration_jobs,
                100.0 * c.under_rate,
                100.0 * (1.0 - c.quantile)
            );
        }
        Some(file) => {
            println!(
                "{} ({}): {} jobs, {} with run times, all tested",
                input.trace.display(),
                input.format,
                loaded,
                eval.test_jobs
            );
            println!(
                "learned model {}, trained elsewhere: trees fit on {} jobs, conformal {} from {} more",
                file.display(),
                c.fit_jobs,
                c.describe_offsets(),
                c.calibration_jobs
            );
        }
    }
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
    let o = &eval.online;
    println!(
        "online calibration: step {}, shift {:+.3} (log space, ×{:.2}) after {} finished test jobs",
        o.step,
        o.shift,
        o.shift.exp(),
        o.jobs
    );
    let worst = |f: &dyn Fn(&predict::Window) -> f64| eval.windows.iter().map(f).fold(f64::NAN, f64::max);
    if !eval.windows.is_empty() {
        println!(
            "worst run of {} consecutive test jobs: {:.1}% under-predicted with fixed offsets, {:.1}% online",
            predict::WINDOW,
            100.0 * worst(&|w| w.fixed),
            100.0 * worst(&|w| w.online)
        );
    }
    for line in summary(eval) {
        println!("{line}");
    }
}

/// The typical run time's error against Tsafrir's last two, and the online upper
/// quantile's under-prediction against its target.
fn summary(eval: &Evaluation) -> Vec<String> {
    let find = |name: &str| eval.results.iter().find(|r| r.predictor == name);
    let mut lines = Vec::new();
    if let (Some(l2), Some(t)) = (find(LAST_TWO), find(LEARNED_TYPICAL)) {
        lines.push(format!("typical run time: MAE {:.2}× last two's", t.mae_s / l2.mae_s));
    }
    if let (Some(fixed), Some(q)) = (find(LEARNED), find(LEARNED_ONLINE)) {
        let target = 1.0 - eval.calibration.quantile;
        lines.push(format!(
            "upper quantile: {:.1}% under-predicted online ({:+.1} points from the target {:.1}%), {:.1}% with fixed offsets",
            100.0 * q.under_rate,
            100.0 * (q.under_rate - target),
            100.0 * target,
            100.0 * fixed.under_rate,
        ));
    }
    lines
}

/// Under-prediction of the upper quantile over runs of consecutive test jobs, offsets
/// fixed at training against calibrated online, with the target.
fn plot_windows(path: &std::path::Path, title: &str, eval: &Evaluation) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("{e}");
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let target = 100.0 * (1.0 - eval.calibration.quantile);
    let x_max = (eval.windows.last().map_or(0, |w| w.first) + predict::WINDOW).max(1) as f64;
    let y_max = eval.windows.iter().map(|w| 100.0 * w.fixed.max(w.online)).fold(2.0 * target, f64::max).min(100.0);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title}: jobs outliving the upper quantile, runs of {} test jobs", predict::WINDOW),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("test job (by submission) at the end of the run")
        .y_desc("under-predicted, %")
        .draw()
        .map_err(|e| err(&e))?;
    let end = |w: &predict::Window| (w.first + predict::WINDOW) as f64;
    type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);
    let series: [Series<'_>; 3] = [
        ("offsets fixed at training", RED, eval.windows.iter().map(|w| (end(w), 100.0 * w.fixed)).collect()),
        ("calibrated online", BLUE, eval.windows.iter().map(|w| (end(w), 100.0 * w.online)).collect()),
        ("target", BLACK, vec![(0.0, target), (x_max, target)]),
    ];
    for (label, color, points) in series {
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Runs `fairway trace ...`.
pub fn trace(cmd: TraceCommand) -> anyhow::Result<()> {
    match cmd {
        TraceCommand::Synth { jobs, seed, drift, drift_from, out, tz } => {
            if jobs == 0 {
                return Err(crate::Usage("--jobs must be at least 1".into()).into());
            }
            if !(drift.is_finite() && drift > 0.0 && (0.0..=1.0).contains(&drift_from)) {
                return Err(crate::Usage(
                    "--drift must be a positive factor and --drift-from a share between 0 and 1".into(),
                )
                .into());
            }
            let cfg = SynthConfig { jobs, seed, drift_factor: drift, drift_from, ..SynthConfig::default() };
            let trace = synth::generate(&cfg);
            if out.as_os_str() == "-" {
                fairway_trace::write_sacct_in(&trace, std::io::stdout().lock(), &tz)?;
            } else {
                let file = std::fs::File::create(&out).with_context(|| out.display().to_string())?;
                let mut w = std::io::BufWriter::new(file);
                fairway_trace::write_sacct_in(&trace, &mut w, &tz)?;
                w.flush()?;
                eprintln!("{}: {} jobs (sacct -P format; read with --format sacct)", out.display(), trace.len());
            }
            Ok(())
        }
    }
}

/// `--online-step`: a step in log space, 0 to 1.
fn online_step(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("online step {s} is not in [0, 1]"))
    }
}
