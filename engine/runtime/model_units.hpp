#pragma once
// The GPT-style decoder of the real runtime, as separately runnable units: each plan Compute
// op over units [b, e) runs these forwards or backwards one unit at a time, on detached
// boundaries, so per-unit forward, backward and recomputation are real work.
//
// A unit computes with a flat parameter tensor (the unit's whole parameter buffer, or the
// gathered copy under ZeRO-3/FSDP); parameters are views into it, so its gradient comes back
// as one flat tensor the executor adds into its flat gradient buffer. Units never own
// parameters: the executor decides where they live.
//
// Precision (see Numerics): bf16 runs under autocast; fp16 runs under autocast on a GPU and,
// on a CPU (LibTorch 1.13 has neither fp16 matmul nor fp16 autocast there), computes in fp32
// from fp16 parameters and rounds every tensor that crosses a unit boundary through fp16, so
// messages, gradients and overflow behave as in fp16.
#include <cstdint>
#include <vector>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include "engine/runtime/model_layout.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::runtime {

struct Numerics {
  at::ScalarType param_dtype = at::kFloat;     ///< storage of parameters and gradients
  at::ScalarType boundary_dtype = at::kFloat;  ///< hidden states and their gradients between units
  bool autocast = false;                       ///< run forwards under autocast (to param_dtype)
  bool fp32_compute = false;                   ///< CPU fp16: compute in fp32 from fp16 storage
  bool fused_attention = false;  ///< attention 'flash': fused_attention.hpp, else eager kernels

  /// What the strategy's precision and attention mean on `device` (see the header comment).
  static Numerics of(const scenario::StrategySpec& strategy, const c10::Device& device);
};

/// What one unit's forward on one micro-batch keeps for its recompute and backward.
struct UnitActivation {
  int unit = 0;
  at::Tensor input;     ///< detached input: tokens (embedding) or hidden states (leaf)
  at::Tensor targets;   ///< head only
  at::Tensor params;    ///< the flat parameter leaf the graph was built on
  at::Tensor borrowed;  ///< head with tied embeddings on one stage: leaf over the word table
  at::Tensor output;    ///< graph output: hidden states, or the micro-batch's mean loss (head)
  /// Selective recomputation splits a block at its attention core: the projections before
  /// it and everything after it keep their graphs; the core (QKᵀ, softmax, ·V) is rebuilt.
  at::Tensor q, k, v;           ///< graph outputs of the projections (selective)
  at::Tensor q_in, k_in, v_in;  ///< leaves the core runs on (selective)
  at::Tensor core_in;           ///< leaf of the core's output feeding the rest (selective)
  at::Tensor core_out;          ///< the rebuilt core (selective, after recompute)
  bool needs_recompute = false;
  double loss = 0;  ///< head: the micro-batch's mean cross-entropy
};

struct UnitGrads {
  at::Tensor params;    ///< flat, the unit's numel, in the unit's compute dtype
  at::Tensor input;     ///< gradient of the hidden input (undefined for the embedding)
  at::Tensor borrowed;  ///< gradient of the borrowed word table (tied head on one stage)
};

class TpUnitRun;

class GptUnits {
 public:
  /// `head_owns_embedding_copy`: tied embeddings with pp > 1 (see model_layout.hpp). With
  /// `tp.size` > 1 the units hold one TP rank's share and run through TpUnitRun
  /// (tp_units.hpp); `sequence_parallel` splits their boundaries along the sequence.
  GptUnits(const scenario::ModelSpec& model, std::int64_t seq_len, bool head_owns_embedding_copy,
           Numerics numerics, c10::Device device, TpShard tp = {}, bool sequence_parallel = false);

