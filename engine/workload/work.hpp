#pragma once
// The workload's vocabulary: what a unit of the model is (parameters, FLOPs, activation
// bytes per micro-batch) and what one piece of compute costs (GEMM and fused-attention FLOPs,
// memory-bound bytes, GEMM shape, launches). The plan's compute ops carry a Compute; passes,
// memory, cost models, the runtime and measuring tools read these without knowing the plan
// builder (docs/architecture.md).
#include <cstdint>
#include <string>

#include "engine/scenario/scenario.hpp"
#include "engine/workload/gemm_mix.hpp"

namespace stratagem::workload {

enum class Phase : std::uint8_t {
  forward,
  backward,
  backward_input,
  backward_weight,
  recompute,
  optimizer,
  loss_scale_check
};
const char* to_string(Phase p);

/// all_to_all: each of the n ranks sends 1/n of its buffer to every other (expert-parallel
/// token dispatch and combine; `bytes` is the rank's whole buffer, its own 1/n included).
enum class CollectiveKind : std::uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  all_to_all
};
const char* to_string(CollectiveKind k);

struct Compute {
  Phase phase = Phase::forward;
  int stage = 0;
  int chunk = 0;        ///< virtual pipeline chunk on this rank (interleaved)
  int microbatch = -1;  ///< -1 for per-step ops (optimizer, loss-scale check)
  int unit_begin = 0;   ///< units [unit_begin, unit_end): 0 embedding, 1..L blocks, L+1 head
  int unit_end = 0;
  double flops = 0;  ///< GEMM FLOPs in `dtype`
  /// GEMM FLOPs that stay in 16 bits when `dtype` is fp8 (the LM head, as Transformer Engine
  /// and torchao leave the output layer in bf16).
  double flops_16bit = 0;
  /// FLOPs the fused attention kernel executes (flash attention; eager attention's are GEMMs
  /// in `flops`), at the GPU's attention efficiency in the 16-bit dtype.
  double attention_flops = 0;
  double bytes = 0;     ///< HBM bytes of its memory-bound (non-GEMM) kernels
  double gemm_dim = 0;  ///< smallest GEMM dimension (efficiency curve); 0: not a GEMM
  /// The GEMMs behind `flops` (and `flops_16bit`) by shape, each costed at its own efficiency
  /// (gemm_mix.hpp); null: every GEMM at gemm_dim's.
  GemmMixPtr gemms;
  /// HBM bytes its GEMMs read and write at least (inputs, weights, outputs once each): the
  /// memory side of each GEMM's roofline, which a formula efficiency curve does not include.
  double gemm_bytes = 0;
  /// The fused attention kernel's shape: key length, head dimension, causal mask, kernel.
  double attention_seq = 0;
  double head_dim = 0;
  bool causal = true;
  scenario::AttentionKernel attention_kernel = scenario::AttentionKernel::fa2;
  int kernels = 1;  ///< kernel launches (launch overhead)
  scenario::DType dtype = scenario::DType::fp32;
  bool on_host = false;  ///< runs on the CPU (optimizer offload)
  double params = 0;     ///< optimizer: parameters it updates on this rank
};

/// A model unit: the granularity of compute ops and of parameter sharding.
struct Unit {
  std::string name;   ///< "embedding", "block 3", "head"
  double params = 0;  ///< parameters this unit owns on its stage
  /// Parameters a gather of this unit brings (ZeRO-3/FSDP): its own, and for the LM head of a
  /// tied model on one stage whose parameters are resharded after each use, also the word
  /// table it borrows from the embedding (gathered again, as DeepSpeed's ZeRO-3 does).
  double gather_params = 0;
  double fwd_flops = 0;             ///< forward GEMM FLOPs per micro-batch
  double attn_fwd_flops = 0;        ///< forward FLOPs of the fused attention kernel (flash)
  double act_bytes = 0;             ///< activations kept for backward per micro-batch
  double full_act_bytes = 0;        ///< activations without recomputation (what recompute rebuilds)
  double recompute_flops = 0;       ///< GEMM FLOPs a recompute op spends per micro-batch
  double recompute_attn_flops = 0;  ///< fused-attention FLOPs it spends (full recompute)
  double gemm_dim = 0;
  /// Its GEMMs by shape (gemm_mix.hpp): forward, backward (input and weight gradients), and
  /// what a recompute reruns; null for a measured model's units.
  GemmMixPtr fwd_gemms, bwd_gemms, recompute_gemms;
  /// Bytes its forward GEMMs move (e·(MK + KN + MN) summed over them); a backward's input-
  /// and weight-gradient GEMMs each touch the same three matrices: twice this.
  double fwd_gemm_bytes = 0;
  double attention_seq = 0;  ///< keys each query attends over (the sequence)
  double head_dim = 0;
  bool causal = true;
  double linear_params = 0;  ///< its linear layers' weights (what fp8 training casts)
  /// Of `params`, the routed experts' (an MoE block's local experts): their gradients are
  /// reduced, and their states sharded, over the expert-data-parallel group, the rest over
  /// the data-parallel one.
  double expert_params = 0;
  /// From the training stack's kernel list (kernels.hpp; blocks of shaped models): the
  /// memory-bound kernels' bytes and every kernel's launch, forward and backward, and the
  /// backward GEMMs' operand bytes. Without one (`kernel_list` false) the work uses the
  /// activation bytes and fixed launch counts.
  bool kernel_list = false;
  double fwd_bytes = 0, bwd_bytes = 0, bwd_gemm_bytes = 0;
  int fwd_launches = 0, bwd_launches = 0;
  /// Of its backward, the weight-gradient GEMMs (dyᵀ·x of each linear layer): what a
  /// zero-bubble schedule's W pass runs (Phase::backward_weight), their FLOPs, operand bytes,
  /// launches and shapes. The input-gradient pass (Phase::backward_input) runs the rest of the
  /// backward: its GEMMs are `input_gemms`, and everything else (attention backward, memory-
  /// bound kernels, norm weight gradients) stays in it.
  double wgrad_flops = 0, wgrad_gemm_bytes = 0;
  int wgrad_launches = 0;
  GemmMixPtr wgrad_gemms, input_gemms;
};

}  // namespace stratagem::workload
