#!/usr/bin/env bash
# Exact resume: 200 steps straight == 100 steps, SIGKILL, --resume to 200. The final
# checkpoints must be byte-identical and the deterministic fields of every log line equal.
set -euo pipefail
volta=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --recipe shakespeare-char --data "$data" --layers 1 --heads 2 --channels 32 --context 32 --batch 8
      --steps 200 --eval-every 50 --save-every 100 --eval-iters 2 --warmup 10 --decay-steps 200 --seed 3)

"$volta" "${args[@]}" --out "$dir/straight" > /dev/null

"$volta" "${args[@]}" --out "$dir/killed" > /dev/null &
pid=$!
# Wait until a step after the checkpoint at 100 is logged, then kill without warning.
for _ in $(seq 1 3000); do
  if grep -q '"step":10[1-9]' "$dir/killed/log.jsonl" 2>/dev/null; then break; fi
  sleep 0.005
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
lines=$(wc -l < "$dir/killed/log.jsonl")
if [ "$lines" -ge 200 ]; then echo "FAIL: the run finished before it was killed ($lines lines)"; exit 1; fi
echo "killed after $lines logged steps; last checkpoint at step 100"

"$volta" "${args[@]}" --out "$dir/killed" --resume "$dir/killed/last.safetensors" > /dev/null

cmp "$dir/straight/last.safetensors" "$dir/killed/last.safetensors"
cmp "$dir/straight/best.safetensors" "$dir/killed/best.safetensors"
strip() { sed -E 's/,"tokens_per_s":[^,}]*//; s/,"elapsed_s":[^,}]*//' "$1"; }
diff <(strip "$dir/straight/log.jsonl") <(strip "$dir/killed/log.jsonl")
echo "PASS: byte-identical checkpoints and identical log lines (step, train_loss, val_loss, lr) for steps 1-200"
