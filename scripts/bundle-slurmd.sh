#!/usr/bin/env bash
# Packs the host's slurmd (Debian's 22.05), the libraries it needs beyond glibc, Slurm's
# plugins and Fairway's built plugins into DIR, so that `slurmd -G` can run on a GPU
# machine without Slurm installed (scripts/capture-gpu-node.sh uses it there).
#   scripts/bundle-slurmd.sh DIR [FAIRWAY_PLUGIN_DIR]
set -euo pipefail
dir=$1 fairway=${2:-target/plugins/22.05.8/test}
rm -rf "$dir" && mkdir -p "$dir/lib" "$dir/plugins" "$dir/fairway"
cp /usr/sbin/slurmd "$dir/"
cp /usr/lib/x86_64-linux-gnu/slurm-wlm/*.so "$dir/plugins/"
# Only the gpu plugin is loaded by `slurmd -G`; its debug info is not needed there.
strip --strip-debug -o "$dir/fairway/gpu_nvml.so" "$fairway/gpu_nvml.so"
# Everything slurmd and its plugins link beyond glibc (which the GPU machine has, newer).
for f in /usr/sbin/slurmd "$dir"/plugins/*.so; do ldd "$f"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64)\.so' | xargs -r cp -L -t "$dir/lib/"
du -sh "$dir"
