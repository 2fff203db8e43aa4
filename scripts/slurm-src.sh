#!/usr/bin/env bash
# Obtains and configures the Slurm source tree matching the installed Slurm, for
# slurm-sys's bindgen over internal headers (job_record_t, locks, assoc_mgr...).
# Prints the tree's path on stdout. Cached: a tree that is already configured is reused.
#
#   scripts/slurm-src.sh            # tree for the installed Slurm (from slurm_version.h)
#   FAIRWAY_CACHE=/path scripts/slurm-src.sh
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
inc=${SLURM_INCLUDE_DIR:-/usr/include}
vh="$inc/slurm/slurm_version.h"
[ -r "$vh" ] || { echo "slurm-src: $vh not found: install libslurm-dev (scripts/build-deps.sh)" >&2; exit 1; }
# Debian's public header carries only SLURM_VERSION_NUMBER (0xMMmmuu).
vernum() { sed -n 's/^#define SLURM_VERSION_NUMBER[[:space:]]*\(0x[0-9a-fA-F]*\).*/\1/p' "$1"; }
dotted() { local n=$(($1)); printf '%d.%02d.%d' $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)); }
num=$(vernum "$vh")
[ -n "$num" ] || { echo "slurm-src: no SLURM_VERSION_NUMBER in $vh" >&2; exit 1; }
ver=$(dotted "$num")

cache=${FAIRWAY_CACHE:-$top/.cache}
dest="$cache/slurm-src/$ver"
stamp="$dest/.fairway-configured"
if [ -f "$stamp" ]; then echo "$dest/tree"; exit 0; fi

log() { echo "slurm-src: $*" >&2; }
mkdir -p "$dest"
work=$(mktemp -d "$dest/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

retry() { local n=1; until "$@"; do [ $n -ge 3 ] && return 1; n=$((n + 1)); sleep $((n * 5)); done; }

# Debian's source package for exactly the installed version (its patches matter: Debian
# renames the private library dir and forces the NVML gpu plugin on). For another
# version's headers (SLURM_INCLUDE_DIR from a docker image) only Debian's upstream
# tarball is served here: use it, and let the e2e tests catch any drift.
pkgver=$(dpkg-query -W -f='${source:Version}' libslurm-dev 2>/dev/null || true)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
(
  cd "$work"
  if [ -n "$pkgver" ] && [ "${pkgver%%-*}" = "$ver" ]; then
    log "fetching slurm-wlm source $pkgver for Slurm $ver"
    retry apt-get source -q "slurm-wlm=$pkgver" >&2
  else
    url="$mirror/pool/main/s/slurm-wlm/slurm-wlm_$ver.orig.tar.gz"
    log "fetching $url (the installed Slurm is ${pkgver:-none}, the headers are $ver)"
    retry curl -fsSL -o orig.tar.gz "$url" >&2
    tar -xzf orig.tar.gz
  fi
)
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'slurm-*' | head -n 1)
[ -n "$src" ] || { log "no slurm-* source directory was unpacked"; exit 1; }

log "configuring $src (no build needed: only config.h and generated headers)"
(
  cd "$src"
  # Debian's options (debian/rules) so config.h matches the installed daemons.
  ./configure -q --prefix=/usr --sysconfdir=/etc/slurm --with-munge --without-rpath \
    --disable-debug --enable-multiple-slurmd >"$work/configure.log" 2>&1 \
    || { tail -n 40 "$work/configure.log" >&2; exit 1; }
)

# The configured tree's version must equal the installed headers' version.
srcver=$(dotted "$(vernum "$src/slurm/slurm_version.h")")
if [ "$srcver" != "$ver" ]; then
  log "configured tree is Slurm $srcver but installed headers are $ver: refusing"; exit 1
fi
rm -rf "$dest/tree"
mv "$src" "$dest/tree"
touch "$stamp"
echo "$dest/tree"
