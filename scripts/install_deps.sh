#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12's packages. Idempotent: packages
# already present are skipped, so a warm machine spends no time here.
set -euo pipefail

packages=(
  g++ cmake ninja-build make pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  clang-14 libclang-rt-14-dev   # libFuzzer and sanitizer runtimes for the fuzz targets
  libonnx-dev libprotobuf-dev   # ONNX protobuf classes for the importer (src/onnx/)
  libonnx-testdata              # ONNX's backend node tests: the conformance suite
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
