#pragma once
// What every pass of the plan builder shares: the scenario, the plan being filled (layout,
// groups; ops are added only by lowering drafts, draft.hpp), and each rank's process groups
// as the mesh pass made them. Helpers here are pure reads of the scenario and the layout.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/plan/builder.hpp"
#include "engine/plan/plan.hpp"

namespace stratagem::workload {
class TpChains;
}

namespace stratagem::plan {

struct BuildContext {
  BuildContext(const scenario::Scenario& s, const BuildOptions& o) : scenario(s), options(o) {}

  const scenario::Scenario& scenario;
  BuildOptions options;
  StepPlan plan;

  // Per rank: index into plan.groups, -1 where the rank has no such group.
  int world_group = 0;
  /// Data-parallel replicas of (stage, tp index), with every context-parallel rank of each:
  /// gradients are reduced and ZeRO/FSDP shard over dp × cp (Megatron-LM's data-parallel group
  /// with context parallelism; torchtitan's dp_shard_cp mesh).
  std::vector<int> dp_group;
  std::vector<int> shard_group;    ///< who shares the sharded states (dp, or node for HYBRID)
  std::vector<int> replica_group;  ///< HYBRID_SHARD: the same shard in every node
  std::vector<int> tied_group;     ///< first and last stage (tied embeddings, pp > 1)
  std::vector<int> tp_group;       ///< tensor-parallel peers of (stage, dp index)
  std::vector<int> cp_group;       ///< context-parallel ring of (stage, dp index, tp index)
  // MoE models (engine/scenario/expert_mesh.hpp): the stage's ranks as etp × ep × edp.
  std::vector<int> ep_group;      ///< expert-parallel peers of (stage, edp, etp): all-to-all
  std::vector<int> etp_group;     ///< expert-tensor-parallel peers of (stage, edp, ep)
  std::vector<int> expert_group;  ///< ep × etp of (stage, edp): the allgather dispatcher's
  /// Expert-data-parallel replicas of (stage, ep, etp): the routed experts' gradients are
  /// reduced, and their sharded states split, over it.
  std::vector<int> edp_group;
  /// The tensor-, context- and expert-parallel chains of the scenario's units, made once for
  /// every rank by the tensor_parallel pass (an MoE block's come from its kernel graph).
  std::shared_ptr<const workload::TpChains> tp_chains;

  const scenario::StrategySpec& strategy() const { return scenario.strategy; }
  const Layout& layout() const { return plan.layout; }
  int group_size(int g) const { return static_cast<int>(plan.groups[g].ranks.size()); }
  /// Bytes per element of parameters, gradients and activations as computed.
  double compute_bytes() const {
    return scenario::compute_param_bytes(scenario.strategy.precision);
  }
  /// Parameters of the units a stage runs (all its chunks), on one tensor-parallel rank.
  double stage_params(int stage) const;
  /// Of those, the routed experts' (MoE blocks).
  double stage_expert_params(int stage) const;
  /// Parameters whose optimizer states `rank` holds: its stage's, each sharded over its group
  /// when the optimizer is (the routed experts' over the expert-data-parallel group).
  double optimizer_params(int rank) const;
  double units_params(int u0, int u1) const;
  double units_act(int u0, int u1, bool full) const;
  /// Parameters are gathered for compute (ZeRO-3/FSDP with more than one data-parallel rank).
  bool gathers_params(int rank) const;
  /// Gradients are reduced across data-parallel replicas (or, of the routed experts, across
  /// expert-data-parallel ones).
  bool syncs_grads(int rank) const {
    return group_size(dp_group[rank]) > 1 || syncs_expert_grads(rank);
  }
  bool syncs_expert_grads(int rank) const {
    return edp_group[rank] >= 0 && group_size(edp_group[rank]) > 1;
  }
  /// Gradients are reduce-scattered into shards (ZeRO-2+, FSDP).
  bool shards_grads(int rank) const;

  /// Adds a group of ranks (sorted; one group per rank set) and returns its index.
  int add_group(std::vector<int> ranks, const std::string& label);

 private:
  /// Groups by their lowest member: first_member_head_[rank] is the newest group starting at
  /// that rank, same_first_next_[group] the one before it (-1: none). A rank starts only a
  /// handful of groups (world, its dp, tp, cp, tied ...), so finding an identical one is a
  /// short walk, and the members are stored once, in the plan; a hash table of a million
  /// ranks' groups was a tenth of building a million-GPU plan.
  std::vector<int> first_member_head_;
  std::vector<int> same_first_next_;
};

}  // namespace stratagem::plan
