#!/usr/bin/env bash
# Installs every system package Fairway's build and tests need, idempotently.
# Safe to run repeatedly: apt only acts on what is missing.
set -euo pipefail

PKGS=(
  # Slurm 22.05 (bookworm): daemons, clients, public headers
  slurmctld slurmd slurmdbd slurm-client libslurm-dev slurm-wlm-basic-plugins
  # auth and accounting backends the harness starts itself
  munge libmunge-dev mariadb-server mariadb-client
  # bindgen and the configured Slurm source tree (apt-get source + ./configure)
  libclang-dev clang pkg-config dpkg-dev build-essential
  # topology and docker images (later issues), plus tools the harness uses
  libhwloc-dev hwloc debootstrap iproute2 procps psmisc util-linux curl ca-certificates
)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

retry() { # network-bound steps get three tries
  local n=1
  until "$@"; do
    [ $n -ge 3 ] && return 1
    echo "setup: '$*' failed, retrying ($n/3)" >&2; n=$((n + 1)); sleep $((n * 5))
  done
}

# deb-src entry so scripts/slurm-src.sh can 'apt-get source slurm-wlm'
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  $SUDO tee /etc/apt/sources.list.d/fairway-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  NEED_UPDATE=1
fi

if [ ${#missing[@]} -gt 0 ] || [ -n "${NEED_UPDATE:-}" ]; then
  export DEBIAN_FRONTEND=noninteractive
  retry $SUDO apt-get update -q
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  # policy-rc.d stops Debian's postinst from starting system daemons: the harness runs its own.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  retry $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Unprivileged users the tests submit as (a real site never submits as root).
for u in fw_alice fw_bob fw_carol fw_dave; do
  id "$u" >/dev/null 2>&1 || $SUDO useradd --create-home --shell /bin/bash "$u"
done
echo "setup: system packages and test users present"
