#!/bin/bash
# The Fairway test cluster in docker, for one Slurm version.
#   docker/cluster.sh up   [22.05|24.11|26.05]   build image and plugins, start, wait, bootstrap accounting
#   docker/cluster.sh build [VERSION]            build image and plugins only (`up` then reuses them)
#   docker/cluster.sh down [VERSION]
#   docker/cluster.sh logs [VERSION]             every container's log
# Everything generated lives in .cache/docker/<version>/; plugins are built per version
# into target/plugins/<full version>/docker and never reach another version's cluster.
set -euo pipefail
cmd=${1:?usage: docker/cluster.sh up|build|down|logs [22.05|24.11|26.05]}
ver=${2:-${SLURM:-24.11}}
root=$(cd "$(dirname "$0")/.." && pwd)
case $ver in
22.05) suite=bookworm ;;
24.11) suite=trixie ;;
26.05) suite=sid ;;
*) echo "cluster.sh: unknown Slurm version $ver (22.05, 24.11 or 26.05)" >&2; exit 2 ;;
esac
project=fairway-${ver/./}
state=$root/.cache/docker/$ver
export SUITE=$suite ROOT=$root ETC=$state/etc PLUGINS=${PLUGINS:-$state/no-plugins}
# Compose v2 (the docker CLI plugin) where installed, else v1's docker-compose.
if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
    compose_cmd=(docker-compose)
else
    echo "cluster.sh: neither 'docker compose' (v2) nor docker-compose (v1) is installed" >&2; exit 1
fi
compose() { "${compose_cmd[@]}" -p "$project" -f "$root/docker/compose.yml" "$@"; }

logs() {
    for c in db dbd ctld login c1 c2 c3 c4; do
        echo "--- $c ---"
        docker logs --tail "${1:-60}" "$project-$c-1" 2>&1 || docker logs --tail "${1:-60}" "${project}_${c}_1" 2>&1 || true
    done
}

fail() {
    echo "cluster.sh: $*" >&2
    logs 80 >&2
    exit 1
}

# wait_until WHAT SECONDS COMMAND...: readiness, never a fixed sleep.
wait_until() {
    local what=$1 t=$2; shift 2
    local start=$SECONDS
    until "$@" >/dev/null 2>&1; do
        [ $((SECONDS - start)) -ge "$t" ] && fail "timed out after ${t}s waiting for $what"
        # A daemon that died will not come back: say so now rather than at the timeout.
        local dead
        # (By compose's project label: v1's and v2's `ps` print states differently.)
        dead=$(docker ps -a --filter "label=com.docker.compose.project=$project" --filter status=exited \
            --format '{{.Names}}' 2>/dev/null | tr '\n' ' ')
        [ -z "$dead" ] || fail "container(s) exited while waiting for $what: $dead"
        sleep 1
    done
    echo "cluster.sh: $what ($((SECONDS - start)) s)"
}

