#include "engine/plan/build_context.hpp"

#include <algorithm>

namespace stratagem::plan {

double BuildContext::stage_params(int stage) const {
  double p = 0;
  for (const auto& [b, e] : plan.layout.stage_chunk_units[stage]) p += units_params(b, e);
  return p;
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
  return spec::shards_parameters(scenario.strategy.sharding) && syncs_grads(rank);
}

bool BuildContext::shards_grads(int rank) const {
  return spec::shards_gradients(scenario.strategy.sharding) && syncs_grads(rank);
}

int BuildContext::add_group(std::vector<int> ranks, const std::string& label) {
  std::sort(ranks.begin(), ranks.end());
  auto it = group_index_.find(ranks);
  if (it != group_index_.end()) return it->second;
  Group g;
  g.ranks = ranks;
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
  plan.groups.push_back(std::move(g));
  const int index = static_cast<int>(plan.groups.size()) - 1;
  group_index_.emplace(plan.groups.back().ranks, index);
  return index;
}

}  // namespace stratagem::plan
