#!/bin/bash
# Entrypoint of every container of the Fairway test cluster: ROLE is db, dbd, ctld,
# login or compute. Daemons run in the foreground and log to stderr (docker logs).
set -euo pipefail
role=${1:?role}

# The same users, with the same uids, on every node.
uid=2001
for u in fw_alice fw_bob fw_carol fw_dave; do
    id "$u" >/dev/null 2>&1 || useradd --uid "$uid" --create-home --shell /bin/bash "$u"
    uid=$((uid + 1))
done
mkdir -p /shared/jobs && chmod 1777 /shared/jobs

wait_for() { # what, timeout, command...
    local what=$1 t=$2; shift 2
    for _ in $(seq "$t"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
    echo "entrypoint: gave up waiting for $what" >&2
    exit 1
}

start_munge() {
    install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    install -o munge -g munge -m 0400 /fairway/etc/munge.key /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
    wait_for munged 30 munge -n
}

case $role in
db)
    # bookworm's package leaves the socket directory to systemd's tmpfiles.
    install -d -o mysql -g mysql /run/mysqld
    if [ ! -d /var/lib/mysql/mysql ]; then
        mariadb-install-db --user=mysql --skip-test-db >/dev/null
    fi
    # A throwaway test database on a private network: no grant tables, no passwords.
    exec mariadbd --user=mysql --bind-address=0.0.0.0 --skip-grant-tables --skip-log-bin \
        --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0
    ;;
dbd)
    start_munge
    wait_for mariadb 120 mariadb-admin --protocol=tcp -h db ping
    exec slurmdbd -D
    ;;
ctld)
    start_munge
    mkdir -p /var/spool/slurmctld
    wait_for "slurmdbd (sacctmgr answers)" 120 sacctmgr -n list cluster
    sacctmgr -i add cluster fairway >/dev/null 2>&1 || true
    exec slurmctld -D
    ;;
compute)
    start_munge
    # Stand-in GPU device files (NVIDIA's major number): the topology is in gres.conf.
    for i in $(seq 0 $((${GPUS:-0} - 1))); do
        [ -e "/dev/nvidia$i" ] || mknod -m 666 "/dev/nvidia$i" c 195 "$i"
    done
    mkdir -p /var/spool/slurmd
    # Where Fairway's gpu/nvml is installed: the stand-in NVML library that makes slurmd
    # load it (docker/cluster.sh).
    if [ -e /usr/lib/fairway/nvml-stand-in/libnvidia-ml.so ]; then
        export LD_LIBRARY_PATH=/usr/lib/fairway/nvml-stand-in
    fi
    wait_for slurmctld 120 scontrol ping
    if [ -n "${CONFIGLESS:-}" ]; then
        # Configless: slurm.conf and the rest come from slurmctld into
        # /var/spool/slurmd/conf-cache; fairway.toml is read from /etc/slurm.
        exec slurmd -D -N "$NODENAME" --conf-server ctld
    fi
    exec slurmd -D -N "$NODENAME"
    ;;
login)
    start_munge
    exec sleep infinity
    ;;
*)
    echo "entrypoint: unknown role $role" >&2
    exit 2
    ;;
esac
