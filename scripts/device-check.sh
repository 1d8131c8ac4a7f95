#!/usr/bin/env bash
# gotpu's XLA path on a real accelerator, in one prepared run (issue #14).
#
# Built here, run there: the device machine (x86-64 Linux, an NVIDIA GPU, JAX's CUDA PJRT plugin,
# torch, JAX, transformers, tokenizers) has Python but no Go toolchain and no network.
#
#   scripts/device-check.sh --build     # here: builds .device-bin/gotpu (cgo, XLA compiled in) and
#                                       # .device-bin/devprep (pure Go), and records their ldd
#   OUT=DIR scripts/device-check.sh     # there: every check; DIR/summary.md plus the raw outputs
#   scripts/device-check.sh --dry-run   # anywhere: builds when Go is present, then every step that
#                                       # needs no plugin, on the pure-Go backend (--device go),
#                                       # through the same commands and comparisons
#   scripts/device-check.sh --xla-cpu   # a rehearsal of the device run with XLA's CPU PJRT plugin
#                                       # (scripts/install-xla-cpu.sh) as the device (issue #37):
#                                       # builds when Go is present, then every step that needs no
#                                       # GPU through PJRT; PLUGIN_KIND=cpu does the same
#
# Steps (summary.md lists each with PASS, FAIL or SKIP and why, and where it ran: the plugin and
# how many of its devices, gotpu's pure-Go CPU backend, the host alone, or not run; one failing does
# not stop the rest):
#   0 the binaries run here (dynamic libraries, glibc)
#   1 locate the CUDA plugin; `gotpu devices` on it (with nvidia-smi's name, memory, compute capability)
#   2 the model fixtures (testdata/models) through `gotpu score` and a 3-step `gotpu train`, against
#     their reference.json at the Go tests' tolerances, with TF32 off
#   3 GPT-2 124M from testdata/hf-configs/gpt2_lmhead_config.json, random init, seq 1024, bf16,
#     AdamW: the largest batch of $BATCHES that fits; tokens/s, MFU against 989 TFLOP/s, compile
#     time, peak memory; the same model in PyTorch (eager, torch.compile) and JAX; ratios
#   4 the async pipeline's figures (host_syncs, device_idle_fraction), if the trainer logs them
#   5 interop: gotpu-saved gpt2/llama/mistral/qwen2/bert directories in transformers'
#     AutoModelFor*.from_pretrained (logits within 1e-4 of `gotpu score --logits`), `gotpu tokenize`
#     against the stored tokenizers@0.23.2 outputs and the Python tokenizers package; a LoRA
#     adapter (gotpu train --use_peft) on the device against gotpu's CPU backend
#   6 probe the site-packages' shared objects for GetPjrtApi (an XLA CPU plugin); if one loads, the
#     8-replica train step on it against gotpu's CPU backend, and fsdp full_shard on the same 8
#     devices (the AutoSharding program) against that data-parallel run
#
# With --xla-cpu, XLA's CPU plugin stands in for the GPU: step 1 finds it as gotpu does (or at
# PLUGIN_PATH) and lists 8 of its devices with the PJRT C API version; step 2 runs on 1 of its
# devices (as on one GPU; no TF32 to turn off); step 3 trains a reduced GPT-2 on it and on gotpu's
# CPU backend (124M is a GPU's work), with PyTorch and JAX on the CPU only where importable; step 5
# trains its LoRA adapter on 1 of its devices (the rest as on the device); step 6 trains the
# 8-replica and fsdp steps on 8 of its devices against gotpu's CPU backend.
#
# Options: --steps 1,2,3,4,5,6 (default all; steps 0 and 1 always run).
# Environment: OUT (default out/device-check), DEVICE_BIN (default .device-bin), PYTHON (python3),
# PLUGIN_PATH (skip the search), PLUGIN_KIND (cpu: as --xla-cpu), DEADLINE_S (whole run; 450 on
# the device, 110 dry, 200 with --xla-cpu), CPU_BENCH_SETS (--xla-cpu's reduced GPT-2), BATCHES
# (gotpu's batch sizes to try, largest first; default "32 16 8": each try costs a compile, so the
# list is short), BENCH_STEPS (12), FIXTURE_VARIANTS=all (every reference variant instead of one
# per fixture), WORK (scratch for the 500 MB GPT-2 files; default a temporary directory), and the
# per-command caps BENCH_TRY_S (200), PY_RESERVE_S (170, kept back for PyTorch and JAX), TORCH_S
# (150), JAX_S (120).
#
# Exit status: 0 when no step failed.

set -uo pipefail

MODE=device
[ "${PLUGIN_KIND:-}" = cpu ] && MODE=xlacpu
STEPS=1,2,3,4,5,6
while [ $# -gt 0 ]; do
  case "$1" in
    --build) MODE=build ;;
    --dry-run) MODE=dry ;;
    --xla-cpu) MODE=xlacpu ;;
    --steps) STEPS="${2:?--steps needs a list such as 1,2}"; shift ;;
    --steps=*) STEPS="${1#--steps=}" ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-check.sh: unknown argument $1 (want --build, --dry-run, --xla-cpu, --steps LIST)" >&2; exit 2 ;;
  esac
  shift
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO" || exit 2
BIN=${DEVICE_BIN:-$REPO/.device-bin}
GOTPU=$BIN/gotpu
DEVPREP=$BIN/devprep
HELPERS=$REPO/scripts/device

# build compiles the binaries the device machine runs. gotpu is the default build (cgo, the XLA
# backend compiled in: go-xla dlopens the plugin, so only libc is linked); devprep only uses the
# pure-Go backend, so it is built with -tags noxla. -s -w keeps both small enough to carry.
build() {
  command -v go >/dev/null || { echo "go is not on PATH" >&2; return 1; }
  mkdir -p "$BIN" || return 1
  if [ "$(go env CGO_ENABLED)" != 1 ]; then
    echo "CGO_ENABLED is not 1: gotpu's XLA backend needs cgo (install a C compiler)" >&2
    return 1
  fi
  go build -ldflags='-s -w' -o "$GOTPU" ./cmd/gotpu || return 1
  go build -tags noxla -ldflags='-s -w' -o "$DEVPREP" ./scripts/device/devprep || return 1
  {
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
    echo "commit $(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$REPO" status --porcelain 2>/dev/null | grep . >/dev/null && echo ' (with uncommitted changes)')"
    go version
    echo "build glibc: $(ldd --version 2>&1 | head -1)"
    for b in "$GOTPU" "$DEVPREP"; do
      echo "== $(basename "$b"): $(du -h "$b" | cut -f1)"
      ldd "$b" 2>&1 | sed 's/ (0x[0-9a-f]*)//'
      if command -v objdump >/dev/null; then
        echo "needs glibc >= $(objdump -T "$b" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | sed 's/GLIBC_//')"
      fi
    done
  } > "$BIN/BUILD.txt"
  cat "$BIN/BUILD.txt"
}

if [ "$MODE" = build ]; then
  build || exit 1
  echo
  echo "Carry $(realpath --relative-to="$REPO" "$BIN" 2>/dev/null || echo "$BIN") to the device machine and run there: OUT=... scripts/device-check.sh"
  exit 0
fi

OUT=${OUT:-$REPO/out/device-check}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw
STEPS_TSV=$OUT/steps.tsv
rm -rf "$RAW" "$STEPS_TSV" "$OUT/summary.md" "$OUT/commands.log"
mkdir -p "$RAW"
: > "$STEPS_TSV"
: > "$OUT/commands.log"
if [ -z "${WORK:-}" ]; then
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/gotpu-device-check.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
# The check measures compiles (compile time, one compile per batch size tried): gotpu's
# persistent compilation cache, on by default for PJRT devices, would answer them from an
# earlier run. Off unless the caller sets it.
export GOTPU_COMPILATION_CACHE_DIR=${GOTPU_COMPILATION_CACHE_DIR:-off}

if [ "$MODE" = dry ]; then
  DEADLINE_S=${DEADLINE_S:-110}
elif [ "$MODE" = xlacpu ]; then
  DEADLINE_S=${DEADLINE_S:-200}
else
  DEADLINE_S=${DEADLINE_S:-450}
fi
BATCHES=${BATCHES:-32 16 8}
BENCH_STEPS=${BENCH_STEPS:-12}
FIXTURES=(gpt2-tiny gpt2-tiny-affine llama-tiny bert-tiny)
SECONDS=0

PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
  PY=
fi

# ---- bookkeeping -------------------------------------------------------------------------------

# BUDGET is what run leaves in a command's stderr when the deadline left no time for it.
BUDGET="not run: the run's time budget (DEADLINE_S) is spent"

# Where a step ran, for summary.md's "where" column: WHERE is the current step's (set by each step
# before it records), record's fourth argument overrides it, and a SKIP without one ran nowhere.
HOST="host only (no device)"
GO_BACKEND="gotpu CPU backend (--device go)"
NEEDS_GPU="not run: needs a GPU"
WHERE=$HOST

