#!/bin/bash
# Fairway installed as an admin installs it, checked end to end:
#  1. on the host, the README's build line, as written (`make deb`);
#  2. in a clean container of Debian bookworm with Debian's Slurm 22.05 and no Fairway,
#     the README's install lines, as written, then its slurm.conf lines; munged, slurmctld
#     and slurmd started; `fairway check-config` clean; a job run under priority/fairway
#     and job_submit/fairway; `fairway --version`, its man page and completions there;
#  3. in a container of trixie's Slurm 24.11 (Slurm changed under the plugins: Debian
#     serves one micro release per suite, so this is the nearest real upgrade): apt refuses
#     the 22.05 packages; forced in anyway, `fairway check-config` names the mismatch and
#     exits 1 before any restart, and slurmctld indeed refuses the plugin; then the
#     README's upgrade procedure: Fairway's packages built for 24.11 installed with apt,
#     PluginDir moved to their release, check-config clean, slurmctld up, a job run.
# The 24.11 plugins are built as docker/cluster.sh builds them (same headers, source tree
# and target dir), so the e2e suite's 24.11 cluster reuses the build.
# The images are docker/build-image.sh's (debootstrap + docker import, no registry).
# Usage: scripts/test-packages.sh   (root: docker)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
fail() { echo "test-packages: FAIL: $*" >&2; exit 1; }
step() { echo "test-packages: $*"; }

# The README's fenced block after a `<!-- install:NAME -->` marker, as written.
readme_block() {
    awk -v m="<!-- install:$1 -->" '$0 == m {f = 1; next} f && /^```/ {if (in_) exit; in_ = 1; next} f && in_' README.md
}
build=$(readme_block build)
controller=$(readme_block controller)
slurm_lines=$(readme_block slurm.conf)
for b in build controller slurm.conf; do [ -n "$(readme_block $b)" ] || fail "README has no install:$b block"; done

step "README build lines: $build"
bash -euo pipefail -c "$build" || fail "the README's build lines failed"
ls target/debian/fairway-slurmctld_*.deb target/debian/fairway_*.deb >/dev/null || fail "no packages in target/debian"

# Without packages: make install puts every file under DESTDIR, make uninstall takes
# every one of them away again.
stage=$(mktemp -d)
make -s install DESTDIR="$stage" PREFIX=/usr >/dev/null
installed=$(find "$stage" -type f | wc -l)
test -x "$stage/usr/lib/fairway/slurm-$(make -s print-slurm-version)/priority_fairway.so" || fail "make install: no plugin"
make -s uninstall DESTDIR="$stage" PREFIX=/usr
left=$(find "$stage" -type f | sed "s#^$stage##")
rm -rf "$stage"
[ -z "$left" ] || fail "make uninstall left: $left"
step "make install: $installed files; make uninstall: none left"

for suite in bookworm trixie; do bash docker/build-image.sh $suite; done

host=$(make -s print-slurm-version) # the release `make deb` built for
# Fairway's plugin packages for trixie's Slurm, from that release's headers.
full=$(docker run --rm fairway/slurm:trixie cat /etc/slurm-version | sed 's/-.*//')
inc=$PWD/.cache/slurm-headers/$full
if [ ! -f "$inc/slurm/slurm_version.h" ]; then
    mkdir -p "$inc"
    docker run --rm fairway/slurm:trixie tar -C /usr/include -c slurm | tar -C "$inc" -x
fi
step "packages for Slurm $full"
(
    export SLURM_INCLUDE_DIR=$inc CARGO_TARGET_DIR=$PWD/target/slurm-$full
    SLURM_SRC_DIR=$(bash scripts/slurm-src.sh)
    export SLURM_SRC_DIR
    DEB_PARTS="slurmctld slurmd" DEB_OUT=target/debian/slurm-$full bash scripts/package-deb.sh
) || fail "packages for Slurm $full"

# Runs a script in a fresh container of an image, the checkout read-only at /src (the
# README's lines use paths relative to the checkout).
in_container() { # image script...
    local image=$1
    shift
    docker run --rm -i --hostname node1 -v "$PWD:/src:ro" -w /src \
        -e README_CONTROLLER="$controller" -e README_SLURM_CONF="$slurm_lines" \
        "$image" bash -euo pipefail -s -- "$@"
}

