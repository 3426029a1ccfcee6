#!/usr/bin/env bash
# gpu_check.sh [REPORT]: the GPU check. On a machine with an NVIDIA GPU (no internet needed):
#   1. builds Volta with the CUDA backend (Release, kernels for this GPU's architecture);
#   2. runs every CUDA test, the op-test harness on the CUDA backend (tests/ops/: parity,
#      nan/inf, repeat bits, gradients, per-op speed), then the whole CTest suite on that build;
#   3. runs the GPU benchmarks;
# and writes one report (default build/gpu/gpu_report.md): machine, tests passed / failed,
# parity errors per op family, determinism hashes, benchmark tables.
# Dependencies come from the machine's packages, else from the prefix scripts/gpu_deps.sh
# packs (.gpudeps, or $VOLTA_GPU_DEPS), which carries GoogleTest's source, CLI11 and nlohmann-json.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${VOLTA_GPU_BUILD:-build/gpu}
report=${1:-$build/gpu_report.md}
deps=${VOLTA_GPU_DEPS:-$root/.gpudeps}
jobs=$(nproc)
mkdir -p "$build" "$(dirname "$report")"
log=$build/gpu_check.log
: >"$log"
start=$(date +%s)
status=0

say() { echo "$@" | tee -a "$report"; }
elapsed() { echo $(($(date +%s) - start)); }

: >"$report"
say "# Volta GPU check"
say ""
say "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# VOLTA_COMMIT names the commit where the tree came without its history (a copied checkout).
say "- commit: ${VOLTA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')}"
say "- gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo none)"
say "- cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
say "- nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo none); $(${CXX:-c++} --version | head -1); cmake $(cmake --version | head -1 | awk '{print $3}')"

# ---- 1. Build ------------------------------------------------------------------------------
prefix_path=""
if [ -d "$deps" ]; then
  # GoogleTest from the packed source, installed once into the prefix.
  if [ ! -f "$deps/lib/cmake/GTest/GTestConfig.cmake" ] && [ -d "$deps/src/googletest" ]; then
    cmake -S "$deps/src/googletest" -B "$build/googletest" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_INSTALL_PREFIX="$deps" -DCMAKE_INSTALL_LIBDIR=lib >>"$log" 2>&1 &&
      ninja -C "$build/googletest" install >>"$log" 2>&1 || { say "- googletest build FAILED (see $log)"; exit 1; }
  fi
  prefix_path="-DCMAKE_PREFIX_PATH=$deps"
fi
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}
# VOLTA_GPU_PREBUILT=1: the binaries in $build were built elsewhere (same sources, this GPU's
# architecture) and are used as they are; they must start here.
if [ "${VOLTA_GPU_PREBUILT:-0}" = 1 ] && "$build/volta" --version >/dev/null 2>&1 && "$build/tests/volta_tests" --gtest_list_tests >/dev/null 2>&1; then
  say "- build: prebuilt binaries in $build ($("$build/volta" --version 2>&1 | head -1))"
elif ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DCMAKE_CUDA_COMPILER="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}" $prefix_path >>"$log" 2>&1; then
  say "- configure FAILED:"; tail -30 "$log" | tee -a "$report"; exit 1
else
  grep -q "CUDA backend ON" "$log" || { say "- configure did not enable the CUDA backend"; exit 1; }
  if ! ninja -C "$build" -j"$jobs" >>"$log" 2>&1; then
    say "- build FAILED:"; grep -E "error|Error" "$log" | head -30 | tee -a "$report"; exit 1
  fi
  say "- build: ok, sm_$arch, $(elapsed) s"
fi

# ---- 2. Tests ------------------------------------------------------------------------------
say ""
say "## CUDA tests"
say ""
"$build/tests/volta_tests" --gtest_filter='Cuda*:Golden*' --gtest_output="json:$build/cuda_tests.json" >"$build/cuda_tests.log" 2>&1 || status=1
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|FAILED" "$build/cuda_tests.log" | sed 's/^/    /' | tee -a "$report"
# Per-test diagnostics the tests print (parity errors per op family, determinism hashes).
say ""
say "### Parity, determinism and planned-memory lines"
say ""
grep -E "^(parity|golden|hash|determinism|memory) " "$build/cuda_tests.log" | sed 's/^/    /' | tee -a "$report"
grep -B2 -A12 "Failure" "$build/cuda_tests.log" | head -80 | sed 's/^/    /' | tee -a "$report"

