//! Every loader on its fixture, bad input, and random input (never a panic).

use std::path::PathBuf;

use fairway_trace::synth::{generate, SynthConfig};
use fairway_trace::{load, load_path, pai_add_tasks, write_sacct, Format, JobState, TraceError};
use proptest::prelude::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

#[test]
fn eagle() {
    let jobs = load_path(Format::Eagle, &fixture("eagle_sample.csv")).unwrap();
    assert_eq!(jobs.len(), 1000);
    let j = &jobs[0];
    assert_eq!((j.id.as_str(), j.user.as_str(), j.account.as_str()), ("532209", "user0014", "account0003"));
    assert_eq!(
        (j.time_limit, j.runtime, j.nodes, j.cpus, j.gpus),
        (Some(172_800), Some(99_825), Some(10), Some(10), 0.0)
    );
    assert_eq!(j.submit, 1_546_332_955); // 2019-01-01 08:55:55
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(jobs.iter().filter(|j| j.state == JobState::Timeout).count(), 15);
    assert!(jobs.iter().all(|j| j.finished().is_some()));
}

#[test]
fn openb() {
    let jobs = load_path(Format::Openb, &fixture("openb_pod_list_default.csv")).unwrap();
    assert_eq!(jobs.len(), 8152);
    let j = &jobs[1]; // openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
    assert_eq!((j.gpus, j.cpus, j.qos.as_str()), (0.46, Some(6), "LS"));
    assert_eq!(j.runtime, Some(12_902_960 - 427_061));
    assert_eq!(j.time_limit, None);
    let pending = jobs.iter().filter(|j| j.state == JobState::Pending).count();
    assert_eq!(pending, 897);
    assert!(jobs.iter().filter(|j| j.start.is_none()).all(|j| j.runtime.is_none()));
}

#[test]
fn swf() {
    let jobs = load_path(Format::Swf, &fixture("lublin_256_head.swf")).unwrap();
    assert_eq!(jobs.len(), 500);
    let j = &jobs[0]; // 1 5094 -1 12072 16 ... status 1, queue 0
    assert_eq!((j.submit, j.runtime, j.cpus, j.start, j.time_limit), (5094, Some(12_072), Some(16), None, None));
    assert_eq!((j.state, j.qos.as_str(), j.user.as_str()), (JobState::Completed, "0", ""));
    assert_eq!(j.finished().unwrap().end, 5094 + 12_072);
    let with_epoch = "; UnixStartTime: 1000\n1 10 5 100 4 -1 -1 4 3600 -1 0 7 2 3 1 1 -1 -1\n";
    let j = &load(Format::Swf, with_epoch.as_bytes()).unwrap()[0];
    assert_eq!((j.submit, j.start, j.end, j.time_limit), (1010, Some(1015), Some(1115), Some(3600)));
    assert_eq!((j.user.as_str(), j.account.as_str(), j.name.as_str(), j.state), ("7", "2", "app3", JobState::Failed));
}

#[test]
fn sacct_pipe() {
    let jobs = load_path(Format::Sacct, &fixture("sacct_sample.txt")).unwrap();
    assert_eq!(jobs.len(), 4, "the .batch step is skipped");
    let a = &jobs[0];
    assert_eq!(
        (a.runtime, a.time_limit, a.gpus, a.cpus, a.nodes),
        (Some(93_600), Some(172_800), 8.0, Some(64), Some(1))
    );
    assert_eq!(a.end.unwrap() - a.start.unwrap(), 93_600);
    let b = &jobs[1];
    assert_eq!((b.time_limit, b.gpus, b.state, b.qos.as_str()), (None, 1.0, JobState::Cancelled, "high"));
    let c = &jobs[2];
    assert_eq!((c.start, c.runtime, c.time_limit, c.state), (None, None, None, JobState::Pending));
    let d = &jobs[3];
    assert_eq!((d.id.as_str(), d.runtime, d.time_limit, d.gpus), ("1004_3", Some(3599), Some(3600), 0.0));
}

