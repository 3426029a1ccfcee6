#!/usr/bin/env bash
# gpu_deps.sh [DIR]: packs the build dependencies that a GPU machine without internet access may
# lack (GoogleTest's source, nlohmann-json and CLI11 headers with their CMake configs) from this
# machine's Debian packages into DIR (default .gpudeps, ignored by git), as a relocatable prefix.
# scripts/gpu_check.sh builds against it when the machine's own packages are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpudeps}
scripts/install_deps.sh >/dev/null
rm -rf "$dir"
mkdir -p "$dir/include" "$dir/share/cmake" "$dir/src"
cp -r /usr/include/nlohmann /usr/include/CLI "$dir/include/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$dir/share/cmake/"
cp -r /usr/src/googletest "$dir/src/"
du -sh "$dir"
