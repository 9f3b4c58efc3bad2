#pragma once
// fp8 training recipes (strategy.fp8_recipe): how each GEMM operand is scaled, which kernels
// quantize it (engine/workload/block_graphs.hpp lowers them per stack) and how fast the GEMM
// runs against per-tensor scaling on the same GPU.
#include <string>

#include "engine/scenario/stack.hpp"

namespace stratagem::scenario {

/// How fp8 GEMMs scale their operands. `tensorwise`: one scale per tensor (Transformer Engine's
/// delayed or current scaling, torchao's tensorwise); `rowwise`: one per row (torchao);
/// `blockwise`: 1×128 activation and 128×128 weight tiles (DeepSeek-V3, Transformer Engine's
/// Float8BlockScaling); `mxfp8`: 32-element blocks with e8m0 scales (Blackwell's MX formats).
enum class Fp8Recipe { tensorwise, rowwise, blockwise, mxfp8 };
const char* to_string(Fp8Recipe r);

/// Parses "tensorwise", "rowwise", "blockwise", "mxfp8"; SpecError at `path` otherwise.
Fp8Recipe parse_fp8_recipe(const std::string& name, const std::string& path);

/// Which recipes a stack runs: Transformer Engine (megatron) has per-tensor (delayed or current
/// scaling), Float8BlockScaling and MXFP8BlockScaling, not rowwise; torchao (the eager stacks)
/// has tensorwise, rowwise (torchao.float8) and mxfp8 (torchao.prototype.mx_formats), its
/// blockwise training is a prototype Stratagem does not model.
bool stack_runs(Stack s, Fp8Recipe r);

/// Bytes per element of a block-scaled fp8 tensor: the fp8 value and its share of the scales
/// (an fp32 scale per 128 elements for blockwise, an e8m0 one per 32 for mxfp8: the same).
constexpr double kBlockScaledFp8Bytes = 1.0 + 4.0 / 128;

/// The fp8 GEMM's throughput under the recipe as a fraction of the per-tensor-scaled GEMM on
/// the same GPU (the preset's fp8 curve is cuBLASLt's per-tensor _scaled_mm):
///  * tensorwise, rowwise: 1. torchao's rowwise forward GEMM (PyTorch's CUTLASS kernel, fast
///    accumulation, scales in the epilogue) is taken at the per-tensor rate, as torchao's own
///    roofline does (torchao/testing/training/roofline_utils.py get_individual_gemm_time_sympy);
///    its backward GEMMs run cuBLAS's per-tensor kernel and rescale the output in a separate
///    kernel (torchao/float8/float8_ops.py addmm_float8_unwrapped), which the kernel list
///    carries, pytorch/ao#2185 measured the two as "nearly identical".
///  * blockwise: 0.82 — Transformer Engine's GEMM profiling guide (docs/examples/gemm_profiling/
///    gemm_profiling.rst, H200 NVL, hidden 4096, MLP 16384, 15,872 tokens, per layer):
///    current scaling 20.285 ms with its quantization, 16.785 ms without; Float8BlockScaling
///    22.882 ms with its quantization. Current scaling's quantization (3.50 ms) is an amax
///    pass and a cast writing the operand and its transpose (6 bytes per bf16 element); the
///    block quantizer is one pass (4 bytes): 2.33 ms, leaving 20.55 ms of GEMM, 16.785 / 20.55
///    = 0.82 (0.73 to 0.87 for a block quantization of 0 to 3.50 ms).
///  * mxfp8: 0.95 — the same guide on B300 without quantization: per-tensor 6.812 ms, MXFP8
///    7.161 ms per layer.
/// Blockwise on Blackwell runs as MXFP8 GEMMs (Transformer Engine converts the scales:
/// the guide's note), so it takes the mxfp8 rate on a GPU with MX formats.
double fp8_gemm_rate(Fp8Recipe r, bool mx_formats);

}  // namespace stratagem::scenario
