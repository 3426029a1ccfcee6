#!/usr/bin/env bash
# build.sh DIR [cmake options...]: configure (once) and build Volta into DIR with Ninja.
set -euo pipefail
dir=$1
shift
mkdir -p "$dir"
cmake -S "$(dirname "$0")/.." -B "$dir" -G Ninja "$@" >"$dir/configure.log" 2>&1 || {
  cat "$dir/configure.log"
  exit 1
}
ninja -C "$dir" -j"$(nproc)"