# What both containers share: a one-node slurm.conf with the README's lines, and munged.
common=$(cat <<'COMMON'
sudo() { "$@"; }   # the README's lines say sudo; the container runs as root
export -f sudo
start_munge() {
    install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    dd if=/dev/urandom bs=1024 count=1 status=none >/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
}
slurm_conf() {
    mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
    cat >/etc/slurm/slurm.conf <<CONF
ClusterName=pkgtest
SlurmctldHost=node1
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerParameters=bf_interval=1
PriorityCalcPeriod=1
NodeName=node1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
# The README's lines:
$README_SLURM_CONF
CONF
}
wait_for() { # what seconds command...
    local what=$1 t=$2; shift 2
    for _ in $(seq "$t"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
    echo "gave up waiting for $what" >&2
    tail -40 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
    return 1
}
# Starts slurmctld and slurmd, checks priority/fairway is in force, runs a job to the end.
run_a_job() {
    slurmctld
    slurmd
    wait_for slurmctld 60 scontrol ping
    wait_for "node1 idle" 60 bash -c 'sinfo -h -n node1 -o %t | grep -qx idle'
    scontrol show config >/tmp/config # a file: grep -q would cut a pipe short (pipefail)
    grep -E '^(PriorityType|JobSubmitPlugins) ' /tmp/config
    grep -q 'PriorityType *= priority/fairway' /tmp/config
    local id
    id=$(sbatch --parsable -o /tmp/job.out --wrap 'echo ran on $(hostname)')
    wait_for "job $id" 60 bash -c "scontrol show job $id | grep -q 'JobState=COMPLETED'"
    grep -q 'ran on node1' /tmp/job.out
    echo "job $id completed under priority/fairway on Slurm $(slurmctld -V | awk '{print $2}')"
}
COMMON
)

step "bookworm (Slurm $host): install, enable, run a job"
in_container fairway/slurm:bookworm <<SCRIPT || fail "the install on bookworm"
$common
! dpkg-query -W 'fairway*' >/dev/null 2>&1 || { echo "the image already has Fairway"; exit 1; }
echo "--- the README's install lines"
bash -euo pipefail -c "\$README_CONTROLLER"
dpkg -l fairway fairway-slurmctld | tail -2
fairway --version
man -w fairway-check-config >/dev/null 2>&1 || test -e /usr/share/man/man1/fairway-check-config.1.gz
test -s /usr/share/bash-completion/completions/fairway
start_munge
slurm_conf
echo "--- fairway check-config, before the first start"
fairway check-config
run_a_job
# A running slurmctld: plugins and daemon agree, so check-config is still clean.
fairway check-config >/dev/null
SCRIPT

step "trixie (Slurm $full) under the $host packages: refused by apt, caught by check-config; then upgraded"
in_container fairway/slurm:trixie <<SCRIPT || fail "the mismatch on trixie"
$common
slurmctld -V
echo "--- apt must refuse packages built for another Slurm release"
if out=\$(bash -c "\$README_CONTROLLER" 2>&1); then echo "\$out"; echo "apt installed them"; exit 1; fi
grep -E 'Depends: slurmctld|unmet' <<<"\$out" | head -3 || true
echo "--- forced in (a hand copy, or dpkg --force-depends)"
dpkg -i --force-depends target/debian/fairway-slurmctld_*.deb target/debian/fairway_*.deb >/dev/null 2>&1
slurm_conf
set +e
out=\$(fairway check-config 2>&1); rc=\$?
set -e
echo "\$out"
[ \$rc = 1 ] || { echo "check-config exited \$rc, not 1"; exit 1; }
grep -q 'is built for Slurm $host' <<<"\$out" || { echo "no version finding"; exit 1; }
grep -q 'Slurm 24.11' <<<"\$out" || { echo "the installed version is not named"; exit 1; }
echo "--- and slurmctld indeed refuses it"
start_munge
if timeout 60 slurmctld -D -i >/tmp/ctld.out 2>&1; then echo "slurmctld ran with a $host plugin"; exit 1; fi
grep -E 'Incompatible|cannot create priority' /tmp/ctld.out /var/log/slurm/slurmctld.log | head -3
grep -q 'Incompatible Slurm plugin' /tmp/ctld.out /var/log/slurm/slurmctld.log
echo "--- the upgrade procedure: Fairway for $full (apt -f: the forced $host package left dpkg broken), PluginDir moved to its release"
apt-get install -y -f ./target/debian/slurm-$full/fairway-slurmctld_*.deb >/tmp/apt.out 2>&1 || { cat /tmp/apt.out; exit 1; }
dpkg -l fairway-slurmctld | tail -1
test ! -e /usr/lib/fairway/slurm-$host/priority_fairway.so
sed -i "s#/usr/lib/fairway/slurm-$host#/usr/lib/fairway/slurm-$full#" /etc/slurm/slurm.conf
fairway check-config
run_a_job
SCRIPT
step "PASS in $((SECONDS - start)) s"
