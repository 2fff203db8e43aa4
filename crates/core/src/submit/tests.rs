//! The rules, one by one, on requests shaped as `sbatch` sends them.

use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::Config;

const TOML: &str = r#"
[job_submit.qos]
interactive = "interactive"
interactive_max_time = "4:00:00"
batch = "normal"
opportunistic = "scavenger"
preemptible = ["scavenger"]

[[job_submit.gpu]]
name = "h100"
memory_gb = 80
per_node = 8
nvlink_domain = 8
partitions = ["gpu"]

[[job_submit.gpu]]
name = "a100"
memory_gb = 80
per_node = 4
nvlink_domain = 2
partitions = ["gpu", "a100"]

[job_submit.partition.gpu]
allowed_qos = ["normal", "high", "scavenger"]
gang_switches = 1
gang_switches_wait = "10:00"

[job_submit.checkpoint]
signal = "B:USR1"
lead_factor = 2.0
min_lead = "1:00"

[job_submit.binding]
gpu_bind = "closest"
cpu_bind = "cores"

[job_submit.time]
auto_margin = 0.25
record_prediction = true
"#;

fn cfg() -> JobSubmitConfig {
    Config::parse(TOML, Path::new("fairway.toml")).unwrap().job_submit
}

fn parts() -> Partitions {
    Partitions::parse("PartitionName=gpu Default=YES MaxTime=2-00:00:00\nPartitionName=a100 MaxTime=12:00:00\n")
}

fn job(comment: &str) -> JobRequest {
    JobRequest {
        user_id: 1001,
        account: Some("vision".into()),
        name: Some("ft".into()),
        comment: (!comment.is_empty()).then(|| comment.to_string()),
        batch: true,
        ..JobRequest::default()
    }
}

fn run_with(
    req: &JobRequest,
    predict: &dyn Fn(&crate::predict::JobRequest) -> Option<u64>,
) -> Result<Outcome, Rejection> {
    let p = parts();
    evaluate(&cfg(), &Site { partitions: &p, predict, now: 0 }, req, Mode::Submit)
}

fn run(req: &JobRequest) -> Result<Outcome, Rejection> {
    run_with(req, &|_| None)
}

fn msg(r: Result<Outcome, Rejection>) -> String {
    r.expect_err("should be refused").message
}

#[test]
fn a_job_without_directive_or_gpus_only_gets_its_tier_qos() {
    let o = run(&job("")).unwrap();
    assert_eq!(o.job.qos.as_deref(), Some("normal"));
    assert_eq!(o.job.tres_per_node, None);
    assert_eq!(o.job.tres_bind, None);
    assert_eq!(o.notes, ["QoS normal (batch tier)"]);
}

#[test]
fn an_empty_config_changes_nothing() {
    let p = parts();
    let req = JobRequest { tres_per_node: Some("gres:gpu:3".into()), min_nodes: Some(2), ..job("fairway: model=70b") };
    let o = evaluate(
        &JobSubmitConfig::default(),
        &Site { partitions: &p, predict: &|_| Some(60), now: 0 },
        &req,
        Mode::Submit,
    )
    .unwrap();
    assert_eq!(o.job, req);
    assert!(o.notes.is_empty());
}

#[test]
fn directive_errors_reach_the_user() {
    let m = msg(run(&job("fairway: model=70b methd=full")));
    assert!(m.starts_with("fairway: unknown key `methd`: did you mean `method`?"), "{m}");
}

#[test]
fn gpus_are_chosen_when_the_user_asked_for_none() {
    let o = run(&job("fairway: model=70b method=full precision=bf16")).unwrap();
    assert_eq!(o.job.tres_per_node.as_deref(), Some("gres:gpu:h100:8"));
    assert_eq!(o.job.min_nodes, Some(2));
    assert_eq!(o.job.partition.as_deref(), Some("gpu"));
    assert_eq!(
        o.notes[0],
        "70B full fine-tune in bf16 needs about 1.12 TB (1.02 TiB) of GPU memory; set --nodes=2 \
         --gpus-per-node=h100:8 --partition=gpu"
    );
    let o = run(&job("fairway: model=8b method=lora")).unwrap();
    assert_eq!((o.job.tres_per_node.as_deref(), o.job.min_nodes), (Some("gres:gpu:h100:1"), None));
    let o = run(&JobRequest { partition: Some("a100".into()), ..job("fairway: model=30b") }).unwrap();
    assert_eq!((o.job.tres_per_node.as_deref(), o.job.min_nodes), (Some("gres:gpu:a100:4"), Some(2)));
}

