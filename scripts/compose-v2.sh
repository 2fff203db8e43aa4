#!/usr/bin/env bash
# Docker Compose v2 (the `docker compose` CLI plugin) for a machine that has only v1's
# docker-compose (Debian bookworm's), from Debian trixie's docker-compose package: a Go
# binary needing only glibc. Installs nothing system-wide: the plugin goes to
# .cache/compose-v2/cli-plugins/, and the directory printed is a DOCKER_CONFIG under
# which `docker compose` finds it. `make test-e2e` runs one Slurm version's cluster with
# it, so both compose generations stay tested (docker/cluster.sh prefers v2).
# Usage: DOCKER_CONFIG=$(scripts/compose-v2.sh) docker compose version
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/.cache/compose-v2
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ ! -x "$dir/cli-plugins/docker-compose" ]; then
    mkdir -p "$dir"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    fetch() { # the network is the only flaky part
        for attempt in 1 2 3; do
            curl -fsSL --max-time 300 -o "$2" "$1" && return 0
            echo "compose-v2: fetching $1 failed (attempt $attempt)" >&2
            sleep $((attempt * 5))
        done
        return 1
    }
    # The package's current file name, from trixie's index (point releases replace it).
    fetch "$mirror/dists/trixie/main/binary-amd64/Packages.xz" "$work/Packages.xz"
    file=$(xz -dc "$work/Packages.xz" | awk '/^Package: docker-compose$/ {f = 1} f && /^Filename:/ && !n++ {print $2}')
    [ -n "$file" ] || { echo "compose-v2: no docker-compose package in trixie's index" >&2; exit 1; }
    fetch "$mirror/$file" "$work/compose.deb"
    dpkg-deb -x "$work/compose.deb" "$work/root"
    install -D -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$dir/cli-plugins/docker-compose"
fi
DOCKER_CONFIG=$dir docker compose version >&2
echo "$dir"
