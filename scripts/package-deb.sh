#!/usr/bin/env bash
# Builds Fairway's Debian packages for the Slurm release installed here, from the staged
# trees `make install DESTDIR=... PREFIX=/usr` writes (one install recipe for both), with
# dpkg-deb (no extra packaging tool to install):
#   fairway-slurmctld  the controller's plugins  Depends: slurmctld of this exact release
#   fairway-slurmd     slurmd's gpu plugin       Depends: slurmd of this exact release
#   fairway            the fairway command, man pages, completions, examples (no Slurm library)
# Slurm loads a plugin only when it was built for the very same release (micro included),
# so each plugin package accepts Debian revisions of that release (22.05.8-4+deb12u3, ...)
# and nothing else: apt will not upgrade Slurm past the plugins without saying so.
# Output: target/debian/*.deb (DEB_OUT to change it). Run by `make deb` after the release
# builds. For another Slurm release's plugins (its headers in SLURM_INCLUDE_DIR, a target
# dir of its own in CARGO_TARGET_DIR, as docker/cluster.sh builds them):
#   DEB_PARTS="slurmctld slurmd" DEB_OUT=target/debian/slurm-24.11.5 SLURM_INCLUDE_DIR=... \
#     CARGO_TARGET_DIR=... SLURM_SRC_DIR=... scripts/package-deb.sh
set -euo pipefail
cd "$(dirname "$0")/.."
make_() { make --no-print-directory "$@"; }
slurm=$(make_ -s -f Makefile print-slurm-version 2>/dev/null || true)
[ -n "$slurm" ] || { echo "package-deb: no installed Slurm headers (scripts/build-deps.sh)" >&2; exit 1; }
IFS=. read -r major minor micro <<<"$slurm"
next="$major.$minor.$((micro + 1))"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
git=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
out=${DEB_OUT:-target/debian}
parts=${DEB_PARTS:-slurmctld slurmd cli}
want() { [[ " $parts " == *" $1 "* ]]; }
stage=$(mktemp -d target/.deb-stage.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"

# Shared-library dependencies as Debian computes them (dpkg-shlibdeps wants a
# debian/control to stand in).
shlibs() {
    local d
    d=$(mktemp -d)
    mkdir "$d/debian"
    printf 'Source: fairway\n\nPackage: fairway\nArchitecture: any\n' >"$d/debian/control"
    (cd "$d" && dpkg-shlibdeps -O --ignore-missing-info "$@" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
    rm -rf "$d"
}

package() { # name target version depends description
    local name=$1 target=$2 ver=$3 depends=$4 desc=$5 root="$stage/$1"
    make_ "$target" DESTDIR="$root" PREFIX=/usr >/dev/null
    install -D -m 0644 LICENSE "$root/usr/share/doc/$name/copyright"
    local bins libdeps
    bins=$(find "$root" -type f \( -name '*.so' -o -path '*/bin/*' \))
    # Debug info stays in the build tree (the release profile keeps it for backtraces);
    # the symbol table stays in the package, so a panic's backtrace still names functions.
    for b in $bins; do strip --strip-debug "$b"; done
    libdeps=$(shlibs $(for b in $bins; do realpath "$b"; done))
    mkdir -p "$root/DEBIAN"
    cat >"$root/DEBIAN/control" <<CONTROL
Package: $name
Version: $ver
Architecture: $arch
Maintainer: Fairway developers <fairway@example.invalid>
Section: admin
Priority: optional
Depends: $(printf '%s\n' "$libdeps" "$depends" | awk 'NF' | paste -sd '|' | sed 's/|/, /g')
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Description: $desc
 Fairway: fair, GPU-aware scheduling for Slurm (git $git).
CONTROL
    sed -i '/^Depends: $/d' "$root/DEBIAN/control"
    dpkg-deb --root-owner-group -Zxz --build "$root" "$out/${name}_${ver}_${arch}.deb" >/dev/null
    echo "package-deb: $out/${name}_${ver}_${arch}.deb"
    dpkg-deb -f "$out/${name}_${ver}_${arch}.deb" Depends | sed 's/^/  Depends: /'
}

rm -f "$out"/fairway*.deb
if want slurmctld; then
    package fairway-slurmctld install-slurmctld "$version+slurm$slurm" \
        "slurmctld (>= $slurm), slurmctld (<< $next~)" \
        "Fairway's slurmctld plugins for Slurm $slurm (priority, site_factor, job_submit, preempt)"
fi
if want slurmd; then
    package fairway-slurmd install-slurmd "$version+slurm$slurm" \
        "slurmd (>= $slurm), slurmd (<< $next~)" \
        "Fairway's gpu/nvml plugin for slurmd of Slurm $slurm (AutoDetect=nvml, NVLink topology)"
fi
if want cli; then
    package fairway install-cli "$version" "" \
        "The fairway command: check-config, ckpt-done, predictor, simulator, topology"
fi