# The op-test harness on the GPU: every op's parity with the reference kernels (with nan/inf
# inputs, repeat bits), every gradient rule against finite differences, each kernel's speed.
# "test-run-to-run": the kernels a run-to-run plan may choose instead (cuBLAS's SGEMM, the
# tensor-core attention).
for mode in ${VOLTA_GPU_OPMODES:-test test-run-to-run grad perf}; do
  say ""
  say "## Op-test harness: volta_op_tests -b cuda -m $mode"
  say ""
  args=(-m "$mode")
  [ "$mode" = test-run-to-run ] && args=(-m test -l run-to-run -o matmul,attention,attention_grad)
  timeout 240 "$build/tests/volta_op_tests" -b cuda "${args[@]}" >"$build/op_tests_$mode.log" 2>&1 || status=1
  if [ "$mode" = perf ]; then
    sed 's/^/    /' "$build/op_tests_$mode.log" | tee -a "$report" >/dev/null
  else
    grep -vE "^PASS" "$build/op_tests_$mode.log" | head -60 | sed 's/^/    /' | tee -a "$report"
  fi
  tail -1 "$build/op_tests_$mode.log" | sed 's/^/    /' | tee -a "$report"
done

say ""
say "## Determinism: output hashes (fnv1a64), two CUDA runs and the CPU"
say ""
for model in "gpt_block.vir --input tokens=random" "mlp.vir --input x=random --input labels=random"; do
  # shellcheck disable=SC2086
  a=$("$build/volta" run examples/$model --seed 1 --device cuda 2>&1 | awk '/fnv1a64/ {print $1, $4}' | tr '\n' ' ')
  b=$("$build/volta" run examples/$model --seed 1 --device cuda 2>&1 | awk '/fnv1a64/ {print $1, $4}' | tr '\n' ' ')
  c=$("$build/volta" run examples/$model --seed 1 --device cpu 2>&1 | awk '/fnv1a64/ {print $1, $4}' | tr '\n' ' ')
  same=identical; [ -n "$a" ] && [ "$a" = "$b" ] || { same=DIFFER; status=1; }
  say "    ${model%% *}: cuda [$a] cuda again [$b] ($same); cpu [$c]"
done

skip=" ${VOLTA_GPU_SKIP:-} "
say ""
say "## All tests (ctest, this build)"
say ""
[[ $skip == *" ctest "* ]] && say "    (skipped)" || ctest --test-dir "$build" -j"$jobs" --timeout 600 --output-on-failure >"$build/ctest.log" 2>&1 || status=1
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$build/ctest.log" | sed 's/^/    /' | tee -a "$report"

