#include "engine/plan/build_context.hpp"

#include <algorithm>

#include "engine/scenario/error.hpp"

namespace stratagem::plan {

double BuildContext::stage_params(int stage) const {
  double p = 0;
  for (const auto& [b, e] : plan.layout.stage_chunk_units[stage]) p += units_params(b, e);
  return p;
}

double BuildContext::stage_expert_params(int stage) const {
  double p = 0;
  for (const auto& [b, e] : plan.layout.stage_chunk_units[stage]) {
    for (int u = b; u < e; ++u) p += plan.layout.units[u].expert_params;
  }
  return p;
}

double BuildContext::optimizer_params(int rank) const {
  const int stage = plan.layout.coords[rank].stage;
  const double psi = stage_params(stage);
  if (!scenario::shards_optimizer(scenario.strategy.sharding)) return psi;
  const double experts = stage_expert_params(stage);
  if (experts <= 0) return psi / group_size(shard_group[rank]);
  return (psi - experts) / group_size(shard_group[rank]) + experts / group_size(edp_group[rank]);
}

double BuildContext::units_params(int u0, int u1) const {
  double p = 0;
  for (int u = u0; u < u1; ++u) p += plan.layout.units[u].params;
  return p;
}

double BuildContext::units_act(int u0, int u1, bool full) const {
  double b = 0;
  for (int u = u0; u < u1; ++u) {
    b += full ? plan.layout.units[u].full_act_bytes : plan.layout.units[u].act_bytes;
  }
  return b;
}

bool BuildContext::gathers_params(int rank) const {
  return scenario::shards_parameters(scenario.strategy.sharding) && syncs_grads(rank);
}

bool BuildContext::shards_grads(int rank) const {
  return scenario::shards_gradients(scenario.strategy.sharding) && syncs_grads(rank);
}

int BuildContext::add_group(std::vector<int> ranks, const std::string& label) {
  if (!std::is_sorted(ranks.begin(), ranks.end())) std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) throw RuntimeError("plan: a process group without ranks (" + label + ")");
  const auto first = static_cast<std::size_t>(ranks.front());
  if (first_member_head_.size() <= first) {
    first_member_head_.resize(std::max(first + 1, plan.layout.coords.size()), -1);
  }
  for (int g = first_member_head_[first]; g >= 0;
       g = same_first_next_[static_cast<std::size_t>(g)]) {
    if (plan.groups[static_cast<std::size_t>(g)].ranks == ranks) return g;
  }
  Group g;
  g.label = label;
  // Nodes spanned, counting an NVLink domain of several nodes (NVL72) as one.
  int last_node = -1, spanned = 0;
  for (int r : ranks) {
    const int node = scenario.cluster.domain_of_node(plan.layout.coords[r].node);
    if (node != last_node) ++spanned;  // ranks are sorted, nodes are contiguous
    last_node = node;
  }
  g.nodes_spanned = spanned;
  g.intra_node = spanned == 1;
  g.ranks = std::move(ranks);
  plan.groups.push_back(std::move(g));
  const int index = static_cast<int>(plan.groups.size()) - 1;
  same_first_next_.push_back(first_member_head_[first]);
  first_member_head_[first] = index;
  return index;
}

}  // namespace stratagem::plan
