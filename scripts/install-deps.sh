#!/usr/bin/env bash
# Installs what Stratagem needs on Debian 12 (run as root; idempotent: apt skips what is
# already installed). LibTorch comes from Debian (CPU, 1.13); CUDA/NCCL are used when present
# at /usr/local/cuda but never installed here.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libgtest-dev libbenchmark-dev
  libtorch-dev libgloo-dev libopenblas0-pthread
  libimgui-dev libglfw3-dev libstb-dev libgl1-mesa-dri xvfb xauth
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
