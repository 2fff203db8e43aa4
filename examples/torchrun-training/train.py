"""A PyTorch DDP training job that preempt/fairway can preempt without losing a step.

Launched by torchrun on every node (see train.sbatch beside it). CPU-only (gloo), so it
runs anywhere; the preemption protocol is the same with NCCL on GPUs:

1. SIGUSR1 reaches every rank (Slurm signals each step's processes; torchrun itself must
   ignore it, see train.sbatch). The handler only raises a flag.
2. At the next step boundary the ranks agree on the flag (an all-reduce), so they all
   stop at the same step even when the signal reached them at different times.
3. Rank 0 saves a checkpoint with torch.save (written to a temporary file and renamed),
   the ranks meet at a barrier, and rank 0 runs `fairway ckpt-done`: Slurm requeues the
   job now instead of at the end of its grace time.
4. When the job starts again, every rank loads the checkpoint and goes on from that step.

Settings (environment): STEPS (default 200), STEP_SECS (0.5), CKPT_EVERY (20), CKPT_DIR
(default $HOME/.fairway-ckpt/$SLURM_JOB_NAME), FAIRWAY_BIN (fairway), REQUEUE_WAIT (300).
In CKPT_DIR: checkpoint.pt, steps.log (rank 0: each completed step), train.log (events of
every rank) and final.pt (the trained weights).

`python3 train.py --reference` trains the same model in one process without stopping
and prints how far the weights in final.pt are from it: batches are a function of the
step alone, so a resumed run that lost or repeated a step ends elsewhere.
"""

import datetime
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("STEPS", "200"))
STEP_SECS = float(os.environ.get("STEP_SECS", "0.5"))
CKPT_EVERY = int(os.environ.get("CKPT_EVERY", "20"))
JOB_NAME = os.environ.get("SLURM_JOB_NAME", "torchrun-training")
CKPT_DIR = os.environ.get("CKPT_DIR", os.path.expanduser(f"~/.fairway-ckpt/{JOB_NAME}"))
FAIRWAY_BIN = os.environ.get("FAIRWAY_BIN", "fairway")
REQUEUE_WAIT = float(os.environ.get("REQUEUE_WAIT", "300"))
CKPT = os.path.join(CKPT_DIR, "checkpoint.pt")
FEATURES, BATCH, LR = 16, 32, 0.05


def model_and_optimizer():
    torch.manual_seed(0)  # the same initial weights on every rank and in --reference
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    return model, torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)


def batch(step, rank):
    """Rank `rank`'s batch at `step`: a function of the two alone, so a step redone after a
    restart sees the same data."""
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    return x, y


def reference(world):
    """The same training in one process: DDP averages the ranks' gradients, and so does
    the mean of their losses here."""
    model, opt = model_and_optimizer()
    for step in range(STEPS):
        opt.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(model(x), y) for x, y in (batch(step, r) for r in range(world)))
        (loss / world).backward()
        opt.step()
    final = torch.load(os.path.join(CKPT_DIR, "final.pt"))
    diff = max((p - final[k]).abs().max().item() for k, p in model.state_dict().items())
    print(f"reference: {STEPS} steps of {world} ranks; largest difference from final.pt: {diff:.3g}")
    return diff


def log(rank, msg):
    line = f"{datetime.datetime.now():%Y-%m-%dT%H:%M:%S} job={os.environ.get('SLURM_JOB_ID', 'none')} rank={rank} {msg}\n"
    print(line, end="", flush=True)
    with open(os.path.join(CKPT_DIR, "train.log"), "a") as f:
        f.write(line)


def save(path, state):
    # Write then rename: a kill mid-write leaves the previous file whole.
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save(state, tmp)
    os.replace(tmp, path)


def main():
    if sys.argv[1:2] == ["--reference"]:
        sys.exit(0 if reference(int(sys.argv[2]) if len(sys.argv) > 2 else 4) < 1e-5 else 1)
    os.makedirs(CKPT_DIR, exist_ok=True)
    dist.init_process_group("gloo")  # "nccl" on GPUs; torchrun sets RANK, WORLD_SIZE, MASTER_*
    rank, world = dist.get_rank(), dist.get_world_size()

    signalled = []
    signal.signal(signal.SIGUSR1, lambda *_: signalled.append(time.time()))
    # Slurm stops a requeued job with SIGTERM: leave at once, the checkpoint is saved.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))

    model, opt = model_and_optimizer()
    ddp = DistributedDataParallel(model)
    step, restarts = 0, 0
    if os.path.exists(CKPT):
        state = torch.load(CKPT)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, restarts = state["step"], state["restarts"] + 1
        log(rank, f"resumed at step {step} (restart {restarts})")
    elif rank == 0:
        log(rank, f"started: {STEPS} steps on {world} ranks, checkpoint every {CKPT_EVERY}")

    def checkpoint():
        if rank == 0:
            save(CKPT, {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "restarts": restarts})

    while step < STEPS:
        # Every rank stops at the same step: the flag is all-reduced before each one.
        flag = torch.tensor([1 if signalled else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item():
            if signalled:
                log(rank, "SIGUSR1 received")
            checkpoint()
            dist.barrier()  # the checkpoint is on disk before anyone asks for the requeue
            if rank == 0:
                log(rank, f"SIGUSR1: checkpoint saved at step {step}; running {FAIRWAY_BIN} ckpt-done")
                if subprocess.run([FAIRWAY_BIN, "ckpt-done"]).returncode != 0:
                    log(rank, "fairway ckpt-done failed; training on until Slurm stops the job")
            # Wait to be stopped by the requeue; train on if it never comes.
            deadline = time.time() + REQUEUE_WAIT
            while time.time() < deadline:
                time.sleep(1)
            signalled.clear()
            dist.barrier()
            log(rank, f"not requeued after {REQUEUE_WAIT:.0f} s; training on")
            continue
        x, y = batch(step, rank)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        time.sleep(STEP_SECS)  # a real step takes this long on a GPU
        step += 1
        if rank == 0:
            with open(os.path.join(CKPT_DIR, "steps.log"), "a") as f:
                f.write(f"{step}\n")
        if step % CKPT_EVERY == 0:
            checkpoint()

    if rank == 0:
        save(os.path.join(CKPT_DIR, "final.pt"), model.state_dict())
        log(rank, f"done steps={step} restarts={restarts}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
