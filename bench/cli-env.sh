# Sourced by the bench/*-report scripts that run the `fairway` CLI: from the repository
# root, a release build (one job: the CI machine has two cores), and
# F (the binary), OUT (bench/results) and rev (the commit the results come from).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
cargo build --release -q -p fairway-cli
F=target/release/fairway
OUT=bench/results
mkdir -p "$OUT"
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