# record ID STATUS DETAIL [WHERE]: one line of steps.tsv (id, status, where, detail), and progress
# on stderr. A check that failed only because the time budget ran out is a SKIP: the budget is this
# script's, not gotpu's.
record() {
  local d=${3-} status=$2 where=${4-}
  d=${d//$'\t'/ }
  d=${d//$'\n'/ }
  if [ "$status" = FAIL ] && [[ "$d" == *"$BUDGET"* ]]; then status=SKIP where="not run: time budget"; fi
  if [ -z "$where" ]; then
    if [ "$status" = SKIP ]; then where="not run"; else where=$WHERE; fi
  fi
  set -- "$1" "$status"
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$where" "$d" >> "$STEPS_TSV"
  printf '[%3ds] %-34s %s [%s] %s\n' "$SECONDS" "$1" "$2" "$where" "${d:0:150}" >&2
}

remaining() { echo $((DEADLINE_S - SECONDS)); }

selected() { [[ ",$STEPS," == *",$1,"* ]]; }

# run NAME TIMEOUT CMD...: runs CMD with stdout and stderr in raw/NAME.out and raw/NAME.err, its
# status in raw/NAME.rc, the command line in commands.log, and a timeout that never passes the
# run's deadline. Returns CMD's status (124 on timeout).
run() {
  local name=$1 t=$2
  shift 2
  local rem
  rem=$(remaining)
  if [ "$t" -gt $((rem - 5)) ]; then t=$((rem - 5)); fi
  mkdir -p "$(dirname "$RAW/$name")"
  if [ "$t" -lt 5 ]; then
    echo "$BUDGET" > "$RAW/$name.err"
    : > "$RAW/$name.out"
    echo 124 > "$RAW/$name.rc"
    return 124
  fi
  printf '[%s] (timeout %ss) %s\n' "$name" "$t" "$(printf '%q ' "$@")" >> "$OUT/commands.log"
  timeout -k 10 "$t" "$@" > "$RAW/$name.out" 2> "$RAW/$name.err"
  local rc=$?
  echo "$rc" > "$RAW/$name.rc"
  return "$rc"
}

# why NAME [STATUS]: a short reason for a failed command, from its stderr and the status run
# recorded (STATUS is for commands run does not run).
why() {
  local name=$1 rc=${2-1} last
  [ -f "$RAW/$name.rc" ] && rc=$(cat "$RAW/$name.rc")
  last=$(grep -v '^[[:space:]]*$' "$RAW/$name.err" 2>/dev/null | grep -iE 'error|fail|panic|exhausted|memory|not found|unable' | tail -1)
  [ -n "$last" ] || last=$(grep -v '^[[:space:]]*$' "$RAW/$name.err" 2>/dev/null | tail -1)
  case "$rc" in
    124|137) echo "timed out; ${last:0:300}" ;;
    *) echo "exit $rc: ${last:0:300}" ;;
  esac
}

# verdict ID NAME RC [PREFIX [WHERE]]: records the PASS/FAIL/SKIP line a helper printed into
# raw/NAME.out.
verdict() {
  local id=$1 name=$2 rc=$3 line
  line=$(grep -E '^(PASS|FAIL|SKIP) ' "$RAW/$name.out" 2>/dev/null | tail -1)
  if [ -n "$line" ]; then
    record "$id" "${line%% *}" "${4:+$4; }${line#* }" ${5:+"$5"}
  else
    record "$id" FAIL "${4:+$4; }comparison did not run ($(why "$name" "$rc"))" ${5:+"$5"}
  fi
}

# results NAME: records every RESULT line a helper printed (interop.py, bench_*.py).
results() {
  local name=$1 _ id status detail n=0
  while IFS=$'\t' read -r _ id status detail; do
    record "$id" "$status" "$detail"
    n=$((n + 1))
  done < <(grep -E $'^RESULT\t' "$RAW/$name.out" 2>/dev/null)
  [ "$n" -gt 0 ]
}

NOPY="no python3 on PATH (or \$PYTHON), which this check needs"

# ---- step 0: the binaries ----------------------------------------------------------------------

step0() {
  WHERE=$HOST
  if [ "$MODE" != device ] && command -v go >/dev/null; then
    printf '[build] scripts/device-check.sh --build (go build ./cmd/gotpu ./scripts/device/devprep into %s)\n' "$BIN" >> "$OUT/commands.log"
    if build > "$RAW/build.out" 2> "$RAW/build.err"; then
      record 0-build PASS "go build of ./cmd/gotpu (cgo, XLA compiled in) and ./scripts/device/devprep (noxla) into $BIN"
    else
      record 0-build FAIL "$(why build $?)"
    fi
  elif [ "$MODE" != device ]; then
    record 0-build SKIP "go is not on PATH: using the binaries already in $BIN"
  fi
  local missing=()
  for b in "$GOTPU" "$DEVPREP"; do
    [ -x "$b" ] || missing+=("$b")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    record 0-binaries FAIL "missing ${missing[*]}: run scripts/device-check.sh --build where Go is installed, and carry $BIN"
    return 1
  fi
  [ -f "$BIN/BUILD.txt" ] && cp "$BIN/BUILD.txt" "$RAW/BUILD.txt"
  ldd "$GOTPU" > "$RAW/ldd-gotpu.txt" 2>&1
  local glibc need notfound
  glibc=$(ldd --version 2>&1 | head -1 | grep -oE '[0-9]+\.[0-9]+$')
  need=$(grep -o 'needs glibc >= [0-9.]*' "$BIN/BUILD.txt" 2>/dev/null | head -1 | grep -oE '[0-9.]+$')
  notfound=$(grep -c 'not found' "$RAW/ldd-gotpu.txt")
  if ! run gotpu-help 30 "$GOTPU" --help; then
    record 0-binaries FAIL "gotpu --help: $(why gotpu-help $?) (glibc here ${glibc:-?}, the build needs ${need:-?}; see raw/ldd-gotpu.txt)"
    return 1
  fi
  if [ "$notfound" -gt 0 ]; then
    record 0-binaries FAIL "ldd: $notfound libraries not found (raw/ldd-gotpu.txt)"
    return 1
  fi
  record 0-binaries PASS "gotpu and devprep run; libraries: $(grep -oE '^\s*[^ ]+\.so[^ ]*' "$RAW/ldd-gotpu.txt" | tr -d ' \t' | paste -sd' '); glibc here ${glibc:-?}, build needs ${need:-?}"
}

# ---- step 1: plugin and devices ----------------------------------------------------------------

PLUGIN=
DEV_ARGS=(--device go)
BASE_ENV=()  # env for every gotpu run on the plugin
FIX_ENV=()   # added for the fixtures: TF32 off
ENV_NOTES=()

site_dirs() {
  [ -n "$PY" ] || return 0
  "$PY" -c 'import sys, os
for p in sys.path:
    if os.path.isdir(p) and (p.endswith("site-packages") or p.endswith("dist-packages")):
        print(p)' 2>/dev/null
}

# locate_plugin sets PLUGIN and LOCATED_BY, or fails.
locate_plugin() {
  if [ -n "${PLUGIN_PATH:-}" ]; then
    PLUGIN=$PLUGIN_PATH
    LOCATED_BY=PLUGIN_PATH
    return 0
  fi
  local mod d
  if [ -n "$PY" ]; then
    for mod in jax_plugins.xla_cuda13 jax_plugins.xla_cuda12; do
      # find_spec does not run the plugin package's __init__ (which imports all of jax); the
      # import is the fallback.
      d=$("$PY" -c "import importlib.util as u; s = u.find_spec('$mod'); print(list(s.submodule_search_locations)[0])" 2>/dev/null) ||
        d=$("$PY" -c "import $mod as m; print(m.__path__[0])" 2>/dev/null) || d=
      if [ -n "$d" ] && [ -f "$d/xla_cuda_plugin.so" ]; then
        PLUGIN=$d/xla_cuda_plugin.so
        LOCATED_BY=$mod
        return 0
      fi
    done
  fi
  local root
  for root in $(site_dirs) /usr/local/lib /usr/lib /opt; do
    d=$(find "$root" -maxdepth 6 -name xla_cuda_plugin.so -print -quit 2>/dev/null)
    if [ -n "$d" ]; then
      PLUGIN=$d
      LOCATED_BY="find under $root"
      return 0
    fi
  done
  return 1
}

# plugin_knows FLAG: whether the plugin's XLA has the flag. XLA aborts the process on an unknown
# flag in XLA_FLAGS, so none is set without this.
plugin_knows() { grep -aq -- "$1" "$PLUGIN" 2>/dev/null; }

