#!/usr/bin/env bash
# Writes the fuzz targets' seed inputs under DIR/<target>/: what the parsers meet in
# practice (the repository's configs, topology files, trace fixtures, a directive, small
# state files). Targets whose first byte picks the format or file get one seed per
# choice. Used by scripts/fuzz-long.sh and scripts/fuzz-short.sh.
#   scripts/fuzz-seeds.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:?usage: scripts/fuzz-seeds.sh DIR}
mkdir -p "$seeds"/{fairway_toml,topology,traces,submit_rules,state_files}
cp config/*.toml "$seeds/fairway_toml/"
cp config/topology/*.toml "$seeds/topology/"
i=0
for fixture in crates/trace/fixtures/*; do
    for f in 0 1 2 3 4 5 6 7; do
        { printf "\\x$(printf %02x "$f")"; head -c 4096 "$fixture"; } >"$seeds/traces/$i-$f"
    done
    i=$((i + 1))
done
printf 'fairway: model=70b method=full precision=bf16 ckpt=5m tier=batch time=auto' >"$seeds/submit_rules/comment"
printf '\x00{"format":1,"history":{"1000|vision|train|8":[600,900]},"limits":{"1000|vision|train|8":[3600,3600]}}' \
    >"$seeds/state_files/history"
printf '\x01{"format":1,"model":"m","quantile":0.85,"step":0.05,"shift":0.1,"jobs":10,"misses":2}' \
    >"$seeds/state_files/calibration"
printf '\x02{"format":1,"jobs":{"7":{"count":1,"until":100}}}' >"$seeds/state_files/preemptions"
