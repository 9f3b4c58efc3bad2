#pragma once
// The parallelism mesh of a scenario checked in one place, as torchtitan's ParallelDims does:
// world = dp × tp × cp × pp must equal the cluster's GPUs (computed without overflow), and each
// axis must fit the model and the cluster:
//  * tp divides heads, kv_heads (each rank holds whole GQA groups), ffn_hidden and
//    gpus_per_node or the NVLink domain (NVL72) (a TP group spanning nodes would put two
//    all-reduces per block per direction on the inter-node links, an order of magnitude slower than
//    NVLink, so it is refused, as Megatron-LM's users keep TP inside a node);
//  * tp needs the model's transformer shape (a quick-form or measured model has no heads or
//    MLP to split);
//  * sequence_parallel needs tp > 1 and seq_len divisible by tp;
//  * cp (context parallelism) needs the transformer shape and seq_len divisible by 2·cp (the
//    causal load-balancing split), and by 2·cp·tp with sequence parallelism;
//  * fp8 needs a GPU with an fp8 peak;
//  * HYBRID_SHARD needs at least two data-parallel ranks of a TP rank per node to shard over.
// Each violation is one SpecError naming the key's JSON path.
#include <optional>

#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {

void validate_mesh(const Scenario& s);

/// Why `tp` cannot split `m`'s layers, as the SpecError validate_mesh throws (a model without
/// its shape; heads, kv_heads or ffn_hidden not divisible), or nullopt when it can.
std::optional<SpecError> tensor_parallel_model_refusal(const ModelSpec& m, int tp);

/// A rank's place in the mesh: its index on each parallel axis.
struct MeshCoord {
  int stage = 0;  ///< pipeline stage
  int dp = 0;     ///< index in the data-parallel group
  int cp = 0;     ///< index in the context-parallel group
  int tp = 0;     ///< index in the tensor-parallel group
};

/// The mesh's extent on each axis and the one rank order every part of Stratagem uses
/// (plan, memory model, results, viewer, Accelerator). Ranks are numbered as Megatron-LM does,
/// tensor-parallel fastest, then context-parallel, then data-parallel, then pipeline:
/// rank = ((stage · dp + dp_index) · cp + cp_index) · tp + tp_index, so a tensor-parallel
/// group of ≤ gpus_per_node stays inside a node (and, with tp = cp = 1, a data-parallel group
/// of ≤ a node).
struct MeshShape {
  int dp = 1, pp = 1, tp = 1, cp = 1;

  int rank_of(int stage, int dp_index, int tp_index = 0, int cp_index = 0) const {
    return ((stage * dp + dp_index) * cp + cp_index) * tp + tp_index;
  }
  int rank_of(const MeshCoord& c) const { return rank_of(c.stage, c.dp, c.tp, c.cp); }
  MeshCoord coord_of(int rank) const {
    MeshCoord c;
    c.tp = rank % tp;
    c.cp = (rank / tp) % cp;
    c.dp = (rank / (tp * cp)) % dp;
    c.stage = rank / (tp * cp * dp);
    return c;
  }
};

/// The scenario strategy's mesh.
inline MeshShape mesh_shape(const StrategySpec& st) {
  return {st.dp, st.pp, st.tp, st.cp};
}

}  // namespace stratagem::scenario