build_plugins() {
    local full
    full=$(docker run --rm "fairway/slurm:$suite" cat /etc/slurm-version | sed 's/-.*//')
    export PLUGINS=$root/target/plugins/$full/docker
    mkdir -p "$PLUGINS"
    if [ "$ver" = 22.05 ]; then
        # The host's own Slurm (bookworm) is this version: its headers and source tree.
        make -C "$root" -s plugins-release >/dev/null
        install -m 0755 "$root"/target/plugins/"$full"/release/*.so "$PLUGINS"/
    else
        # That version's public headers, from its image; a target dir of its own.
        local inc=$root/.cache/slurm-headers/$full
        if [ ! -f "$inc/slurm/slurm_version.h" ]; then
            mkdir -p "$inc"
            docker run --rm "fairway/slurm:$suite" tar -C /usr/include -c slurm | tar -C "$inc" -x
        fi
        export SLURM_INCLUDE_DIR=$inc CARGO_TARGET_DIR=$root/target/slurm-$full
        if [ "$ver" = 24.11 ]; then
            # Debian serves 24.11's upstream tarball: configure it for the internal
            # structs (job_record_t, associations, QoS, gres records) the plugins use.
            SLURM_SRC_DIR=$(bash "$root/scripts/slurm-src.sh") || fail "no configured Slurm $full source tree"
            export SLURM_SRC_DIR
            local all="priority_fairway job_submit_fairway site_factor_fairway preempt_fairway gpu_nvml"
            cargo build --release --manifest-path "$root/Cargo.toml" $(printf -- '-p %s ' $all)
            for p in $all; do
                install -m 0755 "$CARGO_TARGET_DIR/release/lib$p.so" "$PLUGINS/$p.so"
            done
        else
            # No source of 26.05 is served here: only job_submit/fairway builds from
            # public headers alone (see README, "Slurm versions").
            cargo build --release --manifest-path "$root/Cargo.toml" -p job_submit_fairway --no-default-features
            install -m 0755 "$CARGO_TARGET_DIR/release/libjob_submit_fairway.so" "$PLUGINS/job_submit_fairway.so"
        fi
        unset SLURM_INCLUDE_DIR CARGO_TARGET_DIR SLURM_SRC_DIR
    fi
    # The fairway command, for jobs (`fairway ckpt-done`) and admins on the nodes. Built
    # on the host (bookworm): its glibc is no newer than any image's.
    cargo build -q --release --manifest-path "$root/Cargo.toml" -p fairway-cli
    install -D -m 0755 "$root/target/release/fairway" "$PLUGINS/bin/fairway"
    if [ -f "$PLUGINS/gpu_nvml.so" ]; then
        # Slurm loads gpu/nvml only once dlopen("libnvidia-ml.so") succeeds: an empty
        # library stands in for a node whose NVML has no GPU behind it, and Fairway's
        # gpu/nvml then reads the node's topology file instead.
        mkdir -p "$PLUGINS/nvml-stand-in"
        cc -shared -o "$PLUGINS/nvml-stand-in/libnvidia-ml.so" -x c /dev/null || fail "cannot build the stand-in libnvidia-ml.so"
    fi
    echo "cluster.sh: plugins for Slurm $full: $(cd "$PLUGINS" && ls *.so | tr '\n' ' ')"
}

gen_config() {
    mkdir -p "$ETC"
    [ -f "$ETC/munge.key" ] || dd if=/dev/urandom of="$ETC/munge.key" bs=1024 count=1 status=none
    local prio=priority/multifactor
    local site_factor=
    if [ -f "$PLUGINS/priority_fairway.so" ]; then
        prio=priority/fairway
    elif [ -f "$PLUGINS/site_factor_fairway.so" ]; then
        # Fairway's terms on multifactor where priority/fairway does not build yet.
        site_factor=PrioritySiteFactorPlugin=site_factor/fairway
    fi
    local preempt=preempt/qos
    [ -f "$PLUGINS/preempt_fairway.so" ] && preempt=preempt/fairway
    # The checkpoint signal (--signal) instead of SIGTERM when a job is preempted, and
    # victims taken in the plugin's order (no reordering by the select plugin, which
    # would otherwise also pick a protected young job).
    local user_signal=PreemptParameters=send_user_signal,reorder_count=0
    # c3 and c4 run configless (docker/compose.yml): their slurmd fetches slurm.conf,
    # gres.conf and topology.conf from slurmctld, as at many GPU sites. (c1 and c2 keep
    # the local files, and their slurmd logs that slurmctld offers configless.)
    local ctld_params=enable_configless
    if [ "$ver" = 22.05 ]; then
        user_signal=SchedulerParameters=preempt_reorder_count=0
        ctld_params=preempt_send_user_signal,$ctld_params
    fi
    cat >"$ETC/slurm.conf" <<CONF
ClusterName=fairway
SlurmctldHost=ctld
AuthType=auth/munge
# A requeued batch job waits out the credential lifetime before it starts again
# (default 120 s); shorter here so preempted jobs resume within the e2e tests.
AuthInfo=cred_expire=30
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
PluginDir=/usr/lib/fairway:/usr/lib/x86_64-linux-gnu/slurm-wlm
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdTimeout=20
MessageTimeout=5
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
TopologyPlugin=topology/tree
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=dbd
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
JobRequeue=0
PriorityType=$prio
$site_factor
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityWeightQOS=5000
PriorityCalcPeriod=1
PreemptType=$preempt
PreemptMode=REQUEUE
$user_signal
SlurmctldParameters=$ctld_params
JobSubmitPlugins=fairway
NodeName=c[1-2] Sockets=2 CoresPerSocket=56 ThreadsPerCore=1 RealMemory=100000 Gres=gpu:h100:8 State=UNKNOWN
NodeName=c[3-4] Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=50000 Gres=gpu:a100:4 State=UNKNOWN
PartitionName=gpu Nodes=c[1-4] Default=YES MaxTime=2-00:00:00 State=UP
PartitionName=a100 Nodes=c[3-4] MaxTime=1-00:00:00 State=UP
PartitionName=debug Nodes=c[1-4] MaxTime=1:00:00 State=UP
CONF
    cat >"$ETC/topology.conf" <<CONF
SwitchName=s1 Nodes=c[1-2]
SwitchName=s2 Nodes=c[3-4]
SwitchName=spine Switches=s[1-2]
CONF
    # The GPUs' topology from Fairway's own topology files (config/topology): DGX H100
    # (NVSwitch, 18 lanes between every pair, GPUs 0-3 on socket 0) and 4 x A100 PCIe in
    # NVLink-bridged pairs (two GPUs per socket). Where Fairway's gpu/nvml is built, slurmd
    # gets it through AutoDetect=nvml; elsewhere `fairway topo` writes a static gres.conf
    # as a site with AutoDetect=off would.
    local topo=$root/config/topology
    if [ -f "$PLUGINS/gpu_nvml.so" ]; then
        # Fairway's gpu/nvml reports Cores and Links from each node's topology file
        # ([gpu.topology] in fairway.toml, below); gres.conf names the short types only.
        mkdir -p "$ETC/topology"
        cp "$topo/dgx-h100.toml" "$topo/pcie-a100-nvlink-pairs.toml" "$ETC/topology/"
        cat >"$ETC/gres.conf" <<CONF
AutoDetect=nvml
NodeName=c[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-7]
NodeName=c[3-4] Name=gpu Type=a100 File=/dev/nvidia[0-3]
CONF
    else
        {
            for n in c1 c2; do
                "$PLUGINS/bin/fairway" topo --file "$topo/dgx-h100.toml" --gres-conf --style static | sed "s/^/NodeName=$n /"
            done
            for n in c3 c4; do
                "$PLUGINS/bin/fairway" topo --file "$topo/pcie-a100-nvlink-pairs.toml" --gres-conf --style static | sed "s/^/NodeName=$n /"
            done
        } >"$ETC/gres.conf"
        grep -q '^NodeName=c4 .*nvidia3' "$ETC/gres.conf" || fail "fairway topo wrote no usable gres.conf"
    fi
    if [ "$ver" != 22.05 ]; then
        echo "CgroupPlugin=disabled" >"$ETC/cgroup.conf"
    fi
    cat >"$ETC/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=dbd
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=db
StorageUser=slurm
StorageLoc=slurm_acct_db
CONF
    chmod 600 "$ETC/slurmdbd.conf"
    # The shipped GPU-cluster rules; jobs count as young for 30 s, not 10 min, so the
    # e2e tests need not wait that long, and the preemption budget is one, so one test
    # can spend it.
    sed -e 's/^min_runtime = .*/min_runtime = 30                     # docker test cluster: short/' \
        -e 's/^max_preemptions = .*/max_preemptions = 1                # docker test cluster: one/' \
        "$root/config/fairway.gpu-cluster.toml" >"$ETC/fairway.toml"
    if [ -f "$PLUGINS/gpu_nvml.so" ]; then
        cat >>"$ETC/fairway.toml" <<CONF

[gpu.topology]
"c[1-2]" = "topology/dgx-h100.toml"
"c[3-4]" = "topology/pcie-a100-nvlink-pairs.toml"
CONF
    fi
}