#[test]
fn under_provisioned_requests_are_refused_with_the_arithmetic() {
    let req = JobRequest {
        tres_per_node: Some("gres:gpu:a100:4".into()),
        ..job("fairway: model=70b method=full precision=bf16")
    };
    assert_eq!(
        msg(run(&req)),
        "fairway: 70B full fine-tune in bf16 needs about 1.12 TB (1.02 TiB) of GPU memory for weights, gradients \
         and Adam state; you asked for 4 × a100 (320 GB); ask for at least 16 × a100 (--nodes=4 --gpus-per-node=a100:4)"
    );
    let req = JobRequest { tres_per_job: Some("gres:gpu:2".into()), ..job("fairway: model=70b") };
    assert!(msg(run(&req)).contains("you asked for 2 × h100"));
}

#[test]
fn an_explicit_request_that_fits_is_never_overridden() {
    let req = JobRequest {
        tres_per_node: Some("gres:gpu:h100:8".into()),
        min_nodes: Some(4),
        partition: Some("gpu".into()),
        qos: Some("high".into()),
        time_limit: Some(600),
        ..job("fairway: model=70b method=full")
    };
    let o = run(&req).unwrap();
    assert_eq!(o.job.tres_per_node, req.tres_per_node);
    assert_eq!((o.job.min_nodes, o.job.qos.as_deref(), o.job.time_limit), (Some(4), Some("high"), Some(600)));
}

#[test]
fn gangs_get_the_same_gpus_on_every_node() {
    let req = JobRequest { tres_per_job: Some("gres:gpu:h100:16".into()), min_nodes: Some(2), ..job("") };
    let o = run(&req).unwrap();
    assert_eq!((o.job.tres_per_node.as_deref(), o.job.tres_per_job.as_deref()), (Some("gres:gpu:h100:8"), None));
    let req = JobRequest { tres_per_job: Some("gres:gpu:h100:12".into()), min_nodes: Some(5), ..job("") };
    assert_eq!(
        msg(run(&req)),
        "fairway: a 5-node job must have the same GPUs on every node, and 12 GPUs do not split evenly over 5 \
         nodes; nearest valid shape: --nodes=5 --gpus-per-node=h100:3"
    );
}

#[test]
fn gangs_use_whole_nvlink_domains() {
    let req = JobRequest { tres_per_node: Some("gres:gpu:a100:3".into()), min_nodes: Some(2), ..job("") };
    assert_eq!(
        msg(run(&req)),
        "fairway: 3 GPUs per node straddle the NVLink domains of 2 GPUs on a100 nodes; nearest valid shape: \
         --nodes=2 --gpus-per-node=a100:4 (or --nodes=2 --gpus-per-node=a100:2)"
    );
    let req = JobRequest { tres_per_node: Some("gres:gpu:h100:9".into()), min_nodes: Some(2), ..job("") };
    assert!(
        msg(run(&req)).contains("a h100 node has only 8 GPUs; nearest valid shape: --nodes=2 --gpus-per-node=h100:8")
    );
    for ok in ["gres:gpu:a100:2", "gres:gpu:a100:4", "gres:gpu:h100:4", "gres:gpu:h100:1"] {
        let req = JobRequest { tres_per_node: Some(ok.into()), min_nodes: Some(2), ..job("") };
        assert!(run(&req).is_ok(), "{ok}");
    }
    let req = JobRequest { tres_per_node: Some("gres:gpu:4".into()), min_nodes: Some(2), ..job("") };
    assert!(msg(run(&req)).contains("must name one GPU type"));
}

#[test]
fn gang_tasks_match_gpus() {
    let base = JobRequest { tres_per_node: Some("gres:gpu:h100:8".into()), min_nodes: Some(2), ..job("") };
    for (tpn, ok) in [(8, true), (1, true), (4, false)] {
        let r = run(&JobRequest { ntasks_per_node: Some(tpn), ..base.clone() });
        assert_eq!(r.is_ok(), ok, "{tpn}");
    }
    let m = msg(run(&JobRequest { num_tasks: Some(12), ..base.clone() }));
    assert!(m.contains("use --ntasks=16 (one rank per GPU) or --ntasks=2"), "{m}");
    let o = run(&base).unwrap();
    assert_eq!((o.job.req_switch, o.job.wait4switch), (Some(1), Some(600)));
    let o = run(&JobRequest { req_switch: Some(2), ..base }).unwrap();
    assert_eq!((o.job.req_switch, o.job.wait4switch), (Some(2), None));
}

