#!/bin/bash
# Builds fairway/slurm:<suite> from nothing: debootstrap a Debian rootfs with Slurm,
# munge, MariaDB and what the tests need already inside, then `docker import` it (this
# machine has no image registry). One image per Slurm version:
#   bookworm -> Slurm 22.05, trixie -> Slurm 24.11, sid -> Slurm 26.05
# Usage: docker/build-image.sh SUITE     (FAIRWAY_REBUILD=1 to rebuild an existing image)
set -euo pipefail
suite=${1:?usage: docker/build-image.sh bookworm|trixie|sid}
tag=fairway/slurm:$suite
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ -z "${FAIRWAY_REBUILD:-}" ] && docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag: already built"
    exit 0
fi
pkgs="slurmctld slurmd slurmdbd slurm-client libslurm-dev munge mariadb-server mariadb-client"
pkgs+=" procps iproute2 iputils-ping hostname ca-certificates python3 lua5.1 util-linux less"
# PyTorch (CPU, Debian's 1.13 with torchrun) for the torchrun checkpoint e2e test, on the
# 22.05 cluster only: about 90 s and 1 GB more per image, so not on all three. (Trixie's
# 2.6 cannot run torchrun: examples/torchrun-training/README.md, "PyTorch builds".)
[ "$suite" != bookworm ] || pkgs+=" python3-torch"
root=$(mktemp -d /var/tmp/fairway-rootfs-$suite.XXXXXX)
chmod 0755 "$root" # it becomes "/": services drop privileges inside
log=/tmp/fairway-image-$suite.log
cleanup() {
    # Unmount whatever debootstrap or we left mounted before deleting, and never cross
    # into another file system.
    local rc=$?
    umount -l "$root/proc" 2>/dev/null || true
    findmnt -R -n -o TARGET "$root" 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf --one-file-system "$root" || true
    exit $rc
}
trap cleanup EXIT
start=$SECONDS
retry() { # the network is the only flaky part
    for attempt in 1 2 3; do
        "$@" >>"$log" 2>&1 && return 0
        echo "$suite image: '$*' failed (attempt $attempt); see $log" >&2
        tail -15 "$log" >&2
        sleep $((attempt * 5))
    done
    return 1
}
: >"$log"
# Stage 1: a minimal base system. Stage 2: Slurm and the rest with apt, in the chroot,
# with services kept from starting (policy-rc.d) and /proc mounted for maintainer scripts.
retry debootstrap --variant=minbase "$suite" "$root" "$mirror" || { cp "$root/debootstrap/debootstrap.log" /tmp/ 2>/dev/null; exit 1; }
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
# The mirror served here can be a frozen snapshot whose sid Release file has expired.
echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99fairway"
mount -t proc proc "$root/proc"
retry chroot "$root" apt-get update
retry chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs
umount "$root/proc" 2>/dev/null || umount -l "$root/proc" # a maintainer script may leave a process behind
chroot "$root" apt-get clean
# Smaller image; services are started by the cluster's own entrypoint, never by dpkg.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
chroot "$root" dpkg-query -W -f='${Version}\n' slurmctld >"$root/etc/slurm-version"
tar -C "$root" -c . | docker import -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
echo "$tag: Slurm $(cat "$root/etc/slurm-version") in $((SECONDS - start)) s, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%d MB", $1/1e6}')"