#[test]
fn sacct_local_times_across_a_daylight_saving_change() {
    // Berlin moved its clocks from 02:00 to 03:00 on 2024-03-31: sacct on a host there
    // printed a job submitted at 01:30 and started at 03:30 one hour later, not two.
    let text = "JobID|User|Submit|Start|End|Elapsed|State\n\
                1|u|2024-03-31T01:30:00|2024-03-31T03:30:00|2024-03-31T04:30:00|01:00:00|COMPLETED\n";
    let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let jobs = fairway_trace::load_sacct_in(text.as_bytes(), &berlin).unwrap();
    let j = &jobs[0];
    assert_eq!(j.start.unwrap() - j.submit, 3600, "waited one real hour");
    assert_eq!(j.submit, 1_711_845_000, "01:30 CET is 00:30 UTC");
    let utc = fairway_trace::load_sacct(text.as_bytes()).unwrap();
    assert_eq!(utc[0].start.unwrap() - utc[0].submit, 7200, "read as UTC, the change is lost");

    // Written in a zone and read back in it, every time is the same instant.
    let mut out = Vec::new();
    fairway_trace::write_sacct_in(&jobs, &mut out, &berlin).unwrap();
    assert!(String::from_utf8_lossy(&out).contains("|2024-03-31T03:30:00|"), "{}", String::from_utf8_lossy(&out));
    let back = fairway_trace::load_sacct_in(out.as_slice(), &berlin).unwrap();
    assert_eq!((back[0].submit, back[0].start, back[0].end), (j.submit, j.start, j.end));
}

#[test]
fn sacct_json() {
    let jobs = load_path(Format::SacctJson, &fixture("sacct_24.11.json")).unwrap();
    assert_eq!(jobs.len(), 2);
    let a = &jobs[0];
    assert_eq!(
        (a.runtime, a.time_limit, a.gpus, a.cpus, a.nodes),
        (Some(93_600), Some(172_800), 8.0, Some(64), Some(1))
    );
    assert_eq!(a.state, JobState::Completed);
    let b = &jobs[1];
    assert_eq!((b.start, b.runtime, b.time_limit, b.cpus, b.nodes), (None, None, None, Some(16), Some(2)));
    let old = load_path(Format::SacctJson, &fixture("sacct_22.05.json")).unwrap();
    assert_eq!(
        (old[0].time_limit, old[0].state, old[0].gpus, old[0].nodes),
        (Some(14_400), JobState::Failed, 4.0, Some(2))
    );
}

#[test]
fn helios_philly_pai_schemas() {
    let h = load_path(Format::Helios, &fixture("helios_sample.csv")).unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!((h[0].account.as_str(), h[0].gpus, h[0].runtime, h[0].nodes), ("vc01", 8.0, Some(7200), Some(1)));
    assert_eq!((h[2].runtime, h[2].state), (None, JobState::Failed));

    let p = load_path(Format::Philly, &fixture("philly_sample.json")).unwrap();
    assert_eq!(p.len(), 2);
    assert_eq!(
        (p[0].runtime, p[0].gpus, p[0].nodes, p[0].state),
        (Some(600 + 1800), 4.0, Some(2), JobState::Completed)
    );
    assert_eq!((p[1].runtime, p[1].state), (None, JobState::Cancelled));

    let mut pai = load_path(Format::Pai, &fixture("pai_job_table_sample.csv")).unwrap();
    assert_eq!(pai.len(), 3);
    assert_eq!((pai[0].submit, pai[0].runtime, pai[0].state), (1000, Some(3600), JobState::Completed));
    let tasks = std::fs::read(fixture("pai_task_table_sample.csv")).unwrap();
    pai_add_tasks(&mut pai, tasks.as_slice()).unwrap();
    assert_eq!((pai[0].gpus, pai[0].cpus, pai[0].start, pai[0].runtime), (2.0, Some(16), Some(1050), Some(3550)));
    assert_eq!((pai[1].gpus, pai[1].key().gpus), (0.25, 1));
    assert_eq!(pai[2].runtime, None);
}

