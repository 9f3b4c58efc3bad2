#pragma once
// Megatron-LM tensor parallelism (Shoeybi et al. 2019) and sequence parallelism (Korthikanti
// et al. 2022) inside one unit of the real runtime, on one micro-batch. The unit's parameters
// are one TP rank's share (model_layout.hpp); the plan splits the unit's compute where
// Megatron communicates (engine/workload/tp_chain.hpp) and the executor hands this class
// the chain's ops one by one: a compute piece runs the unit's work up to its next collective,
// a collective takes the tensor this class names (`collective_input`) and gives back the
// reduced or gathered one (`collective_done`). The unit's program mirrors the plan's chain
// and refuses an op that does not fit it, so a plan and a runtime that disagree fail loudly.
//
// Megatron's f/g operators are cuts in the autograd graph: every tensor a collective produces
// (forward) or consumes the gradient of (backward) is a leaf, and backward runs segment by
// segment with torch::autograd::backward accumulating into the leaves' gradients.
//   block   forward  [ln1] (SP: all-gather) [QKV, core, projection] all-reduce | reduce-
//                    scatter [+ residual, ln2] (SP: all-gather) [MLP-in, act, MLP-out]
//                    all-reduce | reduce-scatter [+ residual]; backward the mirror image
//                    (the input gradients of the column-parallel layers are reduced, under SP
//                    the row-parallel outputs' gradients gathered)
//   embedding        vocab-parallel lookup (ids outside the rank's rows give 0), all-reduce
//                    (+ learned positions, SP: the rank's part of the sequence) or, under SP
//                    without learned positions, reduce-scatter; backward (SP) all-gathers
//   head             [ln_f] (SP: all-gather) vocab-parallel logits, then the cross-entropy
//                    as Megatron's vocab_parallel_cross_entropy: all-reduce (max) of the
//                    logit maximum, all-reduce of the target logit, all-reduce of Σ exp;
//                    padded vocabulary columns are masked out, so any tp trains the same
//                    model as tp = 1; backward reduces the gradient of the head's input
// Activations under SP are [b, s/tp, h], the rank's contiguous part of each sequence;
// collectives along the sequence act on sequence-major copies so each rank's part is one
// contiguous block. Norms and residual adds that Megatron runs between two collectives
// (between a reduce-scatter and the next all-gather) run when the collective that needs
// their result starts, or after the chain's last op (finish_chain).
#include <cstddef>
#include <functional>
#include <vector>

#include <ATen/Tensor.h>

#include "engine/comm/communicator.hpp"
#include "engine/plan/plan.hpp"
#include "engine/runtime/model_units.hpp"
#include "engine/workload/tp_chain.hpp"

namespace stratagem::runtime {

/// What the next collective of a unit's chain sends: a fresh contiguous tensor (an
/// all-reduce reduces it in place; a reduce-scatter's output is 1/tp of it, an
/// all-gather's tp times it, ranks' blocks in TP-group order).
struct TpSend {
  comm::ReduceOp op = comm::ReduceOp::sum;
  at::Tensor input;
};

class TpUnitRun {
 public:
  /// Starts `unit`'s forward on one micro-batch: `params` its flat parameters (gathered when
  /// sharded), `borrowed` the word table of a tied head on the embedding's stage, `input`
  /// tokens [b, s] (embedding) or the boundary hidden states, `targets` [b, s] (head).
  /// Full recomputation runs the forward without a graph and keeps only the input.
  /// `overlap`: which of a block's collectives the plan runs beside a compute piece of their
  /// own (workload::tp_overlap): a weight gradient beside an input gradient's reduction, under
  /// async TP a GEMM beside each all-gather and reduce-scatter. Here that piece has nothing
  /// left to do: LibTorch's autograd computes a segment's gradients together, and the GEMM
  /// that consumes a gathered tensor (or produces a reduced one) runs with the piece after
  /// (before) the collective.
  TpUnitRun(const GptUnits& units, int unit, const at::Tensor& params, const at::Tensor& borrowed,
            const at::Tensor& input, const at::Tensor& targets, scenario::Recompute recompute,
            workload::TpOverlap overlap);
  TpUnitRun(const TpUnitRun&) = delete;
  TpUnitRun& operator=(const TpUnitRun&) = delete;

  enum class Phase { forward, recompute, backward };
  Phase phase() const { return phase_; }

