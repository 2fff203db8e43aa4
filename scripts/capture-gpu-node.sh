#!/usr/bin/env bash
# Captures a real GPU node's topology as Fairway reads it and as NVIDIA's own tools read it,
# so that tests/fixtures/gpu-nodes/ holds real output to check Fairway against (CI never
# needs a GPU). Run on the GPU node:
#   scripts/capture-gpu-node.sh FAIRWAY_BINARY OUT_DIR [TOPO_DETECT_TEST_BINARY]
# Writes OUT_DIR/capture.tar.gz with:
#   fairway-topo.txt, fairway-topo.toml, gres-{autodetect,static,fairway}.conf  (our reading)
#   nvml.json        (NVIDIA's Python NVML bindings, an independent reader)
#   nvidia-smi-q.txt, nvidia-smi-topo.txt, nvidia-smi-L.txt, mig-minors.txt
#   sysfs/           (the sysfs files topo-detect reads, for replaying its sysfs half)
#   slurmd-G.txt     (with SLURMD_BUNDLE=DIR from scripts/bundle-slurmd.sh: Debian's slurmd
#                     loading Fairway's gpu/nvml over the real NVML, gres.conf AutoDetect=nvml)
set -u
fw=$(readlink -f "$1") out=$(readlink -f "$2") tests=${3:+$(readlink -f "$3")}
bundle=${SLURMD_BUNDLE:+$(readlink -f "$SLURMD_BUNDLE")}
d=$(mktemp -d)
cd "$d" || exit 1

run() { # name, command...: keep stdout, stderr and the exit status
    local name=$1; shift
    "$@" >"$name" 2>"$name.err"
    echo "$? $*" >>status.txt
}
run nvidia-smi-L.txt nvidia-smi -L
run nvidia-smi-q.txt nvidia-smi -q
run nvidia-smi-topo.txt nvidia-smi topo -m
run mig-minors.txt cat /proc/driver/nvidia-caps/mig-minors
# hwloc's own view (what slurmd numbers cores by), where hwloc's tools are installed.
command -v lstopo-no-graphics >/dev/null && run hwloc.xml lstopo-no-graphics --of xml --whole-io
run fairway-topo.txt "$fw" topo
run fairway-topo.toml "$fw" topo --toml
for s in autodetect static fairway; do
    run "gres-$s.conf" "$fw" topo --gres-conf --style "$s"
done
[ -n "$tests" ] && run topo-detect-tests.txt "$tests" --nocapture

cat >nvml.py <<'EOF'
import json, pynvml as n
n.nvmlInit()
def tryit(f, *a):
    try:
        v = f(*a)
        return v.decode() if isinstance(v, bytes) else v
    except Exception as e:
        return "error: " + str(e)
gpus = []
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    links = []
    for l in range(n.NVML_NVLINK_MAX_LINKS):
        st = tryit(n.nvmlDeviceGetNvLinkState, h, l)
        if st == 1:
            links.append(tryit(lambda: n.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, l).busId))
        elif isinstance(st, str):
            links.append(st)
            break
    aff = tryit(lambda: list(n.nvmlDeviceGetCpuAffinity(h, 16)))
    cpus = [w * 64 + b for w, m in enumerate(aff) for b in range(64) if m >> b & 1] if isinstance(aff, list) else aff
    gpus.append({
        "index": i,
        "name": tryit(n.nvmlDeviceGetName, h),
        "uuid": tryit(n.nvmlDeviceGetUUID, h),
        "pci_bus_id": tryit(lambda: n.nvmlDeviceGetPciInfo(h).busId),
        "minor": tryit(n.nvmlDeviceGetMinorNumber, h),
        "memory_mib": tryit(lambda: n.nvmlDeviceGetMemoryInfo(h).total // 2**20),
        "mig_mode": tryit(n.nvmlDeviceGetMigMode, h),
        "max_mig_devices": tryit(n.nvmlDeviceGetMaxMigDeviceCount, h),
        "nvlink_remote_bus_ids": links,
        "cpu_affinity": cpus,
        "numa_node": tryit(n.nvmlDeviceGetNumaNodeId, h) if hasattr(n, "nvmlDeviceGetNumaNodeId") else None,
    })
print(json.dumps({"driver": tryit(n.nvmlSystemGetDriverVersion), "nvml": tryit(n.nvmlSystemGetNVMLVersion),
                  "gpus": gpus}, indent=1, default=str))
EOF
run nvml.json python3 nvml.py

# The sysfs files crates/topo-detect/src/sysfs.rs reads, with the GPUs' PCI devices.
mkdir sysfs
for f in /sys/devices/system/cpu/online /sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id \
    /sys/devices/system/cpu/cpu[0-9]*/topology/core_id /sys/devices/system/node/online \
    /sys/devices/system/node/node[0-9]*/cpulist; do
    [ -r "$f" ] && cp --parents "$f" sysfs/
done
for b in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null); do
    b=$(echo "${b#0000}" | tr 'A-F' 'a-f')
    for f in /sys/bus/pci/devices/"$b"/numa_node /sys/bus/pci/devices/"$b"/local_cpulist; do
        [ -r "$f" ] && mkdir -p "sysfs/sys/bus/pci/devices/$b" && cat "$f" >"sysfs/sys/bus/pci/devices/$b/${f##*/}"
    done
done
if [ -n "$bundle" ]; then
    b=$bundle s=$d/slurmd-g
    mkdir -p "$s/spool" "$s/nvml"
    # Slurm selects gpu/nvml once dlopen("libnvidia-ml.so") works; drivers ship only .so.1.
    nv=$(ldconfig -p | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')
    [ -n "$nv" ] || nv=$(find / -name libnvidia-ml.so.1 -not -path '/proc/*' 2>/dev/null | head -1)
    ln -s "$nv" "$s/nvml/libnvidia-ml.so"
    export LD_LIBRARY_PATH=$b/lib:$s/nvml
    node=$("$b/slurmd" -C | head -1)
    # The GRES type as autodetect names it (NVML's name, lowercase, spaces as underscores).
    gtype=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z ' 'a-z_')
    cat >"$s/slurm.conf" <<CONF
ClusterName=t
SlurmctldHost=localhost
PluginDir=$b/fairway:$b/plugins
GresTypes=gpu
SlurmdSpoolDir=$s/spool
$node Gres=gpu:$gtype:$(nvidia-smi -L | wc -l)
PartitionName=p Nodes=ALL
CONF
    echo "AutoDetect=nvml" >"$s/gres.conf"
    # 22.05's cgroup/v2 needs systemd over dbus even to start, which a bare GPU machine may
    # lack; -G needs no cgroup, and cgroup/v1 starts without touching the hierarchy.
    echo "CgroupPlugin=cgroup/v1" >"$s/cgroup.conf"
    : >"$s/fairway.toml"
    cp "$s/slurm.conf" slurmd-G.slurm.conf
    SLURM_CONF=$s/slurm.conf run slurmd-G.txt "$b/slurmd" -D -G -vv
    unset LD_LIBRARY_PATH
fi
{ uname -a; nproc; grep -m1 'model name' /proc/cpuinfo; date -u; } >machine.txt
mkdir -p "$out"
tar czf "$out/capture.tar.gz" -- *
cat status.txt
for f in fairway-topo.txt fairway-topo.toml gres-fairway.conf nvidia-smi-topo.txt slurmd-G.txt; do echo "== $f"; cat "$f" "$f.err" 2>/dev/null; done