  int count() const { return static_cast<int>(layouts_.size()); }
  const UnitLayout& layout(int unit) const { return layouts_[unit]; }
  std::int64_t numel(int unit) const { return layouts_[unit].numel; }
  const Numerics& numerics() const { return numerics_; }
  c10::Device device() const { return device_; }
  /// The head computes logits with the embedding's word table (tied, one stage).
  bool head_borrows_embedding() const;
  int head_unit() const { return count() - 1; }
  const TpShard& tp() const { return tp_; }
  bool tensor_parallel() const { return tp_.size > 1; }
  bool sequence_parallel() const { return sequence_parallel_; }
  const scenario::ModelSpec& model() const { return model_; }
  /// Tokens of a sequence a boundary tensor holds: s, or s/tp under sequence parallelism.
  std::int64_t boundary_tokens() const;

  /// Unit `unit`'s initial parameters in fp32 (on the CPU): the same on every rank and for
  /// every strategy, given the seed.
  at::Tensor initial_params(int unit, std::uint64_t seed) const;

  /// Forward of one unit. `params`: the unit's flat parameters; `borrowed`: the word table
  /// view of unit 0's parameters when head_borrows_embedding(); `input`: tokens [b, s]
  /// (embedding) or hidden states [b, s, h] in boundary dtype; `targets` [b, s] for the head.
  /// With recompute full (blocks), nothing but the input is kept; selective drops the
  /// attention core's graph.
  UnitActivation forward(int unit, const at::Tensor& params, const at::Tensor& borrowed,
                         const at::Tensor& input, const at::Tensor& targets,
                         scenario::Recompute recompute) const;
  /// Rebuilds what forward dropped, from the same parameters (re-gathered when sharded).
  void recompute(UnitActivation& act, const at::Tensor& params) const;
  /// Backward of one unit. `grad_output`: gradient of the hidden output (boundary dtype), or
  /// for the head the factor the loss is scaled by (loss scale / micro-batches in the step).
  UnitGrads backward(UnitActivation& act, const at::Tensor& grad_output) const;

  /// The hidden state as it crosses a unit boundary (boundary dtype, contiguous).
  at::Tensor to_boundary(const at::Tensor& hidden) const;

 private:
  friend class TpUnitRun;
  /// A unit's parameters as one tensor per slot (layout order), views of the flat buffer.
  using Parts = std::vector<at::Tensor>;
  at::Tensor param_leaf(const at::Tensor& params) const;
  Parts split_params(const at::Tensor& flat, const UnitLayout& l) const;
  const at::Tensor& view(const Parts& p, const UnitLayout& l, const char* name) const;
  at::Tensor embedding_forward(const Parts& p, const at::Tensor& tokens) const;
  at::Tensor norm(const Parts& p, const UnitLayout& l, const std::string& name,
                  const at::Tensor& x) const;
  at::Tensor linear(const Parts& p, const UnitLayout& l, const std::string& name,
                    const at::Tensor& x) const;
  void qkv(const Parts& p, const UnitLayout& l, const at::Tensor& x, at::Tensor& q,
           at::Tensor& k, at::Tensor& v) const;
  /// Rotary positions on [b, heads, s, head_dim] queries or keys.
  at::Tensor rotate(const at::Tensor& t) const;
  at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const;
  at::Tensor block_rest(const Parts& p, const UnitLayout& l, const at::Tensor& x,
                        const at::Tensor& core) const;
  at::Tensor head_forward(const Parts& p, const at::Tensor& word_table, const at::Tensor& x,
                          const at::Tensor& targets) const;
  void run_forward(UnitActivation& act, bool keep_core_graph) const;

  scenario::ModelSpec model_;
  std::int64_t seq_len_;
  TpShard tp_;
  bool sequence_parallel_ = false;
  std::vector<UnitLayout> layouts_;
  Numerics numerics_;
  c10::Device device_;
  at::Tensor causal_mask_;          ///< [s, s], true above the diagonal
  at::Tensor rope_cos_, rope_sin_;  ///< [s, head_dim/2] for rotary positions
};

}  // namespace stratagem::runtime