#[test]
fn errors_name_the_line() {
    let cases: [(Format, &str, &str); 6] = [
        (
            Format::Sacct,
            "JobID|Submit|Timelimit\n1|2024-01-01T00:00:00|1:00:00\n2|2024-01-01T00:00:00|soon\n",
            "line 3",
        ),
        (Format::Sacct, "User|State\nx|COMPLETED\n", "line 1"),
        (Format::Swf, "; c\n1 2 3\n", "line 2"),
        (Format::Eagle, "job_id,submit_time,run_time,wallclock_req\n1,2019-01-01 00:00:00,ten,60\n", "line 2"),
        (Format::SacctJson, "{\"jobs\": [\n{\"job_id\": 1,\n \"time\": {}}]}", "jobs[0]"),
        (Format::Philly, "[\n{\"jobid\": 1}]", "line 2"),
    ];
    for (format, text, want) in cases {
        let err: TraceError = load(format, text.as_bytes()).unwrap_err();
        assert!(err.to_string().contains(want), "{format}: {err}");
    }
}

#[test]
fn synthetic_drift_slows_the_later_jobs_only() {
    let cfg = SynthConfig { jobs: 1000, seed: 7, ..Default::default() };
    let plain = generate(&cfg);
    let drifted = generate(&SynthConfig { drift_from: 0.6, drift_factor: 3.0, ..cfg });
    for (i, (a, b)) in plain.iter().zip(&drifted).enumerate() {
        assert_eq!((&a.name, a.submit, a.time_limit), (&b.name, b.submit, b.time_limit));
        let (ra, rb) = (a.runtime.unwrap(), b.runtime.unwrap());
        if i < 600 {
            assert_eq!(a, b);
        } else if b.state != JobState::Timeout {
            assert!(rb.abs_diff(3 * ra) <= 2, "job {i}: {ra} s became {rb} s");
        } else {
            assert_eq!(rb, b.time_limit.unwrap(), "cut short by the same limit");
        }
    }
    assert!(drifted[600..].iter().filter(|j| j.state == JobState::Timeout).count() > 20);
}

#[test]
fn synthetic_workload_round_trips_through_sacct() {
    let cfg = SynthConfig { jobs: 500, seed: 42, ..Default::default() };
    let jobs = generate(&cfg);
    assert_eq!(jobs, generate(&cfg), "same seed, same trace");
    assert_ne!(jobs, generate(&SynthConfig { seed: 43, ..cfg.clone() }));
    assert!(jobs.windows(2).all(|w| w[0].submit <= w[1].submit));
    assert!(jobs.iter().all(|j| j.runtime.unwrap() <= j.time_limit.unwrap()));
    let count = |s| jobs.iter().filter(|j| j.state == s).count();
    assert!(count(JobState::Failed) > 10 && count(JobState::Cancelled) > 10 && count(JobState::Completed) > 300);
    let names: std::collections::HashSet<_> = jobs.iter().map(|j| &j.name).collect();
    assert!(names.len() < 200, "job names recur");
    let mut out = Vec::new();
    write_sacct(&jobs, &mut out).unwrap();
    let back = load(Format::Sacct, out.as_slice()).unwrap();
    assert_eq!(back, jobs);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for (_, format) in Format::ALL {
            let _ = load(format, bytes.as_slice());
        }
    }

    #[test]
    fn random_lines_never_panic(lines in proptest::collection::vec("[-0-9a-zA-Z_:|,;. T{}\\[\\]\"]{0,60}", 0..8)) {
        let headers = [
            "JobID|User|Submit|Start|End|Elapsed|Timelimit|AllocTRES|State\n",
            "job_id,user,submit_time,start_time,end_time,run_time,wallclock_req,gpus_req,nodes_req\n",
            "name,cpu_milli,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n",
            "job_id,user,vc,gpu_num,submit_time,start_time,end_time,duration\n",
            "",
        ];
        for header in headers {
            let text = format!("{header}{}", lines.join("\n"));
            for (_, format) in Format::ALL {
                let _ = load(format, text.as_bytes());
            }
        }
    }
}
