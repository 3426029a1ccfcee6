#!/usr/bin/env bash
# Thread-count invariance: the same TinyLM run with --threads 1 and --threads 2 must write
# byte-identical checkpoints and the same loss log (timing fields aside).
set -euo pipefail
volta=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --recipe shakespeare-char --data "$data" --layers 2 --heads 2 --channels 48 --context 32 --batch 6
      --steps 30 --eval-every 15 --eval-iters 2 --seed 9)
"$volta" --threads 1 "${args[@]}" --out "$dir/t1" > /dev/null
"$volta" --threads 2 "${args[@]}" --out "$dir/t2" > /dev/null
cmp "$dir/t1/last.safetensors" "$dir/t2/last.safetensors"
strip() { sed -E 's/,"tokens_per_s":[^,}]*//; s/,"elapsed_s":[^,}]*//' "$1"; }
diff <(strip "$dir/t1/log.jsonl") <(strip "$dir/t2/log.jsonl")
echo "PASS: --threads 1 and --threads 2 give byte-identical checkpoints and loss logs"
