#pragma once
// Which parameters each model unit of the real runtime owns, where they sit in the unit's
// flat buffer and how they are initialised. No LibTorch here: the executor sizes buffers
// and the tests check the counts against the plan's units without building tensors.
//
// Units follow the plan (engine/plan/plan.hpp): 0 = embedding (token + learned position
// table), 1..L = transformer blocks (pre-norm attention and MLP), L+1 = head (final norm, the
// LM head when untied, and a copy of the word embeddings when they are tied across a
// pipeline, as Megatron-LM keeps one on the last stage). The element counts equal
// scenario::embedding_params, scenario::block_params and scenario::head_params exactly.
//
// With tensor parallelism (tp > 1) a unit holds one TP rank's share, as Megatron-LM splits
// it (and as scenario::embedding_params_tp, block_params_tp and head_params_tp count it): the
// QKV, MLP-in (gate and up) weights and their biases by output rows (column-parallel: the
// rank's heads, K/V heads and FFN columns), the attention projection and MLP-out weights by
// input columns (row-parallel; their biases whole), the word table and LM head by rows of
// the vocabulary padded to a multiple of 128·tp (vocab-parallel); norms and the position
// table stay whole on every rank. A slice's initial values are the matching slice of the
// whole parameter's, so every tp starts from the same model.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/scenario/model.hpp"
#include "engine/scenario/strategy.hpp"

namespace stratagem::runtime {

/// How a parameter starts (GPT-2 / nanoGPT initialisation).
enum class InitKind {
  normal,           ///< N(0, 0.02²)
  normal_residual,  ///< N(0, (0.02/√(2L))²): projections that write into the residual stream
  zeros,            ///< biases, norm shifts
  ones,             ///< norm scales
};

struct ParamSlot {
  std::string name;  ///< "wte", "attn.wq", "mlp.b_in", ...
  std::vector<std::int64_t> shape;
  std::int64_t offset = 0;  ///< elements into the unit's flat buffer
  std::int64_t numel = 0;
  InitKind init = InitKind::normal;
  /// Which random stream fills it: the same key gives the same values on every rank, so the
  /// head's copy of tied word embeddings uses the embedding's key.
  std::string init_key;
  /// Tensor parallelism: the dimension of the whole parameter this slot holds the
  /// `shard_index`-th of `shards` equal slices of (−1: the whole parameter), its shape, and
  /// how many of its rows are drawn (vocabulary padding rows start at 0; −1: all rows).
  int shard_dim = -1;
  int shard_index = 0, shards = 1;
  std::vector<std::int64_t> full_shape;
  std::int64_t drawn_rows = -1;
  /// Sequence parallelism: computed from the rank's part of the sequence, so its gradient is
  /// summed over the TP group before the optimizer (norms, row-parallel biases).
  bool sequence_partial = false;
};

/// One rank's place in the tensor-parallel group.
struct TpShard {
  int size = 1;   ///< tp
  int index = 0;  ///< the rank's position in its TP group
};

struct UnitLayout {
  std::vector<ParamSlot> slots;
  std::int64_t numel = 0;
  const ParamSlot& slot(const std::string& name) const;
  bool has(const std::string& name) const;
};

/// Throws SpecError for model shapes the runtime cannot train: encoders, the quick
/// {"params": P} form (no shape), token-type embeddings, poolers.
void check_runtime_model(const scenario::ModelSpec& model);

/// Throws SpecError for strategies the runtime does not execute: context parallelism, fp8,
/// torchtitan's per-op recomputation, the zero-bubble schedules.
void check_runtime_strategy(const scenario::StrategySpec& strategy);

/// Units 0..L+1 of one TP rank. `head_owns_embedding_copy`: tied embeddings split over a
/// pipeline (pp > 1).
std::vector<UnitLayout> gpt_unit_layouts(const scenario::ModelSpec& model,
                                         bool head_owns_embedding_copy, TpShard tp = {});

/// The vocabulary rows one TP rank's word table and LM head hold (padded vocabulary / tp).
std::int64_t vocab_shard_rows(const scenario::ModelSpec& model, int tp);

/// The per-parameter seed of `slot` for a run seeded with `seed` (FNV-1a of the key, mixed
/// with the seed): the initial values depend only on the seed and the parameter's identity.
std::uint64_t init_seed(std::uint64_t seed, const ParamSlot& slot);

/// The standard deviation `slot` is drawn with (0 for constants).
double init_std(const ParamSlot& slot, std::int64_t layers);

}  // namespace stratagem::runtime