#[test]
fn qos_by_tier_and_forbidden_combinations() {
    let interactive = JobRequest { batch: false, time_limit: Some(60), partition: Some("a100".into()), ..job("") };
    assert_eq!(run(&interactive).unwrap().job.qos.as_deref(), Some("interactive"));
    let long = JobRequest { time_limit: Some(600), ..interactive.clone() };
    assert_eq!(run(&long).unwrap().job.qos.as_deref(), Some("normal"));
    let sweep = run(&job("fairway: tier=opportunistic")).unwrap();
    assert_eq!(sweep.job.qos.as_deref(), Some("scavenger"));
    // The interactive QoS is not allowed in the gpu partition (the default).
    let m = msg(run(&JobRequest { partition: None, ..interactive }));
    assert_eq!(m, "fairway: QoS interactive is not allowed in partition gpu; allowed there: normal, high, scavenger");
    let m = msg(run(&JobRequest { qos: Some("debug".into()), ..job("") }));
    assert!(m.contains("QoS debug is not allowed in partition gpu"), "{m}");
    // Allowed in one of the listed partitions is not enough: Slurm may run it in the other.
    let m = msg(run(&JobRequest { qos: Some("debug".into()), partition: Some("a100,gpu".into()), ..job("") }));
    assert_eq!(
        m,
        "fairway: QoS debug is not allowed in partition gpu (Slurm may run the job in any partition it lists); \
         allowed there: normal, high, scavenger"
    );
    assert!(run(&JobRequest { qos: Some("high".into()), partition: Some("a100,gpu".into()), ..job("") }).is_ok());
    // Several QoS (Slurm 24.11): every one must be allowed, and the refusal names the one that is not.
    assert!(run(&JobRequest { qos: Some("high,normal".into()), ..job("") }).is_ok());
    let m = msg(run(&JobRequest { qos: Some("high,interactive".into()), ..job("") }));
    assert!(m.contains("QoS interactive is not allowed in partition gpu"), "{m}");
}

#[test]
fn checkpointing_jobs_in_preemptible_qos_get_requeue_and_a_signal() {
    let o = run(&job("fairway: tier=opportunistic ckpt=5m")).unwrap();
    assert_eq!(o.job.requeue, Some(true));
    assert_eq!(o.job.warn, Some(Warn { signal: 10, lead: 600, batch_only: true }));
    // The user's own choices stand, and non-preemptible QoS get nothing.
    let own = JobRequest {
        requeue: Some(false),
        warn: Some(Warn { signal: 12, lead: 30, batch_only: false }),
        ..job("fairway: tier=opportunistic ckpt=5m")
    };
    let o = run(&own).unwrap();
    assert_eq!((o.job.requeue, o.job.warn), (own.requeue, own.warn));
    let o = run(&job("fairway: ckpt=5m")).unwrap();
    assert_eq!((o.job.requeue, o.job.warn), (None, None));
    let o = run(&job("fairway: tier=opportunistic ckpt=10s")).unwrap();
    assert_eq!(o.job.warn.unwrap().lead, 60);
}

#[test]
fn gpu_jobs_get_binding_defaults_unless_they_chose() {
    let gpus = JobRequest { tres_per_node: Some("gres:gpu:h100:2".into()), ..job("") };
    let o = run(&gpus).unwrap();
    assert_eq!((o.job.tres_bind.as_deref(), o.job.cpu_bind), (Some("gpu:closest"), Some(CpuBind::Cores)));
    // Steps inside a batch job learn it from SLURM_GPU_BIND; salloc has no environment to set.
    assert_eq!(o.job.step_gpu_bind.as_deref(), Some("closest"));
    let o = run(&JobRequest { batch: false, ..gpus.clone() }).unwrap();
    assert_eq!((o.job.tres_bind.as_deref(), o.job.step_gpu_bind), (Some("gpu:closest"), None));
    // SLURM_GPU_BIND exported before sbatch is the user's choice too.
    let exported = JobRequest { step_gpu_bind: Some("none".into()), ..gpus };
    let o = run(&exported).unwrap();
    assert_eq!((o.job.tres_bind, o.job.step_gpu_bind), (None, exported.step_gpu_bind));
    let own = JobRequest {
        tres_per_node: Some("gres:gpu:h100:2".into()),
        tres_bind: Some("gpu:single:1".into()),
        cpu_bind: Some(CpuBind::Sockets),
        ..job("")
    };
    let o = run(&own).unwrap();
    assert_eq!((o.job.tres_bind, o.job.cpu_bind), (own.tres_bind, own.cpu_bind));
    assert_eq!(run(&job("")).unwrap().job.cpu_bind, None);
}

