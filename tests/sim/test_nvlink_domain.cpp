// An NVLink domain larger than a node (GB200 NVL72: 18 trays of 4 GPUs): groups inside it use
// the intra-node links, so FSDP over the rack is as fast as inside one box; the same rack
// described as separate trays pays the network for every gather and reduce-scatter.
#include <gtest/gtest.h>

#include "engine/plan/builder.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/simulator.hpp"

namespace stratagem {
namespace {

scenario::Scenario rack(int domain_gpus) {
  nlohmann::json j = {
      {"model", "llama2-7b"},
      {"cluster", {{"preset", "gb200-nvl72"}, {"nvlink_domain_gpus", domain_gpus}}},
      {"strategy",
       {{"dp", 72}, {"micro_batch_size", 1}, {"grad_accum", 1}, {"sharding", "FULL_SHARD"},
        {"mixed_precision", "bf16"}}},
      {"training", {{"seq_len", 4096}}}};
  return scenario::parse_scenario(j);
}

TEST(NvlinkDomain, GroupsInsideTheDomainStayOnNvlink) {
  const auto one = plan::build_plan(rack(72));
  const auto trays = plan::build_plan(rack(4));
  for (const auto* p : {&one, &trays}) {
    bool found = false;
    for (const auto& g : p->groups) {
      if (g.ranks.size() != 72) continue;
      found = true;
      EXPECT_EQ(g.nodes_spanned, p == &one ? 1 : 18) << g.label;
      EXPECT_EQ(g.intra_node, p == &one) << g.label;
    }
    EXPECT_TRUE(found);
  }
  const auto run = [](const scenario::Scenario& s) {
    return sim::Simulator().run(plan::build_plan(s), sim::make_cost_models(s)).metrics;
  };
  const auto in_domain = run(rack(72)), across = run(rack(4));
  EXPECT_LT(in_domain.step_time_s, across.step_time_s);
  EXPECT_LT(in_domain.exposed_comm_s, across.exposed_comm_s);
}

}  // namespace
}  // namespace stratagem