nodes_idle() {
    [ "$(docker exec "$(cid login)" sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)" -ge 4 ]
}

cid() { compose ps -q "$1"; }

# The image and the plugins, all a cluster of this version needs before it starts.
build() {
    bash "$root/docker/build-image.sh" "$suite"
    build_plugins
}

case $cmd in
up)
    start=$SECONDS
    # From nothing: a cluster of this version left up (make demo, an interrupted run)
    # goes first, volumes included; its /shared would hold other users' slurm-N.out,
    # which the new cluster's job N cannot open (the job fails, exit code 0:53).
    [ -z "$(compose ps -a -q 2>/dev/null)" ] || echo "cluster.sh: removing the $project cluster that was left up"
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    echo "cluster.sh: ${compose_cmd[*]} $("${compose_cmd[@]}" version --short)"
    build
    gen_config
    compose up -d --remove-orphans >/dev/null || fail "${compose_cmd[*]} up failed"
    wait_until "sacctmgr answers" 180 docker exec "$(cid login)" sacctmgr -n list cluster
    wait_until "slurmctld answers" 180 docker exec "$(cid login)" scontrol ping
    docker exec "$(cid login)" bash /fairway/config/accounting.sh fairway || fail "accounting bootstrap failed"
    wait_until "four compute nodes idle" 180 nodes_idle
    echo "cluster.sh: Slurm $ver cluster $project up in $((SECONDS - start)) s"
    ;;
build)
    build
    ;;
down)
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    echo "cluster.sh: $project down"
    ;;
logs)
    logs 200
    ;;
*)
    echo "usage: docker/cluster.sh up|build|down|logs [VERSION]" >&2
    exit 2
    ;;
esac