#[test]
fn time_auto_uses_the_prediction_capped_by_the_partition() {
    let req = JobRequest { partition: Some("a100".into()), ..job("fairway: time=auto") };
    let o = run_with(&req, &|r| (r.key.name == "ft").then_some(3600)).unwrap();
    assert_eq!(o.job.time_limit, Some(75));
    assert_eq!(o.job.admin_comment.as_deref(), Some("fairway:predicted_runtime=3600"));
    let o = run_with(&req, &|_| Some(100 * 3600)).unwrap();
    assert_eq!(o.job.time_limit, Some(720));
    assert!(o.notes.iter().any(|n| n.contains("capped by the partition's MaxTime")));
    // Never shortens a limit the user gave; no history means the partition default.
    let o = run_with(&JobRequest { time_limit: Some(30), ..req.clone() }, &|_| Some(7200)).unwrap();
    assert_eq!((o.job.time_limit, o.predicted), (Some(30), Some(1800)));
    let o = run(&req).unwrap();
    assert_eq!(o.job.time_limit, None);
    assert_eq!(o.job.admin_comment.as_deref(), Some("fairway:predicted_runtime=unknown"));
}

#[test]
fn a_job_that_names_no_account_is_predicted_under_its_users_default() {
    let by_account = |r: &crate::predict::JobRequest| (r.key.account == "vision").then_some(600);
    let req = JobRequest { account: None, default_account: Some("vision".into()), ..job("") };
    assert_eq!(run_with(&req, &by_account).unwrap().predicted, Some(600));
    // The account it names wins, and the rules leave the account as they found it.
    let named = JobRequest { account: Some("nlp".into()), ..req.clone() };
    assert_eq!(run_with(&named, &by_account).unwrap().predicted, None);
    assert_eq!(run_with(&req, &by_account).unwrap().job.account, None);
}

#[test]
fn extended_predicted_limits_record_what_they_may_grow_to() {
    use crate::limits::{recorded_cap, UNLIMITED};
    use crate::submit::config::PredictedLimits;
    let p = parts();
    let with = |mode, req: &JobRequest, predicted: Option<u64>| {
        let mut c = cfg();
        c.time.predicted_limits = mode;
        c.time.min_predicted_limit = None;
        evaluate(&c, &Site { partitions: &p, predict: &|_| predicted, now: 0 }, req, Mode::Submit).unwrap()
    };
    let auto = JobRequest { partition: Some("a100".into()), ..job("fairway: time=auto") };
    // time=auto without --time: up to the partition's MaxTime (12 h).
    let o = with(PredictedLimits::Extended, &auto, Some(3600));
    assert_eq!(o.job.time_limit, Some(75));
    assert_eq!(o.job.admin_comment.as_deref().and_then(recorded_cap), Some(720));
    assert!(o.notes.iter().any(|n| n.contains("extended before it runs out up to 720 minutes")), "{:?}", o.notes);
    // With --time, which is what it may grow to (on request it would be left alone).
    let timed = JobRequest { time_limit: Some(300), ..auto.clone() };
    let o = with(PredictedLimits::Extended, &timed, Some(600));
    assert_eq!((o.job.time_limit, o.job.admin_comment.as_deref().and_then(recorded_cap)), (Some(13), Some(300)));
    assert_eq!(with(PredictedLimits::OnRequest, &timed, Some(600)).job.time_limit, Some(300));
    // A prediction at or over the cap changes nothing; no history changes nothing.
    let o = with(PredictedLimits::Extended, &JobRequest { time_limit: Some(10), ..auto.clone() }, Some(600));
    assert_eq!((o.job.time_limit, o.job.admin_comment.as_deref().and_then(recorded_cap)), (Some(10), None));
    assert_eq!(with(PredictedLimits::Extended, &auto, None).job.time_limit, None);
    // Every job with history under all_jobs; only time=auto jobs under extended.
    let plain = JobRequest { partition: Some("a100".into()), time_limit: Some(600), ..job("") };
    assert_eq!(with(PredictedLimits::AllJobs, &plain, Some(600)).job.time_limit, Some(13));
    assert_eq!(with(PredictedLimits::Extended, &plain, Some(600)).job.time_limit, Some(600));
    // Slurm's NO_VAL as a limit (never sent for a set --time) is left alone; INFINITE is
    // what it may grow to.
    let no_val = JobRequest { time_limit: Some(u32::MAX - 1), ..plain.clone() };
    assert_eq!(with(PredictedLimits::AllJobs, &no_val, Some(600)).job.time_limit, Some(u32::MAX - 1));
    let infinite = JobRequest { time_limit: Some(u32::MAX), ..plain.clone() };
    let o = with(PredictedLimits::AllJobs, &infinite, Some(600));
    assert_eq!((o.job.time_limit, o.job.admin_comment.as_deref().and_then(recorded_cap)), (Some(13), Some(UNLIMITED)));
    // A partition without MaxTime: no limit to grow to.
    let p2 = Partitions::parse("PartitionName=open Default=YES MaxTime=UNLIMITED\n");
    let mut c = cfg();
    c.time.predicted_limits = PredictedLimits::AllJobs;
    let o = evaluate(&c, &Site { partitions: &p2, predict: &|_| Some(60), now: 0 }, &job(""), Mode::Submit).unwrap();
    assert_eq!((o.job.time_limit, o.job.admin_comment.as_deref().and_then(recorded_cap)), (Some(10), Some(UNLIMITED)));
    // The shortest extended limit (10 minutes by default) outlasts a PriorityCalcPeriod.
    c.time.min_predicted_limit = None;
    let o = evaluate(&c, &Site { partitions: &p2, predict: &|_| Some(60), now: 0 }, &job(""), Mode::Submit).unwrap();
    assert_eq!(o.job.time_limit, Some(2));
}

