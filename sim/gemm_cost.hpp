#pragma once
// What fraction of the GPU's GEMM peak one GEMM of shape m×k by k×n reaches:
//   efficiency = curve(min(m, n, k)) · waves(m, n, k)
// The curve (GpuSpec::matmul_efficiency and its per-dtype variants) is the fraction a GEMM
// with that smallest dimension reaches when every SM is busy: its tile padding, prologue and
// epilogue, operand loads. `waves` is the wave quantization the curve cannot know, because it
// depends on the SM count (NVIDIA, "Matrix Multiplication Background User's Guide",
// DU-09799-001, ch. 3.2 "Wave Quantization"): the output is cut into tiles, one thread block
// each, and the tiles run in waves of one per SM, so a GEMM of `tiles` tiles takes
// ceil(tiles / SMs) waves and keeps tiles / (waves · SMs) of the SMs busy on average.
// cuBLAS picks the kernel per shape; this takes the best of the large tiles the guide lists as
// cuBLAS's most efficient (ch. 2.3: 256×128, 128×256, 128×128) and, when the tiles do not fill
// one wave, splits K over more blocks (split-K, and the stream-K kernels of Hopper's cuBLAS)
// while each split keeps at least kMinSplitK of K.
#include "engine/scenario/cluster.hpp"

namespace stratagem::sim {

/// Each split of a split-K GEMM keeps at least this much of K (two 64-deep k-blocks, the K
/// tile of Hopper's 16-bit GEMM kernels).
inline constexpr double kMinSplitK = 128;

/// Average fraction of the GPU's `sms` SMs an m×n×k GEMM keeps busy over its waves; 1 when
/// `sms` is 0 (not given).
double wave_utilization(double m, double n, double k, int sms);

}  // namespace stratagem::sim
