#pragma once
// Tensor- and context-parallel chains (tp > 1 or cp > 1): Megatron-LM's tensor
// parallelism (Shoeybi et al. 2019) and sequence parallelism (Korthikanti et al. 2022) inside
// each unit. The units' FLOPs, parameters and activation bytes are already one TP rank's
// (make_units); a chain splits each compute step where Megatron communicates, and the plan's
// pass (engine/plan/tensor_parallel.hpp) puts the collectives, on the `tp` stream, on the
// critical path (each op of the chain waits for the previous one; none is overlapped with
// compute but as the Megatron stacks do below):
//   block forward    [attention: norm, QKV (column-parallel), core, projection (row-parallel)]
//                    all-reduce, [MLP: norm, MLP-in (column), activation, MLP-out (row)]
//                    all-reduce
//   block backward   [MLP backward] all-reduce (input gradient of MLP-in), [attention
//                    backward] all-reduce (input gradient of QKV)
//   embedding        forward: all-reduce of the vocab-parallel lookup; backward: nothing
//   head             forward: [norm, vocab-parallel LM head] and three fp32 all-reduces of
//                    s·b values for the vocab-parallel cross-entropy (max logit, target logit,
//                    sum of exponentials); backward: all-reduce of its input gradient
// Each all-reduce carries the s·b·h activation in the compute dtype. With sequence
// parallelism each becomes an all-gather before the column-parallel part and a reduce-scatter
// after the row-parallel part (forward: all-gather, [attention], reduce-scatter, all-gather,
// [MLP], reduce-scatter; backward the reverse pairs), the embedding's all-reduce a
// reduce-scatter without learned positions (with them it stays an all-reduce followed by a
// split, as Megatron-core does; backward: an all-gather either way) and the head gathers its
// input (backward: reduce-scatter); norms, dropout and residuals then run on s/tp tokens.
// The gradients of the norms and row-parallel biases, computed from a part of the sequence
// on each rank, are all-reduced over the TP group after the data-parallel gradient sync and
// before the optimizer step (Megatron's finalize_model_grads).
// Full recomputation reruns the forward chain; selective recomputation (the attention core
// only) needs no communication.
// Under the Megatron stacks (strategy.stack megatron, megatron-legacy) a block's backward
// reduces each column-parallel layer's input gradient beside the layer's weight-gradient GEMM,
// as Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication.backward
// (megatron/core/tensor_parallel/layers.py) and Transformer Engine's _Linear /
// _LayerNormLinear.backward (transformer_engine/pytorch/module/) do:
//   block backward   [MLP backward to MLP-in's data gradient] all-reduce ‖ [MLP-in weight
//                    gradient] [norm backward, attention backward to QKV's data gradient]
//                    all-reduce ‖ [QKV weight gradient] [norm backward]
// (under SP reduce-scatters, and the all-gathers before each half stay exposed).
// With strategy.async_tp (sequence parallelism; PyTorch's async TP, torch/distributed/
// _symmetric_memory fused_all_gather_matmul / fused_matmul_reduce_scatter, which torchtitan
// turns on with enable_async_tensor_parallel; Megatron-Core's tp_comm_overlap, Transformer
// Engine's userbuffers) every all-gather runs beside the GEMM that consumes it and every
// reduce-scatter beside the GEMM that produces it:
//   block forward    [norm] all-gather ‖ [QKV] [attention core] reduce-scatter ‖ [projection]
//                    [norm] all-gather ‖ [MLP-in] [activation] reduce-scatter ‖ [MLP-out]
//                    [residual]
//   block backward   all-gather ‖ [MLP-out data gradient] [the rest to MLP-in's data gradient]
//                    reduce-scatter ‖ [MLP-in weight gradient] [norm] all-gather ‖
//                    [projection data gradient] [the rest to QKV's data gradient]
//                    reduce-scatter ‖ [QKV weight gradient] [norm]
// Each overlapped pair costs the longer of the two: the decomposition into tp chunks (smaller
// GEMMs) is not charged. Left out: Megatron's all-gather of the saved norm output for the
// weight gradient under SP (it keeps the rank's part of the sequence and gathers it again
// beside the data-gradient GEMM), and the embedding's and head's overlap.
#include <array>
#include <optional>
#include <vector>

#include "engine/scenario/tensor_shapes.hpp"
#include "engine/workload/chain_piece.hpp"
#include "engine/workload/kernels.hpp"

namespace stratagem::workload {

/// Which of a block's TP collectives run beside a compute piece (see above); the runtime's
/// chains (engine/runtime/tp_units.hpp) follow the same rule.
struct TpOverlap {
  /// Backward: each column-parallel input gradient's reduction beside the layer's
  /// weight-gradient GEMM (the Megatron stacks, and async TP).
  bool reduce_beside_wgrad = false;
  /// strategy.async_tp: every all-gather and reduce-scatter of the block beside its GEMM.
  bool async = false;
};
TpOverlap tp_overlap(const scenario::StrategySpec& strategy);

/// The chains above for one scenario: unit 0 is the embedding, `head` the output unit, any
/// other a block; `forward` also for a full recompute. With context parallelism (cp > 1) a
/// block's attention half is [norm, QKV] [core ‖ K/V exchange] [projection] (backward: the
/// core's backward alongside the K/V all-gather and the dK/dV reduce-scatter;
/// context_ring.hpp).
class TpChains {
 public:
  explicit TpChains(const scenario::Scenario& scenario);
  const std::vector<TpPiece>& chain(int unit, bool head, bool forward) const;

 private:
  /// kind: 0 embedding, 1 head, 2 dense block, 3 MoE block.
  std::vector<TpPiece> make_chain(int kind, bool forward) const;
  std::array<std::vector<TpPiece>, 8> chains_;  ///< by kind × forward
  std::vector<TpPiece> attention_half(bool forward, const scenario::BlockSplit& split) const;
  /// An MoE block's MLP half (above).
  std::vector<TpPiece> moe_half(bool forward) const;
  bool tp_ = false, sp_ = false, learned_positions_ = false;
  TpOverlap overlap_;
  int cp_ = 1;
  scenario::BlockSplit split_;
  double act_bytes_ = 0, logit_bytes_ = 0, kv_bytes_ = 0;
  scenario::DType dtype_ = scenario::DType::bf16;
  // MoE blocks: which blocks, their split (the attention half's shares of the whole block,
  // from its kernel list), each part's shares of the forward and backward, and the dispatch.
  std::optional<scenario::MoeSpec> moe_;
  scenario::BlockSplit moe_split_;
  struct PartShares {
    double flops = 0, bytes = 0;
  };
  std::array<std::array<PartShares, kBlockPartCount>, 2> moe_parts_{};  ///< [forward][part]
  int ep_ = 1, etp_ = 1;
  bool allgather_ = false;
  double dispatch_bytes_ = 0;  ///< the rank's routed copies (alltoall) or tokens (allgather)
};

/// The compute op of one piece of a unit's chain: `unit`'s work (its whole forward or
/// backward on one micro-batch, units_work) scaled by the piece's shares (its GEMMs' bytes
/// with its share of the GEMM FLOPs), its launches spread evenly over the chain's `segments`
/// compute pieces (at least one each).
Compute tp_piece_work(const Compute& unit, const TpPiece& piece, int segments);
/// The compute pieces of a chain.
int compute_segments(const std::vector<TpPiece>& chain);

}  // namespace stratagem::workload
