#!/usr/bin/env bash
# The short fuzz run of `make test`: every fuzz target for FUZZ_SECS seconds (20 by
# default) from the seeds of scripts/fuzz-seeds.sh. Built with the machine's one
# toolchain (stable), with libFuzzer's coverage instrumentation as cargo-fuzz sets it
# but no sanitizer: that needs nightly, which `make fuzz`/`make fuzz-long` use. For safe
# Rust a panic or a failed debug assertion is the finding, and both abort the run here.
# A crash leaves its input in target/fuzz-short/artifacts/<target>/ and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECS:-20}
triple=$(rustc -vV | sed -n 's/^host: //p')
out=target/fuzz-short
# --target keeps the instrumentation off build scripts and proc macros.
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
    cargo build -q --release --locked --manifest-path fuzz/Cargo.toml --target-dir "$out" --target "$triple" --bins
# FUZZ_BUILD_ONLY=1: print where the binaries are and stop (scripts/fuzz-long.sh uses them).
[ "${FUZZ_BUILD_ONLY:-}" = 1 ] && { echo "$out/$triple/release"; exit 0; }
targets=$(awk '/^\[\[bin\]\]/ {bin = 1} bin && /^name *=/ {gsub(/[" ]/, "", $0); sub(/name=/, ""); print; bin = 0}' fuzz/Cargo.toml)
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
bash scripts/fuzz-seeds.sh "$seeds"
failed=0
for t in $targets; do
    corpus=$out/corpus/$t artifacts=$out/artifacts/$t/
    mkdir -p "$corpus" "$artifacts" "$seeds/$t"
    log=$out/$t.log
    if "$out/$triple/release/$t" "$corpus" "$seeds/$t" -max_total_time="$secs" -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1; then
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
        echo "fuzz-short: $t: ${execs:-?} executions in $secs s, no crash"
    else
        failed=1
        echo "fuzz-short: $t FAILED; input kept in $artifacts; log:" >&2
        tail -40 "$log" >&2
    fi
done
exit "$failed"