#[test]
fn the_recorded_prediction_reads_back() {
    let req = JobRequest { partition: Some("a100".into()), ..job("fairway: time=auto") };
    let o = run_with(&req, &|_| Some(3600)).unwrap();
    assert_eq!(o.job.admin_comment.as_deref().and_then(recorded_prediction), Some(3600));
    let with_note = JobRequest { admin_comment: Some("ticket 42".into()), ..req };
    let o = run_with(&with_note, &|_| Some(90)).unwrap();
    assert_eq!(o.job.admin_comment.as_deref(), Some("ticket 42 fairway:predicted_runtime=90"));
    assert_eq!(recorded_prediction(o.job.admin_comment.as_deref().unwrap()), Some(90));
    assert_eq!(recorded_prediction("fairway:predicted_runtime=unknown"), None);
    assert_eq!(recorded_prediction("fairway:predicted_runtime=5 fairway:predicted_runtime=9"), Some(9));
    assert_eq!(recorded_prediction("nothing here"), None);
}

#[test]
fn an_update_that_cannot_be_checked_against_the_job_is_refused_only_where_rules_apply() {
    let time_only = JobRequest { time_limit: Some(30), name: Some("renamed".into()), ..JobRequest::default() };
    assert_eq!(check_update_without_job(&time_only), Ok(()));
    let reshape = JobRequest {
        tres_per_node: Some("gres/gpu:a100:3".into()),
        req_switch: Some(1),
        wait4switch: Some(300),
        ..JobRequest::default()
    };
    let r = check_update_without_job(&reshape).unwrap_err();
    assert_eq!(r.kind, RejectKind::Unchecked);
    assert!(r.message.contains("a change of --gres/--gpus-per-node, --switches cannot be checked"), "{}", r.message);
    for field in [
        JobRequest { qos: Some("high".into()), ..JobRequest::default() },
        JobRequest { partition: Some("gpu".into()), ..JobRequest::default() },
        JobRequest { comment: Some("fairway: tier=batch".into()), ..JobRequest::default() },
        JobRequest { min_nodes: Some(3), ..JobRequest::default() },
    ] {
        assert!(check_update_without_job(&field).is_err(), "{field:?}");
    }
}

#[test]
fn modify_checks_without_filling_in() {
    let p = parts();
    let site = Site { partitions: &p, predict: &|_| Some(60), now: 0 };
    let req = JobRequest { qos: Some("interactive".into()), ..job("") };
    assert!(evaluate(&cfg(), &site, &req, Mode::Modify).unwrap_err().message.contains("not allowed"));
    let o = evaluate(&cfg(), &site, &job("fairway: model=70b time=auto"), Mode::Modify).unwrap();
    assert_eq!(o.job, job("fairway: model=70b time=auto"));
}

