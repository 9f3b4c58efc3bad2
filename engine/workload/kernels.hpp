#pragma once
// The kernels one transformer block launches on one rank, forward and backward, as the
// scenario's training stack (scenario::Stack) writes the block. Each list follows the stack's
// public code; the comments in kernels.cpp name file and function. GEMM FLOPs equal the
// workload's FLOP count (units.hpp); what differs between stacks is the memory-bound traffic
// between the GEMMs and the number of launches:
//   megatron         Megatron-Core TransformerLayer with Transformer Engine modules: the norm
//                    fused into the next linear (TELayerNormColumnParallelLinear), one QKV GEMM,
//                    TE's fused RoPE, fused SwiGLU/GeLU, fused bias-dropout-add, TE attention;
//   megatron-legacy  Megatron-LM's ParallelTransformerLayer with apex: a fused norm kernel, one
//                    QKV GEMM, RoPE and SwiGLU in plain torch ops, jit-fused bias-GeLU and
//                    bias-dropout-add, copies to flash-attn's layout and back;
//   pytorch          torchtitan's TransformerBlock (HuggingFace's Llama and DeepSpeed's modules
//                    run the same ops), every op its own kernel: RMSNorm as ATen's composite
//                    rms_norm (fp32 upcast, pow, mean, rsqrt, mul, cast, weight), separate q, k,
//                    v GEMMs, RoPE in complex fp32, repeat_kv copies for grouped-query attention;
//   + compile        the pytorch graph fused as torch.compile's Inductor does (kernel_graph.hpp).
// Backward lists follow autograd's formulas (tools/autograd/derivatives.yaml) for the eager
// ops and the frameworks' own backward kernels for the fused ones.
// Not counted: kernels of O(tokens) or O(hidden) bytes (row statistics, bias gradients'
// second pass), dropout (p = 0 in today's recipes), communication (the plan's collectives).
#include <array>
#include <vector>

#include "engine/scenario/scenario.hpp"
#include "engine/workload/kernel_graph.hpp"

namespace stratagem::workload {

/// The eager attention core's two GEMMs (what selective recomputation reruns).
inline constexpr const char* kScoresGemm = "q·kᵀ";
inline constexpr const char* kValuesGemm = "probs·v";

/// Parts of an MoE block (Kernel::part), in forward order: the plan's chain puts the token
/// dispatch between kMoePrePart and kExpertsPart (kSharedPart beside it) and the combine
/// between kExpertsPart and kMoePostPart. A dense block's kernels all carry part 0 (its chain
/// does not read them).
enum BlockPart : int {
  kAttentionPart = 0,  ///< the attention half, up to and with its residual add
  kMoePrePart,         ///< the MLP's norm, the router, the permutation of the routed copies
  kSharedPart,         ///< the shared experts
  kExpertsPart,        ///< the routed experts (and the regrouping of their rows)
  kMoePostPart,        ///< the un-permutation (weighted sum of each token's copies), residual
  kBlockPartCount
};

struct BlockKernels {
  std::vector<Kernel> forward;
  std::vector<Kernel> backward;
  /// What the forward keeps for backward, by part (OpGraph::kept_bytes).
  std::array<double, kBlockPartCount> saved{};
};

/// One block's kernels on one tensor- and context-parallel rank for one micro-batch. Throws
/// SpecError for a measured or quick-form model (no block shape to list).
BlockKernels block_kernels(const scenario::Scenario& s,
                           scenario::BlockKind kind = scenario::BlockKind::dense);

/// Totals of a kernel list, for the plan's compute ops.
struct KernelTotals {
  double gemm_flops = 0;
  double attention_flops = 0;
  double gemm_bytes = 0;    ///< GEMMs' operands and outputs
  double memory_bytes = 0;  ///< memory-bound kernels' traffic
  int launches = 0;
};
KernelTotals totals(const std::vector<Kernel>& kernels);

}  // namespace stratagem::workload
