#!/usr/bin/env bash
# Runs each argument (a shell command) at once beside the others and prints each one's
# log, whole, as it ends, with its wall time; exits 1 if any failed. `make test` runs
# the host suites this way beside the builds and images the later steps need: the host
# suites spend most of their time waiting on Slurm's timers, not on the two cores.
# Usage: scripts/side-by-side.sh 'make test-slurm' 'make test-packages e2e-prepare'
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/side-by-side.sh COMMAND..." >&2; exit 2; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A cmd_of log_of
t0=$SECONDS
for cmd in "$@"; do
    bash -c "$cmd" >"$logs/$#.log" 2>&1 &
    cmd_of[$!]=$cmd
    log_of[$!]=$logs/$#.log
    shift
done
status=0
while [ ${#cmd_of[@]} -gt 0 ]; do
    done_pid=
    wait -n -p done_pid "${!cmd_of[@]}"
    rc=$?
    [ -n "$done_pid" ] || break
    echo "== side-by-side: '${cmd_of[$done_pid]}' exited $rc after $((SECONDS - t0)) s; its log:"
    cat "${log_of[$done_pid]}"
    echo "== side-by-side: end of '${cmd_of[$done_pid]}' (exit $rc)"
    [ "$rc" = 0 ] || status=1
    unset "cmd_of[$done_pid]"
done
echo "side-by-side: all done in $((SECONDS - t0)) s, status $status"
exit $status
