#!/usr/bin/env bash
# The main job: install, build (Release), then take the bundled GPT-style transformer block
# through the whole pipeline (verify -> passes -> plan -> runtime -> CPU backend), printing
# the memory plan and the outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release -DVOLTA_BUILD_TESTS=OFF
volta=build/release/volta

echo
echo "== volta inspect examples/gpt_block.vir"
"$volta" inspect examples/gpt_block.vir
echo
echo "== volta run examples/gpt_block.vir --input tokens=random --seed 1 --memory"
"$volta" run examples/gpt_block.vir --input tokens=random --seed 1 --memory
