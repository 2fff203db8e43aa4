#!/bin/bash
# Builds the `fairway` command in a bare Debian container, one with neither Slurm nor
# libclang, and checks that the binary links no Slurm library: the CLI (topology, sim,
# predict, check-config) must build and run on machines that have no Slurm at all.
#
# The image, fairway/bare:bookworm, is a debootstrap'd minimal bookworm with only gcc and
# libc6-dev added (the linker rustc needs), imported with `docker import` as
# docker/build-image.sh does (no registry); built once, FAIRWAY_REBUILD=1 to redo. The
# host's Rust toolchain and ~/.cargo are mounted read-only and the crates are fetched on
# the host first, so the container runs without network. Build outputs are kept in
# target/cli-standalone, so a second run only rebuilds what changed.
# Usage: scripts/cli-without-slurm.sh     (root: debootstrap and docker)
set -euo pipefail
cd "$(dirname "$0")/.."
tag=fairway/bare:bookworm
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
log=/tmp/fairway-cli-without-slurm.log
start=$SECONDS
fail() { echo "cli-without-slurm: FAIL: $*" >&2; exit 1; }
retry() { # the network is the only flaky part
    for attempt in 1 2 3; do
        "$@" >>"$log" 2>&1 && return 0
        echo "cli-without-slurm: '$*' failed (attempt $attempt); see $log" >&2
        tail -15 "$log" >&2
        sleep $((attempt * 5))
    done
    return 1
}
: >"$log"

build_image() {
    local root
    root=$(mktemp -d /var/tmp/fairway-rootfs-bare-$suite.XXXXXX)
    chmod 0755 "$root" # it becomes "/"
    # Unmount whatever debootstrap left mounted before deleting, never crossing into
    # another file system; a retried debootstrap starts from an empty directory.
    cleanup_root() {
        findmnt -R -n -o TARGET "$root" 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
        rm -rf --one-file-system "$root" || true
    }
    trap cleanup_root EXIT
    for attempt in 1 2 3; do
        debootstrap --variant=minbase --include=gcc,libc6-dev,ca-certificates \
            "$suite" "$root" "$mirror" >>"$log" 2>&1 && break
        echo "cli-without-slurm: debootstrap failed (attempt $attempt); see $log" >&2
        tail -15 "$log" >&2
        [ "$attempt" = 3 ] && { cp "$root/debootstrap/debootstrap.log" /tmp/ 2>/dev/null || true; fail "debootstrap $suite"; }
        cleanup_root
        mkdir -p "$root" && chmod 0755 "$root"
        sleep $((attempt * 5))
    done
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
    tar -C "$root" -c . | docker import -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
    cleanup_root
    trap - EXIT
    echo "$tag: built in $((SECONDS - start)) s, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%d MB", $1/1e6}')"
}

if [ -z "${FAIRWAY_REBUILD:-}" ] && docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag: already built"
else
    build_image
fi

# The image must really be bare: no Slurm package, no libclang (bindgen's need).
found=$(docker run --rm --network none "$tag" dpkg -l | awk '/^ii/ {print $2}' | grep -Ei 'slurm|clang' || true)
[ -z "$found" ] || fail "$tag has packages it must not have: $(echo $found)"

# Crates on the host (network), the build in the container (none).
retry cargo fetch --locked || fail "cargo fetch --locked"
# What it depends on: nothing of Slurm's, nor bindgen (libclang).
bad=$(cargo tree --offline --locked -p fairway-cli --prefix none | grep -E '^(slurm-sys|fairway-ffi|bindgen) ' | sort -u || true)
[ -z "$bad" ] || fail "fairway-cli depends on $(echo $bad)"
sysroot=$(rustc --print sysroot) # the toolchain this checkout builds with
cargo_home=${CARGO_HOME:-$HOME/.cargo}
cargo_home=$(realpath "$cargo_home")
out=$PWD/target/cli-standalone
mkdir -p "$out"
build_start=$SECONDS
docker run --rm --network none --user "$(id -u):$(id -g)" \
    -v "$PWD:/src:ro" -v "$out:/build" \
    -v "$sysroot:$sysroot:ro" -v "$cargo_home:/cargo:ro" \
    -e CARGO_HOME=/cargo -e CARGO_TARGET_DIR=/build -e HOME=/tmp -e PATH="$sysroot/bin:/usr/bin:/bin" \
    -e CARGO_TERM_COLOR=never \
    -w /src "$tag" bash -euo pipefail -c '
        cargo build --offline --locked -p fairway-cli
        echo "--- ldd target/cli-standalone/debug/fairway"
        ldd /build/debug/fairway
        /build/debug/fairway --version' >"$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log" >&2; fail "cargo build -p fairway-cli in $tag (log: $out/build.log)"; }
sed -n '/^--- ldd/,$p' "$out/build.log"
if sed -n '/^--- ldd/,$p' "$out/build.log" | grep -qi 'libslurm'; then
    fail "the fairway binary links Slurm"
fi
echo "cli-without-slurm: PASS: fairway built in $tag without Slurm or libclang (build $((SECONDS - build_start)) s, total $((SECONDS - start)) s); no libslurm in ldd"
