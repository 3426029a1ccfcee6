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
"$volta" train --recipe shakespeare-char --data data/tinyshakespeare.txt --steps "$steps" --decay-steps "$steps" \
  --eval-every 250 --eval-iters 200 --seed 1 --out "$out"
echo
echo "== volta eval --checkpoint $out/best.safetensors"
"$volta" eval --checkpoint "$out/best.safetensors" --data data/tinyshakespeare.txt --eval-iters 200 --seed 1
# The reference: PyTorch trained with the same recipe (bench/README.md, "quality bar"); the bar
# for the 2000-step recipe is 1.92.
echo "reference: PyTorch, same recipe and 2000 steps: val loss 1.8986; Volta's bar: <= 1.92"
echo
echo "== volta generate --checkpoint $out/best.safetensors --prompt 'ROMEO:' --tokens 400 --temperature 0.8 --top-k 40 --seed 1"
"$volta" generate --checkpoint "$out/best.safetensors" --prompt "ROMEO:" --tokens 400 --temperature 0.8 --top-k 40 --seed 1
