#!/usr/bin/env bash
# The robustness sweep of Fairway's terms: writes bench/results/sim-sweep.md.
#
# Workloads:
# - Alibaba openb pods (crates/trace/fixtures/openb_pod_list_default.csv) on 2, 3, 4, 6, 8
#   and 16 nodes of 8 GPUs and 4, 6, 8 and 12 nodes of 4 GPUs: from heavily backlogged to idle.
#   openb has no time limits: the simulator's 3-day default applies.
# - The synthetic AI workload (5,000 jobs) at offered loads 0.6, 0.7, 0.8, 0.9 and 1.0, seeds
#   1, 2 and 3: the node count is chosen per seed from the load it offers on 32 nodes.
#
# Configurations, each against stock multifactor (its own limits, no terms) and oracle SJF,
# with the simulator's multifactor weights (fair share 10000, age 1000, job size 1000: the
# docker cluster's):
# - shipped: config/fairway.gpu-cluster.toml as the plugins read it (`--fairway-toml`):
#   predicted work at weight 1000, max_wait 3 days (not for heavy users' jobs), and
#   predicted limits for every job with history (`predicted_limits = "all_jobs"`, margin
#   0.5, extended before they run out up to the job's own limit);
# - shipped without predicted limits; shipped with max_wait lifting heavy users' jobs too
#   (`max_wait_heavy_users`, the bound before); shipped with limits Slurm kills jobs at
#   (time=auto's `on_request`, for every job);
# - no terms + predicted limits: multifactor's priorities, with predicted limits;
# - before: predicted work alone (the shipped config until this sweep);
# - strong: predicted work at twice the fair-share weight, with max_wait and limits.
# Fairway with every term off and no predicted limits is multifactor itself (priority_parity
# and the equivalence tests), so it needs no column.
#
# One run of a workload says little about a policy: a change of a few priority points
# anywhere reorders two jobs, and the waits of every job after them move (multifactor
# itself, given 0-10 points of noise per job, moves its max wait by up to ±77% here). So
# each configuration runs NOISE times beside multifactor with the same noise
# (`fairway sim --jitter 10 --jitter-seed k`: 0-10 points per job out of ~12,000), and the
# report gives the median of the paired ratios, with multifactor's own spread under that
# noise beside it (and its own waits, in time: a ratio of 1.6 may be 44 s against 77 s). The
# single run without noise is reported too. 16 draws (NOISE): with 8, one workload's median
# moved from 0.90 to 1.05 when the draws were doubled.
#
# Per row: mean JCT, p99 wait of the largest jobs, share deviation and max wait as ratios to
# multifactor; the share of oracle SJF's mean-JCT gain that Fairway captures (where the
# oracle gains 10% or more); and whether the row meets the bar (every median ≤ 1.05).
# About 5 minutes on 2 cores.
#
# WEIGHTS="300 500 3000" runs predicted work alone at those weights instead (no bound) and
# writes bench/results/sim-sweep-weights.md: how the choice of the shipped weight was made.
source "$(dirname "$0")/cli-env.sh"
export F NOISE="${NOISE:-16}" WEIGHTS="${WEIGHTS:-}"
report=$OUT/sim-sweep${WEIGHTS:+-weights}.md
python3 - "$rev" > "$report" <<'PY'
import json, os, statistics, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

F = os.environ["F"]
NOISE = int(os.environ["NOISE"])
JITTER = 10
OPENB = ["--trace", "crates/trace/fixtures/openb_pod_list_default.csv", "--format", "openb"]
LIMITS = ["--predicted-limits", "extend", "--limit-margin", "0.5"]
# The shipped max_wait (3 days), for the configurations that vary the shipped one.
MAX_WAIT = ["--max-wait", "259200"]
# The first is the shipped config. Every config is paired, noise for noise, with stock
# multifactor (its own limits, no terms), run on its own.
CONFIGS = [
    ("shipped", ["--fairway-toml", "config/fairway.gpu-cluster.toml"]),
    ("shipped, no predicted limits", ["--weight-predicted-work", "1000", *MAX_WAIT]),
    ("shipped, max_wait for heavy users too",
     ["--weight-predicted-work", "1000", *MAX_WAIT, "--max-wait-heavy-users"] + LIMITS),
    ("shipped, limits killed at the prediction",
     ["--weight-predicted-work", "1000", *MAX_WAIT, "--predicted-limits", "kill", "--limit-margin", "0.5"]),
    ("no terms + predicted limits", ["--weight-predicted-work", "0", "--max-wait", "0"] + LIMITS),
    ("before: predicted work alone", ["--weight-predicted-work", "1000", "--max-wait", "0"]),
    ("strong + max_wait + predicted limits", ["--weight-predicted-work", "20000", *MAX_WAIT] + LIMITS),
]
if os.environ["WEIGHTS"]:
    CONFIGS = [(f"predicted work {w}", ["--weight-predicted-work", w, "--max-wait", "0"])
               for w in os.environ["WEIGHTS"].split()]
METRICS = ("mean_jct", "p99_wait_large", "share_deviation", "max_wait")


