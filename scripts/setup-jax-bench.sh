#!/usr/bin/env bash
# Creates the Python virtualenv that `make bench`'s JAX comparison (issue #37, BenchmarkXLACPUVsJAX
# in trainer/step/xlacpu_bench_test.go) runs trainer/step/testdata/jax/bench_jax_gpt2.py in: JAX's
# own CPU backend, pinned, so that "gotpu on XLA CPU vs JAX on XLA CPU" compares the same compiler.
#
#   bash scripts/setup-jax-bench.sh
#
# The pin: jax 0.8.1 / jaxlib 0.8.1 (PyPI, 2025-11-18), the jaxlib nearest in time to the XLA
# build of the CPU PJRT plugin gotpu runs on (xla-cpu-pjrt 0.0.1, 2025-11-21, installed by
# scripts/install-xla-cpu.sh), so both sides compile with (nearly) the same XLA. numpy etc. are
# pinned too, so a later run installs the same thing.
#
# Idempotent: an existing venv that already imports the pinned jax is left alone. The benchmark
# itself never downloads: without this venv it skips and says to run this script.
#
# Environment:
#   GOTPU_JAX_VENV  the venv (default ${XDG_CACHE_HOME:-~/.cache}/gotpu/jax-venv; the benchmark
#                   reads the same variable)
#   PYTHON          the interpreter the venv is made from (default python3; JAX 0.8 needs >= 3.11)
set -euo pipefail

readonly JAX_VERSION=0.8.1
venv=${GOTPU_JAX_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gotpu/jax-venv}
python=${PYTHON:-python3}

die() { echo "setup-jax-bench: $*" >&2; exit 1; }

if [ -x "$venv/bin/python" ] &&
  [ "$("$venv/bin/python" -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__)' 2>/dev/null)" = "$JAX_VERSION $JAX_VERSION" ]; then
  echo "setup-jax-bench: jax $JAX_VERSION already installed in $venv"
  exit 0
fi

command -v "$python" >/dev/null || die "$python is needed; set PYTHON"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  die "$python is $("$python" -V 2>&1); jax $JAX_VERSION needs Python >= 3.11 (set PYTHON)"
if ! "$python" -m venv --help >/dev/null 2>&1; then
  die "$python has no venv module (Debian: apt-get install -y python3-venv)"
fi

echo "setup-jax-bench: creating $venv with $("$python" -V 2>&1)"
rm -rf "$venv"
"$python" -m venv "$venv" || die "python -m venv $venv failed (Debian: apt-get install -y python3-venv)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
  "jax==$JAX_VERSION" "jaxlib==$JAX_VERSION" "numpy==2.3.5" "ml_dtypes==0.5.4" "opt_einsum==3.4.0" "scipy==1.16.3" ||
  die "pip could not install jax==$JAX_VERSION (see pip's message above)"
got=$("$venv/bin/python" -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.default_backend())')
[ "$got" = "$JAX_VERSION $JAX_VERSION cpu" ] || die "the venv's jax reports '$got', want '$JAX_VERSION $JAX_VERSION cpu'"
echo "setup-jax-bench: jax $JAX_VERSION (CPU) installed in $venv"
