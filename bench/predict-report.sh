#!/usr/bin/env bash
# Regenerates bench/results/predict.md and its plots (bench/results/predict-*.svg):
# `fairway predict eval` for the time limit, Tsafrir's last two and the learned model, whose
# typical run time (what priority ranks jobs by) is scored on its error and whose upper
# quantile (what time=auto limits are set from) is scored on how many jobs outlive it, with
# its offsets fixed at training and calibrated online as the plugins do.
#
# - NREL Eagle's 1,000-job sample and Alibaba openb's pods (crates/trace/fixtures, with
#   their provenance in its MANIFEST): the two real traces with run times.
# - Lublin's synthetic SWF log, when ../shared/data/traces holds it (not copied here).
# - Fairway's synthetic AI workload (`fairway trace synth`), 10,000 jobs, seeds 101, 202
#   and 303: workloads the model's settings were never looked at on.
# - Drift: seed 101 again, with every run from the newest 30% on (the test jobs) taking
#   1.5, 2 or 3 times as long; and models trained on one workload serving another.
source "$(dirname "$0")/cli-env.sh"
FIX=crates/trace/fixtures
LUBLIN=../shared/data/traces/lublin_256.swf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One summary row from `predict eval --json`: name, file.
row() {
    jq -r --arg name "$1" '
        # Fixed decimals, sign kept: n digits after the point.
        def fixed(n): (pow(10; n)) as $m | (. * $m | round) as $v | ($v | fabs) as $a
            | (if $v < 0 then "-" else "" end) + "\($a / $m | floor)"
              + (if n > 0 then "." + ("\($a % $m + $m)" | .[1:]) else "" end);
        def pct: . * 100 | fixed(1);
        (.results | map({(.predictor): .}) | add) as $r
        | (1 - .calibration.quantile) as $t
        | ($r["learned: upper q, online"].under_rate - $t) as $off
        | "| \($name) | \(.test_jobs) | \(($r["learned: typical"].mae_s / $r["last two (Tsafrir)"].mae_s) | fixed(2))× "
        + "| \($r["learned: upper q, fixed"].under_rate | pct)% | \($r["learned: upper q, online"].under_rate | pct)% "
        + "| \(if $off > 0 then "+" else "" end)\($off | pct) "
        + "| \($r["learned: upper q, fixed"].mae_s | fixed(0)) | \($r["learned: upper q, online"].mae_s | fixed(0)) "
        + "| \(.online.shift | if . > 0 then "+" else "" end)\(.online.shift | fixed(3)) |"' "$2"
}

# eval: name, trace, format, more arguments. Appends a summary row and a section.
eval_trace() {
    local name=$1 trace=$2 format=$3
    shift 3
    "$F" predict eval --trace "$trace" --format "$format" "$@" --json >"$tmp/eval.json"
    row "$name" "$tmp/eval.json" >>"$tmp/rows-$group.md"
    {
        echo "### $name"
        echo
        echo '```'
        "$F" predict eval --trace "$trace" --format "$format" "$@" | sed "s|$tmp/||"
        echo '```'
        echo
    } >>"$tmp/sections-$group.md"
}

TABLE_HEAD='| workload | test jobs | typical MAE ÷ last two | upper q under-predicted, fixed | online | online − target (points) | upper q MAE (s), fixed | online | final shift (log) |
|---|---:|---:|---:|---:|---:|---:|---:|---:|'

for seed in 101 202 303; do
    "$F" trace synth --jobs 10000 --seed "$seed" --out "$tmp/synth-$seed.txt" >/dev/null 2>&1
done
for d in 1.5 2 3; do
    "$F" trace synth --jobs 10000 --seed 101 --drift "$d" --drift-from 0.7 --out "$tmp/synth-101-drift-$d.txt" >/dev/null 2>&1
done

group=traces
eval_trace "NREL Eagle (sample, 1,000 jobs)" "$FIX/eagle_sample.csv" eagle
eval_trace "Alibaba openb (GPU v2023 pods)" "$FIX/openb_pod_list_default.csv" openb --plot "$OUT/predict-openb.svg"
if [[ -f $LUBLIN ]]; then
    eval_trace "Lublin-Feitelson synthetic SWF (10,000 jobs)" "$LUBLIN" swf --plot "$OUT/predict-lublin.svg"
fi
for seed in 101 202 303; do
    eval_trace "Synthetic AI workload (10,000 jobs, seed $seed)" "$tmp/synth-$seed.txt" sacct
done

group=drift
for d in 1.5 2 3; do
    plot=()
    [[ $d == 2 ]] && plot=(--plot "$OUT/predict-drift-2x.svg")
    eval_trace "Synthetic, seed 101, test jobs run ${d}× as long" "$tmp/synth-101-drift-$d.txt" sacct "${plot[@]}"
