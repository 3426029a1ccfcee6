#!/usr/bin/env bash
# stability.sh VOLTA DATA [N] [LEVEL]: runs one scenario N times (default 100) at every thread
# count from 1 to nproc, and checks that everything it produces is bitwise the same every time:
#   a short shakespeare-char training (its checkpoint and the deterministic fields of its log),
#   eval losses, greedy and sampled generation (batch 2), the checkpoint exported to ONNX and that
#   ONNX model run on fixed tokens.
# At `strict` (the default LEVEL, passed as --deterministic) every artifact must have one hash
# across all runs and thread counts; at `run-to-run` one hash per thread count. The model is just
# big enough (K = batch x context = 256) for run-to-run to run its weight gradients split-K.
# Prints a summary line per artifact; exits 1 on any divergence.
set -euo pipefail
volta=$(realpath "$1")
data=$(realpath "$2")
runs=${3:-100}
level=${4:-strict}
max_threads=$(nproc)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# A [1, n] int32 .npy file of the given values (< 256).
npy_i32() {
  local f=$1; shift
  local dict="{'descr': '<i4', 'fortran_order': False, 'shape': (1, $#), }"
  local len=$(( (10 + ${#dict} + 1 + 63) / 64 * 64 - 10 ))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((len % 256)))\\x$(printf %02x $((len / 256)))"
    printf '%s' "$dict"; printf '%*s' $((len - ${#dict} - 1)) ''; printf '\n'
    for v in "$@"; do printf "\\x$(printf %02x "$v")\\x00\\x00\\x00"; done; } > "$f"
}
npy_i32 "$dir/tokens.npy" 18 43 44 53 39 27 10 1
h() { sha256sum | cut -c1-16; }
strip_log() { sed -E 's/,"tokens_per_s":[^,}]*//; s/,"elapsed_s":[^,}]*//' "$1"; }

# One scenario at `threads` in a fresh folder: one "artifact hash" line each.
scenario() {
  local t=$1 w=$2
  local v=("$volta" --threads "$t" --deterministic "$level")
  mkdir -p "$w"
  "${v[@]}" train --recipe shakespeare-char --layers 2 --heads 2 --channels 32 --context 32 --batch 8 --steps 12 \
    --eval-every 6 --eval-iters 2 --seed 7 --data "$data" --out "$w/run" > /dev/null
  echo "checkpoint $(h < "$w/run/last.safetensors")"
  echo "train-log $(strip_log "$w/run/log.jsonl" | h)"
  echo "eval $("${v[@]}" eval --checkpoint "$w/run/last.safetensors" --data "$data" --eval-iters 2 --seed 1 | h)"
  echo "greedy $("${v[@]}" generate --checkpoint "$w/run/last.safetensors" --prompt "ROMEO:" --tokens 24 --temperature 0 | h)"
  echo "sampled $("${v[@]}" generate --checkpoint "$w/run/last.safetensors" --tokens 24 --temperature 0.8 --top-k 10 \
    --seed 3 --batch 2 | h)"
  "${v[@]}" export --checkpoint "$w/run/last.safetensors" --onnx "$w/m.onnx" --seq 8 > /dev/null
  echo "onnx-export $(h < "$w/m.onnx")"
  "${v[@]}" run "$w/m.onnx" --input tokens="$dir/tokens.npy" --output "$w/out" > /dev/null
  echo "onnx-run $(h < "$w/out/logits.npy")"
}

start=$(date +%s)
for ((i = 1; i <= runs; i++)); do
  for ((t = 1; t <= max_threads; t++)); do
    scenario "$t" "$dir/w" | sed "s/^/$t /" >> "$dir/hashes.txt"
    rm -rf "$dir/w"
  done
done
elapsed=$(( $(date +%s) - start ))

# Per artifact: distinct hashes overall and per thread count.
status=0
for artifact in $(awk '{print $2}' "$dir/hashes.txt" | awk '!seen[$0]++'); do
  overall=$(awk -v a="$artifact" '$2 == a {print $3}' "$dir/hashes.txt" | sort -u | wc -l)
  worst=0
  for ((t = 1; t <= max_threads; t++)); do
    n=$(awk -v a="$artifact" -v t="$t" '$1 == t && $2 == a {print $3}' "$dir/hashes.txt" | sort -u | wc -l)
    [ "$n" -gt "$worst" ] && worst=$n
  done
  if [ "$worst" -gt 1 ] || { [ "$level" = strict ] && [ "$overall" -gt 1 ]; }; then
    verdict=DIVERGED; status=1
  else
    verdict=identical
  fi
  printf 'stability: %-12s %s (%d hash(es) over %d runs x threads 1..%d)\n' "$artifact" "$verdict" "$overall" "$runs" "$max_threads"
done
echo "stability: level $level, $runs runs x $max_threads thread counts, ${elapsed}s: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
