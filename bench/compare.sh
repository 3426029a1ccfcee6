#!/usr/bin/env bash
# compare.sh: Volta against OpenBLAS, oneDNN and PyTorch on this machine, back to back.
#
# Usage:  bash bench/compare.sh [--threads "1 2"] [--quick]
#   --threads  thread counts to measure (default "1 2")
#   --quick    fewer repetitions (a smoke run; ratios are noisier)
# Env:    VOLTA   the volta binary (default build/release/volta)
#         TMPDIR  the peer programs and logs go to ${TMPDIR:-/tmp}/volta-bench (never the repo)
# Needs:  apt-get install -y g++ libopenblas-dev libdnnl-dev python3-torch libjemalloc2
#         (jemalloc is optional: without it PyTorch runs with glibc malloc)
#
# For each thread count T it runs, in this order:
#   volta bench matmul --threads T --json   vs  sgemm_peer (OpenBLAS), sgemm_peer (oneDNN)
#   volta bench train  --threads T --json   vs  torch_tinylm.py --only train
#   volta bench infer  --threads T --json   vs  torch_tinylm.py --only infer   (batch 1)
# then prints the ratio tables (compare_report.py) and the loadavg before and after.
# The raw JSON lines stay in ${TMPDIR:-/tmp}/volta-bench/logs/.
set -euo pipefail

die() { echo "compare.sh: $*" >&2; exit 1; }

THREADS="1 2"
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) [ $# -ge 2 ] || die "--threads needs a value, e.g. --threads \"1 2\""; THREADS="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (usage: bash bench/compare.sh [--threads \"1 2\"] [--quick])" ;;
  esac
done
for t in $THREADS; do
  [[ "$t" =~ ^[1-9][0-9]*$ ]] || die "--threads: '$t' is not a positive integer"
done
[ -n "${THREADS// /}" ] || die "--threads: no thread count given"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"  # volta bench train reads data/tinyshakespeare.txt relative to here
BENCH="$ROOT/bench"
VOLTA="${VOLTA:-build/release/volta}"
OUT="${TMPDIR:-/tmp}/volta-bench"
LOGS="$OUT/logs"
PY=/usr/bin/python3  # Debian's python3-torch is only visible to the system interpreter

# --- dependencies: fail early, naming the package to install --------------------------------
[ -x "$VOLTA" ] || die "no volta binary at '$VOLTA': build it first (bash scripts/build.sh) or set VOLTA=/path/to/volta"
[ -f data/tinyshakespeare.txt ] || die "data/tinyshakespeare.txt is missing (volta bench train and the PyTorch peer read it)"
command -v g++ >/dev/null || die "g++ not found: apt-get install -y g++"
has_header() { echo "#include <$1>" | g++ -E -x c++ - >/dev/null 2>&1; }
has_header cblas.h || die "OpenBLAS headers not found (cblas.h): apt-get install -y libopenblas-dev"
has_header dnnl.h || die "oneDNN headers not found (dnnl.h): apt-get install -y libdnnl-dev"
[ -x "$PY" ] || die "$PY not found: apt-get install -y python3 python3-torch"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch: apt-get install -y python3-torch"

TORCH_ENV=(env OMP_WAIT_POLICY=PASSIVE)  # torch's OpenMP workers sleep instead of spinning between ops
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
if [ -f "$JEMALLOC" ]; then
  # jemalloc keeping freed pages: no page faults and zeroing per training step.
  TORCH_ENV+=(LD_PRELOAD="$JEMALLOC" MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1)
else
  echo "compare.sh: note: $JEMALLOC not found, PyTorch runs with glibc malloc (apt-get install -y libjemalloc2)" >&2
fi

# --- build the GEMM peers (only when the source changed) ------------------------------------
mkdir -p "$OUT" "$LOGS"
build() {  # build OUTPUT FLAGS... ; PACKAGE is named on failure
  local exe="$1" pkg="$2"; shift 2
  [ "$exe" -nt "$BENCH/sgemm_peer.cpp" ] && return 0
  g++ -O2 -std=c++20 "$BENCH/sgemm_peer.cpp" -o "$exe" "$@" 2>"$exe.log" \
    || { cat "$exe.log" >&2; die "building $exe failed (log above; is $pkg installed? apt-get install -y $pkg)"; }
}
build "$OUT/sgemm_openblas" libopenblas-dev -lopenblas
build "$OUT/sgemm_onednn" libdnnl-dev -DPEER_ONEDNN -fopenmp -ldnnl

if [ "$QUICK" = 1 ]; then
  RUNS=(--runs 3 --warmup 1); STEPS=(--steps 5 --warmup 1)
else
  RUNS=(--runs 5 --warmup 2); STEPS=(--steps 10 --warmup 2)
fi

# run LOG CMD... : stdout to LOG (JSON lines), stderr to the terminal
run() {
  local log="$1"; shift
  echo "  $(basename "$log" .jsonl)" >&2
  "$@" >"$log" || die "failed: $* (exit $?; output in $log)"
}

echo "# volta $(git rev-parse --short HEAD 2>/dev/null || echo '?') ($VOLTA); OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas-dev 2>/dev/null || echo '?');" \
     "oneDNN $(dpkg-query -W -f='${Version}' libdnnl-dev 2>/dev/null || echo '?'); torch $("$PY" -c 'import torch; print(torch.__version__)')"
echo "# loadavg before: $(cat /proc/loadavg)"
rm -f "$LOGS"/*.jsonl
for t in $THREADS; do
  echo "# threads $t" >&2
  PEER_ENV=(env OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t")
  run "$LOGS/volta_matmul_t$t.jsonl" "$VOLTA" bench matmul --threads "$t" --json "${RUNS[@]}"
  run "$LOGS/openblas_matmul_t$t.jsonl" "${PEER_ENV[@]}" "$OUT/sgemm_openblas" --threads "$t" "${RUNS[@]}"
  run "$LOGS/onednn_matmul_t$t.jsonl" "${PEER_ENV[@]}" "$OUT/sgemm_onednn" --threads "$t" "${RUNS[@]}"
  run "$LOGS/volta_train_t$t.jsonl" "$VOLTA" bench train --recipe shakespeare-char --threads "$t" --json "${STEPS[@]}"
  run "$LOGS/torch_train_t$t.jsonl" "${TORCH_ENV[@]}" "${PEER_ENV[@]}" "$PY" "$BENCH/torch_tinylm.py" \
    --only train --threads "$t" "${STEPS[@]}"
  run "$LOGS/volta_infer_t$t.jsonl" "$VOLTA" bench infer --batch 1 --threads "$t" --json "${RUNS[@]}"
  run "$LOGS/torch_infer_t$t.jsonl" "${TORCH_ENV[@]}" "${PEER_ENV[@]}" "$PY" "$BENCH/torch_tinylm.py" \
    --only infer --threads "$t" "${RUNS[@]}"
done
echo "# loadavg after:  $(cat /proc/loadavg)"
echo
"$PY" "$BENCH/compare_report.py" "$LOGS" $THREADS