done
"$F" predict train --trace "$tmp/synth-101.txt" --format sacct --out "$tmp/model-synth-101.json" >/dev/null
"$F" predict train --trace "$FIX/eagle_sample.csv" --format eagle --out "$tmp/model-eagle.json" >/dev/null
"$F" predict train --trace "$FIX/openb_pod_list_default.csv" --format openb --out "$tmp/model-openb.json" >/dev/null
eval_trace "Model of synthetic seed 101 on openb" "$FIX/openb_pod_list_default.csv" openb --model "$tmp/model-synth-101.json"
if [[ -f $LUBLIN ]]; then
    eval_trace "Model of synthetic seed 101 on Lublin" "$LUBLIN" swf --model "$tmp/model-synth-101.json"
fi
eval_trace "Model of synthetic seed 101 on Eagle" "$FIX/eagle_sample.csv" eagle --model "$tmp/model-synth-101.json"
eval_trace "Model of openb on synthetic seed 202" "$tmp/synth-202.txt" sacct --model "$tmp/model-openb.json"
eval_trace "Model of Eagle on synthetic seed 202" "$tmp/synth-202.txt" sacct --model "$tmp/model-eagle.json" \
    --plot "$OUT/predict-eagle-model-on-synth.svg"

group=steps
for step in 0 0.02 0.05 0.1 0.2; do
    eval_trace "seed 101, step $step" "$tmp/synth-101.txt" sacct --online-step "$step"
    eval_trace "seed 101, runs 2× from the test jobs on, step $step" "$tmp/synth-101-drift-2.txt" sacct --online-step "$step"
    eval_trace "model of Eagle on seed 202, step $step" "$tmp/synth-202.txt" sacct --model "$tmp/model-eagle.json" --online-step "$step"
done

{
    echo "# Run-time predictor accuracy"
    echo
    echo "Generated by \`bench/predict-report.sh\` at commit $rev. Each trace is replayed in submit"
    echo "order; a job's history holds only jobs that ended before it was submitted. The learned"
    echo "model trains on the oldest 70% (its trees on the first three quarters of those, its"
    echo "offsets on the rest) and every predictor is scored on the newest 30%; with \"model of\","
    echo "a model trained on all of another workload is scored on every job of this one."
    echo
    echo "Two outputs of the model are scored. Its **typical** run time (the trees' estimate,"
    echo "which priority ranks jobs by) on its mean absolute error, against Tsafrir's mean of the"
    echo "last two runs. Its **upper quantile** (q = 0.85, which \`time=auto\` limits are set from)"
    echo "on the share of jobs that outlive it, whose target is 15%: with the conformal offsets"
    echo "fixed at training, and calibrated online (step 0.05, the default) as the plugins do:"
    echo "each test job is predicted at its submission, and learned from once it has ended."
    echo
    echo "## Traces"
    echo
    echo "$TABLE_HEAD"
    cat "$tmp/rows-traces.md"
    echo
    echo "Under-prediction over runs of 200 consecutive test jobs: [openb](predict-openb.svg),"
    echo "[Lublin](predict-lublin.svg). Eagle's 300 test jobs are one burst, submitted in the"
    echo "same second: none ends before the last is predicted, so online equals fixed there."
    echo
    echo "## Drift"
    echo
    echo "$TABLE_HEAD"
    cat "$tmp/rows-drift.md"
    echo
    echo "Under-prediction over runs of 200 consecutive test jobs: [test jobs 2× as long](predict-drift-2x.svg),"
    echo "[Eagle's model on the synthetic workload](predict-eagle-model-on-synth.svg)."
    echo
    echo "Where online calibration cannot help: jobs submitted together, before any of them ends,"
    echo "all get the same calibration, so their coverage is all or nothing. 453 of Eagle's 1,000"
    echo "jobs were submitted in one second (300 of them the same job, with the same limit), and a"
    echo "model of another workload either covers such a burst or misses it whole. The trees'"
    echo "typical run time is not recalibrated: when run times drift it loses to the last two runs,"
    echo "which follow them."
    echo
    echo "## Step of the online calibration"
    echo
    echo "Step 0 is the model with its offsets as trained."
    echo
    echo "$TABLE_HEAD"
    cat "$tmp/rows-steps.md"
    echo
    echo "## Details"
    echo
    cat "$tmp/sections-traces.md" "$tmp/sections-drift.md"
} >"$OUT/predict.md"
sed -n '/^## Traces/,/^## Details/p' "$OUT/predict.md" | grep '^|'
echo "wrote $OUT/predict.md and $OUT/predict-*.svg"
