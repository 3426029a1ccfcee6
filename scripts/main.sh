#!/usr/bin/env bash
# The main job: install, build (Release), train the shakespeare-char TinyLM on the bundled
# tinyshakespeare (the full 2000-step recipe, about two minutes on 2 cores), save it, reload the
# best checkpoint, print its validation loss beside the reference, and generate text from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release -DVOLTA_BUILD_TESTS=OFF
volta=build/release/volta
out=${VOLTA_MAIN_OUT:-out/shakespeare-char}
steps=${VOLTA_MAIN_STEPS:-2000}

echo
echo "== volta train --recipe shakespeare-char --steps $steps --out $out"
rm -rf "$out"
mkdir -p "$out"
"$volta" train --recipe shakespeare-char --data data/tinyshakespeare.txt --steps "$steps" --decay-steps "$steps" \
  --eval-every 250 --eval-iters 200 --seed 1 --out "$out" | tee "$out/train.txt"
best=$(sed -n 's/.*best val loss \([0-9.]*\),.*/\1/p' "$out/train.txt")
# The reference: PyTorch trained with the same recipe and evaluation (bench/README.md, "quality
# bar"); Volta's bar for the 2000-step recipe is 1.92.
echo
echo "validation loss after $steps steps: $best   (reference: PyTorch, same recipe, 2000 steps: 1.8986; bar <= 1.92)"
echo
echo "== volta eval --checkpoint $out/best.safetensors (reloaded; another draw of 200 batches)"
"$volta" eval --checkpoint "$out/best.safetensors" --data data/tinyshakespeare.txt --eval-iters 200 --seed 1
echo
echo "== volta generate --checkpoint $out/best.safetensors --prompt 'ROMEO:' --tokens 400 --temperature 0.8 --top-k 40 --seed 1"
"$volta" generate --checkpoint "$out/best.safetensors" --prompt "ROMEO:" --tokens 400 --temperature 0.8 --top-k 40 --seed 1
