#!/usr/bin/env bash
# gpu_ab.sh PACK.tar.xz [OPS]: compares the builds scripts/gpu_pack.sh packed, on a GPU machine, in
# one call. For every build: the GPU-sized GPT's training step at run-to-run (ms, median of 30
# steps; the builds alternate, VOLTA_AB_ROUNDS rounds), sha256 of 20-step checkpoints of both
# training configs (equal hashes: the same bits), the op-test harness on OPS (default attention,
# attention_grad; test and grad modes), and the profile's mean time of OPS; then PyTorch eager's
# step on the same GPU. Writes VOLTA_AB_OUT/summary.txt (default build/gpu_ab) and prints it.
set -uo pipefail
pack=$(realpath "${1:?usage: gpu_ab.sh PACK.tar.xz [OPS]}")
cd "$(dirname "$0")/.." || exit 1
ops=${2:-attention,attention_grad}
out=${VOLTA_AB_OUT:-build/gpu_ab}
rounds=${VOLTA_AB_ROUNDS:-3}
device=${VOLTA_AB_DEVICE:-cuda}
model=${VOLTA_AB_MODEL:---layers 6 --heads 6 --channels 384 --context 256 --batch 64}
x=$out/builds
rm -rf "$x"
if ! mkdir -p "$x" || ! tar -xJf "$pack" -C "$x"; then
  echo "gpu_ab.sh: cannot unpack $pack" >&2
  exit 1
fi
LD_LIBRARY_PATH=$(realpath "$x")/lib:${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH
mapfile -t builds < <(find "$x" -mindepth 1 -maxdepth 1 -type d ! -name lib -printf '%f\n' | sort)
s=$out/summary.txt
{
  echo "# gpu_ab.sh $(date -u +%Y-%m-%dT%H:%M:%SZ): ${builds[*]} on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "device $device")"
  for r in $(seq "$rounds"); do
    for b in "${builds[@]}"; do
      # shellcheck disable=SC2086
      t=$("$x/$b/volta" --deterministic run-to-run bench train --device "$device" $model --steps 30 --warmup 5 2>&1 | grep -o "[0-9.]* ms/step")
      echo "step round $r $b: ${t:-FAILED}"
    done
  done
  for b in "${builds[@]}"; do
    h=""
    for cfg in "gpt:$model" "shakespeare:"; do
      c=${cfg%%:*}
      # shellcheck disable=SC2086
      timeout 120 "$x/$b/volta" --deterministic run-to-run train --device "$device" --recipe shakespeare-char ${cfg#*:} --steps 20 \
        --eval-every 10 --eval-iters 2 --out "$x/$b.ck_$c" >/dev/null 2>&1
      ck="$x/$b.ck_$c/last.safetensors"
      if [ -f "$ck" ]; then h="$h $c=$(sha256sum <"$ck" | cut -c1-16)"; else h="$h $c=MISSING"; fi
    done
    echo "bits $b:$h"
    for m in test grad; do
      timeout 120 "$x/$b/tests/volta_op_tests" -b "$device" -m $m -o "$ops" >"$x/$b.harness_$m.txt" 2>&1
      echo "harness $b $m: $(tail -1 "$x/$b.harness_$m.txt")"
      grep -E "^FAIL" "$x/$b.harness_$m.txt" | head -3 | cut -c1-240
    done
    # shellcheck disable=SC2086
    "$x/$b/volta" --deterministic run-to-run bench train --device "$device" $model --steps 3 --warmup 2 --profile-summary >"$x/$b.profile.txt" 2>&1
    echo "profile $b, mean us: $(grep -E "^(${ops//,/|}) " "$x/$b.profile.txt" | awk '{printf "%s %s  ", $1, $5}')"
  done
  if [ "$device" = cuda ]; then
    # shellcheck disable=SC2086
    timeout 180 python3 bench/gpu_peer.py train --mode eager --attention sdpa $model --steps 30 --warmup 10 2>&1 | tail -1
  fi
  true
} | tee "$s"
