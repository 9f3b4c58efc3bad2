#!/usr/bin/env bash
# Installs what Stratagem needs on Debian 12 (run as root; idempotent: apt skips what is
# already installed).
#   bash scripts/install-deps.sh        everything: the simulator, LibTorch (CPU, 1.13) with
#                                       Gloo for real runs, the viewer, tests and benchmarks
#   bash scripts/install-deps.sh --sim  only what the `stratagem` CLI and its simulator need
# CUDA/NCCL are used when present at /usr/local/cuda but never installed here.
set -euo pipefail
sim=(build-essential cmake ninja-build ccache pkg-config nlohmann-json3-dev libyaml-cpp-dev
     libcli11-dev)
rest=(git libgtest-dev libbenchmark-dev libtorch-dev libgloo-dev libopenblas0-pthread
      libimgui-dev libglfw3-dev libstb-dev libgl1-mesa-dri xvfb xauth)
case "${1:-}" in
  "") packages=("${sim[@]}" "${rest[@]}") ;;
  --sim) packages=("${sim[@]}") ;;
  *)
    echo "scripts/install-deps.sh: unknown option '$1' (use --sim or nothing)" >&2
    exit 2
    ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
