#!/usr/bin/env bash
#SBATCH --job-name=preemptible-training
#SBATCH --qos=scavenger
#SBATCH --gpus=1
#SBATCH --time=10:00
#SBATCH --signal=B:USR1@60
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --comment="fairway: ckpt=10s"
#
# A stand-in for a training job that preempt/fairway can preempt without losing work.
# No GPU or Python needed: each "step" is a sleep. See README.md beside it.
#
#   STEPS       steps to run in all (default 120)
#   STEP_SECS   seconds per step (default 1; fractions allowed)
#   CKPT_EVERY  checkpoint every this many steps (default 10)
#   CKPT_DIR    where the checkpoint and logs live
#               (default $HOME/.fairway-ckpt/$SLURM_JOB_NAME)
#   FAIRWAY_BIN the fairway command (default: fairway on PATH)
#   REQUEUE_WAIT seconds to wait for the requeue after `fairway ckpt-done` before
#               training on (default 300)
#
# Files in CKPT_DIR: checkpoint (step=N, restarts=R; replaced atomically by rename),
# steps.log (one line per completed step, for checking that no step was lost), and
# train.log (what happened, one line per event).
set -euo pipefail

STEPS=${STEPS:-120}
STEP_SECS=${STEP_SECS:-1}
CKPT_EVERY=${CKPT_EVERY:-10}
CKPT_DIR=${CKPT_DIR:-$HOME/.fairway-ckpt/${SLURM_JOB_NAME:-preemptible-training}}
FAIRWAY_BIN=${FAIRWAY_BIN:-fairway}
REQUEUE_WAIT=${REQUEUE_WAIT:-300}

mkdir -p "$CKPT_DIR"
CKPT=$CKPT_DIR/checkpoint
STEPS_LOG=$CKPT_DIR/steps.log
LOG=$CKPT_DIR/train.log

log() {
    local line
    line="$(date '+%Y-%m-%dT%H:%M:%S') job=${SLURM_JOB_ID:-none} $*"
    echo "$line"
    echo "$line" >>"$LOG"
}

save_checkpoint() {
    # Write then rename: a kill mid-write leaves the previous checkpoint intact.
    printf 'step=%d\nrestarts=%d\n' "$step" "$restarts" >"$CKPT.tmp.$$"
    mv -f "$CKPT.tmp.$$" "$CKPT"
}

read_key() { sed -n "s/^$1=\([0-9][0-9]*\)\$/\1/p" "$CKPT"; }

# Signals only raise flags; the loop acts on them between steps, so a signal can never
# split "step done" from "step logged".
preempt=0
term=0
trap 'preempt=1' USR1
trap 'term=1' TERM

# Sleeps up to $1 seconds, returning early when a signal raised a flag.
nap() {
    sleep "$1" &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        wait "$pid" || true
        if ((preempt || term)); then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            return
        fi
    done
}

on_term() {
    save_checkpoint
    log "SIGTERM: checkpoint saved at step $step; exiting"
    exit 143
}

on_preempt() {
    preempt=0
    save_checkpoint
    log "SIGUSR1: checkpoint saved at step $step; running $FAIRWAY_BIN ckpt-done"
    if "$FAIRWAY_BIN" ckpt-done; then
        log "waiting to be requeued"
        local waited=0
        while ((waited < REQUEUE_WAIT)); do
            nap 1
            if ((term)); then on_term; fi
            preempt=0
            waited=$((waited + 1))
        done
        log "not requeued after ${REQUEUE_WAIT}s; training on"
    else
        log "fairway ckpt-done failed; training on until Slurm stops the job"
    fi
}

if [[ -f $CKPT ]]; then
    step=$(read_key step)
    restarts=$(($(read_key restarts) + 1))
    log "resumed at step $step (restart $restarts)"
else
    step=0
    restarts=0
    log "started: $STEPS steps of ${STEP_SECS}s, checkpoint every $CKPT_EVERY"
fi
save_checkpoint

while ((step < STEPS)); do
    if ((term)); then on_term; fi
    if ((preempt)); then
        on_preempt
        continue
    fi
    nap "$STEP_SECS"
    if ((preempt || term)); then
        continue # the step was interrupted: it is not done
    fi
    step=$((step + 1))
    echo "$step" >>"$STEPS_LOG"
    if ((step % CKPT_EVERY == 0)); then
        save_checkpoint
    fi
done

save_checkpoint
log "done steps=$step restarts=$restarts"
