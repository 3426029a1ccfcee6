#!/usr/bin/env bash
# Golden hashes of whole jobs: training checkpoints and the deterministic fields of their logs,
# eval losses, greedy and sampled generate text (batch 1 and 4; `--keep 64` slides the window past
# the context, as generation did when they were recorded), the spirals log, each at 1 and 2 threads. Recorded before the runtime took ownership of the model's state; any change of a
# bit in these jobs fails here. An optional fourth argument picks the thread counts to run (default
# "1 2"; CTest runs each as its own test, in parallel); VOLTA_UPDATE_GOLDEN=1 rewrites the golden
# file from both.
set -euo pipefail
volta=$1
data=$2
golden=$3
threads=${4:-1 2}
if [ "${VOLTA_UPDATE_GOLDEN:-0}" = 1 ]; then threads="1 2"; fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Logs are hashed on the fields they had when the hashes were recorded: timings are dropped, and
# so are grad_norm from the TinyLM log (the one Trainer logs it for every recipe since) and the
# determinism level (strict, logged since the policy exists).
strip() { sed -E 's/,"tokens_per_s":[^,}]*//; s/,"elapsed_s":[^,}]*//; s/,"determinism":"strict"//' "$1"; }
strip_lm() { strip "$1" | sed -E 's/,"grad_norm":[^,}]*//'; }
h() { sha256sum | cut -c1-16; }
{
  for t in $threads; do
    run="$dir/t$t"
    "$volta" --threads "$t" train --recipe shakespeare-char --data "$data" --steps 60 --eval-every 30 --eval-iters 4 \
      --seed 7 --out "$run" > /dev/null
    echo "threads $t train last.safetensors $(h < "$run/last.safetensors")"
    echo "threads $t train best.safetensors $(h < "$run/best.safetensors")"
    echo "threads $t train log.jsonl $(strip_lm "$run/log.jsonl" | h)"
    echo "threads $t eval $("$volta" --threads "$t" eval --checkpoint "$run/last.safetensors" --data "$data" --eval-iters 8 --seed 1 | h)"
    echo "threads $t generate greedy $("$volta" --threads "$t" generate --checkpoint "$run/last.safetensors" --prompt "ROMEO:" --tokens 80 --temperature 0 --keep 64 | h)"
    echo "threads $t generate sampled $("$volta" --threads "$t" generate --checkpoint "$run/last.safetensors" --tokens 80 --temperature 0.8 --top-k 40 --seed 3 --keep 64 | h)"
    echo "threads $t generate batch4 $("$volta" --threads "$t" generate --checkpoint "$run/last.safetensors" --tokens 80 --temperature 0.8 --top-k 40 --seed 3 --batch 4 --keep 64 | h)"
    echo "threads $t generate no-kv $("$volta" --threads "$t" generate --checkpoint "$run/last.safetensors" --tokens 40 --temperature 0.8 --seed 3 --no-kv-cache | h)"
    echo "threads $t generate past the context $("$volta" --threads "$t" generate --checkpoint "$run/last.safetensors" --tokens 200 --temperature 0.8 --top-k 40 --seed 3 --batch 2 | h)"
    "$volta" --threads "$t" train --recipe mlp-spirals --steps 100 --seed 1 --log "$dir/spirals$t.jsonl" > /dev/null
    echo "threads $t spirals log $(strip "$dir/spirals$t.jsonl" | h)"
    "$volta" --threads "$t" train --recipe mlp-spirals --steps 60 --seed 2 --optimizer sgd --momentum 0.9 --lr 0.1 \
      --schedule cosine --warmup 10 --clip 1 --loss mse --log "$dir/sgd$t.jsonl" > /dev/null
    echo "threads $t spirals sgd log $(strip "$dir/sgd$t.jsonl" | h)"
  done
} > "$dir/got.txt"
if [ "${VOLTA_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$dir/got.txt" "$golden"
  echo "rewrote $golden"
  exit 0
fi
pattern="^threads ($(echo $threads | tr ' ' '|')) "
grep -E "$pattern" "$golden" > "$dir/want.txt"
diff "$dir/want.txt" "$dir/got.txt"
echo "PASS: $(wc -l < "$dir/want.txt") golden job hashes unchanged (threads $threads)"