  // ---- the plan's ops of the current chain, in order --------------------------------------
  void compute();
  TpSend collective_input(plan::CollectiveKind kind);
  void collective_done(const at::Tensor& result);
  /// After the plan's last op of the chain: what remains runs (a residual add, a norm's
  /// backward: no communication left).
  void finish_chain() { run_stages(); }
  bool chain_done() const { return at_ == program_.size(); }

  // ---- forward -------------------------------------------------------------------------------
  at::Tensor output() const;  ///< hidden states in boundary dtype (not the head)
  double loss() const { return loss_; }
  /// Full recomputation: the forward chain again, with a graph (its collectives included).
  void begin_recompute(const at::Tensor& params);
  /// Selective recomputation: rebuilds the attention core (local, no communication).
  void recompute_core();
  /// Under full recomputation, once the forward chain is over, keeps only the input (else
  /// nothing).
  void drop_forward_state();

  // ---- backward ------------------------------------------------------------------------------
  /// `grad_output`: gradient of the output (boundary dtype) or, for the head, the factor the
  /// loss is scaled by.
  void begin_backward(const at::Tensor& grad_output);
  /// After the backward chain: the parameter (and borrowed table) gradients and the input's.
  UnitGrads grads();

 private:
  struct Item {
    std::function<void()> stage;  ///< compute; empty for a collective
    plan::CollectiveKind kind = plan::CollectiveKind::all_reduce;
    comm::ReduceOp op = comm::ReduceOp::sum;
    std::function<at::Tensor()> send;
    std::function<void(const at::Tensor&)> receive;
    /// A collective the plan runs beside a compute piece of its own (Megatron's weight
    /// gradient); `beside_ran` once the executor has run that piece.
    bool beside = false, beside_ran = false;
  };
  enum class Kind { embedding, block, head };

  void run_stages();
  void stage(std::function<void()> f, bool forward);
  void collective(plan::CollectiveKind kind, std::function<at::Tensor()> send,
                  std::function<void(const at::Tensor&)> receive,
                  comm::ReduceOp op = comm::ReduceOp::sum);
  /// The plan's piece beside a collective in flight or just done, if not yet run.
  Item* owed_beside_piece();
  void start_forward();
  void forward_embedding();
  void forward_block();
  void forward_head();
  void backward_embedding();
  void backward_block();
  void backward_head();

  // Tensor helpers: leaves, wire copies, sequence-major layout.
  at::Tensor leaf(const at::Tensor& t) const;
  at::Tensor wire(const at::Tensor& t) const;  ///< fresh contiguous copy in boundary dtype
  at::Tensor seq_major(const at::Tensor& t) const;
  at::Tensor from_seq_major(const at::Tensor& flat, std::int64_t tokens) const;
  at::Tensor from_batch_major(const at::Tensor& flat) const;
  at::Tensor grad_of(const at::Tensor& leaf) const;
  at::Tensor sequence_part(const at::Tensor& full) const;
  static void backprop(const at::Tensor& out, const at::Tensor& grad);

  const GptUnits& u_;
  const UnitLayout& layout_;
  int unit_;
  Kind kind_;
  scenario::Recompute recompute_;
  Phase phase_ = Phase::forward;
  bool graph_ = true;
  bool sp_ = false;
  workload::TpOverlap overlap_;  ///< a block's; none for the embedding and head
  std::int64_t b_ = 0, s_ = 0, h_ = 0;
  std::vector<Item> program_;
  std::size_t at_ = 0;

  at::Tensor params_, borrowed_, input_, targets_;  ///< as given (input kept for recompute)
  at::Tensor P_, B_, X_;                            ///< leaves: params, borrowed table, input
  at::Tensor grad_out_;
  at::Tensor got_[4];  ///< gradients the backward chain's collectives delivered
  double loss_ = 0;
  // block
  at::Tensor xn1_, XN1_, po_, O_, a_, A_, an_, AN_, pd_, D_, y_;
  at::Tensor q_, k_, v_, qi_, ki_, vi_, core_in_, core_out_;  ///< selective recomputation
  // embedding
  at::Tensor e_, W_, x_;
  // head
  at::Tensor xn_, XN_, logits_, m_, shifted_, pred_, T_, se_, S_, loss_t_;
  at::Tensor out_;
};

}  // namespace stratagem::runtime