setup_plugin_env() {
  local site libdirs=() d xla_flags=
  site=$(dirname "$(dirname "$(dirname "$PLUGIN")")")
  # JAX preloads NVIDIA's pip-installed libraries (cudart, cublas, cudnn, nccl, ... under
  # site-packages/nvidia/*/lib) before it loads the plugin; gotpu dlopens the plugin directly, so
  # the same directories go on the library path.
  for d in "$site"/nvidia/*/lib; do
    [ -d "$d" ] && libdirs+=("$d")
  done
  if [ ${#libdirs[@]} -gt 0 ]; then
    local joined
    joined=$(IFS=:; echo "${libdirs[*]}")
    BASE_ENV+=("LD_LIBRARY_PATH=$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    ENV_NOTES+=("LD_LIBRARY_PATH: ${#libdirs[@]} directories of $site/nvidia/*/lib (what JAX preloads)")
  fi
  # go-xla v0.1.4 (cudaPluginCheckDrivers) appends --xla_gpu_cuda_data_dir with a path from its
  # author's machine to XLA_FLAGS whenever site-packages/nvidia exists; GOPJRT_CUDA_CHECKS=0 turns
  # that off, and the right directory (the one holding nvvm/libdevice) is set here instead.
  BASE_ENV+=(GOPJRT_CUDA_CHECKS=0)
  ENV_NOTES+=("GOPJRT_CUDA_CHECKS=0: go-xla v0.1.4 otherwise adds --xla_gpu_cuda_data_dir=/home/janpf/.local/lib/go-xla/nvidia (hard-coded) to XLA_FLAGS")
  local libdevice
  libdevice=$(find "$site/nvidia" -name 'libdevice.10.bc' -print -quit 2>/dev/null)
  if [ -n "$libdevice" ] && plugin_knows xla_gpu_cuda_data_dir; then
    xla_flags="--xla_gpu_cuda_data_dir=$(dirname "$(dirname "$(dirname "$libdevice")")")"
  fi
  BASE_XLA_FLAGS=${XLA_FLAGS:-}${xla_flags:+ $xla_flags}
  BASE_XLA_FLAGS=${BASE_XLA_FLAGS# }
  [ -n "$BASE_XLA_FLAGS" ] && BASE_ENV+=("XLA_FLAGS=$BASE_XLA_FLAGS")
  ENV_NOTES+=("XLA_FLAGS for every gotpu run: '${BASE_XLA_FLAGS}'")
  # TF32 off for the fixtures: NVIDIA_TF32_OVERRIDE=0 makes cuBLAS and cuDNN compute float32
  # products in full float32, and --xla_gpu_enable_triton_gemm=false sends XLA's dots to cuBLAS
  # (XLA's own Triton GEMMs would use TF32 for float32 dots at default precision, and the override
  # does not reach them). XLA has no --xla_gpu_enable_tf32 flag.
  local fix_flags=$BASE_XLA_FLAGS
  if plugin_knows xla_gpu_enable_triton_gemm; then
    fix_flags="${fix_flags:+$fix_flags }--xla_gpu_enable_triton_gemm=false"
  else
    ENV_NOTES+=("the plugin has no --xla_gpu_enable_triton_gemm flag: float32 dots in Triton GEMMs may use TF32")
  fi
  FIX_ENV=(NVIDIA_TF32_OVERRIDE=0 "XLA_FLAGS=$fix_flags")
  ENV_NOTES+=("fixtures (step 2) add NVIDIA_TF32_OVERRIDE=0 and XLA_FLAGS='$fix_flags'; gotpu's runs in step 3 take only the XLA_FLAGS above, so that it is measured as shipped")
  ldd "$PLUGIN" > "$RAW/ldd-plugin.txt" 2>&1
  env "${BASE_ENV[@]}" ldd "$PLUGIN" > "$RAW/ldd-plugin-with-env.txt" 2>&1
  ENV_NOTES+=("plugin ldd: $(grep -c 'not found' "$RAW/ldd-plugin.txt") libraries not found bare, $(grep -c 'not found' "$RAW/ldd-plugin-with-env.txt") with LD_LIBRARY_PATH (raw/ldd-plugin*.txt)")
}

# DEV_WHERE is where the runs with DEV_ARGS go, for the "where" column.
DEV_WHERE=$GO_BACKEND
CPU_NDEV=8

# args_check: the device's flags must parse, so a missing plugin is a plugin error (exit 1), not a
# usage error (exit 2).
args_check() {
  WHERE=$HOST
  run args-cuda 30 "$GOTPU" devices --device cuda --plugin_path "$WORK/no-such-plugin.so" --json
  local rc=$?
  if [ "$rc" != 1 ] || ! grep -qi 'plugin' "$RAW/args-cuda.err"; then
    record 1-args FAIL "gotpu devices --device cuda --plugin_path MISSING: want exit 1 naming the plugin, got $(why args-cuda $rc)"
  else
    record 1-args PASS "gotpu devices --device cuda --plugin_path MISSING exits 1: $(head -c 200 "$RAW/args-cuda.err")"
  fi
}

# json_field NAME FILE: the first "NAME":value of gotpu's one-line JSON (a string's quotes removed).
json_field() {
  grep -oE "\"$1\":(\"[^\"]*\"|[^,}]*)" "$2" 2>/dev/null | head -1 | sed -E "s/^\"$1\"://; s/^\"(.*)\"\$/\\1/"
}

# step1_cpu: --xla-cpu's step 1. The plugin is found as gotpu finds it (--device cpu searches
# ~/.local/lib/go-xla, /usr/local/lib/go-xla, PJRT_PLUGIN_LIBRARY_PATH and the Python
# site-packages), or taken from PLUGIN_PATH; `gotpu devices --json` names it and its PJRT C API.
step1_cpu() {
  local pin=() f=$RAW/devices-json.out rc
  if [ -n "${PLUGIN_PATH:-}" ]; then
    pin=(--plugin_path "$PLUGIN_PATH")
    LOCATED_BY=PLUGIN_PATH
  else
    LOCATED_BY="gotpu's own search for --device cpu"
  fi
  WHERE="XLA CPU plugin, $CPU_NDEV devices"
  run devices-json 60 "$GOTPU" devices --device cpu ${pin[@]+"${pin[@]}"} --num_devices "$CPU_NDEV" --json
  rc=$?
  if [ "$rc" != 0 ]; then
    record 1-plugin FAIL "no XLA CPU plugin via $LOCATED_BY: $(why devices-json $rc) (install it with scripts/install-xla-cpu.sh, or set PLUGIN_PATH)" "$HOST"
    record 1-devices SKIP "needs the plugin (see 1-plugin)"
    return
  fi
  PLUGIN=$(json_field path "$f")
  local kind api n xv shlo pinned sum
  kind=$(json_field kind "$f")
  api=$(json_field pjrt_api_version "$f")
  n=$(json_field num_devices "$f")
  xv=$(json_field xla_version "$f")
  shlo=$(json_field stablehlo_current_version "$f")
  # The build scripts/install-xla-cpu.sh pins, by the SHA-256 it checks.
  pinned=$(grep -oE 'MEMBER_SHA256=[0-9a-f]{64}' "$REPO/scripts/install-xla-cpu.sh" 2>/dev/null | cut -d= -f2)
  sum=$(sha256sum "$PLUGIN" 2>/dev/null | cut -d' ' -f1)
  if [ -n "$pinned" ] && [ "$sum" = "$pinned" ]; then
    pinned="the build scripts/install-xla-cpu.sh pins"
  else
    pinned="sha256 ${sum:0:16}…, not the build scripts/install-xla-cpu.sh pins"
  fi
  if [ -z "$PLUGIN" ] || [ ! -f "$PLUGIN" ] || [ "$kind" != cpu ]; then
    record 1-plugin FAIL "gotpu devices --device cpu named no CPU plugin file (plugin.kind '$kind', path '$PLUGIN'; raw/devices-json.out)" "$HOST"
    record 1-devices SKIP "needs the plugin (see 1-plugin)"
    PLUGIN=
    return
  fi
  record 1-plugin PASS "$PLUGIN (via $LOCATED_BY; $(du -h "$PLUGIN" 2>/dev/null | cut -f1); $pinned)" "$HOST"
  ENV_NOTES+=("the device is XLA's CPU PJRT plugin (PJRT C API ${api:-?}): steps 2 and 3 on 1 of its devices (as on one GPU; a CPU computes float32 products in float32, so there is no TF32 to turn off and no CUDA environment), step 6 on $CPU_NDEV")
  if ! run devices-text 60 "$GOTPU" devices --device cpu --plugin_path "$PLUGIN" --num_devices "$CPU_NDEV"; then
    record 1-devices FAIL "gotpu devices (text): $(why devices-text $?)"
  elif [ -z "$api" ]; then
    record 1-devices FAIL "gotpu devices --json has no plugin.pjrt_api_version (raw/devices-json.out)"
  elif [ "$n" != "$CPU_NDEV" ] || [ "$(grep -c -E '^  [0-9]+  cpu  ' "$RAW/devices-text.out")" != "$CPU_NDEV" ]; then
    record 1-devices FAIL "asked for $CPU_NDEV devices (--num_devices, the plugin's cpu_device_count), got num_devices $n (raw/devices-*.out)"
  else
    record 1-devices PASS "PJRT C API $api (plugin.pjrt_api_version), xla_version ${xv:-?}, StableHLO ${shlo:-?}; num_devices $n: $(grep -E '^  [0-9]+  ' "$RAW/devices-text.out" | sed -E 's/^ *[0-9]+ +cpu +//; s/ \[processId=0\]//' | paste -sd' ')"
  fi
  DEV_ARGS=(--device cpu --plugin_path "$PLUGIN" --num_devices 1)
  DEV_WHERE="XLA CPU plugin, 1 device"
}

step1() {
  LOCATED_BY=
  if [ "$MODE" = xlacpu ]; then
    args_check
    step1_cpu
    return
  fi
  WHERE=$HOST
  if locate_plugin && [ "$MODE" = dry ]; then
    record 1-plugin PASS "found $PLUGIN (via $LOCATED_BY); the dry run does not use it"
    PLUGIN=
  elif [ -n "$PLUGIN" ]; then
    record 1-plugin PASS "$PLUGIN (via $LOCATED_BY; $(du -h "$PLUGIN" 2>/dev/null | cut -f1))"
    DEV_ARGS=(--device cuda --plugin_path "$PLUGIN")
    setup_plugin_env
  elif [ "$MODE" = dry ]; then
    record 1-plugin SKIP "dry run: no CUDA plugin on this machine (searched jax_plugins.xla_cuda13/12 and xla_cuda_plugin.so under the site-packages, /usr/local/lib, /usr/lib, /opt)"
  else
    record 1-plugin FAIL "no xla_cuda_plugin.so: not importable as jax_plugins.xla_cuda13/12 by ${PY:-python3 (absent)}, none under the site-packages, /usr/local/lib, /usr/lib, /opt; set PLUGIN_PATH"
  fi
  [ "$MODE" = dry ] && args_check
  if [ -z "$PLUGIN" ] && [ "$MODE" != dry ]; then
    record 1-devices SKIP "needs the plugin (see 1-plugin)"
    return
  fi
  [ -n "$PLUGIN" ] && DEV_WHERE="CUDA plugin (GPU)"
  WHERE=$DEV_WHERE
  local env_=(${BASE_ENV[@]+"${BASE_ENV[@]}"})
  if run devices-json 120 env ${env_[@]+"${env_[@]}"} "$GOTPU" devices "${DEV_ARGS[@]}" --json &&
    run devices-text 120 env ${env_[@]+"${env_[@]}"} "$GOTPU" devices "${DEV_ARGS[@]}"; then
    local desc smi=
    desc=$(grep -E '^  [0-9]+  ' "$RAW/devices-text.out" | head -2 | sed 's/^ *//' | paste -sd';')
    if [ -n "$PLUGIN" ] && command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,memory.total,compute_cap,driver_version --format=csv,noheader > "$RAW/nvidia-smi.csv" 2>&1 ||
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RAW/nvidia-smi.csv" 2>&1
      nvidia-smi > "$RAW/nvidia-smi.txt" 2>&1
      smi="; nvidia-smi (name, memory, compute capability, driver): $(head -1 "$RAW/nvidia-smi.csv")"
    fi
    local api
    api=$(json_field pjrt_api_version "$RAW/devices-json.out")
    record 1-devices PASS "$(grep -E '^(backend|devices) ' "$RAW/devices-text.out" | tr -s ' ' | paste -sd';')${api:+;PJRT C API $api}; $desc$smi"
  else
    record 1-devices FAIL "gotpu devices ${DEV_ARGS[*]}: $(why devices-json $?)"
  fi
}

# ---- step 2: fixtures --------------------------------------------------------------------------

variant_flags() {
  case "$1" in
    adamw) echo "--lr_scheduler_type constant --max_grad_norm 0" ;;
    adamw_clip1) echo "--lr_scheduler_type constant --max_grad_norm 1.0" ;;
    adamw_linear_warmup) echo "--lr_scheduler_type linear --warmup_steps 1 --max_grad_norm 0" ;;
    adamw_linear_warmup_clip1) echo "--lr_scheduler_type linear --warmup_steps 1 --max_grad_norm 1.0" ;;
  esac
}

