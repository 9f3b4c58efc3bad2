#pragma once
// What a simulation reads from the plan while its event loop runs, gathered once in one
// sequential pass over the ops: per op its rank, kind, activity, memory-effect range and (for
// compute) its duration on an idle device; the successors of each op (its dependants and the
// next op on its stream); the members of each activity in one flat array; the shape of each
// process group. The loop then never touches the plan's ops themselves (variants of ~150
// bytes spread over tens of megabytes for a 3D plan), whose cache misses were most of a
// simulation's time. Checks the plan's consistency (ids, instances, transfers) on the way.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/plan/plan.hpp"
#include "sim/cost_models.hpp"
#include "sim/network_model.hpp"

namespace stratagem::sim {

enum class Category : std::uint8_t { compute, collective, p2p };

struct OpInfo {
  double duration_s = 0;      ///< compute: its cost model's duration; else 0
  std::int32_t rank = 0;
  std::int32_t activity = -1;  ///< collective instance, or instances + transfer; -1: compute
  std::uint32_t mem_begin = 0, mem_count = 0;
  Category category = Category::compute;
  bool on_host = false;        ///< compute on the host's CPUs (optimizer offload)
  std::uint8_t comm_op = 0;    ///< scenario::CommOp of a collective or transfer (sendrecv)
};

/// A collective instance (group ≥ 0) or a transfer (group −1): what its cost needs.
struct ActivityInfo {
  double bytes = 0;
  std::int32_t group = -1;
  plan::CollectiveKind kind = plan::CollectiveKind::all_reduce;
  bool same_domain = false;  ///< a transfer between ranks of one NVLink domain
  /// A transfer under Megatron-LM's scatter/gather (plan::Transfer::gather): after the
  /// message, the receiver's TP group of this many ranks all-gathers the tensor.
  std::int32_t gather = 1;
};

class PlanIndex {
 public:
  PlanIndex(const plan::StepPlan& plan, const CostModels& models);

  std::vector<OpInfo> ops;
  /// Per op: unfinished deps plus its unfinished stream predecessor, before the run.
  std::vector<std::int32_t> pending;
  int instances = 0;  ///< activities [0, instances) are collective instances, then transfers
  int activities() const { return static_cast<int>(member_begin.size()) - 1; }
  /// Ops that depend on op `id` or follow it on its stream.
  std::span<const plan::OpId> successors(plan::OpId id) const {
    return {succ_.data() + succ_begin_[id], succ_begin_[id + 1] - succ_begin_[id]};
  }
  /// An instance's ops in group order, or a transfer's send then recv.
  std::span<const plan::OpId> members(int a) const {
    return {members_.data() + member_begin[a], member_begin[a + 1] - member_begin[a]};
  }
  std::vector<std::uint32_t> member_begin;
  std::vector<ActivityInfo> activity;
  std::vector<GroupShape> group_shape;  ///< per plan group, over the NVLink domains

 private:
  std::vector<std::uint32_t> succ_begin_;
  std::vector<plan::OpId> succ_;
  std::vector<plan::OpId> members_;
};

}  // namespace stratagem::sim
