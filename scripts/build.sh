#!/usr/bin/env bash
# Configures and builds Stratagem in ./build (Release, ccache when present).
#   bash scripts/build.sh              everything that can be built with what is installed
#   bash scripts/build.sh stratagem    only the named targets (here: the CLI and simulator)
# Configure runs every time (a few seconds), so parts whose packages were installed since the
# last build (LibTorch, the viewer, GoogleTest, Google Benchmark) are picked up.
set -euo pipefail
cd "$(dirname "$0")/.."
# Let ccache reuse objects across clones in other folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
mkdir -p build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > build/configure.log 2>&1 || {
  cat build/configure.log >&2
  echo "scripts/build.sh: configuring failed (log above, also in build/configure.log)" >&2
  exit 1
}
grep -- "-- stratagem:" build/configure.log || true
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
