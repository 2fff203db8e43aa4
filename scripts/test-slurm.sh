#!/usr/bin/env bash
# The host suites on real Slurm, in two lanes at once. Each test starts its own cluster
# (munged, MariaDB, slurmdbd, slurmctld, slurmd on ports of its own) and spends most of
# its time waiting on Slurm's timers (decay passes, scheduling cycles), so two clusters
# side by side halve the wall time on two cores without either test seeing the other.
# Lanes take disjoint port ranges (FAIRWAY_TEST_PORT_BASE, below the kernel's ephemeral
# range), so no port can be handed to both. The suites are built once and their
# binaries run directly (no cargo in the lanes: no lock to share, nothing rebuilt
# midway). Each lane prints its log when it ends, with every suite's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FAIRWAY_PLUGIN_DIR:?FAIRWAY_PLUGIN_DIR names the test plugins (make test-slurm sets it)}"
CARGO=${CARGO:-cargo}

# Suites by lane, balanced by measured wall time (slowest first, each to the lane with
# less so far). A suite not named here runs in lane 2, so none is skipped; e2e suites
# need a docker cluster (make test-e2e) and are not run here.
# Last measured (CI, 2026-12-06): about 980 s each.
lane1=(fairway_terms explain priority_parity learned_model fairshare_equivalence dashboard gpu_binding)
lane2=(priority_restart faults job_submit slurm_host memcheck priority_equivalence gpu_plugin)

declare -A exe
while read -r name path; do [[ $path == /* ]] || path=$PWD/$path; exe[$name]=$path; done < <(
  $CARGO test -p fairway-tests --tests --no-run 2>&1 | tee /dev/stderr |
    sed -nE 's#^ *Executable tests/([a-z0-9_]+)\.rs \((.*)\)$#\1 \2#p')
for s in "${!exe[@]}"; do
  case " ${lane1[*]} ${lane2[*]} " in *" $s "*) ;; *) [[ $s == e2e* ]] || lane2+=("$s") ;; esac
done
for s in "${lane1[@]}" "${lane2[@]}"; do
  [ -n "${exe[$s]:-}" ] || { echo "test-slurm: no test binary for $s" >&2; exit 1; }
done

run_lane() {
  local n=$1 status=0 t0 s
  shift
  export FAIRWAY_TEST_PORT_BASE=$((20000 + n * 4000))
  for s in "$@"; do
    t0=$SECONDS
    echo "== lane $n: $s"
    (cd tests && "${exe[$s]}" --test-threads=1) || status=1  # cargo runs them in the package
    echo "== lane $n: $s took $((SECONDS - t0)) s"
  done
  return $status
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
t0=$SECONDS
run_lane 1 "${lane1[@]}" >"$logs/1" 2>&1 & p1=$!
run_lane 2 "${lane2[@]}" >"$logs/2" 2>&1 & p2=$!
status=0
wait $p1 || status=1
cat "$logs/1"
wait $p2 || status=1
cat "$logs/2"
echo "test-slurm: both lanes done in $((SECONDS - t0)) s, status $status"
exit $status
