#!/usr/bin/env bash
# compare.sh — encode throughput of gotpu's pure-Go tokenizer against Hugging
# Face's Rust tokenizers (npm tokenizers@0.23.2, official Node binding), on the
# same text and documents, in the same run. Prints tokens/s for each and the
# ratio Go/Node.
#
#   data/tokenizer/bench/compare.sh            # from anywhere in the repository
#   ROUNDS=5 data/tokenizer/bench/compare.sh
#
# Needs go, node and npm; npm installs the pinned package into a temporary
# copy of this directory (set NODE_BENCH_DIR to reuse one that has it).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
rounds="${ROUNDS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
text="$work/text.txt"

cd "$root"
echo "== Go (GOMAXPROCS=1 for sequential Encode, all cores for EncodeBatch)" >&2
GOTPU_BENCH_DUMP="$text" go test -run '^$' -bench 'BenchmarkEncode/.*/sequential' -cpu 1 -benchtime "${rounds}x" ./data/tokenizer/ | tee "$work/go.txt" >&2
GOTPU_BENCH_TEXT="$text" go test -run '^$' -bench 'BenchmarkEncode/.*/batch' -benchtime "${rounds}x" ./data/tokenizer/ | tee -a "$work/go.txt" >&2

echo "== Node (tokenizers@0.23.2)" >&2
nodedir="${NODE_BENCH_DIR:-$work/node}"
if [ ! -d "$nodedir/node_modules/tokenizers" ]; then
  mkdir -p "$nodedir"
  cp "$here/package.json" "$here/node_bench.mjs" "$nodedir/"
  [ -f "$here/package-lock.json" ] && cp "$here/package-lock.json" "$nodedir/"
  (cd "$nodedir" && npm install --no-audit --no-fund --silent >&2)
else
  cp "$here/node_bench.mjs" "$nodedir/"
fi
node "$nodedir/node_bench.mjs" --text "$text" --tokenizers "$root/testdata/tokenizers" --rounds "$rounds" | tee "$work/node.txt" >&2

echo
printf '%-12s %-11s %14s %14s %8s %12s\n' tokenizer mode 'Go tokens/s' 'Node tokens/s' 'Go/Node' 'same tokens'
status=0
for name in gpt2 mistral-7b; do
  for mode in sequential batch; do
    metric() { awk -v k="BenchmarkEncode/$name/$mode" -v m="$1" 'index($1, k) == 1 { for (i = 2; i <= NF; i++) if ($(i) == m) print $(i-1) }' "$work/go.txt" | tail -1; }
    go_tps=$(metric tokens/s)
    go_tok=$(metric tokens/op)
    node_tps=$(awk -v n="$name" -v m="$mode" '$2 == n && $3 == m { sub("tokens_per_s=", "", $6); print $6 }' "$work/node.txt" | tail -1)
    node_tok=$(awk -v n="$name" -v m="$mode" '$2 == n && $3 == m { sub("tokens_per_round=", "", $7); print $7 }' "$work/node.txt" | tail -1)
    ratio=$(awk -v a="$go_tps" -v b="$node_tps" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
    same=$(awk -v a="$go_tok" -v b="$node_tok" 'BEGIN { if (a == b) print "yes (" a ")"; else print "NO " a " vs " b }')
    case "$same" in NO*) status=1 ;; esac
    printf '%-12s %-11s %14.0f %14.0f %8s %12s\n' "$name" "$mode" "$go_tps" "$node_tps" "$ratio" "$same"
  done
done
echo "(sequential: Go with GOMAXPROCS=1, Node awaiting one encode at a time; batch: all $(nproc 2>/dev/null || echo ?) cores)"
exit $status
