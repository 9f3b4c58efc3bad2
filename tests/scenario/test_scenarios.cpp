// Shipped scenarios (scenarios/*.json): every one parses, the set covers every strategy, and
// each one's batch arithmetic and layout is what its name says.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {
namespace {

TEST(ShippedScenarios, EveryOneParses) {
  const auto names = shipped_scenario_names();
  ASSERT_GE(names.size(), 11u);  // default + at least 10 ready scenarios
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    Scenario s;
    ASSERT_NO_THROW(s = load_scenario(name));
    EXPECT_EQ(s.source, name);
    EXPECT_EQ(s.world_size(), s.cluster.world_size());
    EXPECT_EQ(s.training.global_batch,
              std::int64_t{s.strategy.micro_batch_size} * s.strategy.grad_accum * s.strategy.dp);
    // The JSON form re-parses to the same scenario.
    const Scenario again = parse_scenario(to_json(s), name);
    EXPECT_EQ(to_json(again), to_json(s));
  }
}

TEST(ShippedScenarios, DefaultIsKept) {
  const Scenario s = load_scenario("default");
  EXPECT_EQ(s.model.name, "gpt2-xl");
  EXPECT_EQ(s.cluster.name, "dgx-a100-80gb");
  EXPECT_EQ(s.strategy.sharding, Sharding::zero2);
  EXPECT_EQ(s.strategy.precision, Precision::bf16);
  EXPECT_EQ(s.training.global_batch, 256);
}

TEST(ShippedScenarios, CoverEveryStrategy) {
  std::set<std::string> seen;
  for (const auto& name : shipped_scenario_names()) {
    const Scenario s = load_scenario(name);
    const auto& st = s.strategy;
    seen.insert(std::string("sharding:") + to_string(st.sharding));
    seen.insert(std::string("precision:") + to_string(st.precision));
    seen.insert(std::string("recompute:") + to_string(st.recompute));
    if (st.pp > 1) seen.insert(std::string("schedule:") + to_string(st.schedule));
    if (st.pp > 1 && st.dp > 1) seen.insert("dp x pp");
    if (st.offload_optimizer == Offload::cpu) seen.insert("offload");
    if (s.cluster.nodes > 1) seen.insert("multi-node");
    if (s.model.kind == ModelKind::encoder) seen.insert("encoder");
  }
  for (const char* want : {"sharding:none",
                           "sharding:zero1",
                           "sharding:zero2",
                           "sharding:zero3",
                           "sharding:FULL_SHARD",
                           "sharding:SHARD_GRAD_OP",
                           "sharding:HYBRID_SHARD",
                           "precision:no",
                           "precision:fp16",
                           "precision:bf16",
                           "recompute:none",
                           "recompute:selective",
                           "recompute:full",
                           "schedule:gpipe",
                           "schedule:1f1b",
                           "schedule:interleaved",
                           "dp x pp",
                           "offload",
                           "multi-node",
                           "encoder"}) {
    EXPECT_TRUE(seen.count(want)) << "no shipped scenario covers " << want;
  }
}

TEST(ShippedScenarios, NamedOnesSayWhatTheyAre) {
  const Scenario ddp = load_scenario("ddp-gpt2-xl-8xa100");
  EXPECT_EQ(ddp.strategy.sharding, Sharding::none);
  EXPECT_EQ(ddp.strategy.precision, Precision::fp16);
  EXPECT_EQ(ddp.strategy.loss_scale.initial_scale_power, 16);
  EXPECT_EQ(ddp.strategy.loss_scale.loss_scale_window, 1000);
  EXPECT_EQ(ddp.strategy.loss_scale.hysteresis, 2);
  EXPECT_EQ(ddp.strategy.loss_scale.min_loss_scale, 1.0);

  const Scenario hybrid = load_scenario("fsdp-hybrid-shard-llama2-13b-2x8xa100");
  EXPECT_EQ(hybrid.cluster.nodes, 2);
  EXPECT_EQ(hybrid.strategy.dp, 16);
  EXPECT_EQ(hybrid.strategy.sharding, Sharding::fsdp_hybrid_shard);

  const Scenario inter = load_scenario("interleaved-dp2-pp4-gpt3-2.7b-8xa100");
  EXPECT_EQ(inter.strategy.schedule, Schedule::interleaved);
  EXPECT_EQ(inter.strategy.chunks, 2);
  EXPECT_EQ(inter.model.layers / inter.strategy.pp % inter.strategy.chunks, 0);
  EXPECT_EQ(inter.strategy.grad_accum % inter.strategy.pp, 0);

  const Scenario gpipe = load_scenario("gpipe-gpt3-2.7b-8xa100");
  EXPECT_EQ(gpipe.strategy.pp, 8);
  EXPECT_EQ(gpipe.strategy.schedule, Schedule::gpipe);

  const Scenario offload = load_scenario("zero2-offload-llama2-13b-8xa100");
  EXPECT_EQ(offload.strategy.offload_optimizer, Offload::cpu);

  const Scenario h100 = load_scenario("fsdp-full-shard-llama3-8b-8xh100");
  EXPECT_EQ(h100.cluster.gpu.name, "h100-80gb");
}

TEST(ShippedScenarios, UnknownNameSuggestsAndLists) {
  try {
    load_scenario("zero1-gpt2-xl-8xa10");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.path(), "zero1-gpt2-xl-8xa10");
    EXPECT_NE(what.find("did you mean"), std::string::npos) << what;
    EXPECT_NE(what.find("default"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace stratagem::scenario
