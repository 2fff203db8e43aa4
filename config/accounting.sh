#!/bin/bash
# Accounting bootstrap for a Fairway GPU cluster: the cluster, accounts for several teams
# with their shares, users, and QoS tiers. Idempotent; adapt names and shares to your
# site and run it once on a host where sacctmgr reaches slurmdbd.
#   config/accounting.sh [CLUSTER]
set -euo pipefail
cluster=${1:-fairway}
sacctmgr_i() { sacctmgr -i "$@" >/dev/null 2>&1 || true; }   # "already exists" is fine

sacctmgr_i add cluster "$cluster"

# QoS tiers (job_submit/fairway picks one by workload tier; see fairway.toml):
#   interactive: short attended sessions, capped at 4 h and 8 GPUs per user
#   high:        urgent work, may preempt scavenger
#   normal:      ordinary training
#   scavenger:   opportunistic sweeps, preemptible (requeued), lowest priority
# (scavenger first: the others name it in Preempt=.)
sacctmgr_i add qos scavenger Priority=0 PreemptMode=requeue
sacctmgr_i add qos interactive Priority=500 MaxWall=04:00:00 MaxTRESPerUser=gres/gpu=8
sacctmgr_i add qos high Priority=1000 Preempt=scavenger
sacctmgr_i modify qos normal set Priority=100 Preempt=scavenger

# Teams: research (pre-training) and product (fine-tuning, inference) share the cluster.
sacctmgr_i add account ml Cluster="$cluster" Description="all ML teams" Fairshare=100
sacctmgr_i add account research Parent=ml Cluster="$cluster" Fairshare=60
sacctmgr_i add account product Parent=ml Cluster="$cluster" Fairshare=40
sacctmgr_i add account vision Parent=research Cluster="$cluster" Fairshare=50
sacctmgr_i add account nlp Parent=research Cluster="$cluster" Fairshare=50

qos=interactive,high,normal,scavenger
add_user() { # user default-account
    sacctmgr_i add user "$1" Account="$2" Cluster="$cluster"
    sacctmgr_i modify user "$1" set QOS="$qos" DefaultQOS=normal
}
add_user fw_alice vision
add_user fw_bob nlp
add_user fw_carol product
add_user fw_dave product
sacctmgr_i add user fw_dave Account=nlp Cluster="$cluster"
sacctmgr_i modify user fw_dave set QOS="$qos"
# "Already exists" is not an error above, so check that the result is what we want.
for check in "fw_alice vision" "fw_bob nlp" "fw_carol product" "fw_dave product"; do
    set -- $check
    sacctmgr -n -P show assoc where user="$1" format=account | grep -qx "$2" \
        || { echo "accounting: $1 has no association with account $2" >&2; exit 1; }
done
for q in ${qos//,/ }; do
    sacctmgr -n -P show qos format=name | grep -qx "$q" || { echo "accounting: QoS $q missing" >&2; exit 1; }
done
sacctmgr -n -P show assoc where user=fw_alice format=qos | grep -q high \
    || { echo "accounting: fw_alice cannot use QoS high" >&2; exit 1; }
echo "accounting: cluster $cluster, accounts ml/{research/{vision,nlp},product}, QoS $qos"
