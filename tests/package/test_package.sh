#!/usr/bin/env bash
# The package as a user meets it (ctest: package.*): install the build tree into a prefix,
# build examples/user_project against it with find_package(Stratagem), run it on 1 and 2
# processes, check it needs no CUDA library, build the same program with pkg-config, and
# configure a project that adds Stratagem with add_subdirectory.
# Usage: test_package.sh BUILD_DIR SOURCE_DIR STEP  (STEP: cmake | pkg-config | subdirectory)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
step=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1
fi
fail() { echo "FAIL: $*" >&2; exit 1; }

# No CUDA runtime or NCCL in a CPU program's dependencies.
check_no_cuda() {
  if ldd "$1" | grep -E 'libcudart|libnccl|libcuda\.so'; then
    fail "$1 needs CUDA libraries"
  fi
}

# One process, then two over Gloo: both print both epochs' held-out error.
check_runs() {
  local out
  out=$("$1") || fail "$1 alone exited $?"
  grep -q "epoch 2 held-out mse .* (1 processes)" <<<"$out" || fail "one process printed: $out"
  out=$("$work/prefix/bin/stratagem" launch --num_processes 2 --cpu --main_process_port 0 -- "$1") ||
    fail "launch of $1 exited $?"
  grep -q "epoch 2 held-out mse .* (2 processes)" <<<"$out" || fail "two processes printed: $out"
  [[ $(grep -c "held-out" <<<"$out") == 2 ]] || fail "expected 2 lines (main process only): $out"
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
case "$step" in
  cmake)
    cmake -S "$src/examples/user_project" -B "$work/user" -G Ninja "${launcher[@]}" \
      -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
    cmake --build "$work/user" >/dev/null
    check_no_cuda "$work/user/train"
    check_runs "$work/user/train"
    if [[ -f "$work/prefix/lib/libstratagem_nccl.a" ]]; then
      # A GPU program asks for the nccl component; its link line carries the backend, the
      # option that registers it, CUDA's runtime and NCCL.
      mkdir -p "$work/gpu"
      sed -e 's/find_package(Stratagem REQUIRED)/find_package(Stratagem REQUIRED COMPONENTS nccl)/' \
        -e 's/Stratagem::accelerate)/Stratagem::accelerate Stratagem::nccl)/' \
        -e "s|train.cpp|$src/examples/user_project/train.cpp|" \
        "$src/examples/user_project/CMakeLists.txt" >"$work/gpu/CMakeLists.txt"
      cmake -S "$work/gpu" -B "$work/gpu/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
        >/dev/null
      link=$(grep -A6 "^build train:" "$work/gpu/build/build.ninja")
      for want in undefined=stratagem_nccl_backend_anchor libstratagem_nccl.a libcudart libnccl; do
        grep -q -- "$want" <<<"$link" || fail "the nccl component's link line lacks $want"
      done
    fi
    ;;
  pkg-config)
    export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
    cxx=${CXX:-c++}
    # shellcheck disable=SC2046
    ${launcher:+ccache} "$cxx" -o "$work/train" "$src/examples/user_project/train.cpp" \
      $(pkg-config --cflags --libs stratagem)
    check_no_cuda "$work/train"
    check_runs "$work/train"
    ;;
  subdirectory)
    mkdir -p "$work/sub"
    cat >"$work/sub/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(regression LANGUAGES CXX)
add_subdirectory("$src" stratagem)
add_executable(train "$src/examples/user_project/train.cpp")
target_link_libraries(train PRIVATE Stratagem::accelerate)
CMAKE
    cmake -S "$work/sub" -B "$work/sub/build" -G Ninja >"$work/configure.log" 2>&1 ||
      { cat "$work/configure.log"; fail "add_subdirectory configure"; }
    # Configured and generated: every target the user's program links resolved. No tests,
    # benchmarks or viewer inside someone else's project; C++20 reaches the user's target.
    ! grep -q "test_spec\|stratagem_bench" "$work/sub/build/build.ninja" ||
      fail "tests or benchmarks configured inside a user project"
    grep -A8 "^build CMakeFiles/train.dir/.*train.cpp.o:" "$work/sub/build/build.ninja" |
      grep -Eq -- "-std=(c|gnu)\+\+20" ||
      fail "C++20 did not reach the user's target"
    grep -A8 "^build CMakeFiles/train.dir/.*train.cpp.o:" "$work/sub/build/build.ninja" |
      grep -q "torch/csrc/api/include" || fail "LibTorch's headers did not reach the user's target"
    ;;
  *) fail "unknown step $step" ;;
esac
echo "package $step: ok"
