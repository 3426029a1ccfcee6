#!/usr/bin/env bash
# gpu_pack.sh OUT.tar.xz NAME=BUILD_DIR [NAME=BUILD_DIR ...]: packs builds of Volta (each build's
# volta, tests/volta_op_tests and, where built, tests/volta_tests, stripped) with the shared
# libraries they need beyond the C and C++ runtimes (ONNX, protobuf) into one archive, for
# scripts/gpu_ab.sh on a GPU machine without those packages. Build each with the CUDA backend for
# the GPU's architecture (for an H100 or H200: -DCMAKE_CUDA_ARCHITECTURES=90).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: gpu_pack.sh OUT.tar.xz NAME=BUILD_DIR [NAME=BUILD_DIR ...]" >&2; exit 2; }
out=$(realpath -m "$1"); shift
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
for spec in "$@"; do
  name=${spec%%=*} dir=${spec#*=}
  [[ $name =~ ^[A-Za-z0-9_-]+$ && $spec == *=* ]] || { echo "gpu_pack.sh: '$spec' is not NAME=BUILD_DIR" >&2; exit 2; }
  if [ ! -x "$dir/volta" ] || [ ! -x "$dir/tests/volta_op_tests" ]; then
    echo "gpu_pack.sh: $dir has no volta and tests/volta_op_tests" >&2
    exit 1
  fi
  mkdir -p "$stage/$name/tests"
  cp "$dir/volta" "$stage/$name/"
  for t in volta_op_tests volta_tests; do [ -x "$dir/tests/$t" ] && cp "$dir/tests/$t" "$stage/$name/tests/"; done
  strip "$stage/$name/volta" "$stage/$name/tests/"*
  for bin in "$dir/volta" "$dir"/tests/volta_*tests; do
    ldd "$bin" | awk '/libonnx|libprotobuf/ {print $3}' | xargs -r -I{} cp -L {} "$stage/lib/"
  done
done
tar -C "$stage" -cf - . | xz -T0 -6 > "$out"
echo "$out: $(du -h "$out" | cut -f1) ($*)"
