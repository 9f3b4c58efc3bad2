#pragma once
// Expert parallelism laid out as Megatron-Core lays it out (megatron/core/parallel_state.py,
// initialize_model_parallel: the expert RankGenerator with order "tp-ep-dp-pp"): in each
// pipeline stage the tp × cp × dp ranks that share a stage's dense layers are regrouped for the
// MoE blocks into etp × ep × edp,
//   expert tensor parallel (etp, fastest) × expert parallel (ep) × expert data parallel (edp),
//   edp = dp · cp · tp / (ep · etp),
// so the expert-parallel group of a stage is ep ranks etp apart in rank order, each holding
// experts / ep of every MoE block's experts, each expert's MLP split over etp ranks; expert
// gradients are reduced over the edp group, dense ones over dp × cp as before.
// Checked here (each a SpecError naming the key): ep and etp need model.moe; ep divides the
// experts; ep · etp divides dp · cp · tp; etp divides the experts' MLP widths and fits the NVLink
// domain as tp does; with tp > 1 and ep > 1, sequence parallelism (Megatron-LM's arguments.py
// requires it); moe_load_imbalance at most experts / top_k.
#include <cstdint>

#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {

/// A rank's place among the experts of its pipeline stage.
struct ExpertCoord {
  int stage = 0;
  int edp = 0;  ///< index in the expert-data-parallel group
  int ep = 0;   ///< index in the expert-parallel group: which experts / ep it holds
  int etp = 0;  ///< index in the expert-tensor-parallel group: which slice of each expert's MLP
};

struct ExpertMesh {
  int etp = 1, ep = 1, edp = 1;  // the pipeline stage is the rank over ranks_per_stage()

  int ranks_per_stage() const { return etp * ep * edp; }
  ExpertCoord coord_of(int rank) const {
    ExpertCoord c;
    const int local = rank % ranks_per_stage();
    c.stage = rank / ranks_per_stage();
    c.etp = local % etp;
    c.ep = (local / etp) % ep;
    c.edp = local / (etp * ep);
    return c;
  }
  int rank_of(const ExpertCoord& c) const {
    return c.stage * ranks_per_stage() + (c.edp * ep + c.ep) * etp + c.etp;
  }
};

/// The strategy's expert mesh (ep = etp = 1: every rank its own expert-data-parallel replica).
ExpertMesh expert_mesh(const StrategySpec& st);

/// validate_mesh's expert-parallel rules (see above).
void validate_expert_parallel(const Scenario& s);

/// What the planner does not model yet for an MoE model, by key: sharding beyond the
/// distributed optimizer (ZeRO-1; ZeRO-2/3 and FSDP would shard the experts over the expert-
/// data-parallel group), shared experts under tensor parallelism (their all-gather and reduce-
/// scatter beside the dispatch), torchtitan's per-op recomputation (its MoE save list).
UnsimulatedFeature unsimulated_moe_strategy(const Scenario& s);

/// What one rank holds and moves for one MoE block with this layout, per micro-batch, with the
/// load balanced (Megatron-Core's token dispatchers, megatron/core/transformer/moe/
/// token_dispatcher.py):
///  * alltoall: the rank sends each routed token copy to the ep rank holding its expert,
///    routed · h · e bytes of which (ep − 1)/ep leave it; with etp > 1 the copies an expert
///    receives are then all-gathered over its etp ranks, (etp − 1) · routed · h · e more into
///    the rank;
///  * allgather: the ep × etp group gathers every rank's tokens (not copies): ep · etp · tokens ·
///    h · e, of which all but its own arrive over the links.
/// The combine moves the same bytes back (a reduce-scatter for allgather), backward both again.
struct ExpertRankLoad {
  std::int64_t local_experts = 0;  ///< experts / ep
  double expert_params = 0;   ///< its routed experts' parameters: local experts × expert / etp
  double tokens = 0;          ///< the block's tokens on the rank: s·b / cp (/ tp with SP)
  double routed = 0;          ///< token copies it routes: tokens · top_k
  double dispatch_bytes = 0;  ///< the dispatch's payload at the rank (above)
  double dispatch_bytes_off_rank = 0;  ///< the part that crosses a link
  /// Rows of the busiest local expert's GEMMs: the group's routed copies over the experts,
  /// ep · etp · routed / experts, times moe_load_imbalance (at most model.moe.capacity_factor,
  /// beyond which an expert drops tokens).
  double expert_gemm_rows = 0;
};
ExpertRankLoad expert_rank_load(const Scenario& s, double bytes_per_element);

}  // namespace stratagem::scenario