def sim(args, policies):
    out = subprocess.run([F, "sim", *args, "--compare", policies, "--json"],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["workload"], {r["policy"]: r for r in d["results"]}


def ratios(f, m):
    return [f[k] / m[k] if m[k] else 1.0 for k in METRICS]


def noise(k):
    return [] if k == 0 else ["--jitter", str(JITTER), "--jitter-seed", str(k)]


cases = []
for nodes, gpus in [(2, 8), (3, 8), (4, 8), (6, 8), (8, 8), (16, 8), (4, 4), (6, 4), (8, 4), (12, 4)]:
    cases.append((f"openb, {nodes} × {gpus} GPUs", OPENB + ["--nodes", str(nodes), "--gpus-per-node", str(gpus)]))
for seed in (1, 2, 3):
    synth = ["--synth", "--jobs", "5000", "--seed", str(seed)]
    w, _ = sim(synth + ["--nodes", "32"], "fifo")
    for load in (0.6, 0.7, 0.8, 0.9, 1.0):
        nodes = max(1, round(32 * w["offered_load"] / load))
        cases.append((f"synthetic seed {seed}, load {load:.1f}", synth + ["--nodes", str(nodes)]))

# Every run: (case, config or None for the baselines, noise draw).
runs = [(c, None, k) for c in range(len(cases)) for k in range(NOISE + 1)]
runs += [(c, i, k) for c in range(len(cases)) for i in range(len(CONFIGS)) for k in range(NOISE + 1)]


def run(r):
    c, i, k = r
    args = cases[c][1] + noise(k)
    if i is None:
        return sim(args, "multifactor,sjf-oracle" if k == 0 else "multifactor")
    return sim(args + CONFIGS[i][1], "fairway")


with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    done = dict(zip(runs, pool.map(run, runs)))

rows, summary = [], {name: {"met": 0, "single": 0, "caps": [], "worst": [0.0] * 4} for name, _ in CONFIGS}
spreads = []
for c, (name, _) in enumerate(cases):
    w, base = done[(c, None, 0)]
    m0, oracle = base["multifactor"], base["sjf-oracle"]
    mf = [done[(c, None, k)][1]["multifactor"] for k in range(1, NOISE + 1)]
    spread = [max(abs(x - 1.0) for x in col) for col in zip(*(ratios(m, m0) for m in mf))]
    waits = [statistics.median(m[k] for m in mf) for k in ("p99_wait_large", "max_wait")]
    spreads.append((name, spread, waits))
    for i, (cname, _) in enumerate(CONFIGS):
        paired = [ratios(done[(c, i, k)][1]["fairway"], mf[k - 1]) for k in range(1, NOISE + 1)]
        med = [statistics.median(col) for col in zip(*paired)]
        single = ratios(done[(c, i, 0)][1]["fairway"], m0)
        m_jct = statistics.median(m["mean_jct"] for m in mf)
        f_jct = statistics.median(done[(c, i, k)][1]["fairway"]["mean_jct"] for k in range(1, NOISE + 1))
        gain = (m_jct - oracle["mean_jct"]) / m_jct if m_jct else 0.0
        cap = (m_jct - f_jct) / (m_jct - oracle["mean_jct"]) if gain >= 0.10 else None
        ok = all(x <= 1.05 for x in med)
        s = summary[cname]
        s["met"] += ok
        s["single"] += all(x <= 1.05 for x in single[:3]) and single[3] <= 1.0 + 1e-9
        s["worst"] = [max(a, b) for a, b in zip(s["worst"], med)]
        if cap is not None:
            s["caps"].append(cap)
        rows.append((name, f"{w['nodes']} × {w['gpus'] // w['nodes']}", f"{w['offered_load']:.2f}", cname,
                     *(f"{x:.2f}" for x in med), " / ".join(f"{x:.2f}" for x in single),
                     "–" if cap is None else f"{cap:.0%}", "yes" if ok else "**no**"))

print("# Simulator sweep: Fairway's terms against multifactor\n")
print(f"Generated by `bench/sim-sweep.sh` at commit {sys.argv[1]}. Ratios to multifactor: the median over")
print(f"{NOISE} runs, each with multifactor under the same priority noise (0–{JITTER} points per job, out of")
print("~12,000), and the single run without noise. \"large\" = GPU count at or above the 90th")
print("percentile; oracle gain captured = (mf − Fairway) ÷ (mf − oracle SJF) in median mean JCT, shown")
print("where the oracle gains 10% or more; meets = every median ≤ 1.05 (mean JCT, p99 wait of the")
print("largest jobs, share deviation, max wait). The single-run bar (≤ 1.05 on the first three and max")
print("wait ≤ multifactor's) is counted too, though multifactor alone misses it under the noise.\n")
for cname, _ in CONFIGS:
    s = summary[cname]
    half = sum(c >= 0.5 for c in s["caps"])
    w = s["worst"]
    print(f"- **{cname}**: meets the bar in {s['met']} of {len(cases)} workloads (the single-run bar in "
          f"{s['single']}); captures at least half of the oracle's gain in {half} of the {len(s['caps'])} where "
          f"the oracle gains 10% or more; worst medians: mean JCT {w[0]:.2f}, p99 wait of the largest "
          f"{w[1]:.2f}, share deviation {w[2]:.2f}, max wait {w[3]:.2f}.")
print("\n## How far multifactor itself moves under the noise\n")
print("Largest |ratio − 1| of multifactor with noise to multifactor without, over the runs, and")
print("multifactor's own waits (median over the runs):\n")
print("| workload | mean JCT | p99 wait large | share dev | max wait | mf p99 wait large | mf max wait |")
print("|---|---:|---:|---:|---:|---:|---:|")


def span(secs):
    if secs < 120:
        return f"{secs:.0f} s"
    return f"{secs / 60:.0f} min" if secs < 7200 else f"{secs / 3600:.1f} h"


for name, spread, waits in spreads:
    print(f"| {name} | " + " | ".join(f"±{x:.2f}" for x in spread) + " | "
          + " | ".join(span(x) for x in waits) + " |")
print("\n## Per workload\n")
print("| workload | nodes × GPUs | load | config | mean JCT | p99 wait large | share dev | max wait | single run | oracle gain captured | meets |")
print("|---|---|---:|---|---:|---:|---:|---:|---|---:|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
echo "wrote $report"
