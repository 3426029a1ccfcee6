#!/usr/bin/env bash
# All tests: install, then
#   1. Release build (warnings are errors), the whole CTest suite, the kill-and-resume soak and
#      the stability check (scripts/stability.sh, 5 runs at each thread count, at strict and at
#      run-to-run);
#   2. the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. libFuzzer targets built with clang under sanitizers, each run briefly on its corpus.
# VOLTA_TEST_QUICK=1 runs step 1 only (for quick local loops; CI runs everything).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
jobs=$(nproc)
fuzz_seconds=${VOLTA_FUZZ_SECONDS:-30}

echo "== [1/3] Release build + tests"
# Without a GPU to run them, the CUDA kernels are compiled for one architecture (Hopper), which
# checks them (host code, device code and register allocation) in half the time of two; what
# they need of the hardware (tf32 mma.sync) both architectures have. Always given, so that a
# build folder reused on a GPU machine does not keep the cached one.
cuda_arch="80;90"
if ! nvidia-smi -L > /dev/null 2>&1; then cuda_arch=90; fi
# All three builds compile in unity batches (VOLTA_UNITY, see CMakeLists.txt): in CI each is fresh.
scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release -DVOLTA_WERROR=ON -DVOLTA_UNITY=ON "-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch"
ctest --test-dir build/release --output-on-failure -j"$jobs"
bash scripts/line_budget.sh
if [ "${VOLTA_TEST_QUICK:-0}" = 1 ]; then exit 0; fi
bash scripts/soak_resume.sh build/release/volta data/tinyshakespeare.txt 5 1
bash scripts/stability.sh build/release/volta data/tinyshakespeare.txt "${VOLTA_STABILITY_RUNS:-5}"
bash scripts/stability.sh build/release/volta data/tinyshakespeare.txt "${VOLTA_STABILITY_RUNS:-5}" run-to-run

echo "== [2/3] ASan + UBSan build + tests"
# Without the CUDA backend: its kernels are built without sanitizers in any build, and its host
# code runs only on a GPU, which CI has not; the Release build above compiles both. Without the
# microbenchmarks, whose smoke run the Release build does.
scripts/build.sh build/sanitize -DCMAKE_BUILD_TYPE=Debug -DVOLTA_SANITIZE=ON -DVOLTA_WERROR=ON -DVOLTA_UNITY=ON \
  -DVOLTA_CUDA=OFF -DVOLTA_BENCH=OFF
# allocator_may_return_null: an impossible allocation returns null as the real allocator does, so
# the tests see Volta's out-of-memory errors rather than the sanitizer's report.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/sanitize --output-on-failure -j"$jobs"

echo "== [3/3] Fuzz targets (${fuzz_seconds}s each)"
CC=clang-14 CXX=clang++-14 scripts/build.sh build/fuzz -DCMAKE_BUILD_TYPE=Debug -DVOLTA_FUZZ=ON -DVOLTA_UNITY=ON
# Each fuzzer is one process on one core: run as many at once as there are cores.
fuzz_one() {
  local target=$1 name corpus log rc=0
  name=$(basename "$target")
  corpus=$(mktemp -d)
  log=$(mktemp)
  cp fuzz/corpus/"${name#fuzz_}"/* "$corpus"/
  "$target" -max_total_time="$fuzz_seconds" -print_final_stats=1 "$corpus" > "$log" 2>&1 || rc=$?
  printf -- '-- %s (exit %s)\n%s\n' "$name" "$rc" "$(tail -n 12 "$log")"  # one write: jobs do not interleave
  rm -rf "$corpus" "$log"
  return "$rc"
}
pids=()
for target in build/fuzz/fuzz/fuzz_*; do
  if [ "${#pids[@]}" -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fuzz_one "$target" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
echo "== all tests passed"
