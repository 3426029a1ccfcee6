#!/usr/bin/env bash
# Kill-and-resume soak: trains once without interruption, then again with N SIGKILLs at seeded
# random moments (mid-step, mid-save, mid-log-line), each followed by a resume from whatever
# last.safetensors the kill left (a fresh start when there is none yet). The final checkpoints
# must be byte-identical to the uninterrupted run's and the log's deterministic fields equal.
# Usage: scripts/soak_resume.sh VOLTA DATA [KILLS=5] [SEED=1] [STEPS=3000]
set -euo pipefail
volta=$1
data=$2
kills=${3:-5}
RANDOM=${4:-1}
steps=${5:-3000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --recipe shakespeare-char --data "$data" --layers 1 --heads 2 --channels 32 --context 32 --batch 8
      --steps "$steps" --eval-every 25 --save-every 10 --eval-iters 2 --warmup 10 --decay-steps "$steps" --seed 5)

start=$(date +%s%N)
"$volta" "${args[@]}" --out "$dir/straight" > /dev/null
run_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "uninterrupted run: ${run_ms} ms"

run=("$volta" "${args[@]}" --out "$dir/killed")
landed=0
for k in $(seq 1 "$kills"); do
  resume=()
  if [ -f "$dir/killed/last.safetensors" ]; then resume=(--resume "$dir/killed/last.safetensors"); fi
  "${run[@]}" "${resume[@]}" > /dev/null 2>&1 &
  pid=$!
  # Somewhere in the first third of what an uninterrupted run takes: start-up, steps, saves and
  # log lines all get hit, and each resumed run still has steps left when it is killed.
  delay_ms=$(( 20 + RANDOM % (run_ms / 3 + 1) ))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if kill -9 "$pid" 2>/dev/null; then landed=$((landed + 1)); fi
  wait "$pid" 2>/dev/null || true
  at=$(grep -c . "$dir/killed/log.jsonl" 2>/dev/null || echo 0)
  echo "kill $k after ${delay_ms} ms: $at log lines, last checkpoint: $([ -f "$dir/killed/last.safetensors" ] && echo yes || echo none)"
done
resume=()
if [ -f "$dir/killed/last.safetensors" ]; then resume=(--resume "$dir/killed/last.safetensors"); fi
"${run[@]}" "${resume[@]}" > /dev/null

cmp "$dir/straight/last.safetensors" "$dir/killed/last.safetensors"
cmp "$dir/straight/best.safetensors" "$dir/killed/best.safetensors"
strip() { sed -E 's/,"tokens_per_s":[^,}]*//; s/,"elapsed_s":[^,}]*//' "$1"; }
diff <(strip "$dir/straight/log.jsonl") <(strip "$dir/killed/log.jsonl")
stray=$(find "$dir/killed" -name '*.tmp.*' | wc -l)
if [ "$landed" -eq 0 ]; then echo "FAIL: no kill landed while a run was still going"; exit 1; fi
echo "PASS: $landed of $kills kills landed mid-run, then byte-identical checkpoints and log values for $steps steps ($stray temporary files left)"
