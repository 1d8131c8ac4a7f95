#!/usr/bin/env bash
# The compilation cache's figures (issue #41; docs/tpu-vm.md, "The compilation cache"): GPT-2 124M
# trained from scratch on XLA's CPU plugin with 8 devices and fsdp full_shard, 4 steps of 1 x 128
# tokens per device, an evaluation at step 4, checkpoints every 2 steps, started
#   A  with an empty cache            B  again, on A's cache
#   C1 resumed from A's checkpoint-2 with an empty cache, C2 the same on A's cache
#   E1 `gotpu eval` of A's model with an empty cache, E2 again, E3 on A's cache
# and a table of what each compiled, loaded and logged. About 10 minutes on 2 cores, 16 GB RAM.
#
#   scripts/compile-cache-figures.sh            # builds bin/gotpu first; WORK defaults to a temp dir
#   GOTPU=/path/to/gotpu WORK=/tmp/ccf scripts/compile-cache-figures.sh
#   WORK=/tmp/ccf scripts/compile-cache-figures.sh --table   # only the table, from WORK's logs
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" != "--table" ]; then
if [ -z "${GOTPU:-}" ]; then
  GOTPU=$REPO/bin/gotpu
  (cd "$REPO" && go build -o "$GOTPU" ./cmd/gotpu)
fi
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gotpu-cache-figures.XXXXXX")}
mkdir -p "$WORK"
cd "$WORK"
cp "$REPO/trainer/step/testdata/gpt2_124m_config.json" config.json
# Random token ids (GPT-2's vocabulary), 96 training and 16 validation examples of 128 tokens.
awk 'BEGIN { srand(7); for (f = 0; f < 2; f++) { n = f ? 16 : 96; out = f ? "valid.jsonl" : "train.jsonl";
  for (i = 0; i < n; i++) { s = "{\"input_ids\": ["; for (j = 0; j < 128; j++) s = s (j ? ", " : "") int(rand() * 50257);
  print s "]}" > out } } }'

run() { # run NAME ARGS...: one gotpu process, its stderr and stdout in NAME.log
  local name=$1; shift
  echo "$name: gotpu $*" >&2
  /usr/bin/env time -f "wall %e s, maxrss %M KB" "$GOTPU" "$@" > "$name.log" 2>&1 || { echo "$name failed:"; tail -20 "$name.log"; exit 1; }
}
T=(train --config_name config.json --train_file train.jsonl --validation_file valid.jsonl --device cpu --num_devices 8
   --fsdp full_shard --per_device_train_batch_size 1 --per_device_eval_batch_size 1 --max_steps 4 --logging_steps 1
   --eval_strategy steps --eval_steps 4 --save_steps 2 --seed 1 --disable_tqdm true --block_size 128)
E=(eval --validation_file valid.jsonl --device cpu --num_devices 8 --fsdp full_shard --per_device_eval_batch_size 1 --block_size 128)
rm -rf c1 c2 c3 outA outB outC1 outC2 outE1 outE2 outE3
run A "${T[@]}" --output_dir outA --compilation_cache_dir c1
run B "${T[@]}" --output_dir outB --compilation_cache_dir c1
run C1 "${T[@]}" --output_dir outC1 --resume_from_checkpoint outA/checkpoint-2 --compilation_cache_dir c2
run C2 "${T[@]}" --output_dir outC2 --resume_from_checkpoint outA/checkpoint-2 --compilation_cache_dir c1
run E1 "${E[@]}" --model_name_or_path outA --output_dir outE1 --compilation_cache_dir c3
run E2 "${E[@]}" --model_name_or_path outA --output_dir outE2 --compilation_cache_dir c3
run E3 "${E[@]}" --model_name_or_path outA --output_dir outE3 --compilation_cache_dir c1
else
  cd "${WORK:?--table reads the logs in WORK}"
fi

g() { grep "$@" || true; } # a run without such a line prints an empty cell
echo "run | first program runs (s, source) | XLA compile s | cache load s | hits | losses | eval_loss | wall"
for r in A B C1 C2 E1 E2 E3; do
  firsts=$(g -o 'compiled the [a-z]* step in [0-9.e-]* s .*source=[a-z+]*' "$r.log" | sed -E 's/compiled the ([a-z]*) step in ([0-9.e-]*) s .*source=([a-z+]*)/\1 \2 \3/' | paste -sd ';' -)
  summary=$(g 'INFO compilation ' "$r.log" | tail -1)
  [ -n "$summary" ] || summary=$(g 'compiled the evaluation step' "$r.log" | tail -1)
  compile=$(echo "$summary" | g -o 'xla_compile_seconds=[0-9.e-]*' | cut -d= -f2)
  load=$(echo "$summary" | g -o 'cache_load_seconds=[0-9.e-]*' | cut -d= -f2)
  hits=$(echo "$summary" | g -o 'cache_hits=[0-9]*' | cut -d= -f2)
  losses=$(g -o 'log loss=[0-9.]*' "$r.log" | cut -d= -f2 | paste -sd ' ' -)
  evl=$(g -o 'eval_loss[=":]* *[0-9.]*' "$r.log" | head -1 | g -o '[0-9.]*$')
  echo "$r | $firsts | $compile | $load | $hits | $losses | $evl | $(g -o 'wall [0-9.]* s' "$r.log")"
done
echo "logs in $WORK"