# ---- 3. Benchmarks -------------------------------------------------------------------------
say ""
say "## Benchmarks"
say ""
volta=$build/volta
say "### Training on the GPU: shakespeare-char"
say ""
steps=${VOLTA_GPU_TRAIN_STEPS:-2000}
[[ $skip == *" train "* ]] || {
  echo '```'
  # The quality bar's flags (bench/README.md): seed 1, 200 validation batches every 250 steps.
  rm -rf "$build/train"  # a run into a folder holding an earlier run's checkpoints is refused
  timeout 300 "$volta" train --device cuda --recipe shakespeare-char --steps "$steps" --eval-every 250 --eval-iters 200 \
    --seed 1 --out "$build/train" 2>&1 | grep -vE "^\s" | tail -9
  # Resume is exact: 100 steps straight, and 50 then resumed to 100, end in the same bytes.
  for run in straight resumed; do rm -rf "$build/resume_$run"; done
  flags=(--device cuda --recipe shakespeare-char --eval-every 25 --eval-iters 2 --save-every 10)
  timeout 120 "$volta" train "${flags[@]}" --steps 100 --out "$build/resume_straight" >/dev/null 2>&1
  timeout 120 "$volta" train "${flags[@]}" --steps 50 --out "$build/resume_resumed" >/dev/null 2>&1
  timeout 120 "$volta" train "${flags[@]}" --steps 100 --resume "$build/resume_resumed/last.safetensors" \
    --out "$build/resume_resumed" >/dev/null 2>&1
  if [ -f "$build/resume_straight/last.safetensors" ] && cmp -s "$build/resume_straight/last.safetensors" "$build/resume_resumed/last.safetensors"; then
    echo "resume: 100 steps straight and 50 + 50 resumed give byte-identical checkpoints"
  else
    echo "resume: checkpoints DIFFER or missing"; status=1
  fi
  # Two short runs from the same seed: their checkpoints must be the same bytes.
  for run in a b; do
    rm -rf "$build/repeat_$run"
    timeout 120 "$volta" train --device cuda --recipe shakespeare-char --steps 100 --eval-every 50 --eval-iters 4 \
      --out "$build/repeat_$run" > /dev/null 2>&1
  done
  if cmp -s "$build/repeat_a/last.safetensors" "$build/repeat_b/last.safetensors"; then
    echo "two 100-step runs: byte-identical checkpoints ($(sha256sum < "$build/repeat_a/last.safetensors" | cut -c1-16))"
  else
    echo "two 100-step runs: checkpoints DIFFER"; status=1
  fi
  # The same at run-to-run (cuBLAS GEMMs), and on the GPU-sized GPT (fused attention), 20 steps.
  for cfg in "shakespeare-char:--recipe shakespeare-char" "gpu-gpt:--recipe shakespeare-char --layers 6 --heads 6 --channels 384 --context 256 --batch 64"; do
    name=${cfg%%:*}
    for run in a b; do
      rm -rf "$build/rtr_${name}_$run"
      # shellcheck disable=SC2086
      timeout 120 "$volta" --deterministic run-to-run train --device cuda ${cfg#*:} --steps 20 --eval-every 10 --eval-iters 2 \
        --out "$build/rtr_${name}_$run" > "$build/rtr_${name}_$run.log" 2>&1
    done
    if [ -f "$build/rtr_${name}_a/last.safetensors" ] && cmp -s "$build/rtr_${name}_a/last.safetensors" "$build/rtr_${name}_b/last.safetensors"; then
      echo "$name, run-to-run, two 20-step runs: byte-identical checkpoints ($(sha256sum < "$build/rtr_${name}_a/last.safetensors" | cut -c1-16)); $(grep -E '^done' "$build/rtr_${name}_a.log")"
    else
      echo "$name, run-to-run, two 20-step runs: checkpoints DIFFER or missing: $(tail -1 "$build/rtr_${name}_a.log")"; status=1
    fi
  done
  echo '```'
} | tee -a "$report"
say ""
[[ $skip == *" trainbench "* ]] || {
say "### Training step against PyTorch on this GPU (fp32, TF32 off on both sides)"
say ""
# Two configs: the shakespeare-char recipe's model, and a GPU-sized GPT. The peer is the same
# architecture and optimizer (bench/gpu_peer.py); ms per step, median, each step waiting for its loss.
: >"$build/bench_train.jsonl"
: >"$build/peer_train.jsonl"
for cfg in "--layers 4 --heads 4 --channels 128 --context 64 --batch 12" \
           "--layers 6 --heads 6 --channels 384 --context 256 --batch 64"; do
  # Volta at strict (its own GEMM) and at run-to-run (cuBLAS SGEMM, TF32 off).
  for level in strict run-to-run; do
    # shellcheck disable=SC2086
    timeout 300 "$volta" --deterministic $level bench train --device cuda $cfg --steps 30 --warmup 5 --json \
      >>"$build/bench_train.jsonl" 2>>"$build/bench_train.err" || status=1
  done
  # VOLTA_GPU_PEERS: the peer modes, separated by '|' (torch.compile's first compile takes a minute).
  IFS='|' read -ra peer_modes <<<"${VOLTA_GPU_PEERS:-eager --attention sdpa|eager --attention unfused|compile --attention sdpa}"
  for peer in "${peer_modes[@]}"; do
    # shellcheck disable=SC2086
    timeout 300 python3 bench/gpu_peer.py train --mode $peer $cfg --steps 30 --warmup 10 >>"$build/peer_train.jsonl" \
      2>>"$build/peer_train.err" || echo "(peer $peer failed: $(tail -1 "$build/peer_train.err"))" | tee -a "$report"
  done
done
python3 - "$build/bench_train.jsonl" "$build/peer_train.jsonl" <<'PY' | tee -a "$report"
import json, sys
def rows(path):
    try:
        return [json.loads(l) for l in open(path) if l.startswith("{")]
    except OSError:
        return []
key = lambda r: (r["layers"], r["heads"], r["channels"], r["context"], r["batch"])
volta, peers = rows(sys.argv[1]), rows(sys.argv[2])
for v in volta:
    print(f"- Volta {'/'.join(map(str, key(v)))} at {v.get('deterministic', 'strict')}: {v['ms_per_step']:.2f} ms/step")
print()
print("| config (L/H/C/ctx/batch) | Volta level | Volta ms | peer | peer ms (each step waits) | peer ms (queued) | peer / Volta |")
print("|---|---|---:|---|---:|---:|---:|")
for v in volta:
    for p in (p for p in peers if key(p) == key(v)):
        best = min(p["ms_per_step"], p["ms_per_step_pipelined"])
        print(f"| {'/'.join(map(str, key(v)))} | {v.get('deterministic', 'strict')} | {v['ms_per_step']:.2f} | {p['peer']} | "
              f"{p['ms_per_step']:.2f} | {p['ms_per_step_pipelined']:.2f} | {best / v['ms_per_step']:.2f} |")
if peers:
    print(f"\nPyTorch {peers[0]['torch']}, TF32 {'on' if peers[0]['tf32'] else 'off'}; Volta's CUDA GEMM is fp32 FMA (no TF32).")
PY
# Where Volta's step goes on the GPU-sized config (each op synchronised while profiling).
for level in strict run-to-run; do
  timeout 300 "$volta" --deterministic $level bench train --device cuda --layers 6 --heads 6 --channels 384 --context 256 \
    --batch 64 --steps 3 --warmup 2 --profile-summary >"$build/train_profile_$level.txt" 2>&1 || status=1
  say ""
  say '```'
  head -32 "$build/train_profile_$level.txt" | tee -a "$report"
  say '```'
done
}
say ""
[[ $skip == *" infer "* ]] || {
say "### TinyLM inference (shakespeare-char, seeded weights)"
say ""
{
  echo '```'
  timeout 180 "$volta" bench infer --device cuda --batch 1 --batch 32 --kv-cache on 2>&1
  echo "node by node (VOLTA_REPLAY=off):"
  VOLTA_REPLAY=off timeout 180 "$volta" bench infer --device cuda --batch 1 --batch 32 --kv-cache on 2>&1
  echo "PyTorch eager, same model, KV cache, greedy, each token read back:"
  for b in 1 32; do
    timeout 180 python3 bench/gpu_peer.py decode --batch "$b" --runs 5 --warmup 2 2>&1 | tail -1
  done
  echo '```'
} | tee -a "$report"
}
say ""
[[ $skip == *" gemm "* ]] || {
: >"$build/bench_matmul.jsonl"
for level in strict run-to-run; do
  timeout 180 "$volta" --deterministic $level bench matmul --device cuda --runs 5 --json >>"$build/bench_matmul.jsonl" \
    2>>"$build/bench_matmul.err" || status=1
done
timeout 180 python3 bench/gpu_peer.py matmul --runs 5 >"$build/peer_matmul.jsonl" 2>"$build/peer_matmul.err" || echo "(peer failed: $(tail -1 "$build/peer_matmul.err"))" | tee -a "$report"
python3 - "$build/bench_matmul.jsonl" "$build/peer_matmul.jsonl" <<'PY' | tee -a "$report"
import json, sys
def rows(path):
    out = {}
    try:
        for line in open(path):
            r = json.loads(line)
            out[(r["m"], r["n"], r["k"], r.get("form", "nn"))] = r
    except (OSError, ValueError):
        pass
    return out
peer = rows(sys.argv[2])
strict, rtr = {}, {}  # Volta's rows by kernel: its own (strict), cuBLAS (run-to-run)
for line in open(sys.argv[1]):
    r = json.loads(line)
    (rtr if r.get("kernel") == "cuda.cublas" else strict)[(r["m"], r["n"], r["k"], r.get("form", "nn"))] = r
print("### GEMM, fp32: Volta's CUDA kernels vs cuBLAS through PyTorch (TF32 off), GFLOP/s, median of 5")
print()
print("| group | m | n | k | form | Volta strict (own) | Volta run-to-run (cuda.cublas) | PyTorch cuBLAS | strict / cuBLAS |")
print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
nan = float("nan")
for key, v in strict.items():
    pg = peer[key]["gflops"] if key in peer else nan
    rg = rtr[key]["gflops"] if key in rtr else nan
    print(f"| {v['group']} | {key[0]} | {key[1]} | {key[2]} | {key[3]} | {v['gflops']:.0f} | {rg:.0f} | {pg:.0f} | {v['gflops'] / pg:.3f} |")
PY
}
say ""
say ""
say "- total: $(elapsed) s, status $status"
exit $status