proptest! {
    #[test]
    fn no_request_panics(
        comment in prop::option::of(".{0,120}"),
        directive in prop::option::of("(model=[0-9]{1,4}[mbt] |method=(full|lora|qlora|infer) |seq=[0-9]{1,5}k? |batch=[0-9]{1,4} |ckpt=[0-9]{1,5}[smh]? |tier=(batch|opportunistic) |time=auto ){0,6}"),
        per_node in prop::option::of("gres:gpu(:(h100|a100|x))?(:[0-9]{1,3})?"),
        per_job in prop::option::of("gres:gpu(:(h100|a100))?:[0-9]{1,3}"),
        nodes in prop::option::of(prop_oneof![0u32..100, any::<u32>()]),
        tasks in prop::option::of(prop_oneof![0u32..1000, any::<u32>()]),
        tpn in prop::option::of(0u32..64),
        time in prop::option::of(0u32..100_000),
        partition in prop::option::of("(gpu|a100|cpu|gpu,a100)"),
        batch in any::<bool>(),
        predicted in prop::option::of(any::<u64>()),
    ) {
        let comment = match (comment, directive) {
            (_, Some(d)) => Some(format!("fairway: {d}")),
            (c, None) => c,
        };
        let req = JobRequest {
            comment, tres_per_node: per_node, tres_per_job: per_job, min_nodes: nodes, num_tasks: tasks,
            ntasks_per_node: tpn, time_limit: time, partition, batch, ..job("")
        };
        for mode in [Mode::Submit, Mode::Modify] {
            let p = parts();
            if let Ok(o) = evaluate(&cfg(), &Site { partitions: &p, predict: &|_| predicted, now: 0 }, &req, mode) {
                // What the user set explicitly and kept is never shortened.
                if let (Some(t), Some(u)) = (o.job.time_limit, req.time_limit) { prop_assert_eq!(t, u); }
                if req.qos.is_some() { prop_assert_eq!(&o.job.qos, &req.qos); }
            }
        }
    }
}

#[test]
fn changes_are_recorded_in_the_admin_comment_only_when_asked() {
    let req = JobRequest { partition: Some("a100".into()), ..job("fairway: time=auto") };
    let o = run_with(&req, &|_| Some(3600)).unwrap();
    assert!(!o.notes.is_empty());
    assert_eq!(o.job.admin_comment.as_deref(), Some("fairway:predicted_runtime=3600"), "off by default");

    let cfg = JobSubmitConfig { record_changes: true, ..cfg() };
    let p = parts();
    let site = Site { partitions: &p, predict: &|_| Some(3600), now: 0 };
    let with_note = JobRequest { admin_comment: Some("ticket 42".into()), ..req };
    let o = evaluate(&cfg, &site, &with_note, Mode::Submit).unwrap();
    let comment = o.job.admin_comment.clone().unwrap();
    assert!(comment.starts_with("ticket 42 fairway:predicted_runtime=3600 fairway:changed="), "{comment}");
    assert_eq!(recorded_changes(&comment), Some(o.notes.clone()), "{comment}");
    assert_eq!(recorded_prediction(&comment), Some(3600), "the prediction still reads back");
    // An update changes nothing, so records nothing.
    let o = evaluate(&cfg, &site, &job(""), Mode::Modify).unwrap();
    assert_eq!(o.job.admin_comment, None);
    assert_eq!(
        recorded_changes("fairway:changed=a; b | c fairway:predicted_runtime=1"),
        Some(vec!["a; b".into(), "c".into()])
    );
    assert_eq!(recorded_changes("ticket 42"), None);
}

/// The docker cluster's slurm.conf: h100 and a100 nodes, one partition of each and a
/// shared one, and a CPU-only partition.
fn cluster_parts() -> Partitions {
    Partitions::parse(
        "NodeName=c[1-2] Sockets=2 Gres=gpu:h100:8 State=UNKNOWN\nNodeName=c[3-4] Gres=gpu:a100:4(S:0-1)\n\
         NodeName=cpu1\nPartitionName=gpu Nodes=c[1-4] Default=YES\nPartitionName=a100 Nodes=c[3-4]\n\
         PartitionName=cpu Nodes=cpu1\nPartitionName=set Nodes=gpunodes\n",
    )
}

