#!/usr/bin/env bash
# Installs what building Fairway needs, and nothing else: the Slurm headers
# (libslurm-dev), libclang for bindgen, hwloc's headers, and the tools that fetch and configure Slurm's
# source tree (scripts/slurm-src.sh), then configures that tree. No daemon, no user, no
# database: safe on a build host or a production controller. Idempotent.
#   scripts/build-deps.sh        # the test setup (scripts/setup.sh) runs this first
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  libslurm-dev                       # public headers (slurm.h, slurm_version.h)
  libclang-dev clang                 # bindgen
  pkg-config dpkg-dev build-essential # apt-get source + ./configure of the source tree
  curl ca-certificates               # the upstream tarball where Debian has no source package
  libhwloc-dev libudev-dev           # hwloc 2 for gpu/nvml's CPU locality (its .pc names udev)
)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

retry() { # network-bound steps get three tries
  local n=1
  until "$@"; do
    [ $n -ge 3 ] && return 1
    echo "build-deps: '$*' failed, retrying ($n/3)" >&2; n=$((n + 1)); sleep $((n * 5))
  done
}

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# A deb-src entry so scripts/slurm-src.sh can 'apt-get source slurm-wlm' (Debian's
# patches matter: they rename the private library directory).
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  $SUDO tee /etc/apt/sources.list.d/fairway-src.sources >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  NEED_UPDATE=1
fi

if [ ${#missing[@]} -gt 0 ] || [ -n "${NEED_UPDATE:-}" ]; then
  retry $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-deps: installing ${missing[*]}"
  retry $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
retry bash scripts/slurm-src.sh >/dev/null
echo "build-deps: Slurm headers, libclang and the configured source tree present"
