#!/usr/bin/env bash
# Runs the demo binary against the plugins in $FAIRWAY_PLUGIN_DIR (set by `make demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q --release -p fairway-tests --bin fairway-demo
