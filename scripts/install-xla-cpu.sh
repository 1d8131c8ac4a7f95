#!/usr/bin/env bash
# Installs XLA's own CPU PJRT plugin, pinned, where `gotpu devices --device cpu` finds it with no
# environment variable (issue #37). It is gotpu's stand-in for a TPU: the same PJRT C API, XLA
# compiler, SPMD partitioner and collectives, with N host devices (--num_devices N).
#
#   bash scripts/install-xla-cpu.sh          # or: make install-xla-cpu
#
# The wheel: xla-cpu-pjrt 0.0.1 from PyPI (Google's build of XLA's CPU plugin, PJRT C API 0.81, no
# dependencies), chosen over lammps-jax-pjrt-cpu 0.11.2 (API 0.115) because go-xla v0.1.4 speaks
# PJRT C API 0.83 and the nearer version is the smaller risk; both load with go-xla v0.1.4 here.
# It is fetched by exact version and SHA-256 (pip --require-hashes), the shared library inside is
# checked against its own SHA-256 too, and nothing else from the wheel is installed.
#
# Idempotent: a library already installed with the pinned hash is left alone (exit 0 at once);
# the wheel is kept in a cache directory so that a reinstall needs no network.
#
# Environment:
#   GOTPU_XLA_CPU_DIR  install directory (default ~/.local/lib/go-xla, searched by gotpu)
#   GOTPU_WHEEL_CACHE  wheel cache (default ${XDG_CACHE_HOME:-~/.cache}/gotpu/wheels)
#   PYTHON             the Python whose pip downloads the wheel (default python3)
#
# Exit status: 0 once the plugin is installed and verified.
set -euo pipefail

readonly WHEEL_PROJECT=xla-cpu-pjrt
readonly WHEEL_VERSION=0.0.1
readonly WHEEL_FILE=xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl
readonly WHEEL_SHA256=55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc
readonly MEMBER=xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so
readonly MEMBER_SHA256=88c3f28c5900f48ad4a82cab9e79bba9537809743395e341485f8794268820dc

dest_dir=${GOTPU_XLA_CPU_DIR:-$HOME/.local/lib/go-xla}
dest=$dest_dir/pjrt_c_api_cpu_plugin.so
cache=${GOTPU_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gotpu/wheels}
python=${PYTHON:-python3}

die() { echo "install-xla-cpu: $*" >&2; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$dest" ] && [ "$(sha "$dest")" = "$MEMBER_SHA256" ]; then
  echo "install-xla-cpu: $WHEEL_PROJECT $WHEEL_VERSION already installed: $dest"
  exit 0
fi

[ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ] ||
  die "the pinned wheel ($WHEEL_FILE) is for x86-64 Linux; this machine is $(uname -s) $(uname -m)"
command -v sha256sum >/dev/null || die "sha256sum is needed (coreutils)"
command -v "$python" >/dev/null || die "$python is needed (to run pip and read the wheel); set PYTHON"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

wheel=$cache/$WHEEL_FILE
if [ -f "$wheel" ] && [ "$(sha "$wheel")" = "$WHEEL_SHA256" ]; then
  echo "install-xla-cpu: using the cached wheel $wheel"
else
  echo "install-xla-cpu: downloading $WHEEL_PROJECT==$WHEEL_VERSION (63 MB) with pip"
  printf '%s==%s --hash=sha256:%s\n' "$WHEEL_PROJECT" "$WHEEL_VERSION" "$WHEEL_SHA256" >"$tmp/requirements.txt"
  "$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_27_x86_64 --require-hashes -r "$tmp/requirements.txt" -d "$tmp/dl" ||
    die "pip could not download $WHEEL_PROJECT==$WHEEL_VERSION with SHA-256 $WHEEL_SHA256 (see pip's message above)"
  [ -f "$tmp/dl/$WHEEL_FILE" ] || die "pip saved $(ls "$tmp/dl"), not $WHEEL_FILE"
  got=$(sha "$tmp/dl/$WHEEL_FILE")
  [ "$got" = "$WHEEL_SHA256" ] || die "$WHEEL_FILE has SHA-256 $got, want $WHEEL_SHA256"
  mkdir -p "$cache"
  mv "$tmp/dl/$WHEEL_FILE" "$wheel.tmp.$$" && mv "$wheel.tmp.$$" "$wheel"
fi

# The library goes next to its destination under a temporary name, is checked, then renamed: a
# reader never sees half a file, and an interrupted install leaves the old one in place.
mkdir -p "$dest_dir"
part=$dest_dir/.pjrt_c_api_cpu_plugin.so.part.$$
trap 'rm -rf "$tmp" "$part"' EXIT
"$python" - "$wheel" "$MEMBER" "$part" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
got=$(sha "$part")
[ "$got" = "$MEMBER_SHA256" ] || die "$MEMBER in $WHEEL_FILE has SHA-256 $got, want $MEMBER_SHA256"
chmod 0755 "$part"
mv -f "$part" "$dest"
echo "install-xla-cpu: installed $WHEEL_PROJECT $WHEEL_VERSION: $dest"
echo "install-xla-cpu: check it with: gotpu devices --device cpu --num_devices 8"