# fixture_variants F: the reference variants step 2 trains for fixture F. One each by default
# (every optimizer feature is covered by one fixture or another, and each run costs a compile);
# FIXTURE_VARIANTS=all trains every variant the reference has.
fixture_variants() {
  local ref=testdata/models/$1/reference.json v
  if [ "${FIXTURE_VARIANTS:-}" = all ]; then
    for v in adamw adamw_clip1 adamw_linear_warmup adamw_linear_warmup_clip1; do
      grep -q "\"$v\"" "$ref" && echo "$v"
    done
    return
  fi
  case "$1" in
    gpt2-tiny) echo adamw ;;
    gpt2-tiny-affine) echo adamw_clip1 ;;
    *) echo adamw_linear_warmup_clip1 ;;
  esac
}

step2() {
  local f v dir ref batch n rc envs=()
  WHERE=$DEV_WHERE
  if [ -n "$PLUGIN" ]; then
    envs=(${BASE_ENV[@]+"${BASE_ENV[@]}"})
    # The fixture env replaces XLA_FLAGS, so it comes last (env applies assignments in order).
    envs+=(${FIX_ENV[@]+"${FIX_ENV[@]}"})
  fi
  for f in "${FIXTURES[@]}"; do
    dir=testdata/models/$f
    ref=$dir/reference.json
    if [ "$MODE" != dry ] && [ -z "$PLUGIN" ]; then
      record "2-score-$f" SKIP "needs the plugin (see 1-plugin)"
      for v in $(fixture_variants "$f"); do record "2-train-$f-$v" SKIP "needs the plugin (see 1-plugin)"; done
      continue
    fi
    mkdir -p "$RAW/fixtures/$f"
    batch=$RAW/fixtures/$f/batch.jsonl
    if ! run "fixtures/$f/batch" 30 "$DEVPREP" batch -ref "$ref" -out "$batch"; then
      record "2-score-$f" FAIL "devprep batch: $(why "fixtures/$f/batch")"
      for v in $(fixture_variants "$f"); do record "2-train-$f-$v" FAIL "devprep batch: $(why "fixtures/$f/batch")"; done
      continue
    fi
    n=$(wc -l < "$batch")
    if run "fixtures/$f/score" 120 env ${envs[@]+"${envs[@]}"} "$GOTPU" score "${DEV_ARGS[@]}" --model "$dir" --input "$batch" \
      --logits "$RAW/fixtures/$f/logits.safetensors"; then
      cp "$RAW/fixtures/$f/score.out" "$RAW/fixtures/$f/scores.jsonl"
      if [ -z "$PY" ]; then
        record "2-score-$f" SKIP "gotpu score exited 0; $NOPY"
      else
        run "fixtures/$f/score-compare" 60 "$PY" "$HELPERS/compare.py" score --ref "$ref" \
          --scores "$RAW/fixtures/$f/scores.jsonl" --logits "$RAW/fixtures/$f/logits.safetensors"
        verdict "2-score-$f" "fixtures/$f/score-compare" $?
      fi
    else
      record "2-score-$f" FAIL "gotpu score: $(why "fixtures/$f/score" $?)"
    fi
    for v in $(fixture_variants "$f"); do
      local out=$RAW/fixtures/$f/train-$v
      # shellcheck disable=SC2046 # variant_flags is a list of flags
      if run "fixtures/$f/train-$v" 180 env ${envs[@]+"${envs[@]}"} "$GOTPU" train "${DEV_ARGS[@]}" --model_name_or_path "$dir" \
        --train_file "$batch" --per_device_train_batch_size "$n" --max_steps 3 --learning_rate 1e-3 --weight_decay 0.01 \
        --warmup_steps 0 --save_strategy no --logging_steps 1 --output_dir "$out" $(variant_flags "$v"); then
        if [ -z "$PY" ]; then
          record "2-train-$f-$v" SKIP "gotpu train exited 0; $NOPY"
        else
          run "fixtures/$f/train-$v-compare" 60 "$PY" "$HELPERS/compare.py" train --ref "$ref" --variant "$v" \
            --state "$out/trainer_state.json" --model "$out/model.safetensors"
          verdict "2-train-$f-$v" "fixtures/$f/train-$v-compare" $?
        fi
      else
        record "2-train-$f-$v" FAIL "gotpu train: $(why "fixtures/$f/train-$v" $?)"
      fi
    done
  done
}

# ---- step 3: GPT-2 124M ------------------------------------------------------------------------

BENCH_STATE=
BENCH_BATCH=
BENCH_BATCHES=
BENCH_PARAMS=
BENCH_n_layer='' BENCH_n_embd='' BENCH_n_positions='' BENCH_vocab_size=''

step3() {
  local cfg=testdata/hf-configs/gpt2_lmhead_config.json sets=() steps logsteps mdir data maxb=0 b
  # The same model in all three frameworks: HF's GPT-2 124M config with dropout 0 (dropout's
  # random masks are implemented differently in each, and a benchmark should not measure that).
  sets=(-set resid_pdrop=0 -set embd_pdrop=0 -set attn_pdrop=0)
  BENCH_BATCHES=$BATCHES
  steps=$BENCH_STEPS
  # Logged every 4 steps, not every step: a log entry is a host sync, and the async pipeline's
  # point is to have few. The first interval holds the compile and is left out of tokens/s.
  logsteps=${BENCH_LOG_STEPS:-4}
  WHERE=$DEV_WHERE
  if [ "$MODE" = dry ]; then
    # The pure-Go backend trains the same commands on a GPT-2 small enough for two cores.
    sets+=(-set n_layer=2 -set n_embd=64 -set n_head=2 -set n_positions=128 -set n_ctx=128 -set vocab_size=1024)
    BENCH_BATCHES=${DRY_BATCHES:-4 2}
    steps=4
    logsteps=2
  elif [ "$MODE" = xlacpu ]; then
    # GPT-2 124M at seq 1024 is a GPU's work (a step of batch 8 is minutes on two CPU cores): the
    # same commands train a reduced GPT-2 on the plugin, and on gotpu's CPU backend beside it.
    local kv
    for kv in ${CPU_BENCH_SETS:-n_layer=2 n_embd=128 n_head=2 n_positions=128 n_ctx=128 vocab_size=2048}; do
      sets+=(-set "$kv")
    done
    BENCH_BATCHES=${CPU_BATCHES:-4}
    steps=8
    logsteps=2
  fi
  mdir=$WORK/gpt2-bench
  rm -rf "$mdir"
  # The model directory is made even without the plugin: PyTorch and JAX read its config.json.
  if ! run bench/devprep-model 120 "$DEVPREP" model -config "$cfg" "${sets[@]}" -seed 1 -out "$mdir"; then
    record 3-gpt2-gotpu FAIL "devprep model: $(why bench/devprep-model $?)"
    for id in 3-gpt2-torch-eager 3-gpt2-torch-compile 3-gpt2-jax; do record "$id" SKIP "no model config (devprep model failed)"; done
    return
  fi
  cp "$mdir/config.json" "$RAW/bench/config.json"
  local field
  for field in n_layer n_embd n_positions vocab_size; do
    printf -v "BENCH_$field" '%s' "$(grep -oE "\"$field\": *[0-9]+" "$mdir/config.json" | grep -oE '[0-9]+$')"
  done
  BENCH_PARAMS=$(grep -oE '"params":[0-9]+' "$RAW/bench/devprep-model.out" | grep -oE '[0-9]+$')
  BENCH_DESC="GPT-2 with $BENCH_PARAMS parameters ($BENCH_n_layer layers, width $BENCH_n_embd, vocabulary $BENCH_vocab_size), seq $BENCH_n_positions"
  [ "$MODE" = xlacpu ] && BENCH_DESC="reduced $BENCH_DESC, not 124M (a GPU's work)"
  if [ "$MODE" = xlacpu ]; then
    record 3-gpt2-124m SKIP "GPT-2 124M (testdata/hf-configs/gpt2_lmhead_config.json, seq 1024, bf16, batch ${BATCHES// //}) is measured on the GPU: a step of it is minutes on this host's CPU; 3-gpt2-gotpu trains a reduced GPT-2 through the same commands instead" "$NEEDS_GPU"
  fi
  if [ "$MODE" != dry ] && [ -z "$PLUGIN" ]; then
    record 3-gpt2-gotpu SKIP "needs the plugin (see 1-plugin)"
  else
    for b in $BENCH_BATCHES; do [ "$b" -gt "$maxb" ] && maxb=$b; done
    data=$WORK/gpt2-bench-tokens.jsonl
    if ! run bench/devprep-tokens 120 "$DEVPREP" tokens -rows $((maxb * steps)) -seq "$BENCH_n_positions" \
      -vocab "$BENCH_vocab_size" -seed 2 -out "$data"; then
      record 3-gpt2-gotpu FAIL "devprep tokens: $(why bench/devprep-tokens $?)"
    else
      bench_gotpu "$mdir" "$data" "$steps" "$logsteps" 3-gpt2-gotpu gotpu "$BENCH_BATCHES" "${DEV_ARGS[@]}"
      if [ "$MODE" = xlacpu ]; then
        # The same run on gotpu's own CPU backend: the plugin's tokens/s against it.
        WHERE=$GO_BACKEND
        bench_gotpu "$mdir" "$data" "$steps" "$logsteps" 3-gpt2-gotpu-go gotpu-go "${BENCH_BATCH:-$BENCH_BATCHES}" --device go
        WHERE=$DEV_WHERE
      fi
    fi
    rm -f "$data"
  fi
  rm -rf "$mdir"
  bench_python
}

