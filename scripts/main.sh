#!/usr/bin/env bash
# The main job: install, build (Release), train a small TinyLM on the bundled tinyshakespeare
# (about two minutes on 2 cores), save it, reload the checkpoint and generate text from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release -DVOLTA_BUILD_TESTS=OFF
volta=build/release/volta
out=${VOLTA_MAIN_OUT:-out/shakespeare-char}
steps=${VOLTA_MAIN_STEPS:-500}

echo
echo "== volta train --recipe shakespeare-char --steps $steps --out $out"
rm -rf "$out"
"$volta" train --recipe shakespeare-char --data data/tinyshakespeare.txt --steps "$steps" --decay-steps "$steps" \
  --eval-every 100 --eval-iters 20 --seed 1 --out "$out"
echo
echo "== volta eval --checkpoint $out/best.safetensors"
"$volta" eval --checkpoint "$out/best.safetensors" --data data/tinyshakespeare.txt --eval-iters 50
echo
echo "== volta generate --checkpoint $out/best.safetensors --prompt 'ROMEO:' --tokens 300 --temperature 0.8 --seed 1"
"$volta" generate --checkpoint "$out/best.safetensors" --prompt "ROMEO:" --tokens 300 --temperature 0.8 --seed 1
