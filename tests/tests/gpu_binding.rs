//! Binding on the host's Slurm (22.05): with job_submit/fairway's defaults
//! (`--gpu-bind=closest`, `--cpu-bind=cores`) and the `Cores=` that Fairway writes from a
//! topology file, each task runs on cores local to the GPU it is given. The node is this
//! machine's cores split into two sockets (as the docker cluster emulates its nodes),
//! with two GPUs wired across: GPU 0 on socket 1, GPU 1 on socket 0, so that taking the
//! first GPU or binding by index alone would be caught.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fairway_core::topology::{CoreSet, GresStyle, Topology};
use fairway_tests::{Cluster, ClusterSpec, Slurm};

/// This machine's cores, from `slurmd -C`.
fn machine_cores() -> u32 {
    let out = Command::new("slurmd").arg("-C").output().expect("slurmd -C runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |k: &str| -> u32 {
        text.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {k}= in slurmd -C: {text}"))
    };
    // With one thread per core Slurm numbers CPUs as cores: CPU ids in a job are core ids.
    assert_eq!(get("ThreadsPerCore"), 1, "this test expects one thread per core, as the CI machine has: {text}");
    let cores = get("SocketsPerBoard") * get("CoresPerSocket");
    assert!(cores >= 2 && cores % 2 == 0, "this test needs an even number of cores, two or more: {text}");
    cores
}

/// Two A100s on two sockets of `per_socket` cores each: GPU 0 on socket 1, GPU 1 on socket 0.
fn crossed_topology(per_socket: u32) -> Topology {
    let text = format!(
        r#"
[cpu]
sockets = 2
cores_per_socket = {per_socket}
threads_per_core = 1
[[numa]]
id = 0
socket = 0
cores = "0-{end0}"
[[numa]]
id = 1
socket = 1
cores = "{per_socket}-{end1}"
[[gpu]]
index = 0
name = "NVIDIA A100 80GB PCIe"
type = "a100"
memory_mib = 81920
pci_bus_id = "00000000:17:00.0"
uuid = "GPU-3c41d2e8-0000-4000-8000-0000000000b0"
numa = 1
[[gpu]]
index = 1
name = "NVIDIA A100 80GB PCIe"
type = "a100"
memory_mib = 81920
pci_bus_id = "00000000:31:00.0"
uuid = "GPU-3c41d2e8-0000-4000-8000-0000000000b1"
numa = 0
"#,
        end0 = per_socket - 1,
        end1 = 2 * per_socket - 1,
    );
    Topology::parse(&text, Path::new("crossed.toml")).unwrap()
}

#[test]
fn tasks_run_on_cores_local_to_their_gpus() {
    let per_socket = machine_cores() / 2;
    let topo = crossed_topology(per_socket);
    // What `fairway topo --gres-conf --style static` writes, on the harness's stand-in devices.
    let gres_conf: String =
        topo.gres_conf(GresStyle::Static).iter().map(|l| l.replace("=/dev/", "={dir}/dev/") + "\n").collect();
    let spec = ClusterSpec {
        gres: Some(("gpu:a100:2".into(), gres_conf)),
        fairway_toml: Some("[job_submit.binding]\ngpu_bind = \"closest\"\ncpu_bind = \"cores\"\n".into()),
        task_plugin: "task/affinity".into(),
        node_hardware: Some(format!("Sockets=2 CoresPerSocket={per_socket} ThreadsPerCore=1")),
        ..ClusterSpec::default()
    };
    let c = Cluster::start(&spec).unwrap_or_else(|e| panic!("cluster starts: {e:#}"));

    // One task per GPU; each prints the GPUs it sees and the CPUs it may run on.
    let script = c.dir().join("jobs/bind.sh");
    std::fs::write(
        &script,
        "#!/bin/bash\nsrun -l bash -c 'echo \"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES \
         $(grep Cpus_allowed_list /proc/self/status)\"'\n",
    )
    .unwrap();
    let out = c
        .run_as(
            "fw_alice",
            "sbatch",
            &["--parsable", "-n", "2", "--gres=gpu:a100:2", "-o", "bind.out", script.to_str().unwrap()],
        )
        .unwrap();
    assert!(out.ok(), "{}", out.stderr);
    assert!(out.stderr.contains("--gpu-bind=closest"), "job_submit/fairway set no --gpu-bind: {}", out.stderr);
    let job: u32 = out.stdout.trim().parse().unwrap();
    c.wait_job(job, &["COMPLETED", "FAILED"], Duration::from_secs(60)).unwrap();
    let text = std::fs::read_to_string(c.dir().join("jobs/bind.out")).unwrap_or_default();
    eprintln!("{text}");
    let mut seen = Vec::new();
    for line in text.lines().filter(|l| l.contains("CUDA_VISIBLE_DEVICES=")) {
        let (gpu, cpus) = task(line);
        assert!(
            cpus.iter().all(|cpu| topo.gpus[gpu].cores.contains(cpu)),
            "task on CPUs {cpus} was given GPU {gpu}, whose cores are {}:\n{text}",
            topo.gpus[gpu].cores
        );
        seen.push(gpu);
    }
    seen.sort_unstable();
    assert_eq!(seen, [0, 1], "each task one GPU of its own:\n{text}\n{}", c.log_tails());

    // On the idle node a 1-task, 1-GPU job gets a GPU on its core's socket (seen: core 0
    // with GPU 1), not whatever GPU is first: Slurm places GPUs by socket.
    let script = "echo \"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES $(grep Cpus_allowed_list /proc/self/status)\"";
    let gpu_job =
        c.sbatch("fw_alice", &["-n", "1", "--gres=gpu:a100:1", "-o", "one.out", &format!("--wrap={script}")]).unwrap();
    c.wait_job(gpu_job, &["COMPLETED", "FAILED"], Duration::from_secs(60)).unwrap();
    let text = std::fs::read_to_string(c.dir().join("jobs/one.out")).unwrap_or_default();
    eprintln!("{text}");
    let (gpu, cpus) = task(&text);
    assert!(cpus.iter().all(|cpu| topo.gpus[gpu].cores.contains(cpu)), "GPU {gpu} on CPUs {cpus}: {text}");
    c.stop().unwrap();
}

/// The GPU and CPUs a task printed (`CUDA_VISIBLE_DEVICES=1 Cpus_allowed_list: 0`).
fn task(line: &str) -> (usize, CoreSet) {
    let gpus = line.split("CUDA_VISIBLE_DEVICES=").nth(1).and_then(|s| s.split_whitespace().next()).unwrap_or("");
    let cpus: CoreSet = line
        .split("Cpus_allowed_list:")
        .nth(1)
        .map(str::trim)
        .unwrap_or_else(|| panic!("no CPU list in {line:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{e:?}: {line}"));
    let gpu = gpus.parse().unwrap_or_else(|_| panic!("a task sees GPUs {gpus:?}, not one: {line}"));
    (gpu, cpus)
}