# bench_gotpu MODEL_DIR DATA STEPS LOGGING_STEPS ID TAG BATCHES DEVICE_ARGS...: `gotpu train` at
# each of BATCHES until one fits; raw/bench/TAG.json. The 3-gpt2-gotpu run sets BENCH_STATE and
# BENCH_BATCH (step 4 and the Python baselines use them).
bench_gotpu() {
  local mdir=$1 data=$2 steps=$3 logsteps=$4 id=$5 tag=$6 batches=$7 b
  shift 7
  local dev=("$@")
  local tries=() tried=0 smi_pid out cap rc reserve=0 state='' batch=''
  # PyTorch and JAX run after gotpu's tries on the device; their time is kept back from them.
  [ "$MODE" = device ] && [ -n "$PLUGIN" ] && reserve=${PY_RESERVE_S:-170}
  for b in $batches; do
    cap=$(($(remaining) - reserve))
    [ "$cap" -gt "${BENCH_TRY_S:-200}" ] && cap=${BENCH_TRY_S:-200}
    if [ "$cap" -lt 45 ]; then
      tries+=("batch $b: not tried, too little of the time budget left")
      break
    fi
    tried=$((tried + 1))
    out=$WORK/gpt2-bench-out-b$b
    rm -rf "$out"
    smi_pid=
    if [ "$MODE" = device ] && [ -n "$PLUGIN" ] && command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$RAW/bench/smi-b$b.csv" 2>/dev/null &
      smi_pid=$!
    fi
    # Each try is capped so that a failing large batch leaves time for the smaller ones and for
    # PyTorch and JAX.
    run "bench/$tag-b$b" "$cap" env ${BASE_ENV[@]+"${BASE_ENV[@]}"} "$GOTPU" train "${dev[@]}" \
      --model_name_or_path "$mdir" --train_file "$data" --per_device_train_batch_size "$b" --max_steps "$steps" \
      --bf16 True --learning_rate 6e-4 --weight_decay 0.1 --max_grad_norm 1.0 --lr_scheduler_type constant \
      --warmup_steps 0 --logging_steps "$logsteps" --save_strategy no --seed 1 --peak_flops 989e12 --output_dir "$out"
    rc=$?
    if [ -n "$smi_pid" ]; then
      kill "$smi_pid" 2>/dev/null
      wait "$smi_pid" 2>/dev/null
    fi
    if [ "$rc" = 0 ] && [ -f "$out/trainer_state.json" ]; then
      state=$RAW/bench/$tag-b$b-trainer_state.json
      cp "$out/trainer_state.json" "$state"
      batch=$b
      break
    fi
    tries+=("batch $b: $(why "bench/$tag-b$b" $rc)")
  done
  rm -rf "$WORK"/gpt2-bench-out-b*
  if [ "$id" = 3-gpt2-gotpu ]; then
    BENCH_STATE=$state
    BENCH_BATCH=$batch
  fi
  local prefix=$BENCH_DESC
  [ ${#tries[@]} -gt 0 ] && prefix+="; did not fit or failed: ${tries[*]}"
  if [ -z "$state" ] && [ "$tried" = 0 ]; then
    record "$id" SKIP "$prefix"
  elif [ -z "$state" ]; then
    record "$id" FAIL "$prefix"
  elif [ -z "$PY" ]; then
    record "$id" SKIP "gotpu train exited 0 at batch $batch; $NOPY (to read its log_history)"
  else
    local smi=()
    [ -s "$RAW/bench/smi-b$batch.csv" ] && smi=(--smi "$RAW/bench/smi-b$batch.csv")
    run "bench/$tag-summary" 60 "$PY" "$HELPERS/compare.py" bench --state "$state" --mode "bf16 ${dev[1]}" \
      --batch "$batch" --seq "$BENCH_n_positions" --params "$BENCH_PARAMS" --layers "$BENCH_n_layer" \
      --hidden "$BENCH_n_embd" --warmup "$logsteps" ${smi[@]+"${smi[@]}"} --out "$RAW/bench/$tag.json"
    verdict "$id" "bench/$tag-summary" $? "$prefix"
  fi
}

# py_has MODULE: whether $PY imports MODULE; the import error is in raw/py-MODULE.err.
py_has() {
  run "py-$1" 60 "$PY" -c "import $1; print($1.__version__)"
}

# bench_python: PyTorch (eager, torch.compile) and JAX on the same GPU, at gotpu's batch (16
# without one); they halve it on out-of-memory. With --xla-cpu, on the host CPU at the reduced
# GPT-2, where they are importable.
bench_python() {
  local pyb=${BENCH_BATCH:-16} rc id
  if [ "$MODE" = dry ]; then
    for id in 3-gpt2-torch-eager 3-gpt2-torch-compile 3-gpt2-jax; do
      record "$id" SKIP "dry run: needs the GPU (the scripts are byte-compiled in step 3-helpers)" "$NEEDS_GPU"
    done
    return
  fi
  if [ -z "$PY" ]; then
    for id in 3-gpt2-torch-eager 3-gpt2-torch-compile 3-gpt2-jax; do record "$id" SKIP "$NOPY"; done
    return
  fi
  if [ "$MODE" = xlacpu ]; then
    bench_python_cpu
    return
  fi
  WHERE="the GPU (PyTorch)"
  run bench/torch "${TORCH_S:-150}" "$PY" "$HELPERS/bench_torch.py" --config "$RAW/bench/config.json" --batch "$pyb" \
    --seq "$BENCH_n_positions" --steps 10 --warmup 3 --modes eager,compile --out-dir "$RAW/bench"
  rc=$?
  results bench/torch || true
  for id in 3-gpt2-torch-eager 3-gpt2-torch-compile; do
    grep -q "^$id"$'\t' "$STEPS_TSV" || record "$id" FAIL "bench_torch.py: $(why bench/torch $rc)"
  done
  WHERE="the GPU (JAX)"
  run bench/jax "${JAX_S:-120}" "$PY" "$HELPERS/bench_jax.py" --config "$RAW/bench/config.json" --batch "$pyb" \
    --seq "$BENCH_n_positions" --steps 10 --warmup 2 --out "$RAW/bench/jax.json"
  rc=$?
  results bench/jax || record 3-gpt2-jax FAIL "bench_jax.py: $(why bench/jax $rc)"
  WHERE=$DEV_WHERE
}

# bench_python_cpu: --xla-cpu's baselines, on the host CPU at the reduced GPT-2 and gotpu's batch,
# each only where $PY imports it (the GPU comparison is the device run's).
bench_python_cpu() {
  local pyb=${BENCH_BATCH:-4} rc id modes=eager
  if ! py_has torch; then
    for id in 3-gpt2-torch-eager 3-gpt2-torch-compile; do
      record "$id" SKIP "torch is not importable by $PY ($(tail -1 "$RAW/py-torch.err")): the PyTorch baseline runs on the device" "not run: torch absent"
    done
  else
    if "$PY" -c 'import sys, torch; sys.exit(not hasattr(torch, "compile"))' 2>/dev/null; then
      modes=eager,compile
    else
      record 3-gpt2-torch-compile SKIP "torch $(head -1 "$RAW/py-torch.out") has no torch.compile (2.0+): eager only here"
    fi
    WHERE="host CPU (PyTorch)"
    run bench/torch "${TORCH_S:-150}" "$PY" "$HELPERS/bench_torch.py" --config "$RAW/bench/config.json" --batch "$pyb" \
      --seq "$BENCH_n_positions" --steps 6 --warmup 2 --modes "$modes" --device cpu --out-dir "$RAW/bench"
    rc=$?
    results bench/torch || true
    for id in 3-gpt2-torch-eager 3-gpt2-torch-compile; do
      grep -q "^$id"$'\t' "$STEPS_TSV" || record "$id" FAIL "bench_torch.py --device cpu: $(why bench/torch $rc)"
    done
  fi
  if ! py_has jax; then
    record 3-gpt2-jax SKIP "jax is not importable by $PY ($(tail -1 "$RAW/py-jax.err")): the JAX baseline runs on the device" "not run: jax absent"
  else
    WHERE="host CPU (JAX)"
    run bench/jax "${JAX_S:-120}" env JAX_PLATFORMS=cpu "$PY" "$HELPERS/bench_jax.py" --config "$RAW/bench/config.json" \
      --batch "$pyb" --seq "$BENCH_n_positions" --steps 6 --warmup 2 --out "$RAW/bench/jax.json"
    rc=$?
    results bench/jax || record 3-gpt2-jax FAIL "bench_jax.py on the CPU: $(why bench/jax $rc)"
  fi
  WHERE=$DEV_WHERE
}

# ---- step 4: async pipeline figures ------------------------------------------------------------

step4() {
  local state=$BENCH_STATE
  # The figures are those of a run on the device (step 3's, or else step 2's).
  WHERE=$DEV_WHERE
  [ -n "$state" ] || state=$(ls "$RAW"/fixtures/*/train-*/trainer_state.json 2>/dev/null | head -1)
  if [ -z "$state" ]; then
    record 4-async SKIP "no trainer_state.json from step 3 or 2 to read"
  elif [ -z "$PY" ]; then
    record 4-async SKIP "$NOPY"
  else
    run async 30 "$PY" "$HELPERS/compare.py" async --state "$state"
    verdict 4-async async $? "from $(basename "$(dirname "$state")")/$(basename "$state")"
  fi
}

# ---- step 5: interop ---------------------------------------------------------------------------

step5() {
  local d=$RAW/interop jobs=() arch dir inputs kind
  mkdir -p "$d"
  # The directories are scored on gotpu's CPU backend in every mode (this step is about the files)
  # and read by transformers on the host.
  WHERE="$GO_BACKEND + transformers on the host"
  # gpt2, llama and bert: the directories gotpu saved after step 2's training (a fresh gotpu-made
  # one if that failed); mistral and qwen2 (Llama's code in gotpu): devprep directories, small.
  for arch in gpt2 llama bert mistral qwen2; do
    kind=causal
    [ "$arch" = bert ] && kind=seqcls
    dir='' inputs=''
    case "$arch" in
      gpt2|llama|bert)
        local f=${arch}-tiny
        dir=$(ls -d "$RAW"/fixtures/$f/train-*/ 2>/dev/null | head -1)
        inputs=$d/$arch-inputs.jsonl
        if [ -z "$dir" ] || [ ! -f "$dir/model.safetensors" ]; then
          dir=$d/$arch-model
          run "interop/$arch-devprep" 60 "$DEVPREP" model -config "testdata/models/$f/config.json" -out "$dir" || dir=
        fi
        run "interop/$arch-batch" 30 "$DEVPREP" batch -ref "testdata/models/$f/reference.json" -out "$inputs" || dir=
        ;;
      mistral|qwen2)
        local cfg sets=(-set num_hidden_layers=2 -set hidden_size=64 -set intermediate_size=128 -set num_attention_heads=4
          -set num_key_value_heads=2 -set vocab_size=512 -set max_position_embeddings=64)
        if [ "$arch" = mistral ]; then
          cfg=testdata/hf-configs/mistral_small_scratch_config.json
          sets+=(-set torch_dtype=float32)
        else
          cfg=testdata/hf-configs/qwen2_v5_rope_parameters_config.json
          # The real Qwen2 ids (pad 151643) do not fit a 512-token vocabulary, and layer_types
          # must list the layers there are.
          sets+=(-set pad_token_id=null -set eos_token_id=2 -set 'layer_types=["full_attention","full_attention"]' -set max_window_layers=2)
        fi
        dir=$d/$arch-model
        inputs=$d/$arch-inputs.jsonl
        if ! run "interop/$arch-devprep" 60 "$DEVPREP" model -config "$cfg" "${sets[@]}" -seed 3 -out "$dir" ||
          ! run "interop/$arch-tokens" 30 "$DEVPREP" tokens -rows 2 -seq 16 -vocab 512 -seed 4 -out "$inputs"; then
          dir=
        fi
        ;;
    esac
    if [ -z "$dir" ]; then
      record "5-hf-$arch" FAIL "no gotpu-saved $arch directory: $(why "interop/$arch-devprep" 1)"
      continue
    fi
    # Scored on the pure-Go backend: this step is about the files; step 2 covers the GPU's numbers.
    if ! run "interop/$arch-score" 120 "$GOTPU" score --device go --model "$dir" --input "$inputs" --logits "$d/$arch-logits.safetensors"; then
      record "5-hf-$arch" FAIL "gotpu score: $(why "interop/$arch-score" $?)"
      continue
    fi
    jobs+=("{\"id\": \"5-hf-$arch\", \"kind\": \"$kind\", \"dir\": \"$dir\", \"inputs\": \"$inputs\", \"logits\": \"$d/$arch-logits.safetensors\"}")
  done
  if [ ${#jobs[@]} -gt 0 ]; then
    (IFS=,; echo "[${jobs[*]}]") > "$d/jobs.json"
    if [ -z "$PY" ]; then
      for j in "${jobs[@]}"; do record "$(echo "$j" | grep -oE '5-hf-[a-z0-9]+')" SKIP "$NOPY"; done
    else
      run interop/hf 240 "$PY" "$HELPERS/interop.py" models --jobs "$d/jobs.json"
      local rc=$?
      if ! results interop/hf; then
        for j in "${jobs[@]}"; do record "$(echo "$j" | grep -oE '5-hf-[a-z0-9]+')" FAIL "interop.py: $(why interop/hf $rc)"; done
      fi
    fi
  fi

  step5_lora

  local name tokdir=testdata/tokenizers
  for name in gpt2 bert-base-uncased mistral-7b qwen3 unigram-synthetic; do
    WHERE="host only: gotpu tokenize"
    local tok=$tokdir/$name/tokenizer.json.gz exp=$tokdir/expected/$name.jsonl.gz pairs=$tokdir/expected/$name.pairs.jsonl ok=1
    # The inputs are the expected files' own strings, so that line i is string i on both sides.
    local p
    for p in plain special; do
      local extra=()
      [ "$p" = special ] && extra=(--add_special_tokens)
      run "interop/tok-$name-$p" 60 bash -c '"$1" tokenize --tokenizer "$2" "${@:4}" < "$3"' _ "$GOTPU" "$tok" "$tokdir/corpus.jsonl" ${extra[@]+"${extra[@]}"} || ok=0
      run "interop/tok-$name-pairs-$p" 60 bash -c '"$1" tokenize --tokenizer "$2" --pair "${@:4}" < "$3"' _ "$GOTPU" "$tok" "$pairs" ${extra[@]+"${extra[@]}"} || ok=0
    done
    if [ "$ok" = 0 ]; then
      record "5-tokenizers-$name" FAIL "gotpu tokenize: $(why "interop/tok-$name-plain" 1)"
      continue
    fi
    if [ -z "$PY" ]; then
      record "5-tokenizers-$name" SKIP "gotpu tokenize exited 0; $NOPY"
      continue
    fi
    run "interop/tok-$name-compare" 60 "$PY" "$HELPERS/compare.py" tokenize --plain "$RAW/interop/tok-$name-plain.out" \
      --special "$RAW/interop/tok-$name-special.out" --expected "$exp" --pairs-plain "$RAW/interop/tok-$name-pairs-plain.out" \
      --pairs-special "$RAW/interop/tok-$name-pairs-special.out" --pairs-expected "$pairs"
    verdict "5-tokenizers-$name" "interop/tok-$name-compare" $? "vs the stored tokenizers@0.23.2 outputs"
    run "interop/tok-$name-python" 120 "$PY" "$HELPERS/interop.py" tokenize --name "$name" --tokenizer "$tok" \
      --corpus "$tokdir/corpus.jsonl" --plain "$RAW/interop/tok-$name-plain.out" --special "$RAW/interop/tok-$name-special.out" \
      --pairs "$pairs" --pairs-plain "$RAW/interop/tok-$name-pairs-plain.out" --pairs-special "$RAW/interop/tok-$name-pairs-special.out"
    local rc=$?
    WHERE="host only: Python tokenizers"
    results "interop/tok-$name-python" || record "5-tokenizers-python-$name" FAIL "interop.py: $(why "interop/tok-$name-python" $rc)"
  done
}

# step5_lora: a LoRA adapter (gotpu train --use_peft) on gpt2-tiny for 3 steps on the device,
# against the same run on gotpu's CPU backend (in a dry run, where both would be that backend, the
# run and its files only). lora_dropout is 0: dropout's random masks are each backend's own (with
# 0.05 the plugin's and gotpu's adapters differ by 0.5 relative; with 0, by 1e-6).
step5_lora() {
  local d=$RAW/interop/lora batch envs=() args label
  mkdir -p "$d"
  WHERE=$HOST
  if ! run gotpu-train-help 30 "$GOTPU" train --help || ! grep -q -- '-use_peft' "$RAW/gotpu-train-help.err" "$RAW/gotpu-train-help.out"; then
    record 5-lora SKIP "not in this build: gotpu has no LoRA adapters (no --use_peft in gotpu train --help)"
    return
  fi
  if [ "$MODE" = device ] && [ -z "$PLUGIN" ]; then
    record 5-lora SKIP "needs the plugin (see 1-plugin)"
    return
  fi
  batch=$d/batch.jsonl
  if ! run interop/lora/batch 30 "$DEVPREP" batch -ref testdata/models/gpt2-tiny/reference.json -out "$batch"; then
    record 5-lora FAIL "devprep batch: $(why interop/lora/batch)"
    return
  fi
  # TF32 off on the GPU, as for the fixtures.
  [ -n "$PLUGIN" ] && envs=(${BASE_ENV[@]+"${BASE_ENV[@]}"} ${FIX_ENV[@]+"${FIX_ENV[@]}"})
  args=(train --model_name_or_path testdata/models/gpt2-tiny --train_file "$batch" --per_device_train_batch_size "$(wc -l < "$batch")"
    --max_steps 3 --learning_rate 1e-2 --warmup_steps 0 --save_strategy no --logging_steps 1 --lr_scheduler_type constant
    --use_peft --lora_r 4 --lora_alpha 8 --lora_dropout 0 --lora_target_modules c_attn,c_proj)
  label="LoRA r 4 on c_attn and c_proj of gpt2-tiny, 3 steps (gotpu train --use_peft)"
  WHERE=$DEV_WHERE
  if ! run interop/lora/dev 180 env ${envs[@]+"${envs[@]}"} "$GOTPU" "${args[@]}" "${DEV_ARGS[@]}" --output_dir "$d/dev"; then
    record 5-lora FAIL "$label: $(why interop/lora/dev $?)"
    return
  fi
  local f
  for f in adapter_config.json adapter_model.safetensors trainer_state.json; do
    if [ ! -s "$d/dev/$f" ]; then
      record 5-lora FAIL "$label: exited 0 without $f"
      return
    fi
  done
  if [ "$MODE" = dry ]; then
    record 5-lora PASS "$label: adapter_config.json and adapter_model.safetensors ($(du -h "$d/dev/adapter_model.safetensors" | cut -f1)) written; the dry run has no other backend to compare with"
    return
  fi
  WHERE="$DEV_WHERE, vs $GO_BACKEND"
  if ! run interop/lora/go 120 "$GOTPU" "${args[@]}" --device go --output_dir "$d/go"; then
    record 5-lora FAIL "$label on gotpu's CPU backend: $(why interop/lora/go $?)"
  elif [ -z "$PY" ]; then
    record 5-lora SKIP "$label: both ran; $NOPY"
  else
    run interop/lora/compare 60 "$PY" "$HELPERS/compare.py" tensors --a "$d/dev/adapter_model.safetensors" \
      --b "$d/go/adapter_model.safetensors" --state-a "$d/dev/trainer_state.json" --state-b "$d/go/trainer_state.json"
    verdict 5-lora interop/lora/compare $? "$label: the adapter against gotpu's CPU backend's (PEFT itself is not compared)"
  fi
}

# ---- step 6: probe for an XLA CPU plugin -------------------------------------------------------

step6() {
  local roots=() f found=() cands=() how
  WHERE=$HOST
  mapfile -t roots < <(site_dirs)
  if [ ${#roots[@]} -eq 0 ]; then
    record 6-probe SKIP "no Python site-packages to search (python: ${PY:-absent})"
  else
    # What `nm -D --defined-only FILE | grep -w GetPjrtApi` answers, for every shared object under
    # the site-packages: compare.py reads only the ELF dynamic symbol tables, in one process
    # (thousands of files, gigabytes of CUDA libraries); nm -D on the matches confirms it.
    find "${roots[@]}" -type f -name '*.so*' 2>/dev/null > "$RAW/probe-files.txt"
    if ! run probe 120 bash -c '"$1" "$2" exports GetPjrtApi < "$3"' _ "$PY" "$HELPERS/compare.py" "$RAW/probe-files.txt"; then
      record 6-probe FAIL "reading the ELF symbol tables: $(why probe)"
      record 6-spmd-8-replicas SKIP "the probe did not finish"
      record 6-fsdp-8-devices SKIP "the probe did not finish"
      return
    fi
    mapfile -t found < "$RAW/probe.out"
    how="read from the ELF dynamic symbol tables of $(wc -l < "$RAW/probe-files.txt") .so files"
    if command -v nm >/dev/null; then
      local confirmed=0
      for f in ${found[@]+"${found[@]}"}; do
        # grep without -q reads all of nm's output: with pipefail, nm killed by SIGPIPE after an
        # early match would make the match look like a miss.
        nm -D --defined-only "$f" 2>/dev/null | grep -w GetPjrtApi >/dev/null && confirmed=$((confirmed + 1))
      done
      how+=", nm -D confirms $confirmed"
    fi
    for f in ${found[@]+"${found[@]}"}; do
      echo "$f $(du -h "$f" | cut -f1)" >> "$RAW/probe.txt"
      case "$(basename "$f")" in
        *cuda*|*gpu*|*tpu*|*rocm*) ;;
        *) cands+=("$f") ;;
      esac
    done
    if [ ${#found[@]} -eq 0 ]; then
      record 6-probe PASS "no shared object under ${roots[*]} exports GetPjrtApi ($how)"
    else
      record 6-probe PASS "${#found[@]} export GetPjrtApi ($how): $(for f in "${found[@]}"; do echo "${f#*-packages/}"; done | paste -sd' '); XLA CPU plugin candidates (not named cuda/gpu/tpu/rocm): ${#cands[@]}"
    fi
  fi

  # The 8-replica SPMD step: gpt2-tiny's batch four times (8 rows, one per replica) for 3 steps.
  local batch=$RAW/spmd/batch8.jsonl args
  mkdir -p "$RAW/spmd"
  run spmd/batch 30 "$DEVPREP" batch -ref testdata/models/gpt2-tiny/reference.json -repeat 4 -out "$batch"
  args=(train --model_name_or_path testdata/models/gpt2-tiny --train_file "$batch" --per_device_train_batch_size 1
    --max_steps 3 --learning_rate 1e-3 --weight_decay 0.01 --warmup_steps 0 --save_strategy no --logging_steps 1
    --lr_scheduler_type constant --max_grad_norm 1.0)
  local cpu='' i=0 failed=()
  if [ "$MODE" = xlacpu ]; then
    # The plugin step 1 found (the probe above is the device run's search, reported as found).
    cpu=$PLUGIN
    cands=()
    if [ -z "$cpu" ]; then
      record 6-spmd-8-replicas SKIP "needs the XLA CPU plugin (see 1-plugin)"
      record 6-fsdp-8-devices SKIP "needs the XLA CPU plugin (see 1-plugin)"
      return
    fi
  fi
  for f in ${cands[@]+"${cands[@]}"}; do
    i=$((i + 1))
    # XLA's CPU client makes 4 devices unless told otherwise: gotpu passes --num_devices to it as
    # the client option cpu_device_count.
    if run "spmd/devices-cpu-$i" 60 "$GOTPU" devices --device cpu --plugin_path "$f" --num_devices 8 --json; then
      cpu=$f
      break
    fi
    failed+=("$(basename "$f"): $(why "spmd/devices-cpu-$i" 1)")
  done
  if [ -z "$cpu" ] && [ "$MODE" = device ]; then
    if [ ${#failed[@]} -gt 0 ]; then
      # A shared object can export GetPjrtApi and still not be a plugin that loads on its own
      # (a Python extension, say): a finding about the image, not a failure of gotpu.
      record 6-spmd-8-replicas SKIP "no candidate loads as an XLA CPU plugin with 8 devices: ${failed[*]}"
    else
      record 6-spmd-8-replicas SKIP "no XLA CPU plugin on this image: $(if [ ${#found[@]} -gt 0 ]; then for f in "${found[@]}"; do basename "$f"; done | paste -sd' '; else echo 'no shared object'; fi) exports GetPjrtApi, nothing else (raw/probe.txt)"
    fi
    record 6-fsdp-8-devices SKIP "no XLA CPU plugin with 8 devices (see 6-spmd-8-replicas)"
    return
  fi
  if ! run spmd/go8 120 "$GOTPU" "${args[@]}" --device go --num_devices 8 --output_dir "$RAW/spmd/go8"; then
    record 6-spmd-8-replicas FAIL "gotpu train --device go --num_devices 8: $(why spmd/go8 $?)"
    record 6-fsdp-8-devices SKIP "the data-parallel run it is compared with failed"
    return
  fi
  local other label rc
  if [ -n "$cpu" ]; then
    WHERE="XLA CPU plugin, 8 devices, vs $GO_BACKEND, 8 virtual devices"
    label="XLA CPU plugin $(basename "$cpu") (8 host devices) vs gotpu's CPU backend (8 virtual devices)"
    other=cpu8
    run spmd/cpu8 180 "$GOTPU" "${args[@]}" --device cpu --plugin_path "$cpu" --num_devices 8 --output_dir "$RAW/spmd/cpu8"
    rc=$?
  else
    WHERE="$GO_BACKEND, 8 virtual devices vs 1"
    # Dry run without a CPU plugin: the same comparison code on gotpu's backend, 8 replicas of
    # batch 1 against 1 device of batch 8 (the same global batch; the later flag wins).
    label="dry-run stand-in (no CPU plugin): gotpu's CPU backend, 8 replicas vs 1 device with the same global batch"
    other=go1
    run spmd/go1 120 "$GOTPU" "${args[@]}" --device go --num_devices 1 --per_device_train_batch_size 8 \
      --output_dir "$RAW/spmd/go1"
    rc=$?
  fi
  if [ "$rc" != 0 ]; then
    record 6-spmd-8-replicas FAIL "$label: $(why "spmd/$other" $rc)"
  elif [ -z "$PY" ]; then
    record 6-spmd-8-replicas SKIP "$label: both ran; $NOPY"
  else
    run spmd/compare 60 "$PY" "$HELPERS/compare.py" tensors --a "$RAW/spmd/$other/model.safetensors" \
      --b "$RAW/spmd/go8/model.safetensors" --state-a "$RAW/spmd/$other/trainer_state.json" \
      --state-b "$RAW/spmd/go8/trainer_state.json"
    verdict 6-spmd-8-replicas spmd/compare $? "$label"
  fi

  # FSDP full_shard over the same 8 devices (docs/fsdp.md): on the plugin the AutoSharding
  # program XLA partitions; against gotpu's CPU backend's data-parallel run above (the same
  # global batch: the same update within float32 rounding).
  local fargs=("${args[@]}" --fsdp full_shard)
  mkdir -p "$RAW/fsdp"
  if [ -n "$cpu" ]; then
    WHERE="XLA CPU plugin, 8 devices (fsdp), vs $GO_BACKEND, 8 virtual devices"
    label="fsdp full_shard on XLA CPU plugin $(basename "$cpu") (8 host devices) vs data parallel on gotpu's CPU backend"
    run fsdp/cpu8 180 "$GOTPU" "${fargs[@]}" --device cpu --plugin_path "$cpu" --num_devices 8 --output_dir "$RAW/fsdp/run"
    rc=$?
  else
    WHERE="$GO_BACKEND, 8 virtual devices (fsdp vs data parallel)"
    label="dry-run stand-in (no CPU plugin): fsdp full_shard vs data parallel, both on gotpu's CPU backend (8 virtual devices)"
    run fsdp/go8 120 "$GOTPU" "${fargs[@]}" --device go --num_devices 8 --output_dir "$RAW/fsdp/run"
    rc=$?
  fi
  if [ "$rc" != 0 ]; then
    record 6-fsdp-8-devices FAIL "$label: $(why "fsdp/$([ -n "$cpu" ] && echo cpu8 || echo go8)" $rc)"
  elif [ -z "$PY" ]; then
    record 6-fsdp-8-devices SKIP "$label: it ran; $NOPY"
  else
    run fsdp/compare 60 "$PY" "$HELPERS/compare.py" tensors --a "$RAW/fsdp/run/model.safetensors" \
      --b "$RAW/spmd/go8/model.safetensors" --state-a "$RAW/fsdp/run/trainer_state.json" \
      --state-b "$RAW/spmd/go8/trainer_state.json"
    verdict 6-fsdp-8-devices fsdp/compare $? "$label"
  fi
}

# ---- the helpers themselves --------------------------------------------------------------------

step_helpers() {
  WHERE=$HOST
  if [ -z "$PY" ]; then
    record 3-helpers SKIP "$NOPY to byte-compile the helper scripts"
    return
  fi
  local tmp=$WORK/pycache
  if run py_compile 60 env PYTHONPYCACHEPREFIX="$tmp" "$PY" -m py_compile "$HELPERS"/*.py; then
    record 3-helpers PASS "py_compile: $(cd "$HELPERS" && ls ./*.py | sed 's|^\./||' | paste -sd' ') ($("$PY" --version 2>&1))"
  else
    record 3-helpers FAIL "py_compile: $(why py_compile $?)"
  fi
}

# ---- summary -----------------------------------------------------------------------------------

summary() {
  local s=$OUT/summary.md mode_name=device
  [ "$MODE" = dry ] && mode_name="dry run (pure-Go backend, no plugin)"
  [ "$MODE" = xlacpu ] && mode_name="rehearsal on XLA's CPU PJRT plugin (--xla-cpu: the plugin as the device, no GPU)"
  {
    echo "# gotpu device check: $mode_name"
    echo
    echo "- when: $(date -u +%Y-%m-%dT%H:%M:%SZ), $SECONDS s of a ${DEADLINE_S} s budget"
    echo "- host: $(uname -srm); $(ldd --version 2>&1 | head -1)"
    [ -f "$BIN/BUILD.txt" ] && echo "- build: $(head -3 "$BIN/BUILD.txt" | paste -sd';')"
    [ -n "$PLUGIN" ] && echo "- plugin: $PLUGIN$(api=$(json_field pjrt_api_version "$RAW/devices-json.out"); echo "${api:+ (PJRT C API $api, from gotpu devices --json)}")"
    [ -s "$RAW/nvidia-smi.csv" ] && echo "- GPU (nvidia-smi name, memory, compute capability, driver): $(head -1 "$RAW/nvidia-smi.csv")"
    echo "- python: ${PY:-none} $([ -n "$PY" ] && "$PY" --version 2>&1)"
    local n
    for n in ${ENV_NOTES[@]+"${ENV_NOTES[@]}"}; do echo "- $n"; done
    # Each row's "where" by its first words: the plugin, gotpu's CPU backend, the host, not run.
    echo "- where the checks ran (the \"where\" column): $(awk -F'\t' '{
        w = $3
        if (w ~ /^XLA CPU plugin/) k = 1
        else if (w ~ /^CUDA plugin|^the GPU/) k = 2
        else if (w ~ /^gotpu CPU backend/) k = 3
        else if (w ~ /^host/) k = 4
        else if (w ~ /needs a GPU/) k = 5
        else k = 6
        n[k]++; ids[k] = ids[k] (n[k] > 1 ? " " : "") $1
      } END {
        split("on the XLA CPU plugin|on the GPU|on gotpu'"'"'s CPU backend alone|on the host alone (no device)|not run, needing a GPU|not run (the reasons are in the rows)", name, "|")
        for (k = 1; k <= 6; k++) {
          if (!n[k]) continue
          printf "%s%d %s", (m++ ? "; " : ""), n[k], name[k]
          if (k <= 3 || k == 5) printf " (%s)", ids[k]
        }
      }' "$STEPS_TSV")"
    echo
    echo "## Steps"
    echo
    echo "| step | result | where | detail |"
    echo "|---|---|---|---|"
    local id status where detail
    # In step order (they run in another: the cheap checks first, the benchmark last).
    while IFS=$'\t' read -r id status where detail; do
      echo "| $id | $status | ${where//|/\\|} | ${detail//|/\\|} |"
    done < <(sort -s -t- -k1,1n "$STEPS_TSV")
    echo
    if [ "$MODE" = xlacpu ]; then
      echo "## GPT-2 training throughput (step 3; XLA CPU plugin rehearsal: ${BENCH_DESC:-a reduced GPT-2}; on the plugin and on gotpu's CPU backend)"
    elif [ -n "$PLUGIN" ]; then
      echo "## GPT-2 124M training throughput (step 3)"
    else
      echo "## GPT-2 training throughput (step 3; dry run: a 2-layer GPT-2, seq 128, on the pure-Go backend)"
    fi
    echo
    if [ -n "$PY" ] && ls "$RAW"/bench/*.json >/dev/null 2>&1; then
      local files=()
      for n in gotpu gotpu-go torch-eager torch-compile jax; do
        [ -f "$RAW/bench/$n.json" ] && files+=("$RAW/bench/$n.json")
      done
      if [ ${#files[@]} -gt 0 ]; then
        "$PY" "$HELPERS/compare.py" report "${files[@]}"
      else
        echo "no results"
      fi
      echo
      echo "MFU = tokens/s × (6N + 12·L·H·T) / 989e12 (N all parameters, the tied embedding once; PaLM's model FLOPs)."
      if [ "$MODE" = xlacpu ]; then
        echo "On a CPU that is an H100's peak, so the MFU column is ~0: read tokens/s, and \"gotpu ÷ this\" (the first row,"
        echo "gotpu on the plugin, over each row). No peak memory: there is no nvidia-smi, and gotpu reports none."
      else
        echo "gotpu reports no device memory; its figure, where there is one, is nvidia-smi's memory.used, which includes"
        echo "the memory XLA's allocator reserves up front (gotpu passes the CUDA plugin no client options)."
      fi
    else
      echo "no results"
    fi
    echo
    echo "Commands: commands.log; outputs: raw/. Status counts: $(cut -f2 "$STEPS_TSV" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}' | sed 's/, $//')"
  } > "$s"
}

# ---- main --------------------------------------------------------------------------------------

echo "gotpu device check ($MODE) -> $OUT" >&2
if step0; then
  # Step 1 always runs too: it finds the plugin every later step runs on.
  step1
  if selected 2; then step2; else record 2-fixtures SKIP "not selected (--steps $STEPS)"; fi
  if selected 5; then step5; else record 5-interop SKIP "not selected (--steps $STEPS)"; fi
  if selected 6; then step6; else record 6-probe SKIP "not selected (--steps $STEPS)"; fi
  step_helpers
  if selected 3; then step3; else record 3-gpt2 SKIP "not selected (--steps $STEPS)"; fi
  if selected 4; then step4; else record 4-async SKIP "not selected (--steps $STEPS)"; fi
fi
summary
echo "summary: $OUT/summary.md" >&2
if cut -f2 "$STEPS_TSV" | grep -x FAIL >/dev/null; then
  exit 1
fi
exit 0
