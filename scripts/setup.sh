#!/usr/bin/env bash
# Installs what Fairway's tests need on a test machine, idempotently: the Slurm daemons,
# munge and MariaDB the harness starts itself, tools, and the test users. Not for a
# production host: building alone needs only scripts/build-deps.sh.
# Safe to run repeatedly: apt only acts on what is missing.
set -euo pipefail

PKGS=(
  # Slurm 22.05 (bookworm): daemons and clients the tests start
  slurmctld slurmd slurmdbd slurm-client slurm-wlm-basic-plugins
  # auth and accounting backends the harness starts itself
  munge libmunge-dev mariadb-server mariadb-client
  # topology and docker images, plus tools the harness uses
  libhwloc-dev hwloc debootstrap iproute2 procps psmisc util-linux curl ca-certificates
  # time zones for reading sacct's local times (fairway-trace's tests)
  tzdata
  # slurmctld under memcheck (make memcheck)
  valgrind
  # a real browser for fairway serve's page (tests/tests/dashboard.rs, over CDP)
  chromium
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

if [ ${#missing[@]} -gt 0 ]; then
  retry $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
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
# Build dependencies and the configured Slurm source tree, after the daemons so the tree
# matches the installed slurmctld's Debian source version.
bash "$(dirname "$0")/build-deps.sh"
echo "setup: system packages and test users present"
