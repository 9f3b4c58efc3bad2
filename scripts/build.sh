#!/usr/bin/env bash
# Configures (once) and builds Stratagem in ./build (Release, ccache when present).
set -euo pipefail
cd "$(dirname "$0")/.."
# Let ccache reuse objects across clones in other folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j"$(nproc)"
