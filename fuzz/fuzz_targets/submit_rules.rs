//! Every request a user can send through sbatch/salloc/scontrol, against a full rule
//! set: the rules must answer (accept or refuse), never panic.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use fairway_core::submit::partitions::{self, Partitions};
use fairway_core::submit::{directive, evaluate, JobRequest, Mode, Site, Warn};
use fairway_core::Config;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    comment: Option<String>,
    extra: Option<String>,
    batch: bool,
    partition: Option<String>,
    qos: Option<String>,
    time_limit: Option<u32>,
    min_nodes: Option<u32>,
    num_tasks: Option<u32>,
    ntasks_per_node: Option<u32>,
    tres_per_node: Option<String>,
    tres_per_job: Option<String>,
    tres_per_task: Option<String>,
    req_switch: Option<u32>,
    requeue: Option<bool>,
    warn: Option<(u16, u16, bool)>,
    tres_bind: Option<String>,
    admin_comment: Option<String>,
    predicted: Option<u64>,
    modify: bool,
    node_gres: Option<String>,
}

fn config() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/fairway.gpu-cluster.toml");
        Config::load(&path).expect("valid example").expect("example exists")
    })
}

/// The docker cluster's nodes and partitions (GPUs per node from `Gres=`), so that the
/// check of GPUs no node has runs too.
fn cluster() -> &'static Partitions {
    static P: OnceLock<Partitions> = OnceLock::new();
    P.get_or_init(|| {
        Partitions::parse(
            "NodeName=c[1-2] Gres=gpu:h100:8\nNodeName=c[3-4] Gres=gpu:a100:4(S:0-1)\nNodeName=cpu1\n\
             PartitionName=gpu Nodes=c[1-4] Default=YES MaxTime=2-00:00:00\nPartitionName=a100 Nodes=c[3-4]\n\
             PartitionName=debug Nodes=c[1-4],cpu1 MaxTime=1:00:00\n",
        )
    })
}

fuzz_target!(|i: Input| {
    if let Some(c) = &i.comment {
        let _ = directive::find(c);
    }
    if let Some(g) = &i.node_gres {
        let _ = partitions::node_gpus(g);
    }
    let req = JobRequest {
        default_account: None,
        user_id: 1000,
        account: Some("vision".into()),
        name: Some("train".into()),
        comment: i.comment,
        extra: i.extra,
        batch: i.batch,
        partition: i.partition,
        qos: i.qos,
        time_limit: i.time_limit,
        min_nodes: i.min_nodes,
        num_tasks: i.num_tasks,
        ntasks_per_node: i.ntasks_per_node,
        tres_per_node: i.tres_per_node,
        tres_per_job: i.tres_per_job,
        tres_per_task: i.tres_per_task,
        tres_per_socket: None,
        req_switch: i.req_switch,
        wait4switch: None,
        requeue: i.requeue,
        warn: i.warn.map(|(signal, lead, batch_only)| Warn { signal, lead, batch_only }),
        tres_bind: i.tres_bind,
        cpu_bind: None,
        step_gpu_bind: None,
        admin_comment: i.admin_comment,
    };
    let predicted = i.predicted;
    let predict = move |_: &fairway_core::predict::JobRequest| predicted;
    let site = Site { partitions: cluster(), predict: &predict, now: 0 };
    let mode = if i.modify { Mode::Modify } else { Mode::Submit };
    if let Ok(o) = evaluate(&config().job_submit, &site, &req, mode) {
        // A limit the user gave is never raised. The shipped config's predicted limits may
        // shorten it for backfill's planning, and then record it as what the job's limit
        // is extended back up to before it runs out.
        if let Some(given) = req.time_limit {
            let got = o.job.time_limit.expect("a given limit stays set");
            assert!(got <= given, "limit raised from {given} to {got}");
            if got < given {
                let cap = o.job.admin_comment.as_deref().and_then(fairway_core::limits::recorded_cap);
                assert_eq!(cap, Some(given), "a shortened limit must record the user's");
            }
        }
    }
});