fn run_on(parts: &Partitions, req: &JobRequest) -> Result<Outcome, Rejection> {
    evaluate(&JobSubmitConfig::default(), &Site { partitions: parts, predict: &|_| None, now: 0 }, req, Mode::Submit)
}

#[test]
fn gpus_no_node_of_the_partition_has_are_refused_with_what_it_has() {
    let p = cluster_parts();
    let ask = |partition: Option<&str>, tres: &str| JobRequest {
        partition: partition.map(str::to_string),
        tres_per_node: Some(tres.into()),
        ..job("")
    };
    let m = msg(run_on(&p, &ask(None, "gres:gpu:v100:1")));
    assert_eq!(m, "fairway: no node of partition gpu has GPUs of type v100 (they have a100 ×4, h100 ×8 per node)");
    let m = msg(run_on(&p, &ask(Some("a100"), "gres:gpu:h100:2")));
    assert_eq!(
        m,
        "fairway: no node of partition a100 has GPUs of type h100 (they have a100 ×4 per node); \
         partition gpu has them: --partition=gpu"
    );
    let m = msg(run_on(&p, &ask(Some("a100"), "gres:gpu:a100:8")));
    assert_eq!(
        m,
        "fairway: no node of partition a100 has 8 GPUs of type a100 (at most 4 per node); spread them over more \
         nodes, e.g. --nodes=2 --gpus-per-node=a100:4"
    );
    let m = msg(run_on(&p, &JobRequest { min_nodes: Some(2), ..ask(None, "gres:gpu:h100:12") }));
    assert!(m.contains("e.g. --nodes=3 --gpus-per-node=h100:8"), "{m}");
    let m = msg(run_on(&p, &ask(Some("cpu"), "gres:gpu:1")));
    assert_eq!(
        m,
        "fairway: no node of partition cpu has GPUs (they have no GPUs); partitions gpu, a100 have them: \
         --partition=gpu"
    );
    // Per job and per task, the type is checked; the count spreads over nodes.
    let per_job = JobRequest { tres_per_job: Some("gres:gpu:v100:16".into()), ..job("") };
    assert!(msg(run_on(&p, &per_job)).contains("type v100"));
    assert!(run_on(&p, &JobRequest { tres_per_job: Some("gres:gpu:h100:16".into()), ..job("") }).is_ok());
    // Any one listed partition that has them is enough, as for Slurm.
    assert!(run_on(&p, &ask(Some("cpu,a100"), "gres:gpu:a100:4")).is_ok());
    let m = msg(run_on(&p, &ask(Some("cpu,a100"), "gres:gpu:h100:1")));
    assert!(m.contains("partition cpu,a100 has GPUs of type h100 (they have cpu: no GPUs; a100: a100 ×4"), "{m}");
    // What fits passes; a partition slurm.conf does not describe is not judged.
    assert!(run_on(&p, &ask(None, "gres:gpu:h100:8")).is_ok());
    assert!(run_on(&p, &ask(None, "gres:gpu:8")).is_ok());
    assert!(run_on(&p, &ask(Some("set"), "gres:gpu:v100:1")).is_ok());
    assert!(run_on(&p, &ask(Some("nope"), "gres:gpu:v100:1")).is_ok());
    assert!(run_on(&parts(), &ask(None, "gres:gpu:v100:1")).is_ok());
}

#[test]
fn untyped_gpus_in_slurm_conf_may_be_of_any_type() {
    // With AutoDetect, slurm.conf may say `gpu:8` and slurmd reports the type.
    let p = Partitions::parse("NodeName=n[1-2] Gres=gpu:8\nPartitionName=all Nodes=ALL Default=YES\n");
    let req = JobRequest { tres_per_node: Some("gres:gpu:h100:8".into()), ..job("") };
    assert!(run_on(&p, &req).is_ok());
    let req = JobRequest { tres_per_node: Some("gres:gpu:h100:9".into()), ..job("") };
    assert!(msg(run_on(&p, &req)).contains("at most 8 per node"));
    // Dynamic nodes may join Nodes=ALL: not judged.
    let p = Partitions::parse("MaxNodeCount=64\nNodeName=n1 Gres=gpu:8\nPartitionName=all Nodes=ALL Default=YES\n");
    assert!(run_on(&p, &req).is_ok());
}
